"""Sufficient statistics: what a naive Bayes model *is*.

Training reduces the data to these small per-class arrays, and everything else —
smoothing, estimators, priors, variance floors, incremental updates, cross-validation
folds, adding a class — is computed from them without reading the data again.

Per class ``c`` (arrays are indexed by the position of ``c`` in the sorted class list):

* :class:`Moments` (gaussian): weighted ``n``, ``mean``, ``m2 = Σ w (x − mean)²``, plus
  the unweighted ``rows, rows_mean, rows_m2`` that scikit-learn's variance floor uses.
* :class:`Sums` (bernoulli, multinomial, complement): weighted count of rows where the
  feature is not NULL (``n``) and weighted total (``Σ w·x``, or ``Σ w·[x > t]``).
* :class:`Counts` (categorical): weighted count per (class, value).
* :class:`Bag` (token bags): per (class, term) weighted counts and document counts.
* :class:`ValueCounts` (binned columns, beside their per-bin :class:`Counts`): rows and
  weighted count per (class, distinct value), what the cut points and the per-bin counts
  are computed from, so that an update can recompute both as the refit would.

Two sets of statistics merge exactly (:meth:`Statistics.merge`); Gaussian moments merge
by Chan, Golub & LeVeque, which is stable where the textbook ``Σx², Σx`` form is not.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError

if TYPE_CHECKING:
    from sqlnb.source import Source


def _sort_key(v: Any):
    # Classes and categories sort by value (numbers numerically, strings by code point);
    # the type name first keeps mixed-type sets (only possible across updates) orderable.
    return (type(v).__name__ if not isinstance(v, (int, float)) or isinstance(v, bool) else "0num", v)


def sorted_values(values: Iterable[Any]) -> list:
    """Distinct values in the model's canonical order."""
    return sorted(set(values), key=_sort_key)


def _align(arr: np.ndarray, src: list, dst: list, axis: int = 0) -> np.ndarray:
    """Re-index ``arr`` (indexed along ``axis`` by ``src``) to ``dst``, zeros elsewhere."""
    pos = {v: i for i, v in enumerate(src)}
    shape = list(arr.shape)
    shape[axis] = len(dst)
    out = np.zeros(shape, dtype=float)
    for j, v in enumerate(dst):
        if v in pos:
            idx = [slice(None)] * arr.ndim
            idx[axis] = j
            sidx = [slice(None)] * arr.ndim
            sidx[axis] = pos[v]
            out[tuple(idx)] = arr[tuple(sidx)]
    return out


def chan_merge(n1, mean1, m21, n2, mean2, m22):
    """Combine two (n, mean, M2) summaries (Chan, Golub & LeVeque 1979).

    ``n = n₁+n₂; δ = μ₂−μ₁; μ = μ₁ + δ·n₂/n; M2 = M2₁ + M2₂ + δ²·n₁n₂/n``. Empty sides
    (n = 0) leave the other side unchanged; the result for n = 0 is (0, 0, 0).
    """
    n1, mean1, m21, n2, mean2, m22 = map(np.asarray, (n1, mean1, m21, n2, mean2, m22))
    n = n1 + n2
    # Values near the largest double overflow δ² to inf (no warning: the fit names the
    # column whose variance overflows, in one line, where it checks the variances).
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        delta = mean2 - mean1
        safe = np.where(n > 0, n, 1.0)
        mean = np.where(n1 == 0, mean2, np.where(n2 == 0, mean1, mean1 + delta * (n2 / safe)))
        m2 = np.where(
            (n1 == 0) | (n2 == 0), m21 + m22, m21 + m22 + delta * delta * (n1 * n2 / safe)
        )
    return n, np.where(n > 0, mean, 0.0), np.where(n > 0, m2, 0.0)


def _chan_merge_floats(n1: float, mean1: float, m21: float, n2: float, mean2: float,
                       m22: float) -> tuple[float, float, float]:
    """:func:`chan_merge` of two scalar summaries (Python floats overflow to inf, as numpy's)."""
    n = n1 + n2
    if not n > 0:
        return n, 0.0, 0.0
    if n1 == 0 or n2 == 0:
        return n, (mean2 if n1 == 0 else mean1), m21 + m22
    delta = mean2 - mean1
    return n, mean1 + delta * (n2 / n), m21 + m22 + delta * delta * (n1 * n2 / n)


