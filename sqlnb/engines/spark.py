"""Spark SQL through a pyspark ``SparkSession``: local mode, a cluster's master, or a
Spark Connect server (``sc://host:port``, how managed Spark services are reached)."""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import uuid
import warnings
from contextlib import contextmanager
from typing import Iterator

from sqlnb import sql
from sqlnb.engines.base import ColumnsFromResolve, duckdb_type, probe, source_node
from sqlnb.engines.waiting import hold_directory
from sqlnb.errors import SqlnbError, SqlnbNotFound
from sqlnb.source import Files, Source, Table, file_format, guess


#: ``spark.sql.codegen.hugeMethodLimit`` on the sessions sqlnb starts: HotSpot's
#: ``-XX:HugeMethodLimit`` (8,000 bytecodes), above which the JVM does not JIT a method.
HUGE_METHOD_LIMIT = 8000


class SparkEngine(ColumnsFromResolve):
    """Spark SQL through a pyspark ``SparkSession`` (local mode or a cluster).

    Training runs two aggregation queries in Spark and collects only their results
    (a few rows per class); scoring returns a lazy ``DataFrame``. Data can be a table or
    view name, a Spark SQL query, Parquet, CSV or JSON-lines files (path, glob or
    directory, read by ``spark.read``), a Spark ``DataFrame`` or a pyarrow table (files,
    DataFrames and tables are registered as temporary views). Storage: see :mod:`sqlnb.store.spark`.
    """

    dialect = "spark"

    def __init__(self, session, owned: bool = False, warehouse: str | None = None):
        self.spark = session
        self._owned = owned  # started by :meth:`start`: stopped by :meth:`close`
        self._warehouse_lock: int | None = None  # the flock on a warehouse directory (start)
        #: The local warehouse directory of a session :meth:`start` started (its models
        #: are files there, :mod:`sqlnb.store.spark`); None for any other session.
        self.warehouse = warehouse
        #: Whether the warehouse's table catalog (Hive over Derby) is still to be opened:
        #: only when a command names a table (:meth:`open_catalog`).
        self._catalog_closed = False
        #: Input views this engine registered, and how to make each again in another
        #: session (:meth:`open_catalog` moves them into the catalog's session).
        self._views: dict = {}

    @property
    def connect(self) -> bool:
        """Whether the session is a Spark Connect client (its driver and catalog live in
        the server, not in this process)."""
        return type(self.spark).__module__.startswith("pyspark.sql.connect")

    def close(self) -> None:
        """Stop the session if this engine started it (so that a persistent metastore is
        shut down cleanly); a session given by the caller is left running. A Spark Connect
        session is released on its server, which goes on serving its other clients."""
        if self._owned:
            self._owned = False
            self.spark.stop()
        if self._warehouse_lock is not None:  # after stop: the metastore is shut down
            os.close(self._warehouse_lock)
            self._warehouse_lock = None

    @classmethod
    def start(cls, master: str | None = None, warehouse: str | None = None, quiet: bool = False,
              remote: str | None = None) -> "SparkEngine":
        """An engine on a new ``SparkSession`` (for :func:`sqlnb.engines.connect`), stopped
        by :meth:`close`; a session already running in this process is used as is.

        Parameters
        ----------
        master : str, optional
            Spark master URL, as ``spark-submit --master`` takes it: ``local``, ``local[N]``,
            ``local[*]``, ``spark://host:7077``, ``yarn`` or ``k8s://https://host:443``;
            default: the session's own configuration.
        warehouse : str, optional
            A local directory where saved models and tables outlive the process. Models are
            Parquet files there (``sqlnb.db``, :mod:`sqlnb.store.spark`), read and written
            without Spark's table catalog; tables (``spark.sql.warehouse.dir``) are kept
            by an embedded Derby metastore (``metastore_db``, with its ``derby.log``),
            which is opened only when a command names a table (:meth:`open_catalog`:
            Hive's start costs seconds). One process at a time uses the directory (a lock
            on it, waited for). Default: Spark's own configuration (for a local session, a
            catalog in memory).
        quiet : bool
            Send everything the Java process prints (log4j lines, stage progress bars, JVM
            warnings) to the null device, and silence pyspark's own error loggers;
            otherwise it goes to stderr (never to stdout, which carries the payload).
        remote : str, optional
            A Spark Connect server, ``sc://host:port`` (with ``/;token=...;use_ssl=true``
            and the other parameters of the Spark Connect URL), instead of a JVM in this
            process; default: ``SPARK_REMOTE`` when it holds such a URL and no ``master``
            is given. Needs pyspark's Connect client (``pip install 'sqlnb[spark-connect]'``).
            The server keeps the catalog, so ``warehouse`` does not apply, and it reads
            and writes paths on its own machines. :meth:`close` releases this client's
            session only.
        """
        env_remote = os.environ.get("SPARK_REMOTE", "")
        if remote is None and not master and env_remote.startswith("sc://"):
            remote = env_remote
        if remote is not None:
            if master:
                raise SqlnbError("give Spark a master URL or a Spark Connect URL (remote), not both")
            if warehouse is not None:
                raise SqlnbError("a Spark Connect server keeps its own catalog; the warehouse directory is for "
                                 "a session started here (leave it out with a remote)")
            session = _connect_session(remote)
            if quiet:
                _quiet_python_loggers()
            return cls(session, owned=True)
        try:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession
        except ImportError:
            raise SqlnbError("Spark needs pyspark: pip install 'pyspark>=4.1,<5'") from None
        running = SparkContext._active_spark_context is not None
        builder = SparkSession.builder.appName("sqlnb")
        if master:
            if not running:
                check_master(master)
            builder = builder.master(master)
        if quiet:
            builder = builder.config("spark.ui.showConsoleProgress", "false")
        # A second line behind the scoring SQL's shape (sqlnb.models.finish: every generated
        # method stays under HotSpot's 8,000-bytecode JIT limit, tests/test_spark_codegen.py):
        # should a plan still produce a bigger method, Spark falls back to its non-fused
        # code for that stage instead of running the method interpreted. Only sessions
        # sqlnb starts: getOrCreate would apply it to a session already running here too.
        if not running:
            builder = builder.config("spark.sql.codegen.hugeMethodLimit", str(HUGE_METHOD_LIMIT))
        lock = path = None
        if warehouse is not None:
            settings = catalog_settings(warehouse)
            path = settings["spark.sql.warehouse.dir"]
            # The metastore's settings now, so that the catalog can open later on this
            # session's context (open_catalog); Hive itself is not enabled here.
            for key, value in settings.items():
                builder = builder.config(key, value)
            if not running:
                # The embedded Derby metastore admits one process at a time, for the whole
                # session, and a second one fails at once; the model files' read-modify-
                # writes count on one writer too: processes queue here instead, each for
                # at most --wait seconds (docs/concurrency.md).
                lock = hold_directory(path, "the Spark warehouse directory")
        try:
            with _java_output(quiet and not running):
                session = builder.getOrCreate()
        except Exception as e:  # pyspark's JAVA_GATEWAY_EXITED: no Java, a bad option, a port in use
            if lock is not None:
                os.close(lock)
            hint = " (run with -v to see Spark's own messages)" if quiet else ""
            raise SqlnbError(f"Spark did not start: {_start_failure(e, master)}{hint}") from None
        if quiet:
            _quiet_python_loggers()
        engine = cls(session, owned=not running, warehouse=path)
        engine._warehouse_lock = lock
        # A session started here can open the warehouse's table catalog later; one that
        # was running keeps the catalog it has.
        engine._catalog_closed = path is not None and not running
        return engine

    def open_catalog(self) -> bool:
        """Open the warehouse's table catalog (Hive over its Derby metastore) for a command
        that names a table; whether it was opened now.

        A session :meth:`start` starts on a warehouse directory has Spark's in-memory
        catalog: models are files (:mod:`sqlnb.store.spark`), and starting Hive costs
        seconds (measured: benchmarks/README.md, "Spark start-up"). When a command reads
        or writes a table by name, this starts a Hive-backed session on the same Spark
        context (a catalog is fixed when a session is made) and moves this engine, and the
        input views it registered, over to it.
        """
        if not self._catalog_closed:
            return False
        self._catalog_closed = False
        from pyspark.sql import SparkSession

        sc = self.spark.sparkContext
        options = sc._jvm.java.util.HashMap()
        options.put("spark.sql.catalogImplementation", "hive")
        jsession = sc._jvm.org.apache.spark.sql.classic.SparkSession(sc._jsc.sc(), options)
        hive = SparkSession(sc, jsparkSession=jsession)
        for view, make in self._views.items():
            make(hive).createOrReplaceTempView(view)
        self.spark = hive
        return True

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
        described, make = "the DataFrame", None
        if isinstance(data, Files):
            files = data
            make = lambda spark: self._read_files(files, spark)  # noqa: E731
            data, described = make(self.spark), f"files {data.path!r}"
        if type(data).__module__.startswith(("pyarrow", "pandas")):
            rows = data
            make = lambda spark: spark.createDataFrame(rows)  # noqa: E731
            data = make(self.spark)
        schema = None
        if type(data).__module__.startswith("pyspark"):  # a DataFrame
            view = f"sqlnb_input_{uuid.uuid4().hex[:12]}"
            schema = data.schema  # already analysed: no probe query to parse (0.1-0.2 s cold)
            data.createOrReplaceTempView(view)
            if make is not None:  # a caller's DataFrame lives in the caller's session
                self._views[view] = make
            data = Table(view)
            found = (sql.table(view), described)
        else:
            found = source_node(data, self.dialect)
        if found is None:
            raise SqlnbError(f"Spark reads tables, views, queries, files and DataFrames, not a "
                             f"{type(data).__name__}")
        node, desc = found
        if schema is None:
            schema = self._schema(node, desc)
        columns = {f.name: duckdb_type(f.dataType.simpleString(), self.dialect) for f in schema.fields}
        return Source(expr=node, columns=columns, description=desc, engine="spark")

    def _schema(self, node, desc: str):
        """The schema of ``node``, analysed, not run. A table not found opens the
        warehouse's catalog (:meth:`open_catalog`) and is looked for again there."""
        try:
            return self.spark.sql(sql.render(probe(node), self.dialect)).schema
        except Exception as e:  # pyspark's AnalysisException and friends
            text = str(e).splitlines()[0]
            if "TABLE_OR_VIEW_NOT_FOUND" in text and self.open_catalog():
                return self._schema(node, desc)
            if "TABLE_OR_VIEW_NOT_FOUND" in text:
                raise SqlnbNotFound(f"{desc} not found in the Spark catalog") from None
            raise SqlnbError(f"cannot read {desc}: {text}") from None

    #: DuckDB reader options (what the CLI's CSV options set) and their Spark names.
    _CSV_OPTIONS = {"delim": "sep", "sep": "sep", "header": "header", "nullstr": "nullValue"}

    def _read_files(self, files: Files, spark):
        """Parquet, CSV or JSON-lines files (path, glob or Parquet directory) read by Spark
        itself (in session ``spark``), so they never pass through the driver. CSV has a
        header row by default and its column types are inferred, as DuckDB does."""
        fmt = files.format or file_format(files.path)
        reader = spark.read
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


