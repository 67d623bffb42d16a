"""Linear and quadratic discriminant analysis: Gaussian classes with full covariances.

Fitting is one SQL scan (:func:`moments_query`)::

    SELECT label, COUNT(*), COUNT(x_j), AVG(x_j), COVAR_POP(x_i, x_j) (i <= j)
    FROM source GROUP BY label

giving per class ``n_k``, the mean ``μ_k`` and the biased covariance ``C_k`` — kept as
the co-moment ``M_k = n_k·C_k`` (:class:`JointMoments`), which merges exactly across data
sets (Chan, Golub & LeVeque, as for naive Bayes), so cross-validation folds and
hyperparameters never rescan. ``COVAR_POP`` is DuckDB's one-pass co-moment update
(Welford's recurrence, partial states combined by Chan's formula), not the cancelling
``Σxy − n·x̄ȳ``. Measured against numpy's two-pass ``np.cov``: relative error 7e-15 on
spambase; on synthetic columns it grows with ``|mean|/std``: 4e-15 at 1e2, 5e-13 at 1e4,
4e-11 at 1e6, 5e-10 at 1e8 (centre such columns in the source query if that matters).

Everything after the scan is small numpy algebra on ``d × d`` matrices.

LDA (scikit-learn ``LinearDiscriminantAnalysis(solver='lsqr', shrinkage=s, priors=π)``)::

    C_k  ← (1 − s)·C_k + s·(tr C_k / d)·I       per class, when shrinkage s is given
    Σ    = Σ_k π_k C_k                           (with the given priors, if any)
    a_k  = Σ⁻¹ (μ_k − m)                         m = the training mean (a centre)
    b_k  = (x − m)·a_k − ½ (μ_k − m)·a_k + ln π_k

``b_k`` differs from scikit-learn's ``x·Σ⁻¹μ_k − ½ μ_kᵀΣ⁻¹μ_k + ln π_k`` by
``−mᵀΣ⁻¹x + ½ mᵀΣ⁻¹m``, the same for every class, so the probabilities are equal while
the numbers stay small when the data sit far from the origin. It is ln p(x, k) up to that
per-row constant, so for LDA ``log_evidence`` is not ln p(x). Σ is solved by Cholesky
after scaling it to unit diagonal (equilibration), which keeps the solve accurate when
columns have very different scales (spambase's class covariances: condition numbers 7e8
and 1e11 as they are, 6e3 and 17 equilibrated). scikit-learn's ``lstsq`` drops singular
values below ``ε·d·σ_max``, so when the condition number passes ~1e16 (columns in units
1e-4 … 1e5) it no longer solves Σ a = μ; LDA's probabilities do not depend on column
units, so the tests compare with it on rescaled columns there.

QDA (``QuadraticDiscriminantAnalysis(reg_param=r, priors=π)``)::

    C_k' = (1 − r)·C_k + r·I                     scikit-learn's eigenvalue shrinkage
    C_k' = L_k L_kᵀ                              Cholesky
    z_k  = L_k⁻¹ (x − μ_k)                       whitened: lower triangular, Σ_{j<=m} only
    b_k  = −½ Σ_m z_km² − ½ ln|C_k'| − (d/2) ln 2π + ln π_k      = ln p(x, k)

The quadratic form is a sum of squares of whitened components, never the expanded
``xᵀAx + bᵀx + c``, which cancels badly when ``|x| ≫ σ``. scikit-learn raises when an
eigenvalue of ``C_k'`` is below ``tol = 1e-4`` (and, with its default SVD solver, when a
class has no more rows than features); sqlnb needs only ``C_k'`` numerically positive
definite (smallest eigenvalue of the unit-diagonal form above ``d·ε``), so with
``reg_param > 0`` every class works.

Checked at fit, not at first use (the solve runs when the model is built): the priors
(:mod:`sqlnb.models.priors`), a singular pooled or class covariance (named: the constant
column, or the collinear ones, and ``shrinkage``/``reg_param``), and the classes
scikit-learn refuses: unregularised QDA with a one-row class ("y has only 1 sample in
class") and LDA where every class has one row (no within-class covariance). LDA with
some one-row classes is fitted, as scikit-learn's ``lsqr`` solver does.

Missing values: see :mod:`sqlnb.models.dense` (complete rows at fit; NULL scores otherwise).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.errors import SqlnbError
from sqlnb.models.dense import (LIST_MIN, DenseModel, check_labels, complete, linear_class_score,
                                linear_feature_terms, linear_list_score, list_dot, list_guard, listed, null_feature_error,
                                squared_norm, unsummable_error, value)
from sqlnb.models.finish import ClassScore
from sqlnb.models.priors import own_prior, priors_from_json, priors_to_json, resolve_priors
from sqlnb.source import Source
from sqlnb.stats import _align, sorted_values
from sqlnb.store import register_kind


# -- statistics ----------------------------------------------------------------------------
@dataclass
class JointMoments:
    """Per-class count, mean vector and co-moment matrix: all LDA and QDA need.

    Attributes
    ----------
    classes : list
        Sorted labels.
    n : ndarray (K,)
        Rows per class.
    mean : ndarray (K, d)
        Class means.
    comoment : ndarray (K, d, d)
        ``Σ (x − μ_k)(x − μ_k)ᵀ`` per class (``n_k`` times the biased covariance).
    null_label_rows : int
        Rows skipped because their label was NULL.
    """

    classes: list
    n: np.ndarray
    mean: np.ndarray
    comoment: np.ndarray
    null_label_rows: int = 0

    @property
    def n_rows(self) -> int:
        return int(round(float(np.sum(self.n))))

    def align(self, classes: list) -> "JointMoments":
        """The same moments over ``classes`` (a superset; new classes have no rows)."""
        return JointMoments(list(classes), _align(self.n, self.classes, classes),
                            _align(self.mean, self.classes, classes),
                            _align(self.comoment, self.classes, classes), self.null_label_rows)

    def merge(self, other: "JointMoments") -> "JointMoments":
        """Moments of the union of both data sets (Chan, Golub & LeVeque)::

            n = n₁ + n₂;  δ = μ₂ − μ₁;  μ = μ₁ + δ·n₂/n;  M = M₁ + M₂ + δδᵀ·n₁n₂/n
        """
        classes = sorted_values(list(self.classes) + list(other.classes))
        a, b = self.align(classes), other.align(classes)
        n = a.n + b.n
        safe = np.where(n > 0, n, 1.0)
        delta = b.mean - a.mean
        mean = a.mean + delta * (b.n / safe)[:, None]
        comoment = a.comoment + b.comoment + (np.einsum("ki,kj->kij", delta, delta)
                                              * (a.n * b.n / safe)[:, None, None])
        return JointMoments(classes, n, mean, comoment, a.null_label_rows + b.null_label_rows)

    def covariances(self) -> np.ndarray:
        """Biased (population) covariance of each class, ``M_k / n_k``."""
        return self.comoment / np.where(self.n > 0, self.n, 1.0)[:, None, None]


def moments_query(source: Source, label: str, features: Sequence[str],
                  group: exp.Expression | None = None) -> exp.Select:
    """The one-pass per-class aggregation (see the module docstring).

    ``group``, an expression over ``src`` (e.g. a cross-validation fold), is an extra
    grouping key returned as the second column.
    """
    x = [value(f, source.columns[f]) for f in features]
    cols: list[exp.Expression] = [exp.alias_(sql.col(label, "src"), "k", quoted=True)]
    if group is not None:
        cols.append(exp.alias_(group, "g", quoted=True))
    cols.append(exp.alias_(exp.Count(this=exp.Star()), "rows", quoted=True))
    cols += [exp.Count(this=v.copy()) for v in x]
    cols += [exp.Avg(this=v.copy()) for v in x]
    cols += [exp.CovarPop(this=x[i].copy(), expression=x[j].copy())
             for i in range(len(x)) for j in range(i, len(x))]
    keys = [sql.col(label, "src")] + ([group.copy()] if group is not None else [])
    return exp.select(*cols).from_(source.from_("src")).group_by(*keys)


def long_moments_query(source: Source, label: str, features: Sequence[str],
                       group: exp.Expression | None = None) -> exp.Select:
    """The per-class aggregation of :func:`moments_query` in the long shape (DuckDB)::

        SELECT k, [g,] p, COUNT(*), COUNT(l[i]), AVG(l[i]), COVAR_POP(l[i], l[j])
        FROM (SELECT label AS k, [group AS g,] [x_1, …, x_d] AS l FROM source)
             CROSS JOIN (the pairs p = (i, j), i <= j, in np.triu_indices order)
        GROUP BY k, [g,] p

    one row per class, group and pair; the diagonal pairs ``(i, i)`` give ``x_i``'s count
    and mean. Written as one aggregate per pair, :func:`moments_query` holds d(d+1)/2
    ``COVAR_POP`` for d columns: 5,460 for 104 one-hot columns of adult, which took ~6 s to
    build and render and ~5 s and 0.4 GB for DuckDB to plan and run on 10,000 rows, and far
    more for every fold of a cross-validation or every subset of ``sqlnb compare``. Here
    each column is written once, the pairs are one constant list, and the size of the
    query does not depend on d. The cross join keeps a row's list once (a constant vector
    beside the pairs): unnesting the pairs' values instead, ``UNNEST(list_select(l, I))``,
    held 2,048 rows × 5,460 pairs of values at once (0.7 GB). ``COVAR_POP`` is the same
    one-pass co-moment update as in :func:`moments_query`, its states combined in another
    order (the sums agree to the last few bits)."""
    d = len(features)
    iu, ju = np.triu_indices(d)
    keys = [exp.alias_(sql.col(label, "src"), "k", quoted=True)]
    if group is not None:
        keys.append(exp.alias_(group, "g", quoted=True))
    values = exp.Array(expressions=[value(f, source.columns[f]) for f in features])
    rows = exp.select(*keys, exp.alias_(values, "l", quoted=True)).from_(source.from_("src"), copy=False)

    def listed(numbers) -> exp.Expression:
        return exp.Unnest(expressions=[sql.packed_list([int(v) for v in numbers], "INTEGER")])

    pairs = exp.select(exp.alias_(listed(iu + 1), "i", quoted=True), exp.alias_(listed(ju + 1), "j", quoted=True),
                       exp.alias_(exp.Unnest(expressions=[exp.Anonymous(this="range", expressions=[
                           exp.Literal.number(len(iu))])]), "p", quoted=True))

    def at(index: str) -> exp.Expression:
        return exp.Anonymous(this="list_extract", expressions=[sql.col("l", "w"), sql.col(index, "pr")])

    group_by = [sql.col("k", "w")] + ([sql.col("g", "w")] if group is not None else []) + [sql.col("p", "pr")]
    return (exp.select(*[c.copy() for c in group_by], exp.Count(this=exp.Star()), exp.Count(this=at("i")),
                       exp.Avg(this=at("i")), exp.CovarPop(this=at("i"), expression=at("j")))
            .from_(exp.Subquery(this=rows, alias=exp.TableAlias(this=sql.ident("w"))), copy=False)
            .join(exp.Subquery(this=pairs, alias=exp.TableAlias(this=sql.ident("pr"))), join_type="CROSS", copy=False)
            .group_by(*group_by, copy=False))


def _wide_rows(rows: Sequence[Sequence[Any]], d: int, grouped: bool) -> list[tuple]:
    """The long query's rows as :func:`moments_query`'s: per (class[, group]) the row
    count, the d counts, the d means and the d(d+1)/2 co-moments in triu order."""
    iu, ju = np.triu_indices(d)
    width = 2 if grouped else 1
    by: dict[tuple, list] = {}
    for r in rows:
        key, p = tuple(r[:width]), int(r[width])
        n, count, mean, cov = r[width + 1:]
        cells = by.setdefault(key, [n] + [None] * (2 * d + len(iu)))
        if iu[p] == ju[p]:
            cells[1 + iu[p]], cells[1 + d + iu[p]] = count, mean
        cells[1 + 2 * d + p] = cov
    return [key + tuple(cells) for key, cells in by.items()]


def collect_moments(con: duckdb.DuckDBPyConnection, source: Source, label: str, features: Sequence[str],
                    group: exp.Expression | None = None) -> tuple[list, dict[Any, JointMoments]]:
    """Run :func:`moments_query` (in DuckDB from :data:`~sqlnb.models.dense.LIST_MIN`
    features on, :func:`long_moments_query`); return the classes and the moments per
    group value (a single key ``None`` without ``group``), each aligned to all classes."""
    d = len(features)
    where = source.description
    engine = as_engine(con)
    if engine.dialect == "duckdb" and d >= LIST_MIN:
        rows = _wide_rows(engine.execute(long_moments_query(source, label, features, group)), d, group is not None)
    else:
        rows = engine.execute(moments_query(source, label, features, group))
    off = 1 if group is None else 2
    null_rows: dict[Any, int] = {}
    for r in rows:
        if r[0] is None:
            g = None if group is None else r[1]
            null_rows[g] = null_rows.get(g, 0) + int(r[off])
    classes = check_labels({r[0]: None for r in rows}, label, where, sum(null_rows.values()))
    index = {c: k for k, c in enumerate(classes)}
    groups = sorted({None if group is None else r[1] for r in rows}, key=lambda g: (g is None, g))
    out = {}
    iu = np.triu_indices(d)
    for g in groups:
        n = np.zeros(len(classes))
        mean = np.zeros((len(classes), d))
        comoment = np.zeros((len(classes), d, d))
        for r in rows:
            if r[0] is None or (group is not None and r[1] != g):
                continue
            k = index[r[0]]
            n[k] = rows_k = float(r[off])
            counts = r[off + 1: off + 1 + d]
            for j, c in enumerate(counts):
                if c != rows_k:
                    raise null_feature_error(features[j], where)
            mu = np.array(r[off + 1 + d: off + 1 + 2 * d], dtype=float)
            cov = np.zeros((d, d))
            cov[iu] = np.array(r[off + 1 + 2 * d:], dtype=float)
            bad = ~(np.isfinite(mu) & np.isfinite(np.diag(cov)))
            if bad.any() or not np.all(np.isfinite(cov)):
                j = int(np.argmax(bad)) if bad.any() else int(np.argmax(~np.all(np.isfinite(cov + cov.T), axis=0)))
                what = "mean" if not np.isfinite(mu[j]) else "variance"
                raise unsummable_error(con, source, label, features[j], r[0], what)
            cov = cov + np.triu(cov, 1).T
            mean[k] = mu
            comoment[k] = cov * rows_k
        out[g] = JointMoments(list(classes), n, mean, comoment, null_rows.get(g, 0))
    return classes, out


# -- numerics --------------------------------------------------------------------------------
def _equilibrated_cholesky(S: np.ndarray, what: str, fix: str, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """``S = D⁻¹ L̃ L̃ᵀ D⁻¹`` with ``D = diag(S)^-½``: returns ``(L̃, D)``.

    Raises a one-line error when S is singular to working precision, naming the constant
    column or the collinear ones (the largest components of the eigenvector of the
    smallest eigenvalue) and ``fix``.
    """
    diag = np.diag(S).copy()
    if np.any(diag <= 0):
        raise SqlnbError(f"{what} has zero variance in column {names[int(np.argmax(diag <= 0))]!r}; {fix}")
    D = 1.0 / np.sqrt(diag)
    St = S * np.outer(D, D)
    eig, vec = np.linalg.eigh(St)
    if eig[0] <= len(D) * np.finfo(float).eps * eig[-1]:
        v = np.abs(vec[:, 0])
        cols = ", ".join(repr(names[j]) for j in np.flatnonzero(v >= 0.1 * v.max())[:5])
        raise SqlnbError(f"{what} is singular (collinear columns {cols}); {fix}")
    return np.linalg.cholesky(St), D


def _check_fraction(name: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not (0.0 <= float(v) <= 1.0):
        raise SqlnbError(f"{name} must be a number between 0 and 1, not {v!r}")
    return float(v)


class _Discriminant(DenseModel):
    """Shared by LDA and QDA: the moments, the priors, storage."""

    _param_names: tuple[str, ...] = ()

    def __init__(self, label: str, label_type: str, features: Mapping[str, str], moments: JointMoments,
                 priors: Any = None, report: dict | None = None, **params):
        self.label = label
        self.label_type = label_type
        self.features = dict(features)
        self.moments = moments
        self.report = dict(report or {})
        self.params = {k: params.get(k, v) for k, v in self._defaults().items()}
        # Validated and copied now: the model never keeps (or later reads) the caller's array.
        self.priors = own_prior(priors, self.classes)
        self.priors_ = resolve_priors(self.priors, self.classes, moments.n)
        self._check()
        self._fitted: dict | None = None
        self.fitted()  # solve now: a singular covariance fails at fit, not at first use

    @classmethod
    def _defaults(cls) -> dict:
        raise NotImplementedError

    def _check(self) -> None:
        empty = [c for c, n in zip(self.classes, self.moments.n) if n == 0]
        if empty:
            raise SqlnbError(f"class {empty[0]!r} has no training rows; {self.kind.upper()} needs a mean per class")

    @property
    def classes(self) -> list:
        return self.moments.classes

    @property
    def means_(self) -> np.ndarray:
        """Class means, (K, d)."""
        return self.moments.mean

    def with_params(self, **changes) -> "_Discriminant":
        """The same statistics under other hyperparameters (no data is read)."""
        unknown = set(changes) - set(self._defaults()) - {"priors"}
        if unknown:
            raise SqlnbError(f"unknown {self.kind} parameter {sorted(unknown)[0]!r}; "
                             f"choose from: {', '.join([*self._defaults(), 'priors'])}")
        params = dict(self.params)
        params.update({k: v for k, v in changes.items() if k != "priors"})
        return type(self)(self.label, self.label_type, self.features, self.moments,
                          changes.get("priors", self.priors), self.report, **params)

    def merge(self, other: "_Discriminant | JointMoments") -> "_Discriminant":
        """This model updated with another fit's moments (exactly the refit on the union)."""
        moments = other.moments if isinstance(other, _Discriminant) else other
        merged = self.moments.merge(moments)
        report = dict(self.report, rows=merged.n_rows, null_label_rows=merged.null_label_rows)
        return type(self)(self.label, self.label_type, self.features, merged, self.priors, report, **self.params)

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return (f"{type(self).__name__}(label={self.label!r}, classes={self.classes!r}, "
                f"features={len(self.features)}, rows={self.moments.n_rows}, {params})")

    # -- storage ------------------------------------------------------------------------
    def metadata(self) -> dict:
        meta = self._base_metadata()
        meta.update(self.params)
        meta["priors"] = priors_to_json(self.priors, self.classes)
        return meta

    def parameter_tables(self) -> dict:
        """``classes`` (typed labels, row counts), ``means`` (class, feature, value) and
        ``comoments`` (class, i, j, value) for ``i <= j``: the sufficient statistics, from
        which the solve is redone on load (so a loaded model is bit-identical)."""
        import pyarrow as pa

        from sqlnb.store import arrow  # arrow.array: pyarrow.array without importing pandas
        K, d = self.moments.mean.shape
        ks, js = np.meshgrid(np.arange(K), np.arange(d), indexing="ij")
        iu, ju = np.triu_indices(d)
        return {
            "classes": self._class_table(n=self.moments.n),
            "means": (pa.table({"class_index": arrow.array(ks.ravel(), pa.int32()),
                                "feature_index": arrow.array(js.ravel(), pa.int32()),
                                "value": arrow.array(self.moments.mean.ravel(), pa.float64())}), {}),
            "comoments": (pa.table({"class_index": arrow.array(np.repeat(np.arange(K), len(iu)), pa.int32()),
                                    "i": arrow.array(np.tile(iu, K), pa.int32()),
                                    "j": arrow.array(np.tile(ju, K), pa.int32()),
                                    "value": arrow.array(self.moments.comoment[:, iu, ju].ravel(), pa.float64())}), {}),
        }

    @classmethod
    def from_tables(cls, meta: dict, tables: dict) -> "_Discriminant":
        classes, ct = cls._classes_from(tables)
        features = cls._features_from(meta)
        K, d = len(classes), len(features)
        mean = np.zeros((K, d))
        m = tables["means"].to_pydict()
        mean[m["class_index"], m["feature_index"]] = m["value"]
        comoment = np.zeros((K, d, d))
        c = tables["comoments"].to_pydict()
        comoment[c["class_index"], c["i"], c["j"]] = c["value"]
        comoment[c["class_index"], c["j"], c["i"]] = c["value"]
        report = meta["report"]
        moments = JointMoments(classes, np.array(ct["n"], dtype=float), mean, comoment,
                               int(report.get("null_label_rows", 0)))
        params = {k: meta[k] for k in cls._defaults() if k in meta}
        return cls(meta["label"], meta["label_type"], features, moments,
                   priors_from_json(meta.get("priors"), classes), report, **params)


