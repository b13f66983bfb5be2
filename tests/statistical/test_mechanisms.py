"""Goodness of fit of every mechanism's release at a stated false-positive rate (alpha = 1e-6).

Conventions as in ``test_samplers.py`` and ``_stats.py``: every test's critical value is
``scipy.stats.chi2.isf(1e-6, df)``; the reference distributions are written here from the
mechanisms' docstrings (and, for Report Noisy Max, by numerical integration), independently of
dpkit's code; every test has a validity companion that runs the same test, same n, on the
mechanism with a 5% error in its noise scale (or epsilon) and must reject, with n sized by
``chi2_power(...) >= 1 - 1e-6`` (asserted).

Lattice mechanisms (Laplace, Gaussian) are tested on their *exact* lattice law: the released
value minus the rounded input, divided by the granularity, is ``rint(t L)`` (or ``rint(t N)``)
with ``t = scale / granularity``, so ``P(Z <= k) = F((k + 1/2) / t)``. The support has
thousands of points, so bins are cut at 40 quantiles of the continuous law and their exact
probabilities come from that formula.

Sources are seeded (``insecure=True``). Releases big enough for dpkit's two-thread path (the
selection tests here) interleave the keystream between threads, so their draws differ from run to
run even with a seed; each test's false-positive rate is still 1e-6 per run.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from _stats import (
    BETA,
    Bins,
    bins_from_cdf,
    chi2_categorical,
    chi2_critical,
    chi2_power,
    chi2_rejects,
    chi2_statistic,
    clopper_pearson,
    quantile_edges,
)
from scipy import integrate, stats

from dpkit.mechanisms import (
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    Gaussian,
    Laplace,
    RandomizedResponse,
    ReportNoisyMax,
)
from dpkit.noise import RandomSource

SCALE_ERROR = 1.05
NBINS = 40


def src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


# ---------------------------------------------------------------------------------------------
# Lattice Laplace and Gaussian
# ---------------------------------------------------------------------------------------------
def lattice_bins(dist: stats.rv_continuous, t: float) -> Callable[[float], Bins]:
    """Bins for Z = rint(t X), X ~ dist(scale=1): edges at quantiles of t X; for a mechanism
    whose lattice scale is ``t1`` the bin probabilities are ``P(Z <= k) = F((k + 1/2) / t1)``."""
    edges = quantile_edges(lambda q: t * dist.ppf(q), NBINS)
    return lambda t1: bins_from_cdf(edges, lambda k: dist.cdf((k + 0.5) / t1))


def _lattice_noise(mech: Laplace | Gaussian, x: float, n: int, seed: int) -> np.ndarray:
    out = mech.release(np.full(n, x), source=src(seed))
    g = mech.granularity
    z = out / g
    assert np.array_equal(z, np.rint(z))  # exact multiples of the granularity
    return z - np.rint(x / g)


N_LATTICE = 200_000

LATTICE = [
    (
        "laplace_eps1",
        lambda: Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0),
        stats.laplace,
        "scale",
        0.0,
    ),
    (
        "laplace_offset",
        lambda: Laplace.from_epsilon(epsilon=0.3, sensitivity=7.5),
        stats.laplace,
        "scale",
        1234.567,
    ),
    (
        "laplace_tiny",
        lambda: Laplace.from_scale(scale=3e-9, sensitivity=1e-9),
        stats.laplace,
        "scale",
        -(2.0**-30),
    ),
    ("gaussian_mu", lambda: Gaussian.from_mu(mu=0.5, sensitivity=1.0), stats.norm, "sigma", 0.0),
    (
        "gaussian_eps_delta",
        lambda: Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-6, sensitivity=3.0),
        stats.norm,
        "sigma",
        -55.25,
    ),
    (
        "gaussian_classic",
        lambda: Gaussian.from_epsilon_delta(
            epsilon=0.5, delta=1e-5, sensitivity=1.0, method="classic"
        ),
        stats.norm,
        "sigma",
        1e6 + 0.3,
    ),
]


def _with_scale(mech: Laplace | Gaussian, factor: float) -> Laplace | Gaussian:
    """The same mechanism with a noise scale ``factor`` times larger (same granularity)."""
    if isinstance(mech, Laplace):
        return Laplace(
            scale=mech.scale * factor, sensitivity=mech.sensitivity, granularity=mech.granularity
        )
    return Gaussian(
        sigma=mech.sigma * factor, sensitivity=mech.sensitivity, granularity=mech.granularity
    )


@pytest.mark.parametrize(
    ("name", "build", "dist", "attr", "x"), LATTICE, ids=[c[0] for c in LATTICE]
)
def test_lattice_mechanism_fits(
    name: str,
    build: Callable[[], Laplace | Gaussian],
    dist: stats.rv_continuous,
    attr: str,
    x: float,
) -> None:
    mech = build()
    t = getattr(mech, attr) / mech.granularity
    bins = lattice_bins(dist, t)(t)
    z = _lattice_noise(mech, x, N_LATTICE, 701)
    # critical value chi2.isf(1e-6, 39) = 96.4 (40 quantile bins)
    stat = chi2_statistic(bins.counts(z), bins.p0)
    assert stat <= chi2_critical(bins.df), (name, stat)


@pytest.mark.parametrize(
    ("name", "build", "dist", "attr", "x"), LATTICE, ids=[c[0] for c in LATTICE]
)
def test_lattice_mechanism_validity(
    name: str,
    build: Callable[[], Laplace | Gaussian],
    dist: stats.rv_continuous,
    attr: str,
    x: float,
) -> None:
    mech = build()
    t = getattr(mech, attr) / mech.granularity
    make = lattice_bins(dist, t)
    bins = make(t)
    assert chi2_power(N_LATTICE, bins.p0, make(t * SCALE_ERROR).p0) >= 1 - BETA
    wrong = _with_scale(mech, SCALE_ERROR)
    z = _lattice_noise(wrong, x, N_LATTICE, 702)
    assert chi2_rejects(z, bins), name


# ---------------------------------------------------------------------------------------------
# Discrete Laplace and discrete Gaussian (fast and exact paths)
# ---------------------------------------------------------------------------------------------
def discrete_laplace_cdf(t: float) -> Callable[[np.ndarray], np.ndarray]:
    # From P(k) = tanh(1/(2t)) exp(-|k|/t) = (1-q)/(1+q) q^|k|, q = e^(-1/t):
    # P(Z <= k) = q^|k| / (1 + q) for k < 0 and 1 - q^(k+1) / (1 + q) for k >= 0.
    q = math.exp(-1.0 / t)

    def cdf(k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=np.float64)
        return np.where(k < 0, q ** np.abs(k) / (1 + q), 1.0 - q ** (k + 1) / (1 + q))

    return cdf


def discrete_gaussian_cdf(sigma: float) -> Callable[[np.ndarray], np.ndarray]:
    # From P(k) ∝ exp(-k^2 / (2 sigma^2)), summed explicitly over +-40 sigma.
    width = int(40 * sigma) + 40
    ks = np.arange(-width, width + 1, dtype=np.float64)
    p = np.exp(-(ks * ks) / (2 * sigma * sigma))
    c = np.cumsum(p / math.fsum(p))
    return lambda k: c[np.clip(np.asarray(k, dtype=np.int64) + width, 0, c.size - 1)]


DISCRETE = [
    # (name, mechanism, mechanism with a 5% scale error, cdf factory, reference scale, ppf, n)
    (
        "discrete_laplace",
        DiscreteLaplace.from_epsilon(epsilon=0.25, sensitivity=1),
        lambda m: DiscreteLaplace(scale=m.scale * SCALE_ERROR, sensitivity=1),
        discrete_laplace_cdf,
        lambda m: m.scale,
        stats.laplace.ppf,
        200_000,
    ),
    (
        "discrete_gaussian",
        DiscreteGaussian.from_sigma(sigma=4.5, sensitivity=2),
        lambda m: DiscreteGaussian(sigma=m.sigma * SCALE_ERROR, sensitivity=2),
        discrete_gaussian_cdf,
        lambda m: m.sigma,
        stats.norm.ppf,
        200_000,
    ),
    # scale >= 2**13: the exact rational samplers (CKS 2020), slow (60-110 us a draw), so fewer
    # draws and 12 bins; n is the smallest multiple of 5,000 with power >= 1 - 1e-6.
    (
        "discrete_laplace_exact",
        DiscreteLaplace.from_epsilon(epsilon=1 / 9000, sensitivity=1),
        lambda m: DiscreteLaplace(scale=m.scale * SCALE_ERROR, sensitivity=1),
        discrete_laplace_cdf,
        lambda m: m.scale,
        stats.laplace.ppf,
        65_000,
    ),
    (
        "discrete_gaussian_exact",
        DiscreteGaussian.from_sigma(sigma=9000.0, sensitivity=1),
        lambda m: DiscreteGaussian(sigma=m.sigma * SCALE_ERROR, sensitivity=1),
        discrete_gaussian_cdf,
        lambda m: m.sigma,
        stats.norm.ppf,
        35_000,
    ),
]


def _discrete_bins(
    scale: float,
    cdf: Callable[[float], Callable[[np.ndarray], np.ndarray]],
    ppf: Callable[[np.ndarray], np.ndarray],
    nbins: int,
) -> Bins:
    return bins_from_cdf(quantile_edges(lambda q: scale * ppf(q), nbins), cdf(scale))


@pytest.mark.parametrize(
    ("name", "mech", "wrong", "cdf", "scale_of", "ppf", "n"), DISCRETE, ids=[d[0] for d in DISCRETE]
)
def test_discrete_mechanism_fits_and_validity(
    name: str,
    mech: DiscreteLaplace | DiscreteGaussian,
    wrong: Callable[..., DiscreteLaplace | DiscreteGaussian],
    cdf: Callable[[float], Callable[..., np.ndarray]],
    scale_of: Callable[..., float],
    ppf: Callable[[np.ndarray], np.ndarray],
    n: int,
) -> None:
    bad = wrong(mech)
    assert mech.exact == name.endswith("exact") == bad.exact
    scale = scale_of(mech)
    nbins = 12 if mech.exact else NBINS
    bins = _discrete_bins(scale, cdf, ppf, nbins)
    alt = bins_from_cdf(bins.edges, cdf(scale_of(bad)))
    power = chi2_power(n, bins.p0, alt.p0)
    assert power >= 1 - BETA, (name, power)
    x = np.full(n, 17, dtype=np.int64)
    good_out = mech.release(x, source=src(801))
    assert good_out.dtype == np.int64 and good_out.shape == (n,)
    # critical value chi2.isf(1e-6, df): 96.4 at df = 39, 47.2 at df = 11
    stat = chi2_statistic(bins.counts(good_out - 17), bins.p0)
    assert stat <= chi2_critical(bins.df), (name, stat)
    assert chi2_rejects(bad.release(x, source=src(802)) - 17, bins), name


# ---------------------------------------------------------------------------------------------
# Exponential mechanism and Report Noisy Max
# ---------------------------------------------------------------------------------------------
SCORES = np.array([0.0, 1.0, 2.5, 3.0, 3.0, 5.0, -4.0])
N_SELECT = 200_000


def softmax(scores: np.ndarray, factor: float) -> np.ndarray:
    """P(r) ∝ exp(factor u(r)) computed independently (max subtracted)."""
    z = factor * (scores - scores.max())
    w = np.exp(z)
    return w / math.fsum(w)


def noisy_max_probabilities(
    scores: np.ndarray, dist: stats.rv_continuous, scale: float
) -> np.ndarray:
    """P(argmax_j (u_j + X_j) = r) = integral of f(x - u_r) prod_{j != r} F(x - u_j) dx."""
    lo, _ = dist.support()
    out = np.empty(scores.size)
    for r, ur in enumerate(scores):
        others = np.delete(scores, r)

        def integrand(x: float, ur: float = ur, others: np.ndarray = others) -> float:
            return float(dist.pdf(x - ur, scale=scale) * np.prod(dist.cdf(x - others, scale=scale)))

        a = ur + lo * scale if np.isfinite(lo) else ur - 60 * scale
        b = ur + 60 * scale
        pts = sorted({float(u) for u in scores if a < u < b})
        val, _ = integrate.quad(
            integrand, a, b, points=pts or None, limit=400, epsabs=1e-13, epsrel=1e-11
        )
        out[r] = val
    assert abs(out.sum() - 1.0) < 1e-7, out.sum()
    return out


@pytest.mark.parametrize("monotonic", [False, True])
def test_exponential_mechanism_fits_and_validity(monotonic: bool) -> None:
    eps = 1.2
    mech = ExponentialMechanism(epsilon=eps, sensitivity=1.5, monotonic=monotonic)
    c = 1.0 if monotonic else 2.0
    p0 = softmax(SCORES, eps / (c * 1.5))
    assert np.allclose(mech.probabilities(SCORES), p0, rtol=1e-9)
    wrong = ExponentialMechanism(epsilon=eps * SCALE_ERROR, sensitivity=1.5, monotonic=monotonic)
    p1 = softmax(SCORES, eps * SCALE_ERROR / (c * 1.5))
    assert chi2_power(N_SELECT, p0, p1) >= 1 - BETA
    good = np.bincount(
        mech.release_many(SCORES, count=N_SELECT, source=src(901)), minlength=SCORES.size
    )
    stat, crit = chi2_categorical(good, p0)  # crit = chi2.isf(1e-6, df <= 6) <= 35.9
    assert stat <= crit, stat
    bad = np.bincount(
        wrong.release_many(SCORES, count=N_SELECT, source=src(902)), minlength=SCORES.size
    )
    stat, crit = chi2_categorical(bad, p0)
    assert stat > crit, stat


def test_exponential_mechanism_huge_scores_never_nan() -> None:
    mech = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    scores = np.array([1e308, 1e308 - 1e292, -1e308, np.nan, 1e300])
    p = mech.probabilities(scores)
    assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0)
    picks = mech.release_many(scores, count=2000, source=src(903))
    assert set(np.unique(picks).tolist()) <= {0, 1}
    # Single-candidate and all-equal cases.
    assert mech.release([3.0], source=src(904)) == 0
    counts = np.bincount(mech.release_many([7.0] * 4, count=40_000, source=src(905)), minlength=4)
    stat, crit = chi2_categorical(counts, np.full(4, 0.25))
    assert stat <= crit


RNM = [
    ("laplace", stats.laplace),
    ("exponential", stats.expon),
    ("gumbel", stats.gumbel_r),
]


@pytest.mark.parametrize(("noise", "dist"), RNM, ids=[r[0] for r in RNM])
def test_report_noisy_max_fits_and_validity(noise: str, dist: stats.rv_continuous) -> None:
    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise=noise)
    p0 = noisy_max_probabilities(SCORES, dist, mech.scale)
    p1 = noisy_max_probabilities(SCORES, dist, mech.scale / SCALE_ERROR)
    assert chi2_power(N_SELECT, p0, p1) >= 1 - BETA
    good = np.bincount(
        mech.release_many(SCORES, count=N_SELECT, source=src(911)), minlength=SCORES.size
    )
    stat, crit = chi2_categorical(good, p0)
    assert stat <= crit, (noise, stat)
    wrong = ReportNoisyMax(epsilon=1.0 * SCALE_ERROR, sensitivity=1.0, noise=noise)
    bad = np.bincount(
        wrong.release_many(SCORES, count=N_SELECT, source=src(912)), minlength=SCORES.size
    )
    stat, crit = chi2_categorical(bad, p0)
    assert stat > crit, (noise, stat)


def test_gumbel_noisy_max_is_the_exponential_mechanism() -> None:
    # Gumbel-max trick: arg-max of u/lambda + Gumbel(0,1) is softmax(u / lambda). The numerical
    # integral agrees with the closed form, so the Gumbel RNM test above is an EM test too.
    lam = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="gumbel").scale
    assert np.allclose(
        noisy_max_probabilities(SCORES, stats.gumbel_r, lam), softmax(SCORES, 1.0 / lam), atol=1e-9
    )


def test_exponential_noisy_max_is_permute_and_flip_not_the_exponential_mechanism() -> None:
    """Seed 002's "Theorem 3.13" (exponential-noise RNM = exponential mechanism) is false.

    Math: two candidates with gap d, noise Exp(lambda). The better one loses iff
    E_worse - E_better > d; the difference of two i.i.d. Exp(lambda) is Laplace(lambda), so
    ``P(better) = 1 - exp(-d/lambda) / 2``, while the exponential mechanism gives
    ``1 / (1 + exp(-d/lambda))``. At d = lambda: 0.8161 vs 0.7311. The first is permute-and-flip
    (McKenna and Sheldon 2020): P(better) = 1 - P(first look at worse, accept) =
    ``1 - (1/2) exp(-d/lambda)``.
    """
    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="exponential")
    lam = mech.scale
    scores = np.array([0.0, lam])
    p_rnm = 1 - math.exp(-1.0) / 2
    p_em = 1 / (1 + math.exp(-1.0))
    num = noisy_max_probabilities(scores, stats.expon, lam)
    assert num[1] == pytest.approx(p_rnm, abs=1e-9)
    n = 100_000
    k = int(np.sum(mech.release_many(scores, count=n, source=src(921)) == 1))
    crit = chi2_critical(1)  # chi2.isf(1e-6, 1) = 23.9
    assert chi2_statistic([k, n - k], [p_rnm, 1 - p_rnm]) <= crit
    # The same data decisively reject the exponential mechanism's probabilities ...
    assert chi2_statistic([k, n - k], [p_em, 1 - p_em]) > crit
    # ... and the exponential mechanism itself (same epsilon) matches p_em, not p_rnm.
    em = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    k_em = int(np.sum(em.release_many(scores, count=n, source=src(922)) == 1))
    p_em_exact = 1 / (1 + math.exp(-lam * em.factor))
    assert chi2_statistic([k_em, n - k_em], [p_em_exact, 1 - p_em_exact]) <= crit
    assert chi2_statistic([k_em, n - k_em], [p_rnm, 1 - p_rnm]) > crit


# ---------------------------------------------------------------------------------------------
# Randomized response
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_randomized_response_fits_and_validity(epsilon: float) -> None:
    mech = RandomizedResponse.from_epsilon(epsilon=epsilon)
    p = math.exp(epsilon) / (1 + math.exp(epsilon))
    assert mech.p <= p and mech.p == pytest.approx(p, rel=1e-12)
    # Validity: a 5% error in epsilon changes p by 0.006 (eps = 0.5) and 0.004 (eps = 2), so
    # power >= 1 - 1e-6 needs n of about ((4.9 + 4.8) * 0.48 / 0.0059)^2 = 630,000 at eps = 0.5.
    n = 1_000_000
    q = math.exp(epsilon * SCALE_ERROR) / (1 + math.exp(epsilon * SCALE_ERROR))
    assert chi2_power(n, [p, 1 - p], [q, 1 - q]) >= 1 - BETA
    crit = chi2_critical(1)
    bits = np.zeros(n, dtype=bool)
    bits[: n // 2] = True
    out = mech.release(bits, source=src(931))
    kept = int(np.sum(out == bits))
    assert chi2_statistic([kept, n - kept], [p, 1 - p]) <= crit
    wrong = RandomizedResponse.from_epsilon(epsilon=epsilon * SCALE_ERROR)
    kept = int(np.sum(wrong.release(bits, source=src(932)) == bits))
    assert chi2_statistic([kept, n - kept], [p, 1 - p]) > crit


# ---------------------------------------------------------------------------------------------
# The sign of zero: 0.0 and -1e-12 share the lattice point 0, so no event may tell them apart
# ---------------------------------------------------------------------------------------------
# One event, E = "the output is -0.0", seen k0 / n times on input 0.0 and k1 / n on -1e-12. With
# Clopper-Pearson bounds at alpha / 2 each (joint level 1 - alpha, alpha = 1e-6), E certifies a
# violation of (eps, delta)-DP when lower(k1 / n) > e^eps upper(k0 / n) + delta; the certified
# epsilon is ln((lower(k1 / n) - delta) / upper(k0 / n)).
# Power of the companion (old conversion): there -0.0 appears on the negative side only, with
# probability p = P(Z = 0) / 2: 6.1e-5 for Laplace eps 1 (t = 4096), 1.0e-5 for the Gaussian
# (1, 1e-6) (t ~ 2e4). With k0 = 0, upper(0 / n) = ln(4 / alpha) / n = 15.2 / n, so a violation
# needs k1 above about e * 15.2 + delta n + 5 sqrt(k1): ~80 for Laplace at n = 4e6 (mean 244),
# ~120 for the Gaussian at n = 2e7 (mean 200); both missed with probability below 1e-9.
SIGN_ALPHA = 1e-6
SIGN = [
    (
        "laplace_eps1",
        lambda: Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0),
        1.0,
        0.0,
        4_000_000,
    ),
    (
        "gaussian_eps1_delta1e-6",
        lambda: Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-6, sensitivity=1.0),
        1.0,
        1e-6,
        20_000_000,
    ),
]
SIGN_IDS = [s[0] for s in SIGN]


def _negative_zeros(y: np.ndarray) -> int:
    return int(np.count_nonzero((y == 0.0) & np.signbit(y)))


def _old_conversion(mech: Laplace | Gaussian, x: float, n: int, source: RandomSource) -> np.ndarray:
    """The conversion before the fix: the double sum ``rint(x / s) + z`` kept -0.0."""
    from dpkit.noise.samplers import gaussian_lattice_float, laplace_lattice_float

    s = mech.granularity
    if isinstance(mech, Laplace):
        z = laplace_lattice_float(source, mech.scale / s, n)
    else:
        z = gaussian_lattice_float(source, mech.sigma / s, n)
    return (np.rint(np.full(n, x) / s) + z) * s


def _count(draw: Callable[[int, RandomSource], np.ndarray], n: int, seed: int) -> int:
    source, total, batch = src(seed), 0, 2_000_000
    for start in range(0, n, batch):
        total += _negative_zeros(draw(min(batch, n - start), source))
    return total


def _certify(k0: int, k1: int, n: int, delta: float) -> float:
    _, hi0 = clopper_pearson(k0, n, SIGN_ALPHA / 2)
    lo1, _ = clopper_pearson(k1, n, SIGN_ALPHA / 2)
    return math.log((lo1 - delta) / hi0) if lo1 > delta else 0.0


@pytest.mark.parametrize(("name", "build", "eps", "delta", "n"), SIGN, ids=SIGN_IDS)
def test_sign_of_zero_certifies_nothing(
    name: str, build: Callable[[], Laplace | Gaussian], eps: float, delta: float, n: int
) -> None:
    mech = build()
    k0 = _count(lambda m, s: mech.release(np.full(m, 0.0), source=s), n, 61)
    k1 = _count(lambda m, s: mech.release(np.full(m, -1e-12), source=s), n, 62)
    cert = _certify(k0, k1, n, delta)
    print(
        f"{name}: -0.0 outputs {k0} (input 0.0) vs {k1} (input -1e-12) in {n}; "
        f"certified epsilon {cert:.3f}, claimed ({eps}, {delta})"
    )
    assert k0 == 0 and k1 == 0 and cert == 0.0


@pytest.mark.parametrize(("name", "build", "eps", "delta", "n"), SIGN, ids=SIGN_IDS)
def test_sign_of_zero_test_catches_the_old_conversion(
    name: str, build: Callable[[], Laplace | Gaussian], eps: float, delta: float, n: int
) -> None:
    mech = build()
    k0 = _count(lambda m, s: _old_conversion(mech, 0.0, m, s), n, 61)
    k1 = _count(lambda m, s: _old_conversion(mech, -1e-12, m, s), n, 62)
    cert = _certify(k0, k1, n, delta)
    print(
        f"{name} (old conversion): -0.0 outputs {k0} vs {k1} in {n}; certified epsilon "
        f"{cert:.3f} > claimed ({eps}, {delta})"
    )
    assert k0 == 0 and cert > eps
