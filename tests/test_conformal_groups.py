"""Conformal sets by group: Mondrian sets with one threshold per value of a column
(``--method mondrian --by COL``) equal crepes 0.9.1's Mondrian categories row for row; a
value with too few held-out rows, NULL and a value never seen take the threshold of all
held-out rows (a note names the small ones); ``evaluate --by COL`` reports coverage and mean
set size per value; SQLite, PostgreSQL and Spark give DuckDB's sets and figures."""

from __future__ import annotations

import json
import math

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.workflows.conformal import conformal, coverage
from support.cli import assert_error, invoke
from test_conformal_engines import (postgres_gives_duckdbs_sets_and_stores_them, spark_gives_duckdbs_sets_and_stores_one,
                                     sqlite_gives_duckdbs_sets)
from test_conformal_engines import table as engine_table
from test_conformal_oracles import CLASSES, Lookup, data, probabilities

ALPHA = 0.1
SITES = ["north", "south", "east", "tiny"]


def grouped(n: int, seed: int) -> pa.Table:
    """The oracle's four classes, with ``site``: rows of ``east`` are noisier (its sets
    need a larger threshold) and ``tiny`` holds 0.4 % of the rows (too few for α = 0.1)."""
    t = data(n, seed)
    rng = np.random.default_rng(seed + 100)
    site = np.array(SITES)[rng.choice(4, n, p=[0.4, 0.3, 0.296, 0.004])]
    noisy = site == "east"
    x1 = t["x1"].to_numpy() + np.where(noisy, rng.normal(0, 1.5, n), 0.0)
    return t.set_column(1, "x1", pa.array(x1)).append_column("site", pa.array(site))


@pytest.fixture(scope="module")
def setup():
    con = duckdb.connect()
    model = sqlnb.fit(data(600, 1), "y", features=["x1", "x2"])
    return con, model, grouped(1400, 2), grouped(1000, 3)


def sets_of(model, t: pa.Table, con) -> np.ndarray:
    got = model.score(t, con, outputs=("prediction",), keep=["id"]).to_arrow_table().to_pydict()
    return np.array([[c in s for c in CLASSES] for s in got["prediction_set"]])


def test_group_sets_equal_crepes_mondrian_categories(setup):
    """crepes keeps class c when its p-value (#{cal scores ≥ s in the row's group} + 1)/(n_g + 1)
    ≥ α: the set of ``s ≤`` the ⌈(n_g + 1)(1 − α)⌉-th score unless (n_g + 1)·α is a whole
    number (checked not to be). Its groups are the seen ones with enough rows."""
    from crepes import WrapClassifier
    con, model, cal, test = setup
    with pytest.warns(UserWarning, match=r"1 value of column 'site' \('tiny' \(\d+\)\) has fewer held-out rows"):
        fitted = conformal(model, cal, ALPHA, "mondrian", by="site", con=con)
    sets = fitted.conformal
    assert sets.groups == ("east", "north", "south", "tiny") and sets.by == "site"
    counts = dict(zip(sets.groups, sets.counts))
    sites = np.array(cal["site"].to_pylist())
    assert counts == {g: int((sites == g).sum()) for g in sets.groups} and sets.counts[-1] == cal.num_rows
    assert all(round((n + 1) * ALPHA, 9) != int((n + 1) * ALPHA) for g, n in counts.items() if g != "tiny"), counts
    P = np.vstack([probabilities(model, cal, con), probabilities(model, test, con)])
    n = cal.num_rows
    groups = np.concatenate([sites, np.array(test["site"].to_pylist())])
    X = np.arange(len(P))[:, None]
    oracle = WrapClassifier(Lookup(P, CLASSES).fit())
    oracle.calibrate(X[:n], np.array(cal["y"].to_pylist()), mc=lambda X: groups[np.asarray(X)[:, 0].astype(int)])
    want = np.asarray(oracle.predict_set(X[n:], confidence=1 - ALPHA, smoothing=False, labels=False)).astype(bool)
    got = sets_of(fitted, test, con)
    big = np.array(test["site"].to_pylist()) != "tiny"
    assert (got[big] == want[big]).all() and big.sum() > 900
    # east's noisier rows need the largest threshold of the three
    q = dict(zip(sets.groups, sets.thresholds))
    assert q["east"] > max(q["north"], q["south"])


