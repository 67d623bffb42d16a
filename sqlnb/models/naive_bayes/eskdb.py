"""Ensembles of selective KDBs (``structure="eskdb"`` or ``"eskdb:K"``): several
:mod:`~sqlnb.models.naive_bayes.skdb` models over randomly perturbed structures, their
posterior probabilities averaged (after Zhang, Petitjean, Buntine et al., "Ensembles of
selective k-dependence Bayesian classifiers", 2020).

Members. Member t = 0 … T − 1 (:data:`MEMBERS`) draws from a generator seeded ``[seed,
t]`` (:data:`SEED`; numpy's ``default_rng``) F Gumbel variates g and ranks the discrete
features by ln max(I(X; C), 1e-12) + τ·g, highest first (ties to the model order), τ
:data:`TEMPERATURE`. Then, feature by feature in that ranking, it draws one Gumbel variate
per feature ranked before it and takes as the ranked parent list the up to K of those of
highest ln max(I(X_i; X_j | C), 1e-12) + τ·g (ties to the earlier ranked). τ = 0 would
give every member skdb's own structure; the perturbation makes the members differ in
which dependencies they hold. Each member is then an skdb of that ranking and those
parent lists: its back-off m per feature and depth and its (k, s) chosen by skdb's
leave-one-out from the same counts (:func:`skdb.leave_one_out`).

Statistics: the pair counts (for I(X_i; X_j | C)) and the training rows as distinct
patterns with their weights (:class:`~sqlnb.models.naive_bayes.skdb.Patterns`), nothing
else: every member's prefix counts n_j(c, pa_1..j, x) are sums over the patterns
(:func:`pattern_counts`), whatever parents the draw gave it. So ``update`` merges the
patterns and derives every member again, as a fit on all the rows would; ``cv`` and
``with_params`` need nothing more.

Score. Member t's joint log-score is skdb's, J_t(c, x) = ln π_c + Σ its kept children's
terms (:func:`skdb.child_terms`: a missing value or parent backs off or adds nothing). The
class score is the logarithm of the members' mean posterior::

    a_t(c) = J_t(c, x) − LSE_c' J_t(c', x)          (member t's ln p_t(c | x))
    s(c)   = LSE_t a_t(c) − ln T

each log-sum-exp shifted by its own maximum, so no exp overflows and every s(c) is finite.
:class:`Combiner`'s four stages write each maximum and each member's LSE as a column once
(per member max_c J_t and LSE_c' J_t, per class max_t a_t(c), then s), so the SQL grows as
members × classes: with the maxima written inside every exp instead, the breast-cancer
ensemble's scoring SELECT was 50 kB, 26 kB now (benchmarks/structured_scoring.py). The
finish then normalises s as it does any class score (Σ_c exp s(c) = 1 already).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.finish import ClassScore, class_columns
from sqlnb.models.naive_bayes import kdb, listed, skdb, tan
from sqlnb.models.naive_bayes.families import Feature

#: How many members an ensemble has.
MEMBERS = 20
#: τ, the scale of the Gumbel perturbation of the log information. On spambase's five
#: outer folds (benchmarks/accuracy.py's), a numpy prototype of 20 members at τ = 2 had
#: 5.59 % error against skdb's 6.54 %.
TEMPERATURE = 2.0
#: The first word of every member's seed.
SEED = 0
_PATTERN = re.compile(r"eskdb(?::(\d+))?")


def order_of(structure: Any) -> int | None:
    """K of ``"eskdb"`` (:data:`kdb.MAX_K`) or ``"eskdb:K"`` (1 ≤ K ≤ MAX_K); None else."""
    m = _PATTERN.fullmatch(structure) if isinstance(structure, str) else None
    if m is None:
        return None
    K = int(m.group(1) or kdb.MAX_K)
    return K if 1 <= K <= kdb.MAX_K else None


def ensemble(structure: Any) -> bool:
    """Whether ``structure`` is ``eskdb`` or ``eskdb:K``."""
    return order_of(structure) is not None


@dataclass
class Ensemble:
    """The derived members (:class:`skdb.Deep`, each with its own ranking, parents,
    choice and tables) and the tree features they share."""

    nets: list
    features: list
    plan: Any = None  # DuckDB's lists (:func:`listed_plan`), built once


def perturbed(mi: np.ndarray, cmi: np.ndarray, K: int, rng: np.random.Generator, temp: float):
    """One member's ranking (feature indexes) and parent lists (index -> tuple of indexes)
    from I(X; C) and I(X_i; X_j | C), as the module docstring draws them."""
    F = len(mi)
    key = np.log(np.maximum(mi, 1e-12)) + temp * rng.gumbel(size=F)
    order = [int(i) for i in np.argsort(-key, kind="stable")]
    parents = {}
    for r, i in enumerate(order):
        before = np.array(order[:r], dtype=np.int64)
        if not r:
            parents[i] = ()
            continue
        noisy = np.log(np.maximum(cmi[i, before], 1e-12)) + temp * rng.gumbel(size=r)
        parents[i] = tuple(int(before[j]) for j in np.argsort(-noisy, kind="stable")[:K])
    return order, parents


def pattern_counts(codes: np.ndarray, y: np.ndarray, w: np.ndarray, cols: Sequence[int], sizes: Sequence[int],
                   C: int) -> np.ndarray:
    """Σ w of the patterns per (class, value of each of ``cols``) over the patterns with
    all of them present: a dense (C, sizes…) table (``codes`` −1 missing)."""
    out = np.zeros((C, *sizes))
    sub = codes[:, list(cols)]
    keep = (sub >= 0).all(axis=1)
    np.add.at(out, (y[keep], *sub[keep].T), w[keep])
    return out


def derive(features: Sequence[Feature], stats, hp, params: Mapping[str, Any], K: int) -> Ensemble:
    """Every member's structure, choice and back-off tables (module docstring)."""
    structure = hp.structure
    if hp.unseen != "missing":
        raise SqlnbError(f"structure {structure!r} scores unseen categories as missing; leave unseen at 'missing'")
    tree_feats, _, _, mi, cmi = kdb.structure(features, stats, K)
    names = [f.name for f in tree_feats]
    pats = getattr(stats.pairs, "patterns", None)
    if pats is None or pats.names != names:
        raise SqlnbError(f"structure {structure!r} counts every member's parents from the training rows kept as "
                         f"patterns, which this model's statistics do not hold; refit with structure={structure!r} "
                         f"(sqlnb fit --structure {structure})")
    values = [tan.feature_values(f, stats.features) for f in tree_feats]
    sizes = [len(v) for v in values]
    codes = pats.over(values)
    C = len(stats.classes)

    def counts(child: str, ps: tuple, j: int) -> np.ndarray:  # n_j(c, pa_1..j, x), summed over the patterns
        cols = [names.index(p) for p in ps[:j]] + [names.index(child)]
        return pattern_counts(codes, pats.y, pats.w, cols, [sizes[c] for c in cols], C)

    nets = []
    for t in range(MEMBERS):
        order_i, parents_i = perturbed(mi, cmi, K, np.random.default_rng([SEED, t]), TEMPERATURE)
        order = [names[i] for i in order_i]
        parents = {names[i]: tuple(names[j] for j in ps) for i, ps in parents_i.items()}
        choice = skdb.leave_one_out(features, tree_feats, order, parents, stats, hp, K)
        nets.append(skdb.network(tree_feats, order, parents, mi, cmi, choice["k"], choice["s"], choice, hp, params,
                                 counts))
    return Ensemble(nets, tree_feats)


