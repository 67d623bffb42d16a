"""Which fold of a cross-validation each row falls in: the same on every engine.

Folds, when ``key`` is one integer column (a row id), the portable hash
(:func:`portable_fold`)::

    x = ((key mod P) + P) mod P,  P = 2³¹ − 1     (a NULL key counts as 0)
    h = (x·a + b) mod P;  h = (h·h + c) mod P;  h = (h·d + b) mod P
    fold(row) = h mod k

in BIGINT arithmetic that never overflows (every product is below 2⁶²), with ``a, b, c,
d`` drawn from the seed by SplitMix64 in Python. It is integer arithmetic only, so a row
lands in the same fold on DuckDB, PostgreSQL and Spark; on PostgreSQL and Spark it is the
only fold assignment (they need ``key``). Otherwise, on DuckDB::

    fold(row) = hash(<key columns>, seed) % k

with DuckDB's variadic ``hash()`` (UBIGINT; the seed is one more argument), so folds are
reproducible for a given seed and DuckDB version and need no row order. The default key
is every column of the source (identical rows then share a fold); give ``key`` (a row id)
for balanced folds on data with many duplicate rows.
"""

from __future__ import annotations

from typing import Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.source import Source
from sqlnb.sql.types import is_float, is_numeric


#: The prime modulus of :func:`portable_fold` (2³¹ − 1: products of two residues fit BIGINT).
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
    """``a, b, c, d`` of :func:`portable_fold`, each in ``[1, P − 1]``, from the seed."""
    state, out = seed & ((1 << 64) - 1), []
    for _ in range(4):
        state, z = _splitmix64(state)
        out.append(z % (FOLD_PRIME - 1) + 1)
    return out


def is_integer_type(sql_type: str) -> bool:
    """Whole-number column types (not DECIMAL, whose scale may be > 0)."""
    base = sql_type.upper().split("(")[0].strip()
    return is_numeric(sql_type) and not is_float(sql_type) and base not in ("DECIMAL", "NUMERIC")


def portable_fold(column: exp.Expression, folds: int, seed: int) -> exp.Expression:
    """The fold of an integer ``column`` by the portable hash of the module docstring: the
    same fold on every engine (only BIGINT ``%``, ``*`` and ``+``, no overflow)."""
    return exp.Mod(this=portable_hash(column, seed), expression=exp.Literal.number(folds))


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


def fold_expression(source: Source, folds: int, seed: int = 0, key: Sequence[str] | None = None,
                    dialect: str = "duckdb") -> exp.Expression:
    """Each row's fold over the source alias ``src`` (module docstring): the portable hash
    of ``key`` when it is one integer column, else (DuckDB only) ``hash(<key columns>,
    seed) % folds``."""
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise SqlnbError(f"folds must be an integer >= 2, not {folds!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise SqlnbError(f"seed must be an integer, not {seed!r}")
    columns = list(key) if key is not None else list(source.columns)
    source.require(columns, "fold key column")
    if key is not None and len(columns) == 1 and is_integer_type(source.columns[columns[0]]):
        return portable_fold(sql.col(columns[0], "src"), folds, seed)
    if dialect != "duckdb":
        what = "no key" if key is None else f"key {', '.join(columns)!r} ({', '.join(source.columns[c] for c in columns)})"
        raise SqlnbError(f"cross-validation on {dialect} needs a key: one integer column (a row id) whose hash puts "
                         f"each row in the same fold on every engine (key=[...], --key); got {what}")
    args = [sql.col(c, "src") for c in columns] + [exp.Literal.number(seed)]
    return exp.Mod(this=exp.Anonymous(this="hash", expressions=args), expression=exp.Literal.number(folds))


def fold_source(source: Source, fold: exp.Expression, i: int, held_out: bool = True) -> Source:
    """The rows of fold ``i`` (``held_out``) or of every other fold, as a source."""
    cond = (exp.EQ if held_out else exp.NEQ)(this=fold.copy(), expression=exp.Literal.number(i))
    query = exp.select(exp.Column(this=exp.Star(), table=sql.ident("src"))).from_(source.from_("src")).where(cond)
    which = f"fold {i}" if held_out else f"all but fold {i}"
    return Source(expr=exp.Subquery(this=query), columns=dict(source.columns),
                  description=f"{source.description} ({which})")
