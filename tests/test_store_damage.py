"""A damaged model store is said in one line, and the user can recover from it.

A model's catalog row (``sqlnb.models``) and its part tables are ordinary tables another
tool can change. Whatever was damaged (its ``meta`` not JSON or NULL, a key taken out of
it, a part's rows deleted, a part table dropped), every command that reads the model
(``score``, ``show``, ``sql``, ``evaluate``) and ``sqlnb.load`` give one ``Error:`` line
(a ``SqlnbError``) naming the model, the store file, what is damaged and the ``sqlnb drop``
command that removes it; ``sqlnb models`` and ``sqlnb.list_models`` list the healthy models
and mark the damaged one (``status``); that drop removes its catalog row and every part
table left, and the name can be fitted again. A table ``sqlnb.models`` of another program
is refused in one line saying it is not an sqlnb catalog. The commands run as a user runs
them, each in its own process. The same holds on PostgreSQL and in a Spark warehouse
directory (sqlnb/store/damage.py is shared by every store).
"""

from __future__ import annotations

import gzip
import json
import shlex
import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.engines import SparkEngine
from sqlnb.errors import SqlnbError
from support.cli import assert_error, mixed_table, run_process, write_parquet
from support.engines import postgres_engine

FIXTURES = Path(__file__).parent / "fixtures"

#: damage -> (what it does to model 'bad', given its id; what the error line says).
DAMAGES = {
    "meta_not_json": ("UPDATE sqlnb.models SET meta = '{{not json' WHERE name = 'bad'",
                      "its metadata (column meta of the catalog) is not JSON (Expecting property name enclosed in "
                      "double quotes: line 1 column 2 (char 1))"),
    "meta_null": ("UPDATE sqlnb.models SET meta = NULL WHERE name = 'bad'",
                  "its metadata (column meta of the catalog) is NULL"),
    "meta_without_features": ("UPDATE sqlnb.models SET meta = json_remove(meta::JSON, '$.features')::VARCHAR "
                              "WHERE name = 'bad'", "its metadata has no 'features'"),
    "kind_null": ("UPDATE sqlnb.models SET kind = NULL WHERE name = 'bad'",
                  "its kind (column kind of the catalog) is NULL"),
    "classes_rows_deleted": ("DELETE FROM sqlnb.m_{id}_classes",
                             "its part table sqlnb.m_{id}_classes holds 0 rows, not the 3 it was saved with"),
    "moments_dropped": ("DROP TABLE sqlnb.m_{id}_moments", "its part table sqlnb.m_{id}_moments is missing"),
}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("data")
    write_parquet(mixed_table(150, seed=1), d / "train.parquet")
    return d / "train.parquet"


@pytest.fixture(scope="module")
def model(data):
    """Naive Bayes on three classes: parts classes, moments (x, z), sums and counts."""
    fitted = sqlnb.fit(str(data), label="y", exclude=["id"])
    assert {"classes", "moments"} <= set(fitted.parameter_tables())
    return fitted


def _store(path: Path, model) -> Path:
    """A models file holding ``good`` and ``bad`` (the same model)."""
    model.save(str(path), "good")
    model.save(str(path), "bad")
    return path


def _id(con, name: str = "bad") -> str:
    return con.execute("SELECT id FROM sqlnb.models WHERE name = ?", [name]).fetchall()[0][0]


def _damage(path: Path, damage: str) -> tuple[str, str]:
    """Apply ``damage`` to model 'bad' in ``path``; returns (its id, the reason said)."""
    statement, reason = DAMAGES[damage]
    con = duckdb.connect(str(path))
    try:
        mid = _id(con)
        con.execute(statement.format(id=mid))
    finally:
        con.close()
    return mid, reason.format(id=mid)


