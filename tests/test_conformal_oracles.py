"""Conformal prediction sets against MAPIE and crepes, and their coverage.

The oracles are fed the very probabilities sqlnb computed (a lookup "classifier" returns
them for a row number), so the sets are compared row for row:

* LAC and APS equal MAPIE 1.6's ``SplitConformalClassifier(prefit=True)``. MAPIE's APS
  subtracts ``u·p_y`` from every calibration score with ``u`` drawn from its
  ``random_state``; given a generator whose draws are 0, its scores are the
  non-randomised ones sqlnb computes (its threshold is checked equal too). MAPIE keeps a
  class within 1e-8 above the threshold; sqlnb compares exactly: the test checks that no
  row is that close, so the sets must agree.
* Mondrian sets equal crepes 0.9.1's class-conditional ``WrapClassifier`` without smoothing.
  crepes keeps class c when its p-value ``(#{cal scores ≥ s} + 1)/(n_c + 1) ≥ α``: the same
  set as ``s ≤`` the ⌈(n_c + 1)(1 − α)⌉-th score, except when ``(n_c + 1)·α`` is an integer
  (then crepes also keeps the scores up to the next calibration score); the test checks
  that no class count is such.

Coverage: the probabilities are computed once; one SQL query then draws nothing but
joins the 200 random calibration/test splits (made in numpy) to the scored rows, computes
each split's thresholds with :func:`sqlnb.models.conformal.threshold_query` and each test
row's membership with :func:`sqlnb.models.conformal.member` — the functions fitting and
scoring use.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.models import conformal as cp
from sqlnb.models.finish import class_columns
from sqlnb.workflows.conformal import conformal, score_select

CLASSES = ["a", "b", "c", "d"]
ALPHA = 0.1


def data(n: int, seed: int) -> pa.Table:
    """Four overlapping Gaussian classes in two columns (sets of one to four classes)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 4, n)
    centre = np.array([[0.0, 0.0], [1.2, 0.3], [0.4, 1.4], [1.6, 1.6]])[y]
    x = centre + rng.normal(0, 1.0, (n, 2))
    return pa.table({"id": np.arange(n), "x1": x[:, 0], "x2": x[:, 1], "y": np.array(CLASSES)[y]})


@pytest.fixture(scope="module")
def setup():
    con = duckdb.connect()
    model = sqlnb.fit(data(600, 1), "y", features=["x1", "x2"])
    cal, test = data(700, 2), data(800, 3)
    return con, model, cal, test


def probabilities(model, t: pa.Table, con) -> np.ndarray:
    got = model.score(t, con, outputs=("proba",), keep=["id"]).to_arrow_table()
    return np.column_stack([got[c].to_numpy() for c in class_columns("proba_", model.classes)])


class Lookup(ClassifierMixin, BaseEstimator):
    """A fitted "classifier" whose probabilities for row i (X = [[i]]) are ``P[i]``."""

    def __init__(self, P=None, classes=None):
        self.P, self.classes = P, classes

    def fit(self, X=None, y=None):
        self.classes_ = np.array(self.classes)
        self.n_features_in_ = 1
        return self

    def predict_proba(self, X):
        return self.P[np.asarray(X)[:, 0].astype(int)]

    def predict(self, X):
        return self.classes_[self.predict_proba(X).argmax(axis=1)]


class NoDraw(np.random.RandomState):
    """MAPIE's APS subtracts u·p_y from each calibration score; here every u is 0."""

    def uniform(self, low=0.0, high=1.0, size=None):
        return np.zeros(size)


def sqlnb_sets(model, t: pa.Table, con) -> np.ndarray:
    got = model.score(t, con, outputs=("prediction",), keep=["id"]).to_arrow_table().to_pydict()
    sets = np.array([[c in s for c in CLASSES] for s in got["prediction_set"]])
    assert list(got["set_size"]) == list(sets.sum(axis=1))
    return sets


@pytest.mark.parametrize("method", ["lac", "aps"])
def test_sets_equal_mapie(setup, method):
    from mapie.classification import SplitConformalClassifier
    con, model, cal, test = setup
    fitted = conformal(model, cal, ALPHA, method, con=con)
    P = np.vstack([probabilities(model, cal, con), probabilities(model, test, con)])
    n = cal.num_rows
    X = np.arange(len(P))[:, None]
    oracle = SplitConformalClassifier(estimator=Lookup(P, CLASSES).fit(), confidence_level=1 - ALPHA,
                                      conformity_score=method, prefit=True, random_state=NoDraw(0))
    oracle.conformalize(X[:n], np.array(cal["y"].to_pylist()))
    _, want = oracle.predict_set(X[n:])
    q = float(oracle._mapie_classifier.conformity_score_function_.quantiles_[0])
    assert fitted.conformal.thresholds[0] == pytest.approx(q, abs=1e-12)
    Pt = P[n:]
    closest = np.abs(1 - Pt - q) if method == "lac" else np.abs(
        np.array([[Pt[i][Pt[i] > Pt[i, c]].sum() for c in range(4)] for i in range(len(Pt))]) - q)
    assert closest.min() > 1e-8  # MAPIE's tolerance cannot matter on these rows
    got = sqlnb_sets(fitted, test, con)
    assert (got == want[:, :, 0]).all()
    sizes = got.sum(axis=1)
    assert len(set(sizes)) >= 3, sizes  # the comparison covers sets of several sizes


