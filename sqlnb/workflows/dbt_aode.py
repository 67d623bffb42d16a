"""Averaged one-dependence estimators (AODE) under dbt: the tables derived in SQL from the
pair counts, and the term the trained scoring macro adds to the naive Bayes score.

AODE counts nothing TAN does not: the per-feature counts and ``<name>_pairs``
(:mod:`sqlnb.workflows.dbt_structures`), every pair of its discrete features. From them
three dbt models derive what :func:`sqlnb.models.naive_bayes.aode.derive` derives:

``<name>_aode``
    per ordered pair of discrete features, super-parent ``a`` and child ``b``, and their
    values ``u``, ``v`` (as text, as the pair counts keep them): ``c<k>`` = ln p(v | class
    k, u) − ln p(v | class k), the conditional smoothed as TAN's
    (:func:`dbt_structures.conditional`), the naive term read from ``<name>_params`` and
    ``<name>_params_<j>``; 0 where the conditional has no denominator (0/0: the naive term)
    or the naive term is −inf.
``<name>_aode_parents``
    per discrete feature ``a`` and value ``u``: ``ok`` = 1 when the training rows holding
    ``u`` (any class) number at least ``aode_min_count`` (the model's, written into the
    package), else 0: the values that may be a super-parent.
``<name>_aode_shift``
    one row, ``s<k>`` per class: the shift of the log-sum-exp, 0 when every T_{c,i} any row
    can reach lies within ±700, else the midpoint of their bounds; NULL (scores NULL, and
    the package's probabilities test fails) where the bounds span more than 1400 nats,
    which ``sqlnb fit`` refuses.

Scoring (:func:`term`) adds per class ``CASE WHEN |S| > 0 THEN s_c + LN(Σ_i ok_i ·
EXP(T_{c,i} − s_c)) − LN(|S|) ELSE 0 END``, T_{c,i} the sum of the row's cells of
super-parent i over its present, seen children, each read by a LEFT JOIN on the row's
values: :mod:`sqlnb.models.naive_bayes.aode`'s score, the same cells summed.
"""

from __future__ import annotations

import math
from typing import Any

from sqlglot import exp

from sqlnb import sql
from sqlnb.models.naive_bayes import aode
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.workflows.dbt import _ref
from sqlnb.workflows.dbt_structures import _domain, code, conditional, paired

_c = sql.col
_TEXT = exp.DataType.build("varchar")
_DOUBLE = exp.DataType.build("double")


def discrete(model: NaiveBayes) -> list[tuple[int, Any]]:
    """(position in the model, feature) of AODE's discrete features; [] for another structure
    and for fewer than two (a single super-parent's term is 0: the naive Bayes score)."""
    if model.hyper.structure != "aode" or len(paired(model)) < 2:
        return []
    at = {f.name: j for j, f in enumerate(model.features)}
    return [(at[f.name], f) for f in paired(model)]


def _naive(model: NaiveBayes, name: str, j: int, f) -> exp.Select:
    """``SELECT x, c0 …``: feature ``j``'s naive term ln p(x | class k) per value, as text
    (its lookup table; a Bernoulli column's ``flp`` and ``neg`` as ``1`` and ``0``)."""
    K = len(model.classes)
    if f.kind != "bernoulli":
        return exp.select(exp.alias_(exp.Cast(this=_c("v"), to=_TEXT.copy()), "x", quoted=True),
                          *[_c(f"c{k}") for k in range(K)]).from_(_ref(f"{name}_params_{j}"))
    out = [exp.select(exp.alias_(exp.Literal.string(x), "x", quoted=True),
                      *[exp.alias_(_c(f"{param}_{j}_{k}"), f"c{k}", quoted=True) for k in range(K)])
           .from_(_ref(f"{name}_params")) for x, param in (("0", "neg"), ("1", "flp"))]
    return sql.union_all(out)


def ratios_sql(model: NaiveBayes, name: str, dialect: str) -> str:
    """``<name>_aode``: ln p(child value | class, super-parent value) − ln p(child value |
    class) of every ordered pair, as ``aode.derive``'s ratio tables."""
    K = len(model.classes)
    feats = discrete(model)
    out = []
    for _, fi in feats:
        for j, fj in feats:
            if fj is fi:
                continue
            cond, naive = exp.Subquery(this=conditional(model, name, fj, (fi,)), alias=exp.TableAlias(
                this=sql.ident("t"))), exp.Subquery(this=_naive(model, name, j, fj),
                                                    alias=exp.TableAlias(this=sql.ident("nv")))
            cells = []
            for k in range(K):
                n, t = _c(f"c{k}", "nv"), _c(f"c{k}", "t")
                value = exp.Case(ifs=[exp.If(this=n.eq(sql.dbl(-math.inf)), true=sql.dbl(0.0)),
                                      exp.If(this=exp.Is(this=t, expression=exp.Null()), true=sql.dbl(0.0))],
                                 default=exp.Sub(this=t.copy(), expression=n.copy()))
                cells.append(exp.alias_(exp.Cast(this=value, to=_DOUBLE.copy()), f"c{k}", quoted=True))
            q = (exp.select(exp.alias_(exp.Literal.string(fi.name), "a", quoted=True),
                            exp.alias_(exp.Literal.string(fj.name), "b", quoted=True),
                            exp.alias_(_c("p0", "t"), "u", quoted=True), exp.alias_(_c("cv", "t"), "v", quoted=True),
                            *cells)
                 .from_(cond).join(naive, on=_c("x", "nv").eq(_c("cv", "t")), join_type="inner"))
            out.append(q)
    return sql.render(sql.union_all(out), dialect, pretty=True)


