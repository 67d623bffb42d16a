"""Cut points of ``binned`` features, computed in the database before the training scan.

Two discretisations (``bins=`` / ``--bins``):

``quantile:K``
    Equal frequency: the cut points are DuckDB's ``quantile_cont(x, [1/K, …, (K−1)/K])``
    over the labelled rows where ``x`` is not NULL (linear interpolation between order
    statistics, ``numpy.quantile``'s default), so they need not be data values. Bins are
    ``[e_b, e_{b+1})``; equal cut points collapse into one, and a cut point at the
    column's minimum is dropped (its first bin would be empty), so a column with many
    equal values gets fewer than K bins. One aggregate query for all such columns.

``mdl``
    Fayyad & Irani (1993), "Multi-interval discretization of continuous-valued attributes
    for classification learning" (IJCAI): the cut minimising the class entropy of the
    split, applied recursively while the MDL criterion accepts it::

        Gain(T; S) > log2(N − 1)/N + Δ(T; S)/N
        Δ(T; S)    = log2(3^k − 2) − [k·Ent(S) − k1·Ent(S1) − k2·Ent(S2)]

    (entropies in bits, N the rows of S, k, k1, k2 the classes present in S, S1, S2).
    It runs on per-(value, class) row counts aggregated in SQL — one ``GROUP BY
    GROUPING SETS ((label, x_1), (label, x_2), …)`` for all such columns, the rows never
    leave the database — over the sorted distinct values, with cumulative counts. Cut
    points are the midpoints between adjacent distinct values (the paper's); among
    splits of equal entropy the lowest cut point wins. Counts are unweighted: the
    criterion is a code length in examples, which a row weight does not change.

A fit with binned columns reads the data 1 + (one per discretisation used) times: the
cut points first (:func:`sqlnb.models.naive_bayes.fit.resolve_edges`), then the training
scan, which counts rows per (class, bin) (:mod:`sqlnb.models.naive_bayes.families.binned`).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.source import Table, resolve
from sqlnb.stats import ValueCounts, sorted_values
from sqlnb.store import arrow
from sqlnb.store.arrow import pa
from sqlnb.models.naive_bayes.families import REGISTRY

def parse_bins(spec: str, where: str = "bins") -> str:
    """``spec`` checked and normalised: ``"mdl"`` or ``"quantile:K"`` with an integer K >= 2."""
    text = str(spec).strip().lower()
    if text == "mdl":
        return text
    if text.startswith("quantile:"):
        try:
            k = int(text.split(":", 1)[1])
        except ValueError:
            k = 0
        if k >= 2:
            return f"quantile:{k}"
    raise SqlnbError(f"{where} {spec!r} is not a discretisation; use mdl (Fayyad & Irani) or quantile:K "
                     "(K equal-frequency bins, K >= 2)")


def split_bins(bins: str | Mapping[Any, str] | None) -> tuple[str | None, dict[str, str]]:
    """``bins`` as (the spec of every numeric column or None, {column: spec}).

    A string applies to every numeric column without a kind of its own; a mapping names
    columns, and its key ``None`` (if any) is the spec of every other numeric column."""
    if bins is None:
        return None, {}
    if isinstance(bins, str):
        return parse_bins(bins), {}
    rest = {k: parse_bins(v, f"bins for {k!r}") for k, v in bins.items() if k is not None}
    every = bins.get(None)
    return (parse_bins(every) if every is not None else None), rest


def mdl_cuts(values: np.ndarray, counts: np.ndarray) -> list[float]:
    """Fayyad & Irani's MDL cut points of one column from its per-(value, class) counts.

    Parameters
    ----------
    values : (m,) array
        The distinct values, ascending.
    counts : (m, K) array
        Rows of each value in each class.

    Returns
    -------
    list of float
        The accepted cut points, ascending (midpoints between adjacent values).
    """
    values = np.asarray(values, dtype=float)
    counts = np.asarray(counts, dtype=float)
    cuts: list[float] = []
    stack = [(0, len(values))]
    while stack:
        lo, hi = stack.pop()
        i = _best_split(counts[lo:hi])
        if i is None:
            continue
        a, b = float(values[lo + i]), float(values[lo + i + 1])
        mid = (a + b) / 2.0
        if not math.isfinite(mid):  # a + b overflowed (values near the largest double)
            mid = a / 2.0 + b / 2.0
        cuts.append(mid if a < mid <= b else b)  # adjacent doubles: the upper one starts the bin
        stack += [(lo, lo + i + 1), (lo + i + 1, hi)]
    return sorted(cuts)


def _xlogx(c: np.ndarray) -> np.ndarray:
    """``c·log2 c`` elementwise, 0 at 0."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(c > 0, c * np.log2(c), 0.0)


