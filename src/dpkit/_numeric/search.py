"""One bracket-and-bisect search for monotone predicates, returning the certified end.

Calibrations and conversions in dpkit ask for "the smallest epsilon whose rounded-up delta is
at most the target", "the largest mu whose profile stays below delta", "the smallest noise
multiplier that meets the budget", and so on. Each is the boundary of a *monotone predicate*
``ok`` on an interval of doubles (or integers):

* ``holds="above"``: ``ok`` is false below a threshold and true from it on (``ok(x)`` implies
  ``ok(y)`` for every ``y >= x``); the search returns a point where ``ok`` holds, as small as
  the stopping rule allows: the *upper* end of the final bracket.
* ``holds="below"``: the mirror image; the search returns the *lower* end of the final bracket.

The returned end is *certified*: ``ok`` was evaluated there and returned true. Whatever the
numerical errors inside ``ok``, nothing is inferred from monotonicity at the returned point, so
a privacy calibration whose ``ok`` rounds towards the safe side stays on the safe side. The
other end of the final bracket is the last point seen to fail (or the caller's start, which the
caller states to fail, or to hold for ``holds="below"``; it is never evaluated).

Bisection runs on the ordered integer encoding of doubles (IEEE 754 bit patterns, sign folded so
the order is the order of the reals), so one step halves the number of doubles left in the
bracket: at most 64 steps reach adjacent doubles from any finite bracket, where a midpoint in
the reals would need up to about 2,100 steps between ``0`` and ``1e308``. Positive brackets are
thereby bisected in the exponent first (like a geometric mean) and then in the mantissa.

Stopping rule: the bracket's ends are adjacent doubles (adjacent integers for
:func:`search_int`), or, when ``rtol > 0``, ``hi - lo <= rtol * |certified end|``. Bracket
expansion (``expand``) multiplies or divides the moving end by ``factor`` until the predicate
changes or the end passes ``limit``. Every evaluation of ``ok`` counts towards ``max_steps``;
passing it raises :class:`SearchError` instead of looping.

When expansion passes ``limit``:

* if the end that must be certified was never seen to hold (``holds="above"`` growing ``hi``,
  ``holds="below"`` shrinking ``lo``), no certified answer exists in range and
  :class:`SearchError` is raised (callers that mean "none" catch it, e.g. to return ``inf``);
* otherwise the certified end found so far is returned (every point tried satisfied ``ok``).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Literal, TypeVar

from dpkit.errors import PrivacyParameterError

__all__ = ["SearchError", "float_key", "float_of_key", "search", "search_int"]

Side = Literal["above", "below"]
Direction = Literal["up", "down"]

_T = TypeVar("_T", int, float)

_SIGN = 1 << 63
_MAGNITUDE = _SIGN - 1
#: Default cap on evaluations of the predicate: 64 bisection steps plus room for expansion.
MAX_STEPS = 256


class SearchError(PrivacyParameterError):
    """A search found no certified end in range, or would pass its cap on evaluations."""


def float_key(x: float) -> int:
    """The double ``x`` as an integer with the same order (``-0.0`` and ``0.0`` both map to 0).

    Adjacent doubles map to adjacent integers, so the integers between two keys count the
    doubles between the two values.
    """
    bits = int(struct.unpack("<q", struct.pack("<d", x))[0])
    return bits if bits >= 0 else -(bits & _MAGNITUDE)


def float_of_key(k: int) -> float:
    """Inverse of :func:`float_key` (``0`` gives ``+0.0``)."""
    bits = k if k >= 0 else (-k) | _SIGN
    (x,) = struct.unpack("<d", struct.pack("<Q", bits))
    return float(x)


def search(
    ok: Callable[[float], bool],
    lo: float,
    hi: float,
    *,
    holds: Side,
    expand: Direction | None = None,
    limit: float | None = None,
    factor: float = 2.0,
    rtol: float = 0.0,
    max_steps: int = MAX_STEPS,
    what: str = "search",
) -> float:
    """The certified end of a bracket ``[lo, hi]`` of doubles for the monotone predicate ``ok``.

    ``holds`` says on which side ``ok`` is true and so which end is returned (``"above"``:
    ``hi``, the smallest point found where ``ok`` holds; ``"below"``: ``lo``, the largest).
    Without ``expand`` the returned end is evaluated first and :class:`SearchError` is raised if
    ``ok`` fails there. ``expand="up"`` moves ``hi`` up (``hi * factor``, needs ``hi > 0``),
    ``expand="down"`` moves ``lo`` down (``lo / factor``, needs ``lo > 0``), each until the
    predicate changes or the end passes ``limit`` (see the module docstring for that case).
    With ``holds="above"`` and ``expand="up"`` the floor ``lo`` is tested first and returned if
    ``ok`` holds there (one extra evaluation).
    Stops at adjacent doubles, or when ``hi - lo <= rtol * |returned end|`` if ``rtol > 0``.
    """
    lo, hi = float(lo), float(hi)
    if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
        raise SearchError(f"{what}: the bracket needs finite lo < hi, got [{lo!r}, {hi!r}]")
    if limit is None:
        limit = -math.inf if expand == "down" else math.inf

    def grow(x: float) -> float:
        return x * factor

    def shrink(x: float) -> float:
        return x / factor

    return _run(
        ok,
        lo,
        hi,
        holds=holds,
        expand=expand,
        limit=limit,
        grow=grow,
        shrink=shrink,
        rtol=rtol,
        max_steps=max_steps,
        what=what,
        key=float_key,
        value=float_of_key,
        factor=factor,
    )


def search_int(
    ok: Callable[[int], bool],
    lo: int,
    hi: int,
    *,
    holds: Side,
    expand: Direction | None = None,
    limit: int | None = None,
    factor: int = 2,
    max_steps: int = MAX_STEPS,
    what: str = "search",
) -> int:
    """:func:`search` on the integers: the certified end once ``hi - lo == 1``."""
    if not lo < hi:
        raise SearchError(f"{what}: the bracket needs lo < hi, got [{lo!r}, {hi!r}]")
    lim: float = (-math.inf if expand == "down" else math.inf) if limit is None else limit

    def grow(x: int) -> int:
        return x * factor

    def shrink(x: int) -> int:
        return x // factor

    def ident(k: int) -> int:
        return k

    return _run(
        ok,
        lo,
        hi,
        holds=holds,
        expand=expand,
        limit=lim,
        grow=grow,
        shrink=shrink,
        rtol=0.0,
        max_steps=max_steps,
        what=what,
        key=ident,
        value=ident,
        factor=factor,
    )


def _run(
    ok: Callable[[_T], bool],
    lo: _T,
    hi: _T,
    *,
    holds: Side,
    expand: Direction | None,
    limit: float,
    grow: Callable[[_T], _T],
    shrink: Callable[[_T], _T],
    rtol: float,
    max_steps: int,
    what: str,
    key: Callable[[_T], int],
    value: Callable[[int], _T],
    factor: float,
) -> _T:
    if holds not in ("above", "below") or expand not in (None, "up", "down"):
        raise SearchError(f"{what}: holds must be 'above' or 'below', expand 'up', 'down' or None")
    if not factor > 1 or not (rtol >= 0.0 and math.isfinite(rtol)):
        raise SearchError(f"{what}: needs factor > 1 and a finite rtol >= 0")
    if (expand == "up" and not hi > 0) or (expand == "down" and not lo > 0):
        raise SearchError(f"{what}: expansion needs a positive moving end, got [{lo!r}, {hi!r}]")
    above = holds == "above"
    steps = 0

    def test(x: _T) -> bool:
        nonlocal steps
        steps += 1
        if steps > max_steps:
            raise SearchError(f"{what}: no answer within {max_steps} evaluations")
        return bool(ok(x))

    def beyond(x: _T) -> bool:
        return not x <= limit if expand == "up" else not x >= limit

    # Phase 1: certify the end to be returned, expanding the bracket if asked.
    if expand is None:
        if not test(hi if above else lo):
            raise SearchError(
                f"{what}: the predicate fails at the end to be certified {hi if above else lo!r}"
            )
    elif above and expand == "up":
        # lo is the floor of the search (it never moves down), not a point assumed to fail:
        # when it holds it is the answer (before, [0, hi] with ok(0) true gave 5e-324).
        if test(lo):
            return lo
        while not test(hi):
            lo, hi = hi, grow(hi)
            if beyond(hi):
                raise SearchError(f"{what}: nothing up to {limit!r} satisfies the predicate")
    elif not above and expand == "down":
        while not test(lo):
            lo, hi = shrink(lo), lo
            if beyond(lo):
                raise SearchError(f"{what}: nothing down to {limit!r} satisfies the predicate")
    elif above:  # expand down: hi must hold, move lo down until it fails
        if not test(hi):
            raise SearchError(f"{what}: the predicate fails at {hi!r}")
        while test(lo):
            lo, hi = shrink(lo), lo
            if beyond(lo):
                return hi
    else:  # holds below, expand up: lo must hold, move hi up until it fails
        if not test(lo):
            raise SearchError(f"{what}: the predicate fails at {lo!r}")
        while test(hi):
            lo, hi = hi, grow(hi)
            if beyond(hi):
                return lo

    # Phase 2: bisect on the ordered keys; the certified end moves only onto points that hold.
    klo, khi = key(lo), key(hi)
    while khi - klo > 1:
        if rtol > 0.0 and hi - lo <= rtol * abs(hi if above else lo):
            break
        kmid = klo + (khi - klo) // 2
        mid = value(kmid)
        if test(mid) == above:
            hi, khi = mid, kmid
        else:
            lo, klo = mid, kmid
    return hi if above else lo
