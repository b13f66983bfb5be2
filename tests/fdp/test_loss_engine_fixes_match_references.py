"""Companion checks of the loss-engine fixes (the attacks: test_loss_engine_never_below_exact.py).

Each test pins one property of a fix against an independent reference (mpmath, the full
k-outcome pmfs, the closed form) so that it fails if the fix regresses.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterator

import mpmath as mp
import numpy as np
import pytest

from dpkit import fdp
from dpkit._loss.grid import PROFILE_ABS_ERR, Factor, compose_factors
from dpkit._loss.pairs import discrete_laplace_pair
from dpkit.accounting.pld import PldAccountant
from dpkit.divergence import LaplacePair, RandomizedResponsePair
from dpkit.divergence import _discrete as dd
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    PoissonSampledEvent,
)


@pytest.fixture(autouse=True)
def _fifty_digits() -> Iterator[None]:
    with mp.workdps(50):
        yield


def _full_rr(p: float, k: int) -> tuple[np.ndarray, np.ndarray]:
    r = (1.0 - p) / (k - 1)
    pp, qq = np.full(k, r), np.full(k, r)
    pp[0], qq[1] = p, p
    return pp, qq


@pytest.mark.parametrize("k", [2, 3, 7, 50])
def test_randomized_response_merged_outcomes_match_full_pmfs(k: int) -> None:
    # merging outcomes of equal likelihood ratio leaves every divergence unchanged
    pair = RandomizedResponsePair(p_truth=0.6, categories=k)
    pp, qq = _full_rr(0.6, k)
    assert pair.kl() == pytest.approx(dd.kl_divergence(p=pp, q=qq), rel=1e-13)
    assert pair.hockey_stick(epsilon=0.3) == pytest.approx(
        dd.hockey_stick_divergence(p=pp, q=qq, epsilon=0.3), rel=1e-13, abs=1e-16
    )
    assert pair.statistical_distance() == pytest.approx(
        dd.statistical_distance(p=pp, q=qq), rel=1e-13
    )
    for a in (0.5, 2.0, 10.0):
        assert pair.renyi(alpha=a) == pytest.approx(
            dd.renyi_divergence(p=pp, q=qq, alpha=a), rel=1e-12
        )


@pytest.mark.parametrize("a", [0.3, 0.9, 1 - 1e-9, 1 + 1e-12, 1.5, 3.0, 40.0])
def test_discrete_renyi_not_below_mpmath_and_tight(a: float) -> None:
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.3, 0.5])
    al = mp.mpf(a)
    s = sum(mp.mpf(x) ** al * mp.mpf(y) ** (1 - al) for x, y in zip(p, q, strict=True))
    truth = mp.log(s) / (al - 1)
    v = dd.renyi_divergence(p=p, q=q, alpha=a)
    assert v >= truth
    assert v <= truth * (1 + 1e-9)


@pytest.mark.parametrize(
    ("mu", "a"), [(0.5, 0.2), (0.5, 0.7), (2.0, 1.3), (2.0, 7.0), (30.0, 0.45), (1e-6, 1 + 1e-14)]
)
def test_laplace_renyi_not_below_mpmath_and_tight(mu: float, a: float) -> None:
    m, al = mp.mpf(mu), mp.mpf(a)
    truth = mp.log(
        al / (2 * al - 1) * mp.exp((al - 1) * m) + (al - 1) / (2 * al - 1) * mp.exp(-al * m)
    ) / (al - 1)
    v = LaplacePair(mu=mu).renyi(alpha=a)
    assert v >= truth
    assert v <= truth * (1 + 1e-6)


def test_discrete_gaussian_too_large_is_a_clear_error() -> None:
    with pytest.raises(PrivacyParameterError, match="support points"):
        PldAccountant().compose(DiscreteGaussianEvent(sigma=1e9, sensitivity=1)).get_epsilon(1e-6)


def test_discrete_laplace_huge_sensitivity_pure_dp_bound() -> None:
    # DLap(t = 10) at sensitivity 10^7: pure DP with epsilon = Delta / t = 10^6; the middle
    # atoms are tail-bounded (a few thousand listed), the rest moved up to the top loss
    pair = discrete_laplace_pair(10.0, 10**7)
    assert len(pair.losses) < 10_000
    assert pair.losses[-1] == 1e6
    assert math.fsum(pair.masses) == pytest.approx(1.0, abs=1e-12)
    acc = PldAccountant().compose(DiscreteLaplaceEvent(scale=10.0, sensitivity=10**7))
    assert acc.get_epsilon(0.0) >= 1e6
    # the mass moved up is the exact remainder (no surplus even when r = e^(-1/t) rounds to 1)
    assert math.fsum(discrete_laplace_pair(1e300, 10**12).masses) <= 1.0 + 1e-12
    # the full law (small sensitivity) against the listed one: identical atoms
    small = discrete_laplace_pair(2.0, 50)
    assert len(small.losses) == 51


def test_tail_allowance_is_added_per_factor() -> None:
    # the subsampled grid upper profile carries k * PROFILE_ABS_ERR at least
    ev = PoissonSampledEvent(sampling_rate=0.5, event=GaussianEvent(noise_multiplier=1e12))
    acc = PldAccountant()
    acc.compose(ev, 10)
    assert acc.get_delta(0.0) >= 10 * PROFILE_ABS_ERR
    # and nothing is reported as exactly 0 for the unbounded Gaussian loss, far out too
    assert acc.get_delta(50.0) > 0.0


def test_bounded_loss_still_proves_zero() -> None:
    # the accountant's exact zero above the largest finite loss survives the allowance
    acc = PldAccountant().compose(DiscreteLaplaceEvent(scale=2.0, sensitivity=1), 4)
    assert acc.get_delta(2.0 + 1e-9) == 0.0
    assert acc.get_epsilon(0.0) == pytest.approx(2.0, rel=1e-9)


def test_tail_sums_emit_no_invalid_warning() -> None:
    # the composed grid has empty top entries: the log tail sums start at -inf without inf - inf
    pair = discrete_laplace_pair(1.0, 3)
    fac = Factor(pair, pair)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        comp, _, h = compose_factors({fac: 3}, "connect_dots", 0.01, both=False)
        _, log_q = comp._tail_sums()
        alphas, betas = comp.tradeoff_knots()
    assert not np.isnan(log_q).any()
    assert not np.isnan(alphas).any() and not np.isnan(betas).any()
    assert np.all(betas >= 0.0)
    assert h == 0.01


@pytest.mark.parametrize("step", [900.0, 1000.0, 1001.0, 1e300])
def test_coarse_steps_give_valid_bounds_without_overflow(step: float) -> None:
    curve = fdp.tensor(fdp.laplace(mu=1.0), fdp.gdp(1.0), loss_step=step)
    # a valid profile is at least the Laplace factor's own (1 - e^{-1/4} at eps = 1/2)
    assert curve.delta(0.5) >= -math.expm1(-0.25)
