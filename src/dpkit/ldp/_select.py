"""The registry of local-DP protocols, and choosing the frequency oracle of smallest variance.

:data:`PROTOCOLS` is the one list of dpkit's local protocols by short name; the command line,
:func:`make_protocol` and :func:`best_protocol` all read it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from dpkit.errors import PrivacyParameterError
from dpkit.ldp._protocols import (
    BLH,
    GRR,
    LOLOHA,
    OLH,
    OUE,
    RAPPOR,
    SUE,
    Duchi,
    FrequencyOracle,
    HadamardResponse,
    Hybrid,
    MeanMechanism,
    Piecewise,
    RandomizedResponse,
    _domain,
    _epsilon,
)
from dpkit.ldp._sketch import CMS, HCMS, OLHSketch, SketchOracle

__all__ = ["FREQUENCY_ORACLES", "PROTOCOLS", "best_protocol", "compare_protocols", "make_protocol"]

#: Every local protocol by short name (read-only): frequency oracles, then mean mechanisms.
PROTOCOLS: Mapping[str, type[FrequencyOracle] | type[MeanMechanism]] = MappingProxyType(
    {
        "rr": RandomizedResponse,
        "grr": GRR,
        "sue": SUE,
        "oue": OUE,
        "olh": OLH,
        "blh": BLH,
        "hr": HadamardResponse,
        "rappor": RAPPOR,
        "loloha": LOLOHA,
        "cms": CMS,
        "hcms": HCMS,
        "olhsketch": OLHSketch,
        "duchi": Duchi,
        "piecewise": Piecewise,
        "hybrid": Hybrid,
    }
)

#: The frequency oracles over a domain of any size (binary randomized response and the
#: sketches for domains too large to list excluded), in the order :func:`best_protocol` breaks
#: ties.
FREQUENCY_ORACLES: tuple[type[FrequencyOracle], ...] = tuple(
    cls
    for cls in PROTOCOLS.values()
    if issubclass(cls, FrequencyOracle)
    and cls is not RandomizedResponse
    and not issubclass(cls, (SketchOracle, RAPPOR, LOLOHA))
)


def make_protocol(
    name: str, *, epsilon: float, domain: int | Sequence[Hashable] | None = None
) -> FrequencyOracle | MeanMechanism:
    """The protocol registered as ``name`` (case-insensitive) in :data:`PROTOCOLS`.

    ``"best"`` picks the frequency oracle of smallest variance (:func:`best_protocol`).
    Frequency oracles need ``domain`` (binary ``"rr"`` ignores it); mean mechanisms take only
    ``epsilon``. An unknown name raises :class:`~dpkit.errors.PrivacyParameterError`.
    """
    key = name.lower() if isinstance(name, str) else None
    if key == "best":
        if domain is None:
            raise PrivacyParameterError("protocol 'best' needs a domain")
        return best_protocol(epsilon=epsilon, domain=domain)
    cls = PROTOCOLS.get(key) if key is not None else None
    if cls is None:
        choices = ", ".join([*PROTOCOLS, "best"])
        raise PrivacyParameterError(f"unknown protocol {name!r}; choose one of {choices}")
    if cls is RandomizedResponse:
        return RandomizedResponse(epsilon=epsilon)
    if issubclass(cls, FrequencyOracle):
        if domain is None:
            raise PrivacyParameterError(f"protocol {name!r} needs a domain")
        return cls(epsilon=epsilon, domain=domain)
    return cls(epsilon=epsilon)


def compare_protocols(
    *, epsilon: float, domain: int | Sequence[Hashable], n: int = 1, frequency: float = 0.0
) -> dict[str, float]:
    """Exact count variance of every frequency oracle at ``(epsilon, d, n, frequency)``."""
    eps, dom = _epsilon(epsilon), _domain(domain)
    out: dict[str, float] = {}
    for cls in FREQUENCY_ORACLES:
        proto: Any = cls(epsilon=eps, domain=dom)
        out[cls.__name__] = proto.variance(n, frequency=frequency)
    return out


def best_protocol(
    *, epsilon: float, domain: int | Sequence[Hashable], frequency: float = 0.0
) -> FrequencyOracle:
    """The frequency oracle with the smallest exact variance for rare items (``frequency``).

    Wang et al. (2017) recommend GRR when ``d < 3 e^eps + 2`` and OUE/OLH otherwise; this helper
    compares the exact variances of every protocol instead (ties go to the smaller report).
    """
    eps, dom = _epsilon(epsilon), _domain(domain)
    best: FrequencyOracle | None = None
    best_var = float("inf")
    for cls in FREQUENCY_ORACLES:
        proto: Any = cls(epsilon=eps, domain=dom)
        var = proto.variance(1, frequency=frequency)
        if var < best_var * (1 - 1e-12):
            best, best_var = proto, var
    if best is None:  # pragma: no cover - every variance is finite
        raise RuntimeError("no protocol")
    return best
