"""Naive Bayes with discriminatively learnt weights (``model="weighted"``, WANBIA-C in its
one-weight-per-value-and-class form, :mod:`sqlnb.models.naive_bayes.weighted`).

The oracle is written here from the module's formulas, without sqlnb's code: naive Bayes's
log-probabilities from the rows, a dense design matrix per class, and Newton's method on
the penalised conditional log loss with a dense Hessian. Its probabilities equal the
model's within 1e-9 on rows with NULLs and values never seen in training. Then: the λ
chosen by cross-validation, the limit λ → ∞ (naive Bayes), the stored round trip, the rows'
count and order, the exported SELECT in SQLite, PostgreSQL and Spark, the update, the
refusals and the command line.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.models.naive_bayes.weighted import L2_GRID, UpdateKeepsWeights, WeightedNaiveBayes
from support.cli import invoke, run_process
from support.discrete_oracle import assert_rows_keep_count_and_order
from support.structured import CLASSES, assert_engine_proba, class_scores, registered, sqlite_input, tan_table


FEATURES = ["a", "b", "e", "flag", "noise"]
KINDS = {name: "categorical" for name in FEATURES}


@pytest.fixture(scope="module")
def data():
    return registered(tan_table(600, 0), tan_table(300, 1, unseen=True))


def fit(con, **params):
    return sqlnb.fit("train", "y", con=con, model="weighted", features=FEATURES, feature_kinds=KINDS, **params)


# -- the oracle -----------------------------------------------------------------------------
def oracle(train: pa.Table, test: pa.Table, l2: float, alpha: float = 1.0) -> np.ndarray:
    """Class probabilities of ``test``'s rows under the weighted model fitted on ``train``."""
    rows = [r for r in train.to_pylist() if r["y"] is not None]
    C = len(CLASSES)
    y = np.array([CLASSES.index(r["y"]) for r in rows])
    values = {f: sorted({r[f] for r in rows if r[f] is not None}, key=repr) for f in FEATURES}
    # naive Bayes: ln π_c and ln θ_{f,c,v} = ln (N_cfv + α) − ln (N_cf + α V_f)
    log_prior = np.log(np.bincount(y, minlength=C) / len(y))
    log_theta = {}
    for f in FEATURES:
        n = np.zeros((C, len(values[f])))
        for r, c in zip(rows, y):
            if r[f] is not None:
                n[c, values[f].index(r[f])] += 1
        log_theta[f] = np.log(n + alpha) - np.log(n.sum(axis=1, keepdims=True) + alpha * len(values[f]))
    # one parameter per (class, prior) and (class, feature, value); class c's design row
    # holds ln π_c and ln θ at the row's values, zeros elsewhere (a NULL or unseen value: none)
    layout = [("prior", c, None) for c in range(C)] + [(f, c, v) for f in FEATURES for c in range(C)
                                                      for v in range(len(values[f]))]
    place = {key: i for i, key in enumerate(layout)}
    p = len(layout)

    def design(table_rows):
        X = np.zeros((C, len(table_rows), p))
        for i, r in enumerate(table_rows):
            for c in range(C):
                X[c, i, place["prior", c, None]] = log_prior[c]
                for f in FEATURES:
                    if r[f] in values[f]:
                        v = values[f].index(r[f])
                        X[c, i, place[f, c, v]] = log_theta[f][c, v]
        return X

    X = design(rows)
    Y = np.eye(C)[y]

    def loss(w):
        S = np.einsum("cip,p->ic", X, w)
        top = S.max(axis=1)
        return np.mean(top + np.log(np.exp(S - top[:, None]).sum(axis=1)) - S[np.arange(len(y)), y]) \
            + l2 / 2 * np.sum((w - 1) ** 2)

    w = np.ones(p)
    for _ in range(100):  # damped Newton: halve the step until the loss decreases
        S = np.einsum("cip,p->ic", X, w)
        P = np.exp(S - S.max(axis=1, keepdims=True))
        P /= P.sum(axis=1, keepdims=True)
        g = np.einsum("ic,cip->p", P - Y, X) / len(y) + l2 * (w - 1)
        H = (np.einsum("ic,cip,ciq->pq", P, X, X)
             - np.einsum("ic,id,cip,diq->pq", P, P, X, X)) / len(y) + l2 * np.eye(p)
        step, t, f = np.linalg.solve(H, g), 1.0, loss(w)
        while loss(w - t * step) > f and t > 1e-10:
            t /= 2
        w -= t * step
        if np.max(np.abs(t * step)) < 1e-13:
            break
    S = np.einsum("cip,p->ic", design(test.to_pylist()), w)
    P = np.exp(S - S.max(axis=1, keepdims=True))
    return P / P.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("l2", [1e-1, 1e-3])
