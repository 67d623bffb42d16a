"""Data sources: where training and scoring rows come from.

A source is anything a FROM clause can name: a table or view, a SQL query, or
Parquet/CSV/JSON files by path or glob (hive-partitioned directories included). It is
resolved once against a DuckDB connection into a :class:`Source`: a sqlglot expression
to put in FROM plus the column names and types. Rows are never pulled into Python.
"""

from __future__ import annotations

import dataclasses
import glob as _glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import duckdb
import sqlglot
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import HeaderWarning, SqlnbError, SqlnbNotFound, suggest, warn
from sqlnb.sql.types import is_integer, is_numeric, is_text_type

_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".tsv": "csv",
    ".txt": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
_COMPRESSED = (".gz", ".zst", ".zstd")
#: What a SQL query starts with (DATA and sources that read like one are queries).
QUERY_START = re.compile(r"^\s*(\(|select\b|with\b|from\b|values\b|table\b|pivot\b|unpivot\b)", re.I)


@dataclass(frozen=True)
class Table:
    """A table or view in the connection (``catalog.schema.name`` parts given separately,
    so a name holding dots or quotes is just a name)."""

    name: str
    schema: str | None = None
    catalog: str | None = None

    def __str__(self) -> str:
        return ".".join(p for p in (self.catalog, self.schema, self.name) if p)


@dataclass(frozen=True)
class Query:
    """A SQL query (DuckDB dialect) whose rows are the data."""

    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class Files:
    """Parquet, CSV or JSON files by path or glob.

    Attributes
    ----------
    path : str
        A path, glob or hive-partitioned directory.
    format : str, optional
        ``parquet``, ``csv`` or ``json``; by default from the file name.
    options : mapping
        DuckDB reader options (e.g. ``{"nullstr": ["", "?"], "delim": ", "}`` for CSV).
    types : mapping
        Column types the user fixed (``--columns``): CSV through the reader's ``types``,
        other formats by a cast after reading.
    prefer : mapping
        Types a model was fitted with, applied to the sniffed formats (CSV, JSON) where
        sniffing guessed otherwise in a way that changes a value's meaning (see
        :func:`read_with`); columns the file lacks are ignored.
    keep_text : tuple of str
        Columns (a label) whose text is kept when the sniffer would read them as BOOLEAN
        (``yes``/``no`` stay ``yes``/``no``).
    """

    path: str
    format: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    types: Mapping[str, str] = field(default_factory=dict)
    prefer: Mapping[str, str] = field(default_factory=dict)
    keep_text: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.path


#: Formats whose column types DuckDB guesses from the text (and can guess differently).
SNIFFED = ("csv", "json")


def read_with(data: Any, types: Mapping[str, str] | None = None, keep_text: tuple[str, ...] = ()) -> Any:
    """``data`` to be read with a model's ``types`` (and the ``keep_text`` columns as text)
    where it is CSV or JSON files; anything else is returned as is.

    A sniffer guesses a column's type from the text of one file, so the same column can
    come back as another type in the next batch: an all-empty numeric column as VARCHAR,
    ``yes``/``no`` labels as BOOLEAN, ``07`` as the integer 7. Reading with the fitted
    type instead keeps every value's fitted meaning: a column fitted as text is read as
    the file's text, and a numeric column sniffed as text is read as DOUBLE (so empty
    cells are NULL and ``nan`` is NaN, both missing; a value that is not a number is an
    error naming the column, line and value: :func:`csv_error_line`). Scoring passes a
    categorical column fitted as numbers as text (``Model.read_types``), whose values
    the scoring SQL casts itself, a value that does not cast being an unseen category.
    """
    spec = guess(data)
    if not isinstance(spec, Files) or (spec.format or file_format(spec.path)) not in SNIFFED:
        return data
    return dataclasses.replace(spec, prefer={**dict(types or {}), **spec.prefer},
                               keep_text=tuple(dict.fromkeys((*spec.keep_text, *keep_text))))


