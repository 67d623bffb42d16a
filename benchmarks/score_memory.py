"""Peak memory and wall time of ``sqlnb score`` to Parquet, whole processes.

Fits a Gaussian model on the ``wide`` data set (``generate.py``: N rows x 20 DOUBLE x 3
classes, cached in ``benchmarks/data/``) and scores every row to a Parquet file with the
CLI, keeping every input column (the default), under each memory setting in ``--limits``
(``default``: sqlnb's own, 1GB for file outputs; any other value is passed as
``--memory-limit``), alternating rounds. Peak RSS and wall time come from ``/usr/bin/time
-v`` around the process. Each output is checked to hold the input's rows in order.

Examples
--------
python benchmarks/score_memory.py --rows 10000000 --repeat 3 --limits default,20GB,512MB
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import baselines  # noqa: E402
import generate  # noqa: E402
from run import machine  # noqa: E402

SQLNB = [sys.executable, "-m", "sqlnb"]


def timed_process(args: list[str]) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of ``args`` run under ``/usr/bin/time -v``."""
    done = subprocess.run(["/usr/bin/time", "-v", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr}")
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    seconds = int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3))
    return seconds, int(rss.group(1)) / 1024


def in_order(scored: str, source: str) -> bool:
    """Whether ``scored`` holds ``source``'s rows in the same order (x0 and x19 compared)."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    q = ("SELECT count(*) = (SELECT count(*) FROM read_parquet($2)) AND bool_and(a.x0 = b.x0 AND a.x19 = b.x19) "
         "FROM (SELECT x0, x19, row_number() OVER () AS r FROM read_parquet($1)) a "
         "JOIN (SELECT x0, x19, row_number() OVER () AS r FROM read_parquet($2)) b USING (r)")
    return bool(con.execute(q, [scored, source]).fetchall()[0][0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--limits", default="default,20GB")
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    args = ap.parse_args(argv)
    out_dir = args.data_dir / f"wide-r{args.rows}-d20-k3-s0-f1"
    meta = baselines.isolated(generate.load_or_generate, "wide", args.rows, 20, 3, out_dir, False, seed=0, files=1)
    source = meta["globs"]["data"]
    limits = args.limits.split(",")
    results: dict = {lim: [] for lim in limits}
    with tempfile.TemporaryDirectory(prefix="sqlnb-bench-") as tmp:
        model = f"{tmp}/m.duckdb:wide"
        subprocess.run([*SQLNB, "fit", source, "--label", "label", "--model", model], check=True)
        for _ in range(args.repeat):
            for lim in limits:
                out = os.path.join(tmp, "scored.parquet")
                resources = [] if lim == "default" else ["--memory-limit", lim]
                results[lim].append(timed_process([*SQLNB, *resources, "score", source, "--model", model,
                                                   "--out", out, "--replace"]))
                if not in_order(out, source):
                    raise SystemExit(f"rows out of order with {lim}")
                print(f"{lim}: {results[lim][-1][0]:.2f} s, {results[lim][-1][1]:.0f} MiB", file=sys.stderr)
    info = machine()
    command = "python benchmarks/score_memory.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"`{command}`; {info['cpu']}, {info['memory']}; {info['versions']}\n")
    print(f"{args.rows:,} rows x 20 DOUBLE x 3 classes scored to Parquet (all 25 columns), whole `sqlnb score` "
          f"processes, median of {args.repeat} alternating rounds; every output checked in order\n")
    print("| memory limit | wall s | peak RSS MiB |\n|---|---:|---:|")
    for lim in limits:
        walls, peaks = zip(*results[lim])
        name = "default (1GB for file outputs)" if lim == "default" else f"`--memory-limit {lim}`"
        print(f"| {name} | {statistics.median(walls):.2f} | {statistics.median(peaks):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
