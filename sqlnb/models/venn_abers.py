"""Inductive Venn–Abers predictors (Vovk & Petej 2014): a calibrator of the class scores
that gives, beside one probability per class, an interval ``[p0, p1]`` that holds it.

For two classes the calibrator works on the log-odds ``s = b_1 − b_0`` (``b_c`` the class
scores, :mod:`sqlnb.models.finish`; class 1 is the second in sorted order). Given the
held-out (calibration) rows' scores and labels, a test row of score ``s`` gets::

    p0 = f0(s),  f0 = isotonic regression of calibration ∪ {(s, 0)}
    p1 = f1(s),  f1 = isotonic regression of calibration ∪ {(s, 1)}
    p  = p1 / (1 − p0 + p1)                  the merged probability of class 1

(0 < p1 and p0 < 1 always: the test row's own label moves the fit at its score). With
more classes each class c is calibrated one-vs-rest, on its margin over the best other
class ``s_c = b_c − max_{k≠c} b_k`` (for two classes the log-odds again) with labels
``[y = c]``; the merged probabilities ``p_c`` are then normalised to sum to 1.

**Fitting** (:meth:`Steps.fit`): ``p0`` and ``p1`` depend on ``s`` only through its place
among the k sorted distinct calibration scores ``t_1 < … < t_k``, so they are step functions
of ``s``, precomputed once as the fast algorithm of Vovk, Petej and Fedorova (2015, "Large-scale
probabilistic predictors with and without guarantees of validity", algorithms 1-4) does:
on the cumulative sum diagram ``P_0 = (0, 0)``, ``P_j = (rows with score ≤ t_j, positives
among them)``, a Graham scan gives the greatest convex minorant, and one sweep over the
scores (left to right for p1, right to left for p0) keeps it up to date as the test point
moves, reading each step's value off as a slope. O(k) after the ``GROUP BY score``, in
exact integer arithmetic (each slope is one correctly rounded division). A test score equal
to a calibration score ``t_j`` is pooled with it: ``p0`` takes the step to its right
(``t_j ≤ s < t_{j+1}``), ``p1`` the step to its left (``t_{j−1} < s ≤ t_j``). Cell ``j``
(``0..k``) lies below threshold ``t_{j+1}``; ``p0`` is 0 below ``t_1``, ``p1`` 1 above ``t_k``.

**Stored** as one table of steps per calibrated class (:data:`PART`: class, position,
threshold, p0, p1; the last cell's threshold NULL), and **scored** inside the scoring
SELECT (:meth:`VennAbers.stages`): the score; then p0 and p1, on DuckDB read from lists
(:class:`Lookup`: the cells where neither changes merged, a uniform grid over the rest
giving the first cell a row can be in, a few bisection steps, one nested SELECT each,
finding its cell; one search serves p0 and p1), elsewhere each step function a balanced
tree of ``CASE WHEN s < t`` comparisons (``≤`` for p1; runs of equal values merged); then
the class scores ``jll_c = ln p1_c − ln(1 − p0_c + p1_c)`` (for two classes ``ln(1 − p0)``
for the first class) whose softmax in the shared finish is the merged (and normalised)
probability. DuckDB evaluates every CASE node once per vector of rows, so the trees cost
in proportion to the steps (1,000-34,000 of them: scoring 1M rows took 21 times as long
as without the calibrator); the lists a few reads per row whatever their length (one for
the grid, one per bisection step, three for the values; benchmarks/README.md,
``venn_abers_scoring.py``). The interval columns ``va_p0_<class>`` and ``va_p1_<class>``
come out beside the probabilities (for two classes the first class's interval is
``[1 − p1, 1 − p0]``).
The score is written with subtraction and GREATEST only, so every engine computes it to the
same bit and a row scored exactly at a calibration score finds the same step everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Sequence

import numpy as np
from sqlglot import exp

from sqlnb import sql
from sqlnb.models.finish import class_columns

#: Stored part: one row per step of each calibrated class.
PART = "calibration_venn_abers"
#: Column prefixes: the interval per class, and the one-vs-rest score (a helper).
P0_PREFIX, P1_PREFIX, SCORE_PREFIX = "va_p0_", "va_p1_", "va_score_"
#: Dialects that score the steps from lists (:class:`Lookup`); the others get the CASE
#: trees of :meth:`Steps.lookup`.
LISTED = ("duckdb",)
#: Helper columns of the listed lookup: ``va_index<j>_<class>``, the cell found after
#: ``j`` bisection steps.
INDEX_PREFIX = "va_index"
#: What one bisection step costs, in list elements. Scoring the benchmark's model
#: (benchmarks/venn_abers_scoring.py, 1M rows), a step took ~0.035 s of CPU per class,
#: and each element of a list the SELECT reads ~1.7 µs per 1M rows (DuckDB handles a
#: list once per vector of rows; grids of 2^18 cells for 2 steps cost 1 s more than 2^15
#: for 3): a step is worth some 20,000 elements. With this value the grids were
#: 8,192-16,384 cells and 3-4 steps, 1.36-1.44 s of CPU, against 1.57-1.62 s with 65,536
#: (2^15 cells, 3 steps) and 1.48-1.56 s with 1,024 (6 steps); the grid is sized to the
#: least ``steps · STEP_COST + cells`` (:meth:`Lookup.of`).
STEP_COST = 16_384
#: The largest grid tried (cells).
GRID_MAX = 1 << 16
#: Helper column of the listed lookup: ``va_cuts_<class>``, the cuts (:class:`Lookup`), read
#: by every bisection step and dropped once the values are read.
CUTS_PREFIX = "va_cuts_"


def _cross(o: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> int:
    """z of (a − o) × (b − o): > 0 for a left turn o → a → b."""
    return (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])


def _slope(a: tuple[int, int], b: tuple[int, int]) -> float:
    return (b[1] - a[1]) / (b[0] - a[0]) + 0.0  # Python ints: one correctly rounded division (+ 0.0: never −0.0)


def _not_below(t: tuple[int, int], a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Whether ``t`` is on or above the line through ``a`` and ``b``."""
    if a[0] > b[0]:
        a, b = b, a
    return _cross(a, b, t) >= 0


