"""Building sqlglot trees: quoted identifiers, DOUBLE literals, typed values, balanced sums.

Every statement sqlnb runs or prints is a tree built with these helpers. Identifiers are
always quoted (a column named ``a"; DROP TABLE t; --`` is just a column), and numbers are
DOUBLE (a bare ``0.94`` is DECIMAL in DuckDB, and sums of many such literals overflow).
"""

from __future__ import annotations

import functools
import gc
import math
from typing import Any, Callable, Iterable, Sequence

from sqlglot import exp

from sqlnb.sql.types import is_float, is_numeric, is_text_type

_DOUBLE = exp.DataType.build("double")


def ident(name: str) -> exp.Identifier:
    """A quoted identifier for ``name``, whatever characters it holds."""
    return exp.to_identifier(str(name), quoted=True)


def col(name: str, table: str | None = None) -> exp.Column:
    """A quoted column reference, optionally qualified by a (quoted) table alias."""
    return exp.Column(this=ident(name), table=ident(table) if table else None)


def table(name: str, schema: str | None = None, catalog: str | None = None) -> exp.Table:
    """A quoted, optionally qualified, table reference."""
    return exp.Table(
        this=ident(name),
        db=ident(schema) if schema else None,
        catalog=ident(catalog) if catalog else None,
    )


def trees_collected_by_refcount(fn):
    """Run ``fn`` with Python's cyclic garbage collector paused, so that the SQL trees it
    builds and drops are freed when it returns instead of being promoted to the old
    generations first.

    A sqlglot node points to its parent, so a dropped tree is a reference cycle that only
    the cyclic collector frees. Built while that collector runs (every 700 allocations),
    the young tree survives collections and is promoted, and every second or third large
    tree then sets off a collection of the whole heap: 0.1-0.2 s pauses in calls that
    otherwise take 0.04 s (fitting digits, 64 columns x 10 classes, in a process that has
    scikit-learn loaded). Paused, the first collection after the call finds the tree still
    young and unreachable, and frees it in a few milliseconds. The collector is switched
    back on whatever happens (and left alone if the caller had it off)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if not gc.isenabled():
            return fn(*args, **kwargs)
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            gc.enable()
    return wrapper


def dbl(value: float) -> exp.Expression:
    """A DOUBLE literal: ``CAST(<shortest repr> AS DOUBLE)``.

    The cast makes the type explicit in every dialect (DuckDB folds it at bind time, so
    it costs nothing per row). ``repr`` of a Python float round-trips exactly, so the
    engine parses back the very same double. Infinities and NaN become string casts,
    which :func:`render` rewrites for dialects that cannot parse them.
    """
    value = float(value)
    if math.isfinite(value):
        lit = exp.Literal.number(repr(value))
    elif math.isnan(value):
        lit = exp.Literal.string("nan")
    else:
        lit = exp.Literal.string("inf" if value > 0 else "-inf")
    return exp.Cast(this=lit, to=_DOUBLE.copy())


# -- NaN ------------------------------------------------------------------------------------
#
# Every NaN test sqlnb writes is :func:`is_nan`, and everything that reads NaN as missing is
# built on it. Not ``NULLIF(x, 'NaN')``, ``x = 'NaN'``, ``x <> x`` or ``ABS(x) < inf``: DuckDB
# (2.0.1) answers those — and ``isnan(x)`` itself, also of arithmetic on ``x`` — from a
# Parquet column's row-group min/max statistics, which pyarrow's writer computes leaving NaN
# out; over a row group holding a NaN among values in [1, 3] and no NULL they are folded to
# "not NaN" and the NaN passes through as a value. :func:`sqlnb.sql.render` therefore spells
# ``isnan(x)`` for DuckDB as ``(NOT ISFINITE(x) AND NOT ISINF(x))``, which DuckDB evaluates
# per row (sqlnb/sql/dialects.py, with the cost). CSV, DuckDB-written Parquet, Parquet
# without statistics and a row group with a NULL in the column never showed the folding.

def is_nan(x: exp.Expression) -> exp.Expression:
    """``isnan(x)``: the one NaN test (see above); NULL for NULL. :func:`sqlnb.sql.render`
    spells it for each dialect: the finiteness test in DuckDB, ``x = 'NaN'`` in PostgreSQL
    and Snowflake, ``x <> x`` in SQLite (which has no NaN)."""
    return exp.IsNan(this=x)


def nan_as_null(x: exp.Expression) -> exp.Expression:
    """``CASE WHEN isnan(x) THEN NULL ELSE x END``: ``x`` with NaN read as missing (NULL),
    so that no comparison or product after it sees a NaN."""
    return exp.Case(ifs=[exp.If(this=is_nan(x.copy()), true=exp.null())], default=x)


def missing(x: exp.Expression, nan: bool = True) -> exp.Expression:
    """``x IS NULL OR isnan(x)`` (``x IS NULL`` without ``nan``, for a type that cannot
    hold NaN): true for a missing value."""
    null = exp.Is(this=x, expression=exp.Null())
    return exp.Or(this=null, expression=is_nan(x.copy())) if nan else null


def finite(x: exp.Expression) -> exp.Expression:
    """``ABS(x) < inf AND NOT isnan(x)``: true for a finite number, false for NaN and ±inf,
    NULL for NULL, in every dialect. ``ABS(x) < inf`` alone is false for NaN when evaluated
    (NaN sorts above every number in DuckDB, PostgreSQL and Spark), but DuckDB folds it to
    true from pyarrow's Parquet statistics; the :func:`is_nan` half is evaluated per row."""
    return exp.and_(exp.LT(this=exp.Abs(this=x), expression=dbl(math.inf)), exp.Not(this=is_nan(x.copy())))


