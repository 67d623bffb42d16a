"""Training: one scan of the source reduced to sufficient statistics.

The builder makes one ``SELECT label, <aggregates> FROM source GROUP BY label``: every
family contributes its per-class aggregates (counts; for Gaussian columns sums of
``x − K`` and ``(x − K)²`` about a per-column shift K; sums; and DuckDB ``histogram()``
for categorical columns), so all features of a mixed model cost one pass — the "one scan"
shape of ``MEASURED.md``. The shift comes from a ``LIMIT`` read of the first rows, and a
Gaussian column whose variance lost too many digits in ``S2 − S1²/n`` (constant in a
class, say), or whose squares overflowed (values near 1e300), gets an exact second pass
of that column alone (families/gaussian.py); sums that come back NaN or infinite are
told apart — NaN/inf in the data, or finite values whose mean or variance does not fit
in a double — by one more query on that error path (:func:`sqlnb.stats.census_query`).
Weighted data needs one extra statement for categorical counts, by ``GROUPING SETS``
(DuckDB has no weighted histogram).
Engines other than DuckDB have no ``histogram()`` at all, so there categorical counts
always come from the ``GROUPING SETS`` query (``histogram=False``; see sqlnb/engines/).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import Engine, as_engine
from sqlnb.errors import SqlnbError, shell_word, suggest
from sqlnb.models.naive_bayes.families import KINDS, REGISTRY, Feature, is_numeric
from sqlnb.models.naive_bayes.binning import (mdl_edges, quantile_edges, quantile_edges_from_counts,
                                               quantile_query, split_bins, value_counts, value_counts_table)
from sqlnb.models.naive_bayes import tan
from sqlnb.models.naive_bayes.counts import (count_blocks, counts_rows, uses_histogram,  # noqa: F401
                                             weighted_counts_query)
from sqlnb.models.naive_bayes import wide
from sqlnb.models.naive_bayes.families.categorical import counts_from
from sqlnb.source import Source
from sqlnb.stats import Counts, Statistics, _sort_key, census_query, nonfinite_values, overflow_error
from sqlnb.models.naive_bayes.text import BAG_KINDS, bag_feature, bag_layout, collect_bags, family_for


def default_kind(sql_type: str) -> str | None:
    """The family a column gets when none is given: floating/decimal/integer ->
    gaussian, boolean -> bernoulli, text/enum -> categorical; otherwise none."""
    t = sql_type.upper()
    if t in ("BOOLEAN", "BOOL"):
        return "bernoulli"
    if is_numeric(t):
        return "gaussian"
    if t.startswith(("VARCHAR", "ENUM", "TEXT", "STRING", "CHAR", "BPCHAR")):  # CHAR covers CHARACTER VARYING
        return "categorical"
    return None


def plan_features(
    source: Source,
    label: str,
    weight: str | None = None,
    kind: str = "auto",
    feature_kinds: Mapping[str, str] | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    binarize: float | Mapping[str, float] = 0.0,
    text: Any = None,
    bins: str | Mapping[Any, str] | None = None,
) -> list[Feature]:
    """Choose the model's features and their families from the source's schema.

    A text, ``VARCHAR[]`` or ``MAP(VARCHAR, <number>)`` column given kind multinomial,
    bernoulli or complement is a token bag, tokenized with ``text`` options (see
    :mod:`sqlnb.models.naive_bayes.text`). ``bins`` makes numeric columns ``binned``
    (:func:`sqlnb.models.naive_bayes.binning.split_bins`): a spec for every numeric column
    that has no kind of its own, or per column; their cut points are computed later
    (:func:`~sqlnb.models.naive_bayes.binning.resolve_edges`)."""
    feature_kinds = dict(feature_kinds or {})
    every_bins, column_bins = split_bins(bins)
    source.require([label], "label column")
    if weight is not None:
        source.require([weight], "weight column")
    for name in list(features or []) + list(exclude or []) + list(feature_kinds):
        source.require([name], "feature column")
    for k in [kind, *feature_kinds.values()]:
        if k != "auto" and k not in KINDS:
            raise SqlnbError(f"unknown kind {k!r}{suggest(k, KINDS)}; kinds are: {', '.join(KINDS)}")
    if features is not None and exclude:
        raise SqlnbError("give either the features to use or the ones to exclude, not both")
    names = list(features) if features is not None else [
        c for c in source.columns if c not in (label, weight) and c not in set(exclude or [])
    ]
    if label in names or (weight is not None and weight in names):
        raise SqlnbError(f"column {label if label in names else weight!r} cannot be both a feature and the label/weight")
    for name in column_bins:
        if name not in names:
            raise SqlnbError(f"bins (--bins) names {name!r}, which is not a feature of this model{suggest(name, names)}")
        if feature_kinds.get(name, "binned") != "binned":
            raise SqlnbError(f"bins (--bins) gives {name!r} cut points, but it is given kind {feature_kinds[name]!r}; "
                             f"drop one of the two")
    out = []
    for name in names:
        sql_type = source.columns[name]
        k, spec = _kind_of(name, sql_type, kind, feature_kinds, every_bins, column_bins)
        if k is None:
            raise SqlnbError(
                f"column {name!r} has type {sql_type}, which has no default kind; give it one "
                f"(--feature-kind {shell_word(name, '=categorical')}, feature_kinds={{{name!r}: 'categorical'}} in "
                f"Python) or leave it out (--exclude {shell_word(name)}, exclude=[{name!r}])"
            )
        thr = binarize.get(name, 0.0) if isinstance(binarize, Mapping) else float(binarize)
        if k in BAG_KINDS and bag_layout(sql_type) is not None:
            out.append(bag_feature(name, k, sql_type, float(thr), text))
            continue
        feature = Feature(name, k, sql_type, float(thr), bins=spec if k == "binned" else None)
        REGISTRY[k].check_type(feature, source.description)
        out.append(feature)
    if not out:
        raise SqlnbError(f"{source.description} has no feature column besides the label")
    if isinstance(binarize, Mapping):
        _check_thresholds(binarize, out)
    return out


def _kind_of(name: str, sql_type: str, kind: str, feature_kinds: Mapping[str, str], every_bins: str | None,
             column_bins: Mapping[str, str]) -> tuple[str | None, str | None]:
    """The family of one column in :func:`plan_features` (None: its type has no default
    kind) and, for a binned column, its bins spec."""
    k = feature_kinds.get(name, kind)
    spec = column_bins.get(name)
    if spec is not None:
        k = "binned"
    elif every_bins is not None and k == "auto" and default_kind(sql_type) == "gaussian":
        k, spec = "binned", every_bins
    if k == "binned":
        spec = spec or every_bins or "mdl"
    if k == "auto":
        k = default_kind(sql_type)
    return k, spec


def planned_kinds(source: Source, columns: Sequence[str], kind: str = "auto",
                  feature_kinds: Mapping[str, str] | None = None,
                  bins: str | Mapping[Any, str] | None = None) -> dict[str, str | None]:
    """The family :func:`plan_features` would give each of ``columns`` (None: no default
    kind for its type), without checking anything: what column screening needs to know
    before the plan (sqlnb.models.screening)."""
    every_bins, column_bins = split_bins(bins)
    return {c: _kind_of(c, source.columns[c], kind, dict(feature_kinds or {}), every_bins, column_bins)[0]
            for c in columns}


def _check_thresholds(binarize: Mapping[str, float], features: Sequence[Feature]) -> None:
    """Every per-column threshold names a bernoulli feature (one that is not would be
    ignored silently)."""
    kinds = {f.name: f.kind for f in features}
    bernoulli = [n for n, k in kinds.items() if k == "bernoulli"]
    for name in binarize:
        if name not in kinds:
            raise SqlnbError(f"binarize (--binarize) names {name!r}, which is not a feature of this model"
                             f"{suggest(name, bernoulli or kinds)}")
        if kinds[name] != "bernoulli":
            raise SqlnbError(f"binarize (--binarize) gives {name!r} a threshold, but it is a {kinds[name]} feature; "
                             f"thresholds apply to bernoulli features (--feature-kind {shell_word(name, '=bernoulli')})")


def _aggregates(f: Feature, w: exp.Expression | None, histogram: bool,
                shifts: Mapping[str, float] | None = None) -> list[exp.Expression]:
    # Without DuckDB's histogram() a categorical column is counted by the GROUPING SETS
    # query instead (weighted_counts_query), so it has no aggregate in the main scan.
    if f.kind == "categorical" and not histogram:
        return []
    if shifts is not None and f.name in shifts:  # Gaussian: sums about a shift (families/gaussian.py)
        return REGISTRY["gaussian"].shifted_aggregates(f, w, shifts[f.name])
    return family_for(f).aggregates(f, w)


def _widths(features: Sequence[Feature], weighted: bool, histogram: bool,
            shifts: Mapping[str, float] | None) -> list[int]:
    """How many aggregates :func:`_aggregates` gives each feature, to split a result row.
    Features alike but for their name have the same number: each kind of feature is built
    once (building 10,000 Gaussian columns' aggregates only to count them took 5 s)."""
    w = sql.dbl(1.0) if weighted else None
    seen: dict[tuple, int] = {}
    out = []
    for f in features:
        key = (repr(replace(f, name="")), shifts is not None and f.name in shifts)
        if key not in seen:
            seen[key] = len(_aggregates(f, w, histogram, shifts))
        out.append(seen[key])
    return out


#: Rows read to choose each Gaussian column's shift (see :func:`gaussian_shifts`).
SHIFT_ROWS = 4096


def _gaussian(features: Sequence[Feature]) -> list[Feature]:
    return [f for f in features if f.kind == "gaussian" and f.bag is None]


def shift_query(source: Source, features: Sequence[Feature]) -> exp.Select | None:
    """``SELECT AVG(x_j), STDDEV_POP(x_j), ... FROM (SELECT x_j, ... FROM src LIMIT
    SHIFT_ROWS)`` over the Gaussian columns, or None without any."""
    gauss = _gaussian(features)
    if not gauss:
        return None
    fam = REGISTRY["gaussian"]
    inner = exp.select(*[exp.alias_(fam.value(f), f"x{j}", quoted=True) for j, f in enumerate(gauss)]
                       ).from_(source.from_("src"), copy=False).limit(SHIFT_ROWS, copy=False)
    aggs = []
    for j in range(len(gauss)):
        aggs += [exp.Avg(this=sql.col(f"x{j}", "s")), exp.StddevPop(this=sql.col(f"x{j}", "s"))]
    return exp.select(*aggs).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("s"))), copy=False)


