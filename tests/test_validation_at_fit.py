"""Validation at fit, not at first use: scikit-learn's own tests, ported.

Each case cites the scikit-learn test it comes from (sklearn/tests/test_naive_bayes.py,
test_discriminant_analysis.py, linear_model/tests/test_logistic.py). Where scikit-learn
refuses an input (invalid priors, a singular covariance, a one-row class for QDA), sqlnb
refuses it when the model is fitted, in one line naming the class or column and the fix;
where scikit-learn accepts (a one-row class for Gaussian naive Bayes, LDA and logistic
regression, priors as a list, tuple or array), sqlnb gives the same probabilities. A
fitted model keeps its own copy of every array or mapping it is given.
"""

from __future__ import annotations

import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import BernoulliNB, GaussianNB, MultinomialNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import sqlnb
from conftest import frame, scores
from sqlnb import SqlnbError
from support.cli import assert_error, invoke, mixed_table, snapshot, write_parquet

TOL = 1e-9

# scikit-learn's toy data (test_naive_bayes.py: X, y; test_discriminant_analysis.py: X6,
# y6, X2, y4), as float64.
X = np.array([[-2, -1], [-1, -1], [-1, -2], [1, 1], [1, 2], [2, 1]], dtype=float)
y = np.array([1, 1, 1, 2, 2, 2])
X6 = np.array([[0, 0], [-2, -2], [-2, -1], [-1, -1], [-1, -2], [1, 3], [1, 2], [2, 1], [2, 2]], dtype=float)
y6 = np.array([1, 1, 1, 1, 1, 2, 2, 2, 2])
X2 = np.array([[-3, 0], [-2, 0], [-1, 0], [-1, 0], [0, 0], [1, 0], [1, 0], [2, 0], [3, 0]], dtype=float)
y4 = np.array([1, 1, 1, 1, 1, 1, 1, 1, 2])


def proba(model, Xs):
    return scores(model, Xs, outputs=("proba",))["proba"]


# -- naive Bayes class priors ------------------------------------------------------------------

@pytest.mark.parametrize("container", [np.array, list, tuple])
def test_gnb_priors_given_as_an_array_list_or_tuple(container):
    # sklearn: test_gnb_priors, test_gnb_prior_large_bias (an array once raised a raw
    # AttributeError in sqlnb, a list or tuple failed at first use)
    sk = GaussianNB(priors=np.array([0.3, 0.7])).fit(X, y)
    model = sqlnb.fit(frame(X, y), "y", class_prior=container([0.3, 0.7]))
    Xt = np.array([[-0.1, -0.1], *X])
    np.testing.assert_allclose(proba(model, Xt), sk.predict_proba(Xt), atol=TOL, rtol=0)
    np.testing.assert_allclose(proba(model, Xt[:1]), [[0.825303662161683, 0.174696337838317]], atol=1e-8)
    np.testing.assert_allclose(np.exp(model.class_log_prior()), [0.3, 0.7])
    biased = sqlnb.fit(frame(X, y), "y", class_prior=container([0.01, 0.99]))
    assert scores(biased, np.array([[-0.1, -0.1]]))["prediction"] == [2]


@pytest.mark.parametrize("prior, message", [
    (np.array([-1.0, 2.0]), "class prior of class 1 is -1.0; a probability must be a finite number >= 0"),  # test_gnb_neg_priors
    (np.array([0.25, 0.25, 0.25, 0.25]), "gives 4 probabilities for 2 classes"),   # test_gnb_wrong_nb_priors
    (np.array([2.0, 1.0]), "class prior sums to 3, not 1"),                        # test_gnb_prior_greater_one
    ([0.5, float("nan")], "class prior of class 2 is nan"),
    ({1: 0.5, 3: 0.5}, "names 3, which is not a class of the training data"),
    ({1: 1.0}, "must name every class: it gives no probability for 2"),
    (np.array([[0.5, 0.5]]), "must be 1-D"),
    (0.5, "a class prior is 'fitted', 'uniform', a mapping"),
])
def test_gnb_invalid_priors_fail_at_fit(prior, message):
    # sklearn: test_gnb_neg_priors, test_gnb_wrong_nb_priors, test_gnb_prior_greater_one
    # (GaussianNB raises in fit; sqlnb fitted these and failed at first use)
    with pytest.raises(SqlnbError, match=message):
        sqlnb.fit(frame(X, y), "y", class_prior=prior)


@pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning")  # sklearn's ln 0 prior
def test_gnb_priors_sum_isclose_with_one_row_per_class():
    # sklearn: test_gnb_priors_sum_isclose: ten one-row classes, a zero
    # prior, a sum that is 1 only up to rounding. GaussianNB accepts one-row classes (the
    # variance is the var_smoothing floor): so does sqlnb, with the same numbers.
    X10 = np.array([[-1, -1], [-2, -1], [-3, -2], [-4, -5], [-5, -4], [1, 1], [2, 1], [3, 2], [4, 4], [5, 5]],
                   dtype=float)
    priors = np.array([0.08, 0.14, 0.03, 0.16, 0.11, 0.16, 0.07, 0.14, 0.11, 0.0])
    Y = np.arange(1, 11)
    sk = GaussianNB(priors=priors).fit(X10, Y)
    model = sqlnb.fit(frame(X10, Y), "y", class_prior=priors)
    Xt = X10 + 0.25
    np.testing.assert_allclose(proba(model, Xt), sk.predict_proba(Xt), atol=TOL, rtol=0)


@pytest.mark.parametrize("family, sk_cls", [("bernoulli", BernoulliNB), ("multinomial", MultinomialNB)])
def test_discretenb_provide_prior(family, sk_cls):
    # sklearn: test_discretenb_provide_prior: the given prior is used; one whose length does
    # not match the classes raises at fit ("Number of priors must match number of classes")
    Xd = np.array([[0], [0], [1]], dtype=float)
    sk = sk_cls(class_prior=[0.5, 0.5]).fit(Xd, [0, 0, 1])
    model = sqlnb.fit(frame(Xd, [0, 0, 1]), "y", kind=family, class_prior=[0.5, 0.5])
    np.testing.assert_allclose(model.class_log_prior(), sk.class_log_prior_, atol=1e-15)
    np.testing.assert_allclose(proba(model, Xd), sk.predict_proba(Xd), atol=TOL, rtol=0)
    with pytest.raises(SqlnbError, match="gives 2 probabilities for 3 classes"):
        sqlnb.fit(frame(np.array([[0], [1], [2]], dtype=float), [0, 1, 2]), "y", kind=family, class_prior=[0.5, 0.5])
    with pytest.raises(SqlnbError, match="gives no probability for 2"):
        sqlnb.fit(frame(np.array([[0], [1], [2]], dtype=float), [0, 1, 2]), "y", kind=family,
                  class_prior={0: 0.5, 1: 0.5})


def test_naive_bayes_reads_its_prior_and_alphas_at_fit():
    # sklearn: test_qda_prior_copy, for naive Bayes: the model reads a class_prior mapping
    # (and feature_alpha) when fitted and keeps its own copy
    prior = {1: 0.3, 2: 0.7}
    alphas = {"x0": 2.0}
    t = frame(np.abs(X), y)
    model = sqlnb.fit(t, "y", kind="multinomial", class_prior=prior, feature_alpha=alphas)
    before = (proba(model, np.abs(X)), model.metadata())
    prior[1], alphas["x0"] = 0.9, 50.0
    after = (proba(model, np.abs(X)), model.metadata())
    np.testing.assert_array_equal(after[0], before[0])
    assert after[1] == before[1]
    assert model.metadata()["hyperparameters"]["class_prior"] == {"given": [0.3, 0.7]}
    assert model.hyper.feature_alpha == {"x0": 2.0}


def test_with_params_and_merge_check_the_prior_too():
    model = sqlnb.fit(frame(X, y), "y")
    with pytest.raises(SqlnbError, match="class prior sums to 0.5"):
        model.with_params(class_prior=[0.25, 0.25])
    given = model.with_params(class_prior={"1": 0.4, "2": 0.6})  # the CLI's LABEL=P: labels as text
    assert given.hyper.class_prior == {1: 0.4, 2: 0.6}
    with pytest.raises(SqlnbError, match="gives no probability for 3"):
        given.merge(sqlnb.fit(frame(X, np.where(y == 1, 1, 3)), "y"))


# -- feature_alpha and binarize name features ----------------------------------------------------

def test_feature_alpha_and_binarize_must_name_a_feature():
    t = mixed_table(60, nulls=False)
    with pytest.raises(SqlnbError, match=r"feature_alpha .* names 'colr', which is not a feature .*did you mean 'color'"):
        sqlnb.fit(t, "y", exclude=["id"], feature_alpha={"colr": 2.0})
    with pytest.raises(SqlnbError, match="gives 'x' a pseudo-count, but it is a gaussian feature"):
        sqlnb.fit(t, "y", exclude=["id"], feature_alpha={"x": 2.0})
    with pytest.raises(SqlnbError, match=r"binarize .* names 'flg', which is not a feature .*did you mean 'flag'"):
        sqlnb.fit(t, "y", exclude=["id"], binarize={"flg": 0.5})
    with pytest.raises(SqlnbError, match="gives 'x' a threshold, but it is a gaussian feature.*x=bernoulli"):
        sqlnb.fit(t, "y", exclude=["id"], binarize={"x": 0.5})
    # the right names still work
    sqlnb.fit(t, "y", exclude=["id"], feature_alpha={"color": 2.0}, feature_kinds={"x": "bernoulli"},
              binarize={"x": 0.5})