def _hull(points: dict[int, tuple[int, int]], scan: Sequence[int], turn: int) -> list[tuple[int, int]]:
    """Graham scan over ``points`` in the order ``scan``: the greatest convex minorant
    (``turn`` = 1, scanning left to right; −1 right to left), as a stack whose top is the
    last point scanned, returned reversed (its top the first point)."""
    stack = [points[scan[0]], points[scan[1]]]
    for i in scan[2:]:
        while len(stack) > 1 and turn * _cross(stack[-2], stack[-1], points[i]) <= 0:
            stack.pop()
        stack.append(points[i])
    return stack[::-1]


def _sweep(points: dict[int, tuple[int, int]], stack: list, order: Sequence[int], moved: int,
           turn: int) -> dict[int, float]:
    """Along ``order``: the slope of the minorant's edge at the test point, then the test
    point's segment moved past one more calibration group (``P_j = P_{j−1} + P_{j+1} − P_j``,
    ``j = i + moved``) and the minorant mended at its near end."""
    out = {}
    for i in order:
        out[i] = _slope(stack[-1], stack[-2])
        j = i + moved
        points[j] = (points[j - 1][0] + points[j + 1][0] - points[j][0],
                     points[j - 1][1] + points[j + 1][1] - points[j][1])
        if _not_below(points[j], stack[-1], stack[-2]):
            continue
        stack.pop()
        while len(stack) > 1 and turn * _cross(points[j], stack[-1], stack[-2]) <= 0:
            stack.pop()
        stack.append(points[j])
    return out


