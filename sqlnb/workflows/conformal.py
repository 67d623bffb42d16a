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

RAPS's λ and k_reg, when not given, are chosen as the paper (its appendix on choosing
them) and MAPIE do, on a fifth of the held-out rows kept for tuning: per class, its usable
rows ordered by ``u`` (the hash of :func:`sqlnb.models.conformal.uniform` with ``seed``, then
the probabilities) and the first ``⌊n_c/5 + 1/2⌋`` of them (a stratified split, the same on
every run: rows that tie on every key are alike in every figure). On the ``n_t`` tuning
rows, k_reg is the ``⌈(n_t + 1)(1 − α)⌉``-th smallest rank ``o_y`` of the true class (1 for
the most probable); then for each λ of :data:`~sqlnb.models.conformal.RAPS_LAMBDAS` the
threshold of the tuning rows' scores and the sets of the tuning rows under it: λ is the one
of the smallest total set size, the smaller λ on a tie. The threshold is then fitted on the
other rows alone (the tuning rows would bias it). Given both (``lam``, ``k_reg``), every
held-out row fits the threshold; given one, the other is chosen as above.

Mondrian sets by a column (``by``) fit LAC's threshold per value of the column, and the
threshold of all the usable held-out rows (pooled) for every other value: a value with too
few rows (said in a note, naming them), NULL, and a value not among the held-out rows.

Coverage (:func:`coverage`) is one GROUP BY (label, set size[, a column]) over the
scoring SELECT: per class the labelled rows, those whose set holds their label and the sum
of set sizes, aggregated in Python into overall, per-class, per-set-size and (``by``)
per-value figures.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines import as_engine
from sqlnb.errors import ScreeningWarning, SqlnbError, warn
from sqlnb.models import conformal as cp
from sqlnb.models.finish import class_columns, label_text
from sqlnb.source import read_with, resolve
from sqlnb.engines.duckdb import new_connection


def class_index(y: exp.Expression, classes, label_type) -> exp.Expression:
    """``CASE WHEN y = c0 THEN 0 WHEN y = c1 THEN 1 ... END`` (NULL for NULL or no class)."""
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=y.copy(), expression=sql.value(c, label_type)),
                                true=exp.Literal.number(k)) for k, c in enumerate(classes)])


def true_proba(label: str, classes, label_type) -> exp.Expression:
    """``p_y``: the probability of the row's label (``s.proba_<label>``; NULL for none)."""
    y = sql.col(label, "s")
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=y.copy(), expression=sql.value(c, label_type)), true=sql.col(n, "s"))
                         for c, n in zip(classes, class_columns("proba_", classes))])


def usable_row(label: str, classes, label_type) -> exp.Expression:
    """A held-out row with a label and probabilities (one that has a score)."""
    return exp.and_(exp.Not(this=exp.Is(this=sql.col(label, "s"), expression=exp.Null())),
                    exp.Not(this=exp.Is(this=true_proba(label, classes, label_type), expression=exp.Null())))


def score_select(scored: exp.Expression, label: str, classes, label_type, method: str,
                 randomized: bool = False, seed: int = 0, keep: tuple[str, ...] = (),
                 lam: float | exp.Expression | None = None, k_reg: int | None = None) -> exp.Select:
    """``SELECT g, score FROM scored`` (``scored``: a FROM item aliased ``s`` with ``label``
    and ``proba_<class>``): the class index of every usable held-out row (``g``) and its
    non-conformity score (RAPS's with ``lam``, a number or a column, and ``k_reg``),
    after the ``keep`` columns of ``scored``."""
    probas = [sql.col(n, "s") for n in class_columns("proba_", classes)]
    p_y = true_proba(label, classes, label_type)
    u = cp.uniform(probas, seed) if randomized else None
    lam = sql.dbl(lam) if isinstance(lam, (int, float)) else lam
    return (exp.select(*[sql.col(k, "s") for k in keep],
                       exp.alias_(class_index(sql.col(label, "s"), classes, label_type), "g", quoted=True),
                       exp.alias_(cp.score(method, probas, p_y, u, lam, k_reg), "score", quoted=True))
            .from_(scored).where(usable_row(label, classes, label_type)))


