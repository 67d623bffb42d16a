"""Calibration: temperature, Platt and isotonic calibrators of every model
kind, fitted in SQL on held-out rows, stored with the model, applied in the scoring SELECT.

Oracles: the temperature is the root of the log loss's derivative found by scipy's brentq
on the same scores; Platt's (A, B) the root of its gradient (scipy's fsolve) and, looser,
scikit-learn's ``_sigmoid_calibration`` (L-BFGS); isotonic scikit-learn's
``IsotonicRegression(out_of_bounds="clip")``.
"""

from __future__ import annotations

import json
import math
import re

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from scipy import optimize, special
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.models.calibration import METHODS, Calibration, calibrate, pool_adjacent_violators, with_calibration
from sqlnb.models.finish import class_columns, scoring_select
from support.cli import run_process
from support.sqlite import sqlite_connection, sqlite_table
from test_engines import CASES, DATA, _fetch

TOL = 1e-9
#: kind -> (data set, fit keyword arguments); LDA is fitted on the complete rows (below) and
#: scores NULL for the rest, which the calibration skips and leaves NULL.
KINDS = {**CASES, "lda": ("mixed", dict(model="lda", features=["x1", "x2", "n"])),
         "qda": ("mixed", dict(model="qda", features=["x2", "n"])),
         "logistic": ("mixed", dict(model="logistic", features=["x1", "x2", "n", "member"]))}


def _binary() -> pa.Table:
    """400 rows, two overlapping Gaussian classes and a categorical column; a few NULLs."""
    rng = np.random.RandomState(3)
    n = 400
    y = rng.rand(n) < 0.4
    x = rng.normal(np.where(y, 1.0, 0.0), 1.3)
    z = rng.normal(np.where(y, -0.5, 0.3), 2.0)
    c = np.array(["p", "q", "r"])[(rng.randint(0, 3, n) + y) % 3]
    xs = [None if i % 37 == 5 else float(v) for i, v in enumerate(x)]
    return pa.table({"id": np.arange(n), "x": pa.array(xs, pa.float64()), "z": z, "c": c,
                     "y": pa.array(np.where(y, "pos", "neg"))})


BINARY = _binary()
#: The fitting half's complete rows (LDA, QDA and logistic regression need them).
COMPLETE = 'SELECT * FROM "fit_rows" WHERE "x" IS NOT NULL'


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    for name, t in {**DATA, "binary": BINARY}.items():
        con.register(name, t)
    # held-out halves by row parity
    con.execute('CREATE VIEW "fit_rows" AS SELECT * FROM "binary" WHERE "id" % 2 = 0')
    con.execute('CREATE VIEW "held_out" AS SELECT * FROM "binary" WHERE "id" % 2 = 1')
    yield con
    con.close()


def _columns(model, rel, prefix: str) -> np.ndarray:
    d = rel.to_arrow_table().to_pydict()
    return np.array([d[c] for c in class_columns(prefix, model.classes)], dtype=float).T


def _raw(model, data, con) -> tuple[np.ndarray, list]:
    """The uncalibrated class scores and the labels, row by row."""
    rel = with_calibration(model, None).score(data, con=con, outputs=("jll",), keep=["id", model.label])
    return _columns(model, rel, "jll_"), rel.to_arrow_table().column(model.label).to_pylist()


def _usable(b: np.ndarray, labels: list) -> np.ndarray:
    return np.all(np.isfinite(b), axis=1) & np.array([v is not None for v in labels])


# -- oracles --------------------------------------------------------------------------------
def _temperature_oracle(b: np.ndarray, y: np.ndarray) -> float:
    d = b - b.max(axis=1, keepdims=True)

    def grad(beta):
        p = special.softmax(beta * d, axis=1)
        return float(np.sum((p * d).sum(axis=1) - d[np.arange(len(y)), y]))

    lo, hi = 1e-3, 1.0
    while grad(hi) < 0:
        hi *= 2
    return 1.0 / optimize.brentq(grad, lo, hi, xtol=1e-16, rtol=1e-15, maxiter=500)