@dataclass(frozen=True)
class Steps:
    """``p0`` and ``p1`` of one (one-vs-rest) class as step functions of its score.

    Attributes
    ----------
    thresholds : tuple of float
        The sorted distinct calibration scores ``t_1 < … < t_k``.
    p0, p1 : tuple of float
        ``k + 1`` values each: cell ``j`` holds the scores below ``t_{j+1}`` (``p0``:
        ``t_j ≤ s < t_{j+1}``; ``p1``: ``t_j < s ≤ t_{j+1}``), the last cell those above ``t_k``.
    """

    thresholds: tuple[float, ...]
    p0: tuple[float, ...]
    p1: tuple[float, ...]

    @classmethod
    def fit(cls, groups: Sequence[tuple[float, int, int]]) -> "Steps":
        """From ``(score, rows, positives)`` per distinct calibration score, in increasing
        score (the module docstring's fast algorithm)."""
        points = {0: (0, 0)}
        for j, (_, n, pos) in enumerate(groups, start=1):
            points[j] = (points[j - 1][0] + int(n), points[j - 1][1] + int(pos))
        k = len(groups)
        # p1 (algorithms 1-2): the test point's segment (1, 1) first, from P_{-1} = (−1, −1);
        # the slope at step i is cell i − 1's.
        up = dict(points) | {-1: (-1, -1)}
        f1 = _sweep(up, _hull(up, range(-1, k + 1), 1), range(1, k + 1), -1, 1)
        # p0 (algorithms 3-4): the segment (1, 0) last, to P_{k+1} = P_k + (1, 0); step i is cell i's.
        down = dict(points) | {k + 1: (points[k][0] + 1, points[k][1])}
        f0 = _sweep(down, _hull(down, range(k + 1, -1, -1), -1), range(k, 0, -1), 0, -1)
        return cls(tuple(float(g[0]) for g in groups), (0.0, *(f0[i] for i in range(1, k + 1))),
                   (*(f1[i] for i in range(1, k + 1)), 1.0))

    def lookup(self, s: exp.Expression, upper: bool) -> exp.Expression:
        """``p1`` (``upper``) or ``p0`` at ``s`` as a CASE: a balanced tree of comparisons
        with the thresholds where the value changes (~log₂ of their number per row);
        NULL for a NULL or NaN ``s``."""
        values = self.p1 if upper else self.p0
        cuts = [j for j in range(len(self.thresholds)) if values[j] != values[j + 1]]
        cells = [values[j] for j in cuts] + [values[-1]]
        compare = exp.LTE if upper else exp.LT

        def tree(lo: int, hi: int) -> exp.Expression:  # cells lo..hi; cell i lies below threshold cuts[i]
            if lo == hi:
                return sql.dbl(cells[lo])
            mid = (lo + hi + 1) // 2
            below = compare(this=s.copy(), expression=sql.dbl(self.thresholds[cuts[mid - 1]]))
            return exp.Case(ifs=[exp.If(this=below, true=tree(lo, mid - 1))], default=tree(mid, hi))

        return exp.Case(ifs=[exp.If(this=sql.missing(s.copy()), true=exp.null())], default=tree(0, len(cells) - 1))

    @cached_property
    def listed(self) -> "Lookup":
        """The lists DuckDB scores these steps from (:class:`Lookup`)."""
        return Lookup.of(self)


