"""Models in a local Spark warehouse directory are Parquet files, read and written without
Spark's table catalog (the catalog's start cost ~6.6 s of every command).

The store needs no Java process: an engine on a warehouse directory with no session
(``SparkEngine(None, warehouse=DIR)``) saves, lists, loads and drops models, so these
tests run in DuckDB's time. What they hold: models stored by 79062dc through Spark's
Hive catalog load and score as they did (tests/fixtures/spark_warehouse_79062dc.tar.gz);
a model round-trips with its stored types; the catalog is an append-only log (a replace
and a drop append a row, the newest row wins); a read-modify-write saves only over the
model it read; a writer killed at any point leaves the old model or the new one, and the
next save removes what it left. The Spark session side (fit in one process, score, show,
models and drop in others; a table opened only when a command names one) is
tests/test_spark_cli.py's.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import sqlnb
from sqlnb.crash import TEST_KILL_AT
from sqlnb.engines import SparkEngine
from sqlnb.store.catalog import ModelChanged
from sqlnb.models.finish import OUTPUTS
from support.cli import mixed_table, write_parquet
from support.stored import assert_scores_as_stored

FIXTURE = Path(__file__).parent / "fixtures" / "spark_warehouse_79062dc.tar.gz"
#: The models that fixture lists ("dropped" was dropped; "replaced" was fitted twice).
FIXTURE_MODELS = ["lda", "nb", "qda", "replaced"]


def files_engine(warehouse: Path) -> SparkEngine:
    """An engine whose models live in ``warehouse``, without a Spark session."""
    return SparkEngine(None, warehouse=str(warehouse))


def names(model) -> list[str]:
    return [f.name for f in model.features]


def scores(model, data) -> dict:
    return model.score(data, keep=["id"], outputs=OUTPUTS).to_arrow_table().to_pydict()


@pytest.fixture
def train(tmp_path):
    return write_parquet(mixed_table(120, seed=1), tmp_path / "train.parquet")


def test_models_stored_by_79062dc_through_the_hive_catalog_load_and_score_as_then(tmp_path):
    with tarfile.open(FIXTURE) as tar:
        tar.extractall(tmp_path, filter="data")
    engine = files_engine(tmp_path)  # the fixture holds sqlnb.db (no metastore_db) and expected/
    assert [m["name"] for m in sqlnb.list_models(engine)] == FIXTURE_MODELS
    stored = sqlnb.store.spark.SparkStorage(engine).rows()
    assert {json.loads(meta)["format"] for _, _, _, meta in stored} == {1}  # the stored format 1, as on DuckDB
    train = tmp_path / "expected" / "train.parquet"
    for name in FIXTURE_MODELS:
        want = pq.read_table(tmp_path / "expected" / f"{name}.parquet").to_pydict()
        assert_scores_as_stored(scores(sqlnb.load(engine, name), str(train)), want)  # computed on another CPU
    # The replaced model is the second fit (features x2, colour), not the first.
    assert names(sqlnb.load(engine, "replaced")) == ["x2", "colour"]
    # A new save into the old warehouse appends to its log; the old models stay.
    sqlnb.fit(str(train), "y", features=["x1"]).save(engine, "new")
    assert [m["name"] for m in sqlnb.list_models(engine)] == sorted([*FIXTURE_MODELS, "new"])
    sqlnb.drop(engine, "nb")
    assert not [p for p in (tmp_path / "sqlnb.db").iterdir() if p.name.startswith(f"m_{_id(tmp_path, 'nb')}")]


def _id(warehouse: Path, name: str) -> str | None:
    rows = pa.concat_tables([pq.read_table(f, columns=["name", "id", "created"]).cast(
        pa.schema([("name", pa.string()), ("id", pa.string()), ("created", pa.timestamp("us"))]))
        for f in sorted((warehouse / "sqlnb.db" / "models").glob("part-*"))]).to_pylist()
    rows = sorted((r for r in rows if r["name"] == name), key=lambda r: r["created"])
    return rows[-1]["id"] if rows else None


def test_a_model_round_trips_with_its_types_and_the_catalog_is_an_append_only_log(tmp_path, train):
    t = pq.read_table(train)
    day = pa.array([dt.date(2026, 1, 1 + (v == "b")) for v in t["y"].to_pylist()], pa.date32())
    dated = write_parquet(t.set_column(t.schema.get_field_index("y"), "y", day), tmp_path / "dated.parquet")
    engine = files_engine(tmp_path / "wh")
    model = sqlnb.fit(dated, "y", exclude=["id"])
    model.save(engine, "m")
    loaded = sqlnb.load(engine, "m")
    assert loaded.classes == model.classes and isinstance(loaded.classes[0], dt.date)
    assert scores(loaded, dated) == scores(model, dated)  # the same machine: bit for bit
    with pytest.raises(sqlnb.SqlnbError, match="model 'm' already exists in the Spark warehouse .*pass --replace"):
        model.save(engine, "m")
    first = loaded.stored_id
    sqlnb.fit(train, "y", features=["x"]).save(engine, "m", replace=True)
    assert names(sqlnb.load(engine, "m")) == ["x"]
    root = tmp_path / "wh" / "sqlnb.db"
    assert not [p for p in root.iterdir() if p.name.startswith(f"m_{first}_")]  # the old parts went
    assert len(list((root / "models").glob("part-*.parquet"))) == 2  # one row per save, appended
    sqlnb.drop(engine, "m")
    assert sqlnb.list_models(engine) == [] and sorted(p.name for p in root.iterdir()) == ["models"]
    assert len(list((root / "models").glob("part-*.parquet"))) == 3  # and the drop's tombstone
    with pytest.raises(sqlnb.SqlnbError, match="no model named 'm' in the Spark warehouse"):
        sqlnb.load(engine, "m")


def test_a_read_modify_write_saves_only_over_the_model_it_read(tmp_path, train):
    engine = files_engine(tmp_path)
    sqlnb.fit(train, "y", exclude=["id"]).save(engine, "m")
    read = sqlnb.load(engine, "m")
    sqlnb.fit(train, "y", features=["x"]).save(engine, "m", replace=True)  # another process, meanwhile
    with pytest.raises(ModelChanged, match="model 'm' in the Spark warehouse .* was replaced by another process"):
        sqlnb.store.save_model(read, engine, "m", replace=True, expect=read.stored_id)
    now = sqlnb.load(engine, "m")
    sqlnb.store.save_model(now, engine, "m", replace=True, expect=now.stored_id)
    assert names(sqlnb.load(engine, "m")) == ["x"]


def test_a_warehouse_whose_catalog_directory_is_empty_is_an_empty_store(tmp_path, train):
    """What a session whose in-memory catalog was lost left (only Spark's _SUCCESS): the
    directory is the catalog, so it is just empty, and a fit goes in."""
    (tmp_path / "sqlnb.db" / "models").mkdir(parents=True)
    (tmp_path / "sqlnb.db" / "models" / "_SUCCESS").touch()
    engine = files_engine(tmp_path)
    assert sqlnb.list_models(engine) == []
    sqlnb.fit(train, "y", exclude=["id"]).save(engine, "m")
    assert [m["name"] for m in sqlnb.list_models(engine)] == ["m"]


SAVE = """
import sys
import sqlnb
from sqlnb.engines import SparkEngine
engine = SparkEngine(None, warehouse=sys.argv[1])
if sys.argv[3] == "drop":
    sqlnb.drop(engine, "m")
else:
    sqlnb.fit(sys.argv[2], "y", features=sys.argv[3].split(",")).save(engine, "m", replace=True)
"""


def _run(*args: str, kill_at: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != TEST_KILL_AT}
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent.parent), env.get("PYTHONPATH", "")])
    if kill_at:
        env[TEST_KILL_AT] = kill_at
    return subprocess.run([sys.executable, "-c", SAVE, *args], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("point", ["save:part", "save:commit", "save:committed", "drop:committed"])
def test_a_writer_killed_leaves_the_old_or_the_new_model_and_the_next_save_cleans_up(tmp_path, train, point):
    wh = tmp_path / "wh"
    engine = files_engine(wh)
    sqlnb.fit(train, "y", exclude=["id"]).save(engine, "m")
    old = sqlnb.load(engine, "m")
    if point.startswith("drop"):
        killed = _run(str(wh), str(train), "drop", kill_at=point)
    else:
        killed = _run(str(wh), str(train), "x", kill_at=point)
    assert killed.returncode == -9, killed.stderr
    models = sqlnb.list_models(engine)
    if point == "drop:committed":
        assert models == []  # the tombstone is in: dropped, its parts left behind
    else:
        now = sqlnb.load(engine, "m")
        assert names(now) == (["x"] if point == "save:committed" else names(old))
    root = wh / "sqlnb.db"
    leftovers = lambda: sorted(p.name for p in root.iterdir() if p.name != "models")  # noqa: E731
    assert leftovers(), point  # the killed writer left parts (or the old ones) behind
    sqlnb.fit(train, "y", features=["color"]).save(engine, "other")  # the next save sweeps
    live = {sqlnb.load(engine, m["name"]).stored_id for m in sqlnb.list_models(engine)}
    assert all(any(name.startswith(f"m_{i}_") for i in live) for name in leftovers()), leftovers()
    assert not list((root / "models").glob(".sqlnb-*"))


def test_a_live_writers_parts_are_not_swept(tmp_path, train):
    """Parts of an id whose catalog row has not come yet, written by a process that
    still runs (this one), are a save in progress: another save leaves them."""
    engine = files_engine(tmp_path)
    storage = sqlnb.store.spark.SparkStorage(engine)
    storage.tables.create_catalog()
    in_progress = f"m_{sqlnb.store.spark._owned_id()}_classes"
    storage.tables.write(in_progress, pa.table({"a": [1]}), {})
    sqlnb.fit(train, "y", exclude=["id"]).save(engine, "m")
    assert (tmp_path / "sqlnb.db" / in_progress).is_dir()
