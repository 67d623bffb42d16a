"""Probability calibration: a map of the class scores fitted on held-out labelled rows,
stored with the model as tables and applied in the scoring SELECT.

Every model kind gives one score ``b_c`` per class (:mod:`sqlnb.models.finish`); a
calibrator replaces them by calibrated scores ``b'_c`` *before* the shared finish, so the
log-sum-exp, probabilities and argmax stay the same code for every kind and dialect::

    temperature   b'_c = b_c / T                         any number of classes; T > 0
    platt         z = A·s + B,  s = b_1 − b_0            binary (classes in sorted order)
                  b'_1 = min(z, 0),  b'_0 = min(−z, 0)   so that p'_1 = σ(z), never inf − inf
    isotonic      p = f(s), f non-decreasing, piecewise linear between the fitted
                  thresholds and constant outside them (scikit-learn's
                  IsotonicRegression(out_of_bounds="clip"))
                  b'_1 = ln p,  b'_0 = ln(1 − p)          ln 0 written as −inf
    venn-abers    the inductive Venn–Abers predictor (:mod:`sqlnb.models.venn_abers`):
                  an interval [p0, p1] per class, b'_c = ln p1 − ln(1 − p0 + p1)
                  (two classes, on s; more, one-vs-rest on b_c − max_{k≠c} b_k)

The calibrated scores are what the scoring SELECT then calls ``jll_<class>`` (and
``log_evidence`` is their log-sum-exp, no longer ln p(x)). Temperature scaling keeps every
prediction; Platt and isotonic predict the class whose calibrated probability is larger.
A row whose scores are NULL or undefined stays NULL.

Fitting (:func:`calibrate`) reads the held-out rows through the model's own scoring
SELECT, uncalibrated, in DuckDB, and aggregates there:

* every method: one pass checks that every label is a class of the model, a second scores
  the rows once into a temporary table (class index and raw scores);
* temperature: then Newton's method on β = 1/T over that table, one aggregate query per
  step (the negative log-likelihood is convex in β), halving a step that would not lower it;
* platt: Newton on (A, B) in the same way, with Platt's smoothed targets
  t₊ = (N₊ + 1)/(N₊ + 2) and t₋ = 1/(N₋ + 2) — the objective of scikit-learn's
  ``CalibratedClassifierCV(method="sigmoid")``, here on the log-odds ``s``;
* isotonic: one ``GROUP BY s`` (rows and positives per distinct score, so at most one row
  per distinct score reaches Python), then pool-adjacent-violators on those groups;
* venn-abers: the same ``GROUP BY`` per calibrated class, then the step functions p0 and p1
  by the fast algorithm (:meth:`sqlnb.models.venn_abers.Steps.fit`).

Rows with a NULL label are skipped; so are rows whose scores are not all finite (NULL for an
incomplete row of LDA, QDA or logistic regression; −inf for a class ruled out by the MLE
estimator): they carry no information a calibrator can fit.

Degenerate held-out rows are refused before any optimiser runs, in one line saying why:
rows of one class (every method; scikit-learn's ``CalibratedClassifierCV`` fails on them
too); for Platt, rows that all have the same log-odds ``s`` (only A·s + B would be
determined); for temperature, rows whose scores do not vary, or whose best temperature is
T = ∞ (the labelled class scores no higher than the average class: uniform
probabilities) or T = 0 (every row's own class scores highest: probabilities 0 and 1).
Isotonic regression on a constant ``s`` is a constant, the held-out frequency of class 1,
as scikit-learn's.
"""

from __future__ import annotations

import copy
import math
import uuid
from dataclasses import dataclass, field
from typing import Any, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError, UpdateWarning, suggest, warn
from sqlnb.models.finish import class_columns
from sqlnb.models.venn_abers import PART as VENN_ABERS_PART, VennAbers, fit as fit_venn_abers, scores as ovr_scores
from sqlnb.source import read_with, resolve
from sqlnb.engines.duckdb import new_connection
from sqlnb.store.catalog import PROVENANCE_COLUMN

