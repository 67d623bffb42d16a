"""Tree-augmented naive Bayes (Friedman, Geiger & Goldszmidt 1997): each discrete feature
conditioned on the class and on at most one other feature, its parent in a tree.

Statistics. A scan counts every pair of tree features per class, ``n(c, x_a, x_b)``, by
``GROUP BY GROUPING SETS ((label, a, b), …)`` over the pairs (:func:`pairs_query`; in
DuckDB in statements of a dozen sets, whose hash tables cost memory each:
:data:`GROUPING_SET_BYTES`; elsewhere of at most :data:`SETS_PER_STATEMENT`), or, in
DuckDB when that would take more than :data:`LONG_AFTER_STATEMENTS` statements, by one
statement that crosses each row's list of value positions with the constant table of
pairs into one hash aggregate (:func:`pairs_long_query`; the same counts, tested);
rows where either value is NULL are left out of a pair's counts. These :class:`Pairs`
are part of the model's :class:`~sqlnb.stats.Statistics`: they add under ``update``
(and scale under its ``decay``), and the tree and the conditional tables are derived
from them whenever log-probabilities are, so an updated model *is* the refit on all
rows, tree included.

Tree features are the discrete ones: categorical columns of at most
:data:`~sqlnb.models.naive_bayes.families.categorical.INLINE_MAX` values (their scoring
lookup is inlined, so no join reorders rows), Bernoulli columns (values absent /
present) and binned columns (``bins="mdl"`` etc.: their bin numbers, the values their
per-(class, bin) counts are kept by, as Friedman et al. discretised continuous
attributes before building the tree); any feature with per-(class, value) counts fits this scheme. Gaussian,
multinomial and complement columns, token bags and larger vocabularies stay naive
(conditioned on the class only) in the same model.

Structure (Chow–Liu, conditioned on the class). From each pair's counts, over the rows
where both values are present (N of them)::

    I(X_a; X_b | C) = Σ_{c,u,v} n(c,u,v)/N · ln( n(c,u,v) · n(c) / (n(c,u) · n(c,v)) )

the plug-in (unsmoothed) estimate, with n(c), n(c,u), n(c,v) the margins of the pair's
own table. The tree is the maximum spanning tree of these weights by Prim's algorithm
from the first tree feature (in the model's feature order) as root; an edge of equal
weight is taken for the smallest feature (then the smallest parent) in that order, so
the tree is deterministic.

Parameters, smoothed like the child's own family with the estimator's pseudo-count α
(posterior mean α, MAP α − 1, MLE 0; Bernoulli β₁, β₀)::

    categorical or binned child   p(u | c, v) = (n(c, v, u) + α) / (n(c, v) + α·n_j)
    Bernoulli child               p(1 | c, v) = (n(c, v, 1) + β₁) / (n(c, v) + β₁ + β₀)

with n_j the child's number of training values, and n(c, v) = Σ_u n(c, v, u). A
(class, parent value) with no pseudo-count and no rows (0/0, MLE or MAP with α = 1)
falls back to the child's naive Bayes probabilities.

Scoring (one term per child and class, no join)::

    child NULL, NaN or unseen          0           (no evidence, as naive Bayes)
    parent NULL, NaN or unseen         ln p(x_child | c)           (naive Bayes term)
    otherwise                          ln p(x_child | c, x_parent)

The root's term is its naive Bayes term. ``unseen="bucket"`` is refused for tree models.
In DuckDB a term is one read of one list padded with a missing slot per axis (the naive
row, a 0 column), ``list_extract(w_k, COALESCE(p_parent, n_parent)·(n_child + 1) +
COALESCE(p_child, n_child) + 1)`` (:func:`padded_read`; scoring reads every table from one
list per class, each position from a prelude column: :mod:`.listed`); elsewhere CASEs.

Cost and limit: the pair scan does F(F−1)/2 pair updates per row for F tree features, so
it grows as F² (and the SQL, in DuckDB, as F: each feature is named once, the pairs are two
packed lists); it is refused past :data:`MAX_FEATURES` tree features (choose columns with
``features`` / ``exclude``, or a wrapper selection first). The limit was 40 while DuckDB ran
GROUPING SETS, whose hash table per set and thread (:data:`GROUPING_SET_BYTES`) made the scan
a statement per dozen pairs: 134 statements for 57 features. Measured on 4,601 rows × F
categorical columns of 4 values (``benchmarks/pair_scan.py``, duckdb 2.0, 2 threads, load
~9): F = 40, 57, 80: GROUPING SETS 2.6, 6.2, 12.6 s (66, 134, 265 statements, 91, 187, 372
kB of SQL); one statement 0.6, 1.3, 3.0 s (10, 18, 30 kB), peak RSS the same (150–210 MB,
the process's); F = 57 on 100,000 rows 13.9 s against 15.1 s (the same N·F² work; one
scan of the source instead of 134), but with few pairs on many rows GROUPING SETS are
faster (:data:`LONG_AFTER_STATEMENTS`). The limit is 100 features (4,950 pairs), set by what
follows the scan rather than by it: at F = 100 on those 4,601 rows a TAN fit took 15 s
(statistics, Chow–Liu in Python, O(F³)) and its scoring 3.6 s, peak 0.28 GB; AODE's
tables hold F² cells per class (bound as parameters in DuckDB's scoring, literals in an
export), KDB(2)'s F tables of about n³ cells (n values a feature). Earlier, on ~325,000
rows of adult and mushroom (``benchmarks/tan_adult.py cost``, GROUPING SETS): 28 pairs
1.3 s, 231 pairs 7.0 s against 0.25 and 0.44 s for the per-column counts.

Cross-validation counts every fold's pairs in the same one scan, grouped by fold too
(:func:`with_fold_pairs`), so a grid over ``structure`` costs one more scan. Sampling and
semi-supervised EM treat features as independent given the class and refuse tree models.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.counts import SPARK_GROUPING_COLUMNS, column_blocks
from sqlnb.models.naive_bayes.families import REGISTRY, Feature
from sqlnb.models.naive_bayes.families.base import log_ratio
from sqlnb.models.naive_bayes.families.categorical import INLINE_MAX
from sqlnb.stats import Counts, _align, sorted_values
from sqlnb.models.naive_bayes.information import chow_liu, conditional_mutual_information  # noqa: F401 (tan.* names)
from sqlnb.store import arrow

STRUCTURES = ("naive", "tan", "aode")
#: The structures whose statistics hold the pair counts (:class:`Pairs`): the one place a
#: fit, cross-validation, selection and screening ask whether to gather them. A structure
#: derived from the same counts (AODE, :mod:`~sqlnb.models.naive_bayes.aode`; KDB) adds
#: its name here and to :data:`STRUCTURES`.
PAIRED = ("tan", "aode")


def needs_pairs(structure: str | None) -> bool:
    """Whether a model of this ``structure`` needs the pair counts of :func:`collect_pairs`
    (KDB's ``kdb:K`` too: its parents are chosen from them)."""
    if isinstance(structure, str) and "+" in structure:  # an average of structures (mixture)
        return any(needs_pairs(s.strip()) for s in structure.split("+"))
    return structure in PAIRED or (isinstance(structure, str) and structure.startswith(("kdb:", "skdb", "eskdb")))

#: Most tree features: F(F−1)/2 pairs (100 features: 4,950), see "Cost and limit" in the
#: module docstring.
MAX_FEATURES = 100
#: Most GROUPING SETS in one statement of the pair scan on engines other than DuckDB (the
#: old one-statement limit: 40 features' pairs).
SETS_PER_STATEMENT = 780
BERNOULLI_VALUES = [False, True]
#: DuckDB's hash aggregate gives every grouping set a hash table of its own in every thread
#: that reads rows, ~2.3 MB each however few the rows (measured with duckdb 2.0: 528 sets
#: of 232 rows peaked at 1.24 GB; 190 sets of 500,000 rows at 0.56 GB on one thread, 0.98
#: GB on two). The pair scan is therefore split into statements of at most
#: ``PAIR_SCAN_BYTES / (threads · GROUPING_SET_BYTES)`` sets (at least
#: ``MIN_SETS_PER_SCAN``): each reads the rows again, but the per-set work is the same.
#: 64 MB (12 sets a statement on two threads): with the binned columns' value counts kept
#: beside it, 128 MB let the 232-row x 33-column TAN --bins mdl fit peak at 338 MB; 64 MB
#: at 254 MB (1.2 s -> 2.1 s on that table; tests/test_defaults_memory.py).
GROUPING_SET_BYTES = 2.5 * 2**20
PAIR_SCAN_BYTES = 64 * 2**20
MIN_SETS_PER_SCAN = 4
#: DuckDB counts the pairs in one statement of :func:`pairs_long_query` when GROUPING SETS
#: would take more statements than this (more than ~20 tree features on two threads). Each
#: GROUPING SETS statement costs ~40 ms however few the rows (its hash tables) and reads
#: the rows again, while a pair update through the long form's cross join costs ~2x one
#: through a grouping set (``benchmarks/pair_scan.py``, load 12-14, back to back: 8 binned
#: columns x 300,000 rows, 4 statements 0.94 s against one 1.76 s; 57 x 30,000, 134
#: statements 65 s against 11 s; 57 categorical x 4,601, 6.2 s against 1.3 s).
LONG_AFTER_STATEMENTS = 16


# -- statistics ---------------------------------------------------------------------------
@dataclass
class PairCounts:
    """Per (class, value of a, value of b) weighted counts of one pair of features, over
    the rows where both are present."""

    values_a: list
    values_b: list
    counts: np.ndarray  # (n_classes, len(values_a), len(values_b))

    def align(self, src: list, dst: list) -> "PairCounts":
        return PairCounts(list(self.values_a), list(self.values_b), _align(self.counts, src, dst, axis=0))

    def over(self, values_a: list, values_b: list) -> np.ndarray:
        """The counts re-indexed to (superset) value lists, zeros elsewhere."""
        return _align(_align(self.counts, self.values_a, values_a, axis=1), self.values_b, values_b, axis=2)

    def merge(self, other: "PairCounts") -> "PairCounts":
        va = sorted_values(list(self.values_a) + list(other.values_a))
        vb = sorted_values(list(self.values_b) + list(other.values_b))
        return PairCounts(va, vb, self.over(va, vb) + other.over(va, vb))

    def scaled(self, factor: float) -> "PairCounts":
        return PairCounts(list(self.values_a), list(self.values_b), self.counts * factor)

    def take(self, idx) -> "PairCounts":
        return PairCounts(list(self.values_a), list(self.values_b), self.counts[idx])


@dataclass
class Pairs:
    """The pair counts of every pair of tree features ``(a, b)``, ``a`` before ``b`` in
    ``features`` (the model's order)."""

    features: list
    cells: dict

    def _map(self, fn) -> "Pairs":
        return Pairs(list(self.features), {k: fn(v) for k, v in self.cells.items()})

    def align(self, src: list, dst: list) -> "Pairs":
        return self._map(lambda p: p.align(src, dst))

    def scaled(self, factor: float) -> "Pairs":
        return self._map(lambda p: p.scaled(factor))

    def take(self, idx) -> "Pairs":
        return self._map(lambda p: p.take(idx))

    def restricted(self, keep) -> "Pairs":
        """The pair counts among the tree features in ``keep`` (what a fit on a subset of
        the features counts: :meth:`NaiveBayes.select`)."""
        return Pairs([f for f in self.features if f in keep],
                     {k: v for k, v in self.cells.items() if k[0] in keep and k[1] in keep})

    def merge(self, other: "Pairs") -> "Pairs":
        if list(self.features) != list(other.features):
            raise SqlnbError(f"cannot merge pair counts of different tree features: {self.features} and "
                             f"{other.features}")
        return Pairs(list(self.features), {k: v.merge(other.cells[k]) for k, v in self.cells.items()})

    def table(self, a: str, b: str, values_a: list, values_b: list) -> np.ndarray:
        """Counts (K, |values_a|, |values_b|) of a over b, whichever order they are kept in."""
        if (a, b) in self.cells:
            return self.cells[(a, b)].over(values_a, values_b)
        return np.transpose(self.cells[(b, a)].over(values_b, values_a), (0, 2, 1))


def eligible(features: Sequence[Feature], stats: Mapping[str, Any]) -> list[Feature]:
    """The tree features: Bernoulli columns, binned columns (by their bin numbers) and
    categorical ones of at most :data:`INLINE_MAX` (and at least one) training values; token
    bags excluded."""
    out = []
    for f in features:
        if f.bag is not None:
            continue
        if f.kind in ("bernoulli", "binned") or (f.kind == "categorical" and 0 < len(stats[f.name].values) <= INLINE_MAX):
            out.append(f)
    return out


def feature_values(f: Feature, stats: Mapping[str, Any]) -> list:
    """A tree feature's values in the order its log-probabilities are kept."""
    return BERNOULLI_VALUES if f.kind == "bernoulli" else list(stats[f.name].values)


def _fit_value(f: Feature) -> exp.Expression:
    """The value a pair is counted by: the category, or Bernoulli presence (NULL stays NULL)."""
    if f.kind == "categorical":
        return sql.col(f.name, "src")
    if f.kind == "binned":  # the bin number 0 … B−1, the value its counts are kept by
        return REGISTRY["binned"].bin_index(f, scoring=False)
    x = REGISTRY["bernoulli"].value(f)
    return exp.Case(ifs=[exp.If(this=exp.Is(this=x, expression=exp.Null()), true=exp.Null())],
                    default=exp.GT(this=x.copy(), expression=sql.dbl(f.threshold)))


def pairs_query(source, label: str, weight: str | None, features: Sequence[Feature],
                group: exp.Expression | None = None,
                pairs: Sequence[tuple[int, int]] | None = None, pad: bool = False) -> exp.Select:
    """``SELECT k, x0, GROUPING(x0) AS g0, …, COUNT(*) AS n FROM (SELECT label AS k,
    <value> AS x0, … FROM src WHERE label IS NOT NULL) GROUP BY GROUPING SETS ((k, x0, x1),
    (k, x0, x2), …)``: every pair's per-class counts in one scan (``SUM(w)`` when weighted).
    ``group`` (e.g. a cross-validation fold, over ``src``) is one more key of every set,
    returned as the last column. ``pairs``: only these pairs (positions in ``features``,
    each of which must be in one of them unless ``pad``; default every pair). ``pad``: a
    feature in none of ``pairs`` is not read and gives ``NULL AS v<j>, 1 AS g<j>``, so that
    each statement of a split scan (:func:`pair_statements`) has the whole scan's columns."""
    if pairs is None:
        pairs = [(a, b) for a in range(len(features)) for b in range(a + 1, len(features))]
    read = {j for pair in pairs for j in pair} if pad else set(range(len(features)))
    cols = [exp.alias_(sql.col(label, "src"), "k", quoted=True)]
    if group is not None:
        cols.append(exp.alias_(group.copy(), "fold", quoted=True))
    cols += [exp.alias_(_fit_value(f), f"x{j}", quoted=True) for j, f in enumerate(features) if j in read]
    if weight is not None:
        cols.append(exp.alias_(sql.as_double(sql.col(weight, "src")), "w", quoted=True))
    # copy=False: no copy of the growing tree per builder step (SQLite's export builds one per pair).
    inner = (exp.select(*cols).from_(source.from_("src"), copy=False)
             .where(exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null())), copy=False))
    x = [sql.col(f"x{j}", "t") for j in range(len(features))]
    k = sql.col("k", "t")
    extra = [sql.col("fold", "t")] if group is not None else []
    sets = [exp.Tuple(expressions=[k.copy(), *(e.copy() for e in extra), x[a].copy(), x[b].copy()])
            for a, b in pairs]
    out = [k.copy()]
    for j in range(len(features)):
        on = j in read  # else NULL AS v<j>, 1 AS g<j> (not grouped by it)
        out += [exp.alias_(x[j].copy() if on else exp.null(), f"v{j}", quoted=True),
                exp.alias_(exp.Grouping(expressions=[x[j].copy()]) if on else exp.Literal.number(1), f"g{j}",
                           quoted=True)]
    n = exp.Sum(this=sql.col("w", "t")) if weight is not None else exp.Count(this=exp.Star())
    out.append(exp.alias_(n, "n", quoted=True))
    out += [e.copy() for e in extra]
    return (exp.select(*out).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("t"))), copy=False)
            .group_by(exp.GroupingSets(expressions=sets), copy=False))


