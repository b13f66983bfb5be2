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
