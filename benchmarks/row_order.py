"""Scoring time before and after the row-order fix, at 10M rows.

Three models, each scored from Parquet to Parquet by the ``sqlnb score`` command in a
fresh process (``--keep id``), alternating the two checkouts run by run:

* ``gaussian``: the ``wide`` shape of ``generate.py`` (20 Gaussian columns, 3 classes);
* ``mixed``: the ``mixed`` shape (8 Gaussian and 8 categorical columns of 3–50 values);
* ``text``: 10M documents of 4–11 tokens over a 1,000-word vocabulary, 4 classes, one
  VARCHAR column scored as a multinomial token bag.

The checkouts are given as folders holding a ``sqlnb`` package (a ``git worktree`` of the
commit before the fix, and this one); each run imports sqlnb from its folder only. The
table goes to stdout and, with ``--write-readme``, into benchmarks/README.md.

Example
-------
git worktree add /tmp/before 3593c82
python benchmarks/row_order.py --before /tmp/before --after . --rows 10000000 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import duckdb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import generate  # noqa: E402

README = HERE / "README.md"
MARK = "row-order"


def text_docs(rows: int, out: Path) -> str:
    """10M documents: each class draws its words mostly from its own quarter of the
    vocabulary (a hash of the row and position picks the word)."""
    path = out / "docs.parquet"
    if path.exists():
        return str(path)
    out.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"""
        COPY (
          SELECT i AS id, 'c' || (hash(i) % 4)::VARCHAR AS label,
                 array_to_string(list_transform(range(4 + (hash(i, 1) % 8)::INT),
                     lambda j: 'w' || ((CASE WHEN hash(i, j, 2) % 10 < 7 THEN (hash(i) % 4) * 250 ELSE 0 END
                                   + hash(i, j, 3) % 250 + CASE WHEN hash(i, j, 2) % 10 < 7 THEN 0
                                   ELSE (hash(i, j, 4) % 4) * 250 END) % 1000)::VARCHAR), ' ') AS body
          FROM range({rows}) r(i)
        ) TO '{path}' (FORMAT parquet, ROW_GROUP_SIZE 122880)""")
    return str(path)


def data(rows: int, data_dir: Path) -> dict[str, tuple[str, list[str]]]:
    """shape -> (Parquet glob, extra fit options)."""
    out = {}
    for shape, (features, classes) in {"gaussian": (20, 3), "mixed": (16, 3)}.items():
        gen = "wide" if shape == "gaussian" else shape
        meta = generate.load_or_generate(gen, rows, features, classes, data_dir / f"{gen}-{rows}")
        out[shape] = (meta["globs"]["data"], [])
    out["text"] = (text_docs(rows, data_dir / f"text-{rows}"), ["--feature-kind", "body=multinomial",
                                                                 "--exclude", "id"])
    return out


def run(checkout: Path, *args: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(checkout))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", "from sqlnb.cli import main; main()", *args], env=env, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, default=HERE.parent)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data-dir", type=Path, default=HERE / "data")
    ap.add_argument("--write-readme", action="store_true")
    a = ap.parse_args(argv)
    work = a.data_dir / "row-order"
    work.mkdir(parents=True, exist_ok=True)
    results = {}
    for shape, (glob, fit_opts) in data(a.rows, a.data_dir).items():
        times: dict[str, list[float]] = {"before": [], "after": []}
        for name, checkout in (("before", a.before), ("after", a.after)):
            run(checkout, "fit", glob, "--label", "label", "--model", f"{work / name}.duckdb:{shape}", "--replace",
                *fit_opts)
        for _ in range(a.repeat):
            for name, checkout in (("before", a.before), ("after", a.after)):
                times[name].append(run(checkout, "score", glob, "--model", f"{work / name}.duckdb:{shape}",
                                       "--keep", "id" if shape == "text" else "", "--out",
                                       str(work / f"{shape}-{name}.parquet"), "--replace"))
                print(f"{shape} {name}: {times[name][-1]:.2f} s", file=sys.stderr)
        results[shape] = {k: statistics.median(v) for k, v in times.items()}
    lines = [f"<!-- {MARK} -->",
             f"Command: `python benchmarks/row_order.py --before <worktree of 3593c82> --after . --rows {a.rows} "
             f"--repeat {a.repeat}`; `sqlnb score` to Parquet in a fresh process, medians of {a.repeat} "
             "alternating runs.", "",
             "| model | before (s) | after (s) | after ÷ before |", "|---|---|---|---|"]
    for shape, r in results.items():
        lines.append(f"| {shape} | {r['before']:.2f} | {r['after']:.2f} | {r['after'] / r['before']:.2f} |")
    lines.append(f"<!-- /{MARK} -->")
    block = "\n".join(lines)
    print(block)
    if a.write_readme:
        text = README.read_text()
        pattern = re.compile(rf"<!-- {MARK} -->.*?<!-- /{MARK} -->", re.S)
        README.write_text(pattern.sub(block, text) if pattern.search(text) else text.rstrip() + "\n\n" + block + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
