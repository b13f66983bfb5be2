"""The one conversion of the data handed to a release (``values``), decided by type.

A release must never raise, nor change how it treats a value, because of what the value *is*:
an exception or a special case that depends on the data is itself a release of the data. So the
conversion here looks at *types* only (a numpy dtype, or the Python types of the elements of a
list) and decides once:

* **accepted** types are converted *exactly* (nothing is rounded to a double on the way): float
  dtypes of at most 64 bits become float64 (a widening, exact); ``np.longdouble`` stays
  longdouble; integer and bool dtypes stay integers; Python ``int`` of any size, ``Fraction``
  and ``Decimal`` become exact rationals;
* every other type is **refused**, whatever its value, with a
  :class:`~dpkit.errors.PrivacyParameterError` naming ``values``: strings (``'1.5'`` as much as
  ``'abc'``), ``None``, complex numbers, datetimes and timedeltas, bytes, nested containers,
  pandas extension dtypes.

Which types a mechanism accepts is its ``accept`` mode:

* ``"real"`` (Laplace, Gaussian): every real type above;
* ``"integer"`` (DiscreteLaplace, DiscreteGaussian): bool and integer types only; float dtypes
  are refused *by dtype*, even when they hold whole numbers (rounding a float would be an
  uncharged change of the value);
* ``"binary"`` (RandomizedResponse): bool and integer types; a non-zero integer counts as 1.

A Python list (or tuple) is read element by element, never through numpy's value-dependent
dtype inference (``np.asarray([0, 2**64])`` and ``np.asarray([0, 2**62])`` get different dtypes,
and ``[2**53 + 1, 0.5]`` would become float64 and round the integer). A list of Python floats
is float64; of integers, exact integers; of a mixture of accepted types, exact rationals.

Decimal special values: NaN and sNaN are NaN (each mechanism documents what NaN becomes),
``Infinity`` is +-inf; a finite Decimal of magnitude at least ``10**400`` is represented as +-inf
and one below ``10**-400`` as 0 (every release clamps or rounds them so, see
docs/special-values.md), so that a huge exponent cannot make the conversion slow.

The output keeps the container: a pandas Series in gives a Series out with the same index and
name (pandas is only touched when it is already imported, i.e. when a Series can exist); a
scalar in gives a scalar out; anything else gives a numpy array of the input's shape.
"""

from __future__ import annotations

import numbers
import sys
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dpkit.errors import PrivacyParameterError

__all__ = ["Accept", "ParsedValues", "parse_values"]

Accept = Literal["real", "integer", "binary"]
Kind = Literal["float", "longdouble", "int", "uint", "exact", "bool"]

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_DECIMAL_HUGE = 400  # |x| >= 10**400 is beyond every clamp; |x| < 10**-400 rounds to 0

_WHAT = {
    "real": "real numbers (float, integer or bool dtypes, Python int, Fraction or Decimal)",
    "integer": "integers (integer or bool dtypes, or Python int); round floats yourself and "
               "charge the rounding in the sensitivity, e.g. np.rint(x).astype(np.int64)",
    "binary": "bits (a bool or integer dtype, or Python bool/int; non-zero counts as 1)",
}


@dataclass(frozen=True)
class ParsedValues:
    """Values converted by :func:`parse_values`, with what is needed to rebuild the container.

    ``kind`` names the representation of ``array`` (same shape as the input):

    * ``"float"``: float64 (exact copy of a float dtype of at most 64 bits);
    * ``"longdouble"``: ``np.longdouble``;
    * ``"int"``: int64; ``"uint"``: uint64 (exact integers);
    * ``"exact"``: an object array whose elements are Python ``int``, ``Fraction`` or ``float``
      (the floats keep NaN and +-inf, and finite floats are exact rationals too);
    * ``"bool"``: booleans (``accept="binary"`` only).
    """

    kind: Kind
    array: npt.NDArray[Any]
    scalar: bool = False
    series: Any = None

    def wrap(self, out: npt.NDArray[Any]) -> Any:
        """``out`` (same shape as :attr:`array`) in the container the values came in.

        A Series gives a Series (index and name kept); a scalar gives a Python ``int`` for an
        integer result, ``bool`` for a boolean result and a ``numpy.float64`` (a ``float``)
        otherwise; anything else gives the array itself.
        """
        if self.series is not None:
            pd = sys.modules["pandas"]
            return pd.Series(out, index=self.series.index, name=self.series.name)
        if self.scalar:
            item = out[()]
            if out.dtype.kind == "b":
                return bool(item)
            if out.dtype.kind in "iu":
                return int(item)
            return np.float64(item)
        return out


