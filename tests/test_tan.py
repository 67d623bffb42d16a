"""Tree-augmented naive Bayes (``structure="tan"``) against a direct numpy implementation of
the same estimator (pair counts, conditional mutual information, Chow–Liu tree by Prim,
smoothed conditional tables, scoring with NULL and unseen fallbacks), within 1e-9; update
equals the refit; stored round trip; row order; the exported SELECT run in SQLite,
PostgreSQL and Spark; the command line (issue 16 point 4)."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import tan
from support.cli import invoke
from support.discrete_oracle import Coded, assert_rows_keep_count_and_order, pseudo_counts, softmax
from support.structured import (assert_cv_accuracy_is_fold_fits, assert_engine_proba, class_scores, cli_files,
                                registered, sqlite_input)

CLASSES = ["k0", "k1", "k2"]


def tan_table(n: int, seed: int, unseen: bool = False) -> pa.Table:
    """Correlated discrete features (so the tree is not trivial) with NULLs: ``a`` follows
    the class, ``b`` mostly copies ``a``, ``e`` follows ``b``, ``flag`` follows ``e``;
    ``noise`` is independent; ``g`` is Gaussian. With ``unseen``, some values never seen
    in training."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    a = np.where(rng.random(n) < 0.6, y, rng.integers(0, 4, n))
    b = np.where(rng.random(n) < 0.7, a, rng.integers(0, 4, n))
    e = np.where(rng.random(n) < 0.75, (b + 1) % 3, rng.integers(0, 3, n))
    flag = rng.random(n) < np.where(e == 0, 0.85, 0.2)
    noise = rng.integers(0, 3, n)
    g = rng.normal(y * 0.7, 1.0)

    def nulls(p=0.1):
        return rng.random(n) < p

    a_txt = np.array([f"a{v}" for v in a], dtype=object)
    b_int = b.astype(np.int64) * 10
    if unseen:
        a_txt[rng.random(n) < 0.15] = "a_new"
        b_int[rng.random(n) < 0.15] = 999
    return pa.table({
        "rid": pa.array(np.arange(n), pa.int64()),
        "a": pa.array(a_txt.tolist(), pa.string(), mask=nulls()),
        "b": pa.array(b_int, pa.int64(), mask=nulls()),
        "e": pa.array([f"e{v}" for v in e], pa.string(), mask=nulls()),
        "flag": pa.array(flag, pa.bool_(), mask=nulls()),
        "noise": pa.array([f"n{v}" for v in noise], pa.string(), mask=nulls(0.2)),
        "g": pa.array(g, pa.float64(), mask=nulls()),
        "y": pa.array([CLASSES[v] for v in y], pa.string(), mask=nulls(0.03)),
    })


DISCRETE = {"a": "categorical", "b": "categorical", "e": "categorical", "flag": "bernoulli",
            "noise": "categorical"}


# -- the oracle --------------------------------------------------------------------------
def oracle(train: pa.Table, test: pa.Table, alpha=1.0, beta=None, estimator="posterior-mean"):
    """Per-row class probabilities, the tree and the CMI matrix of TAN over ``DISCRETE``,
    computed directly from the rows."""
    a_, b1, b0 = pseudo_counts(alpha, beta, estimator)
    coded = Coded(train, DISCRETE, CLASSES)
    lab, values, X = coded.lab, coded.values, coded.X
    K = len(CLASSES)
    names = list(DISCRETE)

    nb = {}
    for f in names:
        n = np.zeros((K, len(values[f])))
        for c, u in zip(lab, X[f]):
            if u >= 0:
                n[c, u] += 1
        if DISCRETE[f] == "bernoulli":
            den = n.sum(1, keepdims=True) + b1 + b0
            nb[f] = np.log(np.stack([n[:, 0] + b0, n[:, 1] + b1], 1) / den)
        else:
            nb[f] = np.log((n + a_) / (n.sum(1, keepdims=True) + a_ * len(values[f])))
    pair = {}
    for p in names:
        for q in names:
            n = np.zeros((K, len(values[p]), len(values[q])))
            for c, u, v in zip(lab, X[p], X[q]):
                if u >= 0 and v >= 0:
                    n[c, u, v] += 1
            pair[p, q] = n
    F = len(names)
    cmi = np.zeros((F, F))
    for i in range(F):
        for j in range(F):
            if i == j:
                continue
            n = pair[names[i], names[j]]
            N = n.sum()
            total = 0.0
            for c in range(K):
                nc = n[c].sum()
                for u in range(n.shape[1]):
                    for v in range(n.shape[2]):
                        if n[c, u, v] > 0:
                            total += n[c, u, v] / N * math.log(n[c, u, v] * nc / (n[c, u].sum() * n[c, :, v].sum()))
            cmi[i, j] = total
    # Prim from the first feature; ties to the smallest node, then the smallest parent.
    parent, tree = {}, [0]
    while len(tree) < F:
        best = max(((cmi[u, v], -v, -u) for v in range(F) if v not in tree for u in tree))
        v, u = -best[1], -best[2]
        parent[names[v]] = names[u]
        tree.append(v)
    cpt = {}
    for child, par in parent.items():
        n = pair[par, child]
        tot = n.sum(2, keepdims=True)
        if DISCRETE[child] == "bernoulli":
            cpt[child] = np.log(np.concatenate([n[:, :, :1] + b0, n[:, :, 1:] + b1], 2) / (tot + b1 + b0))
        else:
            cpt[child] = np.log((n + a_) / (tot + a_ * len(values[child])))

    def term(T, r, f, u):  # a NULL or unseen child has none
        if f in parent and T[parent[f]][r] >= 0:
            return cpt[f][:, T[parent[f]][r], u]
        return nb[f][:, u]  # the root, or a NULL / unseen parent: the naive term

    jll = coded.summed_terms(test, term)
    return softmax(jll), jll, parent, cmi


