"""Explanations: per row, the features that most moved the decision (``explain=K``,
``sqlnb score --explain K``).

A class score is a sum of terms: a base term (naive Bayes: the class log-prior; LDA and
logistic regression: the intercept) and one term per feature (naive Bayes: the feature's
log-likelihood, 0 when the value is NULL; LDA and logistic regression:
``(x_j − centre_j)·w_kj``, the centre being the one the scoring SELECT already subtracts —
a feature at its centre moves nothing). For a row with predicted class ``p`` and runner-up
``r`` (the class with the second-highest score)::

    contribution_f = term_f(p) − term_f(r)       0 when the two are equal (both −inf too)
    Σ_f contribution_f + (base(p) − base(r)) = jll_p − jll_r        (up to rounding)

in nats, on the log-odds of ``p`` against ``r``. The output adds ``reason_1 .. reason_K``
(feature names) and ``reason_1_weight .. reason_K_weight`` (their contributions): the K
features with the largest contribution *toward* the predicted class, largest first (a
signed order, not by magnitude: the reasons for the decision; when fewer than K features
favour ``p`` the last weights are ≤ 0). Ties in a contribution go to the earlier feature
in the model's order. The runner-up is the first class in sorted order, other than
``p``, whose score is the highest of the others (the tie rule of the prediction itself).

A row without a prediction (NULL probabilities: an incomplete row for LDA or logistic
regression, a row of zero likelihood) and a model of one class (no runner-up) get NULL
reasons and weights. QDA has no explanations: its score is a quadratic form in all
features together, whose share per feature is not defined.

SQL shape, after the finish's stage 4 (:class:`~sqlnb.models.finish.Extension`), portable
to every dialect the scoring SELECT runs in: stage 1 also computes every feature term per
class (``sqlnb_term_<feature>_<class>``, by index: names of any length and any label);
then one SELECT each for the predicted class index, the second-highest score, the
runner-up's index, the contributions, their ranks and the reasons. The rank of feature
``f`` is ``1 + Σ_{g<f} [c_g ≥ c_f] + Σ_{g>f} [c_g > c_f]`` — a total order, so ranks
1..F are each taken once — and ``reason_k`` is the feature whose rank is ``k``. That is
F² comparisons per row, so a model may have at most :data:`MAX_FEATURES` features.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.finish import MAX_COLUMN, Extension, class_columns

if TYPE_CHECKING:
    from sqlnb.models.base import Model

#: Most features a model may have for explanations: the ranks take F² comparisons per row
#: (40,000 at this limit; the scoring SELECT of 200 Gaussian columns and 3 classes with
#: ``explain=3`` builds and renders in about a second).
MAX_FEATURES = 200
#: Dialects whose planner inlines a subquery's columns into the SELECT around it, so that a
#: column read F times is computed F times, nested stage over stage: each explanation stage
#: reads its subquery through ``OFFSET 0``, which both treat as a barrier (SQLite's query
#: flattener leaves a subquery with OFFSET alone, PostgreSQL does not pull it up). Without
#: it SQLite took 14 s for 60 rows and 4 features (with it 0.1 s). DuckDB computes a
#: repeated expression once and Spark's optimiser merges two projections only when that
#: repeats nothing costly, so they keep the plain shape.
FENCED = ("sqlite", "postgres")
#: Helper column names (kept in the output only when the source passes through with ``*``).
TERM, CONTRIBUTION, RANK = "sqlnb_term_{j}_{k}", "sqlnb_contribution_{j}", "sqlnb_rank_{j}"
PRED_INDEX, SECOND, RUNNER_UP = "sqlnb_pred_index", "sqlnb_second_jll", "sqlnb_runner_up"


@dataclass(frozen=True)
class FeatureTerms:
    """One class score as ``base + Σ terms``, one term per feature in the model's order."""

    base: exp.Expression
    terms: tuple[exp.Expression, ...]


def reason_columns(k: int) -> list[str]:
    """``reason_1 .. reason_k`` then ``reason_1_weight .. reason_k_weight``."""
    return [f"reason_{i}" for i in range(1, k + 1)] + [f"reason_{i}_weight" for i in range(1, k + 1)]


def check_explain(model: "Model", k: object) -> int:
    """``k`` as the number of reasons, or a one-line error (also QDA's, via
    :meth:`~sqlnb.models.base.Model.feature_terms`)."""
    n = len(model.feature_names)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral):
        if isinstance(k, float) and math.isfinite(k) and k == int(k):
            k = int(k)
        else:
            raise SqlnbError(f"explain (--explain) is a whole number of reasons per row, not {k!r}")
    k = int(k)
    if k < 1:
        raise SqlnbError(f"explain (--explain) must be at least 1 (reasons per row), not {k}; "
                         "leave it out for no explanations")
    if k > n:
        raise SqlnbError(f"explain (--explain) asks for {k} reasons per row, but the model has {n} "
                         f"feature{'s' if n != 1 else ''}; give at most {n}")
    if n > MAX_FEATURES:
        raise SqlnbError(f"explanations rank every feature against every other one (F² comparisons per row) and "
                         f"this model has {n} features, past the limit of {MAX_FEATURES}; fit a model on fewer "
                         "columns to explain it")
    return k


