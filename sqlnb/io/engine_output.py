"""Writing an engine's query results where they belong: on the engine.

With ``--engine spark`` the scored rows of a big table must never pass through the driver
(on a cluster the smallest machine; Spark refuses results over
``spark.driver.maxResultSize``, 1 GiB by default). So:

* **files** (a local path or any URI Spark's writers accept: ``hdfs://``, ``s3a://``,
  ``abfss://``, ``file://``) are written by Spark's executors, as Spark writes them: a
  directory of part files (``scored.parquet/part-00000-....parquet``), read back by
  Spark, DuckDB (``'scored.parquet/*.parquet'``), pyarrow or pandas as one data set. The
  directory is written under a hidden temporary name next to the target
  (``.sqlnb-<pid>-<host>-<random>-<name>``) and renamed over it when complete, through
  Hadoop's ``FileSystem`` (the same code path Spark's own committer uses), so a failed
  or interrupted run leaves the previous output as it was. On object stores a rename is
  a copy: the output still appears only when complete, but not in one step. Over Spark
  Connect there is no ``FileSystem`` to call: the directory is written in place by
  Spark's commit protocol (files appear at job commit; ``_SUCCESS`` marks completion);
* **tables** in the session's catalog (``--out-table NAME``) are created under a
  temporary name by ``CREATE TABLE ... AS`` and renamed (``ALTER TABLE ... RENAME``);
  an existing table (only with ``--replace``) is renamed aside just before and dropped
  after; what a killed writer left, the next one finishes (:func:`sweep_spark_tables`).
  On PostgreSQL the table is created in one transaction;
* **local targets** (standard output, a DuckDB table) stream the rows one partition at
  a time as Arrow record batches (``toLocalIterator``): the driver holds at most one
  partition, and nothing is collected as one result.
"""

from __future__ import annotations

import os
import re
import uuid
from typing import Iterator

import duckdb
import pyarrow as pa
import sqlglot

from sqlnb import sql
from sqlnb.crash import gone, kill_point, owner
from sqlnb.errors import SqlnbError, SqlnbNotFound
from sqlnb.io.locations import FileOut
from sqlnb.io.output import remove_stale_temporaries, temporary_name
from sqlnb.source import Table

#: Rows per Arrow record batch when an engine's rows stream to a local target.
BATCH_ROWS = 65_536

#: Compression suffixes and Spark's codec names (as DuckDB chooses by suffix).
_CODECS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}


# -- tables ---------------------------------------------------------------------------------------

def table_exists(engine, name: str) -> bool:
    try:
        engine.resolve(Table(name))
    except SqlnbNotFound:
        return False
    return True


def write_table(engine, name: str, query: sqlglot.exp.Expression, replace: bool) -> None:
    """``CREATE TABLE name AS query`` on the engine, all or nothing.

    PostgreSQL: one transaction (an existing table is dropped inside it). Spark has no
    multi-statement transactions: see :func:`_spark_write_table`.
    """
    if table_exists(engine, name) and not replace:
        raise SqlnbError(f"table {name!r} already exists on the engine; pass --replace to overwrite it")
    drop = sqlglot.exp.Drop(tables=[sql.table(name)], kind="TABLE", exists=True)
    kill_point("out:begin")
    if engine.dialect == "postgres":
        with engine.con.transaction():
            engine.execute(drop)
            engine.execute(sqlglot.exp.Create(this=sql.table(name), kind="TABLE", expression=query))
            kill_point("out:commit")
        kill_point("out:committed")
        return
    _spark_write_table(engine, name, query)


#: ``sqlnb_tmp_<pid>_<host>_<random>`` (the new rows) and ``sqlnb_old_...`` (the table they
#: replace, renamed aside): the temporaries of a Spark ``--out-table``, named for their writer.
_SWAP = re.compile(r"^sqlnb_(tmp|old)_(\d+)_([0-9a-f]{8})_([0-9a-f]{12})$")
#: The table property of a temporary naming the table it is for (to put an old one back).
TARGET_PROPERTY = "sqlnb.target"


def _rename(engine, src: str, dst: str) -> None:
    engine.execute(sqlglot.exp.Alter(this=sql.table(src), kind="TABLE",
                                     actions=[sqlglot.exp.AlterRename(this=sql.table(dst))]))


def _drop(engine, name: str) -> None:
    engine.execute(sqlglot.exp.Drop(tables=[sql.table(name)], kind="TABLE", exists=True))


