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


def _failing(con, model) -> dict[str, list]:
    """The cut-point test's rows by the column they name."""
    out: dict[str, list] = {}
    for problem, below, above in con.sql(_rendered(dbt_cuts.cuts_test_sql(model, "m", "duckdb"))).fetchall():
        column = problem.split(":")[0].removeprefix("column ")
        assert problem.endswith("fit again and generate the package again") and below is not None, problem
        out.setdefault(column, []).append((problem, below, above))
    return out


def _partition(values: np.ndarray, edges) -> list[int]:
    """Cut points as a partition of the seen values: how many values lie below each."""
    return sorted({int(np.searchsorted(values, e, side="left")) for e in edges})


def _moved(con, model, query: str) -> set[str]:
    """The binned columns whose cut points sqlnb's own fit on ``query``'s rows puts
    elsewhere, as partitions of the seen values."""
    refit = sqlnb.fit(query, "segment", con=con, **FIT)
    out = set()
    for f, g in zip(dbt_cuts.binned(model), dbt_cuts.binned(refit)):
        values = refit.stats.cuts[f.name].values
        if _partition(values, f.edges) != _partition(values, g.edges) or len(f.edges) != len(g.edges):
            out.add(f.name)
    return out


@pytest.mark.parametrize("seed", range(12))
def test_the_cuts_test_fails_for_the_columns_whose_cut_points_a_fit_on_all_rows_moves(seed):
    """A first batch, a second (drawn with a shift of 0 to 0.6, so some columns move and
    some do not) merged as an incremental run: the columns the test names are those
    whose cut points sqlnb's fit on both batches puts elsewhere; after the first batch
    alone, none."""
    rng = np.random.default_rng(seed)
    con = duckdb.connect()
    grid = [0.0, 0.5, 0.25][seed % 3]
    _load(con, "b1", _rows(rng, 300, 0.0, grid=grid))
    _load(con, "b2", _rows(rng, int(rng.integers(20, 400)), float(rng.choice([0.0, 0.1, 0.3, 0.6])), 1000,
                           grid=grid))
    model = sqlnb.fit("b1", "segment", con=con, **FIT)
    assert {f.name for f in dbt_cuts.binned(model) if f.edges} >= {"x", "y", "w"}, model.features
    _train_in_duckdb(con, model, ["b1"])
    assert _failing(con, model) == {}
    for (t,) in con.sql("SELECT table_name FROM information_schema.tables WHERE table_name LIKE 'm_%'").fetchall():
        con.execute(f'DROP TABLE "{t}"')
    _train_in_duckdb(con, model, ["b1", "b2"])
    both = "SELECT * FROM b1 UNION ALL SELECT * FROM b2"
    named, moved = set(_failing(con, model)), _moved(con, model, both)
    assert named == moved, (seed, named, moved)
    print(seed, named, moved)
    con.close()
