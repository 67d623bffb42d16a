"""Rendering trees for a dialect: the one place a tree becomes SQL text.

Dialect gaps that can be written as tree rewrites (special float values, GREATEST's NULL
handling, ``isnan``, PostgreSQL's EXP underflow error, SQLite's unnamed VALUES columns,
Spark's lack of ``AS MATERIALIZED``) are applied here; anything a target cannot express
raises instead of producing SQL that fails later on a server.
"""

from __future__ import annotations

import itertools
import math

import sqlglot
from sqlglot import exp

from sqlnb.errors import SqlnbError
from sqlnb.sql.build import BOUND, EXP_UNDERFLOW, _DOUBLE, dbl

#: Dialects whose rendering sqlnb supports (see the README's dialect table for which of
#: them are execution-tested).
DIALECTS = ("duckdb", "postgres", "spark", "sqlite", "snowflake", "bigquery", "trino")

#: Dialects without ``VAR_POP`` / ``GROUPING SETS``: the training-query export
#: (:mod:`sqlnb.workflows.export`) builds other shapes for them.
NO_VAR_POP = ("sqlite",)
NO_GROUPING_SETS = ("sqlite",)

_SPECIAL = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}


def _special_literal(dialect: str, v: float) -> exp.Expression:
    """±inf / NaN spelled so that ``dialect`` parses them (each spelling execution-tested
    where the README's dialect table says so)."""
    if dialect == "sqlite":  # no special-value casts; an overflowing literal is +inf
        if math.isnan(v):
            return exp.null()  # SQLite has no NaN (it stores NULL)
        lit = exp.Literal.number("1e999")
        return exp.Neg(this=lit) if v < 0 else lit
    if dialect == "trino":  # casts of 'Infinity' strings fail; infinity() and nan() exist
        if math.isnan(v):
            return exp.Anonymous(this="nan", expressions=[])
        inf = exp.Anonymous(this="infinity", expressions=[])
        return exp.Neg(this=inf) if v < 0 else inf
    text = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if dialect in ("bigquery", "snowflake"):
        text = "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return exp.Cast(this=exp.Literal.string(text), to=_DOUBLE.copy())


#: Dialects with a DOUBLE literal of their own, ``1.5D`` (Spark SQL): ``CAST(1.5 AS DOUBLE)``
#: is written that way there. The same double (Spark parses the digits with Java's
#: ``Double.parseDouble``, which rounds correctly as Python's ``repr`` does), in a third of
#: the text: a scoring SELECT holds thousands of literals, and Spark parses, analyses and
#: compiles all of them for every query.
_DOUBLE_SUFFIX = ("spark",)
#: Dialects where a number with an exponent is a DOUBLE literal (DuckDB: ``0.5e0``; a bare
#: ``0.5`` is DECIMAL there): ``CAST(0.5 AS DOUBLE)`` is written that way. DuckDB parses it
#: to the same double (checked for every value in tests/test_reference_sql.py), and binds
#: one constant instead of folding a cast, for each of a scoring SELECT's literals.
_DOUBLE_EXPONENT = ("duckdb",)


def _double_literal(dialect: str, node: exp.Cast) -> exp.Expression | None:
    """How ``dialect`` spells ``node``, a DOUBLE cast, when it is one of :func:`sqlnb.sql.dbl`'s
    literals spelled otherwise there (None: as it is)."""
    lit = node.this
    if isinstance(lit, exp.Literal) and lit.is_string and lit.this in _SPECIAL:
        return _special_literal(dialect, _SPECIAL[lit.this])
    if dialect in _DOUBLE_SUFFIX or dialect in _DOUBLE_EXPONENT:  # a negative number is Neg(literal)
        negative = isinstance(lit, exp.Neg)
        digits = lit.this if negative else lit
        if isinstance(digits, exp.Literal) and not digits.is_string:
            text = digits.this
            if dialect in _DOUBLE_SUFFIX:
                text += "D"
            elif "e" not in text.lower():
                text += "e0"
            out = exp.Literal.number(text)
            return exp.Neg(this=out) if negative else out
    return None


