"""What the estimator tests (tests/test_estimators*.py) set up alike.

The digits fixture, the tolerance against scikit-learn, making the general path raise
(so a test proves the packed-rows path ran), fitting one estimator on both paths,
forbidding SQL to be built again, fitting in batches, and comparing two searches.
Import the fixture by name (``from support.estimators import digits``): pytest finds it
in the test module's namespace, one per module.
"""

from __future__ import annotations

import pickle
from typing import Any, Callable

import numpy as np
import pytest
from sklearn.datasets import load_digits

from sqlnb.estimators import base

#: Probabilities within this of scikit-learn's (the project's oracle tolerance).
TOL = 1e-9


@pytest.fixture(scope="module")
def digits():
    """scikit-learn's digits, ``(X, y)``: X a strided (not C-ordered) float view, 64 columns,
    10 classes, pixels constant in some classes."""
    return load_digits(return_X_y=True)


def raiser(message: str) -> Callable[..., Any]:
    """A stand-in that raises ``AssertionError(message)`` whatever it is called with."""
    def boom(*args, **kwargs):
        raise AssertionError(message)
    return boom


def general_path_fails(monkeypatch) -> None:
    """Make the general path (sqlnb.fit, the model's own scoring SELECT) raise."""
    from sqlnb.estimators import naive_bayes
    boom = raiser("the general path ran")
    monkeypatch.setattr(naive_bayes.api, "fit", boom)
    monkeypatch.setattr(base, "_scoring_text", boom)


def nothing_rebuilt(monkeypatch, module, *builders: str) -> None:
    """Make ``module``'s SQL ``builders`` and the general scoring SELECT's builder raise:
    a model of a shape already seen must take its SQL from the cache."""
    boom = raiser("rebuilt")
    for name in builders:
        monkeypatch.setattr(module, name, boom)
    monkeypatch.setattr(base, "_scoring_text", boom)


def both_paths(make: Callable[[], Any], X, y, sample_weight=None) -> tuple[Any, Any]:
    """``(fast, general)``: ``make()`` fitted on the packed-rows path and on the general
    path (sqlnb.fit over the same packed input)."""
    fast = make().fit(X, y, sample_weight=sample_weight)
    general = make()
    general._fit_packed = lambda *a: None
    general.fit(X, y, sample_weight=sample_weight)
    return fast, general


def assert_same_model_head(a, b) -> None:
    """Two fitted naive Bayes models have the same classes, label, weight, features,
    hyperparameters, class row counts and fit report (but its seconds)."""
    assert a.classes == b.classes and a.label_type == b.label_type and a.label == b.label and a.weight == b.weight
    assert a.features == b.features and a.hyper == b.hyper
    np.testing.assert_array_equal(a.stats.class_rows, b.stats.class_rows)
    drop = lambda r: {k: v for k, v in r.items() if k != "seconds"}  # noqa: E731
    assert drop(a.report) == drop(b.report)


def assert_pickles(fitted, X) -> None:
    """A pickled and restored estimator gives the same probabilities, bit for bit."""
    restored = pickle.loads(pickle.dumps(fitted))
    np.testing.assert_array_equal(restored.predict_proba(X), fitted.predict_proba(X))


def in_batches(estimator, X, y, parts: int = 4):
    """``estimator`` after ``partial_fit`` over ``parts`` consecutive batches of the rows."""
    for part in np.array_split(np.arange(len(y)), parts):
        estimator.partial_fit(X[part], y[part], classes=np.unique(y))
    return estimator


def assert_same_search(ours, theirs) -> None:
    """Two fitted searches pick the same parameters with mean scores within 1e-12."""
    assert ours.best_params_ == theirs.best_params_
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"], theirs.cv_results_["mean_test_score"],
                               rtol=0, atol=1e-12)
