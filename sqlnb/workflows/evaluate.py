"""Classification metrics, computed in SQL over the model's scoring query.

The rows never leave the database: one statement over the scoring SELECT
(:meth:`~sqlnb.models.base.Model.scoring_query`, the one ``model.score`` runs) reads them
once and returns a row per confusion cell with every figure beside it, on DuckDB,
PostgreSQL or Spark alike (:func:`metrics_query`). Over the labelled rows (label not
NULL; unlabelled rows are counted and left out)::

    accuracy   = #(prediction = label) / #labelled
    log loss   = mean −ln clip(p_label, ε, 1 − ε)      ε = 2.22e-16 (float64 machine ε)
    Brier      = mean Σ_c (p_c − [label = c])²,  halved for two classes
    precision_c = tp_c / #(prediction = c);  recall_c = tp_c / #(label = c)
    F1_c        = 2·tp_c / (#(label = c) + #(prediction = c))   (0 when undefined)
    ROC AUC_c  one-vs-rest, Mann–Whitney: Σ over the positives of (negatives scored lower
               + ½ negatives scored equal) / (n₊·n₋)
    AP_c       average precision, one-vs-rest: Σ_n (R_n − R_{n−1}) P_n over the distinct
               scores in decreasing order
    macro      precision, recall, F1: the mean over the averaged labels (below); weighted:
               by their rows; micro: from the summed counts; balanced accuracy: the mean
               recall over the labels that have rows. ROC AUC, AP: over the classes where
               defined (:mod:`sqlnb.workflows.ranking`)
    ECE        Σ_b (n_b/n)·|accuracy_b − mean confidence_b| over 15 equal-width bins of the
               top-class probability max_c p_c (bin min(floor(15·conf), 14))
    width      a Venn–Abers model's mean interval width p1 − p0 (one-vs-rest: also over
               the classes; :func:`sqlnb.models.venn_abers.width`), over the rows above

**Which labels the averages are over** (``labels``), as scikit-learn's
``precision_recall_fscore_support``: by default (``"present"``) the labels present in the
rows' labels or predictions — a class of the model that no row has and none is predicted
is left out, and a label the model does not know (support > 0, never predicted:
precision, recall and F1 0) is in. ``"model"``: the model's classes, every one (absent
ones count with F1 0, unknown labels are out), as ``labels=model.classes``. A row with no
prediction (below) is a false negative of its label and no label's false positive.
Balanced accuracy is scikit-learn's ``balanced_accuracy_score`` either way (the mean
recall over the labels that have rows). These averages are computed from the confusion
counts; ROC AUC and average precision are one-vs-rest over the classes with positive
(and, for AUC, negative) ranked rows whatever ``labels`` says: ``roc_auc_score`` finds the
classes in ``y_true`` (it raises on a one-class test set, where these are None).

These are scikit-learn's definitions (``log_loss``, ``brier_score_loss``,
``precision_recall_fscore_support`` with ``zero_division=0``, ``roc_auc_score`` with
``multi_class="ovr"``, ``average_precision_score``); the ranking and calibration figures
and their edge cases are defined in :mod:`sqlnb.workflows.ranking`. The two-class
``roc_auc`` is the second class's (in sorted order). Rows are ranked by the one-vs-rest
log-odds (``jll₊ − jll₋`` for two classes) rather than by ``p_c``: the same order, except
that rows whose probability rounds to exactly 0 or 1 stay distinguishable.

Two kinds of rows are reported rather than silently dropped:

* rows with no probabilities (zero likelihood under every class, only possible with the
  MLE estimator; or, for LDA, QDA and logistic models, a NULL or non-finite feature):
  their prediction is NULL, they count as errors in accuracy and in the
  confusion matrix (predicted ``None``), and are left out of log loss, Brier, AUC,
  average precision and ECE;
* rows whose label is not a class of the model: errors in accuracy, probability 0 for
  their label in log loss (so ``−ln ε ≈ 36``) and Brier (its term ``(0 − 1)² = 1`` beside
  the classes' ``p_c²``: scikit-learn's figures with the label as one more class of
  probability 0), wrong predictions in the ECE, and left out of AUC and average precision.
"""

from __future__ import annotations

import difflib
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.models.decision import DecisionMetrics, decision_metrics, report_lines
from sqlnb.models.finish import class_columns, label_text
from sqlnb.models.venn_abers import width_query
from sqlnb.source import read_with
from sqlnb.stats import _sort_key
from sqlnb.workflows import ranking, ranksort
from sqlnb.workflows.label_averages import LABELS, check_labels, label_averages  # noqa: F401 (re-exported)

#: Probabilities are clipped to [EPS, 1 − EPS] in the log loss (scikit-learn's rule).
EPS = float(np.finfo(np.float64).eps)


@dataclass
class ClassMetrics:
    """Per-class precision, recall, F1 and support (rows with that label)."""

    label: Any
    precision: float
    recall: float
    f1: float
    support: int
    predicted: int
    #: One-vs-rest ROC AUC and average precision (:mod:`~sqlnb.workflows.ranking`).
    roc_auc: float | None = None
    average_precision: float | None = None


