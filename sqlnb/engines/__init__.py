"""Engines: where the training aggregations and the scoring query run.

DuckDB is the default. :class:`PostgresEngine` (a PostgreSQL server through psycopg 3)
and :class:`SparkEngine` (Spark SQL through a pyspark ``SparkSession``, local or on a
cluster) run the very same sqlglot trees, rendered for their dialect by
:func:`sqlnb.sql.render`, and hold saved models as tables::

    model = sqlnb.fit("train", "y", con=PostgresEngine("host=db dbname=lake"))
    model.save(engine, "churn")                 # tables in schema sqlnb, one transaction
    sqlnb.load(engine, "churn").score("new_rows", con=engine)

Every engine provides the small :class:`Engine` protocol: ``dialect``, ``execute(tree)``
-> rows, ``resolve(data)`` -> :class:`~sqlnb.source.Source` (column types normalised to
DuckDB spellings so families and literals read them one way), ``relation(tree)`` (the
engine's own lazy or materialised result) and save / load / list / drop of models.

Training reads the data only inside the engine: the statistics query and the
categorical GROUPING SETS query return a few rows per class, and those are all that
reach Python. Scoring on Spark returns a lazy ``DataFrame``; on PostgreSQL the result is
fetched into a ``pyarrow.Table`` (use :meth:`Model.scoring_query` with
``sqlnb.sql.render(tree, "postgres")`` inside ``CREATE TABLE ... AS`` to keep it on the server).

Storage
-------
PostgreSQL: the layout of :mod:`sqlnb.store` (``sqlnb.models`` catalog with the name as
primary key, one ``sqlnb."m_<id>_<part>"`` table per parameter part), written with
``CREATE TABLE`` and ``INSERT`` with bound parameters in one transaction.

Spark has no multi-table transactions, and a plain (Parquet) table cannot be updated in
place. So the catalog ``sqlnb.models`` is an append-only log: a save writes the new part
tables under a fresh id, then appends one catalog row (the commit point: a single
``INSERT`` whose files appear together when its job commits), then drops the old model's
tables. The newest row of a name wins; a drop appends a tombstone row (``kind`` NULL).
A failure before the append leaves the old model readable and, at worst, orphan
``m_<id>_*`` tables; a failure after it leaves only the old tables behind. With a local
session the catalog lives in Spark's in-memory metastore (lost when the session ends);
on a cluster, use a persistent metastore (Hive, Unity, Glue).
"""

from __future__ import annotations

import datetime as _dt
import json
import uuid
from typing import Any, Protocol, Sequence, runtime_checkable

import duckdb
import sqlglot
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError, SqlnbNotFound, suggest
from sqlnb.source import Files, Query, Source, Table, file_format, guess, resolve

SCHEMA = "sqlnb"
CATALOG = "models"


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

    def save_model(self, model, name: str, replace: bool = False) -> None: ...

    def load_model(self, name: str): ...

    def list_models(self) -> list[dict]: ...

    def drop_model(self, name: str) -> None: ...


def as_engine(con: Any = None) -> Engine:
    """The engine for ``con``: an :class:`Engine` as is; a DuckDB connection (or None, a
    new in-memory DuckDB); a psycopg connection; a pyspark ``SparkSession``."""
    if con is None:
        return DuckDBEngine(duckdb.connect())
    if isinstance(con, duckdb.DuckDBPyConnection):
        return DuckDBEngine(con)
    if isinstance(con, Engine):
        return con
    module = type(con).__module__
    if module.startswith("psycopg"):
        return PostgresEngine(con)
    if module.startswith("pyspark"):
        return SparkEngine(con)
    raise SqlnbError(f"cannot run SQL on a {type(con).__name__}; give a DuckDB connection, "
                     "a PostgresEngine or a SparkEngine")


#: Engine names for :func:`connect` (and the CLI's ``--engine``).
ENGINES = ("duckdb", "postgres", "spark")


