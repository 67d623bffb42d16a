"""Deeper k-dependence structures (``structure="kdb:K"``, K = 3 to 5) and the selective KDB
(``structure="skdb"``) against a direct numpy implementation of the formulas documented in
:mod:`sqlnb.models.naive_bayes.skdb`: ranking and parents as KDB's, back-off smoothing over
the prefixes of the ranked parents, a missing parent conditioning on the parents ranked
before it, within 1e-9 with NULL and unseen values; the leave-one-out choice of (k, s)
against refitting the counts without each row; storage, update, row order, export."""

from __future__ import annotations

import json
import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from support.cli import invoke
from support.discrete_oracle import assert_rows_keep_count_and_order
from support.kdb_oracle import Oracle
from support.structured import (CLASSES, DISCRETE, assert_cv_accuracy_is_fold_fits, assert_engine_proba,
                                class_scores, cli_files, fold_views, kdb_table, moving_table, registered,
                                sqlite_input)


def fit(con, data="train", structure="kdb:3", **params):
    return sqlnb.fit(data, label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure=structure,
                     **params)


@pytest.fixture(scope="module")
def data():
    return registered(kdb_table(800, 1), kdb_table(300, 2, unseen=True))


# -- kdb:3 … kdb:5 ------------------------------------------------------------------------
@pytest.mark.parametrize("K,params", [(3, {}), (5, {}), (4, {"backoff": 0.25, "alpha": 0.5, "beta": (2.0, 1.0)}),
                                      (3, {"backoff": 5.0, "estimator": "map", "alpha": 2.0}), (3, {"backoff": 0.0})])
def test_deep_kdb_equals_numpy_with_nulls_rare_and_unseen_values(data, K, params):
    con, train, test = data
    model = fit(con, structure=f"kdb:{K}", **params)
    oracle = Oracle(train, K, m=params.get("backoff", 1.0), alpha=params.get("alpha", 1.0),
                    beta=params.get("beta"), estimator=params.get("estimator", "posterior-mean"))
    want, want_jll = oracle.scores(test, K)
    assert model._tree.order == oracle.ranking
    assert {c: [p] if isinstance(p, str) else list(p) for c, p in model.tree().items()} == \
        {f: ps for f, ps in oracle.parents.items() if ps}
    assert max(len(ps) for ps in oracle.parents.values()) == min(K, len(DISCRETE) - 1)
    np.testing.assert_allclose(class_scores(model, "test", con, "proba"), want, rtol=0, atol=1e-9)
    np.testing.assert_allclose(class_scores(model, "test", con, "jll"), want_jll, rtol=0, atol=1e-9)


def test_the_test_rows_reach_every_prefix(data):
    """Rows whose ranked parents are present up to each depth, and whose deepest
    configuration was never seen in training (the shorter prefix's table)."""
    con, train, test = data
    model = fit(con, structure="kdb:4")
    te = test.to_pydict()
    depths = set()
    for child, par in model.tree().items():
        ps = (par,) if isinstance(par, str) else par
        for r in range(test.num_rows):
            if te[child][r] is not None:
                depths.add(next((j for j, p in enumerate(ps) if te[p][r] is None), len(ps)))
    assert depths == {0, 1, 2, 3, 4}
    deepest = model._tree.seen["noise"][-1]
    assert 0 < deepest.sum() < deepest.size  # some configurations unseen


def test_unseen_configuration_is_the_shorter_prefix_exactly(data):
    """Where no training row holds a configuration the back-off table is the shorter
    prefix's, bit for bit, whatever m."""
    con, _, _ = data
    for m in (0.0, 1.0, 7.5):
        net = fit(con, structure="kdb:4", backoff=m)._tree
        for child, tables in net.logp.items():
            for j in range(1, len(tables)):
                unseen = ~net.seen[child][j - 1]
                shorter = np.broadcast_to(np.expand_dims(tables[j - 1], -2), tables[j].shape)
                assert np.array_equal(tables[j][:, unseen], shorter[:, unseen])


