"""Deeper k-dependence structures: ``structure="kdb:K"`` for K = 3 to 5, and the selective
KDB (``structure="skdb"`` or ``"skdb:K"``, Martínez, Webb, Chen & Zaidi, "Scalable
learning of Bayesian network classifiers", JMLR 17, 2016), whose number of parents k
and number of features s leave-one-out cross-validation chooses from the counts.

Structure, as KDB's (:mod:`~sqlnb.models.naive_bayes.kdb`): the discrete (tree) features
ranked by I(X; C), and feature i's parents the up to K features ranked before it of
highest I(X_i; X_j | C), in that order: its *ranked parent list* pa_1, pa_2, …. Under
``skdb`` the model of (k, s) keeps the first s ranked features, each with the first k
of its ranked parents; the rest of the features add no term.

Statistics: for each feature and each prefix j = 0 … K of its ranked parent list, the
counts n_j(c, pa_1 … pa_j, x) over the rows where the child and that prefix are present:
j = 0 the feature's own counts, j = 1 the pair counts, j ≥ 2 the joint counts of the
feature set (:class:`~sqlnb.models.naive_bayes.kdb.JointCounts`, one scan of GROUPING
SETS for all of them, :func:`~sqlnb.models.naive_bayes.kdb.with_joints`; a set's counts
serve every child of it). ``skdb`` also keeps the training rows as distinct patterns
with their weights (:class:`Patterns`, one aggregate scan): leave-one-out needs them.
All of them add under ``update``; an update whose merged counts give a feature other
parents, or ``skdb`` another (k, s), is refused, naming the feature or the choice.

Parameters: hierarchical back-off. With p_0(x | c) the feature's naive Bayes
probability (smoothed with the family's α, or Bernoulli β₁, β₀) and m the back-off
pseudo-count (``backoff``; 1 by default under ``kdb:K``)::

    p_j(x | c, pa_1..j) = (n_j(c, pa_1..j, x) + m · p_{j−1}(x | c, pa_1..j−1)) / (n_j(c, pa_1..j) + m)

with n_j(c, pa_1..j) = Σ_x n_j(c, pa_1..j, x); where n_j(c, pa_1..j) = 0 (a
configuration never seen with class c) p_j is p_{j−1} exactly, so a deep, rare
configuration leans on the shorter prefix and an unseen one is the shorter prefix.
Under ``skdb`` with ``backoff="loo"`` (its default) m is one per feature and depth j ≥ 1: of
:data:`BACKOFF_GRID`, the one of highest leave-one-out log-likelihood of the training
rows' own values and classes at that depth (:func:`choose_backoff`, within
:func:`leave_one_out`, depth after depth; ``choice["backoff"]``), derived like k and s.

Scoring, one term per kept feature and class::

    child missing (NULL, NaN, unseen)     0
    otherwise                             ln p_j(x | c, pa_1..j),  j the longest prefix of
                                          the (first k) ranked parents all present

So a missing parent conditions on the parents ranked before it. The term is ``COALESCE``
of one pick per depth, deepest first, each a CASE over the configurations seen in
training only (a pick is NULL for an unseen configuration, whose table is the shorter
prefix's; in Spark one lookup in a MAP literal), then the naive pick and 0
(:func:`child_terms`, every dialect but DuckDB's prelude form): it grows with the seen configurations, not with the product of the
parents' values. In DuckDB the seen configurations are the nodes of a trie
(:func:`trie`), bound as a list like the tables: the scoring prelude walks every child
down it at once, one ``list_transform`` per depth, and each class reads the children's
cells at their places in one sum
(:meth:`sqlnb.models.naive_bayes.listed.Plan.deep_columns`), so the SQL grows with the
features only, the same doubles.

Selection (``skdb``; ``skdb:K`` bounds k by K, ``skdb`` by :data:`~kdb.MAX_K`). For every
training row and every candidate (k, s), k = 0 … K, s = 1 … F, the row is scored by the
model of the counts without the row (each count it adds to, of its own class, less its
weight: a leave-one-out model, the structure kept) and the candidate with the lowest
root mean squared error of the probability of the true class,
RMSE = sqrt(Σ_rows w (1 − p(y | x))² / Σ w), the paper's criterion, wins; equal RMSE goes
to the smaller k, then the smaller s. One numpy pass over the distinct patterns scores
every candidate (:func:`leave_one_out`); the RMSE and 0-1 loss of each are kept
(``model.skdb_table()``, ``sqlnb show``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import kdb, tan
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.models.priors import given_prior
from sqlnb.stats import Counts, sorted_values


def selective(structure: str) -> bool:
    """Whether ``structure`` is ``skdb`` or ``skdb:K``."""
    return isinstance(structure, str) and structure.split(":")[0] == "skdb" and kdb.order_of(structure) is not None


def deep(structure: str) -> bool:
    """Whether this module derives ``structure``: ``kdb:K`` past K = 2, and ``skdb``.

    Cross-validation scores such fold models fold by fold (:mod:`sqlnb.workflows.cv`), as
    AODE's (:func:`~sqlnb.models.naive_bayes.mixture.has_member`): each binds its tries of
    seen configurations, and one query pooling all of them held every trie at once. Adult
    (30,162 rows, MDL bins), skdb at α 0.5, 1, 2, 5 folds: pooled, past 11 GB and still
    rising (a run of the accuracy benchmark was killed for memory at 24 GB); fold by fold
    183 s and 3.5 GB."""
    K = kdb.order_of(structure)
    return K is not None and (selective(structure) or K > kdb.SAHAMI_K)


# -- the rows as patterns -----------------------------------------------------------------
@dataclass
class Patterns:
    """The training rows as distinct patterns: ``y[p]`` the class index, ``codes[p, a]``
    the position of feature ``names[a]``'s value among ``values[a]`` (−1 missing),
    ``w[p]`` their weight, ``rows[p]`` how many rows."""

    names: list
    values: list
    y: np.ndarray
    codes: np.ndarray
    w: np.ndarray
    rows: np.ndarray

    def _with(self, y, codes, w, rows, names=None, values=None) -> "Patterns":
        return Patterns(list(self.names if names is None else names),
                        [list(v) for v in (self.values if values is None else values)], y, codes, w, rows)

    def align(self, src: list, dst: list) -> "Patterns":
        at = np.array([dst.index(c) for c in src], dtype=np.int64)
        return self._with(at[self.y] if len(self.y) else self.y, self.codes, self.w, self.rows)

    def take(self, idx) -> "Patterns":
        new = {int(i): j for j, i in enumerate(idx)}
        keep = np.array([int(v) in new for v in self.y], dtype=bool)
        return self._with(np.array([new[int(v)] for v in self.y[keep]], dtype=np.int64), self.codes[keep],
                          self.w[keep], self.rows[keep])

    def scaled(self, factor: float) -> "Patterns":
        return self._with(self.y, self.codes, self.w * factor, self.rows)

    def over(self, values: Sequence[list]) -> np.ndarray:
        """The codes re-indexed to (superset) value lists."""
        out = self.codes.copy()
        for a, (src, dst) in enumerate(zip(self.values, values)):
            pos = {v: i for i, v in enumerate(dst)}
            # −1 stays missing; a value ``dst`` lacks is one no pattern holds (a fold's rows
            # coded over every fold's values), so it is never read
            remap = np.array([pos.get(v, -1) for v in src] + [-1], dtype=np.int64)
            out[:, a] = remap[self.codes[:, a]]
        return out

    def merge(self, other: "Patterns") -> "Patterns":
        values = [sorted_values(list(a) + list(b)) for a, b in zip(self.values, other.values)]
        return grouped(self.names, values, np.r_[self.y, other.y], np.r_[self.over(values), other.over(values)],
                       np.r_[self.w, other.w], np.r_[self.rows, other.rows])

    def restricted(self, keep) -> "Patterns":
        cols = [a for a, n in enumerate(self.names) if n in keep]
        return grouped([self.names[a] for a in cols], [self.values[a] for a in cols], self.y,
                       self.codes[:, cols], self.w, self.rows)


def grouped(names, values, y, codes, w, rows) -> Patterns:
    """Patterns with equal (class, codes, weight of a row) summed into one: leave-one-out
    takes one row's weight out, so rows of other weights stay apart (a weight column, or
    the rows ``update`` decayed)."""
    y = np.asarray(y, dtype=np.int64)
    codes = np.asarray(codes, dtype=np.int64).reshape(len(y), len(names))
    w, rows = np.asarray(w, dtype=float), np.asarray(rows, dtype=float)
    if not len(y):
        return Patterns(list(names), [list(v) for v in values], y, codes, np.zeros(0), np.zeros(0))
    each = np.where(rows > 0, w / np.maximum(rows, 1), 0.0)
    keys, inv = np.unique(np.c_[y, codes, each], axis=0, return_inverse=True)
    inv = inv.ravel()
    keys = keys[:, :-1].astype(np.int64)
    return Patterns(list(names), [list(v) for v in values], keys[:, 0].copy(), keys[:, 1:].copy(),
                    np.bincount(inv, weights=w, minlength=len(keys)),
                    np.bincount(inv, weights=rows, minlength=len(keys)))


def patterns_of(read, features: Sequence[Feature], stats) -> Patterns:
    """:class:`Patterns` of the tree features from ``read(values)``, a reader of
    :class:`sqlnb.models.naive_bayes.weighted.Patterns` given each feature's value list
    (missing at position ``len(values)``)."""
    values = [tan.feature_values(f, stats.features) for f in features]
    found = read(values)
    codes = np.where(found.codes >= np.array([len(v) for v in values]), -1, found.codes)
    rows = found.rows if found.rows is not None else found.n
    return grouped([f.name for f in features], values, found.y, codes, found.n, rows)


# -- parameters ---------------------------------------------------------------------------
def backoff(n: np.ndarray, total: np.ndarray, shorter: np.ndarray, m: float) -> np.ndarray:
    """ln p_j from the counts n_j(c, pa, x), their total n_j(c, pa) and ln p_{j−1}
    (broadcast alike): ln((n + m·p_{j−1}) / (total + m)), ln p_{j−1} itself where the
    total is 0 (module docstring)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log((n + m * np.exp(shorter)) / (total + m))
    return np.where(total == 0, shorter, out)


