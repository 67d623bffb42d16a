"""Every naive Bayes family fitted and scored on PostgreSQL and Spark, against DuckDB.

The tests start a throw-away PostgreSQL server (tests/support/postgres.py) and one local
Spark session (tests/support/spark.py) for the whole run. On a user's machine without
them the tests are skipped with the reason; on CI (environment variable ``CI`` set) a
missing engine is a failure, so a broken install cannot pass as green.

What is compared, per family and engine:

* the model fitted on the engine (statistics scan + GROUPING SETS counts, no
  ``histogram()``) has the same typed classes and the same statistics as the model
  fitted in DuckDB (``histogram()``);
* scoring on the engine gives the same predictions as DuckDB, and probabilities and
  log-probabilities within 1e-9 (all engines compute in IEEE doubles; only summation
  order and the math library's last bit differ — measured differences are ~1e-15);
* a model saved on the engine and loaded back scores the same.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb.engines import PostgresEngine, SparkEngine
from sqlnb.errors import SqlnbNotFound
from support.engines import NOT_AVAILABLE, start_postgres as _start_postgres, unavailable as _unavailable
from support.sqlite import sqlite_connection, sqlite_table

TOL = 1e-9


# -- data -----------------------------------------------------------------------------------
def _data() -> dict[str, pa.Table]:
    """Three small deterministic data sets (60 rows each)."""
    rng = np.random.RandomState(7)
    n = 60
    y = np.array(["a", "b", "c"])[np.arange(n) % 3]
    k = np.arange(n) % 3
    x1 = rng.normal(k * 1.5, 1.0 + 0.3 * k)
    x1[[4, 17]] = np.nan  # NULLs below
    colour = np.array(["red", "green", "blue", "grey"])[(k + rng.randint(0, 3, n)) % 4].astype(object)
    colour[[5, 30]] = None
    flag = (rng.rand(n) < 0.3 + 0.2 * k).astype(object)
    flag[[8]] = None
    mixed = pa.table({
        "id": np.arange(n),
        "x1": pa.array([None if math.isnan(v) else float(v) for v in x1], pa.float64()),
        "x2": rng.normal(-k, 2.0),
        "n": rng.poisson(2 + k),
        "colour": pa.array(colour.tolist(), pa.string()),
        "flag": pa.array(flag.tolist(), pa.bool_()),
        "w": rng.uniform(0.5, 2.0, n),
        "member": pa.array((rng.rand(n) < 0.3 + 0.2 * k).tolist(), pa.bool_()),  # BOOLEAN, never NULL
        "y": y,
    })
    counts = pa.table({"id": np.arange(n), **{f"t{j}": rng.poisson(1 + (k == j % 3) * 2) for j in range(5)},
                       "y": pa.array(k, pa.int32())})
    cats = pa.table({
        "id": np.arange(n),
        "c1": np.array(["u", "v", "w"])[(k + rng.randint(0, 2, n)) % 3],
        "c2": pa.array(((k * 2 + rng.randint(0, 3, n)) % 5).tolist(), pa.int32()),
        "y": pa.array((k == 1).tolist(), pa.bool_()),
    })
    return {"mixed": mixed, "counts": counts, "cats": cats}


DATA = _data()

#: family -> (data set, fit keyword arguments)
CASES = {
    "gaussian": ("mixed", dict(features=["x1", "x2", "n"], kind="gaussian")),
    "bernoulli": ("counts", dict(exclude=["id"], kind="bernoulli", binarize=1.0)),
    "multinomial": ("counts", dict(exclude=["id"], kind="multinomial")),
    "complement": ("counts", dict(exclude=["id"], kind="complement")),
    "categorical": ("cats", dict(exclude=["id"], kind="categorical")),
    "mixed": ("mixed", dict(exclude=["id", "w"])),  # gaussian + categorical + bernoulli (boolean)
    "mixed-weighted": ("mixed", dict(exclude=["id"], weight="w")),
    # MDL cut points from the engine's GROUPING SETS counts, bins scored by CASE chains
    "binned": ("mixed", dict(features=["x1", "x2", "n", "colour"], bins="mdl", weight="w")),
}


# -- engines ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def duck():
    con = duckdb.connect()
    for name, t in DATA.items():
        con.register(name, t)
    yield con
    con.close()


@pytest.fixture(scope="session")
def postgres():
    cm, dsn = _start_postgres()
    try:
        try:
            engine = PostgresEngine(dsn)
        except ImportError as e:
            _unavailable("psycopg", e)
        for name, t in DATA.items():
            engine.write_table(name, t)
        yield engine
        engine.close()
    finally:
        cm.__exit__(None, None, None)


def _start_spark():
    """Start the session and run a first query (the JVM's warm-up, ~10 s, is in there)."""
    from support.spark import spark_session
    cm = spark_session()
    session = cm.__enter__()
    for name, t in DATA.items():
        session.createDataFrame(t).createOrReplaceTempView(name)
    session.sql("SELECT 1").collect()
    return cm, session


@pytest.fixture(scope="session")
def spark():
    """One local session for this file's Spark tests, started in this (the main) thread when
    the first of them runs. It was started in a background thread to overlap the PostgreSQL
    tests; pyspark launches the JVM with ``subprocess.Popen(preexec_fn=...)``, which runs
    Python in the forked child and is not safe while other threads run: under pytest-xdist,
    where this file ran after scikit-learn's checks in the same worker, the child segfaulted
    in ``_execute_child`` and every Spark test failed. Two workers keep both cores busy, so the
    overlap gained nothing there."""
    try:
        cm, session = _start_spark()
    except NOT_AVAILABLE as e:  # pyspark or Java missing; a JVM failing to start is an error
        _unavailable("Spark", e)
    yield SparkEngine(session)
    cm.__exit__(None, None, None)


def _engine_params(names):
    """(engine, x) for every x, PostgreSQL first."""
    return [pytest.param(e, n, marks=getattr(pytest.mark, e), id=f"{e}-{n}") for e in ("postgres", "spark")
            for n in names]


# -- helpers ---------------------------------------------------------------------------------
def _rows(result) -> dict:
    """Engine result (DuckDB relation, pyarrow table, Spark DataFrame) -> column dict by id."""
    if isinstance(result, duckdb.DuckDBPyRelation):
        t = result.to_arrow_table()
    elif isinstance(result, pa.Table):
        t = result
    else:  # Spark DataFrame: the scored test rows are few
        rows = [r.asDict() for r in result.collect()]
        t = pa.Table.from_pylist(rows)
    return t.sort_by("id").to_pydict()


def _compare(model, got: dict, want: dict, where: str) -> None:
    assert got["prediction"] == want["prediction"], f"{where}: predictions differ"
    for col in model.proba_columns() + [c.replace("proba_", "log_proba_", 1) for c in model.proba_columns()]:
        a = np.array(got[col], dtype=float)
        b = np.array(want[col], dtype=float)
        np.testing.assert_allclose(a, b, rtol=0, atol=TOL, err_msg=f"{where}: column {col}")


def _same_statistics(a, b) -> None:
    assert a.classes == b.classes and [type(c) for c in a.classes] == [type(c) for c in b.classes]
    np.testing.assert_allclose(a.stats.class_n, b.stats.class_n, rtol=1e-12)
    for name, sa in a.stats.features.items():
        sb = b.stats.features[name]
        if hasattr(sa, "values"):
            assert sa.values == sb.values and [type(v) for v in sa.values] == [type(v) for v in sb.values]
        for field in sa.__dataclass_fields__:
            va, vb = getattr(sa, field), getattr(sb, field)
            if isinstance(va, np.ndarray):
                np.testing.assert_allclose(va, vb, rtol=1e-12, atol=1e-12, err_msg=f"{name}.{field}")


# -- SQLite (stdlib): the exported scoring SELECT -----------------------------------------------
@pytest.mark.parametrize("family", list(CASES) + ["lda", "qda", "logistic"])
def test_sqlite_runs_the_exported_scoring_select(duck, family):
    if family in ("lda", "qda", "logistic"):
        data, kwargs = "mixed", dict(model=family, features=["x2", "n", "member"])
    else:
        data, kwargs = CASES[family]
    model = sqlnb.fit(data, "y", con=duck, **kwargs)
    db = sqlite_connection()
    sqlite_table(db, data, DATA[data])
    cur = db.execute(model.to_sql(dialect="sqlite", source=data, outputs=("log_proba", "proba", "prediction")))
    names = [c[0] for c in cur.description]
    got = _fetch_sqlite(cur.fetchall(), names)
    want = _rows(model.score(data, con=duck, outputs=("log_proba", "proba", "prediction"), keep=["id"]))
    # SQLite has no boolean type: a boolean label comes back as 0/1.
    if isinstance(model.classes[0], bool):
        got["prediction"] = [None if v is None else bool(v) for v in got["prediction"]]
    _compare(model, got, want, f"sqlite {family}")


def _fetch_sqlite(rows, names) -> dict:
    return _fetch(rows, names).sort_by("id").to_pydict()


def test_sqlite_runs_the_reference_fit_and_score_sql():
    """sql/sqlite/fit.sql (window-mean variance, UNION ALL counts) gives DuckDB's statistics,
    and sql/sqlite/score.sql DuckDB's probabilities."""
    from pathlib import Path

    from sqlnb.workflows.export import fit_queries
    from sqlnb.reference import example_data, example_model
    from sqlnb import sql
    root = Path(__file__).resolve().parents[1] / "sql"
    model, con = example_model()
    db = sqlite_connection()
    sqlite_table(db, "train", example_data())
    sqlite_table(db, "input", example_data().drop_columns(["species"]))
    statements = [s for s in (root / "sqlite" / "fit.sql").read_text().split(";\n") if s.strip(" \n;-")
                  and not all(line.startswith("--") for line in s.strip().splitlines())]
    # The same statements rendered for DuckDB without histogram(): the GROUPING SETS path.
    reference = fit_queries("train", "species", model.features, "postgres")
    assert len(statements) == len(reference) == 2
    for text, tree in zip(statements, reference):
        got = sorted(db.execute(text).fetchall(), key=repr)
        want = sorted(con.execute(sql.render(tree, "duckdb")).fetchall(), key=repr)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            for a, b in zip(g, w):
                if isinstance(b, float):
                    assert a == pytest.approx(b, rel=1e-12, abs=1e-12), (g, w)
                else:
                    assert a == b, (g, w)
    cur = db.execute((root / "sqlite" / "score.sql").read_text())
    names = [c[0] for c in cur.description]
    got = _fetch(cur.fetchall(), names)
    con.register("input", example_data().drop_columns(["species"]))
    want = con.sql((root / "duckdb" / "score.sql").read_text()).to_arrow_table()
    _compare_tables(model, got, want, "sqlite reference")


# -- PostgreSQL and Spark ---------------------------------------------------------------------
@pytest.mark.postgres
def test_postgres_save_load_list_drop(postgres, duck):
    model = sqlnb.fit("mixed", "y", con=postgres, exclude=["id"], weight="w")
    model.save(postgres, "mixed model's name")
    with pytest.raises(sqlnb.SqlnbError, match="already exists"):
        model.save(postgres, "mixed model's name")
    model.save(postgres, "mixed model's name", replace=True)
    assert [m["name"] for m in sqlnb.list_models(postgres)] == ["mixed model's name"]
    loaded = sqlnb.load(postgres, "mixed model's name")
    _same_statistics(loaded, model)
    outputs = ("log_proba", "proba", "prediction")
    _compare(model, _rows(loaded.score("mixed", con=postgres, outputs=outputs, keep=["id"])),
             _rows(model.score("mixed", con=duck, outputs=outputs, keep=["id"])), "postgres load")
    sqlnb.drop(postgres, "mixed model's name")
    assert sqlnb.list_models(postgres) == []
    with pytest.raises(sqlnb.SqlnbError, match="no model named"):
        sqlnb.load(postgres, "mixed model's name")


@pytest.mark.postgres
def test_postgres_failed_save_leaves_nothing(postgres):
    model = sqlnb.fit("cats", "y", con=postgres, exclude=["id"], kind="categorical")
    before = postgres.execute(_count_tables())

    class Broken:
        kind = model.kind

        def parameter_tables(self):
            parts = model.parameter_tables()
            parts["zz_broken"] = (parts["classes"][0], {"label": "NOT A TYPE"})
            return parts

        def metadata(self):
            return model.metadata()

    with pytest.raises(Exception):
        sqlnb.store.save_model(Broken(), postgres, "broken")
    assert postgres.execute(_count_tables()) == before
    assert "broken" not in [m["name"] for m in sqlnb.list_models(postgres)]


def _count_tables():
    from sqlglot import exp
    return exp.select(exp.Count(this=exp.Star())).from_(exp.to_table("information_schema.tables")).where(
        exp.column("table_schema").eq(exp.Literal.string("sqlnb")))


@pytest.mark.parametrize(("engine_name", "family"), _engine_params(list(CASES)))
def test_fit_and_score_on_engine_match_duckdb(request, engine_name, duck, family):
    engine = request.getfixturevalue(engine_name)
    data, kwargs = CASES[family]
    expected = sqlnb.fit(data, "y", con=duck, **kwargs)
    model = sqlnb.fit(data, "y", con=engine, **kwargs)
    _same_statistics(model, expected)
    outputs = ("log_proba", "proba", "prediction")
    want = _rows(expected.score(data, con=duck, outputs=outputs, keep=["id"]))
    got = _rows(model.score(data, con=engine, outputs=outputs, keep=["id"]))
    _compare(expected, got, want, f"{engine.dialect} {family}")


@pytest.mark.spark
def test_spark_save_load_replace_drop(spark, duck):
    # A Gaussian model has two parameter tables: few Spark writes, a quick test.
    kwargs = dict(features=["x1", "x2"], kind="gaussian")
    model = sqlnb.fit("mixed", "y", con=spark, **kwargs)
    model.save(spark, "gauss")
    with pytest.raises(sqlnb.SqlnbError, match="already exists"):
        model.save(spark, "gauss")
    other = model.with_params(var_smoothing=0.5)
    other.save(spark, "gauss", replace=True)  # the newest catalog row wins
    loaded = sqlnb.load(spark, "gauss")
    assert loaded.hyper.var_smoothing == 0.5
    _same_statistics(loaded, model)
    outputs = ("log_proba", "proba", "prediction")
    _compare(other, _rows(loaded.score("mixed", con=spark, outputs=outputs, keep=["id"])),
             _rows(other.score("mixed", con=duck, outputs=outputs, keep=["id"])), "spark load")
    assert [m["name"] for m in sqlnb.list_models(spark)] == ["gauss"]
    sqlnb.drop(spark, "gauss")
    assert sqlnb.list_models(spark) == []


@pytest.mark.parametrize(("engine_name", "kind"), _engine_params(["lda", "qda", "logistic"]))
def test_dense_models_fit_and_score_on_engine(request, engine_name, duck, kind):
    """LDA, QDA (moments aggregated on the engine) and logistic regression (rows read once
    through the engine) fitted and scored there equal the DuckDB fit."""
    engine = request.getfixturevalue(engine_name)
    expected = sqlnb.fit("mixed", "y", con=duck, model=kind, features=["x2", "n", "member"])
    model = sqlnb.fit("mixed", "y", con=engine, model=kind, features=["x2", "n", "member"])
    assert model.classes == expected.classes
    outputs = ("log_proba", "proba", "prediction")
    want = _rows(expected.score("mixed", con=duck, outputs=outputs, keep=["id"]))
    got = _rows(model.score("mixed", con=engine, outputs=outputs, keep=["id"]))
    _compare(expected, got, want, f"{engine.dialect} {kind}")
    for name, (table, _) in expected.parameter_tables().items():  # the learned parameters too
        other = model.parameter_tables()[name][0]
        for col in table.column_names:
            a, b = table.column(col).to_pylist(), other.column(col).to_pylist()
            if a and isinstance(a[0], float):
                np.testing.assert_allclose(b, a, rtol=1e-9, atol=1e-12, err_msg=f"{kind} {name}.{col}")
            else:
                assert a == b, f"{kind} {name}.{col}"


@pytest.mark.spark
def test_starting_an_engine_beside_a_running_session_keeps_its_settings(spark):
    """SparkEngine.start sets hugeMethodLimit on the sessions it starts, never on a session
    the caller already runs in this process (which it reuses)."""
    from sqlnb.engines.spark import HUGE_METHOD_LIMIT

    before = spark.spark.conf.get("spark.sql.codegen.hugeMethodLimit")
    engine = SparkEngine.start()
    assert engine.spark is spark.spark and not engine._owned
    assert spark.spark.conf.get("spark.sql.codegen.hugeMethodLimit") == before != str(HUGE_METHOD_LIMIT)
    engine.close()  # not owned: the caller's session goes on
    assert spark.spark.range(1).count() == 1


@pytest.mark.spark
def test_spark_reads_files_itself(spark, duck, tmp_path):
    """Parquet (a glob and a directory) and CSV files, read by spark.read: the model and
    the scores equal DuckDB's on the same files."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    t = DATA["mixed"].drop_columns(["w"])
    (tmp_path / "pq").mkdir()
    pq.write_table(t.slice(0, 30), tmp_path / "pq" / "part-0.parquet")
    pq.write_table(t.slice(30), tmp_path / "pq" / "part-1.parquet")
    pcsv.write_csv(t, tmp_path / "mixed.csv")
    outputs = ("log_proba", "proba", "prediction")
    for path in (str(tmp_path / "pq" / "*.parquet"), str(tmp_path / "pq"), str(tmp_path / "mixed.csv")):
        expected = sqlnb.fit(path, "y", con=duck, exclude=["id"])
        model = sqlnb.fit(path, "y", con=spark, exclude=["id"])
        _same_statistics(model, expected)
        _compare(expected, _rows(model.score(path, con=spark, outputs=outputs, keep=["id"])),
                 _rows(expected.score(path, con=duck, outputs=outputs, keep=["id"])), f"spark {path}")
    with pytest.raises(SqlnbNotFound, match="no file matches"):
        sqlnb.fit(str(tmp_path / "none" / "*.parquet"), "y", con=spark)


@pytest.mark.parametrize("engine_name", [pytest.param("postgres", marks=pytest.mark.postgres),
                                         pytest.param("spark", marks=pytest.mark.spark)])
def test_reference_sql_runs_on_engine(request, engine_name):
    """sql/<dialect>/score.sql (the checked-in reference) runs there with DuckDB's results."""
    engine = request.getfixturevalue(engine_name)
    from pathlib import Path

    from sqlnb.reference import example_data, example_model
    root = Path(__file__).resolve().parents[1] / "sql"
    model, con = example_model()
    inputs = example_data().drop_columns(["species"])
    inputs = inputs.append_column("id", pa.array(range(inputs.num_rows)))
    name = "input"
    if engine.dialect == "postgres":
        if not engine.execute(_table_exists(name)):
            engine.write_table(name, inputs)
        with engine.con.cursor() as cur:
            cur.execute((root / "postgres" / "score.sql").read_text())
            got = _fetch(cur.fetchall(), [c.name for c in cur.description])
    else:
        engine.spark.createDataFrame(inputs).createOrReplaceTempView(name)
        # spark.sql takes one statement, without the trailing semicolon.
        text = (root / "spark" / "score.sql").read_text().rstrip().rstrip(";")
        got = pa.Table.from_pylist([r.asDict() for r in engine.spark.sql(text).collect()])
    con.register("input", inputs)
    want = con.sql((root / "duckdb" / "score.sql").read_text()).to_arrow_table()
    _compare_tables(model, got, want, engine.dialect)


def _table_exists(name):
    from sqlglot import exp
    return exp.select(exp.column("table_name")).from_(exp.to_table("information_schema.tables")).where(
        exp.column("table_name").eq(exp.Literal.string(name)))


def _fetch(rows, names) -> pa.Table:
    return pa.table({n: pa.array([r[i] for r in rows]) for i, n in enumerate(names)})


def _compare_tables(model, got: pa.Table, want: pa.Table, where: str) -> None:
    """Row order of a SELECT without ORDER BY follows the input; compare by position."""
    g, w = got.to_pydict(), want.to_pydict()
    assert g["prediction"] == w["prediction"], f"{where}: predictions differ"
    for col in model.proba_columns():
        np.testing.assert_allclose(np.array(g[col], dtype=float), np.array(w[col], dtype=float),
                                   rtol=0, atol=TOL, err_msg=f"{where}: {col}")


# -- types --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("dialect", "native", "kind"), [
    ("postgres", "double precision", "gaussian"), ("postgres", "real", "gaussian"),
    ("postgres", "numeric(10,2)", "gaussian"), ("postgres", "integer", "gaussian"),
    ("postgres", "int8", "gaussian"), ("postgres", "boolean", "bernoulli"), ("postgres", "text", "categorical"),
    ("postgres", "character varying", "categorical"), ("postgres", "interval", None),
    ("spark", "double", "gaussian"), ("spark", "float", "gaussian"), ("spark", "int", "gaussian"),
    ("spark", "decimal(10,2)", "gaussian"), ("spark", "boolean", "bernoulli"), ("spark", "string", "categorical"),
    ("spark", "interval day to second", None), ("spark", "array<int>", None),
])
def test_native_types_map_to_default_kinds(dialect, native, kind):
    from sqlnb.engines import duckdb_type
    from sqlnb.models.naive_bayes.fit import default_kind
    assert default_kind(duckdb_type(native, dialect)) == kind
    assert default_kind(native) == kind  # the native spelling too, e.g. from a stored model


