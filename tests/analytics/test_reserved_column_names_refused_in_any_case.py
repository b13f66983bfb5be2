"""Column names that spell an internal name of the compiled statement in another case are
refused before the charge.

Finding (red team, shared ranking review). Internal names start with ``__dpk_`` and a column
starting with it was refused, but only in that case, while DuckDB resolves identifiers in any
case. A measured column named ``__DPK_RN`` became a second ``__dpk_rn`` of the ranked rows, and
the rows' limit ``__dpk_rn - __dpk_gr < R`` read the person's own values: with ``.bound(1, 1)`` a
person of 50 rows valued -5 moved a group's exact count by 50 (sensitivity 1), on both the
shared ranking and the separate statements. After the fix every such name (any case, as a
column read, a public join's exposed name, a bucket or a derived column) is a ``PlanError``
before anything is charged. Reproducer:
``tools/reproducers/reserved_names_in_any_case.py``. Exact tests.
"""

from __future__ import annotations

import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines._compiler import PlanError
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.errors import DPKitError


def _session(unit: str, key: str, value: str) -> dpa.Session:
    d = pd.DataFrame({unit: [f"p{i}" for i in range(40)], key: ["a"] * 40, value: [1.0] * 40})
    return dpa.Session(
        d, privacy_unit=unit, budget=Budget(epsilon=10.0), engine=DuckDBEngine(threads=1)
    )


@pytest.mark.parametrize(
    ("unit", "key", "value"),
    [
        ("uid", "g", "__DPK_RN"),
        ("uid", "g", "__Dpk_G"),
        ("uid", "__DPK_K0", "x"),
        ("__dpK_u", "g", "x"),
    ],
)
@pytest.mark.parametrize("planned", [True, False])
def test_a_column_named_like_an_internal_one_in_any_case_is_refused_before_the_charge(
    unit: str, key: str, value: str, planned: bool
) -> None:
    s = _session(unit, key, value)
    q = s.query() if planned else s.query().bound(max_partitions=1, max_rows_per_partition=1)
    q = q.group_by(key, keys=["a"]).agg(
        n=dpa.count(), m=dpa.mean(value, bounds="auto" if planned else (-10.0, 10.0))
    )
    with pytest.raises((PlanError, DPKitError), match="reserved"):
        q.run(epsilon=1.0)
    assert s.spent[0] == 0.0


@pytest.mark.parametrize("name", ["__DPK_RN", "__Dpk_x"])
def test_derived_bucket_and_public_names_in_any_case_are_refused(name: str) -> None:
    s = _session("uid", "g", "x")
    public = pd.DataFrame({"g": ["a"], "r": ["N"]})
    queries = [
        s.query().derive(name, "x * 2", bounds=(0.0, 4.0)),
        s.query().bucket(name, [("x < 1", "low")], default="high"),
        s.query().join_public(public, on="g", columns={"r": name}),
    ]
    for q in queries:
        with pytest.raises((PlanError, DPKitError)):
            q.group_by("g", keys=["a"]).agg(n=dpa.count()).run(epsilon=1.0)
    assert s.spent[0] == 0.0


def test_companion_an_ordinary_column_name_still_runs() -> None:
    s = _session("uid", "g", "dpk_rn")
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
    q.group_by("g", keys=["a"]).agg(n=dpa.count(), m=dpa.mean("dpk_rn", bounds=(0.0, 2.0))).run(
        epsilon=1.0
    )
    assert s.spent[0] == pytest.approx(1.0)
