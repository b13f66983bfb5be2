"""Bounds too wide for the exact samplers are refused before the charge with the fix named."""

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import PrivacyParameterError


def _session(budget: Budget) -> dpa.Session:
    df = pd.DataFrame({"pid": range(100), "x": np.linspace(0.0, 1e8, 100)})
    return dpa.Session(df, privacy_unit="pid", budget=budget)


@pytest.mark.parametrize(
    ("budget", "run", "fix"),
    [
        (Budget(epsilon=10.0), {"epsilon": 1.0}, "raise epsilon or narrow the bounds"),
        (
            Budget(epsilon=10.0, delta=1e-3, method="zcdp"),
            {"epsilon": 1.0, "delta": 1e-6},
            "raise the budget or narrow the bounds",
        ),
    ],
)
def test_a_variance_over_too_wide_bounds_is_refused_with_the_fix(
    budget: Budget, run: dict[str, float], fix: str
) -> None:
    s = _session(budget)
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
    before = repr(s.spent)
    with pytest.raises(PrivacyParameterError, match=fix):
        q.agg(v=dpa.variance("x", bounds=(0.0, 1e12))).run(**run)
    assert repr(s.spent) == before  # refused before the charge
    out = q.agg(v=dpa.variance("x", bounds=(0.0, 1e6))).run(**run)
    assert len(out) == 1
    assert repr(s.spent) != before  # the companion: a query that runs is charged