class LDA(_Discriminant):
    """Linear discriminant analysis: one covariance shared by all classes.

    Build one with :func:`sqlnb.fit_lda`. Probabilities equal scikit-learn's
    ``LinearDiscriminantAnalysis(solver='lsqr', shrinkage=..., priors=...)``.

    Attributes
    ----------
    moments : JointMoments
        The sufficient statistics.
    params : dict
        ``{"shrinkage": float or None}``.
    priors_ : ndarray
        Class priors in use.
    """

    kind = "lda"

    @classmethod
    def _defaults(cls) -> dict:
        return {"shrinkage": None}

    def _check(self) -> None:
        super()._check()
        if np.all(self.moments.n <= 1):
            # scikit-learn: "The number of samples must be more than the number of classes."
            raise SqlnbError("every class has a single training row, so LDA has no within-class covariance "
                             "(shrinkage cannot help); give at least one class two rows or more")
        s = self.params["shrinkage"]
        if isinstance(s, str):
            raise SqlnbError(f"shrinkage {s!r} is not supported (Ledoit-Wolf needs fourth moments); "
                             "give a number between 0 and 1")
        if s is not None:
            self.params["shrinkage"] = _check_fraction("shrinkage", s)

    def class_covariances(self) -> np.ndarray:
        """``C_k``, shrunk towards ``(tr C_k / d)·I`` when ``shrinkage`` is set."""
        C = self.moments.covariances()
        s = self.params["shrinkage"]
        if s is not None:
            d = C.shape[1]
            mu = np.trace(C, axis1=1, axis2=2) / d
            C = (1.0 - s) * C + s * mu[:, None, None] * np.eye(d)
        return C

    @property
    def covariance_(self) -> np.ndarray:
        """The pooled covariance ``Σ = Σ_k π_k C_k``."""
        return np.einsum("k,kij->ij", self.priors_, self.class_covariances())

    def fitted(self) -> dict:
        """``centre`` m, ``coef`` a_k (K, d) and ``intercept`` of the centred scores."""
        if self._fitted is None:
            L, D = _equilibrated_cholesky(
                self.covariance_, "the pooled covariance",
                "set shrinkage > 0 (--shrinkage) or leave out constant or collinear columns", self.feature_names)
            n = self.moments.n
            centre = n @ self.moments.mean / n.sum()
            V = (self.moments.mean - centre).T * D[:, None]          # D (μ_k − m), (d, K)
            A = np.linalg.solve(L.T, np.linalg.solve(L, V)) * D[:, None]  # Σ⁻¹ (μ_k − m)
            with np.errstate(divide="ignore"):
                intercept = -0.5 * np.sum((self.moments.mean - centre).T * A, axis=0) + np.log(self.priors_)
            self._fitted = {"centre": centre, "coef": A.T, "intercept": intercept}
        return self._fitted

    @property
    def coef_(self) -> np.ndarray:
        """scikit-learn's ``Σ⁻¹ μ_k`` (K, d) (before its two-class collapse)."""
        f = self.fitted()
        return f["coef"] + np.linalg.solve(self.covariance_, f["centre"])[None, :]

    @property
    def intercept_(self) -> np.ndarray:
        """scikit-learn's ``−½ μ_kᵀ Σ⁻¹ μ_k + ln π_k``."""
        with np.errstate(divide="ignore"):
            return -0.5 * np.sum(self.means_ * self.coef_, axis=1) + np.log(self.priors_)

    def reference(self) -> np.ndarray:
        return self.fitted()["centre"]

    def class_terms(self, input_types=None, dialect=None, dot: bool | None = None,
                    reference: np.ndarray | None = None) -> list[ClassScore]:
        """``(x − m)·a_k + intercept_k``: a term per feature, or in the list shape
        (:mod:`sqlnb.models.dense`) one dot product over the prelude's ``x − r``."""
        f = self.fitted()
        if listed(self.features, dialect, dot):
            r = self.reference() if reference is None else reference
            return [linear_list_score(self.features, r, f["centre"], f["coef"][k], f["intercept"][k])
                    for k in range(len(self.classes))]
        return [linear_class_score(self.features, f["centre"], f["coef"][k], f["intercept"][k])
                for k in range(len(self.classes))]

    def feature_terms(self, input_types=None, dialect=None):
        f = self.fitted()
        return [linear_feature_terms(self.features, f["centre"], f["coef"][k], f["intercept"][k])
                for k in range(len(self.classes))]


