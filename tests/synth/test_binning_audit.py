"""End-to-end audit of the private binning step on neighbouring tables of people.

D: 300 people with two rows each, ``x`` uniform in [1, 60]; D': D plus one adversarial person
with 200 rows at ``x = 10^6`` (far above everyone: it pushes the range's upper end and every
quantile). The step audited is the whole binning of ``Numeric(bins=4)`` without bounds, under
``max_rows = 2``: the engine's exact range histogram (0 and ``+-2^j``), its noise, the
planner's range read from it (:meth:`Binner.choose_range`), the engine's exact counts over the
``2^16`` candidate bins of that range and the three private quantiles
(:meth:`Binner.release_quantiles`, dpkit's exponential mechanism). The release is the vector
``(lower, upper, q_1, q_2, q_3)``, from which the edges are post-processing. The claim: the
step's whole cost ``rho`` (range plus quantiles), as ``(zcdp_epsilon(rho, delta), delta)``.

Noise. The range histogram's noise is drawn here from a table of the discrete Gaussian pmf
(the same law as dpkit's exact sampler, whose law is tested in tests/noise and in
test_mst.py; the exact sampler is too slow for 2000 releases of 122 cells). The quantiles use
dpkit's own sampler. Salt: every statement is built on sessions seeded alike, so D and D' are
bounded under one salt (stricter than auditing the mixture over salts). Exact counts are
computed once per table and per range the noise yields. Confidence ``1 - 1e-6``. The companion
counts every row (``max_rows = 200``) with the noise sized for 2, and is caught.
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
from dpkit.analytics.binning import RANGE_EDGES, quantile_grid
from dpkit.analytics.marginals import BinPart, marginal_counts
from dpkit.audit import Claim
from dpkit.noise import RandomSource
from dpkit.synth import Numeric
from dpkit.synth._binning import Binner, plan_binning

CONFIDENCE = 1.0 - 1e-6
SAMPLES = 1000
DELTA = 1e-6
M = 2
RHO_BINNING = 0.05  # the binning share of the fit (0.1 of 0.5)
DOMAINS = {"x": Numeric(bins=4)}


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rng = np.random.default_rng(7)
    n = 600
    d = pd.DataFrame({"uid": [f"u{i // 2}" for i in range(n)], "x": rng.uniform(1, 60, n)})
    adv = pd.DataFrame({"uid": ["adv"] * 200, "x": [1e6] * 200})
    return d, pd.concat([d, adv], ignore_index=True)


def _session(frame: pd.DataFrame) -> Session:
    return Session(
        frame,
        privacy_unit="uid",
        budget=Budget(epsilon=1.0),
        source_of_randomness=RandomSource(seed=31, insecure=True),  # same salt for D and D'
    )


def _counts(frame: pd.DataFrame, edges: Any, max_rows: int) -> list[int]:
    (c,) = marginal_counts(_session(frame), [[BinPart("x", edges)]], max_rows=max_rows).run()
    return list(c[:-1])  # the last cell counts missing values


def _dg_table(sigma: float) -> tuple[np.ndarray, np.ndarray]:
    k = int(20 * sigma) + 2
    z = np.arange(-k, k + 1)
    w = np.exp(-(z.astype(np.float64) ** 2) / (2.0 * sigma * sigma))
    return z, np.cumsum(w / w.sum())


def _releases(frame: pd.DataFrame, max_rows: int, seed: int) -> np.ndarray:
    bplan, _ = plan_binning(DOMAINS, RHO_BINNING / 0.1, 0.1, M)  # noise sized for M rows
    (step,) = bplan.steps
    assert step.histogram is not None
    binner = Binner.prepare(_session(frame), DOMAINS, bplan, M)
    exact = np.asarray(_counts(frame, RANGE_EDGES, max_rows), dtype=np.int64)
    z, cdf = _dg_table(step.histogram.scale)
    rng = np.random.default_rng(seed)
    src = RandomSource(seed=seed, insecure=True)
    fine: dict[tuple[float, float], np.ndarray] = {}
    out = np.empty((SAMPLES, 2 + len(step.quantiles)))
    for i in range(SAMPLES):
        noise = z[np.searchsorted(cdf, rng.random(exact.size))]
        lo, hi, _ = binner.choose_range(step, [int(v) for v in exact + noise])
        grid = quantile_grid(lo, hi)
        if (lo, hi) not in fine:
            fine[(lo, hi)] = np.asarray([*_counts(frame, grid, max_rows), 0], dtype=np.int64)
        out[i] = [lo, hi, *binner.release_quantiles(step, grid, fine[(lo, hi)], src)]
    return out


def _claim() -> Claim:
    bplan, _ = plan_binning(DOMAINS, RHO_BINNING / 0.1, 0.1, M)
    return Claim.approx(epsilon=zcdp_epsilon(bplan.rho, DELTA), delta=DELTA)


@pytest.mark.slow
def test_binning_of_a_person_with_many_rows_never_exceeds_its_claim() -> None:
    d, d_prime = _tables()
    a, b = _counts(d, RANGE_EDGES, M), _counts(d_prime, RANGE_EDGES, M)
    assert sum(abs(x - y) for x, y in zip(a, b, strict=True)) == M  # 200 rows, 2 kept
    claim = _claim()
    va, vb = _releases(d, M, seed=1), _releases(d_prime, M, seed=2)
    res = audit_vectors(va, vb, claim, RandomSource(seed=3, insecure=True), SAMPLES, CONFIDENCE)
    print("bounded:", res.summary())
    assert not res.violated
    assert res.epsilon_lower_bound <= claim.epsilon


@pytest.mark.slow
def test_audit_catches_a_binning_without_bounding() -> None:
    """Companion: every row counted (200 for the adversary) with the noise sized for 2."""
    d, d_prime = _tables()
    claim = _claim()
    va, vb = _releases(d, 200, seed=4), _releases(d_prime, 200, seed=5)
    res = audit_vectors(va, vb, claim, RandomSource(seed=6, insecure=True), SAMPLES, CONFIDENCE)
    print("unbounded:", res.summary())
    assert res.violated
    assert res.epsilon_lower_bound > claim.epsilon
