"""Cross-validation cuts binned columns inside each fold (sqlnb.workflows.fold_bins), and
chooses a pruned token bag's vocabulary on each fold model's training rows.

Each fold's model takes the cut points :func:`sqlnb.fit` computes on that fold's training
rows (the other folds), never the held-out fold's labels: MDL (which reads the labels)
and quantiles, one spec for every column or per column, naive and tree-augmented. Checked
on the first 3,000 rows of UCI adult (../shared/data), the folds written out by the
documented fold rule (test_cv.oracle_folds) and fitted and evaluated fold by fold by hand.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.engines import as_engine
from sqlnb.source import read_with
from sqlnb.workflows import cv
from sqlnb.workflows.folds import assign_folds
from support import shared_data as sd
from support.cv_oracle import oracle_folds

#: The tests on adult's rows.
ADULT = pytest.mark.shared_data

FOLDS = 3
FEATURES = ["age", "education-num", "hours-per-week", "capital-gain", "sex", "relationship"]
BINNED = ["age", "education-num", "hours-per-week", "capital-gain"]
#: (bins, structure): the plans checked.
CASES = {
    "mdl": ("mdl", "naive"),
    "quantile": ("quantile:4", "naive"),
    "per-column": ({"capital-gain": "mdl", None: "quantile:5"}, "naive"),
    "tan-mdl": ("mdl", "tan"),
}


@pytest.fixture(scope="module")
def adult():
    """(the rows, each row's fold by the documented rule)."""
    sd.require_shared_data("adult")
    con = duckdb.connect()
    con.execute("CREATE TABLE rows AS " + sd.render(sd.adult_train_query()) + " LIMIT 3000")
    con.execute(f"CREATE TABLE feats AS SELECT income, {', '.join(chr(34) + c + chr(34) for c in FEATURES)} FROM rows")
    return oracle_folds(con, "feats", "income", FOLDS, 0)


def by_hand(adult, bins, structure) -> list:
    """Per fold: (``sqlnb.fit`` on the other folds' rows, ``sqlnb.evaluate`` on the fold)."""
    rows, fold = adult
    out = []
    for i in range(FOLDS):
        con = duckdb.connect()
        train, held = rows.filter(pa.array(fold != i)), rows.filter(pa.array(fold == i))
        con.register("train", train)
        con.register("held", held)
        model = sqlnb.fit(con.table("train"), "income", con=con, features=FEATURES, bins=bins, structure=structure)
        out.append((model, sqlnb.evaluate(model, con.table("held"), con=con)))
    return out


def fold_models(adult, bins, structure) -> list:
    """The fold models of cross_validate's naive Bayes plan, on the same rows."""
    con = duckdb.connect()
    con.register("rows", adult[0])
    engine = as_engine(con)
    source, fold = assign_folds(engine.resolve(read_with(con.table("rows"))), "income", FOLDS, 0, None)
    plan = cv._naive_bayes_plan(engine, source, "income", fold, FOLDS, FEATURES, None,
                                {"bins": bins, "structure": structure}, pairs=structure != "naive")
    assert plan.fold_rows == [1000] * FOLDS
    return [plan.fold_model(i, {}) for i in range(FOLDS)]


def edges(model) -> dict:
    return {f.name: tuple(f.edges) for f in model.features if f.kind == "binned"}


@ADULT
@pytest.mark.parametrize("case", list(CASES))
def test_each_fold_cuts_where_fit_on_its_training_rows_cuts(adult, case):
    bins, structure = CASES[case]
    hand = by_hand(adult, bins, structure)
    got = fold_models(adult, bins, structure)
    for (model, _), mine in zip(hand, got):
        assert set(edges(model)) == set(BINNED)
        assert edges(mine) == edges(model)  # exactly: the same counts, the same cut points
        # and the same per-(class, bin) counts, so the same log-probabilities
        for f in BINNED:
            np.testing.assert_array_equal(mine.stats.features[f].counts, model.stats.features[f].counts)
    # The folds cut differently (the test can tell the held-out rows apart at all).
    assert len({tuple(sorted(edges(m).items())) for m, _ in hand}) > 1


@ADULT
@pytest.mark.parametrize("case", list(CASES))
def test_cv_fold_figures_are_fit_and_evaluate_fold_by_fold(adult, case):
    bins, structure = CASES[case]
    hand = by_hand(adult, bins, structure)
    con = duckdb.connect()
    con.register("rows", adult[0])
    got = sqlnb.cross_validate(con.table("rows"), "income", con=con, folds=FOLDS, features=FEATURES, bins=bins,
                               structure=structure, refit=True)
    assert got.fold_rows == [e.labelled_rows for _, e in hand] == [1000] * FOLDS
    (r,) = got.results
    assert r["accuracy"] == [e.accuracy for _, e in hand]
    np.testing.assert_allclose(r["log_loss"], [e.log_loss for _, e in hand], rtol=0, atol=1e-9)
    assert got.scans["scoring"] == 1  # still every fold from one scoring read
    # The refit model cuts on every row, as sqlnb.fit on them.
    full = sqlnb.fit(con.table("rows"), "income", con=con, features=FEATURES, bins=bins, structure=structure)
    assert edges(got.best_model) == edges(full)


@ADULT
@pytest.mark.parametrize("structure", ["naive", "kdb:2"])
def test_select_step_figures_are_fit_and_evaluate_fold_by_fold(adult, structure):
    """sqlnb select (wrapper selection) builds its candidates from the same fold models:
    each step's per-fold error and log loss are those of ``sqlnb.fit`` of the step's
    subset on the other folds' rows (its own MDL cut points), evaluated on the fold;
    KDB(2)'s joint counts too, which each step counts over each fold's own bins."""
    rows, fold = adult
    con = duckdb.connect()
    con.register("rows", rows)
    got = sqlnb.select_features(con.table("rows"), "income", con=con, folds=FOLDS, features=FEATURES, bins="mdl",
                                structure=structure, direction="backward", refit=False)
    assert got.fold_rows == [1000] * FOLDS
    if structure != "naive":
        assert got.scans["statistics"] > 1 + FOLDS  # a step's joint counts: one scan, and one per fold
    for step in got.path[:3]:
        for i in range(FOLDS):
            c = duckdb.connect()
            c.register("train", rows.filter(pa.array(fold != i)))
            c.register("held", rows.filter(pa.array(fold == i)))
            model = sqlnb.fit(c.table("train"), "income", con=c, features=step["subset"], bins="mdl",
                              structure=structure)
            e = sqlnb.evaluate(model, c.table("held"), con=c)
            assert abs(step["fold_error"][i] - (1.0 - e.accuracy)) < 1e-12, (step["subset"], i)
            assert abs(step["fold_log_loss"][i] - e.log_loss) < 1e-9, (step["subset"], i)


def bag_table() -> pa.Table:
    """300 documents, two classes with overlapping vocabularies, and a rare term each."""
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(40)]
    y = rng.choice(["a", "b"], 300)
    docs = [" ".join(rng.choice(words[:20] if c == "a" else words[10:], 6)) + f" rare{i % 50}"
            for i, c in enumerate(y)]
    return pa.table({"id": np.arange(300), "doc": docs, "y": y})


