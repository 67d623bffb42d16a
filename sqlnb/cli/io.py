"""Models and results for the commands: loading a MODEL, refusing to overwrite one
without ``--replace``, saving it in one transaction (in a DuckDB file or on the engine),
and writing rows to OUT, a table on the engine or a text file, all or nothing.
"""

from __future__ import annotations

import json
import os
import random
import sys
import time
import warnings
from typing import Any, Callable

import duckdb
import sqlglot

from sqlnb import sql
from sqlnb.cli.app import Settings
from sqlnb.cli.options import model_location
from sqlnb.crash import create_whole
from sqlnb.engines.waiting import FIRST_PAUSE, LONGEST_PAUSE, wait_seconds
from sqlnb.errors import SqlnbError
from sqlnb.io import output
from sqlnb.io.locations import DbObject, StdOut, parse_out
from sqlnb.store import load_model, model_names, save_model
from sqlnb.store.catalog import ModelChanged

#: What ``write_out`` writes: a query given the output connection and database.
RowsQuery = Callable[[duckdb.DuckDBPyConnection, "str | None"], sqlglot.exp.Expression]


# -- models -------------------------------------------------------------------------------------

def model_str(loc: DbObject | str) -> str:
    """A saved model's location for summaries: ``'name' in db.duckdb`` or ``'name'``."""
    return repr(loc) if isinstance(loc, str) else f"{loc.name!r} in {loc.db}"


def load(settings: Settings, text: str):
    """The model named by a MODEL argument (its database opened read-only, then closed)."""
    loc = model_location(settings, text)
    if isinstance(loc, str):
        return load_model(settings.warehouse(), loc)
    with settings.connect(loc.db, read_only=True) as con:
        model = load_model(con, loc.name)
    return model


def check_new_model(settings: Settings, loc: DbObject | str, replace: bool) -> None:
    """Refuse, before any work, to overwrite an existing model without --replace."""
    if replace:
        return
    if isinstance(loc, str):
        exists = loc in model_names(settings.warehouse())
    elif os.path.exists(loc.db):
        with settings.connect(loc.db, read_only=True) as con:
            exists = loc.name in model_names(con)
    else:
        exists = False
    if exists:
        where = f"on {settings.engine}" if isinstance(loc, str) else f"in {loc.db!r}"
        raise SqlnbError(f"model {loc if isinstance(loc, str) else loc.name!r} already exists {where}; "
                         "pass --replace to overwrite it")


def save(settings: Settings, m, loc: DbObject | str, replace: bool, expect: str | None = None) -> None:
    """Save ``m`` in one transaction; a models file this creates appears whole or not at
    all (:func:`sqlnb.crash.create_whole`: a failed or killed fit leaves no empty database).
    ``expect``: only over the model stored under that id (see :func:`modify`)."""
    if isinstance(loc, str):
        save_model(m, settings.warehouse(), loc, replace, expect=expect)
        return

    def write(path: str | None) -> None:
        with settings.connect(path) as con:
            save_model(m, con, loc.name, replace, expect=expect)

    with settings.working():
        create_whole(loc.db, write)


#: How many times :func:`modify` redoes a change that another process overtook, at least;
#: it goes on past that while the command's wait (``--wait``) has not run out.
MODIFY_ATTEMPTS = 5


def modify(settings: Settings, text: str, change: Callable[[Any], Any]) -> tuple[Any, DbObject | str]:
    """Read MODEL, ``change`` it (may scan data: no lock is held meanwhile) and save the
    result over it, only if MODEL is still the one read; returns (new model, location).

    Another process may save or drop MODEL while ``change`` runs (``update`` scans its
    data, seconds to minutes): writing over that would silently lose its change. So the
    save expects the id the model was read under (``save_model(expect=)``, checked inside
    the save's transaction, under the store's lock) and, when another model is there now,
    the whole read-change-save runs again: at least :data:`MODIFY_ATTEMPTS` times, and
    beyond that for as long as the command's wait (``--wait``, 60 s by default) lasts,
    after a short jittered pause, so that a burst of saves by other processes delays the
    change instead of failing it. The error that ends it says how often and for how long.
    """
    loc = model_location(settings, text)
    budget = wait_seconds(None)
    start = time.monotonic()
    pause = FIRST_PAUSE
    attempt = 0
    while True:
        attempt += 1
        m = load(settings, text)
        # The notes of an attempt are shown once it is saved: a change redone over a model
        # saved meanwhile would otherwise print its notes (an update's "calibrator dropped")
        # once per attempt.
        with warnings.catch_warnings(record=True) as notes:
            new = change(m)
        try:
            save(settings, new, loc, replace=True, expect=m.stored_id)
            for w in notes:
                warnings.showwarning(w.message, w.category, w.filename, w.lineno)
            return new, loc
        except ModelChanged as e:
            spent = time.monotonic() - start
            if attempt >= MODIFY_ATTEMPTS and spent >= budget:
                raise ModelChanged(f"{str(e).split('; run the command again')[0]}, {attempt} times in "
                                   f"{spent:.1f} s; run the command again once the other writers have "
                                   "finished, or wait longer with --wait SECONDS") from None
        time.sleep(pause * random.uniform(0.5, 1.5))
        pause = min(pause * 2, LONGEST_PAUSE)


# -- results ------------------------------------------------------------------------------------

def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, default=str, ensure_ascii=False)


