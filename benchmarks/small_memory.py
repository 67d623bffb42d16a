"""Peak memory of every sqlnb command on 10,000 rows under the defaults.

The aim: any command on at most 10,000 rows peaks at 300 MB or less. This script
writes the first 10,000 rows of UCI adult (``../shared/data/adult/adult.data``) twice: as
they are (6 numeric and 8 categorical columns, ``?`` as NULL) for naive Bayes, and with the
categorical columns one-hot encoded (104 DOUBLE columns: what LDA, QDA and logistic
regression need, and what ``sqlnb compare`` builds for them) for the dense kinds and the
count families. Then it runs each command as a whole process under ``/usr/bin/time -v``,
with no ``--threads`` and no ``--memory-limit``, and prints one Markdown row per command:
exit code, peak RSS (MiB), wall and user CPU seconds. The sqlnb that runs is the one on
PYTHONPATH, so the same script measures another checkout (``PYTHONPATH=/tmp/base python
benchmarks/small_memory.py``).

Examples
--------
python benchmarks/small_memory.py --dir /tmp/small
python benchmarks/small_memory.py --dir /tmp/small --only compare,qda
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

SQLNB = [sys.executable, "-m", "sqlnb"]
ADULT = Path(__file__).resolve().parents[2] / "shared" / "data" / "adult" / "adult.data"
NAMES = ["age", "workclass", "fnlwgt", "education", "education_num", "marital_status", "occupation",
         "relationship", "race", "sex", "capital_gain", "capital_loss", "hours_per_week", "native_country", "income"]
NUMERIC = ("age", "fnlwgt", "education_num", "capital_gain", "capital_loss", "hours_per_week")


def write_data(out: Path, rows: int, adult: Path = ADULT) -> tuple[Path, Path]:
    """``adult.csv`` (the first ``rows`` rows, values trimmed, ``?`` as empty) and
    ``onehot.parquet`` (numeric columns as DOUBLE, one 0/1 DOUBLE per category)."""
    import duckdb

    con = duckdb.connect()
    types = {n: ("BIGINT" if n in NUMERIC else "VARCHAR") for n in NAMES}
    con.execute(f"CREATE TABLE a AS SELECT * FROM read_csv('{adult}', header = false, columns = {types!r}) "
                f"LIMIT {int(rows)}")
    for n in NAMES:
        if n not in NUMERIC:
            con.execute(f'UPDATE a SET "{n}" = NULLIF(trim("{n}"), \'?\')')
    raw, onehot = out / "adult.csv", out / "onehot.parquet"
    con.execute(f"COPY a TO '{raw}' (HEADER)")
    cols = [f'CAST("{n}" AS DOUBLE) AS "{n}"' for n in NUMERIC]
    for n in NAMES[:-1]:
        if n in NUMERIC:
            continue
        for (v,) in con.execute(f'SELECT DISTINCT "{n}" FROM a WHERE "{n}" IS NOT NULL ORDER BY 1').fetchall():
            cols.append(f'CASE WHEN "{n}" = \'{v}\' THEN 1.0 ELSE 0.0 END::DOUBLE AS "{n}={v}"')
    con.execute(f"COPY (SELECT {', '.join(cols)}, income FROM a) TO '{onehot}'")
    return raw, onehot


def commands(d: Path) -> list[tuple[str, list[str]]]:
    """(name, sqlnb arguments) of the sweep, in order (fits before what reads their models)."""
    raw, hot, db = str(d / "adult.csv"), str(d / "onehot.parquet"), str(d / "models.duckdb")
    m = lambda name: f"{db}:{name}"  # noqa: E731
    fits = [
        ("nb", [raw, "--label", "income"]),
        ("gaussian", [hot, "--label", "income", "--kind", "gaussian"]),
        ("bernoulli", [hot, "--label", "income", "--kind", "bernoulli"]),
        ("multinomial", [hot, "--label", "income", "--kind", "multinomial"]),
        ("complement", [hot, "--label", "income", "--kind", "complement"]),
        ("categorical", [raw, "--label", "income", "--kind", "categorical"]),
        ("bins_mdl", [raw, "--label", "income", "--bins", "mdl"]),
        ("bins_quantile", [raw, "--label", "income", "--bins", "quantile:5"]),
        ("tan", [raw, "--label", "income", "--structure", "tan"]),
        ("tan_mdl", [raw, "--label", "income", "--structure", "tan", "--bins", "mdl"]),
        ("aode_mdl", [raw, "--label", "income", "--structure", "aode", "--bins", "mdl"]),
        ("kdb2_mdl", [raw, "--label", "income", "--structure", "kdb:2", "--bins", "mdl"]),
        ("lda", [hot, "--label", "income", "--kind", "lda", "--shrinkage", "0.1"]),
        ("lda_numeric", [raw, "--label", "income", "--kind", "lda", "--features", ",".join(NUMERIC)]),
        ("qda", [hot, "--label", "income", "--kind", "qda", "--reg-param", "0.1"]),
        ("logistic", [hot, "--label", "income", "--kind", "logistic"]),
    ]
    data = {name: (raw if args[0] == raw else hot) for name, args in fits}
    out: list[tuple[str, list[str]]] = []
    for name, args in fits:
        out.append((f"fit {name}", ["fit", *args, "--model", m(name), "--replace"]))
    for name, _ in fits:
        out.append((f"score {name}", ["score", data[name], "--model", m(name), "--out", str(d / f"{name}.parquet"),
                                      "--replace"]))
        out.append((f"evaluate {name}", ["evaluate", data[name], "--model", m(name)]))
        out.append((f"show --params {name}", ["show", "--model", m(name), "--params"]))
        out.append((f"sql {name}", ["sql", data[name], "--model", m(name)]))
        out.append((f"report {name}", ["report", data[name], "--model", m(name), "--out", str(d / f"{name}.html"),
                                       "--replace"]))
    out += [
        ("cv nb", ["cv", raw, "--label", "income"]),
        ("cv categorical", ["cv", raw, "--label", "income", "--kind", "categorical"]),
        ("cv lda", ["cv", hot, "--label", "income", "--kind", "lda", "--grid", "shrinkage=0.1"]),
        ("cv qda", ["cv", hot, "--label", "income", "--kind", "qda", "--grid", "reg_param=0.1"]),
        ("cv logistic", ["cv", hot, "--label", "income", "--kind", "logistic"]),
        ("select nb", ["select", raw, "--label", "income"]),
        ("mi nb", ["mi", raw, "--label", "income", "--bins", "mdl"]),
        ("compare", ["compare", raw, "--label", "income"]),
    ]
    return out


def timed(args: list[str]) -> dict:
    """Exit code, wall and user seconds, peak RSS (MiB) and the first error line of ``args``."""
    done = subprocess.run(["/usr/bin/time", "-v", *args], capture_output=True, text=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    user = re.search(r"User time \(seconds\): ([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith(("Error", "Traceback"))]
    return {"rc": done.returncode,
            "wall": int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3)),
            "user": float(user.group(1)), "rss": int(rss.group(1)) / 1024, "error": errors[0] if errors else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="where the data, models and outputs go")
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--only", default="", help="comma-separated substrings: run only matching commands "
                                               "(the fits their models need run too)")
    ap.add_argument("--limit", type=float, default=300.0, help="MiB; rows above it are marked")
    args = ap.parse_args()
    d = Path(args.dir)
    d.mkdir(parents=True, exist_ok=True)
    write_data(d, args.rows)
    wanted = [w for w in args.only.split(",") if w]
    runs = commands(d)
    if wanted:
        hit = [(n, a) for n, a in runs if any(w in n for w in wanted)]
        models = {n.split()[-1] for n, _ in hit}
        runs = [(n, a) for n, a in runs if (n, a) in hit or (n.startswith("fit ") and n.split()[-1] in models)]
    print(f"load {'/'.join(f'{x:.1f}' for x in os.getloadavg())}", file=sys.stderr)
    print("| command | exit | peak RSS MiB | wall s | user CPU s | |")
    print("|---|---:|---:|---:|---:|---|")
    for name, a in runs:
        r = timed([*SQLNB, *a])
        mark = "over" if r["rss"] > args.limit else ""
        print(f"| `{name}` | {r['rc']} | {r['rss']:.0f} | {r['wall']:.1f} | {r['user']:.1f} | {mark} {r['error'][:80]} |",
              flush=True)


if __name__ == "__main__":
    main()
