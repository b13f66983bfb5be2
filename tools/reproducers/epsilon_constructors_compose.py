"""Attack: k mechanisms built with ``epsilon = e / k`` against ``Budget(epsilon=e)``, for every
constructor that takes an epsilon. ``Laplace.from_epsilon`` calibrates below
``e (1 - 2**-40)`` so the rounding of ``e / k`` is covered; a mechanism that charged its epsilon
as is made ten ``ExponentialMechanism(epsilon=0.1)`` cost ``10 * fl(0.1) > 1`` (the tenth was
refused at 1.0000000000000002).

Prints, per constructor, how many of 43 (e, k) cases (k up to 50) are refused, how many times
one mechanism alone is refused by a budget of its own epsilon, and how many times k + 1 of them
are accepted (an overspend).

Run: PYTHONPATH=src python tools/reproducers/epsilon_constructors_compose.py
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import dpkit.ldp as ldp
import dpkit.mechanisms as m
from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError

PURE: list[tuple[str, Callable[[float], Any], str]] = [
    (
        "Laplace.from_epsilon",
        lambda e: m.Laplace.from_epsilon(epsilon=e, sensitivity=1.0),
        "add_remove",
    ),
    (
        "DiscreteLaplace.from_epsilon",
        lambda e: m.DiscreteLaplace.from_epsilon(epsilon=e, sensitivity=1),
        "add_remove",
    ),
    (
        "ExponentialMechanism",
        lambda e: m.ExponentialMechanism(epsilon=e, sensitivity=1.0),
        "add_remove",
    ),
    ("ReportNoisyMax", lambda e: m.ReportNoisyMax(epsilon=e, sensitivity=1.0), "add_remove"),
    (
        "BinnedQuantile",
        lambda e: m.BinnedQuantile.from_epsilon(
            epsilon=e, quantiles=[0.1, 0.5, 0.9], edges=[0, 1, 2]
        ),
        "add_remove",
    ),
    (
        "RandomizedResponse.from_epsilon",
        lambda e: m.RandomizedResponse.from_epsilon(epsilon=e),
        "replace",
    ),
    ("ldp.RandomizedResponse", lambda e: ldp.RandomizedResponse(epsilon=e), "replace"),
    ("ldp.GRR", lambda e: ldp.GRR(epsilon=e, domain=4), "replace"),
    ("ldp.SUE", lambda e: ldp.SUE(epsilon=e, domain=4), "add_remove"),
    ("ldp.OUE", lambda e: ldp.OUE(epsilon=e, domain=4), "add_remove"),
    ("ldp.OLH", lambda e: ldp.OLH(epsilon=e, domain=4), "add_remove"),
    ("ldp.BLH", lambda e: ldp.BLH(epsilon=e, domain=4), "add_remove"),
    ("ldp.HadamardResponse", lambda e: ldp.HadamardResponse(epsilon=e, domain=4), "add_remove"),
    ("ldp.Duchi", lambda e: ldp.Duchi(epsilon=e), "add_remove"),
    ("ldp.Piecewise", lambda e: ldp.Piecewise(epsilon=e, resolution=16), "add_remove"),
    ("ldp.Hybrid", lambda e: ldp.Hybrid(epsilon=e, resolution=16), "add_remove"),
]
APPROX: list[tuple[str, Callable[[float, float], Any]]] = [
    ("PartitionSelection", lambda e, d: m.PartitionSelection(epsilon=e, delta=d)),
    (
        "GaussianPartitionSelection.from_epsilon_delta",
        lambda e, d: m.GaussianPartitionSelection.from_epsilon_delta(epsilon=e, delta=d),
    ),
]


def fits(budget: Budget, mech: Any, k: int) -> bool:
    try:
        for _ in range(k):
            budget.charge(mech)
    except BudgetExceededError:
        return False
    return True


def main() -> None:
    rng = random.Random(1)
    cases = [(1.0, 10), (1.0, 3), (0.3, 7)] + [
        (rng.uniform(0.05, 5.0), rng.randint(1, 50)) for _ in range(40)
    ]
    for name, build, nb in PURE:
        bad = sum(not fits(Budget(epsilon=e, neighbouring=nb), build(e / k), k) for e, k in cases)
        one = sum(not fits(Budget(epsilon=e, neighbouring=nb), build(e), 1) for e, _ in cases)
        extra = sum(fits(Budget(epsilon=e, neighbouring=nb), build(e / k), k + 1) for e, k in cases)
        print(
            f"{name:32s} refused {bad}/{len(cases)}; one at its own epsilon refused "
            f"{one}/{len(cases)}; k + 1 accepted {extra}/{len(cases)}"
        )
    for name, build2 in APPROX:
        bad = sum(
            not fits(Budget(epsilon=e, delta=1e-6), build2(e / k, 1e-6 / k), k) for e, k in cases
        )
        print(f"{name:46s} refused {bad}/{len(cases)}")


if __name__ == "__main__":
    main()
