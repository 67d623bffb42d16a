"""Wide models: Gaussian and Bernoulli class terms as dot products over lists (DuckDB).

From ``WIDE_MIN`` columns of a family the scoring SELECT writes its terms as a few
``list_dot_product`` per class (sqlnb/models/naive_bayes/wide.py). The probabilities must
stay those of the per-term form: scikit-learn's on complete rows, and a numpy
implementation that leaves NULL features out of the sum, within 1e-9.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy.special import softmax
from sklearn.naive_bayes import BernoulliNB, GaussianNB

import sqlnb
from sqlnb.models.naive_bayes.wide import WIDE_MIN

F, N = WIDE_MIN + 44, 300


def _data(kind: str, nulls: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, N)
    if kind == "gaussian":
        # far from 0 against the spread (x ≈ 1000 ± 1): the form that expands the square
        # about 0 would lose the digits that tell the classes apart
        X = 1000.0 + rng.normal(size=(N, F)) * (1 + 0.02 * y[:, None]) + 0.01 * y[:, None]
    else:
        X = (rng.random((N, F)) < 0.3 + 0.1 * y[:, None]).astype(float)
    if nulls:
        X[rng.random((N, F)) < 0.05] = np.nan
    cols = {f"x{j}": pa.array(X[:, j], mask=np.isnan(X[:, j])) for j in range(F)}
    return X, y, pa.table({"id": np.arange(N), **cols, "y": y})


def _proba(model, table) -> tuple[np.ndarray, list]:
    con = duckdb.connect()
    out = model.score(table, con=con, outputs=("proba",), keep=["id"]).to_arrow_table().to_pydict()
    assert out["id"] == list(range(N))  # one row out per row in, in order
    return np.array([out[f"proba_{c}"] for c in model.classes], dtype=float).T, out


def _numpy_jll(model, X: np.ndarray, kind: str) -> np.ndarray:
    """Σ over the present features of each class's term, plus the log prior."""
    params = model.log_parameters()
    jll = np.tile(np.asarray(params["prior"], dtype=float), (len(X), 1))
    for j in range(F):
        x = X[:, j]
        present = ~np.isnan(x)
        if kind == "gaussian":
            mean, var = params[f"x{j}"]
            t = -0.5 * np.log(2 * np.pi * var)[None, :] - (x[:, None] - mean[None, :]) ** 2 / (2 * var[None, :])
        else:
            flp, neg = params[f"x{j}"]
            t = np.where((x > 0)[:, None], flp[None, :], neg[None, :])
        jll += np.where(present[:, None], t, 0.0)
    return jll


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_wide_model_scores_like_scikit_learn(kind):
    X, y, table = _data(kind, nulls=False)
    m = sqlnb.fit(table, "y", kind=kind, exclude=["id"])
    assert "list_dot_product" in m.to_sql(source="t").lower()  # the wide shape is the one scored
    p, _ = _proba(m, table)
    sk = (GaussianNB() if kind == "gaussian" else BernoulliNB(alpha=1.0)).fit(X, y)
    np.testing.assert_allclose(p, sk.predict_proba(X), rtol=0, atol=1e-9)
    assert 0.05 < p.max(axis=1).min()  # probabilities that are not all 0 or 1: a real check


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_wide_model_leaves_null_features_out(kind):
    X, y, table = _data(kind, nulls=True, seed=1)
    m = sqlnb.fit(table, "y", kind=kind, exclude=["id"])
    p, out = _proba(m, table)
    np.testing.assert_allclose(p, softmax(_numpy_jll(m, X, kind), axis=1), rtol=0, atol=1e-9)


def test_an_infinite_value_gives_no_probabilities():
    X, y, table = _data("gaussian", nulls=False, seed=2)
    m = sqlnb.fit(table, "y", kind="gaussian", exclude=["id"])
    bad = table.set_column(1, "x0", pa.array([np.inf] + list(X[1:, 0])))
    con = duckdb.connect()
    out = m.score(bad, con=con, outputs=("proba", "prediction"), keep=["id"]).to_arrow_table().to_pydict()
    assert out["prediction"][0] is None and out[f"proba_{m.classes[0]}"][0] is None
    assert all(v is not None for v in out["prediction"][1:])