def _overrides(spec: Files, columns: Mapping[str, str]) -> dict[str, str]:
    """Columns of sniffed files to read again with another type (see :func:`read_with`)."""
    out = {}
    for name, fitted in spec.prefer.items():
        got = columns.get(name)
        if got is None or name in spec.types or got == fitted:
            continue
        if is_text_type(fitted):
            out[name] = "VARCHAR"
        elif is_numeric(fitted) and is_text_type(got):
            out[name] = "DOUBLE"
    for name in spec.keep_text:
        if columns.get(name) == "BOOLEAN" and name not in spec.types:
            out[name] = "VARCHAR"
    return out


class EngineTypes(dict):
    """Column types exactly as the engine that runs a query sees them (a ``dict``).

    A scoring SELECT given these may read a column of the right type without a cast
    (``Feature.source_type``); given plain types (SQL exported to another dialect, whose
    source holds whatever types it holds) it casts every value to the type it scores."""


@dataclass(frozen=True)
class Source:
    """A resolved source: a FROM-able expression, its columns and types, and the dialect
    of the engine that resolved it (``engine``; None for a source built from another),
    whose types ``columns`` are."""

    expr: exp.Expression
    columns: dict[str, str]
    description: str
    engine: str | None = None
    #: Said after a missing column's error when the names may not be the file's own
    #: (:func:`header_hint`): how to read a first line of data as a row.
    hint: str = ""
    #: Columns of CSV files whose types DuckDB's sniffer guessed from the text (none
    #: given by ``--columns`` or ``all_varchar``): a text column among them may be numbers
    #: but for a marker of missing values (screening names it).
    guessed: frozenset = frozenset()

    def types_for(self, dialect: str) -> dict[str, str]:
        """The column types, as :class:`EngineTypes` when ``dialect`` is the engine's own."""
        return EngineTypes(self.columns) if self.engine == dialect else dict(self.columns)

    def from_(self, alias: str = "src") -> exp.Expression:
        """The source as a FROM item aliased ``alias``."""
        node = self.expr.copy()
        if isinstance(node, exp.Subquery):
            node.set("alias", exp.TableAlias(this=sql.ident(alias)))
            return node
        return exp.alias_(node, alias, table=True, quoted=True)

    def require(self, names, what: str = "column") -> None:
        """Raise a one-line error naming any of ``names`` the source lacks."""
        for name in names:
            if name not in self.columns:
                raise SqlnbNotFound(
                    f"{what} {name!r} not found in {self.description}"
                    f"{suggest(name, self.columns)}; its columns are: {', '.join(self.columns)}{self.hint}"
                )


def parse_query(text: str, dialect: str = "duckdb") -> exp.Expression:
    """Parse a source query, which must be exactly one query (a SELECT, set operation,
    ``VALUES`` or ``PIVOT``): a second statement (``SELECT * FROM t; DROP TABLE t``) or
    any other statement is refused with one line, never embedded in scoring SQL or run
    while the source's columns are probed."""
    try:
        statements = [s for s in sqlglot.parse(text, dialect=dialect) if s is not None]
    except sqlglot.errors.ParseError as e:
        raise SqlnbError(f"cannot parse the source query: {str(e).splitlines()[0]}") from None
    if len(statements) != 1:
        raise SqlnbError(f"the source query must be exactly one SELECT, but it holds {len(statements)} statements "
                         f"({'; '.join(_head(s) for s in statements) or 'none'}); remove all but the SELECT")
    node = statements[0]
    if not isinstance(node, (exp.Query, exp.Values, exp.Pivot)):
        raise SqlnbError(f"the source query must be one SELECT, not {_head(node)}")
    return node


def _head(statement: exp.Expression) -> str:
    """The first words of a statement, for an error line."""
    words = statement.sql().split()
    return " ".join(words[:3]) + (" …" if len(words) > 3 else "")


def guess(data: Any) -> Table | Query | Files | Any:
    """Interpret a plain string or path: a query, files, or a table name."""
    if isinstance(data, Path):
        return Files(str(data))
    if not isinstance(data, str):
        return data
    if QUERY_START.match(data):
        return Query(data)
    lower = data.lower()
    for ext in _COMPRESSED:
        if lower.endswith(ext):
            lower = lower[: -len(ext)]
    if any(lower.endswith(e) for e in _FORMATS) or any(ch in data for ch in "*?[") or os.path.exists(data):
        return Files(data)
    return Table(data)


