"""Bernoulli naive Bayes: presence (``x > threshold``, strict) per class and feature.

With a Beta(β₁, β₀) prior on θ_cj and the estimator's effective pseudo-counts
(posterior mean: β; MAP: β − 1; MLE: 0)::

    θ_cj     = (N_cj + β₁) / (N_c + β₁ + β₀)        N_c counts rows where x_j is not NULL
    term_cj  = ln θ_cj        if x_j > threshold
               ln (1 − θ_cj)  otherwise,  0 if NULL

``ln(1 − θ)`` is computed as ``ln(N_c − N_cj + β₀) − ln(N_c + β₁ + β₀)``, exactly, not as
``ln(1 − exp(ln θ))``, which loses digits when θ is close to 1.
"""

from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.stats import Sums
from sqlnb.models.naive_bayes.families.base import Family, is_float, log_ratio, wcount, wcount_present


class Bernoulli(Family):
    name = "bernoulli"

    def present(self, feature, scoring: bool = False) -> exp.Expression:
        return exp.GT(this=self.value(feature, scoring), expression=sql.dbl(feature.threshold))

    def aggregates(self, feature, weight):
        x = self.value(feature)
        aggs = [wcount_present(weight, x),
                wcount(weight, self.present(feature))]
        if is_float(feature.sql_type):  # NaN / inf detection, for free from a sum
            aggs.append(exp.Sum(this=sql.as_double(sql.col(feature.name, "src"))))
        return aggs

    def collect(self, feature, rows, classes, where):
        if is_float(feature.sql_type):
            for c, r in zip(classes, rows):
                if r[2] is not None and not math.isfinite(float(r[2])):
                    raise SqlnbError(
                        f"column {feature.name!r} in {where} holds NaN or infinite values "
                        f"(class {c!r}); replace them with NULL to treat them as missing"
                    )
        return Sums(np.array([float(r[0] or 0) for r in rows]), np.array([float(r[1] or 0) for r in rows]))

    def estimate(self, features, stats, class_n, hp):
        out = {}
        for f in features:
            s = stats[f.name]
            b1, b0 = hp.beta_for(f.name)
            present = getattr(s, "docs", s.total)  # a token bag: presence per (class, term)
            n = np.reshape(s.n, (-1,) + (1,) * (np.ndim(present) - 1))  # N_c against every term
            den = n + b1 + b0
            flp = log_ratio(present + b1, den, f"feature {f.name!r}")
            neg = log_ratio(n - present + b0, den, f"feature {f.name!r}")
            out[f.name] = (flp, neg)
        return out

    def term(self, feature, params, k):
        """``CASE WHEN x IS NULL OR isnan(x) THEN 0 WHEN x > t THEN ln p ELSE ln(1 − p) END``:
        the missing test once, on the raw value (a NaN never reaches ``x > t``), rather than
        ``x`` read through :func:`sqlnb.sql.nan_as_null` twice (20 columns × 2M rows: 0.98 s
        with the former NULLIF, 1.40 s with the CASE read twice)."""
        flp, neg = params
        x = self.value(feature)
        return exp.Case(
            ifs=[
                exp.If(this=sql.missing(x, nan=is_float(feature.sql_type)), true=sql.dbl(0.0)),
                exp.If(this=exp.GT(this=x.copy(), expression=sql.dbl(feature.threshold)), true=sql.dbl(float(flp[k]))),
            ],
            default=sql.dbl(float(neg[k])),
        )
