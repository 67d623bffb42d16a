"""``sqlnb dbt --train`` of binned columns: the per-value counts ``<name>_values`` and the
test ``sqlnb_<name>_cuts``, which fails, naming the column, when the stored counts would
cut a column differently (:mod:`sqlnb.workflows.dbt_cuts`).

The SQL-only tests run the package's SELECTs in DuckDB as dbt would, over random batches,
and compare the test's verdict per column with sqlnb's own cut points on all the rows
(``mdl_cuts``, DuckDB's quantiles) as partitions of the seen values (a cut point that
moves between the same two neighbouring values is the same cut). The slow ones run
``dbt build`` on dbt-duckdb and dbt-postgres.
"""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pytest

import sqlnb
from sqlnb import sql
from sqlnb.workflows import dbt_cuts, dbt_train
from support.dbt import dbt_executable as _dbt, postgres_profiles, results as _results, run as _run
from test_dbt_train import _rendered, _train_in_duckdb

FIT = dict(exclude=["id", "loaded_at"], bins={"x": "mdl", "z": "mdl", "y": "quantile:4", "w": "quantile:3"},
           feature_kinds={"x": "binned", "y": "binned", "z": "binned", "w": "binned", "region": "categorical"})


def _rows(rng: np.random.Generator, n: int, shift: float, start: int = 0, day: int = 1, grid: float = 0.0) -> dict:
    """``n`` labelled rows: x the integers ``3·class … 3·class + 2`` (MDL cuts at 2.5 and
    5.5; with a shift, class c's reach below), y and w continuous and discrete with a shift
    of their own (y on a grid of ``grid``, continuous at 0), z weakly informative; NULLs."""
    label = rng.integers(0, 3, n)
    x = 3.0 * label + rng.integers(0, 3, n) - np.where(label > 0, rng.random(n) < shift, False)
    y = rng.gamma(2.0, 1.0 + shift, n)
    if grid:
        y = np.round(y / grid) * grid
    w = rng.integers(0, 6 + int(3 * shift), n).astype(float)
    z = rng.normal(0.3 * label, 1.0, n).round(1)
    x[rng.random(n) < 0.05] = np.nan
    return {"id": np.arange(start, start + n), "loaded_at": np.full(n, day), "segment": np.array(["a", "b", "c"])[label],
            "x": x, "y": y, "z": z, "w": w, "region": np.array(["n", "s"])[rng.integers(0, 2, n)]}


def _load(con, name: str, rows: dict) -> None:
    import pyarrow as pa

    table = pa.table({k: pa.array(v, from_pandas=True) if v.dtype == float else pa.array(v) for k, v in rows.items()})
    con.register("arrow_rows", table)
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM arrow_rows")
    con.unregister("arrow_rows")


def _column(problem: str) -> str:
    """The column a failing row of the cut-point test names."""
    assert problem.startswith("column ") and problem.endswith("fit again and generate the package again"), problem
    return problem.split(":")[0].removeprefix("column ")


def _failing(con, model, tables: bool = False) -> dict[str, list]:
    """The cut-point test's rows by the column they name; ``tables``: its Spark form, which
    reads MDL's levels from the tables dbt builds there (built here first, in DuckDB)."""
    if tables:
        for table, body in dbt_cuts.tables(model, "m"):
            con.execute(f'CREATE OR REPLACE TABLE "{table}" AS {_rendered(sql.render(body, "duckdb"))}')
    out: dict[str, list] = {}
    test = _rendered(dbt_cuts.cuts_test_sql(model, "m", "duckdb", tables=tables))
    for problem, lo, hi, below, above in con.sql(test).fetchall():
        assert (lo is None) == (hi is None) == ("[lo, hi)" not in problem), (problem, lo, hi)
        out.setdefault(_column(problem), []).append((problem, lo, hi, below, above))
    return {column: sorted(rows, key=repr) for column, rows in out.items()}


def _partition(values: np.ndarray, edges) -> list[int]:
    """Cut points as a partition of the seen values: how many values lie below each."""
    return sorted({int(np.searchsorted(values, e, side="left")) for e in edges})


def _moved(con, model, query: str, fits: dict = FIT) -> set[str]:
    """The binned columns whose cut points sqlnb's own fit on ``query``'s rows (with
    ``fits``) puts elsewhere, as partitions of the seen values."""
    refit = sqlnb.fit(query, "segment", con=con, **fits)
    out = set()
    for f, g in zip(dbt_cuts.binned(model), dbt_cuts.binned(refit)):
        values = refit.stats.cuts[f.name].values
        if _partition(values, f.edges) != _partition(values, g.edges) or len(f.edges) != len(g.edges):
            out.add(f.name)
    return out