def test_refusals(data):
    con, _, _ = data
    with pytest.raises(SqlnbError, match=r"unknown structure 'skdb:6'"):
        fit(con, structure="skdb:6")
    with pytest.raises(SqlnbError, match="backoff"):
        fit(con, backoff=-1.0)
    with pytest.raises(SqlnbError, match=r"backoff 'loo' chooses m by leave-one-out.*'kdb:4' does not keep; use "
                                         r"structure 'skdb:4' \(--structure skdb:4\) or give m as a number"):
        fit(con, structure="kdb:4", backoff="loo")
    with pytest.raises(SqlnbError, match="'g' is none"):
        sqlnb.fit("train", label="y", con=con, features=[*DISCRETE, "g"], feature_kinds=DISCRETE, structure="skdb")
    two = fit(con, structure="kdb:2")
    with pytest.raises(SqlnbError, match=r"joint counts with it were never gathered.*--structure kdb:3"):
        two.with_params(structure="kdb:3").log_parameters()
    with pytest.raises(SqlnbError, match="leave-one-out over the training rows"):
        fit(con, structure="kdb:5").with_params(structure="skdb").log_parameters()
    # a kdb:5 model gives every shallower deep structure from the same counts
    np.testing.assert_allclose(class_scores(fit(con, structure="kdb:5").with_params(structure="kdb:3"), "test", con,
                                            "proba"),
                               class_scores(fit(con), "test", con, "proba"), rtol=0, atol=1e-12)


# -- skdb ---------------------------------------------------------------------------------
def test_leave_one_out_equals_refitting_without_each_row():
    """On a small table every (k, s)'s RMSE equals the numpy model of the counts without
    each row in turn (the structure from all rows), and the choice is the smallest."""
    con, train, test = registered(kdb_table(90, 7), kdb_table(40, 8, unseen=True))
    model = fit(con, structure="skdb:3", backoff=1.0)
    choice = model._tree.choice
    oracle = Oracle(train, 3)
    want = oracle.leave_one_out(3)
    np.testing.assert_allclose(choice["rmse"], want, rtol=0, atol=1e-9)
    k, s = np.unravel_index(np.argmin(np.round(want, 9)), want.shape)
    assert (model._tree.k, model._tree.s) == (k, s + 1)
    proba, _ = oracle.scores(test, k, s + 1)
    np.testing.assert_allclose(class_scores(model, "test", con, "proba"), proba, rtol=0, atol=1e-9)
    assert set(model._tree.dropped) == set(oracle.ranking[s + 1:])


def test_weighted_rows_leave_out_their_own_weight():
    """With a weight column each row's leave-one-out model lacks that row's weight (rows
    of one pattern but other weights are kept apart), and the RMSE weighs the rows."""
    train = kdb_table(90, 7)
    w = np.random.default_rng(3).choice([0.5, 1.0, 2.0], train.num_rows)
    train = train.append_column("w", pa.array(w))
    con, _, _ = registered(train, kdb_table(40, 8))
    model = fit(con, structure="skdb:2", weight="w", backoff=1.0)
    oracle = Oracle(train, 2)  # its rows: those with a label
    keep = np.array([v for v, y in zip(w, train["y"].to_pylist()) if y is not None])
    np.testing.assert_allclose(model._tree.choice["rmse"], oracle.leave_one_out(2, keep), rtol=0, atol=1e-9)


