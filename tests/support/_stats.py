"""Shared helpers for the statistical tests: KS, chi-square with merged tails, Clopper-Pearson.

Every test built on these helpers fixes its false-positive rate ``ALPHA = 1e-6`` and derives its
critical value from it (``scipy.stats.kstwo(n).isf(ALPHA)``, ``scipy.stats.chi2.isf(ALPHA, df)``).
Each goodness-of-fit test has a validity companion that feeds the same test a sampler with a 5%
scale error and checks that it is rejected; the sample size is chosen by a power calculation
(also here) so that the rejection happens with probability at least ``1 - BETA``.

Power of the KS test (a distribution-free bound, no asymptotics)
----------------------------------------------------------------
Let ``F0`` be the hypothesised CDF, ``F1`` the true one, and ``d = sup |F1 - F0|``, attained at
``x*``. The test rejects when ``D_n = sup |F_n - F0| > c_n`` with ``c_n = kstwo(n).isf(alpha)``.
By the Dvoretzky-Kiefer-Wolfowitz inequality with Massart's constant,
``c_n <= sqrt(ln(2/alpha) / (2n))``. Under F1, ``D_n >= |F_n(x*) - F0(x*)| >= d - |F_n(x*) -
F1(x*)|`` and Hoeffding gives ``P(|F_n(x*) - F1(x*)| >= s) <= 2 exp(-2 n s^2)``. Hence the test
misses with probability at most beta as soon as

    sqrt(n) d >= sqrt(ln(2/alpha) / 2) + sqrt(ln(2/beta) / 2),

which is what :func:`ks_sample_size` returns (for alpha = beta = 1e-6: ``n >= (5.39 / d)^2``).

Power of the chi-square test
----------------------------
With bin probabilities ``p0`` (null) and ``p1`` (truth), Pearson's statistic is approximately
non-central chi-square with ``df = bins - 1`` and non-centrality ``lambda = n sum (p1 - p0)^2 /
p0``; :func:`chi2_power` returns ``ncx2(df, lambda).sf(chi2.isf(alpha, df))``. Tails are merged
until every bin expects at least ``MIN_EXPECTED`` counts under the null, which keeps the
chi-square approximation of the null distribution sound.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy import stats

ALPHA = 1e-6  # false-positive rate of every goodness-of-fit test
BETA = 1e-6  # target miss rate of every validity companion (power >= 1 - BETA)
MIN_EXPECTED = 20.0  # smallest expected count per chi-square bin after merging


# ---------------------------------------------------------------------------------------------
# Kolmogorov-Smirnov
# ---------------------------------------------------------------------------------------------
def ks_critical(n: int, alpha: float = ALPHA) -> float:
    """Exact critical value of the two-sided one-sample KS statistic: ``kstwo(n).isf(alpha)``."""
    return float(stats.kstwo(n).isf(alpha))


def ks_statistic(sample: npt.ArrayLike, cdf: Callable[[np.ndarray], np.ndarray]) -> float:
    """Two-sided KS distance between the empirical CDF of ``sample`` and ``cdf``."""
    return float(stats.kstest(np.asarray(sample, dtype=np.float64), cdf).statistic)


def ks_rejects(
    sample: npt.ArrayLike, cdf: Callable[[np.ndarray], np.ndarray], alpha: float = ALPHA
) -> bool:
    """``True`` when the KS test at level ``alpha`` rejects ``cdf`` for ``sample``."""
    x = np.asarray(sample)
    return ks_statistic(x, cdf) > ks_critical(x.size, alpha)


def ks_sample_size(d: float, alpha: float = ALPHA, beta: float = BETA) -> int:
    """Smallest n for which a CDF distance ``d`` is detected with probability >= 1 - beta.

    See the module docstring: ``sqrt(n) d >= sqrt(ln(2/alpha)/2) + sqrt(ln(2/beta)/2)``.
    """
    root = math.sqrt(math.log(2.0 / alpha) / 2.0) + math.sqrt(math.log(2.0 / beta) / 2.0)
    return math.ceil((root / d) ** 2)


def sup_distance(
    cdf0: Callable[[np.ndarray], np.ndarray],
    cdf1: Callable[[np.ndarray], np.ndarray],
    lo: float,
    hi: float,
) -> float:
    """``max |cdf0 - cdf1|`` on a fine grid of [lo, hi] (a lower bound of the sup distance)."""
    grid = np.linspace(lo, hi, 200_001)
    return float(np.max(np.abs(cdf0(grid) - cdf1(grid))))


# ---------------------------------------------------------------------------------------------
# Chi-square with merged tails
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bins:
    """Contiguous integer bins ``(-inf, edges[0]], (edges[0], edges[1]], ..., (edges[-1], inf)``
    with their null probabilities ``p0`` (summing to 1)."""

    edges: npt.NDArray[np.int64]
    p0: npt.NDArray[np.float64]

    @property
    def df(self) -> int:
        return int(self.p0.size - 1)

    def probabilities(
        self, pmf: Callable[[np.ndarray], np.ndarray], lo: int, hi: int
    ) -> npt.NDArray[np.float64]:
        """Bin probabilities of another pmf (support truncated to [lo, hi], tails to the ends)."""
        return _bin_pmf(pmf, lo, hi, self.edges)

    def counts(self, sample: npt.ArrayLike) -> npt.NDArray[np.int64]:
        idx = np.searchsorted(self.edges, np.asarray(sample), side="left")
        return np.bincount(idx, minlength=self.p0.size).astype(np.int64)


def _bin_pmf(
    pmf: Callable[[np.ndarray], np.ndarray], lo: int, hi: int, edges: npt.NDArray[np.int64]
) -> npt.NDArray[np.float64]:
    """Probabilities of the bins ``k <= edges[0]``, ``edges[i-1] < k <= edges[i]``, ``k >
    edges[-1]`` under ``pmf`` evaluated on ``lo..hi``; any mass outside [lo, hi] (negligible by
    construction, see :func:`make_bins`) is given to the last bin so the bins sum to 1."""
    ks = np.arange(lo, hi + 1)
    cum = np.cumsum(np.asarray(pmf(ks), dtype=np.float64))
    at_edges = cum[np.clip(edges - lo, 0, ks.size - 1)]
    return np.concatenate([[at_edges[0]], np.diff(at_edges), [1.0 - at_edges[-1]]])


def make_bins(
    pmf: Callable[[np.ndarray], np.ndarray],
    lo: int,
    hi: int,
    n: int,
    min_expected: float = MIN_EXPECTED,
) -> Bins:
    """Bins over the integers with every expected count ``n p0 >= min_expected``.

    ``pmf`` is evaluated on ``lo..hi``, which must hold all but a negligible mass (checked
    below); bins are built by merging from each tail inwards until a bin reaches
    ``min_expected / n``, and then merging any small middle bins into their right neighbour.
    """
    ks = np.arange(lo, hi + 1)
    p = np.asarray(pmf(ks), dtype=np.float64)
    if not abs(float(np.sum(p)) - 1.0) < 1e-9:
        raise AssertionError(f"pmf on [{lo}, {hi}] sums to {np.sum(p)!r}, widen the range")
    need = min_expected / n
    # Merge the left tail: the first bin ends at the first k where the cumulative mass >= need.
    cum = np.cumsum(p)
    left_end = int(np.argmax(cum >= need))
    rcum = np.cumsum(p[::-1])
    right_start = ks.size - 1 - int(np.argmax(rcum >= need))
    edges = [ks[left_end]]
    acc = 0.0
    for i in range(left_end + 1, right_start):
        acc += p[i]
        if acc >= need:
            edges.append(ks[i])
            acc = 0.0
    # ``edges[-1]`` closes the last full middle bin; the right tail bin is (edges[-1], inf).
    e = np.asarray(edges, dtype=np.int64)
    p0 = _bin_pmf(pmf, lo, hi, e)
    if p0[-1] < need and e.size > 1:  # leftover middle mass too small: merge into the tail
        e = e[:-1]
        p0 = _bin_pmf(pmf, lo, hi, e)
    return Bins(edges=e, p0=p0)


def chi2_critical(df: int, alpha: float = ALPHA) -> float:
    """Critical value of Pearson's statistic with ``df`` degrees of freedom: ``chi2.isf``."""
    return float(stats.chi2.isf(alpha, df))


