"""Models as tables: save, load, list and drop on any engine, through a registry of kinds.

A model is stored as its parameter parts (one table each, written by
:meth:`Model.parameter_tables`) and one catalog row holding its kind and metadata; the
layout is :mod:`sqlnb.store.catalog`. Each engine's storage is one small class behind the
:class:`~sqlnb.store.catalog.Storage` interface:

* :mod:`sqlnb.store.duckdb` — a DuckDB connection or database file (the default);
* :mod:`sqlnb.store.postgres` — a PostgreSQL server, one transaction per save;
* :mod:`sqlnb.store.spark` — a Spark catalog, an append-only log.

Many processes may share one store (docs/concurrency.md): a reader sees a model as it was
before a save or after it, never a mix, and writers queue. On a DuckDB file that is the
file lock (a writer excludes everyone, readers share it) and a bounded wait to get it
(:mod:`sqlnb.engines.waiting`); on PostgreSQL an advisory lock, exclusive for a save or
drop and shared while a model is read, each in its transaction. Every function here
takes ``wait``, the seconds to wait for that lock (default 60).

The store imports no model class. Each model module registers its kind with
:func:`register_kind` (``"naive_bayes"``, ``"lda"``, ``"qda"``, ``"logistic"``), and
:func:`load_model` rebuilds a model with that class's ``from_stored`` (its ``from_tables``
and the parts every kind stores alike, such as a calibrator).
"""

from __future__ import annotations

import json
import os
import platform
from contextlib import contextmanager, nullcontext
from typing import Any, Iterator

# Not ``import duckdb``: importing the submodule ``duckdb`` of this package binds that
# name here, so the library goes by another one.
import duckdb as duckdb_lib

from sqlnb.crash import create_whole
from sqlnb.engines import DuckDBEngine, as_engine
from sqlnb.engines.duckdb import new_connection
from sqlnb.engines.waiting import retry_locked
from sqlnb.errors import SqlnbError, SqlnbNotFound, suggest
from sqlnb.store.catalog import (CATALOG, FORMAT, SCHEMA, ModelChanged, Storage, check_format, fingerprint,
                                 stored_format)
from sqlnb.store.duckdb import DuckDBStorage
from sqlnb.store.postgres import PostgresStorage
from sqlnb.store.spark import SparkStorage
from sqlnb.version import __version__

__all__ = ["CATALOG", "FORMAT", "SCHEMA", "register_kind", "model_kinds", "save_model", "load_model",
           "list_models", "drop_model", "model_names", "connection", "versions"]

_KINDS: dict[str, type] = {}

#: How many times a load looks a model up again when its tables went while it read them
#: (a Spark catalog, which has no lock; DuckDB and PostgreSQL reads hold one).
READ_ATTEMPTS = 5

#: Storage backend per engine dialect.
_BACKENDS = {"postgres": PostgresStorage, "spark": SparkStorage}


def register_kind(kind: str, cls: type) -> type:
    """Register the class that reads models of ``kind`` (``cls.from_tables(meta, tables)``)."""
    _KINDS[kind] = cls
    return cls


def model_kinds() -> dict[str, type]:
    """Model kind name -> class, as registered by the model modules."""
    return dict(_KINDS)


def versions() -> dict:
    import numpy
    import sqlglot
    return {"sqlnb": __version__, "duckdb": duckdb_lib.__version__, "sqlglot": sqlglot.__version__,
            "numpy": numpy.__version__, "python": platform.python_version()}


@contextmanager
def connection(target: Any, read_only: bool = False,
               wait: float | None = None) -> Iterator[duckdb_lib.DuckDBPyConnection]:
    """A DuckDB connection for ``target``: a connection or engine (used as is) or a
    database path (opened here, closed on exit; while another process holds the file,
    the open waits up to ``wait`` seconds for it)."""
    if isinstance(target, duckdb_lib.DuckDBPyConnection):
        yield target
        return
    if isinstance(target, DuckDBEngine):
        yield target.con
        return
    path = os.fspath(target)
    if read_only and not os.path.exists(path):
        raise SqlnbNotFound(f"database {path!r} does not exist")
    try:
        con = retry_locked(lambda: new_connection(path, read_only=read_only), path, wait)
    except duckdb_lib.Error as e:
        raise SqlnbError(f"cannot open database {path!r}: {str(e).splitlines()[0]}") from None
    try:
        yield con
    finally:
        con.close()


@contextmanager
def storage(target: Any, read_only: bool = False, wait: float | None = None) -> Iterator[Storage]:
    """The storage behind ``target``: a DuckDB connection, engine or database path; a
    PostgresEngine or SparkEngine (or a psycopg connection or SparkSession). ``wait``:
    seconds to wait for another process's lock on the store."""
    if not isinstance(target, (str, os.PathLike, duckdb_lib.DuckDBPyConnection, DuckDBEngine)):
        engine = as_engine(target)
        if engine.dialect == "postgres":
            yield PostgresStorage(engine, wait)
            return
        if engine.dialect in _BACKENDS:
            yield _BACKENDS[engine.dialect](engine)
            return
        target = engine
    with connection(target, read_only=read_only and isinstance(target, (str, os.PathLike)), wait=wait) as con:
        yield DuckDBStorage(con)


