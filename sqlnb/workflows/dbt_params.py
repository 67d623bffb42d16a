"""Log-parameters derived in SQL from the statistics dbt counted, and scoring that reads them.

The training models of ``sqlnb dbt --train`` (:mod:`sqlnb.workflows.dbt_train`) hold the
statistics; this module writes the dbt models that derive the log-parameters from them as
sqlnb does (:meth:`NaiveBayes.log_parameters <sqlnb.models.naive_bayes.model.NaiveBayes.log_parameters>`,
each family's ``estimate``), and the macro ``score_<name>_trained`` that scores with those
tables, so that after a retrain (an incremental run, a full refresh) the scores follow
without generating the package again:

``<name>_params`` (one row)
    ``prior_<k>`` per class ``k`` (in class order); per feature ``j`` (in the model's
    order) and class ``k``: Gaussian ``mean_<j>_<k>``, ``const_<j>_<k>`` (``−½ ln(2π
    var)``) and ``half_<j>_<k>`` (``1 / (2 var)``); Bernoulli ``flp_<j>_<k>`` and
    ``neg_<j>_<k>`` (``ln θ``, ``ln(1 − θ)``); multinomial and complement ``w_<j>_<k>``;
    categorical with ``unseen="bucket"`` ``unseen_<j>_<k>``.
``<name>_params_<j>`` (categorical column ``j``)
    one row per value: ``v`` and ``c<k>``, ``ln p(value | class k)``.

The hyperparameters (α, β, the estimator, the class prior, ``var_smoothing``, ``norm``,
``tied_variance``, ``unseen``) are the model's when the package is generated: they enter
the SQL as DOUBLE literals, as the class labels and feature names do; every number that
comes from the data is read from the statistics tables. A logarithm of zero is −inf, as in
:func:`~sqlnb.models.naive_bayes.families.base.log_ratio`; where sqlnb refuses a setting (a
MAP estimate with α < 1 on a zero count, a zero variance with ``var_smoothing`` 0) the
parameter is NULL, so the scores are NULL and the package's probabilities test fails.
"""

from __future__ import annotations

import math
from typing import Any

from sqlglot import exp

from sqlnb import sql
from sqlnb.models.finish import scoring_select
from sqlnb.models.naive_bayes.families import REGISTRY
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.sql.types import is_float
from sqlnb.workflows import dbt_aode, dbt_structures
from sqlnb.workflows.dbt import _KEEP, ADAPTERS, OUTPUTS, _jinja, _ln_ratio, _ref, passed_through

_P = "sqlnb params"  # the alias of the one-row parameter table in the scoring SELECT


def _c(name: str, table: str | None = None) -> exp.Column:
    return sql.col(name, table)


def _long(cls: exp.Expression, feature: str, param: str, value: exp.Expression) -> list[exp.Expression]:
    return [exp.alias_(cls, "class", quoted=True), exp.alias_(exp.Literal.string(feature), "feature", quoted=True),
            exp.alias_(exp.Literal.string(param), "param", quoted=True),
            exp.alias_(exp.Cast(this=value, to=exp.DataType.build("double")), "value", quoted=True)]


def _prior(model: NaiveBayes, name: str) -> exp.Select:
    """Per class: ln π_c (:meth:`NaiveBayes.class_log_prior`): the fitted and Dirichlet
    priors from the class counts, a uniform or given one as the model states it."""
    prior = model.hyper.class_prior
    n = _c("n", "c")
    total = _c("total", "t")
    if prior in ("fitted", "dirichlet"):
        if prior == "dirichlet":
            a = model.hyper.class_pseudo(model.classes)
            per = exp.Case(ifs=[exp.If(this=_c("class", "c").eq(sql.value(c, model.label_type)), true=sql.dbl(float(x)))
                                for c, x in zip(model.classes, a)], default=sql.dbl(0.0))
            value = _ln_ratio(exp.Add(this=n, expression=per), exp.Add(this=total, expression=sql.dbl(float(a.sum()))))
        else:
            value = _ln_ratio(n, total)
    else:  # uniform or given: no statistic enters
        logs = model.class_log_prior()
        value = exp.Case(ifs=[exp.If(this=_c("class", "c").eq(sql.value(c, model.label_type)), true=sql.dbl(float(v)))
                              for c, v in zip(model.classes, logs)])
    totals = exp.select(exp.alias_(exp.Sum(this=_c("n")), "total", quoted=True)).from_(_ref(f"{name}_classes"))
    return (exp.select(*_long(_c("class", "c"), "", "prior", value)).from_(_ref(f"{name}_classes", "c"))
            .join(exp.Subquery(this=totals, alias=exp.TableAlias(this=sql.ident("t"))), join_type="cross"))


