"""How the weights of ``model="weighted"`` are fitted when the rows are many
(:mod:`sqlnb.models.naive_bayes.weighted`, :func:`sqlnb.models.newton.newton`): rows that
hardly repeat are read without grouping them, Newton's first step is solved with a Hessian
over a sample of the patterns and later steps reuse the last exact one, and the objective
reads its features in groups. Each route reaches the optimum the plain one reaches.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.models.naive_bayes import weighted, weighted_objective
from support.structured import registered, tan_table

FEATURES = ["c0", "c1", "c2", "c3"]


def distinct_table(n: int, seed: int) -> pa.Table:
    """Rows that hardly repeat: three columns of 40–60 values leaning on the class, one of
    three values with NULLs (positions past 255 / 16 would overflow a narrow product)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)

    def column(values: int) -> list:
        v = np.where(rng.random(n) < 0.2, (y * 7) % values, rng.integers(0, values, n))
        return [f"v{x}" for x in v]

    c3 = [None if rng.random() < 0.1 else f"w{x}" for x in rng.integers(0, 3, n)]
    return pa.table({"y": [f"k{c}" for c in y], "c0": column(60), "c1": column(50), "c2": column(40), "c3": c3})


@pytest.fixture(scope="module")
def data():
    return registered(distinct_table(3000, 0), distinct_table(500, 1))


def fit(con, table="train", **params):
    return sqlnb.fit(table, "y", con=con, model="weighted", features=FEATURES,
                     feature_kinds={f: "categorical" for f in FEATURES}, l2=1e-3, **params)


def weights(model) -> np.ndarray:
    return np.concatenate([model.prior_weights] + [model.weights[f.name].ravel() for f in model.features])


def test_rows_that_hardly_repeat_are_read_ungrouped_to_the_same_weights(data, monkeypatch):
    """With λ given, DuckDB returns the rows themselves once a sample says they hardly
    repeat (from :data:`UNGROUPED_FROM` rows): a pattern per row, of weight 1, positions in
    one byte; the objective is the same sum, so the weights equal the grouped fit's."""
    con, train, _ = data
    grouped = fit(con)
    assert grouped.report["patterns"] < train.num_rows  # a few rows repeat
    monkeypatch.setattr(weighted, "UNGROUPED_FROM", 1)
    read = []
    real = weighted.read_patterns
    monkeypatch.setattr(weighted, "read_patterns", lambda *a, **kw: read.append(real(*a, **kw)) or read[-1])
    ungrouped = fit(con)
    (patterns,) = read
    assert ungrouped.report["patterns"] == len(patterns.y) == train.num_rows
    assert np.all(patterns.n == 1) and patterns.codes.dtype == np.uint8
    np.testing.assert_allclose(weights(ungrouped), weights(grouped), rtol=0, atol=1e-10)
    # rows that repeat (a few values per column) are grouped in the engine all the same
    con.register("repeating", tan_table(3000, 0))
    few = sqlnb.fit("repeating", "y", con=con, model="weighted", features=["a", "b", "e", "noise"],
                    feature_kinds={f: "categorical" for f in ["a", "b", "e", "noise"]}, l2=1e-3)
    assert few.report["patterns"] < 1000


def test_the_cross_validation_reads_grouped_patterns(data, monkeypatch):
    """λ chosen by cross-validation deals the patterns to folds (Patterns.dealt), which
    needs each pattern once: the rows are grouped whatever the sample says."""
    con, _, _ = data
    monkeypatch.setattr(weighted, "UNGROUPED_FROM", 1)
    flags = []
    real = weighted.read_patterns
    monkeypatch.setattr(weighted, "read_patterns",
                        lambda *a, **kw: flags.append(kw.get("distinct")) or real(*a, **kw))
    model = sqlnb.fit("train", "y", con=con, model="weighted", features=FEATURES,
                      feature_kinds={f: "categorical" for f in FEATURES})
    assert flags == [True] and model.report["patterns"] < 3000


def test_newton_starts_on_a_rough_hessian_and_reuses_the_exact_one(data, monkeypatch):
    """The first step's Hessian is over every m-th pattern (about ROUGH_PATTERNS of them),
    the next is exact, and the steps after reuse it while they shrink the gradient fast:
    fewer Hessians than steps, and the weights of Newton's method with a Hessian per step."""
    con, _, _ = data
    made, steps = [], []
    real_hessian, real_newton = weighted.Objective.hessian, weighted.newton

    def counted_hessian(self, P, every=1):
        made.append(every)
        return real_hessian(self, P, every)

    def counted_newton(*args, **kwargs):
        beta, it = real_newton(*args, **kwargs)
        steps.append(it)
        return beta, it

    monkeypatch.setattr(weighted.Objective, "hessian", counted_hessian)
    monkeypatch.setattr(weighted, "newton", counted_newton)
    monkeypatch.setattr(weighted, "HESSIAN_REUSE", 0.0)
    monkeypatch.setattr(weighted_objective, "ROUGH_PATTERNS", 10 ** 9)
    plain = fit(con)
    assert made == [1] * steps[0]  # a Hessian per step, all exact
    made.clear(), steps.clear()
    monkeypatch.setattr(weighted, "HESSIAN_REUSE", 1e-3)
    monkeypatch.setattr(weighted_objective, "ROUGH_PATTERNS", 500)
    model = fit(con)
    assert made[0] == model.report["patterns"] // 500 > 1 and made[1] == 1 and len(made) < steps[0]
    np.testing.assert_allclose(weights(model), weights(plain), rtol=0, atol=1e-10)


@pytest.mark.parametrize("positions", [4, 20])
def test_every_grouping_of_the_features_gives_the_same_objective(positions, monkeypatch):
    """The scores and the gradient read the features in groups of at most GROUP_POSITIONS
    joint positions: one feature a group or two give the value, gradient, Hessian and
    Hessian-vector product of all in one group (which tests/test_weighted.py checks against
    central differences), with unequal and equal pattern weights and positions in one byte."""
    from sqlnb.models.naive_bayes.weighted import Objective, Patterns
    rng = np.random.default_rng(positions)
    K, shapes, P = 3, [3, 4, 2], 80
    tables = [np.log(rng.dirichlet(np.ones(V), size=K)) for V in shapes]
    codes = np.stack([rng.integers(0, V + 1, P) for V in shapes], axis=1).astype(np.uint8)
    prior, y, beta, v = np.log(rng.dirichlet(np.ones(K))), rng.integers(0, K, P), rng.normal(1, 0.3, 30), rng.normal(size=30)
    for n in (rng.integers(1, 4, P).astype(float), np.ones(P)):
        patterns = Patterns(y, codes, n, np.zeros(P, dtype=int))
        monkeypatch.setattr(weighted_objective, "GROUP_POSITIONS", 10 ** 6)
        whole = Objective(prior, tables, patterns, 0.01)
        monkeypatch.setattr(weighted_objective, "GROUP_POSITIONS", positions)
        split = Objective(prior, tables, patterns, 0.01)
        assert len(whole.groups) == 1 and len(split.groups) == {4: 3, 20: 2}[positions]
        (f, g, state), (f_split, g_split, state_split) = whole.value_grad(beta), split.value_grad(beta)
        assert abs(f - f_split) < 1e-13
        np.testing.assert_allclose(g_split, g, rtol=0, atol=1e-13)
        np.testing.assert_allclose(split.hessian(state_split), whole.hessian(state), rtol=0, atol=1e-13)
        np.testing.assert_allclose(split.hess_vec(state_split, v), whole.hess_vec(state, v), rtol=0, atol=1e-13)
