"""``sqlnb dbt`` under dbt's own runner: ``dbt build`` on a generated project, with
dbt-duckdb against a DuckDB file and with dbt-postgres against a throw-away PostgreSQL
server, scores every row as ``sqlnb score`` does (0 differences, by key, in key order);
after a refit the package's fingerprint test fails until the package is generated again,
and generating again rewrites only the files whose content changed.

dbt is run as a user runs it (a process, ``dbt build --profiles-dir``); each start costs
seconds (importing dbt and parsing the project), so the file runs dbt three times: on
DuckDB after a refit (only the fingerprint test fails), on DuckDB after generating again
(all pass, rows compared), on PostgreSQL (all pass, rows compared). One generated project
serves both adapters: the PostgreSQL run uses a profile of its own and the same model saved
in PostgreSQL's store (same fingerprint). sqlnb itself runs in-process.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from support.cli import invoke
from support.dbt import dbt_executable as _dbt, postgres_profiles, results as _results, run as _run
from support.dbt_macro import macro_sql as _macro_sql
from support.engines import unavailable

ROWS_TRAIN, ROWS_SCORE = 240, 120
CLASSES = ["bronze", "gold", "silver"]
PACKAGE = "dbt_packages/sqlnb_churn"


def _rows(n: int, seed: int) -> pa.Table:
    """Customers in three segments: numeric, categorical and boolean columns, a few NULLs,
    a key. Made in DuckDB from a seed, so every run has the same rows."""
    con = duckdb.connect()
    con.sql(f"SELECT setseed({seed / 100})").fetchall()
    t = con.sql(f"""
        SELECT i AS id,
               ['bronze', 'gold', 'silver'][1 + (i * 7 + floor(random() * 2)::INT) % 3] AS segment,
               CASE WHEN i % 17 = 0 THEN NULL ELSE 20 + random() * 50 + (i % 3) * 8 END AS age,
               1000 * (1 + random()) * (1 + i % 3) AS income,
               ['basic', 'plus', 'pro'][1 + (i + floor(random() * 2)::INT) % 3] AS plan,
               CASE WHEN i % 11 = 0 THEN NULL ELSE ['north', 'south', 'east'][1 + (i // 2) % 3] END AS region,
               (i % 3 = 1) OR random() < 0.2 AS has_app
        FROM range({n}) r(i)""").to_arrow_table()
    con.close()
    return t


def _fit(wh: Path, table: str, replace: bool = False) -> None:
    """Fit the model ``churn`` on ``table`` of ``wh`` and store it there."""
    con = duckdb.connect(str(wh))
    sqlnb.fit(table, "segment", con=con, exclude=["id"]).save(con, "churn", replace=replace)
    con.close()


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file() and not str(p.relative_to(root)).startswith(("target", "logs"))}


def _sqlnb_scores(wh: Path, tmp: Path) -> list[tuple]:
    out = tmp / "scored.parquet"
    done = invoke("score", f"{wh}:customers", "--model", f"{wh}:churn", "--keep", "id", "--out", out, "--replace")
    assert done.exit_code == 0, done.stderr
    con = duckdb.connect()
    rows = con.sql(f"SELECT * FROM read_parquet('{out}') ORDER BY id").fetchall()
    con.close()
    return rows


def _dbt_scores_duckdb(wh: Path) -> list[tuple]:
    con = duckdb.connect(str(wh), read_only=True)
    cols = ["id", *[f"proba_{c}" for c in CLASSES], "prediction"]
    rows = con.sql(f"SELECT {', '.join(cols)} FROM main.churn_scored ORDER BY id").fetchall()
    con.close()
    return rows


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A DuckDB file with rows to train on and rows to score, a model fitted on the first
    stored in it, and the project ``sqlnb dbt --project`` writes around them."""
    dbt = _dbt()
    tmp = tmp_path_factory.mktemp("dbt")
    wh = tmp / "wh.duckdb"
    con = duckdb.connect(str(wh))
    for name, table in (("train", _rows(ROWS_TRAIN, 1)), ("customers", _rows(ROWS_SCORE, 2)),
                        ("train_again", _rows(ROWS_TRAIN, 3))):
        con.register("t", table)
        con.execute(f"CREATE TABLE {name} AS SELECT * FROM t")
        con.unregister("t")
    con.close()
    _fit(wh, "train")
    out = tmp / "project"
    done = invoke("dbt", "--model", f"{wh}:churn", "--out", out, "--project", "--table", "customers")
    assert done.exit_code == 0, done.stderr
    return dbt, tmp, wh, out


def test_dbt_build_fails_only_the_fingerprint_after_a_refit_and_scores_as_sqlnb_score_once_regenerated(project):
    """Two dbt runs on DuckDB: the package generated before a refit (every test passes but
    the fingerprint), then the package generated again (everything passes, and the table
    equals sqlnb score's rows)."""
    dbt, tmp, wh, out = project
    before = _files(out)
    again = invoke("dbt", "--model", f"{wh}:churn", "--out", out, "--project", "--table", "customers")
    assert again.exit_code == 0 and "wrote" not in again.stdout, again.stdout  # nothing changed, nothing written

    _fit(wh, "train_again", replace=True)
    failed = _run([dbt, "build", "--profiles-dir", "."], out, "dbt build after a refit", ok=False)
    assert failed.returncode != 0
    status = _results(out)
    assert len(status) == 5  # the model and its four tests
    assert status.pop("sqlnb_churn_fingerprint_churn_scored_") == "fail", failed.stdout[-3000:]
    assert set(status.values()) == {"success", "pass"}  # only the fingerprint says the package is stale

    regen = invoke("dbt", "--model", f"{wh}:churn", "--out", out, "--project", "--table", "customers")
    assert regen.exit_code == 0, regen.stderr
    after = _files(out)
    changed = sorted(p for p in after if after[p] != before.get(p))
    # The SQL (new parameters), the tests (the fingerprint) and the docs (provenance): no other file.
    assert changed == [f"{PACKAGE}/macros/score_churn.sql", f"{PACKAGE}/macros/tests_churn.sql",
                       f"{PACKAGE}/models/churn.md"], changed
    assert sorted(line.split()[-1] for line in regen.stdout.splitlines() if line.startswith("wrote")) == changed

    _run([dbt, "build", "--profiles-dir", "."], out, "dbt build after generating again")
    assert set(_results(out).values()) == {"success", "pass"}
    got, want = _dbt_scores_duckdb(wh), _sqlnb_scores(wh, tmp)
    assert len(got) == ROWS_SCORE
    assert [g for g, w in zip(got, want) if g != w] == [] and len(got) == len(want)


@pytest.mark.postgres
def test_dbt_build_on_postgres_scores_every_row_as_sqlnb_score(project):
    from support.engines import postgres_engine

    dbt, tmp, wh, out = project
    con = duckdb.connect(str(wh), read_only=True)
    customers = con.sql("SELECT * FROM customers").to_arrow_table()
    con.close()
    model = sqlnb.load(wh, "churn")
    with postgres_engine({"customers": customers}) as pg:
        model.save(pg, "churn")  # the same model in the warehouse's store: its fingerprint goes with it
        assert sqlnb.load(pg, "churn").fingerprint == model.fingerprint
        profiles = postgres_profiles(tmp / "pg_profiles", "sqlnb_churn_example", pg.dsn)
        _run([dbt, "build", "--profiles-dir", str(profiles)], out, "dbt build (postgres)")
        assert set(_results(out).values()) == {"success", "pass"}
        import psycopg
        cols = ", ".join(["id", *[f"proba_{c}" for c in CLASSES], "prediction"])
        with psycopg.connect(pg.dsn) as c:
            got = c.execute(f"SELECT {cols} FROM public.churn_scored ORDER BY id").fetchall()
        scored = tmp / "pg_scored.parquet"
        done = invoke("--engine", "postgres", "--dsn", pg.dsn, "score", "customers", "--model", "churn",
                      "--key", "id", "--keep", "id", "--out", scored, "--replace")
        assert done.exit_code == 0, done.stderr
        # The package written from PostgreSQL's copy has the same SQL and tests (same fingerprint).
        pkg = tmp / "from_pg"
        made = invoke("--engine", "postgres", "--dsn", pg.dsn, "dbt", "--model", "churn", "--out", pkg)
        assert made.exit_code == 0, made.stderr
    for part in ("macros/score_churn.sql", "macros/tests_churn.sql", "models/schema.yml"):
        assert (pkg / part).read_text() == (out / PACKAGE / part).read_text(), part
    d = duckdb.connect()
    want = d.sql(f"SELECT {cols} FROM read_parquet('{scored}') ORDER BY id").fetchall()
    d.close()
    assert len(got) == ROWS_SCORE
    assert [g for g, w in zip(got, want) if g != w] == [] and len(got) == len(want)


# -- without dbt: every model kind's package, its SQL run in DuckDB, and the errors ------------------------

#: tests/fixtures' format 1 models whose scoring SELECTs differ in shape: plain naive Bayes,
#: token bags (a join, ordered by row number), a tree, a calibrator, a decision rule
#: (expected_cost), the dense kinds.
FORMAT1 = ("nb_mixed", "nb_text", "tan", "calibrated_isotonic", "decided_costs", "qda", "logistic")


@pytest.fixture(scope="module")
def kinds(tmp_path_factory):
    """tests/fixtures' format 1 models (saved before fingerprints), and a copy of each
    saved now (with one), next to their scoring input ``fixture_input``."""
    import gzip

    tmp = tmp_path_factory.mktemp("dbt_kinds")
    old = tmp / "format1.duckdb"
    with gzip.open(Path(__file__).parent / "fixtures" / "format1_models.duckdb.gz", "rb") as src:
        old.write_bytes(src.read())
    con = duckdb.connect(str(old))
    for name in FORMAT1:
        sqlnb.load(con, name).save(con, f"copy_{name}")
    con.close()
    return old


@pytest.mark.parametrize("kind", FORMAT1)
def test_each_model_kinds_duckdb_macro_scores_as_sqlnb_score(kinds, kind):
    from sqlnb.workflows import dbt

    con = duckdb.connect(str(kinds))
    model = sqlnb.load(con, f"copy_{kind}")
    assert model.fingerprint and model.fingerprint == dbt_fingerprint_of(sqlnb.load(con, kind))
    files = dbt.package_files(model, "m")
    select = _macro_sql(files, "m", '"fixture_input"', ["id"])
    got = con.sql(f'SELECT * FROM ({select}) ORDER BY "id"').fetchall()
    cols = con.sql(select).columns
    want_rel = model.score("fixture_input", con, outputs=("proba", "prediction"), keep=["id"])
    assert cols == want_rel.columns
    want = sorted(want_rel.fetchall(), key=lambda r: r[0])
    con.close()
    assert len(got) == len(want) > 0
    assert [g for g, w in zip(got, want) if g != w] == []


def dbt_fingerprint_of(model) -> str:
    """The fingerprint ``model`` would be saved with (a format 1 model has none stored)."""
    from sqlnb.store.catalog import fingerprint

    rule = model.decision
    parts = dict(model.parameter_tables())
    parts.update(model.calibration.tables() if model.calibration is not None else {})
    decision = {} if rule is None or rule.is_default else {"decision": rule.to_dict()}
    return fingerprint(dict(model.metadata(), kind=model.kind, **decision), parts)


def test_a_model_saved_without_a_fingerprint_is_refused_in_one_line(kinds, tmp_path):
    from support.cli import assert_error

    out = tmp_path / "pkg"
    assert_error(invoke("dbt", "--model", f"{kinds}:nb_mixed", "--out", out, "--name", "mixed"),
                 "'nb_mixed'", "no fingerprint", "sqlnb fit --replace")
    assert not out.exists()


def test_names_and_options_are_checked_before_anything_is_written(kinds, tmp_path):
    from support.cli import assert_error

    out = tmp_path / "pkg"
    model = f"{kinds}:copy_nb_mixed"
    assert_error(invoke("dbt", "--model", f"{kinds}:copy_nb_mixed", "--out", out, "--name", "Churn-1"),
                 "--name", "not a dbt name")
    assert_error(invoke("dbt", "--model", model, "--out", out, "--name", "m", "--project"), "--table")
    assert_error(invoke("dbt", "--model", model, "--out", out, "--name", "m", "--table", "t"), "--project")
    assert_error(invoke("dbt", "--model", model, "--out", out, "--name", "m", "--label", "y"), "--evaluate")
    assert not out.exists()
    done = invoke("dbt", "--model", model, "--out", out, "--name", "m")
    assert done.exit_code == 0, done.stderr
    assert sorted(line.split()[-1] for line in done.stdout.splitlines()) == sorted(
        str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())


def test_the_fingerprint_is_the_models_not_its_saves(tmp_path):
    """A copy keeps it; a refit on other rows, another hyperparameter, a decision rule change it."""
    con = duckdb.connect()
    con.register("a", _rows(ROWS_TRAIN, 1))
    con.register("b", _rows(ROWS_TRAIN, 3))
    fit = sqlnb.fit("a", "segment", con=con, exclude=["id"])
    prints = {}
    for what, model in (("fit", fit), ("again", sqlnb.fit("a", "segment", con=con, exclude=["id"])),
                        ("other rows", sqlnb.fit("b", "segment", con=con, exclude=["id"])),
                        ("alpha", sqlnb.fit("a", "segment", con=con, exclude=["id"], alpha=2.0))):
        model.save(con, what)
        prints[what] = sqlnb.load(con, what).fingerprint
    assert prints["fit"] == prints["again"]
    assert len({prints["fit"], prints["other rows"], prints["alpha"]}) == 3
    con.close()


def test_evaluate_puts_sqlnb_evaluates_figures_in_the_docs_block(tmp_path):
    train, test = tmp_path / "train.parquet", tmp_path / "test.parquet"
    import pyarrow.parquet as pq
    pq.write_table(_rows(ROWS_TRAIN, 1), train)
    pq.write_table(_rows(ROWS_SCORE, 2), test)
    db = tmp_path / "m.duckdb"
    sqlnb.fit(str(train), "segment", exclude=["id"]).save(db, "churn")
    done = invoke("dbt", "--model", f"{db}:churn", "--out", tmp_path / "pkg", "--evaluate", test)
    assert done.exit_code == 0, done.stderr
    from sqlnb.workflows.evaluate import evaluate

    ev = evaluate(sqlnb.load(db, "churn"), str(test))
    docs = (tmp_path / "pkg" / "models" / "churn.md").read_text()
    assert f"accuracy={ev.accuracy}, log_loss={ev.log_loss}" in docs, docs
    assert f"rows={ev.rows}" in docs and "not evaluated" not in docs


def _fingerprint(model, con, name) -> str:
    model.save(con, name)
    return sqlnb.load(con, name).fingerprint


@pytest.fixture(scope="module")
def binary(tmp_path_factory):
    rng = np.random.default_rng(3)
    n = 300
    y = rng.integers(0, 2, n)
    t = pa.table({"a": rng.normal(y, 1.0), "b": rng.normal(-y, 2.0), "y": pa.array(np.array(["no", "yes"])[y])})
    d = tmp_path_factory.mktemp("fp")
    pq.write_table(t.slice(0, 200), d / "train.parquet")
    pq.write_table(t.slice(200), d / "held.parquet")
    (d / "moved").mkdir()
    shutil.copy(d / "held.parquet", d / "moved" / "held_out.parquet")
    pq.write_table(t.slice(150, 150), d / "other.parquet")  # other held-out rows
    return d


@pytest.mark.parametrize("method", ["temperature", "platt", "isotonic"])
def test_the_same_calibration_rows_at_two_paths_give_one_fingerprint(binary, method):
    con = duckdb.connect()
    model = sqlnb.fit(str(binary / "train.parquet"), "y", con=con)
    here = sqlnb.calibrate(model, str(binary / "held.parquet"), method, con=con)
    moved = sqlnb.calibrate(model, str(binary / "moved" / "held_out.parquet"), method, con=con)
    other = sqlnb.calibrate(model, str(binary / "other.parquet"), method, con=con)
    assert here.calibration.source != moved.calibration.source  # the path is still recorded and shown
    prints = {what: _fingerprint(m, con, what) for what, m in
              (("here", here), ("moved", moved), ("other", other), ("none", model))}
    assert prints["here"] == prints["moved"]
    assert len({prints["here"], prints["other"], prints["none"]}) == 3
    assert sqlnb.load(con, "moved").calibration.source == moved.calibration.source


def test_the_same_conformal_rows_at_two_paths_give_one_fingerprint(binary):
    from sqlnb.workflows.conformal import conformal

    con = duckdb.connect()
    model = sqlnb.fit(str(binary / "train.parquet"), "y", con=con)
    here = conformal(model, str(binary / "held.parquet"), 0.1, con=con)
    moved = conformal(model, str(binary / "moved" / "held_out.parquet"), 0.1, con=con)
    other = conformal(model, str(binary / "held.parquet"), 0.2, con=con)
    prints = {what: _fingerprint(m, con, what) for what, m in (("here", here), ("moved", moved), ("other", other))}
    assert prints["here"] == prints["moved"] != prints["other"]