def _spark_write_table(engine, name: str, query: sqlglot.exp.Expression) -> None:
    """Spark's ``--out-table``: the rows go into ``sqlnb_tmp_<tag>`` (which names ``name``
    in its property :data:`TARGET_PROPERTY`), an existing ``name`` is renamed aside to
    ``sqlnb_old_<tag>``, the new table renamed to ``name``, the old one dropped. A failed
    query leaves the old table as it was; an error between the renames puts it back. A
    writer killed outright leaves its tables to the next Spark ``--out-table``
    (:func:`sweep_spark_tables`), which puts an old table whose name is empty back."""
    sweep_spark_tables(engine)
    pid, host = owner()
    tag = f"{pid}_{host}_{uuid.uuid4().hex[:12]}"
    tmp, aside = f"sqlnb_tmp_{tag}", f"sqlnb_old_{tag}"
    prop = sqlglot.exp.Property(this=sqlglot.exp.Literal.string(TARGET_PROPERTY),
                                value=sqlglot.exp.Literal.string(name))
    engine.execute(sqlglot.exp.Create(this=sql.table(tmp), kind="TABLE", expression=query,
                                      properties=sqlglot.exp.Properties(expressions=[prop])))
    kill_point("out:created")
    moved = False
    try:
        if table_exists(engine, name):
            _rename(engine, name, aside)
            moved = True
            kill_point("out:aside")
        _rename(engine, tmp, name)
    except BaseException:
        if moved and not table_exists(engine, name):
            _rename(engine, aside, name)
        _drop(engine, tmp)
        raise
    kill_point("out:renamed")
    if moved:
        _drop(engine, aside)
    kill_point("out:committed")


def _target(engine, table: str) -> str | None:
    """The table a Spark ``--out-table`` temporary was for (:data:`TARGET_PROPERTY`)."""
    for key, value in engine.execute(sqlglot.exp.Command(this="SHOW", expression=sqlglot.exp.Literal.string(
            f"TBLPROPERTIES {sql.render(sql.table(table), engine.dialect)}"))):
        if key == TARGET_PROPERTY:
            return value
    return None


def sweep_spark_tables(engine) -> list[str]:
    """Finish what killed Spark ``--out-table`` writers of this host left in the current
    database; returns the temporaries dropped. A writer killed between its renames left
    its target empty: the old table goes back under its name (the write did not happen).
    A live writer's and another host's temporaries are left alone."""
    found: dict[str, dict[str, str]] = {}
    for t in engine.spark.catalog.listTables():
        m = _SWAP.match(t.name)
        if m is not None and not t.isTemporary and gone(int(m.group(2)), m.group(3)):
            found.setdefault(f"{m.group(2)}_{m.group(3)}_{m.group(4)}", {})[m.group(1)] = t.name
    dropped = []
    for tables in found.values():
        target = _target(engine, tables["tmp"]) if "tmp" in tables else None
        if "old" in tables and target is not None and not table_exists(engine, target):
            _rename(engine, tables.pop("old"), target)
        for t in tables.values():
            _drop(engine, t)
            dropped.append(t)
    return dropped


# -- files, written by Spark's executors --------------------------------------------------------

class _HadoopFiles:
    """The Hadoop ``FileSystem`` of a path, through the classic session's JVM."""

    def __init__(self, spark):
        self.jvm = spark._jvm
        self.conf = spark._jsc.hadoopConfiguration()

    def _fs(self, path: str):
        p = self.jvm.org.apache.hadoop.fs.Path(path)
        return p, p.getFileSystem(self.conf)

    def exists(self, path: str) -> bool:
        p, fs = self._fs(path)
        return bool(fs.exists(p))

    def delete(self, path: str) -> None:
        p, fs = self._fs(path)
        if fs.exists(p):
            fs.delete(p, True)

    def rename(self, src: str, dst: str) -> None:
        s, fs = self._fs(src)
        if not fs.rename(s, self.jvm.org.apache.hadoop.fs.Path(dst)):
            raise SqlnbError(f"could not move the finished output {src!r} to {dst!r}; it was left there")


def _hadoop(spark) -> _HadoopFiles | None:
    """The JVM's file systems for a classic session; None over Spark Connect (no JVM)."""
    try:
        spark._jvm  # noqa: B018 -- a Spark Connect session raises here
        spark._jsc
    except Exception:
        return None
    return _HadoopFiles(spark)