def _value_counts(model: NaiveBayes, name: str, j: int, f) -> exp.Select:
    """``SELECT x, s``: the training rows holding each value of feature ``j`` (any class),
    as :func:`sqlnb.models.naive_bayes.aode.value_counts` counts them."""
    if f.kind != "bernoulli":
        return (exp.select(exp.alias_(exp.Cast(this=_c("value"), to=_TEXT.copy()), "x", quoted=True),
                           exp.alias_(exp.Sum(this=_c("n")), "s", quoted=True))
                .from_(_ref(f"{name}_counts_{j}")).group_by(_c("value")))
    mine = _c("feature").eq(exp.Literal.string(f.name))
    present = exp.select(exp.alias_(exp.Literal.string("1"), "x", quoted=True),
                         exp.alias_(exp.Sum(this=_c("total")), "s", quoted=True)
                         ).from_(_ref(f"{name}_sums")).where(mine)
    absent = exp.select(exp.alias_(exp.Literal.string("0"), "x", quoted=True),
                        exp.alias_(exp.Sub(this=exp.Sum(this=_c("n")), expression=exp.Sum(this=_c("total"))), "s",
                                   quoted=True)).from_(_ref(f"{name}_sums")).where(mine.copy())
    return sql.union_all([absent, present])


def parents_sql(model: NaiveBayes, name: str, dialect: str) -> str:
    """``<name>_aode_parents``: per discrete feature and value, 1 when it may be a
    super-parent (seen at least ``aode_min_count`` times), else 0."""
    m = float(model.hyper.aode_min_count)
    out = []
    for j, f in discrete(model):
        seen = exp.Coalesce(this=_c("s", "n"), expressions=[sql.dbl(0.0)])
        ok = exp.Case(ifs=[exp.If(this=exp.GTE(this=seen, expression=sql.dbl(m)), true=sql.dbl(1.0))],
                      default=sql.dbl(0.0))
        q = (exp.select(exp.alias_(exp.Literal.string(f.name), "a", quoted=True),
                        exp.alias_(_c("x", "d"), "u", quoted=True), exp.alias_(ok, "ok", quoted=True))
             .from_(exp.Subquery(this=_domain(model, name, f), alias=exp.TableAlias(this=sql.ident("d"))))
             .join(exp.Subquery(this=_value_counts(model, name, j, f), alias=exp.TableAlias(this=sql.ident("n"))),
                   on=_c("x", "n").eq(_c("x", "d")), join_type="left"))
        out.append(q)
    return sql.render(sql.union_all(out), dialect, pretty=True)


def shift_sql(model: NaiveBayes, name: str, dialect: str) -> str:
    """``<name>_aode_shift``: per class the shift ``aode.derive`` chooses from the bounds of
    T_{c,i}: each child's largest (smallest) finite cell, at least (at most) 0, summed over a
    super-parent's children; their largest (smallest) over the super-parents."""
    K = len(model.classes)
    finite = [exp.Case(ifs=[exp.If(this=exp.GT(this=_c(f"c{k}"), expression=sql.dbl(-math.inf)), true=_c(f"c{k}"))])
              for k in range(K)]
    per_pair = exp.select(_c("a"), _c("b"), *[exp.alias_(exp.Max(this=finite[k]), f"hi{k}", quoted=True)
                                              for k in range(K)],
                          *[exp.alias_(exp.Min(this=finite[k].copy()), f"lo{k}", quoted=True) for k in range(K)])
    per_pair = per_pair.from_(_ref(f"{name}_aode")).group_by(_c("a"), _c("b"))

    def clip(e: exp.Expression, side) -> exp.Expression:
        return side(this=exp.Coalesce(this=e, expressions=[sql.dbl(0.0)]), expressions=[sql.dbl(0.0)])

    per_parent = exp.select(_c("a"), *[exp.alias_(exp.Sum(this=clip(_c(f"hi{k}"), exp.Greatest)), f"hi{k}", quoted=True)
                                       for k in range(K)],
                            *[exp.alias_(exp.Sum(this=clip(_c(f"lo{k}"), exp.Least)), f"lo{k}", quoted=True)
                              for k in range(K)]).from_(per_pair.subquery("p")).group_by(_c("a"))
    cols = []
    for k in range(K):
        top = exp.Coalesce(this=exp.Max(this=_c(f"hi{k}")), expressions=[sql.dbl(0.0)])
        bottom = exp.Coalesce(this=exp.Min(this=_c(f"lo{k}")), expressions=[sql.dbl(0.0)])
        span = exp.Sub(this=top.copy(), expression=bottom.copy())
        inside = exp.and_(exp.LTE(this=top.copy(), expression=sql.dbl(aode.EXP_SAFE)),
                          exp.GTE(this=bottom.copy(), expression=sql.dbl(-aode.EXP_SAFE)))
        shift = exp.Case(ifs=[exp.If(this=exp.GT(this=span, expression=sql.dbl(2 * aode.EXP_SAFE)),
                                     true=exp.Cast(this=exp.Null(), to=_DOUBLE.copy())),
                              exp.If(this=inside, true=sql.dbl(0.0))],
                         default=exp.Div(this=sql.paren(exp.Add(this=top.copy(), expression=bottom.copy())),
                                         expression=sql.dbl(2.0)))
        cols.append(exp.alias_(exp.Cast(this=shift, to=_DOUBLE.copy()), f"s{k}", quoted=True))
    return sql.render(exp.select(*cols).from_(per_parent.subquery("s")), dialect, pretty=True)


