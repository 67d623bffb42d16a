"""What every command runs inside: the exit codes, the one error boundary
(:class:`SqlnbGroup`, which turns library, DuckDB, sqlglot and click errors into one
``Error:`` line) and :class:`Settings`, the global options with the connections they open,
the Ctrl-C watcher and the terminal-only summary line.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import select
import signal
import sys
import threading
import warnings
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Iterator

import click

from sqlnb.errors import ScreeningWarning, SqlnbError

if TYPE_CHECKING:
    import duckdb

# DuckDB, sqlglot, pyarrow and the library are imported where a command first needs them
# (``_invoke_one_line``, ``Settings``), not here: ``sqlnb --version`` and ``sqlnb CMD --help``
# only parse arguments, and those imports are most of a cold start (0.55 s).

EXIT_OK = 0
#: The command ran but its check failed (``evaluate --min-accuracy``).
EXIT_FAIL = 1
#: Bad input: a usage error or a one-line ``Error:`` about the data, model or options.
EXIT_USAGE = 2
#: Another process kept the model store for longer than ``--wait`` (``EX_TEMPFAIL``): the
#: same command run later can succeed (:class:`~sqlnb.errors.StoreBusy`).
EXIT_BUSY = 75
#: Interrupted (Ctrl-C); as a shell reports SIGINT.
EXIT_INTERRUPTED = 130
#: Terminated (SIGTERM), cleaned up like Ctrl-C; as a shell reports SIGTERM.
EXIT_TERMINATED = 143


# -- errors: the one boundary ---------------------------------------------------------------

class CliError(click.ClickException):
    """An error shown as one ``Error: ...`` line with ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE):
        super().__init__(" ".join(str(message).splitlines()).strip())
        self.exit_code = exit_code


def _usage_line(e: click.UsageError) -> CliError:
    where = e.ctx.command_path if e.ctx is not None else "sqlnb"
    return CliError(f"{e.format_message()} (see '{where} --help')", EXIT_USAGE)


def _interrupted(settings: Any = None) -> click.exceptions.Exit:
    if getattr(settings, "stopped_by", None) == signal.SIGTERM:
        click.echo("Error: terminated; nothing was written", err=True)
        return click.exceptions.Exit(EXIT_TERMINATED)
    click.echo("Error: interrupted; nothing was written", err=True)
    return click.exceptions.Exit(EXIT_INTERRUPTED)


