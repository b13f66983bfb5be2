"""GdpAccountant: contract, exact Gaussian composition, CLT labelling, DP-SGD estimate."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from accountant_contract import AccountantContract
from dp_accounting import dp_event as dpe
from dp_accounting.pld import pld_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting.gdp import GdpAccountant, dpsgd_gdp_epsilon, dpsgd_gdp_mu
from dpkit.errors import PrivacyParameterError, UnsupportedEventError
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    NonPrivateEvent,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
)
from dpkit.fdp import approx_dp, berry_esseen, clt_mu, gdp, laplace, self_tensor


class TestGdpGaussianContract(AccountantContract):
    def make_accountant(self) -> PrivacyAccountant:
        return GdpAccountant()

    def supported_event(self) -> DpEvent:
        return GaussianEvent(noise_multiplier=2.0)


class TestGdpLaplaceContract(AccountantContract):
    composition_rel_tol = 1e-12

    def make_accountant(self) -> PrivacyAccountant:
        return GdpAccountant()

    def supported_event(self) -> DpEvent:
        return LaplaceEvent(noise_multiplier=3.0)


class TestGdpDpsgdContract(AccountantContract):
    composition_rel_tol = 1e-12

    def make_accountant(self) -> PrivacyAccountant:
        return GdpAccountant()

    def supported_event(self) -> DpEvent:
        return PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(noise_multiplier=1.0))


@settings(max_examples=40, deadline=None)
@given(
    sigmas=st.lists(st.floats(0.2, 20.0), min_size=1, max_size=6),
    counts=st.lists(st.integers(0, 50), min_size=6, max_size=6),
)
def test_gaussian_composition_is_exact(sigmas: list[float], counts: list[int]) -> None:
    acct = GdpAccountant()
    for s, c in zip(sigmas, counts, strict=False):
        acct.compose(GaussianEvent(noise_multiplier=s), c)
    exact = math.sqrt(math.fsum(c / (s * s) for s, c in zip(sigmas, counts, strict=False)))
    assert acct.is_upper_bound
    exact_sq = sum(Fraction(c) / Fraction(s) ** 2 for s, c in zip(sigmas, counts, strict=False))
    assert Fraction(acct.mu) ** 2 >= exact_sq  # rounded up, checked exactly
    assert acct.mu == pytest.approx(exact, rel=1e-14, abs=0.0)
    if exact > 0:
        assert acct.get_epsilon(1e-6) == pytest.approx(gdp(exact).epsilon(1e-6), rel=1e-9)
        assert acct.get_delta(1.0) == pytest.approx(gdp(exact).delta(1.0), rel=1e-12)


@pytest.mark.slow
def test_gaussian_matches_dp_accounting_pld() -> None:
    acct = GdpAccountant().compose(GaussianEvent(noise_multiplier=3.0), 10)
    ref = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    ref.compose(dpe.GaussianDpEvent(3.0), 10)
    assert acct.get_epsilon(1e-5) == pytest.approx(ref.get_epsilon(1e-5), abs=2e-3)


def test_clt_events_are_labelled_estimates() -> None:
    acct = GdpAccountant().compose(GaussianEvent(noise_multiplier=1.0))
    assert acct.is_upper_bound
    acct.compose(LaplaceEvent(noise_multiplier=10.0), 100)
    assert not acct.is_upper_bound
    mu_lap = clt_mu(laplace(mu=0.1), counts=[100])
    assert acct.mu == pytest.approx(math.sqrt(1.0 + mu_lap**2), rel=1e-12)


def test_laplace_clt_close_to_numeric_composition() -> None:
    acct = GdpAccountant().compose(LaplaceEvent(noise_multiplier=10.0), 100)
    numeric = self_tensor(laplace(mu=0.1), 100, loss_step=1e-4)
    for delta in (1e-3, 1e-5):
        assert acct.get_epsilon(delta) == pytest.approx(numeric.epsilon(delta), rel=0.05)


def test_berry_esseen_bound_from_accountant() -> None:
    acct = GdpAccountant().compose(PureDpEvent(epsilon=0.1), 200)
    res = acct.berry_esseen()
    assert res is not None
    direct = berry_esseen(approx_dp(epsilon=0.1), counts=[200])
    assert res.mu == pytest.approx(direct.mu, rel=1e-12)
    assert res.gamma == pytest.approx(direct.gamma, rel=1e-12)
    assert res.mu == pytest.approx(acct.mu, rel=1e-12)
    # with Gaussians mixed in, the bound stays below the numeric (lower-bound) composition
    acct.compose(GaussianEvent(noise_multiplier=2.0), 2)
    res = acct.berry_esseen()
    assert res is not None and 0 < res.gamma < 0.5
    num = self_tensor(approx_dp(epsilon=0.1), 200, loss_step=1e-3).tensor(gdp(1 / math.sqrt(2)))
    xs = np.linspace(0, 1, 2001)
    assert np.all(res.bound(xs) <= num(xs) + 2e-3)
    sgd = GdpAccountant().compose(
        PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(noise_multiplier=1.0))
    )
    assert sgd.berry_esseen() is None


def test_pure_dp_like_events_use_f_eps_0() -> None:
    ref = GdpAccountant().compose(PureDpEvent(epsilon=0.2), 10)
    mu = clt_mu(approx_dp(epsilon=0.2), counts=[10])
    assert ref.mu == pytest.approx(mu, rel=1e-12)
    for ev in (
        ExponentialMechanismEvent(epsilon=0.2),
        ReportNoisyMaxEvent(epsilon=0.2),
        ApproxDpEvent(epsilon=0.2, delta=0.0),
        DiscreteLaplaceEvent(scale=5.0, sensitivity=1),
    ):
        acct = GdpAccountant().compose(ev, 10)
        assert acct.mu == pytest.approx(mu, rel=1e-12)
        assert not acct.is_upper_bound


def test_pmf_slack_handling() -> None:
    # epsilon-DP type: eps + 2a
    a = GdpAccountant().compose(LaplaceEvent(noise_multiplier=5.0, pmf_slack=0.01), 10)
    b = GdpAccountant().compose(PureDpEvent(epsilon=0.22), 10)
    assert a.mu == pytest.approx(b.mu, rel=1e-12)
    # Gaussians with slack are not GDP: refused, state untouched
    acct = GdpAccountant()
    for ev in (
        GaussianEvent(noise_multiplier=1.0, pmf_slack=1e-9),
        PoissonSampledEvent(
            sampling_rate=0.1, event=GaussianEvent(noise_multiplier=1.0, pmf_slack=1e-9)
        ),
    ):
        assert not acct.supports(ev)
        with pytest.raises(UnsupportedEventError):
            acct.compose(ev)
    assert acct.ledger == ()


def test_refused_events() -> None:
    acct = GdpAccountant()
    for ev in (
        ApproxDpEvent(epsilon=1.0, delta=1e-6),
        DiscreteGaussianEvent(sigma=2.0, sensitivity=1),
        PoissonSampledEvent(sampling_rate=0.1, event=LaplaceEvent(noise_multiplier=1.0)),
        PoissonSampledEvent(
            sampling_rate=0.1,
            event=GaussianEvent(noise_multiplier=1.0, neighbouring=Neighbouring.REPLACE),
        ),
    ):
        assert not acct.supports(ev)
        with pytest.raises(UnsupportedEventError):
            acct.compose(ComposedEvent(events=(GaussianEvent(noise_multiplier=1.0), ev)))
    assert acct.ledger == ()
    assert acct.get_epsilon(1e-5) == 0.0


def test_randomized_response() -> None:
    eps = math.log(3.0)
    acct = GdpAccountant().compose(RandomizedResponseEvent(p_truth=0.75), 20)
    assert acct.mu == pytest.approx(clt_mu(approx_dp(epsilon=eps), counts=[20]), rel=1e-9)
    k_ary = GdpAccountant().compose(RandomizedResponseEvent(p_truth=0.5, categories=4), 5)
    assert 0 < k_ary.mu < math.inf
    trivial = GdpAccountant().compose(RandomizedResponseEvent(p_truth=0.25, categories=4), 5)
    assert trivial.mu == 0.0 and trivial.is_upper_bound
    full = GdpAccountant().compose(RandomizedResponseEvent(p_truth=1.0))
    assert math.isinf(full.get_epsilon(1e-5))
    assert full.get_delta(3.0) == 1.0
    assert math.isinf(GdpAccountant().compose(NonPrivateEvent()).mu)


def test_dpsgd_mu_formula_and_accountant() -> None:
    q, sigma, epochs = 256 / 60000, 1.1, 60
    steps = int(epochs / q)
    mu = dpsgd_gdp_mu(sampling_rate=q, noise_multiplier=sigma, steps=steps)
    assert mu == pytest.approx(q * math.sqrt(steps * (math.exp(1 / sigma**2) - 1)), rel=1e-14)
    acct = GdpAccountant().compose(
        SelfComposedEvent(
            event=PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=sigma)),
            count=steps,
        )
    )
    assert not acct.is_upper_bound
    assert acct.mu == pytest.approx(mu, rel=1e-12)
    eps = dpsgd_gdp_epsilon(sampling_rate=q, noise_multiplier=sigma, steps=steps, delta=1e-5)
    assert acct.get_epsilon(1e-5) == pytest.approx(eps, rel=1e-9)
    # the CLT is an estimate: compare with dp-accounting's tight PLD (it may be below it)
    ref = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-3)
    ref.compose(dpe.PoissonSampledDpEvent(q, dpe.GaussianDpEvent(sigma)), steps)
    tight = ref.get_epsilon(1e-5)
    assert 0.5 * tight < eps < 1.5 * tight


def test_dpsgd_edge_cases_and_validation() -> None:
    assert dpsgd_gdp_mu(sampling_rate=0.0, noise_multiplier=1.0, steps=10) == 0.0
    assert dpsgd_gdp_mu(sampling_rate=0.1, noise_multiplier=1.0, steps=0) == 0.0
    assert math.isinf(dpsgd_gdp_mu(sampling_rate=0.1, noise_multiplier=0.01, steps=1))
    assert dpsgd_gdp_mu(sampling_rate=1e-3, noise_multiplier=1e4, steps=10**6) > 0.0
    full = GdpAccountant().compose(
        PoissonSampledEvent(sampling_rate=1.0, event=GaussianEvent(noise_multiplier=2.0)), 4
    )
    assert full.is_upper_bound and full.mu == pytest.approx(1.0)
    for kwargs in (
        {"sampling_rate": 1.5, "noise_multiplier": 1.0, "steps": 1},
        {"sampling_rate": 0.1, "noise_multiplier": 0.0, "steps": 1},
        {"sampling_rate": 0.1, "noise_multiplier": 1.0, "steps": -1},
        {"sampling_rate": 0.1, "noise_multiplier": float("nan"), "steps": 1},
        {"sampling_rate": 0.1, "noise_multiplier": 1.0, "steps": 1.5},
    ):
        with pytest.raises(PrivacyParameterError):
            dpsgd_gdp_mu(**kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        dpsgd_gdp_mu(0.1, 1.0, 10)  # type: ignore[misc]
