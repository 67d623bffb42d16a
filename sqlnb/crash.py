"""What a writer killed outright (``kill -9``, a crash, a lost machine) leaves behind, and
how the next writer recognises it.

A process ended by SIGKILL runs no ``finally`` and no ``atexit``: whatever it wrote
outside a transaction stays. So every temporary sqlnb writes outside one (an output
file's ``.sqlnb-...`` twin, a Spark model's part tables before its catalog row, a Spark
``--out-table``'s temporary table) carries its writer's :func:`owner` tag, the process id
and the host, and a later writer removes those whose process is gone (:func:`gone`).

:func:`kill_point` is the test hook that simulates such a death at a named place.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import signal
import socket
import uuid
from typing import Callable, TypeVar

_T = TypeVar("_T")

#: Test hook: the name of a :func:`kill_point` at which the process kills itself with
#: SIGKILL (``SQLNB_TEST_KILL_AT=save:part``), to test what a crash there leaves behind.
#: Not for users; unset, every kill point is one dictionary look-up.
TEST_KILL_AT = "SQLNB_TEST_KILL_AT"


def kill_point(name: str) -> None:
    """A place where a writer may die (``save:part``, ``out:commit``, ...): with the test
    hook :data:`TEST_KILL_AT` naming it, the process ends here at once with SIGKILL, as a
    ``kill -9`` would end it.

    ``tests/test_store_kill.py`` sets the hook for each writing command and kill point and
    checks that every model is then the old or the new one and no temporary is left."""
    if os.environ.get(TEST_KILL_AT) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def host() -> str:
    """This machine, as 8 hex digits (a process id means nothing on another host that
    shares the directory or catalog)."""
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def alive(pid: int) -> bool:
    """Whether process ``pid`` of this host exists (someone else's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def owner() -> tuple[int, str]:
    """``(pid, host)`` of this process, for the names of its temporaries."""
    return os.getpid(), host()


def gone(pid: int, where: str) -> bool:
    """Whether the writer ``pid`` on host ``where`` is known to be dead: only a process of
    this host can be checked; another host's is taken to be alive."""
    return where == host() and not alive(pid)


#: ``.sqlnb-<pid>-<host>-<random>-<name>``: the temporaries :func:`atomic_path` writes.
_TEMPORARY = re.compile(r"^\.sqlnb-(\d+)-([0-9a-f]{8})-[0-9a-f]{12}-")


def temporary_name(base: str) -> str:
    """``.sqlnb-<pid>-<host>-<random>-<base>``: a hidden name for a temporary next to
    ``base``, recognisable as sqlnb's and as whose it was (:func:`remove_stale_temporaries`)."""
    return f".sqlnb-{os.getpid()}-{host()}-{uuid.uuid4().hex[:12]}-{base}"


def remove_stale_temporaries(directory: str) -> list[str]:
    """Remove the temporaries that writers on this host left in ``directory`` when they
    were killed (their process is gone); returns their paths. A temporary is a file (a
    DuckDB ``COPY``) or a directory of part files (Spark's writers,
    :mod:`sqlnb.io.engine_output`). A live writer's, another host's and any other file
    are left alone; a symbolic link is never followed."""
    removed = []
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return removed
    for name in names:
        m = _TEMPORARY.match(name)
        if m is None or not gone(int(m.group(1)), m.group(2)):
            continue
        path = os.path.join(directory, name)
        try:
            if os.path.islink(path):
                continue
            if os.path.isfile(path):
                os.remove(path)
                removed.append(path)
            elif os.path.isdir(path):
                shutil.rmtree(path)
                removed.append(path)
        except FileNotFoundError:  # another writer removed it first
            pass
    return removed


def create_whole(path: str | None, write: Callable[[str | None], _T]) -> _T:
    """``write(db)`` into the DuckDB database file ``path``, such that a file this creates
    appears whole or not at all; returns what ``write`` returns.

    ``write`` opens the path it is given, writes (in a transaction) and closes it. When
    ``path`` exists (or is None: in memory), that is ``path`` itself: DuckDB's transaction
    keeps it whole. A new file is written under a temporary name next to it
    (:func:`temporary_name`) and, closed and complete, linked to ``path`` with
    ``os.link``, which fails instead of replacing a file that another process created in
    the meantime; then ``write`` runs again into that file as it now is (a model of the
    same name there is then refused as any existing one is, without ``--replace``). A
    writer killed before the link leaves only the temporary, which the next write in that
    directory, new or not, removes (:func:`remove_stale_temporaries`); a file system without hard
    links gets ``os.rename`` after a check that ``path`` is still missing.
    """
    if path is None:
        return write(path)
    parent, base = os.path.split(path)
    remove_stale_temporaries(parent)  # those of writers killed before (one listdir)
    if os.path.exists(path):
        return write(path)
    tmp = os.path.join(parent, temporary_name(base))
    try:
        done = write(tmp)
        kill_point("new:written")
        try:
            os.link(tmp, path)
        except FileExistsError:  # created by another process while this one wrote
            return write(path)
        except OSError:  # no hard links here (some network and FAT file systems)
            if os.path.exists(path):
                return write(path)
            os.rename(tmp, path)
        kill_point("new:linked")
        return done
    finally:
        for p in (tmp, f"{tmp}.wal"):
            if os.path.lexists(p):
                os.remove(p)
