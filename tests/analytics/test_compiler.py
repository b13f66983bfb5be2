"""The plan compiler: allow-listed predicates, refused plans, SQL shape, exact arithmetic."""

from __future__ import annotations

import bisect
import dataclasses
import datetime
import math
import random
from fractions import Fraction
from typing import Any

import pandas as pd
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

from dpkit.analytics._column_types import type_family
from dpkit.analytics._plan import Aggregate, Bound, Filter, Measure, Plan, Source
from dpkit.analytics._sql import PredicateError, parse_predicate
from dpkit.analytics.engines._compiler import (
    DUCKDB,
    DUCKDB_MD5,
    PlanError,
    canonical_token,
    compile_plan,
)
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.errors import PrivacyParameterError

SCHEMA = {
    "uid": "VARCHAR",
    "region": "VARCHAR",
    "x": "DOUBLE",
    "n": "BIGINT",
    "d": "DATE",
    "flag": "BOOLEAN",
    "dec": "DECIMAL(10,2)",
}
SRC = Source(kind="table", location="t")


def plan(
    *measures: Measure,
    unit: str | None = "uid",
    group_by: tuple[str, ...] = ("region",),
    max_partitions: Any = 2,
    max_rows: Any = 3,
    salt: Any = 1,
    filters: tuple[str, ...] = (),
) -> Plan:
    return Plan(
        source=SRC,
        filters=tuple(Filter(predicate=f) for f in filters),
        bound=Bound(
            privacy_unit=unit,
            max_partitions=max_partitions,
            max_rows_per_partition=max_rows,
            salt=salt,
        ),
        aggregate=Aggregate(
            group_by=group_by, measures=measures or (Measure(name="n", kind="rows"),)
        ),
    )


# ------------------------------------------------------------------ predicates


@pytest.mark.parametrize(
    "text",
    [
        "age >= 18",
        "a = 1 AND b IN (1, 2, -3)",
        "name LIKE 'x%'",
        "x BETWEEN 1 AND 2",
        "y IS NULL OR NOT (z <> 'it''s')",
        'lower("we""ird") = \'a\'',
        "TRY_CAST(s AS INT) > 3",
        "abs(x - 3) * 2 < 10",
        "coalesce(x, 0) > 1",
    ],
)
def test_row_level_predicates_are_accepted(text: str) -> None:
    parse_predicate(text)


@pytest.mark.parametrize(
    "text",
    [
        "count(*) > 1",
        "sum(x) OVER () > 1",
        "x > (SELECT 1)",
        "x IN (SELECT 1)",
        "EXISTS (SELECT 1)",
        "x / 2 > 1",
        "x % 2 = 0",
        "x // 2 = 1",
        "CAST(x AS INT) > 1",
        "x::INT > 1",
        "x > 1; DROP TABLE t",
        "t.x > 1",
        "*",
        "x IN (y, 1)",
        "random() > 0.5",
        "getenv('HOME') IS NULL",
        "read_csv('/etc/passwd') IS NULL",
        "my_udf(x) > 1",
        "x > ?",
        "x > $1",
        "",
        "   ",
        "x > 1) OR (1 = 1",
    ],
)
def test_other_predicates_are_refused(text: str) -> None:
    with pytest.raises(PredicateError):
        parse_predicate(text)


def test_predicate_text_never_reaches_the_sql_verbatim() -> None:
    compiled = compile_plan(plan(filters=("x > 5 -- '; DROP TABLE t; /*",)), SCHEMA)
    assert "DROP" not in compiled.sql
    assert "--" not in compiled.sql
    vp = parse_predicate("n * 2 > 1")
    assert vp.needs_try and vp.columns == ("n",)
    assert "TRY(" in compile_plan(plan(filters=("n * 2 > 1",)), SCHEMA).sql.upper()
    # every predicate runs under TRY, with or without arithmetic: the engine's own implicit
    # casts (``region = 1`` casts the text column) fail for some values only
    for text in ("n > 1", "region = 1", "region IN (1, 2)", "n = 'abc'"):
        where = sqlglot.parse_one(
            compile_plan(plan(filters=(text,)), SCHEMA).sql, read="duckdb"
        ).find(exp.Where)
        assert where is not None
        conjuncts = list(where.this.flatten()) if isinstance(where.this, exp.And) else [where.this]
        assert conjuncts and all(
            isinstance(c, exp.Coalesce) and c.this.sql().upper().startswith("TRY(")
            for c in conjuncts
        ), where.sql()