def chi2_statistic(counts: npt.ArrayLike, p0: npt.ArrayLike) -> float:
    """Pearson's statistic ``sum (O - n p0)^2 / (n p0)``."""
    o = np.asarray(counts, dtype=np.float64)
    e = o.sum() * np.asarray(p0, dtype=np.float64)
    return float(np.sum((o - e) ** 2 / e))


def chi2_rejects(sample: npt.ArrayLike, bins: Bins, alpha: float = ALPHA) -> bool:
    """``True`` when Pearson's test at level ``alpha`` rejects ``bins.p0`` for ``sample``."""
    return chi2_statistic(bins.counts(sample), bins.p0) > chi2_critical(bins.df, alpha)


def chi2_power(n: int, p0: npt.ArrayLike, p1: npt.ArrayLike, alpha: float = ALPHA) -> float:
    """Approximate power of Pearson's test of ``p0`` when the truth is ``p1`` (non-central chi2)."""
    a, b = np.asarray(p0, dtype=np.float64), np.asarray(p1, dtype=np.float64)
    lam = n * float(np.sum((b - a) ** 2 / a))
    df = a.size - 1
    return float(stats.ncx2(df, lam).sf(chi2_critical(df, alpha)))


def chi2_categorical(
    counts: Sequence[int] | npt.ArrayLike, p0: npt.ArrayLike, alpha: float = ALPHA
) -> tuple[float, float]:
    """(statistic, critical value) for categorical counts against probabilities ``p0``.

    Categories expected to hold fewer than ``MIN_EXPECTED`` counts are pooled into one.
    """
    o = np.asarray(counts, dtype=np.float64)
    p = np.asarray(p0, dtype=np.float64)
    n = o.sum()
    small = n * p < MIN_EXPECTED
    if small.any():
        o = np.concatenate([o[~small], [o[small].sum()]])
        p = np.concatenate([p[~small], [p[small].sum()]])
        if p[-1] * n < MIN_EXPECTED and p.size > 2:  # fold a still-small pool into the largest
            j = int(np.argmax(p[:-1]))
            o[j] += o[-1]
            p[j] += p[-1]
            o, p = o[:-1], p[:-1]
    return chi2_statistic(o, p), chi2_critical(p.size - 1, alpha)