def pair_statements(F: int, per_statement: int, dialect: str | None = None,
                    keys: int = 1) -> list[list[tuple[int, int]]]:
    """Every pair ``(a, b)``, ``a < b < F``, in order, cut into statements of at most
    ``per_statement`` pairs: the one split of the GROUPING SETS pair scan, used by
    :func:`collect_pairs` and by the exported fitting SQL
    (:func:`sqlnb.workflows.export.fit_queries`). On Spark, past
    :data:`SPARK_GROUPING_COLUMNS` − ``keys`` features, the features are cut into blocks
    of half that and each statement holds pairs of two blocks (then in that order)."""
    most = SPARK_GROUPING_COLUMNS - keys if dialect == "spark" and F > SPARK_GROUPING_COLUMNS - keys else 2 * F
    blocks = column_blocks(F, most // 2)
    out = []
    for i, first in enumerate(blocks):
        for second in blocks[i:]:
            every = [(a, b) for a in first for b in second if a < b]
            out += [every[start:start + per_statement] for start in range(0, len(every), per_statement)]
    return out


def pairs_long_query(source, label: str, weight: str | None, features: Sequence[Feature],
                     values: Sequence[list], group: exp.Expression | None = None,
                     pairs: Sequence[tuple[int, int]] | None = None) -> exp.Select:
    """Every pair's per-class counts in one scan of one hash table (DuckDB)::

        SELECT k, a, b, u, v, COUNT(*) AS n [, fold] FROM (
          SELECT t.k, p.a, p.b, list_extract(t.x, p.a + 1) AS u, list_extract(t.x, p.b + 1) AS v
          FROM (SELECT label AS k, [pos_0, …, pos_F−1] AS x FROM src WHERE label IS NOT NULL) t
          CROSS JOIN (SELECT unnest(<a's>) AS a, unnest(<b's>) AS b) p)
        WHERE u IS NOT NULL AND v IS NOT NULL GROUP BY k, a, b, u, v [, fold]

    ``pos_j`` is the row's value's 0-based position among ``values[j]`` (the feature's
    training values: bin number, Bernoulli 0/1, the category's place), NULL when missing,
    so every pair reads integers of one type from one list. The rows stream through the
    cross join with the constant pair table (F(F−1)/2 rows) into a single hash aggregate
    of K · Σ n_a · n_b groups, where the GROUPING SETS form (:func:`pairs_query`) keeps a
    hash table per set and thread (:data:`GROUPING_SET_BYTES`) and so needed a statement
    per dozen pairs; the SQL names each feature once (the pair lists are two packed
    literals), so it grows as F, not F². ``SUM(w)`` when weighted; ``group`` as in
    :func:`pairs_query`."""
    cols = [exp.alias_(sql.col(label, "src"), "k", quoted=True)]
    if group is not None:
        cols.append(exp.alias_(group.copy(), "fold", quoted=True))
    if weight is not None:
        cols.append(exp.alias_(sql.as_double(sql.col(weight, "src")), "w", quoted=True))
    cols.append(exp.alias_(exp.Array(expressions=[_fit_position(f, v) for f, v in zip(features, values)]),
                           "x", quoted=True))
    inner = (exp.select(*cols).from_(source.from_("src"))
             .where(exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null()))))
    if pairs is None:
        pairs = [(a, b) for a in range(len(features)) for b in range(a + 1, len(features))]
    table = exp.select(*(exp.alias_(exp.Unnest(expressions=[sql.packed_list([pair[i] for pair in pairs], "INTEGER")]),
                                    name, quoted=True) for i, name in enumerate("ab")))
    keys = ["k", "fold"] if group is not None else ["k"]
    pick = [exp.alias_(exp.Anonymous(this="list_extract", expressions=[
        sql.col("x", "t"), exp.Add(this=sql.col(e, "p"), expression=exp.Literal.number(1))]), o, quoted=True)
        for e, o in (("a", "u"), ("b", "v"))]
    crossed = (exp.select(*(sql.col(c, "t") for c in keys), sql.col("a", "p"), sql.col("b", "p"), *pick,
                          *([sql.col("w", "t")] if weight is not None else []))
               .from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("t"))))
               .join(exp.Subquery(this=table, alias=exp.TableAlias(this=sql.ident("p"))), join_type="CROSS"))
    n = exp.Sum(this=sql.col("w", "c")) if weight is not None else exp.Count(this=exp.Star())
    group_cols = [sql.col(c, "c") for c in ("k", "a", "b", "u", "v")]
    present = exp.and_(*(exp.Not(this=exp.Is(this=sql.col(c, "c"), expression=exp.Null())) for c in "uv"))
    out = [*(c.copy() for c in group_cols), exp.alias_(n, "n", quoted=True)]
    if group is not None:
        out.append(sql.col("fold", "c"))
        group_cols.append(sql.col("fold", "c"))
    return (exp.select(*out).from_(exp.Subquery(this=crossed, alias=exp.TableAlias(this=sql.ident("c"))))
            .where(present).group_by(*group_cols))


