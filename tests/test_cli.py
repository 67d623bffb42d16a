"""The command line, in-process through click's CliRunner: every command, every bad input.

Each failure test checks the contract scripts rely on: the exit code, exactly one
``Error:`` line on stderr naming the problem, nothing on stdout, and nothing created or
changed on disk (files byte for byte, models in the database, no temporary files left).
"""

from __future__ import annotations

import json
import os
import shutil

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

import sqlnb
from sqlnb import cli as cli_module
from sqlnb.cli import EXIT_FAIL, EXIT_INTERRUPTED, cli
from sqlnb.errors import SqlnbError
from sqlnb.source import resolve
from sqlnb.workflows.checks import unseen_counts
from sqlnb.workflows.evaluate import evaluate
from sqlnb.io.locations import DbObject, FileOut, StdOut, parse_data, parse_out, split_db
from support.cli import assert_error, invoke, mixed_table, snapshot, write_parquet


# -- fixtures ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """train/test Parquet and a model fitted on train, shared read-only by the tests."""
    d = tmp_path_factory.mktemp("base")
    write_parquet(mixed_table(200, seed=1), d / "train.parquet")
    write_parquet(mixed_table(80, seed=2), d / "test.parquet")
    result = invoke("fit", d / "train.parquet", "--label", "y", "--exclude", "id", "--model", f"{d}/m.duckdb:nb")
    assert result.exit_code == 0, result.stderr
    return d


@pytest.fixture
def work(tmp_path, base):
    """A private copy of the base files (tests that write start from it)."""
    for name in ("train.parquet", "test.parquet", "m.duckdb"):
        shutil.copy(base / name, tmp_path / name)
    return tmp_path


def read(path) -> pa.Table:
    return pq.read_table(path)


# -- help, version -------------------------------------------------------------------------

def test_version():
    result = invoke("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"sqlnb {sqlnb.__version__}"


@pytest.mark.parametrize("command", [None, *sorted(cli.commands)])
def test_every_help_has_an_example(command):
    result = invoke(*([command] if command else []), "--help")
    assert result.exit_code == 0 and result.stderr == ""
    assert "Example:" in result.stdout and "sqlnb " in result.stdout.split("Example:")[1]


# -- locations -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, db, name", [
    ("m.duckdb:nb", "m.duckdb", "nb"),
    ("dir/my.db.duckdb:a:b.c", "dir/my.db.duckdb", "a:b.c"),
    ("a.db:b.duckdb:c", "a.db", "b.duckdb:c"),
    ("x.duckdb:we'ird name", "x.duckdb", "we'ird name"),
    ("C:/data/x.DuckDB:t:1", "C:/data/x.DuckDB", "t:1"),
    ("lake/x.db:schema.table", "lake/x.db", "schema.table"),
])
def test_split_db_at_the_first_colon_after_the_suffix(text, db, name):
    assert split_db(text) == DbObject(db, name)


def test_parse_locations():
    assert split_db("train.parquet") is None and split_db("a:b") is None
    assert parse_out("-") == StdOut()
    assert parse_out("o.csv.gz") == FileOut("o.csv.gz", "csv")
    assert parse_out("o.tsv").options == {"delimiter": "\t"}
    assert parse_data("x.csv", {"nullstr": "?"}).options == {"nullstr": "?"}
    with pytest.raises(SqlnbError, match="CSV reading options apply to CSV"):
        parse_data("x.parquet", {"nullstr": "?"})
    with pytest.raises(SqlnbError, match="is a DuckDB database"):
        parse_data("x.duckdb")


# -- the happy paths -----------------------------------------------------------------------

def test_fit_matches_the_python_api(base):
    model = sqlnb.load(f"{base}/m.duckdb", "nb")
    api_model = sqlnb.fit(str(base / "train.parquet"), "y", exclude=["id"])
    assert [(f.name, f.kind) for f in model.features] == [(f.name, f.kind) for f in api_model.features]
    assert model.classes == ["a", "b", "c"]
    con = duckdb.connect()
    got = model.predict_proba(str(base / "test.parquet"), con).to_arrow_table()
    want = api_model.predict_proba(str(base / "test.parquet"), con).to_arrow_table()
    np.testing.assert_array_equal(np.array(got.to_pydict()["proba_b"]), np.array(want.to_pydict()["proba_b"]))


def test_fit_is_silent_on_a_pipe_and_summarises_at_a_terminal(work, monkeypatch):
    result = invoke("fit", work / "train.parquet", "-y", "y", "--exclude", "id", "--model", f"{work}/m.duckdb:other")
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == ""
    monkeypatch.setattr(cli_module, "stderr_is_terminal", lambda: True)
    result = invoke("fit", work / "train.parquet", "-y", "y", "--exclude", "id", "--model", f"{work}/m.duckdb:third")
    assert result.exit_code == 0 and result.stdout == ""
    assert result.stderr.startswith("fitted 'third'") and "200 rows, 3 classes" in result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_score_to_parquet_keeps_all_input_columns(base, tmp_path):
    out = tmp_path / "scored.parquet"
    result = invoke("score", base / "test.parquet", "--model", f"{base}/m.duckdb:nb", "--out", out)
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == ""
    t = read(out)
    assert t.column_names == ["id", "x", "z", "color", "flag", "y", "proba_a", "proba_b", "proba_c", "prediction"]
    model = sqlnb.load(f"{base}/m.duckdb", "nb")
    want = model.score(str(base / "test.parquet"), outputs=("proba", "prediction")).to_arrow_table()
    assert t.to_pylist() == want.to_pylist()
    assert sorted(os.listdir(tmp_path)) == ["scored.parquet"]