def test_backoff_by_leave_one_out_equals_numpy_with_nulls_and_unseen_values(data):
    """``backoff="loo"``: each feature's m per depth is the test's own leave-one-out choice,
    the probabilities (NULL and unseen values among the test rows) are the numpy model's
    under those m's within 1e-9, and m differs across features and depths here."""
    con, train, test = data
    model = fit(con, structure="skdb", backoff="loo")
    oracle = Oracle(train, 5)
    oracle.m = oracle.backoff_choice()
    chosen = model.skdb_summary()["backoff"]
    assert chosen == oracle.m
    assert len({m for ms in chosen.values() for m in ms}) >= 2
    net = model._tree
    proba, jll = oracle.scores(test, net.k, net.s)
    np.testing.assert_allclose(class_scores(model, "test", con, "jll"), jll, rtol=0, atol=1e-9)
    np.testing.assert_allclose(class_scores(model, "test", con, "proba"), proba, rtol=0, atol=1e-9)
    # the same statistics under a fixed m, and back: no data is read
    fixed = model.with_params(backoff=1.0)
    assert "backoff" not in fixed.skdb_summary()
    np.testing.assert_allclose(class_scores(fixed.with_params(backoff="loo"), "test", con, "proba"), proba,
                               rtol=0, atol=1e-12)


def test_skdb_backs_off_by_leave_one_out_unless_told(data, tmp_path):
    """``skdb``'s default back-off is ``"loo"``, ``kdb:K``'s 1; a model stored with m = 1
    (as every skdb model was before, whose metadata holds no ``backoff``) loads with m = 1;
    another structure through ``with_params`` takes that structure's default."""
    con, _, _ = data
    model = fit(con, structure="skdb")
    assert model.hyper.backoff == "loo" and fit(con, structure="kdb:4").hyper.backoff == 1.0
    np.testing.assert_allclose(class_scores(model, "test", con, "proba"),
                               class_scores(fit(con, structure="skdb", backoff="loo"), "test", con, "proba"),
                               rtol=0, atol=0)
    one = fit(con, structure="skdb", backoff=1.0)
    assert "backoff" not in one.metadata()["hyperparameters"]
    one.save(str(tmp_path / "m.duckdb"), "one")
    loaded = sqlnb.load(str(tmp_path / "m.duckdb"), "one")
    assert loaded.hyper.backoff == 1.0 and "backoff" not in loaded.skdb_summary()
    np.testing.assert_allclose(class_scores(loaded, "test", con, "proba"), class_scores(one, "test", con, "proba"),
                               rtol=0, atol=1e-12)
    assert model.with_params(structure="kdb:4").hyper.backoff == 1.0
    assert fit(con, structure="kdb:5").with_params(structure="kdb:3").hyper.backoff == 1.0
    assert model.with_params(structure="kdb:4", backoff=2.0).hyper.backoff == 2.0
    assert one.with_params(structure="skdb:3").hyper.backoff == 1.0  # a given m stays


def test_leave_one_out_of_k_and_s_uses_the_chosen_backoff():
    """The (k, s) leave-one-out with ``backoff="loo"`` scores each row under the m's chosen
    from all rows, the counts without the row, as the numpy model does; with weights
    the choice weighs each row and leaves its own weight out."""
    con, train, test = registered(kdb_table(90, 7), kdb_table(40, 8, unseen=True))
    model = fit(con, structure="skdb:3", backoff="loo")
    oracle = Oracle(train, 3)
    oracle.m = oracle.backoff_choice()
    assert model.skdb_summary()["backoff"] == oracle.m
    np.testing.assert_allclose(model._tree.choice["rmse"], oracle.leave_one_out(3), rtol=0, atol=1e-9)
    w = np.random.default_rng(3).choice([0.5, 1.0, 2.0], train.num_rows)
    con, _, _ = registered(train.append_column("w", pa.array(w)), kdb_table(40, 8))
    model = fit(con, structure="skdb:3", backoff="loo", weight="w")
    keep = np.array([v for v, y in zip(w, train["y"].to_pylist()) if y is not None])
    oracle.m = oracle.backoff_choice(keep)
    assert model.skdb_summary()["backoff"] == oracle.m
    np.testing.assert_allclose(model._tree.choice["rmse"], oracle.leave_one_out(3, keep), rtol=0, atol=1e-9)


