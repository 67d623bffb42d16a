"""The PostgreSQL session of docs/cli.md, run as a user runs it, against a real server.

The block marked ``<!-- doc-test: engine postgres -->`` (``tests/test_docs.py`` leaves it
here) names a server by a placeholder DSN, ``'host=db dbname=lake'``. This test starts a
throw-away server (``tests/support/postgres.py``), creates the database ``lake`` with the
tables the block reads -- ``customers`` (``id``, features, the label ``churned``),
``new_customers`` (no label) and ``holdout`` -- and runs each ``$`` command read from the
docs in its own bash process, in a fresh directory, with ``sqlnb`` on PATH being this
checkout's (``support.doc_blocks.prepare``) and the placeholder's ``host=db`` replaced by the
server's address. The commands' printed lines (stdout and stderr together) must be the
documented ones, and their exit status what the block implies: non-zero for a command whose
documented output ends with an ``Error: `` line, 0 for the others. Then the files and the
table they wrote are checked against the same model scoring the same rows in DuckDB.

The tables are synthetic but shaped like a churn data set: tenure, contract, monthly
charges (a few NULL), support calls and paperless billing; churn is drawn from a logistic
model of them, strong enough that naive Bayes clears the block's ``--min-accuracy 0.8`` on
the holdout (about 0.9), weak enough that it is not trivial.
"""

from __future__ import annotations

import json
import subprocess

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from support import doc_blocks as db
from support.engines import postgres_engine

PLACEHOLDER = "'host=db dbname=lake'"   # the DSN the docs show, quotes included
DATABASE = "lake"
ROWS = {"customers": 1200, "new_customers": 200, "holdout": 400}
TIMEOUT = 300


def churn_table(rng: np.random.Generator, n: int, first_id: int, label: bool) -> pa.Table:
    """``n`` customers with ids from ``first_id``; with ``label``, a ``churned`` column
    ('yes'/'no') drawn from a logistic model of the features."""
    tenure = rng.integers(1, 73, n)
    contract = rng.choice(["month-to-month", "one year", "two year"], n, p=[0.5, 0.3, 0.2])
    charges = np.round(np.clip(rng.normal(70.0, 20.0, n), 18.0, 120.0), 2)
    calls = rng.poisson(1.5, n)
    paperless = rng.random(n) < 0.6
    # log-odds of churning: short tenure, monthly contracts, high bills and many support
    # calls raise it
    log_odds = (-1.0 - 0.1 * tenure + 0.05 * (charges - 70.0) + 1.1 * calls + 0.3 * paperless
                + np.select([contract == "month-to-month", contract == "one year"], [2.5, 0.0], -2.0))
    columns = {
        "id": pa.array(np.arange(first_id, first_id + n), pa.int64()),
        "tenure_months": pa.array(tenure, pa.int32()),
        "contract": pa.array(contract.tolist(), pa.string()),
        # a bill missing now and then (a NULL feature adds no evidence, at fit and score)
        "monthly_charges": pa.array(charges, pa.float64(), mask=rng.random(n) < 0.02),
        "support_calls": pa.array(calls, pa.int32()),
        "paperless_billing": pa.array(paperless, pa.bool_()),
    }
    if label:
        churned = rng.random(n) < 1.0 / (1.0 + np.exp(-log_odds))
        columns["churned"] = pa.array(np.where(churned, "yes", "no").tolist(), pa.string())
    return pa.table(columns)


@pytest.fixture(scope="module")
def lake():
    """(server address without a database, the tables) on a throw-away server whose
    database ``lake`` holds the tables; skipped without a server, failed on CI."""
    from sqlnb.engines import PostgresEngine

    with postgres_engine({}) as admin:  # connected to the server's database `postgres`
        admin.execute(exp.Create(this=sql.ident(DATABASE), kind="DATABASE"))
        server = " ".join(w for w in admin.dsn.split() if not w.startswith("dbname="))
        rng = np.random.default_rng(20261126)
        tables = {"customers": churn_table(rng, ROWS["customers"], 1, True),
                  "new_customers": churn_table(rng, ROWS["new_customers"], 100_001, False),
                  "holdout": churn_table(rng, ROWS["holdout"], 200_001, True)}
        engine = PostgresEngine(f"{server} dbname={DATABASE}")
        for name, table in tables.items():
            engine.write_table(name, table)
        engine.close()
        yield server, tables


