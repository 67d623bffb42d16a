"""Averaged one-dependence estimators (``structure="aode"``) against a direct numpy
implementation of the formula of :mod:`sqlnb.models.naive_bayes.aode` (super-parents
restricted to values seen at least m times, NULL and unseen values marginalised, naive
Bayes when no super-parent is left), within 1e-9; m changed without the data; Gaussian
columns factor out as naive terms; update equals the refit; the exported SELECT in
SQLite, PostgreSQL and Spark within 1e-12 of DuckDB; row order; the command line."""

from __future__ import annotations

import re
from dataclasses import replace

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import aode
from support.cli import invoke
from support.discrete_oracle import Coded, assert_rows_keep_count_and_order, pseudo_counts, softmax
from support.history import module_at
from support.shared_data import require_shared_data
from support.structured import assert_engine_proba, class_scores, cli_files, fold_views, registered, sqlite_input

CLASSES = ["k0", "k1", "k2"]
DISCRETE = {"a": "categorical", "b": "categorical", "r": "categorical", "flag": "bernoulli"}


def aode_table(n: int, seed: int, unseen: bool = False) -> pa.Table:
    """Correlated discrete features with NULLs: ``a`` follows the class, ``b`` copies ``a``
    (an interaction naive Bayes double-counts), ``flag`` follows ``b``; ``r`` has a long
    tail of rare values (seen 1–6 times), so that m decides which rows have which
    super-parents; ``g`` is Gaussian. With ``unseen``, values never seen in training."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    a = np.where(rng.random(n) < 0.6, y, rng.integers(0, 4, n))
    b = np.where(rng.random(n) < 0.7, a, rng.integers(0, 4, n))
    flag = rng.random(n) < np.where(b == 0, 0.85, 0.2)
    common = rng.random(n) < 0.7
    r = np.where(common, (y + a) % 3, 3 + rng.integers(0, n // 15, n))  # tail values seen ~1-10 times
    g = rng.normal(y * 0.7, 1.0)

    def nulls(p=0.1):
        return rng.random(n) < p

    a_txt = np.array([f"a{v}" for v in a], dtype=object)
    if unseen:
        a_txt[rng.random(n) < 0.1] = "a_new"
    return pa.table({
        "rid": pa.array(np.arange(n), pa.int64()),
        "a": pa.array(a_txt.tolist(), pa.string(), mask=nulls()),
        "b": pa.array(b.astype(np.int64) * 10, pa.int64(), mask=nulls()),
        "r": pa.array([f"r{v}" for v in r], pa.string(), mask=nulls(0.15)),
        "flag": pa.array(flag, pa.bool_(), mask=nulls()),
        "g": pa.array(g, pa.float64(), mask=nulls()),
        "y": pa.array([CLASSES[v] for v in y], pa.string(), mask=nulls(0.03)),
    })


# -- the oracle --------------------------------------------------------------------------
def oracle(train: pa.Table, test: pa.Table, m: float = 1.0, alpha: float = 1.0, beta=None,
           estimator: str = "posterior-mean") -> np.ndarray:
    """Per-row joint log-likelihoods ln p(c, x) of AODE over ``DISCRETE``, from the rows."""
    a_, b1, b0 = pseudo_counts(alpha, beta, estimator)
    coded = Coded(train, DISCRETE, CLASSES)
    lab, values, X = coded.lab, coded.values, coded.X
    K = len(CLASSES)
    names = list(DISCRETE)

    def smoothed(n, f):  # the last axis is feature f's values
        tot = n.sum(-1, keepdims=True)
        if DISCRETE[f] == "bernoulli":
            return np.log(np.concatenate([n[..., :1] + b0, n[..., 1:] + b1], -1) / (tot + b1 + b0))
        return np.log((n + a_) / (tot + a_ * len(values[f])))

    single, nb = {}, {}
    for f in names:
        n = np.zeros((K, len(values[f])))
        for c, u in zip(lab, X[f]):
            if u >= 0:
                n[c, u] += 1
        single[f], nb[f] = n.sum(0), smoothed(n, f)
    cpt = {}
    for p in names:
        for q in names:
            if p != q:
                n = np.zeros((K, len(values[p]), len(values[q])))
                for c, u, v in zip(lab, X[p], X[q]):
                    if u >= 0 and v >= 0:
                        n[c, u, v] += 1
                cpt[p, q] = smoothed(n, q)
    prior, T = coded.log_prior(), coded.test_codes(test)
    out = np.zeros((test.num_rows, K))
    for row in range(test.num_rows):
        present = [f for f in names if T[f][row] >= 0]
        S = [i for i in present if single[i][T[i][row]] >= m]
        if not S:
            out[row] = prior + sum((nb[f][:, T[f][row]] for f in present), np.zeros(K))
            continue
        per_parent = []
        for i in S:
            u = T[i][row]
            per_parent.append(prior + nb[i][:, u] + sum((cpt[i, j][:, u, T[j][row]] for j in present if j != i),
                                                         np.zeros(K)))
        v = np.array(per_parent)
        top = v.max(0)
        out[row] = top + np.log(np.exp(v - top).sum(0)) - np.log(len(S))
    return out


def scored(model, data, con, what="jll") -> np.ndarray:
    return class_scores(model, data, con, what)


@pytest.fixture(scope="module")
def data():
    return registered(aode_table(600, 1), aode_table(250, 2, unseen=True))


def fit(con, source="train", **params):
    return sqlnb.fit(source, label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE,
                     structure="aode", **params)


# -- the estimator -----------------------------------------------------------------------
@pytest.mark.parametrize("params", [{}, {"aode_min_count": 3}, {"aode_min_count": 30, "alpha": 0.5, "beta": (2.0, 1.0)},
                                    {"aode_min_count": 1e9}, {"alpha": 3.0, "estimator": "map"}])
def test_aode_equals_numpy_with_nulls_rare_and_unseen_values(data, params):
    con, train, test = data
    model = fit(con, **params)
    want = oracle(train, test, m=params.get("aode_min_count", 1.0), alpha=params.get("alpha", 1.0),
                  beta=params.get("beta"), estimator=params.get("estimator", "posterior-mean"))
    np.testing.assert_allclose(scored(model, "test", con), want, rtol=0, atol=1e-9)
    np.testing.assert_allclose(scored(model, "test", con, "proba"), softmax(want), rtol=0, atol=1e-9)


def test_the_data_exercises_every_case(data):
    """Rows with every super-parent, with some left out by m, and with none (naive Bayes)."""
    _, train, test = data
    full, m3, never = oracle(train, test), oracle(train, test, m=3), oracle(train, test, m=1e9)
    assert np.abs(full - m3).max() > 1e-3 and np.abs(full - never).max() > 1e-3
    assert (np.abs(full - m3).max(1) < 1e-12).sum() > 10  # rows whose rare value m does not touch


def test_min_count_changes_without_the_data(data):
    con, _, test = data
    m1 = fit(con)
    np.testing.assert_allclose(scored(m1.with_params(aode_min_count=3), "test", con),
                               scored(fit(con, aode_min_count=3), "test", con), rtol=0, atol=1e-12)
    # a naive fit has no pair counts; a TAN fit has them, and becomes AODE without a scan
    tan = sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure="tan")
    np.testing.assert_allclose(scored(tan.with_params(structure="aode"), "test", con), scored(m1, "test", con),
                               rtol=0, atol=1e-12)
    with pytest.raises(SqlnbError, match="pair counts"):
        sqlnb.fit("train", label="y", con=con, features=list(DISCRETE)).with_params(structure="aode")
    with pytest.raises(SqlnbError, match="aode_min_count"):
        m1.with_params(aode_min_count=-1)


def test_gaussian_columns_enter_every_super_parent_as_their_naive_term(data):
    con, _, _ = data
    kinds = {**DISCRETE, "g": "gaussian"}
    both = {s: sqlnb.fit("train", label="y", con=con, features=list(kinds), feature_kinds=kinds, structure=s)
            for s in ("aode", "naive")}
    without = {s: sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE,
                            structure=s) for s in ("aode", "naive")}
    g_term_aode = scored(both["aode"], "test", con) - scored(without["aode"], "test", con)
    g_term_naive = scored(both["naive"], "test", con) - scored(without["naive"], "test", con)
    assert np.abs(g_term_naive).max() > 0.1
    np.testing.assert_allclose(g_term_aode, g_term_naive, rtol=0, atol=1e-9)


# -- update, storage, order --------------------------------------------------------------
def test_update_over_batches_equals_refit(data, tmp_path):
    con, train, _ = data
    kinds = {**DISCRETE, "g": "gaussian"}
    for i, (lo, hi) in enumerate([(0, 200), (200, 420), (420, train.num_rows)]):
        con.register(f"batch{i}", train.slice(lo, hi - lo))
    opts = dict(label="y", con=con, features=list(kinds), feature_kinds=kinds, structure="aode", aode_min_count=3)
    model = sqlnb.fit("batch0", **opts)
    for i in (1, 2):  # later batches bring rare values the first never saw
        model = sqlnb.update(model, f"batch{i}", con=con)
    refit = sqlnb.fit("train", **opts)
    np.testing.assert_allclose(scored(model, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)
    path = str(tmp_path / "m.duckdb")
    model.save(path, "aode")
    loaded = sqlnb.load(path, "aode")
    assert loaded.hyper.structure == "aode" and loaded.hyper.aode_min_count == 3
    np.testing.assert_allclose(scored(loaded, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)


def test_rows_keep_count_and_order(data):
    con, _, test = data
    assert_rows_keep_count_and_order(fit(con), test, con)


def test_refusals(data):
    con, _, _ = data
    with pytest.raises(SqlnbError, match="unseen"):
        fit(con, unseen="bucket")
    with pytest.raises(SqlnbError, match="not a sum of per-feature terms"):
        fit(con).feature_terms()


# -- other dialects ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def small():
    """Smaller than the module's data, for the other engines: outside DuckDB each table
    cell is a CASE branch (Spark generates code for every one, and SQLite's flattener
    evaluates the class scores once per later use)."""
    return registered(aode_table(120, 7), aode_table(40, 8, unseen=True))


def test_export_runs_in_sqlite(small):
    con, train, test = small
    kinds = {**DISCRETE, "g": "gaussian"}
    model = sqlnb.fit("train", label="y", con=con, features=list(kinds), feature_kinds=kinds, structure="aode",
                      aode_min_count=3)
    lite = sqlite_input(test)
    query = model.to_sql("sqlite", source="input", outputs=("jll", "proba"), key="rid")
    cur = lite.execute(query)
    names = [d[0] for d in cur.description]  # the source's columns unknown: helper columns stay
    rows = cur.fetchall()
    assert [r[names.index("rid")] for r in rows] == test["rid"].to_pylist()
    for what in ("jll", "proba"):
        got = np.array([[r[names.index(f"{what}_{c}")] for c in CLASSES] for r in rows], dtype=float)
        np.testing.assert_allclose(got, scored(model, "test", con, what), rtol=0, atol=1e-12)


def _engine_check(engine, want):
    fitted = fit(engine, aode_min_count=3)
    assert_engine_proba(fitted.score("test", con=engine, outputs=("proba",), key="rid"), want, CLASSES, 1e-12)


@pytest.mark.postgres
def test_fit_and_score_in_postgres(small):
    from support.engines import postgres_engine
    con, train, test = small
    want = scored(fit(con, aode_min_count=3), "test", con, "proba")
    with postgres_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, want)


@pytest.mark.spark  # starts a Spark session
def test_fit_and_score_in_spark(small):
    from support.engines import spark_engine
    con, train, test = small
    want = scored(fit(con, aode_min_count=3), "test", con, "proba")
    with spark_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, want)


# -- workflows and the command line ------------------------------------------------------
def test_cross_validation_and_grid_over_min_count_equal_fold_by_fold_fits(data):
    """``cross_validate(grid=...)`` over structure and m: each fold's AODE model (the other
    folds' pair counts merged) scores the held-out fold as an AODE fit on those folds, fold
    by fold."""
    con, _, _ = data
    grid = [{"structure": "naive"}, {"structure": "aode"}, {"structure": "aode", "aode_min_count": 30}]
    r = sqlnb.cross_validate("train", "y", con=con, folds=3, key=["rid"], grid=grid, features=list(DISCRETE),
                             feature_kinds=DISCRETE)
    for i, (fit_i, held_i) in enumerate(fold_views(con)):
        for g, point in enumerate(grid):
            m = sqlnb.fit(fit_i, label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, **point)
            rows = m.score(held_i, con=con, outputs=("proba", "prediction"), keep=["y"]).fetchall()
            accuracy = sum(row[0] == row[-1] for row in rows) / len(rows)
            loss = -np.mean([np.log(row[1 + CLASSES.index(row[0])]) for row in rows])
            assert abs(r.results[g]["accuracy"][i] - accuracy) < 1e-12
            assert abs(r.results[g]["log_loss"][i] - loss) < 1e-9
    # AODE's fold models are scored fold by fold (its lists of cells, pooled for every fold
    # model in one query, ran out of memory on 57 columns); without AODE one pooled scan
    assert r.scans["scoring"] == 3 * len(grid)
    assert sqlnb.cross_validate("train", "y", con=con, folds=3, key=["rid"], grid=[{"structure": "tan"}, {"structure": "naive"}],
                                features=list(DISCRETE), feature_kinds=DISCRETE).scans["scoring"] == 1
    averaged = sqlnb.cross_validate("train", "y", con=con, folds=3, key=["rid"], features=list(DISCRETE),
                                    feature_kinds=DISCRETE, structure="tan+aode")
    assert averaged.scans["scoring"] == 3


def test_wrapper_selection_runs_and_its_model_is_the_refit(data):
    con, _, _ = data
    result = sqlnb.select_features("train", "y", con=con, direction="backward", folds=3, features=list(DISCRETE),
                                   feature_kinds=DISCRETE, structure="aode")
    chosen = result.features
    assert chosen and result.model.hyper.structure == "aode" and result.model.feature_names == chosen
    refit = sqlnb.fit("train", label="y", con=con, features=chosen,
                      feature_kinds={k: v for k, v in DISCRETE.items() if k in chosen}, structure="aode")
    np.testing.assert_allclose(scored(result.model, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)


def test_cli_fit_score_show_report_update_and_explain(tmp_path):
    import pyarrow.parquet as pq
    train = aode_table(400, 5)
    db, args = cli_files(tmp_path, train, DISCRETE, split=200)
    args += ["--structure", "aode", "--aode-min-count", "2"]
    for src, name in (("a", "m"), ("all", "all")):
        r = invoke("fit", tmp_path / f"{src}.parquet", *args, "--model", f"{db}:{name}")
        assert r.exit_code == 0, r.stderr
    r = invoke("update", "--model", f"{db}:m", tmp_path / "b.parquet")
    assert r.exit_code == 0, r.stderr
    for extra in ([], ["--params"], ["--params", "--format", "json"]):
        r = invoke("show", "--model", f"{db}:m", *extra)
        assert r.exit_code == 0, r.stderr
        assert "aode" in r.stdout
    r = invoke("score", tmp_path / "all.parquet", "--model", f"{db}:m", "--out", tmp_path / "s.parquet")
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(tmp_path / "s.parquet").num_rows == train.num_rows
    r = invoke("report", tmp_path / "all.parquet", "--model", f"{db}:m", "--out", tmp_path / "r.html")
    assert r.exit_code == 0, r.stderr
    assert "aode" in (tmp_path / "r.html").read_text()
    r = invoke("score", tmp_path / "all.parquet", "--model", f"{db}:m", "--explain", "2", "--out", tmp_path / "e.parquet")
    assert r.exit_code != 0 and "not a sum of per-feature terms" in r.stderr
    m, full = sqlnb.load(db, "m"), sqlnb.load(db, "all")
    assert m.hyper.aode_min_count == 2
    con = duckdb.connect()
    con.register("t", train)
    np.testing.assert_allclose(scored(m, "t", con), scored(full, "t", con), rtol=0, atol=1e-9)


def test_the_shifted_sum_is_exact_and_too_wide_a_span_is_refused(data, monkeypatch):
    """The per-class shift s_c (0 while every exponent is within ±EXP_SAFE) leaves the
    scores unchanged when it is not 0, and a span past 2·EXP_SAFE is refused at fit."""
    from sqlnb.models.naive_bayes import aode
    con, train, test = data
    model = fit(con, aode_min_count=3)
    a = model._aode
    names = [f.name for f in a.features]
    tops = [max(sum(max(0.0, float(np.max(a.ratio[(i, j)][k]))) for j in names if j != i) for i in names)
            for k in range(len(CLASSES))]
    bottoms = [min(sum(min(0.0, float(np.min(a.ratio[(i, j)][k]))) for j in names if j != i) for i in names)
               for k in range(len(CLASSES))]
    assert not a.shift.any()
    span = max(t - b for t, b in zip(tops, bottoms))
    monkeypatch.setattr(aode, "EXP_SAFE", 0.6 * span)
    shifted = model.with_params(alpha=1.0)  # derived afresh under the patched limit
    assert shifted._aode.shift.any()
    want = oracle(train, test, m=3)
    np.testing.assert_allclose(scored(shifted, "test", con), want, rtol=0, atol=1e-9)
    monkeypatch.setattr(aode, "EXP_SAFE", 0.4 * span)
    with pytest.raises(SqlnbError, match="log-sum-exp"):
        model.with_params(alpha=1.0)


# --------------------------------------------------------------------------------------------
# AODE's DuckDB scoring SELECT, kept small for its scoring time: each ratio table
# is read at a padded position (never NULL, so no COALESCE per read), the reads are summed as
# balanced trees (so the expressions' depth, which DuckDB's common-subexpression pass pays
# for with every subtree, grows as log F, not F), and the probabilities are the formula's in
# every case the fast form treats apart: the shift s_c not 0, a −inf cell (MLE), no
# super-parent left, missing and unseen values; row count and order kept.
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# AODE's DuckDB scoring SELECT reads its tables from a prelude: each class's ratio tables
# (every super-parent's, one list) are prelude columns written once, and each of the
# K·F(F−1) reads is ``list_extract(table_c, row_i + slot_j)`` of prelude columns
# (:func:`sqlnb.models.naive_bayes.aode.prelude`). At commit 6a739ab every read held a
# literal of its own (i, j) table: spambase's 57 MDL-binned columns made a 2.4 MB SELECT of 6,840
# ``string_split`` literals, which DuckDB bound and folded one by one.
#
# The scores are 6a739ab's bit for bit: its ``aode.py`` is read from git (``git show``) and
# put in place of this checkout's DuckDB form (prelude, reads, categorical naive terms), so
# the same model scores the same rows both ways. Rows keep their count and order, with a
# lookup join (a categorical column past ``INLINE_MAX`` values) in the SELECT too.
# --------------------------------------------------------------------------------------------


START = "6a739ab"


@pytest.fixture(scope="module")
def before(tmp_path_factory):
    """6a739ab's aode.py as a module of its own."""
    with module_at(START, "sqlnb/models/naive_bayes/aode.py", tmp_path_factory.mktemp("before")) as module:
        yield module


