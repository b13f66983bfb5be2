"""Heavy hitters over a domain too large to list (PEM over Hadamard count-mean sketches):
exact privacy, client/server agreement, discovery and intervals on a 2^32 domain, malformed
reports, the auditor."""

from __future__ import annotations

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
Z = 5.33  # two-sided normal quantile at 1e-7


def _src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


@pytest.mark.parametrize("epsilon", [0.5, 3.0])
def test_exact_ldp_and_the_device_runs_the_server_law(epsilon: float) -> None:
    kw: dict[str, Any] = {
        "epsilon": epsilon,
        "bits": 3,
        "lengths": (1, 3),
        "width": 2,
        "hashes": 2,
        "hash_seed": 4,
    }
    server, device = ldp.PEM(**kw), client.PEM(**kw)
    check = ldp.check_ldp(server)
    assert check.holds and check.laws_sum_to_one and check.inputs == 8
    for v in range(8):
        law = server.report_distribution(v)
        assert device.report_distribution(v) == law
        for _ in range(5):
            assert tuple(device.randomize(v)) in law
    assert PureDpAccountant().compose(server.event).get_epsilon(0.0) <= epsilon
    reports = server.randomize_many(np.arange(8).repeat(20), source=_src(1))
    assert all(
        tuple(r) in server.report_distribution(int(v))
        for r, v in zip(reports.tolist(), np.arange(8).repeat(20), strict=True)
    )


def test_discovers_heavy_items_on_a_2_32_domain_with_covering_intervals() -> None:
    src = _src(7)
    heavy = np.array([3_000_000_000, 17, 123_456_789, 4_294_967_295, 65_536])
    share = np.array([0.08, 0.06, 0.05, 0.04, 0.03])
    n = 200_000
    counts = (share * n).astype(int)
    rest = src.integers(1 << 32, n - int(counts.sum()))
    values = np.concatenate([np.repeat(heavy, counts), rest])
    pem = ldp.PEM(epsilon=4.0, bits=32, hashes=128)
    agg = pem.aggregator()
    for lo in range(0, n, 50_000):
        agg.add(pem.randomize_many(values[lo : lo + 50_000], source=src))
    hh = agg.heavy_hitters(top=5, confidence=1 - ALPHA)
    assert sorted(hh.items.tolist()) == sorted(heavy.tolist())
    truth = dict(zip(heavy.tolist(), counts.tolist(), strict=True))
    for item, lo, hi in zip(hh.items.tolist(), hh.ci_low, hh.ci_high, strict=True):
        assert lo <= truth[item] <= hi
    assert hh.n == n and sum(hh.group_sizes) == n and hh.rejected == 0
    # companion: the same check rejects the last group's estimates left unscaled to n
    scale = n / hh.group_sizes[-1]
    assert not any(
        lo / scale <= truth[item] <= hi / scale
        for item, lo, hi in zip(hh.items.tolist(), hh.ci_low, hh.ci_high, strict=True)
    )


def test_malformed_reports_are_counted_and_dropped() -> None:
    kw: dict[str, Any] = {"bits": 20, "hashes": 16, "width": 64, "oracle": "hcms"}
    pem = ldp.PEM(epsilon=1.0, **kw)
    device = client.PEM(epsilon=1.0, **kw)
    agg = pem.aggregator()
    good = [device.randomize(12345) for _ in range(30)]
    junk: list[Any] = [
        None,
        [0, 0, 0],
        [9, 0, 0, 1],
        [0, 16, 0, 1],
        [0, 0, 64, 1],
        [0, 0, 0, 2],
        ["0", 0, 0, 1],
        7,
        [True, 0, 0, 1],
    ]
    assert agg.add(good + junk) == 30
    assert agg.rejected == len(junk) and agg.n == 30
    assert agg.add(3.5) == 0 and agg.rejected == len(junk) + 1
    hh = agg.heavy_hitters(top=3)
    assert hh.items.size == 3
    with pytest.raises(PrivacyParameterError):
        agg.merge(ldp.PEM(epsilon=1.0, bits=20, hashes=16, width=64, oracle="olh").aggregator())
    for bad in (
        {"bits": 1},
        {"bits": 63},
        {"lengths": (4, 3, 20)},
        {"lengths": (30,)},
        {"lengths": (8, 12)},
        {"epsilon": float("nan")},
        {"hashes": 0},
        {"oracle": "sfp"},
        {"width": 1},
    ):
        with pytest.raises(PrivacyParameterError):
            ldp.PEM(**{"epsilon": 1.0, "bits": 20, **bad})


