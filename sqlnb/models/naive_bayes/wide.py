"""The wide shape: Gaussian and Bernoulli class terms as dot products over lists (DuckDB).

A class score is a sum of one term per feature. Written term by term, a model of
thousands of columns makes a SELECT whose size, and DuckDB's time to bind and optimise
it, grow faster than the number of columns: 1,000 Gaussian columns x 2 classes took 9 s to
score 2,000 rows, 2,000 columns took four times that, and 10,000 would take most of an
hour (issue 16). From :data:`WIDE_MIN` columns of a family on, DuckDB's scoring SELECT
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
Expanding the square about 0 would cancel catastrophically for a column whose values
are far from 0 relative to its spread (x ≈ 1000 ± 1: terms of 10⁶ to give a difference of
1); about ``r_j`` the three parts are of the size of ``(x − θ)²/σ²`` and ``δ²/σ²``, so
the score keeps the per-term shape's digits (tests compare with scikit-learn to 1e-9).

The shape is used only where every coefficient is finite (an MLE probability of 0 or 1,
or a subnormal variance, needs the per-term forms' special cases). A value of ±inf
makes the row's scores NaN here (−inf · inf), so its probabilities, prediction and
``log_evidence`` are NULL; the per-term shape gives the same NULL probabilities and
prediction, with ``log_evidence`` −inf.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.models.naive_bayes.families import REGISTRY, Feature

#: Columns of one family (Gaussian or Bernoulli) from which DuckDB scores them as dot
#: products (module docstring). Below it the per-term shape is kept, and with it the SQL
#: of every model in ``sql/``.
WIDE_MIN = 256
#: The prelude's list columns: one list per row for each family.
GAUSS_COLUMN, BERN_COLUMN = "sqlnb_gaussian", "sqlnb_bernoulli"


def wide_features(features: Sequence[Feature], params: dict, kind: str) -> list[Feature]:
    """The ``kind`` features scored in the wide shape: all of them when there are at least
    :data:`WIDE_MIN` and every coefficient is finite, else none."""
    chosen = [f for f in features if f.kind == kind and f.bag is None]
    if len(chosen) < WIDE_MIN:
        return []
    coefficients = _gaussian if kind == "gaussian" else _bernoulli
    with np.errstate(all="ignore"):
        if not all(np.all(np.isfinite(c)) for f in chosen for c in coefficients(params[f.name], f)):
            return []
    return chosen


def prelude(gauss: Sequence[Feature], bern: Sequence[Feature], params: dict) -> list[tuple[str, exp.Expression]]:
    """The per-row lists the wide terms read: ``d_j`` (NULL when missing) for Gaussian
    columns, presence as 1/0 (NULL when missing) for Bernoulli columns."""
    out = []
    if gauss:
        fam = REGISTRY["gaussian"]
        out.append((GAUSS_COLUMN, exp.Array(expressions=[
            exp.Sub(this=fam.value(f, scoring=True), expression=sql.dbl(_reference(params[f.name])))
            for f in gauss])))
    if bern:
        fam = REGISTRY["bernoulli"]
        out.append((BERN_COLUMN, exp.Array(expressions=[
            exp.Case(ifs=[exp.If(this=exp.Is(this=fam.value(f, scoring=True), expression=exp.Null()),
                                 true=exp.Null()),
                          exp.If(this=fam.present(f, scoring=True), true=sql.dbl(1.0))],
                     default=sql.dbl(0.0)) for f in bern])))
    return out


def terms(gauss: Sequence[Feature], bern: Sequence[Feature], params: dict, k: int) -> list[exp.Expression]:
    """Class ``k``'s wide terms: one dot product per list and coefficient vector."""
    out = []
    if gauss:
        d = sql.col(GAUSS_COLUMN, "src")
        const, quad, lin = (np.array(c) for c in zip(*(_gaussian(params[f.name], f, k) for f in gauss)))
        out += [_dot(_on(d), const), exp.Neg(this=_dot(_mapped(d, lambda v: exp.Mul(this=v, expression=v.copy())), quad)),
                _dot(_mapped(d, lambda v: v), lin)]
    if bern:
        x = sql.col(BERN_COLUMN, "src")
        absent, slope = (np.array(c) for c in zip(*(_bernoulli(params[f.name], f, k) for f in bern)))
        out += [_dot(_on(x), absent), _dot(_mapped(x, lambda v: v), slope)]
    return out


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


def _mapped(lst: exp.Expression, f) -> exp.Expression:
    """``list_transform(lst, lambda v: COALESCE(f(v), 0))``: a missing value adds 0."""
    return exp.Anonymous(this="list_transform", expressions=[
        lst.copy(), _lambda(lambda v: exp.Coalesce(this=f(v), expressions=[sql.dbl(0.0)]))])


def _on(lst: exp.Expression) -> exp.Expression:
    """1 where the list holds a value, 0 where NULL."""
    return exp.Anonymous(this="list_transform", expressions=[lst.copy(), _lambda(
        lambda v: exp.Case(ifs=[exp.If(this=exp.Is(this=v, expression=exp.Null()), true=sql.dbl(0.0))],
                           default=sql.dbl(1.0)))])


def _dot(lst: exp.Expression, weights: np.ndarray) -> exp.Expression:
    return exp.Anonymous(this="list_dot_product", expressions=[
        lst, exp.Array(expressions=[sql.dbl(float(w)) for w in weights])])
