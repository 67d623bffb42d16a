"""Writing query results: a file, a DuckDB table or standard output, all or nothing.

A failed or interrupted write must leave the previous output exactly as it was:

* files are written by DuckDB's ``COPY`` to a hidden temporary file in the target's own
  directory and then moved over the target with :func:`os.replace` (atomic on one file
  system); the temporary file is removed on any failure, KeyboardInterrupt included
  (and SIGTERM, which the CLI turns into one). A process killed outright (SIGKILL, a
  crash) cannot clean up: its temporary is named ``.sqlnb-<pid>-<host>-<random>-<name>``,
  and the next write into that directory removes those whose process is gone;
* a table is created inside a transaction (``CREATE [OR REPLACE] TABLE ... AS``), so the
  old table stays until the commit;
* standard output gets the CSV only once it is complete (it is first written to a
  temporary file), so an error never leaves half a CSV in a pipe.

Existing outputs are replaced only when asked (``replace=True``); the check is made
before any work is done.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import contextmanager
from typing import BinaryIO, Iterator

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.crash import kill_point, remove_stale_temporaries, temporary_name  # noqa: F401 (used by engine_output)
from sqlnb.errors import SqlnbError
from sqlnb.io.locations import DbObject, FileOut, StdOut, table_exists


#: DuckDB's memory limit while the CLI writes query results to a file or standard output,
#: when neither ``--memory-limit`` nor ``--threads`` is given. DuckDB's ordered COPY
#: buffers finished batches that are ahead of the writer, bounded only by the memory
#: limit: scoring 10M rows x 20 columns (DuckDB-written Parquet, 122,880-row row groups)
#: to Parquet peaked at 1.3-1.4 GB without a limit and at ~0.7 GB with this one. It is
#: safe only together with :func:`ordered_write_settings`, which keeps what the ordered
#: COPY cannot spill (a whole input batch per thread) well under it.
#: Joins and aggregations over the limit spill to ``--temp-directory``.
WRITE_MEMORY_LIMIT = "1GB"

#: DuckDB's memory limit for ``evaluate`` under the defaults (no ``--memory-limit``, no
#: ``--plots``): its statement streams the per-row terms to pyarrow and numpy (no sort, no
#: aggregate in DuckDB), so a small limit bounds the process near ``score``'s peak (10M
#: rows x 20 columns: ~350-370 MiB against score's ~310; benchmarks/README.md, "Default memory").
EVALUATE_MEMORY_LIMIT = "160MB"

#: The most the ordered COPY may hold in input batches at once, by the estimate of
#: :func:`ordered_write_settings` (rows of the largest Parquet row group x the output
#: row's width x threads). DuckDB reads a Parquet row group as one batch and the ordered
#: COPY collects each batch whole, in every thread, before it can write it: with
#: pyarrow's 1,048,576-row row groups and 25 output columns that is ~200 MB of raw
#: values per thread and, prepared and encoded, over 1 GB for two threads (out of
#: memory under a 1 GB limit, 2.4-2.8 GB without one). Fewer threads write such
#: files in ~0.6 GB.
ORDERED_BATCH_BYTES = 256 * 2**20

#: Parquet row groups larger than this (compressed bytes of the columns read) are read
#: without DuckDB's prefetch, which loads a whole row group's column chunks per thread:
#: ~160 MB for a 1M-row row group of 20 DOUBLE columns, 1.6 GB for a 10M-row one.
PREFETCH_MAX_BYTES = 64 * 2**20


def parquet_paths(tree: exp.Expression) -> list[str]:
    """The paths (or globs) of the ``read_parquet`` calls in ``tree``."""
    out = []
    for node in tree.find_all(exp.Anonymous):
        if str(node.this).lower() == "read_parquet" and node.expressions:
            first = node.expressions[0]
            if isinstance(first, exp.Literal) and first.is_string:
                out.append(first.this)
    return out


def _row_width(types) -> int:
    """Bytes per row DuckDB keeps for these column types: 8 for fixed-width numbers, 16
    for strings (an inlined string or a pointer; long strings more) and anything else."""
    return sum(8 if str(t).upper() in ("DOUBLE", "FLOAT", "BIGINT", "INTEGER", "SMALLINT", "TINYINT",
                                       "BOOLEAN", "DATE", "UBIGINT", "UINTEGER") else 16 for t in types)


def _width_bound(query: exp.Expression) -> int | None:
    """An upper bound of :func:`_row_width` of ``query``'s rows from its tree alone: 16
    bytes for each output column; None when a ``*`` leaves the columns to the binder."""
    selects = getattr(query, "selects", None)
    if not selects or any(s.find(exp.Star) is not None for s in selects):
        return None
    return 16 * len(selects)


def largest_row_group(con: duckdb.DuckDBPyConnection, paths: list[str]) -> tuple[int, int]:
    """``(rows, compressed bytes)`` of the largest row group of the Parquet files
    ``paths`` (footers only; (0, 0) for none)."""
    rows = size = 0
    for path in paths:
        meta = exp.Table(this=exp.Anonymous(this="parquet_metadata", expressions=[exp.Literal.string(path)]))
        inner = (exp.select(exp.alias_(exp.Max(this=sql.col("row_group_num_rows")), "r", quoted=True),
                            exp.alias_(exp.Sum(this=sql.col("total_compressed_size")), "b", quoted=True))
                 .from_(meta).group_by(sql.col("file_name"), sql.col("row_group_id")))
        top = exp.select(exp.Max(this=sql.col("r")), exp.Max(this=sql.col("b"))).from_(
            exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("g"))))
        r, b = con.execute(sql.render(top)).fetchall()[0]
        rows, size = max(rows, int(r or 0)), max(size, int(b or 0))
    return rows, size


def ordered_write_settings(con: duckdb.DuckDBPyConnection, query: exp.Expression) -> dict[str, object]:
    """DuckDB settings that bound the memory of writing ``query``'s rows in order from
    Parquet files with large row groups: ``threads`` so that one input batch per thread
    stays within :data:`ORDERED_BATCH_BYTES`, and no prefetch of row groups over
    :data:`PREFETCH_MAX_BYTES`. Empty when the rows come in small batches (DuckDB tables,
    CSV, Parquet written by DuckDB): those are written with every thread as before."""
    paths = parquet_paths(query)
    if not paths:
        return {}
    rows, size = largest_row_group(con, paths)
    setting = exp.Anonymous(this="current_setting", expressions=[exp.Literal.string("threads")])
    threads = int(con.execute(sql.render(exp.select(setting))).fetchall()[0][0])
    out: dict[str, object] = {}
    # The exact width needs DuckDB to bind the query (its output types), which for a
    # model with thousands of terms costs seconds (AODE on 57 columns: a 2.4 MB statement,
    # bound again by the write). 16 bytes a column bounds :func:`_row_width` from above, so
    # when even that bound leaves every thread its batch, the answer is the same unbound.
    width = _width_bound(query)
    if width is None or ORDERED_BATCH_BYTES // max(1, rows * width) < threads:
        width = _row_width(con.sql(sql.render(query)).types)
    fit = max(1, ORDERED_BATCH_BYTES // max(1, rows * width))
    if fit < threads:
        out["threads"] = fit
    if size > PREFETCH_MAX_BYTES:
        out["disable_parquet_prefetching"] = True
    return out


def check_target(out: DbObject | FileOut | StdOut, replace: bool,
                 con: duckdb.DuckDBPyConnection | None = None) -> None:
    """Raise before any work when ``out`` cannot be written (exists without ``replace``,
    missing directory). ``con`` is the output database's connection, for tables."""
    if isinstance(out, FileOut):
        if os.path.isdir(out.path):
            raise SqlnbError(f"output {out.path!r} is a directory; give a file name")
        if os.path.lexists(out.path) and not replace:
            raise SqlnbError(f"output {out.path!r} already exists; pass --replace to overwrite it")
        parent = os.path.dirname(out.path) or "."
        if not os.path.isdir(parent):
            raise SqlnbError(f"directory {parent!r} of output {out.path!r} does not exist; create it first")
    elif isinstance(out, DbObject) and con is not None and table_exists(con, out.name) and not replace:
        raise SqlnbError(f"table {out.name!r} already exists in {out.db!r}; pass --replace to overwrite it")