def write_out(settings: Settings, out: str, replace: bool, query: RowsQuery) -> str:
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
                bound_memory(settings, con)
                rows = query(con, None)
                _bound_ordered_write(settings, con, rows)
                n = output.write(con, rows, tmp, True)
            sys.stdout.flush()
            output.stream(tmp.path, sys.stdout.buffer)
    else:
        def write(path: str | None) -> int | None:
            with settings.connect(path) as con:
                output.check_target(target, replace, con)
                if not isinstance(target, DbObject):
                    bound_memory(settings, con)
                rows = query(con, own_db)
                if not isinstance(target, DbObject):
                    _bound_ordered_write(settings, con, rows)
                return output.write(con, rows, target, replace)

        with settings.working():  # a database file this creates appears whole or not at all
            n = create_whole(own_db, write)
    return f"{'?' if n is None else format(n, ',')} rows into {target}, {time.perf_counter() - start:.2f} s"


def bound_memory(settings: Settings, con: duckdb.DuckDBPyConnection) -> None:
    """Give ``con`` DuckDB's memory limit :data:`~sqlnb.io.output.WRITE_MEMORY_LIMIT`
    unless the user chose one (``--memory-limit``): writes of rows to files and
    ``evaluate``, whose hash aggregates then spill to the temporary directory.

    Writing a file in input order, DuckDB holds every finished batch that is ahead of the
    one being written, and a memory limit is the only back-pressure its ordered COPY has:
    scoring 10M rows x 20 columns peaked at 1.3-1.4 GB without one, ~0.7 GB with 1 GB
    (benchmarks/README.md, "Scoring memory"). It is safe together with
    :func:`_bound_ordered_write` only.
    """
    if settings.memory_limit is None:
        _set(con, "memory_limit", output.WRITE_MEMORY_LIMIT)


def bound_evaluate(settings: Settings, con: duckdb.DuckDBPyConnection) -> bool:
    """Under the defaults (no ``--memory-limit``), give ``con`` the small memory limit
    :data:`~sqlnb.io.output.EVALUATE_MEMORY_LIMIT` and read Parquet without prefetch (which
    loads a whole row group per thread, 150 MiB for 1M rows x 20 DOUBLE): ``evaluate``'s
    statement streams its rows (no sort, no aggregate in DuckDB), so little is held. True
    when it did so."""
    if settings.memory_limit is not None:
        return False
    _set(con, "memory_limit", output.EVALUATE_MEMORY_LIMIT)
    _set(con, "disable_parquet_prefetching", True)
    return True


def bound_evaluate_again(settings: Settings, con: duckdb.DuckDBPyConnection) -> None:
    """The bounds of ``evaluate``'s second run, when the small limit of
    :func:`bound_evaluate` ran out: the 1 GB limit (:func:`bound_memory`) and, unless the
    user chose ``--threads``, one DuckDB thread.

    What runs out is DuckDB's Parquet reader, which holds the current page of every column
    it reads whole, in each thread. pyarrow writes pages of ~1 MB, but DuckDB's own writer
    puts each column of a row group in one page: with 1,048,576-row row groups a DOUBLE
    column's page is 8 MB, and 20 such columns took DuckDB ~0.8 GB on one thread and ~2.4
    GB on two, out of the 1 GB limit whatever the number of classes
    (benchmarks/evaluate_memory.py). One thread reads them in ~0.8 GB, and holds the
    least of rows too wide for the small limit as well.
    """
    bound_memory(settings, con)
    if settings.threads is None:
        _set(con, "threads", 1)


def _bound_ordered_write(settings: Settings, con: duckdb.DuckDBPyConnection, rows: sqlglot.exp.Expression) -> None:
    """Under the default memory limit (no ``--memory-limit``), read Parquet files with large
    row groups without prefetch and, unless the user chose ``--threads``, with fewer
    threads (:func:`~sqlnb.io.output.ordered_write_settings`).

    The ordered COPY collects each input batch (a Parquet row group) whole before it can
    write it, in every thread: with pyarrow's 1,048,576-row row groups two threads need
    more than the 1 GB limit, and the write failed with DuckDB's out-of-memory error;
    one thread writes them in ~0.3 GB.
    """
    if settings.memory_limit is not None:
        return
    chosen = output.ordered_write_settings(con, rows)
    if settings.threads is not None:
        chosen.pop("threads", None)
    for name, value in chosen.items():
        _set(con, name, value)


def _set(con: duckdb.DuckDBPyConnection, name: str, value) -> None:
    """``SET name = value`` on ``con``."""
    item = sqlglot.exp.SetItem(this=sqlglot.exp.EQ(this=sql.col(name), expression=_literal(value)))
    con.execute(sql.render(sqlglot.exp.Set(expressions=[item])))


def _literal(value) -> sqlglot.exp.Expression:
    if isinstance(value, bool):
        return sqlglot.exp.Boolean(this=value)
    if isinstance(value, int):
        return sqlglot.exp.Literal.number(value)
    return sqlglot.exp.Literal.string(str(value))


def arrow_rows(table) -> RowsQuery:
    """A ``write_out`` query over an Arrow table (registered on the output connection)."""
    def query(con, own_db):
        con.register("sqlnb_rows", table)
        return sqlglot.exp.select(sqlglot.exp.Star()).from_(sql.table("sqlnb_rows"))
    return query


def write_text_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` all or nothing (a temporary file moved over it)."""
    with output.atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
