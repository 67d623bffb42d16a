"""Gaussian statistics from sums about a shift (sqlnb/families/gaussian.py, sqlnb/fit.py).

The training scan sums ``x − K`` and ``(x − K)²`` with K the (8-bit-rounded) mean of the
first rows. These tests check the result against exact rational arithmetic, that a
well-conditioned column needs no second pass, and that an ill-conditioned one (shift far
from a class's values, a column constant in a class) gets the exact second pass.
"""

from __future__ import annotations

from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn.naive_bayes import ComplementNB, MultinomialNB

import sqlnb
from tests.support.statements import executed


def exact_moments(x, w=None):
    """(Σw, mean, Σw(x − mean)²) in rational arithmetic, as floats."""
    fx = [Fraction(float(v)) for v in x]
    fw = [Fraction(1)] * len(fx) if w is None else [Fraction(float(v)) for v in w]
    n = sum(fw)
    mean = sum(a * b for a, b in zip(fw, fx)) / n
    return float(n), float(mean), float(sum(b * (a - mean) ** 2 for a, b in zip(fx, fw)))


def check(model, table, name, weight=None):
    m = model.stats.features[name]
    y = np.array(table["y"].to_pylist())
    x = np.array(table[name].to_pylist(), dtype=float)
    w = np.array(table[weight].to_pylist(), dtype=float) if weight else None
    for k, c in enumerate(model.classes):
        sel = (y == c) & ~np.isnan(x)
        n, mean, m2 = exact_moments(x[sel])
        # a mean is as good as its scale allows: |error| ~ eps (|mean| + sd)
        scale = abs(mean) + (m2 / n) ** 0.5
        assert m.rows[k] == n and m.rows_mean[k] == pytest.approx(mean, rel=0, abs=1e-14 * scale)
        assert m.rows_m2[k] == pytest.approx(m2, rel=1e-13, abs=1e-26 * n * scale ** 2), (name, c)
        if w is not None:
            wn, wmean, wm2 = exact_moments(x[sel], w[sel])
            assert m.n[k] == pytest.approx(wn, rel=1e-13)
            assert m.mean[k] == pytest.approx(wmean, rel=0, abs=1e-14 * scale)
            assert m.m2[k] == pytest.approx(wm2, rel=1e-12, abs=1e-26 * wn * scale ** 2), (name, c)


def test_well_conditioned_columns_take_one_scan(second_passes):
    rng = np.random.default_rng(0)
    n = 20_000
    y = rng.integers(0, 3, n)
    t = pa.table({"a": rng.normal(3.0 * y, 1.0 + y), "b": rng.normal(1e6, 5.0, n) + 2.0 * y,
                  "c": rng.integers(0, 100, n).astype(float), "y": y})
    model = sqlnb.fit(t, "y")
    assert second_passes == []
    for name in ("a", "b", "c"):
        check(model, t, name)
    # integer-valued data and an 8-bit shift: every sum is exact, so the moments are too
    m = model.stats.features["c"]
    for k in range(3):
        assert (m.rows_m2[k], m.rows_mean[k]) == exact_moments(t["c"].to_numpy()[y == k])[2:0:-1]


def test_shift_far_from_a_class_gets_the_exact_pass(second_passes):
    # the first 5,000 rows (where the shift is taken) are all class 0 near 0; class 1
    # sits at 1e9 with unit spread: S2/M2 ~ 1e18, no digit of M2 would survive
    rng = np.random.default_rng(1)
    y = np.r_[np.zeros(5000, int), rng.integers(0, 2, 5000)]
    x = np.where(y == 0, rng.normal(0.0, 1.0, y.size), 1e9 + rng.normal(0.0, 1.0, y.size))
    t = pa.table({"x": x, "z": rng.normal(0.0, 1.0, y.size), "y": y})
    model = sqlnb.fit(t, "y")
    assert second_passes == [["x"]]  # only the ill-conditioned column is read again
    check(model, t, "x")
    check(model, t, "z")


