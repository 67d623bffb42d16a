"""Column screening never moves a model away from its definition.

Without ``features``, ``fit`` leaves out identifiers and columns whose removal changes no
probability, and says so; with no ID-like column, every naive Bayes family gives
scikit-learn's probabilities. The count table is scikit-learn's digits (1,797 rows, 64
pixel counts 0-16, columns 0, 32 and 39 zero in every row), the reported case: leaving its
constant columns out moved multinomial probabilities by 2.3e-4, complement 3.5e-6,
Bernoulli 5.6e-4. The identifier case is the reported clinical table in miniature: 467 rows,
a ``sample_id`` of 441 distinct integers in the millions beside measurements in units.
"""

from __future__ import annotations

import csv
import io
import warnings

import numpy as np
import pyarrow as pa
import pytest
from sklearn.datasets import load_digits
from sklearn.naive_bayes import BernoulliNB, CategoricalNB, ComplementNB, GaussianNB, MultinomialNB
from sklearn.preprocessing import OrdinalEncoder

import sqlnb
from sqlnb.errors import ScreeningWarning, VarianceFloorWarning
from sqlnb.models import screening
from support.cli import run_process

SKLEARN = {"multinomial": MultinomialNB, "complement": ComplementNB, "bernoulli": BernoulliNB}


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    X = X.astype(np.int64)
    assert sorted(np.flatnonzero(X.max(axis=0) == 0)) == [0, 32, 39]  # the three all-zero columns
    table = pa.table({**{f"p{j}": X[:, j] for j in range(64)}, "y": y})
    return X, y, table


def fit_noted(*args, **kwargs):
    """``sqlnb.fit`` and the notes it gave (ScreeningWarning messages)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model = sqlnb.fit(*args, **kwargs)
    return model, [str(w.message) for w in caught if issubclass(w.category, ScreeningWarning)]


def proba(model, data) -> np.ndarray:
    rel = model.predict_proba(data)
    names = [f"proba_{c}" for c in model.classes]
    rows = rel.fetchall()
    idx = [rel.columns.index(n) for n in names]
    return np.array([[r[i] for i in idx] for r in rows], dtype=float)


def predictions(model, data) -> np.ndarray:
    rel = model.predict(data)
    i = rel.columns.index("prediction")
    return np.array([r[i] for r in rel.fetchall()])


# -- (a) no ID-like column: scikit-learn's probabilities for every family -------------------

@pytest.mark.parametrize("kind", ["multinomial", "complement", "bernoulli"])
def test_count_families_keep_constant_columns_and_match_sklearn(digits, kind):
    """The all-zero columns are part of a multinomial or complement vocabulary and give a
    Bernoulli model a class-dependent absent term: kept, and the probabilities are
    scikit-learn's on all 64 columns (1e-9), with no column left out."""
    X, y, table = digits
    model, notes = fit_noted(table, "y", kind=kind)
    assert [f.name for f in model.features] == [f"p{j}" for j in range(64)]
    assert not [n for n in notes if "left out" in n], notes
    want = SKLEARN[kind]().fit(X, y).predict_proba(X)
    np.testing.assert_allclose(proba(model, table), want, rtol=0, atol=1e-9)


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_gaussian_without_features_matches_sklearn_and_says_what_it_left_out(digits):
    """A constant Gaussian column has the same mean and variance (the floor) in every class:
    leaving it out changes no probability, and the note says so; the model is
    scikit-learn's GaussianNB on all 64 columns."""
    X, y, table = digits
    model, notes = fit_noted(table, "y")
    assert {f.kind for f in model.features} == {"gaussian"}
    left = sorted(n.split("'")[1] for n in notes if "left out" in n)
    assert left == ["p0", "p32", "p39"]
    assert all("changes no probability" in n and "--keep-columns" in n for n in notes if "left out" in n)
    want = GaussianNB().fit(X, y).predict_proba(X)
    np.testing.assert_allclose(proba(model, table), want, rtol=0, atol=1e-9)


