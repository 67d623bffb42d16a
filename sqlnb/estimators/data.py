"""What a scikit-learn estimator is handed, as an Arrow table an in-process DuckDB reads.

``X`` may be a numpy array (or anything ``np.asarray`` takes), a pandas or Polars
DataFrame, a pyarrow Table or RecordBatch, or a DuckDB relation; ``y`` a 1-D array or
any of those libraries' columns. Frames keep their columns: pandas' numeric blocks,
Polars' and Arrow's buffers are read by DuckDB without a copy. A C-ordered numeric numpy
array is handed over as it is, as one fixed-size-list column (:data:`PACKED`, its rows the
array's rows, no copy) that a view reads as one column per feature (``x[j]``); any other
array is laid out column-major once (one copy), after which every column is a zero-copy
Arrow array. NaN becomes NULL (a validity bitmap over the same buffer), which every naive
Bayes family marginalises (contributes no term), as the library does at fit and score.

One DuckDB connection per thread serves every estimator: connecting costs about a
millisecond, and scikit-learn's checks and searches fit thousands of small models.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError
from sqlnb.engines.duckdb import new_connection

#: The name under which the input table is registered while a query reads it.
INPUT = "sqlnb_estimator_input"
#: A numpy array's rows as one ``DOUBLE[d]`` (or integer) column, and the name under which
#: such a table is registered for the view :data:`INPUT` that reads its features by name.
PACKED, PACKED_INPUT = "sqlnb_estimator_rows", "sqlnb_estimator_packed"
#: Up to this many values (rows x columns) ``array_to_arrow(packed="small")`` packs an
#: array that is not C-ordered (one row-major copy): the size up to which GaussianNB
#: fits from the packed rows (:mod:`sqlnb.estimators.moments`).
SMALL_VALUES = 1_000_000
#: Schema metadata key of a packed array's smallest value (NaN when it holds one).
_MINIMUM = "sqlnb_minimum"

_local = threading.local()


class EstimatorInputError(SqlnbError, ValueError):
    """A :class:`~sqlnb.errors.SqlnbError` raised through an estimator: also a ValueError,
    which is what scikit-learn (its checks, ``GridSearchCV(error_score=...)``) expects of
    bad input."""


class EstimatorArgumentError(SqlnbError, TypeError):
    """A keyword argument an estimator's method does not take (``sample_weight`` of LDA,
    QDA and logistic regression), as a :class:`~sqlnb.errors.SqlnbError` whose line says
    what to do instead: also a TypeError, what Python raises for an unexpected argument
    (and what code that retries a fit without weights catches)."""


def connection() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB connection (made on first use, never pickled)."""
    con = getattr(_local, "con", None)
    if con is None:
        con = _local.con = new_connection()
    return con


def is_packed(table: pa.Table) -> bool:
    """Whether ``table`` holds a numpy array's rows as one list column (:data:`PACKED`)."""
    return (table.num_columns > 0 and table.column_names[0] == PACKED
            and pa.types.is_fixed_size_list(table.schema.field(0).type))


def columns(table: pa.Table, names: list[str]) -> dict[str, Any]:
    """The columns that carry the features ``names`` (the packed rows, or one per name),
    to put beside a label and weight column."""
    if is_packed(table):
        return {PACKED: table.column(PACKED)}
    return {n: table.column(n) for n in names}


def column_minimums(table: pa.Table, names: list[str]) -> list[Any]:
    """Each feature's smallest value (None for a column of only NULL/NaN), for the input
    checks. Packed rows are read as one (rows, d) numpy view of their values: taking each
    column out of the list first copied all of them (1M x 20: MultinomialNB's fit went
    from 1.7 to 2.3 s, benchmarks/README.md)."""
    if not is_packed(table):
        return [pc.min(table.column(n)).as_py() for n in names]
    flat = table.column(PACKED).combine_chunks().flatten()
    values = flat.to_numpy(zero_copy_only=False).reshape(-1, len(names))  # NULL read as NaN
    if values.dtype.kind != "f":
        return values.min(axis=0).tolist() if len(values) else [None] * len(names)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: None below
        low = np.nanmin(values, axis=0) if len(values) else np.full(len(names), np.nan)
    return [None if np.isnan(v) else float(v) for v in low]