def _gaussian(model: NaiveBayes, name: str) -> list[exp.Select]:
    """Per class and Gaussian column: mean, ``−½ ln(2π var)``, ``1/(2 var)``, with the
    variance floor ``var_smoothing · max_j var(x_j)`` and the pooled fallback of a class
    without values (families/gaussian.py)."""
    moments = _ref(f"{name}_moments")
    pooled = (exp.select(_c("feature"), exp.alias_(exp.Sum(this=_c("n")), "pn", quoted=True),
                         exp.alias_(exp.Div(this=exp.Sum(this=exp.Mul(this=_c("n"), expression=_c("mean"))),
                                            expression=exp.Nullif(this=exp.Sum(this=_c("n")),
                                                                  expression=sql.dbl(0.0))), "pmean", quoted=True))
              .from_(moments).group_by(_c("feature")))
    d = sql.paren(exp.Sub(this=_c("mean", "m"), expression=_c("pmean", "p")))
    spread = exp.Sum(this=exp.Mul(this=exp.Mul(this=_c("n", "m"), expression=d), expression=d.copy()))
    pooled2 = (exp.select(_c("feature", "m"), _c("pn", "p"), _c("pmean", "p"),
                          exp.alias_(exp.Sum(this=_c("m2", "m")), "sm2", quoted=True),
                          exp.alias_(exp.Add(this=exp.Sum(this=_c("m2", "m")), expression=spread), "pm2", quoted=True))
               .from_(_ref(f"{name}_moments", "m"))
               .join(exp.Subquery(this=pooled, alias=exp.TableAlias(this=sql.ident("p"))),
                     on=_c("feature", "p").eq(_c("feature", "m")), join_type="inner")
               .group_by(_c("feature", "m"), _c("pn", "p"), _c("pmean", "p")))
    pvar = exp.Case(ifs=[exp.If(this=exp.GT(this=_c("pn", "p"), expression=sql.dbl(0.0)),
                                true=exp.Div(this=_c("pm2", "p"), expression=_c("pn", "p")))], default=sql.dbl(0.0))
    big = exp.Max(this=pvar.copy())
    floor = exp.Mul(this=sql.dbl(float(model.hyper.var_smoothing)), expression=exp.Case(
        ifs=[exp.If(this=exp.GT(this=big, expression=sql.dbl(0.0)), true=big.copy())], default=sql.dbl(1.0)))
    eps = exp.select(exp.alias_(floor, "eps", quoted=True)).from_(
        exp.Subquery(this=pooled2.copy(), alias=exp.TableAlias(this=sql.ident("p"))))
    own = exp.GT(this=_c("n", "m"), expression=sql.dbl(0.0))
    mean = exp.Case(ifs=[exp.If(this=own, true=_c("mean", "m"))], default=_c("pmean", "p"))
    if model.hyper.tied_variance:  # the pooled within-class variance, Σ_c M2_c / Σ_c n_c
        var0 = exp.Div(this=_c("sm2", "p"), expression=exp.Nullif(this=_c("pn", "p"), expression=sql.dbl(0.0)))
    else:
        var0 = exp.Case(ifs=[exp.If(this=own.copy(), true=exp.Div(this=_c("m2", "m"), expression=_c("n", "m")))],
                        default=pvar.copy())
    var = sql.paren(exp.Add(this=var0, expression=_c("eps", "e")))
    positive = exp.GT(this=var.copy(), expression=sql.dbl(0.0))
    const = exp.Case(ifs=[exp.If(this=positive, true=exp.Mul(this=sql.dbl(-0.5), expression=exp.Ln(
        this=exp.Mul(this=sql.dbl(2.0 * math.pi), expression=var.copy()))))])
    half = exp.Case(ifs=[exp.If(this=positive.copy(), true=exp.Div(this=sql.dbl(0.5), expression=var.copy()))])
    base = (exp.select().from_(_ref(f"{name}_moments", "m"))
            .join(exp.Subquery(this=pooled2, alias=exp.TableAlias(this=sql.ident("p"))),
                  on=_c("feature", "p").eq(_c("feature", "m")), join_type="inner")
            .join(exp.Subquery(this=eps, alias=exp.TableAlias(this=sql.ident("e"))), join_type="cross"))
    out = []
    for param, value in (("mean", mean), ("const", const), ("half", half)):
        q = base.copy()
        q.set("expressions", [exp.alias_(_c("class", "m"), "class", quoted=True),
                              exp.alias_(_c("feature", "m"), "feature", quoted=True),
                              exp.alias_(exp.Literal.string(param), "param", quoted=True),
                              exp.alias_(exp.Cast(this=value.copy(), to=exp.DataType.build("double")), "value",
                                         quoted=True)])
        out.append(q)
    return out