def gaussian_shifts(engine: Engine, source: Source, features: Sequence[Feature]) -> dict[str, float]:
    """Each Gaussian column's shift K: the mean of its first :data:`SHIFT_ROWS` rows,
    rounded (:func:`round_shift`).

    The training scan sums ``x − K`` and ``(x − K)²`` (families/gaussian.py); any K is
    correct, and one near the class means keeps the variance's cancellation small. A
    ``LIMIT`` read stops after the first row groups of a table or Parquet file. NULL
    (no value there) or a non-finite mean gives K = 0; the scan reports NaN/inf itself.
    """
    gauss = _gaussian(features)
    if not gauss:
        return {}
    if engine.dialect == "duckdb" and len(gauss) >= wide.long_min():  # one AVG, STDDEV_POP per column: the long shape
        got = {r[0]: r[1:] for r in engine.execute(wide.long_shift_query(source, gauss, SHIFT_ROWS))}
        row = [v for j in range(len(gauss)) for v in got.get(j, (None, None))]
    else:
        row = engine.execute(shift_query(source, features))[0]
    return {f.name: round_shift(row[2 * j], row[2 * j + 1]) for j, f in enumerate(gauss)}


#: A column whose first rows' mean is within this many of their standard deviations of
#: 0 is summed unshifted (K = 0, see :func:`round_shift`).
ZERO_SHIFT_SDS = 2.0


