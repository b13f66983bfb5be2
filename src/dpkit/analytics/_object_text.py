"""One text per value for columns that hold Python objects (pandas ``object``, Polars ``Object``).

A column of Python objects has no declared type: its rows may mix ``1``, ``1.0``, ``True``,
``Decimal('1.00')`` and ``'1'``. The engines need one type per column, and guessing it from the
rows would let one person change it (and with it how every row is read, or whether the query is
refused). So such a column is always read as **text** (decided by its dtype alone), and each
value is written by :func:`object_text`, whose rule is chosen so that *values Python holds equal
get the same text*: one person's unit or key spelled in several equal ways is one unit, one key.
"Equal" is in the sense of a ``set`` or ``dict`` key: ``a == b`` and ``hash(a) == hash(b)``.
Values Python holds unequal may share a text (``1`` and ``'1'``); that merges, never splits.
Where ``==`` is not transitive (``a == b`` and ``b == c`` while ``a != c``, as with aware
datetimes around a clock change: pandas holds the two ``Timestamp`` values of New York's two 01:30s
unequal but each equal to the ``datetime`` of 01:30 there), the rule gives ``a``, ``b`` and
``c`` one text: it merges.
(Pairs that are ``==`` with different hashes, which a ``set`` keeps apart, are not covered:
``numpy.timedelta64(5, 'D') == 5`` and a pandas ``Timestamp`` at the second 01:30 of a
clock change equal to the same instant in another zone; they may get two texts.)

The rule, by the value's Python type (a subclass is read as its base type):

* missing (``None``, NaN of any kind, ``pandas.NA``, ``NaT``, ``Decimal('NaN')``, a complex
  with a NaN part) -> ``None`` (NULL, as in numeric columns);
* ``str`` -> itself;
* numbers (``bool``, ``int``, ``float``, ``Decimal``, ``Fraction``, numpy numbers, ``complex``)
  -> the text of their exact value x: ``"0"`` for zero (``-0.0`` included), ``"inf"``/``"-inf"``
  for |x| >= 10^400 (the clamp of ``dpkit._numeric.values``), ``"0"`` also for 0 < |x| < 10^-400;
  an integer in decimal digits (``True``, ``1.0``, ``Decimal('1.00')`` -> ``"1"``); a value
  that is exactly a double, its shortest round-trip text (``repr``: ``0.5``, ``1e-07``); any
  other value with a finite decimal expansion, its exact positional digits; otherwise
  ``"p/q"`` in lowest terms; a complex with a non-zero imaginary part ``"(re+imj)"``, each
  part read at its own precision (a ``numpy.clongdouble`` part is a ``longdouble``);
* ``bytes``/``bytearray``/``memoryview`` -> ``repr(bytes(v))`` (``b'a'``; ``b'a' != 'a'``);
* dates and times: a naive ``datetime`` (also ``pandas.Timestamp``, ``numpy.datetime64``)
  ``YYYY-MM-DD HH:MM:SS[.ffffff[nnn]]``, only ``YYYY-MM-DD`` at midnight (so it is the text of
  the equal ``date`` and ``numpy.datetime64`` day; a ``numpy.datetime64`` of any unit is
  read as its instant); an aware one the same fields of its instant in UTC, read with
  ``fold=0``, followed by ``+00:00``. Python compares two aware datetimes of the same
  ``tzinfo`` by wall clock, ignoring ``fold`` (the two 01:30s of a clock change are equal),
  and of different ``tzinfo`` by instant, and its hash reads the offset with ``fold=0``; the
  ``fold=0`` instant is therefore equal for equal values under both comparisons (a wall time in
  a gap shares its text with the instant it names with ``fold=0``: a merge). A
  ``timedelta`` (also ``pandas.Timedelta``, ``numpy.timedelta64`` of a fixed unit) ``str`` of
  ``datetime.timedelta`` plus ``+Nns`` for nanoseconds; a ``numpy.timedelta64`` in years or
  months (nominal lengths, equal to each other as 1 year = 12 months, never to a fixed span)
  its number of months as an integer (``timedelta64(1, 'Y')`` and ``timedelta64(12, 'M')`` ->
  ``"12"``, the text of the int ``12`` they equal and hash like); a ``time``
  ``HH:MM:SS[.ffffff]`` (an aware one shifted to UTC, then ``+00:00``); values beyond the
  calendar ``@<n>ns``;
* ``uuid.UUID``, ``ipaddress`` objects -> their canonical ``str``; an ``Enum`` member
  ``Class.NAME`` (one with an ``int``/``str``/``float`` base is read as that base, to which it
  is equal);
* ``tuple``, ``list``, ``set``/``frozenset``, ``dict`` (nested at most 16 deep) -> their
  elements' texts in brackets (text elements quoted; set elements and dict items sorted by
  text, since their order does not take part in equality).

Any other object (a class whose equality dpkit cannot reproduce) raises
:class:`~dpkit.errors.PrivacyParameterError` naming the column and the type, when the frame is
registered (the session is created), before any query: cast the column first.
"""