def _platt_oracle(s: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    n_pos, n_neg = y.sum(), (1 - y).sum()
    t = np.where(y == 1, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))

    def grad(ab):
        r = special.expit(ab[0] * s + ab[1]) - t
        return [np.sum(r * s), np.sum(r)]

    ab = optimize.fsolve(grad, [0.0, 0.0], xtol=1e-13)
    return float(ab[0]), float(ab[1])


# -- fitted parameters and probabilities against the oracles --------------------------------
@pytest.mark.parametrize("kind", list(KINDS))
def test_temperature_every_kind(duck, kind):
    model, data = _fit(kind, duck)
    cal = calibrate(model, data, "temperature", con=duck)
    b, labels = _raw(model, data, duck)
    ok = _usable(b, labels)
    y = np.array([model.classes.index(v) for v, k in zip(labels, ok) if k])
    T = _temperature_oracle(b[ok], y)
    assert cal.calibration.temperature == pytest.approx(T, rel=TOL)
    assert cal.calibration.rows == int(ok.sum())
    got = cal.score(data, con=duck, outputs=("proba", "prediction"), keep=["id"]).to_arrow_table().to_pydict()
    assert got["id"] == list(range(len(DATA[data])))  # one row out per row in, in order
    p = _columns(cal, cal.score(data, con=duck, outputs=("proba",), keep=[]), "proba_")
    want = special.softmax(b / cal.calibration.temperature, axis=1)
    rows = np.all(np.isfinite(b), axis=1)
    np.testing.assert_allclose(p[rows], want[rows], rtol=0, atol=TOL)
    assert np.all(np.isnan(p[~np.any(np.isfinite(b), axis=1)]))  # NULL scores stay NULL
    # temperature scaling keeps every prediction
    plain = model.score(data, con=duck, outputs=("prediction",), keep=[]).to_arrow_table().column(0).to_pylist()
    assert got["prediction"] == plain


def _binary_fit(duck, kind: str, method: str):
    """A model of ``kind`` fitted on the fitting half, calibrated with ``method`` on the
    held-out half; the held-out log-odds s = b_1 − b_0 and class indices it was fitted on."""
    kwargs = dict(exclude=["id"]) if kind == "naive_bayes" else dict(model=kind, features=["x", "z"])
    model = sqlnb.fit(COMPLETE, "y", con=duck, **kwargs)
    cal = calibrate(model, "held_out", method, con=duck)
    b, labels = _raw(model, "held_out", duck)
    ok = _usable(b, labels)
    y = np.array([model.classes.index(v) for v, k in zip(labels, ok) if k])
    return model, cal, (b[:, 1] - b[:, 0])[ok], y


@pytest.mark.parametrize("kind", ["naive_bayes", "logistic"])
def test_platt_against_the_oracle_and_scikit_learn(duck, kind):
    from sklearn.calibration import _sigmoid_calibration
    model, cal, s, y = _binary_fit(duck, kind, "platt")
    A, B = _platt_oracle(s, y)
    c = cal.calibration
    assert (c.slope, c.intercept) == (pytest.approx(A, rel=TOL, abs=TOL), pytest.approx(B, rel=TOL, abs=TOL))
    a_sk, b_sk = _sigmoid_calibration(s, y)  # p = 1 / (1 + exp(a s + b)): the signs flipped
    assert (c.slope, c.intercept) == (pytest.approx(-a_sk, rel=1e-4), pytest.approx(-b_sk, rel=1e-4, abs=1e-5))
    for data in ("held_out", "binary"):
        bb, _ = _raw(model, data, duck)
        p = _columns(cal, cal.score(data, con=duck, outputs=("proba",), keep=[]), "proba_")
        want = special.expit(c.slope * (bb[:, 1] - bb[:, 0]) + c.intercept)
        rows = np.all(np.isfinite(bb), axis=1)
        np.testing.assert_allclose(p[rows, 1], want[rows], rtol=0, atol=TOL)
        np.testing.assert_allclose(p[rows].sum(axis=1), 1.0, rtol=0, atol=1e-15)