@pytest.mark.parametrize("suffix", ["csv", "json", "tsv", "csv.gz"])
def test_score_to_other_file_formats(base, tmp_path, suffix):
    out = tmp_path / f"scored.{suffix}"
    result = invoke("score", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "--keep", "id", "-o", out)
    assert result.exit_code == 0, result.stderr
    rel = duckdb.connect().sql(f"SELECT * FROM '{out}' ORDER BY id")
    assert rel.columns == ["id", "proba_a", "proba_b", "proba_c", "prediction"]
    assert len(rel.fetchall()) == 80


def test_score_keep_none_and_no_proba(base, tmp_path):
    out = tmp_path / "p.parquet"
    assert invoke("score", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "--keep", "", "--no-proba",
                  "-o", out).exit_code == 0
    assert read(out).column_names == ["prediction"]


def test_score_to_stdout_is_only_csv(base, monkeypatch):
    monkeypatch.setattr(cli_module, "stderr_is_terminal", lambda: True)
    result = CliRunner().invoke(cli, ["score", str(base / "test.parquet"), "-m", f"{base}/m.duckdb:nb",
                                      "--keep", "id,y", "--out", "-"], catch_exceptions=False)
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "id,y,proba_a,proba_b,proba_c,prediction" and len(lines) == 81
    assert result.stderr.startswith("scored 80 rows into -")


def test_score_to_a_duckdb_table_and_replace(work):
    db = f"{work}/m.duckdb"
    assert invoke("score", work / "test.parquet", "-m", f"{db}:nb", "-o", f"{db}:scores", "--keep", "id").exit_code == 0
    with duckdb.connect(db, read_only=True) as con:
        assert con.execute('SELECT count(*) FROM "scores"').fetchall()[0][0] == 80
    before = snapshot(db)
    assert_error(invoke("score", work / "test.parquet", "-m", f"{db}:nb", "-o", f"{db}:scores"),
                 "table 'scores' already exists", "--replace")
    assert snapshot(db) == before
    assert invoke("score", work / "test.parquet", "-m", f"{db}:nb", "-o", f"{db}:SCORES", "--replace",
                  "--no-proba").exit_code == 0
    with duckdb.connect(db, read_only=True) as con:
        assert con.sql('SELECT * FROM "scores"').columns[-1] == "prediction"
        assert "proba_a" not in con.sql('SELECT * FROM "scores"').columns


def test_score_reads_a_table_from_another_database(work, tmp_path):
    data_db = tmp_path / "data.duckdb"
    with duckdb.connect(str(data_db)) as con:
        con.from_parquet(str(work / "test.parquet")).create("customers")
    out_db = tmp_path / "out.duckdb"
    result = invoke("score", f"{data_db}:customers", "-m", f"{work}/m.duckdb:nb", "-o", f"{out_db}:scored")
    assert result.exit_code == 0, result.stderr
    with duckdb.connect(str(out_db), read_only=True) as con:
        assert con.execute('SELECT count(*) FROM "scored"').fetchall()[0][0] == 80


def test_evaluate_text_and_json_match_the_python_api(base):
    result = invoke("evaluate", base / "test.parquet", "--model", f"{base}/m.duckdb:nb", "--format", "json")
    assert result.exit_code == 0 and result.stderr == ""
    got = json.loads(result.stdout)
    model = sqlnb.load(f"{base}/m.duckdb", "nb")
    want = json.loads(json.dumps(evaluate(model, str(base / "test.parquet")).to_dict(), default=str))
    got.pop("seconds"), want.pop("seconds")
    # the CLI adds the unseen-category counts of its data check (sqlnb.workflows.checks)
    con = duckdb.connect()
    assert got.pop("unseen_categories") == unseen_counts(model, resolve(str(base / "test.parquet"), con), con)
    assert got == want
    assert got["rows"] == 80 and got["roc_auc"] is None and len(got["per_class"]) == 3
    text = invoke("evaluate", base / "test.parquet", "--model", f"{base}/m.duckdb:nb").stdout
    assert text.startswith("rows        80\naccuracy    ") and "confusion matrix" in text
    assert f"{want['accuracy']:.4f}" in text


def test_evaluate_says_at_a_terminal_what_its_one_pass_does(base, monkeypatch):
    # One read of the rows, and one line naming it above DuckDB's progress bar;
    # nothing on a pipe.
    monkeypatch.setattr(cli_module, "stderr_is_terminal", lambda: True)
    result = invoke("evaluate", base / "test.parquet", "--model", f"{base}/m.duckdb:nb")
    assert result.exit_code == 0
    lines = result.stderr.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("evaluating ") and "test.parquet" in lines[0] and "one pass" in lines[0]
    assert lines[1].startswith("evaluated 80 rows in ")


def test_evaluate_min_accuracy_sets_the_exit_code(base):
    ok = invoke("evaluate", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "--min-accuracy", "0.1")
    assert ok.exit_code == 0
    bad = invoke("evaluate", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "--min-accuracy", "0.999")
    assert bad.exit_code == EXIT_FAIL and "accuracy" in bad.stdout
    assert bad.stderr.startswith("Error: accuracy ") and "below --min-accuracy 0.999" in bad.stderr


