"""Dates and timestamps in SQL, the same on every engine: as numbers (what quantiles and
histograms read), as the md5 profile's text, and as the group keys a profile with
``exact_keys`` sends (see :func:`dpkit.analytics._column_types.key_codec` for the codecs).

Only small integers and exact operations, so nothing overflows or rounds differently from one
engine to the other, for every value both engines can hold.
"""

from __future__ import annotations

from sqlglot import exp

from dpkit.analytics.engines._compiler.nodes import cast_to, double, func, int_lit
from dpkit.analytics.engines._compiler.profiles import DialectProfile

__all__ = [
    "DAY_MICROS",
    "date_time_text",
    "epoch_days",
    "micros_of_day",
    "sent_key",
    "temporal_number",
]


def epoch_days(d: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """Days from 1970-01-01 to the date ``d`` (an integer, negative before), on either engine."""
    if profile.dialect == "spark":
        return func("unix_date", d)
    return func(
        "date_diff", exp.Literal.string("day"), cast_to(exp.Literal.string("1970-01-01"), "DATE"), d
    )


def micros_of_day(col: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """Microseconds since midnight of a wall-clock timestamp (an integer below 86,400 * 10^6),
    from its hour, minute and sub-minute microseconds: the same on DuckDB and Spark."""
    sub_minute: exp.Expression
    if profile.dialect == "spark":
        sub_minute = cast_to(
            exp.Mul(
                this=func("date_part", exp.Literal.string("SECOND"), col.copy()),
                expression=int_lit(10**6),
            ),
            profile.fixed_type,
        )
    else:
        sub_minute = func("microsecond", col.copy())
    return exp.Add(
        this=exp.Add(
            this=exp.Mul(
                this=cast_to(func("hour", col.copy()), profile.fixed_type),
                expression=int_lit(3_600_000_000),
            ),
            expression=exp.Mul(
                this=cast_to(func("minute", col.copy()), profile.fixed_type),
                expression=int_lit(60_000_000),
            ),
        ),
        expression=sub_minute,
    )


def date_time_text(col: exp.Expression, codec: str, profile: DialectProfile) -> exp.Expression:
    """The md5 text of a date (``codec == "date"``: days since 1970-01-01) or a wall-clock
    timestamp (``"local"``: ``days:microseconds of the day``), identical on DuckDB and Spark for
    every value both can hold, years outside 1..9999 included; small integers only, so nothing
    overflows (Spark's ``timestampdiff`` from the epoch overflows near its range's ends).
    DuckDB's infinities are NULL before this (see :func:`.values.normalized`); its error-to-NULL
    wrapper still guards the text."""
    if codec == "date":
        out: exp.Expression = cast_to(epoch_days(col, profile), profile.text_type)
    else:
        out = exp.DPipe(
            this=exp.DPipe(
                this=cast_to(epoch_days(cast_to(col.copy(), "DATE"), profile), profile.text_type),
                expression=exp.Literal.string(":"),
            ),
            expression=cast_to(micros_of_day(col, profile), profile.text_type),
        )
    return func(profile.try_wrapper, out) if profile.try_wrapper else out


#: Microseconds in one day.
DAY_MICROS = 86_400_000_000


def temporal_number(col: exp.Expression, codec: str, profile: DialectProfile) -> exp.Expression:
    """The number a quantile or a histogram reads from a date or timestamp column (a double):
    a ``DATE`` (``codec == "date"``) as its day number since 1970-01-01; a wall-clock
    ``TIMESTAMP`` (``"local"``) as ``days * 86,400 * 10^6 + microseconds of the day``, its
    microseconds since 1970-01-01 00:00 read as if it were UTC; an instant (``"instant"``,
    ``TIMESTAMP WITH TIME ZONE``) as its microseconds since the epoch, whatever the session's
    time zone. Integers, exact in a double while below 2^53 in magnitude (every date; an
    instant or a wall-clock time of the years 1685 to 2255), computed the same way on every
    engine; sub-microsecond digits are cut (towards the past)."""
    if codec == "date":
        return cast_to(epoch_days(col, profile), profile.float_type)
    if codec == "instant":
        return cast_to(func(profile.instant_micros, col), profile.float_type)
    days = cast_to(epoch_days(cast_to(col.copy(), "DATE"), profile), profile.float_type)
    return exp.Add(
        this=exp.Mul(this=days, expression=double(float(DAY_MICROS), profile)),
        expression=cast_to(micros_of_day(col, profile), profile.float_type),
    )


def sent_key(k: exp.Expression, codec: str, profile: DialectProfile) -> exp.Expression:
    """A group key in the form :func:`~dpkit.analytics._column_types.key_codec` names
    (Spark SQL)."""
    if codec == "instant":
        return func(profile.instant_micros, k)
    if codec == "local":
        return cast_to(k, profile.text_type)
    if codec == "date":
        return func("unix_date", k)
    if codec == "text":
        return cast_to(k, "BINARY")
    return k
