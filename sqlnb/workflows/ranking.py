"""Ranking and calibration metrics in SQL: one-vs-rest ROC AUC and average precision per
class, the expected calibration error and its reliability table, and the curves behind them.

These are the pieces :func:`sqlnb.workflows.evaluate.metrics_query` adds to its one pass
over the scored rows, and :func:`sqlnb.workflows.curves.curve_points` stops at. Over the
*ranked* rows — a label that is a class of the model, and probabilities — class ``c``
against the rest::

    score_c  two classes:  jll_c − jll_other                (the log-odds)
             K classes:    ln p_c − ln Σ_{j≠c} p_j          (the one-vs-rest log-odds)
                           (+inf when Σ_{j≠c} p_j is 0)
    groups   one per distinct score_c: pos (rows of class c), neg (rows of another class)
    tps, fps rows of class c / of another class with a score ≥ the group's (a window
             over the groups in decreasing score)
    P, N     all rows of class c / of another class
    AUC_c    Σ_groups pos · (N − fps + neg/2) / (P·N)   (Mann–Whitney, ties count ½)
    AP_c     Σ_groups (pos/P) · tps/(tps + fps)         (Σ_n (R_n − R_{n−1}) P_n)
    macro    the mean over the classes where it is defined
    weighted the mean weighted by P (the class's ranked rows)

AUC_c is undefined (None) when P or N is 0, AP_c when P is 0, and the averages leave such
a class out (all undefined: None). scikit-learn 1.9 warns there and gives AUC NaN (so a
NaN macro average) and AP 0 (counted in its macro average); the weighted averages agree
when the undefined classes have no rows (weight 0), the usual case. Otherwise these are scikit-learn's ``roc_auc_score(y == c, ·)`` and
``average_precision_score(y == c, ·)``, and the averages its ``roc_auc_score(...,
multi_class="ovr", average="macro"|"weighted")`` and ``average_precision_score`` of the
binarised labels. Every count is an integer, so the sums are exact and equal on every engine.

**Why the log-odds, not p_c.** score_c is a strictly increasing function of p_c, so it
ranks the rows as p_c does, with one exception: probabilities that round to the same
double (above all exactly 0 or 1 far from the boundary) are tied in p_c but not in the
log-odds, which keep the model's order. Ln p_c is read from the scoring output (``jll_c −
lse``, accurate where p_c underflows) and Σ_{j≠c} p_j is added from the small
probabilities, without the cancellation of 1 − p_c. scikit-learn, given the probabilities,
would count such rows as ties; given the log-odds, it gives exactly these figures.

**Calibration.** Over the rows with a label and probabilities (a label that is no class
counts as a wrong prediction, as in the accuracy), the confidence is the top-class
probability ``conf = max_c p_c`` and the row is correct when its label is the most
probable class (the first of equal ones, like the argmax): what is calibrated is the
probabilities, so a decision rule (:mod:`sqlnb.models.decision`) that predicts another
class, or rejects the row, does not change the ECE. The rows fall into :data:`BINS` equal-width bins, bin ``b = min(floor(15·conf), 14)``
(``[b/15, (b+1)/15)``, with 1.0 in the last bin; floor of the double product)::

    ECE = Σ_b (n_b / n) · |acc_b − conf_b| = Σ_b |correct_b − Σ conf over b| / n

with ``acc_b`` the share of correct rows and ``conf_b`` the mean confidence of bin ``b``.
The reliability table lists, per bin, its rows, mean confidence and accuracy.
"""

from __future__ import annotations

from typing import Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.models.finish import class_columns

#: Equal-width bins of the top-class probability for the ECE and the reliability table.
BINS = 15
#: The ``part`` of a grouped row: a confusion cell, a calibration bin, a class's score group.
CELL, BIN, SCORE = 0, 1, 2


def _num(v: int) -> exp.Literal:
    return exp.Literal.number(v)


def _when(cond: exp.Expression, value: exp.Expression, default: exp.Expression | None = None) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=cond, true=value)], default=default)


def _not_null(e: exp.Expression) -> exp.Expression:
    return exp.Not(this=exp.Is(this=e, expression=exp.null()))


def scoring_outputs(classes: Sequence) -> tuple[str, ...]:
    """The scoring outputs the metrics read: the log-odds need ``jll`` (two classes) or
    ``log_proba`` (more)."""
    return ("jll", "proba", "prediction") if len(classes) == 2 else ("log_proba", "proba", "prediction")