def file_format(path: str) -> str:
    lower = path.lower()
    for ext in _COMPRESSED:
        if lower.endswith(ext):
            lower = lower[: -len(ext)]
    if os.path.isdir(path):
        return "parquet"
    for ext, fmt in _FORMATS.items():
        if lower.endswith(ext):
            return fmt
    raise SqlnbError(
        f"cannot tell the format of {path!r} from its name; name it .parquet, .csv or .json, "
        "or give the format (--data-format csv on the command line, Files(path, 'csv') in Python)"
    )


def _reader(spec: Files) -> exp.Expression:
    path = spec.path
    fmt = spec.format or file_format(path)
    if os.path.isdir(path):
        path = os.path.join(path, "**", "*.parquet")
    local = "://" not in path
    if local and not _glob.glob(path, recursive=True):
        raise SqlnbNotFound(f"no file matches {spec.path!r}; check the path or glob")
    func = {"parquet": "read_parquet", "csv": "read_csv", "json": "read_json_auto"}[fmt]
    args: list[exp.Expression] = [exp.Literal.string(path)]
    options = dict(spec.options)
    if fmt in ("parquet", "json"):
        # Files of one glob are read by column name with unified types: without it DuckDB
        # reads every Parquet file with the first file's types (x DOUBLE in the second
        # file, BIGINT in the first, is silently truncated), and by position. CSV globs
        # unify types already.
        options.setdefault("union_by_name", True)
    if spec.types and fmt == "csv":
        options["types"] = {**dict(options.get("types") or {}), **spec.types}
    for key, val in options.items():
        args.append(exp.EQ(this=exp.column(key), expression=_option_value(val)))
    reader = exp.Table(this=exp.Anonymous(this=func, expressions=args))
    if not spec.types or fmt == "csv":
        return reader
    # Other readers take no partial types: cast after reading (a value that does not cast
    # is DuckDB's conversion error, naming it).
    casts = [exp.alias_(exp.Cast(this=sql.col(c), to=exp.DataType.build(t, dialect="duckdb")), c, quoted=True)
             for c, t in spec.types.items()]
    return exp.Subquery(this=exp.select(exp.Star(replace=casts)).from_(reader))


def _option_value(val: Any) -> exp.Expression:
    if isinstance(val, Mapping):
        return exp.Struct(
            expressions=[
                exp.PropertyEQ(this=exp.Literal.string(str(k)), expression=_option_value(v))
                for k, v in val.items()
            ]
        )
    if isinstance(val, (list, tuple)):
        return exp.Array(expressions=[_option_value(v) for v in val])
    return exp.convert(val)


def relation_connection(data: Any) -> duckdb.DuckDBPyConnection | None:
    """The connection a DuckDB relation was made on (None for anything else).

    DuckDB 2.0's Python relation keeps it as ``_con`` and offers no public accessor
    (asked for in duckdb-python discussions 580 and 603; tests/test_python_api.py fails
    once one exists), so this is the one place sqlnb reads it. A relation without it is
    read on a new connection, and one read on a connection that cannot see its tables
    says to pass its own connection as ``con=`` (:func:`resolve`)."""
    if not isinstance(data, duckdb.DuckDBPyRelation):
        return None
    own = getattr(data, "_con", None)
    return own if isinstance(own, duckdb.DuckDBPyConnection) else None