#: Calibration methods.
METHODS = ("temperature", "platt", "isotonic", "venn-abers")
#: The methods that need exactly two classes.
BINARY = ("platt", "isotonic")
#: Helper columns of the calibration stages (besides ``uncalibrated_<class>``).
RAW_PREFIX, LOGIT_COLUMN, PROBA_COLUMN = "uncalibrated_", "calibration_logit", "calibration_proba"
#: Stored parts: the method and its numbers (one row), the isotonic thresholds.
PART, STEPS_PART = "calibration", "calibration_steps"
#: Newton iterations before giving up (each one aggregate query).
MAX_STEPS = 100


@dataclass(frozen=True)
class Calibration:
    """A fitted calibrator (see the module docstring for the formulas).

    Attributes
    ----------
    method : {"temperature", "platt", "isotonic"}
    temperature : float, optional
        T of temperature scaling.
    slope, intercept : float, optional
        Platt's A and B (on the log-odds ``s = b_1 − b_0``).
    thresholds, probas : tuple of float
        Isotonic: the fitted function's breakpoints ``s_j`` (increasing) and its values there.
    venn_abers : VennAbers, optional
        Venn–Abers: the step functions p0 and p1 of each calibrated class.
    rows : int
        Held-out rows it was fitted on.
    source : str
        Where they came from.
    """

    method: str
    temperature: float | None = None
    slope: float | None = None
    intercept: float | None = None
    thresholds: tuple[float, ...] = field(default=())
    probas: tuple[float, ...] = field(default=())
    rows: int = 0
    source: str = ""
    venn_abers: VennAbers | None = None

    # -- scoring -----------------------------------------------------------------------
    @staticmethod
    def raw_columns(classes: Sequence[Any]) -> list[str]:
        """Names the uncalibrated class scores take in the scoring SELECT."""
        return class_columns(RAW_PREFIX, classes)

    def helper_columns(self, classes: Sequence[Any]) -> list[str]:
        """Every column the calibration stages add besides ``jll_<class>``."""
        if self.venn_abers is not None:
            return self.raw_columns(classes) + self.venn_abers.helper_columns(classes)
        extra = {"temperature": [], "platt": [LOGIT_COLUMN], "isotonic": [LOGIT_COLUMN, PROBA_COLUMN]}
        return self.raw_columns(classes) + extra[self.method]

    def output_columns(self, classes: Sequence[Any]) -> list[str]:
        """Columns the calibrator adds beside the probabilities: Venn–Abers's intervals."""
        return self.venn_abers.output_columns(classes) if self.venn_abers is not None else []

    def stages(self, classes: Sequence[Any], dialect: str = "duckdb") -> list[list[tuple[str, exp.Expression]]]:
        """SELECT lists, each over the previous one's columns (the first over the raw scores
        ``uncalibrated_<class>``), for ``dialect``; the last defines ``jll_<class>``. An
        item ``(name, None)`` drops column ``name`` from that SELECT's ``*`` (Venn–Abers's
        lists, DuckDB only)."""
        raw = [sql.col(n) for n in self.raw_columns(classes)]
        if self.venn_abers is not None:
            return self.venn_abers.stages(raw, classes, dialect)
        jll = class_columns("jll_", classes)
        if self.method == "temperature":
            return [[(n, exp.Div(this=b, expression=sql.dbl(self.temperature))) for n, b in zip(jll, raw)]]
        s = exp.Sub(this=raw[1], expression=raw[0])
        z = sql.col(LOGIT_COLUMN)
        if self.method == "platt":
            logit = exp.Add(this=exp.Mul(this=sql.dbl(self.slope), expression=exp.Paren(this=s)),
                            expression=sql.dbl(self.intercept))
            # min(z, 0) and min(−z, 0) by CASE: a NULL z gives NULL for both (LEAST skips NULLs
            # in some engines), and an infinite z gives 0 and −inf instead of inf − inf.
            pos, nonpos = exp.GT(this=z.copy(), expression=sql.dbl(0.0)), exp.LTE(this=z.copy(), expression=sql.dbl(0.0))
            return [[(LOGIT_COLUMN, logit)],
                    [(jll[0], exp.Case(ifs=[exp.If(this=pos, true=exp.Neg(this=z.copy())),
                                            exp.If(this=nonpos, true=sql.dbl(0.0))])),
                     (jll[1], exp.Case(ifs=[exp.If(this=pos.copy(), true=sql.dbl(0.0)),
                                            exp.If(this=nonpos.copy(), true=z.copy())]))]]
        p = sql.col(PROBA_COLUMN)
        one, zero, neg_inf = sql.dbl(1.0), sql.dbl(0.0), sql.dbl(-math.inf)
        ln_1_minus_p = exp.Case(ifs=[exp.If(this=exp.LT(this=p.copy(), expression=one.copy()),
                                            true=exp.Ln(this=exp.Sub(this=one.copy(), expression=p.copy()))),
                                     exp.If(this=exp.GTE(this=p.copy(), expression=one.copy()), true=neg_inf.copy())])
        ln_p = exp.Case(ifs=[exp.If(this=exp.GT(this=p.copy(), expression=zero.copy()), true=exp.Ln(this=p.copy())),
                             exp.If(this=exp.LTE(this=p.copy(), expression=zero.copy()), true=neg_inf.copy())])
        return [[(LOGIT_COLUMN, s)], [(PROBA_COLUMN, self._interpolation(z))],
                [(jll[0], ln_1_minus_p), (jll[1], ln_p)]]

    def _interpolation(self, s: exp.Expression) -> exp.Expression:
        """The isotonic function of ``s`` as a CASE: constant below the first and above the
        last threshold, linear between neighbours (``slope·(s − s_j) + p_j``, as scipy's
        interp1d, which scikit-learn uses). The segment is found by a balanced tree of
        comparisons, ~log₂ m per row rather than m; NULL or NaN ``s`` gives NULL."""
        xs, ys = self.thresholds, self.probas
        m = len(xs)

        def piece(j: int) -> exp.Expression:
            slope = (ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j])
            if slope == 0.0:
                return sql.dbl(ys[j])
            d = exp.Paren(this=exp.Sub(this=s.copy(), expression=sql.dbl(xs[j])))
            return exp.Add(this=exp.Mul(this=sql.dbl(slope), expression=d), expression=sql.dbl(ys[j]))

        def segments(lo: int, hi: int) -> exp.Expression:  # segment j lies between xs[j] and xs[j + 1]
            if lo == hi:
                return piece(lo)
            mid = (lo + hi + 1) // 2
            return exp.Case(ifs=[exp.If(this=exp.LT(this=s.copy(), expression=sql.dbl(xs[mid])),
                                        true=segments(lo, mid - 1))], default=segments(mid, hi))

        undefined = sql.missing(s.copy())
        ifs = [exp.If(this=undefined, true=exp.null()),
               exp.If(this=exp.LTE(this=s.copy(), expression=sql.dbl(xs[0])), true=sql.dbl(ys[0]))]
        if m == 1:
            return exp.Case(ifs=ifs, default=sql.dbl(ys[0]))
        ifs.append(exp.If(this=exp.GTE(this=s.copy(), expression=sql.dbl(xs[-1])), true=sql.dbl(ys[-1])))
        return exp.Case(ifs=ifs, default=segments(0, m - 2))

    # -- storage ------------------------------------------------------------------------
    def tables(self) -> dict[str, tuple[Any, dict]]:
        """``calibration`` (method, temperature, slope, intercept, rows, source: one row) and,
        for isotonic, ``calibration_steps`` (position, threshold, proba); for Venn–Abers
        ``calibration_venn_abers`` (:meth:`~sqlnb.models.venn_abers.VennAbers.table`)."""
        import pyarrow as pa
        parts = {PART: (pa.table({
            "method": pa.array([self.method], pa.string()),
            "temperature": pa.array([self.temperature], pa.float64()),
            "slope": pa.array([self.slope], pa.float64()),
            "intercept": pa.array([self.intercept], pa.float64()),
            "rows": pa.array([self.rows], pa.int64()),
            PROVENANCE_COLUMN: pa.array([self.source], pa.string()),
        }), {})}
        if self.method == "isotonic":
            parts[STEPS_PART] = (pa.table({
                "position": pa.array(range(len(self.thresholds)), pa.int32()),
                "threshold": pa.array(self.thresholds, pa.float64()),
                "proba": pa.array(self.probas, pa.float64()),
            }), {})
        if self.venn_abers is not None:
            parts[VENN_ABERS_PART] = (self.venn_abers.table(), {})
        return parts

    @classmethod
    def from_tables(cls, tables: dict[str, Any]) -> "Calibration | None":
        """The calibrator stored among a model's parts, or None."""
        if PART not in tables:
            return None
        (row,) = tables[PART].to_pylist()
        steps = sorted(tables[STEPS_PART].to_pylist(), key=lambda r: r["position"]) if STEPS_PART in tables else []
        return cls(row["method"], row["temperature"], row["slope"], row["intercept"],
                   tuple(r["threshold"] for r in steps), tuple(r["proba"] for r in steps),
                   int(row["rows"]), row[PROVENANCE_COLUMN],
                   VennAbers.from_table(tables[VENN_ABERS_PART]) if VENN_ABERS_PART in tables else None)

    def describe(self) -> dict:
        """JSON-ready: the method, its numbers and the held-out rows."""
        d: dict[str, Any] = {"method": self.method}
        if self.method == "temperature":
            d["temperature"] = self.temperature
        elif self.method == "platt":
            d.update(slope=self.slope, intercept=self.intercept)
        elif self.venn_abers is not None:
            d.update(self.venn_abers.describe())
        else:
            d["thresholds"] = len(self.thresholds)
        return d | {"rows": self.rows, "source": self.source}

    def summary(self) -> str:
        """One line for the CLI (as ``sqlnb show`` prints it)."""
        return summary(self.describe())


