"""Peak memory of ``sqlnb evaluate`` against ``sqlnb score`` under the defaults, by the
writer of the Parquet file and the number of classes.

The rows are ``generate.py``'s ``wide`` shape (N rows x 20 DOUBLE, 3 well separated
classes: most top-class probabilities are near 1), written to one Parquet file per writer
and class count with 1,048,576-row row groups: by pyarrow (pages of ~1 MB) and by DuckDB's
``COPY ... (ROW_GROUP_SIZE 1048576)`` (one page per column of a row group: 8 MB for a DOUBLE
column). Two classes are class ``c0`` against the others. A Gaussian model is fitted once
per class count (on the pyarrow file); then per file ``sqlnb score`` (to Parquet, every
column kept), ``sqlnb evaluate`` with no ``--threads`` and no ``--memory-limit``, and
``sqlnb --memory-limit 3GB evaluate``, each a whole process under ``/usr/bin/time -v``.
The two evaluations' JSON outputs are compared figure for figure (all but ``seconds``).
The sqlnb that runs is the one on PYTHONPATH (``PYTHONPATH=/tmp/base python
benchmarks/evaluate_memory.py`` measures another checkout). The data goes under ``--dir``
and is deleted unless ``--keep`` (a kept file is read again by the next run).

Examples
--------
python benchmarks/evaluate_memory.py --rows 10000000 --classes 2 3 --writers duckdb pyarrow --dir /tmp
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
from sqlglot import exp

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import generate  # noqa: E402
from default_memory import CHUNK, SQLNB, exit_cell, load, timed  # noqa: E402
from run import machine  # noqa: E402

WRITERS = ("duckdb", "pyarrow")


def labelled(glob: str, classes: int) -> exp.Select:
    """The generated rows with ``label`` as it is (3 classes) or ``c0`` against ``c1`` (2)."""
    source = generate.parquet_table(glob)
    if classes == 3:
        return exp.select(exp.Star()).from_(source)
    label = generate.col("label")
    two = exp.case().when(label.eq(exp.Literal.string("c0")), exp.Literal.string("c0")).else_(exp.Literal.string("c1"))
    return exp.select(exp.Star(replace=[exp.alias_(two, "label", quoted=True)])).from_(source)


def write(glob: str, classes: int, writer: str, path: str) -> None:
    """``path``: the rows of :func:`labelled` in row groups of :data:`CHUNK` rows, by ``writer``."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    query = labelled(glob, classes)
    if writer == "duckdb":
        con.execute(generate.copy_query(query, Path(path), row_group_size=CHUNK))
        return
    reader = con.sql(query.sql("duckdb")).to_arrow_reader(CHUNK)  # in DuckDB's row groups (122,880)
    out = pq.ParquetWriter(path, reader.schema)
    pending: list = []
    for batch in reader:
        pending.append(batch)
        held = sum(len(b) for b in pending)
        if held >= CHUNK:  # whole row groups out, the rest held back
            table = pa.Table.from_batches(pending).combine_chunks()
            whole = held - held % CHUNK
            out.write_table(table.slice(0, whole), row_group_size=CHUNK)
            pending = table.slice(whole).to_batches()
    if pending:
        out.write_table(pa.Table.from_batches(pending).combine_chunks(), row_group_size=CHUNK)
    out.close()


def figures(stdout: str) -> dict | None:
    """``evaluate --format json``'s figures without its run time (None: no output)."""
    if not stdout.strip():
        return None
    got = json.loads(stdout)
    got.pop("seconds", None)
    return got


def agreement(a, b) -> str:
    """``identical``, ``within 1e-12`` (every number; the sums over DuckDB's batches may
    differ in the last bits when its threads differ) or ``NO``."""
    def close(x, y) -> bool:
        if isinstance(x, dict) and isinstance(y, dict):
            return x.keys() == y.keys() and all(close(x[k], y[k]) for k in x)
        if isinstance(x, list) and isinstance(y, list):
            return len(x) == len(y) and all(close(u, v) for u, v in zip(x, y))
        if isinstance(x, float) and isinstance(y, float):
            return math.isclose(x, y, rel_tol=1e-12)
        return x == y
    if a is None or b is None:
        return "NO"
    return "identical" if a == b else "within 1e-12" if close(a, b) else "NO"


