"""``sqlnb conformal``: the command, the stored sets and what keeps or
drops them, the format rule, evaluate's coverage, and the edge cases. The oracles and the
coverage guarantee are tests/test_conformal_oracles.py; other engines
tests/test_conformal_engines.py."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
import sqlnb.store.catalog as catalog
from sqlnb.errors import SqlnbError, UpdateWarning
from sqlnb.models.calibration import calibrate
from sqlnb.workflows.conformal import conformal, coverage
from sqlnb.models.finish import OUTPUTS
from support.cli import invoke
from support.stored import assert_scores_as_stored

FIXTURES = Path(__file__).parent / "fixtures"


def table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    return pa.table({"id": np.arange(n), "x": rng.normal(y * 1.5, 1.0), "z": rng.normal(-y * 1.0, 1.0),
                     "y": np.array(["a", "b", "c"])[y]})


@pytest.fixture
def files(tmp_path):
    for name, (n, seed) in {"train": (600, 0), "cal": (500, 1), "test": (400, 2)}.items():
        pq.write_table(table(n, seed), tmp_path / f"{name}.parquet")
    db = tmp_path / "m.duckdb"
    assert invoke("fit", str(tmp_path / "train.parquet"), "--label", "y", "--features", "x,z",
                  "--model", f"{db}:nb").exit_code == 0
    return tmp_path, db


def test_the_command_stores_sets_that_score_evaluate_and_show_use(files):
    tmp, db = files
    r = invoke("conformal", str(tmp / "cal.parquet"), "--model", f"{db}:nb", "--alpha", "0.1")
    assert r.exit_code == 0, r.output
    model = sqlnb.load(str(db), "nb")
    q = model.conformal.thresholds[0]
    assert r.stdout == (f"conformal 'nb' in {db}: lac sets at alpha = 0.1 (threshold {q:.6g} on 500 rows of "
                        f"{str(tmp / 'cal.parquet')!r})\n")
    # the threshold is the ceil(501 * 0.9) = 451st smallest 1 - p_y of the held-out rows
    con = duckdb.connect()
    cal = table(500, 1)
    p = model.score(cal, con, outputs=("proba",)).to_arrow_table()
    scores = np.sort([1 - p[f"proba_{y}"][i].as_py() for i, y in enumerate(cal["y"].to_pylist())])
    assert q == scores[450]
    scored = invoke("score", str(tmp / "test.parquet"), "--model", f"{db}:nb", "--out", str(tmp / "s.parquet"))
    assert scored.exit_code == 0, scored.output
    out = pq.read_table(tmp / "s.parquet").to_pydict()
    assert list(out)[-2:] == ["prediction_set", "set_size"]
    for i in range(len(out["id"])):
        want = [c for c in "abc" if 1 - out[f"proba_{c}"][i] <= q]
        assert out["prediction_set"][i] == want and out["set_size"][i] == len(want)
    ev = invoke("evaluate", str(tmp / "test.parquet"), "--model", f"{db}:nb", "--format", "json")
    got = json.loads(ev.stdout)["conformal"]
    hits = [out["y"][i] in out["prediction_set"][i] for i in range(len(out["id"]))]
    assert got["coverage"] == pytest.approx(np.mean(hits), abs=1e-15) and got["rows"] == 400
    assert got["mean_set_size"] == pytest.approx(np.mean(out["set_size"]), abs=1e-15)
    for c in "abc":
        rows = [i for i in range(len(out["id"])) if out["y"][i] == c]
        assert got["per_class"][c]["rows"] == len(rows)
        assert got["per_class"][c]["coverage"] == pytest.approx(np.mean([hits[i] for i in rows]), abs=1e-15)
    assert sum(v["rows"] for v in got["by_set_size"].values()) == 400
    text = invoke("evaluate", str(tmp / "test.parquet"), "--model", f"{db}:nb").stdout
    assert f"conformal   lac sets at alpha = 0.1: coverage {got['coverage']:.4f} (target >= 0.9)" in text
    show = invoke("show", "--model", f"{db}:nb").stdout
    assert f"conformal    lac sets at alpha = 0.1 (threshold {q:.6g} on 500 rows" in show
    assert invoke("conformal", "--model", f"{db}:nb", "--clear").exit_code == 0
    assert sqlnb.load(str(db), "nb").conformal is None


def test_update_and_calibrate_drop_the_sets_with_a_note(files):
    tmp, db = files
    assert invoke("conformal", str(tmp / "cal.parquet"), "--model", f"{db}:nb", "--method", "mondrian").exit_code == 0
    r = invoke("update", str(tmp / "cal.parquet"), "--model", f"{db}:nb")
    assert r.exit_code == 0
    assert "the model's conformal sets were fitted on its old probabilities and are dropped" in r.stderr
    assert sqlnb.load(str(db), "nb").conformal is None
    assert invoke("conformal", str(tmp / "cal.parquet"), "--model", f"{db}:nb", "--method", "aps").exit_code == 0
    r = invoke("calibrate", str(tmp / "cal.parquet"), "--model", f"{db}:nb")
    assert r.exit_code == 0 and "conformal sets were fitted on its old probabilities and are dropped" in r.stderr
    m = sqlnb.load(str(db), "nb")
    assert m.conformal is None and m.calibration is not None
    # sets fitted on a calibrated model use its calibrated probabilities; decide keeps them
    assert invoke("conformal", str(tmp / "cal.parquet"), "--model", f"{db}:nb").exit_code == 0
    assert invoke("decide", "--model", f"{db}:nb", "--reject", "0.3").exit_code == 0
    m = sqlnb.load(str(db), "nb")
    assert m.conformal is not None and m.decision is not None
    out = m.score(table(50, 3), duckdb.connect()).to_arrow_table()
    assert out.column_names[-4:] == ["expected_cost", "rejected", "prediction_set", "set_size"]
    q = m.conformal.thresholds[0]
    for row in out.to_pylist():
        assert row["prediction_set"] == [c for c in "abc" if 1 - row[f"proba_{c}"] <= q]


def test_update_in_the_library_warns_too():
    model = conformal(sqlnb.fit(table(300, 0), "y", features=["x", "z"]), table(200, 1), 0.1)
    with pytest.warns(UpdateWarning, match="conformal sets"):
        updated = sqlnb.update(model, table(100, 2))
    assert updated.conformal is None
    with pytest.warns(UpdateWarning, match="conformal sets"):
        assert calibrate(model, table(200, 1)).conformal is None


def test_too_few_rows_give_an_infinite_threshold_and_full_sets():
    model = sqlnb.fit(table(300, 0), "y", features=["x", "z"])
    with pytest.warns(UserWarning, match=r"5 held-out rows, fewer than the 9 that alpha = 0.1 needs"):
        m = conformal(model, table(5, 1), 0.1)  # ceil(6 * 0.9) = 6 > 5
    assert m.conformal.thresholds == (math.inf,)
    out = m.score(table(20, 2), duckdb.connect()).to_arrow_table().to_pydict()
    assert all(s == ["a", "b", "c"] for s in out["prediction_set"]) and set(out["set_size"]) == {3}
    # Mondrian: a class without held-out rows keeps an infinite threshold of its own when
    # asked (missing_class="every"; the default, pooled: tests/test_conformal_missing_class.py)
    cal = table(200, 1).filter(pa.compute.not_equal(table(200, 1)["y"], "c"))
    with pytest.warns(UserWarning, match="class 'c' has 0 held-out rows"):
        m = conformal(model, cal, 0.1, "mondrian", missing_class="every")
    assert math.isinf(m.conformal.thresholds[2]) and m.conformal.counts[2] == 0
    out = m.score(table(20, 2), duckdb.connect()).to_arrow_table().to_pydict()
    assert all("c" in s for s in out["prediction_set"])
    # sqlnb.load gives the same (inf survives the store)
    con = duckdb.connect()
    m.save(con, "m")
    assert sqlnb.load(con, "m").conformal == m.conformal


def test_bad_input_is_one_line(files):
    tmp, db = files
    bad = table(20, 1).set_column(3, "y", pa.array(["a"] * 19 + ["zzz"]))
    pq.write_table(bad, tmp / "bad.parquet")
    r = invoke("conformal", str(tmp / "bad.parquet"), "--model", f"{db}:nb")
    assert r.exit_code == 2 and r.stderr.startswith("Error: label 'zzz' in column 'y' of")
    r = invoke("conformal", str(tmp / "cal.parquet"), "--model", f"{db}:nb", "--randomized")
    assert r.exit_code == 2 and "Error: --randomized applies to --method aps only, not lac" in r.stderr
    r = invoke("conformal", str(tmp / "cal.parquet"), "--model", f"{db}:nb", "--alpha", "1.5")
    assert r.exit_code == 2 and r.stderr.count("\n") == 1
    with pytest.raises(SqlnbError, match="no row with a label and probabilities"):
        conformal(sqlnb.fit(table(100, 0), "y", features=["x", "z"]), table(10, 1).slice(0, 0), 0.1)


def test_a_model_with_sets_is_format_2_and_an_older_sqlnb_refuses_it(monkeypatch):
    con = duckdb.connect()
    model = sqlnb.fit(table(300, 0), "y", features=["x", "z"])
    model.save(con, "plain")
    conformal(model, table(200, 1), 0.1, "aps", randomized=True, seed=4).save(con, "sets")
    loaded = sqlnb.load(con, "sets")
    assert loaded.conformal.method == "aps" and loaded.conformal.randomized and loaded.conformal.seed == 4
    monkeypatch.setattr(catalog, "FORMAT", 1)  # a sqlnb of format 1
    sqlnb.load(con, "plain")
    with pytest.raises(SqlnbError, match=r"^model 'sets' is stored in format 2 by sqlnb .*reads formats up to 1: "
                                         r"upgrade sqlnb"):
        sqlnb.load(con, "sets")


def test_the_format2_fixture_scores_as_when_it_was_stored(tmp_path):
    fixture_scores_as_stored("format2_models.duckdb.gz", ("sets_lac", "sets_aps_randomized", "sets_mondrian_calibrated"),
                             tmp_path, OUTPUTS)


def fixture_scores_as_stored(fixture: str, names: tuple, tmp_path, outputs=None) -> duckdb.DuckDBPyConnection:
    """Each model ``names`` of the gzipped store ``fixture`` (tests/fixtures) has sets and
    scores its ``fixture_input`` as its ``expected_<name>`` (with ``outputs``; None:
    score's default): sets exactly, numbers computed on another CPU within 1e-12. Returns
    the store (read only)."""
    path = tmp_path / fixture.removesuffix(".gz")
    with gzip.open(FIXTURES / fixture, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = duckdb.connect(str(path), read_only=True)
    for name in names:
        model = sqlnb.load(con, name)
        assert model.conformal is not None
        got = model.score("fixture_input", con, keep=["id"], **({} if outputs is None else {"outputs": outputs}))
        want = con.sql(f'SELECT * FROM "expected_{name}" ORDER BY id').to_arrow_table().to_pydict()
        assert_scores_as_stored(got.to_arrow_table().to_pydict(), want)
    return con


def test_coverage_needs_sets():
    with pytest.raises(SqlnbError, match="no conformal sets"):
        coverage(sqlnb.fit(table(50, 0), "y", features=["x", "z"]), table(10, 1))
