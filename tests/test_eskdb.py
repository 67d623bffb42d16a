"""Ensembles of selective KDBs (``structure="eskdb"`` or ``"eskdb:K"``) against a numpy
implementation of :mod:`sqlnb.models.naive_bayes.eskdb`'s docstring written here: each
member's Gumbel-perturbed ranking and parent lists drawn from ``default_rng([0, t])``, its
back-off m per depth and its (k, s) by leave-one-out (:mod:`support.kdb_oracle`), the class
score the log of the members' mean posterior, within 1e-9 with NULL and unseen values;
row order, storage, update, cross-validation, the exported SQL in SQLite, PostgreSQL and
Spark, the dbt macro, and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes import eskdb
from support.discrete_oracle import assert_rows_keep_count_and_order, class_information, conditional_information
from support.kdb_oracle import Oracle
from support.structured import (CLASSES, DISCRETE, assert_cv_accuracy_is_fold_fits, assert_engine_proba,
                                class_scores, kdb_table, registered, sqlite_input)

#: The documented draw: the first word of member t's seed, and τ.
SEED, TAU = 0, 2.0


class EnsembleOracle:
    """The members of ``eskdb:K`` over ``DISCRETE`` from ``train`` (module docstring of
    :mod:`sqlnb.models.naive_bayes.eskdb`), each an :class:`Oracle` of its own ranking,
    parent lists, back-off m's and (k, s); ``weights`` those of the labelled rows (1 each
    by default), in every count and in the leave-one-out."""

    def __init__(self, train, K: int, members: int, backoff="loo", weights=None, **smoothing):
        names = list(DISCRETE)
        F = len(names)
        whole = Oracle(train, K, **smoothing)
        if weights is not None:
            whole.keep = np.asarray(weights, dtype=float)
        counts = whole.counts
        mi = np.array([class_information(counts([f])) for f in names])
        cmi = np.zeros((F, F))
        for i in range(F):
            for j in range(F):
                if i != j:
                    cmi[i, j] = conditional_information(counts([names[i], names[j]]))
        self.members = []
        for t in range(members):
            rng = np.random.default_rng([SEED, t])
            key = np.log(np.maximum(mi, 1e-12)) + TAU * rng.gumbel(size=F)
            ranking = sorted(range(F), key=lambda i: (-key[i], i))
            parents = {}
            for r, i in enumerate(ranking):
                noisy = np.log(np.maximum(cmi[i, ranking[:r]], 1e-12)) + TAU * rng.gumbel(size=r) if r else []
                parents[names[i]] = [names[ranking[j]] for j in sorted(range(r), key=lambda j: (-noisy[j], j))[:K]]
            member = Oracle(train, K, **smoothing)
            member.ranking, member.parents = [names[i] for i in ranking], parents
            member.m = member.backoff_choice(weights) if backoff == "loo" else backoff
            member.rmse = member.leave_one_out(K, weights)  # and the member's counts weigh the rows after it
            ties = np.argwhere(member.rmse <= np.nanmin(member.rmse) + 1e-9)  # row-major: smaller k, then smaller s
            member.k, member.s = int(ties[0][0]), int(ties[0][1]) + 1
            self.members.append(member)

    def scores(self, test) -> tuple[np.ndarray, np.ndarray]:
        """``(probabilities, class scores)``: the members' mean posterior and its log."""
        mean = np.mean([m.scores(test, m.k, m.s)[0] for m in self.members], axis=0)
        return mean, np.log(mean)


def fit(con, data="train", structure="eskdb", **params):
    return sqlnb.fit(data, label="y", con=con, features=list(DISCRETE), feature_kinds=DISCRETE, structure=structure,
                     **params)


def proba(model, con, data="test"):
    return class_scores(model, data, con, "proba")


@pytest.fixture
def members(monkeypatch):
    """Ensembles of 3 members in this test (the default 20 elsewhere)."""
    monkeypatch.setattr(eskdb, "MEMBERS", 3)


@pytest.fixture(scope="module")
def data():
    """A small training table (the oracle's leave-one-out refits per row) and test rows
    with NULL, rare and unseen values."""
    return registered(kdb_table(250, 7), kdb_table(80, 8, unseen=True))


