"""DuckDB engine: invariants of the native-hash bounding, special values, sources, adversaries."""

from __future__ import annotations

import math
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _engine_reference import MEASURES, as_dict, people, plan_for

from dpkit.analytics._plan import Aggregate, Bound, Filter, Measure, Plan, Source
from dpkit.analytics._sql import PredicateError
from dpkit.analytics.engines import DuckDBEngine, EngineError

TABLE = Source(kind="table", location="t")


def engine_with(df: Any, **kw: Any) -> DuckDBEngine:
    e = DuckDBEngine(threads=1, **kw)
    e.register("t", df)
    return e


# ------------------------------------------------------------------ native-hash invariants


def test_one_unit_keeps_at_most_max_partitions_groups_and_max_rows_each() -> None:
    rng = random.Random(1)
    rows = [{"uid": "a", "k": f"k{rng.randrange(10)}", "x": rng.uniform(0, 1)} for _ in range(200)]
    df = pd.DataFrame(rows)
    per_key = df.groupby("k").size().to_dict()
    for salt in range(5):
        res = as_dict(
            engine_with(df).execute(
                plan_for(
                    TABLE,
                    group_by=("k",),
                    max_partitions=3,
                    max_rows=4,
                    salt=salt,
                    measures=(Measure(name="n", kind="rows"), Measure(name="u", kind="units")),
                )
            )
        )
        assert len(res) == 3
        for k, v in res.items():
            assert v["n"] == min(4, per_key[k[0]])
            assert v["u"] == 1


def test_result_is_the_sum_over_units_of_each_units_own_result() -> None:
    """Stability: a unit's kept rows depend only on its own rows, so aggregates add up."""
    df = people(25, seed=21)
    df = df[df["uid"].notna()]
    plan = plan_for(
        TABLE,
        max_partitions=2,
        max_rows=2,
        salt=4242,
        measures=tuple(m for m in MEASURES if m.kind not in ("bin_counts", "category_counts")),
    )
    whole = as_dict(engine_with(df).execute(plan))
    total: dict[Any, dict[str, int]] = {}
    for _, part in df.groupby("uid"):
        for k, v in as_dict(engine_with(part.reset_index(drop=True)).execute(plan)).items():
            acc = total.setdefault(k, dict.fromkeys(v, 0))
            for name, val in v.items():
                acc[name] += val
    assert whole == total


def test_limits_hold_for_every_group_and_the_salt_matters() -> None:
    df = people(500, seed=8)
    n_units = df["uid"].nunique(dropna=False)
    seen = set()
    for salt in (1, 2, 3):
        res = as_dict(
            engine_with(df).execute(plan_for(TABLE, max_partitions=2, max_rows=3, salt=salt))
        )
        assert sum(v["units"] for v in res.values()) <= 2 * n_units
        for v in res.values():
            assert v["units"] <= v["n"] <= 3 * v["units"]
        seen.add(repr(sorted(((k, v["s"]) for k, v in res.items()), key=repr)))
    assert len(seen) > 1


@pytest.mark.parametrize("hash_kind", ["native", "md5"])
def test_results_do_not_depend_on_row_order(hash_kind: str) -> None:
    """12 row orders give identical results (exact integer sums; plain float sums do not)."""
    df = people(300, seed=31)
    # values whose float sum depends on the order (a large value beside small ones)
    df.loc[df.index[::7], "x"] = 99.999999999
    df.loc[df.index[::11], "x"] = 1e-9
    plan = plan_for(TABLE, max_partitions=2, max_rows=2, salt=77)
    results = set()
    for seed in range(12):
        shuffled = df.sample(frac=1.0, random_state=seed).reset_index(drop=True)
        got = as_dict(engine_with(shuffled, hash=hash_kind).execute(plan))
        results.add(repr(sorted(got.items(), key=repr)))
    assert len(results) == 1


