"""DuckDB's scoring SELECT of the structures over discrete features (TAN, KDB, AODE and
averages of them) grows as the number of features: each discrete feature's value position
is a prelude column computed once per row, every table a model reads sits in one list per
class written once (:mod:`sqlnb.models.naive_bayes.listed`; AODE's in its own prelude,
:func:`sqlnb.models.naive_bayes.aode.prelude`), and each term is one read of fixed size
(past :data:`~sqlnb.models.naive_bayes.aode.READ_MAX` features, AODE's sum over a
super-parent's children one ``list_sum`` over a list). Before, a TAN or KDB term repeated
its positions' expressions and held a literal of its own table, AODE's class score held
K·F(F−1) reads, and an average re-wrote every member's terms with one literal per AODE
pair table (scikit-learn's breast cancer, 30 MDL-binned columns: 3.6 MB and 22 s for one
row, ``benchmarks/structured_scoring.py``).

The statement DuckDB is given when a model scores in place (``model.score``) holds none
of the tables' numbers: they are bound parameters (:func:`sqlnb.sql.bound_list`), so its
whole text grows as F, AODE's F² cells included; before, their literals made AODE's text
and the averages holding it grow as F² (10 → 20 → 40 features: 2.9x then 3.8x). The
exported SELECT (``to_sql``) keeps them as literals, self-contained.

A deep KDB (kdb:3 … kdb:5, skdb) walks its children down a trie of seen configurations:
one fixed-size expression per depth over every child, the trie a bound list; before,
each class's term repeated each child's walk and the trie was a literal (kdb:4 on breast
cancer: 71.7 kB and 1.0 s for one row).

The sizes are measured, not timed. The probabilities are the exported literal form's (a
CASE per table, run in SQLite) within 1e-12, on rows with NULL, NaN, ±inf and unseen
values; the rows keep their count and order from a Parquet file of many row groups."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlglot
from sqlglot import exp

import sqlnb
from sqlnb.models.naive_bayes import aode
from support.structured import sqlite_input

KINDS = ["tan", "kdb:1", "kdb:2", "aode", "tan+kdb:2", "naive+aode", "tan+kdb:2+aode"]
#: Deep KDB and the selective KDB: their tables are gathered by a fit of their own structure
#: (``skdb`` on :func:`table`'s ``chained`` rows, where it keeps parents).
DEEP = ["kdb:3", "kdb:5", "skdb"]
CLASSES = ["k0", "k1"]


def table(n: int, F: int, seed: int, test: bool = False, chained: bool = False) -> pa.Table:
    """``rid``, label ``y`` (training rows) and ``F`` features: ``c<j>`` categorical
    (values a, b, c) for even j, ``x<j>`` numeric for odd j, each a noisy copy of the label
    or of the feature before it. Test rows hold NULLs, unseen categories (``z``), and
    NaN, +inf and −inf in the numeric columns. ``chained``: feature j's value v_j in 0, 1,
    2 is (v_{j−1} + v_{j−2} + y) mod 3 in 90 % of the rows (the numeric ones v_j plus a
    little noise), so that only parents tell it apart: ``skdb`` keeps some of them."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    cols: dict = {"rid": pa.array(np.arange(n))}
    prev = y
    codes: list = []
    for j in range(F):
        src = y if j % 3 == 0 else prev
        if chained:
            v = rng.integers(0, 3, n)
            if j >= 2:
                v = np.where(rng.random(n) < 0.9, (codes[-1] + codes[-2] + y) % 3, v)
            codes.append(v)
            src = v
        if j % 2 == 0:
            code = np.floor(np.nan_to_num(src, posinf=0.0, neginf=0.0)).astype(int) % 3
            v = code if chained else np.where(rng.random(n) < 0.6, code, rng.integers(0, 3, n))
            text = np.array(["a", "b", "c"], dtype=object)[v]
            if test:
                text[rng.random(n) < 0.05] = "z"
            cols[f"c{j}"] = pa.array(text.tolist(), mask=rng.random(n) < (0.08 if test else 0.02))
        else:
            v = rng.normal(src, 0.1 if chained else 1.0)
            if test:
                v[rng.random(n) < 0.04] = np.nan
                v[rng.random(n) < 0.03] = np.inf
                v[rng.random(n) < 0.03] = -np.inf
            cols[f"x{j}"] = pa.array(v, mask=rng.random(n) < (0.08 if test else 0.02))
        prev = v
    if not test:
        cols["y"] = pa.array([CLASSES[k] for k in y])
    return pa.table(cols)


