"""The clamp of the lattice releases is where docs/special-values.md says it is.

The lattice index is clamped to +-2**62, i.e. values are clamped at ``2**62 * granularity``. The
granularity used to follow the noise scale all the way down, so for a large epsilon the clamp came
close to ordinary data: ``Laplace.from_epsilon(epsilon=1e4, sensitivity=1)`` released 3e12 as
6.87e10. The granularity now stops refining at 2**-18 of the sensitivity, so the clamp is at least
2**43 (8.8e12) sensitivities for every epsilon, and at least 2**49 when the noise scale is at
least the sensitivity.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.mechanisms import Gaussian, Laplace
from dpkit.mechanisms._lattice import clamp_bound, granularity_for
from dpkit.noise import RandomSource


def src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


def test_the_large_epsilon_repro_is_released_unclamped() -> None:
    mech = Laplace.from_epsilon(epsilon=1e4, sensitivity=1.0)
    out = mech.release(np.full(1000, 3e12), source=src(1))
    print(
        f"eps 1e4: clamp {clamp_bound(mech.granularity):.3g} (before: 6.87e10); "
        f"release of 3e12 -> {out[0]:.6g}"
    )
    assert np.all(np.abs(out - 3e12) < 1.0)  # noise scale 1e-4, 1000 draws below 1e4 scales


@settings(max_examples=200, deadline=None)
@given(eps=st.floats(1e-3, 1e12), sens=st.floats(1e-200, 1e200))
def test_the_clamp_is_at_least_2_pow_43_sensitivities(eps: float, sens: float) -> None:
    for mech in (
        Laplace.from_epsilon(epsilon=eps, sensitivity=sens),
        Gaussian.from_mu(mu=eps, sensitivity=sens),
    ):
        bound = clamp_bound(mech.granularity)
        assert bound == 2.0**62 * mech.granularity or math.isinf(bound)
        assert bound >= 2.0**43 * sens
        noise = mech.scale if isinstance(mech, Laplace) else mech.sigma
        if noise >= sens:
            assert bound >= 2.0**49 * sens


@settings(max_examples=200, deadline=None)
@given(scale=st.floats(1e-300, 1e300), sens=st.floats(1e-300, 1e300))
def test_granularity_formula(scale: float, sens: float) -> None:
    s = granularity_for(scale, sens, 2.0**32)
    m = min(sens, max(scale, sens / 64))
    expected = max(2.0 ** (math.floor(math.log2(m)) - 12), 2.0**-1074)
    while scale / expected > 2.0**32:
        expected *= 2.0
    assert s == expected
    assert s <= sens * 2.0**-12 or s <= 2.0**-1074 or scale / (s / 2) > 2.0**32