def as_before(monkeypatch, old) -> None:
    """This checkout's DuckDB AODE form replaced by 6a739ab's: its padded positions as the
    prelude's columns (named as there), its reads of one literal per table, its naive terms."""
    prefix = "sqlnb_aode_position"

    def at(net):
        return {f.name: sql.col(f"{prefix}{i}", "src") for i, f in enumerate(net.features)}

    monkeypatch.setattr(aode, "prelude", lambda net, *args: [
        (f"{prefix}{i}", e) for i, e in enumerate(old.padded_positions(net, *args).values())])
    monkeypatch.setattr(aode, "padded_terms", lambda net: old.padded_terms(net, at(net)))
    monkeypatch.setattr(aode, "padded_naive", lambda net, name, log_prob: old.padded_naive(log_prob, at(net)[name]))


def scores(model, source: str, con, outputs=("jll", "proba", "prediction")) -> list[tuple]:
    return model.score(source, con=con, outputs=outputs, keep=["rid"]).fetchall()


def assert_bit_identical(got: list[tuple], want: list[tuple]) -> None:
    assert len(got) == len(want) and [r[0] for r in got] == [r[0] for r in want]
    g, w = np.array([r[1:-1] for r in got], dtype=float), np.array([r[1:-1] for r in want], dtype=float)
    assert np.array_equal(g.view(np.int64), w.view(np.int64)), np.nanmax(np.abs(g - w))
    assert [r[-1] for r in got] == [r[-1] for r in want]