def test_plain_float_sums_of_the_same_values_depend_on_order() -> None:
    """Companion: the values above do give different double sums in different orders."""
    rng = random.Random(0)
    xs = [99.999999999] * 50 + [1e-9] * 50 + [rng.uniform(0, 100) for _ in range(100)]
    sums = set()
    for _ in range(12):
        rng.shuffle(xs)
        sums.add(sum(xs))
    assert len(sums) > 1


def test_exact_fixed_point_sums_equal_python_integer_sums() -> None:
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.uniform(-50, 150, 5000), [0.1, 1 / 3, 2.5e-7, 99.99999999]])
    df = pd.DataFrame({"uid": np.arange(len(x)) // 3, "x": x})
    lo, hi, k = -10.0, 100.0, 40
    plan = plan_for(
        TABLE,
        group_by=(),
        max_partitions=1,
        max_rows=3,
        measures=(Measure(name="s", kind="sum", column="x", lower=lo, upper=hi, frac_bits=k),),
    )
    got = engine_with(df).execute(plan).values["s"][0]
    want = sum(math.floor(Fraction(min(max(float(v), lo), hi)) * 2**k) for v in x)
    assert isinstance(got, int)
    assert got == want


# ------------------------------------------------------------------ special values


SPECIAL_X = [
    1.0,
    float("nan"),
    None,
    float("inf"),
    -float("inf"),
    1e308,
    -0.0,
    -1e308,
    5e-324,
    10.0,
]


def _special_frame() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "uid": [f"u{i}" for i in range(len(SPECIAL_X))],
            "x": SPECIAL_X,
            "key": [0.0, -0.0, float("nan"), None, 1.5, 1.5, 0.0, float("nan"), 2.0, None],
        }
    )


SPECIAL_MEASURES = (
    Measure(name="n", kind="rows"),
    Measure(name="v", kind="values", column="x"),
    Measure(name="s", kind="sum", column="x", lower=0.0, upper=10.0, frac_bits=4),
    Measure(name="h", kind="bin_counts", column="x", edges=(0.0, 1.0, 10.0)),
)


def test_special_values_global_group() -> None:
    plan = plan_for(TABLE, group_by=(), max_partitions=1, max_rows=1, measures=SPECIAL_MEASURES)
    got = as_dict(engine_with(_special_frame()).execute(plan))
    # clamp to [0, 10] then *16: 1 -> 16, inf -> 160, -inf -> 0, 1e308 -> 160, -0.0 -> 0,
    # -1e308 -> 0, 5e-324 -> 0, 10 -> 160; NaN and NULL skipped by value measures.
    assert got == {(): {"n": 10, "v": 8, "s": 16 + 160 + 0 + 160 + 0 + 0 + 0 + 160, "h": (4, 4)}}


def test_special_values_as_keys() -> None:
    plan = plan_for(
        TABLE,
        group_by=("key",),
        max_partitions=1,
        max_rows=1,
        measures=(Measure(name="n", kind="rows"),),
    )
    got = as_dict(engine_with(_special_frame()).execute(plan))
    # 0.0 and -0.0 are one key (returned as +0.0); NaN and NULL are the one NULL key.
    assert got == {(0.0,): {"n": 3}, (None,): {"n": 4}, (1.5,): {"n": 2}, (2.0,): {"n": 1}}
    zero = next(k[0] for k in got if k[0] == 0.0)
    assert math.copysign(1.0, zero) == 1.0


def test_null_units_are_one_unit() -> None:
    df = pd.DataFrame(
        {"uid": [None, None, None, "a", float("nan")], "k": ["p", "q", "r", "p", "p"]}
    )
    plan = plan_for(
        TABLE,
        group_by=("k",),
        max_partitions=1,
        max_rows=5,
        measures=(Measure(name="n", kind="rows"), Measure(name="u", kind="units")),
    )
    got = as_dict(engine_with(df).execute(plan))
    # the NULL unit (None and NaN alike) keeps one group; "a" keeps its one group
    assert sum(v["u"] for v in got.values()) == 2
    # the NULL unit has rows p, q, r, p: it keeps p (2 rows) or q or r (1 row); "a" keeps p
    assert sum(v["n"] for v in got.values()) in (2, 3)