def _n_entropy(c: np.ndarray) -> np.ndarray:
    """``n·Ent`` (bits) of each row of counts ``c``: ``n log2 n − Σ_c c log2 c``, one
    logarithm per count rather than a division and a logarithm per share."""
    return _xlogx(c.sum(axis=-1)) - _xlogx(c).sum(axis=-1)


def _best_split(c: np.ndarray) -> int | None:
    """Index i of the best cut after the i-th distinct value of the segment with counts
    ``c`` when the MDL criterion accepts it, else None."""
    if len(c) < 2:
        return None
    total = c.sum(axis=0)
    n = float(total.sum())
    left = np.cumsum(c, axis=0)[:-1]
    right = total - left
    ones = np.ones(c.shape[1])
    nl = np.cumsum(c @ ones)[:-1]  # row sums by a product: numpy reduces a short last axis slowly
    # N·E(T; S) for every cut T, as Σ_side (n log2 n − Σ_c c log2 c)
    ne = _xlogx(nl) + _xlogx(n - nl) - (_xlogx(left) + _xlogx(right)) @ ones
    i = int(np.argmin(ne))  # the first minimum: the lowest cut among equal ones
    nl, nr = float(left[i].sum()), float(right[i].sum())
    ent, el, er = float(_n_entropy(total)) / n, float(_n_entropy(left[i])) / nl, float(_n_entropy(right[i])) / nr
    gain = ent - (nl * el + nr * er) / n
    k, k1, k2 = (int(np.count_nonzero(x)) for x in (total, left[i], right[i]))
    # log2(3^k − 2) without forming 3^k (which overflows a double past k = 646)
    log3k = k * math.log2(3.0) + math.log2(1.0 - 2.0 * 3.0 ** -k)
    delta = log3k - (k * ent - k1 * el - k2 * er)
    return i if gain > (math.log2(n - 1.0) + delta) / n else None


def _quantile_edges(row: Sequence[Any]) -> tuple:
    lo, qs = row
    if lo is None or qs is None:
        return ()
    edges = sorted({float(q) for q in qs if q is not None and math.isfinite(float(q))})
    return tuple(e for e in edges if e > float(lo))


