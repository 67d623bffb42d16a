"""Running ``sqlnb`` commands as processes that die by SIGKILL at a chosen point.

The processes are forked from a server that has imported sqlnb (``multiprocessing``'s
forkserver): a fork costs milliseconds where a fresh interpreter costs a second or more,
and a fork of the server, unlike one of the test process, holds no DuckDB connection,
thread or Spark JVM of the tests. The command runs with the test hook
``SQLNB_TEST_KILL_AT=<point>`` (:func:`sqlnb.crash.kill_point`).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

from sqlnb.cli import COMMANDS
from sqlnb.crash import TEST_KILL_AT

_CTX = multiprocessing.get_context("forkserver")
# Every command's module, imported once in the server rather than in each fork (the
# server's sys.path is the environment's: sqlnb's modules only, not the tests').
_CTX.set_forkserver_preload(sorted({f"sqlnb.cli.{c.split(':')[0]}" for c in COMMANDS.values()})
                            + ["sqlnb", "sqlnb.engines.postgres", "sqlnb.workflows.select", "pandas",
                               "sqlglot.dialects.duckdb", "sqlglot.dialects.postgres"])


def _child(args: list[str], point: str | None, log: str, env: dict) -> None:
    """Run ``sqlnb ARGS`` in this forked process (stdout and stderr to ``log``) and exit
    with its code; with ``point``, die there by SIGKILL."""
    os.environ.update(env)
    if point:
        os.environ[TEST_KILL_AT] = point
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    from sqlnb.cli import cli
    code = 0
    try:
        cli.main(args=args, prog_name="sqlnb")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run(args, log: Path, point: str | None = None, kill_after: float | None = None,
        env: dict | None = None) -> int:
    """The exit code of ``sqlnb ARGS`` run as a process (``-9`` when it was killed): at
    the kill point ``point``, or by this process ``kill_after`` seconds after its start."""
    p = _CTX.Process(target=_child, args=([str(a) for a in args], point, str(log), env or {}))
    p.start()
    if kill_after is not None:
        time.sleep(kill_after)
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    p.join(120)
    assert p.exitcode is not None, f"sqlnb {' '.join(map(str, args))} did not end"
    return p.exitcode


def log_text(log: Path) -> str:
    """What the process printed (for a failed assertion), and the file removed."""
    text = log.read_text() if log.exists() else ""
    log.unlink(missing_ok=True)
    return text
