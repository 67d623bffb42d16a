"""The estimators' exact list shape (sqlnb/models/naive_bayes/wide.py).

Up to ``EXACT_ROWS`` rows an estimator scores its Gaussian columns as ``(x − θ)²·1/(2σ²)``
over the row's list of values zipped with each class's means (two dot products per class),
and its Bernoulli columns as dot products, instead of one guarded term per column and
class: the same numbers as scikit-learn's (1e-9), a SELECT a fraction of the size. The
library's own scoring SQL and other dialects' exports keep the per-term shape.
"""

from __future__ import annotations

import warnings

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy.special import logsumexp
from sklearn import naive_bayes as nb

import sqlnb
from sqlnb import estimators as est
from sqlnb.estimators import base, data
from sqlnb.models.naive_bayes import wide
from sqlnb.source import Table, resolve
from support.estimators import TOL, digits  # noqa: F401 (digits: a fixture)


def _texts(model) -> list[str]:
    """The scoring SELECTs the estimator rendered (and cached) for ``model``."""
    return list(base._SCORING_SQL[model].values())


def _numpy_proba(m: est.GaussianNB, X: np.ndarray) -> np.ndarray:
    """scikit-learn's GaussianNB formula over the fitted statistics, a missing (NaN) value
    contributing no term."""
    seen = ~np.isnan(X)
    Xz = np.where(seen, X, 0.0)
    jll = np.log(m.class_count_ / m.class_count_.sum())[None, :].repeat(len(X), axis=0)
    for k in range(len(m.classes_)):
        terms = -0.5 * np.log(2 * np.pi * m.var_[k]) - 0.5 * (Xz - m.theta_[k]) ** 2 / m.var_[k]
        jll[:, k] += np.sum(np.where(seen, terms, 0.0), axis=1)
    return np.exp(jll - logsumexp(jll, axis=1, keepdims=True))


def test_digits_gaussian_is_scikit_learns_in_a_small_select(digits):
    """Digits' constant pixels get the variance floor (≈ 2e-8) as variance: the expanded
    square (wide.WIDE_MIN's shape) is 2.8e-8 off there; this shape is within 1e-9, and its
    SELECT is under 60 kB (the per-term shape's was 371 kB)."""
    X, y = digits
    # An Arrow table takes the model's own scoring SELECT (a numpy array takes the packed
    # rows' path: sqlnb/estimators/moments.py, tests/test_estimators_gaussian.py).
    Xt = pa.table({f"x{j}": X[:, j] for j in range(X.shape[1])})
    ours = est.GaussianNB().fit(Xt, y)
    p = ours.predict_proba(Xt)
    np.testing.assert_allclose(p, nb.GaussianNB().fit(X, y).predict_proba(X), rtol=0, atol=TOL)
    (text,) = _texts(ours.model_)
    assert "LIST_ZIP" in text and len(text) < 60_000, len(text)
    # row order kept: the rows scored in another order give the same rows back
    perm = np.random.default_rng(0).permutation(len(X))
    np.testing.assert_array_equal(ours.predict_proba(Xt.take(perm)), p[perm])


def test_digits_bernoulli_is_scikit_learns_in_a_small_select(digits):
    X, y = digits
    # An Arrow table takes the model's own scoring SELECT (a numpy array takes the packed
    # rows' path: sqlnb/estimators/counts.py, tests/test_estimators_counts.py).
    Xt = pa.table({f"x{j}": X[:, j] for j in range(X.shape[1])})
    ours = est.BernoulliNB(binarize=4.0).fit(Xt, y)
    theirs = nb.BernoulliNB(binarize=4.0).fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(Xt), theirs.predict_proba(X), rtol=0, atol=TOL)
    (text,) = _texts(ours.model_)
    assert "LIST_DOT_PRODUCT" in text and len(text) < 60_000, len(text)


def _tiny_variance_data():
    """Column 0 is constant 0 in class 0 (its variance is the floor, 1e-9 × column 1's 100)
    and 0 or 20 in class 1: about the mean of the class means (5) the expanded square's
    parts are 10⁸ for a term near 0. Eight more columns make many rows' classes close."""
    rng = np.random.default_rng(1)
    n = 600
    y = rng.integers(0, 2, n)
    c = np.where(y == 1, 20.0 * rng.integers(0, 2, n), 0.0)
    big = rng.normal(scale=10.0, size=n)
    Z = rng.normal(size=(n, 8)) + 1.5 * y[:, None]
    return np.column_stack([c, big, Z]), y