def round_shift(mean: Any, sd: Any) -> float:
    """``mean`` rounded to a multiple of the power of two at most ``sd``/4 (to 8
    significant bits when ``sd`` is 0 or unknown); 0.0 for a missing or non-finite mean,
    and for a mean within :data:`ZERO_SHIFT_SDS` standard deviations of 0.

    A short K keeps ``x − K`` and ``(x − K)²`` exact for data on a grid coarser than K's
    last bit (integer columns, say), so the sums stay exact while they fit in 53 bits, as
    exact as VAR_POP; and K stays within sd/8 of ``mean``, which costs no digits.

    K = 0 makes the scan sum ``x`` and ``x·x``: no subtraction per value, and no
    projection of ``x − K`` that DuckDB materialises for the two sums (at 10M
    rows × 20 columns × 3 classes the statistics query took 1.325 s of CPU against 1.228 s
    unshifted; ``benchmarks/fit_floor.py --audit --audit-data wide``). It costs digits only
    as far as ``S2/M2 = 1 + mean²/sd²`` grows: at most 5 (0.7 of a digit) for the first
    rows, and a class whose own ratio passes ``Gaussian.EXACT_BELOW`` still gets the exact
    second pass (families/gaussian.py), as with any other K.
    """
    if mean is None or not math.isfinite(float(mean)):
        return 0.0
    mean = float(mean)
    if sd is not None and math.isfinite(float(sd)) and float(sd) > 0:
        if abs(mean) <= ZERO_SHIFT_SDS * float(sd):
            return 0.0
        q = math.ldexp(1.0, math.frexp(float(sd) / 4.0)[1] - 1)  # largest 2^e <= sd/4
        return round(mean / q) * q
    m, e = math.frexp(mean)
    return math.ldexp(round(m * 256.0) / 256.0, e)


