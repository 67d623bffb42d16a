"""The wide shape: Gaussian and Bernoulli columns as lists, at fit and at score (DuckDB).

A class score is a sum of one term per feature. Written term by term, a model of
thousands of columns makes a SELECT whose size, and DuckDB's time to bind and optimise
it, grow faster than the number of columns: 1,000 Gaussian columns x 2 classes took 9 s to
score 2,000 rows, 2,000 columns took four times that, and 10,000 would take most of an
hour. From :data:`WIDE_MIN` columns of a family on, DuckDB's scoring SELECT
writes that family's terms as a few ``list_dot_product`` per class over lists built once per
row in the prelude (:meth:`NaiveBayes.score_prelude`), so the query grows linearly.

**Bernoulli** (presence ``x > t``), as scikit-learn's ``BernoulliNB`` computes it::

    Σ_j [x_j not NULL] · ln(1 − p_cj)  +  Σ_j [x_j > t] · (ln p_cj − ln(1 − p_cj))

two dot products per class over the lists ``on_j`` (1 when x_j is a value, 0 when NULL:
a missing feature contributes no term) and ``present_j`` (0 when NULL).

**Gaussian**: each column is read as ``d_j = x_j − r_j`` about a reference ``r_j``, the
mean of its class means. With ``δ_cj = θ_cj − r_j``::

    −½ ln(2π σ²_cj) − (x_j − θ_cj)² / (2σ²_cj)
        = [−½ ln(2π σ²_cj) − δ²_cj / (2σ²_cj)]  −  d²_j · 1/(2σ²_cj)  +  d_j · δ_cj / σ²_cj

three dot products per class over ``on_j``, ``d²_j`` and ``d_j`` (0 when NULL or NaN).
Bernoulli columns are listed as ``x_j − t_j`` too, and presence is ``x_j − t_j > 0``.
Expanding the square about 0 would cancel catastrophically for a column whose values
are far from 0 relative to its spread (x ≈ 1000 ± 1: terms of 10⁶ to give a difference of
1); about ``r_j`` the three parts are of the size of ``(x − θ)²/σ²`` and ``δ²/σ²``, so
the score keeps the per-term shape's digits (tests compare with scikit-learn to 1e-9).

**Fitting** (:func:`long_statistics_query`): the one-pass aggregation writes
``SUM(x − K)`` and ``SUM((x − K)·(x − K))`` for each Gaussian column, and DuckDB's
planner time grows quadratically with the number of such repeated sub-expressions in one
SELECT: 10,000 Gaussian columns × 2,000 rows took 345 s to fit, nearly all of it that
query. From :data:`WIDE_MIN` columns (:data:`EXACT_MIN` under :func:`exact_lists`, which
the estimators turn on for up to ``EXACT_ROWS`` rows: :func:`long_min`) the per-class
sums come instead from the design card's long shape: each row's values as one list
``[x_1 − K_1, …]`` (each column written once), unnested to (class, column number, value)
and grouped by class and column number; the sums are the same, added in another order.

**Gaussian, exact** (from :data:`EXACT_MIN` to :data:`WIDE_MIN` columns): expanding the
square loses digits when a variance is tiny next to the spread of the class means. On
scikit-learn's digits a pixel constant in one class gets the variance floor ε ≈ 2e-8 as
variance, so ``1/(2σ²) ≈ 2.5e7`` and the three parts above are of size 10⁷ to give a term
near 0: the probabilities came 2.8e-8 from scikit-learn's. Below :data:`WIDE_MIN` each
term is computed as the per-term shape does, ``(x_j − θ_cj)²`` then times ``1/(2σ²_cj)``,
over the row's list of values zipped with the class's means::

    Σ_j [x_j not missing] · (−½ ln(2π σ²_cj))  −  Σ_j (x_j − θ_cj)² · 1/(2σ²_cj)

two dot products per class, the squares from ``list_transform(list_zip(x, θ_c), …)`` (0
for a missing value). The per-term shape's DuckDB SELECT for digits (64 columns × 10
classes) was 371 kB, 2.4 s to build and render and most of 6.7 s for DuckDB to bind; this
one is 47 kB, nearly all of it the packed coefficients (benchmarks/README.md, "scikit-learn
estimators"). The lambda costs more per row than the per-term arithmetic, so the shape is
used only when asked (:func:`exact_lists`: the estimators, for the rows they score).

The shape is used only where every coefficient is finite (an MLE probability of 0 or 1,
or a subnormal variance, needs the per-term forms' special cases). A value of ±inf
makes the row's scores NaN here (−inf · inf), so its probabilities, prediction and
``log_evidence`` are NULL; the per-term shape gives the same NULL probabilities and
prediction, with ``log_evidence`` −inf.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.models.naive_bayes.families import REGISTRY, Feature
from sqlnb.source import Source
from sqlnb.sql.types import is_float

#: Columns of one family (Gaussian or Bernoulli) from which DuckDB scores them as dot
#: products (module docstring). Below it the per-term shape is kept, and with it the SQL
#: of every model in ``sql/``.
WIDE_MIN = 256
#: Under :func:`exact_lists`, the Gaussian columns from which (below :data:`WIDE_MIN`) DuckDB
#: scores them in the exact list shape, and the Bernoulli columns from which it scores them
#: as dot products (module docstring).
EXACT_MIN = 8
_EXACT = contextvars.ContextVar("sqlnb_exact_lists", default=False)


@contextlib.contextmanager
def exact_lists(on: bool = True):
    """``with exact_lists():`` scoring SELECTs built inside write Gaussian columns in the
    exact list shape and Bernoulli columns as dot products from :data:`EXACT_MIN` columns
    (not :data:`WIDE_MIN`). Off by default: the list lambdas cost more per row than the
    per-term arithmetic (predict_proba of 1M rows x 20 columns x 3 classes: 8.7 s against
    4.5 s, load 20), and far less to bind (2,000 rows x 64 columns x 10 classes: 0.44 s
    against 10.8 s), so the shape pays up to about 100,000 rows; the estimators, which know the rows they
    score, turn it on there (``sqlnb.estimators.base.EXACT_ROWS``). The library keeps
    the per-term shape, and with it the SQL of every model in ``sql/``."""
    token = _EXACT.set(on)
    try:
        yield
    finally:
        _EXACT.reset(token)


#: The prelude's list columns: one list per row for each family.
GAUSS_COLUMN, BERN_COLUMN = "sqlnb_gaussian", "sqlnb_bernoulli"


def long_min() -> int:
    """The columns from which fitting reads Gaussian and Bernoulli sums in the long shape:
    :data:`WIDE_MIN`, or :data:`EXACT_MIN` under :func:`exact_lists` (the estimators, for
    up to ``EXACT_ROWS`` rows: one aggregate per column and class costs DuckDB more to
    plan than unnesting a few hundred thousand values costs to run)."""
    return EXACT_MIN if _EXACT.get() else WIDE_MIN


def long_features(features: Sequence[Feature], shifts: Mapping[str, float] | None) -> list[Feature]:
    """The features whose training sums come from :func:`long_statistics_query`: the
    Gaussian columns (aggregated about a shift) and Bernoulli columns when there are at
    least :func:`long_min` of them together, else none."""
    chosen = [f for f in features if f.bag is None and (
        (f.kind == "gaussian" and shifts is not None and f.name in shifts) or f.kind == "bernoulli")]
    return chosen if len(chosen) >= long_min() else []


def long_statistics_query(source: Source, label: str, features: Sequence[Feature], shifts: Mapping[str, float],
                          group: exp.Expression | None = None) -> exp.Select:
    """``(class, [group,] column number, COUNT(*), COUNT(v), SUM(v), SUM(v·v),
    COUNT_IF(v > 0))`` for every class and listed column, where ``v`` is ``x − K`` for a
    Gaussian column (its shift) and ``x − t`` for a Bernoulli column (its threshold):
    the sums :func:`long_rows` turns into the one-pass query's aggregates."""
    values = _differences(features, [shifts[f.name] if f.kind == "gaussian" else f.threshold for f in features])
    keys = [("k", sql.col(label, "src"))] + ([("g", group.copy())] if group is not None else [])
    return sql.long_select(source.from_("src"), keys, values, lambda v: [
        exp.Count(this=exp.Star()), exp.Count(this=v.copy()), exp.Sum(this=v.copy()),
        exp.Sum(this=exp.Mul(this=v.copy(), expression=v.copy())),
        exp.CountIf(this=exp.GT(this=v.copy(), expression=sql.dbl(0.0)))])


