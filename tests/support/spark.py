"""A local Spark SQL session, and a local Spark Connect server, for tests.

:func:`connect_server` runs the Spark Connect server that pyspark ships (see there).
:func:`spark_session` starts a small local SparkSession (pyspark from PyPI,
``local[2]``, 1 GB driver, no web UI, no progress bar, logs at ERROR) whose
scratch and warehouse directories live in a temporary directory removed on
exit.  Starting takes roughly 5-15 s (the first query a few more), so use it
from a session-scoped pytest fixture: only one SparkContext can exist per
process, and a second ``getOrCreate`` would silently reuse the first one and
ignore static settings.

ANSI mode: pyspark 4.x defaults to ``spark.sql.ansi.enabled=true`` (3.x
defaulted to false).  We set it explicitly, to true by default, so behaviour
does not depend on the installed version: overflow, division by zero and
invalid casts raise errors, as in PostgreSQL.  Note that ``ln(0)`` and
``ln(-1)`` still return NULL in Spark in both modes (PostgreSQL raises, DuckDB
returns -inf / NULL).  ``spark.sql.ansi.enabled`` is a runtime setting, so a
test may flip it on ``session.newSession()`` without a new JVM.

Needs ``pip install pyspark`` and a Java runtime (17 or 21 for pyspark 4.x;
``bash .ci/install-engines.sh`` installs one if ``java`` is missing).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Iterator

__all__ = ["SparkNotAvailable", "connect_server", "spark_session"]

# Everything at ERROR.  The explicit org.apache logger matters: pyspark counts as
# a shell, and Spark then prints "Setting default log level to WARN" unless the
# logger of its entry class has its own configuration matching the root level.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
logger.apache.name = org.apache
logger.apache.level = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_python_loggers() -> None:
    """Stop pyspark 4 from logging every SQL error as a JSON dump on stderr.

    pyspark logs each exception that carries a query context through these
    two loggers (tests that expect errors would flood the output).  They must
    be created as PySparkLogger: a plain Logger rejects the extra keywords.
    """
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # pyspark < 4
        return
    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL)


class SparkNotAvailable(RuntimeError):
    """Raised when pyspark or a Java runtime is missing."""


def _require_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if not (java_home and os.access(Path(java_home, "bin", "java"), os.X_OK)) \
            and not shutil.which("java"):
        raise SparkNotAvailable(
            "no Java runtime found (need Java 17+): `bash .ci/install-engines.sh` or "
            "`sudo apt-get install -y default-jre-headless`, or set $JAVA_HOME"
        )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def connect_server(cores: int = 2, timeout: float = 240.0) -> Iterator[str]:
    """Run a local Spark Connect server (the one pyspark ships in its jars) for the
    duration of a ``with`` block, and yield its URL ``sc://127.0.0.1:PORT``.

    The server is ``spark-submit --class ...SparkConnectServer`` from the pyspark package
    (``SPARK_HOME`` pointed at it), ``local[cores]``, listening on loopback only at a free
    port, with its warehouse, scratch directory and log in a temporary directory removed
    on exit. Starting takes 10-30 s. The process group is terminated on exit.

    Raises
    ------
    SparkNotAvailable
        If pyspark, its Connect server class or a Java runtime is missing.
    RuntimeError
        If the server exits or does not listen within ``timeout`` seconds (the message
        ends with its log): an error of the test, not a reason to skip it.
    """
    try:
        import pyspark
    except ImportError as exc:
        raise SparkNotAvailable("pyspark is not installed: pip install 'pyspark[connect]>=4.1,<5'") from exc
    _require_java()
    home = Path(pyspark.__file__).parent
    if not list((home / "jars").glob("spark-connect_*.jar")):
        raise SparkNotAvailable(f"pyspark in {home} ships no Spark Connect server jar")
    tmp = Path(tempfile.mkdtemp(prefix="sqlnb-connect-"))
    (tmp / "log4j2.properties").write_text(_LOG4J2)
    port = _free_port()
    java_opts = ("-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
                 f"-Dlog4j2.configurationFile=file:{tmp / 'log4j2.properties'}")
    conf = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.memory": "1g",
        "spark.driver.extraJavaOptions": java_opts,
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.ansi.enabled": "true",
        "spark.local.dir": str(tmp / "local"),
        "spark.sql.warehouse.dir": str(tmp / "warehouse"),
    }
    cmd = [str(home / "bin" / "spark-submit"), "--master", f"local[{cores}]",
           "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd.append("spark-internal")
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "PYSPARK_SUBMIT_ARGS")}
    env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1")
    log = open(tmp / "server.log", "wb")
    server = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                              cwd=tmp, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if server.poll() is not None or time.monotonic() > deadline:
                tail = (tmp / "server.log").read_text(errors="replace")[-2000:]
                # Not "not available": pyspark, its jar and Java are there, the server failed.
                raise RuntimeError(f"the Spark Connect server did not start (exit {server.returncode}):\n{tail}")
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait()
        log.close()
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def spark_session(ansi: bool = True, cores: int = 2) -> Iterator["pyspark.sql.SparkSession"]:
    """Run a local SparkSession for the duration of a ``with`` block.

    Parameters
    ----------
    ansi : bool, default True
        Value of ``spark.sql.ansi.enabled`` (see the module docstring).
    cores : int, default 2
        Worker threads (``local[cores]``); also used for shuffle partitions.

    Yields
    ------
    pyspark.sql.SparkSession
        The session, with time zone UTC.  It is stopped on exit.

    Raises
    ------
    SparkNotAvailable
        If pyspark is not installed or no ``java`` / ``$JAVA_HOME`` is found.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkNotAvailable("pyspark is not installed: pip install 'pyspark>=4.1,<5'") from exc
    _require_java()
    # Bind to loopback: avoids the "hostname resolves to a loopback address" warning
    # and any dependency on the machine's network setup.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    tmp = Path(tempfile.mkdtemp(prefix="sqlnb-spark-"))
    (tmp / "log4j2.properties").write_text(_LOG4J2)
    # C1-only JIT and serial GC: in our measurements they roughly halved session
    # start plus first queries; test queries are small, so peak speed hardly matters.
    java_opts = (
        "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC "
        f"-Dlog4j2.configurationFile=file:{tmp / 'log4j2.properties'}"
    )
    builder = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("sqlnb-tests")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.extraJavaOptions", java_opts)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.default.parallelism", str(cores))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.ansi.enabled", str(ansi).lower())
        .config("spark.local.dir", str(tmp / "local"))
        .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
    )
    session = None
    try:
        session = builder.getOrCreate()
        _quiet_python_loggers()
        yield session
    finally:
        if session is not None:
            session.stop()
        shutil.rmtree(tmp, ignore_errors=True)


