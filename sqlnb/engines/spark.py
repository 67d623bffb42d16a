"""Spark SQL through a pyspark ``SparkSession`` (local mode or a cluster)."""

from __future__ import annotations

import logging
import os
import sys
import uuid
from contextlib import contextmanager
from typing import Iterator

from sqlnb import sql
from sqlnb.engines.base import ColumnsFromResolve, duckdb_type, probe, source_node
from sqlnb.errors import SqlnbError, SqlnbNotFound
from sqlnb.source import Files, Source, Table, file_format, guess


class SparkEngine(ColumnsFromResolve):
    """Spark SQL through a pyspark ``SparkSession`` (local mode or a cluster).

    Training runs two aggregation queries in Spark and collects only their results
    (a few rows per class); scoring returns a lazy ``DataFrame``. Data can be a table or
    view name, a Spark SQL query, Parquet, CSV or JSON-lines files (path, glob or
    directory, read by ``spark.read``), a Spark ``DataFrame`` or a pyarrow table (files,
    DataFrames and tables are registered as temporary views). Storage: see :mod:`sqlnb.store.spark`.
    """

    dialect = "spark"

    def __init__(self, session, owned: bool = False):
        self.spark = session
        self._owned = owned  # started by :meth:`start`: stopped by :meth:`close`

    def close(self) -> None:
        """Stop the session if this engine started it (so that a persistent metastore is
        shut down cleanly); a session given by the caller is left running."""
        if self._owned:
            self._owned = False
            self.spark.stop()

    @classmethod
    def start(cls, master: str | None = None, warehouse: str | None = None, quiet: bool = False) -> "SparkEngine":
        """An engine on a new ``SparkSession`` (for :func:`sqlnb.engines.connect`), stopped
        by :meth:`close`; a session already running in this process is used as is.

        Parameters
        ----------
        master : str, optional
            Spark master URL; default: the session's own configuration.
        warehouse : str, optional
            A directory holding a persistent catalog: the tables (``spark.sql.warehouse.dir``)
            and an embedded Derby metastore (``metastore_db``, with its ``derby.log``), so
            that tables and saved models outlive the process. Derby admits one process at
            a time. Default: Spark's own configuration (for a local session, a catalog in
            memory).
        quiet : bool
            Send everything the Java process prints (log4j lines, stage progress bars, JVM
            warnings) to the null device, and silence pyspark's own error loggers;
            otherwise it goes to stderr (never to stdout, which carries the payload).
        """
        try:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession
        except ImportError:
            raise SqlnbError("Spark needs pyspark: pip install 'pyspark>=4.1,<5'") from None
        running = SparkContext._active_spark_context is not None
        builder = SparkSession.builder.appName("sqlnb")
        if master:
            builder = builder.master(master)
        if quiet:
            builder = builder.config("spark.ui.showConsoleProgress", "false")
        if warehouse is not None:
            for key, value in _catalog_settings(warehouse).items():
                builder = builder.config(key, value)
            builder = builder.enableHiveSupport()
        try:
            with _java_output(quiet and not running):
                session = builder.getOrCreate()
        except Exception as e:  # pyspark's JAVA_GATEWAY_EXITED: no Java, a bad option, a port in use
            hint = " (run with -v to see Spark's own messages)" if quiet else ""
            raise SqlnbError(f"Spark did not start: {str(e).strip().splitlines()[0]}{hint}") from None
        if quiet:
            _quiet_python_loggers()
        return cls(session, owned=not running)

    def execute(self, tree, params=None):
        df = self.spark.sql(sql.render(tree, self.dialect), args=list(params) if params is not None else None)
        return [tuple(r) for r in df.collect()]

    def relation(self, tree):
        """The query as a lazy Spark ``DataFrame``."""
        return self.spark.sql(sql.render(tree, self.dialect))

    def resolve(self, data) -> Source:
        data = guess(data)
        if isinstance(data, Source):
            return data
        described = "the DataFrame"
        if isinstance(data, Files):
            data, described = self._read_files(data), f"files {data.path!r}"
        if type(data).__module__.startswith(("pyarrow", "pandas")):
            data = self.spark.createDataFrame(data)
        if type(data).__module__.startswith("pyspark"):  # a DataFrame
            view = f"sqlnb_input_{uuid.uuid4().hex[:12]}"
            data.createOrReplaceTempView(view)
            data = Table(view)
            found = (sql.table(view), described)
        else:
            found = source_node(data, self.dialect)
        if found is None:
            raise SqlnbError(f"Spark reads tables, views, queries, files and DataFrames, not a "
                             f"{type(data).__name__}")
        node, desc = found
        try:
            schema = self.spark.sql(sql.render(probe(node), self.dialect)).schema  # analysed, not run
        except Exception as e:  # pyspark's AnalysisException and friends
            text = str(e).splitlines()[0]
            if "TABLE_OR_VIEW_NOT_FOUND" in text:
                raise SqlnbNotFound(f"{desc} not found in the Spark catalog") from None
            raise SqlnbError(f"cannot read {desc}: {text}") from None
        columns = {f.name: duckdb_type(f.dataType.simpleString(), self.dialect) for f in schema.fields}
        return Source(expr=node, columns=columns, description=desc)

    #: DuckDB reader options (what the CLI's CSV options set) and their Spark names.
    _CSV_OPTIONS = {"delim": "sep", "sep": "sep", "header": "header", "nullstr": "nullValue"}

    def _read_files(self, files: Files):
        """Parquet, CSV or JSON-lines files (path, glob or Parquet directory) read by Spark
        itself, so they never pass through the driver. CSV has a header row by default and
        its column types are inferred, as DuckDB does."""
        fmt = files.format or file_format(files.path)
        reader = self.spark.read
        if fmt == "csv":
            opts = {"header": True, "inferSchema": True}
            for key, value in files.options.items():
                if key not in self._CSV_OPTIONS:
                    raise SqlnbError(f"Spark's CSV reader has no option {key!r} here; "
                                     f"use one of: {', '.join(sorted(self._CSV_OPTIONS))}")
                if key == "nullstr" and isinstance(value, (list, tuple)):
                    if len(value) != 1:
                        raise SqlnbError("Spark's CSV reader takes one NULL string, not several")
                    value = value[0]
                opts[self._CSV_OPTIONS[key]] = value
            reader = reader.options(**opts)
        elif files.options:
            raise SqlnbError(f"reader options are for CSV files; {files.path!r} is {fmt}")
        try:
            return {"parquet": reader.parquet, "csv": reader.csv, "json": reader.json}[fmt](files.path)
        except Exception as e:  # pyspark's AnalysisException: PATH_NOT_FOUND and friends
            text = str(e).splitlines()[0]
            if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
                raise SqlnbNotFound(f"no file matches {files.path!r}; check the path or glob") from None
            raise SqlnbError(f"Spark cannot read {files.path!r}: {text}") from None


