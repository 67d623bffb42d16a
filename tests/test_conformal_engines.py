"""Conformal sets in exported SQL: ``sqlnb sql`` carries them, as
``in_set_<class>`` BOOLEANs and ``set_size`` outside DuckDB, and SQLite and PostgreSQL
give DuckDB's sets row for row; a model with sets stored on PostgreSQL round-trips."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.workflows.conformal import conformal
from support.sqlite import sqlite_connection, sqlite_table

CLASSES = ["a", "b", "c"]


def table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    x = pa.array(rng.normal(y * 1.2, 1.0), mask=rng.random(n) < 0.05)  # NULLs: marginalised
    return pa.table({"id": np.arange(n), "x": x, "z": rng.normal(-y * 1.0, 1.0), "y": np.array(CLASSES)[y]})


@pytest.fixture(scope="module")
def models():
    base = sqlnb.fit(table(400, 0), "y", features=["x", "z"])
    cal = table(300, 1)
    tempered = sqlnb.calibrate(base, cal, "temperature")
    return {"lac": conformal(base, cal, 0.1, "lac"), "aps": conformal(base, cal, 0.1, "aps"),
            "aps_randomized": conformal(base, cal, 0.1, "aps", randomized=True, seed=9),
            "mondrian_calibrated": conformal(tempered, cal, 0.2, "mondrian")}


def duckdb_sets(model, t: pa.Table) -> tuple[list, list]:
    out = model.score(t, duckdb.connect(), keep=["id"]).to_arrow_table().to_pydict()
    return [[c in s for c in CLASSES] for s in out["prediction_set"]], out["set_size"]


def same(got: dict, model, t, where: str) -> None:
    sets, sizes = duckdb_sets(model, t)
    order = np.argsort(got["id"])
    rows = [[bool(got[f"in_set_{c}"][i]) for c in CLASSES] for i in order]
    differ = [i for i in range(len(sets)) if rows[i] != sets[i] or got["set_size"][order[i]] != sizes[i]]
    assert differ == [], f"{where}: {len(differ)} rows differ from DuckDB's sets, first {differ[:5]}"
    assert len(set(sizes)) >= 2, where


def test_exported_sql_carries_the_sets_and_sqlite_gives_duckdbs(models):
    t = table(300, 2)
    for name, model in models.items():
        text = model.to_sql(dialect="sqlite", source="t")
        assert '"in_set_a"' in text and '"set_size"' in text and "prediction_set" not in text
        db = sqlite_connection()
        sqlite_table(db, "t", t)
        cur = db.execute(text)
        names = [c[0] for c in cur.description]
        rows = cur.fetchall()
        same({n: [r[i] for r in rows] for i, n in enumerate(names)}, model, t, f"sqlite {name}")
    assert '"prediction_set"' in models["lac"].to_sql(dialect="duckdb", source="t")


def sqlite_gives_duckdbs_sets(models: dict, t: pa.Table | None = None) -> None:
    """Each model's exported SQL run on SQLite over ``t`` (default: 300 rows of
    :func:`table`): DuckDB's sets row for row (tests/test_conformal_missing_class.py,
    _raps.py, _groups.py)."""
    t = table(300, 2) if t is None else t
    for name, model in models.items():
        db = sqlite_connection()
        sqlite_table(db, "t", t)
        cur = db.execute(model.to_sql(dialect="sqlite", source="t"))
        names = [c[0] for c in cur.description]
        rows = cur.fetchall()
        same({n: [r[i] for r in rows] for i, n in enumerate(names)}, model, t, f"sqlite {name}")


@pytest.mark.postgres
def test_postgres_gives_duckdbs_sets_and_stores_them(models):
    postgres_gives_duckdbs_sets_and_stores_them(models)


def postgres_gives_duckdbs_sets_and_stores_them(models: dict, t: pa.Table | None = None, also=None) -> None:
    """Each model's exported SQL run on PostgreSQL over ``t`` (default: 300 rows of
    :func:`table`), then each stored there, loaded and scored there: DuckDB's sets row for
    row (also tests/test_conformal_missing_class.py, _raps.py, _groups.py). ``also(pg,
    model)`` checks more on the engine, per model."""
    import psycopg
    from support.engines import postgres_engine
    t = table(300, 2) if t is None else t
    with postgres_engine({"t": t}) as pg:
        for name, model in models.items():
            with psycopg.connect(pg.dsn) as c, c.cursor() as cur:
                cur.execute(model.to_sql(dialect="postgres", source="t"))
                names = [d.name for d in cur.description]
                rows = cur.fetchall()
            same({n: [r[i] for r in rows] for i, n in enumerate(names)}, model, t, f"postgres {name}")
        for name, model in models.items():
            model.save(pg, name)
            loaded = sqlnb.load(pg, name)
            assert loaded.conformal == model.conformal, name
            scored = loaded.score("t", pg, keep=["id"])  # scored on PostgreSQL (a pyarrow table)
            same(scored.to_pydict(), model, t, f"postgres engine {name}")
            if also is not None:
                also(pg, model)


def spark_gives_duckdbs_sets_and_stores_one(models: dict, stored: str, t: pa.Table | None = None, also=None) -> None:
    """Each model's exported SQL run on Spark over ``t`` (default: 300 rows of
    :func:`table`), then model ``stored`` saved in Spark's catalog, loaded and scored
    there (each save is a few catalog writes: one model keeps it short): DuckDB's sets row
    for row. ``also(spark, model)`` checks more on the engine, for ``stored``."""
    from support.engines import spark_engine
    t = table(300, 2) if t is None else t
    with spark_engine({"t": t}) as spark:
        for name, model in models.items():
            rows = [r.asDict() for r in spark.spark.sql(model.to_sql(dialect="spark", source="t")).collect()]
            same({n: [r[n] for r in rows] for n in rows[0]}, model, t, f"spark {name}")
        model = models[stored]
        model.save(spark, "sets", replace=True)
        loaded = sqlnb.load(spark, "sets")
        assert loaded.conformal == model.conformal
        rows = [r.asDict() for r in loaded.score("t", con=spark, keep=["id"]).collect()]
        same({n: [r[n] for r in rows] for n in rows[0]}, model, t, f"spark engine {stored}")
        if also is not None:
            also(spark, model)
