"""Claimed privacy guarantees, as trade-off functions an audit can refute.

A claim is a trade-off function f (Dong, Roth and Su, "Gaussian differential privacy", JRSS-B
2022, Definition 2.1): the mechanism claims ``T(M(D), M(D')) >= f`` for every pair of neighbours,
i.e. every test of "M(D)" against "M(D')" with type I error alpha has type II error
``beta >= f(alpha)``. Neighbouring is symmetric, so the mirrored test (errors swapped) must obey
the same bound.

* ``(eps, delta)``-DP is ``f_{eps,delta}(alpha) = max(0, 1 - delta - e^eps alpha,
  e^-eps (1 - delta - alpha))`` (Dong, Roth and Su 2022, Proposition 2.5; Wasserman and Zhou 2010);
* mu-GDP is ``G_mu(alpha) = Phi(Phi^{-1}(1 - alpha) - mu)`` (ibid., the definition of Gaussian DP);
* any other trade-off function (for instance one from :mod:`dpkit.fdp`) is taken as a callable
  mapping an array of alphas to an array of betas.

Refutation: with joint confidence ``1 - g`` the test's errors are at most ``(alpha_u, beta_u)``.
Because f is non-increasing, ``beta >= f(alpha) >= f(alpha_u)``; so ``beta_u < f(alpha_u)`` (or
the mirrored ``alpha_u < f(beta_u)``) contradicts the claim at confidence ``1 - g``. Nothing
weaker is ever reported as a violation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import special

from dpkit._numeric.validation import check_delta, check_epsilon, check_mu
from dpkit.audit._stats import epsilon_lower_bound, mu_lower_bound
from dpkit.errors import PrivacyParameterError

__all__ = ["Claim", "as_claim"]

FloatArray = npt.NDArray[np.float64]
TradeOff = Callable[[FloatArray], Any]


def _f_eps_delta(alpha: FloatArray, epsilon: float, delta: float) -> FloatArray:
    a = np.clip(alpha, 0.0, 1.0)
    e = math.exp(epsilon) if epsilon < 700 else math.inf
    with np.errstate(invalid="ignore", over="ignore"):
        line1 = 1.0 - delta - e * a
        line1 = np.where(a == 0.0, 1.0 - delta, line1)
    line2 = math.exp(-epsilon) * (1.0 - delta - a)
    return np.maximum(np.maximum(line1, line2), 0.0)


def _g_mu(alpha: FloatArray, mu: float) -> FloatArray:
    a = np.clip(alpha, 0.0, 1.0)
    return np.asarray(special.ndtr(-special.ndtri(a) - mu), dtype=np.float64)


@dataclass(frozen=True)
class Claim:
    """A claimed guarantee: build it with :meth:`pure`, :meth:`approx`, :meth:`gdp` or
    :meth:`tradeoff`; never directly.
    """

    kind: str
    label: str
    epsilon: float | None = None
    delta: float = 0.0
    mu: float | None = None
    function: TradeOff | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Direct construction is validated too: a claim never holds an unchecked parameter.
        if self.kind == "epsilon_delta":
            check_epsilon(self.epsilon, allow_zero=True)
            check_delta(self.delta)
        elif self.kind == "gdp":
            check_mu(self.mu)
        elif self.kind == "tradeoff":
            if not callable(self.function):
                raise PrivacyParameterError("a trade-off claim needs a callable function")
        else:
            raise PrivacyParameterError(
                f"kind must be 'epsilon_delta', 'gdp' or 'tradeoff', got {self.kind!r}"
            )

    # -- constructors (keyword-only privacy parameters, shared validator) --------------------
    @classmethod
    def pure(cls, *, epsilon: float) -> Claim:
        """epsilon-DP: ``f_{eps,0}``."""
        eps = check_epsilon(epsilon)
        return cls(kind="epsilon_delta", label=f"{eps:g}-DP", epsilon=eps, delta=0.0)

    @classmethod
    def approx(cls, *, epsilon: float, delta: float) -> Claim:
        """(epsilon, delta)-DP: ``f_{eps,delta}``."""
        eps = check_epsilon(epsilon, allow_zero=True)
        dlt = check_delta(delta)
        return cls(kind="epsilon_delta", label=f"({eps:g}, {dlt:g})-DP", epsilon=eps, delta=dlt)

    @classmethod
    def gdp(cls, *, mu: float) -> Claim:
        """mu-GDP: ``G_mu``."""
        m = check_mu(mu)
        return cls(kind="gdp", label=f"{m:g}-GDP", mu=m)

    @classmethod
    def tradeoff(cls, function: TradeOff, *, label: str | None = None) -> Claim:
        """f-DP for a trade-off function ``function`` (array of alphas -> array of betas)."""
        if not callable(function):
            raise PrivacyParameterError(
                f"a trade-off claim needs a callable, got {type(function).__name__}"
            )
        probe = np.asarray(function(np.array([0.0, 0.5, 1.0])), dtype=np.float64)
        if probe.shape != (3,) or not np.all(np.isfinite(probe)):
            raise PrivacyParameterError(
                "a trade-off function must map an array of alphas to finite betas of equal shape"
            )
        return cls(kind="tradeoff", label=label or repr(function), function=function)

    # -- evaluation -----------------------------------------------------------------------
    def beta(self, alpha: npt.ArrayLike) -> FloatArray:
        """The claimed smallest type II error at type I error ``alpha``: ``f(alpha)``."""
        a = np.asarray(alpha, dtype=np.float64)
        if self.kind == "epsilon_delta" and self.epsilon is not None:
            return _f_eps_delta(a, self.epsilon, self.delta)
        if self.kind == "gdp" and self.mu is not None:
            return _g_mu(a, self.mu)
        if self.kind == "tradeoff" and self.function is not None:
            out = np.asarray(self.function(np.clip(a, 0.0, 1.0)), dtype=np.float64)
            return out.reshape(a.shape)
        raise ValueError(f"malformed claim {self!r}: build claims with Claim.pure/approx/gdp")

    def margin(self, alpha_upper: npt.ArrayLike, beta_upper: npt.ArrayLike) -> FloatArray:
        """``max(f(alpha_u) - beta_u, f(beta_u) - alpha_u)``: > 0 exactly when refuted."""
        a = np.asarray(alpha_upper, dtype=np.float64)
        b = np.asarray(beta_upper, dtype=np.float64)
        return np.asarray(np.maximum(self.beta(a) - b, self.beta(b) - a), dtype=np.float64)

    def refuted_by(self, alpha_upper: float, beta_upper: float) -> bool:
        """True when error bounds ``(alpha_u, beta_u)`` lie strictly below the claimed curve.

        For an (epsilon, delta) claim this is the same as
        ``epsilon_lower_bound(alpha_u, beta_u, delta=delta) > epsilon``; for mu-GDP the same as
        ``mu_lower_bound(alpha_u, beta_u) > mu``.
        """
        if self.kind == "epsilon_delta":
            lb = float(epsilon_lower_bound(alpha_upper, beta_upper, delta=self.delta))
            return lb > (self.epsilon or 0.0)
        if self.kind == "gdp":
            return float(mu_lower_bound(alpha_upper, beta_upper)) > (self.mu or 0.0)
        return bool(self.margin(alpha_upper, beta_upper) > 0.0)

    def score(self, alpha_upper: FloatArray, beta_upper: FloatArray) -> FloatArray:
        """Selection objective (larger = stronger evidence against the claim), vectorised."""
        if self.kind == "epsilon_delta":
            return epsilon_lower_bound(alpha_upper, beta_upper, delta=self.delta)
        if self.kind == "gdp":
            return mu_lower_bound(alpha_upper, beta_upper)
        # General f: the margin in probit units, ``Phi^{-1}(f(alpha_u)) - Phi^{-1}(beta_u)``
        # (and its mirror). It is > 0 exactly when the claim is refuted, equals
        # ``mu_lower_bound - mu`` for f = G_mu, and does not favour the corners of the square
        # the way a margin in probability units (tiny near alpha = 0 or 1) would.
        a = np.asarray(alpha_upper, dtype=np.float64)
        b = np.asarray(beta_upper, dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            s1 = special.ndtri(np.clip(self.beta(a), 0.0, 1.0)) - special.ndtri(b)
            s2 = special.ndtri(np.clip(self.beta(b), 0.0, 1.0)) - special.ndtri(a)
        out = np.fmax(s1, s2)
        return np.asarray(np.nan_to_num(out, nan=-np.inf), dtype=np.float64)


def as_claim(claim: Any) -> Claim | None:
    """Accept a :class:`Claim`, ``None``, or a trade-off callable (e.g. a ``dpkit.fdp`` object).

    ``dpkit.fdp.gdp(mu)`` becomes ``Claim.gdp(mu=mu)`` and ``dpkit.fdp.approx_dp(epsilon=,
    delta=)`` becomes ``Claim.approx(...)``; any other trade-off object is used as a callable.

    Plain numbers are refused on purpose: write ``Claim.pure(epsilon=1)`` so epsilon and delta
    can never be confused.
    """
    if claim is None or isinstance(claim, Claim):
        return claim
    from dpkit import fdp  # lazy: only claims given as fdp objects need it

    # The two closed forms of dpkit.fdp become native claims (exact curve, ratio reported).
    if type(claim) is fdp.GaussianTradeOff and claim.mu > 0:
        return Claim.gdp(mu=claim.mu)
    if type(claim) is fdp.ApproxDpTradeOff:
        return Claim.approx(epsilon=claim.eps, delta=claim.delta_)
    if callable(claim):
        return Claim.tradeoff(claim, label=repr(claim))
    raise PrivacyParameterError(
        f"claim must be a Claim (Claim.pure/approx/gdp/tradeoff) or a trade-off function, got "
        f"{type(claim).__name__} {claim!r}"
    )
