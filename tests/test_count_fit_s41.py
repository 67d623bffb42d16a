"""Multinomial and complement fits count negative values with COUNT_IF, not MIN (session 41).

Grouped by class, DuckDB's MIN of a DOUBLE cost as much as the count and the sum of a
column together: 20 count columns, 10M rows, 3 classes, the statistics query took 1.75x a
bare ``SUM`` scan with MIN and 1.32x with ``COUNT_IF(x < 0)`` (benchmarks/README.md,
session 41). The count says all the fit needs: whether a column holds a negative value,
which the fit refuses in one line.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pytest
from sklearn.naive_bayes import ComplementNB, MultinomialNB

import sqlnb
from tests.support.statements import executed


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
