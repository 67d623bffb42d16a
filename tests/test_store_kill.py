"""kill -9 at any moment of a writing command leaves every model old or new, and nothing else.

A matrix of writing commands x kill points. Each command runs as a
real process, forked from a server that has imported sqlnb (``multiprocessing``'s
forkserver: a fork costs milliseconds, where a fresh interpreter costs a second), with the
test hook ``SQLNB_TEST_KILL_AT=<point>`` (:func:`sqlnb.crash.kill_point`): the process
SIGKILLs itself there, as ``kill -9`` would end it (no ``finally``, no ``atexit``). The
points are those of every write:

* a model's save: ``save:begin`` (before the transaction), ``save:part`` (after its first
  table), ``save:commit`` (before the commit), ``save:committed`` (after it, before the
  connection is closed and, on Spark, before the old tables are dropped);
* a drop: ``drop:begin``, ``drop:parts`` (the tables gone, the catalog row not yet),
  ``drop:commit``, ``drop:committed``;
* rows into a table: ``out:begin``, ``out:commit``, ``out:committed`` (Spark:
  ``out:created``, ``out:aside`` between its renames, ``out:renamed``);

plus kills at random times. After each kill: the store loads; every model is exactly the
old version (a kill before the commit) or the new one (after), compared by its kind,
metadata and every parameter table, and scores; no table outside the live models' and no
temporary file is left; and (killed midway) the same command then succeeds.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.crash import TEST_KILL_AT
from sqlnb.store import storage
from support.cli import mixed_table, write_parquet
from support.kill import log_text, run

SAVE = ["save:begin", "save:part", "save:commit", "save:committed"]
DROP = ["drop:begin", "drop:parts", "drop:commit", "drop:committed"]
OUT = ["out:begin", "out:commit", "out:committed"]
#: The points at which the write has committed: the model (or table) is then the new one.
AFTER = {"save:committed", "drop:committed", "out:committed", "out:renamed"}
#: Points inside a write, after which the same command is run again (and must succeed).
MIDWAY = {"save:part", "drop:parts", "out:commit", "out:aside"}

# -- what a store holds --------------------------------------------------------------------------

def _rows(t) -> dict:
    if not isinstance(t, pa.Table):
        t = t.to_arrow_table() if hasattr(t, "to_arrow_table") else t
    return t.to_pydict()


#: Metadata that differs between two runs of one command: times, durations, versions, and
#: the fingerprint, left out as a hash of what is compared here anyway (the parts
#: themselves, with the directory of the files replaced).
_VARYING = {"created", "at", "seconds", "versions", "fingerprint"}


def _scrub(meta):
    if isinstance(meta, dict):
        return {k: _scrub(v) for k, v in meta.items() if k not in _VARYING}
    if isinstance(meta, list):
        return [_scrub(v) for v in meta]
    return meta


def models_state(target, base: Path | None = None) -> dict:
    """name -> (kind, metadata, {part: rows}) of every model, without what differs between
    two identical saves (id, time, versions, fit seconds, the directory ``base`` of the
    files it was fitted on)."""
    out = {}
    with storage(target, read_only=True) as st:
        for name, kind, _, meta_text in st.rows():
            meta = _scrub(json.loads(meta_text if base is None else meta_text.replace(str(base), "<dir>")))
            parts = {p: _rows(t) for p, t in sorted(st.read_parts(st.lookup(name)[0]).items())}
            if base is not None:  # a calibrator records the path of its data
                parts = json.loads(json.dumps(parts, default=str).replace(str(base), "<dir>"))
            out[name] = (kind, meta, parts)
    return out


def check_models(target, want: dict, score_on, con, base: Path | None = None) -> None:
    """The models are exactly ``want``'s, each loads and scores."""
    got = models_state(target, base)
    assert sorted(got) == sorted(want), (sorted(got), sorted(want))
    for name in want:
        assert got[name] == want[name], f"model {name!r} is neither the old nor the new one"
        model = sqlnb.load(target, name)
        assert _rows(model.score(score_on, con))


