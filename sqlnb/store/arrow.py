"""Arrow columns of a model's parameter parts, built without importing pandas.

``pyarrow.array`` asks pandas whether its argument is a pandas object, and so imports
pandas on its first call in a process when pandas is installed (0.30 CPU s, a
third of what a bare scan of 10M rows × 20 DOUBLE columns costs; ``python -c 'import
pyarrow as pa; pa.array([1.0])'``). A fit that saves its model built every parameter
part that way. :func:`array` builds the column types parameter parts hold (DOUBLE,
integers, text) from their buffers (``pa.Array.from_buffers``), which never asks pandas,
and gives anything else (booleans, dates, decimals, ...) to ``pyarrow.array`` as before.
The result is the array ``pyarrow.array`` returns for the same values and type: the
same type (a model's fingerprint hashes it) and the same values, NULL for ``None``.

pyarrow itself is imported on first use (:data:`pa`): importing it costs ~0.08 s of a
process's start (and it imports cloudpickle and more), which a fit that does not save
(``sqlnb.fit`` from Python) and every CLI command's ``--help`` never need.
"""

from __future__ import annotations

from typing import Any, Iterable

import importlib
import types

import numpy as np


class _Deferred(types.ModuleType):
    """A module imported on first attribute access: ``pa.array`` imports pyarrow then.

    Modules on the fit path write ``from sqlnb.store.arrow import pa`` instead of
    ``import pyarrow as pa``: the annotations (``from __future__ import annotations``)
    stay text, and the first call that needs pyarrow imports it. Once imported, the
    module's names are copied in, so later lookups are ordinary attribute reads.
    """

    def __init__(self, name: str):
        super().__init__(name)
        self._target = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):  # copy, pickle and introspection probes: no import for them
            raise AttributeError(attr)
        module = importlib.import_module(self._target)
        self.__dict__.update(vars(module))
        return getattr(module, attr)


#: pyarrow, imported on first use (module docstring).
pa = _Deferred("pyarrow")


def _integer_dtype(type: "pa.DataType") -> type | None:
    """The numpy dtype of the integer types :func:`array` builds itself, else ``None``."""
    if not isinstance(type, pa.DataType):
        return None
    return {"int32": np.int32, "int64": np.int64}.get(str(type))
_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def array(values: Iterable[Any], type: pa.DataType | None = None) -> pa.Array:
    """``pyarrow.array(values, type)`` without importing pandas (module docstring).

    Built from buffers: ``type`` DOUBLE (numbers, ``None`` as NULL; NaN stays NaN as
    ``pyarrow.array`` keeps it), INT32 or INT64 (integers), STRING (text); and, with
    ``type`` None, values that are all integers within INT64 (or all floats, or all
    text), which ``pyarrow.array`` infers as INT64 (DOUBLE, STRING); a one-dimensional
    numpy array of floats as DOUBLE (NaN kept) or of integers as INT32/INT64 as is. Anything
    else: ``pyarrow.array``.
    """
    if isinstance(values, np.ndarray) and values.ndim == 1 and (
            (type == pa.float64() and values.dtype.kind == "f")
            or (_integer_dtype(type) is not None and values.dtype.kind in "iu" and (
                values.size == 0 or np.iinfo(_integer_dtype(type)).min <= values.min() <= values.max()
                <= np.iinfo(_integer_dtype(type)).max))):
        data = np.ascontiguousarray(values, dtype=np.float64 if type == pa.float64() else _integer_dtype(type))
        return pa.Array.from_buffers(type, len(data), [None, pa.py_buffer(data.tobytes())], null_count=0)
    values = list(values)
    valid = [v is not None for v in values]
    present = [v for v in values if v is not None]
    if type is None:
        type = _inferred(present)
    if type is None or (type != pa.float64() and _integer_dtype(type) is None and type != pa.string()):
        return pa.array(values, type)
    if type == pa.string():
        if not all(isinstance(v, str) for v in present):
            return pa.array(values, type)
        encoded = [v.encode("utf-8") if v is not None else b"" for v in values]
        offsets = np.zeros(len(values) + 1, dtype=np.int32)
        np.cumsum([len(b) for b in encoded], out=offsets[1:])
        if offsets[-1] >= 2 ** 31 - 1:  # past a STRING's 32-bit offsets: pyarrow's own chunking
            return pa.array(values, type)
        buffers = [_validity(valid), pa.py_buffer(offsets.tobytes()), pa.py_buffer(b"".join(encoded))]
        return pa.Array.from_buffers(type, len(values), buffers, null_count=valid.count(False))
    if type == pa.float64():
        if not all(_is_number(v) for v in present):
            return pa.array(values, type)
        data = np.array([float(v) if v is not None else 0.0 for v in values], dtype=np.float64)
    else:
        if not all(_is_integer(v) for v in present):
            return pa.array(values, type)
        dtype = _integer_dtype(type)
        info = np.iinfo(dtype)
        if any(not info.min <= int(v) <= info.max for v in present):
            return pa.array(values, type)  # pyarrow's own overflow error
        data = np.array([int(v) if v is not None else 0 for v in values], dtype=dtype)
    return pa.Array.from_buffers(type, len(values), [_validity(valid), pa.py_buffer(data.tobytes())],
                                 null_count=valid.count(False))