def statistics_query(source: Source, label: str, weight: str | None, features: Sequence[Feature],
                     histogram: bool = True, group: exp.Expression | None = None,
                     shifts: Mapping[str, float] | None = None) -> exp.Select:
    """The one-pass per-class aggregation (see the module docstring).

    ``histogram=False`` leaves categorical columns to :func:`weighted_counts_query`
    (engines other than DuckDB have no ``histogram()`` aggregate). ``group``, an
    expression over ``src`` (e.g. a cross-validation fold), is an extra grouping key,
    returned as the last column. With ``shifts`` (:func:`gaussian_shifts`) Gaussian
    columns are aggregated as sums about their shift, the fast in-engine form; without,
    as ``COUNT, AVG, VAR_POP``, the portable form exported by :mod:`sqlnb.workflows.export`.
    """
    w = sql.as_double(sql.col(weight, "src")) if weight else None
    cols: list[exp.Expression] = [
        exp.alias_(sql.col(label, "src"), "k", quoted=True),
        exp.alias_(exp.Count(this=exp.Star()), "rows", quoted=True),
    ]
    if w is not None:
        cols += [exp.alias_(exp.Sum(this=w.copy()), "wsum", quoted=True),
                 exp.alias_(exp.Min(this=w.copy()), "wmin", quoted=True),
                 exp.alias_(exp.Count(this=w.copy()), "wcount", quoted=True)]
    i = 0
    for f in features:
        for agg in _aggregates(f, w, histogram, shifts):
            cols.append(exp.alias_(agg, f"a{i}", quoted=True))
            i += 1
    keys = [sql.col(label, "src")]
    if group is not None:
        cols.append(exp.alias_(group, "g", quoted=True))
        keys.append(group.copy())
    return exp.select(*cols).from_(source.from_("src"), copy=False).group_by(*keys, copy=False)


def _statistics_rows(engine: Engine, source: Source, label: str, weight: str | None, features: Sequence[Feature],
                     histogram: bool, shifts: Mapping[str, float], group: exp.Expression | None = None) -> list[tuple]:
    """The rows of :func:`statistics_query`: from that query, or, for a wide unweighted
    model in DuckDB, its Gaussian and Bernoulli sums from the long shape
    (:func:`sqlnb.models.naive_bayes.wide.long_statistics_query`) and the other
    features' from the one-pass query over those alone, assembled in the same layout."""
    listed_long = wide.long_features(features, shifts) if engine.dialect == "duckdb" and weight is None else []
    if not listed_long:
        return engine.execute(statistics_query(source, label, weight, features, histogram, group, shifts))
    longs = wide.long_rows(listed_long, engine.execute(wide.long_statistics_query(source, label, listed_long, shifts,
                                                                                  group)), group is not None)
    listed = {f.name for f in listed_long}
    others = [f for f in features if f.name not in listed]
    narrow: dict[tuple, dict] = {}
    if others:
        widths = _widths(others, False, histogram, shifts)
        for r in engine.execute(statistics_query(source, label, None, others, histogram, group, shifts)):
            pos, aggs = 2, {}
            for f, width in zip(others, widths):
                aggs[f.name], pos = r[pos:pos + width], pos + width
            narrow[(r[0], r[-1]) if group is not None else (r[0],)] = aggs
    out = []
    for key, (n, aggs) in longs.items():
        aggs = {**aggs, **narrow.get(key, {})}
        out.append((key[0], n, *[a for f in features for a in aggs[f.name]], *key[1:]))
    return out


def cut_counts(engine: "duckdb.DuckDBPyConnection | Engine", source: Source, label: str, weight: str | None,
               features: Sequence[Feature]) -> tuple[list, dict]:
    """(classes, {binned feature: :class:`~sqlnb.stats.ValueCounts`}) of the labelled rows
    of ``source``: one GROUPING SETS query
    (:func:`~sqlnb.models.naive_bayes.binning.value_counts_query`) for all binned
    features (off DuckDB one per :func:`~sqlnb.models.naive_bayes.counts.count_blocks`
    block: every block has the same labelled rows, so the same classes); ``([], {})``
    without any. The model keeps them, so that an update recomputes the cut points as the
    refit on all rows would (:func:`recut`)."""
    binned = [f for f in features if f.kind == "binned"]
    if not binned:
        return [], {}
    engine = as_engine(engine)
    if engine.dialect == "duckdb":  # the long query: no GROUPING SETS, so no block limit to split at
        return value_counts(binned, value_counts_table(engine, source, label, weight, binned))
    classes, out = [], {}
    for block in count_blocks(len(binned), engine.dialect, more=2):  # beside k: rows and n
        part = [binned[j] for j in block]
        classes, got = value_counts(part, value_counts_table(engine, source, label, weight, part))
        out.update(got)
    return classes, out


