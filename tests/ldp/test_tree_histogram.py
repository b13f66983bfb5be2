"""TreeHist heavy hitters (Bassily et al. 2017, over Hadamard count-mean sketches): exact local
DP, the device runs the server's law, the group law, the variance of a discovered item's count
against its closed form, discovery with covering intervals, malformed reports, the auditor."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpkit import ldp
from dpkit.accounting import PureDpAccountant
from dpkit.audit import audit_ldp
from dpkit.errors import PrivacyParameterError
from dpkit.ldp import client
from dpkit.noise import RandomSource

ALPHA = 1e-6
TINY: dict[str, Any] = {"bits": 3, "lengths": (1, 3), "width": 2, "hashes": 2, "hash_seed": 4}


def _src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


@pytest.mark.parametrize("epsilon", [0.5, 3.0])
def test_exact_ldp_and_the_device_runs_the_server_law(epsilon: float) -> None:
    server = ldp.TreeHistogram(epsilon=epsilon, **TINY)
    device = client.TreeHistogram(epsilon=epsilon, **TINY)
    check = ldp.check_ldp(server)
    assert check.holds and check.laws_sum_to_one and check.inputs == 8
    for v in range(8):
        law = server.report_distribution(v)
        assert device.report_distribution(v) == law
        # the estimation group (index 2) carries half of the mass, each level a quarter
        shares = [sum(p for r, p in law.items() if r[0] == g) for g in range(3)]
        assert shares == [0.25, 0.25, 0.5]
        for _ in range(5):
            assert tuple(device.randomize(v)) in law
    assert PureDpAccountant().compose(server.event).get_epsilon(0.0) <= epsilon


def _group_law_pvalue(proto: Any, seed: int) -> float:
    """Chi-square p-value of the group column of simulated reports against the exact law."""
    n = 60_000
    reports = proto.randomize_many(np.full(n, 5), source=_src(seed))
    law = proto.report_distribution(5)
    expected = [float(sum(p for r, p in law.items() if r[0] == g)) * n for g in range(3)]
    observed = np.bincount(reports[:, 0], minlength=3)
    return float(stats.chisquare(observed, expected).pvalue)


def test_simulated_groups_follow_the_law_and_a_uniform_split_is_caught() -> None:
    proto = ldp.TreeHistogram(epsilon=1.0, **TINY)
    assert _group_law_pvalue(proto, 1) > ALPHA

    class Uniform(ldp.TreeHistogram):
        """Splits the users evenly over all three groups (PEM's law), not half to estimation."""

        def _draw_groups(self, src: RandomSource, size: int) -> Any:
            return src.integers(3, size)

    assert _group_law_pvalue(Uniform(epsilon=1.0, **TINY), 1) < ALPHA


def _estimates(reps: int, n: int, oracle: str) -> tuple[np.ndarray, float, float]:
    """``reps`` estimates of the count of an item held by half of ``n`` users (the others hold
    distinct items, so the sketch's collision term vanishes); a new hash draw each time."""
    heavy, holders = 40_000, n // 2
    out = np.empty(reps)
    for r in range(reps):
        src = _src(100 + r)
        rest = np.setdiff1d(np.unique(src.integers(1 << 16, 2 * n)), [heavy])[: n - holders]
        values = np.concatenate([np.full(holders, heavy), rest])
        proto = ldp.TreeHistogram(**SMALL, oracle=oracle, hash_seed=r)
        hh = proto.heavy_hitters(proto.randomize_many(values, source=src), top=1)
        assert hh.items.tolist() == [heavy]
        out[r] = hh.counts[0]
    proto = ldp.TreeHistogram(**SMALL, oracle=oracle)
    return out, float(holders), proto.variance(n, holders / n)


def _variance_pvalue(values: np.ndarray, variance: float) -> float:
    """Two-sided chi-square test of a normal sample's variance."""
    k = values.size - 1
    stat = k * float(np.var(values, ddof=1)) / variance
    return 2.0 * min(stats.chi2.cdf(stat, k), stats.chi2.sf(stat, k))


SMALL: dict[str, Any] = {"epsilon": 2.0, "bits": 16, "lengths": (8, 16), "width": 8, "hashes": 16}


@pytest.mark.slow
@pytest.mark.parametrize("oracle", ["olh", "hcms"])
def test_variance_of_a_discovered_count_matches_the_closed_form(oracle: str) -> None:
    # power: the broken variance below is 0.53 of the true one; with 200 estimates the sample
    # variance's ratio to it is near 1.9, far beyond chi2(199)'s 1e-6 tail (about 1.55)
    est, truth, var = _estimates(200, 2_000, oracle)
    # unbiased: the mean is within 5.3 standard errors (two-sided 1e-7)
    assert abs(est.mean() - truth) <= 5.33 * math.sqrt(var / est.size)
    assert _variance_pvalue(est, var) > ALPHA
    # companion: the variance of PEM-style scaling from all users (no factor 2) is rejected
    broken = var - ldp.TreeHistogram(epsilon=2.0, bits=16, lengths=(8, 16)).groups[-1].variance(
        2_000, 0.5
    )
    assert _variance_pvalue(est, broken) < ALPHA


def test_discovers_heavy_items_on_a_2_32_domain_with_covering_intervals() -> None:
    src = _src(7)
    heavy = np.array([3_000_000_000, 17, 123_456_789, 4_294_967_295, 65_536])
    share = np.array([0.12, 0.10, 0.09, 0.08, 0.07])
    n = 200_000
    counts = (share * n).astype(int)
    rest = src.integers(1 << 32, n - int(counts.sum()))
    values = np.concatenate([np.repeat(heavy, counts), rest])
    proto = ldp.TreeHistogram(epsilon=4.0, bits=32)
    agg = proto.aggregator()
    for lo in range(0, n, 50_000):
        agg.add(proto.randomize_many(values[lo : lo + 50_000], source=src))
    hh = agg.heavy_hitters(top=5, confidence=1 - ALPHA)
    assert sorted(hh.items.tolist()) == sorted(heavy.tolist())
    truth = dict(zip(heavy.tolist(), counts.tolist(), strict=True))
    for item, lo, hi in zip(hh.items.tolist(), hh.ci_low, hh.ci_high, strict=True):
        assert lo <= truth[item] <= hi
    assert hh.n == n and sum(hh.group_sizes) == n and hh.rejected == 0
    assert len(hh.group_sizes) == len(proto.lengths) + 1
    # the estimation group holds about half of the users
    assert abs(hh.group_sizes[-1] - n / 2) <= 5.33 * math.sqrt(n / 4)
    # a threshold of a tenth of the users keeps only the items above it
    strict = agg.heavy_hitters(top=5, threshold=0.1)
    assert set(strict.items.tolist()) <= {3_000_000_000, 17}


def test_malformed_reports_are_counted_and_dropped() -> None:
    kw: dict[str, Any] = {"bits": 20, "hashes": 16, "width": 64, "oracle": "hcms"}
    proto = ldp.TreeHistogram(epsilon=1.0, **kw)
    device = client.TreeHistogram(epsilon=1.0, **kw)
    agg = proto.aggregator()
    good = [device.randomize(12345) for _ in range(30)]
    groups = len(proto.lengths) + 1
    junk: list[Any] = [
        None,
        [0, 0, 0],
        [groups, 0, 0, 1],
        [-1, 0, 0, 1],
        [0, 16, 0, 1],
        [0, 0, 64, 1],
        [0, 0, 0, 2],
        ["0", 0, 0, 1],
        [True, 0, 0, 1],
        7,
    ]
    assert agg.add(good + junk) == 30
    assert agg.rejected == len(junk) and agg.n == 30
    assert agg.add(np.array([[groups, 0, 0, 1], [0, 0, 0, 1]])) == 1
    assert agg.add(3.5) == 0 and agg.rejected == len(junk) + 2
    agg.heavy_hitters(top=3)  # never raises on a tiny batch
    # OLH reports are (group, j, y): a fourth column or a cell beyond g is malformed
    olh = ldp.TreeHistogram(epsilon=1.0, bits=20, hashes=16, width=8).aggregator()
    assert olh.add([[0, 15, 7], [0, 16, 0], [0, 0, 8], [0, 0, 0, 1], [groups, 0, 0]]) == 1
    assert olh.rejected == 4
    with pytest.raises(PrivacyParameterError):
        agg.merge(ldp.PEM(epsilon=1.0, **kw).aggregator())  # not a TreeHistogram
    for bad in (
        {"bits": 1},
        {"lengths": (4, 3, 20)},
        {"epsilon": math.nan},
        {"epsilon": -1.0},
        {"hashes": 0},
        {"hash_seed": -1},
    ):
        with pytest.raises(PrivacyParameterError):
            ldp.TreeHistogram(**{"epsilon": 1.0, "bits": 20, **bad})
    with pytest.raises(PrivacyParameterError):
        agg.heavy_hitters(threshold=1.5)


def test_auditor_on_the_client() -> None:
    conf = 1.0 - ALPHA
    kw: dict[str, Any] = {"bits": 2, "lengths": (1, 2), "width": 2, "hashes": 2}
    proto = ldp.TreeHistogram(epsilon=1.0, **kw)
    assert not audit_ldp(proto, samples=20_000, confidence=conf, source=_src(3)).violated

    class Broken(ldp.TreeHistogram):
        """Runs its sketches at epsilon 3 while claiming 1."""

        def __init__(self) -> None:
            super().__init__(epsilon=3.0, **kw)
            self._epsilon = 1.0

    assert audit_ldp(Broken(), samples=20_000, confidence=conf, source=_src(4)).violated
