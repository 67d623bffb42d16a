"""Issue 27, point 3, the commands left over 300 MB on 10,000 rows (session 37).

``sqlnb cv --kind categorical`` on adult's raw 10,000 rows peaked at ~1 GB: every integer
column taken as categories (fnlwgt with ~8,500 values) and the pooled scoring query of the
5 fold models wrote each fold model's lookup as a ``VALUES`` row per training value
(~55,000 rows of literals: 384 MiB to build the tree, 185 MiB to render it, the rest in
DuckDB's planner). In DuckDB the pooled query now looks values up as a model's own
scoring query does (in place up to ``INLINE_MAX`` values, else packed), with the same
log-probabilities: fold figures still equal refits'. Checked here: refits on a vocabulary
that straddles ``INLINE_MAX`` across the folds, the query's shape per dialect, and the
whole process's peak RSS (a child process, ``getrusage(RUSAGE_CHILDREN)`` of a wrapper
that runs only it, as tests/test_defaults_smallmem.py measures).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa
import pytest

import sqlnb
from sqlnb import sql
from sqlnb.models.naive_bayes.families.categorical import INLINE_MAX
from sqlnb.workflows import cv
from sqlnb.engines import as_engine
from sqlnb.source import read_with
from support.processes import peak_mib
from test_cv import assert_matches_refits, oracle_folds

LIMIT_MIB = 300
ROWS = 10_000

def straddling(seed: int = 0, n: int = 600) -> pa.Table:
    """A BIGINT column with INLINE_MAX + 4 values, 14 of them rare, so that some training
    folds see more than INLINE_MAX values (packed lookup) and others fewer (in place); a
    text column of few values; two classes."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    code = rng.integers(0, INLINE_MAX - 6 - 30 * y, n) * 7  # 94 values, class 1 on the first 64
    code[:14] = INLINE_MAX * 7 + np.arange(14)  # 14 values seen once each
    colour = np.array(["red", "green", "blue"], dtype=object)[(y + rng.integers(0, 2, n)) % 3]
    return pa.table({"code": pa.array(code, pa.int64()), "colour": pa.array(colour), "y": pa.array(y)})


@pytest.mark.parametrize("grid", [None, {"alpha": [0.5], "unseen": ["missing", "bucket"]}, {"estimator": ["mle"]}])
def test_categorical_cv_with_packed_and_inline_fold_lookups_equals_refits(con, grid):
    t = straddling()
    con.register("t", t)
    rows, fold = oracle_folds(con, "t", "y", 4, 1)  # the training folds' vocabularies straddle INLINE_MAX
    sizes = [len(set(rows.filter(pa.array(fold != i))["code"].to_pylist())) for i in range(4)]
    assert min(sizes) <= INLINE_MAX < max(sizes), sizes
    result = sqlnb.cross_validate("t", "y", con=con, folds=4, seed=1, grid=grid, refit=False, kind="categorical")
    assert result.scans["scoring"] == 1
    assert_matches_refits(con, result, "t", kind="categorical")


def _pooled(con, dialect: str, n: int = 300) -> str:
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, n)
    t = pa.table({"weight": pa.array(rng.integers(0, 10 ** 6, n)), "y": pa.array(y)})  # ~n distinct values
    con.register("w", t)
    src, fold = cv.assign_folds(as_engine(con).resolve(read_with("w")), "y", 5, 0, None, "duckdb")
    models = [sqlnb.fit(t, "y", con=con, kind="categorical", features=["weight"])] * 5
    return sql.render(cv.pooled_summary_query(models, src, "y", fold, 5, "cv_model", dialect), dialect)


def test_pooled_query_writes_no_values_row_per_training_value_in_duckdb(con):
    """In DuckDB the pooled query of 5 fold models over a column of ~300 values is a few
    packed literals (no VALUES list); for PostgreSQL it keeps the portable VALUES join."""
    duck = _pooled(con, "duckdb").upper()
    values = duck.count("VALUES") - duck.count("(VALUES (0))")  # the grid's one index is a VALUES list
    assert values == 0 and len(duck) < 40_000, f"{values} VALUES lists, {len(duck):,} characters"
    assert "VALUES" in _pooled(con, "postgres").upper()


def adult_like_csv(path) -> None:
    """10,000 rows shaped as adult's raw file: 6 integer columns (fnlwgt distinct in ~85% of the
    rows, below screening's identifier threshold of 90%, as adult's; the others of 16 to 100
    values) and 8 text columns (2 to 41 categories), a text label."""
    rng = np.random.default_rng(37)
    y = rng.integers(0, 2, ROWS)
    cols = {"age": rng.integers(17, 90, ROWS) + 3 * y, "fnlwgt": rng.integers(0, 30_000, ROWS) * 41 + 12_285,
            "education_num": rng.integers(1, 17, ROWS) + y, "capital_gain": rng.integers(0, 100, ROWS) * 37,
            "capital_loss": rng.integers(0, 73, ROWS) * 29, "hours_per_week": rng.integers(1, 84, ROWS)}
    for c, m in enumerate((8, 16, 7, 14, 6, 5, 2, 41)):
        cols[f"c{c}"] = np.char.add("v", ((rng.integers(0, m, ROWS) + y) % m).astype(str))
    cols["income"] = np.where(y == 1, ">50K", "<=50K")
    duckdb.from_arrow(pa.table(cols)).write_csv(str(path))


def test_cv_categorical_on_10k_raw_rows_within_300_mib(tmp_path):
    data = tmp_path / "adult_like.csv"
    adult_like_csv(data)
    peak = peak_mib(["cv", str(data), "--label", "income", "--kind", "categorical"])
    assert peak <= LIMIT_MIB, f"cv --kind categorical: {peak:.0f} MiB"
