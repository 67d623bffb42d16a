"""A binned column's cut points under dbt: the per-value counts they are computed from, as
an incremental dbt model, and the test that the stored counts still choose the generated
cut points.

The cut points are the generating model's, written into the package (:mod:`sqlnb.workflows.dbt_train`
counts only the rows per bin). Beside them the package counts what sqlnb's own model keeps
so that ``sqlnb update`` recomputes them (:class:`sqlnb.stats.ValueCounts`):

``<name>_values``
    per class, binned column ``feature`` and ``value`` (the column as the DOUBLE the bins
    compare): ``n``, the rows with that value (models under dbt are unweighted); the key
    ``(class, feature, value)`` merges a batch's counts into the stored ones by adding
    them, as every count table.

The test ``sqlnb_<name>_cuts`` (:func:`cuts_test_sql`) on ``<name>_values`` fails, a row
per change naming the column, when the stored counts would cut a column differently.
*Differently* means: the cut points, as a partition of the values seen, are not the ones
the method computes now. A cut point is a midpoint between two neighbouring seen values
(MDL) or an interpolated quantile; a cut point that moves only because a new value fell
between its two neighbours, leaving every seen value on the side it was, is the same cut.

``mdl`` (:func:`_mdl_sql`)
    Fayyad & Irani's recursion (:func:`sqlnb.models.naive_bayes.binning.mdl_cuts`) run in
    SQL over the stored cut points, level by level from the whole column down
    (:func:`_level`: a relation per level, one per stored cut point at most and one more;
    the segments of a level are disjoint, so a level reads the column's values once). On
    DuckDB and PostgreSQL the levels are materialized CTEs of the test's statement; on
    Spark, which has none, tables dbt builds before the test (:func:`tables`:
    ``<name>_cuts_running``, ``<name>_cuts_mdl_<t>``). For each segment ``[e_i, e_j)``
    reached (±inf at the ends), the column's running counts less those before the segment
    give N·E(T; S) at every gap between neighbouring values, its first minimum (the
    lowest gap among equal ones) and the MDL criterion there. The segment is split at the lowest stored cut point
    inside it whose gap is within ``1e-9·N`` bits of the least N·E(T; S) and which the
    criterion accepts (within ``1e-9·N`` bits): the next level's two segments. The test
    fails for a segment reached that no stored cut point splits, and for a bin reached
    whose best cut the criterion accepts by more than ``1e-9·N`` bits. So, ties within
    the tolerance aside, it passes exactly when MDL on the stored counts gives the stored
    cut points, in whatever order its recursion finds them.
``quantile:K`` (:func:`quantile_checks`)
    Each edge ``quantile_cont(x, i/K)`` is computed again from the cumulative counts as
    DuckDB interpolates it (position ``h = (N − 1)·i/K``, ``x_⌊h⌋ + (h − ⌊h⌋)·(x_⌈h⌉ −
    x_⌊h⌋)`` over the sorted rows), and placed in its gap: the number of seen values below
    it. The test fails for each stored edge whose gap no new edge holds, and for each new
    edge (above the smallest value, as sqlnb keeps them) in a gap no stored edge holds.
"""

from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.models.naive_bayes.binning import value_counts_query
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.source import Source
from sqlnb.stats import ValueCounts, sorted_values
from sqlnb.workflows.dbt import _ref

#: The key of ``<name>_values``.
KEYS = ("class", "feature", "value")
#: How many bits per row of the segment a cut's N·E(T; S), or the MDL criterion's margin,
#: may be off before the test fails: ties (and the rounding of sums of logarithms in
#: another order, on another engine) keep the cut points.
TOLERANCE = 1e-9
_c = sql.col
_DOUBLE = exp.DataType.build("double")


def binned(model: NaiveBayes) -> list:
    """The binned features, in the model's order (their value counts are counted)."""
    return [f for f in model.features if f.kind == "binned"]


def _as(e: exp.Expression, name: str) -> exp.Expression:
    return exp.alias_(e, name, quoted=True)


