"""LDP estimators are unbiased and their spread is the stated variance, at alpha = 1e-6.

Setup: a fixed population (n users, known true counts) is randomized and aggregated R times
independently; run r gives the estimate ``c_hat[r, v]`` of each item's count. Under H0 (the
estimator is unbiased with variance ``s_v^2 = protocol.variance(n, f_v)``):

* mean test, per item: ``z_v = (mean_r c_hat[r, v] - c_v) / (s_v / sqrt(R))`` is N(0, 1) (a sum of
  ``R n`` independent bounded terms; CLT);
* spread test, per item: ``Q_v = sum_r (c_hat[r, v] - c_v)^2 / s_v^2`` is chi-square with R
  degrees of freedom (each term has mean exactly 1; its excess kurtosis is that of a sum of n
  Bernoullis, below 0.02 here, which changes the spread of ``Q_v`` by under 0.5%).

Critical values: 2 d tests per protocol (a mean and a spread test per item) share alpha = 1e-6 by
Bonferroni, so each runs at ``alpha / (2 d)``, two-sided:
``|z_v| > z* = Phi^{-1}(1 - alpha / (4 d))`` (5.41 for d = 8) and
``Q_v`` outside ``[chi2.ppf(alpha / (4 d), R), chi2.isf(alpha / (4 d), R)]`` (for R = 4000 about
``[3418, 4631]``). The mean mechanisms use one mean and one spread test on the mean estimate
(``alpha / 2`` each).

Validity companions feed the same tests broken versions and require a rejection: an OUE whose
clients use epsilon + 0.05 while the server assumes epsilon (bias), a variance that drops the
frequency term ``n f (1 - p - q) / (p - q)`` (spread), Duchi decoded with the B of epsilon + 0.1
(bias) and Duchi's variance without its ``- t^2`` term (spread). The sources are seeded
(``insecure=True``), so each run sees the same draws.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpkit import ldp
from dpkit.noise import RandomSource

ALPHA = 1e-6
R = 4000
COUNTS = np.array([200, 120, 80, 50, 30, 20, 0, 0])  # n = 500 users over d = 8 items
N, D = int(COUNTS.sum()), COUNTS.size
X = np.repeat(np.arange(D), COUNTS)


def _crit(tests: int) -> tuple[float, float, float]:
    a = ALPHA / (2 * tests)  # per tail
    return float(stats.norm.isf(a)), float(stats.chi2.ppf(a, R)), float(stats.chi2.isf(a, R))


def _runs(proto: Any, seed: int, randomizer: Any = None) -> np.ndarray:
    """``c_hat[r, v]`` over R independent runs, through the public aggregator."""
    src = RandomSource(seed=seed, insecure=True)
    reports = (randomizer or proto).randomize_many(np.tile(X, R), source=src)
    out = np.empty((R, D))
    for r in range(R):
        agg = proto.aggregator()
        agg.add(reports[r * N : (r + 1) * N])
        out[r] = agg.estimate().raw_counts
    return out


def _frequency_tests(est: np.ndarray, var: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-item z of the mean and Q of the spread."""
    err = est - COUNTS[None, :]
    z = err.mean(axis=0) / np.sqrt(var / R)
    q = (err**2 / var[None, :]).sum(axis=0)
    return z, q


def _rejects(z: np.ndarray, q: np.ndarray, tests: int) -> tuple[bool, bool]:
    zc, lo, hi = _crit(tests)
    return bool((np.abs(z) > zc).any()), bool(((q < lo) | (q > hi)).any())


PROTOCOLS: list[Callable[[], Any]] = [
    lambda: ldp.GRR(epsilon=1.0, domain=D),
    lambda: ldp.SUE(epsilon=1.0, domain=D),
    lambda: ldp.OUE(epsilon=1.0, domain=D),
    lambda: ldp.OLH(epsilon=1.0, domain=D),
    lambda: ldp.OLH(epsilon=2.0, domain=D),
    lambda: ldp.BLH(epsilon=1.0, domain=D),
    lambda: ldp.HadamardResponse(epsilon=1.0, domain=D),
]


@pytest.mark.parametrize("make", PROTOCOLS, ids=lambda m: repr(m()))
def test_frequency_estimates_unbiased_with_stated_variance(make: Callable[[], Any]) -> None:
    proto = make()
    est = _runs(proto, seed=zlib.crc32(repr(proto).encode()))
    var = np.array([proto.variance(N, f) for f in COUNTS / N])
    z, q = _frequency_tests(est, var)
    bias, spread = _rejects(z, q, 2 * D)
    assert not bias, z
    assert not spread, q / R


