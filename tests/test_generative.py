"""What only a generative model can do: update = refit, adding a class,
novelty, sampling and semi-supervised EM."""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from sklearn.naive_bayes import GaussianNB

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.stats import Counts, Moments
from support.hypothesis_profiles import examples

TOL = 1e-9
KINDS = {"b": "bernoulli", "m0": "multinomial", "m1": "multinomial", "q0": "complement", "q1": "complement"}
FAMILIES = ("gaussian", "bernoulli", "multinomial", "complement", "categorical")


# -- helpers -------------------------------------------------------------------------------
# One connection for the module: opening a DuckDB connection costs more than these fits.
CON = duckdb.connect()


def fit(data, label, **kw):
    return sqlnb.fit(data, label, con=CON, **kw)


def update(model, data, **kw):
    return sqlnb.update(model, data, con=CON, **kw)


def fit_em(labelled, unlabelled=None, **kw):
    return sqlnb.fit_em(labelled, unlabelled, con=kw.pop("con", CON), **kw)


def novelty_threshold(model, data, **kw):
    return sqlnb.novelty_threshold(model, data, con=CON, **kw)


def flag_novel(model, data, **kw):
    return sqlnb.flag_novel(model, data, con=CON, **kw)


def mixed(rng, y, scale=1.0, values="abc"):
    """Rows of every family for labels ``y`` (class-dependent parameters)."""
    y = np.asarray(y)
    n = len(y)
    lvl = np.array(list(values))
    return pa.table({
        "g0": rng.normal(1000.0 * scale + y * scale, scale, n),
        "g1": rng.normal(-y * 2.0, 1.0 + y, n),
        "c": lvl[(rng.integers(0, len(lvl), n) + y) % len(lvl)],
        "b": (rng.random(n) < 0.2 + 0.25 * (y % 3)).astype(float),
        "m0": rng.poisson(1 + y, n).astype(float),
        "m1": rng.poisson(2, n).astype(float),
        "q0": rng.poisson(1 + (y % 2), n).astype(float),
        "q1": rng.poisson(2, n).astype(float),
        "y": y,
    })


def proba(model, table, con=None):
    """``proba_<class>`` of every row of ``table``, in row order (numpy, classes in order)."""
    con = con or CON
    t = table.append_column("__row", pa.array(np.arange(table.num_rows)))
    rel = model.score(t, con, outputs=("proba",), keep=["__row"]).order("__row")
    d = rel.to_arrow_table().to_pydict()
    return np.array([d[c] for c in model.proba_columns()], dtype=float).T


def assert_stats_close(a, b, rtol=TOL, rows=True):
    """Two Statistics equal up to rounding (every array, every family)."""
    assert a.classes == b.classes

    def close(x, y):
        np.testing.assert_allclose(x, y, rtol=rtol, atol=rtol * (1 + np.max(np.abs(y), initial=0)))

    close(a.class_n, b.class_n)
    if rows:
        close(a.class_rows, b.class_rows)
    assert set(a.features) == set(b.features)
    for name, s in a.features.items():
        t = b.features[name]
        assert type(s) is type(t), name
        if isinstance(s, Counts):
            assert s.values == t.values, name
            close(s.counts, t.counts)
            continue
        fields = ("n", "mean", "m2") if isinstance(s, Moments) and not rows else s.__dataclass_fields__
        for f in fields:
            if isinstance(getattr(s, f), list):  # a token bag's vocabulary
                assert getattr(s, f) == getattr(t, f), (name, f)
            else:
                close(getattr(s, f), getattr(t, f))


def split(table, cuts):
    bounds = [0, *cuts, table.num_rows]
    return [table.slice(lo, hi - lo) for lo, hi in zip(bounds[:-1], bounds[1:]) if hi > lo]


def updated(batches, decay=None, **kw):
    model = fit(batches[0], "y", feature_kinds=KINDS, **kw)
    for b in batches[1:]:
        model = update(model, b, decay=decay)
    return model