def _fit_position(f: Feature, values: list) -> exp.Expression:
    """The 0-based position of the row's value among the feature's training ``values``
    (INTEGER; NULL when missing): the bin number, Bernoulli presence as 0/1, a category's
    place by one equality per value (exact for every type, as the exported scoring tests)."""
    if f.kind == "categorical":
        raw = sql.col(f.name, "src")
        pos: exp.Expression = exp.Case(ifs=[exp.If(this=exp.EQ(this=raw.copy(), expression=sql.value(v, f.sql_type)),
                                                   true=exp.Literal.number(i)) for i, v in enumerate(values)])
    else:
        pos = _fit_value(f)
    return exp.Cast(this=pos, to=exp.DataType.build("INTEGER"))


def collect_pairs(engine, source, label: str, weight: str | None, features: Sequence[Feature],
                  classes: list, group: exp.Expression | None = None,
                  stats: Mapping[str, Any] | None = None) -> Pairs | dict[Any, Pairs]:
    """Count every pair of ``features`` per class and gather the rows into :class:`Pairs`
    over ``classes``; with ``group``, one :class:`Pairs` per value of it (those without
    rows are all zeros). :func:`pairs_query`'s GROUPING SETS, in statements of at most
    :func:`sets_per_scan` sets; in DuckDB, given the features' statistics ``stats`` (their
    training values), one statement of :func:`pairs_long_query` instead when that would
    be more than :data:`LONG_AFTER_STATEMENTS` statements. Refused past
    :data:`MAX_FEATURES` features."""
    F = len(features)
    if F < 2:
        raise SqlnbError(
            "structures built on pair counts (tan, aode, kdb:K) need at least two discrete features "
            "(categorical of at most "
            f"{INLINE_MAX} values, or bernoulli) to pair; {source.description} has "
            f"{F or 'none'}{(': ' + features[0].name) if F else ''}; numeric columns take part once binned "
            f"(--bins mdl, bins='mdl' in Python) or given a kind (--feature-kind COL=categorical)")
    if F > MAX_FEATURES:
        raise SqlnbError(
            f"structures built on pair counts (tan, aode, kdb:K) count every pair of the {F} discrete features "
            f"({F * (F - 1) // 2} pairs), past the limit of {MAX_FEATURES} features; choose at most "
            f"{MAX_FEATURES} columns with --features / --exclude, or run `sqlnb select` on a naive fit first")
    index = {c: i for i, c in enumerate(classes)}
    by_group: dict[Any, dict] = {}
    every = [(a, b) for a in range(F) for b in range(a + 1, F)]
    step = sets_per_scan(engine)
    if getattr(engine, "dialect", None) == "duckdb" and stats is not None and len(every) > LONG_AFTER_STATEMENTS * step:
        values = [feature_values(f, stats) for f in features]
        for r in engine.execute(pairs_long_query(source, label, weight, features, values, group, every)):
            k, a, b, u, v, n = r[:6]
            if k not in index:
                continue
            cell = by_group.setdefault(r[6] if group is not None else None, {}).setdefault(
                (features[a].name, features[b].name), {})
            cell[(index[k], values[a][u], values[b][v])] = float(n or 0.0)
        return _gathered(features, len(classes), by_group, group)
    for chunk in pair_statements(F, step, getattr(engine, "dialect", None), 1 + (group is not None)):
        used = sorted({j for pair in chunk for j in pair})  # the features of this statement
        at = {j: i for i, j in enumerate(used)}
        query = pairs_query(source, label, weight, [features[j] for j in used], group,
                            [(at[a], at[b]) for a, b in chunk])
        for r in engine.execute(query):
            g = r[-1] if group is not None else None
            n = float((r[-2] if group is not None else r[-1]) or 0.0)
            a, b = (j for i, j in enumerate(used) if r[2 + 2 * i] == 0)
            va, vb = r[1 + 2 * at[a]], r[1 + 2 * at[b]]
            if va is None or vb is None or r[0] not in index:
                continue
            cell = by_group.setdefault(g, {}).setdefault((features[a].name, features[b].name), {})
            cell[(index[r[0]], va, vb)] = cell.get((index[r[0]], va, vb), 0.0) + n
    return _gathered(features, len(classes), by_group, group)