def nonfinite(x: exp.Expression) -> exp.Expression:
    """``NOT isfinite(x)`` (DuckDB): true for NaN and ±inf, NULL for NULL. For a test
    whose answer may take ±inf along with NaN (a gate that recomputes such rows the
    careful way), it writes ``x`` once where :func:`is_nan` is rendered with it twice."""
    return exp.Not(this=exp.Anonymous(this="ISFINITE", expressions=[x]))


def nan_as(x: exp.Expression, fallback: exp.Expression) -> exp.Expression:
    """``NANVL(x, fallback)`` (Spark): ``x``, or ``fallback`` where it is NaN, with ``x``
    written once (Spark compiles a repeated expression into a method of its own)."""
    return exp.Anonymous(this="NANVL", expressions=[x, fallback])


def as_double(e: exp.Expression, sql_type: str | None = None) -> exp.Expression:
    """``CAST(e AS DOUBLE)``: aggregate and score in binary floating point.

    A BOOLEAN (``sql_type``) becomes ``CASE WHEN e THEN 1.0 WHEN NOT e THEN 0.0 END``
    (NULL stays NULL). Not a cast: PostgreSQL has no boolean -> double cast, and DuckDB
    2.0 pushes ``CAST(b AS INT)`` over a CSV scan into the reader, which then parses the
    text ``false`` as an integer and fails ("Could not convert string "false" to
    'INTEGER'"), whenever no join stands between the scan and the cast.
    """
    if sql_type is not None and sql_type.upper() in ("BOOLEAN", "BOOL"):
        return exp.Case(ifs=[exp.If(this=e, true=dbl(1.0)), exp.If(this=exp.Not(this=e.copy()), true=dbl(0.0))])
    return exp.Cast(this=e, to=_DOUBLE.copy())