def test_below_the_threshold_the_per_term_shape_stays():
    rng = np.random.default_rng(3)
    table = pa.table({**{f"x{j}": rng.normal(size=50) for j in range(WIDE_MIN - 1)}, "y": rng.integers(0, 2, 50)})
    assert "list_dot_product" not in sqlnb.fit(table, "y", kind="gaussian").to_sql(source="t").lower()


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_a_nan_value_is_missing_when_scoring(kind):
    """NaN in the rows scored is a missing value, as NULL is (the lists hold x − r and
    x − t; the lambdas read NaN as missing): the probabilities leave that term out."""
    X, y, table = _data(kind, nulls=False, seed=4)
    m = sqlnb.fit(table, "y", kind=kind, exclude=["id"])
    rng = np.random.default_rng(5)
    Xn = X.copy()
    Xn[rng.random(X.shape) < 0.05] = np.nan
    nan_table = pa.table({"id": np.arange(N), **{f"x{j}": Xn[:, j] for j in range(F)}, "y": y})  # NaN, not NULL
    assert pa.compute.sum(pa.compute.is_nan(nan_table["x0"])).as_py() > 0
    p, _ = _proba(m, nan_table)
    np.testing.assert_allclose(p, softmax(_numpy_jll(m, Xn, kind), axis=1), rtol=0, atol=1e-9)


def test_a_wide_bernoulli_threshold_is_the_one_scikit_learn_uses():
    rng = np.random.default_rng(6)
    y = rng.integers(0, 2, N)
    X = rng.normal(size=(N, F)) + 0.3 * y[:, None]
    X[:5, :] = 0.25  # values equal to the threshold are absent (x > t, as BernoulliNB)
    table = pa.table({"id": np.arange(N), **{f"x{j}": X[:, j] for j in range(F)}, "y": y})
    m = sqlnb.fit(table, "y", kind="bernoulli", binarize=0.25, exclude=["id"])
    assert "list_dot_product" in m.to_sql(source="t").lower()
    p, _ = _proba(m, table)
    np.testing.assert_allclose(p, BernoulliNB(alpha=1.0, binarize=0.25).fit(X, y).predict_proba(X), rtol=0, atol=1e-9)


def _mixed_table(seed: int = 7):
    """Wide Gaussian and Bernoulli columns with NULLs, a categorical and a text column,
    an integer column and unlabelled rows."""
    rng = np.random.default_rng(seed)
    n = 240
    y = rng.integers(0, 3, n).astype(object)
    y[:7] = None
    cols = {}
    for j in range(WIDE_MIN):
        x = 50.0 + rng.normal(size=n) * (1 + 0.1 * j % 3)
        cols[f"g{j}"] = pa.array(x, mask=rng.random(n) < 0.04)
    for j in range(12):
        cols[f"b{j}"] = pa.array(rng.random(n) < 0.4, mask=rng.random(n) < 0.04)
    cols["i"] = pa.array(rng.integers(0, 5, n))
    cols["c"] = pa.array(rng.choice(["a", "b", "c"], n))
    cols["const"] = pa.array(np.where(np.arange(n) % 2 == 0, 3.0, 3.0))  # constant: M2 redone exactly
    return pa.table({**cols, "y": pa.array(list(y), pa.int64())})


def _fitted_statistics(model):
    st = model.stats
    out = {"classes": list(st.classes), "n": np.asarray(st.class_n, float), "null": st.null_label_rows}
    for name, s in st.features.items():
        out[name] = {k: np.asarray(v, float) for k, v in vars(s).items() if isinstance(v, np.ndarray)}
    return out


def _assert_same_statistics(a, b, null_rows=7):
    assert a["classes"] == b["classes"] and a["null"] == b["null"] == null_rows
    np.testing.assert_array_equal(a["n"], b["n"])
    assert a.keys() == b.keys()
    for name in a:
        if isinstance(a[name], dict):
            for k in a[name]:
                np.testing.assert_allclose(a[name][k], b[name][k], rtol=1e-12, atol=1e-12, err_msg=f"{name}.{k}")