def copy_statement(query: exp.Expression, path: str, fmt: str, options: dict | None = None) -> exp.Copy:
    """``COPY (query) TO 'path' (FORMAT fmt, ...)`` as a tree (the path is a string literal)."""
    params = [exp.CopyParameter(this=exp.var("FORMAT"), expression=exp.var(fmt.upper()))]
    if fmt == "csv":
        params.append(exp.CopyParameter(this=exp.var("HEADER"), expression=exp.true()))
    for key, value in (options or {}).items():
        params.append(exp.CopyParameter(this=exp.var(key.upper()), expression=exp.Literal.string(value)))
    return exp.Copy(this=exp.Subquery(this=query), kind=False, files=[exp.Literal.string(path)], params=params)


def _count(result: duckdb.DuckDBPyConnection) -> int | None:
    """The row count DuckDB reports for COPY and CREATE TABLE AS (read to the end, so
    the connection is free for the next statement)."""
    rows = result.fetchall()
    return int(rows[0][0]) if rows and rows[0] and isinstance(rows[0][0], int) else None


@contextmanager
def atomic_path(path: str) -> Iterator[str]:
    """A temporary path next to ``path``, moved over it when the block succeeds and
    removed when it fails. The original name is kept as its suffix, so DuckDB still sees
    ``.csv.gz`` and compresses accordingly; the process id and host in its name let a
    later write remove it if this process is killed (:func:`remove_stale_temporaries`)."""
    parent, base = os.path.split(path)
    remove_stale_temporaries(parent)
    tmp = os.path.join(parent, temporary_name(base))
    try:
        yield tmp
        kill_point("out:rename")
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.remove(tmp)
        raise


