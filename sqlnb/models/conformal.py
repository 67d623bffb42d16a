"""Conformal prediction sets: split conformal classification fitted on held-out labelled
rows, stored with the model as tables and computed in the scoring SELECT.

A set ``C(x)`` holds the true class for at least ``1 − α`` of the rows drawn like the
held-out ones (the split conformal guarantee: exchangeable rows, any model). From the
held-out rows' non-conformity scores ``E_i`` (``n`` of them), the threshold is their
``k``-th smallest, ``k = ⌈(n + 1)(1 − α)⌉``; when ``k > n`` (fewer than ``1/α − 1`` rows)
there is no such score and the threshold is ``q̂ = +∞``: every class is in every set. With
``p_c = p(c|x)`` the model's probabilities (after its calibrator, if it has one)::

    lac        E = 1 − p_y                          C(x) = {c : 1 − p_c ≤ q̂}
    aps        E = m_y + p_y                        C(x) = {c : m_c < q̂}
               m_c = Σ_{j : p_j > p_c} p_j          (the mass of the classes more probable
                                                    than c: ties are not ordered)
    aps, randomized
               E = m_y + u·p_y                      C(x) = {c : m_c + u·p_c ≤ q̂}
    raps       E = m_y + p_y + λ·(o_y − k_reg)⁺     C(x) = {c : m_c + λ·(o_c − 1 − k_reg)⁺ < q̂}
               o_c = 1 + #{j : p_j > p_c}           (the rank of c, ties sharing the best)
    mondrian   lac with one threshold per class, q̂_c from the held-out rows of class c
               (its own n_c and k_c), C(x) = {c : 1 − p_c ≤ q̂_c}; a class with too few
               rows for one (k_c > n_c) takes ``missing_class``'s: lac's q̂ of all the
               held-out rows (pooled, the default), +∞ (every), −∞ (exclude)
    mondrian, by a column
               lac with one threshold per value v of a column of the rows (``by``), q̂_v
               from the held-out rows of that value; a value of too few rows, a value
               not seen at fitting and NULL take q̂ of all the held-out rows (pooled)

RAPS (Angelopoulos, Bates, Malik & Jordan 2021) is APS whose cumulative mass grows by λ
for each class beyond the k_reg most probable ones: the non-randomised set is the most
probable classes up to and including the first whose regularised cumulative mass
``m_c + p_c + λ·(o_c − k_reg)⁺`` reaches q̂ (MAPIE's ``include_last_label=True``), written,
like APS's, without sorting: class c is in it when the regularised mass of the classes
more probable than it, ``m_c + λ·(o_c − 1 − k_reg)⁺``, is below q̂. λ = 0 is APS. How λ
and k_reg are chosen when not given is :mod:`sqlnb.workflows.conformal`'s.

APS (Romano, Sesia & Candès 2020) without randomisation is the set of the most probable
classes up to and including the first whose cumulative probability reaches q̂ — MAPIE's
``include_last_label=True`` — written without sorting: class ``c`` is in it exactly when
the classes more probable than it hold less than q̂. Classes of equal probability are
all in or all out, whatever order a sort would give them. Randomised APS draws one
``u ∈ [0, 1)`` per row (the same for every class of that row): a pseudo-random number of
the seed and the row's probabilities, ``u = frac(43758.5453·sin(x))`` with ``x`` the seed
plus a weighted sum of the probabilities (the classic shader hash) — portable SQL, the
same u on every engine, so rows with the same probabilities get the same u.

Ties with the threshold: a class whose score equals q̂ exactly is in the set (``≤``;
APS's ``m_c < q̂`` is the same rule for the class that reaches q̂). MAPIE compares with
a tolerance of 1e-8 (a class within 1e-8 above q̂ is in its set too); crepes compares
p-values, which is the same set as ``≤`` (tests/test_conformal_oracles.py).

``k`` is computed in the query, ``CEIL((n + 1)·(1 − α))`` in double precision, as MAPIE's
``np.ceil((n + 1) * (1 - alpha))``.

In the scoring SELECT two stages after the probabilities (before a decision rule's stages)
add ``set_proba_<class>`` and ``set_member_<class>`` (BOOLEAN) per class (with sets by a
column, the row's threshold ``set_threshold`` is one CASE on it beside the class scores,
:meth:`ConformalSets.inputs`; these are helper columns,
which stay in the output when the source's columns are unknown, like ``jll_*``); the output has ``prediction_set`` (the
classes in the set, in class order, as a list: the mask-th of the 2^K constant lists for
up to :data:`LOOKUP_CLASSES` classes, :func:`_set_list`) and ``set_size`` where the dialect has
lists (DuckDB), and ``in_set_<class>`` and ``set_size`` elsewhere (PostgreSQL, SQLite,
Spark, ...: no portable list type). A row without probabilities has NULL for all of them.
The flags are also an output option where the dialect has lists (``set_format="flags"``,
``--set-format flags``): writing a LIST column to Parquet costs DuckDB far more than the
SELECT that computes it (APS's sets, 2.5 classes a row, took 1.37× the CPU of scoring
without sets; the same sets as flags 1.05-1.15×: benchmarks/README.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError, UpdateWarning, suggest, warn
from sqlnb.models.finish import class_columns, label_text
from sqlnb.sql.build import ADD_RUN
from sqlnb.store.catalog import PROVENANCE_COLUMN

#: Methods of ``sqlnb conformal``.
METHODS = ("lac", "aps", "raps", "mondrian")
#: RAPS's λ when not given: the one of these with the smallest mean set size on the tuning
#: rows (the values of the paper's experiments, and MAPIE's).
RAPS_LAMBDAS = (0.001, 0.01, 0.1, 0.2, 0.5)
#: What Mondrian sets do with a class of too few held-out rows for a threshold of its own
#: (:func:`too_few`; a class without any, most often): the threshold of all held-out rows
#: (the default), an infinite one (the class in every set), none (the class in no set),
#: or an error. :data:`MISSING_CLASS_DEFAULT` says why pooled.
MISSING_CLASS = ("pooled", "every", "exclude", "error")
#: The default of ``missing_class``: a class without held-out rows has no threshold of its
#: own that means anything, and the other choices cost every row (``every``: the class
#: in every set, the answer of crepes, whose p-value of a class without calibration rows
#: is 1: one class more in each set) or every row of that class (``exclude``: never
#: covered). The threshold of all held-out rows is LAC's, whose coverage over all classes
#: holds (MAPIE's Mondrian refuses a group of fewer than 2 rows instead, ``error`` here).
MISSING_CLASS_DEFAULT = "pooled"
#: How models stored before ``missing_class`` existed (and ``every`` models now: the
#: column is left out for them, so their fingerprint is unchanged) treated such a class.
MISSING_CLASS_STORED = "every"
#: Stored parts: the method and its settings (one row), the thresholds (one or one per class).
PART, THRESHOLDS_PART = "conformal", "conformal_thresholds"
#: Output columns.
SET_COLUMN, SIZE_COLUMN, IN_PREFIX = "prediction_set", "set_size", "in_set_"
#: Helper columns: the probabilities the sets are made of, the row's random number, and
#: whether each class is in the set (before rows without probabilities are made NULL).
PROBA_PREFIX, UNIFORM_COLUMN, MEMBER_PREFIX = "set_proba_", "set_uniform", "set_member_"
#: Helper column of Mondrian sets by a column: the row's threshold, that of its value.
THRESHOLD_COLUMN = "set_threshold"
#: Dialects whose output holds ``prediction_set`` as a list.
LIST_DIALECTS = ("duckdb",)
#: How the set comes out: ``list`` (``prediction_set``: where the dialect has lists, the
#: default there) or ``flags`` (``in_set_<class>``, one BOOLEAN per class: every dialect,
#: the default where there are no lists).
SET_FORMATS = ("list", "flags")
#: Up to this many classes the list is looked up among the 2^K possible ones (at most 64
#: constant lists in the SQL); beyond, built by ``LIST_WHERE`` (:func:`_set_list`).
LOOKUP_CLASSES = 6


def uses_list(dialect: str | None) -> bool:
    return (dialect or "duckdb") in LIST_DIALECTS


def check_set_format(set_format: str | None) -> None:
    if set_format is not None and set_format not in SET_FORMATS:
        raise SqlnbError(f"unknown set format {set_format!r}{suggest(str(set_format), SET_FORMATS)}; choose list "
                         "(prediction_set, where the dialect has lists) or flags (in_set_<class>, one BOOLEAN per class)")


def uniform(probas: Sequence[exp.Expression], seed: int) -> exp.Expression:
    """``u = frac(43758.5453·sin(x))``, ``x = seed·12.9898 + Σ_c 78.233·(c + 1)·p_c``: one
    pseudo-random number in [0, 1) per row, a function of the seed and the probabilities."""
    x = sql.add([sql.dbl(12.9898 * seed + 0.5)] + [exp.Mul(this=sql.dbl(78.233 * (c + 1)), expression=p.copy())
                                                   for c, p in enumerate(probas)])
    v = exp.Mul(this=exp.Anonymous(this="SIN", expressions=[x]), expression=sql.dbl(43758.5453))
    return sql.paren(exp.Sub(this=v, expression=exp.Floor(this=v.copy())))


def mass_above(probas: Sequence[exp.Expression], p: exp.Expression, own: int | None = None) -> exp.Expression:
    """``Σ_j [p_j > p]·p_j``: the probability of the classes more probable than ``p``.

    With ``own`` (``p`` is ``probas[own]``) that class's term is left out: it is always
    ``0.0`` (``p > p`` is false, NaN included) and adding ``0.0`` to a sum of non-negative
    terms changes no bit, so the sum is the one fitting computed, with one CASE less per
    class (while the terms form one chain, :data:`sqlnb.sql.build.ADD_RUN`)."""
    zero = sql.dbl(0.0)
    skip = own if own is not None and len(probas) <= ADD_RUN else None
    return sql.paren(sql.add([exp.Case(ifs=[exp.If(this=exp.GT(this=q.copy(), expression=p.copy()), true=q.copy())],
                                       default=zero.copy()) for j, q in enumerate(probas) if j != skip]))


def count_above(probas: Sequence[exp.Expression], p: exp.Expression, own: int | None = None) -> exp.Expression:
    """``Σ_j [p_j > p]`` as a DOUBLE: the number of classes more probable than ``p``
    (``own`` as in :func:`mass_above`)."""
    one, zero = sql.dbl(1.0), sql.dbl(0.0)
    skip = own if own is not None and len(probas) <= ADD_RUN else None
    return sql.paren(sql.add([exp.Case(ifs=[exp.If(this=exp.GT(this=q.copy(), expression=p.copy()), true=one.copy())],
                                       default=zero.copy()) for j, q in enumerate(probas) if j != skip]))


def penalty(lam: exp.Expression, count: exp.Expression, offset: float) -> exp.Expression:
    """RAPS's ``λ·(count − offset)⁺`` (``count`` and ``offset`` whole numbers, exact in DOUBLE)."""
    excess = sql.greatest([sql.dbl(0.0), exp.Sub(this=count, expression=sql.dbl(float(offset)))])
    return exp.Mul(this=lam.copy(), expression=excess)