# -- 1. update equals refit ------------------------------------------------------------------
@st.composite
def batched_rows(draw):
    """``(table, cuts)``: rows of every family drawn by hypothesis (so a failure shrinks to
    its smallest table and fewest batches) and 2 to 9 batches.

    Classes 0 and 1 open the data (the first fit needs two classes); class 2 and the
    category 'z' can appear only in the second half, so a later batch brings them."""
    # The batch count first, from a list: drawn as a set's size after the table, hypothesis
    # made 60% of the examples two batches (a single update); drawn first, about a quarter.
    k = draw(st.sampled_from(range(2, 10)), label="batches")
    n = draw(st.integers(max(8, k + 1), 60), label="rows")
    cuts = sorted(draw(st.lists(st.integers(2, n - 1), min_size=k - 1, max_size=k - 1, unique=True), label="cuts"))
    scale = draw(st.sampled_from([1e-3, 1.0, 1e5]), label="scale")
    half = n // 2
    y = np.array([0, 1] + draw(st.lists(st.integers(0, 1), min_size=half - 2, max_size=half - 2))
                 + draw(st.lists(st.integers(0, 2), min_size=n - half, max_size=n - half)))

    def col(elements, dtype=np.float64):
        return draw(hnp.arrays(dtype, n, elements=elements))

    noise = st.floats(-4.0, 4.0, allow_nan=False, allow_subnormal=False)
    counts = st.integers(0, 6)
    c = draw(st.lists(st.sampled_from("abc"), min_size=half, max_size=half)) + \
        draw(st.lists(st.sampled_from("abcz"), min_size=n - half, max_size=n - half))
    table = pa.table({
        "g0": 1000.0 * scale + y * scale + col(noise) * scale,
        "g1": -2.0 * y + col(noise) * (1.0 + y),
        "c": c,
        "b": col(st.booleans(), bool).astype(float),
        "m0": col(counts, np.int64).astype(float),
        "m1": col(counts, np.int64).astype(float),
        "q0": col(counts, np.int64).astype(float),
        "q1": col(counts, np.int64).astype(float),
        "y": y,
    })
    return table, cuts


@settings(max_examples=examples(50))
@given(batched_rows())
def test_update_equals_refit_for_any_batches(drawn):
    table, cuts = drawn
    n = table.num_rows
    batches = split(table, cuts)
    late = [set(b["y"].to_pylist()) for b in batches[1:]]
    event(f"batches: {len(batches)}")
    event("rows: " + ("8-19" if n < 20 else "20-39" if n < 40 else "40-60"))
    event(f"class 2 first seen in an update: {any(2 in s for s in late)}")
    event(f"category 'z' first seen in an update: {'z' in table['c'].to_pylist()}")
    # screen=False: screening is a fit-time choice made on the rows at hand (a column constant
    # in every row is left out of the refit but not of a first fit on two rows that differ);
    # the property is about the statistics of the same features.
    refit = fit(table, "y", feature_kinds=KINDS, screen=False)
    model = updated(batches, screen=False)
    assert_stats_close(model.stats, refit.stats)
    np.testing.assert_allclose(proba(model, table), proba(refit, table), atol=TOL, rtol=0)
    assert model.report["rows"] == n and model.report.get("updates", 0) == len(batches) - 1 >= 1


def test_one_row_batches_match_sklearn_fit_not_partial_fit():
    # One row per update: each batch has one class and a zero variance. The variance
    # floor is recomputed from the merged moments, so the result is GaussianNB.fit on all
    # rows (scikit-learn's partial_fit keeps the first batch's floor, here 0).
    rng = np.random.default_rng(7)
    X = rng.normal(size=(25, 3)) * [1.0, 1e3, 1e-3]
    y = np.array([0, 1] + list(rng.integers(0, 3, 23)))
    table = pa.table({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "y": y})
    model = fit(table.slice(0, 2), "y")
    for i in range(2, 25):
        model = update(model, table.slice(i, 1))
    sk = GaussianNB().fit(X, y)
    np.testing.assert_allclose(proba(model, table), sk.predict_proba(X), atol=TOL, rtol=0)
    np.testing.assert_allclose(model.log_parameters()["x1"][1], sk.var_[:, 1], rtol=1e-12)
    assert_stats_close(model.stats, fit(table, "y").stats)


