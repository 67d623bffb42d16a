"""Spark fit time of tests/test_wide_categorical.py's table just under Spark's 64 grouping
columns (63 categorical + 63 MDL-binned columns x 200 rows), where the categorical
counts and the binned value counts are still one statement each: the split into statements
(sqlnb/models/naive_bayes/counts.py) must not make it slower. One local Spark session;
a warm-up fit, then five timed fits per weighting, min and median printed.

    PYTHONPATH=$PWD python benchmarks/spark_wide_counts.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import sqlnb  # noqa: E402
from sqlnb.engines import SparkEngine  # noqa: E402
from support.spark import spark_session  # noqa: E402
from test_wide_categorical import _table  # noqa: E402


def main() -> None:
    names = [f"c{j}" for j in range(63)] + [f"x{j}" for j in range(63)]
    with spark_session() as session:
        engine = SparkEngine(session)
        session.createDataFrame(_table(63, nums=63)).createOrReplaceTempView("t")
        for weight in (None, "w"):
            kw = dict(weight=weight, features=names, feature_kinds={n: "binned" for n in names[63:]}, bins="mdl")
            sqlnb.fit("t", "y", con=engine, **kw)  # warm-up
            times = []
            for _ in range(5):
                start = time.perf_counter()
                sqlnb.fit("t", "y", con=engine, **kw)
                times.append(time.perf_counter() - start)
            print(f"weight={weight}: min {min(times):.2f} s, median {statistics.median(times):.2f} s", flush=True)


if __name__ == "__main__":
    main()