@dataclass
class Evaluation:
    """What :func:`evaluate` measures (see the module docstring for the definitions)."""

    label: str
    classes: list
    rows: int
    labelled_rows: int
    unlabelled_rows: int
    no_proba_rows: int
    unknown_label_rows: int
    accuracy: float | None
    log_loss: float | None
    brier: float | None
    roc_auc: float | None
    positive_class: Any
    macro_f1: float | None
    weighted_f1: float | None
    per_class: list[ClassMetrics] = field(default_factory=list)
    confusion_true: list = field(default_factory=list)
    confusion_predicted: list = field(default_factory=list)
    confusion: list[list[int]] = field(default_factory=list)
    seconds: float = 0.0
    #: Under a decision rule (sqlnb.models.decision): rejection and expected cost.
    decision: DecisionMetrics | None = None
    # One-vs-rest ranking and calibration (definitions in :mod:`~sqlnb.workflows.ranking`).
    macro_roc_auc: float | None = None
    weighted_roc_auc: float | None = None
    macro_average_precision: float | None = None
    weighted_average_precision: float | None = None
    ece: float | None = None
    reliability: list[dict] = field(default_factory=list)
    # Label averages (module docstring), over ``averaged_labels`` as ``labels`` says.
    labels: str = "present"
    averaged_labels: list = field(default_factory=list)
    macro_precision: float | None = None
    macro_recall: float | None = None
    weighted_precision: float | None = None
    weighted_recall: float | None = None
    micro_precision: float | None = None
    micro_recall: float | None = None
    micro_f1: float | None = None
    balanced_accuracy: float | None = None
    interval_width: float | None = None  # a Venn–Abers calibrator's mean p1 − p0

    @property
    def unknown_labels(self) -> list:
        """The labels in the data that are not classes of the model (the extra rows of the
        confusion matrix), e.g. adult.test's ``'>50K.'`` against adult.data's ``'>50K'``."""
        return list(self.confusion_true[len(self.classes):])

    def to_dict(self) -> dict:
        """Plain data for JSON (labels as they are; dates and decimals need ``default=str``)."""
        d = asdict(self)
        d["per_class"] = [asdict(m) for m in self.per_class]
        d["confusion"] = {"true": self.confusion_true, "predicted": self.confusion_predicted,
                          "counts": self.confusion}
        del d["confusion_true"], d["confusion_predicted"]
        d["unknown_labels"] = self.unknown_labels
        return d


def _num(x: Any) -> float | None:
    return None if x is None else float(x)


def _ratio(num: exp.Expression, den: exp.Expression) -> exp.Expression:
    """``num / den`` as DOUBLE, 0 when ``den`` is 0 (scikit-learn's ``zero_division=0``)."""
    return exp.Case(ifs=[exp.If(this=exp.GT(this=den, expression=exp.Literal.number(0)),
                                true=exp.Div(this=sql.as_double(num), expression=sql.as_double(den.copy())))],
                    default=sql.dbl(0.0))


def _count_if(cond: exp.Expression) -> exp.Expression:
    return exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=cond))


def _not_null(e: exp.Expression) -> exp.Expression:
    return exp.Not(this=exp.Is(this=e, expression=exp.null()))


def _is_null(e: exp.Expression) -> exp.Expression:
    return exp.Is(this=e, expression=exp.null())


def _when(cond: exp.Expression, value: exp.Expression) -> exp.Case:
    """``CASE WHEN cond THEN value END`` (NULL otherwise, which aggregates skip)."""
    return exp.Case(ifs=[exp.If(this=cond, true=value)])


def _from(tree: exp.Expression, alias: str) -> exp.Subquery:
    return exp.Subquery(this=tree, alias=exp.TableAlias(this=sql.ident(alias)))


#: The scored rows, as the metric queries name them (a CTE, see :func:`over_scored`).
SCORED = "scored"
#: Their per-row terms (:func:`metric_rows`), read by the GROUPING SETS (a CTE too).
ROWS = "scored_terms"


def over_scored(query: exp.Select, scoring: exp.Select,
                more: Sequence[tuple[str, exp.Select]] = ()) -> exp.Select:
    """``WITH "scored" AS MATERIALIZED (scoring), <name> AS MATERIALIZED (select), … query``.

    Materialised because the metrics read each probability several times: inlined,
    DuckDB would copy the whole per-class score expression into every reference
    (measured: 2.7 s instead of 0.26 s for 600 rows and 3 classes). Spark has no such
    hint (:func:`sqlnb.sql.render` drops it there); it reads ``scored`` once anyway.
    ``more``: further CTEs, e.g. the per-row terms that GROUPING SETS read (DuckDB runs
    each set as its own aggregate over its input, which would compute the terms once per set).
    """
    ctes = [exp.CTE(this=q, alias=exp.TableAlias(this=sql.ident(name)), materialized=True)
            for name, q in [(SCORED, scoring), *more]]
    query.set("with_", exp.With(expressions=ctes))  # the queries are built fresh per call
    return query