def _has_scheme(path: str) -> bool:
    head = path.split("/", 1)[0]
    return head.endswith(":") and len(head) > 2  # 'C:' is a drive, not a scheme


def spark_target(path: str) -> str:
    """A path as Spark's writers take it: URIs as given, local paths absolute."""
    return path if _has_scheme(path) else os.path.abspath(path)


def check_spark_target(out: FileOut, replace: bool) -> None:
    """Raise before any work when a local ``out`` cannot be written by Spark (exists
    without ``replace``, missing directory); a URI is checked when written."""
    if _has_scheme(out.path):
        return
    parent = os.path.dirname(spark_target(out.path))
    if not os.path.isdir(parent):
        raise SqlnbError(f"directory {parent!r} of output {out.path!r} does not exist; create it first")
    if os.path.lexists(out.path) and not replace:
        raise SqlnbError(f"output {out.path!r} already exists; pass --replace to overwrite it")


def write_spark_files(engine, df, out: FileOut, replace: bool) -> None:
    """Write the rows of the DataFrame ``df`` (lazy: run here) as a directory of part
    files at ``out.path``, by Spark's executors; see the module docstring for how it
    appears only when complete.

    CSV gets a header row (and ``sep`` for ``.tsv``); a ``.gz``/``.zst`` suffix sets the
    codec. The rows keep the DataFrame's order (an ``ORDER BY``, as ``--key`` adds): Spark
    writes a sorted result as part files in that order.
    """
    target = spark_target(out.path)
    files = _hadoop(engine.spark)
    check_spark_target(out, replace)
    exists = files.exists(target) if files is not None else os.path.lexists(target)
    if exists and not replace:
        raise SqlnbError(f"output {out.path!r} already exists; pass --replace to overwrite it")
    writer = df.write.format(out.format)
    if out.format == "csv":
        writer = writer.option("header", True)
        if out.options.get("delimiter"):
            writer = writer.option("sep", out.options["delimiter"])
    codec = next((c for s, c in _CODECS.items() if out.path.lower().endswith(s)), None)
    if codec:
        writer = writer.option("compression", codec)
    if files is None:  # Spark Connect: Spark's commit protocol is the only guard
        writer.mode("overwrite" if replace else "error").save(target)
        return
    parent, base = target.rstrip("/").rsplit("/", 1)
    if not _has_scheme(out.path):
        remove_stale_temporaries(parent)  # those of sqlnb processes on this host that were killed
    tmp = f"{parent}/{temporary_name(base)}"
    try:
        writer.mode("error").save(tmp)
        if exists:
            files.delete(target)
        files.rename(tmp, target)
    except BaseException:
        files.delete(tmp)
        raise


# -- rows to a local target, one partition at a time ---------------------------------------------

def arrow_stream(df) -> pa.RecordBatchReader:
    """A Spark DataFrame's rows as Arrow record batches, fetched one partition at a time
    (``toLocalIterator``), so the driver never holds more than a partition."""
    from pyspark.sql.pandas.types import to_arrow_schema

    schema = to_arrow_schema(df.schema)
    names = schema.names

    def batches() -> Iterator[pa.RecordBatch]:
        chunk: list = []
        for row in df.toLocalIterator():
            chunk.append(tuple(row))
            if len(chunk) == BATCH_ROWS:
                yield _batch(chunk, names, schema)
                chunk = []
        if chunk:
            yield _batch(chunk, names, schema)

    return pa.RecordBatchReader.from_batches(schema, batches())


def _batch(rows: list, names: list, schema: pa.Schema) -> pa.RecordBatch:
    columns = list(zip(*rows))
    return pa.RecordBatch.from_arrays([pa.array(c, type=schema.field(i).type) for i, c in enumerate(columns)],
                                      names=names)


def rows_query(result, con: duckdb.DuckDBPyConnection) -> sqlglot.exp.Select:
    """``SELECT * FROM`` an engine's result registered on the local connection ``con``:
    a Spark DataFrame streams (:func:`arrow_stream`); other engines give an Arrow table."""
    rows = arrow_stream(result) if type(result).__module__.startswith("pyspark") else result
    con.register("sqlnb_rows", rows)
    return sqlglot.exp.select(sqlglot.exp.Star()).from_(sql.table("sqlnb_rows"))
