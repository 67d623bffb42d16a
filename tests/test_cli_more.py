"""The command line's newer commands and flags, in-process (click's CliRunner): model kinds,
text options, cv, compare, update, sample, novelty, fit-em, fit-long/score-long,
sql --macro, and --engine postgres.

As in test_cli.py, each failure test checks the exit code, the single ``Error:`` line
and that nothing was created or changed on disk.
"""

from __future__ import annotations

import json
import os
import shutil

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sqlglot import exp

import sqlnb
from sqlnb import sql
from sqlnb.workflows import compare
from sqlnb.workflows import export
from sqlnb.source import resolve
from support.cli import assert_error, invoke, mixed_table, snapshot, write_parquet

@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """train/test Parquet (no NULLs: LDA, QDA and logistic need complete rows), a naive
    Bayes model, and a small text table and its long token table."""
    d = tmp_path_factory.mktemp("more")
    write_parquet(mixed_table(200, seed=1, nulls=False), d / "train.parquet")
    write_parquet(mixed_table(80, seed=2, nulls=False), d / "test.parquet")
    assert invoke("fit", d / "train.parquet", "-y", "y", "--exclude", "id", "--model", f"{d}/m.duckdb:nb").exit_code == 0
    con = duckdb.connect(str(d / "t.duckdb"))
    con.execute("""CREATE TABLE docs AS SELECT i AS doc, CASE WHEN i % 2 = 0 THEN 'spam' ELSE 'ham' END AS label,
                   CASE WHEN i % 2 = 0 THEN 'Buy cheap pills now the offer' ELSE 'Meeting agenda for the team now' END
                   || ' w' || (i % 5) AS body FROM range(40) t(i)""")
    con.execute("CREATE TABLE tokens AS SELECT doc, unnest(string_split(lower(body), ' ')) AS term FROM docs")
    con.close()
    return d


@pytest.fixture
def work(tmp_path, base):
    for name in ("train.parquet", "test.parquet", "m.duckdb", "t.duckdb"):
        shutil.copy(base / name, tmp_path / name)
    return tmp_path


def models_in(path) -> list[str]:
    return sorted(m["name"] for m in sqlnb.list_models(str(path)))


# -- model kinds ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind, flag", [("lda", ["--shrinkage", "0.1"]), ("qda", ["--reg-param", "0.05"]),
                                        ("logistic", ["--C", "0.5", "--standardize"])])
def test_fit_model_kinds_then_score_evaluate_sql_show(work, kind, flag):
    model = f"{work}/m.duckdb:{kind}"
    r = invoke("fit", work / "train.parquet", "-y", "y", "--features", "x,z", "--kind", kind, *flag, "--model", model)
    assert r.exit_code == 0 and r.stdout == "" and r.stderr == "", r.stderr
    assert sqlnb.load(str(work / "m.duckdb"), kind).kind == kind
    assert invoke("score", work / "test.parquet", "--model", model, "--out", work / "s.parquet").exit_code == 0
    assert pq.read_table(work / "s.parquet").num_rows == 80
    ev = json.loads(invoke("evaluate", work / "test.parquet", "--model", model, "--format", "json").stdout)
    assert ev["accuracy"] > 0.5
    assert invoke("sql", "--model", model).stdout.startswith("SELECT")
    assert f"({kind})" in invoke("show", "--model", model).stdout


@pytest.mark.parametrize("args, fragment", [
    (["--kind", "lda", "--alpha", "1"], "--alpha applies to naive Bayes only, not to --kind lda"),
    (["--kind", "qda", "--shrinkage", "0.1"], "--shrinkage applies to --kind lda only"),
    (["--C", "2"], "--C applies to --kind logistic only, not to --kind auto"),
    (["--kind", "logistic", "--feature-kind", "x=gaussian"], "--feature-kind applies to naive Bayes only"),
])
def test_fit_rejects_options_of_another_kind(tmp_path, base, args, fragment):
    before = snapshot(tmp_path / "new.duckdb")
    r = invoke("fit", base / "train.parquet", "-y", "y", *args, "--model", f"{tmp_path}/new.duckdb:m")
    assert_error(r, fragment)
    assert snapshot(tmp_path / "new.duckdb") == before


# -- text ----------------------------------------------------------------------------------

