"""End-to-end audit of MST's measurement step on neighbouring tables of people.

D: 300 people with two rows each; D': D plus one adversarial person with 50 rows, all in one
cell (sex "F", education "phd"). The measurement: the engine's exact 2-way marginal (sex x
education, 12 cells with the missing cells) under ``max_rows = 2`` rows per person, then the
discrete Gaussian noise of MST's selected 2-way marginals (``sigma_2`` of a real plan). The
claim: that one measurement is ``rho = max_rows^2 / (2 sigma_2^2)``-zCDP, so
``(zcdp_epsilon(rho, delta), delta)``-DP at ``delta = 1e-6``.

Salt. Both sessions draw the same salt (same insecure seed); for a fixed salt the bounded tables
differ by at most the adversary's ``max_rows`` kept rows (asserted on the exact counts), so
auditing one salt is stricter than auditing the mixture over salts (see
tests/analytics/test_e2e_audit.py). The exact counts are computed once per table and re-noised
for every sample. Confidence ``1 - 1e-6``: the audit's lower bound exceeds a true claim with
probability at most 1e-6. The companion measures without bounding (the adversary's 50 rows all
counted) with the same noise and is caught.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from _proof import audit_vectors

from dpkit._numeric.zcdp import zcdp_epsilon
from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.audit import Claim
from dpkit.noise import RandomSource
from dpkit.synth import MST, Categorical
from dpkit.synth._measure import marginal_statement
from dpkit.synth.mst import add_noise

CONFIDENCE = 1.0 - 1e-6
SAMPLES = 3000
DELTA = 1e-6
M = 2
DOMAINS = {"sex": Categorical(["F", "M"]), "edu": Categorical(["hs", "ba", "phd"])}


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(6)
    n = 600
    d = pd.DataFrame(
        {
            "uid": [f"u{i // 2}" for i in range(n)],
            "sex": rng.choice(["F", "M", None], n, p=[0.5, 0.45, 0.05]),
            "edu": rng.choice(["hs", "ba", "phd", "x"], n, p=[0.4, 0.3, 0.2, 0.1]),
        }
    )
    adv = pd.DataFrame({"uid": ["adv"] * 50, "sex": ["F"] * 50, "edu": ["phd"] * 50})
    return d, pd.concat([d, adv], ignore_index=True)


def _exact(frame: pd.DataFrame, max_rows: int) -> np.ndarray:
    s = Session(
        frame,
        privacy_unit="uid",
        budget=Budget(epsilon=1.0),
        source_of_randomness=RandomSource(seed=21, insecure=True),  # same salt for D and D'
    )
    (counts,) = marginal_statement(s, DOMAINS, max_rows).run()
    return np.asarray(counts, dtype=np.int64)


def _audit(xa: np.ndarray, xb: np.ndarray, sigma: float, claim: Claim, seed: int) -> Any:
    src = RandomSource(seed=seed, insecure=True)
    va = np.stack([add_noise(xa, sigma, src) for _ in range(SAMPLES)]).astype(np.float64)
    vb = np.stack([add_noise(xb, sigma, src) for _ in range(SAMPLES)]).astype(np.float64)
    coords = [int(j) for j in np.flatnonzero(xa != xb)]  # the cells the person changes
    return audit_vectors(va, vb, claim, src, SAMPLES, CONFIDENCE, coords=coords)


def _sigma_and_claim() -> tuple[float, Claim]:
    plan = MST(DOMAINS, max_rows=M).plan(rho=0.3)
    rho = M * M / (2 * plan.sigma_2**2)
    return plan.sigma_2, Claim.approx(epsilon=zcdp_epsilon(rho, DELTA), delta=DELTA)


@pytest.mark.slow
def test_measurement_of_a_person_with_many_rows_never_exceeds_its_claim() -> None:
    d, d_prime = _tables()
    xa, xb = _exact(d, M), _exact(d_prime, M)
    diff = np.abs(xb - xa)
    assert 1 <= diff.sum() <= M  # the adversary's 50 rows: at most max_rows kept
    sigma, claim = _sigma_and_claim()
    res = _audit(xa, xb, sigma, claim, seed=3)
    print("bounded:", res.summary())
    assert not res.violated
    assert res.epsilon_lower_bound <= claim.epsilon


@pytest.mark.slow
def test_audit_catches_a_measurement_without_bounding() -> None:
    """Companion: every row counted (max_rows = 50) with the noise sized for max_rows = 2."""
    d, d_prime = _tables()
    xa, xb = _exact(d, 50), _exact(d_prime, 50)
    assert np.abs(xb - xa).sum() == 50
    sigma, claim = _sigma_and_claim()
    res = _audit(xa, xb, sigma, claim, seed=4)
    print("unbounded:", res.summary())
    assert res.violated
    assert res.epsilon_lower_bound > claim.epsilon
