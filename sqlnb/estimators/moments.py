"""Gaussian naive Bayes on a numpy array: one aggregate (two when a variance needs it) to
fit, one lambda per row to score.

The same packed rows as :mod:`sqlnb.estimators.counts` (one ``DOUBLE[d]`` column over the
array's buffer, read through :mod:`sqlnb.estimators.packed`), for ``GaussianNB`` (no
``tied_variance``) on arrays without NaN and with at most :data:`data.SMALL_VALUES`
values (rows × columns): larger arrays keep the general path, whose one-pass aggregate
is faster there (1M × 20 beats scikit-learn).

* **fit** (:func:`fit`): the statistics :func:`sqlnb.fit` computes, in the way it
  computes them (:mod:`sqlnb.models.naive_bayes.fit`): per column a shift ``K``, the
  rounded mean of the first :data:`~sqlnb.models.naive_bayes.fit.SHIFT_ROWS` rows
  (:func:`~sqlnb.models.naive_bayes.fit.round_shift`), then per class and column
  ``COUNT, Σ(x − K), Σ(x − K)²`` in the long form (``… FROM rows, range(1, d + 1) AS
  t(j) GROUP BY y, j``, ``K`` bound as ``$k``), turned into mean and M2 by
  ``Gaussian._from_sums``; the columns whose M2 lost too many digits (digits' pixels
  constant in a class) get the exact second pass around the class means, ``Σ(x − θ_c)``,
  ``Σ(x − θ_c)²``, corrected as :func:`~sqlnb.models.naive_bayes.fit._exact_m2_pass`
  corrects them. The model is the :class:`~sqlnb.models.naive_bayes.model.NaiveBayes`
  :func:`sqlnb.fit` builds, so the variance floor, pickling, ``to_sql`` and
  ``partial_fit`` are unchanged.
* **score** (:func:`scores`): class ``k``'s score is ``$c[k] − Σ_j (x_j − θ_kj)² · h_kj``
  with ``c_k = ln π_k − ½ Σ_j ln(2π σ²_kj)`` and ``h = 1/(2σ²)`` (the general path's
  folded factor, families/gaussian.py): the exact square, not the expanded
  ``x²h − 2xθh + θ²h``, which cancels where a variance is the floor (digits: 2.8e-8 off
  scikit-learn). One lambda per row over the K classes (``list_transform($t, lambda th,
  i: …)``), parameters bound so the SQL is rendered once per shape, finished by
  :func:`sqlnb.models.finish.scoring_select`; up to :data:`packed.LISTED_ROWS` rows (past
  them a row's list of K scores costs more than the general path's columns).
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from sqlnb import sql
from sqlnb.estimators import data, packed
from sqlnb.models.finish import ClassScore, scoring_select
from sqlnb.models.naive_bayes.families import REGISTRY, Feature
from sqlnb.models.naive_bayes.fit import SHIFT_ROWS, round_shift
from sqlnb.models.naive_bayes.model import Hyperparameters, NaiveBayes
from sqlnb.stats import Moments, Statistics, _sort_key

GAUSSIAN = "gaussian"


def _values(table: pa.Table, width: int, rows: int) -> np.ndarray:
    """The first ``rows`` rows of the packed column as a (rows, width) array."""
    head = table.column(data.PACKED).slice(0, rows).combine_chunks().flatten()
    return head.to_numpy(zero_copy_only=False).astype(float, copy=False).reshape(-1, width)


def _shifted_text(width: int, value_type: str, label: str) -> str:
    """Per class and column ``COUNT(*), Σ(x[j] − $k[j]), Σ(x[j] − $k[j])²``."""
    j = sql.col("j", "t")
    x = exp.Bracket(this=packed.values(value_type, width), expressions=[j])  # 1-based as written
    d = sql.paren(exp.Sub(this=x, expression=exp.Bracket(this=exp.Placeholder(this="k"), expressions=[j.copy()])))
    cols = [sql.col(label, "src"), j.copy(), exp.Count(this=exp.Star()), exp.Sum(this=d.copy()),
            exp.Sum(this=exp.Mul(this=d.copy(), expression=d.copy()))]
    return packed.grouped_text(cols, label, packed.column_range(width))


def _second_text(width: int, value_type: str, label: str, label_type: str, classes: list) -> str:
    """Per class and listed column (``$j``) ``Σ(x[j] − θ_cj), Σ(x[j] − θ_cj)²``, the class
    means ``$m`` (one list per class) chosen by a CASE on the label."""
    j = sql.col("j", "t")
    x = exp.Bracket(this=packed.values(value_type, width), expressions=[j])
    index = exp.Case(this=sql.col(label, "src"), ifs=[exp.If(this=sql.value(c, label_type), true=exp.Literal.number(k))
                                                      for k, c in enumerate(classes)])  # sqlglot adds 1
    mean = exp.Bracket(this=exp.Bracket(this=exp.Placeholder(this="m"), expressions=[index]), expressions=[j.copy()])
    d = sql.paren(exp.Sub(this=x, expression=mean))
    cols = [sql.col(label, "src"), j.copy(), exp.Sum(this=d.copy()), exp.Sum(this=exp.Mul(this=d.copy(), expression=d.copy()))]
    return packed.grouped_text(cols, label, exp.Anonymous(this="unnest", expressions=[exp.Placeholder(this="j")]))


def _grid(rows: list[tuple], classes: list, width: int, cells: int) -> np.ndarray:
    """Long rows ``(class, j, v1 … v_cells)`` as a (classes, width, cells) array (0 where absent)."""
    at = {c: k for k, c in enumerate(classes)}
    out = np.zeros((len(classes), width, cells))
    for r in rows:
        out[at[r[0]], int(r[1]) - 1] = [float(v) if v is not None else 0.0 for v in r[2:]]
    return out


def fit(table: pa.Table, names: list[str], label: str, weight: str | None, hyper: dict) -> NaiveBayes | None:
    """The model :func:`sqlnb.fit` would fit on ``table`` with every feature Gaussian;
    None where the general path must run (weights, tied variance, NaN, a large array,
    a NULL label, fewer than two classes, a non-finite sum: it raises the error that
    names them)."""
    width = len(names)
    if (weight is not None or hyper.get("tied_variance") or not packed.plain(table)
            or table.num_rows * width > data.SMALL_VALUES or table.num_rows == 0):
        return None
    start = time.perf_counter()
    head = _values(table, width, min(SHIFT_ROWS, table.num_rows))
    with np.errstate(all="ignore"):
        shifts = [round_shift(m, s) for m, s in zip(head.mean(axis=0).tolist(), head.std(axis=0).tolist())]
    fam = REGISTRY[GAUSSIAN]
    with packed.registered_rows(table) as con:
        types = packed.column_types(con, table)
        value_type, label_type = types[0], types[1]
        text = packed.rendered(("gauss-fit", width, value_type, label), lambda: _shifted_text(width, value_type, label))
        rows = con.execute(text, {"k": shifts}).fetchall()
        labels = {r[0] for r in rows}
        if len(labels) < 2 or None in labels:  # the general path raises the error that names them
            return None
        classes = sorted(labels, key=_sort_key)
        sums = _grid(rows, classes, width, 3)
        if not np.all(np.isfinite(sums)):
            return None
        got, redo = [], []
        for j in range(width):
            n = sums[:, j, 0]
            mean, m2, inexact = fam._from_sums(n, sums[:, j, 1], sums[:, j, 2], shifts[j])
            got.append((n, mean, m2))
            if inexact:
                redo.append(j)
        if redo:  # the exact second pass around the class means (fit._exact_m2_pass)
            text = packed.rendered(("gauss-m2", width, value_type, label, label_type, tuple(classes)),
                                   lambda: _second_text(width, value_type, label, label_type, classes))
            means = np.column_stack([g[1] for g in got])  # (classes, width)
            second = _grid(con.execute(text, {"m": means.tolist(), "j": [j + 1 for j in redo]}).fetchall(),
                           classes, width, 2)
            for j in redo:
                n, mean, _ = got[j]
                s1, s2 = second[:, j, 0], second[:, j, 1]
                with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                    safe = np.where(n > 0, n, 1.0)
                    got[j] = (n, np.where(n > 0, mean + s1 / safe, mean),
                              np.where(n > 0, np.maximum(s2 - s1 * s1 / safe, 0.0), 0.0))
                if not np.all(np.isfinite(got[j][2])):
                    return None
    class_rows = sums[:, 0, 0].copy()
    feats = {n: Moments(g[0].copy(), g[1].copy(), g[2].copy(), g[0], g[1], g[2]) for n, g in zip(names, got)}
    features = [Feature(n, GAUSSIAN, value_type) for n in names]
    stats = Statistics(classes, class_rows.copy(), class_rows, feats, 0)
    return NaiveBayes(label, label_type, features, stats, Hyperparameters(**hyper),
                      packed.fit_report(stats.n_rows, start), None)


def _scorable(model: Any, names: list[str]) -> bool:
    """A naive Bayes model of Gaussian features only, in the array's column order, with
    nothing applied after its scores (:func:`packed.plain_naive_bayes`)."""
    return packed.plain_naive_bayes(model, names) and all(f.kind == GAUSSIAN for f in model.features)


def _score_text(width: int, n_classes: int, value_type: str, output: str) -> str:
    """The scoring SELECT over the packed rows: the prelude column holds, per row, the K
    scores ``$c[i] − list_dot_product([(x_j − θ_ij)²]_j, $h[i])`` (``$t`` the class means,
    one list per class)."""
    rows = packed.values(value_type, width)
    th, i, z = sql.ident("th"), sql.ident("i"), sql.ident("z")
    one = lambda e, n: exp.Bracket(this=e, expressions=[exp.Literal.number(n)])  # noqa: E731 (rendered 1-based)
    diff = sql.paren(exp.Sub(this=one(exp.Column(this=z.copy()), 0), expression=one(exp.Column(this=z.copy()), 1)))
    square = exp.Lambda(this=exp.Mul(this=diff, expression=diff.copy()), expressions=[z])
    squares = exp.Anonymous(this="list_transform", expressions=[
        exp.Anonymous(this="list_zip", expressions=[rows, exp.Column(this=th.copy())]), square])
    at = lambda p: exp.Bracket(this=exp.Placeholder(this=p), expressions=[exp.Column(this=i.copy())])  # noqa: E731
    body = exp.Sub(this=at("c"), expression=exp.Anonymous(this="list_dot_product", expressions=[squares, at("h")]))
    dots = exp.Anonymous(this="list_transform", expressions=[exp.Placeholder(this="t"),
                                                             exp.Lambda(this=body, expressions=[th, i])])
    scores = [ClassScore((exp.Bracket(this=sql.col(packed.DOTS, "src"), expressions=[exp.Literal.number(k)]),))
              for k in range(n_classes)]
    query = scoring_select(packed.source(), scores, list(range(n_classes)), "INTEGER", [], (output,), keep=[],
                           dialect="duckdb", prelude=[(packed.DOTS, dots)])
    return sql.render(query, "duckdb")


def scores(model: Any, table: pa.Table, names: list[str], output: str) -> np.ndarray | None:
    """Per row and class (the model's class order), ``output`` of a Gaussian ``model``
    over the packed rows; None when the general scoring SELECT must run."""
    if (not _scorable(model, names) or not packed.plain(table)
            or table.num_rows > packed.LISTED_ROWS):
        return None
    params = model.log_parameters()
    theta = np.column_stack([np.asarray(params[f.name][0], dtype=float) for f in model.features])
    var = np.column_stack([np.asarray(params[f.name][1], dtype=float) for f in model.features])
    with np.errstate(all="ignore"):
        half = 0.5 / var
        const = np.asarray(params["prior"], dtype=float) - 0.5 * np.log(2.0 * math.pi * var).sum(axis=1)
    if not (np.all(np.isfinite(half)) and np.all(np.isfinite(theta)) and np.all(np.isfinite(const))):
        return None  # a subnormal variance: the general path divides instead
    bound = {"t": theta.tolist(), "h": half.tolist(), "c": const.tolist()}
    key = ("gauss-score", len(names), len(theta), output)
    return packed.run_scores(table, key, lambda value_type: _score_text(len(names), len(theta), value_type, output),
                             bound)
