"""DuckDB, the default engine: a thin wrapper of a connection."""

from __future__ import annotations

from typing import Any, Mapping

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines.base import ColumnsFromResolve
from sqlnb.source import resolve


class DuckDBEngine(ColumnsFromResolve):
    """DuckDB (the default): a thin wrapper of a connection; models are stored by :mod:`sqlnb.store`."""

    dialect = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection | None = None):
        self.con = con if con is not None else new_connection()

    def execute(self, tree, params=None):
        return self.con.execute(sql.render(tree, self.dialect), params).fetchall()

    def resolve(self, data):
        return resolve(data, self.con)

    def relation(self, tree) -> duckdb.DuckDBPyRelation:
        return self.con.sql(sql.render(tree, self.dialect))


def new_connection(database: str = ":memory:", read_only: bool = False,
            config: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """A new DuckDB connection, as sqlnb opens every connection of its own: with DuckDB's
    progress bar off (:func:`show_progress`).

    DuckDB's Python client turns the bar on in every connection and draws it on stdout
    once a query has run for ``progress_bar_time`` (2 s), terminal or not, so a library
    call on a large source would write it into the caller's pipe or log. A connection
    the caller passes in is used with the settings the caller gave it; the command line
    turns the bar back on for a terminal.
    """
    con = duckdb.connect(database, read_only=read_only, config=dict(config or {}))
    show_progress(con, False)
    return con


def show_progress(con: duckdb.DuckDBPyConnection, on: bool) -> None:
    """``SET enable_progress_bar = on`` on ``con`` (a session setting: DuckDB refuses it as
    a connection option)."""
    setting = exp.SetItem(this=exp.EQ(this=sql.col("enable_progress_bar"), expression=exp.Boolean(this=on)))
    con.execute(sql.render(exp.Set(expressions=[setting])))