def test_evaluate_with_another_label_column(work, tmp_path):
    t = mixed_table(80, seed=2)
    t = t.append_column("truth", t["y"]).drop_columns(["y"])
    path = write_parquet(t, tmp_path / "relabelled.parquet")
    a = json.loads(invoke("evaluate", path, "-m", f"{work}/m.duckdb:nb", "--label", "truth", "--format", "json").stdout)
    b = json.loads(invoke("evaluate", work / "test.parquet", "-m", f"{work}/m.duckdb:nb", "--format", "json").stdout)
    assert a["accuracy"] == b["accuracy"] and a["label"] == "truth"


def test_show_and_models_and_drop(work):
    db = f"{work}/m.duckdb"
    text = invoke("show", "--model", f"{db}:nb").stdout
    assert text.startswith("model        nb (naive_bayes)")
    for fragment in ("label        y (VARCHAR), 3 classes", "x        gaussian", "color    categorical",
                     "flag     bernoulli", "top features", "strongest value"):
        assert fragment in text, fragment
    d = json.loads(invoke("show", "--model", f"{db}:nb", "--format", "json", "--top", "1").stdout)
    assert d["name"] == "nb" and [c["label"] for c in d["classes"]] == ["a", "b", "c"]
    assert d["trained"]["rows"] == 200 and d["size"]["features"] == 4
    assert all(len(v) == 1 for v in d["top_features"].values())
    assert d["top_features"]["gaussian"][0]["name"] == "x"  # x is the feature built to separate classes

    invoke("fit", work / "train.parquet", "-y", "y", "--model", f"{db}:second")
    listing = invoke("models", db).stdout.splitlines()
    assert listing[0].split() == ["name", "kind", "label", "features", "rows", "created"]
    assert [line.split()[0] for line in listing[1:]] == ["nb", "second"]
    assert [m["name"] for m in json.loads(invoke("models", db, "--format", "json").stdout)] == ["nb", "second"]
    assert invoke("drop", "--model", f"{db}:second").exit_code == 0
    assert [m["name"] for m in sqlnb.list_models(db)] == ["nb"]
    assert_error(invoke("drop", "--model", f"{db}:second"), "no model named 'second'")


def test_models_of_an_empty_database(tmp_path):
    duckdb.connect(str(tmp_path / "empty.duckdb")).close()
    result = invoke("models", tmp_path / "empty.duckdb")
    assert result.exit_code == 0 and result.stdout == "" and result.stderr == ""


def test_fit_options_reach_the_library(work, tmp_path):
    rng = np.random.default_rng(3)
    n = 120
    k = rng.integers(0, 2, n)
    t = pa.table({"w1": rng.poisson(1 + 2 * k), "w2": rng.poisson(3 - 2 * k), "v": rng.normal(k, 1.0),
                  "c": np.where(k == 1, "p", "q").tolist(), "weight": rng.random(n) + 0.5,
                  "label": np.where(k == 1, "yes", "no").tolist()})
    path = write_parquet(t, tmp_path / "counts.parquet")
    db = f"{tmp_path}/o.duckdb"
    args = ["fit", path, "-y", "label", "--model", f"{db}:m", "--kind", "multinomial",
            "--feature-kind", "v=gaussian", "--feature-kind", "c=categorical", "--weight", "weight",
            "--alpha", "0.5", "--feature-alpha", "w2=2", "--estimator", "map", "--alpha", "1.5",
            "--class-prior", "no=0.25,yes=0.75", "--var-smoothing", "1e-6", "--unseen", "bucket"]
    result = invoke(*args)
    assert result.exit_code == 0, result.stderr
    model = sqlnb.load(db, "m")
    want = sqlnb.fit(path, "label", kind="multinomial", feature_kinds={"v": "gaussian", "c": "categorical"},
                     weight="weight", alpha=1.5, feature_alpha={"w2": 2.0}, estimator="map",
                     class_prior={"no": 0.25, "yes": 0.75}, var_smoothing=1e-6, unseen="bucket")
    assert model.hyper == want.hyper
    assert [(f.name, f.kind) for f in model.features] == [(f.name, f.kind) for f in want.features]
    a = model.predict_proba(path).to_arrow_table()["proba_yes"].to_pylist()
    b = want.predict_proba(path).to_arrow_table()["proba_yes"].to_pylist()
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-15)

    assert invoke("fit", path, "-y", "label", "-m", f"{db}:b", "--kind", "bernoulli", "--features", "w1,w2",
                  "--binarize", "1").exit_code == 0
    assert [f.threshold for f in sqlnb.load(db, "b").features] == [1.0, 1.0]
    assert invoke("fit", path, "-y", "label", "-m", f"{db}:b2", "--kind", "bernoulli", "--features", "w1",
                  "--features", "w2", "--binarize", "w2=2").exit_code == 0
    assert [f.threshold for f in sqlnb.load(db, "b2").features] == [0.0, 2.0]
    assert invoke("fit", path, "-y", "label", "-m", f"{db}:cnb", "--kind", "complement", "--features", "w1,w2",
                  "--norm", "--class-prior", "uniform").exit_code == 0
    assert sqlnb.load(db, "cnb").hyper.norm is True


