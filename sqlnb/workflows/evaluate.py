"""Classification metrics, computed in SQL over the model's scoring query.

The rows never leave the database: three queries over the scoring SELECT
(:meth:`~sqlnb.models.base.Model.scoring_query`, the one ``model.score`` runs) return a handful
of numbers. Over the labelled rows (label not NULL; unlabelled rows are counted and left
out)::

    accuracy   = #(prediction = label) / #labelled
    log loss   = mean −ln clip(p_label, ε, 1 − ε)      ε = 2.22e-16 (float64 machine ε)
    Brier      = mean Σ_c (p_c − [label = c])²,  halved for two classes
    precision_c = tp_c / #(prediction = c);  recall_c = tp_c / #(label = c)
    F1_c        = 2·tp_c / (#(label = c) + #(prediction = c))   (0 when undefined)
    ROC AUC    (two classes) Mann–Whitney: (R₊ − n₊(n₊+1)/2) / (n₊·n₋), with R₊ the sum of
               the positives' mid-ranks

These are scikit-learn's definitions (``log_loss``, ``brier_score_loss``,
``precision_recall_fscore_support`` with ``zero_division=0``, ``roc_auc_score``). The
positive class for ROC AUC is the second class in sorted order, and rows are ranked by
the log-odds ``jll₊ − jll₋`` rather than by ``p₊``: the same order, except that rows whose
probability rounds to exactly 0 or 1 stay distinguishable.

Two kinds of rows are reported rather than silently dropped:

* rows with no probabilities (zero likelihood under every class, only possible with the
  MLE estimator; or, for LDA, QDA and logistic models, a NULL or non-finite feature):
  their prediction is NULL, they count as errors in accuracy and in the
  confusion matrix (predicted ``None``), and are left out of log loss, Brier and AUC;
* rows whose label is not a class of the model: errors in accuracy, probability 0 for
  their label in log loss (so ``−ln ε ≈ 36``) and Brier, and left out of AUC.
"""

from __future__ import annotations

import difflib
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.models.finish import class_columns, label_text
from sqlnb.source import read_with, resolve
from sqlnb.stats import _sort_key

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


def _from(tree: exp.Expression, alias: str) -> exp.Subquery:
    return exp.Subquery(this=tree, alias=exp.TableAlias(this=sql.ident(alias)))


#: The scored rows, as the metric queries name them (a CTE, see :func:`over_scored`).
SCORED = "scored"


def over_scored(query: exp.Select, scoring: exp.Select) -> exp.Select:
    """``WITH "scored" AS MATERIALIZED (scoring) query``.

    Materialised because the metrics read each probability several times: inlined,
    DuckDB would copy the whole per-class score expression into every reference
    (measured: 2.7 s instead of 0.26 s for 600 rows and 3 classes).
    """
    cte = exp.CTE(this=scoring, alias=exp.TableAlias(this=sql.ident(SCORED)), materialized=True)
    query.set("with_", exp.With(expressions=[cte]))  # the queries are built fresh per call
    return query


