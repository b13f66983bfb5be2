"""Compile a :class:`~dpkit.analytics._plan.Plan` into one SQL statement (sqlglot AST).

The statement is assembled node by node from a small allow-list of constructs (column
references, literals, ``CASE``, comparisons, ``LEAST``/``GREATEST``, ``FLOOR``, casts whose
argument is already in range, one hash function, ``ROW_NUMBER``/``RANK``/``DENSE_RANK`` over one
window, ``COUNT``/``SUM``/``HISTOGRAM`` aggregates); identifiers are always quoted and literals
always escaped by sqlglot, and the analyst's predicates enter only as validated trees
(:mod:`dpkit.analytics._sql`). A :class:`DialectProfile` names, per engine, the functions and
types that differ: the hash, the exact integer sum type, the NaN test, the error-to-NULL wrapper.
Profiles: :data:`DUCKDB` / :data:`DUCKDB_MD5` and :data:`SPARK` / :data:`SPARK_MD5` (Spark SQL:
``xxhash64``, DECIMAL(38, 0) sums, checked predicate arithmetic, histogram cells as grouping
sets); the two md5 profiles keep exactly the same rows.

Shape of the statement (``u`` the unit, ``k`` the key columns, ``v`` the value columns)::

    WITH src AS (SELECT norm(col) AS col, ... FROM source),  -- NaN -> NULL, -0.0 -> 0.0,
                                                             -- text COLLATE C (byte-wise)
         rows AS (SELECT u, k..., v..., hk, hr FROM src WHERE predicates),
         ranked AS (SELECT *, ROW_NUMBER() OVER w AS rn,            -- w: PARTITION BY u
                              RANK() OVER (PARTITION BY u ORDER BY hk, k...) AS gr,
                              DENSE_RANK() OVER (PARTITION BY u ORDER BY hk, k...) AS g
                       FROM rows)                                  -- w: ORDER BY hk, k, hr, v
    SELECT k..., measures FROM ranked
    WHERE g <= max_partitions AND rn - gr < max_rows_per_partition GROUP BY k...

with ``hk = H(salt, u, k)`` and ``hr = H(salt, u, k, v)``. Inside one unit the rows are sorted
by (group hash, key, row hash, row content); ``g`` is the rank of the row's group among the
unit's groups and ``rn - gr`` the rank of the row inside its group (``gr`` is the position of
the group's first row), so one sort of each unit's rows does both limits: the three window
functions share their partitioning and their order prefix, and the engine evaluates them in
one window operator. The row hash reads the columns the plan uses (unit, keys, measure
columns), which is the part of the row content the aggregates can see: two rows equal there
are interchangeable, so the result never depends on file order. ``units`` counts the first
kept row of each (unit, group) pair, which counts a NULL unit as one unit without
``COUNT(DISTINCT)``.

Value pipeline of a measure (no division, no cast of an unclamped value, nothing that can
raise)::

    x   = CAST(col AS DOUBLE)             (TRY_CAST for text columns: junk becomes NULL)
    x   = CASE WHEN isnan(x) THEN NULL ELSE x END
    c   = CASE WHEN x IS NULL THEN NULL ELSE LEAST(GREATEST(x, lower), upper) END
    i   = LEAST(GREATEST(CAST(FLOOR(c * 2^k) AS BIGINT), L), U)   L = floor(lower 2^k), ...
    sum = COALESCE(SUM(CAST(i AS HUGEINT)), 0)

The NaN test comes before the clamp because ``GREATEST(NaN, a)`` is NaN in DuckDB (NaN sorts
above every number) and ``LEAST(NaN, b) = b``: an unguarded clamp would turn NaN into the upper
bound. The NULL test is needed because ``LEAST``/``GREATEST`` skip NULL arguments. ``c * 2^k``
is exact (a power-of-two scaling of a double in ``[lower, upper]``, checked not to overflow) and
``|L|, |U| <= 2^62`` is checked at compile time, so the ``BIGINT`` cast can never fail.
"""

from __future__ import annotations

import datetime
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, cast

from sqlglot import exp

from dpkit._numeric.validation import check_integer
from dpkit.analytics._plan import Measure, Plan, Source, did_you_mean
from dpkit.analytics._sql import parse_predicate
from dpkit.errors import EngineError, PlanError

__all__ = [
    "DUCKDB",
    "DUCKDB_MD5",
    "SPARK",
    "SPARK_MD5",
    "CompiledQuery",
    "DialectProfile",
    "PlanError",
    "canonical_token",
    "check_unit_type",
    "compile_plan",
    "is_key_type",
    "is_nested",
    "temporal_codec",
    "temporal_number",
    "type_family",
]

_P = "__dpk_"  # prefix of every internal name; analyst columns are always quoted identifiers
MAX_FIXED = 2**62  # |floor(bound * 2^k)| must stay below this, so BIGINT never overflows
EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_EPOCH_DATE = datetime.date(1970, 1, 1)
MAX_ROWS_PER_PARTITION = 2**31  # keeps rn - gr arithmetic and sums far from any limit


Family = Literal["float", "integer", "decimal", "string", "boolean", "other"]


