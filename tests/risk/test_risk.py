"""dpkit.risk against closed forms, dp-accounting's privacy-loss distributions and invariants.

Every figure of a :class:`dpkit.risk.Risk` is an upper bound on what an attacker achieves; the
tests check both that it is at least the exact value (the safe side) and that it is close to it
(not a loose conversion).
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import norm

from dpkit import fdp, risk
from dpkit.accounting import Budget
from dpkit.errors import PrivacyParameterError, UnsupportedEventError
from dpkit.events import (
    GaussianEvent,
    LaplaceEvent,
    NonPrivateEvent,
    PoissonSampledEvent,
    RandomizedResponseEvent,
)
from dpkit.mechanisms import Gaussian, Laplace

FPRS = np.concatenate([np.geomspace(1e-7, 0.5, 60), np.linspace(0.5, 1.0, 21)])


def laplace_tpr(alpha: np.ndarray, mu: float) -> np.ndarray:
    """1 - T(Lap(0,1), Lap(mu,1))(alpha) written out (DRS Section 2.3)."""
    em = math.exp(-mu)
    return np.where(
        alpha < em / 2,
        alpha / em,
        np.where(alpha <= 0.5, 1 - em / (4 * alpha), 1 - em * (1 - alpha)),
    )


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("mu", [0.1, 0.5, 1.0, 2.0, 4.0])
def test_gaussian_tpr_is_phi_of_shifted_quantile(mu: float) -> None:
    r = risk.of(mu=mu)
    exact = norm.cdf(norm.ppf(FPRS) + mu)
    got = r.tpr(FPRS)
    assert np.all(got >= exact - 1e-15)  # an upper bound ...
    np.testing.assert_allclose(got, exact, rtol=1e-9, atol=2e-12)  # ... and the exact one
    assert r.exact
    assert r.advantage() == pytest.approx(2 * norm.cdf(mu / 2) - 1, rel=1e-9)
    assert r.advantage() >= 2 * norm.cdf(mu / 2) - 1


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.0])
def test_laplace_tpr_matches_the_written_out_curve(scale: float) -> None:
    r = risk.of(LaplaceEvent(noise_multiplier=scale))
    exact = laplace_tpr(FPRS, 1.0 / scale)
    got = r.tpr(FPRS)
    assert np.all(got >= exact - 1e-15)
    np.testing.assert_allclose(got, exact, rtol=1e-9, atol=1e-10)
    # dpkit's mechanism: its lattice scale and floating-point slack move the curve a little,
    # never below the ideal one it was calibrated from
    mech = risk.of(Laplace.from_scale(scale=scale, sensitivity=1.0))
    assert not mech.exact
    assert np.all(mech.tpr(FPRS) >= exact - 1e-15)
    np.testing.assert_allclose(mech.tpr(FPRS), exact, rtol=1e-3, atol=1e-12)


def test_gaussian_mechanism_and_event_give_the_gdp_curve() -> None:
    mech = Gaussian.from_mu(mu=0.7, sensitivity=2.0)
    a = risk.of(mech).tpr(FPRS)
    b = risk.of(GaussianEvent(noise_multiplier=1 / 0.7)).tpr(FPRS)
    # the mechanism's floating-point slack (about 1e-6) moves the curve that little
    np.testing.assert_allclose(a, norm.cdf(norm.ppf(FPRS) + 0.7), rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(b, norm.cdf(norm.ppf(FPRS) + 0.7), rtol=1e-9, atol=1e-12)


def test_gaussian_releases_compose_exactly_to_gdp() -> None:
    r = risk.of([(GaussianEvent(noise_multiplier=2.0), 3), GaussianEvent(noise_multiplier=1.0)])
    assert isinstance(r.curve, fdp.GaussianTradeOff)
    assert r.curve.mu == pytest.approx(math.sqrt(3 / 4 + 1))
    assert r.curve.mu >= math.sqrt(3 / 4 + 1)


def test_pure_dp_closed_forms() -> None:
    eps = 1.3
    r = risk.of(epsilon=eps)
    e = math.exp(eps)
    # f_{eps,0}: TPR(a) = min(e^eps a, 1 - e^-eps (1 - a)) (DRS Proposition 2.5)
    exact = np.minimum(e * FPRS, 1 - (1 - FPRS) / e)
    np.testing.assert_allclose(r.tpr(FPRS), exact, rtol=1e-12, atol=2e-12)
    assert r.advantage() == pytest.approx((e - 1) / (e + 1), rel=1e-9)
    post = r.posterior(0.05)
    assert post.failure == 0.0  # pure DP: with certainty
    assert post.bound == pytest.approx(0.05 * e / (0.05 * e + 0.95), rel=1e-9)
    assert post.bound >= 0.05 * e / (0.05 * e + 0.95)
    # reconstruction, Hayes, Mahloujifar and Balle 2023: e^eps kappa for (eps, 0)-DP
    assert r.reconstruction(1e-3) == pytest.approx(e * 1e-3, rel=1e-9)


def test_binary_randomized_response_is_exactly_its_epsilon_curve() -> None:
    r = risk.of(RandomizedResponseEvent(p_truth=0.75))
    assert r.neighbouring.value == "replace"
    np.testing.assert_allclose(
        r.tpr(FPRS), risk.of(epsilon=math.log(3)).tpr(FPRS), rtol=1e-9, atol=1e-12
    )


def test_kary_randomized_response_curve() -> None:
    # 4 categories, truth kept w.p. 0.7: the most powerful test rejects on the output b
    # (likelihood ratio 0.7/0.1 = 7), so TPR(0.1) = 0.7 exactly
    r = risk.of(RandomizedResponseEvent(p_truth=0.7, categories=4))
    assert r.max_tpr(0.1) == pytest.approx(0.7, abs=1e-9)
    assert r.max_tpr(0.05) == pytest.approx(0.35, abs=1e-9)


def test_group_privacy_gaussian_and_laplace_are_exact_shifts() -> None:
    assert risk.of(mu=0.5).group(3).max_tpr(1e-3) == pytest.approx(
        norm.cdf(norm.ppf(1e-3) + 1.5), rel=1e-9
    )
    got = risk.of(LaplaceEvent(noise_multiplier=2.0)).group(2).tpr(FPRS)
    np.testing.assert_allclose(got, laplace_tpr(FPRS, 1.0), rtol=1e-9, atol=1e-10)


def test_group_privacy_beats_the_textbook_epsilon_delta_rule() -> None:
    # (eps, delta)-DP gives (k eps, k e^{(k-1) eps} delta) for groups of k: a valid, looser bound
    eps, delta, k = 0.5, 1e-5, 3
    ours = risk.of(epsilon=eps, delta=delta).group(k).tpr(FPRS)
    textbook = risk.of(epsilon=k * eps, delta=k * math.exp((k - 1) * eps) * delta).tpr(FPRS)
    assert np.all(ours <= textbook + 1e-12)


def test_posterior_for_gaussian_dp_holds_against_the_exact_loss_tail() -> None:
    # under Q the privacy loss of G_mu is N(mu^2/2, mu^2): P(L > eps) = Phi(mu/2 - eps/mu)
    for mu in (0.5, 1.0, 2.0):
        for fail in (1e-3, 1e-6):
            p = risk.of(mu=mu).posterior(0.01, failure=fail)
            assert norm.cdf(mu / 2 - p.epsilon / mu) <= fail  # valid
            exact_eps = mu * (mu / 2 - norm.ppf(fail))
            assert p.epsilon <= exact_eps + 0.6 * mu + 0.05  # and not loose


def test_posterior_with_delta_needs_a_failure_above_delta() -> None:
    r = risk.of(epsilon=1.0, delta=1e-6)
    assert r.posterior(0.01, failure=1e-6).bound == 1.0  # cannot be promised
    p = r.posterior(0.01)  # default failure: 10 delta
    assert p.failure == pytest.approx(1e-5, rel=1e-6)
    assert 0.01 < p.bound < 0.035


# ------------------------------------------------------------------ dp-accounting
def _dpa_tpr(pld: object, alphas: np.ndarray) -> np.ndarray:
    """TPR(alpha) = inf_eps delta(eps) + e^eps alpha from dp-accounting's privacy profile
    (DRS Proposition 2.12); dp-accounting 0.6 has no direct true-positive-rate function."""
    eps = np.linspace(0.0, 30.0, 1501)
    deltas = np.asarray(pld.get_delta_for_epsilon(eps))  # type: ignore[attr-defined]
    return np.asarray([np.min(deltas + np.exp(eps) * a) for a in alphas])


ALPHAS = np.asarray([1e-5, 1e-4, 1e-3, 1e-2, 0.1, 0.3])


def test_composed_laplace_against_dp_accounting() -> None:
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    k, b = 5, 2.0
    theirs = pld_mod.from_laplace_mechanism(b, value_discretization_interval=1e-4).self_compose(k)
    ours = risk.of([(LaplaceEvent(noise_multiplier=b), k)])
    t, o = _dpa_tpr(theirs, ALPHAS), ours.tpr(ALPHAS)
    np.testing.assert_allclose(o, t, rtol=0.02, atol=2e-4)


def test_subsampled_gaussian_against_dp_accounting() -> None:
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    q, sigma, k = 0.05, 1.0, 20
    theirs = pld_mod.from_gaussian_mechanism(
        sigma, sampling_prob=q, value_discretization_interval=1e-3
    ).self_compose(k)
    ours = risk.of(
        [(PoissonSampledEvent(event=GaussianEvent(noise_multiplier=sigma), sampling_rate=q), k)]
    )
    assert not ours.exact
    t, o = _dpa_tpr(theirs, ALPHAS), ours.tpr(ALPHAS)
    np.testing.assert_allclose(o, t, rtol=0.03, atol=5e-4)


def test_gaussian_closed_form_against_dp_accounting() -> None:
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    theirs = pld_mod.from_gaussian_mechanism(1.0, value_discretization_interval=1e-3)
    np.testing.assert_allclose(
        risk.of(mu=1.0).tpr(ALPHAS), _dpa_tpr(theirs, ALPHAS), rtol=0.01, atol=1e-4
    )


# ------------------------------------------------------------------ guarantees read from objects
def test_budgets_report_what_they_certify() -> None:
    g = Budget(mu=1.0)
    g.charge(GaussianEvent(noise_multiplier=2.0))
    g.charge(GaussianEvent(noise_multiplier=2.0))
    r = risk.of(g)
    assert r.max_tpr(1e-3) == pytest.approx(norm.cdf(norm.ppf(1e-3) + math.sqrt(0.5)), rel=1e-6)
    assert risk.of(SimpleNamespace(budget=g)).max_tpr(1e-3) == r.max_tpr(1e-3)  # a session
    basic = Budget(epsilon=2.0, delta=1e-6)
    basic.charge(epsilon=0.5)
    basic.charge(epsilon=0.25)
    assert risk.of(basic).max_tpr(1e-3) == pytest.approx(math.exp(0.75) * 1e-3, rel=1e-9)
    z = Budget(rho=0.5)
    z.charge(GaussianEvent(noise_multiplier=2.0))  # rho = 1/8
    # zCDP is weaker than the Gaussian it came from: the bound sits above G_{1/2}
    zr = risk.of(z).tpr(ALPHAS)
    assert np.all(zr >= norm.cdf(norm.ppf(ALPHAS) + 0.5) - 1e-12)
    assert np.all(zr <= risk.of(rho=0.125).tpr(ALPHAS) + 1e-9)


def test_a_non_private_release_leaves_nothing() -> None:
    r = risk.of([GaussianEvent(noise_multiplier=1.0), NonPrivateEvent()])
    assert r.max_tpr(1e-6) == 1.0 and r.advantage() == 1.0
    assert r.posterior(0.01).bound == 1.0


def test_relations_are_not_mixed_silently() -> None:
    with pytest.raises(UnsupportedEventError, match="replace-one"):
        risk.of([RandomizedResponseEvent(p_truth=0.75)], neighbouring="add_remove")
    # an add/remove release read under replace-one counts twice (group privacy)
    r = risk.of([GaussianEvent(noise_multiplier=1.0)], neighbouring="replace")
    assert r.curve.mu == pytest.approx(2.0)  # type: ignore[attr-defined]


def test_result_attrs_give_the_charged_pair() -> None:
    frame = SimpleNamespace(attrs={"dpkit": {"epsilon": 0.5, "delta": 0.0}})
    assert risk.of(frame).max_tpr(0.01) == pytest.approx(math.exp(0.5) * 0.01, rel=1e-9)


@pytest.mark.parametrize(
    "bad",
    [
        {},
        {"epsilon": float("nan")},
        {"epsilon": -1.0},
        {"mu": float("inf")},
        {"rho": -0.1},
        {"epsilon": 1.0, "delta": 1.5},
        {"epsilon": 1.0, "mu": 1.0},
        {"obj": object()},
    ],
)
def test_bad_parameters_are_refused_clearly(bad: dict[str, object]) -> None:
    with pytest.raises(PrivacyParameterError):
        risk.of(**bad)  # type: ignore[arg-type]


def test_bad_attack_parameters_are_refused() -> None:
    r = risk.of(mu=1.0)
    for call in (
        lambda: r.posterior(1.5),
        lambda: r.posterior(float("nan")),
        lambda: r.max_tpr(-0.1),
        lambda: r.reconstruction(2.0),
        lambda: r.group(0),
    ):
        with pytest.raises(PrivacyParameterError):
            call()


def test_statements_are_plain_and_rounded_up() -> None:
    lines = risk.of(mu=1.0).statements()
    assert len(lines) == 4
    assert "1.9%" in lines[0]  # Phi(Phi^-1(1e-3) + 1) = 0.01830 rounds up to 1.9%
    assert all("mu" not in line and "epsilon" not in line for line in lines)
    assert risk.percent(0.01830) == "1.9%" and risk.percent(0.9991) == "99.91%"
    assert risk.percent(0.99912) == "99.92%"


# ------------------------------------------------------------------ invariants
guarantees = st.one_of(
    st.floats(0.01, 8.0).map(lambda m: risk.of(mu=m)),
    st.tuples(st.floats(0.01, 5.0), st.sampled_from([0.0, 1e-8, 1e-5])).map(
        lambda p: risk.of(epsilon=p[0], delta=p[1])
    ),
    st.floats(0.2, 5.0).map(lambda b: risk.of(LaplaceEvent(noise_multiplier=b))),
)


@settings(max_examples=40, deadline=None)
@given(guarantees, st.lists(st.floats(0.0, 1.0), min_size=2, max_size=8))
def test_tpr_is_monotone_and_never_below_fpr(r: risk.Risk, fprs: list[float]) -> None:
    a = np.sort(np.asarray(fprs))
    t = r.tpr(a)
    assert np.all(np.diff(t) >= -1e-12)
    assert np.all(t >= a) and np.all(t <= 1.0)
    assert np.all(r.group(2).tpr(a) >= t - 1e-12)  # a group is never safer


@settings(max_examples=15, deadline=None)
@given(st.floats(0.05, 4.0), st.floats(0.0, 2.0), st.floats(1e-4, 0.5), st.floats(0.0, 0.4))
def test_posterior_is_monotone_in_prior_and_epsilon(
    eps: float, more: float, prior: float, more_prior: float
) -> None:
    low = risk.of(epsilon=eps)
    high = risk.of(epsilon=eps + more)
    p = low.posterior(prior).bound
    assert p >= prior
    assert low.posterior(min(1.0, prior + more_prior)).bound >= p
    assert high.posterior(prior).bound >= p
    m_low, m_high = risk.of(mu=eps), risk.of(mu=eps + more)
    assert m_high.posterior(prior).bound >= m_low.posterior(prior).bound - 1e-12
