"""L2-penalised logistic regression, fitted in numpy, scored in SQL.

The one model kind fitted Python-side: it has no sufficient statistics, so the labelled
rows are read once from the source into numpy (:func:`sqlnb.models.dense.read_rows`). The
objective is exactly scikit-learn's ``LogisticRegression(C=C)`` (lbfgs, intercept
unpenalised)::

    K = 2:   min  C·Σ_i ln(1 + exp(−s_i (w·x_i + b))) + ½‖w‖²         s_i = ±1
    K ≥ 3:   min  C·Σ_i [ln Σ_k exp(W_k·x_i + b_k) − (W_{y_i}·x_i + b_{y_i})] + ½‖W‖²_F

(two classes are the binary model, not a two-row softmax: with the penalty on all K rows
the two differ). With ``standardize=True`` ``x`` is first replaced by
``(x − mean)/std`` (population std, 1 for a constant column): exactly
``make_pipeline(StandardScaler(), LogisticRegression(C=C))``.

Solver: Newton's method with the exact Hessian and a backtracking (Armijo) line search,
iterated until the step is below 1e-12 relative (quadratic convergence makes the last
steps essentially exact), or until two Newton decrements in a row are below f's rounding
level (see :func:`newton`). Internally the columns are centred and scaled,
``u = (x − m)/s`` with ``θ = w·s``, and the penalty is carried over as
``½ Σ_j (σ_j θ_j / s_j)²`` (σ_j = 1, or the standardisation std): the same objective in
other coordinates, so the optimum is unchanged while the Hessian is far better
conditioned. For K ≥ 3 the softmax is invariant to adding a constant to every intercept;
the term ``½ (Σ_k b_k)²`` picks the representative with Σ b_k = 0 without changing any
probability, and makes the Hessian positive definite. Above ``DENSE_LIMIT`` parameters
the Newton system is solved by conjugate gradients with Hessian-vector products instead
of a dense factorisation.

SQL score per class (``a_k = θ_k / s``, in the units of the raw columns)::

    b_k = Σ_j (x_j − m_j)·a_kj + c_k        (b_0 = 0 for two classes)
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from sqlglot import exp

from sqlnb.models.dense import DenseModel, linear_class_score, linear_feature_terms, linear_list_score, listed
from sqlnb.errors import SqlnbError
from sqlnb.models.newton import newton
from sqlnb.models.finish import ClassScore
from sqlnb.store import register_kind



def _log_softmax(Z: np.ndarray) -> np.ndarray:
    Zmax = Z.max(axis=1, keepdims=True)
    return Z - (Zmax + np.log(np.exp(Z - Zmax).sum(axis=1, keepdims=True)))


class _Objective:
    """The penalised loss in the internal coordinates ``u = (x − m)/s``.

    Parameters are a flat vector: for two classes ``[θ (d), c]``; for K ≥ 3 classes
    ``K`` blocks ``[θ_k (d), c_k]``.
    """

    def __init__(self, U: np.ndarray, y: np.ndarray, n_classes: int, C: float, penalty: np.ndarray):
        self.U1 = np.hstack([U, np.ones((U.shape[0], 1))])    # [u, 1]
        self.y = y
        self.K = n_classes
        self.binary = n_classes == 2
        self.C = C
        self.blocks = 1 if self.binary else n_classes
        self.p = self.U1.shape[1]
        # Diagonal of the quadratic term per block: the carried-over L2 weights, 0 for c.
        self.lam = np.append(penalty, 0.0)
        if not self.binary:
            self.Y = np.zeros((U.shape[0], n_classes))
            self.Y[np.arange(U.shape[0]), y] = 1.0

    def size(self) -> int:
        return self.blocks * self.p

    def value_grad(self, beta: np.ndarray) -> tuple[float, np.ndarray, Any]:
        B = beta.reshape(self.blocks, self.p)
        if self.binary:
            z = self.U1 @ B[0]
            # ln(1 + e^z) − y·z, evaluated without overflow.
            loss = np.sum(np.logaddexp(0.0, z) - self.y * z)
            prob = np.exp(-np.logaddexp(0.0, -z))               # σ(z)
            g = self.C * (self.U1.T @ (prob - self.y))
            state = prob
        else:
            Z = self.U1 @ B.T
            logp = _log_softmax(Z)
            loss = -np.sum(logp[np.arange(len(self.y)), self.y])
            P = np.exp(logp)
            g = (self.C * (P - self.Y).T @ self.U1).ravel()
            state = P
        f = self.C * loss + 0.5 * np.sum(self.lam * B * B)
        g = g + (self.lam * B).ravel()
        if not self.binary:
            # ½ (Σ_k c_k)²: fixes the intercepts' free direction (see the module docstring).
            csum = B[:, -1].sum()
            f += 0.5 * csum * csum
            g = g.reshape(self.blocks, self.p)
            g[:, -1] += csum
            g = g.ravel()
        return float(f), g, state

    def hessian(self, state) -> np.ndarray:
        p, n = self.p, self.size()
        H = np.zeros((n, n))
        if self.binary:
            w = state * (1.0 - state)
            H[:] = self.C * (self.U1.T @ (w[:, None] * self.U1))
        else:
            P = state
            for k in range(self.K):
                for l in range(k, self.K):
                    w = P[:, k] * ((k == l) - P[:, l])
                    blk = self.C * (self.U1.T @ (w[:, None] * self.U1))
                    H[k * p:(k + 1) * p, l * p:(l + 1) * p] = blk
                    if l != k:
                        H[l * p:(l + 1) * p, k * p:(k + 1) * p] = blk.T
            last = np.arange(self.K) * p + p - 1
            H[np.ix_(last, last)] += 1.0
        H[np.diag_indices(n)] += np.tile(self.lam, self.blocks)
        return H

    def hess_vec(self, state, v: np.ndarray) -> np.ndarray:
        V = v.reshape(self.blocks, self.p)
        if self.binary:
            w = state * (1.0 - state)
            out = self.C * (self.U1.T @ (w * (self.U1 @ V[0])))[None, :]
        else:
            P = state
            R = self.U1 @ V.T                                  # (n, K)
            S = P * (R - np.sum(P * R, axis=1, keepdims=True))  # Jacobian of softmax · R
            out = self.C * (S.T @ self.U1)
            out[:, -1] += V[:, -1].sum()
        return (out + self.lam * V).ravel()


def _power_of_two_scale(X: np.ndarray) -> np.ndarray:
    """Per column, 2^e with ``max |x| / 2^e`` in [0.5, 1) for columns whose largest
    ``|x|`` passes 2^400 (their squares would pass 2^800, near overflow once summed), else 1."""
    largest = np.max(np.abs(X), axis=0) if len(X) else np.zeros(X.shape[1])
    return np.where(largest > 2.0 ** 400, np.ldexp(1.0, np.frexp(largest)[1]), 1.0)


def fit_arrays(X: np.ndarray, y: np.ndarray, n_classes: int, C: float = 1.0,
               standardize: bool = False) -> dict:
    """Fit on numpy arrays: ``y`` holds class indices 0..K−1 (every class present).

    Returns ``centre`` m (d), ``coef`` (K, d) per raw-column unit, ``intercept`` (K) of
    the centred score ``Σ_j (x_j − m_j)·coef_kj + intercept_k``, plus ``mean`` and
    ``scale`` of the standardisation (zeros and ones without it) and ``iterations``.
    """
    if isinstance(C, bool) or not isinstance(C, (int, float)) or not (np.isfinite(C) and C > 0):
        raise SqlnbError(f"C must be a positive finite number, not {C!r}")
    if not isinstance(standardize, (bool, np.bool_)):  # e.g. cv --grid standardize=yes
        raise SqlnbError(f"standardize must be True or False, not {standardize!r}")
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    # Mean and variance of X / p, p a power of two (exact) bringing a column whose values
    # pass 2^400 back near 1: values near 1e300 are finite, but their squares and
    # variance are not; the standard deviation is, so it is p·std(X / p).
    p = _power_of_two_scale(X)
    mean_p = (X / p).mean(axis=0)
    var_p = (X / p).var(axis=0)
    # Constant columns get scale 1, with StandardScaler's test for "constant up to rounding"
    # (the same for X / p, both sides scale by p²).
    eps = np.finfo(float).eps
    constant = var_p <= n * eps * var_p + (n * mean_p * eps) ** 2
    mean = mean_p * p
    scale = np.where(constant, 1.0, np.sqrt(var_p) * p)
    if standardize:
        # sigma_j = s_j: the pipeline's penalty is ½‖θ‖² on exactly these coordinates.
        sigma, offset = scale, mean
    else:
        sigma, offset = np.ones(d), np.zeros(d)
    U = (X - mean) / scale
    penalty = (sigma / scale) ** 2
    obj = _Objective(U, np.asarray(y), n_classes, float(C), penalty)
    counts = np.bincount(y, minlength=n_classes).astype(float)
    beta0 = np.zeros(obj.size())
    if obj.binary:
        beta0[-1] = np.log(counts[1] / counts[0])
    else:
        logp = np.log(counts / n)
        beta0.reshape(n_classes, -1)[:, -1] = logp - logp.mean()
    beta, iterations = newton(obj, beta0)
    B = beta.reshape(obj.blocks, obj.p)
    theta, c = B[:, :-1], B[:, -1]
    if obj.binary:
        theta = np.vstack([np.zeros(d), theta])
        c = np.array([0.0, c[0]])
    return {"centre": mean, "coef": theta / scale, "intercept": c,
            "mean": offset, "scale": sigma, "iterations": iterations}


class Logistic(DenseModel):
    """Multinomial (K ≥ 3) or binary (K = 2) logistic regression with an L2 penalty.

    Build one with :func:`sqlnb.fit_logistic`. Probabilities equal scikit-learn's
    ``LogisticRegression(C=C)`` (after ``StandardScaler`` with ``standardize=True``).

    Attributes
    ----------
    C : float
        Inverse penalty strength.
    standardize : bool
        Whether the columns were standardised before fitting.
    centre, coef, intercept : ndarray
        The SQL score ``Σ_j (x_j − centre_j)·coef_kj + intercept_k``.
    mean, scale : ndarray
        The standardisation (zeros and ones without it).
    class_n : ndarray
        Training rows per class.
    """

    kind = "logistic"

    def __init__(self, label: str, label_type: str, features: Mapping[str, str], classes: Sequence,
                 fitted: Mapping[str, Any], class_n: Sequence[float], C: float = 1.0,
                 standardize: bool = False, report: dict | None = None):
        self.label = label
        self.label_type = label_type
        self.features = dict(features)
        self._classes = list(classes)
        # np.array copies: the model never shares an array with its caller.
        self.centre = np.array(fitted["centre"], dtype=float)
        self.coef = np.array(fitted["coef"], dtype=float)
        self.intercept = np.array(fitted["intercept"], dtype=float)
        self.mean = np.array(fitted["mean"], dtype=float)
        self.scale = np.array(fitted["scale"], dtype=float)
        self.class_n = np.array(class_n, dtype=float)
        self.C = float(C)
        self.standardize = bool(standardize)
        self.report = dict(report or {})

    @classmethod
    def fit_arrays(cls, label: str, label_type: str, features: Mapping[str, str], labels: Sequence,
                   X: np.ndarray, classes: Sequence, C: float = 1.0, standardize: bool = False,
                   report: dict | None = None) -> "Logistic":
        """Fit on rows already read (``labels`` in the class list ``classes``)."""
        index = {c: k for k, c in enumerate(classes)}
        y = np.fromiter((index[v] for v in labels), dtype=np.int64, count=len(labels))
        counts = np.bincount(y, minlength=len(classes)).astype(float)
        if np.any(counts == 0):
            missing = classes[int(np.argmin(counts))]
            raise SqlnbError(f"class {missing!r} has no training rows; logistic regression needs every class")
        fitted = fit_arrays(X, y, len(classes), C, standardize)
        report = dict(report or {}, iterations=fitted["iterations"])
        return cls(label, label_type, features, classes, fitted, counts, C, standardize, report)

    @property
    def classes(self) -> list:
        return self._classes

    @property
    def coef_(self) -> np.ndarray:
        """scikit-learn's ``coef_`` in the units it was fitted in (standardised columns
        with ``standardize=True``); one row for two classes."""
        w = self.coef * np.where(self.standardize, self.scale, 1.0)
        return w[1:] - w[:1] if len(self.classes) == 2 else w

    @property
    def intercept_(self) -> np.ndarray:
        """scikit-learn's ``intercept_`` (one value for two classes)."""
        shift = self.centre - (self.mean if self.standardize else 0.0)
        b = self.intercept - self.coef @ shift
        return b[1:] - b[:1] if len(self.classes) == 2 else b

    def with_params(self, **changes):
        """Not available: the model keeps no statistics to re-derive itself from."""
        raise SqlnbError("logistic regression keeps no statistics: refit it with the new C "
                         "(sqlnb.fit_logistic, or sqlnb.workflows.cv for a grid)")

    def __repr__(self) -> str:
        return (f"Logistic(label={self.label!r}, classes={self.classes!r}, features={len(self.features)}, "
                f"rows={int(self.class_n.sum())}, C={self.C!r}, standardize={self.standardize!r})")

    def reference(self) -> np.ndarray:
        return self.centre

    def class_terms(self, input_types=None, dialect=None, dot: bool | None = None,
                    reference: np.ndarray | None = None) -> list[ClassScore]:
        """``(x − m)·a_k + c_k``: a term per feature, or in the list shape
        (:mod:`sqlnb.models.dense`) one dot product over the prelude's ``x − r``."""
        if listed(self.features, dialect, dot):
            r = self.centre if reference is None else reference
            return [linear_list_score(self.features, r, self.centre, self.coef[k], self.intercept[k])
                    for k in range(len(self.classes))]
        return [linear_class_score(self.features, self.centre, self.coef[k], self.intercept[k])
                for k in range(len(self.classes))]

    def feature_terms(self, input_types=None, dialect=None):
        return [linear_feature_terms(self.features, self.centre, self.coef[k], self.intercept[k])
                for k in range(len(self.classes))]

    # -- storage ------------------------------------------------------------------------
    def metadata(self) -> dict:
        meta = self._base_metadata()
        meta.update({"C": self.C, "standardize": self.standardize})
        return meta

    def parameter_tables(self) -> dict:
        """``classes`` (typed label, rows, intercept), ``columns`` (feature index, centre,
        standardisation mean and scale) and ``coefficients`` (class, feature, value)."""
        import pyarrow as pa

        from sqlnb.store import arrow  # arrow.array: pyarrow.array without importing pandas
        K, d = self.coef.shape
        return {
            "classes": self._class_table(n=self.class_n, intercept=self.intercept),
            "columns": (pa.table({"feature_index": arrow.array(range(d), pa.int32()),
                                  "centre": arrow.array(self.centre, pa.float64()),
                                  "mean": arrow.array(self.mean, pa.float64()),
                                  "scale": arrow.array(self.scale, pa.float64())}), {}),
            "coefficients": (pa.table({"class_index": arrow.array(np.repeat(np.arange(K), d), pa.int32()),
                                       "feature_index": arrow.array(np.tile(np.arange(d), K), pa.int32()),
                                       "value": arrow.array(self.coef.ravel(), pa.float64())}), {}),
        }

    @classmethod
    def from_tables(cls, meta: dict, tables: dict) -> "Logistic":
        classes, ct = cls._classes_from(tables)
        features = cls._features_from(meta)
        cols = tables["columns"].sort_by("feature_index").to_pydict()
        coef = np.zeros((len(classes), len(features)))
        c = tables["coefficients"].to_pydict()
        coef[c["class_index"], c["feature_index"]] = c["value"]
        fitted = {"centre": cols["centre"], "coef": coef, "intercept": ct["intercept"],
                  "mean": cols["mean"], "scale": cols["scale"]}
        return cls(meta["label"], meta["label_type"], features, classes, fitted, ct["n"],
                   meta["C"], meta["standardize"], meta["report"])


register_kind(Logistic.kind, Logistic)
