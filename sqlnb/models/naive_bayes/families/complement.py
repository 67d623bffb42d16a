"""Complement naive Bayes (Rennie et al. 2003): weights from the *other* classes' counts.

::

    A_j      = Σ_c N_cj ;  comp_cj = A_j + α − N_cj
    w_cj     = −ln(comp_cj / Σ_j' comp_cj')      (norm: ln(..) / Σ_j' ln(..) instead)
    term_cj  = x_j · w_cj

The class prior is not part of the complement score (as in scikit-learn, which adds it
only when there is a single class); in a model mixing families the prior enters once,
through the other families. The pseudo-count must be positive: with α = 0 a feature seen
in one class only has comp = 0 and an infinite weight.
"""

from __future__ import annotations

import numpy as np

from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.families.base import stacked, times
from sqlnb.models.naive_bayes.families.multinomial import Multinomial


class Complement(Multinomial):
    name = "complement"

    def estimate(self, features, stats, class_n, hp):
        if not features:
            return {}
        counts, alpha, where = stacked(features, stats, hp)  # a token bag: one column per term
        if np.any(alpha <= 0):
            raise SqlnbError("complement naive Bayes needs a positive pseudo-count: use alpha > 0 "
                             "with the posterior-mean estimator (alpha > 1 with map)")
        comp = counts.sum(axis=0, keepdims=True) + alpha - counts
        logged = np.log(comp / comp.sum(axis=1, keepdims=True))
        if hp.norm:
            # With a single feature comp/Σcomp = 1 and the normalised weight is 0/0
            # (scikit-learn returns NaN probabilities): that feature says nothing about
            # the class, so its weight is 0.
            summed = logged.sum(axis=1, keepdims=True)
            with np.errstate(invalid="ignore", divide="ignore"):
                w = np.where(summed != 0, logged / np.where(summed != 0, summed, 1.0), 0.0)
        else:
            w = -logged
        return {f.name: w[:, j] for j, f in zip(where, features)}

    def term(self, feature, params, k):
        return times(self.value(feature, scoring=True), float(params[k]))