def explanation(model: "Model", k: int, input_types: Mapping[str, str] | None = None,
                dialect: str | None = None) -> Extension:
    """The stages that add ``reason_*`` columns to ``model``'s scoring SELECT (module
    docstring); ``input_types`` and ``dialect`` as for :meth:`Model.class_terms`."""
    k = check_explain(model, k)
    names = model.feature_names
    classes = model.classes
    per_class = model.feature_terms(input_types, dialect)
    F, K = len(names), len(classes)
    jll = [sql.col(n) for n in class_columns("jll_", classes)]
    inputs = tuple((TERM.format(j=j, k=c), per_class[c].terms[j].copy()) for j in range(F) for c in range(K))
    p, r = sql.col(PRED_INDEX), sql.col(RUNNER_UP)
    one, zero = exp.Literal.number(1), exp.Literal.number(0)

    def eq(a: exp.Expression, b: exp.Expression) -> exp.Expression:
        return exp.EQ(this=a.copy(), expression=b.copy())

    def index(c: int) -> exp.Expression:
        return exp.Literal.number(c)

    def by_class(idx: exp.Expression, j: int) -> exp.Expression:
        """Feature ``j``'s term in the class whose index is ``idx``."""
        return exp.Case(ifs=[exp.If(this=eq(idx, index(c)), true=sql.col(TERM.format(j=j, k=c)))
                             for c in range(K)])

    fence = dialect in FENCED

    def stage(inner: exp.Select, alias: str, columns: list[tuple[str, exp.Expression]]) -> exp.Select:
        return _stage(inner, alias, columns, fence)

    def wrap(stage4: exp.Select) -> exp.Select:
        # The predicted class: as the finish's prediction (NULL without a posterior, else
        # the first class whose score is the maximum).
        ev = sql.col("log_evidence")
        undefined = exp.Or(this=exp.Is(this=ev.copy(), expression=exp.Null()),
                           expression=eq(ev, sql.dbl(-math.inf)))
        pred = exp.Case(ifs=[exp.If(this=undefined, true=exp.null())]
                        + [exp.If(this=eq(x, sql.col(MAX_COLUMN)), true=index(c)) for c, x in enumerate(jll)])
        s = stage(stage4, "e1", [(PRED_INDEX, pred)])
        # The runner-up: the highest score among the other classes (the predicted one
        # masked as −inf; a tie with −inf itself is told apart by the index test below),
        # then the first other class that has it.
        masked = [exp.Case(ifs=[exp.If(this=eq(p, index(c)), true=sql.dbl(-math.inf))], default=x.copy())
                  for c, x in enumerate(jll)]
        s = stage(s, "e2", [(SECOND, sql.greatest(masked) if K > 1 else exp.null())])
        runner = exp.Case(ifs=[exp.If(this=exp.Is(this=p.copy(), expression=exp.Null()), true=exp.null())]
                          + [exp.If(this=exp.and_(exp.NEQ(this=p.copy(), expression=index(c)),
                                                  eq(x, sql.col(SECOND))), true=index(c))
                             for c, x in enumerate(jll)])
        s = stage(s, "e3", [(RUNNER_UP, runner)])
        contributions = []
        for j in range(F):
            tp, tr = by_class(p, j), by_class(r, j)
            contributions.append((CONTRIBUTION.format(j=j), exp.Case(
                ifs=[exp.If(this=eq(tp, tr), true=sql.dbl(0.0))], default=exp.Sub(this=tp, expression=tr))))
        s = stage(s, "e4", contributions)
        c = [sql.col(CONTRIBUTION.format(j=j)) for j in range(F)]
        ranks = []
        for j in range(F):
            above = [exp.Case(ifs=[exp.If(this=(exp.GTE if g < j else exp.GT)(this=c[g].copy(), expression=c[j].copy()),
                                          true=one.copy())], default=zero.copy())
                     for g in range(F) if g != j]
            ranks.append((RANK.format(j=j), sql.add([one.copy(), *above])))
        s = stage(s, "e5", ranks)
        no_reason = exp.Is(this=r.copy(), expression=exp.Null())
        reasons, weights = [], []
        for i in range(1, k + 1):
            hit = [eq(sql.col(RANK.format(j=j)), exp.Literal.number(i)) for j in range(F)]
            reasons.append((f"reason_{i}", exp.Case(ifs=[exp.If(this=no_reason.copy(), true=exp.null())] + [
                exp.If(this=h, true=exp.Literal.string(name)) for h, name in zip(hit, names)])))
            weights.append((f"reason_{i}_weight", exp.Case(ifs=[exp.If(this=no_reason.copy(), true=exp.null())] + [
                exp.If(this=h.copy(), true=c[j].copy()) for j, h in enumerate(hit)])))
        return stage(s, "e6", reasons + weights)

    helpers = (PRED_INDEX, SECOND, RUNNER_UP, *(CONTRIBUTION.format(j=j) for j in range(F)),
               *(RANK.format(j=j) for j in range(F)))
    return Extension(inputs, wrap, tuple(reason_columns(k)), helpers)


def _stage(inner: exp.Select, alias: str, columns: list[tuple[str, exp.Expression]],
           fence: bool = False) -> exp.Select:
    """``SELECT *, columns FROM (inner) AS alias``; with ``fence``, ``inner`` ends with
    ``OFFSET 0`` (module docstring)."""
    if fence:
        inner = inner.offset(0, copy=False)
    return exp.select(exp.Star(), *[exp.Alias(this=e, alias=sql.ident(n)) for n, e in columns]).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident(alias))), copy=False)
