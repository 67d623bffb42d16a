"""Throw-away PostgreSQL server for tests.

:func:`postgres_server` runs ``initdb`` + ``pg_ctl`` in a fresh temporary
directory, serves on a unix socket inside that directory (optionally also on
TCP ``127.0.0.1``), yields a libpq DSN usable by psycopg 3 and stops and
deletes everything on exit.  Nothing touches the system's own clusters.

The server binaries are looked up in this order:

1. ``$SQLNB_PG_BINDIR``;
2. ``/usr/lib/postgresql/<ver>/bin`` (Debian/Ubuntu; newest version wins);
3. ``initdb`` found on ``PATH`` (Homebrew, Fedora, ...).

On Debian/Ubuntu install them with ``bash .ci/install-engines.sh`` (which runs
``apt-get install --no-install-recommends postgresql`` without creating a
cluster).  PostgreSQL refuses to run as root, so when the tests run as root
the server runs as the ``postgres`` system user (created by the Debian
package), or ``$SQLNB_PG_USER``, or ``nobody``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shlex
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator, Optional

__all__ = ["PostgresNotFound", "find_postgres_bindir", "postgres_server"]

INSTALL_HINT = (
    "Install the PostgreSQL server binaries, e.g. `bash .ci/install-engines.sh` "
    "or `sudo apt-get install -y --no-install-recommends postgresql` on "
    "Debian/Ubuntu (`brew install postgresql` on macOS), or point "
    "$SQLNB_PG_BINDIR at a directory containing initdb, pg_ctl and postgres."
)


class PostgresNotFound(RuntimeError):
    """Raised when no PostgreSQL server binaries can be found."""


def _version_key(bindir: str) -> tuple:
    """Sort key for ``/usr/lib/postgresql/<ver>/bin`` paths (numeric version)."""
    ver = Path(bindir).parent.name
    return tuple(int(p) if p.isdigit() else 0 for p in ver.split("."))


def find_postgres_bindir() -> Path:
    """Locate the directory holding ``initdb``, ``pg_ctl`` and ``postgres``.

    Returns
    -------
    pathlib.Path
        Directory with the server binaries.

    Raises
    ------
    PostgresNotFound
        If no usable installation exists; the message says how to install one.
    """
    candidates = []
    if os.environ.get("SQLNB_PG_BINDIR"):
        candidates.append(os.environ["SQLNB_PG_BINDIR"])
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=_version_key, reverse=True
    )
    initdb = shutil.which("initdb")
    if initdb:
        candidates.append(str(Path(initdb).resolve().parent))
    for cand in candidates:
        d = Path(cand)
        if all(os.access(d / exe, os.X_OK) for exe in ("initdb", "pg_ctl", "postgres")):
            return d
    raise PostgresNotFound(
        f"PostgreSQL server binaries not found (looked in {candidates or 'nothing'}). "
        + INSTALL_HINT
    )


def _free_port() -> int:
    """Return a TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_user() -> Optional[pwd.struct_passwd]:
    """System user to run the server as, or None to run as ourselves (non-root)."""
    if os.geteuid() != 0:
        return None
    for name in (os.environ.get("SQLNB_PG_USER"), "postgres", "nobody"):
        if name:
            try:
                return pwd.getpwnam(name)
            except KeyError:
                pass
    raise PostgresNotFound("running as root but no 'postgres' or 'nobody' user exists")


@contextlib.contextmanager
def postgres_server(tcp: bool = False) -> Iterator[str]:
    """Run a throw-away PostgreSQL server for the duration of a ``with`` block.

    The cluster is created with ``--locale=C --encoding=UTF8`` (deterministic
    string ordering), trust authentication, superuser ``postgres``, time zone
    UTC, and durability switched off for speed (``fsync``,
    ``synchronous_commit``, ``full_page_writes`` off).  The server is stopped
    with ``pg_ctl stop -m immediate`` and its directory deleted on exit.

    Parameters
    ----------
    tcp : bool, default False
        Also listen on ``127.0.0.1`` on a free port; the DSN then uses TCP.
        By default the server listens only on a unix socket in its temp dir.

    Yields
    ------
    str
        libpq DSN such as ``"host=/tmp/sqlnb-pg-x port=5432 user=postgres
        dbname=postgres"``, for ``psycopg.connect(dsn)``.

    Raises
    ------
    PostgresNotFound
        If the server binaries are missing.
    RuntimeError
        If initdb or the server fails; the message includes the server log.
    """
    bindir = find_postgres_bindir()
    user = _server_user()
    # As root the server runs as another user, who must be able to reach the
    # directory: /tmp is world-traversable, $TMPDIR might not be.
    tmp = Path(tempfile.mkdtemp(prefix="sqlnb-pg-", dir="/tmp" if user else None))
    data, log = tmp / "data", tmp / "server.log"
    port = _free_port() if tcp else 5432  # without tcp: only names the socket file
    env = dict(os.environ, LC_ALL="C")
    run_as = {}
    if user is not None:
        os.chown(tmp, user.pw_uid, user.pw_gid)
        run_as = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        env["HOME"] = str(tmp)

    def run(*args: str) -> None:
        proc = subprocess.run(
            [str(bindir / args[0]), *args[1:]], cwd=tmp, env=env,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **run_as,
        )
        if proc.returncode != 0:
            server_log = log.read_text(errors="replace") if log.exists() else ""
            raise RuntimeError(
                f"{args[0]} failed ({proc.returncode}):\n{proc.stdout}\n{server_log}"
            )

    listen = "127.0.0.1" if tcp else ""
    opts = (  # pg_ctl hands this string to /bin/sh
        f"-p {port} -k {shlex.quote(str(tmp))} -c listen_addresses={shlex.quote(listen)} "
        "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
        "-c max_connections=20 -c shared_buffers=32MB -c TimeZone=UTC"
    )
    try:
        run("initdb", "-D", str(data), "-U", "postgres", "-A", "trust",
            "--locale=C", "--encoding=UTF8", "--no-sync")
        run("pg_ctl", "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start")
        host = "127.0.0.1" if tcp else str(tmp)
        yield f"host={host} port={port} user=postgres dbname=postgres"
    finally:
        try:
            if (data / "postmaster.pid").exists():  # also after a failed/timed-out start
                run("pg_ctl", "-D", str(data), "-m", "immediate", "-w", "stop")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
