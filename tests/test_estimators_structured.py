"""AODE and KDB as scikit-learn estimators (the structures built on pair counts).

``AveragedOneDependenceNB``, ``KDependenceNB``, ``SelectiveKDependenceNB`` and
``EnsembleSelectiveKDependenceNB`` are ``sqlnb.fit`` with ``structure="aode"`` / ``"kdb:K"`` /
``"skdb:K"`` / ``"eskdb:K"``: the same probabilities as the library's model on the
same rows; a saved AODE or KDB model comes back as its own estimator class with the
structure's parameter (a MixedNB before, whose clone refitted naive Bayes); partial_fit
is the exact update. scikit-learn's own checks run on both in test_estimators_checks.py.
"""

from __future__ import annotations

import pickle

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from sklearn.base import clone

import sqlnb
from sqlnb import estimators as est
from sqlnb.models.naive_bayes import eskdb

TOL = 1e-12


def _data(rows=240, seed=0):
    """Four categorical columns with a dependence on the class and on each other, and NaN-free
    text values (the estimators read text as categories)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, rows)
    a = (y + rng.integers(0, 2, rows)) % 4
    b = (a + rng.integers(0, 3, rows)) % 3
    c = (y * b + rng.integers(0, 2, rows)) % 5
    d = rng.integers(0, 2, rows)
    X = np.column_stack([a, b, c, d]).astype(str)
    return X, y


CASES = [(est.AveragedOneDependenceNB, {}, "aode", {}),
         (est.AveragedStructuresNB, {}, "tan+kdb:2+aode", {}),
         (est.AveragedStructuresNB, {"structures": "naive+kdb:1", "min_count": 5}, "naive+kdb:1", {"aode_min_count": 5}),
         (est.AveragedOneDependenceNB, {"min_count": 25}, "aode", {"aode_min_count": 25}),
         (est.KDependenceNB, {"k": 1}, "kdb:1", {}),
         (est.KDependenceNB, {"k": 2}, "kdb:2", {}),
         (est.KDependenceNB, {"k": 4, "backoff": 0.5}, "kdb:4", {"backoff": 0.5}),
         (est.SelectiveKDependenceNB, {}, "skdb:5", {}),
         (est.SelectiveKDependenceNB, {"k_max": 3, "backoff": 2.0}, "skdb:3", {"backoff": 2.0}),
         (est.SelectiveKDependenceNB, {"k_max": 3, "backoff": "loo"}, "skdb:3", {"backoff": "loo"}),
         (est.EnsembleSelectiveKDependenceNB, {}, "eskdb:5", {}),
         (est.EnsembleSelectiveKDependenceNB, {"k_max": 2, "backoff": 1.0}, "eskdb:2", {"backoff": 1.0})]


@pytest.mark.parametrize("cls, params, structure, hyper", CASES, ids=[c[2] + str(c[1] or "") for c in CASES])
def test_estimator_is_the_library_model(cls, params, structure, hyper):
    X, y = _data()
    clf = cls(**params).fit(X, y)
    con = duckdb.connect()
    con.register("rows", pa.table({**{f"x{j}": X[:, j] for j in range(X.shape[1])}, "y": y}))
    model = sqlnb.fit("rows", "y", con=con, structure=structure, screen=False, **hyper)
    lib = model.score("rows", con=con).fetchnumpy()
    expected = np.column_stack([lib[f"proba_{c}"] for c in model.classes])
    np.testing.assert_allclose(clf.predict_proba(X), expected, rtol=0, atol=TOL)
    assert clf.model_.hyper.structure == structure


def test_saved_models_come_back_as_their_own_estimator(tmp_path):
    """est.load / from_model of an AODE or KDB model: the structure's class, with k or
    min_count read from the model, so that clone + fit refits the same structure."""
    X, y = _data()
    for clf in (est.KDependenceNB(k=2), est.KDependenceNB(k=5, backoff=3.0), est.SelectiveKDependenceNB(k_max=3),
                est.SelectiveKDependenceNB(backoff="loo"), est.EnsembleSelectiveKDependenceNB(k_max=2),
                est.AveragedOneDependenceNB(min_count=3), est.TreeAugmentedNB(),
                est.AveragedStructuresNB(structures="tan+aode", min_count=2)):
        clf.fit(X, y)
        path = str(tmp_path / "m.duckdb")
        clf.save(path, "m", replace=True)
        again = est.load(path, "m")
        assert type(again) is type(clf)
        assert again.get_params() == clf.get_params()
        np.testing.assert_allclose(again.predict_proba(X), clf.predict_proba(X), rtol=0, atol=TOL)
        refit = clone(again).fit(X, y)
        np.testing.assert_allclose(refit.predict_proba(X), clf.predict_proba(X), rtol=0, atol=TOL)
        np.testing.assert_allclose(pickle.loads(pickle.dumps(clf)).predict_proba(X), clf.predict_proba(X),
                                   rtol=0, atol=TOL)


def test_kdb_parents():
    X, y = _data()
    clf = est.KDependenceNB(k=2).fit(X, y)
    parents = clf.parents_
    assert parents and all(isinstance(p, tuple) and 1 <= len(p) <= 2 for p in parents.values())
    assert max(len(p) for p in parents.values()) == 2
    assert set(parents) | {p for ps in parents.values() for p in ps} <= set(clf.feature_names_in_
                                                                             if hasattr(clf, "feature_names_in_")
                                                                             else [f"x{j}" for j in range(4)])
    with pytest.raises(AttributeError, match="parent sets"):
        clf.tree_


@pytest.mark.parametrize("k", [0, 6, True, "2"])
def test_kdb_k_out_of_range_is_one_clear_error(k):
    X, y = _data(60)
    with pytest.raises(est.EstimatorInputError, match="k is the number of parents per feature, 1 to 5"):
        est.KDependenceNB(k=k).fit(X, y)
    with pytest.raises(est.EstimatorInputError, match="k_max is the most parents per feature tried, 1 to 5"):
        est.SelectiveKDependenceNB(k_max=k).fit(X, y)
    with pytest.raises(est.EstimatorInputError, match="EnsembleSelectiveKDependenceNB's k_max is the most parents"):
        est.EnsembleSelectiveKDependenceNB(k_max=k).fit(X, y)


def test_selective_kdb_choice():
    """choice_ is the model's leave-one-out choice; the features past s carry no term;
    with backoff="loo" it holds each feature's m per depth. KDependenceNB keeps no rows to
    choose m from: one clear error naming the fix."""
    X, y = _data()
    clf = est.SelectiveKDependenceNB(k_max=3).fit(X, y)
    choice = clf.choice_
    assert choice["rmse"].shape == (4, X.shape[1]) and 1 <= choice["s"] <= X.shape[1]
    assert set(clf.parents_) <= set(choice["order"][:choice["s"]])
    chosen = est.SelectiveKDependenceNB(k_max=3, backoff="loo").fit(X, y).choice_["backoff"]
    assert set(chosen) == set(choice["order"]) and all(len(ms) <= 3 for ms in chosen.values())
    with pytest.raises(sqlnb.SqlnbError, match=r"structure 'kdb:3' does not keep; use structure 'skdb:3'") as e:
        est.KDependenceNB(k=3, backoff="loo").fit(X, y)
    assert len(str(e.value).splitlines()) == 1


def test_ensemble_members():
    """members_ is the model's members, each its own skdb: its ranking, every feature's
    ranked parents (the parents each kept feature uses are their first k), its (k, s) and
    m's; the ensemble has no one parent set or choice, and says where they are."""
    X, y = _data()
    clf = est.EnsembleSelectiveKDependenceNB(k_max=3).fit(X, y)
    members = clf.members_
    assert len(members) == len(clf.model_._ens.nets) == eskdb.MEMBERS
    for m, net in zip(members, clf.model_._ens.nets):
        assert m["order"] == net.order and (m["k"], m["s"]) == (net.k, net.s)
        assert all(len(ps) <= 3 and set(ps) <= set(m["order"][:r]) for r, ps in
                   ((m["order"].index(n), ps) for n, ps in m["parents"].items()))
        used = {c: list(p) if isinstance(p, tuple) else [p] for c, p in net.parent.items()}
        assert used == {c: m["parents"][c][:m["k"]] for c in m["order"][:m["s"]] if m["k"] and m["parents"][c]}
        assert set(m["backoff"]) == set(m["order"]) and m["backoff"] == net.choice["backoff"]
    assert len({tuple(m["order"]) for m in members}) > 1  # the draws differ
    for attribute in ("parents_", "choice_"):
        with pytest.raises(AttributeError, match="see members_"):
            getattr(clf, attribute)