# -- against the oracle -----------------------------------------------------------------------
@pytest.mark.parametrize("structure,K,members,params", [
    ("eskdb", 5, 4, {}),
    ("eskdb:2", 2, 3, {"alpha": 2.0, "estimator": "map", "beta": (3.0, 1.5)}),
    ("eskdb:3", 3, 3, {"alpha": 0.5, "backoff": 2.0}),
])
def test_ensemble_equals_numpy_with_nulls_rare_and_unseen_values(data, monkeypatch, structure, K, members, params):
    """Each member's ranking, parents, back-off m's, leave-one-out RMSE and (k, s) are the
    oracle's; the probabilities are the mean of the members' and the class scores its log,
    within 1e-9; the members differ."""
    con, train, test = data
    monkeypatch.setattr(eskdb, "MEMBERS", members)
    model = fit(con, structure=structure, **params)
    smoothing = {k: v for k, v in params.items() if k in ("alpha", "beta", "estimator")}
    oracle = EnsembleOracle(train, K, members, params.get("backoff", "loo"), **smoothing)
    model.log_parameters()
    nets = model._ens.nets
    assert len(nets) == members
    for net, want in zip(nets, oracle.members):
        assert net.order == want.ranking
        assert (net.k, net.s) == (want.k, want.s)
        assert {c: [p] if isinstance(p, str) else list(p) for c, p in net.parent.items()} == \
            {f: want.parents[f][:want.k] for f in want.ranking[:want.s] if want.parents[f][:want.k]}
        assert net.dropped == want.ranking[want.s:]
        np.testing.assert_allclose(net.choice["rmse"], want.rmse, rtol=0, atol=1e-9)
        if params.get("backoff", "loo") == "loo":
            assert net.choice["backoff"] == want.m
            assert {f: len(ms) for f, ms in want.m.items()} == {f: len(ps) for f, ps in want.parents.items()}
    assert len({tuple(net.order) for net in nets}) > 1  # the draws differ
    assert max(net.k for net in nets) == min(K, 3)  # a member backs off over three parents where K allows
    want_proba, want_scores = oracle.scores(test)
    np.testing.assert_allclose(proba(model, con), want_proba, rtol=0, atol=1e-9)
    np.testing.assert_allclose(class_scores(model, "test", con, "jll"), want_scores, rtol=0, atol=1e-9)
    single = [m.scores(test, m.k, m.s)[0] for m in oracle.members]
    assert all(np.abs(p - want_proba).max() > 1e-3 for p in single)  # an average, not one member


def test_weighted_rows_equal_numpy(data, members):
    """With a weight column every count, information and leave-one-out weighs the rows
    (each leaving its own weight out): the members and probabilities are the oracle's."""
    con, train, test = data
    w = np.random.default_rng(3).choice([0.5, 1.0, 2.0], train.num_rows)
    con.register("weighted", train.append_column("w", pa.array(w)))
    model = fit(con, "weighted", "eskdb:3", weight="w")
    keep = np.array([v for v, y in zip(w, train["y"].to_pylist()) if y is not None])
    oracle = EnsembleOracle(train, 3, 3, weights=keep)
    model.log_parameters()
    for net, want in zip(model._ens.nets, oracle.members):
        assert (net.order, net.k, net.s, net.choice["backoff"]) == (want.ranking, want.k, want.s, want.m)
        np.testing.assert_allclose(net.choice["rmse"], want.rmse, rtol=0, atol=1e-9)
    want_proba, want_scores = oracle.scores(test)
    np.testing.assert_allclose(proba(model, con), want_proba, rtol=0, atol=1e-9)
    np.testing.assert_allclose(class_scores(model, "test", con, "jll"), want_scores, rtol=0, atol=1e-9)


def test_test_rows_hold_nulls_rare_and_unseen_values(data):
    """The rows the oracle is compared on: a NULL in every feature, values never seen in
    training, and values seen in one or two training rows."""
    _, train, test = data
    tr, te = train.to_pydict(), test.to_pydict()
    for f in DISCRETE:
        assert None in te[f], f
    assert {v for v in te["a"] if v is not None} - set(tr["a"]) and {v for v in te["b"] if v is not None} - set(tr["b"])
    assert tr["a"].count("a_rare") == 2 and tr["e"].count("e9") == 1 and "a_rare" in te["a"] and "e9" in te["e"]


# -- rows, storage, update ----------------------------------------------------------------------
def test_rows_keep_count_and_order(data, members):
    con, _, test = data
    assert_rows_keep_count_and_order(fit(con), test, con)


