"""The ``sqlnb`` command line: a thin click layer over the library.

Each command parses its arguments (:mod:`sqlnb.io.locations`), calls the library and
prints the result. The contract scripts rely on:

* stdout carries only the payload (SQL, CSV, JSON, reports); a one-line summary and
  DuckDB's progress bar go to stderr, and only when stderr is a terminal;
* every error a user can cause is one line ``Error: <what is wrong and how to fix it>``
  on stderr with exit code :data:`EXIT_USAGE`, and nothing is written or half-written.
  :class:`~sqlnb.cli.app.SqlnbGroup` is the one place where library, DuckDB and click
  errors become that line; an interrupt exits with :data:`EXIT_INTERRUPTED` after the
  same clean-up;
* names (tables, columns, labels, models) are data: they reach SQL only as quoted
  identifiers or bound values.

This module holds the ``sqlnb`` group and its global options; the commands live in one
module per group of commands and are added to it here:

* :mod:`sqlnb.cli.app` — exit codes, the error boundary, :class:`~sqlnb.cli.app.Settings`;
* :mod:`sqlnb.cli.options` — the shared options and the parsers of their values;
* :mod:`sqlnb.cli.io` — loading and saving models, writing results;
* :mod:`sqlnb.cli.train` (fit), :mod:`sqlnb.cli.predict` (score, evaluate, sql),
  :mod:`sqlnb.cli.catalog` (show, models, drop), :mod:`sqlnb.cli.generative` (update,
  sample, novelty, fit-em), :mod:`sqlnb.cli.tuning` (cv, compare), :mod:`sqlnb.cli.select_cmd`
  (select), :mod:`sqlnb.cli.text` (fit-long, score-long), :mod:`sqlnb.cli.demo` (demo),
  :mod:`sqlnb.cli.decide` (decide), :mod:`sqlnb.cli.report_cmd` (report), :mod:`sqlnb.cli.calibrate`
  (calibrate), :mod:`sqlnb.cli.dbt_cmd` (dbt, dbt-import).
"""

from __future__ import annotations

import os
import sys

import click
from click.core import ParameterSource

from sqlnb.cli.app import EXIT_FAIL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, CliError, Settings, SqlnbGroup
from sqlnb.errors import SqlnbError
from sqlnb.version import __version__

#: Where each command lives (``module:function`` in this package). A command's module, and
#: with it DuckDB, pyarrow and the library, is imported only when that command runs or shows
#: its help, so ``sqlnb --version`` and ``sqlnb CMD --help`` start fast.
COMMANDS = {
    "fit": "train:fit", "score": "predict:score", "evaluate": "predict:evaluate", "sql": "predict:sql_command",
    "show": "catalog:show", "models": "catalog:models", "drop": "catalog:drop", "demo": "demo:demo",
    "cv": "tuning:cv", "compare": "tuning:compare", "select": "select_cmd:select",
    "update": "generative:update", "sample": "generative:sample", "novelty": "generative:novelty",
    "fit-em": "generative:fit_em_command", "fit-long": "text:fit_long_command", "score-long": "text:score_long",
    "decide": "decide:decide",
    "report": "report_cmd:report",
    "mi": "information:mi",
    "calibrate": "calibrate:calibrate",
    "dbt": "dbt_cmd:dbt_command", "dbt-import": "dbt_cmd:dbt_import",
    "conformal": "conformal_cmd:conformal",
}

#: :data:`sqlnb.engines.ENGINES`, spelled out so that parsing ``--engine`` imports no engine
#: (tests/test_cli.py checks that the two agree).
ENGINES = ("duckdb", "postgres", "spark")


def __getattr__(name: str):
    if name == "split_list":  # re-exported for scripts that took it from here
        from sqlnb.cli.options import split_list

        return split_list
    raise AttributeError(f"module 'sqlnb.cli' has no attribute {name!r}")