@pytest.fixture(scope="module")
def small_binned():
    """test_aode.py's rows (categorical, Bernoulli, rare values, Gaussian, NULLs, unseen
    values) with a binned column and a categorical one of 150 values (a lookup join)."""
    con = duckdb.connect()
    tables = []
    for n, seed, unseen in ((600, 1, False), (250, 2, True)):
        t = aode_table(n, seed, unseen)
        rng = np.random.default_rng(seed + 10)
        t = t.append_column("x", pa.array(rng.normal(size=n), mask=rng.random(n) < 0.1))
        t = t.append_column("big", pa.array([f"v{v}" for v in rng.integers(0, 150, n)], pa.string()))
        tables.append(t)
    con.register("train", tables[0])
    con.register("test", tables[1])
    order = np.random.default_rng(4).permutation(tables[1].num_rows)
    con.register("shuffled", tables[1].take(order))
    kinds = {"a": "categorical", "b": "categorical", "r": "categorical", "flag": "bernoulli", "x": "binned",
             "big": "categorical"}
    return con, kinds, tables[1]["rid"].take(order).to_pylist()


@pytest.mark.parametrize("params", [{}, {"aode_min_count": 1e9}, {"estimator": "mle"}, {"shift": (3.5, -2.0, 1.0)}])
def test_scores_are_6a739abs_bit_for_bit(small_binned, before, monkeypatch, params):
    """Every branch of the term: shift 0 with no −inf cell (the CASE-free form), no
    super-parent left, −inf cells (MLE), a non-zero shift (set on the derived model)."""
    con, kinds, _ = small_binned
    params = dict(params)
    shift = params.pop("shift", None)
    model = sqlnb.fit("train", label="y", con=con, feature_kinds={**kinds, "g": "gaussian"}, features=[*kinds, "g"],
                      bins="quantile:4",
                      structure="aode", **params)
    if shift is not None:
        model._aode = replace(model._aode, shift=np.array(shift))
    assert {f.name for f in model._aode.features} == {"a", "b", "r", "flag", "x"}
    assert "JOIN" in model.to_sql("duckdb", source="test", con=con, pretty=False).upper()  # big's lookup
    got = scores(model, "test", con)
    as_before(monkeypatch, before)
    want = scores(model, "test", con)
    monkeypatch.undo()
    assert_bit_identical(got, want)
    assert [r[0] for r in got] == list(range(250))


