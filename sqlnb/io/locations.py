"""Where the command line reads and writes: the DATA, MODEL and OUT arguments.

Every argument is a plain string, parsed here into a small value; nothing in it is ever
parsed as SQL::

    DATA   lake/2026/*.parquet | train.csv | data.json | DB.duckdb:TABLE | a SQL query
    MODEL  DB.duckdb:NAME                     (the database file is created when missing)
    OUT    scored.parquet | scored.csv | scored.json | DB.duckdb:TABLE | -  (CSV on stdout)

``X.duckdb:NAME`` is split at the first ``:`` that follows a ``.duckdb`` or ``.db``
suffix, so ``my.db.duckdb:a:b.c`` is the table ``a:b.c`` of ``my.db.duckdb``. A table or
model name is one identifier, whatever characters it holds (``sqlnb.source.Table``).

:func:`data_source` resolves a DATA value against a connection: files are read through
DuckDB's readers, and a table in a database other than the connection's own is attached
read-only under an alias, so scoring can read one database and write another. A query
given a database (:class:`DbQuery`, ``--database FILE``) reads that database's tables by
their plain names: the database is attached read-only the same way and the query's
unqualified names of its tables are qualified with the alias (:func:`data_source`).
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Mapping

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines.waiting import retry_locked
from sqlnb.errors import SqlnbError, SqlnbNotFound, suggest
from sqlnb.source import (QUERY_START, Files, Query, Source, Table, blank, file_format, parse_query, read_with,
                          resolve)

#: File suffixes that mark a DuckDB database in ``DB:NAME``.
DB_SUFFIXES = (".duckdb", ".db")

#: Alias under which a data database other than the connection's own is attached.
DATA_ALIAS = "sqlnb_data"

#: Output formats by file suffix (``.tsv`` is CSV with a tab delimiter).
OUT_FORMATS = {"parquet": "parquet", "pq": "parquet", "csv": "csv", "tsv": "csv", "txt": "csv",
               "json": "json", "jsonl": "json", "ndjson": "json"}


@dataclass(frozen=True)
class DbObject:
    """A table, view or model ``name`` inside the DuckDB database file ``db``."""

    db: str
    name: str

    def __str__(self) -> str:
        return f"{self.db}:{self.name}"


@dataclass(frozen=True)
class FileOut:
    """An output file and its format (``parquet``, ``csv`` or ``json``)."""

    path: str
    format: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.path


@dataclass(frozen=True)
class StdOut:
    """CSV on standard output (``-``)."""

    def __str__(self) -> str:
        return "-"


def split_db(text: str) -> DbObject | None:
    """``DB.duckdb:NAME`` -> DbObject, or None when ``text`` names no database object."""
    lower = text.lower()
    for i, ch in enumerate(text):
        if ch == ":" and lower[:i].endswith(DB_SUFFIXES):
            return DbObject(text[:i], text[i + 1:])
    return None


def is_db_path(text: str) -> bool:
    return text.lower().endswith(DB_SUFFIXES)


def parse_model(text: str) -> DbObject:
    """A MODEL argument: ``DB.duckdb:NAME``."""
    obj = split_db(text)
    if obj is None or not obj.name or not obj.db:
        raise SqlnbError(
            f"MODEL must look like DB.duckdb:NAME (e.g. models.duckdb:churn), not {text!r}")
    return obj


@dataclass(frozen=True)
class Reading:
    """How to read DATA files (the command line's source options).

    Attributes
    ----------
    format : str, optional
        ``csv``, ``parquet`` or ``json`` whatever the file is called (``--data-format``).
    types : mapping
        Column types to read with (``--columns 'col=TYPE,...'``).
    csv : mapping
        DuckDB ``read_csv`` parameters (``delim``, ``nullstr``, ``header``).
    database : str, optional
        A DuckDB database whose tables a query as DATA reads (``--database FILE``).
    database_default : bool
        ``database`` is MODEL's own file, not asked for: it applies to a query and is
        ignored for other DATA.
    """

    format: str | None = None
    types: Mapping[str, str] = field(default_factory=dict)
    csv: Mapping[str, Any] = field(default_factory=dict)
    database: str | None = None
    database_default: bool = False

    def __bool__(self) -> bool:
        """Whether options for reading files are given (``database`` is not one)."""
        return bool(self.format or self.types or self.csv)


@dataclass(frozen=True)
class DbQuery:
    """A SQL query as DATA that reads the tables of the DuckDB database ``db`` by their
    plain names (``--database FILE``, or MODEL's own file); see :func:`data_source`."""

    text: str
    db: str

    def __str__(self) -> str:
        return self.text


#: DATA ``-``: CSV on standard input.
STDIN = "-"

_stdin_copy: list[str] = []


def stdin_file() -> str:
    """Standard input copied once to a temporary file (removed at exit), so that it can be
    sniffed and then read, and read twice where a command needs two passes."""
    if not _stdin_copy:
        fd, path = tempfile.mkstemp(prefix="sqlnb-stdin-", suffix=".csv")
        with os.fdopen(fd, "wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out)
        atexit.register(lambda: os.path.exists(path) and os.remove(path))
        _stdin_copy.append(path)
    if blank(_stdin_copy[0]):  # before DuckDB reads it as one column0 and no row
        raise SqlnbError("standard input (DATA -) is empty: it holds no header and no row; pipe the CSV rows in")
    return _stdin_copy[0]


def parse_data(text: str, reading: Reading | Mapping[str, Any] | None = None) -> DbObject | Files | Query | DbQuery:
    """A DATA argument: files by path or glob, ``-`` (CSV on standard input), a SQL query
    (a :class:`DbQuery` when ``reading.database`` names a database whose tables it reads),
    or ``DB.duckdb:TABLE``.

    ``reading`` says how to read files: a :class:`Reading`, or a mapping of ``read_csv``
    parameters. CSV parameters apply to CSV only, reading options to files only, and an
    asked-for database to a query only: giving them for other data is an error rather
    than silently ignored.
    """
    if not isinstance(reading, Reading):
        reading = Reading(csv=dict(reading or {}))
    if QUERY_START.match(text):
        if reading:
            raise SqlnbError("reading options (--data-format, --columns and the CSV ones) apply to files; "
                             "cast or filter in the query itself")
        return DbQuery(text, reading.database) if reading.database else Query(text)
    if reading.database and not reading.database_default:
        raise SqlnbError(f"--database lets a query as DATA read the tables of a DuckDB file; DATA {text!r} is not a "
                         "query (a table of a database is DB.duckdb:TABLE)")
    obj = split_db(text)
    if obj is not None:
        if not obj.name:
            raise SqlnbError(f"DATA {text!r} names no table; write it as {obj.db}:TABLE")
        if reading:
            raise SqlnbError("reading options (--data-format, --columns and the CSV ones) apply to files, "
                             "not to a database table")
        return obj
    if is_db_path(text):
        raise SqlnbError(f"DATA {text!r} is a DuckDB database; name a table in it: {text}:TABLE")
    if text == STDIN:
        if reading.format not in (None, "csv"):
            raise SqlnbError(f"standard input is read as CSV, not {reading.format}")
        return Files(stdin_file(), "csv", dict(reading.csv), dict(reading.types))
    fmt = reading.format or file_format(text)
    if reading.csv and fmt != "csv":
        raise SqlnbError(f"CSV reading options apply to CSV files, not to {fmt} data {text!r}")
    return Files(text, fmt, dict(reading.csv), dict(reading.types))


def parse_out(text: str) -> DbObject | FileOut | StdOut:
    """An OUT argument: a ``.parquet``/``.csv``/``.json`` file, ``DB.duckdb:TABLE`` or ``-``."""
    if text == "-":
        return StdOut()
    obj = split_db(text)
    if obj is not None:
        if not obj.name:
            raise SqlnbError(f"OUT {text!r} names no table; write it as {obj.db}:TABLE")
        return obj
    name = os.path.basename(text).lower()
    for ext in (".gz", ".zst", ".zstd"):  # DuckDB compresses by the final suffix
        if name.endswith(ext):
            name = name[: -len(ext)]
    suffix = name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix not in OUT_FORMATS:
        raise SqlnbError(
            f"cannot tell the output format of {text!r}; use a .parquet, .csv or .json file, "
            "DB.duckdb:TABLE, or - for CSV on stdout")
    options = {"delimiter": "\t"} if suffix == "tsv" else {}
    return FileOut(text, OUT_FORMATS[suffix], options)


def same_file(a: str | None, b: str | None) -> bool:
    """Whether two paths name the same file (also when neither exists yet)."""
    if a is None or b is None:
        return False
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _catalog_tables(con: duckdb.DuckDBPyConnection, catalog: str | None) -> list[str]:
    """Tables and views of ``catalog`` (default: the connection's own database), except
    sqlnb's model tables."""
    where = sql.col("table_catalog").eq(
        exp.Placeholder() if catalog else exp.func("current_database"))
    q = (exp.select(sql.col("table_name")).from_(exp.to_table("information_schema.tables"))
         .where(exp.and_(where, sql.col("table_schema").eq(exp.Literal.string("main"))))
         .order_by(sql.col("table_name")))
    return [r[0] for r in con.execute(sql.render(q), [catalog] if catalog else []).fetchall()]


def table_exists(con: duckdb.DuckDBPyConnection, name: str, catalog: str | None = None) -> bool:
    """Whether ``name`` is a table or view in the main schema (DuckDB compares names
    case-insensitively, even quoted ones, so this does too)."""
    return name.lower() in {t.lower() for t in _catalog_tables(con, catalog)}


def attach(con: duckdb.DuckDBPyConnection, path: str, alias: str = DATA_ALIAS) -> str:
    """Attach the database ``path`` read-only as ``alias`` (the path is a string literal,
    the alias a quoted identifier)."""
    if not os.path.exists(path):
        raise SqlnbNotFound(f"database {path!r} does not exist; check the path")
    stmt = exp.Attach(this=exp.alias_(exp.Literal.string(path), sql.ident(alias)),
                      expressions=[exp.AttachOption(this=exp.var("READ_ONLY"))])
    try:
        # Another process writing the file holds it for a moment (sqlnb.engines.waiting).
        retry_locked(lambda: con.execute(sql.render(stmt)), path)
    except duckdb.Error as e:
        raise SqlnbError(f"cannot open database {path!r}: {str(e).strip().splitlines()[0]}") from None
    return alias


def _attached(con: duckdb.DuckDBPyConnection, path: str) -> str:
    """The alias of the database ``path`` attached read-only to ``con``: the existing
    attachment when two DATA arguments name the same database, else a new one."""
    q = exp.select(sql.col("database_name"), sql.col("path")).from_(exp.Table(this=exp.func("duckdb_databases")))
    attached = {name: p for name, p in con.execute(sql.render(q)).fetchall()}
    for name, p in attached.items():
        if name.startswith(DATA_ALIAS) and same_file(p, path):
            return name
    alias = DATA_ALIAS if DATA_ALIAS not in attached else f"{DATA_ALIAS}_{len(attached)}"
    return attach(con, path, alias)


def data_source(con: duckdb.DuckDBPyConnection, data: DbObject | Files | Query | DbQuery,
                own_db: str | None = None, types: Mapping[str, str] | None = None,
                keep_text: tuple[str, ...] = ()) -> Source:
    """Resolve DATA against ``con`` into a :class:`~sqlnb.source.Source`.

    Parameters
    ----------
    con : duckdb connection
        The connection that will run the query.
    data : DbObject, Files, Query or DbQuery
        From :func:`parse_data`. A :class:`DbQuery` reads the tables of its database by
        their plain names (:func:`_database_query`).
    own_db : str, optional
        The database file ``con`` is connected to (None for in-memory). A table in it is
        read directly; a table elsewhere is read through a read-only attachment.
    types, keep_text
        For CSV and JSON files: the types a model was fitted with, and the columns (a
        label) whose text is kept rather than sniffed as BOOLEAN
        (:func:`sqlnb.source.read_with`).
    """
    if isinstance(data, DbQuery):
        return _database_query(con, data, own_db)
    if isinstance(data, Query):
        try:
            return resolve(data, con)
        except SqlnbError as e:
            if "Table with name" not in str(e):
                raise
            raise SqlnbNotFound(f"{e}; to read the tables of a DuckDB file in the query, give --database FILE "
                                "(database= in Python)") from None
    if isinstance(data, Files):
        return resolve(read_with(data, types, keep_text), con)
    catalog = None if same_file(own_db, data.db) else _attached(con, data.db)
    names = _catalog_tables(con, catalog)
    if data.name.lower() not in {n.lower() for n in names}:
        raise SqlnbNotFound(
            f"table {data.name!r} not found in {data.db!r}{suggest(data.name, names)}; "
            f"tables there: {', '.join(names) if names else 'none'}")
    source = resolve(Table(data.name, "main" if catalog else None, catalog), con)
    return dataclasses.replace(source, description=f"table {data.name!r} in {data.db!r}")


_MISSING_TABLE = re.compile(r"Table with name (\S+) does not exist")


def _database_query(con: duckdb.DuckDBPyConnection, data: DbQuery, own_db: str | None) -> Source:
    """A query over the tables of the database ``data.db``: read directly when ``con``
    is connected to it (``own_db``), else through a read-only attachment (shared with a
    DATA table of the same file), whose alias qualifies each plain name in the query that
    is a table or view there (``FROM cars_test`` reads ``"sqlnb_data"."main"."cars_test"``).
    Names with a schema or catalog, names of the query's own CTEs, table functions and
    files (``FROM 'x.parquet'``) are left as they are; so is any other name, which DuckDB
    looks up in ``con`` as usual."""
    tree = parse_query(data.text)
    where = f"the source query over {data.db!r}"
    names: list[str] = []
    if not same_file(own_db, data.db):
        alias = _attached(con, data.db)
        names = _catalog_tables(con, alias)
        tables = {n.lower() for n in names}
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}

        def qualify(node: exp.Expression) -> exp.Expression:
            if (isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier) and not node.args.get("db")
                    and not node.args.get("catalog") and node.name.lower() in tables - ctes):
                node = node.copy()
                node.set("db", sql.ident("main"))
                node.set("catalog", sql.ident(alias))
            return node
        tree = tree.transform(qualify)
    else:
        names = _catalog_tables(con, None)
    try:
        source = resolve(Query(sql.render(tree)), con)
    except SqlnbError as e:
        if "Table with name" not in str(e):
            raise
        missing = _MISSING_TABLE.search(str(e))
        hint = suggest(missing.group(1), names) if missing else ""
        raise SqlnbNotFound(f"{where}: {str(e).split(': ', 1)[-1]}{hint}; tables in {data.db!r}: "
                            f"{', '.join(names) if names else 'none'}") from None
    return dataclasses.replace(source, description=where)