def _gathered(features: Sequence[Feature], K: int, by_group: dict, group) -> Pairs | dict[Any, Pairs]:
    if group is None:
        return _pairs(features, K, by_group.get(None, {}))
    return {g: _pairs(features, K, cells) for g, cells in by_group.items()}


def sets_per_scan(engine) -> int:
    """How many pair grouping sets one statement of :func:`pairs_query` takes: in DuckDB,
    as many as fit :data:`PAIR_SCAN_BYTES` at :data:`GROUPING_SET_BYTES` per set and
    thread (at least :data:`MIN_SETS_PER_SCAN`); on other engines
    :data:`SETS_PER_STATEMENT`."""
    if getattr(engine, "dialect", None) != "duckdb":
        return SETS_PER_STATEMENT
    setting = exp.Anonymous(this="current_setting", expressions=[exp.Literal.string("threads")])
    threads = max(1, int(engine.execute(exp.select(setting))[0][0]))
    return max(MIN_SETS_PER_SCAN, int(PAIR_SCAN_BYTES // (threads * GROUPING_SET_BYTES)))


def _pairs(features: Sequence[Feature], K: int, cells: Mapping[tuple[str, str], dict]) -> Pairs:
    """:class:`Pairs` of every pair of ``features`` from ``{(a, b): {(k, u, v): n}}``."""
    out = {}
    for i, fa in enumerate(features):
        for fb in features[i + 1:]:
            cell = cells.get((fa.name, fb.name), {})
            va, vb = sorted_values(v for _, v, _ in cell), sorted_values(v for _, _, v in cell)
            pa, pb = {v: j for j, v in enumerate(va)}, {v: j for j, v in enumerate(vb)}
            counts = np.zeros((K, len(va), len(vb)))
            for (k, u, v), n in cell.items():
                counts[k, pa[u], pb[v]] = n
            out[(fa.name, fb.name)] = PairCounts(va, vb, counts)
    return Pairs([f.name for f in features], out)


def with_fold_pairs(engine, source, label: str, features: Sequence[Feature], fold: exp.Expression,
                    per_fold: Sequence[Any]) -> list:
    """Per-fold statistics (aligned to the same classes) with each fold's pair counts, from
    one scan grouped by fold too; the tree features are chosen on all folds' statistics,
    so that every fold counts the same pairs and any union of folds merges."""
    merged = per_fold[0]
    for s in per_fold[1:]:
        merged = merged.merge(s)
    tree = eligible(features, merged.features)
    found = collect_pairs(engine, source, label, None, tree, merged.classes, fold, merged.features)
    empty = _pairs(tree, len(merged.classes), {})
    return [replace(s, pairs=found.get(i, empty)) for i, s in enumerate(per_fold)]


# -- structure ----------------------------------------------------------------------------
@dataclass
class Tree:
    """A derived tree: each child's parent, pair log-probabilities and naive fallback.

    ``cpt[child]`` has shape (K, n_parent, n_child): ln p(child value | class, parent value).
    """

    features: list  # the tree features (Feature), model order
    parent: dict  # child name -> parent name
    cmi: np.ndarray  # (F, F) conditional mutual information
    cpt: dict


def paired_features(features: Sequence[Feature], stats, hp, structure: str) -> tuple[list[Feature], dict]:
    """``(the features the pair counts cover, in model order; their values)`` for a model of
    ``structure`` (TAN, AODE, KDB: every structure built on :class:`Pairs`), after the checks
    all of them need: the pair counts are there, unseen values are missing, and no paired
    categorical feature has grown past :data:`INLINE_MAX` values (an update can do that).
    ``hp`` None: the unseen-value policy is checked by the caller."""
    if stats.pairs is None:
        raise SqlnbError(f"structure {structure!r} needs the pair counts of a tree-augmented fit; refit with "
                         f"structure={structure!r} (sqlnb fit --structure {structure})")
    if hp is not None and hp.unseen != "missing":
        raise SqlnbError(f"structure {structure!r} scores unseen categories as missing; leave unseen at 'missing'")
    by_name = {f.name: f for f in features}
    paired = [by_name[n] for n in stats.pairs.features]
    for f in paired:
        if f.kind == "categorical" and len(stats.features[f.name].values) > INLINE_MAX:
            raise SqlnbError(f"tree feature {f.name!r} now has {len(stats.features[f.name].values)} values, past "
                             f"{INLINE_MAX}, the most a tree feature scores without a join; refit with "
                             f"structure={structure!r}, which keeps it naive")
    return paired, {f.name: feature_values(f, stats.features) for f in paired}


def derive(features: Sequence[Feature], stats, hp, params: Mapping[str, Any]) -> Tree:
    """The tree and its conditional tables from the statistics (see the module docstring)."""
    tree_feats, values = paired_features(features, stats, hp, "tan")
    F = len(tree_feats)
    cmi = np.zeros((F, F))
    for a in range(F):
        for b in range(a + 1, F):
            na, nb = tree_feats[a].name, tree_feats[b].name
            cmi[a, b] = cmi[b, a] = conditional_mutual_information(
                stats.pairs.table(na, nb, values[na], values[nb]))
    parents = chow_liu(cmi)
    parent, cpt = {}, {}
    for v, u in enumerate(parents):
        if u is None:
            continue
        child, par = tree_feats[v], tree_feats[u]
        parent[child.name] = par.name
        counts = stats.pairs.table(par.name, child.name, values[par.name], values[child.name])
        cpt[child.name] = _conditional(child, counts, hp, params[child.name])
    return Tree(tree_feats, parent, cmi, cpt)


def naive_row(f: Feature, params: Any) -> np.ndarray:
    """The feature's naive Bayes log-probabilities (K, n values) in tree-value order."""
    if f.kind == "bernoulli":
        flp, neg = params
        return np.stack([np.asarray(neg, dtype=float), np.asarray(flp, dtype=float)], axis=1)
    return np.asarray(params[1], dtype=float)


def _conditional(child: Feature, counts: np.ndarray, hp, params: Any) -> np.ndarray:
    """ln p(child value | class, parent value), (K, n_parent, n_child)."""
    n = counts.sum(axis=2, keepdims=True)
    what = f"feature {child.name!r} given its tree parent"
    if child.kind == "bernoulli":
        b1, b0 = hp.beta_for(child.name)
        den = np.broadcast_to(n + b1 + b0, counts.shape)
        out = np.concatenate([log_ratio(counts[:, :, :1] + b0, den[:, :, :1], what),
                              log_ratio(counts[:, :, 1:] + b1, den[:, :, 1:], what)], axis=2)
        empty = (n + b1 + b0 == 0)[:, :, 0]
    else:
        a = hp.pseudo(hp.alpha_for(child.name))
        den = n + a * counts.shape[2]
        out = log_ratio(counts + a, np.broadcast_to(den, counts.shape), what)
        empty = (den == 0)[:, :, 0]
    # 0/0: no rows and no pseudo-count for this (class, parent value): the naive term.
    fallback = np.broadcast_to(naive_row(child, params)[:, None, :], out.shape)
    return np.where(empty[:, :, None], fallback, out)


# -- scoring ------------------------------------------------------------------------------
def _position(f: Feature, values: list, dialect: str | None, input_type: str | None) -> exp.Expression:
    """0-based position of the row's value among ``values``; NULL when missing (NULL,
    NaN), unseen, or (DuckDB) not castable to the fitted type."""
    if f.kind == "bernoulli":
        fam = REGISTRY["bernoulli"]
        x = fam.value(f, scoring=True)
        return exp.Case(ifs=[exp.If(this=exp.Is(this=x, expression=exp.Null()), true=exp.Null()),
                             exp.If(this=fam.present(f, scoring=True), true=exp.Literal.number(1))],
                        default=exp.Literal.number(0))
    if f.kind == "binned":  # bins are numbered 0 … B−1, their positions among the values
        fam = REGISTRY["binned"]
        return fam.counted_index(f) if dialect == "duckdb" else fam.bin_index(f, scoring=True)
    if not values:
        return exp.Null()
    if dialect == "duckdb":  # enum_code is as narrow as the ENUM (UINT8): widen before position arithmetic
        return exp.Cast(this=REGISTRY["categorical"].position(f, values, input_type),
                        to=exp.DataType.build("INTEGER"))
    raw = sql.col(f.name, "src")
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=raw.copy(), expression=sql.value(v, f.sql_type)),
                                true=exp.Literal.number(i)) for i, v in enumerate(values)])


