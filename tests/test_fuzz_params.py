"""Parameter fuzz: every invalid privacy parameter passed to every public constructor/function of
the mechanisms, the noise samplers, the accounting events, the composition theorems and the
local-DP protocols is refused with a dpkit error.

A generated grid (each parameter of each entry point, replaced in turn by every invalid value of
its kind, the other parameters valid) plus a hypothesis search over invalid floats. The number
of invalid parameters *accepted* is counted, printed and must be 0; the entries accepted are
listed in the failure message. Every refusal must be a :class:`~dpkit.errors.DPKitError` (not a
bare TypeError/ValueError/ZeroDivisionError leaking from numpy or math) and its message must
name the parameter.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit import events as ev
from dpkit import ldp, noise
from dpkit.accounting import composition as comp
from dpkit.errors import DPKitError
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

# ---------------------------------------------------------------------------------------------
# Invalid values by kind of parameter
# ---------------------------------------------------------------------------------------------
NOT_REAL: list[Any] = [
    math.nan,
    np.float64("nan"),
    np.nan,
    True,
    False,
    np.bool_(True),
    "1",
    "0.5",
    1j,
    0.5 + 0j,
    None,
    [0.5],
    (0.5,),
    np.array([0.5, 0.5]),
    object(),
    Decimal("0.5"),
    b"1",
]
INFINITE: list[Any] = [math.inf, -math.inf, np.float64("inf")]
NOT_INT: list[Any] = [*NOT_REAL, *INFINITE, 1.5, 2.0, np.float64(2.0), Fraction(3, 2)]

INVALID: dict[str, list[Any]] = {
    # finite and > 0
    "positive": [*NOT_REAL, *INFINITE, 0.0, -0.0, 0, -1.0, -1e-300, -5, np.float32(-1.0)],
    # finite and >= 0
    "nonnegative": [*NOT_REAL, *INFINITE, -1.0, -1e-300, -5],
    # finite
    "finite": [*NOT_REAL, *INFINITE],
    # delta in (0, 1)
    "delta_open": [*NOT_REAL, *INFINITE, 0.0, 1.0, 1.5, -1e-9, 1],
    # delta in [0, 1)
    "delta": [*NOT_REAL, *INFINITE, 1.0, 1.5, -1e-9, 1],
    # a tail probability alpha in (0, 1)
    "alpha": [*NOT_REAL, *INFINITE, 0.0, 1.0, 5.0, -0.5],
    # a tail probability in (0, 1] (alpha = 1 is the trivial statement t = 0)
    "alpha_incl_one": [*NOT_REAL, *INFINITE, 0.0, 1.5, 5.0, -0.5],
    # a probability in [0, 1]
    "probability": [*NOT_REAL, *INFINITE, 1.5, -0.1, 2],
    # a probability in (0, 1]
    "probability_open_low": [*NOT_REAL, *INFINITE, 0.0, 1.5, -0.1],
    # randomized response: truth probability in [1/2, 1)
    "rr_p": [*NOT_REAL, *INFINITE, 1.0, 0.4, 1.5, -0.1, 0.0],
    # integers >= 1 / >= 0
    "int_pos": [*NOT_INT, 0, -1],
    "int_nonneg": [*NOT_INT, -1],
    "neighbouring": ["foo", None, 1, True, "", "add-remove", 1.0],
    # a sequence of epsilons: one bad element among good ones
    "epsilon_list": [[1.0, v] for v in (math.nan, math.inf, -1.0, True, "1", 1j, None)],
    # a categorical domain size
    "domain": [0, -1, 1.5, None, True, math.nan],
    "method": ["foo", None, 1, "Analytic", True],
    "noise": ["foo", None, 1, "Laplace", True],
    "bool": [1, 0, "yes", None, 1.0, np.float64(1.0)],
    # rational sampler parameters (positive rationals)
    "rational_positive": [
        *NOT_REAL[:-4],
        *INFINITE,
        0,
        Fraction(0),
        -1,
        Fraction(-1, 2),
        -0.5,
        0.0,
    ],
    "rational_nonnegative": [*NOT_REAL[:-4], *INFINITE, -1, Fraction(-1, 2), -0.5],
    "rational_probability": [*NOT_REAL[:-4], *INFINITE, Fraction(3, 2), -1, 1.5, -0.1],
}


@dataclass(frozen=True)
class Target:
    """An entry point, its valid keyword arguments, and the kind of each fuzzed parameter."""

    name: str
    call: Callable[..., Any]
    valid: dict[str, Any]
    kinds: dict[str, str]


SRC = RandomSource(seed=0, insecure=True)
_LAP = Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)
_GAU = Gaussian.from_mu(mu=1.0, sensitivity=1.0)
_DL = DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1)
_DG = DiscreteGaussian.from_sigma(sigma=2.0, sensitivity=1)
_EM = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
_RNM = ReportNoisyMax(epsilon=1.0, sensitivity=1.0)
_NB = {"neighbouring": "add_remove"}
_NBK = {"neighbouring": "neighbouring"}


def _sampler(f: Callable[..., Any], param: str, value: Any, kind: str) -> Target:
    return Target(
        f"noise.{f.__name__}", lambda **kw: f(SRC, size=3, **kw), {param: value}, {param: kind}
    )


def _exact(f: Callable[..., Any], param: str, value: Any, kind: str) -> Target:
    return Target(
        f"noise.{f.__name__}", lambda **kw: f(SRC, kw[param]), {param: value}, {param: kind}
    )


TARGETS: list[Target] = [
    # -- mechanisms ----------------------------------------------------------------------------
    Target(
        "Laplace.from_epsilon",
        Laplace.from_epsilon,
        {"epsilon": 1.0, "sensitivity": 1.0, **_NB},
        {"epsilon": "positive", "sensitivity": "positive", **_NBK},
    ),
    Target(
        "Laplace.from_scale",
        Laplace.from_scale,
        {"scale": 1.0, "sensitivity": 1.0, **_NB},
        {"scale": "positive", "sensitivity": "positive", **_NBK},
    ),
    Target(
        "Laplace",
        Laplace,
        {"scale": _LAP.scale, "sensitivity": 1.0, "granularity": _LAP.granularity, **_NB},
        {"scale": "positive", "sensitivity": "positive", "granularity": "positive", **_NBK},
    ),
    Target(
        "Laplace.confidence_half_width",
        lambda alpha: _LAP.confidence_half_width(alpha),
        {"alpha": 0.05},
        {"alpha": "alpha"},
    ),
    Target(
        "Gaussian.from_mu",
        Gaussian.from_mu,
        {"mu": 1.0, "sensitivity": 1.0, **_NB},
        {"mu": "positive", "sensitivity": "positive", **_NBK},
    ),
    Target(
        "Gaussian.from_sigma",
        Gaussian.from_sigma,
        {"sigma": 1.0, "sensitivity": 1.0, **_NB},
        {"sigma": "positive", "sensitivity": "positive", **_NBK},
    ),
    Target(
        "Gaussian.from_epsilon_delta",
        Gaussian.from_epsilon_delta,
        {"epsilon": 0.5, "delta": 1e-6, "sensitivity": 1.0, "method": "analytic", **_NB},
        {
            "epsilon": "positive",
            "delta": "delta_open",
            "sensitivity": "positive",
            "method": "method",
            **_NBK,
        },
    ),
    Target(
        "Gaussian.from_epsilon_delta[classic]",
        Gaussian.from_epsilon_delta,
        {"epsilon": 0.5, "delta": 1e-6, "sensitivity": 1.0, "method": "classic"},
        {"epsilon": "positive", "delta": "delta_open", "sensitivity": "positive"},
    ),
    Target(
        "Gaussian",
        Gaussian,
        {"sigma": _GAU.sigma, "sensitivity": 1.0, "granularity": _GAU.granularity, **_NB},
        {"sigma": "positive", "sensitivity": "positive", "granularity": "positive", **_NBK},
    ),
    Target(
        "Gaussian.delta_for",
        lambda epsilon: _GAU.delta_for(epsilon=epsilon),
        {"epsilon": 1.0},
        {"epsilon": "nonnegative"},
    ),
    Target(
        "Gaussian.epsilon_for",
        lambda delta: _GAU.epsilon_for(delta=delta),
        {"delta": 1e-6},
        {"delta": "delta_open"},
    ),
    Target(
        "Gaussian.confidence_half_width",
        lambda alpha: _GAU.confidence_half_width(alpha),
        {"alpha": 0.05},
        {"alpha": "alpha"},
    ),
    Target(
        "DiscreteLaplace.from_epsilon",
        DiscreteLaplace.from_epsilon,
        {"epsilon": 1.0, "sensitivity": 1, **_NB},
        {"epsilon": "positive", "sensitivity": "int_pos", **_NBK},
    ),
    Target(
        "DiscreteLaplace",
        DiscreteLaplace,
        {"scale": 2.0, "sensitivity": 1, **_NB},
        {"scale": "positive", "sensitivity": "int_pos", **_NBK},
    ),
    Target(
        "DiscreteLaplace.confidence_half_width",
        lambda alpha: _DL.confidence_half_width(alpha),
        {"alpha": 0.05},
        {"alpha": "alpha"},
    ),
    Target(
        "DiscreteGaussian.from_sigma",
        DiscreteGaussian.from_sigma,
        {"sigma": 2.0, "sensitivity": 1, **_NB},
        {"sigma": "positive", "sensitivity": "int_pos", **_NBK},
    ),
    Target(
        "DiscreteGaussian",
        DiscreteGaussian,
        {"sigma": 2.0, "sensitivity": 1, **_NB},
        {"sigma": "positive", "sensitivity": "int_pos", **_NBK},
    ),
    Target(
        "DiscreteGaussian.confidence_half_width",
        lambda alpha: _DG.confidence_half_width(alpha),
        {"alpha": 0.05},
        {"alpha": "alpha"},
    ),
    Target(
        "ExponentialMechanism",
        ExponentialMechanism,
        {"epsilon": 1.0, "sensitivity": 1.0, "monotonic": False, **_NB},
        {"epsilon": "positive", "sensitivity": "positive", "monotonic": "bool", **_NBK},
    ),
    Target(
        "ExponentialMechanism.utility_gap",
        _EM.utility_gap,
        {"n_candidates": 10, "t": 1.0},
        {"n_candidates": "int_pos", "t": "nonnegative"},
    ),
    Target(
        "ExponentialMechanism.utility_gap_at",
        _EM.utility_gap_at,
        {"n_candidates": 10, "alpha": 0.05},
        {"n_candidates": "int_pos", "alpha": "alpha_incl_one"},
    ),
    Target(
        "ExponentialMechanism.release_many",
        lambda count: _EM.release_many([1.0, 2.0], count=count, source=SRC),
        {"count": 3},
        {"count": "int_nonneg"},
    ),
    Target(
        "ReportNoisyMax",
        ReportNoisyMax,
        {"epsilon": 1.0, "sensitivity": 1.0, "noise": "laplace", "monotonic": False, **_NB},
        {
            "epsilon": "positive",
            "sensitivity": "positive",
            "noise": "noise",
            "monotonic": "bool",
            **_NBK,
        },
    ),
    Target(
        "ReportNoisyMax.release_many",
        lambda count: _RNM.release_many([1.0, 2.0], count=count, source=SRC),
        {"count": 3},
        {"count": "int_nonneg"},
    ),
    Target("RandomizedResponse", RandomizedResponse, {"p": 0.75}, {"p": "rr_p"}),
    Target(
        "RandomizedResponse.from_epsilon",
        RandomizedResponse.from_epsilon,
        {"epsilon": 1.0},
        {"epsilon": "positive"},
    ),
    Target("count_sensitivity", count_sensitivity, {**_NB}, {**_NBK}),
    Target(
        "bounded_sum_sensitivity",
        bounded_sum_sensitivity,
        {"lower": -1.0, "upper": 2.0, **_NB},
        {"lower": "finite", "upper": "finite", **_NBK},
    ),
    Target(
        "bounded_mean_sensitivity",
        bounded_mean_sensitivity,
        {"lower": -1.0, "upper": 2.0, "n": 10, **_NB},
        {"lower": "finite", "upper": "finite", "n": "int_pos", **_NBK},
    ),
    # -- samplers --------------------------------------------------------------------------------
    _sampler(noise.laplace, "scale", 1.0, "positive"),
    _sampler(noise.gaussian, "sigma", 1.0, "positive"),
    _sampler(noise.exponential, "scale", 1.0, "positive"),
    _sampler(noise.gumbel, "scale", 1.0, "positive"),
    _sampler(noise.geometric, "p", 0.5, "probability_open_low"),
    _sampler(noise.discrete_laplace, "scale", 1.0, "positive"),
    _sampler(noise.discrete_gaussian, "sigma", 1.0, "positive"),
    _sampler(noise.laplace_lattice_noise, "t", 1.0, "positive"),
    _sampler(noise.gaussian_lattice_noise, "sigma", 1.0, "positive"),
    _sampler(noise.bernoulli, "p", 0.5, "probability"),
    _sampler(noise.bernoulli_exp, "gamma", 0.5, "nonnegative"),
    _exact(noise.bernoulli_exact, "p", Fraction(1, 3), "rational_probability"),
    _exact(noise.bernoulli_exp_exact, "gamma", Fraction(1, 3), "rational_nonnegative"),
    _exact(noise.discrete_laplace_exact, "scale", Fraction(3, 2), "rational_positive"),
    _exact(noise.discrete_gaussian_exact, "sigma2", Fraction(9, 4), "rational_positive"),
    # -- accounting events -----------------------------------------------------------------------
    Target("PureDpEvent", ev.PureDpEvent, {"epsilon": 1.0}, {"epsilon": "nonnegative"}),
    Target(
        "ApproxDpEvent",
        ev.ApproxDpEvent,
        {"epsilon": 1.0, "delta": 1e-6},
        {"epsilon": "nonnegative", "delta": "delta"},
    ),
    Target(
        "LaplaceEvent",
        ev.LaplaceEvent,
        {"noise_multiplier": 1.0, "pmf_slack": 0.0, **_NB},
        {"noise_multiplier": "positive", "pmf_slack": "nonnegative", **_NBK},
    ),
    Target(
        "GaussianEvent",
        ev.GaussianEvent,
        {"noise_multiplier": 1.0, "pmf_slack": 0.0, **_NB},
        {"noise_multiplier": "positive", "pmf_slack": "nonnegative", **_NBK},
    ),
    Target(
        "DiscreteLaplaceEvent",
        ev.DiscreteLaplaceEvent,
        {"scale": 2.0, "sensitivity": 1, "pmf_slack": 0.0, **_NB},
        {"scale": "positive", "sensitivity": "int_pos", "pmf_slack": "nonnegative", **_NBK},
    ),
    Target(
        "DiscreteGaussianEvent",
        ev.DiscreteGaussianEvent,
        {"sigma": 2.0, "sensitivity": 1, "pmf_slack": 0.0, **_NB},
        {"sigma": "positive", "sensitivity": "int_pos", "pmf_slack": "nonnegative", **_NBK},
    ),
    Target(
        "ExponentialMechanismEvent",
        ev.ExponentialMechanismEvent,
        {"epsilon": 1.0, "pmf_slack": 0.0, **_NB},
        {"epsilon": "positive", "pmf_slack": "nonnegative", **_NBK},
    ),
    Target(
        "ReportNoisyMaxEvent",
        ev.ReportNoisyMaxEvent,
        {"epsilon": 1.0, "noise": "laplace", "pmf_slack": 0.0, **_NB},
        {"epsilon": "positive", "noise": "noise", "pmf_slack": "nonnegative", **_NBK},
    ),
    Target(
        "RandomizedResponseEvent",
        ev.RandomizedResponseEvent,
        {"p_truth": 0.75, "categories": 2},
        {"p_truth": "probability", "categories": "int_pos"},
    ),
    # -- composition theorems -------------------------------------------------------------------
    Target(
        "basic_composition",
        comp.basic_composition,
        {"epsilons": [1.0, 0.5]},
        {"epsilons": "epsilon_list"},
    ),
    Target(
        "parallel_composition",
        comp.parallel_composition,
        {"epsilons": [1.0, 0.5], **_NB},
        {"epsilons": "epsilon_list", **_NBK},
    ),
    Target(
        "advanced_composition",
        comp.advanced_composition,
        {"epsilon": 0.1, "count": 10, "delta_slack": 1e-6, "delta": 0.0},
        {"epsilon": "nonnegative", "count": "int_nonneg", "delta_slack": "delta", "delta": "delta"},
    ),
    Target(
        "optimal_composition_delta",
        comp.optimal_composition_delta,
        {"epsilon": 0.1, "count": 10, "target_epsilon": 0.5},
        {"epsilon": "nonnegative", "count": "int_nonneg", "target_epsilon": "nonnegative"},
    ),
    Target(
        "optimal_composition",
        comp.optimal_composition,
        {"epsilon": 0.1, "count": 10, "delta": 1e-6, "release_delta": 0.0},
        {
            "epsilon": "nonnegative",
            "count": "int_nonneg",
            "delta": "delta",
            "release_delta": "delta",
        },
    ),
    # -- local DP protocols ---------------------------------------------------------------------
    *[
        Target(
            f"ldp.{cls.__name__}",
            cls,
            {"epsilon": 1.0, "domain": 8},
            {"epsilon": "positive", "domain": "domain"},
        )
        for cls in ldp.FREQUENCY_ORACLES
    ],
    *[
        Target(f"ldp.{cls.__name__}", cls, {"epsilon": 1.0}, {"epsilon": "positive"})
        for cls in (ldp.Duchi, ldp.Piecewise, ldp.Hybrid, ldp.RandomizedResponse)
    ],
    Target(
        "SelfComposedEvent",
        ev.SelfComposedEvent,
        {"event": ev.PureDpEvent(epsilon=1.0), "count": 3},
        {"count": "int_nonneg"},
    ),
    Target(
        "PoissonSampledEvent",
        ev.PoissonSampledEvent,
        {"sampling_rate": 0.1, "event": ev.PureDpEvent(epsilon=1.0)},
        {"sampling_rate": "probability"},
    ),
]


def _attempt(target: Target, param: str, value: Any) -> str | None:
    """None if ``value`` for ``param`` is refused properly; otherwise a description."""
    kwargs = {**target.valid, param: value}
    try:
        target.call(**kwargs)
    except DPKitError as exc:
        if param not in str(exc) and not (
            target.name.startswith("noise.")
            and param in ("scale", "sigma", "t", "sigma2", "gamma", "p")
        ):
            return f"{target.name}({param}={value!r}): message does not name it: {exc}"
        return None
    except Exception as exc:
        return f"{target.name}({param}={value!r}): {type(exc).__name__} is not a DPKitError"
    return f"{target.name}({param}={value!r}): ACCEPTED"


def test_valid_arguments_are_accepted() -> None:
    for target in TARGETS:
        target.call(**target.valid)  # the baseline must work, or the grid proves nothing


def test_every_invalid_parameter_is_refused() -> None:
    failures: list[str] = []
    tried = 0
    for target in TARGETS:
        for param, kind in target.kinds.items():
            for value in INVALID[kind]:
                tried += 1
                problem = _attempt(target, param, value)
                if problem is not None:
                    failures.append(problem)
    accepted = [f for f in failures if f.endswith("ACCEPTED")]
    print(
        f"parameter fuzz: {tried} invalid parameters tried over {len(TARGETS)} entry points; "
        f"accepted: {len(accepted)}; other problems: {len(failures) - len(accepted)}"
    )
    assert len(accepted) == 0, "\n".join(accepted)
    assert not failures, "\n".join(failures)


def test_lower_above_upper_is_refused() -> None:
    for f, extra in ((bounded_sum_sensitivity, {}), (bounded_mean_sensitivity, {"n": 5})):
        for lo, hi in ((1.0, 0.0), (2.0**-1074, 0.0), (1e308, -1e308), (0.0, -0.0 - 1e-300)):
            with pytest.raises(DPKitError, match="lower"):
                f(lower=lo, upper=hi, neighbouring="replace", **extra)


def test_classic_gaussian_refuses_epsilon_at_least_one() -> None:
    for eps in (1.0, 1.5, 10.0):
        with pytest.raises(DPKitError, match="epsilon"):
            Gaussian.from_epsilon_delta(epsilon=eps, delta=1e-6, sensitivity=1.0, method="classic")


def test_privacy_parameters_are_keyword_only() -> None:
    positional: list[Callable[[], Any]] = [
        lambda: Laplace.from_epsilon(1.0, 1.0),  # type: ignore[misc]
        lambda: Gaussian.from_mu(1.0, 1.0),  # type: ignore[misc]
        lambda: Gaussian.from_epsilon_delta(1.0, 1e-6, 1.0),  # type: ignore[misc]
        lambda: ExponentialMechanism(1.0, 1.0),  # type: ignore[misc]
        lambda: ReportNoisyMax(1.0, 1.0),  # type: ignore[misc]
        lambda: RandomizedResponse(0.75),  # type: ignore[misc]
        lambda: DiscreteLaplace.from_epsilon(1.0, 1),  # type: ignore[misc]
        lambda: DiscreteGaussian.from_sigma(1.0, 1),  # type: ignore[misc]
        lambda: noise.laplace(SRC, 1.0, 3),  # type: ignore[misc]
    ]
    for call in positional:
        with pytest.raises(TypeError):
            call()
    with pytest.raises(TypeError):  # a misspelt keyword is never swallowed
        Gaussian.from_epsilon_delta(epsilon=1.0, detla=1e-6, sensitivity=1.0)  # type: ignore


# ---------------------------------------------------------------------------------------------
# Hypothesis: random invalid floats for every real parameter
# ---------------------------------------------------------------------------------------------
_DOMAIN: dict[str, Callable[[float], bool]] = {  # True where a float is VALID
    "positive": lambda x: math.isfinite(x) and x > 0,
    "nonnegative": lambda x: math.isfinite(x) and x >= 0,
    "delta_open": lambda x: 0 < x < 1,
    "delta": lambda x: 0 <= x < 1,
    "alpha": lambda x: 0 < x < 1,
    "alpha_incl_one": lambda x: 0 < x <= 1,
    "probability": lambda x: 0 <= x <= 1,
    "probability_open_low": lambda x: 0 < x <= 1,
    "rr_p": lambda x: 0.5 <= x < 1,
    "rational_positive": lambda x: math.isfinite(x) and x > 0,
    "rational_nonnegative": lambda x: math.isfinite(x) and x >= 0,
    "rational_probability": lambda x: 0 <= x <= 1,
}
REAL_PARAMS = [(t, p, k) for t in TARGETS for p, k in t.kinds.items() if k in _DOMAIN]


@settings(max_examples=400, deadline=None)
@given(
    which=st.integers(0, len(REAL_PARAMS) - 1),
    value=st.one_of(
        st.floats(), st.floats(-1e-300, 0.0), st.floats(0.99, 2.0), st.floats(-1.0, 0.5)
    ),
)
def test_random_invalid_floats_are_refused(which: int, value: float) -> None:
    target, param, kind = REAL_PARAMS[which]
    if _DOMAIN[kind](value):
        return  # a valid value: not part of this fuzz
    problem = _attempt(target, param, value)
    assert problem is None, problem


# ---------------------------------------------------------------------------------------------
# Extreme but *valid* parameters of the mechanisms: a correct mechanism or a dpkit error
# ---------------------------------------------------------------------------------------------
_MAX = float(np.finfo(np.float64).max)
_SENS = [
    5e-324,
    1e-320,
    1e-310,
    2.2250738585072014e-308,
    1e-300,
    1e-20,
    1.0,
    3.7,
    1e20,
    1e300,
    1e307,
    1e308,
    _MAX,
]
_EPS = [5e-324, 1e-300, 1e-17, 2.0**-20, 1e-6, 0.1, 1.0, 36.0, 37.0, 700.0, 710.0, 1e6, 1e300, _MAX]
_DELTA = [5e-324, 1e-300, 1e-12, 1e-5, 0.5, 0.999999]
_INT_SENS = [1, 7, 2**53 + 1, 2**62, 2**63, 10**30]


def _check_mechanism(
    mech: Any, *, epsilon: float | None = None, mu: float | None = None, integer: bool = False
) -> None:
    """Everything a user would touch next must work (or refuse with a dpkit error)."""
    if epsilon is not None:
        assert mech.epsilon <= epsilon, (mech, mech.epsilon, epsilon)
    if mu is not None:
        assert mech.mu <= mu, (mech, mech.mu, mu)
    _ = mech.event
    if hasattr(mech, "confidence_half_width"):
        mech.confidence_half_width(0.05)
    out = np.asarray(mech.release([0, 1] if integer else [0.0, 1.0], source=SRC))
    assert out.shape == (2,)


def _extreme_cases() -> list[tuple[str, Callable[[], None]]]:
    cases: list[tuple[str, Callable[[], None]]] = []

    def add(name: str, build: Callable[[], Any], **check: Any) -> None:
        cases.append((name, lambda: _check_mechanism(build(), **check)))

    for s in _SENS:
        for e in _EPS:
            add(
                f"Laplace.from_epsilon({e!r}, {s!r})",
                lambda e=e, s=s: Laplace.from_epsilon(epsilon=e, sensitivity=s),
                epsilon=e,
            )
            add(
                f"Laplace.from_scale({e!r}, {s!r})",
                lambda e=e, s=s: Laplace.from_scale(scale=e, sensitivity=s),
            )
            add(
                f"Gaussian.from_mu({e!r}, {s!r})",
                lambda e=e, s=s: Gaussian.from_mu(mu=e, sensitivity=s),
                mu=e,
            )
            add(
                f"Gaussian.from_sigma({e!r}, {s!r})",
                lambda e=e, s=s: Gaussian.from_sigma(sigma=e, sensitivity=s),
            )
            for d in _DELTA if s in (5e-324, 1.0, _MAX) else [1e-5]:

                def gauss(e: float = e, d: float = d, s: float = s) -> None:
                    mech = Gaussian.from_epsilon_delta(epsilon=e, delta=d, sensitivity=s)
                    _check_mechanism(mech)
                    assert mech.delta_for(epsilon=e) <= d

                cases.append((f"Gaussian.from_epsilon_delta({e!r}, {d!r}, {s!r})", gauss))
    for e in _EPS:
        add(
            f"RandomizedResponse.from_epsilon({e!r})",
            lambda e=e: RandomizedResponse.from_epsilon(epsilon=e),
            epsilon=e,
            integer=True,
        )
        for k in _INT_SENS:
            add(
                f"DiscreteLaplace.from_epsilon({e!r}, {k!r})",
                lambda e=e, k=k: DiscreteLaplace.from_epsilon(epsilon=e, sensitivity=k),
                epsilon=e,
                integer=True,
            )
        add(
            f"DiscreteLaplace(scale={e!r})",
            lambda e=e: DiscreteLaplace(scale=e, sensitivity=1),
            integer=True,
        )
        add(
            f"DiscreteGaussian.from_sigma({e!r})",
            lambda e=e: DiscreteGaussian.from_sigma(sigma=e, sensitivity=1),
            integer=True,
        )
    return cases


def test_extreme_valid_parameters_give_correct_mechanisms_or_dpkit_errors() -> None:
    """Before: 261 of the 1246 cases failed: 239 raw Python errors (ZeroDivisionError for
    sensitivity 5e-324 and in ``RandomizedResponse.from_epsilon(epsilon=37)`` and the discrete
    confidence intervals, OverflowError for sensitivity 1e307 at small epsilon or mu), 20 wrong
    results (a Gaussian certificate above a subnormal delta; a randomized response spending more
    than asked) and 2 hangs (a discrete Gaussian with sigma below 1e-162). A dpkit refusal is
    allowed; a raw error or a wrong result is not."""
    cases = _extreme_cases()
    raw: list[str] = []
    refused = 0
    for name, run in cases:
        try:
            run()
        except DPKitError:
            refused += 1
        except Exception as exc:
            raw.append(f"{name}: {type(exc).__name__}: {exc}")
    print(
        f"extreme parameters: {len(cases)} cases, {refused} refused by dpkit, "
        f"{len(raw)} raw errors or wrong results"
    )
    assert not raw, "\n".join(raw)


# Extreme but VALID parameters: an answer or a dpkit error, never a raw Python error
# ---------------------------------------------------------------------------------------------
EXTREME: dict[str, list[Any]] = {
    "positive": [5e-324, 1e-300, 1e-17, 37.0, 710.0, 1e300, 1.8e308, 2**53 + 1, 10**400],
    "nonnegative": [0.0, 5e-324, 1e-300, 1e-17, 37.0, 710.0, 1e300, 1.8e308, 10**400],
    "finite": [-1.8e308, 5e-324, 1.8e308],
    "delta_open": [5e-324, 1e-300, 0.5, 1 - 2**-53],
    "delta": [0.0, 5e-324, 1e-300, 0.5, 1 - 2**-53],
    "alpha": [5e-324, 1 - 2**-53],
    "alpha_incl_one": [5e-324, 1.0],
    "probability": [0.0, 5e-324, 1e-300, 1 - 2**-53, 1.0],
    "probability_open_low": [5e-324, 1e-300, 1.0],
    "rr_p": [0.5, 1 - 2**-53],
    "int_pos": [1, 2**53 + 1, 10**400],
    "int_nonneg": [0, 2**53 + 1, 10**400],
}


def _rdp_compose(count: int) -> Any:
    from dpkit.accounting.rdp import RdpAccountant

    ev = ev_mod.PoissonSampledEvent(
        sampling_rate=0.01, event=ev_mod.GaussianEvent(noise_multiplier=1.0)
    )
    return RdpAccountant().compose(ev, count).get_epsilon(1e-5)


def _pld_compose(count: int) -> Any:
    from dpkit.accounting.pld import PldAccountant

    return PldAccountant().compose(ev_mod.PureDpEvent(epsilon=0.1), count).get_epsilon(1e-5)


ev_mod = ev
_DPSGD = {"sampling_rate": 0.01, "noise_multiplier": 1.0, "steps": 100, "delta": 1e-5}
_DPSGD_KINDS = {
    "sampling_rate": "probability",
    "noise_multiplier": "positive",
    "steps": "int_nonneg",
    "delta": "delta",
}
_NOISE_MULT = {"sampling_rate": 0.01, "steps": 100, "epsilon": 2.0, "delta": 1e-5}
_NOISE_MULT_KINDS = {
    "sampling_rate": "probability",
    "steps": "int_nonneg",
    "epsilon": "positive",
    "delta": "delta",
}


def _accounting_targets() -> list[Target]:
    from dpkit.accounting import dpsgd

    return [
        Target("dpsgd_epsilon[pld]", dpsgd.dpsgd_epsilon, _DPSGD, _DPSGD_KINDS),
        Target(
            "dpsgd_epsilon[rdp]",
            lambda **kw: dpsgd.dpsgd_epsilon(method="rdp", **kw),
            _DPSGD,
            _DPSGD_KINDS,
        ),
        Target(
            "dpsgd_epsilon[gdp-clt]",
            lambda **kw: dpsgd.dpsgd_epsilon(method="gdp-clt", **kw),
            _DPSGD,
            _DPSGD_KINDS,
        ),
        Target(
            "dpsgd_noise_multiplier[rdp]",
            lambda **kw: dpsgd.dpsgd_noise_multiplier(method="rdp", **kw),
            _NOISE_MULT,
            _NOISE_MULT_KINDS,
        ),
        Target("RdpAccountant.compose", _rdp_compose, {"count": 3}, {"count": "int_nonneg"}),
        Target("PldAccountant.compose", _pld_compose, {"count": 3}, {"count": "int_nonneg"}),
    ]


# the accounting and local-DP entry points (the mechanisms and samplers have their own list)
_ACCOUNTING_PREFIXES = (
    "PureDpEvent",
    "ApproxDpEvent",
    "LaplaceEvent",
    "GaussianEvent",
    "DiscreteLaplaceEvent",
    "DiscreteGaussianEvent",
    "ExponentialMechanismEvent",
    "ReportNoisyMaxEvent",
    "RandomizedResponseEvent",
    "SelfComposedEvent",
    "PoissonSampledEvent",
    "basic_composition",
    "parallel_composition",
    "advanced_composition",
    "optimal_composition",
    "ldp.",
    "dpsgd_",
    "RdpAccountant",
    "PldAccountant",
)


def _extreme_failures(targets: list[Target]) -> tuple[int, list[str]]:
    failures: list[str] = []
    tried = 0
    for target in targets:
        for param, kind in target.kinds.items():
            for value in EXTREME.get(kind, []):
                tried += 1
                try:
                    target.call(**{**target.valid, param: value})
                except DPKitError:
                    pass
                except Exception as exc:
                    shown = repr(value) if len(repr(value)) < 30 else "10**400"
                    failures.append(
                        f"{target.name}({param}={shown}): {type(exc).__name__}: {str(exc)[:100]}"
                    )
    return tried, failures


def test_extreme_valid_accounting_and_ldp_parameters_never_raise_raw_errors() -> None:
    targets = [t for t in TARGETS if t.name.startswith(_ACCOUNTING_PREFIXES)]
    targets += _accounting_targets()
    tried, failures = _extreme_failures(targets)
    print(f"extreme-parameter fuzz (accounting, ldp): {tried} cases; raw errors: {len(failures)}")
    assert not failures, "\n".join(failures)


def test_deeply_nested_event_json_is_refused_clearly() -> None:
    # Regression: RecursionError from event_from_json on deep nesting.
    inner = '{"type": "pure_dp", "epsilon": 1.0}'
    for depth in (200, 5000, 100_000):
        text = '{"type": "self_composed", "count": 1, "event": ' * depth + inner + "}" * depth
        with pytest.raises(DPKitError):
            ev.event_from_json(text)
        events = '{"type": "composed", "events": [' * depth + inner + "]}" * depth
        with pytest.raises(DPKitError):
            ev.event_from_json(events)
    # moderate nesting is still restored
    text = '{"type": "self_composed", "count": 2, "event": ' * 20 + inner + "}" * 20
    restored = ev.event_from_json(text)
    assert isinstance(restored, ev.SelfComposedEvent)
