"""Intervals of the complementary pair: certified, at their level, and not far above it.

Setting. Integer bounds ``lo < hi`` (steps); per group ``A = hi N - S`` and ``B = S - lo N``,
released as ``A' = A + Z_A`` and ``B' = B + Z_B`` with independent discrete Laplace noises of
one scale ``t``. The sum ``S' = (hi B' + lo A') / (hi - lo)`` has error ``(hi Z_B + lo Z_A) /
(hi - lo)`` (:func:`complement_sum_halfwidth`); the mean's interval is a Fieller set on the
pivot ``(hi - m) B' - (m - lo) A'`` (:func:`complement_mean_intervals`).

Certification. The sum's halfwidth is checked against the exact law of ``hi Z_B + lo Z_A``
(both pmfs convolved over ``|k| <= 40 t``, mass left out below ``1e-17``) at small scales, and
against an mpmath integral of the continuous pair bracketing the discrete one at a wide scale.

Coverage (statistical, ``ALPHA_TEST = 1e-6``). Each setting draws ``n = 200,000`` groups (the
discrete Laplace as ``floor(E_1) - floor(E_2)``, ``E_i`` exponential of mean ``t``: a law
written independently of the library's samplers). Too narrow: ``H0: coverage >= 1 - alpha``,
rejected when the hits fall below ``binom_low_critical(n, 0.95, 1e-6)`` (94.77%). Too wide:
``H0: coverage <= 1 - alpha + 0.02``, rejected above ``binom_high_critical(n, 0.97, 1e-6)``
(97.18%). Companions: the same tests reject intervals built with a pivot that ignores
``Z_A`` (the threshold of ``Z_B`` alone), with every threshold scaled by 0.8 (too narrow), and
by 1.5 (too wide). Power: at the companions' coverages (87.5-91.0% and 98.9-99.2% measured)
the binomial probability of passing either check is below ``1e-300`` (scipy); the companions
assert the hits directly.
"""

from __future__ import annotations

import math
from functools import cache

import mpmath
import numpy as np
import pytest
from _stats import binom_high_critical, binom_low_critical
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit.analytics._intervals as iv
from dpkit.analytics._intervals import (
    complement_mean_intervals,
    complement_sum_halfwidth,
    joint_halfwidth,
)
from dpkit.analytics._pricing import Noise

ALPHA_TEST = 1e-6
DRAWS = 200_000
LEVEL = 0.05


def _dl(rng: np.random.Generator, t: float, size: int) -> np.ndarray:
    """Discrete Laplace of scale ``t``: ``floor(E_1) - floor(E_2)``, ``E_i`` exponential of mean
    ``t`` (``floor(E)`` is geometric: ``P(floor(E) >= k) = e^(-k/t)``)."""
    return np.floor(rng.exponential(t, size)) - np.floor(rng.exponential(t, size))


# --- the sum's halfwidth ------------------------------------------------------------------------


@cache
def _exact_sum_tail(t: float, lo: int, hi: int) -> np.ndarray:
    """``tail[x] = P(|hi Z_B + lo Z_A| > x)`` for integers ``x >= 0``: the two pmfs convolved
    over ``|k| <= 40 t`` (the mass left out, ``2 e^(-40)``, is below ``1e-17``)."""
    m = math.ceil(40 * t)
    k = np.arange(-m, m + 1)
    p = math.tanh(0.5 / t) * np.exp(-np.abs(k) / t)
    w = np.abs(hi * k[:, None] + lo * k[None, :]).ravel()
    mass = np.bincount(w, weights=np.outer(p, p).ravel())
    return np.asarray(1.0 - np.cumsum(mass), dtype=np.float64)


def _exact_sum_quantile(t: float, lo: int, hi: int, alpha: float) -> float:
    """The smallest ``x / (hi - lo)`` (``x`` integer) with ``P(|hi Z_B + lo Z_A| > x) <= alpha``."""
    tail = _exact_sum_tail(t, lo, hi)
    return float(np.argmax(tail <= alpha)) / (hi - lo)


BOUNDS = [(-3, 5), (2, 9), (-7, -2), (-4, 4), (1, 2), (-20, 13)]


