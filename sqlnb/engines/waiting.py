"""Waiting, a bounded time, for a DuckDB database file that another process holds.

DuckDB lets one process open a database file for writing, or any number of processes
open it read-only, never both: the file lock it takes at open (``fcntl``) is exclusive
for a writer and shared for readers, and an open that meets a conflicting lock fails at
once with ``IO Error: Could not set lock on file ... (PID n)``. sqlnb holds a models
file only for short moments (a reader while it loads a model, a writer while it saves
one: the data are scanned in a separate in-memory connection), so instead of failing,
every open of a database file here retries with a growing, jittered pause until it gets
the file or the wait runs out (:data:`DEFAULT_WAIT`, ``--wait SECONDS``, ``wait=``). Then
the error is one line naming the process that holds the file (its command line from
``/proc/PID/cmdline`` where there is one) and the fix.

The wait that applies when a call gives none is :data:`WAIT` (a context variable), which
the command line sets from ``--wait`` for the duration of one command.
"""

from __future__ import annotations

import contextvars
import os
import random
import re
import time
from typing import Callable, TypeVar

from sqlnb.errors import SqlnbError, StoreBusy

#: Seconds an open waits for a database file another process holds, by default.
DEFAULT_WAIT = 60.0

#: The wait of calls that give none (the command line's ``--wait``).
WAIT: contextvars.ContextVar[float] = contextvars.ContextVar("sqlnb_wait", default=DEFAULT_WAIT)

#: First pause between two attempts, and the longest one (seconds). A reader waits for a
#: save of a few tens of milliseconds; pauses past 0.1 s would only add idle time, and the
#: jitter keeps processes that wait together from retrying in step.
FIRST_PAUSE = 0.005
LONGEST_PAUSE = 0.1

_T = TypeVar("_T")
_PID = re.compile(r"\(PID (\d+)\)")


def wait_seconds(wait: float | None) -> float:
    """``wait`` checked (a number of seconds, 0 or more), or the ambient :data:`WAIT`."""
    if wait is None:
        return WAIT.get()
    try:
        seconds = float(wait)
    except (TypeError, ValueError):
        seconds = float("nan")
    if not seconds >= 0:  # also NaN
        raise SqlnbError(f"wait must be a number of seconds, 0 or more, not {wait!r}")
    return seconds


def is_lock_conflict(error: BaseException) -> bool:
    """Whether ``error`` is DuckDB's "another process holds this file" at open/attach."""
    return "Could not set lock on file" in str(error)


def holder(error: BaseException) -> str:
    """The process DuckDB names in a lock error: ``PID n: its command line`` (Linux), or
    ``PID n``, or ``another process`` when the message names none."""
    found = _PID.search(str(error))
    if found is None:
        return "another process"
    pid = found.group(1)
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:  # gone already, or no /proc (macOS)
        return f"PID {pid}"
    if len(argv) >= 3 and argv[1:3] == ["-m", "sqlnb"]:
        argv = ["sqlnb", *argv[3:]]
    elif argv:
        argv[0] = os.path.basename(argv[0])  # the PID says which one; the program's name is enough
    command = " ".join(" ".join(argv).split())  # one line, whatever the arguments hold
    return f"PID {pid}: {command[:160] + '...' if len(command) > 160 else command}"


def locked_error(path: str, error: BaseException, seconds: float) -> StoreBusy:
    return StoreBusy(
        f"database {path!r} is held by another process ({holder(error)}) and stayed locked for the "
        f"{seconds:g} s this command waits; run it again once that process has finished, or wait longer "
        "with --wait SECONDS (wait= in Python)")


def retry_locked(action: Callable[[], _T], path: str, wait: float | None = None) -> _T:
    """``action()`` (an open or ATTACH of the database file ``path``), tried again while
    another process holds the file, for at most ``wait`` seconds (:func:`wait_seconds`).

    Raises
    ------
    SqlnbError
        When the file stayed locked: one line naming the holder and the fix.
    """
    import duckdb

    seconds = wait_seconds(wait)
    deadline = time.monotonic() + seconds
    pause = FIRST_PAUSE
    while True:
        try:
            return action()
        except duckdb.Error as e:
            if not is_lock_conflict(e):
                raise
            left = deadline - time.monotonic()
            if left <= 0:
                raise locked_error(os.fspath(path), e, seconds) from None
        time.sleep(min(left, pause * random.uniform(0.5, 1.5)))
        pause = min(pause * 2, LONGEST_PAUSE)


def _flock_holder(path: str) -> str:
    """The process holding a ``flock`` on ``path``, from /proc/locks (Linux), named as
    :func:`holder` names one; ``another process`` elsewhere."""
    try:
        inode = os.stat(path).st_ino
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                fields = line.split()
                if "FLOCK" in fields and len(fields) > 5 and fields[5].endswith(f":{inode}"):
                    return holder(RuntimeError(f"(PID {fields[4]})"))
    except OSError:
        pass
    return "another process"


def hold_directory(path: str, what: str, wait: float | None = None) -> int | None:
    """Take an exclusive ``flock`` on the directory ``path`` for this process, waiting for
    another process's for at most ``wait`` seconds; returns the descriptor that holds it
    (closing it, or the process ending, lets go), or None where ``flock`` is missing.

    For a resource that admits one process at a time and fails at once otherwise (a Spark
    warehouse's embedded Derby metastore): processes queue here instead. The lock is on the
    directory itself, so no lock file is left behind.
    """
    try:
        import fcntl
    except ImportError:  # Windows: no flock; the resource's own error stands
        return None
    seconds = wait_seconds(wait)
    fd = os.open(path, os.O_RDONLY)
    deadline = time.monotonic() + seconds
    pause = FIRST_PAUSE
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            left = deadline - time.monotonic()
            if left <= 0:
                holding = _flock_holder(path)
                os.close(fd)
                raise StoreBusy(f"{what} {path!r} is in use by another process ({holding}) and stayed so for "
                                 f"the {seconds:g} s this command waits; run it again once that process has "
                                 "finished, or wait longer with --wait SECONDS (wait= in Python)") from None
        except BaseException:
            os.close(fd)
            raise
        time.sleep(min(left, pause * random.uniform(0.5, 1.5)))
        pause = min(pause * 4, 0.5)  # held for whole commands (seconds), not for a short write