def long_shift_query(source: Source, features: Sequence[Feature], limit: int) -> exp.Select:
    """``(column number, AVG(x), STDDEV_POP(x))`` over the first ``limit`` rows: the
    shift query (fit.gaussian_shifts) in the long shape."""
    values = exp.Array(expressions=[REGISTRY["gaussian"].value(f) for f in features])
    return sql.long_select(source.from_("src"), [], values,
                           lambda v: [exp.Avg(this=v.copy()), exp.StddevPop(this=v.copy())], limit)


def long_rows(features: Sequence[Feature], rows: Sequence[Sequence[Any]], grouped: bool) -> dict[tuple, tuple]:
    """Per (class[, group]): the class's row count and, per feature name, the
    aggregates the one-pass query would give it (``COUNT, SUM(d), SUM(d²)`` for a
    Gaussian column; ``COUNT(x), COUNT_IF(x > t)`` and, for a float column, a sum that
    is NaN or infinite when a value is, for a Bernoulli column)."""
    width = 3 if grouped else 2
    by: dict[tuple, list] = {}
    for r in rows:
        key, j = tuple(r[:width - 1]), r[width - 1]
        cells = by.setdefault(key, [None] * (len(features) + 1))
        n, count, s1, s2, pos = r[width:]
        cells[0] = n
        f = features[j]
        cells[j + 1] = ((count, s1, s2) if f.kind == "gaussian"
                        else (count, pos, s1) if is_float(f.sql_type) else (count, pos))
    return {key: (cells[0], {f.name: agg for f, agg in zip(features, cells[1:])}) for key, cells in by.items()}