def test_update_with_weights_equals_weighted_refit():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 3, 60)
    table = mixed(rng, y).append_column("w", pa.array(rng.uniform(0.1, 2.0, 60)))
    model = fit(table.slice(0, 20), "y", feature_kinds=KINDS, weight="w")
    model = update(update(model, table.slice(20, 25)), table.slice(45))
    refit = fit(table, "y", feature_kinds=KINDS, weight="w")
    assert_stats_close(model.stats, refit.stats)
    np.testing.assert_allclose(proba(model, table), proba(refit, table), atol=TOL, rtol=0)
    with pytest.raises(SqlnbError, match="weight column 'w'"):
        update(model, table.drop(["w"]))


def test_decay_is_a_fit_weighted_by_age():
    # After fit(B0), update(B1, d), update(B2, d), a row of batch s weighs d^(2 - s).
    rng = np.random.default_rng(11)
    d = 0.5
    batches = [mixed(rng, rng.integers(0, 3, m)) for m in (30, 20, 25)]
    model = updated(batches, decay=d)
    weighted = pa.concat_tables([b.append_column("w", pa.array(np.full(b.num_rows, d ** (2 - s))))
                                 for s, b in enumerate(batches)])
    refit = fit(weighted, "y", feature_kinds=KINDS, weight="w")
    # Weighted statistics agree; the unweighted row moments are decayed too (they set
    # the variance floor), so compare probabilities without the floor.
    assert_stats_close(model.stats, refit.stats, rows=False)
    test = pa.concat_tables(batches)
    np.testing.assert_allclose(proba(model.with_params(var_smoothing=0.0), test),
                               proba(refit.with_params(var_smoothing=0.0), test), atol=TOL, rtol=0)
    assert model.report["rows"] == round(30 * d * d + 20 * d + 25)


@pytest.mark.parametrize("kind", ["multinomial", "bernoulli"])
def test_update_adds_tokens_to_a_text_bag(kind):
    rng = np.random.default_rng(12)
    words = [["cheap", "win", "money"], ["meeting", "lunch", "team"]]

    def docs(n, extra=()):
        y = rng.integers(0, 2, n)
        text = [" ".join(rng.choice(words[c] + list(extra), rng.integers(1, 6))) for c in y]
        return pa.table({"t": text, "g": rng.normal(y, 1.0), "y": y})

    first, later = docs(30), docs(20, extra=["zebra"])
    model = update(fit(first, "y", feature_kinds={"t": kind}), later)
    union = pa.concat_tables([first, later])
    refit = fit(union, "y", feature_kinds={"t": kind})
    assert "zebra" in model.stats.features["t"].terms
    assert_stats_close(model.stats, refit.stats)
    np.testing.assert_allclose(proba(model, union), proba(refit, union), atol=TOL, rtol=0)
    with pytest.raises(SqlnbError, match="reads it as a token bag of type VARCHAR"):
        update(model, union.set_column(0, "t", pa.array(np.ones(50))))
    with pytest.raises(SqlnbError, match="sampling token bags is not supported"):
        sqlnb.sample(model, 5)


@pytest.mark.parametrize("decay", [0, -0.5, 1.5, float("nan")])
def test_decay_out_of_range_is_an_error(decay):
    rng = np.random.default_rng(0)
    model = fit(mixed(rng, [0, 1, 0, 1]), "y")
    with pytest.raises(SqlnbError, match="decay must be in"):
        update(model, mixed(rng, [0, 1]), decay=decay)


def test_update_type_mismatches_are_clear_errors():
    rng = np.random.default_rng(1)
    table = mixed(rng, rng.integers(0, 2, 20))
    model = fit(table, "y", feature_kinds=KINDS)
    with pytest.raises(SqlnbError, match=r"model feature column 'g1' not found"):
        update(model, table.drop(["g1"]))
    as_text = table.set_column(0, "g0", pa.array([str(v) for v in table["g0"].to_pylist()]))
    with pytest.raises(SqlnbError, match=r"column 'g0' .* has type VARCHAR, but the model treats it as a gaussian"):
        update(model, as_text)
    cat_codes = table.set_column(table.schema.get_field_index("c"), "c", pa.array(np.arange(20)))
    with pytest.raises(SqlnbError, match=r"column 'c' .* type BIGINT, but the model's categories of it are VARCHAR"):
        update(model, cat_codes)
    text_label = table.set_column(table.schema.get_field_index("y"), "y", pa.array(["a"] * 20))
    with pytest.raises(SqlnbError, match=r"label column 'y' .* has type VARCHAR"):
        update(model, text_label)
    with pytest.raises(SqlnbError, match="label column 'y' not found"):
        update(model, table.drop(["y"]))