# -- LDA and QDA ------------------------------------------------------------------------------

def test_lda_priors():
    # sklearn: test_lda_priors: negative priors raise; a list works. scikit-learn
    # renormalises a sum away from 1 with a warning; sqlnb refuses it in one line.
    with pytest.raises(SqlnbError, match="class prior of class 2 is -0.5"):
        sqlnb.fit_lda(frame(X, y), "y", priors=np.array([0.5, -0.5]))
    with pytest.raises(SqlnbError, match="class prior sums to 1.1, not 1"):
        sqlnb.fit_lda(frame(X, y), "y", priors=np.array([0.5, 0.6]))
    sk = LinearDiscriminantAnalysis(solver="lsqr", priors=[0.5, 0.5]).fit(X, y)
    model = sqlnb.fit_lda(frame(X, y), "y", priors=[0.5, 0.5])
    np.testing.assert_allclose(proba(model, X), sk.predict_proba(X), atol=TOL, rtol=0)


@pytest.mark.parametrize("cls", [sqlnb.fit_lda, sqlnb.fit_qda])
@pytest.mark.parametrize("container", [list, np.array])
def test_qda_prior_type_and_copy(cls, container):
    # sklearn: test_qda_prior_type (list, tuple, array) and test_qda_prior_copy: changing the
    # caller's priors after fit changes nothing the model scores or saves (sqlnb's model
    # kept the caller's array: save() then wrote the changed priors)
    assert cls(frame(X6, y6), "y", priors=(0.5, 0.5)).priors_.tolist() == [0.5, 0.5]
    priors = container([0.5, 0.5])
    model = cls(frame(X6, y6), "y", priors=priors)
    assert isinstance(model.priors_, np.ndarray) and model.priors_.tolist() == [0.5, 0.5]
    before = (proba(model, X6), model.metadata())
    priors[0], priors[1] = 0.2, 0.8
    after = (proba(model, X6), model.metadata())
    np.testing.assert_array_equal(after[0], before[0])
    assert after[1]["priors"] == before[1]["priors"] == {"given": [0.5, 0.5]}
    assert model.with_params().priors_.tolist() == [0.5, 0.5]


def test_qda_regularization():
    # sklearn: test_qda_regularization: a constant column makes QDA's covariance singular,
    # refused at fit (LinAlgError "not full rank" there; sqlnb fitted and failed at first
    # use); a little regularisation fixes it
    with pytest.raises(SqlnbError, match=r"covariance of class 1 has zero variance in column 'x1'; "
                                         r"set reg_param > 0 \(--reg-param\)"):
        sqlnb.fit_qda(frame(X2, y6), "y")
    assert scores(sqlnb.fit_qda(frame(X2, y6), "y", reg_param=0.01), X2)["prediction"] == y6.tolist()
    # fewer rows in a class than columns: singular without regularisation, named as such
    rng = np.random.default_rng(0)
    Xr = rng.normal(size=(9, 4))
    yr = np.array([1, 1, 1, 1, 1, 1, 2, 2, 2])
    with pytest.raises(SqlnbError, match=r"covariance of class 2 \(3 rows for 4 columns\) is singular"):
        sqlnb.fit_qda(frame(Xr, yr), "y")
    # scikit-learn's SVD solver refuses this even regularised; sqlnb's reg_param makes
    # every covariance positive definite, as its eigen solver does with shrinkage
    sqlnb.fit_qda(frame(Xr, yr), "y", reg_param=0.3)


def test_lda_singular_covariance_fails_at_fit():
    # sklearn: test_qda_regularization's constant column, for LDA without shrinkage
    with pytest.raises(SqlnbError, match=r"pooled covariance has zero variance in column 'x1'; "
                                         r"set shrinkage > 0 \(--shrinkage\)"):
        sqlnb.fit_lda(frame(X2, y6), "y")
    collinear = np.c_[X6, X6[:, 0] - 2 * X6[:, 1]]
    with pytest.raises(SqlnbError, match="pooled covariance is singular \\(collinear columns 'x0', 'x1', 'x2'\\)"):
        sqlnb.fit_lda(frame(collinear, y6), "y")


