"""The DuckDB engine's pre-noise aggregates against an independent pure-Python implementation.

The reference (``_engine_reference.py``) recomputes the md5 profile's bounding with hashlib and
plain Python, row by row, and the exact aggregates with Fractions; the engine must agree
exactly.
"""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
from _engine_reference import MEASURES as MEASURES_ALL
from _engine_reference import as_dict, people, plan_for, reference

from dpkit.analytics._aggregates import _linspace
from dpkit.analytics._plan import Filter, Measure, Source
from dpkit.analytics.engines.duckdb import DuckDBEngine

# ------------------------------------------------------------------ tests


@pytest.mark.parametrize(
    ("group_by", "max_partitions", "max_rows", "salt"),
    [
        (("region",), 1, 1, 1),
        (("region",), 2, 3, 2**64 - 1),
        (("region", "kind"), 3, 2, 7),
        ((), 1, 4, 12345),
        (("kind",), 10, 10, 99),
    ],
)
def test_md5_engine_equals_python_reference(
    group_by: tuple[str, ...], max_partitions: int, max_rows: int, salt: int
) -> None:
    df = people(300, seed=salt % 1000)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    plan = plan_for(
        Source(kind="table", location="people"),
        group_by=group_by,
        max_partitions=max_partitions,
        max_rows=max_rows,
        salt=salt,
    )
    got = as_dict(engine.execute(plan))
    want = reference(df, plan)
    assert got == want


def test_md5_reference_with_a_predicate() -> None:
    df = people(200, seed=3)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    plan = plan_for(
        Source(kind="table", location="people"),
        filters=(
            Filter(predicate="age >= 18 AND kind IN (1, 3)"),
            Filter(predicate="x > 5 OR x IS NULL"),
        ),
    )
    # NaN behaves as NULL in predicates: `x > 5` is not true for NaN (NaN sorts above every
    # number in DuckDB, so without normalization it would be).
    got = as_dict(engine.execute(plan))
    want = reference(
        df,
        plan,
        keep=lambda r: r["age"] >= 18 and r["kind"] in (1, 3) and (r["x"] is None or r["x"] > 5),
    )
    assert got == want


def test_md5_reference_without_privacy_unit() -> None:
    df = people(150, seed=5)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    plan = plan_for(
        Source(kind="table", location="people"), unit=None, max_partitions=1, max_rows=1
    )
    got = as_dict(engine.execute(plan))
    assert got == reference(df, plan)
    assert sum(v["n"] for v in got.values()) == len(df)  # every row kept: each is its own unit
    assert all(v["n"] == v["units"] for v in got.values())


def test_md5_profile_is_a_salted_choice() -> None:
    """Different salts keep different rows (else the salt would not be mixed in)."""
    df = people(300, seed=11)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    src = Source(kind="table", location="people")
    a = as_dict(engine.execute(plan_for(src, max_partitions=1, max_rows=1, salt=1)))
    b = as_dict(engine.execute(plan_for(src, max_partitions=1, max_rows=1, salt=2)))
    assert a != b


@pytest.mark.parametrize("unit", ["uid", None])
@pytest.mark.parametrize("group_by", [("region",), ()])
@pytest.mark.parametrize(
    "kind", ["rows", "units", "values", "sum", "sum_sq", "bin_counts", "category_counts"]
)
def test_every_measure_alone_with_and_without_unit_and_keys(
    unit: str | None, group_by: tuple[str, ...], kind: str
) -> None:
    """Each measure kind alone compiles and runs for (unit / none) x (group_by / none).

    The case without unit, keys or value columns reads no column at all (it used to compile
    to a SELECT without a selection list).
    """
    df = people(60, seed=17)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    measure = next(m for m in MEASURES_ALL if m.kind == kind)
    plan = plan_for(
        Source(kind="table", location="people"),
        unit=unit,
        group_by=group_by,
        max_partitions=1,
        max_rows=2,
        measures=(measure,),
    )
    got = as_dict(engine.execute(plan))
    assert got == reference(df, plan)
    if unit is None and kind == "rows":
        assert sum(v[measure.name] for v in got.values()) == len(df)