def test_special_values_through_parquet_and_csv(tmp_path: Path) -> None:
    table = pa.table(
        {
            "uid": pa.array([f"u{i}" for i in range(len(SPECIAL_X))]),
            "x": pa.array(SPECIAL_X, type=pa.float64(), from_pandas=False),
        }
    )
    pq.write_table(table, tmp_path / "s.parquet")
    plan = plan_for(
        Source(kind="parquet", location=str(tmp_path / "s.parquet")),
        group_by=(),
        max_partitions=1,
        max_rows=1,
        measures=SPECIAL_MEASURES,
    )
    want = {(): {"n": 10, "v": 8, "s": 496, "h": (4, 4)}}
    assert as_dict(DuckDBEngine(threads=1).execute(plan)) == want
    lines = ["uid,x"] + [f"u{i},{'' if v is None else repr(v)}" for i, v in enumerate(SPECIAL_X)]
    lines += ["u98,not a number", 'u99,"1,5"', "u97,2,extra,fields", "u96", "u95,\udcff"]
    (tmp_path / "s.csv").write_bytes("\n".join(lines).encode("utf-8", "surrogateescape"))
    plan = plan_for(
        Source(kind="csv", location=str(tmp_path / "s.csv")),
        group_by=(),
        max_partitions=1,
        max_rows=1,
        measures=SPECIAL_MEASURES,
    )
    got = as_dict(DuckDBEngine(threads=1).execute(plan))
    # Text that is no number is a row but not a value; a line with extra fields keeps its
    # first two; a line with too few fields and a line of invalid UTF-8 are dropped.
    assert got == {(): {"n": 13, "v": 9, "s": 496 + 32, "h": (4, 5)}}


def test_odd_column_names_and_keys_are_quoted() -> None:
    name = "we\"ird'; DROP TABLE t; --"
    df = pd.DataFrame(
        {"ü ser": ["a", "b", "b"], name: ["x'y", 'q"', "x'y"], "v a l": [1.0, 2.0, 3.0]}
    )
    e = engine_with(df)
    plan = plan_for(
        TABLE,
        unit="ü ser",
        group_by=(name,),
        max_partitions=5,
        max_rows=5,
        measures=(
            Measure(name="n", kind="rows"),
            Measure(name="s", kind="sum", column="v a l", lower=0.0, upper=10.0),
            Measure(
                name="c", kind="category_counts", column=name, categories=("x'y", 'q"', "nope")
            ),
        ),
    )
    got = as_dict(e.execute(plan))
    assert got == {
        ("x'y",): {"n": 2, "s": 4, "c": (2, 0, 0)},
        ('q"',): {"n": 1, "s": 2, "c": (0, 1, 0)},
    }
    assert e.connection.execute("SELECT COUNT(*) FROM t").fetchone() == (3,)


def test_injection_through_predicates_and_locations_is_refused() -> None:
    df = pd.DataFrame({"u": ["a"], "x": [1.0]})
    e = engine_with(df)
    for bad in [
        "x > 1; DROP TABLE t",
        "x > (SELECT 1)",
        "x IN (SELECT x FROM t)",
        "read_parquet('/etc/passwd') IS NULL",
        "x > 1) OR (1 = 1",
        "count(*) > 0",
        "x::INT > 0",
    ]:
        with pytest.raises(PredicateError):
            e.execute(
                plan_for(
                    TABLE,
                    unit="u",
                    group_by=(),
                    filters=(Filter(predicate=bad),),
                    measures=(Measure(name="n", kind="rows"),),
                )
            )
    # a comment cannot smuggle code: comments are dropped from the regenerated predicate
    got = e.execute(
        plan_for(
            TABLE,
            unit="u",
            group_by=(),
            filters=(Filter(predicate="x > 5 -- */ OR 1 = 1"),),
            measures=(Measure(name="n", kind="rows"),),
        )
    )
    assert got.values["n"] == (0,)
    with pytest.raises(EngineError):
        e.execute(
            plan_for(
                Source(kind="parquet", location="x'); DROP TABLE t; --"),
                group_by=(),
                measures=(Measure(name="n", kind="rows"),),
            )
        )
    with pytest.raises(EngineError, match='"t; DROP TABLE t"'):  # one quoted, unknown name
        e.execute(
            plan_for(
                Source(kind="table", location="t; DROP TABLE t"),
                group_by=(),
                measures=(Measure(name="n", kind="rows"),),
            )
        )
    assert e.connection.execute("SELECT COUNT(*) FROM t").fetchone() == (1,)


