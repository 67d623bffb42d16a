"""Semi-supervised EM (Nigam, McCallum, Thrun & Mitchell 2000): unlabelled rows enter the
statistics with their posterior class probabilities as weights.
"""

from __future__ import annotations

import math
import time
import uuid
from dataclasses import replace
from typing import Any, Mapping, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.finish import class_columns
from sqlnb.models.naive_bayes.families import REGISTRY
from sqlnb.models.naive_bayes.fit import collect_statistics, plan_features, resolve_edges
from sqlnb.models.naive_bayes.model import Hyperparameters, NaiveBayes
from sqlnb.source import Source, Table, read_with, resolve
from sqlnb.stats import Moments, Statistics
from sqlnb.workflows.generative.common import _require_likelihood, _with_report
from sqlnb.workflows.generative.updating import compatible_features
from sqlnb.engines.duckdb import new_connection


# -- semi-supervised EM ----------------------------------------------------------------------
def _filtered(source: Source, label: str, labelled: bool, columns: Sequence[str] | None = None) -> Source:
    """``source`` restricted to rows whose label is (not) NULL, as a query source."""
    is_null = exp.Is(this=sql.col(label, "src"), expression=exp.Null())
    cols = [sql.col(c, "src") for c in columns] if columns is not None else [exp.Star()]
    q = exp.select(*cols).from_(source.from_("src")).where(exp.Not(this=is_null) if labelled else is_null)
    kept = {c: source.columns[c] for c in (columns if columns is not None else source.columns)}
    what = "labelled" if labelled else "NULL-label"
    return Source(exp.Subquery(this=q), kept, f"the {what} rows of {source.description}")


def _scalar(con: duckdb.DuckDBPyConnection, tree: exp.Expression) -> Any:
    return con.execute(sql.render(tree)).fetchall()[0][0]


def _labelled_log_likelihood(con, model: NaiveBayes, source: Source) -> float:
    """``Σ_labelled ln p(x_i, y_i)``: each row's ``jll`` column of its own class, in SQL."""
    scored = exp.Subquery(this=model.scoring_query(source, ("jll",), keep=[model.label]),
                          alias=exp.TableAlias(this=sql.ident("s")))
    own = exp.Case(this=sql.col(model.label, "s"), ifs=[
        exp.If(this=sql.value(c, model.label_type), true=sql.col(name, "s"))
        for c, name in zip(model.classes, class_columns("jll_", model.classes))])
    return float(_scalar(con, exp.select(exp.Sum(this=own)).from_(scored)) or 0.0)


def _log_prior_penalty(model: NaiveBayes) -> float:
    """``Σ a · ln θ`` over every smoothed discrete parameter θ with pseudo-count ``a``.

    The smoothed estimates ``(N + a) / (N_total + n·a)`` are the maximisers of
    ``Σ N ln θ + Σ a ln θ`` — the posterior *mode* under a Dirichlet(a + 1) prior — so EM
    with them increases ``log-likelihood + penalty`` at every iteration (MAP-EM), while
    the log-likelihood alone may dip by about the size of the smoothing.
    """
    hp = model.hyper
    stats = model.stats
    total = 0.0
    for kind in ("categorical", "binned", "bernoulli", "multinomial"):
        group = [f for f in model.features if f.kind == kind]
        if not group:
            continue
        # The families' own estimates (token bags give one row of θ per vocabulary term).
        est = REGISTRY[kind].estimate(group, stats.features, stats.class_n, hp)
        for f in group:
            p = est[f.name]
            if kind in ("categorical", "binned"):  # binned: a categorical over its bins
                a = hp.pseudo(hp.alpha_for(f.name))
                if a:  # a = 0 (MLE) adds nothing, and 0 · ln 0 must not become NaN
                    total += a * float(np.sum(p[1])) + (a * float(np.sum(p[2])) if p[2] is not None else 0.0)
            elif kind == "bernoulli":
                b1, b0 = hp.beta_for(f.name)
                total += (b1 * float(np.sum(p[0])) if b1 else 0.0) + (b0 * float(np.sum(p[1])) if b0 else 0.0)
            else:
                a = hp.pseudo(hp.alpha_for(f.name))
                if a:
                    total += a * float(np.sum(p))
    if hp.class_prior == "dirichlet":
        a = hp.class_pseudo(model.classes)
        used = a != 0  # a_c = 0 adds nothing, and 0 · ln 0 must not become NaN
        total += float(np.sum(a[used] * model.class_log_prior()[used]))
    return total