#: Below this magnitude a square is subnormal (< 2⁻¹⁰²²), and PostgreSQL raises "value out of
#: range: underflow" where it would round to 0: such a square is written 0 (off by < 2.3e-308).
TINY_ROOT = 2.0 ** -511


def _square(d: exp.Expression) -> exp.Expression:
    """``d²``, 0 when ``|d| < 2⁻⁵¹¹`` (:data:`TINY_ROOT`; probabilities near 0 on PostgreSQL)."""
    tiny = exp.LT(this=exp.Abs(this=d.copy()), expression=sql.dbl(TINY_ROOT))
    return exp.Case(ifs=[exp.If(this=tiny, true=sql.dbl(0.0))],
                    default=exp.Pow(this=sql.paren(d), expression=sql.dbl(2.0)))


def _row_terms(label: str, classes: Sequence, label_type: str) -> dict[str, exp.Expression]:
    """Per scored row: ``labelled``, ``scored`` (labelled with probabilities), each
    class's ``is_class`` test, and the row's log loss and Brier terms (module docstring)."""
    K = len(classes)
    y = sql.col(label)
    probas = [sql.col(c) for c in class_columns("proba_", classes)]
    lits = [sql.value(c, label_type) for c in classes]
    is_class = [exp.EQ(this=y.copy(), expression=v.copy()) for v in lits]
    # p of the row's own label; 0 for a label the model does not know.
    p_label = exp.Case(ifs=[exp.If(this=c.copy(), true=p.copy()) for c, p in zip(is_class, probas)],
                       default=sql.dbl(0.0))
    clipped = exp.Greatest(this=exp.Least(this=p_label, expressions=[sql.dbl(1.0 - EPS)]),
                           expressions=[sql.dbl(EPS)])
    indicator = [exp.Case(ifs=[exp.If(this=c.copy(), true=sql.dbl(1.0))], default=sql.dbl(0.0)) for c in is_class]
    squares = sql.add(_square(exp.Sub(this=p.copy(), expression=i)) for p, i in zip(probas, indicator))
    # A label that is no class had probability 0: its own term (0 − 1)² = 1 is added, as
    # scikit-learn's brier_score_loss with that label as one more column of probability 0
    # (a class's rows keep the sum as it was, term for term).
    known = exp.or_(*[c.copy() for c in is_class])
    squares = exp.Case(ifs=[exp.If(this=known, true=squares)],
                       default=exp.Add(this=sql.paren(squares.copy()), expression=sql.dbl(1.0)))
    # sqlglot renders trees as built, without precedence parentheses: add them.
    brier = exp.Mul(this=sql.paren(squares), expression=sql.dbl(0.5)) if K == 2 else squares
    labelled = _not_null(y.copy())
    return {"labelled": labelled, "scored": exp.and_(labelled.copy(), _not_null(probas[0].copy())),
            "is_class": is_class, "lits": lits, "log_loss": exp.Neg(this=exp.Ln(this=clipped)), "brier": brier}


def _summary_ratios(K: int, agg: str = "agg") -> list[exp.Expression]:
    """The figures of a summary row from its counts (columns of ``agg``: ``rows``,
    ``labelled``, ``no_proba``, ``unknown``, ``correct``, ``log_loss``, ``brier`` and
    ``support<k>``, ``predicted<k>``, ``tp<k>`` per class): accuracy, per-class
    precision, recall and F1."""
    def a(name: str) -> exp.Column:
        return sql.col(name, agg)

    outer: list[exp.Expression] = [a(n) for n in ("rows", "labelled", "no_proba", "unknown", "log_loss", "brier")]
    outer.append(exp.alias_(exp.Case(ifs=[exp.If(this=exp.GT(this=a("labelled"), expression=exp.Literal.number(0)),
                                                 true=_ratio(a("correct"), a("labelled")))]), "accuracy", quoted=True))
    for k in range(K):
        tp, sup, prd = a(f"tp{k}"), a(f"support{k}"), a(f"predicted{k}")
        f1 = _ratio(exp.Mul(this=exp.Literal.number(2), expression=tp.copy()),
                    exp.Add(this=sup.copy(), expression=prd.copy()))
        outer += [sup, prd, exp.alias_(_ratio(tp.copy(), prd.copy()), f"precision{k}", quoted=True),
                  exp.alias_(_ratio(tp.copy(), sup.copy()), f"recall{k}", quoted=True),
                  exp.alias_(f1, f"f1_{k}", quoted=True)]
    # The averages over labels are taken from these counts (label_averages): which labels
    # they are over depends on the unknown labels too, which are not columns here.
    return outer


