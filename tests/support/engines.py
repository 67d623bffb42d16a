"""What engine tests share: starting an engine (and what to do when one cannot start),
comparing results, running the CLI as a process."""

from __future__ import annotations

import contextlib
import math
import os
import subprocess
import sys
from typing import Any, Iterator, Mapping

import pytest

from support.ci import in_ci
from support.postgres import PostgresNotFound
from support.spark import SparkNotAvailable, _require_java

#: What "not available" means for an engine test: its Python package is not installed
#: (ImportError), the PostgreSQL server binaries are not found, pyspark or Java is missing.
#: Anything else raised while a server or session starts (initdb failing, a JVM that dies, a
#: bug in these helpers) is an error of the test, never a skip.
NOT_AVAILABLE = (ImportError, PostgresNotFound, SparkNotAvailable)

#: The test being set up or run (set by tests/conftest.py). An engine started for a test
#: that lacks the engine's marker fails it (:func:`require_marker`): the markers are how
#: ``-m "not slow"`` and ``-m "not postgres"`` leave out every test that starts a server.
CURRENT_TEST = None


def require_marker(marker: str, what: str) -> None:
    """Fail the current test unless it carries ``pytest.mark.<marker>`` (``what``: the engine
    it just started, for the message). No-op outside a test."""
    item = CURRENT_TEST
    if item is not None and item.get_closest_marker(marker) is None:
        pytest.fail(f"{item.nodeid} starts {what} but is not marked: add @pytest.mark.{marker} "
                    f"(tests/conftest.py then marks it slow)", pytrace=False)


def unavailable(what: str, err: BaseException):
    """Skip the test, saying why (``what`` is not available: ``err``); fail it in CI
    (:func:`support.ci.in_ci`; tests/conftest.py fails any other skip there too)."""
    msg = f"{what} is not available: {err}"
    if in_ci():
        pytest.fail(f"{msg} (in CI engine tests must run, not skip)", pytrace=False)
    pytest.skip(msg)


def start_postgres(tcp: bool = False):
    """Enter :func:`support.postgres.postgres_server`: ``(cm, dsn)``, the caller leaves
    ``cm``. Skipped (failed in CI) only when the server binaries are missing."""
    from support.postgres import postgres_server
    cm = postgres_server(tcp=tcp)
    try:
        dsn = cm.__enter__()
    except NOT_AVAILABLE as e:
        unavailable("PostgreSQL", e)
    try:
        require_marker("postgres", "a PostgreSQL server")
    except BaseException:
        cm.__exit__(None, None, None)
        raise
    return cm, dsn


def require_pyspark() -> None:
    """Skip (fail in CI) unless pyspark is importable and a Java runtime is found."""
    try:
        import pyspark  # noqa: F401
        _require_java()
    except NOT_AVAILABLE as e:
        unavailable("Spark", e)


@contextlib.contextmanager
def postgres_engine(tables: Mapping[str, Any]) -> Iterator[Any]:
    """A :class:`~sqlnb.engines.PostgresEngine` on a throw-away server holding ``tables``
    (name -> Arrow table), with its DSN as ``engine.dsn``; skipped (or failed in CI)
    when the server binaries or psycopg are missing."""
    from sqlnb.engines import PostgresEngine
    cm, dsn = start_postgres()
    try:
        try:
            engine = PostgresEngine(dsn)
        except ImportError as e:
            unavailable("psycopg", e)
        for name, table in tables.items():
            engine.write_table(name, table)
        engine.dsn = dsn
        yield engine
        engine.close()
    finally:
        cm.__exit__(None, None, None)


@contextlib.contextmanager
def spark_engine(tables: Mapping[str, Any]) -> Iterator[Any]:
    """A :class:`~sqlnb.engines.SparkEngine` on a local session (or the one this process
    already runs, started by another module in another thread: used, not stopped here; one
    SparkContext per process), with ``tables`` as temporary views. Skipped (failed in CI)
    when pyspark or Java is missing; a JVM that fails to start is an error."""
    from sqlnb.engines import SparkEngine
    try:
        from pyspark import SparkContext
        from pyspark.sql import SparkSession
    except ImportError as e:
        unavailable("Spark", e)
    if SparkContext._active_spark_context is None:
        from support.spark import spark_session
        cm = spark_session()
        try:
            session = cm.__enter__()
        except NOT_AVAILABLE as e:
            unavailable("Spark", e)
    else:
        cm, session = None, SparkSession.builder.getOrCreate()
    try:
        require_marker("spark", "a Spark session")
        for name, table in tables.items():
            session.createDataFrame(table).createOrReplaceTempView(name)
        yield SparkEngine(session)
    finally:
        if cm is not None:
            cm.__exit__(None, None, None)


def close_to(a: Any, b: Any, where: str, tol: float = 1e-9) -> None:
    """Assert that ``a`` equals ``b`` (nested dicts and lists), floats within ``tol``
    (NaN equal to NaN), anything else exactly and of the same type."""
    if isinstance(b, float):
        assert isinstance(a, float) and (abs(a - b) <= tol or (math.isnan(a) and math.isnan(b))), (where, a, b)
    elif isinstance(b, dict):
        assert isinstance(a, dict) and a.keys() == b.keys(), where
        for k in b:
            close_to(a[k], b[k], f"{where}.{k}", tol)
    elif isinstance(b, list):
        assert isinstance(a, list) and len(a) == len(b), (where, a, b)
        for i, (x, y) in enumerate(zip(a, b)):
            close_to(x, y, f"{where}[{i}]", tol)
    else:
        assert a == b and type(a) is type(b), (where, a, b)


#: For the test JVMs of CLI processes: C1-only JIT and serial GC (a short session starts
#: faster), two shuffle partitions, no web UI.
SPARK_SUBMIT = ('--conf "spark.driver.defaultJavaOptions=-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" '
                "--conf spark.sql.shuffle.partitions=2 --conf spark.ui.enabled=false")
SPARK_ENV = {"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT + " pyspark-shell", "SPARK_LOCAL_IP": "127.0.0.1"}


def run_sqlnb(args, env=None, cwd=None) -> subprocess.CompletedProcess:
    """``python -m sqlnb ARGS`` as a separate process, without the engine settings of the
    calling environment (``env`` adds some)."""
    full = {k: v for k, v in os.environ.items() if k not in ("SQLNB_WAREHOUSE", "SQLNB_MASTER", "SPARK_REMOTE")}
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "sqlnb", *map(str, args)], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=600)
