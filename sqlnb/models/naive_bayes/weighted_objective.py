"""The objective of naive Bayes with learnt weights over its patterns, for Newton's method
(:mod:`sqlnb.models.naive_bayes.weighted` reads the patterns and fits; this module is the
arithmetic on them, :func:`sqlnb.models.newton.newton` the optimiser).

:math:`L(a, w)` is the mean conditional log loss of the weighted class scores plus the L2
penalty towards 1 (the weighted module's docstring). Its value and gradient cost one pass
over the patterns (:meth:`Objective.value_grad`): a gather per class and group of features
for the scores, a bincount per class and group for the gradient. Its exact Hessian costs
``K(K − 1)/2 · F(F + 1)/2`` bincounts (:meth:`Objective.hessian`); Newton's first step uses
one over a sample of the patterns (:meth:`Objective.rough_hessian`).
"""

from __future__ import annotations

import copy
import math
import weakref
from typing import Any, Sequence

import numpy as np


class _Probabilities:
    """The (K, patterns) class probabilities :meth:`Objective.value_grad` hands out as its
    state: the array returns to the objective's pool when this holder is dropped."""

    def __init__(self, values: np.ndarray):
        self.values = values

    @staticmethod
    def of(state) -> np.ndarray:
        return state.values if isinstance(state, _Probabilities) else state


