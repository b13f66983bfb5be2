"""The plan allow-list of Spark frames joined as public tables (and of the private frame next
to them): a frame whose plan runs user code (a Python or pandas UDF, ``mapInPandas``,
``applyInPandas``, ``mapInArrow``, ``reflect``/``java_method``, a ``TRANSFORM ... USING``
script) or anything the parser does not recognise is refused before the charge, on classic
Spark and Spark Connect; ordinary public frames (file reads with selects, filters, built-in
expressions, joins, aggregations, distinct, unions) still join and give the true count.

Attack (tools/reproducers/spark2_udf_reads_private.py): a "public" frame reading a decoy file
whose Python code returns the private file's rows passed the file check; the exact count
(sensitivity 1) was 40 on D and 0 on D'. It is now refused on both.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _spark_helpers import join_count

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.engines.spark import SparkEngine

# ------------------------------------------------------------------ the parser (no Spark)

GOOD_PLAN = """== Parsed Logical Plan ==
'Project ['user_id]
+- 'UnresolvedRelation [va], [], false

== Analyzed Logical Plan ==
user_id: bigint, n: bigint, sum(ref): bigint
Aggregate [user_id#0L], [user_id#0L, count(1) AS n#39L, sum(ref#1L) AS sum(ref)#51L]
+- Project [user_id#0L, ref#1L, upper(trim(name#3, None)) AS x#34]
   +- Join Inner, (user_id#0L = user_id#4L)
      :- SubqueryAlias va
      :  +- View (`va`, [user_id#0L, ref#1L, name#3])
      :     +- Relation [user_id#0L,ref#1L,name#3] parquet
      +- Filter (cast(ref#5L as bigint) IN (1,2) AND isnotnull(name#7))
         +- Relation [user_id#4L,ref#5L,name#7] csv

== Optimized Logical Plan ==
Aggregate [user_id#0L], [user_id#0L, count(1) AS n#39L, sum(ref#1L) AS sum(ref)#51L]
+- Join Inner, (user_id#0L = user_id#4L), rightHint=(strategy=broadcast)
   :- Filter (isnotnull(user_id#0L) AND StartsWith(name#3, a))
   :  +- Relation [user_id#0L,ref#1L,name#3] parquet
   +- Relation spark_catalog.default.t[user_id#4L,ref#5L,name#7] csv

== Physical Plan ==
*(1) Project [user_id#0L]
"""


def _replace(old: str, new: str) -> str:
    assert old in GOOD_PLAN
    return GOOD_PLAN.replace(old, new)


def test_parser_accepts_a_plan_of_allowed_operators_and_functions() -> None:
    assert SparkEngine.plan_violation(GOOD_PLAN) is None


@pytest.mark.parametrize(
    ("plan", "expected"),
    [
        # an unknown operator, in either plan
        (
            _replace(
                "+- Relation [user_id#4L,ref#5L,name#7] csv",
                "+- FutureOperator [user_id#4L,ref#5L,name#7]",
            ),
            "operator 'FutureOperator'",
        ),
        (
            _replace(
                ":  +- Relation [user_id#0L,ref#1L,name#3] parquet",
                ":  +- ArrowEvalPython [f(ref#1L)#9], [pythonUDF0#10], 101",
            ),
            "operator 'ArrowEvalPython'",
        ),
        # a line that does not parse (a physical plan under a cache) or a non-file relation
        (
            _replace(
                "   +- Relation spark_catalog",
                "   +- *(1) ColumnarToRow\n   +- Relation spark_catalog",
            ),
            "plan line",
        ),
        (
            _replace(
                "[user_id#4L,ref#5L,name#7] csv\n\n== Opt",
                "[user_id#4L,ref#5L,name#7] JDBCRelation(t) [numPartitions=1]\n\n== Opt",
            ),
            "relation",
        ),
        (_replace("name#7] csv\n\n== Phys", "name#7] mysource\n\n== Phys"), "relation"),
        # an unknown function, a UDF, reflection, a lambda-named Python UDF
        (_replace("upper(trim(", "upper(frobnicate("), "function 'frobnicate'"),
        (
            _replace("upper(trim(", "upper(reflect(java.lang.String, valueOf, "),
            "function 'reflect'",
        ),
        (_replace("upper(trim(name#3, None))", "<lambda>(name#3)#92"), "function '<lambda>'"),
        (
            _replace(
                "count(1) AS n#39L, sum(ref#1L) AS sum(ref)#51L]\n+- Join",
                "count(1) AS n#39L, UDF(ref#1L) AS sum(ref)#51L]\n+- Join",
            ),
            "function 'UDF'",
        ),
        # a truncated plan, an explain output without its sections
        (
            _replace(
                "Aggregate [user_id#0L], [user_id#0L, count(1) AS n#39L, sum",
                "Aggregate [user_id#0L], [user_id#0L, ... 6 more fields, sum",
            ),
            "truncated",
        ),
        (GOOD_PLAN.replace("== Optimized Logical Plan ==", "== Optimised =="), "recognise"),
        # a string literal holding section headers (which would move the sections read) ahead
        # of an operator that runs Python code
        (
            GOOD_PLAN.replace(
                "'Project ['user_id]",
                "'Project ['user_id, \n== Analyzed Logical "
                "Plan ==\nx\n== Optimized Logical Plan ==\n== Physical Plan ==\n]",
            ).replace(
                "+- Relation spark_catalog.default.t",
                "+- MapInPandas <lambda>(x#1)#2\n   +- Relation spark_catalog.default.t",
            ),
            "recognise",
        ),
    ],
)
def test_parser_fails_closed(plan: str, expected: str) -> None:
    """Each edit of an accepted plan (an unknown operator or function, an unparsable line, a
    non-file relation, a truncated or unrecognised output) refuses it."""
    got = SparkEngine.plan_violation(plan)
    assert got is not None and expected in got, got


def test_parser_refuses_a_builtin_name_registered_as_a_user_function() -> None:
    """A user function registered under a built-in's name (``upper``) refuses the frame."""
    assert SparkEngine.plan_violation(GOOD_PLAN, frozenset({"count"})) == "the function 'count'"
    assert SparkEngine.plan_violation(GOOD_PLAN, frozenset({"unused"})) is None


def test_allow_list_holds_no_word_of_user_code() -> None:
    """No allowed function name carries a marker of user code, and the markers themselves
    refuse a word even when it would otherwise pass."""
    for name in SparkEngine._PLAN_FUNCTIONS:
        assert not any(m in name for m in SparkEngine._CODE_MARKERS), name
    for name in ("reflect", "java_method", "try_reflect", "udf", "pythonudf", "transform"):
        assert name not in SparkEngine._PLAN_FUNCTIONS
    for node in (
        "InMemoryRelation",
        "LocalRelation",
        "LogicalRDD",
        "Range",
        "MapInPandas",
        "BatchEvalPython",
        "ScriptTransformation",
        "OneRowRelation",
    ):
        assert node not in SparkEngine._PLAN_NODES


# ------------------------------------------------------------------ on Spark


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: 40 persons whose ``ref`` is person 1000 (``secret = 1``), plus person 1000; D' = D
    without person 1000."""
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def _name() -> str:
    return f"al_{uuid.uuid4().hex[:10]}"


def _write(frame: pd.DataFrame, tmp: Path, suffix: str = "parquet") -> str:
    path = str(tmp / f"{_name()}.{suffix}")
    if suffix == "csv":
        frame.to_csv(path, index=False)
    else:
        frame.to_parquet(path, index=False)
    return path


def _session(spark: Any, source: Any) -> Any:
    """A session over a private file path (read by Spark) or a private Spark frame."""
    if isinstance(source, str):
        return dpa.Session(spark, table=source, privacy_unit="user_id", budget=Budget(epsilon=10.0))
    return dpa.Session(source, privacy_unit="user_id", budget=Budget(epsilon=10.0))


def _decoy(spark: Any, tmp: Path) -> Any:
    """Another file, holding no person of the private table."""
    path = _write(pd.DataFrame({"user_id": [5], "ref": [5], "secret": [0]}), tmp)
    return spark.read.parquet(path)


SCHEMA = "user_id long, ref long, secret long"


def _map_in_pandas(spark: Any, private: str, tmp: Path) -> Any:
    """The attack of the benchmark: the decoy's rows are swapped for the private file's."""

    def swap(batches: Any) -> Any:
        import pyarrow.parquet as pq

        for _ in batches:
            pass
        yield pq.read_table(private).to_pandas()

    return _decoy(spark, tmp).coalesce(1).mapInPandas(swap, SCHEMA)


def _map_in_arrow(spark: Any, private: str, tmp: Path) -> Any:
    def swap(batches: Any) -> Any:
        import pyarrow.parquet as pq

        for _ in batches:
            pass
        yield from pq.read_table(private).to_batches()

    return _decoy(spark, tmp).coalesce(1).mapInArrow(swap, SCHEMA)


def _apply_in_pandas(spark: Any, private: str, tmp: Path) -> Any:
    def swap(group: pd.DataFrame) -> pd.DataFrame:
        return pd.read_parquet(private)

    return _decoy(spark, tmp).groupBy("user_id").applyInPandas(swap, SCHEMA)


def _python_udf(spark: Any, private: str, tmp: Path) -> Any:
    """A Python UDF that looks up the secret of a person in the private file."""
    from pyspark.sql import functions as sf

    def lookup(uid: int) -> int:
        rows = pd.read_parquet(private)
        return int(rows.secret[rows.user_id == uid].sum())

    secret_of = sf.udf(lambda uid: lookup(uid), "long")  # a lambda: no type-hint inference
    return (
        _decoy(spark, tmp)
        .withColumn("user_id", sf.lit(1000).cast("long"))
        .withColumn("secret", secret_of("user_id"))
    )


def _pandas_udf(spark: Any, private: str, tmp: Path) -> Any:
    from pyspark.sql import functions as sf

    @sf.pandas_udf("long")
    def secret_of(uid: pd.Series) -> pd.Series:
        rows = pd.read_parquet(private)
        return uid.map(lambda u: int(rows.secret[rows.user_id == u].sum()))

    return _decoy(spark, tmp).withColumn("secret", secret_of("user_id"))


def _reflect(spark: Any, private: str, tmp: Path) -> Any:
    return _decoy(spark, tmp).selectExpr(
        "user_id",
        "ref",
        "CAST(length(reflect('java.lang.String', 'valueOf', ref)) AS BIGINT) AS secret",
    )


def _java_method(spark: Any, private: str, tmp: Path) -> Any:
    return _decoy(spark, tmp).selectExpr(
        "user_id", "ref", "CAST(java_method('java.lang.Math', 'abs', secret) AS BIGINT) AS secret"
    )


def _python_udf_in_filter(spark: Any, private: str, tmp: Path) -> Any:
    from pyspark.sql import functions as sf

    keep = sf.udf(lambda uid: True, "boolean")
    return _decoy(spark, tmp).where(keep("user_id"))


def _script_transform(spark: Any, private: str, tmp: Path) -> Any:
    """``TRANSFORM ... USING`` runs a shell command on the executors."""
    decoy = _write(pd.DataFrame({"user_id": [5], "ref": [5], "secret": [0]}), tmp)
    return spark.sql(
        f"SELECT CAST(u AS BIGINT) AS user_id, CAST(r AS BIGINT) AS ref, "
        f"CAST(s AS BIGINT) AS secret FROM (SELECT TRANSFORM(user_id, ref, secret) "
        f"USING 'cat' AS (u, r, s) FROM parquet.`{decoy}`)"
    )


DANGEROUS: dict[str, Callable[[Any, str, Path], Any]] = {
    "mapInPandas": _map_in_pandas,
    "mapInArrow": _map_in_arrow,
    "applyInPandas": _apply_in_pandas,
    "python-udf": _python_udf,
    "pandas-udf": _pandas_udf,
    "python-udf-in-filter": _python_udf_in_filter,
    "reflect": _reflect,
    "java_method": _java_method,
    "script-transform": _script_transform,
}


@pytest.mark.parametrize("kind", sorted(DANGEROUS))
def test_public_frame_running_user_code_is_refused_before_the_charge(
    spark: Any, tmp_path: Path, kind: str
) -> None:
    """Each frame reads only a decoy file as far as ``inputFiles()`` can tell, but runs code
    that could read the private file: refused with a PrivacyParameterError naming the
    remedy, nothing charged, on classic Spark and Spark Connect."""
    private = _write(_tables()[0], tmp_path)
    public = DANGEROUS[kind](spark, private, tmp_path)
    assert set(public.inputFiles()) and private not in str(public.inputFiles())
    session = _session(spark, private)
    got = join_count(session, public)
    assert isinstance(got, str) and got.startswith("PrivacyParameterError"), got
    assert "pandas DataFrame or Arrow table" in got
    assert session.budget.spent[0] == 0


def test_udf_attack_no_longer_moves_the_count(spark: Any, tmp_path: Path) -> None:
    """The benchmark's attack on neighbouring tables: before, 40 on D and 0 on D'
    (sensitivity 1); now refused on both, with the same message once the per-run names are
    masked, and nothing charged."""
    outcomes = []
    for i, table in enumerate(_tables()):
        folder = tmp_path / f"t{i}"
        folder.mkdir()
        private = _write(table, folder)
        session = _session(spark, private)
        outcomes.append(join_count(session, _map_in_pandas(spark, private, folder)))
        assert session.budget.spent[0] == 0
    assert all(isinstance(o, str) and o.startswith("PrivacyParameterError") for o in outcomes), (
        outcomes
    )
    assert len({re.sub(r"'[^']*'", "'?'", str(o)) for o in outcomes}) == 1, outcomes


def test_private_frame_running_user_code_refuses_spark_public_tables(
    spark: Any, tmp_path: Path
) -> None:
    """A private frame with a Python UDF (or ``reflect``) joins no public table that Spark
    reads, even a plain file, and the message names no private value; a pandas public
    table still joins (count 40)."""
    from pyspark.sql import functions as sf

    same = sf.udf(lambda x: x, "long")
    private = _write(_tables()[0], tmp_path)
    public_path = _write(pd.DataFrame({"user_id": [1000, 7], "secret": [1, 0]}), tmp_path)
    frames = (
        spark.read.parquet(private).withColumn("ref", same("ref")),
        spark.read.parquet(private).selectExpr(
            "user_id", "ref", "secret", "reflect('java.lang.String', 'valueOf', ref) t"
        ),
    )
    for frame in frames:
        session = _session(spark, frame)
        got = join_count(session, spark.read.parquet(public_path))
        assert isinstance(got, str) and got.startswith("PrivacyParameterError"), got
        assert "private table is read from files alone" in got and "1000" not in got
        assert session.budget.spent[0] == 0
    assert (
        join_count(
            _session(spark, spark.read.parquet(private)),
            pd.DataFrame({"user_id": [1000, 7], "secret": [1, 0]}),
        )
        == 40
    )


def test_ordinary_public_frames_still_join(spark: Any, tmp_path: Path) -> None:
    """File reads (Parquet, CSV) with selects, filters, built-in expressions, a join of two
    public files, a group-by, distinct, a union of two public files, a SQL view and a window
    join a file-backed private table and count the true 40."""
    from pyspark.sql import Window
    from pyspark.sql import functions as sf

    private = _write(_tables()[0], tmp_path)
    rows = pd.DataFrame({"user_id": [1000, 7], "secret": [1, 0], "tag": [" a", "b "]})
    pq1 = spark.read.parquet(_write(rows, tmp_path))
    pq2 = spark.read.parquet(
        _write(pd.DataFrame({"user_id": [1000, 8], "secret": [1, 0], "tag": ["c", "d"]}), tmp_path)
    )
    csv = spark.read.option("header", "true").csv(_write(rows, tmp_path, "csv"))
    view = _name()
    pq2.createOrReplaceTempView(view)
    publics = {
        "parquet-select-filter": pq1.select("user_id", "secret").where("user_id > 0"),
        "csv-cast": csv.select(
            sf.col("user_id").cast("long").alias("user_id"),
            sf.col("secret").cast("long").alias("secret"),
        ),
        "builtins": pq1.withColumn("tag", sf.upper(sf.trim(sf.concat("tag", sf.lit("x")))))
        .withColumn("h", sf.xxhash64("tag"))
        .withColumn(
            "secret",
            sf.coalesce(
                sf.when(sf.col("secret") > 0, sf.col("secret")).otherwise(sf.lit(0)), sf.lit(0)
            ),
        ),
        "join": pq1.select("user_id", "secret").join(pq2.select("user_id", "tag"), "user_id"),
        "group-by": pq1.groupBy("user_id").agg(
            sf.max("secret").alias("secret"), sf.count("*").alias("n")
        ),
        "union-distinct": pq1.select("user_id", "secret")
        .unionByName(pq2.select("user_id", "secret"))
        .distinct(),
        "sql-view": spark.sql(f"SELECT user_id, secret FROM {view} WHERE tag <> 'z'"),
        "window": pq1.withColumn(
            "r", sf.row_number().over(Window.partitionBy("user_id").orderBy("tag"))
        ).where("r = 1"),
        "wide": pq1.select(
            "user_id", "secret", *[sf.col("secret").alias(f"c{i}") for i in range(40)]
        ),
    }
    conf = "spark.sql.debug.maxToStringFields"
    before = spark.conf.get(conf, None)
    counts = {
        name: join_count(_session(spark, private), public) for name, public in publics.items()
    }
    assert counts == dict.fromkeys(publics, 40), counts
    assert spark.conf.get(conf, None) == before  # raised for the analysis only


def test_wide_frame_cannot_hide_a_call_past_spark_truncation(spark: Any, tmp_path: Path) -> None:
    """Spark prints at most 25 fields of a list by default: a call placed after them is
    still seen (the limit is raised while the plan is printed)."""
    from pyspark.sql import functions as sf

    private = _write(_tables()[0], tmp_path)
    public = _decoy(spark, tmp_path).select(
        "user_id",
        *[sf.col("ref").alias(f"c{i}") for i in range(40)],
        sf.expr("CAST(length(reflect('java.lang.String', 'valueOf', ref)) AS BIGINT)").alias(
            "secret"
        ),
    )
    got = join_count(_session(spark, private), public)
    assert isinstance(got, str) and "'reflect'" in got, got


def test_function_registered_under_a_builtin_word_refuses_frames_using_it(
    spark: Any, tmp_path: Path
) -> None:
    """A function registered as ``<name>,upper`` (which a JVM function would print as
    ``<name>,upper(...)``, a call of ``upper`` to the parser) refuses a public frame that
    calls ``upper`` while it is registered; once dropped, the same frame joins (count 40)."""
    from pyspark.sql import functions as sf

    private = _write(_tables()[0], tmp_path)
    public_path = _write(
        pd.DataFrame({"user_id": [1000, 7], "secret": [1, 0], "tag": ["a", "b"]}), tmp_path
    )
    public = spark.read.parquet(public_path).withColumn("tag", sf.upper("tag"))
    name = f"zz_{uuid.uuid4().hex[:8]},upper"
    spark.udf.register(name, lambda x: x, "long")
    try:
        assert {name.split(",")[0], "upper"} <= SparkEngine(spark)._user_functions()
        got = join_count(_session(spark, private), public)
        assert isinstance(got, str) and "'upper'" in got, got
    finally:
        spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS `{name}`")
    assert "upper" not in SparkEngine(spark)._user_functions()
    assert join_count(_session(spark, private), public) == 40


def test_subquery_markers_and_ordinary_names() -> None:
    """Subquery expressions print as ``name#id`` (``scalar-subquery#0``, ``exists#12``,
    ``list#5``, ``lateral-subquery#3``) and are refused; a column whose name merely ends in one
    of those words (``blacklist#4L``) is not mistaken for one."""
    marker = SparkEngine._PLAN_SUBQUERY
    for text in (
        "Project [scalar-subquery#0 []]",
        "Filter exists#12 []",
        "(a#1 IN (list#5 []))",
        "lateral-subquery#3 []",
    ):
        assert marker.search(text), text
    for text in ("Project [blacklist#4L]", "Project [my_list#2, user_id#2L]"):
        assert not marker.search(text), text
