"""Naive Bayes with learnt weights (``model="weighted"``) against naive Bayes: fit and score
times on generated categorical data (benchmarks/generate.py's ``categorical`` shape), and the
two ways of fitting the weights the design weighed.

Rows
----
naive Bayes fit          ``sqlnb.fit(bins="mdl")``: the statistics scan (what the weighted fit starts from)
weighted fit, l2 given   naive Bayes's fit + one aggregate scan of the (label, value positions)
                         patterns + Newton's method on them in numpy
weighted fit, l2 by CV   + the fold assignment (a window over the rows) and 5 folds × 5 λ fits
pattern scan             the aggregate scan alone, and how many patterns it returns
one scoring scan         ``SUM`` of a probability over the scoring SELECT of the fitted model: what one
                         iteration of an optimiser that reads the loss and gradient from an
                         aggregate over the rows (rows never leave the engine) costs at least,
                         since every iteration must score every row
naive Bayes / weighted   the scoring SELECT of each, written to a DuckDB table
scoring

Examples
--------
python benchmarks/weighted_fit.py --rows 1000000 --features 8 --classes 3 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import duckdb

sys.path.insert(0, str(Path(__file__).resolve().parent))
import generate  # noqa: E402

import sqlnb  # noqa: E402
from sqlnb import sql  # noqa: E402
from sqlnb.engines import as_engine  # noqa: E402
from sqlnb.models.naive_bayes import weighted  # noqa: E402
from sqlnb.source import read_with  # noqa: E402


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=8)
    ap.add_argument("--classes", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", default="/tmp/sqlnb-weighted-bench")
    ap.add_argument("--cv", action="store_true", help="also the fit with l2 chosen by cross-validation (slow)")
    args = ap.parse_args(argv)
    out = Path(args.data_dir) / f"categorical-{args.rows}-{args.features}-{args.classes}"
    if not (out / "meta.json").exists():
        generate.generate("categorical", args.rows, args.features, args.classes, out)
    data = str(out / "*.parquet")
    con = duckdb.connect()
    rows = []

    def row(what, seconds, note=""):
        rows.append((what, seconds, note))
        print(f"{what:<28} {seconds:8.2f} s  {note}", flush=True)

    t, nb = best(lambda: sqlnb.fit(data, "label", con=con, bins="mdl"), args.repeat)
    row("naive Bayes fit", t)
    t, w = best(lambda: sqlnb.fit(data, "label", con=con, model="weighted", l2=1e-3), args.repeat)
    row("weighted fit, l2 given", t, f"{w.report['patterns']:,} patterns")
    if args.cv:
        t, wcv = best(lambda: sqlnb.fit(data, "label", con=con, model="weighted"), 1)
        row("weighted fit, l2 by CV", t, f"l2 = {wcv.l2:g}")
    engine = as_engine(con)
    source = engine.resolve(read_with(data, keep_text=("label",)))
    t, patterns = best(lambda: weighted.read_patterns(engine, source, "label", None, w.features, w.stats),
                       args.repeat)
    row("pattern scan", t, f"{len(patterns.y):,} patterns")
    con.execute(f"CREATE OR REPLACE VIEW data AS SELECT * FROM read_parquet('{data}')")
    for name, model in (("naive Bayes", nb), ("weighted", w)):
        select = model.to_sql("duckdb", source="data", con=con, outputs=("proba", "prediction"))
        first = model.proba_columns()[0]  # summed, so that the probabilities are computed (COUNT(*) is not)
        t, _ = best(lambda: con.sql(f'SELECT SUM("{first}") FROM ({select})').fetchall(), args.repeat)
        row(f"{name}: one scoring scan", t)
        t, _ = best(lambda: con.execute(f"CREATE OR REPLACE TABLE scored AS {select}"), args.repeat)
        row(f"{name} scoring to a table", t)
    print(json.dumps({"rows": args.rows, "features": args.features, "classes": args.classes,
                      "load": os.getloadavg()[0], "results": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
