"""The central limit theorem of f-DP (Dong, Roth and Su 2022, Section 3.2).

For a symmetric trade-off function f (DRS eq. (3.2)):

    kl(f)      = -int_0^1 log|f'(x)| dx,
    kappa_2(f) =  int_0^1 log^2|f'(x)| dx,
    kappa_3(f) =  int_0^1 |log|f'(x)||^3 dx,
    kbar_3(f)  =  int_0^1 |log|f'(x)| + kl(f)|^3 dx.

With ``f = T(P, Q)`` and ``L = log(dQ/dP)``, ``log|f'(x)|`` on ``x ~ U[0, 1]`` has the law of L
under P, so ``kl = D(P || Q) = -E_P L``, ``kappa_2 = E_P L^2``, ``kappa_3 = E_P |L|^3`` and
``kbar_3 = E_P |L - E_P L|^3``.

DRS Theorem 3.5 (Berry-Esseen): for symmetric f_1..f_n with finite kappa_3, put

    mu    = 2 ||kl||_1 / sqrt(||kappa_2||_1 - ||kl||_2^2),
    gamma = 0.56 ||kbar_3||_1 / (||kappa_2||_1 - ||kl||_2^2)^{3/2}.

Then for all alpha in [gamma, 1 - gamma]:
``G_mu(alpha + gamma) - gamma <= f_1 (x) ... (x) f_n (alpha) <= G_mu(alpha - gamma) + gamma``.
DRS Theorem 3.4 (the limit) gives ``G_{2K/s}`` when ``sum kl -> K``, ``max kl -> 0``,
``sum kappa_2 -> s^2`` and ``sum kappa_3 -> 0``.

``G_mu`` alone is an *approximation* (it can be optimistic); only the Berry-Esseen function is a
guaranteed lower bound. :class:`CltResult` keeps them apart (``.estimate`` and ``.bound``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy.special import ndtr

from dpkit._numeric.gaussian import gaussian_tradeoff, log_gaussian_delta_slope
from dpkit._numeric.search import SearchError, search
from dpkit._numeric.validation import check_integer, check_real_array
from dpkit.errors import PrivacyParameterError
from dpkit.fdp._tradeoff import (
    ApproxDpTradeOff,
    GaussianTradeOff,
    LaplaceTradeOff,
    PiecewiseLinearTradeOff,
    ScaledGaussianTradeOff,
    TradeOffFunction,
)

__all__ = [
    "BerryEsseenBound",
    "CltResult",
    "Functionals",
    "approx_dp_composition_limit",
    "berry_esseen",
    "berry_esseen_from_sums",
    "clt_mu",
    "functionals",
]

FloatArray = NDArray[np.float64]
_SQRT_2PI = math.sqrt(2.0 * math.pi)


@dataclasses.dataclass(frozen=True)
class Functionals:
    """``kl``, ``kappa_2``, ``kappa_3`` and centred ``kappa_3`` of a symmetric trade-off
    function; ``exact`` is False when they come from a numeric discretisation."""

    kl: float
    kappa2: float
    kappa3: float
    kappa3_centred: float
    exact: bool = True

    def scaled(self, count: int) -> Functionals:
        """The sums over ``count`` identical factors (the ``||.||_1`` of DRS Theorem 3.5);
        ``||kl||_2^2`` is not additive this way, see :func:`berry_esseen`."""
        return Functionals(
            self.kl * count,
            self.kappa2 * count,
            self.kappa3 * count,
            self.kappa3_centred * count,
            self.exact,
        )


def _series(mu: float, coeff: object, start: int, terms: int = 30) -> float:
    total = 0.0
    term_pow = mu**start
    fact = math.factorial(start)
    for n in range(start, start + terms):
        total += coeff(n) * term_pow / fact  # type: ignore[operator]
        term_pow *= mu
        fact *= n + 1
    return total


def _abs_third_moment_normal(m: float, s: float) -> float:
    """``E|X|^3`` for ``X ~ N(m, s^2)``:
    ``(m^3 + 3 m s^2)(1 - 2 Phi(-m/s)) + 2 s (m^2 + 2 s^2) phi(m/s)``."""
    if s == 0.0:
        return abs(m) ** 3
    a = -m / s
    phi = math.exp(-0.5 * a * a) / _SQRT_2PI
    return float((m**3 + 3 * m * s * s) * (1.0 - 2.0 * ndtr(a)) + 2 * s * (m * m + 2 * s * s) * phi)


def _laplace_abs_moment(mu: float, c: float) -> float:
    """``E|L - c|^3`` for the Laplace privacy loss under P = Lap(0, 1): atoms -mu (mass 1/2) and
    mu (mass e^{-mu}/2), and ``2x - mu`` with density ``e^{-x}/2`` on (0, mu); the integral by
    adaptive quadrature with the kink as a break point (no discretisation of f)."""
    atoms = 0.5 * abs(-mu - c) ** 3 + 0.5 * math.exp(-mu) * abs(mu - c) ** 3
    if mu == 0.0:
        return atoms
    kink = (mu + c) / 2.0
    pts = [kink] if 0.0 < kink < mu else None
    from scipy import integrate  # deferred: scipy.integrate pulls in scipy.optimize

    val, _ = integrate.quad(
        lambda x: abs(2 * x - mu - c) ** 3 * math.exp(-x) / 2.0,
        0.0,
        mu,
        points=pts,
        epsabs=0.0,
        epsrel=1e-13,
        limit=200,
    )
    return atoms + float(val)


def functionals(f: TradeOffFunction, *, grid_size: int = 20000) -> Functionals:
    """``kl, kappa_2, kappa_3, kbar_3`` of a symmetric trade-off function (DRS eq. (3.2)).

    Closed forms: ``G_mu`` (``L ~ N(-mu^2/2, mu^2)`` under P: ``kl = mu^2/2``,
    ``kappa_2 = mu^2 + mu^4/4``, ``kbar_3 = 2 sqrt(2/pi) mu^3``); ``f_{eps,0}``
    (``kl = eps tanh(eps/2)``, ``kappa_2 = eps^2``, ``kappa_3 = eps^3``,
    ``kbar_3 = 8 eps^3 e^eps (1 + e^{2 eps}) / (1 + e^eps)^4``); Laplace (``kl = mu + e^{-mu} - 1``,
    ``kappa_2 = mu^2 - 2 mu + 4 - (4 + 2 mu) e^{-mu}``, both by series for small mu; the third
    moments by quadrature of the explicit loss density). Piecewise-linear f: exact sums over
    segments. Anything else: from :meth:`TradeOffFunction.lower_piecewise_linear` (numeric).
    f must satisfy ``f(0) = 1`` (for ``f_{eps,delta}`` with delta > 0 use
    :func:`approx_dp_composition_limit`).
    """
    if not isinstance(f, TradeOffFunction):
        raise PrivacyParameterError(f"not a trade-off function: {f!r}")
    if not f.symmetric:
        raise PrivacyParameterError(
            "the CLT functionals are defined for symmetric trade-off functions; symmetrize first"
        )
    if isinstance(f, GaussianTradeOff):
        mu = f.mu
        return Functionals(
            kl=0.5 * mu * mu,
            kappa2=mu * mu + 0.25 * mu**4,
            kappa3=_abs_third_moment_normal(-0.5 * mu * mu, mu),
            kappa3_centred=2.0 * math.sqrt(2.0 / math.pi) * mu**3,
        )
    if isinstance(f, ApproxDpTradeOff) and f.delta_ == 0.0:
        e = f.eps
        t = math.exp(-e)
        return Functionals(
            kl=e * math.tanh(e / 2.0),
            kappa2=e * e,
            kappa3=e**3,
            kappa3_centred=8.0 * e**3 * t * (1.0 + t * t) / (1.0 + t) ** 4,
        )
    if isinstance(f, LaplaceTradeOff):
        mu = f.mu
        if mu < 1.0:
            kl = _series(mu, lambda n: (-1.0) ** n, 2)
            k2 = mu * mu + _series(mu, lambda n: (-1.0) ** n * (2 * n - 4), 3)
        else:
            kl = mu + math.expm1(-mu)
            k2 = mu * mu - 2 * mu + 4 - (4 + 2 * mu) * math.exp(-mu)
        return Functionals(
            kl=kl,
            kappa2=k2,
            kappa3=_laplace_abs_moment(mu, 0.0),
            kappa3_centred=_laplace_abs_moment(mu, -kl),
        )
    exact = isinstance(f, PiecewiseLinearTradeOff)
    n = check_integer(grid_size, name="grid_size", minimum=16)
    # an estimate, so no safety slack (it would flatten the tail where f < 1e-14)
    pl = f if isinstance(f, PiecewiseLinearTradeOff) else f._sampled_piecewise_linear(n, 0.0)
    p, q, q_only = pl.segments()
    if q_only > 1e-12:
        raise PrivacyParameterError(
            f"f(0) = {1 - q_only!r} < 1: the CLT needs f(0) = 1 (see approx_dp_composition_limit)"
        )
    live = p > 0
    p, q = p[live], q[live]
    flat = q == 0  # slope 0: log|f'| = -inf on that stretch
    if np.any(flat):
        # A discretised smooth f gets a flat tail where f underflows; it carries no
        # information. A genuine flat part (mass > 1e-9) makes the functionals inf.
        if exact or float(p[flat].sum()) > 1e-9:
            inf = math.inf
            return Functionals(inf, inf, inf, inf, exact)
        p, q = p[~flat], q[~flat]
    loss = np.log(q) - np.log(p)
    w = p / p.sum()
    kl = -float(np.dot(w, loss))
    return Functionals(
        kl=kl,
        kappa2=float(np.dot(w, loss**2)),
        kappa3=float(np.dot(w, np.abs(loss) ** 3)),
        kappa3_centred=float(np.dot(w, np.abs(loss + kl) ** 3)),
        exact=exact,
    )


def _collect(
    fs: Sequence[TradeOffFunction | Functionals], counts: Sequence[int] | None
) -> tuple[float, float, float, float, bool]:
    if not fs:
        raise PrivacyParameterError("need at least one trade-off function")
    if counts is None:
        counts = [1] * len(fs)
    if len(counts) != len(fs):
        raise PrivacyParameterError("counts must have one entry per trade-off function")
    s_kl = s_k2 = s_kl2 = s_k3b = 0.0
    exact = True
    for f, c in zip(fs, counts, strict=True):
        c = check_integer(c, name="count", minimum=0)
        fn = f if isinstance(f, Functionals) else functionals(f)
        s_kl += c * fn.kl
        s_k2 += c * fn.kappa2
        s_kl2 += c * fn.kl * fn.kl
        s_k3b += c * fn.kappa3_centred
        exact = exact and fn.exact
    return s_kl, s_k2, s_kl2, s_k3b, exact


def clt_mu(*fs: TradeOffFunction | Functionals, counts: Sequence[int] | None = None) -> float:
    """``mu = 2 ||kl||_1 / sqrt(||kappa_2||_1 - ||kl||_2^2)`` (DRS Theorem 3.5), the GDP
    parameter of the CLT approximation of ``f_1^{(x) c_1} (x) ... (x) f_n^{(x) c_n}``.

    An *estimate*: ``G_mu`` approximates the composition but is not a bound (it can be
    optimistic); see :func:`berry_esseen` for a guaranteed lower bound.
    """
    s_kl, s_k2, s_kl2, _, _ = _collect(fs, counts)
    var = s_k2 - s_kl2
    if s_kl == 0.0:
        return 0.0
    if not var > 0.0:
        return math.inf
    return 2.0 * s_kl / math.sqrt(var)


class BerryEsseenBound(TradeOffFunction):
    """The guaranteed lower bound of DRS Theorem 3.5, made a trade-off function.

    The theorem gives ``f(alpha) >= b(alpha) = G_mu(alpha + gamma) - gamma`` on
    ``[gamma, 1 - gamma]``; f is non-increasing, so ``f >= b(gamma)`` on ``[0, gamma]``; and
    ``f >= 0``. That minorant has a concave kink at gamma, so we return its greatest convex
    minorant (f is convex, so f lies above it too): the segment from ``(0, b(gamma))`` tangent to
    b, then b, then 0. Values are lowered by 1e-12 (rounding towards less privacy).
    """

    symmetric = False

    def __init__(self, mu: float, gamma: float) -> None:
        self.mu = float(mu)
        self.gamma = float(gamma)
        self._trivial = not (self.gamma < 0.5 and math.isfinite(self.mu))
        if not self._trivial:
            g = self.gamma
            self._c = float(gaussian_tradeoff(np.asarray([2 * g]), self.mu)[0]) - g
            self._trivial = not self._c > 0.0
        if not self._trivial:
            self._x_zero = float(gaussian_tradeoff(np.asarray([g]), self.mu)[0]) - g
            self._x1 = self._tangent_point()
            self._b1 = self._b(self._x1)

    def __repr__(self) -> str:
        return f"BerryEsseenBound(mu={self.mu!r}, gamma={self.gamma!r})"

    def _b(self, x: float) -> float:
        if x + self.gamma >= 1.0:
            return 0.0
        val = float(gaussian_tradeoff(np.asarray([x + self.gamma]), self.mu)[0]) - self.gamma
        return max(0.0, val)

    def _h(self, x: float) -> float:
        # b(x) - c - x b'(x); positive at gamma, decreasing (b convex)
        slope = -math.exp(float(log_gaussian_delta_slope(np.asarray([x + self.gamma]), self.mu)[0]))
        return self._b(x) - self._c - x * slope

    def _tangent_point(self) -> float:
        lo, hi = self.gamma, self._x_zero
        if not hi > lo:
            return lo
        try:  # h decreases: the smallest x with h(x) <= 0, to adjacent doubles
            return search(
                lambda x: self._h(x) <= 0.0,
                lo,
                hi,
                holds="above",
                what="Berry-Esseen tangent point",
            )
        except SearchError:
            return hi  # h > 0 on the whole bracket: the tangent point is its end

    def _eval(self, alpha: FloatArray) -> FloatArray:
        if self._trivial:
            return np.zeros_like(alpha)
        x1 = self._x1
        line = (
            self._c + alpha * ((self._b1 - self._c) / x1)
            if x1 > 0
            else np.full_like(alpha, self._c)
        )
        shifted = np.minimum(alpha + self.gamma, 1.0)
        curve = np.where(
            alpha + self.gamma >= 1.0, 0.0, gaussian_tradeoff(shifted, self.mu) - self.gamma
        )
        out = np.where(alpha <= x1, line, np.maximum(curve, 0.0))
        return np.asarray(np.maximum(out - 1e-12, 0.0), dtype=np.float64)


@dataclasses.dataclass(frozen=True)
class CltResult:
    """CLT for a composition: ``estimate = G_mu`` (an approximation, may be optimistic) and
    ``bound`` (DRS Theorem 3.5 Berry-Esseen: a guaranteed lower bound, trivial if gamma >= 1/2).
    """

    mu: float
    gamma: float
    estimate: GaussianTradeOff
    bound: TradeOffFunction
    exact_functionals: bool


def berry_esseen(
    *fs: TradeOffFunction | Functionals, counts: Sequence[int] | None = None
) -> CltResult:
    """DRS Theorem 3.5 for ``f_1^{(x) c_1} (x) ... (x) f_n^{(x) c_n}`` (symmetric f_i).

    ``mu = 2 ||kl||_1 / sqrt(||kappa_2||_1 - ||kl||_2^2)``,
    ``gamma = 0.56 ||kbar_3||_1 / (||kappa_2||_1 - ||kl||_2^2)^{3/2}``; returns the estimate
    ``G_mu`` and the bound ``max(0, G_mu(alpha + gamma) - gamma)`` (convexified, see
    :class:`BerryEsseenBound`). When the functionals are numeric (``exact_functionals`` False)
    the bound inherits their discretisation error.
    """
    s_kl, s_k2, s_kl2, s_k3b, exact = _collect(fs, counts)
    return berry_esseen_from_sums(
        sum_kl=s_kl, sum_kappa2=s_k2, sum_kl_squared=s_kl2, sum_kappa3_centred=s_k3b, exact=exact
    )


def berry_esseen_from_sums(
    *,
    sum_kl: float,
    sum_kappa2: float,
    sum_kl_squared: float,
    sum_kappa3_centred: float,
    exact: bool = True,
) -> CltResult:
    """:func:`berry_esseen` from the sums ``||kl||_1``, ``||kappa_2||_1``, ``||kl||_2^2`` and
    ``||kbar_3||_1`` over all factors (for accountants that accumulate them)."""
    var = sum_kappa2 - sum_kl_squared
    if sum_kl == 0.0:
        ident = GaussianTradeOff(0.0)
        return CltResult(0.0, 0.0, ident, ident, exact)
    if not var > 0.0:
        return CltResult(
            math.inf, math.inf, GaussianTradeOff(0.0), BerryEsseenBound(math.inf, math.inf), exact
        )
    mu = 2.0 * sum_kl / math.sqrt(var)
    gamma = 0.56 * sum_kappa3_centred / var**1.5
    return CltResult(mu, gamma, GaussianTradeOff(mu), BerryEsseenBound(mu, gamma), exact)


def approx_dp_composition_limit(
    *, epsilons: Sequence[float] | FloatArray, deltas: Sequence[float] | FloatArray
) -> ScaledGaussianTradeOff:
    """Limit of ``f_{eps_1,delta_1} (x) ... (x) f_{eps_n,delta_n}`` (DRS Theorem 3.6).

    If ``sum eps_i^2 -> mu^2``, ``max eps_i -> 0``, ``sum delta_i -> delta`` and
    ``max delta_i -> 0``, the composition tends to ``G_mu (x) f_{0, 1 - e^{-delta}}``, i.e.
    ``e^{-delta} G_mu(alpha)``. Uses ``f_{eps,delta} = f_{eps,0} (x) f_{0,delta}`` and
    ``f_{0,d1} (x) f_{0,d2} = f_{0, 1-(1-d1)(1-d2)}``. Returned with ``mu = sqrt(sum eps_i^2)``
    and ``delta = sum delta_i``: an asymptotic *approximation*, not a bound.
    """
    eps = check_real_array(np.asarray(epsilons, dtype=np.float64), "epsilons", low=0.0)
    dl = check_real_array(
        np.asarray(deltas, dtype=np.float64), "deltas", low=0.0, high=1.0, high_open=True
    )
    if eps.shape != dl.shape:
        raise PrivacyParameterError("epsilons and deltas must have the same length")
    mu = math.sqrt(math.fsum((eps * eps).tolist()))
    delta = math.fsum(dl.tolist())
    return ScaledGaussianTradeOff(mu, -math.expm1(-delta))