def test_randomized_response_unbiased_with_stated_variance() -> None:
    rr = ldp.RandomizedResponse(epsilon=1.0)
    src = RandomSource(seed=7, insecure=True)
    x = (np.arange(N) < 180).astype(np.int64)  # 180 "yes" among 500
    reports = rr.randomize_many(np.tile(x, R), source=src).reshape(R, N)
    n1 = reports.sum(axis=1)
    pi_hat = np.array([rr.proportion(N, int(k)) for k in n1])
    err = pi_hat * N - 180
    var = rr.variance(N, 180 / N)
    z = err.mean() / math.sqrt(var / R)
    qs = float((err**2).sum() / var)
    zc, lo, hi = _crit(2)
    assert abs(z) < zc and lo < qs < hi


class _DriftingOUE(ldp.OUE):
    """Clients randomize with epsilon + 0.05 while the server estimates with epsilon."""

    def __init__(self, *, epsilon: float, domain: int) -> None:
        super().__init__(epsilon=epsilon, domain=domain)
        self._client = ldp.OUE(epsilon=epsilon + 0.05, domain=domain)

    def randomize_many(self, values: Any, source: Any = None) -> Any:
        return self._client.randomize_many(values, source=source)


def test_validity_bias_is_detected() -> None:
    proto = _DriftingOUE(epsilon=1.0, domain=D)
    est = _runs(proto, seed=11)
    var = np.array([proto.variance(N, f) for f in COUNTS / N])
    z, q = _frequency_tests(est, var)
    bias, _ = _rejects(z, q, 2 * D)
    assert bias, z


def test_validity_wrong_variance_is_detected() -> None:
    proto = ldp.GRR(epsilon=1.0, domain=D)
    est = _runs(proto, seed=12)
    wrong = np.full(D, proto.variance(N, 0.0))  # forgets n f (1 - p - q)/(p - q)
    z, q = _frequency_tests(est, wrong)
    _, spread = _rejects(z, q, 2 * D)
    assert spread, q / R
    right = np.array([proto.variance(N, f) for f in COUNTS / N])
    assert _rejects(*_frequency_tests(est, right), 2 * D) == (False, False)


# ------------------------------------------------------------------------------------------
# mean mechanisms
# ------------------------------------------------------------------------------------------
T = np.linspace(-0.9, 1.0, N) ** 3  # fixed values, mean about 0.04, mean square about 0.15


def _mean_runs(
    mech: Any,
    values: np.ndarray,
    seed: int,
    decode: Callable[[np.ndarray], np.ndarray] | None = None,
) -> np.ndarray:
    src = RandomSource(seed=seed, insecure=True)
    reports = mech.randomize_many(np.tile(values, R), source=src)
    if decode is not None:
        return decode(reports).reshape(R, -1).mean(axis=1)
    out = np.empty(R)
    for r in range(R):
        agg = mech.aggregator()
        agg.add(reports[r * values.size : (r + 1) * values.size])
        out[r] = agg.estimate().mean
    return out


def _mean_rejects(means: np.ndarray, truth: float, var: float) -> tuple[bool, bool]:
    zc, lo, hi = _crit(2)
    err = means - truth
    z = err.mean() / math.sqrt(var / R)
    q = float((err**2).sum() / var)
    return abs(z) > zc, not lo < q < hi


@pytest.mark.parametrize(
    "make",
    [
        lambda: ldp.Duchi(epsilon=1.0),
        lambda: ldp.Piecewise(epsilon=1.0),
        lambda: ldp.Piecewise(epsilon=4.0),
        lambda: ldp.Hybrid(epsilon=1.0),
        lambda: ldp.Hybrid(epsilon=0.3),
    ],
    ids=lambda m: repr(m()),
)
def test_mean_estimates_unbiased_with_stated_variance(make: Callable[[], Any]) -> None:
    mech = make()
    means = _mean_runs(mech, T, seed=zlib.crc32(repr(mech).encode()))
    var = mech.variance(N, float(np.mean(T**2)))
    assert _mean_rejects(means, float(T.mean()), var) == (False, False)


def test_validity_mean_bias_is_detected() -> None:
    mech = ldp.Duchi(epsilon=1.0)
    values = np.full(N, 0.5)
    wrong_b = ldp.Duchi(epsilon=1.1).B
    means = _mean_runs(mech, values, seed=21, decode=lambda r: (2.0 * r - 1.0) * wrong_b)
    bias, _ = _mean_rejects(means, 0.5, mech.variance(N, 0.25))
    assert bias


def test_validity_mean_spread_is_detected() -> None:
    mech = ldp.Duchi(epsilon=2.0)
    values = np.where(np.arange(N) % 2 == 0, 0.95, -0.95)
    means = _mean_runs(mech, values, seed=22)
    wrong = mech.B**2 / N  # forgets the - t^2 term
    assert _mean_rejects(means, 0.0, wrong)[1]
    assert _mean_rejects(means, 0.0, mech.variance(N, 0.95**2)) == (False, False)