def test_probabilities_equal_an_independent_implementation(data, l2):
    con, train, test = data
    model = fit(con, l2=l2)
    assert isinstance(model, WeightedNaiveBayes) and model.l2 == l2
    got = class_scores(model, "test", con, "proba")
    assert test["a"].null_count and "a_new" in test["a"].to_pylist()  # NULL and unseen values are scored
    np.testing.assert_allclose(got, oracle(train, test, l2), rtol=0, atol=1e-9)


def test_a_column_null_in_every_training_row_adds_no_term(data):
    """A categorical feature without one training value (kept, or listed) has no position
    for any row, so it adds no term and no weight: the probabilities, with λ given and
    chosen by cross-validation, are those of the model without it. Its positions were an
    ENUM cast of no values, which DuckDB refuses to bind."""
    con, train, test = data
    for name, table in (("train", train), ("test", test)):
        con.register(f"{name}_empty", table.append_column("empty", pa.nulls(table.num_rows, pa.string())))
    for params in ({"l2": 1e-3}, {}):
        with_empty = sqlnb.fit("train_empty", "y", con=con, model="weighted", features=[*FEATURES, "empty"],
                               feature_kinds={**KINDS, "empty": "categorical"}, **params)
        without = fit(con, **params)
        assert with_empty.l2 == without.l2
        np.testing.assert_allclose(class_scores(with_empty, "test_empty", con, "proba"),
                                   class_scores(without, "test", con, "proba"), rtol=0, atol=1e-12)


def test_a_class_of_one_row_is_cross_validated(data):
    """A class of one training row: the fit takes the strongest λ (a note); a
    cross-validation fold whose training rows lack the class fits the weights of the
    classes present, the absent class's left at 1 under its −inf log-prior (probability 0,
    as naive Bayes's fold model). Its weights equal those of a fit on the rows of the
    classes present; ``sqlnb cv`` ran into 'every cross-validation fold leaves a class
    without training weight' before."""
    from sqlnb.engines import as_engine
    from sqlnb.models.naive_bayes import weighted
    from sqlnb.source import Table, resolve
    con, train, _ = data
    rare = train.slice(0, 1).set_column(train.schema.get_field_index("y"), "y", pa.array(["k9"]))
    con.register("with_rare", pa.concat_tables([train, rare]))
    result = sqlnb.cross_validate("with_rare", "y", con=con, model="weighted", features=FEATURES,
                                  feature_kinds=KINDS)
    (point,) = result.results
    assert result.folds == 5 and len(point["accuracy"]) == 5 and np.all(np.isfinite(point["accuracy"]))
    # the fit over the classes present, against the public fit on those rows alone
    model = sqlnb.fit("with_rare", "y", con=con, model="weighted", features=FEATURES, feature_kinds=KINDS, l2=0.1)
    assert model.classes == [*CLASSES, "k9"]
    nb = model.naive_bayes()
    patterns = weighted.read_patterns(as_engine(con), resolve(Table("train"), con), "y", None, nb.features, nb.stats)
    beta = weighted.fit_weights(weighted.naive_bayes_on(nb, patterns), patterns, 0.1)
    alone = fit(con, l2=0.1)
    K, present = 4, np.array([True, True, True, False])
    of_class = np.concatenate([np.arange(K)] + [np.repeat(np.arange(K), len(nb.stats.features[f].values))
                                                for f in FEATURES])
    np.testing.assert_array_equal(beta[~present[of_class]], 1.0)
    np.testing.assert_allclose(beta[present[of_class]], np.concatenate(
        [alone.prior_weights] + [alone.weights[f].ravel() for f in FEATURES]), rtol=0, atol=1e-9)