@pytest.mark.slow  # 300 columns through the per-term query too: 30-40 s
def test_the_long_statistics_equal_the_one_pass_query(monkeypatch):
    """From WIDE_MIN Gaussian and Bernoulli columns DuckDB aggregates them in the long
    shape (wide.long_statistics_query); the statistics are those of the one-pass query
    (sums added in another order: equal to 1e-12), with other kinds of feature beside
    them, unlabelled rows, and per cross-validation fold."""
    from sqlnb.models.naive_bayes import wide as wide_module
    table = _mixed_table()
    kinds = {"i": "categorical"}
    long_model = sqlnb.fit(table, "y", feature_kinds=kinds, var_smoothing=1e-9, keep_columns=["const"])
    long_cv = sqlnb.cross_validate(table, "y", folds=3, feature_kinds=kinds)
    monkeypatch.setattr(wide_module, "WIDE_MIN", 10 ** 9)
    narrow_model = sqlnb.fit(table, "y", feature_kinds=kinds, var_smoothing=1e-9, keep_columns=["const"])
    narrow_cv = sqlnb.cross_validate(table, "y", folds=3, feature_kinds=kinds)
    _assert_same_statistics(_fitted_statistics(long_model), _fitted_statistics(narrow_model))
    assert {f.kind for f in long_model.features} == {"gaussian", "bernoulli", "categorical"}
    (a,), (b,) = long_cv.results, narrow_cv.results
    np.testing.assert_allclose(a["log_loss"], b["log_loss"], rtol=1e-9)
    assert a["accuracy"] == b["accuracy"] and len(a["accuracy"]) == 3


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_a_wide_fit_names_a_nan_or_infinite_value(bad):
    X, y, table = _data("gaussian", nulls=False, seed=8)
    col = X[:, 5].copy()
    col[3] = bad
    with pytest.raises(sqlnb.SqlnbError, match=r"column 'x5' .* holds 1 NaN or infinite value"):
        sqlnb.fit(table.set_column(6, "x5", pa.array(col)), "y", kind="gaussian", exclude=["id"])
    Xb, yb, tb = _data("bernoulli", nulls=False, seed=8)
    colb = Xb[:, 5].copy()
    colb[3] = bad
    with pytest.raises(sqlnb.SqlnbError, match=r"column 'x5' .* holds NaN or infinite values"):
        sqlnb.fit(tb.set_column(6, "x5", pa.array(colb)), "y", kind="bernoulli", exclude=["id"])


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_five_hundred_columns_fit_and_score_in_the_wide_shape_like_scikit_learn(kind):
    """500 feature columns (past WIDE_MIN = 256, so fit and score take the wide
    shape: sqlnb/models/naive_bayes/wide.py) fit on 2,000 rows and score 2,000 others, with
    scikit-learn's probabilities within 1e-9, by the exported SQL text run in a fresh DuckDB
    connection with default settings (no max_expression_depth), one row out per row in.

    The wide shape's SQL does not grow deeper with the number of columns, so 500 prove what
    10,000 did (in a fraction of the ~40 s 10,000 took); 2,500 to 10,000 columns, their times and
    differences from scikit-learn are benchmarks/wide_columns.py (benchmarks/README.md, "Wide
    models"). The scored rows are new rows of the same distribution, where most probabilities
    are far from 0 and 1 (a check of the digits, not only of the argmax)."""
    from sqlnb.models.naive_bayes.wide import WIDE_MIN

    F_WIDE, n = 500, 2_000
    assert F_WIDE > WIDE_MIN
    rng = np.random.default_rng(11)

    def rows(y):
        if kind == "gaussian":
            return 1000.0 + rng.normal(size=(n, F_WIDE)) + 0.002 * y[:, None]
        return (rng.random((n, F_WIDE)) < 0.3 + 0.002 * y[:, None]).astype(np.int8)

    y, y_new = rng.integers(0, 2, n), rng.integers(0, 2, n)
    X, X_new = rows(y), rows(y_new)
    con = duckdb.connect()
    con.register("train_arrow", pa.table({**{f"x{j}": X[:, j] for j in range(F_WIDE)}, "y": y}))
    con.register("new_arrow", pa.table({"id": np.arange(n), **{f"x{j}": X_new[:, j] for j in range(F_WIDE)}}))
    con.execute("CREATE TABLE train AS SELECT * FROM train_arrow")
    con.execute("CREATE TABLE new_rows AS SELECT * FROM new_arrow")
    m = sqlnb.fit("train", "y", con=con, kind=kind)
    assert len(m.features) == F_WIDE
    query = m.to_sql(source="new_rows", outputs=("proba",))  # pasted as a subquery, as an analyst would
    assert "list_dot_product" in query.lower()  # the wide shape, not one term per column
    fresh = duckdb.connect()
    fresh.register("new_rows", con.table("new_rows").arrow())
    got = fresh.execute(f"SELECT id, {', '.join(f'proba_{c}' for c in m.classes)} FROM ({query}) AS s").fetchnumpy()
    np.testing.assert_array_equal(got["id"], np.arange(n))  # one row out per row in, in order
    sk = (GaussianNB() if kind == "gaussian" else BernoulliNB(alpha=1.0)).fit(X, y)
    expected = sk.predict_proba(X_new)
    p = np.column_stack([got[f"proba_{c}"] for c in m.classes])
    np.testing.assert_allclose(p, expected, rtol=0, atol=1e-9)
    assert np.mean((expected[:, 1] > 1e-6) & (expected[:, 1] < 1 - 1e-6)) > 0.9