@dataclass(frozen=True, eq=False)
class Lookup:
    """DuckDB's lookup of one class's steps (:data:`LISTED`), from constant lists.

    The cells where neither ``p0`` nor ``p1`` changes are merged, leaving the cuts
    ``u_1 < … < u_n`` (thresholds where one of them changes) and the cells' values
    ``p0[0..n]``, ``p1[0..n]``. A row's cell ``i = #{u_j ≤ s}`` is found in two parts:

    * a uniform grid of ``G`` cells over ``[u_first, u_last]`` (finite cuts):
      ``g = FLOOR(GREATEST(LEAST((s − lo) · scale, G − 1), 0))``, and ``starts[g]``, the
      number of cuts in the cells below ``g``. Rounding keeps ``g`` non-decreasing in
      ``s``, and the cuts' own cells are computed here with the same IEEE operations, so
      every cut of a lower cell is below ``s`` and every cut of a higher cell above it:
      ``i`` lies between ``starts[g]`` and ``starts[g]`` plus the cuts in cell ``g``.
    * ``steps`` branch-free bisection steps within the cell (``steps`` = bits of the most
      cuts a cell holds): ``i := i + 2^m`` when ``s ≥ u_{i+2^m}``, ``m = steps−1 … 0``;
      a position past the last cut reads NULL, which is never ≤ ``s``.

    Then ``p0 = p0[i]`` and ``p1 = p1[i − 1]`` when ``s = u_i`` (a tie goes to the cell
    below, as ``≤``), else ``p1[i]``. Each row does the same ~``steps + 3`` reads; the
    grid's size is chosen for the least cost (:data:`STEP_COST`).
    """

    cuts: np.ndarray
    p0: np.ndarray
    p1: np.ndarray
    lo: float
    scale: float
    starts: np.ndarray
    steps: int

    @classmethod
    def of(cls, st: "Steps") -> "Lookup":
        t, p0, p1 = (np.asarray(v, dtype=float) for v in (st.thresholds, st.p0, st.p1))
        change = (p0[:-1] != p0[1:]) | (p1[:-1] != p1[1:])  # at threshold t_j, j = 1..k
        cuts, keep = t[change], np.concatenate([[True], change])
        finite = cuts[np.isfinite(cuts)]
        # (cost, lo, scale, starts, steps); one cell (no grid) to begin with
        best = (len(cuts).bit_length() * STEP_COST + 1, 0.0, 0.0, np.zeros(1, np.int64), len(cuts).bit_length())
        if len(finite) > 1:
            lo, width, grid = float(finite[0]), float(finite[-1] - finite[0]), 2
            while grid <= GRID_MAX and 0.0 < grid / width < np.inf:
                scale = grid / width
                cells = np.floor(np.clip((cuts - lo) * scale, 0.0, grid - 1.0)).astype(np.int64)
                counts = np.bincount(cells, minlength=grid)
                steps = int(counts.max()).bit_length()
                if steps * STEP_COST + grid < best[0]:
                    best = (steps * STEP_COST + grid, lo, scale,
                            np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64), steps)
                grid *= 2
        _, lo, scale, starts, steps = best
        return cls(cuts, p0[keep], p1[keep], lo, scale, starts, steps)

    @property
    def grid(self) -> int:
        return len(self.starts)

    @cached_property
    def lists(self) -> dict[str, exp.Expression]:
        """The lists, each a scalar subquery: DuckDB then references one list per vector
        of rows (a constant expression would be built anew for each vector). ``cuts``
        begins with a NaN, so that position ``i + 1`` holds ``u_i`` and position 1 equals
        no score (NaN sorts above every number in DuckDB: never ``≤ s``)."""
        def listed(values: np.ndarray, sql_type: str) -> exp.Expression:
            return exp.Subquery(this=exp.select(sql.bound_list(values, sql_type)))
        return {"starts": listed(self.starts, "BIGINT"), "cuts": listed(np.concatenate([[np.nan], self.cuts]), "DOUBLE"),
                "p0": listed(self.p0, "DOUBLE"), "p1": listed(self.p1, "DOUBLE")}

    @staticmethod
    def read(values: exp.Expression, index: exp.Expression, offset: int = 1) -> exp.Expression:
        """``list_extract(values, index + offset)`` (1-based; NULL past the end)."""
        at = exp.Add(this=index, expression=exp.Literal.number(offset)) if offset else index
        return exp.Anonymous(this="list_extract", expressions=[values.copy(), at])

    def start(self, s: exp.Expression) -> exp.Expression:
        """The first cell the row can be in, ``starts[g]``; NULL for a NULL or NaN ``s``
        (``NULLIF(s, NaN)``: NaN equals NaN in DuckDB), which every later read passes on."""
        x = exp.Mul(this=sql.paren(exp.Sub(this=exp.Nullif(this=s.copy(), expression=sql.dbl(np.nan)),
                                           expression=sql.dbl(self.lo))), expression=sql.dbl(self.scale))
        clamped = exp.Greatest(this=exp.Least(this=x, expressions=[sql.dbl(self.grid - 1.0)]), expressions=[sql.dbl(0.0)])
        return self.read(self.lists["starts"], exp.Cast(this=exp.Floor(this=clamped), to=exp.DataType.build("BIGINT")))

    def step(self, s: exp.Expression, i: exp.Expression, m: int, cuts: exp.Expression) -> exp.Expression:
        """One bisection step of size ``2^m``: ``i + 2^m`` when ``s ≥ u_{i+2^m}``, else ``i``;
        ``cuts`` is the column holding :attr:`lists`' ``cuts``. (A CASE: scoring the
        benchmark's model it took less CPU than ``i + 2^m · CAST(s ≥ … AS BIGINT)``,
        1.5 s against 1.9 s for 1M rows.)"""
        ahead = exp.GTE(this=s.copy(), expression=self.read(cuts, i.copy(), (1 << m) + 1))
        return exp.Case(ifs=[exp.If(this=ahead, true=exp.Add(this=i.copy(), expression=exp.Literal.number(1 << m)))],
                        default=i.copy())

    def values(self, s: exp.Expression, i: exp.Expression, cuts: exp.Expression) -> tuple[exp.Expression, exp.Expression]:
        """``p0`` and ``p1`` of the row in cell ``i``: ``p1`` one cell lower when ``s = u_i``."""
        tie = exp.Cast(this=exp.EQ(this=s.copy(), expression=self.read(cuts, i.copy())), to=exp.DataType.build("BIGINT"))
        return self.read(self.lists["p0"], i.copy()), self.read(self.lists["p1"], exp.Sub(this=i.copy(), expression=tie))