def _sums(name: str, features: list) -> exp.Select:
    return (exp.select(_c("class"), _c("feature"), _c("n"), _c("total")).from_(_ref(f"{name}_sums"))
            .where(exp.In(this=_c("feature"), expressions=[exp.Literal.string(f.name) for f in features])))


def _per_feature(features: list, value) -> exp.Expression:
    """``CASE feature WHEN 'f' THEN value(f) ... END``: a per-column hyperparameter."""
    return exp.Case(ifs=[exp.If(this=_c("feature").eq(exp.Literal.string(f.name)), true=sql.dbl(float(value(f))))
                         for f in features])


def _bernoulli(model: NaiveBayes, name: str, features: list) -> list[exp.Select]:
    """θ = (N_cj + β₁) / (N_c + β₁ + β₀): ``ln θ`` and ``ln(1 − θ)`` (families/bernoulli.py)."""
    hp = model.hyper
    b1 = _per_feature(features, lambda f: hp.beta_for(f.name)[0])
    b0 = _per_feature(features, lambda f: hp.beta_for(f.name)[1])
    den = exp.Add(this=exp.Add(this=_c("n"), expression=b1.copy()), expression=b0.copy())
    flp = _ln_ratio(exp.Add(this=_c("total"), expression=b1), den)
    neg = _ln_ratio(exp.Add(this=exp.Sub(this=_c("n"), expression=_c("total")), expression=b0), den)
    src = exp.Subquery(this=_sums(name, features), alias=exp.TableAlias(this=sql.ident("s")))
    out = []
    for param, value in (("flp", flp), ("neg", neg)):
        row = _long(_c("class"), "", param, value)
        row[1] = exp.alias_(_c("feature"), "feature", quoted=True)
        out.append(exp.select(*row).from_(src.copy()))
    return out


