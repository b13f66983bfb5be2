"""Turn any mechanism into a batch sampler ``draw(input, size, source) -> array of outputs``.

Accepted, in this order (each shape is a named protocol, checked with ``isinstance``):

1. a :class:`Sampler`: ``sample(input, size, *, source)`` (the known-bad corpus, user auditors);
2. a :class:`BatchRandomizer`: ``randomize_many(values, source=None)`` (a :mod:`dpkit.ldp`
   protocol);
3. a :class:`~dpkit.mechanisms.BatchMechanism`: ``release_many(x, *, count, source)`` returning
   ``count`` independent releases on the input x (:class:`~dpkit.mechanisms.ExponentialMechanism`,
   ``ReportNoisyMax``);
4. a :class:`~dpkit.mechanisms.Mechanism` (or any :class:`Releaser`, an object with only
   ``release``): ``release(values, *, source)`` maps an array of inputs to an array of outputs
   of the same length (additive-noise mechanisms, randomized response);
5. a plain callable: ``f(input, size)`` returning ``size`` outputs when ``vectorized=True``,
   otherwise ``f(input)`` returning one output, called ``size`` times.

Each batch of ``size`` outputs is ``size`` independent runs of the mechanism on one input.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dpkit.mechanisms import BatchMechanism, Mechanism
from dpkit.noise import RandomSource

__all__ = ["BatchRandomizer", "Draw", "Releaser", "Sampler", "as_draw", "repeat_input"]


@runtime_checkable
class Sampler(Protocol):
    """Draws ``size`` independent outputs of a mechanism on one input."""

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> Any: ...


@runtime_checkable
class BatchRandomizer(Protocol):
    """A local randomizer that randomizes many users' values at once (:mod:`dpkit.ldp`)."""

    def randomize_many(self, values: Any, /, *args: Any, **kwargs: Any) -> Any: ...


@runtime_checkable
class Releaser(Protocol):
    """The part of :class:`~dpkit.mechanisms.Mechanism` the auditor needs: ``release``."""

    def release(self, values: Any, /, *args: Any, **kwargs: Any) -> Any: ...


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
    if isinstance(mechanism, Sampler):
        sampler = mechanism
        return lambda x, n, source: sampler.sample(x, n, source=source)
    if isinstance(mechanism, BatchRandomizer):
        many = mechanism.randomize_many
        if _accepts_source(many):
            return lambda x, n, source: many(repeat_input(x, n), source=source)
        return lambda x, n, source: many(repeat_input(x, n))
    if isinstance(mechanism, BatchMechanism):
        batch = mechanism
        return lambda x, n, source: batch.release_many(x, count=n, source=source)
    if isinstance(mechanism, (Mechanism, Releaser)):
        release = mechanism.release
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