def packed_nonnegative(table: pa.Table) -> bool:
    """Whether packed rows hold no negative value, NULL or NaN: one pass over the values
    (the minimum is NaN exactly when a value is), where :func:`column_minimums` makes
    several (1M x 20: 75 ms of CPU, load 9)."""
    if not is_packed(table):
        return False
    known = (table.schema.metadata or {}).get(_MINIMUM.encode())
    if known is not None:  # the array's minimum, from array_to_arrow
        return float(known) >= 0
    flat = table.column(PACKED).combine_chunks().flatten()
    values = flat.to_numpy(zero_copy_only=False)
    return flat.null_count == 0 and values.size > 0 and bool(np.min(values) >= 0)


def _unpacking_view(names: list[str], others: list[str]) -> exp.Expression:
    """``CREATE TEMP VIEW INPUT AS SELECT rows[1] AS name_1, …, other columns FROM packed``."""
    rows = sql.col(PACKED)
    items = [exp.alias_(exp.Bracket(this=rows.copy(), expressions=[exp.Literal.number(j)]), sql.ident(n))
             for j, n in enumerate(names)]  # sqlglot's 0-based index, rendered 1-based for DuckDB
    query = exp.select(*items, *[sql.col(o) for o in others]).from_(exp.Table(this=sql.ident(PACKED_INPUT)))
    return exp.Create(this=exp.Table(this=sql.ident(INPUT)), kind="VIEW", expression=query, replace=True,
                      properties=exp.Properties(expressions=[exp.TemporaryProperty()]))


class registered:
    """``with registered(table, names) as (con, name):`` the Arrow table visible as ``name``
    on this thread's connection (packed rows through a view naming its features
    ``names``), and unregistered afterwards (the connection keeps no reference to the
    caller's data)."""

    def __init__(self, table: pa.Table, names: list[str] | None = None):
        self.table, self.names = table, names

    def __enter__(self):
        con = connection()
        if is_packed(self.table):
            con.register(PACKED_INPUT, self.table)
            others = [c for c in self.table.column_names if c != PACKED]
            con.execute(sql.render(_unpacking_view(self.names, others), "duckdb"))
        else:
            con.register(INPUT, self.table)
        return con, INPUT

    def __exit__(self, *exc):
        con = connection()
        try:
            if is_packed(self.table):
                con.execute(sql.render(exp.Drop(tables=[sql.table(INPUT)], kind="VIEW", exists=True),
                                       "duckdb"))
                con.unregister(PACKED_INPUT)
            else:
                con.unregister(INPUT)
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


def array_to_arrow(X: np.ndarray, names: list[str], packed: bool | str = True, packed_nan: bool = True) -> pa.Table:
    """A 2-D array as an Arrow table: a C-ordered numeric array (with ``packed``; holding
    NaN, only with ``packed_nan``) as one fixed-size-list column over its own buffer
    (:data:`PACKED`; 1M x 20 doubles: no copy, where the column-major copy below took 0.3
    to 1.2 s, benchmarks/README.md), any other numeric array too with ``packed="copy"``
    (after one row-major copy); else one column-major copy, then every column shared; NaN
    read as NULL (``from_pandas=True``: a validity bitmap, the values untouched). With
    ``packed="small"``, another array of at most :data:`SMALL_VALUES` values without NaN
    is packed after one row-major copy too (GaussianNB, :mod:`sqlnb.estimators.moments`:
    digits' ``X`` is a strided view)."""
    if packed and X.dtype.kind in "fiu" and X.ndim == 2 and X.shape[1] > 0 and (
            X.flags.c_contiguous or packed == "copy" or (packed == "small" and X.size <= SMALL_VALUES)):
        # The smallest value is NaN exactly when one is (one pass, no boolean array); it
        # is kept in the schema's metadata for packed_nonnegative.
        low = np.min(X) if X.size else 0
        nan = X.dtype.kind == "f" and bool(np.isnan(low))
        if (packed_nan and (X.flags.c_contiguous or packed == "copy")) or not nan:
            X = np.ascontiguousarray(X)
            values = pa.array(X.reshape(-1), from_pandas=nan)
            column = pa.FixedSizeListArray.from_arrays(values, X.shape[1])
            return pa.table({PACKED: column}).replace_schema_metadata({_MINIMUM: repr(float(low))})
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
