"""``sqlnb dbt --train``: a model's statistics counted by incremental dbt models, its
log-parameters derived in SQL, scored by the package's macro and read back by
``sqlnb dbt-import``; run under dbt as a user runs it (``dbt build`` in a process), on
DuckDB and on PostgreSQL.

Two models share one project: ``mixed`` (Gaussian, multinomial, categorical and Bernoulli
columns, with NULLs, pseudo-count 0.7, a variance floor of 1e-4; trained with a loaded-at
column) and ``comp`` (complement, Gaussian with a tied variance, categorical with an unseen
bucket, a Dirichlet class prior; trained from a batch table). The scored rows hold values
no batch had. After each ``dbt build`` (the first batch; the second batch through the
incremental models; ``--full-refresh``) the macro's probabilities and those of the imported
model equal ``sqlnb fit`` on the same rows within 1e-9, and the predictions are the same.
Bad input (a NULL label, a new class, a negative count, a column of another type) fails a
test of the package, or compiles to an error naming the column, and leaves the statistics
as they were.

dbt costs seconds per start, so each engine's runs share one module-scoped project:
DuckDB five ``dbt build`` runs, PostgreSQL four and a ``dbt run``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess

import duckdb
import numpy as np
import pytest

import sqlnb
from sqlnb.workflows import dbt_params, dbt_train
from support import doc_blocks as db
from support.cli import invoke
from support.dbt import (dbt_executable as _dbt, postgres_build, postgres_trained, results as _results,
                         run as _run)

CLASSES = ["bronze", "gold", "silver"]
FITS = {
    "mixed": dict(exclude=["id", "loaded_at", "views"], alpha=0.7, var_smoothing=1e-4,
                  feature_kinds={"clicks": "multinomial", "has_app": "bernoulli", "score": "bernoulli",
                                 "tier": "categorical"}, binarize={"score": 0.5}),
    "comp": dict(features=["clicks", "views", "income", "region"], tied_variance=True, unseen="bucket",
                 norm=True, class_prior="dirichlet", prior_alpha=2.0,
                 feature_kinds={"clicks": "complement", "views": "complement"}),
}
TRAIN_TABLE = {"mixed": "train", "comp": "comp_batch"}
VARS = json.dumps({"sqlnb_mixed_train_table": "train", "sqlnb_comp_train_table": "comp_batch"})


def _batch(con: duckdb.DuckDBPyConnection, n: int, seed: int, start: int, day: int) -> str:
    """The SQL of a batch of labelled rows: Gaussian, count, categorical and boolean
    columns with NULLs; each batch has a region the others lack."""
    con.sql(f"SELECT setseed({seed / 100})").fetchall()
    regions = ["north", "south", "east", ["west", "coast", "inland"][seed % 3]]
    return f"""
        SELECT i AS id, {day} AS loaded_at,
               {CLASSES}[1 + (i * 7 + floor(random() * 2)::INT) % 3] AS segment,
               CASE WHEN i % 17 = 0 THEN NULL ELSE 20 + random() * 50 + (i % 3) * 8 END AS age,
               1000 * (1 + random()) * (1 + i % 3) AS income,
               CASE WHEN i % 13 = 0 THEN NULL ELSE floor(random() * 5 + i % 3)::INT END AS clicks,
               floor(random() * 4 + (i % 3 = 2)::INT * 3)::INT AS views,
               CASE WHEN i % 11 = 0 THEN NULL ELSE {regions}[1 + (i // 2 + floor(random() * 2)::INT) % 4] END AS region,
               1 + (i + floor(random() * 2)::INT) % 3 AS tier,
               (i % 3 = 1) OR random() < 0.2 AS has_app,
               CASE WHEN i % 7 = 0 THEN NULL ELSE random() + (i % 3) * 0.2 END AS score
        FROM range({start}, {start + n}) r(i)"""


def _table(con, name: str, query: str) -> None:
    con.execute(f"CREATE OR REPLACE TABLE {name} AS {query}")


def _fitted(con, name: str, tables: list[str]):
    union = " UNION ALL ".join(f"SELECT * FROM {t}" for t in tables)
    return sqlnb.fit(f"SELECT * FROM ({union})", "segment", con=con, **FITS[name])


def _probabilities(rows) -> tuple[np.ndarray, list]:
    rows = sorted(rows, key=lambda r: r[0])
    return np.array([[float(v) for v in r[1:1 + len(CLASSES)]] for r in rows]), [r[-1] for r in rows]


def _want(con, name: str, tables: list[str]):
    """``sqlnb fit`` on ``tables`` and its scores of ``customers``."""
    model = _fitted(con, name, tables)
    return _probabilities(model.score("customers", con, keep=["id"]).fetchall())


def _close(got, want, what: str) -> None:
    (gp, gpred), (wp, wpred) = got, want
    assert gp.shape == wp.shape and gp.shape[0] > 0, what
    assert np.max(np.abs(gp - wp)) <= 1e-9, (what, float(np.max(np.abs(gp - wp))))
    assert gpred == wpred, what


@pytest.fixture(scope="module")
def duck(tmp_path_factory):
    """A DuckDB warehouse with three batches and rows to score, both models fitted on the
    first batch and stored in it, and the project: ``--project --train --loaded-at`` for
    ``mixed``, the package ``--train`` (a batch table) for ``comp``, and a model per
    package scoring ``customers`` with the trained macro."""
    dbt = _dbt()
    tmp = tmp_path_factory.mktemp("dbt_train")
    wh = tmp / "wh.duckdb"
    con = duckdb.connect(str(wh))
    _table(con, "b1", _batch(con, 240, 1, 0, 1))
    _table(con, "b2", _batch(con, 160, 2, 1000, 2))
    _table(con, "customers", _batch(con, 120, 3, 5000, 9))
    _table(con, "train", "SELECT * FROM b1")
    _table(con, "comp_batch", "SELECT * FROM b1")
    for name in FITS:
        _fitted(con, name, ["b1"]).save(con, name)
    con.close()
    out = tmp / "project"
    made = invoke("dbt", "--model", f"{wh}:mixed", "--out", out, "--project", "--table", "customers", "--train",
                  "--loaded-at", "loaded_at")
    assert made.exit_code == 0, made.stderr
    made = invoke("dbt", "--model", f"{wh}:comp", "--out", out / "dbt_packages" / "sqlnb_comp", "--train")
    assert made.exit_code == 0, made.stderr
    for name in FITS:
        (out / "models" / f"{name}_trained.sql").write_text(
            "{{ config(materialized='table') }}\n"
            f"{{{{ sqlnb_{name}.score_{name}_trained(source('sqlnb_mixed', 'input'), columns=['id']) }}}}\n")
    return dbt, tmp, wh, out


def _build(dbt, out, *extra, ok=True) -> subprocess.CompletedProcess:
    return _run([dbt, "build", "--profiles-dir", ".", "--vars", VARS, *extra], out, f"dbt build {extra}", ok=ok)


def _check_duckdb(wh, tables: dict[str, list[str]], what: str) -> None:
    """Both models' macro scores and imported models equal sqlnb fit on ``tables``."""
    for name, batches in tables.items():
        done = invoke("dbt-import", "--model", f"{wh}:{name}", "--as", f"{name}_dbt", "--replace")
        assert done.exit_code == 0, done.stderr
        con = duckdb.connect(str(wh))
        want = _want(con, name, batches)
        got = _probabilities(con.sql(f"SELECT id, {', '.join('proba_' + c for c in CLASSES)}, prediction "
                                     f"FROM {name}_trained").fetchall())
        _close(got, want, f"{what}: score_{name}_trained")
        imported = sqlnb.load(con, f"{name}_dbt")
        _close(_probabilities(imported.score("customers", con, keep=["id"]).fetchall()), want,
               f"{what}: sqlnb dbt-import of {name}")
        con.close()


def _statistics(wh) -> dict:
    con = duckdb.connect(str(wh), read_only=True)
    out = {t: sorted(con.sql(f"SELECT * FROM {t}").fetchall(), key=repr) for (t,) in con.sql(
        "SELECT table_name FROM information_schema.tables WHERE regexp_matches(table_name, "
        "'^(mixed|comp)_(classes|moments|sums|counts_[0-9]+)$') ORDER BY 1").fetchall()}
    con.close()
    return out


@pytest.mark.slow
def test_dbt_trains_incrementally_and_from_scratch_as_sqlnb_fit_on_duckdb(duck):
    """(a) the first batch; (b) the second through the incremental models (mixed: new
    loaded-at values in the same table; comp: the batch table replaced); (c) a full
    refresh (comp's batch table then holds both batches): each equals sqlnb fit."""
    dbt, tmp, wh, out = duck
    _build(dbt, out)
    assert set(_results(out).values()) == {"success", "pass"}
    _check_duckdb(wh, {"mixed": ["b1"], "comp": ["b1"]}, "first batch")
    shown = invoke("show", "--model", f"{wh}:mixed_dbt")
    assert shown.exit_code == 0 and "240 rows" in shown.stdout.replace(",", ""), shown.stdout

    con = duckdb.connect(str(wh))
    con.execute("INSERT INTO train SELECT * FROM b2")
    _table(con, "comp_batch", "SELECT * FROM b2")
    con.close()
    _build(dbt, out)
    _check_duckdb(wh, {"mixed": ["b1", "b2"], "comp": ["b1", "b2"]}, "incremental")
    again = _statistics(wh)
    _build(dbt, out, "--select", "mixed_classes mixed_moments")  # no new rows: nothing changes
    assert _statistics(wh) == again

    con = duckdb.connect(str(wh))
    _table(con, "comp_batch", "SELECT * FROM b1 UNION ALL SELECT * FROM b2")
    con.close()
    _build(dbt, out, "--full-refresh")
    _check_duckdb(wh, {"mixed": ["b1", "b2"], "comp": ["b1", "b2"]}, "full refresh")
    for cmd in (["evaluate", f"{wh}:customers"], ["sql"]):
        done = invoke(*cmd, "--model", f"{wh}:mixed_dbt")
        assert done.exit_code == 0, done.stderr


@pytest.mark.slow
def _bad(con) -> str:
    """A batch with a NULL label, a class the model lacks and a negative count."""
    return (f"SELECT * REPLACE (CASE WHEN id = 9000 THEN NULL WHEN id = 9001 THEN 'platinum' ELSE segment END "
            f"AS segment, CASE WHEN id = 9002 THEN -3 ELSE clicks END AS clicks) FROM ({_batch(con, 20, 4, 9000, 3)})")


def _retyped(con) -> str:
    """A batch whose ``income`` is text."""
    return f"SELECT * REPLACE (CAST(income AS VARCHAR) AS income) FROM ({_batch(con, 20, 5, 9500, 4)})"


def _assert_bad_batch_failed(status: dict, stdout: str, names=tuple(FITS)) -> None:
    """The source tests :func:`_bad`'s rows fail, and the training models they guard skipped
    (of the models ``names``)."""
    for name in names:
        source = f"sqlnb_{name}_train_rows"
        assert status[f"source_not_null_{source}_segment"] == "fail", stdout[-3000:]
        assert status[f"source_accepted_values_{source}_segment__bronze__gold__silver"] == "fail"
        assert status[f"source_sqlnb_{name}_values_{source}_"] == "fail"
        assert status[f"{name}_classes"] == "skipped"


def test_bad_batches_fail_the_packages_tests_and_leave_the_statistics(duck):
    """A NULL label, a class the model lacks and a negative count (or a NaN) fail source tests,
    so dbt skips the training models; a column of another type is a compile error naming
    the column and the cast. The statistics stay those of the rows before."""
    dbt, tmp, wh, out = duck
    _build(dbt, out)  # whatever ran before: the statistics of the rows in the tables
    before = _statistics(wh)
    con = duckdb.connect(str(wh))
    bad = _bad(con)
    con.execute(f"INSERT INTO train {bad}")
    _table(con, "comp_batch", bad)
    con.close()
    failed = _build(dbt, out, ok=False)
    assert failed.returncode != 0
    _assert_bad_batch_failed(_results(out), failed.stdout)
    assert _statistics(wh) == before

    con = duckdb.connect(str(wh))
    _table(con, "comp_batch", _retyped(con))
    con.close()
    failed = _run([dbt, "run", "--profiles-dir", ".", "--vars", VARS, "--select", "comp_classes"], out,
                  "dbt run over a changed type", ok=False)
    assert failed.returncode != 0
    assert "column income of" in failed.stdout and "cast it to DOUBLE" in failed.stdout, failed.stdout[-3000:]
    assert _statistics(wh) == before


def test_train_refuses_models_it_cannot_count_in_one_line(tmp_path):
    con = duckdb.connect(str(tmp_path / "m.duckdb"))
    con.execute(f"CREATE TABLE t AS {_batch(con, 60, 1, 0, 1)}")
    sqlnb.fit("t", "segment", con=con, exclude=["id", "loaded_at"], structure="tan+kdb:1", bins="mdl").save(con, "tree")
    sqlnb.fit("t", "segment", con=con, exclude=["id", "loaded_at"], structure="kdb:3", bins="mdl").save(con, "cuts")
    con.close()
    for name, says in (("tree", "structure 'tan+kdb:1'"), ("cuts", "structure 'kdb:3'")):
        done = invoke("dbt", "--model", f"{tmp_path / 'm.duckdb'}:{name}", "--out", tmp_path / name, "--train")
        assert done.exit_code == 2 and says in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert not (tmp_path / name).exists()
    done = invoke("dbt", "--model", f"{tmp_path / 'm.duckdb'}:cuts", "--out", tmp_path / "x", "--loaded-at", "id")
    assert done.exit_code == 2 and "--train" in done.stderr
    done = invoke("dbt-import", "--model", f"{tmp_path / 'm.duckdb'}:cuts", "--as", "x")
    assert done.exit_code == 2 and "structure 'kdb:3'" in done.stderr
    con = duckdb.connect(str(tmp_path / "m.duckdb"))
    sqlnb.fit("t", "segment", con=con, exclude=["id", "loaded_at"]).save(con, "plain")
    con.close()
    done = invoke("dbt-import", "--model", f"{tmp_path / 'm.duckdb'}:plain", "--as", "x")
    assert done.exit_code == 2 and "plain_classes" in done.stderr and "dbt build" in done.stderr, done.stderr


@pytest.mark.postgres
def test_dbt_trains_incrementally_and_from_scratch_as_sqlnb_fit_on_postgres(duck):
    """The same project on dbt-postgres: the first batch, the second through the
    incremental models, a full refresh; the macro's scores and the model sqlnb dbt-import
    reads from PostgreSQL equal sqlnb fit's. Then the bad batches of the DuckDB test fail
    the same tests there and leave the statistics."""
    from support.engines import postgres_engine

    dbt, tmp, wh, out = duck
    con = duckdb.connect(str(wh))
    tables = {t: con.sql(f"SELECT * FROM {t}").to_arrow_table() for t in ("b1", "b2", "customers")}
    bad, retyped = con.sql(_bad(con)).to_arrow_table(), con.sql(_retyped(con)).to_arrow_table()
    models = {name: _fitted(con, name, ["b1"]) for name in FITS}
    con.close()
    with postgres_engine({**tables, "train": tables["b1"], "comp_batch": tables["b1"]}) as pg:
        for name, model in models.items():
            model.save(pg, name)
        (tmp / "pg").mkdir(exist_ok=True)
        build = postgres_build(dbt, out, tmp / "pg", "sqlnb_mixed_example", pg.dsn, VARS)
        import psycopg

        def check(batches: list[str], what: str) -> None:
            d = duckdb.connect(str(wh), read_only=True)
            for name in FITS:
                want = _want(d, name, batches)
                trained, imported = postgres_trained(pg.dsn, name, CLASSES, tmp / f"pg_{name}.parquet")
                _close(_probabilities(trained), want, f"{what}: postgres score_{name}_trained")
                _close(_probabilities(imported), want, f"{what}: postgres sqlnb dbt-import of {name}")
            d.close()

        build()
        check(["b1"], "first batch")
        with psycopg.connect(pg.dsn) as c:
            c.execute("INSERT INTO train SELECT * FROM b2")
            c.execute("DROP TABLE comp_batch")
            c.execute("CREATE TABLE comp_batch AS SELECT * FROM b2")
        build()
        check(["b1", "b2"], "incremental")
        with psycopg.connect(pg.dsn) as c:
            c.execute("INSERT INTO comp_batch SELECT * FROM b1")
        build("--full-refresh")
        check(["b1", "b2"], "full refresh")

        # bad input, as on DuckDB: failed source tests skip the training models; a column
        # of another type is a compile error naming it; the statistics stay as they were
        before = _pg_statistics(pg.dsn)
        pg.write_table("bad", bad)
        pg.write_table("retyped", retyped)
        with psycopg.connect(pg.dsn) as c:
            c.execute("INSERT INTO train SELECT * FROM bad")
            c.execute("DROP TABLE comp_batch")
            c.execute("CREATE TABLE comp_batch AS SELECT * FROM bad")
        failed = build(ok=False)
        assert failed.returncode != 0
        _assert_bad_batch_failed(_results(build.project), failed.stdout)
        assert _pg_statistics(pg.dsn) == before
        with psycopg.connect(pg.dsn) as c:
            c.execute("DROP TABLE comp_batch")
            c.execute("CREATE TABLE comp_batch AS SELECT * FROM retyped")
        failed = build("--select", "comp_classes", ok=False, command="run")
        assert failed.returncode != 0
        assert "column income of" in failed.stdout and "cast it to DOUBLE" in failed.stdout, failed.stdout[-3000:]
        assert _pg_statistics(pg.dsn) == before


def _pg_statistics(dsn: str) -> dict:
    """The statistics tables dbt-postgres built (``_statistics``'s, on the server of ``dsn``)."""
    import psycopg

    with psycopg.connect(dsn) as c:
        names = [t for (t,) in c.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name ~ "
            "'^(mixed|comp)_(classes|moments|sums|counts_[0-9]+)$' ORDER BY 1").fetchall()]
        return {t: sorted(c.execute(f'SELECT * FROM public."{t}"').fetchall(), key=repr) for t in names}


# -- the package's SQL without dbt: every hyperparameter setting ----------------------------------------

#: Hyperparameters the parameter model derives under (with FITS' columns of ``mixed``, or ``comp``'s).
SETTINGS = [
    ("mixed", dict(estimator="map", alpha=2.0)),
    ("mixed", dict(estimator="mle")),
    ("mixed", dict(class_prior="uniform", beta=(0.5, 2.0))),
    ("mixed", dict(class_prior={"bronze": 0.5, "gold": 0.3, "silver": 0.2}, feature_alpha={"region": 3.0, "clicks": 0.2})),
    ("mixed", dict(var_smoothing=0.5, unseen="bucket")),
    ("comp", dict(norm=False, tied_variance=False, prior_alpha={"bronze": 1.0, "gold": 5.0, "silver": 0.5})),
]


def _rendered(text: str, **names) -> str:
    """A macro body as dbt renders it, with the relations named by ``names``."""
    import jinja2

    class Adapter:
        @staticmethod
        def quote(c: str) -> str:
            return '"' + c.replace('"', '""') + '"'

    return jinja2.Environment().from_string(text).render(
        source=lambda package, table: '"rows"', ref=lambda n: f'"{n}"', this=names.get("this"),
        relation=names.get("relation"), columns=["id"], adapter=Adapter)


def _train_in_duckdb(con, model, batches: list[str]) -> None:
    """The training models' SQL run as dbt runs them (first the full branch over the first
    batch, then the incremental branch over each later one, merged by delete+insert), and
    the parameter tables built from them, in ``con``; the rows are the view ``rows``."""
    for i, batch in enumerate(batches):
        con.execute(f"CREATE OR REPLACE VIEW rows AS SELECT * FROM {batch}")
        for part in dbt_train._parts(model):
            table = f"m_{part}"
            query = _rendered(dbt_train.statistics_sql(model, "m", part, "duckdb", None, i > 0), this=f'"{table}"')
            if i == 0:
                con.execute(f'CREATE TABLE "{table}" AS {query}')
                continue
            keys = ", ".join(f'"{k}"' for k in dbt_train._keys(part))
            con.execute(f'CREATE TEMP TABLE merged AS {query}')
            con.execute(f'DELETE FROM "{table}" WHERE ({keys}) IN (SELECT ({keys}) FROM merged)')
            con.execute(f'INSERT INTO "{table}" SELECT * FROM merged')
            con.execute("DROP TABLE merged")
    for table, body in dbt_params.derived(model, "m"):
        con.execute(f'CREATE TABLE "{table}" AS {_rendered(body("duckdb"))}')


@pytest.mark.parametrize("name,setting", SETTINGS, ids=[f"{n}-{'-'.join(s)}" for n, s in SETTINGS])
def test_the_parameter_tables_score_as_sqlnb_under_each_setting(name, setting):
    """Two batches through the training SQL (the second merged as an incremental run does),
    the parameters derived in SQL, the trained macro's SELECT: sqlnb fit's probabilities on
    both batches within 1e-9, and the model dbt-import reads from the tables scores alike."""
    con = duckdb.connect()
    _table(con, "b1", _batch(con, 240, 1, 0, 1))
    _table(con, "b2", _batch(con, 160, 2, 1000, 2))
    _table(con, "customers", _batch(con, 120, 3, 5000, 9))
    fits = {**FITS[name], **setting}
    model = sqlnb.fit("b1", "segment", con=con, **fits)
    _train_in_duckdb(con, model, ["b1", "b2"])
    refit = sqlnb.fit("SELECT * FROM b1 UNION ALL SELECT * FROM b2", "segment", con=con, **fits)
    want = _probabilities(refit.score("customers", con, keep=["id"]).fetchall())
    select = _rendered(dbt_params.scoring_sql(model, "m", "duckdb"), relation='"customers"')
    got = _probabilities([(r[0], *r[1:1 + len(CLASSES)], r[-1]) for r in con.sql(select).fetchall()])
    _close(got, want, f"score_m_trained under {setting}")
    imported = dbt_train.import_model(model, con, "m")
    _close(_probabilities(imported.score("customers", con, keep=["id"]).fetchall()), want, f"dbt-import under {setting}")
    con.close()


def test_the_values_test_names_each_column_the_fit_would_refuse():
    """The package's source test ``sqlnb_mixed_values`` (its SQL run in DuckDB): a NaN in a
    Gaussian column, an infinity in a Bernoulli one and a negative count each give a row
    naming the column and the fix; finite values and NULLs give none."""
    con = duckdb.connect()
    _table(con, "b1", _batch(con, 240, 1, 0, 1))
    model = sqlnb.fit("b1", "segment", con=con, **FITS["mixed"])
    _table(con, "rows", "SELECT * REPLACE (CASE WHEN id = 3 THEN 'nan'::DOUBLE ELSE age END AS age, "
                        "CASE WHEN id = 5 THEN -1 ELSE clicks END AS clicks, "
                        "CASE WHEN id = 8 THEN 'inf'::DOUBLE ELSE score END AS score) FROM b1")
    body = dbt_train._values_test(model, "duckdb")
    problems = sorted(r[0] for r in con.sql(body.replace("{{ model }}", '"rows"')).fetchall())
    assert problems == ["column age holds NaN or an infinite value; replace them with NULL in the source to count "
                        "them as missing",
                        "column clicks has a negative count; kind multinomial needs counts >= 0: fix the rows, or fit "
                        "the model with --feature-kind clicks=gaussian",
                        "column score holds NaN or an infinite value; replace them with NULL in the source to count "
                        "them as missing"], problems
    con.close()


# -- docs/dbt.md's daily project, built by dbt -------------------------------------------------------

DOC = db.REPO / "docs" / "dbt.md"
#: dbt's run-dependent text: the clock at the start of a line, each node's seconds.
DBT_NORMALISE = ((re.compile(r"^\d\d:\d\d:\d\d\s+"), ""), (re.compile(r" in \d+\.\d+s\]"), " in <SECONDS>s]"))


def _normalise(lines: list[str], tmp: str) -> list[str]:
    out = []
    for line in db.normalise(lines, tmp):
        for pattern, repl in DBT_NORMALISE:
            line = pattern.sub(repl, line)
        out.append(line)
    return out


@pytest.mark.slow
def test_the_daily_project_of_the_docs_builds_and_trains_as_shown(tmp_path):
    """docs/dbt.md's session ``dbt-train`` (tests/test_docs.py runs it too), then its block
    that runs dbt: what each command prints is what the page shows (SQLNB_DOCS_UPDATE=1
    writes it there; review the diff)."""
    dbt = _dbt()
    blocks = db.parse_markdown(DOC)
    session = [b for b in blocks if b.session == "dbt-train" and b.is_session]
    shown = [b for b in blocks if b.not_run and "tests/test_dbt_train.py" in b.not_run]
    assert session and len(shown) == 1
    block = shown[0]
    dbt_commands = db.parse_commands(block.body, block.line + 1)  # a block not run is not parsed into commands
    assert dbt_commands
    commands = [c for b in session for c in b.commands] + dbt_commands
    work, env = db.prepare(tmp_path)
    env.update(PATH=f"{env['PATH'].split(os.pathsep)[0]}{os.pathsep}{os.path.dirname(dbt)}{os.pathsep}"
               f"{env['PATH']}", DBT_SEND_ANONYMOUS_USAGE_STATS="false", DO_NOT_TRACK="1", DBT_USE_COLORS="false")
    proc = subprocess.run(["bash", "-c", db.session_script(commands)], cwd=work, env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=900)
    outputs = db.split_output(proc.stdout, len(commands))[-len(dbt_commands):]
    if os.environ.get("SQLNB_DOCS_UPDATE"):
        lines = DOC.read_text().split("\n")
        body = [x for c, out in zip(dbt_commands, outputs) for x in ["$ " + c.text, *out]]
        start = block.line  # the fence's line (1-based): the body follows it
        lines[start:start + len(block.body)] = body
        DOC.write_text("\n".join(lines))
        return
    for c, out in zip(dbt_commands, outputs):
        problem = db.mismatch(c, _normalise(c.output, str(work)), _normalise(out, str(work)), block)
        assert problem is None, problem