# -- DuckDB: a models file -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def duck(tmp_path_factory):
    """A template directory: training, new and held-out rows as Parquet; models.duckdb
    with a naive, a TAN and a binned model and a table of scores."""
    d = tmp_path_factory.mktemp("kill9")
    write_parquet(mixed_table(120, seed=1, classes=("a", "b")), d / "train.parquet")
    write_parquet(mixed_table(60, seed=2, classes=("a", "b")), d / "new.parquet")
    write_parquet(mixed_table(60, seed=3, classes=("a", "b")), d / "holdout.parquet")
    db = d / "models.duckdb"
    con = duckdb.connect(str(db))
    con.execute(f"CREATE TABLE train AS SELECT * FROM '{d / 'train.parquet'}'")
    con.execute("CREATE TABLE scores AS SELECT 1 AS old")
    for name, kw in {"nb": {}, "tan": {"structure": "tan"}, "binned": {"bins": "quantile:3"}}.items():
        sqlnb.fit("train", "y", con=con, features=["x", "z", "color", "flag"], **kw).save(con, name)
    con.close()
    return d


def duck_commands(d: Path) -> dict:
    db = d / "models.duckdb"
    fit = ["fit", d / "train.parquet", "--label", "y", "--exclude", "id", "--alpha", "3", "--replace"]
    return {
        "fit": (fit + ["--model", f"{db}:nb"], SAVE),
        "fit-new": (fit + ["--model", f"{db}:fresh"], SAVE),
        "update": (["update", d / "new.parquet", "--model", f"{db}:nb"], SAVE),
        "update-tan": (["update", d / "new.parquet", "--model", f"{db}:tan"], SAVE),
        "update-binned": (["update", d / "new.parquet", "--model", f"{db}:binned"], SAVE),
        "calibrate": (["calibrate", d / "holdout.parquet", "--model", f"{db}:nb"], SAVE),
        "decide": (["decide", "--model", f"{db}:tan", "--threshold", "b=0.3"], SAVE),
        "select": (["select", d / "train.parquet", "--label", "y", "--exclude", "id", "--folds", "2",
                    "--model", f"{db}:sel"], SAVE),
        "drop": (["drop", "--model", f"{db}:binned"], DROP),
        "score-out-table": (["score", d / "new.parquet", "--model", f"{db}:nb", "--keep", "id",
                             "--out", f"{db}:scores", "--replace"], OUT),
    }


def duck_state(d: Path) -> tuple[dict, dict]:
    """(models, {table: rows}) of the store in ``d``, after checking it holds nothing else:
    no part table outside the live models', no temporary file."""
    db = d / "models.duckdb"
    models = models_state(str(db), d)
    con = duckdb.connect(str(db), read_only=True)
    try:
        ids = [r[0] for r in con.sql("SELECT id FROM sqlnb.models").fetchall()]
        tables = con.sql("SELECT table_schema, table_name FROM information_schema.tables").fetchall()
        stray = [t for s, t in tables if s == "sqlnb" and t != "models" and not any(t.startswith(f"m_{i}_") for i in ids)]
        assert stray == [], f"tables left by a killed writer: {stray}"
        user = {t: con.sql(f'SELECT * FROM "{t}" ORDER BY ALL').fetchall() for s, t in tables if s == "main"}
    finally:
        con.close()
    files = sorted(p.name for p in d.iterdir())
    # DuckDB's own write-ahead log may stay (it is replayed when the file is next opened).
    assert set(files) - {"models.duckdb.wal", "log"} == {"train.parquet", "new.parquet", "holdout.parquet",
                                                           "models.duckdb"}, files
    return models, user


def _fresh(template: Path, into: Path) -> Path:
    if into.exists():
        shutil.rmtree(into)
    shutil.copytree(template, into)
    return into


@pytest.fixture(scope="module")
def duck_versions(duck, tmp_path_factory):
    """command -> (old state, new state): the store before and after the command ran whole."""
    old = duck_state(duck)
    out = {}
    for name, (args, _) in duck_commands(duck).items():
        d = _fresh(duck, tmp_path_factory.mktemp("new") / "d")
        code = run(_retarget(args, duck, d), d / "log")
        assert code == 0, log_text(d / "log")
        log_text(d / "log")
        out[name] = (old, duck_state(d))
        assert out[name][0] != out[name][1], f"{name} changed nothing: the test could not tell old from new"
    return out


def _retarget(args, src: Path, dst: Path) -> list[str]:
    return [str(a).replace(str(src), str(dst)) for a in args]


DUCK_CASES = [(c, p) for c, (_, points) in duck_commands(Path("/")).items() for p in points]


