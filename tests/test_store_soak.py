"""Many processes sharing one model store.

* The soak: 6 processes loop, for a few seconds, over the writing and reading commands on
  one model (DuckDB file: fit, update, calibrate, fit+drop of a second name, score,
  evaluate, show, models, sql; PostgreSQL store: fit, fit+drop, score, evaluate, show,
  models). No command may fail; every ``score`` output must be complete and equal to one
  of the model versions the writers saved (each writer also saves what it wrote, under a
  new name, in a file of its own); no temporary file or stranded table is left.
* The wait: a reader that meets a writer holding the file waits for it and succeeds; a
  wait that runs out (set short on purpose) is one ``Error:`` line naming the process
  that holds the store and ``--wait``; the Python API takes ``wait=``.
* PostgreSQL: the store's advisory lock bounds a save's wait the same way, and two fits
  of one new name at once: one wins, the other says the name is taken, in one line.
"""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.errors import SqlnbError
from support.cli import invoke, mixed_table, write_parquet
from support.engines import postgres_engine

#: Seconds each soak process keeps starting commands (after its first two steps: with 7
#: steps, the 6 processes run each at least once).
SOAK_SECONDS = 5
WORKERS = 6
REPO = Path(__file__).resolve().parents[1]

#: One soak process: runs the commands of ``plan`` in turn, in-process (click's runner),
#: starting at its own offset, until the deadline has passed and it has run each once.
#: Every successful save is also written, under a new name, to versions_<worker>.duckdb.
WORKER = textwrap.dedent('''
    import json, sys, time
    from click.testing import CliRunner
    import sqlnb
    from sqlnb.cli import cli
    import sqlnb.cli.io as cli_io

    wid, deadline, plan_file, log_file, versions = sys.argv[1:6]
    wid, deadline = int(wid), float(deadline)
    plan = json.load(open(plan_file))
    saved = []
    original = cli_io.save_model

    def recording_save(m, target, name, replace=False, **kw):
        original(m, target, name, replace, **kw)
        if name == "m":  # the model every reader scores: keep a copy of each version written
            sqlnb.store.save_model(m, versions, f"v{len(saved)}")
            saved.append(name)

    cli_io.save_model = recording_save
    runner = CliRunner()
    with open(log_file, "w") as log:
        k = 0
        while k < 2 or time.time() < deadline:
            for args in plan[(wid + k) % len(plan)]:
                args = [a.replace("{w}", str(wid)) for a in args]
                r = runner.invoke(cli, args, catch_exceptions=True)
                log.write(json.dumps({"args": args, "exit": r.exit_code, "stdout": r.stdout if "score" in args else "",
                                      "stderr": r.stderr, "exception": None if r.exception is None or
                                      isinstance(r.exception, SystemExit) else repr(r.exception)}) + "\\n")
                log.flush()
            k += 1
''')


def _rows(text: str) -> dict:
    """Scored CSV -> {id: (prediction, probabilities)}."""
    out = {}
    for row in csv.DictReader(io.StringIO(text)):
        probs = tuple(float(v) for k, v in sorted(row.items()) if k.startswith("proba_"))
        out[row["id"]] = (row["prediction"], probs)
    return out


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[k][0] == b[k][0] and len(a[k][1]) == len(b[k][1])
        and all(abs(x - y) <= 1e-9 for x, y in zip(a[k][1], b[k][1])) for k in a)