def test_fit_text_options_and_show_top_terms(work):
    (work / "stop.txt").write_text("the\nnow\n")
    r = invoke("fit", f"{work}/t.duckdb:docs", "-y", "label", "--exclude", "doc", "--feature-kind", "body=multinomial",
               "--stop-words", f"@{work}/stop.txt", "--min-df", "2", "--max-features", "20", "--model", f"{work}/m.duckdb:txt")
    assert r.exit_code == 0, r.stderr
    m = sqlnb.load(str(work / "m.duckdb"), "txt")
    opts = m.features[0].bag["text"] if "text" in m.features[0].bag else None
    shown = invoke("show", "--model", f"{work}/m.duckdb:txt", "--top-terms", "3")
    assert shown.exit_code == 0 and "top terms of body" in shown.stdout
    assert "spam: buy, cheap, offer" in shown.stdout and "the" not in shown.stdout.split("top terms of body")[1]
    js = json.loads(invoke("show", "--model", f"{work}/m.duckdb:txt", "--top-terms", "2", "--format", "json").stdout)
    assert {r["class"] for r in js["top_terms"]["body"]} == {"ham", "spam"}
    del opts


def test_fit_bad_min_df_and_top_terms_without_bags(work):
    before = snapshot(work / "m.duckdb")
    r = invoke("fit", f"{work}/t.duckdb:docs", "-y", "label", "--feature-kind", "body=multinomial", "--min-df", "two",
               "--model", f"{work}/m.duckdb:txt")
    assert_error(r, "--min-df takes a document count")
    assert_error(invoke("show", "--model", f"{work}/m.duckdb:nb", "--top-terms", "3"), "has none")
    assert snapshot(work / "m.duckdb") == before


def test_fit_long_and_score_long(work):
    r = invoke("fit-long", f"{work}/t.duckdb:tokens", f"{work}/t.duckdb:docs", "--id", "doc", "--token", "term",
               "--label", "label", "--stop-words", "the", "--model", f"{work}/m.duckdb:long")
    assert r.exit_code == 0, r.stderr
    r = invoke("score-long", f"{work}/t.duckdb:tokens", "--model", f"{work}/m.duckdb:long", "--out", "-")
    assert r.exit_code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0] == "doc,proba_ham,proba_spam,prediction" and len(lines) == 41
    assert all(line.endswith("spam") == (int(line.split(",")[0]) % 2 == 0) for line in lines[1:])
    before = snapshot(work / "s.parquet", work / "m.duckdb")
    r = invoke("score-long", f"{work}/t.duckdb:tokens", "--model", f"{work}/m.duckdb:nb", "--out", work / "s.parquet")
    assert_error(r, "score-long scores models from 'sqlnb fit-long'")
    assert snapshot(work / "s.parquet", work / "m.duckdb") == before


# -- cv, compare ---------------------------------------------------------------------------

def test_cv_grid_text_json_and_refit(work):
    r = invoke("cv", work / "train.parquet", "-y", "y", "--exclude", "id", "--folds", "3",
               "--grid", "alpha=1,2", "--grid", "estimator=map,posterior-mean")
    assert r.exit_code == 0, r.stderr
    assert "3-fold cross-validation of naive_bayes" in r.stdout and "best (accuracy): " in r.stdout
    assert r.stdout.count("log loss") == 4
    r = invoke("cv", work / "train.parquet", "-y", "y", "--features", "x,z", "--kind", "lda", "--folds", "3",
               "--grid", "shrinkage=0,0.5", "--refit", "--model", f"{work}/m.duckdb:best", "--format", "json")
    assert r.exit_code == 0, r.stderr
    d = json.loads(r.stdout)
    assert d["model"] == "lda" and len(d["results"]) == 2 and len(d["results"][0]["accuracy"]) == 3
    assert d["scans"]["source"] == 1  # read once into a temporary copy
    assert sqlnb.load(str(work / "m.duckdb"), "best").kind == "lda"
    r2 = invoke("cv", work / "train.parquet", "-y", "y", "--features", "x,z", "--kind", "lda", "--folds", "3",
                "--grid", "shrinkage=0,0.5", "--no-copy", "--format", "json")
    assert r2.exit_code == 0, r2.stderr
    d2 = json.loads(r2.stdout)
    assert d2["scans"]["source"] == 2 and [r["accuracy"] for r in d2["results"]] == [r["accuracy"] for r in d["results"]]


