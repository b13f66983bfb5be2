"""Floating-point safety of dpkit's real-valued releases (issue 2, section 4; Mironov 2012).

1. Outputs are exact multiples of the mechanism's declared granularity for adversarial inputs
   (0, 2**-1074, -0.0, 1e308, 2**53 + 1, the clamp bounds, NaN and +-inf by the documented rule:
   NaN is released as 0, +-inf and anything beyond ``2**62 * granularity`` as the clamp bound),
   and the granularity is fixed by the public parameters before any data is seen.
2. A distinguishing-event attack on neighbouring inputs (0 vs 1, and 2**52 vs 2**52 + 1): each
   input is released n times; for each event E in a fixed family, Clopper-Pearson bounds on
   P(E | x) and P(E | x') (all intervals Bonferroni-corrected to hold together with probability
   >= 1 - 1e-6) certify the lower bound ``ln((lower P(E|x) - delta) / upper P(E|x'))`` on epsilon.
   For dpkit it never exceeds the claimed epsilon; the *same* code certifies a large epsilon for
   textbook ``x + numpy laplace noise``, through Mironov's event "0 < y < 1 and y is not a
   multiple of 2**-53": ``1 + L`` rounded to a double in (0, 1) always is such a multiple, while
   ``0 + L = L`` usually is not.

At 2**52 vs 2**52 + 1 the textbook mechanism is not attacked by this family (doubles there are
integers or half-integers on both sides, and the noise's own low bits are rounded away), so the
test reports its certified value without asserting on it; the attack that matters is 0 vs 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from _stats import clopper_pearson
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import DiscreteGaussian, DiscreteLaplace, Gaussian, Laplace
from dpkit.noise import RandomSource

ALPHA = 1e-6
N_ATTACK = 200_000
CLAMP_INDEX = 2.0**62  # docs: lattice indices are clamped to [-2**62, 2**62]

TINY = 2.0**-1074
ADVERSARIAL = np.array(
    [
        0.0,
        TINY,
        -TINY,
        -0.0,
        1.0,
        -1.0,
        0.1,
        1e308,
        -1e308,
        np.finfo(np.float64).max,
        -np.finfo(np.float64).max,
        np.finfo(np.float64).tiny,
        2.0**53 + 2,
        2.0**53,
        2.0**52 + 1,
        2.0**52,
        2.0**-30,
        1e-300,
        123456.789,
        2.0**62,
        2.0**63,
    ]
)
# 2**53 + 1 is not a double; as an integer it arrives as float(2**53 + 1) == 2**53 (checked).
assert float(2**53 + 1) == 2.0**53


def src(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


MECHANISMS: list[tuple[str, Callable[[], Laplace | Gaussian]]] = [
    ("laplace_eps1", lambda: Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)),
    ("laplace_small_scale", lambda: Laplace.from_scale(scale=1e-12, sensitivity=1e-13)),
    # subnormal sensitivity: granularity below 2**-1024, where 1 / granularity overflows
    ("laplace_subnormal", lambda: Laplace.from_epsilon(epsilon=1.0, sensitivity=1e-310)),
    ("laplace_large_scale", lambda: Laplace.from_epsilon(epsilon=0.01, sensitivity=1e12)),
    (
        "laplace_replace",
        lambda: Laplace.from_epsilon(epsilon=2.0, sensitivity=3.0, neighbouring="replace"),
    ),
    ("gaussian_mu", lambda: Gaussian.from_mu(mu=1.0, sensitivity=1.0)),
    (
        "gaussian_eps_delta",
        lambda: Gaussian.from_epsilon_delta(epsilon=0.5, delta=1e-9, sensitivity=1e-3),
    ),
    ("gaussian_huge", lambda: Gaussian.from_sigma(sigma=1e300, sensitivity=1e299)),
]


def _is_lattice(out: np.ndarray, g: float) -> bool:
    q = out / g  # exact: g is a power of two (barring overflow to inf, checked separately)
    return bool(np.all(q == np.rint(q)))


@pytest.mark.parametrize(("name", "build"), MECHANISMS, ids=[m[0] for m in MECHANISMS])
def test_adversarial_inputs_land_on_the_lattice(
    name: str, build: Callable[[], Laplace | Gaussian]
) -> None:
    mech = build()
    g = mech.granularity
    assert math.frexp(g)[0] == 0.5  # a power of two
    bound = CLAMP_INDEX * g
    values = np.concatenate(
        [
            ADVERSARIAL,
            -ADVERSARIAL,
            [bound, -bound, bound * 2, -bound * 2, math.nextafter(bound, math.inf)],
        ]
    )
    for seed in range(5):
        out = mech.release(values, source=src(seed))
        assert out.dtype == np.float64 and out.shape == values.shape
        finite = np.isfinite(out)
        # +-inf only where (index + noise) * g overflows the double range (documented), which
        # needs a clamp bound 2**62 g near the top of the double range.
        if not np.all(finite):
            assert bound > np.finfo(np.float64).max / 2**20, name
        assert _is_lattice(out[finite], g), name
        assert np.all(np.abs(out[finite]) <= bound * 2), name
    assert mech.granularity == g  # releasing data never changes it


@pytest.mark.parametrize(("name", "build"), MECHANISMS, ids=[m[0] for m in MECHANISMS])
def test_special_values_follow_the_documented_rule(
    name: str, build: Callable[[], Laplace | Gaussian]
) -> None:
    mech = build()
    bound = CLAMP_INDEX * mech.granularity
    n = 64

    def run(x: float) -> np.ndarray:  # the same seed gives the same noise: equal indices
        return mech.release(np.full(n, x), source=src(11))  # give equal outputs

    assert np.array_equal(run(math.nan), run(0.0))  # NaN is released as 0
    assert np.array_equal(run(-0.0), run(0.0))
    assert np.array_equal(run(TINY), run(0.0))
    assert np.array_equal(run(math.inf), run(bound))  # +-inf as the clamp bound
    assert np.array_equal(run(-math.inf), run(-bound))
    assert np.array_equal(run(1e308), run(bound)) or bound > 1e308
    assert np.array_equal(run(bound * 4), run(bound))


@pytest.mark.parametrize(("name", "build"), MECHANISMS, ids=[m[0] for m in MECHANISMS])
@settings(max_examples=30, deadline=None)
@given(
    values=hnp.arrays(
        np.float64, st.integers(0, 40), elements=st.floats(allow_nan=True, allow_infinity=True)
    ),
    seed=st.integers(0, 2**30),
)
def test_any_float_input_lands_on_the_lattice(
    name: str, build: Callable[[], Laplace | Gaussian], values: np.ndarray, seed: int
) -> None:
    mech = build()
    g = mech.granularity
    out = mech.release(values, source=src(seed))
    assert out.shape == values.shape
    assert _is_lattice(out[np.isfinite(out)], g)
    assert mech.granularity == g


@pytest.mark.parametrize(
    "mech",
    [
        DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1),
        DiscreteGaussian.from_sigma(sigma=2.0, sensitivity=1),
    ],
    ids=["discrete_laplace", "discrete_gaussian"],
)
def test_discrete_mechanisms_on_adversarial_inputs(
    mech: DiscreteLaplace | DiscreteGaussian,
) -> None:
    values = np.array(
        [0, 1, -1, 2**53 + 1, 2**62, 2**62 + 1, 2**63 - 1, -(2**63), 17], dtype=np.int64
    )
    out = mech.release(values, source=src(3))
    assert out.dtype == np.int64 and out.shape == values.shape
    z = mech.release(np.zeros(values.size, dtype=np.int64), source=src(3))
    expected = np.clip(values, -(2**62), 2**62)  # saturated at +-2**62, no wrap-around
    assert np.array_equal(out - z, expected)  # same seed, same noise: exact integers
    # Float dtypes are refused by dtype, whatever the values (even whole numbers, even NaN).
    for floats in (ADVERSARIAL, np.array([0.5]), np.array([1.0]), np.array([math.nan])):
        with pytest.raises(PrivacyParameterError, match="values"):
            mech.release(floats, source=src(3))
    # Unsigned 64-bit inputs at and above 2**63 saturate too (they must not wrap negative).
    big = np.array([2**63 - 1, 2**63, 2**64 - 1, 2**62], dtype=np.uint64)
    same = mech.release(big, source=src(4))
    ref = mech.release(np.full(4, 2**62, dtype=np.int64), source=src(4))
    assert np.array_equal(same, ref)  # same seed, same noise: all four are the index 2**62


# ---------------------------------------------------------------------------------------------
# The distinguishing-event attack
# ---------------------------------------------------------------------------------------------
def _events(x0: float, unit: float) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """A fixed family of events on the output y, chosen before seeing any output (``unit`` is
    the public noise scale, which places the threshold events)."""
    return {
        # Mironov 2012: the set of doubles reachable from x0 + 1 in (x0, x0 + 1) is the
        # multiples of 2**-53 (for x0 = 0); from x0 it is the noise values themselves.
        "mironov_low_bits": lambda y: (
            (y > x0) & (y < x0 + 1) & ((y - x0) * 2.0**53 != np.floor((y - x0) * 2.0**53))
        ),
        "odd_integer": lambda y: (y == np.floor(y)) & (np.mod(y, 2.0) == 1.0),
        "half_integer": lambda y: (y * 2 == np.floor(y * 2)) & (y != np.floor(y)),
        "fine_bits": lambda y: (y * 2.0**40) != np.floor(y * 2.0**40),
        # The sign of zero: -0.0 == 0.0 compares equal, only the sign bit tells them apart.
        "negative_zero": lambda y: (y == 0.0) & np.signbit(y),
        # Threshold events: the optimal events for an honest Laplace/Gaussian mechanism.
        **{f"above_{c}": (lambda y, c=c: y > x0 + c * unit) for c in (0.5, 1.0, 2.0, 4.0)},
        **{f"below_{c}": (lambda y, c=c: y < x0 + c * unit) for c in (-1.0, 0.5)},
    }


def certified_epsilon(
    y0: np.ndarray, y1: np.ndarray, x0: float, unit: float = 1.0, delta: float = 0.0
) -> tuple[float, str]:
    """Largest epsilon certified by any event, at joint confidence 1 - ALPHA.

    For m events there are 2m probabilities (each event under each input); each Clopper-Pearson
    interval is taken at level ALPHA / (2m) (two-sided), so all hold together with probability
    >= 1 - ALPHA (Bonferroni). Each event E and its complement are tried in both directions:
    ``ln((lower P(E|a) - delta) / upper P(E|b))``.
    """
    events = _events(x0, unit)
    level = ALPHA / (2 * len(events))
    best, which = 0.0, "none"
    for name, event in events.items():
        k0, k1 = int(np.sum(event(y0))), int(np.sum(event(y1)))
        n0, n1 = y0.size, y1.size
        for a, na, b, nb in (
            (k0, n0, k1, n1),
            (k1, n1, k0, n0),
            (n0 - k0, n0, n1 - k1, n1),
            (n1 - k1, n1, n0 - k0, n0),
        ):
            lo_a, _ = clopper_pearson(a, na, level)
            _, hi_b = clopper_pearson(b, nb, level)
            if lo_a - delta > 0:
                eps = math.log((lo_a - delta) / hi_b)
                if eps > best:
                    best, which = eps, name
    return best, which


# (x0, x1, sensitivity). The granularity is 2**(floor(log2(min(sensitivity, scale))) - 12), so
# with sensitivity 1 it is 2**-12 and 2**52 lies beyond the clamp bound 2**62 * 2**-12 = 2**50
# (both inputs are released as the bound: trivially indistinguishable). Sensitivity 16 gives
# granularity 2**-8 and clamp bound 2**54, so 2**52 and 2**52 + 1 are distinct lattice points.
# -1e-12 vs 0.0: the same lattice point (index -0.0 vs 0.0); before the sign of zero was fixed,
# only the negative side could output -0.0 (the "negative_zero" event).
PAIRS = [
    (0.0, 1.0, 1.0),
    (2.0**52, 2.0**52 + 1, 1.0),
    (2.0**52, 2.0**52 + 1, 16.0),
    (-1e-12, 0.0, 1.0),
]
PAIR_IDS = ["0_vs_1", "2^52_vs_2^52+1_clamped", "2^52_vs_2^52+1_in_range", "-1e-12_vs_0"]


def _textbook(x: float, b: float, seed: int) -> np.ndarray:
    # The textbook (broken) mechanism: x + numpy's floating-point Laplace noise.
    return x + np.random.default_rng(seed).laplace(0.0, b, N_ATTACK)


@pytest.mark.parametrize(("x0", "x1", "sensitivity"), PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("epsilon", [1.0, 0.1])
def test_attack_never_certifies_more_than_dpkit_laplace_claims(
    x0: float, x1: float, sensitivity: float, epsilon: float
) -> None:
    mech = Laplace.from_epsilon(epsilon=epsilon, sensitivity=sensitivity)
    if sensitivity > 1:
        assert abs(x0) < CLAMP_INDEX * mech.granularity  # really inside the clamp
    y0 = mech.release(np.full(N_ATTACK, x0), source=src(21))
    y1 = mech.release(np.full(N_ATTACK, x1), source=src(22))
    assert not np.array_equal(y0, y1)
    eps, event = certified_epsilon(y0, y1, x0, unit=mech.scale)
    print(
        f"dpkit Laplace eps={epsilon} {x0} vs {x1}: certified {eps:.4f} via {event}, "
        f"claimed {mech.epsilon}"
    )
    assert eps <= mech.epsilon, (eps, event)


@pytest.mark.parametrize(("x0", "x1", "sensitivity"), PAIRS, ids=PAIR_IDS)
def test_attack_never_certifies_more_than_dpkit_gaussian_claims(
    x0: float, x1: float, sensitivity: float
) -> None:
    delta = 1e-6
    mech = Gaussian.from_epsilon_delta(epsilon=1.0, delta=delta, sensitivity=sensitivity)
    y0 = mech.release(np.full(N_ATTACK, x0), source=src(23))
    y1 = mech.release(np.full(N_ATTACK, x1), source=src(24))
    eps, event = certified_epsilon(y0, y1, x0, unit=mech.sigma, delta=delta)
    print(f"dpkit Gaussian {x0} vs {x1}: certified {eps:.4f} via {event}, claimed 1.0")
    assert eps <= 1.0, (eps, event)


def test_same_attack_breaks_textbook_laplace() -> None:
    b = 1.0  # claimed epsilon = sensitivity / b = 1
    eps, event = certified_epsilon(_textbook(0.0, b, 31), _textbook(1.0, b, 32), 0.0)
    print(f"textbook x + numpy laplace, 0 vs 1: certified {eps:.4f} via {event}, claimed 1.0")
    assert event == "mironov_low_bits"
    assert eps > 5.0  # about 7.4: P(E | 0) ~ 0.16 while P(E | 1) = 0 exactly


def test_same_attack_breaks_textbook_gaussian() -> None:
    sigma, delta = 4.0, 1e-6  # (1, 1e-6)-DP by the analytic calibration needs sigma ~ 3.73
    rng0, rng1 = np.random.default_rng(33), np.random.default_rng(34)
    y0 = 0.0 + rng0.normal(0.0, sigma, N_ATTACK)
    y1 = 1.0 + rng1.normal(0.0, sigma, N_ATTACK)
    eps, event = certified_epsilon(y0, y1, 0.0, unit=sigma, delta=delta)
    print(f"textbook x + numpy normal, 0 vs 1: certified {eps:.4f} via {event}, claimed 1.0")
    assert eps > 3.0


def test_textbook_laplace_at_2_pow_52_is_reported() -> None:
    eps, event = certified_epsilon(
        _textbook(2.0**52, 1.0, 35), _textbook(2.0**52 + 1, 1.0, 36), 2.0**52
    )
    print(
        f"textbook x + numpy laplace, 2^52 vs 2^52+1: certified {eps:.4f} via {event}, "
        "claimed 1.0 (no assertion: this event family does not break it there)"
    )
    assert eps >= 0.0


def test_certifier_is_sharp_on_an_honest_mechanism() -> None:
    # Sanity of the harness: on dpkit's Laplace it certifies most of the true epsilon (so the
    # "never above the claim" results above are not vacuous).
    mech = Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
    y0 = mech.release(np.zeros(N_ATTACK), source=src(41))
    y1 = mech.release(np.ones(N_ATTACK), source=src(42))
    eps, _ = certified_epsilon(y0, y1, 0.0, unit=mech.scale)
    assert 0.8 < eps <= mech.epsilon
