"""Models on Spark, as an append-only log: in a local warehouse directory as Parquet
files, or in a Spark catalog as tables.

Spark has no multi-table transactions, and a plain (Parquet) table cannot be updated in
place. So the catalog ``sqlnb.models`` is an append-only log: a save writes the new part
tables under a fresh id, then appends one catalog row (the commit point), then drops the
old model's tables. The newest row of a name wins; a drop appends a tombstone row (``kind``
NULL). A failure before the append leaves the old model readable and, at worst, orphan
``m_<id>_*`` tables; a failure after it leaves only the old tables behind. Each save and
drop first removes what killed writers left (:meth:`SparkStorage.sweep`): the tables of
superseded ids, and those of ids never committed whose writer, named in the id (its
process and host, :mod:`sqlnb.crash`), is gone.

Where the log lives (:class:`WarehouseFiles` or :class:`CatalogTables`):

* **A local warehouse directory** (``sqlnb.engines.connect("spark", warehouse=DIR)``, and
  the command line's ``./spark-warehouse`` or ``--warehouse DIR``): Parquet files in
  ``DIR/sqlnb.db``, read and written here with pyarrow, without Spark's table catalog.
  Each table is a directory (``models``, ``m_<id>_<part>``), where Spark's Hive catalog
  kept them up to 79062dc, so the models stored then are read as they are. Starting that
  catalog (Hive over an embedded Derby metastore) cost 6-7 s of every command, more than
  a bare session's start (benchmarks/README.md, "Spark start-up"); it is now opened only
  for a command that names a table (:meth:`sqlnb.engines.SparkEngine.open_catalog`). A
  new part directory appears by one rename of a finished hidden one, a catalog row by one
  rename of a finished hidden file; the directory's lock
  (:func:`sqlnb.engines.waiting.hold_directory`) keeps one process at a time on it.
* **Any other session**: tables in its catalog (in memory, unless the session has a
  persistent one: on a cluster its metastore, Hive, Unity or Glue). Through Spark
  Connect (``remote=``), the catalog is the server's: every call here (``spark.catalog``,
  ``createDataFrame`` of the small part tables, SQL) is one the Connect client supports;
  a catalog row appears when its ``INSERT``'s job commits.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import uuid

from sqlglot import exp

from sqlnb import sql
from sqlnb.crash import gone, kill_point, owner
from sqlnb.engines.base import arrow_table
from sqlnb.engines.duckdb import new_connection
from sqlnb.engines.spark import SparkEngine
from sqlnb.errors import SqlnbError
from sqlnb.store.catalog import (CATALOG, CATALOG_COLUMNS, SCHEMA, MetaText, ModelChanged, already_exists,
                                 casted_select, catalog_table, check_expected, create_catalog, found_catalog,
                                 insert_catalog_row, new_id, now, without_ids)


#: ``m_<random>w<pid>h<host>_<part>``: a part table of a model whose writer is named in its id.
_OWNED = re.compile(r"^m_([0-9a-f]{12}w(\d+)h([0-9a-f]{8}))_")
#: ``m_<id>_<part>``: any model's part table (ids before the owner tag had 12 hex digits).
_PART = re.compile(r"^m_([0-9a-f]{12}(?:w\d+h[0-9a-f]{8})?)_")


#: ``.sqlnb-<pid>-<host>-<random>-<base>``: a file or directory being written (or removed)
#: in a warehouse's ``sqlnb.db``, hidden from readers, named for its writer.
_TEMPORARY = re.compile(r"^\.sqlnb-(\d+)-([0-9a-f]{8})-[0-9a-f]{12}-")


def _temporary(base: str) -> str:
    pid, host = owner()
    return f".sqlnb-{pid}-{host}-{uuid.uuid4().hex[:12]}-{base}"


def _remove_stale(directory: str) -> None:
    """Remove the temporaries in ``directory`` whose writer (a process of this host) is gone."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    for name in names:
        m = _TEMPORARY.match(name)
        if m is None or not gone(int(m.group(1)), m.group(2)):
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            try:
                os.remove(path)
            except FileNotFoundError:  # another writer removed it first
                pass


