"""Models in a Spark catalog, as an append-only log.

Spark has no multi-table transactions, and a plain (Parquet) table cannot be updated in
place. So the catalog ``sqlnb.models`` is an append-only log: a save writes the new part
tables under a fresh id, then appends one catalog row (the commit point: a single
``INSERT`` whose files appear together when its job commits), then drops the old model's
tables. The newest row of a name wins; a drop appends a tombstone row (``kind`` NULL).
A failure before the append leaves the old model readable and, at worst, orphan
``m_<id>_*`` tables; a failure after it leaves only the old tables behind. Each save and
drop first removes what killed writers left (:meth:`SparkStorage.sweep`): the tables of
superseded ids, and those of ids never committed whose writer, named in the id (its
process and host, :mod:`sqlnb.crash`), is gone.

A local session's catalog lives in memory (lost when the session ends) unless the
session was started with a persistent one: ``sqlnb.engines.connect("spark",
warehouse=DIR)`` keeps tables and an embedded Derby metastore in DIR, as the command
line does by default (``./spark-warehouse``, or ``--warehouse DIR``). On a cluster, use
its persistent metastore (Hive, Unity, Glue). Through Spark Connect (``remote=``), the
catalog is the server's: every call here (``spark.catalog``, ``createDataFrame`` of the
small part tables, SQL) is one the Connect client supports.
"""

from __future__ import annotations

import re
import uuid

from sqlglot import exp

from sqlnb import sql
from sqlnb.crash import gone, kill_point, owner
from sqlnb.engines.base import arrow_table
from sqlnb.engines.spark import SparkEngine
from sqlnb.errors import SqlnbError
from sqlnb.store.catalog import (CATALOG, SCHEMA, MetaText, ModelChanged, already_exists, casted_select,
                                 catalog_table, check_expected, create_catalog, insert_catalog_row, new_id, now,
                                 part_table)


#: ``m_<random>w<pid>h<host>_<part>``: a part table of a model whose writer is named in its id.
_OWNED = re.compile(r"^m_([0-9a-f]{12}w(\d+)h([0-9a-f]{8}))_")
#: ``m_<id>_<part>``: any model's part table (ids before the owner tag had 12 hex digits).
_PART = re.compile(r"^m_([0-9a-f]{12}(?:w\d+h[0-9a-f]{8})?)_")


def _owned_id() -> str:
    """A new model id naming its writer: a later save can tell an id whose catalog row
    never came (its writer was killed) from one still being written."""
    pid, host = owner()
    return f"{new_id()}w{pid}h{host}"


