"""k-fold cross-validation and grid search, reading the training data once.

Folds (:mod:`sqlnb.workflows.folds`): stratified and balanced as scikit-learn's
``StratifiedKFold`` (per class, fold sizes differ by at most one), each class's rows
shuffled by a portable integer hash of a row id on any engine, or DuckDB's ``hash()`` of
the key columns; a column of the source, computed by one window as it is read.

On an engine (``con`` a :class:`~sqlnb.engines.PostgresEngine` or
:class:`~sqlnb.engines.SparkEngine`) every statement below runs there and only aggregates
come back: the copy is a temporary table on PostgreSQL and a cached temporary view on
Spark (``CACHE TABLE ... AS``), categorical counts come from the GROUPING SETS query
grouped by fold as well (no ``histogram()`` there), and the pooled scoring query is the
same tree rendered for the engine. Logistic regression, fitted in Python on the rows, is
refused there.

The source is read exactly once: into a temporary table holding the label, the candidate
features and each row's fold (:func:`materialize`), which every step below reads instead
(``materialize_source=False`` skips the copy and reads the source twice).

Statistics, one scan for the whole grid:

* naive Bayes: one ``GROUP BY label, fold`` (:func:`sqlnb.models.naive_bayes.fit.collect_statistics_by`)
  gives per-fold :class:`~sqlnb.stats.Statistics`; the training statistics of fold ``i``
  are the exact merge of the other folds' (:meth:`~sqlnb.stats.Statistics.merge`), and
  every grid point is :meth:`~sqlnb.models.naive_bayes.model.NaiveBayes.with_params` on them (α,
  estimator, var_smoothing, class prior ... never touch the data).
* LDA / QDA: the same with per-fold :class:`~sqlnb.models.discriminant.JointMoments` (counts,
  means, co-moments merged by Chan's formula); shrinkage, reg_param and priors are grid
  parameters.
* logistic regression: the labelled rows and their fold are read once into numpy; one
  Newton fit per (fold, grid point).

Evaluation, one scoring query for the whole grid and every fold: the source is read once,
each row crossed with the G grid indices and given the key ``m = g·k + fold``; the per-class
score is ``CASE m WHEN 0 THEN b_c(model 0) WHEN 1 THEN … END`` (DuckDB evaluates a CASE
branch only on the rows that select it, so the work is about G scorings of the source, not
G·k), finished by the same log-sum-exp as every scoring query
(:func:`sqlnb.models.finish.scoring_select`). Lookups a model joins to (a categorical feature's
VALUES table) are stacked over the models with the key as one more column and joined ON
the model's own condition AND the key. :func:`sqlnb.workflows.evaluate.summary_query`, grouped by the
key, reduces the rows to accuracy and log loss per (grid point, fold) with scikit-learn's
definitions (probabilities clipped to [ε, 1 − ε]; rows without probabilities count as
errors and are left out of the log loss). So a grid of any size costs what one fit
reads (for naive Bayes: one scan plus the first rows for the Gaussian shifts,
:func:`sqlnb.models.naive_bayes.fit.gaussian_shifts`) and one scoring read, whatever the number of folds and
grid points, for naive Bayes, LDA and QDA alike; and each fold's figures are
those of the model a refit on the training folds would give (tested). Token-bag features
score through a LATERAL join per document, which cannot be keyed this way: a model with
one is evaluated fold by fold (one scoring scan per grid point and fold, ``scans``
says which), as are AODE and averages with it (:func:`~sqlnb.models.naive_bayes.mixture.has_member`).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb.api import check_naive_bayes_only
from sqlnb.models import dense
from sqlnb import sql
from sqlnb.models.discriminant import LDA, QDA, collect_moments
from sqlnb.errors import SqlnbError, suggest
from sqlnb.workflows.evaluate import over_scored, summary_query
from sqlnb.models.logistic import Logistic
from sqlnb.models.base import Model
from sqlnb.models.screening import screen_plan
from sqlnb.engines import Engine, as_engine
from sqlnb.models.naive_bayes import eskdb, kdb, mixture, skdb, tan, weighted
from sqlnb.models.naive_bayes.fit import collect_statistics_by, plan_features
from sqlnb.models.naive_bayes.model import Hyperparameters, NaiveBayes
from sqlnb.models.finish import scoring_select
from sqlnb.workflows import fold_bins, fold_weights
from sqlnb.source import Source, read_with
from sqlnb.workflows.folds import (FOLD_PRIME, _unused_name, assign_folds, drop_copy,  # noqa: F401
                                   fold_constants, fold_source, is_integer_type, materialize, portable_hash)

#: Model kinds cross-validation knows (as :data:`sqlnb.api.MODELS`).
MODELS = ("naive_bayes", "weighted", "lda", "qda", "logistic")
#: Parameters each model kind takes in a grid (naive Bayes: any Hyperparameters field).
GRID_PARAMETERS = {
    "naive_bayes": tuple(Hyperparameters.__dataclass_fields__),
    "weighted": (*Hyperparameters.__dataclass_fields__, "l2"),
    "lda": ("shrinkage", "priors"),
    "qda": ("reg_param", "priors"),
    "logistic": ("C", "standardize"),
}
SCORING = ("accuracy", "log_loss")
#: Keywords of :func:`sqlnb.fit` that plan naive Bayes features (fixed for every grid point).
STRUCTURAL = ("kind", "feature_kinds", "binarize", "text", "bins")


def expand_grid(grid: Mapping[str, Sequence] | Sequence[Mapping[str, Any]] | None) -> list[dict]:
    """Grid points: the Cartesian product of a mapping ``param -> values``, or a list of
    dicts as given; ``[{}]`` for no grid."""
    if grid is None:
        return [{}]
    if isinstance(grid, Mapping):
        for n, v in grid.items():
            if isinstance(v, (str, bytes)) or not isinstance(v, Sequence):
                raise SqlnbError(f"grid values for {n!r} must be a list, not {v!r}")
        return [dict(zip(grid, combo)) for combo in itertools.product(*(list(v) for v in grid.values()))]
    points = [dict(p) for p in grid]
    return points or [{}]


@dataclass
class CVResult:
    """What :func:`cross_validate` measured.

    Attributes
    ----------
    model : str
        The model kind.
    folds, seed : int
        How rows were split.
    fold_rows : list of int
        Labelled rows per fold.
    results : list of dict
        Per grid point: ``params``, per-fold ``accuracy`` and ``log_loss`` lists, and
        their unweighted means ``mean_accuracy`` and ``mean_log_loss`` (as scikit-learn's
        ``cross_validate``).
    best_params : dict
        The grid point with the best mean ``scoring``.
    best_model : Model or None
        Refitted on every row with ``best_params`` (from merged statistics: no scan for
        naive Bayes, LDA and QDA).
    scans : dict
        ``source``: reads of the source (1 when it was copied, :func:`materialize`;
        else 2); ``statistics`` (1) and ``scoring`` (1; one per grid point and fold for
        a model with token-bag features, see the module docstring): reads of the copy,
        or of the source.
    """

    model: str
    folds: int
    seed: int
    scoring: str
    fold_rows: list[int]
    results: list[dict]
    best_params: dict
    best_model: Model | None = None
    scans: dict = field(default_factory=dict)
    seconds: float = 0.0

    def table(self) -> list[dict]:
        """One flat row per grid point: its parameters, mean and std of each metric."""
        rows = []
        for r in self.results:
            row = dict(r["params"])
            for m in SCORING:
                row[f"mean_{m}"] = r[f"mean_{m}"]
                row[f"std_{m}"] = float(np.std(r[m]))
            rows.append(row)
        return rows


@dataclass
class _Plan:
    """How to build fold ``i``'s model and the full-data model for a grid point."""

    fold_model: Callable[[int, dict], Model]
    full_model: Callable[[dict], Model]
    fold_rows: list[int]


