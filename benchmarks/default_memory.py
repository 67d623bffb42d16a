"""Peak memory of ``sqlnb score`` and ``sqlnb evaluate`` under the defaults.

Writes N rows x 20 DOUBLE + a label of K classes to one Parquet file with pyarrow's
default row groups (1,048,576 rows), fits a Gaussian model on it, then runs ``sqlnb
score`` (to Parquet, every input column kept) and ``sqlnb evaluate`` with no
``--threads`` and no ``--memory-limit``, each a whole process under ``/usr/bin/time -v``
(peak RSS, wall and user CPU seconds). A scored file is checked to hold the input's rows
in order (``file_row_number`` of both files). The sqlnb that runs is the one on
PYTHONPATH, so the same script measures another checkout (``PYTHONPATH=/tmp/base
python benchmarks/default_memory.py``). The data goes under ``--dir`` and is deleted.

Examples
--------
python benchmarks/default_memory.py --rows 10000000 --classes 2 3 --dir /tmp
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

SQLNB = [sys.executable, "-m", "sqlnb"]
CHUNK = 1 << 20  # pyarrow's default row group


def write_data(path: str, rows: int, classes: int, seed: int = 0) -> None:
    """``rows`` x (x0..x19 DOUBLE, label 'c<k>') in pyarrow's default row groups."""
    rng = np.random.default_rng(seed)
    writer = None
    done = 0
    while done < rows:
        n = min(CHUNK, rows - done)
        y = rng.integers(0, classes, n)
        cols = {f"x{j}": rng.normal(y * (0.1 + 0.05 * j), 1.0 + 0.1 * j) for j in range(20)}
        cols["label"] = np.char.add("c", y.astype(str))
        table = pa.table(cols)
        if writer is None:
            writer = pq.ParquetWriter(path, table.schema)
        writer.write_table(table)
        done += n
    writer.close()


def timed(args: list[str]) -> dict:
    """Exit code, wall and user seconds, peak RSS (MiB), the first ``Error`` line on stderr
    and the standard output of ``args``."""
    done = subprocess.run(["/usr/bin/time", "-v", *args], capture_output=True, text=True)
    wall = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)", done.stderr)
    user = re.search(r"User time \(seconds\): ([\d.]+)", done.stderr)
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error")]
    return {"rc": done.returncode,
            "wall": int(wall.group(1) or 0) * 3600 + int(wall.group(2)) * 60 + float(wall.group(3)),
            "user": float(user.group(1)), "rss": int(rss.group(1)) / 1024, "error": errors[0] if errors else "",
            "stdout": done.stdout}


def exit_cell(run: dict, width: int = 60) -> str:
    """A table cell of a :func:`timed` run's exit code, with the start of its error if it failed."""
    return str(run["rc"]) + (f" ({run['error'][:width]})" if run["rc"] else "")


def in_order(scored: str, source: str) -> bool:
    """Whether ``scored`` holds ``source``'s rows in the same order (x0 and x19 compared
    row by row, by each file's own row numbers)."""
    import duckdb

    con = duckdb.connect()
    q = ("SELECT count(*) = (SELECT count(*) FROM read_parquet($2)) AND bool_and(a.x0 = b.x0 AND a.x19 = b.x19) "
         "FROM read_parquet($1, file_row_number = true) a "
         "JOIN read_parquet($2, file_row_number = true) b USING (file_row_number)")
    return bool(con.execute(q, [scored, source]).fetchall()[0][0])


def load() -> str:
    """The 1, 5 and 15-minute load averages (other processes share the cores)."""
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--classes", type=int, nargs="+", default=[2, 3])
    ap.add_argument("--dir", default=tempfile.gettempdir())
    args = ap.parse_args(argv)
    import sqlnb

    print(f"sqlnb from {os.path.dirname(sqlnb.__file__)}", file=sys.stderr)
    work = tempfile.mkdtemp(prefix="sqlnb-default-memory-", dir=args.dir)
    rows_out = []
    try:
        for k in args.classes:
            data = os.path.join(work, f"k{k}.parquet")
            write_data(data, args.rows, k)
            model = f"{os.path.join(work, 'm.duckdb')}:k{k}"
            fit = timed([*SQLNB, "fit", data, "--label", "label", "--model", model, "--replace"])
            if fit["rc"] != 0:
                raise SystemExit(f"fit failed: {fit['error']}")
            out = os.path.join(work, "scored.parquet")
            for command, extra in (("score", ["--out", out, "--replace"]), ("evaluate", [])):
                before = load()
                got = timed([*SQLNB, command, data, "--model", model, *extra])
                got.update(command=command, classes=k, load=f"{before} -> {load()}")
                if command == "score" and got["rc"] == 0:
                    got["order"] = in_order(out, data)
                rows_out.append(got)
                print({name: v for name, v in got.items() if name != "stdout"}, file=sys.stderr, flush=True)
            os.remove(data)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"{args.rows:,} rows x 20 DOUBLE, pyarrow row groups of {CHUNK:,} rows; sqlnb from "
          f"{os.path.dirname(sqlnb.__file__)}\n")
    print("| command | classes | exit | peak RSS MiB | wall s | user CPU s | rows in order | load 1/5/15 min, before -> after |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    for r in rows_out:
        order = {True: "yes", False: "NO"}.get(r.get("order"), "–")
        print(f"| {r['command']} | {r['classes']} | {exit_cell(r)} | {r['rss']:.0f} | {r['wall']:.1f} | {r['user']:.1f} | "
              f"{order} | {r['load']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