@pytest.mark.parametrize("kind", ["naive_bayes", "qda"])
def test_isotonic_matches_scikit_learn(duck, kind):
    from sklearn.isotonic import IsotonicRegression
    model, cal, s, y = _binary_fit(duck, kind, "isotonic")
    iso = IsotonicRegression(out_of_bounds="clip").fit(s, y)
    c = cal.calibration
    np.testing.assert_allclose(c.thresholds, iso.X_thresholds_, rtol=0, atol=0)
    np.testing.assert_allclose(c.probas, iso.y_thresholds_, rtol=0, atol=1e-12)
    for data in ("held_out", "binary"):  # "binary" also scores rows between the thresholds
        bb, _ = _raw(model, data, duck)
        rel = cal.score(data, con=duck, outputs=("proba", "prediction"), keep=["id"])
        p = _columns(cal, rel, "proba_")
        rows = np.all(np.isfinite(bb), axis=1)
        want = iso.predict(bb[rows, 1] - bb[rows, 0])
        np.testing.assert_allclose(p[rows, 1], want, rtol=0, atol=TOL)
        np.testing.assert_allclose(p[rows, 0], 1 - want, rtol=0, atol=TOL)
        assert np.all(np.isnan(p[~rows]))
        pred = rel.to_arrow_table().column("prediction").to_pylist()
        assert [v for v, r in zip(pred, rows) if r] == [cal.classes[int(q > 0.5)] for q in want]


def test_pool_adjacent_violators_against_scikit_learn():
    from sklearn.isotonic import isotonic_regression
    rng = np.random.RandomState(0)
    for _ in range(20):
        n = rng.randint(1, 60)
        y, w = rng.rand(n).round(1), rng.randint(1, 5, n).astype(float)
        np.testing.assert_allclose(pool_adjacent_violators(y, w), isotonic_regression(y, sample_weight=w),
                                   rtol=0, atol=1e-12)


def test_undefined_and_infinite_scores_through_every_calibrator():
    """Scores given directly: NULL and NaN give NULL probabilities; −inf for one class the
    probability 0 for it (never NaN); the finish and argmax are the shared ones."""
    con = duckdb.connect()
    inf = float("inf")
    b0 = [0.0, None, float("nan"), -inf, 1.0, -inf]
    b1 = [1.0, None, 0.0, 0.0, -inf, -inf]
    con.register("raw", pa.table({"b0": pa.array(b0, pa.float64()), "b1": pa.array(b1, pa.float64())}))
    src = exp.alias_(sql.table("raw"), "src", table=True, quoted=True)
    cals = [Calibration("temperature", temperature=2.0), Calibration("platt", slope=1.5, intercept=-0.25),
            Calibration("isotonic", thresholds=(-1.0, 0.5, 2.0), probas=(0.1, 0.4, 0.9))]
    for cal in cals:
        q = scoring_select(src.copy(), [sql.col("b0", "src"), sql.col("b1", "src")], ["n", "p"], "VARCHAR",
                           ["b0", "b1"], ("proba", "prediction"), calibration=cal, dialect="duckdb")
        got = con.sql(sql.render(q)).fetchall()
        assert len(got) == len(b0)
        p1 = [r[3] for r in got]
        assert p1[1] is None and p1[2] is None and p1[5] is None, (cal.method, got)
        assert [r[4] for r in got][1] is None
        assert (p1[3], p1[4]) == pytest.approx((0.9, 0.1) if cal.method == "isotonic" else (1.0, 0.0), abs=1e-15)
        want = {"temperature": special.expit(0.5), "platt": special.expit(1.25),
                "isotonic": 0.4 + (0.9 - 0.4) / 1.5 * 0.5}[cal.method]
        assert p1[0] == pytest.approx(want, abs=TOL)