def test_skdb_keeps_the_chosen_features(data):
    con, train, test = data
    model = fit(con, structure="skdb", backoff=1.0)
    net = model._tree
    assert net.choice["rmse"].shape == (6, len(DISCRETE))
    proba, jll = Oracle(train, 5).scores(test, net.k, net.s)
    np.testing.assert_allclose(class_scores(model, "test", con, "jll"), jll, rtol=0, atol=1e-9)


# -- update, storage, order, export ------------------------------------------------------
@pytest.mark.parametrize("structure,params", [("kdb:4", {}), ("skdb", {}), ("skdb", {"backoff": 1.0})])
def test_update_equals_refit_and_round_trips(data, tmp_path, structure, params):
    con, train, test = data
    con.register("first", train.slice(0, 500))
    con.register("rest", train.slice(500))
    updated = sqlnb.update(fit(con, "first", structure, **params), "rest", con=con)
    refit = fit(con, structure=structure, **params)
    assert updated.skdb_summary().get("backoff") == refit.skdb_summary().get("backoff")
    assert updated.tree() == refit.tree() and (updated._tree.k, updated._tree.s) == (refit._tree.k, refit._tree.s)
    np.testing.assert_allclose(class_scores(updated, "test", con, "proba"), class_scores(refit, "test", con, "proba"),
                               rtol=0, atol=1e-9)
    path = str(tmp_path / "m.duckdb")
    updated.save(path, "deep")
    loaded = sqlnb.load(path, "deep")
    assert loaded.hyper.structure == structure and loaded.tree() == refit.tree()
    np.testing.assert_allclose(class_scores(loaded, "test", con, "proba"), class_scores(refit, "test", con, "proba"),
                               rtol=0, atol=1e-9)
    if structure == "skdb":
        np.testing.assert_allclose(loaded._tree.choice["rmse"], refit._tree.choice["rmse"], rtol=0, atol=1e-12)
        assert loaded.hyper.backoff == refit.hyper.backoff
        assert loaded.skdb_summary().get("backoff") == refit.skdb_summary().get("backoff")


def test_update_that_moves_the_parents_is_refused():
    """The new rows make ``w``'s second parent ``v`` instead of ``u``: the joint counts of
    (w, v, x) over the old rows were never gathered, so the update is refused, naming it."""
    con = duckdb.connect()
    con.register("old", moving_table(300, 1, "u"))
    con.register("new", moving_table(1200, 2, "v"))
    model = sqlnb.fit("old", label="y", con=con, structure="kdb:3")
    assert model.tree()["w"] == ("u", "x", "v")
    with pytest.raises(SqlnbError, match=r"feature 'w' the parents 'v', 'x'.*refit the model on all rows") as e:
        sqlnb.update(model, "new", con=con)
    assert "\n" not in str(e.value)


def test_explain_identity_and_dropped_features_weigh_nothing(data):
    """A deep KDB or SKDB score is the prior plus one term per feature: with every feature
    as a reason the weights plus the prior difference are the log-odds of the prediction
    against the runner-up; a feature SKDB leaves out weighs 0."""
    con, _, _ = data
    for model in (fit(con, structure="kdb:4"), fit(con, structure="skdb:3")):
        F = len(model.feature_names)
        d = model.score("test", con=con, outputs=("jll", "prediction"), keep=["rid"], explain=F).to_arrow_table()
        d = d.to_pydict()
        prior = model.log_parameters()["prior"]
        for i in range(len(d["rid"])):
            jll = np.array([d[f"jll_{c}"][i] for c in CLASSES])
            p = int(np.argmax(jll))
            r = int(np.argmax(np.where(np.arange(3) == p, -np.inf, jll)))
            weights = {d[f"reason_{j}"][i]: d[f"reason_{j}_weight"][i] for j in range(1, F + 1)}
            assert abs(sum(weights.values()) + prior[p] - prior[r] - (jll[p] - jll[r])) < 1e-9
            assert all(weights[name] == 0 for name in model._tree.dropped)
    assert model._tree.dropped  # skdb:3 leaves features out here