def test_predicates_that_could_raise_drop_the_row_instead() -> None:
    df = pd.DataFrame({"u": ["a", "b", "c"], "big": [2, 2**62, -(2**62)]})
    e = engine_with(df)
    got = e.execute(
        plan_for(
            TABLE,
            unit="u",
            group_by=(),
            filters=(Filter(predicate="big * big > 0"),),
            measures=(Measure(name="n", kind="rows"),),
        )
    )
    assert got.values["n"] == (1,)  # the overflowing rows are dropped, nothing raises


# ------------------------------------------------------------------ neighbouring tables


def test_neighbouring_tables_with_an_adversarial_unit_behave_alike() -> None:
    base = people(200, seed=13)
    base = base[base["uid"].notna()].reset_index(drop=True)
    n = 10**6
    rng = np.random.default_rng(0)
    specials = np.array([np.nan, np.inf, -np.inf, 1e308, -1e308, -0.0, 5e-324, 50.0])
    evil = pd.DataFrame(
        {
            "uid": "evil'\"; --",
            "region": pd.Series(
                rng.choice(np.array(["north", "south", "ünï", "q\"'x", "\\"], object), n)
            ).where(rng.random(n) > 0.2, None),
            "kind": rng.integers(-(2**62), 2**62, n),
            "x": rng.choice(specials, n),
            "age": rng.integers(0, 100, n),
        }
    )
    plan = plan_for(TABLE, max_partitions=2, max_rows=3, salt=5)
    a = as_dict(engine_with(base).execute(plan))
    b = as_dict(engine_with(pd.concat([base, evil], ignore_index=True)).execute(plan))
    changed = [k for k in set(a) | set(b) if a.get(k) != b.get(k)]
    assert len(changed) <= 2  # the unit touches at most max_partitions groups
    s_meas = next(m for m in MEASURES if m.name == "s")
    per_row = max(
        abs(math.floor(s_meas.lower * 2**s_meas.frac_bits)),
        abs(math.floor(s_meas.upper * 2**s_meas.frac_bits)),
    )
    for k in changed:
        va = a.get(k) or {"n": 0, "units": 0, "s": 0}
        vb = b[k]
        assert 0 <= vb["n"] - va["n"] <= 3
        assert vb["units"] - va["units"] == 1
        assert abs(vb["s"] - va["s"]) <= 3 * per_row


# ------------------------------------------------------------------ sources and frames


def _frames(df: pd.DataFrame) -> dict[str, Any]:
    table = pa.Table.from_pandas(df, preserve_index=False)
    return {
        "pandas": df,
        "polars": pl.from_pandas(df),
        "polars_lazy": pl.from_pandas(df).lazy(),
        "arrow": table,
        "arrow_reader": pa.RecordBatchReader.from_batches(table.schema, table.to_batches()),
    }


def test_every_frame_kind_gives_the_same_result() -> None:
    df = people(150, seed=17)
    df["x"] = df["x"].astype(float)  # pandas keeps None as NaN; Arrow/Polars make them null
    plan = plan_for(TABLE, max_partitions=2, max_rows=2, salt=3)
    results = {}
    for kind, frame in _frames(df).items():
        e = DuckDBEngine(threads=1, hash="md5")
        e.register("t", frame)
        results[kind] = as_dict(e.execute(plan))
        results[kind + " (twice)"] = as_dict(e.execute(plan))  # readers are materialized
    first = results["pandas"]
    assert all(r == first for r in results.values())