#: What ``spark-submit`` takes as a master: ``yarn`` or a URL starting with one of these
#: (SparkSubmit refuses anything else before the JVM is up, and its message then goes
#: wherever the Java process's stderr goes: nowhere, for a quiet session).
_MASTER_STARTS = ("local", "spark", "k8s")


def check_master(master: str) -> None:
    """Refuse, before a Java process starts, a master URL that ``spark-submit`` refuses."""
    if master == "yarn" or master.startswith(_MASTER_STARTS):
        return
    hint = ("; a Spark Connect URL (sc://) is a remote, not a master (remote=, --remote)"
            if master.startswith("sc://") else "")
    raise SqlnbError(f"{master!r} is not a Spark master URL: use local[*], local[N], spark://HOST:7077, yarn "
                     f"or k8s://https://HOST:PORT{hint}")


def _start_failure(e: BaseException, master: str | None) -> str:
    """One line for a session that did not start: the Java exception's message when
    there is one (a raw Py4JJavaError starts with "An error occurred while calling ..."
    and names it on its second line, after ':')."""
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    java = [line[1:].strip() for line in lines if line.startswith(":")]
    text = (java or lines or [type(e).__name__])[0]
    text = re.sub(r"^(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): ", "", text)  # the Java class
    if "stopped SparkContext" in text and master:
        # Spark's own reason ("All masters are unresponsive! Giving up.") is only logged.
        text = f"the Spark context stopped while starting; is a master running at {master}?"
    return text


