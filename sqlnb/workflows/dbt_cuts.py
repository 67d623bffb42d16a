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
    SQL over the stored cut points, level by level from the whole column down (a level of
    CTEs per stored cut point, at most; the segments of a level are disjoint, so a level
    reads the column's values once). For each segment ``[e_i, e_j)`` reached (±inf at the
    ends), the column's running counts less those before the segment give N·E(T; S) at
    every gap between neighbouring values, its first minimum (the lowest gap among equal
    ones) and the MDL criterion there. The segment is split at the lowest stored cut point
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
from sqlnb.models.naive_bayes.families import REGISTRY
from sqlnb.models.naive_bayes.model import NaiveBayes
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
    if isinstance(query, str):
        return exp.Table(this=sql.ident(query), alias=exp.TableAlias(this=sql.ident(alias)))
    return exp.Subquery(this=query, alias=exp.TableAlias(this=sql.ident(alias)))


def values_batch(model: NaiveBayes, head: list, mark: list, src: exp.Table) -> exp.Select:
    """The value counts of the rows in ``new`` (aliased ``src``): per class, binned column
    and value (the DOUBLE the bins compare), the rows; one GROUP BY per column."""
    label = sql.col(model.label, "src")
    out = []
    for f in binned(model):
        x = REGISTRY["binned"].value(f)
        out.append(exp.select(*[c.copy() for c in head], _as(exp.Literal.string(f.name), "feature"), _as(x, "value"),
                              _as(exp.Cast(this=exp.Count(this=exp.Star()), to=_DOUBLE.copy()), "n"),
                              *[m.copy() for m in mark])
                   .from_(src.copy()).where(exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null())))
                   .group_by(label.copy(), x.copy()))
    return sql.union_all(out)


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


def _segment_gaps(model: NaiveBayes, segments: str) -> exp.Select:
    """Per segment ``(feature, i, j)`` of the CTE ``segments`` and gap between neighbouring
    values in it (``below``, ``above``): ``n``, the rows of the segment; ``ne``,
    N·E(T; S) of the cut there; ``margin``, N·Gain − log2(N − 1) − Δ (the MDL criterion
    accepts the cut when it is > 0). From the column's running counts (the CTE
    ``running``) less those before the segment: joins and GROUP BYs, no sort per level."""
    K = len(model.classes)
    key = [_c(p, "s") for p in ("feature", "i", "j")]
    inside = (exp.select(*[c.copy() for c in key], _c("value", "r"), _c("nxt", "r"), _c("hi", "s"),
                         *[_c(f"k{k}", "r") for k in range(K)], *[_c(f"c{k}", "r") for k in range(K)])
              .from_(_from(segments, "s"))
              .join(_from("running", "r"), join_type="inner", on=exp.and_(
                  _c("feature", "r").eq(_c("feature", "s")), exp.GTE(this=_c("value", "r"), expression=_c("lo", "s")),
                  exp.LT(this=_c("value", "r"), expression=_c("hi", "s")))))
    key = [_c(p) for p in ("feature", "i", "j")]
    ends = (exp.select(*[c.copy() for c in key],
                       *[_as(exp.Min(this=exp.Sub(this=_c(f"c{k}"), expression=_c(f"k{k}"))), f"b{k}") for k in range(K)],
                       *[_as(exp.Max(this=_c(f"c{k}")), f"e{k}") for k in range(K)])
            .from_(_from(inside, "w")).group_by(*[c.copy() for c in key]))
    shifted = (exp.select(*[_c(p, "w") for p in ("feature", "i", "j", "value", "nxt")],
                          *[_as(exp.Sub(this=_c(f"c{k}", "w"), expression=_c(f"b{k}", "d")), f"l{k}") for k in range(K)],
                          *[_as(exp.Sub(this=_c(f"e{k}", "d"), expression=_c(f"b{k}", "d")), f"t{k}") for k in range(K)])
               .from_(_from(inside.copy(), "w"))
               .join(_from(ends, "d"), join_type="inner", on=exp.and_(*[_c(p, "d").eq(_c(p, "w"))
                                                                         for p in ("feature", "i", "j")]))
               .where(exp.LT(this=_c("nxt", "w"), expression=_c("hi", "w"))))
    inside = exp.select(*[c.copy() for c in key], _c("value"), _as(_c("nxt"), "above"),
                        *[_c(f"l{k}") for k in range(K)], *[_c(f"t{k}") for k in range(K)]).from_(_from(shifted, "z"))
    part = ["feature", "i", "j"]
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