def test_padded_scoring_keeps_rows_count_and_order(small_binned):
    con, kinds, order = small_binned
    model = sqlnb.fit("train", label="y", con=con, feature_kinds=kinds, features=list(kinds), bins="quantile:4",
                      structure="aode")
    assert [r[0] for r in scores(model, "shuffled", con, ("proba",))] == order


@pytest.fixture(scope="module")
def spambase():
    """spambase's 57 numeric columns (MDL bins, all of them AODE features), fitted on every
    row; the model scores every fifth row."""
    path = require_shared_data("spambase") / "spambase" / "spambase.data"
    con = duckdb.connect()
    cols = {f"x{i:02d}": "DOUBLE" for i in range(57)} | {"spam": "BIGINT"}
    con.execute(f"CREATE TABLE raw AS SELECT row_number() OVER () - 1 AS rid, * FROM read_csv("
                f"'{path}', header = false, columns = {cols})")
    con.execute("CREATE VIEW train AS SELECT * EXCLUDE (rid) FROM raw")
    con.execute("CREATE VIEW test AS SELECT * EXCLUDE (spam) FROM raw WHERE rid % 5 = 0")
    model = sqlnb.fit("train", label="spam", con=con, bins="mdl", structure="aode")
    assert len(model._aode.features) == 57
    return con, model


