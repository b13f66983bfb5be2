"""A corpus of analyst SQL queries, the tables they run on, and their neighbouring tables.

``people`` (the private table, privacy unit ``user_id``): region, plan, device, age, income,
visits, score, rid (a region id). ``regions`` (public): id, region_name, country, population.
``regions_dup`` (public): the same with region id 2 listed twice (a key that must not copy
rows). The neighbour of ``people`` adds one adversarial person with many rows in every region,
plan and device, whose values are NaN, NULL, +-inf, +-1e308 and distinct huge values (every
one beyond the bounds).

Each corpus entry is either answered (``Answer``: released with intervals, audited) or refused
(``Refuse``: the clause named in the error and a phrase of its reason).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

REGIONS = ("north", "south", "east", "west")
PLANS = ("free", "pro", "team")
DEVICES = ("ios", "android", "web")
ADVERSARY = "adv'\"|--unit"
ADV_ROWS = 6  # rows per (region, plan, device) cell: 216 rows in every group of every query
# Special values, then distinct huge values: rows of one person that are equal in the columns a
# query reads are interchangeable for the bounding hash, so distinct values make sure the kept
# rows are mostly extreme (clamped to a bound) rather than copies of one NULL.
ADV_SPECIAL: tuple[Any, ...] = (float("nan"), float("inf"), 1e308, None, -float("inf"), -1e308)


def _adv_value(i: int) -> Any:
    return ADV_SPECIAL[i // 10 % len(ADV_SPECIAL)] if i % 10 == 0 else 1e9 * (i + 1)


METADATA_YAML = """\
tables:
  people:
    privacy_unit: user_id
    max_partitions: 2
    max_rows_per_partition: 3
    columns:
      income: {lower: 0, upper: 200000}
      age: {lower: 0, upper: 100}
      visits: {lower: 0, upper: 50}
      score: {lower: 0, upper: 1}
      region: {keys: [north, south, east, west]}
      plan: {keys: [free, pro, team]}
  regions:
    public: true
    columns:
      population: {lower: 0, upper: 10000000}
      country: {keys: [A, B]}
  regions_dup:
    public: true
  accounts:
    public: true
"""

METADATA_TOML = """\
[tables.people]
privacy_unit = "user_id"
max_partitions = 2
max_rows_per_partition = 3

[tables.people.columns]
income = { lower = 0, upper = 200000 }
age = { lower = 0, upper = 100 }
visits = { lower = 0, upper = 50 }
score = { lower = 0, upper = 1 }
region = { keys = ["north", "south", "east", "west"] }
plan = { keys = ["free", "pro", "team"] }

[tables.regions]
public = true

[tables.regions.columns]
population = { lower = 0, upper = 10000000 }
country = { keys = ["A", "B"] }

[tables.regions_dup]
public = true

[tables.accounts]
public = true
"""


def people(n_units: int = 120, seed: int = 7) -> pd.DataFrame:
    """Units with 1-4 rows; NULL unit, NULL region, NaN income and age, rid 5 unknown."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for u in range(n_units):
        unit = None if u == 0 else f"u{u}"
        region = REGIONS[int(rng.integers(4))] if rng.random() > 0.05 else None
        plan = PLANS[int(rng.integers(3))]
        for _ in range(int(rng.integers(1, 5))):
            rows.append(
                {
                    "user_id": unit,
                    "region": region,
                    "plan": plan,
                    "device": DEVICES[int(rng.integers(3))],
                    "age": float(rng.integers(16, 90)) if rng.random() > 0.05 else float("nan"),
                    "income": float(rng.gamma(2.0, 30000.0))
                    if rng.random() > 0.1
                    else float("nan"),
                    "visits": int(rng.integers(0, 60)),
                    "score": float(rng.random()),
                    "rid": int(rng.integers(1, 6)),
                }
            )
    frame = pd.DataFrame(rows)
    frame["visits"] = frame["visits"].astype("int64")
    frame["rid"] = frame["rid"].astype("int64")
    return frame