def fitted(F: int, structure: str = "tan+kdb:2+aode", n: int = 300):
    """A model of ``structure`` over ``F`` features (quantile bins of 3), every kind's counts
    gathered, so that ``with_params(structure=...)`` gives each kind; and a connection
    holding ``train`` and ``test`` (``n`` rows each, :func:`table`'s ``chained`` ones for
    ``skdb``)."""
    con = duckdb.connect()
    chained = structure == "skdb"
    con.register("train", table(n, F, 1, chained=chained))
    con.register("test", table(n, F, 2, test=True, chained=chained))
    features = [c for c in con.table("train").columns if c not in ("rid", "y")]
    kinds = {c: "categorical" if c.startswith("c") else "binned" for c in features}
    model = sqlnb.fit("train", label="y", con=con, features=features, feature_kinds=kinds, bins="quantile:3",
                      structure=structure)
    assert len(model.stats.pairs.features) == F
    return con, model


def of_kind(F: int, kind: str, n: int = 300):
    """:func:`fitted`'s connection and its model of ``kind``: a deep one fitted as such."""
    if kind in DEEP:
        return fitted(F, kind, n)
    con, base = fitted(F, n=n)
    return con, base.with_params(structure=kind)


@pytest.fixture(scope="module")
def by_size():
    return {F: fitted(F) for F in (10, 20, 40)}


@pytest.fixture(scope="module")
def deep_by_size():
    return {kind: {F: fitted(F, kind) for F in (10, 20, 40)} for kind in DEEP}


def select_text(model, con) -> str:
    return model.to_sql("duckdb", source="test", con=con, pretty=False)


def without_literals(text: str) -> str:
    """The SELECT with every string literal emptied: the packed lists of parameters
    (:func:`sqlnb.sql.packed_list`) hold each table's cells, which AODE has F(F−1) of."""
    return re.sub(r"'[^']*'", "''", text)


@pytest.mark.parametrize("kind", KINDS)
def test_the_select_grows_linearly_with_the_features(by_size, kind):
    """Doubling the features at most doubles the SELECT (with 10 % to spare): the whole
    text for TAN and KDB (their tables grow as the features), the text but its packed
    lists for AODE and the averages holding it (their cells grow as F²). Before: AODE
    10 → 20 → 40 features 2.6x then 3.3x (K·F(F−1) reads), TAN and KDB held a literal per
    child and class."""
    sizes = {}
    for F, (con, base) in by_size.items():
        text = select_text(base.with_params(structure=kind), con)
        sizes[F] = len(without_literals(text) if "aode" in kind else text)
    assert sizes[20] <= 2.2 * sizes[10] and sizes[40] <= 2.2 * sizes[20], sizes


def scoring_text(model, con, monkeypatch) -> str:
    """The SELECT text DuckDB is given when ``model.score`` runs on ``con`` (the longest
    statement: the others read the source's columns)."""
    given = []
    run = duckdb.DuckDBPyConnection.sql

    def recorded(self, query, *args, **kwargs):
        given.append(query)
        return run(self, query, *args, **kwargs)

    monkeypatch.setattr(duckdb.DuckDBPyConnection, "sql", recorded)
    rows = model.score("test", con=con, outputs=("proba",), keep=["rid"]).fetchall()
    monkeypatch.undo()
    assert len(rows) == con.table("test").shape[0]
    return max(given, key=len)


@pytest.mark.parametrize("kind", KINDS)
def test_the_whole_text_duckdb_scores_with_grows_linearly(by_size, kind, monkeypatch):
    """The whole text DuckDB scores with, tables included, at most doubles when the
    features double (with 10 % to spare), and holds no list literal (no
    ``string_split``). Before, every table was a literal in it, and AODE's F² cells made
    it 10 → 20 → 40 features 66 → 193 → 724 kB (ratios 2.9 and 3.8), ``tan+kdb:2+aode``'s
    90 → 248 → 839 kB; now 25 → 5.6 → 8.9 kB and 26 → 12 → 21 kB (at 10 features
    AODE's F(F−1) reads per class, :data:`~sqlnb.models.naive_bayes.aode.READ_MAX`)."""
    sizes = {}
    for F, (con, base) in by_size.items():
        text = scoring_text(base.with_params(structure=kind), con, monkeypatch)
        assert len(re.findall(r"STRING_SPLIT\(", text, flags=re.I)) == 0, F
        sizes[F] = len(text)
    assert sizes[20] <= 2.2 * sizes[10] and sizes[40] <= 2.2 * sizes[20], sizes


