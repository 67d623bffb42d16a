"""Models as tables in a DuckDB database.

Layout, in the schema ``sqlnb``::

    sqlnb.models            name (primary key), id, kind, created, meta (JSON text)
    sqlnb."m_<id>_<part>"   one table per parameter part (classes, moments, sums, ...)

A model's name is data, never SQL: it lives only in ``sqlnb.models`` and is always a
bound parameter, while its tables are named by a generated id. So ``we'ird name`` or a
name that differs only in case is just a name. A save is one transaction: the new tables
and the catalog row appear together, the old model's tables go in the same commit, and a
failure or interruption leaves the database as it was.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import uuid
from contextlib import contextmanager
from typing import Any, Iterator

import duckdb
from sqlglot import exp

from sqlnb import sql
from sqlnb.errors import SqlnbError, SqlnbNotFound, suggest

SCHEMA = "sqlnb"
CATALOG = "models"
FORMAT = 1


def model_kinds() -> dict:
    """Model kind name -> class (an explicit registry; imported lazily to avoid cycles)."""
    from sqlnb.models.naive_bayes.model import NaiveBayes
    kinds = {"naive_bayes": NaiveBayes}
    try:
        from sqlnb.models.discriminant import LDA, QDA
        from sqlnb.models.logistic import Logistic
        kinds.update({"lda": LDA, "qda": QDA, "logistic": Logistic})
    except ImportError:  # pragma: no cover - during bootstrap only
        pass
    return kinds


def _remote(target: Any):
    """The engine behind ``target`` when it is not DuckDB (PostgresEngine, SparkEngine,
    a psycopg connection or SparkSession), else None."""
    if isinstance(target, (str, os.PathLike, duckdb.DuckDBPyConnection)):
        return None
    from sqlnb.engines import DuckDBEngine, as_engine
    engine = as_engine(target)
    return None if isinstance(engine, DuckDBEngine) else engine


@contextmanager
def connection(target: Any, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection for ``target``: a connection (used as is) or a database path."""
    if isinstance(target, duckdb.DuckDBPyConnection):
        yield target
        return
    if hasattr(target, "con") and isinstance(target.con, duckdb.DuckDBPyConnection):  # DuckDBEngine
        yield target.con
        return
    path = os.fspath(target)
    if read_only and not os.path.exists(path):
        raise SqlnbNotFound(f"database {path!r} does not exist")
    try:
        con = duckdb.connect(path, read_only=read_only)
    except duckdb.Error as e:
        raise SqlnbError(f"cannot open database {path!r}: {str(e).splitlines()[0]}") from None
    try:
        yield con
    finally:
        con.close()


def _catalog() -> exp.Table:
    return sql.table(CATALOG, SCHEMA)


def _part_table(model_id: str, part: str) -> exp.Table:
    return sql.table(f"m_{model_id}_{part}", SCHEMA)


def _has_catalog(con: duckdb.DuckDBPyConnection) -> bool:
    q = (exp.select(exp.Count(this=exp.Star()))
         .from_(exp.to_table("information_schema.tables"))
         .where(exp.and_(sql.col("table_schema").eq(exp.Placeholder()),
                         sql.col("table_name").eq(exp.Placeholder()))))
    return con.execute(sql.render(q), [SCHEMA, CATALOG]).fetchall()[0][0] > 0


def _lookup(con: duckdb.DuckDBPyConnection, name: str):
    if not _has_catalog(con):
        return None
    q = (exp.select(sql.col("id"), sql.col("kind"), sql.col("meta"))
         .from_(_catalog()).where(sql.col("name").eq(exp.Placeholder())))
    rows = con.execute(sql.render(q), [name]).fetchall()
    return rows[0] if rows else None


def model_names(con: duckdb.DuckDBPyConnection) -> list[str]:
    if not _has_catalog(con):
        return []
    q = exp.select(sql.col("name")).from_(_catalog()).order_by(sql.col("name"))
    return [r[0] for r in con.execute(sql.render(q)).fetchall()]


def versions() -> dict:
    import numpy
    import sqlglot
    from sqlnb import __version__
    return {"sqlnb": __version__, "duckdb": duckdb.__version__, "sqlglot": sqlglot.__version__,
            "numpy": numpy.__version__, "python": platform.python_version()}


def _create_part(con, model_id: str, part: str, data, casts: dict) -> None:
    view = f"sqlnb_part_{uuid.uuid4().hex}"
    con.register(view, data)
    try:
        cols = [
            exp.alias_(exp.Cast(this=sql.col(c), to=exp.DataType.build(casts[c], dialect="duckdb")), c, quoted=True)
            if c in casts else sql.col(c)
            for c in data.column_names
        ]
        create = exp.Create(this=_part_table(model_id, part), kind="TABLE",
                            expression=exp.select(*cols).from_(sql.table(view)))
        con.execute(sql.render(create))
    finally:
        con.unregister(view)


def _drop_parts(con, model_id: str) -> None:
    q = (exp.select(sql.col("table_name")).from_(exp.to_table("information_schema.tables"))
         .where(exp.and_(sql.col("table_schema").eq(exp.Placeholder()),
                         exp.func("starts_with", sql.col("table_name"), exp.Placeholder()))))
    for (tname,) in con.execute(sql.render(q), [SCHEMA, f"m_{model_id}_"]).fetchall():
        con.execute(sql.render(exp.Drop(tables=[sql.table(tname, SCHEMA)], kind="TABLE")))


