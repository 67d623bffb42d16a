"""The pair scan of structures built on pair counts (TAN, AODE, KDB) against the number of
discrete features F: wall seconds, peak RSS and the SQL it sends, on a synthetic table of
``--rows`` rows, F categorical columns of 4 values (or ``--kind binned``: numeric columns in 4
equal-frequency bins) and 2 classes (DuckDB, its default
threads). Each F runs in a fresh process, so that the peak RSS is that run's.

Example
-------
python benchmarks/pair_scan.py --features 40 57 80 --rows 4601
python benchmarks/pair_scan.py --features 8 --rows 1000000
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time


def one(F: int, rows: int, scan: str, kind: str) -> dict:
    import duckdb

    from sqlnb import sql
    from sqlnb.engines import as_engine
    from sqlnb.models.naive_bayes import tan
    from sqlnb.models.naive_bayes.fit import collect_statistics, plan_features
    from sqlnb.source import resolve

    tan.MAX_FEATURES = max(tan.MAX_FEATURES, F)  # measure past the limit too
    con = duckdb.connect()
    value = "VARCHAR" if kind == "categorical" else "DOUBLE"
    cols = ", ".join(f"CAST((hash(i * {F} + {j}) + (i % 2) * {j % 3}) % 4 AS {value}) AS c{j}" for j in range(F))
    con.execute(f"CREATE TABLE t AS SELECT CAST(i % 2 AS VARCHAR) AS y, {cols} FROM range({rows}) r(i)")
    src = resolve("t", con)
    if kind == "categorical":
        feats = plan_features(src, "y")
    else:  # numeric columns in 4 equal-frequency bins, their cut points from a fit
        import sqlnb
        tan.MAX_FEATURES = 1000
        feats = list(sqlnb.fit("t", "y", con=con, bins="quantile:4").features)
    engine = as_engine(con)
    stats = collect_statistics(engine, src, "y", feats)
    tree = tan.eligible(feats, stats.features)
    sent: list[str] = []
    execute = engine.execute

    def counting(query, *a, **k):
        sent.append(sql.render(query, engine.dialect) if not isinstance(query, str) else query)
        return execute(query, *a, **k)

    engine.execute = counting
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    tan.collect_pairs(engine, src, "y", None, tree, stats.classes, **(_values(tan, stats) if scan == "long" else {}))
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {"scan": scan, "kind": kind, "F": len(tree), "rows": rows, "seconds": round(seconds, 3), "statements": len(sent),
            "sql_chars": sum(map(len, sent)), "peak_rss_mb": round(peak / 1024), "rss_before_mb": round(before / 1024)}


def _values(tan, stats) -> dict:
    # collect_pairs takes the features' statistics where it needs their values
    import inspect
    return {"stats": stats.features} if "stats" in inspect.signature(tan.collect_pairs).parameters else {}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--features", type=int, nargs="+", default=[40, 57, 80])
    ap.add_argument("--rows", type=int, default=4601)
    ap.add_argument("--scan", nargs="+", default=["sets", "long"], choices=["sets", "long"],
                    help="sets: GROUPING SETS statements (every engine before); long: the one DuckDB statement")
    ap.add_argument("--kind", default="categorical", choices=["categorical", "binned"])
    ap.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.features[0], args.rows, args.scan[0], args.kind)))
        return
    for F in args.features:
        for scan in args.scan:  # back to back, so that their ratio means something on a loaded machine
            out = subprocess.run([sys.executable, __file__, "--one", "--features", str(F), "--rows", str(args.rows),
                                  "--scan", scan, "--kind", args.kind], capture_output=True, text=True)
            print(out.stdout.strip() or out.stderr.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