def resolve_edges(engine: "duckdb.DuckDBPyConnection | Engine", source: Source, label: str,
                  features: Sequence[Feature], counts: Mapping[str, Any] | None = None) -> list[Feature]:
    """``features`` with the cut points of every ``binned`` feature that has none yet,
    computed from the labelled rows of ``source`` (:mod:`sqlnb.models.naive_bayes.binning`):
    one aggregate query for the ``quantile:K`` columns (DuckDB only); the ``mdl`` ones from
    their per-(class, value) counts ``counts`` (:func:`cut_counts`), or, without them, one
    GROUPING SETS count query."""
    todo = [f for f in features if f.kind == "binned" and f.edges is None]
    if not todo:
        return list(features)
    engine = as_engine(engine)
    edges: dict[str, tuple] = {}
    quant = [f for f in todo if f.bins.startswith("quantile:")]
    if quant:
        if engine.dialect != "duckdb":
            raise SqlnbError(f"quantile bins (column {quant[0].name!r}) are computed with DuckDB's quantile_cont; "
                             f"use --bins mdl on {engine.dialect}, or fit in DuckDB")
        edges.update(quantile_edges(quant, engine.execute(quantile_query(source, label, quant))[0]))
    mdl = [f for f in todo if f.bins == "mdl"]
    if mdl:
        if counts is None or any(f.name not in counts for f in mdl):
            counts = cut_counts(engine, source, label, None, mdl)[1]
        edges.update(mdl_edges(mdl, counts))
    return [replace(f, edges=edges[f.name]) if f.name in edges else f for f in features]


def require_cut_counts(features: Sequence[Feature], stats: Statistics) -> None:
    """Raise a one-line error when a binned feature has no value counts in ``stats`` (a
    model saved before sqlnb kept them): its cut points cannot follow new rows."""
    lacking = [f.name for f in features if f.kind == "binned" and f.name not in stats.cuts]
    if lacking:
        raise SqlnbError(f"binned column {lacking[0]!r} has no stored value counts (the model was saved by an "
                         "sqlnb that did not keep them), so an update cannot recompute its cut points as the refit "
                         "would; refit the model on all rows (sqlnb fit) instead")


def recut(engine: "duckdb.DuckDBPyConnection | Engine", features: Sequence[Feature],
          stats: Statistics) -> tuple[list[Feature], Statistics, list[str]]:
    """The binned features' cut points recomputed from the value counts ``stats.cuts``
    (merged over every batch of an update), and their per-(class, bin) counts re-derived
    from them: the cut points and counts of the refit on all rows.

    Returns the features, the statistics, and the names of the features whose cut points
    moved. Raises a one-line error for a binned feature without value counts (a model
    saved before they were kept) and for a tree-augmented model whose pair counts span a
    feature whose cut points moved (pair counts per bin cannot be recounted for new bins
    from the counts of single columns)."""
    binned = [f for f in features if f.kind == "binned"]
    require_cut_counts(features, stats)
    if not binned:
        return list(features), stats, []
    edges = edges_from_counts(engine, binned, stats.cuts)
    moved = [f.name for f in binned if tuple(edges[f.name]) != tuple(f.edges or ())]
    paired = set(stats.pairs.features) if stats.pairs is not None else set()
    if paired & set(moved):
        name = next(n for n in moved if n in paired)
        old = next(f.edges for f in binned if f.name == name)
        raise SqlnbError(f"the new rows move the cut points of binned column {name!r} ({_cut_text(old)} -> "
                         f"{_cut_text(edges[name])}), and this tree-augmented model's pair counts over its bins "
                         "cannot be recounted without the old rows; refit the model on all rows (sqlnb fit "
                         "--structure tan) instead")
    feats = {**stats.features}
    out = []
    for f in features:
        if f.name in moved:
            f = replace(f, edges=tuple(edges[f.name]))
            feats[f.name] = Counts(list(range(len(f.edges) + 1)), stats.cuts[f.name].binned(f.edges))
        out.append(f)
    return out, replace(stats, features=feats), moved


