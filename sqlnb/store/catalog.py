"""The stored layout every engine shares, and the small interface a storage backend fills.

Layout, in the schema ``sqlnb``::

    sqlnb.models            name, id, kind, created, meta (JSON text)
    sqlnb."m_<id>_<part>"   one table per parameter part (classes, moments, sums, ...)

A model's name is data, never SQL: it lives only in ``sqlnb.models`` and is always a
bound parameter, while its tables are named by a generated id. So ``we'ird name`` or a
name that differs only in case is just a name.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import uuid
from typing import Any, Callable, Protocol

from sqlglot import exp

from sqlnb import sql
from sqlnb.store import arrow
from sqlnb.store.arrow import pa
from sqlnb.store.damage import not_a_catalog
from sqlnb.errors import SqlnbError, StoreBusy
from sqlnb.version import __version__

SCHEMA = "sqlnb"
CATALOG = "models"
#: Version of the stored layout, written into every model's metadata (``format``) and
#: checked when a model is loaded (:func:`check_format`). Raise it when a change would
#: make an older sqlnb read a model wrongly (a part it would ignore, a meaning changed);
#: an addition older versions refuse anyway (a new kind) needs none. Every format up to
#: this one must still load: tests/test_store_version.py loads a saved model of each
#: (tests/fixtures).
#:
#: 1. The layout above (every release so far, tests/fixtures/models_7313a04 included).
#: 2. A model may hold conformal prediction sets (parts ``conformal`` and
#:    ``conformal_thresholds``, :mod:`sqlnb.models.conformal`). A sqlnb of format 1 would
#:    ignore them: score without the sets, and drop them when it saves the model again
#:    (decide, calibrate). A model is stored in the lowest format that holds it
#:    (:func:`stored_format`): only a model with sets is of format 2, so a sqlnb of format
#:    1 refuses just those, in one line, and still reads every other model.
#: 3. Conformal sets may be RAPS's (``method`` ``raps``, with ``lambda`` and ``k_reg``) or
#:    Mondrian sets by a column (``by``, ``by_type`` and a ``group`` per threshold). A
#:    sqlnb of format 2 would score the first as APS's and read the second's thresholds
#:    as per class; every other model with sets stays format 2.
FORMAT = 3

#: Metadata that says how and when a model was fitted, not what it is: left out of its
#: :func:`fingerprint`, so that a model saved again as it was (copied to another store,
#: refitted on the same rows) keeps its fingerprint.
PROVENANCE = ("report", "versions", "created", "format", "fingerprint")

#: A part's column that says where the rows it was fitted on came from (a calibrator's or
#: conformal sets' held-out data: a file path or a query's text), stored and shown but
#: deciding no score: left out of the :func:`fingerprint` like :data:`PROVENANCE`, so the
#: same rows read from a moved file give the same fingerprint. No parameter part has it.
PROVENANCE_COLUMN = "source"


def fingerprint(meta: dict, parts: dict[str, tuple[Any, dict]]) -> str:
    """What a model is, as 16 hex digits: a SHA-256 over its metadata (less
    :data:`PROVENANCE`) and the content of its parameter parts (less their
    :data:`PROVENANCE_COLUMN`), written into the catalog
    row's ``meta`` by every save. Anything that scores from a copy of the model (the dbt
    package of :mod:`sqlnb.workflows.dbt`) checks this to know the copy is still the
    model: a refit on other rows, new hyperparameters, a decision rule or a calibrator
    change it.

    Numeric columns without NULLs are hashed as their values' bytes (little-endian, as
    numpy holds them), others as JSON of Python values (floats by ``repr``, which
    round-trips every double), so the digits do not depend on how a table is chunked or
    on the store it was read from. A text model's 18,000 term rows (sms_spam) take 35 ms
    all as JSON, 10 ms with the numeric columns as bytes.
    """
    h = hashlib.sha256()
    kept = {k: v for k, v in meta.items() if k not in PROVENANCE}
    h.update(json.dumps(kept, sort_keys=True, default=str).encode())
    for name in sorted(parts):
        table, casts = parts[name]
        if PROVENANCE_COLUMN in table.schema.names:
            table = table.drop_columns([PROVENANCE_COLUMN])
        h.update(json.dumps([name, sorted((casts or {}).items()), table.schema.names,
                             [str(t) for t in table.schema.types]], default=str).encode())
        for column in table.columns:
            h.update(_column_bytes(column))
    return h.hexdigest()[:16]


def _column_bytes(column: Any) -> bytes:
    """A column's values as bytes for :func:`fingerprint` (its type is hashed beside)."""
    t = column.type
    if (pa.types.is_floating(t) or pa.types.is_integer(t)) and column.null_count == 0:
        values = arrow.numbers(column)  # not to_numpy(), which imports pandas
        return values.astype(values.dtype.newbyteorder("<"), copy=False).tobytes()
    return json.dumps(column.to_pylist(), default=str).encode()


