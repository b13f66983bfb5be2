"""Numeric tensor products of trade-off functions through the privacy-loss engine.

For ``f = T(P_f, Q_f)`` the pair ``P = Q_f``, ``Q = P_f`` of :mod:`dpkit._loss.pairs` has the
privacy loss ``L = log(dQ_f / dP_f)``. The product ``T(P_f x P_f', Q_f x Q_f')`` has loss
``L + L'`` (DRS Theorem 3.2 and the proof of Proposition 2.12), so the loss distributions
convolve, and the trade-off function of the product is the convex conjugate of the composed
privacy profile, ``beta(alpha) = sup_eps 1 - delta(eps) - e^eps alpha``. The composition is done
by the engine shared with the PLD accountant (:mod:`dpkit._loss.grid`), with its pessimistic
"connect the dots" discretisation, Chernoff-bounded FFT wrap-around and round-off allowances, so
the curve returned carries the accountant's proof: its profile is above the exact one at every
epsilon, hence the curve is *below* the exact tensor product (a valid f-DP guarantee).

Factors: ``G_mu`` and Laplace factors use the exact law of their loss (the Gaussian and Laplace
pairs); every other factor is first replaced by a piecewise-linear trade-off function *below*
it (:meth:`TradeOffFunction.lower_piecewise_linear`, exact for piecewise-linear f), i.e. a
genuine discrete pair whose losses are atoms. A lower factor is a pair with a larger profile,
and the tensor product is monotone in each factor (DRS Section 3.1), so this keeps a lower
bound.

Grid: by default (``loss_step=None``) the step is the accountant's automatic one
(:func:`dpkit._loss.grid.automatic_step`: ``2e-4`` times the standard deviation of the composed
loss, the largest atom on a grid point), so the discretisation error is of second order and
small against the composed loss, whatever the number of factors. An explicit ``loss_step`` is
used as given (an error if the grid would not fit in memory).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from dpkit._loss.grid import (
    Factor,
    GridTooLargeError,
    NoFiniteBoundError,
    automatic_step,
    compose_factors,
)
from dpkit._loss.pairs import Pair, gaussian_pair, laplace_pair, tradeoff_segments_pair
from dpkit._numeric.rounding import sqrt_up
from dpkit._numeric.validation import check_integer, check_positive
from dpkit.errors import PrivacyParameterError
from dpkit.fdp._tradeoff import (
    GaussianTradeOff,
    LaplaceTradeOff,
    PiecewiseLinearTradeOff,
    TradeOffFunction,
)

__all__ = ["self_tensor", "tensor"]


def _pair(f: TradeOffFunction) -> Pair:
    """The dominating pair of f: exact for ``G_mu`` and Laplace, otherwise the atoms of the
    piecewise-linear lower bound of f."""
    if isinstance(f, GaussianTradeOff):
        return gaussian_pair(f.mu)
    if isinstance(f, LaplaceTradeOff):
        return laplace_pair(f.mu)
    return tradeoff_segments_pair(*f.lower_piecewise_linear().segments())


def _check_factor(f: object) -> TradeOffFunction:
    if not isinstance(f, TradeOffFunction):
        raise PrivacyParameterError(f"not a trade-off function: {f!r}")
    return f


def _compose(counts: dict[Factor, int], loss_step: float | None) -> TradeOffFunction:
    """The trade-off curve of the composed factors (see the module docstring)."""
    try:
        h = automatic_step(counts)[0] if loss_step is None else loss_step
        composed, _, _ = compose_factors(
            counts, "connect_dots", h, both=False, fixed=loss_step is not None
        )
    except GridTooLargeError as exc:
        raise PrivacyParameterError(f"{exc}; use a larger loss_step") from None
    except NoFiniteBoundError:
        # no grid holds these losses: the trivial curve f = 0 is still a valid lower bound
        zero = np.zeros(2)
        return PiecewiseLinearTradeOff._from_hull(np.array([0.0, 1.0]), zero)
    alphas, betas = composed.tradeoff_knots()
    return PiecewiseLinearTradeOff._from_hull(alphas, betas)


def tensor(*fs: TradeOffFunction, loss_step: float | None = None) -> TradeOffFunction:
    """``f_1 (x) ... (x) f_n = T(P_1 x ... x P_n, Q_1 x ... x Q_n)`` (DRS Section 3.1).

    All Gaussian: exact, ``G_mu`` with ``mu = sqrt(sum mu_i^2)`` rounded up (DRS Corollary 3.3).
    Otherwise a piecewise-linear *lower bound* from the privacy-loss engine (see the module
    docstring): its profile ``delta(eps)`` is a certified upper bound on the exact one. With
    the default ``loss_step=None`` the grid is chosen so that the bound is tight (second-order
    discretisation error, relative to the spread of the composed loss); a given ``loss_step``
    fixes the grid step.
    """
    if not fs:
        raise PrivacyParameterError("tensor needs at least one trade-off function")
    checked = [_check_factor(f) for f in fs]
    step = None if loss_step is None else check_positive(loss_step, "loss_step")
    if all(isinstance(f, GaussianTradeOff) for f in checked):
        first = checked[0]
        if isinstance(first, GaussianTradeOff):
            return first.tensor(*checked[1:])
    counts: dict[Factor, int] = {}
    seen: dict[int, Factor] = {}  # the same object passed many times is converted once
    for f in checked:
        factor = seen.get(id(f))
        if factor is None:
            pair = _pair(f)
            factor = seen[id(f)] = Factor(pair, pair)
        counts[factor] = counts.get(factor, 0) + 1
    return _compose(counts, step)


def self_tensor(f: TradeOffFunction, k: int, *, loss_step: float | None = None) -> TradeOffFunction:
    """``f^{(x) k}``, the k-fold tensor power (k-fold composition).

    Gaussian: exact ``G_{sqrt(k) mu}`` (rounded up). Otherwise as :func:`tensor` (one FFT power
    of the discretised loss distribution).
    """
    f = _check_factor(f)
    k = check_integer(k, name="k", minimum=1)
    step = None if loss_step is None else check_positive(loss_step, "loss_step")
    if isinstance(f, GaussianTradeOff):
        return GaussianTradeOff(sqrt_up(Fraction(f.mu) ** 2 * k))
    pair = _pair(f)
    return _compose({Factor(pair, pair): k}, step)