def type_family(sql_type: str) -> Family:
    """Classify an engine type name (DuckDB spelling) into the families the compiler knows
    (text with the byte-wise default collation spelled out is text)."""
    t = sql_type.upper().strip().removesuffix(" COLLATE UTF8_BINARY")
    if t in {"DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8"}:
        return "float"
    if t in {
        "TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
        "UINTEGER", "UBIGINT", "UHUGEINT", "INT", "INT2", "INT4", "INT8", "INT128",
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


_KEY_TYPES = frozenset({
    "DATE", "TIMESTAMP", "TIMESTAMP_S", "TIMESTAMP_MS", "TIMESTAMP WITH TIME ZONE",
    "TIMESTAMPTZ", "TIME", "UUID", "NULL", "BLOB", "BYTEA", "BINARY", "VARBINARY",
})
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
            "several)")


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
    Values outside Python's datetime range are NULL before grouping (see
    :func:`_normalized`); were one to arrive, it would stay its integer or text, never an
    error."""
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


@dataclass(frozen=True)
class DialectProfile:
    """What differs between engines, for the constructs the compiler emits.

    ``hash``: ``"native"`` uses the engine's fast 64-bit hash of its arguments with the salt as
    first argument; ``"md5"`` hashes a canonical string (see :func:`canonical_token`) with MD5,
    which another engine (or Python's :mod:`hashlib`) reproduces bit for bit.
    """

    dialect: str = "duckdb"
    hash: Literal["native", "md5"] = "native"
    native_hash: str = "hash"
    md5: str = "md5"
    nan_test: str = "isnan"
    try_wrapper: str | None = "try"
    float_type: str = "DOUBLE"
    fixed_type: str = "BIGINT"
    sum_type: str = "HUGEINT"
    text_type: str = "VARCHAR"
    histogram: str | None = "histogram"
    salt_type: str = "UBIGINT"
    signed_salt: bool = False
    # DuckDB's hash of several arguments combines the arguments' hashes by a multiply and an
    # XOR, so within one unit the order of rows that differ in one column is the order of
    # (common mask XOR hash(v)): far from a uniform random order (of three rows, the middle
    # one is kept half of the time). Hashing the combined value once more (a bijective 64-bit
    # mix) makes the order pseudo-random again. Spark's xxhash64 chains each argument as the
    # seed of the next and needs no extra mix.
    native_mix: str | None = "hash"
    predicate_dialect: str = "duckdb"
    # microseconds since the epoch of an instant (TIMESTAMP WITH TIME ZONE): the md5 token of
    # an instant, the same on every engine whatever its session time zone
    instant_micros: str = "epoch_us"
    # group keys leave the statement in a form the driver decodes one to one (see
    # :func:`key_codec`): engines whose client library converts values lossily (Spark turns
    # instants into local wall-clock times and invalid UTF-8 into U+FFFD) set this
    exact_keys: bool = False


DUCKDB = DialectProfile()
DUCKDB_MD5 = DialectProfile(hash="md5")

# Spark SQL (classic and Connect). ``xxhash64`` is Spark's 64-bit hash (its ``hash`` is a 32-bit
# Murmur3: never emitted, the name comes from this profile only). Sums are DECIMAL(38, 0): a
# kept row contributes an integer of magnitude at most 2^62 (``MAX_FIXED``) and Spark counts
# rows in a signed 64-bit long, so any sum, and any partial sum of a subset of rows, has
# magnitude at most (2^63 - 1) 2^62 < 2^125 < 10^37.6 < 10^38 - 1: no overflow, ANSI or not.
# There is no error-to-NULL wrapper (Spark has no generic ``try``): the Spark engine runs
# statements with predicates with ANSI mode off, so a failing implicit cast is NULL there.
# There is no ``histogram`` aggregate either: bin and category counts are GROUPING SETS
# (one set per histogram measure), decoded by the engine.
SPARK = DialectProfile(dialect="spark", native_hash="xxhash64", native_mix=None,
                       try_wrapper=None, instant_micros="unix_micros", exact_keys=True,
                       fixed_type="BIGINT", sum_type="DECIMAL(38, 0)", text_type="STRING",
                       histogram=None, salt_type="BIGINT", signed_salt=True)
SPARK_MD5 = DialectProfile(dialect="spark", hash="md5", native_hash="xxhash64", native_mix=None,
                           try_wrapper=None, fixed_type="BIGINT", sum_type="DECIMAL(38, 0)",
                           text_type="STRING", histogram=None, salt_type="BIGINT",
                           signed_salt=True, instant_micros="unix_micros", exact_keys=True)


@dataclass(frozen=True)
class OutputMeasure:
    """How to decode one measure's output column."""

    name: str
    kind: str
    column: str
    size: int = 0  # number of bins / categories for tuple-valued kinds


@dataclass(frozen=True)
class CompiledQuery:
    """The SQL text and what the engine needs to decode its rows."""

    sql: str
    key_columns: tuple[str, ...]
    measures: tuple[OutputMeasure, ...]
    global_group: bool = field(default=False)
    # profiles without a histogram aggregate (see :func:`_grouping_sets`): the cell-index
    # column of each tuple-valued measure, in measure order, and the cell-count column
    cell_columns: tuple[str, ...] = ()
    cell_count: str | None = None
    # the statement evaluates row conditions (filters, bucket cases): Spark runs it with ANSI
    # mode off, so an implicit cast that fails is NULL instead of an error
    has_filters: bool = False
    # per key column, how the engine sent it (see :func:`key_codec`); empty: as they are
    key_codecs: tuple[str, ...] = ()


# ---------------------------------------------------------------------------- small builders


def _ident(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _col(name: str) -> exp.Column:
    return exp.Column(this=_ident(name))


def _int(value: int) -> exp.Expression:
    lit = exp.Literal.number(abs(value))
    return exp.Neg(this=lit) if value < 0 else lit


def _cast(e: exp.Expression, to: str) -> exp.Cast:
    return exp.Cast(this=e, to=exp.DataType.build(to, dialect="duckdb"))


def _double(value: float, profile: DialectProfile) -> exp.Expression:
    """A double constant, exactly: ``CAST('<repr>' AS DOUBLE)`` (repr round-trips)."""
    if not math.isfinite(value):
        raise PlanError(f"internal constant must be finite, got {value!r}")
    return _cast(exp.Literal.string(repr(float(value))), profile.float_type)


def _case(cond: exp.Expression, then: exp.Expression, default: exp.Expression) -> exp.Case:
    return exp.Case(ifs=[exp.If(this=cond, true=then)], default=default)


def _is_null(e: exp.Expression) -> exp.Is:
    return exp.Is(this=e, expression=exp.Null())


def _func(name: str, *args: exp.Expression) -> exp.Expression:
    return exp.Anonymous(this=name, expressions=list(args))


def _is_nan(x: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """The NaN test of ``x``. On DuckDB the argument goes through the error-to-NULL wrapper
    (``isnan(try(x))``, the same value): DuckDB 2.0 folds a bare ``isnan`` of a Parquet column
    to false when the file's statistics (which leave NaN out of min and max) show no NULL, and
    a NaN would then pass the normalization as a number."""
    arg = _func(profile.try_wrapper, x) if profile.try_wrapper else x
    return _func(profile.nan_test, arg)


def _alias(e: exp.Expression, name: exp.Identifier) -> exp.Expression:
    return cast(exp.Expression, exp.alias_(e, name))


def _clamp(e: exp.Expression, lo: exp.Expression, hi: exp.Expression) -> exp.Expression:
    # Plain function calls: sqlglot's Least/Greatest nodes would be rewritten with NULL guards
    # for DuckDB; every argument here is already known to be non-NULL.
    return _func("least", _func("greatest", e, lo), hi)


# ---------------------------------------------------------------------------- schema helpers


def _resolve(name: object, schema: Mapping[str, str], what: str) -> str:
    """The schema's spelling of column ``name`` (exact match first, then case-insensitive)."""
    if not isinstance(name, str) or not name:
        raise PlanError(f"{what} must be a non-empty column name, got {name!r}")
    if name in schema:
        return name
    folded = [c for c in schema if c.casefold() == name.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise PlanError(f"{what} {name!r} is not a column of the source"
                    f"{did_you_mean(name, schema)} (columns: {list(schema)})")


#: The first and last instants read as such (UTC): one day inside Python's datetime range,
#: so the value converts in every session time zone (offsets stay below a day).
_FIRST_INSTANT = "0001-01-02 00:00:00+00:00"
_LAST_INSTANT = "9999-12-30 23:59:59.999999+00:00"


def _outside_python_range(c: exp.Expression, sql_type: str, dialect: str
                          ) -> exp.Expression | None:
    """The test that a date or time value has no Python value, or ``None`` for a type whose
    values all have one; decided by the type (DuckDB spelling), the same on every engine.

    ``DATE``: before 0001-01-01 or after 9999-12-31; a wall-clock ``TIMESTAMP`` (any unit):
    before 0001-01-01 00:00 or after 9999-12-31 23:59:59.999999; an instant
    (``TIMESTAMP WITH TIME ZONE``): before 0001-01-02 00:00 UTC or after
    9999-12-30 23:59:59.999999 UTC (so that it converts in any session time zone); ``TIME``:
    ``24:00:00`` (DuckDB's end of day). Engines hold such values (a Parquet file may store year
    20000) but return them as text or integers beside the column's ``date``/``datetime``/``time``
    objects, so one column of keys would mix types."""
    t = sql_type.upper().strip()

    def outside(lo: str, hi: str, typ: str) -> exp.Expression:
        return exp.Or(this=exp.LT(this=c.copy(), expression=_cast(exp.Literal.string(lo), typ)),
                      expression=exp.GT(this=c.copy(),
                                        expression=_cast(exp.Literal.string(hi), typ)))

    if t == "DATE":
        return outside("0001-01-01", "9999-12-31", "DATE")
    if is_instant(t):
        return outside(_FIRST_INSTANT, _LAST_INSTANT, "TIMESTAMPTZ")
    if t == "TIMESTAMP" or t.startswith(("TIMESTAMP_", "TIMESTAMP(")):
        return outside("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999", "TIMESTAMP")
    if t == "TIME" and dialect == "duckdb":  # Spark's TIME stops at 23:59:59.999999
        return exp.EQ(this=c.copy(), expression=_cast(exp.Literal.string("24:00:00"), "TIME"))
    return None


def _normalized(name: str, family: Family, profile: DialectProfile,
                sql_type: str = "") -> exp.Expression:
    """A column with NaN turned into NULL and -0.0 into 0.0 (floats), dates, timestamps and
    times that Python cannot hold into NULL (see :func:`_outside_python_range`), and on DuckDB
    the infinite dates and timestamps (``infinity``, ``-infinity``) into NULL: DuckDB's client
    returns them as ``date.max``/``datetime.max`` (and the minimums), equal to real values, so
    as keys they would merge two groups in the driver; NULL is what a missing value is
    everywhere else. On DuckDB, text gets the byte-wise collation ``C`` (a ``NOCASE`` column
    or ``default_collation`` would make ``'bob'`` and ``'BOB'`` one unit or key in SQL but two
    texts in the md5 hash; Spark shows collations in the schema and they are refused there).
    Other types unchanged."""
    c = _col(name)
    t = sql_type.upper().strip()
    outside = _outside_python_range(c, t, profile.dialect)
    if outside is not None:
        if profile.dialect == "duckdb" and t != "TIME":
            outside = exp.Or(this=_func("isinf", c.copy()), expression=outside)
        return _case(outside, exp.Null(), c.copy())
    if profile.dialect == "duckdb" and family == "string":
        # byte-wise comparison whatever the column's collation or the connection's
        # default_collation (neither shows in DuckDB's schema): grouping, the unit's window and
        # both hashes then see the same classes. The cast is a no-op for text and types a
        # column of DuckDB's NULL type (an all-NULL Parquet column, read as text) as text,
        # which COLLATE needs.
        return exp.Collate(this=_cast(c, "VARCHAR"), expression=exp.Var(this="C"))
    if family != "float":
        return c
    zero = exp.Literal.number(0)
    return exp.Case(
        ifs=[
            exp.If(this=_is_nan(c, profile), true=exp.Null()),
            exp.If(this=exp.EQ(this=c.copy(), expression=zero), true=_cast(zero.copy(), "DOUBLE")),
        ],
        default=c.copy(),
    )


def _as_double(name: str, family: Family, profile: DialectProfile) -> exp.Expression:
    """The column read as a double with NaN -> NULL; refuses types that have no number.

    Text columns (every CSV column) are read with TRY_CAST: text that is no number is NULL.
    """
    c = _col(name)
    if family == "float":
        x: exp.Expression = _cast(c, profile.float_type)
    elif family in ("integer", "decimal", "boolean"):
        x = _cast(c, profile.float_type)
    elif family == "string":
        x = exp.TryCast(this=c, to=exp.DataType.build(profile.float_type, dialect="duckdb"))
    else:
        raise PlanError(f"column {name!r} has no numeric reading; cannot aggregate its values")
    return _case(_is_nan(x, profile), exp.Null(), x.copy())


# ---------------------------------------------------------------------------- hashing


def canonical_token(value: object) -> str:
    """The canonical text of one value in the md5 profile (what :func:`compile_plan` emits).

    ``NULL``/NaN -> ``"N"``; otherwise ``"V" + str(len(s)) + ":" + s`` where ``s`` is the
    engine's text of the normalized value: decimal digits for integers, ``true``/``false`` for
    booleans, the string itself for text, microseconds since the epoch for an instant
    (``TIMESTAMP WITH TIME ZONE``, whatever the session's time zone), days since 1970-01-01 for
    a date, ``days:microseconds`` (the date's days and the time of day) for a wall-clock
    timestamp (engines print years outside 1..9999 differently), upper-case hex for bytes,
    and for a double (see :func:`float_text`) its exact binary form ``[-]Mp<e>``. Tokens are
    joined by ``|``; the length prefix makes the encoding injective.
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "N"
    if isinstance(value, datetime.datetime) and value.tzinfo is not None:
        s = str((value - EPOCH_UTC) // datetime.timedelta(microseconds=1))
    elif isinstance(value, datetime.datetime):
        day = (value.date() - _EPOCH_DATE).days
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 \
            + value.microsecond
        s = f"{day}:{micros}"
    elif isinstance(value, datetime.date):
        s = str((value - _EPOCH_DATE).days)
    elif isinstance(value, (bytes, bytearray)):
        s = bytes(value).hex().upper()
    elif isinstance(value, bool):
        s = "true" if value else "false"
    elif isinstance(value, float):
        s = float_text(value)
    else:
        s = str(value)
    return f"V{len(s)}:{s}"


def float_text(x: float) -> str:
    """The md5 profile's text of a double: ``[-]M + "p" + e`` with ``|x| = M 2^(e - 52)``.

    ``e = floor(log2 |x|)`` and ``M = |x| 2^(52 - e)``, an integer in ``[2^52, 2^53)`` (subnormal
    doubles included: ``5e-324`` is ``4503599627370496p-1074``); ``0p0`` for zero (``-0.0``
    included), ``inf``/``-inf``. Exact integers only, so every engine produces the same text: a
    decimal rendering would not do (Java 17, hence Spark, prints ``1e23`` as
    ``9.999999999999999E22``, not the shortest round-trip digits DuckDB and Python print).
    """
    if x == 0.0:
        return "0p0"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    m, ex = math.frexp(abs(x))
    mant = int(m * 2.0**53)  # exact: m has at most 53 significant bits
    return ("-" if x < 0 else "") + f"{mant}p{ex - 1}"


_DBL_MAX = 1.7976931348623157e308
_DBL_TRUE_MIN = 5e-324


Step = list[tuple[str, exp.Expression]]


def _float_text_steps(e: str, out: str, profile: DialectProfile) -> list[Step]:
    """:func:`float_text` in SQL for the normalized double column ``e`` (no NaN, no -0.0; NULL
    is handled by the caller), as successive projections: step ``i`` reads the columns of
    steps ``< i`` by name and the last one names the text ``out``. Each intermediate value is
    computed once (inlined, the text would repeat the exponent some twenty times, and Spark
    spends seconds analysing such an expression).

    Only exact operations: ``LOG2`` is a first guess of the exponent, corrected by comparisons
    with exact powers of two (``POW(2, n)`` is exact for every representable ``2^n``); the
    scaling ``|x| 2^(52 - e)`` is split into two factors in ``[2^-1000, 2^1000]`` so neither
    overflows, and each product is a power-of-two scaling of a normal double, hence exact.
    Every cast is of a value clamped into range first."""
    a, guess, ex, a1, mant = (f"{out}_{n}" for n in ("a", "g", "e", "s", "m"))

    def pow2(n: exp.Expression) -> exp.Expression:
        return _func("pow", _double(2.0, profile), n)

    shift = exp.Paren(this=exp.Sub(this=_int(52), expression=_col(ex)))
    mant_e = exp.Mul(this=exp.Mul(this=_col(a), expression=pow2(_col(a1))),
                     expression=pow2(exp.Paren(this=exp.Sub(this=shift.copy(),
                                                            expression=_col(a1)))))
    text = exp.DPipe(this=exp.DPipe(this=exp.DPipe(
        this=_case(exp.LT(this=_col(e), expression=_int(0)), exp.Literal.string("-"),
                   exp.Literal.string("")),
        expression=_cast(_col(mant), profile.text_type)), expression=exp.Literal.string("p")),
        expression=_cast(_col(ex), profile.text_type))
    return [
        [(a, _clamp(exp.Abs(this=_col(e)), _double(_DBL_TRUE_MIN, profile),
                    _double(_DBL_MAX, profile)))],
        [(guess, _cast(exp.Floor(this=_clamp(_func("log2", _col(a)), _double(-1074.0, profile),
                                             _double(1023.0, profile))), profile.fixed_type))],
        [(ex, exp.Add(this=exp.Sub(
            this=_col(guess),
            expression=_case(exp.LT(this=_col(a), expression=pow2(_col(guess))), _int(1),
                             _int(0))),
            expression=_case(exp.GTE(this=_col(a), expression=pow2(
                exp.Add(this=_col(guess), expression=_int(1)))), _int(1), _int(0))))],
        [(a1, _clamp(shift, _int(-1000), _int(1000)))],
        [(mant, _cast(exp.Floor(this=_clamp(mant_e, _double(0.0, profile),
                                            _double(2.0**53, profile))), profile.fixed_type))],
        [(out, exp.Case(ifs=[
            exp.If(this=exp.EQ(this=_col(e), expression=_int(0)),
                   true=exp.Literal.string("0p0")),
            exp.If(this=exp.GT(this=_col(e), expression=_double(_DBL_MAX, profile)),
                   true=exp.Literal.string("inf")),
            exp.If(this=exp.LT(this=_col(e), expression=_double(-_DBL_MAX, profile)),
                   true=exp.Literal.string("-inf")),
        ], default=text))],
    ]


def _epoch_days(d: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """Days from 1970-01-01 to the date ``d`` (an integer, negative before), on either engine."""
    if profile.dialect == "spark":
        return _func("unix_date", d)
    return _func("date_diff", exp.Literal.string("day"),
                 _cast(exp.Literal.string("1970-01-01"), "DATE"), d)


def _micros_of_day(col: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """Microseconds since midnight of a wall-clock timestamp (an integer below 86,400 * 10^6),
    from its hour, minute and sub-minute microseconds: the same on DuckDB and Spark."""
    sub_minute: exp.Expression
    if profile.dialect == "spark":
        sub_minute = _cast(exp.Mul(this=_func("date_part", exp.Literal.string("SECOND"),
                                              col.copy()),
                                   expression=_int(10**6)), profile.fixed_type)
    else:
        sub_minute = _func("microsecond", col.copy())
    return exp.Add(this=exp.Add(
        this=exp.Mul(this=_cast(_func("hour", col.copy()), profile.fixed_type),
                     expression=_int(3_600_000_000)),
        expression=exp.Mul(this=_cast(_func("minute", col.copy()), profile.fixed_type),
                           expression=_int(60_000_000))), expression=sub_minute)


def _date_time_text(col: exp.Expression, codec: str, profile: DialectProfile
                    ) -> exp.Expression:
    """The md5 text of a date (``codec == "date"``: days since 1970-01-01) or a wall-clock
    timestamp (``"local"``: ``days:microseconds of the day``), identical on DuckDB and Spark for
    every value both can hold, years outside 1..9999 included; small integers only, so nothing
    overflows (Spark's ``timestampdiff`` from the epoch overflows near its range's ends).
    DuckDB's infinities are NULL before this (see :func:`_normalized`); its error-to-NULL
    wrapper still guards the text."""
    if codec == "date":
        out: exp.Expression = _cast(_epoch_days(col, profile), profile.text_type)
    else:
        out = exp.DPipe(this=exp.DPipe(
            this=_cast(_epoch_days(_cast(col.copy(), "DATE"), profile), profile.text_type),
            expression=exp.Literal.string(":")),
            expression=_cast(_micros_of_day(col, profile), profile.text_type))
    return _func(profile.try_wrapper, out) if profile.try_wrapper else out


#: Microseconds in one day.
DAY_MICROS = 86_400_000_000


def temporal_number(col: exp.Expression, codec: str, profile: DialectProfile
                    ) -> exp.Expression:
    """The number a quantile or a histogram reads from a date or timestamp column (a double):
    a ``DATE`` (``codec == "date"``) as its day number since 1970-01-01; a wall-clock
    ``TIMESTAMP`` (``"local"``) as ``days * 86,400 * 10^6 + microseconds of the day``, its
    microseconds since 1970-01-01 00:00 read as if it were UTC; an instant (``"instant"``,
    ``TIMESTAMP WITH TIME ZONE``) as its microseconds since the epoch, whatever the session's
    time zone. Integers, exact in a double while below 2^53 in magnitude (every date; an
    instant or a wall-clock time of the years 1685 to 2255), computed the same way on every
    engine; sub-microsecond digits are cut (towards the past)."""
    if codec == "date":
        return _cast(_epoch_days(col, profile), profile.float_type)
    if codec == "instant":
        return _cast(_func(profile.instant_micros, col), profile.float_type)
    days = _cast(_epoch_days(_cast(col.copy(), "DATE"), profile), profile.float_type)
    return exp.Add(this=exp.Mul(this=days, expression=_double(float(DAY_MICROS), profile)),
                   expression=_cast(_micros_of_day(col, profile), profile.float_type))


def temporal_codec(sql_type: str) -> str | None:
    """``"date"``, ``"local"`` or ``"instant"`` (see :func:`key_codec`) for a date or timestamp
    type, ``None`` for any other: which of :func:`temporal_number`'s readings a column has."""
    codec = key_codec(sql_type)
    return codec if codec in ("date", "local", "instant") else None


def _token_steps(columns: Sequence[tuple[str, Family, str]],
                 profile: DialectProfile, *, types: Mapping[str, str]) -> list[Step]:
    """The steps computing the canonical token (see :func:`canonical_token`) of each
    ``(column, family, alias)``, under ``alias``; the steps of all columns are merged, so the
    statement nests at most seven projections whatever the number of columns. ``types``
    (column -> engine type) picks the engine-independent text of instants (microseconds since
    the epoch), dates and wall-clock timestamps (see :func:`_date_time_text`) and bytes
    (upper-case hex)."""
    steps: list[Step] = []

    def add(level: int, alias: str, e: exp.Expression) -> None:
        while len(steps) <= level:
            steps.append([])
        steps[level].append((alias, e))

    n_float = len(_float_text_steps("x", "t", profile))
    for col, fam, alias in columns:
        text = alias + "_t"
        if fam == "float":
            for level, step in enumerate(_float_text_steps(col, text, profile)):
                for a, e in step:
                    add(level, a, e)
        elif is_instant(types.get(col, "")):
            add(n_float - 1, text, _cast(_func(profile.instant_micros, _col(col)),
                                         profile.text_type))
        elif is_binary(types.get(col, "")):
            add(n_float - 1, text, _func("hex", _col(col)))
        elif key_codec(types.get(col, "")) in ("date", "local"):
            add(n_float - 1, text, _date_time_text(_col(col), key_codec(types[col]), profile))
        else:
            # TRY_CAST: a text rendering never fails
            add(n_float - 1, text, exp.TryCast(
                this=_col(col), to=exp.DataType.build(profile.text_type, dialect="duckdb")))
        token = exp.DPipe(
            this=exp.DPipe(
                this=exp.DPipe(this=exp.Literal.string("V"),
                               expression=_cast(exp.Length(this=_col(text)), profile.text_type)),
                expression=exp.Literal.string(":"),
            ),
            expression=_col(text),
        )
        add(n_float, alias, _case(_is_null(_col(col)), exp.Literal.string("N"), token))
    return steps


def _staged(inner: exp.Select, steps: Sequence[Step], name: str) -> exp.Select:
    """``inner`` with the columns of ``steps`` added, one nested ``SELECT *, ...`` per step."""
    q = inner
    for n, step in enumerate(steps):
        if step:
            q = exp.select(exp.Star(), *[_alias(e, _ident(a)) for a, e in step]).from_(
                exp.Subquery(this=q, alias=exp.TableAlias(this=_ident(f"{name}{n}"))))
    return q


def _hash(salt: int, parts: Sequence[exp.Expression], profile: DialectProfile) -> exp.Expression:
    """The salted hash of ``parts``: with the md5 profile, ``parts`` are token columns (see
    :func:`_token_steps`), joined by ``|`` after the salt's decimal digits."""
    if profile.hash == "native":
        # A signed profile (Spark has no unsigned 64-bit type) takes the same 64 salt bits as
        # a signed BIGINT.
        s = salt - 2**64 if profile.signed_salt and salt >= 2**63 else salt
        h = _func(profile.native_hash, _cast(exp.Literal.string(str(s)), profile.salt_type),
                  *[p.copy() for p in parts])
        return h if profile.native_mix is None else _func(profile.native_mix, h)
    text: exp.Expression = exp.Literal.string(str(salt))
    for p in parts:
        text = exp.DPipe(this=exp.DPipe(this=text, expression=exp.Literal.string("|")),
                         expression=p.copy())
    return _func(profile.md5, text)


# ---------------------------------------------------------------------------- measures


def _fixed_bounds(lower: float, upper: float, frac_bits: int, what: str) -> tuple[int, int]:
    L = math.floor(math.ldexp(lower, frac_bits))
    U = math.floor(math.ldexp(upper, frac_bits))
    if not (-MAX_FIXED <= L <= U <= MAX_FIXED):
        raise PlanError(
            f"{what}: bounds [{lower!r}, {upper!r}] scaled by 2**{frac_bits} leave the 63-bit "
            "integer range; use fewer fractional bits or tighter bounds"
        )
    return L, U


def _finite_bounds(lower: object, upper: object, what: str) -> tuple[float, float]:
    for v in (lower, upper):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise PlanError(f"{what}: bounds must be finite numbers, got {lower!r}, {upper!r}")
    lo, hi = float(lower), float(upper)  # type: ignore[arg-type]
    if not lo <= hi:
        raise PlanError(f"{what}: lower {lower!r} exceeds upper {upper!r}")
    return lo, hi


def _fixed_point(c: exp.Expression, m: Measure, profile: DialectProfile) -> exp.Expression:
    """``LEAST(GREATEST(CAST(FLOOR(c * 2^k) AS BIGINT), L), U)`` for ``c`` in [lower, upper]."""
    k = check_integer(m.frac_bits, name=f"{m.name}.frac_bits", minimum=0, maximum=64)
    lo, hi = _finite_bounds(m.lower, m.upper, m.name)
    L, U = _fixed_bounds(lo, hi, k, m.name)
    scaled = exp.Mul(this=c, expression=_double(math.ldexp(1.0, k), profile))
    as_int = _cast(exp.Floor(this=scaled), profile.fixed_type)
    return _clamp(as_int, _int(L), _int(U))


def _clamped(x: exp.Expression, lo: float, hi: float, profile: DialectProfile) -> exp.Expression:
    return _case(_is_null(x), exp.Null(), _clamp(x.copy(), _double(lo, profile),
                                                    _double(hi, profile)))


def _bin_index(c: exp.Expression, edges: Sequence[float], lo: int, hi: int,
               profile: DialectProfile) -> exp.Expression:
    """Index ``i`` in ``[lo, hi]`` with ``edges[i] <= c < edges[i+1]`` by binary search.

    A balanced tree of ``CASE WHEN c < edges[mid] THEN <left> ELSE <right> END``: about
    ``log2(bins)`` comparisons per row, exact for any sorted edges, no arithmetic on data.
    """
    if lo == hi:
        return _int(lo)
    mid = (lo + hi + 1) // 2  # bins [lo, mid-1] lie below edges[mid]
    return _case(
        exp.LT(this=c.copy(), expression=_double(edges[mid], profile)),
        _bin_index(c, edges, lo, mid - 1, profile),
        _bin_index(c, edges, mid, hi, profile),
    )


def _uniform_step(edges: Sequence[float]) -> float | None:
    """``w`` when ``edges[i] == lo + i * w`` exactly in doubles for every inner edge, else None.

    Then the bin of ``c`` can be computed arithmetically (:func:`_bin_guess`, :func:`_bin_correct`).
    Required besides: at most ``2^20`` bins and ``w >= 2^-30 max(|lo|, |hi|)``, so that every
    rounding error (of ``w``, of ``i w``, of ``(c - lo) f``), each at most a few ``2^-52
    max(|lo|, |hi|)``, stays far below one bin width and the guess is off by at most one bin.
    """
    bins = len(edges) - 1
    lo, hi = edges[0], edges[-1]
    if bins > 1 << 20:
        return None
    w = (hi - lo) / bins
    if not (math.isfinite(w) and w > 0.0 and math.isfinite(bins / (hi - lo))):
        return None
    if w < math.ldexp(max(abs(lo), abs(hi)), -30):
        return None
    if any(lo + i * w != edges[i] for i in range(bins)):
        return None
    return w


def _edge_at(i: exp.Expression, lo: float, w: float, profile: DialectProfile) -> exp.Expression:
    """``lo + CAST(i AS DOUBLE) * w``: the same two double operations as the edge in Python."""
    return exp.Add(this=_double(lo, profile), expression=exp.Mul(
        this=_cast(i, profile.float_type), expression=_double(w, profile)))


def _bin_guess(c: exp.Expression, edges: Sequence[float], w: float, profile: DialectProfile
               ) -> exp.Expression:
    """``CAST(LEAST(GREATEST(FLOOR((c - lo) * f), 0), bins - 1) AS BIGINT)``, ``f = bins /
    (hi - lo)``: the bin of ``c`` (in ``[lo, hi]``, finite) up to one, by one multiplication."""
    bins = len(edges) - 1
    lo, hi = edges[0], edges[-1]
    diff = exp.Paren(this=exp.Sub(this=c.copy(), expression=_double(lo, profile)))
    g = exp.Floor(this=exp.Mul(this=diff, expression=_double(bins / (hi - lo), profile)))
    return _cast(_clamp(g, _double(0.0, profile), _double(float(bins - 1), profile)),
                 profile.fixed_type)


def _bin_correct(c: exp.Expression, g: exp.Expression, edges: Sequence[float], w: float,
                 profile: DialectProfile) -> exp.Expression:
    """The exact bin from a guess ``g`` off by at most one: compare ``c`` with edges ``g`` and
    ``g + 1`` (computed as in :func:`_uniform_step`, so equal to ``edges[g]``, ``edges[g+1]``).

    ``CASE WHEN c < edge(g) THEN g - 1 WHEN g < bins - 1 AND c >= edge(g + 1) THEN g + 1
    ELSE g END`` (NULL stays NULL: every comparison with NULL is not true and ``g`` is NULL).
    """
    bins = len(edges) - 1
    lo = edges[0]
    below = exp.LT(this=c.copy(), expression=_edge_at(g.copy(), lo, w, profile))
    nxt = exp.Add(this=g.copy(), expression=_int(1))
    above = exp.and_(exp.LT(this=g.copy(), expression=_int(bins - 1)),
                     exp.GTE(this=c.copy(), expression=_edge_at(nxt, lo, w, profile)))
    return exp.Case(ifs=[exp.If(this=below, true=exp.Sub(this=g.copy(), expression=_int(1))),
                         exp.If(this=above, true=nxt.copy())], default=g.copy())


_INT_RANGES: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("TINYINT", "INT1"), (-(2**7), 2**7 - 1)),
    **dict.fromkeys(("SMALLINT", "INT2"), (-(2**15), 2**15 - 1)),
    **dict.fromkeys(("INTEGER", "INT", "INT4"), (-(2**31), 2**31 - 1)),
    **dict.fromkeys(("BIGINT", "INT8"), (-(2**63), 2**63 - 1)),
    **dict.fromkeys(("HUGEINT", "INT128"), (-(2**127), 2**127 - 1)),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
    "UHUGEINT": (0, 2**128 - 1),
}


def _category_literal(value: object, family: Family, name: str,
                      sql_type: str = "HUGEINT") -> exp.Expression | None:
    """The literal for one category in the column's type family; ``None`` for NULL/NaN.

    An integer category (or a whole float) on an integer column is written as a constant of
    the column's own type when it lies in that type's range, and as ``NULL`` (a comparison
    that is never true: the category counts 0) when it does not, so the statement never holds
    a cast that fails (``CAST(2**200 AS HUGEINT)`` would raise as soon as a row reached it).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if family == "string":
        if isinstance(value, str):
            return exp.Literal.string(value)
    elif family == "boolean":
        if isinstance(value, bool):
            return exp.Boolean(this=value)
    elif family in ("integer", "decimal", "float"):
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            if family == "integer":
                return _integer_literal(value, sql_type)
            try:
                as_float = float(value)
            except OverflowError:
                return exp.Null()  # beyond every double (and DECIMAL): matches nothing
            return _cast(exp.Literal.string(repr(as_float)), "DOUBLE")
        elif isinstance(value, float) and math.isfinite(value):
            if family == "integer":
                if value.is_integer():
                    return _integer_literal(int(value), sql_type)
                return exp.Null()  # matches no integer; kept so the tuple keeps its length
            return _cast(exp.Literal.string(repr(value)), "DOUBLE")
    raise PlanError(
        f"category {value!r} of measure {name!r} does not fit the column's type ({family})"
    )


def _integer_literal(value: int, sql_type: str) -> exp.Expression:
    """``CAST('value' AS <type>)`` when ``value`` fits the integer type, else ``NULL``."""
    t = sql_type.upper().strip()
    lo, hi = _INT_RANGES.get(t, _INT_RANGES["HUGEINT"])
    if not lo <= value <= hi:
        return exp.Null()  # no value of the column equals it: the category counts 0
    return _cast(exp.Literal.string(str(value)), t if t in _INT_RANGES else "HUGEINT")


# ---------------------------------------------------------------------------- source


# One RFC 4180 field: quoted ("" inside stands for one quote), or unquoted and not starting
# with a quote (it may hold quotes further on), or empty.
_CSV_FIELD = r'"(?:[^"]|"")*"|[^,"][^,]*|'
# Separator of the raw read: four control bytes that text data does not hold (a line holding
# them would be cut there, affecting that line only).
_RAW_DELIM = "\x1c\x1d\x1e\x1f"
_RE_MAX_REPEAT = 1000  # RE2's limit on a counted repetition


def _repeat(unit: str, k: int) -> str:
    """A regular expression matching ``unit`` exactly ``k`` times (within RE2's limits)."""
    if k == 0:
        return ""
    q, r = divmod(k, _RE_MAX_REPEAT)
    out = f"(?:(?:{unit}){{{_RE_MAX_REPEAT}}}){{{q}}}" if q else ""
    return out + (f"(?:{unit}){{{r}}}" if r else "")


def _csv_lines(loc: exp.Expression, columns: tuple[str, ...]) -> exp.Expression:
    """A CSV file read line by line, each physical line parsed on its own.

    The engine reads every line after the header as one text value (no quote character, a
    separator that text does not hold), so no line can change how another is read: an
    unterminated quote on one line cannot swallow the lines after it. A line is kept only if it
    is a full match of ``F(,F){n-1}(,F)*`` with ``F`` an RFC 4180 field (:data:`_CSV_FIELD`)
    and ``n`` the header's column count (fields beyond the ``n``-th are ignored); field ``j``
    is then the group of
    ``^(?:F,){j}(F)``, which is unique on a matching line (a quoted field ends at the first
    quote that is not doubled, an unquoted one at the next comma). Quoted fields lose their
    quotes and have ``""`` turned into ``"``; an empty unquoted field is NULL. Consequences: a
    quoted field cannot span lines, and a line with too few fields, a stray or unterminated
    quote, or invalid UTF-8 is dropped (it affects only itself). Nothing is sniffed from the data;
    every column is text.
    """
    line = _col(_P + "line")
    more = f",(?:{_CSV_FIELD})"
    full = f"^(?:{_CSV_FIELD}){_repeat(more, len(columns) - 1)}(?:{more})*$"
    items: list[exp.Expression] = []
    for j, name in enumerate(columns):
        pattern = f"^{_repeat('(?:' + _CSV_FIELD + '),', j)}({_CSV_FIELD})"
        f = _func("regexp_extract", line.copy(), exp.Literal.string(pattern),
                  exp.Literal.number(1))
        quoted = exp.Like(this=f.copy(), expression=exp.Literal.string('"%'))
        inner = exp.Substring(this=f.copy(), start=exp.Literal.number(2),
                              length=exp.Sub(this=exp.Length(this=f.copy()),
                                             expression=exp.Literal.number(2)))
        value = exp.Case(ifs=[
            exp.If(this=quoted, true=_func("replace", inner, exp.Literal.string('""'),
                                           exp.Literal.string('"'))),
            exp.If(this=exp.EQ(this=f.copy(), expression=exp.Literal.string("")),
                   true=exp.Null()),
        ], default=f.copy())
        items.append(_alias(value, _ident(name)))
    q = exp.select(*items).from_(csv_raw_lines(loc)).where(
        _func("regexp_full_match", line.copy(), exp.Literal.string(full)))
    return exp.Subquery(this=q, alias=exp.TableAlias(this=_ident(_P + "csv")))


def csv_raw_lines(loc: exp.Expression, *, filename: bool = False) -> exp.Table:
    """The raw line reader of :func:`_csv_lines`: every line after each file's header as one
    text column ``__dpk_line`` (and, with ``filename``, the engine's name of the file it
    came from, column ``filename``)."""
    raw_opts = [
        exp.EQ(this=exp.column("auto_detect"), expression=exp.Boolean(this=False)),
        exp.EQ(this=exp.column("header"), expression=exp.Boolean(this=True)),
        exp.EQ(this=exp.column("columns"), expression=exp.Struct(expressions=[exp.PropertyEQ(
            this=exp.Literal.string(_P + "line"), expression=exp.Literal.string("VARCHAR"))])),
        exp.EQ(this=exp.column("delim"), expression=exp.Literal.string(_RAW_DELIM)),
        exp.EQ(this=exp.column("quote"), expression=exp.Literal.string("")),
        exp.EQ(this=exp.column("escape"), expression=exp.Literal.string("")),
        # an explicit terminator: left to itself the reader ends a line at a bare "\r" and
        # then starts the next line with the "\n" of a following "\r\n", so one unit's
        # "...\r" line could change (rename or drop) the unit on the line after it
        exp.EQ(this=exp.column("new_line"), expression=exp.Literal.string("\\n")),
        exp.EQ(this=exp.column("ignore_errors"), expression=exp.Boolean(this=True)),
        exp.EQ(this=exp.column("strict_mode"), expression=exp.Boolean(this=False)),
    ]
    if filename:
        raw_opts.append(exp.EQ(this=exp.column("filename"), expression=exp.Boolean(this=True)))
    return exp.Table(this=_func("read_csv", loc, *raw_opts))


def refuse_mixed_file_types(location: str,
                            schemas: Mapping[str, Mapping[str, str]]) -> None:
    """Refuse the files of one Parquet ``location`` unless they all have the same top-level
    columns with the same types; ``schemas`` maps each file to its column -> type (read from
    the file's footer, never from its rows; nested types compared whole).

    Rule: every file has the columns of the first file (in sorted order), each with the same
    type, and no other column; the order of the columns does not matter. Engines take a
    glob's schema from one file and cast or convert the other files' columns while they scan:
    a text column holding ``'200'`` casts to a number and one holding ``'x7'`` fails the
    statement, or a file of another type fails as soon as one of its rows is read, after the
    charge and because of one person's row. One type per column is the simple rule (it also
    refuses a widening that could not fail, such as ``INTEGER`` beside ``BIGINT``)."""
    if len(schemas) < 2:
        return
    first, *others = sorted(schemas)
    want = schemas[first]
    for other in others:
        got = schemas[other]
        for name in [*want, *(n for n in got if n not in want)]:
            if want.get(name) != got.get(name):
                raise EngineError(
                    f"the Parquet files of {location!r} disagree on column {name!r}: "
                    f"{want.get(name, 'no such column')} in {first!r}, "
                    f"{got.get(name, 'no such column')} in {other!r}. The engine would convert "
                    "one file's values to the other's type while it reads the rows, and a row "
                    "that does not convert would fail the query after the budget is spent. "
                    "Rewrite the files with one type per column, or read them yourself with "
                    "explicit casts into a table (e.g. DuckDB's read_parquet(..., "
                    "union_by_name=true)). Nothing was spent.")


def source_sql(source: Source, *, registered: frozenset[str] = frozenset(),
               dialect: str = "duckdb", csv_columns: Sequence[str] = ()) -> exp.Expression:
    """The FROM item of ``source``: a table function over a path, or a (quoted) table name."""
    if not isinstance(source.location, str) or not source.location:
        raise PlanError(f"source location must be a non-empty string, got {source.location!r}")
    if "\x00" in source.location:
        raise PlanError("source location must not contain NUL characters")
    loc = exp.Literal.string(source.location)
    if source.kind == "parquet":
        # Invalid UTF-8 in a string column: read with each bad byte as "?" rather than failing
        # the scan (a failure would depend on the rows and come after the charge).
        return exp.Table(this=_func("read_parquet", loc, exp.EQ(
            this=exp.column("utf8_validation"), expression=exp.Literal.string("replace"))))
    if source.kind == "csv":
        if not csv_columns:
            raise PlanError("a CSV source needs its header's column names")
        return _csv_lines(loc, tuple(csv_columns))
    if source.kind == "table":
        if source.location in registered:
            return exp.Table(this=_ident(source.location))
        try:
            table = exp.to_table(source.location, dialect=dialect)
        except Exception as exc:
            raise PlanError(f"not a table name: {source.location!r}") from exc
        parts = [table.args.get(a) for a in ("catalog", "db", "this")]
        if not all(p is None or isinstance(p, exp.Identifier) for p in parts):
            raise PlanError(f"not a plain table name: {source.location!r}")
        return exp.Table(**{a: _ident(p.name) for a, p in zip(("catalog", "db", "this"), parts,
                                                                strict=True) if p is not None})
    raise PlanError(f"unknown source kind {source.kind!r}")


# ---------------------------------------------------------------------------- joins, buckets

# Join keys: equality on these families never needs an implicit cast (both sides have the
# same family) and never compares NaN (float keys are refused: DuckDB has NaN = NaN).
_JOIN_KEY_FAMILIES = ("integer", "decimal", "string", "boolean", "other")


def _utf8(e: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """``e``'s UTF-8 bytes (binary, so compared byte by byte whatever the collation)."""
    if profile.dialect == "spark":
        return _func("encode", e, exp.Literal.string("UTF-8"))
    return _func("encode", e)


def _same_key_type(left: str, right: str) -> bool:
    """Whether an equality of two numeric join keys needs no cast that could fail on a value.

    DECIMALs must match exactly (``DECIMAL(38,0) = DECIMAL(38,10)`` casts the left side to
    ``DECIMAL(38,10)``, which overflows for keys of ``10**28`` and more: an error raised by one
    private value). Signed integers widen without loss; an unsigned or 128-bit integer must
    match exactly (their common type may not hold both ranges).
    """
    a, b = ("".join(t.split()).upper() for t in (left, right))
    if a == b:
        return True
    if type_family(left) == "decimal":
        return False
    signed = {"TINYINT", "SMALLINT", "INTEGER", "INT", "BIGINT", "BYTE", "SHORT", "LONG",
              "INT1", "INT2", "INT4", "INT8"}
    return a in signed and b in signed


def _bucket_type(name: str, values: Sequence[object]) -> str:
    """The engine type of a bucket's values (all literals): text, integer, double or boolean."""
    present = [v for v in values if v is not None]
    if not present:
        return "VARCHAR"
    if all(isinstance(v, str) for v in present):
        return "VARCHAR"
    if all(isinstance(v, bool) for v in present):
        return "BOOLEAN"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        if not all(-(2**63) <= v <= 2**63 - 1 for v in present):  # type: ignore[operator]
            raise PlanError(f"bucket {name!r}: integer values must fit 64 bits")
        return "BIGINT"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        for v in present:
            if not math.isfinite(float(v)):  # type: ignore[arg-type]
                raise PlanError(f"bucket {name!r}: values must be finite, got {v!r}")
        return "DOUBLE"
    raise PlanError(f"bucket {name!r}: values must all be text, all numbers or all booleans, "
                    f"got {list(values)!r}")


def _bucket_literal(value: object, sql_type: str, profile: DialectProfile) -> exp.Expression:
    if value is None:
        return exp.Null()
    if sql_type == "VARCHAR":
        return exp.Literal.string(str(value))
    if sql_type == "BOOLEAN":
        return exp.Boolean(this=bool(value))
    if sql_type == "BIGINT":
        return _cast(exp.Literal.string(str(value)), "BIGINT")
    return _double(float(value), profile)  # type: ignore[arg-type]


@dataclass
class _Extras:
    """The columns public joins and buckets add to the source's schema, and their SQL."""

    plan: Plan
    schema: dict[str, str]  # exposed / bucket name -> type
    origin: dict[str, str]  # exposed name -> internal column of the join subquery
    join_schemas: tuple[Mapping[str, str], ...]
    bucket_types: dict[str, str]
    base_schema: Mapping[str, str]

    @property
    def buckets(self) -> tuple[object, ...]:
        return tuple(self.plan.buckets)

    @classmethod
    def of(cls, plan: Plan, schema: Mapping[str, str],
           join_schemas: Sequence[Mapping[str, str]]) -> _Extras:
        joins = tuple(getattr(plan, "joins", ()))
        buckets = tuple(getattr(plan, "buckets", ()))
        if len(join_schemas) != len(joins):
            raise PlanError(f"the plan has {len(joins)} public joins but {len(join_schemas)} "
                            "public schemas were given")
        extra: dict[str, str] = {}
        origin: dict[str, str] = {}
        for i, (j, js) in enumerate(zip(joins, join_schemas, strict=True)):
            if j.how not in ("inner", "left"):
                raise PlanError(f"join kind must be 'inner' or 'left', got {j.how!r}")
            if not j.left_on or len(j.left_on) != len(j.right_on):
                raise PlanError("a public join needs as many left as right key columns (>= 1)")
            for lk, rk in zip(j.left_on, j.right_on, strict=True):
                lc = _resolve(lk, schema, "join key")
                rc = _resolve(rk, js, "public join key")
                lf, rf = type_family(schema[lc]), type_family(js[rc])
                if (lf != rf or lf not in _JOIN_KEY_FAMILIES or is_nested(schema[lc])
                        or is_nested(js[rc]) or (lf == "other" and schema[lc] != js[rc])
                        or (lf in ("decimal", "integer")
                            and not _same_key_type(schema[lc], js[rc]))):
                    raise PlanError(
                        f"join keys {lc!r} ({schema[lc]}) and {rc!r} ({js[rc]}) must have the "
                        "same scalar, non-float type (an implicit cast could fail on some "
                        "values, and NaN would match NaN)"
                    )
            for n, (pc, name) in enumerate(j.columns):
                col = _resolve(pc, js, "public column")
                if not isinstance(name, str) or not name or name.startswith(_P):
                    raise PlanError(f"bad exposed name for public column {pc!r}: {name!r}")
                if name in schema or name in extra or any(
                        c.casefold() == name.casefold() for c in (*schema, *extra)):
                    raise PlanError(f"public column name {name!r} clashes with another column")
                if is_nested(js[col]):
                    raise PlanError(f"public column {col!r} has the nested type {js[col]}")
                extra[name] = js[col]
                origin[name] = f"{_P}j{i}c{n}"
        bucket_types: dict[str, str] = {}
        for b in buckets:
            if not isinstance(b.name, str) or not b.name or b.name.startswith(_P):
                raise PlanError(f"bad bucket name {b.name!r}")
            if any(c.casefold() == b.name.casefold() for c in (*schema, *extra)):
                raise PlanError(f"bucket name {b.name!r} clashes with another column")
            if not b.cases:
                raise PlanError(f"bucket {b.name!r} needs at least one case")
            bucket_types[b.name] = _bucket_type(b.name, [v for _, v in b.cases] + [b.default])
            extra[b.name] = bucket_types[b.name]
        return cls(plan=plan, schema=extra, origin=origin, join_schemas=tuple(join_schemas),
                   bucket_types=bucket_types, base_schema=schema)

    def attach_joins(self, src: exp.Select, registered: frozenset[str],
                     profile: DialectProfile) -> exp.Select:
        """``src`` joined with each public table reduced to its keys that occur once.

        ``(SELECT k AS jk.., MIN(c) AS jc.. FROM public GROUP BY k HAVING COUNT(*) = 1)``: a
        key repeated in the public table is dropped there, so no source row can match two
        public rows (which would copy its contribution past the bounds).
        """
        for i, (j, js) in enumerate(zip(self.plan.joins, self.join_schemas, strict=True)):
            alias = f"{_P}j{i}"
            rks = [_resolve(rk, js, "public join key") for rk in j.right_on]
            items = [_alias(_col(rk), _ident(f"{alias}k{m}")) for m, rk in enumerate(rks)]
            items += [_alias(exp.Min(this=_col(_resolve(pc, js, "public column"))),
                             _ident(f"{alias}c{n}")) for n, (pc, _) in enumerate(j.columns)]
            sub = exp.select(*items).from_(source_sql(
                j.source, registered=registered, dialect=profile.dialect,
                csv_columns=tuple(js))).group_by(*[_col(rk) for rk in rks]).having(
                exp.EQ(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1)))
            eqs = []
            for m, lk in enumerate(j.left_on):
                lc = _resolve(lk, self.base_schema, "join key")
                left: exp.Expression = _col(lc)
                right: exp.Expression = exp.Column(this=_ident(f"{alias}k{m}"),
                                                   table=_ident(alias))
                if type_family(self.base_schema[lc]) == "string":
                    # compare the UTF-8 bytes: a column's case-insensitive collation (DuckDB
                    # COLLATE NOCASE, Spark UTF8_LCASE) would match one private row to several
                    # public keys that differ only by case, copying its contribution
                    left, right = _utf8(left, profile), _utf8(right, profile)
                eqs.append(exp.EQ(this=left, expression=right))
            on = exp.and_(*eqs)
            src = src.join(exp.Subquery(this=sub, alias=exp.TableAlias(this=_ident(alias))),
                           on=on, join_type="left" if j.how == "left" else "inner")
        return src

    def bucket_sql(self, use: Callable[[str], str], profile: DialectProfile
                   ) -> list[exp.Expression]:
        """``CASE WHEN COALESCE(TRY(p1), FALSE) THEN v1 ... ELSE d END AS name`` per bucket
        (conditions evaluated exactly like filters), cast to the bucket's type."""
        out: list[exp.Expression] = []
        for b in self.plan.buckets:
            t = self.bucket_types[b.name]
            ifs = []
            for pred, value in b.cases:
                def column(name: str, bucket: str = b.name) -> str:
                    if name in self.bucket_types:
                        raise PlanError(f"bucket {bucket!r} cannot read bucket {name!r}")
                    return use(name)

                cond = safe_predicate(pred, column, profile)
                ifs.append(exp.If(this=cond, true=_bucket_literal(value, t, profile)))
            case = exp.Case(ifs=ifs, default=_bucket_literal(b.default, t, profile))
            out.append(_alias(_cast(case, t), _ident(b.name)))
        return out


# ---------------------------------------------------------------------------- the compiler


def compile_plan(
    plan: Plan,
    schema: Mapping[str, str],
    profile: DialectProfile = DUCKDB,
    *,
    registered: frozenset[str] = frozenset(),
    join_schemas: Sequence[Mapping[str, str]] = (),
) -> CompiledQuery:
    """One SQL statement computing ``plan`` on a source with column types ``schema``.

    ``schema`` maps column name -> engine type name (public metadata: a CSV is read as text
    whatever it holds, so no type depends on the data). Every check here depends on the plan
    and the schema only; nothing can fail later because of a value in the data.
    ``join_schemas[i]`` is the schema of ``plan.joins[i].source`` (public tables).
    """
    bound, agg = plan.bound, plan.aggregate
    max_p = check_integer(bound.max_partitions, name="max_partitions", minimum=1)
    max_r = check_integer(bound.max_rows_per_partition, name="max_rows_per_partition",
                          minimum=1, maximum=MAX_ROWS_PER_PARTITION)
    salt = check_integer(bound.salt, name="salt", minimum=-(2**63), maximum=2**64 - 1) % 2**64
    if not agg.measures:
        raise PlanError("an aggregate needs at least one measure")
    names = [m.name for m in agg.measures]
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise PlanError(f"measure names must be distinct non-empty strings, got {names}")
    extra = _Extras.of(plan, schema, join_schemas)
    base_schema = schema
    schema = {**schema, **extra.schema}
    families = {c: type_family(t) for c, t in schema.items()}

    # Columns the statement reads, each once, normalized in the innermost SELECT.
    used: list[str] = []

    def use(name: object, what: str) -> str:
        col = _resolve(name, schema, what)
        if col.startswith(_P):
            raise PlanError(f"column names starting with {_P!r} are reserved, got {col!r}")
        coll = collation(schema[col])
        if coll is not None:
            # Hashes and ranks read the bytes, GROUP BY and joins the collation: one person
            # could take one partition slot per spelling of one group. Decided by the type.
            raise PlanError(
                f"{what} {col!r} has the collation {coll}: dpkit compares text byte by byte; "
                f"give the column the default collation (e.g. collate({col}, 'UTF8_BINARY'))")
        if col not in used:
            used.append(col)
        return col

    unit = use(bound.privacy_unit, "privacy_unit") if bound.privacy_unit is not None else None
    if unit is not None:
        check_unit_type(unit, schema[unit])
    keys = [use(k, "group_by column") for k in agg.group_by]
    if len(set(keys)) != len(keys):
        raise PlanError(f"group_by repeats a column: {agg.group_by}")
    for k in keys:
        if is_nested(schema[k]):
            raise PlanError(
                f"group_by column {k!r} has the nested type {schema[k]}; a group key must be a "
                "scalar (number, text, boolean, date, ...): group by a scalar column instead"
            )
        if not is_key_type(schema[k]):
            raise PlanError(
                f"group_by column {k!r} has the type {schema[k]}, which cannot be a group key "
                "(its values do not reach Python one to one): group by a number, text, "
                "boolean, date, timestamp (microseconds) or day-time interval column instead, "
                "e.g. a cast of this one")
    value_cols: list[str] = []
    for m in agg.measures:
        if m.kind in ("rows", "units"):
            continue
        col = use(m.column, f"column of measure {m.name!r}")
        if col not in value_cols:
            value_cols.append(col)

    predicates: list[exp.Expression] = []
    for f in plan.filters:
        predicates.append(safe_predicate(f.predicate, lambda n: use(n, "predicate column"),
                                         profile))
    # A predicate reads normalized columns too (NaN is NULL there, so `x > 5` is not true
    # for NaN although NaN sorts above every number in DuckDB).

    if extra.buckets:  # the columns the bucket conditions read are normalized in src too
        bucket_exprs = extra.bucket_sql(lambda n: use(n, "bucket condition column"), profile)
    base_used = [c for c in used if c not in extra.bucket_types]
    src = exp.select(*[_alias(_normalized(extra.origin.get(c, c), families[c], profile,
                                          schema[c]),
                              _ident(c))
                       for c in base_used]).from_(source_sql(plan.source, registered=registered,
                                                             dialect=profile.dialect,
                                                             csv_columns=tuple(base_schema)))
    if not base_used:  # only rows/units measures, no unit and no keys
        src = exp.select(_alias(exp.Literal.number(1), _ident(_P + "one"))).from_(
            source_sql(plan.source, registered=registered, dialect=profile.dialect,
                       csv_columns=tuple(base_schema)))
    if plan.joins:
        src = extra.attach_joins(src, registered, profile)
    if extra.buckets:
        src = exp.select(exp.Star(), *bucket_exprs).from_(
            exp.Subquery(this=src, alias=exp.TableAlias(this=_ident(_P + "b"))))

    key_out = [f"{_P}k{i}" for i in range(len(keys))]
    unit_e = _col(unit) if unit is not None else None
    key_e = [_col(k) for k in keys]
    value_e = [_col(c) for c in value_cols]

    row_items: list[exp.Expression] = [_alias(e, _ident(a)) for e, a in
                                       zip(key_e, key_out, strict=True)]
    if unit is not None and unit_e is not None:
        row_items.append(_alias(unit_e.copy(), _ident(_P + "u")))
        hashed = [unit, *keys, *value_cols]
        if profile.hash == "md5":
            # each column's canonical token once, in projections over src (see _token_steps)
            tok = [f"{_P}tok{i}" for i in range(len(hashed))]
            src = _staged(src, _token_steps(
                [(c, families[c], t) for c, t in zip(hashed, tok, strict=True)], profile,
                types=schema), _P + "t")
            parts: list[exp.Expression] = [_col(t) for t in tok]
        else:
            parts = [unit_e, *key_e, *value_e]
        row_items.append(_alias(_hash(salt, parts[:1 + len(keys)], profile), _ident(_P + "hk")))
        row_items.append(_alias(_hash(salt, parts, profile), _ident(_P + "hr")))
    # value columns are needed for the measures; readable under their own names
    row_items += [_col(c) for c in value_cols]
    if not row_items:  # no unit, no keys, no value column: only counts of rows
        row_items.append(_alias(exp.Literal.number(1), _ident(_P + "one")))
    rows_q = exp.select(*row_items).from_(_P + "src")
    if predicates:
        rows_q = rows_q.where(exp.and_(*predicates))

    # ------------------------------------------------------------ bounding
    if unit_e is not None:
        part = [_col(_P + "u")]
        group_order = [_col(_P + "hk"), *[_col(k) for k in key_out]]
        row_order = [*group_order, _col(_P + "hr"), *[_col(c) for c in value_cols]]

        def window(fn: exp.Expression, order: Sequence[exp.Expression]) -> exp.Window:
            return exp.Window(
                this=fn, partition_by=[p.copy() for p in part],
                order=exp.Order(expressions=[exp.Ordered(this=o.copy(), nulls_first=False)
                                             for o in order]))

        ranked_q = exp.select(
            exp.Star(),
            _alias(window(exp.RowNumber(), row_order), _ident(_P + "rn")),
            _alias(window(exp.Anonymous(this="rank"), group_order), _ident(_P + "gr")),
            _alias(window(exp.Anonymous(this="dense_rank"), group_order), _ident(_P + "g")),
        ).from_(_P + "rows")
        kept_cond: exp.Expression = exp.and_(  # type: ignore[assignment]
            exp.LTE(this=_col(_P + "g"), expression=_int(max_p)),
            exp.LT(this=exp.Sub(this=_col(_P + "rn"), expression=_col(_P + "gr")),
                   expression=_int(max_r)),
        )
        final_from = _P + "ranked"
    else:
        # Each row is its own unit: with max_partitions >= 1 and max_rows_per_partition >= 1
        # (checked above) every row is kept.
        ranked_q = None
        kept_cond = exp.Boolean(this=True)
        final_from = _P + "rows"

    # ------------------------------------------------------------ measures
    # The kept rows, then one CTE per step of the per-row measure pipelines (each step reads
    # the previous step's columns by name, so no expression is ever duplicated), then one
    # GROUP BY over the last step.
    first = exp.EQ(this=_col(_P + "rn"), expression=_col(_P + "gr")) if unit_e is not None \
        else exp.Boolean(this=True)
    kept_items: list[exp.Expression] = [_col(k) for k in key_out]
    kept_items.append(_alias(first, _ident(_P + "first")))
    xcol: dict[str, str] = {}
    step0: list[tuple[str, exp.Expression]] = []
    for j, c in enumerate(value_cols):
        kept_items.append(_col(c))
        fam = families[c]
        if fam in ("float", "integer", "decimal", "boolean"):
            kept_items.append(_alias(_cast(_col(c), profile.float_type), _ident(f"{_P}x{j}")))
        elif fam == "string":
            kept_items.append(_alias(
                exp.TryCast(this=_col(c), to=exp.DataType.build(profile.float_type,
                                                                 dialect="duckdb")),
                _ident(f"{_P}t{j}")))
            step0.append((f"{_P}x{j}", _case(_is_nan(_col(f"{_P}t{j}"), profile),
                                             exp.Null(), _col(f"{_P}t{j}"))))
        elif temporal_codec(schema[c]) is not None:
            kept_items.append(_alias(temporal_number(_col(c), temporal_codec(schema[c]) or "",
                                                     profile), _ident(f"{_P}x{j}")))
        else:
            step0.append((f"{_P}x{j}", exp.Null()))  # never read: refused below by kind
        xcol[c] = f"{_P}x{j}"
    kept_q = exp.select(*kept_items).from_(final_from)
    if ranked_q is not None:
        kept_q = kept_q.where(kept_cond)

    steps: list[list[tuple[str, exp.Expression]]] = [step0]

    def at(level: int, alias: str, e: exp.Expression) -> str:
        while len(steps) <= level:
            steps.append([])
        steps[level].append((alias, e))
        return alias

    outputs: list[OutputMeasure] = []
    select_items: list[exp.Expression] = [_col(k) for k in key_out]
    cell_sets: list[str] = []  # profiles without a histogram aggregate: one grouping set each

    def cells(idx: str) -> exp.Expression:
        """Counts per cell index: ``histogram(idx)`` (a map), or with ``histogram=None`` the
        flag ``GROUPING(idx)`` of a grouping set ``(keys, idx)`` whose rows carry ``idx`` and
        its ``COUNT(*)`` (see :func:`_grouping_sets`)."""
        if profile.histogram is not None:
            return _func(profile.histogram, _col(idx))
        cell_sets.append(idx)
        return _func("grouping", _col(idx))
    for i, m in enumerate(agg.measures):
        out = f"{_P}m{i}"
        kind = m.kind
        size = 0
        if kind == "rows":
            e: exp.Expression = exp.Count(this=exp.Star())
        elif kind == "units":
            e = exp.Filter(this=exp.Count(this=exp.Star()),
                           expression=exp.Where(this=_col(_P + "first")))
        else:
            col = _resolve(m.column, schema, f"column of measure {m.name!r}")
            fam = families[col]
            if kind == "category_counts":
                idx = at(1, f"{_P}i{i}", _category_index(m, col, fam, schema[col]))
                e = cells(idx)
                size = len(m.categories)
            else:
                temporal = temporal_codec(schema[col]) is not None
                if fam == "other" and not temporal:
                    raise PlanError(f"column {col!r} (type {schema[col]}) has no numeric "
                                    f"reading; measure {m.name!r} cannot use it")
                if kind == "bin_counts" and m.time_kind != (temporal_codec(schema[col]) or ""):
                    raise PlanError(
                        f"{m.name}: column {col!r} has the type {schema[col]} but the measure's "
                        f"edges are {m.time_kind or 'numbers'}; give dates as the bounds or "
                        "edges of a date or timestamp column, numbers for any other")
                if temporal and kind in ("sum", "sum_sq"):
                    raise PlanError(
                        f"{m.name}: column {col!r} holds dates or timestamps ({schema[col]}), "
                        "which have no sum, mean or variance; ask for quantiles or a histogram "
                        "of it instead")
                x = _col(xcol[col])
                if kind == "values":
                    e = exp.Count(this=x)
                elif kind == "sum":
                    lo, hi = _finite_bounds(m.lower, m.upper, m.name)
                    c1 = at(1, f"{_P}c{i}", _clamped(x, lo, hi, profile))
                    f1 = at(2, f"{_P}f{i}", _fixed_or_null(_col(c1), m, profile))
                    e = _sum_int(_col(f1), profile)
                elif kind == "sum_sq":
                    clo, chi = _finite_bounds(m.clamp_lower, m.clamp_upper, m.name)
                    center = m.center
                    if isinstance(center, bool) or not isinstance(center, (int, float)) \
                            or not math.isfinite(center):
                        raise PlanError(f"{m.name}: center must be a finite number, "
                                        f"got {center!r}")
                    lo, hi = _finite_bounds(m.lower, m.upper, m.name)
                    c1 = at(1, f"{_P}c{i}", _clamped(x, clo, chi, profile))
                    d1 = at(2, f"{_P}d{i}", exp.Sub(this=_col(c1),
                                                    expression=_double(float(center), profile)))
                    q1 = at(3, f"{_P}q{i}", _clamped(
                        exp.Mul(this=_col(d1), expression=_col(d1)), lo, hi, profile))
                    f1 = at(4, f"{_P}f{i}", _fixed_or_null(_col(q1), m, profile))
                    e = _sum_int(_col(f1), profile)
                elif kind == "bin_counts":
                    edges = _check_edges(m)
                    c1 = at(1, f"{_P}c{i}", _clamped(x, edges[0], edges[-1], profile))
                    width = _uniform_step(edges)
                    if width is None:
                        idx = at(2, f"{_P}i{i}", _case(
                            _is_null(_col(c1)), exp.Null(),
                            _bin_index(_col(c1), edges, 0, len(edges) - 2, profile)))
                    else:
                        g1 = at(2, f"{_P}g{i}", _case(
                            _is_null(_col(c1)), exp.Null(),
                            _bin_guess(_col(c1), edges, width, profile)))
                        idx = at(3, f"{_P}i{i}", _bin_correct(_col(c1), _col(g1), edges,
                                                              width, profile))
                    e = cells(idx)
                    size = len(edges) - 1
                else:
                    raise PlanError(f"unknown measure kind {kind!r}")
        outputs.append(OutputMeasure(m.name, kind, out, size))
        select_items.append(_alias(e, _ident(out)))

    ctes: list[tuple[str, exp.Expression]] = [(_P + "src", src), (_P + "rows", rows_q)]
    if ranked_q is not None:
        ctes.append((_P + "ranked", ranked_q))
    ctes.append((_P + "s0", kept_q))
    prev = _P + "s0"
    for n, step in enumerate(steps, start=1):
        if not step:
            continue
        name = f"{_P}s{n}"
        ctes.append((name, exp.select(exp.Star(), *[_alias(e, _ident(a)) for a, e in step])
                     .from_(prev)))
        prev = name

    if cell_sets:
        final = _grouping_sets(select_items, prev, key_out, cell_sets)
    else:
        final = exp.select(*select_items).from_(prev)
        if key_out:
            final = final.group_by(*[_col(k) for k in key_out])
    codecs: tuple[str, ...] = ()
    if profile.exact_keys and key_out:
        codecs = tuple(key_codec(schema[k]) for k in keys)
        if any(c != "plain" for c in codecs):
            out_cols = [*key_out, *[o.column for o in outputs], *cell_sets,
                        *([_P + "cell"] if cell_sets else [])]
            ctes.append((_P + "out", final))
            sent = {k: _sent_key(_col(k), c, profile)
                    for k, c in zip(key_out, codecs, strict=True)}
            final = exp.select(*[_alias(sent[c], _ident(c)) if c in sent else _col(c)
                                 for c in out_cols]).from_(_P + "out")
    for name, q in ctes:
        final = final.with_(name, as_=q)
    sql = final.sql(dialect=profile.dialect, comments=False)
    return CompiledQuery(sql=sql, key_columns=tuple(key_out), measures=tuple(outputs),
                         global_group=not key_out, cell_columns=tuple(cell_sets),
                         cell_count=_P + "cell" if cell_sets else None,
                         has_filters=bool(predicates) or bool(extra.buckets),
                         key_codecs=codecs)


def _sent_key(k: exp.Expression, codec: str, profile: DialectProfile) -> exp.Expression:
    """A group key in the form :func:`key_codec` names (Spark SQL)."""
    if codec == "instant":
        return _func(profile.instant_micros, k)
    if codec == "local":
        return _cast(k, profile.text_type)
    if codec == "date":
        return _func("unix_date", k)
    if codec == "text":
        return _cast(k, "BINARY")
    return k


def _grouping_sets(select_items: list[exp.Expression], source: str, key_out: list[str],
                   cell_sets: list[str]) -> exp.Select:
    """``SELECT ..., idx..., COUNT(*) AS cell ... GROUP BY GROUPING SETS ((k), (k, idx_1), ...)``.

    The set ``(k)`` gives the scalar measures of each group (every ``GROUPING(idx_j)`` is 1
    there); the set ``(k, idx_j)`` gives, per group and cell ``idx_j``, the count of its rows
    (``GROUPING(idx_j) = 0``; rows whose ``idx_j`` is NULL, the skipped ones, form a cell of
    their own that the decoder ignores). Still one statement, and the output stays small: at
    most ``groups * (1 + sum of cells)`` rows.
    """
    items = [*select_items, *[_col(c) for c in cell_sets],
             _alias(exp.Count(this=exp.Star()), _ident(_P + "cell"))]
    keys = [_col(k) for k in key_out]

    def gset(cols: Sequence[exp.Expression]) -> exp.Expression:
        return exp.Tuple(expressions=[c.copy() for c in cols])

    sets = [gset(keys), *[gset([*keys, _col(c)]) for c in cell_sets]]
    q = exp.select(*items).from_(source)
    q.set("group", exp.Group(expressions=[exp.GroupingSets(expressions=sets)]))
    return q


def safe_predicate(text: str, column: Callable[[str], str],
                   profile: DialectProfile) -> exp.Expression:
    """A row condition (a ``where`` filter or a bucket case) as an expression that is TRUE,
    or FALSE for every row where it is not true, and never raises.

    ``column`` maps each column the condition reads to the normalized column of the statement.
    Every condition runs under the error-to-NULL wrapper, not only those with arithmetic: the
    engine inserts implicit casts of its own (``s = 1`` on a text column casts every ``s`` to
    an integer), and such a cast fails on some values only. Engines without a generic wrapper
    (Spark) get :func:`_checked_predicate` and run the statement with ANSI mode off
    (``CompiledQuery.has_filters``). ``COALESCE(cond, FALSE)`` makes NULL a failed test."""
    vp = parse_predicate(text, dialect=profile.predicate_dialect)
    tree = vp.tree.copy()
    for node in tree.find_all(exp.Column):
        node.set("this", _ident(column(node.name)))
    if profile.dialect != "duckdb":
        tree = _without_infinity_tests(tree, profile)
    if profile.try_wrapper is not None:
        tree = _func(profile.try_wrapper, tree)
    else:
        tree = _checked_predicate(tree)
    return exp.Coalesce(this=tree, expressions=[exp.Boolean(this=False)])


_CHECKED: dict[type[exp.Expression], str] = {exp.Add: "try_add", exp.Sub: "try_subtract",
                                             exp.Mul: "try_multiply"}


def _without_infinity_tests(tree: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """DuckDB's ``isinf(x)`` and ``isfinite(x)`` as comparisons, for engines without them
    (Spark): ``isinf(x)`` is ``x = inf OR x = -inf`` and ``isfinite(x)`` is
    ``x > -inf AND x < inf``. Both are NULL for NULL and false for NaN (NaN is neither equal
    to nor below infinity in Spark), as in DuckDB."""
    def inf(sign: str) -> exp.Expression:
        return _cast(exp.Literal.string(sign + "Infinity"), profile.float_type)

    def rewrite(node: exp.Expression) -> exp.Expression:
        name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
        if isinstance(node, exp.IsInf) or (name == "isinf" and len(node.expressions) == 1):
            x = node.this if isinstance(node, exp.IsInf) else node.expressions[0]
            return exp.Paren(this=exp.or_(exp.EQ(this=x.copy(), expression=inf("")),
                                          exp.EQ(this=x.copy(), expression=inf("-"))))
        if name == "isfinite" and len(node.expressions) == 1:
            x = node.expressions[0]
            return exp.Paren(this=exp.and_(exp.GT(this=x.copy(), expression=inf("-")),
                                           exp.LT(this=x.copy(), expression=inf(""))))
        return node

    return tree.transform(rewrite)


def _checked_predicate(tree: exp.Expression) -> exp.Expression:
    """A predicate with DuckDB's ``TRY`` semantics for engines without a generic ``TRY``.

    Every ``+``/``-``/``*`` (and unary minus) becomes ``try_add``/``try_subtract``/
    ``try_multiply``, which give NULL instead of raising or wrapping around on overflow; the
    whole predicate is NULL (the row fails it) when any of them overflowed, i.e. returned NULL
    from two non-NULL arguments, as ``TRY(p)`` is NULL when any part of ``p`` raises. (Implicit
    casts that fail are NULL in the engine's non-ANSI mode, which the Spark engine sets for
    statements with predicates.)
    """
    flags: list[exp.Expression] = []

    def rewrite(node: exp.Expression) -> exp.Expression:
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expression):
                node.set(key, rewrite(value))
            elif isinstance(value, list):
                node.set(key, [rewrite(v) if isinstance(v, exp.Expression) else v
                               for v in value])
        if isinstance(node, exp.Neg) and not isinstance(node.this, exp.Literal):
            a: exp.Expression = exp.Literal.number(0)
            b: exp.Expression = node.this
            fn = "try_subtract"
        elif type(node) in _CHECKED:
            a, b = node.this, node.expression
            fn = _CHECKED[type(node)]
        else:
            return node
        out = _func(fn, a, b)
        flags.append(cast(exp.Expression, exp.and_(
            _is_null(out.copy()), exp.Not(this=_is_null(a.copy())),
            exp.Not(this=_is_null(b.copy())))))
        return out

    checked = rewrite(tree)
    if not flags:
        return checked
    return _case(cast(exp.Expression, exp.or_(*flags)), exp.Null(), checked)


def _fixed_or_null(c: exp.Expression, m: Measure, profile: DialectProfile) -> exp.Expression:
    return _case(_is_null(c), exp.Null(), _fixed_point(c.copy(), m, profile))


def _sum_int(f: exp.Expression, profile: DialectProfile) -> exp.Expression:
    return exp.Coalesce(this=exp.Sum(this=_cast(f, profile.sum_type)),
                        expressions=[_cast(exp.Literal.number(0), profile.sum_type)])


def _check_edges(m: Measure) -> tuple[float, ...]:
    edges = tuple(m.edges)
    if len(edges) < 2:
        raise PlanError(f"{m.name}: bin_counts needs at least two edges, got {edges!r}")
    out = _finite_bounds(edges[0], edges[-1], m.name)  # type checks of the ends
    del out
    vals: list[float] = []
    for e in edges:
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e):
            raise PlanError(f"{m.name}: edges must be finite numbers, got {e!r}")
        vals.append(float(e) + 0.0)
    if any(not a < b for a, b in itertools.pairwise(vals)):
        raise PlanError(f"{m.name}: edges must be strictly increasing, got {edges!r}")
    return tuple(vals)


def _category_index(m: Measure, col: str, fam: Family, sql_type: str) -> exp.Expression:
    """Index of the row's category in ``m.categories`` (NULL when it is none of them)."""
    if not m.categories:
        raise PlanError(f"{m.name}: category_counts needs at least one category")
    c = _col(col)  # already normalized (NaN -> NULL) in the innermost SELECT
    ifs: list[exp.If] = []
    null_index: int | None = None
    for i, cat in enumerate(m.categories):
        lit = _category_literal(cat, fam, m.name, sql_type)
        if lit is None:
            if null_index is None:
                null_index = i
            continue
        if isinstance(lit, exp.Null):
            continue
        ifs.append(exp.If(this=exp.EQ(this=c.copy(), expression=lit), true=_int(i)))
    if null_index is not None:
        ifs.insert(0, exp.If(this=_is_null(c.copy()), true=_int(null_index)))
    if not ifs:
        return exp.Null()
    return exp.Case(ifs=ifs, default=exp.Null())