def _merge_all(parts: Sequence):
    """The exact merge of statistics (or moments) of disjoint row sets."""
    merged = parts[0]
    for s in parts[1:]:
        merged = merged.merge(s)
    return merged


def _merge_others(per_fold: Sequence, i: int):
    """Training statistics of fold ``i``: every other fold's, merged."""
    return _merge_all([s for j, s in enumerate(per_fold) if j != i])


def _per_fold(found: Mapping[Any, Any], folds: int, where: str) -> list:
    missing = [i for i in range(folds) if i not in found]
    if missing:
        raise SqlnbError(f"fold {missing[0]} of {where} has no labelled rows; use fewer folds")
    return [found[i] for i in range(folds)]


def _naive_bayes_plan(con, source, label, fold, folds, features, exclude, options, pairs: bool = False,
                      orders: Sequence[int] = (), patterns: bool = False) -> _Plan:
    structural = {k: options.pop(k) for k in STRUCTURAL if k in options}
    feats = plan_features(source, label, None, structural.get("kind", "auto"), structural.get("feature_kinds"),
                          features, exclude, structural.get("binarize", 0.0), structural.get("text"),
                          structural.get("bins"))
    # Binned columns: each fold's model cuts on its training folds' value counts, all
    # folds' from one scan grouped by fold (sqlnb.workflows.fold_bins): the held-out rows'
    # labels take no part in them. The model on every row (and the per-fold statistics
    # the scan below counts) cut on all folds' counts.
    cut = fold_bins.binned(feats) and fold_bins.fold_value_counts(as_engine(con), source, label, feats, fold, folds)
    if cut:
        feats = fold_bins.with_edges(as_engine(con), feats, fold_bins.merged_counts(cut[1]))
    per = _per_fold(collect_statistics_by(con, source, label, feats, fold), folds, source.description)
    if cut:
        per = fold_bins.with_cuts(per, *cut)
    if pairs:  # tree-augmented: every fold's pair counts from one more scan (sqlnb.models.naive_bayes.tan)
        per = tan.with_fold_pairs(con, source, label, feats, fold, per)
    if any(k > 1 for k in orders):  # kdb:2: every fold's joint counts of the triples any fold needs, one more scan
        per = kdb.with_fold_joints(con, source, label, feats, fold, per, orders)
    if patterns:  # skdb: every fold's rows as patterns for its leave-one-out choice, one more scan
        per = skdb.with_fold_patterns(per, feats, lambda tree, shim: weighted.read_patterns(
            as_engine(con), source, label, None, tree, shim, fold))
    hyper = Hyperparameters(**options)
    label_type = source.columns[label]
    if cut:
        fold_feats, fold_stats = fold_bins.fold_models_statistics(as_engine(con), source, label, feats, fold, per,
                                                                  pairs, orders, patterns)
    else:
        fold_feats, fold_stats = [feats] * folds, [_merge_others(per, i) for i in range(folds)]
    every = _merge_all(per)  # token bags pruned by their rows (min_df, ...): recounted on each model's rows
    fold_stats, every = fold_bins.with_training_vocabulary(as_engine(con), source, label, feats, fold, fold_stats,
                                                           every)
    train = [NaiveBayes(label, label_type, f, s, hyper) for f, s in zip(fold_feats, fold_stats)]
    full = NaiveBayes(label, label_type, feats, every, hyper, {"source": source.description, "rows": every.n_rows,
                                                              "null_label_rows": every.null_label_rows})
    return _Plan(lambda i, p: train[i].with_params(**p), lambda p: full.with_params(**p),
                 [s.n_rows for s in per])


