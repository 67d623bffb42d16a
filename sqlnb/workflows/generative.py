"""What only a generative model can do: update, novelty, sampling, semi-supervised EM.

A naive Bayes model is a joint model ``p(x, c) = π_c · Π_j p(x_j | c)`` kept as its
sufficient statistics (:mod:`sqlnb.stats`). That buys four things a discriminative
classifier cannot offer:

:func:`update`
    New rows are reduced to statistics by the same one-scan aggregation as
    :func:`sqlnb.fit` and merged exactly (counts add, Gaussian moments merge by Chan,
    Golub & LeVeque). The result equals the refit on the union of all batches, whatever
    the batches, including one-row batches and batches that bring a new class,
    category or token; optional exponential forgetting (``decay``).
:func:`novelty_threshold`, :func:`flag_novel`
    ``log_evidence = ln p(x) = ln Σ_c p(x, c)`` is an output of every scoring query. Rows
    the model finds unusually improbable are novel: the threshold is a quantile of the
    training rows' log evidence, computed in SQL and kept in the model's report.
:func:`sample`
    Synthetic rows drawn from the fitted joint distribution.
:func:`fit_em`
    Semi-supervised EM (Nigam, McCallum, Thrun & Mitchell 2000): unlabelled rows enter
    the statistics with their posterior class probabilities as weights.
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
from sqlnb.errors import SqlnbError, suggest
from sqlnb.models.naive_bayes.families import REGISTRY, Feature, is_numeric
from sqlnb.models.naive_bayes.fit import collect_statistics, plan_features
from sqlnb.models.naive_bayes.model import Hyperparameters, NaiveBayes
from sqlnb.models.finish import class_columns
from sqlnb.source import Source, Table, resolve
from sqlnb.stats import Moments, Statistics
from sqlnb.models.naive_bayes.text import bag_layout

#: Key of the novelty threshold in ``model.report`` (saved with the model).
NOVELTY = "novelty"


# -- shared checks ------------------------------------------------------------------------
def _require_naive_bayes(model: Any, what: str) -> NaiveBayes:
    if not isinstance(model, NaiveBayes):
        kind = getattr(model, "kind", type(model).__name__)
        raise SqlnbError(f"{what} needs a naive Bayes model, not a {kind!r} model")
    return model


def _require_likelihood(features: Sequence[Feature], what: str) -> None:
    """Complement naive Bayes scores are weights, not log-likelihoods: ``log_evidence``
    and an EM objective are meaningless for them."""
    comp = [f.name for f in features if f.kind == "complement"]
    if comp:
        raise SqlnbError(
            f"{what} needs a likelihood, but feature {comp[0]!r} is complement naive Bayes, whose "
            "score is not one; refit with kind multinomial for those columns"
        )


def _type_group(sql_type: str) -> str:
    """What a value of this SQL type compares as in Python: numbers (any width), booleans,
    text, or exactly this type."""
    t = sql_type.upper()
    if t == "BOOLEAN":
        return "boolean"
    if is_numeric(t):
        return "number"
    if t.startswith(("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR", "ENUM")):
        return "text"
    return t


def compatible_features(model: NaiveBayes, source: Source, with_label: bool = True) -> list[Feature]:
    """The model's features as found in ``source`` (same families, the source's SQL types).

    Raises a one-line :class:`SqlnbError` when a feature (or the label) is missing or
    has a type the model cannot take: a numeric family needs a number or a boolean, and a
    categorical feature (and the label) keep their kind of value — numbers, booleans,
    text, or exactly the fitted type — because their categories are stored as values.
    """
    where = source.description
    if with_label:
        source.require([model.label], "label column")
        t = source.columns[model.label]
        if _type_group(t) != _type_group(model.label_type):
            raise SqlnbError(
                f"label column {model.label!r} in {where} has type {t}, but the model's classes are "
                f"{model.label_type} values; cast it to {model.label_type}"
            )
    source.require(model.feature_names, "model feature column")
    out = []
    for f in model.features:
        t = source.columns[f.name]
        if f.bag is not None:  # a token bag: the same layout (text, list or map column)
            if f.bag["layout"] == "long":
                raise SqlnbError(f"{f.name!r} is a long token table (sqlnb.fit_long); updating or extending such "
                                 "a model is not supported: refit it with sqlnb.fit_long")
            if bag_layout(t) != f.bag["layout"]:
                raise SqlnbError(
                    f"column {f.name!r} in {where} has type {t}, but the model reads it as a token bag of type "
                    f"{f.sql_type}; cast it to {f.sql_type}")
        elif f.kind == "categorical":
            if _type_group(t) != _type_group(f.sql_type):
                raise SqlnbError(
                    f"column {f.name!r} in {where} has type {t}, but the model's categories of it are "
                    f"{f.sql_type} values; cast it to {f.sql_type}"
                )
        elif not (is_numeric(t) or t.upper() == "BOOLEAN"):
            raise SqlnbError(
                f"column {f.name!r} in {where} has type {t}, but the model treats it as a {f.kind} "
                f"feature of type {f.sql_type}; cast it to a number, or fit a new model"
            )
        out.append(replace(f, sql_type=t))
    return out


def _with_report(model: NaiveBayes, report: dict, stats: Statistics | None = None) -> NaiveBayes:
    return NaiveBayes(model.label, model.label_type, model.features, stats if stats is not None else model.stats,
                      model.hyper, report, model.weight)


# -- update ---------------------------------------------------------------------------------
def update(
    model: NaiveBayes,
    data: Any,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
    decay: float | None = None,
) -> NaiveBayes:
    """The model updated with new rows: exactly the refit on the union of all rows.

    The new rows are aggregated with the model's own features, families, binarisation
    thresholds, label and weight column (one scan, as in :func:`sqlnb.fit`) and the
    statistics merge (:meth:`Statistics.merge`): counts add, Gaussian ``n, mean, M2``
    merge by Chan, Golub & LeVeque, and classes, categories and tokens new to the model
    are added. A batch may hold a single class, or a single row. The Gaussian variance
    floor ``ε = var_smoothing · max_j var(x_j)`` is recomputed from the merged
    unweighted moments, so it is the floor of the refit over *all* rows — scikit-learn's
    ``partial_fit`` instead keeps the floor of the first batch (0 for a one-row batch).
    Token bags (text, LIST and MAP columns) gain the batch's new tokens; with vocabulary
    pruning (``min_df``, ``max_df``, ``max_features``, ``select_k``) each batch is pruned
    by itself, so the model keeps the union of the kept terms and is no longer the refit.
    Models fitted on a long token table (:func:`sqlnb.fit_long`) cannot be updated.

    Parameters
    ----------
    model : NaiveBayes
        The model to update (it is not changed).
    data : str, Table, Query, Files, path, relation or Arrow table
        The new rows; they need the label, every feature column (and the weight column
        if the model was fitted with one). Rows with a NULL label are skipped and counted.
    con : duckdb connection, optional
        A connection that can see ``data`` (default: a new in-memory one).
    decay : float in (0, 1], optional
        Exponential forgetting: the model's statistics are multiplied by ``decay`` before
        the merge. After batches ``B_0`` (the fit), ``B_1 … B_t`` updated with the same
        ``decay`` d, the model equals a weighted fit on their union in which a row of
        ``B_s`` has weight ``d^(t−s)`` (times its own weight). Counts, class counts and
        Gaussian ``n`` and ``M2`` shrink while means stay; the unweighted row moments that
        set the variance floor are decayed alike, and ``report["rows"]`` becomes the
        effective (decayed) number of rows. ``None`` or 1 keeps everything.

    Returns
    -------
    NaiveBayes
        A new model. ``report["updates"]`` counts the updates and ``report["last_update"]``
        describes the last one; a stored novelty threshold is dropped (it was calibrated
        on the old parameters: compute it again with :func:`novelty_threshold`).

    Examples
    --------
    >>> model = sqlnb.fit("january.parquet", label="y")                 # doctest: +SKIP
    >>> model = sqlnb.update(model, "february.parquet")                 # doctest: +SKIP
    >>> model = sqlnb.update(model, "march.parquet", decay=0.9)         # doctest: +SKIP
    """
    model = _require_naive_bayes(model, "update")
    con = con if con is not None else duckdb.connect()
    start = time.perf_counter()
    source = resolve(data, con)
    features = compatible_features(model, source)
    if model.weight is not None:
        source.require([model.weight], "weight column")
    batch = collect_statistics(con, source, model.label, features, model.weight, min_classes=1)
    updated = model.merge(batch, decay=decay)
    report = dict(updated.report)
    report.pop(NOVELTY, None)
    report["updates"] = int(model.report.get("updates", 0)) + 1
    report["last_update"] = {
        "source": source.description,
        "rows": batch.n_rows,
        "null_label_rows": batch.null_label_rows,
        "decay": decay,
        "seconds": round(time.perf_counter() - start, 3),
    }
    return _with_report(updated, report)


# -- novelty --------------------------------------------------------------------------------
def novelty_threshold(
    model: NaiveBayes,
    data: Any,
    quantile: float = 0.01,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
) -> NaiveBayes:
    """Calibrate a novelty threshold: a quantile of ``log_evidence`` over ``data``.

    ``log_evidence = ln p(x) = ln Σ_c π_c p(x | c)`` is how probable the model finds a
    row's features, whatever its class. Over the training rows (``data``), its
    ``quantile`` — computed in SQL with ``QUANTILE_CONT`` (linear interpolation) — is the
    threshold below which :func:`flag_novel` calls a row novel, so about a fraction
    ``quantile`` of rows like the training rows are flagged.

    Things to know: ``ln p(x)`` of Gaussian features is a log *density* (it depends on
    their units), so the threshold belongs to this model only. A NULL feature adds no
    term, so rows with missing values look more typical. With the default
    ``unseen="missing"`` an unseen category adds no term either — fit with
    ``unseen="bucket"`` so that unseen categories lower the evidence. Multinomial scores
    omit the multinomial coefficient and model no document length, so long documents
    have lower evidence.

    Parameters
    ----------
    model : NaiveBayes
    data : str, Table, Query, Files, path, relation or Arrow table
        The reference rows, usually the training rows (labels are not needed).
    quantile : float in (0, 1)
        The fraction of reference rows to call novel.
    con : duckdb connection, optional

    Returns
    -------
    NaiveBayes
        The same model with ``report["novelty"] = {"quantile", "threshold", "rows",
        "source"}``; it is saved with the model.
    """
    model = _require_naive_bayes(model, "a novelty threshold")
    _require_likelihood(model.features, "a novelty threshold")
    if not (isinstance(quantile, (int, float)) and 0 < quantile < 1):
        raise SqlnbError(f"the novelty quantile must be between 0 and 1 (exclusive), not {quantile!r}")
    con = con if con is not None else duckdb.connect()
    source = resolve(data, con)
    scored = exp.Subquery(this=model.scoring_query(source, ("log_evidence",), keep=[]),
                          alias=exp.TableAlias(this=sql.ident("s")))
    ev = sql.col("log_evidence", "s")
    q = exp.select(exp.func("quantile_cont", ev, sql.dbl(float(quantile))),
                   exp.Count(this=exp.Star())).from_(scored)
    threshold, rows = con.execute(sql.render(q)).fetchall()[0]
    if not rows:
        raise SqlnbError(f"{source.description} has no rows to calibrate a novelty threshold on")
    report = dict(model.report)
    report[NOVELTY] = {"quantile": float(quantile), "threshold": float(threshold), "rows": int(rows),
                       "source": source.description}
    return _with_report(model, report)


def novelty_query(
    model: NaiveBayes,
    source: Source,
    threshold: float | None = None,
    outputs: Sequence[str] = ("log_evidence", "prediction"),
    keep: Sequence[str] | None = None,
) -> exp.Select:
    """The scoring SELECT (see :meth:`Model.scoring_query`) plus a BOOLEAN ``novel``
    column: ``log_evidence < threshold`` (default: the model's calibrated threshold)."""
    model = _require_naive_bayes(model, "novelty")
    _require_likelihood(model.features, "novelty")
    if threshold is None:
        stored = model.report.get(NOVELTY)
        if not stored:
            raise SqlnbError("the model has no novelty threshold; calibrate one with "
                             "sqlnb.novelty_threshold(model, training_data) or give threshold=")
        threshold = stored["threshold"]
    passthrough = list(keep) if keep is not None else list(source.columns)
    if "novel" in {c.lower() for c in passthrough}:
        raise SqlnbError("the source already has a column named 'novel', which novelty scoring adds; "
                         "rename it or leave it out of the kept columns")
    outputs = list(outputs) + ([] if "log_evidence" in outputs else ["log_evidence"])
    inner = exp.Subquery(this=model.scoring_query(source, outputs, keep),
                         alias=exp.TableAlias(this=sql.ident("s")))
    novel = exp.LT(this=sql.col("log_evidence", "s"), expression=sql.dbl(float(threshold)))
    return exp.select(exp.Column(this=exp.Star(), table=sql.ident("s")),
                      exp.alias_(novel, "novel", quoted=True)).from_(inner)


def flag_novel(
    model: NaiveBayes,
    data: Any,
    *,
    con: duckdb.DuckDBPyConnection | None = None,
    threshold: float | None = None,
    outputs: Sequence[str] = ("log_evidence", "prediction"),
    keep: Sequence[str] | None = None,
) -> duckdb.DuckDBPyRelation:
    """Score ``data`` and flag novel rows.

    Returns the lazy relation of :meth:`Model.score` (source columns or ``keep``, the
    ``outputs``, always ``log_evidence``) plus ``novel``: true when ``log_evidence`` is
    below the threshold of :func:`novelty_threshold` (or the ``threshold`` given).
    """
    con = con if con is not None else duckdb.connect()
    return con.sql(sql.render(novelty_query(model, resolve(data, con), threshold, outputs, keep)))


# -- sampling -------------------------------------------------------------------------------
def _sampling_prior(model: NaiveBayes, classes: Any) -> np.ndarray:
    """Class probabilities to draw from: the model's prior, or it restricted to ``classes``
    (renormalised; uniform over them when the prior gives them no mass)."""
    prior = np.exp(model.class_log_prior())
    prior = prior / prior.sum()
    if classes is None:
        return prior
    wanted = list(classes) if isinstance(classes, (list, tuple, set, frozenset)) else [classes]
    names = [str(k) for k in model.classes]
    idx = []
    for c in wanted:
        if c in model.classes:
            idx.append(model.classes.index(c))
        elif str(c) in names:  # a label as typed on a command line: "1" for the class 1
            idx.append(names.index(str(c)))
        else:
            raise SqlnbError(f"class {c!r} is not one of the model's classes{suggest(str(c), names)}; "
                             f"its classes are: {', '.join(names)}")
    p = np.zeros(len(prior))
    p[idx] = prior[idx]
    if p.sum() <= 0:
        p[idx] = 1.0
    return p / p.sum()


def _presence_values(threshold: float) -> tuple[float, float]:
    """The (present, absent) values a sampled Bernoulli feature takes: 1.0 and 0.0, or
    ``t + 1`` and ``t`` when the threshold ``t`` is outside [0, 1)."""
    present = 1.0 if 1.0 > threshold else threshold + 1.0
    absent = 0.0 if 0.0 <= threshold else threshold
    return present, absent


def sample(model: NaiveBayes, n: int, *, classes: Any = None, seed: int | None = None):
    """Draw ``n`` synthetic rows from the fitted joint distribution ``p(x, c)``.

    Each row's class comes from the class prior (the one the model scores with) or, with
    ``classes``, from the prior restricted to them; then every feature is drawn given the
    class, independently, from its family with the parameters the model scores with:

    * gaussian: ``N(θ_c, var_c)`` with the floored variance ``var_c = M2/n + ε``.
    * bernoulli: present with probability ``θ_c`` (the smoothed estimate); the value is
      1.0 or 0.0 (BOOLEAN columns: true/false; thresholds outside [0, 1): ``t + 1``/``t``).
    * categorical: value ``v`` with probability ``exp(flp_j[c, v])``, renormalised over
      the training values (with ``unseen="bucket"`` the unseen slot is not drawn).
    * multinomial: a document length ``L ~ Poisson(λ_c)``, where ``λ_c`` is the class's
      mean total count per row (``Σ_j N_cj / N_c``; all classes pooled for a class
      without rows), then counts ``~ Multinomial(L, p_c)`` with the smoothed
      ``p_cj = exp(flp_cj)`` over all multinomial columns.
    * complement: the same as multinomial, with ``p_cj = (N_cj + α_j) / Σ_j' (N_cj' + α_j')``
      from the complement columns' counts (their weights are not probabilities).

    Missing values are not drawn (the model has no parameters for missingness), and
    numeric features are DOUBLE. ``sqlnb.fit(table, label, feature_kinds={...})`` with
    the model's kinds recovers the parameters as ``n`` grows.

    Parameters
    ----------
    model : NaiveBayes
    n : int
        Number of rows.
    classes : label or list of labels, optional
        Draw only these classes (in proportion to their prior). A label may also be given
        as its text (``"1"`` for the class ``1``), as on a command line.
    seed : int, optional
        Seed of ``numpy.random.default_rng``: the same seed gives the same rows.

    Returns
    -------
    pyarrow.Table
        The feature columns in the model's order, then the label column.
    """
    import pyarrow as pa

    model = _require_naive_bayes(model, "sampling")
    bags = [f.name for f in model.features if f.bag is not None]
    if bags:
        raise SqlnbError(f"sampling token bags is not supported ({bags[0]!r} is one); "
                         "sample a model without text, LIST or MAP features")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise SqlnbError(f"the number of rows to sample must be an integer >= 0, not {n!r}")
    n = int(n)
    rng = np.random.default_rng(seed)
    K = len(model.classes)
    k = rng.choice(K, size=n, p=_sampling_prior(model, classes))
    params = model.log_parameters()
    stats = model.stats
    columns: dict[str, Any] = {}
    drawn_groups: set[str] = set()
    for f in model.features:
        if f.kind == "gaussian":
            mean, var = params[f.name]
            columns[f.name] = pa.array(mean[k] + np.sqrt(var[k]) * rng.standard_normal(n), pa.float64())
        elif f.kind == "bernoulli":
            flp, _ = params[f.name]
            present = rng.random(n) < np.exp(flp)[k]
            if f.sql_type.upper() == "BOOLEAN":
                columns[f.name] = pa.array(present, pa.bool_())
            else:
                hi, lo = _presence_values(f.threshold)
                columns[f.name] = pa.array(np.where(present, hi, lo), pa.float64())
        elif f.kind == "categorical":
            values, flp, _ = params[f.name]
            columns[f.name] = _draw_categorical(rng, k, values, flp)
        elif f.kind not in drawn_groups:  # multinomial / complement: all columns at once
            drawn_groups.add(f.kind)
            group = [g for g in model.features if g.kind == f.kind]
            counts = _draw_counts(rng, k, group, stats, model.hyper)
            for j, g in enumerate(group):
                columns[g.name] = pa.array(counts[:, j], pa.float64())
    ordered = {f.name: columns[f.name] for f in model.features}
    ordered[model.label] = pa.array(list(model.classes)).take(pa.array(k, pa.int64()))
    return pa.table(ordered)


def _draw_categorical(rng: np.random.Generator, k: np.ndarray, values: list, flp: np.ndarray):
    import pyarrow as pa

    if not values:  # a column that was NULL in every training row
        return pa.nulls(len(k))
    p = np.exp(flp)
    cdf = np.cumsum(p / p.sum(axis=1, keepdims=True), axis=1)
    u = rng.random(len(k))
    idx = np.empty(len(k), dtype=np.int64)
    for c in range(cdf.shape[0]):
        rows = k == c
        # Inverse CDF: the first value whose cumulative probability exceeds u.
        idx[rows] = np.minimum(np.searchsorted(cdf[c], u[rows], side="right"), len(values) - 1)
    return pa.array(values).take(pa.array(idx))


def _draw_counts(rng, k, group: list[Feature], stats: Statistics, hyper: Hyperparameters) -> np.ndarray:
    """Counts of one multinomial (or complement) group: L ~ Poisson(λ_c), then
    Multinomial(L, p_c) — see :func:`sample`."""
    flp = REGISTRY["multinomial"].estimate(group, stats.features, stats.class_n, hyper)
    p = np.exp(np.stack([flp[g.name] for g in group], axis=1))
    p = p / p.sum(axis=1, keepdims=True)
    totals = np.sum([stats.features[g.name].total for g in group], axis=0)
    n_c = stats.class_n
    pooled = totals.sum() / n_c.sum() if n_c.sum() > 0 else 0.0
    with np.errstate(invalid="ignore", divide="ignore"):
        lam = np.where(n_c > 0, totals / np.where(n_c > 0, n_c, 1.0), pooled)
    length = rng.poisson(lam[k])
    out = np.zeros((len(k), len(group)))
    for c in range(len(n_c)):
        rows = k == c
        if rows.any():
            out[rows] = rng.multinomial(length[rows], p[c])
    return out


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
    for kind in ("categorical", "bernoulli", "multinomial"):
        group = [f for f in model.features if f.kind == kind]
        if not group:
            continue
        # The families' own estimates (token bags give one row of θ per vocabulary term).
        est = REGISTRY[kind].estimate(group, stats.features, stats.class_n, hp)
        for f in group:
            p = est[f.name]
            if kind == "categorical":
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
        a = hp.pseudo(hp.prior_alpha)
        if a:
            total += a * float(np.sum(model.class_log_prior()))
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
    kind, feature_kinds, features, exclude, binarize, **hyperparameters
        As in :func:`sqlnb.fit` (row weights are not supported).

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
    con = con if con is not None else duckdb.connect()
    start = time.perf_counter()
    source = resolve(labelled, con)
    feats = plan_features(source, label, None, kind, feature_kinds, features, exclude, binarize)
    _require_likelihood(feats, "fit_em")
    lab_stats = collect_statistics(con, source, label, feats)  # skips (and counts) NULL labels
    lab_source = _filtered(source, label, labelled=True)
    if unlabelled is None:
        unl_source = _filtered(source, label, labelled=False, columns=[f.name for f in feats])
        lab_stats = replace(lab_stats, null_label_rows=0)  # those rows are the unlabelled ones
    else:
        unl_source = resolve(unlabelled, con)
    report = {"source": source.description, "rows": lab_stats.n_rows, "null_label_rows": 0, "seconds": 0.0}
    model = NaiveBayes(label, source.columns[label], feats, lab_stats, hyper, report)
    compatible_features(model, unl_source, with_label=False)
    n_unl = int(_scalar(con, exp.select(exp.Count(this=exp.Star())).from_(unl_source.from_("src"))))
    if n_unl == 0:
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
