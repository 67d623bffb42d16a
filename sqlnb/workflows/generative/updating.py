"""Update: new rows reduced to statistics and merged exactly, as the refit on all rows.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from dataclasses import replace
from typing import Any

import duckdb

from sqlnb.errors import SqlnbError, UpdateWarning, warn
from sqlnb.models.naive_bayes import kdb, skdb, weighted
from sqlnb.models.naive_bayes.families import Feature, is_numeric
from sqlnb.models.naive_bayes.families.categorical import unheld
from sqlnb.models.naive_bayes.fit import collect_statistics, cut_counts, recut, require_cut_counts
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.models.naive_bayes.text import bag_layout
from sqlnb.source import Source, read_with, relation_connection, resolve
from sqlnb.workflows.generative.common import _require_naive_bayes, _with_report
from sqlnb.workflows.generative.novelty import NOVELTY
from sqlnb.engines import as_engine
from sqlnb.engines.duckdb import new_connection


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


def _check_categories(model: NaiveBayes, features: list[Feature], batch, where: str) -> None:
    """Raise a one-line :class:`SqlnbError` when a categorical column of the batch, read
    as another type than the model's (``1.5`` makes a CSV column DOUBLE), holds a value
    the fitted type cannot hold exactly (:func:`~sqlnb.models.naive_bayes.families.
    categorical.unheld`): scoring reads it as unseen, and stored as a category it would
    print as another one. ``2.0`` in a BIGINT column is 2."""
    for fitted, f in zip(model.features, features):
        if fitted.kind == "categorical" and fitted.bag is None and f.sql_type.upper() != fitted.sql_type.upper():
            bad = unheld(batch.features[f.name].values, fitted.sql_type)
            if bad:
                raise SqlnbError(f"column {f.name!r} in {where} holds {bad[0]}, which is not a {fitted.sql_type} "
                                 f"value like the model's categories of it; fix the data, or fit a new model "
                                 f"(with the column read as {f.sql_type}) to count {bad[0]} as a category of its own")


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
    Binned columns: the per-(class, value) counts the model keeps merge too, and the cut
    points and per-bin counts are recomputed from them
    (:func:`~sqlnb.models.naive_bayes.fit.recut`), as the refit's; a tree-augmented model
    whose binned pair columns' cut points move, and a binned model stored without those
    counts, are refused (refit them). A ``kdb:2`` model's joint counts of each feature with
    its two parents add too; when the merged pair counts give a feature other parents,
    whose joint counts over the old rows were never gathered, the update is refused
    (:mod:`~sqlnb.models.naive_bayes.kdb`): refit.
    A decision rule, calibrator or novelty threshold the update cannot keep as it was is
    said as an :class:`~sqlnb.errors.UpdateWarning` (:func:`_carry_over`).

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
        on the old parameters: compute it again with :func:`novelty_threshold`), and so is
        a calibrator; a decision rule is kept, or extended to new classes (said).

    Examples
    --------
    >>> model = sqlnb.fit("january.parquet", label="y")                 # doctest: +SKIP
    >>> model = sqlnb.update(model, "february.parquet")                 # doctest: +SKIP
    >>> model = sqlnb.update(model, "march.parquet", decay=0.9)         # doctest: +SKIP
    """
    model = _require_naive_bayes(model, "update")
    _refuse_em_bins(model)
    require_cut_counts(model.features, model.stats)  # before reading anything
    con = con if con is not None else (relation_connection(data) or new_connection())
    start = time.perf_counter()
    source = resolve(read_with(data, model.column_types()), con)
    features = compatible_features(model, source)
    if model.weight is not None:
        source.require([model.weight], "weight column")
    # A tree-augmented model's pair counts add too (its tree is derived from them).
    pairs = list(model.stats.pairs.features) if model.stats.pairs is not None else False
    batch = collect_statistics(con, source, model.label, features, model.weight, min_classes=1, pairs=pairs)
    _check_categories(model, features, batch, source.description)
    if getattr(model.stats.pairs, "joints", None):  # kdb:K: the stored sets' joint counts add too
        batch.pairs = kdb.KdbPairs(list(batch.pairs.features), dict(batch.pairs.cells), kdb.collect_joints(
            con, source, model.label, model.weight, features, list(model.stats.pairs.joints), batch.classes))
    if getattr(model.stats.pairs, "patterns", None) is not None:  # skdb: the batch's rows as patterns add too
        batch = skdb.with_patterns(batch, features, lambda tree, shim: weighted.read_patterns(
            as_engine(con), source, model.label, model.weight, tree, shim))
    cut_classes, cuts = cut_counts(con, source, model.label, model.weight, features)
    batch.cuts = {name: vc.align(cut_classes, batch.classes) for name, vc in cuts.items()}
    merged = model.merge(batch, decay=decay)
    # Binned columns: the cut points of all rows, and their counts per bin, from the merged
    # value counts (the batch was binned with the old cut points, right only where they stay).
    feats, stats, _ = recut(con, model.features, merged.stats)
    updated = merged.rebuilt(feats, stats, merged.report)
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
    # Provenance: every batch the statistics hold, the fit first (what `show` lists).
    first = {"source": model.report.get("source"), "rows": model.report.get("rows"),
             "null_label_rows": model.report.get("null_label_rows", 0), "at": getattr(model, "created", None)}
    report["batches"] = [*(model.report.get("batches") or [first]),
                         {**report["last_update"], "at": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}]
    out = _with_report(updated, report)
    _carry_over(model, out)
    return out


def _refuse_em_bins(model: NaiveBayes) -> None:
    """A model fitted by EM (:func:`~sqlnb.workflows.generative.em.fit_em`) with binned
    columns keeps no value counts (its unlabelled rows count in its bins by their
    posteriors, with the labelled rows' cut points), so an update cannot recompute the
    cut points as a refit would: said in one line, before anything is read."""
    binned = [f.name for f in model.features if f.kind == "binned" and f.name not in model.stats.cuts]
    if binned and "em" in model.report:
        raise SqlnbError(f"binned column {binned[0]!r} of this model was cut at its labelled rows by EM (fit-em), "
                         "which keeps no value counts of the unlabelled rows, so an update cannot recompute its cut "
                         "points as a refit would; refit with sqlnb fit-em on all the rows instead")


def _carry_over(model: NaiveBayes, out: NaiveBayes) -> None:
    """What ``model`` stored besides its statistics, carried to the updated ``out`` where
    it still applies, and each change said as an :class:`~sqlnb.errors.UpdateWarning`
    (the CLI prints it on stderr): a decision rule is kept, or made for the new classes
    (:meth:`~sqlnb.models.decision.DecisionRule.for_classes`: a cost matrix extended, a
    two-class threshold dropped); a calibrator and a novelty threshold were fitted on the
    old parameters and are dropped."""
    rule = getattr(model, "decision", None)
    if rule is not None:
        out.decision, note = rule.for_classes(out.classes)
        if note is not None:
            warn(note, UpdateWarning)
    if getattr(model, "calibration", None) is not None:
        warn(f"the model's {model.calibration.method} calibrator was fitted on its old scores and is dropped; "
                      "fit it again with sqlnb calibrate", UpdateWarning)
    if getattr(model, "conformal", None) is not None:
        warn("the model's conformal sets were fitted on its old probabilities and are dropped; fit them "
                      "again with sqlnb conformal", UpdateWarning)
    if model.report.get(NOVELTY) is not None:
        warn("the model's novelty threshold was computed from its old parameters and is dropped; "
                      "compute it again with sqlnb novelty", UpdateWarning)