def test_categorical_without_features_matches_sklearn():
    """A constant categorical column has one category of probability 1 in every class: left
    out, and the model is CategoricalNB's on every column (codes of the training values)."""
    rng = np.random.default_rng(5)
    n = 400
    y = rng.integers(0, 3, n)
    cols = {f"c{j}": np.array(list("abcd"))[(y + rng.integers(0, 2 + j, n)) % 4] for j in range(4)}
    cols["const"] = np.full(n, "same")
    table = pa.table({**cols, "y": y})
    model, notes = fit_noted(table, "y")
    assert [n.split("'")[1] for n in notes if "left out" in n] == ["const"]
    codes = OrdinalEncoder().fit_transform(np.column_stack(list(cols.values())))
    want = CategoricalNB().fit(codes, y).predict_proba(codes)
    np.testing.assert_allclose(proba(model, table), want, rtol=0, atol=1e-9)


def test_a_constant_boolean_is_a_bernoulli_feature_and_kept():
    """Booleans are Bernoulli features by default: a constant one adds ln((N_c+α)/(N_c+2α))
    to each class, so it stays, and the model is BernoulliNB's on every column."""
    rng = np.random.default_rng(6)
    n = 300
    y = rng.integers(0, 2, n)
    X = np.column_stack([rng.random(n) < 0.2 + 0.5 * y, rng.random(n) < 0.6 - 0.3 * y, np.ones(n, bool)])
    table = pa.table({"a": X[:, 0], "b": X[:, 1], "on": X[:, 2], "y": y})
    model, notes = fit_noted(table, "y")
    assert [f.name for f in model.features] == ["a", "b", "on"] and not notes
    want = BernoulliNB().fit(X.astype(float), y).predict_proba(X.astype(float))
    np.testing.assert_allclose(proba(model, table), want, rtol=0, atol=1e-9)


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_the_cli_fit_without_features_is_sklearns_multinomial(digits, tmp_path):
    """The same through ``python -m sqlnb fit`` and ``score`` as processes: no column left
    out of the multinomial model, scikit-learn's probabilities to 1e-9."""
    import pyarrow.parquet as pq
    X, y, table = digits
    data = tmp_path / "digits.parquet"
    pq.write_table(table, data)
    model = f"{tmp_path / 'm.duckdb'}:nb"
    fit = run_process("fit", data, "--label", "y", "--kind", "multinomial", "--model", model, module=True)
    assert fit.returncode == 0, fit.stderr
    assert "left out" not in fit.stderr, fit.stderr
    score = run_process("score", data, "--model", model, "--out", "-", module=True)
    assert score.returncode == 0, score.stderr
    rows = list(csv.DictReader(io.StringIO(score.stdout)))
    got = np.array([[float(r[f"proba_{c}"]) for c in range(10)] for r in rows])
    np.testing.assert_allclose(got, MultinomialNB().fit(X, y).predict_proba(X), rtol=0, atol=1e-9)


def with_nulls(n, value):
    """A constant with NULL in a third of the rows."""
    return pa.array(np.full(n, value), mask=np.arange(n) % 3 == 0)


CONFIGS = [
    ("gaussian", {}, np.full, 3.0, True),
    ("gaussian with NULLs", {}, with_nulls, 3.0, True),
    ("gaussian tied", {"tied_variance": True}, np.full, 3.0, True),
    ("categorical", {"kind": "categorical"}, np.full, "k", True),
    ("categorical with NULLs", {"kind": "categorical"}, with_nulls, "k", True),
    ("categorical bucket", {"kind": "categorical", "unseen": "bucket"}, np.full, "k", False),
    ("binned mdl", {"bins": "mdl"}, np.full, 3.0, True),
    ("binned quantile", {"bins": "quantile:4"}, np.full, 3.0, True),
    ("tan", {"kind": "categorical", "structure": "tan"}, np.full, "k", False),
    ("multinomial", {"kind": "multinomial"}, np.full, 2, False),
    ("bernoulli", {"kind": "bernoulli"}, np.full, 1, False),
]


