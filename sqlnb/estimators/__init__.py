"""scikit-learn estimators on sqlnb models: ``fit(X, y)``, ``predict_proba(X)``, pipelines,
searches, pickling, with the computation in an in-process DuckDB.

>>> from sqlnb.estimators import GaussianNB                       # doctest: +SKIP
>>> clf = GaussianNB().fit(X, y)                                  # doctest: +SKIP
>>> clf.predict_proba(X_test)                                     # doctest: +SKIP
>>> clf.to_sql(dialect="postgres", source="customers")            # doctest: +SKIP

Naive Bayes: :class:`GaussianNB`, :class:`MultinomialNB`, :class:`ComplementNB`,
:class:`BernoulliNB`, :class:`CategoricalNB`, :class:`MixedNB` (a family per column),
:class:`TreeAugmentedNB`; dense: :class:`LinearDiscriminantAnalysis`,
:class:`QuadraticDiscriminantAnalysis`, :class:`LogisticRegression`.
"""

from __future__ import annotations

from typing import Any

from sqlnb.estimators.base import SqlnbClassifier
from sqlnb.estimators.data import EstimatorInputError
from sqlnb.estimators.dense import LinearDiscriminantAnalysis, LogisticRegression, QuadraticDiscriminantAnalysis
from sqlnb.estimators.naive_bayes import (BernoulliNB, CategoricalNB, ComplementNB, GaussianNB, MixedNB,
                                          MultinomialNB, TreeAugmentedNB)

ESTIMATORS = (GaussianNB, MultinomialNB, ComplementNB, BernoulliNB, CategoricalNB, MixedNB, TreeAugmentedNB,
              LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis, LogisticRegression)

__all__ = ["SqlnbClassifier", "EstimatorInputError", "ESTIMATORS", *(c.__name__ for c in ESTIMATORS)]
