"""Column screening at fit: columns that would hurt a model left out, each with a reason.

A table's columns are not all features. A customer ID read as a Gaussian feature gives
every class a density so wide that the classifier falls back on the majority class (on
the real-data case of issue 14: accuracy 0.715 with the ID, 0.875 without). When the
user has not listed the features, :func:`screen` leaves out, with one line each:

* an **ID**: an integer or text column whose values are all different, in every row;
* a **constant** column: one value (or none) in every row;
* a **near-unique category**: a text column (a categorical feature by default) with
  more distinct values than :data:`MAX_DISTINCT_SHARE` of its non-NULL rows, which the
  model could only learn as one category per row.

Floating-point columns are never IDs (measurements are often all different). The check
reads the first :data:`SAMPLE_ROWS` rows only, so its cost does not grow with the data;
the constant rule is applied only when those rows are the whole source, because a rare
value later in the data would make the column informative. One query takes ``COUNT``,
``MIN`` and ``MAX`` of every column; a column is constant when its minimum equals its
maximum (in DuckDB, hundreds or more numeric columns are read in the long shape,
:func:`sqlnb.sql.long_select`, beside that query). ``COUNT(DISTINCT ...)`` is needed only for the columns that could still be an ID
or a near-unique category: text columns, and integer columns with a value in every row
whose range ``max − min + 1`` holds as many values as there are rows (a 0/1 column of 2,000
rows cannot be an ID). Those are counted :data:`DISTINCT_CHUNK` columns per query: DuckDB's
time for one SELECT of many distinct aggregates grows much faster than their number
(300 columns of 2,000 rows: 1.9 s; 600: 16.9 s), which made screening a 1,000-column table
take over a minute. A column is kept by naming it (``keep``, ``--keep-columns``) or by
listing the features explicitly.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import ScreeningWarning
from sqlnb.source import Source
from sqlnb.sql.types import is_float, is_numeric, is_text_type

#: Rows read from the start of the source.
SAMPLE_ROWS = 100_000
#: Fewer sampled rows than this: no screening (too few to call anything an ID).
MIN_ROWS = 20
#: A text column with more distinct values than this share of its non-NULL rows is left out.
MAX_DISTINCT_SHARE = 0.5
#: Columns per ``COUNT(DISTINCT ...)`` query (see the module docstring).
DISTINCT_CHUNK = 64


@dataclass(frozen=True)
class Screened:
    """A column left out, and why (one line for stderr and ``show``)."""

    column: str
    reason: str

    def line(self) -> str:
        name = cli_name(self.column)
        return (f"note: left out column {self.column!r}: {self.reason} (keep it with --keep-columns {name}, "
                f"keep_columns=[{self.column!r}] in Python, or list the features)")

    def to_dict(self) -> dict:
        return {"column": self.column, "reason": self.reason}


def cli_name(name: str) -> str:
    """A column name as the command line takes it (in double quotes when it holds a
    comma or spaces at either end, as in the column lists)."""
    if "," in name or name != name.strip() or name.startswith('"'):
        return '"' + name.replace('"', '""') + '"'
    return name


def candidates(source: Source, label: str, weight: str | None, exclude: Sequence[str] | None,
               keep: Sequence[str] | None, numeric_only: bool = False) -> list[str]:
    """The columns an automatic feature plan would take that screening looks at
    (``numeric_only`` for the dense kinds, whose plan refuses other columns by name)."""
    skip = {label, weight, *(exclude or ()), *(keep or ())}
    return [c for c, t in source.columns.items()
            if c not in skip and (is_numeric(t) or t.upper() == "BOOLEAN" or (is_text_type(t) and not numeric_only))]


def screen_plan(engine: Any, source: Source, label: str, weight: str | None, features: Sequence[str] | None,
                exclude: Sequence[str] | None, keep: Sequence[str] | None, enabled: bool = True,
                numeric_only: bool = False, asked: Sequence[str] = ()) -> list[Screened]:
    """Screening of an automatic feature plan: none when ``features`` are listed or
    ``enabled`` is false; otherwise :func:`screen` over the :func:`candidates`, each
    column left out said as a :class:`~sqlnb.errors.ScreeningWarning`. Columns in
    ``keep`` must exist (a typo is an error, not a silent no-op); ``asked`` are columns the
    caller asked for otherwise (given a kind), checked where they are used."""
    if keep:
        source.require(list(keep), "column to keep")
    if features is not None or not enabled:
        return []
    found = screen(engine, source, candidates(source, label, weight, exclude, [*(keep or ()), *asked],
                                              numeric_only))
    for s in found:
        warnings.warn(s.line(), ScreeningWarning, stacklevel=4)
    return found


def screen(engine: Any, source: Source, columns: Sequence[str],
           sample_rows: int = SAMPLE_ROWS) -> list[Screened]:
    """The columns among ``columns`` to leave out of an automatic feature plan.

    Parameters
    ----------
    engine : Engine
        Runs the one query (:mod:`sqlnb.engines`).
    source : Source
        The training rows.
    columns : list of str
        Candidate feature columns (see :func:`candidates`).
    sample_rows : int
        Rows read from the start of the source.
    """
    if not columns:
        return []
    long = _long_columns(engine, source, columns)
    narrow = [c for c in columns if c not in set(long)]
    aggregates: list[exp.Expression] = [exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True)]
    for j, c in enumerate(narrow):
        x = sql.col(c, "s")
        # PostgreSQL has no MIN/MAX of a BOOLEAN: compared as 0/1 there and everywhere.
        v = exp.Cast(this=x.copy(), to=exp.DataType.build("int")) if source.columns[c].upper() == "BOOLEAN" else x
        aggregates += [exp.alias_(exp.Count(this=x), f"c{j}", quoted=True),
                       exp.alias_(exp.Min(this=v.copy()), f"lo{j}", quoted=True),
                       exp.alias_(exp.Max(this=v.copy()), f"hi{j}", quoted=True)]
    row = engine.execute(exp.select(*aggregates).from_(_sample(source, narrow, sample_rows), copy=False))[0]
    n = int(row[0])
    if n < MIN_ROWS:
        return []
    whole = n < sample_rows
    present = {c: int(row[1 + 3 * j]) for j, c in enumerate(narrow)}
    lo_hi = {c: (row[2 + 3 * j], row[3 + 3 * j]) for j, c in enumerate(narrow)}
    if long:
        _screen_long(engine, source, long, sample_rows, present, lo_hi)
    distinct = {c: (0 if present[c] == 0 else 1 if lo == hi else None) for c, (lo, hi) in lo_hi.items()}
    wanted = [c for c in columns if distinct[c] is None and _may_be_unique(source.columns[c], present[c], n, *lo_hi[c])]
    for a in range(0, len(wanted), DISTINCT_CHUNK):
        chunk = wanted[a:a + DISTINCT_CHUNK]
        counts = [exp.alias_(exp.Count(this=exp.Distinct(expressions=[sql.col(c, "s")])), f"d{j}", quoted=True)
                  for j, c in enumerate(chunk)]
        got = engine.execute(exp.select(*counts).from_(_sample(source, chunk, sample_rows), copy=False))[0]
        distinct.update({c: int(d) for c, d in zip(chunk, got)})
    out = []
    for c in columns:
        t, d, m = source.columns[c], distinct[c], present[c]
        if d is None:  # not counted: neither constant nor possibly unique
            continue
        if whole and d <= 1:
            what = "NULL in every row" if d == 0 else "the same value in every row"
            out.append(Screened(c, f"constant ({what})"))
        elif not is_float(t) and t.upper() != "BOOLEAN" and m == n and d == n:
            out.append(Screened(c, f"a different value in each of the {'' if whole else 'first '}{n:,} rows, "
                                   "like an ID"))
        elif is_text_type(t) and m and d > MAX_DISTINCT_SHARE * m:
            out.append(Screened(c, f"{d:,} distinct values in {m:,} non-NULL rows "
                                   f"(more than {MAX_DISTINCT_SHARE:.0%}), too many to learn as categories"))
    return out


#: Column types whose every value a DOUBLE holds exactly (MIN = MAX compared exactly).
EXACT_IN_DOUBLE = {"BOOLEAN", "BOOL", "TINYINT", "INT1", "SMALLINT", "INT2", "INTEGER", "INT", "INT4", "UTINYINT",
                   "USMALLINT", "UINTEGER", "FLOAT", "FLOAT4", "REAL", "DOUBLE", "FLOAT8"}
#: From this many such columns DuckDB screens them in the long shape (sql.long_select).
LONG_MIN = 256


def _long_columns(engine: Any, source: Source, columns: Sequence[str]) -> list[str]:
    """The columns screened in the long shape: on DuckDB, those whose values a DOUBLE
    holds exactly, when there are :data:`LONG_MIN` of them (3 aggregates per column in one
    SELECT: 10,000 columns took 8 s, most of it DuckDB planning)."""
    exact = [c for c in columns if source.columns[c].upper() in EXACT_IN_DOUBLE]
    return exact if engine.dialect == "duckdb" and len(exact) >= LONG_MIN else []


def _screen_long(engine: Any, source: Source, columns: Sequence[str], sample_rows: int,
                 present: dict, lo_hi: dict) -> None:
    """``COUNT``, ``MIN`` and ``MAX`` of ``columns`` over the first rows, each value as a
    DOUBLE (exact for these types; integers come back as ints), into ``present`` and
    ``lo_hi``."""
    values = exp.Array(expressions=[sql.as_double(sql.col(c, "src"), source.columns[c]) for c in columns])
    q = sql.long_select(source.from_("src"), [], values, lambda v: [
        exp.Count(this=v.copy()), exp.Min(this=v.copy()), exp.Max(this=v.copy())], sample_rows)
    got = {r[0]: r[1:] for r in engine.execute(q)}
    for j, c in enumerate(columns):
        count, lo, hi = got.get(j, (0, None, None))
        if not is_float(source.columns[c]):  # integers and booleans: as the one-pass query gives them
            lo, hi = (None if lo is None else int(lo)), (None if hi is None else int(hi))
        present[c], lo_hi[c] = int(count), (lo, hi)


def _sample(source: Source, columns: Sequence[str], sample_rows: int) -> exp.Subquery:
    """The first ``sample_rows`` rows of ``columns``, aliased ``s``."""
    read = [sql.col(c, "src") for c in columns] or [exp.alias_(exp.Literal.number(1), "one", quoted=True)]
    head = exp.select(*read).from_(source.from_("src"), copy=False)
    return exp.Subquery(this=head.limit(sample_rows, copy=False), alias=exp.TableAlias(this=sql.ident("s")))


def _may_be_unique(t: str, present: int, n: int, lo: Any, hi: Any) -> bool:
    """Whether a column (neither NULL everywhere nor constant) could be an ID or a
    near-unique category, so its distinct values need counting: a text column; an integer
    column with a value in every row and room for ``n`` different integers in its range."""
    if is_text_type(t):
        return True
    if is_float(t) or t.upper() == "BOOLEAN" or present != n:
        return False
    if isinstance(lo, int) and isinstance(hi, int) and not isinstance(lo, bool):
        return hi - lo + 1 >= n
    return True  # decimals, dates, ...: count them
