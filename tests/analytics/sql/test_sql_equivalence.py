"""The same SQL gives the same plan, pricing and pre-noise aggregates as the builder query
written by hand; and what public joins and buckets do inside the engine."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from _sql_corpus import METADATA_YAML, people, regions, regions_dup

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Plan
from dpkit.analytics.sqlquery import SqlError
from dpkit.errors import DPKitError
from dpkit.noise import RandomSource

META = yaml.safe_load(METADATA_YAML)
INCOME = (0.0, 200000.0)
REGION_KEYS = {"region": ["north", "south", "east", "west"]}


def _session(seed: int, delta: bool = False) -> Any:
    budget = Budget(epsilon=10.0, delta=1e-3, method="basic") if delta else Budget(epsilon=10.0)
    return dpa.Session(
        people(),
        privacy_unit="user_id",
        budget=budget,
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )


def _unsalted(plan: Plan) -> Plan:
    return dataclasses.replace(
        plan,
        bound=dataclasses.replace(plan.bound, salt=0),
        source=dataclasses.replace(plan.source, location="t"),
        joins=tuple(
            dataclasses.replace(j, source=dataclasses.replace(j.source, location="p"))
            for j in plan.joins
        ),
    )


def _hand(s: Any) -> dict[str, Any]:
    """The builder queries an analyst would write for the SQL of CASES."""
    q = s.query()
    return {
        "grouped_mean": q.group_by("region", keys=REGION_KEYS)
        .bound(max_partitions=2, max_rows_per_partition=3)
        .agg(n=dpa.count(), avg_income=dpa.mean("income", bounds=INCOME)),
        "filtered_quantiles": q.where("age >= 18")
        .bound(max_partitions=2, max_rows_per_partition=3)
        .agg(users=dpa.count_distinct(), q=dpa.quantile("income", [0.25, 0.75], bounds=INCOME)),
        "bucket_histogram": q.bucket("bucket_0", [("age < 30", "young")], "older")
        .group_by("bucket_0", keys={"bucket_0": ["young", "older"]})
        .bound(max_partitions=2, max_rows_per_partition=3)
        .agg(n=dpa.count(), sd=dpa.std("score", bounds=(0.0, 1.0))),
        "public_join": q.join_public(regions(), on=[("rid", "id")], columns={"country": "country"})
        .group_by("country", keys={"country": ["A", "B"]})
        .bound(max_partitions=2, max_rows_per_partition=3)
        .agg(total=dpa.sum("visits", bounds=(0.0, 50.0))),
        "count_column_beside_avg": q.group_by("region", keys=REGION_KEYS)
        .bound(max_partitions=2, max_rows_per_partition=3)
        .agg(
            n=dpa.count(),
            n_income=dpa.count("income"),
            avg_income=dpa.mean("income", bounds=INCOME),
        ),
    }


CASES = {
    "grouped_mean": "SELECT region, COUNT(*) AS n, AVG(income) AS avg_income FROM people "
    "GROUP BY region",
    "filtered_quantiles": "SELECT COUNT(DISTINCT user_id) AS users, QUANTILE_CONT(income, "
    "[0.25, 0.75]) AS q FROM people WHERE age >= 18",
    "bucket_histogram": "SELECT CASE WHEN age < 30 THEN 'young' ELSE 'older' END AS band, "
    "COUNT(*) AS n, STDDEV(score) AS sd FROM people GROUP BY band",
    "public_join": "SELECT r.country, SUM(p.visits) AS total FROM people p JOIN regions r "
    "ON p.rid = r.id GROUP BY r.country",
    "count_column_beside_avg": "SELECT region, COUNT(*) AS n, COUNT(income) AS n_income, "
    "AVG(income) AS avg_income FROM people GROUP BY region",
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_sql_and_hand_written_builder_give_the_same_plan_and_aggregates(case: str) -> None:
    s1, s2 = _session(3), _session(3)  # same seed: the same bounding salt in both
    sq = s1.sql_query(CASES[case], metadata=META, public_tables={"regions": regions()})
    hand = _hand(s2)[case]
    a = sq.prepare(epsilon=1.0)
    b = hand.prepare(epsilon=1.0)
    assert a.plan.bound.salt == b.plan.bound.salt
    assert _unsalted(a.plan) == _unsalted(b.plan)
    assert a.pricing == b.pricing
    ea, eb = _by_key(a.exact(s1.engine)), _by_key(b.exact(s2.engine))
    assert ea == eb
    assert ea  # something was aggregated


def test_count_of_a_column_beside_its_mean_is_the_means_noisy_count() -> None:
    """SQL ``COUNT(income)`` beside ``AVG(income)`` is the builder's ``count("income")``: no
    measure of its own, released from the mean's noisy count (the same numbers), its budget
    joined to the mean's; ``COUNT(*)`` beside them keeps its own."""
    s = _session(5)
    sql = (
        "SELECT region, COUNT(*) AS n, COUNT(income) AS n_income, AVG(income) AS avg_income "
        "FROM people GROUP BY region"
    )
    sq = s.sql_query(sql, metadata=META)
    pricing = sq.prepare(epsilon=1.0).pricing
    by_name = {sp.name: sp for sp in pricing.stats}
    assert by_name["n_income"].shared_with == "avg_income"
    assert by_name["n"].shared_with is None
    assert by_name["n_income"].measures[0] == by_name["avg_income"].measures[0]
    res = s.sql(sql, epsilon=1.0, metadata=META)
    info = res.attrs["dpkit"]["columns"]
    assert info["n_income"]["noise_scale"] == info["avg_income"]["count"]["noise_scale"]
    assert info["n"]["noise_scale"] != info["n_income"]["noise_scale"]
    # COUNT(income) alone beside another column's aggregate is still refused before any spend
    spent = s.budget.spent
    with pytest.raises(SqlError, match="COUNT\\(column\\)"):
        s.sql("SELECT COUNT(income) AS c, AVG(age) AS a FROM people", epsilon=1.0, metadata=META)
    assert s.budget.spent == spent


