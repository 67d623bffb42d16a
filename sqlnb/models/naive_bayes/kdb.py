"""K-dependence Bayesian classifier (Sahami 1996, ``structure="kdb:K"``, K = 1 or 2):
each discrete feature conditioned on the class and on up to K features ranked before it.
K = 3 to 5 and the selective ``skdb`` share this module's structure and statistics (the
joint counts of each child with every prefix of its ranked parents, :func:`needed_triples`)
and are derived by :mod:`~sqlnb.models.naive_bayes.skdb`, with back-off smoothing.

Tree features are TAN's (:func:`~sqlnb.models.naive_bayes.tan.eligible`: categorical
columns of at most ``INLINE_MAX`` values, Bernoulli and binned columns); Gaussian, count
and text columns stay naive in the same model, as under TAN.

Structure, derived from the statistics whenever log-probabilities are (never stored):

1. Features are ranked by I(X_i; C), the plug-in mutual information of their own
   per-(class, value) counts over the rows where they are present
   (:func:`~sqlnb.models.naive_bayes.information.table_mi`; Bernoulli: present against
   absent), highest first; equal values keep the model's feature order.
2. Feature i takes as parents up to K of the features ranked before it, those of highest
   I(X_i; X_j | C) (TAN's plug-in estimate from the pair counts,
   :func:`~sqlnb.models.naive_bayes.tan.conditional_mutual_information`); equal values go
   to the feature ranked earlier. Sahami's optional threshold on I(X_i; X_j | C) is not
   applied: every feature ranked third or later takes exactly K parents (K = 2).

Statistics. K = 1 needs only TAN's pair counts n(c, x_a, x_b). K = 2 also needs, for
each feature with two parents, the joint counts n(c, x_a, x_b, x_d) of the three
(:class:`JointCounts`, over the rows where all three are present): they are gathered in
a second aggregation after the structure is chosen from the pair counts (one more
scan, :func:`triples_query`), and kept with the pair counts (:class:`KdbPairs`, the
``joints`` part of a saved model). They add under ``update`` like every count. An
update whose merged pair counts give a feature other parents than those counted cannot
be the refit (the new parents' joint counts over the old rows were never gathered): it
is refused, naming the feature, and the model must be refit.

Parameters, smoothed like the child's own family with the estimator's pseudo-count α
(posterior mean α, MAP α − 1, MLE 0; Bernoulli β₁ for present, β₀ for absent), with n_j
the child's number of training values::

    categorical or binned   p(u | c, v)      = (n(c, v, u) + α) / (n(c, v) + α·n_j)
                            p(u | c, v, w)   = (n(c, v, w, u) + α) / (n(c, v, w) + α·n_j)
    Bernoulli               the same with β₁ (u present) or β₀ (u absent) for α, β₁ + β₀ for α·n_j

A cell whose numerator and denominator are both 0 (no rows and no pseudo-count: MLE,
or MAP with α = 1) falls back to the child's naive Bayes probabilities, as under TAN.

Scoring, one term per feature and class (NULL, NaN and unseen values are missing)::

    child missing                        0                      (no evidence)
    no parent (the first ranked)         ln p(x | c)            (naive Bayes term)
    every parent missing                 ln p(x | c)
    one of two parents missing           ln p(x | c, x_present_parent)   (pair counts)
    all parents present                  ln p(x | c, x_parents)

so a missing parent is marginalised by conditioning on the parents that are present
only. In SQL a two-parent term is ``COALESCE`` of the joint pick, the two one-parent
picks and the naive pick (a pick is NULL when any position it reads is), each a CASE
(:func:`sqlnb.models.naive_bayes.tan._pick`); in DuckDB one read of one table holding all
of them, padded with a missing slot per axis (:func:`sqlnb.models.naive_bayes.tan.padded_cells`),
from the scoring prelude's list of every table (:mod:`sqlnb.models.naive_bayes.listed`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import tan
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.models.naive_bayes.information import presence_mi, table_mi
from sqlnb.stats import Counts, _align, sorted_values
from sqlnb.store import arrow

#: The most parents a feature takes: K ≤ 2 as above, K = 3 to 5 with the prefix counts and
#: back-off smoothing of :mod:`~sqlnb.models.naive_bayes.skdb`.
MAX_K = 5
#: The parents per feature this module scores itself (Sahami's flat smoothing); deeper
#: structures and ``skdb`` are :mod:`~sqlnb.models.naive_bayes.skdb`'s.
SAHAMI_K = 2
_PATTERN = re.compile(r"kdb:(\d+)|skdb(?::(\d+))?")


def order_of(structure: str) -> int | None:
    """The most parents a feature takes under ``structure``: K of ``"kdb:K"`` (1 ≤ K ≤
    :data:`MAX_K`), K_max of ``"skdb"`` (:data:`MAX_K`) or ``"skdb:K"`` (the deepest
    prefix counts are gathered for); None for any other string."""
    m = _PATTERN.fullmatch(structure) if isinstance(structure, str) else None
    if m is None:
        return None
    K = int(m.group(1) or m.group(2) or MAX_K)
    return K if 1 <= K <= MAX_K else None


# -- statistics ---------------------------------------------------------------------------
@dataclass
class JointCounts:
    """Per (class, value of each of ``names``) weighted counts of a set of features (in
    the model's order), over the rows where all are present."""

    names: tuple
    values: list  # one value list per name
    counts: np.ndarray  # (n_classes, *len(values[i]))

    def align(self, src: list, dst: list) -> "JointCounts":
        return JointCounts(self.names, [list(v) for v in self.values], _align(self.counts, src, dst, axis=0))

    def over(self, values: Sequence[list]) -> np.ndarray:
        """The counts re-indexed to (superset) value lists, zeros elsewhere."""
        out = self.counts
        for axis, (src, dst) in enumerate(zip(self.values, values)):
            out = _align(out, list(src), list(dst), axis=axis + 1)
        return out

    def merge(self, other: "JointCounts") -> "JointCounts":
        values = [sorted_values(list(a) + list(b)) for a, b in zip(self.values, other.values)]
        return JointCounts(self.names, values, self.over(values) + other.over(values))

    def scaled(self, factor: float) -> "JointCounts":
        return JointCounts(self.names, [list(v) for v in self.values], self.counts * factor)

    def take(self, idx) -> "JointCounts":
        return JointCounts(self.names, [list(v) for v in self.values], self.counts[idx])


@dataclass
class KdbPairs(tan.Pairs):
    """TAN's pair counts plus the joint counts of the feature triples a KDB(2) structure
    uses, keyed by the triple's names in the model's order."""

    joints: dict = field(default_factory=dict)
    #: ``skdb``: the training rows as patterns (:class:`sqlnb.models.naive_bayes.skdb.Patterns`).
    patterns: Any = None

    def _map(self, fn) -> "KdbPairs":
        base = tan.Pairs._map(self, fn)
        return KdbPairs(base.features, base.cells, {k: fn(v) for k, v in self.joints.items()},
                        None if self.patterns is None else fn(self.patterns))

    def restricted(self, keep) -> "KdbPairs":
        base = tan.Pairs.restricted(self, keep)
        return KdbPairs(base.features, base.cells,
                        {k: v for k, v in self.joints.items() if all(n in keep for n in k)},
                        None if self.patterns is None else self.patterns.restricted(keep))

    def merge(self, other: "tan.Pairs") -> "tan.Pairs":
        base = tan.Pairs.merge(self, other)
        theirs = getattr(other, "joints", {})
        mine, their_rows = self.patterns, getattr(other, "patterns", None)
        # A set counted on one side only has no exact merge: it is left out (a structure
        # that needs it is refused when derived); likewise the rows of one side only.
        return KdbPairs(base.features, base.cells, {k: v.merge(theirs[k]) for k, v in self.joints.items()
                                                    if k in theirs},
                        None if mine is None or their_rows is None else mine.merge(their_rows))


def triples_query(source, label: str, weight: str | None, features: Sequence[Feature],
                  triples: Sequence[tuple[int, ...]], group: exp.Expression | None = None) -> exp.Select:
    """TAN's :func:`~sqlnb.models.naive_bayes.tan.pairs_query` with one grouping set
    ``(label, x_a, x_b, x_d)`` per triple of positions in ``features``: the joint counts of
    every triple in one scan (``group``, e.g. a cross-validation fold: one more key of
    every set, returned last)."""
    full = tan.pairs_query(source, label, weight, features, group, pairs=[(0, 1)])
    k = sql.col("k", "t")
    extra = [sql.col("fold", "t")] if group is not None else []
    sets = [exp.Tuple(expressions=[k.copy(), *(e.copy() for e in extra),
                                   *(sql.col(f"x{j}", "t") for j in t)]) for t in triples]
    return full.group_by(exp.GroupingSets(expressions=sets), append=False)


def collect_joints(engine, source, label: str, weight: str | None, features: Sequence[Feature],
                   names: Sequence[tuple[str, ...]], classes: list,
                   group: exp.Expression | None = None) -> dict | dict[Any, dict]:
    """Joint counts of the feature triples ``names`` (each in model order) over
    ``classes``, from one scan (:func:`triples_query`); with ``group``, one dict per value
    of it."""
    if not names:
        return {}
    from sqlnb.engines import as_engine  # a DuckDB connection or an engine, as collect_statistics takes
    engine = as_engine(engine)
    index = {c: i for i, c in enumerate(classes)}
    used = [f for f in features if any(f.name in t for t in names)]
    at = {f.name: i for i, f in enumerate(used)}
    query = triples_query(source, label, weight, used, [tuple(at[n] for n in t) for t in names], group)
    cells: dict[Any, dict] = {}
    for r in engine.execute(query):
        g = r[-1] if group is not None else None
        n = float((r[-2] if group is not None else r[-1]) or 0.0)
        on = tuple(f.name for i, f in enumerate(used) if r[2 + 2 * i] == 0)
        vals = tuple(r[1 + 2 * at[name]] for name in on)
        if any(v is None for v in vals) or r[0] not in index:
            continue
        cell = cells.setdefault(g, {}).setdefault(on, {})
        key = (index[r[0]], *vals)
        cell[key] = cell.get(key, 0.0) + n

    def build(found: Mapping) -> dict:
        out = {}
        for t in names:
            cell = found.get(tuple(t), {})
            values = [sorted_values(key[1 + i] for key in cell) for i in range(len(t))]
            pos = [{v: j for j, v in enumerate(vs)} for vs in values]
            counts = np.zeros((len(classes), *(len(v) for v in values)))
            for key, n in cell.items():
                counts[(key[0], *(pos[i][v] for i, v in enumerate(key[1:])))] = n
            out[tuple(t)] = JointCounts(tuple(t), values, counts)
        return out

    if group is None:
        return build(cells.get(None, {}))
    return {g: build(c) for g, c in cells.items()}


def with_joints(engine, source, label: str, weight: str | None, features: Sequence[Feature], stats,
                K: int):
    """``stats`` with the joint counts its KDB(``K``) structure needs (one more scan when
    K = 2; K = 1 needs the pair counts only)."""
    if K < 2 or stats.pairs is None:
        return stats
    names = needed_triples(features, stats, K)
    joints = collect_joints(engine, source, label, weight, features, names, stats.classes)
    stats.pairs = KdbPairs(list(stats.pairs.features), dict(stats.pairs.cells), joints)
    return stats


def with_fold_joints(engine, source, label: str, features: Sequence[Feature], fold: exp.Expression,
                     per_fold: Sequence[Any], orders: Sequence[int]) -> list:
    """Per-fold statistics (with their pair counts) given the joint counts of every triple
    that any fold's training statistics (all folds but one) or all folds together use
    under KDB(K) for each K in ``orders``, from one more scan grouped by fold, so that any
    union of folds merges to the counts its own structure needs."""
    names: list = []
    unions = []
    for i in range(len(per_fold)):
        merged = None
        for j, s in enumerate(per_fold):
            if j != i:
                merged = s if merged is None else merged.merge(s)
        unions.append(merged)
    every = per_fold[0]
    for s in per_fold[1:]:
        every = every.merge(s)
    for stats in [*unions, every]:
        for K in orders:
            for t in needed_triples(features, stats, K):
                if t not in names:
                    names.append(t)
    if not names:
        return list(per_fold)
    found = collect_joints(engine, source, label, None, features, names, every.classes, fold)
    out = []
    for i, s in enumerate(per_fold):
        mine = found.get(i, {})
        joints = {t: mine.get(t) or JointCounts(t, [[] for _ in t], np.zeros((len(every.classes), 0, 0, 0)))
                  for t in names}
        out.append(replace(s, pairs=KdbPairs(list(s.pairs.features), dict(s.pairs.cells), joints)))
    return out


def needed_triples(features: Sequence[Feature], stats, K: int) -> list[tuple[str, ...]]:
    """The feature sets whose joint counts the KDB(K) structure the statistics give needs,
    as names in model order: each child with the first j of its ranked parents, j = 2 …
    K (for K = 2 the (child, parent, parent) triples; a set's counts are those of its
    features whichever of them is the child)."""
    tree_feats, order, parents, _, _ = structure(features, stats, K)
    rank = {f.name: i for i, f in enumerate(tree_feats)}
    out: list[tuple[str, ...]] = []
    for child, ps in parents.items():
        for j in range(2, len(ps) + 1):
            t = tuple(sorted((child, *ps[:j]), key=rank.get))
            if t not in out:
                out.append(t)
    return out


# -- structure ----------------------------------------------------------------------------
def class_information(f: Feature, stat: Any) -> float:
    """I(X; C) in nats of one tree feature from its own counts (module docstring)."""
    if isinstance(stat, Counts):
        return table_mi(stat.counts)
    return float(presence_mi(np.asarray(stat.total)[:, None], stat.n)[0])  # Bernoulli: present/absent


def structure(features: Sequence[Feature], stats, K: int):
    """``(tree features, ranking, parents, I(X; C), I(X_i; X_j | C))`` of KDB(K):
    ``ranking`` the feature names by I(X; C); ``parents`` child name -> tuple of parent
    names, highest I(X_i; X_j | C) first (module docstring)."""
    tree_feats, values = tan.paired_features(features, stats, None, f"kdb:{K}")
    F = len(tree_feats)
    mi = np.array([class_information(f, stats.features[f.name]) for f in tree_feats])
    cmi = np.zeros((F, F))
    for a in range(F):
        for b in range(a + 1, F):
            na, nb = tree_feats[a].name, tree_feats[b].name
            cmi[a, b] = cmi[b, a] = tan.conditional_mutual_information(
                stats.pairs.table(na, nb, values[na], values[nb]))
    order = sorted(range(F), key=lambda i: (-mi[i], i))
    rank = {i: r for r, i in enumerate(order)}
    parents = {}
    for r, i in enumerate(order):
        ranked = sorted(order[:r], key=lambda j: (-cmi[i, j], rank[j]))
        parents[tree_feats[i].name] = tuple(tree_feats[j].name for j in ranked[:K])
    return tree_feats, [tree_feats[i].name for i in order], parents, mi, cmi


@dataclass
class Network:
    """A derived KDB structure and its tables.

    ``parent[child]``: the parent's name (one parent) or a tuple of two names;
    ``cpt[child]``: ln p(child | class, parents), shape (K, n_parent…, n_child);
    ``fallback[child]``: for a two-parent child, parent name -> ln p(child | class,
    that parent), (K, n_parent, n_child), the term when the other parent is missing.
    """

    features: list  # the tree features (Feature), model order
    order: list  # their names by I(X; C)
    parent: dict
    mi: np.ndarray
    cmi: np.ndarray
    cpt: dict
    fallback: dict


def derive(features: Sequence[Feature], stats, hp, params: Mapping[str, Any], K: int) -> Network:
    """The KDB(K) structure and its conditional tables from the statistics."""
    if hp.unseen != "missing":
        raise SqlnbError(f"structure 'kdb:{K}' scores unseen categories as missing; leave unseen at 'missing'")
    tree_feats, order, parents, mi, cmi = structure(features, stats, K)
    values = {f.name: tan.feature_values(f, stats.features) for f in tree_feats}
    by_name = {f.name: f for f in tree_feats}
    rank = {f.name: i for i, f in enumerate(tree_feats)}
    joints = getattr(stats.pairs, "joints", {})
    parent, cpt, fallback = {}, {}, {}
    for child in order:
        ps = parents[child]
        f = by_name[child]
        single = {p: tan._conditional(f, stats.pairs.table(p, child, values[p], values[child]), hp, params[child])
                  for p in ps}
        if len(ps) == 1:
            parent[child] = ps[0]
            cpt[child] = single[ps[0]]
        elif len(ps) == 2:
            key = tuple(sorted((child, *ps), key=rank.get))
            if key not in joints:
                raise SqlnbError(
                    f"structure 'kdb:{K}' gives feature {child!r} the parents {ps[0]!r} and {ps[1]!r}, whose joint "
                    "counts with it were never gathered (an update whose rows changed the structure, or a model "
                    f"fitted otherwise); refit the model on all rows with structure='kdb:{K}' "
                    f"(sqlnb fit --structure kdb:{K})")
            j = joints[key]
            counts = j.over([values[n] for n in key])
            # axes (class, *key) -> (class, parent 1, parent 2, child)
            counts = np.transpose(counts, [0, *(1 + key.index(n) for n in (*ps, child))])
            shape = counts.shape
            flat = tan._conditional(f, counts.reshape(shape[0], shape[1] * shape[2], shape[3]), hp, params[child])
            parent[child] = ps
            cpt[child] = flat.reshape(shape)
            fallback[child] = single
    return Network(tree_feats, order, parent, mi, cmi, cpt, fallback)


# -- scoring ------------------------------------------------------------------------------
def child_terms(net: Network, features: Sequence[Feature], stats, params: Mapping[str, Any],
                dialect: str | None, input_types: Mapping[str, str] | None,
                positions: Mapping[str, exp.Expression] | None = None) -> dict[str, list]:
    """Each child's per-class score terms (module docstring), keyed by child name;
    ``positions`` as for :func:`sqlnb.models.naive_bayes.tan.child_terms`."""
    by_name = {f.name: f for f in features}
    if positions is None:
        positions = tan.tree_positions(net, features, stats, dialect, input_types)

    def flat(names: Sequence[str], sizes: Sequence[int]) -> exp.Expression:
        """Row-major 0-based index over the named positions (NULL when any is)."""
        out: exp.Expression = sql.paren(positions[names[0]].copy())
        for n, size in zip(names[1:], sizes[1:]):
            out = exp.Add(this=exp.Mul(this=sql.paren(out), expression=exp.Literal.number(size)),
                          expression=sql.paren(positions[n].copy()))
        return out

    out = {}
    for child, par in net.parent.items():
        ps = (par,) if isinstance(par, str) else tuple(par)
        cpt = net.cpt[child]
        naive = tan.naive_row(by_name[child], params[child])
        if dialect == "duckdb":  # one read per class (tan.padded_read), the picks' precedence as below
            padded = {ps: cpt, (): naive, **({(p,): net.fallback[child][p] for p in ps} if len(ps) > 1 else {})}
            out[child] = [tan.padded_read(padded, ps, positions, child, k) for k in range(cpt.shape[0])]
            continue
        tables = [((*ps, child), cpt)] + [((p, child), net.fallback[child][p]) for p in ps if len(ps) > 1]
        terms = []
        for k in range(cpt.shape[0]):
            picks = [tan._pick(flat(names, t.shape[1:]), t[k].ravel(), dialect) for names, t in tables]
            picks += [tan._pick(positions[child].copy(), naive[k], dialect), sql.dbl(0.0)]
            terms.append(exp.Coalesce(this=picks[0], expressions=picks[1:]))
        out[child] = terms
    return out


def conditionals(net: Network, stats) -> dict[str, dict]:
    """Each child's table as :meth:`NaiveBayes.tree_conditionals` gives it; a two-parent
    child's ``parent`` is the tuple of both names, its ``parent_values`` the value lists
    of each, and ``log_proba`` has shape (classes, parent 1 values, parent 2 values, values)."""
    by_name = {f.name: f for f in net.features}
    out = {}
    for child, par in net.parent.items():
        ps = (par,) if isinstance(par, str) else tuple(par)
        pv = [tan.feature_values(by_name[p], stats.features) for p in ps]
        out[child] = {"parent": par, "parent_values": pv[0] if isinstance(par, str) else pv,
                      "values": tan.feature_values(by_name[child], stats.features), "log_proba": net.cpt[child]}
    return out


# -- storage ------------------------------------------------------------------------------
def joint_table(pairs: KdbPairs, stats) -> Any:
    """The ``joints`` part: non-zero cells ``(class_index, f0, …, f<m−1>, i0, …, i<m−1>,
    n)``, the indexes into each feature's stored values (0/1 for Bernoulli), m the largest
    set (3 for KDB(2); a smaller set's cells leave the columns past its size NULL)."""
    import pyarrow as pa
    m = max((len(t) for t in pairs.joints), default=3)
    cols: dict[str, list] = {c: [] for c in ("class_index", *(f"f{i}" for i in range(m)),
                                             *(f"i{i}" for i in range(m)), "n")}
    for names, cell in pairs.joints.items():
        counts = cell.over([tan._stored_values(n, stats) for n in names])
        idx = np.nonzero(counts)
        cols["class_index"] += idx[0].tolist()
        for i in range(m):
            cols[f"f{i}"] += [names[i] if i < len(names) else None] * len(idx[0])
            cols[f"i{i}"] += idx[1 + i].tolist() if i < len(names) else [None] * len(idx[0])
        cols["n"] += counts[idx].tolist()
    types = {c: pa.string() if c.startswith("f") else pa.float64() if c == "n" else pa.int32() for c in cols}
    return pa.table({c: arrow.array(v, types[c]) for c, v in cols.items()})  # arrow.array: no pandas import


def joints_from_table(pairs: tan.Pairs, names: Sequence[Sequence[str]], table: Any, feats: Mapping[str, Any],
                      K: int) -> KdbPairs:
    """``pairs`` with the joint counts of the triples ``names`` from :func:`joint_table`'s rows."""
    def stored(n):
        return list(feats[n].values) if isinstance(feats[n], Counts) else tan.BERNOULLI_VALUES

    joints = {}
    for t in names:
        t = tuple(t)
        vals = [stored(n) for n in t]
        joints[t] = JointCounts(t, vals, np.zeros((K, *(len(v) for v in vals))))
    for r in (table.to_pylist() if table is not None else []):
        t = tuple(r[f"f{i}"] for i in range(MAX_K + 1) if r.get(f"f{i}") is not None)
        joints[t].counts[(r["class_index"], *(r[f"i{i}"] for i in range(len(t))))] = r["n"]
    return KdbPairs(list(pairs.features), dict(pairs.cells), joints)


def add_subset_joints(engine, source, label: str, fold: exp.Expression, fold_models: Sequence[Any], full: Any,
                      subsets: Sequence[Sequence[str]], K: int) -> int:
    """Give the fold models of wrapper selection (each fitted on all folds but one) and the
    model on all folds the joint counts that the KDB(``K``) structure of each candidate
    subset needs and they lack: one scan grouped by fold over the missing triples, fold
    ``i``'s model taking the sum over the other folds, ``full`` the sum over all. The
    statistics are completed in place (the models' log-parameters do not change: a
    subset's model derives its own). Fold models whose binned columns cut elsewhere than
    ``full``'s (each on its training folds, :mod:`sqlnb.workflows.fold_bins`) count over
    their own bins on their training rows: one scan each more. Returns the scans run."""
    need: list = []
    for subset in subsets:
        keep = set(subset)
        for m in [*fold_models, full]:
            feats = [f for f in m.features if f.name in keep]
            stats = replace(m.stats, features={f.name: m.stats.features[f.name] for f in feats},
                            pairs=m.stats.pairs.restricted(keep))
            for t in needed_triples(feats, stats, K):
                if t not in m.stats.pairs.joints and t not in need:
                    need.append(t)
    if not need:
        return 0
    found = collect_joints(engine, source, label, None, full.features, need, full.classes, fold)
    own = any(m.features != full.features for m in fold_models)
    mine = [collect_joints(engine, source, label, None, m.features, need, full.classes,
                           exp.NEQ(this=fold.copy(), expression=exp.Literal.number(i))).get(True, {})
            for i, m in enumerate(fold_models)] if own else []
    for t in need:
        cells = [found.get(i, {}).get(t) for i in range(len(fold_models))]

        def total(skip: int | None, parts: Sequence = cells) -> JointCounts:
            out = JointCounts(t, [[] for _ in t], np.zeros((len(full.classes), *(0 for _ in t))))
            for i, cell in enumerate(parts):
                if i != skip and cell is not None:
                    out = out.merge(cell)
            return out

        for i, m in enumerate(fold_models):
            m.stats.pairs.joints[t] = total(None, [mine[i].get(t)]) if own else total(i)
        full.stats.pairs.joints[t] = total(None)
    return 1 + len(mine)