@pytest.mark.parametrize("name, options, make, value, left_out", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_a_constant_is_left_out_only_where_that_changes_no_probability(name, options, make, value, left_out):
    """Per family and structure: a constant column is left out exactly where the model
    with it (``keep_columns``) gives the same probabilities (1e-12); elsewhere it stays."""
    rng = np.random.default_rng(8)
    n = 240
    y = rng.integers(0, 3, n)
    if isinstance(value, str):
        base = {f"c{j}": np.array(list("uvw"))[(y + rng.integers(0, 2, n) * j) % 3] for j in range(3)}
    elif isinstance(value, int):
        base = {f"c{j}": rng.poisson(1 + y * (j + 1)) for j in range(3)}
    else:
        base = {f"c{j}": rng.normal(y * (j - 1), 1.0 + j) for j in range(3)}
    table = pa.table({**base, "const": make(n, value), "y": y})
    model, notes = fit_noted(table, "y", **options)
    assert (model.feature_names == ["c0", "c1", "c2"]) == left_out, (name, notes)
    kept = sqlnb.fit(table, "y", keep_columns=["const"], **options)
    assert "const" in kept.feature_names
    diff = np.abs(proba(model, table) - proba(kept, table)).max()
    if left_out:
        assert diff <= 1e-12, (name, diff)
        assert any("'const'" in n and "changes no probability" in n for n in notes)


# -- (b) identifiers by their values --------------------------------------------------------

def clinical(seed: int = 27, name: str = "sample_id") -> tuple[pa.Table, np.ndarray]:
    """467 rows: an ID of 441 distinct integers in the millions (variance ~5e11) and eight
    measurements in units whose means differ by class."""
    rng = np.random.default_rng(seed)
    n = 467
    y = rng.integers(0, 2, n)
    ids = rng.choice(np.arange(1_000_000, 3_500_000), 441, replace=False)
    sample_id = np.concatenate([ids, rng.choice(ids, n - 441, replace=False)])
    rng.shuffle(sample_id)
    cols = {name: sample_id, **{f"m{j}": rng.normal(y * (j + 1), 1.0 + j) for j in range(8)}}
    return pa.table({**cols, "y": y}), y


def accuracy(model, table, y) -> float:
    return float(np.mean(predictions(model, table) == y))


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_a_near_unique_integer_id_with_repeats_is_left_out():
    """441 distinct integers in 467 rows (94%) is an identifier: left out with a note that
    says why and how to keep it; the model is the one without it (as --exclude)."""
    table, y = clinical(name="code")  # found by its values, whatever its name
    assert len(set(table["code"].to_pylist())) == 441
    model, notes = fit_noted(table, "y")
    assert "code" not in model.feature_names
    (note,) = [n for n in notes if "left out" in n]
    assert "'code'" in note and "441 distinct integers in 467 non-NULL rows" in note and "like an ID" in note
    assert "--keep-columns code" in note
    without = sqlnb.fit(table, "y", exclude=["code"])
    np.testing.assert_allclose(proba(model, table), proba(without, table), rtol=0, atol=1e-12)
    kept, kept_notes = fit_noted(table, "y", keep_columns=["code"])
    assert accuracy(model, table, y) == accuracy(without, table, y)
    assert accuracy(kept, table, y) < accuracy(model, table, y) - 0.05, "the ID flattens the other columns"


def test_what_the_value_rule_does_not_catch():
    """A near-unique DOUBLE (a measurement), a near-unique count of a multinomial model,
    an integer measurement of 80% distinct values, and a near-unique integer column of a
    small table (fewer than NEAR_MIN_ROWS rows) all stay."""
    rng = np.random.default_rng(3)
    n = 467
    y = rng.integers(0, 2, n)
    table = pa.table({"level": rng.normal(y, 1.0) * 1e6,
                      "visits": rng.integers(0, 600, n) + 40 * y,  # ~55% distinct
                      "y": y})
    model, notes = fit_noted(table, "y")
    assert model.feature_names == ["level", "visits"] and not [n for n in notes if "left out" in n]
    wide = rng.choice(np.arange(100_000), n, replace=False)
    counts = pa.table({"words": np.where(rng.random(n) < 0.05, wide[0], wide) + y, "other": rng.poisson(3, n),
                       "y": y})
    model, notes = fit_noted(counts, "y", kind="multinomial")
    assert model.feature_names == ["words", "other"], notes
    small_n = screening.NEAR_MIN_ROWS - 1
    small = pa.table({"cells": np.concatenate([wide[:small_n - 5], wide[:5]]), "x": rng.normal(size=small_n),
                      "y": np.arange(small_n) % 2})
    model, notes = fit_noted(small, "y")
    assert model.feature_names == ["cells", "x"], notes


# -- (c) identifiers by their name ------------------------------------------------------------

@pytest.mark.parametrize("name, like", [("id", True), ("sample_id", True), ("SampleID", True), ("customerId", True),
                                        ("order-uuid", True), ("GUID", True), ("row ids", True), ("paid", False),
                                        ("valid", False), ("idx", False), ("id_score", False), ("Idaho", False)])
def test_names_like_an_identifier(name, like):
    assert screening.id_like_name(name) is like


def test_a_column_named_like_an_id_is_left_out_when_its_values_look_like_one():
    """``patient_id`` (about 60% distinct: patients with several visits) and a float
    ``record_id`` with NULLs (as pandas writes an integer ID with holes) are left out by
    name; ``region_id``, a code of ten values, and ``grid``, near-unique but not named like
    an ID and below 90%, stay."""
    rng = np.random.default_rng(4)
    n = 300
    y = rng.integers(0, 2, n)
    patients = rng.choice(np.arange(10_000, 99_999), 180, replace=False)
    patient_id = np.concatenate([patients, rng.choice(patients, n - 180)])
    record = pa.array(rng.permutation(n).astype(float) + 1e5, mask=rng.random(n) < 0.1)
    table = pa.table({"patient_id": patient_id, "record_id": record, "region_id": rng.integers(0, 10, n),
                      "grid": rng.integers(0, 400, n), "x": rng.normal(y, 1.0), "y": y})
    model, notes = fit_noted(table, "y")
    left = {n.split("'")[1]: n for n in notes if "left out" in n}
    assert set(left) == {"patient_id", "record_id"}
    assert "named like an ID" in left["patient_id"] and "(at least 50%)" in left["patient_id"]
    assert "--keep-columns patient_id" in left["patient_id"]
    assert model.feature_names == ["region_id", "grid", "x"]


# -- (d) the variance-floor note --------------------------------------------------------------

@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_a_column_that_lifts_the_variance_floor_is_named(tmp_path):
    """Kept (--keep-columns), the ID's variance sets the floor ε = 1e-9 × 5e11 ≈ 500 above
    every measurement's variance: one note names it and the fix, in Python and on the
    command line's stderr; the same data without it gives no such note."""
    table, y = clinical()
    model, notes = fit_noted(table, "y", keep_columns=["sample_id"])
    floor = [n for n in notes if "variance floor" in n]
    assert len(floor) == 1 and "\n" not in floor[0]
    assert "'sample_id'" in floor[0] and "--exclude sample_id" in floor[0] and "'m0'" in floor[0]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sqlnb.fit(table, "y", features=["sample_id", "m0", "m1"])
    (listed,) = [w for w in caught if issubclass(w.category, VarianceFloorWarning)]
    assert "drop it from --features" in str(listed.message)
    _, quiet = fit_noted(table, "y", exclude=["sample_id"])
    assert not [n for n in quiet if "variance floor" in n]
    import pyarrow.parquet as pq
    data = tmp_path / "clinical.parquet"
    pq.write_table(table, data)
    run = run_process("fit", data, "--label", "y", "--keep-columns", "sample_id",
                      "--model", f"{tmp_path / 'm.duckdb'}:nb", module=True)
    assert run.returncode == 0, run.stderr
    lines = [line for line in run.stderr.splitlines() if "variance floor" in line]
    assert len(lines) == 1 and "sample_id" in lines[0] and "--exclude sample_id" in lines[0], run.stderr
