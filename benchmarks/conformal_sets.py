"""Scoring time with conformal prediction sets against without (≤ 1.2×; RAPS's ≤ 1.3×).

One model (naive Bayes on the ``mixed`` shape of ``generate.py``: 4 Gaussian and 4
categorical columns, 3 classes) scored from Parquet to Parquet in DuckDB, in this process:
without sets, and with LAC, APS (non-randomised and randomised), RAPS (λ and k_reg chosen
on the held-out rows) and Mondrian sets (per class, and by the categorical column ``c0``)
fitted on 100,000 held-out rows (``--sets`` picks some), each written both ways
(``--set-format``): ``list`` (DuckDB's
default, ``prediction_set``) and ``flags`` (``in_set_<class>``). The runs alternate
(without, lac, lac flags, ..., without, ...) and the medians are compared, of the wall
time and of the process's CPU time (DuckDB's threads included: on a shared, loaded machine
the steadier of the two). The table goes to stdout and, with ``--write-readme``, into
benchmarks/README.md.

Example
-------
python benchmarks/conformal_sets.py --rows 10000000 --repeat 5
python benchmarks/conformal_sets.py --rows 10000000 --repeat 5 --sets aps raps
"""

from __future__ import annotations

import argparse
import os
import re
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

import sqlnb  # noqa: E402
from sqlnb.workflows.conformal import conformal  # noqa: E402

README = HERE / "README.md"
SETS = ("lac", "aps", "raps", "mondrian")
MARK = "conformal-sets"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--data", help="directory for the generated data (kept between runs)")
    ap.add_argument("--sink", choices=("parquet", "table", "csv"), default="parquet",
                    help="where the scored rows go: a Parquet file (default), a DuckDB table, a CSV file")
    ap.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS), help="which sets to time (default: all)")
    ap.add_argument("--write-readme", action="store_true")
    args = ap.parse_args(argv)
    data = Path(args.data or tempfile.mkdtemp()) / f"mixed_{args.rows}"
    if not (data / "meta.json").exists():
        generate.main(["--shape", "mixed", "--rows", str(args.rows), "--features", "8", "--classes", "3",
                       "--out", str(data)])
    glob = str(data / "part-*.parquet")
    con = duckdb.connect()
    holdout = con.sql(f"SELECT * FROM read_parquet('{glob}') LIMIT 100000").to_arrow_table()
    model = sqlnb.fit(con.sql(f"SELECT * FROM read_parquet('{glob}') LIMIT 200000 OFFSET 100000").to_arrow_table(),
                      "label")
    fitting = {"lac": dict(method="lac"), "aps": dict(method="aps"), "aps randomized": dict(method="aps", randomized=True),
               "raps": dict(method="raps"), "mondrian": dict(method="mondrian"),
               "mondrian by c0": dict(method="mondrian", by="c0")}
    fitted = {name: conformal(model, holdout, 0.1, con=con, **kw) for name, kw in fitting.items()
              if name.split(" by ")[0].split(" randomized")[0] in args.sets}
    models = {"without": (model, None)}
    for name, m in fitted.items():
        models[f"{name} list"] = (m, None)
        models[f"{name} flags"] = (m, "flags")
    out = Path(tempfile.mkdtemp()) / f"scored.{args.sink}"
    load0 = os.getloadavg()[0]
    times: dict[str, list[float]] = {k: [] for k in models}
    cpu: dict[str, list[float]] = {k: [] for k in models}
    for _ in range(args.repeat):
        for name, (m, form) in models.items():
            t, c = time.perf_counter(), time.process_time()
            scored = m.score(glob, con, set_format=form)
            if args.sink == "parquet":
                scored.write_parquet(str(out))
            elif args.sink == "csv":
                scored.write_csv(str(out))
            else:
                scored.create("scored")
            times[name].append(time.perf_counter() - t)
            cpu[name].append(time.process_time() - c)
            if args.sink == "table":
                con.execute("DROP TABLE scored")
            else:
                os.remove(out)
    base, base_cpu = statistics.median(times["without"]), statistics.median(cpu["without"])
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=HERE).stdout.strip()
    load = f"{load0:.1f}-{os.getloadavg()[0]:.1f}"
    lines = [f"<!-- {MARK} -->",
             f"Scoring {args.rows:,} rows (mixed: 4 Gaussian + 4 categorical columns, 3 classes) Parquet to "
             f"{ {'parquet': 'Parquet', 'table': 'a DuckDB table', 'csv': 'CSV'}[args.sink]}, median of {args.repeat} alternating runs, commit {commit}, load {load} "
             f"(`python benchmarks/conformal_sets.py --rows {args.rows} --repeat {args.repeat}"
             + ("" if args.sink == "parquet" else f" --sink {args.sink}")
             + ("" if list(args.sets) == list(SETS) else f" --sets {' '.join(args.sets)}") + "`):",
             "",
             "| sets | median s | min s | ÷ without | median CPU s | CPU ÷ without |",
             "|---|---|---|---|---|---|"]
    for name, ts in times.items():
        cs = statistics.median(cpu[name])
        lines.append(f"| {name} | {statistics.median(ts):.2f} | {min(ts):.2f} | {statistics.median(ts) / base:.2f}× "
                     f"| {cs:.2f} | {cs / base_cpu:.2f}× |")
    lines.append(f"<!-- /{MARK} -->")
    text = "\n".join(lines)
    print(text)
    if args.write_readme and args.sink == "parquet":
        readme = README.read_text()
        block = re.compile(f"<!-- {MARK} -->.*?<!-- /{MARK} -->", re.S)
        if block.search(readme):
            readme = block.sub(lambda _: text, readme)
        else:
            readme = readme.rstrip("\n") + "\n\n## Conformal prediction sets\n\n" + text + "\n"
        README.write_text(readme)
    return 0


if __name__ == "__main__":
    sys.exit(main())
