"""Renyi DP of the Gaussian on fixed-size batches drawn without replacement (replace-one):
the bound of Wang, Balle and Kasiviswanathan (2019, Theorem 9), checked against an mpmath
evaluation of the theorem, dp-accounting's RDP accountant, and dpkit's PLD."""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting import Budget
from dpkit.accounting.batching import BatchScheme
from dpkit.accounting.dpsgd import dpsgd_epsilon, dpsgd_noise_multiplier
from dpkit.accounting.pld import PldAccountant
from dpkit.accounting.rdp import RdpAccountant, event_rdp
from dpkit.errors import BudgetExceededError, PrivacyParameterError, UnsupportedEventError
from dpkit.events import (
    GaussianEvent,
    LaplaceEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)
from dpkit.training.guard import BudgetGuard
from dpkit.training.samplers import BatchSampler


def wor(b: int, n: int, m: float) -> SampledWithoutReplacementEvent:
    return SampledWithoutReplacementEvent(
        sample_size=b,
        dataset_size=n,
        event=GaussianEvent(noise_multiplier=m, neighbouring="replace"),
    )


def theorem_9(q: mpmath.mpf, m: mpmath.mpf, alpha: int) -> mpmath.mpf:
    """(alpha - 1) * RDP(alpha) by WBK 2019 Theorem 9 for a Gaussian (e(j) = j / (2 m^2))."""

    def e(j: int) -> mpmath.mpf:
        return j / (2 * m**2)

    total = mpmath.mpf(1) + q**2 * mpmath.binomial(alpha, 2) * min(
        4 * (mpmath.e ** e(2) - 1), 2 * mpmath.e ** e(2)
    )
    for j in range(3, alpha + 1):
        total += 2 * q**j * mpmath.binomial(alpha, j) * mpmath.e ** ((j - 1) * e(j))
    return mpmath.log(total)


@pytest.mark.parametrize(
    ("b", "n", "m"), [(256, 60000, 0.5), (64, 512, 0.5), (10, 100, 1.0), (1, 7, 3.0)]
)
def test_integer_orders_match_the_theorem_by_mpmath_and_stay_above_it(
    b: int, n: int, m: float
) -> None:
    orders = np.array([2.0, 3.0, 5.0, 8.0, 17.0, 64.0])
    ours = event_rdp(wor(b, n, m), orders)
    assert ours is not None
    with mpmath.workdps(50):
        for a, r in zip(orders, ours, strict=True):
            exact = min(
                theorem_9(mpmath.mpf(b) / n, mpmath.mpf(m), int(a)) / (a - 1),
                a / (2 * mpmath.mpf(m) ** 2),
            )
            assert r >= exact  # rounded up
            assert r <= exact * (1 + 1e-8)  # the rounding margin is tiny


def test_fractional_orders_take_the_chord_of_the_cumulant() -> None:
    ev = wor(64, 512, 0.5)
    got = event_rdp(ev, np.array([2.0, 2.5, 3.0, 1.5]))
    assert got is not None
    k2, k3 = 1.0 * got[0], 2.0 * got[2]
    assert got[1] * 1.5 == pytest.approx(0.5 * k2 + 0.5 * k3, rel=1e-12)
    assert got[1] * 1.5 >= 0.5 * k2 + 0.5 * k3
    assert got[3] * 0.5 == pytest.approx(0.5 * k2, rel=1e-12)  # chord from K(1) = 0


ORDERS = (1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0)


@pytest.mark.parametrize(
    ("b", "n", "sigma", "steps"), [(256, 60000, 1.0, 2340), (64, 512, 1.0, 80), (10, 100, 2.0, 50)]
)
def test_curve_agrees_with_dp_accounting_and_epsilon_is_above_pld(
    b: int, n: int, sigma: float, steps: int
) -> None:
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import rdp_privacy_accountant as rdp

    event = SelfComposedEvent(event=wor(b, n, sigma / 2), count=steps)
    ours = RdpAccountant(orders=ORDERS)
    ours.compose(event)
    theirs = rdp.RdpAccountant(
        orders=list(ORDERS), neighboring_relation=rdp.NeighborRel.REPLACE_ONE
    )
    theirs.compose(
        dpa.SelfComposedDpEvent(
            dpa.SampledWithoutReplacementDpEvent(n, b, dpa.GaussianDpEvent(sigma / 2)), steps
        )
    )
    theirs_rdp = np.asarray(theirs._rdp)  # test-only read of the peer's curve
    # dp-accounting takes min(Theorem 9 term, a forward-difference term) per j: never above ours
    assert np.all(ours.rdp >= theirs_rdp * (1 - 1e-9))
    np.testing.assert_allclose(ours.rdp, theirs_rdp, rtol=1e-6)
    full = RdpAccountant()
    full.compose(event)
    pld = PldAccountant()
    pld.compose(event)
    assert full.get_epsilon(1e-5) >= pld.get_epsilon(1e-5)


def test_full_batch_is_the_plain_gaussian_and_empty_batch_costs_nothing() -> None:
    orders = np.array([2.0, 10.0])
    full = event_rdp(wor(100, 100, 0.7), orders)
    plain = event_rdp(GaussianEvent(noise_multiplier=0.7, neighbouring="replace"), orders)
    assert full is not None and plain is not None
    assert np.array_equal(full, plain)
    empty = event_rdp(wor(0, 100, 0.7), orders)
    assert empty is not None and not np.any(empty)


def test_capped_by_the_unsampled_gaussian() -> None:
    orders = np.array([2.0, 40.0, 1024.0])
    sub = event_rdp(wor(99, 100, 0.3), orders)
    assert sub is not None
    assert np.all(sub <= orders / (2 * 0.3**2) * (1 + 1e-12))