def _aliased(select: exp.Expression, alias: str) -> exp.Subquery:
    return exp.Subquery(this=select, alias=exp.TableAlias(this=sql.ident(alias)))


#: RAPS's tuning rows: this share of each class's held-out rows (MAPIE's ``size_raps``).
TUNING_SHARE = 0.2
#: The tuning flag of :func:`raps_split`'s rows.
TUNE_COLUMN = "raps_tune"


def raps_split(scored: exp.Expression, label: str, classes, label_type, seed: int) -> exp.Subquery:
    """The usable rows of ``scored`` (aliased ``s``) with ``raps_tune``: whether the row is
    one of the tuning rows (module docstring), again aliased ``s``."""
    probas = [sql.col(n, "s") for n in class_columns("proba_", classes)]
    g = class_index(sql.col(label, "s"), classes, label_type)
    order = exp.Order(expressions=[exp.Ordered(this=cp.uniform(probas, seed))] +
                      [exp.Ordered(this=p.copy()) for p in probas])
    r = exp.Window(this=exp.RowNumber(), partition_by=[g.copy()], order=order)
    n = exp.Window(this=exp.Count(this=exp.Star()), partition_by=[g.copy()])
    take = exp.Floor(this=exp.Add(this=exp.Mul(this=exp.Cast(this=n, to=exp.DataType.build("DOUBLE")),
                                               expression=sql.dbl(TUNING_SHARE)), expression=sql.dbl(0.5)))
    rows = (exp.select(sql.col(label, "s"), *probas, exp.alias_(exp.LTE(this=r, expression=take), TUNE_COLUMN,
                                                                quoted=True))
            .from_(scored).where(usable_row(label, classes, label_type)))
    return _aliased(rows, "s")


def tune_raps(con, split: exp.Subquery, label: str, classes, label_type, alpha: float, lam: float | None,
              k_reg: int | None, where: str) -> tuple[float, int, int]:
    """RAPS's ``(λ, k_reg, tuning rows)`` chosen on the tuning rows of ``split``
    (:func:`raps_split`; module docstring); a given ``lam`` or ``k_reg`` is kept."""
    tune = exp.EQ(this=sql.col(TUNE_COLUMN, "s"), expression=exp.true())
    probas = [sql.col(n, "s") for n in class_columns("proba_", classes)]
    p_y = true_proba(label, classes, label_type)
    if k_reg is None:
        rank = exp.Add(this=cp.count_above(probas, p_y), expression=sql.dbl(1.0))
        ranks = exp.select(exp.alias_(rank, "score", quoted=True)).from_(split.copy()).where(tune.copy())
        ((n_t, q),) = con.execute(sql.render(cp.threshold_query(_aliased(ranks, "ranks"), alpha, []))).fetchall()
        if q is None:
            need = math.ceil(1 / alpha) - 1
            raise SqlnbError(f"{where} has {n_t or 0:,} tuning rows (a fifth of the usable held-out rows) to choose RAPS's "
                             f"k_reg and lambda on, fewer than the {need:,} that alpha = {alpha:g} needs; give more "
                             "held-out rows, or give --k-reg and --lambda")
        k_reg = int(q)
    if lam is not None:
        n_t = con.execute(sql.render(exp.select(exp.Count(this=exp.Star())).from_(split.copy()).where(tune.copy())
                                     )).fetchall()[0][0]
        return float(lam), k_reg, int(n_t)
    grid = exp.values([(sql.dbl(v),) for v in cp.RAPS_LAMBDAS], alias="grid", columns=["lam"])
    scores = (exp.select(sql.col("lam", "grid"), exp.alias_(cp.score("raps", probas, p_y, None, sql.col("lam", "grid"),
                                                                     k_reg), "score", quoted=True))
              .from_(split.copy()).join(grid, join_type="cross").where(tune.copy()))
    q = _aliased(cp.threshold_query(_aliased(scores, "scores"), alpha, ["lam"]), "q")
    size = sql.add([exp.Case(ifs=[exp.If(this=cp.member("raps", probas, c, sql.col("q", "q"), None, sql.col("lam", "q"),
                                                        k_reg), true=exp.Literal.number(1))],
                             default=exp.Literal.number(0)) for c in range(len(classes))])
    sizes = (exp.select(sql.col("lam", "q"), exp.Max(this=sql.col("n", "q")), exp.Sum(this=size))
             .from_(split.copy()).join(q, join_type="cross").where(tune.copy()).group_by(sql.col("lam", "q")))
    got = sorted(con.execute(sql.render(sizes)).fetchall(), key=lambda r: (int(r[2]), r[0]))
    return float(got[0][0]), k_reg, int(got[0][1])