@dataclass
class Moments:
    """Gaussian statistics of one feature, per class."""

    n: np.ndarray
    mean: np.ndarray
    m2: np.ndarray
    rows: np.ndarray
    rows_mean: np.ndarray
    rows_m2: np.ndarray

    family = "moments"

    def align(self, src: list, dst: list) -> "Moments":
        return Moments(*(_align(getattr(self, f), src, dst) for f in _MOMENT_FIELDS))

    def merge(self, other: "Moments") -> "Moments":
        n, mean, m2 = chan_merge(self.n, self.mean, self.m2, other.n, other.mean, other.m2)
        r, rmean, rm2 = chan_merge(
            self.rows, self.rows_mean, self.rows_m2, other.rows, other.rows_mean, other.rows_m2
        )
        return Moments(n, mean, m2, r, rmean, rm2)

    def scaled(self, factor: float) -> "Moments":
        # Forgetting scales the weight of past rows: counts and M2 shrink, means stay.
        return Moments(self.n * factor, self.mean, self.m2 * factor,
                       self.rows * factor, self.rows_mean, self.rows_m2 * factor)

    def pooled(self):
        """(rows, mean, M2) of the feature over all classes, unweighted: :func:`chan_merge`
        class by class, written on Python floats (the same IEEE operations, so the same
        doubles; numpy's per-call overhead on scalars made this 0.25 s of a 64-column,
        10-class fit)."""
        n, mean, m2 = 0.0, 0.0, 0.0
        for n2, mean2, m22 in zip(*(np.asarray(a, dtype=float).ravel().tolist()
                                    for a in (self.rows, self.rows_mean, self.rows_m2))):
            n, mean, m2 = _chan_merge_floats(n, mean, m2, float(n2), float(mean2), float(m22))
        return n, mean, m2


_MOMENT_FIELDS = ("n", "mean", "m2", "rows", "rows_mean", "rows_m2")


@dataclass
class Sums:
    """Bernoulli / multinomial / complement statistics of one feature, per class."""

    n: np.ndarray
    total: np.ndarray

    family = "sums"

    def align(self, src: list, dst: list) -> "Sums":
        return Sums(_align(self.n, src, dst), _align(self.total, src, dst))

    def merge(self, other: "Sums") -> "Sums":
        return Sums(self.n + other.n, self.total + other.total)

    def scaled(self, factor: float) -> "Sums":
        return Sums(self.n * factor, self.total * factor)


@dataclass
class Counts:
    """Per (class, value) weighted counts of one categorical feature (or token bag)."""

    values: list
    counts: np.ndarray  # shape (n_classes, n_values)

    family = "counts"

    def align(self, src: list, dst: list) -> "Counts":
        return Counts(list(self.values), _align(self.counts, src, dst, axis=0))

    def merge(self, other: "Counts") -> "Counts":
        values = sorted_values(list(self.values) + list(other.values))
        return Counts(
            values,
            _align(self.counts, self.values, values, axis=1)
            + _align(other.counts, other.values, values, axis=1),
        )

    def scaled(self, factor: float) -> "Counts":
        return Counts(list(self.values), self.counts * factor)

    @property
    def n(self) -> np.ndarray:
        """Weighted count of non-NULL values per class."""
        return self.counts.sum(axis=1)


@dataclass
class ValueCounts:
    """Per (class, distinct value) counts of one binned column: the statistics its cut
    points are a function of (:mod:`sqlnb.models.naive_bayes.binning`: Fayyad & Irani's
    MDL splits read the per-value class histogram; quantiles read the value counts), and
    from which its per-bin counts follow for any cut points. They merge by addition, so
    an update recomputes the cut points of the refit on all rows.

    ``values`` are the distinct non-NULL values, ascending; ``rows[c, v]`` the rows of
    class ``c`` with value ``v`` (unweighted: the cut points are computed from unweighted
    counts) and ``n[c, v]`` their weighted count (equal to ``rows`` without weights).
    Exponential forgetting (:meth:`scaled`) shrinks ``n`` only: the decayed model is a
    weighted fit, and a weighted fit's cut points come from unweighted counts.
    """

    values: np.ndarray  # (m,) float, ascending
    rows: np.ndarray  # (n_classes, m)
    n: np.ndarray  # (n_classes, m)

    def align(self, src: list, dst: list) -> "ValueCounts":
        return ValueCounts(self.values.copy(), _align(self.rows, src, dst), _align(self.n, src, dst))

    def merge(self, other: "ValueCounts") -> "ValueCounts":
        values = np.union1d(self.values, other.values)
        out = [np.zeros((self.rows.shape[0], len(values))) for _ in range(2)]
        for vc in (self, other):
            at = np.searchsorted(values, vc.values)
            out[0][:, at] += vc.rows
            out[1][:, at] += vc.n
        return ValueCounts(values, out[0], out[1])

    def scaled(self, factor: float) -> "ValueCounts":
        return ValueCounts(self.values.copy(), self.rows.copy(), self.n * factor)

    def take(self, idx) -> "ValueCounts":
        return ValueCounts(self.values.copy(), self.rows[idx], self.n[idx])

    def binned(self, edges: Sequence[float]) -> np.ndarray:
        """Weighted count per (class, bin) for the cut points ``edges``: bin ``b`` holds
        ``e_b <= x < e_{b+1}``, as the training scan's conditions."""
        b = np.searchsorted(np.asarray(edges, dtype=float), self.values, side="right")
        out = np.zeros((self.n.shape[0], len(edges) + 1))
        for k in range(self.n.shape[0]):
            out[k] = np.bincount(b, weights=self.n[k], minlength=len(edges) + 1)
        return out