def resolve(data: Any, con: duckdb.DuckDBPyConnection) -> Source:
    """Resolve ``data`` against ``con`` into a :class:`Source`.

    Parameters
    ----------
    data : Table, Query, Files, str, pathlib.Path, duckdb.DuckDBPyRelation or pyarrow.Table
        What to read. A plain string is a query if it starts like one, files if it has a
        data-file extension or a glob character, and otherwise a table name.
    con : duckdb.DuckDBPyConnection
        The connection that can see the data.
    """
    data = guess(data)
    if isinstance(data, Source):
        return data
    if isinstance(data, Table):
        node: exp.Expression = sql.table(data.name, data.schema, data.catalog)
        desc = f"table {str(data)!r}"
    elif isinstance(data, Query):
        node = exp.Subquery(this=parse_query(data.text))
        desc = "the source query"
    elif isinstance(data, Files):
        _refuse_empty(data)
        node = _reader(data)
        desc = f"{data.path!r}"
        typed = dict(data.types)
        if data.prefer or data.keep_text:
            # Sniff once as the file reads; sniff again only when a type must change.
            sniffed = resolve(dataclasses.replace(data, prefer={}, keep_text=()), con)
            overrides = _overrides(data, sniffed.columns)
            if not overrides:
                return sniffed
            typed.update(overrides)
            node = _reader(dataclasses.replace(data, types=typed))
    elif isinstance(data, duckdb.DuckDBPyRelation):
        node = exp.Subquery(this=sqlglot.parse_one(data.sql_query(), dialect="duckdb"))
        desc = "the relation"
    elif type(data).__module__.startswith(("pyarrow", "pandas", "polars")):
        name = f"sqlnb_input_{id(data):x}"
        con.register(name, data)
        node = sql.table(name)
        desc = "the in-memory table"
    else:
        raise SqlnbError(f"cannot read data from a {type(data).__name__}; give a table, query or file path")
    probe = exp.select(exp.Star()).from_(
        node.copy() if not isinstance(node, exp.Subquery) else exp.Subquery(
            this=node.this.copy(), alias=exp.TableAlias(this=sql.ident("src")))
    ).limit(0)
    try:
        rel = con.sql(sql.render(probe))
        columns = {str(c): str(t) for c, t in zip(rel.columns, rel.types)}
    except duckdb.CatalogException as e:
        if isinstance(data, Table):
            raise SqlnbNotFound(_missing_table(data, con)) from None
        if isinstance(data, duckdb.DuckDBPyRelation) and relation_connection(data) is not con:
            raise SqlnbError(f"{desc} was read on a connection other than its own, which cannot see its tables "
                             f"({_first_line(e)}); pass the connection it was made on as con=") from None
        raise SqlnbError(f"{desc}: {_first_line(e)}") from None
    except (duckdb.IOException, duckdb.InvalidInputException, duckdb.BinderException,
            duckdb.ParserException, duckdb.ConversionException) as e:
        if isinstance(data, Files) and data.options.get("names"):
            _check_names(data, con)  # a clearer line when the names do not fit the file
        raise SqlnbError(f"cannot read {desc}: {_first_line(e)}") from None
    hint, guessed = "", frozenset()
    if isinstance(data, Files) and (data.format or file_format(data.path)) == "csv":
        fractions = _fractions(data, columns, typed, con)
        if fractions:
            node = _reader(dataclasses.replace(data, types={**typed, **fractions}))
            columns = {c: fractions.get(c, t) for c, t in columns.items()}
        given = data.options.get("types") or {}
        if not (data.options.get("all_varchar") or "columns" in data.options or not isinstance(given, Mapping)):
            guessed = frozenset(c for c in columns if c not in typed and c not in given)  # else: every type given
        if data.options.get("names"):
            _check_names(data, con, columns)
        elif "header" not in data.options:
            reason = header_looks_like_data(data, columns, con)
            if reason is not None:
                warn(f"warning: the first line of {data.path!r} was read as the header, but {reason}, so it "
                              "may be a row of data, which is then left out; if the file has no header, give "
                              "--names COL,... (or --no-header) to read that line as a row; give --header to say "
                              "it is one", HeaderWarning)
            hint = header_hint(columns, reason)
    return Source(expr=node, columns=columns, description=desc, engine="duckdb", hint=hint, guessed=guessed)