@pytest.mark.parametrize("structure,params", [("eskdb", {}), ("eskdb:2", {"backoff": 1.0, "alpha": 0.5})])
def test_update_equals_refit_and_round_trips(data, members, tmp_path, structure, params):
    """An update derives every member again from the merged patterns: the members and
    the probabilities of a refit on all rows; a saved and loaded model scores alike."""
    con, train, _ = data
    con.register("first", train.slice(0, 150))
    con.register("rest", train.slice(150))
    first = fit(con, "first", structure, **params)
    updated = sqlnb.update(first, "rest", con=con)
    refit = fit(con, structure=structure, **params)
    updated.log_parameters(), refit.log_parameters(), first.log_parameters()
    assert [(n.order, n.parent, n.k, n.s) for n in updated._ens.nets] == \
        [(n.order, n.parent, n.k, n.s) for n in refit._ens.nets]
    assert [(n.order, n.parent, n.k, n.s) for n in first._ens.nets] != \
        [(n.order, n.parent, n.k, n.s) for n in refit._ens.nets]  # the new rows moved the members
    np.testing.assert_allclose(proba(updated, con), proba(refit, con), rtol=0, atol=1e-9)
    path = str(tmp_path / "m.duckdb")
    updated.save(path, "ens")
    loaded = sqlnb.load(path, "ens")
    assert loaded.hyper.structure == structure and loaded.hyper.backoff == refit.hyper.backoff
    np.testing.assert_allclose(proba(loaded, con), proba(updated, con), rtol=0, atol=0)
    np.testing.assert_allclose(class_scores(loaded, "test", con, "jll"), class_scores(updated, "test", con, "jll"),
                               rtol=0, atol=0)


# -- cross-validation ---------------------------------------------------------------------------
def test_cross_validation_equals_fold_by_fold_fits(data, members):
    """Each fold model of the grid over structure and alpha (its members drawn from its
    own training folds' counts and patterns) predicts the held-out fold as a fit on the
    other folds does; its log loss is that of a refit on the folds the documented rule
    deals, measured by scikit-learn."""
    from support.cv_oracle import assert_matches_refits
    con, _, _ = data
    assert_cv_accuracy_is_fold_fits(con, ["eskdb", "eskdb:2"], DISCRETE,
                                    lambda source, structure, **params: fit(con, source, structure, **params),
                                    alphas=[0.5, 2.0])
    con.execute("CREATE OR REPLACE TEMP VIEW labelled AS SELECT * FROM train WHERE y IS NOT NULL")
    r = sqlnb.cross_validate("labelled", "y", con=con, folds=3, grid={"structure": ["eskdb"], "alpha": [0.5, 2.0]},
                             features=list(DISCRETE), feature_kinds=DISCRETE)
    assert_matches_refits(con, r, "labelled", features=list(DISCRETE), feature_kinds=DISCRETE)


# -- exported SQL ------------------------------------------------------------------------------
def _sqlite_equals_score(model, con, test):
    """The model's SQLite export on the test rows gives ``score``'s probabilities and
    class scores within 1e-12."""
    cur = sqlite_input(test).execute(model.to_sql("sqlite", source="input", outputs=("proba", "jll"), key="rid"))
    names = [d[0] for d in cur.description]
    rows = cur.fetchall()
    for what in ("proba", "jll"):
        at = [names.index(f"{what}_{c}") for c in CLASSES]
        got = np.array([[r[i] for i in at] for r in rows], dtype=float)
        np.testing.assert_allclose(got, class_scores(model, "test", con, what), rtol=0, atol=1e-12)


def test_export_runs_in_sqlite(data, members):
    con, _, test = data
    for structure, params in (("eskdb", {}), ("eskdb:2", {"backoff": 1.0}), ("eskdb:1", {"alpha": 0.5})):
        _sqlite_equals_score(fit(con, structure=structure, **params), con, test)


def test_default_twenty_members_score_and_export(data):
    """The default ensemble: 20 members, each drawn apart, scored in DuckDB (one listed
    plan) as its SQLite export scores, within 1e-12."""
    con, _, test = data
    model = fit(con)
    model.log_parameters()
    assert len(model._ens.nets) == eskdb.MEMBERS == 20
    assert len({(tuple(n.order), tuple(sorted(n.parent.items()))) for n in model._ens.nets}) > 10
    _sqlite_equals_score(model, con, test)


def test_dbt_macro_scores_as_sqlnb_score(data, members, tmp_path):
    """The dbt package's DuckDB macro of a saved eskdb model gives sqlnb score's rows."""
    from support.dbt_macro import assert_macro_scores_as_score
    con, _, test = data
    assert_macro_scores_as_score(fit(con), test, tmp_path, "e")


# -- hostile input and refusals --------------------------------------------------------------------
def test_hostile_column_name_is_a_feature(data, members):
    """A feature named ``a"; DROP TABLE t; --`` is quoted wherever it goes: the model
    scores as the one of the plain name, in DuckDB and in its SQLite export."""
    from support.sqlite import sqlite_connection, sqlite_table
    con, train, test = data
    name = 'a"; DROP TABLE t; --'
    kinds = {name if f == "a" else f: kind for f, kind in DISCRETE.items()}

    def renamed(t):
        return t.rename_columns([name if c == "a" else c for c in t.column_names])

    con.register("hostile_train", renamed(train))
    con.register("hostile_test", renamed(test))
    model = sqlnb.fit("hostile_train", label="y", con=con, features=list(kinds), feature_kinds=kinds,
                      structure="eskdb")
    want = proba(fit(con), con)
    np.testing.assert_allclose(class_scores(model, "hostile_test", con, "proba"), want, rtol=0, atol=1e-12)
    lite = sqlite_connection()
    sqlite_table(lite, "input", renamed(test))
    query = model.to_sql("sqlite", source="input", outputs=("proba",), key="rid")
    got = np.array([r[-len(CLASSES):] for r in lite.execute(query).fetchall()], dtype=float)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


