"""What every engine provides, and the helpers the engines share.

An engine runs sqlglot trees rendered for its dialect (:func:`sqlnb.sql.render`), resolves
sources to :class:`~sqlnb.source.Source` (column types in DuckDB spellings, so families
and literals read them one way) and returns results in its own form. It knows nothing of
model kinds: saving and loading models is :mod:`sqlnb.store`, built on these operations.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, ContextManager, Protocol, Sequence, runtime_checkable

import sqlglot
from sqlglot import exp

from sqlnb import sql
from sqlnb.source import Query, Source, Table, parse_query


@runtime_checkable
class Engine(Protocol):
    """What sqlnb needs from a SQL engine."""

    #: sqlglot dialect name the engine's SQL is rendered in (see :data:`sqlnb.sql.DIALECTS`).
    dialect: str

    def execute(self, tree: exp.Expression, params: Sequence[Any] | None = None) -> list[tuple]:
        """Run one statement (rendered for :attr:`dialect`) and return its rows."""

    def resolve(self, data: Any) -> Source:
        """A table name, query or engine-native data set as a :class:`Source`."""

    def columns(self, data: Any) -> dict[str, str]:
        """``{column: type}`` of ``data`` (DuckDB type spellings), read without any row."""

    def relation(self, tree: exp.Expression) -> Any:
        """The result of a query in the engine's own form (lazy where the engine allows)."""


def duckdb_type(native: str, dialect: str) -> str:
    """A column type in the DuckDB spelling that sqlnb stores and reasons about
    (``double precision`` -> ``DOUBLE``, Spark ``string`` -> ``TEXT``, ``int4`` -> ``INT``)."""
    try:
        return exp.DataType.build(native, dialect=dialect).sql("duckdb")
    except (sqlglot.errors.ParseError, ValueError):
        return native.upper()


def source_node(data: Any, dialect: str) -> tuple[exp.Expression, str] | None:
    """FROM item and description for a table name or a query, in ``dialect``."""
    if isinstance(data, Table):
        return sql.table(data.name, data.schema, data.catalog), f"table {str(data)!r}"
    if isinstance(data, Query):
        return exp.Subquery(this=parse_query(data.text, dialect)), "the source query"
    return None


def probe(node: exp.Expression) -> exp.Select:
    """``SELECT * FROM <node> LIMIT 0``: the columns without reading a row."""
    item = (exp.Subquery(this=node.this.copy(), alias=exp.TableAlias(this=sql.ident("src")))
            if isinstance(node, exp.Subquery) else node.copy())
    return exp.select(exp.Star()).from_(item).limit(0)


def first_rows(engine: Any) -> ContextManager:
    """The context in which ``engine`` runs statements that read a source's first rows
    (``... LIMIT 100000``: screening, the unseen-value check): the engine's
    ``first_rows()`` where it has one (DuckDB: :meth:`sqlnb.engines.DuckDBEngine.first_rows`),
    else nothing changes."""
    hook = getattr(engine, "first_rows", None)
    return hook() if hook is not None else nullcontext()


def arrow_table(names: Sequence[str], rows: Sequence[Sequence[Any]]):
    import pyarrow as pa
    return pa.table({n: pa.array([r[i] for r in rows]) for i, n in enumerate(names)})


class ColumnsFromResolve:
    """``columns`` for every engine: the resolved source's schema."""

    def columns(self, data: Any) -> dict[str, str]:
        return dict(self.resolve(data).columns)
