"""At tiny epsilons the event still covers the law that runs.

Below about ``1e-59`` the certified lower bound of ``e^eps`` fell under 1, so the "likely"
probability became the less likely one: every protocol ran a law with a loss of about
``2e-19`` while its event stated ``eps`` (GRR on two values and RandomizedResponse: 0.0); OLH
with ``g >= 3`` did the same up to ``eps`` near ``1e-19`` (22 under-reports in the cases below).
Now the bound is at least 1 and the truth probability of GRR, RandomizedResponse and OLH is at
least uniform; where that raises it, the event charges the law's own (tiny) loss.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import mpmath
import pytest

from dpkit import ldp
from dpkit.accounting import PureDpAccountant

BUILDERS: dict[str, Callable[[float], Any]] = {
    "RandomizedResponse": lambda e: ldp.RandomizedResponse(epsilon=e),
    "GRR(d=2)": lambda e: ldp.GRR(epsilon=e, domain=2),
    "GRR(d=3)": lambda e: ldp.GRR(epsilon=e, domain=3),
    "GRR(d=7)": lambda e: ldp.GRR(epsilon=e, domain=7),
    "SUE": lambda e: ldp.SUE(epsilon=e, domain=3),
    "OUE": lambda e: ldp.OUE(epsilon=e, domain=3),
    "OLH(g=3)": lambda e: ldp.OLH(epsilon=e, domain=5, g=3),
    "OLH(g=5)": lambda e: ldp.OLH(epsilon=e, domain=5, g=5),
    "HadamardResponse": lambda e: ldp.HadamardResponse(epsilon=e, domain=3),
    "Duchi": lambda e: ldp.Duchi(epsilon=e),
    "Piecewise": lambda e: ldp.Piecewise(epsilon=e, resolution=8),
    "Hybrid": lambda e: ldp.Hybrid(epsilon=e, resolution=8),
}


def _exact_loss(proto: Any) -> Any:
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
    with mpmath.workdps(50):
        return mpmath.log(mpmath.mpf(worst.numerator) / worst.denominator)


@pytest.mark.parametrize("name", sorted(BUILDERS))
@pytest.mark.parametrize("eps", [5e-324, 1e-300, 3e-20, 1e-19, 1e-17, 1e-15])
def test_event_covers_the_law_at_tiny_epsilons(name: str, eps: float) -> None:
    proto = BUILDERS[name](eps)
    charged = PureDpAccountant().compose(proto.event).get_epsilon(0.0)
    assert charged >= _exact_loss(proto)