def summary_query(label: str, classes: Sequence, label_type: str) -> exp.Select:
    """One scan of ``scored``: counts, accuracy, log loss, Brier and per-class
    precision/recall/F1 (what :mod:`sqlnb.workflows.cv` groups by fold; :func:`evaluate`
    computes the same figures with :func:`metrics_query`)."""
    t = _row_terms(label, classes, label_type)
    y, pred = sql.col(label), sql.col("prediction")
    labelled, lits = t["labelled"], t["lits"]
    inner: list[exp.Expression] = [
        exp.alias_(exp.Count(this=exp.Star()), "rows", quoted=True),
        exp.alias_(_count_if(labelled.copy()), "labelled", quoted=True),
        exp.alias_(_count_if(exp.and_(labelled.copy(), _is_null(sql.col(class_columns("proba_", classes)[0])))),
                   "no_proba", quoted=True),
        exp.alias_(_count_if(exp.and_(labelled.copy(), exp.Not(this=exp.In(this=y.copy(), expressions=[v.copy() for v in lits])))),
                   "unknown", quoted=True),
        exp.alias_(_count_if(exp.and_(labelled.copy(), exp.EQ(this=pred.copy(), expression=y.copy()))),
                   "correct", quoted=True),
        exp.alias_(exp.Filter(this=exp.Avg(this=t["log_loss"]), expression=exp.Where(this=t["scored"].copy())),
                   "log_loss", quoted=True),
        exp.alias_(exp.Filter(this=exp.Avg(this=t["brier"]), expression=exp.Where(this=t["scored"].copy())),
                   "brier", quoted=True),
    ]
    for k, (c, v) in enumerate(zip(t["is_class"], lits)):
        is_pred = exp.and_(labelled.copy(), exp.EQ(this=pred.copy(), expression=v.copy()))
        inner += [exp.alias_(_count_if(c.copy()), f"support{k}", quoted=True),
                  exp.alias_(_count_if(is_pred.copy()), f"predicted{k}", quoted=True),
                  exp.alias_(_count_if(exp.and_(c.copy(), is_pred)), f"tp{k}", quoted=True)]
    scan = exp.select(*inner).from_(sql.table(SCORED))
    return exp.select(*_summary_ratios(len(classes))).from_(_from(scan, "agg"))


def _window_sum(e: exp.Expression, order: Sequence[exp.Expression],
                default: exp.Expression | None = exp.Literal.number(0)) -> exp.Expression:
    """``SUM(e)`` over every row of the result, added in the order of ``order`` (a sum of
    doubles depends on its order; this one is the same on every run), ``default`` when NULL."""
    total = exp.Window(this=exp.Sum(this=e), order=exp.Order(expressions=[exp.Ordered(this=o.copy()) for o in order]),
                       spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                           end="UNBOUNDED", end_side="FOLLOWING"))
    return total if default is None else exp.Coalesce(this=total, expressions=[default.copy()])


def metric_rows(label: str, classes: Sequence, label_type: str) -> exp.Select:
    """The first step of :func:`metrics_query` (and of :func:`~sqlnb.workflows.curves.curve_points`):
    per scored row ``k``, ``y``, ``p``, ``loss``, ``brier`` and the columns of
    :func:`sqlnb.workflows.ranking.row_columns`, from ``scored``."""
    t = _row_terms(label, classes, label_type)
    y = sql.col(label)
    k = exp.Case(ifs=[exp.If(this=c.copy(), true=exp.Literal.number(i)) for i, c in enumerate(t["is_class"])])
    # Calibration is of the probabilities, not of a decision rule's choice: a row is correct
    # when its label is the most probable class (ties to the first, like the argmax), even
    # where a rule predicts another class or rejects the row.
    probas = [sql.col(c) for c in class_columns("proba_", classes)]
    top = sql.greatest([p.copy() for p in probas])
    argmax = exp.Case(ifs=[exp.If(this=exp.EQ(this=p, expression=top.copy()), true=exp.Literal.number(i))
                           for i, p in enumerate(probas)])
    correct = exp.EQ(this=argmax, expression=k.copy())
    return exp.select(exp.alias_(k, "k", quoted=True),
                      exp.alias_(_when(_is_null(k.copy()), y.copy()), "y", quoted=True),
                      exp.alias_(sql.col("prediction"), "p", quoted=True),
                      exp.alias_(_when(t["scored"].copy(), t["log_loss"]), "loss", quoted=True),
                      exp.alias_(_when(t["scored"].copy(), t["brier"]), "brier", quoted=True),
                      *ranking.row_columns(classes, k, t["scored"], correct)).from_(sql.table(SCORED))


