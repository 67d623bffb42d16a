"""Count models on a numpy array (sqlnb/estimators/counts.py).

MultinomialNB and ComplementNB fit a C-ordered (or copied) numpy array from one aggregate
over its packed rows and score it with one dot product per class, finished by the shared
log-sum-exp (sqlnb.models.finish): the same model :func:`sqlnb.fit` builds, scikit-learn's
probabilities within 1e-9. Arrays holding NaN, frames and relations keep the general path.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn import naive_bayes as nb

from sqlnb import estimators as est
from sqlnb.estimators import counts, data, packed
from support.estimators import (TOL, assert_pickles, assert_same_model_head, both_paths, digits,  # noqa: F401
                                general_path_fails, in_batches, nothing_rebuilt)


def _counts(n: int, seed: int = 0):
    """The benchmark's 1M x 20 shape, scaled down: 3 classes, |normal| counts."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    return np.abs(rng.normal(size=(n, 20)) + y[:, None] * np.linspace(0.1, 1.0, 20)), y


def _same(ours, theirs, X, weights=None):
    ours.fit(X[0], X[1], sample_weight=weights)
    theirs.fit(X[0], X[1], sample_weight=weights)
    np.testing.assert_allclose(ours.predict_proba(X[0]), theirs.predict_proba(X[0]), rtol=0, atol=TOL)
    np.testing.assert_allclose(ours.predict_log_proba(X[0]), theirs.predict_log_proba(X[0]), rtol=0, atol=TOL)
    assert (ours.predict(X[0]) == theirs.predict(X[0])).all()
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    assert ours.classes_.dtype == theirs.classes_.dtype


@pytest.mark.parametrize("make", [
    lambda: (est.MultinomialNB(), nb.MultinomialNB()),
    lambda: (est.MultinomialNB(alpha=0.3, class_prior="uniform"), nb.MultinomialNB(alpha=0.3, fit_prior=False)),
    lambda: (est.ComplementNB(), nb.ComplementNB()),
    lambda: (est.ComplementNB(norm=True, alpha=2.0), nb.ComplementNB(norm=True, alpha=2.0)),
    lambda: (est.BernoulliNB(), nb.BernoulliNB()),
    lambda: (est.BernoulliNB(binarize=7.5, alpha=0.5, class_prior="uniform"),
             nb.BernoulliNB(binarize=7.5, alpha=0.5, fit_prior=False)),
])
def test_digits_on_the_packed_path_are_scikit_learns(digits, monkeypatch, make):
    general_path_fails(monkeypatch)
    _same(*make(), digits)


def test_weights_integers_and_text_labels_on_the_packed_path(digits, monkeypatch):
    general_path_fails(monkeypatch)
    X, y = digits
    w = np.random.default_rng(1).random(len(y))
    _same(est.MultinomialNB(), nb.MultinomialNB(), (X, y), w)
    _same(est.ComplementNB(), nb.ComplementNB(), (X.astype(np.int32), y))
    _same(est.MultinomialNB(), nb.MultinomialNB(), (np.ascontiguousarray(X), np.array([f"d{v}" for v in y])))
    _same(est.BernoulliNB(binarize=3.0), nb.BernoulliNB(binarize=3.0), (X, y), w)
    _same(est.BernoulliNB(binarize=3.0), nb.BernoulliNB(binarize=3.0), (X.astype(np.int16), y))


@pytest.mark.parametrize("rows", [3_000, 120_000])
def test_the_1m_shape_scaled_down_is_scikit_learns(rows, monkeypatch):
    """Both shapes of each query: the long fit and the listed dot products (3,000 rows),
    the per-column sums and one dot product per class (120,000 rows)."""
    small = rows == 3_000
    assert (rows * 20 <= packed.LONG_VALUES, rows <= packed.LISTED_ROWS) == (small, small)
    general_path_fails(monkeypatch)
    X, y = _counts(rows)
    _same(est.MultinomialNB(), nb.MultinomialNB(), (X, y))
    _same(est.ComplementNB(), nb.ComplementNB(), (X, y))
    _same(est.BernoulliNB(binarize=1.0), nb.BernoulliNB(binarize=1.0), (X, y))


