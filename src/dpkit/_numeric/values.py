"""The one conversion of the data handed to a release (``values``), decided by type.

A release must never raise, nor change how it treats a value, because of what the value *is*:
an exception or a special case that depends on the data is itself a release of the data. So the
conversion here looks at *types* only (a numpy dtype, or the Python types of the elements of a
list) and decides once:

* **accepted** types are converted *exactly* (nothing is rounded to a double on the way): float
  dtypes of at most 64 bits become float64 (a widening, exact); ``np.longdouble`` stays
  longdouble; integer and bool dtypes stay integers; Python ``int`` of any size, ``Fraction``
  and ``Decimal`` become exact rationals;
* **missing values** are part of the type, never an error: ``None`` (and ``pandas.NA``) in a
  list or object array, and the nulls of a *typed column* (a pandas Series of a nullable dtype
  such as ``Int64``/``Float64``/``boolean``/``int64[pyarrow]``, a polars Series, a pyarrow
  Array or ChunkedArray, or a pandas/polars DataFrame of such columns), which is read by its
  *declared* dtype (:func:`read_column`), never through ``np.asarray`` (which turns a nullable
  integer column into float64 exactly when a value is missing, i.e. decides by value). A
  missing value becomes NaN for ``"real"`` (released as 0, like every NaN) and 0 for
  ``"integer"`` and ``"binary"``;
* every other type is **refused**, whatever its value, with a
  :class:`~dpkit.errors.PrivacyParameterError` naming ``values``: strings (``'1.5'`` as much as
  ``'abc'``), complex numbers, datetimes and timedeltas, bytes, nested containers, columns of
  a non-numeric declared dtype (strings, categories, decimals, dates).

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

__all__ = [
    "Accept",
    "ParsedValues",
    "TypedColumn",
    "is_missing_type",
    "parse_values",
    "read_column",
]

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


# ---------------------------------------------------------------------------------------------
# Typed columns (pandas nullable / arrow dtypes, polars, pyarrow): read by the declared dtype
# ---------------------------------------------------------------------------------------------
ColumnKind = Literal["int", "float", "bool", "other"]


@dataclass(frozen=True)
class TypedColumn:
    """A typed column read by its declared dtype (see :func:`read_column`).

    ``kind`` is decided by the declared dtype alone: ``"int"`` (signed or unsigned integers of
    at most 64 bits; ``data`` is int64, or uint64 for a uint64 column), ``"float"`` (float64),
    ``"bool"`` or ``"other"`` (a non-numeric dtype: ``data`` is None, the caller refuses it).
    ``data`` has every null filled (0, NaN or False by kind) and ``missing`` marks the nulls;
    ``series`` is the pandas Series given, if any (to rebuild the container).
    """

    kind: ColumnKind
    data: npt.NDArray[Any] | None
    missing: npt.NDArray[np.bool_]
    declared: str
    series: Any = None


_FILL: dict[str, Any] = {"int": 0, "float": float("nan"), "bool": False}


def _numpy_kind(dt: np.dtype[Any]) -> ColumnKind:
    if dt.kind in "iu" and dt.itemsize <= 8:
        return "int"
    if dt.kind == "f" and dt.itemsize <= 8:
        return "float"
    if dt.kind == "b":
        return "bool"
    return "other"


def _finish(
    kind: ColumnKind, filled: Any, missing: Any, declared: str, series: Any = None
) -> TypedColumn:
    miss = np.asarray(missing, dtype=np.bool_)
    if kind == "other":
        return TypedColumn("other", None, miss, declared, series)
    arr = np.asarray(filled)
    if kind == "int":
        arr = arr.astype(np.uint64 if arr.dtype == np.uint64 else np.int64, copy=False)
    elif kind == "float":
        arr = arr.astype(np.float64, copy=False)
    else:
        arr = arr.astype(np.bool_, copy=False)
    return TypedColumn(kind, arr, miss, declared, series)


def _pandas_column(values: Any, pd: Any) -> TypedColumn | None:
    dtype = values.dtype
    if isinstance(dtype, np.dtype):
        return None  # a numpy-backed Series: read by its numpy dtype as before
    numpy_dtype = getattr(dtype, "numpy_dtype", None)
    kind: ColumnKind = "other"
    if hasattr(dtype, "na_value") and isinstance(numpy_dtype, np.dtype):
        kind = _numpy_kind(numpy_dtype)
    missing = np.asarray(pd.isna(values), dtype=np.bool_)
    series = values if isinstance(values, pd.Series) else None
    if kind == "other":
        return _finish(kind, None, missing, str(dtype), series)
    filled = values.to_numpy(dtype=numpy_dtype, na_value=_FILL[kind])
    return _finish(kind, filled, missing, str(dtype), series)


def _polars_column(values: Any, pl: Any) -> TypedColumn:
    dt = values.dtype
    kind: ColumnKind = (
        "int"
        if dt.is_integer()
        else "float"
        if dt.is_float()
        else "bool"
        if dt == pl.Boolean
        else "other"
    )
    missing = values.is_null().to_numpy()
    if kind == "other":
        return _finish(kind, None, missing, str(dt))
    return _finish(kind, values.fill_null(_FILL[kind]).to_numpy(), missing, str(dt))


def _arrow_column(values: Any, pa: Any) -> TypedColumn:
    t = values.type
    kind: ColumnKind = (
        "int"
        if pa.types.is_integer(t)
        else "float"
        if pa.types.is_floating(t)
        else "bool"
        if pa.types.is_boolean(t)
        else "other"
    )

    def to_numpy(a: Any) -> Any:
        return a.to_numpy() if isinstance(a, pa.ChunkedArray) else a.to_numpy(zero_copy_only=False)

    missing = to_numpy(values.is_null())
    if kind == "other":
        return _finish(kind, None, missing, str(t))
    filled = values.fill_null(pa.scalar(_FILL[kind], type=t))
    return _finish(kind, to_numpy(filled), missing, str(t))


def _frame(columns: list[TypedColumn], shape: tuple[int, int]) -> TypedColumn:
    """Columns of a DataFrame side by side, by their declared dtypes (never by their values)."""
    kinds = {c.kind for c in columns}
    declared = "frame of " + ", ".join(sorted({c.declared for c in columns}))
    if len(kinds) != 1 or "other" in kinds or not columns:
        return TypedColumn("other", None, np.zeros(shape, dtype=np.bool_), declared)
    dtypes = {c.data.dtype for c in columns if c.data is not None}
    if len(dtypes) != 1:  # int64 with uint64: no exact common dtype
        return TypedColumn("other", None, np.zeros(shape, dtype=np.bool_), declared)
    data = np.stack([c.data for c in columns if c.data is not None], axis=1)
    missing = np.stack([c.missing for c in columns], axis=1)
    return TypedColumn(columns[0].kind, data, missing, declared)


def read_column(values: Any) -> TypedColumn | None:
    """Read a typed column by its *declared* dtype, or return None for any other container.

    Typed columns: a pandas Series or array of an extension dtype (``Int64``, ``Float64``,
    ``boolean``, ``int64[pyarrow]``, ``category``, ...), a polars Series, a pyarrow Array or
    ChunkedArray, and pandas / polars DataFrames whose columns are one of those or numpy-backed.
    ``np.asarray`` must not be used on them: it gives int64 for a nullable integer column
    without a null and float64 (rounding integers beyond 2**53) or object with one, so the
    path taken would depend on the data. Here the kind is fixed by the declared dtype and the
    nulls are reported in ``missing`` (filled with 0, NaN or False in ``data``). Modules are
    looked up in ``sys.modules`` only: nothing is imported.
    """
    pd = sys.modules.get("pandas")
    pl = sys.modules.get("polars")
    pa = sys.modules.get("pyarrow")
    if pd is not None:
        if isinstance(values, pd.DataFrame):
            cols = []
            for name in values.columns:
                col = values[name]
                c = _pandas_column(col, pd)
                if c is None:
                    arr = np.asarray(col.to_numpy())
                    c = _finish(
                        _numpy_kind(arr.dtype), arr, np.zeros(arr.shape, np.bool_), str(arr.dtype)
                    )
                cols.append(c)
            return _frame(cols, values.shape)
        if isinstance(values, (pd.Series, pd.api.extensions.ExtensionArray)):
            return _pandas_column(values, pd)
    if pl is not None:
        if isinstance(values, pl.DataFrame):
            return _frame(
                [_polars_column(values.to_series(i), pl) for i in range(values.width)], values.shape
            )
        if isinstance(values, pl.Series):
            return _polars_column(values, pl)
    if pa is not None and isinstance(values, (pa.Array, pa.ChunkedArray)):
        return _arrow_column(values, pa)
    return None


def is_missing_type(t: type) -> bool:
    """Whether elements of Python type ``t`` are missing values (``None``, ``pandas.NA``)."""
    if t is type(None):
        return True
    pd = sys.modules.get("pandas")
    return pd is not None and t is type(pd.NA)


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
    if any(is_missing_type(t) for t in types):  # None / pandas.NA: NaN for "real", else 0
        fill: float | int = float("nan") if accept == "real" else 0
        filled = np.empty(flat.size, dtype=object)
        filled[:] = [fill if is_missing_type(type(v)) else v for v in flat]
        flat, arr = filled, filled.reshape(arr.shape)
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
        empty = {
            "real": ("float", np.float64),
            "integer": ("int", np.int64),
            "binary": ("bool", np.bool_),
        }[accept]
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
    col = read_column(values)
    if col is not None:  # a typed column: by its declared dtype, nulls filled (module docstring)
        if col.data is None:
            raise _refuse(accept, f"a column of declared dtype {col.declared}")
        kind, arr = _from_array(col.data, accept)
        return ParsedValues(kind, arr, series=col.series)
    series_cls = _series_type()
    if series_cls is not None and isinstance(values, series_cls):
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
            raise _refuse(accept, f"a ragged or non-rectangular {type(values).__name__}") from exc
        kind, arr = _from_objects(obj, accept)
        return ParsedValues(kind, arr)
    if _classify(type(values)) is not None:  # a Python scalar (int, float, Fraction, ...)
        obj = np.empty((), dtype=object)
        obj[()] = values
        kind, arr = _from_objects(obj, accept)
        return ParsedValues(kind, arr, scalar=True)
    if is_missing_type(type(values)):  # a missing scalar, like a missing element
        obj = np.empty((), dtype=object)
        obj[()] = values
        kind, arr = _from_objects(obj, accept)
        return ParsedValues(kind, arr, scalar=True)
    if isinstance(values, (str, bytes, complex)):
        raise _refuse(accept, f"a {type(values).__name__}")
    try:  # another array-like (a range, a memoryview, ...): by its numpy dtype
        arr0 = np.asarray(values)
    except (ValueError, TypeError) as exc:
        raise _refuse(accept, f"{type(values).__name__}") from exc
    if arr0.dtype.kind == "O" and arr0.ndim == 0:
        raise _refuse(accept, f"{type(values).__name__}")
    kind, arr = _from_array(arr0, accept)
    return ParsedValues(kind, arr)
