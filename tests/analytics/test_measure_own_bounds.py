"""A measure with its own contribution bounds (``Measure.keep``) reads exactly the rows a plan
bounded at those bounds keeps under the same salt: the planner's per-statistic bounds rest on
it (each statistic's sensitivity comes from its own bounds, see
:mod:`dpkit.analytics._planner`)."""

from __future__ import annotations

import dataclasses

import pytest
from _engine_reference import MEASURES, as_dict, people, plan_for

from dpkit.analytics._plan import Measure, Source
from dpkit.analytics.engines import DuckDBEngine
from dpkit.errors import PlanError

TABLE = Source(kind="table", location="t")


@pytest.mark.parametrize("hash_kind", ["native", "md5"])
@pytest.mark.parametrize("keep", [(1, 1), (2, 1), (1, 3), (3, 2)])
def test_own_bounds_equal_a_plan_bounded_there_under_the_same_salt(
    hash_kind: str, keep: tuple[int, int]
) -> None:
    df = people(400, seed=5)
    engine = DuckDBEngine(threads=1, hash=hash_kind)
    engine.register("t", df)
    outer = dict(max_partitions=3, max_rows=3, salt=77)
    own = tuple(dataclasses.replace(m, keep=keep) for m in MEASURES)
    mixed = (*MEASURES, *(dataclasses.replace(m, name=m.name + "@") for m in own))
    got = as_dict(engine.execute(plan_for(TABLE, measures=mixed, **outer)))
    alone = as_dict(
        engine.execute(
            plan_for(TABLE, measures=MEASURES, max_partitions=keep[0], max_rows=keep[1], salt=77)
        )
    )
    full = as_dict(engine.execute(plan_for(TABLE, measures=MEASURES, **outer)))
    for key, row in got.items():
        for m in MEASURES:
            assert row[m.name] == full[key][m.name]  # the plan's own measures: unchanged
            if key in alone:
                assert row[m.name + "@"] == alone[key][m.name]
            else:  # no row of the group within the tighter bounds: the measure is empty
                assert (
                    not any(row[m.name + "@"])
                    if isinstance(row[m.name + "@"], tuple)
                    else (row[m.name + "@"] == 0)
                )
    assert set(alone) <= set(got)


def test_fixed_bounds_statement_is_unchanged_by_the_option() -> None:
    from dpkit.analytics.engines._compiler import compile_plan

    schema = {"uid": "BIGINT", "region": "VARCHAR", "x": "DOUBLE", "age": "INTEGER"}
    plan = plan_for(TABLE)
    sql = compile_plan(plan, schema).sql
    assert "__dpk_rr" not in sql
    own = plan_for(TABLE, measures=(dataclasses.replace(MEASURES[0], keep=(1, 1)),))
    assert "__dpk_rr" in compile_plan(own, schema).sql


def test_own_bounds_beyond_the_plan_are_refused() -> None:
    from dpkit.analytics.engines._compiler import compile_plan

    schema = {"uid": "BIGINT", "region": "VARCHAR", "x": "DOUBLE"}
    plan = plan_for(TABLE, measures=(Measure(name="n", kind="rows", keep=(3, 1)),))
    with pytest.raises((PlanError, ValueError), match="max_partitions"):
        compile_plan(plan, schema)