def _discriminant_plan(cls, con, source, label, fold, folds, features, exclude, options) -> _Plan:
    feats = dense.plan_features(source, label, features, exclude, cls.kind.upper())
    _, found = collect_moments(con, source, label, list(feats), fold)
    per = _per_fold(found, folds, source.description)
    label_type = source.columns[label]

    def build(moments, params):
        p = {**options, **params}
        priors = p.pop("priors", None)
        return cls(label, label_type, feats, moments, priors, {"source": source.description,
                                                              "rows": moments.n_rows}, **p)

    train = [_merge_others(per, i) for i in range(folds)]
    full = _merge_all(per)
    return _Plan(lambda i, p: build(train[i], p), lambda p: build(full, p), [m.n_rows for m in per])


def _logistic_plan(con, source, label, fold, folds, features, exclude, options) -> _Plan:
    if as_engine(con).dialect != "duckdb":
        raise SqlnbError(f"cross-validation of logistic regression reads the rows into Python; on "
                         f"{as_engine(con).dialect} cross-validate naive_bayes, lda or qda (or use DuckDB)")
    feats = dense.plan_features(source, label, features, exclude, "logistic regression")
    labels, X, extras, null_rows = dense.read_rows(con, source, label, feats, {"fold": fold})
    classes = dense.check_labels(dict.fromkeys(labels), label, source.description, null_rows)
    f = extras["fold"].astype(np.int64)
    _per_fold({int(i): True for i in np.unique(f)}, folds, source.description)
    label_type = source.columns[label]
    labels = np.asarray(labels, dtype=object)

    def build(mask, params):
        p = {**options, **params}
        report = {"source": source.description, "rows": int(mask.sum())}
        return Logistic.fit_arrays(label, label_type, feats, list(labels[mask]), X[mask], classes,
                                   p.get("C", 1.0), p.get("standardize", False), report)

    return _Plan(lambda i, p: build(f != i, p), lambda p: build(np.ones(len(f), bool), p),
                 [int(np.sum(f == i)) for i in range(folds)])


def _rows(engine: Engine, query: exp.Select) -> list[dict]:
    """The rows of ``query`` on ``engine``, as dicts by output name."""
    names = [e.alias_or_name for e in query.expressions]
    return [dict(zip(names, r)) for r in engine.execute(query)]


def evaluate_fold(con: "duckdb.DuckDBPyConnection | Engine", model: Model, held_out: Source, label: str) -> dict:
    """Accuracy, log loss and labelled rows of ``model`` on ``held_out``: one SQL scan,
    on DuckDB or on an engine."""
    engine = as_engine(con)
    scored = model.scoring_query(held_out, outputs=("proba", "prediction"), keep=[label], dialect=engine.dialect)
    query = over_scored(summary_query(label, list(model.classes), model.label_type), scored)
    return _figures(_rows(engine, query)[0], held_out.description)