#: HotSpot compiles no method longer than this many bytecodes (``-XX:-DontCompileHugeMethods``
#: is the default): a longer generated method runs interpreted, however hot it is.
JIT_METHOD_LIMIT = 8000


def max_method_bytecodes(df) -> int:
    """The largest method, in bytecodes, of the Java code Spark generates to run ``df``.

    Two sources, because a plan is compiled in two ways:

    * whole-stage code (``WholeStageCodegenExec``): ``debug.codegenStringSeq`` compiles each
      codegen subtree of the executed plan and returns Janino's ``ByteCodeStats``, whose
      ``maxMethodCodeSize`` is the largest method of that class (from the code cache when
      the plan ran before, so the figure does not depend on what ran earlier);
    * code compiled while the plan runs outside whole-stage codegen (operators with more than
      ``spark.sql.codegen.maxFields`` = 100 fields, or a stage that fell back): every method
      of every class ``CodeGenerator`` compiles is recorded in the ``generatedMethodSize``
      histogram of ``CodegenMetrics``. Its reservoir is replaced by an empty one (through
      reflection: the histogram has no reset) and ``df`` is run into Spark's ``noop`` sink,
      so the histogram then holds exactly the methods compiled for this run. A class
      compiled earlier in the session comes from the cache and is not seen again: measure a
      plan whose code is new (tests fit a model of their own).
    """
    jvm = df.sparkSession._jvm
    debug = getattr(jvm.org.apache.spark.sql.execution.debug, "package$").__getattr__("MODULE$")
    stages = debug.codegenStringSeq(df._jdf.queryExecution().executedPlan())
    sizes = [0]
    it = stages.iterator()
    while it.hasNext():
        sizes.append(int(it.next()._3().maxMethodCodeSize()))
    metrics = getattr(jvm.org.apache.spark.metrics.source, "CodegenMetrics$").__getattr__("MODULE$")
    histogram = metrics.METRIC_GENERATED_METHOD_BYTECODE_SIZE()
    field = histogram.getClass().getDeclaredField("reservoir")
    field.setAccessible(True)
    field.set(histogram, jvm.com.codahale.metrics.SlidingWindowReservoir(1 << 20))
    df.write.format("noop").mode("overwrite").save()
    sizes += list(histogram.getSnapshot().getValues())
    return max(int(s) for s in sizes)
