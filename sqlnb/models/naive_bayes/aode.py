"""Averaged one-dependence estimators, AODE (Webb, Boughton & Wang 2005, "Not so naive
Bayes"): every discrete feature in turn is the parent of all the others, and the class
score averages these one-dependence models over the row's eligible super-parents.

Formula. For a row x with discrete (tree) features D and other features G::

    p(c, x) = (1/|S(x)|) Σ_{i∈S(x)} p(c, x_i) Π_{j∈D, j≠i} p(x_j | c, x_i) · Π_{g∈G} p(x_g | c)
    S(x)    = { i ∈ D : x_i present, and seen at least m times in training }

with ``m`` = ``aode_min_count`` (``--aode-min-count``; default :data:`MIN_COUNT`), the
count the weighted number of training rows with that value (any class). A NULL, NaN or
unseen value is never a super-parent and, as a child, contributes no factor. When S(x) is
empty, p(c, x) is the naive Bayes joint. Gaussian (and any other non-tree) features enter
every super-parent's product as their naive Bayes factor p(x_g | c), as TAN keeps them
naive, so they factor out of the average. The discrete features are TAN's tree features
(:func:`sqlnb.models.naive_bayes.tan.eligible`): categorical columns of at most
``INLINE_MAX`` values, Bernoulli columns, binned numeric columns by their bin numbers.

Parameters (the model's α under its estimator, as TAN's, from the same counts)::

    p(c, x_i)        = π_c · p(x_i | c)          the model's class prior and the feature's
                                                 own naive Bayes estimate (n(c, x_i) + α) / (n_c + α·n_i)
    p(x_j | c, x_i)  = (n(c, x_i, x_j) + α) / (n(c, x_i) + α·n_j)      categorical or binned j
                     = (n(c, x_i, 1) + β₁) / (n(c, x_i) + β₁ + β₀)     Bernoulli j

with n(c, x_i, x_j) the pair counts TAN gathers (rows where both are present), n(c, x_i)
= Σ_v n(c, x_i, v) and n_j the child's number of training values; a (class, parent value)
with no rows and no pseudo-count (0/0) takes the child's naive Bayes probabilities
(:func:`sqlnb.models.naive_bayes.tan._conditional`). Webb et al. smooth p(c, x_i) as
one joint frequency, (N(c, x_i) + 1) / (N + K·n_i); here it is π_c p(x_i | c), so every
class prior option (uniform, given, Dirichlet) applies to AODE as to naive Bayes.

Score. The class score is the naive Bayes score (prior and every feature's term, as
:meth:`NaiveBayes.class_terms` writes it) plus one term::

    ln p(c, x) = NB_c(x) + s_c + ln Σ_{i∈S} exp(T_{c,i} − s_c) − ln |S|        (0 when S is empty)
    T_{c,i}    = Σ_{j≠i} [ln p(x_j | c, x_i) − ln p(x_j | c)]                (present, seen x_j)

since each super-parent's log joint is NB_c(x) + T_{c,i}. The log-sum-exp is shifted,
but not by the row's maximum over super-parents: T_{c,i} is the log-ratio of two
likelihoods of the same row (super-parent i against naive Bayes), and the shift s_c is a
per-class constant from the tables, the midpoint of the smallest and largest T_{c,i} any
row can reach (0 when both lie within ±:data:`EXP_SAFE`). Every exponent then lies within
±700 (each T_{c,i} a sum of one table cell per child, bounded cell by cell), so no term
overflows and the largest one never underflows: the sum is exact to rounding, as a row-max
shift would give. A row-max shift would repeat every T_{c,i} inside every exponent, a
class score of F³ table reads for F features instead of F²; a model whose bounds span
more than 2·:data:`EXP_SAFE` is refused at fit (adult, MDL bins: T_{c,i} within
[−35, +55] nats, shift 0). A cell ln p(x_j | c, x_i) = −inf (MLE, an unseen pair) gives exp(−inf) = 0;
where ln p(x_j | c) is −inf the naive term already makes the class score −inf, and the
ratio is kept at 0. Every T_{c,i} reads each table by position, one list read in DuckDB
(as TAN's terms), a CASE elsewhere. In DuckDB's scoring SELECT (:func:`padded_terms`) the
prelude holds each class's tables as one list, written once, and each feature's slot in
it, never NULL (:func:`prelude`): a read is ``list_extract(table_c, row_i + slot_j)``, no
COALESCE, balanced sums; its F(F−1) reads per class still cost about 4× TAN's scoring
CPU at 8 columns (benchmarks/README.md). Past :data:`READ_MAX` features a class's sum over
the super-parents is one expression of fixed size instead (a lambda over the super-parents
with one over the slots inside), so that the SELECT grows as F; the tables, F² cells, are
bound parameters where DuckDB scores in place (:func:`sqlnb.sql.bound_list`), so the text
it is given grows as F too, and literals in an export.

Statistics. Only the counts TAN gathers (class, per-feature and pair counts), so
``update`` merges them exactly (an updated model is the refit), cross-validation counts
every fold's pairs in the same scan, and selection restricts them; ``m`` and α change
without the data (:meth:`NaiveBayes.with_params`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import tan
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.stats import Counts

#: Default frequency limit m: a value seen at least once may be a super-parent (Weka's
#: AODE default; Webb et al. 2005 used 30). adult's figures for both: docs/generative.md.
MIN_COUNT = 1.0
#: Largest |exponent| the shifted log-sum-exp lets a term reach (e^700 ≈ 1e304 < the
#: largest double; e^−700 is still a normal double).
EXP_SAFE = 700.0


@dataclass
class Aode:
    """The derived averaged one-dependence model.

    ``ratio[(i, j)]`` has shape (K, n_i, n_j): ln p(x_j | c, x_i) − ln p(x_j | c), super-parent
    i's values by child j's; ``parent_ok[i]`` (n_i,) is 1 where the value may be a
    super-parent (seen at least m times), else 0; ``shift`` (K,) the per-class s_c.
    """

    features: list  # the discrete features (Feature), model order
    ratio: dict
    parent_ok: dict
    shift: np.ndarray
    log_shifted: bool  # some cell is −inf: the sum can be 0 (ln 0 written as −inf)
    #: :func:`prelude`'s constant lists, built once (each cell's text: ~15 ms a class at 30 columns)
    lists: list = field(default_factory=list, init=False, repr=False, compare=False)
    naive_lists: list = field(default_factory=list, init=False, repr=False, compare=False)


def value_counts(f: Feature, stats) -> np.ndarray:
    """Weighted training rows of each of the feature's values (any class), in the order of
    :func:`tan.feature_values`."""
    s = stats.features[f.name]
    if isinstance(s, Counts):
        return np.asarray(s.counts, dtype=float).sum(axis=0)
    present = float(np.sum(s.total))  # Bernoulli: rows present per class, of s.n rows
    return np.array([float(np.sum(s.n)) - present, present])


def derive(features: Sequence[Feature], stats, hp, params: Mapping[str, Any]) -> Aode:
    """The ratio tables, super-parent eligibility and shifts (module docstring)."""
    feats, values = tan.paired_features(features, stats, hp, "aode")
    ratio, parent_ok = {}, {}
    K = len(stats.classes)
    hi, lo = np.zeros((K, len(feats))), np.zeros((K, len(feats)))
    neg_inf = False
    for a, fi in enumerate(feats):
        parent_ok[fi.name] = (value_counts(fi, stats) >= hp.aode_min_count).astype(float)
        for fj in feats:
            if fj is fi:
                continue
            counts = stats.pairs.table(fi.name, fj.name, values[fi.name], values[fj.name])
            cond = tan._conditional(fj, counts, hp, params[fj.name])
            naive = tan.naive_row(fj, params[fj.name])[:, None, :]
            with np.errstate(invalid="ignore"):
                r = np.where(np.isneginf(naive), 0.0, cond - naive)
            ratio[(fi.name, fj.name)] = r
            finite = np.where(np.isfinite(r), r, np.nan)
            neg_inf |= bool(np.isneginf(r).any())
            # A child is absent (0) or one cell: bound T_{c,i} child by child.
            if r.size:
                hi[:, a] += np.maximum(0.0, np.nan_to_num(np.nanmax(finite, axis=(1, 2)), nan=0.0))
                lo[:, a] += np.minimum(0.0, np.nan_to_num(np.nanmin(finite, axis=(1, 2)), nan=0.0))
    top, bottom = hi.max(axis=1, initial=0.0), lo.min(axis=1, initial=0.0)
    if np.any(top - bottom > 2 * EXP_SAFE):
        raise SqlnbError(
            f"structure 'aode': a super-parent's log-likelihood ratio against naive Bayes can span "
            f"{float(np.max(top - bottom)):.0f} nats, past the {2 * EXP_SAFE:.0f} its log-sum-exp holds exactly; "
            "smooth more (a larger --alpha) or choose fewer columns (--features / --exclude)")
    inside = (top <= EXP_SAFE) & (bottom >= -EXP_SAFE)
    shift = np.where(inside, 0.0, (top + bottom) / 2)
    return Aode(feats, ratio, parent_ok, shift, neg_inf)


def positions(model: Aode, features: Sequence[Feature], stats, dialect: str | None,
              input_types: Mapping[str, str] | None) -> dict[str, exp.Expression]:
    """Each discrete feature's 0-based value position (NULL when missing or unseen), as
    TAN's (:func:`tan._position`); ``features`` as scored."""
    by_name = {f.name: f for f in features}
    types = input_types or {}
    return {f.name: tan._position(by_name[f.name], tan.feature_values(by_name[f.name], stats.features), dialect,
                                  types.get(f.name))
            for f in model.features}