def test_rows_keep_count_and_order(data):
    con, _, test = data
    assert_rows_keep_count_and_order(fit(con, structure="kdb:5"), test, con)


def test_export_runs_in_sqlite(data):
    con, _, test = data
    lite = sqlite_input(test)
    for structure, params in (("kdb:3", {}), ("kdb:5", {}), ("skdb", {}), ("skdb", {"backoff": 1.0})):
        model = fit(con, structure=structure, **params)
        query = model.to_sql("sqlite", source="input", outputs=("proba",), key="rid")
        got = np.array([r[-3:] for r in lite.execute(query).fetchall()], dtype=float)
        np.testing.assert_allclose(got, class_scores(model, "test", con, "proba"), rtol=0, atol=1e-12)


def test_cross_validation_equals_fold_by_fold_fits(data):
    """Each fold's kdb:4 and skdb model (the skdb choice by leave-one-out over its own
    training folds' rows, read as patterns per fold in one more scan) scores the held-out
    fold as a fit on the other folds does."""
    con, _, _ = data
    assert_cv_accuracy_is_fold_fits(con, ["kdb:4", "skdb", "skdb:2"], DISCRETE,
                                    lambda source, structure: fit(con, source, structure))
    # scored fold by fold (skdb.deep: pooled, their tries took the memory); kdb:2 pooled
    grid = {"structure": ["kdb:4", "skdb"], "alpha": [0.5, 1.0]}
    assert sqlnb.cross_validate("train", "y", con=con, folds=3, grid=grid, features=list(DISCRETE),
                                feature_kinds=DISCRETE).scans["scoring"] == 3 * 4
    assert sqlnb.cross_validate("train", "y", con=con, folds=3, structure="kdb:2", features=list(DISCRETE),
                                feature_kinds=DISCRETE).scans["scoring"] == 1