def test_update_keeps_the_model_saveable_and_drops_a_stale_novelty_threshold(tmp_path):
    rng = np.random.default_rng(2)
    table = mixed(rng, rng.integers(0, 2, 40))
    kinds = {k: v for k, v in KINDS.items() if v != "complement"}  # complement has no likelihood
    model = novelty_threshold(fit(table.slice(0, 20), "y", feature_kinds=kinds), table.slice(0, 20))
    new = update(model, table.slice(20))
    assert "novelty" in model.report and "novelty" not in new.report
    new.save(tmp_path / "m.duckdb", "m")
    back = sqlnb.load(tmp_path / "m.duckdb", "m")
    assert_stats_close(back.stats, new.stats, rtol=0)
    assert back.report["updates"] == 1


# -- 2. adding a class leaves the others untouched -------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_adding_a_class_leaves_other_classes_untouched(family):
    rng = np.random.default_rng(5)
    n = 30
    y = rng.integers(0, 2, n)
    if family == "categorical":
        table = pa.table({"x0": np.array(list("abc"))[rng.integers(0, 3, n)],
                          "x1": np.array(list("pq"))[rng.integers(0, 2, n)], "y": y})
        new = pa.table({"x0": ["c", "d", "d"], "x1": ["r", "p", None], "y": [2, 2, 2]})
    else:
        X = rng.poisson(2.0, (n, 3)).astype(float) if family != "gaussian" else rng.normal(size=(n, 3))
        table = pa.table({f"x{j}": X[:, j] for j in range(3)} | {"y": y})
        new = pa.table({"x0": [1.0, 4.0, 0.0], "x1": [0.0, None, 2.0], "x2": [3.0, 3.0, 1.0], "y": [2, 2, 2]})
    model = fit(table, "y", kind=family)
    grown = update(model, new)
    assert grown.classes == [0, 1, 2]
    old, kept = model.stats, grown.stats.only_classes([0, 1])
    assert np.array_equal(kept.class_n, old.class_n) and np.array_equal(kept.class_rows, old.class_rows)
    for name, s in old.features.items():
        t = kept.features[name]
        if isinstance(s, Counts):
            cols = [t.values.index(v) for v in s.values]
            assert np.array_equal(t.counts[:, cols], s.counts)
            assert not t.counts[:, [i for i in range(len(t.values)) if i not in cols]].any()
        else:
            for f in s.__dataclass_fields__:
                assert np.array_equal(getattr(t, f), getattr(s, f)), (name, f)
    # The new class's own statistics are those of its rows alone.
    only = update(fit(table, "y", kind=family), new).stats.only_classes([2])
    assert_stats_close(only, grown.stats.only_classes([2]), rtol=0)


# -- 3. novelty -------------------------------------------------------------------------------
def blobs(rng, n):
    y = rng.integers(0, 2, n)
    return pa.table({"x0": rng.normal(3.0 * y, 1.0), "x1": rng.normal(-y, 0.5 + y),
                     "c": np.array(list("abcd"))[(rng.integers(0, 3, n) + y) % 4], "y": y})


