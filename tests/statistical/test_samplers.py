"""Goodness of fit of every sampler in ``dpkit.noise`` at a stated false-positive rate.

Every test here has false-positive rate ``ALPHA = 1e-6`` (see ``_stats.py``):

* continuous samplers: one-sample KS against the CDF written in the sampler's docstring, with
  critical value ``scipy.stats.kstwo(n).isf(1e-6)`` (about ``2.69 / sqrt(n)``; e.g. 0.00425 for
  n = 400,000);
* discrete samplers: Pearson's chi-square against the exact pmf, tails merged until every bin
  expects >= 20 counts, critical value ``scipy.stats.chi2.isf(1e-6, df)`` (e.g. 66.6 for df = 20);
* Bernoulli samplers: the same chi-square with two bins (df = 1, critical value 23.9).

Each test has a validity companion: the same test, same n, applied to the same sampler run with
a 5% scale (parameter) error, must reject. n is chosen by the power calculation of ``_stats.py``
(KS: a distribution-free bound; chi-square: non-central chi-square) so that the companion
rejects with probability >= 1 - 1e-6, and each companion asserts that calculation.

The reference distributions are written here from the docstrings, independently of dpkit's code.
Sources are seeded (``insecure=True``) so every run sees the same draws.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
import pytest
from _stats import (
    BETA,
    bins_from_cdf,
    chi2_critical,
    chi2_power,
    chi2_rejects,
    chi2_statistic,
    clopper_pearson,
    ks_critical,
    ks_rejects,
    ks_sample_size,
    make_bins,
    quantile_edges,
    sup_distance,
)
from scipy import stats

from dpkit import noise
from dpkit.noise import RandomSource

SCALE_ERROR = 1.05

Cdf = Callable[[np.ndarray], np.ndarray]
Pmf = Callable[[np.ndarray], np.ndarray]


def src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


# ---------------------------------------------------------------------------------------------
# Continuous samplers: KS
# ---------------------------------------------------------------------------------------------
def laplace_cdf(b: float) -> Cdf:
    def cdf(x: np.ndarray) -> np.ndarray:
        z = np.asarray(x, dtype=np.float64) / b
        return np.where(z < 0, 0.5 * np.exp(np.minimum(z, 0.0)), 1.0 - 0.5 * np.exp(-np.abs(z)))

    return cdf


def normal_cdf(s: float) -> Cdf:
    return lambda x: stats.norm.cdf(np.asarray(x) / s)


def exponential_cdf(b: float) -> Cdf:
    return lambda x: -np.expm1(-np.maximum(np.asarray(x), 0.0) / b)


def gumbel_cdf(b: float) -> Cdf:
    return lambda x: np.exp(-np.exp(-np.asarray(x) / b))


# (name, sampler(source, scale, n), cdf factory, scale, grid for the sup distance)
CONTINUOUS: list[
    tuple[
        str,
        Callable[[RandomSource, float, int], np.ndarray],
        Callable[[float], Cdf],
        float,
        tuple[float, float],
    ]
] = [
    ("laplace", lambda s, b, n: noise.laplace(s, scale=b, size=n), laplace_cdf, 2.5, (-60, 60)),
    ("gaussian", lambda s, b, n: noise.gaussian(s, sigma=b, size=n), normal_cdf, 0.7, (-10, 10)),
    (
        "exponential",
        lambda s, b, n: noise.exponential(s, scale=b, size=n),
        exponential_cdf,
        3.0,
        (0, 100),
    ),
    ("gumbel", lambda s, b, n: noise.gumbel(s, scale=b, size=n), gumbel_cdf, 1.5, (-10, 60)),
]
# n = 400,000 for every continuous sampler: the largest n the power calculation asks for is
# Laplace's, sup|F_b - F_1.05b| = 0.00897 -> n >= (5.39 / 0.00897)^2 = 360,353.
N_CONTINUOUS = 400_000


@pytest.mark.parametrize(
    ("name", "draw", "cdf", "scale", "grid"), CONTINUOUS, ids=[c[0] for c in CONTINUOUS]
)
def test_continuous_sampler_fits(
    name: str,
    draw: Callable[..., np.ndarray],
    cdf: Callable[[float], Cdf],
    scale: float,
    grid: tuple[float, float],
) -> None:
    x = draw(src(101), scale, N_CONTINUOUS)
    assert x.shape == (N_CONTINUOUS,)
    assert np.all(np.isfinite(x))
    # critical value kstwo(400000).isf(1e-6) = 0.004245...
    assert not ks_rejects(x, cdf(scale)), name


@pytest.mark.parametrize(
    ("name", "draw", "cdf", "scale", "grid"), CONTINUOUS, ids=[c[0] for c in CONTINUOUS]
)
def test_continuous_validity_rejects_scale_error(
    name: str,
    draw: Callable[..., np.ndarray],
    cdf: Callable[[float], Cdf],
    scale: float,
    grid: tuple[float, float],
) -> None:
    d = sup_distance(cdf(scale), cdf(scale * SCALE_ERROR), *grid)
    # Power: the companion is detected with probability >= 1 - BETA once n >= (5.39 / d)^2.
    assert ks_sample_size(d) <= N_CONTINUOUS, (name, d, ks_sample_size(d))
    x = draw(src(102), scale * SCALE_ERROR, N_CONTINUOUS)
    assert ks_rejects(x, cdf(scale)), name


def test_ks_critical_value_is_what_the_comments_say() -> None:
    c = ks_critical(N_CONTINUOUS)
    assert 0.0042 < c < 0.0043
    # DKW-Massart: the exact critical value never exceeds sqrt(ln(2/alpha) / (2n)).
    assert c <= math.sqrt(math.log(2e6) / (2 * N_CONTINUOUS))


# ---------------------------------------------------------------------------------------------
# Discrete samplers: chi-square against the exact pmf with merged tails
# ---------------------------------------------------------------------------------------------
def pmf_discrete_laplace(t: float) -> Pmf:
    # Docstring: P(k) = tanh(1/(2t)) exp(-|k|/t).
    return lambda k: math.tanh(1.0 / (2.0 * t)) * np.exp(-np.abs(k) / t)


def pmf_discrete_gaussian(sigma: float) -> Pmf:
    # Docstring: P(k) = exp(-k^2/(2 sigma^2)) / sum_j exp(-j^2/(2 sigma^2)).
    j = np.arange(-int(40 * sigma) - 40, int(40 * sigma) + 41, dtype=np.float64)
    z = float(np.sum(np.exp(-(j * j) / (2 * sigma * sigma))))
    return lambda k: np.exp(-(np.asarray(k, dtype=np.float64) ** 2) / (2 * sigma * sigma)) / z


def pmf_laplace_lattice(t: float) -> Pmf:
    # Docstring: P(0) = 1 - exp(-1/(2t)), P(k) = sinh(1/(2t)) exp(-|k|/t) for k != 0.
    return lambda k: np.where(
        k == 0, -math.expm1(-1.0 / (2 * t)), math.sinh(1.0 / (2 * t)) * np.exp(-np.abs(k) / t)
    )


def pmf_gaussian_lattice(sigma: float) -> Pmf:
    # Docstring: P(k) = Phi((k + 1/2)/sigma) - Phi((k - 1/2)/sigma).
    return lambda k: stats.norm.cdf((k + 0.5) / sigma) - stats.norm.cdf((k - 0.5) / sigma)


def pmf_geometric(p: float) -> Pmf:
    # Docstring: P(k) = (1 - p)^k p on k >= 0.
    return lambda k: np.where(np.asarray(k) >= 0, (1 - p) ** np.maximum(k, 0) * p, 0.0)


# (name, sampler(source, param, n), pmf factory, param, wrong param, support lo, hi, n)
# n per row: the smallest of 50k/100k/200k for which chi2_power(...) >= 1 - 1e-6 (asserted below).
DISCRETE = [
    (
        "discrete_laplace",
        lambda s, t, n: noise.discrete_laplace(s, scale=t, size=n),
        pmf_discrete_laplace,
        3.0,
        3.0 * SCALE_ERROR,
        -250,
        250,
        100_000,
    ),
    (
        "discrete_laplace_large",
        lambda s, t, n: noise.discrete_laplace(s, scale=t, size=n),
        pmf_discrete_laplace,
        40.0,
        40.0 * SCALE_ERROR,
        -2500,
        2500,
        200_000,
    ),
    (
        "discrete_gaussian",
        lambda s, g, n: noise.discrete_gaussian(s, sigma=g, size=n),
        pmf_discrete_gaussian,
        3.0,
        3.0 * SCALE_ERROR,
        -80,
        80,
        50_000,
    ),
    (
        "discrete_gaussian_small",
        lambda s, g, n: noise.discrete_gaussian(s, sigma=g, size=n),
        pmf_discrete_gaussian,
        0.6,
        0.6 * SCALE_ERROR,
        -30,
        30,
        100_000,
    ),
    (
        "laplace_lattice_noise",
        lambda s, t, n: noise.laplace_lattice_noise(s, t=t, size=n),
        pmf_laplace_lattice,
        3.0,
        3.0 * SCALE_ERROR,
        -250,
        250,
        100_000,
    ),
    (
        "gaussian_lattice_noise",
        lambda s, g, n: noise.gaussian_lattice_noise(s, sigma=g, size=n),
        pmf_gaussian_lattice,
        3.0,
        3.0 * SCALE_ERROR,
        -80,
        80,
        50_000,
    ),
    # For the geometric the "scale error" is a 5% error in p.
    (
        "geometric",
        lambda s, p, n: noise.geometric(s, p=p, size=n),
        pmf_geometric,
        0.3,
        0.3 * SCALE_ERROR,
        0,
        400,
        50_000,
    ),
]


@pytest.mark.parametrize(
    ("name", "draw", "pmf", "param", "wrong", "lo", "hi", "n"),
    DISCRETE,
    ids=[d[0] for d in DISCRETE],
)
def test_discrete_sampler_fits(
    name: str,
    draw: Callable[..., np.ndarray],
    pmf: Callable[[float], Pmf],
    param: float,
    wrong: float,
    lo: int,
    hi: int,
    n: int,
) -> None:
    bins = make_bins(pmf(param), lo, hi, n)
    x = draw(src(201), param, n)
    assert x.dtype == np.int64 and x.shape == (n,)
    # critical value chi2.isf(1e-6, bins.df), e.g. 66.6 at df = 20
    stat = chi2_statistic(bins.counts(x), bins.p0)
    assert stat <= chi2_critical(bins.df), (name, stat, bins.df)


@pytest.mark.parametrize(
    ("name", "draw", "pmf", "param", "wrong", "lo", "hi", "n"),
    DISCRETE,
    ids=[d[0] for d in DISCRETE],
)
def test_discrete_validity_rejects_scale_error(
    name: str,
    draw: Callable[..., np.ndarray],
    pmf: Callable[[float], Pmf],
    param: float,
    wrong: float,
    lo: int,
    hi: int,
    n: int,
) -> None:
    bins = make_bins(pmf(param), lo, hi, n)
    power = chi2_power(n, bins.p0, bins.probabilities(pmf(wrong), lo, hi))
    assert power >= 1 - BETA, (name, power)
    x = draw(src(202), wrong, n)
    assert chi2_rejects(x, bins), name


# Lattice noise with a large scale (Laplace: the two-level path for t >= 2**13): the support is
# too wide for one bin per integer, so bins are cut at 40 quantiles of t X and their exact
# probabilities are P(Z <= k) = F((k + 1/2) / t). n = 200,000 (power asserted below).
LARGE_LATTICE = [
    ("laplace_lattice_t=2^13", noise.laplace_lattice_noise, "t", stats.laplace, 2.0**13),
    ("laplace_lattice_t=1e6+0.5", noise.laplace_lattice_noise, "t", stats.laplace, 1e6 + 0.5),
    ("laplace_lattice_t=2^32.5", noise.laplace_lattice_noise, "t", stats.laplace, 2.0**32.5),
    ("gaussian_lattice_sigma=1e5", noise.gaussian_lattice_noise, "sigma", stats.norm, 1e5),
]


@pytest.mark.parametrize(
    ("name", "sampler", "kw", "dist", "t"), LARGE_LATTICE, ids=[c[0] for c in LARGE_LATTICE]
)
def test_large_lattice_noise_fits_and_validity(
    name: str, sampler: Callable[..., np.ndarray], kw: str, dist: stats.rv_continuous, t: float
) -> None:
    n = 200_000
    edges = quantile_edges(lambda q: t * dist.ppf(q), 40)
    bins = bins_from_cdf(edges, lambda k: dist.cdf((k + 0.5) / t))
    alt = bins_from_cdf(edges, lambda k: dist.cdf((k + 0.5) / (t * SCALE_ERROR)))
    assert chi2_power(n, bins.p0, alt.p0) >= 1 - BETA
    crit = chi2_critical(bins.df)  # chi2.isf(1e-6, 39) = 96.4
    good = sampler(src(211), size=n, **{kw: t})
    assert chi2_statistic(bins.counts(good), bins.p0) <= crit, name
    bad = sampler(src(212), size=n, **{kw: t * SCALE_ERROR})
    assert chi2_statistic(bins.counts(bad), bins.p0) > crit, name


# ---------------------------------------------------------------------------------------------
# Bernoulli samplers: two bins
# ---------------------------------------------------------------------------------------------
N_BERNOULLI = 100_000  # chi2_power(1e5, 0.3 vs 0.315) >= 1 - 1e-6 (asserted below)

BERNOULLI = [
    ("bernoulli", lambda s, p, n: noise.bernoulli(s, p=p, size=n), 0.3, 0.3 * SCALE_ERROR),
    # Bernoulli(exp(-gamma)) with a 5% error in gamma.
    (
        "bernoulli_exp",
        lambda s, g, n: noise.bernoulli_exp(s, gamma=g, size=n),
        1.0,
        1.0 * SCALE_ERROR,
    ),
]


def _bernoulli_p(name: str, param: float) -> float:
    return math.exp(-param) if name.endswith("exp") else param


@pytest.mark.parametrize(
    ("name", "draw", "param", "wrong"), BERNOULLI, ids=[b[0] for b in BERNOULLI]
)
def test_bernoulli_fits_and_validity(
    name: str, draw: Callable[..., np.ndarray], param: float, wrong: float
) -> None:
    p, q = _bernoulli_p(name, param), _bernoulli_p(name, wrong)
    p0 = np.array([p, 1 - p])
    assert chi2_power(N_BERNOULLI, p0, [q, 1 - q]) >= 1 - BETA
    crit = chi2_critical(1)  # chi2.isf(1e-6, 1) = 23.93
    good = draw(src(301), param, N_BERNOULLI)
    assert good.dtype == np.bool_
    k = int(good.sum())
    assert chi2_statistic([k, N_BERNOULLI - k], p0) <= crit
    bad = draw(src(302), wrong, N_BERNOULLI)
    k = int(bad.sum())
    assert chi2_statistic([k, N_BERNOULLI - k], p0) > crit


# ---------------------------------------------------------------------------------------------
# Exact (rational) samplers: smaller n, still powered for the validity companion
# ---------------------------------------------------------------------------------------------
def _draw_exact(f: Callable[[RandomSource], int], seed: int, n: int) -> np.ndarray:
    s = src(seed)
    return np.fromiter((int(f(s)) for _ in range(n)), dtype=np.int64, count=n)


# (name, sampler(source, param) -> one draw, pmf factory over floats, param, wrong param, lo, hi,
#  n). The discrete Laplace uses a non-integer rational scale 3/2 (t = 3, s = 2 in CKS
#  Algorithm 2) to exercise the floor((U + tV) / s) step.
EXACT = [
    (
        "discrete_laplace_exact",
        lambda s, t: noise.discrete_laplace_exact(s, t),
        pmf_discrete_laplace,
        Fraction(3, 2),
        Fraction(3, 2) * Fraction(21, 20),
        -150,
        150,
        60_000,
    ),
    (
        "discrete_gaussian_exact",
        lambda s, v: noise.discrete_gaussian_exact(s, v),
        # the parameter is sigma^2: a 5% error in sigma is a factor 1.05^2 in sigma^2
        lambda v: pmf_discrete_gaussian(math.sqrt(v)),
        Fraction(9, 4),
        Fraction(9, 4) * Fraction(21, 20) ** 2,
        -40,
        40,
        30_000,
    ),
]


@pytest.mark.parametrize(
    ("name", "draw", "pmf", "param", "wrong", "lo", "hi", "n"), EXACT, ids=[e[0] for e in EXACT]
)
def test_exact_sampler_fits(
    name: str,
    draw: Callable[..., int],
    pmf: Callable[[float], Pmf],
    param: Fraction,
    wrong: Fraction,
    lo: int,
    hi: int,
    n: int,
) -> None:
    bins = make_bins(pmf(float(param)), lo, hi, n)
    x = _draw_exact(lambda s: draw(s, param), 401, n)
    stat = chi2_statistic(bins.counts(x), bins.p0)
    assert stat <= chi2_critical(bins.df), (name, stat, bins.df)


@pytest.mark.parametrize(
    ("name", "draw", "pmf", "param", "wrong", "lo", "hi", "n"), EXACT, ids=[e[0] for e in EXACT]
)
def test_exact_validity_rejects_scale_error(
    name: str,
    draw: Callable[..., int],
    pmf: Callable[[float], Pmf],
    param: Fraction,
    wrong: Fraction,
    lo: int,
    hi: int,
    n: int,
) -> None:
    bins = make_bins(pmf(float(param)), lo, hi, n)
    power = chi2_power(n, bins.p0, bins.probabilities(pmf(float(wrong)), lo, hi))
    assert power >= 1 - BETA, (name, power)
    x = _draw_exact(lambda s: draw(s, wrong), 402, n)
    assert chi2_rejects(x, bins), name


N_EXACT_BERNOULLI = 100_000


@pytest.mark.parametrize(
    ("name", "p_of", "param", "wrong"),
    [
        ("bernoulli_exact", lambda p: p, Fraction(1, 3), Fraction(1, 3) * Fraction(21, 20)),
        (
            "bernoulli_exp_exact",
            lambda g: math.exp(-g),
            Fraction(3, 2),
            Fraction(3, 2) * Fraction(21, 20),
        ),
    ],
    ids=["bernoulli_exact", "bernoulli_exp_exact"],
)
def test_exact_bernoulli_fits_and_validity(
    name: str, p_of: Callable[[float], float], param: Fraction, wrong: Fraction
) -> None:
    f = getattr(noise, name)
    p, q = p_of(float(param)), p_of(float(wrong))
    p0 = np.array([p, 1 - p])
    assert chi2_power(N_EXACT_BERNOULLI, p0, [q, 1 - q]) >= 1 - BETA
    crit = chi2_critical(1)  # chi2.isf(1e-6, 1) = 23.93
    for seed, par, should_reject in ((501, param, False), (502, wrong, True)):
        s = src(seed)
        k = sum(bool(f(s, par)) for _ in range(N_EXACT_BERNOULLI))
        stat = chi2_statistic([k, N_EXACT_BERNOULLI - k], p0)
        assert (stat > crit) is should_reject, (name, par, stat)


def test_bernoulli_exp_exact_above_one_and_at_zero() -> None:
    # gamma > 1 goes through the floor(gamma) Bernoulli(exp(-1)) loop; gamma = 0 is always True.
    s = src(503)
    n = 40_000
    gamma = Fraction(5, 2)
    p = math.exp(-2.5)
    k = sum(noise.bernoulli_exp_exact(s, gamma) for _ in range(n))
    assert chi2_statistic([k, n - k], [p, 1 - p]) <= chi2_critical(1)
    assert all(noise.bernoulli_exp_exact(s, Fraction(0)) for _ in range(100))


# ---------------------------------------------------------------------------------------------
# RandomSource: uniform, full-precision uniform, integers, bits
# ---------------------------------------------------------------------------------------------
def test_uniform_fits_and_uses_53_bits() -> None:
    u = src(601).uniform(N_CONTINUOUS)
    assert np.all((u >= 0) & (u < 1))
    assert np.all(u * 2.0**53 == np.floor(u * 2.0**53))  # k * 2**-53
    assert not ks_rejects(u, lambda x: np.clip(x, 0, 1))
    # Validity: a uniform on [0, 1.05) (scale error) is rejected; d = 1 - 1/1.05 = 0.0476.
    assert ks_sample_size(1 - 1 / SCALE_ERROR) <= N_CONTINUOUS
    assert ks_rejects(np.minimum(u * SCALE_ERROR, 1.0), lambda x: np.clip(x, 0, 1))
    # The low bits are fair: bit 0 of k is 1 about half the time (chi2 df = 1).
    k = (u * 2.0**53).astype(np.int64)
    ones = int(np.sum(k & 1))
    assert chi2_statistic([ones, u.size - ones], [0.5, 0.5]) <= chi2_critical(1)


def test_uniform_full_binades_and_mantissa() -> None:
    v = src(602).uniform_full(N_CONTINUOUS)
    assert np.all((v > 0) & (v < 1))
    assert not ks_rejects(v, lambda x: np.clip(x, 0, 1))
    # Binade j = floor(-log2 v) has P(j) = 2**-(j+1): chi-square with merged tail.
    _, e = np.frexp(v)  # v = m 2**e with m in [0.5, 1): binade j = -e
    j = -e
    bins = make_bins(
        lambda k: np.where(np.asarray(k) >= 0, 0.5 ** (np.asarray(k) + 1.0), 0.0), 0, 80, v.size
    )
    assert not chi2_rejects(j, bins)
    # The 52 significand bits are uniform inside the binade: the fractional position is U(0,1).
    m, _ = np.frexp(v)
    assert not ks_rejects(2 * m - 1, lambda x: np.clip(x, 0, 1))
    # Deep binades are reachable: the smallest of 400k draws is around 2**-19.
    assert v.min() < 2.0**-12


def test_integers_and_randbelow_are_uniform() -> None:
    s = src(603)
    x = s.integers(7, 70_000)
    assert x.min() >= 0 and x.max() <= 6
    counts = np.bincount(x, minlength=7)
    assert chi2_statistic(counts, np.full(7, 1 / 7)) <= chi2_critical(6)
    r = np.array([s.randbelow(5) for _ in range(20_000)])
    assert chi2_statistic(np.bincount(r, minlength=5), np.full(5, 0.2)) <= chi2_critical(4)
    big = [s.randbelow(3 * 2**70) for _ in range(2000)]
    assert all(0 <= b < 3 * 2**70 for b in big)
    # Top "digit" base 3 * 2**68 of a uniform below 3 * 2**70 is uniform on {0, 1, 2, 3}.
    top = np.array([b // (3 * 2**68) for b in big])
    assert chi2_statistic(np.bincount(top, minlength=4), np.full(4, 0.25)) <= chi2_critical(3)


def test_bits_are_fair() -> None:
    b = src(604).bits((1000, 100))
    assert b.shape == (1000, 100) and b.dtype == np.bool_
    k = int(b.sum())
    assert chi2_statistic([k, b.size - k], [0.5, 0.5]) <= chi2_critical(1)


# ---------------------------------------------------------------------------------------------
# The helpers themselves (_stats.py)
# ---------------------------------------------------------------------------------------------
def test_clopper_pearson_matches_scipy_and_covers() -> None:
    for k, n in ((0, 10), (3, 10), (10, 10), (500, 100_000), (99_999, 100_000)):
        lo, hi = clopper_pearson(k, n, 0.05)
        ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.95, method="exact")
        assert lo == pytest.approx(ci.low, abs=1e-12) and hi == pytest.approx(ci.high, abs=1e-12)
    # Exact coverage >= 1 - alpha at p = 0.3, n = 50 (summed over every k).
    n, p, alpha = 50, 0.3, 0.1
    cover = sum(
        stats.binom.pmf(k, n, p)
        for k in range(n + 1)
        if clopper_pearson(k, n, alpha)[0] <= p <= clopper_pearson(k, n, alpha)[1]
    )
    assert cover >= 1 - alpha


def test_make_bins_are_proper() -> None:
    pmf = pmf_discrete_laplace(3.0)
    for n in (1_000, 100_000):
        bins = make_bins(pmf, -250, 250, n)
        assert bins.p0.sum() == pytest.approx(1.0, abs=1e-12)
        assert np.all(n * bins.p0 >= 20)
        assert np.all(np.diff(bins.edges) > 0)
    # Counting puts k in the bin (edges[i-1], edges[i]].
    b = bins_from_cdf(np.array([-1, 0, 2]), lambda k: np.zeros(np.shape(k)))
    assert b.counts(np.array([-5, -1, 0, 1, 2, 3, 100])).tolist() == [2, 1, 2, 2]


def test_ks_sample_size_formula() -> None:
    # sqrt(n) d >= sqrt(ln(2e6)/2) * 2 = 5.39 at alpha = beta = 1e-6
    assert ks_sample_size(0.01) == math.ceil((2 * math.sqrt(math.log(2e6) / 2) / 0.01) ** 2)
    assert 290_000 < ks_sample_size(0.01) < 291_000


# ---------------------------------------------------------------------------------------------
# Tails: the conditional law beyond a threshold (10 million draws, KS on the tail sample)
# ---------------------------------------------------------------------------------------------
N_TAIL = 10_000_000


def _gaussian_tail_cdf(c: float) -> Cdf:
    # |N| given |N| > c: (Phi(x) - Phi(c)) / (1 - Phi(c)), computed with survival functions.
    return lambda x: 1.0 - stats.norm.sf(np.maximum(x, c)) / stats.norm.sf(c)


TAILS = [
    # (name, draw(source, scale, n), tail extractor, cdf of the tail under the null, threshold)
    (
        "gaussian_|N|>3",
        lambda s, b, n: noise.gaussian(s, sigma=b, size=n),
        lambda x, c: np.abs(x[np.abs(x) > c]),
        _gaussian_tail_cdf,
        3.0,
    ),
    # Laplace and exponential are memoryless: the excess over c is again Exp(1).
    (
        "laplace_|L|>4",
        lambda s, b, n: noise.laplace(s, scale=b, size=n),
        lambda x, c: np.abs(x[np.abs(x) > c]) - c,
        lambda c: exponential_cdf(1.0),
        4.0,
    ),
    (
        "exponential_E>4.5",
        lambda s, b, n: noise.exponential(s, scale=b, size=n),
        lambda x, c: x[x > c] - c,
        lambda c: exponential_cdf(1.0),
        4.5,
    ),
]


@pytest.mark.parametrize(("name", "draw", "tail", "cdf", "c"), TAILS, ids=[t[0] for t in TAILS])
def test_tails_fit_and_validity(
    name: str,
    draw: Callable[..., np.ndarray],
    tail: Callable[[np.ndarray, float], np.ndarray],
    cdf: Callable[[float], Cdf],
    c: float,
) -> None:
    good = tail(draw(src(701), 1.0, N_TAIL), c)
    # critical value kstwo(m).isf(1e-6) for the m tail draws (m ~ 27,000 / 183,000 / 111,000)
    assert not ks_rejects(good, cdf(c)), (name, good.size)
    bad = tail(draw(src(702), SCALE_ERROR, N_TAIL), c)
    # Power: the sup distance between the tail laws under scale 1 and 1.05 (for the memoryless
    # laws, Exp(1) vs Exp(1.05): 0.0179) must be detectable with the tail sample actually drawn.
    if name.startswith("gaussian"):

        def wrong_cdf(x: np.ndarray) -> np.ndarray:
            s = SCALE_ERROR
            return 1.0 - stats.norm.sf(np.maximum(x, c) / s) / stats.norm.sf(c / s)
    else:
        wrong_cdf = exponential_cdf(SCALE_ERROR)
    d = sup_distance(cdf(c), wrong_cdf, c if name.startswith("gaussian") else 0.0, 40.0)
    assert ks_sample_size(d) <= bad.size, (name, d, bad.size)
    assert ks_rejects(bad, cdf(c)), name
