"""Numeric foundations: parameter validation, directed rounding and the certified bracket search
(no randomness here)."""

from dpkit._numeric.validation import (
    check_bounds,
    check_delta,
    check_epsilon,
    check_finite,
    check_integer,
    check_mu,
    check_nonnegative,
    check_positive,
    check_probability,
    check_real_array,
    check_sensitivity,
)

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
