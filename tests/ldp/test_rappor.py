"""Memoised randomized response (RAPPOR / L-SUE): exact per-report and lifetime privacy,
memoisation, the estimator's exact variance against simulation over repeated days."""

from __future__ import annotations

import math

import numpy as np
import pytest

from dpkit import ldp
from dpkit.audit import audit_ldp
from dpkit.errors import PrivacyParameterError
from dpkit.ldp import client
from dpkit.noise import RandomSource

Z = 5.33  # two-sided normal quantile at 1e-7 (alpha <= 1e-6)


def _src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


@pytest.mark.parametrize(("eps", "life"), [(0.5, 1.0), (1.0, 4.0), (2.0, 2.0), (0.1, 8.0)])
def test_per_report_and_lifetime_privacy_are_exact(eps: float, life: float) -> None:
    proto = ldp.RAPPOR(epsilon=eps, lifetime_epsilon=life, domain=4)
    assert ldp.check_ldp(proto).holds  # one report: epsilon
    # the permanent vector alone: SUE at the lifetime epsilon, exactly
    p1 = proto.permanent_probability
    assert (p1 / (1 - p1)) ** 2 <= client.exp_bounds(proto.lifetime_run_epsilon)[0]
    p, q = proto.support_probabilities()
    assert q == 1 - p and p <= proto.permanent_probability
    # tight: the per-report ratio is e^eps to within the 2**-64 grid
    assert float((p / q) ** 2) == pytest.approx(math.exp(proto.run_epsilon), rel=1e-12)
    assert proto.lifetime_event.epsilon == proto.lifetime_run_epsilon <= life


def test_device_memoises_the_permanent_vector() -> None:
    device = client.RAPPOR(epsilon=1.0, lifetime_epsilon=3.0, domain=16)
    first = device.permanent(5)
    assert all(device.permanent(5) == first for _ in range(10))
    # with p2 = 1 (epsilon = lifetime) every report is the permanent vector itself
    same = client.RAPPOR(epsilon=2.0, lifetime_epsilon=2.0, domain=16)
    assert same.instantaneous_probability == 1
    assert len({same.randomize(3) for _ in range(20)}) == 1
    # bit frequencies of one device's reports average to its permanent vector, not its value:
    # the lifetime guarantee is the permanent vector's
    reports = [int.from_bytes(bytes.fromhex(device.randomize(5)), "little") for _ in range(3000)]
    p2 = float(device.instantaneous_probability)
    for i in range(16):
        share = sum((r >> i) & 1 for r in reports) / 3000
        expect = p2 if (first >> i) & 1 else 1 - p2
        assert abs(share - expect) <= Z * math.sqrt(expect * (1 - expect) / 3000)


def test_estimates_over_repeated_days_match_the_exact_variance() -> None:
    # a lifetime epsilon close to epsilon: the permanent vectors are far from the truth (their
    # count noise, sd about 110, dwarfs the instantaneous noise of a 600-day average, sd 2.2)
    proto = ldp.RAPPOR(epsilon=1.0, lifetime_epsilon=1.1, domain=8)
    src = _src(3)
    n, days = 4000, 600
    values = np.repeat(np.arange(8), [1600, 800, 600, 400, 300, 200, 60, 40])
    perm = proto.permanent_many(values, source=src)
    est = np.empty((days, 8))
    for t in range(days):
        agg = proto.aggregator()
        agg.add(proto.instantaneous_many(perm, source=src))
        est[t] = agg.estimate().raw_counts
    truth = np.bincount(values, minlength=8)
    # over days (fixed permanent vectors) each day's estimate is unbiased for the count the
    # permanent vectors encode, with the instantaneous variance only; over both stages (fresh
    # devices) for the truth with the exact variance of one report at (p*, 1 - p*).
    day_mean = est.mean(axis=0)
    s_perm = proto.support_counts(perm)
    p, q = proto.p, proto.q
    p2 = float(proto.instantaneous_probability)
    encoded = (s_perm * (2 * p2 - 1) + n * (1 - p2) - n * q) / (p - q)
    var_inst = n * p2 * (1 - p2) / (p - q) ** 2
    assert np.all(np.abs(day_mean - encoded) <= Z * math.sqrt(var_inst / days))
    # companion: the truth is not what repeated reports converge to (memoisation works)
    assert np.any(np.abs(day_mean - truth) > Z * math.sqrt(var_inst / days))
    # fresh devices every round: exact variance of a pure protocol at (p*, q*)
    one = np.array(
        [proto.estimate(proto.randomize_many(values, source=src)).raw_counts for _ in range(400)]
    )
    var = np.array([proto.variance(n, f) for f in truth / n])
    assert np.all(np.abs(one.mean(axis=0) - truth) <= Z * np.sqrt(var / 400))
    ratio = one.var(axis=0, ddof=1) / var
    assert np.all(np.abs(ratio - 1) < Z * math.sqrt(2 / 399))


def test_parameters_and_auditor() -> None:
    with pytest.raises(PrivacyParameterError, match="lifetime_epsilon"):
        ldp.RAPPOR(epsilon=2.0, lifetime_epsilon=1.0, domain=4)
    with pytest.raises(PrivacyParameterError):
        ldp.RAPPOR(epsilon=1.0, lifetime_epsilon=math.nan, domain=4)
    assert ldp.RAPPOR(epsilon=1.0, domain=4).lifetime_epsilon == 2.0
    good = audit_ldp(
        ldp.RAPPOR(epsilon=1.0, lifetime_epsilon=3.0, domain=3),
        samples=20_000,
        confidence=1 - 1e-6,
        source=_src(5),
    )
    assert not good.violated

    class Broken(ldp.RAPPOR):
        """Claims the per-report epsilon but reports the permanent vector (p2 = 1)."""

        def __init__(self) -> None:
            super().__init__(epsilon=3.0, lifetime_epsilon=3.0, domain=3)
            self._epsilon = 1.0

    assert audit_ldp(Broken(), samples=20_000, confidence=1 - 1e-6, source=_src(6)).violated