def _soak(tmp_path: Path, plan: list, score_data: str, n_rows: int, env: dict) -> list[dict]:
    """Run the 6 processes; returns every command's record. Checks the score outputs
    against the versions written."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    (tmp_path / "worker.py").write_text(WORKER)
    deadline = time.time() + SOAK_SECONDS
    full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
                    TMPDIR=str(tmp), **env)
    procs = [subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), str(i), str(deadline),
                               str(tmp_path / "plan.json"), str(tmp_path / f"log{i}.jsonl"),
                               str(tmp_path / f"versions{i}.duckdb")], cwd=tmp_path, env=full_env)
             for i in range(WORKERS)]
    for p in procs:
        assert p.wait(timeout=120) == 0
    records = [json.loads(line) for i in range(WORKERS) for line in (tmp_path / f"log{i}.jsonl").open()]
    failed = [r for r in records if r["exit"] != 0 or r["exception"]]
    assert not failed, f"{len(failed)} of {len(records)} commands failed, e.g. {failed[:3]}"
    assert len(records) >= 2 * WORKERS
    assert list(tmp.iterdir()) == []  # no temporary file left (spools, stdin copies)

    # Every score output is one of the versions written, complete (every row once). The
    # versions are scored as needed: the outputs are a few distinct ones, many times each.
    written = [(tmp_path / f"versions{i}.duckdb", name) for i in range(WORKERS)
               if (tmp_path / f"versions{i}.duckdb").exists()
               for name in sqlnb.store.model_names(str(tmp_path / f"versions{i}.duckdb"))]
    assert len(written) >= 2
    scored: dict = {}

    def version(key):
        if key not in scored:
            r = invoke("score", score_data, "--model", f"{key[0]}:{key[1]}", "--keep", "id", "--out", "-")
            assert r.exit_code == 0, r.stderr
            scored[key] = _rows(r.stdout)
        return scored[key]

    outputs = {r["stdout"] for r in records if "score" in r["args"]}
    assert outputs
    for text in outputs:
        got = _rows(text)
        assert len(got) == n_rows and len(text.strip().splitlines()) == n_rows + 1
        assert any(_same(got, version(key)) for key in sorted(written, key=lambda k: k in scored, reverse=True))
    return records


def test_soak_duckdb_file(tmp_path):
    train_a, train_b = mixed_table(200, seed=1), mixed_table(200, seed=2)
    write_parquet(train_a, tmp_path / "a.parquet")
    write_parquet(train_b, tmp_path / "b.parquet")
    write_parquet(mixed_table(120, seed=3), tmp_path / "hold.parquet")
    write_parquet(mixed_table(100, seed=4), tmp_path / "test.parquet")
    m, d = "models.duckdb:m", "models.duckdb:d{w}"  # each process fits and drops a name of its own
    base = ["--exclude", "id"]
    assert invoke("fit", tmp_path / "a.parquet", "-y", "y", *base, "--model", tmp_path / m).exit_code == 0
    plan = [
        [["fit", "a.parquet", "-y", "y", *base, "--model", m, "--replace"]],
        [["score", "test.parquet", "--model", m, "--keep", "id", "--out", "-"]],
        [["update", "b.parquet", "--model", m], ["show", "--model", m]],
        [["evaluate", "test.parquet", "--model", m], ["models", "models.duckdb"]],
        [["calibrate", "hold.parquet", "--model", m], ["sql", "--model", m, "--source", "t"]],
        [["score", "test.parquet", "--model", m, "--keep", "id", "--out", "-"]],
        [["fit", "b.parquet", "-y", "y", *base, "--model", d, "--replace"], ["drop", "--model", d]],
    ]
    records = _soak(tmp_path, plan, str(tmp_path / "test.parquet"), 100, {})
    assert {"fit", "update", "calibrate", "score", "evaluate", "show", "drop"} <= {r["args"][0] for r in records}
    leftovers = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("models.duckdb"))
    assert leftovers == ["models.duckdb"]  # no WAL or temporary file beside it
    # the model tables of the store: those of the live models only
    import duckdb
    with duckdb.connect(str(tmp_path / "models.duckdb"), read_only=True) as con:
        ids = {r[0] for r in con.execute("SELECT id FROM sqlnb.models").fetchall()}
        tables = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                            "WHERE table_schema = 'sqlnb' AND table_name <> 'models'").fetchall()]
    assert tables and all(t.split("_")[1] in ids for t in tables)


@pytest.fixture(scope="module")
def pg_engine():
    """One throw-away PostgreSQL server for the module's tests, with their tables."""
    tables = {"a": mixed_table(200, seed=1), "b": mixed_table(200, seed=2), "test": mixed_table(100, seed=4),
              "train": mixed_table(150)}
    with postgres_engine(tables) as engine:
        yield engine