def _refuse(accept: Accept, found: str) -> PrivacyParameterError:
    return PrivacyParameterError(f"values must be {_WHAT[accept]}; got {found}")


# Element classes of an object array / list, decided by the element's Python type.
_INT, _FLOAT, _RATIONAL = "int", "float", "rational"


def _classify(t: type) -> str | None:
    """How an element of Python type ``t`` is read, or None if the type is refused."""
    if issubclass(t, (bool, np.bool_)):
        return _INT
    if issubclass(t, (np.floating, float)):
        if issubclass(t, np.floating) and np.dtype(t).itemsize > 8:
            return _RATIONAL  # longdouble: exact through as_integer_ratio
        return _FLOAT
    if issubclass(t, (Fraction, Decimal)):
        return _RATIONAL
    if issubclass(t, (numbers.Integral, np.integer)):
        return _INT
    if issubclass(t, numbers.Rational):
        return _RATIONAL
    return None


def _exact(v: Any) -> int | Fraction | float:
    """One element as an exact Python int, an exact Fraction, or a float (NaN/inf/finite)."""
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, Decimal):
        if v.is_nan():
            return float("nan")  # NaN and signalling NaN alike
        if v.is_infinite():
            return float("inf") if v > 0 else float("-inf")
        if v.is_zero():
            return 0
        if v.adjusted() >= _DECIMAL_HUGE:
            return float("inf") if v > 0 else float("-inf")
        if v.adjusted() < -_DECIMAL_HUGE:
            return 0
        return Fraction(v)
    if isinstance(v, np.floating):
        if np.dtype(type(v)).itemsize > 8:
            if not np.isfinite(v):
                return float(v)  # NaN and +-inf are exact as doubles
            num, den = v.as_integer_ratio()
            return Fraction(int(num), int(den))
        return float(v)  # exact: at most 64 bits
    if isinstance(v, float):
        return v
    if isinstance(v, (numbers.Integral, np.integer)):
        return int(v)
    if isinstance(v, Fraction):
        return v
    return Fraction(int(v.numerator), int(v.denominator))  # another numbers.Rational


def _from_objects(arr: npt.NDArray[Any], accept: Accept) -> tuple[Kind, npt.NDArray[Any]]:
    """Convert an object array by the Python types of its elements (never by their values)."""
    flat = arr.reshape(-1)
    types = set(map(type, flat))
    classes: dict[type, str | None] = {t: _classify(t) for t in types}
    refused = sorted(t.__name__ for t, c in classes.items() if c is None)
    if refused:
        raise _refuse(accept, "elements of type " + ", ".join(refused))
    kinds = set(classes.values())
    if accept != "real" and kinds != {_INT} and kinds:
        names = sorted(t.__name__ for t, c in classes.items() if c != _INT)
        raise _refuse(accept, "elements of type " + ", ".join(names))
    if not kinds:  # no elements: the empty array of the mode's representation
        empty = {"real": ("float", np.float64), "integer": ("int", np.int64),
                 "binary": ("bool", np.bool_)}[accept]
        return empty[0], np.zeros(arr.shape, dtype=empty[1])  # type: ignore[return-value]
    if kinds == {_FLOAT}:
        return "float", arr.astype(np.float64)  # every element is a double: exact
    if kinds == {_INT}:
        ints = [int(v) for v in flat]
        if accept == "binary":
            return "bool", np.array([i != 0 for i in ints], dtype=np.bool_).reshape(arr.shape)
        # The choice of representation depends on the values, the result does not: both are
        # the same exact integers (only the speed differs).
        if not ints or (min(ints) >= _INT64_MIN and max(ints) <= _INT64_MAX):
            return "int", np.array(ints, dtype=np.int64).reshape(arr.shape)
        out = np.empty(len(ints), dtype=object)
        out[:] = ints
        return "exact", out.reshape(arr.shape)
    out = np.empty(flat.size, dtype=object)
    out[:] = [_exact(v) for v in flat]
    return "exact", out.reshape(arr.shape)


