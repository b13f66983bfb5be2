"""Seed 002's "Theorem 3.13" says Report Noisy Max with exponential noise has the same output
distribution as the exponential mechanism. It does not: exponential noise gives the
permute-and-flip mechanism (McKenna and Sheldon 2020; Ding et al. 2021); Gumbel noise gives the
exponential mechanism. These tests check each sampler against its exact law and show the claimed
law is rejected.

Exact laws. With scale lambda and scores u, noisy score i is u_i + X_i:
* Gumbel noise: P(i) = exp(u_i / lambda) / sum_j exp(u_j / lambda) (Gumbel-max);
* exponential noise: P(i) = int f(x - u_i) prod_{j != i} F(x - u_j) dx with the Exp(lambda) density
  f and CDF F, evaluated by quadrature (two candidates: 1 - exp(-d/lambda)/2 for the better one).

Every test is a chi-square goodness-of-fit test at alpha = 1e-6: with k candidates the critical
value is chi2.isf(1e-6, k - 1) (13.8 for k = 2... computed below, never hard-coded).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpkit.mechanisms import ExponentialMechanism, ReportNoisyMax
from dpkit.noise import RandomSource

ALPHA = 1e-6
N = 60_000
SCORES = np.array([0.0, 1.0, 2.0, 2.5])


def _exponential_noise_law(u: np.ndarray, lam: float) -> np.ndarray:
    def density(i: int, x: float) -> float:
        t = x - u[i]
        if t < 0:
            return 0.0
        val = math.exp(-t / lam) / lam
        for j in range(u.size):
            if j != i:
                val *= max(0.0, 1.0 - math.exp(-(x - u[j]) / lam)) if x > u[j] else 0.0
        return val

    top = float(u.max())
    probs = np.array(
        [
            integrate.quad(
                lambda x, i=i: density(i, x),
                u[i],
                top + 60 * lam,
                points=sorted(set(u.tolist())),
                limit=200,
            )[0]
            for i in range(u.size)
        ]
    )
    return probs


def _gumbel_law(u: np.ndarray, lam: float) -> np.ndarray:
    w = np.exp((u - u.max()) / lam)
    return w / w.sum()


def _chi2(counts: np.ndarray, probs: np.ndarray) -> float:
    expected = probs * counts.sum()
    return float(((counts - expected) ** 2 / expected).sum())


def _critical(k: int) -> float:
    return float(stats.chi2.isf(ALPHA, k - 1))


def test_two_candidate_closed_forms_differ() -> None:
    lam, d = 2.0, 2.0
    pf = _exponential_noise_law(np.array([0.0, d]), lam)[1]
    em = _gumbel_law(np.array([0.0, d]), lam)[1]
    assert pf == pytest.approx(1 - 0.5 * math.exp(-d / lam), abs=1e-9)
    assert em == pytest.approx(1 / (1 + math.exp(-d / lam)), abs=1e-12)
    assert pf - em > 0.08


def test_exponential_noise_matches_permute_and_flip_not_the_exponential_mechanism() -> None:
    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="exponential")
    draws = mech.release_many(SCORES, count=N, source=RandomSource(seed=1, insecure=True))
    counts = np.bincount(draws, minlength=SCORES.size).astype(float)
    pf = _exponential_noise_law(SCORES, mech.scale)
    em = _gumbel_law(SCORES, mech.scale)
    assert pf.sum() == pytest.approx(1.0, abs=1e-8)
    assert _chi2(counts, pf) < _critical(SCORES.size)
    # The claim of seed 002: rejected. Power: the chi-square non-centrality is
    # N * sum((pf - em)^2 / em) (about 1.3e3 here), far beyond the critical value 30.7.
    assert N * float(((pf - em) ** 2 / em).sum()) > 10 * _critical(SCORES.size)
    assert _chi2(counts, em) > _critical(SCORES.size)


@pytest.mark.parametrize(
    "make",
    [
        lambda: ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="gumbel"),
        lambda: ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
    ],
)
def test_gumbel_noise_is_the_exponential_mechanism(make: object) -> None:
    mech = make()  # type: ignore[operator]
    lam = mech.scale if isinstance(mech, ReportNoisyMax) else 1.0 / mech.factor
    draws = mech.release_many(SCORES, count=N, source=RandomSource(seed=2, insecure=True))
    counts = np.bincount(draws, minlength=SCORES.size).astype(float)
    em = _gumbel_law(SCORES, lam)
    if isinstance(mech, ExponentialMechanism):
        np.testing.assert_allclose(mech.probabilities(SCORES), em, rtol=1e-12)
    assert _chi2(counts, em) < _critical(SCORES.size)
    pf = _exponential_noise_law(SCORES, lam)
    assert _chi2(counts, pf) > _critical(SCORES.size)


def test_validity_chi_square_rejects_a_mis_scaled_exponential_mechanism() -> None:
    """The same test catches a mechanism whose noise scale is 25% off (power check)."""
    good = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    broken = ExponentialMechanism(epsilon=1.25, sensitivity=1.0)
    draws = broken.release_many(SCORES, count=N, source=RandomSource(seed=3, insecure=True))
    counts = np.bincount(draws, minlength=SCORES.size).astype(float)
    assert _chi2(counts, good.probabilities(SCORES)) > _critical(SCORES.size)


def test_huge_and_special_scores_never_give_nan() -> None:
    mech = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    scores = [1e308, -1e308, np.nan, np.inf * 0 if False else 5.0, 1e308]
    p = mech.probabilities(scores)
    assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0)
    assert p[2] == 0.0
    picks = mech.release_many(scores, count=200, source=RandomSource(seed=4, insecure=True))
    assert set(np.unique(picks)) <= {0, 4}
    assert mech.release([np.nan, np.nan]) in (0, 1)


# Exact permute-and-flip law (ReportNoisyMax.probabilities, closed form of McKenna and Sheldon
# 2020) against the vectorised sampler, 12 candidates. Chi-square at ALPHA: critical value
# chi2.isf(1e-6, 11) = 44.2 (computed by _critical). Companion: draws of a sampler whose scale
# is 25% off are rejected by the same test; the non-centrality N sum (p' - p)^2 / p is asserted
# to exceed 10 critical values first (a power calculation, not a hope).
PF_SCORES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 5.0])


def test_permute_and_flip_sampler_matches_its_exact_law() -> None:
    mech = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="exponential")
    p = mech.probabilities(PF_SCORES)
    np.testing.assert_allclose(p, _exponential_noise_law(PF_SCORES, mech.scale), rtol=1e-7)
    draws = mech.release_many(PF_SCORES, count=N, source=RandomSource(seed=21, insecure=True))
    counts = np.bincount(draws, minlength=PF_SCORES.size).astype(float)
    assert _chi2(counts, p) < _critical(PF_SCORES.size)


def test_companion_chi_square_rejects_a_mis_scaled_permute_and_flip() -> None:
    good = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="exponential")
    broken = ReportNoisyMax(epsilon=1.25, sensitivity=1.0, noise="exponential")
    p, q = good.probabilities(PF_SCORES), broken.probabilities(PF_SCORES)
    assert N * float(((q - p) ** 2 / p).sum()) > 10 * _critical(PF_SCORES.size)
    draws = broken.release_many(PF_SCORES, count=N, source=RandomSource(seed=22, insecure=True))
    counts = np.bincount(draws, minlength=PF_SCORES.size).astype(float)
    assert _chi2(counts, p) > _critical(PF_SCORES.size)
