"""Time ``evaluate`` on DuckDB or Spark against the cheapest aggregate over the same scored rows.

For each engine: the median of ``--repeat`` runs of :func:`sqlnb.workflows.evaluate.evaluate`
(one statement: confusion cells, summary figures and, with two classes, the ROC AUC's
ranking of the distinct scores) and of the summary figures alone (one aggregate over the
scored rows, which :mod:`sqlnb.workflows.cv` runs), on the same Parquet file of
``--rows`` rows × 6 Gaussian features. The gap between the two is what the confusion
cells and the AUC's ranking cost. Spark runs local[2] with a warm session (one
evaluation first, untimed).

    python benchmarks/evaluate_engines.py --rows 1000000 --classes 2 --engines duckdb spark
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

import sqlnb
from sqlnb.engines import DuckDBEngine, SparkEngine
from sqlnb.workflows.evaluate import evaluate, over_scored, summary_query


def make_data(path: str, rows: int, classes: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    k = rng.integers(0, classes, rows)
    cols = {f"x{j}": rng.normal(0.3 * k * (j % 3 + 1), 1.0) for j in range(6)}
    cols["y"] = np.array([f"c{i}" for i in range(classes)])[k]
    pq.write_table(pa.table(cols), path)


def timed(run, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--classes", type=int, default=2)
    ap.add_argument("--engines", nargs="+", default=["duckdb", "spark"], choices=["duckdb", "spark"])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.parquet")
        make_data(path, args.rows, args.classes)
        model = sqlnb.fit(path, "y")
        print(f"| engine | rows | classes | evaluate (s) | summary only (s) | accuracy |")
        print("|---|---:|---:|---:|---:|---:|")
        for name in args.engines:
            if name == "duckdb":
                engine = DuckDBEngine(duckdb.connect())
            else:
                from pyspark.sql import SparkSession
                session = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                           .config("spark.ui.showConsoleProgress", "false")
                           .config("spark.sql.shuffle.partitions", "2").getOrCreate())
                engine = SparkEngine(session)
            source = engine.resolve(path)
            scored = model.scoring_query(source, outputs=("proba", "prediction"), keep=["y"], dialect=engine.dialect)
            summary = over_scored(summary_query("y", list(model.classes), model.label_type), scored)
            result = evaluate(model, source, con=engine)  # warm-up (Spark's first queries compile)
            t_eval = timed(lambda: evaluate(model, source, con=engine), args.repeat)
            t_summary = timed(lambda: engine.execute(summary), args.repeat)
            print(f"| {name} | {args.rows:,} | {args.classes} | {t_eval:.2f} | {t_summary:.2f} | {result.accuracy:.4f} |")
            if name == "spark":
                engine.spark.stop()


if __name__ == "__main__":
    main()