def test_novelty_flags_outliers_not_typical_rows(tmp_path):
    rng = np.random.default_rng(0)
    train = blobs(rng, 4000)
    model = novelty_threshold(fit(train, "y", unseen="bucket"), train, quantile=0.01)
    nov = model.report["novelty"]
    assert nov["quantile"] == 0.01 and nov["rows"] == 4000
    # QUANTILE_CONT: exactly 1% of the training rows lie below the 1% quantile (±1 row).
    flagged = flag_novel(model, train).aggregate("avg(novel::INT)").fetchall()[0][0]
    assert abs(flagged - 0.01) <= 1 / 4000
    fresh = flag_novel(model, blobs(rng, 4000)).aggregate("avg(novel::INT)").fetchall()[0][0]
    assert fresh < 0.02
    outliers = pa.table({"x0": [40.0, -30.0, 1.5, 0.0], "x1": [0.0, 0.0, 25.0, 0.0],
                         "c": ["a", "b", "c", "never seen"], "y": [0, 1, 0, 0]})
    rel = flag_novel(model, outliers, keep=[], outputs=("log_evidence",))
    assert rel.columns == ["log_evidence", "novel"]
    assert [r[1] for r in rel.fetchall()] == [True, True, True, True]
    # The threshold is saved with the model.
    model.save(tmp_path / "m.duckdb", "m")
    back = sqlnb.load(tmp_path / "m.duckdb", "m")
    assert back.report["novelty"] == nov
    assert [r[-1] for r in flag_novel(back, outliers, keep=[], outputs=()).fetchall()] == [True] * 4


def test_novelty_threshold_matches_numpy_quantile():
    rng = np.random.default_rng(4)
    train = blobs(rng, 501)
    model = fit(train, "y")
    ev = model.score(train, CON, outputs=("log_evidence",), keep=[]).to_arrow_table()["log_evidence"].to_numpy()
    got = novelty_threshold(model, train, quantile=0.05).report["novelty"]["threshold"]
    assert got == pytest.approx(np.quantile(ev, 0.05), rel=1e-12)


def test_novelty_errors():
    rng = np.random.default_rng(0)
    train = blobs(rng, 50)
    model = fit(train, "y")
    with pytest.raises(SqlnbError, match="no novelty threshold"):
        flag_novel(model, train)
    with pytest.raises(SqlnbError, match="between 0 and 1"):
        novelty_threshold(model, train, quantile=1.0)
    comp = fit(pa.table({"x": [1.0, 2.0, 0.0], "z": [0.0, 1.0, 3.0], "y": [0, 1, 1]}), "y", kind="complement")
    with pytest.raises(SqlnbError, match="complement"):
        novelty_threshold(comp, train)
    assert flag_novel(model, train, threshold=-math.inf).aggregate("sum(novel::INT)").fetchall()[0][0] == 0


# -- 4. sampling ------------------------------------------------------------------------------
def test_sample_recovers_the_parameters():
    rng = np.random.default_rng(8)
    y = rng.choice([0, 1, 2], 300, p=[0.5, 0.3, 0.2])
    kinds = {"b": "bernoulli", "m0": "multinomial", "m1": "multinomial"}
    model = fit(mixed(rng, y).drop(["q0", "q1"]), "y", feature_kinds=kinds)
    n = 200_000
    drawn = sqlnb.sample(model, n, seed=0)
    assert drawn.column_names == [f.name for f in model.features] + ["y"]
    refit = fit(drawn, "y", feature_kinds=kinds)
    assert refit.classes == model.classes
    pi, pi2 = np.exp(model.class_log_prior()), np.exp(refit.class_log_prior())
    np.testing.assert_array_less(np.abs(pi2 - pi), 5 * np.sqrt(pi * (1 - pi) / n))
    n_c = refit.stats.class_n
    p, q = model.log_parameters(), refit.log_parameters()
    for g in ("g0", "g1"):
        (m1, v1), (m2, v2) = p[g], q[g]
        np.testing.assert_array_less(np.abs(m2 - m1), 5 * np.sqrt(v1 / n_c))
        np.testing.assert_array_less(np.abs(v2 / v1 - 1), 5 * np.sqrt(2 / n_c))
    _, flp1, _ = p["c"]
    _, flp2, _ = q["c"]
    th1, th2 = np.exp(flp1), np.exp(flp2)
    np.testing.assert_array_less(np.abs(th2 - th1), 5 * np.sqrt(th1 * (1 - th1) / n_c[:, None]) + 1e-3)
    b1, b2 = np.exp(p["b"][0]), np.exp(q["b"][0])
    np.testing.assert_array_less(np.abs(b2 - b1), 5 * np.sqrt(b1 * (1 - b1) / n_c))
    for m in ("m0", "m1"):
        np.testing.assert_allclose(np.exp(q[m]), np.exp(p[m]), atol=0.01)
    # Document length ~ Poisson(mean count per row of the class).
    lam = (model.stats.features["m0"].total + model.stats.features["m1"].total) / model.stats.class_n
    lam2 = (refit.stats.features["m0"].total + refit.stats.features["m1"].total) / n_c
    np.testing.assert_array_less(np.abs(lam2 - lam), 5 * np.sqrt(lam / n_c))


