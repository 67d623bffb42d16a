"""Calibration on degenerate held-out rows, as a user meets it on the command line.

* Platt calibration on held-out rows whose scores do not vary says why it cannot fit (it
  said "did not converge"), and on scores that vary little reaches the minimum; isotonic
  calibration on such rows is scikit-learn's constant;
* rows of one class are refused by every method, and temperature calibration refuses an
  infinite or zero temperature.

The calibrators themselves are in tests/test_calibration.py.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from support.cli import assert_error, exit_code, run_in


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
        r = run_in(d, "fit", f"{data}.parquet", "--label", "y", "--model", f"m.duckdb:{model}")
        assert exit_code(r) == 0, r.stderr
    return d


@pytest.mark.parametrize("data", ["nulls", "constant"])
def test_platt_on_scores_that_do_not_vary_says_why(binary, data):
    r = run_in(binary, "calibrate", f"{data}.parquet", "--model", "m.duckdb:nb", "--method", "platt", process=True)
    assert_error(r, f"every one of the 200 held-out rows of '{data}.parquet' has the same log-odds",
                 "Platt scaling needs scores that vary", "calibrate on rows whose features vary")


def test_isotonic_on_scores_that_do_not_vary_is_scikit_learns_constant(binary):
    """IsotonicRegression of a constant input is the mean label: every row gets the held-out
    frequency of the positive class."""
    r = run_in(binary, "calibrate", "nulls.parquet", "--model", "m.duckdb:nb", "--method", "isotonic",
             "--format", "json")
    assert exit_code(r) == 0, r.stderr
    assert json.loads(r.stdout)["thresholds"] == 1
    scored = run_in(binary, "score", "train.parquet", "--model", "m.duckdb:nb", "--out", "-")
    pos = np.array(_column(scored.stdout, "proba_pos"), dtype=float)
    y = pq.read_table(binary / "nulls.parquet")["y"].to_pylist()
    assert np.all(pos == pytest.approx(y.count("pos") / len(y), abs=1e-12))


@pytest.mark.parametrize("method", ["temperature", "platt", "isotonic", "venn-abers"])
def test_rows_of_one_class_are_refused_by_every_method(binary, method):
    r = run_in(binary, "calibrate", "one_class.parquet", "--model", "m.duckdb:nb", "--method", method)
    assert_error(r, "every held-out row of 'one_class.parquet' is of class 'neg'",
                 f"{method} calibration needs rows of both classes", "calibrate on held-out rows of every class")


def test_temperature_refuses_an_infinite_or_zero_temperature(binary):
    swapped = run_in(binary, "calibrate", "swapped.parquet", "--model", "m.duckdb:sep")  # was T = 5.9e10, exit 0
    assert_error(swapped, "'swapped.parquet' carry no information for temperature scaling",
                 "the log loss falls as T grows without bound", "check the held-out labels")
    separated = run_in(binary, "calibrate", "separated.parquet", "--model", "m.duckdb:sep")  # was "did not converge"
    assert_error(separated, "every one of the 60 held-out rows of 'separated.parquet' scores its own class highest",
                 "T shrinks to 0", "some of which the model gets wrong")
    # the same model on held-out rows it sometimes gets wrong: a finite temperature
    ok = run_in(binary, "calibrate", "train.parquet", "--model", "m.duckdb:sep", "--format", "json")
    assert exit_code(ok) == 0 and 0 < json.loads(ok.stdout)["temperature"] < 100, ok.stderr


@pytest.mark.parametrize("spread", [1e-9, 1e-6])
def test_platt_on_scores_that_vary_little_reaches_the_minimum(binary, spread):
    """Two distinct log-odds: at the minimum, each group's calibrated probability is the mean
    of its rows' Platt targets (the gradient's two equations), whatever the spread."""
    data = f"spread_{spread:g}.parquet"
    r = run_in(binary, "calibrate", data, "--model", "m.duckdb:nb", "--method", "platt")
    assert exit_code(r) == 0, r.stderr
    scored = run_in(binary, "score", data, "--model", "m.duckdb:nb", "--keep", "x", "--out", "-")
    y = np.array(pq.read_table(binary / data)["y"].to_pylist()) == "pos"
    x = np.array(_column(scored.stdout, "x"), dtype=float)
    p = np.array(_column(scored.stdout, "proba_pos"), dtype=float)
    n_pos, n_neg = y.sum(), (~y).sum()
    t = np.where(y, (n_pos + 1) / (n_pos + 2), 1 / (n_neg + 2))
    for g in np.unique(x):
        assert p[x == g] == pytest.approx(t[x == g].mean(), abs=1e-7), (g, spread)
