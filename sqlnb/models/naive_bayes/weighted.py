"""Naive Bayes with discriminatively learnt weights (WANBIA-C, Zaidi, Cerquides, Carman
and Webb, JMLR 14, 2013, in its fine form: one weight per attribute value and class).

The class score is naive Bayes's, each log-probability times a weight::

    s_k(x) = a_k · ln π_k + Σ_j w_{j,k,x_j} · ln θ_{j,k,x_j}        a missing x_j adds no term

``ln π`` and ``ln θ`` are naive Bayes's, derived from the counts under the hyperparameters
(α, the estimator, the class prior) as for :class:`~sqlnb.models.naive_bayes.model.NaiveBayes`;
the weights minimise the mean conditional log loss over the training rows plus an L2
penalty that pulls every weight towards 1::

    L(a, w) = (1/N) Σ_i n_i [ln Σ_k e^{s_k(x_i)} − s_{y_i}(x_i)]
              + (λ/2) [Σ_k (a_k − 1)² + Σ_{j,k,v} (w_{j,k,v} − 1)²]

(``n_i`` the row's weight, ``N = Σ n_i``). As λ → ∞ the model is naive Bayes exactly; as
λ → 0 it is the unpenalised conditional fit, which is multinomial logistic regression on
the one-hot indicators of (value, class) in coordinates scaled by ``ln θ`` — the scaling
Zaidi et al. show makes the optimiser converge in far fewer iterations than logistic
regression's own. The objective is strictly convex for λ > 0, so the optimum is unique and
an independent solver reaches the same probabilities (tests/test_weighted.py).

**Features** are discrete: categorical columns, and numeric columns binned (MDL cut points
unless ``bins`` says otherwise), the setting of the papers. A value never seen in training,
or NULL, adds no term, at fit and at score, as in naive Bayes.

**Fitting reads the data where it lives.** One aggregate scan groups the labelled rows by
(label, each feature's value position) and returns the distinct patterns with their counts
(:func:`read_patterns`); the optimiser (Newton's method, :func:`sqlnb.models.newton.newton`,
on :class:`~sqlnb.models.naive_bayes.weighted_objective.Objective`: a first step on the
Hessian of a sample of the patterns, then exact Hessians reused while the steps are small)
runs on those patterns in numpy. Many rows share a pattern (10M rows of 8 columns of a few
values each are at most a few thousand patterns); at worst every row is a pattern and the
fit costs what fitting on the rows in numpy costs, and with λ given DuckDB then returns the
rows themselves, ungrouped, once their first rows show they hardly repeat (:func:`_repeat`).

**λ** is chosen, unless given, by stratified 5-fold cross-validation on the training rows
(fewer folds when a class has fewer than 5 rows; with a class of one row, the strongest λ of
the grid, said in a note)
(the rows dealt to folds as :mod:`sqlnb.workflows.folds` deals them, from the patterns
themselves, :meth:`Patterns.dealt`: no other scan): each fold's
naive Bayes log-probabilities come from its training folds' counts, weights are fitted
along the grid :data:`L2_GRID` from the strongest penalty down (each fit starting from the
previous one's weights, on the fold's terms made once, and stopped at :data:`RANKING_TOL`)
and the λ with the lowest mean held-out log loss wins (the stronger on a tie). The cut
points of binned columns are those of all training rows.

**Scoring** folds the weights into the log-probability tables (``w ⊙ ln θ``, ``a ⊙ ln π``)
when they are derived, so the scoring SELECT, the exported SQL in every dialect and the
dbt package are naive Bayes's own, with other numbers.

**Updating** merges the counts exactly (:meth:`WeightedNaiveBayes.merge`); the weights were
learnt on the rows of the fit and are kept (a value first seen in the update gets weight 1),
which the command says on stderr: refit to learn them on all rows.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines.duckdb import DuckDBEngine
from sqlnb.errors import ScreeningWarning, SqlnbError, UpdateWarning, shell_word, warn
from sqlnb.models.newton import newton
from sqlnb.models.naive_bayes.families import REGISTRY, Feature
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.models.naive_bayes.tan import _fit_position
from sqlnb.models.naive_bayes.weighted_objective import Objective
from sqlnb.stats import Counts
from sqlnb.store import register_kind

#: The L2 strengths cross-validation tries, strongest first (the fit warm-starts down the path).
L2_GRID = (1e-1, 1e-2, 1e-3, 1e-4, 1e-5)
#: Folds of the cross-validation that chooses λ.
CV_FOLDS = 5
#: The feature kinds whose log-probabilities are weighted (a table per class and value).
DISCRETE = ("categorical", "binned")


class UpdateKeepsWeights(UpdateWarning):
    """An update merged the counts but kept the weights learnt on the fit's rows (the
    command line prints it on stderr)."""


def check_features(features: Sequence[Feature], structure: str) -> None:
    """Refuse, at fit, what the weighted model cannot hold: a structure other than naive
    Bayes, or a feature that is not discrete (a Gaussian, Bernoulli, count or text column)."""
    if structure != "naive":
        raise SqlnbError(f"model 'weighted' weights naive Bayes's terms; structure {structure!r} is not supported "
                         "with it: leave structure at 'naive'")
    for f in features:
        if f.kind not in DISCRETE or f.bag is not None:
            raise SqlnbError(f"model 'weighted' needs discrete features, and column {f.name!r} is modelled as "
                             f"{f.kind}: bin numeric columns (bins='mdl', --bins mdl, the default for this model) or "
                             f"leave the column out (exclude=[{f.name!r}], --exclude {shell_word(f.name)})")


def boolean_categories(columns: Mapping[str, str], label: str, weight: str | None, features: Sequence[str] | None,
                       exclude: Sequence[str] | None, feature_kinds: Mapping[str, str] | None) -> dict[str, str]:
    """``feature_kinds`` with every BOOLEAN feature column that has no kind of its own made
    categorical: under ``kind="auto"`` a boolean would be Bernoulli, which the weights do not
    take; as a category of its two values it has the same counts and a weight per value
    (what :func:`sqlnb.fit` and :mod:`sqlnb.workflows.fold_weights` give the planner)."""
    candidates = features if features is not None else [c for c in columns if c not in (exclude or ())]
    return {**{c: "categorical" for c in candidates if c not in (label, weight)
               and columns.get(c, "").upper() == "BOOLEAN"}, **(feature_kinds or {})}


# -- the data: distinct (fold, label, value positions) patterns and their counts ---------------------

@dataclasses.dataclass
class Patterns:
    """The labelled rows as distinct patterns: ``y[p]`` the class index, ``codes[p, j]``
    feature ``j``'s value position (``V_j`` when missing), ``n[p]`` the rows' weight and
    ``fold[p]`` the fold (0 without folds)."""

    y: np.ndarray
    codes: np.ndarray
    n: np.ndarray
    fold: np.ndarray
    rows: np.ndarray | None = None

    def where(self, mask: np.ndarray) -> "Patterns":
        """The patterns where ``mask`` holds."""
        return Patterns(self.y[mask], self.codes[mask], self.n[mask], self.fold[mask],
                        None if self.rows is None else self.rows[mask])

    def _canonical(self, rows: np.ndarray) -> np.ndarray:
        """The patterns sorted by label, values (the last feature's first) and rows and
        weight: an order that depends on the patterns alone. The values are one mixed-radix
        integer when they fit in 62 bits (a sort of 11 keys took 2.5 s at 1M patterns, of
        4 keys 0.6 s)."""
        radix = self.codes.max(axis=0, initial=0) + 1
        if self.codes.shape[1] and np.prod(radix, dtype=float) < 2.0 ** 62:
            values = [self.codes @ np.cumprod(np.concatenate([[1], radix[:-1]])).astype(np.int64)]
        else:
            values = list(self.codes.T)
        return np.lexsort((self.n, rows, *values, self.y))

    def dealt(self, folds: int, seed: int = 0) -> "Patterns":
        """The rows dealt to ``folds`` stratified folds, as :mod:`sqlnb.workflows.folds` and
        scikit-learn's ``StratifiedKFold`` deal them: in label order, shuffled within each
        label, the i-th row of a label to fold ``i mod folds``. The rows of one pattern are
        identical (their weight included: :func:`read_patterns` groups by it), so only how
        many of them each fold gets matters: the pattern's rows take consecutive places,
        its patterns in an order drawn from ``seed`` (a permutation of their own order,
        :meth:`_canonical`, so the deal does not depend on the order the engine returned
        them in), and each fold's share of a run of places is counted, not drawn. Returns
        one entry per (pattern, fold) with rows."""
        rows = self.rows if self.rows is not None else self.n
        # the patterns in an order of their own (the engine returns groups in any order: at
        # 1M patterns DuckDB's differed from one scan to the next), then drawn from seed
        key = np.empty(len(self.y), dtype=np.int64)
        key[self._canonical(rows)] = np.random.default_rng(seed).permutation(len(self.y))
        order = np.lexsort((key, self.y))
        counts = rows[order].astype(np.int64)
        ends = np.cumsum(counts)
        starts = ends - counts
        first = np.searchsorted(self.y[order], self.y[order], side="left")  # each label's first pattern
        starts = starts - starts[first]  # places within the label
        per_row = np.where(counts > 0, self.n[order] / np.maximum(counts, 1), 0.0)
        pieces = []
        for f in range(folds):  # places p in [s, s + m) with p mod folds == f
            taken = (starts + counts - 1 - f) // folds - (starts - 1 - f) // folds
            keep = taken > 0
            idx = order[keep]
            pieces.append(Patterns(self.y[idx], self.codes[idx], taken[keep] * per_row[keep],
                                   np.full(int(keep.sum()), f, dtype=np.int64), taken[keep].astype(float)))
        return Patterns(*(np.concatenate([getattr(p, name) for p in pieces])
                          for name in ("y", "codes", "n", "fold", "rows")))


#: Labelled rows from which :func:`read_patterns` may return the rows themselves, ungrouped,
#: when they hardly repeat (below it the grouping costs little).
UNGROUPED_FROM = 1_000_000
#: Rows by which :func:`read_patterns` estimates how often the rows repeat (:func:`_repeat`).
SAMPLE_ROWS = 200_000
#: The estimated pairs of equal rows, as a share of the rows, below which they are read ungrouped.
REPEATS = 0.05


def _repeat(engine, select: exp.Select, keys: Sequence[exp.Expression], rows: int) -> bool:
    """Whether ``select``'s rows (``rows`` of them) repeat their patterns often enough to
    group them in the engine. The first :data:`SAMPLE_ROWS` rows the engine returns, ``u``
    of them equal to an earlier one, estimate the pairs of equal rows among all at
    ``u (rows / m)²`` (pairs grow with the square of the rows): grouped unless that is at
    most :data:`REPEATS` of the rows. Rows stored in an order that keeps equal ones together
    read as repeating, and are grouped; the estimate only chooses how the patterns are read,
    never what they are. (A system sample of as many rows took 0.75 s at 10M rows, the
    first rows 0.02 s.)"""
    head = select.limit(SAMPLE_ROWS).subquery("s")
    groups = exp.select(exp.alias_(exp.Count(this=exp.Star()), "c", quoted=True)).from_(head).group_by(
        *(k.copy() for k in keys))
    query = exp.select(exp.alias_(exp.Sum(this=sql.col("c")), "m", quoted=True),
                       exp.alias_(exp.Count(this=exp.Star()), "d", quoted=True)).from_(groups.subquery("g"))
    m, d = engine.execute(query)[0]
    if not m:
        return True
    return (m - d) * (rows / m) ** 2 > REPEATS * rows


def read_patterns(engine, source, label: str, weight: str | None, features: Sequence[Feature], stats,
                  fold: exp.Expression | None = None, distinct: bool = True) -> Patterns:
    """One aggregate scan: ``SELECT class, pos_0, …, SUM(weight) FROM src WHERE label IS
    NOT NULL GROUP BY ALL`` (and the fold, when given), ``class`` the label's position among
    the classes and each ``pos_j`` the 0-based position of the row's value among the
    feature's training values (``V_j`` when missing): a bin number, and a category's place by
    an ENUM cast in DuckDB (:meth:`Categorical.position`) or one equality per value elsewhere
    (:func:`~sqlnb.models.naive_bayes.tan._fit_position`). Only the distinct patterns leave
    the engine, as Arrow columns from DuckDB.

    ``distinct=False`` (the fit with λ given) lets DuckDB return the rows themselves, each a
    pattern of weight 1 (or its own), when at least :data:`UNGROUPED_FROM` rows hardly repeat
    (:func:`_repeat`): the objective is the same sum over the rows, and a GROUP BY of 10M
    distinct rows cost three times the projection."""
    classes = list(stats.classes)
    label_type = source.columns.get(label)
    klass = exp.Case(ifs=[exp.If(this=exp.EQ(this=sql.col(label, "src"), expression=sql.value(c, label_type)),
                                 true=exp.Literal.number(i)) for i, c in enumerate(classes)])
    cols: list[exp.Expression] = [exp.alias_(klass, "k", quoted=True)]
    sizes = [len(stats.features[f.name].values) for f in features]
    for j, (f, V) in enumerate(zip(features, sizes)):
        values = list(stats.features[f.name].values)
        if engine.dialect == "duckdb" and f.kind == "categorical":
            # a hash lookup (an ENUM cast) instead of one equality per value: at 1M rows x 8
            # columns of 3-50 values the scan took 26 s with the equalities (machine loaded)
            position = REGISTRY["categorical"].position(f, values, source.columns.get(f.name))
        else:
            position = _fit_position(f, values)
        # a missing value (NULL, NaN, unseen) at position V: no term
        cols.append(exp.alias_(exp.Coalesce(this=position, expressions=[exp.Literal.number(V)]), f"x{j}",
                               quoted=True))
    if fold is not None:
        cols.append(exp.alias_(fold.copy(), "fold", quoted=True))
    if weight is not None:  # rows of one group are then identical, their weight included (Patterns.dealt)
        cols.append(exp.alias_(exp.Cast(this=sql.col(weight, "src"), to=exp.DataType.build("DOUBLE")), "w",
                               quoted=True))
    keys = [sql.col(c.alias) for c in cols]
    labelled = exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null()))
    grouped = distinct or fold is not None or not isinstance(engine, DuckDBEngine)
    if not grouped:  # the model's statistics counted the labelled rows
        rows_total = int(np.sum(stats.class_rows))
        grouped = rows_total < UNGROUPED_FROM or _repeat(
            engine, exp.select(*cols).from_(source.from_("src")).where(labelled), keys, rows_total)
    count = exp.Count(this=exp.Star())
    total = exp.Sum(this=sql.col("w")) if weight is not None else count.copy()
    if grouped:
        inner = exp.select(*cols, exp.alias_(total, "n", quoted=True), exp.alias_(count, "rows", quoted=True)).from_(
            source.from_("src")).where(labelled).group_by(*keys)
    else:
        inner = exp.select(*cols).from_(source.from_("src")).where(labelled)
    import pyarrow as pa  # only here and in storage: a fit that saves nothing imports no pyarrow
    import pyarrow.compute as pc

    names = ["k", *(f"x{j}" for j in range(len(features))), *(["fold"] if fold is not None else []),
             *(["w"] if weight is not None else []), *(["n", "rows"] if grouped else [])]
    if isinstance(engine, DuckDBEngine):  # Arrow columns, no Python object per value
        table = engine.relation(inner).to_arrow_table().rename_columns(names)
    else:  # PostgreSQL / Spark: the patterns come back once, as tuples
        rows = engine.execute(inner)
        table = pa.table({name: pa.array([r[i] for r in rows]) for i, name in enumerate(names)})
    # every label is a class of the model, whose counts this scan repeats
    if table.column("k").null_count:
        raise SqlnbError(f"the rows of {source.description} changed between the scans of the fit (a label the "
                         "statistics did not count); fit again on data that does not change meanwhile")
    y = table.column("k").to_numpy().astype(np.int64)
    # one contiguous column per feature (the objective reads a feature at a time); the rows
    # read ungrouped (only the fit with λ given, which neither deals nor remaps them) in the
    # narrowest type that holds their positions: at 10M rows, 80 MB of bytes instead of 640 MB
    # of int64, which took 2.5 s just to be mapped in
    narrow = np.uint8 if max(sizes, default=0) < 2 ** 8 else np.uint16 if max(sizes) < 2 ** 16 else np.int64
    codes = np.empty((len(features), len(table)), dtype=np.int64 if grouped else narrow).T
    for j in range(len(features)):
        codes[:, j] = table.column(f"x{j}").to_numpy()
    if grouped:
        n = pc.fill_null(table.column("n").cast(pa.float64()), 0.0).to_numpy().copy()
        rows = table.column("rows").cast(pa.float64()).to_numpy()
    else:
        rows = np.broadcast_to(1.0, (len(table),))  # a row each: one value seen as an array
        n = rows if weight is None else pc.fill_null(table.column("w"), 0.0).to_numpy().copy()
        if weight is None:
            return Patterns(y, codes, n, np.zeros(len(table), dtype=np.int64), rows)
    folds = (table.column("fold").cast(pa.int64()).to_numpy() if fold is not None
             else np.zeros(len(table), dtype=np.int64))
    keep = n > 0
    if keep.all():
        return Patterns(y, codes, n, np.asarray(folds), rows)
    return Patterns(y[keep], codes[keep], n[keep], np.asarray(folds)[keep], rows[keep])


def fold_counts(patterns: Patterns, features: Sequence[Feature], stats) -> tuple[np.ndarray, dict]:
    """Class weights and per-feature (class, value) counts of ``patterns``: what naive Bayes
    counts on those rows."""
    K = len(stats.classes)
    # rows of weight 1 (read ungrouped) are counted without reading their weights
    weights = None if patterns.n.strides == (0,) and patterns.n[:1].tolist() == [1.0] else patterns.n
    class_n = np.bincount(patterns.y, weights=weights, minlength=K).astype(float)
    counts = {}
    index = np.empty(len(patterns.y), dtype=np.int64)  # one scratch for every feature's (class, value)
    for j, f in enumerate(features):
        V = len(stats.features[f.name].values)
        np.multiply(patterns.y, V + 1, out=index)
        index += patterns.codes[:, j]
        flat = np.bincount(index, weights=weights, minlength=K * (V + 1))
        counts[f.name] = flat.reshape(K, V + 1)[:, :V].astype(float)
    return class_n, counts


def naive_bayes_on(nb: NaiveBayes, patterns: Patterns) -> NaiveBayes:
    """The naive Bayes model of ``nb``'s features, hyperparameters and vocabularies fitted on
    the rows of ``patterns`` (a fold's training rows): its counts, from the patterns."""
    class_n, counts = fold_counts(patterns, nb.features, nb.stats)
    feats = {f.name: Counts(list(nb.stats.features[f.name].values), counts[f.name]) for f in nb.features}
    # class_rows: the weights stand for the rows (read_patterns groups rows by their weight too)
    stats = dataclasses.replace(nb.stats, class_n=class_n, class_rows=class_n, features=feats, pairs=None, cuts={})
    return NaiveBayes(nb.label, nb.label_type, nb.features, stats, nb.hyper, nb.report, nb.weight)


def _tables(nb: NaiveBayes, absent_ok: bool = False) -> tuple[np.ndarray, list[np.ndarray]]:
    """ln π and each feature's ln θ of ``nb``; a −inf log-prior (a class without rows) is
    refused unless ``absent_ok``."""
    params = nb.log_parameters()
    prior = np.asarray(params["prior"], dtype=float)
    if not absent_ok and not np.all(np.isfinite(prior)):
        k = int(np.argmin(np.isfinite(prior)))
        raise SqlnbError(f"model 'weighted': class {nb.classes[k]!r} has no training rows (or a zero prior), so its "
                         "log-prior is −inf and no weight can be learnt for it; give it rows or leave it out")
    tables = [np.asarray(params[f.name][1], dtype=float) for f in nb.features]
    for f, t in zip(nb.features, tables):
        if not np.all(np.isfinite(t)):
            raise SqlnbError(f"model 'weighted': column {f.name!r} has a zero probability for some value and class "
                             "(estimator 'mle' or alpha 0); weights need finite log-probabilities: use alpha > 0")
    return prior, tables


#: Relative step at which the fits of the cross-validation that ranks λ stop (the model's own
#: fit runs to 1e-12). Newton's method converges quadratically near the optimum, so after a
#: step of 1e-4 the weights are within about 1e-8 of it: at 1M patterns the held-out losses
#: then equal those of fits run to 1e-7 within 1e-11, in 45 Newton steps instead of 70, far
#: below any difference between the grid's losses.
RANKING_TOL = 1e-4


#: Newton's steps reuse the last Hessian while the steps since it sum to at most this, relative
#: (:func:`~sqlnb.models.newton.newton`'s ``reuse``): a Hessian costs K(K − 1)/2 · F(F + 1)/2
#: bincounts over the patterns, a gradient about 2K per group of features.
HESSIAN_REUSE = 1e-3


def _solve(obj: Objective, start: np.ndarray | None = None, tol: float | None = None) -> np.ndarray:
    """Newton's method on ``obj`` from ``start`` (default all 1; ``tol``:
    :func:`~sqlnb.models.newton.newton`'s)."""
    beta0 = np.ones(obj.size()) if start is None else start
    beta, _ = newton(obj, beta0, failure="the weights of model 'weighted' did not converge in {steps} Newton steps; "
                                          "try a larger l2", reuse=HESSIAN_REUSE, **({} if tol is None else {"tol": tol}))
    return beta


def fit_weights(nb: NaiveBayes, patterns: Patterns, l2: float, start: np.ndarray | None = None,
                tol: float | None = None) -> np.ndarray:
    """The weights minimising :class:`Objective` for ``nb``'s log-probabilities on ``patterns``
    (from ``start``, default all 1; ``tol``: :func:`~sqlnb.models.newton.newton`'s).

    A class without a training row (a cross-validation fold's model, whose training folds
    lack the one row of a rare class) has ln π = −inf under a fitted prior: its score is
    −inf whatever its weights, so they are left at 1 (probability 0, as naive Bayes's fold
    model gives it) and the others are fitted over the classes present (no training row
    is of the absent class, so the objective is the same sum)."""
    prior, tables = _tables(nb, absent_ok=True)
    present = np.isfinite(prior)
    if present.all():
        return _solve(Objective(prior, tables, patterns, l2), start, tol)
    if not (np.isneginf(prior) | present).all() or present.sum() < 2:
        _tables(nb)  # NaN, or fewer than two classes to tell apart: its error
    K = len(prior)
    index = np.cumsum(present) - 1  # a present class's place among the present ones
    if np.any(~present[patterns.y]):  # no row of an absent class is among its training rows
        raise SqlnbError("model 'weighted': training rows of a class with a zero prior; give the class a prior")
    inner = Patterns(index[patterns.y], patterns.codes, patterns.n, patterns.fold, patterns.rows)
    shapes = [t.shape[1] for t in tables]
    of_class = np.concatenate([np.arange(K)] + [np.repeat(np.arange(K), V) for V in shapes])
    mask = present[of_class]
    beta = np.ones(len(of_class))
    beta[mask] = _solve(Objective(prior[present], [t[present] for t in tables], inner, l2),
                        None if start is None else start[mask], tol)
    return beta


def chosen_l2(nb: NaiveBayes, dealt) -> tuple[float, list | None]:
    """λ by the weights' rule, for the full model and every fold model alike: with a class
    of fewer than two training rows (which no cross-validation holds in every fold) the
    strongest of :data:`L2_GRID`, the closest to naive Bayes; else the λ of the lowest
    cross-validated log loss (:func:`choose_l2` over the patterns ``dealt()`` returns, equal
    to 12 digits: the larger λ). Returns λ and the CV's table (None without one)."""
    if min(nb.stats.class_rows) < 2:
        return L2_GRID[0], None
    tried = choose_l2(nb, dealt())
    return min(tried, key=lambda t: (round(t["cv_log_loss"], 12), -t["l2"]))["l2"], tried


def choose_l2(nb: NaiveBayes, patterns: Patterns, grid: Sequence[float] = L2_GRID) -> list[dict]:
    """Cross-validated mean held-out log loss and error rate of each λ of ``grid`` (the
    patterns carry their fold; module docstring). One dict per λ, in grid order."""
    folds = sorted(set(patterns.fold.tolist()))
    losses = np.zeros((len(grid), len(folds)))
    errors = np.zeros((len(grid), len(folds)))
    shares = np.zeros(len(folds))
    K = len(nb.classes)
    for i, f in enumerate(folds):
        train, test = patterns.where(patterns.fold != f), patterns.where(patterns.fold == f)
        if np.any(np.bincount(train.y, weights=train.n, minlength=K) <= 0):
            continue  # a class without weight in the training folds (rows of weight 0): no prior, no model
        prior, tables = _tables(naive_bayes_on(nb, train))
        fitting, held = Objective(prior, tables, train, 1.0), Objective(prior, tables, test, 1.0)
        shares[i] = test.n.sum()
        beta = None
        for g, l2 in enumerate(grid):  # the fold's terms made once, for every λ
            beta = _solve(fitting.with_l2(l2), beta, RANKING_TOL)
            losses[g, i], errors[g, i] = held.held_out(beta)
    if not shares.any():
        raise SqlnbError("model 'weighted': every cross-validation fold leaves a class without training weight, so "
                         "l2 cannot be chosen; give l2= (--l2)")
    shares /= shares.sum()
    return [{"l2": float(l2), "cv_log_loss": float(losses[g] @ shares), "cv_error": float(errors[g] @ shares)}
            for g, l2 in enumerate(grid)]


# -- the model ------------------------------------------------------------------------------------

class WeightedNaiveBayes(NaiveBayes):
    """Naive Bayes whose log-probabilities carry discriminatively learnt weights.

    Build one with ``sqlnb.fit(..., model="weighted")`` (``sqlnb fit --kind weighted``).

    Attributes
    ----------
    l2 : float
        The penalty λ the weights were fitted with.
    prior_weights : ndarray (K,)
        ``a_k``, the weight of each class's log-prior.
    weights : dict
        Feature name -> (K, V) weights of its log-probabilities, in the order of its values.
    """

    kind = "weighted_naive_bayes"
    generative = False  # weighted log-probabilities: class scores, not ln p(x, class)

    def __init__(self, *args, l2: float = 1e-3, prior_weights=None, weights=None, **kwargs):
        self.weights = None  # naive Bayes's checks at construction derive the unweighted parameters
        super().__init__(*args, **kwargs)
        check_features(self.features, self.hyper.structure)
        self._params = None
        self.l2 = float(l2)
        K = len(self.classes)
        self.prior_weights = np.ones(K) if prior_weights is None else np.array(prior_weights, dtype=float)
        self.weights = {f.name: (np.array(weights[f.name], dtype=float) if weights and f.name in weights
                                 else np.ones((K, len(self.stats.features[f.name].values))))
                        for f in self.features}

    @classmethod
    def from_naive_bayes(cls, nb: NaiveBayes, l2: float, beta: np.ndarray | None = None,
                         report: dict | None = None) -> "WeightedNaiveBayes":
        model = cls(nb.label, nb.label_type, nb.features, nb.stats, nb.hyper, dict(report or nb.report), nb.weight,
                    l2=l2)
        if beta is not None:
            K, rest = len(model.classes), len(model.classes)
            model.prior_weights = np.array(beta[:K])
            for f in model.features:
                V = len(model.stats.features[f.name].values)
                model.weights[f.name] = np.array(beta[rest:rest + K * V]).reshape(K, V)
                rest += K * V
        return model

    def _rewrap(self, nb: NaiveBayes, weights: dict | None = None) -> "WeightedNaiveBayes":
        return WeightedNaiveBayes(nb.label, nb.label_type, nb.features, nb.stats, nb.hyper, nb.report, nb.weight,
                                  l2=self.l2, prior_weights=self.prior_weights,
                                  weights=self.weights if weights is None else weights)

    def naive_bayes(self) -> NaiveBayes:
        """The naive Bayes model of the same counts and hyperparameters, without the weights
        (what ``show`` describes the features by: their probabilities and information)."""
        return NaiveBayes(self.label, self.label_type, self.features, self.stats, self.hyper, self.report,
                          self.weight)

    def __repr__(self) -> str:
        return (f"WeightedNaiveBayes(label={self.label!r}, classes={self.classes!r}, "
                f"features={len(self.features)}, l2={self.l2:g})")

    def log_parameters(self) -> dict:
        """Naive Bayes's log-parameters with the weights folded in: ``a ⊙ ln π`` and, per
        feature, ``w ⊙ ln θ`` (what every scoring path reads)."""
        if self.weights is None:
            return super().log_parameters()
        if self._params is None:
            params = dict(super().log_parameters())
            params["prior"] = self.prior_weights * np.asarray(params["prior"], dtype=float)
            for f in self.features:
                values, flp, unseen = params[f.name]
                params[f.name] = (values, self.weights[f.name] * flp, unseen)
            self._params = params
        return self._params

    def with_params(self, **changes) -> "WeightedNaiveBayes":
        """The weights were learnt for these log-probabilities: changing the hyperparameters
        they are derived under needs a refit."""
        if changes:
            raise SqlnbError(f"model 'weighted' learnt its weights for these hyperparameters; to change "
                             f"{', '.join(changes)} refit it (sqlnb.fit(..., model='weighted', ...))")
        return self

    def select(self, names: Sequence[str]) -> "WeightedNaiveBayes":
        raise SqlnbError("model 'weighted' learnt its weights with every feature; refit it on the features you want")

    def rebuilt(self, features: Sequence[Feature] | None = None, stats=None,
                report: dict | None = None) -> "WeightedNaiveBayes":
        """:meth:`NaiveBayes.rebuilt` keeping the weights, mapped by value (a value new to the
        model weighs 1). A binned column whose cut points move is refused: its weights were
        learnt per bin of the old cut points."""
        nb = NaiveBayes.rebuilt(self, features, stats, report)
        old_edges = {f.name: f.edges for f in self.features}
        weights = {}
        for f in nb.features:
            if f.kind == "binned" and f.edges != old_edges.get(f.name):
                raise SqlnbError(f"the update moves the cut points of binned column {f.name!r} ({old_edges.get(f.name)} "
                                 f"-> {f.edges}), whose weights were learnt per bin; refit the model on all rows "
                                 "(sqlnb fit --kind weighted)")
            at = {v: i for i, v in enumerate(self.stats.features[f.name].values)}
            old = self.weights[f.name]
            weights[f.name] = np.array([old[:, at[v]] if v in at else np.ones(len(self.classes))
                                        for v in nb.stats.features[f.name].values]).reshape(
                len(nb.stats.features[f.name].values), len(self.classes)).T
        return self._rewrap(nb, weights)

    def merge(self, other, decay: float | None = None) -> "WeightedNaiveBayes":
        """The counts merged exactly (:meth:`NaiveBayes.merge`); the weights kept
        (:meth:`rebuilt`), with a note: they were learnt on the rows of the fit."""
        merged = NaiveBayes.merge(self, other, decay)
        warn("note: the update merged the counts exactly; the weights of model 'weighted' were learnt on the "
                      "rows of its fit and are kept (values new to the model weigh 1): refit to learn them on all rows",
                      UpdateKeepsWeights)
        return self.rebuilt(stats=merged.stats, report=merged.report)

    # -- storage ----------------------------------------------------------------------------
    def metadata(self) -> dict:
        return {**super().metadata(), "l2": self.l2}

    def parameter_tables(self) -> dict:
        """Naive Bayes's parts, and ``weights``: (feature, class_index, value_index, weight),
        the class log-prior's weights under the feature NULL."""
        import pyarrow as pa
        parts = super().parameter_tables()
        K = len(self.classes)
        feature, klass, value, weight = [None] * K, list(range(K)), [None] * K, list(self.prior_weights)
        for f in self.features:
            w = self.weights[f.name]
            ks, vs = np.indices(w.shape)
            feature += [f.name] * w.size
            klass += ks.ravel().tolist()
            value += vs.ravel().tolist()
            weight += w.ravel().tolist()
        parts["weights"] = (pa.table({"feature": pa.array(feature, pa.string()),
                                      "class_index": pa.array(klass, pa.int32()),
                                      "value_index": pa.array(value, pa.int32()),
                                      "weight": pa.array(weight, pa.float64())}), {})
        return parts

    @classmethod
    def from_tables(cls, meta: dict, tables: dict) -> "WeightedNaiveBayes":
        nb = NaiveBayes.from_tables(meta, tables)
        K = len(nb.classes)
        prior = np.ones(K)
        weights = {f.name: np.ones((K, len(nb.stats.features[f.name].values))) for f in nb.features}
        for r in tables["weights"].to_pylist():
            if r["feature"] is None:
                prior[r["class_index"]] = r["weight"]
            else:
                weights[r["feature"]][r["class_index"], r["value_index"]] = r["weight"]
        return cls(nb.label, nb.label_type, nb.features, nb.stats, nb.hyper, nb.report, nb.weight,
                   l2=float(meta["l2"]), prior_weights=prior, weights=weights)


register_kind(WeightedNaiveBayes.kind, WeightedNaiveBayes)


def fit(nb: NaiveBayes, engine, source, l2: float | None = None, folds: int = CV_FOLDS,
        seed: int = 0) -> WeightedNaiveBayes:
    """The weighted model over the naive Bayes model ``nb`` fitted on ``source``: one
    aggregate scan for the patterns (dealt to folds in numpy when λ is chosen by cross-validation),
    then the weights (module docstring)."""
    check_features(nb.features, nb.hyper.structure)
    if l2 is not None and (isinstance(l2, bool) or not isinstance(l2, (int, float))
                           or not (math.isfinite(l2) and l2 > 0)):
        raise SqlnbError(f"l2 must be a positive finite number (the L2 penalty of the weights), not {l2!r}")
    report = dict(nb.report)
    smallest = int(np.min(nb.stats.class_rows))
    if l2 is None and smallest < 2:
        warn(f"note: class {nb.classes[int(np.argmin(nb.stats.class_rows))]!r} has {smallest} training "
                      f"row, too few to choose l2 by cross-validation; l2 = {L2_GRID[0]:g}, the strongest penalty "
                      "of the grid (the closest to naive Bayes); give l2= (--l2) to choose another", ScreeningWarning)
    patterns = read_patterns(engine, source, nb.label, nb.weight, nb.features, nb.stats,
                             distinct=l2 is None and smallest >= 2)
    if l2 is None:
        # stratified folds: a class needs a row in every fold, or a fold model has no prior for it
        l2, tried = chosen_l2(nb, lambda: patterns.dealt(min(folds, smallest), seed))
        report.update({"l2_cv": tried} if tried is not None else {})
    class_n, counts = fold_counts(patterns, nb.features, nb.stats)
    for f in nb.features:  # the scan saw the rows the counts came from
        if not np.allclose(counts[f.name], nb.stats.features[f.name].counts, rtol=1e-9, atol=1e-9):
            raise SqlnbError(f"the rows of {source.description} changed between the scans of the fit (column "
                             f"{f.name!r} counts differ); fit again on data that does not change meanwhile")
    report["patterns"] = int(len(patterns.y))
    return WeightedNaiveBayes.from_naive_bayes(nb, l2, fit_weights(nb, patterns, l2), report)