def _by_key(res: Any) -> dict[Any, dict[str, Any]]:
    return {k: {n: v[i] for n, v in res.values.items()} for i, k in enumerate(res.keys)}


def test_sql_plan_does_not_depend_on_spelling() -> None:
    s = _session(1)
    texts = [
        "SELECT region, COUNT(*) AS n FROM people WHERE age >= 18 GROUP BY region",
        "select  Region , count(1) as n from PEOPLE as x where x.age >= 18 group by 1",
        "SELECT t.region, COUNT(*) AS n FROM (SELECT region, age FROM people) AS t "
        "WHERE t.age >= 18 GROUP BY t.region",
    ]
    plans = [_unsalted(s.sql_query(t, metadata=META).prepare(epsilon=1.0).plan) for t in texts]
    assert plans[0] == plans[1] == plans[2]


# ---------------------------------------------------------------------------- joins


def test_a_duplicated_public_key_matches_no_row_so_no_row_is_copied() -> None:
    """regions_dup lists id 2 twice: joined naively, each rid = 2 row would count twice (its
    person past max_rows_per_partition). The engine keeps only public keys that occur once."""
    d = people()
    s = _session(4, delta=True)
    sql = (
        "SELECT d.name, COUNT(*) AS n FROM people JOIN regions_dup d ON people.rid = d.id "
        "GROUP BY d.name"
    )
    p = s.sql_query(sql, metadata=META, public_tables={"regions_dup": regions_dup()}).prepare(
        epsilon=1.0, delta=1e-5
    )
    unbounded = dataclasses.replace(
        p.plan,
        bound=dataclasses.replace(
            p.plan.bound, max_partitions=1 << 20, max_rows_per_partition=1 << 20
        ),
    )
    res = dataclasses.replace(p, plan=unbounded).exact(s.engine)
    counts = dict(zip([k[0] for k in res.keys], res.values["n:n"], strict=True))
    expected = {
        "Nord": int((d.rid == 1).sum()),
        "Est": int((d.rid == 3).sum()),
        "Ouest": int((d.rid == 4).sum()),
    }
    assert counts == expected  # no "Sud"/"Sud bis" group: id 2 is ambiguous
    assert sum(counts.values()) <= len(d)


def test_left_join_keeps_unmatched_rows_with_null_public_columns() -> None:
    d = people()
    s = _session(4)
    q = (
        s.query()
        .join_public(regions(), on={"rid": "id"}, columns=["country"], how="left")
        .group_by("country", keys={"country": ["A", "B", None]})
        .bound(max_partitions=1 << 20, max_rows_per_partition=1 << 20)
        .agg(n=dpa.count())
    )
    res = q.prepare(epsilon=1.0).exact(s.engine)
    counts = dict(zip([k[0] for k in res.keys], res.values["n:n"], strict=True))
    assert counts[None] == int((d.rid == 5).sum())  # region 5 is not in the public table
    assert sum(counts.values()) == len(d)


