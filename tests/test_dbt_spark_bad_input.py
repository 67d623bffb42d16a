"""Bad input to ``sqlnb dbt --train`` under dbt-spark, as on DuckDB and PostgreSQL
(tests/test_dbt_train.py): a batch with a NULL label, a class the model lacks and a
negative count fails the package's source tests, so dbt skips the training models and the
statistics tables stay as they were; a column whose type changed (a number now text) is a
compile error naming the column and the cast. One model (``mixed``: Gaussian, multinomial,
categorical and Bernoulli columns), Spark in one local process (``local[1]``; the test of
executors in other processes is tests/test_dbt_spark_train.py's).
"""

from __future__ import annotations

import json

import duckdb
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.workflows import dbt_train
from support.dbt import results as _results, run as _run, train_project
from test_dbt_spark_train import _profiles, _spark, dbt_spark
from test_dbt_train import FITS, _assert_bad_batch_failed, _bad, _batch, _retyped, _table

VARS = json.dumps({"sqlnb_mixed_train_table": "train"})
#: Not the example model that scores with the fitted parameters: its fingerprint test reads
#: sqlnb's model table, which a Spark warehouse keeps as files (sqlnb.store.spark).
EXAMPLE = ["--exclude", "mixed_scored"]


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    exe = dbt_spark()
    tmp = tmp_path_factory.mktemp("dbt_spark_bad")
    wh = tmp / "wh.duckdb"
    con = duckdb.connect(str(wh))
    _table(con, "b1", _batch(con, 240, 1, 0, 1))
    _table(con, "customers", _batch(con, 120, 3, 5000, 9))
    for name, query in (("b1", "SELECT * FROM b1"), ("customers", "SELECT * FROM customers"),
                        ("bad", f"SELECT * FROM b1 UNION ALL {_bad(con)}"),
                        ("retyped", f"SELECT * REPLACE (CAST(income AS VARCHAR) AS income) FROM b1 "
                                    f"UNION ALL {_retyped(con)}")):
        pq.write_table(con.sql(query).to_arrow_table(), tmp / f"{name}.parquet")
    model = sqlnb.fit("b1", "segment", con=con, **FITS["mixed"])
    model.save(con, "mixed")
    con.close()
    out = tmp / "project"
    train_project(wh, out, "mixed", {}, ["--loaded-at", "loaded_at"])
    # the statistics tables (what a skipped training model leaves as it was)
    return exe, tmp, wh, out, [f"mixed_{part}" for part in dbt_train._parts(model)]


@pytest.mark.spark
def test_bad_batches_fail_the_packages_tests_on_spark(project):
    dbt, tmp, wh, out, tables = project
    warehouse = tmp / "warehouse"
    _profiles(out, warehouse, "local[1]", "sqlnb_mixed_example")
    _spark(warehouse, "local[1]", {"load": {"train": str(tmp / "b1.parquet"),
                                            "customers": str(tmp / "customers.parquet")},
                                   "save": {"mixed": str(wh)}}, tmp)
    stored = {"query": {t: f"SELECT * FROM default.{t}" for t in tables}}

    def statistics() -> dict:
        got = _spark(warehouse, "local[1]", stored, tmp)["query"]
        return {t: sorted(map(repr, rows)) for t, rows in got.items()}

    _run([dbt, "build", "--profiles-dir", ".", "--vars", VARS, *EXAMPLE], out, "dbt build on Spark", timeout=1800)
    before = statistics()
    assert all(before.values())

    _spark(warehouse, "local[1]", {"load": {"train": str(tmp / "bad.parquet")}}, tmp)
    failed = _run([dbt, "build", "--profiles-dir", ".", "--vars", VARS, *EXAMPLE], out, "dbt build on Spark of a bad batch",
                  ok=False, timeout=1800)
    assert failed.returncode != 0
    _assert_bad_batch_failed(_results(out), failed.stdout, ["mixed"])
    assert statistics() == before

    _spark(warehouse, "local[1]", {"load": {"train": str(tmp / "retyped.parquet")}}, tmp)
    failed = _run([dbt, "run", "--profiles-dir", ".", "--vars", VARS, "--select", "mixed_classes"], out,
                  "dbt run on Spark over a retyped column", ok=False, timeout=1800)
    assert failed.returncode != 0
    assert "column income of" in failed.stdout and "cast it to DOUBLE" in failed.stdout, failed.stdout[-3000:]
    assert statistics() == before
