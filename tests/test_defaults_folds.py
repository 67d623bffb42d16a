"""Cross-validation folds are stratified and balanced by
default, as scikit-learn's ``StratifiedKFold``: per class the fold sizes differ by at most
one (so a class with at least k rows is in every fold), reproducible for a seed, other
rows together under another seed; and cv, select and TAN cross-validation use that one
assignment (:func:`sqlnb.workflows.folds.assign_folds`)."""

from __future__ import annotations

from collections import Counter

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings, strategies as st
from sqlglot import exp
from sklearn.model_selection import StratifiedKFold

import sqlnb
from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.source import read_with
from support.cli import invoke
from support.hypothesis_profiles import examples


def table(n: int, weights, seed: int = 0, dup: bool = False) -> pa.Table:
    """``n`` rows, label ``y`` drawn from classes with ``weights``, two numeric features
    (``dup``: rounded to few values, so many rows are identical), an integer ``id``."""
    rng = np.random.default_rng(seed)
    classes = [f"c{i}" for i in range(len(weights))]
    y = rng.choice(len(classes), size=n, p=np.asarray(weights) / np.sum(weights))
    x = rng.normal(y, 1.0, size=n)
    z = rng.normal(-y, 2.0, size=n)
    if dup:
        x, z = np.round(x), np.round(z / 2)
    return pa.table({"id": pa.array(np.arange(n) * 3 + 1, pa.int64()), "x": x, "z": z,
                     "y": [classes[i] for i in y]})


def assignment(con, name: str, folds: int, seed: int = 0, key=None) -> list[tuple]:
    """``(id, label, fold)`` of every row, ordered by id."""
    from sqlnb.workflows.folds import assign_folds
    source = as_engine(con).resolve(read_with(name))
    folded, fold = assign_folds(source, "y", folds, seed, key)
    query = (exp.select(sql.col("id", "src"), sql.col("y", "src"), fold).from_(folded.from_("src"))
             .order_by(sql.col("id", "src")))
    return con.execute(sql.render(query)).fetchall()


def sizes(rows, folds: int) -> dict:
    """Per class, the rows in each fold."""
    count = Counter((y, f) for _, y, f in rows)
    return {y: [count[(y, f)] for f in range(folds)] for y in sorted({y for _, y, _ in rows})}


@settings(max_examples=examples(40))
@given(st.integers(12, 400), st.integers(2, 10),
       st.lists(st.floats(0.02, 1.0), min_size=2, max_size=5), st.integers(0, 2**31), st.booleans())
def test_per_class_sizes_differ_by_at_most_one(n, folds, weights, seed, dup):
    con = duckdb.connect()
    con.register("t", table(n, weights, seed % 1000, dup))
    rows = assignment(con, "t", folds, seed)
    assert len(rows) == n and {f for *_, f in rows} <= set(range(folds))
    for y, per_fold in sizes(rows, folds).items():
        assert max(per_fold) - min(per_fold) <= 1, (y, per_fold)
        if sum(per_fold) >= folds:
            assert min(per_fold) >= 1, (y, per_fold)  # every class in every fold
    total = Counter(f for *_, f in rows)
    assert max(total.values()) - min(total.values()) <= 1 and len(total) == min(folds, n)


def test_sizes_are_stratified_k_folds():
    """Per class and fold, the row counts of scikit-learn's StratifiedKFold (classes met
    in sorted order, as sqlnb deals them)."""
    t = table(537, [0.5, 0.3, 0.15, 0.05], seed=3)
    order = np.argsort(t["y"].to_pylist(), kind="stable")
    ys = np.array(t["y"].to_pylist())
    for folds in (5, 10):
        want = Counter()
        for i, (_, test) in enumerate(StratifiedKFold(folds).split(np.zeros(len(ys)), ys[order])):
            want.update((y, i) for y in ys[order][test])
        con = duckdb.connect()
        con.register("t", t)
        got = Counter((y, f) for _, y, f in assignment(con, "t", folds, 0))
        assert sorted(got.values()) == sorted(want.values())
        assert {y: sorted(got[(y, f)] for f in range(folds)) for y in set(ys)} == \
               {y: sorted(want[(y, f)] for f in range(folds)) for y in set(ys)}