def test_count_alone_with_a_predicate_and_no_unit_or_keys() -> None:
    df = people(80, seed=19)
    engine = DuckDBEngine(hash="md5", threads=1)
    engine.register("people", df)
    plan = plan_for(
        Source(kind="table", location="people"),
        unit=None,
        group_by=(),
        filters=(Filter(predicate="age >= 18"),),
        measures=(next(m for m in MEASURES_ALL if m.kind == "rows"),),
    )
    got = as_dict(engine.execute(plan))
    assert got == reference(df, plan, keep=lambda r: r["age"] >= 18)
    assert got[()]["n"] == int((df["age"] >= 18).sum())


def _exact_bin(x: float | None, edges: tuple[float, ...]) -> int | None:
    """The comparison-defined bin: clamp into [edges[0], edges[-1]], then the largest ``j``
    with ``edges[j] <= c`` (the last bin holds the upper end); NULL and NaN have no bin."""
    if x is None or math.isnan(x):
        return None
    c = min(max(x, edges[0]), edges[-1])
    return max(j for j in range(len(edges) - 1) if edges[j] <= c)


def _adversarial(edges: tuple[float, ...]) -> list[float | None]:
    vals: list[float | None] = [
        None,
        math.nan,
        math.inf,
        -math.inf,
        1e308,
        -1e308,
        0.0,
        -0.0,
        5e-324,
        -5e-324,
        2.2250738585072014e-308,
    ]
    for e in edges:
        vals += [
            e,
            math.nextafter(e, math.inf),
            math.nextafter(e, -math.inf),
            math.nextafter(math.nextafter(e, math.inf), math.inf),
        ]
    for a, b in itertools.pairwise(edges):
        vals.append(a + (b - a) / 2)
    return vals


EDGE_SETS = {
    "0..100 x1024": _linspace(0.0, 100.0, 1024),
    "-1..1 x1000": _linspace(-1.0, 1.0, 1000),
    "0.1..0.7 x3": _linspace(0.1, 0.7, 3),
    "-1e300..1e300 x7": _linspace(-1e300, 1e300, 7),
    "1e-300..3e-300 x5": _linspace(1e-300, 3e-300, 5),
    "2^52 steps of 1 (tree)": tuple(float(2**52 + i) for i in range(9)),
    "uneven (tree)": (-10.0, 0.0, 0.5, 50.0, 100.0),
}


@pytest.mark.parametrize("name", list(EDGE_SETS))
def test_bin_index_equals_the_comparison_defined_bin(name: str) -> None:
    edges = EDGE_SETS[name]
    vals = _adversarial(edges)
    df = pd.DataFrame({"id": range(len(vals)), "x": pd.Series(vals, dtype="float64")})
    engine = DuckDBEngine(threads=1)
    engine.register("v", df)
    plan = plan_for(
        Source(kind="table", location="v"),
        unit=None,
        group_by=("id",),
        max_partitions=1,
        max_rows=1,
        measures=(Measure(name="h", kind="bin_counts", column="x", edges=edges),),
    )
    sql = engine.compile(plan).sql
    arithmetic = "(tree)" not in name
    assert ("floor(" in sql.lower()) == arithmetic  # the arithmetic path is the one tested
    got = as_dict(engine.execute(plan))
    for i, x in enumerate(vals):
        counts = got[(i,)]["h"]
        want = _exact_bin(x, edges)
        if want is None:
            assert sum(counts) == 0, (x, counts)
        else:
            assert counts[want] == 1 and sum(counts) == 1, (x, want, counts)


def test_bin_index_test_catches_an_off_by_one_correction(monkeypatch: pytest.MonkeyPatch) -> None:
    """Companion: without the correction step the floor guess misplaces some edge values."""
    from sqlglot import exp

    from dpkit.analytics.engines._compiler import measures
    from dpkit.analytics.engines._compiler.nodes import cast_to, clamp, double

    monkeypatch.setattr(measures, "_bin_correct", lambda c, g, *a: g.copy())
    monkeypatch.setattr(
        measures,
        "_bin_guess",
        lambda c, edges, w, profile: cast_to(
            clamp(
                exp.Floor(
                    this=exp.Mul(
                        this=exp.Sub(this=c.copy(), expression=double(edges[0], profile)),
                        expression=double(1.0 / w, profile),
                    )
                ),
                double(0.0, profile),
                double(len(edges) - 2.0, profile),
            ),
            profile.fixed_type,
        ),
    )
    with pytest.raises(AssertionError):
        for name in ("-1..1 x1000", "0.1..0.7 x3", "0..100 x1024"):
            test_bin_index_equals_the_comparison_defined_bin(name)