def score(method: str, probas: Sequence[exp.Expression], p_y: exp.Expression,
          u: exp.Expression | None = None, lam: exp.Expression | None = None,
          k_reg: float | None = None) -> exp.Expression:
    """The non-conformity score of a held-out row whose class has probability ``p_y``
    (RAPS's with ``lam`` and ``k_reg``)."""
    if method in ("lac", "mondrian"):
        return exp.Sub(this=sql.dbl(1.0), expression=p_y.copy())
    own = p_y.copy() if u is None else exp.Mul(this=u.copy(), expression=p_y.copy())
    aps = exp.Add(this=mass_above(probas, p_y), expression=own)
    if method != "raps":
        return aps
    # o_y − k_reg = #{more probable} + 1 − k_reg
    return exp.Add(this=aps, expression=penalty(lam, count_above(probas, p_y), k_reg - 1))


def member(method: str, probas: Sequence[exp.Expression], c: int, q: exp.Expression,
           u: exp.Expression | None = None, lam: exp.Expression | None = None,
           k_reg: float | None = None) -> exp.Expression:
    """Whether class ``c`` is in the set under the threshold ``q`` (module docstring)."""
    p = probas[c]
    if method in ("lac", "mondrian"):
        return exp.LTE(this=exp.Sub(this=sql.dbl(1.0), expression=p.copy()), expression=q)
    if method == "raps":  # o_c − 1 − k_reg = #{more probable} − k_reg
        return exp.LT(this=exp.Add(this=mass_above(probas, p, c), expression=penalty(lam, count_above(probas, p, c),
                                                                                    k_reg)), expression=q)
    if u is None:
        return exp.LT(this=mass_above(probas, p, c), expression=q)
    return exp.LTE(this=exp.Add(this=mass_above(probas, p, c), expression=exp.Mul(this=u.copy(), expression=p.copy())),
                   expression=q)