def test_fit_reads_csv_with_options(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x;colour;y\n1.0;red;a\n2.5;?;b\n0.5;blue;a\n3.0;red;b\n?;blue;a\n")
    db = f"{tmp_path}/m.duckdb"
    result = invoke("fit", path, "-y", "y", "-m", f"{db}:csv", "--delimiter", ";", "--null-string", "?", "--header")
    assert result.exit_code == 0, result.stderr
    model = sqlnb.load(db, "csv")
    assert [(f.name, f.kind) for f in model.features] == [("x", "gaussian"), ("colour", "categorical")]
    assert model.stats.features["colour"].values == ["blue", "red"]  # '?' read as NULL


def test_global_options_and_environment_reach_duckdb(work, monkeypatch):
    seen = []
    real = sqlnb.api.connect

    def spy(path=None, threads=None, memory_limit=None, temp_directory=None, read_only=False, **kw):
        con = real(path, threads, memory_limit, temp_directory, read_only=read_only, **kw)
        seen.append(con.execute("SELECT current_setting('threads'), current_setting('memory_limit'), "
                            "current_setting('temp_directory')").fetchall()[0])
        return con

    monkeypatch.setattr(sqlnb.api, "connect", spy)
    tmpdir = str(work / "spill")
    result = invoke("--threads", "1", "--memory-limit", "300MB", "--temp-directory", tmpdir,
                    "evaluate", work / "test.parquet", "-m", f"{work}/m.duckdb:nb")
    assert result.exit_code == 0
    assert seen and all(s == (1, "286.1 MiB", tmpdir) for s in seen)
    seen.clear()
    env = {"SQLNB_THREADS": "2", "SQLNB_MEMORY_LIMIT": "200MB", "SQLNB_TEMP_DIRECTORY": tmpdir}
    assert invoke("show", "-m", f"{work}/m.duckdb:nb", env=env).exit_code == 0
    assert seen and all(s == (2, "190.7 MiB", tmpdir) for s in seen)


def test_sqlnb_connect_applies_settings(tmp_path):
    con = sqlnb.connect(threads=1, memory_limit="100MB", temp_directory=str(tmp_path))
    assert con.execute("SELECT current_setting('threads')").fetchall()[0][0] == 1
    with pytest.raises(SqlnbError, match="invalid memory limit 'lots'"):
        sqlnb.connect(memory_limit="lots")
    with pytest.raises(SqlnbError, match="does not exist"):
        sqlnb.connect(tmp_path / "missing.duckdb", read_only=True)


# -- sql -------------------------------------------------------------------------------------

def _run_sql(con, text: str) -> pa.Table:
    return con.sql(text.rstrip().rstrip(";")).to_arrow_table()


@pytest.mark.parametrize("with_data", [False, True])
def test_sql_duckdb_runs_and_equals_score(base, tmp_path, with_data):
    scored = tmp_path / "scored.parquet"
    assert invoke("score", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "-o", scored).exit_code == 0
    args = ["sql", "--model", f"{base}/m.duckdb:nb", "--dialect", "duckdb", "--source", "input"]
    if with_data:
        args.insert(1, str(base / "test.parquet"))
    result = invoke(*args)
    assert result.exit_code == 0 and result.stderr == ""
    con = duckdb.connect()
    con.execute(f"CREATE VIEW input AS SELECT * FROM '{base}/test.parquet'")
    got = _run_sql(con, result.stdout)
    if with_data:  # columns listed: exactly the source's, the probabilities and the prediction
        assert got.column_names == read(scored).column_names
    want = read(scored)
    for c in ("proba_a", "proba_b", "proba_c"):
        np.testing.assert_allclose(np.array(got[c].to_pylist(), float), np.array(want[c].to_pylist(), float),
                                   rtol=0, atol=1e-12)
    assert got["prediction"].to_pylist() == want["prediction"].to_pylist()


def test_sql_default_source_and_query_source(base):
    default = invoke("sql", "-m", f"{base}/m.duckdb:nb", "--compact").stdout
    assert 'FROM "input" AS "src"' in default and default.count("\n") == 1
    query = invoke("sql", "-m", f"{base}/m.duckdb:nb", "--source", "SELECT * FROM sales.customers",
                   "--dialect", "postgres").stdout
    assert "FROM sales.customers" in query and "DOUBLE PRECISION" in query


@pytest.mark.parametrize("dialect", ["postgres", "spark", "sqlite", "snowflake", "bigquery", "trino"])
def test_sql_renders_every_dialect(base, dialect):
    result = invoke("sql", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "-d", dialect, "-s", "customers")
    # no ';': the SELECT pastes into a CTE or subquery as printed
    assert result.exit_code == 0 and not result.stdout.rstrip().endswith(";")
    assert "proba_a" in result.stdout and "customers" in result.stdout


def test_sql_fit_prints_the_training_query(base):
    from_model = invoke("sql", "--fit", "-m", f"{base}/m.duckdb:nb", "--source", "train")
    assert from_model.exit_code == 0
    con = duckdb.connect()
    con.execute(f"CREATE VIEW train AS SELECT * FROM '{base}/train.parquet'")
    rows = con.sql(from_model.stdout.strip().rstrip(";")).fetchall()
    assert sorted(r[0] for r in rows) == ["a", "b", "c"] and sum(r[1] for r in rows) == 200
    from_options = invoke("sql", "--fit", base / "train.parquet", "--label", "y", "--exclude", "id")
    def words(text: str) -> str:  # the pretty printer wraps a long reader call over lines
        return " ".join(text.replace("(", "( ").replace(")", " )").split())
    assert words(from_options.stdout) == words(from_model.stdout.replace(
        '"train" AS "src"', f"READ_PARQUET('{base}/train.parquet', union_by_name = TRUE) AS \"src\""))
    postgres = invoke("sql", "--fit", "-m", f"{base}/m.duckdb:nb", "-d", "postgres").stdout
    assert postgres.count(";") == 2 and "GROUPING SETS" in postgres and "HISTOGRAM" not in postgres


# -- bad input: one line, exit 2, nothing written ---------------------------------------------

def test_missing_file(work):
    before = snapshot(work / "m.duckdb")
    assert_error(invoke("fit", work / "nope.parquet", "-y", "y", "-m", f"{work}/m.duckdb:new"),
                 "no file matches", "nope.parquet")
    assert snapshot(work / "m.duckdb") == before


def test_missing_table_and_database(work):
    with duckdb.connect(str(work / "data.duckdb")) as con:
        con.from_parquet(str(work / "train.parquet")).create("customers")
    before = snapshot(work / "m.duckdb")
    assert_error(invoke("fit", f"{work}/data.duckdb:customer", "-y", "y", "-m", f"{work}/m.duckdb:new"),
                 "table 'customer' not found", "did you mean 'customers'")
    assert_error(invoke("fit", f"{work}/nope.duckdb:t", "-y", "y", "-m", f"{work}/m.duckdb:new"),
                 "database", "nope.duckdb", "does not exist")
    assert snapshot(work / "m.duckdb") == before
    assert not (work / "nope.duckdb").exists()


def test_missing_label_and_feature_columns(work):
    before = snapshot(work / "m.duckdb")
    assert_error(invoke("fit", work / "train.parquet", "-y", "yy", "-m", f"{work}/m.duckdb:new"),
                 "label column 'yy' not found", "did you mean 'y'")
    assert_error(invoke("fit", work / "train.parquet", "-y", "y", "--features", "x,colour", "-m", f"{work}/m.duckdb:new"),
                 "feature column 'colour' not found", "did you mean 'color'")
    assert snapshot(work / "m.duckdb") == before


@pytest.mark.parametrize("table, fragments", [
    (pa.table({"x": [1.0, 2.0], "y": ["a", "a"]}), ["only one class ('a')", "at least two"]),
    (pa.table({"x": [1.0, 2.0], "y": pa.array([None, None], pa.string())}), ["NULL in all 2 rows"]),
    (pa.table({"x": pa.array([], pa.float64()), "y": pa.array([], pa.string())}), ["has no rows"]),
    (pa.table({"x": [1.0, float("nan"), 3.0], "y": ["a", "b", "b"]}), ["'x'", "NaN or infinite"]),
    (pa.table({"x": [1.0, float("inf"), 3.0], "y": ["a", "b", "b"]}), ["'x'", "NaN or infinite"]),
    (pa.table({"x": [1.0, float("-inf"), 3.0], "y": ["a", "b", "b"]}), ["'x'", "NaN or infinite"]),
])
def test_bad_labels_and_values(tmp_path, table, fragments):
    path = write_parquet(table, tmp_path / "bad.parquet")
    assert_error(invoke("fit", path, "-y", "y", "-m", f"{tmp_path}/m.duckdb:x"), *fragments)
    assert not (tmp_path / "m.duckdb").exists()


def test_wrong_types_for_the_family(tmp_path):
    path = write_parquet(pa.table({"n": [1, -2, 3], "t": ["u", "v", "w"], "y": ["a", "b", "b"]}), tmp_path / "d.parquet")
    m = f"{tmp_path}/m.duckdb:x"
    assert_error(invoke("fit", path, "-y", "y", "-m", m, "--feature-kind", "t=gaussian"),
                 "column 't'", "needs a numeric column", "--feature-kind t=categorical")
    assert_error(invoke("fit", path, "-y", "y", "-m", m, "--features", "n", "--kind", "multinomial"),
                 "column 'n'", "negative count")
    assert_error(invoke("fit", path, "-y", "y", "-m", m, "--features", "n", "--kind", "complement"),
                 "column 'n'", "negative count")
    assert not (tmp_path / "m.duckdb").exists()


def test_existing_model_needs_replace_and_a_failed_refit_keeps_it(work):
    db = work / "m.duckdb"
    before = snapshot(db)
    assert_error(invoke("fit", work / "train.parquet", "-y", "y", "-m", f"{db}:nb"),
                 "model 'nb' already exists", "--replace")
    assert snapshot(db) == before
    assert_error(invoke("fit", work / "train.parquet", "-y", "nope", "-m", f"{db}:nb", "--replace"), "label column")
    assert snapshot(db) == before
    r = invoke("fit", work / "train.parquet", "-y", "y", "-m", f"{db}:nb", "--replace", "--keep-columns", "id")
    assert r.exit_code == 0, r.stderr
    assert [m["name"] for m in sqlnb.list_models(str(db))] == ["nb"]
    assert sqlnb.list_models(str(db))[0]["features"] == 5  # id is a feature now (kept although it looks like an ID)


def test_scoring_data_lacking_a_feature(work):
    t = mixed_table(20, seed=4).drop_columns(["color"]).append_column("colour", pa.array(["red"] * 20))
    (work / "new").mkdir()
    path = write_parquet(t, work / "new" / "nocolor.parquet")
    out = work / "new" / "out.parquet"
    assert_error(invoke("score", path, "-m", f"{work}/m.duckdb:nb", "-o", out),
                 "model feature column 'color' not found", "did you mean 'colour'")
    assert not out.exists() and sorted(os.listdir(work / "new")) == ["nocolor.parquet"]
    assert_error(invoke("evaluate", path, "-m", f"{work}/m.duckdb:nb"), "model feature column 'color'")
    assert_error(invoke("score", work / "test.parquet", "-m", f"{work}/m.duckdb:nb", "--keep", "ID", "-o", out),
                 "column to keep 'ID' not found", "did you mean 'id'")


def test_unknown_dialect_suggests_the_closest(base):
    assert_error(invoke("sql", "-m", f"{base}/m.duckdb:nb", "--dialect", "postgresql"),
                 "unknown dialect 'postgresql'", "did you mean 'postgres'")
    assert_error(invoke("sql", "--fit", "-m", f"{base}/m.duckdb:nb", "--dialect", "sparksql"),
                 "did you mean 'spark'")


def test_existing_output_needs_replace(base, tmp_path):
    out = tmp_path / "scored.csv"
    out.write_text("precious\n")
    before = snapshot(out)
    assert_error(invoke("score", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "-o", out),
                 "output", "already exists", "--replace")
    assert snapshot(out) == before
    assert invoke("score", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "-o", out, "--replace").exit_code == 0
    assert out.read_text().startswith("id,x,z,color,flag,y,proba_a")


@pytest.mark.parametrize("args, fragments", [
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "models"], ["MODEL must look like DB.duckdb:NAME"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:"], ["MODEL must look like"]),
    (["fit", "{d}/train.parquet", "-m", "{d}/m.duckdb:z"], ["Missing option '--label'", "sqlnb fit --help"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--kind", "gausian"], ["'--kind'", "gausian"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--feature-kind", "x"], ["--feature-kind takes NAME=VALUE"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--feature-kind", "x=gausian"], ["unknown kind 'gausian'", "did you mean 'gaussian'"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--class-prior", "unifrom"], ["--class-prior", "did you mean 'uniform'"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--class-prior", "a=0.5,b=0.5"], ["class prior must name every class"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--class-prior", "a=x"], ["is not a number"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--features", "x", "--exclude", "z"], ["either the features"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--null-string", "?"], ["CSV reading options"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--alpha", "-1"], ["alpha", ">= 0"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--estimator", "map", "--alpha", "0.5"], ["no mode"]),
    (["fit", "{d}/train.parquet", "-y", "y", "-m", "{d}/m.duckdb:z", "--binarize", "1", "--binarize", "x=2"], ["--binarize"]),
    (["fit", "{d}/m.duckdb", "-y", "y", "-m", "{d}/m.duckdb:z"], ["is a DuckDB database", ":TABLE"]),
    (["fit", "{d}/train.xlsx", "-y", "y", "-m", "{d}/m.duckdb:z"], ["cannot tell the format"]),
    (["score", "{d}/test.parquet", "-m", "{d}/m.duckdb:nb", "-o", "{d}/out.xlsx"], ["cannot tell the output format"]),
    (["score", "{d}/test.parquet", "-m", "{d}/m.duckdb:nb", "-o", "{d}/no/such/dir/out.parquet"], ["does not exist"]),
    (["score", "{d}/test.parquet", "-m", "{d}/m.duckdb:bn", "-o", "{d}/o.parquet"], ["no model named 'bn'", "did you mean 'nb'"]),
    (["score", "{d}/test.parquet", "-m", "{d}/nope.duckdb:nb", "-o", "{d}/o.parquet"], ["does not exist"]),
    (["sql"], ["give --model"]),
    (["sql", "--fit"], ["needs --label"]),
    (["sql", "--fit", "-y", "y", "--source", "tbl"], ["needs the source's columns"]),
    (["sql", "-m", "{d}/m.duckdb:nb", "-s", "SELECT * FROM"], ["cannot parse the source query"]),
    (["show", "-m", "{d}/m.duckdb:zz"], ["no model named 'zz'"]),
    (["models", "{d}/nope.duckdb"], ["does not exist"]),
    (["fitt"], ["No such command 'fitt'", "Did you mean", "'fit'"]),
    (["--threads", "0", "show", "-m", "{d}/m.duckdb:nb"], ["'--threads'", "sqlnb --help"]),
    (["--memory-limit", "lots", "show", "-m", "{d}/m.duckdb:nb"], ["invalid memory limit 'lots'"]),
    (["demo", "--rows", "5"], ["--rows"]),
])
def test_bad_input_is_one_line_and_changes_nothing(work, args, fragments):
    before = snapshot(work, work / "m.duckdb")
    assert_error(invoke(*[a.replace("{d}", str(work)) for a in args]), *fragments)
    assert snapshot(work, work / "m.duckdb") == before


def test_a_duckdb_error_while_scoring_is_one_line_and_writes_nothing(tmp_path):
    # A CSV whose column reads as numbers in the sniffed sample and holds text further
    # down: DuckDB finds out only when the query runs. (A categorical value that does not
    # cast to the fitted type is no such error: it is unseen, see test_row_integrity.py.)
    write_parquet(pa.table({"c": [1.0, 2.0, 1.5, 2.5], "y": ["a", "b", "a", "b"]}), tmp_path / "t.parquet")
    assert invoke("fit", tmp_path / "t.parquet", "-y", "y", "-m", f"{tmp_path}/m.duckdb:nums").exit_code == 0
    (tmp_path / "s.csv").write_text("c\n" + "1.5\n" * 30_000 + "oops\n")
    before = snapshot(tmp_path, tmp_path / "m.duckdb")
    # One line naming the file, line, column and value (not DuckDB's "CSV Error on Line").
    fragments = ("s.csv'", "line 30002", "column 'c'", "'oops'", "--null-string")
    assert_error(invoke("score", tmp_path / "s.csv", "-m", f"{tmp_path}/m.duckdb:nums",
                        "-o", tmp_path / "o.parquet"), *fragments)
    assert_error(invoke("score", tmp_path / "s.csv", "-m", f"{tmp_path}/m.duckdb:nums",
                        "-o", f"{tmp_path}/new.duckdb:o"), *fragments)
    assert snapshot(tmp_path, tmp_path / "m.duckdb") == before  # no o.parquet, no new.duckdb


# -- interruptions ---------------------------------------------------------------------------

def _interrupt(*_a, **_k):
    raise KeyboardInterrupt


def test_interrupted_score_leaves_the_previous_output(base, tmp_path, monkeypatch):
    out = tmp_path / "scored.parquet"
    assert invoke("score", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "-o", out).exit_code == 0
    before = snapshot(tmp_path, out)
    monkeypatch.setattr("sqlnb.io.output.os.replace", _interrupt)  # after COPY wrote the temporary file
    result = invoke("score", base / "test.parquet", "-m", f"{base}/m.duckdb:nb", "-o", out, "--replace")
    assert result.exit_code == EXIT_INTERRUPTED and result.stdout == ""
    assert result.stderr == "Error: interrupted; nothing was written\n"
    assert snapshot(tmp_path, out) == before


def test_interrupted_table_output_rolls_back(work, monkeypatch):
    db = f"{work}/m.duckdb"
    assert invoke("score", work / "test.parquet", "-m", f"{db}:nb", "-o", f"{db}:s", "--keep", "id").exit_code == 0
    monkeypatch.setattr("sqlnb.io.output._count", _interrupt)  # after CREATE OR REPLACE ran, before COMMIT
    result = invoke("score", work / "test.parquet", "-m", f"{db}:nb", "-o", f"{db}:s", "--replace", "--no-proba")
    assert result.exit_code == EXIT_INTERRUPTED
    with duckdb.connect(db, read_only=True) as con:
        assert con.sql('SELECT * FROM "s"').columns == ["id", "proba_a", "proba_b", "proba_c", "prediction"]


def test_interrupted_fit_keeps_the_previous_model_and_creates_no_database(work, tmp_path, monkeypatch):
    db = work / "m.duckdb"
    before = snapshot(db)
    monkeypatch.setattr("sqlnb.store.versions", _interrupt)  # inside the save transaction
    result = invoke("fit", work / "train.parquet", "-y", "y", "-m", f"{db}:nb", "--replace")
    assert result.exit_code == EXIT_INTERRUPTED
    assert [(m["name"], m["created"]) for m in sqlnb.list_models(str(db))] == before[f"{db} models"]
    assert sqlnb.load(str(db), "nb").stats.n_rows == 200
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    result = invoke("fit", work / "train.parquet", "-y", "y", "-m", f"{fresh}/new.duckdb:nb")
    assert result.exit_code == EXIT_INTERRUPTED and os.listdir(fresh) == []


# -- names are data --------------------------------------------------------------------------

def test_hostile_names_are_only_names(tmp_path):
    bad_col = 'a"; DROP TABLE sentinel; --'
    db = str(tmp_path / "db.duckdb")
    n = 60
    rng = np.random.default_rng(5)
    k = rng.integers(0, 2, n)
    t = pa.table({bad_col: rng.normal(2.0 * k, 1.0), "ünï cödé; 'x'": np.where(k == 1, "ja", "nein").tolist(),
                  "la.bel": np.where(k == 1, "it's", 'say "hi"').tolist()})
    with duckdb.connect(db) as con:
        con.execute("CREATE TABLE sentinel AS SELECT 42 AS answer")
        con.from_arrow(t).create("t; DROP TABLE sentinel")
    model = f"{db}:we'ird name"
    assert invoke("fit", f"{db}:t; DROP TABLE sentinel", "-y", "la.bel", "-m", model).exit_code == 0
    assert [m["name"] for m in sqlnb.list_models(db)] == ["we'ird name"]
    out = tmp_path / "out.parquet"
    assert invoke("score", f"{db}:t; DROP TABLE sentinel", "-m", model, "-o", out).exit_code == 0
    assert invoke("score", f"{db}:t; DROP TABLE sentinel", "-m", model, "-o", f"{db}:out; DROP TABLE sentinel").exit_code == 0
    scored = read(out)
    assert scored.column_names[:3] == [bad_col, "ünï cödé; 'x'", "la.bel"]
    assert {"proba_it's", 'proba_say "hi"'} <= set(scored.column_names)
    assert set(scored["prediction"].to_pylist()) <= {"it's", 'say "hi"'}
    ev = json.loads(invoke("evaluate", f"{db}:t; DROP TABLE sentinel", "-m", model, "--format", "json").stdout)
    assert ev["accuracy"] > 0.7 and ev["positive_class"] == 'say "hi"'
    sql_text = invoke("sql", f"{db}:t; DROP TABLE sentinel", "-m", model).stdout
    with duckdb.connect(db) as con:
        got = con.sql(sql_text.strip().rstrip(";")).to_arrow_table()
        assert got["prediction"].to_pylist() == scored["prediction"].to_pylist()
        assert con.sql("SELECT answer FROM sentinel").fetchall() == [(42,)]
        assert con.execute('SELECT count(*) FROM "out; DROP TABLE sentinel"').fetchall()[0][0] == n
    assert "we'ird name" in invoke("show", "-m", model).stdout
    assert "we'ird name" in invoke("models", db).stdout


def test_assignments_take_commas_and_quoted_names():
    from sqlnb.cli.options import assignments
    assert assignments(("a=categorical,b=bernoulli", "c=gaussian"), "--feature-kind") == {
        "a": "categorical", "b": "bernoulli", "c": "gaussian"}
    assert assignments(('"x,1"=categorical, " b "=gaussian', "p=q=multinomial", '"say ""hi"""=1'), "--k") == {
        "x,1": "categorical", " b ": "gaussian", "p=q": "multinomial", 'say "hi"': "1"}
    assert assignments(("a=0.5,b=2",), "--feature-alpha", float) == {"a": 0.5, "b": 2.0}
    for bad, fragment in [("a,b=x", "double quotes"), ('"a"x', "not '='"), ("a=", "no value"),
                          ('"a=x', "unterminated quote"), ("a=x,b", "'b'")]:
        with pytest.raises(SqlnbError, match=fragment):
            assignments((bad,), "--feature-kind")
    with pytest.raises(SqlnbError, match="not a number"):
        assignments(("a=x",), "--feature-alpha", float)


def test_column_lists_quote_names_with_commas(tmp_path):
    from sqlnb.cli import split_list
    assert split_list(('a, "b,c" ,d', '"say ""hi""",  e ')) == ["a", "b,c", "d", 'say "hi"', "e"]
    assert split_list(('a"; DROP TABLE sentinel; --',)) == ['a"; DROP TABLE sentinel; --']
    rng = np.random.default_rng(2)
    k = rng.integers(0, 2, 80)
    data = tmp_path / "d.parquet"
    pq.write_table(pa.table({"x,1": rng.normal(2.0 * k, 1.0), " b ": rng.normal(-k, 1.0), "c": rng.normal(size=80),
                             "y": k}), data)
    model = f"{tmp_path}/m.duckdb:m"
    r = invoke("fit", data, "-y", "y", "--features", '"x,1"," b "', "-m", model)
    assert r.exit_code == 0, r.stderr
    assert sqlnb.load(str(tmp_path / "m.duckdb"), "m").feature_names == ["x,1", " b "]
    assert_error(invoke("fit", data, "-y", "y", "--features", '"x,1', "-m", f"{tmp_path}/m.duckdb:n"),
                 "unterminated quote in the column list")


# -- demo ------------------------------------------------------------------------------------

@pytest.mark.slow  # 11-90 s a run under load (measured durations)
def test_demo_is_deterministic_and_keeps_files_on_request(tmp_path):
    first = invoke("demo", "--dir", tmp_path / "d", "--rows", "600", "--seed", "7")
    assert first.exit_code == 0, first.stderr
    assert sorted(os.listdir(tmp_path / "d")) == ["demo.duckdb", "scored.parquet", "test.parquet", "train.parquet"]
    assert "== the model (sqlnb show) ==" in first.stdout and "accuracy" in first.stdout
    assert read(tmp_path / "d" / "train.parquet").num_rows == 420
    train = read(tmp_path / "d" / "train.parquet")
    assert train.column_names == ["id", "age", "income", "plan", "region", "has_app", "segment"]
    assert 0 < train["income"].null_count < 100 and set(train["segment"].to_pylist()) == {"bronze", "silver", "gold"}
    assert_error(invoke("demo", "--dir", tmp_path / "d", "--rows", "600", "--seed", "7"), "already exists", "--replace")
    again = invoke("demo", "--dir", tmp_path / "d", "--rows", "600", "--seed", "7", "--replace")
    assert again.stdout == first.stdout
    other = invoke("demo", "--rows", "600", "--seed", "8", "--db", tmp_path / "elsewhere.duckdb")
    assert other.exit_code == 0 and other.stdout != first.stdout
    assert [m["name"] for m in sqlnb.list_models(str(tmp_path / "elsewhere.duckdb"))] == ["demo"]
    # The CLI reproduces the demo's model from the kept files.
    d = tmp_path / "d"
    assert invoke("fit", d / "train.parquet", "-y", "segment", "--exclude", "id", "-m", f"{d}/demo.duckdb:again").exit_code == 0
    a = sqlnb.load(str(d / "demo.duckdb"), "demo").predict_proba(str(d / "test.parquet")).to_arrow_table()
    b = sqlnb.load(str(d / "demo.duckdb"), "again").predict_proba(str(d / "test.parquet")).to_arrow_table()
    assert a.equals(b)


def test_other_model_kinds_show_score_and_evaluate(base, tmp_path):
    db = str(tmp_path / "dense.duckdb")
    complete = f"SELECT * FROM read_parquet('{base}/train.parquet') WHERE x IS NOT NULL"
    sqlnb.fit(complete, "y", model="lda", features=["x", "z"]).save(db, "lda")
    shown = invoke("show", "-m", f"{db}:lda")
    assert shown.exit_code == 0 and "lda (lda)" in shown.stdout and "x        numeric" in shown.stdout
    ev = json.loads(invoke("evaluate", base / "test.parquet", "-m", f"{db}:lda", "--format", "json").stdout)
    assert ev["no_proba_rows"] == sum(v is None for v in read(base / "test.parquet")["x"].to_pylist())
    assert invoke("score", base / "test.parquet", "-m", f"{db}:lda", "-o", tmp_path / "s.parquet").exit_code == 0
    assert_error(invoke("sql", "--fit", "-m", f"{db}:lda"), "naive Bayes training SQL", "'lda'")
