"""Categorical counts of many columns: cut into blocks under each engine's limits.

One GROUPING SETS counts query over every categorical column passes engines' limits: a
naive Bayes fit on Spark of 64 or more categorical columns failed
(GROUPING_SIZE_LIMIT_EXCEEDED), as did MDL-binned columns' value counts there, the
exported counts on PostgreSQL past 831 columns ("target lists can have at most 1664
entries") and in SQLite past 500 ("too many terms in compound SELECT"). The counts are
cut into blocks under each limit, one statement each
(:func:`sqlnb.models.naive_bayes.counts.count_blocks`), at fit and in the export, and
give DuckDB's counts; under every limit they stay one statement. On DuckDB, which counts
with ``histogram()``, past 48 categorical columns the fit counts by GROUPING SETS in
blocks too (the second part of this file)."""

from __future__ import annotations

import sqlite3
import time
from collections import Counter

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.models.naive_bayes import counts as counts_module
from sqlnb.models.naive_bayes.counts import uses_histogram
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.workflows.export import fit_queries
from tests.support.statements import executed

TOL = 1e-12


def _table(cats: int, rows: int = 200, nums: int = 0, seed: int = 41) -> pa.Table:
    """``cats`` categorical columns (3 values and ~5% NULL), ``nums`` small-integer columns
    (for MDL bins), integer weights ``w`` (sums exact in any order), a fold ``f`` and a
    label ``y`` of 3 classes."""
    rng = np.random.default_rng(seed)
    cols = {f"c{j}": pa.array([None if rng.random() < 0.05 else f"v{rng.integers(3)}" for _ in range(rows)])
            for j in range(cats)}
    cols.update({f"x{j}": pa.array(rng.integers(0, 6, rows).astype(float)) for j in range(nums)})
    cols["w"] = pa.array(rng.integers(1, 4, rows).astype(float))
    cols["f"] = pa.array(np.arange(rows) % 2)
    cols["y"] = pa.array([f"k{i}" for i in rng.integers(3, size=rows)])
    cols["id"] = pa.array(np.arange(rows))
    return pa.table(cols)


def _cats(F: int) -> list[Feature]:
    return [Feature(f"c{j}", "categorical", "VARCHAR") for j in range(F)]


def _same_counts(got: dict, want: dict, where: str) -> None:
    """Every categorical feature's values and per-class counts alike within TOL."""
    assert set(got) == set(want), where
    for name, w in want.items():
        g = got[name]
        assert g.values == w.values, (where, name)
        assert np.allclose(g.counts, w.counts, rtol=0, atol=TOL), (where, name)


def _exported_counts(statements, rows_of, cats: list[Feature], classes: list) -> dict:
    """{feature: (values, counts)} read off the exported counts statements (``k``, then
    ``v<j>``, ``g<j>`` of the statement's columns, ``n``), each column in one statement."""
    from sqlnb.models.naive_bayes.families.categorical import counts_from
    hists = {f.name: [dict() for _ in classes] for f in cats}
    seen: set = set()
    for text, names in statements:
        js = [int(c[1:]) for c in names if c.startswith("v")]
        assert not seen & set(js)
        seen |= set(js)
        for r in rows_of(text):
            for i, j in enumerate(js):
                if int(r[2 + 2 * i]) == 0 and r[1 + 2 * i] is not None:
                    hists[cats[j].name][classes.index(r[0])][r[1 + 2 * i]] = float(r[-1])
    assert seen == set(range(len(cats)))
    return {f.name: counts_from(hists[f.name], f) for f in cats}


def _counts_statements(F: int, dialect: str, weight: str | None = "w", table: str = "t") -> list:
    """(rendered text, output column names) of each exported counts statement."""
    trees = fit_queries(table, "y", _cats(F), dialect, weight)[1:]
    return [(sql.render(q, dialect, pretty=False), [e.alias_or_name for e in q.selects]) for q in trees]