def scores(raw: Sequence[exp.Expression]) -> list[exp.Expression]:
    """The one-vs-rest score of each calibrated class: ``b_1 − b_0`` for two classes, else
    ``b_c − max_{k≠c} b_k`` per class (module docstring)."""
    if len(raw) == 2:
        return [exp.Sub(this=raw[1].copy(), expression=raw[0].copy())]
    return [exp.Sub(this=b.copy(), expression=sql.paren(sql.greatest([o.copy() for o in raw if o is not b])))
            for b in raw]


@dataclass(frozen=True)
class VennAbers:
    """A fitted Venn–Abers calibrator: the steps of the second class (two classes) or of
    every class (one-vs-rest)."""

    steps: tuple[Steps, ...]

    @staticmethod
    def calibrated(n_classes: int) -> list[int]:
        """The classes with steps of their own, by position."""
        return [1] if n_classes == 2 else list(range(n_classes))

    @staticmethod
    def output_columns(classes: Sequence[Any]) -> list[str]:
        """``va_p0_<class>`` for every class, then ``va_p1_<class>``."""
        return class_columns(P0_PREFIX, classes) + class_columns(P1_PREFIX, classes)

    def helper_columns(self, classes: Sequence[Any]) -> list[str]:
        """The scores, the listed lookup's cells and cuts (:data:`INDEX_PREFIX`,
        :data:`CUTS_PREFIX`; the cuts never reach the output) and the interval columns."""
        own = self.calibrated(len(classes))
        names = class_columns(SCORE_PREFIX, classes)
        cells = [class_columns(f"{INDEX_PREFIX}{j}_", classes)[c] for c, st in zip(own, self.steps)
                 for j in range(st.listed.steps + 1)]
        cuts = [class_columns(CUTS_PREFIX, classes)[c] for c in own]
        return [names[c] for c in own] + cells + cuts + self.output_columns(classes)

    def stages(self, raw: Sequence[exp.Expression], classes: Sequence[Any],
               dialect: str = "duckdb") -> list[list[tuple[str, exp.Expression]]]:
        """The scores; each calibrated class's p0 and p1 (in :data:`LISTED` dialects from
        lists, a SELECT per bisection step before them, :class:`Lookup`, and the cuts'
        column dropped: ``(name, None)``; elsewhere CASE trees); the intervals of a binary
        model's first class and the class scores ``jll_<class>`` (module docstring)."""
        K = len(classes)
        own = self.calibrated(K)
        score, p0, p1 = (class_columns(p, classes) for p in (SCORE_PREFIX, P0_PREFIX, P1_PREFIX))
        jll = class_columns("jll_", classes)
        first = [(score[c], e) for c, e in zip(own, scores(raw))]
        if dialect in LISTED:
            search = self._search(own, classes)
            found = [class_columns(f"{INDEX_PREFIX}{st.listed.steps}_", classes)[c] for c, st in zip(own, self.steps)]
            cuts = class_columns(CUTS_PREFIX, classes)
            second = [item for c, st, i in zip(own, self.steps, found)
                      for item in zip((p0[c], p1[c]), st.listed.values(sql.col(score[c]), sql.col(i), sql.col(cuts[c])))]
            second += [(cuts[c], None) for c in own]
        else:
            search = []
            second = [item for c, st in zip(own, self.steps)
                      for item in ((p0[c], st.lookup(sql.col(score[c]), False)),
                                   (p1[c], st.lookup(sql.col(score[c]), True)))]
        one = sql.dbl(1.0)

        def ln_merged_denominator(c: int) -> exp.Expression:  # ln(1 − p0 + p1)
            return exp.Ln(this=exp.Add(this=exp.Sub(this=one.copy(), expression=sql.col(p0[c])),
                                       expression=sql.col(p1[c])))

        def merged(numerator: exp.Expression, c: int) -> exp.Expression:
            return exp.Sub(this=exp.Ln(this=numerator), expression=ln_merged_denominator(c))

        if K == 2:
            third = [(p0[0], exp.Sub(this=one.copy(), expression=sql.col(p1[1]))),
                     (p1[0], exp.Sub(this=one.copy(), expression=sql.col(p0[1]))),
                     (jll[0], merged(exp.Sub(this=one.copy(), expression=sql.col(p0[1])), 1)),
                     (jll[1], merged(sql.col(p1[1]), 1))]
        else:
            third = [(jll[c], merged(sql.col(p1[c]), c)) for c in own]
        return [first, *search, second, third]

    def _search(self, own: Sequence[int], classes: Sequence[Any]) -> list[list[tuple[str, exp.Expression]]]:
        """The listed lookup's cells: ``va_index0_<class>`` (the grid's start) beside the
        cuts as a column ``va_cuts_<class>`` (one list carried through the steps took ~5 %
        less CPU than a subquery read in each), then one SELECT per bisection step, each
        reading the cell the one before found."""
        score, cuts = class_columns(SCORE_PREFIX, classes), class_columns(CUTS_PREFIX, classes)
        index = [class_columns(f"{INDEX_PREFIX}{j}_", classes) for j in range(max(st.listed.steps for st in self.steps) + 1)]
        out = [[item for c, st in zip(own, self.steps)
                for item in ((index[0][c], st.listed.start(sql.col(score[c]))), (cuts[c], st.listed.lists["cuts"].copy()))]]
        for j in range(1, len(index)):
            out.append([(index[j][c], st.listed.step(sql.col(score[c]), sql.col(index[j - 1][c]), st.listed.steps - j,
                                                     sql.col(cuts[c])))
                        for c, st in zip(own, self.steps) if j <= st.listed.steps])
        return out

    # -- storage ------------------------------------------------------------------------
    def table(self):
        """:data:`PART`: ``class`` (position among the classes), ``position``,
        ``threshold`` (NULL for the last cell), ``p0``, ``p1``."""
        import pyarrow as pa
        rows: dict[str, list] = {"class": [], "position": [], "threshold": [], "p0": [], "p1": []}
        for c, st in zip([1] if len(self.steps) == 1 else range(len(self.steps)), self.steps):
            n = len(st.p0)
            rows["class"] += [c] * n
            rows["position"] += list(range(n))
            rows["threshold"] += [*st.thresholds, None]
            rows["p0"] += list(st.p0)
            rows["p1"] += list(st.p1)
        types = {"class": pa.int32(), "position": pa.int32(), "threshold": pa.float64(), "p0": pa.float64(),
                 "p1": pa.float64()}
        return pa.table({k: pa.array(v, types[k]) for k, v in rows.items()})

    @classmethod
    def from_table(cls, table) -> "VennAbers":
        """The calibrator :meth:`table` stored."""
        by_class: dict[int, list[dict]] = {}
        for r in table.to_pylist():
            by_class.setdefault(int(r["class"]), []).append(r)
        steps = []
        for c in sorted(by_class):
            rows = sorted(by_class[c], key=lambda r: r["position"])
            steps.append(Steps(tuple(float(r["threshold"]) for r in rows[:-1]), tuple(float(r["p0"]) for r in rows),
                               tuple(float(r["p1"]) for r in rows)))
        return cls(tuple(steps))

    def describe(self) -> dict:
        """JSON-ready: the distinct calibration scores per calibrated class."""
        return {"scores": [len(st.thresholds) for st in self.steps]}


