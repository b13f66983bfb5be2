"""One-shot Laplace noisy top-k: exact output law, the approximate (Qiao, Su and Zhang 2021)
calibration, parameters, budgets and the auditor.

Statistical statements: each test rejects a correct law with probability at most ALPHA = 1e-6
(chi-square or exact binomial p-values), and a companion shows the same test rejects the
broken variant with half the noise (seeded sources, so every run sees the same draws).
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import mpmath
import numpy as np
import pytest
from scipy import stats

from dpkit.accounting.budget import Budget
from dpkit.audit import Claim, audit
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.events import ApproxDpEvent, PureDpEvent
from dpkit.mechanisms import NoisyTopK
from dpkit.noise import RandomSource

ALPHA = 1e-6
SCORES = [0.0, 2.0, 4.0, 6.0]


def _src(seed: str) -> RandomSource:
    return RandomSource(seed=f"laplace-topk-{seed}", insecure=True)


def _cdf(x: mpmath.mpf, loc: float, b: mpmath.mpf) -> mpmath.mpf:
    d = (x - loc) / b
    return mpmath.exp(d) / 2 if d < 0 else 1 - mpmath.exp(-d) / 2


def _pdf(x: mpmath.mpf, loc: float, b: mpmath.mpf) -> mpmath.mpf:
    return mpmath.exp(-abs(x - loc) / b) / (2 * b)


@functools.cache
def _law_top2(scores: tuple[float, ...], scale: float) -> dict[tuple[int, int], float]:
    """P(first = i, second = j) = int f_j(y) (1 - F_i(y)) prod_{r != i, j} F_r(y) dy."""
    b = mpmath.mpf(scale)
    points = [-mpmath.inf, *sorted(set(scores)), mpmath.inf]
    out: dict[tuple[int, int], float] = {}
    with mpmath.workdps(20):
        for i, j in itertools.permutations(range(len(scores)), 2):
            rest = [r for r in range(len(scores)) if r not in (i, j)]

            def integrand(y: mpmath.mpf, i: int = i, j: int = j, rest: list[int] = rest) -> Any:
                v = _pdf(y, scores[j], b) * (1 - _cdf(y, scores[i], b))
                for r in rest:
                    v *= _cdf(y, scores[r], b)
                return v

            out[(i, j)] = float(mpmath.quad(integrand, points))
    return out


def _chi2_pvalue(mech: NoisyTopK, law: dict[tuple[int, int], float], n: int, seed: str) -> float:
    draws = mech.release_many(SCORES, count=n, source=_src(seed))
    keys = list(law)
    index = {key: t for t, key in enumerate(keys)}
    counts = np.zeros(len(keys))
    for a, c in zip(*np.unique(draws, axis=0, return_counts=True), strict=True):
        counts[index[(int(a[0]), int(a[1]))]] += c
    expected = np.array([law[key] for key in keys]) * n
    return float(stats.chisquare(counts, expected).pvalue)


def test_exact_law_sums_to_one_and_favours_the_best() -> None:
    mech = NoisyTopK(epsilon=1.0, sensitivity=1.0, k=2, method="laplace")
    law = _law_top2(tuple(SCORES), mech.scale)
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    assert max(law, key=law.__getitem__) == (3, 2)


def test_release_follows_the_exact_law() -> None:
    mech = NoisyTopK(epsilon=1.0, sensitivity=1.0, k=2, method="laplace")
    law = _law_top2(tuple(SCORES), mech.scale)
    assert _chi2_pvalue(mech, law, 200_000, "law") > ALPHA


def test_law_check_catches_half_the_noise() -> None:
    """Companion: a top-k with half the Laplace noise (twice the epsilon) is rejected."""
    good = NoisyTopK(epsilon=1.0, sensitivity=1.0, k=2, method="laplace")
    broken = NoisyTopK(epsilon=2.0, sensitivity=1.0, k=2, method="laplace")
    law = _law_top2(tuple(SCORES), good.scale)
    assert _chi2_pvalue(broken, law, 200_000, "broken") < ALPHA


# ---- the approximate calibration (Qiao, Su and Zhang 2021) -----------------------------------

QSZ_EPS = 0.2  # Theorem 2.2 of Qiao, Su and Zhang holds for epsilon <= 0.2
K_BIG, M_BIG = 400, 401  # 16 ln(401 / 1e-6) = 317 < 400: the approximate scale is the smaller


def _qsz() -> NoisyTopK:
    return NoisyTopK(
        epsilon=QSZ_EPS, sensitivity=1.0, k=K_BIG, method="laplace", delta=1e-6, n_candidates=M_BIG
    )


def test_approximate_scale_and_event() -> None:
    mech = _qsz()
    pure = NoisyTopK(epsilon=QSZ_EPS, sensitivity=1.0, k=K_BIG, method="laplace")
    assert mech.approximate and not pure.approximate
    expected = 8 * math.sqrt(K_BIG * math.log(M_BIG / 1e-6)) / QSZ_EPS  # 8 sqrt(k ln(m/delta))/eps
    assert expected <= mech.scale <= expected * (1 + 1e-7)  # 2 k SLACK / eps = 1.5e-8 relative
    assert mech.scale < pure.scale
    ev = mech.event
    assert isinstance(ev, ApproxDpEvent)
    assert ev.epsilon <= QSZ_EPS and ev.delta <= 1e-6
    Budget(epsilon=QSZ_EPS, delta=1e-6).charge(mech)
    with pytest.raises(BudgetExceededError):
        Budget(epsilon=QSZ_EPS, delta=9e-7).charge(mech)


@pytest.mark.parametrize(
    ("k", "m", "eps", "delta", "monotonic"),
    [
        (2, 10, 1.0, 1e-6, False),  # small k: the pure scale 2k/eps is smaller
        (400, 2000, 1.0, 1e-6, True),  # monotone: pure k/eps is smaller
        (400, 401, 0.21, 1e-6, False),  # epsilon above the theorem's 0.2
        (400, 401, 0.2, 0.1, False),  # delta above the theorem's 0.05
        (1, 1, 0.2, 1e-6, False),  # one candidate: the theorem needs m >= 2
    ],
)
def test_falls_back_to_the_pure_calibration(
    k: int, m: int, eps: float, delta: float, monotonic: bool
) -> None:
    mech = NoisyTopK(
        epsilon=eps,
        sensitivity=1.0,
        k=k,
        method="laplace",
        delta=delta,
        n_candidates=m,
        monotonic=monotonic,
    )
    pure = NoisyTopK(epsilon=eps, sensitivity=1.0, k=k, method="laplace", monotonic=monotonic)
    assert not mech.approximate
    assert isinstance(mech.event, PureDpEvent)
    assert mech.scale == pure.scale


@pytest.mark.parametrize(
    "kwargs",
    [
        {"delta": math.nan, "n_candidates": 10},
        {"delta": -1e-6, "n_candidates": 10},
        {"delta": 1.0, "n_candidates": 10},
        {"delta": "1e-6", "n_candidates": 10},
        {"delta": 1e-6},  # n_candidates missing
        {"delta": 1e-6, "n_candidates": 0},
        {"delta": 1e-6, "n_candidates": 2.5},
        {"n_candidates": 10},  # without delta
        {"delta": 1e-6, "n_candidates": 10, "method": "gumbel"},
        {"delta": 1e-6, "n_candidates": 10, "method": "peeling"},
    ],
)
def test_bad_approximate_parameters_are_refused(kwargs: dict[str, Any]) -> None:
    base: dict[str, Any] = {"epsilon": 1.0, "sensitivity": 1.0, "k": 2, "method": "laplace"}
    base.update(kwargs)
    with pytest.raises(PrivacyParameterError):
        NoisyTopK(**base)


def test_more_candidates_than_declared_are_refused() -> None:
    mech = _qsz()
    with pytest.raises(PrivacyParameterError, match="n_candidates"):
        mech.release(np.zeros(M_BIG + 1))
    assert len(mech.release(np.zeros(M_BIG - 1), source=_src("fewer"))) == K_BIG


def _duel_scores(d: float) -> Any:
    """Candidates 0 and 1 (scores 0 and d) below 399 certain winners: the last place of the
    top 400 goes to the larger noisy score of the two."""
    return np.concatenate([[0.0, d], np.full(M_BIG - 2, 1e7)])


def _p_one_wins(d: float, b: float) -> float:
    """P(d + L1 > L0) for i.i.d. Laplace(b): the difference has CDF 1 - (1 + x/(2b)) e^{-x/b}/2."""
    return 1 - (1 + d / (2 * b)) * math.exp(-d / b) / 2


def _duel_pvalue(mech: NoisyTopK, b: float, n: int, seed: str) -> float:
    d = 1500.0  # about 0.42 of the scale at epsilon 0.2, where the two laws differ most
    draws = mech.release_many(_duel_scores(d), count=n, source=_src(seed))
    wins = int(np.count_nonzero((draws == 1).any(axis=1)))
    assert not np.any((draws == 0).any(axis=1) & (draws == 1).any(axis=1))
    return float(stats.binomtest(wins, n, _p_one_wins(d, b)).pvalue)


def test_approximate_release_uses_its_scale() -> None:
    mech = _qsz()
    assert _duel_pvalue(mech, mech.scale, 4_000, "duel") > ALPHA


def test_scale_check_catches_half_the_noise() -> None:
    """Companion: the same test against the law at half the scale rejects."""
    mech = _qsz()
    assert _duel_pvalue(mech, mech.scale / 2, 4_000, "duel-broken") < ALPHA


# ---- the auditor ------------------------------------------------------------------------------

U = np.array([0.0] + [1.0] * 9)
V = np.array([1.0] + [0.0] * 9)


def test_auditor_certifies_the_pure_laplace_top_k() -> None:
    mech = NoisyTopK(epsilon=1.0, sensitivity=1.0, k=2, method="laplace")
    result = audit(
        mech,
        (U, V),
        samples=40_000,
        claim=Claim.pure(epsilon=mech.epsilon),
        confidence=1 - ALPHA,
        source=_src("audit"),
    )
    assert not result.violated, result.summary()
    assert result.ratio is not None and 0.3 <= result.ratio <= 1.0


def test_auditor_certifies_the_approximate_laplace_top_k() -> None:
    """Audited through the post-processing "is candidate 0 in the released set" (which keeps
    the guarantee), on the duel pair where candidate 0 moves by one."""
    mech = _qsz()
    a = np.concatenate([[0.0, 0.0], np.full(M_BIG - 2, 1e7)])
    b = np.concatenate([[1.0, 0.0], np.full(M_BIG - 2, 1e7)])

    def zero_selected(x: Any, size: int, *, source: RandomSource) -> Any:
        draws = mech.release_many(x, count=size, source=source)
        return (draws == 0).any(axis=1).astype(np.int64)

    class Wrapped:
        def sample(self, x: Any, size: int, *, source: RandomSource) -> Any:
            return zero_selected(x, size, source=source)

    result = audit(
        Wrapped(),
        (a, b),
        samples=20_000,
        claim=Claim.approx(epsilon=QSZ_EPS, delta=1e-6),
        confidence=1 - ALPHA,
        source=_src("audit-approx"),
    )
    assert not result.violated, result.summary()
