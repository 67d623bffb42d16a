"""sqlnb (on DuckDB and on Spark) against Spark MLlib's ``NaiveBayes``: fit and score.

The peer a user who outgrows one machine picks today is Spark MLlib. For each family
(``gaussian`` on the ``wide`` data, ``multinomial`` on the ``counts`` data: N rows x 20
columns x 3 classes, the files ``fit_floor.py`` makes, cached in ``benchmarks/data/``) and
each tool, in a fresh process per measurement, alternating rounds:

``mllib``
    ``spark.read.parquet`` -> ``VectorAssembler`` -> ``StringIndexer`` of the label (MLlib
    takes numeric labels) -> ``NaiveBayes(modelType=...)``.fit;
    scoring: ``model.transform`` of the assembled rows, ``label, probability, prediction``
    written to Parquet by Spark.
``sqlnb-spark``
    ``sqlnb.fit(path, "label", con=SparkEngine(session), kind=...)`` (two aggregate
    queries in Spark); scoring: the scoring SELECT on Spark, ``label``, ``proba_*`` and
    ``prediction`` written to Parquet by Spark's executors (what ``sqlnb --engine spark
    score --out`` does).
``sqlnb-duckdb``
    ``sqlnb.fit(path, "label", kind=...)``; scoring: ``sqlnb score`` as the CLI writes it
    (the same columns, to one Parquet file, in input order).

Both Spark tools run in the same session settings: ``local[2]``, ``spark.driver.memory=8g``,
Spark's defaults otherwise (whole-stage code generation on, default ``hugeMethodLimit``),
progress bars off. Times are taken inside the process around the operation (reading the
files included, the JVM's start excluded and reported separately); each process is new, so
the JIT is as cold for one tool as for the other. MLlib's smoothing is its default 1.0,
sqlnb's ``alpha`` 1.0; MLlib's class prior is the smoothed (Dirichlet) one.

Examples
--------
python benchmarks/mllib.py --rows 1000000 --repeat 3
python benchmarks/mllib.py --rows 10000000 --repeat 3 --ops fit,score
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402
import fit_floor  # noqa: E402
from run import machine  # noqa: E402

TOOLS = ("mllib", "sqlnb-spark", "sqlnb-duckdb")
FAMILIES = {"gaussian": "wide", "multinomial": "counts"}
SPARK_CONF = {"spark.driver.memory": "8g", "spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false"}


def _session():
    """A local[2] session with :data:`SPARK_CONF`; (session, seconds to start it)."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    t0 = time.perf_counter()
    builder = SparkSession.builder.master("local[2]").appName("sqlnb-bench")
    for k, v in SPARK_CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark, time.perf_counter() - t0