class SparkStorage:
    """:class:`~sqlnb.store.catalog.Storage` on a :class:`~sqlnb.engines.SparkEngine`."""

    def __init__(self, engine: SparkEngine):
        self.engine = engine
        self.spark = engine.spark

    @property
    def where(self) -> str:
        """The catalog, for messages: a persistent one by its directory."""
        conf = self.spark.conf
        if conf.get("spark.sql.catalogImplementation", "in-memory") == "hive":
            return f"the Spark catalog in {conf.get('spark.sql.warehouse.dir')}"
        if self.engine.connect:  # the server's catalog, shared by its sessions
            return "the Spark Connect server's catalog (in memory)"
        return "this Spark session's catalog (in memory)"

    def _create_catalog(self) -> None:
        try:
            for statement in create_catalog(primary_key=False):
                self.engine.execute(statement)
        except Exception as e:  # pyspark's AnalysisException
            if "LOCATION_ALREADY_EXISTS" not in str(e):
                raise
            # The table's directory was written by a session whose catalog is gone (an
            # in-memory one, or a deleted metastore): Spark will not write over it.
            raise SqlnbError(f"{self.where} has no table {SCHEMA}.{CATALOG} but its directory exists, left "
                             "by a session whose catalog was lost; move that directory (sqlnb.db) away, "
                             "or use another warehouse directory") from None

    def _tables(self) -> list[str]:
        if not self.spark.catalog.databaseExists(SCHEMA):
            return []
        return [t.name for t in self.spark.catalog.listTables(SCHEMA) if not t.isTemporary]

    def _latest(self) -> dict:
        """name -> (id, kind, created, meta) of the newest catalog row per name (live models)."""
        if CATALOG not in self._tables():
            return {}
        q = exp.select(*(sql.col(c) for c in ("name", "id", "kind", "created", "meta"))).from_(catalog_table())
        latest: dict = {}
        for name, mid, kind, created, meta in sorted(self.engine.execute(q), key=lambda r: r[3]):
            latest[name] = (mid, kind, created, meta)  # rows in time order: the last one wins
        return {n: v for n, v in latest.items() if v[1] is not None}

    def lookup(self, name):
        row = self._latest().get(name)
        return None if row is None else (row[0], row[1], row[3])

    def names(self):
        return sorted(self._latest())

    def rows(self):
        return [(n, v[1], v[2], v[3]) for n, v in sorted(self._latest().items())]

    def read_parts(self, model_id):
        """The parts of ``model_id``. Spark has no lock to hold them still: another process's
        save of the name drops them once its catalog row is in, so tables that are gone
        (all of them, or one between listing and reading) raise
        :class:`~sqlnb.store.catalog.ModelChanged`, and :func:`sqlnb.store.load_model`
        looks the name up again."""
        prefix = f"m_{model_id}_"
        out = {}
        for t in self._tables():
            if t.startswith(prefix):
                try:
                    df = self.engine.relation(exp.select(exp.Star()).from_(sql.table(t, SCHEMA)))
                    out[t[len(prefix):]] = arrow_table(df.columns, [tuple(r) for r in df.collect()])
                except Exception as e:  # pyspark's AnalysisException
                    if "TABLE_OR_VIEW_NOT_FOUND" not in str(e) and "not found" not in str(e).lower():
                        raise
                    raise ModelChanged(f"the tables of model id {model_id} were dropped while read") from None
        if not out:
            raise ModelChanged(f"the tables of model id {model_id} were dropped before they were read")
        return out

    def _drop_parts(self, model_id: str) -> None:
        for t in self._tables():
            if t.startswith(f"m_{model_id}_"):
                self.engine.execute(exp.Drop(tables=[sql.table(t, SCHEMA)], kind="TABLE", exists=True))

    def sweep(self) -> list[str]:
        """Drop the part tables killed writers left; returns their names.

        A table whose id the catalog names, but not as a live model, belongs to a model
        replaced or dropped by a writer killed before it dropped the old tables. A table
        whose id the catalog never names is a save in progress, or one whose writer was
        killed before its catalog row: dropped only when the id's writer is gone (a
        process of this host that no longer runs)."""
        tables = self._tables()
        if CATALOG not in tables:
            return []
        q = exp.select(sql.col("id"), sql.col("kind")).from_(catalog_table())
        named = {r[0] for r in self.engine.execute(q) if r[0] is not None}
        live = {v[0] for v in self._latest().values()}
        stale = []
        for t in tables:
            m = _PART.match(t)
            if m is None or m.group(1) in live:
                continue
            o = _OWNED.match(t)
            if m.group(1) in named or (o is not None and gone(int(o.group(2)), o.group(3))):
                stale.append(t)
        for t in stale:
            self.engine.execute(exp.Drop(tables=[sql.table(t, SCHEMA)], kind="TABLE", exists=True))
        return stale

    def save(self, name: str, kind: str, parts: dict, meta: MetaText, replace: bool,
             expect: str | None = None) -> None:
        """Write new part tables, append the catalog row, drop the old tables."""
        kill_point("save:begin")
        self._create_catalog()
        self.sweep()
        old = self._latest().get(name)
        check_expected(name, old, expect, self.where)
        if old is not None and not replace:
            raise already_exists(name, self.where)
        model_id = _owned_id()
        for part, (data, casts) in parts.items():
            view = f"sqlnb_part_{uuid.uuid4().hex[:12]}"
            self.spark.createDataFrame(data).createOrReplaceTempView(view)
            try:
                self.engine.execute(exp.Create(this=part_table(model_id, part), kind="TABLE",
                                               expression=casted_select(data.column_names, casts, view)))
            finally:
                self.spark.catalog.dropTempView(view)
            kill_point("save:part")
        created = now()
        kill_point("save:commit")
        self.engine.execute(insert_catalog_row(), [name, model_id, kind, created, meta(created)])  # commit point
        kill_point("save:committed")
        if old is not None:
            self._drop_parts(old[0])

    def drop(self, name: str, model_id: str) -> None:
        kill_point("drop:begin")
        self.sweep()
        self.engine.execute(insert_catalog_row(), [name, None, None, now(), None])  # the tombstone
        kill_point("drop:committed")
        self._drop_parts(model_id)
