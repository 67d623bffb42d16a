"""What a scikit-learn estimator is handed, as an Arrow table an in-process DuckDB reads.

``X`` may be a numpy array (or anything ``np.asarray`` takes), a pandas or Polars
DataFrame, a pyarrow Table or RecordBatch, or a DuckDB relation; ``y`` a 1-D array or
any of those libraries' columns. Frames keep their columns: pandas' numeric blocks,
Polars' and Arrow's buffers are read by DuckDB without a copy. A numpy array is laid
out column-major once (one copy), after which every column is a zero-copy Arrow array.
NaN becomes NULL (a validity bitmap over the same buffer), which every naive Bayes
family marginalises (contributes no term), as the library does at fit and score.

One DuckDB connection per thread serves every estimator: connecting costs about a
millisecond, and scikit-learn's checks and searches fit thousands of small models.
"""

from __future__ import annotations

import threading
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa

from sqlnb.errors import SqlnbError

#: The name under which the input table is registered while a query reads it.
INPUT = "sqlnb_estimator_input"

_local = threading.local()


class EstimatorInputError(SqlnbError, ValueError):
    """A :class:`~sqlnb.errors.SqlnbError` raised through an estimator: also a ValueError,
    which is what scikit-learn (its checks, ``GridSearchCV(error_score=...)``) expects of
    bad input."""


def connection() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB connection (made on first use, never pickled)."""
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = duckdb.connect()
    return con


class registered:
    """``with registered(table) as (con, name):`` the Arrow table visible as ``name`` on
    this thread's connection, and unregistered afterwards (the connection keeps no
    reference to the caller's data)."""

    def __init__(self, table: pa.Table):
        self.table = table

    def __enter__(self):
        con = connection()
        con.register(INPUT, self.table)
        return con, INPUT

    def __exit__(self, *exc):
        try:
            connection().unregister(INPUT)
        except duckdb.Error:  # pragma: no cover - nothing registered
            pass
        return False


def is_frame(X: Any) -> bool:
    """A DataFrame-like input whose columns are read as they are (not through numpy)."""
    if isinstance(X, (pa.Table, pa.RecordBatch, duckdb.DuckDBPyRelation)):
        return True
    module = type(X).__module__
    return module.startswith(("pandas", "polars")) and hasattr(X, "columns")


def frame_to_arrow(X: Any) -> pa.Table:
    """A frame as an Arrow table, its buffers shared where the library allows it."""
    if isinstance(X, pa.Table):
        return X
    if isinstance(X, pa.RecordBatch):
        return pa.Table.from_batches([X])
    if isinstance(X, duckdb.DuckDBPyRelation):
        return X.to_arrow_table()  # runs on the relation's own connection
    if type(X).__module__.startswith("polars"):
        return X.to_arrow()
    return pa.Table.from_pandas(X, preserve_index=False)


def array_to_arrow(X: np.ndarray, names: list[str]) -> pa.Table:
    """A 2-D array as an Arrow table: one column-major copy, then every column shared;
    NaN read as NULL (``from_pandas=True``: a validity bitmap, the values untouched)."""
    if X.dtype.kind == "O":
        return pa.table({n: pa.array(list(X[:, j]), from_pandas=True) for j, n in enumerate(names)})
    F = np.asfortranarray(X)
    # Only a column holding NaN needs a validity bitmap (from_pandas=True scans and
    # allocates one); any other column is shared as it is (1M x 20: 3.1 s -> see
    # benchmarks/README.md, "Estimators").
    nan = np.isnan(F).any(axis=0) if F.dtype.kind == "f" else np.zeros(F.shape[1], dtype=bool)
    return pa.table({n: pa.array(F[:, j], from_pandas=bool(nan[j])) for j, n in enumerate(names)})


def column_to_numpy(y: Any) -> np.ndarray:
    """A label column (numpy, list, pandas/Polars Series, Arrow array, one-column
    relation) as a numpy array; its shape is checked by the caller."""
    if isinstance(y, duckdb.DuckDBPyRelation):
        y = y.to_arrow_table()
    if isinstance(y, (pa.Table, pa.RecordBatch)):
        if y.num_columns != 1:
            raise EstimatorInputError(f"y must be one column, not a table of {y.num_columns} columns")
        y = y.column(0)
    if isinstance(y, (pa.ChunkedArray, pa.Array)):
        return y.to_numpy(zero_copy_only=False)
    if type(y).__module__.startswith("polars"):
        return y.to_numpy()
    return y


def unused_name(base: str, taken: list[str]) -> str:
    """``base`` or ``base_1``, ``base_2``, ...: a column name not among ``taken``."""
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    return name
