"""GaussianNB on a numpy array (sqlnb/estimators/moments.py).

A numpy array without NaN of at most data.SMALL_VALUES values is packed (any layout:
digits' X is a strided view), fitted from one long aggregate of shifted sums plus the
exact second pass of the columns that need it (as sqlnb.fit computes them), and scored
with one lambda per row over the classes of the exact squares Σ(x − θ)²·h: the model
sqlnb.fit builds, scikit-learn's probabilities within 1e-9. NaN input, weights, tied
variances and large arrays keep the general path.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn import naive_bayes as nb

from sqlnb import estimators as est
from sqlnb.estimators import data, moments
from support.estimators import (TOL, assert_pickles, assert_same_model_head, both_paths, digits,  # noqa: F401
                                general_path_fails, in_batches, nothing_rebuilt)


@pytest.mark.parametrize("make", [
    lambda: (est.GaussianNB(), nb.GaussianNB()),
    lambda: (est.GaussianNB(var_smoothing=1e-6), nb.GaussianNB(var_smoothing=1e-6)),
    lambda: (est.GaussianNB(class_prior=[0.1] * 10), nb.GaussianNB(priors=[0.1] * 10)),
])
def test_digits_matches_scikit_learn_on_the_packed_path(digits, make, monkeypatch):
    """digits has pixels constant in a class (variance = the floor ≈ 2e-8 there): the
    exact square keeps every probability within 1e-9 of scikit-learn's, and the general
    path never runs."""
    X, y = digits
    general_path_fails(monkeypatch)
    ours, theirs = make()
    ours.fit(X, y)
    theirs.fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=0, atol=TOL)
    np.testing.assert_allclose(ours.predict_log_proba(X), theirs.predict_log_proba(X), rtol=1e-12, atol=1e-6)
    assert (ours.predict(X) == theirs.predict(X)).all()
    np.testing.assert_allclose(ours.var_, theirs.var_, rtol=1e-12, atol=0)
    np.testing.assert_allclose(ours.theta_, theirs.theta_, rtol=1e-12, atol=1e-15)
    assert ours.classes_.dtype == theirs.classes_.dtype


def _stats_equal(a, b):
    assert_same_model_head(a, b)
    np.testing.assert_array_equal(a.stats.class_n, b.stats.class_n)
    for f in a.features:
        sa, sb = a.stats.features[f.name], b.stats.features[f.name]
        for field in ("n", "mean", "m2", "rows", "rows_mean", "rows_m2"):
            np.testing.assert_allclose(getattr(sa, field), getattr(sb, field), rtol=1e-12, atol=0,
                                       err_msg=f"{f.name}.{field}")


@pytest.mark.parametrize("case", ["float", "int", "text", "shifted"])
def test_the_packed_fit_is_the_model_sqlnb_fit_builds(digits, case):
    """n, mean and M2 per class and column equal sqlnb.fit's to 1e-12 relative (the
    shifted case: columns far from 0, summed about a shift K ≠ 0)."""
    X, y = digits
    X = X.astype(np.int64) if case == "int" else np.ascontiguousarray(X)
    if case == "shifted":
        X = X * 1.37 + 1e4
    y = np.array([f"d{v}" for v in y]) if case == "text" else y
    fast, general = both_paths(est.GaussianNB, X, y)
    _stats_equal(fast.model_, general.model_)
    np.testing.assert_allclose(fast.predict_proba(X), nb.GaussianNB().fit(X, y).predict_proba(X), rtol=0, atol=TOL)
    assert_pickles(fast, X)


def test_a_strided_view_is_packed_but_nan_is_not(digits):
    X, _ = digits
    assert not X.flags.c_contiguous and not X.flags.f_contiguous
    assert data.is_packed(est.GaussianNB()._table(X, reset=True)[0])
    Xn = X.copy(order="F")
    Xn[3, 5] = np.nan
    assert not data.is_packed(est.GaussianNB()._table(Xn, reset=True)[0])


def test_nan_input_takes_the_general_path_and_is_missing(digits):
    """A NaN is a missing value (no term at fit or score), as before: NaN in a
    C-ordered array is packed but not plain, so moments declines."""
    X, y = digits
    Xn = np.ascontiguousarray(X)
    Xn[::7, 3] = np.nan
    table = est.GaussianNB()._table(Xn, reset=True)[0]
    names = [f"x{j}" for j in range(64)]
    assert moments.fit(table, names, "y", None, est.GaussianNB()._hyper()) is None
    ours = est.GaussianNB().fit(Xn, y)
    stats = ours.model_.stats.features["x3"]
    expect = np.array([np.sum((y == c) & ~np.isnan(Xn[:, 3])) for c in np.unique(y)], dtype=float)
    np.testing.assert_array_equal(stats.n, expect)
    fitted = est.GaussianNB().fit(X, y)
    assert moments.scores(fitted.model_, table, names, "proba") is None
    # A row with x3 missing scores as scikit-learn does without that column.
    sk = nb.GaussianNB().fit(np.delete(X, 3, axis=1), y)
    rows = np.isnan(Xn[:, 3])
    np.testing.assert_allclose(fitted.predict_proba(Xn)[rows], sk.predict_proba(np.delete(X, 3, axis=1)[rows]),
                               rtol=0, atol=TOL)


def test_weights_and_tied_variance_keep_the_general_path(digits):
    X, y = digits
    table = est.GaussianNB()._table(X, reset=True)[0]
    names = [f"x{j}" for j in range(64)]
    assert moments.fit(table, names, "y", "w", est.GaussianNB()._hyper()) is None
    assert moments.fit(table, names, "y", None, est.GaussianNB(tied_variance=True)._hyper()) is None
    w = np.random.default_rng(1).random(len(y))
    np.testing.assert_allclose(est.GaussianNB().fit(X, y, sample_weight=w).predict_proba(X),
                               nb.GaussianNB().fit(X, y, sample_weight=w).predict_proba(X), rtol=0, atol=TOL)


def test_partial_fit_equals_the_packed_fit(digits):
    X, y = digits
    fitted = est.GaussianNB().fit(X, y)
    batches = in_batches(est.GaussianNB(), X, y)
    np.testing.assert_allclose(batches.predict_proba(X), fitted.predict_proba(X), rtol=0, atol=TOL)
    sk = nb.GaussianNB().fit(X, y)
    np.testing.assert_allclose(batches.predict_proba(X), sk.predict_proba(X), rtol=0, atol=TOL)


def test_a_second_model_of_the_same_shape_builds_no_sql(digits, monkeypatch):
    X, y = digits
    est.GaussianNB().fit(X, y).predict_proba(X)
    nothing_rebuilt(monkeypatch, moments, "_shifted_text", "_score_text")
    ours = est.GaussianNB(var_smoothing=1e-5).fit(X[::-1], y[::-1]).predict_proba(X)
    np.testing.assert_allclose(ours, nb.GaussianNB(var_smoothing=1e-5).fit(X, y).predict_proba(X), rtol=0, atol=TOL)


def test_a_tiny_variance_stays_exact_on_the_packed_path(monkeypatch):
    """tests/test_estimators_exact.py's data (a column constant in one class, its variance
    the floor): the packed path's exact square is within 1e-9 of scikit-learn."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 600)
    c = np.where(y == 1, 20.0 * rng.integers(0, 2, 600), 0.0)
    X = np.column_stack([c, rng.normal(scale=10.0, size=600), rng.normal(size=(600, 8)) + 1.5 * y[:, None]])
    general_path_fails(monkeypatch)
    ours = est.GaussianNB().fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(X), nb.GaussianNB().fit(X, y).predict_proba(X), rtol=0, atol=TOL)


@pytest.mark.parametrize("kind, theirs", [("gaussian", nb.GaussianNB()), ("multinomial", nb.MultinomialNB())])
def test_mixed_of_one_kind_keeps_the_single_family_answer(digits, kind, theirs):
    """MixedNB(kind=K) on a numpy array (the library's general path: only the
    single-family estimators pack their input) gives scikit-learn's probabilities and the
    single-family estimator's, whose packed path it does not take."""
    X, y = digits
    single = (est.GaussianNB() if kind == "gaussian" else est.MultinomialNB()).fit(X, y)
    mixed = est.MixedNB(kind=kind).fit(X, y)
    np.testing.assert_allclose(mixed.predict_proba(X), theirs.fit(X, y).predict_proba(X), rtol=0, atol=TOL)
    np.testing.assert_allclose(mixed.predict_proba(X), single.predict_proba(X), rtol=0, atol=1e-12)
    assert {f.kind for f in mixed.model_.features} == {kind}