def _from_array(arr: npt.NDArray[Any], accept: Accept) -> tuple[Kind, npt.NDArray[Any]]:
    """Convert a numpy array by its dtype alone."""
    k = arr.dtype.kind
    if k == "O":
        return _from_objects(arr, accept)
    if k == "b":
        if accept == "binary":
            return "bool", arr.astype(np.bool_, copy=False)
        return "int", arr.astype(np.int64)
    if k in "iu":
        if accept == "binary":
            return "bool", arr != 0
        if k == "u" and arr.dtype.itemsize == 8:
            return "uint", arr.astype(np.uint64, copy=False)
        return "int", arr.astype(np.int64, copy=False)
    if k == "f" and accept == "real":
        if arr.dtype.itemsize > 8:
            return "longdouble", arr.astype(np.longdouble, copy=False)
        return "float", arr.astype(np.float64, copy=False)
    raise _refuse(accept, f"an array of dtype {arr.dtype}")


def _series_type() -> Any:
    pd = sys.modules.get("pandas")  # a Series can only exist if pandas is imported
    return None if pd is None else getattr(pd, "Series", None)


def parse_values(values: Any, *, accept: Accept) -> ParsedValues:
    """Convert the data of a release, deciding by type only (see the module docstring).

    Raises :class:`~dpkit.errors.PrivacyParameterError` (naming ``values``) for a refused type,
    for every value of that type alike; never for an accepted type, whatever its values.
    """
    series_cls = _series_type()
    if series_cls is not None and isinstance(values, series_cls):
        dtype = values.dtype
        if not isinstance(dtype, np.dtype):
            raise _refuse(accept, f"a pandas Series of extension dtype {dtype}; convert it "
                                  "first, e.g. series.to_numpy(dtype=..., na_value=...)")
        kind, arr = _from_array(np.asarray(values.to_numpy()), accept)
        return ParsedValues(kind, arr, series=values)
    if isinstance(values, np.ndarray):
        kind, arr = _from_array(values, accept)
        return ParsedValues(kind, arr)
    if isinstance(values, np.generic):  # a numpy scalar: decided by its dtype
        kind, arr = _from_array(np.asarray(values), accept)
        return ParsedValues(kind, arr, scalar=True)
    if isinstance(values, (list, tuple)):
        try:
            obj = np.array(values, dtype=object)
        except (ValueError, TypeError) as exc:
            raise _refuse(accept, f"a ragged or non-rectangular {type(values).__name__}"
                          ) from exc
        kind, arr = _from_objects(obj, accept)
        return ParsedValues(kind, arr)
    if _classify(type(values)) is not None:  # a Python scalar (int, float, Fraction, ...)
        obj = np.empty((), dtype=object)
        obj[()] = values
        kind, arr = _from_objects(obj, accept)
        return ParsedValues(kind, arr, scalar=True)
    if isinstance(values, (str, bytes, complex)) or values is None:
        raise _refuse(accept, f"a {type(values).__name__}")
    try:  # another array-like (a polars or pyarrow column, a range, ...): by its dtype
        arr0 = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise _refuse(accept, f"{type(values).__name__}") from exc
    if arr0.dtype.kind == "O" and arr0.ndim == 0:
        raise _refuse(accept, f"{type(values).__name__}")
    kind, arr = _from_array(arr0, accept)
    return ParsedValues(kind, arr)
