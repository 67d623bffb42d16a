"""Gaussian naive Bayes: a normal density per class and feature.

::

    ε        = var_smoothing · max_j VAR_POP(x_j)      all training rows, unweighted
    θ_cj     = Σ w x / Σ w
    var_cj   = Σ w (x − θ_cj)² / Σ w + ε                population variance
    term_cj  = −½ ln(2π·var_cj) − ½ (x − θ_cj)² / var_cj

With ``tied_variance`` every class shares one variance per feature, the pooled
within-class variance (the diagonal of LDA's tied covariance, seed 003's "covariance
matrices tied or shared across classes")::

    var_j    = Σ_c Σ w (x − θ_cj)² / Σ_c Σ w + ε       = Σ_c M2_cj / Σ_c n_cj + ε

so in a class log-odds term_aj − term_bj the ``x²/(2 var_j)`` parts cancel and it is
linear in x: ``x (θ_aj − θ_bj)/var_j − (θ_aj² − θ_bj²)/(2 var_j)``.

The ``(x − θ)²/var`` form is kept on purpose: expanding it into ``a·x² + b·x + c``
cancels badly when |x| ≫ σ. A class in which a feature is always NULL has no estimate
of its own; it uses the feature's pooled (all-class) mean and variance, so the feature
neither favours nor penalises that class beyond what the data says.
"""

from __future__ import annotations

import math

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.sql.types import is_float
from sqlnb.stats import Moments
from sqlnb.models.naive_bayes.families.base import Family, wcount, wsum


def floor_lifter(features, stats, var_smoothing: float) -> tuple[str, float, float, list[tuple[str, float]]] | None:
    """The Gaussian column that lifts the variance floor above other columns' own
    variances, or None.

    The floor ``ε = var_smoothing · max_j VAR_POP(x_j)`` is added to every class variance
    of every Gaussian column. When one column's variance is more than 1/var_smoothing
    times another's (an identifier in the hundreds of thousands beside measurements in
    units: 5.3e11 measured on one such table, ε ≈ 527), ε exceeds that other column's variance
    over all training rows, so its class densities are flattened towards one and the
    column barely counts. That is scikit-learn's definition, so the model keeps it; fit
    says so (:func:`sqlnb.api.fit`).

    Returns
    -------
    (column, its variance, ε, [(other column, its variance), ...] in increasing variance)
        The column of the largest variance and the columns (of a positive variance:
        a constant is flat anyway) whose variance is below ε.
    """
    gaussian = [f.name for f in features if f.kind == "gaussian"]
    variances = {}
    for name in gaussian:
        n, _, m2 = stats[name].pooled()
        variances[name] = m2 / n if n > 0 else 0.0
    finite = {k: v for k, v in variances.items() if math.isfinite(v)}
    if len(finite) < 2 or var_smoothing <= 0:
        return None
    top = max(finite, key=lambda k: (finite[k], k))
    eps = var_smoothing * finite[top]
    below = sorted(((k, v) for k, v in finite.items() if k != top and 0 < v < eps), key=lambda kv: (kv[1], kv[0]))
    return (top, finite[top], eps, below) if below else None


def _two_product(a, b):
    """``a·b`` as ``(p, e)`` with ``p + e`` exactly the product (Dekker; Veltkamp's
    split, no fused multiply-add): exact unless a factor is beyond ~1e292."""
    def split(x):
        c = 134217729.0 * x  # 2^27 + 1
        hi = c - (c - x)
        return hi, x - hi
    p = a * b
    ah, al = split(a)
    bh, bl = split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def _two_sum(a, b):
    """``a + b`` as ``(s, e)`` with ``s + e`` exactly the sum (Knuth)."""
    s = a + b
    v = s - a
    return s, (a - (s - v)) + (b - v)


