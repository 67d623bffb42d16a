"""Issue 27, item 10 (three of the smaller ones), as a user meets them on the command line:

* Platt calibration on held-out rows whose scores do not vary said "did not converge";
* temperature calibration on rows of one class was accepted (and so were rows whose best
  temperature is infinite or 0);
* ``sql --fit`` of a tree-augmented model printed the naive statistics without the pair
  scan, and of models whose fit needs more than static SQL (bins, weighted Gaussian
  columns, token bags) said nothing.
"""

from __future__ import annotations

import json
import os

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from support.cli import assert_error, invoke, run_process
from test_engines import _sqlite_table, sqlite_connection


def _run(tmp_path, *args, process: bool = False):
    """``sqlnb ARGS`` run in ``tmp_path``: a real process when ``process``, else in-process
    through click (the same command, without a Python start-up per call)."""
    if process:
        return run_process(*args, module=True, cwd=str(tmp_path))
    old = os.getcwd()
    os.chdir(tmp_path)
    try:
        return invoke(*args)
    finally:
        os.chdir(old)


def _code(result) -> int:
    return getattr(result, "exit_code", getattr(result, "returncode", None))


def _column(csv: str, name: str) -> list[str]:
    """One column of ``sqlnb score --out -``'s CSV."""
    lines = csv.splitlines()
    j = lines[0].split(",").index(name)
    return [line.split(",")[j] for line in lines[1:]]


def _labels(y) -> list:
    return np.where(y, "pos", "neg").tolist()


# -- calibration -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    """A Gaussian model of one column, and held-out files a user could calibrate on."""
    d = tmp_path_factory.mktemp("cal")
    rng = np.random.default_rng(0)
    n = 200
    y = rng.random(n) < 0.4
    x = rng.normal(np.where(y, 1.0, 0.0), 1.0)
    pq.write_table(pa.table({"x": x, "y": _labels(y)}), d / "train.parquet")
    # every feature NULL: every row scores the prior, one log-odds
    pq.write_table(pa.table({"x": pa.array([None] * n, pa.float64()), "y": _labels(y)}), d / "nulls.parquet")
    pq.write_table(pa.table({"x": np.full(n, 0.5), "y": _labels(y)}), d / "constant.parquet")
    pq.write_table(pa.table({"x": x[~y], "y": ["neg"] * int((~y).sum())}), d / "one_class.parquet")
    for spread in (1e-9, 1e-6):  # two values of x that differ by `spread`, labels independent of them
        pq.write_table(pa.table({"x": 0.5 + spread * rng.integers(0, 2, n), "y": _labels(y)}),
                       d / f"spread_{spread:g}.parquet")
    # well separated classes, held-out rows all classified right, or with their labels swapped
    ys = rng.random(n) < 0.5
    pq.write_table(pa.table({"x": rng.normal(np.where(ys, 3.0, 0.0), 1.0), "y": _labels(ys)}), d / "sep_train.parquet")
    h = rng.random(60) < 0.5
    far = np.where(h, 4.0, -1.0) + rng.uniform(0, 0.1, 60)
    pq.write_table(pa.table({"x": far, "y": _labels(h)}), d / "separated.parquet")
    pq.write_table(pa.table({"x": far, "y": _labels(~h)}), d / "swapped.parquet")
    for data, model in (("train", "nb"), ("sep_train", "sep")):
        r = _run(d, "fit", f"{data}.parquet", "--label", "y", "--model", f"m.duckdb:{model}")
        assert _code(r) == 0, r.stderr
    return d


@pytest.mark.parametrize("data", ["nulls", "constant"])
def test_platt_on_scores_that_do_not_vary_says_why(binary, data):
    r = _run(binary, "calibrate", f"{data}.parquet", "--model", "m.duckdb:nb", "--method", "platt", process=True)
    assert_error(r, f"every one of the 200 held-out rows of '{data}.parquet' has the same log-odds",
                 "Platt scaling needs scores that vary", "calibrate on rows whose features vary")


def test_isotonic_on_scores_that_do_not_vary_is_scikit_learns_constant(binary):
    """IsotonicRegression of a constant input is the mean label: every row gets the held-out
    frequency of the positive class."""
    r = _run(binary, "calibrate", "nulls.parquet", "--model", "m.duckdb:nb", "--method", "isotonic",
             "--format", "json")
    assert _code(r) == 0, r.stderr
    assert json.loads(r.stdout)["thresholds"] == 1
    scored = _run(binary, "score", "train.parquet", "--model", "m.duckdb:nb", "--out", "-")
    pos = np.array(_column(scored.stdout, "proba_pos"), dtype=float)
    y = pq.read_table(binary / "nulls.parquet")["y"].to_pylist()
    assert np.all(pos == pytest.approx(y.count("pos") / len(y), abs=1e-12))


