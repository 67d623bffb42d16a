"""Venn–Abers calibration (``sqlnb calibrate --method venn-abers``): the step functions p0
and p1 against isotonic regression refitted with each test point, the scored intervals and
merged probabilities against the ``venn-abers`` package (and that refit) on the same scores,
ties included; the output columns and row order; storage; evaluate's figures; update; the
exported SQL on SQLite, PostgreSQL and Spark and the dbt macro, equal to DuckDB's.

Oracles, none of them sqlnb: scikit-learn's ``IsotonicRegression`` fitted on the
calibration rows plus the test row (labelled 0, then 1) and read at the test score; the
``venn-abers`` package's ``VennAbers`` (binary) on the same scores, one-vs-rest by hand.
"""

from __future__ import annotations

import json
import warnings

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.isotonic import IsotonicRegression
from sklearn.metrics import log_loss
from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.errors import UpdateWarning
from sqlnb.models.calibration import Calibration, calibrate, with_calibration
from sqlnb.models.finish import class_columns, scoring_select
from sqlnb.models.venn_abers import Steps, VennAbers
from sqlnb.workflows.evaluate import text_report
from support.cli import exit_code, run_in
from support.sqlite import sqlite_connection, sqlite_table
from test_calibration_figures import expected_calibration_error
from test_engines import _fetch

TOL = 1e-9
#: Between engines: the same SQL on the same doubles.
ENGINE_TOL = 1e-12


def _table(n: int, classes: list[str], seed: int) -> pa.Table:
    """``n`` rows: a numeric column on a grid of 0.5 (so scores tie), a categorical one, a
    few NULLs, the label; ids descending (the input order is not the ids' order)."""
    rng = np.random.RandomState(seed)
    y = rng.randint(0, len(classes), n)
    x = np.round(rng.normal(y * 0.8, 1.2) * 2) / 2
    c = np.array(["p", "q", "r"])[(rng.randint(0, 3, n) + y) % 3]
    xs = [None if i % 29 == 3 else float(v) for i, v in enumerate(x)]
    return pa.table({"id": np.arange(n)[::-1].copy(), "x": pa.array(xs, pa.float64()), "c": c,
                     "y": np.array(classes)[y]})


TABLES = {"two": _table(600, ["neg", "pos"], 7), "three": _table(600, ["a", "b", "c"], 8)}


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    for name, t in TABLES.items():
        con.register(name, t)
    return con


@pytest.fixture(scope="module")
def models(duck):
    """name -> (model fitted on a third of the rows, calibrated on another third)."""
    out = {}
    for name in TABLES:
        model = sqlnb.fit(f'SELECT * FROM "{name}" WHERE "id" % 3 = 0', "y", con=duck, exclude=["id"])
        out[name] = (model, calibrate(model, f'SELECT * FROM "{name}" WHERE "id" % 3 = 1', "venn-abers", con=duck))
    return out


# -- oracles -------------------------------------------------------------------------------
def _isotonic_at(s_cal: np.ndarray, y_cal: np.ndarray, s: float, label: float) -> float:
    """Isotonic regression of the calibration rows plus ``(s, label)``, at ``s``."""
    fit = IsotonicRegression(out_of_bounds="clip").fit(np.append(s_cal, s), np.append(y_cal, label))
    return float(fit.predict([s])[0])


