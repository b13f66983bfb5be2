"""Bounds one least subnormal apart about zero are refused with a privacy parameter error
before the charge.

Finding (red team of the pure variance from the complementary pair): a mean, variance or
std with bounds ``(-5e-324, -0.0)`` or ``(0.0, 5e-324)`` raised ``ZeroDivisionError`` while
being priced (the half-range and the centre both round to 0, and :func:`pool_split` divided
by their sum), not an error of ``dpkit.errors``; nothing was charged. After the fix: a
``PrivacyParameterError`` saying the half-range rounds to 0, the ledger still empty.
Bounds just wider (``(-5e-324, 5e-324)``) still release.
"""

from __future__ import annotations

import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import PrivacyParameterError


def _session() -> dpa.Session:
    d = pd.DataFrame({"uid": range(5), "x": [0.0] * 5})
    return dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=10.0))


@pytest.mark.parametrize("kind", ["mean", "variance", "std"])
@pytest.mark.parametrize("bounds", [(-5e-324, -0.0), (0.0, 5e-324)])
def test_a_zero_half_range_is_refused_with_a_privacy_error_before_the_charge(
    kind: str, bounds: tuple[float, float]
) -> None:
    s = _session()
    q = (
        s.query()
        .agg(v=getattr(dpa, kind)("x", bounds=bounds))
        .bound(max_partitions=1, max_rows_per_partition=1)
    )
    with pytest.raises(PrivacyParameterError, match="half-range rounds to 0"):
        q.run(epsilon=1.0)
    assert len(s.budget.ledger) == 0


@pytest.mark.parametrize("kind", ["mean", "variance", "std"])
def test_the_least_subnormal_half_range_still_releases(kind: str) -> None:
    s = _session()
    b = (-5e-324, 5e-324)
    out = (
        s.query()
        .agg(v=getattr(dpa, kind)("x", bounds=b))
        .bound(max_partitions=1, max_rows_per_partition=1)
        .run(epsilon=1.0)
    )
    assert out["v_low"][0] <= out["v"][0] <= out["v_high"][0]
    assert len(s.budget.ledger) == 1