def test_the_weights_move_the_probabilities_and_a_huge_penalty_gives_naive_bayes(data):
    con, _, _ = data
    nb = class_scores(sqlnb.fit("train", "y", con=con, features=FEATURES, feature_kinds=KINDS), "test", con, "proba")
    weighted = class_scores(fit(con, l2=1e-3), "test", con, "proba")
    assert np.max(np.abs(weighted - nb)) > 0.05
    np.testing.assert_allclose(class_scores(fit(con, l2=1e9), "test", con, "proba"), nb, rtol=0, atol=1e-8)


def test_l2_is_chosen_by_cross_validation_on_the_training_rows(data):
    con, _, _ = data
    model = fit(con)
    tried = model.report["l2_cv"]
    assert [t["l2"] for t in tried] == list(L2_GRID)
    best = min(tried, key=lambda t: t["cv_log_loss"])
    assert model.l2 == best["l2"]
    assert all(0 < t["cv_log_loss"] < 2 and 0 <= t["cv_error"] <= 1 for t in tried)
    # the chosen λ's model is the fit with that λ given (the same patterns, read without folds)
    np.testing.assert_allclose(class_scores(model, "test", con, "proba"),
                               class_scores(fit(con, l2=model.l2), "test", con, "proba"), rtol=0, atol=1e-12)


@pytest.mark.parametrize("K", [2, 3])
def test_the_gradient_and_hessian_are_the_objectives_derivatives(K):
    """Against central differences of the objective (two classes take the shared-count path)."""
    from sqlnb.models.naive_bayes.weighted import Objective, Patterns
    rng = np.random.default_rng(K)
    shapes, P = [3, 4, 2], 80
    tables = [np.log(rng.dirichlet(np.ones(V), size=K)) for V in shapes]
    codes = np.stack([rng.integers(0, V + 1, P) for V in shapes], axis=1)  # V: missing
    patterns = Patterns(rng.integers(0, K, P), codes, rng.integers(1, 4, P).astype(float), np.zeros(P, dtype=int))
    obj = Objective(np.log(rng.dirichlet(np.ones(K))), tables, patterns, 0.01)
    beta = rng.normal(1, 0.3, obj.size())
    _, g, probabilities = obj.value_grad(beta)
    h, eye = 1e-6, np.eye(obj.size())
    numeric_g = [(obj.value_grad(beta + h * e)[0] - obj.value_grad(beta - h * e)[0]) / (2 * h) for e in eye]
    numeric_h = [(obj.value_grad(beta + h * e)[1] - obj.value_grad(beta - h * e)[1]) / (2 * h) for e in eye]
    np.testing.assert_allclose(g, numeric_g, rtol=0, atol=1e-8)
    np.testing.assert_allclose(obj.hessian(probabilities), np.array(numeric_h), rtol=0, atol=1e-8)
    v = rng.normal(size=obj.size())
    np.testing.assert_allclose(obj.hess_vec(probabilities, v), obj.hessian(probabilities) @ v, rtol=0, atol=1e-12)


def test_a_hessian_counts_each_pair_of_features_once_per_pair_of_distinct_classes(monkeypatch):
    """The Hessian's cost: ``K(K − 1)/2 · F(F + 1)/2`` bincounts over the patterns (a class
    with itself is minus its others, a feature with itself its own count), not one per
    ordered pair of classes and features; the gradient and the Hessian equal their
    derivatives (test above)."""
    from sqlnb.models.naive_bayes.weighted import Objective, Patterns
    rng = np.random.default_rng(0)
    K, shapes, P = 4, [3, 4, 2], 50
    codes = np.stack([rng.integers(0, V + 1, P) for V in shapes], axis=1)
    patterns = Patterns(rng.integers(0, K, P), codes, np.ones(P), np.zeros(P, dtype=int))
    obj = Objective(np.log(np.full(K, 1 / K)), [np.log(rng.dirichlet(np.ones(V), size=K)) for V in shapes],
                    patterns, 0.01)
    _, _, probabilities = obj.value_grad(np.ones(obj.size()))
    calls, bincount = [], np.bincount
    monkeypatch.setattr(np, "bincount", lambda *a, **kw: calls.append(1) or bincount(*a, **kw))
    obj.hessian(probabilities)
    assert len(calls) == K * (K - 1) // 2 * len(shapes) * (len(shapes) + 1) // 2