def test_spambase_select_is_smaller_and_writes_each_table_once(spambase, monkeypatch):
    """6a739ab: 2.43 MB and 6,840 ``string_split`` literals (one per read); in the form of
    one read per pair (``aode.READ_MAX`` set past 57) 1.81 MB, of which 1.17 MB are the
    two classes' tables (each cell's shortest exact text), and the two lists alone, with
    the eligibility list and each binned column's naive row per class (its naive term read
    at its slot). By default, past READ_MAX features, a class's sum over the super-parents
    is one expression of fixed size (a ``list_sum`` inside a lambda over their rows), the
    naive terms read at the slots one ``list_sum`` per class and |S| one in the prelude
    (before: a ``list_sum`` per super-parent and class): the SELECT without its literals
    is under a seventh of that."""
    con, model = spambase
    monkeypatch.setattr(aode, "READ_MAX", 10**6)
    text = model.to_sql("duckdb", source="test", con=con, pretty=False)
    assert len(text) < 2_000_000, len(text)
    assert len(re.findall(r"STRING_SPLIT\(", text, flags=re.I)) == len(model.classes) + 1 + 57 * 2
    reads = len(re.findall(r"LIST_EXTRACT\(", text, flags=re.I))
    # per class every (i, j), ok_i in |S| (written 3 times) and part i, and each naive term
    assert reads == 2 * 57 * 56 + 57 * 4 * 2 + 57 * 2
    assert len(re.sub(r"'[^']*'", "''", text)) < 700_000  # the SELECT without its literals (6a739ab: 0.92 MB)
    monkeypatch.undo()
    listed = model.to_sql("duckdb", source="test", con=con, pretty=False)
    assert len(listed) < 2_000_000, len(listed)
    assert len(re.findall(r"LIST_SUM\(", listed, flags=re.I)) == 2 * 2 + 1
    assert len(re.sub(r"'[^']*'", "''", listed)) < 100_000  # 77 kB when written