@pytest.mark.parametrize("long", [False, True])
@pytest.mark.parametrize("listed", [False, True])
def test_every_query_shape_gives_the_same_numbers(digits, monkeypatch, long, listed):
    monkeypatch.setattr(packed, "LONG_VALUES", 10**12 if long else 0)
    monkeypatch.setattr(packed, "LISTED_ROWS", 10**12 if listed else 0)
    X, y = digits
    w = np.random.default_rng(2).random(len(y))
    _same(est.MultinomialNB(), nb.MultinomialNB(), (X, y), w)
    _same(est.BernoulliNB(binarize=2.0), nb.BernoulliNB(binarize=2.0), (X, y), w)


def _stats_equal(a, b):
    assert_same_model_head(a, b)
    np.testing.assert_allclose(a.stats.class_n, b.stats.class_n, rtol=1e-12)
    for f in a.features:
        np.testing.assert_allclose(a.stats.features[f.name].total, b.stats.features[f.name].total, rtol=1e-12)
        np.testing.assert_allclose(a.stats.features[f.name].n, b.stats.features[f.name].n, rtol=1e-12)


@pytest.mark.parametrize("case", ["float", "int", "text", "weighted", "bernoulli", "bernoulli weighted"])
def test_the_packed_fit_is_the_model_sqlnb_fit_builds(digits, case):
    """Same features (names, kind, type, threshold), statistics, hyperparameters and
    report as the general path (sqlnb.fit over the registered input), so tables and
    pickles are too."""
    X, y = digits
    X = X.astype(np.int64) if case == "int" else np.ascontiguousarray(X)
    y = np.array([f"d{v}" for v in y]) if case == "text" else y
    w = np.random.default_rng(3).random(len(y)) if "weighted" in case else None
    make = (lambda: est.BernoulliNB(binarize=6.0)) if "bernoulli" in case else (lambda: est.MultinomialNB(alpha=0.5))
    fast, general = both_paths(make, X, y, w)
    _stats_equal(fast.model_, general.model_)
    assert _drop_seconds(fast.model_) == _drop_seconds(general.model_)
    assert_pickles(fast, X)


def _drop_seconds(model):
    meta = dict(model.metadata())
    meta.pop("report", None)
    return meta


def test_a_second_model_of_the_same_shape_builds_no_sql(digits, monkeypatch):
    X, y = digits
    est.MultinomialNB().fit(X, y).predict_proba(X)
    nothing_rebuilt(monkeypatch, counts, "_fit_text", "_score_text")
    ours = est.MultinomialNB(alpha=0.2).fit(X[::-1], y[::-1]).predict_proba(X)
    np.testing.assert_allclose(ours, nb.MultinomialNB(alpha=0.2).fit(X, y).predict_proba(X), rtol=0, atol=TOL)


def test_nan_counts_keep_the_general_path_and_contribute_nothing(digits):
    """A numpy NaN (and a frame's NULL) is a missing count: no term at fit or score, as
    before this path existed; scikit-learn's numbers with the NaN read as 0 (for the
    multinomial family, a count of 0 adds nothing either)."""
    X, y = digits
    Xn = np.ascontiguousarray(X)
    Xn[::7, 3] = np.nan
    Xn[5, :10] = np.nan
    assert not data.is_packed(est.MultinomialNB()._table(Xn, reset=True)[0])
    theirs = nb.MultinomialNB().fit(np.nan_to_num(Xn), y)
    for X_in in (Xn, pd.DataFrame(Xn, columns=[f"x{j}" for j in range(64)])):
        ours = est.MultinomialNB().fit(X_in, y)
        np.testing.assert_allclose(ours.predict_proba(X_in), theirs.predict_proba(np.nan_to_num(Xn)), rtol=0, atol=TOL)
    # Fitted on complete rows, scoring rows with NaN: also the general path, NaN as no term.
    ours = est.MultinomialNB().fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(Xn), nb.MultinomialNB().fit(X, y).predict_proba(np.nan_to_num(Xn)),
                               rtol=0, atol=TOL)