@pytest.mark.parametrize("args, fragment", [
    (["--refit"], "--refit and --model go together"),
    (["--grid", "alpha"], "--grid takes NAME=V1,V2"),
    (["--grid", "shrinkage=0.1"], "'shrinkage' is not a parameter of model 'naive_bayes'"),
    (["--refit", "--model", "M:nb"], "model 'nb' already exists"),
])
def test_cv_bad_input(work, args, fragment):
    args = [a.replace("M:", f"{work}/m.duckdb:") for a in args]
    before = snapshot(work / "m.duckdb")
    assert_error(invoke("cv", work / "train.parquet", "-y", "y", "--exclude", "id", *args), fragment)
    assert snapshot(work / "m.duckdb") == before


def test_compare_table_and_plot(work):
    r = invoke("compare", work / "train.parquet", "-y", "y", "--test", work / "test.parquet", "--features", "x,z",
               "--sizes", "30,120", "--repeats", "2", "--plot", work / "c.svg")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines()[0] == "| training rows | naive Bayes | LDA | QDA | logistic regression |"
    assert (work / "c.svg").read_text().startswith("<svg") and len(r.stdout.splitlines()) == 4
    r = invoke("compare", work / "train.parquet", "-y", "y", "--features", "x,z", "--models", "lda",
               "--sizes", "50", "--repeats", "1", "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)[0]["model"] == "lda"


def test_compare_logistic_penalty(work):
    def errors(*extra):
        r = invoke("compare", work / "train.parquet", "-y", "y", "--test", work / "test.parquet", "--features", "x,z",
                   "--models", "logistic", "--sizes", "12", "--repeats", "3", "--format", "json", *extra)
        assert r.exit_code == 0, r.stderr
        return json.loads(r.stdout)

    default, explicit, weak = errors(), errors("--C", "1"), errors("--C", "1e-6")
    # scikit-learn's C = 1 is the default: the same predictions, and the same log loss up to
    # DuckDB's parallel summation order (last bits)
    assert [{k: v for k, v in r.items() if k != "mean_log_loss"} for r in default] == \
        [{k: v for k, v in r.items() if k != "mean_log_loss"} for r in explicit]
    assert [r["mean_log_loss"] for r in default] == pytest.approx([r["mean_log_loss"] for r in explicit], rel=1e-12)
    # C = 1e-6 shrinks every coefficient to ~0: the model predicts the majority class
    assert weak != default


def test_compare_encodes_categorical_and_binarized_features(work):
    # color is categorical: naive Bayes takes it as it is, the other kinds its one-hot
    # indicators; flag is BOOLEAN, x and z numeric
    r = invoke("compare", work / "train.parquet", "-y", "y", "--test", work / "test.parquet", "--exclude", "id",
               "--sizes", "60", "--repeats", "2", "--format", "json")
    assert r.exit_code == 0, r.stderr
    got = {row["model"]: row for row in json.loads(r.stdout)}
    assert got["naive_bayes"]["mean_error"] is not None and got["logistic"]["mean_error"] is not None
    # the indicators of a column sum to one: the pooled covariance is singular, so LDA is
    # undefined (shown as such, not an error)
    assert got["lda"]["undefined"] == 2
    # --binarize: Bernoulli naive Bayes and logistic regression on the same indicators x > 0,
    # exactly what the library gives for presence() sources
    r = invoke("compare", work / "train.parquet", "-y", "y", "--test", work / "test.parquet", "--features", "x,z",
               "--models", "naive_bayes,logistic", "--binarize", "0", "--C", "1e4", "--sizes", "40",
               "--repeats", "2", "--format", "json")
    assert r.exit_code == 0, r.stderr
    con = duckdb.connect()
    presence = [compare.presence(resolve(str(work / f"{part}.parquet"), con), ["x", "z"])
                for part in ("train", "test")]
    rows = sqlnb.learning_curves(*presence, "y", con=con, models=["naive_bayes", "logistic"], sizes=[40],
                                 repeats=2, features=["x", "z"],
                                 options={"naive_bayes": {"kind": "bernoulli"}, "logistic": {"C": 1e4}})
    expected = compare.summarize(rows)
    cli = json.loads(r.stdout)
    assert [(e["model"], e["mean_error"]) for e in expected] == [(c["model"], c["mean_error"]) for c in cli]


@pytest.mark.parametrize("args, fragment", [
    (["--plot", "P/c.svg", "--C", "0"], "--C must be a positive finite number"),
    (["--plot", "P/c.png"], "--plot writes SVG"),
    (["--plot", "P/c.svg", "--sizes", "5000"], "training sizes must be between 1 and"),
    (["--plot", "P/c.svg", "--models", "svm"], "unknown model 'svm'"),
])
def test_compare_bad_input_writes_no_plot(work, args, fragment):
    args = [a.replace("P/", f"{work}/") for a in args]
    before = snapshot(work)
    assert_error(invoke("compare", work / "train.parquet", "-y", "y", "--features", "x,z", *args), fragment)
    assert snapshot(work) == before


# -- update, sample, novelty, fit-em -------------------------------------------------------

def test_update_adds_rows_in_place(work):
    r = invoke("update", work / "test.parquet", "--model", f"{work}/m.duckdb:nb")
    assert r.exit_code == 0 and r.stdout == "", r.stderr
    assert sqlnb.load(str(work / "m.duckdb"), "nb").stats.n_rows == 280
    assert models_in(work / "m.duckdb") == ["nb"]


def test_update_bad_input_leaves_the_model(work):
    before = snapshot(work / "m.duckdb")
    assert_error(invoke("update", work / "test.parquet", "--model", f"{work}/m.duckdb:nb", "--decay", "1.5"),
                 "--decay")
    assert_error(invoke("update", work / "test.parquet", "--model", f"{work}/m.duckdb:nope"), "no model named 'nope'")
    assert snapshot(work / "m.duckdb") == before


def test_sample_rows_to_file_and_stdout(work):
    r = invoke("sample", "--model", f"{work}/m.duckdb:nb", "-n", "50", "--seed", "3", "--out", work / "s.parquet")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(work / "s.parquet")
    assert t.num_rows == 50 and "y" in t.column_names
    r = invoke("sample", "--model", f"{work}/m.duckdb:nb", "-n", "5", "--class", "b", "--seed", "3", "--out", "-")
    assert r.exit_code == 0 and all(line.endswith(",b") for line in r.stdout.splitlines()[1:])


def test_sample_bad_class_writes_nothing(work):
    before = snapshot(work)
    r = invoke("sample", "--model", f"{work}/m.duckdb:nb", "-n", "5", "--class", "zz", "--out", work / "s.parquet")
    assert_error(r, "--class 'zz' is not a class of the model")
    assert snapshot(work) == before


def test_novelty_then_score_flag_novel(work):
    r = invoke("novelty", work / "train.parquet", "--model", f"{work}/m.duckdb:nb", "--quantile", "0.05",
               "--format", "json")
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["rows"] == 200
    r = invoke("score", work / "test.parquet", "--model", f"{work}/m.duckdb:nb", "--flag-novel", "--keep", "id",
               "--out", work / "f.parquet")
    assert r.exit_code == 0, r.stderr
    t = pq.read_table(work / "f.parquet")
    assert {"log_evidence", "novel", "prediction"} <= set(t.column_names) and t["novel"].type == pa.bool_()


def test_score_flag_novel_without_threshold_writes_nothing(work):
    before = snapshot(work)
    r = invoke("score", work / "test.parquet", "--model", f"{work}/m.duckdb:nb", "--flag-novel", "--out", work / "f.parquet")
    assert_error(r, "the model has no novelty threshold")
    assert_error(invoke("novelty", work / "train.parquet", "--model", f"{work}/m.duckdb:nb", "--quantile", "1"),
                 "--quantile")
    assert snapshot(work) == before


def test_fit_em(work):
    r = invoke("fit-em", work / "train.parquet", "--unlabelled", work / "test.parquet", "-y", "y", "--exclude", "id",
               "--max-iter", "3", "--model", f"{work}/m.duckdb:em")
    assert r.exit_code == 0, r.stderr
    assert sqlnb.load(str(work / "m.duckdb"), "em").kind == "naive_bayes"
    before = snapshot(work / "m.duckdb")
    r = invoke("fit-em", work / "train.parquet", "-y", "y", "--model", f"{work}/m.duckdb:em")
    assert_error(r, "model 'em' already exists")
    assert snapshot(work / "m.duckdb") == before


# -- sql --macro, sql --fit ------------------------------------------------------------------

def test_sql_macro_scores_like_score(work):
    r = invoke("sql", "--model", f"{work}/m.duckdb:nb", "--macro", "churn")
    assert r.exit_code == 0 and r.stdout.startswith('CREATE OR REPLACE MACRO "score_churn"')
    con = duckdb.connect()
    con.execute(r.stdout)
    con.execute(f"CREATE TABLE t AS SELECT * FROM '{work}/test.parquet'")
    got = con.sql("SELECT id, prediction FROM score_churn('t') ORDER BY id").fetchall()
    m = sqlnb.load(str(work / "m.duckdb"), "nb")
    want = con.sql(m.score("t", con).sql_query()).order("id").select("id, prediction").fetchall()
    assert got == want


def test_sql_macro_bad_combination(work):
    assert_error(invoke("sql", "--model", f"{work}/m.duckdb:nb", "--macro", "x", "--dialect", "postgres"),
                 "--macro prints a DuckDB macro")


def test_sql_fit_is_export_fit_sql(work):
    m = sqlnb.load(str(work / "m.duckdb"), "nb")
    r = invoke("sql", "--fit", "--model", f"{work}/m.duckdb:nb", "--dialect", "sqlite", "--source", "train")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.strip() == export.fit_sql("train", m.label, m.features, "sqlite").strip()


# -- engines ---------------------------------------------------------------------------------

@pytest.mark.parametrize("args, fragment", [
    (["--dsn", "host=x"], "--dsn applies to --engine postgres only"),
    (["--engine", "postgres"], "--engine postgres needs --dsn"),
    (["--master", "local[1]"], "--master applies to --engine spark only"),
])
def test_engine_option_errors(tmp_path, base, args, fragment):
    before = snapshot(tmp_path)
    r = invoke(*args, "fit", base / "train.parquet", "-y", "y", "--model", f"{tmp_path}/m.duckdb:m")
    assert_error(r, fragment)
    assert snapshot(tmp_path) == before


@pytest.fixture(scope="module")
def pg_dsn(base):
    """A throw-away PostgreSQL server with the train/test tables (skipped without one,
    a failure on CI, as in test_engines.py)."""
    from support.engines import start_postgres
    cm, dsn = start_postgres()
    try:
        engine = sqlnb.engines.connect("postgres", dsn=dsn)
        for name in ("train", "test"):
            engine.write_table(name, pq.read_table(base / f"{name}.parquet"))
        engine.close()
        yield dsn
    finally:
        cm.__exit__(None, None, None)


@pytest.mark.postgres
def test_postgres_fit_score_show_evaluate(pg_dsn, base, tmp_path):
    from sqlnb.workflows.evaluate import evaluate

    pg = ["--engine", "postgres", "--dsn", pg_dsn]
    r = invoke(*pg, "fit", "train", "-y", "y", "--exclude", "id", "--model", "churn")
    assert r.exit_code == 0, r.stderr
    r = invoke(*pg, "score", "SELECT * FROM test", "--model", "churn", "--keep", "id", "--out", tmp_path / "s.parquet")
    assert r.exit_code == 0, r.stderr
    got = pq.read_table(tmp_path / "s.parquet").sort_by("id")
    local = sqlnb.load(pg_engine := sqlnb.engines.connect("postgres", dsn=pg_dsn), "churn")
    pg_engine.close()
    want = local.score(str(base / "test.parquet"), keep=["id"]).to_arrow_table().sort_by("id")
    assert got["prediction"].to_pylist() == want["prediction"].to_pylist()
    assert "churn (naive_bayes)" in invoke(*pg, "show", "--model", "churn").stdout
    # evaluate reads DATA on the engine (the table there) and computes the figures there
    r = invoke(*pg, "evaluate", "test", "--model", "churn", "--format", "json")
    assert r.exit_code == 0, r.stderr
    ev = json.loads(r.stdout)
    here = evaluate(local, str(base / "test.parquet"))  # the same model and rows in DuckDB
    assert ev["rows"] == here.rows == 80 and ev["confusion"]["counts"] == here.confusion
    assert abs(ev["log_loss"] - here.log_loss) < 1e-9


@pytest.mark.postgres
def test_postgres_bad_input(pg_dsn, base, tmp_path):
    pg = ["--engine", "postgres", "--dsn", pg_dsn]
    before = snapshot(tmp_path)
    assert_error(invoke(*pg, "fit", "train", "-y", "y", "--model", f"{tmp_path}/m.duckdb:m"),
                 "with --engine postgres, MODEL is a model NAME")
    assert_error(invoke(*pg, "fit", "train", "-y", "y", "--kind", "lda", "--model", "l"), "fitted in DuckDB only")
    assert_error(invoke(*pg, "score", "nope", "--model", "missing", "--out", tmp_path / "s.parquet"), "missing")
    assert_error(invoke(*pg, "cv", "train", "-y", "y"), "cross-validation on postgres needs a key")
    assert_error(invoke(*pg, "fit", "train", "-y", "y", "--delimiter", ";", "--model", "x"),
                 "reading options (--data-format, --columns and the CSV ones) apply to files read by DuckDB")
    assert_error(invoke("score", base / "test.parquet", "--model", f"{base}/m.duckdb:nb", "--out-table", "t"),
                 "--out-table writes a table on --engine postgres")
    assert snapshot(tmp_path) == before


@pytest.mark.postgres
def test_postgres_score_into_a_table(pg_dsn):
    pg = ["--engine", "postgres", "--dsn", pg_dsn]
    assert invoke(*pg, "fit", "train", "-y", "y", "--exclude", "id", "--model", "tbl").exit_code == 0
    r = invoke(*pg, "score", "test", "--model", "tbl", "--keep", "id", "--out-table", "scored")
    assert r.exit_code == 0, r.stderr
    engine = sqlnb.engines.connect("postgres", dsn=pg_dsn)
    try:
        rows = engine.execute(exp.select(exp.Count(this=exp.Star()), exp.Count(this=sql.col("prediction")))
                              .from_(sql.table("scored")))
        assert rows == [(80, 80)]
        assert_error(invoke(*pg, "score", "test", "--model", "tbl", "--out-table", "scored"), "already exists")
        r = invoke(*pg, "score", "test", "--model", "tbl", "--keep", "id", "--no-proba", "--out-table", "scored", "--replace")
        assert r.exit_code == 0, r.stderr
        assert len(engine.execute(exp.select(exp.Star()).from_(sql.table("scored")).limit(1))[0]) == 2
    finally:
        engine.close()


@pytest.mark.postgres
def test_postgres_drop(pg_dsn, base):
    pg = ["--engine", "postgres", "--dsn", pg_dsn]
    assert invoke(*pg, "fit", "train", "-y", "y", "--exclude", "id", "--model", "gone").exit_code == 0
    assert invoke(*pg, "drop", "--model", "gone").exit_code == 0
    assert_error(invoke(*pg, "show", "--model", "gone"), "gone")


@pytest.mark.parametrize("command", ["fit", "score", "show", "sql", "cv", "compare", "update", "sample", "novelty",
                                     "fit-em", "fit-long", "score-long"])
def test_new_help_examples_are_laid_out(command):
    out = invoke(command, "--help").stdout
    assert "\n  Example:\n    sqlnb " in out and "\\b" not in out


def test_fit_takes_an_asymmetric_beta_prior_for_bernoulli_features(tmp_path):
    # Beta(β1, β0) on the command line; log p(on | c) is
    # ln((N_on + β1) / (N_c + β1 + β0)) under the posterior mean, from the stored counts.
    import math

    import numpy as np

    rng = np.random.default_rng(6)
    n = 300
    y = rng.integers(0, 2, n)
    t = pa.table({"a": (rng.random(n) < 0.2 + 0.5 * y).astype(float), "b": (rng.random(n) < 0.6).astype(float),
                  "y": y})
    pq.write_table(t, tmp_path / "bits.parquet")
    db = f"{tmp_path}/m.duckdb"
    result = invoke("fit", tmp_path / "bits.parquet", "--label", "y", "--kind", "bernoulli", "--beta", "2,0.5",
                    "--model", f"{db}:beta")
    assert result.exit_code == 0, result.stderr
    model = sqlnb.load(db, "beta")
    assert model.hyper.beta == (2.0, 0.5)
    want = sqlnb.fit(t, "y", kind="bernoulli", beta=(2, 0.5), screen=False)
    got = model.score(t).to_arrow_table()
    assert got.column("proba_1").to_pylist() == want.score(t).to_arrow_table().column("proba_1").to_pylist()
    a, y1 = t.column("a").to_numpy(), y == 1
    on, total = float(a[y1].sum()), float(y1.sum())
    log_on = math.log((on + 2.0) / (total + 2.5))
    terms = np.asarray(model.log_parameters()["a"][0], dtype=float)  # log p(on) per class
    assert abs(terms[1] - log_on) < 1e-12
    assert "beta" in invoke("show", "--model", f"{db}:beta", "--format", "json").stdout
    for bad in ("2", "2,x", "1,2,3"):
        assert_error(invoke("fit", tmp_path / "bits.parquet", "--label", "y", "--beta", bad, "--model", f"{db}:bad"),
                     "--beta takes two numbers")
    assert_error(invoke("fit", tmp_path / "bits.parquet", "--label", "y", "--beta", "-1,2", "--model", f"{db}:bad"),
                 "beta must be two finite numbers >= 0")
    with pytest.raises(sqlnb.SqlnbError, match="beta must be two"):
        sqlnb.fit(t, "y", kind="bernoulli", beta=(float("nan"), 1.0))