def connect(engine: str = "duckdb", *, dsn: str | None = None, master: str | None = None,
            database: str | None = None) -> Engine:
    """An engine by name, for command lines and configuration files.

    Parameters
    ----------
    engine : {"duckdb", "postgres", "spark"}
    dsn : str, optional
        PostgreSQL connection string (required for ``postgres``).
    master : str, optional
        Spark master URL (``local[*]``, ``spark://host:7077``, ``yarn``); default: the
        session's own configuration (``spark-submit``, ``SPARK_REMOTE``, or local).
    database : str, optional
        DuckDB database file (default: in memory).

    Examples
    --------
    >>> connect("postgres", dsn="host=db dbname=lake")        # doctest: +SKIP
    >>> connect("spark", master="local[4]")                     # doctest: +SKIP
    """
    if engine == "duckdb":
        return DuckDBEngine(duckdb.connect(database or ":memory:"))
    if engine == "postgres":
        if not dsn:
            raise SqlnbError("--engine postgres needs --dsn (e.g. --dsn 'host=db dbname=lake user=me')")
        try:
            return PostgresEngine(dsn)
        except ImportError:
            raise SqlnbError("PostgreSQL needs psycopg 3: pip install 'psycopg[binary]'") from None
        except Exception as e:  # psycopg.OperationalError: server down, bad credentials
            raise SqlnbError(f"cannot connect to PostgreSQL: {str(e).strip().splitlines()[0]}") from None
    if engine == "spark":
        try:
            from pyspark.sql import SparkSession
        except ImportError:
            raise SqlnbError("Spark needs pyspark: pip install 'pyspark>=4.1,<5'") from None
        builder = SparkSession.builder.appName("sqlnb")
        if master:
            builder = builder.master(master)
        return SparkEngine(builder.getOrCreate())
    raise SqlnbError(f"unknown engine {engine!r}{suggest(engine, ENGINES)}; engines are: {', '.join(ENGINES)}")


def duckdb_type(native: str, dialect: str) -> str:
    """A column type in the DuckDB spelling that sqlnb stores and reasons about
    (``double precision`` -> ``DOUBLE``, Spark ``string`` -> ``TEXT``, ``int4`` -> ``INT``)."""
    try:
        return exp.DataType.build(native, dialect=dialect).sql("duckdb")
    except (sqlglot.errors.ParseError, ValueError):
        return native.upper()


def _source_node(data: Any, dialect: str) -> tuple[exp.Expression, str] | None:
    """FROM item and description for a table name or a query, in ``dialect``."""
    if isinstance(data, Table):
        return sql.table(data.name, data.schema, data.catalog), f"table {str(data)!r}"
    if isinstance(data, Query):
        try:
            parsed = sqlglot.parse_one(data.text, dialect=dialect)
        except sqlglot.errors.ParseError as e:
            raise SqlnbError(f"cannot parse the source query: {str(e).splitlines()[0]}") from None
        return exp.Subquery(this=parsed), "the source query"
    return None


def _probe(node: exp.Expression) -> exp.Select:
    """``SELECT * FROM <node> LIMIT 0``: the columns without reading a row."""
    item = (exp.Subquery(this=node.this.copy(), alias=exp.TableAlias(this=sql.ident("src")))
            if isinstance(node, exp.Subquery) else node.copy())
    return exp.select(exp.Star()).from_(item).limit(0)


def _column_defs(data, casts: dict) -> list[exp.ColumnDef]:
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


def _catalog_columns() -> list[exp.ColumnDef]:
    cols = [("name", "varchar"), ("id", "varchar"), ("kind", "varchar"), ("created", "timestamp"),
            ("meta", "varchar")]
    return [exp.ColumnDef(this=sql.ident(n), kind=exp.DataType.build(t)) for n, t in cols]


def _metadata(model, created: _dt.datetime) -> str:
    from sqlnb.store import FORMAT, versions
    meta = dict(model.metadata(), format=FORMAT, kind=model.kind, versions=versions(),
                created=created.isoformat(timespec="seconds") + "Z")
    return json.dumps(meta, default=str)


def _build(kind: str, meta_text: str, tables: dict, name: str):
    from sqlnb.store import model_kinds
    kinds = model_kinds()
    if kind not in kinds:
        raise SqlnbError(f"model {name!r} is of kind {kind!r}, which this sqlnb version cannot read")
    meta = json.loads(meta_text)
    model = kinds[kind].from_tables(meta, tables)
    model.name = name
    model.created = meta.get("created")
    model.versions = meta.get("versions", {})
    return model


