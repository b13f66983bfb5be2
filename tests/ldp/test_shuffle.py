"""Shuffle-model accounting: the clone bound, the exact analysis of randomized response against
brute force over every dataset, the closed form of Feldman, McMillan and Talwar (2021), the
events, and the reference shuffler."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpkit import ldp
from dpkit.accounting import ApproxDpAccountant, PureDpAccountant
from dpkit.errors import PrivacyParameterError, UnsupportedEventError
from dpkit.events import ApproxDpEvent, ComposedEvent
from dpkit.noise import RandomSource


@mpmath.workdps(50)  # restored on return
def _exact_rr_delta(eps: float, eps0: float, n: int) -> float:
    """Brute force: n users answer binary randomized response at eps0; the server sees the
    number of ones. Worst case over every dataset of the other n - 1 users (m of them hold 1)
    and both orders of the neighbouring pair, in 50-digit arithmetic."""
    p = mpmath.e**eps0 / (1 + mpmath.e**eps0)
    e = mpmath.e**eps
    worst = mpmath.mpf(0)
    for m in range(n):
        # law of the other users' count of ones
        ones = [mpmath.binomial(m, i) * p**i * (1 - p) ** (m - i) for i in range(m + 1)]
        zeros = [
            mpmath.binomial(n - 1 - m, i) * (1 - p) ** i * p ** (n - 1 - m - i)
            for i in range(n - m)
        ]
        other = [
            mpmath.fsum(
                ones[i] * zeros[k - i] for i in range(max(0, k - (n - 1 - m)), min(m, k) + 1)
            )
            for k in range(n)
        ]
        # the first user holds 0 (reports 1 with probability 1 - p) or 1
        law0 = [
            (1 - p) * (other[k - 1] if k else 0) + p * (other[k] if k < n else 0)
            for k in range(n + 1)
        ]
        law1 = [
            p * (other[k - 1] if k else 0) + (1 - p) * (other[k] if k < n else 0)
            for k in range(n + 1)
        ]
        for a, b in ((law0, law1), (law1, law0)):
            worst = max(worst, mpmath.fsum(max(0, x - e * y) for x, y in zip(a, b, strict=True)))
    return float(worst)


@pytest.mark.parametrize(("eps0", "n"), [(1.0, 5), (2.0, 12), (0.5, 20), (3.0, 30)])
def test_bounds_hold_against_the_exact_shuffled_randomized_response(eps0: float, n: int) -> None:
    for eps in (0.05, 0.2, 0.5 * eps0, 0.9 * eps0):
        exact = _exact_rr_delta(eps, eps0, n)
        rr = ldp.shuffle_delta(eps, epsilon0=eps0, n=n, method="randomized_response")
        general = ldp.shuffle_delta(eps, epsilon0=eps0, n=n)
        assert exact <= rr <= general
        assert rr < 1.5 * exact + 1e-3  # and not far above it


def test_exact_check_catches_a_wrong_bound() -> None:
    # companion: the comparison above rejects a bound that pretends every other user is a
    # clone (r = 1), which understates delta
    eps0, n, eps = 1.0, 12, 0.3
    exact = _exact_rr_delta(eps, eps0, n)
    wrong = float(
        sum(stats.binom.pmf(c, n - 1, 1.0) * max(0.0, _pair_delta(eps, eps0, c)) for c in range(n))
    )
    assert wrong < exact


def _pair_delta(eps: float, eps0: float, c: int) -> float:
    alpha = math.exp(eps0) / (1 + math.exp(eps0))
    b = stats.binom.pmf(np.arange(c + 2), c, 0.5)
    prev = np.r_[0.0, b[:-1]]
    p = alpha * b + (1 - alpha) * prev
    q = (1 - alpha) * b + alpha * prev
    return float(np.maximum(p - math.exp(eps) * q, 0.0).sum())


def test_closed_form_is_looser_than_the_numerical_bound() -> None:
    # Feldman, McMillan and Talwar (2021), Theorem 3.1: for eps0 <= log(n / (16 log(2/delta)))
    # eps <= log(1 + (e^eps0 - 1)/(e^eps0 + 1) (8 sqrt(e^eps0 log(4/delta)) / sqrt(n)
    #                                           + 8 e^eps0 / n))
    delta = 1e-6
    for eps0, n in ((1.0, 10_000), (2.0, 100_000), (4.0, 300_000), (0.5, 1_000)):
        closed = math.log1p(
            (math.exp(eps0) - 1)
            / (math.exp(eps0) + 1)
            * (8 * math.sqrt(math.exp(eps0) * math.log(4 / delta) / n) + 8 * math.exp(eps0) / n)
        )
        num = ldp.shuffled_epsilon(epsilon0=eps0, n=n, delta=delta)
        assert num < closed
        assert ldp.shuffle_delta(num, epsilon0=eps0, n=n) <= delta
        # not loose by more than the bisection tolerance
        assert ldp.shuffle_delta(num * (1 - 3e-6), epsilon0=eps0, n=n) > delta


def test_amplification_grows_with_n_and_randomized_response_is_tighter() -> None:
    eps = [ldp.shuffled_epsilon(epsilon0=2.0, n=n, delta=1e-8) for n in (1_000, 10_000, 10**5)]
    assert eps[0] > eps[1] > eps[2]
    assert eps[2] < 0.25  # about sqrt(e^2 log(1/delta) / n) scale
    rr = ldp.shuffled_epsilon(epsilon0=2.0, n=10**5, delta=1e-8, method="randomized_response")
    assert rr < eps[2]
    # tiny n: no amplification beyond epsilon0
    assert ldp.shuffled_epsilon(epsilon0=2.0, n=1, delta=1e-8) == pytest.approx(2.0, rel=1e-8)


def test_bound_is_an_event_that_composes() -> None:
    proto = ldp.OUE(epsilon=2.0, domain=50)
    bound = ldp.ShuffleBound.of(proto, n=20_000, delta=1e-7)
    assert bound.method == "clones" and bound.epsilon0 >= proto.run_epsilon
    assert isinstance(bound.event, ApproxDpEvent) and bound.event.delta == 1e-7
    assert bound.epsilon < 1.0
    rr = ldp.ShuffleBound.of(ldp.RandomizedResponse(epsilon=2.0), n=20_000, delta=1e-7)
    assert rr.method == "randomized_response" and rr.epsilon < bound.epsilon
    # the pure accountant refuses an approximate event; basic composition adds them up
    with pytest.raises(UnsupportedEventError):
        PureDpAccountant().compose(bound.event)
    acc = ApproxDpAccountant().compose(ComposedEvent(events=(bound.event, rr.event)))
    assert acc.get_epsilon(2e-7) == pytest.approx(bound.epsilon + rr.epsilon, rel=1e-12)
    assert acc.get_epsilon(2e-7) >= bound.epsilon + rr.epsilon
    for bad in (
        {"n": 0},
        {"delta": 0.0},
        {"delta": math.nan},
        {"epsilon0": -1.0},
        {"method": "magic"},
    ):
        kw = {"epsilon0": 1.0, "n": 100, "delta": 1e-6, **bad}
        with pytest.raises(PrivacyParameterError):
            ldp.ShuffleBound.compute(**kw)  # type: ignore[arg-type]


def test_shuffler_is_uniform() -> None:
    # all 24 orders of 4 items, 24,000 shuffles: chi-square at alpha 1e-6 (23 dof: 62.0)
    counts: dict[tuple[int, ...], int] = {}
    for _ in range(24_000):
        key = tuple(ldp.shuffle([0, 1, 2, 3]))
        counts[key] = counts.get(key, 0) + 1
    assert len(counts) == 24
    chi2 = sum((c - 1000) ** 2 / 1000 for c in counts.values())
    assert chi2 < stats.chi2.isf(1e-6, 23)
    # companion: a biased shuffler (a swap skipped half the time) is rejected
    biased: dict[tuple[int, ...], int] = {}
    rng = np.random.default_rng(1)
    for _ in range(24_000):
        items = [0, 1, 2, 3]
        for i in range(3, 0, -1):
            j = int(rng.integers(i + 1)) if rng.random() < 0.5 else i
            items[i], items[j] = items[j], items[i]
        biased[tuple(items)] = biased.get(tuple(items), 0) + 1
    assert sum((biased.get(k, 0) - 1000) ** 2 / 1000 for k in counts) > stats.chi2.isf(1e-6, 23)
    arr = np.arange(1000).reshape(500, 2)
    out = ldp.shuffle(arr, source=RandomSource(seed=3, insecure=True))
    assert sorted(out[:, 0].tolist()) == list(range(0, 1000, 2))
    assert np.array_equal(out[:, 1] - out[:, 0], np.ones(500, dtype=int))
    assert not np.array_equal(out, arr)