def _counts(model: NaiveBayes, name: str, kind: str, features: list) -> exp.Select:
    """Multinomial: ``ln(N_cj + α_j) − ln Σ_j' (N_cj' + α_j')``; complement: ``−ln(comp_cj
    / Σ_j' comp_cj')`` with ``comp_cj = Σ_c N_cj + α_j − N_cj`` (or normalised by
    the class's sum of logarithms, ``norm``): families/multinomial.py, complement.py."""
    hp = model.hyper
    alpha = _per_feature(features, lambda f: hp.pseudo(hp.alpha_for(f.name)))
    s = exp.Subquery(this=_sums(name, features), alias=exp.TableAlias(this=sql.ident("s")))
    by_class = exp.Window(this=exp.Sum(this=_c("num")), partition_by=[_c("class")])
    if kind == "multinomial":
        num = exp.select(_c("class"), _c("feature"), exp.alias_(exp.Add(this=_c("total"), expression=alpha), "num",
                                                                 quoted=True)).from_(s)
        w = exp.select(_c("class"), _c("feature"), exp.alias_(_ln_ratio(_c("num"), by_class), "w", quoted=True)).from_(
            exp.Subquery(this=num, alias=exp.TableAlias(this=sql.ident("m"))))
    else:
        everyone = exp.Window(this=exp.Sum(this=_c("total")), partition_by=[_c("feature")])
        num = exp.select(_c("class"), _c("feature"), exp.alias_(
            exp.Sub(this=exp.Add(this=everyone, expression=alpha), expression=_c("total")), "num", quoted=True)).from_(s)
        logged = exp.select(_c("class"), _c("feature"), exp.alias_(exp.Ln(this=exp.Div(this=_c("num"),
                                                                                        expression=by_class)),
                                                                    "lg", quoted=True)).from_(
            exp.Subquery(this=num, alias=exp.TableAlias(this=sql.ident("m"))))
        if hp.norm:  # a class whose logarithms sum to 0 (a single column) gets weight 0
            total = exp.Window(this=exp.Sum(this=_c("lg")), partition_by=[_c("class")])
            w_ = exp.Case(ifs=[exp.If(this=exp.NEQ(this=total, expression=sql.dbl(0.0)),
                                      true=exp.Div(this=_c("lg"), expression=total.copy()))], default=sql.dbl(0.0))
        else:
            w_ = exp.Neg(this=_c("lg"))
        w = exp.select(_c("class"), _c("feature"), exp.alias_(w_, "w", quoted=True)).from_(
            exp.Subquery(this=logged, alias=exp.TableAlias(this=sql.ident("l"))))
    return exp.select(_c("class"), _c("feature"), exp.alias_(exp.Literal.string("w"), "param", quoted=True),
                      exp.alias_(exp.Cast(this=_c("w"), to=exp.DataType.build("double")), "value", quoted=True)
                      ).from_(exp.Subquery(this=w, alias=exp.TableAlias(this=sql.ident("w"))))


def _categorical_pseudo(model: NaiveBayes, f) -> tuple[float, int]:
    """The column's pseudo-count and the values added to the vocabulary (1 for the unseen bucket)."""
    hp = model.hyper
    return hp.pseudo(hp.alpha_for(f.name)), 1 if hp.unseen == "bucket" else 0


def _unseen(model: NaiveBayes, name: str, j: int, f) -> exp.Select:
    """Per class: ln p(unseen value | class) = ``ln α − ln(N_c + α (V + 1))``."""
    a, extra = _categorical_pseudo(model, f)
    counts = _ref(f"{name}_counts_{j}")
    per = exp.select(_c("class"), exp.alias_(exp.Sum(this=_c("n")), "t", quoted=True)).from_(counts).group_by(_c("class"))
    v = exp.select(exp.alias_(exp.Cast(this=exp.Count(this=exp.Star()), to=exp.DataType.build("double")), "v",
                              quoted=True)).from_(exp.select(_c("value")).from_(_ref(f"{name}_counts_{j}"))
                                                  .group_by(_c("value")).subquery("d"))
    den = exp.Add(this=exp.Coalesce(this=_c("t", "s"), expressions=[sql.dbl(0.0)]),
                  expression=exp.Mul(this=sql.dbl(a), expression=sql.paren(exp.Add(this=_c("v", "v"),
                                                                                   expression=sql.dbl(float(extra))))))
    return (exp.select(*_long(_c("class", "c"), f.name, "unseen", _ln_ratio(sql.dbl(a), den)))
            .from_(_ref(f"{name}_classes", "c"))
            .join(per.subquery("s"), on=_c("class", "s").eq(_c("class", "c")), join_type="left")
            .join(v.subquery("v"), join_type="cross"))