def wide_features(features: Sequence[Feature], params: dict, kind: str) -> list[Feature]:
    """The ``kind`` features scored in the wide shape: all of them when there are at least
    :data:`WIDE_MIN` (:data:`EXACT_MIN` under :func:`exact_lists`) and every coefficient is
    finite, else none."""
    chosen = [f for f in features if f.kind == kind and f.bag is None]
    if len(chosen) < (EXACT_MIN if _EXACT.get() else WIDE_MIN):
        return []
    coefficients = _bernoulli if kind == "bernoulli" else _gaussian if len(chosen) >= WIDE_MIN else _exact
    with np.errstate(all="ignore"):
        if not all(np.all(np.isfinite(c)) for f in chosen for c in coefficients(params[f.name], f)):
            return []
    return chosen


def prelude(gauss: Sequence[Feature], bern: Sequence[Feature], params: dict) -> list[tuple[str, exp.Expression]]:
    """The per-row lists the wide terms read: ``x_j − r_j`` for Gaussian columns (``r_j``
    the mean of the class means) and ``x_j − t_j`` for Bernoulli columns (``t_j`` the
    threshold: ``x > t`` exactly when ``x − t > 0``, as IEEE subtraction of distinct
    doubles is never 0 and keeps the sign). NULL stays NULL; NaN stays NaN, and the
    lambdas of :func:`terms` read both as missing.

    Each element mentions its column once and holds no ``CASE`` or ``NULLIF``: DuckDB's
    planner time grows quadratically with repeated sub-expressions in one list (10,000
    Bernoulli columns as ``CASE WHEN x IS NULL … WHEN x > t …`` took 62 s to score 2,000
    rows, nearly all of it planning; ``NULLIF(x, NaN) − r`` over 5,000 columns took 43 s
    to plan; ``x − r`` 0.3 s)."""
    out = []
    if gauss and exact(gauss):
        out.append((GAUSS_COLUMN, exp.Array(expressions=[REGISTRY["gaussian"].value(f) for f in gauss])))
    elif gauss:
        out.append((GAUSS_COLUMN, _differences(gauss, [_reference(params[f.name]) for f in gauss])))
    if bern:
        out.append((BERN_COLUMN, _differences(bern, [f.threshold for f in bern])))
    return out


def _differences(features: Sequence[Feature], offsets: Sequence[float]) -> exp.Expression:
    return exp.Array(expressions=[exp.Sub(this=REGISTRY[f.kind].value(f), expression=sql.dbl(float(r)))
                                  for f, r in zip(features, offsets)])


def terms(gauss: Sequence[Feature], bern: Sequence[Feature], params: dict, k: int) -> list[exp.Expression]:
    """Class ``k``'s wide terms: one dot product per list and coefficient vector."""
    out = []
    if gauss and exact(gauss):
        x = sql.col(GAUSS_COLUMN, "src")
        const, mean, half = (np.array(c) for c in zip(*(_exact(params[f.name], f, k) for f in gauss)))
        zipped = exp.Anonymous(this="list_zip", expressions=[x, sql.packed_list([float(m) for m in mean], "DOUBLE")])
        out += [_dot(_on(x), const), exp.Neg(this=_dot(_squares(zipped), half))]
    elif gauss:
        d = sql.col(GAUSS_COLUMN, "src")
        const, quad, lin = (np.array(c) for c in zip(*(_gaussian(params[f.name], f, k) for f in gauss)))
        out += [_dot(_on(d), const), exp.Neg(this=_dot(_mapped(d, lambda v: exp.Mul(this=v, expression=v.copy())), quad)),
                _dot(_mapped(d, lambda v: v), lin)]
    if bern:
        x = sql.col(BERN_COLUMN, "src")
        absent, slope = (np.array(c) for c in zip(*(_bernoulli(params[f.name], f, k) for f in bern)))
        out += [_dot(_on(x), absent), _dot(_mapped(x, lambda v: exp.Case(
            ifs=[exp.If(this=exp.GT(this=v, expression=sql.dbl(0.0)), true=sql.dbl(1.0))], default=sql.dbl(0.0))), slope)]
    return out