@pytest.mark.parametrize("text", [{"max_features": 15}, {"min_df": 5}, {"select_k": 8},
                                  {"min_df": 0.05, "max_features": 12}])
def test_a_pruned_bags_vocabulary_is_chosen_on_the_training_rows(text):
    """min_df, max_df, max_features and select_k choose terms from the rows as a whole:
    each fold's model keeps the terms ``sqlnb.fit`` on its training rows keeps (not the
    union of each training fold's own choice), with the same figures on the fold."""
    con = duckdb.connect()
    con.register("t", bag_table())
    options = {"features": ["doc"], "feature_kinds": {"doc": "multinomial"}, "text": text}
    got = sqlnb.cross_validate("t", "y", con=con, folds=FOLDS, key=["id"], refit=True, **options)
    source, fold = assign_folds(as_engine(con).resolve(read_with("t")), "y", FOLDS, 0, ["id"])
    plan = cv._naive_bayes_plan(as_engine(con), source, "y", fold, FOLDS, ["doc"], None,
                                {k: v for k, v in options.items() if k != "features"})
    for i in range(FOLDS):
        model = sqlnb.fit(cv.fold_source(source, fold, i, held_out=False), "y", con=con, **options)
        assert plan.fold_model(i, {}).stats.features["doc"].terms == model.stats.features["doc"].terms
        e = sqlnb.evaluate(model, cv.fold_source(source, fold, i), con=con)
        assert got.results[0]["accuracy"][i] == e.accuracy
        assert abs(got.results[0]["log_loss"][i] - e.log_loss) < 1e-9
    full = sqlnb.fit("t", "y", con=con, **options)
    assert got.best_model.stats.features["doc"].terms == full.stats.features["doc"].terms


@pytest.mark.postgres
def test_per_fold_cut_points_on_postgres_equal_duckdbs():
    """On PostgreSQL the folds' value counts come from the GROUPING SETS count query with
    the fold in every set: the same cut points, so the same figures, as in DuckDB."""
    from support.cli import mixed_table
    from support.engines import postgres_engine

    table = mixed_table(300, seed=5)
    con = duckdb.connect()
    con.register("t", table)
    args = {"folds": FOLDS, "key": ["id"], "exclude": ["id"], "bins": "mdl", "refit": True}
    want = sqlnb.cross_validate("t", "y", con=con, **args)
    with postgres_engine({"t": table}) as engine:
        got = sqlnb.cross_validate("t", "y", con=engine, **args)
        fitted = sqlnb.fit("t", "y", con=engine, exclude=["id"], bins="mdl")  # fit's count query, no fold
    assert got.fold_rows == want.fold_rows
    assert got.results[0]["accuracy"] == want.results[0]["accuracy"]
    np.testing.assert_allclose(got.results[0]["log_loss"], want.results[0]["log_loss"], rtol=0, atol=1e-9)
    assert edges(got.best_model) == edges(want.best_model) == edges(fitted) and edges(want.best_model)
