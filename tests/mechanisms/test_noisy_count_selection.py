"""Thresholding the released noisy count (NoisyCountSelection): the whole mechanism's exact
hockey-stick divergence on neighbouring histograms (a unit added to ``max_partitions`` keys,
one of them new) by an independent mpmath double sum, a companion showing that the check
catches a threshold one step too low, and validation.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import NoisyCountSelection
from dpkit.noise import RandomSource

DPS = 30
SPAN = 160  # noise values summed; the mass left out (below 1e-20 here) is added to the result


def _pmf(t: float) -> dict[int, mpmath.mpf]:
    q = mpmath.exp(-1 / mpmath.mpf(t))
    c = (1 - q) / (1 + q)
    return {z: c * q ** abs(z) for z in range(-SPAN, SPAN + 1)}


def _key_law(
    m: NoisyCountSelection, u: int, c: int, p1: dict[int, mpmath.mpf], p2: dict[int, mpmath.mpf]
) -> dict[object, mpmath.mpf]:
    """Law of one key's output: the published noisy count, or None (not released), by summing
    the two noises' pmfs (no closed form of the implementation is used)."""
    law: dict[object, mpmath.mpf] = {None: mpmath.mpf(0)}
    # upper[z] = P[Z1 >= z] over the summed range, from the pmf itself
    upper: dict[int, mpmath.mpf] = {SPAN + 1: mpmath.mpf(0)}
    for z in range(SPAN, -SPAN - 1, -1):
        upper[z] = upper[z + 1] + p1.get(z, 0)
    for z2, pz2 in p2.items():
        v = c + z2
        if m.units_scale is None:
            rel = pz2 if m.weight * v > m.tau else mpmath.mpf(0)
        else:  # released iff R (u + z1) > tau - w v, i.e. z1 >= floor((tau - w v) / R) - u + 1
            z1_min = (m.tau - m.weight * v) // m.max_rows - u + 1
            rel = pz2 * upper[min(max(z1_min, -SPAN), SPAN + 1)]
        law[v] = rel
        law[None] += pz2 - rel
    return law


def _left_out(m: NoisyCountSelection) -> mpmath.mpf:
    """Mass of the noise values not summed (both noises, both tails), added to each delta."""
    out = mpmath.mpf(0)
    for t in (m.count_scale, m.units_scale):
        if t is not None:
            q = mpmath.exp(-1 / mpmath.mpf(t))
            out += 2 * q ** (SPAN + 1) / (1 + q)
    return 4 * out


def _hockey(a: dict[object, mpmath.mpf], b: dict[object, mpmath.mpf], eps: float) -> mpmath.mpf:
    e = mpmath.exp(eps)
    return mpmath.fsum(max(mpmath.mpf(0), a.get(o, 0) - e * b.get(o, 0)) for o in set(a) | set(b))


def exact_delta(m: NoisyCountSelection, shared: tuple[int, int], added_rows: int) -> mpmath.mpf:
    """Max of both directions' hockey-stick divergence at m.epsilon (plus the mass left out)
    for D = {one shared key with (units, rows) = shared, the new key absent} and D' = D + one
    unit with ``added_rows`` rows in the shared key and ``max_rows`` in a new key, or in two
    new keys (max_partitions = 2)."""
    with mpmath.workdps(DPS):
        p1 = _pmf(m.units_scale) if m.units_scale is not None else {}
        p2 = _pmf(m.count_scale)
        u, c = shared
        before = _key_law(m, u, c, p1, p2)
        after = _key_law(m, u + 1, c + added_rows, p1, p2)
        new = _key_law(m, 1, m.max_rows, p1, p2)
        # outputs are pairs (shared key's output, new key's output); the new key is absent in D
        d_add = mpmath.fsum(
            max(
                mpmath.mpf(0),
                pa * pn - (mpmath.exp(m.epsilon) * before.get(o, 0) if n is None else 0),
            )
            for o, pa in after.items()
            for n, pn in new.items()
        )
        d_remove = _hockey(before, {o: pa * new[None] for o, pa in after.items()}, m.epsilon)
        # two new keys: D never shows them, D' shows at least one with this probability
        d_two_new = 1 - new[None] ** 2
        return max(d_add, d_remove, d_two_new) + _left_out(m)


