"""Trade-off functions (Dong, Roth and Su 2022, "Gaussian Differential Privacy", JRSS-B).

For distributions P and Q, the trade-off function is ``T(P, Q)(alpha) = inf {beta_phi :
alpha_phi <= alpha}``: the smallest type II error of a test of H0: P vs H1: Q whose type I error
is at most alpha. A mechanism is f-DP when ``T(M(S), M(S')) >= f`` for all neighbours S, S'.
``f: [0, 1] -> [0, 1]`` is a trade-off function iff it is convex, continuous, non-increasing and
``f(alpha) <= 1 - alpha`` (DRS Proposition 2.2).

Safety convention: every object here is a function that lies *below* (never above) the exact
trade-off function it stands for, and every ``delta(epsilon)`` is rounded *up*, every
``epsilon(delta)`` *up*: rounding always moves towards less privacy claimed.

The privacy profile of f is ``delta_f(eps) = 1 + f*(-e^eps)`` (DRS Proposition 2.12), where
``f*(y) = sup_a (y a - f(a))`` is the convex conjugate; for ``f = T(P, Q)`` it is the hockey-stick
divergence ``H_{e^eps}(Q || P) = sup_S Q(S) - e^eps P(S)``, defined for every real eps.
Conversely ``f(alpha) = sup_eps 1 - delta_f(eps) - e^eps alpha`` (the upper envelope of the
tangent lines; for a symmetric f the eps >= 0 half gives the envelope of ``f_{eps, delta(eps)}``).
"""

from __future__ import annotations

import abc
import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.special import ndtr

from dpkit._loss.pairs import laplace_profile
from dpkit._numeric.gaussian import gaussian_delta_up, gaussian_mu_for, gaussian_tradeoff
from dpkit._numeric.rounding import sqrt_up, up
from dpkit._numeric.search import SearchError, search
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_finite,
    check_integer,
    check_mu,
    check_probability,
    check_real_array,
)
from dpkit.errors import PrivacyParameterError
from dpkit.fdp._geometry import lower_convex_hull, sampled_lower_bound, upper_envelope_of_lines

__all__ = [
    "ApproxDpTradeOff",
    "GaussianTradeOff",
    "GroupTradeOff",
    "LaplaceTradeOff",
    "PiecewiseLinearTradeOff",
    "PropertyReport",
    "ScaledGaussianTradeOff",
    "TradeOffFunction",
    "approx_dp",
    "from_distributions",
    "from_privacy_profile",
    "gaussian",
    "gdp",
    "identity",
    "laplace",
    "mu_from_epsilon_delta",
    "piecewise_linear",
]

FloatArray = NDArray[np.float64]

# Absolute slack subtracted from numerically derived piecewise-linear curves so that rounding in
# their construction cannot lift them above the exact function (values are in [0, 1]).
_ABS_SLACK = 1e-14
# Absolute slack added to delta computed from piecewise-linear knots (one subtraction, one
# product and one comparison of doubles in [0, 1]).
_DELTA_ABS_SLACK = 1e-14


def _check_alpha(alpha: ArrayLike) -> FloatArray:
    a = np.asarray(alpha)
    if a.dtype == np.bool_ or a.dtype.kind not in "iuf":
        raise PrivacyParameterError(f"alpha must be real numbers in [0, 1], got dtype {a.dtype}")
    a = a.astype(np.float64)
    bad = ~((a >= 0.0) & (a <= 1.0))  # NaN fails both comparisons
    if np.any(bad):
        first = a[bad].ravel()[0]
        raise PrivacyParameterError(f"alpha must lie in [0, 1], got {first!r}")
    return a


@dataclasses.dataclass(frozen=True, kw_only=True)
class PropertyReport:
    """Outcome of :meth:`TradeOffFunction.check_properties` on a grid (numerical, not a proof)."""

    in_unit_interval: bool
    below_identity: bool
    non_increasing: bool
    convex: bool
    continuous: bool
    max_violation: float

    @property
    def ok(self) -> bool:
        """All four defining properties (DRS Proposition 2.2) hold on the grid."""
        return (
            self.in_unit_interval
            and self.below_identity
            and self.non_increasing
            and self.convex
            and self.continuous
        )