from __future__ import annotations

import datetime
import enum
import ipaddress
import math
import numbers
import uuid
from collections.abc import Iterable
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.errors import PrivacyParameterError

__all__ = ["ObjectTextError", "object_text", "object_texts"]

# The clamp of the numeric conversions (dpkit._numeric.values): |x| >= 10^400 is beyond every
# clamp, |x| < 10^-400 rounds to 0 (a test checks that the two agree).
_DECIMAL_HUGE = 400
_HUGE = 10**_DECIMAL_HUGE
_MAX_DEPTH = 16
_US_PER_DAY = 86_400 * 10**6
_NS = {
    "W": 7 * 86_400 * 10**9,
    "D": 86_400 * 10**9,
    "h": 3_600 * 10**9,
    "m": 60 * 10**9,
    "s": 10**9,
    "ms": 10**6,
    "us": 1_000,
    "ns": 1,
}
_SUB_NS = {"ps": 1_000, "fs": 10**6, "as": 10**9}


class ObjectTextError(PrivacyParameterError):
    """A value of a type :func:`object_text` has no rule for (carries the type's name)."""

    def __init__(self, type_name: str) -> None:
        super().__init__(type_name)
        self.type_name = type_name


def _missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, float):  # also numpy.float64
        return math.isnan(v)
    t = type(v)
    mod = t.__module__
    if mod.startswith("pandas") and t.__name__ in ("NAType", "NaTType"):
        return True
    if isinstance(v, (np.datetime64, np.timedelta64)):
        return bool(np.isnat(v))
    if isinstance(v, np.floating):
        return bool(np.isnan(v))
    if isinstance(v, Decimal):
        return v.is_nan()
    if isinstance(v, (complex, np.complexfloating)):
        c = complex(v)
        return math.isnan(c.real) or math.isnan(c.imag)
    return False


# ------------------------------------------------------------------------------ numbers


def _exact(v: Any) -> int | Fraction | float:
    """The exact value of a real number (a float only for +-inf), clamped as the docstring
    of this module says (|x| >= 10^400 -> +-inf, 0 < |x| < 10^-400 -> 0)."""
    x: int | Fraction | float
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, Decimal):
        if v.is_infinite():
            return math.inf if v > 0 else -math.inf
        if v.is_zero():
            return 0
        if v.adjusted() >= _DECIMAL_HUGE:
            return math.inf if v > 0 else -math.inf
        if v.adjusted() < -_DECIMAL_HUGE:
            return 0
        x = Fraction(v)
    elif isinstance(v, np.floating) and np.dtype(type(v)).itemsize > 8:
        if not np.isfinite(v):
            return float(v)
        num, den = v.as_integer_ratio()
        x = Fraction(int(num), int(den))
    elif isinstance(v, (float, np.floating)):
        f = float(v)
        if math.isinf(f) or f == 0.0:
            return f if math.isinf(f) else 0
        x = Fraction(f)
    elif isinstance(v, (numbers.Integral, np.integer)):
        x = int(v)
    else:
        x = Fraction(int(v.numerator), int(v.denominator))
    if abs(x) >= _HUGE:
        return math.inf if x > 0 else -math.inf
    if isinstance(x, Fraction):
        if x.denominator == 1:
            return int(x.numerator)
        if abs(x) * _HUGE < 1:
            return 0
    return x


