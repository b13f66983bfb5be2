"""f-differential privacy: trade-off functions as objects (Dong, Roth and Su 2022).

Everything here errs on the safe side: trade-off curves are never above the exact ones, deltas and
epsilons are rounded up.
"""

from dpkit.fdp._clt import (
    BerryEsseenBound,
    CltResult,
    Functionals,
    approx_dp_composition_limit,
    berry_esseen,
    berry_esseen_from_sums,
    clt_mu,
    functionals,
)
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
from dpkit.fdp.plot import plot_privacy_profiles, plot_tradeoffs

__all__ = [
    "ApproxDpTradeOff",
    "BerryEsseenBound",
    "CltResult",
    "Functionals",
    "GaussianTradeOff",
    "GroupTradeOff",
    "LaplaceTradeOff",
    "PiecewiseLinearTradeOff",
    "PropertyReport",
    "ScaledGaussianTradeOff",
    "TradeOffFunction",
    "approx_dp",
    "approx_dp_composition_limit",
    "berry_esseen",
    "berry_esseen_from_sums",
    "clt_mu",
    "from_distributions",
    "from_privacy_profile",
    "functionals",
    "gaussian",
    "gdp",
    "identity",
    "laplace",
    "mu_from_epsilon_delta",
    "piecewise_linear",
    "plot_privacy_profiles",
    "plot_tradeoffs",
    "self_tensor",
    "tensor",
]
