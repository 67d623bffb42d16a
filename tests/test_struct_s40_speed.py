"""DuckDB's scoring SELECT of TAN and KDB at spambase's shape (binned columns): since s40 a
child's term is one list read per class of a table padded with a missing slot per axis
(:func:`tan.padded_read`), and a binned column's position is a sum of comparisons
(:meth:`Binned.counted_index`), not a CASE chain repeated in every pick. On 1de9335 a
TAN child's term was ``COALESCE`` of two reads (KDB(2): four) with three CASE chains
each, which made spambase's scoring SQL 200 kB (TAN) and 640 kB (KDB(2)) for 920 rows.

The probabilities are the portable form's (unchanged; run in SQLite) on rows at every cut
point, NaN, ±inf, NULL, and NULL or unseen categories: every slot of the padded tables."""

from __future__ import annotations

import math
import sqlite3

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import sqlnb

CLASSES = ["k0", "k1", "k2"]
STRUCTURES = ["tan", "kdb:1", "kdb:2", "aode", "tan+kdb:2"]


def table(n: int, seed: int, edges: dict | None = None) -> pa.Table:
    """``x`` and ``z`` (DOUBLE, binned), ``i`` (BIGINT, binned), ``a`` (categorical),
    ``flag`` (Bernoulli), correlated through the label, with NULLs; with ``edges`` (a fitted
    model's cut points) also a row at every cut point and rows of NaN, ±inf and unseen ``a``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.normal(y, 1.0)
    z = x + rng.normal(0, 0.7, n)
    i = np.round(rng.normal(3 * y, 2.0)).astype(np.int64)
    a = np.where(rng.random(n) < 0.6, y, rng.integers(0, 3, n))
    cols = {"x": x.tolist(), "z": z.tolist(), "i": i.tolist(), "a": [f"a{v}" for v in a],
            "flag": (rng.random(n) < 0.2 + 0.3 * y).tolist()}
    for c in cols:
        cols[c] = [None if rng.random() < 0.08 else v for v in cols[c]]
    if edges is not None:
        extra = [*((c, e) for c in ("x", "z") for e in edges[c]), *(("i", e) for e in edges["i"]),
                 *((c, v) for c in ("x", "z") for v in (math.nan, math.inf, -math.inf)), ("a", "a_new")]
        for c, v in extra:
            for name in cols:
                cols[name].append(v if name == c else cols[name][len(cols[name]) % n])
            y = np.append(y, 0)
    m = len(cols["x"])
    return pa.table({"rid": pa.array(np.arange(m), pa.int64()), "x": pa.array(cols["x"], pa.float64()),
                     "z": pa.array(cols["z"], pa.float64()), "i": pa.array(cols["i"], pa.int64()),
                     "a": pa.array(cols["a"], pa.string()), "flag": pa.array(cols["flag"], pa.bool_()),
                     "y": pa.array([CLASSES[v] for v in y[:m]], pa.string())})


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    con = duckdb.connect()
    con.register("train", table(400, 1))
    kinds = {"x": "binned", "z": "binned", "i": "binned", "a": "categorical", "flag": "bernoulli"}
    base = sqlnb.fit("train", label="y", con=con, feature_kinds=kinds, bins="quantile:4", structure="kdb:2")
    edges = {f.name: f.edges for f in base.features if f.kind == "binned"}
    test = table(120, 2, edges)
    con.register("test", test)
    # pyarrow's Parquet statistics leave NaN out, which let DuckDB fold NULLIF(x, 'NaN') away
    # (Family.value): the NaN guard of a binned position must hold over such a file too
    parquet = tmp_path_factory.mktemp("parquet") / "test.parquet"
    pq.write_table(test, parquet)
    con.execute(f"CREATE VIEW test_parquet AS SELECT * FROM read_parquet('{parquet}')")
    lite = sqlite3.connect(":memory:")
    lite.execute("CREATE TABLE input (rid INTEGER, x REAL, z REAL, i INTEGER, a TEXT, flag INTEGER, y TEXT)")
    rows = [tuple(None if v is None or (isinstance(v, float) and math.isnan(v)) else
                  (int(v) if isinstance(v, bool) else v) for v in r.values()) for r in test.to_pylist()]
    lite.executemany("INSERT INTO input VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return con, lite, kinds, len(rows)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_duckdb_scores_equal_the_portable_form(data, structure):
    con, lite, kinds, n = data
    model = sqlnb.fit("train", label="y", con=con, feature_kinds=kinds, bins="quantile:4", structure=structure)
    outputs = ("jll", "proba")
    names = [f"{g}_{c}" for g in outputs for c in CLASSES]
    rel = model.score("test", con=con, outputs=outputs, keep=["rid"])
    got = rel.select("rid", *names).fetchall()
    assert [r[0] for r in got] == list(range(n))  # one row each, in input order
    assert model.score("test_parquet", con=con, outputs=outputs, keep=["rid"]).select("rid", *names).fetchall() == got
    cur = lite.execute(model.to_sql("sqlite", source="input", outputs=outputs, key="rid"))
    at = [d[0] for d in cur.description]
    want = [[r[at.index(c)] for c in ("rid", *names)] for r in cur.fetchall()]
    assert [r[0] for r in want] == list(range(n))
    np.testing.assert_allclose(np.array([r[1:] for r in got], dtype=float),
                               np.array([r[1:] for r in want], dtype=float), rtol=0, atol=1e-12)


def reads(e: exp.Expression) -> int:
    return sum(1 for x in e.find_all(exp.Anonymous) if x.name.lower() == "list_extract")


@pytest.mark.parametrize("structure", ["tan", "kdb:2"])
def test_a_child_term_is_one_read_without_a_case(data, structure):
    """Binned columns only (spambase's case): per class, each child's term is one
    LIST_EXTRACT and holds no CASE (1de9335: a TAN term held 2 reads and 3 CASE chains
    over the bins; a two-parent KDB term 4 reads and 7 chains)."""
    con, _, kinds, _ = data
    model = sqlnb.fit("train", label="y", con=con, features=["x", "z", "i"], feature_kinds=kinds,
                      bins="quantile:4", structure=structure)
    children = model._tree.parent
    assert len(children) == 2 and (structure == "tan" or any(not isinstance(p, str) for p in children.values()))
    terms = model._terms_module().child_terms(model._tree, model._scoring_features(None), model.stats,
                                              model.log_parameters(), "duckdb", None)
    for child in children:
        for term in terms[child]:
            assert reads(term) == 1, (child, term.sql("duckdb"))
            assert term.find(exp.Case) is None, (child, term.sql("duckdb"))