def _from(query: exp.Expression | str, alias: str) -> exp.Expression:
    """``query`` (a SELECT, a table, or a table's name) in a FROM clause as ``alias``."""
    if isinstance(query, str):
        return exp.Table(this=sql.ident(query), alias=exp.TableAlias(this=sql.ident(alias)))
    if isinstance(query, exp.Table):
        table = query.copy()
        table.set("alias", exp.TableAlias(this=sql.ident(alias)))
        return table
    return exp.Subquery(this=query, alias=exp.TableAlias(this=sql.ident(alias)))


def values_batch(model: NaiveBayes, mark: list, src: exp.Table) -> exp.Select:
    """The value counts of the rows in ``new`` (aliased ``src``): per class, binned column
    and value (the DOUBLE the bins compare), the rows; in one read of the rows, the fit's
    ``GROUP BY GROUPING SETS`` of every column (:func:`~sqlnb.models.naive_bayes.binning.value_counts_query`),
    a row per set written as ``(feature, value)`` by the column it groups."""
    feats = binned(model)
    rows = Source(exp.Table(this=src.this.copy()), {}, "the rows to count")
    grouped = [_c(f"g{j}").eq(exp.Literal.number(0)) for j in range(len(feats))]
    feature = exp.Case(ifs=[exp.If(this=g.copy(), true=exp.Literal.string(f.name)) for g, f in zip(grouped, feats)])
    value = exp.Case(ifs=[exp.If(this=g.copy(), true=_c(f"v{j}")) for j, g in enumerate(grouped)])
    return (exp.select(_as(_c("k"), "class"), _as(feature, "feature"), _as(value, "value"),
                       _as(exp.Cast(this=_c("n"), to=_DOUBLE.copy()), "n"), *[m.copy() for m in mark])
            .from_(_from(value_counts_query(rows, model.label, None, feats), "c"))
            .where(exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null()))))


def import_values(model: NaiveBayes, rows: list[tuple], classes: list) -> dict[str, ValueCounts]:
    """Each binned feature's :class:`~sqlnb.stats.ValueCounts` from the rows ``(class,
    feature, value, n)`` of ``<name>_values`` (rows and weighted counts alike: unweighted)."""
    pos = {c: i for i, c in enumerate(classes)}
    out = {}
    for f in binned(model):
        mine = [r for r in rows if r[1] == f.name and r[0] in pos and r[2] is not None]
        values = np.array(sorted_values(float(r[2]) for r in mine), dtype=float)
        at = {v: i for i, v in enumerate(values.tolist())}
        counts = np.zeros((len(classes), len(values)))
        for c, _, v, n in mine:
            counts[pos[c], at[float(v)]] += float(n)
        out[f.name] = ValueCounts(values, counts, counts.copy())
    return out


# -- what the generated cut points need --------------------------------------------------------

def _text(e: float) -> str:
    return "-inf" if e == -math.inf else "+inf" if e == math.inf else repr(float(e))


def quantile_checks(f) -> tuple[int, tuple]:
    """(K, the stored edges) of a ``quantile:K`` column."""
    return int(f.bins.split(":")[1]), tuple(f.edges or ())


# -- the SQL ------------------------------------------------------------------------------------

def _case(cond: exp.Expression, then: exp.Expression, default: exp.Expression | None = None) -> exp.Expression:
    return exp.Case(ifs=[exp.If(this=cond, true=then)], default=default)


