"""Fitting conformal prediction sets on held-out labelled rows, and measuring their
coverage: both in SQL (the sets themselves are :mod:`sqlnb.models.conformal`).

Fitting (:func:`conformal`) scores the held-out rows with the model's own SELECT (its
calibrator applied, its sets left out) and computes, in one more query, every row's
non-conformity score and per group (one group; per class for Mondrian) the rows ``n`` and
the ``⌈(n + 1)(1 − α)⌉``-th smallest score (:func:`sqlnb.models.conformal.threshold_query`).
Only those numbers reach Python. Rows with a NULL label are skipped, and so are rows
without probabilities (an incomplete row of LDA, QDA or logistic regression; a row of
probability zero under every class): they have no score. A label that is not a class of
the model is refused, naming it.

Coverage (:func:`coverage`) is one GROUP BY (label, set size) over the scoring SELECT:
per class the labelled rows, those whose set holds their label and the sum of set sizes,
aggregated in Python into overall, per-class and per-set-size figures.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.errors import ScreeningWarning, SqlnbError
from sqlnb.models import conformal as cp
from sqlnb.models.finish import class_columns, label_text
from sqlnb.source import read_with, resolve
from sqlnb.engines.duckdb import new_connection


def class_index(y: exp.Expression, classes, label_type) -> exp.Expression:
    """``CASE WHEN y = c0 THEN 0 WHEN y = c1 THEN 1 ... END`` (NULL for NULL or no class)."""
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=y.copy(), expression=sql.value(c, label_type)),
                                true=exp.Literal.number(k)) for k, c in enumerate(classes)])


def score_select(scored: exp.Expression, label: str, classes, label_type, method: str,
                 randomized: bool = False, seed: int = 0, keep: tuple[str, ...] = ()) -> exp.Select:
    """``SELECT g, score FROM scored`` (``scored``: a FROM item aliased ``s`` with ``label``
    and ``proba_<class>``): the class index of every usable held-out row (``g``) and its
    non-conformity score, after the ``keep`` columns of ``scored``."""
    probas = [sql.col(n, "s") for n in class_columns("proba_", classes)]
    y = sql.col(label, "s")
    p_y = exp.Case(ifs=[exp.If(this=exp.EQ(this=y.copy(), expression=sql.value(c, label_type)), true=p.copy())
                        for c, p in zip(classes, probas)])
    u = cp.uniform(probas, seed) if randomized else None
    usable = exp.and_(exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null())),
                      exp.Not(this=exp.Is(this=p_y.copy(), expression=exp.Null())))
    return (exp.select(*[sql.col(k, "s") for k in keep], exp.alias_(class_index(y, classes, label_type), "g", quoted=True),
                       exp.alias_(cp.score(method, probas, p_y, u), "score", quoted=True))
            .from_(scored).where(usable))


def conformal(model, data: Any, alpha: float = 0.1, method: str = "lac", *, randomized: bool = False,
              seed: int = 0, label: str | None = None, con: duckdb.DuckDBPyConnection | None = None,
              missing_class: str | None = None):
    """Fit conformal prediction sets of ``model`` on the held-out labelled rows of ``data``;
    return a copy of the model that adds them whenever it scores.

    Parameters
    ----------
    model : Model
        Any model kind; sets it already has are replaced.
    data : path, table, query, relation or Source
        Labelled rows not used for fitting the model (nor its calibrator).
    alpha : float
        Miscoverage in (0, 1): the sets hold the class for at least ``1 − alpha`` of rows.
    method : {"lac", "aps", "mondrian"}
        See :mod:`sqlnb.models.conformal`.
    randomized : bool
        Randomised APS (``method="aps"`` only), with ``seed``.
    label : str, optional
        The label column of ``data`` (default: the model's).
    con : duckdb connection, optional
        Where the queries run (a new in-memory DuckDB by default).
    missing_class : {"pooled", "every", "exclude", "error"}, optional
        ``method="mondrian"`` only: a class with too few held-out rows for a threshold of
        its own (fewer than ``1/alpha − 1``; none, most often) takes the threshold of all
        the held-out rows (``pooled``, the default: :data:`~sqlnb.models.conformal.
        MISSING_CLASS_DEFAULT` says why), is in every set (``every``), in none
        (``exclude``), or the fit is refused in one line (``error``). Stored with the
        sets, whose thresholds carry it into scoring and exported SQL.
    """
    cp.check_method(method, alpha, randomized, missing_class)
    con = con if con is not None else new_connection()
    label = label if label is not None else model.label
    source = resolve(read_with(data, model.read_types()), con)
    source.require([label], "label column")
    bare = cp.with_sets(model, None)
    scored = exp.Subquery(this=bare.scoring_query(source, ("proba",), keep=[label]),
                          alias=exp.TableAlias(this=sql.ident("s")))
    y = sql.col(label, "s")
    unknown = (exp.select(exp.Cast(this=y.copy(), to=exp.DataType.build("VARCHAR"))).from_(scored.copy())
               .where(exp.and_(exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null())),
                               exp.Is(this=class_index(y, model.classes, model.label_type), expression=exp.Null())))
               .limit(1))
    bad = con.execute(sql.render(unknown)).fetchall()
    if bad:
        raise SqlnbError(f"label {bad[0][0]!r} in column {label!r} of {source.description} is not a class of the "
                         f"model ({', '.join(map(label_text, model.classes))}); fit the sets on rows of its classes")
    scores = exp.Subquery(this=score_select(scored, label, model.classes, model.label_type, method, randomized, seed),
                          alias=exp.TableAlias(this=sql.ident("scores")))
    keys = ["g"] if method == "mondrian" else []
    got = con.execute(sql.render(cp.threshold_query(scores, alpha, keys))).fetchall()
    K = len(model.classes)
    if method == "mondrian":
        by = {int(g): (int(n), q) for g, n, q in got}
        groups = [by.get(k, (0, None)) for k in range(K)]
    else:
        groups = [(int(got[0][0] or 0), got[0][1])] if got else [(0, None)]
    if sum(n for n, _ in groups) == 0:
        raise SqlnbError(f"{source.description} has no row with a label and probabilities to fit conformal sets on; "
                         "give held-out labelled rows")
    missing = (missing_class or cp.MISSING_CLASS_DEFAULT) if method == "mondrian" else None
    thresholds = tuple(math.inf if q is None else float(q) for _, q in groups)
    need = math.ceil(1 / alpha) - 1
    if method != "mondrian":
        if thresholds[0] == math.inf:
            warnings.warn(f"there are {groups[0][0]:,} held-out rows, fewer than the {need:,} that alpha = {alpha:g} "
                          "needs (rank ceil((n + 1)(1 - alpha)) > n): its threshold is infinite and every set holds "
                          "every class", ScreeningWarning, stacklevel=2)
    else:
        thresholds = _few_rows(thresholds, groups, model.classes, missing, alpha, need, source.description,
                               lambda: con.execute(sql.render(cp.threshold_query(scores, alpha, []))).fetchall())
    sets = cp.ConformalSets(method, float(alpha), thresholds, tuple(n for n, _ in groups), bool(randomized),
                            int(seed), source.description, missing)
    return cp.with_sets(model, sets)


def _few_rows(thresholds: tuple, groups: list, classes, missing: str, alpha: float, need: int, where: str,
              pooled_rows) -> tuple:
    """Mondrian thresholds with ``missing`` applied to the classes of too few held-out rows
    (an infinite threshold of their own): each named in a note, or all in the one error
    line. ``pooled_rows()`` runs the threshold query over every held-out row (only for
    ``pooled``: one more read of them)."""
    short = [k for k, t in enumerate(thresholds) if t == math.inf]
    if not short:
        return thresholds
    rank = f"that alpha = {alpha:g} needs (rank ceil((n + 1)(1 - alpha)) > n)"
    if missing == "error":
        named = ", ".join(f"{label_text(classes[k])!r} ({groups[k][0]:,})" for k in short)
        raise SqlnbError(f"{'classes' if len(short) > 1 else 'class'} {named} of {where} {'have' if len(short) > 1 else 'has'}"
                         f" fewer held-out rows than the {need:,} {rank} for a threshold of "
                         f"{'their' if len(short) > 1 else 'its'} own; give held-out rows of every class, or choose "
                         "what such a class gets with --missing-class pooled, every or exclude (missing_class= in Python)")
    if missing == "pooled":
        got = pooled_rows()
        q = got[0][1] if got else None
        value = math.inf if q is None else float(q)
        what = ("the threshold of all held-out rows, infinite too: every set holds that class" if q is None else
                f"the threshold of all held-out rows ({value:.6g}, lac's)")
    elif missing == "every":
        value, what = math.inf, "its threshold is infinite and every set holds that class"
    else:
        value, what = -math.inf, "it has no threshold and no set holds that class"
    others = ", ".join(c for c in cp.MISSING_CLASS if c != missing)
    for k in short:
        warnings.warn(f"class {label_text(classes[k])!r} has {groups[k][0]:,} held-out rows, fewer than the {need:,} "
                      f"{rank}: {'it takes ' if missing == 'pooled' else ''}{what} (--missing-class {missing}; or "
                      f"{others})", ScreeningWarning, stacklevel=3)
    return tuple(value if k in short else t for k, t in enumerate(thresholds))


def covered(label: str, classes, label_type, form: str = "flags") -> exp.Expression:
    """Whether a scored row's set, written as ``form`` (``list`` or ``flags``), holds its
    label (NULL when it has no set or no label)."""
    y = sql.col(label)
    if form == "list":
        return exp.ArrayContains(this=sql.col(cp.SET_COLUMN), expression=y)
    ins = class_columns(cp.IN_PREFIX, classes)
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=y.copy(), expression=sql.value(c, label_type)), true=sql.col(n))
                         for c, n in zip(classes, ins)], default=exp.false())


def coverage(model, data: Any, con: Any = None, label: str | None = None) -> dict:
    """Coverage and set size of ``model``'s sets on labelled ``data``, where the data is.

    Returns a dict: ``rows`` (labelled rows with a set), ``coverage`` (the share whose set
    holds the label), ``mean_set_size``, ``no_set_rows`` (labelled rows without
    probabilities), ``per_class`` (label -> rows, coverage, mean set size) and
    ``by_set_size`` (size -> rows, coverage).
    """
    if getattr(model, "conformal", None) is None:
        raise SqlnbError("the model has no conformal sets; fit them with sqlnb conformal")
    engine = as_engine(con if con is not None else new_connection())
    label = label or model.label
    source = engine.resolve(read_with(data, model.read_types()))
    source.require([label], "label column")
    # The flags on every engine: the same sets, without building a list per row.
    scored = model.scoring_query(source, outputs=("prediction",), keep=[label], dialect=engine.dialect,
                                 set_format="flags")
    hit = covered(label, model.classes, model.label_type, "flags")
    size = sql.col(cp.SIZE_COLUMN)
    one, zero = exp.Literal.number(1), exp.Literal.number(0)
    q = (exp.select(sql.col(label), size.copy(), exp.Count(this=exp.Star()),
                    exp.Sum(this=exp.Case(ifs=[exp.If(this=hit, true=one)], default=zero)))
         .from_(exp.Subquery(this=scored, alias=exp.TableAlias(this=sql.ident("s"))))
         .where(exp.Not(this=exp.Is(this=sql.col(label), expression=exp.Null())))
         .group_by(sql.col(label), size.copy()))
    groups = engine.execute(q)
    with_set = [(y, int(k), int(n), int(h)) for y, k, n, h in groups if k is not None]
    no_set = sum(int(n) for _, k, n, _ in groups if k is None)

    def figures(rows):
        n = sum(r[2] for r in rows)
        return {"rows": n, "coverage": sum(r[3] for r in rows) / n if n else None,
                "mean_set_size": sum(r[1] * r[2] for r in rows) / n if n else None}

    out = figures(with_set) | {"alpha": model.conformal.alpha, "method": model.conformal.method,
                               "no_set_rows": no_set}
    labels = sorted({r[0] for r in with_set}, key=lambda v: (v not in model.classes, label_text(v)))
    out["per_class"] = {label_text(y): figures([r for r in with_set if r[0] == y]) for y in labels}
    out["by_set_size"] = {str(k): {key: v for key, v in figures([r for r in with_set if r[1] == k]).items()
                                   if key != "mean_set_size"} for k in sorted({r[1] for r in with_set})}
    return out


def coverage_lines(cov: dict, digits: int = 4) -> list[str]:
    """``evaluate``'s text lines for :func:`coverage`'s figures."""
    def f(x):
        return "n/a" if x is None else f"{x:.{digits}f}"
    lines = [f"conformal   {cov['method']} sets at alpha = {cov['alpha']:g}: coverage {f(cov['coverage'])} "
             f"(target >= {1 - cov['alpha']:g}), mean set size {f(cov['mean_set_size'])} on {cov['rows']:,} rows"
             + (f" ({cov['no_set_rows']:,} without probabilities, no set)" if cov["no_set_rows"] else "")]
    width = max([len(k) for k in cov["per_class"]] + [5])
    lines.append(f"  {'class':<{width}}  {'rows':>8}  {'coverage':>8}  {'mean size':>9}")
    for k, v in cov["per_class"].items():
        lines.append(f"  {k:<{width}}  {v['rows']:>8,}  {f(v['coverage']):>8}  {f(v['mean_set_size']):>9}")
    lines.append("  by set size: " + ", ".join(f"{k}: {v['rows']:,} rows, coverage {f(v['coverage'])}"
                                             for k, v in cov["by_set_size"].items()))
    return lines
