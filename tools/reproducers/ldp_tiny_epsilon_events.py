"""Attack: local protocols at tiny epsilons, event against the exact law.

For each protocol and epsilon, the exact privacy loss of the law that runs (largest ratio of
report probabilities between two inputs, from ``report_distribution``, logarithm with 50 digits)
is compared with what the pure-DP accountant charges for its ``event``. UNDER: the event states
less than the law loses. "over asked": honest, but above the epsilon asked for (only where the
truth probability cannot sit between 1/d and its textbook value on the grid).

Run: PYTHONPATH=src python tools/reproducers/ldp_tiny_epsilon_events.py
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import mpmath

from dpkit import ldp
from dpkit.accounting import PureDpAccountant

EPSILONS = (5e-324, 1e-300, 3e-20, 1e-19, 1e-17, 1e-15)


def protocols(e: float) -> list[Any]:
    return [ldp.GRR(epsilon=e, domain=d) for d in (2, 3, 7)] + [
        ldp.RandomizedResponse(epsilon=e),
        ldp.SUE(epsilon=e, domain=3),
        ldp.OUE(epsilon=e, domain=3),
        ldp.OLH(epsilon=e, domain=5, g=3),
        ldp.OLH(epsilon=e, domain=5, g=5),
        ldp.HadamardResponse(epsilon=e, domain=3),
        ldp.Duchi(epsilon=e),
        ldp.Piecewise(epsilon=e, resolution=8),
        ldp.Hybrid(epsilon=e, resolution=8),
    ]


def exact_loss(proto: Any) -> Any:
    inputs = proto.exact_inputs() if hasattr(proto, "exact_inputs") else list(proto.labels)
    laws = [proto.report_distribution(x) for x in inputs]
    worst = Fraction(1)
    for a in laws:
        for b in laws:
            for r, pa in a.items():
                pb = b.get(r, Fraction(0))
                if pa and not pb:
                    return mpmath.inf
                if pa:
                    worst = max(worst, pa / pb)
    return mpmath.log(mpmath.mpf(worst.numerator) / worst.denominator)


def main() -> None:
    mpmath.mp.dps = 50
    under = total = 0
    for e in EPSILONS:
        for proto in protocols(e):
            total += 1
            loss = exact_loss(proto)
            charged = PureDpAccountant().compose(proto.event).get_epsilon(0.0)
            if charged < loss:
                under += 1
                print(f"UNDER {proto!r}: loss {float(loss):.3g}, charged {charged:.3g}")
            elif charged > e:
                print(f"over asked {proto!r}: loss {float(loss):.3g}, charged {charged:.3g}")
    print(f"under-reports: {under}/{total}")


if __name__ == "__main__":
    main()