class SqlnbGroup(click.Group):
    """The ``sqlnb`` group: turns every error a command raises into one line.

    * :class:`~sqlnb.errors.SqlnbError` (the library's user errors) -> its message;
    * DuckDB and sqlglot errors that reach here (e.g. a value that fails to convert
      while scoring, a query that does not parse) -> their first meaningful line;
    * errors of an engine's client library (pyspark, py4j, psycopg) -> ``Spark: ...``
      or ``PostgreSQL: ...`` and their first line (:func:`sqlnb.engines.engine_error`);
    * a closed stdout (``| head`` has read enough) -> exit 0, quietly;
    * click usage errors -> one line with a pointer to ``--help``;
    * KeyboardInterrupt and DuckDB's interrupt -> exit 130 (143 when SIGTERM set them
      off). Writers clean up on the way out (temporary files removed, transactions
      rolled back), so nothing is left behind.
    """

    #: Set by :func:`sqlnb.cli.main` while it runs: freeze what is imported once the
    #: command's module is (see :meth:`get_command`).
    freeze_imports = False

    def __init__(self, *args, lazy_commands: dict[str, str] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        #: ``{name: "module:function"}`` of commands in :mod:`sqlnb.cli`, imported on first use.
        self.lazy_commands = dict(lazy_commands or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *self.lazy_commands})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy_commands:
            import importlib

            module, function = self.lazy_commands[name].split(":")
            self.add_command(getattr(importlib.import_module(f"sqlnb.cli.{module}"), function), name)
            if self.freeze_imports:
                # What is imported by now (click, DuckDB, sqlglot, numpy, the library) lives
                # as long as the process. Frozen, Python's cyclic garbage collector stops
                # walking it: the full collection that a command's first SQL rendering set
                # off (the import of sqlglot's DuckDB generator allocates enough) took
                # 0.01-0.06 s of every command (benchmarks/README.md). Only the
                # ``sqlnb`` process does this (:func:`sqlnb.cli.main`); a caller running the
                # group in its own process (click's test runner) keeps its collector as it is.
                gc.freeze()
        return self.commands.get(name)

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            raise _usage_line(e) from None

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; notes the library gives as :class:`~sqlnb.errors.ScreeningWarning`
        (columns left out of a fit) go to stderr as plain lines once it has succeeded, so a
        failed command still prints its one ``Error:`` line only."""
        notes: list[str] = []
        with warnings.catch_warnings():
            shown = warnings.showwarning

            def show(message, category, *args, **kwargs):
                if issubclass(category, ScreeningWarning):
                    if str(message) not in notes:  # a file read twice says it once
                        notes.append(str(message))
                else:
                    shown(message, category, *args, **kwargs)
            warnings.showwarning = show
            warnings.simplefilter("always", ScreeningWarning)
            result = self._invoke_one_line(ctx)
        for line in notes:
            click.echo(line, err=True)
        return result

    def _invoke_one_line(self, ctx: click.Context) -> Any:
        import duckdb
        import sqlglot

        from sqlnb import engines
        from sqlnb.source import _first_line, csv_error_line

        try:
            return super().invoke(ctx)
        except click.exceptions.NoArgsIsHelpError:
            raise
        except click.UsageError as e:
            raise _usage_line(e) from None
        except SqlnbError as e:
            raise CliError(str(e), e.exit_code) from None
        except engines.engine_error_types() as e:  # pyspark, py4j, psycopg: before RuntimeError
            raise CliError(engines.engine_error(e)) from None
        except (KeyboardInterrupt, duckdb.InterruptException):
            raise _interrupted(ctx.obj) from None
        except RuntimeError as e:
            # Ctrl-C while DuckDB runs a query surfaces as RuntimeError("Query interrupted")
            # (DuckDB's own SIGINT handling), not as KeyboardInterrupt.
            if "interrupted" not in str(e).lower():
                raise
            raise _interrupted(ctx.obj) from None
        except duckdb.Error as e:
            raise CliError(csv_error_line(e) or f"DuckDB: {_first_line(e)}") from None
        except sqlglot.errors.SqlglotError as e:
            raise CliError(f"SQL: {_first_line(e)}") from None
        except BrokenPipeError:
            if not _stdout_closed():
                raise CliError("cannot write: the pipe was closed") from None
            _quiet_stdout()
            raise click.exceptions.Exit(EXIT_OK) from None
        except OSError as e:
            where = f" {e.filename!r}" if e.filename else ""
            raise CliError(f"cannot access{where}: {e.strerror or e}") from None

    def main(self, *args, **kwargs) -> Any:
        """Run the command, then flush stdout while a closed pipe can still be caught:
        Python's own flush at exit would print an exception and exit 120. The exit code
        stays the command's."""
        try:
            return super().main(*args, **kwargs)
        finally:
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                _quiet_stdout()


def _stdout_closed() -> bool:
    """Whether stdout is a pipe or socket whose reader has gone (``| head`` done).

    ``poll`` reports POLLERR on the write end of a pipe without readers. Where it is
    missing (Windows), a BrokenPipeError is taken to come from stdout."""
    if not hasattr(select, "poll"):
        return True
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))


