"""Exact privacy check: the largest ratio between report probabilities under two inputs.

A protocol is epsilon-LDP when, for every report ``y`` and inputs ``x, x'``,
``P(y | x) <= e^eps P(y | x')``. For a finite domain this is checked exactly: each protocol's
:meth:`report_distribution` gives the law of the report as :class:`fractions.Fraction`, the ratio
``max_x P(y|x) / min_x P(y|x)`` is computed exactly for every report, and the largest one is
compared with a certified lower bound of ``e^eps`` (so "holds" is a proof, not an estimate). A
report that is possible under one input and impossible under another has an infinite ratio.
``eps`` is the protocol's ``run_epsilon`` when it has one (the epsilon its event states, just
below the ``epsilon`` asked for), else its ``epsilon``.

For the mean mechanisms the inputs are the grid inputs returned by ``exact_inputs()``: every
other input's report law is a convex combination of two of them, and a ratio bound that holds for
every pair of grid inputs holds for their mixtures.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction
from typing import Any

from dpkit.ldp.client import exp_bounds

__all__ = ["LdpCheck", "check_ldp"]


@dataclasses.dataclass(frozen=True)
class LdpCheck:
    """Result of :func:`check_ldp`. ``max_ratio`` is ``None`` when it is infinite."""

    epsilon: float
    max_ratio: Fraction | None
    holds: bool
    worst_report: Any
    laws_sum_to_one: bool
    inputs: int
    reports: int


def check_ldp(protocol: Any, inputs: list[Any] | None = None) -> LdpCheck:
    """Exactly check ``P(y|x) <= e^eps P(y|x')`` for every report and pair of inputs."""
    if inputs is None:
        inputs = (
            list(protocol.exact_inputs())
            if hasattr(protocol, "exact_inputs")
            else list(protocol.labels)
        )
    laws = [protocol.report_distribution(x) for x in inputs]
    sums_ok = all(sum(law.values(), Fraction(0)) == 1 for law in laws)
    reports: set[Any] = set()
    for law in laws:
        reports.update(y for y, pr in law.items() if pr != 0)
    worst: Fraction | None = Fraction(0)
    worst_report: Any = None
    for y in reports:
        probs = [law.get(y, Fraction(0)) for law in laws]
        lo, hi = min(probs), max(probs)
        if lo == 0:
            worst, worst_report = None, y
            break
        ratio = hi / lo
        if worst is not None and ratio > worst:
            worst, worst_report = ratio, y
    # the epsilon the protocol's event states (run_epsilon, below the one asked for) when it
    # has one: the law must hold at what is charged
    eps = getattr(protocol, "run_epsilon", protocol.epsilon)
    bound = exp_bounds(eps)[0]
    holds = worst is not None and worst <= bound and sums_ok
    return LdpCheck(
        epsilon=eps,
        max_ratio=worst,
        holds=holds,
        worst_report=worst_report,
        laws_sum_to_one=sums_ok,
        inputs=len(inputs),
        reports=len(reports),
    )