def edges_from_counts(engine: "duckdb.DuckDBPyConnection | Engine", binned: Sequence[Feature],
                      counts: Mapping[str, Any]) -> dict[str, tuple]:
    """Each binned feature's cut points from its value counts ``counts`` (no scan: MDL in
    numpy, quantiles by DuckDB over the counted values, DuckDB only)."""
    edges = mdl_edges([f for f in binned if f.bins == "mdl"], counts)
    quant = [f for f in binned if f.bins.startswith("quantile:")]
    if quant:
        edges.update(quantile_edges_from_counts(as_engine(engine), quant, counts))
    return edges


def _cut_text(edges) -> str:
    return ", ".join(f"{e:.6g}" for e in edges) if edges else "no cut"


def _class_case(label: str, label_type: str, classes: list, values: Sequence[float]) -> exp.Expression:
    return exp.Case(
        this=sql.col(label, "src"),
        ifs=[exp.If(this=sql.value(c, label_type), true=sql.dbl(float(v))) for c, v in zip(classes, values)],
    )


def collect_statistics(
    con: "duckdb.DuckDBPyConnection | Engine",
    source: Source,
    label: str,
    features: Sequence[Feature],
    weight: str | None = None,
    min_classes: int = 2,
    pairs: bool | Sequence[str] = False,
) -> Statistics:
    """Run the training aggregations and return the model's sufficient statistics.

    ``con`` is a DuckDB connection or an :class:`~sqlnb.engines.Engine`; only the
    aggregates' results (a few rows per class) come back to Python. ``pairs``: also
    count every pair of discrete features (tree-augmented naive Bayes, one more scan,
    :mod:`sqlnb.models.naive_bayes.tan`): True for the eligible features, or their names.
    """
    engine = as_engine(con)
    histogram = uses_histogram(engine.dialect, features)  # DuckDB's own aggregate, up to 48 columns
    shifts = gaussian_shifts(engine, source, features)
    rows = _statistics_rows(engine, source, label, weight, features, histogram, shifts)
    stats = _statistics_from_rows(engine, source, label, features, weight, min_classes, histogram, rows, shifts)
    # token bags: one GROUP BY label, token each (sqlnb.models.naive_bayes.text)
    collect_bags(engine, source, label, weight, features, stats.classes, stats.features)
    if pairs is not False:
        tree = (tan.eligible(features, stats.features) if pairs is True
                else [f for f in features if f.name in set(pairs)])
        stats.pairs = tan.collect_pairs(engine, source, label, weight, tree, stats.classes, stats=stats.features)
    return stats


def collect_statistics_by(
    con: "duckdb.DuckDBPyConnection | Engine",
    source: Source,
    label: str,
    features: Sequence[Feature],
    group: exp.Expression,
) -> dict[Any, Statistics]:
    """Statistics per value of ``group`` (e.g. a fold number) from ONE scan grouped by
    (label, group), each aligned to the classes of all groups so that any union of them
    merges (:meth:`Statistics.merge`) to the statistics of those rows. Unweighted.

    On an engine without ``histogram()`` the categorical counts of every group come from
    one more statement, the GROUPING SETS counts with the group in every set."""
    engine = as_engine(con)
    histogram = uses_histogram(engine.dialect, features)
    shifts = gaussian_shifts(engine, source, features)
    rows = _statistics_rows(engine, source, label, None, features, histogram, shifts, group)
    by_group: dict[Any, list] = {}
    for r in rows:
        by_group.setdefault(r[-1], []).append(r[:-1])
    cats = [f for f in features if f.kind == "categorical"]
    counts: dict[Any, list] = {}
    if cats and not histogram:
        for r in counts_rows(engine, source, label, None, cats, group):
            counts.setdefault(r[-1], []).append(r[:-1])
    out = {}
    for g, grows in by_group.items():
        if any(r[0] is not None for r in grows):
            where = exp.EQ(this=group.copy(), expression=sql.value(g))
            out[g] = _statistics_from_rows(engine, source, label, features, None, 1, histogram, grows, shifts, where,
                                           counts.get(g, []) if cats and not histogram else None)
    for g, st in out.items():  # token bags: each group's own GROUP BY label, token
        collect_bags(engine, source, label, None, features, st.classes, st.features,
                     exp.EQ(this=group.copy(), expression=sql.value(g)))
    classes = sorted({c for st in out.values() for c in st.classes}, key=_sort_key)
    if not classes:
        raise SqlnbError(f"{source.description} has no labelled rows; nothing to learn from")
    if len(classes) < 2:
        raise SqlnbError(f"label column {label!r} in {source.description} has only one class "
                         f"({classes[0]!r}); a classifier needs at least two")
    return {g: st.align(classes) for g, st in out.items()}


