"""Three shell loops against one DuckDB models file: how many commands fail.

For ``--seconds`` (30), three loops run at once, each starting its command again as soon
as the last one ended: ``sqlnb fit DATA --replace``, ``sqlnb score DATA --out -`` and
``sqlnb show``, all on ``DIR/soak.duckdb:m``, where DATA is a Parquet file of ``--rows``
(200,000) rows (4 Gaussian columns, 2 classes). The table gives, per command, how many
ran and how many exited non-zero, and the distinct first ``Error:`` lines.

The checkout is the folder holding the ``sqlnb`` package that the commands import
(``--checkout``), so the same script measures a commit before a change (a ``git
worktree``) and after it.

Example
-------
git worktree add /tmp/base-store 33cf08b
python benchmarks/store_loops.py --checkout /tmp/base-store --dir /tmp/loops-before
python benchmarks/store_loops.py --checkout . --dir /tmp/loops-after
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def make_data(path: Path, rows: int) -> None:
    rng = np.random.default_rng(31)
    y = rng.integers(0, 2, rows)
    cols = {f"x{i}": rng.normal(y * (i + 1) * 0.3, 1.0) for i in range(4)}
    pq.write_table(pa.table({**cols, "y": np.where(y == 1, "yes", "no")}), path)


def loop(name: str, argv: list[str], env: dict, until: float, cwd: Path, results: dict) -> None:
    while time.monotonic() < until:
        p = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        errors = [line for line in p.stderr.splitlines() if line.startswith("Error:")]
        results[name].append((p.returncode, errors[0] if errors else p.stderr.strip()[-200:]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", default=".", help="folder holding the sqlnb package to run")
    ap.add_argument("--dir", required=True, help="working folder (created)")
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--seconds", type=float, default=30)
    args = ap.parse_args()
    work = Path(args.dir)
    work.mkdir(parents=True, exist_ok=True)
    data = work / "data.parquet"
    if not data.exists():
        make_data(data, args.rows)
    db = work / "soak.duckdb"
    for leftover in work.glob("soak.duckdb*"):
        leftover.unlink()
    env = dict(os.environ, PYTHONPATH=str(Path(args.checkout).resolve()))
    sqlnb = [sys.executable, "-m", "sqlnb"]
    model = f"{db.name}:m"
    subprocess.run(sqlnb + ["fit", data.name, "--label", "y", "--model", model], env=env, cwd=work, check=True)
    loops = {"fit": sqlnb + ["fit", data.name, "--label", "y", "--model", model, "--replace"],
             "score": sqlnb + ["score", data.name, "--model", model, "--out", "-"],
             "show": sqlnb + ["show", "--model", model]}
    results: dict = collections.defaultdict(list)
    until = time.monotonic() + args.seconds
    threads = [threading.Thread(target=loop, args=(n, a, env, until, work, results)) for n, a in loops.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = failed = 0
    print(f"| command | ran | failed |\n|---|---:|---:|")
    for name in loops:
        runs = results[name]
        bad = sum(1 for rc, _ in runs if rc != 0)
        total, failed = total + len(runs), failed + bad
        print(f"| {name} | {len(runs)} | {bad} |")
    print(f"| all | {total} | {failed} |")
    errors = collections.Counter(e for runs in results.values() for rc, e in runs if rc != 0)
    for line, n in errors.most_common():
        print(f"{n} x {line}")


if __name__ == "__main__":
    main()