@pytest.mark.parametrize("command,point", DUCK_CASES, ids=[f"{c}@{p}" for c, p in DUCK_CASES])
def test_duckdb_kill_leaves_old_or_new(duck, duck_versions, tmp_path, command, point):
    d = _fresh(duck, tmp_path / "d")
    args = _retarget(duck_commands(duck)[command][0], duck, d)
    code = run(args, d / "log", point=point)
    assert code == -signal.SIGKILL, (f"the command did not reach kill point {point}", code, log_text(d / "log"))
    log_text(d / "log")
    old, new = duck_versions[command]
    want = new if point in AFTER else old
    got = duck_state(d)
    assert got == want, f"{command} killed at {point}: the store is {'neither' if got not in (old, new) else 'the wrong'} version"
    con = duckdb.connect()
    check_models(str(d / "models.duckdb"), want[0], str(d / "new.parquet"), con, d)
    if point in MIDWAY:  # the same command, run again, is not hindered by what was left
        assert run(args, d / "log") == 0, log_text(d / "log")
        log_text(d / "log")
        assert duck_state(d) == new


def test_duckdb_kills_at_random_times(duck, duck_versions, tmp_path):
    """Kills at random moments of each command (seeded): every model old or new."""
    rng = random.Random(31)
    for command in ("fit", "update-tan", "calibrate", "drop", "score-out-table"):
        old, new = duck_versions[command]
        for _ in range(2):
            d = _fresh(duck, tmp_path / "d")
            run(_retarget(duck_commands(duck)[command][0], duck, d), d / "log", kill_after=rng.uniform(0.05, 0.6))
            log_text(d / "log")
            got = duck_state(d)
            assert got in (old, new), f"{command} killed at a random time: neither old nor new"


#: Kill points of a fit (or rows into a table) that creates its database file: inside the
#: save's transaction on the temporary file, after it is complete, and after the link.
NEW_FILE = ["save:part", "save:committed", "new:written", "new:linked"]


@pytest.mark.parametrize("point", NEW_FILE)
@pytest.mark.parametrize("what", ["fit", "score-out-table"])
def test_a_new_models_file_appears_whole_or_not_at_all(duck, tmp_path, what, point):
    """A fit (or ``score --out DB:TABLE``) into a file that does not exist yet, killed at
    any step, leaves no file or the whole one; never an empty or half-written database,
    which ``models`` would list as empty and the next command would mistake for a store.
    Only a ``.sqlnb-<pid>-...`` temporary stays, and the next write there removes it."""
    d = _fresh(duck, tmp_path / "d")
    db = d / "new.duckdb"
    args = {"fit": ["fit", d / "train.parquet", "--label", "y", "--exclude", "id", "--model", f"{db}:m"],
            "score-out-table": ["score", d / "new.parquet", "--model", f"{d / 'models.duckdb'}:nb", "--keep", "id",
                                "--out", f"{db}:scores"]}[what]
    point = {"save:part": "out:commit", "save:committed": "out:committed"}.get(point, point) if what != "fit" else point
    code = run(args, d / "log", point=point)
    assert code == -signal.SIGKILL, (f"the command did not reach kill point {point}", code, log_text(d / "log"))
    log_text(d / "log")
    if point == "new:linked":  # linked: the file is whole
        assert (sqlnb.list_models(str(db))[0]["name"] == "m") if what == "fit" else \
            duckdb.connect(str(db), read_only=True).execute("SELECT count(*) FROM scores").fetchall() == [(60,)]
    else:
        assert not db.exists() and not (d / "new.duckdb.wal").exists()
    left = [p.name for p in d.iterdir() if p.name.startswith(".sqlnb-")]
    assert left and all(n.endswith("new.duckdb") or n.endswith("new.duckdb.wal") for n in left), left
    assert run(args + (["--replace"] if db.exists() else []), d / "log") == 0, log_text(d / "log")
    log_text(d / "log")
    assert [p.name for p in d.iterdir() if p.name.startswith(".sqlnb-")] == []  # removed by that write


# -- PostgreSQL: the store on the server ----------------------------------------------------------

PG_MODELS = {"nb": {}, "tan": {"structure": "tan"}, "binned": {"bins": "mdl"}}


@pytest.fixture(scope="module")
def pg():
    """One server for the module: tables train and new, and the models of the template,
    fitted once (:func:`pg_reset` saves them again before each kill)."""
    from support.engines import postgres_engine
    train = mixed_table(120, seed=1, classes=("a", "b"))
    with postgres_engine({"train": train, "new": mixed_table(60, seed=2, classes=("a", "b"))}) as engine:
        fitted = {name: sqlnb.fit("train", "y", con=engine, features=["x", "z", "color", "flag"], **kw)
                  for name, kw in PG_MODELS.items()}
        yield engine, fitted


