"""Spark's generated code for sqlnb's scoring plans: largest method, and scoring time.

HotSpot does not JIT-compile a method over 8,000 bytecodes; Spark keeps generated methods
up to ``spark.sql.codegen.hugeMethodLimit`` (65,535), so a longer one runs interpreted. Two measurements, in one local[2] session with Spark's default SQL settings:

``--sizes``
    the largest generated method (``tests/support/spark.py: max_method_bytecodes``) of the
    scoring plan of each model kind, at each ``--shapes`` (columns x classes), over a small
    Parquet file;
``--time``
    Gaussian naive Bayes scoring of the ``wide`` data set (``generate.py``: ``--rows`` x 20
    DOUBLE x 3 classes, cached in ``--data-dir``) into Spark's ``noop`` sink (every output
    column computed, nothing written), by default and with ``hugeMethodLimit=8000``, and
    the same scoring query in DuckDB as ``SELECT count(*), sum(proba_c0)``: medians of
    ``--repeat`` alternating runs.

Run it against another checkout with ``PYTHONPATH=<checkout>`` to compare shapes.

Examples
--------
python benchmarks/spark_codegen.py --sizes --shapes 20x3,40x5,100x5
python benchmarks/spark_codegen.py --time --rows 1000000 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
import baselines  # noqa: E402
import generate  # noqa: E402

KINDS = ["gaussian", "multinomial", "bernoulli", "categorical", "mixed", "lda", "qda", "logistic"]


def sizes(spark, shapes: list[tuple[int, int]], kinds: list[str]) -> list[dict]:
    """Largest generated method of each kind's scoring plan at each shape."""
    import pyarrow.parquet as pq

    from support.spark import max_method_bytecodes
    from sqlnb.engines import SparkEngine
    from test_spark_codegen import _fit, _table

    out = []
    with tempfile.TemporaryDirectory(prefix="sqlnb-codegen-") as tmp:
        for d, k in shapes:
            for kind in kinds:
                t = _table(kind, 400, d, k)
                path = f"{tmp}/{kind}-{d}.parquet"
                pq.write_table(t, path)
                spark.read.parquet(path).createOrReplaceTempView("codegen_input")
                size = max_method_bytecodes(_fit(kind, t).score("codegen_input", SparkEngine(spark)))
                out.append({"kind": kind, "columns": d, "classes": k, "max_method_bytecodes": size})
                print(json.dumps(out[-1]), flush=True)
    return out


def timings(spark, source: str, repeat: int) -> dict:
    """Medians of Spark scoring (default settings, hugeMethodLimit=8000) and DuckDB scoring."""
    import duckdb

    import sqlnb
    from sqlnb import sql
    from sqlnb.engines import SparkEngine
    from sqlnb.source import resolve
    from support.spark import max_method_bytecodes

    con = duckdb.connect()
    model = sqlnb.fit(source, "label", con=con)
    spark.read.parquet(source).createOrReplaceTempView("wide")
    engine = SparkEngine(spark)
    query = model.scoring_query(resolve(source, con), nan_gate=True, dialect="duckdb")
    duck_sql = f"SELECT count(*), sum(\"proba_c0\") FROM ({sql.render(query)})"
    runs: dict[str, list[float]] = {"spark default": [], "spark hugeMethodLimit=8000": [], "duckdb": []}
    method = max_method_bytecodes(model.score("wide", engine))
    for _ in range(repeat):
        for name in runs:
            if name == "duckdb":
                t0 = time.perf_counter()
                con.execute(duck_sql).fetchall()
                runs[name].append(time.perf_counter() - t0)
                continue
            spark.conf.set("spark.sql.codegen.hugeMethodLimit", "8000" if "8000" in name else "65535")
            t0 = time.perf_counter()
            model.score("wide", engine).write.format("noop").mode("overwrite").save()
            runs[name].append(time.perf_counter() - t0)
            spark.conf.unset("spark.sql.codegen.hugeMethodLimit")
    result = {name: round(statistics.median(v), 2) for name, v in runs.items()}
    result["runs"] = {name: [round(x, 2) for x in v] for name, v in runs.items()}
    result["max_method_bytecodes"] = method
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", action="store_true")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--shapes", default="20x3,40x5")
    ap.add_argument("--kinds", default=",".join(KINDS))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--driver-memory", default="8g")
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    args = ap.parse_args(argv)
    from pyspark.sql import SparkSession

    # Spark's defaults but for what a local run needs: mllib.py's settings.
    spark = (SparkSession.builder.master("local[2]").appName("sqlnb-codegen")
             .config("spark.driver.memory", args.driver_memory).config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        if args.sizes:
            shapes = [tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")]
            sizes(spark, shapes, args.kinds.split(","))
        if args.time:
            out = args.data_dir / f"wide-r{args.rows}-d20-k3-s0-f1"
            meta = baselines.isolated(generate.load_or_generate, "wide", args.rows, 20, 3, out, False, seed=0, files=1)
            print(json.dumps(timings(spark, meta["globs"]["data"], args.repeat)), flush=True)
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
