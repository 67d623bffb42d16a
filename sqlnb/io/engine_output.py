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
  an existing table is dropped just before the rename, and only with ``--replace``.
  On PostgreSQL the table is created in one transaction;
* **local targets** (standard output, a DuckDB table) stream the rows one partition at
  a time as Arrow record batches (``toLocalIterator``): the driver holds at most one
  partition, and nothing is collected as one result.
"""

from __future__ import annotations

import os
import uuid
from typing import Iterator

import duckdb
import pyarrow as pa
import sqlglot

from sqlnb import sql
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
    multi-statement transactions: the table is created under a temporary name, then the
    old one (with ``replace``) is dropped and the new one renamed, so a failed query
    leaves the old table as it was.
    """
    if table_exists(engine, name) and not replace:
        raise SqlnbError(f"table {name!r} already exists on the engine; pass --replace to overwrite it")
    drop = sqlglot.exp.Drop(tables=[sql.table(name)], kind="TABLE", exists=True)
    if engine.dialect == "postgres":
        with engine.con.transaction():
            engine.execute(drop)
            engine.execute(sqlglot.exp.Create(this=sql.table(name), kind="TABLE", expression=query))
        return
    tmp = f"sqlnb_tmp_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    engine.execute(sqlglot.exp.Create(this=sql.table(tmp), kind="TABLE", expression=query))
    try:
        engine.execute(drop)
        engine.execute(sqlglot.exp.Alter(this=sql.table(tmp), kind="TABLE",
                                         actions=[sqlglot.exp.AlterRename(this=sql.table(name))]))
    except BaseException:
        engine.execute(sqlglot.exp.Drop(tables=[sql.table(tmp)], kind="TABLE", exists=True))
        raise


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
