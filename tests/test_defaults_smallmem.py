"""Any command on at most 10,000 rows peaks at 300 MB or less.

LDA and QDA wrote one aggregate (fit) or one product term (QDA's score) per feature *pair*:
on 10,000 rows of 104 one-hot columns (adult) the fit peaked at ~400 MB, QDA's score at
~1 GB, and ``sqlnb compare`` (a moments scan per training subset) at ~500 MB. In DuckDB,
from ``LIST_MIN`` features on, the co-moments now come from the long shape (one
``COVAR_POP`` over a cross join with the pairs) and every linear form of a dense model
is one ``list_dot_product`` over the row's values read once into a list
(:mod:`sqlnb.models.dense`). Checked here: parity with scikit-learn in that shape, NULL
rows, the same figures in cross-validation, other dialects' SQL unchanged (and running in
SQLite), and the whole ``sqlnb`` process's peak RSS for fit, score and compare on 10,000
rows (a child process each, ``getrusage(RUSAGE_CHILDREN)`` of a wrapper that runs only it).
"""

from __future__ import annotations

import functools
import math
import sqlite3

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis, QuadraticDiscriminantAnalysis

import sqlnb
from conftest import frame, scores
from sqlnb.engines import as_engine
from sqlnb.models import dense, discriminant
from sqlnb.workflows.cv import cross_validate
from sqlnb.models.finish import OUTPUTS
from support import processes

D = getattr(dense, "LIST_MIN", 32)  # (33cf08b has no list shape: the memory tests still run there)
LIMIT_MIB = 300


def blobs(seed: int, K: int, d: int, n: int = 400, offset: float = 0.0):
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.arange(K), rng.integers(0, K, n - K)])
    X = rng.normal(size=(n, d)) @ (np.eye(d) + 0.3 * rng.normal(size=(d, d))) + 1.5 * rng.normal(size=(K, d))[y]
    return X + offset, y


def per_term(monkeypatch):
    """Every shape back to the per-term one (the SQL of 33cf08b)."""
    monkeypatch.setattr(dense, "LIST_MIN", 10**9)
    monkeypatch.setattr(discriminant, "LIST_MIN", 10**9)


@pytest.mark.parametrize("kind,offset", [("lda", 0.0), ("lda", 1e3), ("qda", 20.0), ("qda", -1e3)])
def test_list_shape_matches_sklearn(kind, offset, con):
    X, y = blobs(len(kind) + int(offset) % 7, 2, D, offset=offset)
    if kind == "lda":
        sk = LinearDiscriminantAnalysis(solver="lsqr").fit(X, y)
        model, tol = sqlnb.fit_lda(frame(X, y), "y"), 1e-9
    else:
        sk = QuadraticDiscriminantAnalysis(reg_param=0.1).fit(X, y)
        model, tol = sqlnb.fit_qda(frame(X, y), "y", reg_param=0.1), 1e-8
    sql_text = model.to_sql("duckdb").upper()
    # one dot product per class (LDA), d per class (QDA), not d(d+1)/2 products
    assert sql_text.count("LIST_DOT_PRODUCT") == (2 if kind == "lda" else 2 * D)
    Xt = np.vstack([X, X[:7] * 1.3 - 0.5])
    ours = scores(model, Xt)
    np.testing.assert_allclose(ours["proba"], sk.predict_proba(Xt), atol=tol, rtol=0)
    top = np.sort(sk.predict_proba(Xt), axis=1)
    clear = top[:, -1] - top[:, -2] > 1e-9
    assert list(np.array(ours["prediction"])[clear]) == list(sk.predict(Xt)[clear])


def test_long_moments_equal_the_aggregate_per_pair(monkeypatch):
    X, y = blobs(2, 3, D, offset=1e3)
    t = frame(X, y)
    con = duckdb.connect()
    con.register("t", t)
    feats = [f"x{j}" for j in range(D)]
    source = as_engine(con).resolve("t")
    _, long = discriminant.collect_moments(con, source, "y", feats)
    monkeypatch.setattr(discriminant, "LIST_MIN", 10**9)
    _, wide = discriminant.collect_moments(con, source, "y", feats)
    a, b = long[None], wide[None]
    assert a.classes == b.classes and list(a.n) == list(b.n)
    np.testing.assert_allclose(a.mean, b.mean, rtol=1e-13, atol=0)
    np.testing.assert_allclose(a.comoment, b.comoment, rtol=0, atol=1e-11 * np.abs(b.comoment).max())


def test_logistic_list_shape_equals_per_term(monkeypatch):
    X, y = blobs(5, 2, D, offset=50.0)
    model = sqlnb.fit_logistic(frame(X, y), "y", C=0.5)
    assert "LIST_DOT_PRODUCT" in model.to_sql("duckdb").upper()
    ours = scores(model, X)
    per_term(monkeypatch)
    np.testing.assert_allclose(ours["proba"], scores(model, X)["proba"], atol=1e-12, rtol=0)


@pytest.mark.parametrize("fit", [sqlnb.fit_lda, sqlnb.fit_qda, sqlnb.fit_logistic])
def test_incomplete_rows_score_null_in_the_list_shape(fit, con):
    X, y = blobs(9, 2, D)
    model = fit(frame(X, y), "y")
    rows = X[:5].copy()
    rows[1, 3], rows[2, 0], rows[3, D - 1], rows[4, 7] = np.nan, np.inf, -np.inf, np.nan
    t = frame(rows)
    t = t.set_column(3, "x3", pa.array([rows[0, 3], None, rows[2, 3], rows[3, 3], rows[4, 3]]))  # NULL, not NaN
    con.register("s", t)
    out = model.score("s", con, outputs=OUTPUTS).to_arrow_table().to_pylist()
    assert out[0]["prediction"] is not None and math.isclose(out[0]["proba_0"] + out[0]["proba_1"], 1.0)
    for r in out[1:]:
        assert all(r[c] is None for c in ("prediction", "proba_0", "proba_1", "jll_0", "log_evidence")), r