# -- command line ------------------------------------------------------------------------
def test_cli_fit_show_params_score_sql_update(tmp_path, monkeypatch):
    import pyarrow.parquet as pq

    import sqlnb.cli as cli_module
    train = kdb_table(400, 5)
    db, args = cli_files(tmp_path, train, DISCRETE, split=300)
    for data, name in (("a", "m"), ("all", "all")):
        r = invoke("fit", str(tmp_path / f"{data}.parquet"), *args, "--structure", "skdb:3", "--backoff", "2",
                   "--model", f"{db}:{name}")
        assert r.exit_code == 0, r.stderr
    full = sqlnb.load(db, "all")
    assert full.hyper.backoff == 2.0 and full.hyper.structure == "skdb:3"
    monkeypatch.setattr(cli_module, "stderr_is_terminal", lambda: True)  # the fit's one-line summary says the choice
    r = invoke("fit", str(tmp_path / "all.parquet"), *args, "--structure", "skdb:3", "--backoff", "2",
               "--model", f"{db}:said")
    c = full.skdb_summary()
    assert r.exit_code == 0 and r.stderr.startswith("fitted 'said'"), r.stderr
    assert f"skdb chose k = {c['k']} and the first {c['s']} of 5 features by leave-one-out" in r.stderr
    monkeypatch.undo()
    r = invoke("update", "--model", f"{db}:m", str(tmp_path / "b.parquet"))
    assert r.exit_code == 0, r.stderr
    np.testing.assert_allclose(sqlnb.load(db, "m").skdb_summary()["rmse"], full.skdb_summary()["rmse"],
                               rtol=0, atol=1e-12)
    choice = full.skdb_summary()
    r = invoke("show", "--model", f"{db}:all")
    assert r.exit_code == 0, r.stderr
    assert f"skdb         k = {choice['k']} parents, the first {choice['s']} of 5 features" in r.stdout
    for name in choice["order"][choice["s"]:]:
        assert "no term (left out by skdb)" in next(line for line in r.stdout.splitlines()
                                                    if line.startswith(name + " "))
    r = invoke("show", "--params", "--model", f"{db}:all")
    assert r.exit_code == 0, r.stderr
    assert "skdb: leave-one-out RMSE of p(true class)" in r.stdout
    out = tmp_path / "scored.parquet"
    r = invoke("score", str(tmp_path / "all.parquet"), "--model", f"{db}:all", "--out", str(out))
    assert r.exit_code == 0, r.stderr
    assert pq.read_table(out)["rid"].to_pylist() == train["rid"].to_pylist()
    r = invoke("evaluate", str(tmp_path / "all.parquet"), "--model", f"{db}:all", "--format", "json")
    assert r.exit_code == 0, r.stderr
    con, _, _ = registered(train, train)
    rows = full.score("train", con=con, outputs=("prediction",), keep=["y"]).fetchall()
    labelled = [(a, b) for a, b in rows if a is not None]
    assert abs(json.loads(r.stdout)["accuracy"] - sum(a == b for a, b in labelled) / len(labelled)) < 1e-12
    r = invoke("sql", "--model", f"{db}:all", "--dialect", "sqlite", "--source", "input", "--key", "rid",
               "--outputs", "proba")
    assert r.exit_code == 0, r.stderr
    got = np.array([row[-3:] for row in sqlite_input(train).execute(r.stdout).fetchall()], dtype=float)
    np.testing.assert_allclose(got, class_scores(full, "train", con, "proba"), rtol=0, atol=1e-12)
    r = invoke("fit", str(tmp_path / "all.parquet"), "--label", "y", "--structure", "skdb", "--model", f"{db}:bad")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and "chooses among discrete" in r.stderr
    r = invoke("sql", "--fit", "-m", f"{db}:all")  # the scans the exported fitting SQL leaves out are said
    assert r.exit_code == 0 and "skdb:3 model's counts of each feature with each prefix" in r.stderr, r.stderr
    assert "training rows as patterns" in r.stderr
    r = invoke("select", str(tmp_path / "all.parquet"), *args, "--structure", "skdb", "--folds", "3",
               "--model", f"{db}:sel")
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1 and "chooses its features itself" in r.stderr


def test_cli_backoff_by_leave_one_out_is_shown_and_refused_without_patterns(tmp_path):
    """``--backoff loo``: ``show`` names the m's the kept features use, ``show --params``
    tables every feature's m per depth (JSON too); under ``kdb:K`` one error line naming
    the fix."""
    train = kdb_table(600, 5)  # rows on which skdb:3 keeps a parent
    db, args = cli_files(tmp_path, train, DISCRETE, split=450)
    r = invoke("fit", str(tmp_path / "all.parquet"), *args, "--structure", "skdb:3", "--backoff", "loo",
               "--model", f"{db}:loo")
    assert r.exit_code == 0, r.stderr
    model = sqlnb.load(db, "loo")
    assert model.hyper.backoff == "loo"
    chosen, c = model.skdb_summary()["backoff"], model.skdb_summary()
    r = invoke("show", "--model", f"{db}:loo")
    assert r.exit_code == 0, r.stderr
    used = "; ".join(f"{f} {', '.join(f'{m:g}' for m in chosen[f][:c['k']])}" for f in c["order"][:c["s"]]
                     if chosen[f])
    assert c["k"] > 0 and f"back-off m by leave-one-out (depth 1, 2, …): {used}" in r.stdout
    r = invoke("show", "--params", "--model", f"{db}:loo")
    assert r.exit_code == 0 and "skdb: back-off pseudo-count m chosen by leave-one-out" in r.stdout, r.stdout
    for f, ms in chosen.items():
        assert any(line.split() == [f, *(f"{m:g}" for m in ms)] for line in r.stdout.splitlines()), f
    r = invoke("show", "--params", "--format", "json", "--model", f"{db}:loo")
    assert r.exit_code == 0 and json.loads(r.stdout)["skdb"]["backoff"] == chosen
    for structure, value, said in (("kdb:3", "loo", "use structure 'skdb:3' (--structure skdb:3) or give m as a "
                                                     "number (--backoff 1)"),
                                   ("skdb", "lo", "must be a finite number >= 0 or 'loo'")):
        r = invoke("fit", str(tmp_path / "all.parquet"), *args, "--structure", structure, "--backoff", value,
                   "--model", f"{db}:bad")
        assert r.exit_code == 2 and r.stderr.startswith("Error: ") and said in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