def keyed_source(source: Source, fold: exp.Expression, folds: int, points: int, key: str) -> exp.Subquery:
    """The source crossed with the grid indices ``g`` and keyed, as a FROM item ``src``::

        SELECT src.*, g·folds + fold AS key FROM <source> AS src CROSS JOIN (VALUES (0), …) AS grid(g)

    The source is read once; each of its rows appears once per grid point."""
    grid = exp.values([(exp.Literal.number(g),) for g in range(points)], alias="grid", columns=["g"])
    grid.args["alias"].set("this", sql.ident("grid"))
    grid.args["alias"].args["columns"][0].set("quoted", True)
    m = exp.Add(this=exp.Mul(this=sql.col("g", "grid"), expression=exp.Literal.number(folds)),
                expression=sql.paren(fold.copy()))
    query = (exp.select(exp.Column(this=exp.Star(), table=sql.ident("src")),
                        exp.alias_(exp.Cast(this=m, to=exp.DataType.build("bigint")), key, quoted=True))
             .from_(source.from_("src")).join(grid, join_type="CROSS"))
    return exp.Subquery(this=query, alias=exp.TableAlias(this=sql.ident("src")))


def keyed_joins(models: Sequence[Model], key: str, packed: bool = False) -> list[exp.Join] | None:
    """The models' lookups stacked into one LEFT JOIN per lookup, keyed by model index.

    Each model's join ``LEFT JOIN <table> AS a ON <cond>`` becomes, over all models,
    ``LEFT JOIN (SELECT 0 AS key, a.* FROM <table 0> AS a UNION ALL …) AS a ON <cond> AND
    src.key = a.key``: a row keyed ``m`` finds model ``m``'s lookup row, so the class score
    expressions of every model read ``a``'s columns unchanged. None when a model joins
    without an ON condition (a token bag's LATERAL subquery), which this cannot key.
    ``packed``: naive Bayes models' categorical lookups packed (:func:`_packed`).
    """
    stacked: dict[str, list[exp.Select]] = {}
    conditions: dict[str, exp.Expression] = {}
    for m, model in enumerate(models):
        for j in (model.score_joins(packed=True) if packed and isinstance(model, NaiveBayes) else model.score_joins()):
            on, alias = j.args.get("on"), j.this.alias
            if on is None or not alias or isinstance(j.this, exp.Lateral) or conditions.setdefault(alias, on) != on:
                return None
            stacked.setdefault(alias, []).append(
                exp.select(exp.alias_(exp.Literal.number(m), key, quoted=True),
                           exp.Column(this=exp.Star(), table=sql.ident(alias))).from_(j.this.copy()))
    joins = []
    for alias, selects in stacked.items():
        union = selects[0]
        for s in selects[1:]:  # built in place: exp.union() copies its growing left side each time
            union = exp.Union(this=union, expression=s, distinct=False)
        on = exp.and_(conditions[alias].copy(), exp.EQ(this=sql.col(key, "src"), expression=sql.col(key, alias)))
        joins.append(exp.Join(this=exp.Subquery(this=union, alias=exp.TableAlias(this=sql.ident(alias))),
                              on=on, side="LEFT"))
    return joins


def _packed(dialect: str) -> bool:
    """Whether the pooled query looks categorical values up packed (in DuckDB): one join
    per column built from a few string literals whatever the vocabulary
    (:meth:`~sqlnb.models.naive_bayes.families.categorical.Categorical.packed_join`, as a
    model's own scoring query for more than ``INLINE_MAX`` values), with the same
    log-probabilities as the portable ``VALUES`` join other dialects keep. A ``VALUES`` row
    per training value and fold model made the tree the memory of cross-validation: 10,000
    raw adult rows as categories (fnlwgt ~8,500 values, 5 fold models) peaked at 1,022 MiB,
    384 to build the tree, 185 to render it, the rest in DuckDB's planner."""
    return dialect == "duckdb"


def _dot_prelude(models: Sequence[Model], source: Source, dialect: str) -> list:
    """In DuckDB, the list of count values every naive Bayes model's dot products read
    (:data:`sqlnb.models.naive_bayes.model.DOT_MIN`): one list per row for all the models,
    so each model's class score is its prior plus one ``list_dot_product`` (digits, 10
    folds: 6,400 terms in the pooled query become 100). Empty when the models do not all
    take that shape alike (another kind, an infinite weight in one fold). For LDA, QDA and
    logistic models in the list shape, the one list ``x − r`` they all read
    (:func:`_dense_reference`)."""
    types = dict(source.columns)
    reference = _dense_reference(models, dialect)
    if reference is not None:
        return models[0].score_prelude(types, dialect, reference=reference)
    if dialect != "duckdb" or not all(isinstance(m, NaiveBayes) for m in models):
        return []
    preludes = [m.score_prelude(types, dot=True) for m in models]
    return preludes[0] if preludes[0] and all(p == preludes[0] for p in preludes[1:]) else []


