"""What the analytics layer knows about a column from its engine type name alone.

Every rule here reads a type name (DuckDB spelling; Spark's names are translated to it by its
engine) and never the data, so a query is accepted or refused before anything runs: the family
of a type (how a measure reads it), whether it may be a group key or a privacy unit, its
collation, and how a group key of the type leaves an engine (:func:`key_codec`).
"""

from __future__ import annotations

from typing import Literal

from dpkit.errors import PlanError

__all__ = [
    "Family",
    "check_unit_type",
    "collation",
    "is_binary",
    "is_instant",
    "is_key_type",
    "is_nested",
    "key_codec",
    "temporal_codec",
    "type_family",
]

Family = Literal["float", "integer", "decimal", "string", "boolean", "other"]


def type_family(sql_type: str) -> Family:
    """Classify an engine type name (DuckDB spelling) into the families the compiler knows
    (text with the byte-wise default collation spelled out is text)."""
    t = sql_type.upper().strip().removesuffix(" COLLATE UTF8_BINARY")
    if t in {"DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8"}:
        return "float"
    if t in {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
        "INT",
        "INT2",
        "INT4",
        "INT8",
        "INT128",
    }:
        return "integer"
    if t.startswith("DECIMAL") or t.startswith("NUMERIC"):
        return "decimal"
    if t in {"VARCHAR", "TEXT", "STRING"} or t.startswith("VARCHAR"):
        return "string"
    if t in {"BOOLEAN", "BOOL"}:
        return "boolean"
    return "other"


def is_nested(sql_type: str) -> bool:
    """Whether an engine type (DuckDB spelling) holds several values: LIST ``T[]``, ARRAY
    ``T[n]``, STRUCT, MAP, UNION. Such a column cannot be a group key (its values are no
    hashable scalars); the test reads the schema only, never the data."""
    t = sql_type.upper().strip()
    return t.endswith("]") or t.startswith(("STRUCT", "MAP", "UNION", "LIST", "ARRAY"))


_KEY_TYPES = frozenset(
    {
        "DATE",
        "TIMESTAMP",
        "TIMESTAMP_S",
        "TIMESTAMP_MS",
        "TIMESTAMP WITH TIME ZONE",
        "TIMESTAMPTZ",
        "TIME",
        "UUID",
        "NULL",
        "BLOB",
        "BYTEA",
        "BINARY",
        "VARBINARY",
    }
)


_DAY_TIME_INTERVAL = ("INTERVAL DAY", "INTERVAL HOUR", "INTERVAL MINUTE", "INTERVAL SECOND")


def is_key_type(sql_type: str) -> bool:
    """Whether a column of this engine type (DuckDB spelling) can be a group key: an
    allow-list of types whose values leave every engine one to one as hashable Python values
    (numbers, text, booleans, bytes, UUIDs, dates, timestamps to the microsecond, times, Spark's
    day-time intervals, the NULL type, DuckDB enums). Refused by type, before anything runs:
    nested types, nanosecond timestamps and times (two keys 1 ns apart would be one Python
    ``datetime``), month-based intervals (no exact Python value; Spark's client cannot convert
    year-month intervals), times with a zone, user-defined types (Spark ML vectors: a dense and
    a sparse vector are two Spark groups but equal Python values) and anything unknown."""
    t = sql_type.upper().strip().removesuffix(" COLLATE UTF8_BINARY")
    if type_family(t) != "other" or t in _KEY_TYPES or t.startswith("ENUM("):
        return True
    if t.startswith("TIME(") and t.endswith(")"):  # Spark TIME(p), p <= 6: microseconds
        return t[5:-1].strip() in {"0", "1", "2", "3", "4", "5", "6"}
    return t.startswith(_DAY_TIME_INTERVAL) and "MONTH" not in t and "YEAR" not in t


def check_unit_type(column: str, sql_type: str) -> None:
    """Refuse a privacy unit column whose type is not a group-key type (see
    :func:`is_key_type`), by type, before anything runs.

    The bounding window partitions the rows by SQL equality of the unit, while the hash that
    ranks a unit's groups reads the unit's value (its canonical text with the md5 hash). Both
    must see the same classes: a value with several spellings that SQL calls equal (an
    ``INTERVAL`` of ``1 month`` and of ``30 days``, a list holding ``-0.0`` or ``0.0``, NaN in a
    struct) would hash once per spelling, and one person would take one slot of a group per
    spelling. The group-key types have one canonical text per equality class (floats are
    normalized first, text is compared byte by byte), so the unit gets the same allow-list
    on every engine and with both hashes."""
    if is_nested(sql_type) or not is_key_type(sql_type):
        raise PlanError(
            f"the privacy unit column {column!r} has the type {sql_type}, which cannot identify "
            "a person: use a column of integers, text, UUIDs, dates or timestamps "
            "(microseconds) that holds one value per person, e.g. an id column or this column "
            "cast to such a type (several spellings of one value of this type, such as "
            "'1 month' and '30 days' or -0.0 and 0.0 inside a list, would count one person as "
            "several)"
        )


def is_instant(sql_type: str) -> bool:
    """Whether an engine type (DuckDB spelling) is an instant: ``TIMESTAMP WITH TIME ZONE``
    (Spark's ``TIMESTAMP``), shown in a session time zone but stored as UTC microseconds."""
    return sql_type.upper().strip() in {"TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ"}


def is_binary(sql_type: str) -> bool:
    """Whether an engine type (DuckDB spelling) holds raw bytes."""
    return sql_type.upper().strip() in {"BLOB", "BYTEA", "BINARY", "VARBINARY"}


def collation(sql_type: str) -> str | None:
    """The collation of a text type (``STRING COLLATE UTF8_LCASE`` -> ``UTF8_LCASE``), or None
    for the engine's byte-wise default."""
    _, sep, tail = sql_type.upper().partition(" COLLATE ")
    if not sep or tail.strip() in ("", "UTF8_BINARY"):
        return None
    return tail.strip()


def key_codec(sql_type: str) -> str:
    """How a group key of type ``sql_type`` leaves a statement of a profile with
    ``exact_keys`` (decoded by the engine, one to one):

    ``instant``: microseconds since the epoch (an integer), decoded as a UTC datetime;
    ``local``: a wall-clock ``TIMESTAMP`` as text ``YYYY-MM-DD HH:MM:SS[.f]``, decoded as a naive
    datetime; ``date``: days since the epoch; ``text``: the UTF-8 bytes, decoded with
    ``surrogateescape`` (invalid bytes stay distinct); ``bytes``: as bytes; ``plain``: as is.
    Values outside Python's datetime range are NULL before grouping (the compiler's
    normalization of each column it reads); were one to arrive, it would stay its integer or
    text, never an error."""
    t = sql_type.upper().strip()
    if is_instant(t):
        return "instant"
    if t == "TIMESTAMP" or t.startswith(("TIMESTAMP_", "TIMESTAMP(")):
        return "local"
    if t == "DATE":
        return "date"
    if is_binary(t):
        return "bytes"
    if type_family(t) == "string":
        return "text"
    return "plain"


def temporal_codec(sql_type: str) -> str | None:
    """``"date"``, ``"local"`` or ``"instant"`` (see :func:`key_codec`) for a date or timestamp
    type, ``None`` for any other: how quantiles and histograms read the column as a number
    (days since 1970-01-01 for a date, microseconds since the epoch for a timestamp)."""
    codec = key_codec(sql_type)
    return codec if codec in ("date", "local", "instant") else None
