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

Shape of the statement (``u`` the unit, ``k`` the key columns, ``v`` the value columns), one
stage per CTE, one module per stage::

    WITH src AS (SELECT norm(col) AS col, ... FROM source),  -- source, values, extras:
                                                             -- NaN -> NULL, -0.0 -> 0.0,
                                                             -- text COLLATE C (byte-wise)
         rows AS (SELECT u, k..., v..., hk, hr FROM src WHERE predicates),  -- bounding,
                                                                            -- hashing
         ranked AS (SELECT *, ROW_NUMBER() OVER w AS rn,            -- w: PARTITION BY u
                              RANK() OVER (PARTITION BY u ORDER BY hk, k...) AS gr,
                              DENSE_RANK() OVER (PARTITION BY u ORDER BY hk, k...) AS g
                       FROM rows)                                  -- w: ORDER BY hk, k, hr, v
    SELECT k..., measures FROM ranked                              -- measures, statement
    WHERE g <= max_partitions AND rn - gr < max_rows_per_partition GROUP BY k...

with ``hk = H(salt, u, k)`` and ``hr = H(salt, u, k, v)`` (:mod:`.bounding` says why one sort
of each unit's rows does both limits). ``units`` counts the first kept row of each (unit,
group) pair, which counts a NULL unit as one unit without ``COUNT(DISTINCT)``. The measures'
value pipeline, which never divides, never casts an unclamped value and never raises, is
described in :mod:`.measures`.

Modules: :mod:`.profiles` (dialects), :mod:`.nodes` (node builders), :mod:`.columns`,
:mod:`.source`, :mod:`.values` (special values), :mod:`.extras` (joins, buckets),
:mod:`.predicates`, :mod:`.hashing` (salted hashes, md5 tokens), :mod:`.codecs` (dates and
timestamps), :mod:`.bounding`, :mod:`.measures`, :mod:`.compiled` (what the engine receives),
:mod:`.statement` (:func:`compile_plan`). What a column's type allows is decided in
:mod:`dpkit.analytics._column_types`, shared with the query builder.
"""

from __future__ import annotations

from dpkit.analytics.engines._compiler.compiled import CompiledQuery, OutputMeasure
from dpkit.analytics.engines._compiler.hashing import EPOCH_UTC, canonical_token, float_text
from dpkit.analytics.engines._compiler.profiles import (
    DUCKDB,
    DUCKDB_MD5,
    SPARK,
    SPARK_MD5,
    DialectProfile,
)
from dpkit.analytics.engines._compiler.source import refuse_mixed_file_types, source_sql
from dpkit.analytics.engines._compiler.statement import compile_plan
from dpkit.errors import PlanError

__all__ = [
    "DUCKDB",
    "DUCKDB_MD5",
    "EPOCH_UTC",
    "SPARK",
    "SPARK_MD5",
    "CompiledQuery",
    "DialectProfile",
    "OutputMeasure",
    "PlanError",
    "canonical_token",
    "compile_plan",
    "float_text",
    "refuse_mixed_file_types",
    "source_sql",
]