def _statistics_from_rows(engine, source, label, features, weight, min_classes, histogram, rows,
                          shifts=None, group_where=None, count_rows=None) -> Statistics:
    label_type = source.columns[label]
    where = source.description
    null_rows = sum(int(r[1]) for r in rows if r[0] is None)
    rows = [r for r in rows if r[0] is not None]
    if any(isinstance(r[0], float) and math.isnan(r[0]) for r in rows):
        raise SqlnbError(f"label column {label!r} in {where} holds NaN; use NULL for unlabelled rows")
    if not rows:
        if null_rows:
            raise SqlnbError(f"label column {label!r} in {where} is NULL in all {null_rows} rows; nothing to learn from")
        raise SqlnbError(f"{where} has no rows; nothing to learn from")
    rows.sort(key=lambda r: _sort_key(r[0]))
    classes = [r[0] for r in rows]
    if len(classes) < min_classes:
        raise SqlnbError(
            f"label column {label!r} in {where} has only one class ({classes[0]!r}); "
            "a classifier needs at least two"
        )
    off = 2
    if weight:
        off = 5
        if any(r[4] != r[1] for r in rows):
            raise SqlnbError(f"weight column {weight!r} in {where} has NULL values; give every row a weight")
        if any(r[3] is not None and (float(r[3]) < 0 or math.isnan(float(r[3]))) for r in rows) or any(
            not math.isfinite(float(r[2] or 0)) for r in rows):
            raise SqlnbError(f"weight column {weight!r} in {where} has negative, NaN or infinite values")
    class_rows = np.array([float(r[1]) for r in rows])
    class_n = np.array([float(r[2] or 0) for r in rows]) if weight else class_rows.copy()

    feats: dict[str, Any] = {}
    inexact: list[Feature] = []
    pos = off
    for f, n_aggs in zip(features, _widths(features, bool(weight), histogram, shifts)):
        fam = family_for(f)
        values = [r[pos:pos + n_aggs] for r in rows]
        pos += n_aggs
        if shifts is not None and f.name in shifts:
            bad = fam.unsummable(values, classes)
            if bad is not None:
                raise _nonfinite_error(engine, source, label, f, bad, "mean")
            feats[f.name], lost = fam.collect_shifted(f, values, classes, where, shifts[f.name])
            if lost:
                inexact.append(f)
        elif n_aggs:
            feats[f.name] = fam.collect(f, values, classes, where)

    if inexact:
        _exact_m2_pass(engine, source, label, label_type, weight, inexact, classes, feats, group_where)
    if weight or not histogram:
        _weighted_passes(engine, source, label, label_type, weight, features, classes, feats, count_rows)
    return Statistics(classes, class_n, class_rows, {f.name: feats[f.name] for f in features}, null_rows)


def _exact_m2_pass(engine, source, label, label_type, weight, gauss, classes, feats, group_where=None) -> None:
    """Gaussian M2 around the class means, ``Σ (x − θ_c)²`` (and ``Σ w (x − θ_c)²``),
    for the columns whose shifted sums lost too many digits: the stable two-pass form,
    reading only those columns (families/gaussian.py). Thousands of them (columns constant
    in a class, as wide indicator data has) are summed in the long shape
    (:func:`_second_pass_long`): as one SELECT of CASE expressions, 3,000 such columns took
    38 s to fit, growing quadratically."""
    if weight is None and engine.dialect == "duckdb" and len(gauss) >= wide.long_min():
        got = _second_pass_long(engine, source, label, label_type, gauss, classes, feats, group_where)
        per = 2
    else:
        got, per = _second_pass(engine, source, label, label_type, weight, gauss, classes, feats, group_where)
    for f in gauss:
        m = feats[f.name]

        def corrected(n, mean, s1, s2):
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                safe = np.where(n > 0, n, 1.0)
                return np.where(n > 0, mean + s1 / safe, mean), np.where(n > 0, np.maximum(s2 - s1 * s1 / safe, 0.0), 0.0)

        m.rows_mean, m.rows_m2 = corrected(m.rows, m.rows_mean, got[f.name][:, 0], got[f.name][:, 1])
        if per == 4:
            m.mean, m.m2 = corrected(m.n, m.mean, got[f.name][:, 2], got[f.name][:, 3])
        else:
            m.mean, m.m2 = m.rows_mean.copy(), m.rows_m2.copy()
        over = ~(np.isfinite(m.rows_m2) & np.isfinite(m.m2))
        if over.any():  # finite values (their sums were), so the variance itself is too large
            raise _nonfinite_error(engine, source, label, f, classes[int(np.argmax(over))], "variance")


