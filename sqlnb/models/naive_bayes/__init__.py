"""Naive Bayes: one scan of GROUP BY aggregations -> statistics -> per-class SQL scores.

* :mod:`~sqlnb.models.naive_bayes.fit` — plans the features and gathers the sufficient
  statistics in one scan (plus the Gaussian shift prefix and the categorical counts);
* :mod:`~sqlnb.models.naive_bayes.families` — one module per distribution family, behind an
  explicit registry: aggregates, statistics, log-parameters and score terms;
* :mod:`~sqlnb.models.naive_bayes.text` — token bags (text, lists, maps, long token tables);
* :mod:`~sqlnb.models.naive_bayes.hyperparameters` — :class:`Hyperparameters`: smoothing,
  estimator, priors, variance floor, structure (applied when log-parameters are derived);
* :mod:`~sqlnb.models.naive_bayes.model` — :class:`NaiveBayes`: hyperparameters applied to
  the statistics, the class scores, parameter tables;
* :mod:`~sqlnb.models.naive_bayes.wide` — thousands of Gaussian/Bernoulli columns as lists
  (long-shape fit, dot-product scores, DuckDB); :mod:`~sqlnb.models.naive_bayes.tan` —
  tree-augmented naive Bayes.
"""

from sqlnb.models.naive_bayes.hyperparameters import ESTIMATORS, UNSEEN, Hyperparameters
from sqlnb.models.naive_bayes.model import NaiveBayes

__all__ = ["NaiveBayes", "Hyperparameters", "ESTIMATORS", "UNSEEN"]
