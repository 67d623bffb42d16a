"""PostgreSQL through psycopg 3: the same trees rendered for ``postgres``."""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlnb import sql
from sqlnb.engines.base import ColumnsFromResolve, arrow_table, duckdb_type, probe, source_node
from sqlnb.errors import SqlnbError, SqlnbNotFound
from sqlnb.source import Files, Source, guess


class PostgresEngine(ColumnsFromResolve):
    """A PostgreSQL server through psycopg 3.

    Parameters
    ----------
    dsn : str or psycopg.Connection
        A libpq connection string (``"host=db dbname=lake user=me"`` or a
        ``postgresql://`` URL), or an open connection (used as is, its settings
        untouched; not closed here).

    Notes
    -----
    A connection opened here runs ``SET jit = off`` (:func:`jit_off`): PostgreSQL's JIT
    compiler, on by default since version 12, compiles a query's expressions with LLVM
    once the planner's cost estimate passes ``jit_above_cost`` (100,000), and optimises
    and inlines them past 500,000. A scoring SELECT's per-row expression holds every
    feature's term for every class, and LLVM's time and memory grow with it: a
    580-column model scoring 40,000 rows took 494 s and an 815 MB backend with JIT, 14 s
    for 20,000 rows without (docs/dialects.md, "PostgreSQL's JIT"). Interpreted, the
    same expressions run at the speed of the scan.
    """

    dialect = "postgres"

    def __init__(self, dsn: Any):
        import psycopg
        if isinstance(dsn, str):
            # Autocommit: reads hold no transaction open; saves open their own.
            self.con = psycopg.connect(dsn, autocommit=True)
            self._owned = True
            jit_off(self.con)
        else:
            self.con = dsn
            self._owned = False

    def close(self) -> None:
        """Close the connection if this engine opened it."""
        if self._owned:
            self.con.close()

    def _cursor_run(self, tree, params=None):
        cur = self.con.cursor()
        text = sql.render(tree, self.dialect)
        # psycopg only parses %s placeholders when parameters are given; without them a
        # '%' in a string literal (a category named "50%") stays as it is.
        cur.execute(text, list(params) if params is not None else None)
        return cur

    def execute(self, tree, params=None):
        with self._cursor_run(tree, params) as cur:
            return cur.fetchall() if cur.description else []

    def resolve(self, data) -> Source:
        from psycopg import errors as pgerr
        data = guess(data)
        if isinstance(data, Source):
            return data
        found = source_node(data, self.dialect)
        if found is None:
            what = "files" if isinstance(data, Files) else f"a {type(data).__name__}"
            raise SqlnbError(f"PostgreSQL reads tables, views and queries, not {what}; load the data "
                             "into a table first")
        node, desc = found
        try:
            with self._cursor_run(probe(node)) as cur:
                described = [(c.name, c.type_code) for c in cur.description]
        except pgerr.UndefinedTable:
            raise SqlnbNotFound(f"{desc} not found in the PostgreSQL database") from None
        except pgerr.Error as e:
            raise SqlnbError(f"cannot read {desc}: {str(e).splitlines()[0]}") from None
        columns = {name: duckdb_type(self._type_name(oid), self.dialect) for name, oid in described}
        return Source(expr=node, columns=columns, description=desc, engine="postgres")

    def _type_name(self, oid: int) -> str:
        # Built-in types are known to psycopg without a round trip; others (domains,
        # enums) are asked of the server.
        from psycopg.postgres import types
        info = types.get(oid)
        if info is not None:
            return info.name
        q = exp.select(exp.func("format_type", exp.Cast(this=exp.Placeholder(), to=exp.DataType.build("int")),
                                exp.null()))
        return self.execute(q, [oid])[0][0]

    def relation(self, tree):
        """The query's rows as a ``pyarrow.Table`` (PostgreSQL results are not lazy)."""
        with self._cursor_run(tree) as cur:
            return arrow_table([c.name for c in cur.description], cur.fetchall())

    def write_table(self, name: str, data, schema: str | None = None) -> None:
        """Create table ``name`` from a (small) pyarrow table: CREATE TABLE, then one
        parameterised INSERT per row (``executemany``). Meant for parameter tables and
        test data; bulk loads belong to ``COPY``."""
        self.create_from_arrow(sql.table(name, schema), data, {})

    def create_from_arrow(self, target: exp.Table, data, casts: dict) -> None:
        """``CREATE TABLE target`` typed from a pyarrow table (``casts``: column -> DuckDB
        type spelling, for labels of other types), then its rows by ``executemany``."""
        self.execute(exp.Create(this=exp.Schema(this=target, expressions=column_defs(data, casts)), kind="TABLE"))
        insert = exp.insert(exp.values([tuple(exp.Placeholder() for _ in data.column_names)]),
                            target.copy(), columns=[sql.ident(c) for c in data.column_names])
        rows = list(zip(*(data.column(c).to_pylist() for c in data.column_names)))
        if rows:
            with self.con.cursor() as cur:
                cur.executemany(sql.render(insert, self.dialect), rows)


def jit_off(con) -> None:
    """``SET jit = off`` for the session of ``con`` (class notes: JIT compiling a scoring
    SELECT costs far more than it saves). A server without the setting (before
    PostgreSQL 11) has no JIT to switch off."""
    from psycopg import errors as pgerr
    setting = exp.Set(expressions=[exp.SetItem(this=exp.EQ(this=exp.column("jit"), expression=exp.var("off")))])
    try:
        con.execute(sql.render(setting, "postgres"))
    except pgerr.UndefinedObject:  # unrecognized configuration parameter "jit"
        pass


def column_defs(data, casts: dict) -> list[exp.ColumnDef]:
    """Column definitions of a parameter part (a pyarrow table) for CREATE TABLE."""
    import pyarrow as pa
    out = []
    for field in data.schema:
        if field.name in casts:
            dtype = exp.DataType.build(casts[field.name], dialect="duckdb")
        elif pa.types.is_int32(field.type) or pa.types.is_int16(field.type) or pa.types.is_int8(field.type):
            dtype = exp.DataType.build("int")
        elif pa.types.is_integer(field.type):
            dtype = exp.DataType.build("bigint")
        elif pa.types.is_floating(field.type):
            dtype = exp.DataType.build("double")
        elif pa.types.is_boolean(field.type):
            dtype = exp.DataType.build("boolean")
        else:
            dtype = exp.DataType.build("varchar")
        out.append(exp.ColumnDef(this=sql.ident(field.name), kind=dtype))
    return out