def summary_query(label: str, classes: Sequence, label_type: str) -> exp.Select:
    """One scan of ``scored``: counts, accuracy, log loss, Brier and per-class
    precision/recall/F1."""
    K = len(classes)
    y, pred = sql.col(label), sql.col("prediction")
    probas = [sql.col(c) for c in class_columns("proba_", classes)]
    lits = [sql.value(c, label_type) for c in classes]
    labelled = _not_null(y.copy())
    scored_row = exp.and_(labelled.copy(), _not_null(probas[0].copy()))
    is_class = [exp.EQ(this=y.copy(), expression=v.copy()) for v in lits]
    # p of the row's own label; 0 for a label the model does not know.
    p_label = exp.Case(ifs=[exp.If(this=c.copy(), true=p.copy()) for c, p in zip(is_class, probas)],
                       default=sql.dbl(0.0))
    clipped = exp.Greatest(this=exp.Least(this=p_label, expressions=[sql.dbl(1.0 - EPS)]),
                           expressions=[sql.dbl(EPS)])
    indicator = [exp.Case(ifs=[exp.If(this=c.copy(), true=sql.dbl(1.0))], default=sql.dbl(0.0)) for c in is_class]
    squares = sql.add(exp.Pow(this=sql.paren(exp.Sub(this=p.copy(), expression=i)), expression=sql.dbl(2.0))
                      for p, i in zip(probas, indicator))
    # sqlglot renders trees as built, without precedence parentheses: add them.
    brier = exp.Mul(this=sql.paren(squares), expression=sql.dbl(0.5)) if K == 2 else squares

    inner: list[exp.Expression] = [
        exp.alias_(exp.Count(this=exp.Star()), "rows", quoted=True),
        exp.alias_(_count_if(labelled.copy()), "labelled", quoted=True),
        exp.alias_(_count_if(exp.and_(labelled.copy(), exp.Is(this=probas[0].copy(), expression=exp.null()))),
                   "no_proba", quoted=True),
        exp.alias_(_count_if(exp.and_(labelled.copy(), exp.Not(this=exp.In(this=y.copy(), expressions=[v.copy() for v in lits])))),
                   "unknown", quoted=True),
        exp.alias_(_count_if(exp.and_(labelled.copy(), exp.EQ(this=pred.copy(), expression=y.copy()))),
                   "correct", quoted=True),
        exp.alias_(exp.Filter(this=exp.Avg(this=exp.Neg(this=exp.Ln(this=clipped))),
                              expression=exp.Where(this=scored_row.copy())), "log_loss", quoted=True),
        exp.alias_(exp.Filter(this=exp.Avg(this=brier), expression=exp.Where(this=scored_row.copy())),
                   "brier", quoted=True),
    ]
    for k, (c, v) in enumerate(zip(is_class, lits)):
        is_pred = exp.and_(labelled.copy(), exp.EQ(this=pred.copy(), expression=v.copy()))
        inner += [exp.alias_(_count_if(c.copy()), f"support{k}", quoted=True),
                  exp.alias_(_count_if(is_pred.copy()), f"predicted{k}", quoted=True),
                  exp.alias_(_count_if(exp.and_(c.copy(), is_pred)), f"tp{k}", quoted=True)]
    scan = exp.select(*inner).from_(sql.table(SCORED))

    def a(name: str) -> exp.Column:
        return sql.col(name, "agg")

    outer: list[exp.Expression] = [a(n) for n in ("rows", "labelled", "no_proba", "unknown", "log_loss", "brier")]
    outer.append(exp.alias_(exp.Case(ifs=[exp.If(this=exp.GT(this=a("labelled"), expression=exp.Literal.number(0)),
                                                 true=_ratio(a("correct"), a("labelled")))]), "accuracy", quoted=True))
    f1s, supports = [], []
    for k in range(K):
        tp, sup, prd = a(f"tp{k}"), a(f"support{k}"), a(f"predicted{k}")
        f1 = _ratio(exp.Mul(this=exp.Literal.number(2), expression=tp.copy()),
                    exp.Add(this=sup.copy(), expression=prd.copy()))
        outer += [sup, prd, exp.alias_(_ratio(tp.copy(), prd.copy()), f"precision{k}", quoted=True),
                  exp.alias_(_ratio(tp.copy(), sup.copy()), f"recall{k}", quoted=True),
                  exp.alias_(f1, f"f1_{k}", quoted=True)]
        f1s.append(f1.copy())
        supports.append(sup.copy())
    outer.append(exp.alias_(exp.Div(this=sql.paren(sql.add(f1s)), expression=sql.dbl(float(K))), "macro_f1", quoted=True))
    weighted = sql.add(exp.Mul(this=sql.paren(f), expression=sql.as_double(s)) for f, s in zip(f1s, supports))
    outer.append(exp.alias_(_ratio(weighted, sql.paren(sql.add(s.copy() for s in supports))), "weighted_f1", quoted=True))
    return exp.select(*outer).from_(_from(scan, "agg"))