@pytest.mark.parametrize("t", [3.7, 40.0])
@pytest.mark.parametrize(("lo", "hi"), BOUNDS)
@pytest.mark.parametrize("alpha", [0.05, 0.01])
def test_sum_halfwidth_is_never_below_the_exact_quantile_and_within_a_percent(
    t: float, lo: int, hi: int, alpha: float
) -> None:
    h = complement_sum_halfwidth(Noise("discrete_laplace", t), lo, hi, alpha)
    exact = _exact_sum_quantile(t, lo, hi, alpha)
    assert exact <= h <= exact * 1.01


@pytest.mark.parametrize("t", [3.7, 40.0, 2.0**40])
@pytest.mark.parametrize(("lo", "hi"), [(0, 7), (-9, 0), (0, 2**40)])
def test_sum_halfwidth_with_a_zero_bound_is_the_lattice_halfwidth(
    t: float, lo: int, hi: int
) -> None:
    noise = Noise("discrete_laplace", t)
    assert complement_sum_halfwidth(noise, lo, hi, 0.05) == float(noise.halfwidth(0.05))


def _continuous_pair_tail(b1: float, b2: float, y: float) -> float:
    """``P(|L_1 + L_2| > y)`` for Laplace laws of scales ``b1``, ``b2`` (mpmath quadrature)."""
    mpmath.mp.dps = 30
    b1m, b2m, ym = mpmath.mpf(b1), mpmath.mpf(b2), mpmath.mpf(y)

    def integrand(s: mpmath.mpf) -> mpmath.mpf:  # density of L_2 times P(L_1 > y - s)
        x = ym - s
        s1 = mpmath.exp(-x / b1m) / 2 if x >= 0 else 1 - mpmath.exp(x / b1m) / 2
        return mpmath.exp(-abs(s) / b2m) / (2 * b2m) * s1

    edges = sorted({-60 * b2m, mpmath.mpf(0), ym, ym + 60 * b2m, 60 * b2m})
    return float(2 * mpmath.quad(integrand, edges))


@pytest.mark.parametrize(("lo", "hi"), [(-3, 5), (2**20, 2**21), (-(2**30), 2**30 - 7)])
def test_wide_sum_halfwidth_is_bracketed_by_the_continuous_pair(lo: int, hi: int) -> None:
    """``|hi X_B + lo X_A| - u - v <= |hi Z_B + lo Z_A| <= |hi X_B + lo X_A| + u + v`` (the
    floor coupling): the exact quantile lies between the continuous pair's quantiles at ``x
    -+ (u + v)``, a relative ``1e-10`` apart at ``t = 2^40``; the halfwidth must be at least
    the lower one and within a relative ``1e-4`` of it."""
    t = 2.0**40
    u, v = abs(hi), abs(lo)
    h = complement_sum_halfwidth(Noise("discrete_laplace", t), lo, hi, 0.05)
    x = h * (hi - lo)
    # at x - u - v the continuous pair's tail still holds the level (the bound certified) ...
    assert _continuous_pair_tail(u * t, v * t, x - u - v) <= 0.05 * (1 + 1e-8)
    # ... and a relative 1e-4 lower, even the lower bracket's tail exceeds it: not too wide
    assert _continuous_pair_tail(u * t, v * t, x * (1 - 1e-4) + u + v) > 0.05


# --- the mean's interval: statistical coverage ---------------------------------------------------

T_WIDE = 2.0**40
HALF = 2**30
SETTINGS = {
    # name: (t, lo, hi, N, S): mu = S / N
    "near_lo": (1000.0, 0, 1000, 50, 50 * 20),
    "middle": (1000.0, 0, 1000, 50, 50 * 500),
    "near_hi": (1000.0, 0, 1000, 50, 50 * 980),
    "small_n": (1000.0, 0, 1000, 5, 5 * 300),
    "tiny_scale": (3.7, -3, 5, 7, 2),
    "wide_near_lo": (T_WIDE, -HALF, HALF, 10_000, 10_000 * (2**24 - HALF)),
    "wide_middle": (T_WIDE, -HALF, HALF, 10_000, 3),
    "wide_near_hi": (T_WIDE, -HALF, HALF, 10_000, 10_000 * (HALF - 5)),
}


