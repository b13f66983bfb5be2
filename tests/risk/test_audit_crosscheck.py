"""The risk bounds against the auditor: measured attack rates never beat them, unless the
mechanism is broken.

The auditor (:func:`dpkit.audit.audit`) runs real membership tests on outputs of ``M(x)`` and
``M(x')`` and bounds each test's error rates with Clopper-Pearson intervals that hold jointly
with probability ``1 - ALPHA`` (its ``curve`` points included, Bonferroni inside the audit). A
test's true-positive rate is at least ``1 - beta_upper`` and its false-positive rate at most
``alpha_upper``; if ``1 - beta_upper > max_tpr(alpha_upper)`` for a mechanism that has the
guarantee, the intervals failed (probability at most ALPHA), since ``max_tpr`` is
non-decreasing. Hence: for correct mechanisms the check passes except with probability ALPHA;
for the broken ones of :func:`dpkit.audit.known_bad.corpus` it fails against the guarantee they
claim (the companion showing the check has power).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from dpkit import risk
from dpkit.audit import AuditResult, Claim, audit, known_bad
from dpkit.mechanisms import Gaussian, Laplace
from dpkit.noise import RandomSource

ALPHA = 1e-6


def _src(seed: int) -> RandomSource:
    return RandomSource(seed=f"risk-audit-{seed}", insecure=True)


def _beats_the_bound(result: AuditResult, r: risk.Risk) -> bool:
    """Whether some measured test provably beats ``r`` (both orientations of each test)."""
    for p in (result.point, *result.curve):
        if 1.0 - p.beta_upper > r.max_tpr(p.alpha_upper):
            return True
        if 1.0 - p.alpha_upper > r.max_tpr(p.beta_upper):  # the complement, roles swapped
            return True
    return False


def _risk_of_claim(claim: Claim) -> risk.Risk:
    if claim.kind == "gdp":
        return risk.of(mu=claim.mu)
    return risk.of(epsilon=claim.epsilon, delta=claim.delta or 0.0)


GOOD: list[tuple[str, Any, tuple[Any, Any]]] = [
    ("laplace-eps-1", Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0), (0.0, 1.0)),
    ("gaussian-mu-1", Gaussian.from_mu(mu=1.0, sensitivity=1.0), (0.0, 1.0)),
    ("lattice-laplace", known_bad.LaplaceWrongScale(epsilon=2.0, factor=1.0), (0.0, 1.0)),
]


@pytest.mark.parametrize(("name", "mechanism", "pair"), GOOD, ids=[g[0] for g in GOOD])
def test_measured_attacks_never_beat_the_bound(
    name: str, mechanism: Any, pair: tuple[Any, Any]
) -> None:
    r = risk.of(mechanism) if hasattr(mechanism, "event") else risk.of(epsilon=2.0)
    result = audit(mechanism, pair, samples=40_000, confidence=1.0 - ALPHA, source=_src(1))
    assert not _beats_the_bound(result, r), result.summary()
    # the audit is not idle: its best test has real power against these mechanisms
    assert 1.0 - result.point.beta > result.point.alpha + 0.05


def test_a_broken_mechanism_beats_the_bound_of_its_claim() -> None:
    entry = next(e for e in known_bad.corpus() if e.name == "laplace-half-scale")
    result = audit(
        entry.mechanism,
        entry.pair,
        samples=40_000,
        claim=entry.claim,
        confidence=1.0 - ALPHA,
        source=_src(2),
    )
    assert _beats_the_bound(result, _risk_of_claim(entry.claim)), result.summary()
    # and not the bound of what it really is (epsilon 2)
    assert not _beats_the_bound(result, risk.of(epsilon=entry.true_value))


@pytest.mark.parametrize("entry", known_bad.corpus(), ids=lambda e: e.name)
def test_every_broken_mechanism_beats_the_bound_of_its_claim(entry: Any) -> None:
    result = audit(
        entry.mechanism,
        entry.pair,
        samples=entry.samples,
        claim=entry.claim,
        testers=entry.testers,
        confidence=1.0 - ALPHA,
        source=_src(3),
    )
    assert _beats_the_bound(result, _risk_of_claim(entry.claim)), result.summary()


def test_local_randomized_response_never_beats_its_bound() -> None:
    from dpkit import ldp
    from dpkit.audit import audit_ldp

    rr = ldp.RandomizedResponse(p_truth=0.75)
    r = risk.of(rr)
    assert r.neighbouring.value == "replace"  # a local report: one person's value replaced
    result = audit_ldp(rr, samples=40_000, confidence=1.0 - ALPHA, source=_src(4))
    assert not _beats_the_bound(result, r), result.summary()
    # companion: the same outputs beat the bound of a smaller epsilon (ln 2 < ln 3)
    assert _beats_the_bound(result, risk.of(epsilon=math.log(2.0), neighbouring="replace"))