def threshold_query(scores: exp.Expression, alpha: float, keys: Sequence[str]) -> exp.Select:
    """Per group of ``keys`` (columns of ``scores``, which also has ``score``): ``n`` and
    ``q``, the ``⌈(n + 1)(1 − α)⌉``-th smallest score (NULL when that rank exceeds n)."""
    part = [sql.col(k) for k in keys]
    ranked = exp.select(*part, sql.col("score"),
                        exp.alias_(exp.Window(this=exp.RowNumber(), partition_by=[k.copy() for k in part] or None,
                                              order=exp.Order(expressions=[exp.Ordered(this=sql.col("score"))])),
                                   "r", quoted=True),
                        exp.alias_(exp.Window(this=exp.Count(this=exp.Star()),
                                              partition_by=[k.copy() for k in part] or None), "n", quoted=True)
                        ).from_(scores)
    rank = exp.Ceil(this=exp.Mul(this=exp.paren(exp.Add(this=exp.Cast(this=sql.col("n"), to=exp.DataType.build("DOUBLE")),
                                                        expression=sql.dbl(1.0))),
                                 expression=sql.dbl(1.0 - alpha)))
    q = exp.Max(this=exp.Case(ifs=[exp.If(this=exp.EQ(this=sql.col("r"), expression=rank), true=sql.col("score"))]))
    out = exp.select(*[k.copy() for k in part], exp.alias_(exp.Max(this=sql.col("n")), "n", quoted=True),
                     exp.alias_(q, "q", quoted=True)).from_(exp.Subquery(this=ranked, alias=exp.TableAlias(
                         this=sql.ident("ranked"))))
    return out.group_by(*[k.copy() for k in part]) if part else out