def _hits(name: str, seed: int) -> int:
    t, lo, hi, n, s = SETTINGS[name]
    rng = np.random.default_rng(seed)
    a = (hi * n - s) + _dl(rng, t, DRAWS)
    b = (s - lo * n) + _dl(rng, t, DRAWS)
    low, high, found = complement_mean_intervals(Noise("discrete_laplace", t), a, b, lo, hi, LEVEL)
    mu = s / n
    return int((found & (low <= mu) & (mu <= high)).sum())


def _c_lo() -> int:
    return int(binom_low_critical(DRAWS, 1.0 - LEVEL, ALPHA_TEST))


def _c_hi() -> int:
    return int(binom_high_critical(DRAWS, 1.0 - LEVEL + 0.02, ALPHA_TEST))


def test_critical_values_are_as_stated() -> None:
    assert 0.9475 < _c_lo() / DRAWS < 0.948
    assert 0.9715 < _c_hi() / DRAWS < 0.972


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_mean_interval_covers_at_its_level_and_not_far_above(name: str) -> None:
    hits = _hits(name, seed=sorted(SETTINGS).index(name) + 1)
    print(f"{name}: coverage {hits / DRAWS:.4f}")
    assert hits >= _c_lo(), f"too narrow: {hits / DRAWS:.4f}"
    assert hits <= _c_hi(), f"too wide: {hits / DRAWS:.4f}"