def test_small_null_and_unseen_values_take_the_pooled_threshold(setup):
    con, model, cal, test = setup
    with pytest.warns(UserWarning) as said:
        sets = conformal(model, cal, ALPHA, "mondrian", by="site", con=con)
    pooled = conformal(model, cal, ALPHA, "lac", con=con).conformal.thresholds[0]
    assert sets.conformal.thresholds[-1] == pooled and dict(zip(sets.conformal.groups, sets.conformal.thresholds))[
        "tiny"] == pooled
    n_tiny = int((np.array(cal["site"].to_pylist()) == "tiny").sum())
    assert [str(w.message) for w in said] == [
        f"1 value of column 'site' ('tiny' ({n_tiny})) has fewer held-out rows than the 9 that alpha = 0.1 needs "
        f"(rank ceil((n + 1)(1 - alpha)) > n): it takes the threshold of all held-out rows ({pooled:.6g}), as do "
        "NULL and any value not among them"]
    rows = test.slice(0, 200)
    other = rows.set_column(rows.schema.get_field_index("site"), "site",
                            pa.array(["west"] * 100 + [None] * 100, pa.string()))
    got = sets.score(other, con).to_arrow_table().to_pylist()
    for row in got:  # every row LAC's pooled set
        assert row["prediction_set"] == [c for c in CLASSES if 1 - row[f"proba_{c}"] <= pooled]
    # scoring rows without the column is refused in one line
    with pytest.raises(SqlnbError, match="conformal sets have a threshold per value of column 'site', which the rows "
                                         "scored lack"):
        sets.score(data(10, 5), con)


def test_bad_group_input_is_one_line(setup, tmp_path):
    con, model, cal, _ = setup
    with pytest.raises(SqlnbError, match=r"column 'x1' of the in-memory table is DOUBLE; --by groups the rows by a text"):
        conformal(model, cal, ALPHA, "mondrian", by="x1", con=con)
    with pytest.raises(SqlnbError, match="--by applies to --method mondrian only"):
        conformal(model, cal, ALPHA, "lac", by="site", con=con)
    with pytest.raises(SqlnbError, match="--missing-class applies to Mondrian sets per class"):
        conformal(model, cal, ALPHA, "mondrian", by="site", missing_class="every", con=con)
    with pytest.raises(SqlnbError, match="column \\(--by\\) 'sight' not found"):
        conformal(model, cal, ALPHA, "mondrian", by="sight", con=con)
    db = tmp_path / "m.duckdb"
    model.save(str(db), "nb")
    pq.write_table(cal, tmp_path / "cal.parquet")
    assert_error(invoke("evaluate", tmp_path / "cal.parquet", "--model", f"{db}:nb", "--by", "site"),
                 "Error: --by site reports the coverage of conformal sets per value of the column, and the model has "
                 "none")


