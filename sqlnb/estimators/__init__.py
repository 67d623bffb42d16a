"""scikit-learn estimators on sqlnb models: ``fit(X, y)``, ``predict_proba(X)``, pipelines,
searches, pickling, with the computation in an in-process DuckDB.

>>> from sqlnb.estimators import GaussianNB                       # doctest: +SKIP
>>> clf = GaussianNB().fit(X, y)                                  # doctest: +SKIP
>>> clf.predict_proba(X_test)                                     # doctest: +SKIP
>>> clf.to_sql(dialect="postgres", source="customers")            # doctest: +SKIP

Naive Bayes: :class:`GaussianNB`, :class:`MultinomialNB`, :class:`ComplementNB`,
:class:`BernoulliNB`, :class:`CategoricalNB`, :class:`MixedNB` (a family per column),
:class:`WeightedNB` (learnt weights), :class:`TreeAugmentedNB`, :class:`AveragedOneDependenceNB`, :class:`KDependenceNB`,
:class:`SelectiveKDependenceNB`, :class:`EnsembleSelectiveKDependenceNB`, :class:`AveragedStructuresNB`;
:class:`AutoNB` (the best of them, chosen by cross-validation: :func:`sqlnb.auto_fit`); dense:
:class:`LinearDiscriminantAnalysis`, :class:`QuadraticDiscriminantAnalysis`, :class:`LogisticRegression`.
"""

from __future__ import annotations

from typing import Any

from sqlnb.estimators.auto import AutoNB
from sqlnb.estimators.base import SqlnbClassifier
from sqlnb.estimators.data import EstimatorArgumentError, EstimatorInputError
from sqlnb.estimators.dense import LinearDiscriminantAnalysis, LogisticRegression, QuadraticDiscriminantAnalysis
from sqlnb.estimators.naive_bayes import (BernoulliNB, CategoricalNB, ComplementNB, GaussianNB, MixedNB,
                                          MultinomialNB, TreeAugmentedNB, WeightedNB)
from sqlnb.estimators.structured import (AveragedOneDependenceNB, AveragedStructuresNB,
                                        EnsembleSelectiveKDependenceNB, KDependenceNB, SelectiveKDependenceNB)
from sqlnb.models.naive_bayes import eskdb, kdb, skdb

ESTIMATORS = (GaussianNB, MultinomialNB, ComplementNB, BernoulliNB, CategoricalNB, MixedNB, WeightedNB,
              TreeAugmentedNB, AveragedOneDependenceNB, KDependenceNB, SelectiveKDependenceNB,
              EnsembleSelectiveKDependenceNB, AveragedStructuresNB,
              LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis, LogisticRegression)

__all__ = ["SqlnbClassifier", "AutoNB", "EstimatorInputError", "EstimatorArgumentError", "ESTIMATORS", "from_model", "load",
           *(c.__name__ for c in ESTIMATORS)]

_NB_KINDS = {"gaussian": GaussianNB, "multinomial": MultinomialNB, "complement": ComplementNB,
             "bernoulli": BernoulliNB, "categorical": CategoricalNB}


def from_model(model: Any) -> SqlnbClassifier:
    """The estimator for a library model (:func:`sqlnb.fit`, :func:`sqlnb.load`): the
    single-family class when every feature is of one family, else MixedNB
    (TreeAugmentedNB, AveragedOneDependenceNB, KDependenceNB, SelectiveKDependenceNB,
    EnsembleSelectiveKDependenceNB, AveragedStructuresNB for those structures); LDA,
    QDA, logistic regression.
    Its parameters are the estimator's defaults: ``model_`` holds the fitted ones."""
    kind = getattr(model, "kind", "")
    if kind == "naive_bayes":
        kinds = {f.kind for f in model.features}
        structure = model.hyper.structure
        if structure != "naive":
            cls = ({"tan": TreeAugmentedNB, "aode": AveragedOneDependenceNB}.get(structure)
                   or (SelectiveKDependenceNB if skdb.selective(structure) else KDependenceNB
                       if kdb.order_of(structure) else EnsembleSelectiveKDependenceNB
                       if eskdb.ensemble(structure) else AveragedStructuresNB))
        else:
            cls = _NB_KINDS.get(next(iter(kinds)), MixedNB) if len(kinds) == 1 else MixedNB
    elif kind == "weighted_naive_bayes":
        cls = WeightedNB
    else:
        cls = {"lda": LinearDiscriminantAnalysis, "qda": QuadraticDiscriminantAnalysis,
               "logistic": LogisticRegression}[kind]
    return cls.from_model(model)


def load(location: Any, name: str = "model") -> SqlnbClassifier:
    """A model saved with ``save(location, name)`` (or by the CLI) as an estimator."""
    from sqlnb.api import load as load_model
    return from_model(load_model(location, name))