@dataclass(frozen=True)
class ConformalSets:
    """Fitted conformal sets (module docstring).

    Attributes
    ----------
    method : {"lac", "aps", "raps", "mondrian"}
    alpha : float
        The miscoverage α: sets hold the class for at least 1 − α of the rows.
    thresholds : tuple of float
        q̂ (one; one per class for Mondrian, in class order; for Mondrian by a column one
        per value of :attr:`groups`, then the pooled one); ``inf`` where the rank
        ``⌈(n + 1)(1 − α)⌉`` exceeds the rows ``n``.
    counts : tuple of int
        The held-out rows behind each threshold.
    randomized : bool
        Randomised APS.
    seed : int
        Randomised APS's seed.
    source : str
        Where the held-out rows came from.
    missing_class : {"pooled", "every", "exclude", "error"} or None
        Mondrian: what a class of too few held-out rows got (:data:`MISSING_CLASS`; its
        threshold holds the choice, so scoring needs nothing else); None for the others.
    lam, k_reg : float and int, or None
        RAPS's size penalty λ and the number of classes free of it (None for the others).
    by : str or None
        Mondrian sets by a column: its name (a column of the rows scored), else None.
    by_type : str or None
        That column's SQL type (text, integer or boolean), for its values' literals.
    groups : tuple
        The column's values with a threshold of their own, in :attr:`thresholds`' order
        (a value of too few held-out rows holds the pooled threshold).
    form : {"list", "flags"} or None
        How scoring writes the set (:data:`SET_FORMATS`; None: a list where the dialect
        has lists, else flags). Chosen per scoring (:meth:`formatted`), never stored.
    """

    method: str
    alpha: float
    thresholds: tuple
    counts: tuple
    randomized: bool = False
    seed: int = 0
    source: str = ""
    missing_class: str | None = None
    lam: float | None = None
    k_reg: int | None = None
    by: str | None = None
    by_type: str | None = None
    groups: tuple = ()
    form: str | None = field(default=None, compare=False)

    # -- scoring -----------------------------------------------------------------------
    def formatted(self, set_format: str | None) -> "ConformalSets":
        """These sets written as ``set_format`` (None: as they are)."""
        check_set_format(set_format)
        return self if set_format is None else replace(self, form=set_format)

    def layout(self, dialect: str | None) -> str:
        """``list`` or ``flags``: :attr:`form`, or the dialect's default; a list where the
        dialect has none is refused in one line."""
        if self.form == "list" and not uses_list(dialect):
            raise SqlnbError(f"the set format list needs a dialect with lists ({', '.join(LIST_DIALECTS)}); {dialect} "
                             "has none: use flags (in_set_<class>, one BOOLEAN per class, its default)")
        return self.form or ("list" if uses_list(dialect) else "flags")

    def output_columns(self, classes: Sequence[Any], dialect: str | None) -> list[str]:
        sets = [SET_COLUMN] if self.layout(dialect) == "list" else class_columns(IN_PREFIX, classes)
        return sets + [SIZE_COLUMN]

    def helper_columns(self, classes: Sequence[Any], dialect: str | None) -> list[str]:
        """Columns of the set stages that are not outputs (they stay in ``*`` output)."""
        out = class_columns(PROBA_PREFIX, classes) + ([UNIFORM_COLUMN] if self.randomized else [])
        return [name for name, _ in self.inputs()] + out + class_columns(MEMBER_PREFIX, classes)

    def inputs(self) -> list[tuple[str, exp.Expression]]:
        """Helper columns computed from the source's row (aliased ``src``) beside the class
        scores: for Mondrian sets by a column, the row's threshold (``set_threshold``:
        its value's; the pooled one for any other value and NULL)."""
        if self.by is None:
            return []
        value = sql.col(self.by, "src")
        ifs = [exp.If(this=exp.EQ(this=value.copy(), expression=sql.value(v, self.by_type)), true=sql.dbl(q))
               for v, q in zip(self.groups, self.thresholds)]
        pooled = sql.dbl(self.thresholds[-1])
        return [(THRESHOLD_COLUMN, exp.Case(ifs=ifs, default=pooled) if ifs else pooled)]

    def stages(self, inner: exp.Select, probas: Sequence[exp.Expression], classes: Sequence[Any],
               fence: bool = False) -> exp.Select:
        """Two SELECTs around ``inner``: the probabilities ``set_proba_<class>`` (and the
        row's ``set_uniform``), then ``set_member_<class>``. With ``fence`` (engines that
        pull subqueries up into their parent, :data:`sqlnb.models.finish.FLATTENS_SUBQUERIES`)
        ``inner`` and the first SELECT end with ``OFFSET 0``, so that each is computed once
        per row: APS reads every probability about K² times, and unfenced SQLite wrote the
        whole class scores into each read (300 rows of a 3-class model ran for minutes)."""
        if fence:
            inner = inner.offset(0, copy=False)
        names = class_columns(PROBA_PREFIX, classes)
        cols = [exp.Alias(this=p.copy(), alias=sql.ident(n)) for p, n in zip(probas, names)]
        p = [sql.col(n) for n in names]
        u = None
        if self.randomized:  # from ``probas``: a column cannot be read in the SELECT that defines it
            cols.append(exp.Alias(this=uniform(probas, self.seed), alias=sql.ident(UNIFORM_COLUMN)))
            u = sql.col(UNIFORM_COLUMN)
        first = _stage(cols, inner, "cp")
        if fence:
            first = first.offset(0, copy=False)
        if self.by is not None:
            q = [sql.col(THRESHOLD_COLUMN)] * len(classes)
        else:
            q = [sql.dbl(t) for t in self.thresholds] * (len(classes) if self.method != "mondrian" else 1)
        lam = sql.dbl(self.lam) if self.method == "raps" else None
        ins = [exp.Alias(this=member(self.method, p, c, q[c].copy(), u, lam, self.k_reg), alias=sql.ident(n))
               for c, n in enumerate(class_columns(MEMBER_PREFIX, classes))]
        return _stage(ins, first, "cs")

    def columns(self, undefined: exp.Expression, classes: Sequence[Any], label_type: str | None,
                dialect: str | None) -> list[exp.Expression]:
        """The output columns of the final SELECT (NULL on rows without probabilities)."""
        ins = [sql.col(n) for n in class_columns(MEMBER_PREFIX, classes)]

        def unless(x: exp.Expression) -> exp.Expression:
            return exp.Case(ifs=[exp.If(this=undefined.copy(), true=exp.null())], default=x)

        size = sql.add([exp.Case(ifs=[exp.If(this=i.copy(), true=exp.Literal.number(1))], default=exp.Literal.number(0))
                        for i in ins])
        if self.layout(dialect) == "list":
            out = [exp.Alias(this=unless(_set_list(ins, classes, label_type)), alias=sql.ident(SET_COLUMN))]
        else:
            out = [exp.Alias(this=unless(i), alias=sql.ident(n))
                   for i, n in zip(ins, class_columns(IN_PREFIX, classes))]
        return out + [exp.Alias(this=unless(size), alias=sql.ident(SIZE_COLUMN))]

    # -- storage ------------------------------------------------------------------------
    def tables(self) -> dict[str, tuple[Any, dict]]:
        """``conformal`` (method, alpha, randomized, seed, source: one row) and
        ``conformal_thresholds`` (position, threshold, rows)."""
        import pyarrow as pa
        settings = {"method": pa.array([self.method], pa.string()),
                    "alpha": pa.array([self.alpha], pa.float64()),
                    "randomized": pa.array([self.randomized], pa.bool_()),
                    "seed": pa.array([self.seed], pa.int64())}
        if self.missing_class not in (None, MISSING_CLASS_STORED):
            # A column of its own (Mondrian sets only), read back by from_tables; a sqlnb
            # that does not know it ignores it and scores the same (the thresholds say it).
            settings["missing_class"] = pa.array([self.missing_class], pa.string())
        if self.method == "raps":
            settings |= {"lambda": pa.array([self.lam], pa.float64()), "k_reg": pa.array([self.k_reg], pa.int64())}
        steps = {"position": pa.array(range(len(self.thresholds)), pa.int32()),
                 "threshold": pa.array(self.thresholds, pa.float64()),
                 "rows": pa.array(self.counts, pa.int64())}
        if self.by is not None:  # each value as text (its type beside), the pooled threshold's NULL
            settings |= {"by": pa.array([self.by], pa.string()), "by_type": pa.array([self.by_type], pa.string())}
            steps["group"] = pa.array([group_text(v) for v in self.groups] + [None], pa.string())
        return {
            PART: (pa.table({**settings, PROVENANCE_COLUMN: pa.array([self.source], pa.string())}), {}),
            THRESHOLDS_PART: (pa.table(steps), {}),
        }

    @classmethod
    def from_tables(cls, tables: dict[str, Any]) -> "ConformalSets | None":
        """The sets stored among a model's parts, or None."""
        if PART not in tables:
            return None
        (row,) = tables[PART].to_pylist()
        steps = sorted(tables[THRESHOLDS_PART].to_pylist(), key=lambda r: r["position"])
        by = row.get("by")
        missing = row.get("missing_class") or (MISSING_CLASS_STORED if row["method"] == "mondrian" and by is None
                                               else None)
        raps = row["method"] == "raps"
        return cls(row["method"], float(row["alpha"]), tuple(float(r["threshold"]) for r in steps),
                   tuple(int(r["rows"]) for r in steps), bool(row["randomized"]), int(row["seed"]), row[PROVENANCE_COLUMN],
                   missing, float(row["lambda"]) if raps else None, int(row["k_reg"]) if raps else None, by,
                   row.get("by_type") if by is not None else None,
                   tuple(group_value(r["group"], row["by_type"]) for r in steps[:-1]) if by is not None else ())

    def describe(self, classes: Sequence[Any] | None = None) -> dict:
        """JSON-ready: method, α, thresholds (per class for Mondrian) and rows."""
        d: dict[str, Any] = {"method": self.method, "alpha": self.alpha}
        if self.method == "aps":
            d["randomized"] = self.randomized
            if self.randomized:
                d["seed"] = self.seed
        if self.method == "raps":
            d["lambda"], d["k_reg"] = self.lam, self.k_reg
        if self.by is not None:
            d["by"] = self.by
            d["thresholds"] = {group_text(v): q for v, q in zip(self.groups, self.thresholds)}
            d["rows"] = {group_text(v): n for v, n in zip(self.groups, self.counts)}
            d["pooled"] = {"threshold": self.thresholds[-1], "rows": self.counts[-1]}
        elif self.method == "mondrian" and classes is not None:
            d["thresholds"] = {label_text(c): q for c, q in zip(classes, self.thresholds)}
            d["rows"] = {label_text(c): n for c, n in zip(classes, self.counts)}
            d["missing_class"] = self.missing_class
        else:
            d["threshold"], d["rows"] = self.thresholds[0], self.counts[0]
        return d | {"source": self.source}

    def summary(self, classes: Sequence[Any]) -> str:
        """One line: method, α, threshold(s), rows, source (as ``sqlnb show`` prints it)."""
        return summary(self.describe(classes))