def test_spambase_scores_are_6a739abs_bit_for_bit(spambase, before, monkeypatch):
    """On the first 28 columns: 6a739ab's form takes ~4 s of CPU to plan at all 57 (whose
    4,601 rows' jll and proba were compared bit for bit when the prelude was measured). The
    form of one read per pair (``aode.READ_MAX`` set past 28) bit for bit; the default one,
    a ``list_sum`` per super-parent (summed left to right, not as a balanced tree), within
    1e-12 and with the same predictions."""
    con, _ = spambase
    model = sqlnb.fit("train", label="spam", con=con, bins="mdl", structure="aode",
                      features=[f"x{i:02d}" for i in range(28)])
    assert len(model._aode.features) == 28
    listed = scores(model, "test", con)
    monkeypatch.setattr(aode, "READ_MAX", 10**6)
    got = scores(model, "test", con)
    as_before(monkeypatch, before)
    want = scores(model, "test", con)
    monkeypatch.undo()
    assert_bit_identical(got, want)
    assert [r[0] for r in got] == list(range(0, 4601, 5))
    assert [r[0] for r in listed] == [r[0] for r in want] and [r[-1] for r in listed] == [r[-1] for r in want]
    np.testing.assert_allclose(np.array([r[1:-1] for r in listed], dtype=float),
                               np.array([r[1:-1] for r in want], dtype=float), rtol=0, atol=1e-12)


