"""Apple's sketches (CMS, HCMS) and OLH over public hash functions: exact privacy,
client/server agreement, the exact variance (collision term included)
against simulation, malformed reports, domains too large to list."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from dpkit import ldp
from dpkit.audit import audit_ldp
from dpkit.errors import PrivacyParameterError
from dpkit.ldp import client
from dpkit.noise import RandomSource

ALPHA = 1e-6
Z = 5.33  # two-sided normal quantile at 1e-7 (below ALPHA)
SKETCHES = (ldp.CMS, ldp.HCMS, ldp.OLHSketch)


def _src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


@pytest.mark.parametrize("cls", SKETCHES)
@pytest.mark.parametrize("epsilon", [0.5, 2.0, 8.0])
def test_exact_ldp_ratio(cls: Any, epsilon: float) -> None:
    proto = cls(epsilon=epsilon, domain=6, width=4, hashes=3, hash_seed=11)
    check = ldp.check_ldp(proto)
    assert check.holds and check.laws_sum_to_one
    # the bound is attained (two inputs hashed apart by some function): not a loose claim
    assert check.max_ratio is not None
    assert float(check.max_ratio) == pytest.approx(math.exp(proto.run_epsilon), rel=1e-9)


@pytest.mark.parametrize("cls", SKETCHES)
def test_client_and_server_hash_alike(cls: Any) -> None:
    kw = {"epsilon": 1.0, "domain": 1 << 40, "width": 256, "hashes": 64, "hash_seed": 5}
    server, device = cls(**kw), getattr(client, cls.__name__)(**kw)
    rows = np.array([0, 1, 17, 63] * 3)
    items = np.array([0, 1, 2, 255, 256, 65_535, 1 << 32, (1 << 40) - 1, 12_345_678_901, 7, 8, 9])
    assert server.cells(rows, items).tolist() == [
        device.cell(int(j), int(x)) for j, x in zip(rows, items, strict=True)
    ]


def _collision_trials(cls: Any, trials: int, seed: int) -> tuple[np.ndarray, Any, np.ndarray]:
    """Estimates of item 0 under fresh hash functions per trial: 600 users, item 0 held by 60,
    a heavy item 1 by 300 (heavy collisions) and the rest distinct."""
    counts = np.array([60, 300] + [1] * 240)
    values = np.repeat(np.arange(counts.size), counts)
    src = _src(seed)
    out = np.empty(trials)
    proto = None
    for t in range(trials):
        proto = cls(epsilon=2.0, domain=1 << 20, width=8, hashes=4, hash_seed=seed * 10_000 + t)
        agg = proto.aggregator()
        agg.add(proto.randomize_many(values, source=src))
        out[t] = agg.estimate_items([0]).raw_counts[0]
    return out, proto, counts


@pytest.mark.parametrize("cls", SKETCHES)
def test_variance_with_collisions_matches_simulation(cls: Any) -> None:
    est, proto, counts = _collision_trials(cls, 800, seed=3 + (cls is ldp.HCMS))
    n = int(counts.sum())
    others = float(np.sum(counts[1:] ** 2))
    var = proto.variance(n, counts[0] / n, other_squares=others)
    pure = proto.variance(n, counts[0] / n)
    assert var > 2.0 * pure  # the collision term matters here
    r = est.size
    # unbiased over the draw of the functions
    assert abs(est.mean() - counts[0]) <= Z * math.sqrt(var / r)
    # sample variance vs the exact one, with the standard error of a sample variance
    dev = est - est.mean()
    s2 = float(np.mean(dev**2)) * r / (r - 1)
    se_s2 = math.sqrt(max(float(np.mean(dev**4)) - s2 * s2, 0.0) / r)
    assert abs(s2 - var) <= Z * se_s2
    # companion: the same test rejects the variance without the collision term
    assert abs(s2 - pure) > Z * se_s2


@pytest.mark.parametrize("cls", SKETCHES)
def test_estimates_on_a_huge_domain_and_malformed_reports(cls: Any) -> None:
    proto = cls(epsilon=3.0, domain=1 << 32, width=256, hashes=128, hash_seed=1)
    src = _src(9)
    values = np.concatenate(
        [np.full(3000, 4_000_000_000), np.full(1500, 17), src.integers(1 << 32, 5500)]
    )
    agg = proto.aggregator()
    agg.add(proto.randomize_many(values, source=src))
    device = getattr(client, cls.__name__)(
        epsilon=3.0, domain=1 << 32, width=256, hashes=128, hash_seed=1
    )
    good = [device.randomize(17) for _ in range(50)]
    junk: list[Any] = [
        None,
        "x",
        [1],
        [-1, 0, 0],
        [0, 0, 2],
        [1 << 20, "00"],
        [0, "zz"],
        [True, 0, 1],
        3.5,
    ]
    assert agg.add(good + junk) == 50
    assert agg.rejected == len(junk) and agg.n == 10_050
    assert agg.add(5) == 0 and agg.rejected == len(junk) + 1  # not even a batch
    est = agg.estimate_items([4_000_000_000, 17, 5], confidence=0.999)
    assert est.labels == (4_000_000_000, 17, 5)
    lo, hi = est.ci_low, est.ci_high
    assert lo[0] < 3000 < hi[0] and lo[1] < 1550 < hi[1]
    assert np.all(est.std_errors > 0)
    with pytest.raises(PrivacyParameterError, match="too many to list"):
        agg.estimate()


@pytest.mark.parametrize("cls", SKETCHES)
def test_shards_merge_and_parameters_are_validated(cls: Any) -> None:
    a = cls(epsilon=1.0, domain=100, width=64, hashes=8)
    src = _src(2)
    x = src.integers(100, 4000)
    one, two, whole = a.aggregator(), a.aggregator(), a.aggregator()
    r1, r2 = a.randomize_many(x[:1500], source=src), a.randomize_many(x[1500:], source=src)
    one.add(r1)
    two.add(r2)
    whole.add(r1)
    whole.add(r2)
    assert np.array_equal(one.merge(two).support, whole.support)
    other = cls(epsilon=1.0, domain=100, width=64, hashes=8, hash_seed=1)
    with pytest.raises(PrivacyParameterError):
        a.aggregator().merge(other.aggregator())
    for bad in (
        {"width": 3},
        {"width": 0},
        {"hashes": 0},
        {"hash_seed": -1},
        {"domain": 1},
        {"domain": 1 << 63},
        {"width": True},
    ):
        with pytest.raises(PrivacyParameterError):
            cls(epsilon=1.0, **{"domain": 100, **bad})


@pytest.mark.parametrize("cls", SKETCHES)
def test_auditor_on_the_client(cls: Any) -> None:
    conf = 1.0 - ALPHA
    good = audit_ldp(
        cls(epsilon=1.0, domain=4, width=4, hashes=2, hash_seed=3),
        samples=20_000,
        confidence=conf,
        source=_src(4),
    )
    assert not good.violated

    class Broken(cls):  # type: ignore[misc,valid-type]
        """Keeps the true cell as if epsilon were 3 while claiming 1."""

        def __init__(self) -> None:
            super().__init__(epsilon=3.0, domain=4, width=4, hashes=2, hash_seed=3)
            self._epsilon = 1.0

    bad = audit_ldp(Broken(), samples=20_000, confidence=conf, source=_src(5))
    assert bad.violated


@pytest.mark.parametrize("width", [4, 1 << 10, 1 << 17])
@pytest.mark.parametrize("domain", [2, 257, 70_000, 1 << 20, (1 << 20) + 3, (1 << 33) - 1])
def test_server_tables_hash_the_whole_domain_as_the_client(domain: int, width: int) -> None:
    # the server derives only the table entries an item below the domain size can read, keeps
    # only their cell bits (uint8, uint16 or uint32 by the width) and folds the bytes every item
    # has at 0 into byte 0's table; the largest items (top byte at its maximum) and small ones
    # must still hash as on the device
    kw = {"epsilon": 1.0, "domain": domain, "width": width, "hashes": 5, "hash_seed": domain}
    server, device = ldp.CMS(**kw), client.CMS(**kw)
    items = np.unique(np.r_[0, 1, domain - 1, domain - 2, _src(domain).integers(domain, 40)])
    items = items[(items >= 0) & (items < domain)]
    rows = np.arange(items.size) % 5
    assert server.cells(rows, items).tolist() == [
        device.cell(int(j), int(x)) for j, x in zip(rows, items, strict=True)
    ]
    assert server.all_cells(items)[rows, np.arange(items.size)].tolist() == (
        server.cells(rows, items).tolist()
    )


@pytest.mark.parametrize(
    ("domain", "width", "shape", "dtype"),
    [
        (1 << 20, 16, (3, 256), np.uint8),
        (70_000, 1024, (3, 256), np.uint16),
        (2, 1 << 17, (1, 256), np.uint32),
    ],
)
def test_server_tables_hold_cell_bits_of_the_domain_bytes_only(
    domain: int, width: int, shape: tuple[int, int], dtype: Any
) -> None:
    # 256 entries per byte of the largest item, each in the smallest dtype holding a cell:
    # 2^14 functions over a 2^20 domain take 12 MiB, not 256 MiB of 64-bit entries
    proto = ldp.OLHSketch(epsilon=2.0, domain=domain, width=width, hashes=7)
    tables = proto._tables_np()
    assert tables.shape == (7, *shape)
    assert tables.dtype == dtype
    assert int(tables.max()) < width


@pytest.mark.parametrize(("width", "hashes", "users"), [(1024, 3, 2_000), (8, 2, 1_300), (4, 5, 7)])
def test_cms_statistic_counts_every_bit(width: int, hashes: int, users: int) -> None:
    # the packed counter (8 cells per word, runs of at most 255 reports) against a plain count
    # of the unpacked bits; 2,000 users on 3 functions put more than 255 reports on a function
    proto = ldp.CMS(epsilon=2.0, domain=1 << 20, width=width, hashes=hashes)
    src = _src(width + users)
    reports = proto.randomize_many(src.integers(1 << 20, users), source=src)
    j = reports[:, 0].astype(np.int64) | (reports[:, 1].astype(np.int64) << 8)
    bits = np.unpackbits(reports[:, 2:], axis=1, bitorder="little")[:, :width]
    want = np.zeros((hashes, width), dtype=np.int64)
    for row in range(hashes):
        want[row] = bits[j == row].sum(axis=0)
    assert np.bincount(j, minlength=hashes).max() > 255 or users < 255
    assert proto.statistic(reports).tolist() == want.reshape(-1).tolist()
    # a function whose every report has every bit set: counts beyond one byte carry right
    wide = ldp.CMS(epsilon=2.0, domain=1 << 20, width=64, hashes=2)
    full = np.full((600, 2 + 8), 0xFF, dtype=np.uint8)
    full[:, 0] = full[:, 1] = 0
    assert wide.statistic(full).reshape(2, 64).tolist() == [[600] * 64, [0] * 64]


@pytest.mark.parametrize("width", [4, 1024, 1 << 15])
def test_hcms_support_counts_match_a_direct_count(width: int) -> None:
    # the server's Walsh-Hadamard transform (matrix products up to 2^14 columns, butterflies
    # beyond) against counting, report by report, those that agree with an item's sign
    proto = ldp.HCMS(epsilon=1.0, domain=1 << 20, width=width, hashes=3)
    src = _src(width)
    reports = proto.randomize_many(src.integers(1 << 20, 3_000), source=src)
    items = np.r_[0, (1 << 20) - 1, src.integers(1 << 20, 8)]
    cells = proto.all_cells(items)  # (hashes, items)
    j, col, b = reports[:, 0], reports[:, 1], reports[:, 2]
    sign = np.bitwise_count(cells[j] & col[:, None]) & 1  # 0: the item's coefficient is +1
    want = ((sign == 0) == (b[:, None] == 1)).sum(axis=0)
    assert proto.query(proto.statistic(reports), items).tolist() == want.tolist()


@pytest.mark.parametrize("sparse", [True, False])
@pytest.mark.parametrize(("width", "hashes", "users"), [(1024, 64, 300), (64, 17, 20_000)])
def test_hcms_sparse_and_transformed_queries_agree(
    monkeypatch: pytest.MonkeyPatch, sparse: bool, width: int, hashes: int, users: int
) -> None:
    # the coefficients summed from the non-zero differences (few reports) and read from the
    # transformed table give the same integers as a report-by-report count
    from dpkit.ldp import _sketch

    monkeypatch.setattr(_sketch, "_SPARSE_HADAMARD", 1 << 40 if sparse else 0)
    proto = ldp.HCMS(epsilon=2.0, domain=70_000, width=width, hashes=hashes, hash_seed=3)
    src = _src(users + width)
    reports = proto.randomize_many(src.integers(70_000, users), source=src)
    items = np.r_[0, 69_999, src.integers(70_000, 40)]
    cells = proto.all_cells(items)
    j, col, b = reports[:, 0], reports[:, 1], reports[:, 2]
    sign = np.bitwise_count(cells[j] & col[:, None]) & 1
    want = ((sign == 0) == (b[:, None] == 1)).sum(axis=0)
    assert proto.query(proto.statistic(reports), items).tolist() == want.tolist()


@pytest.mark.parametrize("cls", SKETCHES)
@pytest.mark.parametrize(("domain", "items"), [(1 << 12, 4096), (70_000, 9), ((1 << 40) - 5, 300)])
def test_query_reads_each_functions_cell(cls: Any, domain: int, items: int) -> None:
    # the blocked query (masked tables, then each row's offset) against summing, function by
    # function, the cell table at the server's own hash of each item
    proto = cls(epsilon=1.0, domain=domain, width=16, hashes=37, hash_seed=11)
    src = _src(domain % 1000 + items)
    stat = proto.statistic(proto.randomize_many(src.integers(domain, 2_000), source=src))
    x = np.r_[0, domain - 1, src.integers(domain, items)]
    table = proto._cell_table(stat)
    summed = sum(table[j][proto.cells(j, x)] for j in range(37))
    assert proto.query(stat, x).tolist() == proto._support_from_cells(stat, summed).tolist()


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0, 4.0, 7.0])
def test_olh_sketch_width_and_variance_against_the_closed_form(epsilon: float) -> None:
    # Wang et al. 2017: with keep probability p = e^eps / (e^eps + g - 1) and q = 1/g an item's
    # count has variance n q(1-q)/(p-q)^2 + n_v (1 - p - q)/(p - q) (no heavy collisions),
    # minimised over real g at g = e^eps + 1; the default width is the best power of two
    proto = ldp.OLHSketch(epsilon=epsilon, domain=1 << 30)
    e = math.exp(proto.run_epsilon)

    def closed(g: int, n: int, f: float) -> float:
        p, q = e / (e + g - 1), 1.0 / g
        return n * q * (1 - q) / (p - q) ** 2 + n * f * (1 - p - q) / (p - q)

    widths = [1 << b for b in range(1, 17)]
    assert proto.width == min(widths, key=lambda g: closed(g, 1, 0.0))
    assert (e + 1) / 2 <= proto.width <= 2 * (e + 1)
    for g in (2, proto.width, 4 * proto.width):
        sk = ldp.OLHSketch(epsilon=epsilon, domain=1 << 30, width=g)
        for n, f in ((1, 0.0), (10_000, 0.0), (10_000, 0.3)):
            assert sk.variance(n, f) == pytest.approx(closed(g, n, f), rel=1e-9)
    # the chosen width beats both neighbours of the power-of-two grid
    for g in (proto.width // 2, proto.width * 2):
        if g >= 2:
            assert closed(proto.width, 1, 0.0) <= closed(g, 1, 0.0)