def _digits(n: int) -> str:
    """Decimal digits of an int of any size (no ``sys.set_int_max_str_digits`` limit)."""
    return str(Decimal(n))


def _power_of(n: int, p: int) -> int | None:
    """k with n == p**k, or None (O(1) big-integer operations)."""
    if n < 1:
        return None
    guess = int(n.bit_length() / math.log2(p))
    for k in (guess - 1, guess, guess + 1):
        if k >= 0 and p**k == n:
            return k
    return None


def _number_text(v: Any) -> str:
    if type(v) is float:  # fast paths giving what the general rule below gives
        if v == 0.0 or math.isinf(v):
            return "0" if v == 0.0 else ("inf" if v > 0 else "-inf")
        return str(int(v)) if v.is_integer() else repr(v)
    if type(v) is int and -_HUGE < v < _HUGE:
        return str(v)
    if isinstance(v, (complex, np.complexfloating)):
        re, imag = v.real, v.imag  # numpy parts keep their precision (complex() would not)
        if imag == 0:
            return _number_text(re)
        im = _number_text(abs(imag))
        return f"({_number_text(re)}{'+' if imag > 0 else '-'}{im}j)"
    x = _exact(v)
    if isinstance(x, float):  # +-inf
        return "inf" if x > 0 else "-inf"
    if isinstance(x, int):
        return _digits(x)
    if abs(x) < 2**1024:
        f = float(x)
        if Fraction(f) == x:  # exactly a double: the text Python prints for it
            return repr(f)
    p, q = x.numerator, x.denominator
    twos = (q & -q).bit_length() - 1
    fives = _power_of(q >> twos, 5)
    if fives is None:
        return f"{_digits(p)}/{_digits(q)}"
    k = max(twos, fives)
    coef = abs(p) * 2 ** (k - twos) * 5 ** (k - fives)
    digits = _digits(coef).rjust(k + 1, "0")
    whole, frac = digits[:-k], digits[-k:].rstrip("0")
    return ("-" if p < 0 else "") + whole + "." + frac


# ------------------------------------------------------------------------------ dates, times


def _clock(us: int, ns: int) -> str:
    """``HH:MM:SS[.ffffff[nnn]]`` of ``us`` microseconds after midnight (0 <= us < a day)."""
    s, frac = divmod(us, 10**6)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    out = f"{h:02d}:{m:02d}:{s:02d}"
    if frac or ns:
        out += f".{frac:06d}" + (f"{ns:03d}" if ns else "")
    return out


def _wall_text(us: int, ns: int, suffix: str) -> str:
    """Text of a wall-clock time ``us`` microseconds (and ``ns`` nanoseconds) after
    0001-01-01 00:00 (proleptic Gregorian); a naive midnight (``suffix == ""``) is the date."""
    day, tod = divmod(us, _US_PER_DAY)
    if not 0 <= day < datetime.date.max.toordinal():
        return f"@{us * 1000 + ns}ns{suffix and ' UTC'}"
    date = datetime.date.fromordinal(day + 1).isoformat()
    if not suffix and tod == 0 and ns == 0:
        return date
    return f"{date} {_clock(tod, ns)}{suffix}"


