"""Tree-augmented naive Bayes (``structure="tan"``) against a direct numpy implementation of
the same estimator (pair counts, conditional mutual information, Chow–Liu tree by Prim,
smoothed conditional tables, scoring with NULL and unseen fallbacks), within 1e-9; update
equals the refit; stored round trip; row order; the exported SELECT run in SQLite,
PostgreSQL and Spark; the command line."""

from __future__ import annotations

import math
import sqlite3

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sqlglot import exp

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import tan
from support.cli import invoke
from support.discrete_oracle import Coded, assert_rows_keep_count_and_order, pseudo_counts, softmax
from support.structured import (CLASSES, DISCRETE, assert_cv_accuracy_is_fold_fits, assert_engine_proba,
                                class_scores, cli_files, probabilities, sqlite_input, tan_data,
                                tan_table)

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


def jll(model, data, con) -> np.ndarray:
    return class_scores(model, data, con, "jll")


@pytest.fixture(scope="module")
def data():
    return tan_data()


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


# --------------------------------------------------------------------------------------------
# DuckDB's scoring SELECT of TAN and KDB at spambase's shape (binned columns): a
# child's term is one list read per class of a table padded with a missing slot per axis
# (:func:`tan.padded_read`), and a binned column's position is a sum of comparisons
# (:meth:`Binned.counted_index`), not a CASE chain repeated in every pick. At commit 1de9335 a
# TAN child's term was ``COALESCE`` of two reads (KDB(2): four) with three CASE chains
# each, which made spambase's scoring SQL 200 kB (TAN) and 640 kB (KDB(2)) for 920 rows.
#
# The probabilities are the portable form's (unchanged; run in SQLite) on rows at every cut
# point, NaN, ±inf, NULL, and NULL or unseen categories: every slot of the padded tables.
# --------------------------------------------------------------------------------------------


STRUCTURES = ["tan", "kdb:1", "kdb:2", "aode", "tan+kdb:2"]


