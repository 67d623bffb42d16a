"""Wrapper feature selection by cross-validation: forward or backward, for naive Bayes.

Kohavi & John's wrapper (the "FSS naive Bayes" of ``adult.names``): a subset of the
features is judged by the k-fold cross-validated error of the classifier fitted on it,
and the search walks the subsets one feature at a time.

* forward: start from no feature (the class prior alone) and at each step add the
  feature whose subset scores best;
* backward: start from every feature and at each step remove one.

A step's best candidate is the one with the lowest CV error, ties broken by the lower CV
log loss, then by the feature's place in the model (its column order). The search moves
to it when it improves on the current subset — a lower error, or the same error and a
lower log loss — and stops otherwise (hill climbing on (error, log loss)). With
``until_all`` it walks to the end (every feature added, or every one removed) and the
chosen subset is the best on the path, by the same order and then the fewer features.
CV error is ``1 − mean`` of the fold accuracies and CV log loss the mean of the fold log
losses (scikit-learn's ``cross_validate`` means, as :func:`sqlnb.cross_validate`).

Data read, whatever the number of steps and candidates:

* the source, once, into a temporary table with each row's fold
  (:func:`sqlnb.workflows.cv.materialize`);
* the statistics of every fold, once: one ``GROUP BY label, fold`` scan of the copy. A
  subset's model on the training folds of fold ``i`` is the full model on those folds
  restricted to the subset (:meth:`~sqlnb.models.naive_bayes.model.NaiveBayes.select`):
  no refit, no scan. Its log-parameters are derived afresh, so they are those of a fit on
  the subset's columns (a Gaussian variance floor is a fraction of the largest variance
  among the subset's own columns, for one);
* one scoring read of the copy per step, for every candidate of the step and every fold
  (:func:`terms_summary_query`): each row's per-class terms are computed once, one per
  distinct term (a feature's term under fold ``i``'s model, which most candidates
  share), and each candidate's class score is the sum of its terms' columns. In a
  tree-augmented model (``structure="tan"``) a child's term reads its parent's value
  too: it is one term per (fold, child, parent, conditional table), shared by the
  candidates whose tree keeps that edge, and the tree features' value positions are
  helper columns computed once per row (adult, MDL bins, backward, 10 folds: 15 s and
  0.5 GB, against 73 s and 1.5 GB when every candidate's fold models were scored whole
  by the pooled query of :mod:`sqlnb.workflows.cv`);
* the chosen subset's model on every row is the merge of the fold statistics restricted
  to the subset: no scan either.
* under ``structure="kdb:2"`` a candidate's structure needs the joint counts of each
  feature with its two parents, which the full set's statistics hold only for the full
  set's structure: each step first gathers the triples its candidates lack, for every
  fold, in one scan grouped by fold (:func:`sqlnb.models.naive_bayes.kdb.add_subset_joints`),
  counted as a statistics read.

So a forward selection over ``F`` features that takes ``s`` steps reads the copy
``s + 2`` times (statistics, then one scoring read per step including the last, which
finds no improvement), plus the copy itself and the first rows for the Gaussian shifts.
"""

from __future__ import annotations

import gc
import math
import pickle
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import Engine, as_engine
from sqlnb.errors import SqlnbError, suggest
from sqlnb.models.finish import scoring_select
from sqlnb.models.naive_bayes import eskdb, kdb, mixture, skdb, tan
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.models.screening import screen_plan
from sqlnb.source import Source, read_with
from sqlnb.workflows import cv

DIRECTIONS = ("forward", "backward")


