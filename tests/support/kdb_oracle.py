"""A numpy oracle of the deep k-dependence structures (``kdb:K``, ``skdb``) over the
structure tests' discrete features (:data:`support.structured.DISCRETE`): the ranking and
ranked parent lists of KDB, hierarchical back-off over the prefixes of the parents, the
leave-one-out RMSE of every (k, s) by refitting the counts without each row, and the
back-off m per depth chosen by leave-one-out, written from the formulas of
:mod:`sqlnb.models.naive_bayes.skdb`'s docstring, independent of the library."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from support.discrete_oracle import Coded, kdb_structure, pseudo_counts, softmax
from support.structured import CLASSES, DISCRETE

#: The back-off pseudo-counts ``backoff="loo"`` chooses among (docs/skdb.md).
GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)


class Oracle:
    """KDB(K) with back-off m over ``DISCRETE`` from the training rows of weight ``keep``
    (1 each by default; 0 leaves a row out), its structure from every row; ``m`` one
    number, or per feature the m of each depth j = 1, 2, … (``backoff_choice``)."""

    def __init__(self, train: pa.Table, K: int, m=1.0, alpha=1.0, beta=None, estimator="posterior-mean"):
        self.a, self.b1, self.b0 = pseudo_counts(alpha, beta, estimator)
        self.coded = Coded(train, DISCRETE, CLASSES)
        self.m, self.C = m, len(CLASSES)
        self.keep = np.ones(len(self.coded.lab))
        self.ranking, self.parents = kdb_structure(list(DISCRETE), self.counts, K)

    def counts(self, fs):
        """Σ ``keep`` of the rows with all of ``fs`` present per (class, value of each)."""
        c = self.coded
        n = np.zeros((self.C, *(len(c.values[f]) for f in fs)))
        idx = [c.X[f] for f in fs]
        rows = np.all([i >= 0 for i in idx], axis=0)
        np.add.at(n, (c.lab[rows], *(i[rows] for i in idx)), self.keep[rows])  # in row order, as a loop adds
        return n

    def naive(self, f):
        n = self.counts([f])
        with np.errstate(divide="ignore", invalid="ignore"):
            if DISCRETE[f] == "bernoulli":
                return np.stack([n[:, 0] + self.b0, n[:, 1] + self.b1], 1) / (n.sum(1, keepdims=True)
                                                                             + self.b1 + self.b0)
            return (n + self.a) / (n.sum(1, keepdims=True) + self.a * len(self.coded.values[f]))

    def jll(self, T: dict, rows: int, k: int, s: int) -> np.ndarray:
        """Per row (codes ``T``) and class the log prior plus each of the first ``s`` ranked
        features' term under its first ``k`` parents."""
        lab = self.coded.lab
        class_n = np.bincount(lab, weights=self.keep, minlength=self.C)
        out = np.tile(np.log(class_n / class_n.sum()), (rows, 1))
        tables = {}
        for f in self.ranking[:s]:
            ps = self.parents[f][:k]
            p0 = self.naive(f)
            deep = [self.counts([*ps[:j], f]) for j in range(1, len(ps) + 1)]
            for r in range(rows):
                u = T[f][r]
                if u < 0:
                    continue
                p = p0[:, u]
                for j in range(1, len(ps) + 1):
                    at = tuple(T[q][r] for q in ps[:j])
                    if min(at) < 0:
                        break  # the longest prefix of present parents
                    n = deep[j - 1][(slice(None), *at)]
                    tot = n.sum(-1)
                    m = self.m[f][j - 1] if isinstance(self.m, dict) else self.m
                    with np.errstate(divide="ignore", invalid="ignore"):
                        p = np.where(tot == 0, p, (n[:, u] + m * p) / (tot + m))
                with np.errstate(divide="ignore"):
                    out[r] += np.log(p)
            tables[f] = deep
        return out

    def scores(self, test: pa.Table, k: int, s: int | None = None):
        jll = self.jll(self.coded.test_codes(test), test.num_rows, k, len(self.ranking) if s is None else s)
        return softmax(jll), jll

    def leave_one_out(self, K: int, weights: np.ndarray | None = None) -> np.ndarray:
        """RMSE of the probability of the true class, each training row scored by the
        counts without it, per (k, s), k = 0 … K, s = 1 … F; rows of ``weights`` (1 each
        by default) count with their weight, in the counts and in the mean."""
        c = self.coded
        F = len(self.ranking)
        base = np.ones(len(c.lab)) if weights is None else np.asarray(weights, dtype=float)
        err = np.zeros((K + 1, F))
        for i in range(len(c.lab)):
            self.keep = base.copy()
            self.keep[i] = 0.0
            T = {f: c.X[f][i:i + 1] for f in DISCRETE}
            for k in range(K + 1):
                for s in range(1, F + 1):
                    p = softmax(self.jll(T, 1, k, s))[0, c.lab[i]]
                    err[k, s - 1] += base[i] * (1 - p) ** 2
        self.keep = base.copy()
        return np.sqrt(err / base.sum())

    def backoff_choice(self, weights: np.ndarray | None = None) -> dict:
        """Per feature, the m of each depth j of its parent list that ``backoff="loo"``
        chooses: the one of ``GRID`` whose sum over the training rows with the feature and
        its first j parents present of w · ln p_j(own value | own class, own parents), every
        count less the row's own weight and p_{j−1} the row's own such probability under
        the m's chosen for the depths before, is largest. A row whose class holds its
        configuration in no other row adds ln p_{j−1} for every m, so is left out; equal
        sums go to the m nearest 1 (by ratio), then the smaller."""
        c = self.coded
        base = np.ones(len(c.lab)) if weights is None else np.asarray(weights, dtype=float)
        self.keep = base.copy()
        prefer = sorted(GRID, key=lambda m: (abs(np.log(m)), m))
        chosen = {}
        for f in self.ranking:
            rows = [r for r in range(len(c.lab)) if c.X[f][r] >= 0]
            n0 = self.counts([f])
            p = {}
            for r in rows:
                n = n0[c.lab[r]].copy()
                n[c.X[f][r]] -= base[r]
                if DISCRETE[f] == "bernoulli":
                    p[r] = (n[c.X[f][r]] + (self.b1 if c.X[f][r] == 1 else self.b0)) / (n.sum() + self.b1 + self.b0)
                else:
                    p[r] = (n[c.X[f][r]] + self.a) / (n.sum() + self.a * len(c.values[f]))
            ms = []
            for j, q in enumerate(self.parents[f], start=1):
                deep = self.counts([*self.parents[f][:j], f])
                rows = [r for r in rows if c.X[q][r] >= 0]
                cells = {}
                for r in rows:
                    n = deep[(c.lab[r], *(c.X[g][r] for g in self.parents[f][:j]))].copy()
                    n[c.X[f][r]] -= base[r]
                    if n.sum() > 0:
                        cells[r] = (n[c.X[f][r]], n.sum())
                total = {m: sum(base[r] * np.log((nu + m * p[r]) / (tot + m)) for r, (nu, tot) in cells.items())
                         for m in GRID}
                best = max(prefer, key=total.get)  # the first of the largest
                ms.append(best)
                for r, (nu, tot) in cells.items():
                    p[r] = (nu + best * p[r]) / (tot + best)
            chosen[f] = ms
        return chosen