def _dense_reference(models: Sequence[Model], dialect: str) -> np.ndarray | None:
    """For LDA, QDA or logistic models of one feature list in the list shape
    (:mod:`sqlnb.models.dense`): the reference ``r`` of the one list ``x − r`` every fold
    model reads (the first model's; the folds' centres differ little, so the numbers keep
    their size). Each model's class score is then d dot products (QDA) or one, instead of
    d(d+1)/2 or d products per model and class (QDA of 104 columns, 5 folds: 55,000
    products in the pooled query); QDA's d of them over one matrix literal per class
    (:meth:`~sqlnb.models.discriminant.QDA.list_class_scores`). None otherwise."""
    if not models or not all(isinstance(m, dense.DenseModel) for m in models):
        return None
    first = models[0]
    if not dense.listed(first.features, dialect) or any(m.features != first.features for m in models[1:]):
        return None
    return first.reference()


def _pooled_scores(models: Sequence[Model], types: Mapping[str, str], prelude: list, dialect: str,
                   taken: Sequence[str]) -> tuple[list[list[exp.Expression]], list]:
    """Each model's class scores in the pooled query, and the prelude they read.

    Scores take the portable form (lookups joined, keyed by :func:`keyed_joins`), with
    the dot products of ``prelude`` when there is one. A tree-augmented child's term
    reads its conditional table of (class, parent value, child value) cells by position:
    in DuckDB one list read (``list_extract``), as a model's own scoring query does,
    never the portable CASE with one branch per cell. That CASE (adult: up to 41 × 16
    cells a child and class, times every fold model) made DuckDB's expression state grow
    with the pooled query: 10-fold TAN on adult ran past 6 GB, 2 folds took 50 s and
    2.5 GB against 0.8 s and 0.26 GB with the lists.

    In DuckDB the tree features' value positions (an ENUM cast, a bin number) are
    helper columns of the prelude, each computed once per row for every model that
    finds its values at the same positions (the fold models, and the candidates of a
    selection step, mostly do), instead of once per model, class and term (``taken``:
    the names the helper columns must not take).
    """
    shared: dict[str, tuple[str, exp.Expression]] = {}
    taken = list(taken)

    def fresh(n: int) -> str:
        taken.append(_unused_name(taken, f"cv_position{n}"))
        return taken[-1]

    input_types = types if prelude else None  # the types the class scores are written for
    reference = _dense_reference(models, dialect) if prelude else None
    out = []
    for model in models:
        if reference is not None:
            # QDA: its z_m from a matrix literal per class, not a dot product node each
            # (the node count, times DuckDB's per-thread vectors, was this query's memory).
            listed = model.list_class_scores(reference) if isinstance(model, QDA) else None
            out.append(listed or [t.expression() for t in model.class_terms(types, dialect, reference=reference)])
            continue
        if not isinstance(model, NaiveBayes):
            out.append(model.class_scores(types, dot=True) if prelude else model.class_scores())
            continue
        tree: dict[str, Any] = {"tree_dialect": dialect, "packed": _packed(dialect)}
        if dialect == "duckdb":
            tree["tree_positions"] = position_columns(model, input_types, dialect, shared, fresh)
        out.append(model.class_scores(types, dot=True, **tree) if prelude else model.class_scores(**tree))
    return out, [*prelude, *shared.values()]


def position_columns(model: NaiveBayes, input_types: Mapping[str, str] | None, dialect: str,
                     shared: dict[str, tuple[str, exp.Expression]], fresh) -> dict[str, exp.Column]:
    """Where ``model``'s tree terms read each tree feature's value position (an ENUM cast,
    a bin number): a helper column over ``src``, one per distinct position expression,
    shared by every model that finds the feature's values at the same positions (fold
    models, a selection step's candidates). ``shared`` (rendered expression -> (column,
    expression)) collects the columns to define; ``fresh(n)`` names the ``n``-th."""
    out = {}
    for name, position in model.tree_positions(input_types, dialect).items():
        text = sql.render(position, dialect)
        if text not in shared:
            shared[text] = (fresh(len(shared)), position)
        out[name] = sql.col(shared[text][0], "src")
    return out


