"""The Gaussian fit at the one-scan floor without losing digits.

A column whose first rows' mean is within two standard deviations of 0 is summed
unshifted (K = 0: ``SUM(x)``, ``SUM(x·x)``, no ``x − K`` per value); others keep their
shift. ``M2 = S2 − S1²/n`` is finished in double-double arithmetic, so exact sums give the
nearest double of the exact M2 whatever K is. Where cancellation bites (a class far from
K relative to its spread) or squares overflow, the exact second pass redoes the column;
these tests compare such cases with rational arithmetic (``fractions``), check that the
test data really needs that pass (without it the answer is off), and compare ordinary
data with scikit-learn's ``GaussianNB`` (theta_, var_, probabilities within 1e-9).
"""

from __future__ import annotations

import importlib
from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn.naive_bayes import GaussianNB

import sqlnb
from conftest import frame, scores
from sqlnb import sql
from sqlnb.engines import as_engine

fit_module = importlib.import_module("sqlnb.models.naive_bayes.fit")
gaussian_module = importlib.import_module("sqlnb.models.naive_bayes.families.gaussian")
TOL = 1e-9


def exact(x):
    """(n, mean, M2) of ``x`` in rational arithmetic, each rounded once to a double."""
    fx = [Fraction(float(v)) for v in x]
    n = len(fx)
    mean = sum(fx) / n
    return float(n), float(mean), float(sum((v - mean) ** 2 for v in fx))


def moments_error(model, table, name):
    """Largest relative error of the class means and M2 against :func:`exact`."""
    m = model.stats.features[name]
    y = np.array(table["y"].to_pylist())
    x = np.array(table[name].to_pylist(), dtype=float)
    worst = 0.0
    for k, c in enumerate(model.classes):
        n, mean, m2 = exact(x[y == c])
        assert m.rows[k] == n
        worst = max(worst, abs(m.rows_mean[k] - mean) / max(abs(mean), 1e-300),
                    abs(m.rows_m2[k] - m2) / max(abs(m2), 1e-300) if np.isfinite(m.rows_m2[k]) else np.inf)
    return worst


def offset_table(seed=3):
    """Values 1e9 + noise of 1e-3; class 1 sits 5 above class 0, the first rows mix both,
    so the shift is ~2.5 from each class: S2/M2 ≈ 6e6 (seven digits cancel)."""
    rng = np.random.default_rng(seed)
    n = 6000
    y = rng.integers(0, 2, n)
    x = 1e9 + 5.0 * y + rng.normal(0.0, 1e-3, n)
    return pa.table({"big": x, "y": y})


def test_near_zero_columns_are_summed_without_a_shift():
    rng = np.random.default_rng(0)
    n = 5000
    y = rng.integers(0, 3, n)
    t = pa.table({"z": rng.normal(0.3 * y, 1.0), "far": rng.normal(1e6, 5.0, n), "y": y})
    con = duckdb.connect()
    engine = as_engine(con)
    source = engine.resolve(t)
    features = fit_module.plan_features(source, "y")
    shifts = fit_module.gaussian_shifts(engine, source, features)
    assert shifts["z"] == 0.0 and abs(shifts["far"] - 1e6) < 5.0
    text = sql.render(fit_module.statistics_query(source, "y", None, features, shifts=shifts), "duckdb")
    assert text.count(" - ") == 3  # only "far"'s x − K (in SUM(d) and twice in SUM(d·d))
    assert '"z" AS DOUBLE) - ' not in text


def test_integer_data_unshifted_stays_bit_exact(second_passes):
    # K = 0 here (mean 49.5, sd 29); the sums are exact integers, and the double-double
    # finish of S2 − S1²/n makes M2 the double nearest the exact value.
    rng = np.random.default_rng(1)
    n = 20_000
    y = rng.integers(0, 3, n)
    c = rng.integers(0, 100, n).astype(float)
    t = pa.table({"c": c, "y": y})
    model = sqlnb.fit(t, "y", screen=False)
    assert second_passes == []
    m = model.stats.features["c"]
    for k in range(3):
        assert (m.rows[k], m.rows_mean[k], m.rows_m2[k]) == exact(c[y == k])


def test_sum_of_squares_is_rounded_once():
    # S1 = 3, n = 7: S1²/n = 9/7 is not a double; S2 − 9/7 rounded once.
    s2, s1, n = np.array([1.2857142857142858 + 2.0 ** -40]), np.array([3.0]), np.array([7.0])
    want = float(Fraction(s2[0]) - Fraction(9, 7))
    assert gaussian_module.sum_of_squares(s2, s1, n)[0] == want


def test_large_offset_gets_the_exact_pass(second_passes):
    t = offset_table()
    model = sqlnb.fit(t, "y", screen=False)
    assert second_passes == [["big"]]
    assert moments_error(model, t, "big") < 1e-12


def test_without_the_fallback_the_large_offset_case_loses_digits(monkeypatch):
    # The case above really needs the second pass: with it removed the moments are off.
    monkeypatch.setattr(fit_module, "_exact_m2_pass", lambda *a, **k: None)
    t = offset_table()
    model = sqlnb.fit(t, "y", screen=False)
    assert moments_error(model, t, "big") > 1e-10


def near_1e300_table():
    """A column constant at 1e300 (its squares about any shift but 1e300 itself overflow)
    beside an ordinary one near 0 (summed unshifted)."""
    y = np.array([0, 1] * 50)
    return pa.table({"h": np.full(100, 1e300), "w": np.cos(np.arange(100.0)) + y, "y": y})


def test_constant_near_1e300_in_each_class_is_exact(second_passes):
    t = near_1e300_table()
    model = sqlnb.fit(t, "y", screen=False)
    assert second_passes == [["h"]]
    m = model.stats.features["h"]
    assert list(m.rows_mean) == [1e300, 1e300] and list(m.rows_m2) == [0.0, 0.0]
    assert moments_error(model, t, "w") < 1e-13


def test_without_the_fallback_the_1e300_column_is_refused(monkeypatch):
    # Its overflowed squares would stand as an infinite M2, refused as an overflowing
    # variance, where the exact answer (and scikit-learn's) is 0.
    monkeypatch.setattr(fit_module, "_exact_m2_pass", lambda *a, **k: None)
    with np.errstate(all="ignore"), pytest.raises(sqlnb.SqlnbError, match="'h' over all classes overflows"):
        sqlnb.fit(near_1e300_table(), "y", screen=False)


@pytest.mark.parametrize("loc", [0.0, 0.7, 40.0, -3e4])
def test_ordinary_data_matches_scikit_learn(loc):
    # loc 0 and 0.7: every column unshifted; 40 and -3e4: shifted. theta_, var_ and the
    # probabilities within 1e-9, the same predictions.
    rng = np.random.default_rng(7)
    n, d = 3000, 5
    y = rng.integers(0, 3, n)
    X = loc + rng.normal(0.0, 1.0 + np.arange(d), (n, d)) + y[:, None] * np.array([0.5, -1.0, 2.0, 0.0, 3.0])
    sk = GaussianNB().fit(X, y)
    model = sqlnb.fit(frame(X, y), "y", screen=False)
    params = model.log_parameters()
    for j in range(d):
        mean, var = params[f"x{j}"]
        np.testing.assert_allclose(mean, sk.theta_[:, j], rtol=1e-12, atol=0)
        np.testing.assert_allclose(var, sk.var_[:, j], rtol=1e-12, atol=0)
    got = scores(model, X)
    np.testing.assert_allclose(got["proba"], sk.predict_proba(X), atol=TOL, rtol=0)
    assert list(got["prediction"]) == list(sk.predict(X))