def summary(described: dict) -> str:
    """:meth:`Calibration.describe`'s dict as one line: method, numbers, rows, source."""
    d = described
    what = {"temperature": lambda: f"T = {d['temperature']:.6g}",
            "platt": lambda: f"A = {d['slope']:.6g}, B = {d['intercept']:.6g}",
            "isotonic": lambda: f"{d['thresholds']} thresholds",
            "venn-abers": lambda: ("one-vs-rest, " if len(d["scores"]) > 1 else "")
            + f"{'/'.join(f'{n:,}' for n in d['scores'])} distinct scores"}[d["method"]]()
    return f"{d['method']} ({what}) on {d['rows']:,} rows of {d['source']}"


def with_calibration(model, calibration: Calibration | None):
    """A copy of ``model`` scoring with ``calibration`` (None: uncalibrated)."""
    out = copy.copy(model)
    out.calibration = calibration
    if getattr(out, "conformal", None) is not None:  # sets of the old probabilities (sqlnb.models.conformal)
        warn("the model's conformal sets were fitted on its old probabilities and are dropped (its "
                      "calibrator changed); fit them again with sqlnb conformal", UpdateWarning)
        out.conformal = None
    return out


# -- fitting -------------------------------------------------------------------------------
def calibrate(model, data: Any, method: str = "temperature", *, label: str | None = None,
              con: duckdb.DuckDBPyConnection | None = None):
    """Fit a calibrator of ``model``'s probabilities on the held-out labelled rows of
    ``data``; return a copy of the model that applies it whenever it scores.

    Parameters
    ----------
    model : Model
        Any model kind. A calibrator it already has is replaced (the new one is fitted on
        the uncalibrated scores).
    data : path, table, query, relation or Source
        Labelled rows not used for fitting the model.
    method : {"temperature", "platt", "isotonic", "venn-abers"}
        See the module docstring; ``platt`` and ``isotonic`` need a binary model.
    label : str, optional
        The label column of ``data`` (default: the model's).
    con : duckdb connection, optional
        Where the aggregates run (a new in-memory DuckDB by default).
    """
    if method not in METHODS:
        raise SqlnbError(f"unknown calibration method {method!r}{suggest(method, METHODS)}; "
                         f"choose one of: {', '.join(METHODS)}")
    K = len(model.classes)
    if method in BINARY and K != 2:
        raise SqlnbError(f"{method} calibration is for two classes and the model has {K}; "
                         "use --method temperature (any number of classes)")
    con = con if con is not None else new_connection()
    label = label if label is not None else model.label
    source = resolve(read_with(data, model.read_types()), con)
    source.require([label], "label column")
    scored = exp.Subquery(this=model.scoring_query(source, ("jll",), keep=[label], calibrated=False),
                          alias=exp.TableAlias(this=sql.ident("s")))
    y = sql.col(label, "s")
    known = exp.In(this=y.copy(), expressions=[sql.value(c, model.label_type) for c in model.classes])
    unknown = (exp.select(exp.Cast(this=y.copy(), to=exp.DataType.build("VARCHAR"))).from_(scored.copy())
               .where(exp.and_(exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null())),
                               exp.Not(this=exp.paren(known.copy())))).limit(1))
    bad = con.execute(sql.render(unknown)).fetchall()
    if bad:
        raise SqlnbError(f"label {bad[0][0]!r} in column {label!r} of {source.description} is not a class of "
                         f"the model ({', '.join(map(str, model.classes))}); calibrate on rows of its classes")
    b = [sql.col(n, "s") for n in class_columns("jll_", model.classes)]
    index = exp.Case(ifs=[exp.If(this=exp.EQ(this=y.copy(), expression=sql.value(c, model.label_type)),
                                 true=exp.Literal.number(k)) for k, c in enumerate(model.classes)])
    finite = exp.and_(*[exp.func("isfinite", x.copy()) for x in b])  # NULL for NULL scores: dropped
    # Temperature works on d_c = b_c − max b (≤ 0, the largest exactly 0): exp(β d) never
    # overflows. Platt and isotonic on s = b_1 − b_0; Venn–Abers on its one-vs-rest scores.
    if method == "temperature":
        top = sql.greatest([x.copy() for x in b])
        cols = [exp.alias_(exp.Sub(this=x.copy(), expression=top.copy()), f"d{k}") for k, x in enumerate(b)]
    elif method == "venn-abers":
        cols = [exp.alias_(e, f"s{j}") for j, e in enumerate(ovr_scores(b))]
    else:
        cols = [exp.alias_(exp.Sub(this=b[1].copy(), expression=b[0].copy()), "s")]
    rows = (exp.select(exp.alias_(index, "y"), *cols).from_(scored)
            .where(exp.and_(exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null())), finite)))
    work = f"sqlnb_calibration_{uuid.uuid4().hex}"
    con.execute(sql.render(exp.Create(this=sql.table(work), kind="TABLE", expression=rows,
                                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))))
    try:
        counts = dict(con.execute(sql.render(exp.select(sql.col("y"), exp.Count(this=exp.Star())).from_(
            sql.table(work)).group_by(sql.col("y")))).fetchall())
        n = sum(counts.values())
        if n == 0:
            raise SqlnbError(f"{source.description} has no labelled rows with finite scores to calibrate on")
        if len(counts) < 2:
            # Fitted on one class, any calibrator only learns to favour that class (a
            # temperature then runs to 0 or to infinity); scikit-learn's
            # CalibratedClassifierCV fails on such rows too.
            only = model.classes[next(iter(counts))]
            need = "rows of both classes" if K == 2 else "rows of at least two classes"
            raise SqlnbError(f"every held-out row of {source.description} is of class {only!r}; {method} "
                             f"calibration needs {need}; calibrate on held-out rows of every class")
        fit = {"temperature": _fit_temperature, "platt": _fit_platt, "isotonic": _fit_isotonic,
               "venn-abers": lambda *a: {"venn_abers": fit_venn_abers(con, work, K)}}[method]
        cal = fit(con, work, K, counts, source.description)
    finally:
        con.execute(sql.render(exp.Drop(tables=[sql.table(work)], kind="TABLE", exists=True)))
    return with_calibration(model, Calibration(**cal, method=method, rows=n, source=source.description))