def test_join_keys_of_different_types_are_refused_before_anything_is_spent() -> None:
    s = _session(4, delta=True)
    pub = pd.DataFrame({"id": ["1", "2"], "country": ["A", "B"]})  # text ids vs integer rid
    with pytest.raises(DPKitError, match="same scalar, non-float type"):
        s.sql(
            "SELECT c.country, COUNT(*) AS n FROM people JOIN codes c ON people.rid = c.id "
            "GROUP BY c.country",
            epsilon=1.0,
            delta=1e-6,
            metadata=META,
            public_tables={"codes": pub},
        )
    assert s.budget.spent == (0.0, 0.0)


def test_the_private_table_cannot_be_joined_as_public(tmp_path: Path) -> None:
    path = tmp_path / "people.parquet"
    people().to_parquet(path)
    s = dpa.Session(str(path), privacy_unit="user_id", budget=Budget(epsilon=1.0))
    with pytest.raises(DPKitError, match="cannot be joined as a public table"):
        s.sql(
            "SELECT COUNT(*) AS n FROM people JOIN copy c ON people.rid = c.rid",
            epsilon=1.0,
            metadata=META,
            public_tables={"copy": str(path)},
        )
    assert s.budget.spent == (0.0, 0.0)


def test_public_columns_need_bounds_of_their_own() -> None:
    s = _session(4)
    with pytest.raises(SqlError, match="no bounds"):
        s.sql(
            "SELECT SUM(r.id) AS s FROM people p JOIN regions r ON p.rid = r.id",
            epsilon=1.0,
            metadata=META,
            public_tables={"regions": regions()},
        )
    assert s.budget.spent == (0.0, 0.0)


# ---------------------------------------------------------------------------- buckets


def test_bucket_values_are_the_public_keys_and_follow_sql_case_semantics() -> None:
    d = people()
    s = _session(2)
    sql = (
        "SELECT CASE WHEN age < 30 THEN 'a' WHEN age < 60 THEN 'b' END AS band, "
        "COUNT(*) AS n FROM people GROUP BY band"
    )
    sq = s.sql_query(sql, metadata=META, max_partitions=1 << 20, max_rows_per_partition=1 << 20)
    assert sq.query.keys == (("a",), ("b",), (None,))
    res = sq.prepare(epsilon=1.0).exact(s.engine)
    got = dict(zip([k[0] for k in res.keys], res.values["n:n"], strict=True))
    young = int((d.age < 30).sum())
    mid = int(((d.age >= 30) & (d.age < 60)).sum())
    assert got == {"a": young, "b": mid, None: len(d) - young - mid}  # NaN age: no WHEN holds


def test_arguments_override_the_metadata() -> None:
    s = _session(2)
    sq = s.sql_query(
        "SELECT AVG(income) AS m FROM people",
        metadata=META,
        bounds={"income": (0, 1000)},
        max_rows_per_partition=7,
    )
    st = dict(sq.query.stats)["m"]
    assert st.bounds == (0.0, 1000.0)
    assert sq.query.max_rows_per_partition == 7


def test_plan_errors_of_joins_and_buckets_come_before_the_charge() -> None:
    s = _session(6)
    mixed = (
        s.query()
        .bucket("b", [("age < 30", "young"), ("age < 60", 1)])
        .group_by("b", keys={"b": ["young", 1, None]})
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    with pytest.raises(DPKitError, match="all be text, all numbers or all booleans"):
        mixed.run(epsilon=1.0)
    floats = pd.DataFrame({"score": [0.5], "label": ["half"]})
    float_join = (
        s.query()
        .join_public(floats, on="score", columns=["label"])
        .group_by("label", keys=["half"])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    with pytest.raises(DPKitError, match="non-float"):
        float_join.run(epsilon=1.0)
    with pytest.raises(DPKitError, match="already a column"):
        s.query().join_public(regions(), on={"rid": "id"}, columns={"country": "region"})
    assert s.budget.spent == (0.0, 0.0)