def tables(model: NaiveBayes, name: str) -> list[tuple[str, Any]]:
    """(table, its SELECT per dialect) of AODE's derived tables, in the order they are built."""
    if not discrete(model):
        return []
    return [(f"{name}_aode", lambda d: ratios_sql(model, name, d)),
            (f"{name}_aode_parents", lambda d: parents_sql(model, name, d)),
            (f"{name}_aode_shift", lambda d: shift_sql(model, name, d))]


def _alias(name: str, *at: int) -> str:
    return f"{name}_aode_" + "_".join(str(j) for j in at)


def joins(model: NaiveBayes, name: str) -> list[exp.Join]:
    """The scoring SELECT's joins: per discrete feature its eligibility, per ordered pair its
    cells (LEFT JOINs on the row's values as text), and the shifts."""
    feats = discrete(model)
    if not feats:
        return []
    out = []
    for i, fi in feats:
        alias = _alias(name, i)
        out.append(exp.Join(this=_ref(f"{name}_aode_parents", alias), side="LEFT", on=exp.and_(
            _c("a", alias).eq(exp.Literal.string(fi.name)), _c("u", alias).eq(code(fi, scoring=True)))))
        for j, fj in feats:
            if fj is fi:
                continue
            alias = _alias(name, i, j)
            out.append(exp.Join(this=_ref(f"{name}_aode", alias), side="LEFT", on=exp.and_(
                _c("a", alias).eq(exp.Literal.string(fi.name)), _c("b", alias).eq(exp.Literal.string(fj.name)),
                _c("u", alias).eq(code(fi, scoring=True)), _c("v", alias).eq(code(fj, scoring=True)))))
    out.append(exp.Join(this=_ref(f"{name}_aode_shift", f"{name}_aode_shift"), kind="CROSS"))
    return out


def term(model: NaiveBayes, name: str, k: int) -> exp.Expression | None:
    """Class ``k``'s AODE term over the joins of :func:`joins` (module docstring); None
    for another structure. ``LN`` of a sum that is 0 (every super-parent's product 0, a
    −inf cell) is −inf, as :func:`sqlnb.models.naive_bayes.aode._logged` writes it."""
    feats = discrete(model)
    if not feats:
        return None
    zero = sql.dbl(0.0)
    ok = {i: exp.Coalesce(this=_c("ok", _alias(name, i)), expressions=[zero.copy()]) for i, _ in feats}
    s = _c(f"s{k}", f"{name}_aode_shift")
    parts = []
    for i, fi in feats:
        t = sql.add([exp.Coalesce(this=_c(f"c{k}", _alias(name, i, j)), expressions=[zero.copy()])
                     for j, fj in feats if fj is not fi])
        parts.append(exp.Mul(this=ok[i], expression=exp.Exp(this=exp.Sub(this=sql.paren(t), expression=s.copy()))))
    total, size = sql.paren(sql.add(parts)), sql.paren(sql.add([ok[i].copy() for i, _ in feats]))
    logged = exp.Case(ifs=[exp.If(this=total.copy().eq(zero.copy()), true=sql.dbl(-math.inf))],
                      default=exp.Sub(this=exp.Add(this=s.copy(), expression=exp.Ln(this=total)),
                                      expression=exp.Ln(this=size.copy())))
    return exp.Case(ifs=[exp.If(this=exp.GT(this=size, expression=zero.copy()), true=logged)], default=zero.copy())