def _columns(model: NaiveBayes) -> list[tuple[str, int, str]]:
    """(parameter, feature position, feature name) of ``<name>_params``'s columns, per class."""
    out = []
    for j, f in enumerate(model.features):
        params = {"gaussian": ("mean", "const", "half"), "bernoulli": ("flp", "neg"), "multinomial": ("w",),
                  "complement": ("w",), "binned": ()}.get(f.kind, ("unseen",) if model.hyper.unseen == "bucket" else ())
        out += [(p, j, f.name) for p in params]
    return out


def params_sql(model: NaiveBayes, name: str, dialect: str) -> str:
    """``<name>_params``: every log-parameter but the categorical lookups, as one row."""
    parts = [_prior(model, name)]
    kinds = {k: [f for f in model.features if f.kind == k] for k in ("gaussian", "bernoulli", "multinomial",
                                                                     "complement")}
    if kinds["gaussian"]:
        parts += _gaussian(model, name)
    if kinds["bernoulli"]:
        parts += _bernoulli(model, name, kinds["bernoulli"])
    for kind in ("multinomial", "complement"):
        if kinds[kind]:
            parts.append(_counts(model, name, kind, kinds[kind]))
    if model.hyper.unseen == "bucket":
        parts += [_unseen(model, name, j, f) for j, f in enumerate(model.features) if f.kind == "categorical"]
    long = sql.union_all(parts)
    cols = []
    for k, c in enumerate(model.classes):
        label = sql.value(c, model.label_type)
        cols.append(exp.alias_(exp.Max(this=exp.Case(ifs=[exp.If(this=exp.and_(
            _c("class").eq(label.copy()), _c("param").eq(exp.Literal.string("prior"))), true=_c("value"))])),
            f"prior_{k}", quoted=True))
        for param, j, fname in _columns(model):
            cond = exp.and_(_c("class").eq(label.copy()), _c("feature").eq(exp.Literal.string(fname)),
                            _c("param").eq(exp.Literal.string(param)))
            cols.append(exp.alias_(exp.Max(this=exp.Case(ifs=[exp.If(this=cond, true=_c("value"))])),
                                   f"{param}_{j}_{k}", quoted=True))
    tree = exp.select(*cols).from_(sql.table("long")).with_(sql.ident("long"), as_=long)
    return sql.render(tree, dialect, pretty=True)


def lookup_sql(model: NaiveBayes, name: str, j: int, dialect: str) -> str:
    """``<name>_params_<j>``: per value of categorical column ``j``, ``ln p(value | class)``
    for every class: ``ln(N_cv + α) − ln(N_c + α V)`` (V values, + 1 with the unseen bucket);
    of a binned column, per bin number ``0 … B−1`` (every bin, V = B, no unseen bucket:
    families/binned.py)."""
    f = model.features[j]
    a, extra = _categorical_pseudo(model, f)
    per = [exp.alias_(exp.Sum(this=exp.Case(ifs=[exp.If(this=_c("class").eq(sql.value(c, model.label_type)),
                                                        true=_c("n"))], default=sql.dbl(0.0))), f"k{k}", quoted=True)
           for k, c in enumerate(model.classes)]
    if f.kind == "binned":  # every bin, also one no row fell in: LEFT JOIN its counts
        extra = 0
        bins = exp.values([(exp.Literal.number(b),) for b in range(len(f.edges) + 1)], alias="bins",
                          columns=["value"])
        cnt = (exp.select(exp.alias_(_c("value", "bins"), "value", quoted=True), *per).from_(bins)
               .join(_ref(f"{name}_counts_{j}", "n"), on=_c("value", "n").eq(_c("value", "bins")), join_type="left")
               .group_by(_c("value", "bins")))
    else:
        cnt = exp.select(_c("value"), *per).from_(_ref(f"{name}_counts_{j}")).group_by(_c("value"))
    tot = exp.select(*[exp.alias_(exp.Sum(this=_c(f"k{k}")), f"t{k}", quoted=True) for k in range(len(model.classes))],
                     exp.alias_(exp.Cast(this=exp.Count(this=exp.Star()), to=exp.DataType.build("double")), "v",
                                quoted=True)).from_(sql.table("cnt"))
    vocab = sql.paren(exp.Add(this=_c("v", "tot"), expression=sql.dbl(float(extra))))
    cols = [exp.alias_(_c("value", "cnt"), "v", quoted=True)]
    for k in range(len(model.classes)):
        den = exp.Add(this=_c(f"t{k}", "tot"), expression=exp.Mul(this=sql.dbl(a), expression=vocab.copy()))
        cols.append(exp.alias_(exp.Cast(this=_ln_ratio(exp.Add(this=_c(f"k{k}", "cnt"), expression=sql.dbl(a)), den),
                                        to=exp.DataType.build("double")), f"c{k}", quoted=True))
    tree = (exp.select(*cols).from_(sql.table("cnt")).join(sql.table("tot"), join_type="cross")
            .with_(sql.ident("cnt"), as_=cnt).with_(sql.ident("tot"), as_=tot))
    return sql.render(tree, dialect, pretty=True)