def test_other_inner_events_are_refused() -> None:
    acct = RdpAccountant()
    lap = SampledWithoutReplacementEvent(
        sample_size=5,
        dataset_size=50,
        event=LaplaceEvent(noise_multiplier=1.0, neighbouring="replace"),
    )
    with pytest.raises(UnsupportedEventError):
        acct.compose(lap)
    with pytest.raises(UnsupportedEventError):
        acct.compose(
            SampledWithoutReplacementEvent(
                sample_size=5, dataset_size=50, event=GaussianEvent(noise_multiplier=1.0)
            )
        )


def test_rdp_budget_accepts_fixed_size_steps_under_replace_one_only() -> None:
    budget = Budget(epsilon=50.0, delta=1e-5, method="rdp", neighbouring="replace")
    budget.charge(SelfComposedEvent(event=wor(64, 512, 0.5), count=10))
    assert 0.0 < budget.spent[0] <= 50.0
    add_remove = Budget(epsilon=20.0, delta=1e-5, method="rdp")
    with pytest.raises(UnsupportedEventError):
        add_remove.charge(wor(64, 512, 0.5))


def test_guard_charges_an_rdp_budget_and_refuses_the_step_beyond_it() -> None:
    sch = BatchScheme(name="fixed_size", dataset_size=512, batch_size=64)
    one = dpsgd_epsilon(
        noise_multiplier=1.0,
        delta=1e-5,
        batch_size=64,
        dataset_size=512,
        steps=3,
        scheme="fixed_size",
        method="rdp",
    )
    budget = Budget(epsilon=one * 1.0001, delta=1e-5, method="rdp", neighbouring="replace")
    guard = BudgetGuard(budget, BatchSampler(sch, steps=10), noise_multiplier=1.0)
    for _ in range(3):
        guard.before_step()
    with pytest.raises(BudgetExceededError):
        guard.before_step()
    assert guard.steps_taken == 3
    with pytest.raises(PrivacyParameterError):  # sampler and budget disagree on the relation
        BudgetGuard(
            Budget(epsilon=5.0, delta=1e-5, method="rdp"),
            BatchSampler(sch, steps=1),
            noise_multiplier=1.0,
        )


KW = {"delta": 1e-5, "batch_size": 64, "dataset_size": 6000}


@settings(max_examples=12, deadline=None)
@given(
    sigma=st.floats(0.5, 5.0),
    steps=st.integers(1, 400),
    more=st.integers(1, 400),
    factor=st.floats(1.01, 3.0),
)
def test_rdp_epsilon_grows_with_steps_and_shrinks_with_sigma(
    sigma: float, steps: int, more: int, factor: float
) -> None:
    def eps(s: float, k: int) -> float:
        return dpsgd_epsilon(noise_multiplier=s, steps=k, scheme="fixed_size", method="rdp", **KW)

    base = eps(sigma, steps)
    assert eps(sigma, steps + more) >= base
    assert eps(sigma * factor, steps) <= base


def test_noise_search_by_rdp_reaches_the_target() -> None:
    sigma = dpsgd_noise_multiplier(epsilon=8.0, epochs=1, scheme="fixed_size", method="rdp", **KW)
    assert (
        dpsgd_epsilon(noise_multiplier=sigma, epochs=1, scheme="fixed_size", method="rdp", **KW)
        <= 8.0
    )
    assert (
        dpsgd_epsilon(
            noise_multiplier=sigma * 0.99, epochs=1, scheme="fixed_size", method="rdp", **KW
        )
        > 8.0
    )
    # PLD is tighter: at the noise RDP needs, its epsilon is within the target too
    assert dpsgd_epsilon(noise_multiplier=sigma, epochs=1, scheme="fixed_size", **KW) <= 8.0


@pytest.mark.parametrize(
    ("scheme", "method"),
    [("truncated_poisson", "rdp"), ("fixed_size", "gdp-clt"), ("fixed_size", "nope")],
)
def test_methods_a_scheme_has_no_bound_for_are_refused(scheme: str, method: str) -> None:
    extra = {"max_batch_size": 80} if scheme == "truncated_poisson" else {}
    with pytest.raises(PrivacyParameterError):
        dpsgd_epsilon(noise_multiplier=1.0, steps=10, scheme=scheme, method=method, **KW, **extra)  # type: ignore[arg-type]


def test_bad_noise_is_refused_before_accounting() -> None:
    for bad in (0.0, -1.0, math.nan, math.inf):
        with pytest.raises(PrivacyParameterError):
            dpsgd_epsilon(noise_multiplier=bad, steps=10, scheme="fixed_size", method="rdp", **KW)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 10_000),
    frac=st.floats(0.0, 1.0),
    m=st.floats(0.2, 20.0),
    grow=st.floats(1.0, 4.0),
)
def test_curve_grows_with_the_batch_and_shrinks_with_the_noise(
    n: int, frac: float, m: float, grow: float
) -> None:
    orders = np.array([1.5, 2.0, 3.5, 8.0, 64.0])
    b = max(1, min(n - 1, int(frac * n)))
    base = event_rdp(wor(b, n, m), orders)
    bigger = event_rdp(wor(min(n, b + 1), n, m), orders)
    noisier = event_rdp(wor(b, n, m * grow), orders)
    assert base is not None and bigger is not None and noisier is not None
    assert np.all(bigger >= base)
    assert np.all(noisier <= base)
    assert np.all(base >= 0.0) and np.all(np.diff(base * (orders - 1)) >= 0.0)
