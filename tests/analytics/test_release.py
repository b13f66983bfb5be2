"""Pricing and release: sensitivities, fixed point, interval half-widths, assembly."""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from scipy.stats import binom

import dpkit.analytics as dpa
from dpkit.analytics._plan import EngineResult
from dpkit.analytics._pricing import Noise, _frac_bits, pool_split, price
from dpkit.analytics._release import assemble
from dpkit.events import ApproxDpEvent, DiscreteLaplaceEvent, PureDpEvent
from dpkit.noise import RandomSource


@pytest.mark.parametrize("t", [0.3, 1.0, 2.5, 17.0, 400.0, 9000.0])
@pytest.mark.parametrize("alpha", [0.05, 0.01, 1e-6])
def test_laplace_halfwidth_is_the_exact_smallest(t: float, alpha: float) -> None:
    # P(|Z| > h) = 2 q^(h+1) / (1 + q) for P(k) ∝ q^|k|, q = e^(-1/t), evaluated in mpmath.
    h = Noise("discrete_laplace", t).halfwidth(alpha)
    mpmath.mp.dps = 40
    q = mpmath.exp(-1 / mpmath.mpf(t))

    def tail(k: int) -> mpmath.mpf:
        return 2 * q ** (k + 1) / (1 + q)

    assert tail(h) <= alpha
    assert h == 0 or tail(h - 1) > alpha * (1 - 1e-12)


@pytest.mark.parametrize("sigma", [0.4, 1.0, 3.7, 50.0, 999.0])
@pytest.mark.parametrize("alpha", [0.05, 1e-4])
def test_gaussian_halfwidth_is_the_exact_smallest(sigma: float, alpha: float) -> None:
    h = Noise("discrete_gaussian", sigma).halfwidth(alpha)
    mpmath.mp.dps = 40
    s2 = 2 * mpmath.mpf(sigma) ** 2
    m = int(40 * sigma) + 10  # the tail beyond 40 sigma is below e^-800
    w = [mpmath.exp(-(mpmath.mpf(k) ** 2) / s2) for k in range(m)]
    norm = w[0] + 2 * mpmath.fsum(w[1:])

    def tail(k: int) -> mpmath.mpf:
        return 2 * mpmath.fsum(w[k + 1 :]) / norm

    assert tail(h) <= alpha
    assert h == 0 or tail(h - 1) > alpha * (1 - 1e-6)


@pytest.mark.parametrize("sigma", [1000.0, 1e6, 2.0**40])
def test_gaussian_halfwidth_large_sigma_is_safe_and_tight(sigma: float) -> None:
    # Continuous reference: 1.959964 sigma at alpha = 0.05. The bound must not be below it by
    # more than a step and not above by more than 1e-3 relative.
    h = Noise("discrete_gaussian", sigma).halfwidth(0.05)
    ref = 1.959963984540054 * sigma
    assert ref - 1 <= h <= ref * (1 + 1e-3) + 2


