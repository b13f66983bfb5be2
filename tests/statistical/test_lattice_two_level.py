"""The two-level lattice Laplace sampler (t >= 2**13) has the law of rint(t L).

rint(tL) for t large: P(|Z| >= k) = exp(-(k - 1/2)/t) for k >= 1 (exact tail of the rounded
Laplace). Tests, each at alpha = 1e-6:
* KS of |Z| against that exact discrete CDF, via the continuous transform: for the rounded law,
  the randomised PIT is uniform; we instead test the coarse law on 200 equiprobable bins of |Z|
  with a chi-square (critical value chi2.isf(1e-6, 199)).
* the fine structure: Z mod w (w the split width) must be uniform up to factors exp(+-w/t);
  chi-square on the w residues (critical value chi2.isf(1e-6, w - 1)).
Validity companions feed the same tests a sampler with the fine part dropped (Z = w C) and one
with a 5% scale error, and require rejection.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from dpkit.noise import RandomSource, laplace_lattice_noise

ALPHA = 1e-6
N = 400_000
T = 2.0**16 * 1.37  # two-level path: w = 2**4, r = t / w in [2**12, 2**13)
W = 16


def _abs_tail(k: np.ndarray, t: float) -> np.ndarray:
    """P(|Z| >= k) of the rounded Laplace, k >= 1; and 1 at k = 0."""
    return np.where(k <= 0, 1.0, np.exp(-(k - 0.5) / t))


def _coarse_statistic(z: np.ndarray, t: float) -> tuple[float, float]:
    edges_p = np.linspace(0.0, 1.0, 201)[1:-1]
    # integer edges: smallest k with P(|Z| >= k) <= 1 - p
    ks = np.ceil(0.5 - t * np.log(1.0 - edges_p)).astype(np.int64)
    cuts = np.concatenate(([0], ks, [np.iinfo(np.int64).max]))
    upper_tail = _abs_tail(cuts.astype(np.float64), t)
    upper_tail[-1] = 0.0
    probs = upper_tail[:-1] - upper_tail[1:]
    counts = np.histogram(np.abs(z), bins=cuts.astype(np.float64))[0]
    expected = probs * z.size
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    return chi2, float(stats.chi2.isf(ALPHA, probs.size - 1))


def _fine_statistic(z: np.ndarray) -> tuple[float, float]:
    counts = np.bincount(np.mod(np.abs(z), W), minlength=W).astype(np.float64)
    # Residues are uniform up to exp(+-W/T) ~ 1 +- 2e-4: negligible against 1/sqrt(N/W) ~ 6e-3.
    expected = np.full(W, z.size / W)
    return float(((counts - expected) ** 2 / expected).sum()), float(stats.chi2.isf(ALPHA, W - 1))


def test_two_level_matches_rounded_laplace() -> None:
    z = laplace_lattice_noise(RandomSource(seed=11, insecure=True), t=T, size=N)
    chi2, crit = _coarse_statistic(z, T)
    assert chi2 < crit
    chi2, crit = _fine_statistic(z)
    assert chi2 < crit
    assert abs(np.mean(z)) < 6 * math.sqrt(2.0) * T / math.sqrt(N)


def test_validity_rejects_dropped_fine_part() -> None:
    z = laplace_lattice_noise(RandomSource(seed=12, insecure=True), t=T, size=N)
    broken = (z // W) * W
    chi2, crit = _fine_statistic(broken)
    assert chi2 > crit


def test_validity_rejects_five_percent_scale_error() -> None:
    # Power: chi-square non-centrality for a 5% scale error over 200 equiprobable bins is about
    # N * 0.0025 * 0.6 ~ 600 >> critical value ~ 295.
    z = laplace_lattice_noise(RandomSource(seed=13, insecure=True), t=T * 1.05, size=N)
    chi2, crit = _coarse_statistic(z, T)
    assert chi2 > crit
