"""The dialect profiles: what differs between engines, for the constructs the compiler emits.

A profile names the engine's spelling of each function and type that is not the same
everywhere (the hash, the exact integer sum type, the NaN test, the error-to-NULL wrapper, the
text type, the histogram aggregate); the statement stages read it and never test an engine by
name except through ``profile.dialect``. The two md5 profiles keep exactly the rows of their
native twins and hash a canonical text instead (see :mod:`.hashing`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

__all__ = ["DUCKDB", "DUCKDB_MD5", "SPARK", "SPARK_MD5", "DialectProfile"]


@dataclass(frozen=True)
class DialectProfile:
    """What differs between engines, for the constructs the compiler emits.

    ``hash``: ``"native"`` uses the engine's fast 64-bit hash of its arguments with the salt as
    first argument; ``"md5"`` hashes a canonical string (see
    :func:`.hashing.canonical_token`) with MD5, which another engine (or Python's
    :mod:`hashlib`) reproduces bit for bit.
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
    # dpkit.analytics._column_types.key_codec): engines whose client library converts
    # values lossily (Spark turns instants into local wall-clock times and invalid UTF-8
    # into U+FFFD) set this
    exact_keys: bool = False


DUCKDB = DialectProfile()
DUCKDB_MD5 = dataclasses.replace(DUCKDB, hash="md5")


# Spark SQL (classic and Connect). ``xxhash64`` is Spark's 64-bit hash (its ``hash`` is a 32-bit
# Murmur3: never emitted, the name comes from this profile only). Sums are DECIMAL(38, 0): a
# kept row contributes an integer of magnitude at most 2^62 (``measures.MAX_FIXED``) and Spark
# counts rows in a signed 64-bit long, so any sum, and any partial sum of a subset of rows, has
# magnitude at most (2^63 - 1) 2^62 < 2^125 < 10^37.6 < 10^38 - 1: no overflow, ANSI or not.
# There is no error-to-NULL wrapper (Spark has no generic ``try``): the Spark engine runs
# statements with predicates with ANSI mode off, so a failing implicit cast is NULL there.
# There is no ``histogram`` aggregate either: bin and category counts are GROUPING SETS
# (one set per histogram measure), decoded by the engine.
SPARK = DialectProfile(
    dialect="spark",
    native_hash="xxhash64",
    native_mix=None,
    try_wrapper=None,
    instant_micros="unix_micros",
    exact_keys=True,
    fixed_type="BIGINT",
    sum_type="DECIMAL(38, 0)",
    text_type="STRING",
    histogram=None,
    salt_type="BIGINT",
    signed_salt=True,
)

SPARK_MD5 = dataclasses.replace(SPARK, hash="md5")
