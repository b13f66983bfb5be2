"""Regression tests from an attack on dpkit.risk (figures below the truth, confusing errors).

The exhaustive cross-checks (closed forms, mpmath integrals of the privacy-loss law, exact
discrete Neyman-Pearson curves, dp-accounting's optimistic privacy-loss distributions) are in
``tools/reproducers/risk_attack.py``; the cases here are the ones that failed before a fix, and
a few cheap one-sided checks against an exact truth.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import norm

from dpkit import risk
from dpkit.accounting import Budget
from dpkit.events import GaussianEvent

FPRS = np.asarray([1e-6, 1e-4, 1e-2, 0.1, 0.3, 0.5])


def _gauss_tpr(mu: float, a: np.ndarray) -> np.ndarray:
    """TPR of ``G_mu``: ``Phi(Phi^-1(a) + mu)`` (Dong, Roth and Su 2022, eq. 2.2)."""
    return np.asarray(norm.sf(norm.isf(a) - mu))


@pytest.mark.parametrize("rho", [10.0, 30.0, 100.0, 1e4])
def test_large_rho_gives_a_bound_not_an_error(rho: float) -> None:
    """Regression: rho >= ~30 made the certified profile hold delta = 1 (1 + 1e-12) and
    ``risk.of(rho=...)`` raised "deltas has an element out of range". A Gaussian release of
    mu = sqrt(2 rho) is rho-zCDP, so its TPR is a truth the bound must cover."""
    r = risk.of(rho=rho)
    assert np.all(r.tpr(FPRS) >= _gauss_tpr(math.sqrt(2.0 * rho), FPRS))


def test_zcdp_budget_that_spent_a_large_rho_reports_risk() -> None:
    """Regression: the same through a budget (and so ``dpkit report`` of it)."""
    b = Budget(rho=100.0)
    b.charge(GaussianEvent(noise_multiplier=0.1))  # rho = 1 / (2 * 0.1^2) = 50
    r = risk.of(b)
    assert np.all(r.tpr(FPRS) >= _gauss_tpr(10.0, FPRS))
    assert r.advantage() <= 1.0


def test_zero_rates_in_statements_do_not_divide_by_zero() -> None:
    """Regression: ``statements(fpr=0)`` / ``baseline=0`` (and ``dpkit risk --baseline 0``)
    raised ZeroDivisionError in the ``1 in N`` wording."""
    lines = risk.of(epsilon=1.0).statements(fpr=0.0, baseline=0.0)
    assert "at most 0 people" in lines[0]
    assert "probability 0 without" in lines[3]


@pytest.mark.parametrize("rate", [0.3, 0.15, 0.007, 3e-4])
def test_one_in_n_never_claims_a_larger_rate(rate: float) -> None:
    """Regression: ``1 in N`` used ``round(1/x)``: 0.3 read "1 in 3" (0.33 > 0.3), so the
    sentence claimed the TPR bound at 0.3 held at the larger rate 1/3 (it does not: for
    epsilon = 1 the bound at 1/3 is 0.906, the one shown was 0.815)."""
    words = risk.of(epsilon=1.0).statements(fpr=rate)[0]
    n = int(words.split("1 in ")[1].split(" ")[0].replace(",", ""))
    assert 1.0 / n <= rate


def test_prior_in_the_belief_sentence_is_never_shown_larger() -> None:
    """Regression: the prior was shown rounded up (0.0123456 as 1.3%) next to the bound of
    the smaller prior, i.e. a bound claimed for a prior it does not cover."""
    line = risk.of(epsilon=1.0).statements(prior=0.0123456)[2]
    shown = float(line.split("believed ")[1].split("%")[0]) / 100.0
    assert shown <= 0.0123456


@pytest.mark.parametrize("x", [1 - 5e-14, 0.99999999999995, 1 - 2**-40, 0.995])
def test_percent_near_one_is_never_below_the_rate(x: float) -> None:
    """Regression: the gap to 100% was formed in floats; 0.99999999999995 showed as
    99.999999999995%, 1e-16 below the rate. Compared exactly in rationals."""
    from fractions import Fraction

    shown = Fraction(risk.percent(x).rstrip("%")) / 100
    assert shown >= Fraction(x)


@pytest.mark.parametrize("x", [5e-324, 1e-300, 1e-13])
def test_percent_of_tiny_rates_is_an_upper_bound_in_words(x: float) -> None:
    """Regression: percent(5e-324) raised OverflowError (a posterior bound for a tiny prior);
    1e-300 printed a 300-digit string."""
    assert risk.percent(x) == "under 0.0000000001%"
    risk.of(mu=1.0).statements(prior=5e-324)


def test_pure_dp_posterior_with_failure_zero_is_finite() -> None:
    """Regression: failure=0 returned belief 1 for pure DP (the check 'floor >= failure' ran
    before the certain bound). Laplace of scale 2 has loss at most 1/2 always."""
    from dpkit.events import LaplaceEvent

    post = risk.of(LaplaceEvent(noise_multiplier=2.0)).posterior(0.01, failure=0.0)
    exact = 0.01 * math.exp(0.5) / (0.01 * math.exp(0.5) + 0.99)
    assert post.failure == 0.0
    assert exact <= post.bound <= exact * (1 + 1e-9)


@pytest.mark.parametrize(
    "call",
    [
        lambda: risk.of(mu=1.0, delta=0.3),  # delta was silently dropped
        lambda: risk.of(rho=0.5, delta=1e-6),
        lambda: risk.of(mu=1.0, neighbouring="xyz"),  # a bare ValueError
        lambda: risk.of([1.0]),  # a TypeError from tuple unpacking
        lambda: risk.of([(GaussianEvent(noise_multiplier=1.0), 1, 2)]),
        lambda: risk.of(mu=1.0).tpr("a"),  # a numpy ValueError
    ],
)
def test_bad_input_is_refused_with_a_dpkit_error(call: object) -> None:
    from dpkit.errors import PrivacyParameterError

    with pytest.raises(PrivacyParameterError):
        call()  # type: ignore[operator]


def test_report_of_a_replace_budget_reads_add_remove_releases_twice(tmp_path: object) -> None:
    """Regression: on a replace-one budget the report's per-analyst rate and its table of
    costs composed the ledger's events as given (add/remove), while the budget counted each
    twice: a Gaussian release of multiplier 4 showed mu 0.25, rho 0.03125 and a TPR at 1e-3
    of 0.23%, against the replace-one truth G_0.5 (mu 0.5, rho 0.125, TPR 0.48%)."""
    b = Budget(epsilon=5.0, delta=1e-5, method="zcdp", neighbouring="replace")
    b.sub_budget("alice", epsilon=4.0, delta=1e-5).charge(GaussianEvent(noise_multiplier=4.0))
    data = risk.report(b).data
    truth = float(_gauss_tpr(0.5, np.asarray([1e-3]))[0])
    assert data["analysts"][0]["max_tpr_at_1e-3"] >= truth
    costs = {r["language"]: r["value"] for r in data["costs"]}
    assert costs["Gaussian DP"] >= 0.5
    assert costs["zero-concentrated DP"] >= 0.125
