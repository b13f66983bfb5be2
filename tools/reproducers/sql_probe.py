"""Probe the private SQL front end with adversarial queries (attack review).

For every query: translate it on the SQL corpus world (D = ``people``, D' = D plus one
adversarial person with 216 rows). A refused query must raise a dpkit error and leave the
budget untouched; an answered one must keep the exact pre-noise aggregates of D and D' within
the calibrated sensitivity (the "sensitivity usage" of ``test_sql_audit``, at most 1).

    PYTHONPATH=src:tests/support:benchmarks/shared .venv/bin/python tools/reproducers/sql_probe.py
"""

from __future__ import annotations

from typing import Any

import yaml
from _proof import sensitivity_usage
from _sql_corpus import METADATA_YAML, neighbours, public_tables

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.errors import DPKitError
from dpkit.noise import RandomSource

META = yaml.safe_load(METADATA_YAML)

QUERIES = [
    # privacy unit through case, quoting, aliases, joins
    'SELECT "USER_ID", COUNT(*) AS n FROM people GROUP BY "USER_ID"',
    "SELECT u, COUNT(*) AS n FROM (SELECT user_id AS u FROM people) t GROUP BY u",
    "SELECT u, COUNT(*) AS n FROM (SELECT User_Id AS u FROM people) AS t GROUP BY 1",
    "SELECT COUNT(*) AS n FROM people GROUP BY lower(user_id)",
    "SELECT b, COUNT(*) AS n FROM (SELECT CASE WHEN user_id = 'u5' THEN 'x' ELSE 'y' END AS b "
    "FROM people) t GROUP BY b",
    "SELECT COUNT(DISTINCT region) AS n FROM people",
    "SELECT COUNT(DISTINCT lower(user_id)) AS n FROM people",
    "SELECT COUNT(DISTINCT (user_id, region)) AS n FROM people",
    "SELECT COUNT(DISTINCT user_id, region) AS n FROM people",
    'SELECT COUNT(DISTINCT "User_Id") AS n FROM people',
    "SELECT COUNT(DISTINCT u) AS n FROM (SELECT user_id AS u FROM people) t",
    "SELECT SUM(DISTINCT income) AS s FROM people",
    "SELECT APPROX_COUNT_DISTINCT(user_id) AS n FROM people",
    # unbounded / unknown columns, case and quoting
    "SELECT SUM(device) AS s FROM people",
    'SELECT SUM("Income") AS s FROM people',
    "SELECT SUM(rid) AS s FROM people",
    "SELECT SUM(x) AS s FROM (SELECT rid AS x FROM people) t",
    "SELECT SUM(income) AS s FROM (SELECT rid AS income FROM people) t",
    "SELECT SUM(income * 1) AS s FROM people",
    "SELECT SUM(income) + 0 AS s FROM people",
    "SELECT AVG(income) FILTER (WHERE age > 30) AS s FROM people",
    "SELECT MAX(income) AS m FROM people",
    "SELECT ARG_MAX(user_id, income) AS m FROM people",
    "SELECT FIRST(income) AS m FROM people",
    "SELECT LIST(user_id) AS m FROM people",
    "SELECT STRING_AGG(user_id, ',') AS m FROM people",
    "SELECT PERCENTILE_CONT(0.5) WITHIN GROUP (ORDER BY user_id) AS m FROM people",
    "SELECT PERCENTILE_DISC(0.5) WITHIN GROUP (ORDER BY income) AS m FROM people",
    "SELECT QUANTILE_CONT(income, 1.5) AS m FROM people",
    "SELECT MEDIAN(rid) AS m FROM people",
    "SELECT region, income, COUNT(*) AS n FROM people GROUP BY region",
    "SELECT region, ANY_VALUE(user_id) AS u, COUNT(*) AS n FROM people GROUP BY region",
    # GROUP BY variants
    "SELECT COUNT(*) AS n FROM people GROUP BY income",
    "SELECT COUNT(*) AS n FROM people GROUP BY age + 0",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY ALL",
    "SELECT COUNT(*) AS n FROM people GROUP BY ROLLUP (region)",
    "SELECT COUNT(*) AS n FROM people GROUP BY GROUPING SETS ((region), (plan))",
    "SELECT COUNT(*) AS n FROM people GROUP BY CUBE (region, plan)",
    # HAVING / ORDER BY / LIMIT reading unreleased values
    "SELECT region, AVG(income) AS a FROM people GROUP BY region HAVING COUNT(*) > 5",
    "SELECT region, AVG(income) AS a FROM people GROUP BY region HAVING SUM(income) > 5",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING MAX(income) > 5",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region ORDER BY SUM(income)",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region ORDER BY income",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region ORDER BY random()",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING user_id = 'u5'",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING "
    "(SELECT COUNT(*) FROM people) > 5",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING n > 5 AND "
    "region IN (SELECT region FROM people)",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region LIMIT (SELECT COUNT(*) FROM people)",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region LIMIT 1 OFFSET (SELECT 1)",
    "SELECT region, COUNT(*) AS n FROM people GROUP BY region QUALIFY n > 1",
    # shadowing aliases
    "SELECT plan AS region, COUNT(*) AS n FROM people GROUP BY region",
    "SELECT region AS n, COUNT(*) AS n FROM people GROUP BY region",
    "SELECT region, COUNT(*) AS region FROM people GROUP BY 1",
    "SELECT region AS income, SUM(income) AS s FROM people GROUP BY income",
    # subqueries, windows, sampling, DISTINCT, set operations, CTEs, VALUES
    "SELECT COUNT(*) AS n FROM people WHERE income > (SELECT AVG(income) FROM people)",
    "SELECT COUNT(*) AS n FROM people WHERE EXISTS (SELECT 1 FROM people q WHERE q.age > 99)",
    "SELECT COUNT(*) AS n FROM people WHERE region IN (SELECT region FROM people)",
    "SELECT COUNT(*) AS n FROM (SELECT * FROM people LIMIT 10) t",
    "SELECT COUNT(*) AS n FROM (SELECT * FROM people ORDER BY income DESC) t",
    "SELECT COUNT(*) AS n FROM (SELECT DISTINCT user_id, region FROM people) t",
    "SELECT COUNT(*) AS n FROM (SELECT region, COUNT(*) AS c FROM people GROUP BY region) t",
    "SELECT COUNT(*) AS n FROM (SELECT *, ROW_NUMBER() OVER () AS r FROM people) t WHERE r < 10",
    "SELECT COUNT(*) AS n FROM (SELECT *, SUM(income) OVER (PARTITION BY region) AS s "
    "FROM people) t",
    "SELECT COUNT(*) AS n FROM people TABLESAMPLE (10 PERCENT)",
    "SELECT COUNT(*) AS n FROM people USING SAMPLE 10",
    "SELECT COUNT(*) AS n FROM (SELECT * FROM people USING SAMPLE 10) t",
    "SELECT DISTINCT region, COUNT(*) AS n FROM people GROUP BY region",
    "SELECT COUNT(*) AS n FROM (SELECT * FROM people UNION ALL SELECT * FROM people) t",
    "SELECT COUNT(*) AS n FROM people UNION ALL SELECT COUNT(*) FROM people",
    "WITH t AS (SELECT * FROM people) SELECT COUNT(*) AS n FROM t",
    "SELECT COUNT(*) AS n FROM (VALUES (1), (2)) t(x)",
    "SELECT COUNT(*) AS n FROM read_parquet('people.parquet')",
    "SELECT COUNT(*) AS n FROM 'people.parquet'",
    "SELECT COUNT(*) AS n FROM main.people",
    "SELECT COUNT(*) AS n FROM people AS t(a, b)",
    "SELECT COUNT(*) AS n FROM people, people AS q",
    "SELECT COUNT(*) AS n FROM people p JOIN people q ON p.user_id = q.user_id",
    "SELECT COUNT(*) AS n FROM people p JOIN (SELECT * FROM people) q ON p.rid = q.rid",
    "SELECT COUNT(*) AS n FROM people p, LATERAL (SELECT p.rid) q",
    "SELECT COUNT(*) AS n FROM people p POSITIONAL JOIN regions r",
    "SELECT COUNT(*) AS n FROM people p ASOF JOIN regions r ON p.rid >= r.id",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.rid >= r.id",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id OR p.rid = r.id + 1",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id + 0",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.rid + 0 = r.id",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id AND r.country = 'A'",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.rid = p.rid",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON r.id = r.population",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r USING (id)",
    "SELECT COUNT(*) AS n FROM people p NATURAL JOIN regions r",
    "SELECT COUNT(*) AS n FROM people p RIGHT JOIN regions r ON p.rid = r.id",
    "SELECT COUNT(*) AS n FROM people p FULL JOIN regions r ON p.rid = r.id",
    "SELECT COUNT(*) AS n FROM people p CROSS JOIN regions r",
    "SELECT COUNT(*) AS n FROM people p SEMI JOIN regions r ON p.rid = r.id",
    "SELECT COUNT(*) AS n FROM people p ANTI JOIN regions r ON p.rid = r.id",
    "SELECT COUNT(*) AS n FROM people p JOIN regions_dup r ON p.rid = r.id",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.user_id = r.region_name",
    "SELECT r.id, COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id GROUP BY r.id",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id "
    "JOIN regions r2 ON p.rid = r2.id JOIN regions r3 ON p.rid = r3.id",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.rid = r.id AND p.rid = r.id",
    "SELECT r.country, SUM(r.population) AS s FROM people p JOIN regions r ON p.rid = r.id "
    "GROUP BY r.country",
    "SELECT COUNT(*) AS n FROM people p JOIN regions r ON p.region = r.id",
    "SELECT COUNT(*) AS n FROM people p LEFT JOIN regions r ON p.rid = r.id WHERE r.id IS NULL",
    "SELECT COUNT(*) AS n FROM people p JOIN people_copy r ON p.rid = r.id",
    "SELECT COUNT(*) AS n FROM regions",
    "SELECT COUNT(*) AS n FROM regions r JOIN people p ON p.rid = r.id",
    # WHERE functions, data-dependent errors, division
    "SELECT COUNT(*) AS n FROM people WHERE income / age > 1",
    "SELECT COUNT(*) AS n FROM people WHERE income // age > 1",
    "SELECT COUNT(*) AS n FROM people WHERE income % 0 > 1",
    "SELECT COUNT(*) AS n FROM people WHERE CAST(user_id AS INTEGER) > 1",
    "SELECT COUNT(*) AS n FROM people WHERE user_id::INTEGER > 1",
    "SELECT COUNT(*) AS n FROM people WHERE TRY_CAST(user_id AS INTEGER) > 1",
    "SELECT COUNT(*) AS n FROM people WHERE regexp_matches(user_id, '^u1')",
    "SELECT COUNT(*) AS n FROM people WHERE user_id SIMILAR TO 'u1.*'",
    "SELECT COUNT(*) AS n FROM people WHERE user_id LIKE 'u1%' ESCAPE '!'",
    "SELECT COUNT(*) AS n FROM people WHERE user_id LIKE device",
    "SELECT COUNT(*) AS n FROM people WHERE user_id GLOB 'u1*'",
    "SELECT COUNT(*) AS n FROM people WHERE sqrt(income) > 1",
    "SELECT COUNT(*) AS n FROM people WHERE ln(income) > 1",
    "SELECT COUNT(*) AS n FROM people WHERE abs(rid * 9223372036854775807) > 1",
    "SELECT COUNT(*) AS n FROM people WHERE rid * 9223372036854775807 > 1",
    "SELECT COUNT(*) AS n FROM people WHERE repeat(user_id, 1000000000) = 'x'",
    "SELECT COUNT(*) AS n FROM people WHERE error('boom') IS NULL",
    "SELECT COUNT(*) AS n FROM people WHERE CASE WHEN income > 1e5 THEN error('x') END",
    "SELECT COUNT(*) AS n FROM people WHERE getenv('HOME') = 'x'",
    "SELECT COUNT(*) AS n FROM people WHERE current_setting('threads') = 1",
    "SELECT COUNT(*) AS n FROM people WHERE random() < 0.5",
    "SELECT COUNT(*) AS n FROM people WHERE income > 1 -- AND 1/0\n",
    "SELECT COUNT(*) AS n FROM people /* ; DROP TABLE people; */ WHERE income > 1",
    "SELECT COUNT(*) AS n FROM people; SELECT COUNT(*) AS n FROM people",
    "SELECT COUNT(*) AS n FROM people;;",
    "PRAGMA database_list",
    "COPY people TO 'x.csv'",
    "SELECT COUNT(*) AS n FROM people WHERE TRY(income > 0)",
    "SELECT COUNT(*) AS n FROM people WHERE COLUMNS('inc.*') > 0",
    "SELECT COUNT(*) AS n FROM people WHERE $1 > 0",
    "SELECT COUNT(*) AS n FROM people WHERE income > ?",
    "SELECT COUNT(*) AS n FROM people WHERE lambda x: x > 0",
    "SELECT COUNT(*) AS n FROM people WHERE [income][1] > 0",
    "SELECT COUNT(*) AS n FROM people WHERE {'a': income}.a > 0",
    # CASE buckets
    "SELECT CASE WHEN income > 1e5 THEN 'rich' ELSE 'x' END AS b, COUNT(*) AS n FROM people "
    "GROUP BY b",
    "SELECT CASE WHEN age < 30 THEN 'young' ELSE 1 END AS b, COUNT(*) AS n FROM people GROUP BY b",
    "SELECT CASE WHEN age < 30 THEN user_id ELSE 'x' END AS b, COUNT(*) AS n FROM people "
    "GROUP BY b",
    "SELECT CASE WHEN age < 30 THEN age ELSE 0 END AS b, COUNT(*) AS n FROM people GROUP BY b",
    "SELECT CASE user_id WHEN 'u5' THEN 'x' ELSE 'y' END AS b, COUNT(*) AS n FROM people "
    "GROUP BY b",
    "SELECT CASE WHEN income / 0 > 1 THEN 'x' ELSE 'y' END AS b, COUNT(*) AS n FROM people "
    "GROUP BY b",
    "SELECT CASE WHEN rid * 9223372036854775807 > 1 THEN 'x' ELSE 'y' END AS b, COUNT(*) AS n "
    "FROM people GROUP BY b",
    "SELECT CASE WHEN age < 30 THEN 'y' ELSE 'o' END AS b, SUM(CASE WHEN age < 30 THEN 1 "
    "ELSE 0 END) AS n FROM people GROUP BY b",
    "SELECT CASE WHEN age < 30 THEN 'y' END AS b, COUNT(*) AS n FROM people GROUP BY b",
    "SELECT CASE WHEN age < 30 THEN 1e400 ELSE 0 END AS b, COUNT(*) AS n FROM people GROUP BY b",
    "SELECT CASE WHEN age < 30 THEN 'y' ELSE 'o' END AS b, COUNT(*) AS n FROM people "
    "GROUP BY CASE WHEN age < 30 THEN 'y' ELSE 'o' END",
    "SELECT CASE WHEN r.id = 1 THEN 'one' ELSE 'other' END AS b, COUNT(*) AS n FROM people p "
    "JOIN regions r ON p.rid = r.id GROUP BY b",
]


