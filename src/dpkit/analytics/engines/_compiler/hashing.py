"""The salted hashes that order rows inside one unit, and the md5 profile's canonical tokens.

``H(salt, u, k)`` ranks a unit's groups and ``H(salt, u, k, v)`` the rows inside a group (see
the package's statement shape). The native profiles hash the values with the engine's 64-bit
hash; the md5 profiles hash a canonical text of each value (:func:`canonical_token`, computed in
SQL by :func:`token_steps`) that every engine, and Python, writes the same way.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping, Sequence

from sqlglot import exp

from dpkit.analytics._column_types import Family, is_binary, is_instant, key_codec
from dpkit.analytics.engines._compiler.codecs import date_time_text
from dpkit.analytics.engines._compiler.nodes import (
    Step,
    aliased,
    case_when,
    cast_to,
    clamp,
    colref,
    double,
    func,
    ident,
    int_lit,
    is_null,
)
from dpkit.analytics.engines._compiler.profiles import DialectProfile

__all__ = [
    "EPOCH_UTC",
    "canonical_token",
    "float_text",
    "float_text_steps",
    "salted_hash",
    "staged",
    "token_steps",
]

EPOCH_UTC = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_EPOCH_DATE = datetime.date(1970, 1, 1)


def canonical_token(value: object) -> str:
    """The canonical text of one value in the md5 profile (what :func:`token_steps` emits).

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
        micros = ((value.hour * 60 + value.minute) * 60 + value.second) * 10**6 + value.microsecond
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


def float_text_steps(e: str, out: str, profile: DialectProfile) -> list[Step]:
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
        return func("pow", double(2.0, profile), n)

    def one_if(cond: exp.Expression) -> exp.Expression:
        return case_when(cond, int_lit(1), int_lit(0))

    magnitude = clamp(
        exp.Abs(this=colref(e)), double(_DBL_TRUE_MIN, profile), double(_DBL_MAX, profile)
    )
    log2 = clamp(func("log2", colref(a)), double(-1074.0, profile), double(1023.0, profile))
    first_guess = cast_to(exp.Floor(this=log2), profile.fixed_type)
    next_power = pow2(exp.Add(this=colref(guess), expression=int_lit(1)))
    exponent = exp.Add(
        this=exp.Sub(
            this=colref(guess),
            expression=one_if(exp.LT(this=colref(a), expression=pow2(colref(guess)))),
        ),
        expression=one_if(exp.GTE(this=colref(a), expression=next_power)),
    )
    shift = exp.Paren(this=exp.Sub(this=int_lit(52), expression=colref(ex)))
    scaled = exp.Mul(
        this=exp.Mul(this=colref(a), expression=pow2(colref(a1))),
        expression=pow2(exp.Paren(this=exp.Sub(this=shift.copy(), expression=colref(a1)))),
    )
    mantissa = cast_to(
        exp.Floor(this=clamp(scaled, double(0.0, profile), double(2.0**53, profile))),
        profile.fixed_type,
    )
    return [
        [(a, magnitude)],
        [(guess, first_guess)],
        [(ex, exponent)],
        [(a1, clamp(shift, int_lit(-1000), int_lit(1000)))],
        [(mant, mantissa)],
        [(out, _float_text_case(e, ex, mant, profile))],
    ]


def _float_text_case(e: str, ex: str, mant: str, profile: DialectProfile) -> exp.Expression:
    """The last step of :func:`float_text_steps`: ``0p0``, ``inf``, ``-inf``, or the sign, the
    mantissa column ``mant``, ``p`` and the exponent column ``ex``."""
    sign = case_when(
        exp.LT(this=colref(e), expression=int_lit(0)),
        exp.Literal.string("-"),
        exp.Literal.string(""),
    )
    text = exp.DPipe(
        this=exp.DPipe(
            this=exp.DPipe(this=sign, expression=cast_to(colref(mant), profile.text_type)),
            expression=exp.Literal.string("p"),
        ),
        expression=cast_to(colref(ex), profile.text_type),
    )
    special = [
        (exp.EQ(this=colref(e), expression=int_lit(0)), "0p0"),
        (exp.GT(this=colref(e), expression=double(_DBL_MAX, profile)), "inf"),
        (exp.LT(this=colref(e), expression=double(-_DBL_MAX, profile)), "-inf"),
    ]
    return exp.Case(
        ifs=[exp.If(this=cond, true=exp.Literal.string(t)) for cond, t in special],
        default=text,
    )