@pytest.mark.parametrize("engine_name", [pytest.param("postgres", marks=pytest.mark.postgres),
                                         pytest.param("spark", marks=pytest.mark.spark)])
def test_a_key_column_orders_the_rows_where_the_engine_keeps_no_order(request, engine_name, duck):
    """PostgreSQL and Spark promise no row order: ``key`` carries a column into the result
    (also with ``keep=[]``) and sorts on it, so predictions join back in one line."""
    engine = request.getfixturevalue(engine_name)
    model = sqlnb.fit("mixed", "y", con=duck, exclude=["id", "w"])
    got = _rows(model.score("mixed", con=engine, outputs=("prediction",), keep=[], key="id"))
    want = _rows(model.score("mixed", con=duck, outputs=("prediction",), keep=["id"]))
    assert got == want
    result = model.score("mixed", con=engine, outputs=("prediction",), keep=[], key="id")
    ids = [r[0] for r in result.select("id").collect()] if engine_name == "spark" else result.column("id").to_pylist()
    assert ids == sorted(ids)
    exported = \
        model.to_sql(engine.dialect, source="mixed", key="id")
    rows = engine.execute(sqlglot_parse(exported, engine.dialect))
    assert [r[0] for r in rows] == sorted(r[0] for r in rows)


def sqlglot_parse(text: str, dialect: str):
    import sqlglot
    return sqlglot.parse_one(text, dialect=dialect)