def _tables(path: Path) -> list[str]:
    con = duckdb.connect(str(path), read_only=True)
    try:
        return sorted(r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                                "WHERE table_schema = 'sqlnb'").fetchall())
    finally:
        con.close()


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_model_is_one_error_line_from_every_command_and_can_be_dropped(tmp_path, model, data, damage):
    db = _store(tmp_path / "models.duckdb", model)
    mid, reason = _damage(db, damage)
    said = (f"model 'bad' in {db} is damaged: ", reason, f"`sqlnb drop --model {db}:bad`", "fit it and save it again")
    out = tmp_path / "scored.csv"
    for command in (["score", data, "--model", f"{db}:bad", "--out", out], ["show", "--model", f"{db}:bad"],
                    ["sql", "--model", f"{db}:bad"], ["evaluate", data, "--model", f"{db}:bad"]):
        line = assert_error(run_process(*command), *said)
    assert not out.exists()
    # The healthy model beside it is read as before.
    shown = run_process("show", "--model", f"{db}:good")
    assert shown.returncode == 0 and "good (naive_bayes)" in shown.stdout, shown.stderr

    listed = run_process("models", db)
    assert listed.returncode == 0 and listed.stderr == "", listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()[1:]}
    assert listed.stdout.splitlines()[0].split()[-1] == "status"
    assert rows["bad"].endswith(f"damaged: {reason}") and rows["good"].endswith("  ok")
    as_json = run_process("models", db, "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    assert {m["name"]: m["status"] for m in json.loads(as_json.stdout)} == {"bad": f"damaged: {reason}",
                                                                            "good": "ok"}

    # The command the error line gives removes the model with every table it has left.
    drop = shlex.split(line.split("remove it with `")[1].split("`")[0])
    assert drop[:2] == ["sqlnb", "drop"]
    dropped = run_process(*drop[1:])
    assert dropped.returncode == 0, dropped.stderr
    assert not [t for t in _tables(db) if mid in t]
    assert [m["name"] for m in sqlnb.list_models(str(db))] == ["good"]
    # ... and the name is free to fit again.
    refit = run_process("fit", data, "--label", "y", "--exclude", "id", "--model", f"{db}:bad")
    assert refit.returncode == 0, refit.stderr
    assert run_process("show", "--model", f"{db}:bad").returncode == 0


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_model_in_python_raises_one_line_and_is_listed_as_damaged(tmp_path, model, damage):
    db = _store(tmp_path / "models.duckdb", model)
    mid, reason = _damage(db, damage)
    with pytest.raises(SqlnbError) as raised:
        sqlnb.load(str(db), "bad")
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"model 'bad' in {db} is damaged: {reason}; ")
    assert f"`sqlnb drop --model {db}:bad` (sqlnb.drop in Python)" in message
    # Through an open connection too (the file it names is the connection's).
    con = duckdb.connect(str(db), read_only=True)
    with pytest.raises(SqlnbError, match=f"model 'bad' in {db} is damaged"):
        sqlnb.load(con, "bad")
    con.close()
    listed = sqlnb.list_models(str(db))
    assert [(m["name"], m["status"]) for m in listed] == [("bad", f"damaged: {reason}"), ("good", "ok")]
    assert listed[1]["label"] == "y" and listed[1]["features"] == len(model.features)
    assert sqlnb.load(str(db), "good").classes == model.classes
    sqlnb.drop(str(db), "bad")
    assert not [t for t in _tables(db) if mid in t]
    assert [m["name"] for m in sqlnb.list_models(str(db))] == ["good"]


def test_a_model_in_memory_names_the_python_drop(model):
    con = duckdb.connect()
    model.save(con, "bad")
    con.execute("UPDATE sqlnb.models SET meta = NULL")
    with pytest.raises(SqlnbError, match=r"model 'bad' in this database is damaged: .*NULL; "
                                         r"remove it with `sqlnb.drop\(con, 'bad'\)`"):
        sqlnb.load(con, "bad")


def test_a_damaged_model_saved_before_parts_were_recorded_is_said_the_same_way(tmp_path):
    """A model of the format 1 fixture has no record of its parts: a kind's loader failing
    on what is left is reported as damage, in one line, and the listing marks it."""
    db = tmp_path / "format1.duckdb"
    with gzip.open(FIXTURES / "format1_models.duckdb.gz", "rb") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    con = duckdb.connect(str(db))
    mid = _id(con, "nb_mixed")
    assert "parts" not in json.loads(con.execute("SELECT meta FROM sqlnb.models WHERE name = 'nb_mixed'")
                                     .fetchall()[0][0])
    con.execute(f"DELETE FROM sqlnb.m_{mid}_classes")
    con.close()
    said = (f"model 'nb_mixed' in {db} is damaged: its metadata and part tables do not fit together (IndexError",
            f"`sqlnb drop --model {db}:nb_mixed`")
    assert_error(run_process("show", "--model", f"{db}:nb_mixed"), *said)
    status = {m["name"]: m["status"] for m in sqlnb.list_models(str(db))}
    assert status.pop("nb_mixed").startswith("damaged: its metadata and part tables do not fit together")
    assert set(status.values()) == {"ok"}
    assert sqlnb.load(str(db), "lda").kind == "lda"


def _foreign(path: Path) -> Path:
    """A database whose ``sqlnb.models`` is another program's table."""
    con = duckdb.connect(str(path))
    con.execute("CREATE SCHEMA sqlnb")
    con.execute("CREATE TABLE sqlnb.models (title VARCHAR, body VARCHAR)")
    con.execute("INSERT INTO sqlnb.models VALUES ('a', 'b')")
    con.close()
    return path


def test_a_catalog_of_another_program_is_one_error_line(tmp_path, data):
    db = _foreign(tmp_path / "other.duckdb")
    said = (f"the table sqlnb.models in {db} is not an sqlnb catalog: its columns are title, body, "
            "an sqlnb catalog's are name, id, kind, created, meta",)
    before = db.read_bytes()
    for command in (["models", db], ["show", "--model", f"{db}:m"], ["sql", "--model", f"{db}:m"],
                    ["score", data, "--model", f"{db}:m", "--out", tmp_path / "o.csv"], ["drop", "--model", f"{db}:m"],
                    ["fit", data, "--label", "y", "--exclude", "id", "--model", f"{db}:m"]):
        assert_error(run_process(*command), *said)
    assert db.read_bytes() == before  # nothing written, the fit's model included
    assert _tables(db) == ["models"]
    for call in (lambda: sqlnb.list_models(str(db)), lambda: sqlnb.load(str(db), "m")):
        with pytest.raises(SqlnbError, match="is not an sqlnb catalog"):
            call()