#: ``created -> meta JSON``: the metadata is made inside a save, once its time is known.
MetaText = Callable[[_dt.datetime], str]


class Storage(Protocol):
    """What :mod:`sqlnb.store` needs of one engine's storage (DuckDB, PostgreSQL, Spark)."""

    #: How error messages name the place ("this database", "this Spark catalog").
    where: str
    #: The store as a damaged model's message names it (a DuckDB file's path).
    place: str

    def drop_command(self, name: str) -> str:
        """The command line that drops model ``name`` from this store."""

    def lookup(self, name: str) -> tuple[str, str, str] | None:
        """``(id, kind, meta)`` of the live model ``name``, or None."""

    def names(self) -> list[str]:
        """Names of the live models, sorted."""

    def rows(self) -> list[tuple[str, str, Any, str]]:
        """``(name, kind, created, meta)`` of every live model, by name."""

    def entries(self) -> list[tuple[str, str, str, Any, str]]:
        """``(name, id, kind, created, meta)`` of every live model, by name."""

    def read_parts(self, model_id: str) -> dict[str, Any]:
        """Part name -> pyarrow table of the model stored under ``model_id``."""

    def save(self, name: str, kind: str, parts: dict[str, tuple[Any, dict]], meta: MetaText,
             replace: bool, expect: str | None = None) -> None:
        """Write the parts and the catalog row atomically (see each backend); with
        ``expect``, only over the model stored under that id (:func:`check_expected`)."""

    def drop(self, name: str, model_id: str) -> None:
        """Remove the model ``name`` (stored under ``model_id``) and its tables."""


def without_ids(entries: list[tuple]) -> list[tuple]:
    """:meth:`Storage.rows` from :meth:`Storage.entries`: each model's row less its id."""
    return [(name, kind, created, meta) for name, _, kind, created, meta in entries]


def catalog_table() -> exp.Table:
    return sql.table(CATALOG, SCHEMA)


def part_table(model_id: str, part: str) -> exp.Table:
    return sql.table(f"m_{model_id}_{part}", SCHEMA)


def new_id() -> str:
    return uuid.uuid4().hex[:12]


def now() -> _dt.datetime:
    """The catalog's ``created``: UTC, without a zone (a TIMESTAMP column everywhere)."""
    return _dt.datetime.now(_dt.timezone.utc).replace(tzinfo=None)


#: The columns of ``sqlnb.models``, in order.
CATALOG_COLUMNS = ("name", "id", "kind", "created", "meta")


def catalog_columns_query() -> exp.Select:
    """The columns of ``sqlnb.models`` in order, from ``information_schema`` (bind
    :data:`SCHEMA` and :data:`CATALOG`): none when there is no catalog."""
    return (exp.select(sql.col("column_name")).from_(exp.to_table("information_schema.columns"))
            .where(exp.and_(sql.col("table_schema").eq(exp.Placeholder()),
                            sql.col("table_name").eq(exp.Placeholder())))
            .order_by(sql.col("ordinal_position")))


def found_catalog(columns: list[str], store: "Storage") -> bool:
    """Whether ``store`` has a catalog (``columns``: those of its ``sqlnb.models``, none
    without one); a table of that name of another program (other columns) is refused
    in one line, before a query fails on it."""
    if columns and not set(CATALOG_COLUMNS) <= set(columns):
        raise not_a_catalog(f"{SCHEMA}.{CATALOG}", store.place, list(columns), list(CATALOG_COLUMNS))
    return bool(columns)