def describe(ens: Ensemble, K: int) -> dict:
    """What ``sqlnb show`` says of an ensemble, JSON-ready: K, τ, the seed, and per member
    (``members``, in member order) its ranking (``order``), every feature's ranked parent
    list (``parents``: the draw's, up to K, redrawn by :func:`perturbed` from the member's
    I(X; C) and I(X_i; X_j | C)), the chosen ``k`` and ``s`` (the first s of ``order`` kept,
    each on the first k of its list), that choice's leave-one-out ``rmse`` and ``zero_one``
    loss, and under ``backoff="loo"`` each feature's m per depth (``backoff``)."""
    names = [f.name for f in ens.features]
    members = []
    for t, net in enumerate(ens.nets):
        c = net.choice
        _, parents = perturbed(net.mi, net.cmi, K, np.random.default_rng([SEED, t]), TEMPERATURE)
        k, s = int(c["k"]), int(c["s"])
        members.append({"k": k, "s": s, "order": list(net.order),
                        "parents": {n: [names[j] for j in parents[names.index(n)]] for n in net.order},
                        "rmse": float(c["rmse"][k][s - 1]), "zero_one": float(c["zero_one"][k][s - 1]),
                        **({"backoff": {n: [float(m) for m in ms] for n, ms in c["backoff"].items()}}
                           if "backoff" in c else {})})
    return {"k_max": K, "temperature": TEMPERATURE, "seed": SEED, "members": members}


