"""One randomized-response epsilon, and how the two ``RandomizedResponse`` classes relate.

``randomized_response_epsilon`` is the library's one implementation of ``ln(p (k-1) / (1-p))``;
the stand-alone device file :mod:`dpkit.ldp.client` (standard library only, so it cannot import
it) certifies the same rule (the smallest double above the exact value) with its own exact
exponential bounds. These tests pin the two
to the exact value (mpmath, 60 digits) and to each other.
"""

from __future__ import annotations

import math
from fractions import Fraction

import mpmath
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit import ldp, mechanisms
from dpkit.accounting import PureDpAccountant
from dpkit.events import RandomizedResponseEvent, randomized_response_epsilon
from dpkit.ldp import client


@mpmath.workdps(60)  # restored on return
def _exact(p: float, k: int) -> mpmath.mpf:
    return mpmath.log(mpmath.mpf(p) * (k - 1) / (1 - mpmath.mpf(p)))


@settings(max_examples=300)
@given(
    st.floats(min_value=0.5, max_value=1.0, exclude_min=True, exclude_max=True), st.integers(2, 64)
)
def test_one_formula_is_the_smallest_double_above_the_exact_value(p: float, k: int) -> None:
    p = max(p, 1.0 / k)
    exact = _exact(p, k)
    eps = randomized_response_epsilon(p, k)
    assert eps >= exact
    assert exact == 0 or math.nextafter(eps, 0.0) < exact  # one ulp at most
    assert RandomizedResponseEvent(p_truth=p, categories=k).epsilon == eps
    pure = PureDpAccountant().compose(RandomizedResponseEvent(p_truth=p, categories=k))
    assert pure.get_epsilon(0.0) == eps


@settings(max_examples=300)
@given(st.floats(min_value=0.5, max_value=1.0 - 2.0**-40, exclude_min=True))
def test_mechanism_and_stand_alone_client_agree_with_the_formula(p: float) -> None:
    mech = mechanisms.RandomizedResponse(p=p)
    assert mech.epsilon == randomized_response_epsilon(mech.p, 2)
    device = client.RandomizedResponse(p_truth=p)
    shared = randomized_response_epsilon(p, 2)
    # two certified evaluations of the same rule: the smallest double above the exact value
    # (they could differ only if the exact value lay within about 1e-55 of a double)
    assert device.epsilon >= _exact(p, 2)
    assert device.epsilon == shared
    assert ldp.RandomizedResponse(p_truth=p).epsilon == shared


def test_the_two_classes_share_the_event_and_the_law() -> None:
    # mechanisms.RandomizedResponse: a central Mechanism (release over an array of bits, p on
    # the 2**-53 grid); ldp.RandomizedResponse: a local protocol whose device half runs alone
    # (p on the 2**-64 grid). Both describe themselves with RandomizedResponseEvent.
    for eps in (0.1, 1.0, 5.0):
        mech = mechanisms.RandomizedResponse.from_epsilon(epsilon=eps)
        local = ldp.RandomizedResponse(epsilon=eps)
        assert isinstance(mech.event, RandomizedResponseEvent)
        assert isinstance(local.event, RandomizedResponseEvent)
        assert mech.epsilon <= eps and local.epsilon <= eps
        # the same truth probability to within the mechanism's calibration margin (it aims at
        # epsilon (1 - 2**-40), so that k mechanisms at epsilon / k fit a budget of epsilon;
        # dp/d(epsilon) <= 1/4) plus the coarser grid
        assert abs(Fraction(mech.p) - local.p_truth) <= Fraction(eps) * 2**-42 + Fraction(1, 2**52)
        assert isinstance(mech, mechanisms.Mechanism)
        assert not isinstance(local, mechanisms.Mechanism)  # it randomizes one user at a time