def test_the_cross_validation_makes_each_folds_terms_once(data, monkeypatch):
    """choose_l2 builds one objective per fold for the fits along the λ path and one for the
    held-out rows (its λ path shares the fold's terms), not one per fold and λ."""
    from sqlnb.models.naive_bayes import weighted
    con, _, _ = data
    nb = sqlnb.fit("train", "y", con=con, features=FEATURES, feature_kinds=KINDS)
    made, init = [], weighted.Objective.__init__
    monkeypatch.setattr(weighted.Objective, "__init__", lambda self, *a, **kw: made.append(1) or init(self, *a, **kw))
    from sqlnb.engines import as_engine
    from sqlnb.source import read_with
    engine = as_engine(con)
    source = engine.resolve(read_with("train", keep_text=("y",)))
    patterns = weighted.read_patterns(engine, source, "y", None, nb.features, nb.stats)
    tried = weighted.choose_l2(nb, patterns.dealt(5))
    assert [t["l2"] for t in tried] == list(L2_GRID) and len(made) == 2 * 5


def test_the_cross_validation_stops_its_fits_once_their_losses_are_exact_enough_to_rank(data, monkeypatch):
    """The fits that rank λ stop after a Newton step of RANKING_TOL: the held-out losses and
    errors equal those of fits run to 1e-12 within 1e-9, in fewer Newton steps than stopping
    at a step of 1e-7 takes (quadratic convergence: the step before is already that close)."""
    from sqlnb.engines import as_engine
    from sqlnb.models import newton as newton_module
    from sqlnb.models.naive_bayes import weighted
    from sqlnb.source import read_with
    con, _, _ = data
    nb = sqlnb.fit("train", "y", con=con, features=FEATURES, feature_kinds=KINDS)
    engine = as_engine(con)
    patterns = weighted.read_patterns(engine, engine.resolve(read_with("train", keep_text=("y",))), "y", None,
                                      nb.features, nb.stats).dealt(5)
    steps = []

    def counted(*args, **kwargs):
        beta, it = newton_module.newton(*args, **kwargs)
        steps.append(it)
        return beta, it

    monkeypatch.setattr(weighted, "newton", counted)
    runs = []
    for tol in (weighted.RANKING_TOL, 1e-7, 1e-12):
        monkeypatch.setattr(weighted, "RANKING_TOL", tol)
        steps.clear()
        runs.append((weighted.choose_l2(nb, patterns), sum(steps)))
    (ranked, fewer), (_, at_1e7), (exact, _) = runs
    assert fewer < at_1e7
    for a, b in zip(ranked, exact):
        assert a["l2"] == b["l2"] and abs(a["cv_log_loss"] - b["cv_log_loss"]) < 1e-9
        assert abs(a["cv_error"] - b["cv_error"]) < 1e-9


def test_the_cross_validation_deals_each_patterns_rows_to_stratified_folds():
    """Patterns.dealt: every row in exactly one fold, each class's rows spread over the folds
    as evenly as StratifiedKFold spreads them (sizes differ by at most one), a pattern's
    weight split in proportion to its rows, and the deal fixed by the seed and by the
    patterns, not by the order an engine returned them in."""
    from sqlnb.models.naive_bayes.weighted import Patterns
    rng = np.random.default_rng(0)
    P = 60
    y, rows = rng.integers(0, 3, P), rng.integers(1, 9, P).astype(float)
    patterns = Patterns(y, rng.integers(0, 4, (P, 2)), 0.5 * rows, np.zeros(P, dtype=np.int64), rows)
    dealt = patterns.dealt(5, seed=1)
    for c in range(3):
        sizes = [dealt.rows[(dealt.y == c) & (dealt.fold == f)].sum() for f in range(5)]
        assert sum(sizes) == rows[y == c].sum() and max(sizes) - min(sizes) <= 1
    np.testing.assert_allclose(dealt.n, 0.5 * dealt.rows)
    assert dealt.n.sum() == patterns.n.sum()
    again = patterns.dealt(5, seed=1)
    assert all(np.array_equal(getattr(again, a), getattr(dealt, a)) for a in ("y", "codes", "n", "fold"))
    assert not np.array_equal(patterns.dealt(5, seed=2).fold, dealt.fold)
    # the deal is the patterns', whatever order the engine returned them in
    shuffled = patterns.where(rng.permutation(P))
    assert sorted(zip(*(getattr(shuffled.dealt(5, seed=1), a).tolist() for a in ("y", "n", "fold")),
                      map(tuple, shuffled.dealt(5, seed=1).codes.tolist()))) == sorted(
        zip(*(getattr(dealt, a).tolist() for a in ("y", "n", "fold")), map(tuple, dealt.codes.tolist())))


