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

A save records each part's rows and columns in the metadata (``parts``), and every read
checks a model against it and the metadata against what every kind writes, before its
kind reads it (:mod:`sqlnb.store.damage`): a model whose catalog row or tables were
changed since is refused in one line that says how to recover (:func:`load_model`), and
listed as damaged among the others (:func:`list_models`).
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
                                 readable_format, stored_format)
from sqlnb.store.damage import (PARTS, damaged, inventory, loader_problem, meta_problem, parsed_meta,
                                parts_problem)
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
    saved = inventory(parts)  # what a read checks the stored parts against (sqlnb.store.damage)

    def meta(created) -> str:
        # the lowest stored format that holds the model (sqlnb.store.catalog.stored_format)
        return json.dumps(dict(described, format=stored_format(model), versions=versions(), fingerprint=fp,
                               created=created.isoformat(timespec="seconds") + "Z", **{PARTS: saved}), default=str)

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


def _shapes(parts: dict) -> dict[str, tuple[int, list[str]]]:
    """Part -> (rows, columns) of parts read (pyarrow tables)."""
    return {part: (t.num_rows, list(t.column_names)) for part, t in parts.items()}


def _problem(model_id: str, meta: dict, shapes: dict | None) -> str | None:
    """What is damaged in the stored model ``model_id`` (its ``meta`` parsed, the
    ``shapes`` of its parts, None when its tables are gone), or None
    (:mod:`sqlnb.store.damage`)."""
    if shapes is None:
        return meta_problem(meta) or "its part tables are missing"
    return meta_problem(meta) or parts_problem(meta, shapes, lambda part: f"{SCHEMA}.m_{model_id}_{part}")


def _read_parts(st: Storage, model_id: str, last: bool) -> dict | None:
    """The parts of ``model_id``; None when they are gone on the ``last`` read (a store
    without locks raises :class:`ModelChanged` on the others: :data:`READ_ATTEMPTS`)."""
    try:
        return st.read_parts(model_id)
    except ModelChanged:
        if last:  # the same id, looked up again each time, and still no tables: gone
            return None
        raise


def _built(kind: str, meta: dict, parts: dict) -> tuple[Any, str | None]:
    """``(model, None)`` rebuilt by its kind's ``from_stored``, or ``(None, problem)`` when
    the kind's loader fails on the stored values: what the checks of
    :mod:`sqlnb.store.damage` cannot see (in a model saved before sqlnb recorded its parts)."""
    try:
        model = _KINDS[kind].from_stored(meta, parts)
        if meta.get("decision") is not None:  # a decision rule, stored with any kind
            model.decision = model.decision_from_dict(meta["decision"])
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:
        return None, loader_problem(e)
    return model, None


def load_model(target: Any, name: str, wait: float | None = None):
    """Load the model saved as ``name`` (see :func:`sqlnb.load`)."""
    with storage(target, read_only=True, wait=wait) as st:
        for attempt in range(READ_ATTEMPTS):
            with _reading(st):
                row = st.lookup(name)
                if row is None:
                    raise _not_found(name, st)
                model_id, kind, meta_text = row
                meta, problem = parsed_meta(kind, meta_text)
                if problem:
                    raise damaged(name, st.place, st.drop_command(name), problem)
                check_format(name, meta)
                if kind not in _KINDS:
                    raise SqlnbError(f"model {name!r} is of kind {kind!r}, which this sqlnb version cannot read")
                try:
                    parts = _read_parts(st, model_id, last=attempt == READ_ATTEMPTS - 1)
                    break
                except ModelChanged:  # a store without locks (Spark): replaced while read
                    continue
        problem = _problem(model_id, meta, None if parts is None else _shapes(parts))
        if problem:
            raise damaged(name, st.place, st.drop_command(name), problem)
        model, problem = _built(kind, meta, parts)
        if problem:
            raise damaged(name, st.place, st.drop_command(name), problem)
    model.name = name
    model.stored_id = model_id  # what a read-modify-write expects to replace (save_model(expect=))
    model.created = meta.get("created")
    model.fingerprint = meta.get("fingerprint")  # None: saved before sqlnb recorded one
    model.versions = meta.get("versions", {})
    return model


def list_models(target: Any, wait: float | None = None) -> list[dict]:
    """One dict per saved model: name, kind, created, label, features, rows, and
    ``status``: ``"ok"``, or ``"damaged: <what>"`` for a model that cannot be read
    (:mod:`sqlnb.store.damage`; ``sqlnb drop`` removes it)."""
    listed: list[dict] = []
    with storage(target, read_only=True, wait=wait) as st:
        for attempt in range(READ_ATTEMPTS):
            try:
                with _reading(st):
                    # every part table's rows and columns at once, where the store can say them
                    shapes = st.table_shapes() if hasattr(st, "table_shapes") else None
                    listed = [_listed(st, *row, shapes, last=attempt == READ_ATTEMPTS - 1) for row in st.entries()]
                break
            except ModelChanged:  # a store without locks (Spark): replaced while read
                continue
    return listed


def _listed(st: Storage, name: str, model_id: str, kind: str, created: Any, meta_text: Any,
            tables: dict | None, last: bool) -> dict:
    """One model's entry of :func:`list_models` (``tables``: the store's table -> (rows,
    columns), or None: the parts are read)."""
    meta, problem = parsed_meta(kind, meta_text)
    meta = meta or {}
    if problem is None and kind in _KINDS and readable_format(meta):  # else its layout is not this sqlnb's
        prefix = f"m_{model_id}_"
        if PARTS in meta and tables is not None:  # the recorded shapes, without reading rows
            problem = _problem(model_id, meta, {t[len(prefix):]: v for t, v in tables.items() if t.startswith(prefix)})
        else:
            parts = _read_parts(st, model_id, last)
            problem = _problem(model_id, meta, None if parts is None else _shapes(parts))
        if problem is None and PARTS not in meta:  # saved before sqlnb recorded its parts: rebuilt
            try:
                problem = _built(kind, meta, parts)[1]
            except SqlnbError as e:
                problem = str(e)
    features, report = meta.get("features"), meta.get("report")
    return {"name": name, "kind": kind, "created": str(created), "label": meta.get("label"),
            "features": len(features) if isinstance(features, list) else None,
            "rows": report.get("rows") if isinstance(report, dict) else None,
            "status": f"damaged: {problem}" if problem else "ok"}


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