def _as_row_moments(stats: Statistics, weight: float) -> Statistics:
    """EM's unlabelled statistics with their *unweighted* row moments replaced.

    Collected with weight ``λ·p(c|x)`` per (row, class), the unlabelled rows would
    count once per class in ``rows``, ``rows_mean``, ``rows_m2`` (and ``class_rows``).
    Here a row counts with its posterior ``p(c|x)`` instead — the weighted moments
    divided by λ — so over the classes each row counts once: the pooled moments, and
    with them the Gaussian variance floor ε, are those of the raw labelled + unlabelled
    rows, as in a fit on all of them, whatever λ and the posteriors.
    """
    feats = {}
    for name, s in stats.features.items():
        if isinstance(s, Moments):
            s = Moments(s.n, s.mean, s.m2, s.n / weight, s.mean.copy(), s.m2 / weight)
        feats[name] = s
    return Statistics(stats.classes, stats.class_n, stats.class_n / weight, feats, stats.null_label_rows)


def _unpivot(model: NaiveBayes, scored: Source, weight_name: str, unlabelled_weight: float) -> Source:
    """The scored unlabelled rows as weighted labelled rows: one per (row, class), with
    label = class and weight = λ · p(class | x) (0 for a row impossible under every class)."""
    branches = []
    features = model.feature_names
    to = exp.DataType.build(model.label_type, dialect="duckdb")
    for c, proba in zip(model.classes, model.proba_columns()):
        w = exp.Mul(this=exp.Coalesce(this=sql.col(proba, "src"), expressions=[sql.dbl(0.0)]),
                    expression=sql.dbl(unlabelled_weight))
        branches.append(exp.select(
            *[sql.col(f, "src") for f in features],
            exp.alias_(exp.Cast(this=sql.value(c, model.label_type), to=to.copy()), model.label, quoted=True),
            exp.alias_(w, weight_name, quoted=True),
        ).from_(scored.from_("src")))
    union = branches[0]
    for b in branches[1:]:
        union = exp.union(union, b, distinct=False)
    columns = {f: scored.columns[f] for f in features}
    columns.update({model.label: model.label_type, weight_name: "DOUBLE"})
    return Source(exp.Subquery(this=union), columns, "the unlabelled rows weighted by their posteriors")