def the_block() -> db.Block:
    blocks = [b for b in db.all_blocks() if b.engine == "postgres"]
    assert len(blocks) == 1, ("the tables made here are those of docs/cli.md's PostgreSQL block; "
                              f"blocks marked engine postgres: {[b.where for b in blocks]}")
    return blocks[0]


@pytest.mark.postgres  # a throw-away PostgreSQL server (the module fixture lake)
def test_the_documented_postgres_session_runs_against_a_server(lake, tmp_path):
    server, tables = lake
    block = the_block()
    work, env = db.prepare(tmp_path)
    for c in block.commands:
        assert PLACEHOLDER in c.text, f"{block.where}: `{c.text}` does not use the DSN {PLACEHOLDER}"
        command = c.text.replace(PLACEHOLDER, f"'{server} dbname={DATABASE}'")
        done = subprocess.run(["bash", "-c", command], cwd=work, env=env, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=TIMEOUT)
        problem = db.mismatch(c, db.normalise(c.output), db.normalise(done.stdout.splitlines()), block)
        assert problem is None, problem
        fails = bool(c.output) and c.output[-1].startswith("Error: ")
        assert (done.returncode != 0) == fails, (f"{block.path.name}:{c.line}: `{c.text}` exited "
                                                 f"{done.returncode}:\n{done.stdout}")

    # the same model, loaded from the server, scores the same rows in DuckDB: the oracle
    engine = sqlnb.engines.connect("postgres", dsn=f"{server} dbname={DATABASE}")
    try:
        model = sqlnb.load(engine, "churn")
        [(score_rows, score_ids, score_predictions)] = engine.execute(
            exp.select(exp.Count(this=exp.Star()), exp.Count(this=exp.Distinct(expressions=[sql.col("id")])),
                       exp.Count(this=sql.col("prediction"))).from_(sql.table("scores")))
        scores = engine.relation(exp.select(sql.col("id"), sql.col("prediction")).from_(sql.table("scores")))
    finally:
        engine.close()
    con = duckdb.connect()
    for name, table in tables.items():
        con.register(name, table)

    def here(name: str, keep: list[str]) -> dict:
        got = model.score(name, con, keep=keep).to_arrow_table().to_pydict()
        return {i: row for i, row in zip(got["id"], zip(*(got[k] for k in ("prediction", *keep[1:]))))}

    new = here("new_customers", ["id"])
    ids = tables["new_customers"]["id"].to_pylist()

    # `score 'SELECT ...' --keep id --out scored.parquet`: one row per input row, with the
    # id, the probabilities and the prediction DuckDB gives (a SELECT's rows come in the
    # server's order, hence compared by id)
    scored = pq.read_table(work / "scored.parquet")
    assert scored.num_rows == len(ids) and sorted(scored["id"].to_pylist()) == ids
    assert scored.column_names == ["id", *model.proba_columns(), "prediction"]
    assert {i: (p,) for i, p in zip(scored["id"].to_pylist(), scored["prediction"].to_pylist())} == new
    probabilities = zip(*(scored[c].to_pylist() for c in model.proba_columns()))
    assert all(abs(sum(p) - 1.0) < 1e-9 for p in probabilities)

    # `score new_customers --key id --out-table scores`: a table of as many rows, one per id
    assert score_rows == score_ids == score_predictions == len(ids)
    assert {i: (p,) for i, p in zip(scores["id"].to_pylist(), scores["prediction"].to_pylist())} == new

    # `evaluate holdout --format json --min-accuracy 0.8 > holdout.json`: JSON, passing honestly
    report = json.loads((work / "holdout.json").read_text(encoding="utf-8"))
    hold = here("holdout", ["id", "churned"])
    right = sum(prediction == label for prediction, label in hold.values())
    assert report["rows"] == report["labelled_rows"] == ROWS["holdout"]
    assert report["accuracy"] == pytest.approx(right / ROWS["holdout"], abs=1e-12)
    assert report["accuracy"] >= 0.8

    # the refused fit wrote nothing here
    assert sorted(p.name for p in work.iterdir()) == ["holdout.json", "scored.parquet"]