def _owned_id() -> str:
    """A new model id naming its writer: a later save can tell an id whose catalog row
    never came (its writer was killed) from one still being written."""
    pid, host = owner()
    return f"{new_id()}w{pid}h{host}"


class CatalogTables:
    """The log as tables in the schema ``sqlnb`` of the session's catalog."""

    def __init__(self, engine: SparkEngine):
        self.engine = engine
        self.spark = engine.spark

    @property
    def where(self) -> str:
        """The catalog, for messages."""
        conf = self.spark.conf
        if conf.get("spark.sql.catalogImplementation", "in-memory") == "hive":
            return f"the Spark catalog in {conf.get('spark.sql.warehouse.dir')}"
        if self.engine.connect:  # the server's catalog, shared by its sessions
            return "the Spark Connect server's catalog (in memory)"
        return "this Spark session's catalog (in memory)"

    place = where  # the store, as a damaged model's message names it

    def create_catalog(self) -> None:
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

    def names(self) -> list[str]:
        if not self.spark.catalog.databaseExists(SCHEMA):
            return []
        return [t.name for t in self.spark.catalog.listTables(SCHEMA) if not t.isTemporary]

    def catalog_rows(self) -> list[tuple] | None:
        """``(name, id, kind, created, meta)`` of every catalog row; None without a catalog."""
        if CATALOG not in self.names():
            return None
        columns = self.engine.relation(exp.select(exp.Star()).from_(catalog_table()).limit(0)).columns
        found_catalog(columns, self)
        q = exp.select(*(sql.col(c) for c in CATALOG_COLUMNS)).from_(catalog_table())
        return self.engine.execute(q)

    def read(self, table: str):
        """Table ``table`` as a pyarrow table; None when it is gone."""
        try:
            df = self.engine.relation(exp.select(exp.Star()).from_(sql.table(table, SCHEMA)))
            return arrow_table(df.columns, [tuple(r) for r in df.collect()])
        except Exception as e:  # pyspark's AnalysisException
            if "TABLE_OR_VIEW_NOT_FOUND" not in str(e) and "not found" not in str(e).lower():
                raise
            return None

    def write(self, table: str, data, casts: dict) -> None:
        view = f"sqlnb_part_{uuid.uuid4().hex[:12]}"
        self.spark.createDataFrame(data).createOrReplaceTempView(view)
        try:
            self.engine.execute(exp.Create(this=sql.table(table, SCHEMA), kind="TABLE",
                                           expression=casted_select(data.column_names, casts, view)))
        finally:
            self.spark.catalog.dropTempView(view)

    def append(self, row: list) -> None:
        """Append one catalog row: a single ``INSERT``, whose files appear together when
        its job commits."""
        self.engine.execute(insert_catalog_row(), row)

    def drop(self, table: str) -> None:
        self.engine.execute(exp.Drop(tables=[sql.table(table, SCHEMA)], kind="TABLE", exists=True))

    def sweep_temporaries(self) -> None:
        """Nothing: a table appears whole when its job commits."""


#: The catalog's columns as stored in the files (Spark wrote ``created`` as INT96).
def _catalog_schema():
    import pyarrow as pa
    return pa.schema([("name", pa.string()), ("id", pa.string()), ("kind", pa.string()),
                      ("created", pa.timestamp("us")), ("meta", pa.string())])


