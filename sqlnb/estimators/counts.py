"""Count and Bernoulli models on a numpy array: one aggregate to fit, one dot product per class to score.

A numeric numpy ``X`` reaches DuckDB as one ``DOUBLE[d]`` column over its own buffer
(:func:`sqlnb.estimators.data.array_to_arrow`: no copy for a C-ordered array, one
row-major copy for another). For a model whose every feature is a multinomial or
complement count, or a Bernoulli presence with one threshold (``MultinomialNB``,
``ComplementNB``, ``BernoulliNB``, a ``MixedNB`` of one such kind), the estimators read
that column as it is, without the view that names each feature
(:class:`sqlnb.estimators.data.registered`):

* **fit** (:func:`fit`): ``SELECT y, COUNT(*)[, SUM(w)], SUM(x[1]), …, SUM(x[d]) FROM rows
  GROUP BY y`` (Bernoulli: ``COUNT_IF(x[j] > t)``) — the sums :func:`sqlnb.fit` collects
  for these families (the ``COUNT(x)`` beside each sum is the class's row count or
  weight, as no value is missing: arrays with NaN take the general path). The
  statistics become the same
  :class:`~sqlnb.models.naive_bayes.model.NaiveBayes` :func:`sqlnb.fit` builds (same
  features, statistics, hyperparameters; tests compare them), so its tables, pickling,
  ``to_sql`` and ``partial_fit`` are unchanged. :func:`sqlnb.fit` would first resolve the
  input, plan and type its features and run the one-pass aggregate of four aggregates per
  column (its NULL and negative-count checks, which a finite array already passed).
* **score** (:func:`scores`): class ``c``'s score is ``ln π_c + list_dot_product(x, w_c)``
  (no prior for complement weights, as in scikit-learn; Bernoulli: ``x`` the presence
  list, ``w_c = ln p_c − ln(1 − p_c)`` and ``Σ_j ln(1 − p_cj)`` added to the prior, as
  scikit-learn's ``BernoulliNB`` computes it), finished by
  :func:`sqlnb.models.finish.scoring_select`, the max-shifted log-sum-exp every model
  shares. The weights and priors are bound parameters (``$w``, ``$p``), so the SELECT's
  text depends only on the shape (columns, classes, value type, output, Bernoulli
  threshold): it is
  built and rendered once per shape and reused by every model of that shape, where
  :meth:`Model.scoring_query` writes each weight as a literal for each fitted model
  (digits, 64 columns × 10 classes: the sqlglot build was a third of fit + predict_proba).

What this path shares with GaussianNB's (:mod:`sqlnb.estimators.moments`): registering
the rows, the SQL pieces over them, the per-shape cache of rendered SQL and the sizes
past which a query takes its other form, is :mod:`sqlnb.estimators.packed`.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from sqlnb import sql
from sqlnb.estimators import data, packed
from sqlnb.models.finish import ClassScore, scoring_select
from sqlnb.models.naive_bayes.families import Feature
from sqlnb.models.naive_bayes.model import Hyperparameters, NaiveBayes
from sqlnb.stats import Statistics, Sums, _sort_key

#: The families read here: every feature's class term is ``x_j · w_cj`` (counts), or
#: ``ln(1 − p_cj) + [x_j > t]·(ln p_cj − ln(1 − p_cj))`` (Bernoulli, one threshold t).
COUNTS, BERNOULLI = ("multinomial", "complement"), "bernoulli"
KINDS = (*COUNTS, BERNOULLI)


def _fit_text(width: int, value_type: str, label: str, weight: str | None, long: bool,
              threshold: float | None = None) -> str:
    """The class sums :func:`sqlnb.fit` collects for count columns (``wsum``), from the
    packed rows: ``SELECT y, COUNT(*)[, SUM(w)], SUM(x[1]), …, SUM(x[d]) … GROUP BY y``
    (weighted: ``SUM(w · x[j])``; with a Bernoulli ``threshold``, the (weighted) count of
    ``x[j] > t``, ``wcount``), or with ``long``, one row per class and column
    (``… FROM rows, range(1, d + 1) AS t(j) GROUP BY y, j``: the same sums, four
    expressions whatever ``d``; DuckDB binds each expression at a fixed cost, which
    digits' 64 sums made 10 ms of a 3 ms scan, while the long form's rows cost more
    than that past :data:`packed.LONG_VALUES` values)."""
    rows = packed.values(value_type, width)
    w = sql.as_double(sql.col(weight, "src")) if weight else None
    head = [sql.col(label, "src"), exp.Count(this=exp.Star())] + ([exp.Sum(this=w.copy())] if w is not None else [])

    def total(x: exp.Expression) -> exp.Expression:
        if threshold is not None:
            present = exp.GT(this=x, expression=sql.dbl(threshold))
            if w is None:
                return exp.CountIf(this=present)
            return exp.Sum(this=exp.Case(ifs=[exp.If(this=present, true=w.copy())], default=sql.dbl(0.0)))
        return exp.Sum(this=x if w is None else exp.Mul(this=w.copy(), expression=x))

    if long:
        j = sql.col("j", "t")
        cols = [*head, j.copy(), total(exp.Bracket(this=rows, expressions=[j]))]  # a column index: 1-based as written
        return packed.grouped_text(cols, label, packed.column_range(width))
    cols = head + [total(exp.Bracket(this=rows.copy(), expressions=[exp.Literal.number(j)]))  # rendered 1-based
                   for j in range(width)]
    return packed.grouped_text(cols, label)


def _class_rows(rows: list[tuple], width: int, weight: str | None, long: bool) -> list[tuple]:
    """The rows of :func:`_fit_text` as ``(class, rows, [weight,] sum_1 … sum_d)`` per class."""
    if not long:
        return rows
    off = 3 if weight else 2
    by: dict[Any, list] = {}
    for r in rows:
        cells = by.setdefault(r[0], [r[0], *r[1:off], *[None] * width])
        cells[off + int(r[off]) - 1] = r[off + 1]
    return [tuple(c) for c in by.values()]


def fit(table: pa.Table, names: list[str], label: str, weight: str | None, kind: str, hyper: dict,
        threshold: float = 0.0) -> NaiveBayes | None:
    """The model :func:`sqlnb.fit` would fit on ``table`` (packed rows, label, weight)
    with every feature of family ``kind`` (``threshold``: its ``binarize``), from one
    aggregate; None where the general path must run (a NULL value or label, fewer than
    two classes, an infinite sum: it raises the error that names them)."""
    if kind not in KINDS or not packed.plain(table):
        return None
    presence = float(threshold) if kind == BERNOULLI else None
    start = time.perf_counter()
    with packed.registered_rows(table) as con:
        types = packed.column_types(con, table)
        value_type, label_type = types[0], types[1]
        long = table.num_rows * len(names) <= packed.LONG_VALUES
        text = packed.rendered(("fit", len(names), value_type, label, weight, long, presence),
                               lambda: _fit_text(len(names), value_type, label, weight, long, presence))
        rows = _class_rows(con.execute(text).fetchall(), len(names), weight, long)
    if len(rows) < 2 or any(r[0] is None for r in rows):
        return None
    rows.sort(key=lambda r: _sort_key(r[0]))
    off = 3 if weight else 2
    sums = np.array([r[off:] for r in rows], dtype=float)
    if not np.all(np.isfinite(sums)):
        return None
    class_rows = np.array([float(r[1]) for r in rows])
    class_n = np.array([float(r[2]) for r in rows]) if weight else class_rows.copy()
    # N_c (rows where x_j is a value, weighted) is the class's rows or weight: none is missing.
    features = [Feature(n, kind, value_type, float(threshold)) for n in names]
    stats = Statistics([r[0] for r in rows], class_n, class_rows,
                       {n: Sums(class_n.copy(), sums[:, j].copy()) for j, n in enumerate(names)}, 0)
    return NaiveBayes(label, label_type, features, stats, Hyperparameters(**hyper),
                      packed.fit_report(stats.n_rows, start), weight)


def _scorable(model: Any, names: list[str]) -> bool:
    """A naive Bayes model of count features only, in the array's column order, with
    nothing applied after its scores (calibration, conformal sets, a decision rule) and
    finite weights (an infinite one needs the per-term ``x > 0`` test)."""
    if not packed.plain_naive_bayes(model, names):
        return False
    feats = model.features
    if not (all(f.kind in COUNTS for f in feats) or (all(f.kind == BERNOULLI for f in feats)
                                                      and len({f.threshold for f in feats}) == 1)):
        return False
    params = model.log_parameters()
    return all(np.all(np.isfinite(np.asarray(params[f.name], dtype=float))) for f in feats)


def _coefficients(model: NaiveBayes) -> tuple[np.ndarray, np.ndarray | None, float | None]:
    """(weights (K, d), log-priors (K,) or None, Bernoulli threshold or None): class
    ``k``'s score is ``priors[k] + x · weights[k]``, ``x`` the counts or the presence
    indicators. Bernoulli as scikit-learn's ``BernoulliNB``: weights ``ln p − ln(1 − p)``,
    and ``Σ_j ln(1 − p_cj)`` added to the prior."""
    params = model.log_parameters()
    feats = model.features
    prior = np.asarray(params["prior"], dtype=float) if model.uses_prior() else None
    if feats[0].kind != BERNOULLI:
        return np.column_stack([np.asarray(params[f.name], dtype=float) for f in feats]), prior, None
    flp, neg = (np.column_stack([np.asarray(params[f.name][i], dtype=float) for f in feats]) for i in (0, 1))
    return flp - neg, prior + neg.sum(axis=1), feats[0].threshold


def _score_text(width: int, n_classes: int, value_type: str, prior: bool, output: str, listed: bool,
                threshold: float | None = None) -> str:
    """The scoring SELECT of a count model of this shape over the packed rows, its
    weights ``$w`` (``DOUBLE[][]``, one list per class) and log-priors ``$p``
    (``DOUBLE[]``) bound at run time. The class columns are named by position: the
    caller reads them in order.

    Class ``k``'s score is ``$p[k] + list_dot_product(x, $w[k])``; with ``listed``, the K
    dot products are one lambda in the prelude (``list_transform($w, lambda w:
    list_dot_product(x, w))``, a list per row) and each class score reads its element.
    DuckDB binds each expression of a SELECT at a fixed cost, and the lambda's per-row
    list costs more to run: digits' 10 dot products took 3.3 ms against 1.9 ms as one
    lambda (10 rows, load 9), while 1M rows x 3 classes took 109 ms of CPU against
    195 ms (load 9): :data:`packed.LISTED_ROWS`."""
    rows = packed.values(value_type, width) if threshold is None else sql.col(data.PACKED, "src")
    # Bound as DOUBLE[][] and DOUBLE[] (Python floats): a CAST of either cost DuckDB more
    # to bind than the dot products cost to run on digits.
    weights, priors = exp.Placeholder(this="w"), exp.Placeholder(this="p")
    prelude = []
    if listed:
        w = sql.ident("w")
        dot = exp.Lambda(this=exp.Anonymous(this="list_dot_product", expressions=[rows, exp.Column(this=w.copy())]),
                         expressions=[w])
        prelude.append((packed.DOTS, exp.Anonymous(this="list_transform", expressions=[weights, dot])))
    scores = []
    for k in range(n_classes):
        index = [exp.Literal.number(k)]  # rendered 1-based in DuckDB
        terms = [exp.Bracket(this=sql.col(packed.DOTS, "src"), expressions=index) if listed else
                 exp.Anonymous(this="list_dot_product", expressions=[
                     rows.copy(), exp.Bracket(this=weights.copy(), expressions=[e.copy() for e in index])])]
        if prior:
            terms.insert(0, exp.Bracket(this=priors.copy(), expressions=[e.copy() for e in index]))
        scores.append(ClassScore(tuple(terms)))
    query = scoring_select(packed.source(threshold, value_type, width), scores, list(range(n_classes)), "INTEGER", [],
                           (output,), keep=[], dialect="duckdb", prelude=prelude)
    return sql.render(query, "duckdb")


def scores(model: Any, table: pa.Table, names: list[str], output: str) -> np.ndarray | None:
    """Per row and class (the model's class order), ``output`` (``"proba"`` or
    ``"log_proba"``) of ``model`` over the packed rows of ``table``; None when the
    model or the rows need the general scoring SELECT (:func:`_scorable`, a NULL value)."""
    if not _scorable(model, names) or not packed.plain(table):
        return None
    weights, priors, threshold = _coefficients(model)
    prior = priors is not None
    bound = {"w": weights.tolist()}
    if prior:
        bound["p"] = priors.tolist()
    listed = table.num_rows <= packed.LISTED_ROWS
    key = ("score", len(names), len(weights), prior, output, listed, threshold)
    return packed.run_scores(table, key, lambda value_type: _score_text(len(names), len(weights), value_type, prior,
                                                                       output, listed, threshold), bound)
