"""dpkit: differential privacy with secure, floating-point-safe noise and tight accounting.

The names most programs need are available at the top level::

    from dpkit import Laplace, Gaussian, Budget

    budget = Budget(epsilon=1.0)
    laplace = Laplace.from_epsilon(epsilon=0.5, sensitivity=1.0)

Importing dpkit is light: only the exception classes are loaded eagerly. Everything else (the
random source, the mechanisms, accounting, analytics, f-DP, local DP, auditing and
synthetic-data subpackages, and the top-level names taken from them) is imported on first use,
through the module ``__getattr__`` of PEP 562. Engines (duckdb, pandas) and plotting
(matplotlib) are imported only by the functions that need them.
"""

from __future__ import annotations

from dpkit import errors
from dpkit.errors import (
    BudgetExceededError,
    DPKitError,
    PrivacyParameterError,
    UnsupportedEventError,
)

# Not even typing is imported at run time: TYPE_CHECKING is False here and True for type checkers.
TYPE_CHECKING = False

if TYPE_CHECKING:  # for type checkers and IDEs; at run time these load lazily (see __getattr__)
    from typing import Any

    from dpkit import accounting as accounting
    from dpkit import audit as audit
    from dpkit import divergence as divergence
    from dpkit import fdp as fdp
    from dpkit import ldp as ldp
    from dpkit import mechanisms as mechanisms
    from dpkit import noise as noise
    from dpkit.accounting import Budget, dpsgd_epsilon, dpsgd_noise_multiplier
    from dpkit.mechanisms import (
        DiscreteGaussian,
        DiscreteLaplace,
        ExponentialMechanism,
        Gaussian,
        Laplace,
        RandomizedResponse,
        ReportNoisyMax,
        bounded_mean_sensitivity,
        bounded_sum_sensitivity,
        count_sensitivity,
    )
    from dpkit.noise import RandomSource
    from dpkit.synth import AIM, MST

__version__ = "0.1.0"

# Top-level name -> the module that defines it (imported on first access, then cached here).
_LAZY_NAMES: dict[str, str] = {
    "RandomSource": "dpkit.noise",
    **dict.fromkeys(
        (
            "Laplace",
            "Gaussian",
            "DiscreteLaplace",
            "DiscreteGaussian",
            "ExponentialMechanism",
            "ReportNoisyMax",
            "RandomizedResponse",
            "count_sensitivity",
            "bounded_sum_sensitivity",
            "bounded_mean_sensitivity",
        ),
        "dpkit.mechanisms",
    ),
    **dict.fromkeys(("Budget", "dpsgd_epsilon", "dpsgd_noise_multiplier"), "dpkit.accounting"),
    # Synthesizers (their subpackage imports no engine until a fit runs).
    **dict.fromkeys(("AIM", "MST"), "dpkit.synth"),
    # Aggregates keep their SQL names (count, sum, ...): use them qualified, as ``dpkit.sum``.
    **dict.fromkeys(
        (
            "Session",
            "count",
            "count_distinct",
            "sum",
            "mean",
            "variance",
            "std",
            "quantile",
            "histogram",
            "long_form",
        ),
        "dpkit.analytics",
    ),
}

# Subpackages reachable as ``dpkit.<name>`` after a plain ``import dpkit``.
_SUBMODULES = frozenset(
    (
        "accounting",
        "analytics",
        "audit",
        "divergence",
        "fdp",
        "ldp",
        "mechanisms",
        "noise",
        "synth",
    )
)

# Every top-level name, eager or lazy, except the aggregate functions: ``from dpkit import *``
# must not shadow the built-in sum.
__all__ = [
    "AIM",
    "MST",
    "Budget",
    "BudgetExceededError",
    "DPKitError",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "ExponentialMechanism",
    "Gaussian",
    "Laplace",
    "PrivacyParameterError",
    "RandomSource",
    "RandomizedResponse",
    "ReportNoisyMax",
    "Session",
    "UnsupportedEventError",
    "__version__",
    "bounded_mean_sensitivity",
    "bounded_sum_sensitivity",
    "count_sensitivity",
    "dpsgd_epsilon",
    "dpsgd_noise_multiplier",
    "errors",
    "long_form",
]


def __getattr__(name: str) -> Any:
    """Load a lazy top-level name or subpackage on first access (PEP 562)."""
    import importlib

    module = _LAZY_NAMES.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"dpkit.{name}")  # the import binds dpkit.<name> too
    from dpkit.errors import UnsupportedAggregateError

    raise UnsupportedAggregateError.missing("dpkit", name)


def __dir__() -> list[str]:
    """The public names (eager and lazy), the subpackages and the module's dunders."""
    dunders = {n for n in globals() if n.startswith("__")}
    return sorted(dunders | set(__all__) | set(_LAZY_NAMES) | _SUBMODULES)
