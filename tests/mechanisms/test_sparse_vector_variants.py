"""Lyu, Su and Li (2017)'s sparse-vector variants that are not private, flagged by the auditor.

Algorithms 5 (no query noise) and 6 (no cut-off) are audited in test_sparse_vector.py and the
known-bad corpus; these are Algorithm 3 (the value of a positive answer released as
``q_i + nu_i``, reusing the comparison noise) and Algorithm 4 (query noise that does not grow
with the cut-off c). Each claims epsilon = 1; audits run at confidence 1 - 1e-6, so a correct
mechanism would be reported violated with probability at most 1e-6. Sample sizes come from a
simulation of the exposing event (frequencies in the comments), sized so the lower bound
clears the claim by a wide margin; sources are seeded.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit.audit import Claim, HistogramTester, ThresholdTester, audit
from dpkit.noise import RandomSource
from dpkit.noise.samplers import laplace

ALPHA = 1e-6
_NONE = 1e6  # the output "no positive answer at the last query" of the Algorithm 3 feature


def _src(seed: str) -> RandomSource:
    return RandomSource(seed=f"svt-variants-{seed}", insecure=True)


class _ReusedNoise:
    """Lyu et al., Algorithm 3 with c = 1, epsilon = 1: rho ~ Lap(2), nu_i ~ Lap(2) (eps1 =
    eps2 = 1/2), threshold 0; the first positive answer releases ``q_i + nu_i``.

    Feature: the released value when the first positive is the last query, else a sentinel.
    The value pins ``rho <= v``, so the m negative answers before it each cost a factor
    ``e^(1/2)`` (left tail of the Laplace CDF) that the threshold noise no longer absorbs."""

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        assert source is not None
        q = np.asarray(x, dtype=np.float64)
        rho = laplace(source, scale=2.0, size=size)
        noisy = q[None, :] + laplace(source, scale=2.0, size=(size, q.size))
        pos = noisy >= rho[:, None]
        first = np.where(pos.any(1), pos.argmax(1), q.size)
        return np.where(first == q.size - 1, noisy[:, -1], _NONE)


class _NoiseNotGrowingWithC:
    """Lyu et al., Algorithm 4, epsilon = 1: rho ~ Lap(4) (eps1 = 1/4), nu_i ~ Lap(4/3)
    whatever c (eps2 = 3/4), threshold 0, stop after c positives; it is ``(1 + 6c)/4``-DP.

    Output: the answer pattern coded in base 3 (0 negative, 1 positive, 2 not asked)."""

    def __init__(self, c: int) -> None:
        self.c = c

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        assert source is not None
        q = np.asarray(x, dtype=np.float64)
        rho = laplace(source, scale=4.0, size=size)
        pos = q[None, :] + laplace(source, scale=4.0 / 3.0, size=(size, q.size)) >= rho[:, None]
        before = np.cumsum(pos, 1) - pos  # positives before each query
        pattern = np.where(before < self.c, pos.astype(np.int64), 2)
        return np.asarray((pattern * 3 ** np.arange(q.size)).sum(1), dtype=np.int64)


def test_auditor_catches_reused_comparison_noise() -> None:
    # m = 6 negatives moving up by 1 and a last query of 0: P(value <= 2) is about 3.6e-3
    # against 4.4e-4 on the neighbour (ln ratio 2.1 against the claimed 1), so 10**6 draws
    # per side (about 3,600 and 440 hits) bound epsilon above 1 at confidence 1 - 1e-6.
    m = 6
    pair = ((0.0,) * m + (0.0,), (1.0,) * m + (0.0,))
    result = audit(
        _ReusedNoise(),
        pair,
        samples=1_000_000,
        claim=Claim.pure(epsilon=1.0),
        testers=(ThresholdTester(),),
        confidence=1 - ALPHA,
        source=_src("alg3"),
    )
    assert result.violated, result.summary()


def test_auditor_catches_query_noise_not_growing_with_c() -> None:
    # c = 4 positives after m = 4 negatives, negatives moving up and positives down by 1: the
    # pattern "4 negatives then 4 positives" has frequency about 5.2e-3 against 5.4e-5 (ln
    # ratio 4.6, the proof's bound (1 + 6c)/4 = 6.25); 400,000 draws per side suffice.
    c = 4
    pair = ((0.0,) * c + (1.0,) * c, (1.0,) * c + (0.0,) * c)
    result = audit(
        _NoiseNotGrowingWithC(c),
        pair,
        samples=400_000,
        claim=Claim.pure(epsilon=1.0),
        testers=(HistogramTester(),),
        confidence=1 - ALPHA,
        source=_src("alg4"),
    )
    assert result.violated, result.summary()
    assert result.epsilon_lower_bound > 2.0
