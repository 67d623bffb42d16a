"""What a ``sqlnb --engine spark`` command costs as a whole process, against a bare Spark
session and MLlib's whole process.

Every measurement is a new process, timed from outside (wall clock, Python's and the
JVM's start included), in alternating rounds; medians are printed as a Markdown table.

``bare``
    ``SparkSession.builder.getOrCreate()`` and ``stop()``: the floor of any command.
``hive``
    The same with the catalog sqlnb started on every command up to 79062dc: Hive support
    over an embedded Derby metastore in the warehouse, and one catalog call
    (``databaseExists``), which is when Hive starts. Printed per phase on stderr.
``models``
    ``sqlnb --engine spark --warehouse DIR models`` (one model stored), with this checkout,
    and with ``--before CHECKOUT`` (e.g. a worktree of 79062dc) too.
``fit``, ``score`` (``--rows N``)
    ``sqlnb --engine spark fit`` of the ``wide`` data (N rows x 20 DOUBLE columns x 3
    classes, Gaussian; ``fit_floor.py``'s files) into the warehouse, and ``score`` of the
    same file to a Parquet directory, against MLlib's whole process for the same work:
    session, ``read.parquet``, ``VectorAssembler``, ``StringIndexer``, ``NaiveBayes``
    fit and ``save`` (fit); session, read, assemble, ``NaiveBayesModel.load``,
    ``transform`` written to Parquet (score).
    ``--family multinomial`` runs the same on ``fit_floor.py``'s ``counts`` file (the wide
    values as counts ``floor(|x| * 2)``): ``sqlnb fit --kind multinomial`` against MLlib's
    ``modelType="multinomial"`` (smoothing 1 on both sides).

Every process runs Spark's defaults (``local[*]``), progress bars and web UI off.

Examples
--------
python benchmarks/spark_startup.py --repeat 3 --what bare,hive,models --before /tmp/base
python benchmarks/spark_startup.py --repeat 3 --what fit,score --rows 1000000
python benchmarks/spark_startup.py --repeat 3 --what fit,score --rows 1000000 --family multinomial
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402
import generate  # noqa: E402
from run import machine  # noqa: E402

CONF = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false"}

BARE = """
import sys, time
from pyspark.sql import SparkSession
b = SparkSession.builder.appName("bench")
for k, v in {conf!r}.items():
    b = b.config(k, v)
wh = sys.argv[1]
if sys.argv[2] == "hive":
    b = (b.config("spark.sql.warehouse.dir", wh)
         .config("spark.hadoop.javax.jdo.option.ConnectionURL", f"jdbc:derby:;databaseName={{wh}}/metastore_db;create=true")
         .config("spark.driver.extraJavaOptions", f'"-Dderby.system.home={{wh}}"').enableHiveSupport())
t0 = time.perf_counter()
s = b.getOrCreate()
t1 = time.perf_counter()
if sys.argv[2] == "hive" and s.catalog.databaseExists("sqlnb"):
    [t.name for t in s.catalog.listTables("sqlnb")]
t2 = time.perf_counter()
s.stop()
print(f"{{sys.argv[2]}}: getOrCreate {{t1 - t0:.2f}} s, first catalog calls {{t2 - t1:.2f}} s", file=sys.stderr)
"""

MLLIB = """
import sys
from pyspark.ml.classification import NaiveBayes, NaiveBayesModel
from pyspark.ml.feature import StringIndexer, VectorAssembler
from pyspark.sql import SparkSession
b = SparkSession.builder.appName("bench")
for k, v in {conf!r}.items():
    b = b.config(k, v)
spark = b.getOrCreate()
op, path, label, out, model_dir = sys.argv[1:6]
columns = sys.argv[6].split(",")
family = sys.argv[7]
df = VectorAssembler(inputCols=columns, outputCol="features").transform(spark.read.parquet(path))
if op == "fit":
    indexed = StringIndexer(inputCol=label, outputCol="y", stringOrderType="alphabetAsc").fit(df).transform(df)
    NaiveBayes(featuresCol="features", labelCol="y", modelType=family).fit(indexed).write().overwrite().save(model_dir)
else:
    (NaiveBayesModel.load(model_dir).transform(df).select(label, "probability", "prediction")
     .write.mode("overwrite").parquet(out))