def _window(e: exp.Expression, part: list, order: str | exp.Column | list | None = None,
            running: bool = False) -> exp.Window:
    """``e OVER (PARTITION BY part ORDER BY order)``; ``running``: over the rows up to this one."""
    def col(c):
        return _c(c) if isinstance(c, str) else c

    w = exp.Window(this=e, partition_by=[col(p) for p in part], over="OVER")
    if order is not None:
        w.set("order", exp.Order(expressions=[exp.Ordered(this=col(o), nulls_first=True)
                                              for o in ([order] if isinstance(order, (str, exp.Column)) else order)]))
    if running:
        w.set("spec", exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"))
    return w


def _xlog2x(c: exp.Expression) -> exp.Expression:
    """``c·log2 c``, 0 at 0 (:func:`sqlnb.models.naive_bayes.binning._xlogx`)."""
    c = c if isinstance(c, (exp.Column, exp.Paren)) else sql.paren(c)
    return _case(exp.GT(this=c, expression=sql.dbl(0.0)),
                 exp.Div(this=exp.Mul(this=c.copy(), expression=exp.Ln(this=c.copy())),
                         expression=exp.Ln(this=sql.dbl(2.0))), sql.dbl(0.0))


def _log2(x: exp.Expression) -> exp.Expression:
    return exp.Div(this=exp.Ln(this=x), expression=exp.Ln(this=sql.dbl(2.0)))


def _present(cs: list[exp.Expression]) -> exp.Expression:
    """How many of ``cs`` are > 0."""
    return sql.add([_case(exp.GT(this=sql.paren(c), expression=sql.dbl(0.0)), sql.dbl(1.0), sql.dbl(0.0)) for c in cs])


def _mdl_texts(f) -> list[str]:
    """What a failing row of MDL column ``f`` says: a bin now cut, a segment now split
    elsewhere, refused, left with fewer than two values."""
    head, tail = f"column {f.name}: ", "; fit again and generate the package again"
    return [f"{head}MDL now cuts the bin [lo, hi) between the values below and above{tail}",
            f"{head}MDL now splits [lo, hi) between the values below and above, not at a cut point of the "
            f"package inside it{tail}",
            f"{head}MDL now refuses every split of [lo, hi), which the package cuts{tail}",
            f"{head}[lo, hi), which the package cuts, now holds fewer than two values{tail}"]


def _segment_gaps(model: NaiveBayes, segments: exp.Expression, running: exp.Table) -> exp.Select:
    """Per segment ``(feature, i, j)`` of ``segments`` and gap between neighbouring values
    in it (``below``, ``above``): ``n``, the rows of the segment; ``ne``, N·E(T; S) of the
    cut there; ``margin``, N·Gain − log2(N − 1) − Δ (the MDL criterion accepts the cut
    when it is > 0). From the column's running counts (``running``) less those before the
    segment (windows over the segment's values, which it reads once): no sort per level."""
    K = len(model.classes)
    part = ["feature", "i", "j"]
    inside = (exp.select(*[_c(p, "s") for p in part], _c("value", "r"), _c("nxt", "r"), _c("hi", "s"),
                         *[_c(f"k{k}", "r") for k in range(K)], *[_c(f"c{k}", "r") for k in range(K)])
              .from_(_from(segments, "s"))
              .join(_from(running, "r"), join_type="inner", on=exp.and_(
                  _c("feature", "r").eq(_c("feature", "s")), exp.GTE(this=_c("value", "r"), expression=_c("lo", "s")),
                  exp.LT(this=_c("value", "r"), expression=_c("hi", "s")))))
    # the segment's counts before it (b) and up to its end (e), on each of its values' rows
    ends = exp.select(*[_c(p) for p in (*part, "value", "nxt", "hi")],
                      *[_as(exp.Sub(this=_c(f"c{k}"), expression=_window(exp.Min(this=exp.Sub(
                          this=_c(f"c{k}"), expression=_c(f"k{k}"))), part)), f"l{k}") for k in range(K)],
                      *[_as(exp.Sub(this=_window(exp.Max(this=_c(f"c{k}")), part), expression=_window(exp.Min(
                          this=exp.Sub(this=_c(f"c{k}"), expression=_c(f"k{k}"))), part)), f"t{k}")
                        for k in range(K)]).from_(_from(inside, "w"))
    inside = (exp.select(*[_c(p) for p in part], _c("value"), _as(_c("nxt"), "above"),
                         *[_c(f"l{k}") for k in range(K)], *[_c(f"t{k}") for k in range(K)])
              .from_(_from(ends, "z")).where(exp.LT(this=_c("nxt"), expression=_c("hi"))))
    ls = [_c(f"l{k}") for k in range(K)]
    ts = [_c(f"t{k}") for k in range(K)]
    rs = [exp.Sub(this=_c(f"t{k}"), expression=_c(f"l{k}")) for k in range(K)]
    n, nl = sql.paren(sql.add([t.copy() for t in ts])), sql.paren(sql.add([x.copy() for x in ls]))
    nr = exp.Sub(this=n.copy(), expression=nl.copy())

    def n_ent(total: exp.Expression, cs: list) -> exp.Expression:  # n·Ent in bits: n log2 n − Σ c log2 c
        return exp.Sub(this=_xlog2x(total), expression=sql.paren(sql.add([_xlog2x(c.copy()) for c in cs])))

    gaps = (exp.select(*[_c(p) for p in part], _as(_c("value"), "below"), _c("above"), _as(n, "n"), _as(nl, "nl"),
                       _as(n_ent(n.copy(), ts), "e"), _as(n_ent(nl.copy(), ls), "el"), _as(n_ent(nr, rs), "er"),
                       _as(_present(ts), "k"), _as(_present(ls), "k1"), _as(_present(rs), "k2"))
            .from_(_from(inside, "s")))
    ne = exp.Add(this=_c("el"), expression=_c("er"))
    k = _c("k")
    log3k = exp.Add(this=exp.Mul(this=k.copy(), expression=_log2(sql.dbl(3.0))), expression=_log2(exp.Sub(
        this=sql.dbl(1.0), expression=exp.Mul(this=sql.dbl(2.0), expression=exp.Pow(
            this=sql.dbl(3.0), expression=exp.Neg(this=k.copy()))))))
    delta = exp.Sub(this=log3k, expression=sql.paren(exp.Sub(
        this=exp.Sub(this=exp.Div(this=exp.Mul(this=k.copy(), expression=_c("e")), expression=_c("n")),
                     expression=exp.Div(this=exp.Mul(this=_c("k1"), expression=_c("el")), expression=_c("nl"))),
        expression=exp.Div(this=exp.Mul(this=_c("k2"), expression=_c("er")),
                           expression=sql.paren(exp.Sub(this=_c("n"), expression=_c("nl")))))))
    margin = exp.Sub(this=exp.Sub(this=exp.Sub(this=_c("e"), expression=sql.paren(ne.copy())),
                                  expression=_log2(exp.Sub(this=_c("n"), expression=sql.dbl(1.0)))),
                     expression=sql.paren(delta))
    return exp.select(*[_c(p) for p in part], _c("below"), _c("above"), _c("n"), _as(ne, "ne"),
                      _as(margin, "margin")).from_(_from(gaps, "x"))


def _edges(feats: list) -> exp.Select:
    """Per MDL column ``feature``: its stored cut points ``e`` numbered ``i`` from 1 (±inf
    at 0 and at the end)."""
    rows = [(exp.Literal.string(f.name), exp.Literal.number(i), sql.dbl(e))
            for f in feats for i, e in enumerate([-math.inf, *(f.edges or ()), math.inf])]
    return exp.select(exp.Star()).from_(exp.values(rows, alias="e", columns=["feature", "i", "e"]))


def _roots(feats: list) -> exp.Select:
    """Per MDL column ``feature``: ``j``, the number of its last edge (the whole column is
    the segment ``[e_0, e_j)``), and the texts of its failing rows (:func:`_mdl_texts`)."""
    rows = [(exp.Literal.string(f.name), exp.Literal.number(len(f.edges or ()) + 1),
             *[exp.Literal.string(t) for t in _mdl_texts(f)]) for f in feats]
    return exp.select(exp.Star()).from_(exp.values(rows, alias="r", columns=["feature", "j", *_TEXTS]))


#: The columns of :func:`_roots` holding what a failing row says.
_TEXTS = ("p_split", "p_moved", "p_refused", "p_lost")
_KEY = ("feature", "i", "j")


def _same(a: str, b: str) -> exp.Expression:
    return exp.and_(*[_c(x, a).eq(_c(x, b)) for x in _KEY])


def _running(model: NaiveBayes, name: str, feats: list) -> exp.Select:
    """Per MDL column ``feature`` and seen ``value``: ``k<c>``, the rows of class ``c``
    there; ``c<c>``, those up to it; ``nxt``, the next value (NULL at the largest)."""
    per = [_as(exp.Sum(this=_case(_c("class").eq(sql.value(c, model.label_type)), _c("n"), sql.dbl(0.0))), f"k{k}")
           for k, c in enumerate(model.classes)]
    counted = (exp.select(_c("feature"), _c("value"), *per).from_(_ref(f"{name}_values"))
               .where(exp.In(this=_c("feature"), expressions=[exp.Literal.string(f.name) for f in feats]))
               .group_by(_c("feature"), _c("value")))
    K, by, at = len(model.classes), ["feature"], _c("value")
    return exp.select(_c("feature"), _c("value"), *[_c(f"k{k}") for k in range(K)],
                      *[_as(_window(exp.Sum(this=_c(f"k{k}")), by, at, True), f"c{k}") for k in range(K)],
                      _as(_window(exp.Lead(this=at.copy()), by, at), "nxt")).from_(_from(counted, "q"))


def _level(model: NaiveBayes, feats: list, before: exp.Table | None, running: exp.Table) -> exp.Select:
    """MDL's segments at one depth of its recursion: the whole columns (``before`` None),
    or the two parts of each segment of the level ``before`` that a stored cut point
    splits. Per segment ``(feature, i, j)``, ``[lo, hi)`` = ``[e_i, e_j)``: of its first
    gap of least N·E(T; S) (the lowest among equal ones, as numpy's argmin), ``n``,
    ``below``, ``above`` and ``margin`` (NULL: the segment has no gap); and ``k``, the
    number of the lowest stored cut point inside whose gap is within the tolerance of that
    least N·E(T; S) and which the criterion accepts (within the tolerance): the split
    (NULL: none)."""
    if before is None:
        pairs = exp.select(_c("feature"), _as(exp.Literal.number(0), "i"), _c("j")).from_(_from(_roots(feats), "r"))
    else:
        pairs = sql.union_all([exp.select(_c("feature"), _as(_c(lo), "i"), _as(_c(hi), "j")).from_(_from(before, "p"))
                               .where(exp.Not(this=exp.Is(this=_c("k"), expression=exp.Null())))
                               for lo, hi in (("i", "k"), ("k", "j"))])
    seg = (exp.select(_c("feature", "p"), _c("i", "p"), _c("j", "p"), _as(_c("e", "a"), "lo"), _as(_c("e", "b"), "hi"))
           .from_(_from(pairs, "p"))
           .join(_from(_edges(feats), "a"), join_type="inner", on=exp.and_(
               _c("feature", "a").eq(_c("feature", "p")), _c("i", "a").eq(_c("i", "p"))))
           .join(_from(_edges(feats), "b"), join_type="inner", on=exp.and_(
               _c("feature", "b").eq(_c("feature", "p")), _c("i", "b").eq(_c("j", "p")))))
    part = list(_KEY)
    ranked = exp.select(exp.Star(), _as(_window(exp.Min(this=_c("ne")), part), "least"),
                        _as(_window(exp.RowNumber(), part, [_c("ne"), _c("below")]), "rn")).from_(
        _from(_segment_gaps(model, seg.copy(), running), "g"))
    tol = exp.Mul(this=sql.dbl(TOLERANCE), expression=_c("n", "g"))
    first = _c("rn", "g").eq(exp.Literal.number(1))
    held = exp.and_(exp.LTE(this=_c("ne", "g"), expression=exp.Add(this=_c("least", "g"), expression=tol.copy())),
                    exp.GTE(this=_c("margin", "g"), expression=exp.Neg(this=tol.copy())))
    best = (exp.select(*[_c(x, "g") for x in _KEY],
                       *[_as(exp.Max(this=_case(first.copy(), _c(x, "g"))), x)
                         for x in ("n", "below", "above", "margin")],
                       _as(exp.Min(this=_case(held, _c("i", "c"))), "k"))
            .from_(_from(ranked, "g"))
            .join(_from(_edges(feats), "c"), join_type="left", on=exp.and_(
                _c("feature", "c").eq(_c("feature", "g")), exp.GT(this=_c("i", "c"), expression=_c("i", "g")),
                exp.LT(this=_c("i", "c"), expression=_c("j", "g")),
                exp.LT(this=_c("below", "g"), expression=_c("e", "c")),
                exp.GTE(this=_c("above", "g"), expression=_c("e", "c"))))
            .group_by(*[_c(x, "g") for x in _KEY]))
    return (exp.select(*[_c(x, "s") for x in (*_KEY, "lo", "hi")],
                       *[_c(x, "b") for x in ("n", "below", "above", "margin", "k")])
            .from_(_from(seg, "s")).join(_from(best, "b"), join_type="left", on=_same("b", "s")))


def _failing_level(feats: list, level: exp.Table) -> exp.Select:
    """The failing rows of one level of MDL's recursion (:func:`_level`): a segment with
    no split (MDL now splits it elsewhere, refuses every split, or finds no gap), a bin
    whose best cut the criterion now accepts by more than the tolerance."""
    leaf = _c("j", "s").eq(exp.Add(this=_c("i", "s"), expression=exp.Literal.number(1)))
    tol = exp.Mul(this=sql.dbl(TOLERANCE), expression=_c("n", "s"))
    problem = exp.Case(ifs=[exp.If(this=leaf.copy(), true=_c("p_split", "r")),
                            exp.If(this=exp.Is(this=_c("n", "s"), expression=exp.Null()), true=_c("p_lost", "r")),
                            exp.If(this=exp.LT(this=_c("margin", "s"), expression=exp.Neg(this=tol.copy())),
                                   true=_c("p_refused", "r"))], default=_c("p_moved", "r"))
    return (exp.select(_as(problem, "problem"), *[_c(x, "s") for x in ("lo", "hi", "below", "above")])
            .from_(_from(level, "s"))
            .join(_from(_roots(feats), "r"), join_type="inner", on=_c("feature", "r").eq(_c("feature", "s")))
            .where(exp.or_(exp.and_(leaf.copy(), exp.GT(this=_c("margin", "s"), expression=tol.copy())),
                           exp.and_(exp.Not(this=leaf.copy()), exp.Is(this=_c("k", "s"), expression=exp.Null())))))


def _mdl_relations(model: NaiveBayes, name: str, feats: list, rel) -> list[tuple[str, exp.Select]]:
    """(suffix, SELECT) of the relations the MDL test reads, each after those it reads
    (``rel(suffix)``: the relation): ``running`` (:func:`_running`), then ``mdl_<t>``, the
    level ``t`` of the recursion (:func:`_level`), a level per stored cut point of the
    column that has most, and one more (its bins)."""
    out = [("running", _running(model, name, feats))]
    for t in range(max(len(f.edges or ()) for f in feats) + 1):
        out.append((f"mdl_{t}", _level(model, feats, rel(f"mdl_{t - 1}") if t else None, rel("running"))))
    return out


def _mdl_sql(model: NaiveBayes, name: str, feats: list, tables: bool) -> exp.Select:
    """The failing rows of the MDL columns (module docstring), level by level of MDL's
    recursion: from the tables ``<name>_cuts_<suffix>`` of :func:`tables` (``tables``), or
    from the same relations as materialized CTEs."""
    def rel(suffix: str) -> exp.Table:
        return _ref(f"{name}_cuts_{suffix}") if tables else sql.table(suffix)

    steps = _mdl_relations(model, name, feats, rel)
    failing = [_failing_level(feats, rel(suffix)) for suffix, _ in steps[1:]]
    query = sql.union_all([exp.select(exp.Star()).from_(_from(q, f"f{t}")) for t, q in enumerate(failing)])
    query = exp.select(exp.Star()).from_(_from(query, "failing"))
    if not tables:
        for suffix, body in steps:  # materialized: each level reads the running counts and the level before
            query = query.with_(sql.ident(suffix), as_=body, materialized=True)
    return query


def _quantile_sql(name: str, feats: list) -> exp.Select:
    """The failing rows of the ``quantile:K`` columns (module docstring)."""
    names = [exp.Literal.string(f.name) for f in feats]
    counted = (exp.select(_c("feature"), _c("value"), _as(exp.Sum(this=_c("n")), "c")).from_(_ref(f"{name}_values"))
               .where(exp.In(this=_c("feature"), expressions=names)).group_by(_c("feature"), _c("value")))
    cum = exp.select(_c("feature"), _c("value"), _c("c"),
                     _as(exp.Sub(this=_window(exp.Sum(this=_c("c")), ["feature"], "value", True), expression=_c("c")),
                         "before"),
                     _as(_window(exp.Sum(this=_c("c")), ["feature"]), "total")).from_(_from(counted, "q"))
    probs, stored = [], []
    for f in feats:
        k, edges = quantile_checks(f)
        new = (f"column {f.name}: quantile:{k} now puts an edge between the values below and above, where the "
               "package has none; fit again and generate the package again")
        probs += [(exp.Literal.string(f.name), sql.dbl(i / k), exp.Literal.string(new)) for i in range(1, k)]
        stored += [(exp.Literal.string(f.name), sql.dbl(e), exp.Literal.string(
            f"column {f.name}: quantile:{k} no longer puts an edge between the values below and above, where the "
            f"package has the cut point {_text(e)}; fit again and generate the package again")) for e in edges]
    totals = exp.select(_c("feature"), _c("total")).from_(sql.table("cum")).group_by(_c("feature"), _c("total"))
    h = exp.Mul(this=sql.paren(exp.Sub(this=_c("total", "t"), expression=sql.dbl(1.0))), expression=_c("p", "p"))
    pos = (exp.select(_c("feature", "p"), _c("p", "p"), _c("problem", "p"), _as(h, "h"), _as(exp.Floor(this=h.copy()), "fl"),
                      _as(exp.Ceil(this=h.copy()), "ce"))
           .from_(exp.values(probs, alias="p", columns=["feature", "p", "problem"]))
           .join(_from(totals, "t"), join_type="inner", on=_c("feature", "t").eq(_c("feature", "p"))))

    def at(i: str) -> exp.Expression:  # the value of the sorted rows' i-th (0-based)
        holds = exp.and_(exp.LTE(this=_c("before", "a"), expression=_c(i, "o")),
                         exp.LT(this=_c(i, "o"), expression=exp.Add(this=_c("before", "a"), expression=_c("c", "a"))))
        return exp.Min(this=_case(holds, _c("value", "a")))

    order = [_c(c, "o") for c in ("feature", "p", "h", "fl", "problem")]
    stats = (exp.select(*order, _as(at("fl"), "lo"), _as(at("ce"), "hi"))
             .from_(_from("pos", "o"))
             .join(_from("cum", "a"), join_type="inner", on=_c("feature", "a").eq(_c("feature", "o")))
             .group_by(*[c.copy() for c in order]))
    edge = exp.Add(this=_c("lo"), expression=exp.Mul(
        this=sql.paren(exp.Sub(this=_c("hi"), expression=_c("lo"))),
        expression=sql.paren(exp.Sub(this=_c("h"), expression=_c("fl")))))
    new = exp.select(_c("feature"), _as(exp.Literal.string("new"), "side"), _as(edge, "edge"), _c("problem")).from_(
        _from(stats, "q"))
    old = exp.select(_c("feature"), _as(exp.Literal.string("stored"), "side"), _c("edge"), _c("problem")).from_(
        exp.values(stored, alias="s", columns=["feature", "edge", "problem"])) if stored else None
    edges = sql.union_all([new] + ([old] if old is not None else []))
    below = exp.LT(this=_c("value", "v"), expression=_c("edge", "e"))
    gapped = (exp.select(_c("feature", "e"), _c("side", "e"), _c("problem", "e"),
                         _as(exp.Sum(this=_case(below, sql.dbl(1.0), sql.dbl(0.0))), "gap"),
                         _as(exp.Max(this=_case(below.copy(), _c("value", "v"))), "below"),
                         _as(exp.Min(this=_case(exp.Not(this=below.copy()), _c("value", "v"))), "above"))
              .from_(_from(edges, "e"))
              .join(_from("cum", "v"), join_type="inner", on=_c("feature", "v").eq(_c("feature", "e")))
              .group_by(_c("feature", "e"), _c("side", "e"), _c("problem", "e"), _c("edge", "e")))
    kept = exp.select(exp.Star()).from_(sql.table("gapped")).where(exp.or_(
        _c("side").eq(exp.Literal.string("stored")), exp.GTE(this=_c("gap"), expression=sql.dbl(1.0))))
    other = exp.select(_c("feature"), _c("side"), _c("gap")).from_(sql.table("kept")).group_by(
        _c("feature"), _c("side"), _c("gap"))
    none = exp.Cast(this=exp.Null(), to=_DOUBLE.copy())
    return (exp.select(_as(_c("problem", "e"), "problem"), _as(none, "lo"), _as(none.copy(), "hi"),
                       _as(_c("below", "e"), "below"), _as(_c("above", "e"), "above"))
            .from_(_from("kept", "e"))
            .join(_from(other, "o"), join_type="left", on=exp.and_(
                _c("feature", "o").eq(_c("feature", "e")), _c("gap", "o").eq(_c("gap", "e")),
                exp.NEQ(this=_c("side", "o"), expression=_c("side", "e"))))
            .where(exp.Is(this=_c("feature", "o"), expression=exp.Null()))
            .group_by(_c("problem", "e"), _c("below", "e"), _c("above", "e"))
            .with_(sql.ident("cum"), as_=cum, materialized=True).with_(sql.ident("pos"), as_=pos, materialized=True)
            .with_(sql.ident("gapped"), as_=gapped, materialized=True)
            .with_(sql.ident("kept"), as_=kept, materialized=True))


#: The dialects whose cut-point test reads the MDL levels from tables dbt builds
#: (:func:`tables`): Spark inlines every CTE (it has no ``MATERIALIZED``), so each level of
#: the recursion would compute the levels before it again at each reference (a first
#: ``dbt build`` of tests/test_dbt_spark_train.py's package with them as CTEs did not end
#: in 600 s). Elsewhere they are materialized CTEs of the test's one statement.
TABLES = ("spark",)


def tables(model: NaiveBayes, name: str) -> list[tuple[str, exp.Select]]:
    """(table, SELECT) of the dbt models the cut-point test reads on the dialects of
    :data:`TABLES`, in the order they are built: ``<name>_cuts_running`` and
    ``<name>_cuts_mdl_<t>`` (:func:`_mdl_relations`); none without an MDL column."""
    mdl = [f for f in binned(model) if f.bins == "mdl"]
    if not mdl:
        return []
    steps = _mdl_relations(model, name, mdl, lambda suffix: _ref(f"{name}_cuts_{suffix}"))
    return [(f"{name}_cuts_{suffix}", body) for suffix, body in steps]


def model_files(model: NaiveBayes, name: str) -> dict[str, str]:
    """``models/train/<table>.sql`` of each of :func:`tables`: a table, built on Spark only
    (tagged ``sqlnb_cuts``, so ``--exclude tag:sqlnb_cuts`` leaves them out with the test)."""
    ns = f"sqlnb_{name}"
    on = " or ".join(f"target.type == '{d}'" for d in TABLES)
    return {f"models/train/{table}.sql": (
        f"{{{{ config(materialized='table', enabled=(({on}) and var('{ns}_train', true)), tags=['sqlnb_cuts']) }}}}\n"
        f"{{# read by the test {ns}_cuts on {', '.join(TABLES)}: MDL's recursion level by level #}}\n"
        f"{sql.render(body, 'spark', pretty=True)}\n") for table, body in tables(model, name)}


def cuts_test_sql(model: NaiveBayes, name: str, dialect: str, tables: bool | None = None) -> str | None:
    """The rows of a failing cut-point test (``problem``, naming the column; ``lo``,
    ``hi``, the MDL segment; the seen values ``below`` and ``above`` the gap concerned),
    or None without a binned column. ``tables``: whether it reads MDL's levels from the
    tables of :func:`tables` (default: on the dialects of :data:`TABLES`)."""
    mdl = [f for f in binned(model) if f.bins == "mdl"]
    quant = [f for f in binned(model) if f.bins.startswith("quantile:")]
    tables = dialect in TABLES if tables is None else tables
    parts = ([_mdl_sql(model, name, mdl, tables)] if mdl else []) + ([_quantile_sql(name, quant)] if quant else [])
    if not parts:
        return None
    if len(parts) == 1:
        return sql.render(parts[0], dialect, pretty=True)
    wrapped = [exp.select(exp.Star()).from_(_from(p, f"t{i}")) for i, p in enumerate(parts)]
    return sql.render(sql.union_all(wrapped), dialect, pretty=True)