def _pick(index: exp.Expression, weights: np.ndarray, dialect: str | None) -> exp.Expression:
    """``weights[index]`` (0-based), NULL for a NULL index: a list read in DuckDB, a MAP
    lookup in Spark (:func:`sqlnb.sql.map_lookup`), a CASE elsewhere.

    The DuckDB list is one string literal cast to ``DOUBLE[]`` (the same doubles), not a
    literal per cell: wrapper selection scores every candidate's fold models in one query
    (adult, MDL bins: 140 TAN models, ~700,000 cells), whose literals took gigabytes."""
    if dialect == "duckdb":
        lst = sql.packed_list([float(w) for w in weights], "DOUBLE")
        return exp.Anonymous(this="list_extract", expressions=[lst, exp.Add(this=sql.paren(index),
                                                                              expression=exp.Literal.number(1))])
    if dialect == "spark":
        return sql.map_lookup(range(len(weights)), weights, index)
    return exp.Case(this=sql.paren(index), ifs=[exp.If(this=exp.Literal.number(i), true=sql.dbl(float(w)))
                                                 for i, w in enumerate(weights)])


def padded_cells(tables: Mapping[tuple, np.ndarray], parents: Sequence[str]) -> np.ndarray:
    """The cells :func:`padded_read` reads, every class: (K, n_parent + 1…, n_child + 1),
    each axis's last slot a missing value's (a missing child 0, missing parents the table
    of the parents present)."""
    full = tables[tuple(parents)]
    K, *sizes, n_child = full.shape
    padded = np.zeros((K, *(n + 1 for n in sizes), n_child + 1))
    for present, t in tables.items():
        at = (*(slice(0, n) if p in present else n for p, n in zip(parents, sizes)), slice(0, n_child))
        padded[(slice(None), *at)] = t
    return padded