#: DuckDB's scoring prelude columns (:func:`prelude`): per discrete feature its slot and
#: its row, per class the ratio table of every super-parent (one list); the eligibility of
#: every slot (one list); past :data:`READ_MAX` features, every feature's slot (one list),
#: then, over it, every super-parent's row and eligibility (one list each) and |S|, and per
#: class the naive Bayes rows of the features read at their slots (one list).
SLOT_PREFIX = "sqlnb_aode_slot"
ROW_PREFIX = "sqlnb_aode_row"
TABLE_PREFIX = "sqlnb_aode_table"
OK_COLUMN = "sqlnb_aode_ok"
SLOTS_COLUMN = "sqlnb_aode_slots"
ROWS_COLUMN = "sqlnb_aode_rows"
OKS_COLUMN = "sqlnb_aode_oks"
SIZE_COLUMN = "sqlnb_aode_size"
NAIVE_PREFIX = "sqlnb_aode_naive"
#: Up to this many discrete features, DuckDB's T_{c,i} is a sum of F − 1 reads
#: ``list_extract(table_c, row_i + slot_j)``; past it, class c's whole sum over the
#: super-parents is one expression of fixed size, a lambda over the rows of the
#: super-parents with one over the slots inside (:func:`padded_terms`), so that the SELECT
#: grows as F, not F². The reads run faster (2 classes, 8 features, 1M rows: 1.0 s against
#: 4.5 s; 12 features, 200,000 rows: 0.9 against 2.2 s), but DuckDB plans their K·F(F−1)
#: terms in time growing faster than their number (one row: 0.07 s at 8 features, 0.18 s
#: at 12, 0.7 s at 20, 2.8 s at 30, against 0.04–0.1 s as lists; the reads alone in raw SQL,
#: 4 values a feature, duckdb 2.0, load ~10).
READ_MAX = 10


