"""Numbers as people read them: rounded for display, exact values kept elsewhere.

Privacy arithmetic rounds towards the safe side, so a spent total of three charges of 1/3 is
``0.9999999999999999`` or ``1.0000000000000002``: exact, but noise to a reader. Everything
shown to a person (reprs, messages, the CLI, the service's page and the human fields of its
JSON) goes through :func:`fmt` or :func:`rounded`; the exact doubles stay available in
attributes and in ``*_exact`` fields. This module is the one home of that rule.

Rule: ``digits`` significant digits (6 by default), trailing zeros dropped (``"%.6g"``);
a remaining amount below ``TINY`` times its total shows as 0 (:func:`fmt_left`).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["TINY", "fmt", "fmt_left", "left", "rounded", "rounded_pair"]

#: A remaining amount at most this fraction of its total is shown as 0 (rounding residue).
TINY = 1e-9


def rounded(x: Any, digits: int = 6) -> Any:
    """``x`` rounded to ``digits`` significant digits (a float); non-finite values, ``None``
    and non-numbers unchanged, integers stay integers."""
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)):
        return x
    if isinstance(x, int):
        return x
    if not math.isfinite(x):
        return x
    return float(f"{x:.{digits}g}")


def rounded_pair(pair: Any, digits: int = 6) -> Any:
    """A tuple or list of numbers, each :func:`rounded` (same container type for lists)."""
    if isinstance(pair, (tuple, list)):
        return [rounded(v, digits) for v in pair]
    return rounded(pair, digits)


def fmt(x: Any, digits: int = 6) -> str:
    """``x`` as text: ``digits`` significant digits without trailing zeros (``1``, ``0.5``,
    ``1e-07``, ``23904.1``); ``inf`` and ``nan`` as such; other values with ``str``."""
    if x is None:
        return "None"
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return str(x)
    if isinstance(x, int):
        return str(x)
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return f"{x:.{digits}g}"


def left(remaining: float, total: float | None) -> float:
    """``remaining`` for display: 0 when it is at most :data:`TINY` times ``total`` (the
    residue of rounding towards the safe side, e.g. ``1.3e-16`` left of 1)."""
    if total is None or not math.isfinite(total) or total <= 0.0:
        return remaining
    if remaining <= TINY * total:
        return 0.0
    return remaining


def fmt_left(remaining: float, total: float | None, digits: int = 6) -> str:
    """:func:`fmt` of :func:`left`."""
    return fmt(left(remaining, total), digits)
