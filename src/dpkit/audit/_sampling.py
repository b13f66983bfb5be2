"""Turn any mechanism into a batch sampler ``draw(input, size, source) -> array of outputs``.

Accepted, in this order:

1. an object with ``sample(input, size, *, source)`` (the known-bad corpus, user auditors);
2. an object with ``randomize_many(values, *, source)`` (a :mod:`dpkit.ldp` client);
3. an object with ``release_many(x, *, count, source)`` returning ``count`` independent releases
   on the input x (:class:`~dpkit.mechanisms.ExponentialMechanism`, ``ReportNoisyMax``);
4. an object with ``release(values, *, source)`` that maps an array of inputs to an array of
   outputs of the same length (additive-noise mechanisms, randomized response);
5. a plain callable: ``f(input, size)`` returning ``size`` outputs when ``vectorized=True``,
   otherwise ``f(input)`` returning one output, called ``size`` times.

Each batch of ``size`` outputs is ``size`` independent runs of the mechanism on one input.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from dpkit.noise import RandomSource

__all__ = ["Draw", "as_draw", "repeat_input"]

Draw = Callable[[Any, int, RandomSource], Any]


def repeat_input(x: Any, size: int) -> Any:
    """``size`` copies of the input ``x`` stacked along a new first axis."""
    arr = np.asarray(x)
    if arr.dtype == object and arr.ndim == 0:
        out = np.empty(size, dtype=object)
        out[:] = [x] * size
        return out
    return np.repeat(arr[None, ...], size, axis=0)


def _accepts_source(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "source" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def as_draw(mechanism: Any, *, vectorized: bool = False) -> Draw:
    """Return the batch sampler of ``mechanism`` (see the module docstring)."""
    sample = getattr(mechanism, "sample", None)
    if callable(sample):
        return lambda x, n, source: sample(x, n, source=source)
    many = getattr(mechanism, "randomize_many", None)
    if callable(many):
        if _accepts_source(many):
            return lambda x, n, source: many(repeat_input(x, n), source=source)
        return lambda x, n, source: many(repeat_input(x, n))
    release_many = getattr(mechanism, "release_many", None)
    if callable(release_many):
        return lambda x, n, source: release_many(x, count=n, source=source)
    release = getattr(mechanism, "release", None)
    if callable(release):
        if _accepts_source(release):
            return lambda x, n, source: release(repeat_input(x, n), source=source)
        return lambda x, n, source: release(repeat_input(x, n))
    if not callable(mechanism):
        raise TypeError(
            f"cannot audit {type(mechanism).__name__}: need sample/randomize_many/release or a "
            "callable"
        )
    if vectorized:
        return lambda x, n, source: mechanism(x, n)

    def draw(x: Any, n: int, source: RandomSource) -> Any:
        outs = [mechanism(x) for _ in range(n)]
        first = np.asarray(outs[0]) if outs else np.zeros(0)
        if first.dtype.kind in "biufSU" or first.ndim > 0:
            return np.asarray(outs)
        arr = np.empty(n, dtype=object)
        arr[:] = outs
        return arr

    return draw