def listed_plan(ens: Ensemble, stats) -> tuple[listed.Plan, list[tuple[int, int]]]:
    """DuckDB's form (:mod:`~sqlnb.models.naive_bayes.listed`): every member's kept
    children as the children of one deep plan, keyed ``(t, child)``, each a trie of its
    seen configurations (a child without parents its naive row alone), and member t's
    span ``[lo, hi)`` of them in the list of places."""
    if ens.plan is None:
        names = list(stats.pairs.features)
        by_name = {f.name: f for f in ens.features}
        out = listed.Plan(names, {n: len(tan.feature_values(by_name[n], stats.features)) for n in names})
        spans = []
        for t, net in enumerate(ens.nets):
            lo = len(out.deep)
            for child in net.order[:net.s]:
                steps, cells, bases = skdb.trie(net, child)
                found = []
                for j, (step, parent) in enumerate(zip(steps, skdb._parents(net.parent.get(child)))):
                    found.append((len(out.steps), bases[j + 1], out.sizes[parent], parent))
                    out.steps += step.tolist()
                out.deep[(t, child)] = (out.add(cells.reshape(cells.shape[0], -1)), cells.shape[2] - 1, found)
            spans.append((lo, len(out.deep)))
        out.deep_layout()
        ens.plan = (out, spans)
    return ens.plan


def prelude(ens: Ensemble, features: Sequence[Feature], stats,
            input_types: Mapping[str, str] | None) -> list[tuple[str, exp.Expression]]:
    """DuckDB's prelude columns: :func:`listed.prelude`'s positions, lists, nodes and
    places, and per member the slice of the places its children read."""
    p, spans = listed_plan(ens, stats)
    every = f"{listed.READS_PREFIX}0"
    out = [c for c in listed.prelude(p, None, features, stats, input_types) if c[0] != every]
    return out + [(f"{listed.READS_PREFIX}{t + 1}", exp.Anonymous(this="list_slice", expressions=[
        sql.col(listed.PLACES), exp.Literal.number(lo + 1), exp.Literal.number(hi)]))
        for t, (lo, hi) in enumerate(spans)]


