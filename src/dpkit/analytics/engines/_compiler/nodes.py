"""The small node builders every statement stage uses (sqlglot AST, DuckDB spelling).

Identifiers are always quoted (:func:`ident`), so an analyst's column name is never read as
SQL; every internal name starts with :data:`P`, which no analyst column may use.
"""

from __future__ import annotations

import functools
import math
from typing import cast

from sqlglot import exp

from dpkit.analytics.engines._compiler.profiles import DialectProfile
from dpkit.errors import PlanError

__all__ = [
    "P",
    "Step",
    "aliased",
    "case_when",
    "cast_to",
    "clamp",
    "colref",
    "double",
    "func",
    "ident",
    "int_lit",
    "is_nan",
    "is_null",
]

P = "__dpk_"  # prefix of every internal name; analyst columns are always quoted identifiers

#: One projection over the previous ones: ``(alias, expression)`` pairs computed side by side.
Step = list[tuple[str, exp.Expression]]


def ident(name: str) -> exp.Identifier:
    """A quoted identifier."""
    return exp.to_identifier(name, quoted=True)


def colref(name: str) -> exp.Column:
    """A reference to the column ``name`` (quoted)."""
    return exp.Column(this=ident(name))


def int_lit(value: int) -> exp.Expression:
    """An integer constant (a negative one as the negation of its magnitude)."""
    lit = exp.Literal.number(abs(value))
    return exp.Neg(this=lit) if value < 0 else lit


def cast_to(e: exp.Expression, to: str) -> exp.Cast:
    """``CAST(e AS to)``, the type spelled as DuckDB does."""
    return exp.Cast(this=e, to=_data_type(to).copy())


@functools.lru_cache(maxsize=64)
def _data_type(to: str) -> exp.DataType:
    """The parsed type ``to`` (parsing is most of a cast's cost; callers copy it)."""
    return exp.DataType.build(to, dialect="duckdb")


def double(value: float, profile: DialectProfile) -> exp.Expression:
    """A double constant, exactly: ``CAST('<repr>' AS DOUBLE)`` (repr round-trips)."""
    if not math.isfinite(value):
        raise PlanError(f"internal constant must be finite, got {value!r}")
    return cast_to(exp.Literal.string(repr(float(value))), profile.float_type)


def case_when(cond: exp.Expression, then: exp.Expression, default: exp.Expression) -> exp.Case:
    """``CASE WHEN cond THEN then ELSE default END``."""
    return exp.Case(ifs=[exp.If(this=cond, true=then)], default=default)


def is_null(e: exp.Expression) -> exp.Is:
    """``e IS NULL``."""
    return exp.Is(this=e, expression=exp.Null())


def func(name: str, *args: exp.Expression) -> exp.Expression:
    """A call of the engine function ``name``, passed through as written."""
    return exp.Anonymous(this=name, expressions=list(args))


def is_nan(x: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """The NaN test of ``x``. On DuckDB the argument goes through the error-to-NULL wrapper
    (``isnan(try(x))``, the same value): DuckDB 2.0 folds a bare ``isnan`` of a Parquet column
    to false when the file's statistics (which leave NaN out of min and max) show no NULL, and
    a NaN would then pass the normalization as a number."""
    arg = func(profile.try_wrapper, x) if profile.try_wrapper else x
    return func(profile.nan_test, arg)


def aliased(e: exp.Expression, name: exp.Identifier) -> exp.Expression:
    """``e AS name``."""
    return cast(exp.Expression, exp.alias_(e, name))


def clamp(e: exp.Expression, lo: exp.Expression, hi: exp.Expression) -> exp.Expression:
    """``LEAST(GREATEST(e, lo), hi)``."""
    # Plain function calls: sqlglot's Least/Greatest nodes would be rewritten with NULL guards
    # for DuckDB; every argument here is already known to be non-NULL.
    return func("least", func("greatest", e, lo), hi)
