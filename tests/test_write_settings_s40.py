"""The ordered write's settings without binding the scoring query when its tree settles them.

``sqlnb score --out FILE`` from Parquet asks :func:`sqlnb.io.output.ordered_write_settings`
how many threads keep one input batch per thread within the write's memory. It needed the
query's row width, and bound the whole scoring query for it: for an AODE model on 40
categorical columns (20,000 rows) ``sqlnb score`` took 9.2 s at b4cefe0
and 6.5-6.8 s now (two runs each, quiet), with byte-identical rows. 16 bytes a column bound
the width from above, so when that bound already leaves every thread its batch, the answer
is the same without binding.
"""

from __future__ import annotations

import duckdb
import pytest
from sqlglot import exp

from sqlnb import sql
from sqlnb.io import output


class Counting:
    """A connection that counts ``sql()`` calls (the binding of a query) and delegates."""

    def __init__(self, con):
        self.con, self.bound = con, 0

    def sql(self, text):
        self.bound += 1
        return self.con.sql(text)

    def execute(self, *args):
        return self.con.execute(*args)


def _query(columns: int, star: bool = False) -> exp.Select:
    source = exp.Table(this=exp.Anonymous(this="read_parquet", expressions=[exp.Literal.string("x.parquet")]))
    if star:
        return exp.select(exp.Star()).from_(exp.Subquery(this=exp.select(*[
            exp.alias_(exp.Literal.number(i), f"c{i}") for i in range(columns)]), alias="s"))
    return exp.select(*[exp.alias_(exp.Cast(this=exp.Literal.number(i), to=exp.DataType.build("double")), f"c{i}")
                        for i in range(columns)]).from_(source)


def _exact(con, query, rows: int, size: int) -> dict:
    """What b4cefe0's code returned: the width from the bound query, always."""
    width = output._row_width(con.sql(sql.render(query).replace("FROM READ_PARQUET('x.parquet')", "")).types)
    threads = int(con.execute("SELECT current_setting('threads')").fetchall()[0][0])
    out = {}
    fit = max(1, output.ORDERED_BATCH_BYTES // max(1, rows * width))
    if fit < threads:
        out["threads"] = fit
    if size > output.PREFETCH_MAX_BYTES:
        out["disable_parquet_prefetching"] = True
    return out


@pytest.mark.parametrize("rows, size, columns, binds", [
    (122_880, 10 * 2**20, 8, False),        # DuckDB's row groups: the bound settles it
    (1_048_576, 100 * 2**20, 8, False),     # pyarrow's: 8 x 16 B x 1M = 128 MiB a batch, 2 fit
    (1_048_576, 100 * 2**20, 40, True),     # 640 MiB by the bound: bind for the exact width
    (10_000_000, 900 * 2**20, 3, True),     # one 10M-row group: one thread whatever the width
    (0, 0, 8, False),                       # no row group read (an empty file)
])
def test_settings_equal_the_bound_querys_and_bind_only_when_the_bound_cannot_settle_them(
        monkeypatch, rows, size, columns, binds):
    con = duckdb.connect()
    con.execute("SET threads = 2")
    query = _query(columns)
    monkeypatch.setattr(output, "largest_row_group", lambda c, paths: (rows, size))
    # The bound query must not read x.parquet (it does not exist): bind a FROM-less copy.
    counting = Counting(con)
    real_render = sql.render
    monkeypatch.setattr(output.sql, "render", lambda tree, *a: real_render(tree, *a).replace(
        "FROM READ_PARQUET('x.parquet')", ""))
    got = output.ordered_write_settings(counting, query)
    monkeypatch.setattr(output.sql, "render", real_render)
    assert got == _exact(con, query, rows, size)
    assert counting.bound == (1 if binds else 0)


def test_a_star_leaves_the_width_to_the_binder(monkeypatch):
    con = duckdb.connect()
    monkeypatch.setattr(output, "parquet_paths", lambda q: ["x.parquet"])
    monkeypatch.setattr(output, "largest_row_group", lambda c, paths: (122_880, 2**20))
    counting = Counting(con)
    query = _query(4, star=True)
    assert output._width_bound(query) is None
    assert output.ordered_write_settings(counting, query) == {}
    assert counting.bound == 1


def test_the_bound_is_at_least_the_exact_width():
    con = duckdb.connect()
    query = exp.select(exp.alias_(exp.Literal.string("a"), "t"), exp.alias_(exp.Literal.number(1), "n"),
                       exp.alias_(exp.Boolean(this=True), "b"))
    exact = output._row_width(con.sql(sql.render(query)).types)
    assert output._width_bound(query) == 48 >= exact == 32