def depths(model) -> int:
    """A deep KDB's number of (child, parent) pairs: its trie's depths summed over children."""
    return sum(len((p,) if isinstance(p, str) else p) for p in model._tree.parent.values())


@pytest.mark.parametrize("kind", DEEP)
def test_deep_kdb_text_duckdb_scores_with_grows_linearly(deep_by_size, kind, monkeypatch):
    """A deep KDB's whole text as DuckDB scores with holds no list literal, and grows as
    its features and their parents: kdb:K's at most doubles when the features double
    (with 10 % to spare); ``skdb``, whose choice of k varies with the features, keeps its
    size per feature and per (child, parent) within 10 %. The trie of seen configurations
    is a bound list like the tables, and each child's walk down it one column per depth.
    Before, the trie was a literal in it (growing with the configurations seen) and every
    class's term repeated the walk: kdb:5 10 → 20 → 40 features 25 → 64 → 143 kB, now
    5.9 → 7.9 → 12 kB."""
    sizes, per = {}, {}
    for F, (con, model) in deep_by_size[kind].items():
        text = scoring_text(model, con, monkeypatch)
        assert len(re.findall(r"STRING_SPLIT\(", text, flags=re.I)) == 0, F
        sizes[F] = len(text)
        per[F] = len(text) / (F + depths(model))
    if kind == "skdb":
        assert per[20] <= 1.1 * per[10] and per[40] <= 1.1 * per[20], (sizes, per)
    else:
        assert sizes[20] <= 2.2 * sizes[10] and sizes[40] <= 2.2 * sizes[20], sizes


@pytest.mark.parametrize("kind", DEEP)
def test_deep_kdb_walks_every_child_in_one_expression_per_depth(deep_by_size, kind):
    """The walk down the tries is written once for every child and class: per depth one
    ``list_transform`` over the children reading the trie list 5 times (the step, and the
    child's constants: step offset, parent, multiplier, row base; the first depth no
    multiplier), 2 more for the places; so as many reads at 10 features as at 40. Each
    class reads the children's cells in one ``list_sum`` over the prelude's list of
    places. Before, every class's term walked again, the node of depth j written j times
    (kdb:5, 40 features, 2 classes: 1,090 reads of the trie)."""
    reads = {}
    for F, (con, model) in deep_by_size[kind].items():
        text = select_text(model, con)
        depth = max(len((p,) if isinstance(p, str) else p) for p in model._tree.parent.values())
        reads[F] = len(re.findall(r'LIST_EXTRACT\("sqlnb_trie"', text, flags=re.I))
        assert reads[F] == 5 * depth + 2, (F, depth)
        assert len(re.findall(r"LIST_SUM\(", text, flags=re.I)) == len(model.classes)
    assert depths(deep_by_size[kind][40][1]) > len(deep_by_size[kind][40][1]._tree.parent) >= 10  # several parents
    if kind != "skdb":  # skdb's k varies with the features
        assert reads[10] == reads[40]


def test_models_scored_in_place_combine_and_keep_their_own_tables(by_size):
    """Two models' scored relations bind their tables under names of their own: one joins
    or unions the other, each with its own probabilities, equal to its exported literal
    form's on DuckDB within 1e-12. The two are one structure with another smoothing: a
    model whose parameters changed reads its own tables, not lists built for the other."""
    con, base = by_size[20]
    one = base.with_params(structure="tan+kdb:2+aode")
    two = one.with_params(alpha=4.0)
    names = [f"proba_{c}" for c in CLASSES]
    a, b = (m.score("test", con=con, outputs=("proba",), keep=["rid"]).project(f"{i} AS side, *")
            for i, m in enumerate((one, two)))
    both = a.union(b).order("side, rid").fetchall()
    assert [(r[0], r[1]) for r in both] == [(i, r) for i in range(2) for r in range(300)]
    got = [np.array([r[2:] for r in rows], dtype=float) for rows in (both[:300], both[300:])]
    assert np.abs(got[0] - got[1]).max() > 1e-3  # not the one model's tables twice
    for m, g in zip((one, two), got):
        export = con.sql(m.to_sql("duckdb", source="test", con=con, outputs=("proba",), pretty=False))
        want = np.array(export.select("rid", *names).fetchall(), dtype=float)
        assert [int(r) for r in want[:, 0]] == list(range(300))
        np.testing.assert_allclose(g, want[:, 1:], rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["tan", "kdb:1", "kdb:2", "tan+kdb:2", "tan+kdb:2+aode"])
