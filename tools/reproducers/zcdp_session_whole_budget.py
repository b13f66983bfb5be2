"""Attack: a zCDP session cannot spend its own budget. A query at the session budget's own
``(epsilon, delta)`` was refused ("(0.9995, 1e-06) left"), and random queries were refused by a
budget 1% larger than the query: the query converted ``(epsilon, delta)`` to rho with all of
delta and its own slack, the budget with half of delta (the rest kept for partition selection)
and its whole slack allowance.

Prints, over 40 random queries (public or private keys, epsilon in [0.05, 5], delta in
[1e-10, 1e-4]): how many are refused by a budget equal to the query, by one 1% larger, and how
many budgets of (e, d) refuse k queries of (e/k, d/k).

Run: PYTHONPATH=src python tools/reproducers/zcdp_session_whole_budget.py
"""

from __future__ import annotations

import random
import warnings

import numpy as np
import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError
from dpkit.noise import RandomSource

TABLE = pd.DataFrame(
    {"uid": np.arange(600), "g": np.arange(600) % 3, "x": np.linspace(0.0, 10.0, 600)}
)


def run(budget: Budget, eps: float, delta: float, private_keys: bool, k: int = 1) -> bool:
    """Whether ``k`` queries at ``(eps / k, delta / k)`` all fit ``budget``."""
    s = dpa.Session(
        TABLE,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=1, insecure=True),
    )
    for _ in range(k):
        q = s.query().group_by("g", keys=None if private_keys else [0, 1, 2])
        q = q.bound(max_partitions=1, max_rows_per_partition=1)
        try:
            q.agg(n=dpa.count(), x=dpa.mean("x", bounds=(0.0, 10.0))).run(
                epsilon=eps / k, delta=delta / k
            )
        except BudgetExceededError:
            return False
    return True


def main() -> None:
    warnings.simplefilter("ignore")
    rng = random.Random(20)
    cases = [(1.0, 1e-6, True)] + [
        (rng.uniform(0.05, 5.0), 10 ** rng.uniform(-10, -4), rng.random() < 0.5) for _ in range(39)
    ]
    equal = sum(not run(Budget(epsilon=e, delta=d, method="zcdp"), e, d, p) for e, d, p in cases)
    larger = sum(
        not run(Budget(epsilon=1.01 * e, delta=1.01 * d, method="zcdp"), e, d, p)
        for e, d, p in cases
    )
    split = sum(
        not run(Budget(epsilon=e, delta=d, method="zcdp"), e, d, p, k=rng.randint(2, 8))
        for e, d, p in cases[:10]
    )
    print(f"refused by a budget equal to the query: {equal}/40")
    print(f"refused by a budget 1% larger:          {larger}/40")
    print(f"k queries of 1/k refused:               {split}/10")


if __name__ == "__main__":
    main()