class WarehouseFiles:
    """The log as Parquet files in ``WAREHOUSE/sqlnb.db``: one directory per table, as
    Spark's catalog laid them out (``models``, ``m_<id>_<part>``)."""

    def __init__(self, warehouse: str):
        self.warehouse = warehouse
        self.root = os.path.join(warehouse, f"{SCHEMA}.db")
        self.where = self.place = f"the Spark warehouse {warehouse}"

    def create_catalog(self) -> None:
        os.makedirs(os.path.join(self.root, CATALOG), exist_ok=True)

    def names(self) -> list[str]:
        try:
            found = os.listdir(self.root)
        except FileNotFoundError:
            return []
        return sorted(n for n in found if not n.startswith((".", "_")) and os.path.isdir(os.path.join(self.root, n)))

    def _files(self, table: str) -> list[str] | None:
        """The data files of ``table`` (Spark's ``_SUCCESS`` and hidden ``.crc`` files, and
        temporaries, are not); None when it is gone."""
        path = os.path.join(self.root, table)
        try:
            return [os.path.join(path, n) for n in sorted(os.listdir(path)) if not n.startswith((".", "_"))]
        except (FileNotFoundError, NotADirectoryError):
            return None

    def read(self, table: str):
        """Table ``table`` as a pyarrow table (its files in name order); None when it is gone."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        files = self._files(table)
        if files is None:
            return None
        try:
            pieces = [pq.ParquetFile(f).read() for f in files]
        except FileNotFoundError:  # dropped while read
            return None
        if not pieces:
            return pa.table({})
        # Spark wrote TIMESTAMP as INT96 (nanoseconds here): the microseconds it held.
        pieces = [t.cast(pa.schema([pa.field(f.name, pa.timestamp("us"), f.nullable)
                                    if pa.types.is_timestamp(f.type) and f.type.tz is None else f
                                    for f in t.schema])) for t in pieces]
        return pa.concat_tables(pieces, promote_options="permissive")

    def catalog_rows(self) -> list[tuple] | None:
        files = self._files(CATALOG)
        if files is None:
            return None
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = _catalog_schema()
        for f in files:
            found_catalog(pq.ParquetFile(f).schema_arrow.names, self)
        tables = [pq.ParquetFile(f).read(columns=schema.names).cast(schema) for f in files]
        if not tables:
            return []
        rows = pa.concat_tables(tables).to_pylist()
        return [tuple(r[c] for c in schema.names) for r in rows]

    def write(self, table: str, data, casts: dict) -> None:
        """Write ``data`` (its columns cast to ``casts``, in DuckDB, as the DuckDB store
        stores them) as the directory ``table``: written hidden, then renamed."""
        import pyarrow.parquet as pq

        if casts:
            con = new_connection()
            try:
                con.register("sqlnb_part", data)
                data = con.sql(sql.render(casted_select(data.column_names, casts, "sqlnb_part"))).to_arrow_table()
            finally:
                con.close()
        tmp = os.path.join(self.root, _temporary(table))
        os.makedirs(tmp)
        pq.write_table(data, os.path.join(tmp, "part-00000.parquet"))
        os.rename(tmp, os.path.join(self.root, table))

    def append(self, row: list) -> None:
        """Append one catalog row: a Parquet file of one row, written hidden, then
        renamed into the catalog's directory (the commit point)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        schema = _catalog_schema()
        path = os.path.join(self.root, CATALOG)
        tmp = os.path.join(path, _temporary("row.parquet"))
        pq.write_table(pa.table([[v] for v in row], schema=schema), tmp)
        os.rename(tmp, os.path.join(path, f"part-{row[3]:%Y%m%d%H%M%S%f}-{uuid.uuid4().hex[:12]}.parquet"))

    def drop(self, table: str) -> None:
        """Remove the directory ``table``: renamed aside first (one step), so that a
        writer killed while it deletes leaves a temporary the next one removes."""
        aside = os.path.join(self.root, _temporary(table))
        try:
            os.rename(os.path.join(self.root, table), aside)
        except FileNotFoundError:
            return
        shutil.rmtree(aside, ignore_errors=True)

    def sweep_temporaries(self) -> None:
        """Remove the hidden temporaries of killed writers (their process is gone)."""
        _remove_stale(self.root)
        _remove_stale(os.path.join(self.root, CATALOG))