def confusion_query(label: str, classes: Sequence, label_type: str) -> exp.Select:
    """Row counts per (true class, prediction) over the labelled rows of ``scored``.

    The true class is found by the comparisons the accuracy uses (``y = <class literal>``,
    so a label spelled ``'1'`` or ``1.0`` for a model whose classes are the integers 0 and
    1 is class 1, as it is for the accuracy); a label that is no class is kept as it is."""
    y, pred = sql.col(label), sql.col("prediction")
    k = exp.Case(ifs=[exp.If(this=exp.EQ(this=y.copy(), expression=sql.value(c, label_type)),
                             true=exp.Literal.number(i)) for i, c in enumerate(classes)])
    other = exp.Case(ifs=[exp.If(this=exp.Is(this=k.copy(), expression=exp.null()), true=y.copy())])
    return (exp.select(exp.alias_(k, "k", quoted=True), exp.alias_(other, "y", quoted=True),
                       exp.alias_(pred, "p", quoted=True), exp.alias_(exp.Count(this=exp.Star()), "n", quoted=True))
            .from_(sql.table(SCORED)).where(_not_null(y.copy()))
            .group_by(sql.col("k"), sql.col("y"), sql.col("p")))


def auc_query(label: str, classes: Sequence, label_type: str) -> exp.Select:
    """Two-class ROC AUC by the rank-sum (Mann–Whitney) statistic, with mid-ranks for ties.

    Rows are grouped by score; a group's mid-rank is the number of rows ranked below it
    plus (n + 1)/2, so only one window (a running sum over the groups) is needed.
    """
    neg, pos = classes
    jll_neg, jll_pos = (sql.col(c) for c in class_columns("jll_", classes))
    y = sql.col(label)
    rows = (exp.select(exp.alias_(exp.Sub(this=jll_pos, expression=jll_neg), "score", quoted=True),
                       exp.alias_(exp.EQ(this=y.copy(), expression=sql.value(pos, label_type)), "pos", quoted=True))
            .from_(sql.table(SCORED))
            .where(exp.and_(exp.In(this=y.copy(), expressions=[sql.value(neg, label_type), sql.value(pos, label_type)]),
                            _not_null(sql.col(class_columns("proba_", classes)[0])))))
    groups = (exp.select(sql.col("score"),
                         exp.alias_(sql.as_double(_count_if(sql.col("pos"))), "npos", quoted=True),
                         exp.alias_(sql.as_double(exp.Count(this=exp.Star())), "n", quoted=True))
              .from_(_from(rows, "r")).group_by(sql.col("score")))
    below = exp.Coalesce(this=exp.Window(
        this=exp.Sum(this=sql.col("n")),
        order=exp.Order(expressions=[exp.Ordered(this=sql.col("score"))]),
        spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                            end=exp.Literal.number(1), end_side="PRECEDING")), expressions=[sql.dbl(0.0)])
    ranked = exp.select(sql.col("npos"), sql.col("n"), exp.alias_(below, "below", quoted=True)).from_(_from(groups, "g"))
    mid_rank = exp.Add(this=sql.col("below"), expression=exp.Div(
        this=sql.paren(exp.Add(this=sql.col("n"), expression=sql.dbl(1.0))), expression=sql.dbl(2.0)))
    P, T = exp.Sum(this=sql.col("npos")), exp.Sum(this=sql.col("n"))
    N = exp.Sub(this=T, expression=P.copy())
    rank_sum = exp.Sum(this=exp.Mul(this=sql.col("npos"), expression=sql.paren(mid_rank)))
    u = exp.Sub(this=rank_sum, expression=exp.Div(
        this=exp.Mul(this=P.copy(), expression=sql.paren(exp.Add(this=P.copy(), expression=sql.dbl(1.0)))),
        expression=sql.dbl(2.0)))
    auc = exp.Case(ifs=[exp.If(this=exp.and_(exp.GT(this=P.copy(), expression=sql.dbl(0.0)),
                                             exp.GT(this=N.copy(), expression=sql.dbl(0.0))),
                               true=exp.Div(this=sql.paren(u), expression=sql.paren(exp.Mul(this=P.copy(), expression=sql.paren(N)))))])
    return exp.select(exp.alias_(auc, "auc", quoted=True)).from_(_from(ranked, "ranked"))