@pytest.mark.parametrize("seed", [0, 2, 4, 7, 10, 11])
def test_the_cuts_test_fails_for_the_columns_whose_cut_points_a_fit_on_all_rows_moves(seed):
    """A first batch, a second (drawn with a shift of 0 to 0.6, so some columns move and
    some do not) merged as an incremental run: the columns the test names are those
    whose cut points sqlnb's fit on both batches puts elsewhere; after the first batch
    alone, none. The Spark form (MDL's levels from tables) gives the same rows."""
    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    grid = [0.0, 0.5, 0.25][seed % 3]
    _load(con, "b1", _rows(rng, 300, 0.0, grid=grid))
    _load(con, "b2", _rows(rng, int(rng.integers(20, 400)), float(rng.choice([0.0, 0.1, 0.3, 0.6])), 1000,
                           grid=grid))
    model = sqlnb.fit("b1", "segment", con=con, **FIT)
    assert {f.name for f in dbt_cuts.binned(model) if f.edges} >= {"x", "y", "w"}, model.features
    _train_in_duckdb(con, model, ["b1"])
    assert _failing(con, model) == {} == _failing(con, model, tables=True)
    for (t,) in con.sql("SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'm_%'").fetchall():
        con.execute(f'DROP TABLE "{t}"')
    _train_in_duckdb(con, model, ["b1", "b2"])
    both = "SELECT * FROM b1 UNION ALL SELECT * FROM b2"
    named, moved = set(_failing(con, model)), _moved(con, model, both)
    assert named == moved, (seed, named, moved)
    assert _failing(con, model, tables=True) == _failing(con, model), seed
    print(seed, named, moved)
    con.close()


def test_dbt_import_reads_the_value_counts_back_as_the_fit_keeps_them():
    """The model ``sqlnb dbt-import`` reads from the tables carries the per-value counts
    of its binned columns: the fit's on the same rows (values, rows per class), so that
    ``sqlnb update`` can recompute its cut points."""
    rng = np.random.default_rng(3)
    con = duckdb.connect()
    _load(con, "b1", _rows(rng, 300, 0.0, grid=0.5))
    _load(con, "b2", _rows(rng, 200, 0.3, 1000))
    model = sqlnb.fit("b1", "segment", con=con, **FIT)
    _train_in_duckdb(con, model, ["b1", "b2"])
    imported = dbt_train.import_model(model, con, "m")
    refit = sqlnb.fit("SELECT * FROM b1 UNION ALL SELECT * FROM b2", "segment", con=con, **FIT)
    assert set(imported.stats.cuts) == {"x", "y", "z", "w"}
    for name, want in refit.stats.cuts.items():
        got = imported.stats.cuts[name]
        np.testing.assert_array_equal(got.values, want.values)
        np.testing.assert_array_equal(got.rows, want.rows)
        np.testing.assert_array_equal(got.n, want.n)
    con.close()


def test_the_value_counts_read_the_batch_once_for_every_binned_column():
    """``NAME_values`` counts every binned column in one read of the rows (the fit's
    GROUPING SETS scan: on Spark one scan, expanded a row per set), not a GROUP BY per
    column over the batch (four reads here, each a scan on Spark, which inlines the CTE);
    its rows are those of the fit."""
    import sqlglot

    con = duckdb.connect()
    _load(con, "b1", _rows(np.random.default_rng(3), 300, 0.0))
    model = sqlnb.fit("b1", "segment", con=con, **FIT)
    con.execute("CREATE TABLE rows AS SELECT * FROM b1")
    for dialect in ("duckdb", "postgres", "spark"):
        query = sqlglot.parse_one(_rendered(dbt_train.statistics_sql(model, "m", "values", dialect, None, False)),
                                  dialect)
        assert [t.name for t in query.find_all(sqlglot.exp.Table)].count("new") == 1, dialect
    query = _rendered(dbt_train.statistics_sql(model, "m", "values", "duckdb", None, False))
    got = dbt_cuts.import_values(model, con.sql(query).fetchall(), model.classes)
    for f in dbt_cuts.binned(model):
        np.testing.assert_array_equal(got[f.name].values, model.stats.cuts[f.name].values)
        np.testing.assert_array_equal(got[f.name].n, model.stats.cuts[f.name].n)
    con.close()