def test_each_class_reads_one_list_of_every_tree_table(by_size, kind):
    """A tree's or an average's tables are one packed list per class (an AODE member's
    ratio tables another, and its eligibility one more), and each discrete feature's
    position is computed once: a categorical column is named by the kept columns and by
    its ENUM cast in the prelude, nowhere else (before: one list per child and class, and
    the positions repeated in every term that reads them)."""
    con, base = by_size[40]
    model = base.with_params(structure=kind)
    text = select_text(model, con)
    K = len(model.classes)
    lists = K * (2 if "aode" in kind else 1) + (1 if "aode" in kind else 0)
    assert len(re.findall(r"STRING_SPLIT\(", text, flags=re.I)) == lists
    for name in ("c0", "c38"):  # with an AODE member, its slots give the tree members' positions
        assert len(re.findall(rf'"src"\."{name}"', text)) == 2, name


def test_aode_past_read_max_sums_over_the_super_parents_once_per_class(by_size):
    """Past READ_MAX features a class's AODE term is one expression of fixed size: a
    ``list_sum`` over the slots inside a lambda over the super-parents' rows, and one over
    the naive rows read at the slots, with |S| one ``list_sum`` in the prelude (before: a
    ``list_sum`` per super-parent and class, 2 · 40); no read per pair, and each position
    is written once (in the list of slots); up to it, the F(F−1) reads per class."""
    con, base = by_size[40]
    model = base.with_params(structure="aode")
    assert len(model._aode.features) == 40 > aode.READ_MAX
    text = select_text(model, con)
    assert len(re.findall(r"LIST_SUM\(", text, flags=re.I)) == 2 * 2 + 1
    assert len(re.findall(r'"src"\."c0"', text)) == 2  # kept, and its position in the list of slots
    small = fitted(8, "aode")[1]
    assert len(small._aode.features) == 8 <= aode.READ_MAX
    text = select_text(small, con)
    assert len(re.findall(r"LIST_SUM\(", text, flags=re.I)) == 0
    assert len(re.findall(r"LIST_EXTRACT\(\"?sqlnb_aode_table", text, flags=re.I)) == 2 * 8 * 7


@pytest.mark.parametrize("F", [8, 12])
@pytest.mark.parametrize("kind", KINDS + DEEP)
def test_probabilities_equal_the_exported_literal_form(kind, F):
    """DuckDB's scores against ``to_sql("sqlite")`` (each table a CASE over literals) run
    in SQLite, row by row within 1e-12: NULL, NaN (SQLite holds NULL there), ±inf and
    unseen values included, on 100 rows; 8 features (AODE's reads) and 12 (its list sums)."""
    con, model = of_kind(F, kind)
    con.register("test", table(100, F, 2, test=True, chained=kind == "skdb"))
    outputs = ("jll", "proba")
    names = [f"{o}_{c}" for o in outputs for c in CLASSES]
    got = model.score("test", con=con, outputs=outputs, keep=["rid"]).select("rid", *names).fetchall()
    test = con.table("test").to_arrow_table()
    nan_free = pa.table({c: pa.array([None if isinstance(v, float) and np.isnan(v) else v
                                      for v in test[c].to_pylist()], type=test[c].type) for c in test.column_names})
    lite = sqlite_input(nan_free)
    cur = lite.execute(model.to_sql("sqlite", source="input", outputs=outputs, key="rid"))
    at = [d[0] for d in cur.description]
    want = [[r[at.index(c)] for c in ("rid", *names)] for r in cur.fetchall()]
    assert [r[0] for r in got] == [r[0] for r in want] == list(range(test.num_rows))
    np.testing.assert_allclose(np.array([r[1:] for r in got], dtype=float),
                               np.array([r[1:] for r in want], dtype=float), rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", KINDS + DEEP)
def test_rows_keep_count_and_order_from_many_row_groups(tmp_path, kind):
    """3,000 rows in row groups of 64 read by 4 threads: one row out per row in, in order,
    and the scoring is one SELECT."""
    con, model = of_kind(12, kind)
    path = tmp_path / "test.parquet"
    pq.write_table(table(3000, 12, 5, test=True, chained=kind == "skdb"), path, row_group_size=64)
    con.execute("SET threads = 4")
    rows = model.score(str(path), con=con, outputs=("proba", "prediction"), keep=["rid"]).fetchall()
    assert [r[0] for r in rows] == list(range(3000))
    statements = sqlglot.parse(model.to_sql("duckdb", source=str(path), con=con, pretty=False), read="duckdb")
    assert len(statements) == 1 and isinstance(statements[0], exp.Select)