def naive_probability(child: Feature, n: np.ndarray, total: np.ndarray, x: np.ndarray, hp, size: int) -> np.ndarray:
    """ln p_0(x | c) of naive Bayes from the counts n(c, x) and n(c) at the values ``x``
    of a feature of ``size`` values (the family's smoothing, :func:`tan._conditional`'s)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        if child.kind == "bernoulli":
            b1, b0 = hp.beta_for(child.name)
            return np.log((n + np.where(x == 1, b1, b0)) / (total + b1 + b0))
        a = hp.pseudo(hp.alpha_for(child.name))
        return np.log((n + a) / (total + a * size))


@dataclass
class Deep:
    """A derived deep KDB: ``parent[child]`` one name or a tuple (its first k ranked
    parents, children with at least one), ``logp[child][j]`` ln p_j (C, n_pa1…n_paj,
    n_child), ``seen[child][j − 1]`` the configurations of depth j with rows (any class),
    ``cpt[child]`` the deepest table; ``dropped`` the features past s (no term)."""

    features: list
    order: list
    parent: dict
    mi: np.ndarray
    cmi: np.ndarray
    logp: dict
    seen: dict
    cpt: dict
    dropped: list
    k: int
    s: int
    choice: dict | None = None


def _parents(par) -> tuple:
    return () if par is None else (par,) if isinstance(par, str) else tuple(par)


def prefix_counts(child: str, ps: Sequence[str], j: int, stats, values: Mapping[str, list],
                  rank: Mapping[str, int], structure: str) -> np.ndarray:
    """n_j(c, pa_1 … pa_j, x) (C, n_pa1…, n_child) of ``child`` over its first j parents."""
    if j == 1:
        return stats.pairs.table(ps[0], child, values[ps[0]], values[child])
    key = tuple(sorted((child, *ps[:j]), key=rank.get))
    joints = getattr(stats.pairs, "joints", {})
    if key not in joints:
        raise SqlnbError(
            f"structure {structure!r} gives feature {child!r} the parents {', '.join(map(repr, ps[:j]))}, whose "
            "joint counts with it were never gathered (an update whose rows changed the structure, or a model "
            f"fitted otherwise); refit the model on all rows with structure={structure!r} "
            f"(sqlnb fit --structure {structure})")
    counts = joints[key].over([values[n] for n in key])
    return np.transpose(counts, [0, *(1 + key.index(n) for n in (*ps[:j], child))])


def derive(features: Sequence[Feature], stats, hp, params: Mapping[str, Any], K: int) -> Deep:
    """The structure of ``hp.structure`` and its back-off tables from the statistics."""
    structure = hp.structure
    if hp.unseen != "missing":
        raise SqlnbError(f"structure {structure!r} scores unseen categories as missing; leave unseen at 'missing'")
    tree_feats, order, parents, mi, cmi = kdb.structure(features, stats, K)
    values = {f.name: tan.feature_values(f, stats.features) for f in tree_feats}
    rank = {f.name: i for i, f in enumerate(tree_feats)}
    choice = None
    k, s = K, len(order)
    if selective(structure):
        choice = leave_one_out(features, tree_feats, order, parents, stats, hp, K)
        k, s = choice["k"], choice["s"]
    return network(tree_feats, order, parents, mi, cmi, k, s, choice, hp, params,
                   lambda child, ps, j: prefix_counts(child, ps, j, stats, values, rank, structure))


def network(tree_feats: list, order: list, parents: Mapping[str, tuple], mi, cmi, k: int, s: int, choice,
            hp, params: Mapping[str, Any], counts) -> Deep:
    """The :class:`Deep` of a ranking, parent lists and choice (k, s): each kept child's
    back-off tables over the first k of its parents, ``counts(child, ps, j)`` giving
    n_j(c, pa_1..j, x) (the joint counts under skdb, the patterns' sums under eskdb)."""
    by_name = {f.name: f for f in tree_feats}
    logp, seen, parent, cpt = {}, {}, {}, {}
    for child in order[:s]:
        ps = parents[child][:k]
        tables = [tan.naive_row(by_name[child], params[child])]
        marks = []
        for j in range(1, len(ps) + 1):
            n = counts(child, ps, j)
            total = n.sum(axis=-1, keepdims=True)
            m = choice["backoff"][child][j - 1] if hp.backoff == "loo" else hp.backoff
            tables.append(backoff(n, total, np.expand_dims(tables[-1], -2), m))
            marks.append(n.sum(axis=(0, -1)) > 0)
        logp[child], seen[child], cpt[child] = tables, marks, tables[-1]
        if ps:
            parent[child] = ps[0] if len(ps) == 1 else tuple(ps)
    return Deep(tree_feats, order, parent, mi, cmi, logp, seen, cpt, list(order[s:]), k, s, choice)


# -- leave-one-out selection ----------------------------------------------------------------
def leave_one_out(features: Sequence[Feature], tree_feats: list, order: list, parents: Mapping[str, tuple],
                  stats, hp, K: int) -> dict:
    """Every candidate (k, s)'s leave-one-out RMSE and 0-1 loss from the patterns, and the
    choice (module docstring): ``{"k", "s", "rmse": (K + 1, F) array, "zero_one": …}``,
    column s − 1 for s features."""
    names = [f.name for f in tree_feats]
    others = [f.name for f in features if f.name not in set(names)]
    if others:
        raise SqlnbError(f"structure {hp.structure!r} chooses among discrete features, and {others[0]!r} is none "
                         "(categorical of few values, Bernoulli or binned): bin numeric columns (--bins mdl) or "
                         "leave it out (--exclude)")
    pats = getattr(stats.pairs, "patterns", None)
    if pats is None:
        raise SqlnbError(f"structure {hp.structure!r} chooses k and the features by leave-one-out over the training "
                         f"rows, which this model's statistics do not keep; refit with structure={hp.structure!r} "
                         f"(sqlnb fit --structure {hp.structure})")
    codes = pats.over([tan.feature_values(f, stats.features) for f in tree_feats]) if pats.names == names else None
    if codes is None:
        raise SqlnbError(f"structure {hp.structure!r}: the kept training rows cover other features than the model's; "
                         "refit the model")
    C = len(stats.classes)
    y, w = pats.y, pats.w
    own = np.arange(C)[None, :] == y[:, None]  # (P, C): the row's own class, whose counts lose it
    delta = np.where(own, (w / np.maximum(pats.rows, 1))[:, None], 0.0)
    prior = loo_prior(np.bincount(y, weights=w, minlength=C), delta, hp, stats.classes)
    at = {n: a for a, n in enumerate(names)}
    F = len(order)
    scores = np.zeros((K + 1, F + 1, len(y), C))
    scores[:, 0] = prior
    by_name = {f.name: f for f in tree_feats}
    chosen = {}
    for r, child in enumerate(order):
        f = by_name[child]
        x = codes[:, at[child]]
        terms, chosen[child] = _loo_terms(f, len(tan.feature_values(f, stats.features)), x,
                                          [codes[:, at[p]] for p in parents[child]], y, w, delta, C, hp)
        for k in range(K + 1):
            scores[k, r + 1] = scores[k, r] + terms[min(k, len(terms) - 1)]
    with np.errstate(invalid="ignore"):
        top = scores.max(axis=-1, keepdims=True)
        p = np.exp(scores - top)
        p /= p.sum(axis=-1, keepdims=True)
        truth = np.take_along_axis(p, y[None, None, :, None], axis=-1)[..., 0]
        rmse = np.sqrt(((1 - truth) ** 2 * w).sum(-1) / w.sum())[:, 1:]
        zero_one = ((scores.argmax(-1) != y) * w).sum(-1)[:, 1:] / w.sum()
    best = np.nanmin(rmse)
    ties = np.argwhere(rmse <= best + 1e-12)
    k, s = (int(ties[0][0]), int(ties[0][1]) + 1) if len(ties) else (0, F)
    out = {"k": k, "s": s, "rmse": rmse, "zero_one": zero_one, "order": list(order)}
    if hp.backoff == "loo":
        out["backoff"] = chosen
    return out


def loo_prior(class_n: np.ndarray, delta: np.ndarray, hp, classes: list) -> np.ndarray:
    """ln π_c without the row (P, C): the fitted prior (n_c − δ)/(N − δ), the Dirichlet one
    (n_c − δ + a_c)/(N − δ + Σa); a uniform or given prior does not depend on the rows."""
    n = class_n[None, :] - delta
    with np.errstate(divide="ignore", invalid="ignore"):
        if hp.class_prior == "fitted":
            return np.log(n / n.sum(-1, keepdims=True))
        if hp.class_prior == "dirichlet":
            n = n + hp.class_pseudo(classes)[None, :]
            return np.log(n / n.sum(-1, keepdims=True))
    prior = (np.full(len(classes), 1 / len(classes)) if hp.class_prior == "uniform"
             else given_prior(hp.class_prior, classes))
    return np.broadcast_to(np.log(prior), n.shape)


def _loo_terms(f: Feature, size: int, x: np.ndarray, pcodes: list, y: np.ndarray, w: np.ndarray, delta: np.ndarray,
               C: int, hp) -> tuple[list[np.ndarray], list[float]]:
    """Per depth j = 0 … len(pcodes), the (P, C) leave-one-out ln p_j of each pattern's
    value (0 where the child is missing; the longest present prefix's below j), and the
    back-off m of each depth j ≥ 1 (``hp.backoff``, or under ``"loo"`` :func:`choose_backoff`
    of the own class's leave-one-out counts, before that depth's table is built)."""
    present = x >= 0
    own = np.arange(len(y)), y
    out, ms = [], []
    keys = np.zeros(len(x), dtype=np.int64)  # the prefix configuration, as one integer
    mask = present.copy()
    for j in range(len(pcodes) + 1):
        if j:
            q = pcodes[j - 1]
            mask = mask & (q >= 0)
            keys = keys * (int(q.max(initial=0)) + 2) + np.where(q >= 0, q, 0)
            keys = np.unique(keys, return_inverse=True)[1].ravel()  # dense again: no overflow at depth
        n_x = _counts(keys * (int(x.max(initial=0)) + 2) + x, mask, y, w, C)
        n_pa = _counts(keys, mask, y, w, C)
        rm = np.where(mask[:, None], delta, 0.0)
        if j == 0:
            lp = naive_probability(f, n_x - rm, n_pa - rm, x[:, None], hp, size)
        else:
            m = hp.backoff
            if m == "loo":
                m = choose_backoff((n_x - rm)[own][mask], (n_pa - rm)[own][mask], out[-1][own][mask], w[mask])
            ms.append(m)
            lp = np.where(mask[:, None], backoff(n_x - rm, n_pa - rm, out[-1], m), out[-1])
        out.append(np.where(present[:, None], lp, 0.0) if j == 0 else lp)
    return out, ms


#: The back-off pseudo-counts ``backoff="loo"`` chooses among, in the order equal
#: leave-one-out likelihoods prefer them: nearest the fixed default 1 first, by ratio.
BACKOFF_GRID = (1.0, 0.3, 3.0, 0.1, 10.0, 30.0, 100.0)


def choose_backoff(n: np.ndarray, total: np.ndarray, shorter: np.ndarray, w: np.ndarray) -> float:
    """The m of :data:`BACKOFF_GRID` of the largest leave-one-out log-likelihood
    Σ w · ln((n + m·p_{j−1}) / (total + m)) of the rows' own values and classes, from each
    row's own-class counts without it, ``n`` of its value and ``total``, and its
    leave-one-out ``shorter`` = ln p_{j−1} (its weight ``w`` counts its rows). A row
    whose configuration is left unseen with its class adds ln p_{j−1} whatever m, so it is
    left out; equal sums (no row left) go to the first in the grid's order, m = 1."""
    keep = (total > 0) & (w > 0)
    grid = np.array(BACKOFF_GRID)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        ll = np.log((n[keep] + grid * np.exp(shorter[keep])) / (total[keep] + grid))
    return float(BACKOFF_GRID[int(np.argmax((ll * w[keep]).sum(axis=1)))])


def _counts(key: np.ndarray, mask: np.ndarray, y: np.ndarray, w: np.ndarray, C: int) -> np.ndarray:
    """For each pattern, Σ w of the patterns with its key per class (P, C), over ``mask``."""
    out = np.zeros((len(y), C))
    if not mask.any():
        return out
    _, inv = np.unique(key[mask], return_inverse=True)
    inv = inv.ravel()
    table = np.zeros((inv.max() + 1, C))
    np.add.at(table, (inv, y[mask]), w[mask])
    out[mask] = table[inv]
    return out


# -- scoring ------------------------------------------------------------------------------
def _sparse_pick(index: exp.Expression, keys: np.ndarray, weights: np.ndarray, dialect: str | None) -> exp.Expression:
    """The weight of ``index`` among the given cells only (NULL elsewhere): ``CASE index WHEN
    key THEN weight … END``, or in Spark one MAP lookup (:func:`sqlnb.sql.map_lookup`: its
    CASE for kdb:4 over 8 features was interpreted, 262 s for 300 rows)."""
    if not len(keys):
        return exp.Null()
    if dialect == "spark":
        return sql.map_lookup(keys, weights, index)
    return exp.Case(this=sql.paren(index), ifs=[exp.If(this=exp.Literal.number(int(k)), true=sql.dbl(float(v)))
                                                 for k, v in zip(keys, weights)])


def child_terms(net: Deep, features: Sequence[Feature], stats, params: Mapping[str, Any],
                dialect: str | None, input_types: Mapping[str, str] | None,
                positions: Mapping[str, exp.Expression] | None = None) -> dict[str, list]:
    """Each kept child's per-class terms (module docstring), and 0 for each dropped
    feature; ``positions`` as for :func:`sqlnb.models.naive_bayes.tan.child_terms`."""
    by_name = {f.name: f for f in features}
    if positions is None:
        positions = tan.tree_positions(net, features, stats, dialect, input_types)
    C = len(stats.classes)
    out: dict[str, list] = {name: [sql.dbl(0.0) for _ in range(C)] for name in net.dropped}
    for child, par in net.parent.items():
        ps = _parents(par)
        tables = net.logp[child]
        n_x = tables[0].shape[1]
        naive = tan.naive_row(by_name[child], params[child])
        index: exp.Expression = exp.Cast(this=positions[ps[0]].copy(), to=exp.DataType.build("BIGINT"))
        indexes = []
        for j, p in enumerate(ps):  # row-major over the first j + 1 parents' positions (NULL when any is)
            if j:
                index = exp.Add(this=exp.Mul(this=sql.paren(index),
                                             expression=exp.Literal.number(tables[j + 1].shape[j + 1])),
                                expression=sql.paren(positions[p].copy()))
            indexes.append(exp.Add(this=exp.Mul(this=sql.paren(index.copy()), expression=exp.Literal.number(n_x)),
                                   expression=sql.paren(positions[child].copy())))
        terms = []
        for k in range(C):
            picks = []
            for j in range(len(ps), 0, -1):
                configs = np.flatnonzero(net.seen[child][j - 1].ravel())
                cells = tables[j][k].reshape(-1, n_x)[configs]
                keys = (configs[:, None] * n_x + np.arange(n_x)[None, :]).ravel()
                picks.append(_sparse_pick(indexes[j - 1], keys, cells.ravel(), dialect))
            picks += [tan._pick(positions[child].copy(), naive[k], dialect), sql.dbl(0.0)]
            terms.append(exp.Coalesce(this=picks[0], expressions=picks[1:]))
        out[child] = terms
    return out


def trie(net: Deep, child: str) -> tuple[list[np.ndarray], np.ndarray, list[int]]:
    """DuckDB's form of a child's tables (:mod:`~sqlnb.models.naive_bayes.listed`): the
    configurations seen at each depth as nodes of a trie. Returns ``(steps, cells,
    bases)``: ``steps[j − 1]`` maps (node of depth j − 1, value position of pa_j, its
    last slot missing) to the node of depth j, −1 when unseen (row-major, n_pa_j + 1 per
    node); ``cells`` (C, nodes, n_child + 1) the ln p_j of every node, the root's the
    naive row, a missing child's slot 0; ``bases[j]`` the first row of depth j's nodes."""
    tables = net.logp[child]
    C, n_x = tables[0].shape
    nodes = [np.zeros((1, 0), dtype=np.int64)]
    steps, rows, bases = [], [tables[0][:, None, :]], [0]
    for j in range(1, len(tables)):
        cur = np.argwhere(net.seen[child][j - 1])  # (m_j, j), row-major order
        n_pa = net.seen[child][j - 1].shape[-1]
        at = {tuple(t): i for i, t in enumerate(nodes[-1].tolist())}
        step = np.full((len(nodes[-1]), n_pa + 1), -1, dtype=np.int64)
        for i, t in enumerate(cur.tolist()):  # a seen configuration's prefix was seen one depth up
            step[at[tuple(t[:-1])], t[-1]] = i
        steps.append(step.ravel())
        bases.append(bases[-1] + len(nodes[-1]))
        nodes.append(cur)
        rows.append(tables[j][(slice(None), *cur.T)])
    cells = np.concatenate(rows, axis=1)
    return steps, np.concatenate([cells, np.zeros((C, cells.shape[1], 1))], axis=2), bases


def conditionals(net: Deep, stats) -> dict[str, dict]:
    """Each child's deepest table as :func:`sqlnb.models.naive_bayes.kdb.conditionals`
    gives it (``parent`` a name or a tuple, ``log_proba`` (C, parent values…, values)),
    with several parents ``configs``: the parents' value positions seen in training."""
    by_name = {f.name: f for f in net.features}
    out = {}
    for child, par in net.parent.items():
        pv = [tan.feature_values(by_name[p], stats.features) for p in _parents(par)]
        out[child] = {"parent": par, "parent_values": pv[0] if isinstance(par, str) else pv,
                      "values": tan.feature_values(by_name[child], stats.features), "log_proba": net.cpt[child]}
        if not isinstance(par, str):  # the configurations seen in training (the others back off)
            out[child]["configs"] = [tuple(int(i) for i in t) for t in np.argwhere(net.seen[child][-1])]
    return out


# -- storage ------------------------------------------------------------------------------
def metadata(pairs) -> dict:
    """The model metadata naming the stored joint-count sets and pattern features."""
    out = {}
    if getattr(pairs, "joints", None):
        out["joint_features"] = [list(t) for t in pairs.joints]
    if getattr(pairs, "patterns", None) is not None:
        out["pattern_features"] = list(pairs.patterns.names)
    return out


def count_tables(stats) -> dict:
    """The ``joints`` part (:func:`kdb.joint_table`) and, under ``skdb``, the ``patterns``
    part: ``(class_index, x0 … x<F−1>, w, rows)``, x the index into the feature's stored
    values (NULL when missing)."""
    import pyarrow as pa

    from sqlnb.store import arrow
    pairs = stats.pairs
    out = {}
    if getattr(pairs, "joints", None):
        out["joints"] = (kdb.joint_table(pairs, stats), {})
    pats = getattr(pairs, "patterns", None)
    if pats is not None:
        codes = pats.over([tan._stored_values(n, stats) for n in pats.names])
        cols = {"class_index": arrow.array(pats.y.tolist(), pa.int32())}
        for a in range(len(pats.names)):
            cols[f"x{a}"] = arrow.array([None if v < 0 else int(v) for v in codes[:, a]], pa.int32())
        cols["w"] = arrow.array(pats.w.tolist(), pa.float64())
        cols["rows"] = arrow.array(pats.rows.tolist(), pa.float64())
        out["patterns"] = (pa.table(cols), {})
    return out


def counts_from_tables(pairs, meta: Mapping[str, Any], tables: Mapping[str, Any], feats: Mapping[str, Any], K: int):
    """``pairs`` with the joint counts and patterns :func:`count_tables` stored."""
    if pairs is None or not (meta.get("joint_features") or meta.get("pattern_features")):
        return pairs
    if meta.get("joint_features"):
        pairs = kdb.joints_from_table(pairs, meta["joint_features"], tables.get("joints"), feats, K)
    else:
        pairs = kdb.KdbPairs(list(pairs.features), dict(pairs.cells), {})
    names = meta.get("pattern_features")
    if names:
        values = [list(feats[n].values) if isinstance(feats[n], Counts) else tan.BERNOULLI_VALUES for n in names]
        t = tables["patterns"].to_pydict()
        codes = np.array([[-1 if v is None else v for v in t[f"x{a}"]] for a in range(len(names))],
                         dtype=np.int64).T.reshape(len(t["w"]), len(names))
        pairs.patterns = Patterns(list(names), values, np.array(t["class_index"], dtype=np.int64), codes,
                                  np.array(t["w"], dtype=float), np.array(t["rows"], dtype=float))
    return pairs


def with_patterns(stats, features: Sequence[Feature], read) -> Any:
    """``stats`` keeping the training rows over the tree features as :class:`Patterns`
    (``skdb``): ``read(features, shim)`` is :func:`sqlnb.models.naive_bayes.weighted.read_patterns`
    bound to the engine and source, ``shim`` the classes and each feature's values."""
    by_name = {f.name: f for f in features}
    tree = [by_name[n] for n in stats.pairs.features]
    shim = SimpleNamespace(classes=list(stats.classes), features={
        f.name: SimpleNamespace(values=tan.feature_values(f, stats.features)) for f in tree})
    pats = patterns_of(lambda values: read(tree, shim), tree, stats)
    pairs = stats.pairs
    stats.pairs = kdb.KdbPairs(list(pairs.features), dict(pairs.cells), dict(getattr(pairs, "joints", {})), pats)
    return stats


def with_fold_patterns(per_fold: Sequence[Any], features: Sequence[Feature], read) -> list:
    """Per-fold statistics each keeping its own rows as :class:`Patterns` (so that a union
    of folds merges to its rows'), from ``read(tree, shim)``: one scan grouped by fold
    (:func:`sqlnb.models.naive_bayes.weighted.read_patterns` with ``fold``)."""
    every = per_fold[0]
    for s in per_fold[1:]:
        every = every.merge(s)
    found: dict = {}
    with_patterns(every, features, lambda tree, shim: found.setdefault("all", read(tree, shim)))
    rows, pats = found["all"], every.pairs.patterns
    values = [tan.feature_values(f, every.features) for f in [{f.name: f for f in features}[n] for n in pats.names]]
    codes = np.where(rows.codes >= np.array([len(v) for v in values]), -1, rows.codes)
    out = []
    for i, s in enumerate(per_fold):
        mine = rows.fold == i
        p = grouped(pats.names, values, rows.y[mine], codes[mine], rows.n[mine],
                    (rows.rows if rows.rows is not None else rows.n)[mine])
        pairs = s.pairs
        out.append(replace(s, pairs=kdb.KdbPairs(list(pairs.features), dict(pairs.cells),
                                                 dict(getattr(pairs, "joints", {})), p)))
    return out