def test_mondrian_sets_equal_crepes(setup):
    from crepes import WrapClassifier
    con, model, cal, test = setup
    fitted = conformal(model, cal, ALPHA, "mondrian", con=con)
    counts = fitted.conformal.counts
    assert all(round((n + 1) * ALPHA, 9) != int((n + 1) * ALPHA) for n in counts), counts  # see the docstring
    P = np.vstack([probabilities(model, cal, con), probabilities(model, test, con)])
    n = cal.num_rows
    X = np.arange(len(P))[:, None]
    oracle = WrapClassifier(Lookup(P, CLASSES).fit())
    oracle.calibrate(X[:n], np.array(cal["y"].to_pylist()), class_cond=True)
    want = np.asarray(oracle.predict_set(X[n:], confidence=1 - ALPHA, smoothing=False, labels=False)).astype(bool)
    got = sqlnb_sets(fitted, test, con)
    assert (got == want).all()
    ys = np.array(cal["y"].to_pylist())
    assert counts == tuple(int((ys == c).sum()) for c in CLASSES)


def _coverage_by_split(con, scored: str, method: str, randomized: bool, splits: int, n_cal: int, n: int) -> list:
    """``(split, label, coverage, n)``: per random split and test label, the share of test
    rows whose set holds their label and the calibration rows behind the threshold. One
    query over the scored rows with the fitting and scoring expressions."""
    rng = np.random.default_rng(7)
    cal = np.zeros((splits, n), dtype=bool)
    for s in range(splits):
        cal[s, rng.permutation(n)[:n_cal]] = True
    con.register("splits", pa.table({"split": np.repeat(np.arange(splits), n), "id": np.tile(np.arange(n), splits),
                                     "cal": cal.ravel()}))
    rows = exp.Subquery(this=exp.select(exp.Star()).from_(sql.table(scored)).join(
        sql.table("splits"), using=["id"]).where(sql.col("cal")), alias=exp.TableAlias(this=sql.ident("s")))
    scores = score_select(rows, "y", CLASSES, "VARCHAR", method, randomized, seed=5, keep=("split",))
    keys = ["split", "g"] if method == "mondrian" else ["split"]
    q = cp.threshold_query(exp.Subquery(this=scores, alias=exp.TableAlias(this=sql.ident("c"))), ALPHA, keys)
    probas = [sql.col(c, "t") for c in class_columns("proba_", CLASSES)]
    u = cp.uniform(probas, 5) if randomized else None
    q_col = exp.Coalesce(this=sql.col("q", "q"), expressions=[sql.dbl(float("inf"))])
    label = sql.col("y", "t")
    hit = exp.Case(ifs=[exp.If(this=exp.EQ(this=label.copy(), expression=exp.Literal.string(c)),
                               true=cp.member(method, probas, k, q_col.copy(), u)) for k, c in enumerate(CLASSES)])
    test_rows = exp.select(exp.Star()).from_(sql.table(scored)).join(sql.table("splits"), using=["id"]).where(
        exp.Not(this=sql.col("cal")))
    on = exp.EQ(this=sql.col("split", "t"), expression=sql.col("split", "q"))
    if method == "mondrian":
        g = exp.Case(ifs=[exp.If(this=exp.EQ(this=label.copy(), expression=exp.Literal.string(c)),
                                 true=exp.Literal.number(k)) for k, c in enumerate(CLASSES)])
        on = exp.and_(on, exp.EQ(this=g, expression=sql.col("g", "q")))
    covered = exp.Case(ifs=[exp.If(this=hit, true=sql.dbl(1.0))], default=sql.dbl(0.0))
    keys_out = [sql.col("split", "t")] + ([label.copy()] if method == "mondrian" else [])
    query = (exp.select(*keys_out, exp.Avg(this=covered), exp.Max(this=sql.col("n", "q")))
             .from_(exp.Subquery(this=test_rows, alias=exp.TableAlias(this=sql.ident("t"))))
             .join(exp.Subquery(this=q, alias=exp.TableAlias(this=sql.ident("q"))), on=on)
             .group_by(*[k.copy() for k in keys_out]))
    got = con.execute(sql.render(query)).fetchall()
    con.unregister("splits")
    return got


@pytest.mark.parametrize("method,randomized", [("lac", False), ("aps", True), ("mondrian", False), ("aps", False)])
def test_coverage_over_200_random_splits(method, randomized):
    """Mean coverage over 200 splits (n_cal = 500) within [1 − α, 1 − α + 1/(n_cal + 1)]
    ± 0.01; per class for Mondrian (with its n_c). Non-randomised APS keeps the class
    that crosses the threshold, so its coverage is only bounded below."""
    con = duckdb.connect()
    model = sqlnb.fit(data(600, 1), "y", features=["x1", "x2"])
    pool = data(1500, 4)
    rel = model.score(pool, con, outputs=("proba",), keep=["id", "y"])  # the probabilities, once
    con.execute("CREATE TABLE scored AS SELECT * FROM rel")
    n_cal = 500
    rows = _coverage_by_split(con, "scored", method, randomized, 200, n_cal, pool.num_rows)
    if method == "mondrian":
        for c in CLASSES:
            got = [(cov, n) for _, y, cov, n in rows if y == c]
            assert len(got) == 200
            mean = np.mean([cov for cov, _ in got])
            upper = 1 - ALPHA + np.mean([1 / (n + 1) for _, n in got])
            assert 1 - ALPHA - 0.01 <= mean <= upper + 0.01, (c, mean, upper)
        return
    assert len(rows) == 200 and all(n == n_cal for _, _, n in rows)
    mean = np.mean([cov for _, cov, _ in rows])
    upper = 1 - ALPHA + 1 / (n_cal + 1)
    assert 1 - ALPHA - 0.01 <= mean, mean
    if randomized or method != "aps":
        assert mean <= upper + 0.01, (mean, upper)