def _arrow(X):
    return pa.table({f"x{j}": X[:, j] for j in range(X.shape[1])})


def test_a_tiny_variance_stays_exact():
    """The probabilities are scikit-learn's within 1e-9 (measured: 8e-15); the expanded
    square (forced here by lowering WIDE_MIN to 8) is 1.6e-8 off on the same data."""
    X, y = _tiny_variance_data()
    Xt = _arrow(X)  # the model's own SELECT (a numpy array: tests/test_estimators_gaussian.py)
    ours = est.GaussianNB().fit(Xt, y)
    theirs = nb.GaussianNB().fit(X, y)
    np.testing.assert_allclose(ours.predict_proba(Xt), theirs.predict_proba(X), rtol=0, atol=TOL)
    assert "LIST_ZIP" in _texts(ours.model_)[0]


def test_the_expanded_square_is_not_exact_there(monkeypatch):
    """What the test above guards against: the same data through the expanded square."""
    X, y = _tiny_variance_data()
    monkeypatch.setattr(wide, "WIDE_MIN", 8)
    ours = est.GaussianNB().fit(_arrow(X), y)
    diff = np.abs(ours.predict_proba(_arrow(X)) - nb.GaussianNB().fit(X, y).predict_proba(X)).max()
    assert diff > 1e-9 and "LIST_ZIP" not in _texts(ours.model_)[0]


def test_nan_and_null_contribute_no_term(digits):
    """A NaN in a numpy input (NULL in the Arrow table) and a NaN or NULL in a DuckDB
    table scored with the same SELECT: the term is left out, as the formula says."""
    X, y = digits
    ours = est.GaussianNB().fit(X, y)
    rng = np.random.default_rng(2)
    Xn = X[:300].copy()
    Xn[rng.random(Xn.shape) < 0.1] = np.nan
    want = _numpy_proba(ours, Xn)
    np.testing.assert_allclose(ours.predict_proba(Xn), want, rtol=0, atol=TOL)
    # DuckDB's own NaN (not NULL) and NULL values, through the library's scoring SELECT
    con = duckdb.connect()
    cols = {f"x{j}": pa.array(Xn[:, j]) for j in range(X.shape[1])}  # NaN stays NaN
    cols["x5"] = pa.array(Xn[:, 5], from_pandas=True)  # NaN as NULL in one column
    con.register("scored", pa.table(cols))
    with wide.exact_lists():
        text = base._scoring_text(ours.model_, resolve(Table("scored"), con))
    assert "LIST_ZIP" in text
    got = con.sql(text).fetchnumpy()
    p = np.column_stack([got[f"proba_{k}"] for k in range(10)])
    np.testing.assert_allclose(p, want, rtol=0, atol=TOL)


def test_many_rows_keep_the_per_term_shape(digits, monkeypatch):
    """Past EXACT_ROWS the per-term shape (cheaper per row) is used; both give the same
    probabilities (12 columns, 3 classes of digits: the per-term SELECT builds fast)."""
    X, y = digits
    X, y = X[y < 3][:, 20:32], y[y < 3]
    X = _arrow(X[:300])  # the model's own SELECT (a numpy array: tests/test_estimators_gaussian.py)
    ours = est.GaussianNB().fit(X, y[:300])
    small = ours.predict_proba(X)
    monkeypatch.setattr(base, "EXACT_ROWS", 100)
    np.testing.assert_allclose(ours.predict_proba(X), small, rtol=0, atol=1e-12)
    texts = _texts(ours.model_)
    assert len(texts) == 2 and sum("LIST_ZIP" in t for t in texts) == 1


def test_other_dialects_and_the_library_keep_their_sql(digits):
    X, y = digits
    X, y = X[y < 3][:, 20:32], y[y < 3]
    m = est.GaussianNB().fit(X, y).model_
    assert "list_zip" not in m.to_sql(dialect="duckdb", source="t").lower()  # the library's default
    with wide.exact_lists():
        assert "list_zip" in m.to_sql(dialect="duckdb", source="t").lower()
        for dialect in ("postgres", "spark", "sqlite"):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert "list_" not in m.to_sql(dialect=dialect, source="t").lower()