def _sums(con, work: str, exprs: list[exp.Expression]) -> list[float]:
    """``SELECT sum(e1), sum(e2), ... FROM work``: one pass over the held-out rows."""
    q = exp.select(*[exp.Sum(this=e) for e in exprs]).from_(sql.table(work))
    return [float(v) for v in con.execute(sql.render(q)).fetchall()[0]]


def _newton(evaluate, start: np.ndarray, what: str, hint: str = "calibrate on other held-out rows") -> np.ndarray:
    """Minimise a smooth convex function by Newton steps, halved until the value does not
    rise; ``evaluate(x) -> (value, gradient, Hessian)``. Stops when a step would move ``x``
    by less than 1e-15 relative, when the Newton decrement is below 1e-24·|value|, or when
    no step along the Newton direction lowers the value any more (all: converged up to
    rounding). Newton converges quadratically, so
    that takes a handful of aggregate queries (~5-10 measured). ``hint`` ends the error
    raised when it does not converge: why that can be, and what to do."""
    x = start
    f, g, h = evaluate(x)
    for _ in range(MAX_STEPS):
        try:
            step = np.linalg.solve(h, g)
        except np.linalg.LinAlgError:
            step = None
        if step is None or not np.all(np.isfinite(step)):
            raise SqlnbError(f"cannot fit the {what}: the held-out scores do not vary")
        if np.all(np.abs(step) <= 1e-15 * np.maximum(1.0, np.abs(x))):
            return x  # converged: the next step would not move x
        if float(g @ step) <= 1e-24 * max(1.0, abs(f)):
            # The Newton decrement gᵀH⁻¹g ≈ (x − x*)ᵀH(x − x*) is at the level of the
            # sums' rounding: converged, though an ill-conditioned H (scores that vary
            # little) lets rounding noise move x by more than 1e-15 at every step.
            return x
        t = 1.0
        while True:
            xn = x - t * step
            fn, gn, hn = evaluate(xn)
            if np.isfinite(fn) and fn <= f + 1e-13 * abs(f):
                break
            t /= 2
            if t < 1e-9:
                return x  # no lower value along the Newton direction: at the minimum up to rounding
        x, f, g, h = xn, fn, gn, hn
    raise SqlnbError(f"the {what} did not converge in {MAX_STEPS} Newton steps; {hint}")