def test_evaluate_by_reports_coverage_and_size_per_value(setup, tmp_path):
    con, model, cal, test = setup
    db = tmp_path / "m.duckdb"
    model.save(str(db), "nb")
    pq.write_table(cal, tmp_path / "cal.parquet")
    holdout = test.set_column(test.schema.get_field_index("site"), "site",
                              pa.array([None if i % 50 == 0 else s for i, s in enumerate(test["site"].to_pylist())]))
    pq.write_table(holdout, tmp_path / "test.parquet")
    r = invoke("conformal", tmp_path / "cal.parquet", "--model", f"{db}:nb", "--method", "mondrian", "--by", "site")
    assert r.exit_code == 0 and "('tiny' (" in r.stderr, r.stderr
    assert r.stdout.startswith(f"conformal 'nb' in {db}: mondrian sets by site at alpha = 0.1 (thresholds east: ")
    assert "tiny: " in r.stdout and "pooled, on" in r.stdout and "; any other value: " in r.stdout
    m = sqlnb.load(str(db), "nb")
    out = m.score(holdout, con, keep=["y", "site"]).to_arrow_table().to_pylist()
    ev = json.loads(invoke("evaluate", tmp_path / "test.parquet", "--model", f"{db}:nb", "--by", "site",
                           "--format", "json").stdout)["conformal"]
    assert ev["by"]["column"] == "site" and ev["sets_by"] == "site"
    seen = sorted({s for s in holdout["site"].to_pylist() if s is not None})
    assert list(ev["by"]["groups"]) == seen + ["NULL"] and len(seen) >= 3
    for key, got in ev["by"]["groups"].items():
        rows = [r for r in out if r["site"] == (None if key == "NULL" else key)]
        assert got["rows"] == len(rows)
        assert got["coverage"] == pytest.approx(np.mean([r["y"] in r["prediction_set"] for r in rows]), abs=1e-15)
        assert got["mean_set_size"] == pytest.approx(np.mean([r["set_size"] for r in rows]), abs=1e-15)
    assert sum(g["rows"] for g in ev["by"]["groups"].values()) == ev["rows"] == 1000
    text = invoke("evaluate", tmp_path / "test.parquet", "--model", f"{db}:nb", "--by", "site").stdout.splitlines()
    head = len(text) - len(seen) - 2  # the header of the per-value table: after it a line per value, NULL last
    assert text[head - 7].startswith("conformal   mondrian sets by site at alpha = 0.1: coverage ")
    assert text[head].split() == ["site", "rows", "coverage", "mean", "size"]
    for line, (key, v) in zip(text[head + 1:], ev["by"]["groups"].items()):
        assert line.split() == [key, f"{v['rows']:,}", f"{v['coverage']:.4f}", f"{v['mean_set_size']:.4f}"]
    # by any column, for any sets (here lac's, by the label itself)
    lac = conformal(model, cal, ALPHA, con=con)
    per = coverage(lac, holdout, con, by="y")
    assert per["by"]["groups"] == per["per_class"] and "sets_by" not in per


@pytest.fixture(scope="module")
def models():
    base = sqlnb.fit(engine_table(400, 0), "y", features=["x", "z"])
    cal = engine_table(400, 1).append_column("k", pa.array(np.arange(400) % 3))  # an integer column
    t = cal.append_column("flag", pa.array(np.arange(400) % 2 == 0))
    return {"by_integer": conformal(base, t, 0.2, "mondrian", by="k"),
            "by_boolean": conformal(base, t, 0.2, "mondrian", by="flag")}


def scored_rows() -> pa.Table:
    t = engine_table(300, 2)
    return t.append_column("k", pa.array(np.arange(300) % 4)).append_column("flag", pa.array(np.arange(300) % 3 == 0))


def test_integer_and_boolean_groups_on_sqlite_give_duckdbs_sets(models):
    assert models["by_integer"].conformal.groups == (0, 1, 2)
    assert models["by_boolean"].conformal.groups == (False, True)
    sqlite_gives_duckdbs_sets(models, scored_rows())  # k = 3 was never seen: pooled
    con = duckdb.connect()
    for name, model in models.items():
        model.save(con, name)
        assert sqlnb.load(con, name).conformal == model.conformal


@pytest.mark.postgres
def test_postgres_gives_duckdbs_group_sets_and_figures(models):
    t = scored_rows()

    def figures(pg, model):
        assert coverage(model, "t", pg, by="k") == coverage(model, t, duckdb.connect(), by="k")
    postgres_gives_duckdbs_sets_and_stores_them(models, t, figures)


@pytest.mark.spark
def test_spark_gives_duckdbs_group_sets_and_figures(models):
    t = scored_rows()

    def figures(spark, model):
        assert coverage(model, "t", spark, by="flag") == coverage(model, t, duckdb.connect(), by="flag")
    spark_gives_duckdbs_sets_and_stores_one(models, "by_integer", t, figures)


def test_the_group_threshold_is_one_case_per_row(models):
    """The row's threshold is computed once, beside the class scores, not in every class's
    comparison."""
    text = models["by_integer"].to_sql(dialect="duckdb", source="t")
    assert text.count('AS "set_threshold"') == 1 and text.count('"src"."k" = 0') == 1
    assert math.isfinite(models["by_integer"].conformal.thresholds[-1])