def header_hint(columns: Mapping[str, str], reason: str | None) -> str:
    """What a missing column's error adds about CSV files read without ``--header``,
    ``--no-header`` or ``--names``, whose column names may then not be the file's own.

    DuckDB found no header (columns ``column0``, ...): name the columns with ``--names``.
    It took the first line for one, and that line looks like data: ``reason``
    (:func:`header_looks_like_data`), or a name that is a number (``2``; not ``y``, a
    label's usual name), or a name DuckDB made unique by a suffix (``vhigh_1`` beside ``vhigh``: the
    first line repeats a value, which a header rarely does). Empty otherwise."""
    names = list(columns)
    if names and all(_GENERATED.match(c) for c in names):
        return ("; the file was read without a header (DuckDB found none), so its columns are numbered: name them "
                "with --names COL,... (every column, in order)")
    if reason is None:
        value = next((c for c in names if _NUMBER.match(c)), None)
        taken = set(names)
        repeat = next((c for c in names if (m := _SUFFIXED.match(c)) and m.group(1) in taken), None)
        if repeat is not None:
            reason = f"its name {repeat!r} is DuckDB's for a second {_SUFFIXED.match(repeat).group(1)!r}"
        elif value is not None:
            reason = f"its field {value!r} reads as a value"
    if reason is None:
        return ""
    return (f"; the first line was read as the header, but {reason}: if the file has no header, give --no-header "
            "--names COL,... (every column, in order) to name the columns and read that line as a row")


#: A header field that is a number.
_NUMBER = re.compile(r"^\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*$")
#: A name DuckDB gave a repeated header field: the field, then ``_1``, ``_2``, ...
_SUFFIXED = re.compile(r"^(.*)_(\d+)$")


def _refuse_empty(spec: Files) -> None:
    """One error line for local files of no content (0 bytes, or blank): DuckDB reads one
    as a table of one column ``column0`` and no row, so that the label would be missing."""
    if "://" in spec.path:
        return
    path = os.path.join(spec.path, "**", "*.parquet") if os.path.isdir(spec.path) else spec.path
    files = _glob.glob(path, recursive=True)
    if files and all(blank(f) for f in files):
        what = f"{spec.path!r} is empty" if files == [spec.path] else f"every file matching {spec.path!r} is empty"
        raise SqlnbError(f"{what} ({'0 bytes' if all(os.path.getsize(f) == 0 for f in files) else 'blank lines only'}):"
                         " it holds no header and no row; give a file of rows")


def blank(path: str) -> bool:
    """Whether a file holds nothing but white space (read only when it is a few bytes)."""
    try:
        size = os.path.getsize(path)
        if size > 64 or os.path.isdir(path):
            return False
        with open(path, "rb") as f:
            return not f.read().strip()
    except OSError:
        return False


#: Rows after the first line that :func:`header_looks_like_data` reads.
HEADER_SAMPLE_ROWS = 10_000
#: The names DuckDB gives the columns of a file it reads without a header.
_GENERATED = re.compile(r"^column\d+$")
#: A header field that reads as a value: a number or a boolean.
_VALUE_LIKE = re.compile(r"^\s*([-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?|true|false|t|f|yes|no|y|n)\s*$", re.I)
_header_checks: dict[tuple, str | None] = {}


