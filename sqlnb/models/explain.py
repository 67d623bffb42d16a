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
reasons and weights. The predicted class ``p`` is the one in ``prediction``: under a
decision rule (:mod:`sqlnb.models.decision`) the class the rule decides (computed again
here with the rule's own tests, so it is ``prediction`` whether or not that is an output),
and a rejected row gets NULL reasons. When the rule decides a class other than the most
probable one, the runner-up is the most probable class and the weights sum to a negative
log-odds: the reasons are the features that favour the decided class all the same. A model
with a calibrator refuses explanations (its scores are not sums over the features). QDA has
no explanations: its score is a quadratic form in all
features together, whose share per feature is not defined.

SQL shape, after the finish's stage 4 (:class:`~sqlnb.models.finish.Extension`), portable
to every dialect the scoring SELECT runs in (run-tested in DuckDB, SQLite, PostgreSQL and
Spark): stage 1 also computes every feature term per class (``sqlnb_term_<feature>_<class>``,
by index: names of any length and any label); then a chain of CTEs, one SELECT each for the
predicted class index, the second-highest score, the runner-up's index and the
contributions, two per reason and one for the output columns. Reason ``i`` is a selection
step in the order (contribution descending, feature index ascending): its weight is the
largest contribution among the features after reason ``i − 1`` in that order, its feature
the first of those with that weight — O(K·F) comparisons per row. (Ranking every feature
against every other, F² comparisons, made the SELECT of 200 features 30 s to build and
render and 12× slower to run in DuckDB.) Two stages per reason make the chain long, so K is
at most :data:`MAX_REASONS`. With the source's columns unknown (SQL exported without a
connection) the helper columns ``sqlnb_*`` stay in the output, like the finish's own.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, Mapping

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.finish import MAX_COLUMN, SHIFTED_PREFIX, SUM_COLUMN, Extension, class_columns

#: Most reasons per row: each is two SELECTs of O(F) expressions in the chain.
MAX_REASONS = 16
#: Dialects whose planner inlines a subquery's columns into the SELECT around it, so that a
#: column read F times is computed F times, stage over stage: each CTE of the explanation
#: chain ends with ``OFFSET 0``, which both treat as a barrier (SQLite's query flattener
#: leaves a subquery with OFFSET alone, PostgreSQL does not pull it up). Without it SQLite
#: took 14 s for 60 rows and 4 features (with it 0.1 s). DuckDB computes a
#: repeated expression once and Spark's optimiser merges two projections only when that
#: repeats nothing costly, so they keep the plain shape.
FENCED = ("sqlite", "postgres")
#: Helper column names (kept in the output only when the source passes through with ``*``).
TERM, CONTRIBUTION = "sqlnb_term_{j}_{k}", "sqlnb_contribution_{j}"
WEIGHT, TAKEN = "sqlnb_weight_{i}", "sqlnb_taken_{i}"
PRED_INDEX, SECOND, RUNNER_UP = "sqlnb_pred_index", "sqlnb_second_jll", "sqlnb_runner_up"
#: Before the names of a decision rule's helper columns computed again for the explained
#: class (the rule's own stages come later and only when ``prediction`` is an output).
RULE_PREFIX = "sqlnb_explain_"


@dataclass(frozen=True)
class FeatureTerms:
    """One class score as ``base + Σ terms``, one term per feature in the model's order."""

    base: exp.Expression
    terms: tuple[exp.Expression, ...]


def reason_columns(k: int) -> list[str]:
    """``reason_1 .. reason_k`` then ``reason_1_weight .. reason_k_weight``."""
    return [f"reason_{i}" for i in range(1, k + 1)] + [f"reason_{i}_weight" for i in range(1, k + 1)]


def check_explain(model: Any, k: object) -> int:
    """``k`` as the number of reasons, or a one-line error. (QDA's comes from
    :meth:`~sqlnb.models.base.Model.feature_terms`, when the SELECT is built.)"""
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
    if k > MAX_REASONS:
        raise SqlnbError(f"explain (--explain) asks for {k} reasons per row, past the limit of {MAX_REASONS} "
                         "(each is a step of the scoring SELECT); ask for fewer")
    return k


