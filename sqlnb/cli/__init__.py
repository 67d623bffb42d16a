"""The ``sqlnb`` command line: a thin click layer over the library.

Each command parses its arguments (:mod:`sqlnb.locations`), calls the library and prints
the result. The contract scripts rely on:

* stdout carries only the payload (SQL, CSV, JSON, reports); a one-line summary and
  DuckDB's progress bar go to stderr, and only when stderr is a terminal;
* every error a user can cause is one line ``Error: <what is wrong and how to fix it>``
  on stderr with exit code :data:`EXIT_USAGE`, and nothing is written or half-written.
  :class:`SqlnbGroup` is the one place where library, DuckDB and click errors become that
  line; an interrupt exits with :data:`EXIT_INTERRUPTED` after the same clean-up;
* names (tables, columns, labels, models) are data: they reach SQL only as quoted
  identifiers or bound values.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import click
import duckdb
import sqlglot

from sqlnb import __version__
from sqlnb import api
from sqlnb import engines
from sqlnb.workflows import export
from sqlnb.io import output
from sqlnb import sql
from sqlnb.workflows import demo as demo_module
from sqlnb.errors import SqlnbError, SqlnbNotFound, suggest
from sqlnb.workflows.evaluate import evaluate as evaluate_model, text_report
from sqlnb.models.naive_bayes.families import KINDS
from sqlnb.workflows.generative import fit_em as api_fit_em, novelty_query, novelty_threshold, sample as api_sample, update as api_update
from sqlnb.api import fit_long
from sqlnb.models.naive_bayes.text import top_terms
from sqlnb.workflows.cv import cross_validate
from sqlnb.models.naive_bayes.fit import plan_features
from sqlnb.io.locations import DbObject, StdOut, data_source, parse_data, parse_model, parse_out, split_db
from sqlnb.models.base import DEFAULT_SOURCE
from sqlnb.models.naive_bayes.model import ESTIMATORS, UNSEEN
from sqlnb.workflows.report import describe, models_text, show_text
from sqlnb.source import _QUERY_START, Query, Source, Table, _first_line, resolve
from sqlnb.store import drop_model, list_models, load_model, model_names
from sqlnb.engines import ENGINES

EXIT_OK = 0
#: The command ran but its check failed (``evaluate --min-accuracy``).
EXIT_FAIL = 1
#: Bad input: a usage error or a one-line ``Error:`` about the data, model or options.
EXIT_USAGE = 2
#: Interrupted (Ctrl-C); as a shell reports SIGINT.
EXIT_INTERRUPTED = 130


def stderr_is_terminal() -> bool:
    """Whether summaries and the progress bar may be shown (a function, so tests can
    pretend to be a terminal)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def summary(message: str) -> None:
    """A one-line summary on stderr, for people at a terminal only."""
    if stderr_is_terminal():
        click.echo(message, err=True)


# -- errors: the one boundary ---------------------------------------------------------------

