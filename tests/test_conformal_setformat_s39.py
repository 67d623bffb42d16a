"""Conformal sets as flags in DuckDB too (issue 30, acceptance 4's last clause): writing the
``prediction_set`` LIST to Parquet cost APS 1.37x the CPU of scoring without sets, the same
sets as one BOOLEAN ``in_set_<class>`` per class ~1.1x (benchmarks/README.md). So
``set_format="flags"`` (``--set-format flags`` on ``score`` and ``sql``) gives the portable
form on DuckDB: the same sets row for row, for every method; the list stays DuckDB's default."""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.workflows.conformal import coverage
from support.cli import invoke
from test_conformal_s38 import CLASSES, fitted, reference_sets, table


@pytest.fixture(scope="module")
def models():
    return fitted()


def flag_sets(out: dict) -> list:
    """The classes whose ``in_set_<class>`` is true, in class order (None: no set)."""
    rows = range(len(out["set_size"]))
    if any(out[f"in_set_{c}"][i] is None for i in rows for c in CLASSES):
        assert all((out[f"in_set_{c}"][i] is None) == (out["set_size"][i] is None) for i in rows for c in CLASSES)
    return [None if out["set_size"][i] is None else [c for c in CLASSES if out[f"in_set_{c}"][i]] for i in rows]


@pytest.mark.parametrize("twins", [False, True], ids=["random", "ties"])
def test_flags_are_the_lists_sets_row_for_row(models, twins):
    t = table(300, 2, twins)
    for name, m in (fitted(twins=True) if twins else models).items():
        con = duckdb.connect()
        lists = m.score(t, con, keep=["id"]).to_arrow_table().to_pydict()
        flags = m.score(t, con, keep=["id"], set_format="flags").to_arrow_table().to_pydict()
        assert list(flags) == ["id", "proba_a", "proba_b", "proba_c", "prediction", "in_set_a", "in_set_b",
                               "in_set_c", "set_size"], name
        assert flag_sets(flags) == lists["prediction_set"], name
        assert flags["set_size"] == lists["set_size"] and flags["prediction"] == lists["prediction"], name
        if name != "aps_randomized":
            assert flag_sets(flags) == reference_sets(m, lists), name
        assert len(set(flags["set_size"])) >= 2, name


def test_flags_build_no_list_and_equal_the_other_dialects_form(models):
    for name, m in models.items():
        text = re.sub(r"\s+", " ", m.to_sql("duckdb", "t", set_format="flags"))
        assert "LIST_EXTRACT" not in text and "prediction_set" not in text and '"in_set_c"' in text, name
        assert m.to_sql("sqlite", "t", set_format="flags") == m.to_sql("sqlite", "t"), name
        assert "prediction_set" in m.to_sql("duckdb", "t", set_format="list") == m.to_sql("duckdb", "t"), name


def test_a_row_without_probabilities_has_null_flags():
    kinds = {"c": "categorical", "d": "categorical"}
    m = sqlnb.fit(pa.table({"c": ["u", "u", "v", "v"], "d": ["x", "x", "y", "y"], "y": ["a", "a", "b", "b"]}), "y",
                  feature_kinds=kinds, alpha=0.0)
    m = sqlnb.workflows.conformal.conformal(
        m, pa.table({"c": ["u", "v"] * 10, "d": ["x", "y"] * 10, "y": ["a", "b"] * 10}), 0.1, "aps")
    out = m.score(pa.table({"c": ["u", "u", "v"], "d": ["x", "y", "y"]}), duckdb.connect(),
                  set_format="flags").to_arrow_table().to_pydict()
    assert out["in_set_a"] == [True, None, False] and out["in_set_b"] == [False, None, True]
    assert out["set_size"] == [1, None, 1]


def test_bad_set_formats_are_one_line(models):
    with pytest.raises(SqlnbError, match=r"set format list needs a dialect with lists \(duckdb\); postgres has none"):
        models["lac"].to_sql("postgres", "t", set_format="list")
    with pytest.raises(SqlnbError, match=r"unknown set format 'flag' \(did you mean 'flags'\?\); choose list"):
        models["lac"].score(table(5, 2), duckdb.connect(), set_format="flag")
    bare = sqlnb.fit(table(100, 0), "y", features=["x", "z"])
    with pytest.raises(SqlnbError, match="the model has none; fit them with sqlnb conformal"):
        bare.score(table(5, 2), duckdb.connect(), set_format="flags")


def test_coverage_is_the_same_as_the_lists(models):
    """evaluate's coverage reads the flags (no list per row): the figures the lists give."""
    t = table(300, 2)
    for name, m in models.items():
        out = m.score(t, duckdb.connect(), keep=["y"]).to_arrow_table().to_pydict()
        hit = [s is not None and y in s for y, s in zip(out["y"], out["prediction_set"])]
        cov = coverage(m, t)
        assert cov["rows"] == 300 and cov["coverage"] == sum(hit) / 300, name
        assert cov["mean_set_size"] == sum(out["set_size"]) / 300, name


def test_the_cli_writes_flags_and_refuses_what_cannot_be(models, tmp_path):
    db = tmp_path / "m.duckdb"
    models["aps"].save(str(db), "nb")
    bare = sqlnb.fit(table(100, 0), "y", features=["x", "z"])
    bare.save(str(db), "bare")
    pq.write_table(table(200, 2), tmp_path / "t.parquet")
    r = invoke("score", str(tmp_path / "t.parquet"), "--model", f"{db}:nb", "--keep", "id", "--set-format", "flags",
               "--out", str(tmp_path / "s.parquet"))
    assert r.exit_code == 0, r.output
    flags = pq.read_table(tmp_path / "s.parquet").to_pydict()
    lists = models["aps"].score(table(200, 2), duckdb.connect(), keep=["id"]).to_arrow_table().to_pydict()
    assert "prediction_set" not in flags and flag_sets(flags) == lists["prediction_set"]
    r = invoke("sql", "--model", f"{db}:nb", "--set-format", "flags", "--source", "t")
    assert r.exit_code == 0 and '"in_set_a"' in r.stdout and "prediction_set" not in r.stdout, r.output
    for args, said in [
        (["sql", "--model", f"{db}:nb", "--set-format", "list", "--dialect", "spark", "--source", "t"],
         "Error: the set format list needs a dialect with lists (duckdb); spark has none: use flags"),
        (["score", str(tmp_path / "t.parquet"), "--model", f"{db}:bare", "--set-format", "flags", "--out", "-"],
         "Error: the set format 'flags' (--set-format) chooses how conformal sets come out, and the model has none"),
        (["sql", "--fit", "--model", f"{db}:nb", "--set-format", "flags"],
         "Error: --set-format chooses how the scoring SELECT gives conformal sets; leave it out with --fit"),
    ]:
        r = invoke(*args)
        assert r.exit_code != 0 and r.stdout == "", args
        assert len(r.stderr.strip().splitlines()) == 1 and r.stderr.startswith(said), r.stderr
    assert "--set-format [list|flags]" in invoke("score", "--help").stdout