def test_blocks_stay_within_each_engines_limit():
    """Each dialect's blocks cover the columns in order within its limit; under it (on
    Spark up to 63 columns, 62 with a fold) one block, as before; DuckDB's GROUPING SETS
    (weighted, or past 48 categorical columns) in blocks of 32."""
    from sqlnb.models.naive_bayes.counts import count_blocks
    for F in (1, 62, 63, 64, 70, 500, 501, 831, 832, 1599):
        for keys in (1, 2):
            for dialect, fits in (("spark", lambda b: len(b) + keys <= 64),
                                  ("postgres", lambda b: 2 * len(b) + keys + 1 <= 1664),
                                  ("sqlite", lambda b: len(b) <= sqlite3.connect(":memory:").getlimit(
                                      sqlite3.SQLITE_LIMIT_COMPOUND_SELECT)),
                                  ("duckdb", lambda b: len(b) <= 32)):
                blocks = count_blocks(F, dialect, keys)
                assert [j for b in blocks for j in b] == list(range(F)) and all(map(fits, blocks)), (F, dialect)
                one = {"spark": 64 - keys, "postgres": 831 if keys == 1 else 830, "sqlite": 500, "duckdb": 32}[dialect]
                assert len(blocks) == (1 if F <= one else -(-F // one)), (F, dialect, keys)


def test_export_under_the_limit_is_the_one_statement():
    """Up to the limit the export holds one counts statement over every column, ``v0`` …
    ``v<F−1>``; past it one per block, each naming its columns by their place."""
    for dialect, under, over, sizes in (("spark", 63, 70, [63, 7]), ("postgres", 831, 840, [831, 9])):
        (one,) = _counts_statements(under, dialect)
        assert one[1] == ["k", *[f"{c}{j}" for j in range(under) for c in "vg"], "n"]
        split = _counts_statements(over, dialect)
        assert [len(names) for _, names in split] == [2 * s + 2 for s in sizes]
        assert split[1][1][:3] == ["k", f"v{sizes[0]}", f"g{sizes[0]}"]


def test_exported_counts_in_sqlite_past_its_compound_select_limit(monkeypatch):
    """SQLite glues one SELECT per column with UNION ALL; past its compound-SELECT limit the
    export is split and gives DuckDB's weighted counts. The limit is lowered to 8 on both
    sides (building 500 SELECTs of 1,000 columns takes a minute); its real value is
    SQLite's default."""
    from sqlnb.models.naive_bayes import counts
    db = sqlite3.connect(":memory:")
    assert counts.SQLITE_COMPOUND_SELECTS == db.getlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT)
    monkeypatch.setattr(counts, "SQLITE_COMPOUND_SELECTS", 8)
    db.setlimit(sqlite3.SQLITE_LIMIT_COMPOUND_SELECT, 8)
    table = _table(20, rows=60)
    db.execute("CREATE TABLE t (" + ", ".join(f'"{c}"' for c in table.column_names) + ")")
    db.executemany(f"INSERT INTO t VALUES ({', '.join('?' * table.num_columns)})",
                   [tuple(r.values()) for r in table.to_pylist()])
    con = duckdb.connect()
    con.register("t", table)
    model = sqlnb.fit("t", "y", con=con, weight="w", features=[f"c{j}" for j in range(20)])
    statements = _counts_statements(20, "sqlite")
    assert len(statements) == 3
    got = _exported_counts(statements, lambda text: db.execute(text).fetchall(), _cats(20), list(model.classes))
    _same_counts(got, model.stats.features, "sqlite export")


@pytest.mark.spark  # starts a Spark session
def test_spark_fit_past_64_columns_equals_duckdb():
    """70 categorical and 64 MDL-binned columns x 200 rows on Spark (refused on 6a739ab:
    GROUPING_SIZE_LIMIT_EXCEEDED): weighted and unweighted counts, the binned columns'
    value counts, the weighted model's probabilities scored on Spark, per-fold counts of
    63 columns with a fold (65 grouping columns in one statement) and the exported counts
    run on Spark all equal DuckDB's within 1e-12."""
    from support.engines import spark_engine
    from sqlnb.models.naive_bayes.fit import collect_statistics_by
    from sqlnb.source import resolve
    table = _table(70, nums=64)
    con = duckdb.connect()
    con.register("t", table)
    names = [f"c{j}" for j in range(70)] + [f"x{j}" for j in range(64)]
    kinds = {f"x{j}": "binned" for j in range(64)}
    with spark_engine({"t": table}) as engine:
        for weight in (None, "w"):
            kw = dict(weight=weight, features=names, feature_kinds=kinds, bins="mdl")
            want, got = sqlnb.fit("t", "y", con=con, **kw), sqlnb.fit("t", "y", con=engine, **kw)
            assert got.classes == want.classes
            assert [(f.name, f.kind, f.edges) for f in got.features] == [(f.name, f.kind, f.edges) for f in want.features]
            _same_counts({n: got.stats.features[n] for n in names[:70]},
                         {n: want.stats.features[n] for n in names[:70]}, f"spark fit, weight={weight}")
            for n in names[70:]:
                for a in ("values", "rows", "n"):
                    assert np.allclose(getattr(got.stats.cuts[n], a), getattr(want.stats.cuts[n], a), rtol=0, atol=TOL)
        outputs = ("proba",)
        p_got = pa.Table.from_pylist([r.asDict() for r in got.score("t", con=engine, outputs=outputs,
                                                                      keep=["id"]).collect()]).sort_by("id")
        p_want = want.score("t", con=con, outputs=outputs, keep=["id"]).to_arrow_table().sort_by("id")
        for c in (c for c in p_want.column_names if c.startswith("proba_")):
            assert np.allclose(p_got[c].to_numpy(), p_want[c].to_numpy(), rtol=0, atol=TOL), c
        fold, cats = exp.column("f", "src", quoted=True), [f for f in want.features if f.kind == "categorical"][:63]
        by_got = collect_statistics_by(engine, engine.resolve("t"), "y", cats, fold)
        by_want = collect_statistics_by(con, resolve("t", con), "y", cats, fold)
        assert set(by_got) == set(by_want) == {0, 1}
        for g in by_want:
            _same_counts(by_got[g].features, by_want[g].features, f"spark fold {g}")
        statements = _counts_statements(70, "spark")
        assert len(statements) == 2
        exported = _exported_counts(statements, lambda text: [tuple(r) for r in engine.spark.sql(text).collect()],
                                    _cats(70), list(want.classes))
    _same_counts(exported, {n: want.stats.features[n] for n in names[:70]}, "spark export")


@pytest.mark.postgres  # starts a PostgreSQL server
def test_postgres_past_its_1664_select_columns_equals_duckdb():
    """840 categorical columns x 12 rows (the counts query's 1,682 columns were refused on
    6a739ab: "target lists can have at most 1664 entries"): the fit on PostgreSQL and the
    exported counts run there give DuckDB's counts, which DuckDB fits 120 columns at a time
    (one fit of all 840 runs out of memory in DuckDB, with or without weights)."""
    from support.engines import postgres_engine
    F = 840
    table = _table(F, rows=12)
    con = duckdb.connect()
    con.register("t", table)
    names = [f"c{j}" for j in range(F)]
    parts = [sqlnb.fit("t", "y", con=con, features=names[s:s + 120]) for s in range(0, F, 120)]
    want = parts[0]
    assert all(p.classes == want.classes for p in parts)
    want.stats.features.update({n: c for p in parts for n, c in p.stats.features.items()})
    with postgres_engine({"t": table}) as engine:
        got = sqlnb.fit("t", "y", con=engine, features=names)
        _same_counts(got.stats.features, want.stats.features, "postgres fit")

        def rows_of(text):
            with engine.con.cursor() as cur:
                cur.execute(text)
                return cur.fetchall()
        exported = _exported_counts(_counts_statements(F, "postgres", None), rows_of, _cats(F), list(want.classes))
    _same_counts(exported, want.stats.features, "postgres export")


# --------------------------------------------------------------------------------------------
# Many categorical columns on DuckDB: counted by GROUPING SETS in blocks past 48.
#
# DuckDB planned one statement of many ``histogram()`` aggregates in time and memory that grew
# much faster than their number: 200 categorical columns of 12 rows took 10-14 s and 1.4 GB to
# fit (100: 0.9 s, 0.4 GB), 840 ran out of 2 GB. Past
# :data:`~sqlnb.models.naive_bayes.counts.DUCKDB_HISTOGRAMS` columns the fit counts them as the
# other engines do, by GROUPING SETS, :data:`~sqlnb.models.naive_bayes.counts.DUCKDB_GROUPING_SETS`
# columns a statement. The counts are the same numbers either way.
# --------------------------------------------------------------------------------------------


def _duckdb_table(n_cols: int, rows: int, seed: int = 0):
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
    con, values, labels = _duckdb_table(200, 12)
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
    con, values, labels = _duckdb_table(10, 300, seed=3)
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
