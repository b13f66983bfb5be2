"""LOLOHA (Arcolezi et al., EDBT 2023): exact privacy of both stages, unbiasedness and the
closed-form variance of its per-round estimator, and the memoisation over a device's lifetime."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from dpkit import ldp
from dpkit.accounting import PureDpAccountant
from dpkit.errors import PrivacyParameterError
from dpkit.ldp import client
from dpkit.noise import RandomSource

ALPHA = 1e-6


def _z_bound(tests: int) -> float:
    """Two-sided normal quantile at ``ALPHA`` shared (Bonferroni) over ``tests`` statistics."""
    return float(stats.norm.isf(ALPHA / (2 * tests)))


def test_paper_g_matches_the_closed_form() -> None:
    # OLOLOHA's optimum (Arcolezi et al. 2023) at eps_inf = 4, eps_1 = 2, then the next prime
    a, b = math.exp(4.0), math.exp(2.0)
    raw = (
        math.sqrt(a**4 - 14 * a**2 - 12 * a**2 * b**2 + 12 * a * b + 12 * a**3 * b + 1)
        - a**2
        + 6 * a
        - 6 * b
        + 1
    ) / (6 * (a - b))
    proto = ldp.LOLOHA(epsilon=2.0, lifetime_epsilon=4.0, domain=50)
    assert proto.g == client.next_prime(round(raw))
    assert ldp.LOLOHA(epsilon=1.0, lifetime_epsilon=1.0, domain=50).g == 2


@pytest.mark.parametrize(("eps", "life"), [(0.5, 1.0), (1.0, 4.0), (2.0, 2.0)])
def test_both_stages_are_exactly_private(eps: float, life: float) -> None:
    proto = ldp.LOLOHA(epsilon=eps, lifetime_epsilon=life, domain=6, g=3)
    bound_first = Fraction(client.exp_bounds(proto.run_epsilon)[1])
    p, q = proto.support_probabilities()
    assert p / ((1 - p) / (proto.g - 1)) <= bound_first
    bound_life = Fraction(client.exp_bounds(proto.lifetime_run_epsilon)[1])
    for key in range(proto.keys):
        laws = [proto.permanent_distribution(v, key) for v in range(6)]
        worst = max(a[y] / c[y] for a in laws for c in laws for y in a)
        assert worst <= bound_life
    acc = PureDpAccountant()
    assert acc.compose(proto.lifetime_event).get_epsilon(0.0) <= life
    assert PureDpAccountant().compose(proto.max_lifetime_event).get_epsilon(0.0) >= (
        proto.g * proto.lifetime_run_epsilon
    )
    assert q == Fraction(1, proto.g)


def test_lifetime_below_epsilon_is_refused() -> None:
    with pytest.raises(PrivacyParameterError):
        ldp.LOLOHA(epsilon=2.0, lifetime_epsilon=1.0, domain=5)
    with pytest.raises(PrivacyParameterError):
        ldp.LOLOHA(epsilon=1.0, domain=5, g=4)  # not prime


def test_device_memoises_key_and_buckets() -> None:
    dev = client.LOLOHA(epsilon=1.0, lifetime_epsilon=3.0, domain=40)
    reports = [dev.randomize(v % 40) for v in range(300)]
    assert len({r[0] for r in reports}) == 1
    assert len(dev._memo) <= dev.g
    # the same value always hashes to the same memoised bucket
    assert dev._memo == {b: dev._memo[b] for b in dev._memo}


def _estimate_z(proto: ldp.LOLOHA, p_used: float, seed: int) -> np.ndarray:
    d, n = proto.d, 400_000
    weights = np.arange(1, d + 1, dtype=float)
    truth = np.round(n * weights / weights.sum()).astype(np.int64)
    values = np.repeat(np.arange(d), truth)
    src = RandomSource(seed=seed, insecure=True)
    rounds = proto.randomize_rounds(np.stack([values, np.roll(values, 7)]), source=src)
    reports = rounds[1]  # the second round: memoised draws reused where buckets repeat
    support = proto.support_counts(reports).astype(float)
    q = 1.0 / proto.g
    est = (support - values.size * q) / (p_used - q)
    true = np.bincount(np.roll(values, 7), minlength=d)
    var = np.array([proto.variance(values.size, c / values.size) for c in true])
    return np.asarray((est - true) / np.sqrt(var))


def test_round_estimator_is_unbiased_with_the_closed_form_variance() -> None:
    proto = ldp.LOLOHA(epsilon=1.0, lifetime_epsilon=2.0, domain=8)
    z = _estimate_z(proto, proto.p, seed=11)
    assert np.max(np.abs(z)) < _z_bound(z.size)


def test_companion_catches_the_permanent_probability_as_p() -> None:
    # a broken server that decodes with the permanent stage's p1 instead of the chained p*
    proto = ldp.LOLOHA(epsilon=1.0, lifetime_epsilon=2.0, domain=8)
    z = _estimate_z(proto, float(proto.permanent_probability), seed=11)
    assert np.max(np.abs(z)) > _z_bound(z.size)


def test_empirical_variance_matches_closed_form() -> None:
    proto = ldp.LOLOHA(epsilon=2.0, lifetime_epsilon=4.0, domain=4, g=3)
    groups, size = 300, 2000
    values = np.tile(np.array([0] * 1000 + [1] * 600 + [2] * 300 + [3] * 100), groups)
    reports = proto.randomize_many(values, source=RandomSource(seed=3, insecure=True))
    hit = reports[:, 1] == proto._buckets(reports[:, 0], np.zeros(values.size, dtype=np.int64))
    support = hit.reshape(groups, size).sum(axis=1).astype(float)
    est = (support - size / proto.g) / (proto.p - 1 / proto.g)
    var = proto.variance(size, 0.5)
    stat = (groups - 1) * est.var(ddof=1) / var  # chi-square with groups - 1 df
    lo, hi = stats.chi2.ppf(ALPHA / 2, groups - 1), stats.chi2.isf(ALPHA / 2, groups - 1)
    assert lo < stat < hi
    assert abs(est.mean() - 1000) < _z_bound(1) * math.sqrt(var / groups)
    # companion: the one-stage GRR variance at epsilon (ignoring the hashing) is rejected
    p = math.exp(2.0) / (math.exp(2.0) + 3)
    wrong = (
        size * (0.5 * p * (1 - p) + 0.5 * (1 - p) / 3 * (1 - (1 - p) / 3)) / (p - (1 - p) / 3) ** 2
    )
    assert not lo < (groups - 1) * est.var(ddof=1) / wrong < hi


def test_malformed_reports_are_counted_and_dropped() -> None:
    proto = ldp.LOLOHA(epsilon=1.0, domain=5)
    good = proto.randomize_many(np.arange(5), source=RandomSource(seed=1, insecure=True))
    bad = [*good.tolist(), [proto.keys, 0], [0, proto.g], "x", [1], None, [0.5, 1]]
    est = proto.estimate(bad)
    assert est.rejected == 6 and est.n == 5


def test_auditor_finds_no_violation_and_catches_an_understated_claim() -> None:
    from dpkit.audit import Claim, audit_ldp

    proto = ldp.LOLOHA(epsilon=1.0, domain=3)
    src = RandomSource(seed=1, insecure=True)
    result = audit_ldp(proto, samples=20_000, source=src, confidence=1 - ALPHA)
    assert not result.violated
    # companion: the same law claimed at half its epsilon is refuted
    low = audit_ldp(
        proto,
        samples=20_000,
        source=RandomSource(seed=2, insecure=True),
        claim=Claim.pure(epsilon=0.3),
        confidence=1 - ALPHA,
    )
    assert low.violated


@pytest.mark.parametrize("name", ["LOLOHA", "RAPPOR"])
def test_lifetime_epsilon_has_one_rule_on_both_sides(name: str) -> None:
    server_cls, device_cls = getattr(ldp, name), getattr(client, name)
    for cls in (server_cls, device_cls):
        assert cls(epsilon=1.5, domain=4).lifetime_epsilon == 3.0  # default 2 epsilon
        assert cls(epsilon=20.0, domain=4).lifetime_epsilon == client.MAX_EPSILON  # capped
        assert cls(epsilon=1.0, domain=4, lifetime_epsilon=1.0).lifetime_epsilon == 1.0
    with pytest.raises(PrivacyParameterError, match="lifetime_epsilon"):
        server_cls(epsilon=2.0, domain=4, lifetime_epsilon=1.0)
    with pytest.raises(ValueError, match="lifetime_epsilon"):
        device_cls(epsilon=2.0, domain=4, lifetime_epsilon=1.0)
    for bad in (math.nan, -1.0, True, "2"):
        with pytest.raises(PrivacyParameterError):
            server_cls(epsilon=1.0, domain=4, lifetime_epsilon=bad)
        with pytest.raises((TypeError, ValueError)):
            device_cls(epsilon=1.0, domain=4, lifetime_epsilon=bad)
