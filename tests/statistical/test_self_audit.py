"""Self-audit: dpkit's auditor pointed at every dpkit mechanism and local-DP protocol.

Statistical guarantee
---------------------
Each audit runs at ``confidence = 1 - ALPHA`` with ``ALPHA = 1e-6``: its epsilon (or mu) lower
bound exceeds the mechanism's true value with probability at most 1e-6 (two one-sided
Clopper-Pearson bounds at level ``1 - ALPHA / 2``, union bound; see ``dpkit.audit._audit``).
Since every claim is at least the truth, a correct mechanism is reported "violated" with
probability at most 1e-6 per test. There is no critical value to tabulate: the Clopper-Pearson
quantiles ``B^{-1}(1 - ALPHA/2; k + 1, n - k)`` are exact for every n.

Validity companions: the known-bad corpus (``tests/audit/test_audit.py``) is caught by the very
same audit at the same ALPHA, and the textbook floating-point Laplace is caught by the default
testers while its lattice twin is not.

Power: each test prints and records (``record_property``) the ratio lower bound / claim, the
measure of how close the audit gets. The floors asserted (``MIN_RATIO``) are loose regression
guards far below the observed ratios (0.8 - 0.98 for pure-DP mechanisms at these sizes); the
sources are seeded, so every run sees the same draws.

Claims and their floating-point charges: pure-DP mechanisms claim their own ``.epsilon`` (which
includes dpkit's floating-point charge). The Gaussian claims mu-GDP up to its sampler's pmf
slack ``a = PMF_SLACK``: every output probability is within ``e^{+-a}`` of the ideal one, so
every test has ``beta >= e^-a G_mu(min(1, e^a alpha))``, the curve used here. The discrete
Gaussian claims what dpkit's PLD accountant certifies for its event at delta = 1e-3.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from dpkit import fdp, ldp
from dpkit import mechanisms as mech
from dpkit.audit import AuditResult, Claim, audit, audit_ldp
from dpkit.noise import RandomSource

ALPHA = 1e-6
CONFIDENCE = 1.0 - ALPHA
K = 10  # candidates of the selection mechanisms
# Exponential mechanism / noisy max: the pair (0, 1, ..., 1) vs (1, 0, ..., 0) moves every score
# by one; for the exponential mechanism the loss on output 0 is
# ln(e^{eps/2} (1 + 9 e^{eps/2}) / (e^{eps/2} + 9)) = 0.897 at eps = 1, close to the claim.
U = np.array([0.0] + [1.0] * (K - 1))
V = np.array([1.0] + [0.0] * (K - 1))


def _gaussian_claim(m: mech.Gaussian) -> Claim:
    a = mech.PMF_SLACK
    g = fdp.gdp(m.mu)

    def f(alpha: np.ndarray) -> np.ndarray:
        return math.exp(-a) * np.asarray(g(np.minimum(1.0, math.exp(a) * alpha)))

    return Claim.tradeoff(f, label=f"{m.mu:.6g}-GDP (with sampler slack)")


def _discrete_gaussian_claim(m: mech.DiscreteGaussian) -> Claim:
    from dpkit.accounting.pld import PldAccountant

    eps = PldAccountant().compose(m.event).get_epsilon(1e-3)
    return Claim.approx(epsilon=eps, delta=1e-3)


# name, mechanism factory, pair, claim factory, samples, minimum ratio bound / claim.
# Vector releases are elementwise: (0, 0, 0) vs (1, 0, 0) moves one coordinate by the
# sensitivity (Laplace, L1); 0 vs (1, ..., 1) / sqrt(5) moves the vector by L2 distance 1
# (Gaussian). Both are audited by the classifier tester.
MECHANISMS: list[
    tuple[str, Callable[[], Any], tuple[Any, Any], Callable[[Any], Claim], int, float]
] = [
    (
        "Laplace",
        lambda: mech.Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0),
        (0.0, 1.0),
        lambda m: Claim.pure(epsilon=m.epsilon),
        200_000,
        0.85,
    ),
    (
        "Laplace eps=0.3",
        lambda: mech.Laplace.from_epsilon(epsilon=0.3, sensitivity=2.0),
        (5.0, 7.0),
        lambda m: Claim.pure(epsilon=m.epsilon),
        200_000,
        0.6,
    ),
    (
        "Gaussian mu",
        lambda: mech.Gaussian.from_mu(mu=1.0, sensitivity=1.0),
        (0.0, 1.0),
        _gaussian_claim,
        200_000,
        0.0,
    ),
    (
        "Gaussian eps-delta",
        lambda: mech.Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-5, sensitivity=1.0),
        (0.0, 1.0),
        lambda m: Claim.approx(epsilon=1.0, delta=1e-5),
        200_000,
        0.2,
    ),
    (
        "Laplace vector",
        lambda: mech.Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0),
        (np.zeros(3), np.array([1.0, 0.0, 0.0])),
        lambda m: Claim.pure(epsilon=m.epsilon),
        100_000,
        0.8,
    ),
    (
        "Gaussian vector",
        lambda: mech.Gaussian.from_mu(mu=1.0, sensitivity=1.0),
        (np.zeros(5), np.full(5, 5**-0.5)),
        _gaussian_claim,
        100_000,
        0.0,
    ),
    (
        "DiscreteLaplace",
        lambda: mech.DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1),
        (0, 1),
        lambda m: Claim.pure(epsilon=m.epsilon),
        200_000,
        0.85,
    ),
    (
        "DiscreteGaussian",
        lambda: mech.DiscreteGaussian.from_sigma(sigma=1.0, sensitivity=1),
        (0, 1),
        _discrete_gaussian_claim,
        200_000,
        0.2,
    ),
    (
        "RandomizedResponse",
        lambda: mech.RandomizedResponse.from_epsilon(epsilon=1.0),
        (0, 1),
        lambda m: Claim.pure(epsilon=m.epsilon),
        200_000,
        0.85,
    ),
    (
        "ExponentialMechanism",
        lambda: mech.ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
        (U, V),
        lambda m: Claim.pure(epsilon=m.epsilon),
        40_000,
        0.6,
    ),
    (
        "ReportNoisyMax laplace",
        lambda: mech.ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="laplace"),
        (U, V),
        lambda m: Claim.pure(epsilon=m.epsilon),
        40_000,
        0.6,
    ),
    (
        "ReportNoisyMax exponential",
        lambda: mech.ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="exponential"),
        (U, V),
        lambda m: Claim.pure(epsilon=m.epsilon),
        40_000,
        0.6,
    ),
    (
        "ReportNoisyMax gumbel",
        lambda: mech.ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="gumbel"),
        (U, V),
        lambda m: Claim.pure(epsilon=m.epsilon),
        40_000,
        0.6,
    ),
]

LDP: list[tuple[str, Callable[[], Any]]] = [
    ("RandomizedResponse", lambda: ldp.RandomizedResponse(epsilon=1.0)),
    ("GRR", lambda: ldp.GRR(epsilon=1.0, domain=4)),
    ("SUE", lambda: ldp.SUE(epsilon=1.0, domain=4)),
    ("OUE", lambda: ldp.OUE(epsilon=1.0, domain=4)),
    ("OLH", lambda: ldp.OLH(epsilon=1.0, domain=4)),
    ("BLH", lambda: ldp.BLH(epsilon=1.0, domain=4)),
    ("HadamardResponse", lambda: ldp.HadamardResponse(epsilon=1.0, domain=4)),
    ("Duchi", lambda: ldp.Duchi(epsilon=1.0)),
    ("Piecewise", lambda: ldp.Piecewise(epsilon=1.0)),
    ("Hybrid", lambda: ldp.Hybrid(epsilon=1.0)),
]


def _check(
    result: AuditResult, name: str, min_ratio: float, record_property: Callable[[str, object], None]
) -> None:
    ratio = result.ratio
    shown = "n/a" if ratio is None else f"{ratio:.3f}"
    print(
        f"\n{name}: claim {result.claim.label if result.claim else '-'}, "
        f"epsilon >= {result.epsilon_lower_bound:.4f}, mu >= {result.mu_lower_bound:.4f}, "
        f"ratio {shown}, test {result.tester}"
    )
    record_property("ratio", shown)
    record_property("epsilon_lower_bound", result.epsilon_lower_bound)
    assert not result.violated, result.summary()
    if ratio is not None:
        assert ratio <= 1.0, result.summary()
        assert ratio >= min_ratio, result.summary()


@pytest.mark.parametrize(
    ("name", "make", "pair", "claim", "samples", "min_ratio"),
    MECHANISMS,
    ids=[m[0] for m in MECHANISMS],
)
def test_mechanism_meets_its_claim(
    name: str,
    make: Callable[[], Any],
    pair: tuple[Any, Any],
    claim: Callable[[Any], Claim],
    samples: int,
    min_ratio: float,
    record_property: Callable[[str, object], None],
) -> None:
    m = make()
    result = audit(
        m,
        pair,
        samples=samples,
        claim=claim(m),
        confidence=CONFIDENCE,
        source=RandomSource(seed=f"self-audit {name}", insecure=True),
    )
    _check(result, name, min_ratio, record_property)
    if name in ("Gaussian mu", "Gaussian vector"):
        # the GDP claim is a trade-off callable; compare the mu bound by hand
        assert result.mu_lower_bound <= m.mu
        assert result.mu_lower_bound >= 0.8 * m.mu


@pytest.mark.parametrize(("name", "make"), LDP, ids=[p[0] for p in LDP])
def test_ldp_protocol_meets_its_claim(
    name: str, make: Callable[[], Any], record_property: Callable[[str, object], None]
) -> None:
    protocol = make()
    result = audit_ldp(
        protocol,
        samples=50_000,
        confidence=CONFIDENCE,
        source=RandomSource(seed=f"self-audit ldp {name}", insecure=True),
    )
    assert result.claim == Claim.pure(epsilon=protocol.epsilon)
    _check(result, f"ldp.{name}", 0.75, record_property)


@pytest.mark.parametrize(("name", "make"), LDP, ids=[p[0] for p in LDP])
def test_ldp_client_meets_its_claim(
    name: str, make: Callable[[], Any], record_property: Callable[[str, object], None]
) -> None:
    # The device-side randomizer (standard library, its own CSPRNG, one report per call): the
    # same audit through the plain-callable path, with fewer samples (calls take 3-30 us).
    # Its randomness is not seedable, so the power floor is loose (observed ratios 0.7-0.9).
    protocol = make()
    labels = getattr(protocol, "labels", None)
    domain = list(labels) if isinstance(labels, tuple) else [-1.0, 0.0, 1.0]
    result = audit_ldp(
        protocol.randomize,
        samples=12_000,
        domain=domain,
        claim=Claim.pure(epsilon=protocol.epsilon),
        confidence=CONFIDENCE,
        source=RandomSource(seed=f"self-audit client {name}", insecure=True),
    )
    _check(result, f"ldp client {name}", 0.4, record_property)
