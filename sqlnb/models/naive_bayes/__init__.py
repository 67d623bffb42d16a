"""Naive Bayes: one scan of GROUP BY aggregations -> statistics -> per-class SQL scores.

* :mod:`~sqlnb.models.naive_bayes.fit` — plans the features and gathers the sufficient
  statistics in one scan (plus the Gaussian shift prefix and the categorical counts);
* :mod:`~sqlnb.models.naive_bayes.families` — one module per distribution family, behind an
  explicit registry: aggregates, statistics, log-parameters and score terms;
* :mod:`~sqlnb.models.naive_bayes.text` — token bags (text, lists, maps, long token tables);
* :mod:`~sqlnb.models.naive_bayes.model` — :class:`NaiveBayes`: hyperparameters applied to
  the statistics, the class scores, parameter tables.
"""

from sqlnb.models.naive_bayes.model import ESTIMATORS, UNSEEN, Hyperparameters, NaiveBayes

__all__ = ["NaiveBayes", "Hyperparameters", "ESTIMATORS", "UNSEEN"]