def padded_read(tables: Mapping[tuple, np.ndarray], parents: Sequence[str],
                positions: Mapping[str, exp.Expression], child: str, k: int) -> exp.Expression:
    """DuckDB: class ``k``'s term of ``child`` as one read of one list, for ``COALESCE`` of
    the picks of ``tables`` (present parents → (K, n_parent…, n_child); every parent first,
    ``()`` the naive row) and 0. Each axis has one more slot, a missing value's: position
    ``COALESCE(p, n)``; a missing child reads 0, missing parents the table of the parents
    present. The same cells, so the same doubles, for a third of the SQL (a pick per table
    and class repeated every position; spambase's 57 binned columns, benchmarks/README.md)."""
    padded = padded_cells(tables, parents)[k]
    *sizes, n_child = (n - 1 for n in padded.shape)
    index: exp.Expression | None = None
    for name, n in zip([*parents, child], [*sizes, n_child]):
        q = exp.Coalesce(this=positions[name].copy(), expressions=[exp.Literal.number(n)])
        index = q if index is None else exp.Add(
            this=exp.Mul(this=sql.paren(index), expression=exp.Literal.number(n + 1)), expression=q)
    lst = sql.packed_list([float(w) for w in padded.ravel()], "DOUBLE")
    return exp.Anonymous(this="list_extract", expressions=[lst, exp.Add(this=index, expression=exp.Literal.number(1))])