def world() -> dict[str, Any]:
    d, d_prime = neighbours()
    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", d_prime)
    return {"engine": engine, "d": d}


def probe(w: dict[str, Any], sql: str) -> tuple[str, str]:
    budget = Budget(epsilon=10.0, delta=1e-3, method="basic")
    session = dpa.Session(
        w["d"],
        privacy_unit="user_id",
        budget=budget,
        engine=w["engine"],
        source_of_randomness=RandomSource(seed=5, insecure=True),
    )
    try:
        sq = session.sql_query(sql, metadata=META, public_tables=public_tables())
        p = sq.prepare(epsilon=1.0, delta=1e-5)
        session.validate(p) if hasattr(p, "plan") else None
    except DPKitError as exc:
        spent = session.spent
        ok = not any(float(x) for x in (spent if isinstance(spent, tuple) else (spent or 0,)))
        return ("refused" if ok else "REFUSED-BUT-SPENT"), str(exc).splitlines()[0][:110]
    except Exception as exc:
        return "RAW-EXCEPTION", f"{type(exc).__name__}: {str(exc)[:110]}"
    engine = w["engine"]
    try:
        ra = p.exact(engine, Source(kind="table", location="d"))
        rb = p.exact(engine, Source(kind="table", location="d_prime"))
    except Exception as exc:
        return "ENGINE-ERROR", f"{type(exc).__name__}: {str(exc)[:110]}"
    usage = sensitivity_usage(p, ra, rb)
    return ("answered" if usage <= 1 else "VIOLATION"), f"sensitivity usage {usage:.3f}"


def main() -> int:
    w = world()
    counts: dict[str, int] = {}
    for sql in QUERIES:
        verdict, detail = probe(w, sql)
        counts[verdict] = counts.get(verdict, 0) + 1
        print(f"{verdict:18s} {sql[:90]!r}\n{'':18s} {detail}")
    print(counts)
    bad = {k: v for k, v in counts.items() if k not in ("refused", "answered")}
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