def test_numeric_columns_are_binned_by_mdl_unless_told_otherwise(data):
    con, _, _ = data
    model = sqlnb.fit("train", "y", con=con, model="weighted", features=[*FEATURES, "g"], feature_kinds=KINDS,
                      l2=1e-2)
    assert {f.name: f.kind for f in model.features}["g"] == "binned"
    quantile = sqlnb.fit("train", "y", con=con, model="weighted", features=["a", "g"], bins="quantile:4", l2=1e-2)
    assert len(next(f for f in quantile.features if f.name == "g").edges) == 3


def test_a_stored_model_scores_as_before(data, tmp_path):
    con, _, _ = data
    model = fit(con, l2=1e-2)
    db = str(tmp_path / "m.duckdb")
    model.save(db, "w")
    loaded = sqlnb.load(db, "w")
    assert isinstance(loaded, WeightedNaiveBayes) and loaded.l2 == 1e-2
    np.testing.assert_array_equal(class_scores(loaded, "test", con, "jll"), class_scores(model, "test", con, "jll"))
    for name in model.weights:
        np.testing.assert_array_equal(loaded.weights[name], model.weights[name])
    assert [m["kind"] for m in sqlnb.list_models(db)] == ["weighted_naive_bayes"]


def test_rows_keep_count_and_order(data):
    con, _, test = data
    assert_rows_keep_count_and_order(fit(con, l2=1e-2), test, con)


def test_update_merges_the_counts_and_keeps_the_weights(data):
    con, train, _ = data
    con.register("first", train.slice(0, 400))
    con.register("second", train.slice(400))
    model = sqlnb.fit("first", "y", con=con, model="weighted", features=FEATURES, feature_kinds=KINDS, l2=1e-2)
    more = sqlnb.fit("second", "y", con=con, features=FEATURES, feature_kinds=KINDS)
    with pytest.warns(UpdateKeepsWeights, match="refit to learn them on all rows"):
        updated = model.merge(more)
    whole = sqlnb.fit("train", "y", con=con, features=FEATURES, feature_kinds=KINDS)
    for f in FEATURES:  # the counts are the refit's, exactly
        np.testing.assert_array_equal(updated.stats.features[f].counts, whole.stats.features[f].counts)
        old = dict(zip(model.stats.features[f].values, model.weights[f].T.tolist()))
        for v, w in zip(updated.stats.features[f].values, updated.weights[f].T.tolist()):
            assert w == old.get(v, [1.0] * len(CLASSES))
    np.testing.assert_array_equal(updated.prior_weights, model.prior_weights)
    # through the update workflow (sqlnb update): still a weighted model, stored as one
    with pytest.warns(UpdateKeepsWeights):
        again = sqlnb.update(model, "second", con=con)
    assert isinstance(again, WeightedNaiveBayes) and again.l2 == model.l2
    np.testing.assert_array_equal(class_scores(again, "test", con, "proba"), class_scores(updated, "test", con, "proba"))


def test_an_update_that_moves_cut_points_is_refused(data):
    """Weights are learnt per bin: new cut points would give them to other values."""
    con, train, _ = data
    con.register("low", train.filter(pa.compute.less(train["g"], 0.5)))
    con.register("high", train.filter(pa.compute.greater_equal(train["g"], 0.5)))
    model = sqlnb.fit("low", "y", con=con, model="weighted", features=["a", "g"], bins="quantile:3", l2=1e-2)
    with pytest.warns(UpdateKeepsWeights), \
            pytest.raises(SqlnbError, match=r"the update moves the cut points of binned column 'g' .* refit the model"):
        sqlnb.update(model, "high", con=con)


