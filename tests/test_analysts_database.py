"""Data where analysts keep it: a query as DATA reads the tables of a
DuckDB file by their plain names, with ``--database FILE`` or, by default, MODEL's own
file, on every command that reads DATA."""

from __future__ import annotations

import json

import duckdb
import pyarrow.parquet as pq
import pytest

from support.cli import assert_error, invoke, mixed_table

QUERY = "SELECT * FROM train WHERE color IS NOT NULL"
TEST_QUERY = "SELECT * FROM test WHERE color <> 'red'"


@pytest.fixture()
def lake(tmp_path):
    """``data.duckdb`` with tables ``train`` and ``test`` (and the same rows as Parquet,
    for the answers to compare with)."""
    db = tmp_path / "data.duckdb"
    train, test = mixed_table(200, seed=11), mixed_table(90, seed=12)
    pq.write_table(train, tmp_path / "train.parquet")
    pq.write_table(test, tmp_path / "test.parquet")
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE TABLE train AS SELECT * FROM '{tmp_path}/train.parquet'")
        con.execute(f"CREATE TABLE test AS SELECT * FROM '{tmp_path}/test.parquet'")
    return tmp_path


def _figures(text: str) -> dict:
    """evaluate's JSON without the text naming where the rows came from."""
    return {k: v for k, v in json.loads(text).items() if k != "seconds" and not (isinstance(v, str) and "source query" in v)}


def _ok(*args):
    r = invoke(*args)
    assert r.exit_code == 0, r.stderr
    return r


def test_a_query_as_data_fails_without_a_database_and_says_how(lake):
    """Without --database (and a MODEL elsewhere) the query cannot see the file's tables: the
    error names --database."""
    assert_error(invoke("fit", QUERY, "--label", "y", "--exclude", "id", "--model", f"{lake}/m.duckdb:nb"),
                 "Table with name train does not exist", "--database FILE")


def test_fit_score_evaluate_cv_select_read_a_query_over_the_database(lake):
    db, model = f"{lake}/data.duckdb", f"{lake}/m.duckdb:nb"
    _ok("fit", QUERY, "--label", "y", "--exclude", "id", "--model", model, "--database", db)
    # the same rows from the Parquet copy give the same model
    _ok("fit", f"SELECT * FROM '{lake}/train.parquet' WHERE color IS NOT NULL", "--label", "y", "--exclude", "id",
        "--model", f"{lake}/m.duckdb:copy")
    shown = [_ok("show", "--model", f"{lake}/m.duckdb:{n}", "--format", "json").stdout for n in ("nb", "copy")]
    assert shown[0].count('"rows"') and shown[0].split('"classes"')[1] == shown[1].split('"classes"')[1]

    scored = _ok("score", TEST_QUERY, "--model", model, "--database", db, "--key", "id", "--out", "-").stdout
    want = _ok("score", f"SELECT * FROM '{lake}/test.parquet' WHERE color <> 'red'", "--model", model,
               "--key", "id", "--out", "-").stdout
    assert scored == want and scored.count("\n") > 20

    ev = _ok("evaluate", TEST_QUERY, "--model", model, "--database", db, "--format", "json").stdout
    ev_file = _ok("evaluate", f"SELECT * FROM '{lake}/test.parquet' WHERE color <> 'red'", "--model", model,
                  "--format", "json").stdout
    assert _figures(ev) == _figures(ev_file) and json.loads(ev)["rows"] > 20

    cv = _ok("cv", QUERY, "--label", "y", "--exclude", "id", "--folds", "3", "--database", db).stdout
    cv_file = _ok("cv", f"SELECT * FROM '{lake}/train.parquet' WHERE color IS NOT NULL", "--label", "y",
                  "--exclude", "id", "--folds", "3").stdout
    assert cv == cv_file and "fold 3" in cv

    sel = _ok("select", QUERY, "--label", "y", "--exclude", "id", "--folds", "3", "--database", db).stdout
    sel_file = _ok("select", f"SELECT * FROM '{lake}/train.parquet' WHERE color IS NOT NULL", "--label", "y",
                   "--exclude", "id", "--folds", "3").stdout
    assert sel == sel_file and "forward selection" in sel


def test_model_file_is_the_default_database(lake):
    """MODEL DB.duckdb:NAME: a query reads DB's tables without --database (fit, once the file
    exists; score, evaluate, update, calibrate, sql), and a table of the connection's own
    database (score into the same file) is read directly."""
    db = f"{lake}/data.duckdb"
    model = f"{db}:nb"
    _ok("fit", QUERY, "--label", "y", "--exclude", "id", "--model", model)
    _ok("score", TEST_QUERY, "--model", model, "--key", "id", "--out", f"{db}:scores")
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute("SELECT count(*) FROM scores").fetchall()[0][0] == \
            con.execute(f"SELECT count(*) FROM ({TEST_QUERY})").fetchall()[0][0]
    assert "accuracy" in _ok("evaluate", TEST_QUERY, "--model", model).stdout
    _ok("calibrate", TEST_QUERY, "--model", model)
    _ok("update", "SELECT * FROM test WHERE color = 'red'", "--model", model)
    # The printed SQL reads the query as written (for the target warehouse), not the attachment.
    printed = _ok("sql", TEST_QUERY, "--model", model, "--compact").stdout
    assert "FROM test WHERE" in printed and "sqlnb_data" not in printed
    # an explicit --database wins over MODEL's file
    other = lake / "other.duckdb"
    with duckdb.connect(str(other)) as con:
        con.execute(f"CREATE TABLE test AS SELECT * FROM '{lake}/test.parquet' LIMIT 7")
    ev = _ok("evaluate", "SELECT * FROM test", "--model", model, "--database", other, "--format", "json").stdout
    assert '"rows": 7' in ev


def test_cte_names_files_and_qualified_names_are_left_alone(lake):
    db, model = f"{lake}/data.duckdb", f"{lake}/m.duckdb:nb"
    _ok("fit", QUERY, "--label", "y", "--exclude", "id", "--model", model, "--database", db)
    # a CTE named like a table of the database shadows it
    cte = f"WITH test AS (SELECT * FROM '{lake}/test.parquet' LIMIT 5) SELECT * FROM test"
    assert '"rows": 5' in _ok("evaluate", cte, "--model", model, "--database", db, "--format", "json").stdout
    joined = ("SELECT t.* FROM test AS t JOIN (SELECT DISTINCT color FROM train) AS c ON t.color = c.color")
    assert "accuracy" in _ok("evaluate", joined, "--model", model, "--database", db).stdout


def test_bad_uses_are_one_line_errors(lake):
    db, model = f"{lake}/data.duckdb", f"{lake}/m.duckdb:nb"
    _ok("fit", QUERY, "--label", "y", "--exclude", "id", "--model", model, "--database", db)
    assert_error(invoke("evaluate", "SELECT * FROM tset", "--model", model, "--database", db),
                 "tset", "did you mean 'test'", "tables in", "train")
    assert_error(invoke("evaluate", f"{lake}/test.parquet", "--model", model, "--database", db),
                 "--database", "not a query")
    assert_error(invoke("evaluate", "SELECT * FROM test", "--model", model, "--database", f"{lake}/none.duckdb"),
                 "does not exist")
    assert_error(invoke("evaluate", "SELECT * FROM test", "--model", model, "--database", ""), "--database takes")
