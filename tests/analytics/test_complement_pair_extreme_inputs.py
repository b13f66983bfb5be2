"""The complementary pair (a pure mean with a sum of its column, ``A = hi N - S`` and ``B = S -
lo N``) at extreme inputs: on neighbouring tables its exact values move within the calibrated
sensitivity for adversarial values at, beyond and just inside the bounds (``nextafter``),
subnormals, signed zeros, NaN, NULL and infinities, with negative, positive or zero lower
bounds and epsilon from 1e-9 to 1e9; and extreme public parameters are priced or refused with
a dpkit error before any charge.

Finding (no privacy loss, a wrong error before the charge): bounds below about ``1e-154``
(e.g. ``(1e-300, 1e-299)``) or a weight of ``1e-300`` on the sum or the mean raised a builtin
``ZeroDivisionError`` from pricing (``h * h``, ``big * big`` and ``share * share``
underflowed to 0 in ``complement_dominates``, ``pool_errors`` and ``_unit_variance``). After:
the comparison reads the bounds in units of a power of two (exact, the choice unchanged at
every other scale), the ratios are taken before squaring, and these queries are released or
refused with ``PrivacyParameterError``, nothing charged on a refusal. Reproduce: the first
two tests below."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _proof import adversary_rows, base_table, pair_usage

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._intervals import complement_mean_intervals, complement_sum_halfwidth
from dpkit.analytics._pricing import Noise, complement_dominates, pool_errors
from dpkit.analytics.session import MIN_ALPHA
from dpkit.errors import PrivacyParameterError

TINY_BOUNDS = [(1e-300, 1e-299), (0.0, 4e-323), (5e-324, 1e-322), (-1e-200, 3e-200)]


@pytest.mark.parametrize("bounds", TINY_BOUNDS)
def test_tiny_bounds_are_priced_without_a_builtin_error(bounds: tuple[float, float]) -> None:
    lo, hi = bounds
    complement_dominates(lo, hi, 1.0, 1.0)
    own, total, count = pool_errors(True, "mean", lo, hi, 1.0, 1.0, 0.0)
    assert all(math.isfinite(v) for v in (own, total, count))
    d = pd.DataFrame({"uid": range(9), "x": [lo, hi, (lo + hi) / 2] * 3})
    s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=10.0))
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
    try:
        out = q.agg(t=dpa.sum("x", bounds=bounds), m=dpa.mean("x", bounds=bounds)).run(epsilon=1.0)
    except PrivacyParameterError:
        assert len(s.budget.ledger) == 0
        return
    assert len(s.budget.ledger) == 1
    assert (out["m_low"] <= out["m"]).all() and (out["m"] <= out["m_high"]).all()


@pytest.mark.parametrize(("w_s", "w_m"), [(1e-300, 1.0), (1.0, 1e-300), (1e300, 1e-300)])
def test_extreme_weights_release_or_are_refused_before_the_charge(w_s: float, w_m: float) -> None:
    d = pd.DataFrame({"uid": range(30), "g": [0, 1, 2] * 10, "x": np.linspace(0.0, 10.0, 30)})
    s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=100.0))
    q = s.query().group_by("g", keys=[0, 1, 2]).bound(max_partitions=1, max_rows_per_partition=1)
    q = q.agg(
        t=dpa.sum("x", bounds=(0.0, 10.0), weight=w_s),
        m=dpa.mean("x", bounds=(0.0, 10.0), weight=w_m),
    )
    try:
        q.run(epsilon=1.0)
    except PrivacyParameterError:
        assert len(s.budget.ledger) == 0
        return
    assert len(s.budget.ledger) == 1


@pytest.mark.parametrize(
    ("lower", "upper"),
    [(0.0, 10.0), (0.0, 100.0), (-1.0, 100.0), (1.0, 1e6), (0.1, 0.7), (-1e3, 1e15)],
)
def test_the_comparison_does_not_depend_on_the_scale_of_the_bounds(
    lower: float, upper: float
) -> None:
    want = complement_dominates(lower, upper, 1.0, 1.0)
    for e in (-1000, -500, -60, 60, 500):
        assert complement_dominates(math.ldexp(lower, e), math.ldexp(upper, e), 1.0, 1.0) == want


def _edge_values(lo: float, hi: float) -> tuple[Any, ...]:
    return (
        lo,
        hi,
        math.nextafter(lo, -math.inf),
        math.nextafter(hi, math.inf),
        math.nextafter(lo, math.inf),
        math.nextafter(hi, -math.inf),
        float("nan"),
        None,
        math.inf,
        -math.inf,
        1e308,
        -1e308,
        -0.0,
        5e-324,
        -5e-324,
        (lo + hi) / 2,
    )


def _usage(bounds: tuple[float, float], values: tuple[Any, ...], eps: float) -> float:
    """The share of the pair's L1 sensitivity the adversary's unit (16 rows in each of 7
    groups, ``values`` cycled) uses, at (P, R) = (3, 4), on the exact engine results."""
    lo, hi = bounds
    d = base_table()
    d = d.assign(x=d["x"].clip(lo, hi))
    dp = pd.concat([d, adversary_rows(rows=16, values=values)], ignore_index=True)
    return pair_usage(d, dp, bounds, eps, seed=5)


@pytest.mark.parametrize(
    ("bounds", "eps"),
    [
        ((0.0, 10.0), 1e-9),
        ((0.0, 10.0), 1e9),
        ((-1.0, 100.0), 1.0),
        ((1.0, 1e6), 1e9),
        ((0.1, 0.7), 1.0),
        ((-0.0, 1.0), 1.0),
        ((1e-310, 1.0), 1e9),
        ((-1e3, 1e15), 1e9),
    ],
)
def test_edge_values_move_the_pair_within_its_sensitivity(
    bounds: tuple[float, float], eps: float
) -> None:
    lo, hi = bounds
    assert _usage(bounds, _edge_values(lo, hi), eps) <= 1.0
    # every kept row beyond a bound (clamped to it): the whole sensitivity, not more
    assert _usage(bounds, (math.nextafter(hi, math.inf),), eps) == 1.0
    assert _usage(bounds, (-1e308,), eps) == 1.0


@pytest.mark.parametrize("scale", [0.5, 3.0, 2.0**44, 8.9e15])
@pytest.mark.parametrize(
    ("lo", "hi"), [(0, 2), (-1, 1), (-3, 2**52), (2**51, 2**52), (-(2**52), -(2**51) + 1)]
)
@pytest.mark.parametrize("alpha", [MIN_ALPHA, 0.5])
def test_the_pair_s_intervals_are_read_at_any_noise_bounds_and_released_values(
    scale: float, lo: int, hi: int, alpha: float
) -> None:
    """What the release hands the interval code after the charge: noise scales up to the
    pricing's limit, integer bounds within 2^52, released ``A'`` and ``B'`` of any sign and
    size. Nothing raises; every non-empty interval is finite and within the bounds."""
    nz = Noise("discrete_laplace", scale)
    h = complement_sum_halfwidth(nz, lo, hi, alpha)
    assert math.isfinite(h) and h >= 0.0
    a = np.array([0.0, 1e17, -1e17, hi * 3.0, -5.0, 2.0**53 + 1, 1e300, -1e300])
    b = np.array([0.0, -1e17, 1e17, -lo * 3.0, 7.0, 2.0**53 + 3, -1e300, 1e300])
    low, high, found = complement_mean_intervals(nz, a, b, lo, hi, alpha)
    ok = found & np.isfinite(low) & np.isfinite(high) & (lo <= low) & (low <= high) & (high <= hi)
    assert (ok == found).all()