def test_refusals(data):
    con, _, _ = data
    with pytest.raises(SqlnbError, match=r"needs discrete features, and column 'g' is modelled as gaussian"):
        sqlnb.fit("train", "y", con=con, model="weighted", features=["a", "g"], feature_kinds={"g": "gaussian"})
    with pytest.raises(SqlnbError, match=r"structure 'tan' is not supported"):
        fit(con, structure="tan")
    for bad in (0, -1.0, float("inf"), True):
        with pytest.raises(SqlnbError, match=r"l2 must be a positive finite number"):
            fit(con, l2=bad)
    with pytest.raises(SqlnbError, match=r"l2 is the penalty of the weights of model 'weighted'"):
        sqlnb.fit("train", "y", con=con, l2=0.1)
    model = fit(con, l2=1e-2)
    for call, what in ((lambda: sqlnb.sample(model, 5), "sampling"),
                       (lambda: sqlnb.novelty_threshold(model, "train", con=con), "a novelty threshold")):
        with pytest.raises(SqlnbError, match=rf"^{what} needs the joint probability p\(x, class\) of a generative "
                                             r"model; the learnt weights"):
            call()
    with pytest.raises(SqlnbError, match=r"to change alpha refit it"):
        model.with_params(alpha=2.0)
    with pytest.raises(SqlnbError, match=r"refit it on the features you want"):
        model.select(["a"])


# -- the scikit-learn estimator ------------------------------------------------------------
def test_the_estimator_is_the_library_model(data, tmp_path):
    import pickle

    from sqlnb.estimators import WeightedNB, load
    con, train, test = data
    rows = train.filter(pa.compute.is_valid(train["y"]))
    X = rows.select(FEATURES).to_pandas()
    clf = WeightedNB(l2=1e-2, feature_kinds=KINDS).fit(X, rows["y"].to_pylist())
    model = fit(con, l2=1e-2)
    Xt = test.select(FEATURES).to_pandas()
    np.testing.assert_allclose(clf.predict_proba(Xt), class_scores(model, "test", con, "proba"), rtol=0, atol=1e-12)
    assert set(clf.weights_) == set(FEATURES) and clf.weights_["a"].shape == (3, 4)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(clf)).predict_proba(Xt), clf.predict_proba(Xt))
    model.save(str(tmp_path / "m.duckdb"), "w")
    loaded = load(str(tmp_path / "m.duckdb"), "w")
    assert isinstance(loaded, WeightedNB) and loaded.l2 == 1e-2
    assert not hasattr(clf, "partial_fit")  # the weights are learnt on the rows fit is given


# -- cross-validation -----------------------------------------------------------------------
def test_cross_validation_equals_fold_by_fold_fits(data):
    """Each fold's accuracy is that of the weighted model fitted on the other folds' rows
    (l2 given by the grid); without l2 each fold model chooses λ on its training folds."""
    from support.structured import fold_views
    con, _, _ = data
    r = sqlnb.cross_validate("train", "y", con=con, model="weighted", folds=3, key=["rid"],
                             grid={"l2": [1e-1, 1e-3]}, features=FEATURES, feature_kinds=KINDS)
    for i, (fit_i, held_i) in enumerate(fold_views(con)):
        for g, l2 in enumerate((1e-1, 1e-3)):
            model = sqlnb.fit(fit_i, "y", con=con, model="weighted", features=FEATURES, feature_kinds=KINDS, l2=l2)
            rows = model.score(held_i, con=con, outputs=("prediction",), keep=["y"]).fetchall()
            assert r.results[g]["params"] == {"l2": l2}
            assert abs(r.results[g]["accuracy"][i] - sum(a == b for a, b in rows) / len(rows)) < 1e-12
    assert isinstance(r.best_model, WeightedNaiveBayes) and r.best_model.l2 == r.best_params["l2"]
    nested = sqlnb.cross_validate("train", "y", con=con, model="weighted", folds=3, key=["rid"],
                                  features=FEATURES, feature_kinds=KINDS)
    assert len(nested.results) == 1 and 0.5 < nested.results[0]["mean_accuracy"] <= 1
    assert [t["l2"] for t in nested.best_model.report["l2_cv"]] == list(L2_GRID)