# -- other engines -------------------------------------------------------------------------
def _engine_check(engine, con):
    """kdb:4 and skdb fitted by the engine itself (its joint-count scan, its patterns scan)
    choose what DuckDB's fit chooses and score as DuckDB does, within 1e-12."""
    for structure in ("kdb:4", "skdb"):
        model = fit(con, structure=structure)
        fitted = fit(engine, structure=structure)
        assert fitted.tree() == model.tree() and (fitted._tree.k, fitted._tree.s) == (model._tree.k, model._tree.s)
        assert_engine_proba(fitted.score("test", con=engine, outputs=("proba",), key="rid"),
                            class_scores(model, "test", con, "proba"), CLASSES, 1e-12)


@pytest.mark.postgres
def test_fit_and_score_in_postgres(data):
    from support.engines import postgres_engine
    con, train, test = data
    with postgres_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, con)


@pytest.mark.spark  # starts a Spark session
def test_fit_and_score_in_spark(data, tmp_path):
    """As in PostgreSQL; and Spark compiles kdb:4's scoring plan over a Parquet source into
    methods HotSpot JIT-compiles (a CASE per depth over the seen configurations did not:
    Spark interpreted it, 262 s to score these 300 rows)."""
    import pyarrow.parquet as pq

    from support.engines import spark_engine
    from support.spark import JIT_METHOD_LIMIT, max_method_bytecodes
    con, train, test = data
    with spark_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, con)
        pq.write_table(test, tmp_path / "test.parquet")
        engine.spark.read.parquet(str(tmp_path / "test.parquet")).createOrReplaceTempView("skdb_parquet")
        scored = fit(con, structure="kdb:4", alpha=0.75).score("skdb_parquet", con=engine, outputs=("proba",),
                                                                 key="rid")
        assert max_method_bytecodes(scored) <= JIT_METHOD_LIMIT


def test_dbt_macro_scores_as_sqlnb_score(data, tmp_path):
    """The dbt package's DuckDB macro of a saved skdb model gives sqlnb score's rows."""
    from support.dbt_macro import assert_macro_scores_as_score
    con, _, test = data
    assert_macro_scores_as_score(fit(con, structure="skdb"), test, tmp_path, "s")


def test_cross_validation_with_binned_columns_equals_fold_by_fold_fits(data):
    """With binned columns each fold model cuts on its training folds (one scan per fold)
    and reads their rows as patterns over its own bins: its skdb choice and accuracy are
    those of a fit on the other folds."""
    con, _, _ = data
    kinds = {**DISCRETE, "g": "binned"}
    r = sqlnb.cross_validate("train", "y", con=con, folds=3, key=["rid"], grid={"structure": ["skdb"]},
                             features=list(kinds), feature_kinds=DISCRETE, bins="mdl")
    for i, (fit_i, held_i) in enumerate(fold_views(con)):
        model = sqlnb.fit(fit_i, label="y", con=con, features=list(kinds), feature_kinds=DISCRETE, bins="mdl",
                          structure="skdb")
        rows = model.score(held_i, con=con, outputs=("prediction",), keep=["y"]).fetchall()
        assert abs(r.results[0]["accuracy"][i] - sum(a == b for a, b in rows) / len(rows)) < 1e-12
