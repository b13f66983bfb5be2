"""Events: frozen, validated, and serialised through an allow-list only."""

from __future__ import annotations

import dataclasses
import json
import math

import mpmath
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpkit.errors import PrivacyParameterError, SerializationError
from dpkit.events import (
    EVENT_TYPES,
    ApproxDpEvent,
    ApproxZCdpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    GaussianSparseVectorEvent,
    LaplaceEvent,
    Neighbouring,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
    ZCdpEvent,
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
)

EXAMPLES: list[DpEvent] = [
    NoOpEvent(),
    NonPrivateEvent(),
    PureDpEvent(epsilon=0.5),
    ApproxDpEvent(epsilon=1.0, delta=1e-6),
    LaplaceEvent(noise_multiplier=2.0, neighbouring=Neighbouring.REPLACE, pmf_slack=1e-9),
    GaussianEvent(noise_multiplier=1.1),
    DiscreteLaplaceEvent(scale=3.0, sensitivity=2),
    DiscreteGaussianEvent(sigma=4.0, sensitivity=1),
    ExponentialMechanismEvent(epsilon=0.3),
    ReportNoisyMaxEvent(epsilon=0.3, noise="exponential"),
    RandomizedResponseEvent(p_truth=0.75),
    ComposedEvent(events=(PureDpEvent(epsilon=1.0), GaussianEvent(noise_multiplier=2.0))),
    PoissonSampledEvent(sampling_rate=0.5, event=LaplaceEvent(noise_multiplier=1.0)),
    SelfComposedEvent(
        event=PoissonSampledEvent(sampling_rate=0.01, event=GaussianEvent(noise_multiplier=1.1)),
        count=1000,
    ),
    ZCdpEvent(rho=0.125),
    SampledWithoutReplacementEvent(
        sample_size=4,
        dataset_size=10,
        event=GaussianEvent(noise_multiplier=0.5, neighbouring="replace"),
    ),
    ApproxZCdpEvent(rho=0.125, delta=1e-7, pmf_slack=2.0**-23),
    GaussianSparseVectorEvent(
        threshold_multiplier=2.0, query_multiplier=3.0, max_queries=365, max_positives=2
    ),
]


def test_every_event_type_has_an_example() -> None:
    assert {type(e) for e in EXAMPLES} == set(EVENT_TYPES.values())


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: type(e).__name__)
def test_round_trip_json(event: DpEvent) -> None:
    assert event_from_json(event_to_json(event)) == event
    assert event_from_dict(json.loads(json.dumps(event_to_dict(event)))) == event


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: type(e).__name__)
def test_frozen(event: DpEvent) -> None:
    fields = dataclasses.fields(event)
    if fields:
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(event, fields[0].name, 1)


def test_allow_list_refuses_unknown_types_and_module_paths() -> None:
    for data in (
        {"type": "os.system"},
        {"type": "dpkit.noise.RandomSource"},
        {"no": "type"},
        [1, 2],
        "laplace",
        {"type": "laplace", "noise_multiplier": 1.0, "extra": 1},
        {"type": "laplace", "noise_multiplier": -1.0},
        {"type": "composed", "events": {"type": "noop"}},
    ):
        with pytest.raises(SerializationError):
            event_from_dict(data)
    with pytest.raises(SerializationError):
        event_from_json("{not json")


def test_validation() -> None:
    for bad in (math.nan, -1.0, 0.0, math.inf, True, "1"):
        with pytest.raises(PrivacyParameterError):
            LaplaceEvent(noise_multiplier=bad)
    with pytest.raises(PrivacyParameterError):
        RandomizedResponseEvent(p_truth=0.4)
    with pytest.raises(PrivacyParameterError):
        ReportNoisyMaxEvent(epsilon=1.0, noise="uniform")
    with pytest.raises(PrivacyParameterError):
        GaussianEvent(noise_multiplier=1.0, neighbouring="swap")  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        SelfComposedEvent(event=PureDpEvent(epsilon=1.0), count=-1)
    with pytest.raises(PrivacyParameterError):
        ComposedEvent(events=(1.0,))  # type: ignore[arg-type]


@given(st.floats(min_value=0.5, max_value=1.0, exclude_max=True), st.integers(2, 64))
def test_randomized_response_epsilon_is_a_tight_upper_bound(p: float, k: int) -> None:
    p = max(p, 1.0 / k)
    mpmath.mp.dps = 60
    exact = mpmath.log(mpmath.mpf(p) * (k - 1) / (1 - mpmath.mpf(p)))
    eps = RandomizedResponseEvent(p_truth=p, categories=k).epsilon
    assert eps >= exact
    assert eps <= exact * (1 + mpmath.mpf(2) ** -44) + mpmath.mpf(2) ** -1070


def test_randomized_response_epsilon() -> None:
    assert RandomizedResponseEvent(p_truth=0.75).epsilon >= math.log(3.0)
    assert RandomizedResponseEvent(p_truth=0.75).epsilon - math.log(3.0) < 1e-13
    k = RandomizedResponseEvent(p_truth=0.5, categories=4)
    assert k.epsilon >= math.log(0.5 * 3 / 0.5)
    assert RandomizedResponseEvent(p_truth=1.0).epsilon == math.inf