def _not_found(name: str, where: Storage) -> SqlnbNotFound:
    names = where.names()
    return SqlnbNotFound(f"no model named {name!r} in {where.where}{suggest(name, names)}; "
                         f"models here: {', '.join(names) if names else 'none'}")


def save_model(model, target: Any, name: str, replace: bool = False, wait: float | None = None,
               expect: str | None = None) -> None:
    """Write ``model`` under ``name``: atomically, and over an existing model only with
    ``replace``; waiting up to ``wait`` seconds for another process's lock on the store.
    ``expect`` (a read-modify-write: update, calibrate, decide): write only over the model
    stored under that id (``model.stored_id`` of the model read), else raise
    :class:`~sqlnb.store.catalog.ModelChanged`, so that a change made by another process
    in between is not lost."""
    if not isinstance(name, str) or not name:
        raise SqlnbError("a model needs a non-empty name")

    rule = getattr(model, "decision", None)  # any kind's decision rule (sqlnb.models.decision)
    decision = {} if rule is None or rule.is_default else {"decision": rule.to_dict()}

    # A calibrator (any kind) is stored as parts of its own next to the kind's parameters.
    parts = dict(model.parameter_tables())
    cal = getattr(model, "calibration", None)
    parts.update(cal.tables() if cal is not None else {})
    sets = getattr(model, "conformal", None)  # conformal sets (any kind), parts of their own too
    parts.update(sets.tables() if sets is not None else {})
    described = dict(model.metadata(), kind=model.kind, **decision)
    fp = fingerprint(described, parts)

    def meta(created) -> str:
        # the lowest stored format that holds the model (sqlnb.store.catalog.stored_format)
        return json.dumps(dict(described, format=stored_format(model), versions=versions(), fingerprint=fp,
                               created=created.isoformat(timespec="seconds") + "Z"), default=str)

    def write(into: Any) -> None:
        with storage(into, wait=wait) as st:
            st.save(name, model.kind, parts, meta, replace, expect=expect)

    if isinstance(target, (str, os.PathLike)):  # a new models file appears whole or not at all
        create_whole(os.fspath(target), write)
    else:
        write(target)


def _reading(st: Storage):
    """What makes a read of ``st`` one consistent snapshot (a backend's ``reading()``;
    a DuckDB file is consistent through its lock already)."""
    reading = getattr(st, "reading", None)
    return reading() if reading is not None else nullcontext()


def load_model(target: Any, name: str, wait: float | None = None):
    """Load the model saved as ``name`` (see :func:`sqlnb.load`)."""
    with storage(target, read_only=True, wait=wait) as st:
        for attempt in range(READ_ATTEMPTS):
            with _reading(st):
                row = st.lookup(name)
                if row is None:
                    raise _not_found(name, st)
                model_id, kind, meta_text = row
                meta = json.loads(meta_text)
                check_format(name, meta)
                if kind not in _KINDS:
                    raise SqlnbError(f"model {name!r} is of kind {kind!r}, which this sqlnb version cannot read")
                try:
                    parts = st.read_parts(model_id)
                    break
                except ModelChanged:  # a store without locks (Spark): replaced while read
                    if attempt == READ_ATTEMPTS - 1:
                        raise
    model = _KINDS[kind].from_stored(meta, parts)
    model.name = name
    model.stored_id = model_id  # what a read-modify-write expects to replace (save_model(expect=))
    if meta.get("decision") is not None:  # a decision rule, stored with any kind
        model.decision = model.decision_from_dict(meta["decision"])
    model.created = meta.get("created")
    model.fingerprint = meta.get("fingerprint")  # None: saved before sqlnb recorded one
    model.versions = meta.get("versions", {})
    return model


def list_models(target: Any, wait: float | None = None) -> list[dict]:
    """One dict per saved model: name, kind, created, label, features, rows."""
    with storage(target, read_only=True, wait=wait) as st, _reading(st):
        rows = st.rows()
    out = []
    for name, kind, created, meta_text in rows:
        meta = json.loads(meta_text)
        out.append({"name": name, "kind": kind, "created": str(created), "label": meta.get("label"),
                    "features": len(meta.get("features", [])), "rows": meta.get("report", {}).get("rows")})
    return out


def model_names(target: Any, wait: float | None = None) -> list[str]:
    """Names of the saved models, sorted."""
    with storage(target, read_only=True, wait=wait) as st, _reading(st):
        return st.names()


def drop_model(target: Any, name: str, wait: float | None = None) -> None:
    """Delete the model ``name`` and its tables."""
    with storage(target, wait=wait) as st:
        row = st.lookup(name)
        if row is None:
            raise _not_found(name, st)
        st.drop(name, row[0])
