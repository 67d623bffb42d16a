"""The best model sqlnb has, as a scikit-learn estimator: :class:`AutoNB` runs
:func:`sqlnb.auto_fit` (cross-validation of sqlnb's candidates on the training rows,
within a time budget) and predicts with the winner, refitted on every row."""

from __future__ import annotations

from sklearn.utils._available_if import available_if

from sqlnb.estimators.base import SqlnbClassifier
from sqlnb.estimators.data import EstimatorArgumentError
from sqlnb.workflows.auto import BUDGET, auto_fit


class AutoNB(SqlnbClassifier):
    """The candidate of highest cross-validated accuracy among naive Bayes, naive Bayes with
    learnt weights, TAN, KDB, AODE and their average, with the smoothing, bins and features
    chosen too (:mod:`sqlnb.workflows.auto`), numeric columns discretised.

    Parameters
    ----------
    budget : float
        Seconds: a stage of candidates starts only before they have passed (the first
        always runs).
    folds, seed : int
        The cross-validation's folds (stratified, shuffled by ``seed``).

    Attributes
    ----------
    tried_ : list of dict
        Every candidate cross-validated: ``stage``, ``model``, ``params``, ``bins``,
        ``features``, ``accuracy``, ``log_loss``, ``seconds``.
    best_ : dict
        The chosen row of ``tried_``.
    search_ : AutoResult
        The whole search (``search_.table()`` prints it).
    model_ : the library model of the winner
    """

    _numeric = False  # categories of any type: they take part in the structures
    _weighted = False  # the cross-validation's folds and figures are of unweighted rows

    @available_if(lambda self: False)
    def partial_fit(self, X, y, classes=None, sample_weight=None):  # pragma: no cover - never available
        raise NotImplementedError

    def __init__(self, *, budget=BUDGET, folds=5, seed=0):
        self.budget = budget
        self.folds = folds
        self.seed = seed

    def fit(self, X, y, sample_weight=None) -> "AutoNB":
        """Run the search on ``X``, ``y`` and keep the winner (see :class:`SqlnbClassifier`)."""
        if sample_weight is not None:
            raise EstimatorArgumentError("AutoNB.fit() takes no sample_weight: its cross-validation does not weight "
                                         "rows; repeat each row by its weight instead, or use a naive Bayes estimator")
        return super().fit(X, y)

    def _fit_model(self, con, name, label, features, weight):
        result = auto_fit(name, label, con=con, budget=self.budget, folds=self.folds, seed=self.seed,
                          features=features)
        self.search_ = result
        return result.model

    @property
    def tried_(self) -> list:
        return self.search_.tried

    @property
    def best_(self) -> dict:
        return self.search_.best
