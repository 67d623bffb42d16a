"""LDA, QDA and logistic regression estimators over :func:`sqlnb.fit_lda`,
:func:`sqlnb.fit_qda` and :func:`sqlnb.fit_logistic`.

Their training rows must be complete (NaN is an error, as in scikit-learn). Their
statistics are of unweighted rows, so their ``fit`` takes no ``sample_weight`` (as
scikit-learn's LDA and QDA, its signature has none, so that meta-estimators pass none):
passing one is an :class:`~sqlnb.estimators.data.EstimatorArgumentError` (a TypeError)
whose line says what to use instead.
LDA and QDA keep exact moments, so their ``partial_fit`` merges them (the refit on
every row); logistic regression keeps no statistics and has none, as scikit-learn's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sqlnb import api
from sqlnb.engines import as_engine
from sqlnb.models.discriminant import collect_moments
from sqlnb.source import Table
from sqlnb.estimators.base import SqlnbClassifier
from sqlnb.estimators.data import EstimatorArgumentError


class _Dense(SqlnbClassifier):
    _allow_nan = False
    _weighted = False

    def fit(self, X: Any, y: Any, **params: Any) -> "_Dense":
        """Fit on ``X``, ``y`` (see :meth:`SqlnbClassifier.fit`); no ``sample_weight``: the
        statistics are of unweighted rows (``params`` only to refuse one in a clear line:
        ``has_fit_parameter(est, "sample_weight")`` stays False)."""
        if params:
            raise _unexpected(self, "fit", params)
        return self._fit(X, y)


def _unexpected(est: SqlnbClassifier, method: str, params: dict) -> EstimatorArgumentError:
    """The error for keyword arguments ``method`` of ``est`` does not take: for
    ``sample_weight``, what to use instead (rows repeated by their weights, or a naive
    Bayes estimator, whose statistics are weighted sums)."""
    name = type(est).__name__
    if "sample_weight" not in params:
        return EstimatorArgumentError(f"{name}.{method}() got an unexpected keyword argument {next(iter(params))!r}")
    weighted = ", ".join(c.__name__ for c in _weighted_estimators())
    return EstimatorArgumentError(
        f"{name}.{method}() takes no sample_weight: it is fitted on unweighted rows; repeat each row by its "
        f"whole-number weight (np.repeat(X, w, axis=0), np.repeat(y, w)), or use a naive Bayes estimator, whose fit "
        f"takes sample_weight ({weighted})")


def _weighted_estimators() -> list[type]:
    """The public estimators whose ``fit`` takes ``sample_weight`` (the naive Bayes ones),
    found among the subclasses of :class:`SqlnbClassifier` (its modules are imported by
    then: :mod:`sqlnb.estimators`)."""
    found, todo = [], [SqlnbClassifier]
    while todo:
        for c in todo.pop(0).__subclasses__():
            todo.append(c)
            if c._weighted and not c.__name__.startswith("_") and c not in found:
                found.append(c)
    return found


class _Discriminant(_Dense):
    def _merge(self, con, name, label, features, weight):
        # The batch's moments alone, merged before anything is solved: a batch too small
        # for a covariance of its own (fewer rows than columns, one class) is fine.
        engine = as_engine(con)
        moments = collect_moments(engine, engine.resolve(Table(name)), label, features)[1][None]
        return self.model_.merge(moments)

    def partial_fit(self, X: Any, y: Any, classes: Any = None, **params: Any):
        """Merge the moments of the rows ``X``, ``y``: exactly ``fit`` on every row so far.
        Every class needs rows in the first batch (a class mean is part of the model)."""
        if params:
            raise _unexpected(self, "partial_fit", params)
        return self._partial_fit(X, y, classes)

    @property
    def means_(self) -> np.ndarray:
        return self.model_.means_[self._order]

    @property
    def priors_(self) -> np.ndarray:
        return np.asarray(self.model_.priors_)[self._order]


class LinearDiscriminantAnalysis(_Discriminant):
    """Linear discriminant analysis in the database (scikit-learn's
    ``LinearDiscriminantAnalysis``; one moments scan).

    Parameters
    ----------
    shrinkage : float in [0, 1], optional
        Shrink the covariance towards ``(tr C / d)·I`` (scikit-learn's ``solver="lsqr"``).
    priors : sequence of probabilities in class order, "uniform", or None (class frequencies)

    Attributes
    ----------
    coef_, intercept_, means_, covariance_, priors_, model_, classes_, n_features_in_
    """

    def __init__(self, *, shrinkage=None, priors=None):
        self.shrinkage = shrinkage
        self.priors = priors

    def _fit_model(self, con, name, label, features, weight):
        return api.fit_lda(name, label, con=con, features=features, screen=False, shrinkage=self.shrinkage,
                           priors=_sequence(self.priors))

    @property
    def coef_(self) -> np.ndarray:
        return self.model_.coef_

    @property
    def intercept_(self) -> np.ndarray:
        return self.model_.intercept_

    @property
    def covariance_(self) -> np.ndarray:
        return self.model_.covariance_


class QuadraticDiscriminantAnalysis(_Discriminant):
    """Quadratic discriminant analysis in the database (scikit-learn's
    ``QuadraticDiscriminantAnalysis``).

    Parameters
    ----------
    reg_param : float in [0, 1]
        Each class covariance becomes ``(1 − reg_param)·C_k + reg_param·I``.
    priors : sequence of probabilities in class order, "uniform", or None
    """

    def __init__(self, *, reg_param=0.0, priors=None):
        self.reg_param = reg_param
        self.priors = priors

    def _fit_model(self, con, name, label, features, weight):
        return api.fit_qda(name, label, con=con, features=features, screen=False, reg_param=self.reg_param,
                           priors=_sequence(self.priors))


class LogisticRegression(_Dense):
    """L2-penalised logistic regression, fitted in numpy, scored in DuckDB (scikit-learn's
    ``LogisticRegression(C=C)``; multinomial for three classes or more).

    Parameters
    ----------
    C : float
        Inverse penalty strength.
    standardize : bool
        Fit on standardised columns (as ``StandardScaler`` before it); the scaling is
        folded into the scoring SQL.

    Attributes
    ----------
    coef_, intercept_ : scikit-learn's shapes (one row for two classes)
    """

    def __init__(self, *, C=1.0, standardize=False):
        self.C = C
        self.standardize = standardize

    def _fit_model(self, con, name, label, features, weight):
        return api.fit_logistic(name, label, con=con, features=features, screen=False, C=self.C,
                                standardize=self.standardize)

    @property
    def coef_(self) -> np.ndarray:
        return self.model_.coef_

    @property
    def intercept_(self) -> np.ndarray:
        return self.model_.intercept_


def _sequence(priors: Any) -> Any:
    return tuple(priors.tolist()) if isinstance(priors, np.ndarray) else priors