spark.stop()
"""


def timed(cmd: list[str], env: dict, cwd: str) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    for line in done.stderr.splitlines():
        if line.startswith(("bare:", "hive:")):
            print(f"  {line}", file=sys.stderr)
    return seconds


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--what", default="bare,hive,models")
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--before", help="a checkout of the code before (its sqlnb runs the 'models' and fit/score)")
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--family", choices=("gaussian", "multinomial"), default="gaussian",
                    help="fit/score the wide file (Gaussian) or its counts (multinomial)")
    args = ap.parse_args(argv)
    what = args.what.split(",")
    here = str(HERE.parent)
    base = {k: v for k, v in os.environ.items() if k not in ("SQLNB_WAREHOUSE", "SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    base.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    checkouts = {"sqlnb": here, **({"sqlnb before": args.before} if args.before else {})}
    py = sys.executable
    runs: dict = {}
    work = tempfile.mkdtemp(prefix="sqlnb-spark-startup-")
    try:
        meta = None
        if {"fit", "score"} & set(what):  # fit_floor.py's "wide" file, made on first use
            out = args.data_dir / f"wide-r{args.rows}-d20-k3-s0-f1"
            meta = baselines.isolated(generate.load_or_generate, "wide", args.rows, 20, 3, out, False, seed=0, files=1)
            if args.family == "multinomial":
                import fit_floor
                meta = baselines.isolated(fit_floor._counts, meta, args.data_dir / f"counts-r{args.rows}-d20-k3-s0-f1")
        kind = ["--kind", "multinomial"] if args.family == "multinomial" else []
        small = os.path.join(work, "small.parquet")
        import pyarrow as pa
        import pyarrow.parquet as pq
        pq.write_table(pa.table({"x": [0.1, 0.2, 1.5, 1.7], "y": ["a", "a", "b", "b"]}), small)
        warehouses = {}
        for tool, path in checkouts.items():  # one model stored in each checkout's warehouse
            wh = warehouses[tool] = os.path.join(work, f"wh-{len(warehouses)}")
            env = dict(base, PYTHONPATH=path)
            timed([py, "-m", "sqlnb", "--engine", "spark", "--warehouse", wh, "fit", small, "--label", "y",
                   "--model", "small"], env, work)
        hive = os.path.join(work, "hive")  # a metastore made once, as a warehouse in use has one
        if "hive" in what:
            timed([py, "-c", BARE.format(conf=CONF), hive, "hive"], base, work)
        for r in range(args.repeat):
            for w in what:
                jobs = []
                if w in ("bare", "hive"):
                    script = BARE.format(conf=CONF)
                    jobs.append((w, [py, "-c", script, hive, w], base))
                for tool, path in checkouts.items():
                    env = dict(base, PYTHONPATH=path)
                    cli = [py, "-m", "sqlnb", "--engine", "spark", "--warehouse", warehouses[tool]]
                    if w == "models":
                        jobs.append((f"{tool} models", cli + ["models"], env))
                    elif w == "fit":
                        jobs.append((f"{tool} fit", cli + ["fit", meta["globs"]["data"], "--label", meta["label"],
                                                           "--model", "wide", "--replace"] + kind, env))
                    elif w == "score":
                        out = os.path.join(work, f"scored-{tool.replace(' ', '_')}.parquet")
                        shutil.rmtree(out, ignore_errors=True)
                        jobs.append((f"{tool} score", cli + ["score", meta["globs"]["data"], "--model", "wide",
                                                             "--keep", meta["label"], "--out", out], env))
                if w in ("fit", "score"):
                    mllib = [py, "-c", MLLIB.format(conf=CONF), w, meta["globs"]["data"], meta["label"],
                             os.path.join(work, "mllib-scored"), os.path.join(work, "mllib-model"),
                             ",".join(meta["numeric"]), args.family]
                    jobs.append((f"MLlib {w}", mllib, base))
                for name, cmd, env in jobs:
                    seconds = timed(cmd, env, work)
                    runs.setdefault(name, []).append(seconds)
                    load = os.getloadavg()[0]
                    print(f"round {r}: {name}: {seconds:.2f} s (load {load:.1f})", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    info = machine()
    command = "python benchmarks/spark_startup.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"`{command}`; {info['cpu']}, {info['memory']}; {info['versions']}; load average at the end "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}\n")
    print(f"Whole processes, seconds, median of {args.repeat} alternating rounds\n")
    print("| process | median (s) | runs (s) |")
    print("|---|---:|---|")
    for name, xs in runs.items():
        print(f"| {name} | {statistics.median(xs):.2f} | {', '.join(f'{x:.2f}' for x in xs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