# ---------------------------------------------------------------------------------------------
# Binomial critical values (coverage tests)
# ---------------------------------------------------------------------------------------------
def binom_low_critical(n: int, p: float, alpha: float = ALPHA) -> int:
    """Largest ``c`` with ``P(Binomial(n, p) < c) <= alpha``: a count below it rejects
    ``H0: success rate >= p`` at level ``alpha``."""
    c = int(stats.binom.ppf(alpha, n, p))
    while stats.binom.cdf(c, n, p) <= alpha:
        c += 1
    while stats.binom.cdf(c - 1, n, p) > alpha:
        c -= 1
    return c


def binom_high_critical(n: int, p: float, alpha: float = ALPHA) -> int:
    """Smallest ``c`` with ``P(Binomial(n, p) > c) <= alpha``: a count above it rejects
    ``H0: success rate <= p`` at level ``alpha``."""
    c = int(stats.binom.isf(alpha, n, p))
    while stats.binom.sf(c, n, p) > alpha:
        c += 1
    while stats.binom.sf(c - 1, n, p) <= alpha:
        c -= 1
    return c


# ---------------------------------------------------------------------------------------------
# Clopper-Pearson
# ---------------------------------------------------------------------------------------------
def clopper_pearson(k: int, n: int, alpha: float = ALPHA) -> tuple[float, float]:
    """Exact two-sided ``1 - alpha`` confidence interval for a binomial proportion."""
    lo = 0.0 if k == 0 else float(stats.beta.ppf(alpha / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(stats.beta.isf(alpha / 2, k + 1, n - k))
    return lo, hi


def epsilon_lower_bound(k0: int, n0: int, k1: int, n1: int, alpha: float = ALPHA) -> float:
    """A lower bound on epsilon certified by an event seen k0/n0 times under input 0 and k1/n1
    under input 1: ``ln(lower(p0) / upper(p1))`` (and the symmetric ratio), where each bound is
    a Clopper-Pearson bound at ``alpha / 2`` (so both hold together with probability
    ``>= 1 - alpha``). Returns 0 when nothing is certified.
    """
    lo0, hi0 = clopper_pearson(k0, n0, alpha / 2)
    lo1, hi1 = clopper_pearson(k1, n1, alpha / 2)
    best = 0.0
    if lo0 > 0 and hi1 > 0:
        best = max(best, math.log(lo0 / hi1))
    if lo1 > 0 and hi0 > 0:
        best = max(best, math.log(lo1 / hi0))
    # Events with probability 1 - p: use the complement too.
    clo0, chi0 = 1.0 - hi0, 1.0 - lo0
    clo1, chi1 = 1.0 - hi1, 1.0 - lo1
    if clo0 > 0 and chi1 > 0:
        best = max(best, math.log(clo0 / chi1))
    if clo1 > 0 and chi0 > 0:
        best = max(best, math.log(clo1 / chi0))
    return best


def bins_from_cdf(edges: npt.ArrayLike, cdf: Callable[[np.ndarray], np.ndarray]) -> Bins:
    """Bins over the integers with edges ``edges`` and null probabilities from ``cdf(k) = P(X <=
    k)``: ``P(X <= e0)``, ``P(e_{i-1} < X <= e_i)``, ``P(X > e_last)`` (exact, no truncation)."""
    e = np.unique(np.asarray(edges, dtype=np.int64))
    c = np.asarray(cdf(e), dtype=np.float64)
    return Bins(edges=e, p0=np.concatenate([[c[0]], np.diff(c), [1.0 - c[-1]]]))


def quantile_edges(ppf: Callable[[np.ndarray], np.ndarray], nbins: int) -> npt.NDArray[np.int64]:
    """Integer bin edges at the ``i / nbins`` quantiles of a (continuous) reference law."""
    q = np.arange(1, nbins) / nbins
    return np.unique(np.floor(ppf(q)).astype(np.int64))


def lattice_pmf(kind: str, scale: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The integers ``k`` with ``|k| <= 60 scale + 5`` and ``P(Z = k)`` of a discrete noise
    written out independently of dpkit's tails: discrete Laplace ``tanh(1 / (2 t)) e^(-|k| /
    t)``, discrete Gaussian ``e^(-k^2 / (2 sigma^2))`` normalised over the same range (the mass
    left out is below ``e^-1800``)."""
    m = int(60 * scale) + 5
    k = np.arange(-m, m + 1, dtype=np.float64)
    if kind == "discrete_laplace":
        w = math.tanh(0.5 / scale) * np.exp(-np.abs(k) / scale)
    else:
        w = np.exp(-(k * k) / (2.0 * scale * scale))
        w = w / w.sum()
    return k, w