def _arrow(names: Sequence[str], rows: Sequence[Sequence[Any]]):
    import pyarrow as pa
    return pa.table({n: pa.array([r[i] for r in rows]) for i, n in enumerate(names)})


def _not_found(name: str, names: list[str], where: str) -> SqlnbNotFound:
    return SqlnbNotFound(f"no model named {name!r} in {where}{suggest(name, names)}; "
                         f"models here: {', '.join(names) if names else 'none'}")


def _summary(name, kind, created, meta_text) -> dict:
    meta = json.loads(meta_text)
    return {"name": name, "kind": kind, "created": str(created), "label": meta.get("label"),
            "features": len(meta.get("features", [])), "rows": meta.get("report", {}).get("rows")}


class _Columns:
    """``columns`` for every engine: the resolved source's schema."""

    def columns(self, data: Any) -> dict[str, str]:
        return dict(self.resolve(data).columns)


# -- DuckDB ------------------------------------------------------------------------------
class DuckDBEngine(_Columns):
    """DuckDB (the default): a thin wrapper of a connection; storage is :mod:`sqlnb.store`."""

    dialect = "duckdb"

    def __init__(self, con: duckdb.DuckDBPyConnection | None = None):
        self.con = con if con is not None else duckdb.connect()

    def execute(self, tree, params=None):
        return self.con.execute(sql.render(tree, self.dialect), params).fetchall()

    def resolve(self, data):
        return resolve(data, self.con)

    def relation(self, tree) -> duckdb.DuckDBPyRelation:
        return self.con.sql(sql.render(tree, self.dialect))

    def save_model(self, model, name, replace=False):
        from sqlnb.store import save_model
        save_model(model, self.con, name, replace)

    def load_model(self, name):
        from sqlnb.store import load_model
        return load_model(self.con, name)

    def list_models(self):
        from sqlnb.store import list_models
        return list_models(self.con)

    def drop_model(self, name):
        from sqlnb.store import drop_model
        drop_model(self.con, name)