# -- scoring with the parameter tables -------------------------------------------------------------

def _term(model: NaiveBayes, name: str, j: int, f, k: int) -> exp.Expression:
    """Feature ``j``'s term in class ``k``'s score, read from the parameter tables: the
    same formula as its family's ``term`` (0 when the value is missing)."""
    fam = REGISTRY["categorical" if f.kind == "binned" else f.kind]

    def p(param: str) -> exp.Column:
        return _c(f"{param}_{j}_{k}", _P)

    if f.kind == "gaussian":
        x = fam.value(f, scoring=True)
        d = sql.paren(exp.Sub(this=x, expression=p("mean")))
        body = exp.Sub(this=p("const"), expression=exp.Mul(this=exp.Mul(this=d, expression=d.copy()),
                                                           expression=p("half")))
        return exp.Coalesce(this=body, expressions=[sql.dbl(0.0)])
    if f.kind == "bernoulli":
        x = fam.value(f)
        return exp.Case(ifs=[exp.If(this=sql.missing(x, nan=is_float(f.sql_type)),
                                    true=sql.dbl(0.0)),
                             exp.If(this=exp.GT(this=x.copy(), expression=sql.dbl(f.threshold)), true=p("flp"))],
                        default=p("neg"))
    if f.kind in ("multinomial", "complement"):
        x = fam.value(f, scoring=True)  # 0 · −inf is NaN: a zero count adds 0
        return exp.Coalesce(this=exp.Case(ifs=[exp.If(this=x.eq(sql.dbl(0.0)), true=sql.dbl(0.0))],
                                          default=exp.Mul(this=x.copy(), expression=p("w"))),
                            expressions=[sql.dbl(0.0)])
    hit = _c(f"c{k}", fam.alias(f))
    if model.hyper.unseen != "bucket" or f.kind == "binned":
        return exp.Coalesce(this=hit, expressions=[sql.dbl(0.0)])
    missing = sql.missing(fam.raw(f), nan=is_float(f.sql_type))
    return exp.Case(ifs=[exp.If(this=missing, true=sql.dbl(0.0))],
                    default=exp.Coalesce(this=hit, expressions=[p("unseen")]))


