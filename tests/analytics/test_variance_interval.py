"""A variance's interval holds its stated level: not below it, not far above.

Setting. One group of ``n = 2,000`` people with values in [0, 100] (a normal law clamped; one
configuration centred, one off-centre so the mean's noise matters), a variance priced at
epsilon 1 (pure: discrete Laplace; zCDP: discrete Gaussian at delta 1e-6), ``N_REL``
independent releases of its three noisy integers drawn with the release's own samplers, and
the release's interval (:func:`dpkit.analytics._release._variance_pivot`) for each. The true
value is the population variance of the clamped doubles (the bounded statistic).

Tests (each at alpha <= 1e-6). Too narrow: ``H0: coverage >= 0.95``, reject when ``X < c_lo``
with ``P(Binomial(N_REL, 0.95) < c_lo) <= 1e-6``. Too wide: ``H0: coverage <= 0.965`` (the
level plus the envelope's cells, the mean's share of alpha and the lattice margin, measured
95.6-96.0% in these configurations with 128 cells of the mean's range, 96.3-96.7% with 32),
reject when ``X > c_hi`` with ``P(Binomial(N_REL, 0.965) > c_hi) <= 1e-6`` (``c_hi`` is
97.6%).
Companions: the same tests reject (a) the union bound the release used before (each noise at
``1 - alpha/3``, extremes over the box; coverage 98.8-100% here) as too wide and (b) the pivot
at twice alpha as too narrow.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _stats import binom_high_critical, binom_low_critical
from scipy import integrate, stats

import dpkit.analytics as dpa
from dpkit.analytics._intervals import laplace_sum_survival
from dpkit.analytics._pricing import _price_stat_at, price
from dpkit.analytics._release import _variance_pivot, variance_box
from dpkit.noise import RandomSource

ALPHA_TEST = 1e-6
N_REL = 6_000
WIDE_H0 = 0.965


def c_lo() -> int:
    return binom_low_critical(N_REL, 0.95, ALPHA_TEST)


def c_hi() -> int:
    return binom_high_critical(N_REL, WIDE_H0, ALPHA_TEST)


def test_critical_values_and_power() -> None:
    assert stats.binom.cdf(c_lo() - 1, N_REL, 0.95) <= ALPHA_TEST
    assert stats.binom.sf(c_hi(), N_REL, WIDE_H0) <= ALPHA_TEST
    # power against the companions' coverages (98.8% and about 90%)
    assert stats.binom.cdf(c_hi(), N_REL, 0.988) < 1e-6
    assert stats.binom.sf(c_lo() - 1, N_REL, 0.91) < 1e-12


@pytest.mark.parametrize(
    ("b1", "b2", "x"),
    [(1.0, 2.0, 0.5), (1.0, 2.0, 7.0), (3.0, 3.0, 2.0), (3.0, 3.0001, 9.0), (2.0, 0.5, -1.0)],
)
def test_laplace_sum_survival_matches_the_convolution(b1: float, b2: float, x: float) -> None:
    """Closed form against numerical integration of ``f_1(y) P(L_2 > x - y)`` (scipy)."""

    def f(y: float) -> float:
        return float(stats.laplace.pdf(y, scale=b1) * stats.laplace.sf(x - y, scale=b2))

    num = integrate.quad(f, -80.0, 80.0, points=[0.0, x], limit=400)[0]
    got = float(laplace_sum_survival(b1, np.array([b2]), np.array([x]))[0])
    assert got == pytest.approx(num, rel=1e-6) or (abs(b1 - b2) < 1e-3 and got >= num)


def _release(mode: str, loc: float, seed: int) -> tuple[object, ...]:
    pr = price(
        {"v": dpa.variance("x", bounds=(0.0, 100.0))},
        mode=mode,  # type: ignore[arg-type]
        epsilon=1.0,
        delta=0.0 if mode == "pure" else 1e-6,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    sp = pr.stats[0]
    if mode == "pure":  # a pure variance alone takes the complementary pair
        # (tests/analytics/test_variance_pair.py): the three measures priced directly
        assert sp.complement is not None
        sp = _price_stat_at("v", sp.stat, "pure", sp.epsilon, 1, 1, None, piloting=False)
    mn, ms, mq = sp.measures
    rng = np.random.default_rng(seed)
    n = 2000
    x = np.clip(rng.normal(loc, 12.0, n), 0.0, 100.0)
    k, k2 = ms.measure.frac_bits, mq.measure.frac_bits
    m = mq.measure.center
    t = sum(math.floor(v * 2**k) for v in x) - ms.center * n
    q = sum(math.floor(((v - m) ** 2) * 2**k2) for v in x)
    src = RandomSource(seed=seed, insecure=True)
    zt, zq, zn = (np.array(mp.noise.sample(N_REL, src), dtype=object) for mp in (ms, mq, mn))
    # the release noises Q' = Q - kq N and rebuilds Q = Q' + kq N: Q's noise is Z_Q' + kq Z_N
    tt, qq, nn = [list(t + zt), list(q + zq + mq.center * zn), list(n + zn)]
    return sp, mn, ms, mq, tt, qq, nn, float(np.var(x))


# (accounting, centre of the values): measured 96.0% and 95.6% at N_REL
CONFIGS = [("pure", 25.0), ("zcdp", 50.0)]


def _pivot_hits(mode: str, loc: float, alpha: float) -> int:
    sp, mn, ms, mq, tt, qq, nn, v = _release(mode, loc, 11 if loc == 50.0 else 12)
    out = _variance_pivot(sp.stat, mn, ms, mq, nn, tt, qq, alpha)  # type: ignore[attr-defined]
    assert out is not None
    lo, hi, found = out
    return int(np.sum(found & (lo <= v) & (v <= hi)))


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "loc"), CONFIGS)
def test_variance_interval_covers_at_its_level(mode: str, loc: float) -> None:
    hits = _pivot_hits(mode, loc, 0.05)
    print(f"variance {mode} loc {loc}: coverage {hits / N_REL:.4f}")
    assert c_lo() <= hits <= c_hi(), hits / N_REL


@pytest.mark.slow
@pytest.mark.parametrize(("mode", "loc"), CONFIGS[:1])
def test_pivot_at_twice_alpha_is_caught_as_too_narrow(mode: str, loc: float) -> None:
    assert _pivot_hits(mode, loc, 0.10) < c_lo()


@pytest.mark.parametrize(("mode", "loc"), CONFIGS)
def test_union_bound_is_caught_as_too_wide(mode: str, loc: float) -> None:
    """The former interval: each of N, T, Q at ``1 - alpha/3``, extremes over the box."""
    _, mn, ms, mq, tt, qq, nn, v = _release(mode, loc, 11 if loc == 50.0 else 12)
    hn, ht, hq = (mp.noise.halfwidth(0.05 / 3) for mp in (mn, ms, mq))  # type: ignore[attr-defined]
    hw = (hn, ht, hq + mq.center * hn)  # type: ignore[attr-defined]
    steps = (ms.step, mq.step)  # type: ignore[attr-defined]
    shift = ms.center * steps[0] - mq.measure.center  # type: ignore[attr-defined]
    hits = 0
    for g in range(N_REL):
        lo, hi = variance_box(nn[g], tt[g], qq[g], hw, steps, shift, 2500.0)  # type: ignore[arg-type]
        hits += lo <= v <= hi
    assert hits > c_hi(), hits / N_REL


def test_intervals_by_mean_range_equal_the_intervals_over_every_cell_at_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """:func:`variance_intervals` visits the envelope one mean range at a time and only for the
    groups whose mean interval meets it; the answer is the one computed over every cell (on 32
    mean ranges, for speed: the visit does not depend on their number)."""
    from dpkit.analytics import _intervals
    from dpkit.analytics._intervals import _variance_block, variance_cells, variance_intervals
    from dpkit.analytics._pricing import Noise

    monkeypatch.setattr(_intervals, "VAR_MEAN_CELLS", 32)
    variance_cells.cache_clear()  # its cache does not key on the number of cells
    try:
        rng = np.random.default_rng(7)
        for scale in (20.0, 200.0):
            nt, nq, nn = (Noise("discrete_laplace", scale * f) for f in (1.0, 2.0, 0.5))
            cells = variance_cells(nt, nq, nn, 0.01, 0.001, 5.0, (0.0, 25.0), 0.0, 0.05)
            assert cells is not None
            g = 2_000
            n = rng.integers(-5, 400, g).astype(float)
            t, q = rng.normal(0.0, 300.0, g), np.abs(rng.normal(5e4, 3e4, g))
            mu_lo = rng.uniform(-6.0, 5.0, g)
            mu_hi = mu_lo + rng.exponential(1.0, g)
            mu_lo[::50] = mu_hi[::50] = np.nan
            got = variance_intervals(t, q, n, mu_lo, mu_hi, cells, 0.01, 0.001, 0.0)
            lo, hi, ok = _variance_block(t, q, n, mu_lo, mu_hi, cells, 0.01, 0.001, 0.0)
            assert np.array_equal(got[2], ok)
            assert np.array_equal(got[0], np.where(ok, lo, np.nan), equal_nan=True)
            assert np.array_equal(got[1], np.where(ok, hi, np.nan), equal_nan=True)
            assert 0.5 < ok.mean() < 1.0  # both kinds of group are in the check
    finally:
        variance_cells.cache_clear()


@pytest.mark.parametrize(
    ("kind", "scale"), [("discrete_laplace", 12.0), ("discrete_gaussian", 30.0)]
)
def test_pair_halfwidths_are_certified_and_within_the_tolerance_of_the_smallest(
    kind: str, scale: float
) -> None:
    """The regula falsi of ``_pair_halfwidths``: the bound at the returned ``H`` is at most
    alpha and the bound a relative ``2^-13`` lower is above it (the bound decreases in ``H``),
    recomputed here from the module's survival function and the law of ``Z_N``."""
    from dpkit.analytics._intervals import _pair_halfwidths, _pair_survival, _support
    from dpkit.analytics._pricing import Noise

    rng = np.random.default_rng(3)
    nn, r, b1 = Noise(kind, scale), 200, 6e4  # type: ignore[arg-type]
    b2 = rng.uniform(0.0, 5e4, r)
    ka = rng.uniform(-3e3, 3e3, r)
    kb = ka + rng.uniform(0.0, 500.0, r)
    margin = rng.uniform(0.0, 1e3, r)
    pair = "discrete_laplace" if kind == "discrete_laplace" else "discrete_gaussian"
    k = np.repeat(np.arange(-400.0, 401.0)[None, :], r, axis=0)
    slack = 1.0 + (1e-4 if kind == "discrete_gaussian" else 0.0)

    def bound(hh: np.ndarray, pk: np.ndarray, rest: float) -> np.ndarray:
        hi_k = np.minimum(ka[:, None] * k, kb[:, None] * k) + hh[:, None] - margin[:, None]
        lo_k = np.maximum(ka[:, None] * k, kb[:, None] * k) - hh[:, None] + margin[:, None]
        bb = np.broadcast_to(b2[:, None], k.shape)
        out = _pair_survival(pair, b1, bb, hi_k) + _pair_survival(pair, b1, bb, -lo_k)
        out = np.where(lo_k > hi_k, 1.0, np.minimum(out * slack, 1.0))
        return np.asarray((out @ pk + rest) * (1.0 + 1e-9) + 1e-12)

    for alpha in (0.049, 1e-3):
        h = _pair_halfwidths(pair, b1, b2, margin, nn, ka, kb, alpha)
        sup = _support(nn, alpha)
        assert h is not None and sup is not None
        assert float(sup[0][0]) >= -400.0 and np.array_equal(sup[0], sup[1])
        pk = np.zeros(801)
        pk[(sup[0] + 400).astype(int)] = sup[2]  # one run per value here (scale small)
        assert bool((bound(h, pk, sup[3]) <= alpha).all())
        assert bool((bound(h * (1.0 - 2.0**-13), pk, sup[3]) > alpha).all())
