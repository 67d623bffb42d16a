"""The Python API's traps of issue 28, point 3, that are fixed: a DuckDB relation is read
on its own connection (fit, score, update, evaluate without ``con=``), and ``evaluate``
is a top-level name."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb


@pytest.fixture
def con():
    rng = np.random.default_rng(0)
    y = np.repeat(["a", "b", "c"], 20)
    X = rng.normal(size=(60, 3)) + (np.arange(60) // 20)[:, None]
    c = duckdb.connect()
    c.register("frame", pa.table({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "label": y}))
    c.execute('CREATE TABLE train AS SELECT * FROM frame')
    c.unregister("frame")
    return c


def test_fit_reads_a_relation_on_its_own_connection(con):
    model = sqlnb.fit(con.table("train"), label="label")
    assert model.classes == ["a", "b", "c"] and model.stats.n_rows == 60
    # the same model as with con= given
    same = sqlnb.fit("train", label="label", con=con)
    np.testing.assert_array_equal(model.stats.class_n, same.stats.class_n)


@pytest.mark.parametrize("kind", ["lda", "qda", "logistic"])
def test_dense_fit_reads_a_relation_on_its_own_connection(con, kind):
    assert sqlnb.fit(con.table("train"), label="label", model=kind).classes == ["a", "b", "c"]


def test_score_update_and_evaluate_read_a_relation_on_its_own_connection(con):
    model = sqlnb.fit("train", label="label", con=con)
    rel = con.table("train")
    proba = model.predict_proba(rel).fetchnumpy()
    assert len(proba["proba_a"]) == 60
    updated = sqlnb.update(model, con.sql("SELECT * FROM train WHERE label = 'a'"))
    assert updated.stats.n_rows == 80
    ev = sqlnb.evaluate(model, rel)
    assert ev.rows == 60 and ev.accuracy == sqlnb.evaluate(model, "train", con=con).accuracy


def test_evaluate_is_a_top_level_name():
    from sqlnb.workflows.evaluate import evaluate
    assert sqlnb.evaluate is evaluate
    assert "evaluate" in sqlnb.__all__ and "evaluate" in dir(sqlnb)


def test_an_explicit_connection_still_wins(con):
    other = duckdb.connect()
    with pytest.raises(sqlnb.SqlnbError, match="train"):
        sqlnb.fit(con.table("train"), label="label", con=other)