# --------------------------------------------------------------------------------------------
# AODE's two term builders (DuckDB's padded form, :func:`aode.padded_terms`, and the
# portable one, :func:`aode.terms`) share one skeleton (:func:`aode._averaged`).
# Folding them into it changed no SQL: the portable form renders byte for byte what 1de9335's ``aode.py``
# renders for the same derived model, in every branch of the skeleton (shift 0 with no −inf
# cell: DuckDB's CASE-free form; a −inf cell, MLE; a non-zero shift, set on the derived model).
# (DuckDB's padded form, which reads its tables from the prelude, is checked above: its
# scores bit for bit against 6a739ab's.)
#
# The expected text is computed, not stored: 1de9335's ``aode.py`` is read from git
# (``git show``) and run against this checkout's package (the two modules build from the
# same :mod:`sqlnb.sql` helpers, so the comparison pins aode.py's own tree-building only).
# The portable form renders to ~40–70 kB here, too much to keep in a test file.
# --------------------------------------------------------------------------------------------


FOLD_START = "1de9335010b9f9ae1fc660d456a64ff8ff8ad982"


@pytest.fixture(scope="module")
def before_fold(tmp_path_factory):
    """1de9335's aode.py as a module of its own."""
    with module_at(FOLD_START, "sqlnb/models/naive_bayes/aode.py", tmp_path_factory.mktemp("before_fold")) as module:
        yield module


