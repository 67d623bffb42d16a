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
import signal
import socket

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
