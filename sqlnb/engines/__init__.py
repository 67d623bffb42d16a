"""Engines: where the training aggregations and the scoring query run.

DuckDB is the default. :class:`PostgresEngine` (a PostgreSQL server through psycopg 3)
and :class:`SparkEngine` (Spark SQL through a pyspark ``SparkSession``, local or on a
cluster) run the very same sqlglot trees, rendered for their dialect by
:func:`sqlnb.sql.render`, and hold saved models as tables::

    model = sqlnb.fit("train", "y", con=PostgresEngine("host=db dbname=lake"))
    model.save(engine, "churn")                 # tables in schema sqlnb, one transaction
    sqlnb.load(engine, "churn").score("new_rows", con=engine)

Every engine provides the small :class:`Engine` protocol: ``dialect``, ``execute(tree)``
-> rows, ``resolve(data)`` -> :class:`~sqlnb.source.Source` (column types normalised to
DuckDB spellings so families and literals read them one way), ``relation(tree)`` (the
engine's own lazy or materialised result) and ``columns(data)``.

Training reads the data only inside the engine: the statistics query and the
categorical GROUPING SETS query return a few rows per class, and those are all that
reach Python. Scoring on Spark returns a lazy ``DataFrame``; on PostgreSQL the result is
fetched into a ``pyarrow.Table`` (use :meth:`Model.scoring_query` with
``sqlnb.sql.render(tree, "postgres")`` inside ``CREATE TABLE ... AS`` to keep it on the server).

Models are stored by :mod:`sqlnb.store`, on top of these engines.
"""

from __future__ import annotations

import sys
from typing import Any

# Not ``import duckdb``: importing the submodule ``duckdb`` of this package binds that
# name here, so the library goes by another one.
import duckdb as duckdb_lib

from sqlnb.engines.base import Engine, duckdb_type
from sqlnb.engines.duckdb import DuckDBEngine, new_connection
from sqlnb.engines.postgres import PostgresEngine
from sqlnb.engines.spark import SparkEngine
from sqlnb.errors import SqlnbError, suggest
from sqlnb.source import relation_connection

__all__ = ["Engine", "DuckDBEngine", "PostgresEngine", "SparkEngine", "ENGINES", "as_engine", "connect",
           "duckdb_type", "engine_error", "engine_error_types"]


def as_engine(con: Any = None, data: Any = None) -> Engine:
    """The engine for ``con``: an :class:`Engine` as is; a DuckDB connection (or None, a
    new in-memory DuckDB); a psycopg connection; a pyspark ``SparkSession``.

    Without ``con``, a DuckDB relation given as ``data`` is read on its own connection
    (``con.table("t")`` names a table only that connection can see)."""
    if con is None:
        own = relation_connection(data)
        return DuckDBEngine(own if own is not None else new_connection())
    if isinstance(con, duckdb_lib.DuckDBPyConnection):
        return DuckDBEngine(con)
    if isinstance(con, Engine):
        return con
    module = type(con).__module__
    if module.startswith("psycopg"):
        return PostgresEngine(con)
    if module.startswith("pyspark"):
        return SparkEngine(con)
    raise SqlnbError(f"cannot run SQL on a {type(con).__name__}; give a DuckDB connection, "
                     "a PostgresEngine or a SparkEngine")


#: Engine names for :func:`connect` (and the CLI's ``--engine``).
ENGINES = ("duckdb", "postgres", "spark")


def connect(engine: str = "duckdb", *, dsn: str | None = None, master: str | None = None,
            database: str | None = None, warehouse: str | None = None, quiet: bool = False,
            remote: str | None = None) -> Engine:
    """An engine by name, for command lines and configuration files.

    Parameters
    ----------
    engine : {"duckdb", "postgres", "spark"}
    dsn : str, optional
        PostgreSQL connection string (required for ``postgres``).
    master : str, optional
        Spark master URL (``local[*]``, ``spark://host:7077``, ``yarn``, ``k8s://...``);
        default: the session's own configuration (``spark-submit``, ``SPARK_REMOTE``, or local).
    database : str, optional
        DuckDB database file (default: in memory).
    warehouse : str, optional
        Spark only: a local directory where saved models (Parquet files) and tables (a
        Derby metastore, started only when a table is named) outlive the session;
        default: the session's configuration (a local session's catalog is in memory).
        See :meth:`SparkEngine.start`.
    quiet : bool
        Spark only: keep the Java process's log and progress bars off stderr.
    remote : str, optional
        Spark only: a Spark Connect server, ``sc://host:port`` (managed Spark services
        are reached this way), instead of a Java process here; needs pyspark's Connect
        client (``pip install 'sqlnb[spark-connect]'``). Not with ``master`` or ``warehouse``.

    Examples
    --------
    >>> connect("postgres", dsn="host=db dbname=lake")        # doctest: +SKIP
    >>> connect("spark", master="local[4]")                     # doctest: +SKIP
    >>> connect("spark", warehouse="spark-warehouse")           # doctest: +SKIP
    >>> connect("spark", remote="sc://spark.example.com:15002")   # doctest: +SKIP
    """
    if engine == "duckdb":
        return DuckDBEngine(new_connection(database or ":memory:"))
    if engine == "postgres":
        if not dsn:
            raise SqlnbError("--engine postgres needs --dsn (e.g. --dsn 'host=db dbname=lake user=me')")
        try:
            return PostgresEngine(dsn)
        except ImportError:
            raise SqlnbError("PostgreSQL needs psycopg 3: pip install 'psycopg[binary]'") from None
        except Exception as e:  # psycopg.OperationalError: server down, bad credentials
            raise SqlnbError(f"cannot connect to PostgreSQL: {str(e).strip().splitlines()[0]}") from None
    if engine == "spark":
        return SparkEngine.start(master, warehouse, quiet, remote)
    raise SqlnbError(f"unknown engine {engine!r}{suggest(engine, ENGINES)}; engines are: {', '.join(ENGINES)}")


#: The base exceptions of the engines' client libraries: (module, class name).
_ENGINE_ERRORS = (("pyspark.errors", "PySparkException"), ("py4j.protocol", "Py4JError"), ("psycopg", "Error"))


def engine_error_types() -> tuple[type, ...]:
    """The base exception classes of the client libraries loaded in this process (one
    that is not loaded raised nothing; importing it here would slow every command)."""
    return tuple(getattr(sys.modules[m], name) for m, name in _ENGINE_ERRORS if m in sys.modules)


def engine_error(e: BaseException) -> str | None:
    """One line for an error raised inside an engine's client library, or None.

    pyspark's own exceptions (``AnalysisException``, ``SparkRuntimeException``, ...) start
    with ``[ERROR_CLASS] message``; a raw ``Py4JJavaError`` starts with "An error occurred
    while calling o42.sql." and names the Java exception on its second line; psycopg's
    errors start with the server's message. Anything after the first line (a query plan,
    a Java stack) is left out.
    """
    module = type(e).__module__
    if module.startswith(("pyspark", "py4j")):
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        java = [line[1:].strip() for line in lines if line.startswith(":")]  # ": org.apache...Exception: ..."
        text = (java or lines or [type(e).__name__])[0]
        if module.startswith("py4j") and not java:  # Py4JNetworkError: the JVM is gone
            text = f"lost the connection to the Java process ({text})"
        if "SessionHiveMetaStoreClient" in text:  # all Spark says when Derby is locked
            text += ("; is another process using the same warehouse directory? Its Derby metastore "
                     "admits one at a time")
        return f"Spark: {text}"
    if module.startswith("psycopg"):
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        return f"PostgreSQL: {lines[0] if lines else type(e).__name__}"
    return None