def probabilities(model, data, con) -> np.ndarray:
    return class_scores(model, data, con, "proba")


def jll(model, data, con) -> np.ndarray:
    return class_scores(model, data, con, "jll")


@pytest.fixture(scope="module")
def data():
    return registered(tan_table(800, 1), tan_table(300, 2, unseen=True))


# -- the estimator -----------------------------------------------------------------------
@pytest.mark.parametrize("params", [{}, {"alpha": 0.5, "beta": (2.0, 1.0)}, {"alpha": 3.0, "estimator": "map"}])
def test_tan_equals_numpy_with_nulls_and_unseen_values(data, params):
    con, train, test = data
    model = sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE,
                      structure="tan", **params)
    want, want_jll, parent, cmi = oracle(train, test, **params)
    assert model.tree() == parent
    assert len(set(parent.values())) > 1 or len(parent) < 3  # a tree, not a star around the root
    np.testing.assert_allclose(model._tree.cmi, cmi, rtol=0, atol=1e-12)
    np.testing.assert_allclose(probabilities(model, "test", con), want, rtol=0, atol=1e-9)
    np.testing.assert_allclose(jll(model, "test", con), want_jll, rtol=0, atol=1e-9)
    # and it differs from naive Bayes on the same statistics
    naive = model.with_params(structure="naive")
    assert np.abs(probabilities(naive, "test", con) - want).max() > 1e-3


def test_tree_is_the_expected_chain(data):
    """The generated dependencies a -> b -> e -> flag are found; noise hangs somewhere."""
    con, train, _ = data
    model = sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure="tan")
    tree = model.tree()
    assert tree["b"] == "a" and tree["e"] == "b" and tree["flag"] == "e" and "a" not in tree


def test_gaussian_columns_stay_naive(data):
    """A mixed model: the Gaussian column adds its naive term, the tree is unchanged."""
    con, _, _ = data
    kinds = {**DISCRETE, "g": "gaussian"}
    mixed = sqlnb.fit("train", label="y", con=con, features=list(kinds), feature_kinds=kinds, structure="tan")
    discrete = sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE,
                         structure="tan")
    gauss = sqlnb.fit("train", label="y", con=con, features=["g"])
    assert mixed.tree() == discrete.tree()
    prior = gauss.log_parameters()["prior"]
    np.testing.assert_allclose(jll(mixed, "test", con),
                               jll(discrete, "test", con) + jll(gauss, "test", con) - prior, rtol=0, atol=1e-9)


def test_chow_liu_ties_and_cmi():
    assert tan.chow_liu(np.zeros((3, 3))) == [None, 0, 0]
    w = np.array([[0, 1, 1, 0], [1, 0, 0, 5], [1, 0, 0, 5], [0, 5, 5, 0]], dtype=float)
    assert tan.chow_liu(w) == [None, 0, 3, 1]
    independent = np.ones((2, 2, 3))
    assert tan.conditional_mutual_information(independent) == 0.0
    copy = np.zeros((1, 2, 2))
    copy[0, 0, 0] = copy[0, 1, 1] = 5
    assert abs(tan.conditional_mutual_information(copy) - math.log(2)) < 1e-15