def _screened(table, **kw) -> list[str]:
    import warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sqlnb.fit(table, "y", **kw)
    return sorted(str(w.message) for w in caught if "left out column" in str(w.message))


@pytest.mark.parametrize("only_exact", [False, True])
def test_screening_in_the_long_shape_leaves_out_the_same_columns(monkeypatch, only_exact):
    """From LONG_MIN numeric columns DuckDB screens them in the long shape: the same
    columns are left out for the same reasons (constant, all NULL, integer IDs), with the
    other columns (64-bit integers, text) screened beside them or without any."""
    from sqlnb.models import screening
    rng = np.random.default_rng(9)
    n = 300
    cols = {f"g{j}": rng.normal(size=n) for j in range(screening.LONG_MIN)}
    cols.update({"const": np.full(n, 2.0), "cint": np.full(n, 7, dtype=np.int32), "id32": np.arange(n, dtype=np.int32),
                 "b": rng.random(n) < 0.5, "bconst": np.ones(n, dtype=bool), "allnull": pa.nulls(n, pa.float64())})
    if not only_exact:
        cols.update({"idbig": np.arange(n, dtype=np.int64) + 2 ** 60, "txt": [f"t{i}" for i in range(n)]})
    table = pa.table({**cols, "y": rng.integers(0, 2, n)})
    long = _screened(table)
    monkeypatch.setattr(screening, "LONG_MIN", 10 ** 9)
    assert long == _screened(table)
    left_out = {line.split("'")[1] for line in long}
    # bconst, a constant boolean, is a Bernoulli feature: kept, since its absent-or-present
    # term differs per class (the constant Gaussian columns are left out)
    assert left_out == {"const", "cint", "id32", "allnull"} | (set() if only_exact else {"idbig", "txt"})


