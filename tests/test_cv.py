"""Cross-validation: one read of the source per grid (two without the copy), fold figures equal to refits.

The refits are the oracle, and use nothing of sqlnb.workflows.cv: the folds are the rows
the documented rule (sqlnb/workflows/folds.py) deals to each fold, computed here with
numpy over DuckDB's ``hash()``; each fold's model is a plain ``sqlnb.fit`` on the other
folds' rows, and its accuracy and log loss are scikit-learn's on its per-row predictions
and probabilities."""

from __future__ import annotations

import importlib

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from conftest import frame
from sqlnb.models.base import Model
from sqlnb.workflows import cv
from support.cv_oracle import assert_matches_refits
from support.statements import counting_view


def mixed(seed: int = 0, n: int = 240):
    """Numeric and categorical columns, three classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 3)) + 0.8 * y[:, None]
    colour = np.array(["red", "green", "blue"], dtype=object)[(y + rng.integers(0, 2, n)) % 3]
    return frame(X, y).append_column("colour", pa.array(colour))


def nb_data(seed: int = 0, n: int = 300):
    """Gaussian columns with NULLs, a categorical column with NULLs and one with many rare
    values (so held-out folds hold values their training folds never saw), three classes."""
    rng = np.random.default_rng(seed)
    t = mixed(seed, n)
    x1 = t["x1"].to_numpy(zero_copy_only=False).copy()
    x1[rng.random(n) < 0.1] = np.nan
    colour = t["colour"].to_pylist()
    colour = [None if rng.random() < 0.05 else c for c in colour]
    y = t["y"].to_numpy()
    rare = [f"r{v}" for v in rng.integers(0, 40, n) + 40 * (y == 2)]
    return (t.set_column(1, "x1", pa.array(x1, mask=np.isnan(x1)))
            .set_column(t.column_names.index("colour"), "colour", pa.array(colour, pa.string()))
            .append_column("rare", pa.array(rare)))


@pytest.fixture
def counted():
    """A view whose every scan is counted: a side-effecting UDF wraps one column."""
    con = duckdb.connect()
    seen = counting_view(con, nb_data(), ["x0", "x1", "x2", "colour", "rare", "y"], "x0")
    yield con, seen
    con.execute("DROP VIEW data")
    con.remove_function("tick")
    con.close()


GRIDS = [
    (2, None),
    (3, [{"var_smoothing": 1e-9, "alpha": 0.5}, {"var_smoothing": 1e-2, "alpha": 2.0}]),
    (5, {"alpha": [0.1, 1.0], "unseen": ["missing", "bucket"]}),
    (4, {"estimator": ["posterior-mean", "mle"], "class_prior": ["fitted", "uniform"], "alpha": [1.0, 3.0]}),
]


@pytest.mark.parametrize("folds,grid", GRIDS)
def test_naive_bayes_cv_reads_the_source_once(counted, folds, grid):
    con, seen = counted
    n, G = 300, len(cv.expand_grid(grid))
    result = sqlnb.cross_validate("data", "y", con=con, folds=folds, seed=7, grid=grid)
    # One read into the temporary copy; statistics, shifts and scoring read the copy.
    assert seen["rows"] == n, "the source is read exactly once, whatever k and G"
    assert result.scans == {"source": 1, "statistics": 1, "scoring": 1}
    assert len(result.results) == G and all(len(r["accuracy"]) == folds for r in result.results)
    assert not con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'sqlnb_cv_%'").fetchall()
    seen["rows"] = 0
    direct = sqlnb.cross_validate("data", "y", con=con, folds=folds, seed=7, grid=grid, materialize_source=False)
    assert [r["accuracy"] for r in direct.results] == [r["accuracy"] for r in result.results]
    np.testing.assert_allclose([r["log_loss"] for r in direct.results], [r["log_loss"] for r in result.results],
                               rtol=0, atol=1e-12)
    if folds == 3:
        assert_matches_refits(con, result, "data")


@pytest.mark.parametrize("folds,grid", GRIDS)
def test_naive_bayes_cv_without_the_copy_reads_the_source_twice(counted, monkeypatch, folds, grid):
    con, seen = counted
    calls = []
    original = cv.collect_statistics_by

    def statistics(*a, **k):
        before = seen["rows"]
        out = original(*a, **k)
        calls.append(seen["rows"] - before)
        return out

    monkeypatch.setattr(cv, "collect_statistics_by", statistics)
    n, G = 300, len(cv.expand_grid(grid))
    sqlnb.fit("data", "y", con=con)
    fit_rows = seen["rows"]  # what one fit's aggregation reads
    seen["rows"] = 0
    result = sqlnb.cross_validate("data", "y", con=con, folds=folds, seed=7, grid=grid, materialize_source=False)
    # The statistics of every fold cost what a single fit costs, and every (grid point,
    # fold) is scored in one more read: fit_rows + n rows whatever k and G (fold by fold
    # it was n·(1 + G·k)). A fit reads the source once, plus the first SHIFT_ROWS rows
    # for the Gaussian shifts (sqlnb.models.naive_bayes.fit.gaussian_shifts) and the first
    # SAMPLE_ROWS for column screening (sqlnb.models.screening), all 300 rows here.
    screen_rows = min(n, importlib.import_module("sqlnb.models.screening").SAMPLE_ROWS)
    assert calls == [fit_rows - screen_rows], "the statistics of every fold cost one fit's reads"
    assert seen["rows"] - calls[0] == n + screen_rows, "scoring is one read of the source, screening another"
    assert fit_rows == n + min(n, importlib.import_module("sqlnb.models.naive_bayes.fit").SHIFT_ROWS) + screen_rows
    assert seen["rows"] == fit_rows + n
    assert result.scans == {"source": 2, "statistics": 1, "scoring": 1} and sum(result.fold_rows) == n
    assert len(result.results) == G and all(len(r["accuracy"]) == folds for r in result.results)
    if folds == 3:
        assert_matches_refits(con, result, "data")
        # The best point refitted from the merged fold statistics equals a plain fit.
        best = sqlnb.fit("data", "y", con=con, **result.best_params)
        a = result.best_model.predict_proba("raw", con).to_arrow_table()
        b = best.predict_proba("raw", con).to_arrow_table()
        for c in best.proba_columns():
            np.testing.assert_allclose(a[c].to_numpy(), b[c].to_numpy(), atol=1e-12)


@pytest.mark.parametrize("options,grid", [
    ({"features": ["colour", "rare"]}, {"alpha": [0.01, 1.0], "unseen": ["missing", "bucket"]}),
    ({"features": ["colour", "rare"]}, {"estimator": ["mle"]}),
    ({"exclude": ["colour", "rare"]}, {"var_smoothing": [1e-9, 0.1], "class_prior": ["fitted", "uniform"]}),
    ({}, {"estimator": ["mle", "map"], "alpha": [2.0], "var_smoothing": [1e-9, 1e-3]}),
    ({"feature_kinds": {"x0": "bernoulli", "x2": "bernoulli"}, "binarize": 0.5}, {"alpha": [0.5, 1.0]}),
])
def test_naive_bayes_fold_figures_equal_refits(con, options, grid):
    """Categorical (with values unseen in training folds, and MLE zero-likelihood rows that
    have no probabilities), Gaussian (with NULLs), mixed and Bernoulli models."""
    con.register("t", nb_data(3))
    result = sqlnb.cross_validate("t", "y", con=con, folds=4, seed=2, grid=grid, refit=False, **options)
    assert result.scans["scoring"] == 1
    # The refit is given the options cross_validate was given: features, exclude, kinds.
    first = assert_matches_refits(con, result, "t", **options)
    if grid == {"estimator": ["mle"]}:  # rare values seen in one class only: zero likelihood somewhere
        assert any(f["no_proba"] for f in first)


def test_token_bags_are_scored_fold_by_fold(con):
    """A token bag scores through a LATERAL join that cannot be keyed by model: its CV falls
    back to one scoring scan per grid point and fold, with the same figures as refits."""
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 150)
    docs = [[f"w{v}" for v in rng.integers(0, 12, rng.integers(1, 6)) + 3 * yi] for yi in y]
    con.register("t", pa.table({"toks": pa.array(docs, pa.list_(pa.string())), "y": y}))
    opts = {"feature_kinds": {"toks": "multinomial"}}
    result = sqlnb.cross_validate("t", "y", con=con, folds=3, grid={"alpha": [0.5, 1.0]}, refit=False, **opts)
    assert result.scans == {"source": 1, "statistics": 1, "scoring": 6}
    assert_matches_refits(con, result, "t", **opts)


@pytest.mark.parametrize("kind,grid", [("lda", {"shrinkage": [None, 0.5]}),
                                       ("qda", {"reg_param": [0.0, 0.3]}),
                                       ("logistic", {"C": [0.1, 10.0]})])
def test_dense_models_match_refits(kind, grid, con):
    con.register("t", mixed(1).drop_columns(["colour"]))
    result = sqlnb.cross_validate("t", "y", model=kind, con=con, folds=3, seed=1, grid=grid)
    assert result.scans["scoring"] == 1
    assert_matches_refits(con, result, "t", kind)
    assert isinstance(result.best_model, Model) and result.best_model.kind == kind
    assert [row["mean_accuracy"] for row in result.table()] == [r["mean_accuracy"] for r in result.results]


def test_folds_are_reproducible_and_keyed(con):
    t = frame(np.arange(200.0)[:, None], np.arange(200) % 2).append_column("id", pa.array(np.arange(200)))
    con.register("t", t)
    a, b, c, keyed = (sqlnb.cross_validate("t", "y", con=con, folds=3, seed=seed, key=key, exclude=["id"],
                                           refit=False)
                      for seed, key in ((3, None), (3, None), (4, None), (3, ["id"])))
    assert a.fold_rows == b.fold_rows and a.results == b.results
    # Balanced whatever the seed (stratified folds): another seed shows in which rows share
    # a fold, so in the fold figures, not in the fold sizes (the hash folds' sizes varied).
    assert a.fold_rows == c.fold_rows == keyed.fold_rows == [67, 67, 66]
    assert a.results[0]["log_loss"] != c.results[0]["log_loss"]


def test_errors_are_one_line(con):
    con.register("t", mixed(2))
    with pytest.raises(sqlnb.SqlnbError, match="folds must be an integer >= 2"):
        sqlnb.cross_validate("t", "y", con=con, folds=1)
    with pytest.raises(sqlnb.SqlnbError, match="'shrink' is not a parameter of model 'lda'.*'shrinkage'"):
        sqlnb.cross_validate("t", "y", con=con, model="lda", grid={"shrink": [0.1]}, exclude=["colour"])
    with pytest.raises(sqlnb.SqlnbError, match="row weights"):
        sqlnb.cross_validate("t", "y", con=con, weight="x1")
    with pytest.raises(sqlnb.SqlnbError, match=r"fold \d+ of .* has no labelled rows; use fewer folds"):
        sqlnb.cross_validate("SELECT * FROM t LIMIT 3", "y", con=con, folds=40)