# -- bad input -------------------------------------------------------------------------------
def test_errors_are_one_clear_line(duck):
    three = sqlnb.fit("mixed", "y", con=duck, exclude=["id", "w"])
    two = sqlnb.fit("fit_rows", "y", con=duck, exclude=["id"])
    cases = [
        (lambda: calibrate(three, "mixed", "platt", con=duck), "platt calibration is for two classes"),
        (lambda: calibrate(three, "mixed", "isotonic", con=duck), "isotonic calibration is for two classes"),
        (lambda: calibrate(three, "mixed", "beta", con=duck), "unknown calibration method 'beta'"),
        (lambda: calibrate(three, "mixed", label="nope", con=duck), "label column 'nope' not found"),
        (lambda: calibrate(two, "SELECT * FROM held_out WHERE y = 'neg'", "platt", con=duck),
         "every held-out row of"),
        (lambda: calibrate(two, "SELECT * FROM held_out WHERE y = 'neg'", "isotonic", con=duck), "both classes"),
        (lambda: calibrate(two, "SELECT * REPLACE ('maybe' AS y) FROM held_out", con=duck),
         "label 'maybe' in column 'y'"),
        (lambda: calibrate(two, "SELECT * FROM held_out WHERE false", con=duck), "no labelled rows"),
    ]
    for call, fragment in cases:
        with pytest.raises(SqlnbError, match=fragment) as e:
            call()
        assert "\n" not in str(e.value)
    # held-out scores that do not vary (every feature NULL, a uniform prior): no temperature
    flat = sqlnb.fit("SELECT x, y FROM held_out", "y", con=duck, class_prior="uniform")
    with pytest.raises(SqlnbError, match="cannot fit the temperature: the held-out scores do not vary"):
        calibrate(flat, "SELECT CAST(NULL AS DOUBLE) AS x, y FROM held_out", con=duck)


# -- storage ---------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["temperature", "platt", "isotonic"])
def test_stored_with_the_model(duck, tmp_path, method):
    kwargs = dict(model="lda", features=["x", "z"]) if method == "platt" else dict(exclude=["id"])
    model = sqlnb.fit(COMPLETE, "y", con=duck, **kwargs)
    cal = calibrate(model, "held_out", method, con=duck)
    db = str(tmp_path / "m.duckdb")
    cal.save(db, "m")
    model.save(db, "plain")
    loaded = sqlnb.load(db, "m")
    assert loaded.calibration == cal.calibration
    assert sqlnb.load(db, "plain").calibration is None
    want = cal.score("binary", con=duck, outputs=("proba", "prediction"), keep=["id"]).fetchall()
    assert loaded.score("binary", con=duck, outputs=("proba", "prediction"), keep=["id"]).fetchall() == want
    assert with_calibration(loaded, None).score("binary", con=duck, keep=[]).fetchall() == \
        model.score("binary", con=duck, keep=[]).fetchall()


# -- exported SQL on other engines -------------------------------------------------------------
def _calibrated_models(duck) -> list:
    """(name, calibrated model, data set) for the export tests: every method, several kinds."""
    out = []
    for kind, method in (("gaussian", "temperature"), ("multinomial", "temperature"), ("categorical", "temperature"),
                         ("mixed", "temperature"), ("lda", "temperature"), ("qda", "temperature"),
                         ("logistic", "temperature")):
        model, data = _fit(kind, duck)
        out.append((f"{kind}-{method}", calibrate(model, data, method, con=duck), data))
    two = sqlnb.fit("fit_rows", "y", con=duck, exclude=["id"])
    for method in ("platt", "isotonic"):
        out.append((f"naive_bayes-{method}", calibrate(two, "held_out", method, con=duck), "binary"))
    # 300 thresholds: engines that inline subqueries must still compute the log-odds once per
    # row (finish.FLATTENS_SUBQUERIES; without it SQLite took 25 s, PostgreSQL gigabytes)
    many = Calibration("isotonic", thresholds=tuple(np.linspace(-5, 5, 300)),
                       probas=tuple(np.sort(np.random.RandomState(0).rand(300))))
    out.append(("naive_bayes-isotonic-300", with_calibration(two, many), "binary"))
    return out


def _fit(kind: str, con):
    data, kwargs = KINDS[kind]
    fit_data = 'SELECT * FROM "mixed" WHERE "x1" IS NOT NULL' if kind in ("lda", "logistic") else data
    return sqlnb.fit(fit_data, "y", con=con, **kwargs), data


def _want(model, data, duck) -> pa.Table:
    return model.score(data, con=duck, outputs=("proba", "prediction"), keep=["id"]).to_arrow_table()


