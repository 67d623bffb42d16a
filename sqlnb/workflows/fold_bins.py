"""Cut points of binned columns inside each cross-validation fold.

A binned column's cut points are a function of its per-(class, value) row counts
(:class:`~sqlnb.stats.ValueCounts`: MDL reads the class histogram of each value, quantiles
the values' counts), and counts of disjoint rows add up. So one scan grouped by
(label, fold, column, value) (:func:`fold_value_counts`) gives every fold's counts; fold
``i``'s model cuts on the sum over the other folds — the counts ``sqlnb fit`` would read
on those rows, so the cut points it would compute — and its per-(class, bin) counts
follow from the same sums for those cut points (:func:`sqlnb.models.naive_bayes.fit.recut`,
as an update re-derives them). The held-out fold's labels take no part in its model's
cut points. The model on every row cuts on the sum over all folds.

Scans of a naive Bayes cross-validation with binned columns: the value counts (one,
grouped by fold; it replaces the all-rows count query that cut the shared points before),
the statistics (one, grouped by fold) and the scoring read, as without bins. Quantile
cut points add one small DuckDB query per fold (and one for all rows) over the counted
values, no read of the source. A structure with pair counts (TAN, AODE, KDB) over binned
columns counts each fold's pairs (and KDB's joint counts) on its training rows, over its
own bins: one scan per fold more (pair counts over one fold's bins do not add up across
folds that cut elsewhere).

A token bag whose vocabulary is chosen from its rows as a whole (``min_df``, ``max_df``,
``max_features``, ``select_k``) is likewise recounted on each fold model's training rows
and on all rows (:func:`with_training_vocabulary`): merged per-fold statistics would hold
the union of each fold's own choice, which no fit on those rows gives.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Sequence

from sqlglot import exp

from sqlnb.engines import Engine
from sqlnb.models.naive_bayes import kdb, skdb, tan, weighted
from sqlnb.models.naive_bayes.binning import value_counts, value_counts_table
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.models.naive_bayes.fit import edges_from_counts, recut, resolve_edges
from sqlnb.models.naive_bayes.text import collect_bags
from sqlnb.models.naive_bayes.text.bags import prunes
from sqlnb.source import Source
from sqlnb.stats import Statistics, ValueCounts, sorted_values
from sqlnb.workflows.folds import fold_source


def binned(features: Sequence[Feature]) -> list[Feature]:
    """The binned features among ``features``."""
    return [f for f in features if f.kind == "binned"]


def fold_value_counts(engine: Engine, source: Source, label: str, features: Sequence[Feature],
                      fold: exp.Expression, folds: int) -> tuple[list, list[dict[str, ValueCounts]]]:
    """(the classes of every fold, sorted as a fit sorts them; per fold, each binned
    feature's :class:`~sqlnb.stats.ValueCounts` over those classes), from one scan grouped
    by fold (:func:`~sqlnb.models.naive_bayes.binning.value_counts_table`)."""
    import pyarrow.compute as pc  # as binning.value_counts: only a model with binned columns needs it

    cut = binned(features)
    if engine.dialect != "duckdb" and any(f.bins.startswith("quantile:") for f in cut):
        resolve_edges(engine, source, label, cut)  # raises its one-line error before any scan
    table = value_counts_table(engine, source, label, None, cut, fold)
    group, body = table.column(table.num_columns - 1), table.remove_column(table.num_columns - 1)
    parts = [value_counts(cut, body.filter(pc.equal(group, i))) for i in range(folds)]
    classes = sorted_values(list(dict.fromkeys(c for found, _ in parts for c in found)))
    return classes, [{name: vc.align(found, classes) for name, vc in counts.items()} for found, counts in parts]


def merged_counts(parts: Sequence[dict[str, ValueCounts]]) -> dict[str, ValueCounts]:
    """The value counts of the union of the folds ``parts`` (the sums)."""
    out = dict(parts[0])
    for part in parts[1:]:
        out = {name: vc.merge(part[name]) for name, vc in out.items()}
    return out


def with_edges(engine: Engine, features: Sequence[Feature], counts: dict[str, ValueCounts]) -> list[Feature]:
    """``features`` with each binned feature's cut points computed from ``counts``."""
    edges = edges_from_counts(engine, binned(features), counts)
    return [replace(f, edges=tuple(edges[f.name])) if f.name in edges else f for f in features]


def with_cuts(per_fold: Sequence[Statistics], classes: list, cuts: Sequence[dict[str, ValueCounts]]) -> list:
    """Per-fold statistics given their value counts (``cuts``, over ``classes``), aligned
    to each statistics' classes, so that merging folds merges them too."""
    return [replace(st, cuts={name: vc.align(classes, st.classes) for name, vc in cut.items()})
            for st, cut in zip(per_fold, cuts)]


def fold_models_statistics(engine: Engine, source: Source, label: str, features: Sequence[Feature],
                           fold: exp.Expression, per_fold: Sequence[Statistics], pairs: bool = False,
                           orders: Sequence[int] = (), patterns: bool = False
                           ) -> tuple[list[list[Feature]], list[Statistics]]:
    """Each fold's model's features (cut points from its training folds' value counts) and
    training statistics (the other folds' merged, binned counts re-derived for those cut
    points by :func:`~sqlnb.models.naive_bayes.fit.recut`); ``pairs``: with pair counts,
    and joint counts for the KDB orders ``orders``, counted on the training rows over
    their own bins (one scan per fold), as :func:`sqlnb.fit` counts them; ``patterns``
    (skdb): with the training rows as patterns over those bins (one more scan per fold)."""
    feats, stats = [], []
    for i in range(len(per_fold)):
        train = None
        for j, st in enumerate(per_fold):
            if j != i:
                train = st if train is None else train.merge(st)
        # Pair counts over the bins of all rows do not hold for this fold's bins: recounted below.
        mine, train, _ = recut(engine, features, replace(train, pairs=None))
        if pairs:
            rows = fold_source(source, fold, i, held_out=False)
            tree = tan.eligible(mine, train.features)
            train = replace(train, pairs=tan.collect_pairs(engine, rows, label, None, tree, train.classes,
                                                           stats=train.features))
            train = _with_joints(engine, rows, label, mine, train, orders)
            if patterns:
                train = skdb.with_patterns(train, mine, lambda tree, shim, rows=rows: weighted.read_patterns(
                    engine, rows, label, None, tree, shim))
        feats.append(mine)
        stats.append(train)
    return feats, stats


def _with_joints(engine: Engine, rows: Source, label: str, features: Sequence[Feature], stats: Statistics,
                 orders: Sequence[int]) -> Statistics:
    """``stats`` with the joint counts of every triple its KDB(K) structures need, K in
    ``orders`` (one scan; none when no K > 1)."""
    names: list[Any] = []
    for K in orders:
        if K > 1:
            names += [t for t in kdb.needed_triples(features, stats, K) if t not in names]
    if not names:
        return stats
    joints = kdb.collect_joints(engine, rows, label, None, features, names, stats.classes)
    return replace(stats, pairs=kdb.KdbPairs(list(stats.pairs.features), dict(stats.pairs.cells), joints))


def with_training_vocabulary(engine: Engine, source: Source, label: str, features: Sequence[Feature],
                             fold: exp.Expression, fold_stats: Sequence[Statistics],
                             every: Statistics) -> tuple[list[Statistics], Statistics]:
    """Fold models' training statistics and the all-rows statistics ``every`` with each
    pruned bag (:func:`~sqlnb.models.naive_bayes.text.bags.prunes`: ``min_df``, ``max_df``,
    ``max_features``, ``select_k``) recounted on those rows as a whole, its vocabulary
    chosen there as :func:`sqlnb.fit` on them chooses it (merged per-fold statistics hold
    the union of each fold's own vocabulary): one statement per bag and fold, and one for
    all rows. The bags' document counts (from the statistics scan) merge exactly."""
    bags = [f for f in features if f.bag is not None and prunes(f)]
    if not bags:
        return list(fold_stats), every
    out = []
    for i, st in enumerate([*fold_stats, every]):
        feats = dict(st.features)
        where = exp.NEQ(this=fold.copy(), expression=exp.Literal.number(i)) if i < len(fold_stats) else None
        collect_bags(engine, source, label, None, bags, st.classes, feats, where)
        out.append(replace(st, features=feats))
    return out[:-1], out[-1]