@pytest.mark.parametrize("cls, params", [(est.AveragedOneDependenceNB, {}), (est.KDependenceNB, {"k": 1}),
                                         (est.SelectiveKDependenceNB, {"k_max": 1}),
                                         (est.EnsembleSelectiveKDependenceNB, {"k_max": 2})])
def test_partial_fit_in_batches_equals_fit(cls, params):
    """Categorical columns (no cut points to move; KDB(1)'s parents stay those of the whole
    data on these rows), class 2 first seen in batch 3."""
    X, y = _data(300, seed=1)
    order = np.argsort(y == 2, kind="stable")  # class 2's rows last
    X, y = X[order], y[order]
    whole = cls(**params).fit(X, y)
    online = cls(**params)
    for b in np.array_split(np.arange(len(y)), 5):
        online.partial_fit(X[b], y[b])
    np.testing.assert_array_equal(online.classes_, whole.classes_)
    np.testing.assert_allclose(online.predict_proba(X), whole.predict_proba(X), rtol=0, atol=1e-9)


def test_averaged_structures_refuse_one_structure_in_one_line():
    X, y = _data(60)
    for bad in ("tan", "tan+tan", "tan+qda", 3):
        with pytest.raises(est.EstimatorInputError) as e:
            est.AveragedStructuresNB(structures=bad).fit(X, y)
        assert len(str(e.value).splitlines()) == 1 and "+" in str(e.value)


@pytest.mark.parametrize("cls", [est.AveragedOneDependenceNB, est.KDependenceNB, est.AveragedStructuresNB])
def test_zero_weight_rows_are_dropped_rows_when_they_bring_no_new_value(cls):
    """The reason given for the one expected failure of scikit-learn's checks
    (check_sample_weight_equivalence_on_dense_data): a row of weight 0 changes nothing unless
    it brings a value (or a cut point) no other row has."""
    X, y = _data(90, seed=2)
    w = np.ones(len(y))
    w[:15] = 0
    assert all(set(X[:15, j]) <= set(X[15:, j]) for j in range(X.shape[1]))
    a = cls(bins=None).fit(X, y, sample_weight=w).predict_proba(X)
    b = cls(bins=None).fit(X[15:], y[15:]).predict_proba(X)
    np.testing.assert_allclose(a, b, rtol=0, atol=TOL)
