"""Column types as sqlnb reads them: which are numbers, which are floating point.

Types are compared in their DuckDB spellings; the engines normalise the types they
report (:func:`sqlnb.engines.duckdb_type`), so one set of names serves all of them.
"""

from __future__ import annotations

#: Floating-point type names in DuckDB, PostgreSQL and Spark spellings.
FLOAT_TYPES = frozenset({"FLOAT", "FLOAT4", "FLOAT8", "DOUBLE", "DOUBLE PRECISION", "REAL"})
#: Integer type names, without any ``(precision, scale)``.
INTEGER_TYPES = frozenset({
    "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
    "UHUGEINT", "INT", "INT1", "INT2", "INT4", "INT8", "BYTE", "SHORT", "LONG",
})
#: Numeric type names (without any ``(precision, scale)``). Whole names, not prefixes:
#: ``INTERVAL`` starts with ``INT`` and is not a number.
NUMERIC_TYPES = FLOAT_TYPES | INTEGER_TYPES | frozenset({"DECIMAL", "NUMERIC"})


def _base_type(sql_type: str) -> str:
    """``DECIMAL(10, 2)`` -> ``DECIMAL``; ``double precision`` -> ``DOUBLE PRECISION``."""
    return " ".join(sql_type.upper().split("(")[0].split())


def is_numeric(sql_type: str) -> bool:
    return _base_type(sql_type) in NUMERIC_TYPES and "[" not in sql_type


def is_float(sql_type: str) -> bool:
    return _base_type(sql_type) in FLOAT_TYPES and "[" not in sql_type


def is_integer(sql_type: str) -> bool:
    """An integer type, or a decimal of scale 0."""
    base = _base_type(sql_type)
    if base in ("DECIMAL", "NUMERIC"):
        scale = sql_type.split("(", 1)[1].rstrip(") ").split(",") if "(" in sql_type else []
        return len(scale) == 2 and scale[1].strip() == "0"
    return base in INTEGER_TYPES and "[" not in sql_type


def is_text_type(sql_type: str) -> bool:
    return sql_type.upper().startswith(("VARCHAR", "TEXT", "STRING", "CHAR", "BPCHAR"))
