"""Noisy top-k: parameters, events that fit their budget, the exact law of the Gumbel pass.

Statistical statements: each chi-square test rejects a correct law with probability at most
ALPHA = 1e-6, and its companion shows the same test rejects a broken variant (seeded sources).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpkit.accounting.budget import Budget
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.mechanisms import ExponentialMechanism, NoisyTopK
from dpkit.noise import RandomSource

ALPHA = 1e-6
SCORES = [0.0, 1.0, 2.0, 3.5]


def _src(seed: str) -> RandomSource:
    return RandomSource(seed=f"topk-{seed}", insecure=True)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilon": math.nan},
        {"epsilon": -1.0},
        {"epsilon": math.inf},
        {"epsilon": "1"},
        {"k": 0},
        {"k": 2.5},
        {"sensitivity": -1.0},
        {"method": "bogus"},
        {"noise": "normal"},
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, Any]) -> None:
    base: dict[str, Any] = {"epsilon": 1.0, "sensitivity": 1.0, "k": 2}
    base.update(kwargs)
    with pytest.raises(PrivacyParameterError):
        NoisyTopK(**base)


@pytest.mark.parametrize("method", ["gumbel", "laplace", "peeling"])
def test_event_fits_the_budget_it_was_calibrated_to(method: str) -> None:
    m = NoisyTopK(epsilon=0.7, sensitivity=1.0, k=3, method=method)
    Budget(epsilon=0.7).charge(m.event)
    with pytest.raises(BudgetExceededError):
        Budget(epsilon=0.69).charge(m.event)
    out = m.release(SCORES, source=_src(method))
    assert len(out) == 3 and len(set(out)) == 3
    assert m.release_many([5.0, 1.0], count=4, source=_src("n")).shape == (4, 2)


def test_gumbel_law_is_peeled_exponential_mechanisms() -> None:
    eps, k = 2.0, 2
    m = NoisyTopK(epsilon=eps, sensitivity=1.0, k=k)
    rankings = list(itertools.permutations(range(len(SCORES)), k))
    law = np.array([m.probability_of(SCORES, r) for r in rankings])
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    # independent reference: each round is the exponential mechanism at eps / k
    em = ExponentialMechanism(epsilon=eps / k, sensitivity=1.0)
    for r, p in zip(rankings, law, strict=True):
        first = em.probabilities(SCORES)[r[0]]
        rest = [s for i, s in enumerate(SCORES) if i != r[0]]
        j = [i for i in range(len(SCORES)) if i != r[0]].index(r[1])
        assert p == pytest.approx(first * em.probabilities(rest)[j], rel=1e-9)
    n = 30_000
    draws = m.release_many(SCORES, count=n, source=_src("law"))
    index = {r: i for i, r in enumerate(rankings)}
    counts = np.bincount([index[tuple(row)] for row in draws.tolist()], minlength=len(law))
    assert stats.chisquare(counts, law * n).pvalue > ALPHA
    # companion: the law at the full epsilon per round (the common mistake of not splitting
    # the budget over the k rounds) is rejected on the same draws
    wrong = NoisyTopK(epsilon=eps * k, sensitivity=1.0, k=k)
    bad = np.array([wrong.probability_of(SCORES, r) for r in rankings])
    assert stats.chisquare(counts, bad * n).pvalue < ALPHA


@pytest.mark.slow
def test_peeling_with_gumbel_noise_has_the_same_law() -> None:
    m = NoisyTopK(epsilon=2.0, sensitivity=1.0, k=2, method="peeling", noise="gumbel")
    ref = NoisyTopK(epsilon=2.0, sensitivity=1.0, k=2)
    rankings = list(itertools.permutations(range(len(SCORES)), 2))
    law = np.array([ref.probability_of(SCORES, r) for r in rankings])
    n = 4_000
    draws = m.release_many(SCORES, count=n, source=_src("peel"))
    index = {r: i for i, r in enumerate(rankings)}
    counts = np.bincount([index[tuple(row)] for row in draws.tolist()], minlength=len(law))
    assert stats.chisquare(counts, law * n).pvalue > ALPHA


def test_probability_of_is_refused_without_a_closed_form() -> None:
    with pytest.raises(PrivacyParameterError):
        NoisyTopK(epsilon=1.0, sensitivity=1.0, k=2, method="laplace").probability_of(
            SCORES, (0, 1)
        )
    with pytest.raises(PrivacyParameterError):
        NoisyTopK(epsilon=1.0, sensitivity=1.0, k=2).probability_of(SCORES, (0, 0))


def test_auditor_certifies_one_shot_gumbel_and_catches_unsplit_budget() -> None:
    # Audit at confidence 1 - 1e-6 on neighbouring scores (each moves by at most 1). The
    # companion claims epsilon for the pass run at k * epsilon (budget not split over k).
    from dpkit.audit import Claim, HistogramTester, audit

    pair = ([0.0, 1.0, 0.0], [1.0, 0.0, 1.0])
    ok = NoisyTopK(epsilon=1.0, sensitivity=1.0, k=2)
    result = audit(
        ok,
        pair,
        samples=20_000,
        claim=Claim.pure(epsilon=1.0),
        testers=(HistogramTester(feature=lambda rows: rows[:, 0] * 3 + rows[:, 1]),),
        confidence=1 - ALPHA,
        source=_src("audit-ok"),
    )
    assert not result.violated, result.summary()
    bad = NoisyTopK(epsilon=8.0, sensitivity=1.0, k=2)
    caught = audit(
        bad,
        pair,
        samples=20_000,
        claim=Claim.pure(epsilon=1.0),
        testers=(HistogramTester(feature=lambda rows: rows[:, 0] * 3 + rows[:, 1]),),
        confidence=1 - ALPHA,
        source=_src("audit-bad"),
    )
    assert caught.violated, caught.summary()