# -- update, storage, order --------------------------------------------------------------
def test_update_equals_refit(data, tmp_path):
    con, train, test = data
    kinds = {**DISCRETE, "g": "gaussian"}
    con.register("first", train.slice(0, 300))
    con.register("rest", train.slice(300))
    # the second batch brings a category the first never saw
    first = sqlnb.fit("first", label="y", con=con, features=list(kinds), feature_kinds=kinds, structure="tan")
    updated = sqlnb.update(first, "rest", con=con)
    refit = sqlnb.fit("train", label="y", con=con, features=list(kinds), feature_kinds=kinds, structure="tan")
    assert updated.tree() == refit.tree()
    np.testing.assert_allclose(probabilities(updated, "test", con), probabilities(refit, "test", con),
                               rtol=0, atol=1e-9)
    for key, cell in refit.stats.pairs.cells.items():
        got = updated.stats.pairs.cells[key]
        np.testing.assert_allclose(got.over(cell.values_a, cell.values_b), cell.counts, rtol=0, atol=1e-9)
    # stored round trip of the updated model
    path = str(tmp_path / "m.duckdb")
    updated.save(path, "tan")
    loaded = sqlnb.load(path, "tan")
    assert loaded.tree() == refit.tree() and loaded.hyper.structure == "tan"
    np.testing.assert_allclose(probabilities(loaded, "test", con), probabilities(refit, "test", con),
                               rtol=0, atol=1e-9)


def test_rows_keep_count_and_order(data):
    con, _, test = data
    model = sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure="tan")
    assert_rows_keep_count_and_order(model, test, con)


def test_refusals(data):
    con, _, _ = data
    with pytest.raises(SqlnbError, match="at least two discrete features"):
        sqlnb.fit("train", label="y", con=con, features=["a", "g"], structure="tan")
    with pytest.raises(SqlnbError, match="unknown structure"):
        sqlnb.fit("train", label="y", con=con, structure="tree")
    with pytest.raises(SqlnbError, match="unseen"):
        sqlnb.fit("train", label="y", con=con, features=["a", "e"], structure="tan", unseen="bucket")
    naive = sqlnb.fit("train", label="y", con=con, features=["a", "e"])
    with pytest.raises(SqlnbError, match="pair counts"):
        naive.with_params(structure="tan")


# -- other dialects ----------------------------------------------------------------------
def test_export_runs_in_sqlite(data):
    con, _, test = data
    kinds = {**DISCRETE, "g": "gaussian"}
    model = sqlnb.fit("train", label="y", con=con, features=list(kinds), feature_kinds=kinds, structure="tan")
    lite = sqlite_input(test)
    query = model.to_sql("sqlite", source="input", outputs=("proba",), key="rid")
    got = np.array([r[-3:] for r in lite.execute(query).fetchall()], dtype=float)
    np.testing.assert_allclose(got, probabilities(model, "test", con), rtol=0, atol=1e-9)


def _engine_check(engine, model, want):
    fitted = sqlnb.fit("train", label="y", con=engine, features=list(DISCRETE), feature_kinds=DISCRETE,
                       structure="tan")
    assert fitted.tree() == model.tree()
    assert_engine_proba(fitted.score("test", con=engine, outputs=("proba",), key="rid"), want, CLASSES, 1e-9)


@pytest.mark.postgres  # a throw-away PostgreSQL server
def test_fit_and_score_in_postgres(data):
    from support.engines import postgres_engine
    con, train, test = data
    model = sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure="tan")
    with postgres_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, model, probabilities(model, "test", con))


@pytest.mark.spark  # starts a Spark session
def test_fit_and_score_in_spark(data):
    from support.engines import spark_engine
    con, train, test = data
    model = sqlnb.fit("train", label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure="tan")
    with spark_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, model, probabilities(model, "test", con))


# -- command line ------------------------------------------------------------------------
def test_cli_fit_structure_tan_show_and_update(tmp_path):
    train = tan_table(400, 5)
    db, args = cli_files(tmp_path, train, DISCRETE, split=200)
    args += ["--structure", "tan"]
    r = invoke("fit", str(tmp_path / "a.parquet"), *args, "--model", f"{db}:m")
    assert r.exit_code == 0, r.stderr
    r = invoke("fit", str(tmp_path / "all.parquet"), *args, "--model", f"{db}:all")
    assert r.exit_code == 0, r.stderr
    r = invoke("update", "--model", f"{db}:m", str(tmp_path / "b.parquet"))
    assert r.exit_code == 0, r.stderr
    r = invoke("show", "--model", f"{db}:m")
    assert r.exit_code == 0, r.stderr
    m, full = sqlnb.load(db, "m"), sqlnb.load(db, "all")
    for child, parent in full.tree().items():
        assert f"parent {parent}" in next(line for line in r.stdout.splitlines() if line.startswith(child + " "))
    con = duckdb.connect()
    con.register("t", train)
    np.testing.assert_allclose(probabilities(m, "t", con), probabilities(full, "t", con), rtol=0, atol=1e-9)