def test_reproducible_for_a_seed_and_other_for_another():
    con = duckdb.connect()
    con.register("t", table(300, [0.6, 0.3, 0.1], seed=4))
    for key in (None, ["id"], ["x", "z"]):
        a, b, c = (assignment(con, "t", 5, seed, key) for seed in (7, 7, 8))
        assert a == b
        assert a != c and sizes(a, 5) == sizes(c, 5)  # the same sizes, other rows together
    # A NULL label takes no labelled row's place: the labelled rows' folds stay balanced.
    t = table(100, [0.5, 0.5], seed=5)
    ys = [None if i % 7 == 0 else v for i, v in enumerate(t["y"].to_pylist())]
    con.register("n", t.set_column(3, "y", pa.array(ys)))
    rows = [r for r in assignment(con, "n", 4) if r[1] is not None]
    for per_fold in sizes(rows, 4).values():
        assert max(per_fold) - min(per_fold) <= 1


def test_cv_132_rows_5_folds(tmp_path):
    """The reported case: 132 rows, 5 folds (the hash folds gave 18, 39, 34, 20, 21)."""
    data = str(tmp_path / "t.parquet")
    pq.write_table(table(132, [0.39, 0.39, 0.22], seed=6).drop_columns(["id"]), data)
    out = invoke("cv", data, "--label", "y", "--folds", "5")
    assert out.exit_code == 0, out.output
    assert "rows per fold: 27, 27, 26, 26, 26" in out.stdout


def test_cv_select_and_tan_use_the_same_folds():
    """cross_validate (naive and TAN), select_features and the refit on a fold's training
    rows all see the folds of assign_folds: the same rows per fold, and the figures of
    fold i are those of a model fitted on the other folds' rows."""
    from sqlnb.workflows import cv
    from sqlnb.workflows.evaluate import evaluate
    from sqlnb.workflows.select import select_features
    con = duckdb.connect()
    t = table(240, [0.55, 0.35, 0.1], seed=8)
    cats = pa.array([f"v{int(v) % 3}" for v in np.round(np.asarray(t["x"]) * 2)])
    con.register("t", t.append_column("k", cats))
    want = [sum(s) for s in zip(*sizes(assignment(con, "t", 4, 2, ["id"]), 4).values())]
    naive = sqlnb.cross_validate("t", "y", con=con, folds=4, seed=2, key=["id"], exclude=["id"], refit=False)
    tan = sqlnb.cross_validate("t", "y", con=con, folds=4, seed=2, key=["id"], features=["k", "x"],
                               structure="tan", bins="quantile:4", refit=False)
    chosen = select_features("t", "y", con=con, folds=4, seed=2, key=["id"], exclude=["id"], refit=False)
    assert naive.fold_rows == tan.fold_rows == chosen.fold_rows == want
    source = as_engine(con).resolve(read_with("t"))
    folded, fold = cv.assign_folds(source, "y", 4, 2, ["id"])
    for i in range(4):
        model = sqlnb.fit(cv.fold_source(folded, fold, i, held_out=False), "y", con=con, exclude=["id"])
        assert "cv_fold" not in model.feature_names
        ev = evaluate(model, cv.fold_source(folded, fold, i), con)
        assert ev.labelled_rows == want[i]
        assert naive.results[0]["accuracy"][i] == pytest.approx(ev.accuracy, abs=1e-12)


def test_rendered_on_every_engine_as_one_window():
    """The fold is one window over the source, written for PostgreSQL and Spark too (the
    rows land in the same folds there: tests/test_cv_engines.py)."""
    from sqlnb.workflows.folds import assign_folds
    con = duckdb.connect()
    con.register("t", table(50, [0.5, 0.5]))
    source = as_engine(con).resolve(read_with("t"))
    for dialect in ("duckdb", "postgres", "spark"):
        folded, _ = assign_folds(source, "y", 3, 1, ["id"], dialect)
        text = sql.render(folded.expr, dialect).upper()
        assert text.count("ROW_NUMBER()") == 1
        if dialect == "spark":  # Spark sorts NULLs first by default; DuckDB and PostgreSQL last
            assert "NULLS LAST" in text
    with pytest.raises(sqlnb.SqlnbError, match="needs a key"):
        assign_folds(source, "y", 3, 1, None, "postgres")