def metrics_query(label: str, classes: Sequence, label_type: str, scoring: exp.Select) -> exp.Select:
    """Every figure of an :class:`Evaluation` in one statement, each step reading the one
    before it once (PostgreSQL, Spark; DuckDB: :func:`stream_query`, :func:`figures_query`)::

        rows    per scored row: k (the label's index among the classes; NULL: no class),
                y (such a label), p (the prediction), the log loss and Brier terms, the
                calibration's confidence, bin and hit, per class c its score s<c>
        groups  GROUPING SETS ((k, y, p), (bin), (s0), …): the confusion cells (n rows, m
                with probabilities, term sums), the calibration bins, a group per class
                and distinct score (on DuckDB ~1.2 GB for 10M rows)
        ranked  per class, windows over its score groups (partitioned by class)
        cells   the cells and bins pass through; a class's score groups fold into one row
        agg     every summary count as a SUM over all rows, next to each row (returned)
    """
    K = len(classes)
    cells = _grouped_cells(K, [sql.col(c) for c in ("k", "y", "p")], _cell_sums())
    query = _summary(label, classes, label_type, cells, [], ("part", "k", "y", "p", "bin", "c"),
                     ranking.class_figures)
    return over_scored(query, scoring, [(ROWS, metric_rows(label, classes, label_type))])


def _cell_sums() -> list[exp.Expression]:
    """A confusion cell's ``n`` (rows), ``m`` (rows with probabilities) and term sums."""
    return [exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True),
            exp.alias_(exp.Count(this=sql.col("loss")), "m", quoted=True),
            exp.alias_(exp.Sum(this=sql.col("loss")), "loss", quoted=True),
            exp.alias_(exp.Sum(this=sql.col("brier")), "brier", quoted=True)]


#: The per-row columns :func:`stream_query` returns, beside the scores.
STREAM_ROWS = ("k", "y", "p", "loss", "brier", "conf", "bin", "hit")


def stream_query(label: str, classes: Sequence, label_type: str, scoring: exp.Select) -> exp.Select:
    """DuckDB's first statement of :func:`evaluate`: per scored row, :func:`metric_rows`'
    :data:`STREAM_ROWS` and the scores ``s<c>`` of
    :func:`~sqlnb.workflows.ranksort.streamed_classes`, in one pipeline that streams
    (no sort, no aggregate, no buffered CTE: DuckDB holds little under its memory limit);
    :func:`sqlnb.workflows.ranksort.read_stream` groups the cells and ranks the rows."""
    names = [f"s{c}" for c in ranksort.streamed_classes(len(classes))]
    rows = _from(metric_rows(label, classes, label_type), "rows")
    query = exp.select(*[sql.col(c) for c in (*STREAM_ROWS, *names)]).from_(rows)
    query.set("with_", exp.With(expressions=[exp.CTE(this=scoring, alias=exp.TableAlias(this=sql.ident(SCORED)))]))
    return query


def figures_query(label: str, classes: Sequence, label_type: str, cells: exp.Expression,
                  sums: dict[str, float]) -> exp.Select:
    """DuckDB's second statement of :func:`evaluate`: :func:`metrics_query`'s last step over
    ``cells`` (a table of the confusion cells and calibration bins, grouped from
    :func:`stream_query`'s rows: ``part``, ``k``, ``y``, ``p``, ``bin``, ``n``, ``m``,
    ``loss``, ``brier``, ``conf``, ``hits``) and the ranking ``sums``
    (``a<c>``, ``q<c>``: :class:`sqlnb.workflows.ranksort.RankSums`)."""
    K = len(classes)
    ranks = exp.select(*[exp.alias_(sql.dbl(sums[f"{t}{c}"]), f"{t}{c}", quoted=True)
                         for c in range(K) for t in "aq"])
    return _summary(label, classes, label_type, exp.select(exp.Star()).from_(cells), [("ranks0", ranks)],
                    ("part", "k", "y", "p", "bin"), ranking.rank_figures)


