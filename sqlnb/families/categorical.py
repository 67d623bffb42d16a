"""Categorical naive Bayes: a histogram per class over the values of a column.

A category is any value of any type (strings, integers, booleans, dates); no integer
coding is needed. With the estimator's effective pseudo-count α (posterior mean α, MAP
α − 1, MLE 0)::

    flp_j[c, v] = ln(N_cjv + α) − ln(N_cj + α·n_j)      n_j = distinct training values
    term_cj     = flp_j[c, x_j]                           0 when NULL

Values never seen in training follow ``unseen``: ``"missing"`` (default) treats them
like NULL — no evidence either way; ``"bucket"`` reserves one extra smoothed slot per
feature (n_j + 1 categories), so an unseen value costs each class ln(α / (N_cj + α(n_j+1))).
"""

from __future__ import annotations

import numpy as np
from sqlglot import exp

from .. import sql
from ..stats import Counts, sorted_values
from .base import Family, log_ratio


class Categorical(Family):
    name = "categorical"

    def check_type(self, feature, where):
        return None  # any type is a category

    def raw(self, feature) -> exp.Expression:
        return sql.col(feature.name, "src")

    def aggregates(self, feature, weight):
        # Unweighted: DuckDB's histogram() gives every value's count in the class's
        # group, so categorical columns cost no extra scan (measured in MEASURED.md's
        # shape: one GROUP BY with histograms vs GROUPING SETS over (label, column)).
        if weight is None:
            return [exp.Anonymous(this="histogram", expressions=[self.raw(feature)])]
        return []

    def collect(self, feature, rows, classes, where):
        hists = [dict(r[0] or {}) for r in rows]
        return counts_from(hists)

    def estimate(self, features, stats, class_n, hp):
        out = {}
        bucket = hp.unseen == "bucket"
        for f in features:
            s = stats[f.name]
            a = hp.pseudo(hp.alpha_for(f.name))
            n_j = len(s.values) + (1 if bucket else 0)
            den = (s.n + a * n_j)[:, None]
            flp = log_ratio(s.counts + a, np.broadcast_to(den, s.counts.shape), f"feature {f.name!r}")
            unseen = log_ratio(np.full(len(den), a), den[:, 0], f"feature {f.name!r}") if bucket else None
            out[f.name] = (list(s.values), flp, unseen)
        return out

    def term(self, feature, params, k):
        values, flp, unseen = params
        x = self.raw(feature)
        whens = [exp.If(this=exp.EQ(this=x.copy(), expression=sql.value(v, feature.sql_type)),
                        true=sql.dbl(float(flp[k, i]))) for i, v in enumerate(values)]
        if unseen is None:
            return exp.Case(ifs=whens, default=sql.dbl(0.0))
        whens.insert(0, exp.If(this=exp.Is(this=x.copy(), expression=exp.Null()), true=sql.dbl(0.0)))
        return exp.Case(ifs=whens, default=sql.dbl(float(unseen[k])))


def counts_from(hists: list[dict]) -> Counts:
    """Per-class ``{value: count}`` dicts -> :class:`Counts` (NULL values dropped)."""
    values = sorted_values(v for h in hists for v in h if v is not None)
    pos = {v: i for i, v in enumerate(values)}
    counts = np.zeros((len(hists), len(values)))
    for k, h in enumerate(hists):
        for v, n in h.items():
            if v is not None:
                counts[k, pos[v]] += float(n)
    return Counts(values, counts)