def _patched_cells(monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    real = iv.ratio_cells

    def cells(nt: Noise, nn: Noise, r_lo: float, r_hi: float, alpha: float):  # type: ignore[no-untyped-def]
        got = real(nt, nn, r_lo, r_hi, alpha)
        assert got is not None
        a, b, h = got
        if change == "ignore_z_a":  # the threshold of Z_B alone, as if A' were exact
            return a, b, np.full_like(h, float(nt.halfwidth(alpha)))
        factor = {"narrow": 0.8, "wide": 1.5}[change]
        return a, b, h * factor

    monkeypatch.setattr(iv, "ratio_cells", cells)


@pytest.mark.parametrize(
    ("change", "name"),
    [
        ("ignore_z_a", "middle"),
        ("ignore_z_a", "wide_middle"),
        ("narrow", "near_lo"),
        ("narrow", "wide_middle"),
        ("wide", "middle"),
        ("wide", "wide_near_hi"),
    ],
)
def test_broken_intervals_are_caught(
    change: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _patched_cells(monkeypatch, change)
    hits = _hits(name, seed=100 + sorted(SETTINGS).index(name))
    print(f"{change} {name}: coverage {hits / DRAWS:.4f}")
    if change == "wide":
        assert hits > _c_hi()
    else:
        assert hits < _c_lo()


# --- the mean's interval: invariants ------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(
    lo=st.integers(-(10**6), 10**6),
    span=st.integers(1, 10**6),
    t=st.floats(0.5, 1e5),
    alpha=st.floats(1e-4, 0.5),
    ab=st.lists(
        st.tuples(st.integers(-(10**7), 10**7), st.integers(-(10**7), 10**7)),
        min_size=1,
        max_size=30,
    ),
)
def test_mean_interval_within_bounds_and_holds_the_plug_in_estimate(
    lo: int, span: int, t: float, alpha: float, ab: list[tuple[int, int]]
) -> None:
    hi = lo + span
    a = np.array([x for x, _ in ab], dtype=np.float64)
    b = np.array([y for _, y in ab], dtype=np.float64)
    low, high, found = complement_mean_intervals(Noise("discrete_laplace", t), a, b, lo, hi, alpha)
    assert np.all(np.isnan(low[~found])) and np.all(np.isnan(high[~found]))
    assert np.all((lo <= low[found]) & (low[found] <= high[found]) & (high[found] <= hi))
    plug = (a >= 0) & (b >= 0) & (a + b > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = lo + span * (b / (a + b))
    assert np.all(found[plug])
    assert np.all((low[plug] <= est[plug]) & (est[plug] <= high[plug]))


def test_mean_interval_of_exact_pairs_shrinks_to_the_mean() -> None:
    """Noise-free pairs of a large group: the interval holds the mean and is narrow."""
    t, lo, hi, n = 10.0, -50, 150, 10**6
    mus = np.array([-50.0, -49.5, 0.0, 50.0, 149.0, 150.0])
    s = mus * n
    low, high, found = complement_mean_intervals(
        Noise("discrete_laplace", t), hi * n - s, s - lo * n, lo, hi, 0.05
    )
    assert np.all(found)
    assert np.all((low <= mus) & (mus <= high))
    assert np.all(high - low < 1e-3)


# --- the wide count noise of joint_halfwidth ------------------------------------------------------


def test_wide_laplace_count_runs_match_the_summed_pmf(monkeypatch: pytest.MonkeyPatch) -> None:
    """The closed-form runs are the grid and masses of the value-by-value sum (forced here)."""
    nn = Noise("discrete_laplace", 3000.0)
    summed = iv._support(nn, 0.05)
    monkeypatch.setattr(iv, "_MAX_TERMS", 11)
    closed = iv._support(nn, 0.05)
    assert summed is not None and closed is not None
    assert np.array_equal(summed[0], closed[0]) and np.array_equal(summed[1], closed[1])
    np.testing.assert_allclose(closed[2], summed[2], rtol=1e-12, atol=0.0)


@pytest.mark.parametrize("t", [1e5, 2.0**40, 2.0**52])
def test_wide_laplace_runs_cover_their_range_with_its_mass(t: float) -> None:
    nn = Noise("discrete_laplace", t)
    h = nn.halfwidth(0.05 * iv._TRUNC)
    assert 2 * h + 1 > iv._MAX_TERMS  # was None before the closed form
    sup = iv._support(nn, 0.05)
    assert sup is not None
    k_lo, k_hi, pk, rest = sup
    assert len(pk) <= iv._GROUPS
    assert k_lo[0] <= -h and k_hi[-1] >= h
    assert np.all(k_lo[1:] <= k_hi[:-1] + 1.0)  # no value left out between runs
    assert np.all(pk > 0.0)
    assert pk.sum() == pytest.approx(1.0 - rest, abs=1e-9)


def test_wide_laplace_count_halfwidth_is_a_value_never_below_a_monte_carlo_quantile() -> None:
    """``P(|Z_T + c Z_N| > H) <= alpha`` checked on 200,000 draws: the exceedances may not pass
    ``binom_high_critical(n, alpha, 1e-6)``; companion: ``0.9 H`` is exceeded too often."""
    nt, nn, c, alpha = Noise("discrete_laplace", 2e5), Noise("discrete_laplace", 1e5), 0.7, 0.05
    assert 2 * nn.halfwidth(alpha * iv._TRUNC) + 1 > iv._MAX_TERMS
    h = joint_halfwidth(nt, nn, -c, -c, alpha)
    assert h is not None
    rng = np.random.default_rng(7)
    err = np.abs(_dl(rng, nt.scale, DRAWS) + c * _dl(rng, nn.scale, DRAWS))
    limit = binom_high_critical(DRAWS, alpha, ALPHA_TEST)
    assert int((err > h).sum()) <= limit
    assert int((err > 0.9 * h).sum()) > limit


def test_bounds_and_level_are_checked() -> None:
    noise = Noise("discrete_laplace", 10.0)
    one = np.array([5.0])
    with pytest.raises(ValueError):
        complement_sum_halfwidth(noise, 3, 3, 0.05)
    with pytest.raises(ValueError):
        complement_mean_intervals(noise, one, one, 0, 10, 1.0)
    with pytest.raises(TypeError):
        complement_sum_halfwidth(noise, 0.5, 3, 0.05)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        complement_sum_halfwidth(noise, -(2**54), 3, 0.05)
    # numpy integers are integers
    h = complement_sum_halfwidth(noise, np.int64(-3), np.int64(5), 0.05)  # type: ignore[arg-type]
    assert h == complement_sum_halfwidth(noise, -3, 5, 0.05)