@dataclass
class Bag:
    """Per (class, term) statistics of one token bag (a text, LIST or MAP column, or a
    long token table): see :mod:`sqlnb.models.naive_bayes.text`.

    ``terms`` is the vocabulary in code-point order; ``total[c, v] = Σ w·count`` (the
    multinomial / complement statistic) and ``docs[c, v] = Σ w·[count > threshold]``
    (Bernoulli's N_cj, also the document frequencies mutual information needs).
    ``n[c]`` is the weighted number of documents whose bag is not NULL (Bernoulli's N_c)
    and ``rows[c]`` the same count unweighted. Vocabulary terms a class never saw are
    zero cells: they still enter every denominator and Bernoulli constant.
    """

    terms: list
    n: np.ndarray
    rows: np.ndarray
    total: np.ndarray  # shape (n_classes, n_terms)
    docs: np.ndarray  # shape (n_classes, n_terms)

    family = "bag"

    def align(self, src: list, dst: list) -> "Bag":
        return Bag(list(self.terms), _align(self.n, src, dst), _align(self.rows, src, dst),
                   _align(self.total, src, dst, axis=0), _align(self.docs, src, dst, axis=0))

    def _widen(self, terms: list) -> "Bag":
        """The same counts over the (superset) vocabulary ``terms``, zeros elsewhere."""
        pos = np.searchsorted(np.asarray(terms, dtype=object), np.asarray(self.terms, dtype=object))
        total = np.zeros((len(self.n), len(terms)))
        docs = np.zeros_like(total)
        total[:, pos] = self.total
        docs[:, pos] = self.docs
        return Bag(list(terms), self.n, self.rows, total, docs)

    def merge(self, other: "Bag") -> "Bag":
        terms = sorted(set(self.terms) | set(other.terms))
        a, b = self._widen(terms), other._widen(terms)
        return Bag(terms, a.n + b.n, a.rows + b.rows, a.total + b.total, a.docs + b.docs)

    def scaled(self, factor: float) -> "Bag":
        return Bag(list(self.terms), self.n * factor, self.rows * factor, self.total * factor, self.docs * factor)

    def take(self, idx) -> "Bag":
        """The statistics of the classes at positions ``idx``."""
        return Bag(list(self.terms), self.n[idx], self.rows[idx], self.total[idx], self.docs[idx])

    def keep_terms(self, keep: Iterable[str]) -> "Bag":
        """The statistics restricted to the terms in ``keep`` (vocabulary pruning)."""
        keep = set(keep)
        idx = [i for i, t in enumerate(self.terms) if t in keep]
        return Bag([self.terms[i] for i in idx], self.n, self.rows, self.total[:, idx], self.docs[:, idx])


