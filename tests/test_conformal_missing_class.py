"""Mondrian sets when a class has too few held-out rows for a threshold of its own (none,
most often): ``missing_class`` (``--missing-class``) chooses the threshold of all held-out
rows (``pooled``, the default), an infinite one (``every``: the class in every set, what
sqlnb did before the choice existed), none (``exclude``: in no set), or one error line.
The choice is stored with the sets (a model stored without it reads as ``every``), and
the exported SQL gives DuckDB's sets on SQLite and PostgreSQL."""

from __future__ import annotations

import gzip
import math
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.workflows.conformal import conformal
from support.cli import assert_error, invoke
from test_conformal_engines import (postgres_gives_duckdbs_sets_and_stores_them, spark_gives_duckdbs_sets_and_stores_one,
                                     sqlite_gives_duckdbs_sets, table)

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def fitted():
    model = sqlnb.fit(table(400, 0), "y", features=["x", "z"])
    cal = table(300, 1)
    return model, cal.filter(pc.not_equal(cal["y"], "c"))  # no held-out row of class 'c'


def test_the_default_takes_the_threshold_of_all_held_out_rows(fitted):
    model, cal = fitted
    with pytest.warns(UserWarning) as got:
        m = conformal(model, cal, 0.1, "mondrian")
    pooled = conformal(model, cal, 0.1, "lac").conformal.thresholds[0]  # lac's: every held-out row
    sets = m.conformal
    assert sets.missing_class == "pooled" and sets.thresholds[2] == pooled and sets.counts[2] == 0
    assert all(math.isfinite(t) for t in sets.thresholds)
    assert [str(w.message) for w in got] == [
        f"class 'c' has 0 held-out rows, fewer than the 9 that alpha = 0.1 needs (rank ceil((n + 1)(1 - alpha)) > n):"
        f" it takes the threshold of all held-out rows ({pooled:.6g}, lac's) (--missing-class pooled; or every, "
        "exclude, error)"]
    out = m.score(table(200, 2), duckdb.connect()).to_arrow_table().to_pylist()
    for row in out:
        assert ("c" in row["prediction_set"]) == (1 - row["proba_c"] <= pooled)
    assert sets.describe(m.classes)["missing_class"] == "pooled"
    assert f"c: {pooled:.6g} pooled, on 0 rows of" in sets.summary(m.classes)
    con = duckdb.connect()
    m.save(con, "m")
    assert sqlnb.load(con, "m").conformal == sets


def test_every_exclude_and_error(fitted):
    model, cal = fitted
    with pytest.warns(UserWarning, match="its threshold is infinite and every set holds that class"):
        every = conformal(model, cal, 0.1, "mondrian", missing_class="every")
    with pytest.warns(UserWarning, match="it has no threshold and no set holds that class"):
        exclude = conformal(model, cal, 0.1, "mondrian", missing_class="exclude")
    assert every.conformal.thresholds[2] == math.inf and exclude.conformal.thresholds[2] == -math.inf
    assert every.conformal.thresholds[:2] == exclude.conformal.thresholds[:2]
    rows = table(200, 2)
    assert all("c" in s for s in every.score(rows, duckdb.connect()).to_arrow_table()["prediction_set"].to_pylist())
    assert all("c" not in s for s in exclude.score(rows, duckdb.connect()).to_arrow_table()["prediction_set"].to_pylist())
    assert "c: -inf (in no set) on 0 rows" in exclude.conformal.summary(model.classes)
    # "every" is how sets stored before the choice existed read: no column of its own.
    assert "missing_class" not in every.conformal.tables()["conformal"][0].column_names
    assert exclude.conformal.tables()["conformal"][0]["missing_class"].to_pylist() == ["exclude"]
    con = duckdb.connect()
    for name, m in (("every", every), ("exclude", exclude)):
        m.save(con, name)
        assert sqlnb.load(con, name).conformal == m.conformal
    with pytest.raises(SqlnbError) as e:
        conformal(model, cal, 0.1, "mondrian", missing_class="error")
    assert str(e.value).startswith("class 'c' (0) of the in-memory table has fewer held-out rows than the 9 that "
                                   "alpha = 0.1 needs (rank ceil((n + 1)(1 - alpha)) > n) for a threshold of its own; "
                                   "give held-out rows of every class, or choose what such a class gets with "
                                   "--missing-class pooled, every or exclude")
    with pytest.raises(SqlnbError, match="--missing-class applies to --method mondrian only"):
        conformal(model, cal, 0.1, "lac", missing_class="exclude")
    with pytest.raises(SqlnbError, match="unknown --missing-class 'pool' \\(did you mean 'pooled'\\?\\)"):
        conformal(model, cal, 0.1, "mondrian", missing_class="pool")


def test_sets_stored_before_the_choice_read_as_every(tmp_path):
    path = tmp_path / "f2.duckdb"
    with gzip.open(FIXTURES / "format2_models.duckdb.gz", "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = duckdb.connect(str(path), read_only=True)
    assert sqlnb.load(con, "sets_mondrian_calibrated").conformal.missing_class == "every"
    assert sqlnb.load(con, "sets_lac").conformal.missing_class is None


def test_the_command_line_stores_the_choice_and_refuses_in_one_line(fitted, tmp_path):
    model, cal = fitted
    pq.write_table(cal, tmp_path / "cal.parquet")
    db = tmp_path / "m.duckdb"
    model.save(str(db), "nb")
    r = invoke("conformal", tmp_path / "cal.parquet", "--model", f"{db}:nb", "--method", "mondrian",
               "--missing-class", "exclude")
    assert r.exit_code == 0, r.stderr
    assert "c: -inf (in no set) on 0 rows" in r.stdout and "(--missing-class exclude;" in r.stderr
    stored = sqlnb.load(str(db), "nb").conformal
    assert stored.missing_class == "exclude" and stored.thresholds[2] == -math.inf
    before = sqlnb.load(str(db), "nb").conformal
    assert_error(invoke("conformal", tmp_path / "cal.parquet", "--model", f"{db}:nb", "--method", "mondrian",
                        "--missing-class", "error"), "Error: class 'c' (0) of", "--missing-class pooled, every or exclude")
    assert sqlnb.load(str(db), "nb").conformal == before  # nothing written
    assert_error(invoke("conformal", tmp_path / "cal.parquet", "--model", f"{db}:nb", "--missing-class", "every"),
                 "Error: --missing-class applies to --method mondrian only (a threshold per class), not lac")
    r = invoke("conformal", tmp_path / "cal.parquet", "--model", f"{db}:nb", "--method", "mondrian")
    assert r.exit_code == 0 and "pooled, on 0 rows" in r.stdout
    assert "pooled, the threshold of all held-out rows (lac's; the default: sets stay as small as lac's)" in " ".join(invoke("conformal", "--help").stdout.split())


@pytest.fixture(scope="module")
def choices(fitted):
    model, cal = fitted
    with pytest.warns(UserWarning):
        return {c: conformal(model, cal, 0.1, "mondrian", missing_class=c) for c in ("pooled", "every", "exclude")}


def test_sqlite_gives_duckdbs_sets_for_every_choice(choices):
    sqlite_gives_duckdbs_sets(choices)


@pytest.mark.postgres
def test_postgres_gives_duckdbs_sets_for_every_choice_and_stores_it(choices):
    postgres_gives_duckdbs_sets_and_stores_them(choices)


@pytest.mark.spark
def test_spark_gives_duckdbs_sets_for_every_choice_and_stores_it(choices):
    spark_gives_duckdbs_sets_and_stores_one(choices, "exclude")