def test_sample_is_reproducible_and_can_fix_the_class():
    rng = np.random.default_rng(9)
    model = fit(mixed(rng, rng.integers(0, 3, 60)), "y", feature_kinds=KINDS)
    a, b = sqlnb.sample(model, 500, seed=42), sqlnb.sample(model, 500, seed=42)
    assert a.equals(b)
    assert not a.equals(sqlnb.sample(model, 500, seed=43))
    only = sqlnb.sample(model, 300, classes=2, seed=1)
    assert set(only["y"].to_pylist()) == {2}
    assert sqlnb.sample(model, 300, classes="2", seed=1).equals(only)
    two = sqlnb.sample(model, 3000, classes=[0, 2], seed=1)
    assert set(two["y"].to_pylist()) == {0, 2}
    assert sqlnb.sample(model, 0).num_rows == 0
    # complement columns are counts with the class's mean length
    q = np.array(two["q0"].to_pylist()) + np.array(two["q1"].to_pylist())
    assert (q >= 0).all() and np.allclose(q, np.round(q))
    with pytest.raises(SqlnbError, match="class 7 is not one of the model's classes"):
        sqlnb.sample(model, 10, classes=7)
    with pytest.raises(SqlnbError, match="integer >= 0"):
        sqlnb.sample(model, -1)


def test_sample_keeps_boolean_and_categorical_types():
    t = pa.table({"flag": [True, False, True, True], "d": pa.array([1, 2, 2, 3], pa.int32()),
                  "y": ["a", "a", "b", "b"]})
    model = fit(t, "y", feature_kinds={"d": "categorical"})
    s = sqlnb.sample(model, 100, seed=0)
    assert s.schema.field("flag").type == pa.bool_()
    assert set(s["d"].to_pylist()) <= {1, 2, 3}
    assert set(s["y"].to_pylist()) <= {"a", "b"}


# -- 5. semi-supervised EM --------------------------------------------------------------------
def em_data(rng, n):
    y = rng.integers(0, 2, n)
    return pa.table({"g0": rng.normal(2.0 * y, 1.0), "g1": rng.normal(-1.5 * y, 1.2),
                     "c": np.array(list("abcd"))[np.minimum(rng.poisson(0.7 + 1.5 * y), 3)], "y": y})


def accuracy(model, table):
    r = model.predict(table, CON).to_arrow_table()
    return float(np.mean(np.array(r["prediction"].to_pylist()) == np.array(r["y"].to_pylist())))


@pytest.fixture(scope="module")
def em_case():
    rng = np.random.default_rng(21)
    labelled = em_data(rng, 12)
    unlabelled = em_data(rng, 1500)
    test = em_data(rng, 3000)
    em = fit_em(labelled, unlabelled.drop(["y"]), label="y", max_iter=12, tol=1e-7)
    return labelled, unlabelled, test, em


def test_em_improves_over_labelled_only_and_is_monotone(em_case):
    labelled, unlabelled, test, em = em_case
    base = fit(labelled, "y")
    assert accuracy(em, test) > accuracy(base, test) + 0.01
    rep = em.report["em"]
    assert rep["iterations"] >= 2 and rep["labelled_rows"] == 12 and rep["unlabelled_rows"] == 1500
    assert len(rep["log_likelihood"]) == rep["iterations"] + 1
    obj = np.array(rep["objective"])
    # MAP-EM never decreases its objective (up to rounding of sums over 1500 rows).
    assert np.all(np.diff(obj) >= -1e-9 * np.abs(obj[1:]))
    assert rep["log_likelihood"][-1] > rep["log_likelihood"][0]