@pytest.mark.postgres  # a throw-away PostgreSQL server (the module fixture pg_engine)
def test_soak_postgres_store(tmp_path, pg_engine):
    engine = pg_engine
    write_parquet(mixed_table(100, seed=4), tmp_path / "test.parquet")
    pg = ["--engine", "postgres", "--dsn", engine.dsn]
    base = ["--exclude", "id"]
    assert invoke(*pg, "fit", "a", "-y", "y", *base, "--model", "m").exit_code == 0
    plan = [
        [[*pg, "fit", "a", "-y", "y", *base, "--model", "m", "--replace"]],
        [[*pg, "score", "test", "--model", "m", "--keep", "id", "--out", "-"]],
        [[*pg, "evaluate", "test", "--model", "m"], [*pg, "models"]],
        [[*pg, "fit", "b", "-y", "y", *base, "--model", "m", "--replace"]],
        [[*pg, "show", "--model", "m"]],
        [[*pg, "score", "test", "--model", "m", "--keep", "id", "--out", "-"]],
        [[*pg, "fit", "b", "-y", "y", *base, "--model", "d{w}", "--replace"], [*pg, "drop", "--model", "d{w}"]],
    ]
    records = _soak(tmp_path, plan, str(tmp_path / "test.parquet"), 100, {})
    assert {"fit", "score", "evaluate", "show", "drop"} <= {a for r in records for a in r["args"]}
    ids = {r[0] for r in engine.con.execute("SELECT id FROM sqlnb.models").fetchall()}
    names = [r[0] for r in engine.con.execute("SELECT table_name FROM information_schema.tables "
                                              "WHERE table_schema = 'sqlnb' AND table_name <> 'models'")]
    assert names and all(t.split("_")[1] in ids for t in names)  # no stranded parameter table


HOLD = ("import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); print('held', flush=True); "
        "time.sleep(float(sys.argv[2]))")


