"""Apple's sequence fragment puzzle (SFP, over sketches): exact local DP and the device runs
the server's law, the hash that ties fragments together agrees on both sides, discovery of
heavy items with covering intervals (and a wrong hash join caught), malformed reports, the
auditor on the client."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from dpkit import ldp
from dpkit.accounting import PureDpAccountant
from dpkit.audit import audit_ldp
from dpkit.errors import PrivacyParameterError
from dpkit.ldp import client
from dpkit.noise import RandomSource

ALPHA = 1e-6
TINY: dict[str, Any] = {
    "bits": 4,
    "lengths": (2, 4),
    "hash_bits": 1,
    "width": 2,
    "hashes": 2,
    "hash_seed": 9,
}


def _src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


@pytest.mark.parametrize("epsilon", [0.5, 3.0])
def test_exact_ldp_and_the_device_runs_the_server_law(epsilon: float) -> None:
    server = ldp.SFP(epsilon=epsilon, **TINY)
    device = client.SFP(epsilon=epsilon, **TINY)
    check = ldp.check_ldp(server)
    assert check.holds and check.laws_sum_to_one and check.inputs == 16
    # the bound is attained: the ratio is exactly the calibrated epsilon's, not a loose claim
    assert check.max_ratio is not None
    assert float(check.max_ratio) == pytest.approx(math.exp(server.run_epsilon), rel=1e-9)
    for v in range(16):
        law = server.report_distribution(v)
        assert device.report_distribution(v) == law
        # the word group (index 2) carries half of the mass, each fragment group a quarter
        shares = [sum(p for r, p in law.items() if r[0] == g) for g in range(3)]
        assert shares == [0.25, 0.25, 0.5]
        for _ in range(5):
            assert tuple(device.randomize(v)) in law
    assert PureDpAccountant().compose(server.event).get_epsilon(0.0) <= epsilon


def test_fragments_and_their_hash_agree_between_device_and_server() -> None:
    kw: dict[str, Any] = {"epsilon": 1.0, "bits": 32, "hash_seed": 3}
    server, device = ldp.SFP(**kw), client.SFP(**kw)
    assert server.lengths == client.sfp_fragments(32) == (8, 16, 24, 32)
    assert client.sfp_fragments(20) == (7, 14, 20) and client.sfp_fragments(5) == (5,)
    items = np.r_[0, 1, 255, 256, (1 << 32) - 1, _src(1).integers(1 << 32, 40)]
    hashes = server.word_hashes(items)
    assert hashes.tolist() == [device.word_hash(int(x)) for x in items]
    assert hashes.min() >= 0 and hashes.max() < 256
    for g in range(len(server.lengths) + 1):
        want = [device.group_value(g, int(x)) for x in items]
        assert server.group_values(g, items).tolist() == want
    # fragment g of x sits below its hash: (r(x), byte g of x from the top)
    x = 0x12345678
    assert device.group_value(1, x) == (device.word_hash(x) << 8) | 0x34
    assert device.group_value(4, x) == x


def _population(n: int, seed: int) -> tuple[np.ndarray, dict[int, int]]:
    src = _src(seed)
    heavy = np.array([3_000_000_000, 17, 123_456_789, 4_294_967_295, 65_536])
    counts = (np.array([0.12, 0.10, 0.09, 0.08, 0.07]) * n).astype(int)
    rest = src.integers(1 << 32, n - int(counts.sum()))
    values = np.concatenate([np.repeat(heavy, counts), rest])
    return values, dict(zip(heavy.tolist(), counts.tolist(), strict=True))


@pytest.mark.slow
def test_discovers_heavy_items_on_a_2_32_domain_and_a_wrong_join_is_caught() -> None:
    # each heavy item holds at least 7% of 100k users; at epsilon 4 a (hash, fragment) pair's
    # estimate in its group (1/8 of the users) has a standard deviation near 0.3% of the group
    # (64 functions, collisions included): a heavy pair stands more than 20 of them above the
    # pruning bar of 2, and the intervals are at 1 - 1e-6
    n = 100_000
    values, truth = _population(n, 7)
    src = _src(8)
    proto = ldp.SFP(epsilon=4.0, bits=32, hashes=64)
    reports = proto.randomize_many(values, source=src)
    agg = proto.aggregator()
    for lo in range(0, n, 25_000):
        agg.add(reports[lo : lo + 25_000])
    hh = agg.heavy_hitters(top=5, confidence=1 - ALPHA)
    assert sorted(hh.items.tolist()) == sorted(truth)
    for item, lo, hi in zip(hh.items.tolist(), hh.ci_low, hh.ci_high, strict=True):
        assert lo <= truth[item] <= hi
    assert hh.n == n and sum(hh.group_sizes) == n and len(hh.group_sizes) == 5
    assert abs(hh.group_sizes[-1] - n / 2) <= 5.33 * math.sqrt(n / 4)

    class WrongHash(ldp.SFP):
        """Joins fragments under a hash other than the devices' (a seed off by one)."""

        def word_hashes(self, x: Any) -> Any:
            return (super().word_hashes(x) + 1) % 256

    broken = WrongHash(epsilon=4.0, bits=32, hashes=64)
    bad = broken.aggregator()
    bad.add(reports)
    assert not set(bad.heavy_hitters(top=5).items.tolist()) & set(truth)


def test_malformed_reports_are_counted_and_parameters_validated() -> None:
    kw: dict[str, Any] = {"bits": 20, "hashes": 16, "width": 64, "oracle": "hcms"}
    proto = ldp.SFP(epsilon=1.0, **kw)
    device = client.SFP(epsilon=1.0, **kw)
    agg = proto.aggregator()
    good = [device.randomize(12345) for _ in range(30)]
    groups = len(proto.lengths) + 1
    junk: list[Any] = [None, [0, 0, 0], [groups, 0, 0, 1], [0, 16, 0, 1], ["0", 0, 0, 1], 7]
    assert agg.add(good + junk) == 30
    assert agg.rejected == len(junk) and agg.n == 30
    agg.heavy_hitters(top=3)  # never raises on a tiny batch
    with pytest.raises(PrivacyParameterError):
        agg.merge(ldp.TreeHistogram(epsilon=1.0, **kw).aggregator())
    with pytest.raises(PrivacyParameterError):
        ldp.TreeHistogram(epsilon=1.0, **kw).aggregator().merge(agg)
    for bad in (
        {"hash_bits": 0},
        {"hash_bits": 17},
        {"lengths": (3, 20)},  # a 17-bit fragment is too many pairs to enumerate
        {"epsilon": math.nan},
        {"bits": 1},
        {"hash_seed": -1},
    ):
        with pytest.raises(PrivacyParameterError):
            ldp.SFP(**{"epsilon": 1.0, "bits": 20, **bad})
    with pytest.raises(PrivacyParameterError):
        ldp.SfpAggregator(ldp.PEM(epsilon=1.0, bits=20))


def test_auditor_on_the_client() -> None:
    conf = 1.0 - ALPHA
    kw: dict[str, Any] = {"bits": 2, "lengths": (1, 2), "hash_bits": 1, "width": 2, "hashes": 2}
    proto = ldp.SFP(epsilon=1.0, **kw)
    assert not audit_ldp(proto, samples=20_000, confidence=conf, source=_src(3)).violated

    class Broken(ldp.SFP):
        """Runs its sketches at epsilon 3 while claiming 1."""

        def __init__(self) -> None:
            super().__init__(epsilon=3.0, **kw)
            self._epsilon = 1.0

    assert audit_ldp(Broken(), samples=20_000, confidence=conf, source=_src(4)).violated