# -- PostgreSQL --------------------------------------------------------------------------------

def _refused_listed_dropped(engine, reasons: dict, place: str, cli: str) -> None:
    """Each model of ``reasons`` (name -> what is damaged) in ``engine``'s store is refused
    in one line naming ``place`` and the drop command (``cli`` and its options), is listed
    as damaged beside ``good``, and is dropped."""
    for name, reason in reasons.items():
        with pytest.raises(SqlnbError) as raised:
            sqlnb.load(engine, name)
        assert str(raised.value) == (f"model {name!r} in {place} is damaged: {reason}; remove it with "
                                     f"`{cli} drop --model {name}` (sqlnb.drop in Python), then fit it and save it again")
    assert {m["name"]: m["status"] for m in sqlnb.list_models(engine)} == {
        "good": "ok", **{n: f"damaged: {r}" for n, r in reasons.items()}}
    for name in reasons:
        sqlnb.drop(engine, name)


@pytest.fixture(scope="module")
def postgres(data):
    with postgres_engine({"train": pq.read_table(data)}) as engine:
        yield engine


@pytest.mark.postgres
def test_postgres_damaged_models_are_one_line_listed_and_dropped(postgres, model):
    import psycopg

    with psycopg.connect(postgres.dsn, autocommit=True) as con:
        for name in ("good", "no_meta", "no_classes", "no_moments"):
            model.save(postgres, name, replace=True)
        ids = dict(con.execute("SELECT name, id FROM sqlnb.models").fetchall())
        con.execute("UPDATE sqlnb.models SET meta = NULL WHERE name = 'no_meta'")
        con.execute(f"DELETE FROM sqlnb.m_{ids['no_classes']}_classes")
        con.execute(f"DROP TABLE sqlnb.m_{ids['no_moments']}_moments")
        reasons = {"no_meta": "its metadata (column meta of the catalog) is NULL",
                   "no_classes": f"its part table sqlnb.m_{ids['no_classes']}_classes holds 0 rows, not the 3 "
                                 "it was saved with",
                   "no_moments": f"its part table sqlnb.m_{ids['no_moments']}_moments is missing"}
        assert_error(run_process("--engine", "postgres", "--dsn", postgres.dsn, "show", "--model", "no_moments"),
                     "model 'no_moments' in this PostgreSQL database is damaged", reasons["no_moments"])
        _refused_listed_dropped(postgres, reasons, "this PostgreSQL database", "sqlnb --engine postgres --dsn DSN")
        left = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                          "WHERE table_schema = 'sqlnb'").fetchall()]
        assert not [t for t in left if any(ids[n] in t for n in reasons)]
        assert [m["name"] for m in sqlnb.list_models(postgres)] == ["good"]
        sqlnb.drop(postgres, "good")

        con.execute("ALTER TABLE sqlnb.models RENAME COLUMN name TO title")
        try:
            with pytest.raises(SqlnbError, match="the table sqlnb.models in this PostgreSQL database is not an "
                                                 "sqlnb catalog: its columns are title, id, kind, created, meta"):
                sqlnb.list_models(postgres)
        finally:
            con.execute("ALTER TABLE sqlnb.models RENAME COLUMN title TO name")


# -- a Spark warehouse directory (Parquet files, no Java needed) ------------------------------

def test_spark_warehouse_damaged_models_are_one_line_listed_and_dropped(tmp_path, model):
    warehouse = tmp_path / "warehouse"
    engine = SparkEngine(None, warehouse=str(warehouse))
    for name in ("good", "no_moments", "no_tables"):
        model.save(engine, name)
    root = warehouse / "sqlnb.db"
    ids = {n: sqlnb.load(engine, n).stored_id for n in ("no_moments", "no_tables")}
    shutil.rmtree(root / f"m_{ids['no_moments']}_moments")
    for part in root.glob(f"m_{ids['no_tables']}_*"):
        shutil.rmtree(part)
    reasons = {"no_moments": f"its part table sqlnb.m_{ids['no_moments']}_moments is missing",
               "no_tables": "its part tables are missing"}
    _refused_listed_dropped(engine, reasons, f"the Spark warehouse {warehouse}",
                            f"sqlnb --engine spark --warehouse {warehouse}")
    assert [m["name"] for m in sqlnb.list_models(engine)] == ["good"]
    assert not [p for p in root.iterdir() if any(i in p.name for i in ids.values())]

    other = tmp_path / "other"
    (other / "sqlnb.db" / "models").mkdir(parents=True)
    pq.write_table(pa.table({"title": ["a"], "body": ["b"]}), other / "sqlnb.db" / "models" / "part-0.parquet")
    with pytest.raises(SqlnbError, match=f"the table sqlnb.models in the Spark warehouse {other} is not an sqlnb "
                                         "catalog: its columns are title, body"):
        sqlnb.list_models(SparkEngine(None, warehouse=str(other)))
