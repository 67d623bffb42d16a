"""Wide models: Gaussian and Bernoulli class terms as dot products over lists (DuckDB).

From ``WIDE_MIN`` columns of a family the scoring SELECT writes its terms as a few
``list_dot_product`` per class (sqlnb/models/naive_bayes/wide.py). The probabilities must
stay those of the per-term form: scikit-learn's on complete rows, and a numpy
implementation that leaves NULL features out of the sum, within 1e-9.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy.special import softmax
from sklearn.naive_bayes import BernoulliNB, GaussianNB

import sqlnb
from sqlnb.models.naive_bayes.wide import WIDE_MIN

F, N = WIDE_MIN + 44, 300


def _data(kind: str, nulls: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, N)
    if kind == "gaussian":
        # far from 0 against the spread (x ≈ 1000 ± 1): the form that expands the square
        # about 0 would lose the digits that tell the classes apart
        X = 1000.0 + rng.normal(size=(N, F)) * (1 + 0.02 * y[:, None]) + 0.01 * y[:, None]
    else:
        X = (rng.random((N, F)) < 0.3 + 0.1 * y[:, None]).astype(float)
    if nulls:
        X[rng.random((N, F)) < 0.05] = np.nan
    cols = {f"x{j}": pa.array(X[:, j], mask=np.isnan(X[:, j])) for j in range(F)}
    return X, y, pa.table({"id": np.arange(N), **cols, "y": y})


def _proba(model, table) -> tuple[np.ndarray, list]:
    con = duckdb.connect()
    out = model.score(table, con=con, outputs=("proba",), keep=["id"]).to_arrow_table().to_pydict()
    assert out["id"] == list(range(N))  # one row out per row in, in order
    return np.array([out[f"proba_{c}"] for c in model.classes], dtype=float).T, out


def _numpy_jll(model, X: np.ndarray, kind: str) -> np.ndarray:
    """Σ over the present features of each class's term, plus the log prior."""
    params = model.log_parameters()
    jll = np.tile(np.asarray(params["prior"], dtype=float), (len(X), 1))
    for j in range(F):
        x = X[:, j]
        present = ~np.isnan(x)
        if kind == "gaussian":
            mean, var = params[f"x{j}"]
            t = -0.5 * np.log(2 * np.pi * var)[None, :] - (x[:, None] - mean[None, :]) ** 2 / (2 * var[None, :])
        else:
            flp, neg = params[f"x{j}"]
            t = np.where((x > 0)[:, None], flp[None, :], neg[None, :])
        jll += np.where(present[:, None], t, 0.0)
    return jll


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_wide_model_scores_like_scikit_learn(kind):
    X, y, table = _data(kind, nulls=False)
    m = sqlnb.fit(table, "y", kind=kind, exclude=["id"])
    assert "list_dot_product" in m.to_sql(source="t").lower()  # the wide shape is the one scored
    p, _ = _proba(m, table)
    sk = (GaussianNB() if kind == "gaussian" else BernoulliNB(alpha=1.0)).fit(X, y)
    np.testing.assert_allclose(p, sk.predict_proba(X), rtol=0, atol=1e-9)
    assert 0.05 < p.max(axis=1).min()  # probabilities that are not all 0 or 1: a real check


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_wide_model_leaves_null_features_out(kind):
    X, y, table = _data(kind, nulls=True, seed=1)
    m = sqlnb.fit(table, "y", kind=kind, exclude=["id"])
    p, out = _proba(m, table)
    np.testing.assert_allclose(p, softmax(_numpy_jll(m, X, kind), axis=1), rtol=0, atol=1e-9)


def test_an_infinite_value_gives_no_probabilities():
    X, y, table = _data("gaussian", nulls=False, seed=2)
    m = sqlnb.fit(table, "y", kind="gaussian", exclude=["id"])
    bad = table.set_column(1, "x0", pa.array([np.inf] + list(X[1:, 0])))
    con = duckdb.connect()
    out = m.score(bad, con=con, outputs=("proba", "prediction"), keep=["id"]).to_arrow_table().to_pydict()
    assert out["prediction"][0] is None and out[f"proba_{m.classes[0]}"][0] is None
    assert all(v is not None for v in out["prediction"][1:])


def test_below_the_threshold_the_per_term_shape_stays():
    rng = np.random.default_rng(3)
    table = pa.table({**{f"x{j}": rng.normal(size=50) for j in range(WIDE_MIN - 1)}, "y": rng.integers(0, 2, 50)})
    assert "list_dot_product" not in sqlnb.fit(table, "y", kind="gaussian").to_sql(source="t").lower()