def layout(model: Aode) -> tuple[dict[str, int], int]:
    """Each discrete feature's first slot G_i (0-based) and the number of slots W: feature
    i's values take slots G_i … G_i + n_i − 1, a missing or unseen value slot G_i + n_i."""
    start, width = {}, 0
    for f in model.features:
        start[f.name] = width
        width += model.parent_ok[f.name].size + 1
    return start, width


def ratio_list(model: Aode, k: int) -> np.ndarray:
    """Class ``k``'s tables as one row-major (W + 1) × W matrix, flattened. Row 1 + G_i + v
    is super-parent i at value v, column G_j + u child j at value u: the cell is
    ``ratio[(i, j)][k][v, u]`` for j ≠ i; 0 in the (i, i) blocks (a row's sum over every
    slot is then T_{c,i}), in row 0 and in the missing slots' rows (a missing super-parent,
    whose weight ok_i is 0) and columns (a missing child adds nothing). The 1-based index
    of the cell of (slot_i, slot_j) is then ``slot_i · W + slot_j``."""
    start, width = layout(model)
    out = np.zeros((width + 1, width))
    for (i, j), r in model.ratio.items():
        out[1 + start[i]:1 + start[i] + r.shape[1], start[j]:start[j] + r.shape[2]] = r[k]
    return out.ravel()