def score_names(K: int) -> list[str]:
    return [f"s{i}" for i in range(K)]


def row_columns(classes: Sequence, k: exp.Expression, scored: exp.Expression,
                correct: exp.Expression) -> list[exp.Expression]:
    """Per scored row: ``conf``, ``bin`` and ``hit`` (1.0 when correct) on rows with a
    label and probabilities, and per class the score ``s<c>`` on the ranked rows (those
    with a class as label: ``k`` not NULL). ``scored``: the row has a label and
    probabilities; ``correct``: its label is the most probable class."""
    K = len(classes)
    probas = [sql.col(c) for c in class_columns("proba_", classes)]
    conf = sql.greatest([p.copy() for p in probas])
    bin_ = exp.Least(this=exp.Floor(this=exp.Mul(this=conf.copy(), expression=sql.dbl(float(BINS)))),
                     expressions=[sql.dbl(float(BINS - 1))])
    out = [exp.alias_(_when(scored.copy(), conf), "conf", quoted=True),
           exp.alias_(_when(scored.copy(), bin_), "bin", quoted=True),
           exp.alias_(_when(scored.copy(), _when(correct, sql.dbl(1.0), sql.dbl(0.0))), "hit", quoted=True)]
    ranked = exp.and_(_not_null(k.copy()), _not_null(probas[0].copy()))
    if K == 2:
        jll = [sql.col(c) for c in class_columns("jll_", classes)]
        # a − b = −(b − a) exactly in IEEE arithmetic: class 0's order is class 1's reversed.
        scores = [exp.Sub(this=jll[0].copy(), expression=jll[1].copy()),
                  exp.Sub(this=jll[1].copy(), expression=jll[0].copy())]
    else:
        log_p = [sql.col(c) for c in class_columns("log_proba_", classes)]
        scores = []
        for c in range(K):
            rest = sql.add(p.copy() for j, p in enumerate(probas) if j != c)
            # ln(0) raises on PostgreSQL and DuckDB, is NULL on Spark: p_c = 1 exactly is +inf.
            scores.append(_when(exp.GT(this=rest, expression=sql.dbl(0.0)),
                                exp.Sub(this=log_p[c], expression=exp.Ln(this=rest.copy())), sql.dbl(float("inf"))))
    out += [exp.alias_(_when(ranked.copy(), s), name, quoted=True) for s, name in zip(scores, score_names(K))]
    return out


def grouping_sets(K: int, cell_keys: Sequence[exp.Expression]) -> exp.GroupingSets:
    """``GROUPING SETS ((cell keys), (bin), (s0), …, (s<K−1>))`` (no cell set without keys)."""
    sets = [exp.Tuple(expressions=[c.copy() for c in cell_keys])] if cell_keys else []
    sets += [exp.Tuple(expressions=[sql.col(n)]) for n in ["bin"] + score_names(K)]
    return exp.GroupingSets(expressions=sets)


def _grouped(name: str) -> exp.Expression:
    """True on the rows of the grouping set of column ``name``."""
    return exp.EQ(this=exp.Grouping(expressions=[sql.col(name)]), expression=_num(0))


def group_columns(K: int, cell_key: str | None) -> list[exp.Expression]:
    """The columns the grouped rows add: ``part`` (:data:`CELL`, :data:`BIN`, :data:`SCORE`),
    ``bin``, ``conf`` and ``hits`` sums, and for a score group its class ``c``, ``score``
    and ``pos`` (rows of class ``c``; ``n − pos`` are of another). ``cell_key``: a column
    grouped in the confusion cells' set only (None: there is no such set)."""
    names = score_names(K)
    part_ifs = [exp.If(this=_grouped(cell_key), true=_num(CELL))] if cell_key else []
    part_ifs.append(exp.If(this=_grouped("bin"), true=_num(BIN)))
    of_set = [_grouped(n) for n in names]
    is_k = [exp.EQ(this=sql.col("k"), expression=_num(i)) for i in range(K)]
    pos = [exp.Filter(this=exp.Count(this=exp.Star()), expression=exp.Where(this=cond)) for cond in is_k]
    return [
        exp.alias_(exp.Case(ifs=part_ifs, default=_num(SCORE)), "part", quoted=True),
        sql.col("bin"),
        exp.alias_(exp.Sum(this=sql.col("conf")), "conf", quoted=True),
        exp.alias_(exp.Sum(this=sql.col("hit")), "hits", quoted=True),
        exp.alias_(exp.Case(ifs=[exp.If(this=g.copy(), true=_num(i)) for i, g in enumerate(of_set)]), "c", quoted=True),
        exp.alias_(exp.Case(ifs=[exp.If(this=g.copy(), true=sql.col(n)) for g, n in zip(of_set, names)]),
                   "score", quoted=True),
        exp.alias_(exp.Case(ifs=[exp.If(this=g.copy(), true=p) for g, p in zip(of_set, pos)]), "pos", quoted=True),
    ]