def fit_em(
    labelled: Any,
    unlabelled: Any = None,
    *,
    label: str,
    con: duckdb.DuckDBPyConnection | None = None,
    max_iter: int = 50,
    tol: float = 1e-6,
    unlabelled_weight: float = 1.0,
    kind: str = "auto",
    feature_kinds: Mapping[str, str] | None = None,
    features: Sequence[str] | None = None,
    exclude: Sequence[str] | None = None,
    binarize: float | Mapping[str, float] = 0.0,
    bins: str | Mapping[Any, str] | None = None,
    **hyperparameters: Any,
) -> NaiveBayes:
    """Fit naive Bayes on labelled and unlabelled rows by EM (Nigam et al. 2000).

    1. Initialise from the labelled rows (``sqlnb.fit``).
    2. E-step, in SQL: score the unlabelled rows; their ``proba_<class>`` are the
       posteriors ``p(c | x)``. The scored rows are materialised once per iteration in a
       temporary table, dropped at the end.
    3. M-step: those rows, unpivoted into one row per (row, class) with label = class
       and weight ``λ·p(c | x)`` (a sqlglot UNION ALL query), are reduced to weighted
       statistics by the same aggregation as a weighted fit, and merged with the
       labelled statistics (labelled rows have weight 1). Their unweighted row moments
       count each unlabelled row once in total (see ``_as_row_moments``), so the
       Gaussian variance floor is that of a fit on all the raw rows.
    4. Repeat until the log-likelihood ``ℓ = Σ_labelled ln p(x, y) + λ Σ_unlabelled ln p(x)``
       (from the ``jll_<class>`` and ``log_evidence`` columns, in SQL) changes by at most
       ``tol`` per row: ``|ℓ_t − ℓ_{t−1}| ≤ tol · (n_labelled + λ·n_unlabelled)``.

    With pseudo-counts the M-step is MAP-EM: it never decreases ``ℓ + Σ a·ln θ`` (the
    ``objective`` trace; see ``_log_prior_penalty``), while ℓ itself may dip by about the
    size of the smoothing. Categories seen only in unlabelled rows become categories of
    the model at the first M-step (the initial model treats them as missing, so the
    first step is not covered by that guarantee).

    Parameters
    ----------
    labelled : str, Table, Query, Files, path, relation or Arrow table
        Rows with the label (rows where it is NULL are skipped, or are the unlabelled rows
        when ``unlabelled`` is None).
    unlabelled : same kinds, optional
        Rows with the feature columns (a label column there is ignored). Default: the
        rows of ``labelled`` whose label is NULL.
    label : str
        The label column of ``labelled``.
    con : duckdb connection, optional
        A connection that can see both sources (default: a new in-memory one).
    max_iter : int
        Most EM iterations (one M-step and one E-step each); 0 returns the labelled fit.
    tol : float
        Convergence threshold on the change of the mean log-likelihood per row.
    unlabelled_weight : float >= 0
        λ, the weight of an unlabelled row relative to a labelled one (Nigam et al.'s
        EM-λ); 0 ignores the unlabelled rows.
    kind, feature_kinds, features, exclude, binarize, bins, **hyperparameters
        As in :func:`sqlnb.fit` (row weights are not supported). The cut points of
        ``binned`` columns are those of :func:`sqlnb.fit` on the labelled rows (MDL needs
        their labels) and stay fixed while EM re-weights the unlabelled rows' bins.

    Returns
    -------
    NaiveBayes
        ``report["em"]`` holds ``iterations``, ``converged``, the traces
        ``log_likelihood`` and ``objective`` (initial model first), ``labelled_rows``,
        ``unlabelled_rows``, ``unlabelled_weight`` and ``unlabelled`` (the source).
    """
    if "weight" in hyperparameters:
        raise SqlnbError("fit_em does not take a weight column; fit without weight=")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 0:
        raise SqlnbError(f"max_iter must be an integer >= 0, not {max_iter!r}")
    if not (isinstance(tol, (int, float)) and math.isfinite(tol) and tol >= 0):
        raise SqlnbError(f"tol must be a finite number >= 0, not {tol!r}")
    lam = unlabelled_weight
    if not (isinstance(lam, (int, float)) and math.isfinite(lam) and lam >= 0):
        raise SqlnbError(f"unlabelled_weight must be a finite number >= 0, not {lam!r}")
    hyper = Hyperparameters(**hyperparameters)
    if hyper.structure != "naive":
        raise SqlnbError(f"EM fits naive Bayes only, not structure {hyper.structure!r}")
    con = con if con is not None else new_connection()
    start = time.perf_counter()
    source = resolve(read_with(labelled, keep_text=(label,)), con)
    feats = plan_features(source, label, None, kind, feature_kinds, features, exclude, binarize, bins=bins)
    feats = resolve_edges(con, source, label, feats)  # binned columns: cut at the labelled rows, as sqlnb.fit's
    _require_likelihood(feats, "fit_em")
    lab_stats = collect_statistics(con, source, label, feats)  # skips (and counts) NULL labels
    lab_source = _filtered(source, label, labelled=True)
    if unlabelled is None:
        unl_source = _filtered(source, label, labelled=False, columns=[f.name for f in feats])
        lab_stats = replace(lab_stats, null_label_rows=0)  # those rows are the unlabelled ones
    else:
        unl_source = resolve(read_with(unlabelled, {f.name: f.sql_type for f in feats}), con)
    report = {"source": source.description, "rows": lab_stats.n_rows, "null_label_rows": 0, "seconds": 0.0}
    model = NaiveBayes(label, source.columns[label], feats, lab_stats, hyper, report)
    compatible_features(model, unl_source, with_label=False)
    n_unl = int(_scalar(con, exp.select(exp.Count(this=exp.Star())).from_(unl_source.from_("src"))))
    if n_unl == 0:
        if unlabelled is None:  # the unlabelled rows were to be DATA's NULL-label rows
            raise SqlnbError(f"{source.description} has no rows with a NULL label to learn from as unlabelled rows; "
                             "give unlabelled rows (--unlabelled DATA2, unlabelled= in Python)")
        raise SqlnbError(f"{unl_source.description} has no rows; give unlabelled rows (a source, or NULL labels)")
    n_lab = lab_stats.n_rows

    weight_name = "__sqlnb_em_weight"
    while weight_name in unl_source.columns or weight_name == label:
        weight_name += "_"
    scored_name = f"sqlnb_em_{uuid.uuid4().hex[:12]}"
    scored_table = sql.table(scored_name)
    scale = n_lab + lam * n_unl
    trace: list[float] = []
    objective: list[float] = []
    converged = False
    iterations = 0
    try:
        for it in range(max_iter + 1):
            # E-step: posteriors and log evidence of every unlabelled row, stored once.
            con.execute(sql.render(exp.Create(
                this=scored_table.copy(), kind="TABLE", replace=True,
                expression=model.scoring_query(unl_source, ("log_evidence", "proba"), keep=model.feature_names),
                properties=exp.Properties(expressions=[exp.TemporaryProperty()]))))
            evidence = _scalar(con, exp.select(exp.Sum(this=sql.col("log_evidence"))).from_(scored_table.copy()))
            ll = _labelled_log_likelihood(con, model, lab_source) + lam * float(evidence or 0.0)
            trace.append(ll)
            objective.append(ll + _log_prior_penalty(model))
            if it > 0 and abs(trace[-1] - trace[-2]) <= tol * scale:
                converged = True
                break
            if it == max_iter or lam == 0:
                break
            # M-step: weighted statistics of the unpivoted rows, merged with the labelled ones.
            scored = resolve(Table(scored_name), con)
            em_rows = _unpivot(model, scored, weight_name, lam)
            em_feats = [replace(f, sql_type=scored.columns[f.name]) for f in feats]
            unl_stats = collect_statistics(con, em_rows, label, em_feats, weight_name, min_classes=1)
            model = NaiveBayes(label, model.label_type, feats,
                               lab_stats.merge(_as_row_moments(unl_stats, lam)), hyper, report)
            iterations = it + 1
    finally:
        con.execute(sql.render(exp.Drop(tables=[scored_table.copy()], kind="TABLE", exists=True)))
    report = dict(report)
    report.update({
        "rows": model.stats.n_rows,
        "null_label_rows": lab_stats.null_label_rows,
        "seconds": round(time.perf_counter() - start, 3),
        "em": {"labelled_rows": n_lab, "unlabelled_rows": n_unl, "unlabelled": unl_source.description,
               "unlabelled_weight": float(lam), "iterations": iterations, "converged": converged,
               "max_iter": max_iter, "tol": float(tol), "log_likelihood": trace, "objective": objective},
    })
    return _with_report(model, report)