def value_counts_query(source, label: str, weight: str | None, features: Sequence,
                       group: exp.Expression | None = None) -> exp.Select:
    """Per (class, value) rows and weighted counts of the binned ``features``: ``SELECT k,
    v_0, g_0, v_1, g_1, …, COUNT(*), SUM(w)`` over ``GROUPING SETS ((k, v_0), (k, v_1), …)``
    of the labelled rows, ``v_j`` the column as the DOUBLE the bins compare
    (``SUM(w)`` is ``COUNT(*)`` again without a weight). A continuous column brings about
    one row per training row; they are what MDL reads anyway, and the model keeps them
    (:class:`~sqlnb.stats.ValueCounts`) so that an update recomputes the cut points.
    ``group`` (e.g. a fold): in every set too, its value the last column ``grp``."""
    fam = REGISTRY["binned"]
    inner = [exp.alias_(sql.col(label, "src"), "k", quoted=True)]
    if group is not None:
        inner.append(exp.alias_(group.copy(), "grp", quoted=True))
    inner += [exp.alias_(fam.value(f), f"v{j}", quoted=True) for j, f in enumerate(features)]
    if weight is not None:
        inner.append(exp.alias_(sql.as_double(sql.col(weight, "src")), "w", quoted=True))
    labelled = exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null()))
    rows = exp.select(*inner).from_(source.from_("src")).where(labelled)
    k = exp.column("k", quoted=True)
    cols = [k.copy()]
    sets = []
    for j in range(len(features)):
        v = exp.column(f"v{j}", quoted=True)
        cols += [v.copy(), exp.alias_(exp.Grouping(expressions=[v.copy()]), f"g{j}", quoted=True)]
        sets.append(exp.Tuple(expressions=[k.copy(), v.copy(), *([exp.column("grp", quoted=True)] * (group is not None))]))
    n = exp.Sum(this=exp.column("w", quoted=True)) if weight is not None else exp.Count(this=exp.Star())
    cols += [exp.alias_(exp.Count(this=exp.Star()), "rows", quoted=True), exp.alias_(n, "n", quoted=True)]
    if group is not None:
        cols.append(exp.column("grp", quoted=True))
    return (exp.select(*cols).from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=sql.ident("r"))))
            .group_by(exp.GroupingSets(expressions=sets)))


def value_counts_long_query(source, label: str, weight: str | None, features: Sequence,
                            group: exp.Expression | None = None) -> exp.Select:
    """:func:`value_counts_query` in the long shape (DuckDB): ``SELECT k, j, v, COUNT(*),
    SUM(w) … GROUP BY k, j, v`` over each labelled row's values unnested to (``j``, ``v``).
    Its result has 5 columns rather than 2·F + 3 mostly NULL ones: a fit of 1M rows x 5
    continuous quantile-binned columns peaked at 1.3 GB with the GROUPING SETS result.
    ``group`` (e.g. a fold): grouped by too, its value the last column ``grp``."""
    fam = REGISTRY["binned"]
    labelled = exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null()))
    w = sql.as_double(sql.col(weight, "src")) if weight is not None else sql.dbl(1.0)
    lists = exp.select(exp.alias_(sql.col(label, "src"), "k", quoted=True),
                       exp.alias_(exp.Array(expressions=[fam.value(f) for f in features]), "l", quoted=True),
                       exp.alias_(w, "w", quoted=True)).from_(source.from_("src")).where(labelled)
    col = lambda name: exp.column(name, quoted=True)  # noqa: E731
    by = [col("grp")] if group is not None else []
    if group is not None:
        lists.select(exp.alias_(group.copy(), "grp", quoted=True), copy=False)
    rows = exp.select(col("k"), col("w"), *by,
                      exp.alias_(exp.Unnest(expressions=[col("l")]), "v", quoted=True),
                      exp.alias_(exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[
                          exp.Literal.number(len(features))])]), "j", quoted=True)
                      ).from_(exp.Subquery(this=lists, alias=exp.TableAlias(this=sql.ident("l"))))
    n = exp.Sum(this=col("w")) if weight is not None else exp.Count(this=exp.Star())
    return (exp.select(col("k"), col("j"), col("v"), exp.alias_(exp.Count(this=exp.Star()), "rows", quoted=True),
                       exp.alias_(n, "n", quoted=True), *(c.copy() for c in by))
            .from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=sql.ident("u"))))
            .where(exp.Not(this=exp.Is(this=col("v"), expression=exp.Null())))
            .group_by(col("k"), col("j"), col("v"), *by))