def _summary(label: str, classes: Sequence, label_type: str, cells: exp.Select,
             ranks: Sequence[tuple[str, exp.Select]], keys: Sequence[str], figures_of) -> exp.Select:
    """The last step: per row of ``cells`` (ordered by ``keys``), every summary count as a
    window SUM over the cells, the ranking figures (``figures_of``: ``class_figures`` over
    the folded score groups, or ``rank_figures`` over the ``ranks`` rows) and the ratios."""
    K = len(classes)
    lits = _row_terms(label, classes, label_type)["lits"]

    def c(name: str) -> exp.Column:
        return sql.col(name, "cells")

    order = [c(name) for name in keys]
    is_cell = exp.EQ(this=c("part"), expression=exp.Literal.number(ranking.CELL))

    def window(cond: exp.Expression | None, value: exp.Expression, default=exp.Literal.number(0)) -> exp.Expression:
        return _window_sum(value if cond is None else _when(cond, value), order, default)

    def total(cond: exp.Expression | None, name: str, value: exp.Expression | None = None) -> exp.Expression:
        """The sum of ``value`` (default ``n``) over the confusion cells where ``cond``."""
        cond = is_cell.copy() if cond is None else exp.and_(is_cell.copy(), cond)
        return exp.alias_(window(cond, c("n") if value is None else value), name, quoted=True)

    def mean(column: str, name: str) -> exp.Expression:
        """The mean of a term over the rows with probabilities (NULL when there are none)."""
        m = window(is_cell.copy(), c("m"), None)
        s = window(is_cell.copy(), c(column), None)
        return exp.alias_(_when(exp.GT(this=m, expression=exp.Literal.number(0)),
                                exp.Div(this=s, expression=sql.as_double(m.copy()))), name, quoted=True)

    labelled = exp.or_(_not_null(c("k")), _not_null(c("y")))
    is_k = [exp.EQ(this=c("k"), expression=exp.Literal.number(i)) for i in range(K)]
    is_pred = [exp.EQ(this=c("p"), expression=v.copy()) for v in lits]
    row_names = [*keys, "n", "conf", "hits"]
    agg_items = [*[exp.alias_(c(name), name, quoted=True) for name in row_names],
                 total(None, "rows"), total(labelled, "labelled"),
                 total(labelled.copy(), "no_proba", exp.Sub(this=c("n"), expression=c("m"))),
                 total(exp.and_(_is_null(c("k")), _not_null(c("y"))), "unknown"),
                 total(exp.or_(*[exp.and_(a.copy(), b.copy()) for a, b in zip(is_k, is_pred)]), "correct"),
                 mean("loss", "log_loss"), mean("brier", "brier")]
    for i in range(K):
        agg_items += [total(is_k[i].copy(), f"support{i}"),
                      total(exp.and_(labelled.copy(), is_pred[i].copy()), f"predicted{i}"),
                      total(exp.and_(is_k[i].copy(), is_pred[i].copy()), f"tp{i}")]
    figures, figure_names = figures_of(K, lambda cond, value: window(cond, value, sql.dbl(0.0)))
    agg_items += figures
    # One row even when there are no rows at all: the totals then come out as 0 (NULL means).
    one = _from(exp.select(exp.alias_(exp.Literal.number(1), "one", quoted=True)), "one")
    agg = exp.select(*agg_items).from_(one).join(_from(cells, "cells"), on=exp.true(), join_type="left")
    for name, r in ranks:
        agg = agg.join(_from(r, name), on=exp.true())
    out = [sql.col(name, "agg") for name in row_names] + _summary_ratios(K)
    out += [sql.col(name, "agg") for name in figure_names] + ranking.averages(K)
    return exp.select(*out).from_(_from(agg, "agg"))


def _grouped_cells(K: int, cell_keys: Sequence[exp.Column], sums: Sequence[exp.Expression]) -> exp.Select:
    """The ``cells`` step of :func:`metrics_query` off DuckDB: the confusion cells, the
    calibration bins and per class one row of AUC and AP sums, from a group per class and
    distinct score (``groups`` → ``ranked`` → ``cells``)."""
    groups = (exp.select(*[c.copy() for c in cell_keys], *[s.copy() for s in sums], *ranking.group_columns(K, "k"))
              .from_(sql.table(ROWS)).group_by(ranking.grouping_sets(K, [c.copy() for c in cell_keys])))
    passed = ["part", "k", "y", "p", "bin", "c", "n", "m", "loss", "brier", "conf", "hits"]
    ranked = exp.select(*[sql.col(c) for c in passed], *ranking.ranked_columns()).from_(_from(groups, "groups"))
    keys = [sql.col(c) for c in ("part", "k", "y", "p", "bin", "c")]
    # Cells and bins pass through one to one (each is one row of "groups"); a class's
    # score groups fold into one row.
    return (exp.select(*[c.copy() for c in keys],
                       *[exp.alias_(exp.Sum(this=sql.col(c)), c, quoted=True) for c in ("n", "m", "loss", "brier")],
                       *ranking.fold_columns())
            .from_(_from(ranked, "ranked")).group_by(*[c.copy() for c in keys]))


def scoring_for_metrics(model, data: Any, con: Any, label: str | None,
                        scored: exp.Select | None = None) -> tuple[Any, str, exp.Select]:
    """``(engine, label, scoring SELECT)``: ``data`` resolved on the engine of ``con``, its
    label column checked, scored with the outputs the metrics read and the label kept (or ``scored``)."""
    engine = as_engine(con, data)
    label = label or model.label
    source = engine.resolve(read_with(data, model.read_types()))
    source.require([label], "label column")
    if scored is None:
        scored = model.scoring_query(source, outputs=ranking.scoring_outputs(model.classes), keep=[label],
                                     dialect=engine.dialect)
    return engine, label, scored


