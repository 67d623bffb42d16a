"""A damaged model in a store: found when the model is read, said in one line.

A model's catalog row (``sqlnb.models``) and its part tables (``sqlnb."m_<id>_<part>"``)
are ordinary tables: another tool or a hand-written statement can change them. Its
``meta`` made NULL or not JSON, a key taken out of it, a part's rows deleted or its table
dropped: reading such a model must not fail deep inside a kind's loader (a ``KeyError``,
an ``IndexError``), nor load and then blame the data it was fitted on. This module checks
what every model has, in one place, before a kind reads it (:func:`sqlnb.store.load_model`,
and :func:`sqlnb.store.list_models`, which marks a damaged model instead of failing):

* :func:`parsed_meta`: the catalog row names a kind, and its metadata is a JSON object;
* :func:`meta_problem`: it holds what every kind writes (:data:`STORED_META`);
* :func:`parts_problem`: each part the save recorded (the metadata's ``parts``, written by
  :func:`inventory`: rows and columns of each part table) is there, with those rows and
  those columns.

A model saved before sqlnb recorded ``parts`` gets the first two checks; for it, and for
anything the checks let through, a kind's loader that fails on the stored values is
reported the same way (:func:`sqlnb.store.load_model`). Each problem is one
:class:`StoreDamaged` line naming the model, the store and how to recover: drop the model
(``sqlnb drop`` removes its catalog row and whatever part tables are left) and fit it again.
"""

from __future__ import annotations

import json
from typing import Any

from sqlnb.errors import SqlnbError

#: The metadata's key that lists a model's parts as saved: part -> {"rows", "columns"}.
PARTS = "parts"

#: What every kind's metadata holds (``Model.metadata``), and the JSON type of each.
STORED_META = {"label": str, "label_type": str, "features": list, "report": dict}

_JSON_TYPES = {str: "a string", list: "a list", dict: "an object"}


class StoreDamaged(SqlnbError):
    """A model whose catalog row or part tables were changed or removed after it was saved
    (by hand or by another tool): it cannot be read; the message says what is wrong and
    how to recover."""


def damaged(name: str, place: str, drop: str, reason: str) -> StoreDamaged:
    """The one-line error for model ``name`` in ``place`` (the store, for messages),
    ``drop`` the command that removes it, ``reason`` what is wrong."""
    return StoreDamaged(f"model {name!r} in {place} is damaged: {reason}; remove it with `{drop}` "
                        "(sqlnb.drop in Python), then fit it and save it again")


def not_a_catalog(table: str, place: str, columns: list[str], expected: list[str]) -> SqlnbError:
    """The one-line error for a table ``sqlnb.models`` of another program (other columns)."""
    return SqlnbError(f"the table {table} in {place} is not an sqlnb catalog: its columns are "
                      f"{', '.join(columns)}, an sqlnb catalog's are {', '.join(expected)}; keep sqlnb's models "
                      "in another database file, or rename that table")


def inventory(parts: dict[str, tuple[Any, dict]]) -> dict[str, dict]:
    """What :func:`parts_problem` checks a model against when it is read: each part's
    rows and columns as saved (``parts``: part -> (pyarrow table, casts))."""
    return {part: {"rows": table.num_rows, "columns": list(table.column_names)}
            for part, (table, _) in sorted(parts.items())}


def parsed_meta(kind: Any, text: Any) -> tuple[dict | None, str | None]:
    """``(meta, None)`` from a catalog row's ``kind`` and ``meta`` text, or ``(None, problem)``."""
    if kind is None:
        return None, "its kind (column kind of the catalog) is NULL"
    if text is None:
        return None, "its metadata (column meta of the catalog) is NULL"
    try:
        meta = json.loads(text)
    except (TypeError, ValueError) as e:
        return None, f"its metadata (column meta of the catalog) is not JSON ({str(e).splitlines()[0]})"
    if not isinstance(meta, dict):
        return None, "its metadata (column meta of the catalog) is not a JSON object"
    return meta, None


def meta_problem(meta: dict) -> str | None:
    """What is missing or wrong in a model's metadata (:data:`STORED_META`, the features'
    names, the recorded parts), or None."""
    for key, kind in STORED_META.items():
        if key not in meta:
            return f"its metadata has no {key!r}"
        if not isinstance(meta[key], kind):
            return f"its metadata's {key!r} is not {_JSON_TYPES[kind]}"
    if not all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in meta["features"]):
        return "its metadata's 'features' are not all objects with a name"
    recorded = meta.get(PARTS)
    if recorded is not None and not (isinstance(recorded, dict) and all(
            isinstance(s, dict) and isinstance(s.get("rows"), int) and isinstance(s.get("columns"), list)
            for s in recorded.values())):
        return f"its metadata's {PARTS!r} is not an object of rows and columns per part"
    return None


def parts_problem(meta: dict, shapes: dict[str, tuple[int, list[str]]], table: Any) -> str | None:
    """The first recorded part (the metadata's ``parts``) that is missing or holds other
    rows or lacks a column in ``shapes`` (part -> (rows, columns) as read), or None.
    ``table(part)`` names a part's table for the message."""
    for part, saved in sorted((meta.get(PARTS) or {}).items()):
        if part not in shapes:
            return f"its part table {table(part)} is missing"
        rows, columns = shapes[part]
        if rows != saved["rows"]:
            return f"its part table {table(part)} holds {rows} rows, not the {saved['rows']} it was saved with"
        lacking = [c for c in saved["columns"] if c not in columns]
        if lacking:
            return f"its part table {table(part)} lacks the columns {', '.join(map(str, lacking))}"
    return None


def loader_problem(error: Exception) -> str:
    """A kind's loader failing on stored values (a model saved before sqlnb recorded its
    parts, or a value the checks let through), as one line."""
    if isinstance(error, KeyError):
        return f"its metadata or part tables lack {error.args[0]!r}" if error.args else "a key is missing"
    text = str(error).strip().splitlines()
    return f"its metadata and part tables do not fit together ({type(error).__name__}: {text[0] if text else ''})"