def explanation(model: Any, k: int, input_types: Mapping[str, str] | None = None,
                dialect: str | None = None) -> Extension:
    """The stages that add ``reason_*`` columns to the scoring SELECT of ``model`` (a
    :class:`~sqlnb.models.base.Model`; module docstring); ``input_types`` and ``dialect``
    as for :meth:`~sqlnb.models.base.Model.class_terms`."""
    k = check_explain(model, k)
    rule = getattr(model, "decision", None)
    rule = None if rule is None or rule.is_default else rule
    names = model.feature_names
    classes = model.classes
    per_class = model.feature_terms(input_types, dialect)
    F, K = len(names), len(classes)
    jll = [sql.col(n) for n in class_columns("jll_", classes)]
    inputs = tuple((TERM.format(j=j, k=c), per_class[c].terms[j].copy()) for j in range(F) for c in range(K))
    p, r = sql.col(PRED_INDEX), sql.col(RUNNER_UP)

    def eq(a: exp.Expression, b: exp.Expression) -> exp.Expression:
        return exp.EQ(this=a.copy(), expression=b.copy())

    def index(c: int) -> exp.Expression:
        return exp.Literal.number(c)

    def by_class(idx: exp.Expression, j: int) -> exp.Expression:
        """Feature ``j``'s term in the class whose index is ``idx``."""
        return exp.Case(ifs=[exp.If(this=eq(idx, index(c)), true=sql.col(TERM.format(j=j, k=c)))
                             for c in range(K)])

    def wrap(stage4: exp.Select) -> exp.Select:
        steps = _Steps(stage4, fence=dialect in FENCED)
        stage = steps.add
        # The predicted class: as the finish's prediction (NULL without a posterior, else
        # the first class whose score is the maximum), or under a decision rule the class
        # the rule's `prediction` holds (NULL for a rejected row), by the rule's own tests
        # over the same probabilities.
        ev = sql.col("log_evidence")
        undefined = exp.Or(this=exp.Is(this=ev.copy(), expression=exp.Null()),
                           expression=eq(ev, sql.dbl(-math.inf)))
        argmax = [exp.If(this=eq(x, sql.col(MAX_COLUMN)), true=index(c)) for c, x in enumerate(jll)]
        if rule is None:
            pred = exp.Case(ifs=[exp.If(this=undefined, true=exp.null())] + argmax)
        else:
            probas = [exp.Div(this=sql.col(n), expression=sql.col(SUM_COLUMN))
                      for n in class_columns(SHIFTED_PREFIX, classes)]
            for step in rule.stage_columns(probas, RULE_PREFIX):
                stage(step)
            pred = rule.decided_index(undefined, argmax, probas, RULE_PREFIX)
        stage([(PRED_INDEX, pred)])
        # The runner-up: the highest score among the other classes (the predicted one
        # masked as −inf; a tie with −inf itself is told apart by the index test below),
        # then the first other class that has it.
        masked = [exp.Case(ifs=[exp.If(this=eq(p, index(c)), true=sql.dbl(-math.inf))], default=x.copy())
                  for c, x in enumerate(jll)]
        stage([(SECOND, sql.greatest(masked) if K > 1 else exp.null())])
        runner = exp.Case(ifs=[exp.If(this=exp.Is(this=p.copy(), expression=exp.Null()), true=exp.null())]
                          + [exp.If(this=exp.and_(exp.NEQ(this=p.copy(), expression=index(c)),
                                                  eq(x, sql.col(SECOND))), true=index(c))
                             for c, x in enumerate(jll)])
        stage([(RUNNER_UP, runner)])
        contributions = []
        for j in range(F):
            tp, tr = by_class(p, j), by_class(r, j)
            contributions.append((CONTRIBUTION.format(j=j), exp.Case(
                ifs=[exp.If(this=eq(tp, tr), true=sql.dbl(0.0))], default=exp.Sub(this=tp, expression=tr))))
        stage(contributions)
        c = [sql.col(CONTRIBUTION.format(j=j)) for j in range(F)]
        # The i-th reason: the largest contribution among the features not yet taken, i.e.
        # those after the last one taken in the order (contribution desc, feature index asc);
        # −inf stands for a taken one (an explained row's contributions are all > −inf: its
        # predicted class has a finite score, so no term of it is −inf).
        weight, taken = None, None
        for i in range(1, k + 1):
            if weight is None:
                left = [None] * F
            else:
                left = [exp.or_(exp.LT(this=c[j].copy(), expression=weight.copy()),
                                exp.and_(eq(c[j], weight), exp.GT(this=index(j), expression=taken.copy())))
                        for j in range(F)]
            best = sql.greatest([c[j].copy() if cond is None else
                                 exp.Case(ifs=[exp.If(this=cond.copy(), true=c[j].copy())], default=sql.dbl(-math.inf))
                                 for j, cond in enumerate(left)])
            stage([(WEIGHT.format(i=i), best)])
            weight = sql.col(WEIGHT.format(i=i))
            hit = [eq(c[j], weight) if cond is None else exp.and_(cond.copy(), eq(c[j], weight))
                   for j, cond in enumerate(left)]
            stage([(TAKEN.format(i=i), exp.Case(ifs=[exp.If(this=h, true=index(j)) for j, h in enumerate(hit)]))])
            taken = sql.col(TAKEN.format(i=i))
        no_reason = exp.Is(this=r.copy(), expression=exp.Null())
        reasons, weights = [], []
        for i in range(1, k + 1):
            taken = sql.col(TAKEN.format(i=i))
            reasons.append((f"reason_{i}", exp.Case(ifs=[exp.If(this=no_reason.copy(), true=exp.null())] + [
                exp.If(this=eq(taken, index(j)), true=exp.Literal.string(name)) for j, name in enumerate(names)])))
            weights.append((f"reason_{i}_weight", exp.Case(ifs=[exp.If(this=no_reason.copy(), true=exp.null())],
                                                           default=sql.col(WEIGHT.format(i=i)))))
        stage(reasons + weights)
        return steps.select()

    helpers = (*(rule.helper_columns(RULE_PREFIX) if rule is not None else ()),
               PRED_INDEX, SECOND, RUNNER_UP, *(CONTRIBUTION.format(j=j) for j in range(F)),
               *(n.format(i=i) for i in range(1, k + 1) for n in (WEIGHT, TAKEN)))
    return Extension(inputs, wrap, tuple(reason_columns(k)), helpers)


