"""Novelty: a quantile of the training rows' ``log_evidence`` as a threshold, and the rows
the model finds less probable than it.
"""

from __future__ import annotations

from typing import Any, Sequence

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.source import Source, read_with, resolve
from sqlnb.workflows.generative.common import (_require_evidence, _require_joint, _require_likelihood,
                                               _require_naive_bayes, _with_report)
from sqlnb.engines.duckdb import new_connection

#: Key of the novelty threshold in ``model.report`` (saved with the model).
NOVELTY = "novelty"


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
    _require_joint(model, "a novelty threshold")
    _require_evidence(model, "a novelty threshold")
    _require_likelihood(model.features, "a novelty threshold")
    if not (isinstance(quantile, (int, float)) and 0 < quantile < 1):
        raise SqlnbError(f"the novelty quantile must be between 0 and 1 (exclusive), not {quantile!r}")
    con = con if con is not None else new_connection()
    source = resolve(read_with(data, model.read_types()), con)
    scored = exp.Subquery(this=model.scoring_query(source, ("log_evidence",), keep=[], calibrated=False),
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
    _require_joint(model, "novelty")
    _require_evidence(model, "novelty")
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
    # ln p(x) is the model's own: a calibrator's scores have another log-sum-exp, so novelty
    # scoring (probabilities included) leaves it out.
    inner = exp.Subquery(this=model.scoring_query(source, outputs, keep, calibrated=False),
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
    con = con if con is not None else new_connection()
    return con.sql(sql.render(novelty_query(model, resolve(read_with(data, model.read_types()), con), threshold, outputs, keep)))