def test_pair_positions_past_255(data):
    """Parent x child positions past 255 (DuckDB's enum_code is a UINT8): 40 x 30 values."""
    con, _, _ = data
    rng = np.random.default_rng(9)
    n = 3000
    y = rng.integers(0, 2, n)
    p = (rng.integers(0, 20, n) + 20 * y) % 40
    c = np.where(rng.random(n) < 0.7, p % 30, rng.integers(0, 30, n))
    t = pa.table({"p": [f"p{v:02d}" for v in p], "c": [f"c{v:02d}" for v in c], "y": [int(v) for v in y]})
    con.register("wide", t)
    model = sqlnb.fit("wide", label="y", con=con, structure="tan")
    assert model.tree() == {"c": "p"}
    cpt = model._tree.cpt["c"]
    got = np.array(model.score("wide", con=con, outputs=("jll",), keep=["y"]).fetchall(), dtype=float)[:, -2:]
    prior = model.log_parameters()["prior"]
    pv, cv = model.stats.features["p"].values, model.stats.features["c"].values
    want = np.array([prior + model.log_parameters()["p"][1][:, pv.index(a)] + cpt[:, pv.index(a), cv.index(b)]
                     for a, b in zip(t["p"].to_pylist(), t["c"].to_pylist())])
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-9)


def test_cross_validation_of_tan_equals_fold_by_fold_fits(data):
    """``cross_validate(grid={"structure": ["naive", "tan"]})``: each fold's TAN model (pair
    counts of the other folds merged, tree derived from them) scores the held-out fold as a
    TAN fit on the other folds does."""
    con, _, _ = data
    assert_cv_accuracy_is_fold_fits(con, ["naive", "tan"], DISCRETE, lambda source, structure: sqlnb.fit(
        source, label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure=structure))


def test_sampling_and_em_refuse_a_tree(data):
    con, _, _ = data
    model = sqlnb.fit("train", label="y", con=con, features=["a", "e"], structure="tan")
    with pytest.raises(SqlnbError, match="sampling draws each feature from its class alone"):
        sqlnb.sample(model, 5)
    assert sqlnb.sample(model.with_params(structure="naive"), 5).num_rows == 5
    with pytest.raises(SqlnbError, match="EM fits naive Bayes only"):
        sqlnb.fit_em("train", label="y", con=con, features=["a", "e"], structure="tan")


def test_weighted_pairs_equal_repeated_rows(data):
    """Integer row weights count pairs as that many copies of the row."""
    con, train, _ = data
    w = np.random.default_rng(7).integers(1, 4, train.num_rows)
    con.register("weighted", train.append_column("w", pa.array(w.astype(float))))
    con.register("repeated", train.take(np.repeat(np.arange(train.num_rows), w)))
    args = dict(label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure="tan")
    a = sqlnb.fit("weighted", weight="w", **args)
    b = sqlnb.fit("repeated", **args)
    assert a.tree() == b.tree()
    np.testing.assert_allclose(probabilities(a, "test", con), probabilities(b, "test", con), rtol=0, atol=1e-9)


def test_a_parent_value_without_rows_in_a_class_falls_back_to_naive_under_mle():
    """MLE: p(child | c, v) for a parent value v never seen with class c is 0/0; the child's
    naive Bayes probabilities stand in (as for an unseen parent at scoring)."""
    con = duckdb.connect()
    t = pa.table({"p": ["u", "u", "v", "w", "v", "u", "v", "u"], "c": ["x", "y", "x", "x", "y", "x", "y", "y"],
                  "y": [0, 0, 0, 0, 1, 1, 1, 1]})  # parent value w never with class 1
    con.register("t", t)
    model = sqlnb.fit("t", label="y", con=con, structure="tan", estimator="mle")
    (child, parent), = model.tree().items()
    pvals = model.stats.features[parent].values
    naive = model.log_parameters()[child][1]
    cpt = model._tree.cpt[child]
    counts = model.stats.pairs.table(parent, child, pvals, model.stats.features[child].values).sum(axis=2)
    empty = [(k, i) for k in range(2) for i in range(len(pvals)) if counts[k, i] == 0]
    assert empty  # the data has such a cell
    for k, i in empty:
        np.testing.assert_array_equal(cpt[k, i], naive[k])