def ok_list(model: Aode) -> np.ndarray:
    """Every slot's eligibility as a super-parent, W cells: ``parent_ok[i][v]`` at G_i + v,
    0 in the missing slots (1-based index ``slot_i``)."""
    start, width = layout(model)
    out = np.zeros(width)
    for i, ok in model.parent_ok.items():
        out[start[i]:start[i] + ok.size] = ok
    return out


def prelude(model: Aode, features: Sequence[Feature], stats, dialect: str | None,
            input_types: Mapping[str, str] | None) -> list[tuple[str, exp.Expression]]:
    """DuckDB's prelude columns for :func:`padded_terms`: per discrete feature i its slot
    ``G_i + q_i + 1`` (1-based, never NULL: ``q_i`` is its :func:`positions`, n_i when
    missing or unseen) and its row ``slot_i · W``; then per class the constant list
    :func:`ratio_list`, and the constant list :func:`ok_list`.

    Past :data:`READ_MAX` features, one list of every slot instead, each position written
    once, and over it (:func:`sqlnb.models.finish.scoring_select` puts a column that
    reads another in a SELECT around it) the list of the rows ``list_transform(slots,
    s -> s · W)``, of the eligibilities ``list_select(ok, slots)`` and their sum |S|.

    The tables are written once, as :func:`sqlnb.sql.bound_list`: DuckDB's scoring passes
    them as parameters, an export holds them as literals. Each read is
    ``list_extract(table_c, row_i + slot_j)`` (on 6a739ab each of the K·F(F−1) reads held a
    literal of its own (i, j) table, which DuckDB bound and folded one by one: at
    spambase's 57 binned columns a 2.4 MB SELECT that took ~4.5 s of CPU to plan,
    benchmarks/README.md)."""
    start, width = layout(model)
    out = []
    for a, (name, e) in enumerate(positions(model, features, stats, dialect, input_types).items()):
        q = exp.Cast(this=exp.Coalesce(this=e, expressions=[exp.Literal.number(model.parent_ok[name].size)]),
                     to=exp.DataType.build("BIGINT"))
        slot = exp.Add(this=q, expression=exp.Literal.number(start[name] + 1))
        row = exp.Mul(this=sql.paren(slot.copy()), expression=exp.Literal.number(width))
        out += [(f"{SLOT_PREFIX}{a}", slot), (f"{ROW_PREFIX}{a}", row)]
    K = len(model.shift)
    if len(model.features) > READ_MAX:
        s = sql.ident("sqlnb_slot")
        rows = exp.Lambda(this=exp.Mul(this=exp.Column(this=s), expression=exp.Literal.number(width)),
                          expressions=[s.copy()])
        out = [(SLOTS_COLUMN, exp.Array(expressions=[e for _, e in out[::2]])),
               (ROWS_COLUMN, exp.Anonymous(this="list_transform", expressions=[sql.col(SLOTS_COLUMN), rows])),
               (OKS_COLUMN, exp.Anonymous(this="list_select", expressions=[sql.col(OK_COLUMN), sql.col(SLOTS_COLUMN)])),
               (SIZE_COLUMN, exp.Anonymous(this="list_sum", expressions=[sql.col(OKS_COLUMN)]))]
    if not model.lists:
        model.lists[:] = [(f"{TABLE_PREFIX}{k}", sql.bound_list(ratio_list(model, k))) for k in range(K)]
        model.lists.append((OK_COLUMN, sql.bound_list(ok_list(model))))
    return out + [(name, e.copy()) for name, e in model.lists]