def test_negative_counts_and_one_class_keep_their_errors(digits):
    X, y = digits
    bad = np.ascontiguousarray(X)
    bad[9, 2] = -1.5
    with pytest.raises(ValueError, match=r"Negative values in data passed to MultinomialNB: column 'x2' holds -1\.5"):
        est.MultinomialNB().fit(bad, y)
    with pytest.raises(ValueError, match="only one class"):
        est.MultinomialNB().fit(X, np.zeros(len(y), dtype=int))


def test_partial_fit_and_frames_agree_with_the_packed_fit(digits):
    X, y = digits
    fitted = est.ComplementNB().fit(X, y)
    batches = in_batches(est.ComplementNB(), X, y)
    np.testing.assert_allclose(batches.predict_proba(X), fitted.predict_proba(X), rtol=0, atol=TOL)
    frame = pd.DataFrame(X, columns=[f"p{j}" for j in range(64)])
    by_frame = est.ComplementNB().fit(frame, y)
    np.testing.assert_allclose(by_frame.predict_proba(frame), fitted.predict_proba(X), rtol=0, atol=TOL)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # an array scored by a frame's model: scikit-learn warns
        np.testing.assert_allclose(by_frame.predict_proba(X), fitted.predict_proba(X), rtol=0, atol=TOL)


def test_infinite_weights_take_the_general_path(digits, monkeypatch):
    """MLE with a zero count gives a weight of −inf, which only a present count may
    meet (the per-term ``x > 0`` test): such a model scores through its own SELECT."""
    X, y = digits
    mle = est.MultinomialNB(estimator="mle").fit(X, y)
    flp = mle.feature_log_prob_
    assert not np.all(np.isfinite(flp))
    assert counts.scores(mle.model_, mle._table(X, reset=False)[0], [f"x{j}" for j in range(64)], "proba") is None
    with np.errstate(invalid="ignore"):
        terms = np.where(X[:, None, :] > 0, X[:, None, :] * flp[None, :, :], 0.0).sum(axis=2)
    jll = terms + mle.class_log_prior_
    top = jll.max(axis=1, keepdims=True)
    with np.errstate(invalid="ignore"):
        want = np.exp(jll - top) / np.exp(jll - top).sum(axis=1, keepdims=True)
    np.testing.assert_allclose(mle.predict_proba(X), want, rtol=0, atol=TOL)


def test_bernoulli_nan_is_missing_as_before(digits):
    """A NaN in a numpy input to BernoulliNB (which takes the general path) is a missing
    value, as before: left out of
    N_c (the rows where the column has a value) at fit and contributing no term at score
    (scikit-learn refuses NaN, so the reference is the formula in numpy)."""
    X, y = digits
    Xn = np.ascontiguousarray(X)
    rng = np.random.default_rng(4)
    Xn[rng.random(Xn.shape) < 0.05] = np.nan
    ours = est.BernoulliNB(binarize=4.0).fit(Xn, y)
    seen, present = ~np.isnan(Xn), np.nan_to_num(Xn) > 4.0
    classes = np.unique(y)
    onehot = (y[:, None] == classes[None, :]).astype(float)
    n = onehot.T @ seen  # (K, d) rows with a value
    flp = np.log((onehot.T @ present + 1.0) / (n + 2.0))
    neg = np.log((n - onehot.T @ present + 1.0) / (n + 2.0))
    prior = np.log(onehot.sum(axis=0) / len(y))
    jll = prior + present @ flp.T + (seen & ~present) @ neg.T
    want = np.exp(jll - jll.max(axis=1, keepdims=True))
    want /= want.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(ours.predict_proba(Xn), want, rtol=0, atol=TOL)
