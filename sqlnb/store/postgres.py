"""Models in a PostgreSQL database: the DuckDB layout, written with ``CREATE TABLE`` and
``INSERT`` with bound parameters, each save and drop in one transaction."""

from __future__ import annotations

from sqlglot import exp

from sqlnb import sql
from sqlnb.crash import kill_point
from sqlnb.engines.postgres import PostgresEngine
from sqlnb.store.catalog import (CATALOG, SCHEMA, MetaText, already_exists, catalog_table, create_catalog,
                                 delete_catalog_row, insert_catalog_row, new_id, now, part_table)


class PostgresStorage:
    """:class:`~sqlnb.store.catalog.Storage` on a :class:`~sqlnb.engines.PostgresEngine`."""

    where = "this PostgreSQL database"

    def __init__(self, engine: PostgresEngine):
        self.engine = engine

    def _tables(self) -> list[str]:
        q = (exp.select(sql.col("table_name")).from_(exp.to_table("information_schema.tables"))
             .where(sql.col("table_schema").eq(exp.Placeholder())))
        return [r[0] for r in self.engine.execute(q, [SCHEMA])]

    def lookup(self, name):
        if CATALOG not in self._tables():
            return None
        q = (exp.select(sql.col("id"), sql.col("kind"), sql.col("meta"))
             .from_(catalog_table()).where(sql.col("name").eq(exp.Placeholder())))
        rows = self.engine.execute(q, [name])
        return rows[0] if rows else None

    def names(self):
        return [r[0] for r in self.rows()]

    def rows(self):
        if CATALOG not in self._tables():
            return []
        q = exp.select(*(sql.col(c) for c in ("name", "kind", "created", "meta"))).from_(
            catalog_table()).order_by(sql.col("name"))
        return self.engine.execute(q)

    def read_parts(self, model_id):
        prefix = f"m_{model_id}_"
        return {t[len(prefix):]: self.engine.relation(exp.select(exp.Star()).from_(sql.table(t, SCHEMA)))
                for t in self._tables() if t.startswith(prefix)}

    def _drop_parts(self, model_id: str) -> None:
        for t in self._tables():
            if t.startswith(f"m_{model_id}_"):
                self.engine.execute(exp.Drop(tables=[sql.table(t, SCHEMA)], kind="TABLE"))

    def save(self, name: str, kind: str, parts: dict, meta: MetaText, replace: bool) -> None:
        kill_point("save:begin")
        with self.engine.con.transaction():
            for statement in create_catalog(primary_key=True):
                self.engine.execute(statement)
            old = self.lookup(name)
            if old is not None and not replace:
                raise already_exists(name, self.where)
            model_id = new_id()
            for part, (data, casts) in parts.items():
                self.engine.create_from_arrow(part_table(model_id, part), data, casts)
                kill_point("save:part")
            if old is not None:
                self._drop_parts(old[0])
                self.engine.execute(delete_catalog_row(), [name])
            created = now()
            self.engine.execute(insert_catalog_row(), [name, model_id, kind, created, meta(created)])
            kill_point("save:commit")
        kill_point("save:committed")

    def drop(self, name: str, model_id: str) -> None:
        kill_point("drop:begin")
        with self.engine.con.transaction():
            self._drop_parts(model_id)
            kill_point("drop:parts")
            self.engine.execute(delete_catalog_row(), [name])
            kill_point("drop:commit")
        kill_point("drop:committed")
