"""The stored format is versioned.

Every model records the format it was stored in (``format`` in its metadata,
:data:`sqlnb.store.FORMAT`). A model stored in a newer format than this sqlnb reads is
refused in one line naming the model, its format, the formats this sqlnb reads and the
fix; a model of every earlier format loads and scores as it did. Each format has fixtures
(tests/fixtures): ``models_7313a04`` (six models, checked in
tests/test_stored_format.py) and ``format1_models`` (thirteen models of every structure
format 1 holds today: TAN, binned, calibrated, with a decision rule, updated, text, LDA,
QDA, logistic; written by ``make_format1_models.py`` through the command line).
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.store import FORMAT
from sqlnb.models.finish import OUTPUTS
from support.cli import invoke, mixed_table
from support.stored import assert_scores_as_stored

FIXTURES = Path(__file__).parent / "fixtures"
#: format -> the fixture files of that format (a new format adds its own).
BY_FORMAT = {1: ["models_7313a04.duckdb.gz", "format1_models.duckdb.gz"], 2: ["format2_models.duckdb.gz"],
             3: ["format3_models.duckdb.gz"]}
FORMAT1 = ("nb_mixed", "nb_text", "tan", "binned_mdl", "binned_quantile_tan", "calibrated_isotonic",
           "calibrated_temperature_tan", "decided_costs", "decided_threshold", "updated", "lda", "qda", "logistic")


def _unzip(name: str, into: Path) -> Path:
    path = into / name.removesuffix(".gz")
    with gzip.open(FIXTURES / name, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return path


@pytest.fixture(scope="module")
def format1(tmp_path_factory):
    return _unzip("format1_models.duckdb.gz", tmp_path_factory.mktemp("format1"))


def _formats(path: Path) -> dict:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return {n: json.loads(m).get("format") for n, m in con.sql("SELECT name, meta FROM sqlnb.models").fetchall()}
    finally:
        con.close()


def test_every_format_up_to_the_current_one_has_fixtures_stored_in_it(tmp_path):
    assert sorted(BY_FORMAT) == list(range(1, FORMAT + 1)), "a new FORMAT needs a fixture of its own"
    for fmt, names in BY_FORMAT.items():
        for name in names:
            formats = _formats(_unzip(name, tmp_path))
            assert formats and set(formats.values()) == {fmt}, (name, formats)


def test_the_format1_fixture_lists_every_model(format1):
    assert sorted(m["name"] for m in sqlnb.list_models(str(format1))) == sorted(FORMAT1)


@pytest.mark.parametrize("name", FORMAT1)
def test_a_format1_model_scores_as_when_it_was_stored(format1, name):
    model = sqlnb.load(str(format1), name)
    con = duckdb.connect(str(format1), read_only=True)
    got = model.score("fixture_input", con, keep=["id"], outputs=OUTPUTS).to_arrow_table().to_pydict()
    want = con.sql(f'SELECT * FROM "expected_{name}" ORDER BY id').to_arrow_table().to_pydict()
    con.close()
    order = np.argsort(got["id"])
    assert_scores_as_stored({c: [v[i] for i in order] for c, v in got.items()}, want)


def test_a_saved_model_records_the_lowest_format_that_holds_it(tmp_path):
    """Format 2 adds conformal sets: a model without them stays format 1 (any sqlnb reads
    it), one with them is format 2 (tests/test_conformal.py); format 3, the current one,
    adds RAPS's sets and sets by a column (tests/test_conformal_raps.py,
    tests/test_conformal_groups.py), and only those are stored in it."""
    db = tmp_path / "m.duckdb"
    model = sqlnb.fit(mixed_table(60), "y", features=["x", "z"])
    model.save(db, "m")
    from sqlnb.workflows.conformal import conformal
    conformal(model, mixed_table(60, seed=1), 0.2).save(db, "sets")
    conformal(model, mixed_table(60, seed=1), 0.2, "raps", lam=0.1, k_reg=1).save(db, "raps")
    assert _formats(db) == {"m": 1, "sets": 2, "raps": FORMAT} and FORMAT == 3


@pytest.fixture
def newer(tmp_path):
    """A store with model ``future`` stored in format FORMAT + 1 by sqlnb 9.0.0, and
    ``today`` in the current one."""
    db = tmp_path / "m.duckdb"
    model = sqlnb.fit(mixed_table(60), "y", features=["x", "z"])
    model.save(db, "future")
    model.save(db, "today")
    con = duckdb.connect(str(db))
    meta = json.loads(con.sql("SELECT meta FROM sqlnb.models WHERE name = 'future'").fetchall()[0][0])
    meta["format"] = FORMAT + 1
    meta["versions"]["sqlnb"] = "9.0.0"
    con.execute("UPDATE sqlnb.models SET meta = ? WHERE name = 'future'", [json.dumps(meta)])
    con.close()
    return db


def _refusal(db) -> str:
    return (f"model 'future' is stored in format {FORMAT + 1} by sqlnb 9.0.0; this sqlnb {sqlnb.__version__} "
            f"reads formats up to {FORMAT}: upgrade sqlnb (pip install -U sqlnb) to load it")


def test_a_model_of_a_newer_format_is_refused_in_one_line(newer):
    with pytest.raises(SqlnbError) as e:
        sqlnb.load(newer, "future")
    assert str(e.value) == _refusal(newer)
    for args in (["show", "--model", f"{newer}:future"],
                 ["score", str(newer) + ":sqlnb.models", "--model", f"{newer}:future", "--out", "-"]):
        result = invoke(*args)
        assert result.exit_code == 2 and result.stdout == "", (args, result.stdout)
        assert result.stderr == f"Error: {_refusal(newer)}\n", args


def test_a_newer_model_does_not_stop_the_others(newer):
    """Listing the store still works and names both; the current model loads; the newer
    one can be dropped (or replaced) by this sqlnb, which reads nothing of it."""
    assert [m["name"] for m in sqlnb.list_models(newer)] == ["future", "today"]
    assert sqlnb.load(newer, "today").classes
    assert invoke("drop", "--model", f"{newer}:future").exit_code == 0
    assert [m["name"] for m in sqlnb.list_models(newer)] == ["today"]


def test_a_model_without_a_format_is_format_1(tmp_path):
    """The first stored models may lack the key: they are read as format 1."""
    db = tmp_path / "m.duckdb"
    sqlnb.fit(mixed_table(60), "y", features=["x", "z"]).save(db, "old")
    con = duckdb.connect(str(db))
    meta = json.loads(con.sql("SELECT meta FROM sqlnb.models").fetchall()[0][0])
    del meta["format"]
    con.execute("UPDATE sqlnb.models SET meta = ?", [json.dumps(meta)])
    con.close()
    assert sqlnb.load(db, "old").classes == ["a", "b", "c"]