def save_model(model, target: Any, name: str, replace: bool = False) -> None:
    """Write ``model`` under ``name`` (see the module docstring)."""
    if (remote := _remote(target)) is not None:
        return remote.save_model(model, name, replace)
    if not isinstance(name, str) or not name:
        raise SqlnbError("a model needs a non-empty name")
    with connection(target) as con:
        con.begin()
        try:
            con.execute(sql.render(exp.Create(this=exp.Table(this=sql.ident(SCHEMA)), kind="SCHEMA", exists=True)))
            con.execute(sql.render(exp.Create(
                this=exp.Schema(this=_catalog(), expressions=[
                    exp.ColumnDef(this=sql.ident("name"), kind=exp.DataType.build("varchar"),
                                  constraints=[exp.ColumnConstraint(kind=exp.PrimaryKeyColumnConstraint())]),
                    exp.ColumnDef(this=sql.ident("id"), kind=exp.DataType.build("varchar")),
                    exp.ColumnDef(this=sql.ident("kind"), kind=exp.DataType.build("varchar")),
                    exp.ColumnDef(this=sql.ident("created"), kind=exp.DataType.build("timestamp")),
                    exp.ColumnDef(this=sql.ident("meta"), kind=exp.DataType.build("varchar")),
                ]), kind="TABLE", exists=True)))
            old = _lookup(con, name)
            if old is not None and not replace:
                raise SqlnbError(f"model {name!r} already exists in this database; pass --replace (replace=True) to overwrite it")
            model_id = uuid.uuid4().hex[:12]
            for part, (data, casts) in model.parameter_tables().items():
                _create_part(con, model_id, part, data, casts)
            if old is not None:
                _drop_parts(con, old[0])
                con.execute(sql.render(exp.delete(_catalog(), sql.col("name").eq(exp.Placeholder()))), [name])
            created = _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)
            meta = dict(model.metadata(), format=FORMAT, kind=model.kind, versions=versions(),
                        created=created.isoformat(timespec="seconds") + "Z")
            insert = exp.insert(exp.values([tuple(exp.Placeholder() for _ in range(5))]), _catalog())
            con.execute(sql.render(insert), [name, model_id, model.kind, created, json.dumps(meta, default=str)])
            con.commit()
        except BaseException:
            con.rollback()
            raise


def load_model(target: Any, name: str):
    """Load the model saved as ``name`` (see :func:`sqlnb.load`)."""
    if (remote := _remote(target)) is not None:
        return remote.load_model(name)
    with connection(target, read_only=isinstance(target, (str, os.PathLike))) as con:
        row = _lookup(con, name)
        if row is None:
            names = model_names(con)
            raise SqlnbNotFound(
                f"no model named {name!r} in this database{suggest(name, names)}; "
                f"models here: {', '.join(names) if names else 'none'}"
            )
        model_id, kind, meta_text = row
        meta = json.loads(meta_text)
        kinds = model_kinds()
        if kind not in kinds:
            raise SqlnbError(f"model {name!r} is of kind {kind!r}, which this sqlnb version cannot read")
        q = (exp.select(sql.col("table_name")).from_(exp.to_table("information_schema.tables"))
             .where(exp.and_(sql.col("table_schema").eq(exp.Placeholder()),
                             exp.func("starts_with", sql.col("table_name"), exp.Placeholder()))))
        prefix = f"m_{model_id}_"
        tables = {}
        for (tname,) in con.execute(sql.render(q), [SCHEMA, prefix]).fetchall():
            tables[tname[len(prefix):]] = con.sql(
                sql.render(exp.select(exp.Star()).from_(sql.table(tname, SCHEMA)))).to_arrow_table()
        model = kinds[kind].from_tables(meta, tables)
        model.name = name
        model.created = meta.get("created")
        model.versions = meta.get("versions", {})
        return model


def list_models(target: Any) -> list[dict]:
    """One dict per saved model: name, kind, created, classes, features, rows."""
    if (remote := _remote(target)) is not None:
        return remote.list_models()
    with connection(target, read_only=isinstance(target, (str, os.PathLike))) as con:
        if not _has_catalog(con):
            return []
        q = exp.select(sql.col("name"), sql.col("kind"), sql.col("created"), sql.col("meta")).from_(
            _catalog()).order_by(sql.col("name"))
        out = []
        for name, kind, created, meta_text in con.execute(sql.render(q)).fetchall():
            meta = json.loads(meta_text)
            out.append({"name": name, "kind": kind, "created": str(created),
                        "label": meta.get("label"), "features": len(meta.get("features", [])),
                        "rows": meta.get("report", {}).get("rows")})
        return out


def drop_model(target: Any, name: str) -> None:
    """Delete the model ``name`` and its tables (one transaction)."""
    if (remote := _remote(target)) is not None:
        return remote.drop_model(name)
    with connection(target) as con:
        row = _lookup(con, name)
        if row is None:
            raise SqlnbNotFound(f"no model named {name!r} in this database")
        con.begin()
        try:
            _drop_parts(con, row[0])
            con.execute(sql.render(exp.delete(_catalog(), sql.col("name").eq(exp.Placeholder()))), [name])
            con.commit()
        except BaseException:
            con.rollback()
            raise
