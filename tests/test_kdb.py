"""The k-dependence Bayesian classifier (``structure="kdb:K"``, Sahami 1996)
against a direct numpy implementation of the formulas documented in
:mod:`sqlnb.models.naive_bayes.kdb` (ranking by I(X; C), parents by I(X_i; X_j | C),
smoothed one- and two-parent tables, scoring with NULL, unseen and missing-parent
fallbacks), within 1e-9, for K = 1 and 2 on data with NULLs and rare values; update =
refit, and the update refused when the structure moves; stored round trip; row order;
the exported SELECT in SQLite, PostgreSQL and Spark; cross-validation; the command line."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from support.cli import invoke
from support.discrete_oracle import Coded, assert_rows_keep_count_and_order, kdb_structure, pseudo_counts, softmax
from support.structured import (CLASSES, DISCRETE, assert_cv_accuracy_is_fold_fits, assert_engine_proba,
                                class_scores, cli_files, kdb_table, moving_table, registered, sqlite_input)


# -- the oracle --------------------------------------------------------------------------
def oracle(train: pa.Table, test: pa.Table, K: int, alpha=1.0, beta=None, estimator="posterior-mean"):
    """Per-row class probabilities and log-scores, the parents and the ranking of KDB(K)
    over ``DISCRETE``, computed directly from the rows."""
    a_, b1, b0 = pseudo_counts(alpha, beta, estimator)
    coded = Coded(train, DISCRETE, CLASSES)
    lab, values, X = coded.lab, coded.values, coded.X
    C = len(CLASSES)
    names = list(DISCRETE)


    def counts(fs):
        n = np.zeros((C, *(len(values[f]) for f in fs)))
        for r, c in enumerate(lab):
            idx = tuple(X[f][r] for f in fs)
            if min(idx) >= 0:
                n[(c, *idx)] += 1
        return n

    def smooth(n, child):
        """ln p(child | class, parents) from counts (C, *parents, child), 0/0 -> naive."""
        tot = n.sum(-1, keepdims=True)
        if DISCRETE[child] == "bernoulli":
            num = np.concatenate([n[..., :1] + b0, n[..., 1:] + b1], -1)
            den = tot + b1 + b0
        else:
            num, den = n + a_, tot + a_ * len(values[child])
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.log(num / den)
        naive = nb[child].reshape((C,) + (1,) * (n.ndim - 2) + (-1,))
        return np.where(den == 0, np.broadcast_to(naive, out.shape), out)

    nb = {}
    for f in names:
        n = counts([f])
        with np.errstate(divide="ignore"):  # MLE: a zero count is ln 0 = −inf
            if DISCRETE[f] == "bernoulli":
                nb[f] = np.log(np.stack([n[:, 0] + b0, n[:, 1] + b1], 1) / (n.sum(1, keepdims=True) + b1 + b0))
            else:
                nb[f] = np.log((n + a_) / (n.sum(1, keepdims=True) + a_ * len(values[f])))

    ranking, parents = kdb_structure(names, counts, K)
    tables = {f: {tuple(ps[i] for i in sub): smooth(counts([*(ps[i] for i in sub), f]), f)
                  for sub in ([(0,), (1,), (0, 1)] if len(ps) == 2 else [(0,)] if ps else [])}
              for f, ps in parents.items()}

    def term(T, r, f, u):  # a NULL or unseen child has none
        present = tuple(p for p in parents[f] if T[p][r] >= 0)  # the parents present
        if present:
            return tables[f][present][(slice(None), *(T[p][r] for p in present), u)]
        return nb[f][:, u]  # the first ranked, or every parent missing: the naive term

    jll = coded.summed_terms(test, term)
    return softmax(jll), jll, parents, ranking  # MLE: a row of −inf scores has no probabilities (NaN)


def scored(model, data, con, what="proba") -> np.ndarray:
    return class_scores(model, data, con, what)


def fit(con, data="train", K=2, kinds=DISCRETE, **params):
    return sqlnb.fit(data, label="y", con=con, features=list(kinds), feature_kinds=kinds, structure=f"kdb:{K}",
                     **params)


def as_parents(tree: dict) -> dict:
    return {c: [p] if isinstance(p, str) else list(p) for c, p in tree.items()}


@pytest.fixture(scope="module")
def data():
    return registered(kdb_table(800, 1), kdb_table(300, 2, unseen=True))


# -- the estimator -----------------------------------------------------------------------
@pytest.mark.parametrize("K,params", [(1, {}), (2, {}), (1, {"alpha": 0.5, "beta": (2.0, 1.0)}),
                                      (2, {"alpha": 0.5, "beta": (2.0, 1.0)}), (2, {"alpha": 3.0, "estimator": "map"}),
                                      (2, {"estimator": "mle"})])
def test_kdb_equals_numpy_with_nulls_rare_and_unseen_values(data, K, params):
    con, train, test = data
    model = fit(con, K=K, **params)
    want, want_jll, parents, ranking = oracle(train, test, K, **params)
    assert model._tree.order == ranking
    assert as_parents(model.tree()) == {f: ps for f, ps in parents.items() if ps}
    assert max(len(ps) for ps in parents.values()) == K
    np.testing.assert_allclose(scored(model, "test", con), want, rtol=0, atol=1e-9)
    np.testing.assert_allclose(scored(model, "test", con, "jll"), want_jll, rtol=0, atol=1e-9)
    # it differs from naive Bayes (and, K = 2, from TAN; KDB(1)'s parents are TAN's tree here)
    for other in ("naive", "tan")[:K]:
        assert np.nanmax(np.abs(scored(model.with_params(structure=other), "test", con) - want)) > 1e-3


def test_the_test_rows_reach_every_fallback(data):
    """Rows with both, one and no parent present, and rows whose child is rare or unseen."""
    con, _, test = data
    model = fit(con)
    two = {c: p for c, p in model.tree().items() if not isinstance(p, str)}
    te = test.to_pydict()
    seen = {}
    for c, (p, q) in two.items():
        for r in range(test.num_rows):
            if te[c][r] is not None:
                seen[(te[p][r] is None) + (te[q][r] is None)] = True
    assert set(seen) == {0, 1, 2}
    assert "a_rare" in model.stats.features["a"].values


def test_gaussian_columns_stay_naive(data):
    con, _, test = data
    kinds = {**DISCRETE, "g": "gaussian"}
    mixed, discrete = fit(con, kinds=kinds), fit(con)
    gauss = sqlnb.fit("train", label="y", con=con, features=["g"])
    assert mixed.tree() == discrete.tree()
    prior = gauss.log_parameters()["prior"]
    np.testing.assert_allclose(scored(mixed, "test", con, "jll"),
                               scored(discrete, "test", con, "jll") + scored(gauss, "test", con, "jll") - prior,
                               rtol=0, atol=1e-9)


def test_binned_columns_take_part_as_their_bins(data):
    """A binned (MDL) column is a tree feature by its bin numbers: the model equals KDB on
    a categorical column holding those bin numbers."""
    con, train, test = data
    model = sqlnb.fit("train", label="y", con=con, features=["a", "b", "e", "g"],
                      feature_kinds={"a": "categorical", "b": "categorical", "e": "categorical"},
                      bins="mdl", structure="kdb:2")
    edges = next(f.edges for f in model.features if f.name == "g")
    assert edges and "g" in model._tree.order

    def binned(t):
        g = t["g"].to_pylist()
        return t.set_column(t.column_names.index("g"), "g", pa.array(
            [None if v is None else f"bin{int(np.searchsorted(edges, v, side='right')):02d}" for v in g]))
    con.register("train_b", binned(train))
    con.register("test_b", binned(test))
    cat = sqlnb.fit("train_b", label="y", con=con, features=["a", "b", "e", "g"], structure="kdb:2",
                    feature_kinds={"b": "categorical"})
    assert cat.tree() == model.tree()
    np.testing.assert_allclose(scored(model, "test", con), scored(cat, "test_b", con), rtol=0, atol=1e-9)


def test_ranking_ties_keep_the_model_order():
    """Two identical columns have equal I(X; C) and the first in the model ranks first;
    equal I(X_i; X_j | C) goes to the parent ranked earlier."""
    con = duckdb.connect()
    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 200)
    x = np.where(rng.random(200) < 0.7, y, 1 - y)
    z = rng.integers(0, 3, 200)
    con.register("t", pa.table({"q": [f"v{v}" for v in x], "p": [f"v{v}" for v in x], "z": [f"z{v}" for v in z],
                                "y": y.tolist()}))
    model = sqlnb.fit("t", label="y", con=con, features=["q", "p", "z"], structure="kdb:2")
    assert model._tree.order == ["q", "p", "z"]
    assert model.tree()["p"] == "q"
    assert model._tree.cmi[2, 0] == model._tree.cmi[2, 1] and model.tree()["z"] == ("q", "p")


def test_refusals(data):
    con, _, _ = data
    with pytest.raises(SqlnbError, match=r"unknown structure 'kdb:6'.*kdb:K \(K = 1 to 5\)"):
        fit(con, K=6)
    tan_model = sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE,
                          structure="tan")
    assert tan_model.with_params(structure="kdb:1").tree()  # K = 1 needs the pair counts only
    with pytest.raises(SqlnbError, match="joint counts with it were never gathered.*--structure kdb:2"):
        tan_model.with_params(structure="kdb:2")
    naive = sqlnb.fit("train", label="y", con=con, features=["a", "e"])
    with pytest.raises(SqlnbError, match="pair counts"):
        naive.with_params(structure="kdb:1")
    with pytest.raises(SqlnbError, match="unseen"):
        fit(con, unseen="bucket")
    # a kdb:2 model gives kdb:1 and TAN from the same counts
    two = fit(con)
    np.testing.assert_allclose(scored(two.with_params(structure="kdb:1"), "test", con),
                               scored(fit(con, K=1), "test", con), rtol=0, atol=1e-12)


# -- update, storage, order --------------------------------------------------------------
def test_update_equals_refit_and_round_trips(data, tmp_path):
    con, train, test = data
    kinds = {**DISCRETE, "g": "gaussian"}
    con.register("first", train.slice(0, 500))
    con.register("rest", train.slice(500))
    first = fit(con, "first", kinds=kinds)
    updated = sqlnb.update(first, "rest", con=con)
    refit = fit(con, kinds=kinds)
    assert first.tree() == refit.tree() == updated.tree()
    np.testing.assert_allclose(scored(updated, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)
    for key, cell in refit.stats.pairs.joints.items():
        np.testing.assert_allclose(updated.stats.pairs.joints[key].over(cell.values), cell.counts, rtol=0, atol=1e-9)
    path = str(tmp_path / "m.duckdb")
    updated.save(path, "kdb")
    loaded = sqlnb.load(path, "kdb")
    assert loaded.tree() == refit.tree() and loaded.hyper.structure == "kdb:2"
    assert set(loaded.stats.pairs.joints) == set(refit.stats.pairs.joints)
    np.testing.assert_allclose(scored(loaded, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)


def test_update_that_moves_the_structure_is_refused():
    """The new rows make ``w`` follow ``v`` instead of ``u``: its parents change, and the
    joint counts of (w, v, ·) over the old rows were never gathered."""
    con = duckdb.connect()
    con.register("old", moving_table(300, 1, "u"))
    con.register("new", moving_table(1200, 2, "v"))
    model = sqlnb.fit("old", label="y", con=con, structure="kdb:2")
    assert model.tree()["w"] == ("u", "x")
    with pytest.raises(SqlnbError, match=r"feature 'w' the parents 'v' and 'x'.*refit the model on all rows") as e:
        sqlnb.update(model, "new", con=con)
    assert "\n" not in str(e.value)
    # K = 1 needs no joint counts: its update is the refit even when the structure moves
    one = sqlnb.update(sqlnb.fit("old", label="y", con=con, structure="kdb:1"), "new", con=con)
    con.execute("CREATE VIEW every AS SELECT * FROM old UNION ALL SELECT * FROM new")
    refit = sqlnb.fit("every", label="y", con=con, structure="kdb:1")
    assert one.tree() == refit.tree() and one.tree()["w"] == "v"
    a = np.array(one.score("every", con=con, outputs=("proba",), keep=["y"]).fetchall(), dtype=float)[:, -2:]
    b = np.array(refit.score("every", con=con, outputs=("proba",), keep=["y"]).fetchall(), dtype=float)[:, -2:]
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


def test_rows_keep_count_and_order(data):
    con, _, test = data
    assert_rows_keep_count_and_order(fit(con), test, con)


# -- other dialects ----------------------------------------------------------------------
def test_export_runs_in_sqlite(data):
    con, _, test = data
    kinds = {**DISCRETE, "g": "gaussian"}
    lite = sqlite_input(test)
    for K in (1, 2):
        model = fit(con, K=K, kinds=kinds)
        query = model.to_sql("sqlite", source="input", outputs=("proba",), key="rid")
        got = np.array([r[-3:] for r in lite.execute(query).fetchall()], dtype=float)
        np.testing.assert_allclose(got, scored(model, "test", con), rtol=0, atol=1e-12)


def _engine_check(engine, model, want):
    fitted = fit(engine)  # the pair and joint counts gathered by the engine itself
    assert fitted.tree() == model.tree()
    assert_engine_proba(fitted.score("test", con=engine, outputs=("proba",), key="rid"), want, CLASSES, 1e-12)


@pytest.mark.postgres
def test_fit_and_score_in_postgres(data):
    from support.engines import postgres_engine
    con, train, test = data
    model = fit(con)
    with postgres_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, model, scored(model, "test", con))


@pytest.mark.spark  # starts a Spark session
def test_fit_and_score_in_spark(data):
    from support.engines import spark_engine
    con, train, test = data
    model = fit(con)
    with spark_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, model, scored(model, "test", con))


# -- explanations, cross-validation, selection ---------------------------------------------
def test_explain_identity(data):
    """A KDB score is the prior plus one term per feature: with every feature as a reason,
    the weights plus the prior difference are the log-odds of the prediction against the
    runner-up (as for naive Bayes and TAN)."""
    con, _, _ = data
    model = fit(con)
    F = len(model.feature_names)
    got = model.score("test", con=con, outputs=("jll", "prediction"), keep=["rid"], explain=F).to_arrow_table()
    d = got.to_pydict()
    prior = model.log_parameters()["prior"]
    for i in range(got.num_rows):
        jll = np.array([d[f"jll_{c}"][i] for c in CLASSES])
        p = int(np.argmax(jll))
        r = int(np.argmax(np.where(np.arange(3) == p, -np.inf, jll)))
        weights = [d[f"reason_{j}_weight"][i] for j in range(1, F + 1)]
        assert d["prediction"][i] == CLASSES[p]
        assert sorted(d[f"reason_{j}"][i] for j in range(1, F + 1)) == sorted(model.feature_names)
        assert abs(sum(weights) + prior[p] - prior[r] - (jll[p] - jll[r])) < 1e-9


def test_cross_validation_equals_fold_by_fold_fits(data):
    """Each fold's KDB(1) and KDB(2) model (its structure from the other folds' pair
    counts, the joint counts its triples need gathered per fold in one more scan) scores
    the held-out fold as a fit on the other folds does."""
    con, _, _ = data
    assert_cv_accuracy_is_fold_fits(con, ["kdb:1", "kdb:2"], DISCRETE,
                                    lambda source, structure: fit(con, source, K=int(structure[-1])))


# -- command line ------------------------------------------------------------------------
def test_cli_fit_score_show_report_update(tmp_path):
    import pyarrow.parquet as pq
    train = kdb_table(400, 5)
    db, args = cli_files(tmp_path, train, DISCRETE, split=300)
    args += ["--structure", "kdb:2"]
    for data, name in (("a", "m"), ("all", "all")):
        r = invoke("fit", str(tmp_path / f"{data}.parquet"), *args, "--model", f"{db}:{name}")
        assert r.exit_code == 0, r.stderr
    full = sqlnb.load(db, "all")
    r = invoke("update", "--model", f"{db}:m", str(tmp_path / "b.parquet"))  # the structure stays
    assert r.exit_code == 0, r.stderr
    con = duckdb.connect()
    con.register("t", train)
    assert sqlnb.load(db, "m").tree() == full.tree()
    np.testing.assert_allclose(scored(sqlnb.load(db, "m"), "t", con), scored(full, "t", con), rtol=0, atol=1e-9)
    # an update that moves the structure: one Error line naming the feature, the model unchanged
    pq.write_table(moving_table(1200, 2, "v"), tmp_path / "new.parquet")
    pq.write_table(moving_table(300, 1, "u"), tmp_path / "old.parquet")
    r = invoke("fit", str(tmp_path / "old.parquet"), "--label", "y", "--structure", "kdb:2", "--model", f"{db}:mv")
    assert r.exit_code == 0, r.stderr
    r = invoke("update", "--model", f"{db}:mv", str(tmp_path / "new.parquet"))
    assert r.exit_code != 0 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "feature 'w'" in r.stderr and "refit" in r.stderr
    assert sqlnb.load(db, "mv").stats.n_rows == 300
    r = invoke("show", "--model", f"{db}:all")
    assert r.exit_code == 0, r.stderr
    for child, parent in full.tree().items():
        text = parent if isinstance(parent, str) else ", ".join(parent)
        assert f"parent {text}" in next(line for line in r.stdout.splitlines() if line.startswith(child + " "))
    r = invoke("show", "--params", "--model", f"{db}:all")
    assert r.exit_code == 0, r.stderr
    two = next(c for c, p in full.tree().items() if not isinstance(p, str))
    assert f"tree: p({two} | class, {', '.join(full.tree()[two])})" in r.stdout
    out = tmp_path / "scored.parquet"
    r = invoke("score", str(tmp_path / "all.parquet"), "--model", f"{db}:all", "--explain", "2", "--out", str(out))
    assert r.exit_code == 0, r.stderr
    got = pq.read_table(out)
    assert got.num_rows == train.num_rows and got["rid"].to_pylist() == train["rid"].to_pylist()
    assert "reason_2_weight" in got.column_names
    r = invoke("report", str(tmp_path / "all.parquet"), "--model", f"{db}:all", "--out", str(tmp_path / "r.html"))
    assert r.exit_code == 0, r.stderr
    assert (tmp_path / "r.html").stat().st_size > 1000
    r = invoke("sql", "--fit", "-m", f"{db}:all")  # the pair scan is there; the joint-count scan is said
    assert r.exit_code == 0, r.stderr
    assert "GROUPING SETS" in r.stdout and "kdb:2 model's counts of each feature with its two parents" in r.stderr


@pytest.mark.parametrize("K", [1, 2, 3])
def test_wrapper_selection(data, K):
    """Wrapper selection around KDB(K): the chosen model equals the fit on the chosen
    features, and its CV error is cross-validation's on those features (for K ≥ 2 each
    step gathers the joint counts its candidates' structures need, per fold; K = 3 backs
    off, :mod:`sqlnb.models.naive_bayes.skdb`)."""
    con, _, _ = data
    s = sqlnb.select_features("train", "y", con=con, direction="backward", folds=3, features=list(DISCRETE),
                              feature_kinds=DISCRETE, structure=f"kdb:{K}")
    assert s.model.hyper.structure == f"kdb:{K}" and s.features
    kinds = {k: DISCRETE[k] for k in s.features}
    refit = fit(con, K=K, kinds=kinds)
    assert s.model.tree() == refit.tree()
    np.testing.assert_allclose(scored(s.model, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)
    for step in s.path:  # every subset on the path: its CV error is cross-validation's
        r = sqlnb.cross_validate("train", "y", con=con, folds=3, features=step["subset"],
                                 feature_kinds={k: DISCRETE[k] for k in step["subset"]}, structure=f"kdb:{K}")
        assert abs(step["error"] - (1 - r.results[0]["mean_accuracy"])) < 1e-12, step


def test_update_with_decay_equals_the_weighted_refit(data):
    """``decay`` scales the joint counts with every other count: after ``update(first,
    rest, decay=0.5)`` the model is the fit in which the first batch's rows weigh 0.5."""
    con, train, test = data
    con.register("first5", train.slice(0, 500))
    con.register("rest5", train.slice(500))
    w = np.r_[np.full(500, 0.5), np.ones(train.num_rows - 500)]
    con.register("weighted", train.append_column("w", pa.array(w)))
    updated = sqlnb.update(fit(con, "first5"), "rest5", con=con, decay=0.5)
    refit = fit(con, "weighted", weight="w")
    assert updated.tree() == refit.tree()
    for key, cell in refit.stats.pairs.joints.items():
        np.testing.assert_allclose(updated.stats.pairs.joints[key].over(cell.values), cell.counts, rtol=0, atol=1e-9)
    np.testing.assert_allclose(scored(updated, "test", con), scored(refit, "test", con), rtol=0, atol=1e-9)