CASES = [
    dict(max_rows=3, units_share=0.0),
    dict(max_rows=3, units_share=0.4, weight=2),
]


@pytest.mark.slow
@pytest.mark.parametrize("kw", CASES)
def test_exact_delta_on_neighbouring_histograms_within_stated(kw: dict[str, float]) -> None:
    m = NoisyCountSelection.from_epsilon_delta(epsilon=2.0, delta=1e-3, max_partitions=2, **kw)
    worst = max(exact_delta(m, shared, rows) for shared in [(1, 1), (4, 11)] for rows in (1, 3))
    assert worst <= m.delta
    assert worst <= m.threshold_delta
    assert worst >= m.threshold_delta / 4  # the threshold is not far above what is needed


@pytest.mark.parametrize("kw", CASES)
def test_companion_check_catches_a_threshold_one_step_low(kw: dict[str, float]) -> None:
    m = NoisyCountSelection.from_epsilon_delta(epsilon=2.0, delta=1e-3, max_partitions=2, **kw)
    low = object.__new__(NoisyCountSelection)
    for f in ("epsilon", "delta", "count_scale", "units_scale", "max_rows", "weight"):
        object.__setattr__(low, f, getattr(m, f))
    object.__setattr__(low, "max_partitions", 2)
    object.__setattr__(low, "neighbouring", m.neighbouring)
    object.__setattr__(low, "tau", m.tau - 1)
    assert exact_delta(low, (2, 5), 3) - 2 * _left_out(m) > m.delta
    with pytest.raises(PrivacyParameterError, match="gives delta"):
        NoisyCountSelection(
            epsilon=m.epsilon,
            delta=m.delta,
            tau=m.tau - 1,
            count_scale=m.count_scale,
            units_scale=m.units_scale,
            max_rows=m.max_rows,
            weight=m.weight,
            max_partitions=2,
        )


def test_count_only_threshold_closed_form() -> None:
    """Without units, delta_thr = k q^(tau - R + 1) / (1 + q) (discrete Laplace tail)."""
    m = NoisyCountSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, max_rows=5)
    q = math.exp(-1 / m.count_scale)
    tail = q ** (m.tau - 5 + 1) / (1 + q)
    assert tail <= m.threshold_delta <= tail * (1 + 1e-6)
    assert q ** (m.tau - 5) / (1 + q) > 1e-6 * (1 - 2**-40)  # tau is the smallest that fits


def test_noise_scales_too_small_refused() -> None:
    with pytest.raises(PrivacyParameterError, match="epsilon"):
        NoisyCountSelection(epsilon=1.0, delta=1e-6, tau=100, count_scale=4.0, max_rows=5)


@pytest.mark.parametrize("bad", [math.nan, -1.0, 0.0, math.inf, "1"])
def test_privacy_parameters_validated(bad: object) -> None:
    with pytest.raises(PrivacyParameterError):
        NoisyCountSelection.from_epsilon_delta(epsilon=bad, delta=1e-6)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        NoisyCountSelection.from_epsilon_delta(epsilon=1.0, delta=bad)  # type: ignore[arg-type]


def test_units_required_when_thresholded_and_mask_is_the_rule() -> None:
    m = NoisyCountSelection.from_epsilon_delta(
        epsilon=1.0, delta=1e-6, max_rows=5, units_share=0.3, weight=2
    )
    with pytest.raises(PrivacyParameterError, match="units"):
        m.release_with_counts(np.array([10]))
    src = RandomSource(seed=3, insecure=True)
    mask, noisy = m.release_with_counts(
        np.array([0, 5000, 10**6]), np.array([0, 3000, 600_000]), source=src
    )
    assert mask.tolist() == [False, True, True]
    assert abs(int(noisy[2]) - 10**6) < 1000