def table() -> pa.Table:
    """A categorical, a Bernoulli and a (quantile-)binned column, two classes."""
    rng = np.random.default_rng(3)
    n = 40
    y = rng.integers(0, 2, n)
    a = np.where(rng.random(n) < 0.7, y, rng.integers(0, 3, n))
    return pa.table({"a": pa.array([f"a{v}" for v in a]), "flag": pa.array(rng.random(n) < 0.3 + 0.4 * y),
                     "x": pa.array(rng.normal(y, 1.0)), "y": pa.array([f"k{v}" for v in y])})


def rendered(module, model, net) -> str:
    """The portable form rendered for PostgreSQL."""
    portable = module.terms(net, model._scoring_features(None), model.stats, "postgres", None)
    return sql.render(exp.select(*portable), "postgres")


@pytest.mark.parametrize("estimator", ["posterior-mean", "mle"])
@pytest.mark.parametrize("shift", [None, (3.5, -2.0)])
def test_both_forms_render_as_before_the_fold(before_fold, estimator, shift):
    con = duckdb.connect()
    con.register("t", table())
    model = sqlnb.fit("t", label="y", con=con, structure="aode", bins="quantile:3", estimator=estimator)
    net = model._aode
    assert net.log_shifted == (estimator == "mle")  # both branches of the −inf guard are covered
    if shift is not None:
        net = replace(net, shift=np.array(shift))
    got, want = rendered(aode, model, net), rendered(before_fold, model, net)
    if got != want:  # the first difference, not pytest's diff of ~50 kB lines
        at = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
        pytest.fail(f"portable (PostgreSQL) SQL differs from {FOLD_START[:7]}'s at character {at}: "
                    f"{got[max(0, at - 60):at + 60]!r} against {want[max(0, at - 60):at + 60]!r}")
    # the branches are what the parameters say: DuckDB's CASE-free form only at shift 0, no −inf
    padded = sql.render(exp.select(*aode.padded_terms(net)), "duckdb")
    assert ("CASE" in padded) == (shift is not None or estimator == "mle")