def pooled_summary_query(models: Sequence[Model], source: Source, label: str, fold: exp.Expression,
                         folds: int, key: str, dialect: str = "duckdb") -> exp.Select | None:
    """Accuracy, log loss and labelled rows of model ``m = g·folds + i`` on fold ``i``, for
    every ``m``, from one read of ``source`` (see the module docstring); one row per ``m``
    with the key in column ``key``. None when a model's lookups cannot be keyed."""
    joins = keyed_joins(models, key, _packed(dialect))
    if joins is None:
        return None
    first = models[0]
    first.check_source(source)
    first.check_dialect(dialect)
    m = sql.col(key, "src")

    def by_model(per_model: list[list[exp.Expression]]) -> list[exp.Expression]:
        return [exp.Case(this=m.copy(), ifs=[exp.If(this=exp.Literal.number(i), true=s[c])
                                             for i, s in enumerate(per_model)])
                for c in range(len(first.classes))]

    # The guarded scores only, without Model.score's NaN gate (fast scores, guarded ones
    # on NaN rows): the gate doubles the size of this query, and with G·k models it is
    # large. Measured on 1M mixed rows, 5 folds × 4 grid points (20 models): building
    # the tree, rendering it and DuckDB's planning took 4.4 s less without the gate, and
    # execution was no slower (the categorical lookups' joins dominate it).
    prelude = _dot_prelude(models, source, dialect)
    types = dict(source.columns)
    per_model, prelude = _pooled_scores(models, types, prelude, dialect, [*source.columns, key])
    scores = by_model(per_model)
    keyed = keyed_source(source, fold, folds, len(models) // folds, key)
    columns = [*source.columns, key]
    if dialect == "postgres":
        # PostgreSQL pulls subqueries up into the query that reads them, copying a column's
        # expression into every reference: the scoring layers read each class score
        # several times, and with one CASE branch per model the copies multiply (12 models,
        # 300 rows: the backend grew past 2 GB and returned nothing in 10 minutes). OFFSET 0
        # keeps the scores a subquery of their own, computed once per row (0.6 s).
        names = [_unused_name([label, key], f"cv_score{c}") for c in range(len(scores))]
        inner = (exp.select(sql.col(label, "src"), sql.col(key, "src"),
                            *[exp.alias_(s, n, quoted=True) for s, n in zip(scores, names)])
                 .from_(keyed).offset(0))
        for j in joins:
            inner = inner.join(j, copy=False)
        keyed = exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("src")))
        scores, columns, joins = [sql.col(n, "src") for n in names], [label, key, *names], []
    scored = scoring_select(keyed, scores, list(first.classes), first.label_type, columns,
                            outputs=("proba", "prediction"), keep=[label, key], joins=joins, prelude=prelude)
    return grouped_summary(scored, label, first.classes, first.label_type, key)


def grouped_summary(scored: exp.Select, label: str, classes: Sequence, label_type: str, key: str) -> exp.Select:
    """Accuracy, log loss and labelled rows of the rows of ``scored`` (a scoring SELECT
    keeping ``label`` and ``key``) per value of ``key``, one row each, the key in column
    ``key``."""
    # summary_query reduces the whole scored CTE to one row; grouping its aggregating scan
    # by the key (and passing the key out) gives the same figures per model, so accuracy
    # and log loss are defined in one place (sqlnb.workflows.evaluate) for both paths.
    query = summary_query(label, list(classes), label_type)
    scan = query.args["from_"].this.this
    scan.select(sql.col(key), copy=False).group_by(sql.col(key), copy=False)
    query.select(sql.col(key, "agg"), copy=False)
    return over_scored(query, scored)


def _figures(row: Mapping[str, Any], where: str) -> dict:
    """Accuracy, log loss and labelled rows from a summary row."""
    if not row["labelled"]:
        raise SqlnbError(f"{where} has no labelled rows to evaluate on")
    # Rows without probabilities (incomplete features for LDA/QDA/logistic, zero likelihood
    # under MLE) count as errors in accuracy and are left out of the log loss
    # (sqlnb.evaluate's rules); a fold where no row has probabilities has no log loss.
    log_loss = row["log_loss"]
    return {"accuracy": float(row["accuracy"]), "log_loss": float("nan") if log_loss is None else float(log_loss),
            "rows": int(row["labelled"])}