# -- PostgreSQL --------------------------------------------------------------------------
class PostgresEngine(_Columns):
    """A PostgreSQL server through psycopg 3.

    Parameters
    ----------
    dsn : str or psycopg.Connection
        A libpq connection string (``"host=db dbname=lake user=me"`` or a
        ``postgresql://`` URL), or an open connection (used as is; not closed here).
    """

    dialect = "postgres"

    def __init__(self, dsn: Any):
        import psycopg
        if isinstance(dsn, str):
            # Autocommit: reads hold no transaction open; saves open their own.
            self.con = psycopg.connect(dsn, autocommit=True)
            self._owned = True
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
        found = _source_node(data, self.dialect)
        if found is None:
            what = "files" if isinstance(data, Files) else f"a {type(data).__name__}"
            raise SqlnbError(f"PostgreSQL reads tables, views and queries, not {what}; load the data "
                             "into a table first")
        node, desc = found
        try:
            with self._cursor_run(_probe(node)) as cur:
                described = [(c.name, c.type_code) for c in cur.description]
        except pgerr.UndefinedTable:
            raise SqlnbNotFound(f"{desc} not found in the PostgreSQL database") from None
        except pgerr.Error as e:
            raise SqlnbError(f"cannot read {desc}: {str(e).splitlines()[0]}") from None
        columns = {name: duckdb_type(self._type_name(oid), self.dialect) for name, oid in described}
        return Source(expr=node, columns=columns, description=desc)

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
            return _arrow([c.name for c in cur.description], cur.fetchall())

    # storage
    def _catalog(self) -> exp.Table:
        return sql.table(CATALOG, SCHEMA)

    def _tables(self) -> list[str]:
        q = (exp.select(sql.col("table_name")).from_(exp.to_table("information_schema.tables"))
             .where(sql.col("table_schema").eq(exp.Placeholder())))
        return [r[0] for r in self.execute(q, [SCHEMA])]

    def _lookup(self, name: str):
        if CATALOG not in self._tables():
            return None
        q = (exp.select(sql.col("id"), sql.col("kind"), sql.col("meta"))
             .from_(self._catalog()).where(sql.col("name").eq(exp.Placeholder())))
        rows = self.execute(q, [name])
        return rows[0] if rows else None

    def _names(self) -> list[str]:
        if CATALOG not in self._tables():
            return []
        return [r[0] for r in self.execute(
            exp.select(sql.col("name")).from_(self._catalog()).order_by(sql.col("name")))]

    def _drop_parts(self, model_id: str) -> None:
        for t in self._tables():
            if t.startswith(f"m_{model_id}_"):
                self.execute(exp.Drop(tables=[sql.table(t, SCHEMA)], kind="TABLE"))

    def write_table(self, name: str, data, schema: str | None = None) -> None:
        """Create table ``name`` from a (small) pyarrow table: CREATE TABLE, then one
        parameterised INSERT per row (``executemany``). Meant for parameter tables and
        test data; bulk loads belong to ``COPY``."""
        self._create_and_insert(sql.table(name, schema), data, {})

    def _create_and_insert(self, target: exp.Table, data, casts: dict) -> None:
        self.execute(exp.Create(this=exp.Schema(this=target, expressions=_column_defs(data, casts)), kind="TABLE"))
        insert = exp.insert(exp.values([tuple(exp.Placeholder() for _ in data.column_names)]),
                            target.copy(), columns=[sql.ident(c) for c in data.column_names])
        rows = list(zip(*(data.column(c).to_pylist() for c in data.column_names)))
        if rows:
            with self.con.cursor() as cur:
                cur.executemany(sql.render(insert, self.dialect), rows)

    def save_model(self, model, name: str, replace: bool = False) -> None:
        """Write ``model`` as tables in schema ``sqlnb``, in one transaction."""
        if not isinstance(name, str) or not name:
            raise SqlnbError("a model needs a non-empty name")
        with self.con.transaction():
            self.execute(exp.Create(this=exp.Table(this=sql.ident(SCHEMA)), kind="SCHEMA", exists=True))
            cols = _catalog_columns()
            cols[0].set("constraints", [exp.ColumnConstraint(kind=exp.PrimaryKeyColumnConstraint())])
            self.execute(exp.Create(this=exp.Schema(this=self._catalog(), expressions=cols),
                                    kind="TABLE", exists=True))
            old = self._lookup(name)
            if old is not None and not replace:
                raise SqlnbError(f"model {name!r} already exists in this database; pass --replace "
                                 "(replace=True) to overwrite it")
            model_id = uuid.uuid4().hex[:12]
            for part, (data, casts) in model.parameter_tables().items():
                self._create_and_insert(sql.table(f"m_{model_id}_{part}", SCHEMA), data, casts)
            if old is not None:
                self._drop_parts(old[0])
                self.execute(exp.delete(self._catalog(), sql.col("name").eq(exp.Placeholder())), [name])
            created = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
            insert = exp.insert(exp.values([tuple(exp.Placeholder() for _ in range(5))]), self._catalog())
            self.execute(insert, [name, model_id, model.kind, created, _metadata(model, created)])

    def load_model(self, name: str):
        row = self._lookup(name)
        if row is None:
            raise _not_found(name, self._names(), "this PostgreSQL database")
        model_id, kind, meta_text = row
        prefix = f"m_{model_id}_"
        tables = {}
        for t in self._tables():
            if t.startswith(prefix):
                tables[t[len(prefix):]] = self.relation(exp.select(exp.Star()).from_(sql.table(t, SCHEMA)))
        return _build(kind, meta_text, tables, name)

    def list_models(self) -> list[dict]:
        if CATALOG not in self._tables():
            return []
        q = exp.select(*(sql.col(c) for c in ("name", "kind", "created", "meta"))).from_(
            self._catalog()).order_by(sql.col("name"))
        return [_summary(*r) for r in self.execute(q)]

    def drop_model(self, name: str) -> None:
        row = self._lookup(name)
        if row is None:
            raise _not_found(name, self._names(), "this PostgreSQL database")
        with self.con.transaction():
            self._drop_parts(row[0])
            self.execute(exp.delete(self._catalog(), sql.col("name").eq(exp.Placeholder())), [name])