def summary(d: dict) -> str:
    """:meth:`ConformalSets.describe`'s dict as one line."""
    def q(x: float) -> str:
        return ("inf (every class)" if x > 0 else "-inf (in no set)") if math.isinf(x) else f"{x:.6g}"

    def own(n: int) -> str:  # a Mondrian class's rows, and the threshold it took for too few
        pooled = d.get("missing_class") == "pooled" and too_few(n, d["alpha"])
        return f"{'pooled, ' if pooled else ''}on {n:,}"
    what = d["method"] + (" randomized" if d.get("randomized") else "")
    if "lambda" in d:
        what += f" (lambda = {d['lambda']:g}, k_reg = {d['k_reg']})"
    if "by" in d:
        pooled = d["pooled"]
        per = "; ".join(f"{v}: {q(t)} {'pooled, ' if too_few(d['rows'][v], d['alpha']) else ''}on {d['rows'][v]:,}"
                        for v, t in d["thresholds"].items())
        return (f"{what} sets by {d['by']} at alpha = {d['alpha']:g} (thresholds {per}; any other value: "
                f"{q(pooled['threshold'])} on {pooled['rows']:,} rows of {d['source']})")
    if isinstance(d.get("thresholds"), dict):
        per = "; ".join(f"{c}: {q(t)} {own(d['rows'][c])}" for c, t in d["thresholds"].items())
        return f"{what} sets at alpha = {d['alpha']:g} (thresholds {per} rows of {d['source']})"
    return f"{what} sets at alpha = {d['alpha']:g} (threshold {q(d['threshold'])} on {d['rows']:,} rows of {d['source']})"


