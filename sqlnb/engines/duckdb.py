"""DuckDB, the default engine: a thin wrapper of a connection."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator, Mapping

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.engines.base import ColumnsFromResolve
from sqlnb.source import resolve


#: DuckDB's setting of the optimizers it skips, and the one :meth:`DuckDBEngine.first_rows` adds.
DISABLED = "disabled_optimizers"
LATE_MATERIALIZATION = "late_materialization"


#: How DuckDB's out-of-memory errors begin, wherever they surface.
OUT_OF_MEMORY = "Out of Memory Error"


@contextmanager
def stream_errors() -> Iterator[None]:
    """Raise DuckDB's out-of-memory error as :class:`duckdb.OutOfMemoryException` also
    when it comes through an Arrow reader. A query that runs out of memory before its first
    batch raises that exception from ``to_arrow_reader``; after it, while the batches are
    read, the error reaches the reader's consumer as pyarrow's ``OSError`` with DuckDB's
    message, which a caller that reruns on out-of-memory would not recognise."""
    try:
        yield
    except OSError as e:
        if not str(e).startswith(OUT_OF_MEMORY):
            raise
        raise duckdb.OutOfMemoryException(str(e)) from None


class DuckDBEngine(ColumnsFromResolve):
    """DuckDB (the default): a thin wrapper of a connection; models are stored by :mod:`sqlnb.store`."""

    dialect = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection | None = None):
        self.con = con if con is not None else new_connection()

    def execute(self, tree, params=None):
        return self.con.execute(sql.render(tree, self.dialect), params).fetchall()

    def resolve(self, data):
        return resolve(data, self.con)

    @contextmanager
    def first_rows(self) -> Iterator[None]:
        """Run statements that read a source's first rows (screening's ``COUNT``, ``MIN``,
        ``MAX`` and ``COUNT(DISTINCT)`` of the first 100,000 rows; the unseen-value check)
        with DuckDB's late materialization off; the connection's setting is put back after.

        DuckDB 2.0 plans such a read as a semi-join of the source's row numbers under the
        ``LIMIT`` with a second scan of the source: two scans and a hash join of 100,000
        row numbers, where reading the first row groups once is all it needs. Off, screening
        of a 10M-row Parquet file (2 cores, medians of 7, ``benchmarks/first_rows.py``)
        takes ``COUNT(*)`` of 20 DOUBLE columns 0.012 -> 0.002 s and ``COUNT``/``MIN``/``MAX``
        of 8 VARCHAR columns 0.029 -> 0.011 s; of a DuckDB table 0.027 -> 0.014 s. The
        Gaussian shift read (4,096 rows, :func:`sqlnb.models.naive_bayes.fit.gaussian_shifts`)
        keeps the rewrite, which halves it there.
        """
        before = self.execute(exp.select(exp.func("current_setting", exp.Literal.string(DISABLED))))[0][0] or ""
        names = [n.strip() for n in before.split(",") if n.strip()]
        if LATE_MATERIALIZATION in names:
            yield
            return
        self._set(DISABLED, ",".join([*names, LATE_MATERIALIZATION]))
        try:
            yield
        finally:
            self._set(DISABLED, before)

    def _set(self, name: str, value: str) -> None:
        self.execute(exp.Set(expressions=[exp.SetItem(this=exp.EQ(this=sql.col(name),
                                                                  expression=exp.Literal.string(value)))]))

    def relation(self, tree) -> duckdb.DuckDBPyRelation:
        """The lazy relation of a SELECT ``tree``, its bound lists (a structured model's
        tables, :func:`sqlnb.sql.bound_list`) passed as parameters, not as text."""
        text, params = sql.render_bound(tree, self.dialect)
        return self.con.sql(text, params=params or None)


def new_connection(database: str = ":memory:", read_only: bool = False,
            config: Mapping[str, Any] | None = None) -> duckdb.DuckDBPyConnection:
    """A new DuckDB connection, as sqlnb opens every connection of its own: with DuckDB's
    progress bar off (:func:`show_progress`).

    DuckDB's Python client turns the bar on in every connection and draws it on stdout
    once a query has run for ``progress_bar_time`` (2 s), terminal or not, so a library
    call on a large source would write it into the caller's pipe or log. A connection
    the caller passes in is used with the settings the caller gave it; the command line
    turns the bar back on for a terminal.
    """
    con = duckdb.connect(database, read_only=read_only, config=dict(config or {}))
    show_progress(con, False)
    return con


def show_progress(con: duckdb.DuckDBPyConnection, on: bool) -> None:
    """``SET enable_progress_bar = on`` on ``con`` (a session setting: DuckDB refuses it as
    a connection option)."""
    setting = exp.SetItem(this=exp.EQ(this=sql.col("enable_progress_bar"), expression=exp.Boolean(this=on)))
    con.execute(sql.render(exp.Set(expressions=[setting])))
