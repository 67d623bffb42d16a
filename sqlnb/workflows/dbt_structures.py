"""Tree-augmented naive Bayes under dbt: the pair counts as an incremental dbt model, the
conditional tables derived from them in SQL, and the tree terms of the trained scoring macro.

The tree (each child's parent, :meth:`NaiveBayes.tree
<sqlnb.models.naive_bayes.model.NaiveBayes.tree>`) and a binned column's cut points are
the generating model's, written into the package; only the counts are retrained:

``<name>_pairs``
    per class and pair ``(a, b)`` of tree features (``a`` before ``b`` in the model's
    order; :func:`sqlnb.models.naive_bayes.tan.eligible`) and their values ``u``, ``v``:
    ``n``, the rows where both are present (:mod:`sqlnb.models.naive_bayes.tan`'s pair
    counts). Every pair is counted, not only the tree's edges, so that ``sqlnb
    dbt-import`` reads back the statistics ``sqlnb fit`` keeps (and derives its tree from
    them). A value is kept as text (``CAST(… AS VARCHAR)`` in the engine's dialect): the
    category, a binned column's bin number, a Bernoulli column's ``0`` / ``1`` (absent /
    present); the key ``(class, a, b, u, v)`` merges a batch's counts into the stored ones
    by adding them, as every count table.
``<name>_tree_<j>`` (tree child ``j``)
    per parent value ``pv`` and child value ``cv`` (every pair of values the columns'
    own counts hold, a binned column's every bin, a Bernoulli column's 0 and 1), ``c<k>``
    = ln p(cv | class k, pv) smoothed as :func:`sqlnb.models.naive_bayes.tan._conditional`
    does: a categorical or binned child ``(n(c, pv, cv) + α) / (n(c, pv) + α·n_j)``, a
    Bernoulli child ``(n(c, pv, 1) + β₁) / (n(c, pv) + β₁ + β₀)``; NULL where the
    denominator is 0 (no rows, no pseudo-count), whose term is the naive one.

The scoring macro joins each child's table on the row's (parent, child) values as text:
a missing or unseen child finds no row and its naive term (0) is used; a missing or unseen
parent finds no row and the naive term of the child is used, as TAN scores.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlnb import sql
from sqlnb.models.naive_bayes.families import REGISTRY
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.models.naive_bayes.tan import BERNOULLI_VALUES, _pairs
from sqlnb.workflows.dbt_params import _c, _ln_ratio, _ref

#: The structures whose counts the training models count.
STRUCTURES = ("tan",)
#: The key of ``<name>_pairs``.
PAIR_KEYS = ("class", "a", "b", "u", "v")
_TEXT = exp.DataType.build("varchar")


def paired(model: NaiveBayes) -> list:
    """The tree features (their pair counts are counted), in the model's order; [] for
    a model without a structure."""
    if model.hyper.structure not in STRUCTURES or model.stats.pairs is None:
        return []
    by_name = {f.name: f for f in model.features}
    return [by_name[n] for n in model.stats.pairs.features]


def code(f, scoring: bool = False) -> exp.Expression:
    """The value a tree feature's pairs are counted and looked up by, as text over
    ``src``: the category, the bin number, Bernoulli 0 / 1; NULL when missing."""
    if f.kind == "binned":
        x = REGISTRY["binned"].bin_index(f, scoring=scoring)
    elif f.kind == "bernoulli":
        v = REGISTRY["bernoulli"].value(f, scoring=scoring)
        x = exp.Case(ifs=[exp.If(this=exp.Is(this=v, expression=exp.Null()), true=exp.Null()),
                          exp.If(this=exp.GT(this=v.copy(), expression=sql.dbl(f.threshold)),
                                 true=exp.Literal.number(1))], default=exp.Literal.number(0))
    else:
        x = sql.col(f.name, "src")
    return exp.Cast(this=x, to=_TEXT.copy())


def pairs_batch(model: NaiveBayes, features: list, head: list, mark: list, src: exp.Table) -> exp.Select:
    """The pair counts of the rows in ``new`` (aliased ``src``), one UNION ALL branch per pair."""
    label = sql.col(model.label, "src")
    out = None
    for i, fa in enumerate(features):
        for fb in features[i + 1:]:
            u, v = code(fa), code(fb)
            q = (exp.select(*[c.copy() for c in head], exp.alias_(exp.Literal.string(fa.name), "a", quoted=True),
                            exp.alias_(exp.Literal.string(fb.name), "b", quoted=True),
                            exp.alias_(u, "u", quoted=True), exp.alias_(v, "v", quoted=True),
                            exp.alias_(exp.Cast(this=exp.Count(this=exp.Star()), to=exp.DataType.build("double")),
                                       "n", quoted=True), *[m.copy() for m in mark])
                 .from_(src.copy())
                 .where(exp.and_(exp.Not(this=exp.Is(this=u.copy(), expression=exp.Null())),
                                 exp.Not(this=exp.Is(this=v.copy(), expression=exp.Null()))))
                 .group_by(label.copy(), u.copy(), v.copy()))
            out = q if out is None else exp.union(out, q, distinct=False)
    return out


# -- the conditional tables -------------------------------------------------------------------------

def _domain(model: NaiveBayes, name: str, f) -> exp.Select:
    """``SELECT … AS x``: a tree feature's values as text (its counts table's values, every
    bin, or 0 and 1)."""
    if f.kind == "categorical":
        j = model.features.index(f)
        return (exp.select(exp.alias_(exp.Cast(this=_c("value"), to=_TEXT.copy()), "x", quoted=True))
                .from_(_ref(f"{name}_counts_{j}")).group_by(_c("value")))
    n = len(f.edges) + 1 if f.kind == "binned" else len(BERNOULLI_VALUES)
    out = None
    for i in range(n):
        q = exp.select(exp.alias_(exp.Literal.string(str(i)), "x", quoted=True))
        out = q if out is None else exp.union(out, q, distinct=False)
    return out


def tree_sql(model: NaiveBayes, name: str, child, parent, dialect: str) -> str:
    """``<name>_tree_<j>``: ln p(child value | class, parent value) for every pair of values."""
    order = [f.name for f in paired(model)]
    forward = order.index(parent.name) < order.index(child.name)  # the parent is the pair's a
    a, b = (parent, child) if forward else (child, parent)
    pv, cv = ("u", "v") if forward else ("v", "u")
    K = len(model.classes)
    per = [exp.alias_(exp.Sum(this=exp.Case(ifs=[exp.If(this=_c("class").eq(sql.value(c, model.label_type)),
                                                        true=_c("n"))], default=sql.dbl(0.0))), f"k{k}", quoted=True)
           for k, c in enumerate(model.classes)]
    cnt = (exp.select(exp.alias_(_c(pv), "pv", quoted=True), exp.alias_(_c(cv), "cv", quoted=True), *per)
           .from_(_ref(f"{name}_pairs"))
           .where(exp.and_(_c("a").eq(exp.Literal.string(a.name)), _c("b").eq(exp.Literal.string(b.name))))
           .group_by(_c(pv), _c(cv)))
    grid = (exp.select(exp.alias_(_c("x", "p"), "pv", quoted=True), exp.alias_(_c("x", "q"), "cv", quoted=True),
                       *[exp.alias_(exp.Coalesce(this=_c(f"k{k}", "n"), expressions=[sql.dbl(0.0)]), f"k{k}",
                                    quoted=True) for k in range(K)])
            .from_(exp.Subquery(this=_domain(model, name, parent), alias=exp.TableAlias(this=sql.ident("p"))))
            .join(exp.Subquery(this=_domain(model, name, child), alias=exp.TableAlias(this=sql.ident("q"))),
                  join_type="cross")
            .join(exp.Table(this=sql.ident("cnt"), alias=exp.TableAlias(this=sql.ident("n"))),
                  on=exp.and_(_c("pv", "n").eq(_c("x", "p")), _c("cv", "n").eq(_c("x", "q"))), join_type="left"))
    tot = (exp.select(_c("pv"), *[exp.alias_(exp.Sum(this=_c(f"k{k}")), f"t{k}", quoted=True) for k in range(K)],
                      exp.alias_(exp.Cast(this=exp.Count(this=exp.Star()), to=exp.DataType.build("double")), "nj",
                                 quoted=True))
           .from_(sql.table("grid")).group_by(_c("pv")))
    hp = model.hyper
    cols = [_c("pv", "g"), _c("cv", "g")]
    for k in range(K):
        n, t = _c(f"k{k}", "g"), _c(f"t{k}", "t")
        if child.kind == "bernoulli":
            b1, b0 = hp.beta_for(child.name)
            pseudo = exp.Case(ifs=[exp.If(this=_c("cv", "g").eq(exp.Literal.string("1")), true=sql.dbl(float(b1)))],
                              default=sql.dbl(float(b0)))
            den = exp.Add(this=t, expression=sql.dbl(float(b1 + b0)))
        else:
            alpha = hp.pseudo(hp.alpha_for(child.name))
            pseudo = sql.dbl(float(alpha))
            den = exp.Add(this=t, expression=exp.Mul(this=sql.dbl(float(alpha)), expression=_c("nj", "t")))
        value = exp.Case(ifs=[exp.If(this=exp.NEQ(this=den.copy(), expression=sql.dbl(0.0)),
                                     true=_ln_ratio(exp.Add(this=n, expression=pseudo), den))])
        cols.append(exp.alias_(exp.Cast(this=value, to=exp.DataType.build("double")), f"c{k}", quoted=True))
    tree = (exp.select(*cols).from_(exp.Table(this=sql.ident("grid"), alias=exp.TableAlias(this=sql.ident("g"))))
            .join(exp.Table(this=sql.ident("tot"), alias=exp.TableAlias(this=sql.ident("t"))),
                  on=_c("pv", "t").eq(_c("pv", "g")), join_type="inner")
            .with_(sql.ident("cnt"), as_=cnt).with_(sql.ident("grid"), as_=grid).with_(sql.ident("tot"), as_=tot))
    return sql.render(tree, dialect, pretty=True)


def children(model: NaiveBayes) -> list[tuple[int, Any, Any]]:
    """(position, child, parent) of every tree child, in the model's order."""
    if not paired(model):
        return []
    parent = model.tree()
    by_name = {f.name: f for f in model.features}
    return [(j, f, by_name[parent[f.name]]) for j, f in enumerate(model.features) if f.name in parent]