def group_text(v: Any) -> str:
    """A group value as stored and shown (booleans as ``true``/``false``)."""
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def group_value(text: str, sql_type: str | None) -> Any:
    """The group value :func:`group_text` wrote, of its column's type (:func:`group_kind`)."""
    kind = group_kind(sql_type)
    return int(text) if kind == "integer" else (text == "true") if kind == "boolean" else text


def group_kind(sql_type: str | None) -> str | None:
    """``text``, ``integer`` or ``boolean``: the kinds of column sets may be grouped by
    (values that compare exactly on every engine); None for any other."""
    t = (sql_type or "").upper()
    if t.startswith(("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR")):
        return "text"
    if t in ("TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
             "UBIGINT", "INT2", "INT4", "INT8"):
        return "integer"
    return "boolean" if t in ("BOOLEAN", "BOOL") else None


def too_few(n: int, alpha: float) -> bool:
    """Whether ``n`` held-out rows are too few for a threshold: the rank
    ``⌈(n + 1)(1 − α)⌉`` exceeds ``n`` (the same double arithmetic as the query's)."""
    return math.ceil((n + 1) * (1.0 - alpha)) > n


def _set_list(ins: Sequence[exp.Expression], classes: Sequence[Any], label_type: str | None) -> exp.Expression:
    """The classes whose member column is true, in class order, as a DuckDB list.

    Up to :data:`LOOKUP_CLASSES` classes: the ``mask``-th of the 2^K constant lists, with
    ``mask = Σ_c [in_c]·2^c``; beyond, ``LIST_WHERE(classes, [in_0, ...])``. At 2M rows
    (benchmarks/README.md, one thread, DuckDB's profile) the lookup's projection took
    0.13-0.16 s, LIST_WHERE's 0.33 s and the LIST_CONCAT of one CASE-built list per class
    it replaced 2-3 s. A NULL member (NULL probability) is not in the set, as ``set_size``
    counts it (LIST_WHERE refuses NULL in its mask: COALESCE).
    """
    if len(classes) <= LOOKUP_CLASSES:
        lists = exp.Array(expressions=[exp.Array(expressions=[sql.value(v, label_type) for c, v in enumerate(classes)
                                                              if mask >> c & 1]) for mask in range(2 ** len(classes))])
        index = sql.add([exp.Case(ifs=[exp.If(this=i.copy(), true=exp.Literal.number(2 ** c))],
                                  default=exp.Literal.number(0)) for c, i in enumerate(ins)] + [exp.Literal.number(1)])
        return exp.Anonymous(this="LIST_EXTRACT", expressions=[lists, index])
    labels = exp.Array(expressions=[sql.value(v, label_type) for v in classes])
    mask = exp.Array(expressions=[exp.Coalesce(this=i.copy(), expressions=[exp.false()]) for i in ins])
    return exp.Anonymous(this="LIST_WHERE", expressions=[labels, mask])