def pg_reset(engine, fitted) -> None:
    """The template store: the three models and a table of scores, nothing else."""
    con = engine.con
    con.execute("DROP SCHEMA IF EXISTS sqlnb CASCADE")
    con.execute("DROP TABLE IF EXISTS scores")
    con.execute("CREATE TABLE scores AS SELECT 1 AS old")
    for name, model in fitted.items():
        model.save(engine, name)


def pg_commands(dsn: str) -> dict:
    """The writing commands that run on PostgreSQL (update, calibrate and select run in
    DuckDB only)."""
    head = ["--engine", "postgres", "--dsn", dsn]
    fit = head + ["fit", "train", "--label", "y", "--exclude", "id", "--alpha", "3", "--replace"]
    return {
        "fit": (fit + ["--model", "nb"], SAVE),
        "decide": (head + ["decide", "--model", "tan", "--threshold", "b=0.3"], SAVE),
        "drop": (head + ["drop", "--model", "binned"], DROP),
        "score-out-table": (head + ["score", "new", "--model", "nb", "--keep", "id", "--out-table", "scores",
                                    "--replace"], OUT),
    }


def pg_state(engine) -> tuple[dict, dict]:
    """(models, {table: rows}) on the server, after checking it holds nothing else: no
    part table outside the live models', no temporary table, no session of a killed
    writer still in a transaction."""
    con = engine.con
    ids = [r[0] for r in con.execute("SELECT id FROM sqlnb.models").fetchall()]
    tables = con.execute("SELECT table_schema, table_name FROM information_schema.tables "
                         "WHERE table_schema IN ('sqlnb', 'public')").fetchall()
    stray = [t for s, t in tables if s == "sqlnb" and t != "models" and not any(t.startswith(f"m_{i}_") for i in ids)]
    assert stray == [], f"tables left by a killed writer: {stray}"
    public = sorted(t for s, t in tables if s == "public")
    assert public == ["new", "scores", "train"], public
    return models_state(engine), {"scores": sorted(con.execute("SELECT * FROM scores").fetchall())}


@pytest.fixture(scope="module")
def pg_versions(pg, tmp_path_factory):
    engine, fitted = pg
    log = tmp_path_factory.mktemp("pg") / "log"
    out = {}
    for name, (args, _) in pg_commands(engine.dsn).items():
        pg_reset(engine, fitted)
        old = pg_state(engine)
        assert run(args, log) == 0, log_text(log)
        log_text(log)
        out[name] = (old, pg_state(engine))
        assert out[name][0] != out[name][1], f"{name} changed nothing: the test could not tell old from new"
    return out


PG_CASES = [(c, p) for c, (_, points) in pg_commands("").items() for p in points]


@pytest.mark.postgres  # a throw-away PostgreSQL server (the module fixture pg)
@pytest.mark.parametrize("command,point", PG_CASES, ids=[f"{c}@{p}" for c, p in PG_CASES])
def test_postgres_kill_leaves_old_or_new(pg, pg_versions, tmp_path, command, point):
    engine, fitted = pg
    pg_reset(engine, fitted)
    args = pg_commands(engine.dsn)[command][0]
    code = run(args, tmp_path / "log", point=point)
    assert code == -signal.SIGKILL, (f"the command did not reach kill point {point}", code, log_text(tmp_path / "log"))
    old, new = pg_versions[command]
    want = new if point in AFTER else old
    assert pg_state(engine) == want, f"{command} killed at {point}: the store is not the {'new' if want is new else 'old'} one"
    check_models(engine, want[0], "new", engine)
    if point in MIDWAY:
        assert run(args, tmp_path / "log") == 0, log_text(tmp_path / "log")
        assert pg_state(engine) == new


# -- Spark: a catalog without transactions ----------------------------------------------------------