def evaluate(model, data: Any, con: duckdb.DuckDBPyConnection | None = None, label: str | None = None) -> Evaluation:
    """Evaluate ``model`` on labelled ``data``, in SQL.

    Parameters
    ----------
    model : Model
        Any sqlnb model (naive Bayes, LDA, QDA, logistic).
    data : str, Table, Query, Files, Source, relation or Arrow table
        The rows to score, holding the model's features and the label.
    con : duckdb connection, optional
        A connection that can see ``data`` (default: a new in-memory one).
    label : str, optional
        The label column in ``data`` (default: the model's label).

    Returns
    -------
    Evaluation

    Examples
    --------
    >>> from sqlnb.workflows.evaluate import evaluate
    >>> evaluate(model, "test.parquet").accuracy          # doctest: +SKIP
    0.8347
    """
    start = time.perf_counter()
    con = con if con is not None else duckdb.connect()
    label = label or model.label
    source = resolve(read_with(data, model.column_types()), con)
    source.require([label], "label column")
    classes = list(model.classes)
    scored = model.scoring_query(source, outputs=("jll", "proba", "prediction"), keep=[label])

    rel = con.sql(sql.render(over_scored(summary_query(label, classes, model.label_type), scored)))
    row = dict(zip(rel.columns, rel.fetchall()[0]))
    per_class = [ClassMetrics(c, float(row[f"precision{k}"]), float(row[f"recall{k}"]), float(row[f"f1_{k}"]),
                              int(row[f"support{k}"]), int(row[f"predicted{k}"])) for k, c in enumerate(classes)]

    found = con.execute(sql.render(over_scored(confusion_query(label, classes, model.label_type), scored))).fetchall()
    counts = [(classes[k] if k is not None else y, p, n) for k, y, p, n in found]
    true_labels = classes + sorted({y for k, y, _, _ in found if k is None}, key=_sort_key)
    predicted = classes + ([None] if any(p is None for _, p, _ in counts) else [])
    ti, pi = {v: i for i, v in enumerate(true_labels)}, {v: i for i, v in enumerate(predicted)}
    matrix = [[0] * len(predicted) for _ in true_labels]
    for y, p, n in counts:
        matrix[ti[y]][pi[p]] += int(n)

    auc = None
    if len(classes) == 2:
        auc = _num(con.execute(sql.render(over_scored(auc_query(label, classes, model.label_type), scored))).fetchall()[0][0])
    return Evaluation(
        label=label, classes=classes, rows=int(row["rows"]), labelled_rows=int(row["labelled"]),
        unlabelled_rows=int(row["rows"]) - int(row["labelled"]), no_proba_rows=int(row["no_proba"]),
        unknown_label_rows=int(row["unknown"]), accuracy=_num(row["accuracy"]), log_loss=_num(row["log_loss"]),
        brier=_num(row["brier"]), roc_auc=auc, positive_class=classes[1] if len(classes) == 2 else None,
        macro_f1=_num(row["macro_f1"]) if row["labelled"] else None,
        weighted_f1=_num(row["weighted_f1"]) if row["labelled"] else None,
        per_class=per_class, confusion_true=true_labels, confusion_predicted=predicted, confusion=matrix,
        seconds=round(time.perf_counter() - start, 3))


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
    lines.append(f"macro F1    {f(ev.macro_f1)}")
    if ev.no_proba_rows:
        lines.append(f"note: {fmt_count(ev.no_proba_rows)} rows have no probabilities or prediction (zero likelihood "
                     "under every class, or a feature the model cannot score); counted as errors, left out of "
                     "log loss, Brier and AUC")
    if ev.unknown_label_rows:
        lines.append(f"note: {fmt_count(ev.unknown_label_rows)} rows have a label the model does not know "
                     f"({_unknown_examples(ev)}): counted as errors, with probability 0 in log loss and Brier, "
                     "left out of AUC")
    lines.append("")
    lines.append(format_table(["class", "precision", "recall", "f1", "support"],
                              [[label_text(m.label), f(m.precision), f(m.recall), f(m.f1), fmt_count(m.support)]
                               for m in ev.per_class], align="lrrrr"))
    lines.append("")
    lines.append("confusion matrix (rows: true label, columns: prediction)")
    header = [""] + ["(none)" if p is None else label_text(p) for p in ev.confusion_predicted]
    lines.append(format_table(header, [[label_text(t)] + [fmt_count(n) for n in r]
                                       for t, r in zip(ev.confusion_true, ev.confusion)],
                              align="l" + "r" * len(ev.confusion_predicted)))
    return "\n".join(lines)
