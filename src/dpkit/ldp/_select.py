"""Choosing the frequency oracle with the smallest variance for given (epsilon, d)."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from dpkit.ldp._protocols import (
    BLH,
    GRR,
    OLH,
    OUE,
    SUE,
    FrequencyOracle,
    HadamardResponse,
    _domain,
    _epsilon,
)

__all__ = ["FREQUENCY_ORACLES", "best_protocol", "compare_protocols"]

FREQUENCY_ORACLES: tuple[type[FrequencyOracle], ...] = (
    GRR, SUE, OUE, OLH, BLH, HadamardResponse,
)


def compare_protocols(*, epsilon: float, domain: int | Sequence[Hashable], n: int = 1,
                      frequency: float = 0.0) -> dict[str, float]:
    """Exact count variance of every frequency oracle at ``(epsilon, d, n, frequency)``."""
    eps, dom = _epsilon(epsilon), _domain(domain)
    out: dict[str, float] = {}
    for cls in FREQUENCY_ORACLES:
        proto: Any = cls(epsilon=eps, domain=dom)
        out[cls.__name__] = proto.variance(n, frequency=frequency)
    return out


def best_protocol(*, epsilon: float, domain: int | Sequence[Hashable],
                  frequency: float = 0.0) -> FrequencyOracle:
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