#: How long to wait for a Spark Connect server to accept the connection, in seconds. A
#: refused or failed connection is reported at once; this bounds a silent one (a
#: firewall that drops packets), where pyspark's own retries would go on for minutes.
CONNECT_TIMEOUT = 30.0


def _connect_session(url: str):
    """A new Spark Connect session on ``url``, after checking that a server answers."""
    try:
        with warnings.catch_warnings():
            # pyspark warns on import that it does not fully support pandas 3, on stderr.
            warnings.simplefilter("ignore", FutureWarning)
            import grpc  # noqa: F401  the first package of the client to be missing, if one is
            from pyspark.sql.connect.client import DefaultChannelBuilder
            from pyspark.sql.connect.session import SparkSession as ConnectSession
    except ImportError as e:  # pyspark's PySparkImportError names the missing package
        missing = re.sub(r"^\[[A-Z_]+\] ", "", str(e).strip().splitlines()[0]) if str(e).strip() else type(e).__name__
        raise SqlnbError(f"Spark Connect needs pyspark's Connect client: pip install 'sqlnb[spark-connect]' "
                         f"({missing})") from None
    shown = url.split(";", 1)[0]  # the parameters may hold a token
    try:
        channel = DefaultChannelBuilder(url)
    except ValueError as e:  # PySparkValueError INVALID_CONNECT_URL, with the reason in "detail"
        detail = getattr(e, "getMessageParameters", lambda: None)() or {}
        raise SqlnbError(f"{shown!r} is not a Spark Connect URL: {detail.get('detail', e)}") from None
    _wait_until_reachable(channel, shown)
    session = ConnectSession.builder.remote(url).create()
    try:
        session.version  # one call: the server speaks Spark Connect and takes this client
    except Exception as e:
        session.stop()
        text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise SqlnbError(f"the server at {shown} did not answer as Spark Connect: {text}") from None
    return session


