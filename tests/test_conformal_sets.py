"""Conformal sets in the scoring SELECT: their cheaper shape (the same sets, row for row),
the sets as one BOOLEAN flag per class (``set_format="flags"``), ``sqlnb report``'s
coverage figures, and the sets on Spark (exported SQL and the stored threshold tables).

The ``sqlnb conformal`` command and stored sets are in tests/test_conformal.py, the
exported sets on SQLite and PostgreSQL in tests/test_conformal_engines.py, the sets against
MAPIE and crepes in tests/test_conformal_oracles.py."""

from __future__ import annotations

import re
import shutil

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from sqlnb.workflows.conformal import conformal, coverage
from support.cli import invoke

CLASSES = ["a", "b", "c"]


def table(n: int, seed: int, twins: bool = False) -> pa.Table:
    """Rows of three classes, 5 % NULL ``x``; with ``twins`` every row of class a has a
    copy of class b, so that a categorical model (``k``: counts, exact) has p(a|x) = p(b|x)
    on every row (ties; Gaussian moments summed in another order can differ in the last bit)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x, z, mask = rng.normal(y * 1.2, 1.0), rng.normal(-y * 1.0, 1.0), rng.random(n) < 0.05
    if twins:
        y = np.where(y == 1, 0, y)
        a = y == 0
        x, z, mask = (np.concatenate([v, v[a]]) for v in (x, z, mask))
        y = np.concatenate([y, np.ones(a.sum(), int)])
        n = len(y)
    k = pa.array([f"k{v}" for v in np.floor(x * 2).astype(int)], mask=mask)
    return pa.table({"id": np.arange(n), "x": pa.array(x, mask=mask), "z": z, "k": k, "y": np.array(CLASSES)[y]})


def fitted(twins: bool = False) -> dict:
    base = (sqlnb.fit(table(400, 0, twins), "y", features=["k"], feature_kinds={"k": "categorical"}) if twins
            else sqlnb.fit(table(400, 0), "y", features=["x", "z"]))
    cal = table(300, 1, twins)
    return {"lac": conformal(base, cal, 0.1, "lac"), "aps": conformal(base, cal, 0.1, "aps"),
            "aps_randomized": conformal(base, cal, 0.1, "aps", randomized=True, seed=9),
            "mondrian": conformal(base, cal, 0.2, "mondrian")}


@pytest.fixture(scope="module")
def models():
    return fitted()


def reference_sets(m, out: dict) -> list:
    """The documented sets (sqlnb.models.conformal) from the scored probabilities, in numpy:
    LAC/Mondrian 1 - p_c <= q_c; APS m_c < q with m_c the mass of the strictly more probable
    classes (added in class order, as the SQL adds them); NULL without probabilities."""
    sets, classes = m.conformal, list(m.classes)
    K = len(classes)
    q = list(sets.thresholds) * (K if sets.method != "mondrian" else 1)
    got = []
    for i in range(len(out["prediction_set"])):
        p = [out[f"proba_{c}"][i] for c in classes]
        if p[0] is None:
            got.append(None)
            continue
        if sets.method in ("lac", "mondrian"):
            got.append([c for k, c in enumerate(classes) if 1.0 - p[k] <= q[k]])
            continue
        keep = []
        for k in range(K):
            mass = 0.0
            for j in range(K):
                if j != k and p[j] > p[k]:
                    mass += p[j]
            keep.append(mass < q[k])
        got.append([c for k, c in enumerate(classes) if keep[k]])
    return got


# -- 1. the shape of the sets in DuckDB's SELECT, and the same sets --------------------------------
def test_duckdb_looks_the_list_up_among_the_possible_ones(models):
    """LIST_CONCAT of one CASE-built list per class cost ~15x the probabilities' SELECT
    (benchmarks/README.md); up to 6 classes the list is the mask-th of the 2^K constant lists."""
    for name, m in models.items():
        text = re.sub(r"\s+", " ", m.to_sql(dialect="duckdb", source="t"))
        assert "LIST_CONCAT" not in text.upper() and "LIST_WHERE" not in text.upper(), name
        lists = "[[], ['a'], ['b'], ['a', 'b'], ['c'], ['a', 'c'], ['b', 'c'], ['a', 'b', 'c']]"
        assert text.count(f"LIST_EXTRACT( {lists}, CASE WHEN \"set_member_a\" THEN 1 ELSE 0 END + ") == 1, name


def test_seven_classes_mask_the_class_list_and_give_the_same_sets():
    rng = np.random.default_rng(3)
    names = [f"k{i}" for i in range(7)]

    def rows(n):
        y = rng.integers(0, 7, n)
        return pa.table({"x": rng.normal(y * 0.6, 1.0), "z": rng.normal(-y * 0.4, 1.0), "y": np.array(names)[y]})
    base = sqlnb.fit(rows(700), "y")
    cal, test = rows(400), rows(300)
    for method in ("lac", "aps", "mondrian"):
        m = conformal(base, cal, 0.1, method)
        text = re.sub(r"\s+", " ", m.to_sql(dialect="duckdb", source="t"))
        assert re.search(r"LIST_WHERE\( ?\['k0', 'k1', 'k2', 'k3', 'k4', 'k5', 'k6'\], ?\[ ?COALESCE\(", text) and "LIST_EXTRACT" not in text
        out = m.score(test, duckdb.connect()).to_arrow_table().to_pydict()
        assert out["prediction_set"] == reference_sets(m, out), method
        assert out["set_size"] == [len(s) for s in out["prediction_set"]] and len(set(out["set_size"])) >= 3, method


def test_aps_reads_the_other_classes_only(models):
    """APS's m_c sums K - 1 terms (a class is never more probable than itself): K(K - 1)
    CASE terms in the member stage, not K²."""
    text = re.sub(r"\s+", " ", models["aps"].to_sql(dialect="duckdb", source="t"))
    end = text.index('AS "set_member_c"')
    stage = text[text.rindex("SELECT *,", 0, end):end]  # the member stage
    assert stage.count("CASE WHEN") == 3 * 2
    assert '"set_proba_a" > "set_proba_a"' not in stage


@pytest.mark.parametrize("twins", [False, True], ids=["random", "ties"])
def test_the_sets_are_the_documented_ones_row_for_row(models, twins):
    t = table(300, 2, twins)
    for name, m in (fitted(twins=True) if twins else models).items():  # twins: p(a|x) = p(b|x)
        out = m.score(t, duckdb.connect(), keep=["id"]).to_arrow_table().to_pydict()
        sizes = [None if s is None else len(s) for s in out["prediction_set"]]
        assert out["set_size"] == sizes, name
        if name != "aps_randomized":  # its u is checked against MAPIE in test_conformal_oracles
            want = reference_sets(m, out)
            differ = [i for i, (g, w) in enumerate(zip(out["prediction_set"], want)) if g != w]
            assert differ == [], f"{name}: rows {differ[:5]} differ"
        if twins:  # a and b of equal probability: both in or both out
            assert all(s is None or ("a" in s) == ("b" in s) for s in out["prediction_set"]), name
            assert any(s is not None and "a" in s for s in out["prediction_set"]), name


def test_a_row_without_probabilities_has_no_set_and_no_error(models):
    """LIST_WHERE refuses a NULL in its mask: rows without probabilities (a row of zero
    probability under every class) get NULL, never an error."""
    kinds = {"c": "categorical", "d": "categorical"}
    m = sqlnb.fit(pa.table({"c": ["u", "u", "v", "v"], "d": ["x", "x", "y", "y"], "y": ["a", "a", "b", "b"]}), "y",
                  feature_kinds=kinds, alpha=0.0)
    m = conformal(m, pa.table({"c": ["u", "v"] * 10, "d": ["x", "y"] * 10, "y": ["a", "b"] * 10}), 0.1, "aps")
    out = m.score(pa.table({"c": ["u", "u", "v"], "d": ["x", "y", "y"]}), duckdb.connect()).to_arrow_table().to_pydict()
    assert out["prediction_set"] == [["a"], None, ["b"]] and out["set_size"] == [1, None, 1]


# -- 2. the report shows the sets' coverage ----------------------------------------------------------
@pytest.fixture(scope="module")
def report_files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    for name, (n, seed) in {"train": (500, 0), "cal": (400, 1), "test": (300, 2)}.items():
        pq.write_table(table(n, seed), tmp / f"{name}.parquet")
    db = tmp / "m.duckdb"
    assert invoke("fit", str(tmp / "train.parquet"), "--label", "y", "--features", "x,z",
                  "--model", f"{db}:nb").exit_code == 0
    r = invoke("conformal", str(tmp / "cal.parquet"), "--model", f"{db}:nb", "--method", "mondrian")
    assert r.exit_code == 0, r.output
    out = tmp / "r.html"
    r = invoke("report", str(tmp / "test.parquet"), "--model", f"{db}:nb", "--out", str(out))
    assert r.exit_code == 0, r.output
    return tmp, db, out.read_text()


def _cells(html: str, caption: str) -> list[list[str]]:
    body = re.search(rf"<caption>{re.escape(caption)}</caption>.*?<tbody>(.*?)</tbody>", html, re.S).group(1)
    return [re.findall(r"<td[^>]*>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)]


def test_report_shows_what_evaluate_reports_of_the_sets(report_files):
    tmp, db, html = report_files
    cov = coverage(sqlnb.load(str(db), "nb"), str(tmp / "test.parquet"))
    assert '<h3 id="conformal">Conformal prediction sets</h3>' in html
    overall = dict((k, v) for k, v in _cells(html, "overall"))
    assert overall["method"] == "mondrian" and overall["alpha"] == "0.1"
    assert overall["coverage"] == f"{cov['coverage']:.4f}"
    assert overall["mean set size"] == f"{cov['mean_set_size']:.4f}"
    assert overall["rows with a set"] == f"{cov['rows']:,}"
    per_class = _cells(html, "per class (true label)")
    assert per_class == [[k, f"{v['rows']:,}", f"{v['coverage']:.4f}", f"{v['mean_set_size']:.4f}"]
                         for k, v in cov["per_class"].items()]
    assert [r[0] for r in per_class] == CLASSES
    by_size = _cells(html, "by set size")
    assert by_size == [[k, f"{v['rows']:,}", f"{v['coverage']:.4f}"] for k, v in cov["by_set_size"].items()]
    assert sum(int(r[1].replace(",", "")) for r in by_size) == cov["rows"] == 300
    # the same figures as `evaluate --format json`
    import json
    ev = json.loads(invoke("evaluate", str(tmp / "test.parquet"), "--model", f"{db}:nb", "--format", "json").stdout)
    assert ev["conformal"] == cov


def test_report_without_sets_has_no_set_section(report_files):
    tmp, db, _ = report_files
    assert invoke("conformal", "--model", f"{db}:nb", "--clear").exit_code == 0
    out = tmp / "plain.html"
    assert invoke("report", str(tmp / "test.parquet"), "--model", f"{db}:nb", "--out", str(out)).exit_code == 0
    assert "Conformal prediction sets" not in out.read_text()


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed "
                                                              "(bash .ci/install-engines.sh installs it)")
def test_the_set_tables_read_in_a_browser(report_files, tmp_path):
    from test_report_browser import browse, console_errors
    _, _, html = report_files
    probe, log = browse(html, tmp_path / "sets.html", 700)
    assert probe["overflow"] == [] and probe["scrollWidth"] <= probe["width"] and console_errors(log) == []
    cells = probe["sections"]["metrics"]["cells"]
    assert "mean set size" in cells and "coverage" in cells and CLASSES[0] in cells


# -- 3. Spark: the exported sets and the stored threshold tables ---------------------------------------
@pytest.mark.spark
def test_spark_gives_duckdbs_sets_and_stores_them(models):
    from support.engines import spark_engine
    t = table(200, 2)
    want = {}
    for name, m in models.items():
        out = m.score(t, duckdb.connect(), keep=["id"]).to_arrow_table().to_pydict()
        want[name] = {i: (None if s is None else [c in s for c in CLASSES], k)
                      for i, s, k in zip(out["id"], out["prediction_set"], out["set_size"])}
        assert len({k for k in out["set_size"]}) >= 2, name

    def same(rows: list[dict], name: str, where: str):
        got = {r["id"]: (None if r["set_size"] is None else [bool(r[f"in_set_{c}"]) for c in CLASSES], r["set_size"])
               for r in rows}
        differ = [i for i in want[name] if got[i] != want[name][i]]
        assert differ == [] and len(got) == len(want[name]), f"{where} {name}: rows {differ[:5]} differ"

    with spark_engine({"t": t}) as spark:
        for name, m in models.items():
            text = m.to_sql(dialect="spark", source="t")
            assert "`in_set_a`" in text and "prediction_set" not in text
            same([r.asDict() for r in spark.spark.sql(text).collect()], name, "spark SQL")
        # the threshold tables in Spark's catalog: one threshold with the randomised draw's
        # seed, and one per class (each save is a few catalog writes: two models keep it short)
        for name in ("aps_randomized", "mondrian"):
            m = models[name]
            m.save(spark, "sets", replace=True)
            loaded = sqlnb.load(spark, "sets")
            assert loaded.conformal == m.conformal, name
            same([r.asDict() for r in loaded.score("t", con=spark, keep=["id"]).collect()], name, "spark engine")


# --------------------------------------------------------------------------------------------
# Conformal sets as flags in DuckDB too: writing the ``prediction_set`` LIST to Parquet cost
# APS 1.37x the CPU of scoring without sets, the same sets as one BOOLEAN ``in_set_<class>``
# per class ~1.1x (benchmarks/README.md). So
# ``set_format="flags"`` (``--set-format flags`` on ``score`` and ``sql``) gives the portable
# form on DuckDB: the same sets row for row, for every method; the list stays DuckDB's default.
# --------------------------------------------------------------------------------------------


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