def exact(gauss: Sequence[Feature]) -> bool:
    """Whether the listed Gaussian columns take the exact shape (fewer than
    :data:`WIDE_MIN`) rather than the expanded square."""
    return len(gauss) < WIDE_MIN


def _exact(params: Any, f: Feature, k: int | None = None) -> tuple:
    """(−½ ln(2π σ²), θ, 1/(2σ²)) of class ``k`` (all classes when None): the per-term
    shape's coefficients (``Gaussian.term``)."""
    mean, var = (np.asarray(p, dtype=float) for p in params)
    if k is not None:
        mean, var = mean[k], var[k]
    with np.errstate(all="ignore"):
        return (-0.5 * np.log(2.0 * math.pi * var), mean, 0.5 / var)


def _squares(zipped: exp.Expression) -> exp.Expression:
    """``list_transform(list_zip(x, θ), p -> (p₁ − p₂)·(p₁ − p₂))``, 0 where ``x`` is
    missing (``list_dot_product`` refuses NULL, and NaN is no value)."""
    def square(p: exp.Expression) -> exp.Expression:
        x, m = (exp.Anonymous(this="struct_extract", expressions=[p.copy(), exp.Literal.number(i)]) for i in (1, 2))
        d = exp.Sub(this=x, expression=m)
        return exp.Case(ifs=[exp.If(this=_missing(x.copy()), true=sql.dbl(0.0))],
                        default=exp.Mul(this=sql.paren(d), expression=sql.paren(d.copy())))
    return exp.Anonymous(this="list_transform", expressions=[zipped, _lambda(square, "p")])


def _reference(params: Any) -> float:
    """``r_j``: the mean of the class means (finite when they are)."""
    return float(np.mean(np.asarray(params[0], dtype=float)))


def _gaussian(params: Any, f: Feature, k: int | None = None) -> tuple:
    """(constant, 1/(2σ²), δ/σ²) of class ``k`` (all classes when None)."""
    mean, var = (np.asarray(p, dtype=float) for p in params)
    if k is not None:
        mean, var = mean[k], var[k]
    delta = mean - _reference(params)
    with np.errstate(all="ignore"):
        return (-0.5 * np.log(2.0 * math.pi * var) - delta * delta / (2.0 * var), 0.5 / var, delta / var)


def _bernoulli(params: Any, f: Feature, k: int | None = None) -> tuple:
    """(ln(1 − p), ln p − ln(1 − p)) of class ``k`` (all classes when None)."""
    flp, neg = (np.asarray(p, dtype=float) for p in params)
    if k is not None:
        flp, neg = flp[k], neg[k]
    with np.errstate(all="ignore"):
        return neg, flp - neg


def _lambda(body, name: str = "v") -> exp.Lambda:
    v = sql.ident(name)
    return exp.Lambda(this=body(exp.Column(this=v)), expressions=[v.copy()])


def _missing(v: exp.Expression) -> exp.Expression:
    """``v IS NULL OR ISNAN(v)``: NULL and NaN are missing values (NaN, as at fit, is no
    value; DuckDB sorts it above every number, so ``NaN > t`` would be true)."""
    return sql.missing(v)


def _mapped(lst: exp.Expression, f) -> exp.Expression:
    """``list_transform(lst, lambda v: f(v))``, 0 where ``v`` is missing."""
    return exp.Anonymous(this="list_transform", expressions=[lst.copy(), _lambda(
        lambda v: exp.Case(ifs=[exp.If(this=_missing(v), true=sql.dbl(0.0))], default=f(v.copy())))])


def _on(lst: exp.Expression) -> exp.Expression:
    """1 where the list holds a value, 0 where it is missing."""
    return exp.Anonymous(this="list_transform", expressions=[lst.copy(), _lambda(
        lambda v: exp.Case(ifs=[exp.If(this=_missing(v), true=sql.dbl(0.0))], default=sql.dbl(1.0)))])


def _dot(lst: exp.Expression, weights: np.ndarray) -> exp.Expression:
    """``list_dot_product(lst, weights)``, the weights as one packed literal
    (:func:`sqlnb.sql.packed_list`: at 10,000 columns, 5 coefficient vectors per class
    would otherwise be 100,000 literal nodes to build and render)."""
    return exp.Anonymous(this="list_dot_product", expressions=[lst, sql.packed_list([float(w) for w in weights], "DOUBLE")])
