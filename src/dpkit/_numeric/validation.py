"""The one shared validator of privacy parameters.

Every public dpkit function that takes a privacy or mechanism parameter passes it through one of
these functions. They refuse, with a :class:`~dpkit.errors.PrivacyParameterError` naming the
parameter and the value:

* anything that is not a real number: ``bool`` (``True`` is not an epsilon), ``str``,
  ``complex``, ``None``, containers, numpy arrays with more than one element;
* NaN and both infinities (unless ``allow_inf=True`` is passed explicitly);
* values outside the parameter's domain (negative, zero where positivity is required,
  delta >= 1, a probability outside [0, 1], lower > upper).

Comparisons are written so that NaN fails them (``not (x > 0)`` rather than ``x <= 0``).
The validated value is returned as a Python ``float`` (or ``int`` for integer parameters), so
callers never keep a numpy scalar or a ``Fraction`` by accident.

Every check takes its arguments in one order: ``check_x(value, name, *, options)`` (the value
first, then the name used in messages, then keyword-only options); :func:`check_bounds` takes
its two values first and their names after them. A name that is not a ``str`` is refused with a
``TypeError``, so a call written in another order fails loudly instead of checking the name.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from dpkit.errors import PrivacyParameterError

__all__ = [
    "check_bounds",
    "check_delta",
    "check_epsilon",
    "check_finite",
    "check_integer",
    "check_mu",
    "check_nonnegative",
    "check_positive",
    "check_probability",
    "check_real_array",
    "check_sensitivity",
]


def _check_name(name: object) -> None:
    if not isinstance(name, str):
        raise TypeError(f"the parameter name must be a str (check_x(value, name)), got {name!r}")


def _as_real(value: Any, name: str) -> float:
    """Convert ``value`` to float after refusing every non-real type."""
    _check_name(name)
    if isinstance(value, (bool, np.bool_)):
        raise PrivacyParameterError(f"{name} must be a real number, got the bool {value!r}")
    if isinstance(value, np.ndarray):
        if value.shape != ():
            raise PrivacyParameterError(
                f"{name} must be a single real number, got an array of shape {value.shape}"
            )
        value = value[()]
        if isinstance(value, np.bool_):
            raise PrivacyParameterError(f"{name} must be a real number, got the bool {value!r}")
    if isinstance(value, Fraction):
        return float(value)
    if not isinstance(value, numbers.Real):
        raise PrivacyParameterError(
            f"{name} must be a real number, got {type(value).__name__} {value!r}"
        )
    try:
        out = float(value)
    except (TypeError, ValueError, OverflowError) as exc:  # pragma: no cover - exotic Real
        raise PrivacyParameterError(f"{name} must be a real number, got {value!r}") from exc
    return out


def check_finite(value: Any, name: str) -> float:
    """Return ``value`` as a float after checking it is a finite real number."""
    x = _as_real(value, name)
    if not math.isfinite(x):
        raise PrivacyParameterError(f"{name} must be finite, got {value!r}")
    return x


def check_positive(value: Any, name: str, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking ``0 < value`` (``< inf`` unless allowed)."""
    x = _as_real(value, name)
    if math.isnan(x) or (math.isinf(x) and not (allow_inf and x > 0)):
        raise PrivacyParameterError(f"{name} must be a positive finite number, got {value!r}")
    if not x > 0.0:
        raise PrivacyParameterError(f"{name} must be positive, got {value!r}")
    return x


def check_nonnegative(value: Any, name: str, *, allow_inf: bool = False) -> float:
    """Return ``value`` as a float after checking ``0 <= value`` (``< inf`` unless allowed)."""
    x = _as_real(value, name)
    if math.isnan(x) or (math.isinf(x) and not (allow_inf and x > 0)):
        raise PrivacyParameterError(f"{name} must be a non-negative finite number, got {value!r}")
    if not x >= 0.0:
        raise PrivacyParameterError(f"{name} must be non-negative, got {value!r}")
    return x


def check_epsilon(
    value: Any, name: str = "epsilon", *, allow_zero: bool = False, allow_inf: bool = False
) -> float:
    """Validate a privacy-loss bound epsilon: finite and > 0 (or >= 0 with ``allow_zero``)."""
    if allow_zero:
        return check_nonnegative(value, name, allow_inf=allow_inf)
    return check_positive(value, name, allow_inf=allow_inf)


