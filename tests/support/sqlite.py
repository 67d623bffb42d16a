"""SQLite (Python's stdlib) for the tests that run an exported SELECT there: a connection
with the math functions the exported SQL calls, and an Arrow table loaded into it."""

from __future__ import annotations

import math
import sqlite3

import pyarrow as pa
from sqlglot import exp

from sqlnb import sql


def sqlite_connection() -> sqlite3.Connection:
    """An in-memory SQLite database with ln/exp/power, registered if the build lacks them."""
    db = sqlite3.connect(":memory:")
    try:
        db.execute("SELECT ln(1.0), exp(0.0), power(2.0, 2.0)")
    except sqlite3.OperationalError:  # built without SQLITE_ENABLE_MATH_FUNCTIONS
        def ln(x):
            if x is None or x < 0:
                return None
            return math.log(x) if x > 0 else -math.inf

        def exp_(x):
            if x is None:
                return None
            try:
                return math.exp(x)
            except OverflowError:
                return math.inf

        db.create_function("ln", 1, ln, deterministic=True)
        db.create_function("exp", 1, exp_, deterministic=True)
        db.create_function("power", 2, lambda a, b: None if a is None or b is None else a ** b,
                           deterministic=True)
    return db


def sqlite_table(db: sqlite3.Connection, name: str, t: pa.Table) -> None:
    """``t`` as the table ``name`` of ``db`` (columns untyped, rows as Python values)."""
    cols = [exp.ColumnDef(this=sql.ident(c)) for c in t.column_names]
    db.execute(sql.render(exp.Create(this=exp.Schema(this=sql.table(name), expressions=cols), kind="TABLE"),
                          "sqlite"))
    insert = exp.insert(exp.values([tuple(exp.Placeholder() for _ in t.column_names)]), sql.table(name))
    db.executemany(sql.render(insert, "sqlite"), [tuple(r.values()) for r in t.to_pylist()])