def value_counts_table(engine, source, label: str, weight: str | None, features: Sequence,
                       group: exp.Expression | None = None) -> pa.Table:
    """The result of :func:`value_counts_long_query` (DuckDB: long and columnar, a
    continuous column brings a row per training row) or, on another engine,
    :func:`value_counts_query`, as an Arrow table for :func:`value_counts`; with
    ``group``, its value in a last column ``grp`` (drop it before :func:`value_counts`)."""
    if engine.dialect == "duckdb":
        return engine.relation(value_counts_long_query(source, label, weight, features, group)).to_arrow_table()
    rows = engine.execute(value_counts_query(source, label, weight, features, group))
    names = ["k", *[c for j in range(len(features)) for c in (f"v{j}", f"g{j}")], "rows", "n"]
    table = pa.table({c: pa.array([r[i] for r in rows]) if c == "k" else
                      pa.array([None if r[i] is None else float(r[i]) for r in rows], pa.float64())
                      for i, c in enumerate(names)})
    return table.append_column("grp", pa.array([r[-1] for r in rows])) if group is not None else table


def value_counts(features: Sequence, table: pa.Table) -> tuple[list, dict[str, ValueCounts]]:
    """(the classes, in the model's order; each feature's :class:`~sqlnb.stats.ValueCounts`
    over them) from :func:`value_counts_query`'s or :func:`value_counts_long_query`'s
    result as an Arrow table (columnar: a
    continuous column brings about a row per training row). NULL values are in no bin and
    left out; so are NaN and ±inf, which the training scan refuses itself."""
    import pyarrow.compute as pc  # here: 0.035 CPU s to import, which a fit without binned columns never needs

    if table.num_rows == 0:
        return [], {f.name: ValueCounts(np.zeros(0), np.zeros((0, 0)), np.zeros((0, 0))) for f in features}
    labels = table.column(0)
    classes = sorted_values(pc.unique(labels).to_pylist())  # class order: the same sums on every engine
    k = arrow.numbers(pc.index_in(labels, value_set=arrow.array(classes, labels.type)))  # every label a class

    def numbers(i: int) -> np.ndarray:
        return arrow.floats(table.column(i))  # NULL -> NaN

    n_rows, n_w = numbers(table.num_columns - 2), np.nan_to_num(numbers(table.num_columns - 1), nan=0.0)
    long = table.column_names[1] == "j"  # value_counts_long_query's (k, j, v, rows, n)
    if long:
        j_all, v_all = numbers(1), numbers(2)
    out = {}
    for j, f in enumerate(features):
        if long:
            x, mine = v_all, j_all == j
        else:
            x = numbers(1 + 2 * j)
            mine = numbers(2 + 2 * j) == 0  # GROUPING(v_j) = 0: this set's rows
        mine = mine & np.isfinite(x)  # NULL (NaN here) and non-finite values: in no bin
        values, inv = np.unique(x[mine], return_inverse=True)
        size = len(values) * len(classes)
        got = [np.bincount(k[mine] * len(values) + inv, weights=w[mine], minlength=size)
               .reshape(len(classes), len(values)) for w in (n_rows, n_w)]
        out[f.name] = ValueCounts(values, got[0], got[1])
    return classes, out


def mdl_edges(features: Sequence, counts: Mapping[str, ValueCounts]) -> dict[str, tuple]:
    """Each feature's MDL cut points from its per-(class, value) row counts (unweighted:
    the criterion is a code length in examples, which a row weight does not change)."""
    return {f.name: tuple(mdl_cuts(counts[f.name].values, counts[f.name].rows.T)) for f in features}


def quantile_edges_from_counts(engine, features: Sequence, counts: Mapping[str, ValueCounts]) -> dict[str, tuple]:
    """Each ``quantile:K`` feature's cut points from its value counts: DuckDB's
    ``quantile_cont`` (:func:`quantile_query`) over the values repeated as often as rows
    had them — the very multiset the fit's query read, so the very cut points (its
    interpolation is DuckDB's own; recomputing it in numpy differs in the last bit)."""
    con = engine.con
    out = {}
    for f in features:
        vc = counts[f.name]
        reps = np.rint(vc.rows.sum(axis=0)).astype(np.int64)
        name = f"sqlnb_cut_values_{id(vc):x}"
        con.register(name, pa.table({"k": pa.array(np.zeros(int(reps.sum()), dtype=np.int8)),
                                     "x": pa.array(np.repeat(vc.values, reps), pa.float64())}))
        try:
            feature = replace(f, name="x", sql_type="DOUBLE")
            row = engine.execute(quantile_query(resolve(Table(name), con), "k", [feature]))[0]
            out[f.name] = quantile_edges([feature], row)["x"]
        finally:
            con.unregister(name)
    return out