@pytest.mark.parametrize("method", ["temperature", "platt", "isotonic"])
def test_rows_of_one_class_are_refused_by_every_method(binary, method):
    r = _run(binary, "calibrate", "one_class.parquet", "--model", "m.duckdb:nb", "--method", method)
    assert_error(r, "every held-out row of 'one_class.parquet' is of class 'neg'",
                 f"{method} calibration needs rows of both classes", "calibrate on held-out rows of every class")


def test_temperature_refuses_an_infinite_or_zero_temperature(binary):
    swapped = _run(binary, "calibrate", "swapped.parquet", "--model", "m.duckdb:sep")  # was T = 5.9e10, exit 0
    assert_error(swapped, "'swapped.parquet' carry no information for temperature scaling",
                 "the log loss falls as T grows without bound", "check the held-out labels")
    separated = _run(binary, "calibrate", "separated.parquet", "--model", "m.duckdb:sep")  # was "did not converge"
    assert_error(separated, "every one of the 60 held-out rows of 'separated.parquet' scores its own class highest",
                 "T shrinks to 0", "some of which the model gets wrong")
    # the same model on held-out rows it sometimes gets wrong: a finite temperature
    ok = _run(binary, "calibrate", "train.parquet", "--model", "m.duckdb:sep", "--format", "json")
    assert _code(ok) == 0 and 0 < json.loads(ok.stdout)["temperature"] < 100, ok.stderr