def _wait_until_reachable(builder, shown: str) -> None:
    """Open a channel to the server (with the URL's TLS and token settings) and wait until
    it connects or fails, for :data:`CONNECT_TIMEOUT` seconds at most."""
    import grpc  # importable: checked with the Connect client in _connect_session

    channel = builder.toChannel()
    settled = threading.Event()
    outcome = []  # the first state that settles it (gRPC calls back from its own thread)

    def watch(state) -> None:
        if state in (grpc.ChannelConnectivity.READY, grpc.ChannelConnectivity.TRANSIENT_FAILURE,
                     grpc.ChannelConnectivity.SHUTDOWN) and not settled.is_set():
            outcome.append(state)
            settled.set()

    channel.subscribe(watch, try_to_connect=True)
    try:
        answered = settled.wait(CONNECT_TIMEOUT)
    finally:
        channel.unsubscribe(watch)
        channel.close()
    if not answered:
        raise SqlnbError(f"no Spark Connect server answered at {shown} within {CONNECT_TIMEOUT:.0f} s; "
                         "check the host and port")
    if outcome[0] is not grpc.ChannelConnectivity.READY:
        raise SqlnbError(f"cannot connect to a Spark Connect server at {shown}; check the host and port, "
                         "and that the server is running")


def catalog_settings(warehouse: str) -> dict:
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
