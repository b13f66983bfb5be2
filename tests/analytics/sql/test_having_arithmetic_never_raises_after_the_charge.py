"""A HAVING condition is evaluated on the released rows, after the charge: its arithmetic must
give a missing value (never an exception) on a division by zero, and a number too large to
compare must be refused before anything is spent.

Finding (the SQL fuzz test, near-miss corpus ``plans_having_range`` with ``1/0``): a division
by zero between integers raised ``ZeroDivisionError`` after the charge (``n / (n - 5)`` would
have raised only when the noisy count was 5). The exception depended on released values only,
so it leaked nothing, but the analyst paid and got no answer. Now ``x / 0`` is NULL, as in SQL.
No reproducer: nothing is released beyond the claim.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from _sql_corpus import METADATA_YAML, people, public_tables

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError

META = yaml.safe_load(METADATA_YAML)


def _session() -> Any:
    return dpa.Session(people(), privacy_unit="user_id", budget=Budget(epsilon=5.0))


def _run(s: Any, having: str) -> Any:
    return s.sql(
        f"SELECT plan, COUNT(*) AS n FROM people GROUP BY plan HAVING {having}",
        epsilon=0.5,
        metadata=META,
        public_tables=public_tables(),
    )


@pytest.mark.parametrize(
    "having",
    ["n BETWEEN 0 AND 1 / 0", "n / 0 > 1", "n / (n - n) > 1", "1 / 0 IS NULL", "n * 0 / 0 = 0"],
)
def test_division_by_zero_in_having_is_a_missing_value(having: str) -> None:
    s = _session()
    out = _run(s, having)  # used to raise ZeroDivisionError after the charge
    assert s.budget.spent_epsilon_exact > 0
    if having == "1 / 0 IS NULL":
        assert len(out) > 0  # x / 0 is NULL, as in SQL
    else:
        assert len(out) == 0  # a comparison with NULL is not true


def test_division_by_a_nonzero_number_still_filters() -> None:
    s = _session()
    everything = _run(s, "n / 2 > -1")
    assert len(everything) > 0


def test_a_number_beyond_float_range_is_refused_before_the_charge() -> None:
    s = _session()
    with pytest.raises(DPKitError, match="too large a number"):
        _run(s, "n > 1" + "0" * 400)
    assert s.budget.spent_epsilon_exact == 0