def quantile_query(source, label: str, features: Sequence) -> exp.Select:
    """``SELECT MIN(x_j), quantile_cont(x_j, [1/K, …, (K−1)/K]), …`` over the labelled
    rows, for the ``quantile:K`` features (DuckDB's aggregate)."""
    fam = REGISTRY["binned"]
    cols = []
    for f in features:
        k = int(f.bins.split(":")[1])
        x = fam.value(f)
        cols += [exp.Min(this=x.copy()), exp.Anonymous(this="quantile_cont", expressions=[
            x.copy(), exp.Array(expressions=[sql.dbl(i / k) for i in range(1, k)])])]
    labelled = exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null()))
    return exp.select(*cols).from_(source.from_("src")).where(labelled)


def quantile_edges(features: Sequence, row: Sequence[Any]) -> dict[str, tuple]:
    """Each feature's cut points from :func:`quantile_query`'s row."""
    return {f.name: _quantile_edges(row[2 * j:2 * j + 2]) for j, f in enumerate(features)}


# -- storage of the value counts (a model's ``cut_counts`` part) ------------------------------

def cut_counts_table(cuts: Mapping[str, ValueCounts]) -> pa.Table:
    """The value counts of every binned feature as one long table ``(feature,
    class_index, value, rows, n)``, non-zero cells only."""
    parts = []
    for name, vc in cuts.items():
        ks, vs = np.nonzero((vc.rows != 0) | (vc.n != 0))
        # arrow.array: the arrays pa.array builds, without importing pandas (sqlnb.store.arrow).
        parts.append(pa.table({"feature": arrow.array([name] * len(ks), pa.string()),
                               "class_index": arrow.array(ks.astype(np.int32), pa.int32()),
                               "value": arrow.array(np.asarray(vc.values[vs], dtype=np.float64), pa.float64()),
                               "rows": arrow.array(np.asarray(vc.rows[ks, vs], dtype=np.float64), pa.float64()),
                               "n": arrow.array(np.asarray(vc.n[ks, vs], dtype=np.float64), pa.float64())}))
    schema = pa.schema([("feature", pa.string()), ("class_index", pa.int32()), ("value", pa.float64()),
                        ("rows", pa.float64()), ("n", pa.float64())])
    return pa.concat_tables(parts) if parts else schema.empty_table()


def cut_counts_from_table(table: pa.Table | None, names: Sequence[str], n_classes: int) -> dict[str, ValueCounts]:
    """:func:`cut_counts_table` read back, for the binned features ``names`` (a feature
    without any non-NULL value gets empty counts); ``{}`` for a model stored without the
    table (an older sqlnb), which an update then refuses."""
    import pyarrow.compute as pc  # here, as in value_counts

    if table is None:
        return {}
    # Read from the buffers (sqlnb.store.arrow): ChunkedArray.to_numpy imports pandas, ~40 MiB
    # of a binned model's load (`report` of an AODE model on 10,000 rows peaked past 300 MB).
    at = pc.index_in(table.column("feature"), value_set=arrow.array(list(names), table.column("feature").type))
    at = arrow.numbers(arrow.filled(at, -1))
    k, value, rows, n = (arrow.floats(table.column(c)) for c in ("class_index", "value", "rows", "n"))
    out = {}
    for i, name in enumerate(names):
        mine = at == i
        values, inv = np.unique(value[mine], return_inverse=True)
        got = []
        for w in (rows, n):
            a = np.zeros((n_classes, len(values)))
            a[k[mine].astype(np.int64), inv] = w[mine]
            got.append(a)
        out[name] = ValueCounts(values, got[0], got[1])
    return out
