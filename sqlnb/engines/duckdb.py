"""DuckDB, the default engine: a thin wrapper of a connection."""

from __future__ import annotations

import duckdb

from sqlnb import sql
from sqlnb.engines.base import ColumnsFromResolve
from sqlnb.source import resolve


class DuckDBEngine(ColumnsFromResolve):
    """DuckDB (the default): a thin wrapper of a connection; models are stored by :mod:`sqlnb.store`."""

    dialect = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection | None = None):
        self.con = con if con is not None else duckdb.connect()

    def execute(self, tree, params=None):
        return self.con.execute(sql.render(tree, self.dialect), params).fetchall()

    def resolve(self, data):
        return resolve(data, self.con)

    def relation(self, tree) -> duckdb.DuckDBPyRelation:
        return self.con.sql(sql.render(tree, self.dialect))