def measure(tool: str, family: str, op: str, meta: dict, out_dir: str) -> dict:
    """Run one (tool, family, op) in this (fresh) process: ``{"seconds", "start"}``."""
    path, label, columns = meta["globs"]["data"], meta["label"], meta["numeric"]
    out = os.path.join(out_dir, f"{tool}-{family}.parquet")
    shutil.rmtree(out, ignore_errors=True)
    if os.path.exists(out):
        os.remove(out)
    if tool == "sqlnb-duckdb":
        import duckdb

        import sqlnb

        con = duckdb.connect()
        con.execute("SET enable_progress_bar = false")
        start = 0.0
        if op == "fit":
            t0 = time.perf_counter()
            sqlnb.fit(path, label, con=con, kind=family, screen=False)
            return {"seconds": time.perf_counter() - t0, "start": start}
        model = sqlnb.fit(path, label, con=con, kind=family, screen=False)
        from sqlnb.io import output
        from sqlnb.io.locations import FileOut
        con.execute(f"SET memory_limit = '{output.WRITE_MEMORY_LIMIT}'")  # as the CLI sets it
        t0 = time.perf_counter()
        scoring = model.scoring_query(sqlnb.source.resolve(path, con), keep=[label],
                                      outputs=("proba", "prediction"))
        output.write(con, scoring, FileOut(out, "parquet"))
        return {"seconds": time.perf_counter() - t0, "start": start}

    spark, start = _session()
    if tool == "mllib":
        from pyspark.ml.classification import NaiveBayes
        from pyspark.ml.feature import StringIndexer, VectorAssembler

        def assembled():
            return VectorAssembler(inputCols=columns, outputCol="features").transform(spark.read.parquet(path))

        def fit():
            # MLlib takes numeric labels: the string label is indexed first, as a user must.
            df = assembled()
            indexer = StringIndexer(inputCol=label, outputCol="y", stringOrderType="alphabetAsc").fit(df)
            return NaiveBayes(featuresCol="features", labelCol="y", modelType=family).fit(indexer.transform(df))

        if op == "fit":
            t0 = time.perf_counter()
            fit()
            seconds = time.perf_counter() - t0
        else:
            model = fit()
            t0 = time.perf_counter()
            (model.transform(assembled()).select(label, "probability", "prediction")
             .write.mode("overwrite").parquet(out))
            seconds = time.perf_counter() - t0
        spark.stop()
        return {"seconds": seconds, "start": start}

    import sqlnb
    from sqlnb.engines import SparkEngine
    from sqlnb.io.engine_output import write_spark_files
    from sqlnb.io.locations import FileOut

    engine = SparkEngine(spark)
    if op == "fit":
        t0 = time.perf_counter()
        sqlnb.fit(path, label, con=engine, kind=family, screen=False)
        seconds = time.perf_counter() - t0
    else:
        model = sqlnb.fit(path, label, con=engine, kind=family, screen=False)
        t0 = time.perf_counter()
        write_spark_files(engine, model.score(path, con=engine, keep=[label], outputs=("proba", "prediction")),
                          FileOut(out, "parquet"), True)
        seconds = time.perf_counter() - t0
    spark.stop()
    return {"seconds": seconds, "start": start}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--families", default=",".join(FAMILIES))
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--ops", default="fit,score")
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--json", type=Path, help="also write every measurement here")
    args = ap.parse_args(argv)
    metas = fit_floor.datasets(args.rows, args.data_dir)
    info = machine()
    command = "python benchmarks/mllib.py " + " ".join(argv if argv is not None else sys.argv[1:])
    families, tools, ops = args.families.split(","), args.tools.split(","), args.ops.split(",")
    runs: dict = {}
    with tempfile.TemporaryDirectory(prefix="sqlnb-mllib-", dir=args.data_dir) as out_dir:
        for r in range(args.repeat):  # alternate: each round runs everything once
            for fam in families:
                for op in ops:
                    for tool in tools:
                        got = baselines.isolated(measure, tool, fam, op, metas[FAMILIES[fam]], out_dir)
                        runs.setdefault((fam, op, tool), []).append(got)
                        print(f"round {r}: {fam} {op} {tool}: {got['seconds']:.2f} s (start {got['start']:.1f} s)",
                              file=sys.stderr, flush=True)
    if args.json:
        args.json.write_text(json.dumps({"|".join(k): v for k, v in runs.items()}, indent=1))
    print(f"`{command}`; {info['cpu']}, {info['memory']}; {info['versions']}; "
          f"Spark local[2], driver memory 8g\n")
    print(f"{args.rows:,} rows x 20 columns x 3 classes; seconds inside a fresh process (JVM start excluded), "
          f"median of {args.repeat} alternating rounds\n")
    print("| family | op | MLlib | sqlnb on Spark | sqlnb on DuckDB | MLlib ÷ sqlnb-Spark | MLlib ÷ sqlnb-DuckDB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for fam in families:
        for op in ops:
            m = {t: statistics.median(x["seconds"] for x in runs[(fam, op, t)]) for t in tools if (fam, op, t) in runs}
            ratio = (lambda t: f"{m['mllib'] / m[t]:.2f}×" if "mllib" in m and t in m else "—")
            cell = (lambda t: f"{m[t]:.2f}" if t in m else "—")
            print(f"| {fam} | {op} | {cell('mllib')} | {cell('sqlnb-spark')} | {cell('sqlnb-duckdb')} | "
                  f"{ratio('sqlnb-spark')} | {ratio('sqlnb-duckdb')} |")
    starts = [x["start"] for k, v in runs.items() if k[2] != "sqlnb-duckdb" for x in v]
    if starts:
        print(f"\nSpark session start (excluded above): median {statistics.median(starts):.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