@dataclass
class Selection:
    """What :func:`select_features` found.

    Attributes
    ----------
    direction : {"forward", "backward"}
    folds, seed : int
        How rows were split (as :func:`sqlnb.cross_validate`).
    fold_rows : list of int
        Labelled rows per fold.
    candidates : list of str
        The features the search chose from (the model's features, in its order).
    path : list of dict
        One entry per subset the search moved to, from the start: ``step``, ``change``
        (``"+name"``, ``"-name"``, or None at the start), ``subset`` (features in model
        order), ``size``, ``error`` and ``log_loss`` (the CV means), and per fold
        ``fold_error`` and ``fold_log_loss``.
    chosen : int
        The index in ``path`` of the chosen subset.
    model : NaiveBayes or None
        The chosen subset fitted on every row (from the merged fold statistics).
    scans : dict
        Reads: ``source`` (1, the copy), ``statistics`` (1) and ``scoring`` (one per
        step evaluated; with a token bag one per subset and fold) reads of the copy.
    evaluated : int
        Candidate subsets cross-validated.
    """

    direction: str
    folds: int
    seed: int
    fold_rows: list[int]
    candidates: list[str]
    path: list[dict]
    chosen: int
    model: NaiveBayes | None = None
    scans: dict = field(default_factory=dict)
    evaluated: int = 0
    seconds: float = 0.0

    @property
    def features(self) -> list[str]:
        """The chosen subset."""
        return list(self.path[self.chosen]["subset"])

    def to_dict(self) -> dict:
        """Everything but the model, as plain data (``--format json``)."""
        return {"direction": self.direction, "folds": self.folds, "seed": self.seed, "fold_rows": self.fold_rows,
                "candidates": self.candidates, "path": self.path, "chosen_step": self.path[self.chosen]["step"],
                "features": self.features, "error": self.path[self.chosen]["error"],
                "log_loss": self.path[self.chosen]["log_loss"], "scans": self.scans, "evaluated": self.evaluated,
                "seconds": self.seconds}


def _order(figures: dict) -> tuple[float, float]:
    """The order subsets are compared in: error, then log loss (a missing one last)."""
    ll = figures["log_loss"]
    return figures["error"], math.inf if ll is None or math.isnan(ll) else ll


def search(evaluate: Callable[[list[list[str]]], list[dict]], names: Sequence[str], direction: str = "forward",
           until_all: bool = False) -> tuple[list[dict], int, int]:
    """The wrapper search (module docstring) over the features ``names``.

    ``evaluate`` takes a list of subsets (each in the order of ``names``) and returns
    their figures (``error``, ``log_loss``, ...), one call per step. Returns the path,
    the index of the chosen entry and the number of subsets evaluated."""
    if direction not in DIRECTIONS:
        raise SqlnbError(f"unknown direction {direction!r}{suggest(direction, DIRECTIONS)}; "
                         f"choose {' or '.join(DIRECTIONS)}")
    forward = direction == "forward"
    current = [] if forward else list(names)
    path: list[dict] = []
    evaluated = 0
    while True:
        if forward:
            moves = [n for n in names if n not in current]
            subsets = [[m for m in names if m in current or m == n] for n in moves]
        else:
            moves = list(current)
            subsets = [[m for m in current if m != n] for n in moves]
        start = [] if path else [list(current)]  # the first step also scores where it starts
        if not moves and not start:
            break
        figures = evaluate(start + subsets)
        evaluated += len(start) + len(subsets)
        if start:
            path.append({"step": 0, "change": None, "subset": list(current), "size": len(current), **figures[0]})
            figures = figures[1:]
        if not moves:
            break
        best = min(range(len(moves)), key=lambda j: (*_order(figures[j]), j))
        if not until_all and not _order(figures[best]) < _order(path[-1]):
            break
        current = subsets[best]
        path.append({"step": len(path), "change": ("+" if forward else "-") + moves[best], "subset": list(current),
                     "size": len(current), **figures[best]})
    chosen = min(range(len(path)), key=lambda i: (*_order(path[i]), path[i]["size"], i))
    return path, chosen, evaluated


def _fingerprint(params: Any) -> bytes:
    """Log-parameters as bytes: equal bytes, equal terms (numpy arrays pickle their bytes)."""
    return pickle.dumps(params, protocol=pickle.HIGHEST_PROTOCOL)