def _stage(cols: list[exp.Expression], inner: exp.Select, alias: str) -> exp.Select:
    return exp.select(exp.Star(), *cols).from_(exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident(alias))),
                                               copy=False)


def with_sets(model, sets: ConformalSets | None):
    """A copy of ``model`` scoring with ``sets`` (None: without)."""
    import copy
    out = copy.copy(model)
    out.conformal = sets
    return out


def no_sets_error(set_format: str) -> SqlnbError:
    return SqlnbError(f"the set format {set_format!r} (--set-format) chooses how conformal sets come out, and the "
                      "model has none; fit them with sqlnb conformal, or leave the set format out")


def with_set_format(model, set_format: str | None):
    """A copy of ``model`` whose sets come out as ``set_format`` (None: ``model`` itself)."""
    if set_format is None:
        return model
    if getattr(model, "conformal", None) is None:
        raise no_sets_error(set_format)
    return with_sets(model, model.conformal.formatted(set_format))


def dropped_warning(model, why: str) -> None:
    """Say (an UpdateWarning, printed on stderr) that ``model``'s sets are dropped."""
    if getattr(model, "conformal", None) is not None:
        warn(f"the model's conformal sets were fitted on its old probabilities and are dropped ({why}); "
                      "fit them again with sqlnb conformal", UpdateWarning)