def header_looks_like_data(spec: Files, columns: Mapping[str, str], con: duckdb.DuckDBPyConnection) -> str | None:
    """Why the first line of CSV ``spec``, which DuckDB's sniffer took for a header
    (``columns`` are the names it gave), looks like a row of data; None when it does not.

    The rule (docs/cli.md, "Headerless files"): a header field is also a value of its own
    column in the first :data:`HEADER_SAMPLE_ROWS` rows after it (``vhigh`` in the column
    DuckDB named ``vhigh``: a headerless UCI file whose first row's values are read as
    names), or every header field is a number or a boolean (``1,0,3.5,yes``). A file
    DuckDB read without a header (columns ``column0``, ...) is not checked. The answer is
    kept per file, path and modification time, for the commands that read a file twice.
    """
    if not columns or all(_GENERATED.match(c) for c in columns):
        return None
    key = _file_key(spec)
    if key is not None and key in _header_checks:
        return _header_checks[key]
    raw = dataclasses.replace(spec, types={}, prefer={}, keep_text=(),
                              options={**spec.options, "header": False, "all_varchar": True})
    reader = exp.Subquery(this=exp.select(exp.Star()).from_(_reader(raw)).limit(HEADER_SAMPLE_ROWS + 1),
                          alias=exp.TableAlias(this=sql.ident("src")))
    try:
        raw_names = con.sql(sql.render(exp.select(exp.Star()).from_(reader).limit(0))).columns
        first = con.execute(sql.render(exp.select(exp.Star()).from_(reader.copy()).limit(1))).fetchall()
        if len(raw_names) != len(columns) or not first:
            return None
        fields = list(first[0])
        # How often each header field occurs in its column (the header line itself is once).
        counts = exp.select(*[exp.Sum(this=exp.If(this=sql.col(c, "src").eq(exp.Placeholder()),
                                                  true=exp.Literal.number(1), false=exp.Literal.number(0)))
                              for c in raw_names]).from_(reader.copy())
        seen = con.execute(sql.render(counts), fields).fetchall()[0]
    except duckdb.Error:
        return None
    reason = None
    for name, field, n in zip(columns, fields, seen):
        if field is not None and field.strip() and (n or 0) > 1:
            reason = f"its field {field!r} is also a value of its own column {name!r}"
            break
    if reason is None and all(f is not None and _VALUE_LIKE.match(f) for f in fields):
        reason = "every field of it is a number or a boolean"
    if key is not None:
        _header_checks[key] = reason
    return reason


def _file_key(spec: Files) -> tuple | None:
    """What an answer about the text of files ``spec`` is kept under: the path, the
    reading options and each matching local file with its modification time (None for
    remote files, or a file that cannot be listed: not kept)."""
    if "://" in spec.path:
        return None
    try:
        files = tuple((f, os.path.getmtime(f)) for f in sorted(_glob.glob(spec.path, recursive=True)))
        return (spec.path, repr(sorted(spec.options.items(), key=str)), files) if files else None
    except (OSError, TypeError):
        return None


#: Whether a column of CSV files holds a fraction past the sniffer's sample, by file and column.
_fraction_checks: dict[tuple, bool] = {}