def tree_positions(tree: Tree, features: Sequence[Feature], stats, dialect: str | None,
                   input_types: Mapping[str, str] | None) -> dict[str, exp.Expression]:
    """Each tree feature's 0-based value position (:func:`_position`), keyed by name.

    ``features`` are the features as scored (their types from the input)."""
    by_name = {f.name: f for f in features}
    types = input_types or {}
    return {f.name: _position(by_name[f.name], feature_values(by_name[f.name], stats.features), dialect,
                              types.get(f.name))
            for f in tree.features}


def child_terms(tree: Tree, features: Sequence[Feature], stats, params: Mapping[str, Any],
                dialect: str | None, input_types: Mapping[str, str] | None,
                positions: Mapping[str, exp.Expression] | None = None) -> dict[str, list]:
    """Each child's per-class score terms (module docstring), keyed by child name.

    ``features`` are the features as scored (their types from the input); ``positions``
    (default :func:`tree_positions`) the expressions the terms read the value positions
    from, such as columns computed once per row for many models (the pooled
    cross-validation query, :func:`sqlnb.workflows.cv.pooled_summary_query`)."""
    by_name = {f.name: f for f in features}
    if positions is None:
        positions = tree_positions(tree, features, stats, dialect, input_types)
    out = {}
    for child, par in tree.parent.items():
        cpt = tree.cpt[child]
        n_child = cpt.shape[2]
        flat = exp.Add(this=exp.Mul(this=sql.paren(positions[par].copy()), expression=exp.Literal.number(n_child)),
                       expression=sql.paren(positions[child].copy()))
        naive = naive_row(by_name[child], params[child])
        if dialect == "duckdb":
            out[child] = [padded_read({(par,): cpt, (): naive}, (par,), positions, child, k) for k in range(len(cpt))]
            continue
        out[child] = [exp.Coalesce(this=_pick(flat.copy(), cpt[k].ravel(), dialect),
                                   expressions=[_pick(positions[child].copy(), naive[k], dialect), sql.dbl(0.0)])
                      for k in range(cpt.shape[0])]
    return out