def token_steps(
    columns: Sequence[tuple[str, Family, str]], profile: DialectProfile, *, types: Mapping[str, str]
) -> list[Step]:
    """The steps computing the canonical token (see :func:`canonical_token`) of each
    ``(column, family, alias)``, under ``alias``; the steps of all columns are merged, so the
    statement nests at most seven projections whatever the number of columns. ``types``
    (column -> engine type) picks the engine-independent text of instants (microseconds since
    the epoch), dates and wall-clock timestamps (see :func:`date_time_text`) and bytes
    (upper-case hex)."""
    steps: list[Step] = []

    def add(level: int, alias: str, e: exp.Expression) -> None:
        while len(steps) <= level:
            steps.append([])
        steps[level].append((alias, e))

    n_float = len(float_text_steps("x", "t", profile))
    for col, fam, alias in columns:
        text = alias + "_t"
        if fam == "float":
            for level, step in enumerate(float_text_steps(col, text, profile)):
                for a, e in step:
                    add(level, a, e)
        elif is_instant(types.get(col, "")):
            add(
                n_float - 1,
                text,
                cast_to(func(profile.instant_micros, colref(col)), profile.text_type),
            )
        elif is_binary(types.get(col, "")):
            add(n_float - 1, text, func("hex", colref(col)))
        elif key_codec(types.get(col, "")) in ("date", "local"):
            add(n_float - 1, text, date_time_text(colref(col), key_codec(types[col]), profile))
        else:
            # TRY_CAST: a text rendering never fails
            add(
                n_float - 1,
                text,
                exp.TryCast(
                    this=colref(col), to=exp.DataType.build(profile.text_type, dialect="duckdb")
                ),
            )
        token = exp.DPipe(
            this=exp.DPipe(
                this=exp.DPipe(
                    this=exp.Literal.string("V"),
                    expression=cast_to(exp.Length(this=colref(text)), profile.text_type),
                ),
                expression=exp.Literal.string(":"),
            ),
            expression=colref(text),
        )
        add(n_float, alias, case_when(is_null(colref(col)), exp.Literal.string("N"), token))
    return steps


def staged(inner: exp.Select, steps: Sequence[Step], name: str) -> exp.Select:
    """``inner`` with the columns of ``steps`` added, one nested ``SELECT *, ...`` per step."""
    q = inner
    for n, step in enumerate(steps):
        if step:
            q = exp.select(exp.Star(), *[aliased(e, ident(a)) for a, e in step]).from_(
                exp.Subquery(this=q, alias=exp.TableAlias(this=ident(f"{name}{n}")))
            )
    return q


def salted_hash(
    salt: int, parts: Sequence[exp.Expression], profile: DialectProfile
) -> exp.Expression:
    """The salted hash of ``parts``: with the md5 profile, ``parts`` are token columns (see
    :func:`token_steps`), joined by ``|`` after the salt's decimal digits."""
    if profile.hash == "native":
        # A signed profile (Spark has no unsigned 64-bit type) takes the same 64 salt bits as
        # a signed BIGINT.
        s = salt - 2**64 if profile.signed_salt and salt >= 2**63 else salt
        h = func(
            profile.native_hash,
            cast_to(exp.Literal.string(str(s)), profile.salt_type),
            *[p.copy() for p in parts],
        )
        return h if profile.native_mix is None else func(profile.native_mix, h)
    text: exp.Expression = exp.Literal.string(str(salt))
    for p in parts:
        text = exp.DPipe(
            this=exp.DPipe(this=text, expression=exp.Literal.string("|")), expression=p.copy()
        )
    return func(profile.md5, text)