def _same(model, got: pa.Table, want: pa.Table, where: str) -> None:
    g, w = got.sort_by("id").to_pydict(), want.sort_by("id").to_pydict()
    if isinstance(model.classes[0], bool):  # SQLite has no boolean type
        g["prediction"] = [None if v is None else bool(v) for v in g["prediction"]]
    assert g["id"] == w["id"] and g["prediction"] == w["prediction"], where
    for col in model.proba_columns():
        np.testing.assert_allclose(np.array(g[col], dtype=float), np.array(w[col], dtype=float),
                                   rtol=0, atol=TOL, err_msg=f"{where}: {col}")


@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_exported_sql_runs_in_sqlite(duck):
    for name, model, data in _calibrated_models(duck):
        db = sqlite_connection()
        sqlite_table(db, data, {**DATA, "binary": BINARY}[data])
        cur = db.execute(model.to_sql(dialect="sqlite", source=data, outputs=("proba", "prediction")))
        got = _fetch(cur.fetchall(), [c[0] for c in cur.description])
        _same(model, got, _want(model, data, duck), f"sqlite {name}")


@pytest.mark.postgres
def test_exported_sql_runs_in_postgres(duck):
    from support.engines import postgres_engine
    with postgres_engine({**DATA, "binary": BINARY}) as pg:
        import psycopg
        for name, model, data in _calibrated_models(duck):
            with psycopg.connect(pg.dsn) as c, c.cursor() as cur:
                cur.execute(model.to_sql(dialect="postgres", source=data, outputs=("proba", "prediction")))
                got = _fetch(cur.fetchall(), [d.name for d in cur.description])
            _same(model, got, _want(model, data, duck), f"postgres {name}")
        # a calibrated model stored on PostgreSQL scores the same there
        name, model, data = _calibrated_models(duck)[-1]
        model.save(pg, "calibrated")
        loaded = sqlnb.load(pg, "calibrated")
        assert loaded.calibration == model.calibration


@pytest.mark.spark
def test_exported_sql_runs_in_spark(duck):
    from support.engines import spark_engine
    with spark_engine({**DATA, "binary": BINARY}) as spark:
        for name, model, data in _calibrated_models(duck):
            df = spark.spark.sql(model.to_sql(dialect="spark", source=data, outputs=("proba", "prediction")))
            got = pa.Table.from_pylist([r.asDict() for r in df.collect()])
            _same(model, got, _want(model, data, duck), f"spark {name}")
        # stored in the Spark catalog: every method's parts round-trip (NULL numbers included)
        for name, model, data in _calibrated_models(duck)[-3:]:
            model.save(spark, "calibrated", replace=True)
            assert sqlnb.load(spark, "calibrated").calibration == model.calibration, name