def _fit_temperature(con, work: str, K: int, counts: dict, where: str) -> dict:
    """Newton on β = 1/T of NLL(β) = Σ_i [ln Σ_c exp(β d_ic) − β d_i,y_i]:
    NLL' = Σ (E_p[d] − d_y), NLL'' = Σ Var_p[d] ≥ 0 with p = softmax(β d).

    NLL is convex in β, so it has a minimum at a finite β > 0 unless (checked first, in
    one aggregate query, and refused in one line saying why):

    * every row scores every class the same (d = 0): NLL does not depend on β;
    * NLL'(0) = Σ (mean_c d_ic − d_i,y_i) ≥ 0, the labelled class scoring no higher than
      the mean class on average: NLL rises from β = 0, the minimum is T = ∞ (uniform
      probabilities: a T of about 1e10 came out before this check);
    * every row's own class scores highest (d_y = 0): NLL falls towards β = ∞, T = 0
      (probabilities 0 and 1)."""
    d = [sql.col(f"d{k}") for k in range(K)]
    d_y = exp.Case(ifs=[exp.If(this=exp.EQ(this=sql.col("y"), expression=exp.Literal.number(k)), true=d[k].copy())
                        for k in range(K)])
    one, zero = sql.dbl(1.0), sql.dbl(0.0)
    varies = exp.Case(ifs=[exp.If(this=exp.or_(*[exp.LT(this=v.copy(), expression=zero.copy()) for v in d]),
                                  true=one.copy())], default=zero.copy())
    wrong = exp.Case(ifs=[exp.If(this=exp.LT(this=d_y.copy(), expression=zero.copy()), true=one.copy())],
                     default=zero.copy())
    mean = exp.Div(this=exp.paren(sql.add(v.copy() for v in d)), expression=sql.dbl(float(K)))
    n_varied, n_wrong, slope0 = _sums(con, work, [varies, wrong, exp.Sub(this=mean, expression=d_y.copy())])
    n = sum(counts.values())
    if n_varied == 0:
        raise SqlnbError(f"cannot fit the temperature: the held-out scores do not vary (every class scores the same "
                         f"on each of the {n:,} rows of {where}, as when their features are all NULL under a uniform "
                         "prior); calibrate on rows whose features tell the classes apart")
    if slope0 >= 0:
        raise SqlnbError(f"the held-out rows of {where} carry no information for temperature scaling (their own class "
                         "scores no higher than the average class, so the log loss falls as T grows without bound, "
                         "to uniform probabilities); check the held-out labels (--label) and the model: a "
                         "temperature cannot fix scores that point away from the labels")
    if n_wrong == 0:
        raise SqlnbError(f"every one of the {n:,} held-out rows of {where} scores its own class highest, so the log "
                         "loss falls as T shrinks to 0 (probabilities of exactly 0 and 1); calibrate on more "
                         "held-out rows, some of which the model gets wrong")

    def evaluate(x):
        beta = float(x[0])
        if not (beta > 0 and math.isfinite(beta)):
            return math.inf, None, None
        e = [exp.Exp(this=exp.Mul(this=sql.dbl(beta), expression=v.copy())) for v in d]
        z = exp.paren(sql.add(e))
        # (sqlglot writes no parentheses of its own: every sum below is wrapped in one)
        mean = exp.paren(exp.Div(this=exp.paren(sql.add(exp.Mul(this=a.copy(), expression=v.copy())
                                                        for a, v in zip(e, d))), expression=z.copy()))
        second = exp.paren(exp.Div(this=exp.paren(sql.add(exp.Mul(this=a.copy(), expression=exp.Mul(
            this=v.copy(), expression=v.copy())) for a, v in zip(e, d))), expression=z.copy()))
        f, g, h = _sums(con, work, [
            exp.Sub(this=exp.Ln(this=z.copy()), expression=exp.Mul(this=sql.dbl(beta), expression=d_y.copy())),
            exp.Sub(this=mean.copy(), expression=d_y.copy()),
            exp.Sub(this=second, expression=exp.Mul(this=mean.copy(), expression=mean.copy()))])
        return f, np.array([g]), np.array([[h]])

    beta = _newton(evaluate, np.array([1.0]), "temperature")[0]
    T = 1.0 / beta
    if not (math.isfinite(T) and T > 0):
        raise SqlnbError(f"the fitted temperature is not a finite positive number ({T!r}): the held-out "
                         "scores carry no information about the labels")
    return {"temperature": float(T)}


