"""scikit-learn's own hand-computed cases and the seeds' spam example."""

from __future__ import annotations

import math

import numpy as np

import sqlnb
from conftest import frame, scores

BERN_X = np.array([[1, 1, 0, 0, 0, 0], [0, 1, 0, 0, 1, 0], [0, 1, 0, 1, 0, 0], [0, 1, 1, 0, 0, 1]], float)
BERN_Y = [0, 0, 0, 1]


def test_gaussian_hand_case():
    X = np.array([[-2, -1], [-1, -1], [-1, -2], [1, 1], [1, 2], [2, 1]], float)
    m = sqlnb.fit(frame(X, [1, 1, 1, 2, 2, 2]), "y")
    p = scores(m, [[-0.1, -0.1]])["proba"]
    np.testing.assert_allclose(p[0], [0.9168273018589698, 0.08317269814103027], atol=1e-15)


def test_bernoulli_hand_case():
    m = sqlnb.fit(frame(BERN_X, BERN_Y), "y", kind="bernoulli", alpha=1.0)
    p = scores(m, [[0, 1, 1, 0, 0, 1]])["proba"]
    np.testing.assert_allclose(p[0], [0.1910667887616527, 0.8089332112383473], atol=1e-15)


def test_complement_hand_case():
    m = sqlnb.fit(frame(BERN_X, BERN_Y), "y", kind="complement", alpha=1.0)
    p = scores(m, [[0, 1, 1, 0, 0, 1]])["proba"]
    np.testing.assert_allclose(p[0], [0.17419354838709675, 0.8258064516129036], atol=1e-15)


def test_multinomial_vector_alpha_hand_case():
    X = np.array([[1, 0], [1, 1]], float)
    m = sqlnb.fit(frame(X, [0, 1]), "y", kind="multinomial", feature_alpha={"x0": 1.0, "x1": 2.0})
    p = scores(m, X)["proba"]
    np.testing.assert_allclose(p, [[5 / 9, 4 / 9], [25 / 49, 24 / 49]], atol=1e-15)


# The seeds' spam example (seeds/003): documents as word-presence vectors over the
# vocabulary V = (good, bad, very).
#   ham:  d1 {good}, d2 {very good}            -> N_ham = 2
#   spam: d3 {bad}, d4 {very bad}, d5 {very bad very bad} -> N_spam = 3
#   test: d6 {good bad very bad} -> present: good, bad, very
# Counts of documents containing each word: ham good 2, bad 0, very 1; spam good 0,
# bad 3, very 2. Priors 2/5 and 3/5.
SPAM_X = np.array([[1, 0, 0], [1, 0, 1], [0, 1, 0], [0, 1, 1], [0, 1, 1]], float)
SPAM_Y = ["ham", "ham", "spam", "spam", "spam"]
D6 = [[1, 1, 1]]


def test_seed_spam_mle_zero_probability_is_not_nan():
    # MLE: θ_ham = (2/2, 0/2, 1/2), θ_spam = (0/3, 3/3, 2/3).
    # p(d6, ham)  = 2/5 · 1 · 0 · 1/2 = 0      (bad never seen in ham)
    # p(d6, spam) = 3/5 · 0 · 1 · 2/3 = 0      (good never seen in spam)
    # Both joint probabilities are zero: ln p = −inf for both, p(d6) = 0 and the
    # posterior 0/0 is undefined — reported as NULL probabilities and prediction,
    # never NaN. (The "what is the problem with this?" of the seed.)
    m = sqlnb.fit(frame(SPAM_X, SPAM_Y), "y", kind="bernoulli", estimator="mle")
    out = scores(m, D6)
    assert np.all(np.isneginf(out["jll"]))
    assert out["log_evidence"][0] == -math.inf
    assert out["prediction"] == [None]
    assert np.all(np.isnan(out["proba"]))  # NULL read back as NaN by numpy, not a NaN in SQL
    # A document that avoids the zero: d = {bad, very} (bad present, good and very... )
    # d = (good 0, bad 1, very 1): ham has θ_bad = 0 -> p(ham) = 0 exactly, spam wins
    # with probability 1: p(d, spam) = 3/5 · (1 − 0) · 1 · 2/3 = 2/5.
    out = scores(m, [[0, 1, 1]])
    np.testing.assert_allclose(out["proba"][0], [0.0, 1.0], atol=0)
    assert out["prediction"] == ["spam"]
    assert out["jll"][0, 0] == -math.inf
    np.testing.assert_allclose(out["jll"][0, 1], math.log(2 / 5), atol=1e-15)


def test_seed_spam_posterior_mean():
    # Posterior mean with Beta(1, 1): θ = (N_cj + 1) / (N_c + 2)
    #   ham:  good 3/4, bad 1/4, very 2/4 ;  spam: good 1/5, bad 4/5, very 3/5
    # p(d6, ham)  ∝ 2/5 · 3/4 · 1/4 · 2/4 = 6/160  = 0.0375
    # p(d6, spam) ∝ 3/5 · 1/5 · 4/5 · 3/5 = 36/625 = 0.0576
    # p(ham | d6) = 0.0375 / (0.0375 + 0.0576) = 0.39432176656151419...
    m = sqlnb.fit(frame(SPAM_X, SPAM_Y), "y", kind="bernoulli", estimator="posterior-mean", alpha=1.0)
    out = scores(m, D6)
    ham = 0.0375 / (0.0375 + 0.0576)
    np.testing.assert_allclose(out["proba"][0], [ham, 1 - ham], atol=1e-15)
    assert out["prediction"] == ["spam"]
    np.testing.assert_allclose(out["log_evidence"][0], math.log(0.0375 + 0.0576), atol=1e-15)


def test_seed_spam_map_equals_mle_at_alpha_one():
    # MAP with Beta(β, β) subtracts one pseudo-count: β = 1 gives the MLE.
    a = sqlnb.fit(frame(SPAM_X, SPAM_Y), "y", kind="bernoulli", estimator="map", alpha=1.0)
    out = scores(a, [[0, 1, 1]])
    np.testing.assert_allclose(out["proba"][0], [0.0, 1.0], atol=0)
    # β = 2: θ = (N + 1)/(N_c + 2), the posterior mean at β = 1.
    b = sqlnb.fit(frame(SPAM_X, SPAM_Y), "y", kind="bernoulli", estimator="map", alpha=2.0)
    ham = 0.0375 / (0.0375 + 0.0576)
    np.testing.assert_allclose(scores(b, D6)["proba"][0], [ham, 1 - ham], atol=1e-15)
