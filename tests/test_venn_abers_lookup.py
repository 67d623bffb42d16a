"""DuckDB's listed lookup of the Venn–Abers steps (:class:`sqlnb.models.venn_abers.Lookup`):
the cell it finds for a score at, just below and just above every threshold, at ±inf,
NaN and NULL equals Python's bisection of the thresholds (``p0`` at and above a
threshold, ``p1`` at and below it), bound as parameters and exported as literals; and the
scoring SELECT's text stays the same size however many steps there are (the steps are
bound lists, not a CASE per step).

The oracle is :func:`numpy.searchsorted` on the thresholds, ``side="right"`` for ``p0`` and
``side="left"`` for ``p1`` (module docstring of :mod:`sqlnb.models.venn_abers`).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sqlglot import exp

from sqlnb import sql
from sqlnb.models.venn_abers import Steps, VennAbers


def _steps(k: int, seed: int, spread: str = "normal") -> Steps:
    """Steps fitted on ``k`` distinct scores with random rows and positives per score."""
    rng = np.random.default_rng(seed)
    if spread == "normal":
        t = np.unique(rng.standard_t(3, k) * 5)
    else:  # clusters far apart, tight inside: cells of very different widths
        t = np.unique(np.concatenate([rng.normal(c, 1e-9, k // 4) for c in (-1e3, 0.0, 1e-6, 7.5)]))
    n = rng.integers(1, 4, len(t))
    pos = rng.binomial(n, 1 / (1 + np.exp(-np.clip(t, -30, 30))))
    return Steps.fit([(float(a), int(b), int(c)) for a, b, c in zip(t, n, pos)])


def _probes(st: Steps) -> list[float | None]:
    """Every threshold, its neighbours on both sides, far outside, ±inf, NaN and NULL."""
    t = np.array(st.thresholds)
    near = np.concatenate([t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf)])
    return [*map(float, near), -1e300, 1e300, float("inf"), float("-inf"), float("nan"), None]


def _lookup_select(st: Steps) -> exp.Select:
    """``p0`` and ``p1`` of column ``s`` of table ``v`` by the listed lookup, as the scoring
    SELECT's stages nest them (one SELECT per bisection step)."""
    stages = VennAbers((st,)).stages([sql.col("b0"), sql.col("b1")], ["a", "b"])  # DuckDB's, the default
    inner = exp.select(exp.Star(), exp.alias_(exp.Literal.number(0), "b0"), exp.alias_(sql.col("s"), "b1")
                       ).from_(sql.table("v"))
    for cols in stages[:-1]:  # the class scores (the last stage) are not needed here
        dropped = [sql.col(n) for n, e in cols if e is None]  # (name, None): leave out column name
        inner = exp.select(exp.Star(except_=dropped or None),
                           *[exp.alias_(e, n, quoted=True) for n, e in cols if e is not None]).from_(
            exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("q"))))
    return exp.select(sql.col("s"), sql.col("va_p0_b"), sql.col("va_p1_b")).from_(
        exp.Subquery(this=inner, alias=exp.TableAlias(this=sql.ident("q"))))


@pytest.mark.parametrize("k, seed, spread", [(0, 0, "normal"), (1, 1, "normal"), (7, 2, "normal"),
                                             (3000, 3, "normal"), (2000, 4, "clusters")])
def test_listed_lookup_finds_the_exact_step_at_every_threshold(k, seed, spread):
    """Bound (as ``sqlnb score`` runs it) and exported (list literals, a new connection
    without the model's tables): the same cells as Python's bisection, ties included."""
    st = _steps(k, seed, spread) if k else Steps.fit([])
    probes = _probes(st)
    q = _lookup_select(st)
    t = np.array(st.thresholds)
    for bound in (True, False):
        con = duckdb.connect()
        con.register("v", pa.table({"s": pa.array(probes, pa.float64())}))
        if bound:
            text, params = sql.render_bound(q)
            assert params, "the lists are bound parameters"
            got = con.sql(text, params=params).fetchall()
        else:
            got = con.sql(sql.render(q)).fetchall()
        assert len(got) == len(probes)
        for v, (s, p0, p1) in zip(probes, got):
            if v is None or v != v:
                assert p0 is None and p1 is None, (v, p0, p1)
            else:
                assert s == v
                want = (st.p0[np.searchsorted(t, v, side="right")], st.p1[np.searchsorted(t, v, side="left")])
                assert (p0, p1) == want, (v, p0, p1, want)


def test_scoring_sql_does_not_grow_with_the_steps():
    """The text DuckDB runs holds no threshold: 100 and 30,000 distinct held-out scores give
    SELECTs of about the same size (a few more bisection steps), where one CASE per step
    grew with their number (~60 bytes a threshold)."""
    sizes, bound = {}, {}
    for k in (100, 30_000):
        text, params = sql.render_bound(_lookup_select(_steps(k, k, "normal")))
        sizes[k], bound[k] = len(text), sum(len(v) for v in params.values())
    assert sizes[30_000] < 2 * sizes[100] < 20_000, sizes
    assert all(bound[k] > k / 2 for k in bound), bound  # the cuts and their values are bound
