"""f-differential privacy: trade-off functions as objects (Dong, Roth and Su 2022).

Everything here errs on the safe side: trade-off curves are never above the exact ones, deltas and
epsilons are rounded up.
"""

from dpkit.fdp._compose import self_tensor, tensor
from dpkit.fdp._tradeoff import (
    ApproxDpTradeOff,
    GaussianTradeOff,
    GroupTradeOff,
    LaplaceTradeOff,
    PiecewiseLinearTradeOff,
    PropertyReport,
    ScaledGaussianTradeOff,
    TradeOffFunction,
    approx_dp,
    from_distributions,
    from_privacy_profile,
    gaussian,
    gdp,
    identity,
    laplace,
    mu_from_epsilon_delta,
    piecewise_linear,
)

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
    "self_tensor",
    "tensor",
]
