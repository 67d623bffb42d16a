"""Models in a PostgreSQL database: the DuckDB layout, written with ``CREATE TABLE`` and
``INSERT`` with bound parameters, each save and drop in one transaction.

Sessions that share the store take one advisory lock (:data:`LOCK_KEY`), held to the end
of their transaction: exclusive for a save or drop, shared while a model is read. So two
saves of one name run one after the other (with ``replace`` the later one wins; without,
the later one finds the name taken and says so in one line), and a reader sees a model
before a save or after it. Without the lock a reader could find the catalog row of a
model whose tables a save had dropped since (PostgreSQL opens a table by its current
name, not by the reader's snapshot), and two first saves could both run ``CREATE TABLE
IF NOT EXISTS`` and fail on the system catalog's unique index. The wait for the lock is
bounded by ``lock_timeout``, set for the transaction only; a save holds it only while it
writes the few parameter tables (the data were read before).
"""

from __future__ import annotations

import shlex
from contextlib import contextmanager
from typing import Iterator

from sqlglot import exp

from sqlnb import sql
from sqlnb.crash import kill_point
from sqlnb.engines.postgres import PostgresEngine
from sqlnb.engines.waiting import wait_seconds
from sqlnb.errors import SqlnbError, SqlnbNotFound, StoreBusy
from sqlnb.store.catalog import (CATALOG, CATALOG_COLUMNS, SCHEMA, MetaText, already_exists, catalog_columns_query,
                                 catalog_table, check_expected, create_catalog, delete_catalog_row, found_catalog,
                                 insert_catalog_row, new_id, now, part_table, without_ids)


#: The advisory lock of the store (a bigint: "sqlnb" in ASCII), one per database.
LOCK_KEY = 0x73716C6E62


class PostgresStorage:
    """:class:`~sqlnb.store.catalog.Storage` on a :class:`~sqlnb.engines.PostgresEngine`."""

    where = place = "this PostgreSQL database"

    def __init__(self, engine: PostgresEngine, wait: float | None = None):
        self.engine = engine
        self.wait = wait_seconds(wait)

    @contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        """One transaction holding the store's advisory lock (exclusive or shared), waiting
        at most ``self.wait`` seconds for it; then one line naming the session that holds it."""
        from psycopg import errors as pgerr
        try:
            with self.engine.con.transaction():
                # set_config(..., true): for this transaction only; in milliseconds (0 waits forever).
                self.engine.execute(exp.select(exp.func("set_config", exp.Literal.string("lock_timeout"),
                                                        exp.Placeholder(), exp.true())),
                                    [str(max(1, round(self.wait * 1000)))])
                self.engine.execute(exp.select(exp.func(
                    "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared",
                    exp.cast(exp.Literal.number(LOCK_KEY), "bigint"))))
                yield
        except pgerr.LockNotAvailable:
            raise StoreBusy(f"the models in {self.where} are being {'read or ' if exclusive else ''}written by "
                             f"another session ({self._holder()}), which held them for the {self.wait:g} s this "
                             "command waits; run it again once that session has finished, or wait longer with "
                             "--wait SECONDS (wait= in Python)") from None

    def _holder(self) -> str:
        """The sessions holding the store's lock: backend PID, application, client."""
        high, low = divmod(LOCK_KEY, 1 << 32)
        locks, activity = exp.to_table("pg_catalog.pg_locks", alias="l"), exp.to_table("pg_catalog.pg_stat_activity",
                                                                                       alias="a")
        q = (exp.select(exp.column("pid", "l"), exp.column("application_name", "a"), exp.column("client_addr", "a"))
             .from_(locks).join(activity, on=exp.column("pid", "l").eq(exp.column("pid", "a")))
             .where(exp.and_(exp.column("locktype", "l").eq(exp.Literal.string("advisory")),
                             exp.column("classid", "l").eq(exp.Literal.number(high)),
                             exp.column("objid", "l").eq(exp.Literal.number(low)),
                             exp.column("granted", "l"))))
        try:
            rows = self.engine.execute(q)
        except Exception:  # noqa: BLE001 -- naming the holder is a courtesy; the error stands without it
            rows = []
        named = [f"backend PID {pid}" + (f", application {app!r}" if app else "")
                 + (f", from {addr}" if addr else "") for pid, app, addr in rows]
        return "; ".join(named) or "it has finished since"

    @contextmanager
    def reading(self) -> Iterator[None]:
        """Reads of one model or the catalog as one consistent snapshot (shared lock)."""
        with self._locked(exclusive=False):
            yield

    def _tables(self) -> list[str]:
        q = (exp.select(sql.col("table_name")).from_(exp.to_table("information_schema.tables"))
             .where(sql.col("table_schema").eq(exp.Placeholder())))
        return [r[0] for r in self.engine.execute(q, [SCHEMA])]

    def drop_command(self, name: str) -> str:
        return f"sqlnb --engine postgres --dsn DSN drop --model {shlex.quote(name)}"

    def _has_catalog(self) -> bool:
        """Whether the database has ``sqlnb.models`` (:func:`~sqlnb.store.catalog.found_catalog`)."""
        columns = [r[0] for r in self.engine.execute(catalog_columns_query(), [SCHEMA, CATALOG])]
        return found_catalog(columns, self)

    def lookup(self, name):
        if not self._has_catalog():
            return None
        q = (exp.select(sql.col("id"), sql.col("kind"), sql.col("meta"))
             .from_(catalog_table()).where(sql.col("name").eq(exp.Placeholder())))
        rows = self.engine.execute(q, [name])
        return rows[0] if rows else None

    def names(self):
        return [r[0] for r in self.rows()]

    def rows(self):
        return without_ids(self.entries())

    def entries(self):
        if not self._has_catalog():
            return []
        q = exp.select(*(sql.col(c) for c in CATALOG_COLUMNS)).from_(catalog_table()).order_by(sql.col("name"))
        return self.engine.execute(q)

    def read_parts(self, model_id):
        prefix = f"m_{model_id}_"
        return {t[len(prefix):]: self.engine.relation(exp.select(exp.Star()).from_(sql.table(t, SCHEMA)))
                for t in self._tables() if t.startswith(prefix)}

    def _drop_parts(self, model_id: str) -> None:
        for t in self._tables():
            if t.startswith(f"m_{model_id}_"):
                self.engine.execute(exp.Drop(tables=[sql.table(t, SCHEMA)], kind="TABLE"))

    def save(self, name: str, kind: str, parts: dict, meta: MetaText, replace: bool,
             expect: str | None = None) -> None:
        kill_point("save:begin")
        with self._locked(exclusive=True):
            for statement in create_catalog(primary_key=True):
                self.engine.execute(statement)
            old = self.lookup(name)
            check_expected(name, old, expect, self.where)
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
        with self._locked(exclusive=True):
            # Under the lock: the model may have been replaced (a new id) or dropped since
            # the caller looked it up.
            row = self.lookup(name)
            if row is None:
                raise SqlnbNotFound(f"no model named {name!r} in {self.where}; another session dropped it")
            self._drop_parts(row[0])
            kill_point("drop:parts")
            self.engine.execute(delete_catalog_row(), [name])
            kill_point("drop:commit")
        kill_point("drop:committed")