def _catalog_settings(warehouse: str) -> dict:
    """Spark settings for a persistent catalog in directory ``warehouse``."""
    path = os.path.abspath(warehouse)
    if ";" in path or '"' in path:
        # ';' separates a Derby URL's attributes; '"' would need quoting in Java options.
        raise SqlnbError(f"the Spark warehouse directory {path!r} may not contain ';' or '\"'; choose another")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise SqlnbError(f"cannot create the Spark warehouse directory {path!r}: {e.strerror}") from None
    return {
        "spark.sql.warehouse.dir": path,
        "spark.hadoop.javax.jdo.option.ConnectionURL":
            f"jdbc:derby:;databaseName={os.path.join(path, 'metastore_db')};create=true",
        # Derby writes derby.log into its home directory (else into the working directory).
        "spark.driver.extraJavaOptions": f'"-Dderby.system.home={path}"',
    }


@contextmanager
def _java_output(quiet: bool) -> Iterator[None]:
    """Point file descriptors 1 and 2 where the Java process, started inside, is to write:
    nowhere when ``quiet``, else stderr. The JVM inherits them when pyspark starts it and
    keeps them for its lifetime; Python's own are restored on the way out."""
    for stream in (sys.stdout, sys.stderr):  # what Python printed before goes where it was meant
        stream.flush()
    target = os.open(os.devnull, os.O_WRONLY) if quiet else os.dup(2)
    saved = [os.dup(1), os.dup(2)]
    try:
        os.dup2(target, 1)
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, target):
            os.close(fd)


def _quiet_python_loggers() -> None:
    """pyspark 4 logs every SQL error that carries a query context as a JSON dump on
    stderr, through these two loggers (an error reaches the user as one line anyway)."""
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pyspark < 4
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)