def test_cross_validation_in_the_list_shape_gives_the_same_figures(monkeypatch):
    # The pooled query reads one list x − r for every fold model (the first model's r).
    X, y = blobs(3, 2, D, n=300)
    listed = cross_validate(frame(X, y), "y", model="qda", folds=2, grid={"reg_param": [0.1]}, refit=False)
    per_term(monkeypatch)
    plain = cross_validate(frame(X, y), "y", model="qda", folds=2, grid={"reg_param": [0.1]}, refit=False)
    for a, b in zip(listed.results, plain.results):
        assert a["accuracy"] == b["accuracy"]
        np.testing.assert_allclose(a["log_loss"], b["log_loss"], rtol=1e-12, atol=0)


def test_other_dialects_keep_the_per_term_shape_and_run_in_sqlite():
    X, y = blobs(11, 2, D, n=200)
    model = sqlnb.fit_qda(frame(X, y), "y", reg_param=0.2)
    for dialect in ("postgres", "spark", "sqlite"):
        assert "LIST_DOT_PRODUCT" not in model.to_sql(dialect).upper()
    db = sqlite3.connect(":memory:")
    try:
        db.execute("SELECT ln(1.0), exp(0.0), power(2.0, 2.0)")
    except sqlite3.OperationalError:  # built without SQLITE_ENABLE_MATH_FUNCTIONS
        db.create_function("ln", 1, lambda v: None if v is None or v < 0 else (math.log(v) if v > 0 else -math.inf))
        db.create_function("exp", 1, lambda v: None if v is None else math.exp(v))
        db.create_function("power", 2, lambda a, b: None if a is None or b is None else a ** b)
    cols = [f"x{j}" for j in range(D)]
    db.execute(f"CREATE TABLE input ({', '.join(cols)})")
    db.executemany(f"INSERT INTO input VALUES ({', '.join('?' * D)})", [tuple(map(float, r)) for r in X[:20]])
    cur = db.execute(model.to_sql("sqlite"))
    names = [c[0] for c in cur.description]
    got = np.array([[r[names.index(c)] for c in model.proba_columns()] for r in cur.fetchall()])
    np.testing.assert_allclose(got, scores(model, X[:20])["proba"], atol=1e-9, rtol=0)


# -- the whole process, 10,000 rows -----------------------------------------------------------
#: adult's categorical columns and their numbers of categories (99 one-hot columns) beside 6
#: numeric ones: the width that made LDA, QDA and compare bloat.
CARDINALITIES = (8, 16, 7, 14, 6, 5, 2, 41)
ROWS = 10_000

#: Peak RSS (MiB) of ``python -m sqlnb args`` as a whole process, within 120 s.
peak_mib = functools.partial(processes.peak_mib, timeout=120.0)


@pytest.fixture(scope="module")
def wide_data(tmp_path_factory):
    """10,000 rows: ``onehot.parquet`` (6 numeric + 99 one-hot DOUBLE columns, as sqlnb compare
    encodes adult) and ``mixed.parquet`` (the same as 8 text columns)."""
    d = tmp_path_factory.mktemp("smallmem")
    rng = np.random.default_rng(27)
    y = rng.integers(0, 2, ROWS)
    numeric = {f"n{j}": rng.normal(size=ROWS) * (1 + j) + y * (0.3 + 0.1 * j) + 10.0 * j for j in range(6)}
    cats = {}
    for c, m in enumerate(CARDINALITIES):
        p = rng.dirichlet(np.ones(m), size=2)
        cats[f"c{c}"] = np.array([rng.choice(m, p=p[k]) for k in y])
    labels = np.where(y == 1, ">50K", "<=50K")
    hot = dict(numeric)
    for c, v in cats.items():
        for j in range(CARDINALITIES[int(c[1:])]):
            hot[f"{c}={j}"] = (v == j).astype(float)
    pq.write_table(pa.table({**hot, "income": labels}), d / "onehot.parquet")
    pq.write_table(pa.table({**numeric, **{c: np.char.add("v", v.astype(str)) for c, v in cats.items()},
                             "income": labels}), d / "mixed.parquet")
    return d


@pytest.mark.parametrize("kind,option", [("lda", ["--shrinkage", "0.1"]), ("qda", ["--reg-param", "0.1"])])
def test_lda_and_qda_fit_and_score_10k_wide_rows_within_300_mib(wide_data, kind, option):
    data, db = str(wide_data / "onehot.parquet"), str(wide_data / f"{kind}.duckdb")
    fit = peak_mib(["fit", data, "--label", "income", "--kind", kind, *option, "--model", f"{db}:m", "--replace"])
    score = peak_mib(["score", data, "--model", f"{db}:m", "--out", str(wide_data / f"{kind}.parquet"),
                      "--replace"])
    assert fit <= LIMIT_MIB and score <= LIMIT_MIB, f"{kind}: fit {fit:.0f} MiB, score {score:.0f} MiB"


def test_compare_on_10k_rows_within_300_mib(wide_data):
    # Two training sizes, one repeat: each size's fits (LDA and QDA share a moments scan of
    # the 105 encoded columns) and scorings of the 2,500 test rows happen as with the
    # defaults (8 sizes x 5 repeats), fewer times.
    peak = peak_mib(["compare", str(wide_data / "mixed.parquet"), "--label", "income", "--sizes", "200,5000",
                     "--repeats", "1"])
    assert peak <= LIMIT_MIB, f"compare: {peak:.0f} MiB"
