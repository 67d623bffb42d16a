"""The start and the end every numpy oracle of a structure built on discrete features shares
(TAN, AODE, KDB tests): the smoothing pseudo-counts of an estimator, the training rows'
labels and values as integer codes (a NULL or unseen value coded -1), the log prior, the
test rows' codes, the sum of per-feature terms, and the softmax. Each test's oracle
goes on from here in plain numpy, independent of the library."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa


def pseudo_counts(alpha: float, beta, estimator: str) -> tuple[float, float, float]:
    """``(a, b1, b0)``: what is added to each categorical count (``a``) and to a Bernoulli
    feature's present and absent counts (``b1``, ``b0``) under ``estimator``."""
    pseudo = {"posterior-mean": lambda x: x, "map": lambda x: x - 1.0, "mle": lambda x: 0.0}[estimator]
    a = pseudo(alpha)
    b1, b0 = (pseudo(beta[0]), pseudo(beta[1])) if beta else (a, a)
    return a, b1, b0


class Coded:
    """The training rows with a label (``train``'s ``y``), coded over ``discrete``
    (name -> ``"categorical"`` or ``"bernoulli"``).

    Attributes
    ----------
    lab : ndarray
        Each kept row's class index in ``classes``.
    values : dict
        Feature -> its values (sorted; ``[False, True]`` for Bernoulli).
    X : dict
        Feature -> the kept rows' codes.
    """

    def __init__(self, train: pa.Table, discrete: dict, classes: list):
        tr = train.to_pydict()
        self.classes = list(classes)
        keep = [i for i, c in enumerate(tr["y"]) if c is not None]
        self.lab = np.array([classes.index(tr["y"][i]) for i in keep])
        self.values = {f: ([False, True] if kind == "bernoulli"
                           else sorted({tr[f][i] for i in keep if tr[f][i] is not None}))
                       for f, kind in discrete.items()}
        self.X = {f: self.codes([tr[f][i] for i in keep], f) for f in discrete}

    def codes(self, column, f: str) -> np.ndarray:
        """``column``'s values of feature ``f`` as codes, -1 for NULL or unseen."""
        pos = {v: i for i, v in enumerate(self.values[f])}
        return np.array([-1 if v is None or v not in pos else pos[v] for v in column])

    def log_prior(self) -> np.ndarray:
        """ln of each class's share of the kept rows."""
        class_n = np.bincount(self.lab, minlength=len(self.classes)).astype(float)
        return np.log(class_n / class_n.sum())

    def test_codes(self, test: pa.Table) -> dict:
        """``test``'s rows coded as the training rows: feature -> codes, -1 for NULL or unseen."""
        te = test.to_pydict()
        return {f: self.codes(te[f], f) for f in self.values}

    def summed_terms(self, test: pa.Table, term) -> np.ndarray:
        """Per row of ``test`` and class, the log prior plus ``term(T, r, f, u)`` for each
        feature ``f`` (in ``discrete``'s order) whose value in row ``r`` is coded ``u``
        (``T``: :meth:`test_codes`); a NULL or unseen value adds no term."""
        T = self.test_codes(test)
        jll = np.tile(self.log_prior(), (test.num_rows, 1))
        for r in range(test.num_rows):
            for f in self.values:
                u = T[f][r]
                if u >= 0:
                    jll[r] += term(T, r, f, u)
        return jll


def class_information(n: np.ndarray) -> float:
    """The plug-in I(X; C) in nats from the (class, value) counts ``n`` of the rows where X
    is present."""
    N = n.sum()
    return sum(n[c, u] / N * math.log(n[c, u] * N / (n[c].sum() * n[:, u].sum()))
               for c in range(n.shape[0]) for u in range(n.shape[1]) if n[c, u] > 0)


def conditional_information(n: np.ndarray) -> float:
    """The plug-in I(X_f; X_g | C) in nats from the (class, f value, g value) counts ``n``
    of the rows where both are present."""
    N = n.sum()
    return sum(n[c, u, v] / N * math.log(n[c, u, v] * n[c].sum() / (n[c, u].sum() * n[c, :, v].sum()))
               for c in range(n.shape[0]) for u in range(n.shape[1]) for v in range(n.shape[2]) if n[c, u, v] > 0)


def kdb_structure(names: list, counts, K: int) -> tuple[list, dict]:
    """``(ranking, parents)`` of KDB(K) over the features ``names``: ranked by I(X; C),
    each taking up to K of the features ranked before it of highest I(X_i; X_j | C)
    (ties to the model's order, then to the earlier ranked), plug-in estimates from
    ``counts(features)``, the (class, values…) counts over the rows where all are present."""
    ranking = sorted(names, key=lambda f: (-class_information(counts([f])), names.index(f)))
    parents = {}
    for r, f in enumerate(ranking):
        parents[f] = sorted(ranking[:r], key=lambda g: (-conditional_information(counts([f, g])),
                                                        ranking.index(g)))[:K]
    return ranking, parents


def softmax(jll: np.ndarray) -> np.ndarray:
    """Each row's class probabilities from its joint log-likelihoods (NaN for a row of −inf:
    under MLE such a row has no probabilities)."""
    with np.errstate(invalid="ignore"):
        e = np.exp(jll - jll.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)


def assert_rows_keep_count_and_order(model, test: pa.Table, con) -> None:
    """Scoring ``test`` shuffled gives one row per input row, in the input's order (its
    ``rid`` column first), from SQL without a join (where rows could be reordered,
    multiplied or lost)."""
    shuffled = test.take(np.random.default_rng(3).permutation(test.num_rows))
    con.register("shuffled", shuffled)
    got = [r[0] for r in model.score("shuffled", con=con, outputs=("proba", "prediction")).fetchall()]
    assert got == shuffled["rid"].to_pylist()
    assert "JOIN" not in model.to_sql("duckdb", source="shuffled", con=con).upper()