def test_predicate_on_an_unknown_column_is_refused() -> None:
    with pytest.raises(PlanError, match="nope"):
        compile_plan(plan(filters=("nope > 1",)), SCHEMA)


# ------------------------------------------------------------------ refused plans


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_partitions": 0}, PrivacyParameterError),
        ({"max_partitions": True}, PrivacyParameterError),
        ({"max_partitions": 1.5}, PrivacyParameterError),
        ({"max_rows": 0}, PrivacyParameterError),
        ({"max_rows": 2**40}, PrivacyParameterError),
        ({"salt": 2**64}, PrivacyParameterError),
        ({"salt": False}, PrivacyParameterError),
        ({"unit": "missing"}, PlanError),
        ({"group_by": ("region", "region")}, PlanError),
        ({"group_by": ("nope",)}, PlanError),
    ],
)
def test_bad_bounding_is_refused(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        compile_plan(plan(**kwargs), SCHEMA)


@pytest.mark.parametrize(
    "measure",
    [
        Measure(name="s", kind="sum", column="x", lower=math.nan, upper=1.0),
        Measure(name="s", kind="sum", column="x", lower=0.0, upper=math.inf),
        Measure(name="s", kind="sum", column="x", lower=2.0, upper=1.0),
        Measure(name="s", kind="sum", column="x", lower=0.0, upper=1e300, frac_bits=10),
        Measure(name="s", kind="sum", column="x", lower=0.0, upper=2.0**61, frac_bits=2),
        Measure(name="s", kind="sum", column="d", lower=0.0, upper=1.0),
        Measure(name="s", kind="sum", column="nope", lower=0.0, upper=1.0),
        Measure(name="q", kind="sum_sq", column="x", lower=0.0, upper=1.0, center=math.nan),
        Measure(name="h", kind="bin_counts", column="x", edges=(1.0,)),
        Measure(name="h", kind="bin_counts", column="x", edges=(0.0, 2.0, 1.0)),
        Measure(name="h", kind="bin_counts", column="x", edges=(0.0, 1.0, 1.0)),
        Measure(name="h", kind="bin_counts", column="x", edges=(0.0, math.nan)),
        Measure(name="c", kind="category_counts", column="region", categories=()),
        Measure(name="c", kind="category_counts", column="region", categories=(1,)),
        Measure(name="c", kind="category_counts", column="n", categories=("1",)),
        Measure(name="c", kind="category_counts", column="n", categories=(True,)),
        Measure(name="c", kind="category_counts", column="flag", categories=(1,)),
        Measure(name="c", kind="category_counts", column="d", categories=("2020-01-01",)),
        Measure(name="__dpk_x", kind="rows"),  # fine as a name ...
    ],
)
def test_bad_measures_are_refused(measure: Measure) -> None:
    if measure.name == "__dpk_x":  # ... measure names never become identifiers in SQL
        compile_plan(plan(measure), SCHEMA)
        return
    with pytest.raises((PlanError, PrivacyParameterError)):
        compile_plan(plan(measure), SCHEMA)


def test_frac_bits_must_be_a_small_nonnegative_integer() -> None:
    for k in (-1, 65, 1.0, True):
        with pytest.raises(PrivacyParameterError):
            compile_plan(
                plan(Measure(name="s", kind="sum", column="x", lower=0.0, upper=1.0, frac_bits=k)),
                SCHEMA,
            )  # type: ignore[arg-type]


def test_duplicate_or_missing_measures_and_reserved_columns_are_refused() -> None:
    m = Measure(name="a", kind="rows")
    with pytest.raises(PlanError):
        compile_plan(plan(m, m), SCHEMA)
    with pytest.raises(PlanError):
        compile_plan(
            Plan(
                source=SRC,
                filters=(),
                bound=plan().bound,
                aggregate=Aggregate(group_by=(), measures=()),
            ),
            SCHEMA,
        )
    with pytest.raises(PlanError, match="reserved"):
        compile_plan(plan(group_by=("__dpk_u",)), {**SCHEMA, "__dpk_u": "VARCHAR"})


# ------------------------------------------------------------------ shape of the SQL


ALL = (
    Measure(name="n", kind="rows"),
    Measure(name="u", kind="units"),
    Measure(name="v", kind="values", column="x"),
    Measure(name="s", kind="sum", column="x", lower=-1.0, upper=5.0, frac_bits=30),
    Measure(
        name="q",
        kind="sum_sq",
        column="dec",
        lower=0.0,
        upper=9.0,
        center=1.0,
        clamp_lower=-2.0,
        clamp_upper=4.0,
        frac_bits=10,
    ),
    Measure(name="h", kind="bin_counts", column="n", edges=(0.0, 1.0, 2.0, 4.0, 8.0)),
    Measure(name="c", kind="category_counts", column="region", categories=("a", None, "b")),
)


@pytest.mark.parametrize("profile", [DUCKDB, DUCKDB_MD5])
def test_one_statement_one_window_no_division(profile: Any) -> None:
    sql = compile_plan(plan(*ALL, filters=("x > 0", "n * 2 < 9")), SCHEMA, profile).sql
    trees = sqlglot.parse(sql, read="duckdb")
    assert len(trees) == 1
    tree = trees[0]
    assert tree is not None
    windows = list(tree.find_all(exp.Window))
    assert len(windows) == 3  # ROW_NUMBER, RANK, DENSE_RANK ...
    partitions = {tuple(p.sql() for p in w.args["partition_by"]) for w in windows}
    assert partitions == {('"__dpk_u"',)}  # ... all over the same partition: one operator
    assert not list(tree.find_all(exp.Div, exp.IntDiv, exp.Mod))
    for cast in tree.find_all(exp.Cast):  # a cast to an integer type only of a FLOOR
        if cast.to.this in (exp.DataType.Type.BIGINT, exp.DataType.Type.INT):
            assert isinstance(cast.this, exp.Floor)


@pytest.mark.parametrize("profile", [DUCKDB, DUCKDB_MD5])
def test_without_keys_one_row_number_ranks_each_units_rows(profile: Any) -> None:
    """Without group keys the group hash is the same for all of a unit's rows: the statement
    ranks them with one ROW_NUMBER by the row hash and content (the engine reference tests
    check that the same rows are kept)."""
    sql = compile_plan(plan(*ALL, group_by=()), SCHEMA, profile).sql
    tree = sqlglot.parse_one(sql, read="duckdb")
    windows = list(tree.find_all(exp.Window))
    assert len(windows) == 1
    assert isinstance(windows[0].this, exp.RowNumber)
    order = [o.this.sql() for o in windows[0].args["order"].expressions]
    assert '"__dpk_hk"' not in order


def test_without_privacy_unit_there_is_no_window() -> None:
    sql = compile_plan(plan(*ALL, unit=None), SCHEMA).sql
    assert "OVER" not in sql.upper()


def test_identifiers_are_quoted_and_literals_escaped() -> None:
    schema = {'u"ser': "VARCHAR", "reg'ion; DROP": "VARCHAR", "x": "DOUBLE"}
    m = Measure(
        name="c", kind="category_counts", column="reg'ion; DROP", categories=("o'hara", 'q"')
    )
    sql = compile_plan(plan(m, unit='u"ser', group_by=("reg'ion; DROP",)), schema).sql
    tree = sqlglot.parse_one(sql, read="duckdb")
    names = {c.name for c in tree.find_all(exp.Column)}
    assert {'u"ser', "reg'ion; DROP"} <= names
    literals = {lit.this for lit in tree.find_all(exp.Literal) if lit.is_string}
    assert {"o'hara", 'q"'} <= literals


def test_type_families() -> None:
    assert type_family("DOUBLE") == "float"
    assert type_family("float") == "float"
    assert type_family("UBIGINT") == "integer"
    assert type_family("DECIMAL(18,3)") == "decimal"
    assert type_family("VARCHAR") == "string"
    assert type_family("BOOLEAN") == "boolean"
    assert type_family("TIMESTAMP") == "other"


def test_canonical_tokens() -> None:
    assert canonical_token(None) == "N"
    assert canonical_token(math.nan) == "N"
    assert canonical_token(-0.0) == "V3:0p0"
    assert canonical_token(1.5) == "V18:6755399441055744p0"  # 1.5 = 3 * 2^51 * 2^(0 - 52)
    assert canonical_token(5e-324) == "V22:4503599627370496p-1074"
    assert canonical_token(-math.inf) == "V4:-inf"
    assert canonical_token(True) == "V4:true"
    assert canonical_token("a|b") == "V3:a|b"
    assert canonical_token(12) == "V2:12"
    # dates: days since 1970-01-01; wall-clock timestamps: days and microseconds of the day
    # (engines print years outside 1..9999 differently, so no text of the calendar is used)
    assert canonical_token(datetime.date(1970, 1, 2)) == "V1:1"
    assert canonical_token(datetime.date(1, 1, 1)) == "V7:-719162"
    assert (
        canonical_token(datetime.datetime(1969, 12, 31, 23, 59, 59, 999999)) == "V14:-1:86399999999"
    )
    assert canonical_token(datetime.datetime(1970, 1, 1, 0, 0, 0, 1)) == "V3:0:1"


def test_key_types_are_an_allow_list() -> None:
    from dpkit.analytics._column_types import is_key_type

    for ok in (
        "DOUBLE",
        "BIGINT",
        "DECIMAL(38, 10)",
        "VARCHAR",
        "BOOLEAN",
        "DATE",
        "TIMESTAMP",
        "TIMESTAMP WITH TIME ZONE",
        "TIMESTAMP_MS",
        "TIME",
        "BLOB",
        "UUID",
        "NULL",
        "ENUM('a', 'b')",
        "INTERVAL DAY TO SECOND",
        "INTERVAL HOUR",
        "TIME(6)",
    ):
        assert is_key_type(ok), ok
    for bad in (
        "TIMESTAMP_NS",
        "TIMESTAMPTZ_NS",
        "TIME_NS",
        "INTERVAL",
        "INTERVAL YEAR TO MONTH",
        "INTERVAL MONTH",
        "TIME WITH TIME ZONE",
        "VECTOR",
        "MATRIX",
        "VARIANT",
        "GEOMETRY",
        "BIT",
        "TIME(9)",
        "SOMETHING_NEW",
    ):
        assert not is_key_type(bad), bad


def test_engine_options() -> None:
    with pytest.raises(ValueError):
        DuckDBEngine(hash="sha1")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        DuckDBEngine(threads=0)
    import duckdb

    with pytest.raises(ValueError):
        DuckDBEngine(connection=duckdb.connect(), memory_limit="1GB")


# ------------------------------------------------------------------ exact arithmetic in DuckDB


_ENGINE = DuckDBEngine(threads=1)
floats = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.floats(min_value=-200, max_value=200),
    st.none(),
)