def test_refusals(data, members):
    """One line each, naming what is wrong and the way out."""
    con, _, _ = data
    for structure in ("eskdb:0", "eskdb:9", "eskdb:", "eskdb:2:3"):
        with pytest.raises(SqlnbError, match=f"unknown structure {structure!r}") as e:
            fit(con, structure=structure)
        assert "\n" not in str(e.value)
    with pytest.raises(SqlnbError, match=r"structure 'eskdb' chooses among discrete features, and 'g' is none") as e:
        sqlnb.fit("train", label="y", con=con, features=[*DISCRETE, "g"], feature_kinds=DISCRETE, structure="eskdb")
    assert "\n" not in str(e.value) and "--bins mdl" in str(e.value)
    with pytest.raises(SqlnbError, match=r"structure 'eskdb:2' scores unseen categories as missing; leave unseen "
                                         r"at 'missing'") as e:
        fit(con, structure="eskdb:2", unseen="bucket").log_parameters()
    assert "\n" not in str(e.value)
    with pytest.raises(SqlnbError, match=r"structure 'eskdb' counts every member's parents from the training rows "
                                         r"kept as patterns.*refit with structure='eskdb'"):
        fit(con, structure="kdb:5").with_params(structure="eskdb").log_parameters()
    with pytest.raises(SqlnbError, match=r"feature selection around eskdb: eskdb chooses its features itself.*in "
                                         r"each member.*select around kdb:K") as e:
        sqlnb.select_features("train", "y", con=con, folds=3, features=list(DISCRETE), feature_kinds=DISCRETE,
                              structure="eskdb:2")
    assert "\n" not in str(e.value)
    model = fit(con)
    with pytest.raises(SqlnbError, match=r"explain: structure 'eskdb' averages .*members.*one structure of the same "
                                         r"counts: with_params\(structure='skdb'\)"):
        model.score("test", con=con, explain=2)
    assert model.with_params(structure="skdb").score("test", con=con, explain=2).fetchall()  # the way out explains
    for structure in ("eskdb:1", "eskdb:5"):  # the bounds of K are structures
        assert math.isfinite(proba(fit(con, structure=structure), con).sum())


def test_novelty_is_refused(data, members):
    """The class scores are ln of the members' mean posterior, so log_evidence is 0 on
    every row (within rounding): a novelty threshold on it would flag rows by rounding,
    and both novelty calls refuse in one line naming the way out."""
    con, _, _ = data
    model = fit(con)
    ev = np.array(model.score("test", con=con, outputs=("log_evidence",), keep=[]).fetchall(), dtype=float)
    assert np.abs(ev).max() < 1e-12
    for call in (lambda: sqlnb.novelty_threshold(model, "train", con=con),
                 lambda: sqlnb.flag_novel(model, "test", threshold=-1.0, con=con)):
        with pytest.raises(SqlnbError, match=r"needs ln p\(x\), the model's evidence; structure 'eskdb' averages its "
                                             r"members' posteriors.*with_params\(structure='skdb'\)") as e:
            call()
        assert "\n" not in str(e.value)
    assert sqlnb.novelty_threshold(model.with_params(structure="skdb"), "train", con=con).report["novelty"]["rows"]


# -- other engines ---------------------------------------------------------------------------------
def _engine_check(engine, con):
    """eskdb fitted by the engine itself (its pair scan, its patterns scan) draws the
    members DuckDB's fit draws and scores as DuckDB does, within 1e-12."""
    for structure, params in (("eskdb", {}), ("eskdb:2", {"alpha": 0.5})):
        model = fit(con, structure=structure, **params)
        fitted = fit(engine, structure=structure, **params)
        model.log_parameters(), fitted.log_parameters()
        assert [(n.order, n.parent, n.k, n.s) for n in fitted._ens.nets] == \
            [(n.order, n.parent, n.k, n.s) for n in model._ens.nets]
        assert_engine_proba(fitted.score("test", con=engine, outputs=("proba",), key="rid"), proba(model, con),
                            CLASSES, 1e-12)


@pytest.mark.postgres
def test_fit_and_score_in_postgres(data, members):
    from support.engines import postgres_engine
    con, train, test = data
    with postgres_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, con)


@pytest.mark.spark  # starts a Spark session
def test_fit_and_score_in_spark(data, members):
    from support.engines import spark_engine
    con, train, test = data
    with spark_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, con)
