"""The exported PostgreSQL scoring SELECT of a wide model, with JIT on (the server's
default) and off: time and the backend's peak RSS (docs/dialects.md, "PostgreSQL's JIT").

Fits naive Bayes in DuckDB on synthetic rows of 3 classes (``--gaussian`` Gaussian and
``--bernoulli`` 0/1 columns), starts a throw-away PostgreSQL server
(``tests/support/postgres.py``), loads the rows with ``COPY`` and runs
``model.to_sql("postgres", key="id")`` once per ``--jit`` setting, each in a new session,
reading the backend's ``VmHWM`` from ``/proc``. Probabilities are checked against DuckDB's.
``--engine`` also scores through ``PostgresEngine(dsn)`` (what ``sqlnb --engine postgres
score`` opens).

    python benchmarks/postgres_jit.py --gaussian 300 --bernoulli 280 --rows 1500
    python benchmarks/postgres_jit.py --gaussian 40 --bernoulli 0 --rows 600 --engine
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import psycopg
import psycopg.sql
import pyarrow as pa

import sqlnb
from sqlnb.engines import PostgresEngine

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.postgres import postgres_server  # noqa: E402


def table(gaussian: int, bernoulli: int, rows: int, seed: int = 7) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, rows)
    cols = {"id": np.arange(rows)}
    for j in range(gaussian):
        cols[f"g{j}"] = rng.normal(y * 0.3 * ((j % 5) - 2), 1.0 + (j % 3) * 0.5)
    for j in range(bernoulli):
        cols[f"b{j}"] = (rng.random(rows) < 0.2 + 0.2 * y * ((j % 3) / 2)).astype(np.int32)
    cols["y"] = np.array(["a", "b", "c"])[y]
    return pa.table(cols)


def peak_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM")) / 1024


def run(con, text: str) -> tuple[float, float, list, list]:
    pid = con.execute("SELECT pg_backend_pid()").fetchone()[0]
    start = time.monotonic()
    cur = con.execute(text)
    rows = cur.fetchall()
    return time.monotonic() - start, peak_mb(pid), [d.name for d in cur.description], rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gaussian", type=int, default=300)
    ap.add_argument("--bernoulli", type=int, default=280)
    ap.add_argument("--rows", type=int, default=1500)
    ap.add_argument("--jit", nargs="+", default=["on", "off"], choices=["on", "off"])
    ap.add_argument("--engine", action="store_true", help="also score through PostgresEngine(dsn)")
    a = ap.parse_args()
    data = table(a.gaussian, a.bernoulli, a.rows)
    con = duckdb.connect()
    con.register("rows", data)
    kinds = {**{f"g{j}": "gaussian" for j in range(a.gaussian)}, **{f"b{j}": "bernoulli" for j in range(a.bernoulli)}}
    model = sqlnb.fit("rows", "y", con=con, features=list(kinds), feature_kinds=kinds)
    want = con.sql(model.to_sql("duckdb", source="rows", key="id")).to_arrow_table()
    text = model.to_sql("postgres", source="rows", key="id")
    probas = [f"proba_{c}" for c in ("a", "b", "c")]
    print(f"{a.gaussian} Gaussian + {a.bernoulli} Bernoulli columns, 3 classes, {a.rows:,} rows; "
          f"SELECT of {len(text):,} characters")
    with postgres_server() as dsn:
        loader = PostgresEngine(dsn)
        loader.write_table("rows", data.slice(0, 0))
        with loader.con.cursor() as cur, cur.copy(
                psycopg.sql.SQL("COPY {} FROM STDIN").format(psycopg.sql.Identifier("rows"))) as copy:
            for row in zip(*(data.column(c).to_pylist() for c in data.column_names)):
                copy.write_row(row)
        loader.close()
        for jit in a.jit:
            with psycopg.connect(dsn, autocommit=True) as session:
                session.execute(psycopg.sql.SQL("SET jit = {}").format(psycopg.sql.SQL(jit)))
                seconds, peak, names, rows = run(session, text)
            got = {n: [r[i] for r in rows] for i, n in enumerate(names)}
            diff = max(abs(x - y) for p in probas for x, y in zip(got[p], want.column(p).to_pylist()))
            same = got["prediction"] == want.column("prediction").to_pylist()
            print(f"exported SELECT, jit {jit}: {seconds:.2f} s, backend peak {peak:.0f} MB "
                  f"(max |dp| vs DuckDB {diff:.1e}, predictions {'equal' if same else 'DIFFER'})")
        if a.engine:
            engine = PostgresEngine(dsn)
            pid = engine.con.execute("SELECT pg_backend_pid()").fetchone()[0]
            start = time.monotonic()
            model.score("rows", con=engine, key="id")
            print(f"PostgresEngine(dsn).score: {time.monotonic() - start:.2f} s, backend peak {peak_mb(pid):.0f} MB")
            engine.close()


if __name__ == "__main__":
    main()