def _fit_platt(con, work: str, K: int, counts: dict, where: str) -> dict:
    """Newton on (A, B) of Σ_i [softplus(z_i) − t_i z_i], z = A·s + B, with Platt's
    targets; gradient Σ (σ(z) − t)(s, 1), Hessian Σ σ(z)σ(−z)(s, 1)(s, 1)ᵀ.

    The targets lie strictly between 0 and 1, so the objective has a finite minimum
    whenever ``s`` takes two values; when every row has the same ``s`` only A·s + B is
    determined (the Hessian is singular) and the fit is refused in one line, checked
    before the optimiser (Newton's steps would grow without bound)."""
    n_neg, n_pos = float(counts.get(0, 0)), float(counts.get(1, 0))
    t_pos, t_neg = (n_pos + 1.0) / (n_pos + 2.0), 1.0 / (n_neg + 2.0)
    y = sql.col("y")
    lo, hi, mid = con.execute(sql.render(exp.select(exp.Min(this=sql.col("s")), exp.Max(this=sql.col("s")),
                                                    exp.Avg(this=sql.col("s"))).from_(sql.table(work)))).fetchone()
    if lo == hi:
        raise SqlnbError(f"every one of the {int(n_neg + n_pos):,} held-out rows of {where} has the same log-odds "
                         f"({float(lo):.6g}), as when their features are all NULL or equal: Platt scaling needs "
                         "scores that vary; calibrate on rows whose features vary")
    t = exp.Case(ifs=[exp.If(this=exp.EQ(this=y, expression=exp.Literal.number(1)), true=sql.dbl(t_pos))],
                 default=sql.dbl(t_neg))
    # Newton runs on the centred score s − m (m its mean), z = A·(s − m) + B': the same
    # minimiser (B = B' − A·m), but a Hessian that stays well conditioned when s varies
    # little about a large offset (a spread of 1e-6 about −0.42 did not converge on s).
    s = exp.paren(exp.Sub(this=sql.col("s"), expression=sql.dbl(float(mid))))

    def evaluate(x):
        A, B = float(x[0]), float(x[1])
        z = exp.paren(exp.Add(this=exp.Mul(this=sql.dbl(A), expression=s.copy()), expression=sql.dbl(B)))
        zero = sql.dbl(0.0)
        # softplus(z) = max(z, 0) + ln(1 + exp(−|z|)); σ(z) without overflow either side of 0.
        softplus = exp.Add(this=sql.greatest([z.copy(), zero.copy()]),
                           expression=exp.Ln(this=exp.Add(this=sql.dbl(1.0), expression=exp.Exp(
                               this=exp.Neg(this=exp.Abs(this=z.copy()))))))
        ez = exp.Exp(this=exp.Neg(this=exp.Abs(this=z.copy())))
        sigma = exp.paren(exp.Case(
            ifs=[exp.If(this=exp.GTE(this=z.copy(), expression=zero.copy()),
                        true=exp.Div(this=sql.dbl(1.0), expression=exp.paren(exp.Add(this=sql.dbl(1.0), expression=ez))))],
            default=exp.Div(this=ez.copy(), expression=exp.paren(exp.Add(this=sql.dbl(1.0), expression=ez.copy())))))
        r = exp.paren(exp.Sub(this=sigma.copy(), expression=t.copy()))
        w = exp.paren(exp.Mul(this=sigma.copy(), expression=exp.paren(exp.Sub(this=sql.dbl(1.0), expression=sigma.copy()))))
        f, gs, g1, hss, hs1, h11 = _sums(con, work, [
            exp.Sub(this=softplus, expression=exp.Mul(this=t.copy(), expression=z.copy())),
            exp.Mul(this=r.copy(), expression=s.copy()), r.copy(),
            exp.Mul(this=w.copy(), expression=exp.Mul(this=s.copy(), expression=s.copy())),
            exp.Mul(this=w.copy(), expression=s.copy()), w.copy()])
        return f, np.array([gs, g1]), np.array([[hss, hs1], [hs1, h11]])

    hint = (f"the held-out log-odds of {where} vary only from {float(lo):.17g} to {float(hi):.17g}, too little to "
            "fit a slope; calibrate on rows whose features vary more")
    A, B = _newton(evaluate, np.array([0.0, math.log((n_pos + 1.0) / (n_neg + 1.0))]), "Platt sigmoid", hint)
    B = B - A * float(mid)
    if not (math.isfinite(A) and math.isfinite(B)):
        raise SqlnbError("the fitted Platt sigmoid is not finite; calibrate on more held-out rows")
    return {"slope": float(A), "intercept": float(B)}


