"""``evaluate`` on PostgreSQL and Spark: the rows are scored and measured there, and the
Evaluation equals DuckDB's.

For three models — Gaussian (integer label), categorical (text label, MLE, so some rows
have no probabilities) and a 3-class mixed model — over test rows that hold unlabelled
rows and labels the model does not know, every figure of the Evaluation on each engine
equals the one computed in DuckDB within 1e-9. The CLI is run as separate processes with
``--engine postgres`` and ``--engine spark``. One test shows that no scored row passes
through Spark's driver: in a process whose session has ``spark.driver.maxResultSize=16m``,
collecting the 1M scored rows fails, and the evaluation of the same rows succeeds.

Each engine is started by the tests (a throw-away PostgreSQL server, a local Spark
session); without one they are skipped with the reason, except on CI (``CI`` set), where
that is a failure.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.cli import EXIT_FAIL
from sqlnb.workflows.checks import unseen_counts
from sqlnb.workflows.evaluate import Evaluation, evaluate
from support.cli import mixed_table, write_parquet
from support.engines import SPARK_ENV, close_to, postgres_engine, run_sqlnb, spark_engine
from support.engines import unavailable as _unavailable

TOL = 1e-9


# -- data and models -------------------------------------------------------------------------
def _with_test_rows(t: pa.Table, label_values: list) -> pa.Table:
    """``t`` with its label replaced by ``label_values`` (None: unlabelled)."""
    i = t.column_names.index("y")
    return t.set_column(i, "y", pa.array(label_values, t["y"].type))


def _gaussian():
    def table(n, seed):
        r = np.random.default_rng(seed)
        y = r.integers(0, 2, n)
        x = r.normal(1.2 * y, 1.0)
        return pa.table({"id": np.arange(n), "x": pa.array(x, mask=r.random(n) < 0.05),
                         "z": r.normal(-y, 2.0), "y": pa.array(y, pa.int64())})
    test = table(120, 2)
    labels = test["y"].to_pylist()
    labels = [None if i % 11 == 0 else (7 if i % 13 == 0 else v) for i, v in enumerate(labels)]
    return table(200, 1), _with_test_rows(test, labels), {"features": ["x", "z"]}


def _categorical():
    def table(n, seed):
        r = np.random.default_rng(seed)
        y = r.integers(0, 2, n)
        c1 = np.where(r.random(n) < 0.6, np.where(y == 1, "p", "r"), np.array(["r", "s"])[r.integers(0, 2, n)])
        c2 = np.where(r.random(n) < 0.5, np.where(y == 1, "q", "t"), "u")
        return pa.table({"id": np.arange(n), "c1": c1.tolist(), "c2": c2.tolist(),
                         "y": np.array(["no", "yes"])[y].tolist()})
    train = table(60, 3)
    # MLE: a value seen with one class only zeroes the other's likelihood; 'p' only with
    # yes and 't' only with no gives rows with no probabilities at all.
    train = pa.concat_tables([train, pa.table({"id": [900], "c1": ["s"], "c2": ["u"], "y": ["no"]})])
    test = table(90, 4)
    test = pa.concat_tables([test, pa.table({"id": [901, 902, 903], "c1": ["p", "p", "zz"], "c2": ["t", "t", "t"],
                                             "y": ["yes", "no", "no"]})])
    labels = [None if i % 9 == 0 else ("maybe" if i % 10 == 0 else v) for i, v in enumerate(test["y"].to_pylist())]
    return train, _with_test_rows(test, labels), {"features": ["c1", "c2"], "estimator": "mle"}


def _three_class():
    train = mixed_table(240, seed=21, classes=("a", "b", "c"))
    test = mixed_table(150, seed=22, classes=("a", "b", "c"))
    labels = [None if i % 12 == 0 else ("d" if i % 17 == 0 else v) for i, v in enumerate(test["y"].to_pylist())]
    return train, _with_test_rows(test, labels), {"exclude": ["id"]}


CASES = {"gaussian": _gaussian(), "categorical": _categorical(), "three_class": _three_class()}


@pytest.fixture(scope="module")
def expected():
    """``{case: (model, Evaluation in DuckDB)}``, the test tables registered as ``test_<case>``."""
    con = duckdb.connect()
    out = {}
    for case, (train, test, options) in CASES.items():
        con.register(f"train_{case}", train)
        con.register(f"test_{case}", test)
        model = sqlnb.fit(f"train_{case}", "y", con=con, **options)
        out[case] = (model, evaluate(model, f"test_{case}", con))
    yield out
    con.close()


def test_the_cases_cover_every_kind_of_row(expected):
    """The figures compared below are not vacuous: each kind of row occurs."""
    for case, (model, ev) in expected.items():
        assert ev.unlabelled_rows > 0 and ev.unknown_label_rows > 0, case
        assert (ev.roc_auc is not None) == (len(model.classes) == 2), case
    assert expected["categorical"][1].no_proba_rows > 0
    assert expected["categorical"][1].confusion_predicted[-1] is None


def _same(got: Evaluation, want: Evaluation, where: str) -> None:
    a, b = got.to_dict(), want.to_dict()
    a.pop("seconds"), b.pop("seconds")
    _close(a, b, where)


def _close(a, b, where: str) -> None:
    close_to(a, b, where, TOL)


# -- engines ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def postgres():
    with postgres_engine({f"test_{case}": test for case, (_, test, _) in CASES.items()}) as engine:
        yield engine


@pytest.fixture(scope="module")
def spark():
    with spark_engine({f"test_{case}": test for case, (_, test, _) in CASES.items()}) as engine:
        yield engine


@pytest.mark.parametrize("engine_name", [pytest.param("postgres", marks=pytest.mark.postgres),
                                         pytest.param("spark", marks=pytest.mark.spark)])
@pytest.mark.parametrize("case", list(CASES))
def test_the_evaluation_on_an_engine_equals_duckdbs(request, expected, engine_name, case):
    engine = request.getfixturevalue(engine_name)
    model, want = expected[case]
    got = evaluate(model, f"test_{case}", con=engine)
    _same(got, want, f"{engine_name} {case}")


@pytest.mark.parametrize("engine_name", [pytest.param("postgres", marks=pytest.mark.postgres),
                                         pytest.param("spark", marks=pytest.mark.spark)])
def test_the_unseen_categories_are_counted_on_the_engine(request, expected, engine_name):
    engine = request.getfixturevalue(engine_name)
    model = expected["categorical"][0]
    want = _duckdb_unseen(model, CASES["categorical"][1])
    assert [c["unseen"] for c in want] == [1, 0]  # 'zz' in c1
    assert unseen_counts(model, engine.resolve("test_categorical"), engine) == want


# -- the command line, one process per command -----------------------------------------------
def _duckdb_unseen(model, data) -> list:
    """What the unseen-categories check finds in ``data`` (a path or a table) with DuckDB."""
    con = duckdb.connect()
    return unseen_counts(model, sqlnb.source.resolve(data, con), con)


def _json_equal(stdout: str, want: Evaluation, unseen: list, where: str) -> None:
    got = json.loads(stdout)
    assert got.pop("unseen_categories") == unseen, where
    want_d = json.loads(json.dumps(want.to_dict(), default=str))
    got.pop("seconds"), want_d.pop("seconds")
    _close(got, want_d, where)


@pytest.mark.postgres
def test_cli_evaluate_on_postgres(postgres, expected):
    model, want = expected["three_class"]
    model.save(postgres, "three")
    ok = run_sqlnb(["--engine", "postgres", "--dsn", postgres.dsn, "evaluate", "test_three_class", "--model", "three",
               "--format", "json", "--min-accuracy", "0.1"])
    assert ok.returncode == 0 and "Traceback" not in ok.stderr, ok.stderr
    _json_equal(ok.stdout, want, _duckdb_unseen(model, CASES["three_class"][1]), "postgres cli")
    query = "SELECT * FROM test_three_class WHERE id < 100"
    low = run_sqlnb(["--engine", "postgres", "--dsn", postgres.dsn, "evaluate", query, "--model", "three",
                "--min-accuracy", "0.99"])
    assert low.returncode == EXIT_FAIL, low.stderr
    assert "accuracy    " in low.stdout and low.stderr.startswith("Error: accuracy 0.")


def _require_spark_process() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        _unavailable("Spark", e)


@pytest.mark.spark
def test_cli_evaluate_on_spark(tmp_path, expected):
    """Fit and evaluate in two processes (the model in ./spark-warehouse); DATA is a
    Parquet file read by Spark. --min-accuracy fails the run after printing the JSON."""
    _require_spark_process()
    train, test, _ = CASES["categorical"]
    train_path = write_parquet(train, tmp_path / "train.parquet")
    test_path = write_parquet(test, tmp_path / "test.parquet")
    fit = run_sqlnb(["--engine", "spark", "fit", train_path, "--label", "y", "--features", "c1,c2",
                "--estimator", "mle", "--model", "cat"], SPARK_ENV, tmp_path)
    assert fit.returncode == 0, fit.stderr
    ev = run_sqlnb(["--engine", "spark", "evaluate", test_path, "--model", "cat", "--format", "json",
               "--min-accuracy", "0.99"], SPARK_ENV, tmp_path)
    assert ev.returncode == EXIT_FAIL and "Traceback" not in ev.stderr, ev.stderr
    assert ev.stderr.splitlines()[-1].startswith("Error: accuracy 0."), ev.stderr
    model, want = expected["categorical"]
    _json_equal(ev.stdout, want, _duckdb_unseen(model, test_path), "spark cli")


#: Evaluates 250,000 rows generated by Spark itself in a session whose driver accepts at most
#: 4 MB of task results; then collects the scored rows, which must not fit (the control).
#: 1M rows under 16 MB proved the same at four times the cost.
DRIVER_SCRIPT = r"""
import json, sys
import pyarrow as pa
from pyspark.sql import SparkSession
import sqlnb
from sqlnb.engines import SparkEngine
from sqlnb.workflows.evaluate import evaluate