def _holder(db: Path, seconds: float) -> subprocess.Popen:
    """Another process that opens ``db`` for writing and keeps it for ``seconds``."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(db), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


@pytest.fixture
def fitted(tmp_path):
    write_parquet(mixed_table(150), tmp_path / "train.parquet")
    assert invoke("fit", tmp_path / "train.parquet", "-y", "y", "--model", tmp_path / "m.duckdb:m").exit_code == 0
    return tmp_path


def test_reader_waits_for_a_writer_then_reads(fitted):
    holder = _holder(fitted / "m.duckdb", 1.0)
    try:
        start = time.monotonic()
        r = invoke("show", "--model", fitted / "m.duckdb:m")
        assert r.exit_code == 0, r.stderr
        assert "m (naive_bayes)" in r.stdout and time.monotonic() - start >= 0.5
    finally:
        holder.kill()
        holder.wait()


def test_writer_waits_for_a_writer(fitted):
    holder = _holder(fitted / "m.duckdb", 1.0)
    try:
        r = invoke("--wait", "20", "fit", fitted / "train.parquet", "-y", "y", "--model", fitted / "m.duckdb:m2")
        assert r.exit_code == 0, r.stderr
    finally:
        holder.kill()
        holder.wait()
    assert {m["name"] for m in sqlnb.list_models(str(fitted / "m.duckdb"))} == {"m", "m2"}


@pytest.mark.parametrize("command", [["show", "--model", "{db}:m"],
                                     ["fit", "{dir}/train.parquet", "-y", "y", "--model", "{db}:n"],
                                     ["drop", "--model", "{db}:m"],
                                     ["score", "{dir}/train.parquet", "--model", "{db}:m", "--out", "-"]])
def test_wait_runs_out_in_one_line(fitted, command):
    db = fitted / "m.duckdb"
    holder = _holder(db, 30)
    try:
        start = time.monotonic()
        r = invoke("--wait", "0.3", *[a.format(db=db, dir=fitted) for a in command])
        took = time.monotonic() - start
    finally:
        holder.kill()
        holder.wait()
    assert r.exit_code == 75 and r.stdout == ""  # busy (EX_TEMPFAIL): the same command can succeed later
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: database "), r.stderr
    assert f"(PID {holder.pid}: " in lines[0] and "import duckdb" in lines[0]  # the holder's command line
    assert "stayed locked for the 0.3 s" in lines[0] and "--wait SECONDS" in lines[0]
    assert 0.3 <= took < 10
    assert {m["name"] for m in sqlnb.list_models(str(db))} == {"m"}  # nothing written


def test_python_api_wait(fitted):
    db = str(fitted / "m.duckdb")
    holder = _holder(fitted / "m.duckdb", 30)
    try:
        with pytest.raises(SqlnbError, match=rf"PID {holder.pid}: .*0\.2 s"):
            sqlnb.load(db, "m", wait=0.2)
        with pytest.raises(SqlnbError, match="stayed locked"):
            sqlnb.connect(db, wait=0)
        with pytest.raises(SqlnbError, match="wait must be a number of seconds"):
            sqlnb.load(db, "m", wait=-1)
    finally:
        holder.kill()
        holder.wait()
    assert sqlnb.load(db, "m", wait=0).name == "m"


def test_wait_option_is_checked():
    r = invoke("--wait", "-1", "models", "x.duckdb")
    assert r.exit_code == 2 and "Invalid value for '--wait'" in r.stderr and "range" in r.stderr, r.stderr


@pytest.mark.postgres  # a throw-away PostgreSQL server (the module fixture pg_engine)
def test_postgres_lock_bounds_the_wait_and_one_fit_of_a_name_wins(pg_engine):
    import psycopg
    from sqlnb.store.postgres import LOCK_KEY

    engine = pg_engine
    pg = ["--engine", "postgres", "--dsn", engine.dsn]
    assert invoke(*pg, "fit", "train", "-y", "y", "--model", "locked").exit_code == 0
    with psycopg.connect(engine.dsn) as other:  # another session writing the store
        other.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
        backend = other.info.backend_pid
        r = invoke("--wait", "0.3", *pg, "fit", "train", "-y", "y", "--model", "locked", "--replace")
        assert r.exit_code == 75, r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and f"backend PID {backend}" in lines[0] and "--wait SECONDS" in lines[0]
        r = invoke("--wait", "0.3", *pg, "show", "--model", "locked")
        assert r.exit_code == 75 and "being written by another session" in r.stderr
        other.rollback()
    assert invoke("--wait", "0.3", *pg, "show", "--model", "locked").exit_code == 0

    # Two fits of one new name at once, without --replace: one wins, the other one line.
    env = dict(os.environ, PYTHONPATH=str(REPO))
    procs = [subprocess.Popen([sys.executable, "-m", "sqlnb", *pg, "fit", "train", "-y", "y", "--model", "same"],
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    results = sorted((p.wait(timeout=120), p.stderr.read()) for p in procs)
    assert [code for code, _ in results] == [0, 2], results
    lines = results[1][1].strip().splitlines()  # found the name taken, at its start or at its save
    assert len(lines) == 1 and "model 'same' already exists" in lines[0], results[1][1]
    assert [m["name"] for m in sqlnb.list_models(engine)].count("same") == 1


def test_a_save_over_a_model_read_before_refuses_a_model_replaced_since(fitted):
    from sqlnb.store.catalog import ModelChanged

    db = str(fitted / "m.duckdb")
    m = sqlnb.load(db, "m")
    sqlnb.load(db, "m").save(db, "m", replace=True)  # another process saves m meanwhile
    with pytest.raises(ModelChanged, match="'m' in this database was replaced by another process"):
        sqlnb.store.save_model(m, db, "m", replace=True, expect=m.stored_id)
    sqlnb.drop(db, "m")
    with pytest.raises(ModelChanged, match="was dropped"):
        sqlnb.store.save_model(m, db, "m", replace=True, expect=m.stored_id)


def test_update_redoes_its_change_over_a_model_saved_meanwhile(fitted, monkeypatch):
    """``update`` reads MODEL, scans DATA, saves: a save by another process in between
    is not overwritten (its rows would be lost); the update runs again over it."""
    import sqlnb.cli.generative as gen

    db = str(fitted / "m.duckdb")
    write_parquet(mixed_table(40, seed=7), fitted / "more.parquet")
    real, calls = gen.update_model, []

    def update_while_another_saves(m, source, **kw):
        if not calls:
            merged = real(sqlnb.load(db, "m"), str(fitted / "more.parquet"))  # 150 + 40 rows
            merged.save(db, "m", replace=True)
        calls.append(m.stats.n_rows)
        return real(m, source, **kw)

    monkeypatch.setattr(gen, "update_model", update_while_another_saves)
    r = invoke("update", fitted / "train.parquet", "--model", f"{db}:m")
    assert r.exit_code == 0, r.stderr
    assert calls == [150, 190]
    assert sqlnb.load(db, "m").stats.n_rows == 190 + 150  # the other save's rows, and this update's


def test_a_redone_change_prints_its_notes_once(fitted, monkeypatch):
    """An update redone over a model saved meanwhile says "calibrator dropped" once, for
    the attempt that was saved, not once per attempt."""
    import sqlnb.cli.generative as gen

    db = str(fitted / "m.duckdb")
    assert invoke("calibrate", fitted / "train.parquet", "--model", f"{db}:m").exit_code == 0
    real, calls = gen.update_model, []

    def update_while_another_saves(m, source, **kw):
        calls.append(1)
        if len(calls) <= 2:
            sqlnb.load(db, "m").save(db, "m", replace=True)  # another process saves m meanwhile
        return real(m, source, **kw)

    monkeypatch.setattr(gen, "update_model", update_while_another_saves)
    r = invoke("update", fitted / "train.parquet", "--model", f"{db}:m")
    assert r.exit_code == 0 and len(calls) == 3, r.stderr
    assert r.stderr.count("calibrator") == 1, r.stderr


def test_a_change_overtaken_more_than_five_times_goes_on_while_the_wait_lasts(fitted, monkeypatch):
    """A burst of saves by other processes (CI's soak: 6 writers, one calibrate overtaken
    5 times in a row) delays ``calibrate`` instead of failing it; with ``--wait 0`` it
    stops after 5 attempts, in one line that says so and names --wait."""
    import sqlnb.cli.generative as gen

    db = str(fitted / "m.duckdb")
    real, calls = gen.update_model, []

    def overtaken(times):
        def update_while_another_saves(m, source, **kw):
            calls.append(m.stored_id)
            if len(calls) <= times:
                sqlnb.load(db, "m").save(db, "m", replace=True)  # another process saves m meanwhile
            return real(m, source, **kw)
        return update_while_another_saves

    monkeypatch.setattr(gen, "update_model", overtaken(7))
    r = invoke("update", fitted / "train.parquet", "--model", f"{db}:m")
    assert r.exit_code == 0, r.stderr
    assert len(calls) == 8 and len(set(calls)) == 8  # each attempt read the model saved meanwhile
    assert sqlnb.load(db, "m").stats.n_rows == 300

    calls.clear()
    monkeypatch.setattr(gen, "update_model", overtaken(100))
    r = invoke("--wait", "0", "update", fitted / "train.parquet", "--model", f"{db}:m")
    assert r.exit_code == 75 and len(calls) == 5
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "was replaced by another process while this command worked on it, 5 times in" in lines[0]
    assert "--wait SECONDS" in lines[0]
    assert sqlnb.load(db, "m").stats.n_rows == 300  # nothing half-written


FLOCK = ("import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX); "
         "print('held', flush=True); time.sleep(float(sys.argv[2]))")


def test_a_spark_warehouse_directory_is_held_by_one_process_and_the_others_queue(tmp_path):
    """A local Spark warehouse's Derby metastore admits one process: a second one waits
    for the directory's lock (taken before the session starts), bounded by the wait."""
    from sqlnb.engines.waiting import hold_directory

    p = subprocess.Popen([sys.executable, "-c", FLOCK, str(tmp_path), "30"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        with pytest.raises(SqlnbError, match=rf"the Spark warehouse directory '.*' is in use by another process "
                                             rf"\(PID {p.pid}: .*import fcntl.*\) and stayed so for the 0.3 s"):
            hold_directory(str(tmp_path), "the Spark warehouse directory", wait=0.3)
    finally:
        p.kill()
        p.wait()
    p = subprocess.Popen([sys.executable, "-c", FLOCK, str(tmp_path), "0.5"], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "held"
        start = time.monotonic()
        fd = hold_directory(str(tmp_path), "the Spark warehouse directory", wait=30)  # waits for the release
        assert fd is not None and time.monotonic() - start >= 0.2
        os.close(fd)
    finally:
        p.wait()
    assert os.listdir(tmp_path) == []  # the lock is on the directory: no lock file


def test_a_failed_save_keeps_a_models_file_another_process_created_meanwhile(tmp_path, monkeypatch):
    """The file is missing when ``fit`` starts; another process creates it with its model
    while this fit waits; this fit then fails (the name is taken): the file stays."""
    from sqlnb.cli.app import Settings

    write_parquet(mixed_table(150), tmp_path / "train.parquet")
    db = tmp_path / "m.duckdb"
    real, created = Settings.connect, []

    def another_process_first(self, path=None, read_only=False):
        if path is not None and not created:
            created.append(subprocess.run(
                [sys.executable, "-m", "sqlnb", "fit", str(tmp_path / "train.parquet"), "-y", "y", "--model",
                 f"{db}:m"], env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True).returncode)
        return real(self, path, read_only)

    monkeypatch.setattr(Settings, "connect", another_process_first)
    r = invoke("fit", tmp_path / "train.parquet", "-y", "y", "--model", f"{db}:m")
    assert created == [0]
    assert r.exit_code == 2 and "model 'm' already exists" in r.stderr, r.stderr
    assert db.exists() and [m["name"] for m in sqlnb.list_models(str(db))] == ["m"]