@dataclass
class Statistics:
    """All sufficient statistics of a naive Bayes model.

    Attributes
    ----------
    classes : list
        Sorted distinct labels. A class with no rows may still be present (e.g. declared
        up front); its fitted prior is then zero.
    class_n : ndarray
        Weighted row count per class.
    class_rows : ndarray
        Unweighted row count per class.
    features : dict
        Feature name -> :class:`Moments`, :class:`Sums` or :class:`Counts`.
    null_label_rows : int
        Rows skipped because their label was NULL.
    pairs : Pairs, optional
        Per (class, value, value) counts of every pair of discrete features, for
        tree-augmented naive Bayes (:mod:`sqlnb.models.naive_bayes.tan`); None otherwise.
    cuts : dict
        Binned feature name -> :class:`ValueCounts`, what its cut points are computed
        from (empty for statistics that do not keep them: cross-validation folds, models
        saved before they were kept).
    """

    classes: list
    class_n: np.ndarray
    class_rows: np.ndarray
    features: dict = field(default_factory=dict)
    null_label_rows: int = 0
    pairs: Any = None
    cuts: dict = field(default_factory=dict)

    @property
    def n_rows(self) -> int:
        return int(round(float(np.sum(self.class_rows))))

    def align(self, classes: list) -> "Statistics":
        """The same statistics over the class list ``classes`` (a superset)."""
        return Statistics(
            list(classes),
            _align(self.class_n, self.classes, classes),
            _align(self.class_rows, self.classes, classes),
            {k: v.align(self.classes, classes) for k, v in self.features.items()},
            self.null_label_rows,
            None if self.pairs is None else self.pairs.align(self.classes, classes),
            {k: v.align(self.classes, classes) for k, v in self.cuts.items()},
        )

    def merge(self, other: "Statistics") -> "Statistics":
        """Statistics of the union of both data sets (exact, order-independent up to
        rounding). New classes, categories and tokens are added."""
        missing = set(self.features) ^ set(other.features)
        if missing:
            raise ValueError(f"cannot merge statistics of different features: {sorted(missing)}")
        classes = sorted_values(list(self.classes) + list(other.classes))
        a, b = self.align(classes), other.align(classes)
        return Statistics(
            classes,
            a.class_n + b.class_n,
            a.class_rows + b.class_rows,
            {k: a.features[k].merge(b.features[k]) for k in a.features},
            a.null_label_rows + b.null_label_rows,
            # Pair counts add like every other count; statistics without them (a naive
            # model's) make a merge without them.
            a.pairs.merge(b.pairs) if a.pairs is not None and b.pairs is not None else None,
            # A column's value counts merge when both sides kept them (else it has none).
            {k: v.merge(b.cuts[k]) for k, v in a.cuts.items() if k in b.cuts},
        )

    def scaled(self, factor: float) -> "Statistics":
        """Down-weight these statistics by ``factor`` (exponential forgetting)."""
        return replace(
            self,
            class_n=self.class_n * factor,
            class_rows=self.class_rows * factor,
            features={k: v.scaled(factor) for k, v in self.features.items()},
            pairs=None if self.pairs is None else self.pairs.scaled(factor),
            cuts={k: v.scaled(factor) for k, v in self.cuts.items()},
        )

    def only_classes(self, keep: list) -> "Statistics":
        """The statistics restricted to the classes in ``keep``."""
        idx = [self.classes.index(c) for c in keep]

        def pick(s):
            if isinstance(s, Counts):
                return Counts(list(s.values), s.counts[idx])
            if isinstance(s, Bag):
                return s.take(idx)
            return type(s)(*(getattr(s, f)[idx] for f in s.__dataclass_fields__))

        return Statistics(
            [self.classes[i] for i in idx],
            self.class_n[idx],
            self.class_rows[idx],
            {k: pick(v) for k, v in self.features.items()},
            self.null_label_rows,
            None if self.pairs is None else self.pairs.take(idx),
            {k: v.take(idx) for k, v in self.cuts.items()},
        )


# -- when a sum comes back NaN or infinite -----------------------------------------------------
#
# A NaN or ±inf in a column makes its sums NaN or ±inf, and so do finite values whose sums
# or squares pass the largest double (~1.8e308: a column of values near 1e300 has a
# variance near 1e600). The training scan cannot tell the two apart; on that error path
# only, one more query over the column does.

def census_query(source: "Source", label: str, x: exp.Expression) -> exp.Select:
    """Per class: the number of NaN or ±inf values of ``x`` (an expression over ``src``)
    and its largest finite ``|x|``, by :func:`sqlnb.sql.finite` (NULL for NULL)."""
    finite = sql.finite(x)
    bad = exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=exp.Not(this=sql.paren(finite.copy()))))
    largest = exp.Filter(this=exp.Max(this=exp.Abs(this=x.copy())), expression=exp.Where(this=finite))
    return (exp.select(exp.alias_(sql.col(label, "src"), "k", quoted=True), exp.alias_(bad, "bad", quoted=True),
                       exp.alias_(largest, "largest", quoted=True))
            .from_(source.from_("src"))
            .where(exp.Not(this=exp.Is(this=sql.col(label, "src"), expression=exp.Null())))
            .group_by(sql.col(label, "src")))


def nonfinite_values(census: Sequence[Sequence[Any]]) -> tuple[Any, int] | None:
    """``(class, count)`` of the first class (in class order) holding NaN or ±inf values,
    from :func:`census_query`'s rows; None when every value is finite."""
    bad = sorted(((r[0], int(r[1])) for r in census if r[1]), key=lambda kc: _sort_key(kc[0]))
    return bad[0] if bad else None


def overflow_error(name: str, where: str, cls: Any, census: Sequence[Sequence[Any]],
                   what: str = "variance") -> SqlnbError:
    """The error for a column whose values are finite but whose ``what`` in class ``cls``
    does not fit in a double, with the scale that brings the column back to ordinary
    numbers."""
    mine = [r for r in census if r[0] == cls and r[2] is not None] or [r for r in census if r[2] is not None]
    largest = max((float(r[2]) for r in mine), default=math.inf)
    size = f" (its values reach {largest:.3g})" if math.isfinite(largest) else ""
    divisor = f"1e{math.floor(math.log10(largest))}" if math.isfinite(largest) and largest >= 1 else "a power of ten"
    return SqlnbError(f"the {what} of column {name!r} in {where} overflows a double in class {cls!r}{size}; "
                      f"rescale the column in a source query, e.g. \"{name}\" / {divisor}")