def _py_fixed(x: float, lo: float, hi: float, k: int) -> int:
    c = min(max(x, lo), hi)
    return min(
        max(math.floor(Fraction(c) * 2**k), math.floor(Fraction(lo) * 2**k)),
        math.floor(Fraction(hi) * 2**k),
    )


@settings(max_examples=60, deadline=None)
@given(
    xs=st.lists(floats, min_size=1, max_size=40),
    lo=st.floats(min_value=-1e6, max_value=1e6),
    width=st.floats(min_value=0, max_value=1e6),
    k=st.integers(min_value=0, max_value=40),
)
def test_fixed_point_sum_equals_exact_python(
    xs: list[float | None], lo: float, width: float, k: int
) -> None:
    hi = lo + width
    _ENGINE.register("h", pd.DataFrame({"x": pd.Series(xs, dtype="float64")}))
    p = Plan(
        source=Source(kind="table", location="h"),
        filters=(),
        bound=Bound(privacy_unit=None, max_partitions=1, max_rows_per_partition=1, salt=0),
        aggregate=Aggregate(
            group_by=(),
            measures=(
                Measure(name="s", kind="sum", column="x", lower=lo, upper=hi, frac_bits=k),
                Measure(name="v", kind="values", column="x"),
            ),
        ),
    )
    got = _ENGINE.execute(p).values
    finite = [x for x in xs if x is not None and not math.isnan(x)]
    assert got["v"] == (len(finite),)
    assert got["s"] == (sum(_py_fixed(x, lo, hi, k) for x in finite),)