def _datetime_text(v: datetime.datetime) -> str:
    ns = int(getattr(v, "nanosecond", 0) or 0)
    us = (
        (v.toordinal() - 1) * 86_400 + (v.hour * 60 + v.minute) * 60 + v.second
    ) * 10**6 + v.microsecond
    if getattr(v, "fold", 0):  # equal to its fold=0 twin (same tzinfo): one text, as hash()
        v = v.replace(fold=0)
    offset = v.utcoffset()
    if offset is None:
        return _wall_text(us, ns, "")
    return _wall_text(us - offset // datetime.timedelta(microseconds=1), ns, "+00:00")


def _datetime64_text(v: np.datetime64) -> str:
    unit, count = np.datetime_data(v.dtype)
    if unit in ("Y", "M"):
        v, unit, count = v.astype("datetime64[D]"), "D", 1
    n = int(v.astype(np.int64)) * int(count)
    if unit in _SUB_NS:
        n //= _SUB_NS[unit]
    else:
        n *= _NS[unit]
    epoch_us = (datetime.date(1970, 1, 1).toordinal() - 1) * _US_PER_DAY
    us, ns = divmod(n, 1000)
    return _wall_text(epoch_us + us, ns, "")


def _span_text(total_ns: int) -> str:
    us, ns = divmod(total_ns, 1000)
    try:
        text = str(datetime.timedelta(microseconds=us))
    except OverflowError:
        return f"{total_ns}ns"
    return text + (f"+{ns}ns" if ns else "")


def _timedelta_text(v: Any) -> str:
    if isinstance(v, np.timedelta64):
        unit, count = np.datetime_data(v.dtype)
        if unit in ("Y", "M"):  # nominal lengths: 1Y == 12M == 12 (same hash), never a span
            months = int(v.astype(np.int64)) * int(count) * (12 if unit == "Y" else 1)
            return _digits(months)
        n = int(v.astype(np.int64)) * int(count)
        return _span_text(n // _SUB_NS[unit] if unit in _SUB_NS else n * _NS[unit])
    ns = int(getattr(v, "nanoseconds", 0) or 0)
    us = (v.days * 86_400 + v.seconds) * 10**6 + v.microseconds
    return _span_text(us * 1000 + ns)


def _time_text(v: datetime.time) -> str:
    us = ((v.hour * 60 + v.minute) * 60 + v.second) * 10**6 + v.microsecond
    ns = int(getattr(v, "nanosecond", 0) or 0)
    offset = v.utcoffset()
    if offset is None:
        return _clock(us, ns)
    us -= offset // datetime.timedelta(microseconds=1)
    if not 0 <= us < _US_PER_DAY:
        return f"@{us}us UTC"
    return _clock(us, ns) + "+00:00"


# ------------------------------------------------------------------------------ the rule

_IP = (
    ipaddress.IPv4Address,
    ipaddress.IPv6Address,
    ipaddress.IPv4Network,
    ipaddress.IPv6Network,
    ipaddress.IPv4Interface,
    ipaddress.IPv6Interface,
)


def _text(v: Any, depth: int) -> str | None:
    if _missing(v):
        return None
    if isinstance(v, str):
        return str.__str__(v)
    if isinstance(v, (datetime.timedelta, np.timedelta64)):  # timedelta64 is a numpy int
        return _timedelta_text(v)
    if isinstance(v, (int, float, complex, Decimal, numbers.Rational, np.number, np.bool_)):
        return _number_text(v)
    if isinstance(v, (bytes, bytearray, memoryview, np.bytes_)):
        return repr(bytes(v))
    if isinstance(v, datetime.datetime):
        return _datetime_text(v)
    if isinstance(v, datetime.date):
        return v.isoformat()
    if isinstance(v, np.datetime64):
        return _datetime64_text(v)
    if isinstance(v, datetime.time):
        return _time_text(v)
    if isinstance(v, (uuid.UUID, *_IP)):
        return str(v)
    if isinstance(v, enum.Enum):
        return f"{type(v).__name__}.{v.name}"
    if isinstance(v, (tuple, list, set, frozenset, dict)):
        if depth >= _MAX_DEPTH:
            raise ObjectTextError(f"{type(v).__name__} nested more than {_MAX_DEPTH} deep")
        if isinstance(v, dict):
            items = sorted(f"{_inner(k, depth)}: {_inner(e, depth)}" for k, e in v.items())
            return "{" + ", ".join(items) + "}"
        parts = [_inner(e, depth) for e in v]
        if isinstance(v, (set, frozenset)):
            return "{" + ", ".join(sorted(parts)) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(parts) + "]"
        return "(" + ", ".join(parts) + ("," if len(parts) == 1 else "") + ")"
    raise ObjectTextError(type(v).__name__)


def _inner(v: Any, depth: int) -> str:
    """An element of a container: text quoted, missing values ``None``."""
    if isinstance(v, str):
        return repr(str.__str__(v))
    text = _text(v, depth + 1)
    return "None" if text is None else text


def object_text(value: Any) -> str | None:
    """The text a column of Python objects holds for ``value`` (None: missing); the rule is
    in this module's docstring. Raises :class:`ObjectTextError` for an unsupported type."""
    return _text(value, 0)


def object_texts(values: Iterable[Any], column: str) -> list[str | None]:
    """:func:`object_text` of every value of the column ``column``.

    Raises :class:`~dpkit.errors.PrivacyParameterError` naming the column and the first
    unsupported type met (when the frame is registered, before any query)."""
    out: list[str | None] = []
    append = out.append
    try:
        for v in values:
            append(v if type(v) is str else _text(v, 0))
    except ObjectTextError as exc:
        raise PrivacyParameterError(
            f"column {column!r} holds Python objects of type {exc.type_name}, which dpkit "
            "cannot read as text with the equality Python gives them; cast the column to a "
            f"typed dtype first (e.g. df[{column!r}] = df[{column!r}].astype(str), or "
            "astype('Int64') / astype(float) for numbers)"
        ) from None
    return out


# ------------------------------------------------------------------------------ frames


def pandas_objects_as_text(frame: Any) -> Any:
    """``frame`` with every column of Python objects as a pandas ``string`` column (Python
    storage, which holds any ``str``, lone surrogates included).

    Decided by dtype alone: an ``object`` column, and a ``category`` column whose categories
    are ``object``, become :func:`object_text` of each value (of each category, so an unused
    category of an unsupported type is refused as well). Other columns are left as they are
    (their declared dtype is their type). The input frame is not modified."""
    import pandas as pd

    def objects(dtype: Any) -> bool:
        if isinstance(dtype, pd.CategoricalDtype):
            return objects(dtype.categories.dtype)
        return bool(pd.api.types.is_object_dtype(dtype))

    positions = [i for i, dtype in enumerate(frame.dtypes) if objects(dtype)]
    if not positions:
        return frame
    frame = frame.copy()
    for i in positions:
        col = frame.iloc[:, i]
        name = str(frame.columns[i])
        if isinstance(col.dtype, pd.CategoricalDtype):
            cats = object_texts(col.cat.categories, name)
            texts = [None if code < 0 else cats[code] for code in col.cat.codes.tolist()]
        else:
            texts = object_texts(col.tolist(), name)
        frame.isetitem(i, pd.Series(texts, index=frame.index, dtype=pd.StringDtype("python")))
    return frame


def polars_objects_as_text(frame: Any) -> Any:
    """A Polars ``DataFrame`` with every ``Object`` column as text (:func:`object_text` of
    each value, each lone surrogate then ``?``: Polars text is UTF-8). Polars hands ``Object``
    columns to Arrow as the objects' memory addresses, so two equal values would be two units.
    A nested type holding objects is refused."""
    import polars as pl

    for name, dtype in frame.schema.items():
        if dtype == pl.Object:
            texts = [
                t if t is None or t.isascii() else t.encode("utf-8", "replace").decode()
                for t in object_texts(frame.get_column(name).to_list(), name)
            ]
            frame = frame.with_columns(pl.Series(name, texts, dtype=pl.Utf8))
        elif dtype.is_nested() and "Object" in str(dtype):
            raise PrivacyParameterError(
                f"column {name!r} holds Python objects inside a {dtype}; cast it to a typed "
                "column first"
            )
    return frame
