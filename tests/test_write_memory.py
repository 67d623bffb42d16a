"""Bounded memory when the CLI writes scored rows to a file.

DuckDB's ordered COPY holds finished row groups that are ahead of the writer, bounded only
by its memory limit; the CLI gives file outputs a limit (``WRITE_MEMORY_LIMIT``) unless the
user chose one. The peak RSS itself is measured in benchmarks/README.md ("Scoring memory"),
not here; these tests check that the limit is set and that a user's own limit wins. Rows
written under a tight limit keep the input's order: tests/test_row_integrity.py at 200,000
rows in 20 row groups; the 2,000,000-row run in its own process, as it was here, is
benchmarks/row_order_2m.py.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.cli.app import Settings
from sqlnb.cli.io import write_out
from sqlnb.io import output
from support.cli import run_process


def _limit_seen(settings: Settings, out: str) -> str:
    """The memory limit in force on the connection ``write_out`` writes ``out`` with."""
    seen = {}

    def query(con, own_db):
        seen["limit"] = con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        return exp.select(exp.alias_(sql.dbl(1.0), "x", quoted=True))

    write_out(settings, out, True, query)
    return seen["limit"]


def _bytes(limit: str) -> float:
    number, unit = limit.split()
    return float(number) * {"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}[unit]


def test_file_outputs_get_the_write_memory_limit(tmp_path):
    assert output.WRITE_MEMORY_LIMIT == "1GB"
    got = _limit_seen(Settings(), str(tmp_path / "a.parquet"))
    assert _bytes(got) == pytest.approx(1e9, rel=0.01)  # DuckDB shows 1GB as '953.6 MiB'


def test_standard_output_gets_it_too(capsysbinary):
    got = _limit_seen(Settings(), "-")
    assert _bytes(got) == pytest.approx(1e9, rel=0.01)
    assert capsysbinary.readouterr().out.decode().splitlines() == ["x", "1.0"]


def test_a_limit_the_user_chose_is_kept(tmp_path):
    got = _limit_seen(Settings(memory_limit="3GB"), str(tmp_path / "a.parquet"))
    assert _bytes(got) == pytest.approx(3e9, rel=0.05)  # shown rounded: "2.7 GiB"


def test_a_table_output_keeps_duckdbs_default(tmp_path):
    default = _bytes(duckdb.connect().execute("SELECT current_setting('memory_limit')").fetchall()[0][0])
    got = _limit_seen(Settings(), f"{tmp_path / 'out.duckdb'}:scores")
    assert _bytes(got) == pytest.approx(default, rel=0.01)


# --------------------------------------------------------------------------------------------
# The ordered write's settings without binding the scoring query when its tree settles them.
#
# ``sqlnb score --out FILE`` from Parquet asks :func:`sqlnb.io.output.ordered_write_settings`
# how many threads keep one input batch per thread within the write's memory. It needed the
# query's row width, and bound the whole scoring query for it: for an AODE model on 40
# categorical columns (20,000 rows) ``sqlnb score`` took 9.2 s at b4cefe0
# and 6.5-6.8 s now (two runs each, quiet), with byte-identical rows. 16 bytes a column bound
# the width from above, so when that bound already leaves every thread its batch, the answer
# is the same without binding.
# --------------------------------------------------------------------------------------------


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