def _mdl_sql(model: NaiveBayes, name: str, feats: list) -> exp.Select:
    """The failing rows of the MDL columns (module docstring): MDL's recursion over the
    stored cut points, a level of CTEs per depth (at most one per cut point), each over
    the disjoint segments the level before split."""
    edges, roots = [], []
    for f in feats:
        cuts = [-math.inf, *(f.edges or ()), math.inf]
        edges += [(exp.Literal.string(f.name), exp.Literal.number(i), sql.dbl(e)) for i, e in enumerate(cuts)]
        roots.append((exp.Literal.string(f.name), exp.Literal.number(len(cuts) - 1),
                      *[exp.Literal.string(t) for t in _mdl_texts(f)]))
    texts = ["p_split", "p_moved", "p_refused", "p_lost"]
    per = [_as(exp.Sum(this=_case(_c("class").eq(sql.value(c, model.label_type)), _c("n"), sql.dbl(0.0))), f"k{k}")
           for k, c in enumerate(model.classes)]
    counted = (exp.select(_c("feature"), _c("value"), *per).from_(_ref(f"{name}_values"))
               .where(exp.In(this=_c("feature"), expressions=[exp.Literal.string(f.name) for f in feats]))
               .group_by(_c("feature"), _c("value")))
    K = len(model.classes)
    by, at = [_c("feature")], _c("value")
    running = exp.select(_c("feature"), _c("value"), *[_c(f"k{k}") for k in range(K)],
                         *[_as(_window(exp.Sum(this=_c(f"k{k}")), by, at, True), f"c{k}") for k in range(K)],
                         _as(_window(exp.Lead(this=at.copy()), by, at), "nxt")).from_(sql.table("counted"))
    ctes = [("counted", counted), ("running", running),
            ("edges", exp.select(exp.Star()).from_(exp.values(edges, alias="e", columns=["feature", "i", "e"]))),
            ("roots", exp.select(exp.Star()).from_(exp.values(roots, alias="r", columns=["feature", "j", *texts])))]

    def bounded(pairs: exp.Select) -> exp.Select:  # (feature, i, j) with lo = e_i, hi = e_j
        return (exp.select(_c("feature", "p"), _c("i", "p"), _c("j", "p"), _as(_c("e", "a"), "lo"),
                           _as(_c("e", "b"), "hi"))
                .from_(_from(pairs, "p"))
                .join(_from("edges", "a"), join_type="inner", on=exp.and_(
                    _c("feature", "a").eq(_c("feature", "p")), _c("i", "a").eq(_c("i", "p"))))
                .join(_from("edges", "b"), join_type="inner", on=exp.and_(
                    _c("feature", "b").eq(_c("feature", "p")), _c("i", "b").eq(_c("j", "p")))))

    key = ["feature", "i", "j"]

    def same(a: str, b: str) -> exp.Expression:
        return exp.and_(*[_c(x, a).eq(_c(x, b)) for x in key])

    tol = exp.Mul(this=sql.dbl(TOLERANCE), expression=_c("n", "b"))
    failing = []
    depth = max(len(f.edges or ()) for f in feats)
    level = exp.select(_c("feature"), _as(exp.Literal.number(0), "i"), _c("j")).from_(sql.table("roots"))
    for t in range(depth + 1):
        ctes.append((f"seg{t}", bounded(level)))
        ctes.append((f"gap{t}", _segment_gaps(model, f"seg{t}")))
        # the first minimum of N·E(T; S) (the lowest gap among equal ones), as numpy's argmin
        least = (exp.select(*[_c(x) for x in key], _as(exp.Min(this=_c("ne")), "ne")).from_(sql.table(f"gap{t}"))
                 .group_by(*[_c(x) for x in key]))
        first = (exp.select(*[_c(x, "g") for x in key], _as(exp.Min(this=_c("below", "g")), "below"))
                 .from_(_from(f"gap{t}", "g")).join(_from(least, "m"), join_type="inner", on=exp.and_(
                     same("m", "g"), _c("ne", "m").eq(_c("ne", "g"))))
                 .group_by(*[_c(x, "g") for x in key]))
        ctes.append((f"best{t}", exp.select(exp.Column(this=exp.Star(), table=sql.ident("g"))).from_(_from(f"gap{t}", "g")).join(
            _from(first, "f"), join_type="inner", on=exp.and_(same("f", "g"), _c("below", "f").eq(_c("below", "g"))))))
        # the split: the lowest stored cut inside whose gap is within the tolerance of the
        # least N·E(T; S) and which the criterion accepts (within the tolerance)
        held = (exp.select(*[_c(x, "r") for x in key], _as(exp.Min(this=_c("i", "c")), "k"))
                .from_(_from(f"gap{t}", "r"))
                .join(_from(f"best{t}", "b"), join_type="inner", on=same("b", "r"))
                .join(_from("edges", "c"), join_type="inner", on=exp.and_(
                    _c("feature", "c").eq(_c("feature", "r")), exp.GT(this=_c("i", "c"), expression=_c("i", "r")),
                    exp.LT(this=_c("i", "c"), expression=_c("j", "r")),
                    exp.LT(this=_c("below", "r"), expression=_c("e", "c")),
                    exp.GTE(this=_c("above", "r"), expression=_c("e", "c"))))
                .where(exp.and_(exp.LTE(this=_c("ne", "r"), expression=exp.Add(this=_c("ne", "b"),
                                                                                expression=tol.copy())),
                                exp.GTE(this=_c("margin", "r"), expression=exp.Neg(this=tol.copy()))))
                .group_by(*[_c(x, "r") for x in key]))
        ctes.append((f"held{t}", held))
        leaf = _c("j", "s").eq(exp.Add(this=_c("i", "s"), expression=exp.Literal.number(1)))
        lost = exp.Is(this=_c("feature", "b"), expression=exp.Null())
        refused = exp.LT(this=_c("margin", "b"), expression=exp.Neg(this=tol.copy()))
        problem = exp.Case(ifs=[exp.If(this=leaf.copy(), true=_c("p_split", "r")),
                                exp.If(this=lost.copy(), true=_c("p_lost", "r")),
                                exp.If(this=refused, true=_c("p_refused", "r"))], default=_c("p_moved", "r"))
        failing.append(
            exp.select(_as(problem, "problem"), _c("lo", "s"), _c("hi", "s"), _as(_c("below", "b"), "below"),
                       _as(_c("above", "b"), "above"))
            .from_(_from(f"seg{t}", "s"))
            .join(_from("roots", "r"), join_type="inner", on=_c("feature", "r").eq(_c("feature", "s")))
            .join(_from(f"best{t}", "b"), join_type="left", on=same("b", "s"))
            .join(_from(f"held{t}", "h"), join_type="left", on=same("h", "s"))
            .where(exp.or_(exp.and_(leaf.copy(), exp.GT(this=_c("margin", "b"), expression=tol.copy())),
                           exp.and_(exp.Not(this=leaf.copy()), exp.Is(this=_c("k", "h"), expression=exp.Null())))))
        level = sql.union_all([exp.select(_c("feature"), _as(_c(lo), "i"), _as(_c(hi), "j")).from_(
            sql.table(f"held{t}"))
                               for lo, hi in (("i", "k"), ("k", "j"))])
    query = sql.union_all([exp.select(exp.Star()).from_(_from(q, f"f{t}")) for t, q in enumerate(failing)])
    query = exp.select(exp.Star()).from_(_from(query, "failing"))
    for cte, body in ctes:  # materialized: each level reads the one before several times
        query = query.with_(sql.ident(cte), as_=body, materialized=True)
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


