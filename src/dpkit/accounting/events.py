"""The event vocabulary, under its former address.

The events live in :mod:`dpkit.events`, at the bottom of the package's layers (mechanisms and
local DP describe their releases without importing accounting). This module re-exports the very
same objects (``dpkit.accounting.events.LaplaceEvent is dpkit.events.LaplaceEvent``), so code and
stored references that name ``dpkit.accounting.events`` keep working.
"""

from __future__ import annotations

from dpkit.events import (
    EVENT_TYPES,
    MAX_EVENT_DEPTH,
    ApproxDpEvent,
    ApproxZCdpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
    ZCdpEvent,
    as_neighbouring,
    event_from_dict,
    event_from_json,
    event_to_dict,
    event_to_json,
    randomized_response_epsilon,
)

__all__ = [
    "EVENT_TYPES",
    "MAX_EVENT_DEPTH",
    "ApproxDpEvent",
    "ApproxZCdpEvent",
    "ComposedEvent",
    "DiscreteGaussianEvent",
    "DiscreteLaplaceEvent",
    "DpEvent",
    "ExponentialMechanismEvent",
    "GaussianEvent",
    "LaplaceEvent",
    "Neighbouring",
    "NoOpEvent",
    "NonPrivateEvent",
    "PoissonSampledEvent",
    "PureDpEvent",
    "RandomizedResponseEvent",
    "ReportNoisyMaxEvent",
    "SelfComposedEvent",
    "ZCdpEvent",
    "as_neighbouring",
    "event_from_dict",
    "event_from_json",
    "event_to_dict",
    "event_to_json",
    "randomized_response_epsilon",
]
