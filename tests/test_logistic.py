"""Logistic regression: scikit-learn's objective solved exactly, scored in SQL.

The oracle is ``LogisticRegression(C, tol=1e-12, max_iter=10000)``. Its default lbfgs stops
on a relative decrease of the objective (``ftol = 64·ε``), which leaves its probabilities
~1e-6 from the optimum when the problem is badly conditioned (spambase, C = 1: 4e-6);
its ``newton-cholesky`` solver reaches the optimum and agrees with sqlnb to ~1e-12. So the
tests compare against lbfgs within 1e-6 where lbfgs converges that far, against
newton-cholesky within 1e-9, and check optimality directly (gradient ≈ 0, objective no
higher than scikit-learn's).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import GaussianNB
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import sqlnb
from conftest import frame, scores
from sqlnb.models import logistic, newton
from support import shared_data as sd

TOL = 1e-6


def data(seed: int, K: int, d: int, n: int = 200, standardise: bool = True):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(K), rng.integers(0, K, n - K)])
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 1.2 * rng.normal(size=(K, d))[y] + 30.0
    if standardise:
        X = (X - X.mean(0)) / X.std(0)
    return X, y


def sklearn_fit(X, y, C, solver="lbfgs", max_iter=10000):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return LogisticRegression(C=C, tol=1e-12, max_iter=max_iter, solver=solver).fit(X, y)


@pytest.mark.parametrize("K,d,C", [(2, 3, 1.0), (2, 6, 0.1), (3, 4, 0.1), (4, 3, 1.0), (3, 1, 0.5)])
def test_matches_sklearn_on_standardised_data(K, d, C):
    X, y = data(K * 7 + d, K, d)
    model = sqlnb.fit_logistic(frame(X, y), "y", C=C)
    ours = scores(model, X)
    np.testing.assert_allclose(ours["proba"], sklearn_fit(X, y, C).predict_proba(X), atol=TOL, rtol=0)
    exact = sklearn_fit(X, y, C, "newton-cholesky")
    np.testing.assert_allclose(ours["proba"], exact.predict_proba(X), atol=1e-9, rtol=0)
    # scikit-learn's coef_/intercept_ in its own parameterisation (binary: one row).
    np.testing.assert_allclose(model.coef_, exact.coef_, atol=1e-7)
    if K == 2:
        np.testing.assert_allclose(model.intercept_, exact.intercept_, atol=1e-7)


def test_standardize_equals_scaler_pipeline():
    X, y = data(11, 3, 4, standardise=False)
    X[:, 0] *= 1e4  # badly scaled raw columns
    model = sqlnb.fit_logistic(frame(X, y), "y", C=0.3, standardize=True)
    pipe = make_pipeline(StandardScaler(), LogisticRegression(C=0.3, tol=1e-12, max_iter=10000,
                                                              solver="newton-cholesky")).fit(X, y)
    np.testing.assert_allclose(scores(model, X)["proba"], pipe.predict_proba(X), atol=1e-9, rtol=0)
    np.testing.assert_allclose(model.coef_, pipe[-1].coef_, atol=1e-7)


@pytest.mark.parametrize("K", [2, 3])
def test_reaches_the_optimum_where_lbfgs_stops_early(K):
    # Raw (uncentred, unscaled) columns and a weak penalty: hard for lbfgs.
    X, y = data(5, K, 4, standardise=False)
    C = 100.0
    fitted = logistic.fit_arrays(X, y, K, C)
    sk = sklearn_fit(X, y, C, max_iter=300)  # lbfgs crawls here (559 steps to its ftol stop)

    def objective(coef, intercept):
        Z = X @ coef.T + intercept
        if K == 2:
            z = Z[:, 0]
            return C * np.sum(np.logaddexp(0, z) - (y == 1) * z) + 0.5 * np.sum(coef ** 2)
        Zmax = Z.max(1, keepdims=True)
        lse = (Zmax + np.log(np.exp(Z - Zmax).sum(1, keepdims=True)))[:, 0]
        return C * np.sum(lse - Z[np.arange(len(y)), y]) + 0.5 * np.sum(coef ** 2)

    W = fitted["coef"]
    b = fitted["intercept"] - W @ fitted["centre"]
    if K == 2:
        W, b = W[1:] - W[:1], b[1:] - b[:1]
    ours, theirs = objective(W, b), objective(sk.coef_, sk.intercept_)
    assert ours <= theirs + 1e-9 * abs(theirs)
    # Optimality: the gradient in the solver's coordinates is ~0.
    mean, scale = X.mean(0), X.std(0)
    obj = logistic._Objective((X - mean) / scale, y, K, C, 1.0 / scale ** 2)
    theta = fitted["coef"] * scale
    beta = (np.append(theta[1], fitted["intercept"][1]) if K == 2
            else np.hstack([theta, fitted["intercept"][:, None]]).ravel())
    _, grad, _ = obj.value_grad(beta)
    assert np.max(np.abs(grad)) < 1e-8 * C * len(y)


def test_one_hot_columns_with_a_weak_penalty_converge():
    # The indicators of each column sum to 1 (collinear with the intercept): with C = 1e4
    # the objective is nearly flat along those directions, where rounding noise in the
    # gradient (~ε·C·n) keeps Newton steps from ever shrinking to 1e-12 of β. The
    # decrement test stops there (without it: "did not converge in 200 Newton steps").
    rng = np.random.default_rng(5)
    n, blocks, logit = 3000, [], np.full(3000, -1.0)
    for k in (10, 10):
        codes, effect = rng.integers(0, k, n), rng.normal(size=k)
        logit += effect[codes]
        blocks += [(codes == j).astype(float) for j in range(k)]
    X = np.column_stack(blocks)
    y = (rng.random(n) < 1 / (1 + np.exp(-logit))).astype(int)
    model = sqlnb.fit_logistic(frame(X, y), "y", C=1e4, standardize=True)
    assert model.report["iterations"] < 20
    pipe = make_pipeline(StandardScaler(), LogisticRegression(C=1e4, tol=1e-12, max_iter=10000,
                                                              solver="newton-cholesky")).fit(X, y)
    np.testing.assert_allclose(scores(model, X)["proba"], pipe.predict_proba(X), atol=1e-9, rtol=0)


def test_conjugate_gradient_path_agrees(monkeypatch):
    X, y = data(3, 3, 5)
    dense_fit = logistic.fit_arrays(X, y, 3, 1.0)
    monkeypatch.setattr(newton, "DENSE_LIMIT", 0)  # sqlnb.models.newton: conjugate gradients
    cg_fit = logistic.fit_arrays(X, y, 3, 1.0)
    for key in ("coef", "intercept"):
        np.testing.assert_allclose(cg_fit[key], dense_fit[key], atol=1e-8)


def test_save_load_and_errors(con):
    X, y = data(2, 3, 2)
    labels = np.array(["x", "y", "z"], dtype=object)[y]
    import pyarrow as pa
    t = frame(X).append_column("label", pa.array(labels))
    model = sqlnb.fit(t, "label", model="logistic", C=0.5, standardize=True)
    model.save(con, "lr")
    back = sqlnb.load(con, "lr")
    assert isinstance(back, sqlnb.Logistic) and back.classes == ["x", "y", "z"]
    assert back.to_sql() == model.to_sql() and back.C == 0.5 and back.standardize
    for bad in (0, float("inf"), float("nan")):
        with pytest.raises(sqlnb.SqlnbError, match="C must be a positive finite number"):
            sqlnb.fit_logistic(t, "label", C=bad)
    with pytest.raises(sqlnb.SqlnbError, match="column 'label' .* has type VARCHAR"):
        sqlnb.fit_logistic(t, "x0")


# -- spambase (ESL split) --------------------------------------------------------------------
TRAIN = "SELECT * FROM spambase WHERE NOT is_test ORDER BY row_id"
TEST = "SELECT * FROM spambase WHERE is_test ORDER BY row_id"


def proba_and_error(model, con, y):
    d = model.score(TEST, con, outputs=("proba", "prediction"), keep=[]).to_arrow_table().to_pydict()
    return np.array([d[c] for c in model.proba_columns()]).T, float(np.mean(np.array(d["prediction"]) != y))


@pytest.mark.shared_data
def test_spambase_logistic_regression(spambase):
    con, train, test = spambase
    features = list(sd.SPAMBASE_FEATURES)
    scaler = StandardScaler().fit(train.numeric)
    Xtr, Xte = scaler.transform(train.numeric), scaler.transform(test.numeric)
    # C = 1: the ESL reference (StandardScaler + LogisticRegression(), 7.55 % test error).
    model = sqlnb.fit_logistic(TRAIN, "spam", con=con, features=features, standardize=True)
    proba, error = proba_and_error(model, con, test.y)
    assert error <= 0.077
    np.testing.assert_allclose(proba, sklearn_fit(Xtr, train.y, 1.0, "newton-cholesky").predict_proba(Xte),
                               atol=1e-9, rtol=0)
    # C = 0.1: lbfgs itself converges to within 1e-6 here.
    model = sqlnb.fit_logistic(TRAIN, "spam", con=con, features=features, standardize=True, C=0.1)
    proba, _ = proba_and_error(model, con, test.y)
    np.testing.assert_allclose(proba, sklearn_fit(Xtr, train.y, 0.1).predict_proba(Xte), atol=TOL, rtol=0)


@pytest.mark.shared_data
def test_spambase_gaussian_naive_bayes_as_sklearn(spambase):
    con, train, test = spambase
    model = sqlnb.fit(TRAIN, "spam", con=con, features=list(sd.SPAMBASE_FEATURES))
    proba, error = proba_and_error(model, con, test.y)
    sk = GaussianNB().fit(train.numeric, train.y)
    assert error == pytest.approx(np.mean(sk.predict(test.numeric) != test.y)) == pytest.approx(0.1836, abs=5e-4)
    np.testing.assert_allclose(proba, sk.predict_proba(test.numeric), atol=1e-9, rtol=0)