def _labelled(label: str, group_where: exp.Expression | None) -> exp.Expression:
    cond = exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null()))
    return cond if group_where is None else exp.And(this=cond, expression=group_where.copy())


def _second_pass(engine, source, label, label_type, weight, gauss, classes, feats, group_where):
    """Per column, per class: ``Σ (x − θ_c), Σ (x − θ_c)²`` (and weighted) from one
    SELECT grouped by class; with the number of sums per column."""
    fam = REGISTRY["gaussian"]
    w = sql.as_double(sql.col(weight, "src")) if weight else None
    cols = [exp.alias_(sql.col(label, "src"), "k", quoted=True)]
    for f in gauss:
        m = feats[f.name]
        cols += fam.second_pass(f, None, _class_case(label, label_type, classes, m.rows_mean))
        if w is not None:
            cols += fam.second_pass(f, w, _class_case(label, label_type, classes, m.mean))
    q = exp.select(*cols).from_(source.from_("src")).where(_labelled(label, group_where)).group_by(sql.col(label, "src"))
    by_class = {r[0]: r[1:] for r in engine.execute(q)}
    per = 4 if w is not None else 2
    return {f.name: np.array([[float(v or 0.0) for v in by_class[c][per * j:per * (j + 1)]] if c in by_class
                              else [0.0] * per for c in classes]) for j, f in enumerate(gauss)}, per


def _second_pass_long(engine, source, label, label_type, gauss, classes, feats, group_where):
    """:func:`_second_pass` (unweighted) in the long shape: each row's values as one list,
    and beside it its class's means as one list (a CASE on the label choosing among one
    list literal per class), unnested together and grouped by class and column."""
    fam = REGISTRY["gaussian"]
    means = exp.Case(this=sql.col(label, "src"), ifs=[
        exp.If(this=sql.value(c, label_type),
               true=exp.Array(expressions=[sql.dbl(float(feats[f.name].rows_mean[k])) for f in gauss]))
        for k, c in enumerate(classes)])
    rows = exp.select(exp.Star()).from_(source.from_("src"), copy=False).where(_labelled(label, group_where))
    from_ = exp.Subquery(this=rows, alias=exp.TableAlias(this=sql.ident("src")))
    q = sql.long_select(from_, [("k", sql.col(label, "src"))], exp.Array(expressions=[fam.value(f) for f in gauss]),
                        lambda v: [exp.Sum(this=(d := sql.paren(exp.Sub(this=v.copy(), expression=exp.column(
                            "mu", quoted=True))))), exp.Sum(this=exp.Mul(this=d.copy(), expression=d.copy()))],
                        beside=[("mu", means)])
    got = {(r[0], r[1]): (float(r[2] or 0.0), float(r[3] or 0.0)) for r in engine.execute(q)}
    return {f.name: np.array([got.get((c, j), (0.0, 0.0)) for c in classes]) for j, f in enumerate(gauss)}


def _nonfinite_error(engine, source, label, f: Feature, cls, what: str) -> SqlnbError:
    """The error for Gaussian column ``f`` whose sums in class ``cls`` came back NaN or
    infinite: NaN or ±inf values in the data (named with their class and count), or
    finite values whose ``what`` overflowed a double (:func:`sqlnb.stats.overflow_error`)."""
    census = engine.execute(census_query(source, label, REGISTRY["gaussian"].value(f)))
    bad = nonfinite_values(census)
    if bad is not None:
        return SqlnbError(f"column {f.name!r} in {source.description} holds {bad[1]} NaN or infinite value"
                          f"{'s' if bad[1] != 1 else ''} (class {bad[0]!r}); replace them with NULL to treat "
                          "them as missing, or filter those rows")
    return overflow_error(f.name, source.description, cls, census, what)


def _weighted_passes(engine, source, label, label_type, weight, features, classes, feats, rows=None) -> None:
    # Categorical counts come from GROUPING SETS when weighted or when the engine has no
    # histogram() (counts.counts_rows: a statement per block under the engine's limit);
    # ``rows``: its (class, column, value, count) rows when already read (one group's, by
    # collect_statistics_by).
    cats = [f for f in features if f.kind == "categorical"]
    if cats:
        hists: dict[str, list[dict]] = {f.name: [dict() for _ in classes] for f in cats}
        index = {c: i for i, c in enumerate(classes)}
        if rows is None:
            rows = counts_rows(engine, source, label, weight, cats)
        for k, j, v, n in rows:  # (class, column, value, count)
            if v is not None:
                hists[cats[j].name][index[k]][v] = float(n or 0.0)
        for f in cats:
            feats[f.name] = counts_from(hists[f.name], f, source.description)