@pytest.mark.filterwarnings("ignore:Only one sample available:UserWarning")  # sklearn's, on the one-row class
def test_raises_value_error_on_one_sample_per_class():
    # sklearn: test_raises_value_error_on_one_sample_per_class (QDA: "y has only 1 sample
    # in class") and test_raises_value_error_on_same_number_of_classes_and_samples (LDA)
    X4 = np.array([[0.5, 0.6], [0.6, 0.5], [0.4, 0.4], [0.6, 0.5]])
    y4b = np.array(["a", "a", "a", "b"])
    with pytest.raises(SqlnbError, match="class 'b' has a single training row.*reg_param > 0"):
        sqlnb.fit_qda(frame(X4, y4b), "y")
    with pytest.raises(SqlnbError, match="every class has a single training row"):
        sqlnb.fit_lda(frame(np.array([[0.5, 0.6], [0.6, 0.5]]), np.array(["a", "b"])), "y")
    # where scikit-learn accepts a one-row class (LDA, logistic regression, Gaussian naive
    # Bayes: its y4 above), sqlnb accepts it with the same probabilities
    lda = LinearDiscriminantAnalysis(solver="lsqr").fit(X6, y4)
    np.testing.assert_allclose(proba(sqlnb.fit_lda(frame(X6, y4), "y"), X6), lda.predict_proba(X6), atol=TOL)
    gnb = GaussianNB().fit(X6, y4)
    np.testing.assert_allclose(proba(sqlnb.fit(frame(X6, y4), "y"), X6), gnb.predict_proba(X6), atol=TOL)
    # ... unless var_smoothing is 0: the one-row class then has no variance at all
    # (scikit-learn divides by zero and returns NaN), refused at fit
    with pytest.raises(SqlnbError, match=r"zero variance in a class \(one with a single training row\).*--var-smoothing"):
        sqlnb.fit(frame(X6, y4), "y", var_smoothing=0.0)
    lr = LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000).fit(X6, y4)
    np.testing.assert_allclose(proba(sqlnb.fit_logistic(frame(X6, y4), "y"), X6), lr.predict_proba(X6), atol=1e-6)


def test_logistic_keeps_its_own_arrays():
    # sklearn: test_logistic.py::test_sample_weight_not_modified, the other way round:
    # the model does not share the arrays it is built from
    fitted = {"centre": np.zeros(2), "coef": np.array([[0.0, 0.0], [1.0, -1.0]]), "intercept": np.zeros(2),
              "mean": np.zeros(2), "scale": np.ones(2)}
    model = sqlnb.Logistic("y", "BIGINT", {"x0": "DOUBLE", "x1": "DOUBLE"}, [1, 2], fitted, [3.0, 3.0])
    before = proba(model, X)
    fitted["coef"][1] = 100.0
    fitted["centre"][:] = 5.0
    np.testing.assert_array_equal(proba(model, X), before)


# -- finite values near 1e300 --------------------------------------------------------------------