def write_file(con: duckdb.DuckDBPyConnection, query: exp.Expression, out: FileOut, replace: bool) -> int | None:
    """Write the rows of ``query`` to ``out``; returns the row count."""
    check_target(out, replace)
    with atomic_path(out.path) as tmp:
        return _count(con.execute(sql.render(copy_statement(query, tmp, out.format, dict(out.options)))))


def write_table(con: duckdb.DuckDBPyConnection, query: exp.Expression, out: DbObject, replace: bool) -> int | None:
    """Create table ``out.name`` in ``con``'s own database from ``query``, in one
    transaction."""
    check_target(out, replace, con)
    create = exp.Create(this=sql.table(out.name), kind="TABLE", replace=replace, expression=query)
    kill_point("out:begin")
    con.begin()
    try:
        n = _count(con.execute(sql.render(create)))
        kill_point("out:commit")
        con.commit()
    except BaseException:
        con.rollback()
        raise
    kill_point("out:committed")
    return n


@contextmanager
def spool(directory: str | None = None) -> Iterator[FileOut]:
    """A temporary CSV file to compute standard output into (in ``directory``, default
    the system's temporary directory); removed afterwards.

    Standard output gets the rows only once they are complete (:func:`stream`), so an
    error or an interruption never leaves half a CSV in a pipe.
    """
    with tempfile.TemporaryDirectory(prefix="sqlnb-", dir=directory) as tmp:
        yield FileOut(os.path.join(tmp, "out.csv"), "csv")


def stream(path: str, out: BinaryIO) -> None:
    """Copy the file ``path`` to the binary stream ``out``."""
    with open(path, "rb") as f:
        shutil.copyfileobj(f, out)
    out.flush()


def write(con: duckdb.DuckDBPyConnection, query: exp.Expression, out: DbObject | FileOut,
          replace: bool = False) -> int | None:
    """Write the rows of ``query`` to a file or, for a :class:`DbObject`, to a table in
    ``con``'s own database (``con`` must be connected to ``out.db``). Returns the number
    of rows written."""
    if isinstance(out, DbObject):
        return write_table(con, query, out, replace)
    return write_file(con, query, out, replace)