def value(v: Any, sql_type: str | None = None) -> exp.Expression:
    """A literal for a data value (a label or a category) of any type.

    Strings, booleans and numbers map to literals; other values (dates, timestamps,
    decimals) are written as a string cast to their column's SQL type, so the value
    compares with the column without an integer-coding step.
    """
    if v is None:
        return exp.null()
    if isinstance(v, bool):
        return exp.true() if v else exp.false()
    if isinstance(v, int):
        return exp.Literal.number(str(v))
    if isinstance(v, float):
        return dbl(v)
    if isinstance(v, str) and (sql_type is None or _is_text(sql_type)):
        return exp.Literal.string(v)
    if sql_type is None:
        return exp.Literal.string(str(v))
    return exp.Cast(
        this=exp.Literal.string(str(v)), to=exp.DataType.build(sql_type, dialect="duckdb")
    )


def _is_text(sql_type: str) -> bool:
    t = sql_type.upper()
    return t.startswith(("VARCHAR", "TEXT", "STRING", "CHAR", "ENUM", "BPCHAR"))


#: Longest run of terms :func:`add` writes as one ``a + b + c ...`` chain.
ADD_RUN = 64


def union_all(queries: Iterable[exp.Query]) -> exp.Query:
    """``q1 UNION ALL q2 UNION ALL …``, the queries taken as they are (not copied): one
    left-deep chain, as ``exp.union`` builds it, without copying the growing chain at each
    step (a generated dbt model of 56 branches of 50-value domains took a minute so)."""
    queries = list(queries)
    return queries[0] if len(queries) == 1 else exp.union(*queries, distinct=False, copy=False)


def add(terms: Iterable[exp.Expression]) -> exp.Expression:
    """The sum of ``terms``: ``a + b + c``, added left to right as SQL reads it; past
    :data:`ADD_RUN` terms, parenthesised runs of that many, ``(a + … + z) + (… ) + …``
    (and runs of runs past ``ADD_RUN``² terms).

    A chain of ``+`` nests one level per term: DuckDB refuses an expression nested past
    ``max_expression_depth`` (1000), which a class score of 1,000 columns reached, and
    Spark's parser gives up on a few thousand terms. Runs keep the depth near
    ``ADD_RUN`` x levels, and a sum of up to ``ADD_RUN`` terms (every model of up to 63
    columns) is the same chain, added in the same order, as before."""
    items = list(terms)
    if not items:
        return dbl(0.0)
    while len(items) > ADD_RUN:
        runs = [items[i:i + ADD_RUN] for i in range(0, len(items), ADD_RUN)]
        items = [exp.Paren(this=_chain(run)) if len(run) > 1 else run[0] for run in runs]
    return _chain(items)


def _chain(items: list[exp.Expression]) -> exp.Expression:
    out = items[0]
    for term in items[1:]:
        out = exp.Add(this=out, expression=term)
    return out


def paren(e: exp.Expression) -> exp.Expression:
    return exp.Paren(this=e)


#: exp() below this underflows to 0 in IEEE doubles (the smallest subnormal is e^-745).
EXP_UNDERFLOW = -745.0


def greatest(items: list[exp.Expression]) -> exp.Expression:
    """``GREATEST(items)`` for arguments that are never NULL (class scores).

    Engines disagree on GREATEST with NULLs (DuckDB, Postgres and Spark skip them;
    Snowflake, MySQL and SQLite's MAX return NULL). Scores are never NULL, so either
    meaning is right, and :func:`render` picks the plain spelling for each dialect.
    """
    if len(items) == 1:
        return items[0]
    return exp.Greatest(this=items[0], expressions=items[1:], ignore_nulls=True)