#: Dialects whose ``isnan(x)`` is written ``(NOT ISFINITE(x) AND NOT ISINF(x))``: DuckDB
#: (2.0.1) folds ``isnan`` — and ``x = 'NaN'``, ``NULLIF(x, 'NaN')``, ``ABS(x) < inf`` —
#: to a constant from a Parquet column's row-group min/max statistics, which pyarrow's
#: writer computes leaving NaN out: over a file of NaN among values in [1, 3] and no NULL,
#: ``isnan(x)`` and ``isnan(x + 0.5)`` are false for the NaN. ``isfinite`` is evaluated per
#: row (``isinf`` may be folded, rightly: a NaN is not infinite). Measured over 10 DOUBLE
#: columns × 5M rows, ``CASE WHEN <test> THEN NULL ELSE x END``: ``isnan`` 2.21 s,
#: the finiteness test 2.17 s, ``x IS NOT DISTINCT FROM 'NaN'`` (also right) 2.86 s, best
#: of 3, one thread, on a busy machine (a bare sum 1.30 s).
_NAN_BY_FINITENESS = ("duckdb",)


def _isnan_by_finiteness(g, node: exp.IsNan) -> str:
    x = g.sql(node.this)  # rendered once, written twice
    return f"(NOT ISFINITE({x}) AND NOT ISINF({x}))"


_DIALECT_CLASSES: dict[str, sqlglot.Dialect] = {}


def _sqlglot_dialect(dialect: str) -> sqlglot.Dialect:
    """sqlglot's ``dialect`` whose generator spells DOUBLE literals as :func:`_double_literal`
    says. Done while generating, not as a rewrite of the tree, because a rewrite has to
    copy the caller's tree first, and every scoring tree holds such literals (the copy was
    about a third of rendering a large one)."""
    if dialect not in _DIALECT_CLASSES:
        base = type(sqlglot.Dialect.get_or_raise(dialect))
        gen = base.generator_class
        parent = gen.TRANSFORMS.get(exp.Cast)

        def cast(g, node: exp.Cast) -> str:
            out = _double_literal(dialect, node) if node.to.this == exp.DataType.Type.DOUBLE else None
            if out is None:
                return parent(g, node) if parent is not None else g.cast_sql(node)
            if isinstance(out, exp.Cast):  # a special value's string cast: not spelled again
                return parent(g, out) if parent is not None else g.cast_sql(out)
            return g.sql(out)

        transforms = {**gen.TRANSFORMS, exp.Cast: cast}
        if dialect in _NAN_BY_FINITENESS:
            transforms[exp.IsNan] = _isnan_by_finiteness
        generator = type("Generator", (gen,), {"TRANSFORMS": transforms})
        _DIALECT_CLASSES[dialect] = type(f"Sqlnb{base.__name__}", (base,), {"Generator": generator})()
    return _DIALECT_CLASSES[dialect]


def _exp_without_underflow_error(node: exp.Expression) -> exp.Expression:
    """PostgreSQL raises "value out of range: underflow" where other engines return 0,
    so ``EXP(x)`` becomes ``CASE WHEN x < -745 THEN 0 ELSE EXP(x) END`` there — exact,
    since e^-745 already rounds to 0."""
    if isinstance(node, exp.Exp) and not node.meta.get("sqlnb_guarded"):
        guarded = exp.Exp(this=node.this.copy())
        guarded.meta["sqlnb_guarded"] = True
        return exp.Case(
            ifs=[exp.If(this=exp.LT(this=node.this.copy(), expression=dbl(EXP_UNDERFLOW)), true=dbl(0.0))],
            default=guarded,
        )
    return node


_PLAIN_GREATEST_IS_NULL_PROPAGATING = ("sqlite", "snowflake")

#: Dialects without an ``isnan`` function. PostgreSQL and Snowflake compare NaN equal to
#: itself, so ``x = 'NaN'`` is the test. SQLite stores NaN as NULL, so no value is NaN
#: there: the test is ``x <> x``, false for every value and NULL for NULL, as ``isnan``
#: (not ``x = NULL``, NULL for every value: ``NOT isnan(x)`` must be true for a number).
_NAN_BY_EQUALITY = ("postgres", "snowflake", "sqlite")