class TradeOffFunction(abc.ABC):
    """A trade-off function ``f: [0, 1] -> [0, 1]``, callable on numpy arrays (alpha -> beta)."""

    #: True when f is known to be symmetric, ``f = f^{-1}`` (e.g. ``T(P, Q) = T(Q, P)``).
    symmetric: bool = False

    def __call__(self, alpha: ArrayLike) -> FloatArray:
        """Evaluate ``beta = f(alpha)`` element-wise; alpha must lie in [0, 1]."""
        a = _check_alpha(alpha)
        out = np.clip(self._eval(a), 0.0, 1.0)
        return np.asarray(out, dtype=np.float64)

    @abc.abstractmethod
    def _eval(self, alpha: FloatArray) -> FloatArray:
        """Evaluate on a validated float array."""

    # ------------------------------------------------------------------ privacy profile
    def _delta(self, eps: float) -> float:
        """``delta_f(eps)`` rounded up; default: from the piecewise-linear lower bound."""
        return self.lower_piecewise_linear()._delta(eps)

    def delta(self, epsilon: float) -> float:
        """``delta_f(eps) = 1 + f*(-e^eps)`` (DRS Proposition 2.12), rounded up.

        For ``f = T(P, Q)`` this is the one-sided ``H_{e^eps}(Q || P)``. For symmetric f,
        f-DP is equivalent to (eps, delta_f(eps))-DP for all eps >= 0. For an asymmetric f use
        ``max(f.delta(eps), f.inverse().delta(eps))`` (or :meth:`symmetrize` first) to cover
        both orderings of a neighbouring pair. Any finite real epsilon is accepted.
        """
        eps = check_finite(epsilon, "epsilon")
        return self._delta(eps)

    def privacy_profile(self, epsilons: ArrayLike) -> FloatArray:
        """``delta_f`` on an array of epsilons (each rounded up)."""
        eps = check_real_array(epsilons, "epsilons")
        return np.asarray([self._delta(float(e)) for e in eps], dtype=np.float64)

    def epsilon(self, delta: float) -> float:
        """Smallest eps >= 0 with ``delta_f(eps) <= delta``, rounded up (inf if none exists).

        ``delta_f`` is non-increasing in eps, so :func:`dpkit._numeric.search.search` finds the
        boundary (bracket doubled from [0, 1], inf beyond 1e7, bisected to adjacent doubles);
        the returned double always satisfies ``delta_f(returned) <= delta`` with delta_f rounded
        up, and the double below it does not (unless the result is 0).
        """
        d = check_delta(delta)
        return self._epsilon(d)

    def _epsilon(self, d: float) -> float:
        if self._delta(0.0) <= d:
            return 0.0
        try:
            return search(
                lambda e: self._delta(e) <= d,
                0.0,
                1.0,
                holds="above",
                expand="up",
                limit=1e7,
                what="epsilon of a trade-off function",
            )
        except SearchError:
            return math.inf  # no epsilon up to 1e7 reaches delta

    # ------------------------------------------------------------------ representations
    def lower_piecewise_linear(self, *, grid_size: int = 2000) -> PiecewiseLinearTradeOff:
        """A piecewise-linear trade-off function below f (exact for piecewise-linear f).

        Built from exact samples of f on a grid dense near 0 and 1 with the convexity bound of
        :func:`dpkit.fdp._geometry.sampled_lower_bound` (extended neighbouring secants lie below
        a convex function), so it is a *lower* bound, not an interpolation.
        """
        n = check_integer(grid_size, name="grid_size", minimum=16)
        return self._sampled_piecewise_linear(n, _ABS_SLACK)

    def _sampled_piecewise_linear(self, n: int, slack: float) -> PiecewiseLinearTradeOff:
        # normal-quantile spacing resolves both tails (down to 1e-300), plus a uniform part
        tails = ndtr(-np.linspace(-37.5, 37.5, n - n // 4))
        mid = np.linspace(0.0, 1.0, n // 4)
        xs = np.unique(np.concatenate([[0.0], tails, mid, [1.0]]))
        ys = self._eval(xs)
        hx, hy = sampled_lower_bound(xs, np.clip(ys, 0.0, 1.0))
        # A lower bound of a symmetric f keeps the flag: its inverse and itself are both lower
        # bounds of f, so treating it as symmetric is safe.
        return PiecewiseLinearTradeOff._from_hull(
            hx, np.maximum(hy - slack, 0.0), symmetric=self.symmetric
        )

    # ------------------------------------------------------------------ operations
    def inverse(self) -> TradeOffFunction:
        """``f^{-1}(alpha) = inf {t in [0, 1] : f(t) <= alpha}`` (DRS eq. (2.3)); equals
        ``T(Q, P)`` when ``f = T(P, Q)``."""
        if self.symmetric:
            return self
        return self.lower_piecewise_linear().inverse()

    def symmetrize(self) -> TradeOffFunction:
        """``f^S = (max{f, f^{-1}})**``: an f-DP mechanism is also f^S-DP (DRS Section 2.4).

        If M is f-DP then ``T(M(S), M(S')) >= f`` and, swapping the neighbours (the relation is
        symmetric), ``T(M(S'), M(S)) >= f``, i.e. ``T(M(S), M(S')) >= f^{-1}``. Hence
        ``T >= max{f, f^{-1}}`` and, T being convex, ``T >= max{f, f^{-1}}**`` (greatest convex
        minorant). For convex f and f^{-1} the maximum is already convex, so ``**`` changes
        nothing in exact arithmetic; we still take the lower hull so the result is a trade-off
        function after rounding. Compare :meth:`symmetric_minorant`, where the double conjugate
        matters.
        """
        if self.symmetric:
            return self
        return self.lower_piecewise_linear().symmetrize()

    def symmetric_minorant(self) -> TradeOffFunction:
        """``(min{f, f^{-1}})**``: the largest *symmetric* trade-off function below f and f^{-1}.

        This is the guarantee of a mechanism whose two orderings of a neighbouring pair have
        trade-off functions f and f^{-1} (e.g. ``T(M(D), M(D + x)) = f`` under add/remove); it is
        how DRS Theorem 4.2 symmetrizes the subsampled ``f_p`` (``C_p(f) = min{f_p, f_p^-1}**``).
        The minimum of two convex functions is not convex in general (a concave kink where they
        cross), so the plain ``min{f, f^{-1}}`` is *not* a trade-off function; its convex
        envelope is, and it replaces the kink by a segment of slope -1.
        """
        if self.symmetric:
            return self
        return self.lower_piecewise_linear().symmetric_minorant()

    def tensor(self, *others: TradeOffFunction, loss_step: float | None = None) -> TradeOffFunction:
        """``f (x) g (x) ...``: trade-off of the product distributions (DRS Theorem 3.2).

        Exact for Gaussians (``G_mu (x) G_nu = G_sqrt(mu^2 + nu^2)``); otherwise numeric through
        the privacy-loss engine (:func:`dpkit.fdp.tensor`; automatic grid unless ``loss_step``
        is given), which yields a certified lower bound.
        """
        from dpkit.fdp._compose import tensor

        return tensor(self, *others, loss_step=loss_step)

    def group(self, k: int) -> TradeOffFunction:
        """Group privacy: an f-DP mechanism is ``[1 - (1 - f)^{o k}]``-DP for groups of size k
        (DRS Theorem 2.14), where ``(1 - f)^{o k}`` is the k-fold composition of ``a -> 1-f(a)``."""
        k = check_integer(k, name="k", minimum=1)
        if k == 1:
            return self
        return GroupTradeOff(self, k)

    def check_properties(self, *, grid_size: int = 4001, tol: float = 1e-9) -> PropertyReport:
        """Check numerically on a grid that f is a trade-off function (DRS Proposition 2.2).

        Convexity is checked on the uniform part of the grid by second differences,
        continuity at 0 by comparing ``f(0)`` with ``f(1e-300)`` (f is convex, so 0 is the only
        place it could jump).
        """
        n = check_integer(grid_size, name="grid_size", minimum=5)
        x = np.linspace(0.0, 1.0, n)
        y = self._eval(x)
        finite = bool(np.all(np.isfinite(y)))
        y = np.where(np.isfinite(y), y, np.nan)
        viol = [0.0]
        in_unit = finite and bool(np.all((y >= -tol) & (y <= 1.0 + tol)))
        ex = y - (1.0 - x)
        below = finite and bool(np.all(ex <= tol))
        viol.append(float(np.nanmax(ex)))
        d1 = np.diff(y)
        nonincr = finite and bool(np.all(d1 <= tol))
        viol.append(float(np.nanmax(d1)))
        d2 = y[:-2] - 2.0 * y[1:-1] + y[2:]
        convex = finite and bool(np.all(d2 >= -tol))
        viol.append(float(-np.nanmin(d2)))
        y0 = float(self._eval(np.asarray([0.0]))[0])
        ytiny = float(self._eval(np.asarray([1e-300]))[0])
        cont = abs(y0 - ytiny) <= max(tol, 1e-6)
        viol.append(abs(y0 - ytiny))
        return PropertyReport(
            in_unit_interval=in_unit,
            below_identity=below,
            non_increasing=nonincr,
            convex=convex,
            continuous=cont,
            max_violation=max(0.0, *[v for v in viol if np.isfinite(v)]),
        )


# ====================================================================== Gaussian
class GaussianTradeOff(TradeOffFunction):
    """``G_mu = T(N(0, 1), N(mu, 1))``, ``G_mu(a) = Phi(Phi^{-1}(1 - a) - mu)`` (DRS eq. (2.4))."""

    symmetric = True

    def __init__(self, mu: float) -> None:
        self.mu = check_mu(mu, allow_zero=True)

    def __repr__(self) -> str:
        return f"gdp({self.mu!r})"

    def _eval(self, alpha: FloatArray) -> FloatArray:
        if self.mu == 0.0:
            return 1.0 - alpha
        return gaussian_tradeoff(alpha, self.mu)

    def _delta(self, eps: float) -> float:
        """``Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (DRS Corollary 2.13), rounded up
        by a relative 1e-11 (the evaluation is accurate to ~2e-13; see ``_gaussian``)."""
        return gaussian_delta_up(eps, self.mu)

    def delta(self, epsilon: float) -> float:
        """mu-GDP is equivalent to (eps, delta(eps))-DP for all eps >= 0 with
        ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (DRS Corollary 2.13).

        Rounded up (a relative 1e-11 above the double-precision value). Negative eps is allowed
        (the formula is the hockey-stick divergence for every real eps).
        """
        return super().delta(epsilon)

    def epsilon(self, delta: float) -> float:
        """Smallest eps >= 0 with ``delta(eps) <= delta`` (inverse of :meth:`delta`), rounded up."""
        return super().epsilon(delta)

    def tensor(self, *others: TradeOffFunction, loss_step: float | None = None) -> TradeOffFunction:
        """``G_mu1 (x) ... (x) G_mun = G_mu`` with ``mu = sqrt(sum mu_i^2)`` (DRS Corollary 3.3),
        mu rounded up; other factors go through the numeric tensor product."""
        if all(isinstance(o, GaussianTradeOff) for o in others):
            total = Fraction(self.mu) ** 2 + sum(
                (Fraction(o.mu) ** 2 for o in others if isinstance(o, GaussianTradeOff)),
                Fraction(0),
            )
            return GaussianTradeOff(sqrt_up(total))
        return super().tensor(*others, loss_step=loss_step)

    def group(self, k: int) -> TradeOffFunction:
        """A mu-GDP mechanism is k*mu-GDP for groups of size k (DRS Corollary 2.15); rounded up."""
        k = check_integer(k, name="k", minimum=1)
        return GaussianTradeOff(up(Fraction(self.mu) * k))


def gdp(mu: float) -> GaussianTradeOff:
    """The mu-GDP trade-off function ``G_mu(a) = Phi(Phi^{-1}(1 - a) - mu)`` (DRS Definition 2.6).

    ``.delta(epsilon)`` / ``.epsilon(delta)`` give the exact (eps, delta) duality of DRS
    Corollary 2.13, rounded up.
    """
    return GaussianTradeOff(mu)


gaussian = gdp


def mu_from_epsilon_delta(*, epsilon: float, delta: float) -> float:
    """Largest mu such that mu-GDP implies (epsilon, delta)-DP, rounded *down*.

    ``delta_mu(eps)`` increases with mu, so the safe set is ``(0, mu*]``: any mu below the
    returned value is also safe, any mu above ``mu*`` is not. This is the calibration direction
    (choose a Gaussian mechanism meeting an (eps, delta) target). The result is checked with the
    rounded-up ``delta_mu(eps)`` before it is returned, so ``gdp(result).delta(epsilon) <= delta``
    always holds. (An (eps, delta)-DP mechanism with delta > 0 is not mu-GDP for any finite mu:
    ``f_{eps,delta}(0) = 1 - delta < 1 = G_mu(0)``; this function does not claim that.)
    """
    eps = check_epsilon(epsilon, allow_zero=True)
    d = check_delta(delta, allow_zero=False)
    return gaussian_mu_for(eps, d)


class ScaledGaussianTradeOff(TradeOffFunction):
    """``G_mu (x) f_{0, d} = (1 - d) G_mu`` (tensor with an atom revealing with probability d).

    ``f_{0,d}`` is the trade-off of ``P = U[0, 1]`` vs ``Q = d * point + (1 - d) U[0, 1]``: a test
    rejects on the point for free and otherwise faces the other factor, so the product has
    ``beta = (1 - d) f(alpha)``. Its profile is ``d + (1 - d) delta_mu(eps)``.
    """

    symmetric = False

    def __init__(self, mu: float, d: float) -> None:
        self.mu = check_mu(mu, allow_zero=True)
        self.d = check_probability(d, name="d")

    def __repr__(self) -> str:
        return f"ScaledGaussianTradeOff(mu={self.mu!r}, d={self.d!r})"

    def _eval(self, alpha: FloatArray) -> FloatArray:
        g = 1.0 - alpha if self.mu == 0.0 else gaussian_tradeoff(alpha, self.mu)
        out: FloatArray = np.asarray((1.0 - self.d) * g - _ABS_SLACK, dtype=np.float64)
        return np.maximum(out, 0.0)

    def _delta(self, eps: float) -> float:
        val = self.d + (1.0 - self.d) * gaussian_delta_up(eps, self.mu)
        return min(1.0, math.nextafter(val + _DELTA_ABS_SLACK, math.inf))


# ====================================================================== piecewise linear
class PiecewiseLinearTradeOff(TradeOffFunction):
    """A convex piecewise-linear trade-off function given by its knots ``(alpha_i, beta_i)``.

    It is exactly ``T(P, Q)`` for discrete P, Q: each segment of slope ``-r`` and width ``w``
    is an outcome with ``P = w`` and ``Q = r w`` (likelihood ratio r), a drop at alpha = 0 an
    outcome with P = 0.
    """

    def __init__(
        self,
        alphas: FloatArray,
        betas: FloatArray,
        *,
        _trusted: bool = False,
        symmetric: bool = False,
    ) -> None:
        if not _trusted:  # pragma: no cover - the public path is piecewise_linear()
            raise TypeError("use dpkit.fdp.piecewise_linear(alphas=..., betas=...)")
        self.alphas = alphas
        self.betas = betas
        self.symmetric = symmetric
        self.alphas.setflags(write=False)
        self.betas.setflags(write=False)

    @classmethod
    def _from_hull(
        cls, x: FloatArray, y: FloatArray, *, symmetric: bool = False
    ) -> PiecewiseLinearTradeOff:
        """Build from points: clip to [0, 1 - alpha], force f(1) = 0, take the lower hull."""
        x = np.clip(np.asarray(x, dtype=np.float64), 0.0, 1.0)
        y = np.clip(np.asarray(y, dtype=np.float64), 0.0, 1.0)
        y = np.minimum(y, 1.0 - x)
        x = np.concatenate([[0.0, 1.0], x])
        y = np.concatenate([[1.0, 0.0], y])
        # (0, 1) is a harmless upper point: the hull keeps the lowest value at alpha = 0.
        hx, hy = lower_convex_hull(x, y)
        return cls(hx, hy, _trusted=True, symmetric=symmetric)

    def __repr__(self) -> str:
        return f"PiecewiseLinearTradeOff({self.alphas.size} knots)"

    def _eval(self, alpha: FloatArray) -> FloatArray:
        out: FloatArray = np.asarray(np.interp(alpha, self.alphas, self.betas), dtype=np.float64)
        return out

    def _delta(self, eps: float) -> float:
        """``sup_a 1 - e^eps a - f(a)``: a concave function of a, maximal at a knot."""
        with np.errstate(over="ignore"):
            vals = 1.0 - self.betas - math.exp(min(eps, 700.0)) * self.alphas
        val = float(np.max(vals))
        if val <= 0.0:
            return 0.0
        return min(1.0, math.nextafter(val + _DELTA_ABS_SLACK, math.inf))

    def lower_piecewise_linear(self, *, grid_size: int = 2000) -> PiecewiseLinearTradeOff:
        """Itself (already exact)."""
        check_integer(grid_size, name="grid_size", minimum=16)
        return self

    def segments(self) -> tuple[FloatArray, FloatArray, float]:
        """The discrete pair: ``(p, q, q_only)`` with P-mass and Q-mass of each segment and the
        Q-mass of the drop at alpha = 0 (an outcome impossible under P)."""
        p = np.diff(self.alphas)
        q = -np.diff(self.betas)
        return p, np.maximum(q, 0.0), float(1.0 - self.betas[0])

    def inverse(self) -> PiecewiseLinearTradeOff:
        """Reflect the graph in the diagonal (exact for piecewise-linear f)."""
        if self.symmetric:
            return self
        x = self.betas[::-1].copy()
        y = self.alphas[::-1].copy()
        return PiecewiseLinearTradeOff._from_hull(x, y)

    def symmetrize(self) -> PiecewiseLinearTradeOff:
        """Exact ``(max{f, f^{-1}})**``: the lower convex hull of the maximum's vertices."""
        return self._combine_with_inverse(np.maximum)

    def symmetric_minorant(self) -> PiecewiseLinearTradeOff:
        """Exact ``(min{f, f^{-1}})**``: the lower convex hull of the minimum's vertices."""
        return self._combine_with_inverse(np.minimum)

    def _combine_with_inverse(self, op: Any) -> PiecewiseLinearTradeOff:
        if self.symmetric:
            return self
        g = self.inverse()
        xs = np.unique(np.concatenate([self.alphas, g.alphas]))
        fa = self._eval(xs)
        ga = g._eval(xs)
        # add the crossing points of f and g inside each interval
        diff = fa - ga
        cross = np.flatnonzero(diff[:-1] * diff[1:] < 0.0)
        t = diff[cross] / (diff[cross] - diff[cross + 1])
        xc = xs[cross] + t * (xs[cross + 1] - xs[cross])
        xs = np.unique(np.concatenate([xs, xc]))
        ys = op(self._eval(xs), g._eval(xs))
        return PiecewiseLinearTradeOff._from_hull(xs, ys, symmetric=True)


def piecewise_linear(*, alphas: ArrayLike, betas: ArrayLike) -> PiecewiseLinearTradeOff:
    """A trade-off function from points ``(alpha_i, beta_i)``.

    The greatest convex function below the points that also satisfies ``f <= 1 - alpha`` and
    ``f(1) = 0`` is used: it is a trade-off function and never above the data (the safe side).
    """
    a = check_real_array(alphas, "alphas", low=0.0, high=1.0)
    b = check_real_array(betas, "betas", low=0.0, high=1.0)
    if a.shape != b.shape:
        raise PrivacyParameterError(f"alphas and betas differ in shape: {a.shape} vs {b.shape}")
    return PiecewiseLinearTradeOff._from_hull(a, b)


def from_distributions(*, p: ArrayLike, q: ArrayLike) -> PiecewiseLinearTradeOff:
    """Exact ``T(P, Q)`` for two pmfs on the same finite set (Neyman-Pearson lemma).

    The most powerful tests reject on outcomes in decreasing order of ``Q(x)/P(x)`` (outcomes
    with ``P(x) = 0`` first), randomising on the boundary outcome: the curve is piecewise linear
    with a knot after each outcome. Each pmf must be non-negative and sum to 1 within 1e-9; it is
    renormalised.
    """
    pp = check_real_array(p, "p", low=0.0, high=1.0)
    qq = check_real_array(q, "q", low=0.0, high=1.0)
    if pp.shape != qq.shape:
        raise PrivacyParameterError(f"p and q differ in shape: {pp.shape} vs {qq.shape}")
    for name, v in (("p", pp), ("q", qq)):
        if not abs(math.fsum(v.tolist()) - 1.0) <= 1e-9:
            raise PrivacyParameterError(f"{name} must sum to 1, sums to {math.fsum(v.tolist())!r}")
    pp = pp / math.fsum(pp.tolist())
    qq = qq / math.fsum(qq.tolist())
    keep = (pp > 0) | (qq > 0)
    pp = pp[keep]
    qq = qq[keep]
    with np.errstate(divide="ignore"):
        logratio = np.log(qq) - np.log(pp)  # +inf where p = 0, -inf where q = 0
    order = np.argsort(-logratio, kind="stable")
    pp = pp[order]
    qq = qq[order]
    alphas = np.concatenate([[0.0], np.cumsum(pp)])
    betas = 1.0 - np.concatenate([[0.0], np.cumsum(qq)])
    alphas[-1] = 1.0
    betas[-1] = 0.0
    betas[1:] -= _ABS_SLACK  # cumulative sums carry rounding; the knot (0, 1 - Q(P=0)) does not
    f = PiecewiseLinearTradeOff._from_hull(alphas, betas)
    # symmetric (T(P, Q) = T(Q, P)) when the curve equals its reflection up to rounding
    g = f.inverse()
    xs = np.unique(np.concatenate([f.alphas, g.alphas]))
    if np.max(np.abs(f._eval(xs) - g._eval(xs))) <= 1e-12:
        f.symmetric = True
    return f


def from_privacy_profile(
    *, epsilons: ArrayLike, deltas: ArrayLike, symmetric: bool = True
) -> PiecewiseLinearTradeOff:
    """The trade-off function certified by a set of (eps_i, delta_i)-DP guarantees.

    A mechanism that is (eps_i, delta_i)-DP for every i is ``max_i f_{eps_i, delta_i}``-DP
    (DRS Proposition 2.5 and Proposition 2.12): the upper envelope of the lines
    ``1 - delta_i - e^{eps_i} a`` and ``e^{-eps_i} (1 - delta_i - a)`` and 0, computed exactly as a
    convex piecewise-linear function. With ``symmetric=False`` only the first family is used
    (one-sided profiles ``delta(eps) = H_{e^eps}(Q || P)``, where eps may be negative).
    """
    if symmetric:
        eps = check_real_array(epsilons, "epsilons", low=0.0)
    else:
        eps = check_real_array(epsilons, "epsilons")
    dl = check_real_array(deltas, "deltas", low=0.0, high=1.0)
    if eps.shape != dl.shape:
        raise PrivacyParameterError(
            f"epsilons and deltas differ in shape: {eps.shape} vs {dl.shape}"
        )
    with np.errstate(over="ignore"):
        e = np.exp(np.minimum(eps, 700.0))
    slopes = [-e]
    inter = [1.0 - dl]
    if symmetric:
        slopes.append(-1.0 / e)
        inter.append((1.0 - dl) / e)
    xs, ys = upper_envelope_of_lines(np.concatenate(slopes), np.concatenate(inter))
    return PiecewiseLinearTradeOff._from_hull(xs, ys - _ABS_SLACK, symmetric=symmetric)


class ApproxDpTradeOff(PiecewiseLinearTradeOff):
    """``f_{eps,delta}(a) = max{0, 1 - delta - e^eps a, e^{-eps}(1 - delta - a)}`` (DRS eq. (2.5)).

    A mechanism is (eps, delta)-DP iff it is f_{eps,delta}-DP (DRS Proposition 2.5). The knots
    are (0, 1 - delta), the symmetric point ``((1 - delta)/(1 + e^eps), same)`` and
    (1 - delta, 0).
    """

    def __init__(self, epsilon: float, delta: float) -> None:
        self.eps = check_epsilon(epsilon, allow_zero=True)
        self.delta_ = check_delta(delta)
        c = (1.0 - self.delta_) / (1.0 + math.exp(self.eps)) if self.eps < 700 else 0.0
        xs = np.asarray([0.0, c, 1.0 - self.delta_, 1.0])
        ys = np.asarray([1.0 - self.delta_, c, 0.0, 0.0])
        hx, hy = lower_convex_hull(xs, ys)
        super().__init__(hx, hy, _trusted=True, symmetric=True)

    def __repr__(self) -> str:
        return f"approx_dp(epsilon={self.eps!r}, delta={self.delta_!r})"

    def _eval(self, alpha: FloatArray) -> FloatArray:
        e = math.exp(min(self.eps, 700.0))
        d = self.delta_
        out = np.maximum.reduce([np.zeros_like(alpha), 1.0 - d - e * alpha, (1.0 - d - alpha) / e])
        return np.asarray(out, dtype=np.float64)

    def _delta(self, eps: float) -> float:
        """Exact profile of f_{eps0,delta0}: ``delta0`` for eps >= eps0, otherwise
        ``1 - (1 - delta0)(1 + e^eps)/(1 + e^eps0)`` for eps >= 0 (the symmetric knot) and the
        maximum over the knots in general; rounded up."""
        if eps >= self.eps:
            return self.delta_
        return PiecewiseLinearTradeOff._delta(self, eps)


def approx_dp(*, epsilon: float, delta: float = 0.0) -> ApproxDpTradeOff:
    """``f_{eps,delta}``, the trade-off function of (eps, delta)-DP (DRS Proposition 2.5)."""
    return ApproxDpTradeOff(epsilon, delta)


def identity() -> GaussianTradeOff:
    """``Id(a) = 1 - a`` (perfect privacy), i.e. ``G_0``."""
    return GaussianTradeOff(0.0)


# ====================================================================== Laplace
class LaplaceTradeOff(TradeOffFunction):
    """``T(Lap(0, 1), Lap(mu, 1))`` (DRS Section 2.3): with F the Laplace(0, 1) cdf,
    ``f(a) = F(F^{-1}(1 - a) - mu)``, i.e.

        1 - e^mu a            for a < e^{-mu}/2,
        e^{-mu} / (4 a)       for e^{-mu}/2 <= a <= 1/2,
        e^{-mu} (1 - a)       for a > 1/2.

    The Laplace mechanism with scale b on a query of sensitivity s is this with mu = s/b.
    """

    symmetric = True

    def __init__(self, mu: float) -> None:
        self.mu = check_mu(mu, allow_zero=True)

    def __repr__(self) -> str:
        return f"laplace(mu={self.mu!r})"

    def _eval(self, alpha: FloatArray) -> FloatArray:
        mu = self.mu
        em = math.exp(-mu)
        with np.errstate(divide="ignore", invalid="ignore"):
            mid = em / (4.0 * alpha)
        # f(0) = 1 for every mu (no outcome has P = 0); beyond mu ~ 745 e^-mu underflows to 0
        # and the branches below would read 0 / 0 there
        out = np.where(
            alpha <= 0.0,
            1.0,
            np.where(
                alpha < em / 2.0, 1.0 - alpha / em, np.where(alpha <= 0.5, mid, em * (1.0 - alpha))
            ),
        )
        return np.asarray(out, dtype=np.float64)

    def _delta(self, eps: float) -> float:
        """Hockey-stick of Lap(mu,1) vs Lap(0,1): 0 for eps >= mu, ``1 - e^{(eps - mu)/2}`` for
        ``|eps| < mu``, ``1 - e^eps`` for eps <= -mu (the privacy loss is clipped to
        [-mu, mu]); rounded up."""
        val = laplace_profile(eps, self.mu)
        if val == 0.0:
            return 0.0
        return min(1.0, math.nextafter(val * (1.0 + 4e-16), math.inf))

    def group(self, k: int) -> TradeOffFunction:
        """``1 - (1 - f)^{o k}`` of a symmetric location family ``F(F^{-1}(1-a) - mu)`` is the
        same family at ``k mu`` (the recursion shifts ``F^{-1}(1 - a)`` by mu each time)."""
        k = check_integer(k, name="k", minimum=1)
        return LaplaceTradeOff(up(Fraction(self.mu) * k))


def laplace(*, mu: float) -> LaplaceTradeOff:
    """``T(Lap(0, 1), Lap(mu, 1))``: the Laplace mechanism with sensitivity / scale = mu."""
    return LaplaceTradeOff(mu)


# ====================================================================== group privacy
class GroupTradeOff(TradeOffFunction):
    """``1 - (1 - f)^{o k}`` (DRS Theorem 2.14), evaluated by iterating ``a -> 1 - f(a)``.

    ``a -> 1 - f(a)`` is concave and non-decreasing, so its k-fold composition is too, and the
    result is a trade-off function.
    """

    def __init__(self, base: TradeOffFunction, k: int) -> None:
        self.base = base
        self.k = check_integer(k, name="k", minimum=1)
        self.symmetric = base.symmetric

    def __repr__(self) -> str:
        return f"GroupTradeOff({self.base!r}, k={self.k})"

    def _eval(self, alpha: FloatArray) -> FloatArray:
        x = alpha
        for _ in range(self.k):
            x = np.clip(1.0 - self.base._eval(np.clip(x, 0.0, 1.0)), 0.0, 1.0)
        out: FloatArray = np.asarray(1.0 - x, dtype=np.float64)
        return out