def long_select(from_: exp.Expression, keys: Sequence[tuple[str, exp.Expression]], values: exp.Array,
                aggregates: Callable[[exp.Expression], list[exp.Expression]],
                limit: int | None = None, beside: Sequence[tuple[str, exp.Expression]] = ()) -> exp.Select:
    """``SELECT keys…, j, aggregates(v) … GROUP BY keys…, j`` over each row of ``from_``
    (aliased ``src``) with its ``values`` unnested to (``j``, ``v``), ``j`` counting from 0
    (DuckDB): the long shape, for queries over thousands of columns.

    DuckDB's planner time grows quadratically with the number of repeated
    sub-expressions in one SELECT (a few thousand ``SUM(x − K), SUM((x − K)·(x − K))``
    took minutes), while a list that names each column once and is unnested stays linear.
    The list is built in a subquery and unnested above it: UNNEST of the list constructor
    itself took 38 s for 10,000 columns x 2,000 rows, of the subquery's column 1.7 s
    (DuckDB 2.0). ``limit`` reads only the first rows of ``from_``. ``beside``: more
    (name, list) of the same length per row, unnested alongside ``values`` as columns of
    that name for ``aggregates`` to read (e.g. a class's means, chosen per row)."""
    names = [k for k, _ in keys]
    lists = exp.select(*[exp.alias_(e, k, quoted=True) for k, e in keys],
                       exp.alias_(values, "l", quoted=True),
                       *[exp.alias_(e, f"l_{b}", quoted=True) for b, e in beside]).from_(from_, copy=False)
    if limit is not None:
        lists = lists.limit(limit, copy=False)
    rows = exp.select(*[exp.column(k, quoted=True) for k in names],
                      exp.alias_(exp.Unnest(expressions=[exp.column("l", quoted=True)]), "v", quoted=True),
                      *[exp.alias_(exp.Unnest(expressions=[exp.column(f"l_{b}", quoted=True)]), b, quoted=True)
                        for b, _ in beside],
                      exp.alias_(exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[
                          exp.Literal.number(len(values.expressions))])]), "j", quoted=True)
                      ).from_(exp.Subquery(this=lists, alias=exp.TableAlias(this=ident("w"))), copy=False)
    group = names + ["j"]
    return (exp.select(*[exp.column(k, quoted=True) for k in group], *aggregates(exp.column("v", quoted=True)))
            .from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=ident("u"))), copy=False)
            .group_by(*[exp.column(k, quoted=True) for k in group], copy=False))


def packed_list(numbers: Sequence[Any], sql_type: str) -> exp.Expression:
    """``CAST(string_split('n,…', ',') AS <type>[])`` (DuckDB): a list of numbers as one
    string literal. Floats are written as their shortest round-trip ``repr``, so the list
    holds the same doubles. A list literal of 100,000 doubles took DuckDB 2–3 s to parse
    and bind, this 0.05 s; and it is one tree node to build and render, not 100,000."""
    text = exp.Literal.string(",".join(map(repr, numbers)))
    return exp.Cast(this=exp.Anonymous(this="string_split", expressions=[text, exp.Literal.string(",")]),
                    to=_list_type(sql_type).copy())


def map_lookup(keys: Sequence[int], values: Sequence[float], index: exp.Expression) -> exp.Expression:
    """``ELEMENT_AT(MAP(key, value, …), index)`` (Spark): the value of ``index`` among
    ``keys``, NULL for a NULL index or one not among them. Spark folds the MAP literal once;
    a CASE of a branch per key is a generated branch per key, and past a few thousand keys a
    method longer than the JVM's 64 kB, then interpreted. Not an array: on Spark 4.x
    ``ELEMENT_AT(ARRAY(…), i)`` and ``ARRAY(…)[i]``, with ``i`` a CASE without ELSE that is
    NULL for a row, raised INVALID_INDEX_OF_ZERO or read the first element."""
    return exp.Anonymous(this="element_at", expressions=[
        exp.VarMap(keys=exp.Array(expressions=[exp.Literal.number(int(k)) for k in keys]),
                   values=exp.Array(expressions=[dbl(float(v)) for v in values])), paren(index)])


#: The meta key of a list :func:`bound_list` marks: its numbers (:class:`BoundValues`).
BOUND = "sqlnb_bound"