def numbers(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """An integer or floating-point column without NULLs as a numpy array (its own dtype),
    read from its data buffers: ``to_numpy()`` imports pandas (module docstring)."""
    t = column.type
    if not (pa.types.is_floating(t) or pa.types.is_integer(t)) or column.null_count:
        raise ValueError(f"numbers() reads integer or floating-point columns without NULLs, not {t}")
    kind = "f" if pa.types.is_floating(t) else "i" if pa.types.is_signed_integer(t) else "u"
    dtype = np.dtype(f"{kind}{t.bit_width // 8}")
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    return np.concatenate([np.frombuffer(c.buffers()[1], dtype=dtype, count=len(c), offset=c.offset * dtype.itemsize)
                           for c in chunks] or [np.empty(0, dtype)])


def floats(column: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A numeric column as float64 numpy values, NULL as NaN (what ``to_numpy(zero_copy_only=False)``
    gives of it after a cast to DOUBLE), read from its buffers (:func:`numbers`)."""
    import pyarrow.compute as pc

    return numbers(filled(pc.cast(column, pa.float64()), float("nan")))


def filled(column: pa.Array | pa.ChunkedArray, value: Any) -> pa.Array | pa.ChunkedArray:
    """``pyarrow.compute.fill_null(column, value)`` for a DOUBLE or integer ``column``
    (:func:`array`'s types), without importing pandas (``fill_null`` makes its scalar with
    ``pyarrow.scalar``, which does)."""
    import pyarrow.compute as pc

    if not column.null_count:
        return column
    return pc.coalesce(column, array([value], column.type)[0])


def _inferred(present: list) -> pa.DataType | None:
    """The type ``pyarrow.array`` infers for these non-NULL values, when :func:`array`
    builds it itself; None otherwise (and for no values: pyarrow's NULL type)."""
    if not present:
        return None
    if all(_is_integer(v) for v in present):
        return pa.int64() if all(_INT64_MIN <= int(v) <= _INT64_MAX for v in present) else None
    if all(isinstance(v, float) for v in present):
        return pa.float64()
    if all(isinstance(v, str) for v in present):
        return pa.string()
    return None


def _is_integer(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_number(v: Any) -> bool:
    """A float, or an integer within INT64 (pyarrow refuses a larger one as DOUBLE)."""
    if _is_integer(v):
        return _INT64_MIN <= int(v) <= _INT64_MAX
    return isinstance(v, (float, np.floating))


def _validity(valid: list[bool]) -> pa.Buffer | None:
    """Arrow's validity bitmap (least significant bit first), None when nothing is NULL."""
    if all(valid):
        return None
    return pa.py_buffer(np.packbits(np.array(valid, dtype=bool), bitorder="little").tobytes())
