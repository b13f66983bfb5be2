"""The samplers follow the exact report law that the privacy check proved private (alpha = 1e-6).

``check_ldp`` proves the *declared* law (``report_distribution``) private; these tests check that
what the client's ``randomize`` (``secrets``) and the server's ``randomize_many`` (RandomSource)
actually draw is that law. Pearson's chi-square against the exact law, bins with expected count
below 20 merged into one, critical value ``scipy.stats.chi2.isf(1e-6, bins - 1)`` (e.g. 39.5 for
df = 7, 72.7 for df = 31); each test is its own test at alpha = 1e-6.

For unary encodings on a larger domain (d = 300, where the report law has 2^300 points) the
client's bits are tested instead: the true bit, the pooled other bits and their spread (see
``_unary_rejects``), with a companion that feeds clients of a different epsilon.

Validity companion: the same test on draws from a unary encoding with the wrong flipping
probability (``p = e^eps/(e^eps + 1)`` per bit, which is 2 eps-LDP) must reject. The non-central
chi-square power at the sample size used is printed in the assertion; it exceeds 1 - 1e-6.
"""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpkit import ldp
from dpkit.ldp import client
from dpkit.noise import RandomSource

ALPHA = 1e-6
MIN_EXPECTED = 20.0


def _key(proto: Any, report: Any) -> Any:
    return tuple(report) if isinstance(report, list) else report


def _array_reports_to_keys(proto: Any, arr: np.ndarray) -> list[Any]:
    if arr.ndim == 2 and arr.dtype == np.uint8:  # unary encodings: rows of bytes -> hex
        return [row.tobytes().hex() for row in arr]
    if arr.ndim == 2:
        return [tuple(int(v) for v in row) for row in arr]
    return [int(v) for v in arr]


def _chi2(law: dict[Any, Fraction], counts: Counter[Any], n: int) -> tuple[float, int]:
    keys = sorted(law, key=lambda k: float(law[k]), reverse=True)
    exp = np.array([float(law[k]) * n for k in keys])
    obs = np.array([counts.get(k, 0) for k in keys], dtype=float)
    assert sum(counts.values()) == n and set(counts) <= set(law)
    small = exp < MIN_EXPECTED
    if small.any():
        exp = np.append(exp[~small], exp[small].sum())
        obs = np.append(obs[~small], obs[small].sum())
    stat = float(((obs - exp) ** 2 / exp).sum())
    return stat, exp.size - 1


CASES = [
    (lambda: ldp.RandomizedResponse(epsilon=1.0), 1),
    (lambda: ldp.RandomizedResponse(p_truth=0.7), 0),
    (lambda: ldp.GRR(epsilon=1.0, domain=6), 2),
    (lambda: ldp.SUE(epsilon=1.0, domain=5), 3),
    (lambda: ldp.OUE(epsilon=1.0, domain=5), 0),
    (lambda: ldp.OLH(epsilon=1.0, domain=5), 4),
    (lambda: ldp.BLH(epsilon=1.0, domain=5), 2),
    (lambda: ldp.HadamardResponse(epsilon=1.0, domain=6), 5),
    (lambda: ldp.Duchi(epsilon=1.0), Fraction(3, 10)),
    (lambda: ldp.Piecewise(epsilon=1.0, resolution=3), Fraction(-1, 7)),
    (lambda: ldp.Hybrid(epsilon=2.0, resolution=2), Fraction(2, 3)),
]


@pytest.mark.parametrize(("make", "value"), CASES, ids=lambda c: repr(c()) if callable(c) else "")
def test_server_sampler_follows_the_exact_law(make: Any, value: Any) -> None:
    proto = make()
    n = 200_000
    law = proto.report_distribution(value)
    arr = proto.randomize_many(
        [float(value) if isinstance(value, Fraction) else value] * n,
        source=RandomSource(seed=31, insecure=True),
    )
    counts = Counter(_array_reports_to_keys(proto, np.asarray(arr)))
    stat, df = _chi2(law, counts, n)
    assert stat < stats.chi2.isf(ALPHA, df), (stat, df)


