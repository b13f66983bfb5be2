"""The threshold on an already-noised count (CountThreshold): its delta is never understated
(an independent mpmath sum of the discrete Laplace and Gaussian pmfs), tau is the smallest
threshold that fits, the rounded-up tails are tight, and the parameters are validated.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms.partition_selection import CountThreshold, _dg_tail_up, _dl_tail_up

DPS = 40


def _dl_tail_exact(t: float, j: int) -> mpmath.mpf:
    """P[Z >= j], discrete Laplace of scale t, by summing the pmf ``(1 - q) / (1 + q) q^|z|``
    term by term over ``j <= z < j + M`` (independent of the code's closed form); the terms
    left out are below ``1e-35`` of the sum (``q^M < 1e-35``)."""
    with mpmath.workdps(DPS):
        q = mpmath.exp(-1 / mpmath.mpf(t))
        c = (1 - q) / (1 + q)
        M = math.ceil(t * 35 * math.log(10)) + 2
        return mpmath.fsum(c * q ** abs(z) for z in range(j, j + M))


def _dg_tail_exact(sigma: float, j: int) -> mpmath.mpf:
    """P[Z >= j], discrete Gaussian with parameter sigma, summed term by term with the
    normaliser also summed (no Poisson summation, no integral bound)."""
    with mpmath.workdps(DPS):
        s2 = 2 * mpmath.mpf(sigma) ** 2

        def f(z: mpmath.mpf) -> mpmath.mpf:
            return mpmath.exp(-(z**2) / s2)

        span = int(60 * sigma) + 60
        norm = 1 + 2 * mpmath.fsum(f(z) for z in range(1, span))
        num = mpmath.fsum(f(z) for z in range(max(j, -span), span))
        return num / norm


CASES = [
    ("discrete_laplace", 3.0, 3, 1, 1e-6, False),
    ("discrete_laplace", 3.0000001, 3, 1, 1e-6, True),
    ("discrete_laplace", 17.5, 5, 4, 1e-9, True),
    ("discrete_gaussian", 14.0, 3, 1, 5e-7, False),
    ("discrete_gaussian", 2.5, 1, 3, 1e-6, False),
    ("discrete_gaussian", 0.7, 2, 1, 1e-3, True),
]


@pytest.mark.parametrize(("kind", "scale", "c", "p", "delta", "fast"), CASES)
def test_threshold_delta_at_tau_is_at_most_delta_by_an_independent_sum(
    kind: str, scale: float, c: int, p: int, delta: float, fast: bool
) -> None:
    thr = CountThreshold.calibrate(
        kind=kind, scale=scale, max_value=c, max_partitions=p, delta=delta, fast=fast
    )
    exact = _dl_tail_exact if kind == "discrete_laplace" else _dg_tail_exact
    with mpmath.workdps(DPS):
        # a group of the added unit has at most c rows: released with P[c + Z > tau]
        at_tau = p * exact(scale, thr.tau - c + 1)
        below = p * exact(scale, thr.tau - c)
        assert at_tau <= mpmath.mpf(thr.threshold_delta)
        assert thr.threshold_delta <= delta
        # tau is the smallest that fits: one step lower the true delta exceeds the target
        # (the rounded-up tails are within 1e-20 relative of the exact ones, checked below)
        assert below > mpmath.mpf(delta) / (1 + mpmath.mpf(10) ** -6)


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.3, 14.0, 150.0, 256.0])
@pytest.mark.parametrize("sds", [0.5, 1.0, 2.0, 5.0])
def test_discrete_gaussian_tail_bound_is_above_and_tight(sigma: float, sds: float) -> None:
    j = max(1, math.ceil(sds * sigma))
    exact = _dg_tail_exact(sigma, j)
    up = _dg_tail_up(sigma, j)
    with mpmath.workdps(DPS):
        assert mpmath.mpf(up.numerator) / up.denominator >= exact
        assert mpmath.mpf(up.numerator) / up.denominator <= exact * (1 + mpmath.mpf(10) ** -20)


@pytest.mark.parametrize("t", [0.3, 1.0, 3.0, 40.0])
@pytest.mark.parametrize("j", [-2, 0, 1, 7, 60])
def test_discrete_laplace_tail_bound_is_above_and_tight(t: float, j: int) -> None:
    exact = _dl_tail_exact(t, j) if j >= 1 else mpmath.mpf(1)
    up = _dl_tail_up(t, j)
    with mpmath.workdps(DPS):
        val = mpmath.mpf(up.numerator) / up.denominator
        assert exact * (1 - mpmath.mpf(10) ** -30) <= val <= exact * (1 + mpmath.mpf(10) ** -20)


def test_a_threshold_one_step_low_would_break_the_delta() -> None:
    """Companion: the check above catches a tau set one too low (its true delta exceeds the
    target)."""
    thr = CountThreshold.calibrate(
        kind="discrete_laplace", scale=3.0, max_value=3, max_partitions=1, delta=1e-6
    )
    low = CountThreshold(
        kind="discrete_laplace", scale=3.0, max_value=3, max_partitions=1, tau=thr.tau - 1
    )
    assert low.threshold_delta > 1e-6
    assert _dl_tail_exact(3.0, low.tau - 3 + 1) > 1e-6


def test_release_is_strictly_above_tau() -> None:
    thr = CountThreshold.calibrate(
        kind="discrete_laplace", scale=2.0, max_value=1, max_partitions=1, delta=1e-3
    )
    assert thr.release([thr.tau - 1, thr.tau, thr.tau + 1, 10**30]).tolist() == [
        False,
        False,
        True,
        True,
    ]


@pytest.mark.parametrize(
    "kw",
    [
        {"delta": 0.0},
        {"delta": float("nan")},
        {"delta": 1.5},
        {"scale": -1.0},
        {"scale": float("nan")},
        {"max_value": 0},
        {"max_partitions": 0},
        {"kind": "laplace"},
    ],
)
def test_bad_parameters_are_refused(kw: dict[str, object]) -> None:
    args: dict[str, object] = {
        "kind": "discrete_laplace",
        "scale": 2.0,
        "max_value": 3,
        "max_partitions": 1,
        "delta": 1e-6,
    }
    args.update(kw)
    with pytest.raises(PrivacyParameterError):
        CountThreshold.calibrate(**args)  # type: ignore[arg-type]


def test_tails_are_rationals() -> None:
    assert isinstance(_dl_tail_up(2.0, 3), Fraction)
    assert isinstance(_dg_tail_up(2.0, 3), Fraction)


def test_discrete_gaussian_tail_above_256_is_above_and_close() -> None:
    """Beyond sigma = 256 the closed-form (midpoint-integral) bound: above the exact tail and
    within about ``(x^2 - 1) / (24 sigma^2)`` relative (6e-6 here) at ``x = 5`` sigmas."""
    sigma, j = 400.0, 2000
    exact = _dg_tail_exact(sigma, j)
    up = _dg_tail_up(sigma, j)
    with mpmath.workdps(DPS):
        val = mpmath.mpf(up.numerator) / up.denominator
        assert exact <= val <= exact * (1 + mpmath.mpf(10) ** -5)


@pytest.mark.parametrize(
    ("scale", "c", "p", "fast"), [(3.0, 3, 1, True), (20.0, 5, 3, True), (9000.0, 2, 2, False)]
)
def test_laplace_threshold_delta_equals_the_noisy_count_selections(
    scale: float, c: int, p: int, fast: bool
) -> None:
    """With discrete Laplace noise the threshold is NoisyCountSelection without the units
    count (whose whole-mechanism hockey-stick divergence is checked exactly in
    test_noisy_count_selection.py): same tau and scale, same delta (both ``k`` times the tail
    at ``tau - c + 1`` times the slack bound ``1 + 2a + 4a^2``)."""
    from dpkit.mechanisms import NoisyCountSelection

    thr = CountThreshold.calibrate(
        kind="discrete_laplace", scale=scale, max_value=c, max_partitions=p, delta=1e-6, fast=fast
    )
    eps = 2.0 * p * c / scale
    ncs = NoisyCountSelection(
        epsilon=eps, delta=1e-6, tau=thr.tau, count_scale=scale, max_rows=c, max_partitions=p
    )
    assert fast == (scale < 2.0**13)  # the fast sampler below 2^13, as in the analytics noise
    assert ncs.threshold_delta == pytest.approx(thr.threshold_delta, rel=1e-15)