def check_method(method: str, alpha: float, randomized: bool, missing_class: str | None = None,
                 lam: float | None = None, k_reg: int | None = None, by: str | None = None) -> None:
    if method not in METHODS:
        raise SqlnbError(f"unknown conformal method {method!r}{suggest(method, METHODS)}; choose one of: "
                         f"{', '.join(METHODS)}")
    if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
        raise SqlnbError(f"--alpha must be a number between 0 and 1 (the share of rows whose set may miss the "
                         f"class, e.g. 0.1), not {alpha!r}")
    if randomized and method != "aps":
        raise SqlnbError(f"--randomized applies to --method aps only, not {method}")
    if missing_class is not None and missing_class not in MISSING_CLASS:
        raise SqlnbError(f"unknown --missing-class {missing_class!r}{suggest(str(missing_class), MISSING_CLASS)}; "
                         f"choose one of: {', '.join(MISSING_CLASS)}")
    if missing_class is not None and method != "mondrian":
        raise SqlnbError(f"--missing-class applies to --method mondrian only (a threshold per class), not {method}")
    if (lam is not None or k_reg is not None) and method != "raps":
        raise SqlnbError(f"--{'lambda' if lam is not None else 'k-reg'} applies to --method raps only, not {method}")
    if lam is not None and not (isinstance(lam, (int, float)) and math.isfinite(lam) and lam >= 0):
        raise SqlnbError(f"--lambda must be a number >= 0 (RAPS's penalty per class beyond k_reg), not {lam!r}")
    if k_reg is not None and not (isinstance(k_reg, int) and k_reg >= 0):
        raise SqlnbError(f"--k-reg must be a whole number >= 0 (the classes free of RAPS's penalty), not {k_reg!r}")
    if by is not None and method != "mondrian":
        raise SqlnbError(f"--by applies to --method mondrian only (a threshold per value of the column), not {method}")
    if by is not None and missing_class is not None:
        raise SqlnbError("--missing-class applies to Mondrian sets per class; by a column, a value of too few "
                         "held-out rows takes the threshold of all of them")