def near_one(ev: dict | None) -> str:
    """The share of the rows whose top-class probability is in the last reliability bin."""
    if not ev:
        return "–"
    last = ev["reliability"][-1]
    return f"{last['rows'] / ev['rows']:.1%} ≥ {last['lower']:.3f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--classes", type=int, nargs="+", default=[2, 3], choices=[2, 3])
    ap.add_argument("--writers", nargs="+", default=list(WRITERS), choices=WRITERS)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--keep", action="store_true", help="keep the data files for the next run")
    args = ap.parse_args(argv)
    import sqlnb

    print(f"sqlnb from {os.path.dirname(sqlnb.__file__)}", file=sys.stderr)
    work = os.path.join(args.dir, f"sqlnb-evaluate-memory-{args.rows}")
    os.makedirs(work, exist_ok=True)
    rows_out = []
    try:
        meta = generate.load_or_generate("wide", args.rows, 20, 3, os.path.join(work, "wide"), seed=0)
        for k in args.classes:
            files = {w: os.path.join(work, f"{w}-k{k}.parquet") for w in WRITERS}
            for w in {*args.writers, "pyarrow"}:
                if not os.path.exists(files[w]):
                    write(meta["globs"]["data"], k, w, files[w] + ".part")
                    os.replace(files[w] + ".part", files[w])
            model = f"{os.path.join(work, 'm.duckdb')}:k{k}"
            fit = timed([*SQLNB, "fit", files["pyarrow"], "--label", "label", "--model", model, "--replace"])
            if fit["rc"] != 0:
                raise SystemExit(f"fit failed: {fit['error']}")
            for w in args.writers:
                data, out = files[w], os.path.join(work, "scored.parquet")
                runs = {}
                for name, args_ in (("score", ["score", data, "--model", model, "--out", out, "--replace"]),
                                    ("evaluate", ["evaluate", data, "--model", model, "--format", "json"]),
                                    ("evaluate, 3GB", ["--memory-limit", "3GB", "evaluate", data, "--model", model,
                                                       "--format", "json"])):
                    before = load()
                    runs[name] = timed([*SQLNB, *args_])
                    runs[name]["load"] = f"{before} -> {load()}"
                    print(w, k, name, {n: v for n, v in runs[name].items() if n != "stdout"}, file=sys.stderr,
                          flush=True)
                default, big = figures(runs["evaluate"]["stdout"]), figures(runs["evaluate, 3GB"]["stdout"])
                for name, r in runs.items():
                    same = "–"
                    if name == "evaluate":
                        same = agreement(default, big)
                    rows_out.append({**r, "writer": w, "classes": k, "command": name, "same": same,
                                     "ratio": r["rss"] / runs["score"]["rss"], "near": near_one(big)})
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    info = machine()
    command = "python benchmarks/evaluate_memory.py " + " ".join(argv if argv is not None else sys.argv[1:])
    print(f"`{command}`; {info['cpu']}, {info['memory']}; {info['versions']}; sqlnb from "
          f"{os.path.dirname(sqlnb.__file__)}\n")
    print(f"{args.rows:,} rows x 20 DOUBLE, row groups of {CHUNK:,} rows\n")
    print("| writer | classes | top p in last bin | command | exit | peak RSS MiB | ÷ score | wall s | user CPU s "
          "| figures = 3GB run | load 1/5/15 min, before -> after |")
    print("|---|---:|---|---|---|---:|---:|---:|---:|---|---|")
    for r in rows_out:
        print(f"| {r['writer']} | {r['classes']} | {r['near']} | {r['command']} | {exit_cell(r, 70)} | {r['rss']:.0f} | "
              f"{r['ratio']:.2f} | {r['wall']:.1f} | {r['user']:.1f} | {r['same']} | {r['load']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