#: Largest categorical vocabulary the one-read scoring of a step looks up in place. Scoring
#: a model joins past :data:`~sqlnb.models.naive_bayes.families.categorical.INLINE_MAX`
#: values; here a join would send the whole step to the pooled query, whose lookups are
#: stacked per candidate and fold (adult with its numbers as categories, capital-gain's
#: 119 values: minutes a step, against seconds in place).
INLINE_MAX = 1000


def _inlined(model: NaiveBayes) -> bool:
    """Whether ``model``'s class score is its prior plus one term per feature, each
    written without a join: no token bag and no categorical column past
    :data:`INLINE_MAX` values (a tree-augmented child's term reads its parent's value
    too, and is written without a join as well)."""
    params = model.log_parameters()
    if model.hyper.structure == "aode":  # its score averages over super-parents: not a sum of feature terms
        return False
    return all(f.bag is None and (f.kind != "categorical" or len(params[f.name][0]) <= INLINE_MAX)
               for f in model.features)


def _prefix(taken: Sequence[str]) -> str:
    """A prefix of helper column names that no column in ``taken`` starts with
    (case-insensitively, as DuckDB compares identifiers)."""
    prefix = "sqlnb_select_"
    while any(t.lower().startswith(prefix) for t in taken):
        prefix = "_" + prefix
    return prefix