class CliError(click.ClickException):
    """An error shown as one ``Error: ...`` line with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(" ".join(str(message).splitlines()).strip())
        self.exit_code = exit_code


def _usage_line(e: click.UsageError) -> CliError:
    where = e.ctx.command_path if e.ctx is not None else "sqlnb"
    return CliError(f"{e.format_message()} (see '{where} --help')", EXIT_USAGE)


def _interrupted() -> click.exceptions.Exit:
    click.echo("Error: interrupted; nothing was written", err=True)
    return click.exceptions.Exit(EXIT_INTERRUPTED)


class SqlnbGroup(click.Group):
    """The ``sqlnb`` group: turns every error a command raises into one line.

    * :class:`~sqlnb.errors.SqlnbError` (the library's user errors) -> its message;
    * DuckDB and sqlglot errors that reach here (e.g. a value that fails to convert
      while scoring, a query that does not parse) -> their first meaningful line;
    * click usage errors -> one line with a pointer to ``--help``;
    * KeyboardInterrupt and DuckDB's interrupt -> exit 130. Writers clean up on the way
      out (temporary files removed, transactions rolled back), so nothing is left behind.
    """

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            raise _usage_line(e) from None

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            raise _usage_line(e) from None
        except SqlnbError as e:
            raise CliError(str(e), e.exit_code) from None
        except (KeyboardInterrupt, duckdb.InterruptException):
            raise _interrupted() from None
        except RuntimeError as e:
            # Ctrl-C while DuckDB runs a query surfaces as RuntimeError("Query interrupted")
            # (DuckDB's own SIGINT handling), not as KeyboardInterrupt.
            if "interrupted" not in str(e).lower():
                raise
            raise _interrupted() from None
        except duckdb.Error as e:
            raise CliError(f"DuckDB: {_first_line(e)}") from None
        except sqlglot.errors.SqlglotError as e:
            raise CliError(f"SQL: {_first_line(e)}") from None
        except BrokenPipeError:
            raise  # a closed pipe (| head) is click's to handle quietly
        except OSError as e:
            where = f" {e.filename!r}" if e.filename else ""
            raise CliError(f"cannot access{where}: {e.strerror or e}") from None


# -- settings shared by all commands --------------------------------------------------------

@dataclasses.dataclass
class Settings:
    """The global options (DuckDB resources), whether a terminal is watching, and the
    connections a Ctrl-C must interrupt."""

    threads: int | None = None
    memory_limit: str | None = None
    temp_directory: str | None = None
    progress: bool = False
    engine: str = "duckdb"
    dsn: str | None = None
    master: str | None = None
    interrupted: threading.Event = dataclasses.field(default_factory=threading.Event)
    connections: list = dataclasses.field(default_factory=list)

    _warehouse: Any = None

    @property
    def remote(self) -> bool:
        """Whether DATA and MODEL live on a warehouse (--engine postgres|spark)."""
        return self.engine != "duckdb"

    def warehouse(self):
        """The --engine connection (opened once per command, closed by :meth:`close`)."""
        if self._warehouse is None:
            self._warehouse = engines.connect(self.engine, dsn=self.dsn, master=self.master)
        return self._warehouse

    def close(self) -> None:
        close = getattr(self._warehouse, "close", None)
        if close is not None:
            close()
        self._warehouse = None

    def connect(self, path: str | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """A connection with the resource settings; DuckDB's progress bar only for a
        terminal (it is on by default in Python and would print into piped output).

        Opening a connection is where a new step of a command starts, so an interrupt
        that arrived while Python (not DuckDB) was busy stops the command here.
        """
        if self.interrupted.is_set():
            raise KeyboardInterrupt
        con = api.connect(path, self.threads, self.memory_limit, self.temp_directory, read_only=read_only)
        setting = sqlglot.exp.SetItem(this=sqlglot.exp.EQ(this=sql.col("enable_progress_bar"),
                                                          expression=sqlglot.exp.Boolean(this=self.progress)))
        con.execute(sql.render(sqlglot.exp.Set(expressions=[setting])))
        self.connections.append(con)
        return con

    @contextmanager
    def working(self) -> Iterator[None]:
        """Run a command's queries: interruptible by Ctrl-C, progress bar on stderr.

        * DuckDB notices SIGINT only between tasks, which can mean minutes for a big
          COPY. Python's C-level handler writes the signal to a wakeup file descriptor
          even while the main thread is inside DuckDB; a watcher thread reads it and
          calls ``interrupt()`` on the open connections, so the running statement stops
          at once. The Python-level handler only records the interrupt: raising
          KeyboardInterrupt at an arbitrary bytecode could cut short the clean-up that
          the failing statement sets off (removing a temporary file, a rollback).
        * DuckDB prints its progress bar on stdout; while queries run, stdout is pointed
          at stderr so that the payload stays clean (only when the bar is on).
        """
        with self._interruptible(), self._progress_on_stderr():
            yield

    @contextmanager
    def _interruptible(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signal handlers can only be set from the main thread
            return
        read_fd, write_fd = os.pipe()
        try:
            os.set_blocking(write_fd, False)
            old_fd = signal.set_wakeup_fd(write_fd)
        except (OSError, ValueError):  # e.g. Windows, whose wakeup fd must be a socket
            os.close(read_fd)
            os.close(write_fd)
            yield
            return
        old_handler = signal.signal(signal.SIGINT, lambda signum, frame: self.interrupted.set())
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                data = os.read(read_fd, 64)
                if not data or done.is_set():
                    return
                if signal.SIGINT in data:
                    self.interrupted.set()
                    for con in self.connections:
                        try:
                            con.interrupt()
                        except duckdb.Error:  # already closed
                            pass

        watcher = threading.Thread(target=watch, name="sqlnb-interrupt", daemon=True)
        watcher.start()
        try:
            yield
        finally:
            done.set()
            os.write(write_fd, b"\0")  # wake the watcher so that it sees `done`
            watcher.join()
            signal.set_wakeup_fd(old_fd)
            signal.signal(signal.SIGINT, old_handler)
            os.close(read_fd)
            os.close(write_fd)

    @contextmanager
    def _progress_on_stderr(self) -> Iterator[None]:
        if not self.progress:
            yield
            return
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(2, 1)
        try:
            yield
        finally:
            os.dup2(saved, 1)
            os.close(saved)


# -- option parsing helpers -----------------------------------------------------------------

def split_list(values: tuple[str, ...]) -> list[str] | None:
    """Repeated and/or comma-separated names; None when the option was not given.

    As in CSV, a name that holds a comma, or leading or trailing spaces, is written in
    double quotes, with ``""`` for a quote inside them: ``--features 'a,"b,c"'`` gives
    ``a`` and ``b,c``. Unquoted names are stripped; a quote inside one is just a character
    (``a"b`` is ``a"b``).
    """
    if not values:
        return None
    return [name for v in values for name in _split_names(v)]


def _split_names(text: str) -> list[str]:
    out: list[str] = []
    i, n = 0, len(text)
    while i <= n:
        while i < n and text[i] == " ":
            i += 1
        if i < n and text[i] == '"':  # quoted: up to the closing quote, "" is a quote
            j, name = i + 1, []
            while True:
                k = text.find('"', j)
                if k < 0:
                    raise SqlnbError(f"unterminated quote in the column list {text!r}; close it, e.g. '\"b,c\"'")
                name.append(text[j:k])
                if text.startswith('""', k):
                    name.append('"')
                    j = k + 2
                    continue
                break
            i = k + 1
            while i < n and text[i] == " ":
                i += 1
            if i < n and text[i] != ",":
                raise SqlnbError(f"text after a quoted name in the column list {text!r}; "
                                 "separate names with commas")
            out.append("".join(name))
        else:
            k = text.find(",", i)
            k = n if k < 0 else k
            if text[i:k].strip():
                out.append(text[i:k].strip())
            i = k
        i += 1
    return out


def assignments(values: tuple[str, ...] | list[str], option: str, convert: Callable[[str], Any] = str) -> dict:
    """``NAME=VALUE`` items split at the last ``=`` (names may contain ``=``)."""
    out = {}
    for item in values:
        name, eq, value = item.rpartition("=")
        if not eq or not name:
            raise SqlnbError(f"{option} takes NAME=VALUE, not {item!r}")
        try:
            out[name] = convert(value)
        except ValueError:
            raise SqlnbError(f"{option} {item!r}: {value!r} is not a number") from None
    return out


def parse_class_prior(text: str | None) -> Any:
    if text is None or text in ("fitted", "uniform", "dirichlet"):
        return text
    if "=" not in text:
        raise SqlnbError(f"--class-prior must be fitted, uniform, dirichlet or LABEL=P,..., not {text!r}"
                         f"{suggest(text, ('fitted', 'uniform', 'dirichlet'))}")
    return assignments(text.split(","), "--class-prior", float)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def parse_binarize(values: tuple[str, ...]) -> float | dict:
    """``--binarize T`` for every bernoulli column, or ``--binarize COL=T`` per column."""
    if not values:
        return 0.0
    if len(values) == 1 and _is_number(values[0]):
        return float(values[0])
    if any(_is_number(v) for v in values):
        raise SqlnbError("--binarize takes one threshold for all columns or COL=T per column, not both")
    return assignments(values, "--binarize", float)


def csv_read_options(delimiter: str | None, null_string: tuple[str, ...], header: bool | None) -> dict:
    """DuckDB ``read_csv`` parameters from the CSV options (values become literals)."""
    opts: dict[str, Any] = {}
    if delimiter is not None:
        opts["delim"] = delimiter
    if null_string:
        opts["nullstr"] = list(null_string) if len(null_string) > 1 else null_string[0]
    if header is not None:
        opts["header"] = header
    return opts


def model_location(settings: Settings, text: str) -> DbObject | str:
    """A MODEL argument: ``DB.duckdb:NAME``, or with a warehouse engine a plain NAME."""
    if settings.remote:
        if split_db(text) is not None or not text:
            raise SqlnbError(f"with --engine {settings.engine}, MODEL is a model NAME on the engine, not {text!r}")
        return text
    return parse_model(text)


def data_spec(settings: Settings, text: str, csv: dict) -> Any:
    """A DATA argument: parsed for DuckDB, or as is (a table name or SELECT) for a warehouse."""
    if not settings.remote:
        return parse_data(text, csv)
    if csv:
        raise SqlnbError(f"CSV reading options apply to files read by DuckDB, not to --engine {settings.engine}")
    return text


def load(settings: Settings, text: str):
    """The model named by a MODEL argument (its database opened read-only, then closed)."""
    loc = model_location(settings, text)
    if isinstance(loc, str):
        return api.load(settings.warehouse(), loc)
    with settings.connect(loc.db, read_only=True) as con:
        model = load_model(con, loc.name)
    return model


def check_new_model(settings: Settings, loc: DbObject | str, replace: bool) -> None:
    """Refuse, before any work, to overwrite an existing model without --replace."""
    if replace:
        return
    if isinstance(loc, str):
        exists = loc in [m["name"] for m in settings.warehouse().list_models()]
    elif os.path.exists(loc.db):
        with settings.connect(loc.db, read_only=True) as con:
            exists = loc.name in model_names(con)
    else:
        exists = False
    if exists:
        where = f"on {settings.engine}" if isinstance(loc, str) else f"in {loc.db!r}"
        raise SqlnbError(f"model {loc if isinstance(loc, str) else loc.name!r} already exists {where}; "
                         "pass --replace to overwrite it")


def save(settings: Settings, m, loc: DbObject | str, replace: bool) -> None:
    """Save ``m`` in one transaction; a database file this creates is removed on failure."""
    if isinstance(loc, str):
        m.save(settings.warehouse(), loc, replace=replace)
        return
    with settings.working(), output.new_file_guard(loc.db), settings.connect(loc.db) as con:
        m.save(con, loc.name, replace=replace)


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, default=str, ensure_ascii=False)


# -- shared options ---------------------------------------------------------------------------

def _options(*decorators):
    def apply(f):
        for d in reversed(decorators):
            f = d(f)
        return f
    return apply


model_option = click.option("--model", "-m", "model", metavar="DB.duckdb:NAME", required=True,
                            help="The model: a name in a DuckDB database file.")
replace_option = click.option("--replace", is_flag=True, help="Overwrite an existing model or output.")
format_option = click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text",
                             show_default=True, help="Output format.")
csv_options = _options(
    click.option("--delimiter", metavar="TEXT", help="CSV field delimiter (default: detected), e.g. ', ' or '\\t'."),
    click.option("--null-string", multiple=True, metavar="TEXT",
                 help="CSV text read as NULL, e.g. '?' (repeatable)."),
    click.option("--header/--no-header", default=None, help="Whether CSV files have a header row (default: detected)."),
)
DENSE_KINDS = ("lda", "qda", "logistic")
kind_option = click.option("--kind", type=click.Choice(["auto", *KINDS]), default="auto", show_default=True,
                           help="Family of every feature; auto: numbers gaussian, booleans bernoulli, text categorical.")
model_kind_option = click.option(
    "--kind", type=click.Choice(["auto", *KINDS, *DENSE_KINDS]), default="auto", show_default=True,
    help="Naive Bayes family of every feature (auto: numbers gaussian, booleans bernoulli, text categorical), "
         "or the model kind lda, qda or logistic.")
column_options = _options(
    click.option("--feature-kind", multiple=True, metavar="COL=KIND", help="Family of one column (repeatable)."),
    click.option("--features", multiple=True, metavar="COL,...", help="Feature columns (default: all but label and weight)."),
    click.option("--exclude", multiple=True, metavar="COL,...", help="Columns that are not features."),
    click.option("--weight", metavar="COL", help="Column of non-negative row weights."),
    click.option("--binarize", multiple=True, metavar="T|COL=T",
                 help="Bernoulli threshold: present when x > T (default 0)."),
)
feature_options = _options(kind_option, column_options)


def feature_plan_args(kind, feature_kind, features, exclude, weight, binarize_values) -> dict:
    return {"kind": kind, "feature_kinds": assignments(feature_kind, "--feature-kind"),
            "features": split_list(features), "exclude": split_list(exclude), "weight": weight,
            "binarize": parse_binarize(binarize_values)}


# -- the commands -----------------------------------------------------------------------------

CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


@click.group("sqlnb", cls=SqlnbGroup, context_settings=CONTEXT)
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
              help="Spark master URL (local[*], spark://host:7077), with --engine spark [env SQLNB_MASTER].")
@click.pass_context
def cli(ctx: click.Context, threads, memory_limit, temp_directory, engine, dsn, master):
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
    ctx.obj = Settings(threads, memory_limit, temp_directory, progress=stderr_is_terminal(),
                       engine=engine, dsn=dsn, master=master)
    ctx.call_on_close(ctx.obj.close)


#: Options that apply to one model kind only (the option, its parameter, the kinds).
KIND_OPTIONS = {"--shrinkage": ("shrinkage", ("lda",)), "--reg-param": ("reg_param", ("qda",)),
                "--C": ("C", ("logistic",)), "--standardize": ("standardize", ("logistic",))}

text_options = _options(
    click.option("--token-pattern", metavar="RE", help="Text bags: RE2 pattern of a token."),
    click.option("--no-lowercase", is_flag=True, default=None, help="Text bags: keep case."),
    click.option("--stop-words", metavar="W1,W2|@FILE", help="Text bags: words to drop (a list, or one per line in FILE)."),
    click.option("--min-df", metavar="N|F", help="Text bags: keep terms in >= N documents (or a share F in [0, 1])."),
    click.option("--max-df", metavar="N|F", help="Text bags: keep terms in <= N documents (or a share F)."),
    click.option("--max-features", type=click.IntRange(min=1), metavar="N", help="Text bags: keep the N most frequent terms."),
    click.option("--select-k", type=click.IntRange(min=1), metavar="K",
                 help="Text bags: keep the K terms most informative of the class."),
)
kind_options = _options(
    click.option("--shrinkage", type=click.FloatRange(0, 1), metavar="F", help="--kind lda: covariance shrinkage."),
    click.option("--reg-param", type=click.FloatRange(0, 1), metavar="F", help="--kind qda: covariance regularisation."),
    click.option("--C", "C", type=click.FloatRange(min=0, min_open=True), metavar="F",
                 help="--kind logistic: inverse L2 penalty (default 1)."),
    click.option("--standardize", is_flag=True, default=None, help="--kind logistic: fit on standardised features."),
)


def _df(text: str | None, option: str) -> float | int | None:
    """--min-df/--max-df: an integer is a document count, a decimal a share."""
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise SqlnbError(f"{option} takes a document count or a share in [0, 1], not {text!r}") from None


def text_args(token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, select_k) -> dict | None:
    """The ``text=`` options of token bags from the text flags (None when none is given)."""
    words = None
    if stop_words is not None:
        if stop_words.startswith("@"):
            with open(stop_words[1:], encoding="utf-8") as f:
                words = [w.strip() for w in f if w.strip()]
        else:
            words = split_list((stop_words,)) or []
    opts = {"token_pattern": token_pattern, "lowercase": False if no_lowercase else None, "stop_words": words,
            "min_df": _df(min_df, "--min-df"), "max_df": _df(max_df, "--max-df"),
            "max_features": max_features, "select_k": select_k}
    opts = {k: v for k, v in opts.items() if v is not None}
    return opts or None


def model_kind_args(kind: str, given: dict[str, Any]) -> tuple[str, dict]:
    """(model kind, its parameters) from --kind and the kind-specific options; an option
    given for another kind is an error. ``given`` maps option names to values (None: not given)."""
    model = kind if kind in DENSE_KINDS else "naive_bayes"
    params = {}
    for option, value in given.items():
        if value is None:
            continue
        name, kinds = KIND_OPTIONS.get(option, (None, ("naive_bayes",)))
        if model not in kinds:
            for_kind = "naive Bayes" if kinds == ("naive_bayes",) else "--kind " + "|".join(kinds)
            raise SqlnbError(f"{option} applies to {for_kind} only, not to --kind {kind}")
        if name is not None:
            params[name] = value
    return model, params


@cli.command()
@click.argument("data")
@click.option("--label", "-y", required=True, metavar="COL", help="The label column (NULL labels are skipped).")
@model_option
@model_kind_option
@column_options
@click.option("--alpha", type=float, help="Pseudo-count of discrete features (default 1: Laplace).")
@click.option("--feature-alpha", multiple=True, metavar="COL=A", help="Pseudo-count of one column (repeatable).")
@click.option("--estimator", type=click.Choice(ESTIMATORS), help="posterior-mean (default), map or mle.")
@click.option("--var-smoothing", type=float, help="Gaussian variance floor, fraction of the largest variance (1e-9).")
@click.option("--class-prior", metavar="fitted|uniform|dirichlet|LABEL=P,...", help="Class prior (default fitted).")
@click.option("--prior-alpha", type=float, help="Concentration of the dirichlet class prior (default 1).")
@click.option("--norm", is_flag=True, default=None, help="Complement naive Bayes weight normalisation.")
@click.option("--unseen", type=click.Choice(UNSEEN), help="Unseen categories: missing (no evidence, default) or bucket.")
@kind_options
@text_options
@csv_options
@replace_option
@click.pass_obj
def fit(settings: Settings, data, label, model, kind, feature_kind, features, exclude, weight, binarize,
        alpha, feature_alpha, estimator, var_smoothing, class_prior, prior_alpha, norm, unseen,
        shrinkage, reg_param, C, standardize, token_pattern, no_lowercase, stop_words, min_df, max_df,
        max_features, select_k, delimiter, null_string, header, replace):
    """Fit a model on DATA and save it as MODEL: naive Bayes (--kind auto or a family),
    or --kind lda, qda or logistic (numeric features).

    One scan of DATA computes every statistic; the model (a few small tables) is saved
    in one transaction, so a failed fit leaves an existing model untouched. Text
    columns given --feature-kind COL=multinomial are token bags (see the text options).

    \b
    Example:
      sqlnb fit lake/2026/*.parquet --label churned --model models.duckdb:churn
      sqlnb fit adult.csv --null-string '?' --label income --exclude fnlwgt \\
          --feature-kind education-num=categorical --model models.duckdb:adult --replace
      sqlnb fit train.parquet --label y --kind lda --shrinkage 0.1 --model models.duckdb:lda
      sqlnb fit mails.parquet --label spam --feature-kind body=multinomial --stop-words @stop.txt \\
          --min-df 2 --model models.duckdb:spam
    """
    target = model_location(settings, model)
    spec = data_spec(settings, data, csv_read_options(delimiter, null_string, header))
    text = text_args(token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, select_k)
    nb_only = {"--alpha": alpha, "--feature-alpha": feature_alpha or None, "--estimator": estimator,
               "--var-smoothing": var_smoothing, "--class-prior": class_prior, "--prior-alpha": prior_alpha,
               "--norm": norm, "--unseen": unseen, "--feature-kind": feature_kind or None, "--weight": weight,
               "--binarize": binarize or None, "text options": text}
    model_kind, params = model_kind_args(kind, {**nb_only, "--shrinkage": shrinkage, "--reg-param": reg_param,
                                               "--C": C, "--standardize": standardize})
    if model_kind == "naive_bayes":
        params = {k: v for k, v in {
            "alpha": alpha, "estimator": estimator, "var_smoothing": var_smoothing,
            "class_prior": parse_class_prior(class_prior), "prior_alpha": prior_alpha, "norm": norm,
            "unseen": unseen, "feature_alpha": assignments(feature_alpha, "--feature-alpha", float) or None,
        }.items() if v is not None}
        params |= feature_plan_args(kind, feature_kind, features, exclude, weight, binarize) | {"text": text}
    else:
        if settings.remote:
            raise SqlnbError(f"--kind {kind} is fitted in DuckDB only; use --engine duckdb")
        params |= {"features": split_list(features), "exclude": split_list(exclude)}
    check_new_model(settings, target, replace)
    start = time.perf_counter()
    if settings.remote:
        m = api.fit(spec, label, con=settings.warehouse(), **params)
    else:
        with settings.working(), settings.connect() as con:
            m = api.fit(data_source(con, spec), label, con=con, model=model_kind, **params)
    if hasattr(m, "log_parameters"):
        # Derive the log-parameters now: a setting that cannot be applied to these
        # statistics (e.g. MAP with alpha < 1 on a zero count) fails before saving.
        m.log_parameters()
    save(settings, m, target, replace)
    summary(f"fitted {_model_str(target)}: {m.report.get('rows', 0):,} rows, {len(m.classes)} classes, "
            f"{len(m.features)} features, {time.perf_counter() - start:.2f} s")


def _model_str(loc: DbObject | str) -> str:
    return repr(loc) if isinstance(loc, str) else f"{loc.name!r} in {loc.db}"


out_option = click.option("--out", "-o", required=True, metavar="OUT",
                          help="file.parquet, file.csv, file.json, DB.duckdb:TABLE, or - for CSV on stdout.")


def write_out(settings: Settings, out: str, replace: bool,
              query: Callable[[duckdb.DuckDBPyConnection, str | None], sqlglot.exp.Expression]) -> str:
    """Write the rows of ``query(con, own_db)`` to OUT, all or nothing; returns the summary
    text. ``own_db`` is the output database (None unless OUT is a table), for reading a
    table of that same database directly."""
    target = parse_out(out)
    own_db = target.db if isinstance(target, DbObject) else None
    if not isinstance(target, (DbObject, StdOut)):
        output.check_target(target, replace)
    start = time.perf_counter()
    if isinstance(target, StdOut):
        with output.spool(settings.temp_directory) as tmp:
            with settings.working(), settings.connect() as con:
                n = output.write(con, query(con, None), tmp, True)
            sys.stdout.flush()
            output.stream(tmp.path, sys.stdout.buffer)
    else:
        with settings.working(), output.new_file_guard(own_db), settings.connect(own_db) as con:
            output.check_target(target, replace, con)
            n = output.write(con, query(con, own_db), target, replace)
    return f"{'?' if n is None else format(n, ',')} rows into {target}, {time.perf_counter() - start:.2f} s"


def arrow_rows(table) -> Callable[[duckdb.DuckDBPyConnection, str | None], sqlglot.exp.Expression]:
    """A ``write_out`` query over an Arrow table (registered on the output connection)."""
    def query(con, own_db):
        con.register("sqlnb_rows", table)
        return sqlglot.exp.select(sqlglot.exp.Star()).from_(sql.table("sqlnb_rows"))
    return query


def write_engine_table(engine, name: str, query: sqlglot.exp.Expression, replace: bool) -> None:
    """``CREATE TABLE name AS query`` on a PostgreSQL engine, in one transaction (an
    existing table is dropped in the same transaction, and only with ``replace``)."""
    try:
        engine.resolve(Table(name))
        exists = True
    except SqlnbNotFound:
        exists = False
    if exists and not replace:
        raise SqlnbError(f"table {name!r} already exists on the engine; pass --replace to overwrite it")
    with engine.con.transaction():
        if exists:
            engine.execute(sqlglot.exp.Drop(tables=[sql.table(name)], kind="TABLE"))
        engine.execute(sqlglot.exp.Create(this=sql.table(name), kind="TABLE", expression=query))


def to_arrow(result):
    """A warehouse's scoring result as an Arrow table (Spark gives a DataFrame)."""
    return result.toArrow() if hasattr(result, "toArrow") else result


@cli.command()
@click.argument("data")
@model_option
@click.option("--out", "-o", metavar="OUT",
              help="file.parquet, file.csv, file.json, DB.duckdb:TABLE, or - for CSV on stdout.")
@click.option("--out-table", metavar="NAME",
              help="With --engine postgres: create table NAME there (one transaction) instead of --out.")
@click.option("--keep", multiple=True, metavar="COL,...", help="Input columns to keep (default: all; '' for none).")
@click.option("--no-proba", is_flag=True, help="Only the prediction, no proba_<class> columns.")
@click.option("--flag-novel", is_flag=True,
              help="Add log_evidence and a BOOLEAN novel column (below the threshold of 'sqlnb novelty').")
@csv_options
@replace_option
@click.pass_obj
def score(settings: Settings, data, model, out, out_table, keep, no_proba, flag_novel, delimiter, null_string, header,
          replace):
    """Score DATA with MODEL and write the rows to OUT.

    Each output row holds the kept input columns, one proba_<class> column per class
    and the prediction. The output appears only when complete: files are written next
    to the target and moved over it, tables are created in a transaction. With
    --engine postgres|spark, DATA is scored on the engine and the rows written to OUT.

    \b
    Example:
      sqlnb score test.parquet --model models.duckdb:churn --out scored.parquet
      sqlnb score db.duckdb:customers --model db.duckdb:churn --keep id --out db.duckdb:scores --replace
      sqlnb score new.csv --model models.duckdb:churn --no-proba --out - | head
      sqlnb score new.parquet --model models.duckdb:churn --flag-novel --out flagged.parquet
      sqlnb --engine postgres --dsn 'dbname=lake' score customers --model churn --out-table scores
    """
    if (out is None) == (out_table is None):
        raise SqlnbError("give one of --out OUT and --out-table NAME (a table on --engine postgres)")
    if out_table is not None and settings.engine != "postgres":
        raise SqlnbError("--out-table writes a table on --engine postgres; with DuckDB use --out DB.duckdb:TABLE")
    if out is not None:
        parse_out(out)
    spec = data_spec(settings, data, csv_read_options(delimiter, null_string, header))
    keep_cols = [] if keep == ("",) else split_list(keep)
    m = load(settings, model)
    outputs = ("prediction",) if no_proba else ("proba", "prediction")
    if flag_novel and settings.remote:
        raise SqlnbError("--flag-novel scores in DuckDB only; use --engine duckdb")
    if out_table is not None:
        engine = settings.warehouse()
        write_engine_table(engine, out_table, m.scoring_query(engine.resolve(spec), outputs, keep_cols), replace)
        summary(f"scored into table {out_table!r} on {settings.engine}")
        return
    if settings.remote:
        rows = to_arrow(m.score(spec, con=settings.warehouse(), outputs=outputs, keep=keep_cols))
        done = write_out(settings, out, replace, arrow_rows(rows))
    else:
        def query(con, own_db):
            source = data_source(con, spec, own_db)
            if flag_novel:
                return novelty_query(m, source, None, outputs, keep_cols)
            return m.scoring_query(source, outputs, keep_cols)
        done = write_out(settings, out, replace, query)
    summary(f"scored {done}")


@cli.command()
@click.argument("data")
@model_option
@click.option("--label", "-y", metavar="COL", help="The label column in DATA (default: the model's).")
@format_option
@click.option("--min-accuracy", type=click.FloatRange(0, 1), metavar="A",
              help=f"Exit with code {EXIT_FAIL} when accuracy is below A (for CI).")
@csv_options
@click.pass_obj
def evaluate(settings: Settings, data, model, label, fmt, min_accuracy, delimiter, null_string, header):
    """Measure MODEL on labelled DATA: accuracy, log loss, Brier, per-class
    precision/recall/F1, confusion matrix, and ROC AUC for two classes.

    Everything is computed in SQL over the scoring query. Rows without a label are
    counted and skipped; rows with zero likelihood under every class are reported.

    \b
    Example:
      sqlnb evaluate test.parquet --model models.duckdb:churn
      sqlnb evaluate db.duckdb:holdout --model db.duckdb:churn --format json --min-accuracy 0.8
    """
    spec = parse_data(data, csv_read_options(delimiter, null_string, header))
    m = load(settings, model)
    with settings.working(), settings.connect() as con:
        ev = evaluate_model(m, data_source(con, spec), con, label)
    click.echo(dump_json(ev.to_dict()) if fmt == "json" else text_report(ev))
    summary(f"evaluated {ev.rows:,} rows in {ev.seconds:.2f} s")
    if min_accuracy is not None and (ev.accuracy is None or ev.accuracy < min_accuracy):
        got = "n/a (no labelled rows)" if ev.accuracy is None else f"{ev.accuracy:.4f}"
        click.echo(f"Error: accuracy {got} is below --min-accuracy {min_accuracy}", err=True)
        raise click.exceptions.Exit(EXIT_FAIL)


def _source_node(text: str, dialect: str) -> sqlglot.exp.Expression:
    """--source: a query when it reads like one (parsed in the target dialect), else one
    table name (never parsed)."""
    if _QUERY_START.match(text):
        return sqlglot.exp.Subquery(this=sqlglot.parse_one(text, dialect=dialect))
    return sql.table(text)


@cli.command("sql")
@click.argument("data", required=False)
@click.option("--model", "-m", "model", metavar="DB.duckdb:NAME", help="The model (optional with --fit).")
@click.option("--dialect", "-d", default="duckdb", show_default=True, metavar="|".join(sql.DIALECTS),
              help="SQL dialect to print.")
@click.option("--source", "-s", "source_text", metavar="TABLE|QUERY",
              help=f"What the SQL reads: one table name or a SELECT (default: DATA, else {DEFAULT_SOURCE!r}).")
@click.option("--fit", "training", is_flag=True, help="Print the training (statistics) SQL instead.")
@click.option("--macro", metavar="NAME", help="Print a DuckDB table macro score_NAME(tbl) instead.")
@click.option("--label", "-y", metavar="COL", help="With --fit and no --model: the label column.")
@feature_options
@click.option("--pretty/--compact", default=True, help="One clause per line (default) or one line.")
@csv_options
@click.pass_obj
def sql_command(settings: Settings, data, model, dialect, source_text, training, macro, label, kind, feature_kind,
                features, exclude, weight, binarize, pretty, delimiter, null_string, header):
    """Print the self-contained scoring SELECT of MODEL (or, with --fit, the training SQL).

    Parameters are inlined as DOUBLE literals, so the SELECT runs anywhere the dialect
    does. Its output is the source's columns, proba_<class> per class and prediction.
    Give DATA (files or db.duckdb:TABLE) to list the source's columns explicitly;
    without it, columns are passed through with * (the helper columns jll_*,
    max_jll, exp_shifted_*, sum_exp_shifted and log_evidence then stay in the output). --source names what the SQL reads in the
    target warehouse; a qualified name goes in a query: --source 'SELECT * FROM a.b'.

    \b
    Example:
      sqlnb sql --model models.duckdb:churn --dialect postgres --source customers
      sqlnb sql test.parquet --model models.duckdb:churn > score.sql
      sqlnb sql --fit train.parquet --label churned --dialect snowflake
      sqlnb sql --model models.duckdb:churn --macro churn > macro.sql
    """
    if dialect not in sql.DIALECTS:
        raise SqlnbError(f"unknown dialect {dialect!r}{suggest(dialect, sql.DIALECTS)}; "
                         f"choose one of: {', '.join(sql.DIALECTS)}")
    if model is None and not training:
        raise SqlnbError("give --model MODEL (or --fit with --label to print the training SQL)")
    if macro is not None:
        if model is None or training or data or source_text or dialect != "duckdb":
            raise SqlnbError("--macro prints a DuckDB macro of --model only; leave out --fit, DATA, "
                             "--source and --dialect")
        if not macro:
            raise SqlnbError("--macro needs a NAME for the macro score_NAME")
        click.echo(export.duckdb_macro(load(settings, model), macro, pretty=pretty), nl=False)
        return
    m = load(settings, model) if model else None
    node = _source_node(source_text, dialect) if source_text else None
    with settings.connect() as con:
        spec = parse_data(data, csv_read_options(delimiter, null_string, header)) if data else None
        data_is_table = isinstance(spec, DbObject)
        source = data_source(con, spec) if spec is not None else None
        if source is not None and (node is not None or data_is_table):
            # What the SQL reads in the target: --source, or DATA's table by its own name
            # (not through the read-only attachment used here to learn its columns).
            source = dataclasses.replace(source, expr=node if node is not None else sql.table(spec.name))
        if training:
            text = _training_sql(m, source, node, label, dialect, pretty,
                                 feature_plan_args(kind, feature_kind, features, exclude, weight, binarize), con)
        else:
            target = source if source is not None else (
                Query(source_text) if node is not None and isinstance(node, sqlglot.exp.Subquery)
                else Table(source_text or DEFAULT_SOURCE))
            text = m.to_sql(dialect, source=target, con=con, pretty=pretty) + ";"
    click.echo(text)


def _training_sql(m, source: Source | None, node, label, dialect, pretty, plan: dict, con) -> str:
    """The statistics query (and, where categorical counts need it, the GROUPING SETS
    counts query) that ``sqlnb fit`` runs, for the model's plan or for the options. A
    weighted model's Gaussian second pass needs the first pass's means and is not shown."""
    if m is not None:
        if m.kind != "naive_bayes":
            raise SqlnbError(f"--fit prints naive Bayes training SQL; this model is {m.kind!r}")
        label, weight, feats = m.label, m.weight, m.features
        if source is None:
            columns = {f.name: f.sql_type for f in feats} | {label: m.label_type}
            source = Source(node if node is not None else sql.table(DEFAULT_SOURCE), columns, "the source")
        else:
            source.require([label, *[f.name for f in feats]] + ([weight] if weight else []), "model column")
    else:
        if not label:
            raise SqlnbError("--fit without --model needs --label COL (and DATA or a --source DuckDB can read)")
        if source is None:
            if node is None or not isinstance(node, sqlglot.exp.Subquery):
                raise SqlnbError("--fit needs the source's columns: give DATA (files or DB.duckdb:TABLE) "
                                 "or a --source query DuckDB can read")
            source = dataclasses.replace(resolve(Query(sql.render(node.this)), con), expr=node)
        weight = plan["weight"]
        feats = plan_features(source, label, **plan)
    return "\n\n".join(sql.render(s, dialect, pretty=pretty) + ";"
                       for s in export.fit_queries(source, label, feats, dialect, weight))


@cli.command()
@model_option
@format_option
@click.option("--top", type=click.IntRange(min=0), default=5, show_default=True,
              help="Top features listed per family.")
@click.option("--top-terms", "top_terms_n", type=click.IntRange(min=1), metavar="N",
              help="Also the N terms that most indicate each class, per token bag.")
@click.pass_obj
def show(settings: Settings, model, fmt, top, top_terms_n):
    """Describe MODEL: label and classes, features and their families,
    hyperparameters, sizes, and the features that separate the classes most.

    \b
    Example:
      sqlnb show --model models.duckdb:churn
      sqlnb show --model models.duckdb:churn --format json --top 10
      sqlnb show --model models.duckdb:spam --top-terms 5
    """
    m = load(settings, model)
    d = describe(m, top)
    terms = {}
    if top_terms_n is not None:
        bags = [f.name for f in getattr(m, "features", []) if getattr(f, "bag", None) is not None]
        if not bags:
            raise SqlnbError("--top-terms lists the terms of token bags; this model has none")
        terms = {b: top_terms(m, b, top_terms_n).to_pylist() for b in bags}
    if fmt == "json":
        click.echo(dump_json(d | ({"top_terms": terms} if terms else {})))
        return
    click.echo(show_text(d))
    for bag, rows in terms.items():
        click.echo(f"\ntop terms of {bag}")
        for cls in dict.fromkeys(r["class"] for r in rows):
            click.echo(f"  {cls}: " + ", ".join(r["term"] for r in rows if r["class"] == cls))


@cli.command()
@click.argument("db", metavar="DB.duckdb")
@format_option
@click.pass_obj
def models(settings: Settings, db, fmt):
    """List the models saved in a DuckDB database.

    \b
    Example:
      sqlnb models models.duckdb
      sqlnb models models.duckdb --format json
    """
    with settings.connect(db, read_only=True) as con:
        found = list_models(con)
    if fmt == "json":
        click.echo(dump_json(found))
    elif found:
        click.echo(models_text(found))
    else:
        summary(f"no models in {db}")


@cli.command()
@model_option
@click.pass_obj
def drop(settings: Settings, model):
    """Delete MODEL and its tables (in one transaction).

    \b
    Example:
      sqlnb drop --model models.duckdb:old-churn
    """
    loc = model_location(settings, model)
    if isinstance(loc, str):
        settings.warehouse().drop_model(loc)
        summary(f"dropped {loc!r} on {settings.engine}")
        return
    if not os.path.exists(loc.db):
        raise SqlnbError(f"database {loc.db!r} does not exist; check the path")
    with settings.connect(loc.db) as con:
        drop_model(con, loc.name)
    summary(f"dropped {loc.name!r} from {loc.db}")


@cli.command()
@click.option("--db", metavar="PATH", help="Database to save the model 'demo' in (default: DIR/demo.duckdb).")
@click.option("--dir", "directory", metavar="DIR", help="Keep the Parquet files here (default: a temporary directory).")
@click.option("--rows", type=click.IntRange(min=20), default=10_000, show_default=True, help="Rows to generate.")
@click.option("--seed", type=int, default=42, show_default=True, help="Random seed (same seed, same data).")
@replace_option
@click.pass_obj
def demo(settings: Settings, db, directory, rows, seed, replace):
    """Generate a synthetic data set in DuckDB, then fit, score, evaluate and show.

    Customers in three segments with numeric, categorical and boolean columns and a few
    NULLs, made with SQL (setseed + random()), split 70/30 into train/test Parquet.

    \b
    Example:
      sqlnb demo
      sqlnb demo --dir demo --rows 100000 --seed 7
    """
    start = time.perf_counter()
    with settings.working():
        text = demo_module.run(settings.connect, directory, db, rows, seed, replace)
    click.echo(text)
    summary(f"demo took {time.perf_counter() - start:.2f} s")


# -- more commands: model selection, generative use, text -------------------------------------

def duckdb_only(settings: Settings, command: str) -> None:
    if settings.remote:
        raise SqlnbError(f"sqlnb {command} runs in DuckDB only; use --engine duckdb")


def _grid_value(text: str) -> Any:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    try:
        return float(text)
    except ValueError:
        return text


def parse_grid(values: tuple[str, ...]) -> dict[str, list] | None:
    """``--grid NAME=V1,V2`` (repeatable) -> {NAME: [V1, V2]}; numbers become floats."""
    grid = {}
    for item in values:
        name, eq, rest = item.partition("=")
        vals = [v.strip() for v in rest.split(",") if v.strip()]
        if not eq or not name.strip() or not vals:
            raise SqlnbError(f"--grid takes NAME=V1,V2,..., not {item!r}")
        grid[name.strip().replace("-", "_")] = [_grid_value(v) for v in vals]
    return grid or None


def cv_text(r) -> str:
    """Per grid point: each metric per fold and its mean; then the best point."""
    def params(p: dict) -> str:
        return ", ".join(f"{k}={v}" for k, v in p.items()) or "(defaults)"
    width = max(len("params"), *(len(params(x["params"])) for x in r.results))
    head = f"{'params':<{width}}  {'metric':<8}  " + "  ".join(f"{'fold ' + str(i + 1):>7}" for i in range(r.folds))
    lines = [f"{r.folds}-fold cross-validation of {r.model} (seed {r.seed}), rows per fold: "
             + ", ".join(map(str, r.fold_rows)), "", head + f"  {'mean':>7}"]
    for x in r.results:
        for metric, name in (("accuracy", "accuracy"), ("log_loss", "log loss")):
            cells = "  ".join(f"{v:>7.4f}" for v in x[metric])
            lines.append(f"{params(x['params']) if metric == 'accuracy' else '':<{width}}  {name:<8}  {cells}"
                         f"  {x['mean_' + metric]:>7.4f}")
    lines += ["", f"best ({r.scoring}): {params(r.best_params)}"]
    return "\n".join(lines)


@cli.command()
@click.argument("data")
@click.option("--label", "-y", required=True, metavar="COL", help="The label column.")
@click.option("--model", "-m", "model", metavar="DB.duckdb:NAME", help="With --refit: where to save the best model.")
@model_kind_option
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True, help="Number of folds.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the fold hash.")
@click.option("--grid", multiple=True, metavar="NAME=V1,V2",
              help="Hyperparameter values to try (repeatable: the grid is their product).")
@click.option("--scoring", type=click.Choice(["accuracy", "log_loss"]), default="accuracy", show_default=True,
              help="What picks the best grid point.")
@click.option("--refit", is_flag=True, help="Fit the best grid point on all rows and save it as --model.")
@click.option("--features", multiple=True, metavar="COL,...", help="Feature columns (default: all but the label).")
@click.option("--exclude", multiple=True, metavar="COL,...", help="Columns that are not features.")
@click.option("--copy/--no-copy", "copy_source", default=True, show_default=True,
              help="Read DATA once into a temporary table and cross-validate on the copy; --no-copy reads DATA twice.")
@format_option
@csv_options
@replace_option
@click.pass_obj
def cv(settings: Settings, data, label, model, kind, folds, seed, grid, scoring, refit, features, exclude, copy_source, fmt,
       delimiter, null_string, header, replace):
    """Cross-validate on DATA, optionally over a grid of hyperparameters.

    Rows go to folds by a hash of their values (and --seed); one scan collects every
    fold's statistics. Prints accuracy and log loss per fold and their means; with
    --refit the best grid point is fitted on all rows and saved as --model.

    \b
    Example:
      sqlnb cv train.parquet --label y --grid 'alpha=0.1,0.5,1' --grid 'estimator=map,posterior-mean'
      sqlnb cv train.parquet --label y --kind lda --grid 'shrinkage=0,0.1,0.5' --refit \\
          --model models.duckdb:best --format json
    """
    duckdb_only(settings, "cv")
    if refit != (model is not None):
        raise SqlnbError("--refit and --model go together: --refit saves the best model as --model")
    target = parse_model(model) if model else None
    spec = parse_data(data, csv_read_options(delimiter, null_string, header))
    points = parse_grid(grid)
    options = {} if kind in DENSE_KINDS else {"kind": kind}
    if target is not None:
        check_new_model(settings, target, replace)
    with settings.working(), settings.connect() as con:
        r = cross_validate(data_source(con, spec), label, model=kind if kind in DENSE_KINDS else "naive_bayes",
                               con=con, folds=folds, seed=seed, grid=points, scoring=scoring, refit=refit,
                               features=split_list(features), exclude=split_list(exclude),
                               materialize_source=copy_source, **options)
    if target is not None:
        save(settings, r.best_model, target, replace)
    if fmt == "json":
        click.echo(dump_json({k: v for k, v in dataclasses.asdict(
            dataclasses.replace(r, best_model=None)).items() if k != "best_model"}))
    else:
        click.echo(cv_text(r))
    summary(f"cross-validated {len(r.results)} grid points x {folds} folds in {r.seconds:.2f} s"
            + (f"; saved the best as {_model_str(target)}" if target else ""))


def write_text_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` all or nothing (a temporary file moved over it)."""
    with output.atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)


@cli.command()
@click.argument("data")
@click.option("--label", "-y", required=True, metavar="COL", help="The label column.")
@click.option("--test", "test_data", metavar="DATA", help="Test rows (default: a quarter of DATA, by hash).")
@click.option("--models", "kinds", multiple=True, metavar="KIND,...",
              help=f"Model kinds to compare (default: all of {', '.join(api.MODELS)}).")
@click.option("--sizes", multiple=True, metavar="N,...", help="Training sizes (default: 8 log-spaced sizes).")
@click.option("--repeats", type=click.IntRange(min=1), default=5, show_default=True, help="Random subsets per size.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the subsets (and of the split).")
@click.option("--features", multiple=True, metavar="COL,...", help="Feature columns (default: all but the label).")
@click.option("--exclude", multiple=True, metavar="COL,...", help="Columns that are not features.")
@click.option("--plot", metavar="FILE.svg", help="Also draw the learning curves as an SVG file.")
@click.option("--binarize", type=float, default=None, metavar="T",
              help="Numeric features become indicators x > T for every kind (Bernoulli naive Bayes).")
@click.option("--C", "C", type=float, default=None, metavar="FLOAT",
              help="Inverse L2 penalty of logistic regression (default 1.0, as scikit-learn; "
                   "Ng & Jordan compare with unpenalised logistic regression, e.g. --C 1e4).")
@format_option
@replace_option
@click.pass_obj
def compare(settings: Settings, data, label, test_data, kinds, sizes, repeats, seed, features, exclude, plot,
            binarize, C, fmt, replace):
    """Learning curves: test error of naive Bayes, LDA, QDA and logistic regression
    against the number of training rows.

    Prints mean test error (%) ± std over --repeats random subsets per size (a Markdown
    table); --plot draws them (written to a temporary file, then moved over FILE.svg).
    Naive Bayes takes categorical columns as they are; LDA, QDA and logistic regression
    their one-hot indicators (categories from the training rows). --binarize T turns
    numeric features into indicators x > T for every kind (Bernoulli naive Bayes): with
    a weak penalty (--C 1e4) that is Ng & Jordan's generative-discriminative pair.

    \b
    Example:
      sqlnb compare train.parquet --label y --test test.parquet --plot curves.svg
      sqlnb compare data.parquet --label y --sizes 20,50,100 --repeats 3 --models naive_bayes,lda
    """
    from sqlnb.workflows import compare as compare_module
    from sqlnb.workflows.cv import fold_expression, fold_source
    from sqlnb.io.locations import FileOut
    duckdb_only(settings, "compare")
    if C is not None and not (C > 0 and C < float("inf")):
        raise SqlnbError(f"--C must be a positive finite number, not {C!r}")
    if plot is not None:
        if not plot.lower().endswith(".svg"):
            raise SqlnbError(f"--plot writes SVG; give a .svg file name, not {plot!r}")
        output.check_target(FileOut(plot, "svg"), replace)
    try:
        size_list = [int(s) for s in split_list(sizes)] if sizes else None
    except ValueError:
        raise SqlnbError(f"--sizes takes whole numbers, not {','.join(sizes)!r}") from None
    spec = parse_data(data)
    test_spec = parse_data(test_data) if test_data else None
    with settings.working(), settings.connect() as con:
        train = data_source(con, spec)
        train.require([label], "label column")
        if test_spec is not None:
            test = data_source(con, test_spec)
        else:
            fold = fold_expression(train, 4, seed)
            train, test = fold_source(train, fold, 0, held_out=False), fold_source(train, fold, 0)
        train, test, options = compare_module.encode(con, train, test, label, split_list(features),
                                                     split_list(exclude), binarize)
        if C is not None:
            options["logistic"]["C"] = C
        rows = compare_module.learning_curves(
            train, test, label, con=con, models=split_list(kinds) or api.MODELS, sizes=size_list,
            repeats=repeats, seed=seed, options=options)
    table = compare_module.summarize(rows)
    if plot is not None:
        write_text_file(plot, compare_module.svg_plot(table, f"Learning curves: {label}"))
    click.echo(dump_json(table) if fmt == "json" else compare_module.markdown_table(table), nl=fmt == "json")
    summary(f"compared {len(set(r['model'] for r in rows))} model kinds" + (f"; plot in {plot}" if plot else ""))


@cli.command()
@click.argument("data")
@model_option
@click.option("--decay", type=click.FloatRange(0, 1, min_open=True), metavar="D",
              help="Down-weight the model's past rows by D in (0, 1] first.")
@csv_options
@click.pass_obj
def update(settings: Settings, data, model, decay, delimiter, null_string, header):
    """Update naive Bayes MODEL with the new rows of DATA (exactly the refit on all rows).

    The model is replaced under the same name in one transaction: a failed update leaves
    it as it was.

    \b
    Example:
      sqlnb update lake/2026-06/*.parquet --model models.duckdb:churn
      sqlnb update today.csv --model models.duckdb:churn --decay 0.9
    """
    duckdb_only(settings, "update")
    loc = parse_model(model)
    spec = parse_data(data, csv_read_options(delimiter, null_string, header))
    m = load(settings, model)
    with settings.working(), settings.connect() as con:
        m = api_update(m, data_source(con, spec), con=con, decay=decay)
    save(settings, m, loc, replace=True)
    summary(f"updated {_model_str(loc)}: {m.stats.n_rows:,} rows in all")


@cli.command()
@model_option
@click.option("-n", "--rows", "n", type=click.IntRange(min=1), required=True, metavar="N", help="Rows to draw.")
@click.option("--class", "classes", multiple=True, metavar="C,...", help="Draw only these classes (repeatable).")
@click.option("--seed", type=int, help="Random seed (same seed, same rows).")
@out_option
@replace_option
@click.pass_obj
def sample(settings: Settings, model, n, classes, seed, out, replace):
    """Draw N synthetic rows from naive Bayes MODEL's joint distribution p(x, class).

    Classes follow the model's prior (restricted to --class when given); features are
    drawn given the class. Written like score's OUT.

    \b
    Example:
      sqlnb sample --model models.duckdb:churn -n 1000 --seed 1 --out synthetic.parquet
      sqlnb sample --model models.duckdb:churn -n 5 --class yes --out -
    """
    parse_out(out)
    m = load(settings, model)
    chosen = split_list(classes)
    if chosen is not None:
        by_text = {str(c): c for c in m.classes}
        unknown = [c for c in chosen if c not in by_text]
        if unknown:
            raise SqlnbError(f"--class {unknown[0]!r} is not a class of the model{suggest(unknown[0], list(by_text))}; "
                             f"classes: {', '.join(by_text)}")
        chosen = [by_text[c] for c in chosen]
    rows = api_sample(m, n, classes=chosen, seed=seed)
    summary(f"sampled {write_out(settings, out, replace, arrow_rows(rows))}")


@cli.command()
@click.argument("data")
@model_option
@click.option("--quantile", type=click.FloatRange(0, 1, min_open=True, max_open=True), default=0.01,
              show_default=True, metavar="Q", help="Share of DATA's rows to call novel.")
@format_option
@csv_options
@click.pass_obj
def novelty(settings: Settings, data, model, quantile, fmt, delimiter, null_string, header):
    """Calibrate MODEL's novelty threshold: the Q quantile of ln p(x) over DATA (usually
    the training rows), stored in the model for 'sqlnb score --flag-novel'.

    \b
    Example:
      sqlnb novelty train.parquet --model models.duckdb:churn --quantile 0.01
      sqlnb score new.parquet --model models.duckdb:churn --flag-novel --out flagged.parquet
    """
    duckdb_only(settings, "novelty")
    loc = parse_model(model)
    spec = parse_data(data, csv_read_options(delimiter, null_string, header))
    m = load(settings, model)
    with settings.working(), settings.connect() as con:
        m = novelty_threshold(m, data_source(con, spec), quantile, con=con)
    save(settings, m, loc, replace=True)
    found = m.report["novelty"]
    click.echo(dump_json(found) if fmt == "json" else
               f"novelty threshold {found['threshold']:.6g} (log evidence quantile {found['quantile']} "
               f"over {found['rows']:,} rows)")


@cli.command("fit-em")
@click.argument("labelled", metavar="DATA")
@click.option("--unlabelled", metavar="DATA2", help="Unlabelled rows (default: DATA's rows with a NULL label).")
@click.option("--label", "-y", required=True, metavar="COL", help="The label column of DATA.")
@model_option
@click.option("--kind", type=click.Choice(["auto", *KINDS]), default="auto", show_default=True,
              help="Naive Bayes family of every feature.")
@click.option("--features", multiple=True, metavar="COL,...", help="Feature columns.")
@click.option("--exclude", multiple=True, metavar="COL,...", help="Columns that are not features.")
@click.option("--alpha", type=float, help="Pseudo-count of discrete features (default 1).")
@click.option("--max-iter", type=click.IntRange(min=0), default=50, show_default=True, help="Most EM iterations.")
@click.option("--tol", type=click.FloatRange(min=0), default=1e-6, show_default=True,
              help="Stop when the log-likelihood per row changes by at most this.")
@click.option("--unlabelled-weight", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Weight of each unlabelled row.")
@replace_option
@click.pass_obj
def fit_em_command(settings: Settings, labelled, unlabelled, label, model, kind, features, exclude, alpha,
                   max_iter, tol, unlabelled_weight, replace):
    """Fit naive Bayes on labelled and unlabelled rows by EM (semi-supervised).

    \b
    Example:
      sqlnb fit-em labelled.parquet --unlabelled pool.parquet --label topic --model models.duckdb:em
      sqlnb fit-em mixed.parquet --label topic --model models.duckdb:em --max-iter 20
    """
    duckdb_only(settings, "fit-em")
    loc = parse_model(model)
    spec, spec2 = parse_data(labelled), parse_data(unlabelled) if unlabelled else None
    check_new_model(settings, loc, replace)
    hyper = {"alpha": alpha} if alpha is not None else {}
    with settings.working(), settings.connect() as con:
        m = api_fit_em(data_source(con, spec), data_source(con, spec2) if spec2 else None, label=label, con=con,
                       max_iter=max_iter, tol=tol, unlabelled_weight=unlabelled_weight, kind=kind,
                       features=split_list(features), exclude=split_list(exclude), **hyper)
    save(settings, m, loc, replace)
    summary(f"fitted {_model_str(loc)} by EM")


@cli.command("fit-long")
@click.argument("tokens")
@click.argument("labels")
@click.option("--id", "id_col", required=True, metavar="COL", help="Document id column (both tables).")
@click.option("--token", required=True, metavar="COL", help="Token column of TOKENS.")
@click.option("--count", metavar="COL", help="Count column of TOKENS (default: one row per occurrence).")
@click.option("--label", "-y", required=True, metavar="COL", help="Label column of LABELS.")
@model_option
@click.option("--kind", type=click.Choice(["multinomial", "bernoulli", "complement"]), default="multinomial",
              show_default=True, help="Naive Bayes family of the token bag.")
@click.option("--alpha", type=float, help="Pseudo-count (default 1).")
@text_options
@replace_option
@click.pass_obj
def fit_long_command(settings: Settings, tokens, labels, id_col, token, count, label, model, kind, alpha,
                     token_pattern, no_lowercase, stop_words, min_df, max_df, max_features, select_k, replace):
    """Fit naive Bayes on a long token table: TOKENS holds (id, token[, count]) rows,
    LABELS one (id, label) row per document.

    \b
    Example:
      sqlnb fit-long db.duckdb:tokens db.duckdb:docs --id doc --token term --count n --label topic \\
          --model models.duckdb:topics --min-df 2
    """
    duckdb_only(settings, "fit-long")
    if token_pattern or no_lowercase:
        raise SqlnbError("--token-pattern and --no-lowercase apply to text columns, not to a token table")
    loc = parse_model(model)
    tok_spec, lab_spec = parse_data(tokens), parse_data(labels)
    text = text_args(None, None, stop_words, min_df, max_df, max_features, select_k)
    check_new_model(settings, loc, replace)
    hyper = {"alpha": alpha} if alpha is not None else {}
    with settings.working(), settings.connect() as con:
        m = fit_long(data_source(con, tok_spec), data_source(con, lab_spec), id=id_col, token=token, label=label,
                     count=count, kind=kind, con=con, text=text, **hyper)
        m.log_parameters()
    save(settings, m, loc, replace)
    summary(f"fitted {_model_str(loc)}: {len(m.classes)} classes")


@cli.command("score-long")
@click.argument("tokens")
@click.option("--docs", metavar="DATA", help="One row per document to score (default: TOKENS' distinct ids).")
@model_option
@out_option
@click.option("--keep", multiple=True, metavar="COL,...", help="Columns of --docs to keep (default: all).")
@click.option("--no-proba", is_flag=True, help="Only the prediction, no proba_<class> columns.")
@replace_option
@click.pass_obj
def score_long(settings: Settings, tokens, docs, model, out, keep, no_proba, replace):
    """Score documents given as a long token table with a MODEL from 'sqlnb fit-long'.

    \b
    Example:
      sqlnb score-long db.duckdb:new_tokens --model models.duckdb:topics --out scored.parquet
    """
    from sqlnb.source import Query as QuerySpec
    from sqlnb.models.naive_bayes import text as text_module
    duckdb_only(settings, "score-long")
    parse_out(out)
    tok_spec, doc_spec = parse_data(tokens), parse_data(docs) if docs else None
    keep_cols = [] if keep == ("",) else split_list(keep)
    m = load(settings, model)
    bags = [f for f in getattr(m, "features", []) if f.bag is not None and f.bag.get("layout") == "long"]
    if not bags:
        raise SqlnbError("score-long scores models from 'sqlnb fit-long'; use 'sqlnb score'")
    outputs = ("prediction",) if no_proba else ("proba", "prediction")

    def query(con, own_db):
        tok = text_module.resolve_long(con, data_source(con, tok_spec, own_db), bags[0])
        if doc_spec is None:
            key = sql.col(bags[0].bag["id"], "src")
            doc = QuerySpec(sql.render(sqlglot.exp.select(key).from_(tok.from_("src")).group_by(key.copy())))
        else:
            doc = data_source(con, doc_spec, own_db)
        doc_src = text_module.resolve_long(con, doc, bags[0], docs=True)
        return text_module.long_scoring_query(m, tok, doc_src, outputs, keep_cols, con)
    summary(f"scored {write_out(settings, out, replace, query)}")



def main(argv: list[str] | None = None) -> None:
    """Console entry point (``sqlnb``, ``python -m sqlnb``)."""
    cli.main(args=argv, prog_name="sqlnb")

