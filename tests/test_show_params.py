"""``sqlnb show --params`` and the ranking of ``sqlnb show``.

The parameters printed are the model's own, derived from its statistics under its
hyperparameters; scikit-learn (or numpy) is the oracle within 1e-9. The ranking puts a
perfectly separating feature first: the lecture notes' spam example (seeds) under MLE,
where the two deciding words have probability 0 in one class.
"""

from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pyarrow as pa
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis
from sklearn.linear_model import LogisticRegression
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, ComplementNB, GaussianNB, MultinomialNB

import sqlnb
from sqlnb.workflows.importance import class_entropy, top_features
from sqlnb.workflows.parameters import parameters, parameters_text
from sqlnb.workflows.report import describe, show_text
from support.cli import invoke, write_parquet

TOL = 1e-9


def blobs(seed: int, K: int = 3, d: int = 3, n: int = 240) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(K), rng.integers(0, K, n - K)])
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + 1.5 * rng.normal(size=(K, d))[y]
    return X, y


def frame(X: np.ndarray, y: np.ndarray, names=None) -> pa.Table:
    names = names or [f"x{j}" for j in range(X.shape[1])]
    return pa.table({**{n: X[:, j] for j, n in enumerate(names)}, "y": y})


def shown_params(tmp_path, table: pa.Table, *fit_args: str) -> dict:
    """Fit with ``sqlnb fit`` and read ``sqlnb show --params --format json``."""
    data = write_parquet(table, tmp_path / "train.parquet")
    model = f"{tmp_path}/m.duckdb:m"
    fitted = invoke("fit", data, "--label", "y", "--model", model, *fit_args)
    assert fitted.exit_code == 0, fitted.stderr
    shown = invoke("show", "--model", model, "--params", "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    return json.loads(shown.stdout)["parameters"]


# -- naive Bayes: every family against scikit-learn ------------------------------------------

def test_gaussian_means_and_variances_equal_gaussiannb(tmp_path):
    X, y = blobs(1)
    p = shown_params(tmp_path, frame(X, y))
    sk = GaussianNB().fit(X, y)
    assert [f["kind"] for f in p["features"]] == ["gaussian"] * 3
    np.testing.assert_allclose(np.array([f["mean"] for f in p["features"]]).T, sk.theta_, rtol=0, atol=TOL)
    np.testing.assert_allclose(np.array([f["var"] for f in p["features"]]).T, sk.var_, rtol=TOL, atol=0)
    np.testing.assert_allclose(p["prior"], sk.class_prior_, rtol=0, atol=TOL)


@pytest.mark.parametrize("alpha", [1.0, 0.5])
def test_categorical_probabilities_equal_categoricalnb(tmp_path, alpha):
    rng = np.random.default_rng(3)
    n = 300
    y = rng.integers(0, 3, n)
    codes = np.column_stack([(y + rng.integers(0, 2, n)) % 4, rng.integers(0, 3, n)])
    names = np.array(["a", "b", "c", "d"])
    table = pa.table({"u": names[codes[:, 0]].tolist(), "v": names[codes[:, 1]].tolist(),
                      "y": [f"k{k}" for k in y]})
    p = shown_params(tmp_path, table, "--alpha", str(alpha))
    sk = CategoricalNB(alpha=alpha).fit(codes, y)
    for j, f in enumerate(p["features"]):
        assert f["kind"] == "categorical"
        cols = [list(names).index(v) for v in f["values"]]
        np.testing.assert_allclose(np.array(f["proba"]), np.exp(sk.feature_log_prob_[j][:, cols]), rtol=0, atol=TOL)


def test_bernoulli_multinomial_and_complement_equal_sklearn():
    rng = np.random.default_rng(4)
    y = rng.integers(0, 3, 200)
    C = rng.poisson(1.0 + y[:, None] * np.array([0.0, 1.0, 2.0, 0.5]))
    names = [f"w{j}" for j in range(4)]
    table = pa.table({**{n: C[:, j] for j, n in enumerate(names)}, "y": y})
    for kind, sk in (("bernoulli", BernoulliNB(alpha=0.7)), ("multinomial", MultinomialNB(alpha=0.7)),
                     ("complement", ComplementNB(alpha=0.7))):
        p = parameters(sqlnb.fit(table, "y", kind=kind, alpha=0.7))
        sk.fit(C, y)
        key = {"bernoulli": "proba_present", "multinomial": "proba", "complement": "weight"}[kind]
        ours = np.array([f[key] for f in p["features"]]).T
        # ComplementNB's feature_log_prob_ is its weight, -ln of the complement probability.
        expected = sk.feature_log_prob_ if kind == "complement" else np.exp(sk.feature_log_prob_)
        np.testing.assert_allclose(ours, expected, rtol=0, atol=TOL, err_msg=kind)


def test_values_follow_the_hyperparameters_in_force():
    X, y = blobs(5)
    m = sqlnb.fit(frame(X, y), "y")
    for changed, sk in ((m.with_params(var_smoothing=0.1), GaussianNB(var_smoothing=0.1)),
                        (m.with_params(class_prior="uniform"), GaussianNB(priors=np.full(3, 1 / 3)))):
        p = parameters(changed)
        sk.fit(X, y)
        np.testing.assert_allclose(np.array([f["var"] for f in p["features"]]).T, sk.var_, rtol=TOL)
        np.testing.assert_allclose(p["prior"], sk.class_prior_, rtol=0, atol=TOL)


# -- LDA, QDA, logistic --------------------------------------------------------------------

def test_lda_means_coefficients_and_covariance_equal_sklearn(tmp_path):
    X, y = blobs(6)
    p = shown_params(tmp_path, frame(X, y), "--kind", "lda")
    sk = LinearDiscriminantAnalysis(solver="lsqr").fit(X, y)
    np.testing.assert_allclose(p["means"], sk.means_, rtol=0, atol=TOL)
    np.testing.assert_allclose(p["covariance"], sk.covariance_, rtol=0, atol=TOL)
    np.testing.assert_allclose(p["coef"], np.linalg.solve(sk.covariance_, sk.means_.T).T, rtol=TOL, atol=TOL)
    # scikit-learn keeps the multi-class coef_/intercept_ as they are (K >= 3).
    np.testing.assert_allclose(p["coef"], sk.coef_, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(p["intercept"], sk.intercept_, rtol=TOL, atol=TOL)
    np.testing.assert_allclose(p["prior"], sk.priors_, rtol=0, atol=TOL)


def test_qda_means_and_covariances_equal_sklearn():
    X, y = blobs(7)
    p = parameters(sqlnb.fit(frame(X, y), "y", model="qda", reg_param=0.1))
    sk = QuadraticDiscriminantAnalysis(reg_param=0.1, store_covariance=True).fit(X, y)
    np.testing.assert_allclose(p["means"], sk.means_, rtol=0, atol=TOL)
    np.testing.assert_allclose(p["covariances"], sk.covariance_, rtol=0, atol=TOL)


@pytest.mark.parametrize("K", [2, 3])
def test_logistic_coefficients_equal_sklearn(tmp_path, K):
    X, y = blobs(8 + K, K=K)
    X = (X - X.mean(0)) / X.std(0)
    p = shown_params(tmp_path, frame(X, y), "--kind", "logistic", "--C", "0.5")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = LogisticRegression(C=0.5, tol=1e-12, max_iter=10000, solver="newton-cholesky").fit(X, y)
    assert p["coef_classes"] == ([1] if K == 2 else [0, 1, 2])
    np.testing.assert_allclose(p["coef"], sk.coef_, rtol=0, atol=TOL)
    if K == 2:  # multinomial intercepts are defined up to a common shift
        np.testing.assert_allclose(p["intercept"], sk.intercept_, rtol=0, atol=TOL)


def test_text_tables_name_every_parameter(tmp_path):
    X, y = blobs(9)
    table = frame(X, y).append_column("c", pa.array(np.array(["p", "q"])[y % 2].tolist()))
    m = sqlnb.fit(table, "y")
    text = parameters_text(parameters(m))
    assert "gaussian features: mean and variance per class" in text
    assert "categorical features: p(value | class)" in text
    # one row per (feature, statistic) and per (feature, value), one column per class
    lines = text.splitlines()
    x0_mean = next(line for line in lines if line.split()[:2] == ["x0", "mean"])
    assert [float(v) for v in x0_mean.split()[2:]] == pytest.approx(parameters(m)["features"][0]["mean"], rel=1e-5)
    for kind in ("lda", "qda", "logistic"):
        text = parameters_text(parameters(sqlnb.fit(frame(X, y), "y", model=kind)))
        assert ("coefficients" in text) == (kind != "qda") and ("class means" in text) == (kind != "logistic")


# -- the ranking ---------------------------------------------------------------------------

def spam_example() -> pa.Table:
    """The lecture notes' spam example: ham d1 {good}, d2 {very good}; spam d3 {bad},
    d4 {very bad}, d5 {very bad very bad}: word counts per document."""
    return pa.table({"very": [0, 1, 0, 1, 2], "good": [1, 1, 0, 0, 0], "bad": [0, 0, 1, 1, 2],
                     "y": ["ham", "ham", "spam", "spam", "spam"]})


def test_spam_example_under_mle_ranks_the_separating_words_first(tmp_path):
    data = write_parquet(spam_example(), tmp_path / "spam.parquet")
    model = f"{tmp_path}/m.duckdb:spam"
    assert invoke("fit", data, "-y", "y", "--kind", "bernoulli", "--estimator", "mle", "-m", model).exit_code == 0
    shown = invoke("show", "-m", model)
    assert shown.exit_code == 0, shown.stderr
    block = shown.stdout.split("top features")[1].splitlines()
    assert "mutual information" in block[1]
    assert [line.split()[0] for line in block[2:5]] == ["good", "bad", "very"]
    js = json.loads(invoke("show", "-m", model, "--format", "json").stdout)["top_features"]["bernoulli"]
    # A perfect separator carries all the information there is about the class: H(Y).
    h = -(0.4 * math.log(0.4) + 0.6 * math.log(0.6))
    assert js[0]["score"] == pytest.approx(h, abs=1e-12) and js[1]["score"] == pytest.approx(h, abs=1e-12)
    # "very": p(very | ham) = 1/2, p(very | spam) = 2/3, prior (0.4, 0.6); I by hand.
    pv = 0.4 * 0.5 + 0.6 * 2 / 3
    by_hand = sum(pc * (q * math.log(q / pv) + (1 - q) * math.log((1 - q) / (1 - pv)))
                  for pc, q in ((0.4, 0.5), (0.6, 2 / 3)))
    assert js[2]["score"] == pytest.approx(by_hand, abs=1e-12)


def test_mutual_information_is_bounded_by_the_class_entropy_and_reaches_it_only_when_separating():
    rng = np.random.default_rng(10)
    y = rng.integers(0, 3, 300)
    table = pa.table({"exact": [f"v{k}" for k in y], "noisy": [f"v{(k + rng.integers(0, 2))}" for k in y],
                      "none": [f"v{rng.integers(0, 3)}" for _ in y], "y": y})
    for estimator in ("mle", "posterior-mean"):
        m = sqlnb.fit(table, "y", kind="categorical", estimator=estimator)
        ranked = top_features(m)["categorical"]
        assert [e["name"] for e in ranked] == ["exact", "noisy", "none"]
        h = class_entropy(m.log_parameters()["prior"])
        assert all(0 <= e["score"] <= h + 1e-12 for e in ranked)
        if estimator == "mle":
            assert ranked[0]["score"] == pytest.approx(h, abs=1e-12)


def test_multinomial_rules_out_a_class_first():
    m = sqlnb.fit(spam_example(), "y", kind="multinomial", estimator="mle")
    ranked = top_features(m)["multinomial"]
    assert [(e["name"], e.get("rules_out")) for e in ranked] == [("good", ["spam"]), ("bad", ["ham"]), ("very", None)]
    text = show_text(describe(m))
    assert "good    inf  a count rules out 'spam'" in text
    json.dumps(describe(m), allow_nan=False)  # no Infinity in the JSON


def test_a_token_bag_is_counted_not_listed():
    t = pa.table({"body": ["buy cheap now", "hello friend", "cheap offer buy", "see you friend"],
                  "n": [1.0, 2.0, 1.5, 3.0], "y": ["spam", "ham", "spam", "ham"]})
    p = parameters(sqlnb.fit(t, "y", feature_kinds={"body": "multinomial"}))
    assert {"name": "body", "kind": "multinomial", "terms": 8} in p["features"]
    assert "token bag body (multinomial): 8 terms; sqlnb show --top-terms N" in parameters_text(p)