def terms_summary_query(models: Sequence[Sequence[NaiveBayes]], source: Source, label: str, fold: exp.Column,
                        key: str, cache: dict | None = None) -> exp.Select | None:
    """Accuracy, log loss and labelled rows of every candidate's fold models on their
    held-out folds, from one read of ``source`` (DuckDB).

    ``models[c][i]`` is candidate ``c``'s model on the training folds of fold ``i``;
    ``fold`` is the source's fold column. One row per (candidate, fold), keyed ``key =
    c·folds + i``. The query::

        terms:  SELECT label, fold, CASE fold WHEN 0 THEN t₀ … END AS term_j, … FROM source
        keyed:  SELECT terms.*, grid.c, c·folds + fold AS key FROM terms CROSS JOIN (VALUES (0), …) AS grid(c)
        score:  b_k = CASE c WHEN 0 THEN term_a + term_b … WHEN 1 THEN … END

    then the finish every scoring query shares and the summary grouped by ``key``
    (:func:`sqlnb.workflows.cv.grouped_summary`). A term is a feature's term (or the
    prior) under each fold's model; candidates whose fold models derive the same
    log-parameters for a feature share its term, one column computed once per row. A
    candidate's class score adds up its terms' columns in the model's order (prior, then
    the features), as its own scoring query would. ``cache`` keeps the term expressions
    built, by fold and log-parameters, from one call to the next (the steps of a search
    share most of them). None when the models need a lookup join (a categorical column
    with more values than are inlined, a token bag): the pooled query of
    :mod:`sqlnb.workflows.cv` does those.
    """
    first = models[0][0]
    if not all(_inlined(m) for row in models for m in row[:1]):
        return None
    cache = {} if cache is None else cache
    types = source.types_for("duckdb")
    prefix = _prefix([label, fold.name, key])
    positions = cache.setdefault("positions", {})  # rendered position -> its helper column
    columns: dict[tuple, str] = {}
    definitions: list[exp.Expression] = []
    sums: list[list[list[str]]] = []
    for row in models:
        parts = ([None] if row[0].uses_prior() else []) + row[0].feature_names
        by_class: list[list[str]] = [[] for _ in first.classes]
        tree_terms: dict[int, dict] = {}
        for name in parts:
            per_fold = []
            for i, m in enumerate(row):
                p = m.log_parameters()["prior" if name is None else name]
                parent = m.tree().get(name)
                found = (i, name, _fingerprint(p))
                if parent is not None:  # a tree child's term: also its parents and conditional table
                    found += (parent, *(_fingerprint(m.log_parameters()[q])
                                        for q in ((parent,) if isinstance(parent, str) else parent)),
                              _fingerprint(m.conditional_tables()[name]))
                if found not in cache:
                    if parent is not None:
                        if i not in tree_terms:
                            tree_terms[i] = m.tree_terms(types, "duckdb", cv.position_columns(
                                m, types, "duckdb", positions, lambda n: f"{prefix}position{n}"))
                        cache[found] = tree_terms[i][name]
                    else:
                        cache[found] = ([sql.dbl(float(v)) for v in p] if name is None
                                        else m.terms_of(name, types, "duckdb", inline=True))
                per_fold.append(found)
            for k in range(len(first.classes)):
                column = (tuple(per_fold), k)
                if column not in columns:
                    columns[column] = f"{prefix}term{len(columns)}"
                    if all(f[1:] == per_fold[0][1:] for f in per_fold):  # the same term in every fold
                        value = cache[per_fold[0]][k].copy()
                    else:
                        value = exp.Case(this=fold.copy(), ifs=[exp.If(this=exp.Literal.number(i), true=cache[f][k].copy())
                                                                for i, f in enumerate(per_fold)])
                    definitions.append(exp.Alias(this=value, alias=sql.ident(columns[column])))
                by_class[k].append(columns[column])
        sums.append(by_class)
    folds = len(models[0])
    from_ = source.from_("src")
    if positions:  # the tree features' value positions, once per row (cv.position_columns)
        with_positions = exp.select(exp.Column(this=exp.Star(), table=sql.ident("src")),
                                    *[exp.Alias(this=e.copy(), alias=sql.ident(c)) for c, e in positions.values()],
                                    copy=False).from_(from_, copy=False)
        from_ = exp.Subquery(this=with_positions, alias=exp.TableAlias(this=sql.ident("src")))
    terms_select = exp.select(sql.col(label, "src"), sql.col(fold.name, "src"), *definitions, copy=False).from_(
        from_, copy=False)
    cand = f"{prefix}candidate"
    grid = exp.values([(exp.Literal.number(c),) for c in range(len(models))], alias="grid", columns=[cand])
    grid.args["alias"].set("this", sql.ident("grid"))
    grid.args["alias"].args["columns"][0].set("quoted", True)
    m = exp.Add(this=exp.Mul(this=sql.col(cand, "grid"), expression=exp.Literal.number(folds)),
                expression=sql.col(fold.name, "terms"))
    keyed = (exp.select(exp.Column(this=exp.Star(), table=sql.ident("terms")), sql.col(cand, "grid"),
                        exp.Alias(this=exp.Cast(this=m, to=exp.DataType.build("bigint")), alias=sql.ident(key)))
             .from_(exp.Subquery(this=terms_select, alias=exp.TableAlias(this=sql.ident("terms"))), copy=False)
             .join(grid, join_type="CROSS", copy=False))

    def total(names: list[str]) -> exp.Expression:
        return sql.add([sql.col(n, "src") for n in names])

    scores = [exp.Case(this=sql.col(cand, "src"), ifs=[exp.If(this=exp.Literal.number(c), true=total(s[k]))
                                                      for c, s in enumerate(sums)])
              if len(sums) > 1 else total(sums[0][k]) for k in range(len(first.classes))]
    scored = scoring_select(exp.Subquery(this=keyed, alias=exp.TableAlias(this=sql.ident("src"))), scores,
                            list(first.classes), first.label_type,
                            [label, fold.name, *columns.values(), cand, key], outputs=("proba", "prediction"),
                            keep=[label, key], dialect="duckdb")
    return cv.grouped_summary(scored, label, first.classes, first.label_type, key)