def _isnan_as_equality(node: exp.Expression, dialect: str) -> exp.Expression:
    if isinstance(node, exp.IsNan):
        if dialect == "sqlite":
            return exp.paren(exp.NEQ(this=node.this, expression=node.this.copy()))
        return exp.paren(exp.EQ(this=node.this, expression=dbl(float("nan"))))
    return node


def _plain_greatest(node: exp.Expression) -> exp.Expression:
    if isinstance(node, (exp.Greatest, exp.Least)):
        node.set("ignore_nulls", False)
    return node


#: Dialects whose parser rejects ``WITH name AS MATERIALIZED (...)`` (Spark SQL 4.x; its
#: optimizer decides itself whether a CTE is inlined): the hint is dropped there.
_NO_MATERIALIZED_CTE = ("spark",)


def _cte_unhinted(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.CTE) and node.args.get("materialized") is not None:
        node.set("materialized", None)
    return node


def _values_as_union(node: exp.Expression) -> exp.Expression:
    """SQLite cannot name a VALUES table's columns (``AS t(a, b)``): write the rows as
    ``SELECT … AS a, … AS b UNION ALL SELECT …`` instead."""
    if isinstance(node, exp.Values) and node.args.get("alias") is not None:
        alias = node.args["alias"]
        names = [c.copy() for c in alias.args.get("columns") or []]
        if names:
            selects = [exp.select(*[exp.alias_(v.copy(), n.copy()) for v, n in zip(row.expressions, names)])
                       for row in node.expressions]
            union = selects[0]
            for sel in selects[1:]:
                union = exp.union(union, sel, distinct=False)
            return exp.Subquery(this=union, alias=exp.TableAlias(this=alias.this.copy()))
    return node


#: Nodes that sqlglot renders for a dialect although the engine has no such function or
#: clause (measured with sqlglot 30.30: VAR_POP becomes SQLite's non-existent
#: VARIANCE_POP, ARG_MAX passes unchanged to PostgreSQL and SQLite, SQLite parses no
#: GROUPING SETS). sqlnb's builders avoid them (see sqlnb.workflows.export); this catches a
#: regression when SQL is rendered instead of when a server rejects it.
_CANNOT_RUN: dict[type, tuple[str, tuple[str, ...]]] = {
    exp.VariancePop: ("VAR_POP", ("sqlite",)),
    exp.GroupingSets: ("GROUPING SETS", ("sqlite",)),
    exp.ArgMax: ("ARG_MAX", ("postgres", "sqlite")),
    exp.ArgMin: ("ARG_MIN", ("postgres", "sqlite")),
}
#: Functions sqlglot does not know (passed through as written), by the dialects having them.
_ONLY_IN = {"HISTOGRAM": ("duckdb",), "LOG1P": ("spark",), "NANVL": ("spark",), "LIST_DOT_PRODUCT": ("duckdb",)}


def _check_runs(tree: exp.Expression, dialect: str) -> None:
    """Raise when ``dialect`` cannot run a node of :data:`_CANNOT_RUN` in the tree."""
    for cls, (name, dialects) in _CANNOT_RUN.items():
        if dialect in dialects and tree.find(cls) is not None:
            raise SqlnbError(f"{dialect} has no {name}; sqlnb cannot render this statement for it")


def _check_function(node: exp.Expression, dialect: str) -> None:
    """Raise when ``node`` is a function of :data:`_ONLY_IN` that ``dialect`` lacks."""
    if isinstance(node, exp.Anonymous):
        name = str(node.this).upper()
        if name in _ONLY_IN and dialect not in _ONLY_IN[name]:
            raise SqlnbError(f"{dialect} has no {name} function; sqlnb cannot render this statement for it")


def render(expression: exp.Expression, dialect: str = "duckdb", pretty: bool = False) -> str:
    """Render a tree to SQL text for ``dialect`` — the one place rendering happens.

    Dialect gaps that can be expressed as tree rewrites are applied here; anything the
    target cannot express raises instead of producing SQL that fails later on a server.
    """
    return _render(expression, dialect, pretty, None)