@sql.trees_collected_by_refcount
def evaluate(model, data: Any, con: Any = None, label: str | None = None, labels: str = "present",
             scored: exp.Select | None = None) -> Evaluation:
    """Evaluate ``model`` on labelled ``data``, in SQL, where the data is.

    One statement (:func:`metrics_query`) reads the scored rows once and returns one row
    per confusion cell: the rows never reach Python, on DuckDB, PostgreSQL or Spark.

    Parameters
    ----------
    model : Model
        Any sqlnb model (naive Bayes, LDA, QDA, logistic).
    data : str, Table, Query, Files, Source, relation or Arrow table
        The rows to score, holding the model's features and the label (on an engine:
        what its ``resolve`` takes, e.g. a table name or a query there).
    con : duckdb connection or engine, optional
        A DuckDB connection that can see ``data`` (default: a new in-memory one), or an
        engine (:class:`~sqlnb.engines.PostgresEngine`, :class:`~sqlnb.engines.SparkEngine`)
        that scores and aggregates the rows itself.
    label : str, optional
        The label column in ``data`` (default: the model's label).
    labels : {"present", "model"}
        The labels the precision, recall and F1 averages are over: those present in the
        rows' labels or predictions (scikit-learn's default), or the model's classes
        (scikit-learn's ``labels=model.classes``). See the module docstring.
    scored : SELECT, optional
        ``data``'s rows already scored (:func:`sqlnb.workflows.curves.scored_once`).

    Returns
    -------
    Evaluation

    Examples
    --------
    >>> from sqlnb.workflows.evaluate import evaluate
    >>> evaluate(model, "test.parquet").accuracy          # doctest: +SKIP
    0.8347
    >>> evaluate(model, "holdout", con=SparkEngine(spark)).roc_auc   # doctest: +SKIP
    0.9121
    """
    start = time.perf_counter()
    check_labels(labels)
    engine, label, scored = scoring_for_metrics(model, data, con, label, scored)
    classes = list(model.classes)
    if engine.dialect == "duckdb":
        cells = _on_duckdb(engine, label, classes, model.label_type, scored)
    else:
        query = metrics_query(label, classes, model.label_type, scored)
        cells = [dict(zip([e.alias_or_name for e in query.expressions], r)) for r in engine.execute(query)]
    row = cells[0]  # every row carries the totals (one row, all NULL, when there are no rows)
    per_class = [ClassMetrics(c, float(row[f"precision{k}"]), float(row[f"recall{k}"]), float(row[f"f1_{k}"]),
                              int(row[f"support{k}"]), int(row[f"predicted{k}"]),
                              _num(row[f"auc{k}"]), _num(row[f"ap{k}"])) for k, c in enumerate(classes)]
    bins = [(c["bin"], c["n"], c["conf"], c["hits"]) for c in cells
            if c["part"] == ranking.BIN and c["bin"] is not None]

    found = [(c["k"], c["y"], c["p"], c["n"]) for c in cells
             if (c["k"] is not None or c["y"] is not None) and c["part"] == ranking.CELL]
    counts = [(classes[k] if k is not None else y, p, n) for k, y, p, n in found]
    true_labels = classes + sorted({y for k, y, _, _ in found if k is None}, key=_sort_key)
    predicted = classes + ([None] if any(p is None for _, p, _ in counts) else [])
    ti, pi = {v: i for i, v in enumerate(true_labels)}, {v: i for i, v in enumerate(predicted)}
    matrix = [[0] * len(predicted) for _ in true_labels]
    for y, p, n in counts:
        matrix[ti[y]][pi[p]] += int(n)
    averages = label_averages(classes, true_labels, predicted, matrix, labels)
    if getattr(getattr(model, "calibration", None), "venn_abers", None) is not None:
        averages["interval_width"] = _num(engine.execute(width_query(scored, label, classes))[0][0])
    return Evaluation(
        label=label, classes=classes, rows=int(row["rows"]), labelled_rows=int(row["labelled"]),
        unlabelled_rows=int(row["rows"]) - int(row["labelled"]), no_proba_rows=int(row["no_proba"]),
        unknown_label_rows=int(row["unknown"]), accuracy=_num(row["accuracy"]), log_loss=_num(row["log_loss"]),
        brier=_num(row["brier"]), roc_auc=_num(row["auc1"]) if len(classes) == 2 else None, positive_class=classes[1] if len(classes) == 2 else None,
        macro_f1=averages.pop("macro_f1"), weighted_f1=averages.pop("weighted_f1"),
        per_class=per_class, confusion_true=true_labels, confusion_predicted=predicted, confusion=matrix,
        seconds=round(time.perf_counter() - start, 3),
        decision=decision_metrics(model.decision, found, int(row["no_proba"])),
        macro_roc_auc=_num(row["macro_roc_auc"]), weighted_roc_auc=_num(row["weighted_roc_auc"]),
        macro_average_precision=_num(row["macro_average_precision"]),
        weighted_average_precision=_num(row["weighted_average_precision"]),
        ece=_num(row["ece"]), reliability=ranking.reliability(bins), labels=labels, **averages)


def _on_duckdb(engine, label: str, classes: list, label_type: str, scored: exp.Select) -> list[dict]:
    """The rows of :func:`figures_query` over :func:`stream_query`'s grouped rows (a view of
    ``engine``'s connection while it runs) and the ranking sums of its ranked rows
    (:func:`sqlnb.workflows.ranksort.read_stream`), as dicts."""
    # The scores wait in files where DuckDB spills (``--temp-directory``), if it exists.
    spill = engine.execute(exp.select(exp.func("current_setting", exp.Literal.string("temp_directory"))))[0][0]
    reader = engine.relation(stream_query(label, classes, label_type, scored)).to_arrow_reader(ranksort.BATCH)
    grouped, sums = ranksort.read_stream(reader, len(classes), spill if os.path.isdir(spill or "") else None)
    name = f"sqlnb_cells_{id(grouped):x}"
    engine.con.register(name, grouped)
    try:
        query = figures_query(label, classes, label_type, sql.table(name), sums)
        names = [e.alias_or_name for e in query.expressions]
        return [dict(zip(names, r)) for r in engine.execute(query)]
    finally:
        engine.con.unregister(name)