# -- other dialects -----------------------------------------------------------------------
def test_export_runs_in_sqlite(data):
    con, _, test = data
    model = fit(con, l2=1e-2)
    query = model.to_sql("sqlite", source="input", outputs=("proba",), key="rid")
    got = np.array([r[-3:] for r in sqlite_input(test).execute(query).fetchall()], dtype=float)
    np.testing.assert_allclose(got, class_scores(model, "test", con, "proba"), rtol=0, atol=1e-12)


def _engine_check(engine, model, want):
    fitted = sqlnb.fit("train", "y", con=engine, model="weighted", features=FEATURES, feature_kinds=KINDS,
                       l2=model.l2)  # the patterns read by the engine itself
    for f in FEATURES:
        np.testing.assert_allclose(fitted.weights[f], model.weights[f], rtol=0, atol=1e-9)
    assert_engine_proba(fitted.score("test", con=engine, outputs=("proba",), key="rid"), want, CLASSES, 1e-9)
    assert_engine_proba(model.score("test", con=engine, outputs=("proba",), key="rid"), want, CLASSES, 1e-12)


@pytest.mark.postgres
def test_fit_and_score_in_postgres(data):
    from support.engines import postgres_engine
    con, train, test = data
    model = fit(con, l2=1e-2)
    with postgres_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, model, class_scores(model, "test", con, "proba"))


@pytest.mark.spark  # starts a Spark session
def test_fit_and_score_in_spark(data):
    from support.engines import spark_engine
    con, train, test = data
    model = fit(con, l2=1e-2)
    with spark_engine({"train": train, "test": test}) as engine:
        _engine_check(engine, model, class_scores(model, "test", con, "proba"))


def test_the_dbt_macro_scores_as_sqlnb_score(data, tmp_path):
    from sqlnb.workflows import dbt
    from test_dbt import _macro_sql
    con, _, _ = data
    model = fit(con, l2=1e-2)
    model.save(str(tmp_path / "m.duckdb"), "w")  # a stored model: the package records its fingerprint
    model = sqlnb.load(str(tmp_path / "m.duckdb"), "w")
    select = _macro_sql(dbt.package_files(model, "w"), "w", '"test"', ["rid"])
    got = con.sql(f'SELECT * FROM ({select}) ORDER BY "rid"').fetchall()
    want = model.score("test", con, outputs=("proba", "prediction"), keep=["rid"]).fetchall()
    assert len(got) == len(want) == 300 and got == sorted(want)


# -- the command line ---------------------------------------------------------------------
def test_cli_fit_score_show_sql_in_separate_processes(tmp_path):
    import pyarrow.csv as csv
    train, test = tan_table(400, 2), tan_table(50, 3, unseen=True)
    csv.write_csv(train.drop(["g"]), tmp_path / "train.csv")
    csv.write_csv(test.drop(["g", "y"]), tmp_path / "test.csv")
    store = f"{tmp_path / 'm.duckdb'}:w"
    fitted = run_process("fit", str(tmp_path / "train.csv"), "--label", "y", "--kind", "weighted", "--l2", "0.01",
                         "--exclude", "rid", "--feature-kind", "flag=categorical", "--model", store)
    assert fitted.returncode == 0, fitted.stderr
    scored = run_process("score", str(tmp_path / "test.csv"), "--model", store, "--out", str(tmp_path / "s.csv"),
                         "--keep", "rid")
    assert scored.returncode == 0, scored.stderr
    rows = (tmp_path / "s.csv").read_text().splitlines()
    assert len(rows) == 51 and [r.split(",")[0] for r in rows[1:]] == [str(i) for i in range(50)]
    shown = run_process("show", "--model", store, "--format", "json", "--params")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["kind"] == "weighted_naive_bayes"
    exported = run_process("sql", "--model", store, "--dialect", "sqlite", "--source", "input")
    assert exported.returncode == 0 and exported.stdout.lstrip().upper().startswith(("SELECT", "WITH"))
    wrong = invoke("fit", str(tmp_path / "train.csv"), "--label", "y", "--l2", "0.1", "--model", store)
    assert wrong.exit_code == 2 and "--l2 applies to --kind weighted only" in wrong.stderr
