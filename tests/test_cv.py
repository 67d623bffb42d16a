"""Cross-validation: one statistics scan per grid, fold figures equal to refits."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from conftest import frame
from sqlnb import cv
from sqlnb.model import Model
from sqlnb.source import resolve

try:
    from duckdb import sqltypes as T
except ImportError:  # pragma: no cover - older DuckDB
    from duckdb import typing as T


def mixed(seed: int = 0, n: int = 240):
    """Numeric and categorical columns, three classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, 3)) + 0.8 * y[:, None]
    colour = np.array(["red", "green", "blue"], dtype=object)[(y + rng.integers(0, 2, n)) % 3]
    return frame(X, y).append_column("colour", pa.array(colour))


@pytest.fixture
def counted():
    """A view whose every scan is counted: a side-effecting UDF wraps one column."""
    con = duckdb.connect()
    seen = {"rows": 0}

    def tick(x):
        seen["rows"] += len(x)
        return x

    con.create_function("tick", tick, [T.DOUBLE], T.DOUBLE, type="arrow", side_effects=True)
    con.register("raw", mixed())
    con.execute('CREATE VIEW data AS SELECT tick(x0) AS x0, x1, x2, colour, y FROM raw')
    yield con, seen
    con.execute("DROP VIEW data")
    con.remove_function("tick")
    con.close()


def refit_figures(con, model_kind, source, label, fold, folds, params, **options):
    """Per fold: fit on the other folds from scratch, then evaluate on the held-out fold."""
    out = []
    for i in range(folds):
        model = sqlnb.fit(cv.fold_source(source, fold, i, held_out=False), label, con=con, model=model_kind,
                          **options, **params)
        out.append(cv.evaluate_fold(con, model, cv.fold_source(source, fold, i), label))
    return out


def test_naive_bayes_grid_aggregates_once_and_matches_refits(counted, monkeypatch):
    con, seen = counted
    calls = []
    original = cv.collect_statistics_by
    monkeypatch.setattr(cv, "collect_statistics_by", lambda *a, **k: calls.append(1) or original(*a, **k))
    grid = [{"var_smoothing": 1e-9, "alpha": 0.5}, {"var_smoothing": 1e-2, "alpha": 2.0}]
    result = sqlnb.cross_validate("data", "y", con=con, folds=3, seed=7, grid=grid)
    n, G, k = 240, 2, 3
    # One aggregation scan for the whole grid, then one scoring scan per (grid point, fold).
    assert calls == [1]
    assert seen["rows"] == n * (1 + G * k)
    assert result.scans == {"statistics": 1, "scoring": G * k} and sum(result.fold_rows) == n

    source = resolve("data", con)
    fold = cv.fold_expression(source, 3, 7)
    for r in result.results:
        ref = refit_figures(con, "naive_bayes", source, "y", fold, 3, r["params"])
        assert r["accuracy"] == [f["accuracy"] for f in ref]
        np.testing.assert_allclose(r["log_loss"], [f["log_loss"] for f in ref], rtol=1e-12)
    # The best point refitted from the merged fold statistics equals a plain fit.
    best = sqlnb.fit("data", "y", con=con, **result.best_params)
    a = result.best_model.predict_proba("raw", con).to_arrow_table()
    b = best.predict_proba("raw", con).to_arrow_table()
    for c in best.proba_columns():
        np.testing.assert_allclose(a[c].to_numpy(), b[c].to_numpy(), atol=1e-12)


@pytest.mark.parametrize("kind,grid", [("lda", {"shrinkage": [None, 0.5]}),
                                       ("qda", {"reg_param": [0.0, 0.3]}),
                                       ("logistic", {"C": [0.1, 10.0]})])
def test_dense_models_match_refits(kind, grid, con):
    con.register("t", mixed(1).drop_columns(["colour"]))
    result = sqlnb.cross_validate("t", "y", model=kind, con=con, folds=3, seed=1, grid=grid)
    source = resolve("t", con)
    fold = cv.fold_expression(source, 3, 1)
    for r in result.results:
        ref = refit_figures(con, kind, source, "y", fold, 3, r["params"])
        assert r["accuracy"] == [f["accuracy"] for f in ref]
        np.testing.assert_allclose(r["log_loss"], [f["log_loss"] for f in ref], rtol=1e-9)
    assert isinstance(result.best_model, Model) and result.best_model.kind == kind
    assert [row["mean_accuracy"] for row in result.table()] == [r["mean_accuracy"] for r in result.results]


def test_folds_are_reproducible_and_keyed(con):
    t = frame(np.arange(200.0)[:, None], np.arange(200) % 2).append_column("id", pa.array(np.arange(200)))
    con.register("t", t)
    a, b, c, keyed = (sqlnb.cross_validate("t", "y", con=con, folds=3, seed=seed, key=key, exclude=["id"],
                                           refit=False)
                      for seed, key in ((3, None), (3, None), (4, None), (3, ["id"])))
    assert a.fold_rows == b.fold_rows and a.results == b.results
    assert a.fold_rows != c.fold_rows and sum(keyed.fold_rows) == 200


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
