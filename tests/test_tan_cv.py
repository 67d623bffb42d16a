"""Cross-validation of tree-augmented naive Bayes ("TAN + selection").

The pooled query (:func:`sqlnb.workflows.cv.pooled_summary_query`: every fold model in one
statement) reads a tree child's conditional table as one DuckDB list per class: its size
grows with the number of fold models, not with the cells of the tables. When each cell was
a CASE branch, 10-fold TAN on adult (41 × 16 cells a child and class) ran past 6 GB.
The figures equal fold-by-fold refits, log loss included, with a value that only some
folds' training rows hold (so the fold models' value lists differ).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sqlglot import exp

import sqlnb
from sqlnb.workflows import cv, select
from sqlnb.workflows.evaluate import evaluate
from sqlnb.workflows.folds import assign_folds
from sqlnb.source import resolve
from sqlnb.engines import as_engine
from sqlnb import sql

KINDS = {"p": "categorical", "c": "categorical", "flag": "bernoulli"}


def chain_table(n: int, values: int, seed: int = 3) -> pa.Table:
    """``p`` follows the class, ``c`` mostly copies ``p``, ``flag`` follows ``c``; both
    categorical columns take ``values`` values (NULLs here and there), and ``c`` holds one
    row of the value ``rare``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    p = np.where(rng.random(n) < 0.6, y * (values // 2), rng.integers(0, values, n))
    c = np.where(rng.random(n) < 0.7, p, rng.integers(0, values, n))
    c_txt = [f"c{v}" for v in c]
    c_txt[7] = "rare"
    flag = rng.random(n) < np.where(c % 2 == 0, 0.8, 0.3)
    return pa.table({
        "rid": pa.array(np.arange(n), pa.int64()),
        "p": pa.array([f"p{v}" for v in p], pa.string(), mask=rng.random(n) < 0.05),
        "c": pa.array(c_txt, pa.string(), mask=rng.random(n) < 0.05),
        "flag": pa.array(flag, pa.bool_(), mask=rng.random(n) < 0.05),
        "y": pa.array([["no", "yes"][v] for v in y], pa.string()),
    })


def pooled_tree(values: int, monkeypatch) -> tuple[exp.Select, list, sqlnb.CVResult]:
    """The pooled query of a 4-fold TAN cross-validation on :func:`chain_table`, its fold
    models and its result."""
    con = duckdb.connect()
    con.register("t", chain_table(400, values))
    built = []

    def spy(models, *args, **kwargs):
        built.append((cv_pooled(models, *args, **kwargs), models))
        return built[-1][0]

    cv_pooled = cv.pooled_summary_query
    monkeypatch.setattr(cv, "pooled_summary_query", spy)
    r = sqlnb.cross_validate("t", "y", con=con, folds=4, key=["rid"], features=list(KINDS), feature_kinds=KINDS,
                             structure="tan", refit=False)
    monkeypatch.undo()
    assert len(built) == 1 and built[0][0] is not None
    return built[0][0], built[0][1], r


def test_pooled_query_does_not_grow_with_the_conditional_tables(monkeypatch):
    """25 values a column (625 cells a child and class) give the pooled query as many CASE
    branches as 3 values do: one per fold model, class and position, none per cell."""
    small, _, _ = pooled_tree(3, monkeypatch)
    large, models, r = pooled_tree(25, monkeypatch)
    branches = [sum(1 for _ in q.find_all(exp.If)) for q in (small, large)]
    assert branches[0] == branches[1]
    widest = max(len(c.args.get("ifs") or []) for c in large.find_all(exp.Case))
    assert widest == 4  # the CASE over the 4 fold models
    assert len(r.results[0]["accuracy"]) == 4
    # A categorical tree feature's position (an ENUM cast) is computed once per row for
    # the fold models that hold the same values (a rare value missing from some folds'
    # training rows gives a feature more than one value list), not once per model,
    # class and term.
    lists = {(f, tuple(m.stats.features[f].values)) for m in models for f in ("p", "c")}
    assert 2 < len(lists) < 2 * len(models)
    assert sum(1 for a in large.find_all(exp.Anonymous) if a.name.lower() == "enum_code") == len(lists)


@pytest.mark.parametrize("bins", [None, "mdl"])
def test_tan_cv_figures_equal_fold_by_fold_scoring(bins):
    """Each fold's accuracy and log loss, from the pooled query, equal those of the fold's
    TAN model evaluated on the fold by its own scoring query: a TAN fit on the other folds
    (categorical and Bernoulli columns, and a column MDL-binned on the other folds' rows, as
    cross-validation bins it)."""
    con = duckdb.connect()
    table = chain_table(600, 6)
    g = np.random.default_rng(5).normal(size=table.num_rows) + (np.array(table["y"].to_pylist()) == "yes")
    con.register("t", table.append_column("g", pa.array(g)))
    features = [*KINDS, "g"] if bins else list(KINDS)
    options = {"bins": bins} if bins else {}
    r = sqlnb.cross_validate("t", "y", con=con, folds=4, key=["rid"], features=features, feature_kinds=KINDS,
                             structure="tan", refit=False, **options)
    source = resolve("t", con)
    folded, fold = assign_folds(source, "y", 4, 0, ["rid"])
    con.execute("CREATE TEMP TABLE folded AS " + sql.render(
        exp.select(*[sql.col(c, "src") for c in source.columns], exp.alias_(fold, "fold", quoted=True))
        .from_(folded.from_("src"))))
    source = folded
    plan = cv._naive_bayes_plan(as_engine(con), source, "y", fold, 4, features, None,
                                {"feature_kinds": KINDS, "structure": "tan", **options}, pairs=True)
    for i in range(4):
        con.execute(f"CREATE OR REPLACE TEMP VIEW fit_{i} AS SELECT * EXCLUDE (fold) FROM folded WHERE fold <> {i}")
        con.execute(f"CREATE OR REPLACE TEMP VIEW held_{i} AS SELECT * EXCLUDE (fold) FROM folded WHERE fold = {i}")
        m = sqlnb.fit(f"fit_{i}", "y", con=con, features=features, feature_kinds=KINDS, structure="tan", **options)
        assert [f.edges for f in m.features] == [f.edges for f in plan.fold_model(i, {}).features]
        assert m.tree() and m.hyper.structure == "tan"
        e = evaluate(m, f"held_{i}", con=con)
        assert r.fold_rows[i] == e.labelled_rows
        assert abs(r.results[0]["accuracy"][i] - e.accuracy) < 1e-12
        assert abs(r.results[0]["log_loss"][i] - e.log_loss) < 1e-9


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_selection_step_figures_equal_each_subset_models_own_scoring():
    """A wrapper-selection step over TAN subsets (:func:`sqlnb.workflows.select.subset_figures`)
    scores every candidate's fold models in one terms query, tree children's terms shared
    between the candidates that keep the same edge: each fold's error and log loss equal
    those of the subset's fold model evaluated on the fold by its own scoring query."""
    con = duckdb.connect()
    table = chain_table(600, 6)
    g = np.random.default_rng(5).normal(size=table.num_rows) + (np.array(table["y"].to_pylist()) == "yes")
    con.register("t", table.append_column("g", pa.array(g)))
    engine = as_engine(con)
    features = [*KINDS, "g"]
    source = resolve("t", con)
    folded, fold = assign_folds(source, "y", 4, 0, ["rid"])
    name, copy, fold = cv.materialize(engine, folded, "y", fold, features, None)
    plan = cv._naive_bayes_plan(engine, copy, "y", fold, 4, features, None,
                                {"feature_kinds": KINDS, "structure": "tan", "bins": "mdl"}, pairs=True)
    fold_models = [plan.fold_model(i, {}) for i in range(4)]
    subsets = [["p", "c", "flag", "g"], ["p", "c", "g"], ["c", "flag", "g"], ["p", "flag"], ["g"]]
    models = [[m.select(s) for m in fold_models] for s in subsets]
    assert select.terms_summary_query(models, copy, "y", fold, "k") is not None  # the shared-terms query
    figures, reads = select.subset_figures(engine, copy, "y", fold, fold_models, subsets)
    assert reads == 1
    for i in range(4):
        con.execute(f"CREATE OR REPLACE TEMP VIEW held_{i} AS SELECT * FROM {sql.render(sql.table(name))} AS src "
                    f"WHERE {sql.render(fold)} = {i}")
    for s, f, row in zip(subsets, figures, models):
        assert any(m.tree() for m in row) or len(s) < 2
        for i, m in enumerate(row):
            e = evaluate(m, f"held_{i}", con=con)
            assert abs(f["fold_error"][i] - (1 - e.accuracy)) < 1e-12
            assert abs(f["fold_log_loss"][i] - e.log_loss) < 1e-9
    cv.drop_copy(engine, name)
