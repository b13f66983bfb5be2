"""Batch samplers for the schemes of :mod:`dpkit.accounting.batching`, drawn from a secure source.

:class:`BatchSampler` is a plain iterable of index lists (one per step) with ``len``: pass it as
``torch.utils.data.DataLoader(dataset, batch_sampler=sampler)``, or iterate it in JAX or any
loop. Its :attr:`BatchSampler.scheme` is the :class:`~dpkit.accounting.batching.BatchScheme` it
implements, so that accountants built from it account for exactly what is trained
(:meth:`BatchSampler.check_scheme` refuses a different one).

Laws (``n`` records, batch size ``b``, ``q = b / n`` rounded up to a double ``q_acc``):

* ``poisson``: each index independently with probability ``q_s = floor(q_acc 2^53) / 2^53 <=
  q_acc`` (dpkit's Bernoulli draws ``P(True) = ceil(p 2^53) / 2^53``, so ``p = q_s`` gives
  exactly ``q_s``: never more than the accounted rate).
* ``truncated_poisson``: Poisson, then a batch above ``max_batch_size`` is replaced by a uniformly
  random subset of that size.
* ``fixed_size``: ``b`` distinct indices uniformly at random, independently at each step.
* ``shuffle``: each epoch a uniformly random permutation cut into ``n // b`` batches of ``b``.
* ``cyclic``: the indices in order, ``n // b`` batches of ``b`` per epoch.
* ``balls_in_bins``: each epoch every index goes to one of the ``n // b`` batches independently
  and uniformly at random (a 64-bit word ``w`` below ``T floor(2^64 / T)`` gives bin
  ``w mod T``; larger words are redrawn, so the bin is exactly uniform); batch ``j`` of the
  epoch holds the indices in bin ``j``, possibly none.
* ``user_poisson``: each person independently with probability ``q_s``, then up to
  ``examples_per_user`` of that person's examples, uniformly without replacement.

Permutations and subsets come from sorting independent uniform 64-bit keys (ties, which have
probability below ``n^2 / 2^65``, are redrawn), so they are exactly uniform.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import check_integer, check_positive
from dpkit.accounting.batching import BatchScheme
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource, bernoulli, resolve_source

__all__ = ["BatchSampler"]

IntArray = npt.NDArray[np.int64]


def _sampler_rate(q: float) -> float:
    """The Bernoulli parameter whose realised probability is at most ``q`` (module docstring)."""
    return math.floor(q * 2.0**53) / 2.0**53


def _random_order(source: RandomSource, n: int) -> IntArray:
    """A uniformly random permutation of ``range(n)`` (sorted 64-bit keys, ties redrawn)."""
    while True:
        keys = source.words(n)
        order = np.argsort(keys, kind="stable")
        s = keys[order]
        if n < 2 or not bool(np.any(s[1:] == s[:-1])):
            return np.asarray(order, dtype=np.int64)


def _uniform_bins(source: RandomSource, n: int, t: int) -> IntArray:
    """``n`` independent bins, each exactly uniform on ``range(t)`` (rejection, module doc)."""
    cut = np.uint64((2**64 // t) * t - 1)  # the largest accepted word
    out = source.words(n)
    bad = out > cut
    while bool(np.any(bad)):
        out[bad] = source.words(int(np.count_nonzero(bad)))
        bad = out > cut
    return np.asarray(out % np.uint64(t), dtype=np.int64)


class BatchSampler:
    """Index batches of ``scheme`` for ``steps`` steps (or ``epochs`` epochs).

    ``source``: a dpkit :class:`~dpkit.noise.RandomSource` (secure by default; a seeded source
    needs ``insecure=True`` and is for tests only). ``user_ids``: for ``user_poisson``, the
    person of each example (its length is the number of examples; ``scheme.dataset_size``
    must be the number of distinct people).
    """

    def __init__(
        self,
        scheme: BatchScheme,
        *,
        steps: int | None = None,
        epochs: float | None = None,
        source: RandomSource | None = None,
        user_ids: Sequence[Any] | None = None,
    ) -> None:
        if not isinstance(scheme, BatchScheme):
            raise PrivacyParameterError(f"scheme must be a BatchScheme, got {scheme!r}")
        self.scheme = scheme
        if (steps is None) == (epochs is None):
            raise PrivacyParameterError("give exactly one of steps and epochs")
        self.steps = (
            scheme.steps(check_positive(epochs, "epochs"))
            if epochs is not None
            else check_integer(steps, name="steps", minimum=0)
        )
        self._source = resolve_source(source)
        self._groups: list[IntArray] | None = None
        if scheme.name == "user_poisson":
            if user_ids is None:
                raise PrivacyParameterError("scheme 'user_poisson' needs user_ids")
            ids = list(user_ids)
            people: dict[Any, list[int]] = {}
            for i, u in enumerate(ids):
                people.setdefault(u, []).append(i)
            if len(people) != scheme.dataset_size:
                raise PrivacyParameterError(
                    f"user_ids name {len(people)} people but the scheme counts "
                    f"{scheme.dataset_size}; set dataset_size to the number of people"
                )
            self._groups = [np.asarray(v, dtype=np.int64) for v in people.values()]
        elif user_ids is not None:
            raise PrivacyParameterError("user_ids are for scheme 'user_poisson' only")

    def __len__(self) -> int:
        return self.steps

    def check_scheme(self, scheme: BatchScheme) -> None:
        """Refuse (``PrivacyParameterError``) an accountant's scheme that differs from this one."""
        if scheme != self.scheme:
            raise PrivacyParameterError(
                f"the sampler draws batches by {self.scheme} but the accountant assumes "
                f"{scheme}; build the accountant from the sampler (same scheme) instead"
            )

    # ---------------------------------------------------------------- draws
    def _poisson(self, n: int) -> IntArray:
        keep = bernoulli(self._source, p=_sampler_rate(self.scheme.sampling_rate), size=n)
        return np.flatnonzero(keep).astype(np.int64)

    def _subset(self, pool: IntArray, k: int) -> IntArray:
        if k >= pool.size:
            return pool
        return np.sort(pool[_random_order(self._source, pool.size)[:k]])

    def __iter__(self) -> Iterator[list[int]]:
        sch = self.scheme
        n, b = sch.dataset_size, sch.batch_size
        per_epoch = sch.steps_per_epoch
        order: IntArray | None = None
        bins: list[IntArray] = []
        for step in range(self.steps):
            if sch.name in ("poisson", "truncated_poisson"):
                batch = self._poisson(n)
                if sch.max_batch_size is not None and batch.size > sch.max_batch_size:
                    batch = self._subset(batch, sch.max_batch_size)
            elif sch.name == "fixed_size":
                batch = np.sort(_random_order(self._source, n)[:b])
            elif sch.name == "balls_in_bins":
                j = step % per_epoch
                if j == 0 or not bins:
                    where = _uniform_bins(self._source, n, per_epoch)
                    sorted_idx = np.argsort(where, kind="stable").astype(np.int64)
                    cuts = np.searchsorted(where[sorted_idx], np.arange(1, per_epoch))
                    bins = list(np.split(sorted_idx, cuts))
                batch = bins[j]
            elif sch.name in ("shuffle", "cyclic"):
                j = step % per_epoch
                if j == 0 or order is None:
                    order = (
                        _random_order(self._source, n)
                        if sch.name == "shuffle"
                        else np.arange(n, dtype=np.int64)
                    )
                batch = order[j * b : (j + 1) * b]
            else:
                assert self._groups is not None and sch.examples_per_user is not None
                chosen = self._poisson(n)
                parts = [self._subset(self._groups[int(u)], sch.examples_per_user) for u in chosen]
                batch = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
            yield [int(i) for i in batch]