def test_constant_column_in_a_class_has_zero_variance(second_passes):
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 3000)
    t = pa.table({"x": np.where(y == 0, 0.1, rng.normal(5.0, 1.0, y.size)), "y": y})
    model = sqlnb.fit(t, "y")
    assert second_passes == [["x"]]  # S2 > 0 = M2: the digits are gone, so recompute
    m = model.stats.features["x"]
    # the corrected two-pass: Σ(x − θ̂) restores θ = 0.1 and M2 = 0 exactly
    assert m.rows_mean[0] == 0.1 and m.rows_m2[0] == 0.0
    check(model, t, "x")


def test_weighted_moments_and_nulls(second_passes):
    rng = np.random.default_rng(3)
    n = 5000
    y = rng.integers(0, 2, n)
    x = rng.normal(100.0 + y, 2.0)
    x[rng.random(n) < 0.2] = np.nan
    t = pa.table({"x": pa.array([None if np.isnan(v) else v for v in x], pa.float64()),
                  "w": rng.uniform(0.1, 3.0, n), "y": y})
    model = sqlnb.fit(t, "y", weight="w")
    assert second_passes == []  # weights no longer need a second scan
    check(model, t, "x", weight="w")


def test_ill_conditioned_weighted_column(second_passes):
    rng = np.random.default_rng(4)
    y = np.r_[np.zeros(5000, int), rng.integers(0, 2, 3000)]
    x = np.where(y == 0, rng.normal(0.0, 1.0, y.size), -1e12 + rng.normal(0.0, 3.0, y.size))
    t = pa.table({"x": x, "w": rng.uniform(0.5, 2.0, y.size), "y": y})
    model = sqlnb.fit(t, "y", weight="w")
    assert second_passes == [["x"]]
    check(model, t, "x", weight="w")


@pytest.mark.parametrize("kind", ["bernoulli", "multinomial"])
def test_count_families_count_present_values_with_count_not_a_filter(kind):
    """Unweighted, the rows where a column is present are ``COUNT(x)`` and Bernoulli's
    present-and-on rows ``COUNT_IF(x > t)``: the same numbers as ``COUNT(*) FILTER (WHERE
    ...)`` at a fraction of the cost in DuckDB (a Bernoulli fit of 10M rows x 20
    columns took 1.93 s with filters, ~0.55 s without; benchmarks/fit_floor.py). Weighted
    counts are ``SUM(CASE WHEN cond THEN w END)``: no FILTER clause either."""
    import duckdb
    from sqlnb.models.naive_bayes.fit import plan_features, statistics_query
    from sqlnb.source import resolve

    rng = np.random.default_rng(0)
    x = rng.integers(0, 4, 50).astype(float)
    x[::7] = np.nan
    t = pa.table({"x": pa.array(x, mask=np.isnan(x)), "w": rng.random(50), "y": rng.integers(0, 2, 50)})
    con = duckdb.connect()
    src = resolve(t, con)
    plain = statistics_query(src, "y", None, plan_features(src, "y", None, kind, exclude=["w"])).sql("duckdb")
    weighted = statistics_query(src, "y", "w", plan_features(src, "y", "w", kind)).sql("duckdb")
    assert "FILTER" not in plain.upper() and "FILTER" not in weighted.upper()
    # Bernoulli: x > threshold; multinomial: its negative values (x < 0: a COUNT_IF, not MIN)
    assert plain.upper().count("COUNT_IF(") == 1
    assert "CASE WHEN" in weighted.upper()
    got = sqlnb.fit(t, "y", kind=kind, exclude=["w"], screen=False)
    present = (~np.isnan(x)).astype(int)
    y = t.column("y").to_numpy()
    np.testing.assert_array_equal(got.stats.features["x"].n, [present[y == c].sum() for c in (0, 1)])


