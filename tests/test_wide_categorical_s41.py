"""Many categorical columns on DuckDB: counted by GROUPING SETS in blocks past 48 (session 41).

DuckDB planned one statement of many ``histogram()`` aggregates in time and memory that grew
much faster than their number: 200 categorical columns of 12 rows took 10-14 s and 1.4 GB to
fit (100: 0.9 s, 0.4 GB), 840 ran out of 2 GB. Past
:data:`~sqlnb.models.naive_bayes.counts.DUCKDB_HISTOGRAMS` columns the fit counts them as the
other engines do, by GROUPING SETS, :data:`~sqlnb.models.naive_bayes.counts.DUCKDB_GROUPING_SETS`
columns a statement. The counts are the same numbers either way.
"""

from __future__ import annotations

import time
from collections import Counter

import duckdb
import numpy as np
import pytest

import sqlnb
from sqlnb.models.naive_bayes import counts as counts_module
from sqlnb.models.naive_bayes.counts import uses_histogram
from sqlnb.models.naive_bayes.families import Feature
from tests.support.statements import executed


def _table(n_cols: int, rows: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 4, size=(rows, n_cols))
    labels = rng.integers(0, 3, size=rows)
    con = duckdb.connect()
    cols = ", ".join(f"c{j} VARCHAR" for j in range(n_cols))
    con.execute(f"CREATE TABLE t ({cols}, y INTEGER, w DOUBLE)")
    con.executemany(f"INSERT INTO t VALUES ({', '.join('?' * (n_cols + 2))})",
                    [[f"v{v}" for v in row] + [int(c), 1.0 + i % 3] for i, (row, c) in enumerate(zip(values, labels))])
    return con, values, labels


def test_histograms_up_to_48_categorical_columns_on_duckdb_only():
    feats = lambda n: [Feature(f"c{j}", "categorical", "VARCHAR") for j in range(n)]  # noqa: E731
    assert uses_histogram("duckdb", feats(48))
    assert not uses_histogram("duckdb", feats(49))
    assert not uses_histogram("spark", feats(3))
    assert [len(b) for b in counts_module.count_blocks(70, "duckdb")] == [32, 32, 6]


def test_200_categorical_columns_fit_fast_and_count_right(monkeypatch):
    con, values, labels = _table(200, 12)
    seen = executed(monkeypatch)
    t0 = time.perf_counter()
    m = sqlnb.fit(con.table("t"), "y", con=con, kind="categorical", features=[f"c{j}" for j in range(200)])
    took = time.perf_counter() - t0
    assert took < 5.0, took  # 10-14 s on 6a739ab (planning)
    assert not any("HISTOGRAM(" in s.upper() for s in seen)
    assert sum("GROUPING SETS" in s.upper() for s in seen) == 7  # 6 blocks of 32, one of 8
    classes = m.classes
    for j in (0, 57, 199):
        got = m.stats.features[f"c{j}"]
        for ci, c in enumerate(classes):
            want = Counter(f"v{v}" for v, k in zip(values[:, j], labels) if k == c)
            assert {v: n for v, n in zip(got.values, got.counts[ci]) if n} == want


@pytest.mark.parametrize("weighted", [False, True])
def test_the_grouping_sets_counts_equal_the_histogram_counts(monkeypatch, weighted):
    con, values, labels = _table(10, 300, seed=3)
    kw = dict(con=con, kind="categorical", weight="w" if weighted else None,
              features=[f"c{j}" for j in range(10)])
    a = sqlnb.fit(con.table("t"), "y", **kw)
    monkeypatch.setattr(counts_module, "DUCKDB_HISTOGRAMS", 0)
    monkeypatch.setattr(counts_module, "DUCKDB_GROUPING_SETS", 3)
    seen = executed(monkeypatch)
    b = sqlnb.fit(con.table("t"), "y", **kw)
    assert sum("GROUPING SETS" in s.upper() for s in seen) == 4  # 3 + 3 + 3 + 1 columns
    for j in range(10):
        fa, fb = a.stats.features[f"c{j}"], b.stats.features[f"c{j}"]
        assert list(fa.values) == list(fb.values)
        np.testing.assert_array_equal(np.asarray(fa.counts), np.asarray(fb.counts))
    pa_, pb = (m.score(con.table("t"), con=con).to_arrow_table() for m in (a, b))
    assert pa_.num_rows == pb.num_rows == 300
    assert pa_.equals(pb)