def subset_figures(engine: Engine, source: Source, label: str, fold: exp.Column, fold_models: Sequence[NaiveBayes],
                   subsets: Sequence[Sequence[str]], cache: dict | None = None) -> tuple[list[dict], int]:
    """CV ``error`` and ``log_loss`` (means over the folds) and their per-fold values
    ``fold_error`` and ``fold_log_loss`` of each subset of the features of
    ``fold_models`` (the full model on each fold's training rows), from one read of
    ``source`` (:func:`terms_summary_query`; the pooled query of
    :mod:`sqlnb.workflows.cv` for models with lookup joins; fold by fold, one read per
    subset and fold, for token bags). Returns the figures and the reads of ``source``."""
    folds = len(fold_models)
    models = [[m.select(s) for m in fold_models] for s in subsets]
    key = cv._unused_name(source.columns, "cv_model")
    query = terms_summary_query(models, source, label, fold, key, cache) if engine.dialect == "duckdb" else None
    if query is None:
        query = cv.pooled_summary_query([m for row in models for m in row], source, label, fold, folds, key,
                                        engine.dialect)
    if query is None:  # token bags: fold by fold (one read per model)
        held = [cv.fold_source(source, fold, i) for i in range(folds)]
        found = [cv.evaluate_fold(engine, m, held[i], label) for row in models for i, m in enumerate(row)]
        reads = len(found)
    else:
        reads = 1
        rows = {r[key]: r for r in cv._rows(engine, query)}
        found = [cv._figures(rows.get(j, {"labelled": 0}), f"fold {j % folds} of {source.description}")
                 for j in range(len(models) * folds)]
    out = []
    for c in range(len(models)):
        per = found[c * folds:(c + 1) * folds]
        errors = [1.0 - f["accuracy"] for f in per]
        losses = [f["log_loss"] for f in per]
        out.append({"error": 1.0 - float(np.mean([f["accuracy"] for f in per])), "log_loss": float(np.mean(losses)),
                    "fold_error": errors, "fold_log_loss": losses})
    return out, reads