def member_scores(ens: Ensemble, features: Sequence[Feature], stats, params: Mapping[str, Any],
                  dialect: str | None, input_types: Mapping[str, str] | None, prior: bool) -> list[ClassScore]:
    """Each member's joint log-score J_t(c, x) per class, member-major (index t·C + c):
    the raw scores :class:`Combiner` reads. In DuckDB each is one sum over the lists of
    :func:`prelude`; elsewhere each kept child's term is written out (:func:`skdb.child_terms`)."""
    C = len(stats.classes)
    if dialect == "duckdb":
        return [ClassScore(tuple([sql.dbl(float(params["prior"][c]))] if prior else []) + (listed._sum(
                    f"{listed.READS_PREFIX}{t + 1}", c),)) for t in range(len(ens.nets)) for c in range(C)]
    positions = tan.tree_positions(ens.nets[0], features, stats, dialect, input_types)
    by_name = {f.name: f for f in features}
    out = []
    for net in ens.nets:
        terms = skdb.child_terms(net, features, stats, params, dialect, input_types, positions)
        for child in net.order[:net.s]:  # a kept feature without parents: its naive Bayes term, 0 when missing
            if child not in net.parent:
                naive = tan.naive_row(by_name[child], params[child])
                terms[child] = [exp.Coalesce(this=tan._pick(positions[child].copy(), naive[c], dialect),
                                             expressions=[sql.dbl(0.0)]) for c in range(C)]
        for c in range(C):
            kept = [terms[child][c] for child in net.order[:net.s]]
            head = [sql.dbl(float(params["prior"][c]))] if prior else []
            out.append(ClassScore(tuple(head + (kept or [sql.dbl(0.0)]))))
    return out


@dataclass
class Combiner:
    """The stages from the members' raw scores to the class scores (module docstring),
    in the shape :func:`sqlnb.models.finish.scoring_select` takes a calibrator's."""

    members: int

    def raw_columns(self, classes: Sequence[Any]) -> list[str]:
        """``member<t>_<class>``: member t's J_t(c, x), member-major."""
        return [n for t in range(self.members) for n in class_columns(f"member{t}_", classes)]

    def helper_columns(self, classes: Sequence[Any]) -> list[str]:
        """Every column the stages add besides their output."""
        return [*self.raw_columns(classes), *self._names(classes)[0], *self._names(classes)[1],
                *self._names(classes)[2]]

    def _names(self, classes: Sequence[Any]) -> tuple[list[str], list[str], list[str]]:
        return ([f"member{t}_max" for t in range(self.members)], [f"member{t}_lse" for t in range(self.members)],
                class_columns("members_max_", classes))

    def stages(self, classes: Sequence[Any], out: Sequence[str]) -> list[list[tuple[str, exp.Expression]]]:
        """Four SELECT lists, each maximum a column of its own so that no expression repeats
        another (the SQL grows as members × classes): per member m_t = max_c J_t(c) and then
        LSE_c J_t(c) = m_t + ln Σ_c exp(J_t(c) − m_t); per class M_c = max_t a_t(c); then
        ``out[c]`` = s(c) = M_c + ln Σ_t exp(a_t(c) − M_c) − ln T."""
        C, T = len(classes), self.members
        raw = self.raw_columns(classes)
        J = [[sql.col(raw[t * C + c]) for c in range(C)] for t in range(T)]
        tops, lses, maxes = self._names(classes)

        def a(t: int, c: int) -> exp.Expression:  # member t's ln p_t(c | x)
            return exp.Sub(this=J[t][c].copy(), expression=sql.col(lses[t]))

        def lse(xs: list, top: exp.Expression) -> exp.Expression:
            total = sql.add([exp.Exp(this=exp.Sub(this=sql.paren(x), expression=top.copy())) for x in xs])
            return exp.Add(this=top.copy(), expression=exp.Ln(this=total))

        return [[(tops[t], sql.greatest([x.copy() for x in J[t]])) for t in range(T)],
                [(lses[t], lse([x.copy() for x in J[t]], sql.col(tops[t]))) for t in range(T)],
                [(maxes[c], sql.greatest([a(t, c) for t in range(T)])) for c in range(C)],
                [(out[c], exp.Sub(this=sql.paren(lse([a(t, c) for t in range(T)], sql.col(maxes[c]))),
                                  expression=sql.dbl(math.log(T)))) for c in range(C)]]