class BoundValues:
    """The numbers of a :func:`bound_list` (a numpy array, not to be changed). A
    copy of the tree shares them: sqlglot deep-copies a node's meta, and copying 30,000
    floats at every copy of a scoring tree would cost more than the list saves."""

    def __init__(self, array: Any):
        self.array = array

    def __deepcopy__(self, memo: Any) -> "BoundValues":
        return self


def bound_list(numbers: Any, sql_type: str = "DOUBLE") -> exp.Expression:
    """A list of ``sql_type`` (DOUBLE, or BIGINT for positions) that DuckDB reads as a
    bound parameter where the tree is run in place
    (:func:`sqlnb.sql.dialects.render_bound`), so that the statement's text holds no
    number of it; rendered for export (:func:`sqlnb.sql.dialects.render`) it is the
    self-contained :func:`packed_list` literal. A model's tables of F² cells (AODE's
    ratios) thus leave a scoring SELECT that grows as F. ``numbers``: a numpy array
    (float64, int64 for BIGINT), kept as it is (DuckDB takes it without a Python number
    per cell)."""
    node = packed_list(numbers.tolist(), sql_type)
    node.meta[BOUND] = BoundValues(numbers)
    return node


@functools.lru_cache(maxsize=None)
def _list_type(sql_type: str) -> exp.DataType:
    """``<type>[]`` parsed once (callers copy it): AODE at 57 columns writes 6,400 lists,
    and parsing the type for each took 3 of the 6 s of building its scoring SELECT."""
    return exp.DataType.build(f"{sql_type}[]", dialect="duckdb")


#: What an exact number is compared as (:func:`read_as`): every BIGINT and UBIGINT, and
#: any number below 10^20 to 18 decimal places.
_EXACT = exp.DataType.build("DECIMAL(38, 18)")


def read_as(x: exp.Expression, sql_type: str, input_type: str | None = None) -> exp.Expression:
    """``x`` (of ``input_type``, or unknown) read with the fitted ``sql_type`` (DuckDB):
    ``TRY_CAST(x AS <sql_type>)``, NULL for a value the type cannot hold exactly.

    DuckDB's casts to integers and decimals round: ``TRY_CAST('1.5' AS BIGINT)`` is 2,
    as is ``TRY_CAST(1.5 AS BIGINT)``. A category is a value, so 1.5 is not category 2:
    where the input can hold a fraction (text, a float, a decimal, or a type not known),
    the cast value stands only when it equals the input, compared as DECIMAL(38, 18)
    (or, past its range, as DOUBLE), and is NULL (unseen) otherwise::

        CASE WHEN COALESCE(TRY_CAST(x AS DECIMAL(38, 18)) = TRY_CAST(v AS DECIMAL(38, 18)),
                           TRY_CAST(x AS DOUBLE) = TRY_CAST(v AS DOUBLE), TRUE) THEN v END
        v = TRY_CAST(x AS <sql_type>)

    So ``'2.0'`` and ``'1e3'`` are 2 and 1000, ``' 7'`` and ``'07'`` are 7, and ``'1.5'``,
    ``'x'`` and ``'9223372036854775808'`` (past BIGINT) are unseen in a BIGINT column. Text
    that only the integer reader takes (``'0x10'``) is read as it reads it.
    """
    to = exp.DataType.build(sql_type, dialect="duckdb")
    v = exp.TryCast(this=x, to=to)
    rounds = is_numeric(sql_type) and not is_float(sql_type)
    if not rounds or (input_type is not None and not (is_text_type(input_type) or is_float(input_type)
                                                      or input_type.upper().startswith(("DECIMAL", "NUMERIC")))):
        return v
    same = [exp.EQ(this=exp.TryCast(this=x.copy(), to=t.copy()), expression=exp.TryCast(this=v.copy(), to=t))
            for t in (_EXACT.copy(), exp.DataType.build("double"))]
    return exp.Case(ifs=[exp.If(this=exp.Coalesce(this=same[0], expressions=[same[1], exp.true()]), true=v)])