def test_auditor_on_the_client() -> None:
    conf = 1.0 - ALPHA
    pem = ldp.PEM(epsilon=1.0, bits=2, lengths=(1, 2), width=2, hashes=2)
    assert not audit_ldp(pem, samples=20_000, confidence=conf, source=_src(3)).violated

    class Broken(ldp.PEM):
        """Runs its sketches at epsilon 3 while claiming 1."""

        def __init__(self) -> None:
            super().__init__(epsilon=3.0, bits=2, lengths=(1, 2), width=2, hashes=2)
            self._epsilon = 1.0

    assert audit_ldp(Broken(), samples=20_000, confidence=conf, source=_src(4)).violated


@pytest.mark.parametrize("epsilon", [0.5, 0.9, 1.0, 2.0, 3.0, 4.0, 8.0])
def test_the_default_oracle_is_olh_when_less_noisy_over_many_functions(epsilon: float) -> None:
    # PEM: OLH over 2^14 public functions (fewer beyond 2^21 cells) of twice the optimal width
    # whenever its noise per prefix is below HCMS's, from epsilon about 1 (issue 26: with 512
    # functions its collision term lost it the comparison at epsilon 2)
    pem = ldp.PEM(epsilon=epsilon, bits=32)
    olh, hcms = (ldp.PEM(epsilon=epsilon, bits=32, oracle=o).groups[0] for o in ("olh", "hcms"))
    noise = {"olh": olh.variance(10_000), "hcms": hcms.variance(10_000)}
    assert pem.oracle == ("olh" if noise["olh"] < noise["hcms"] else "hcms")
    assert pem.oracle == ("olh" if epsilon >= 1.0 else "hcms")
    assert type(pem.groups[0]).__name__ == {"olh": "OLHSketch", "hcms": "HCMS"}[pem.oracle]
    assert client.PEM(epsilon=epsilon, bits=32).oracle == pem.oracle
    g = client.olh_sketch_width(pem.run_epsilon)
    assert (olh.width, olh.hashes) == (2 * g, min(1 << 14, (1 << 21) // (2 * g)))
    assert (hcms.width, hcms.hashes) == (1024, 128)
    if epsilon >= 2.0:  # the collision term's k (g - 1) at least HCMS's, the noise half or less
        assert olh.hashes * (olh.width - 1) >= 128 * 1023
        assert 2.0 * noise["olh"] < noise["hcms"]


@pytest.mark.parametrize(
    ("users", "hashes"),
    [(None, 1 << 14), (1, 512), (131_072, 512), (131_073, 1024), (10**6, 4096), (10**7, 1 << 14)],
)
def test_a_public_population_size_sizes_the_olh_functions(users: int | None, hashes: int) -> None:
    # k >= users / 256 (a power of two in [512, 2^14]) holds the collision term's share of the
    # variance as at 1M users over 4,096 functions; HCMS and an explicit hashes= are left alone
    pem = ldp.PEM(epsilon=2.0, bits=20, users=users)
    assert pem.oracle == "olh" and all(g.hashes == hashes for g in pem.groups)
    assert client.PEM(epsilon=2.0, bits=20, users=users)._groups[0].hashes == hashes
    assert ldp.PEM(epsilon=2.0, bits=20, users=users, hashes=64).groups[0].hashes == 64
    assert ldp.PEM(epsilon=2.0, bits=20, users=users, oracle="hcms").groups[0].hashes == 128


@pytest.mark.parametrize("bad", [0, -5, 2.5, "many", True])
def test_the_population_size_is_validated(bad: Any) -> None:
    with pytest.raises(PrivacyParameterError, match="users"):
        ldp.PEM(epsilon=2.0, bits=20, users=bad)
    with pytest.raises(PrivacyParameterError, match="users"):  # PEM's own parameter
        ldp.TreeHistogram(epsilon=2.0, bits=20, users=1000)


@pytest.mark.parametrize("cls", [ldp.TreeHistogram, ldp.SFP])
@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 3.0, 4.0, 8.0])
def test_tree_and_sfp_keep_olh_for_clearly_less_noise(cls: Any, epsilon: float) -> None:
    # SFP estimates all 2^16 pairs of each fragment group: its sketches (and TreeHistogram's)
    # keep 512 functions of four times the optimal width, and OLH only at 4 times less noise
    proto = cls(epsilon=epsilon, bits=32)
    olh, hcms = (cls(epsilon=epsilon, bits=32, oracle=o).groups[0] for o in ("olh", "hcms"))
    noise = {"olh": olh.variance(10_000), "hcms": hcms.variance(10_000)}
    assert proto.oracle == ("olh" if 4.0 * noise["olh"] <= noise["hcms"] else "hcms")
    assert proto.oracle == ("olh" if epsilon >= 3.0 else "hcms")
    g = client.olh_sketch_width(proto.run_epsilon)
    assert (olh.width, olh.hashes) == (min(4 * g, 1 << 16), 512)