def test_em_initial_log_likelihood_is_labelled_jll_plus_unlabelled_evidence(em_case):
    labelled, unlabelled, _, em = em_case
    base = fit(labelled, "y")
    jll = base.score(labelled, CON, outputs=("jll",), keep=["y"]).to_arrow_table().to_pydict()
    own = sum(jll[f"jll_{y}"][i] for i, y in enumerate(jll["y"]))
    ev = base.score(unlabelled, CON, outputs=("log_evidence",), keep=[]).to_arrow_table()["log_evidence"]
    ev = sum(ev.to_pylist())
    assert em.report["em"]["log_likelihood"][0] == pytest.approx(own + ev, rel=1e-12)


def test_em_m_step_is_a_weighted_fit_and_floor_uses_raw_rows(em_case):
    labelled, unlabelled, _, _ = em_case
    one = fit_em(labelled, unlabelled.drop(["y"]), label="y", max_iter=1, tol=0.0)
    assert one.report["em"]["iterations"] == 1
    # The same M-step by hand: labelled rows weight 1, each unlabelled row once per class
    # with weight p(class | x) under the labelled-only model.
    base = fit(labelled, "y")
    post = proba(base, unlabelled)
    u = unlabelled.drop(["y"])
    parts = [labelled.append_column("w", pa.array(np.ones(12)))]
    for k, c in enumerate(base.classes):
        parts.append(u.append_column("y", pa.array(np.full(u.num_rows, c))).append_column("w", pa.array(post[:, k])))
    by_hand = fit(pa.concat_tables(parts), "y", weight="w")
    assert_stats_close(one.stats, by_hand.stats, rows=False)
    # Row moments count each unlabelled row once in all: the pooled moments, hence the
    # variance floor, are those of the raw labelled + unlabelled rows.
    for g in ("g0", "g1"):
        x = np.concatenate([labelled[g].to_numpy(), unlabelled[g].to_numpy()])
        n, mean, m2 = one.stats.features[g].pooled()
        np.testing.assert_allclose([n, mean, m2], [len(x), x.mean(), ((x - x.mean()) ** 2).sum()], rtol=1e-10)


def test_em_null_labels_are_the_unlabelled_rows(em_case):
    labelled, unlabelled, test, _ = em_case
    con = duckdb.connect()
    together = pa.concat_tables([labelled, unlabelled.set_column(3, "y", pa.nulls(1500, pa.int64()))])
    a = fit_em(together, label="y", con=con, max_iter=3, tol=0.0)
    b = fit_em(labelled, unlabelled.drop(["y"]), label="y", con=con, max_iter=3, tol=0.0)
    assert_stats_close(a.stats, b.stats)
    assert a.report["em"]["unlabelled_rows"] == 1500 and a.report["null_label_rows"] == 0
    np.testing.assert_allclose(a.report["em"]["log_likelihood"], b.report["em"]["log_likelihood"], rtol=1e-12)
    # No temporary table is left behind.
    assert not [r for r in con.sql("SELECT table_name FROM duckdb_tables()").fetchall() if "sqlnb_em" in r[0]]


def test_em_degenerate_settings_and_errors(em_case):
    labelled, unlabelled, test, _ = em_case
    base = fit(labelled, "y")
    u = unlabelled.drop(["y"])
    for em in (fit_em(labelled, u, label="y", max_iter=0), fit_em(labelled, u, label="y", unlabelled_weight=0.0)):
        assert em.report["em"]["iterations"] == 0
        assert_stats_close(em.stats, base.stats, rtol=0)
    with pytest.raises(SqlnbError, match="has no rows"):
        fit_em(labelled, label="y")
    with pytest.raises(SqlnbError, match="weight"):
        fit_em(labelled, u, label="y", weight="g0")
    with pytest.raises(SqlnbError, match="unlabelled_weight"):
        fit_em(labelled, u, label="y", unlabelled_weight=-1.0)
    with pytest.raises(SqlnbError, match="column 'g1' not found"):
        fit_em(labelled, u.drop(["g1"]), label="y")
    with pytest.raises(SqlnbError, match="complement"):
        fit_em(labelled, u, label="y", kind="complement", features=["g0"])