class Objective:
    """:math:`L(a, w)` (module docstring) over patterns, for :func:`~sqlnb.models.newton.newton`.

    ``patterns`` are :class:`~sqlnb.models.naive_bayes.weighted.Patterns`. The parameters are
    one flat vector ``[a (K), w_0 (K × V_0), w_1 (K × V_1), …]``. Each
    feature's log-probability table is padded with a column of zeros at position ``V_j``
    (missing: no term), which no weight multiplies.
    """

    def __init__(self, prior: np.ndarray, tables: Sequence[np.ndarray], patterns: Any, l2: float):
        self.prior = np.asarray(prior, dtype=float)
        self.K = len(self.prior)
        self.tables = [np.hstack([t, np.zeros((self.K, 1))]) for t in tables]
        self.shapes = [t.shape[1] for t in tables]
        # one contiguous array per feature: a column of the (patterns, features) array is
        # strided, and every gather and bincount below reads a whole feature
        self.codes = [np.ascontiguousarray(patterns.codes[:, j]) for j in range(len(tables))]
        self.y = patterns.y
        n = np.asarray(patterns.n, dtype=float)
        # each pattern's share of the rows; one value seen as an array when they are all equal
        # (rows read ungrouped): no array of 10M copies of it to map in
        self._equal = bool(len(n)) and n.min() == n.max()
        self.w = np.broadcast_to(n[0] / n.sum(), n.shape) if self._equal else n / n.sum()
        self.l2 = float(l2)
        # scratch arrays of one value per pattern, reused by every call: a fresh temporary
        # of 10M values is mapped and faulted in anew each time (at 10M patterns the page
        # faults took 40 % of the fit's processor time)
        self._index = np.empty(len(self.y), dtype=np.int64)
        self._value = np.empty(len(self.y))
        self._top = np.empty(len(self.y))
        # the (K, patterns) arrays of probabilities value_grad hands out, back here once the
        # caller has dropped them (_Probabilities): at 10M patterns a fresh one cost 0.5 s
        # of page faults on each call
        self._free: list[np.ndarray] = []
        self.groups = _groups(self.shapes)
        # one joint position per group of features: the scores and the gradient read a
        # group's values with one gather and one bincount instead of one per feature
        self._joint = []
        for group in self.groups:
            code = self.codes[group[0]].astype(np.int64)
            for j in group[1:]:
                code *= self.shapes[j] + 1
                code += self.codes[j]
            self._joint.append(code)
        # each pattern's class as K rows of flags: the loss copies its class's score under
        # them and the gradient's P − onehot(y) is one subtraction, with no index array (an
        # index of 10M positions took 1.2 s to be mapped in) and no scatter
        self._onehot = self.y[None, :] == np.arange(self.K)[:, None]

    def with_l2(self, l2: float) -> "Objective":
        """The same terms under the penalty ``l2`` (the cross-validation's λ path shares them)."""
        other = copy.copy(self)
        other.l2 = float(l2)
        return other

    def size(self) -> int:
        return self.K * (1 + sum(self.shapes))

    def rough_hessian(self, P: np.ndarray) -> np.ndarray | None:
        """The Hessian over every m-th pattern (their weights scaled to sum to 1), m such that
        about :data:`ROUGH_PATTERNS` remain; None when the patterns are too few for it to
        save anything. Newton's first step is solved with it
        (:func:`~sqlnb.models.newton.newton`): from naive Bayes's weights, where the gradient
        is still large, a Hessian that close does the first step's work at a fraction of the
        bincounts, and the exact one is made at the next point."""
        every = len(self.y) // ROUGH_PATTERNS
        return self.hessian(P, every) if every >= 2 else None

    def hessian(self, P: np.ndarray, every: int = 1) -> np.ndarray:
        """The dense Hessian ``Σ_p n_p/N Σ_{k,l} P_k (δ_kl − P_l) x_k x_lᵀ + λ I``.

        Class ``k``'s design ``x_k`` of a pattern holds ``ln π_k`` and, per feature, ``ln
        θ_{j,k,v}`` at its value ``v``: a function of the value alone. So the block of
        features ``(i, j)`` and classes ``(k, l)`` is ``ln θ_{i,k,·}ᵀ ⊙ C ⊙ ln θ_{j,l,·}``,
        ``C[u, v]`` the patterns' summed coefficients where feature ``i`` is ``u`` and ``j``
        is ``v``: one ``bincount`` of the pair's joint position, over the patterns. Within one
        feature (``i = j``) a pattern has one value, so ``C`` is diagonal: the feature's own
        ``bincount``. Only the class pairs ``k < l`` are counted: the coefficients of a class
        with itself, ``P_k (1 − P_k) = P_k Σ_{l≠k} P_l``, are minus the sum of its row's others
        (the probabilities sum to 1), and so are their counts. At K classes and F features a
        Hessian costs ``K(K − 1)/2 · F(F + 1)/2`` bincounts over the patterns (over every
        ``every``-th pattern: :meth:`rough_hessian`).
        """
        P = _Probabilities.of(P)
        n, K, F = self.size(), self.K, len(self.tables)
        starts = np.cumsum([K] + [K * V for V in self.shapes])
        pairs = [(k, l) for k in range(K) for l in range(k + 1, K)]
        if every == 1:
            w, codes, index = self.w, self.codes, self._index
        else:
            w = self.w[::every] / self.w[::every].sum()
            codes = [np.ascontiguousarray(c[::every]) for c in self.codes]
            P, index = P[:, ::every], self._index[:len(w)]
        # the coefficients n_p/N P_k P_l, in an array of value_grad's pool when it has room
        # (up to three classes: K(K − 1)/2 ≤ K pairs), left there for the next value_grad;
        # with equal weights n_p/N scales the counts instead
        borrowed = None
        if every == 1 and len(pairs) <= K:
            borrowed = self._free.pop() if self._free else np.empty((K, len(self.y)))
        coefs = (borrowed[:len(pairs)] if borrowed is not None
                 else np.empty((len(pairs), P.shape[1])))
        for c, (k, l) in zip(coefs, pairs):
            np.multiply(P[k], P[l], out=c)
            if not self._equal:
                c *= w
        scale = -float(w[0]) if self._equal and len(w) else -1.0

        def by_class(count, shape) -> list[list[np.ndarray]]:
            """``count(coefficients)`` for every class pair, the pairs ``k < l`` counted."""
            out = [[np.zeros(shape) for _ in range(K)] for _ in range(K)]
            for c, (k, l) in zip(coefs, pairs):
                out[k][l] = out[l][k] = count(c) * scale
            for k in range(K):
                out[k][k] = -sum((out[k][l] for l in range(K) if l != k), np.zeros(shape))
            return out

        def rows(k: int, i: int) -> slice:
            return slice(starts[i] + k * self.shapes[i], starts[i] + (k + 1) * self.shapes[i])

        H = np.zeros((n, n))
        total = by_class(np.sum, ())
        H[:K, :K] = np.array(total) * np.outer(self.prior, self.prior)
        for i, (ti, ci, Vi) in enumerate(zip(self.tables, codes, self.shapes)):
            # the feature's positions as int64 in the scratch: bincount converts any narrower
            # type to a fresh array on every call (52 ms a call at 10M patterns)
            np.copyto(index, ci)
            one = by_class(lambda c: np.bincount(index, weights=c, minlength=Vi + 1)[:Vi], (Vi,))
            for k in range(K):
                for l in range(K):
                    H[rows(k, i), l] = H[l, rows(k, i)] = one[k][l] * ti[k, :Vi] * self.prior[l]
                    H[rows(k, i), rows(l, i)] = np.diag(ti[k, :Vi] * one[k][l] * ti[l, :Vi])
            for j in range(i + 1, F):
                tj, Vj = self.tables[j], self.shapes[j]
                # the pair's joint position, made per Hessian: kept, one array per pair of
                # features would hold F(F − 1)/2 integers per pattern
                pair = np.multiply(ci, np.int64(Vj + 1), out=index)  # in int64 whatever the codes' type
                pair += codes[j]
                C = by_class(lambda c: np.bincount(pair, weights=c, minlength=(Vi + 1) * (Vj + 1)).reshape(
                    Vi + 1, Vj + 1)[:Vi, :Vj], (Vi, Vj))
                for k in range(K):
                    for l in range(K):
                        block = ti[k, :Vi, None] * C[k][l] * tj[l, None, :Vj]
                        H[rows(k, i), rows(l, j)] = block
                        H[rows(l, j), rows(k, i)] = block.T
        H[np.diag_indices(n)] += self.l2
        if borrowed is not None:
            self._free.append(borrowed)
        return H

    def unpack(self, beta: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        a, rest, out = beta[:self.K], self.K, []
        for V in self.shapes:
            out.append(beta[rest:rest + self.K * V].reshape(self.K, V))
            rest += self.K * V
        return a, out

    def _joint_tables(self, a: np.ndarray, ws: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Per group of features, (K, joint positions): the sum of its features' weighted
        log-probabilities at each combination of their positions (the prior's in the first)."""
        out = []
        for g, group in enumerate(self.groups):
            joint = np.zeros((self.K, 1))
            for j in group:
                folded = self.tables[j].copy()
                folded[:, :-1] *= ws[j]
                joint = (joint[:, :, None] + folded[:, None, :]).reshape(self.K, -1)
            if g == 0:
                joint = joint + (a * self.prior)[:, None]
            out.append(joint)
        if not self.groups:
            out.append((a * self.prior)[:, None])
        return out

    def scores(self, a: np.ndarray, ws: Sequence[np.ndarray], out: np.ndarray | None = None) -> np.ndarray:
        """(K, patterns): ``a_k ln π_k + Σ_j w ⊙ ln θ`` read at each pattern's positions
        (into ``out`` when given). Classes are rows: every sum over classes below is then an
        elementwise operation on contiguous rows (over a last axis of K it was twenty times
        slower at 1M patterns). Every gather is ``mode="clip"``: the positions are in range by
        construction, and the default mode's check and buffered output made a gather of 10M
        positions 2.5 times slower."""
        S = np.empty((self.K, len(self.y))) if out is None else out
        joints = self._joint_tables(a, ws)
        codes = self._joint or [np.zeros(len(self.y), dtype=np.int64)]
        for k in range(self.K):
            np.take(joints[0][k], codes[0], out=S[k], mode="clip")
            for joint, code in zip(joints[1:], codes[1:]):
                S[k] += np.take(joint[k], code, out=self._value, mode="clip")
        return S

    def back(self, R: np.ndarray) -> np.ndarray:
        """The gradient of ``Σ_p Σ_k R[k, p] · s_k(x_p)`` with respect to the parameters."""
        return self._back(lambda k: R[k])

    def _back(self, row, balanced: bool = False) -> np.ndarray:
        """:meth:`back` of the rows ``row(k)``, each asked for once (it may reuse one scratch).
        ``balanced``: the rows sum to zero at each pattern (``P − onehot(y)``), so the last
        class's sums are minus the others' and its row is not asked for."""
        sums = np.zeros((self.K, len(self.groups)), dtype=object)
        totals = np.zeros(self.K)
        read = self.K - 1 if balanced else self.K
        for k in range(read):
            r = row(k)
            totals[k] = r.sum()
            for g, (group, code) in enumerate(zip(self.groups, self._joint)):
                sums[k, g] = np.bincount(code, weights=r, minlength=math.prod(self.shapes[j] + 1 for j in group))
        if balanced:
            totals[-1] = -totals[:-1].sum()
            for g in range(len(self.groups)):
                sums[-1, g] = -sum(sums[:-1, g])
        per = [None] * len(self.tables)
        for g, group in enumerate(self.groups):
            sizes = [self.shapes[j] + 1 for j in group]
            summed = np.stack(list(sums[:, g])).reshape(self.K, *sizes)
            for i, j in enumerate(group):  # each feature's sums: the others' positions summed out
                others = tuple(1 + o for o in range(len(group)) if o != i)
                per[j] = summed.sum(axis=others) if others else summed
        out = [totals * self.prior]
        for t, V, sums in zip(self.tables, self.shapes, per):
            out.append((sums[:, :V] * t[:, :-1]).ravel())
        return np.concatenate(out)

    def _log_normaliser(self, S: np.ndarray) -> np.ndarray:
        top = S.max(axis=0)
        return top + np.log(np.exp(S - top).sum(axis=0))

    def value_grad(self, beta: np.ndarray) -> tuple[float, np.ndarray, Any]:
        """The objective, its gradient and the patterns' class probabilities (the state the
        Hessian is made from) at ``beta``."""
        a, ws = self.unpack(beta)
        S = self.scores(a, ws, self._free.pop() if self._free else None)
        S -= np.max(S, axis=0, out=self._top)  # shifted: the loss is ln Σ_k e^{s_k} − s_y either way
        own = self._own_scores(S, self._top)
        P = np.exp(S, out=S)  # S is not read again
        total = np.sum(P, axis=0, out=self._value)
        P /= total
        own -= np.log(total, out=total)  # ln P_y
        d = beta - 1.0
        f = -self.weighed(own) + 0.5 * self.l2 * float(d @ d)
        # Σ_p n_p/N (P − onehot(y)) x: summed with its signs, so that the sums stay small and
        # the gradient exact to rounding near the optimum (a sum of P minus one of onehot(y)
        # left 1e-12 of rounding at 1M patterns); a class's row at a time, in one scratch

        def residual(k: int) -> np.ndarray:
            r = np.subtract(P[k], self._onehot[k], out=self._value)
            return r if self._equal else np.multiply(r, self.w, out=r)

        g = self._back(residual, balanced=True)
        if self._equal:  # every pattern weighs the same: scale the sums, not the patterns
            g *= self.w[0]
        g += self.l2 * d
        state = _Probabilities(P)
        weakref.finalize(state, self._free.append, P)
        return f, g, state

    def hess_vec(self, P: np.ndarray, v: np.ndarray) -> np.ndarray:
        P = _Probabilities.of(P)
        a, ws = self.unpack(v)
        r = self.scores(a, ws)
        T = P * (r - np.sum(P * r, axis=0))
        return self.back(T * self.w) + self.l2 * v

    def log_loss(self, beta: np.ndarray) -> float:
        """The mean log loss (no penalty) of these patterns under the weights ``beta``."""
        return self.held_out(beta)[0]

    def held_out(self, beta: np.ndarray) -> tuple[float, float]:
        """The mean log loss (no penalty) and error rate of these patterns under the weights
        ``beta``, from one computation of their scores."""
        a, ws = self.unpack(beta)
        S = self.scores(a, ws)
        error = self.weighed(np.argmax(S, axis=0) != self.y)
        return self.weighed(self._log_normaliser(S) - self._own_scores(S, np.empty(len(self.y)))), error

    def weighed(self, x: np.ndarray) -> float:
        """``Σ_p n_p/N x_p``: with equal weights their value times numpy's pairwise sum (a dot
        product with a broadcast array sums one term at a time, and its rounding made the
        line search of Newton's last steps fail at 10M patterns)."""
        return float(self.w[0] * np.sum(x)) if self._equal else float(self.w @ x)

    def _own_scores(self, S: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Each pattern's score at its own class, into ``out``: one ``np.choose`` up to 32
        classes (154 ms at 10M patterns against 234 ms for a masked copy per class), past
        which numpy's choose takes no more choices."""
        if self.K <= 32:
            return np.choose(self.y, S, out=out, mode="clip")
        for k in range(self.K):
            np.copyto(out, S[k], where=self._onehot[k])
        return out


#: Patterns the Hessian of Newton's first step is made over (:meth:`Objective.rough_hessian`).
ROUGH_PATTERNS = 1_000_000
#: Largest number of joint positions of a group of features (:func:`_groups`): a group's
#: table of K rows then stays in the processor's cache while it is gathered from (a gather of
#: 10M positions from 40,480 took as long as from 1,936).
GROUP_POSITIONS = 65536


def _groups(shapes: Sequence[int]) -> list[list[int]]:
    """The features in consecutive groups of at most :data:`GROUP_POSITIONS` joint positions
    (each feature's values and its missing position)."""
    groups: list[list[int]] = []
    size = math.inf
    for j, V in enumerate(shapes):
        if size * (V + 1) > GROUP_POSITIONS:
            groups.append([])
            size = 1
        groups[-1].append(j)
        size *= V + 1
    return groups
