"""Binned naive Bayes: a numeric column discretised by stored cut points, then modelled
like a categorical column over its bins.

The cut points ``e_1 < … < e_{B−1}`` are computed once at fit
(:mod:`sqlnb.models.naive_bayes.binning`: equal-frequency quantiles or Fayyad & Irani's
MDL splits) and stored with the feature (:attr:`Feature.edges`). Bin ``b`` holds::

    bin 0        x < e_1
    bin b        e_b <= x < e_{b+1}
    bin B−1      e_{B−1} <= x

so a value outside the training range falls in the first or last bin, and NULL (or NaN
when scored) is in no bin: it contributes no term, as everywhere else. The statistics are
per (class, bin) counts, a :class:`~sqlnb.stats.Counts` over the bin numbers ``0 … B−1``
(every bin listed, also one no training row fell in), exactly the categorical family's
statistics, and the log-probabilities are the categorical ones::

    flp[c, b] = ln(N_cb + α) − ln(N_c + α·B)

The training scan counts each bin with one ``COUNT_IF(e_b <= x AND x < e_{b+1})`` per
class (weighted: ``SUM(CASE WHEN … THEN w END)``), portable to every engine and needing no
``histogram()``; the score term is one ``CASE`` chain over the cut points, so scoring is
the same single SELECT in DuckDB, SQLite, PostgreSQL and Spark.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.stats import Counts
from sqlnb.models.naive_bayes.families.base import Family, is_float, wcount, wcount_present
from sqlnb.models.naive_bayes.families.categorical import Categorical


def _edges(feature) -> tuple:
    if feature.edges is None:
        raise SqlnbError(f"binned column {feature.name!r} has no cut points yet; fit it with sqlnb.fit "
                         "(bins=...) or `sqlnb fit --bins`, which compute them from the data first")
    return feature.edges


def bin_label(edges: tuple, b: int) -> str:
    """Bin ``b`` of the cut points ``edges`` as text: ``< e_1``, ``[e_b, e_{b+1})``, ``>= e_{B−1}``."""
    if not edges:
        return "any value"
    if b == 0:
        return f"< {edges[0]:.6g}"
    if b == len(edges):
        return f">= {edges[-1]:.6g}"
    return f"[{edges[b - 1]:.6g}, {edges[b]:.6g})"


class Binned(Family):
    name = "binned"

    def bin_conditions(self, feature, x: exp.Expression) -> list[exp.Expression]:
        """Per bin, the condition on a non-NULL ``x`` that puts it there."""
        edges = _edges(feature)
        if not edges:
            return [exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))]
        out = [exp.LT(this=x.copy(), expression=sql.dbl(edges[0]))]
        for lo, hi in zip(edges[:-1], edges[1:]):
            out.append(exp.and_(exp.GTE(this=x.copy(), expression=sql.dbl(lo)),
                                exp.LT(this=x.copy(), expression=sql.dbl(hi))))
        out.append(exp.GTE(this=x.copy(), expression=sql.dbl(edges[-1])))
        return out

    def bin_index(self, feature, scoring: bool = True) -> exp.Expression:
        """The row's bin number ``0 … B−1`` as an expression over ``src`` (NULL for NULL,
        and for NaN when ``scoring``): the discrete value other models (a tree over
        features, a wrapper selection) group by, with the same cut points as the scores."""
        x = self.value(feature, scoring)
        return self._chain(feature, x, [exp.Literal.number(b) for b in range(len(_edges(feature)) + 1)], exp.Null())

    def counted_index(self, feature) -> exp.Expression:
        """:meth:`bin_index` (scoring) without a CASE, for DuckDB's scoring SELECT:
        ``(x >= e_1)::INT + … + (x >= e_{B−1})::INT``, the number of cut points at or
        below x (NULL for NULL), plus ``NULLIF(isnan(x), true)::INT`` (0, NULL for NaN)
        for a floating column. The same bin for every value; a fifth of the chain's size
        (each WHEN of which repeats the NaN-guarded x), and DuckDB's common-subexpression
        pass shares it between every term that reads it (it never enters a CASE)."""
        edges = _edges(feature)
        if not edges:
            return self.bin_index(feature, scoring=True)
        x = self.value(feature)
        int_type = exp.DataType.build("INTEGER")
        parts = [exp.Cast(this=exp.GTE(this=x.copy(), expression=sql.dbl(e)), to=int_type.copy()) for e in edges]
        if is_float(feature.sql_type):
            parts.append(exp.Cast(this=exp.Nullif(this=sql.is_nan(x.copy()), expression=exp.true()), to=int_type))
        return sql.paren(sql.add(parts))

    def _chain(self, feature, x, outcomes, missing) -> exp.Expression:
        # CASE WHEN x IS NULL THEN <missing> WHEN x < e_1 THEN o_0 … ELSE o_{B−1}: the
        # ascending tests make each WHEN one comparison.
        edges = _edges(feature)
        ifs = [exp.If(this=exp.Is(this=x.copy(), expression=exp.Null()), true=missing)]
        ifs += [exp.If(this=exp.LT(this=x.copy(), expression=sql.dbl(e)), true=o) for e, o in zip(edges, outcomes)]
        return exp.Case(ifs=ifs, default=outcomes[-1])

    def aggregates(self, feature, weight):
        x = self.value(feature)
        aggs = [wcount(weight, cond) if len(_edges(feature)) else wcount_present(weight, x)
                for cond in self.bin_conditions(feature, x)]
        if is_float(feature.sql_type):  # NaN / inf detection, for free from a sum
            aggs.append(exp.Sum(this=sql.as_double(sql.col(feature.name, "src"))))
        return aggs

    def collect(self, feature, rows, classes, where):
        B = len(_edges(feature)) + 1
        if is_float(feature.sql_type):
            for c, r in zip(classes, rows):
                if r[B] is not None and not math.isfinite(float(r[B])):
                    raise SqlnbError(f"column {feature.name!r} in {where} holds NaN or infinite values "
                                     f"(class {c!r}); replace them with NULL to treat them as missing")
        counts = np.array([[float(v or 0) for v in r[:B]] for r in rows], dtype=float).reshape(len(rows), B)
        return Counts(list(range(B)), counts)

    def estimate(self, features, stats, class_n, hp):
        # The categorical estimate over the bins; every value has a bin, so no slot for
        # unseen values whatever ``unseen`` says.
        return Categorical.estimate(self, features, stats, class_n, replace(hp, unseen="missing"))

    def term(self, feature, params, k):
        _, flp, _ = params
        x = self.value(feature, scoring=True)
        return self._chain(feature, x, [sql.dbl(float(v)) for v in flp[k]], sql.dbl(0.0))
