"""Multinomial naive Bayes: counts of events (words, items) per class.

All multinomial columns of a model form one multinomial over them (as scikit-learn's
MultinomialNB over the columns of X)::

    flp_cj   = ln(N_cj + α_j) − ln Σ_j' (N_cj' + α_j')     j' over ALL multinomial features
    term_cj  = x_j · flp_cj                                 0 when NULL

α is the posterior-mean pseudo-count; MAP uses α − 1 and MLE 0 (a Dirichlet prior's mode
and the plain frequency). Counts must be non-negative.
"""

from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError, shell_word
from sqlnb.stats import Sums
from sqlnb.models.naive_bayes.families.base import (Family, log_ratio, stacked, times, wcount, wcount_present,
                                                    wsum)


class Multinomial(Family):
    name = "multinomial"

    def aggregates(self, feature, weight):
        # The third aggregate counts the negative values (rows, unweighted), which the fit
        # refuses: COUNT_IF, not MIN. Grouped by class, DuckDB's MIN of a DOUBLE costs as
        # much as the count and the sum together (20 count columns, 10M rows, 3 classes:
        # the statistics query 1.75x a bare SUM scan with MIN, 1.32x with COUNT_IF; session
        # 41, benchmarks/README.md). The fourth sums the raw values, whose NaN or infinity
        # the count of a weighted sum would hide.
        x = self.value(feature)
        return [wcount_present(weight, x),
                wsum(weight, x.copy()),
                wcount(None, exp.LT(this=x.copy(), expression=sql.dbl(0.0))),
                exp.Sum(this=sql.as_double(sql.col(feature.name, "src")))]

    def collect(self, feature, rows, classes, where):
        for c, r in zip(classes, rows):
            if r[3] is not None and not math.isfinite(float(r[3])):
                raise SqlnbError(
                    f"column {feature.name!r} in {where} holds NaN or infinite values (class {c!r}); "
                    "replace them with NULL to treat them as missing"
                )
            if r[2]:
                raise SqlnbError(
                    f"column {feature.name!r} in {where} has {int(r[2]):,} negative count"
                    f"{'s' if int(r[2]) > 1 else ''} (class {c!r}) but kind {self.name!r} needs counts >= 0; "
                    f"use --feature-kind {shell_word(feature.name, '=gaussian')}"
                )
        return Sums(np.array([float(r[0] or 0) for r in rows]), np.array([float(r[1] or 0) for r in rows]))

    def estimate(self, features, stats, class_n, hp):
        if not features:
            return {}
        # A token bag adds one column per vocabulary term (``stacked``): its terms share
        # the denominator with every other multinomial feature.
        counts, alpha, where = stacked(features, stats, hp)
        num = counts + alpha
        den = num.sum(axis=1, keepdims=True)
        flp = log_ratio(num, np.broadcast_to(den, num.shape), "a multinomial feature")
        return {f.name: flp[:, j] for j, f in zip(where, features)}

    def term(self, feature, params, k):
        return times(self.value(feature, scoring=True), float(params[k]))
