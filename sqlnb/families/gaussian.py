"""Gaussian naive Bayes: a normal density per class and feature.

::

    ε        = var_smoothing · max_j VAR_POP(x_j)      all training rows, unweighted
    θ_cj     = Σ w x / Σ w
    var_cj   = Σ w (x − θ_cj)² / Σ w + ε                population variance
    term_cj  = −½ ln(2π·var_cj) − ½ (x − θ_cj)² / var_cj

The ``(x − θ)²/var`` form is kept on purpose: expanding it into ``a·x² + b·x + c``
cancels badly when |x| ≫ σ. A class in which a feature is always NULL has no estimate
of its own; it uses the feature's pooled (all-class) mean and variance, so the feature
neither favours nor penalises that class beyond what the data says.
"""

from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from .. import sql
from ..errors import SqlnbError
from ..stats import Moments
from .base import Family, wcount, wsum


class Gaussian(Family):
    name = "gaussian"

    def aggregates(self, feature, weight):
        x = self.value(feature)
        aggs = [exp.Count(this=x), exp.Avg(this=x.copy()), exp.VariancePop(this=x.copy())]
        if weight is not None:
            aggs += [wcount(weight, exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))),
                     wsum(weight, x.copy())]
        return aggs

    def second_pass(self, feature, weight, mean: exp.Expression) -> exp.Expression:
        """``Σ w (x − θ_c)²`` given the class means: the stable, two-pass weighted M2."""
        d = exp.Sub(this=self.value(feature), expression=mean)
        return wsum(weight, exp.Mul(this=sql.paren(d), expression=sql.paren(d.copy())))

    def collect(self, feature, rows, classes, where):
        rows_n = np.array([float(r[0] or 0) for r in rows])
        rows_mean = np.array([float(r[1]) if r[1] is not None else 0.0 for r in rows])
        var = np.array([float(r[2]) if r[2] is not None else 0.0 for r in rows])
        bad = [c for c, m, v in zip(classes, rows_mean, var) if not (math.isfinite(m) and math.isfinite(v))]
        if bad:
            raise SqlnbError(
                f"column {feature.name!r} in {where} holds NaN or infinite values (class {bad[0]!r}); "
                "replace them with NULL to treat them as missing, or filter those rows"
            )
        rows_m2 = var * rows_n
        if len(rows[0]) > 3:  # weighted: n and Σwx now, M2 in the second pass
            n = np.array([float(r[3] or 0) for r in rows])
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(n > 0, np.array([float(r[4] or 0) for r in rows]) / np.where(n > 0, n, 1), 0.0)
            return Moments(n, mean, np.zeros_like(n), rows_n, rows_mean, rows_m2)
        return Moments(rows_n.copy(), rows_mean.copy(), rows_m2.copy(), rows_n, rows_mean, rows_m2)

    def estimate(self, features, stats, class_n, hp):
        pooled = {f.name: stats[f.name].pooled() for f in features}
        max_var = max((m2 / n if n > 0 else 0.0) for n, _, m2 in pooled.values())
        # scikit-learn: epsilon = var_smoothing * max variance. With every column constant
        # that is 0 and every density degenerate, so the floor falls back to var_smoothing.
        eps = hp.var_smoothing * (max_var if max_var > 0 else 1.0)
        out = {}
        for f in features:
            s = stats[f.name]
            pn, pmean, pm2 = pooled[f.name]
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(s.n > 0, s.mean, pmean)
                var = np.where(s.n > 0, s.m2 / np.where(s.n > 0, s.n, 1.0), pm2 / pn if pn > 0 else 0.0) + eps
            if pn == 0:
                raise SqlnbError(f"column {f.name!r} has no non-NULL value in the training data; exclude it")
            if np.any(var <= 0):
                raise SqlnbError(
                    f"column {f.name!r} has zero variance in a class and var_smoothing is 0; "
                    "set var_smoothing > 0"
                )
            out[f.name] = (mean, var)
        return out

    def term(self, feature, params, k):
        mean, var = params
        const = -0.5 * math.log(2.0 * math.pi * float(var[k]))
        # NaN is made NULL on the input (a column-level NULLIF that DuckDB evaluates
        # once per column), then COALESCE turns a NULL term into 0. Measured at 1M rows ×
        # 20 features × 3 classes: 0.88 s this way; 1.52 s with NULLIF around the term,
        # which DuckDB evaluates as CASE and so computes the term twice.
        d = exp.Sub(this=self.value(feature, scoring=True), expression=sql.dbl(float(mean[k])))
        quad = exp.Div(this=exp.Mul(this=sql.paren(d), expression=sql.paren(d.copy())),
                       expression=sql.dbl(float(var[k])))
        body = exp.Sub(this=sql.dbl(const), expression=exp.Mul(this=sql.dbl(0.5), expression=sql.paren(quad)))
        return exp.Coalesce(this=body, expressions=[sql.dbl(0.0)])