@pytest.mark.parametrize("spread", [1e-9, 1e-6])
def test_platt_on_scores_that_vary_little_reaches_the_minimum(binary, spread):
    """Two distinct log-odds: at the minimum, each group's calibrated probability is the mean
    of its rows' Platt targets (the gradient's two equations), whatever the spread."""
    data = f"spread_{spread:g}.parquet"
    r = _run(binary, "calibrate", data, "--model", "m.duckdb:nb", "--method", "platt")
    assert _code(r) == 0, r.stderr
    scored = _run(binary, "score", data, "--model", "m.duckdb:nb", "--keep", "x", "--out", "-")
    y = np.array(pq.read_table(binary / data)["y"].to_pylist()) == "pos"
    x = np.array(_column(scored.stdout, "x"), dtype=float)
    p = np.array(_column(scored.stdout, "proba_pos"), dtype=float)
    n_pos, n_neg = y.sum(), (~y).sum()
    t = np.where(y, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    for g in np.unique(x):
        assert p[x == g] == pytest.approx(t[x == g].mean(), abs=1e-7), (g, spread)


# -- sql --fit ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tan(tmp_path_factory):
    """Three categorical columns and a numeric one, binned by MDL: all four tree features."""
    d = tmp_path_factory.mktemp("tan")
    rng = np.random.default_rng(1)
    n = 300
    k = rng.integers(0, 3, n)
    a = np.array(list("pqr"))[(k + rng.integers(0, 2, n)) % 3]
    b = np.where(rng.random(n) < 0.8, a, np.array(list("pqr"))[rng.integers(0, 3, n)])
    c = np.array(list("uv"))[(k > 0).astype(int) ^ (rng.random(n) < 0.2)]
    x = rng.normal(2.0 * k, 1.0)
    t = np.array(["good day", "bad day sir", "good good", "meh"])[rng.integers(0, 4, n)]
    table = pa.table({"a": pa.array(a.tolist(), mask=rng.random(n) < 0.05), "b": b, "c": c, "x": x, "t": t,
                      "w": rng.uniform(0.5, 2.0, n), "y": np.array(["A", "B", "C"])[k]})
    pq.write_table(table, d / "train.parquet")
    r = _run(d, "fit", "train.parquet", "-y", "y", "--structure", "tan", "--features", "a,b,c,x", "--bins", "mdl",
             "--model", "m.duckdb:tan")
    assert _code(r) == 0, r.stderr
    return d, table


def _pair_counts(rows, tree: list) -> dict:
    """{(a, b): {(class, u, v): n}} from the pair statement's rows (k, v0, g0, ..., n)."""
    out: dict = {}
    for r in rows:
        on = [j for j in range(len(tree)) if r[2 + 2 * j] == 0]
        assert len(on) == 2
        u, v = r[1 + 2 * on[0]], r[1 + 2 * on[1]]
        if u is None or v is None:
            continue
        out.setdefault((tree[on[0]], tree[on[1]]), {})[(r[0], u, v)] = float(r[-1])
    return out


def _stored_pairs(model) -> dict:
    out = {}
    for key, cell in model.stats.pairs.cells.items():
        out[key] = {(model.classes[i], cell.values_a[u], cell.values_b[v]): float(cell.counts[i, u, v])
                    for i, u, v in zip(*np.nonzero(cell.counts))}
    return out


def test_sql_fit_of_a_tan_model_prints_the_pair_scan_too(tan):
    d, _ = tan
    r = _run(d, "sql", "--fit", "--model", "m.duckdb:tan", "--source", "train", process=True)
    assert _code(r) == 0, r.stderr
    # the cut points come from a pass of their own: said, on one line
    assert r.stderr.splitlines() == [line for line in r.stderr.splitlines() if line.startswith("note: ")]
    assert "cut points of binned column 'x' (mdl) are the model's" in r.stderr
    statements = [s for s in r.stdout.split(";\n") if s.strip()]
    assert len(statements) == 2  # DuckDB: statistics (histogram()), pair counts
    con = duckdb.connect()
    con.execute(f"CREATE VIEW train AS SELECT * FROM '{d}/train.parquet'")
    model = sqlnb.load(f"{d}/m.duckdb", "tan")
    tree = list(model.stats.pairs.features)
    assert set(tree) == {"a", "b", "c", "x"}
    # statistics: rows and the categorical histograms of every class, as stored
    stats = {row[0]: row for row in con.execute(statements[0]).fetchall()}
    for i, cls in enumerate(model.classes):
        assert stats[cls][1] == model.stats.class_rows[i]
    a_hist = {cls: row[2] for cls, row in stats.items()}
    a_counts = model.stats.features["a"]
    for i, cls in enumerate(model.classes):
        assert {v: float(n) for v, n in a_hist[cls].items()} == {
            v: n for v, n in zip(a_counts.values, a_counts.counts[i]) if n}
    # pair counts: exactly the stored ones, binned x by its bin numbers
    got = _pair_counts(con.execute(statements[1]).fetchall(), tree)
    assert got == _stored_pairs(model)


def test_sql_fit_of_a_tan_model_in_sqlite_without_grouping_sets(tan):
    d, table = tan
    r = _run(d, "sql", "--fit", "--model", "m.duckdb:tan", "--source", "train", "--dialect", "sqlite")
    assert _code(r) == 0, r.stderr
    statements = [s for s in r.stdout.split(";\n") if s.strip()]
    assert len(statements) == 3 and "GROUPING SETS" not in r.stdout  # statistics, counts, pair counts
    db = sqlite_connection()
    _sqlite_table(db, "train", table)
    model = sqlnb.load(f"{d}/m.duckdb", "tan")
    got = _pair_counts(db.execute(statements[2]).fetchall(), list(model.stats.pairs.features))
    assert got == _stored_pairs(model)


def test_sql_fit_says_what_the_statements_leave_out(tan):
    d, _ = tan
    cases = {
        "weighted": (["--features", "x,a", "--weight", "w"], "weighted Gaussian column 'x': the variances are a second pass"),
        "text": (["--features", "t", "--feature-kind", "t=multinomial"], "token bag 't': this SQL counts its documents only"),
    }
    for name, (options, note) in cases.items():
        fit = _run(d, "fit", "train.parquet", "-y", "y", *options, "--model", f"m.duckdb:{name}")
        assert _code(fit) == 0, fit.stderr
        r = _run(d, "sql", "--fit", "--model", f"m.duckdb:{name}", "--source", "train")
        assert _code(r) == 0 and r.stdout.startswith("SELECT"), r.stderr
        lines = r.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("note: ") and note in lines[0], (name, r.stderr)
    # a naive model of categorical and Gaussian columns: the statements are the whole fit, no note
    fit = _run(d, "fit", "train.parquet", "-y", "y", "--features", "a,b,x", "--model", "m.duckdb:plain")
    assert _code(fit) == 0, fit.stderr
    r = _run(d, "sql", "--fit", "--model", "m.duckdb:plain", "--source", "train")
    assert _code(r) == 0 and r.stderr == ""
    # LDA, QDA and logistic regression are fitted by sqlnb itself: one line saying so
    fit = _run(d, "fit", "train.parquet", "-y", "y", "--features", "x", "--kind", "lda", "--model", "m.duckdb:lda")
    assert _code(fit) == 0, fit.stderr
    assert_error(_run(d, "sql", "--fit", "--model", "m.duckdb:lda", "--source", "train"),
                 "this model is 'lda', which sqlnb fits itself")
