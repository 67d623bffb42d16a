"""``sqlnb --engine spark`` as users run it: commands in processes of their own.

A local Spark session keeps its catalog (tables and a Derby metastore) in
``./spark-warehouse``, or in ``--warehouse DIR`` / ``SQLNB_WAREHOUSE``, so a model fitted
by one process is listed, scored, shown, replaced and dropped by the next ones. Spark's
own log stays off stderr unless ``-v``, and its errors are one ``Error:`` line.

The steps run once, in order, in the module fixture ``runs``; the tests then check one step
each. A new JVM costs ~10-30 s, so the steps run in three processes rather than one each (14
JVMs took 192 s of CI; side by side on a loaded machine, 705 s for 14, 397 s for 3): the
fits in the first; listing, scoring, showing and dropping that model in the second,
where each command starts and stops its own Spark session as a process of its own would (in
the JVM its first command started); the fit into a warehouse that lost its catalog in the
third. What is about processes stays between processes: the model is fitted in one and
found, scored and dropped by another, and the first command of each starts the JVM (the fit:
quiet; ``models -v``: Spark's log on stderr). Without pyspark or Java the tests are skipped
with the reason; on CI (``CI`` set) that is a failure, as in test_engines.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from support.cli import assert_error, mixed_table, write_parquet
from support.engines import require_pyspark

pytestmark = pytest.mark.spark

TOL = 1e-9
#: The big score: rows, and the driver's spark.driver.maxResultSize (MB) they are far over.
BIG_ROWS, DRIVER_LIMIT_MB = 250_000, 4

#: For the test JVMs only: C1-only JIT and serial GC roughly halve a short session's start
#: (see tests/support/spark.py), two shuffle partitions for 120 rows, no web UI.
SUBMIT_ARGS = ('--conf "spark.driver.defaultJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" '
               "--conf spark.sql.shuffle.partitions=2 --conf spark.ui.enabled=false pyspark-shell")

#: Runs the ``sqlnb`` commands of a JSON list ``[[args, cwd, env], ...]`` one after another
#: in this one process, each in ``cwd`` with ``env`` added to the environment and with file
#: descriptors 1 and 2 pointed at files of its own while it runs (what Python prints, and
#: Java when the command starts the JVM); writes ``[{returncode, stdout, stderr}, ...]``
#: as JSON to the file named second.
SESSION = r"""
import json, os, sys, traceback
from sqlnb.cli import main

with open(sys.argv[1]) as f:
    steps = json.load(f)
out, results = sys.argv[2], []
for i, (args, cwd, env) in enumerate(steps):
    os.chdir(cwd)
    before = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    sys.stdout.flush(); sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    paths = [f"{out}.{i}.stdout", f"{out}.{i}.stderr"]
    files = [os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC) for p in paths]
    os.dup2(files[0], 1); os.dup2(files[1], 2)
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = -1
    finally:
        sys.stdout.flush(); sys.stderr.flush()
        os.dup2(saved[0], 1); os.dup2(saved[1], 2)
        for fd in saved + files:
            os.close(fd)
    for k, v in before.items():
        if v is None:
            del os.environ[k]
        else:
            os.environ[k] = v
    with open(paths[0]) as o, open(paths[1]) as e:
        results.append({"returncode": code, "stdout": o.read(), "stderr": e.read()})
with open(out, "w") as f:
    json.dump(results, f)