def test_on_spark_the_cuts_test_reads_the_mdl_levels_from_tables_built_there():
    """On dbt-spark (which inlines every CTE) the test reads MDL's running counts and each
    level of its recursion from tables the package builds there only (a model each, after
    ``NAME_values``, tagged ``sqlnb_cuts``): a level per cut point of the column that has
    most, and one more; on DuckDB and PostgreSQL they are materialized CTEs of the test."""
    con = duckdb.connect()
    _load(con, "b1", _rows(np.random.default_rng(3), 300, 0.0))
    sqlnb.fit("b1", "segment", con=con, **FIT).save(con, "m")
    model = sqlnb.load(con, "m")
    depth = max(len(f.edges) for f in dbt_cuts.binned(model) if f.bins == "mdl")
    names = ["m_cuts_running", *(f"m_cuts_mdl_{t}" for t in range(depth + 1))]
    assert [t for t, _ in dbt_cuts.tables(model, "m")] == names
    spark = dbt_cuts.cuts_test_sql(model, "m", "spark")
    assert "MATERIALIZED" not in spark and "not run" not in spark
    assert all(f"{{{{ ref('{t}') }}}}" in spark for t in names[1:]) and "ref('m_values')" in spark
    files = dbt_train.training_files(model, "m")
    for t in names:
        head = files[f"models/train/{t}.sql"].splitlines()[0]
        assert "materialized='table'" in head and "target.type == 'spark'" in head and "sqlnb_cuts" in head, head
    assert "ref('m_cuts_running')" in files["models/train/m_cuts_mdl_0.sql"]
    assert "ref('m_cuts_mdl_0')" in files["models/train/m_cuts_mdl_1.sql"]
    for dialect in ("duckdb", "postgres"):
        text = dbt_cuts.cuts_test_sql(model, "m", dialect)
        assert "mdl_0" in text and "MATERIALIZED" in text and "m_cuts_" not in text
    assert [f.name for f in dbt_train._parts(model)["values"]] == ["x", "y", "z", "w"]
    con.close()


# -- dbt build on dbt-duckdb and dbt-postgres ---------------------------------------------------------

#: Two models, each trained on a table of its own: MDL's column x, and quantile:4's y with
#: quantile:3's w.
MODELS = {"mcut": dict(features=["x", "region"], bins={"x": "mdl"},
                       feature_kinds={"x": "binned", "region": "categorical"}),
          "qcut": dict(features=["y", "w", "region"], bins={"y": "quantile:4", "w": "quantile:3"},
                       feature_kinds={"y": "binned", "w": "binned", "region": "categorical"})}
VARS = json.dumps({f"sqlnb_{name}_train_table": f"{name}_train" for name in MODELS})


def _steps(con) -> list[tuple[str | None, str, set]]:
    """The batches, each (model whose table it goes to, or None for both; its rows' SQL;
    the columns whose cut points have moved once it is counted)."""
    rng = np.random.default_rng(7)
    first = _rows(rng, 300, 0.0, grid=0.5)
    _load(con, "b1", first)
    _load(con, "b_again", {**first, "id": first["id"] + 5000, "loaded_at": first["loaded_at"] + 1})
    _load(con, "b_mdl", _rows(rng, 300, 0.6, 1000, day=3, grid=0.5))
    _load(con, "b_q", _rows(rng, 200, 0.6, 2000, day=4, grid=0.5))
    return [(None, "SELECT * FROM b1", set()), (None, "SELECT * FROM b_again", set()),
            ("mcut", "SELECT * FROM b_mdl", {"x"}), ("qcut", "SELECT * FROM b_q", {"x", "y", "w"})]


def _oracle(con, steps) -> None:
    """The cut points moved after each batch are those it says (sqlnb's fit on the rows so far)."""
    so_far: dict[str, list] = {name: [] for name in MODELS}
    for target, query, columns in steps:
        for name in MODELS:
            if target in (None, name):
                so_far[name].append(query)
            model = sqlnb.fit("b1", "segment", con=con, **MODELS[name])
            rows = " UNION ALL ".join(f"({q})" for q in so_far[name])
            refit = sqlnb.fit(f"SELECT * FROM ({rows})", "segment", con=con, **MODELS[name])
            moved = {f.name for f, g in zip(dbt_cuts.binned(model), dbt_cuts.binned(refit))
                     if _partition(refit.stats.cuts[f.name].values, f.edges)
                     != _partition(refit.stats.cuts[f.name].values, g.edges)}
            assert moved == columns & set(MODELS[name]["bins"]), (name, query, moved)