def test_a_c_ordered_array_is_handed_over_without_a_copy(digits):
    """A C-ordered numpy X is one fixed-size-list column over the array's own buffer; the
    model and its probabilities are those of the column-major path (a Fortran-ordered X)."""
    X, y = digits
    X = X[:, :20].copy()
    X[np.random.default_rng(3).random(X.shape) < 0.05] = np.nan
    table = data.array_to_arrow(X, [f"x{j}" for j in range(X.shape[1])])
    assert data.is_packed(table) and table.num_columns == 1
    flat = table.column(0).chunk(0).values
    assert flat.null_count == np.isnan(X).sum() > 0  # NaN read as NULL
    assert flat.buffers()[1].address == X.__array_interface__["data"][0]  # the array's own values
    F = np.asfortranarray(X)
    assert not data.is_packed(data.array_to_arrow(F, [f"x{j}" for j in range(X.shape[1])]))
    a, b = est.GaussianNB().fit(X, y), est.GaussianNB().fit(F, y)
    np.testing.assert_array_equal(a.theta_, b.theta_)
    np.testing.assert_array_equal(a.var_, b.var_)
    np.testing.assert_allclose(a.predict_proba(X), b.predict_proba(F), rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.predict_proba(X), _numpy_proba(a, X), rtol=0, atol=TOL)
    ints = est.GaussianNB().fit(X[:, :5].astype(np.int64) * 0 + np.arange(5) + (y[:, None] > 4), y)  # packed ints
    assert ints.predict_proba(np.arange(5)[None, :]).shape == (1, 10)


def test_column_minimums_of_packed_rows_and_a_negative_count_named():
    """The input checks read packed rows' minimums from one numpy view (NULL/NaN left
    out, a column of only NaN None), as the column path does; MultinomialNB (which keeps
    the column path) names a negative count's column."""
    X = np.abs(np.random.default_rng(4).normal(size=(30, 4)))
    X[7, 2], X[:, 3] = -1.5, np.nan
    X[3, 0] = np.nan
    names = [f"x{j}" for j in range(4)]
    packed = data.array_to_arrow(X, names)
    assert data.is_packed(packed) and not data.is_packed(data.array_to_arrow(X, names, packed=False))
    assert data.column_minimums(packed, names) == data.column_minimums(data.array_to_arrow(X, names, packed=False), names)
    assert data.column_minimums(packed, names)[2:] == [-1.5, None]
    ints = (np.arange(12).reshape(4, 3) - 5).astype(np.int64)
    assert data.column_minimums(data.array_to_arrow(ints, names[:3]), names[:3]) == [-5, -4, -3]
    with pytest.raises(ValueError, match="column 'x2' holds -1.5"):
        est.MultinomialNB().fit(np.nan_to_num(X), np.arange(30) % 2)


def test_the_long_shape_fit_gives_the_same_statistics(digits):
    """Up to EXACT_ROWS rows, fit sums the Gaussian columns in the long shape (unnested):
    the same statistics as the one-pass query, added in another order."""
    X, y = digits
    a = est.GaussianNB().fit(X, y)
    with wide.exact_lists(False):
        b = sqlnb.fit(pa.table({**{f"x{j}": X[:, j] for j in range(64)}, "y": y}), "y", kind="gaussian", screen=False)
    np.testing.assert_allclose(a.theta_, np.array([b.stats.features[f"x{j}"].mean for j in range(64)]).T,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(a.var_, np.array([np.asarray(b.log_parameters()[f"x{j}"][1]) for j in range(64)]).T,
                               rtol=1e-10, atol=1e-15)


def test_pooled_moments_are_chan_merge_class_by_class():
    """Moments.pooled on Python floats gives chan_merge's doubles (empty classes, a huge
    mean and a NaN one included)."""
    from sqlnb.stats import Moments, chan_merge
    rng = np.random.default_rng(5)
    for case in range(200):
        k = int(rng.integers(1, 12))
        rows = rng.integers(0, 5, k).astype(float) * (rng.random(k) < 0.8)
        mean = rng.normal(size=k) * 10.0 ** rng.integers(-3, 300, k) * rng.choice([1, -1], k)
        m2 = rng.random(k) * rows
        if case % 50 == 0:
            mean[0] = np.nan
        m = Moments(rows, mean, m2, rows, mean, m2)
        n, mu, s = 0.0, 0.0, 0.0
        for j in range(k):
            n, mu, s = chan_merge(n, mu, s, rows[j], mean[j], m2[j])
        np.testing.assert_array_equal(np.array(m.pooled()), np.array([float(n), float(mu), float(s)]))
