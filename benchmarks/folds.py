"""The cost of stratified folds: the copy cross-validation makes of its source, with each
row's fold, under the hash folds sqlnb used before (``hash(<columns>, seed) % k``, no
window) and under the stratified ones (:func:`sqlnb.workflows.folds.assign_folds`: one
``row_number()`` window ordered by label and hash), on the same Parquet file.

    python benchmarks/folds.py --rows 10000000 --folds 5 --repeat 3

Both read the file once; the window adds a sort of the rows by (label, hash) before they
are written. Prints a markdown table of wall seconds (median / min) and the peak RSS of a
child process per run.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def make(path: str, rows: int, features: int, classes: int) -> None:
    """``rows`` rows of ``features`` DOUBLE columns, an integer ``id`` and a VARCHAR label
    of ``classes`` unequal classes, written with DuckDB (hash-based, reproducible)."""
    import duckdb
    cols = ", ".join(f"(hash(i, {j}) % 100000) / 1000.0 AS x{j}" for j in range(features))
    label = f"'c' || CAST(floor(sqrt((hash(i, 99) % 10000) / 10000.0) * {classes}) AS INTEGER)"
    duckdb.connect().execute(f"COPY (SELECT i AS id, {cols}, {label} AS y FROM range({rows}) t(i)) "
                             f"TO '{path}' (FORMAT parquet)")


def child(path: str, how: str, folds: int, key: str | None, threads: int | None) -> dict:
    """One copy, in this process: ``{"seconds", "rss_mb", "sizes"}``."""
    sys.path.insert(0, ROOT)
    import duckdb
    from sqlglot import exp
    from sqlnb import sql
    from sqlnb.engines import as_engine
    from sqlnb.source import read_with
    from sqlnb.workflows.folds import assign_folds, portable_hash
    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {threads}")
    source = as_engine(con).resolve(read_with(path))
    keys = [key] if key else None
    if how == "stratified":
        folded, fold = assign_folds(source, "y", folds, 0, keys)
        query = exp.select(*[sql.col(c, "src") for c in source.columns], fold).from_(folded.from_("src"))
    else:  # the hash folds of f6098f3 (sqlnb/workflows/folds.py then)
        h = (portable_hash(sql.col(key, "src"), 0) if key else
             exp.Anonymous(this="hash", expressions=[*(sql.col(c, "src") for c in source.columns),
                                                     exp.Literal.number(0)]))
        fold = exp.alias_(exp.Mod(this=h, expression=exp.Literal.number(folds)), "cv_fold", quoted=True)
        query = exp.select(*[sql.col(c, "src") for c in source.columns], fold).from_(source.from_("src"))
    start = time.perf_counter()
    con.execute("CREATE TEMP TABLE copy AS " + sql.render(query))
    seconds = time.perf_counter() - start
    sizes = [n for _, n in con.execute('SELECT "cv_fold", count(*) FROM copy GROUP BY 1 ORDER BY 1').fetchall()]
    return {"seconds": seconds, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "sizes": sizes}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--data", default="/tmp/sqlnb_folds_bench.parquet")
    ap.add_argument("--child", nargs=3, metavar=("HOW", "KEY", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        how, key, path = args.child
        print(json.dumps(child(path, how, args.folds, None if key == "-" else key, args.threads)))
        return
    if not os.path.exists(args.data):
        make(args.data, args.rows, args.features, args.classes)
    load = os.getloadavg()[0]
    print(f"{args.rows:,} rows x {args.features} DOUBLE + id + label ({args.classes} classes), {args.folds} folds; "
          f"wall seconds of the copy, median / min of {args.repeat}; load average {load:.1f} at start\n")
    print("| folds | key | median | min | peak RSS (MB) | rows per fold |\n|---|---|---:|---:|---:|---|")
    for key in ("-", "id"):
        for how in ("hash", "stratified"):
            runs = []
            for _ in range(args.repeat):
                cmd = [sys.executable, __file__, "--folds", str(args.folds), "--child", how, key, args.data]
                if args.threads:
                    cmd += ["--threads", str(args.threads)]
                runs.append(json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout))
            secs = [r["seconds"] for r in runs]
            print(f"| {how} | {'every column' if key == '-' else key} | {statistics.median(secs):.2f} | {min(secs):.2f} "
                  f"| {max(r['rss_mb'] for r in runs):.0f} | {', '.join(f'{n:,}' for n in runs[0]['sizes'])} |",
                  flush=True)


if __name__ == "__main__":
    main()
