"""Which fold of a cross-validation each row falls in: stratified, balanced, the same on every engine.

Rows are put in order — by label, then by a seeded hash within each label — and dealt to
the folds in turn, as scikit-learn's ``StratifiedKFold`` deals them::

    fold(row) = (row_number() OVER (ORDER BY label NULLS LAST, h, <ties>) − 1) mod k

so the rows of one class take consecutive positions: per class, the fold sizes differ by
at most one (a class with at least k rows is in every fold), and so do the folds' total
sizes. Each class's rows are shuffled by ``h``, so which rows share a fold changes with
the seed and nothing else. It is one window over one read of the source (a sort of the
rows by label and hash; benchmarks/README.md measures it against the unstratified hash
folds it replaced). Labels are ordered as the engine sorts them (byte order for text,
``COLLATE "C"`` on PostgreSQL), rows with no label last (they are in no fold's figures).

``h``, when ``key`` is one integer column (a row id), is the portable hash
(:func:`portable_hash`)::

    x = ((key mod P) + P) mod P,  P = 2³¹ − 1     (a NULL key counts as 0)
    h = (x·a + b) mod P;  h = (h·h + c) mod P;  h = (h·d + b) mod P

in BIGINT arithmetic that never overflows (every product is below 2⁶²), with ``a, b, c,
d`` drawn from the seed by SplitMix64 in Python, and ties of ``h`` broken by the key. It is
integer arithmetic only, so a row lands in the same fold on DuckDB, PostgreSQL and Spark;
on PostgreSQL and Spark it is the only fold assignment (they need ``key``). Otherwise, on
DuckDB, ``h = hash(<key columns>, seed)`` with DuckDB's variadic ``hash()`` (UBIGINT; the
seed is one more argument), reproducible for a given seed and DuckDB version, needing no
row order. The default key is every column of the source: rows that tie are identical,
so which of them goes where does not matter; with another ``key``, rows sharing its
value are ordered by the hash of all their columns.

:func:`materialize` copies the source once with each row's fold as a column (what
cross-validation and feature selection read), :func:`drop_copy` removes the copy.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Sequence

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import Engine, as_engine
from sqlnb.errors import SqlnbError
from sqlnb.source import Source, Table
from sqlnb.sql.types import is_float, is_numeric


#: The prime modulus of :func:`portable_hash` (2³¹ − 1: products of two residues fit BIGINT).
FOLD_PRIME = 2147483647


def _splitmix64(state: int) -> tuple[int, int]:
    """One step of SplitMix64: (next state, output)."""
    mask = (1 << 64) - 1
    state = (state + 0x9E3779B97F4A7C15) & mask
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & mask
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & mask
    return state, z ^ (z >> 31)


def fold_constants(seed: int) -> list[int]:
    """``a, b, c, d`` of :func:`portable_hash`, each in ``[1, P − 1]``, from the seed."""
    state, out = seed & ((1 << 64) - 1), []
    for _ in range(4):
        state, z = _splitmix64(state)
        out.append(z % (FOLD_PRIME - 1) + 1)
    return out


def is_integer_type(sql_type: str) -> bool:
    """Whole-number column types (not DECIMAL, whose scale may be > 0)."""
    base = sql_type.upper().split("(")[0].strip()
    return is_numeric(sql_type) and not is_float(sql_type) and base not in ("DECIMAL", "NUMERIC")


def portable_hash(column: exp.Expression, seed: int) -> exp.Expression:
    """``h`` of the module docstring for an integer ``column``: in ``[0, 2³¹ − 1)``, the
    same on every engine."""
    a, b, c, d = fold_constants(seed)

    def mod(x: exp.Expression, m: int) -> exp.Expression:
        # sqlglot renders trees as built, without precedence parentheses: add them.
        return sql.paren(exp.Mod(this=sql.paren(x), expression=exp.Literal.number(m)))

    def lit(v: int) -> exp.Expression:
        return exp.Literal.number(v)

    key = exp.Coalesce(this=column, expressions=[exp.Literal.number(0)])
    x = exp.Cast(this=mod(key, FOLD_PRIME), to=exp.DataType.build("bigint"))
    x = mod(exp.Add(this=x, expression=lit(FOLD_PRIME)), FOLD_PRIME)
    h = mod(exp.Add(this=exp.Mul(this=x, expression=lit(a)), expression=lit(b)), FOLD_PRIME)
    h = mod(exp.Add(this=exp.Mul(this=h, expression=h.copy()), expression=lit(c)), FOLD_PRIME)
    return mod(exp.Add(this=exp.Mul(this=h, expression=lit(d)), expression=lit(b)), FOLD_PRIME)


def shuffle_keys(source: Source, seed: int = 0, key: Sequence[str] | None = None,
                 dialect: str = "duckdb") -> list[exp.Expression]:
    """The order of the rows within a class (module docstring): ``h``, then what breaks its ties."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SqlnbError(f"seed must be an integer, not {seed!r}")
    columns = list(key) if key is not None else list(source.columns)
    source.require(columns, "fold key column")
    if key is not None and len(columns) == 1 and is_integer_type(source.columns[columns[0]]):
        # h is 31 bits (two keys share one now and then): the key itself decides between them.
        return [portable_hash(sql.col(columns[0], "src"), seed), sql.col(columns[0], "src")]
    if dialect != "duckdb":
        what = "no key" if key is None else f"key {', '.join(columns)!r} ({', '.join(source.columns[c] for c in columns)})"
        raise SqlnbError(f"cross-validation on {dialect} needs a key: one integer column (a row id) whose hash puts "
                         f"each row in the same fold on every engine (key=[...], --key); got {what}")

    def hashed(names: Sequence[str]) -> exp.Expression:
        return exp.Anonymous(this="hash", expressions=[*(sql.col(c, "src") for c in names), exp.Literal.number(seed)])

    return [hashed(columns)] if key is None else [hashed(columns), hashed(list(source.columns))]


