"""Row order at 2,000,000 rows in 20 Parquet row groups: the original reproductions of two row-order faults.

These were tests (tests/test_row_integrity.py, tests/test_write_memory.py) until they moved
here: the suite checks the same properties at 200,000 rows in 20 row groups
(tests/test_row_integrity.py::test_a_mixed_model_keeps_the_input_order_in_every_output), and
these runs, a minute or more each on two loaded cores, reproduce the faults' own sizes.

* ``bare``: a mixed model (two Gaussian, one 8-value categorical and one boolean feature)
  scores the file with predictions only (``keep=[]``) and with the row id, with 1 and 4
  threads; the bare predictions must equal the keyed ones sorted by id, position by position
  (without the fix rows came back in another order).
* ``tight``: ``sqlnb --threads 2 --memory-limit 64MB score`` in its own process writes the
  scored rows to Parquet; every ``rid`` must be in its place (DuckDB's ordered COPY
  waits for its writer instead of buffering past the limit). Peak RSS is in the table.

Prints one markdown row per run (wall seconds, peak RSS of the child for ``tight``, the check)
and exits 1 when a check fails.

Example
-------
python benchmarks/row_order_2m.py                      # 2,000,000 rows, 100,000 a row group
python benchmarks/row_order_2m.py --rows 20000         # the smoke size tests/test_benchmarks_smoke.py runs
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import sqlnb  # noqa: E402


def mixed_rows(n: int, seed: int) -> pa.Table:
    """tests/test_row_integrity.py's mixed rows: a row index ``rid`` and four features."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return pa.table({
        "rid": np.arange(n, dtype=np.int64),
        "x1": rng.normal(y, 1.0),
        "x2": rng.normal(-y, 2.0),
        "cat": pa.array(np.array([f"v{i}" for i in range(8)])[(y * 2 + rng.integers(0, 3, n)) % 8]),
        "flag": rng.random(n) < 0.2 + 0.3 * y,
        "y": y.astype(np.int64),
    })


def bare(path: Path, table: pa.Table, threads: int) -> tuple[float, bool]:
    """Predictions only against predictions keyed by ``rid``: (seconds, same in every place)."""
    model = sqlnb.fit(table.slice(0, min(50_000, table.num_rows)), "y", features=["x1", "x2", "cat", "flag"])
    con = duckdb.connect(config={"threads": threads})
    start = time.perf_counter()
    got = model.score(str(path), con, keep=[], outputs=("prediction",)).fetchnumpy()["prediction"]
    keyed = model.score(str(path), con, keep=["rid"], outputs=("prediction",)).fetchnumpy()
    seconds = time.perf_counter() - start
    order = np.argsort(keyed["rid"])
    return seconds, len(got) == table.num_rows and int((got != keyed["prediction"][order]).sum()) == 0


def tight(path: Path, table: pa.Table, work: Path, limit: str) -> tuple[float, float, bool]:
    """``sqlnb score`` in its own process under ``limit``: (seconds, peak RSS MiB, rows in place)."""
    sqlnb.fit(table.slice(0, min(20_000, table.num_rows)), "y", features=["x1", "x2"]).save(str(work / "m.duckdb"), "m")
    out = work / "scored.parquet"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "sqlnb", "--threads", "2", "--memory-limit", limit, "score",
                           str(path), "--model", f"{work / 'm.duckdb'}:m", "--out", str(out)],
                          capture_output=True, text=True, env=env, timeout=3600)
    seconds = time.perf_counter() - start
    rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024  # the only child: this one
    if done.returncode != 0:
        print(done.stderr, file=sys.stderr)
        return seconds, rss, False
    rid = pq.read_table(out, columns=["rid"]).column("rid").to_numpy()
    return seconds, rss, len(rid) == table.num_rows and bool(np.array_equal(rid, np.arange(table.num_rows)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--row-groups", type=int, default=20)
    ap.add_argument("--memory-limit", default="64MB", help="the limit of the `tight` run")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="sqlnb-order-") as tmp:
        work = Path(tmp)
        failed = 0
        print(f"{args.rows:,} rows in {args.row_groups} row groups; load average "
              f"{os.getloadavg()[0]:.1f} at start\n")
        print("| run | threads | seconds | peak RSS MiB | rows in place |\n|---|---:|---:|---:|---|")
        for seed, run in ((5, "bare"), (3, "tight")):
            table = mixed_rows(args.rows, seed)
            path = work / f"{run}.parquet"
            pq.write_table(table, path, row_group_size=max(1, args.rows // args.row_groups))
            if run == "bare":
                for threads in (1, 4):
                    seconds, ok = bare(path, table, threads)
                    failed += not ok
                    print(f"| bare (predictions only vs keyed) | {threads} | {seconds:.1f} | – | {ok} |")
            else:
                seconds, rss, ok = tight(path, table, work, args.memory_limit)
                failed += not ok
                print(f"| tight (`--memory-limit {args.memory_limit}`, own process) | 2 | {seconds:.1f} | "
                      f"{rss:.0f} | {ok} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