def _fractions(spec: Files, columns: Mapping[str, str], typed: Mapping[str, str],
               con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The integer columns of CSV files ``spec`` (``columns`` as read, ``typed`` the types
    already asked for) that hold a fraction past the sniffer's sample, each to be read
    as DOUBLE.

    DuckDB's sniffer types a column from a sample of the first rows (``sample_size``,
    20,480 by default): a column of integers there is BIGINT, and the reader then casts a
    later ``1.5`` to 2 (DuckDB's casts to integers round) with no error, duckdb issue
    25824, so a model would learn a value the file does not hold. One query reads those
    columns as DOUBLE and asks of each whether a value has a fraction (``x <> ROUND(x)``);
    such a column is read as DOUBLE, what the sniffer gives ``1.5`` when it sees it. A
    fraction no DOUBLE holds either (``1.0000000000000001``, 1 read either way) keeps the
    integer type, as do NaN and infinities; text that is no number (``x``) makes that
    query fail, and the read of the file then says what it says now
    (:func:`csv_error_line`: the line, column and value).

    The cost is one more pass over the files when they have an integer column, about a
    bare scan's: on 1,000,000 rows of 20 columns (11 of integers, 98 MB) the query takes
    0.35 s and ``sqlnb fit`` 1.65 s instead of 1.45 s, where DuckDB's own whole-file
    sniffing (``sample_size=-1``, 4.2 s a bind, paid at every query that reads the file)
    made the fit take 13.2 s. Answers are kept per file (:func:`_file_key`) and column;
    options that fix the types themselves (``columns``, ``all_varchar``,
    ``sample_size=-1``) skip the check."""
    options = spec.options
    given = options.get("types") or {}
    if ("columns" in options or options.get("all_varchar") or options.get("sample_size") == -1
            or not isinstance(given, Mapping)):  # a list of types: every column's, by position
        return {}
    fixed = {*typed, *given}
    ints = [c for c, t in columns.items() if c not in fixed and is_integer(t)]
    key = _file_key(spec)
    answers = {c: _fraction_checks[(key, c)] for c in ints if key is not None and (key, c) in _fraction_checks}
    todo = [c for c in ints if c not in answers]
    if todo:
        as_double = dataclasses.replace(spec, types={**typed, **{c: "DOUBLE" for c in todo}}, prefer={}, keep_text=())
        flags = [exp.LogicalOr(this=exp.NEQ(this=sql.col(c, "src"), expression=exp.Round(this=sql.col(c, "src"))))
                 for c in todo]
        reader = exp.alias_(_reader(as_double), "src", table=True, quoted=True)
        try:
            got = con.execute(sql.render(exp.select(*flags).from_(reader))).fetchall()[0]
        except duckdb.Error:
            return {}  # a value that is no number: the read of the file names it
        answers.update({c: bool(g) for c, g in zip(todo, got)})
        if key is not None:
            _fraction_checks.update({(key, c): answers[c] for c in todo})
    return {c: "DOUBLE" for c in ints if answers[c]}


def _check_names(spec: Files, con: duckdb.DuckDBPyConnection, columns: Mapping[str, str] | None = None) -> None:
    """``names`` (``--names``) must name every column of the file, no more and no fewer."""
    names = list(spec.options["names"])
    raw = dataclasses.replace(spec, types={}, prefer={}, keep_text=(),
                              options={k: v for k, v in spec.options.items() if k != "names"} | {"header": False})
    try:
        width = len(con.sql(sql.render(exp.select(exp.Star()).from_(_reader(raw)).limit(0))).columns)
    except duckdb.Error:
        return
    if len(names) != width:
        raise SqlnbError(f"--names gives {len(names)} name{'s' if len(names) != 1 else ''} ({', '.join(names)}), "
                         f"but {spec.path!r} has {width} columns; name every column, in order")
    if len(set(names)) != len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise SqlnbError(f"--names gives the name {dup!r} twice; give each column its own name")


def _missing_table(spec: Table, con: duckdb.DuckDBPyConnection) -> str:
    listing_query = (
        exp.select(sql.col("table_name"))
        .from_(exp.to_table("information_schema.tables"))
        .where(sql.col("table_schema").neq(exp.Literal.string("sqlnb")))
        .order_by(sql.col("table_name"))
    )
    names = [r[0] for r in con.execute(sql.render(listing_query)).fetchall()]
    listing = ", ".join(names) if names else "none"
    return f"table {str(spec)!r} not found{suggest(spec.name, names)}; tables here: {listing}"


_CSV_LINE = re.compile(r"CSV Error on Line: (\d+)")
_CSV_CONVERT = re.compile(r'converting column "(.*)"\. Could not convert string "(.*)" to \'(.*)\'')
_CSV_FILE = re.compile(r"^\s*file = (.*)$", re.M)


def csv_error_line(e: BaseException) -> str | None:
    """One line for DuckDB's CSV value error, or None for any other error.

    DuckDB's own message spans twenty lines, the first of which (``Conversion Error: CSV
    Error on Line: 5``) names neither the column nor the value; the line built here names
    the file, line, column and value, and the fixes."""
    text = str(e)
    line, convert = _CSV_LINE.search(text), _CSV_CONVERT.search(text)
    if line is None or convert is None:
        return None
    column, value, to = convert.groups()
    where = _CSV_FILE.search(text)
    file = f"{where.group(1).strip()!r}" if where else "the CSV file"
    guessed = " (the type guessed from the first rows)" if "auto-detected" in text else ""
    return (f"cannot read {file}, line {line.group(1)}: column {column!r} holds {value!r}, which is not "
            f"a {to}{guessed}; correct the value, leave it empty (missing), or name it a missing value "
            f"(--null-string {value!r})")


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    csv_line = csv_error_line(e)
    if csv_line is not None:
        return csv_line
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("LINE"):
            return line
    return text