def _quiet_stdout() -> None:
    """After a reader stopped early (``sqlnb score ... --out - | head``), which is not an
    error: point stdout at the null device so that later flushes have nowhere to fail."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, OSError):  # not a real file (click's test runner)
        return
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, fd)
    os.close(null)


# -- settings shared by all commands --------------------------------------------------------

@dataclasses.dataclass
class Settings:
    """The global options (DuckDB resources, the engine), whether a terminal is watching
    (``terminal``: only then are summaries and DuckDB's progress bar shown), and the
    connections a Ctrl-C must interrupt."""

    threads: int | None = None
    memory_limit: str | None = None
    temp_directory: str | None = None
    terminal: bool = False
    engine: str = "duckdb"
    dsn: str | None = None
    master: str | None = None
    warehouse_dir: str | None = None
    verbose: bool = False
    spark_remote: str | None = None  # --remote: a Spark Connect URL
    wait: float | None = None  # --wait: seconds to wait for another process's lock on a store
    interrupted: threading.Event = dataclasses.field(default_factory=threading.Event)
    stopped_by: int | None = None  # the signal that set ``interrupted``: SIGINT or SIGTERM
    connections: list = dataclasses.field(default_factory=list)

    _warehouse: Any = None
    _wait_token: Any = None

    def apply_wait(self) -> None:
        """Make ``--wait`` the wait of every open of a database file in this command
        (:data:`sqlnb.engines.waiting.WAIT`: also ATTACHes of DATA tables); undone by
        :meth:`close`."""
        from sqlnb.engines import waiting

        if self.wait is not None and self._wait_token is None:
            self._wait_token = waiting.WAIT.set(float(self.wait))

    @property
    def remote(self) -> bool:
        """Whether DATA and MODEL live on a warehouse (--engine postgres|spark)."""
        return self.engine != "duckdb"

    def require_duckdb(self, command: str) -> None:
        """Refuse a command that runs in DuckDB only when --engine names a warehouse."""
        if self.remote:
            raise SqlnbError(f"sqlnb {command} runs in DuckDB only; use --engine duckdb")

    def summary(self, message: str) -> None:
        """A one-line summary on stderr, for people at a terminal only."""
        if self.terminal:
            click.echo(message, err=True)

    def warehouse(self):
        """The --engine connection (opened once per command, closed by :meth:`close`)."""
        if self._warehouse is None:
            from sqlnb import engines

            self._warehouse = engines.connect(self.engine, dsn=self.dsn, master=self.master,
                                              warehouse=self.warehouse_dir, quiet=not self.verbose,
                                              remote=self.spark_remote)
        return self._warehouse

    def close(self) -> None:
        close = getattr(self._warehouse, "close", None)
        if close is not None:
            close()
        self._warehouse = None
        if self._wait_token is not None:
            from sqlnb.engines import waiting

            try:
                waiting.WAIT.reset(self._wait_token)
            except ValueError:  # set in another context (a thread): nothing to undo here
                pass
            self._wait_token = None

    def connect(self, path: str | None = None, read_only: bool = False) -> duckdb.DuckDBPyConnection:
        """A connection with the resource settings; DuckDB's progress bar only for a
        terminal (:func:`sqlnb.connect` opens it with the bar off, which piped output needs).

        Opening a connection is where a new step of a command starts, so an interrupt
        that arrived while Python (not DuckDB) was busy stops the command here.
        """
        from sqlnb import api
        from sqlnb.engines.duckdb import show_progress

        if self.interrupted.is_set():
            raise KeyboardInterrupt
        con = api.connect(path, self.threads, self.memory_limit, self.temp_directory, read_only=read_only,
                          wait=self.wait)
        if self.terminal:
            show_progress(con, True)
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
          SIGTERM is handled the same way (exit 143 instead of 130).
        * DuckDB prints its progress bar on stdout; while queries run, stdout is pointed
          at stderr so that the payload stays clean (only when the bar is on).
        """
        with self._interruptible(), self._progress_on_stderr():
            yield

    @contextmanager
    def _interruptible(self) -> Iterator[None]:
        import duckdb

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
        def stop(signum: int) -> None:
            self.stopped_by = self.stopped_by or signum
            self.interrupted.set()

        stops = (signal.SIGINT, signal.SIGTERM)
        old_handlers = {s: signal.signal(s, lambda signum, frame: stop(signum)) for s in stops}
        done = threading.Event()

        def watch() -> None:
            while not done.is_set():
                data = os.read(read_fd, 64)
                if not data or done.is_set():
                    return
                for signum in (s for s in stops if s in data):
                    stop(signum)
                if self.interrupted.is_set():
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
            for signum, handler in old_handlers.items():
                signal.signal(signum, handler)
            os.close(read_fd)
            os.close(write_fd)

    @contextmanager
    def _progress_on_stderr(self) -> Iterator[None]:
        if not self.terminal:
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