def _on_scores() -> exp.Expression:
    return exp.and_(exp.EQ(this=sql.col("part"), expression=_num(SCORE)), _not_null(sql.col("score")))


def ranked_columns() -> list[exp.Expression]:
    """Windows over the score groups of each class, in decreasing score: ``tps``, ``fps``
    (rows of the class / of another with a score ≥ the group's), ``P`` and ``N`` (all of
    them: ``pos_all``, ``neg_all``; DuckDB folds the case of names, so not ``P``, which
    would be the prediction ``p``), next to the group's ``pos`` and ``neg``; all as DOUBLE (exact integers: PostgreSQL
    would divide integers as integers). 0 on rows that are no score group."""
    pos = _when(_on_scores(), sql.as_double(sql.col("pos")), sql.dbl(0.0))
    neg = _when(_on_scores(), sql.as_double(exp.Sub(this=sql.col("n"), expression=sql.col("pos"))), sql.dbl(0.0))
    partition = [sql.col("part"), sql.col("c")]

    def window(e: exp.Expression, cumulative: bool) -> exp.Window:
        if not cumulative:
            return exp.Window(this=exp.Sum(this=e.copy()), partition_by=[p.copy() for p in partition])
        return exp.Window(this=exp.Sum(this=e.copy()), partition_by=[p.copy() for p in partition],
                          order=exp.Order(expressions=[exp.Ordered(this=sql.col("score"), desc=True)]),
                          spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING", end="CURRENT ROW"))
    return [exp.alias_(pos, "pos", quoted=True), exp.alias_(neg, "neg", quoted=True),
            exp.alias_(window(pos, True), "tps", quoted=True), exp.alias_(window(neg, True), "fps", quoted=True),
            exp.alias_(window(pos, False), "pos_all", quoted=True),
            exp.alias_(window(neg, False), "neg_all", quoted=True)]


def fold_columns() -> list[exp.Expression]:
    """Aggregates folding a class's score groups into one row: the AUC and AP numerators
    (module docstring) and the class's ``pos_all`` and ``neg_all``; ``conf`` and ``hits`` pass through."""
    pos, neg, tps, fps, P, N = (sql.col(n) for n in ("pos", "neg", "tps", "fps", "pos_all", "neg_all"))
    auc = exp.Mul(this=pos.copy(), expression=sql.paren(exp.Add(this=exp.Sub(this=N.copy(), expression=fps.copy()),
                                                                 expression=exp.Div(this=neg, expression=sql.dbl(2.0)))))
    ap = exp.Div(this=exp.Mul(this=pos.copy(), expression=tps.copy()),
                 expression=sql.paren(exp.Add(this=tps.copy(), expression=fps)))
    positive = exp.GT(this=pos, expression=sql.dbl(0.0))
    return [exp.alias_(exp.Sum(this=sql.col("conf")), "conf", quoted=True),
            exp.alias_(exp.Sum(this=sql.col("hits")), "hits", quoted=True),
            exp.alias_(exp.Sum(this=_when(positive, auc)), "auc_sum", quoted=True),
            exp.alias_(exp.Sum(this=_when(positive.copy(), ap)), "ap_sum", quoted=True),
            exp.alias_(exp.Max(this=P), "pos_all", quoted=True), exp.alias_(exp.Max(this=N), "neg_all", quoted=True)]


def class_figures(K: int, total) -> tuple[list[exp.Expression], list[str]]:
    """Columns of the summary step (``total(cond, value)``: the window sum of ``value`` over
    the folded rows where ``cond``): per class ``auc<i>``, ``ap<i>`` and ``ranked<i>`` (P),
    and ``ece``; with the names the last step reads them by."""
    out: list[exp.Expression] = []
    for i in range(K):
        of_class = exp.and_(exp.EQ(this=sql.col("part", "cells"), expression=_num(SCORE)),
                            exp.EQ(this=sql.col("c", "cells"), expression=_num(i)))
        P = total(of_class, sql.col("pos_all", "cells"))
        N = total(of_class.copy(), sql.col("neg_all", "cells"))
        auc = total(of_class.copy(), sql.col("auc_sum", "cells"))
        ap = total(of_class.copy(), sql.col("ap_sum", "cells"))
        both = exp.and_(exp.GT(this=P.copy(), expression=sql.dbl(0.0)), exp.GT(this=N.copy(), expression=sql.dbl(0.0)))
        out += _per_class(i, both, exp.Div(this=auc, expression=sql.paren(exp.Mul(this=P.copy(), expression=N))), ap, P)
    return _with_ece(out, K, total)


def _per_class(i: int, both: exp.Expression, auc: exp.Expression, ap_sum: exp.Expression,
               P: exp.Expression) -> list[exp.Expression]:
    """``auc<i>`` (where the class has positive and negative rows: ``both``), ``ap<i>``
    (``ap_sum / P`` where it has positives) and ``ranked<i>`` (P)."""
    return [exp.alias_(_when(both, auc), f"auc{i}", quoted=True),
            exp.alias_(_when(exp.GT(this=P.copy(), expression=sql.dbl(0.0)), exp.Div(this=ap_sum, expression=P.copy())),
                       f"ap{i}", quoted=True),
            exp.alias_(P, f"ranked{i}", quoted=True)]


def _with_ece(out: list[exp.Expression], K: int, total) -> tuple[list[exp.Expression], list[str]]:
    """``out`` and the ``ece`` column (the calibration bins' mean |hits − conf|), with the
    names the last step reads them by."""
    in_bin = exp.and_(exp.EQ(this=sql.col("part", "cells"), expression=_num(BIN)), _not_null(sql.col("bin", "cells")))
    gap = exp.Abs(this=exp.Sub(this=sql.col("hits", "cells"), expression=sql.col("conf", "cells")))
    n = total(in_bin.copy(), sql.as_double(sql.col("n", "cells")))
    out.append(exp.alias_(_when(exp.GT(this=n, expression=sql.dbl(0.0)),
                                exp.Div(this=total(in_bin, gap), expression=n.copy())), "ece", quoted=True))
    return out, [f"{f}{i}" for i in range(K) for f in ("auc", "ap", "ranked")] + ["ece"]


def averages(K: int, table: str = "agg") -> list[exp.Expression]:
    """``macro_`` and ``weighted_`` ``roc_auc`` and ``average_precision`` from the per-class
    columns of ``table`` (module docstring: over the classes where the figure is defined)."""
    out = []
    for short, name in (("auc", "roc_auc"), ("ap", "average_precision")):
        vals = [sql.col(f"{short}{i}", table) for i in range(K)]
        weights = [sql.as_double(sql.col(f"ranked{i}", table)) for i in range(K)]
        defined = [_not_null(v.copy()) for v in vals]
        count = sql.add(_when(d, sql.dbl(1.0), sql.dbl(0.0)) for d in defined)
        macro = sql.add(exp.Coalesce(this=v.copy(), expressions=[sql.dbl(0.0)]) for v in vals)
        weight = sql.add(_when(d.copy(), w, sql.dbl(0.0)) for d, w in zip(defined, weights))
        weighted = sql.add(exp.Coalesce(this=exp.Mul(this=v.copy(), expression=w.copy()), expressions=[sql.dbl(0.0)])
                           for v, w in zip(vals, weights))
        out += [exp.alias_(_when(exp.GT(this=count, expression=sql.dbl(0.0)),
                                 exp.Div(this=sql.paren(macro), expression=sql.paren(count.copy()))),
                           f"macro_{name}", quoted=True),
                exp.alias_(_when(exp.GT(this=weight, expression=sql.dbl(0.0)),
                                 exp.Div(this=sql.paren(weighted), expression=sql.paren(weight.copy()))),
                           f"weighted_{name}", quoted=True)]
    return out


def reliability(bins: Sequence[tuple[int, int, float, float]]) -> list[dict]:
    """The reliability table from the bins' ``(bin, n, Σ conf, correct)``: every bin, empty
    ones with ``None`` confidence and accuracy."""
    got = {int(b): (int(n), float(conf), float(hits)) for b, n, conf, hits in bins}
    table = []
    for b in range(BINS):
        n, conf, hits = got.get(b, (0, 0.0, 0.0))
        table.append({"bin": b, "lower": b / BINS, "upper": (b + 1) / BINS, "rows": n,
                      "confidence": conf / n if n else None, "accuracy": hits / n if n else None})
    return table


def reliability_text(table: Sequence[dict], f, count) -> str:
    """The reliability table's non-empty bins as text (``f`` formats a figure, ``count`` a
    number of rows)."""
    from sqlnb.workflows.report import format_table
    rows = [[f"[{b['lower']:.3f}, {b['upper']:.3f}" + ("]" if b["bin"] == BINS - 1 else ")"), count(b["rows"]),
             f(b["confidence"]), f(b["accuracy"])] for b in table if b["rows"]]
    return ("reliability (top-class probability; empty bins left out)\n"
            + format_table(["probability", "rows", "confidence", "accuracy"], rows, align="lrrr"))


# --- The figures of ``evaluate`` on DuckDB: per-row sums from numpy (no group per score) ---
#
# ``evaluate`` on DuckDB does not group the rows by score (a group per class and distinct
# score held ~1.2 GB for 10M rows) nor sort them in SQL (windows over the sorted
# rows cost 2–3x ``score``'s time): its statement streams each ranked row's class and
# scores, and :mod:`sqlnb.workflows.ranksort` counts, per row of class c scored s::
#
#     fge, fle   rows of another class scored ≥ / ≤ s
#     tps        rows of class c scored ≥ s
#     AUC_c      (P·N + Σ_{rows of c} (fle − fge)) / (2·P·N)
#     AP_c       Σ_{rows of c} tps / (tps + fge) / P
#
# A row of class c scored s outranks fewer-scored negatives N − fge and ties with
# fle + fge − N of them, so its Mann–Whitney count is (N − fge) + (fle + fge − N)/2 =
# (N − fge + fle)/2: the module docstring's sum, row by row. Every count is an integer and
# the AUC sum is exact; the rows of a score group add the group's AP term pos times.


def cell_columns() -> list[exp.Expression]:
    """The columns a grouped row of ``GROUPING SETS ((k, y, p), (bin))`` adds: ``part``
    (:data:`CELL` or :data:`BIN`), ``bin``, and the ``conf`` and ``hits`` sums."""
    part = exp.Case(ifs=[exp.If(this=_grouped("k"), true=_num(CELL))], default=_num(BIN))
    return [exp.alias_(part, "part", quoted=True), sql.col("bin"),
            exp.alias_(exp.Sum(this=sql.col("conf")), "conf", quoted=True),
            exp.alias_(exp.Sum(this=sql.col("hit")), "hits", quoted=True)]


def rank_figures(K: int, total) -> tuple[list[exp.Expression], list[str]]:
    """:func:`class_figures` from :func:`cell_columns`' rows (``cells``) and the one row
    ``ranks0`` of the sums ``a<c>`` and ``q<c>`` (:class:`sqlnb.workflows.ranksort.RankSums`,
    the comment above): ``total(cond, value)`` sums ``value`` over the grouped
    rows where ``cond``. P and N are the rows with probabilities (``m``) of the confusion
    cells labelled ``c`` and labelled another class."""
    out: list[exp.Expression] = []
    is_cell = exp.EQ(this=sql.col("part", "cells"), expression=_num(CELL))
    k = sql.col("k", "cells")
    m = sql.as_double(sql.col("m", "cells"))
    for i in range(K):
        P = total(exp.and_(is_cell.copy(), exp.EQ(this=k.copy(), expression=_num(i))), m.copy())
        N = total(exp.and_(is_cell.copy(), exp.NEQ(this=k.copy(), expression=_num(i))), m.copy())
        auc = exp.Coalesce(this=sql.col(f"a{i}", "ranks0"),
                           expressions=[sql.dbl(0.0)])
        ap = exp.Coalesce(this=sql.col(f"q{i}", "ranks0"),
                          expressions=[sql.dbl(0.0)])
        PN = exp.Mul(this=P.copy(), expression=N)
        both = exp.and_(exp.GT(this=P.copy(), expression=sql.dbl(0.0)), exp.GT(this=N.copy(), expression=sql.dbl(0.0)))
        auc = exp.Div(this=sql.paren(exp.Add(this=PN, expression=auc)),
                      expression=sql.paren(exp.Mul(this=sql.dbl(2.0), expression=sql.paren(PN.copy()))))
        out += _per_class(i, both, auc, ap, P)
    return _with_ece(out, K, total)