def fold_column_name(columns: Sequence[str], base: str = "cv_fold") -> str:
    """``base`` with underscores prepended until no column has that name (case-insensitively)."""
    taken = {c.lower() for c in columns}
    while base.lower() in taken:
        base = f"_{base}"
    return base


def assign_folds(source: Source, label: str, folds: int, seed: int = 0, key: Sequence[str] | None = None,
                 dialect: str = "duckdb") -> tuple[Source, exp.Column]:
    """``source`` with each row's fold as one more BIGINT column, and that column over ``src``.

    Stratified and balanced, one window over one read of the source (module docstring).
    The fold is a column, not an expression of the row, so it can be grouped by and
    filtered on: every step reads the returned source (or :func:`sqlnb.workflows.cv.materialize`'s
    copy of it), and :func:`fold_source` leaves the column out of the rows it returns."""
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise SqlnbError(f"folds must be an integer >= 2, not {folds!r}")
    source.require([label], "label column")
    keys = shuffle_keys(source, seed, key, dialect)
    by_label: exp.Expression = sql.col(label, "src")
    if dialect == "postgres" and not is_numeric(source.columns[label]):
        by_label = exp.Collate(this=by_label, expression=exp.Identifier(this="C", quoted=True))
    order = [exp.Ordered(this=by_label, nulls_first=False), *(exp.Ordered(this=k, nulls_first=False) for k in keys)]
    position = exp.Window(this=exp.RowNumber(), order=exp.Order(expressions=order))
    fold = exp.Mod(this=sql.paren(exp.Sub(this=position, expression=exp.Literal.number(1))),
                   expression=exp.Literal.number(folds))
    name = fold_column_name(list(source.columns))
    query = exp.select(exp.Column(this=exp.Star(), table=sql.ident("src")),
                       exp.alias_(exp.Cast(this=fold, to=exp.DataType.build("bigint")), name, quoted=True)
                       ).from_(source.from_("src"))
    folded = Source(expr=exp.Subquery(this=query), columns={**source.columns, name: "BIGINT"},
                    description=source.description, engine=source.engine)
    return folded, sql.col(name, "src")


