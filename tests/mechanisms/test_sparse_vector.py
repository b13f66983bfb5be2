"""Sparse vector: parameters, the one-way stream, the output law, budgets and the auditor.

Statistical statements: every chi-square test rejects a correct law with probability at most
ALPHA = 1e-6; each has a companion showing the same test rejects a broken variant. Audits run at
confidence 1 - 1e-6 (a correct mechanism is reported "violated" with probability <= 1e-6).
Sources are seeded, so every run sees the same draws.
"""

from __future__ import annotations

import copy
import math
import pickle
from typing import Any

import numpy as np
import pytest
from scipy import integrate, stats

from dpkit.accounting.budget import Budget
from dpkit.audit import Claim, HistogramTester, ThresholdTester, audit
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.mechanisms import SparseVector
from dpkit.noise import RandomSource
from dpkit.noise.samplers import laplace

ALPHA = 1e-6


def _src(seed: str) -> RandomSource:
    return RandomSource(seed=f"svt-{seed}", insecure=True)


@pytest.mark.parametrize(
    "field,value",
    [
        ("epsilon", math.nan),
        ("epsilon", math.inf),
        ("epsilon", -1.0),
        ("epsilon", "1"),
        ("sensitivity", 0.0),
        ("threshold", math.nan),
        ("max_positives", 0),
        ("max_positives", 1.5),
        ("numeric_epsilon", -0.5),
        ("numeric_epsilon", math.nan),
        ("threshold_share", 1.0),
        ("monotonic", 1),
    ],
)
def test_bad_parameters_are_refused(field: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"epsilon": 1.0, "sensitivity": 1.0, "threshold": 0.0}
    kwargs[field] = value
    with pytest.raises(PrivacyParameterError):
        SparseVector(**kwargs)


@pytest.mark.parametrize("c,monotonic", [(1, False), (3, False), (4, True)])
def test_noise_scales_and_budget_fit(c: int, monotonic: bool) -> None:
    m = SparseVector(
        epsilon=1.0, sensitivity=2.0, threshold=5.0, max_positives=c, monotonic=monotonic
    )
    mult = c if monotonic else 2 * c
    d = 2.0 + m.granularity
    eps1, eps2 = d / m.threshold_scale, mult * d / m.query_scale
    assert eps1 + eps2 <= 1.0
    assert eps1 + eps2 > 1.0 - 1e-6
    # Lyu, Su and Li's optimal split eps1 : eps2 = 1 : mult^(2/3)
    assert eps2 / eps1 == pytest.approx(mult ** (2 / 3), rel=1e-9)
    Budget(epsilon=1.0).charge(m.event)  # a mechanism calibrated to 1 fits a budget of 1
    numeric = SparseVector(
        epsilon=1.0, sensitivity=2.0, threshold=5.0, max_positives=c, numeric_epsilon=0.5
    )
    Budget(epsilon=1.5).charge(numeric.event)
    with pytest.raises(BudgetExceededError):
        Budget(epsilon=1.4).charge(numeric.event)


def test_stream_halts_and_cannot_be_copied_or_replayed() -> None:
    m = SparseVector(epsilon=1.0, sensitivity=1.0, threshold=0.0, max_positives=2)
    s = m.start(source=_src("halt"))
    assert s.ask(-1e6) is False
    assert s.ask(1e6) is True and s.ask(1e6) is True
    assert s.halted and s.answered == 3 and s.positives == 2
    with pytest.raises(BudgetExceededError):
        s.ask(0.0)
    for dup in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(PrivacyParameterError):
            dup(s)
    with pytest.raises(AttributeError):  # no attribute can be added to reset it
        s.reset = None  # type: ignore[attr-defined]
    # release stops at the halt; NaN and inf answers never raise (lattice rules)
    out = m.release([math.nan, -math.inf, math.inf, math.inf, 0.0], source=_src("r"))
    assert out[-1] is True and len(out) <= 4 and sum(out) == 2


def test_numeric_variant_releases_values_of_positives_only() -> None:
    m = SparseVector(
        epsilon=1.0, sensitivity=1.0, threshold=0.0, max_positives=2, numeric_epsilon=1.0
    )
    out = m.release([-1e6, 1000.0, 2000.0], source=_src("num"))
    assert out[0] is False
    assert abs(out[1] - 1000.0) < 200 and abs(out[2] - 2000.0) < 200


