"""Scoring time with a Venn–Abers calibrator against without (≤ 1.3×).

One model (naive Bayes on the ``mixed`` shape of ``generate.py``: 4 Gaussian and 4
categorical columns, 3 classes, so one-vs-rest: two step lookups per class) scored from
Parquet to Parquet in DuckDB, in this process: uncalibrated, and calibrated with
``venn-abers`` on ``--held-out`` rows (default 10,000; the interval columns ``va_p0_*`` and
``va_p1_*`` written too), and uncalibrated with two more DOUBLE columns a class (the
floor of writing the intervals, whatever computes them). The runs alternate and the medians are compared, of the wall time and of the
process's CPU time (DuckDB's threads included: on a shared, loaded machine the steadier of
the two). The table goes to stdout and, with ``--write-readme``, into benchmarks/README.md.

Example
-------
python benchmarks/venn_abers_scoring.py --rows 1000000 --repeat 2 --held-out 10000
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))
import generate  # noqa: E402
from run import write_readme  # noqa: E402

import sqlnb  # noqa: E402

def with_columns(scored: duckdb.DuckDBPyRelation, per_class: int) -> duckdb.DuckDBPyRelation:
    """``scored`` with ``per_class`` more DOUBLE columns a class, each a product of the
    class's probability: the floor of writing the calibrator's interval columns, whatever
    computes them (Venn–Abers adds ``va_p0_*`` and ``va_p1_*``: two a class)."""
    probs = [c for c in scored.columns if c.startswith("proba_")]
    extra = [duckdb.ColumnExpression(p) * duckdb.ConstantExpression(0.5 ** (j + 1)) for p in probs
             for j in range(per_class)]
    return scored.select(*[duckdb.ColumnExpression(c) for c in scored.columns],
                         *[e.alias(f"extra_{i}") for i, e in enumerate(extra)])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--held-out", type=int, default=10_000, help="rows the calibrator is fitted on")
    ap.add_argument("--data", help="directory for the generated data (kept between runs)")
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args(argv)
    out = Path(args.data or tempfile.mkdtemp()) / f"mixed_{args.rows}"
    glob = generate.load_or_generate("mixed", args.rows, 8, 3, out)["globs"]["data"]
    con = duckdb.connect()
    rows = f"SELECT * FROM read_parquet('{glob}') LIMIT {{}} OFFSET {{}}"
    model = sqlnb.fit(con.sql(rows.format(200_000, args.held_out)).to_arrow_table(), "label")
    calibrated = sqlnb.calibrate(model, con.sql(rows.format(args.held_out, 0)).to_arrow_table(), "venn-abers", con=con)
    runs = {"uncalibrated": lambda: model.score(glob, con),
            "uncalibrated + 6 DOUBLE columns": lambda: with_columns(model.score(glob, con), 2),
            "venn-abers": lambda: calibrated.score(glob, con)}
    scored = Path(tempfile.mkdtemp()) / "scored.parquet"
    load0 = os.getloadavg()[0]
    times: dict[str, list[float]] = {k: [] for k in runs}
    cpu: dict[str, list[float]] = {k: [] for k in runs}
    for _ in range(args.repeat):
        for name, scoring in runs.items():
            t, c = time.perf_counter(), time.process_time()
            scoring().write_parquet(str(scored))
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
            os.remove(scored)
    base, base_cpu = statistics.median(times["uncalibrated"]), statistics.median(cpu["uncalibrated"])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    steps = "/".join(f"{sum(a != b for a, b in zip(v, v[1:])):,}" for st in calibrated.calibration.venn_abers.steps
                     for v in (st.p0, st.p1))
    lines = [f"Scoring {args.rows:,} rows (mixed: 4 Gaussian + 4 categorical columns, 3 classes; calibrated on "
             f"{args.held_out:,} rows, steps of p0/p1 a class {steps}) Parquet to Parquet, median of {args.repeat} "
             f"alternating runs, commit {commit}, load {load0:.1f}-{os.getloadavg()[0]:.1f} "
             f"(`python benchmarks/venn_abers_scoring.py --rows {args.rows} --repeat {args.repeat} --held-out {args.held_out}`):",
             "", "| model | median s | min s | ÷ uncalibrated | median CPU s | CPU ÷ uncalibrated |",
             "|---|---|---|---|---|---|"]
    for name, ts in times.items():
        cs = statistics.median(cpu[name])
        lines.append(f"| {name} | {statistics.median(ts):.2f} | {min(ts):.2f} | "
                     f"{statistics.median(ts) / base:.2f}× | {cs:.2f} | {cs / base_cpu:.2f}× |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.write_readme:
        write_readme(text, "venn-abers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