class _Steps:
    """The explanation stages as a chain of CTEs over stage 4, each ``SELECT *, columns``
    from the one before: flat, where nested subqueries would be two levels per reason
    (SQLite's parser overflows its stack past about 40, sqlglot's renderer Python's
    recursion limit). The SELECT the finish reads from holds them in its WITH clause."""

    def __init__(self, first: exp.Select, fence: bool):
        self.steps: list[exp.Select] = [first]
        self.fence = fence

    @staticmethod
    def name(i: int) -> str:
        return f"sqlnb_explain_{i}"

    def add(self, columns: list[tuple[str, exp.Expression]]) -> None:
        prev = exp.Table(this=sql.ident(self.name(len(self.steps) - 1)))
        self.steps.append(exp.select(exp.Star(), *[exp.Alias(this=e, alias=sql.ident(n)) for n, e in columns])
                          .from_(prev, copy=False))

    def select(self) -> exp.Select:
        """The last step, with the others as CTEs (each ending with ``OFFSET 0`` when fenced)."""
        ctes = [exp.CTE(this=body.offset(0, copy=False) if self.fence else body,
                        alias=exp.TableAlias(this=sql.ident(self.name(i))))
                for i, body in enumerate(self.steps[:-1])]
        out = self.steps[-1]
        out.set("with_", exp.With(expressions=ctes))
        return out