@pytest.mark.slow  # 300 columns through the per-term query too: 30-40 s
def test_the_exact_second_pass_in_the_long_shape(monkeypatch):
    """Columns constant in a class (indicators present in one class only) lose every digit
    of their M2 in the shifted sums and are summed again around the class means; from
    WIDE_MIN of them in the long shape. Same statistics as the one-pass form (1e-12), with
    NULLs and unlabelled rows, for a fit and per cross-validation fold."""
    from sqlnb.models.naive_bayes import fit as fit_module, wide as wide_module
    rng = np.random.default_rng(12)
    n = 400
    y = rng.integers(0, 2, n)
    X = ((rng.random((n, WIDE_MIN + 44)) < 0.3) & (y[:, None] == 1)) + rng.normal(size=(n, WIDE_MIN + 44)) * (y[:, None] == 1)
    labels = pa.array(list(y[:-5]) + [None] * 5, pa.int64())
    table = pa.table({**{f"x{j}": pa.array(X[:, j] + 0.5, mask=rng.random(n) < 0.03) for j in range(X.shape[1])},
                      "y": labels})
    used = []
    real = fit_module._second_pass_long
    monkeypatch.setattr(fit_module, "_second_pass_long", lambda *a: used.append(len(a[4])) or real(*a))
    long_model = sqlnb.fit(table, "y", kind="gaussian")
    long_cv = sqlnb.cross_validate(table, "y", folds=3, kind="gaussian")
    assert len(used) == 4 and min(used) >= WIDE_MIN  # the fit and each fold's pass
    monkeypatch.setattr(wide_module, "WIDE_MIN", 10 ** 9)
    narrow_model = sqlnb.fit(table, "y", kind="gaussian")
    narrow_cv = sqlnb.cross_validate(table, "y", folds=3, kind="gaussian")
    assert len(used) == 4
    _assert_same_statistics(_fitted_statistics(long_model), _fitted_statistics(narrow_model), null_rows=5)
    zero = long_model.stats.features["x0"]
    assert zero.rows_m2[0] == 0.0 and zero.rows_mean[0] == 0.5  # the constant class: exact
    (a,), (b,) = long_cv.results, narrow_cv.results
    np.testing.assert_allclose(a["log_loss"], b["log_loss"], rtol=1e-9)
    assert a["accuracy"] == b["accuracy"]


@pytest.mark.parametrize("kind", ["gaussian", "bernoulli"])
def test_a_wide_model_scores_a_file_of_many_row_groups_row_for_row(tmp_path, kind):
    """The wide shape's per-row lists are a projection of each row: a Parquet file of 40
    row groups, scored through the CLI as a user would, comes back with every row once,
    in the file's order, with the probabilities of the per-term shape's numpy form."""
    import pyarrow.parquet as pq
    from support.cli import invoke

    n = 4000
    rng = np.random.default_rng(13)
    y = rng.integers(0, 3, n)
    X = (1000.0 + rng.normal(size=(n, F)) * (1 + 0.02 * y[:, None]) + 0.01 * y[:, None] if kind == "gaussian"
         else (rng.random((n, F)) < 0.3 + 0.1 * y[:, None]).astype(float))
    X[rng.random(X.shape) < 0.03] = np.nan
    ids = rng.permutation(n)  # not sorted: the order is the file's, not the id's
    table = pa.table({"id": ids, **{f"x{j}": pa.array(X[:, j], mask=np.isnan(X[:, j])) for j in range(F)}, "y": y})
    path = tmp_path / "rows.parquet"
    pq.write_table(table, path, row_group_size=100)
    assert pq.ParquetFile(path).metadata.num_row_groups == 40
    model = f"{tmp_path}/m.duckdb:w"
    fitted = invoke("fit", path, "--label", "y", "--exclude", "id", "--kind", kind, "--model", model)
    assert fitted.exit_code == 0, fitted.stderr
    scored = invoke("score", path, "--model", model, "--keep", "id", "--out", tmp_path / "scored.parquet")
    assert scored.exit_code == 0, scored.stderr
    out = pq.read_table(tmp_path / "scored.parquet").to_pydict()
    assert out["id"] == ids.tolist()  # every row once, in the input's order
    m = sqlnb.load(f"{tmp_path}/m.duckdb", "w")
    assert "list_dot_product" in m.to_sql(source="t").lower()
    p = np.array([out[f"proba_{c}"] for c in m.classes], dtype=float).T
    np.testing.assert_allclose(p, softmax(_numpy_jll(m, X, kind), axis=1), rtol=0, atol=1e-9)