class SparkStorage:
    """:class:`~sqlnb.store.catalog.Storage` on a :class:`~sqlnb.engines.SparkEngine`: the
    log in its local warehouse directory's files when it has one, else in its catalog."""

    def __init__(self, engine: SparkEngine):
        self.engine = engine
        self.tables = (WarehouseFiles(engine.warehouse) if getattr(engine, "warehouse", None)
                       else CatalogTables(engine))

    @property
    def where(self) -> str:
        """Where the models are, for messages."""
        return self.tables.where

    @property
    def place(self) -> str:
        return self.tables.place

    def drop_command(self, name: str) -> str:
        warehouse = getattr(self.tables, "warehouse", None)
        return ("sqlnb --engine spark " + (f"--warehouse {shlex.quote(warehouse)} " if warehouse else "")
                + f"drop --model {shlex.quote(name)}")

    def _latest(self) -> dict:
        """name -> (id, kind, created, meta) of the newest catalog row per name (live models)."""
        latest: dict = {}
        for name, mid, kind, created, meta in sorted(self.tables.catalog_rows() or [], key=lambda r: r[3]):
            latest[name] = (mid, kind, created, meta)  # rows in time order: the last one wins
        return {n: v for n, v in latest.items() if v[1] is not None}

    def lookup(self, name):
        row = self._latest().get(name)
        return None if row is None else (row[0], row[1], row[3])

    def names(self):
        return sorted(self._latest())

    def rows(self):
        return without_ids(self.entries())

    def entries(self):
        return [(n, *v) for n, v in sorted(self._latest().items())]

    def read_parts(self, model_id):
        """The parts of ``model_id``. Without a lock to hold them still, another process's
        save of the name drops them once its catalog row is in, so tables that are gone
        (all of them, or one between listing and reading) raise
        :class:`~sqlnb.store.catalog.ModelChanged`, and :func:`sqlnb.store.load_model`
        looks the name up again."""
        prefix = f"m_{model_id}_"
        out = {}
        for t in self.tables.names():
            if t.startswith(prefix):
                got = self.tables.read(t)
                if got is None:
                    raise ModelChanged(f"the tables of model id {model_id} were dropped while read")
                out[t[len(prefix):]] = got
        if not out:
            raise ModelChanged(f"the tables of model id {model_id} were dropped before they were read")
        return out

    def _drop_parts(self, model_id: str) -> None:
        for t in self.tables.names():
            if t.startswith(f"m_{model_id}_"):
                self.tables.drop(t)

    def sweep(self) -> list[str]:
        """Drop the part tables killed writers left; returns their names.

        A table whose id the catalog names, but not as a live model, belongs to a model
        replaced or dropped by a writer killed before it dropped the old tables. A table
        whose id the catalog never names is a save in progress, or one whose writer was
        killed before its catalog row: dropped only when the id's writer is gone (a
        process of this host that no longer runs)."""
        self.tables.sweep_temporaries()
        rows = self.tables.catalog_rows()
        if rows is None:
            return []
        named = {r[1] for r in rows if r[1] is not None}
        live = {v[0] for v in self._latest().values()}
        stale = []
        for t in self.tables.names():
            m = _PART.match(t)
            if m is None or m.group(1) in live:
                continue
            o = _OWNED.match(t)
            if m.group(1) in named or (o is not None and gone(int(o.group(2)), o.group(3))):
                stale.append(t)
        for t in stale:
            self.tables.drop(t)
        return stale

    def save(self, name: str, kind: str, parts: dict, meta: MetaText, replace: bool,
             expect: str | None = None) -> None:
        """Write new part tables, append the catalog row, drop the old tables."""
        kill_point("save:begin")
        self.tables.create_catalog()
        self.sweep()
        old = self._latest().get(name)
        check_expected(name, old, expect, self.where)
        if old is not None and not replace:
            raise already_exists(name, self.where)
        model_id = _owned_id()
        for part, (data, casts) in parts.items():
            self.tables.write(f"m_{model_id}_{part}", data, casts)
            kill_point("save:part")
        created = now()
        kill_point("save:commit")
        self.tables.append([name, model_id, kind, created, meta(created)])  # commit point
        kill_point("save:committed")
        if old is not None:
            self._drop_parts(old[0])

    def drop(self, name: str, model_id: str) -> None:
        kill_point("drop:begin")
        self.sweep()
        self.tables.append([name, None, None, now(), None])  # the tombstone
        kill_point("drop:committed")
        self._drop_parts(model_id)