"""


def spark_cli(steps: dict, root: Path, env: dict | None = None) -> dict[str, subprocess.CompletedProcess]:
    """The commands ``{step: (args, cwd, env)}``, in order, in one new process: each as
    ``sqlnb --engine spark ARGS`` run from ``cwd`` with ``env`` (a local session, no
    --master, whose catalog is ./spark-warehouse unless ARGS or ``env`` say otherwise).
    The ``env`` argument applies to the whole process. ``{step: CompletedProcess}``."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("SQLNB_WAREHOUSE", "SQLNB_MASTER", "SPARK_REMOTE")}
    full_env.update({"PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS, "SPARK_LOCAL_IP": "127.0.0.1", **(env or {})})
    name = root / f"process-{next(iter(steps))}"
    plan = [[["--engine", "spark", *map(str, args)], str(cwd), {k: str(v) for k, v in step_env.items()}]
            for args, cwd, step_env in steps.values()]
    Path(f"{name}.json").write_text(json.dumps(plan))
    done = subprocess.run([sys.executable, "-c", SESSION, f"{name}.json", f"{name}.out"],
                          capture_output=True, text=True, cwd=root, env=full_env, timeout=600)
    assert done.returncode == 0 and Path(f"{name}.out").exists(), (done.returncode, done.stdout, done.stderr)
    results = json.loads(Path(f"{name}.out").read_text())
    assert len(results) == len(steps)
    return {step: subprocess.CompletedProcess(args, r["returncode"], r["stdout"], r["stderr"])
            for (step, (args, _, _)), r in zip(steps.items(), results)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Fit, a repeated fit and fit --replace in one process; models, scores, show, a
    failing score and drop in a second; a fit into a warehouse that lost its catalog in a
    third. ``{step: CompletedProcess}`` and the paths."""
    require_pyspark()
    root = tmp_path_factory.mktemp("spark_cli")
    work = root / "work"  # the working directory: the catalog goes to ./spark-warehouse
    work.mkdir()
    train = write_parquet(mixed_table(120, seed=1), root / "train.parquet")
    test = write_parquet(mixed_table(40, seed=2), root / "test.parquet")
    warehouse = work / "spark-warehouse"
    (root / "orphan" / "sqlnb.db" / "models").mkdir(parents=True)
    (root / "orphan" / "sqlnb.db" / "models" / "_SUCCESS").touch()  # written by that session's INSERT
    # 250,000 rows: their scores (~17 MB as Arrow) are 4x the 4 MB the score allows the
    # driver, so that run succeeds only if no scored row passes through it. (1M rows under
    # 16 MB proved the same at four times the cost.)
    big = write_parquet(mixed_table(BIG_ROWS, seed=3), root / "big.parquet")
    out = {"root": root, "work": work, "train": train, "test": test, "big": big,
           "scored": root / "scored.parquet", "csv": root / "s.csv"}
    fits = {
        "fit": (["fit", train, "--label", "y", "--exclude", "id", "--model", "nb"], work, {}),
        "fit_again": (["fit", train, "--label", "y", "--exclude", "id", "--model", "nb"], work, {}),
        "fit_replace": (["fit", train, "--label", "y", "--features", "x,color", "--model", "nb", "--replace"],
                        work, {}),
    }
    uses = {
        # First, so that its JVM starts under -v. The catalog named by the environment, from
        # another working directory.
        "models": (["-v", "models"], root, {"SQLNB_WAREHOUSE": warehouse}),
        # Under the small driver limit of this process (below): one score checks both the
        # probabilities and that no scored row passes through the driver.
        "score": (["score", big, "--model", "nb", "--key", "id", "--out", out["scored"]], work, {}),
        "score_exists": (["score", test, "--model", "nb", "--out", out["scored"]], work, {}),
        "score_csv": (["score", test, "--model", "nb", "--key", "id", "--keep", "id", "--out", out["csv"]], work, {}),
        "score_csv_again": (["score", test, "--model", "nb", "--key", "id", "--keep", "id", "--no-proba",
                             "--out", out["csv"], "--replace"], work, {}),
        "table": (["score", test, "--model", "nb", "--key", "id", "--keep", "id", "--out-table", "scored_t"],
                  work, {}),
        "table_exists": (["score", test, "--model", "nb", "--out-table", "scored_t"], work, {}),
        "table_replace": (["score", test, "--model", "nb", "--keep", "id", "--no-proba",
                           "--out-table", "scored_t", "--replace"], work, {}),
        # The catalog named by the option, from another working directory.
        "show": (["--warehouse", warehouse, "show", "--model", "nb", "--format", "json"], root, {}),
        "bad_cast": (["score", f"SELECT id, CAST(CAST(id AS STRING) || 'x' AS DOUBLE) AS x, color "
                               f"FROM parquet.`{test}`", "--model", "nb", "--out", root / "bad.csv"], work, {}),
        "drop": (["drop", "--model", "nb"], work, {}),
    }
    small_driver = {"PYSPARK_SUBMIT_ARGS": SUBMIT_ARGS.replace(
        "pyspark-shell", f"--conf spark.driver.maxResultSize={DRIVER_LIMIT_MB}m pyspark-shell")}
    # A warehouse whose catalog was lost (a session with an in-memory catalog wrote it): the
    # directory of sqlnb.models exists, empty; the models' files are the catalog now.
    lost = {"orphan": (["--warehouse", root / "orphan", "fit", train, "--label", "y", "--model", "nb"], work, {})}
    for steps, env in ((fits, None), (uses, small_driver), (lost, None)):
        out.update(spark_cli(steps, root, env))
    return out


def _ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr
    return result


def test_fit_is_quiet_and_keeps_the_model_in_the_working_directory(runs):
    fit = _ok(runs["fit"])
    # stderr is not a terminal: no summary, and none of Spark's log4j lines, JVM
    # warnings or stage progress bars.
    assert (fit.stdout, fit.stderr) == ("", "")
    warehouse = runs["work"] / "spark-warehouse"
    assert (warehouse / "sqlnb.db" / "models").is_dir()  # the models' files (the metastore: only for tables)
    assert not (runs["work"] / "derby.log").exists() and not (runs["work"] / "metastore_db").exists()


def test_a_second_fit_without_replace_is_one_error_line(runs):
    assert_error(runs["fit_again"], "model 'nb' already exists", "pass --replace")


def test_fit_replace_then_score_gives_the_probabilities_of_duckdb(runs):
    _ok(runs["fit_replace"])
    score = _ok(runs["score"])
    assert score.stdout == "" and score.stderr == ""
    got = pq.read_table(runs["scored"])
    assert got["id"].to_pylist() == list(range(BIG_ROWS))  # --key id: ordered by it, over all part files
    # The replacing model (features x and color), fitted and scored in DuckDB.
    model = sqlnb.fit(runs["train"], "y", features=["x", "color"])
    want = model.score(runs["big"], keep=["id"]).to_arrow_table()
    assert got["prediction"].to_pylist() == want["prediction"].to_pylist()
    assert model.proba_columns() == [c for c in got.column_names if c.startswith("proba_")]
    for c in model.proba_columns():
        np.testing.assert_allclose(got[c].to_numpy(), want[c].to_numpy(), rtol=0, atol=TOL, err_msg=c)


def test_scores_are_written_by_the_executors_not_the_driver(runs):
    """250,000 scored rows to Parquet under spark.driver.maxResultSize=4m: the run succeeds
    only because Spark's executors write the files (collecting them to the driver, as
    the CLI did before, fails: 'Total size of serialized results ... is bigger than
    spark.driver.maxResultSize'). Their probabilities: the test above."""
    _ok(runs["score"])
    out = runs["scored"]
    assert out.is_dir() and any(p.name.startswith("part-") for p in out.iterdir())
    assert not [p for p in runs["root"].iterdir() if p.name.startswith(".sqlnb-")]  # the temporary was moved
    got = pq.read_table(out)
    assert got.num_rows == BIG_ROWS and got.nbytes > 3 * DRIVER_LIMIT_MB * 2**20  # 3x the driver's limit


def test_an_existing_output_is_replaced_only_when_asked(runs):
    assert_error(runs["score_exists"], "already exists", "pass --replace")
    assert pq.read_table(runs["scored"]).num_rows == BIG_ROWS  # untouched
    _ok(runs["score_csv"])
    _ok(runs["score_csv_again"])
    parts = sorted(p for p in runs["csv"].iterdir() if p.name.startswith("part-"))
    header = parts[0].read_text().splitlines()[0]
    assert header == "id,prediction"  # the replacing run's columns (--no-proba), with a header row
    import pyarrow.csv as pcsv
    rows = pa.concat_tables([pcsv.read_csv(p) for p in parts])
    assert rows["id"].to_pylist() == list(range(40))


def test_out_table_is_created_on_spark_and_replaced_only_when_asked(runs):
    _ok(runs["table"])
    assert_error(runs["table_exists"], "table 'scored_t' already exists", "pass --replace")
    _ok(runs["table_replace"])
    table = pq.read_table(runs["work"] / "spark-warehouse" / "scored_t")
    assert sorted(table.column_names) == ["id", "prediction"] and table.num_rows == 40
    assert not [p.name for p in (runs["work"] / "spark-warehouse").iterdir() if p.name.startswith("sqlnb_tmp")]


def test_show_and_models_read_the_catalog_named_by_option_or_environment(runs):
    shown = json.loads(_ok(runs["show"]).stdout)
    assert shown["label"] == "y" and [f["name"] for f in shown["features"]] == ["x", "color"]
    models = _ok(runs["models"])
    assert models.stdout.splitlines()[0].split()[:3] == ["name", "kind", "label"]
    assert models.stdout.splitlines()[1].split()[:3] == ["nb", "naive_bayes", "y"]
    # -v: Spark's own log is shown, on stderr only.
    assert "WARN" in models.stderr or "log4j" in models.stderr, models.stderr


def test_a_spark_error_is_one_line(runs):
    assert_error(runs["bad_cast"], "Spark: [CAST_INVALID_INPUT]", "'0x'")
    assert not (runs["root"] / "bad.csv").exists()
    assert not [p for p in runs["root"].iterdir() if p.name.startswith(".sqlnb-")]  # the temporary is gone


def test_drop_removes_the_model_and_replace_its_old_tables(runs):
    assert _ok(runs["drop"]).stdout == ""
    # Both models' tables are gone (the first one's when --replace committed); only the
    # catalog's log table is left.
    assert sorted(p.name for p in (runs["work"] / "spark-warehouse" / "sqlnb.db").iterdir()) == ["models"]


def test_a_warehouse_whose_catalog_directory_is_empty_takes_a_fit(runs):
    """Up to 79062dc an error (the Hive catalog would not write over the directory); the
    models' files are the catalog now, so an empty one is an empty store."""
    _ok(runs["orphan"])
    assert list((runs["root"] / "orphan" / "sqlnb.db" / "models").glob("part-*.parquet"))


def test_engine_errors_are_one_line_without_a_jvm():
    """What the error boundary prints for exceptions of pyspark, py4j and psycopg (the
    exception classes themselves; no Java process needed)."""
    pytest.importorskip("pyspark")
    from py4j.protocol import Py4JNetworkError
    from pyspark.errors import AnalysisException

    from sqlnb.engines import engine_error

    locked = AnalysisException(message="org.apache.hadoop.hive.ql.metadata.HiveException: java.lang.RuntimeException: "
                               "Unable to instantiate org.apache.hadoop.hive.ql.metadata.SessionHiveMetaStoreClient")
    assert engine_error(locked).startswith("Spark: org.apache.hadoop.hive.ql.metadata.HiveException")
    assert "another process using the same warehouse directory" in engine_error(locked)
    plan = AnalysisException(message="[UNRESOLVED_COLUMN] cannot resolve `q`. SQLSTATE: 42703;\n'Project ['q]\n+- x")
    assert engine_error(plan) == "Spark: [UNRESOLVED_COLUMN] cannot resolve `q`. SQLSTATE: 42703;"
    assert engine_error(Py4JNetworkError("Answer from Java side is empty")) == \
        "Spark: lost the connection to the Java process (Answer from Java side is empty)"
    assert engine_error(ValueError("x")) is None
    psycopg = pytest.importorskip("psycopg")
    assert engine_error(psycopg.errors.DivisionByZero("division by zero\nCONTEXT: ...")) == \
        "PostgreSQL: division by zero"


def test_the_options_of_the_spark_catalog_are_checked_before_spark_starts(tmp_path):
    """Mistakes about --warehouse and `models` are one line, without starting a JVM."""
    from support.cli import invoke

    assert_error(invoke("--warehouse", tmp_path, "models", tmp_path / "m.duckdb"),
                 "--warehouse applies to --engine spark only")
    assert_error(invoke("--engine", "spark", "models", tmp_path / "m.duckdb"),
                 "with --engine spark, models lists the engine's catalog; give no DB")
    assert_error(invoke("models"), "sqlnb models needs DB.duckdb")
    # SQLNB_WAREHOUSE, exported for Spark, does not get in the way of DuckDB commands.
    sqlnb.fit(write_parquet(mixed_table(30), tmp_path / "t.parquet"), "y").save(f"{tmp_path}/m.duckdb", "nb")
    listed = invoke("models", tmp_path / "m.duckdb", env={"SQLNB_WAREHOUSE": str(tmp_path / "wh")})
    assert listed.exit_code == 0 and listed.stdout.splitlines()[1].startswith("nb ")
    assert not (tmp_path / "wh").exists()