def _first_positive_law(q: list[float], t: float, b1: float, b2: float) -> np.ndarray:
    """P(the first positive answer is query i), and P(none), for continuous Laplace noise."""
    lap1 = stats.laplace(scale=b1)
    lap2 = stats.laplace(scale=b2)
    out = []
    for i in range(len(q) + 1):

        def f(r: float, i: int = i) -> float:
            below = np.prod([lap2.cdf(t + r - qj) for qj in q[:i]])
            above = lap2.sf(t + r - q[i]) if i < len(q) else 1.0
            return float(lap1.pdf(r) * below * above)

        out.append(integrate.quad(f, -60 * b1, 60 * b1, points=[0.0], limit=200)[0])
    return np.array(out)


def _stop_index(m: SparseVector, q: list[float], n: int, src: RandomSource) -> np.ndarray:
    idx = np.empty(n, dtype=np.int64)
    for k in range(n):
        out = m.release(q, source=src)
        idx[k] = len(out) - 1 if out and out[-1] is True else len(q)
    return idx


@pytest.mark.slow
def test_above_threshold_output_law() -> None:
    # Chi-square of 4,000 runs against the integrated law (alpha 1e-6). The lattice moves each
    # comparison by at most 2**-12 sensitivities: a relative error far below the test's power.
    q, t = [0.0, 1.0, 2.0], 1.5
    m = SparseVector(epsilon=1.0, sensitivity=1.0, threshold=t)
    law = _first_positive_law(q, t, m.threshold_scale, m.query_scale)
    assert law.sum() == pytest.approx(1.0, abs=1e-7)
    n = 4000
    counts = np.bincount(_stop_index(m, q, n, _src("law")), minlength=len(q) + 1)
    assert stats.chisquare(counts, law * n).pvalue > ALPHA
    # companion: the law with the query noise of Dwork and Roth's sloppy "c = 1" scale halved
    # (2 Delta / eps2 -> Delta / eps2) is rejected on the same draws
    wrong = _first_positive_law(q, t, m.threshold_scale, m.query_scale / 4)
    assert stats.chisquare(counts, wrong * n).pvalue < ALPHA


# --- the auditor: the correct mechanism within its claim, Lyu et al.'s broken variants caught ---

_PAIR = ((0.0, 0.0, 1.0), (1.0, 1.0, 0.0))


class _StopIndex:
    """AboveThreshold's whole output (c = 1) is the index of its positive answer."""

    def __init__(self, m: SparseVector) -> None:
        self.m = m

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> np.ndarray:
        assert source is not None
        return _stop_index(self.m, list(x), size, source)


@pytest.mark.slow
def test_auditor_certifies_above_threshold() -> None:
    m = SparseVector(epsilon=1.0, sensitivity=1.0, threshold=0.5)
    result = audit(
        _StopIndex(m),
        _PAIR,
        samples=8_000,
        claim=Claim.pure(epsilon=1.0),
        testers=(HistogramTester(),),
        confidence=1 - ALPHA,
        source=_src("audit-ok"),
    )
    assert not result.violated, result.summary()


class _NoCutoff:
    """Lyu, Su and Li 2017, Algorithm 6: AboveThreshold's noise (c = 1) but it never halts.

    Claims epsilon-DP; not private: with m queries that each move by Delta in opposite
    directions the privacy loss grows with m. Output: positives among the first half minus
    positives among the second half (post-processing of the answers)."""

    def __init__(self, epsilon: float, m: int) -> None:
        self.eps, self.m = epsilon, m

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> np.ndarray:
        assert source is not None
        q = np.asarray(x, dtype=np.float64)
        rho = laplace(source, scale=2.0 / self.eps, size=size)
        nu = laplace(source, scale=4.0 / self.eps, size=(size, q.size))
        pos = q[None, :] + nu >= rho[:, None]
        return np.asarray(pos[:, : self.m].sum(1) - pos[:, self.m :].sum(1), dtype=np.float64)


def test_auditor_catches_sparse_vector_without_cutoff() -> None:
    m = 40
    pair = ((0.0,) * m + (1.0,) * m, (1.0,) * m + (0.0,) * m)
    result = audit(
        _NoCutoff(1.0, m),
        pair,
        samples=20_000,
        claim=Claim.pure(epsilon=1.0),
        testers=(ThresholdTester(),),
        confidence=1 - ALPHA,
        source=_src("audit-nocut"),
    )
    assert result.violated, result.summary()