def test_laplace_interval_coverage_and_companion() -> None:
    # 20,000 independent releases of one count; misses of a correct 95% interval are
    # Binomial(20000, p <= 0.05). Critical value: the 1 - 1e-6 quantile of Binomial(20000, 0.05)
    # (about 1149), so this fails with probability <= 1e-6 when the intervals are right.
    n = 20_000
    nz = Noise("discrete_laplace", 3.0)
    src = RandomSource(seed=21, insecure=True)
    z = np.array(nz.sample(n, src))
    h = nz.halfwidth(0.05)
    crit = binom.ppf(1 - 1e-6, n, 0.05)
    assert np.sum(np.abs(z) > h) <= crit
    # Companion: an interval half as wide misses with probability about 0.2, far above crit.
    assert np.sum(np.abs(z) > h // 2) > crit


def test_frac_bits_keep_rows_and_noise_in_range() -> None:
    for noise_real, maxabs in [
        (1.0, 1.0),
        (1e6, 5e5),
        (1e-9, 1e-3),
        (1e12, 2.0**50),
        (3.0, 2.0**50),
    ]:
        k = _frac_bits(noise_real, maxabs)
        assert k >= 0
        assert maxabs * 2.0**k < 2.0**62  # one row's integer fits a BIGINT
        assert noise_real * 2.0**k <= 2.0**52 or k == 0


def test_sensitivities_follow_bounding() -> None:
    stats = {
        "n": dpa.count(),
        "u": dpa.count_distinct(),
        "s": dpa.sum("x", bounds=(-2.0, 3.0)),
        "h": dpa.histogram("x", edges=[0, 1, 2]),
    }
    pr = price(
        stats,
        mode="pure",
        epsilon=4.0,
        delta=0.0,
        max_partitions=3,
        max_rows_per_partition=5,
        select_partitions=False,
    )
    by = {sp.name: sp.measures[0] for sp in pr.stats}
    assert by["n"].l1 == 15 and by["u"].l1 == 3 and by["h"].l1 == 15
    k = by["s"].measure.frac_bits
    assert by["s"].l1 == 15 * 3 * 2**k  # max(|floor(-2 2^k)|, |floor(3 2^k)|) = 3 2^k
    # each statistic gets epsilon 1; the event's epsilon (with slack) never exceeds it
    for sp in pr.stats:
        ev = sp.events[0]
        assert isinstance(ev, DiscreteLaplaceEvent)
        assert Fraction(ev.sensitivity) / Fraction(ev.scale) + 2 * Fraction(ev.pmf_slack) <= 1


def _spent(evs: tuple[object, ...]) -> tuple[Fraction, float]:
    """(epsilon, delta) of a basic composition of approx pairs, discrete Laplace events and
    pure envelopes (a piloted mean's main pair)."""
    eps, delta = Fraction(0), 0.0
    for e in evs:
        if isinstance(e, ApproxDpEvent):
            eps += Fraction(e.epsilon)
            delta += e.delta
        elif isinstance(e, PureDpEvent):
            eps += Fraction(e.epsilon)
        else:
            assert isinstance(e, DiscreteLaplaceEvent)
            eps += Fraction(e.sensitivity) / Fraction(e.scale) + 2 * Fraction(e.pmf_slack)
    return eps, delta


def test_budget_split_with_selection_and_gaussian_pair() -> None:
    # 100 partitions per unit: the Gaussian (L2 = L1 / 10) wins; selection takes half of delta
    # (a query without a count: selection is a separate measurement)
    pr = price(
        {"n": dpa.sum("x", bounds=(0.0, 1.0))},
        mode="approx",
        epsilon=1.0,
        delta=1e-6,
        max_partitions=100,
        max_rows_per_partition=1,
        select_partitions=True,
        selection_weight=1.0,
    )
    assert pr.selection_epsilon == 0.5 and pr.selection_delta == 5e-7
    assert pr.stats[0].measures[0].noise.kind == "discrete_gaussian"  # type: ignore[union-attr]
    evs = pr.events
    assert all(isinstance(e, ApproxDpEvent) for e in evs)
    eps, delta = _spent(evs)
    assert eps <= 1 and delta <= 1e-6


def test_approx_session_with_one_partition_uses_laplace_and_gives_selection_all_delta() -> None:
    stats = {
        "n": dpa.count(),
        "s": dpa.sum("x", bounds=(0.0, 100.0)),
        "m": dpa.mean("x", bounds=(0.0, 100.0)),
    }
    pr = price(
        stats,
        mode="approx",
        epsilon=1.0,
        delta=1e-6,
        max_partitions=1,
        max_rows_per_partition=5,
        select_partitions=True,
    )
    kinds = {mp.noise.kind for sp in pr.stats for mp in sp.measures if mp.noise is not None}
    kinds |= {sp.complement.noise.kind for sp in pr.stats if sp.complement is not None}
    assert kinds == {"discrete_laplace"}
    # the statistics spend no delta: the threshold on the count's noise may take all of it
    assert pr.selection_count == "n" and pr.selection_delta <= 1e-6
    eps, delta = _spent(pr.events)
    assert eps <= 1 and delta <= 1e-6
    # the count's noise is the pure session's at the same epsilon share (its weight and the
    # selection's, 2 of 4: the sum is released from the mean's measures)
    pure = price(
        {"n": dpa.count()},
        mode="pure",
        epsilon=0.5,
        delta=0.0,
        max_partitions=1,
        max_rows_per_partition=5,
        select_partitions=False,
    )
    assert pr.stats[0].measures[0].noise == pure.stats[0].measures[0].noise


@pytest.mark.parametrize("p", [1, 2, 5, 10, 20, 50, 200])
@pytest.mark.parametrize(("eps", "delta"), [(0.1, 1e-9), (1.0, 1e-6), (5.0, 1e-5), (0.5, 1e-3)])
def test_approx_noise_choice_has_the_smaller_variance(p: int, eps: float, delta: float) -> None:
    """The chosen noise's variance is at most the other's, both computed independently here.

    Laplace: exact variance ``2q / (1 - q)^2`` of the discrete Laplace at scale ``L1 / eps``;
    Gaussian: ``sigma^2 = L2^2 / (2 rho)``, rho the largest certifying (eps, delta) (an upper
    bound of the discrete Gaussian's variance). A 5% margin covers the leading-order rule
    (both variances are within a few percent of their continuous forms at these scales).
    """
    from dpkit.analytics._pricing import rho_for

    pr = price(
        {"n": dpa.count()},
        mode="approx",
        epsilon=eps,
        delta=delta,
        max_partitions=p,
        max_rows_per_partition=3,
        select_partitions=False,
    )
    l1, l2_sq = 3 * p, 9 * p
    t = l1 / eps
    q = math.exp(-1.0 / t)
    var_lap = 2 * q / (1 - q) ** 2
    var_gauss = l2_sq / (2 * rho_for(eps, delta))
    chosen = pr.stats[0].measures[0].noise
    assert chosen is not None
    if chosen.kind == "discrete_laplace":
        assert var_lap <= 1.05 * var_gauss
    else:
        assert var_gauss <= 1.05 * var_lap


def test_noise_choice_test_catches_a_wrong_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """Companion: always picking the Gaussian fails the variance comparison at P = 1."""
    from dpkit.analytics import _pricing

    monkeypatch.setattr(_pricing, "_laplace_stats", lambda *a, **k: set())
    with pytest.raises(AssertionError):
        test_approx_noise_choice_has_the_smaller_variance(1, 1.0, 1e-6)


def _mean_pricing() -> tuple[object, EngineResult]:
    stats = {"m": dpa.mean("x", bounds=(0.0, 10.0)), "v": dpa.variance("x", bounds=(0.0, 10.0))}
    pr = price(
        stats,
        mode="pure",
        epsilon=2000.0,
        delta=0.0,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    vals = [1.0, 2.0, 3.0, 9.0] * 250  # mean 3.75, variance 9.6875
    res: dict[str, tuple[object, ...]] = {}
    for sp in pr.stats:
        for mp in sp.measures:
            m = mp.measure
            if m.kind == "values":
                res[m.name] = (len(vals),)
            elif m.kind == "sum":
                res[m.name] = (sum(math.floor(x * 2**m.frac_bits) for x in vals),)
            else:
                res[m.name] = (sum(math.floor((x - m.center) ** 2 * 2**m.frac_bits) for x in vals),)
    return pr, EngineResult(keys=((),), values=res)


def test_mean_and_variance_post_processing() -> None:
    pr, res = _mean_pricing()
    src = RandomSource(seed=3, insecure=True)
    out = assemble(
        pr,
        res,
        group_by=(),
        public_keys=None,
        alpha=0.05,  # type: ignore[arg-type]
        source=src,
    )
    # epsilon 500 per measure: the noise is tiny; the estimates are the truth up to ~1e-2
    assert abs(out["m"].iloc[0] - 3.75) < 1e-2
    assert abs(out["v"].iloc[0] - 9.6875) < 5e-2
    assert out["m_low"].iloc[0] <= 3.75 <= out["m_high"].iloc[0]
    assert out["v_low"].iloc[0] <= 9.6875 <= out["v_high"].iloc[0]


def test_selection_never_releases_empty_or_single_unit_at_tiny_delta() -> None:
    pr = price(
        {"n": dpa.count()},
        mode="approx",
        epsilon=1.0,
        delta=1e-12,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=True,
    )
    res = EngineResult(keys=(("a",), ("b",)), values={"n:n": (1, 0), "__units": (1, 0)})
    src = RandomSource(seed=4, insecure=True)
    for _ in range(200):
        out = assemble(pr, res, group_by=("k",), public_keys=None, alpha=0.05, source=src)
        assert len(out) == 0


def _shared_query(eps: float, lower: float = -100.0) -> tuple[object, EngineResult, float]:
    # bounds (-100, 100): the count and centred sum; (0, 100): the complementary pair
    # (complement_dominates)
    stats = {
        "n": dpa.count(),
        "s": dpa.sum("x", bounds=(lower, 100.0)),
        "m": dpa.mean("x", bounds=(lower, 100.0)),
    }
    pr = price(
        stats,
        mode="pure",
        epsilon=eps,
        delta=0.0,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    vals = [3.0, 70.0, 99.5, 12.25] * 25
    res: dict[str, tuple[object, ...]] = {}
    for m in pr.measures:
        if m.kind in ("rows", "values"):
            res[m.name] = (len(vals),)
        else:
            res[m.name] = (sum(math.floor(x * 2**m.frac_bits) for x in vals),)
    return pr, EngineResult(keys=((),), values=res), math.fsum(vals)


def test_sum_shares_the_means_count_and_centred_sum() -> None:
    pr, res, true_sum = _shared_query(3.0)
    s_price = next(sp for sp in pr.stats if sp.name == "s")  # type: ignore[attr-defined]
    assert s_price.shared_with == "m" and s_price.events == ()
    names = [m.name for m in pr.measures]  # type: ignore[attr-defined]
    assert len(names) == len(set(names)) == 3  # rows, values, centred sum: nothing twice
    # the rows count, the mean's pilot (count and centred sum) and its main pair's envelope
    assert len(pr.events) == 4  # type: ignore[attr-defined]
    eps, _ = _spent(pr.events)  # type: ignore[attr-defined]
    assert eps <= 3
    # the mean's measures got the sum's share too: epsilon 2 for N and T together (less the
    # pilot's hundredth), split by pool_split (not in halves) at the middle
    m_price = next(sp for sp in pr.stats if sp.name == "m")  # type: ignore[attr-defined]
    main = m_price.pilot.main
    assert 2 * 0.99 * (1 - 1e-9) <= main <= 2 * 0.99
    f_n, f_t = pool_split(True, "mean", -100.0, 100.0, 1.0, 1.0, 0.0)
    for mp, f in zip(m_price.measures, (f_n, f_t), strict=True):
        lap = Fraction(mp.l1) / Fraction(mp.noise.scale)
        assert 0.99 * main * f < lap <= main * f
    assert f_t != f_n
    # at a huge epsilon the shared sum is the true sum up to the fixed-point floor
    pr, res, true_sum = _shared_query(1e6)
    out = assemble(
        pr,
        res,
        group_by=(),
        public_keys=None,
        alpha=0.05,  # type: ignore[arg-type]
        source=RandomSource(seed=8, insecure=True),
    )
    assert abs(out["s"].iloc[0] - true_sum) < 1e-3
    assert out["s_low"].iloc[0] <= true_sum <= out["s_high"].iloc[0] + 1e-6


def test_sum_is_not_shared_when_that_would_be_worse_for_it() -> None:
    base = {"m": dpa.mean("x", bounds=(0.0, 100.0))}
    pr = price(
        {**base, "s": dpa.sum("x", bounds=(0.0, 100.0), weight=10.0)},
        mode="pure",
        epsilon=1.0,
        delta=0.0,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    assert all(sp.shared_with is None for sp in pr.stats)
    pr = price(
        {**base, "s": dpa.sum("x", bounds=(0.0, 50.0))},
        mode="pure",  # other bounds
        epsilon=1.0,
        delta=0.0,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    assert all(sp.shared_with is None for sp in pr.stats)


# Coverage of the shared sum's 95% interval over repeated releases of one group.
_TRIALS = 1000
# Misses ~ Binomial(1000, p <= 0.05) under a correct interval: P(misses > crit) <= 1e-6.
_CRIT = int(binom.isf(1e-6, _TRIALS, 0.05))


def _shared_misses(shrink: float, lower: float) -> int:
    pr, res, true_sum = _shared_query(0.05, lower)
    src = RandomSource(seed=21, insecure=True)
    misses = 0
    for _ in range(_TRIALS // 100):
        outs = [
            assemble(
                pr,
                res,
                group_by=(),
                public_keys=None,
                alpha=0.05,  # type: ignore[arg-type]
                source=src,
            )
            for _ in range(100)
        ]
        for out in outs:
            e = out["s"].iloc[0]
            lo = e - (e - out["s_low"].iloc[0]) * shrink
            hi = e + (out["s_high"].iloc[0] - e) * shrink
            misses += not lo <= true_sum <= hi
    return misses


@pytest.mark.parametrize("lower", [-100.0, 0.0])
def test_shared_sum_interval_covers(lower: float) -> None:
    assert _shared_misses(1.0, lower) <= _CRIT


@pytest.mark.parametrize("lower", [-100.0, 0.0])
def test_shared_sum_coverage_test_catches_narrow_intervals(lower: float) -> None:
    # Intervals at a quarter of their width miss far more often than 5% (about 60% here).
    assert _shared_misses(0.25, lower) > _CRIT


@pytest.mark.parametrize("lower", [-100.0, 0.0])
def test_shared_measures_are_noised_once_per_release(
    monkeypatch: pytest.MonkeyPatch, lower: float
) -> None:
    """The sum reuses the mean's noisy draws (fresh draws would be a second, uncharged release)."""
    pr, res, _ = _shared_query(3.0, lower)
    calls: list[int] = []
    real = Noise.sample

    def counting(self: Noise, n: int, source: RandomSource) -> list[int]:
        calls.append(n)
        return real(self, n, source)

    monkeypatch.setattr(Noise, "sample", counting)
    out = assemble(
        pr,
        res,
        group_by=(),
        public_keys=None,
        alpha=0.05,  # type: ignore[arg-type]
        source=RandomSource(seed=2, insecure=True),
    )
    # rows count, the mean's pilot N and T, its N and T: once each; or the rows count and the
    # complementary pair (two values in one draw)
    assert calls == ([1, 1, 1, 1, 1] if lower < 0 else [1, 2])
    assert list(out.columns[:3]) == ["n", "n_low", "n_high"]