def _forked_kill(point: str, work) -> int:
    """Run ``work()`` in a fork of this process, dying at kill point ``point``; returns
    the signal that ended it. The fork shares this process's Spark JVM (its py4j socket,
    used by one process at a time), so the catalog it leaves is the one this process
    then sees: a driver killed while its catalog lives on, as a cluster's metastore does."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            os.environ[TEST_KILL_AT] = point
            work()
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    return os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0


def _spark_tables(engine, database: str) -> list[str]:
    return sorted(t.name for t in engine.spark.catalog.listTables(database) if not t.isTemporary)


@pytest.mark.spark  # a local Spark session (the module fixture spark)
@pytest.mark.parametrize("point", ["out:aside"])
def test_spark_out_table_killed_is_finished_by_the_next_write(spark, point):
    """``--out-table`` on Spark, killed after its new table, between its renames (the old
    table aside, its name empty) and after them: the next Spark write puts the old table
    back (or keeps the new one) and drops every temporary."""
    from sqlglot import exp

    from sqlnb.io.engine_output import write_table
    engine = spark
    engine.spark.sql("DROP TABLE IF EXISTS scores")
    engine.spark.sql("CREATE TABLE scores AS SELECT 1 AS old")
    new = exp.select(exp.alias_(exp.Literal.number(2), "new"))
    assert _forked_kill(point, lambda: write_table(engine, "scores", new, True)) == signal.SIGKILL
    left = [t for t in _spark_tables(engine, "default") if t.startswith("sqlnb_")]
    assert left, "the killed writer left nothing to finish: the test could not tell"
    write_table(engine, "other", exp.select(exp.alias_(exp.Literal.number(1), "one")), replace=True)
    assert [t for t in _spark_tables(engine, "default") if t.startswith("sqlnb_")] == []
    got = [tuple(r) for r in engine.spark.sql("SELECT * FROM scores").collect()]
    assert got == ([(2,)] if point in AFTER else [(1,)])


@pytest.mark.spark  # a local Spark session (the module fixture spark)
def test_spark_out_table_replaces_an_existing_table_and_leaves_no_temporary(spark):
    """The whole write, unkilled: over an existing table only with ``replace``, and then
    nothing of the swap is left (the old table renamed aside is dropped)."""
    from sqlglot import exp

    from sqlnb.errors import SqlnbError
    from sqlnb.io.engine_output import write_table
    engine = spark
    engine.spark.sql("DROP TABLE IF EXISTS scores")
    engine.spark.sql("CREATE TABLE scores AS SELECT 1 AS old")
    new = exp.select(exp.alias_(exp.Literal.number(2), "new"))
    with pytest.raises(SqlnbError, match="already exists"):
        write_table(engine, "scores", new, False)
    write_table(engine, "scores", new, True)
    assert [tuple(r) for r in engine.spark.sql("SELECT * FROM scores").collect()] == [(2,)]
    assert [t for t in _spark_tables(engine, "default") if t.startswith("sqlnb_")] == []


@pytest.mark.spark  # a local Spark session (the module fixture spark)
@pytest.mark.parametrize("point", ["save:part", "save:committed"])
def test_spark_save_killed_leaves_old_or_new_and_no_tables_after_the_next_save(spark, point):
    """A model save on Spark killed before its catalog row (orphan part tables of an id
    never committed) or after it (the replaced model's tables not dropped): the model is
    the old or the new one, and the next save drops what was left."""
    engine = spark
    t = mixed_table(80, seed=1, classes=("a", "b"))
    old = sqlnb.fit(t, "y", features=["x", "z"])
    new = sqlnb.fit(t, "y", features=["x", "z", "color"])
    old.save(engine, "kill_nb", replace=True)
    old_id = _live_ids(engine)
    assert _forked_kill(point, lambda: new.save(engine, "kill_nb", replace=True)) == signal.SIGKILL
    ids = _live_ids(engine)
    assert (ids != old_id) == (point in AFTER)
    features = [f.name for f in sqlnb.load(engine, "kill_nb").features]
    assert features == (["x", "z", "color"] if point in AFTER else ["x", "z"])
    stray = lambda: [x for x in _spark_tables(engine, "sqlnb") if x != "models" and not any(  # noqa: E731
        x.startswith(f"m_{i}_") for i in _live_ids(engine))]
    assert stray(), "the killed writer left no table: the test could not tell"
    old.save(engine, "kill_other", replace=True)
    assert stray() == []


def _live_ids(engine) -> list[str]:
    with storage(engine) as st:
        return [st.lookup(n)[0] for n in st.names()]


@pytest.fixture(scope="module")
def spark():
    from support.engines import spark_engine
    with spark_engine({}) as engine:
        yield engine
