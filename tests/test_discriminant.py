"""LDA and QDA: parity with scikit-learn, missing values, storage, merging.

LDA probabilities equal ``LinearDiscriminantAnalysis(solver='lsqr')`` within 1e-9, QDA's
equal ``QuadraticDiscriminantAnalysis`` within 1e-8, on generated data and on spambase.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis

import sqlnb
from sqlnb.models.finish import OUTPUTS
from conftest import frame, scores
from support import shared_data as sd

LDA_TOL = 1e-9
QDA_TOL = 1e-8


def blobs(seed: int, K: int, d: int, n: int = 150, offset: float = 0.0, scales=None):
    """K correlated Gaussian classes; ``offset`` moves the data away from the origin and
    ``scales`` multiplies the columns (very different units)."""
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(K), rng.integers(0, K, n - K)])
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 1.5 * rng.normal(size=(K, d))[y]
    if scales is not None:
        X = X * scales
    return X + offset, y


def assert_close(ours, ref, tol, sk_pred=None):
    np.testing.assert_allclose(ours["proba"], ref, atol=tol, rtol=0)
    if sk_pred is not None:
        top = np.sort(ref, axis=1)
        clear = top[:, -1] - top[:, -2] > 1e-9
        assert list(np.array(ours["prediction"])[clear]) == list(sk_pred[clear])


@pytest.mark.parametrize("K,d,shrinkage,given,offset", [
    (2, 3, None, False, 0.0),
    (3, 5, None, True, 0.0),
    (4, 2, 0.3, False, 1e3),
    (3, 6, 0.7, True, -50.0),
    (2, 1, None, True, 0.0),
])
def test_lda_matches_sklearn_lsqr(K, d, shrinkage, given, offset):
    X, y = blobs(K * 10 + d, K, d, offset=offset)
    priors = np.random.default_rng(d).dirichlet(np.ones(K)) if given else None
    sk = LinearDiscriminantAnalysis(solver="lsqr", shrinkage=shrinkage, priors=priors).fit(X, y)
    model = sqlnb.fit_lda(frame(X, y), "y", shrinkage=shrinkage,
                          priors=None if priors is None else dict(zip(range(K), priors)))
    Xt = np.vstack([X, X[:5] * 1.7 - 2.0])
    assert_close(scores(model, Xt), sk.predict_proba(Xt), LDA_TOL, sk.predict(Xt))
    np.testing.assert_allclose(model.coef_, np.linalg.solve(sk.covariance_, sk.means_.T).T, rtol=1e-9, atol=1e-9)


def test_lda_columns_of_very_different_scales():
    # Column scales 1e-4 .. 1e5 make the pooled covariance's condition number ~1e18:
    # scikit-learn's lstsq then truncates singular values and is wrong, while the
    # equilibrated Cholesky solve is not. LDA probabilities do not change when columns are
    # rescaled, so the oracle is scikit-learn on the rescaled (well-conditioned) columns.
    scales = np.array([1e-4, 1.0, 1e3, 1e5])
    X, y = blobs(7, 3, 4, scales=scales, offset=0.0)
    sk = LinearDiscriminantAnalysis(solver="lsqr").fit(X / scales, y)
    assert_close(scores(sqlnb.fit_lda(frame(X, y), "y"), X), sk.predict_proba(X / scales), LDA_TOL)


@pytest.mark.parametrize("K,d,reg,given", [(2, 3, 0.0, False), (3, 4, 0.25, True), (4, 2, 1.0, False)])
def test_qda_matches_sklearn(K, d, reg, given):
    X, y = blobs(K + 100 * d, K, d, n=200, offset=20.0)
    priors = np.random.default_rng(K).dirichlet(np.ones(K)) if given else None
    sk = QuadraticDiscriminantAnalysis(reg_param=reg, priors=priors).fit(X, y)
    model = sqlnb.fit_qda(frame(X, y), "y", reg_param=reg, priors=None if priors is None else list(priors))
    Xt = np.vstack([X, X[:5] * 1.3 + 1.0])
    ours = scores(model, Xt)
    assert_close(ours, sk.predict_proba(Xt), QDA_TOL, sk.predict(Xt))
    # QDA's jll is ln p(x, k): log_evidence is the mixture density ln p(x).
    dens = sum(p * np.exp(_gauss_logpdf(Xt, mu, C)) for p, mu, C in zip(
        model.priors_, model.means_, model.class_covariances()))
    np.testing.assert_allclose(ours["log_evidence"], np.log(dens), rtol=1e-9)


def _gauss_logpdf(X, mu, C):
    d = len(mu)
    diff = X - mu
    sol = np.linalg.solve(C, diff.T).T
    return -0.5 * np.sum(diff * sol, axis=1) - 0.5 * np.linalg.slogdet(C)[1] - 0.5 * d * math.log(2 * math.pi)


def test_fit_dispatch_and_naive_bayes_only_options():
    X, y = blobs(1, 2, 3)
    t = frame(X, y)
    a = sqlnb.fit(t, "y", model="lda", shrinkage=0.2)
    b = sqlnb.fit_lda(t, "y", shrinkage=0.2)
    assert isinstance(a, sqlnb.LDA) and a.to_sql() == b.to_sql()
    assert isinstance(sqlnb.fit(t, "y", model="qda"), sqlnb.QDA)
    with pytest.raises(sqlnb.SqlnbError, match="weight applies to naive Bayes only"):
        sqlnb.fit(t, "y", model="lda", weight="x0")
    with pytest.raises(sqlnb.SqlnbError, match="unknown model 'lad'.*did you mean 'lda'"):
        sqlnb.fit(t, "y", model="lad")


def test_with_params_and_merge_need_no_data():
    X, y = blobs(3, 3, 3, n=240)
    t = frame(X, y)
    base = sqlnb.fit_lda(t, "y")
    shrunk = sqlnb.fit_lda(t, "y", shrinkage=0.4)
    np.testing.assert_allclose(scores(base.with_params(shrinkage=0.4), X)["proba"], scores(shrunk, X)["proba"],
                               atol=1e-12)
    first = sqlnb.fit_qda(frame(X[:100], y[:100]), "y", reg_param=0.1)
    second = sqlnb.fit_qda(frame(X[100:], y[100:]), "y", reg_param=0.1)
    whole = sqlnb.fit_qda(t, "y", reg_param=0.1)
    merged = first.merge(second)
    assert merged.moments.n_rows == 240
    np.testing.assert_allclose(scores(merged, X)["proba"], scores(whole, X)["proba"], atol=1e-12)


@pytest.mark.parametrize("fit", [sqlnb.fit_lda, sqlnb.fit_qda])
def test_save_load_round_trip(fit, con):
    X, y = blobs(5, 3, 3)
    labels = np.array(["b", "a", "c"], dtype=object)[y]
    t = frame(X).append_column("y", pa.array(labels))
    model = fit(t, "y", priors={"a": 0.2, "b": 0.3, "c": 0.5})
    model.save(con, "disc model")
    back = sqlnb.load(con, "disc model")
    assert type(back) is type(model) and back.classes == ["a", "b", "c"]
    assert back.to_sql() == model.to_sql()  # bit-identical parameters
    assert back.priors_.tolist() == [0.2, 0.3, 0.5]
    assert [m["kind"] for m in sqlnb.list_models(con)] == [model.kind]


def test_missing_values_at_fit_raise_naming_the_column(con):
    con.execute("CREATE TABLE t AS SELECT range % 2 AS y, range * 1.0 AS a, "
                "CASE WHEN range = 3 THEN NULL ELSE range * 2.5 END::DOUBLE AS b FROM range(20)")
    with pytest.raises(sqlnb.SqlnbError, match="column 'b' in table 't' is NULL.*complete rows"):
        sqlnb.fit_lda("t", "y", con=con)
    con.execute("UPDATE t SET b = 'nan'::DOUBLE WHERE b IS NULL")
    with pytest.raises(sqlnb.SqlnbError, match="column 'b' .* NaN or infinite"):
        sqlnb.fit_qda("t", "y", con=con)
    con.execute("ALTER TABLE t ADD COLUMN s VARCHAR")
    with pytest.raises(sqlnb.SqlnbError, match="column 's' .* has type VARCHAR, but LDA needs numeric"):
        sqlnb.fit_lda("t", "y", con=con, exclude=["b"])


@pytest.mark.parametrize("fit", [sqlnb.fit_lda, sqlnb.fit_qda, sqlnb.fit_logistic])
def test_incomplete_rows_score_null_never_nan(fit, con):
    X, y = blobs(9, 2, 2)
    model = fit(frame(X, y), "y")
    con.execute("CREATE TABLE s AS SELECT * FROM (VALUES (1.0, 2.0), (NULL, 1.0), ('nan'::DOUBLE, 0.0), "
                "('inf'::DOUBLE, 0.0), (0.5, '-inf'::DOUBLE)) v(x0, x1)")
    rows = model.score("s", con, outputs=OUTPUTS).to_arrow_table().to_pylist()
    assert rows[0]["prediction"] is not None and math.isclose(rows[0]["proba_0"] + rows[0]["proba_1"], 1.0)
    for r in rows[1:]:
        assert all(r[c] is None for c in ("prediction", "proba_0", "proba_1", "jll_0", "log_evidence"))


def test_singular_covariance_names_the_fix():
    X, y = blobs(2, 2, 3)
    X[:, 2] = 4.0  # constant column (which screening would leave out: screen=False keeps it)
    with pytest.raises(sqlnb.SqlnbError, match="pooled covariance has zero variance.*shrinkage > 0"):
        sqlnb.fit_lda(frame(X, y), "y", screen=False).to_sql()
    X[:, 2] = X[:, 0] + X[:, 1]  # collinear
    with pytest.raises(sqlnb.SqlnbError, match="covariance of class 0 is singular.*reg_param > 0"):
        sqlnb.fit_qda(frame(X, y), "y").to_sql()
    sqlnb.fit_qda(frame(X, y), "y", reg_param=0.01).to_sql()  # defined with regularisation


def test_scoring_sql_renders_for_other_dialects():
    X, y = blobs(4, 3, 2)
    for model in (sqlnb.fit_lda(frame(X, y), "y"), sqlnb.fit_qda(frame(X, y), "y")):
        for dialect in ("postgres", "spark", "sqlite"):
            assert "proba_2" in model.to_sql(dialect)


# -- spambase ------------------------------------------------------------------------------
TRAIN = "SELECT * FROM spambase WHERE NOT is_test ORDER BY row_id"
TEST = "SELECT * FROM spambase WHERE is_test ORDER BY row_id"


def spambase_proba(model, con):
    d = model.score(TEST, con, outputs=("proba", "prediction"), keep=[]).to_arrow_table().to_pydict()
    return np.array([d[c] for c in model.proba_columns()]).T, np.array(d["prediction"])


@pytest.mark.shared_data
def test_spambase_lda(spambase):
    con, train, test = spambase
    fitted = sqlnb.fit_lda(TRAIN, "spam", con=con, features=list(sd.SPAMBASE_FEATURES))
    for shrinkage, priors in [(None, None), (0.2, [0.7, 0.3])]:
        model = fitted.with_params(shrinkage=shrinkage, priors=priors)  # no second scan
        sk = LinearDiscriminantAnalysis(solver="lsqr", shrinkage=shrinkage, priors=priors).fit(train.numeric, train.y)
        proba, pred = spambase_proba(model, con)
        np.testing.assert_allclose(proba, sk.predict_proba(test.numeric), atol=LDA_TOL, rtol=0)
        assert np.mean(pred != sk.predict(test.numeric)) == 0


@pytest.mark.shared_data
def test_spambase_qda(spambase):
    # The first 30 columns keep the test quick: QDA's SQL has K·d(d+1)/2 product terms
    # (930 here, 3306 with all 57).
    con, train, test = spambase
    d = 30
    model = sqlnb.fit_qda(TRAIN, "spam", con=con, features=list(sd.SPAMBASE_FEATURES[:d]), reg_param=0.05)
    sk = QuadraticDiscriminantAnalysis(reg_param=0.05).fit(train.numeric[:, :d], train.y)
    proba, _ = spambase_proba(model, con)
    np.testing.assert_allclose(proba, sk.predict_proba(test.numeric[:, :d]), atol=QDA_TOL, rtol=0)