__all__ = ["main", "cli", "EXIT_OK", "EXIT_FAIL", "EXIT_USAGE", "EXIT_INTERRUPTED", "CliError", "split_list",
           "stderr_is_terminal"]

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def stderr_is_terminal() -> bool:
    """Whether summaries and the progress bar may be shown (looked up here when the
    group starts, so that tests can pretend to be a terminal)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@click.group("sqlnb", cls=SqlnbGroup, context_settings=CONTEXT, lazy_commands=COMMANDS)
@click.version_option(__version__, "--version", prog_name="sqlnb", message="%(prog)s %(version)s")
@click.option("--threads", type=click.IntRange(min=1), envvar="SQLNB_THREADS", metavar="N",
              help="DuckDB worker threads [env SQLNB_THREADS; default: one per core].")
@click.option("--memory-limit", envvar="SQLNB_MEMORY_LIMIT", metavar="SIZE",
              help="DuckDB memory limit, e.g. 4GB [env SQLNB_MEMORY_LIMIT].")
@click.option("--temp-directory", envvar="SQLNB_TEMP_DIRECTORY", metavar="DIR",
              help="Where DuckDB spills when over the limit [env SQLNB_TEMP_DIRECTORY].")
@click.option("--engine", type=click.Choice(ENGINES), default="duckdb", envvar="SQLNB_ENGINE", show_default=True,
              help="Where DATA and MODEL live: DuckDB (files, db.duckdb:TABLE) or a warehouse, where "
                   "DATA is a table name or a SELECT and MODEL a plain NAME [env SQLNB_ENGINE].")
@click.option("--dsn", envvar="SQLNB_DSN", metavar="DSN",
              help="PostgreSQL connection string, with --engine postgres [env SQLNB_DSN].")
@click.option("--master", envvar="SQLNB_MASTER", metavar="URL",
              help="Spark master URL (local[*], spark://host:7077, yarn, k8s://...), with --engine spark "
                   "[env SQLNB_MASTER].")
@click.option("--remote", envvar="SQLNB_REMOTE", metavar="sc://HOST:PORT",
              help="With --engine spark: a Spark Connect server (how managed Spark services are reached) "
                   "instead of --master; it keeps the catalog and reads DATA paths itself [env SQLNB_REMOTE].")
@click.option("--warehouse", envvar="SQLNB_WAREHOUSE", metavar="DIR",
              help="With --engine spark: the directory of the catalog (tables and a Derby metastore) "
                   "that keeps models between commands [env SQLNB_WAREHOUSE; default for a local "
                   "session: ./spark-warehouse].")
@click.option("--verbose", "-v", is_flag=True, help="Show the engine's own log (Spark's log lines and progress bars).")
@click.option("--wait", type=click.FloatRange(min=0), default=60, show_default=True, envvar="SQLNB_WAIT",
              metavar="SECONDS",
              help="How long to wait while another process writes the models (a DuckDB file, the PostgreSQL "
                   "store) or, for a write, reads them; then one Error: line naming it and exit 75. 0: fail at once "
                   "[env SQLNB_WAIT]. See docs/concurrency.md.")
@click.pass_context
def cli(ctx: click.Context, threads, memory_limit, temp_directory, engine, dsn, master, remote, warehouse, verbose,
        wait):
    """Train and score naive Bayes classifiers inside DuckDB, in SQL.

    DATA is Parquet/CSV/JSON files by path or glob (lake/2026/*.parquet) or a table in a
    DuckDB database (db.duckdb:TABLE). A model lives in a DuckDB database as
    db.duckdb:NAME. Results go to stdout; errors are one 'Error:' line on stderr.

    \b
    Example:
      sqlnb demo
      sqlnb fit train.parquet --label y --model models.duckdb:churn
      sqlnb score test.parquet --model models.duckdb:churn --out scored.parquet
      sqlnb evaluate test.parquet --model models.duckdb:churn
    """
    if engine == "postgres" and not dsn:
        raise SqlnbError("--engine postgres needs --dsn (e.g. --dsn 'host=db dbname=lake')")
    if dsn and engine != "postgres":
        raise SqlnbError("--dsn applies to --engine postgres only")
    if master and engine != "spark":
        raise SqlnbError("--master applies to --engine spark only")
    if warehouse and engine != "spark" and ctx.get_parameter_source("warehouse") != ParameterSource.ENVIRONMENT:
        raise SqlnbError("--warehouse applies to --engine spark only")
    remote, warehouse = _spark_remote(ctx, engine, master, remote, warehouse)
    local = master.startswith("local") if master else not (remote or os.environ.get("SPARK_REMOTE"))
    if engine == "spark" and warehouse is None and local:
        warehouse = "spark-warehouse"  # a local session keeps its catalog in the working directory
    ctx.obj = Settings(threads, memory_limit, temp_directory, terminal=stderr_is_terminal(),
                       engine=engine, dsn=dsn, master=master, warehouse_dir=warehouse, verbose=verbose,
                       spark_remote=remote, wait=wait)
    ctx.obj.apply_wait()
    ctx.call_on_close(ctx.obj.close)


def _spark_remote(ctx: click.Context, engine: str, master, remote, warehouse) -> tuple:
    """(--remote, --warehouse) checked: a Spark Connect URL goes with --engine spark, not
    with --master, and its server keeps the catalog. Values set in the environment
    (SQLNB_REMOTE, SQLNB_WAREHOUSE) are left out where they do not apply."""
    from_env = {name: ctx.get_parameter_source(name) == ParameterSource.ENVIRONMENT for name in ("remote", "warehouse")}
    if remote and engine != "spark":
        if from_env["remote"]:
            return None, warehouse
        raise SqlnbError("--remote applies to --engine spark only")
    if remote and master:
        raise SqlnbError("--master and --remote are two ways to reach Spark; give one")
    if remote and warehouse:
        if from_env["warehouse"]:
            return remote, None
        raise SqlnbError("--warehouse is the catalog of a Spark session started here; a Spark Connect server "
                         "(--remote) keeps its own")
    return remote, warehouse


def main(argv: list[str] | None = None) -> None:
    """Console entry point (``sqlnb``, ``python -m sqlnb``): the process is the command's,
    so the objects its imports made are frozen out of garbage collection once the command
    is imported (:meth:`sqlnb.cli.app.SqlnbGroup.get_command`)."""
    cli.freeze_imports = True
    try:
        cli.main(args=argv, prog_name="sqlnb")
    finally:
        cli.freeze_imports = False