@pytest.mark.parametrize(("make", "value"), CASES, ids=lambda c: repr(c()) if callable(c) else "")
def test_client_sampler_follows_the_exact_law(make: Any, value: Any) -> None:
    proto = make()
    n = 20_000
    law = proto.report_distribution(value)
    counts = Counter(_key(proto, proto.randomize(value)) for _ in range(n))
    stat, df = _chi2(law, counts, n)
    assert stat < stats.chi2.isf(ALPHA, df), (stat, df)


class _BrokenSUE(client.SUE):
    def _probabilities(self) -> tuple[Fraction, Fraction]:
        e = client.exp_bounds(self.epsilon)[0]
        p = Fraction(client.floor_scaled(e / (e + 1)), client.SCALE)
        return p, 1 - p


def test_validity_a_wrong_unary_encoding_is_rejected() -> None:
    n = 20_000
    right = ldp.SUE(epsilon=1.0, domain=5)
    broken = _BrokenSUE(epsilon=1.0, domain=5)
    law = right.report_distribution(3)
    wrong = broken.report_distribution(3)
    # power: Pearson's statistic is ~ non-central chi-square with lambda = n sum (p1-p0)^2/p0
    lam = n * sum(float((wrong[k] - law[k]) ** 2 / law[k]) for k in law)
    df = len(law) - 1
    power = stats.ncx2(df, lam).sf(stats.chi2.isf(ALPHA, df))
    assert power > 1 - 1e-6, power
    counts = Counter(broken.randomize(3) for _ in range(n))
    stat, df = _chi2(law, counts, n)
    assert stat > stats.chi2.isf(ALPHA, df), (stat, df)


def _unary_counts(proto: Any, value: int, n: int) -> np.ndarray:
    rows = [np.frombuffer(bytes.fromhex(proto.randomize(value)), dtype=np.uint8) for _ in range(n)]
    bits = np.unpackbits(np.stack(rows), axis=1, bitorder="little")[:, : proto.d]
    return bits.sum(axis=0)


def _unary_rejects(counts: np.ndarray, n: int, value: int, p: float, q: float) -> bool:
    """Three tests sharing alpha = 1e-6 (Bonferroni, alpha/3 each):

    * the true bit: ``z = (c_x - n p) / sqrt(n p (1-p))``, two-sided, ``|z| > norm.isf(alpha/6)``;
    * all other bits pooled: ``z`` of their total against ``n (d-1) q``, same critical value;
    * their spread: Pearson ``sum (c_i - n q)^2 / (n q (1-q))`` over the ``d - 1`` other bits is
      chi-square with ``d - 1`` degrees of freedom; reject above ``chi2.isf(alpha/3, d-1)``.
    """
    zc = stats.norm.isf(ALPHA / 6)
    others = np.delete(counts, value).astype(float)
    z_true = (counts[value] - n * p) / np.sqrt(n * p * (1 - p))
    z_pool = (others.sum() - n * others.size * q) / np.sqrt(n * others.size * q * (1 - q))
    spread = float(((others - n * q) ** 2).sum() / (n * q * (1 - q)))
    return bool(
        abs(z_true) > zc or abs(z_pool) > zc or spread > stats.chi2.isf(ALPHA / 3, others.size)
    )


@pytest.mark.parametrize("cls", [client.SUE, client.OUE])
def test_large_domain_unary_client_bits(cls: Any) -> None:
    proto = cls(epsilon=1.0, domain=300)
    n = 3000
    p, q = (float(v) for v in proto.support_probabilities())
    assert not _unary_rejects(_unary_counts(proto, 7, n), n, 7, p, q)


def test_validity_large_domain_unary_client_with_a_wrong_q() -> None:
    # clients of OUE(epsilon = 1.1) tested against the probabilities of OUE(epsilon = 1):
    # q moves from 0.2689 to 0.2497, so the pooled z is about -0.0192 / sqrt(0.2689 * 0.7311 /
    # (3000 * 299)) = -41, far beyond the critical value 5.3
    wrong = client.OUE(epsilon=1.1, domain=300)
    p, q = (float(v) for v in client.OUE(epsilon=1.0, domain=300).support_probabilities())
    assert _unary_rejects(_unary_counts(wrong, 7, 3000), 3000, 7, p, q)
