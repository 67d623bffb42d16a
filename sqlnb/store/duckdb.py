"""Models in a DuckDB database: each save and drop is one transaction.

The new tables and the catalog row appear together, the old model's tables go in the same
commit, and a failure or interruption leaves the database as it was.
"""

from __future__ import annotations

import shlex
import uuid
from typing import Any

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.crash import kill_point
from sqlnb.store.catalog import (CATALOG, CATALOG_COLUMNS, SCHEMA, MetaText, already_exists, casted_select,
                                 catalog_columns_query, catalog_table, check_expected, create_catalog,
                                 delete_catalog_row, found_catalog, insert_catalog_row, new_id, now, part_table,
                                 without_ids)


class DuckDBStorage:
    """:class:`~sqlnb.store.catalog.Storage` on a DuckDB connection."""

    where = "this database"

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con = con

    def _run(self, tree: exp.Expression, params: list | None = None) -> list[tuple]:
        return self.con.execute(sql.render(tree), params).fetchall()

    def _path(self) -> str | None:
        """The database file (absolute, as DuckDB opened it), None in memory."""
        q = (exp.select(sql.col("path")).from_(exp.Table(this=exp.Anonymous(this="duckdb_databases")))
             .where(sql.col("database_name").eq(exp.func("current_database"))))
        rows = self._run(q)
        return rows[0][0] if rows else None

    @property
    def place(self) -> str:
        return self._path() or self.where

    def drop_command(self, name: str) -> str:
        path = self._path()
        return f"sqlnb drop --model {shlex.quote(f'{path}:{name}')}" if path else f"sqlnb.drop(con, {name!r})"

    def _has_catalog(self) -> bool:
        """Whether the database has ``sqlnb.models`` (:func:`~sqlnb.store.catalog.found_catalog`)."""
        columns = [r[0] for r in self._run(catalog_columns_query(), [SCHEMA, CATALOG])]
        return found_catalog(columns, self)

    def _part_names(self, model_id: str) -> list[str]:
        q = (exp.select(sql.col("table_name")).from_(exp.to_table("information_schema.tables"))
             .where(exp.and_(sql.col("table_schema").eq(exp.Placeholder()),
                             exp.func("starts_with", sql.col("table_name"), exp.Placeholder()))))
        return [r[0] for r in self._run(q, [SCHEMA, f"m_{model_id}_"])]

    def lookup(self, name):
        if not self._has_catalog():
            return None
        q = (exp.select(sql.col("id"), sql.col("kind"), sql.col("meta"))
             .from_(catalog_table()).where(sql.col("name").eq(exp.Placeholder())))
        rows = self._run(q, [name])
        return rows[0] if rows else None

    def names(self):
        return [r[0] for r in self.rows()]

    def rows(self):
        return without_ids(self.entries())

    def entries(self):
        if not self._has_catalog():
            return []
        q = exp.select(*(sql.col(c) for c in CATALOG_COLUMNS)).from_(catalog_table()).order_by(sql.col("name"))
        return self._run(q)

    def read_parts(self, model_id):
        prefix = f"m_{model_id}_"
        return {t[len(prefix):]: self.con.sql(sql.render(exp.select(exp.Star()).from_(sql.table(t, SCHEMA))))
                .to_arrow_table() for t in self._part_names(model_id)}

    def table_shapes(self) -> dict[str, tuple[int, list[str]]]:
        """Table -> (rows, columns) of every part table in the schema, without reading
        their rows (a listing's check, :func:`sqlnb.store.list_models`): two queries."""
        q = (exp.select(sql.col("table_name"), sql.col("column_name"))
             .from_(exp.to_table("information_schema.columns"))
             .where(exp.and_(sql.col("table_schema").eq(exp.Placeholder()),
                             exp.func("starts_with", sql.col("table_name"), exp.Placeholder())))
             .order_by(sql.col("table_name"), sql.col("ordinal_position")))
        columns: dict[str, list[str]] = {}
        for table, column in self._run(q, [SCHEMA, "m_"]):
            columns.setdefault(table, []).append(column)
        if not columns:
            return {}
        counts = [exp.select(exp.alias_(exp.Literal.string(t), "t"), exp.alias_(exp.Count(this=exp.Star()), "n"))
                  .from_(sql.table(t, SCHEMA)) for t in columns]
        rows = dict(self._run(counts[0] if len(counts) == 1 else exp.union(*counts, distinct=False)))
        return {t: (rows[t], cols) for t, cols in columns.items()}

    def _create_part(self, model_id: str, part: str, data: Any, casts: dict) -> None:
        view = f"sqlnb_part_{uuid.uuid4().hex}"
        self.con.register(view, data)
        try:
            self._run(exp.Create(this=part_table(model_id, part), kind="TABLE",
                                 expression=casted_select(data.column_names, casts, view)))
        finally:
            self.con.unregister(view)

    def _drop_parts(self, model_id: str) -> None:
        for t in self._part_names(model_id):
            self._run(exp.Drop(tables=[sql.table(t, SCHEMA)], kind="TABLE"))

    def _transaction(self, work, what: str) -> None:
        """Run ``work`` in one transaction; ``what`` names its kill points (``save``, ``drop``)."""
        kill_point(f"{what}:begin")
        self.con.begin()
        try:
            work()
            kill_point(f"{what}:commit")
            self.con.commit()
        except BaseException:
            self.con.rollback()
            raise
        kill_point(f"{what}:committed")

    def save(self, name: str, kind: str, parts: dict, meta: MetaText, replace: bool,
             expect: str | None = None) -> None:
        def work():
            for statement in create_catalog(primary_key=True):
                self._run(statement)
            old = self.lookup(name)
            check_expected(name, old, expect, self.where)
            if old is not None and not replace:
                raise already_exists(name, self.where)
            model_id = new_id()
            for part, (data, casts) in parts.items():
                self._create_part(model_id, part, data, casts)
                kill_point("save:part")
            if old is not None:
                self._drop_parts(old[0])
                self._run(delete_catalog_row(), [name])
            created = now()
            self._run(insert_catalog_row(), [name, model_id, kind, created, meta(created)])
        self._transaction(work, "save")

    def drop(self, name: str, model_id: str) -> None:
        def work():
            self._drop_parts(model_id)
            kill_point("drop:parts")
            self._run(delete_catalog_row(), [name])
        self._transaction(work, "drop")
