"""The Spark engine runs the same plans as DuckDB: classic ``local[2]`` and Spark Connect.

* md5 bounding hash: the pre-noise aggregates of DuckDB, Spark classic, Spark Connect and the
  pure-Python reference (hashlib + Fractions) are identical, on data with NaN, NULL, +-inf,
  1e308, subnormals, a NULL privacy unit and odd keys.
* native hashes (DuckDB ``hash``, Spark ``xxhash64``): the choice of kept rows and groups has
  the same (uniform) distribution on both engines; a statistical test with its companion that
  catches a deliberately broken bounding.
* the statement itself: no division, no 32-bit ``HASH``, integer casts only of ``FLOOR``,
  DECIMAL(38, 0) sums that stay exact beyond the 64-bit range under ANSI mode.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import sqlglot
from _engine_reference import MEASURES, as_dict, plan_for, reference
from sqlglot import exp

from dpkit.analytics._plan import Filter, Measure, Source
from dpkit.analytics.engines._compiler import SPARK
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine


def _parquet(path: Path) -> Source:
    return Source(kind="parquet", location=str(path))


# ------------------------------------------------------------------ md5: identical aggregates

PLANS: list[dict[str, Any]] = [
    {"group_by": ("region",), "max_partitions": 2, "max_rows": 2, "salt": 2**64 - 1},
    {"group_by": ("region", "kind"), "max_partitions": 3, "max_rows": 1, "salt": 7},
    {"group_by": ("fk",), "max_partitions": 1, "max_rows": 3, "salt": 2**63},
    {"group_by": ("region",), "unit": None, "max_partitions": 1, "max_rows": 1, "salt": 3},
    {
        "group_by": ("kind",),
        "max_partitions": 2,
        "max_rows": 2,
        "salt": 99,
        "filters": (
            Filter(predicate="age >= 18 AND kind IN (1, 3)"),
            Filter(predicate="x > 5 OR x IS NULL"),
        ),
    },
]


def _keep(plan_kw: dict[str, Any]) -> Any:
    if "filters" not in plan_kw:
        return None
    return lambda r: r["age"] >= 18 and r["kind"] in (1, 3) and (r["x"] is None or r["x"] > 5)


@pytest.mark.parametrize("kw", PLANS, ids=[str(i) for i in range(len(PLANS))])
def test_md5_aggregates_identical_on_duckdb_and_spark(
    kw: dict[str, Any], odd_parquet: Path, classic_spark: Any, connect_spark: Any
) -> None:
    plan = plan_for(_parquet(odd_parquet), **kw)
    want = reference(pq.read_table(odd_parquet).to_pandas(), plan, keep=_keep(kw))
    duck = as_dict(DuckDBEngine(hash="md5", threads=1).execute(plan))
    classic = as_dict(SparkEngine(classic_spark, hash="md5").execute(plan))
    connect = as_dict(SparkEngine(connect_spark, hash="md5").execute(plan))
    assert duck == want
    assert classic == want
    assert connect == want
    assert len(want) >= (1 if not kw["group_by"] else 2)


def test_md5_bounding_is_binding_in_these_plans(odd_parquet: Path) -> None:
    """Companion: the bounds above do drop rows (else identical results would be trivial), and
    another salt keeps other rows."""
    src = _parquet(odd_parquet)
    engine = DuckDBEngine(hash="md5", threads=1)
    n_rows = pq.read_metadata(odd_parquet).num_rows
    kept = sum(v["n"] for v in as_dict(engine.execute(plan_for(src, **PLANS[0]))).values())
    assert kept < n_rows
    other = {**PLANS[0], "salt": 5}
    assert as_dict(engine.execute(plan_for(src, **PLANS[0]))) != as_dict(
        engine.execute(plan_for(src, **other))
    )


def test_sources_dataframe_parquet_and_table_agree(spark: Any, odd_parquet: Path) -> None:
    """A Spark DataFrame view, a Parquet path and a catalog table give the same result."""
    engine = SparkEngine(spark)
    df = spark.read.parquet(str(odd_parquet))
    engine.register("odd_view", df)
    plan = plan_for(_parquet(odd_parquet), **PLANS[1])
    a = as_dict(engine.execute(plan))
    b = as_dict(
        engine.execute(dataclasses.replace(plan, source=Source(kind="table", location="odd_view")))
    )
    df.createOrReplaceTempView("odd_catalog_view")
    c = as_dict(
        SparkEngine(spark).execute(
            dataclasses.replace(plan, source=Source(kind="table", location="odd_catalog_view"))
        )
    )
    assert a == b == c


# ------------------------------------------------------------------ native: distributions


def _choice_table(n: int, path: Path) -> Source:
    """``n`` units, each with 3 rows: values 0, 1, 2 in groups a, b, c."""
    import pyarrow as pa

    uid = [f"u{i}" for i in range(n) for _ in range(3)]
    pq.write_table(pa.table({"uid": uid, "g": ["a", "b", "c"] * n, "v": [0, 1, 2] * n}), path)
    return _parquet(path)


N_UNITS = 6000
CATS = (0, 1, 2)
# Each unit keeps one of its 3 rows (max_rows_per_partition=1 in one group) or one of its 3
# groups (max_partitions=1): under an ideal salted hash the choice is uniform, independent
# across units, so each category count S_c ~ Binomial(n, 1/3).
# (1) engine vs ideal: Hoeffding, P(|S_c - n/3| >= t) <= 2 exp(-2 t^2 / n); with a Bonferroni
#     split over 3 categories x 2 bounding kinds, alpha = 1e-6 needs
#     t1 = sqrt(n ln(2 * 6 / 1e-6) / 2) = sqrt(6000 * 16.30 / 2) = 221.2.
# (2) Spark vs DuckDB: D_c = S_c(Spark) - S_c(DuckDB) is a sum of 2n independent terms of range
#     1, P(|D_c| >= t) <= 2 exp(-2 t^2 / (2 n)); t2 = sqrt(n ln(2 * 6 / 1e-6)) = 312.8.
# Total false-positive rate of each test <= 1e-6. Standard deviations: S_c 36.5, D_c 51.6, so
# a real shift of a few percent (~120 units) would still be seen by (1); the companion's
# broken bounding moves S_0 by 4000.
T1 = math.sqrt(N_UNITS * math.log(2 * 6 / 1e-6) / 2)
T2 = math.sqrt(N_UNITS * math.log(2 * 6 / 1e-6))


def _choice_counts(engine: Any, src: Source) -> tuple[list[int], list[int]]:
    cat = Measure(name="c", kind="category_counts", column="v", categories=CATS)
    rows = engine.execute(
        plan_for(src, group_by=(), max_partitions=1, max_rows=1, salt=11, measures=(cat,))
    )
    by_row = list(rows.values["c"][0])
    groups = as_dict(
        engine.execute(
            plan_for(
                src,
                group_by=("g",),
                max_partitions=1,
                max_rows=1,
                salt=12,
                measures=(Measure(name="n", kind="rows"),),
            )
        )
    )
    by_group = [groups.get((g,), {"n": 0})["n"] for g in ("a", "b", "c")]
    return by_row, by_group


def _uniform(counts: list[int]) -> bool:
    return all(abs(c - N_UNITS / 3) < T1 for c in counts) and sum(counts) == N_UNITS


def test_native_hash_choices_have_the_same_uniform_distribution(
    tmp_path: Path, classic_spark: Any, connect_spark: Any
) -> None:
    src = _choice_table(N_UNITS, tmp_path / "choice.parquet")
    duck = _choice_counts(DuckDBEngine(threads=1), src)
    results = {
        "classic": _choice_counts(SparkEngine(classic_spark), src),
        "connect": _choice_counts(SparkEngine(connect_spark), src),
    }
    assert _uniform(duck[0]) and _uniform(duck[1]), duck
    for name, got in results.items():
        assert _uniform(got[0]) and _uniform(got[1]), (name, got)
        for a, b in zip(got[0] + got[1], duck[0] + duck[1], strict=True):
            assert abs(a - b) < T2, (name, got, duck)


def test_companion_a_broken_bounding_is_caught(tmp_path: Path, classic_spark: Any) -> None:
    """A Spark profile whose "hash" ignores the unit and the row (``coalesce(salt, ...)`` is
    the salt) ranks every unit's rows alike: the tie-break then keeps the smallest key and
    value, and the test above rejects it."""
    src = _choice_table(N_UNITS, tmp_path / "choice.parquet")
    broken = SparkEngine(classic_spark)
    broken.profile = dataclasses.replace(SPARK, native_hash="coalesce")
    rows, groups = _choice_counts(broken, src)
    assert rows == [N_UNITS, 0, 0]
    assert groups == [N_UNITS, 0, 0]
    assert not _uniform(rows) and not _uniform(groups)


# ------------------------------------------------------------------ the statement


def test_statement_has_no_division_no_hash_and_casts_only_floors(
    classic_spark: Any, odd_parquet: Path
) -> None:
    for hash_kind in ("native", "md5"):
        engine = SparkEngine(classic_spark, hash=hash_kind)  # type: ignore[arg-type]
        sql = engine.compile(plan_for(_parquet(odd_parquet), **PLANS[-1])).sql
        tree = sqlglot.parse_one(sql, read="spark")
        assert not list(tree.find_all(exp.Div, exp.IntDiv, exp.Mod))
        names = {f.name.lower() for f in tree.find_all(exp.Anonymous)}
        assert "hash" not in names  # Spark's HASH is 32-bit Murmur3: never emitted
        assert not list(tree.find_all(exp.Hash)) if hasattr(exp, "Hash") else True
        assert ("xxhash64" in names) == (hash_kind == "native")
        assert (
            any(isinstance(n, exp.MD5) for n in tree.walk())
            or "md5" in names
            or hash_kind == "native"
        )
        for cast in tree.find_all(exp.Cast):
            if cast.to.this in (exp.DataType.Type.BIGINT, exp.DataType.Type.INT):
                # an integer cast only of a FLOOR (of a clamped value) or of a constant
                assert isinstance(cast.this, (exp.Floor, exp.Literal)), cast.sql("spark")
        assert "DECIMAL(38, 0)" in sql


def test_decimal_sums_stay_exact_beyond_64_bits_under_ansi(spark: Any, tmp_path: Path) -> None:
    """3000 rows of about 2^61 each: the exact sum exceeds 2^63 (a BIGINT sum would overflow and
    raise under ANSI mode, Spark 4's default); DECIMAL(38, 0) holds it exactly."""
    import pyarrow as pa

    path = tmp_path / "big.parquet"
    xs = [1e308, math.inf, 3.0e18, 2.9999e18, -math.inf] * 600
    pq.write_table(pa.table({"uid": [f"u{i}" for i in range(len(xs))], "x": xs}), path)
    lo, hi = -(2.0**61), 2.0**61 + 2.0**59
    plan = plan_for(
        _parquet(path),
        group_by=(),
        max_partitions=1,
        max_rows=1,
        measures=(Measure(name="s", kind="sum", column="x", lower=lo, upper=hi, frac_bits=0),),
    )
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    got = SparkEngine(spark).execute(plan).values["s"][0]
    want = sum(math.floor(Fraction(min(max(x, lo), hi))) for x in xs)
    assert isinstance(got, int)
    assert got == want
    assert abs(want) > 2**63
    assert got == DuckDBEngine(threads=1).execute(plan).values["s"][0]


def test_predicates_that_would_raise_under_ansi_drop_the_row(spark: Any, odd_parquet: Path) -> None:
    """``age * 2^62`` overflows BIGINT for ``age >= 2``: on Spark the whole predicate is then
    NULL and the row fails it, even where ``kind = 2`` holds (checked arithmetic: no exception
    under ANSI mode, no wrap-around without it). ``region = 1`` casts text to a number, which
    raises under ANSI mode for 'north': it only fails the predicate. ANSI mode is restored."""
    src = _parquet(odd_parquet)
    plan = plan_for(
        src,
        group_by=("kind",),
        filters=(Filter(predicate="age * 4611686018427387904 > 0 OR kind = 2"),),
    )
    before = spark.conf.get("spark.sql.ansi.enabled")
    got = as_dict(SparkEngine(spark, hash="md5").execute(plan))
    want = reference(
        pq.read_table(odd_parquet).to_pandas(),
        plan,
        keep=lambda r: r["age"] * 2**62 < 2**63 and (r["age"] > 0 or r["kind"] == 2),
    )
    assert got == want
    assert {k[0] for k in got} == {1, 2, 3}
    assert spark.conf.get("spark.sql.ansi.enabled") == before
    text = plan_for(
        src,
        group_by=("kind",),
        measures=(Measure(name="n", kind="rows"),),
        filters=(Filter(predicate="region = 1"),),
    )
    assert as_dict(SparkEngine(spark).execute(text)) == {}
    assert spark.conf.get("spark.sql.ansi.enabled") == before


def test_all_measures_on_empty_input_give_the_zero_global_group(
    spark: Any, odd_parquet: Path
) -> None:
    plan = plan_for(_parquet(odd_parquet), group_by=(), filters=(Filter(predicate="age > 1000"),))
    got = as_dict(SparkEngine(spark, hash="md5").execute(plan))
    assert got == as_dict(DuckDBEngine(hash="md5", threads=1).execute(plan))
    assert got[()]["n"] == 0 and got[()]["h"] == (0, 0, 0, 0)


def test_reference_measures_cover_every_kind() -> None:
    assert {m.kind for m in MEASURES} == {
        "rows",
        "units",
        "values",
        "sum",
        "sum_sq",
        "bin_counts",
        "category_counts",
    }


def test_float_text_in_sql_equals_python_on_random_doubles(classic_spark: Any) -> None:
    """The md5 profile's text of a double, computed by DuckDB and by Spark SQL, equals
    :func:`float_text` on 2000 random bit patterns (every exponent range, subnormals) and the
    edge values: the two engines hash doubles identically."""
    import random
    import struct

    import duckdb

    from dpkit.analytics.engines._compiler import DUCKDB, float_text
    from dpkit.analytics.engines._compiler.hashing import float_text_steps, staged

    rng = random.Random(4)
    xs = [struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0] for _ in range(2000)]
    xs += [
        5e-324,
        2.2250738585072014e-308,
        1e23,
        1e308,
        -1e308,
        1.7976931348623157e308,
        0.1,
        1.0,
        -2.5,
        2.0**-1022,
        2.0**1023,
        math.inf,
        -math.inf,
        0.0,
    ]
    xs = [x for x in xs if x == x]
    want = [float_text(x) for x in xs]

    def text_sql(table: str, profile: Any, dialect: str) -> str:
        inner = sqlglot.select("i", "x").from_(table)
        q = staged(inner, float_text_steps("x", "txt", profile), "st")
        return sqlglot.select("txt").from_(q.subquery("q")).order_by("i").sql(dialect)

    con = duckdb.connect()
    con.execute("CREATE TABLE t (i BIGINT, x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(xs)))
    got_duck = [r[0] for r in con.execute(text_sql("t", DUCKDB, "duckdb")).fetchall()]
    assert got_duck == want
    df = classic_spark.createDataFrame(list(enumerate(xs)), "i bigint, x double")
    df.createOrReplaceTempView("float_text_t")
    got_spark = [
        r[0] for r in classic_spark.sql(text_sql("float_text_t", SPARK, "spark")).collect()
    ]
    assert got_spark == want


def test_measures_with_own_bounds_agree_with_duckdb_and_a_plan_bounded_there(
    spark: Any, odd_parquet: Path
) -> None:
    """Per-statistic bounds (``Measure.keep``) on Spark: scalar measures as ``FILTER``, bin
    and category counts through their grouping sets with the cell NULL outside the bounds;
    the aggregates equal DuckDB's (md5) and those of a plan bounded at the tighter pair."""
    src = _parquet(odd_parquet)
    own = tuple(dataclasses.replace(m, name=m.name + "@", keep=(1, 1)) for m in MEASURES)
    plan = plan_for(src, measures=(*MEASURES, *own), max_partitions=2, max_rows=3, salt=7)
    got = as_dict(SparkEngine(spark, hash="md5").execute(plan))
    assert got == as_dict(DuckDBEngine(hash="md5", threads=1).execute(plan))
    tight = as_dict(
        DuckDBEngine(hash="md5", threads=1).execute(
            plan_for(src, max_partitions=1, max_rows=1, salt=7)
        )
    )
    for key, row in tight.items():
        assert {m.name: row[m.name] for m in MEASURES} == {
            m.name: got[key][m.name + "@"] for m in MEASURES
        }
