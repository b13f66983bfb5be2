"""Numeric sparse vector: the budget split, the scales, the one-way stream and the law of the
released values (fresh noise, independent of the comparison).

Statistical statements: each Kolmogorov-Smirnov test rejects a correct law with probability at
most ALPHA = 1e-6 and has a companion showing the same test rejects the broken variant that
reuses the comparison's noise (Lyu, Su and Li 2017, Algorithm 3). Sources are seeded.
"""

from __future__ import annotations

import copy
import math
import pickle
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from scipy import stats

from dpkit.accounting.budget import Budget
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.mechanisms import NumericSparseVector, SparseVector
from dpkit.noise import RandomSource
from dpkit.noise.samplers import laplace

ALPHA = 1e-6


def _src(seed: str) -> RandomSource:
    return RandomSource(seed=f"numeric-svt-{seed}", insecure=True)


@pytest.mark.parametrize(
    "field,value",
    [
        ("numeric_share", 0.0),
        ("numeric_share", 1.0),
        ("numeric_share", math.nan),
        ("numeric_share", True),
        ("numeric_share", "0.5"),
        ("epsilon", math.inf),
        ("max_positives", 0),
        ("monotonic", 1),
    ],
)
def test_bad_parameters_are_refused(field: str, value: Any) -> None:
    kwargs: dict[str, Any] = {"epsilon": 1.0, "sensitivity": 1.0, "threshold": 0.0, field: value}
    with pytest.raises(PrivacyParameterError):
        NumericSparseVector(**kwargs)


@pytest.mark.parametrize("epsilon", [0.01, 1.0, 7.3])
@pytest.mark.parametrize("c", [1, 3, 1000])
@pytest.mark.parametrize("share", [1 / 9, 0.5, 0.9])
def test_split_is_exact_and_a_budget_of_epsilon_accepts_it(
    epsilon: float, c: int, share: float
) -> None:
    m = NumericSparseVector(
        epsilon=epsilon, sensitivity=2.0, threshold=0.0, max_positives=c, numeric_share=share
    )
    # eps_cmp + eps3 <= epsilon exactly (both rounded down), eps3 close to share * epsilon
    eps_cmp = m.comparisons.epsilon
    assert Fraction(eps_cmp) + Fraction(m.numeric_epsilon) <= Fraction(epsilon)
    assert m.numeric_epsilon == pytest.approx(share * epsilon, rel=1e-12)
    # each value: c Laplace releases at eps3 / c: scale c (Delta + granularity) / eps3
    assert m.numeric_scale >= c * 2.0 / m.numeric_epsilon
    # (up to the samplers' slack 2 LAPLACE_SLACK per release: 5% at eps3 / c = 1e-6)
    assert m.numeric_scale == pytest.approx(c * 2.0 / m.numeric_epsilon, rel=0.1)
    # the comparisons are exactly a SparseVector at eps_cmp
    plain = SparseVector(epsilon=eps_cmp, sensitivity=2.0, threshold=0.0, max_positives=c)
    assert (m.query_scale, m.threshold_scale) == (plain.query_scale, plain.threshold_scale)
    Budget(epsilon=epsilon).charge(m.event)
    with pytest.raises(BudgetExceededError):
        Budget(epsilon=epsilon * (1 - 1e-9)).charge(m.event)


def test_stream_is_one_way_and_halts_after_c_values() -> None:
    m = NumericSparseVector(epsilon=2.0, sensitivity=1.0, threshold=0.0, max_positives=2)
    s = m.start(source=_src("stream"))
    with pytest.raises(PrivacyParameterError):
        copy.copy(s)
    with pytest.raises(PrivacyParameterError):
        pickle.dumps(s)
    assert s.ask(-1e9) is False
    v1, v2 = s.ask(1e3), s.ask(math.inf)  # infinities clamped, nothing raises
    assert isinstance(v1, float) and isinstance(v2, float) and abs(v1 - 1e3) < 200
    assert s.halted and s.positives == 2 and s.answered == 3
    with pytest.raises(BudgetExceededError):
        s.ask(0.0)
    far = NumericSparseVector(epsilon=2.0, sensitivity=1.0, threshold=1e6)
    assert far.release([math.nan, -math.inf], source=_src("nan")) == (False, False)


def _values(m: NumericSparseVector, n: int, src: RandomSource) -> np.ndarray:
    """The released value minus the query (0, at the threshold) of n one-query streams whose
    answer was positive."""
    out = []
    for _ in range(n):
        (a,) = m.release([0.0], source=src)
        if a is not False:
            out.append(a)
    return np.asarray(out)


def test_released_values_carry_fresh_noise_of_the_stated_scale() -> None:
    # The query sits at the threshold, so about half the answers are positive. Fresh noise is
    # independent of the comparison: the released values are Laplace(0, numeric_scale) even
    # conditioned on a positive answer. KS at alpha 1e-6 on about 2,000 values (the lattice
    # spacing, 2**-20 of the scale or less, is far below the test's resolution).
    m = NumericSparseVector(epsilon=1.0, sensitivity=1.0, threshold=0.0)
    v = _values(m, 4000, _src("law"))
    assert len(v) > 1000
    assert stats.kstest(v, stats.laplace(scale=m.numeric_scale).cdf).pvalue > ALPHA
    # companion: reusing the comparison's noise (Lyu et al., Algorithm 3) at the same scale,
    # the value is q + nu given q + nu >= T + rho: shifted up, rejected by the same test
    src = _src("reuse")
    b = m.numeric_scale
    rho = laplace(src, scale=m.threshold_scale, size=4000)
    nu = laplace(src, scale=b, size=4000)
    reused = nu[nu >= rho]
    assert stats.kstest(reused, stats.laplace(scale=b).cdf).pvalue < ALPHA
