"""Attack 4: ``copy.copy(budget)`` gives a second budget that spends the same privacy again.

The fork handler of budget.py exists because a copied budget lets "parent and child each spend
the whole remaining budget". ``copy.copy`` (and ``copy.replace``/``__reduce_ex__``-based
helpers that stop at a shallow copy) does the same inside one process: the copy shares the
lock and the immutable state snapshot, each object then swaps in its own state, and each accepts
charges up to the full budget. It was also missing from the fork registry of live budgets.

Certificate: a filter ``Budget(epsilon=1.001)`` and its shallow copy each accept one charge of a
randomized response at epsilon = 1 (``RandomizedResponse.from_epsilon``); the two releases
are made on the same bit. ``dpkit.audit.audit`` of the pair of releases against the claim
"pure epsilon = 1" (the budget) at confidence 1 - 1e-6.
Also shows ``ZCdpFilter.from_json(f.to_json())`` raising TypeError (not SerializationError).
Run: PYTHONPATH=src python tools/reproducers/budget_copy_double_spend.py
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np

from dpkit.accounting.budget import Budget
from dpkit.accounting.filters import ZCdpFilter
from dpkit.audit import Claim, audit
from dpkit.events import ZCdpEvent
from dpkit.mechanisms import RandomizedResponse


def main() -> None:
    rr = RandomizedResponse.from_epsilon(epsilon=1.0)

    def two_releases(x: int, size: int) -> Any:
        budget = Budget(epsilon=1.001)  # RR charges 1 + 9e-13
        twin = copy.copy(budget)
        budget.charge(rr)  # accepted: spent 1.0 of 1.0
        twin.charge(rr)  # accepted too: the twin starts from the same snapshot
        bits = np.full(size, bool(x))
        a = np.asarray(rr.release(bits), dtype=np.int64)
        b = np.asarray(rr.release(bits), dtype=np.int64)
        return np.stack([a, b], axis=1)

    res = audit(
        two_releases,
        pair=(0, 1),
        samples=40_000,
        vectorized=True,
        confidence=1 - 1e-6,
        claim=Claim.pure(epsilon=1.001),
    )
    print(
        f"copy.copy double spend: epsilon >= {res.epsilon_lower_bound:.3f} "
        f"(budget 1.001, confidence 1-1e-6), violated={res.violated}"
    )

    f = ZCdpFilter(rho=0.5)
    f.charge(ZCdpEvent(rho=0.1))
    try:
        ZCdpFilter.from_json(f.to_json())
    except Exception as exc:
        print(f"ZCdpFilter.from_json: {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    main()