def sum_of_squares(s2, s1, n):
    """``S2 − S1²/n`` (M2 from the sums of ``d`` and ``d²``) rounded once: ``S1²/n``
    is carried as a double-double, so the subtraction's cancellation adds no rounding of
    its own. When the sums are exact (integer data, say) M2 is then the double nearest
    the exact value whatever the shift, K = 0 included; otherwise the sums' own rounding
    is what remains. Where a step overflows (sums near 1e300) the plain formula is kept:
    those columns are redone by the exact second pass (:meth:`Gaussian.collect_shifted`)."""
    plain = s2 - s1 * s1 / n
    with np.errstate(all="ignore"):
        p, pe = _two_product(s1, s1)
        q1 = p / n
        h, he = _two_product(q1, n)
        q2 = (((p - h) - he) + pe) / n  # p + pe − q1·n, divided by n
        s, se = _two_sum(s2, -q1)
        fine = s + (se - q2)
    return np.where(np.isfinite(fine), fine, plain)


class Gaussian(Family):
    name = "gaussian"

    def aggregates(self, feature, weight):
        """``COUNT(x), AVG(x), VAR_POP(x)`` (weighted: also ``Σw``, ``Σwx``; M2 then needs
        a second pass): the portable one-pass form :mod:`sqlnb.workflows.export` writes for other
        warehouses. sqlnb's own fits use :meth:`shifted_aggregates`."""
        x = self.value(feature)
        aggs = [exp.Count(this=x), exp.Avg(this=x.copy()), exp.VariancePop(this=x.copy())]
        if weight is not None:
            aggs += [wcount(weight, exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))),
                     wsum(weight, x.copy())]
        return aggs

    def second_pass(self, feature, weight, mean: exp.Expression) -> list[exp.Expression]:
        """``Σ w (x − θ_c)``, ``Σ w (x − θ_c)²`` around given class means (``w`` = 1 when
        ``weight`` is None): the corrected two-pass algorithm (Chan, Golub & LeVeque
        1983). The first sum, zero in exact arithmetic, corrects the rounding of θ_c."""
        d = sql.paren(exp.Sub(this=self.value(feature), expression=mean))
        return [wsum(weight, d), wsum(weight, exp.Mul(this=d.copy(), expression=d.copy()))]

    # -- the in-engine fast path: sums about a shift ------------------------------------------
    #
    # VAR_POP is Welford's update (a division per value) and costs about 1.8× a bare
    # scan; plain sums of d = x − K and d² cost ~1.4× (benchmarks/README.md). With
    # S1 = Σd, S2 = Σd², the class statistics are
    #
    #     θ = K + S1/n,     M2 = S2 − S1²/n = Σ(x − θ)²,
    #
    # and the subtraction loses about log10(S2/M2) = log10(1 + n(θ − K)²/M2) digits. K is
    # the mean of the column's first rows (fit.gaussian_shifts), so S2/M2 is 1 + (class
    # mean offset / class σ)², a few units on ordinary data. When it exceeds
    # EXACT_BELOW (more than two digits lost, a column constant in a class, a shift far
    # from the data), fit.py recomputes M2 exactly with a second pass of those columns
    # around the class means — what VAR_POP would have given, at the price of one scan.
    EXACT_BELOW = 100.0

    def shifted_aggregates(self, feature, weight, shift: float) -> list[exp.Expression]:
        """``COUNT(x), SUM(d), SUM(d·d)`` with ``d = x − shift`` (and the same weighted by
        ``w``, after the unweighted ones: scikit-learn's variance floor uses unweighted
        variances)."""
        x = self.value(feature)
        d = x if shift == 0.0 else sql.paren(exp.Sub(this=x, expression=sql.dbl(shift)))
        aggs = [exp.Count(this=x.copy()), exp.Sum(this=d.copy()), exp.Sum(this=exp.Mul(this=d.copy(), expression=d.copy()))]
        if weight is not None:
            aggs += [wcount(weight, exp.Not(this=exp.Is(this=x.copy(), expression=exp.Null()))),
                     wsum(weight, d.copy()), wsum(weight, exp.Mul(this=d.copy(), expression=d.copy()))]
        return aggs

    @staticmethod
    def _from_sums(n, s1, s2, shift):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            safe = np.where(n > 0, n, 1.0)
            mean = np.where(n > 0, shift + s1 / safe, 0.0)
            m2 = np.where(n > 0, np.maximum(sum_of_squares(s2, s1, safe), 0.0), 0.0)
        # exact when S2 (= M2 + n(θ − K)²) is at most EXACT_BELOW times M2; S2 = 0 means
        # every value equals the shift, and M2 = 0 exactly. An infinite S2 (the squares of
        # finite values overflowed: see unsummable) is redone around the class means too,
        # where the squares are as small as the variance allows.
        inexact = bool(np.any(~np.isfinite(s2) | ((s2 > 0) & ~(s2 <= Gaussian.EXACT_BELOW * m2))))
        return mean, m2, inexact

    @staticmethod
    def unsummable(rows, classes):
        """The first class whose count or sum ``Σ(x − K)`` (weighted too) is NaN or ±inf,
        or None.

        Such a class holds a NaN or ±inf value, or finite values whose sum overflowed;
        fit.py tells which. When only ``Σ(x − K)²`` is infinite every value is finite
        (one NaN or ±inf would make the plain sum NaN or ±inf too): those squares
        overflowed, and the exact second pass redoes them (:meth:`collect_shifted`)."""
        for c, r in zip(classes, rows):
            sums = [v for j, v in enumerate(r) if j % 3 != 2]  # n, S1 (and Σw, Σw·d)
            if not all(v is None or math.isfinite(float(v)) for v in sums):
                return c
        return None

    def collect_shifted(self, feature, rows, classes, where, shift: float):
        """Moments from :meth:`shifted_aggregates`' results, and whether any class's M2 lost
        too many digits or overflowed (then fit.py reruns it exactly). The counts and
        first sums must be finite (:meth:`unsummable`)."""
        cols = np.array([[float(v) if v is not None else 0.0 for v in r] for r in rows]).reshape(len(rows), -1)
        rows_n = cols[:, 0]
        rows_mean, rows_m2, inexact = self._from_sums(rows_n, cols[:, 1], cols[:, 2], shift)
        if cols.shape[1] > 3:  # weighted
            n = cols[:, 3]
            mean, m2, w_inexact = self._from_sums(n, cols[:, 4], cols[:, 5], shift)
            return Moments(n, mean, m2, rows_n, rows_mean, rows_m2), inexact or w_inexact
        return Moments(rows_n.copy(), rows_mean.copy(), rows_m2.copy(), rows_n, rows_mean, rows_m2), inexact

    def estimate(self, features, stats, class_n, hp):
        with np.errstate(over="ignore", invalid="ignore"):
            pooled = {f.name: stats[f.name].pooled() for f in features}
        variances = {name: (m2 / n if n > 0 else 0.0) for name, (n, _, m2) in pooled.items()}
        for name, v in variances.items():
            if not math.isfinite(v):  # the class means are too far apart: finite per class, not pooled
                raise SqlnbError(f"the variance of column {name!r} over all classes overflows a double (the "
                                 "variance floor var_smoothing scales the largest one); rescale the column in a "
                                 "source query, e.g. divide it by a power of ten")
        max_var = max(variances.values())
        # scikit-learn: epsilon = var_smoothing * max variance. With every column constant
        # that is 0 and every density degenerate, so the floor falls back to var_smoothing.
        eps = hp.var_smoothing * (max_var if max_var > 0 else 1.0)
        out = {}
        for f in features:
            s = stats[f.name]
            pn, pmean, pm2 = pooled[f.name]
            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.where(s.n > 0, s.mean, pmean)
                var = np.where(s.n > 0, s.m2 / np.where(s.n > 0, s.n, 1.0), pm2 / pn if pn > 0 else 0.0) + eps
            if hp.tied_variance:  # pooled within-class: Σ_c M2_c / Σ_c n_c (weighted), for every class
                total = float(np.sum(s.n))
                within = float(np.sum(s.m2)) / total if total > 0 else (pm2 / pn if pn > 0 else 0.0)
                var = np.full(len(s.n), within + eps)
            if pn == 0:
                raise SqlnbError(f"column {f.name!r} has no non-NULL value in the training data; exclude it")
            if np.any(var <= 0):
                k = int(np.argmax(var <= 0))
                single = " (one with a single training row)" if s.rows[k] == 1 else ""
                raise SqlnbError(
                    f"column {f.name!r} has zero variance in a class{single} and var_smoothing is 0; "
                    "set var_smoothing > 0 (--var-smoothing)"
                )
            out[f.name] = (mean, var)
        return out

    def term(self, feature, params, k, nan_guard: bool = True, compiled: bool = False):
        """``−½ ln(2π var) − (x − θ)² · (1 / (2 var))``, 0 for NULL (COALESCE) and, with
        ``nan_guard``, for NaN (the input read through :func:`sqlnb.sql.nan_as_null`). Without the guard a NaN input makes
        the term NaN: pure arithmetic propagates it, which is what lets the scoring query
        test the sum once per row instead of guarding every term (sqlnb/models/finish.py).

        ``1 / (2 var)`` is folded into one literal: a multiplication instead of a division
        and a second multiplication per row, term and class. The result differs from
        scikit-learn's ``0.5 · (x − θ)² / var`` by rounding only (a few ulp), and at
        10M rows × 20 columns × 3 classes the class scores took 1.2 s instead of 1.5 s
        (benchmarks/README.md).

        ``compiled`` is the form for an engine that compiles each query to JVM code
        (Spark, :func:`sqlnb.models.finish.shares_subexpressions`):

        * the square is written ``+ (θ − x)·(x − θ)``: the same double (negating is
          exact), but no expression twice. Spark compiles an expression that occurs twice
          into a method of its own, called for every row from the one method that reads
          the row: one per feature and class (300 at 60 columns × 5 classes) made that
          method too long for the JIT. DuckDB computes the repeated ``x − θ`` once and
          keeps ``(x − θ)·(x − θ)``: the other form took 0.29 s against 0.24 s there (1M
          rows × 20 columns × 3 classes).
        * NaN is caught on the term, ``NANVL(term, 0)``, whatever ``nan_guard`` says: with
          a finite mean and variance the term is NaN exactly when x is, so this is the
          guarded term in one copy. (DuckDB's query writes the term twice, unguarded and
          guarded, and chooses per row; that tripled Spark's SQL, and parsing, analysing
          and compiling it was most of the time of scoring 1M rows there.)
        """
        mean, var = params
        const = -0.5 * math.log(2.0 * math.pi * float(var[k]))
        guard_input = nan_guard and not compiled
        x, m = self.value(feature, scoring=guard_input), sql.dbl(float(mean[k]))

        def scaled(square: exp.Expression) -> exp.Expression:
            # square · (1 / (2 var)); for a subnormal variance (values of magnitude 1e-160)
            # 1 / (2 var) overflows to inf, and inf · a square that underflowed to 0 is NaN:
            # there the square is divided by var and halved, as scikit-learn computes it.
            half = 0.5 / float(var[k])
            if math.isfinite(half):
                return exp.Mul(this=square, expression=sql.dbl(half))
            return exp.Mul(this=sql.paren(exp.Div(this=square, expression=sql.dbl(float(var[k])))),
                           expression=sql.dbl(0.5))

        if compiled:
            neg = exp.Mul(this=sql.paren(exp.Sub(this=m, expression=x)),
                          expression=sql.paren(exp.Sub(this=x.copy(), expression=m.copy())))
            body = exp.Add(this=sql.dbl(const), expression=scaled(neg))
            if is_float(feature.sql_type):
                body = sql.nan_as(body, sql.dbl(0.0))
        else:
            d = exp.Sub(this=x, expression=m)
            quad = scaled(exp.Mul(this=sql.paren(d), expression=sql.paren(d.copy())))
            body = exp.Sub(this=sql.dbl(const), expression=quad)
        return exp.Coalesce(this=body, expressions=[sql.dbl(0.0)])