def conformal(model, data: Any, alpha: float = 0.1, method: str = "lac", *, randomized: bool = False,
              seed: int = 0, label: str | None = None, con: duckdb.DuckDBPyConnection | None = None,
              missing_class: str | None = None, lam: float | None = None, k_reg: int | None = None,
              by: str | None = None):
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
    method : {"lac", "aps", "raps", "mondrian"}
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
    lam, k_reg : float and int, optional
        ``method="raps"`` only: its size penalty λ ≥ 0 and the number of classes free of
        it; each chosen on a fifth of the rows when not given (module docstring).
    by : str, optional
        ``method="mondrian"`` only: a threshold per value of this column of ``data`` (a
        text, integer or boolean column) instead of per class; the rows scored need it.
    """
    cp.check_method(method, alpha, randomized, missing_class, lam, k_reg, by)
    con = con if con is not None else new_connection()
    label = label if label is not None else model.label
    source = resolve(read_with(data, model.read_types()), con)
    source.require([label], "label column")
    if by is not None:
        source.require([by], "column (--by)")
        if cp.group_kind(source.columns[by]) is None:
            raise SqlnbError(f"column {by!r} of {source.description} is {source.columns[by]}; --by groups the rows by a "
                             "text, integer or boolean column (values that compare exactly on every engine)")
    bare = cp.with_sets(model, None)
    keep = [label] + ([by] if by is not None and by != label else [])
    # The held-out rows scored once into a temporary table that every query below reads
    # (RAPS's choice of k_reg and lambda reads them three times more): on digits (64
    # Gaussian columns, 10 classes) each scoring of 600 rows took seconds to plan.
    held = f"sqlnb_held_out_{uuid.uuid4().hex}"
    con.execute(sql.render(exp.Create(this=sql.table(held), kind="TABLE", expression=bare.scoring_query(
        source, ("proba",), keep=keep), properties=exp.Properties(expressions=[exp.TemporaryProperty()]))))
    try:
        return cp.with_sets(model, _fit_held_out(con, _aliased(exp.select(exp.Star()).from_(sql.table(held)), "s"),
                                                 model, label, alpha, method, randomized, seed, missing_class, lam,
                                                 k_reg, by, source))
    finally:
        con.execute(sql.render(exp.Drop(tables=[sql.table(held)], kind="TABLE", exists=True)))


def _fit_held_out(con, scored: exp.Subquery, model, label: str, alpha: float, method: str, randomized: bool,
                  seed: int, missing_class: str | None, lam: float | None, k_reg: int | None, by: str | None,
                  source) -> "cp.ConformalSets":
    """:func:`conformal`'s sets from its held-out rows scored (``scored``, aliased ``s``):
    a label that is not a class is refused, naming it."""
    y = sql.col(label, "s")
    unknown = (exp.select(exp.Cast(this=y.copy(), to=exp.DataType.build("VARCHAR"))).from_(scored.copy())
               .where(exp.and_(exp.Not(this=exp.Is(this=y.copy(), expression=exp.Null())),
                               exp.Is(this=class_index(y, model.classes, model.label_type), expression=exp.Null())))
               .limit(1))
    bad = con.execute(sql.render(unknown)).fetchall()
    if bad:
        raise SqlnbError(f"label {bad[0][0]!r} in column {label!r} of {source.description} is not a class of the "
                         f"model ({', '.join(map(label_text, model.classes))}); fit the sets on rows of its classes")
    return fit_scored(con, scored, model.classes, model.label_type, label, alpha, method, randomized=randomized,
                      seed=seed, missing_class=missing_class, lam=lam, k_reg=k_reg, by=by,
                      by_type=source.columns.get(by), where=source.description)


def fit_scored(con, scored: exp.Subquery, classes, label_type, label: str, alpha: float, method: str, *,
               randomized: bool = False, seed: int = 0, missing_class: str | None = None, lam: float | None = None,
               k_reg: int | None = None, by: str | None = None, by_type: str | None = None,
               where: str = "the held-out rows") -> "cp.ConformalSets":
    """The sets :func:`conformal` fits, from held-out rows already scored: ``scored``, a
    FROM item aliased ``s`` with ``label``, ``proba_<class>`` (and ``by``) whose labels
    are classes; ``where`` names the rows in notes and errors."""
    if by is not None:
        return _group_sets(con, scored, classes, label_type, label, alpha, by, by_type, where)
    tuned = None
    if method == "raps":
        if lam is None or k_reg is None:
            chose = (lam is None, k_reg is None)
            split = raps_split(scored, label, classes, label_type, seed)
            lam, k_reg, tuned = tune_raps(con, split, label, classes, label_type, alpha, lam, k_reg, where)
            scored = _aliased(exp.select(exp.Star()).from_(split).where(
                exp.Not(this=sql.col(TUNE_COLUMN, "s"))), "s")
    scores = exp.Subquery(this=score_select(scored, label, classes, label_type, method, randomized, seed,
                                            lam=lam, k_reg=k_reg),
                          alias=exp.TableAlias(this=sql.ident("scores")))
    keys = ["g"] if method == "mondrian" else []
    got = con.execute(sql.render(cp.threshold_query(scores, alpha, keys))).fetchall()
    K = len(classes)
    if method == "mondrian":
        by = {int(g): (int(n), q) for g, n, q in got}
        groups = [by.get(k, (0, None)) for k in range(K)]
    else:
        groups = [(int(got[0][0] or 0), got[0][1])] if got else [(0, None)]
    if sum(n for n, _ in groups) == 0:
        raise SqlnbError(f"{where} has no row with a label and probabilities to fit conformal sets on; "
                         "give held-out labelled rows")
    missing = (missing_class or cp.MISSING_CLASS_DEFAULT) if method == "mondrian" else None
    thresholds = tuple(math.inf if q is None else float(q) for _, q in groups)
    need = math.ceil(1 / alpha) - 1
    if method != "mondrian":
        if thresholds[0] == math.inf:
            warn(f"there are {groups[0][0]:,} held-out rows, fewer than the {need:,} that alpha = {alpha:g} "
                          "needs (rank ceil((n + 1)(1 - alpha)) > n): its threshold is infinite and every set holds "
                          "every class", ScreeningWarning)
    else:
        thresholds = _few_rows(thresholds, groups, classes, missing, alpha, need, where,
                               lambda: con.execute(sql.render(cp.threshold_query(scores, alpha, []))).fetchall())
    if tuned is not None:
        chosen = (f"k_reg = {k_reg} and lambda = {lam:g} are" if chose == (True, True) else
                  f"k_reg = {k_reg} is" if chose[1] else f"lambda = {lam:g} is")
        given = "" if chose == (True, True) else f" ({'lambda' if chose[1] else 'k_reg'} = " \
            f"{f'{lam:g}' if chose[1] else k_reg} given)"
        warn(f"RAPS's {chosen} chosen on {tuned:,} tuning rows (a fifth of each class's held-out rows, seed "
                      f"{seed}){given}, the threshold on the other {groups[0][0]:,}; give --lambda and --k-reg to fit "
                      "it on all of them", ScreeningWarning)
    raps = method == "raps"
    return cp.ConformalSets(method, float(alpha), thresholds, tuple(n for n, _ in groups), bool(randomized),
                            int(seed), where, missing, float(lam) if raps else None, int(k_reg) if raps else None)


def _group_sets(con, scored: exp.Subquery, classes, label_type, label: str, alpha: float, by: str, by_type: str,
                where: str) -> "cp.ConformalSets":
    """Mondrian sets by column ``by`` (module docstring): LAC's threshold per value, and
    of all the usable rows for every other value; a note names the values of too few rows."""
    scores = _aliased(score_select(scored, label, classes, label_type, "lac", keep=(by,)), "scores")
    ((n_all, q_all),) = con.execute(sql.render(cp.threshold_query(scores, alpha, []))).fetchall()
    if not n_all:
        raise SqlnbError(f"{where} has no row with a label and probabilities to fit conformal sets on; "
                         "give held-out labelled rows")
    pooled = math.inf if q_all is None else float(q_all)
    need = math.ceil(1 / alpha) - 1
    rank = f"that alpha = {alpha:g} needs (rank ceil((n + 1)(1 - alpha)) > n)"
    if q_all is None:
        warn(f"there are {n_all:,} held-out rows, fewer than the {need:,} {rank}: the threshold of all of them "
                      "is infinite and every set holds every class", ScreeningWarning)
    kind = cp.group_kind(by_type)
    got = sorted(((int(v) if kind == "integer" else v, int(n), q) for v, n, q in
                  con.execute(sql.render(cp.threshold_query(scores, alpha, [by]))).fetchall() if v is not None),
                 key=lambda r: r[0])
    small = [(v, n) for v, n, q in got if q is None]
    if small:
        named = ", ".join(f"{cp.group_text(v)!r} ({n:,})" for v, n in small[:10])
        more = f" and {len(small) - 10:,} more" if len(small) > 10 else ""
        warn(f"{len(small):,} {'values' if len(small) > 1 else 'value'} of column {by!r} "
                      f"({named}{more}) {'have' if len(small) > 1 else 'has'} fewer held-out rows than the {need:,} {rank}: "
                      f"{'they take' if len(small) > 1 else 'it takes'} the threshold of all held-out rows "
                      f"({'inf' if q_all is None else f'{pooled:.6g}'}), as do NULL and any value not among them",
                      ScreeningWarning)
    return cp.ConformalSets("mondrian", float(alpha), tuple(pooled if q is None else float(q) for _, _, q in got) +
                            (pooled,), tuple(n for _, n, _ in got) + (int(n_all),), source=where,
                            by=by, by_type=by_type, groups=tuple(v for v, _, _ in got))


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
        warn(f"class {label_text(classes[k])!r} has {groups[k][0]:,} held-out rows, fewer than the {need:,} "
                      f"{rank}: {'it takes ' if missing == 'pooled' else ''}{what} (--missing-class {missing}; or "
                      f"{others})", ScreeningWarning)
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


def coverage(model, data: Any, con: Any = None, label: str | None = None, by: str | None = None) -> dict:
    """Coverage and set size of ``model``'s sets on labelled ``data``, where the data is.

    Returns a dict: ``rows`` (labelled rows with a set), ``coverage`` (the share whose set
    holds the label), ``mean_set_size``, ``no_set_rows`` (labelled rows without
    probabilities), ``per_class`` (label -> rows, coverage, mean set size) and
    ``by_set_size`` (size -> rows, coverage); with ``by`` (a column of ``data``) also
    ``by`` (``column``, and ``groups``: value -> rows, coverage, mean set size, in the
    values' order, NULL last as ``"NULL"``).
    """
    if getattr(model, "conformal", None) is None:
        raise SqlnbError("the model has no conformal sets; fit them with sqlnb conformal"
                         + ("" if by is None else " (--by reports their coverage per value of a column)"))
    engine = as_engine(con if con is not None else new_connection())
    label = label or model.label
    source = engine.resolve(read_with(data, model.read_types()))
    source.require([label], "label column")
    if by is not None:
        source.require([by], "column (--by)")
    keys = [label] + ([by] if by is not None and by != label else [])
    # The flags on every engine: the same sets, without building a list per row.
    scored = model.scoring_query(source, outputs=("prediction",), keep=keys, dialect=engine.dialect,
                                 set_format="flags")
    hit = covered(label, model.classes, model.label_type, "flags")
    size = sql.col(cp.SIZE_COLUMN)
    one, zero = exp.Literal.number(1), exp.Literal.number(0)
    group = [sql.col(by)] if by is not None else []
    q = (exp.select(sql.col(label), size.copy(), exp.Count(this=exp.Star()),
                    exp.Sum(this=exp.Case(ifs=[exp.If(this=hit, true=one)], default=zero)), *group)
         .from_(exp.Subquery(this=scored, alias=exp.TableAlias(this=sql.ident("s"))))
         .where(exp.Not(this=exp.Is(this=sql.col(label), expression=exp.Null())))
         .group_by(sql.col(label), size.copy(), *[g.copy() for g in group]))
    groups = [tuple(r) + ((None,) if by is None else ()) for r in engine.execute(q)]
    with_set = [(y, int(k), int(n), int(h), v) for y, k, n, h, v in groups if k is not None]
    no_set = sum(int(n) for _, k, n, _, _ in groups if k is None)

    def figures(rows):
        n = sum(r[2] for r in rows)
        return {"rows": n, "coverage": sum(r[3] for r in rows) / n if n else None,
                "mean_set_size": sum(r[1] * r[2] for r in rows) / n if n else None}

    out = figures(with_set) | {"alpha": model.conformal.alpha, "method": model.conformal.method,
                               "no_set_rows": no_set}
    if model.conformal.by is not None:
        out["sets_by"] = model.conformal.by
    labels = sorted({r[0] for r in with_set}, key=lambda v: (v not in model.classes, label_text(v)))
    out["per_class"] = {label_text(y): figures([r for r in with_set if r[0] == y]) for y in labels}
    out["by_set_size"] = {str(k): {key: v for key, v in figures([r for r in with_set if r[1] == k]).items()
                                   if key != "mean_set_size"} for k in sorted({r[1] for r in with_set})}
    if by is not None:
        values = sorted({r[4] for r in with_set}, key=lambda v: (v is None, v if v is not None else 0))
        out["by"] = {"column": by, "groups": {"NULL" if v is None else cp.group_text(v):
                                              figures([r for r in with_set if r[4] == v]) for v in values}}
    return out


def coverage_lines(cov: dict, digits: int = 4) -> list[str]:
    """``evaluate``'s text lines for :func:`coverage`'s figures."""
    def f(x):
        return "n/a" if x is None else f"{x:.{digits}f}"
    what = cov["method"] + (f" sets by {cov['sets_by']}" if "sets_by" in cov else " sets")
    lines = [f"conformal   {what} at alpha = {cov['alpha']:g}: coverage {f(cov['coverage'])} "
             f"(target >= {1 - cov['alpha']:g}), mean set size {f(cov['mean_set_size'])} on {cov['rows']:,} rows"
             + (f" ({cov['no_set_rows']:,} without probabilities, no set)" if cov["no_set_rows"] else "")]
    width = max([len(k) for k in cov["per_class"]] + [5])
    lines.append(f"  {'class':<{width}}  {'rows':>8}  {'coverage':>8}  {'mean size':>9}")
    for k, v in cov["per_class"].items():
        lines.append(f"  {k:<{width}}  {v['rows']:>8,}  {f(v['coverage']):>8}  {f(v['mean_set_size']):>9}")
    lines.append("  by set size: " + ", ".join(f"{k}: {v['rows']:,} rows, coverage {f(v['coverage'])}"
                                             for k, v in cov["by_set_size"].items()))
    if "by" in cov:
        per = cov["by"]["groups"]
        width = max([len(k) for k in per] + [len(cov["by"]["column"])])
        lines.append(f"  {cov['by']['column']:<{width}}  {'rows':>8}  {'coverage':>8}  {'mean size':>9}")
        for k, v in per.items():
            lines.append(f"  {k:<{width}}  {v['rows']:>8,}  {f(v['coverage']):>8}  {f(v['mean_set_size']):>9}")
    return lines
