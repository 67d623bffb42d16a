"""AODE's DuckDB scoring SELECT (issue 30, acceptance 4: its scoring time): each ratio table
is read at a padded position (never NULL, so no COALESCE per read), the reads are summed as
balanced trees (so the expressions' depth, which DuckDB's common-subexpression pass pays
for with every subtree, grows as log F, not F), and the probabilities are the formula's in
every case the fast form treats apart: the shift s_c not 0, a −inf cell (MLE), no
super-parent left, missing and unseen values; row count and order kept."""

from __future__ import annotations

import re

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from test_aode import CLASSES, aode_table, fit, oracle, scored, softmax


@pytest.fixture(scope="module")
def data():
    con = duckdb.connect()
    train, test = aode_table(600, 1), aode_table(250, 2, unseen=True)  # test_aode.py's rows
    con.register("train", train)
    con.register("test", test)
    return con, train, test


def wide_table(n: int, width: int, seed: int) -> pa.Table:
    """``width`` categorical columns of 2–5 values, each from the label or the previous
    column, with NULLs."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    cols, prev = {}, y
    for j in range(width):
        v = 2 + j % 4
        x = np.where(rng.random(n) < 0.4, prev % v, rng.integers(0, v, n))
        cols[f"c{j}"] = pa.array([f"v{a}" for a in x], pa.string(), mask=rng.random(n) < 0.05)
        prev = x
    cols["y"] = pa.array([f"k{a}" for a in y], pa.string())
    return pa.table(cols)


def depth(e) -> int:
    return 1 + max((depth(c) for c in e.iter_expressions()), default=0)


def test_duckdb_reads_every_table_without_a_coalesce(data):
    """A missing or unseen value reads a 0 its table holds (position n_i), not a NULL made 0
    per read: on 9b1aee6 each of the K·F(F−1) reads was ``COALESCE(LIST_EXTRACT(…), 0)``."""
    con, _, _ = data
    query = fit(con, aode_min_count=3).to_sql("duckdb", source="test", con=con, pretty=False)
    reads = len(re.findall(r"LIST_EXTRACT\(", query, flags=re.I))
    assert reads >= len(CLASSES) * 4 * 3  # K classes × F(F−1) ordered pairs of the 4 discrete features
    assert not re.search(r"COALESCE\(\s*LIST_EXTRACT", query, flags=re.I)


def test_the_average_nests_as_log_f_not_f():
    """AODE's term of a class score was a chain of F−1 reads inside a chain of F parts: on
    9b1aee6 its depth was 26 at 6 columns and 38 at 12 (2 levels per column; 62 at 24);
    summed as balanced trees it grows by 2 levels per doubling (26, 30; 34 at 24)."""
    depths = {}
    for width in (6, 12):
        con = duckdb.connect()
        con.register("wide", wide_table(150, width, 5))
        model = sqlnb.fit("wide", label="y", con=con, structure="aode")
        depths[width] = max(depth(s.terms[-1]) for s in model.class_terms(None, "duckdb"))
        rel = model.score("wide", con=con, outputs=("proba",))
        proba = np.array(rel.select(*[c for c in rel.columns if c.startswith("proba_")]).fetchall(), dtype=float)
        assert proba.shape == (150, 2)
        np.testing.assert_allclose(proba.sum(1), 1.0, rtol=0, atol=1e-12)
    assert depths[12] - depths[6] <= 4 and depths[12] <= 32, depths


@pytest.mark.parametrize("params", [{"aode_min_count": 3}, {"aode_min_count": 1e9}, {"estimator": "mle"}])
def test_duckdb_scores_equal_numpy(data, params):
    """The fast form (no CASE: LN(Σ + z) − LN(|S| + z)) when the shift is 0 and no cell is
    −inf; the CASE form when a cell is −inf (MLE); naive Bayes when no super-parent is left."""
    con, train, test = data
    model = fit(con, **params)
    assert model._aode.log_shifted == (params.get("estimator") == "mle")
    want = oracle(train, test, m=params.get("aode_min_count", 1.0), estimator=params.get("estimator", "posterior-mean"))
    got = scored(model, "test", con)
    known = np.isfinite(want)  # the oracle writes 0·ln 0 as NaN (it has no −inf cells)
    np.testing.assert_allclose(got[known], want[known], rtol=0, atol=1e-9)
    assert not np.isnan(got).any() and (params.get("estimator") != "mle" or np.isneginf(got).any())
    finite = np.isfinite(want).all(1)
    np.testing.assert_allclose(scored(model, "test", con, "proba")[finite], softmax(want[finite]), rtol=0, atol=1e-9)


def test_a_shift_keeps_the_scores_and_the_rows(data, monkeypatch):
    """With s_c ≠ 0 (the CASE form) the scores are unchanged; one row out per row in, in order."""
    from sqlnb.models.naive_bayes import aode
    con, train, test = data
    a = fit(con, aode_min_count=3)._aode
    names = [f.name for f in a.features]
    span = max(max(sum(max(0.0, float(np.max(a.ratio[(i, j)][k]))) for j in names if j != i) for i in names)
               - min(sum(min(0.0, float(np.min(a.ratio[(i, j)][k]))) for j in names if j != i) for i in names)
               for k in range(len(CLASSES)))
    monkeypatch.setattr(aode, "EXP_SAFE", 0.6 * span)
    shifted = fit(con, aode_min_count=3)
    assert shifted._aode.shift.any()
    np.testing.assert_allclose(scored(shifted, "test", con), oracle(train, test, m=3), rtol=0, atol=1e-9)
    order = np.random.default_rng(4).permutation(test.num_rows)
    con.register("shuffled", test.take(order))
    rows = shifted.score("shuffled", con=con, outputs=("proba",), keep=["rid"]).fetchall()
    assert [r[0] for r in rows] == test["rid"].take(order).to_pylist()


def test_the_benchmark_runs_at_a_tiny_size(tmp_path, capsys):
    """benchmarks/aode_adult.py ``scale`` (rows generated once into ``--data``, then read
    back) and ``wide``: one table row per structure."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import aode_adult
    data = str(tmp_path / "rows.duckdb")
    aode_adult.run_scale(2000, 1, data)
    aode_adult.run_scale(2000, 1, data)  # read back, not generated again
    aode_adult.run_wide(5, 300, 1)
    out = capsys.readouterr().out
    for structure in ("naive", "tan", "aode", "kdb:2"):
        assert out.count(f"| {structure} |") == (3 if structure != "kdb:2" else 2), out
    with pytest.raises(SystemExit, match="2,000 rows, not --rows 3,000"):
        aode_adult.run_scale(3000, 1, data)