def check_delta(value: Any, name: str = "delta", *, allow_zero: bool = True) -> float:
    """Validate a failure probability delta in [0, 1) (or (0, 1) when ``allow_zero=False``)."""
    x = _as_real(value, name)
    if math.isnan(x) or not (0.0 <= x < 1.0):
        raise PrivacyParameterError(f"{name} must lie in [0, 1), got {value!r}")
    if not allow_zero and not x > 0.0:
        raise PrivacyParameterError(f"{name} must be positive, got {value!r}")
    return x


def check_mu(value: Any, name: str = "mu", *, allow_zero: bool = False) -> float:
    """Validate a Gaussian-DP parameter mu: finite and > 0 (or >= 0 with ``allow_zero``)."""
    if allow_zero:
        return check_nonnegative(value, name)
    return check_positive(value, name)


def check_sensitivity(value: Any, name: str = "sensitivity") -> float:
    """Validate a sensitivity: finite and > 0 (a zero-sensitivity query needs no mechanism)."""
    return check_positive(value, name)


def check_probability(
    value: Any, name: str = "p", *, open_low: bool = False, open_high: bool = False
) -> float:
    """Validate a probability in [0, 1]; ``open_low``/``open_high`` exclude the end points."""
    x = _as_real(value, name)
    low_ok = x > 0.0 if open_low else x >= 0.0
    high_ok = x < 1.0 if open_high else x <= 1.0
    if math.isnan(x) or not (low_ok and high_ok):
        lo = "(" if open_low else "["
        hi = ")" if open_high else "]"
        raise PrivacyParameterError(f"{name} must lie in {lo}0, 1{hi}, got {value!r}")
    return x


def check_integer(
    value: Any, name: str, *, minimum: int | None = None, maximum: int | None = None
) -> int:
    """Validate an integer parameter (a count, a number of steps); bools are refused."""
    _check_name(name)
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral,)):
        raise PrivacyParameterError(
            f"{name} must be an integer, got {type(value).__name__} {value!r}"
        )
    x = int(value)
    if minimum is not None and x < minimum:
        raise PrivacyParameterError(f"{name} must be >= {minimum}, got {value!r}")
    if maximum is not None and x > maximum:
        raise PrivacyParameterError(f"{name} must be <= {maximum}, got {value!r}")
    return x


def check_bounds(
    lower: Any, upper: Any, *, lower_name: str = "lower", upper_name: str = "upper"
) -> tuple[float, float]:
    """Validate a finite clamping interval with ``lower <= upper``."""
    lo = check_finite(lower, lower_name)
    hi = check_finite(upper, upper_name)
    if not lo <= hi:
        raise PrivacyParameterError(
            f"{lower_name} must not exceed {upper_name}, got {lower_name}={lower!r} > "
            f"{upper_name}={upper!r}"
        )
    return lo, hi


def check_real_array(
    values: ArrayLike,
    name: str,
    *,
    low: float | None = None,
    high: float | None = None,
    high_open: bool = False,
) -> NDArray[np.float64]:
    """Validate a non-empty 1-d array of privacy parameters element-wise (finite, in range).

    ``low <= x`` and ``x <= high`` (``x < high`` with ``high_open``) for every element; bools,
    non-real dtypes, NaN and infinities are refused. The fast path is vectorised; on the first
    failing element the scalar :func:`check_finite` runs so a NaN or an infinity gets the shared
    error, naming the element's index. Returns a new float64 array.
    """
    _check_name(name)
    a = np.asarray(values)
    if a.ndim != 1 or a.size == 0:
        raise PrivacyParameterError(f"{name} must be a non-empty 1-d sequence, got shape {a.shape}")
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise PrivacyParameterError(f"{name} must hold real numbers, got dtype {a.dtype}")
    a = a.astype(np.float64)
    ok = np.isfinite(a)
    if low is not None:
        ok &= a >= low
    if high is not None:
        ok &= (a < high) if high_open else (a <= high)
    if not np.all(ok):
        bad = float(a[~ok][0])
        check_finite(bad, f"{name}[{int(np.flatnonzero(~ok)[0])}]")
        raise PrivacyParameterError(f"{name} has an element out of range: {bad!r}")
    return a