def fold_source(source: Source, fold: exp.Expression, i: int, held_out: bool = True,
                keep_fold: bool = False) -> Source:
    """The rows of fold ``i`` (``held_out``) or of every other fold, as a source; without
    the fold column (:func:`assign_folds`), so a fit on them sees the original columns, unless
    ``keep_fold`` (the training folds of a nested cross-validation, grouped by fold)."""
    cond = (exp.EQ if held_out else exp.NEQ)(this=fold.copy(), expression=exp.Literal.number(i))
    drop = fold.name if isinstance(fold, exp.Column) and not keep_fold else None
    columns = {c: t for c, t in source.columns.items() if c != drop}
    query = exp.select(*[exp.alias_(sql.col(c, "src"), c, quoted=True) for c in columns]
                       ).from_(source.from_("src")).where(cond)
    which = f"fold {i}" if held_out else f"all but fold {i}"
    return Source(expr=exp.Subquery(this=query), columns=columns, description=f"{source.description} ({which})")


def _unused_name(columns: Sequence[str], base: str) -> str:
    """``base`` with underscores appended until no column of the source has that name
    (case-insensitively, as DuckDB compares identifiers)."""
    taken = {c.lower() for c in columns}
    while base.lower() in taken:
        base = f"_{base}"
    return base


def materialize(con: "duckdb.DuckDBPyConnection | Engine", source: Source, label: str, fold: exp.Expression,
                features: Sequence[str] | None, exclude: Sequence[str] | None) -> tuple[str, Source, exp.Expression]:
    """Read ``source`` once into a temporary table, with each row's fold as a column.

    Cross-validation then reads only this copy: the statistics scan, the first rows for
    the Gaussian shifts and the scoring scan. The source itself is read exactly once,
    which matters when reading it is the expensive part (CSV parsing, a view with joins,
    remote files), and the fold hash is computed once per row. Only the label, the
    candidate features and the fold are copied. DuckDB spills the copy to its temp
    directory when it does not fit in memory. On PostgreSQL the copy is a temporary
    table too; Spark has none, so there it is a cached temporary view (``CACHE TABLE
    name AS query``: computed at once and kept by the executors, in memory and on disk).
    :func:`drop_copy` removes it.

    Returns
    -------
    (table name, the copy as a Source described like ``source``, the fold column)
    """
    # The fold of assign_folds is a column of the source already: copied under its name.
    given = fold.name if isinstance(fold, exp.Column) and fold.name in source.columns else None
    name = given or _unused_name(source.columns, "cv_fold")
    dropped = set(exclude or ())
    columns = [c for c in source.columns if c != given and
               (c == label or (c in features if features is not None else c not in dropped))]
    engine = as_engine(con)
    table = f"sqlnb_cv_{uuid.uuid4().hex}"
    query = exp.select(*[exp.alias_(sql.col(c, "src"), c, quoted=True) for c in columns],
                       exp.alias_(fold.copy(), name, quoted=True)).from_(source.from_("src"))
    if engine.dialect == "spark":
        engine.execute(exp.Cache(this=sql.table(table), lazy=False, expression=query))
    else:
        engine.execute(exp.Create(this=sql.table(table), kind="TABLE", expression=query,
                                  properties=exp.Properties(expressions=[exp.TemporaryProperty()])))
    copy = dataclasses.replace(engine.resolve(Table(table)), description=source.description)
    return table, copy, sql.col(name, "src")


def drop_copy(con: "duckdb.DuckDBPyConnection | Engine", table: str) -> None:
    """Remove the copy :func:`materialize` made."""
    engine = as_engine(con)
    if engine.dialect == "spark":
        engine.execute(exp.Uncache(this=sql.table(table), exists=True))
        engine.execute(exp.Drop(tables=[sql.table(table)], kind="VIEW", exists=True))
    else:
        engine.execute(exp.Drop(tables=[sql.table(table)], kind="TABLE", exists=True))