spark = (SparkSession.builder.master("local[2]").config("spark.driver.maxResultSize", "4m")
         .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2").getOrCreate())
engine = SparkEngine(spark)
rows = ("SELECT id, x0, x1, CASE WHEN x0 + x1 + 2.5 * randn(3) > 0 THEN 'yes' ELSE 'no' END AS y "
        "FROM (SELECT id, randn(1) AS x0, randn(2) AS x1 FROM range(250000)) AS r")
rng = __import__("numpy").random.default_rng(0)
x0, x1 = rng.normal(size=2000), rng.normal(size=2000)
train = pa.table({"x0": x0, "x1": x1, "y": ["yes" if v > 0 else "no" for v in x0 + x1 + 2.5 * rng.normal(size=2000)]})
model = sqlnb.fit(train, "y")
ev = evaluate(model, rows, con=engine)
try:
    model.score(rows, con=engine, outputs=("proba", "prediction")).toArrow()
    collected = "collected"
except Exception as e:  # Py4JJavaError: "Total size of serialized results ... spark.driver.maxResultSize"
    text = str(e)
    collected = "over spark.driver.maxResultSize" if "maxResultSize" in text else text[:500]
print(json.dumps({"rows": ev.rows, "accuracy": ev.accuracy, "auc": ev.roc_auc,
                  "max_result_size": spark.conf.get("spark.driver.maxResultSize"), "collect": collected}))
spark.stop()
"""


@pytest.mark.spark
def test_no_scored_row_passes_through_the_spark_driver(tmp_path):
    _require_spark_process()
    script = tmp_path / "driver.py"
    script.write_text(DRIVER_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE",)}
    env.update(SPARK_ENV, PYTHONPATH=os.pathsep.join([str(Path(sqlnb.__file__).parent.parent),
                                                      env.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    assert got["max_result_size"] == "4m"
    # The control: the same rows, collected, exceed what the driver accepts.
    assert "maxResultSize" in got["collect"], got["collect"]
    assert got["rows"] == 250_000 and 0.6 < got["accuracy"] < 0.9 and 0.6 < got["auc"] < 0.95, got