@sql.trees_collected_by_refcount
def cross_validate(
    data: Any,
    label: str,
    *,
    model: str = "naive_bayes",
    con: "duckdb.DuckDBPyConnection | Engine | None" = None,
    folds: int = 5,
    seed: int = 0,
    key: Sequence[str] | None = None,
    grid: Mapping[str, Sequence] | Sequence[Mapping[str, Any]] | None = None,
    scoring: str = "accuracy",
    refit: bool = True,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    keep_columns: Sequence[str] | None = None,
    screen: bool = True,
    kind: str = "auto",
    feature_kinds: Mapping[str, str] | None = None,
    weight: str | None = None,
    binarize: float | Mapping[str, float] = 0.0,
    text: Any = None,
    bins: str | Mapping[Any, str] | None = None,
    select_k: int | None = None,
    materialize_source: bool = True,
    **options: Any,
) -> CVResult:
    """k-fold cross-validation, optionally over a grid of hyperparameters.

    Parameters
    ----------
    data, label, con, features, exclude, keep_columns, screen
        As for :func:`sqlnb.fit` (the same columns are screened out as a fit leaves out).
        With ``con`` a PostgreSQL or Spark engine everything runs there (module
        docstring), for naive Bayes, LDA and QDA, and ``key`` is required.
    model : {"naive_bayes", "lda", "qda", "logistic"}
        The model kind.
    kind, feature_kinds, binarize, text, bins, weight, select_k
        As for :func:`sqlnb.fit` (naive Bayes only). Each fold's model cuts binned
        columns on its training rows (:mod:`sqlnb.workflows.fold_bins`). ``weight`` and ``select_k`` are
        refused (row weights are not cross-validated yet; features are chosen by
        :func:`sqlnb.workflows.select.select_features`).
    folds : int
        Number of folds (>= 2).
    seed : int
        Seed of the hash that shuffles each class's rows before they are dealt to the
        folds (stratified, :mod:`sqlnb.workflows.folds`).
    key : list of str, optional
        Columns hashed for that shuffle (default: every column, DuckDB only). One integer
        column (a row id) is hashed portably: the same rows form the same folds on
        DuckDB, PostgreSQL and Spark.
    grid : mapping of parameter -> list of values, or list of dicts, optional
        Hyperparameters to try: naive Bayes ``alpha``, ``var_smoothing``,
        ``estimator``, ``class_prior``, ...; LDA ``shrinkage``, ``priors``; QDA
        ``reg_param``, ``priors``; logistic ``C``, ``standardize``.
    scoring : {"accuracy", "log_loss"}
        What picks the best grid point (highest accuracy, or lowest log loss).
    refit : bool
        Fit the best grid point on all rows (``best_model``).
    materialize_source : bool
        Read the source once into a temporary table (with the fold of each row) and
        cross-validate on that copy (:func:`materialize`), so the source is read exactly
        once; otherwise it is read twice (statistics, scoring). The copy costs about what
        a second scan of a Parquet file costs and saves a second parse of a CSV file.
    **options
        Fixed parameters of the model kind, as the ``**hyperparameters`` of
        :func:`sqlnb.fit` (the names ``grid`` takes); a grid point's values replace them.

    Returns
    -------
    CVResult

    Examples
    --------
    >>> r = sqlnb.cross_validate("train.parquet", "y", grid={"alpha": [0.1, 1.0]})  # doctest: +SKIP
    >>> r.best_params, r.results[0]["accuracy"]                                     # doctest: +SKIP
    """
    start = time.perf_counter()
    if model not in MODELS:
        raise SqlnbError(f"unknown model {model!r}{suggest(model, MODELS)}; models are: {', '.join(MODELS)}")
    if scoring not in SCORING:
        raise SqlnbError(f"unknown scoring {scoring!r}; choose one of: {', '.join(SCORING)}")
    points = expand_grid(grid)
    allowed = GRID_PARAMETERS[model]
    for name in dict.fromkeys([*(n for p in points for n in p), *options]):
        if name not in allowed:
            raise SqlnbError(f"{name!r} is not a parameter of model {model!r}{suggest(name, allowed)}; "
                             f"choose from: {', '.join(allowed)}")
    if model not in ("naive_bayes", "weighted"):
        check_naive_bayes_only(model, kind=kind, feature_kinds=feature_kinds, weight=weight, binarize=binarize,
                               text=text, bins=bins, select_k=select_k)
    elif weight is not None:
        raise SqlnbError("cross-validation does not support row weights yet; leave out weight")
    elif select_k is not None:
        raise SqlnbError("cross-validation keeps the features it is given; choose them by cross-validation with "
                         "sqlnb select (select_features), or leave out select_k")
    else:
        options = {"kind": kind, "feature_kinds": feature_kinds, "binarize": binarize, "text": text, "bins": bins,
                   **options}
    con = as_engine(con)
    source = con.resolve(read_with(data, keep_text=(label,)))
    source.require([label], "label column")
    source, fold = assign_folds(source, label, folds, seed, key, con.dialect)
    if features is not None and exclude:
        raise SqlnbError("give either the features to use or the ones to exclude, not both")
    # Checked against the columns the user gave (not the fold column assign_folds adds).
    source.require(list(features or ()), "feature column")
    source.require(list(exclude or ()), "excluded column")  # checked here: the copy leaves them out
    text_is_categorical = model in ("naive_bayes", "weighted") and kind in ("auto", "categorical")

    def screened(src: Source, skip: Sequence[str] | None) -> list[str]:
        # The columns a fit would leave out (sqlnb.models.screening), read from ``src``.
        # Naive Bayes: a constant is left out only where no grid point's model counts it.
        found = screen_plan(con, src, label, None, features, skip, keep_columns, screen,
                            numeric_only=not text_is_categorical, asked=list(feature_kinds or {}),
                            naive_bayes=([{**options, **p} for p in points] if model in ("naive_bayes", "weighted")
                                         else None))
        return [s.column for s in found]

    if not materialize_source:
        if features is None:  # the fold column is no feature
            exclude = [*(exclude or ()), fold.name]
        exclude = [*(exclude or ()), *screened(source, exclude)] or None
        return _cross_validate(con, source, label, fold, model, folds, seed, points, scoring, refit,
                               features, exclude, options, start, source_reads=2)
    table, copy, fold = materialize(con, source, label, fold, features, exclude)
    try:
        # The copy: the label, the features (not excluded ones) and the fold column; screened.
        return _cross_validate(con, copy, label, fold, model, folds, seed, points, scoring, refit,
                               features, None if features is not None else [fold.name, *screened(copy, [fold.name])],
                               options, start, source_reads=1)
    finally:
        drop_copy(con, table)


