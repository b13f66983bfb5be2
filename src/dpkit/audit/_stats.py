"""Confidence bounds and the conversions from an empirical test to privacy lower bounds.

Clopper-Pearson
---------------
For ``k`` successes in ``n`` Bernoulli(p) trials the exact one-sided bounds at level ``1 - g``
are (Clopper and Pearson, Biometrika 26, 1934)::

    p_upper = B^{-1}(1 - g; k + 1, n - k)     (= 1 when k = n)
    p_lower = B^{-1}(g;     k,     n - k + 1) (= 0 when k = 0)

where ``B^{-1}(q; a, b)`` is the quantile function of the Beta(a, b) law. They hold for every
p and n (no asymptotics): ``P(p <= p_upper) >= 1 - g``.

From a test to epsilon
----------------------
A test that rejects the hypothesis "the output came from M(D)" on the event S has type I error
``alpha = P[M(D) in S]`` and type II error ``beta = P[M(D') not in S]``. If M is (eps, delta)-DP,
every such test satisfies (Kairouz, Oh and Viswanath, "The composition theorem for differential
privacy", ICML 2015, Theorem 2.1; Dong, Roth and Su, "Gaussian differential privacy", JRSS-B 2022,
Proposition 2.5: ``beta >= f_{eps,delta}(alpha) = max(0, 1 - delta - e^eps alpha,
e^-eps (1 - delta - alpha))``)::

    eps >= max( ln((1 - delta - alpha) / beta), ln((1 - delta - beta) / alpha) ).

The right side decreases in alpha and in beta, so plugging in upper confidence bounds for both
gives a lower confidence bound on eps (Jagielski, Ullman and Oprea, "Auditing differentially
private machine learning", NeurIPS 2020). Both bounds must hold at once: with level ``1 - g/2``
each, the union bound gives joint level ``1 - g``.

From a test to mu (Gaussian DP)
-------------------------------
mu-GDP means ``beta >= G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)`` (Dong, Roth and Su 2022,
definition of Gaussian DP), i.e. ``mu >= Phi^{-1}(1 - alpha) - Phi^{-1}(beta)``, again decreasing
in alpha and beta.

An arbitrary claimed trade-off function f (convex, continuous, non-increasing) is refuted by a
test whose errors satisfy ``beta_upper < f(alpha_upper)``: since f is non-increasing,
``beta >= f(alpha) >= f(alpha_upper) > beta_upper`` would contradict ``beta <= beta_upper``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from dpkit._numeric.validation import check_delta, check_probability

__all__ = [
    "clopper_pearson",
    "clopper_pearson_lower",
    "clopper_pearson_upper",
    "epsilon_lower_bound",
    "mu_lower_bound",
]

FloatArray = npt.NDArray[np.float64]


def _counts(successes: Any, trials: Any) -> tuple[FloatArray, FloatArray]:
    k = np.asarray(successes, dtype=np.float64)
    n = np.asarray(trials, dtype=np.float64)
    if not (np.all(np.isfinite(k)) and np.all(np.isfinite(n))):
        raise ValueError("successes and trials must be finite")
    if np.any(n < 1) or np.any(k < 0) or np.any(k > n) or np.any(k != np.round(k)):
        raise ValueError("need integers 0 <= successes <= trials with trials >= 1")
    return k, n


def clopper_pearson_upper(successes: Any, trials: Any, *, level: float) -> FloatArray:
    """One-sided exact upper bound: ``B^{-1}(level; k + 1, n - k)``, 1 when ``k = n``.

    ``P(p <= upper) >= level`` for every p (Clopper and Pearson 1934). Vectorised.
    """
    level = check_probability(level, name="level", open_low=True, open_high=True)
    k, n = _counts(successes, trials)
    full = k >= n
    b = np.where(full, 1.0, n - k)
    out = np.asarray(special.betaincinv(k + 1.0, b, level), dtype=np.float64)
    return np.where(full, 1.0, out)


def clopper_pearson_lower(successes: Any, trials: Any, *, level: float) -> FloatArray:
    """One-sided exact lower bound: ``B^{-1}(1 - level; k, n - k + 1)``, 0 when ``k = 0``."""
    level = check_probability(level, name="level", open_low=True, open_high=True)
    k, n = _counts(successes, trials)
    empty = k <= 0
    a = np.where(empty, 1.0, k)
    out = np.asarray(special.betaincinv(a, n - k + 1.0, 1.0 - level), dtype=np.float64)
    return np.where(empty, 0.0, out)


def clopper_pearson(
    successes: Any, trials: Any, *, confidence: float = 0.95
) -> tuple[FloatArray, FloatArray]:
    """Two-sided exact interval at level ``confidence``: each side at ``(1 + confidence) / 2``."""
    confidence = check_probability(confidence, name="confidence", open_low=True, open_high=True)
    side = 1.0 - (1.0 - confidence) / 2.0
    return (
        clopper_pearson_lower(successes, trials, level=side),
        clopper_pearson_upper(successes, trials, level=side),
    )


def epsilon_lower_bound(alpha: Any, beta: Any, *, delta: float = 0.0) -> FloatArray:
    """``max(ln((1 - delta - alpha) / beta), ln((1 - delta - beta) / alpha), 0)``, vectorised.

    With upper confidence bounds for the errors ``alpha``, ``beta`` of one test this is a lower
    confidence bound on the epsilon of any (epsilon, delta) guarantee the mechanism can have
    (Kairouz et al. 2015, Theorem 2.1; see the module docstring). Values are 0 when the test
    shows nothing and ``inf`` only when an error bound is exactly 0.
    """
    delta = check_delta(delta)
    a = np.asarray(alpha, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        e1 = np.log(np.maximum(1.0 - delta - a, 0.0)) - np.log(b)
        e2 = np.log(np.maximum(1.0 - delta - b, 0.0)) - np.log(a)
    out = np.fmax(np.fmax(e1, e2), 0.0)
    return np.asarray(np.nan_to_num(out, nan=0.0, posinf=np.inf), dtype=np.float64)


def mu_lower_bound(alpha: Any, beta: Any) -> FloatArray:
    """``max(Phi^{-1}(1 - alpha) - Phi^{-1}(beta), 0) = max(-Phi^{-1}(alpha) - Phi^{-1}(beta), 0)``.

    With upper confidence bounds on the errors this lower-bounds the mu of any mu-GDP guarantee
    (Dong, Roth and Su 2022, definition of mu-GDP). The expression is symmetric in alpha and
    beta, so it covers the test and its mirror image; it is computed as ``-ndtri(a) - ndtri(b)``
    to keep precision for tiny errors.
    """
    a = np.clip(np.asarray(alpha, dtype=np.float64), 0.0, 1.0)
    b = np.clip(np.asarray(beta, dtype=np.float64), 0.0, 1.0)
    with np.errstate(invalid="ignore"):
        m = -special.ndtri(a) - special.ndtri(b)
    out = np.fmax(m, 0.0)
    return np.asarray(np.nan_to_num(out, nan=0.0, posinf=np.inf), dtype=np.float64)