def test_parquet_and_csv_files_and_globs(tmp_path: Path) -> None:
    df = people(100, seed=19)
    df["kind"] = df["kind"].astype(str)
    df = df[df["uid"].notna() & df["region"].notna()].reset_index(drop=True)
    df["x"] = [v if v is not None and math.isfinite(v) else 1.0 for v in df["x"]]
    half = len(df) // 2
    df.iloc[:half].to_parquet(tmp_path / "a.parquet")
    df.iloc[half:].to_parquet(tmp_path / "b.parquet")
    df.to_csv(tmp_path / "all.csv", index=False)
    # no truncation (limits above every unit's rows) so text and binary sources must agree
    measures = tuple(m for m in MEASURES if m.kind != "category_counts")
    plan_args = dict(
        group_by=("region", "kind"), max_partitions=100, max_rows=100, measures=measures
    )
    want = as_dict(engine_with(df).execute(plan_for(TABLE, **plan_args)))  # type: ignore[arg-type]
    e = DuckDBEngine(threads=1)
    glob = str(tmp_path / "*.parquet")
    got_pq = as_dict(e.execute(plan_for(Source(kind="parquet", location=glob), **plan_args)))  # type: ignore[arg-type]
    got_csv = as_dict(
        e.execute(plan_for(Source(kind="csv", location=str(tmp_path / "all.csv")), **plan_args))
    )  # type: ignore[arg-type]
    assert got_pq == want
    assert got_csv == want
    assert e.columns(Source(kind="csv", location=str(tmp_path / "all.csv"))) == {
        c: "VARCHAR" for c in df.columns
    }


def test_a_connection_and_table_name(tmp_path: Path) -> None:
    con = duckdb.connect()
    con.execute(
        "CREATE SCHEMA s; CREATE TABLE s.people AS SELECT i % 7 AS uid, i % 3 AS k, "
        "i * 1.5 AS x FROM range(100) t(i)"
    )
    e = DuckDBEngine(connection=con)
    cols = e.columns(Source(kind="table", location="s.people"))
    assert list(cols) == ["uid", "k", "x"]
    assert cols["uid"] == "BIGINT"
    assert cols["x"].startswith("DECIMAL")
    got = as_dict(
        e.execute(
            plan_for(
                Source(kind="table", location="s.people"),
                unit="uid",
                group_by=("k",),
                max_partitions=3,
                max_rows=100,
                measures=(
                    Measure(name="n", kind="rows"),
                    Measure(name="s", kind="sum", column="x", lower=0.0, upper=1000.0),
                ),
            )
        )
    )
    assert sum(v["n"] for v in got.values()) == 100
    assert sum(v["s"] for v in got.values()) == sum(math.floor(i * 1.5) for i in range(100))


def test_register_refuses_other_objects() -> None:
    with pytest.raises(TypeError):
        DuckDBEngine().register("t", [1, 2, 3])


def test_larger_than_memory_parquet_under_a_small_memory_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.parquet"
    con = duckdb.connect()
    con.execute(
        f"COPY (SELECT hash(i // 4) % 600000 AS uid, 'c' || (hash(i, 1) % 500) AS k, "
        f"(hash(i, 2) % 10000) / 100.0 AS x FROM range(2400000) t(i)) TO '{path}' "
        "(FORMAT parquet)"
    )
    plan = Plan(
        source=Source(kind="parquet", location=str(path)),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=2, max_rows_per_partition=2, salt=9),
        aggregate=Aggregate(
            group_by=("k",),
            measures=(
                Measure(name="n", kind="rows"),
                Measure(name="u", kind="units"),
                Measure(name="s", kind="sum", column="x", lower=0.0, upper=100.0, frac_bits=8),
            ),
        ),
    )
    small = DuckDBEngine(memory_limit="40MB", threads=1).execute(plan)
    free = DuckDBEngine(threads=1).execute(plan)
    assert sorted(zip(small.keys, small.values["s"], strict=True)) == sorted(
        zip(free.keys, free.values["s"], strict=True)
    )
    assert sum(small.values["u"]) > 0
