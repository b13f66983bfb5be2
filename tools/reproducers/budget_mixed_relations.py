"""Attack 4: a Budget adds epsilons of events stated under different neighbouring relations.

Each event names its relation (``Laplace`` defaults to add/remove, ``RandomizedResponse`` is
replace-one), but ``Budget`` sums them into one total that holds under neither relation: an
add/remove epsilon-DP release is only 2 epsilon-DP under replace-one, and a replace-one release
need not be DP at all under add/remove (randomized response on every person's bit reveals the
number of people).

Certificate: ``Budget(epsilon=1.001)`` accepts ``Laplace.from_epsilon(epsilon=0.5,
sensitivity=1)`` (a sum of values in [-1, 1], add/remove sensitivity 1) and
``RandomizedResponse.from_epsilon(epsilon=0.5)``; both releases are made on one person's
(value, bit), replaced from (-1, 0) to (+1, 1) (replace-one neighbours, the relation the second
event names). The output is post-processed to (sum release: < -1 / between / > 1, bit) and
audited at confidence 1 - 1e-6 against the budget's claim "pure epsilon = 1.001". True epsilon
under replace-one: 2 * 0.5 + 0.5 = 1.5.

After the fix: the add/remove budget refuses the replace-one event; a replace-one budget charges
the Laplace release by group privacy (1.0) and refuses the randomized response at 1.001; a
replace-one budget of 1.5 accepts both and the audit finds no violation of the charged 1.5.
Run: PYTHONPATH=src python tools/reproducers/budget_mixed_relations.py
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dpkit.accounting.budget import Budget
from dpkit.audit import Claim, audit
from dpkit.errors import BudgetExceededError, UnsupportedEventError
from dpkit.mechanisms import Laplace, RandomizedResponse


def _refusal(budget: Budget, mech: Any) -> str:
    try:
        budget.charge(mech)
    except (BudgetExceededError, UnsupportedEventError) as exc:
        return f"refused ({type(exc).__name__})"
    return "ACCEPTED"


def main() -> None:
    lap = Laplace.from_epsilon(epsilon=0.5, sensitivity=1.0)
    rr = RandomizedResponse.from_epsilon(epsilon=0.5)
    print(f"relations: {lap.event.neighbouring.value} + {rr.event.neighbouring.value}")

    add_remove = Budget(epsilon=1.001)  # the attacked budget (add/remove is the default)
    add_remove.charge(lap)
    print(
        f"Budget(epsilon=1.001): Laplace accepted, randomized response {_refusal(add_remove, rr)}"
    )

    replace = Budget(epsilon=1.001, neighbouring="replace")
    print(
        f"Budget(epsilon=1.001, neighbouring='replace'): Laplace costs "
        f"{replace.cost_of(lap).epsilon} (group privacy)"
    )
    replace.charge(lap)
    print(f"  then randomized response {_refusal(replace, rr)}")

    enough = Budget(epsilon=1.5, neighbouring="replace")
    enough.charge(lap)
    enough.charge(rr)
    claimed = enough.spent[0]
    print(f"Budget(epsilon=1.5, neighbouring='replace') accepts both, spent {enough.spent}")

    def release(x: int, size: int) -> Any:
        value, bit = (1.0, True) if x else (-1.0, False)
        s = lap.release(np.full(size, value))
        b = np.asarray(rr.release(np.full(size, bit)), dtype=np.int64)
        band = np.where(s > 1.0, 2, np.where(s < -1.0, 0, 1))
        return band * 2 + b

    res = audit(
        release,
        pair=(0, 1),
        samples=200_000,
        vectorized=True,
        confidence=1 - 1e-6,
        claim=Claim.pure(epsilon=claimed),
    )
    print(
        f"mixed relations: epsilon >= {res.epsilon_lower_bound:.3f} under replace-one "
        f"(charged {claimed}, confidence 1-1e-6), violated={res.violated}"
    )


if __name__ == "__main__":
    main()