@settings(max_examples=40, deadline=None)
@given(
    edges=st.lists(
        st.floats(min_value=-1e3, max_value=1e3), min_size=2, max_size=300, unique=True
    ).map(sorted),
    xs=st.lists(floats, min_size=1, max_size=60),
)
def test_bin_index_is_exact_at_and_between_edges(
    edges: list[float], xs: list[float | None]
) -> None:
    xs = xs + edges  # values exactly on every edge
    _ENGINE.register("b", pd.DataFrame({"x": pd.Series(xs, dtype="float64")}))
    p = Plan(
        source=Source(kind="table", location="b"),
        filters=(),
        bound=Bound(privacy_unit=None, max_partitions=1, max_rows_per_partition=1, salt=0),
        aggregate=Aggregate(
            group_by=(),
            measures=(Measure(name="h", kind="bin_counts", column="x", edges=tuple(edges)),),
        ),
    )
    got = _ENGINE.execute(p).values["h"][0]
    want = [0] * (len(edges) - 1)
    for x in xs:
        if x is None or math.isnan(x):
            continue
        c = min(max(x, edges[0]), edges[-1])
        want[min(bisect.bisect_right(edges, c) - 1, len(edges) - 2)] += 1
    assert list(got) == want


def test_category_counts_by_type() -> None:
    _ENGINE.register(
        "c",
        pd.DataFrame(
            {"n": [1, 2, 2, 3], "f": [1.0, 2.5, float("nan"), None], "s": ["a", "b", None, "a"]}
        ),
    )

    def counts(col: str, cats: tuple[object, ...]) -> tuple[int, ...]:
        p = Plan(
            source=Source(kind="table", location="c"),
            filters=(),
            bound=Bound(privacy_unit=None, max_partitions=1, max_rows_per_partition=1, salt=0),
            aggregate=Aggregate(
                group_by=(),
                measures=(Measure(name="c", kind="category_counts", column=col, categories=cats),),
            ),
        )
        out = _ENGINE.execute(p).values["c"][0]
        assert isinstance(out, tuple)
        return out

    assert counts("n", (2, 2.0, 2.5, 7, None)) == (2, 0, 0, 0, 0)  # first match wins
    assert counts("f", (2.5, 1, None)) == (1, 1, 2)  # NaN and NULL are the NULL category
    assert counts("s", ("a", "zz", None)) == (2, 0, 1)