def naive_rows(model: Aode, params: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The categorical and binned features whose naive term DuckDB reads at their slot (no
    second ENUM cast or bin count), with their (K, n) log-probabilities; not with
    unseen="bucket" (refused for AODE at fit), whose unseen values have a term."""
    return {f.name: np.asarray(params[f.name][1], dtype=float) for f in model.features
            if f.kind in ("categorical", "binned") and f.bag is None and params[f.name][2] is None}


def naive_prelude(model: Aode, params: Mapping[str, Any]) -> list[tuple[str, exp.Expression]]:
    """Past :data:`READ_MAX` features, the prelude's per-class lists :func:`naive_list` of
    :func:`naive_rows` (read by :func:`naive_read`'s sums); none up to it."""
    naive = naive_rows(model, params)
    if len(model.features) <= READ_MAX or not naive:
        return []
    if not model.naive_lists:
        model.naive_lists[:] = [(f"{NAIVE_PREFIX}{k}", sql.bound_list(naive_list(model, naive, k)))
                                for k in range(len(model.shift))]
    return [(name, e.copy()) for name, e in model.naive_lists]


def naive_list(model: Aode, naive: Mapping[str, np.ndarray], k: int) -> np.ndarray:
    """Class ``k``'s naive Bayes log-probabilities of the features in ``naive`` laid out
    by slot, W cells: ln p(v | c) of feature i at G_i + v, 0 in its missing slot and for
    every feature not in ``naive`` (1-based index ``slot_i``, as :func:`ok_list`)."""
    start, width = layout(model)
    out = np.zeros(width)
    for name, row in naive.items():
        row = np.asarray(row, dtype=float)[k]
        out[start[name]:start[name] + row.size] = row
    return out


def slot(model: Aode, a: int) -> exp.Expression:
    """The a-th discrete feature's slot as :func:`prelude` holds it: its column, or past
    :data:`READ_MAX` features its element of the list of slots."""
    if len(model.features) > READ_MAX:
        return exp.Anonymous(this="list_extract", expressions=[sql.col(SLOTS_COLUMN), exp.Literal.number(a + 1)])
    return sql.col(f"{SLOT_PREFIX}{a}")


def slot_positions(model: Aode) -> dict[str, exp.Expression]:
    """Each discrete feature's 0-based value position (its missing slot n_i when missing or
    unseen) read from :func:`prelude`'s slots: ``slot_i − G_i − 1``."""
    start, _ = layout(model)
    return {f.name: sql.paren(exp.Sub(this=slot(model, a), expression=exp.Literal.number(start[f.name] + 1)))
            for a, f in enumerate(model.features)}


def _read(table: str, row: str, slot: str) -> exp.Expression:
    """``list_extract(table, row + slot)`` of the prelude's columns, unqualified: the scoring
    SELECT reads them from its prelude ``src``, and the lookup tables it joins have no
    ``sqlnb_aode_*`` column (a source column of such a name is refused as a clash)."""
    return exp.Anonymous(this="list_extract", expressions=[
        sql.col(table), exp.Add(this=sql.col(row), expression=sql.col(slot))])


def pairwise_sum(items: Sequence[exp.Expression]) -> exp.Expression:
    """``items`` summed as a balanced tree, ``(a + b) + (c + d)``: depth log2 n, not n.
    DuckDB's common-subexpression pass hashes every subtree of a SELECT's expressions, so
    its time grows with size × depth: at 57 columns a chain of the F(F−1) reads per class
    took it most of the scoring time (benchmarks/README.md). The sum differs from the
    left-to-right one in rounding only (pairwise summation, its error no larger)."""
    if len(items) == 1:
        return items[0]
    half = len(items) // 2
    return sql.paren(exp.Add(this=pairwise_sum(items[:half]), expression=pairwise_sum(items[half:])))


def padded_terms(model: Aode) -> list[exp.Expression]:
    """:func:`terms` in DuckDB, read from the columns of :func:`prelude`.

    The same sums of the same cells as :func:`terms` (added as balanced trees,
    :func:`pairwise_sum`, so the last bits can differ): a missing child reads a 0 its
    table holds instead of a NULL made 0 by a COALESCE, and the eligibility ok_i of a
    super-parent is the table's cell at (slot_i, slot_i), 0 when missing. Profiled at 1M
    rows × 8 categorical columns × 3 classes (benchmarks/README.md), each of the F(F−1)
    reads per class costs a few DuckDB vector operations, so every one saved per read
    counts: no COALESCE; the row ``slot_i · W`` computed once per row; the indicator and |S| once
    per row (common subexpressions shared by the classes); and, when the shift is 0 and
    no cell is −inf, no CASE either (expressions under a CASE are evaluated under a
    selection and are not shared between classes)::

        LN(Σ_i ok_i · EXP(T_{c,i}) + z) − LN(|S| + z),   z = 1 when |S| = 0 else 0

    which is LN(Σ) − LN(|S|) exactly when |S| > 0 (adding 0.0 changes no double) and
    LN(1) − LN(1) = 0 when |S| = 0 (every ok_i is 0, so Σ is 0).

    Past :data:`READ_MAX` features class c's sum over the super-parents is one expression
    of fixed size over the prelude's lists of rows, slots and eligibilities::

        list_dot_product(oks, list_transform(rows, r -> EXP(list_sum(list_select(table_c,
                         list_transform(slots, s -> r + s))) − s_c)))

    (the (i, i) blocks hold 0s; |S| is the prelude's ``list_sum(oks)``), so that the
    SELECT holds no term per super-parent, let alone per pair: the same cells, T_{c,i}
    summed left to right and the products ok_i · EXP(…) as DuckDB's dot product sums them
    (the last bits can differ from the balanced sums). One row of breast cancer's 30 binned columns: the
    per-class form took DuckDB half the CPU of a ``list_sum`` per super-parent, and 100,000
    rows the same time (benchmarks/README.md)."""
    index = {f.name: a for a, f in enumerate(model.features)}
    names = list(index)
    if len(names) > READ_MAX:
        return _listed_terms(model)

    def pair(i: str, j: str, k: int) -> exp.Expression:
        return _read(f"{TABLE_PREFIX}{k}", f"{ROW_PREFIX}{index[i]}", f"{SLOT_PREFIX}{index[j]}")

    ok = {i: exp.Anonymous(this="list_extract", expressions=[sql.col(OK_COLUMN), slot(model, index[i])])
          for i in index}
    size = sql.paren(pairwise_sum([ok[i].copy() for i in index]))
    empty = exp.Cast(this=exp.EQ(this=size.copy(), expression=sql.dbl(0.0)), to=exp.DataType.build("DOUBLE"))

    def part(i: str, reads: list, s: float) -> exp.Expression:
        t = pairwise_sum(reads) if s == 0.0 else exp.Sub(this=pairwise_sum(reads), expression=sql.dbl(s))
        return exp.Mul(this=ok[i].copy(), expression=exp.Exp(this=t))

    def plain(total: exp.Expression) -> exp.Expression:
        return exp.Sub(this=exp.Ln(this=sql.paren(exp.Add(this=total, expression=empty.copy()))),
                       expression=exp.Ln(this=sql.paren(exp.Add(this=size.copy(), expression=empty.copy()))))

    return _averaged(model, lambda i, k: [pair(i, j, k) for j in names if j != i], part, pairwise_sum, size, plain)


def _listed_terms(model: Aode) -> list[exp.Expression]:
    """:func:`padded_terms` past :data:`READ_MAX` features: per class one dot product of the
    eligibilities with the EXP of every super-parent's T_{c,i} − s_c (its docstring)."""
    size = sql.col(SIZE_COLUMN)
    empty = exp.Cast(this=exp.EQ(this=size.copy(), expression=sql.dbl(0.0)), to=exp.DataType.build("DOUBLE"))
    r, s = sql.ident("sqlnb_row"), sql.ident("sqlnb_slot")
    cells = exp.Anonymous(this="list_transform", expressions=[
        sql.col(SLOTS_COLUMN), exp.Lambda(this=exp.Add(this=exp.Column(this=r.copy()), expression=exp.Column(this=s)),
                                          expressions=[s.copy()])])

    def total(k: int, shift: float) -> exp.Expression:
        t = exp.Anonymous(this="list_sum", expressions=[
            exp.Anonymous(this="list_select", expressions=[sql.col(f"{TABLE_PREFIX}{k}"), cells.copy()])])
        e = exp.Exp(this=t if shift == 0.0 else exp.Sub(this=t, expression=sql.dbl(shift)))
        each = exp.Anonymous(this="list_transform", expressions=[sql.col(ROWS_COLUMN),
                                                                  exp.Lambda(this=e, expressions=[r.copy()])])
        return exp.Anonymous(this="list_dot_product", expressions=[sql.col(OKS_COLUMN), each])

    out = []
    for k, shift in enumerate(float(v) for v in model.shift):
        if shift == 0.0 and not model.log_shifted:
            out.append(exp.Sub(this=exp.Ln(this=sql.paren(exp.Add(this=total(k, shift), expression=empty.copy()))),
                               expression=exp.Ln(this=sql.paren(exp.Add(this=size.copy(), expression=empty.copy())))))
        else:
            out.append(_logged(model, shift, sql.paren(total(k, shift)), sql.paren(size.copy())))
    return out


def naive_read(model: Aode, params: Mapping[str, Any], K: int) -> tuple[dict[str, list], set, list]:
    """``(per feature its terms per class, the features summed instead, per class their
    sum)`` of :func:`naive_rows` in DuckDB: up to :data:`READ_MAX` features each read at
    its slot (:func:`padded_naive`); past it, one sum per class ``list_sum(list_select(
    naive_c, slots))`` over :func:`naive_prelude`'s lists, the same cells added left to
    right."""
    naive = naive_rows(model, params)
    if len(model.features) <= READ_MAX:
        return {name: padded_naive(model, name, row) for name, row in naive.items()}, set(), []
    sums = [exp.Anonymous(this="list_sum", expressions=[exp.Anonymous(this="list_select", expressions=[
        sql.col(f"{NAIVE_PREFIX}{k}"), sql.col(SLOTS_COLUMN)])]) for k in range(K)] if naive else []
    return {}, set(naive), sums


def _averaged(model: Aode, reads, part, total_of, size: exp.Expression, plain=None) -> list[exp.Expression]:
    """The skeleton both forms of AODE's term share (:func:`terms`, :func:`padded_terms`):
    per class k, ``CASE WHEN |S| > 0 THEN s_c + LN(Σ_i part_i) − LN(|S|) ELSE 0 END`` with
    ``part_i = part(i, reads(i, k), s_c)`` (the terms of T_{c,i}) summed by ``total_of``
    and ``size`` the parenthesised |S|; ``plain(total)`` (DuckDB) the whole term instead
    when s_c is 0 and no cell is −inf."""
    names = [f.name for f in model.features]
    out = []
    for k in range(len(model.shift)):
        s = float(model.shift[k])
        parts = [part(i, reads(i, k), s) for i in names]
        total = sql.paren(total_of(parts))
        if plain is not None and s == 0.0 and not model.log_shifted:
            out.append(plain(total))
            continue
        out.append(_logged(model, s, total, size))
    return out


def _logged(model: Aode, s: float, total: exp.Expression, size: exp.Expression) -> exp.Expression:
    """``CASE WHEN |S| > 0 THEN s_c + LN(total) − LN(|S|) ELSE 0 END`` (``total`` and
    ``size`` parenthesised), ``LN(total)`` −inf where ``total`` is 0 and a cell is −inf."""
    log_total = exp.Ln(this=total)
    if model.log_shifted:  # every super-parent's product 0: ln 0 = −inf (an error in DuckDB and PostgreSQL)
        log_total = exp.Case(ifs=[exp.If(this=exp.GT(this=total.copy(), expression=sql.dbl(0.0)),
                                         true=log_total)], default=sql.dbl(-math.inf))
    value = exp.Sub(this=sql.add([sql.dbl(s), log_total] if s != 0.0 else [log_total]),
                    expression=exp.Ln(this=size.copy()))
    return exp.Case(ifs=[exp.If(this=exp.GT(this=size.copy(), expression=sql.dbl(0.0)), true=value)],
                    default=sql.dbl(0.0))


def padded_naive(model: Aode, name: str, log_prob: Any) -> list[exp.Expression]:
    """Per class, a categorical or binned feature's naive Bayes term ln p(x_j | c) read at
    its :func:`prelude` slot (a missing or unseen value reads the 0 after its values): the
    doubles its own term reads by its ENUM code or bin, without casting or counting again."""
    start, _ = layout(model)
    at = slot(model, [f.name for f in model.features].index(name))
    index = at if start[name] == 0 else exp.Sub(this=at, expression=exp.Literal.number(start[name]))
    return [exp.Anonymous(this="list_extract", expressions=[sql.bound_list(np.append(row, 0.0)), index.copy()])
            for row in np.asarray(log_prob, dtype=float)]


def terms(model: Aode, features: Sequence[Feature], stats, dialect: str | None,
          input_types: Mapping[str, str] | None,
          at: Mapping[str, exp.Expression] | None = None) -> list[exp.Expression]:
    """Per class, the term AODE adds to the naive Bayes class score (module docstring):
    ``CASE WHEN |S| > 0 THEN s_c + LN(Σ_i ok_i · EXP(T_{c,i} − s_c)) − LN(|S|) ELSE 0 END``.
    ``at``: the expressions the value positions are read from (default :func:`positions`)."""
    if at is None:
        at = positions(model, features, stats, dialect, input_types)
    names = [f.name for f in model.features]

    def pos(name: str) -> exp.Expression:
        return sql.paren(at[name].copy())

    ok = {i: tan._pick(pos(i), model.parent_ok[i], dialect) for i in names}
    size = sql.paren(sql.add([exp.Coalesce(this=ok[i].copy(), expressions=[sql.dbl(0.0)]) for i in names]))

    def pair(i: str, j: str, k: int) -> exp.Expression:
        r = model.ratio[(i, j)]
        flat = exp.Add(this=exp.Mul(this=pos(i), expression=exp.Literal.number(r.shape[2])), expression=pos(j))
        return exp.Coalesce(this=tan._pick(flat, r[k].ravel(), dialect), expressions=[sql.dbl(0.0)])

    def part(i: str, reads: list, s: float) -> exp.Expression:
        t = sql.add(reads) if s == 0.0 else exp.Sub(this=sql.paren(sql.add(reads)), expression=sql.dbl(s))
        return exp.Coalesce(this=exp.Mul(this=ok[i].copy(), expression=exp.Exp(this=t)), expressions=[sql.dbl(0.0)])

    return _averaged(model, lambda i, k: [pair(i, j, k) for j in names if j != i], part, sql.add, size)


def describe(model: Aode, stats, min_count: float) -> dict:
    """What ``show --params`` and ``report`` print: the super-parents, how many of their
    values are eligible at this m, and the per-class shift."""
    return {"structure": "aode", "min_count": min_count,
            "super_parents": {f.name: {"values": int(len(model.parent_ok[f.name])),
                                       "eligible": int(model.parent_ok[f.name].sum())} for f in model.features},
            "shift": [float(s) for s in model.shift]}