def _unknown_examples(ev: Evaluation, most: int = 2) -> str:
    """``e.g. '>50K.' (nearest class '>50K')``: a spelling that differs from the
    training labels is the usual cause, so the nearest class is named beside it."""
    known = [label_text(c) for c in ev.classes]
    parts = []
    for y in ev.unknown_labels[:most]:
        near = difflib.get_close_matches(label_text(y), known, n=1, cutoff=0.0)
        parts.append(f"{label_text(y)!r}" + (f" (nearest class {near[0]!r})" if near else ""))
    more = len(ev.unknown_labels) - most
    return "e.g. " + ", ".join(parts) + (f" and {more} more" if more > 0 else "")


def text_report(ev: Evaluation, digits: int = 4) -> str:
    """A readable report of ``ev``: headline metrics, per-class table, confusion matrix."""
    from sqlnb.workflows.report import format_table, fmt_count

    def f(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.{digits}f}"

    lines = [f"rows        {fmt_count(ev.rows)}" + (f"  ({fmt_count(ev.unlabelled_rows)} without a label, not evaluated)"
                                                     if ev.unlabelled_rows else ""),
             f"accuracy    {f(ev.accuracy)}",
             f"log loss    {f(ev.log_loss)}",
             f"Brier       {f(ev.brier)}"]
    if ev.roc_auc is not None or len(ev.classes) == 2:
        lines.append(f"ROC AUC     {f(ev.roc_auc)}  (positive class {label_text(ev.positive_class)!r})")
    if len(ev.classes) > 2:
        lines.append(f"ROC AUC     {f(ev.macro_roc_auc)} macro, {f(ev.weighted_roc_auc)} weighted (one-vs-rest)")
    lines.append(f"avg prec.   {f(ev.macro_average_precision)} macro, {f(ev.weighted_average_precision)} weighted")
    lines.append(f"ECE         {f(ev.ece)}  ({ranking.BINS} equal-width bins of the top-class probability)")
    if ev.interval_width is not None:
        lines.append(f"VA width    {f(ev.interval_width)}  (mean p1 − p0 of the Venn–Abers intervals)")
    over = ev.averaged_labels
    if ev.labels == "present" and over != list(ev.classes):
        # Only said where it matters: the averages are then not over the model's classes.
        left = [label_text(c) for c in ev.classes if c not in over]
        extra = [label_text(y) for y in over if y not in ev.classes]
        why = ([f"class {', '.join(map(repr, left))} in no row's label or prediction left out"] if left else []) + \
              ([f"unknown label {', '.join(map(repr, extra))} counted"] if extra else [])
        lines.append(f"macro F1    {f(ev.macro_f1)}  (over {len(over)} labels: {'; '.join(why)}; "
                     "--labels model averages over the model's classes)")
    else:
        lines.append(f"macro F1    {f(ev.macro_f1)}")
    if ev.decision is not None:
        lines += report_lines(ev.decision, digits)
    if ev.no_proba_rows:
        lines.append(f"note: {fmt_count(ev.no_proba_rows)} rows have no probabilities or prediction (zero likelihood "
                     "under every class, or a feature the model cannot score); counted as errors, left out of "
                     "log loss, Brier, AUC, average precision and ECE")
    if ev.unknown_label_rows:
        lines.append(f"note: {fmt_count(ev.unknown_label_rows)} rows have a label the model does not know "
                     f"({_unknown_examples(ev)}): counted as errors, with probability 0 in log loss and Brier, "
                     "wrong in the ECE, left out of AUC and average precision")
    lines.append("")
    lines.append(format_table(["class", "precision", "recall", "f1", "support", "ROC AUC", "avg prec"],
                              [[label_text(m.label), f(m.precision), f(m.recall), f(m.f1), fmt_count(m.support),
                                f(m.roc_auc), f(m.average_precision)] for m in ev.per_class], align="lrrrrrr"))
    lines.append("")
    lines.append("confusion matrix (rows: true label, columns: prediction)")
    header = [""] + ["(none)" if p is None else label_text(p) for p in ev.confusion_predicted]
    lines.append(format_table(header, [[label_text(t)] + [fmt_count(n) for n in r]
                                       for t, r in zip(ev.confusion_true, ev.confusion)],
                              align="l" + "r" * len(ev.confusion_predicted)))
    if any(b["rows"] for b in ev.reliability):
        lines += ["", ranking.reliability_text(ev.reliability, f, fmt_count)]
    return "\n".join(lines)
