"""What the packed-rows paths share: a numpy array's rows read as one ``DOUBLE[d]`` column.

:func:`sqlnb.estimators.data.array_to_arrow` hands a numeric numpy ``X`` to DuckDB as one
fixed-size-list column over its own buffer (:data:`data.PACKED`). Two estimator paths
read that column as it is, without the view that names each feature
(:class:`sqlnb.estimators.data.registered`): :mod:`sqlnb.estimators.counts`
(multinomial, complement and Bernoulli features: one aggregate to fit, one dot product
per class to score) and :mod:`sqlnb.estimators.moments` (Gaussian features: shifted
sums to fit, one lambda per row to score). This module holds what both do alike:

* which tables and models may take such a path (:func:`plain`, :func:`plain_naive_bayes`);
* registering the rows and reading their DuckDB types (:class:`registered_rows`,
  :func:`column_types`);
* the SQL pieces over the rows (:func:`values`, :func:`source`, :func:`grouped_text`,
  :func:`column_range`);
* rendering each query once per shape (:func:`rendered`), running a scoring SELECT whose
  parameters are bound (:func:`run_scores`) and reading its result (:func:`matrix`);
* the fit report (:func:`fit_report`) and the sizes past which a query takes its other
  form (:data:`LONG_VALUES`, :data:`LISTED_ROWS`).

The rendered SQL is cached per shape (its text depends on the columns, classes, value
type and output, never on the fitted numbers, which are bound as parameters), and the
DuckDB types of a registered schema per schema: both are a few entries, whatever the data.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import pyarrow as pa
from sqlglot import exp

from sqlnb import sql
from sqlnb.estimators import data
from sqlnb.models.naive_bayes.model import NaiveBayes
from sqlnb.source import Table

#: Up to this many values (rows × columns) the class sums are read in the long form
#: (one row per class and column, :func:`grouped_text` with ``numbers``). Measured at two
#: points only (benchmarks/README.md, "scikit-learn estimators"): digits'
#: 115,000 values, long 2.8 ms of CPU against 11.3 ms; 20M values, long 312 ms against
#: 124 ms. The crossover between them was not measured.
LONG_VALUES = 1_000_000
#: Up to this many rows the class scores are one lambda per row (a list of K values in
#: the prelude column :data:`DOTS`): cheaper to bind on digits, dearer to run at 1M rows
#: (the crossover, as for ``base.EXACT_ROWS``, not measured). Count models past it score
#: one dot product per class column; Gaussian models take the general scoring SELECT.
LISTED_ROWS = 100_000
#: The prelude column holding a row's K class terms.
DOTS = "sqlnb_dots"
#: Cached shapes beyond which a cache starts again (a long-running process fitting
#: arrays of ever new widths keeps no more than this).
CACHE_MAX = 256
#: Rendered SQL per shape; the types DuckDB gives a registered Arrow schema.
_TEXTS: dict[tuple, str] = {}
_TYPES: dict[Any, list[str]] = {}


def _cached(cache: dict, key: Any, make: Callable[[], Any]) -> Any:
    value = cache.get(key)
    if value is None:
        if len(cache) >= CACHE_MAX:
            cache.clear()
        value = cache[key] = make()
    return value


def rendered(key: tuple, make: Callable[[], str]) -> str:
    """The SQL text of one query shape, built and rendered once per process.

    Parameters
    ----------
    key : tuple
        Everything the text depends on (query kind, columns, classes, value type,
        output, form); never a fitted number, which the query binds as a parameter.
    make : callable
        Builds and renders the text; called only when ``key`` is not cached yet.

    Returns
    -------
    str
        The rendered SQL. Building the sqlglot tree was a third of digits' fit +
        predict_proba (64 columns × 10 classes); a second model of the same shape
        builds nothing. At most :data:`CACHE_MAX` shapes are kept.
    """
    return _cached(_TEXTS, key, make)


def plain(table: pa.Table) -> bool:
    """Whether ``table`` holds packed rows without a NULL (a NaN read as NULL) in them.

    Parameters
    ----------
    table : pyarrow.Table
        The estimator's input (:func:`sqlnb.estimators.data.array_to_arrow`).

    Returns
    -------
    bool
        True when every value is present: the packed paths add every column's term to
        every row and count every row in each column's ``N_c``. A missing value must
        contribute no term (it is marginalised), which only the general path's
        per-column SQL does.
    """
    return data.is_packed(table) and all(c.flatten().null_count == 0 for c in table.column(data.PACKED).chunks)


def plain_naive_bayes(model: Any, names: list[str]) -> bool:
    """Whether ``model`` is a naive Bayes model a packed path may score as it is.

    Parameters
    ----------
    model : Model
        The estimator's fitted model.
    names : list of str
        The input's feature names, in the array's column order.

    Returns
    -------
    bool
        True for a :class:`~sqlnb.models.naive_bayes.model.NaiveBayes` of naive structure
        with nothing applied after its class scores (calibration, conformal sets, a
        decision rule: the packed SELECT ends at the probabilities), whose features are
        the array's columns in order (the packed rows are read by position) and none a
        token bag. The caller then checks the families it scores.
    """
    if not isinstance(model, NaiveBayes) or model.hyper.structure != "naive":
        return False
    if any(getattr(model, a, None) is not None for a in ("calibration", "conformal", "decision")):
        return False
    feats = model.features
    return [f.name for f in feats] == list(names) and all(f.bag is None for f in feats)


class registered_rows:
    """``with registered_rows(table) as con:`` the table visible as ``data.PACKED_INPUT``.

    The packed column is registered under its own name on this thread's connection
    (:func:`sqlnb.estimators.data.connection`), without the view naming each feature that
    the general path reads (binding one expression per column costs DuckDB a fixed time
    each), and unregistered afterwards, so the connection keeps no reference to the
    caller's array.

    Parameters
    ----------
    table : pyarrow.Table
        Packed rows (:data:`data.PACKED`) beside the label and weight columns.
    """

    def __init__(self, table: pa.Table):
        self.table = table

    def __enter__(self):
        con = self.con = data.connection()
        con.register(data.PACKED_INPUT, self.table)
        return con

    def __exit__(self, *exc):
        self.con.unregister(data.PACKED_INPUT)
        return False


def column_types(con, table: pa.Table) -> list[str]:
    """DuckDB's type of each column of the registered ``table``.

    Parameters
    ----------
    con : duckdb.DuckDBPyConnection
        The connection ``table`` is registered on (:class:`registered_rows`).
    table : pyarrow.Table
        The registered table.

    Returns
    -------
    list of str
        One type per column, the packed rows as the type of one value (``DOUBLE`` for
        ``DOUBLE[64]``): the label's type is the model's, and the value type decides
        whether the rows are cast (:func:`values`). Read once per Arrow schema (a
        ``LIMIT 0`` probe still binds a query).
    """
    def read() -> list[str]:
        probe = exp.select(exp.Star()).from_(sql.table(data.PACKED_INPUT)).limit(0)
        types = [str(t) for t in con.sql(sql.render(probe, "duckdb")).types]
        return [types[0].rsplit("[", 1)[0], *types[1:]]
    return _cached(_TYPES, tuple((f.name, str(f.type)) for f in table.schema), read)


def values(value_type: str, width: int) -> exp.Expression:
    """The packed rows (``src``) as a ``DOUBLE[width]`` expression.

    Parameters
    ----------
    value_type : str
        DuckDB's type of one value (:func:`column_types`).
    width : int
        The number of columns ``d``.

    Returns
    -------
    sqlglot.exp.Expression
        The column itself when it holds doubles, else cast to ``DOUBLE[d]``: an integer
        array's sums, squares and dot products are then computed in DOUBLE, as
        :func:`sqlnb.fit` and scikit-learn compute them (an integer sum could overflow,
        an integer product truncate).
    """
    rows = sql.col(data.PACKED, "src")
    if value_type.upper() == "DOUBLE":
        return rows
    return exp.Cast(this=rows, to=exp.DataType.build(f"DOUBLE[{width}]", dialect="duckdb"))


def source(threshold: float | None = None, value_type: str = "DOUBLE", width: int = 0) -> exp.Expression:
    """The registered packed rows as the ``FROM`` of a query, aliased ``src``.

    Parameters
    ----------
    threshold : float, optional
        A Bernoulli threshold ``t``: each row's values read as presence,
        ``list_transform(x, lambda v: CASE WHEN v > t THEN 1.0 ELSE 0.0 END)``, in a
        subquery, so the indicators are computed once per row whatever the classes.
    value_type, width : str, int
        The rows' value type and width (:func:`values`), used with ``threshold`` only.

    Returns
    -------
    sqlglot.exp.Expression
        The table, or the subquery of presence lists.
    """
    table = exp.Table(this=sql.ident(data.PACKED_INPUT), alias=exp.TableAlias(this=sql.ident("src")))
    if threshold is None:
        return table
    v = sql.ident("v")
    present = exp.Case(ifs=[exp.If(this=exp.GT(this=exp.Column(this=v.copy()), expression=sql.dbl(threshold)),
                                   true=sql.dbl(1.0))], default=sql.dbl(0.0))
    lists = exp.Anonymous(this="list_transform", expressions=[values(value_type, width),
                                                              exp.Lambda(this=present, expressions=[v])])
    query = exp.select(exp.alias_(lists, data.PACKED, quoted=True)).from_(table)
    return exp.Subquery(this=query, alias=exp.TableAlias(this=sql.ident("src")))


def column_range(width: int) -> exp.Expression:
    """The column numbers of the long form, ``range(1, width + 1)``.

    Parameters
    ----------
    width : int
        The number of columns ``d``.

    Returns
    -------
    sqlglot.exp.Expression
        The table function :func:`grouped_text` cross joins as ``t(j)``: 1-based, as a
        DuckDB list is indexed (``x[j]`` with ``j`` a column, rendered as written).
    """
    return exp.Anonymous(this="range", expressions=[exp.Literal.number(1), exp.Literal.number(width + 1)])


def grouped_text(cols: list[exp.Expression], label: str, numbers: exp.Expression | None = None) -> str:
    """An aggregate over the packed rows per class, rendered for DuckDB.

    Parameters
    ----------
    cols : list of sqlglot.exp.Expression
        The selected expressions, aliased ``a0, a1, …`` (the caller reads them by
        position).
    label : str
        The label column: ``GROUP BY src.label``.
    numbers : sqlglot.exp.Expression, optional
        A table function of column numbers (:func:`column_range`, or ``unnest($j)`` for
        a listed few). With it, the long form: ``… FROM src CROSS JOIN numbers AS t(j)
        GROUP BY label, j``, one row per class and column, a handful of expressions
        whatever the width. DuckDB binds each expression at a fixed cost (digits' 64
        sums: 10 ms of a 3 ms scan), while the long form's rows cost more to aggregate
        past :data:`LONG_VALUES` values.

    Returns
    -------
    str
        The rendered ``SELECT``.
    """
    query = exp.select(*[exp.alias_(c, f"a{i}", quoted=True) for i, c in enumerate(cols)]).from_(source())
    if numbers is None:
        return sql.render(query.group_by(sql.col(label, "src")), "duckdb")
    numbered = exp.Table(this=numbers, alias=exp.TableAlias(this=sql.ident("t"), columns=[sql.ident("j")]))
    return sql.render(query.join(numbered, join_type="cross").group_by(sql.col(label, "src"), sql.col("j", "t")),
                      "duckdb")


def fit_report(n_rows: float, start: float) -> dict:
    """The fit report :func:`sqlnb.fit` writes, for a model fitted from packed rows.

    Parameters
    ----------
    n_rows : float
        The rows fitted (``Statistics.n_rows``).
    start : float
        ``time.perf_counter()`` when the fit started.

    Returns
    -------
    dict
        ``source`` (the estimator's input table), ``rows``, ``null_label_rows`` (0: a
        NULL label sends the fit to the general path, which reports it) and ``seconds``:
        the same keys and values as the general path's, so the models compare equal.
    """
    return {"source": f"table {str(Table(data.INPUT))!r}", "rows": n_rows, "null_label_rows": 0,
            "seconds": round(time.perf_counter() - start, 3)}


def matrix(result: pa.Table) -> np.ndarray:
    """The columns of a scoring result as one (rows, columns) float array.

    Parameters
    ----------
    result : pyarrow.Table
        The class columns, in the model's class order.

    Returns
    -------
    numpy.ndarray
        Each chunk copied once into its place (1M rows × 3 classes, 24 MB: no stacked
        intermediate copy).
    """
    out = np.empty((result.num_rows, result.num_columns))
    for k, column in enumerate(result.columns):
        pos = 0
        for chunk in column.chunks:
            out[pos:pos + len(chunk), k] = chunk.to_numpy(zero_copy_only=False)
            pos += len(chunk)
    return out


def run_scores(table: pa.Table, key: tuple, make: Callable[[str], str], bound: dict) -> np.ndarray:
    """Run a scoring SELECT over the packed rows of ``table``, its parameters bound.

    Parameters
    ----------
    table : pyarrow.Table
        Packed rows without a missing value (:func:`plain`).
    key : tuple
        The query's shape; the rows' value type is added to it (:func:`rendered`).
    make : callable
        ``make(value_type)`` builds and renders the SELECT (called once per shape).
    bound : dict
        The fitted numbers by parameter name (``$w``, ``$p``, ...), as Python floats and
        lists (``DOUBLE``, ``DOUBLE[]``, ``DOUBLE[][]``): a CAST of the parameters cost
        DuckDB more to bind than digits' dot products cost to run, and literals would
        make the text differ for each fitted model.

    Returns
    -------
    numpy.ndarray
        Per row and class, the SELECT's output (:func:`matrix`).
    """
    with registered_rows(table) as con:
        value_type = column_types(con, table)[0]
        text = rendered((*key, value_type), lambda: make(value_type))
        result = con.sql(text, params=bound).to_arrow_table()
    return matrix(result)