def tables(model: NaiveBayes, name: str) -> list[tuple[str, Any]]:
    """(table, its SELECT per dialect) of each child's conditional table."""
    return [(f"{name}_tree_{j}", lambda d, c=child, p=par: tree_sql(model, name, c, p, d))
            for j, child, par in children(model)]


def _alias(j: int) -> str:
    return f"tree {j}"


def joins(model: NaiveBayes, name: str) -> list[exp.Join]:
    """The scoring SELECT's LEFT JOIN of each child's table on the row's (parent, child) values."""
    return [exp.Join(this=_ref(f"{name}_tree_{j}", _alias(j)), side="LEFT",
                     on=exp.and_(code(par, scoring=True).eq(_c("pv", _alias(j))),
                                 code(child, scoring=True).eq(_c("cv", _alias(j)))))
            for j, child, par in children(model)]


def term(model: NaiveBayes, j: int, k: int, naive: exp.Expression) -> exp.Expression:
    """Feature ``j``'s term in class ``k``: its tree cell, else (no row, or an empty
    parent value) its naive term ``naive``; ``naive`` itself when ``j`` is no child."""
    if j not in {c[0] for c in children(model)}:
        return naive
    return exp.Coalesce(this=_c(f"c{k}", _alias(j)), expressions=[naive])


# -- reading the pair counts back ----------------------------------------------------------------------

def import_pairs(model: NaiveBayes, read, classes: list, counts: dict):
    """:class:`~sqlnb.models.naive_bayes.tan.Pairs` of the tree features from the rows of
    ``<name>_pairs`` (``read(part, columns)``), each text value mapped back to the value it
    is (``counts``: per categorical feature, text -> value as the engine casts them)."""
    feats = paired(model)
    pos = {c: i for i, c in enumerate(classes)}

    def typed(f, text):
        if f.kind == "categorical":
            return counts[f.name][text]
        return int(text) if f.kind == "binned" else BERNOULLI_VALUES[int(text)]

    by_name = {f.name: f for f in feats}
    cells: dict = {}
    for c, a, b, u, v, n in read("pairs", list(PAIR_KEYS) + ["n"]):
        if c in pos:
            key = (pos[c], typed(by_name[a], u), typed(by_name[b], v))
            cell = cells.setdefault((a, b), {})
            cell[key] = cell.get(key, 0.0) + float(n)
    return _pairs(feats, len(classes), cells)

