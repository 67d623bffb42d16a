"""What every distribution family provides, and the numerics they share.

A family turns one feature column into (1) SQL aggregates evaluated per class in the
training scan, (2) sufficient statistics collected from their results, (3) per-class
log-parameters derived from those statistics under the model's hyperparameters, and
(4) a per-class score term — a sqlglot expression that is 0 when the value is NULL, so
missing values are marginalised.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.sql.types import FLOAT_TYPES, NUMERIC_TYPES, is_float, is_numeric  # noqa: F401 (re-exported)

@dataclass(frozen=True)
class Feature:
    """One model feature: a source column and the family that models it.

    Attributes
    ----------
    name : str
        Column name in the source.
    kind : str
        Family name (``gaussian``, ``bernoulli``, ``multinomial``, ``complement``,
        ``categorical``).
    sql_type : str
        DuckDB type of the column at fit time.
    threshold : float
        Bernoulli binarisation threshold: a value counts as present when ``x > threshold``.
    bag : dict, optional
        For a token bag (text, LIST, MAP column or long token table): its layout and
        tokenizer options (see :mod:`sqlnb.models.naive_bayes.text`); None for an ordinary column.
    source_type : bool
        ``sql_type`` is the type the running engine sees in the scored source (scoring only,
        never stored): a DOUBLE column is then read as it is, without a cast (20 Gaussian
        columns x 3 classes: 120 casts fewer in Spark's SQL to parse and analyse).
    bins : str, optional
        A ``binned`` feature's discretisation: ``"mdl"`` or ``"quantile:K"``
        (:mod:`sqlnb.models.naive_bayes.binning`).
    edges : tuple of float, optional
        A ``binned`` feature's cut points, ascending, computed at fit and stored with the
        model: bin ``b`` holds ``edges[b-1] <= x < edges[b]`` (the first and last bins are
        open-ended).
    """

    name: str
    kind: str
    sql_type: str
    threshold: float = 0.0
    bag: Any = field(default=None, hash=False, compare=False)
    source_type: bool = field(default=False, compare=False, repr=False)
    bins: str | None = None
    edges: tuple | None = None

    def __post_init__(self):
        if self.edges is not None:  # read back from stored metadata as a JSON list
            object.__setattr__(self, "edges", tuple(float(e) for e in self.edges))

    def to_dict(self) -> dict:
        d = {"name": self.name, "kind": self.kind, "sql_type": self.sql_type,
             "threshold": self.threshold}
        if self.bag is not None:
            d["bag"] = dict(self.bag)
        if self.bins is not None:
            d["bins"] = self.bins
            d["edges"] = None if self.edges is None else list(self.edges)
        return d


class Family:
    """Interface of a distribution family (see the module docstring)."""

    name: str = ""

    def check_type(self, feature: Feature, where: str) -> None:
        if not is_numeric(feature.sql_type) and feature.sql_type.upper() != "BOOLEAN":
            raise SqlnbError(
                f"column {feature.name!r} in {where} has type {feature.sql_type}, but kind "
                f"{self.name!r} needs a numeric column; give it --feature-kind "
                f"{feature.name}=categorical or cast it"
            )

    def value(self, feature: Feature, scoring: bool = False) -> exp.Expression:
        """The column as a DOUBLE expression over the source alias ``src``.

        At fit the raw value is aggregated, so NaN and ±inf propagate into the sums and
        are reported. When scoring, NaN counts as missing (DuckDB sorts NaN above every
        number and ``NaN > 0`` is true, so it must never reach a score): ``CASE WHEN
        isnan(x) THEN NULL ELSE x END`` (:func:`sqlnb.sql.nan_as_null`; ``NULLIF(x, 'NaN')``
        is folded away by DuckDB over Parquet files written by pyarrow).
        """
        x = sql.col(feature.name, "src")
        if not (feature.source_type and feature.sql_type.upper() == "DOUBLE"):
            x = sql.as_double(x, feature.sql_type)
        if scoring and is_float(feature.sql_type):
            x = sql.nan_as_null(x)
        return x

    def aggregates(self, feature: Feature, weight: exp.Expression | None) -> list[exp.Expression]:
        raise NotImplementedError

    def collect(self, feature: Feature, rows: Sequence[Sequence[Any]], classes: list, where: str):
        raise NotImplementedError

    def estimate(self, features: list[Feature], stats: dict, class_n: np.ndarray, hp) -> dict:
        raise NotImplementedError

    def term(self, feature: Feature, params: Any, k: int) -> exp.Expression:
        raise NotImplementedError


def wcount(weight: exp.Expression | None, cond: exp.Expression) -> exp.Expression:
    """Weighted count of rows meeting ``cond``: ``COUNT_IF(cond)`` (rendered as
    ``SUM(CASE WHEN cond THEN 1 ELSE 0 END)`` where a dialect lacks it) or ``SUM(CASE WHEN
    cond THEN w END)``.

    Not ``COUNT(*) FILTER (WHERE cond)``, which means the same: DuckDB evaluates a
    FILTER clause as a separate selection per aggregate, 8x the cost of the bare scan
    (20 Bernoulli columns at 10M rows: ``COUNT(*) FILTER (WHERE x > 0)`` 1.30 s,
    ``COUNT_IF(x > 0)`` 0.17 s, ``SUM(x)`` 0.18 s; benchmarks/README.md).
    """
    if weight is None:
        return exp.CountIf(this=cond)
    return exp.Sum(this=exp.Case(ifs=[exp.If(this=cond, true=weight.copy())]))


def wcount_present(weight: exp.Expression | None, x: exp.Expression) -> exp.Expression:
    """Weighted count of rows where ``x`` is not NULL: ``COUNT(x)``, or ``SUM(CASE WHEN x
    IS NOT NULL THEN w END)``. ``COUNT(x)`` is the same number as ``COUNT(*) FILTER (WHERE
    x IS NOT NULL)`` and DuckDB computes it about 5x faster (0.78 s against 4.16 s over 20
    columns at 10M rows): the filter evaluates the cast twice per row."""
    if weight is None:
        return exp.Count(this=x)
    return wcount(weight, exp.Not(this=exp.Is(this=x, expression=exp.Null())))


def wsum(weight: exp.Expression | None, x: exp.Expression) -> exp.Expression:
    """``SUM(x)`` or ``SUM(w * x)``."""
    return exp.Sum(this=x if weight is None else exp.Mul(this=weight.copy(), expression=sql.paren(x)))


def log_ratio(num: np.ndarray, den: np.ndarray, what: str) -> np.ndarray:
    """``ln(num) − ln(den)`` for probabilities given as pseudo-counted ratios.

    A zero numerator is a zero probability: −inf, whatever the denominator (a class with
    no rows under MLE has 0/0, and no value is possible there). A negative numerator can
    only come from a MAP estimate with α < 1 on a zero count, which has no mode inside
    the simplex: that is reported, not turned into NaN.
    """
    num = np.asarray(num, dtype=float)
    den = np.asarray(den, dtype=float)
    if np.any(num < 0) or np.any(den < 0):
        raise SqlnbError(
            f"estimator 'map' with alpha < 1 has no mode for {what} (a count is zero); "
            "use alpha >= 1 or the posterior-mean estimator"
        )
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.log(num) - np.log(den)
    return np.where(num == 0, -np.inf, out)


def stacked(features: Sequence[Feature], stats: dict, hp) -> tuple[np.ndarray, np.ndarray, list]:
    """Per-class totals of ``features`` side by side, for the families whose features form
    one distribution (multinomial, complement): one column per ordinary feature and one per
    vocabulary term of a token bag (``Bag.total``, 2-D).

    Returns the (K, m) totals, the (m,) pseudo-counts under ``hp`` and, per
    feature, its column (an int) or columns (a slice, for a bag).
    """
    blocks, alphas, where, j = [], [], [], 0
    for f in features:
        t = np.asarray(stats[f.name].total, dtype=float)
        width = 1 if t.ndim == 1 else t.shape[1]
        blocks.append(t.reshape(len(t), width))
        alphas.append(np.full(width, hp.pseudo(hp.alpha_for(f.name))))
        where.append(j if t.ndim == 1 else slice(j, j + width))
        j += width
    return np.concatenate(blocks, axis=1), np.concatenate(alphas), where


def times(x: exp.Expression, coef: float) -> exp.Expression:
    """``x · coef`` that is 0 (not NaN) for x = 0 or NULL when ``coef`` is infinite.

    ``0 · −inf`` is NaN in SQL as in IEEE arithmetic; an infinite log-probability only
    matters for rows where the feature is present (x > 0).
    """
    if np.isfinite(coef):
        return exp.Coalesce(this=exp.Mul(this=x, expression=sql.dbl(coef)), expressions=[sql.dbl(0.0)])
    return exp.Case(ifs=[exp.If(this=exp.GT(this=x, expression=sql.dbl(0.0)), true=sql.dbl(coef))],
                    default=sql.dbl(0.0))
