"""Averaged one-dependence estimators (``structure="aode"``, issue 30) against a direct numpy
implementation of the formula of :mod:`sqlnb.models.naive_bayes.aode` (super-parents
restricted to values seen at least m times, NULL and unseen values marginalised, naive
Bayes when no super-parent is left), within 1e-9; m changed without the data; Gaussian
columns factor out as naive terms; update equals the refit; the exported SELECT in
SQLite, PostgreSQL and Spark within 1e-12 of DuckDB; row order; the command line."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from support.cli import invoke
from support.discrete_oracle import Coded, assert_rows_keep_count_and_order, pseudo_counts, softmax
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
    folds' pair counts merged) scores the held-out fold as an AODE fit on those folds."""
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
