"""The special-value rules of the statement: how each column the statement reads is normalized
in its innermost ``SELECT``, before filters, keys, hashes and measures see it.

NaN is NULL and -0.0 is 0.0 (floats); a date, timestamp or time that Python cannot hold is
NULL, and so are DuckDB's infinite dates and timestamps; text compares byte by byte. Decided by
the column's type, the same on every engine (the page on special values states the policy).
"""

from __future__ import annotations

from sqlglot import exp

from dpkit.analytics._column_types import Family, is_instant
from dpkit.analytics.engines._compiler.nodes import case_when, cast_to, colref, func, is_nan
from dpkit.analytics.engines._compiler.profiles import DialectProfile

__all__ = ["normalized"]

#: The first and last instants read as such (UTC): one day inside Python's datetime range,
#: so the value converts in every session time zone (offsets stay below a day).
_FIRST_INSTANT = "0001-01-02 00:00:00+00:00"


_LAST_INSTANT = "9999-12-30 23:59:59.999999+00:00"


def _outside_python_range(c: exp.Expression, sql_type: str, dialect: str) -> exp.Expression | None:
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
        return exp.Or(
            this=exp.LT(this=c.copy(), expression=cast_to(exp.Literal.string(lo), typ)),
            expression=exp.GT(this=c.copy(), expression=cast_to(exp.Literal.string(hi), typ)),
        )

    if t == "DATE":
        return outside("0001-01-01", "9999-12-31", "DATE")
    if is_instant(t):
        return outside(_FIRST_INSTANT, _LAST_INSTANT, "TIMESTAMPTZ")
    if t == "TIMESTAMP_NS" and dialect == "duckdb":
        # DuckDB cannot widen TIMESTAMP '0001-01-01' to nanoseconds (it raises for every row):
        # the nanosecond range lies inside the Python range, so no value is outside it.
        return None
    if t == "TIMESTAMP" or t.startswith(("TIMESTAMP_", "TIMESTAMP(")):
        return outside("0001-01-01 00:00:00", "9999-12-31 23:59:59.999999", "TIMESTAMP")
    if t == "TIME" and dialect == "duckdb":  # Spark's TIME stops at 23:59:59.999999
        return exp.EQ(this=c.copy(), expression=cast_to(exp.Literal.string("24:00:00"), "TIME"))
    return None


def normalized(
    name: str, family: Family, profile: DialectProfile, sql_type: str = ""
) -> exp.Expression:
    """A column with NaN turned into NULL and -0.0 into 0.0 (floats), dates, timestamps and
    times that Python cannot hold into NULL (see :func:`_outside_python_range`), and on DuckDB
    the infinite dates and timestamps (``infinity``, ``-infinity``) into NULL: DuckDB's client
    returns them as ``date.max``/``datetime.max`` (and the minimums), equal to real values, so
    as keys they would merge two groups in the driver; NULL is what a missing value is
    everywhere else. On DuckDB, text gets the byte-wise collation ``C`` (a ``NOCASE`` column
    or ``default_collation`` would make ``'bob'`` and ``'BOB'`` one unit or key in SQL but two
    texts in the md5 hash; Spark shows collations in the schema and they are refused there).
    Other types unchanged."""
    c = colref(name)
    t = sql_type.upper().strip()
    outside = _outside_python_range(c, t, profile.dialect)
    if outside is not None:
        if profile.dialect == "duckdb" and t != "TIME":
            outside = exp.Or(this=func("isinf", c.copy()), expression=outside)
        return case_when(outside, exp.Null(), c.copy())
    if profile.dialect == "duckdb" and family == "string":
        # byte-wise comparison whatever the column's collation or the connection's
        # default_collation (neither shows in DuckDB's schema): grouping, the unit's window and
        # both hashes then see the same classes. The cast is a no-op for text and types a
        # column of DuckDB's NULL type (an all-NULL Parquet column, read as text) as text,
        # which COLLATE needs.
        return exp.Collate(this=cast_to(c, "VARCHAR"), expression=exp.Var(this="C"))
    if family != "float":
        return c
    zero = exp.Literal.number(0)
    return exp.Case(
        ifs=[
            exp.If(this=is_nan(c, profile), true=exp.Null()),
            exp.If(
                this=exp.EQ(this=c.copy(), expression=zero), true=cast_to(zero.copy(), "DOUBLE")
            ),
        ],
        default=c.copy(),
    )