def table(n: int, seed: int, edges: dict | None = None) -> pa.Table:
    """``x`` and ``z`` (DOUBLE, binned), ``i`` (BIGINT, binned), ``a`` (categorical),
    ``flag`` (Bernoulli), correlated through the label, with NULLs; with ``edges`` (a fitted
    model's cut points) also a row at every cut point and rows of NaN, ±inf and unseen ``a``."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = rng.normal(y, 1.0)
    z = x + rng.normal(0, 0.7, n)
    i = np.round(rng.normal(3 * y, 2.0)).astype(np.int64)
    a = np.where(rng.random(n) < 0.6, y, rng.integers(0, 3, n))
    cols = {"x": x.tolist(), "z": z.tolist(), "i": i.tolist(), "a": [f"a{v}" for v in a],
            "flag": (rng.random(n) < 0.2 + 0.3 * y).tolist()}
    for c in cols:
        cols[c] = [None if rng.random() < 0.08 else v for v in cols[c]]
    if edges is not None:
        extra = [*((c, e) for c in ("x", "z") for e in edges[c]), *(("i", e) for e in edges["i"]),
                 *((c, v) for c in ("x", "z") for v in (math.nan, math.inf, -math.inf)), ("a", "a_new")]
        for c, v in extra:
            for name in cols:
                cols[name].append(v if name == c else cols[name][len(cols[name]) % n])
            y = np.append(y, 0)
    m = len(cols["x"])
    return pa.table({"rid": pa.array(np.arange(m), pa.int64()), "x": pa.array(cols["x"], pa.float64()),
                     "z": pa.array(cols["z"], pa.float64()), "i": pa.array(cols["i"], pa.int64()),
                     "a": pa.array(cols["a"], pa.string()), "flag": pa.array(cols["flag"], pa.bool_()),
                     "y": pa.array([CLASSES[v] for v in y[:m]], pa.string())})


@pytest.fixture(scope="module")
def binned_data(tmp_path_factory):
    con = duckdb.connect()
    con.register("train", table(400, 1))
    kinds = {"x": "binned", "z": "binned", "i": "binned", "a": "categorical", "flag": "bernoulli"}
    base = sqlnb.fit("train", label="y", con=con, feature_kinds=kinds, bins="quantile:4", structure="kdb:2")
    edges = {f.name: f.edges for f in base.features if f.kind == "binned"}
    test = table(120, 2, edges)
    con.register("test", test)
    # pyarrow's Parquet statistics leave NaN out, which let DuckDB fold NULLIF(x, 'NaN') away
    # (Family.value): the NaN guard of a binned position must hold over such a file too
    parquet = tmp_path_factory.mktemp("parquet") / "test.parquet"
    pq.write_table(test, parquet)
    con.execute(f"CREATE VIEW test_parquet AS SELECT * FROM read_parquet('{parquet}')")
    lite = sqlite3.connect(":memory:")
    lite.execute("CREATE TABLE input (rid INTEGER, x REAL, z REAL, i INTEGER, a TEXT, flag INTEGER, y TEXT)")
    rows = [tuple(None if v is None or (isinstance(v, float) and math.isnan(v)) else
                  (int(v) if isinstance(v, bool) else v) for v in r.values()) for r in test.to_pylist()]
    lite.executemany("INSERT INTO input VALUES (?, ?, ?, ?, ?, ?, ?)", rows)
    return con, lite, kinds, len(rows)


@pytest.mark.parametrize("structure", STRUCTURES)
def test_duckdb_scores_equal_the_portable_form(binned_data, structure):
    con, lite, kinds, n = binned_data
    model = sqlnb.fit("train", label="y", con=con, feature_kinds=kinds, bins="quantile:4", structure=structure)
    outputs = ("jll", "proba")
    names = [f"{g}_{c}" for g in outputs for c in CLASSES]
    rel = model.score("test", con=con, outputs=outputs, keep=["rid"])
    got = rel.select("rid", *names).fetchall()
    assert [r[0] for r in got] == list(range(n))  # one row each, in input order
    assert model.score("test_parquet", con=con, outputs=outputs, keep=["rid"]).select("rid", *names).fetchall() == got
    cur = lite.execute(model.to_sql("sqlite", source="input", outputs=outputs, key="rid"))
    at = [d[0] for d in cur.description]
    want = [[r[at.index(c)] for c in ("rid", *names)] for r in cur.fetchall()]
    assert [r[0] for r in want] == list(range(n))
    np.testing.assert_allclose(np.array([r[1:] for r in got], dtype=float),
                               np.array([r[1:] for r in want], dtype=float), rtol=0, atol=1e-12)


def reads(e: exp.Expression) -> int:
    return sum(1 for x in e.find_all(exp.Anonymous) if x.name.lower() == "list_extract")


@pytest.mark.parametrize("structure", ["tan", "kdb:2"])
def test_a_child_term_is_one_read_without_a_case(binned_data, structure):
    """Binned columns only (spambase's case): per class, each child's term is one
    LIST_EXTRACT and holds no CASE (1de9335: a TAN term held 2 reads and 3 CASE chains
    over the bins; a two-parent KDB term 4 reads and 7 chains)."""
    con, _, kinds, _ = binned_data
    model = sqlnb.fit("train", label="y", con=con, features=["x", "z", "i"], feature_kinds=kinds,
                      bins="quantile:4", structure=structure)
    children = model._tree.parent
    assert len(children) == 2 and (structure == "tan" or any(not isinstance(p, str) for p in children.values()))
    terms = model._terms_module().child_terms(model._tree, model._scoring_features(None), model.stats,
                                              model.log_parameters(), "duckdb", None)
    for child in children:
        for term in terms[child]:
            assert reads(term) == 1, (child, term.sql("duckdb"))
            assert term.find(exp.Case) is None, (child, term.sql("duckdb"))