# --------------------------------------------------------------------------------------------
# Multinomial and complement fits count negative values with COUNT_IF, not MIN.
#
# Grouped by class, DuckDB's MIN of a DOUBLE cost as much as the count and the sum of a
# column together: 20 count columns, 10M rows, 3 classes, the statistics query took 1.75x a
# bare ``SUM`` scan with MIN and 1.32x with ``COUNT_IF(x < 0)`` (benchmarks/README.md).
# The count says all the fit needs: whether a column holds a negative value,
# which the fit refuses in one line.
# --------------------------------------------------------------------------------------------


def _statistics_sql(monkeypatch, data, **kwargs) -> str:
    seen = executed(monkeypatch)
    sqlnb.fit(data, "y", screen=False, **kwargs)
    return next(t for t in seen if "GROUP BY" in t)


@pytest.fixture()
def counts():
    rng = np.random.default_rng(4)
    X = rng.poisson(2.0, size=(300, 4)).astype(float)
    y = rng.integers(0, 3, 300)
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES " + ", ".join(
        "(" + ", ".join(f"{v}::DOUBLE" for v in row) + f", {int(c)})" for row, c in zip(X, y))
        + ") AS v(a, b, c, d, y)")
    return con, X, y


@pytest.mark.parametrize("kind", ["multinomial", "complement"])
def test_the_statistics_query_has_no_min(monkeypatch, counts, kind):
    con, X, y = counts
    text = _statistics_sql(monkeypatch, con.table("t"), kind=kind)
    assert "MIN(" not in text.upper()
    assert text.upper().count("COUNT_IF(") == 4


@pytest.mark.parametrize(("kind", "oracle"), [("multinomial", MultinomialNB), ("complement", ComplementNB)])
def test_probabilities_still_equal_scikit_learn(counts, kind, oracle):
    con, X, y = counts
    m = sqlnb.fit(con.table("t"), "y", kind=kind, screen=False)
    got = m.score(con.table("t"), con=con, outputs=("proba", "prediction")).to_arrow_table()
    assert got.num_rows == len(y)
    want = oracle().fit(X, y)
    proba = np.column_stack([got.column(f"proba_{c}").to_numpy() for c in want.classes_])
    np.testing.assert_allclose(proba, want.predict_proba(X), rtol=0, atol=1e-9)
    assert got.column("prediction").to_pylist() == list(want.predict(X))


@pytest.mark.parametrize("weighted", [False, True])
def test_a_negative_count_is_refused_in_one_line_naming_how_many(counts, weighted):
    con, X, y = counts
    con.execute("UPDATE t SET c = -1.5 WHERE rowid IN (3, 7)")
    con.execute("ALTER TABLE t ADD COLUMN w DOUBLE DEFAULT 2.0")
    with pytest.raises(sqlnb.SqlnbError) as e:
        sqlnb.fit(con.table("t"), "y", kind="multinomial", screen=False, weight="w" if weighted else None)
    text = str(e.value)
    assert "\n" not in text
    assert "column 'c'" in text and "needs counts >= 0" in text and "--feature-kind c=gaussian" in text
    classes = {int(y[3]), int(y[7])}
    assert "2 negative counts" in text if len(classes) == 1 else "1 negative count " in text


def test_nan_is_still_named(counts):
    con, X, y = counts
    con.execute("UPDATE t SET b = 'NaN'::DOUBLE WHERE rowid = 5")
    with pytest.raises(sqlnb.SqlnbError, match="column 'b' .* holds NaN or infinite values"):
        sqlnb.fit(con.table("t"), "y", kind="multinomial", screen=False)


def test_zero_and_null_are_no_negative_counts(counts):
    con, X, y = counts
    con.execute("UPDATE t SET a = 0.0 WHERE rowid < 50")
    con.execute("UPDATE t SET d = NULL WHERE rowid BETWEEN 50 AND 80")
    m = sqlnb.fit(con.table("t"), "y", kind="multinomial", screen=False)
    assert [f.name for f in m.features] == ["a", "b", "c", "d"]