def fit(con, work: str, K: int) -> VennAbers:
    """The steps of each calibrated class from the held-out rows in table ``work`` (its
    class index ``y`` and one-vs-rest scores ``s0``, ``s1``, …, as :func:`scores` orders
    them): one ``GROUP BY`` score per class, then :meth:`Steps.fit`."""
    steps = []
    for j, c in enumerate(VennAbers.calibrated(K)):
        s = sql.col(f"s{j}")
        positive = exp.Case(ifs=[exp.If(this=exp.EQ(this=sql.col("y"), expression=exp.Literal.number(c)),
                                        true=exp.Literal.number(1))], default=exp.Literal.number(0))
        q = (exp.select(s, exp.Count(this=exp.Star()), exp.Sum(this=positive)).from_(sql.table(work))
             .group_by(s.copy()).order_by(s.copy()))
        steps.append(Steps.fit(con.execute(sql.render(q)).fetchall()))
    return VennAbers(tuple(steps))


def width(classes: Sequence[Any]) -> exp.Expression:
    """A row's interval width: ``p1 − p0`` of the second class (two classes; the first
    class's is the same), else the mean over the classes."""
    p0, p1 = class_columns(P0_PREFIX, classes), class_columns(P1_PREFIX, classes)
    own = VennAbers.calibrated(len(classes))
    total = sql.add([sql.paren(exp.Sub(this=sql.col(p1[c]), expression=sql.col(p0[c]))) for c in own])
    return total if len(own) == 1 else exp.Div(this=sql.paren(total), expression=sql.dbl(float(len(own))))


def width_query(scored: exp.Select, label: str, classes: Sequence[Any]) -> exp.Select:
    """The mean interval :func:`width` over the rows of ``scored`` (a scoring SELECT with
    the probabilities and ``label``) that have a label and probabilities."""
    rows = exp.Subquery(this=scored, alias=exp.TableAlias(this=sql.ident("scored")))
    present = [exp.Not(this=exp.Is(this=sql.col(c), expression=exp.null()))
               for c in (label, class_columns("proba_", classes)[0])]
    return exp.select(exp.Avg(this=width(classes))).from_(rows).where(exp.and_(*present))