def catalog_columns(primary_key: bool) -> list[exp.ColumnDef]:
    """Column definitions of ``sqlnb.models`` (``name`` is the primary key where the engine
    enforces one; Spark's catalog is an append-only log instead)."""
    types = ("varchar", "varchar", "varchar", "timestamp", "varchar")
    out = [exp.ColumnDef(this=sql.ident(n), kind=exp.DataType.build(t)) for n, t in zip(CATALOG_COLUMNS, types)]
    if primary_key:
        out[0].set("constraints", [exp.ColumnConstraint(kind=exp.PrimaryKeyColumnConstraint())])
    return out


def create_catalog(primary_key: bool) -> list[exp.Expression]:
    """``CREATE SCHEMA IF NOT EXISTS sqlnb`` and ``CREATE TABLE IF NOT EXISTS sqlnb.models``."""
    return [exp.Create(this=exp.Table(this=sql.ident(SCHEMA)), kind="SCHEMA", exists=True),
            exp.Create(this=exp.Schema(this=catalog_table(), expressions=catalog_columns(primary_key)),
                       kind="TABLE", exists=True)]


def insert_catalog_row() -> exp.Insert:
    """``INSERT INTO sqlnb.models VALUES (?, ?, ?, ?, ?)``: name, id, kind, created, meta."""
    return exp.insert(exp.values([tuple(exp.Placeholder() for _ in range(5))]), catalog_table())


def delete_catalog_row() -> exp.Delete:
    return exp.delete(catalog_table(), sql.col("name").eq(exp.Placeholder()))


def casted_select(columns: list[str], casts: dict, view: str) -> exp.Select:
    """``SELECT CAST(c AS <type>) AS c, ... FROM view``: a part's columns with the stored
    types a model asks for (a label's DATE, DECIMAL, ...)."""
    cols = [exp.alias_(exp.Cast(this=sql.col(c), to=exp.DataType.build(casts[c], dialect="duckdb")), c, quoted=True)
            if c in casts else sql.col(c) for c in columns]
    return exp.select(*cols).from_(sql.table(view))


class ModelChanged(StoreBusy):
    """A save that rewrites a model read before (``expect``: the id it was read under)
    found another one stored under the name since: another process saved or dropped it
    in between. The caller reads the model again and redoes its change."""


def check_expected(name: str, old: tuple | None, expect: str | None, where: str) -> None:
    """Raise :class:`ModelChanged` when ``expect`` is given and the live model ``old``
    (``(id, ...)`` or None) is not the one stored under that id."""
    if expect is not None and (old is None or old[0] != expect):
        raise ModelChanged(f"model {name!r} in {where} was {'dropped' if old is None else 'replaced'} by another "
                           "process while this command worked on it; run the command again")


def already_exists(name: str, where: str) -> SqlnbError:
    return SqlnbError(f"model {name!r} already exists in {where}; pass --replace (replace=True) to overwrite it")


def stored_format(model: Any) -> int:
    """The lowest format that holds ``model`` (:data:`FORMAT`'s list): 3 with RAPS's sets
    or sets by a column, 2 with other conformal sets, else 1."""
    sets = getattr(model, "conformal", None)
    if sets is None:
        return 1
    return 3 if sets.method == "raps" or sets.by is not None else 2


def readable_format(meta: dict) -> bool:
    """Whether this sqlnb reads the format a model's metadata names (:data:`FORMAT`; none
    is format 1, the first)."""
    stored = meta.get("format", 1)
    return isinstance(stored, int) and stored <= FORMAT


def check_format(name: str, meta: dict) -> None:
    """Refuse, in one line, a model stored in a format newer than :data:`FORMAT`: this
    sqlnb would misread it. A model without a format is of format 1 (the first)."""
    if readable_format(meta):
        return
    stored = meta.get("format", 1)
    by = (meta.get("versions") or {}).get("sqlnb")
    raise SqlnbError(f"model {name!r} is stored in format {stored}{f' by sqlnb {by}' if by else ''}; this sqlnb "
                     f"{__version__} reads formats up to {FORMAT}: upgrade sqlnb (pip install -U sqlnb) to load it")