def test_a_column_constant_near_1e300_fits_as_in_sklearn():
    # x0 is 1e300 in every row: finite, its variance 0. sqlnb refused it as "holds NaN or
    # infinite values" (the squares about the shift overflowed); GaussianNB fits it.
    Xb = np.c_[np.full(6, 1e300), [1.0, 2.0, 1.5, 3.0, 2.5, 4.0]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sk = GaussianNB().fit(Xb, y).predict_proba(Xb)
    np.testing.assert_allclose(proba(sqlnb.fit(frame(Xb, y), "y"), Xb), sk, atol=TOL, rtol=0)


@pytest.mark.parametrize("fit", [sqlnb.fit, sqlnb.fit_lda, sqlnb.fit_qda])
def test_an_overflowing_variance_is_named_not_called_nan(fit):
    Xb = np.c_[[1e300, -1e300, 5e299, 2e300, 1e299, -3e300], [1.0, 2.0, 1.5, 3.0, 2.5, 4.0]]
    with pytest.raises(SqlnbError, match=r"the variance of column 'x0' in .* overflows a double in class [12] "
                                         r"\(its values reach [13]e\+300\); rescale the column .*\"x0\" / 1e300"):
        fit(frame(Xb, y), "y")
    Xn = Xb.copy()
    Xn[0, 0] = np.nan
    with pytest.raises(SqlnbError, match="'x0'.*NaN or infinite"):
        fit(frame(Xn, y), "y")


def test_naive_bayes_names_a_pooled_variance_that_overflows():
    # Constant within each class (variance 0 there, exact after the second pass), but the
    # class means are 2e300 apart: the all-class variance, which sets the var_smoothing
    # floor, is near 1e600. (GaussianNB's floor becomes inf and its probabilities NaN.)
    Xb = np.c_[np.where(y == 1, 1e300, -1e300), [1.0, 2.0, 1.5, 3.0, 2.5, 4.0]]
    with pytest.raises(SqlnbError, match="the variance of column 'x0' over all classes overflows a double"):
        sqlnb.fit(frame(Xb, y), "y")


def test_logistic_standardizes_columns_near_1e300_exactly():
    # The standard deviation of values near 1e300 is a double even though their variance
    # is not: standardised logistic regression does not depend on the column's units.
    rng = np.random.default_rng(3)
    Xs = rng.normal(size=(80, 2))
    ys = (Xs[:, 0] - Xs[:, 1] + rng.normal(size=80) > 0).astype(int)
    sk = make_pipeline(StandardScaler(), LogisticRegression(C=1.0, tol=1e-12, max_iter=10_000)).fit(Xs, ys)
    big = Xs * np.array([1e300, 1.0])
    model = sqlnb.fit_logistic(frame(big, ys), "y", standardize=True)
    np.testing.assert_allclose(proba(model, big), sk.predict_proba(Xs), atol=1e-6, rtol=0)
    np.testing.assert_allclose(proba(model, big), proba(sqlnb.fit_logistic(frame(Xs, ys), "y", standardize=True), Xs),
                               atol=TOL, rtol=0)


# -- the command line: one Error: line, nothing saved ----------------------------------------------

@pytest.fixture
def work(tmp_path):
    train = mixed_table(80, nulls=False).drop_columns(["id"])
    write_parquet(train, tmp_path / "train.parquet")
    write_parquet(train.append_column("x2", pc.multiply(train["x"], 2.0)), tmp_path / "collinear.parquet")
    write_parquet(pa.table({"x": [0.1, 0.5, 0.3, 0.9, 1.2, 1.1, 5.0], "z": [1.0, 0.2, 0.5, 0.1, 0.3, 0.8, 2.0],
                            "y": ["a", "a", "a", "b", "b", "b", "c"]}), tmp_path / "one_row.parquet")
    return tmp_path


@pytest.mark.parametrize("args, fragments", [
    (["train", "--feature-alpha", "colr=2"], ["--feature-alpha", "'colr'", "did you mean 'color'"]),
    (["train", "--feature-alpha", "z=2"], ["'z'", "gaussian feature"]),
    (["train", "--binarize", "flg=0.5"], ["--binarize", "'flg'", "did you mean 'flag'"]),
    (["train", "--binarize", "x=0.5"], ["'x'", "--feature-kind x=bernoulli"]),
    (["train", "--class-prior", "a=0.5,b=0.6,c=0.1"], ["class prior sums to 1.2, not 1"]),
    (["train", "--class-prior", "a=0.5,b=0.5,d=0"], ["names 'd'", "not a class"]),
    (["one_row", "--kind", "qda"], ["class 'c' has a single training row", "--reg-param"]),
    (["collinear", "--kind", "lda", "--features", "x,z,x2"], ["pooled covariance is singular", "'x'", "'x2'",
                                                               "--shrinkage"]),
])
def test_cli_fit_refuses_in_one_line_and_saves_nothing(work, args, fragments):
    # The CLI gets the library's checks: feature_alpha, binarize and the class prior were
    # accepted silently or failed late; a QDA class with one row and a singular LDA
    # covariance were saved and failed at the first score.
    data, *options = args
    before = snapshot(work)
    assert_error(invoke("fit", work / f"{data}.parquet", "-y", "y", "-m", f"{work}/m.duckdb:m", *options), *fragments)
    assert not (work / "m.duckdb").exists()
    assert snapshot(work) == before


def test_a_model_saved_with_a_stray_feature_alpha_still_loads():
    # Models saved before feature_alpha was checked may name a column that is no discrete
    # feature; the key never had an effect, so loading drops it rather than refusing.
    model = sqlnb.fit(mixed_table(60, nulls=False), "y", exclude=["id"], feature_alpha={"color": 2.0})
    meta = model.metadata()
    meta["hyperparameters"]["feature_alpha"] = {"color": 2.0, "gone": 3.0, "x": 4.0}
    tables = {part: table for part, (table, _) in model.parameter_tables().items()}
    back = sqlnb.NaiveBayes.from_tables(meta, tables)
    assert back.hyper.feature_alpha == {"color": 2.0}
    assert back.to_sql() == model.to_sql()