def scoring_sql(model: NaiveBayes, name: str, dialect: str) -> str:
    """The scoring SELECT over ``{{ relation }}`` (aliased ``src``) with the parameters of
    the tables ``<name>_params`` and ``<name>_params_<j>``, passing through the columns
    named by the Jinja list ``columns`` (as :func:`sqlnb.workflows.dbt.scoring_sql`)."""
    src = exp.Table(this=_jinja("{{ relation }}"), alias=exp.TableAlias(this=sql.ident("src")))
    joins = [exp.Join(this=_ref(f"{name}_params", _P), kind="CROSS")]
    for j, f in enumerate(model.features):
        if f.kind in ("categorical", "binned"):
            fam = REGISTRY["categorical"]
            key = REGISTRY["binned"].bin_index(f) if f.kind == "binned" else fam.raw(f)
            joins.append(exp.Join(this=_ref(f"{name}_params_{j}", fam.alias(f)), side="LEFT",
                                  on=key.eq(_c("v", fam.alias(f)))))
    joins += dbt_structures.joins(model, name) + dbt_aode.joins(model, name)
    scores = []
    for k in range(len(model.classes)):
        terms = [_c(f"prior_{k}", _P)] if model.uses_prior() else []
        terms += [dbt_structures.term(model, name, j, k, _term(model, name, j, f, k)) for j, f in enumerate(model.features)]
        averaged = dbt_aode.term(model, name, k)  # AODE: the naive Bayes score plus its average over super-parents
        terms += [averaged] if averaged is not None else []
        scores.append(sql.add(terms))
    tree = scoring_select(src, scores, model.classes, model.label_type, None, OUTPUTS, [_KEEP], joins=joins,
                          dialect=dialect)
    return passed_through(tree, dialect)


def derived(model: NaiveBayes, name: str) -> list[tuple[str, Any]]:
    """(table, its SELECT per dialect) of every table derived from the statistics, in an
    order that builds each after the tables it reads: the parameters, the lookups, a
    structure's conditional tables (:mod:`~sqlnb.workflows.dbt_structures`), AODE's
    (:mod:`~sqlnb.workflows.dbt_aode`)."""
    tables = [(f"{name}_params", lambda d: params_sql(model, name, d))]
    tables += [(f"{name}_params_{j}", lambda d, j=j: lookup_sql(model, name, j, d))
               for j, f in enumerate(model.features) if f.kind in ("categorical", "binned")]
    return tables + dbt_structures.tables(model, name) + dbt_aode.tables(model, name)


def files(model: NaiveBayes, name: str) -> dict[str, str]:
    """The parameter models and the macro ``score_<name>_trained`` of package ``sqlnb_<name>``."""
    ns = f"sqlnb_{name}"
    out = {}
    tables = derived(model, name)
    macros = [f"{{# Generated by sqlnb dbt --train from model \"{model.name}\"; do not edit: generate it again. #}}", "",
              f"{{% macro score_{name}_trained(relation, columns=none) %}}",
              "  {#- The scores of every row of relation with the parameters dbt derived from its statistics. -#}",
              "  {%- if columns is none -%}",
              "    {%- set columns = adapter.get_columns_in_relation(relation) | map(attribute='name') | list -%}",
              "  {%- endif -%}",
              f"  {{{{ return(adapter.dispatch('score_{name}_trained', '{ns}')(relation, columns)) }}}}",
              "{% endmacro %}"]
    for table, body in tables:
        macros += ["", f"{{% macro {ns}_{table}() %}}",
                   f"  {{{{ return(adapter.dispatch('{ns}_{table}', '{ns}')()) }}}}", "{% endmacro %}"]
        for adapter, dialect in ADAPTERS.items():
            macros += [f"{{% macro {adapter}__{ns}_{table}() %}}", body(dialect), "{% endmacro %}"]
        # A conditional table is downstream of the pair counts (a KDB(2) joint table reads the
        # triples only), so that a failing structure test on them skips it.
        after = f"-- depends_on: {{{{ ref('{name}_pairs') }}}}\n" if table.startswith(f"{name}_tree_") else ""
        out[f"models/train/{table}.sql"] = (f"{{{{ config(materialized='table', enabled=var('{ns}_train', true)) }}}}\n"
                                            f"{after}{{{{ {ns}.{ns}_{table}() }}}}\n")
    for adapter, dialect in ADAPTERS.items():
        macros += ["", f"{{% macro {adapter}__score_{name}_trained(relation, columns) %}}",
                   scoring_sql(model, name, dialect), "{% endmacro %}"]
    out[f"macros/score_{name}_trained.sql"] = "\n".join(macros) + "\n"
    return out
