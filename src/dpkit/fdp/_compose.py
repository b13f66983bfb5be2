"""Numeric tensor products of trade-off functions through privacy-loss distributions.

For ``f = T(P, Q)`` let ``L = log(dQ/dP)``. The product ``T(P x P', Q x Q')`` has privacy loss
``L + L'`` (DRS Theorem 3.2 and the proof of Proposition 2.12), so the loss distributions
convolve. The profile ``delta_f(eps) = E_Q[(1 - e^{eps - L})_+] + Q(L = +inf)`` is
non-decreasing in L, and the trade-off function is ``sup_eps 1 - delta_f(eps) - e^eps a``.

Pessimistic discretisation ("rounding the loss up"): G_mu and Laplace factors use the exact law
of their loss under Q; every other factor is first replaced by a piecewise-linear trade-off
function *below* it (:meth:`TradeOffFunction.lower_piecewise_linear`), i.e. a genuine discrete
pair. Each of its outcomes keeps its Q-mass and has its loss rounded
*up* to the grid ``k * loss_step``; its P-mass becomes ``q e^{-k h}`` (smaller) and the P-mass
freed goes to an outcome impossible under Q (loss -inf). This is again a genuine pair whose
losses dominate the original ones outcome by outcome, so its profile is larger for every eps,
its trade-off function smaller, and the tensor product (monotone in each factor, DRS Section
3.1; and ``L`` sums are coupled outcome by outcome) is a lower bound of the exact one. Mass in the
far tails (at most ``1e-15`` per product) is moved to loss +inf (top) or rounded up to the
lowest kept loss (bottom), which is pessimistic as well. Losses are read off float knots, so
they are known to ~1e-16 relative; a loss within 1e-9 grid steps of a grid point is snapped to
it (otherwise an exact f_{eps,0} with eps on the grid would be pushed up a whole step).
Convolutions of long vectors use the FFT; its absolute error (~1e-16 times the length) is
covered by a final absolute slack of ``1e-12`` subtracted from beta.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.signal import fftconvolve
from scipy.special import ndtr

from dpkit._numeric.validation import check_integer, check_positive
from dpkit.errors import PrivacyParameterError
from dpkit.fdp._tradeoff import (
    GaussianTradeOff,
    LaplaceTradeOff,
    PiecewiseLinearTradeOff,
    TradeOffFunction,
)

__all__ = ["self_tensor", "tensor"]

FloatArray = NDArray[np.float64]
_TAIL = 1e-15
_FINAL_SLACK = 1e-12
_DIRECT_LIMIT = 200_000  # product of lengths below which np.convolve is used
_MAX_BINS = 5_000_000  # refuse grids larger than this rather than run for minutes


def _check_size(n: int) -> None:
    if n > _MAX_BINS:
        raise PrivacyParameterError(
            f"the privacy-loss grid would need {n} bins; use a larger loss_step"
        )


@dataclasses.dataclass
class _LossPair:
    """A discrete pair with losses on the grid ``(k0 + i) * h``: Q- and P-masses per bin."""

    h: float
    k0: int
    q: FloatArray
    p: FloatArray
    q_inf: float  # Q-mass of outcomes impossible under P (loss +inf)

    @classmethod
    def from_piecewise_linear(cls, f: PiecewiseLinearTradeOff, h: float) -> _LossPair:
        p, q, q_inf = f.segments()
        live = q > 0.0  # segments with q = 0 are outcomes impossible under Q (loss -inf)
        p = p[live]
        q = q[live]
        if q.size == 0:
            return cls(h, 0, np.zeros(1), np.zeros(1), min(1.0, q_inf))
        with np.errstate(divide="ignore"):
            loss = np.log(q) - np.log(p)
        # rounded up; a loss within 1e-9 grid steps above a grid point is taken as on it, since
        # the loss of a segment is only known to ~1e-16 relative from the float knots
        k = np.ceil(loss / h - 1e-9).astype(np.int64)
        k0 = int(k.min())
        _check_size(int(k.max()) - k0 + 1)
        qb = np.asarray(np.bincount(k - k0, weights=q), dtype=np.float64)
        kk = (np.arange(qb.size) + k0) * h
        pb = qb * np.exp(-kk)
        return cls(h, k0, qb, pb, min(1.0, q_inf))._trim()

    def _trim(self) -> _LossPair:
        q = np.maximum(self.q, 0.0)
        p = np.maximum(self.p, 0.0)
        # top: move the last bins to +inf while their Q-mass stays below the tail budget
        cq = np.cumsum(q[::-1])
        n_top = int(np.searchsorted(cq, _TAIL, side="right"))
        n_top = min(n_top, q.size - 1)
        q_inf = self.q_inf + float(cq[n_top - 1]) if n_top > 0 else self.q_inf
        if n_top > 0:
            q = q[:-n_top]
            p = p[:-n_top]
        # bottom: fold the first bins into the first kept bin (losses rounded up)
        cb = np.cumsum(q)
        n_bot = int(np.searchsorted(cb, _TAIL, side="right"))
        n_bot = min(n_bot, q.size - 1)
        k0 = self.k0
        if n_bot > 0:
            moved = float(cb[n_bot - 1])
            q = q[n_bot:].copy()
            p = p[n_bot:].copy()
            k0 += n_bot
            q[0] += moved
            p[0] += moved * math.exp(-k0 * self.h)
        return _LossPair(self.h, k0, q, p, min(1.0, q_inf))

    def compose(self, other: _LossPair) -> _LossPair:
        if self.h != other.h:  # pragma: no cover - internal invariant
            raise PrivacyParameterError("loss grids differ")
        _check_size(self.q.size + other.q.size - 1)
        conv = np.convolve if self.q.size * other.q.size <= _DIRECT_LIMIT else fftconvolve
        q = np.maximum(np.asarray(conv(self.q, other.q), dtype=np.float64), 0.0)
        p = np.maximum(np.asarray(conv(self.p, other.p), dtype=np.float64), 0.0)
        k0 = self.k0 + other.k0
        # Keep each bin exactly on its loss: q = e^{kh} p. Take the side that carries the mass
        # (Q for k >= 0, P for k < 0) and derive the other from it.
        kk = (np.arange(q.size) + k0) * self.h
        pos = kk >= 0
        with np.errstate(over="ignore"):
            p = np.where(pos, q * np.exp(-kk), p)
            q = np.where(pos, q, p * np.exp(kk))
        q_inf = 1.0 - (1.0 - self.q_inf) * (1.0 - other.q_inf)
        return _LossPair(self.h, k0, q, p, q_inf)._trim()

    def to_tradeoff(self) -> PiecewiseLinearTradeOff:
        """Exact trade-off curve of the pair (tests reject in decreasing order of loss)."""
        q = self.q[::-1]
        p = self.p[::-1]
        alphas = np.concatenate([[0.0, 0.0], np.cumsum(p), [1.0]])
        betas = np.concatenate([[1.0, 1.0 - self.q_inf], 1.0 - self.q_inf - np.cumsum(q), [0.0]])
        return PiecewiseLinearTradeOff._from_hull(alphas, betas - _FINAL_SLACK)


def _binned(h: float, k_lo: int, k_hi: int, cdf_q: Any, q_inf: float) -> _LossPair:
    """Bins ``((k-1) h, k h]`` for k in [k_lo, k_hi] of a loss with Q-cdf ``cdf_q``; mass at or
    below ``(k_lo - 1) h`` is rounded up into the first bin, mass above ``k_hi h`` goes to +inf."""
    _check_size(k_hi - k_lo + 1)
    ks = np.arange(k_lo, k_hi + 1)
    upper = np.asarray(cdf_q(ks * h), dtype=np.float64)
    lower = np.concatenate([[0.0], upper[:-1]])
    q = np.maximum(upper - lower, 0.0)
    top = max(0.0, 1.0 - q_inf - float(upper[-1]))
    p = q * np.exp(-ks * h)
    return _LossPair(h, k_lo, q, p, min(1.0, q_inf + top))._trim()


def _pair(f: TradeOffFunction, h: float) -> _LossPair:
    """The loss pair of f with losses rounded up; exact laws for G_mu and Laplace, otherwise
    the piecewise-linear lower bound of f."""
    if isinstance(f, GaussianTradeOff) and f.mu > 0:
        mu = f.mu
        m = 0.5 * mu * mu  # L ~ N(mu^2/2, mu^2) under Q

        def cdf_g(x: FloatArray) -> FloatArray:
            z = (x - m) / mu
            # upper tail from the complement keeps relative accuracy where the cdf is near 1
            return np.asarray(np.where(z < 0, ndtr(z), 1.0 - ndtr(-z)), dtype=np.float64)

        k_lo = math.floor((m - 12.0 * mu) / h)
        k_hi = math.ceil((m + 12.0 * mu) / h)
        return _binned(h, k_lo, k_hi, cdf_g, 0.0)
    if isinstance(f, LaplaceTradeOff) and f.mu > 0:
        mu = f.mu
        # Under Q = Lap(mu, 1) the loss |x| - |x - mu| is -mu w.p. e^{-mu}/2 (x <= 0), mu w.p.
        # 1/2 (x >= mu) and 2x - mu in between with density e^{x - mu}/2.

        def cdf_l(x: FloatArray) -> FloatArray:
            t = np.clip((x + mu) / 2.0, 0.0, mu)  # loss <= x  <=>  position <= t
            val = 0.5 * np.exp(t - mu)
            return np.asarray(np.where(x >= mu, 1.0, np.where(x < -mu, 0.0, val)),
                              dtype=np.float64)

        k_lo = math.ceil(-mu / h - 1e-9)
        k_hi = math.ceil(mu / h - 1e-9)
        return _binned(h, k_lo, k_hi, cdf_l, 0.0)
    return _LossPair.from_piecewise_linear(f.lower_piecewise_linear(), h)


def tensor(*fs: TradeOffFunction, loss_step: float = 1e-3) -> TradeOffFunction:
    """``f_1 (x) ... (x) f_n = T(P_1 x ... x P_n, Q_1 x ... x Q_n)`` (DRS Section 3.1).

    All Gaussian: exact, ``G_mu`` with ``mu = sqrt(sum mu_i^2)`` rounded up (DRS Corollary 3.3).
    Otherwise a piecewise-linear *lower bound* computed with losses rounded up to multiples of
    ``loss_step`` (see the module docstring); its pessimism is about ``n * loss_step`` in the
    privacy loss, so pick ``loss_step`` small against the total epsilon you care about.
    """
    if not fs:
        raise PrivacyParameterError("tensor needs at least one trade-off function")
    for f in fs:
        if not isinstance(f, TradeOffFunction):
            raise PrivacyParameterError(f"not a trade-off function: {f!r}")
    h = check_positive(loss_step, "loss_step")
    if all(isinstance(f, GaussianTradeOff) for f in fs):
        first = fs[0]
        if isinstance(first, GaussianTradeOff):
            return first.tensor(*fs[1:])
    acc = _pair(fs[0], h)
    for f in fs[1:]:
        acc = acc.compose(_pair(f, h))
    return acc.to_tradeoff()


def self_tensor(f: TradeOffFunction, k: int, *, loss_step: float = 1e-3) -> TradeOffFunction:
    """``f^{(x) k}``, the k-fold tensor power (k-fold composition), by repeated squaring.

    Gaussian: exact ``G_{sqrt(k) mu}`` (rounded up). Otherwise as :func:`tensor`.
    """
    if not isinstance(f, TradeOffFunction):
        raise PrivacyParameterError(f"not a trade-off function: {f!r}")
    k = check_integer(k, name="k", minimum=1)
    h = check_positive(loss_step, "loss_step")
    if isinstance(f, GaussianTradeOff):
        return _gaussian_power(f, k)
    base = _pair(f, h)
    result: _LossPair | None = None
    while k:
        if k & 1:
            result = base if result is None else result.compose(base)
        k >>= 1
        if k:
            base = base.compose(base)
    if result is None:  # pragma: no cover - k >= 1
        raise PrivacyParameterError("k must be >= 1")
    return result.to_tradeoff()


def _gaussian_power(f: GaussianTradeOff, k: int) -> GaussianTradeOff:
    from fractions import Fraction

    from dpkit._numeric.rounding import sqrt_up

    return GaussianTradeOff(sqrt_up(Fraction(f.mu) ** 2 * k))
