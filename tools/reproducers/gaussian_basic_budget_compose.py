"""k Gaussian mechanisms of (epsilon/k, delta/k) against a basic Budget(epsilon, delta).

Prints how many (epsilon, delta, k) cases of a grid refuse one of the k charges (they should
all fit) and how many accept a (k+1)-th (none should: no overspend). Before the fix a basic
budget read each Gaussian at all the delta it had left, so the first charge took all of it.
Run: ``PYTHONPATH=src python tools/reproducers/gaussian_basic_budget_compose.py``.
"""

from __future__ import annotations

from dpkit import Gaussian
from dpkit.accounting import Budget


def main() -> None:
    cases = [
        (e, d, k)
        for e in (0.1, 0.5, 1.0, 3.0, 10.0)
        for d in (1e-9, 1e-6, 1e-3)
        for k in (1, 2, 3, 7, 10, 33, 50)
    ]
    refused = extra = 0
    for eps, delta, k in cases:
        budget = Budget(epsilon=eps, delta=delta)
        g = Gaussian.from_epsilon_delta(epsilon=eps / k, delta=delta / k, sensitivity=1.0)
        fits = True
        for _ in range(k):
            if not budget.can_charge(g):
                fits = False
                break
            budget.charge(g)
        refused += not fits
        extra += fits and budget.can_charge(g)
    print(
        f"{len(cases)} cases: {refused} refused one of their k charges, {extra} accepted a (k+1)-th"
    )


if __name__ == "__main__":
    main()