# -- Spark -------------------------------------------------------------------------------
class SparkEngine(_Columns):
    """Spark SQL through a pyspark ``SparkSession`` (local mode or a cluster).

    Training runs two aggregation queries in Spark and collects only their results
    (a few rows per class); scoring returns a lazy ``DataFrame``. Data can be a table or
    view name, a Spark SQL query, Parquet, CSV or JSON-lines files (path, glob or
    directory, read by ``spark.read``), a Spark ``DataFrame`` or a pyarrow table (files,
    DataFrames and tables are registered as temporary views). Storage: see the module docstring.
    """

    dialect = "spark"

    def __init__(self, session):
        self.spark = session

    def execute(self, tree, params=None):
        df = self.spark.sql(sql.render(tree, self.dialect), args=list(params) if params is not None else None)
        return [tuple(r) for r in df.collect()]

    def relation(self, tree):
        """The query as a lazy Spark ``DataFrame``."""
        return self.spark.sql(sql.render(tree, self.dialect))

    def resolve(self, data) -> Source:
        data = guess(data)
        if isinstance(data, Source):
            return data
        described = "the DataFrame"
        if isinstance(data, Files):
            data, described = self._read_files(data), f"files {data.path!r}"
        if type(data).__module__.startswith(("pyarrow", "pandas")):
            data = self.spark.createDataFrame(data)
        if type(data).__module__.startswith("pyspark"):  # a DataFrame
            view = f"sqlnb_input_{uuid.uuid4().hex[:12]}"
            data.createOrReplaceTempView(view)
            data = Table(view)
            found = (sql.table(view), described)
        else:
            found = _source_node(data, self.dialect)
        if found is None:
            raise SqlnbError(f"Spark reads tables, views, queries, files and DataFrames, not a "
                             f"{type(data).__name__}")
        node, desc = found
        try:
            schema = self.spark.sql(sql.render(_probe(node), self.dialect)).schema  # analysed, not run
        except Exception as e:  # pyspark's AnalysisException and friends
            text = str(e).splitlines()[0]
            if "TABLE_OR_VIEW_NOT_FOUND" in text:
                raise SqlnbNotFound(f"{desc} not found in the Spark catalog") from None
            raise SqlnbError(f"cannot read {desc}: {text}") from None
        columns = {f.name: duckdb_type(f.dataType.simpleString(), self.dialect) for f in schema.fields}
        return Source(expr=node, columns=columns, description=desc)

    #: DuckDB reader options (what the CLI's CSV options set) and their Spark names.
    _CSV_OPTIONS = {"delim": "sep", "sep": "sep", "header": "header", "nullstr": "nullValue"}

    def _read_files(self, files: Files):
        """Parquet, CSV or JSON-lines files (path, glob or Parquet directory) read by Spark
        itself, so they never pass through the driver. CSV has a header row by default and
        its column types are inferred, as DuckDB does."""
        fmt = files.format or file_format(files.path)
        reader = self.spark.read
        if fmt == "csv":
            opts = {"header": True, "inferSchema": True}
            for key, value in files.options.items():
                if key not in self._CSV_OPTIONS:
                    raise SqlnbError(f"Spark's CSV reader has no option {key!r} here; "
                                     f"use one of: {', '.join(sorted(self._CSV_OPTIONS))}")
                if key == "nullstr" and isinstance(value, (list, tuple)):
                    if len(value) != 1:
                        raise SqlnbError("Spark's CSV reader takes one NULL string, not several")
                    value = value[0]
                opts[self._CSV_OPTIONS[key]] = value
            reader = reader.options(**opts)
        elif files.options:
            raise SqlnbError(f"reader options are for CSV files; {files.path!r} is {fmt}")
        try:
            return {"parquet": reader.parquet, "csv": reader.csv, "json": reader.json}[fmt](files.path)
        except Exception as e:  # pyspark's AnalysisException: PATH_NOT_FOUND and friends
            text = str(e).splitlines()[0]
            if "PATH_NOT_FOUND" in text or "Path does not exist" in text:
                raise SqlnbNotFound(f"no file matches {files.path!r}; check the path or glob") from None
            raise SqlnbError(f"Spark cannot read {files.path!r}: {text}") from None

    # storage
    def _catalog(self) -> exp.Table:
        return sql.table(CATALOG, SCHEMA)

    def _tables(self) -> list[str]:
        if not self.spark.catalog.databaseExists(SCHEMA):
            return []
        return [t.name for t in self.spark.catalog.listTables(SCHEMA) if not t.isTemporary]

    def _latest(self) -> dict:
        """name -> (id, kind, created, meta) of the newest catalog row per name (live models)."""
        if CATALOG not in self._tables():
            return {}
        q = exp.select(*(sql.col(c) for c in ("name", "id", "kind", "created", "meta"))).from_(self._catalog())
        latest: dict = {}
        for name, mid, kind, created, meta in sorted(self.execute(q), key=lambda r: r[3]):
            latest[name] = (mid, kind, created, meta)  # rows in time order: the last one wins
        return {n: v for n, v in latest.items() if v[1] is not None}

    def _drop_parts(self, model_id: str) -> None:
        for t in self._tables():
            if t.startswith(f"m_{model_id}_"):
                self.execute(exp.Drop(tables=[sql.table(t, SCHEMA)], kind="TABLE", exists=True))

    def _append(self, name, model_id, kind, created, meta) -> None:
        insert = exp.insert(exp.values([tuple(exp.Placeholder() for _ in range(5))]), self._catalog())
        self.execute(insert, [name, model_id, kind, created, meta])

    def save_model(self, model, name: str, replace: bool = False) -> None:
        """Write new part tables, append the catalog row, drop the old tables."""
        if not isinstance(name, str) or not name:
            raise SqlnbError("a model needs a non-empty name")
        self.execute(exp.Create(this=exp.Table(this=sql.ident(SCHEMA)), kind="SCHEMA", exists=True))
        self.execute(exp.Create(this=exp.Schema(this=self._catalog(), expressions=_catalog_columns()),
                                kind="TABLE", exists=True))
        old = self._latest().get(name)
        if old is not None and not replace:
            raise SqlnbError(f"model {name!r} already exists in this catalog; pass --replace "
                             "(replace=True) to overwrite it")
        model_id = uuid.uuid4().hex[:12]
        for part, (data, casts) in model.parameter_tables().items():
            view = f"sqlnb_part_{uuid.uuid4().hex[:12]}"
            self.spark.createDataFrame(data).createOrReplaceTempView(view)
            try:
                cols = [exp.alias_(exp.Cast(this=sql.col(c), to=exp.DataType.build(casts[c], dialect="duckdb")),
                                   c, quoted=True) if c in casts else sql.col(c) for c in data.column_names]
                self.execute(exp.Create(this=sql.table(f"m_{model_id}_{part}", SCHEMA), kind="TABLE",
                                        expression=exp.select(*cols).from_(sql.table(view))))
            finally:
                self.spark.catalog.dropTempView(view)
        created = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
        self._append(name, model_id, model.kind, created, _metadata(model, created))  # the commit point
        if old is not None:
            self._drop_parts(old[0])

    def load_model(self, name: str):
        row = self._latest().get(name)
        if row is None:
            raise _not_found(name, sorted(self._latest()), "this Spark catalog")
        model_id, kind, _, meta_text = row
        prefix = f"m_{model_id}_"
        tables = {}
        for t in self._tables():
            if t.startswith(prefix):
                df = self.spark.sql(sql.render(exp.select(exp.Star()).from_(sql.table(t, SCHEMA)), self.dialect))
                tables[t[len(prefix):]] = _arrow(df.columns, [tuple(r) for r in df.collect()])
        return _build(kind, meta_text, tables, name)

    def list_models(self) -> list[dict]:
        return [_summary(n, v[1], v[2], v[3]) for n, v in sorted(self._latest().items())]

    def drop_model(self, name: str) -> None:
        row = self._latest().get(name)
        if row is None:
            raise _not_found(name, sorted(self._latest()), "this Spark catalog")
        self._append(name, None, None, _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None), None)
        self._drop_parts(row[0])