def cuts_test_sql(model: NaiveBayes, name: str, dialect: str) -> str | None:
    """The rows of a failing cut-point test (``problem``, naming the column; ``lo``,
    ``hi``, the MDL segment; the seen values ``below`` and ``above`` the gap concerned),
    or None without a binned column.

    On Spark no row, and a line in dbt's log that says the test is not run there: Spark
    inlines every CTE (it has no ``MATERIALIZED``), so each level of MDL's recursion would
    compute the levels before it again (a first ``dbt build`` of tests/test_dbt_spark_train.py's
    package did not end in 600 s)."""
    mdl = [f for f in binned(model) if f.bins == "mdl"]
    quant = [f for f in binned(model) if f.bins.startswith("quantile:")]
    parts = ([_mdl_sql(model, name, mdl)] if mdl else []) + ([_quantile_sql(name, quant)] if quant else [])
    if not parts:
        return None
    if dialect == "spark":
        none = exp.select(*[_as(exp.Cast(this=exp.Null(), to=exp.DataType.build(t)), c) for c, t in (
            ("problem", "varchar"), ("lo", "double"), ("hi", "double"), ("below", "double"), ("above", "double"))])
        return (f"{{{{ log('sqlnb_{name}_cuts: not run on Spark (the cut points are tested on DuckDB and "
                f"PostgreSQL)', info=True) }}}}\n" + sql.render(none.where(exp.false()), dialect, pretty=True))
    if len(parts) == 1:
        return sql.render(parts[0], dialect, pretty=True)
    wrapped = [exp.select(exp.Star()).from_(_from(p, f"t{i}")) for i, p in enumerate(parts)]
    return sql.render(sql.union_all(wrapped), dialect, pretty=True)