def adversary() -> pd.DataFrame:
    rows = []
    i = 0
    for region in (*REGIONS, None):
        for plan in PLANS:
            for device in DEVICES:
                for _ in range(ADV_ROWS):
                    v = _adv_value(i)
                    rows.append(
                        {
                            "user_id": ADVERSARY,
                            "region": region,
                            "plan": plan,
                            "device": device,
                            "age": v,
                            "income": v,
                            "visits": [0, 10**12, -(10**12), 60][i % 4],
                            "score": v,
                            "rid": 1 + i % 5,
                        }
                    )
                    i += 1
    frame = pd.DataFrame(rows)
    frame["visits"] = frame["visits"].astype("int64")
    frame["rid"] = frame["rid"].astype("int64")
    return frame


def neighbours() -> tuple[pd.DataFrame, pd.DataFrame]:
    d = people()
    return d, pd.concat([d, adversary()], ignore_index=True)


def regions() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id": np.array([1, 2, 3, 4], dtype="int64"),
            "region_name": ["Nord", "Sud", "Est", "Ouest"],
            "country": ["A", "A", "B", "B"],
            "population": np.array([1_200_000, 800_000, 2_500_000, 400_000], dtype="int64"),
        }
    )


def regions_dup() -> pd.DataFrame:
    """Region 2 appears twice: a join on it would copy each of its private rows."""
    return pd.DataFrame(
        {
            "id": np.array([1, 2, 2, 3, 4], dtype="int64"),
            "name": ["Nord", "Sud", "Sud bis", "Est", "Ouest"],
        }
    )


def accounts() -> pd.DataFrame:
    """A public directory keyed by the privacy unit (one row per person id)."""
    return pd.DataFrame(
        {
            "uid": [f"u{i}" for i in range(1, 120)],
            "tier": ["gold" if i % 7 == 0 else "basic" for i in range(1, 120)],
        }
    )


def public_tables() -> dict[str, pd.DataFrame]:
    return {"regions": regions(), "regions_dup": regions_dup(), "accounts": accounts()}


@dataclass(frozen=True)
class Answer:
    sql: str
    delta: bool = False  # needs an (epsilon, delta) budget (partition selection)


@dataclass(frozen=True)
class Refuse:
    sql: str
    clause: str
    reason: str