@sql.trees_collected_by_refcount
def select_features(
    data: Any,
    label: str,
    *,
    con: Any = None,
    direction: str = "forward",
    folds: int = 5,
    seed: int = 0,
    key: Sequence[str] | None = None,
    until_all: bool = False,
    refit: bool = True,
    model: str = "naive_bayes",
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    keep_columns: Sequence[str] | None = None,
    screen: bool = True,
    weight: str | None = None,
    **options: Any,
) -> Selection:
    """Choose naive Bayes features by cross-validated forward or backward selection.

    Parameters
    ----------
    data, label, con
        As for :func:`sqlnb.fit` (DuckDB).
    direction : {"forward", "backward"}
        Add features one at a time from none, or remove them one at a time from all.
    folds, seed, key
        The folds, as for :func:`sqlnb.cross_validate` (the same rows form the same folds).
    until_all : bool
        Walk the whole path and choose its best subset, instead of stopping at the first
        step that does not improve (module docstring).
    refit : bool
        Build the chosen subset's model on every row (``Selection.model``).
    model : str
        Only ``"naive_bayes"``.
    features, exclude, keep_columns, screen
        The candidate features, chosen as :func:`sqlnb.fit` chooses its features.
    weight : None
        Row weights are not supported (the folds' figures are unweighted).
    **options
        Every other argument of :func:`sqlnb.fit` for naive Bayes: ``kind``,
        ``feature_kinds``, ``binarize``, ``text`` and the hyperparameters (``alpha``,
        ``var_smoothing``, ``class_prior``, ...), applied to every subset.

    Returns
    -------
    Selection

    Examples
    --------
    >>> s = sqlnb.select_features("adult.parquet", "income", folds=10)   # doctest: +SKIP
    >>> s.features, s.path[s.chosen]["error"]                            # doctest: +SKIP
    """
    start = time.perf_counter()
    if model != "naive_bayes":
        raise SqlnbError(f"feature selection chooses the features of naive Bayes, not of {model!r}; "
                         "leave out --kind lda|qda|logistic")
    if direction not in DIRECTIONS:
        raise SqlnbError(f"unknown direction {direction!r}{suggest(direction, DIRECTIONS)}; "
                         f"choose {' or '.join(DIRECTIONS)}")
    if weight is not None:
        raise SqlnbError("feature selection does not support row weights (its folds' figures are unweighted); "
                         "leave out --weight")
    if mixture.members(options.get("structure")):
        raise SqlnbError(f"feature selection takes one structure, not the average {options['structure']!r}; select "
                         "with one of them, then fit the average on the features it keeps (--features)")
    if skdb.selective(options.get("structure")) or eskdb.ensemble(options.get("structure")):
        what = options["structure"].split(":")[0]
        raise SqlnbError(f"feature selection around {what}: {what} chooses its features itself (by leave-one-out over "
                         "the features ranked by I(X; C)" + (", in each member" if what == "eskdb" else "")
                         + "); fit it directly, or select around kdb:K")
    K = kdb.order_of(options.get("structure", "naive")) or 0
    engine = as_engine(con)
    if engine.dialect != "duckdb":
        raise SqlnbError(f"feature selection runs in DuckDB, not on {engine.dialect}; use --engine duckdb")
    source = engine.resolve(read_with(data, keep_text=(label,)))
    source.require([label], "label column")
    source, fold = cv.assign_folds(source, label, folds, seed, key, engine.dialect)
    if features is not None and exclude:
        raise SqlnbError("give either the features to use or the ones to exclude, not both")
    source.require(list(features or ()), "feature column")
    source.require(list(exclude or ()), "excluded column")
    table, copy, fold = cv.materialize(engine, source, label, fold, features, exclude)
    try:
        skip = None
        if features is None:  # the columns a fit would leave out, read from the copy
            text_is_categorical = options.get("kind", "auto") in ("auto", "categorical")
            screened = screen_plan(engine, copy, label, None, None, [fold.name], keep_columns, screen,
                                   numeric_only=not text_is_categorical, asked=list(options.get("feature_kinds") or {}),
                                   naive_bayes=[options])
            skip = [fold.name, *(s.column for s in screened)]
        plan = cv._naive_bayes_plan(engine, copy, label, fold, folds, features, skip, dict(options),
                                     pairs=tan.needs_pairs(options.get("structure")), orders=[K] if K > 1 else [])
        fold_models = [plan.fold_model(i, {}) for i in range(folds)]
        # kdb:2: the models share their statistics with the plan's, so the joint counts a
        # step's candidates need (one scan per step, grouped by fold) serve the refit too
        full_stats = plan.full_model({}) if K > 1 else None
        names = fold_models[0].feature_names
        reads, cache = {"scoring": 0}, {}

        def evaluate(subsets: list[list[str]]) -> list[dict]:
            if K > 1:  # the step's scans of joint counts (one; one per fold more with binned columns)
                reads["joints"] = reads.get("joints", 0) + kdb.add_subset_joints(
                    engine, copy, label, fold, fold_models, full_stats, subsets, K)
            figures, n = subset_figures(engine, copy, label, fold, fold_models, subsets, cache)
            reads["scoring"] += n
            # A step's SQL trees are reference cycles (a node points to its parent) and the
            # cyclic collector is paused for the whole search (sql.trees_collected_by_refcount):
            # free them after each step from the youngest generation, which holds just the
            # objects made since the last step. Kept to the end, they added up (adult, TAN,
            # MDL bins, backward: 2.7 GB at the last step; collected, 1.5 GB).
            gc.collect(0)
            return figures

        path, chosen, evaluated = search(evaluate, names, direction, until_all)
    finally:
        cv.drop_copy(engine, table)
    best = None
    if refit:
        full = plan.full_model({})
        best = full.select(path[chosen]["subset"])
        best.report = {**best.report, "source": source.description,
                       "seconds": round(time.perf_counter() - start, 3),  # the whole selection's
                       "selection": {"direction": direction, "folds": folds, "seed": seed,
                                     "step": path[chosen]["step"], "cv_error": path[chosen]["error"],
                                     "cv_log_loss": path[chosen]["log_loss"]}}
        if features is None and skip[1:]:
            best.report["screened"] = [s.to_dict() for s in screened]
    return Selection(direction, folds, seed, plan.fold_rows, names, path, chosen, best,
                     {"source": 1, "statistics": 1 + reads.get("joints", 0), "scoring": reads["scoring"]}, evaluated,
                     round(time.perf_counter() - start, 3))