#: The numbers of :func:`render_bound`'s parameter names, unique in the process: DuckDB
#: refuses to join or union two relations that bind one name.
_BOUND_NAMES = itertools.count()


def render_bound(expression: exp.Expression, dialect: str = "duckdb") -> tuple[str, dict[str, object]]:
    """``(text, parameters)``: :func:`render`'s text with every list of
    :func:`~sqlnb.sql.build.bound_list` written ``CAST($sqlnb_list_<n> AS DOUBLE[])`` and
    its numbers in ``parameters`` (a float64 array per name), for the engine that runs the
    statement here and now (:meth:`sqlnb.engines.duckdb.DuckDBEngine.relation`). The text
    holds none of those numbers; one list object (copies of a tree share it) is one
    parameter however often it is read, and no two calls give a parameter the same name."""
    bound: dict[str, object] = {}
    return _render(expression, dialect, False, bound), bound


def _render(expression: exp.Expression, dialect: str, pretty: bool, bound: dict | None) -> str:
    """:func:`render`; with ``bound`` (a dict to fill) :func:`render_bound`."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}")
    _check_runs(expression, dialect)
    # (wanted for this dialect, does it apply to a node, the rewrite). The tests look at a
    # node without touching it: some rewrites change the node they are given, or take its
    # children into a new one.
    rewrites = [(applies, fn) for wanted, applies, fn in (
        (dialect in _PLAIN_GREATEST_IS_NULL_PROPAGATING,
         lambda n: isinstance(n, (exp.Greatest, exp.Least)) and n.args.get("ignore_nulls") is not False,
         _plain_greatest),
        (dialect == "postgres",
         lambda n: isinstance(n, exp.Exp) and not n.meta.get("sqlnb_guarded"), _exp_without_underflow_error),
        (dialect in _NAN_BY_EQUALITY, lambda n: isinstance(n, exp.IsNan), lambda n: _isnan_as_equality(n, dialect)),
        (dialect == "sqlite", lambda n: isinstance(n, exp.Values) and n.args.get("alias") is not None,
         _values_as_union),
        (dialect in _NO_MATERIALIZED_CTE,
         lambda n: isinstance(n, exp.CTE) and n.args.get("materialized") is not None, _cte_unhinted),
    ) if wanted]
    # One walk checks the functions, finds whether a rewrite applies and (render_bound)
    # the bound lists: a walk of the scoring tree of 30 binned columns under an average of
    # structures took ~15 ms, and there were two.
    rewrite, lists = False, []
    for node in expression.walk():
        _check_function(node, dialect)
        rewrite = rewrite or any(applies(node) for applies, _ in rewrites)
        if bound is not None and node.meta_get(BOUND) is not None:
            lists.append(node)
    # The bound lists are swapped for their parameters in the caller's tree and put back
    # once rendered: copying the whole tree would cost more than the lists save.
    names: dict[int, str] = {}
    swapped = []
    for node in lists:
        values = node.meta[BOUND]
        if id(values) not in names:
            names[id(values)] = f"sqlnb_list_{next(_BOUND_NAMES)}"
            bound[names[id(values)]] = values.array
        holder = exp.Cast(this=exp.Placeholder(this=names[id(values)]), to=node.args["to"].copy())
        node.replace(holder)
        swapped.append((node, holder))
    try:
        tree = expression
        # The caller's tree is never changed. It is copied only when a rewrite applies, and
        # then once, rewritten in place: each transform() would copy the whole tree, and a
        # scoring tree of many classes x features is large (digits, 64 features x 10
        # classes: copying was most of its 0.5 s render).
        if rewrite:
            tree = tree.copy()
            for _, fn in rewrites:
                tree = tree.transform(fn, copy=False)
        return tree.sql(
            dialect=_sqlglot_dialect(dialect),
            pretty=pretty,
            unsupported_level=sqlglot.ErrorLevel.RAISE,
        )
    finally:
        for node, holder in reversed(swapped):
            holder.replace(node)