def _fit_isotonic(con, work: str, K: int, counts: dict, where: str) -> dict:
    """Rows and positives per distinct score (``GROUP BY s``), then pool-adjacent-violators.

    Held-out rows that all have the same ``s`` give one threshold, a constant: every row
    then gets the held-out frequency of class 1, as scikit-learn's IsotonicRegression does
    on a constant input."""
    s = sql.col("s")
    q = (exp.select(s, exp.Count(this=exp.Star()), exp.Sum(this=sql.col("y"))).from_(sql.table(work))
         .group_by(s.copy()).order_by(s.copy()))
    groups = con.execute(sql.render(q)).fetchall()
    xs = np.array([g[0] for g in groups], dtype=float)
    w = np.array([g[1] for g in groups], dtype=float)
    ys = pool_adjacent_violators(np.array([g[2] for g in groups], dtype=float) / w, w)
    keep = np.ones(len(ys), dtype=bool)  # scikit-learn's trimming: inner points of a flat run go
    keep[1:-1] = (ys[1:-1] != ys[:-2]) | (ys[1:-1] != ys[2:])
    return {"thresholds": tuple(map(float, xs[keep])), "probas": tuple(map(float, ys[keep]))}


def pool_adjacent_violators(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The non-decreasing sequence closest to ``y`` in weighted least squares: blocks whose
    means decrease are merged (into their weighted mean) until none do."""
    means: list[float] = []
    weights: list[float] = []
    sizes: list[int] = []
    for v, wt in zip(y, w):
        means.append(float(v)); weights.append(float(wt)); sizes.append(1)
        while len(means) > 1 and means[-2] >= means[-1]:
            m2, w2, n2 = means.pop(), weights.pop(), sizes.pop()
            total = weights[-1] + w2
            means[-1] = (means[-1] * weights[-1] + m2 * w2) / total
            weights[-1] = total
            sizes[-1] += n2
    return np.repeat(means, sizes)