# -- the command line, as separate processes ---------------------------------------------------
@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_cli_workflow(tmp_path):
    import pyarrow.parquet as pq
    pq.write_table(BINARY.filter(pa.compute.equal(pa.compute.bit_wise_and(BINARY["id"], 1), 0)),
                   tmp_path / "train.parquet")
    pq.write_table(BINARY.filter(pa.compute.equal(pa.compute.bit_wise_and(BINARY["id"], 1), 1)),
                   tmp_path / "holdout.parquet")
    run = lambda *a: run_process(*a, module=True, cwd=str(tmp_path))  # noqa: E731
    r = run("fit", "train.parquet", "--label", "y", "--model", "m.duckdb:nb")
    assert r.returncode == 0, r.stderr
    before = run("score", "holdout.parquet", "--model", "m.duckdb:nb", "--out", "-")
    r = run("calibrate", "holdout.parquet", "--model", "m.duckdb:nb", "--method", "isotonic", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["method"] == "isotonic" and json.loads(r.stdout)["rows"] == 200  # NULL features are marginalised: every row counts
    shown = run("show", "--model", "m.duckdb:nb")
    assert re.search(r"calibrated   isotonic \(\d+ thresholds\) on 200 rows of 'holdout.parquet'", shown.stdout)
    assert json.loads(run("show", "--model", "m.duckdb:nb", "--format", "json").stdout)["calibration"]["method"] \
        == "isotonic"
    after = run("score", "holdout.parquet", "--model", "m.duckdb:nb", "--out", "-")
    assert after.returncode == 0 and after.stdout != before.stdout
    assert len(after.stdout.splitlines()) == len(before.stdout.splitlines()) == 201
    r = run("calibrate", "holdout.parquet", "--model", "m.duckdb:nb", "--method", "temperature", "--label", "nope")
    assert r.returncode != 0 and r.stderr.strip().count("\n") == 0 and "label column 'nope'" in r.stderr
    assert run("score", "holdout.parquet", "--model", "m.duckdb:nb", "--out", "-").stdout == after.stdout
    r = run("calibrate", "--model", "m.duckdb:nb", "--clear")
    assert r.returncode == 0, r.stderr
    assert "calibrated" not in run("show", "--model", "m.duckdb:nb").stdout
    assert run("score", "holdout.parquet", "--model", "m.duckdb:nb", "--out", "-").stdout == before.stdout


def test_novelty_uses_the_models_own_log_evidence(duck):
    from sqlnb.workflows.generative import flag_novel, novelty_threshold
    model = sqlnb.fit("fit_rows", "y", con=duck, exclude=["id"])
    cal = calibrate(model, "held_out", "temperature", con=duck)
    assert novelty_threshold(cal, "fit_rows", 0.05, con=duck).report["novelty"] == \
        novelty_threshold(model, "fit_rows", 0.05, con=duck).report["novelty"]
    assert flag_novel(cal, "binary", con=duck, threshold=-4.0).fetchall() == \
        flag_novel(model, "binary", con=duck, threshold=-4.0).fetchall()
    assert cal.score("binary", con=duck, outputs=("log_evidence",), keep=[]).fetchall() != \
        model.score("binary", con=duck, outputs=("log_evidence",), keep=[]).fetchall()
    # storing a novelty threshold keeps the calibrator; updating with new rows drops it
    assert novelty_threshold(cal, "fit_rows", 0.05, con=duck).calibration == cal.calibration
    assert sqlnb.update(cal, "held_out", con=duck).calibration is None


def test_row_order_kept_through_a_lookup_join():
    """A categorical column of 300 values is scored through a join, which DuckDB may
    reorder: the scoring SELECT numbers the rows and sorts at the end, calibrated or not."""
    rng = np.random.RandomState(5)
    n = 3000
    y = rng.rand(n) < 0.5
    t = pa.table({"id": np.arange(n)[::-1].copy(),  # descending: order is not the id's
                  "c": [f"v{v}" for v in (rng.randint(0, 300, n) + 7 * y) % 300],
                  "y": np.where(y, "b", "a")})
    con = duckdb.connect()
    con.register("wide", t)
    model = sqlnb.fit("wide", "y", con=con, exclude=["id"])
    for method in METHODS:
        cal = calibrate(model, "wide", method, con=con)
        out = cal.score("wide", con=con, outputs=("proba", "prediction"), keep=["id"]).to_arrow_table()
        assert out.column("id").to_pylist() == t.column("id").to_pylist(), method
        assert "sqlnb_row" not in out.column_names
        assert "JOIN" in cal.to_sql(source="wide", con=con) and "sqlnb_row" in cal.to_sql(source="wide", con=con)


def test_a_calibrated_model_refuses_explanations_and_decides_on_calibrated_probabilities(duck):
    """Explanations add up to the model's own score differences, which a calibrator's
    scores are not: refused in one line. A decision rule reads the calibrated
    probabilities (here a reject option: exactly the rows whose calibrated max p < 0.9)."""
    from sqlnb.models.decision import DecisionRule
    model, data = _fit("mixed", duck)
    cal = calibrate(model, data, "temperature", con=duck)
    with pytest.raises(SqlnbError, match="calibrator") as e:
        cal.score(data, con=duck, explain=1)
    assert "\n" not in str(e.value)
    cal.decision = DecisionRule.for_model(cal, reject=0.1)
    got = cal.score(data, con=duck, outputs=("proba", "prediction"), keep=[]).to_arrow_table().to_pydict()
    p = np.array([got[c] for c in class_columns("proba_", cal.classes)], dtype=float).T
    rejected = np.array([r is True for r in got["rejected"]])
    scored = ~np.any(np.isnan(p), axis=1)
    np.testing.assert_array_equal(rejected[scored], p[scored].max(axis=1) < 0.9)
    assert not rejected[~scored].any() and len(got["rejected"]) == len(DATA[data])