def _statuses(project) -> dict[str, str]:
    return {n: s for n, s in _results(project).items() if n.startswith("sqlnb_") and "_cuts_" in n}


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory):
    """A DuckDB warehouse with the batches and both models fitted on the first, and the
    project of ``mcut`` (``--project --train --loaded-at``) with ``qcut``'s package."""
    from support.dbt import train_project

    dbt = _dbt()
    tmp = tmp_path_factory.mktemp("dbt_cuts")
    wh = tmp / "wh.duckdb"
    con = duckdb.connect(str(wh))
    steps = _steps(con)
    con.execute("CREATE TABLE customers AS SELECT * FROM b1")
    for name in MODELS:
        sqlnb.fit("b1", "segment", con=con, **MODELS[name]).save(con, name)
        con.execute(f"CREATE TABLE {name}_train AS SELECT * FROM b1 LIMIT 0")
    con.close()
    out = tmp / "project"
    train_project(wh, out, "mcut", {"qcut": ["--loaded-at", "loaded_at"]}, ["--loaded-at", "loaded_at"])
    return dbt, wh, out, steps


def _failures(cursor, schema: str, test: str) -> list[str]:
    return [r[0] for r in cursor.execute(f"SELECT problem FROM {schema}.{test}").fetchall()]


def _walk(dbt, project, profiles, steps, insert, failures) -> None:
    """Each batch inserted into its model's table, then ``dbt build --store-failures``: the
    first two pass; after each later one the test of each model whose column has moved
    fails, its stored failing rows naming that column, and the other's passes."""
    for target, query, columns in steps:
        for name in MODELS:
            if target in (None, name):
                insert(f"{name}_train", query)
        done = _run([dbt, "build", "--profiles-dir", str(profiles), "--vars", VARS, "--store-failures"], project,
                    f"dbt build after {query}", ok=not columns)
        status = _statuses(project)
        assert set(status) == {"sqlnb_mcut_cuts_mcut_values_", "sqlnb_qcut_cuts_qcut_values_"}, status
        if not columns:
            assert set(_results(project).values()) == {"success", "pass"}
            continue
        assert done.returncode != 0
        mine = {n: columns & set(MODELS[n]["bins"]) for n in MODELS}
        assert status == {f"sqlnb_{n}_cuts_{n}_values_": "fail" if mine[n] else "pass" for n in MODELS}, status
        for n in MODELS:
            if mine[n]:
                named = {_column(p) for p in failures(f"sqlnb_{n}_cuts_{n}_values_")}
                assert named == mine[n], (n, named)


@pytest.mark.slow
def test_dbt_build_fails_the_cuts_test_naming_the_column_a_batch_moves_on_duckdb(warehouse):
    """On dbt-duckdb: the first batch and a copy of it pass; a batch that moves x's MDL
    cut points fails ``sqlnb_mcut_cuts``, one that moves y's and w's quantiles ``sqlnb_qcut_cuts``,
    each failing row naming the column (the batches checked against sqlnb's own fit)."""
    dbt, wh, out, steps = warehouse
    con = duckdb.connect(str(wh), read_only=True)
    _oracle(con, steps)
    con.close()

    def insert(table: str, query: str) -> None:
        with duckdb.connect(str(wh)) as c:
            c.execute(f"INSERT INTO {table} {query}")

    def failures(test: str) -> list[str]:
        with duckdb.connect(str(wh), read_only=True) as c:
            return _failures(c, "main_dbt_test__audit", test)

    _walk(dbt, out, out, steps, insert, failures)


@pytest.mark.postgres
def test_dbt_build_fails_the_cuts_test_naming_the_column_a_batch_moves_on_postgres(warehouse, tmp_path):
    """The same batches through the same project on dbt-postgres: the same verdicts."""
    import shutil

    import psycopg

    from support.engines import postgres_engine

    dbt, wh, out, steps = warehouse
    con = duckdb.connect(str(wh), read_only=True)
    tables = {t: con.sql(f"SELECT * FROM {t} LIMIT 0" if t.endswith("_train") else f"SELECT * FROM {t}")
              .to_arrow_table() for t in ("b1", "b_again", "b_mdl", "b_q", "customers", "mcut_train", "qcut_train")}
    models = {name: sqlnb.load(con, name) for name in MODELS}
    con.close()
    with postgres_engine(tables) as pg:
        for name, model in models.items():
            model.save(pg, name)
        profiles = postgres_profiles(tmp_path / "profiles", "sqlnb_mcut_example", pg.dsn)
        copy = tmp_path / "pg_project"
        shutil.copytree(out, copy, ignore=shutil.ignore_patterns("target", "logs"))

        def insert(table: str, query: str) -> None:
            with psycopg.connect(pg.dsn) as c:
                c.execute(f"INSERT INTO {table} {query}")

        def failures(test: str) -> list[str]:
            with psycopg.connect(pg.dsn) as c:
                return _failures(c, "public_dbt_test__audit", test)

        _walk(dbt, copy, profiles, steps, insert, failures)