def _cross_validate(con, source, label, fold, model, folds, seed, points, scoring, refit, features, exclude,
                    options, start, source_reads) -> CVResult:
    """:func:`cross_validate` on a resolved source and fold expression."""
    args = (con, source, label, fold, folds, features, exclude, dict(options))
    if model == "naive_bayes":
        structures = {p.get("structure", options.get("structure", "naive")) for p in points}
        plan = _naive_bayes_plan(*args, pairs=any(tan.needs_pairs(s) for s in structures),
                                 orders=sorted({k for k in map(mixture.joint_order, structures) if k}),
                                 patterns=any(skdb.selective(s) or eskdb.ensemble(s) for s in structures))
    elif model == "weighted":  # naive Bayes's fold models, then their weights (sqlnb.workflows.fold_weights)
        plan = _Plan(*fold_weights.plan(con, source, label, fold, features, exclude, dict(options), lambda opts:
                                        _naive_bayes_plan(con, source, label, fold, folds, features, exclude, opts)))
    elif model == "logistic":
        plan = _logistic_plan(*args)
    else:
        plan = _discriminant_plan(LDA if model == "lda" else QDA, *args)

    models = [plan.fold_model(i, params) for params in points for i in range(folds)]
    key = _unused_name(source.columns, "cv_model")
    # AODE (alone or averaged), deep KDB fold by fold: why, mixture.has_member and skdb.deep
    by_fold = any(mixture.has_member(s, "aode") or skdb.deep(s) or eskdb.ensemble(s) for s in (m.hyper.structure for m in models
                                                                           if hasattr(m, "hyper")))
    pooled = None if by_fold else pooled_summary_query(models, source, label, fold, folds, key, con.dialect)
    if pooled is not None:  # every (grid point, fold) from one scoring scan
        found = {r[key]: r for r in _rows(con, pooled)}
        figures = [_figures(found.get(m, {"labelled": 0}), f"fold {m % folds} of {source.description}")
                   for m in range(len(models))]
        scoring_scans = 1
    else:  # token bags, AODE, deep KDB: fold by fold
        held = [fold_source(source, fold, i) for i in range(folds)]
        figures = [evaluate_fold(con, model, held[m % folds], label) for m, model in enumerate(models)]
        scoring_scans = len(models)
    results = []
    for g, params in enumerate(points):
        per_fold = figures[g * folds:(g + 1) * folds]
        r = {"params": params, "accuracy": [f["accuracy"] for f in per_fold],
             "log_loss": [f["log_loss"] for f in per_fold]}
        r["mean_accuracy"] = float(np.mean(r["accuracy"]))
        r["mean_log_loss"] = float(np.mean(r["log_loss"]))
        results.append(r)
    # Best: highest mean accuracy (ties: lower log loss), or lowest mean log loss; then first.
    if scoring == "accuracy":
        best = min(range(len(results)), key=lambda g: (-results[g]["mean_accuracy"], results[g]["mean_log_loss"], g))
    else:
        best = min(range(len(results)), key=lambda g: (results[g]["mean_log_loss"], g))
    best_params = results[best]["params"]
    best_model = plan.full_model(best_params) if refit else None
    return CVResult(model, folds, seed, scoring, plan.fold_rows, results, best_params, best_model,
                    {"source": source_reads, "statistics": 1, "scoring": scoring_scans},
                    round(time.perf_counter() - start, 3))
