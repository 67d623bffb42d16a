"""ROC and precision–recall curves per class (one-vs-rest) and the reliability table, as
plain lists for plotting, computed in SQL.

One statement over the scoring SELECT groups the scored rows by class and distinct
one-vs-rest score and by calibration bin (the first steps of
:func:`~sqlnb.workflows.evaluate.metrics_query`, definitions in
:mod:`sqlnb.workflows.ranking`); only a row per distinct score and class, and per bin,
comes back — never a scored row. At a threshold, in decreasing score::

    fpr = fps / N     tpr = tps / P     precision = tps / (tps + fps)     recall = tps / P

as scikit-learn's ``roc_curve`` (with ``drop_intermediate=False``) and
``precision_recall_curve`` of ``y == c`` against the class's log-odds, the curves starting
at (fpr, tpr) = (0, 0) and (recall, precision) = (0, 1) as scikit-learn's do. A class
without positive rows has neither curve; one without negative rows has no ROC curve.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Any, Iterator

from sqlglot import exp

from sqlnb import sql
from sqlnb.workflows import ranking
from sqlnb.workflows.evaluate import ROWS, _from, metric_rows, over_scored, scoring_for_metrics


def curves_query(label: str, classes: list, label_type: str, scoring: exp.Select,
                 max_points: int | None = None) -> exp.Select:
    """Rows ``part, c, score, bin, n, pos, neg, tps, fps, pos_all, neg_all, conf, hits``:
    one per class and distinct score (``part`` = :data:`~sqlnb.workflows.ranking.SCORE`),
    in decreasing score, and one per calibration bin (:data:`~sqlnb.workflows.ranking.BIN`).

    With ``max_points``, each class keeps at most about that many score groups, evenly
    spaced in rank, and always its last (lowest) one, where the curves end."""
    K = len(classes)
    rows = metric_rows(label, classes, label_type)
    groups = (exp.select(exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True), *ranking.group_columns(K, None))
              .from_(sql.table(ROWS)).group_by(ranking.grouping_sets(K, [])))
    passed = ["part", "c", "score", "bin", "n", "conf", "hits"]
    ranked = exp.select(*[sql.col(c) for c in passed], *ranking.ranked_columns()).from_(_from(groups, "groups"))
    names = passed + ["pos", "neg", "tps", "fps", "pos_all", "neg_all"]
    on_score = exp.and_(exp.EQ(this=sql.col("part"), expression=exp.Literal.number(ranking.SCORE)),
                        exp.Not(this=exp.Is(this=sql.col("score"), expression=exp.null())))
    on_bin = exp.and_(exp.EQ(this=sql.col("part"), expression=exp.Literal.number(ranking.BIN)),
                      exp.Not(this=exp.Is(this=sql.col("bin"), expression=exp.null())))
    kept = exp.select(*[sql.col(c) for c in names]).from_(_from(ranked, "ranked")).where(exp.or_(on_score, on_bin))
    if max_points is not None:
        partition = [sql.col("part"), sql.col("c")]
        rank = exp.Window(this=exp.RowNumber(), partition_by=partition,
                          order=exp.Order(expressions=[exp.Ordered(this=sql.col("score"), desc=True)]))
        count = exp.Window(this=exp.Count(this=exp.Star()), partition_by=[p.copy() for p in partition])
        numbered = exp.select(*[sql.col(c) for c in names], exp.alias_(rank, "rn", quoted=True),
                              exp.alias_(count, "groups", quoted=True)).from_(_from(kept, "kept"))
        rn, g, m = sql.as_double(sql.col("rn")), sql.as_double(sql.col("groups")), sql.dbl(float(max_points))

        def step(r: exp.Expression) -> exp.Expression:  # floor(r · m / G): a new step keeps the row
            return exp.Floor(this=exp.Div(this=exp.Mul(this=r, expression=m.copy()), expression=g.copy()))
        keep = exp.or_(exp.EQ(this=sql.col("part"), expression=exp.Literal.number(ranking.BIN)),
                       exp.EQ(this=sql.col("rn"), expression=sql.col("groups")),
                       exp.GT(this=step(rn), expression=step(sql.paren(exp.Sub(this=rn.copy(), expression=sql.dbl(1.0))))))
        kept = exp.select(*[sql.col(c) for c in names]).from_(_from(numbered, "numbered")).where(keep)
    ordered = exp.select(*[sql.col(c) for c in names]).from_(_from(kept, "points")).order_by(
        sql.col("part"), sql.col("c"), exp.Ordered(this=sql.col("score"), desc=True))
    return over_scored(ordered, scoring, [(ROWS, rows)])


@sql.trees_collected_by_refcount
def curve_points(model, data: Any, con: Any = None, label: str | None = None,
                 max_points: int | None = None, scored: exp.Select | None = None) -> dict:
    """The ROC and precision–recall curves of every class (one-vs-rest) and the
    reliability table of ``model`` on labelled ``data``, aggregated in SQL.

    Parameters
    ----------
    model : Model
        Any sqlnb model.
    data : str, Table, Query, Files, Source, relation or Arrow table
        The rows to score, with the model's features and the label (as for
        :func:`~sqlnb.workflows.evaluate.evaluate`).
    con : duckdb connection or engine, optional
        Where the rows are scored and grouped (default: a new in-memory DuckDB).
    label : str, optional
        The label column (default: the model's label).
    max_points : int, optional
        Keep at most about this many thresholds per class (default: every distinct score;
        with continuous features that is about one per row).
    scored : SELECT, optional
        ``data``'s rows already scored (:func:`scored_once`).

    Returns
    -------
    dict
        ``{"classes": [...], "roc": {class: {"fpr": [...], "tpr": [...], "threshold": [...]}},
        "pr": {class: {"precision": [...], "recall": [...], "threshold": [...]}},
        "positives": {class: P}, "negatives": {class: N},
        "reliability": [{"bin", "lower", "upper", "rows", "confidence", "accuracy"}, ...],
        "bins": 15}``. Thresholds are the one-vs-rest log-odds (:mod:`~sqlnb.workflows.ranking`),
        decreasing; the first point of each curve has threshold ``inf``.

    Examples
    --------
    >>> from sqlnb.workflows.curves import curve_points
    >>> pts = curve_points(model, "test.parquet")                # doctest: +SKIP
    >>> pts["roc"]["yes"]["tpr"][:3]                             # doctest: +SKIP
    [0.0, 0.0113, 0.0227]
    """
    engine, label, scored = scoring_for_metrics(model, data, con, label, scored)
    classes = list(model.classes)
    query = curves_query(label, classes, model.label_type, scored, max_points)
    names = [e.alias_or_name for e in query.expressions]
    rows = [dict(zip(names, r)) for r in engine.execute(query)]
    inf = float("inf")
    roc: dict = {}
    pr: dict = {}
    positives, negatives = {}, {}
    for i, cls in enumerate(classes):
        groups = [r for r in rows if r["part"] == ranking.SCORE and r["c"] == i]
        P = float(groups[0]["pos_all"]) if groups else 0.0
        N = float(groups[0]["neg_all"]) if groups else 0.0
        positives[cls], negatives[cls] = int(P), int(N)
        tps = [float(r["tps"]) for r in groups]
        fps = [float(r["fps"]) for r in groups]
        thresholds = [inf] + [float(r["score"]) for r in groups]
        if P > 0 and N > 0:
            roc[cls] = {"fpr": [0.0] + [f / N for f in fps], "tpr": [0.0] + [t / P for t in tps],
                        "threshold": thresholds}
        if P > 0:
            pr[cls] = {"precision": [1.0] + [t / (t + f) for t, f in zip(tps, fps)],
                       "recall": [0.0] + [t / P for t in tps], "threshold": list(thresholds)}
    bins = [(r["bin"], r["n"], r["conf"], r["hits"]) for r in rows if r["part"] == ranking.BIN]
    return {"classes": classes, "roc": roc, "pr": pr, "positives": positives, "negatives": negatives,
            "reliability": ranking.reliability(bins), "bins": ranking.BINS}


@contextmanager
def scored_once(model, data: Any, con: Any, label: str | None = None) -> Iterator[exp.Select]:
    """``data`` scored once into a temporary DuckDB table (the outputs the metrics read and
    the label), for :func:`~sqlnb.workflows.evaluate.evaluate` and :func:`curve_points` to
    read both (their ``scored``): the same rows, in the same order (DuckDB keeps a table's
    insertion order), so the same figures, from one run of the scoring SELECT instead of two.

    Why: DuckDB plans and runs the SELECT of a big model once per statement and keeps what
    that took; AODE's on adult's 10,000 rows (~1 MB of SQL) then held ~60 MiB more for the
    curves' run, and ``sqlnb report`` peaked past 300 MB."""
    engine, label, scoring = scoring_for_metrics(model, data, con, label)
    table = sql.table(f"sqlnb_scored_{uuid.uuid4().hex}")
    engine.execute(exp.Create(this=table, kind="TABLE", expression=scoring,
                              properties=exp.Properties(expressions=[exp.TemporaryProperty()])))
    try:
        yield exp.select(exp.Star()).from_(table.copy())
    finally:
        engine.execute(exp.Drop(tables=[table.copy()], kind="TABLE", exists=True))