# -- storage ------------------------------------------------------------------------------
def pair_table(pairs: Pairs, stats) -> Any:
    """The ``pairs`` part: non-zero cells ``(class_index, a, b, a_index, b_index, n)``, the
    indexes into each feature's values (its ``values_<j>`` table; 0/1 for Bernoulli)."""
    import pyarrow as pa
    cols: dict[str, list] = {c: [] for c in ("class_index", "a", "b", "a_index", "b_index", "n")}
    for (a, b), cell in pairs.cells.items():
        va, vb = _stored_values(a, stats), _stored_values(b, stats)
        counts = cell.over(va, vb)
        ks, us, vs = np.nonzero(counts)
        cols["class_index"] += ks.tolist()
        cols["a"] += [a] * len(ks)
        cols["b"] += [b] * len(ks)
        cols["a_index"] += us.tolist()
        cols["b_index"] += vs.tolist()
        cols["n"] += counts[ks, us, vs].tolist()
    types = {"class_index": pa.int32(), "a": pa.string(), "b": pa.string(), "a_index": pa.int32(),
             "b_index": pa.int32(), "n": pa.float64()}
    return pa.table({c: arrow.array(v, types[c]) for c, v in cols.items()})  # arrow.array: no pandas import


def _stored_values(name: str, stats) -> list:
    s = stats.features[name]
    return list(s.values) if isinstance(s, Counts) else BERNOULLI_VALUES


def pairs_from_table(names: Sequence[str], table: Any, feats: Mapping[str, Any], K: int) -> Pairs:
    """:class:`Pairs` of the tree features ``names`` from :func:`pair_table`'s rows."""
    cells = {}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            va = list(feats[a].values) if isinstance(feats[a], Counts) else BERNOULLI_VALUES
            vb = list(feats[b].values) if isinstance(feats[b], Counts) else BERNOULLI_VALUES
            cells[(a, b)] = PairCounts(va, vb, np.zeros((K, len(va), len(vb))))
    for r in (table.to_pylist() if table is not None else []):
        cells[(r["a"], r["b"])].counts[r["class_index"], r["a_index"], r["b_index"]] = r["n"]
    return Pairs(list(names), cells)