class QDA(_Discriminant):
    """Quadratic discriminant analysis: a covariance per class.

    Build one with :func:`sqlnb.fit_qda`. Probabilities equal scikit-learn's
    ``QuadraticDiscriminantAnalysis(reg_param=..., priors=...)``.
    """

    kind = "qda"

    @classmethod
    def _defaults(cls) -> dict:
        return {"reg_param": 0.0}

    def _check(self) -> None:
        super()._check()
        self.params["reg_param"] = r = _check_fraction("reg_param", self.params["reg_param"])
        single = [c for c, n in zip(self.classes, self.moments.n) if n == 1]
        if single and r == 0.0:
            # scikit-learn: "y has only 1 sample in class ..., covariance is ill defined"
            raise SqlnbError(f"class {single[0]!r} has a single training row, so its covariance is undefined; "
                             "QDA needs two rows per class, or set reg_param > 0 (--reg-param)")

    def class_covariances(self) -> np.ndarray:
        """``C_k' = (1 − r)·C_k + r·I``."""
        r = self.params["reg_param"]
        C = self.moments.covariances()
        return (1.0 - r) * C + r * np.eye(C.shape[1])

    def fitted(self) -> dict:
        """``whiten`` ``L_k⁻¹`` (K, d, d) lower triangular and the per-class ``constant``."""
        if self._fitted is None:
            d = len(self.features)
            whiten, const = [], []
            for c, n, C in zip(self.classes, self.moments.n, self.class_covariances()):
                few = f" ({int(n)} rows for {d} columns)" if n <= d else ""
                Lt, D = _equilibrated_cholesky(
                    C, f"the covariance of class {c!r}{few}",
                    "set reg_param > 0 (--reg-param) or leave out constant or collinear columns", self.feature_names)
                # C = (D⁻¹L̃)(D⁻¹L̃)ᵀ, so L⁻¹ = L̃⁻¹·D and ln|C| = 2 Σ ln diag L̃ − 2 Σ ln D.
                Linv = np.linalg.solve(Lt, np.eye(d)) * D[None, :]
                whiten.append(np.tril(Linv))
                logdet = 2.0 * np.sum(np.log(np.diag(Lt))) - 2.0 * np.sum(np.log(D))
                const.append(-0.5 * logdet - 0.5 * d * math.log(2.0 * math.pi))
            with np.errstate(divide="ignore"):
                constant = np.array(const) + np.log(self.priors_)
            self._fitted = {"whiten": np.array(whiten), "constant": constant}
        return self._fitted

    def feature_terms(self, input_types=None, dialect=None):
        raise SqlnbError("explanations (--explain) are not defined for QDA: its score is a quadratic form in all "
                         "features together, with no per-feature share; explain an LDA, logistic regression or "
                         "naive Bayes model instead")

    def reference(self) -> np.ndarray:
        """The mean of the class means (the list shape's ``r``)."""
        return np.mean(self.moments.mean, axis=0)

    def class_terms(self, input_types=None, dialect=None, dot: bool | None = None,
                    reference: np.ndarray | None = None) -> list[ClassScore]:
        """``constant_k − ½ Σ_m z_m²`` with ``z = L_k⁻¹ (x − μ_k)``; the terms are the
        constant and each ``−½ z_m²`` (halving is exact, so their sum equals the whole
        expression up to the order of the additions).

        In the list shape (:mod:`sqlnb.models.dense`) each ``z_m`` is one dot product over
        the prelude's ``v = x − r``: ``z_m = v·W_m − W_m·(μ_k − r)`` (``W = L_k⁻¹``), d of
        them per class instead of d(d+1)/2 products."""
        f = self.fitted()
        names = self.feature_names
        lists = listed(self.features, dialect, dot)
        r = (self.reference() if reference is None else np.asarray(reference, dtype=float)) if lists else None
        scores = []
        for k in range(len(self.classes)):
            mu = self.moments.mean[k]
            W = f["whiten"][k]
            if lists:
                offset = W @ (mu - r)
                zs = [sql.paren(exp.Sub(this=list_dot(W[m]), expression=sql.dbl(float(offset[m]))))
                      for m in range(len(names))]
            else:
                diff = [exp.Sub(this=value(n, self.features[n]), expression=sql.dbl(float(mu[j])))
                        for j, n in enumerate(names)]
                zs = [sql.paren(sql.add(exp.Mul(this=sql.paren(diff[j].copy()), expression=sql.dbl(float(W[m][j])))
                                        for j in range(m + 1) if W[m][j] != 0.0))
                      for m in range(len(names))]
            squares = [exp.Pow(this=z, expression=sql.dbl(2.0)) for z in zs]
            constant = sql.dbl(float(f["constant"][k]))
            quad = exp.Mul(this=sql.dbl(-0.5), expression=sql.paren(sql.add([q.copy() for q in squares])))
            terms = [constant.copy()] + [exp.Mul(this=sql.dbl(-0.5), expression=q) for q in squares]
            guard = list_guard() if lists else complete(self.features)
            whole = exp.Case(ifs=[exp.If(this=guard.copy(), true=exp.Add(this=constant, expression=quad))])
            scores.append(ClassScore(tuple(terms), guard=guard, whole=whole))
        return scores

    def list_class_scores(self, reference: np.ndarray) -> list[exp.Expression] | None:
        """The whole class scores of :meth:`class_terms`'s list shape about ``reference``,
        each ``z_m`` read from a matrix literal (:func:`sqlnb.models.dense.squared_norm`)
        instead of a dot product node of its own: the same doubles in a few list
        expressions, what cross-validation's pooled query of many fold models needs. None
        where that form does not apply (too many features)."""
        f = self.fitted()
        r = np.asarray(reference, dtype=float)
        out = []
        for k in range(len(self.classes)):
            W = f["whiten"][k]
            norm = squared_norm(W, W @ (self.moments.mean[k] - r))
            if norm is None:
                return None
            quad = exp.Mul(this=sql.dbl(-0.5), expression=sql.paren(norm))
            out.append(exp.Case(ifs=[exp.If(this=list_guard(), true=exp.Add(this=sql.dbl(float(f["constant"][k])),
                                                                            expression=quad))]))
        return out


register_kind(LDA.kind, LDA)
register_kind(QDA.kind, QDA)