CORPUS: dict[str, Answer | Refuse] = {
    # ---------------------------------------------------------------- answered
    "total_rows": Answer("SELECT COUNT(*) AS n FROM people"),
    # derived keys and values: bounds from the definition and the metadata's column bounds
    "derived_sum": Answer("SELECT SUM(income * 2) AS twice FROM people"),
    "group_by_expression": Answer(
        "SELECT lower(region) AS r, COUNT(*) AS n FROM people GROUP BY lower(region)",
        delta=True,
    ),
    "indicator_sum": Answer(
        "SELECT region, SUM(CASE WHEN age >= 65 THEN 1 ELSE 0 END) AS seniors, "
        "AVG(score * visits - visits) AS sv FROM people GROUP BY region"
    ),
    "derived_key_from_definition": Answer(
        "SELECT CASE WHEN visits * 2 > 50 THEN income ELSE 0 END > 1000 AS rich, "
        "COUNT(*) AS n, AVG(CASE WHEN plan = 'pro' THEN visits + 1 END) AS v FROM people "
        "GROUP BY 1"
    ),
    "rows_per_region": Answer("SELECT region, COUNT(*) AS n FROM people GROUP BY region"),
    "income_per_region": Answer(
        "SELECT region, COUNT(*) AS n, AVG(income) AS avg_income FROM people GROUP BY region"
    ),
    "visits_per_plan_sorted": Answer(
        "SELECT plan, SUM(visits) AS total_visits FROM people GROUP BY plan "
        "ORDER BY total_visits DESC"
    ),
    "distinct_users": Answer("SELECT COUNT(DISTINCT user_id) AS users FROM people"),
    "users_per_region": Answer(
        "SELECT region, COUNT(DISTINCT user_id) AS users FROM people GROUP BY region"
    ),
    "age_mean_sd": Answer("SELECT AVG(age) AS mean_age, STDDEV(age) AS sd_age FROM people"),
    "score_variance_per_plan": Answer(
        "SELECT plan, VARIANCE(score) AS var_score FROM people GROUP BY plan"
    ),
    "median_income": Answer("SELECT MEDIAN(income) AS median_income FROM people"),
    "p90_income_per_region": Answer(
        "SELECT region, PERCENTILE_CONT(0.9) WITHIN GROUP (ORDER BY income) AS p90 "
        "FROM people GROUP BY region"
    ),
    "age_quartiles": Answer("SELECT QUANTILE_CONT(age, [0.25, 0.5, 0.75]) AS age_q FROM people"),
    "region_by_plan": Answer(
        "SELECT region, plan, COUNT(*) AS n FROM people GROUP BY region, plan"
    ),
    "paying_adults_per_region": Answer(
        "SELECT region, COUNT(*) AS n FROM people WHERE age >= 18 AND plan <> 'free' "
        "GROUP BY region"
    ),
    "age_histogram_case": Answer(
        "SELECT CASE WHEN age < 30 THEN 'under 30' WHEN age < 60 THEN '30-59' ELSE '60+' END "
        "AS age_band, COUNT(*) AS n FROM people GROUP BY age_band"
    ),
    "income_brackets_by_position": Answer(
        "SELECT CASE WHEN income < 50000 THEN 1 WHEN income < 100000 THEN 2 ELSE 3 END AS "
        "bracket, COUNT(*) AS n, AVG(age) AS mean_age FROM people GROUP BY 1"
    ),
    "rows_per_device_selected": Answer(
        "SELECT device, COUNT(*) AS n FROM people GROUP BY device", delta=True
    ),
    "score_per_device_having": Answer(
        "SELECT device, AVG(score) AS s FROM people GROUP BY device HAVING s > 0.2", delta=True
    ),
    "top_regions": Answer(
        "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING COUNT(*) > 5 "
        "ORDER BY n DESC LIMIT 2"
    ),
    "rows_per_region_name_join": Answer(
        "SELECT r.region_name, COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id "
        "GROUP BY r.region_name",
        delta=True,
    ),
    "income_per_country_join": Answer(
        "SELECT r.country, AVG(p.income) AS avg_income FROM people p JOIN regions r "
        "ON p.rid = r.id GROUP BY r.country"
    ),
    "population_weight_left_join": Answer(
        "SELECT r.country, SUM(r.population) AS exposure FROM people p LEFT JOIN regions r "
        "ON p.rid = r.id GROUP BY r.country"
    ),
    "heavy_users_subquery": Answer(
        "SELECT band, COUNT(*) AS n FROM (SELECT CASE WHEN visits >= 10 THEN 'heavy' ELSE "
        "'light' END AS band FROM people WHERE plan = 'pro') t GROUP BY band"
    ),
    "renamed_column_subquery": Answer(
        "SELECT COUNT(*) AS n, AVG(inc) AS avg_inc FROM (SELECT income AS inc FROM people "
        "WHERE region IN ('north', 'south')) AS s"
    ),
    "count_column_next_to_avg": Answer(
        "SELECT region, COUNT(income) AS n_income, AVG(income) AS avg_income FROM people "
        "GROUP BY region"
    ),
    "mid_income_per_plan": Answer(
        "SELECT plan, COUNT(*) AS n FROM people WHERE income BETWEEN 10000 AND 90000 AND "
        "region IS NOT NULL GROUP BY plan ORDER BY plan"
    ),
    "score_of_ios_users": Answer(
        "SELECT region, AVG(score) AS s FROM people WHERE lower(device) LIKE 'i%' GROUP BY region"
    ),
    "income_spread_per_plan": Answer(
        "SELECT plan, STDDEV_POP(income) AS sd, VAR_POP(income) AS v FROM people GROUP BY plan"
    ),
    "users_per_country_older": Answer(
        "SELECT rg.country, COUNT(DISTINCT p.user_id) AS users FROM people AS p INNER JOIN "
        "regions AS rg ON p.rid = rg.id WHERE p.age > 25 GROUP BY rg.country "
        "ORDER BY users DESC"
    ),
    "income_total_paged": Answer(
        "SELECT region, SUM(income) AS total FROM people GROUP BY region ORDER BY total DESC "
        "LIMIT 3 OFFSET 1"
    ),
    "plans_having_range": Answer(
        "SELECT plan, COUNT(*) AS n FROM people GROUP BY plan HAVING n BETWEEN 0 AND 1000 "
        "AND plan <> 'team'"
    ),
    "duplicate_public_keys_dropped": Answer(
        "SELECT d.name, COUNT(*) AS n FROM people JOIN regions_dup d ON people.rid = d.id "
        "GROUP BY d.name",
        delta=True,
    ),
    "adults_outside_east": Answer(
        "SELECT COUNT(*) AS adults FROM people WHERE age >= 18 AND NOT (region = 'east')"
    ),
    "visits_median_and_mean": Answer(
        "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY visits) AS med_visits, "
        "AVG(visits) AS mean_visits FROM people WHERE plan IN ('pro', 'team')"
    ),
    "tier_of_accounts_joined_on_the_unit": Answer(
        "SELECT a.tier, COUNT(*) AS n FROM people p JOIN accounts a ON p.user_id = a.uid "
        "GROUP BY a.tier",
        delta=True,
    ),
    "simple_case_on_plan": Answer(
        "SELECT CASE plan WHEN 'free' THEN 'free' ELSE 'paid' END AS tier, SUM(score) AS s "
        "FROM people GROUP BY tier"
    ),
    # ---------------------------------------------------------------- refused
    "max_income": Refuse(
        "SELECT region, MAX(income) AS m FROM people GROUP BY region",
        "SELECT MAX(income)",
        "one person's value",
    ),
    "group_by_unit": Refuse(
        "SELECT user_id, COUNT(*) FROM people GROUP BY user_id", "GROUP BY", "privacy unit"
    ),
    "join_private_orders": Refuse(
        "SELECT COUNT(*) FROM people JOIN orders o ON people.user_id = o.user_id",
        "JOIN",
        "two private tables",
    ),
    "sum_without_bounds": Refuse(
        "SELECT SUM(rid) AS s FROM people", "SELECT SUM(rid)", "no bounds"
    ),
    "avg_of_counts": Refuse(
        "SELECT AVG(cnt) FROM (SELECT user_id, COUNT(*) AS cnt FROM people GROUP BY user_id) t",
        "GROUP BY (subquery)",
        "aggregates of aggregates",
    ),
    "limit_before_group": Refuse(
        "SELECT COUNT(*) FROM (SELECT * FROM people LIMIT 100) t",
        "LIMIT (subquery)",
        "LIMIT before GROUP BY",
    ),
    "window_avg": Refuse(
        "SELECT region, AVG(income) OVER (PARTITION BY region) FROM people",
        "SELECT",
        "window function",
    ),
    "window_before_aggregate": Refuse(
        "SELECT COUNT(*) FROM (SELECT income, ROW_NUMBER() OVER (ORDER BY income) AS rn "
        "FROM people) t WHERE rn < 10",
        "SELECT",
        "window function",
    ),
    "user_function": Refuse(
        "SELECT COUNT(*) FROM people WHERE my_score(income) > 3", "WHERE", "user functions"
    ),
    "sum_of_count": Refuse(
        "SELECT SUM(COUNT(*)) FROM people", "SELECT", "aggregates of aggregates"
    ),
    "select_star": Refuse("SELECT * FROM people", "SELECT", "'*' is not supported"),
    "raw_rows": Refuse(
        "SELECT region, income FROM people", "SELECT", "neither a GROUP BY column nor an aggregate"
    ),
    "distinct_regions": Refuse(
        "SELECT COUNT(DISTINCT region) FROM people",
        "SELECT COUNT(DISTINCT region)",
        "privacy unit only",
    ),
    "subquery_in_where": Refuse(
        "SELECT COUNT(*) FROM people WHERE income > (SELECT AVG(income) FROM people)",
        "WHERE",
        "subquery inside an expression",
    ),
    "ratio_of_aggregates": Refuse(
        "SELECT AVG(income) / COUNT(*) FROM people", "SELECT", "arithmetic on aggregates"
    ),
    "delete": Refuse("DELETE FROM people", "query", "only SELECT"),
    "stacked_statements": Refuse(
        "SELECT COUNT(*) FROM people; DROP TABLE people", "query", "exactly one statement"
    ),
    "union": Refuse(
        "SELECT COUNT(*) FROM people UNION SELECT COUNT(*) FROM people", "query", "only SELECT"
    ),
    "select_distinct": Refuse(
        "SELECT DISTINCT region FROM people", "SELECT DISTINCT", "without noise"
    ),
    "order_by_unreleased": Refuse(
        "SELECT region, COUNT(*) AS n FROM people GROUP BY region ORDER BY AVG(income)",
        "ORDER BY",
        "not a released column",
    ),
    "division_in_where": Refuse(
        "SELECT COUNT(*) FROM people WHERE income / 12 > 1000", "WHERE", "Div is not allowed"
    ),
    "derived_sum_unbounded": Refuse(
        "SELECT SUM(length(device)) AS l FROM people", "SELECT", "has no bounds"
    ),
    "group_by_division": Refuse(
        "SELECT visits / 2 AS h, COUNT(*) AS n FROM people GROUP BY visits / 2",
        "GROUP BY",
        "division",
    ),
    "derived_reads_unit": Refuse(
        "SELECT lower(user_id) AS u, COUNT(*) AS n FROM people GROUP BY lower(user_id)",
        "GROUP BY",
        "privacy unit",
    ),
    "cross_join": Refuse(
        "SELECT COUNT(*) FROM people p CROSS JOIN regions r", "JOIN", "pair each row with many"
    ),
    "table_function": Refuse(
        "SELECT COUNT(*) FROM read_parquet('/etc/passwd.parquet')",
        "FROM",
        "table functions and file paths are refused",
    ),
    "filtered_aggregate": Refuse(
        "SELECT SUM(income) FILTER (WHERE age > 30) FROM people", "SELECT", "FILTER"
    ),
    "cte": Refuse(
        "WITH t AS (SELECT * FROM people) SELECT COUNT(*) FROM t",
        "WITH",
        "common table expressions",
    ),
    "right_join": Refuse(
        "SELECT COUNT(*) FROM people RIGHT JOIN regions r ON people.rid = r.id",
        "JOIN",
        "RIGHT/FULL/CROSS",
    ),
    "having_unreleased": Refuse(
        "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING AVG(income) > 5",
        "HAVING",
        "not a released column",
    ),
    "non_equi_join": Refuse(
        "SELECT COUNT(*) FROM people p JOIN regions r ON p.rid > r.id", "JOIN", "only equalities"
    ),
    "public_table_only": Refuse("SELECT SUM(population) FROM regions", "FROM", "is a public table"),
    "syntax_error": Refuse("SELEC COUNT(*) FROM people", "syntax", "does not parse"),
    "case_on_unit": Refuse(
        "SELECT CASE WHEN user_id = 'u1' THEN 'target' ELSE 'rest' END AS who, COUNT(*) "
        "FROM people GROUP BY who",
        "GROUP BY (CASE)",
        "privacy unit",
    ),
    "aggregate_in_where": Refuse(
        "SELECT COUNT(*) FROM people WHERE SUM(income) > 10", "WHERE", "aggregate in WHERE"
    ),
    "group_by_unit_via_public_join": Refuse(
        "SELECT a.uid, COUNT(*) AS n FROM people p JOIN accounts a ON p.user_id = a.uid "
        "GROUP BY a.uid",
        "GROUP BY",
        "privacy unit",
    ),
    "min_age": Refuse("SELECT MIN(age) FROM people", "SELECT MIN(age)", "quantile"),
}


def answered() -> dict[str, Answer]:
    return {k: v for k, v in CORPUS.items() if isinstance(v, Answer)}


def refused() -> dict[str, Refuse]:
    return {k: v for k, v in CORPUS.items() if isinstance(v, Refuse)}
