"""Tied-variance Gaussian naive Bayes (seed 003: covariance matrices
"tied or shared across classes", whose class scores are linear in x): one variance per
feature shared by every class, the pooled within-class variance Σ_c M2_cj / Σ_c n_cj plus
the var_smoothing floor."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from support.cli import invoke

RNG = np.random.default_rng(3)
N = 200
Y = RNG.integers(0, 3, N)
X1 = RNG.normal(2.0 * Y, 1.0 + Y)     # class variances differ: untied, the log-odds are quadratic
X2 = RNG.normal(-Y, 0.5 + 0.5 * Y)
X2[RNG.random(N) < 0.1] = np.nan       # NULLs: no term at fit (stats) or at scoring
TABLE = pa.table({"x1": X1, "x2": pa.array(X2, mask=np.isnan(X2)), "y": Y})


def _jll(model, x1: np.ndarray, x2: float) -> np.ndarray:
    grid = pa.table({"x1": x1, "x2": np.full(len(x1), x2)})
    out = model.score(grid, outputs=("jll",)).fetchnumpy()
    return np.column_stack([out[f"jll_{c}"] for c in model.classes])


def test_log_odds_are_linear_in_x():
    """jll_a − jll_b at x, x + h, x + 2h (x1 varied, x2 held): second difference 0 with a
    tied variance, not without."""
    h = 0.75
    untied = sqlnb.fit(TABLE, "y")
    tied = sqlnb.fit(TABLE, "y", tied_variance=True)
    for x in (-3.0, 0.4, 5.0):
        for model, is_tied in ((tied, True), (untied, False)):
            j = _jll(model, np.array([x, x + h, x + 2 * h]), 0.3)
            for a, b in ((0, 1), (0, 2), (1, 2)):
                odds = j[:, a] - j[:, b]
                second = odds[2] - 2 * odds[1] + odds[0]
                if is_tied:
                    assert abs(second) <= 1e-9 * max(1.0, np.max(np.abs(odds))), (x, a, b, second)
                else:  # −h²·(1/σ²_a − 1/σ²_b): far from 0 as the class variances differ
                    assert abs(second) > 1e-3, (x, a, b, second)


def test_equals_a_numpy_estimator():
    tied = sqlnb.fit(TABLE, "y", tied_variance=True)
    classes = np.unique(Y)
    variances = {}
    for name, x in (("x1", X1), ("x2", X2)):
        ok = ~np.isnan(x)
        means = np.array([x[ok & (Y == c)].mean() for c in classes])
        within = sum(((x[ok & (Y == c)] - means[k]) ** 2).sum() for k, c in enumerate(classes)) / ok.sum()
        variances[name] = (means, within)
    eps = 1e-9 * max(np.nanvar(X1), np.nanvar(X2))  # scikit-learn's floor: var_smoothing × largest variance
    prior = np.log(np.bincount(Y) / N)
    want = np.tile(prior, (N, 1))
    for name, x in (("x1", X1), ("x2", X2)):
        means, within = variances[name]
        var = within + eps
        got_mean, got_var = tied.log_parameters()[name]
        assert np.allclose(got_mean, means, rtol=1e-12, atol=0)
        assert np.allclose(got_var, var, rtol=1e-12, atol=0) and np.all(got_var == got_var[0])
        term = -0.5 * np.log(2 * np.pi * var) - (x[:, None] - means[None, :]) ** 2 / (2 * var)
        want += np.where(np.isnan(x)[:, None], 0.0, term)
    scored = tied.score(TABLE, outputs=("jll", "proba", "prediction")).fetchnumpy()
    jll = np.column_stack([scored[f"jll_{c}"] for c in classes])
    assert jll.shape == (N, 3)
    assert np.allclose(jll, want, rtol=1e-9, atol=1e-9)  # row order kept: row i is row i
    proba = np.exp(want - want.max(axis=1, keepdims=True))
    proba /= proba.sum(axis=1, keepdims=True)
    assert np.allclose(np.column_stack([scored[f"proba_{c}"] for c in classes]), proba, rtol=1e-9, atol=1e-12)
    assert np.array_equal(scored["prediction"], classes[np.argmax(want, axis=1)])


def test_with_params_round_trip_and_show(tmp_path):
    untied = sqlnb.fit(TABLE, "y")
    tied = untied.with_params(tied_variance=True)  # from the statistics: no data read
    fitted = sqlnb.fit(TABLE, "y", tied_variance=True)
    for a, b in zip(tied.log_parameters()["x1"], fitted.log_parameters()["x1"]):
        assert np.array_equal(a, b)
    assert not np.allclose(untied.log_parameters()["x1"][1], tied.log_parameters()["x1"][1])
    db = f"{tmp_path}/m.duckdb"
    tied.save(db, "tied")
    back = sqlnb.load(db, "tied")
    assert back.hyper.tied_variance is True
    assert np.array_equal(back.log_parameters()["x1"][1], tied.log_parameters()["x1"][1])
    assert "tied_variance" not in untied.metadata()["hyperparameters"]  # older models read the same
    assert untied.with_params(tied_variance=np.bool_(True)).metadata()["hyperparameters"]["tied_variance"] is True
    with pytest.raises(sqlnb.SqlnbError, match="tied_variance must be True or False"):
        untied.with_params(tied_variance="yes")

    pq.write_table(TABLE, tmp_path / "t.parquet")
    result = invoke("fit", tmp_path / "t.parquet", "--label", "y", "--tied-variance", "--model", f"{db}:cli")
    assert result.exit_code == 0, result.stderr
    assert sqlnb.load(db, "cli").hyper.tied_variance is True
    text = invoke("show", "--model", f"{db}:cli").stdout
    assert "tied_variance=True" in next(s for s in text.splitlines() if s.startswith("parameters"))
    shown = json.loads(invoke("show", "--model", f"{db}:cli", "--format", "json").stdout)
    assert shown["hyperparameters"]["tied_variance"] is True
    # K means + 1 shared variance per feature: 2 + 2·(3 + 1)
    assert shown["likelihood"]["parameters"] == 2 + 2 * 4
    assert "--tied-variance" in invoke("fit", "--help").stdout
    assert math.isfinite(shown["likelihood"]["bic"])