def _package(s_cal: np.ndarray, y_cal: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """p0, p1 and the merged probability of the ``venn-abers`` package (binary, on the
    scores as they are: it reads only their order)."""
    from venn_abers import VennAbers as Package
    va = Package().fit(np.column_stack([np.zeros_like(s_cal), s_cal]), y_cal.astype(float))
    merged, p0p1 = va.predict_proba(np.column_stack([np.zeros_like(s), s]))
    return p0p1[:, 0], p0p1[:, 1], merged[:, 1]


def _raw(model, data: str, con) -> tuple[np.ndarray, list, list]:
    """The uncalibrated class scores, labels and ids, row by row."""
    t = with_calibration(model, None).score(data, con=con, outputs=("jll",), keep=["id", "y"]).to_arrow_table()
    b = np.array([t.column(c).to_pylist() for c in class_columns("jll_", model.classes)], dtype=float).T
    return b, t.column("y").to_pylist(), t.column("id").to_pylist()


def _ovr(b: np.ndarray) -> np.ndarray:
    """The one-vs-rest scores: b1 − b0 (two classes), else b_c − max of the others."""
    if b.shape[1] == 2:
        return (b[:, 1] - b[:, 0])[:, None]
    return np.column_stack([b[:, c] - np.delete(b, c, axis=1).max(axis=1) for c in range(b.shape[1])])


def _columns(t: pa.Table, prefix: str, classes) -> np.ndarray:
    return np.array([t.column(c).to_pylist() for c in class_columns(prefix, classes)], dtype=float).T


# -- the step functions ---------------------------------------------------------------------
def test_steps_equal_isotonic_regression_refitted_with_the_test_point():
    """Random calibration sets with many tied scores; test scores at every calibration
    score (pooled with it), between two and outside them: p0 and p1 from the steps equal
    the isotonic fit of the calibration rows plus the test row at its score."""
    rng = np.random.default_rng(0)
    checked = 0
    for _ in range(150):
        n = int(rng.integers(1, 30))
        s_cal = rng.integers(0, int(rng.integers(1, 10)), n).astype(float)
        y_cal = (rng.random(n) < rng.random()).astype(float)
        t, inverse, counts = np.unique(s_cal, return_inverse=True, return_counts=True)
        st = Steps.fit(list(zip(t, counts, np.bincount(inverse, weights=y_cal).astype(int))))
        assert st.thresholds == tuple(t) and len(st.p0) == len(st.p1) == len(t) + 1
        for s in np.concatenate([t, (t[:-1] + t[1:]) / 2, [t[0] - 1, t[-1] + 1]]):
            p0 = st.p0[np.searchsorted(t, s, side="right")]  # t_j <= s < t_{j+1}
            p1 = st.p1[np.searchsorted(t, s, side="left")]  # t_j < s <= t_{j+1}
            assert p0 == pytest.approx(_isotonic_at(s_cal, y_cal, s, 0.0), abs=1e-12)
            assert p1 == pytest.approx(_isotonic_at(s_cal, y_cal, s, 1.0), abs=1e-12)
            assert 0 <= p0 < p1 <= 1 or (p0 < 1 and 0 < p1 and p0 <= p1)
            checked += 1
    assert checked > 1000


def test_steps_in_sql_pick_the_same_cell_as_python():
    """The CASE lookup: a score equal to a threshold takes p0's step to its right and
    p1's to its left; NULL and NaN give NULL; ±inf the end cells."""
    st = Steps.fit([(-1.0, 2, 1), (0.5, 3, 0), (2.0, 1, 1), (3.0, 2, 2)])
    con = duckdb.connect()
    values = [-2.0, -1.0, 0.0, 0.5, 1.0, 2.0, 2.5, 3.0, 4.0, float("inf"), float("-inf"), float("nan"), None]
    con.register("v", pa.table({"s": pa.array(values, pa.float64())}))
    s = sql.col("s")
    got = con.sql(sql.render(exp.select(st.lookup(s, False), st.lookup(s, True)).from_(sql.table("v")))
                  ).fetchall()
    t = np.array(st.thresholds)
    for v, (p0, p1) in zip(values, got):
        if v is None or v != v:
            assert p0 is None and p1 is None
        else:
            assert (p0, p1) == (st.p0[np.searchsorted(t, v, side="right")], st.p1[np.searchsorted(t, v, side="left")])


# -- scored: against the package and the refit -----------------------------------------------
def _cal_rows(model, duck, name: str):
    """The calibration rows' scores and labels, as the calibrator saw them."""
    b, labels, _ = _raw(model, f'SELECT * FROM "{name}" WHERE "id" % 3 = 1', duck)
    ok = np.all(np.isfinite(b), axis=1)
    return _ovr(b[ok]), np.array([model.classes.index(v) for v in np.array(labels, dtype=object)[ok]])


def test_two_classes_equal_the_package_ties_included(duck, models):
    model, cal = models["two"]
    s_cal, y_cal = _cal_rows(model, duck, "two")
    s_cal, y_cal = s_cal[:, 0], (y_cal == 1).astype(float)
    b, _, ids = _raw(model, "two", duck)
    s = _ovr(b)[:, 0]
    # ties: calibration scores repeat, and test rows score exactly at calibration scores
    assert len(np.unique(s_cal)) < len(s_cal) / 2 and np.isin(s, s_cal).sum() > 300
    got = cal.score("two", con=duck, keep=["id"]).to_arrow_table()
    assert got.column("id").to_pylist() == ids == TABLES["two"].column("id").to_pylist()  # one row each, in order
    assert got.column_names == ["id", "proba_neg", "proba_pos", "va_p0_neg", "va_p0_pos", "va_p1_neg", "va_p1_pos",
                                "prediction"]
    p0, p1, merged = _package(s_cal, y_cal, s)
    va0, va1, proba = (_columns(got, prefix, model.classes) for prefix in ("va_p0_", "va_p1_", "proba_"))
    np.testing.assert_allclose(va0[:, 1], p0, rtol=0, atol=TOL)
    np.testing.assert_allclose(va1[:, 1], p1, rtol=0, atol=TOL)
    np.testing.assert_allclose(proba[:, 1], merged, rtol=0, atol=TOL)
    np.testing.assert_allclose(va0[:, 0], 1 - p1, rtol=0, atol=TOL)
    np.testing.assert_allclose(va1[:, 0], 1 - p0, rtol=0, atol=TOL)
    np.testing.assert_allclose(proba[:, 0], 1 - merged, rtol=0, atol=TOL)
    assert np.all(va0[:, 1] <= va1[:, 1])
    pred = got.column("prediction").to_pylist()
    assert pred == [model.classes[int(p[1] > p[0])] for p in proba]
    # and the refit, once per distinct test score
    for v in np.unique(s)[::3]:
        row = int(np.flatnonzero(s == v)[0])
        assert va0[row, 1] == pytest.approx(_isotonic_at(s_cal, y_cal, v, 0.0), abs=TOL)
        assert va1[row, 1] == pytest.approx(_isotonic_at(s_cal, y_cal, v, 1.0), abs=TOL)


def test_three_classes_one_vs_rest_equal_the_package_normalised(duck, models):
    model, cal = models["three"]
    s_cal, y_cal = _cal_rows(model, duck, "three")
    b, _, ids = _raw(model, "three", duck)
    s = _ovr(b)
    got = cal.score("three", con=duck, keep=["id"]).to_arrow_table()
    assert got.column("id").to_pylist() == ids == TABLES["three"].column("id").to_pylist()
    va0, va1, proba = (_columns(got, prefix, model.classes) for prefix in ("va_p0_", "va_p1_", "proba_"))
    merged = np.zeros_like(proba)
    for c in range(3):
        assert np.isin(s[:, c], s_cal[:, c]).sum() > 300  # test scores at calibration scores
        p0, p1, merged[:, c] = _package(s_cal[:, c], (y_cal == c).astype(float), s[:, c])
        np.testing.assert_allclose(va0[:, c], p0, rtol=0, atol=TOL)
        np.testing.assert_allclose(va1[:, c], p1, rtol=0, atol=TOL)
    np.testing.assert_allclose(proba, merged / merged.sum(axis=1, keepdims=True), rtol=0, atol=TOL)
    assert got.column("prediction").to_pylist() == [model.classes[int(np.argmax(p))] for p in proba]


def test_undefined_and_infinite_scores():
    """Scores given directly: NULL and NaN give NULL intervals and probabilities; −inf for
    the first class puts the row above every threshold (p1 = 1), −inf for the second below."""
    st = Steps.fit([(-1.0, 3, 1), (0.0, 2, 1), (1.0, 3, 2)])
    cal = Calibration("venn-abers", venn_abers=VennAbers((st,)))
    con = duckdb.connect()
    inf = float("inf")
    b0, b1 = [0.0, None, float("nan"), -inf, 0.0, -inf], [0.5, None, 0.0, 0.0, -inf, -inf]
    con.register("raw", pa.table({"b0": pa.array(b0, pa.float64()), "b1": pa.array(b1, pa.float64())}))
    src = exp.alias_(sql.table("raw"), "src", table=True, quoted=True)
    q = scoring_select(src, [sql.col("b0", "src"), sql.col("b1", "src")], ["n", "p"], "VARCHAR", ["b0", "b1"],
                       ("proba", "prediction"), calibration=cal, dialect="duckdb")
    rows = [dict(zip([e.alias_or_name for e in q.expressions], r)) for r in con.sql(sql.render(q)).fetchall()]
    assert len(rows) == 6
    for r in (rows[1], rows[2], rows[5]):
        assert r["proba_p"] is None and r["va_p0_p"] is None and r["va_p1_p"] is None and r["prediction"] is None
    assert (rows[3]["va_p0_p"], rows[3]["va_p1_p"]) == (st.p0[-1], 1.0)
    assert (rows[4]["va_p0_p"], rows[4]["va_p1_p"]) == (0.0, st.p1[0])
    p0, p1 = st.p0[2], st.p1[2]  # 0.5 lies between the last two thresholds
    assert rows[0]["proba_p"] == pytest.approx(p1 / (1 - p0 + p1), abs=1e-15)


# -- storage, evaluate, update ---------------------------------------------------------------
def test_stored_with_the_model(duck, models, tmp_path):
    for name, (_, cal) in models.items():
        db = str(tmp_path / "m.duckdb")
        cal.save(db, name)
        loaded = sqlnb.load(db, name)
        assert loaded.calibration == cal.calibration
        assert loaded.score(name, con=duck, keep=["id"]).fetchall() == cal.score(name, con=duck, keep=["id"]).fetchall()
    three = models["three"][1].calibration
    assert three.describe()["scores"] == [len(st.thresholds) for st in three.venn_abers.steps]
    assert three.summary().startswith("venn-abers (one-vs-rest, ")


def test_evaluate_reports_the_merged_probabilities_and_the_interval_width(duck, models):
    for name, (model, cal) in models.items():
        data = f'SELECT * FROM "{name}" WHERE "id" % 3 = 2'
        ev = sqlnb.evaluate(cal, data, con=duck)
        t = cal.score(data, con=duck, keep=["y"]).to_arrow_table()
        proba = _columns(t, "proba_", model.classes)
        truth = np.array([model.classes.index(v) for v in t.column("y").to_pylist()])
        assert ev.log_loss == pytest.approx(log_loss(truth, proba, labels=range(len(model.classes))), abs=1e-12)
        assert ev.ece == pytest.approx(expected_calibration_error(proba, truth), abs=1e-12)
        width = _columns(t, "va_p1_", model.classes) - _columns(t, "va_p0_", model.classes)
        want = width[:, 1].mean() if name == "two" else width.mean()
        assert ev.interval_width == pytest.approx(want, abs=1e-12) and 0 < want < 1
        assert f"VA width    {want:.4f}" in text_report(ev)
        plain = sqlnb.evaluate(model, data, con=duck)
        assert plain.interval_width is None and "VA width" not in text_report(plain)


def test_update_drops_the_calibrator_with_a_note(duck, models):
    _, cal = models["two"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        updated = sqlnb.update(cal, 'SELECT * FROM "two" WHERE "id" % 3 = 2', con=duck)
    assert updated.calibration is None
    assert any(issubclass(w.category, UpdateWarning) and "venn-abers calibrator" in str(w.message) for w in caught)
    assert "va_p0_pos" not in updated.score("two", con=duck, keep=[]).columns


@pytest.mark.slow  # separate processes: ~15 s under load
def test_cli_calibrate_score_evaluate_update(tmp_path):
    t = TABLES["two"]
    ids = np.array(t.column("id").to_pylist())
    for name, part in (("train", 0), ("holdout", 1), ("test", 2)):
        pq.write_table(t.filter(pa.array(ids % 3 == part)), tmp_path / f"{name}.parquet")
    run = lambda *a: run_in(tmp_path, *a, process=True)  # noqa: E731
    assert exit_code(run("fit", "train.parquet", "--label", "y", "--exclude", "id", "--model", "m.duckdb:nb")) == 0
    r = run("calibrate", "holdout.parquet", "--model", "m.duckdb:nb", "--method", "venn-abers", "--format", "json")
    assert exit_code(r) == 0, r.stderr
    assert json.loads(r.stdout)["method"] == "venn-abers" and json.loads(r.stdout)["rows"] == 200
    assert "calibrated   venn-abers (" in run("show", "--model", "m.duckdb:nb").stdout
    scored = run("score", "test.parquet", "--model", "m.duckdb:nb", "--keep", "id", "--out", "-")
    lines = scored.stdout.splitlines()
    assert lines[0] == "id,proba_neg,proba_pos,va_p0_neg,va_p0_pos,va_p1_neg,va_p1_pos,prediction"
    assert [int(x.split(",")[0]) for x in lines[1:]] == ids[ids % 3 == 2].tolist()
    report = run("evaluate", "test.parquet", "--model", "m.duckdb:nb").stdout
    assert "log loss" in report and "ECE" in report and "VA width" in report
    r = run("update", "holdout.parquet", "--model", "m.duckdb:nb")
    assert exit_code(r) == 0 and "venn-abers calibrator was fitted on its old scores and is dropped" in r.stderr
    assert "va_p0_pos" not in run("score", "test.parquet", "--model", "m.duckdb:nb", "--out", "-").stdout


# -- the same outputs on every engine ----------------------------------------------------------
def _want(cal, name: str, duck) -> pa.Table:
    return cal.score(name, con=duck, outputs=("proba", "prediction"), keep=["id"]).to_arrow_table()


def _same(cal, got: pa.Table, want: pa.Table, where: str) -> None:
    g, w = got.sort_by("id").to_pydict(), want.sort_by("id").to_pydict()
    assert g["id"] == w["id"] and g["prediction"] == w["prediction"], where
    for c in [*cal.proba_columns(), *cal.calibration.output_columns(cal.classes)]:
        np.testing.assert_allclose(np.array(g[c], dtype=float), np.array(w[c], dtype=float), rtol=0,
                                   atol=ENGINE_TOL, err_msg=f"{where}: {c}")


@pytest.mark.slow  # SQLite's nested CASEs: ~10 s under load
def test_exported_sql_runs_in_sqlite(duck, models):
    for name, (_, cal) in models.items():
        db = sqlite_connection()
        sqlite_table(db, name, TABLES[name])
        cur = db.execute(cal.to_sql(dialect="sqlite", source=name, outputs=("proba", "prediction")))
        _same(cal, _fetch(cur.fetchall(), [c[0] for c in cur.description]), _want(cal, name, duck), f"sqlite {name}")


@pytest.mark.postgres
def test_exported_sql_runs_in_postgres_and_is_stored_there(duck, models):
    from support.engines import postgres_engine
    with postgres_engine(TABLES) as pg:
        import psycopg
        for name, (_, cal) in models.items():
            with psycopg.connect(pg.dsn) as c, c.cursor() as cur:
                cur.execute(cal.to_sql(dialect="postgres", source=name, outputs=("proba", "prediction")))
                got = _fetch(cur.fetchall(), [d.name for d in cur.description])
            _same(cal, got, _want(cal, name, duck), f"postgres {name}")
            cal.save(pg, f"va_{name}")
            assert sqlnb.load(pg, f"va_{name}").calibration == cal.calibration


@pytest.mark.spark
def test_exported_sql_runs_in_spark_and_is_stored_there(duck, models):
    from support.engines import spark_engine
    with spark_engine(TABLES) as spark:
        for name, (_, cal) in models.items():
            df = spark.spark.sql(cal.to_sql(dialect="spark", source=name, outputs=("proba", "prediction")))
            _same(cal, pa.Table.from_pylist([r.asDict() for r in df.collect()]), _want(cal, name, duck),
                  f"spark {name}")
            cal.save(spark, f"va_{name}", replace=True)
            assert sqlnb.load(spark, f"va_{name}").calibration == cal.calibration


def test_dbt_macro_scores_as_sqlnb_score(duck, models):
    from sqlnb.workflows import dbt
    from test_dbt import _macro_sql
    for name, (_, fitted) in models.items():
        fitted.save(duck, f"dbt_{name}", replace=True)
        cal = sqlnb.load(duck, f"dbt_{name}")  # a stored model: it has a fingerprint
        select = _macro_sql(dbt.package_files(cal, "m"), "m", f'"{name}"', ["id"])
        got = duck.sql(select)
        want = cal.score(name, con=duck, outputs=("proba", "prediction"), keep=["id"])
        assert got.columns == want.columns and "va_p1_" + str(cal.classes[-1]) in got.columns
        assert sorted(got.fetchall()) == sorted(want.fetchall())