def test_nan_in_a_parquet_file_without_null_is_null(tmp_path: Any) -> None:
    """A Parquet file's statistics leave NaN out of min and max; DuckDB 2.0 folded a bare
    ``isnan(k)`` to false from them when the file has no NULL, so the normalization kept NaN
    and the md5 hash saw another token than NULL's (the rows kept differed from Spark's, and
    from the same rows in a table: NULL group 13 rows vs 9). The file and a table holding the
    same rows (no statistics) must keep the same rows, with either hash."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = random.Random(1)
    uid = [f"u{u}" for u in range(60) for _ in range(5)]
    keys = pa.array([0.0, -0.0, math.nan, 1e-45, 3.4e38], pa.float64())
    rows = pa.table({"uid": uid, "k": keys.take(pa.array([rng.randrange(5) for _ in uid]))})
    path = tmp_path / "nan.parquet"
    pq.write_table(rows, path)
    con = duckdb.connect()
    con.register("rows_view", rows)
    con.execute("CREATE TABLE t AS SELECT * FROM rows_view")  # a table: no file statistics
    p = plan(group_by=("k",), max_partitions=1, max_rows=1, salt=12345)
    for hash_kind in ("native", "md5"):
        from_file = DuckDBEngine(threads=1, hash=hash_kind).execute(  # type: ignore[arg-type]
            dataclasses.replace(p, source=Source(kind="parquet", location=str(path)))
        )
        from_table = DuckDBEngine(connection=con, hash=hash_kind).execute(p)  # type: ignore[arg-type]
        assert sum(from_file.values["n"]) == 60  # one row per person: bounding binds
        assert dict(zip(from_file.keys, from_file.values["n"], strict=True)) == dict(
            zip(from_table.keys, from_table.values["n"], strict=True)
        ), hash_kind
