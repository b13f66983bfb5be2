"""Quantiles and histograms of DATE and TIMESTAMP columns take their bounds and edges as dates.

A date column is read as its day number since 1970-01-01, a timestamp as its microseconds since
the epoch (a wall-clock ``TIMESTAMP`` as if in UTC), exactly, and the bounds and edges given as
ISO strings, ``datetime.date`` or ``datetime.datetime`` become the same integers: a release over
a date column is the release over the day-number column, decoded back into dates (rounded down).
Everything that does not fit the column's type is refused before the charge.
"""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._aggregates import from_number, to_number
from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines._compiler import compile_plan
from dpkit.errors import DPKitError, PlanError, PrivacyParameterError
from dpkit.noise import RandomSource

EPOCH = dt.date(1970, 1, 1)
N = 400


def _table() -> pa.Table:
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=(i * 37) % 366) for i in range(N)]
    # wall-clock times of 1995, below 2**50 microseconds: the reference column of their
    # microsecond numbers takes the same numeric bounds
    times = [
        dt.datetime(1995, 1, 1) + dt.timedelta(minutes=97 * i, microseconds=i) for i in range(N)
    ]
    micros = [(t - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1) for t in times]
    return pa.table(
        {
            "uid": [i % 40 for i in range(N)],
            "d": pa.array(days, pa.date32()),
            "dn": [(d - EPOCH).days for d in days],
            "ts": pa.array(times, pa.timestamp("us")),
            "tz": pa.array(times, pa.timestamp("us", tz="UTC")),
            "us": micros,
        }
    )


def _session(budget: Budget | None = None) -> dpa.Session:
    return dpa.Session(
        _table(),
        privacy_unit="uid",
        budget=budget or Budget(epsilon=100.0),
        source_of_randomness=RandomSource(seed=1, insecure=True),
    )


def _run(stat: dpa.Statistic, budget: Budget | None = None) -> Any:
    # every unit has 10 rows, all kept: the date and the number columns bound alike
    return (
        _session(budget)
        .query()
        .bound(max_partitions=1, max_rows_per_partition=10)
        .agg(q=stat)
        .run(epsilon=5.0)
    )


def test_date_quantile_is_the_day_number_quantile_rounded_down() -> None:
    lo, hi = dt.date(2024, 1, 1), dt.date(2024, 12, 31)
    got = _run(dpa.quantile("d", [0.1, 0.5, 0.9], bounds=("2024-01-01", hi), bins=256))
    ref = _run(
        dpa.quantile("dn", [0.1, 0.5, 0.9], bounds=((lo - EPOCH).days, (hi - EPOCH).days), bins=256)
    )
    for c in ("q_p10", "q_p50", "q_p90"):
        value = got[c].iloc[0]
        assert type(value) is dt.date
        assert value == EPOCH + dt.timedelta(days=int(ref[c].iloc[0] // 1))


@pytest.mark.parametrize(("column", "zone"), [("ts", None), ("tz", dt.timezone.utc)])
def test_timestamp_quantile_is_the_microsecond_quantile(column: str, zone: Any) -> None:
    lo, hi = dt.datetime(1995, 1, 1), dt.datetime(1995, 2, 1)
    got = _run(dpa.quantile(column, [0.5], bounds=(lo.isoformat(), hi), bins=512))
    ref = _run(
        dpa.quantile("us", [0.5], bounds=(to_number(lo, "local"), to_number(hi, "local")), bins=512)
    )
    value = got["q_p50"].iloc[0]
    assert isinstance(value, dt.datetime) and value.tzinfo == zone
    expected = dt.datetime(1970, 1, 1, tzinfo=zone) + dt.timedelta(
        microseconds=int(ref["q_p50"].iloc[0] // 1)
    )
    assert value == expected


def test_date_histogram_counts_are_the_engine_counts_of_the_dates() -> None:
    edges: list[Any] = [
        "2024-01-01",
        dt.date(2024, 4, 1),
        dt.date(2024, 7, 1),
        dt.datetime(2024, 10, 1).date(),
        "2024-12-31",
    ]
    s = _session()
    prepared = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=10)
        .agg(h=dpa.histogram("d", edges=edges))
        .prepare(epsilon=1.0)
    )
    exact = prepared.exact(s.engine).values["h:bins"][0]
    bounds = [dt.date.fromisoformat(e) if isinstance(e, str) else e for e in edges]
    days = _table().column("d").to_pylist()
    expected = tuple(
        sum(1 for d in days if a <= d < b or (b == bounds[-1] and d == b))
        for a, b in itertools.pairwise(bounds)
    )
    assert exact == expected and sum(expected) == N
    names = [
        c
        for c in prepared.release_from(
            prepared.exact(s.engine), source=RandomSource(seed=1, insecure=True)
        ).columns
        if not c.endswith(("_low", "_high"))
    ]
    assert names == [
        "h[2024-01-01,2024-04-01)",
        "h[2024-04-01,2024-07-01)",
        "h[2024-07-01,2024-10-01)",
        "h[2024-10-01,2024-12-31]",
    ]
    assert s.budget.spent == (0.0, 0.0)


@pytest.mark.parametrize(
    ("edge", "first"), [("1995-01-01T01:37:00.000001", 1), ("1995-01-01T01:37:00.000002", 2)]
)
def test_timestamp_edges_are_exact_to_the_microsecond(edge: str, first: int) -> None:
    # rows at 1995-01-01 00:00:00.000000 and 01:37:00.000001: an edge at the second row's
    # time puts it in the second bin, one microsecond later in the first
    s = _session()
    prepared = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=10)
        .agg(h=dpa.histogram("ts", edges=["1995-01-01T00:00:00", edge, "1996-01-01T00:00:00"]))
        .prepare(epsilon=1.0)
    )
    counts = prepared.exact(s.engine).values["h:bins"][0]
    assert counts == (first, N - first)


def test_conversions_are_exact_and_round_down() -> None:
    assert to_number(dt.date(2024, 1, 1), "date") == 19723.0
    assert to_number(dt.date(1969, 12, 31), "date") == -1.0
    assert to_number(dt.datetime(1970, 1, 1, 0, 0, 0, 1), "local") == 1.0
    aware = dt.datetime(1970, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert to_number(aware, "instant") == 0.0
    assert to_number(dt.date(1970, 1, 2), "instant") == 86_400e6  # a naive bound is UTC
    assert from_number(19723.999, "date") == dt.date(2024, 1, 1)
    assert from_number(-0.5, "date") == dt.date(1969, 12, 31)
    assert from_number(1.9, "instant") == dt.datetime(
        1970, 1, 1, 0, 0, 0, 1, tzinfo=dt.timezone.utc
    )


@pytest.mark.parametrize(
    ("stat", "match"),
    [
        (lambda: dpa.quantile("d", [0.5], bounds=(19723, 20088)), "give its bounds as dates"),
        (lambda: dpa.histogram("d", edges=[19723, 19800, 20088]), "give its edges as dates"),
        (
            lambda: dpa.quantile("dn", [0.5], bounds=("2024-01-01", "2024-12-31")),
            "not a date or timestamp column",
        ),
        (lambda: dpa.mean("d", bounds=(19723, 20088)), "have no mean"),
        (lambda: dpa.quantile("d", [0.5], bounds="auto"), "instead of 'auto'"),
        (
            lambda: dpa.quantile("d", [0.5], bounds=("2024-01-01", "2024-06-01T12:00")),
            "has a time of day",
        ),
        (
            lambda: dpa.quantile("ts", [0.5], bounds=("1995-01-01", "1996-01-01T00:00+00:00")),
            "has a time zone",
        ),
        (lambda: dpa.histogram("d", edges=["2024-06-01", "2024-01-01"]), "strictly increasing"),
        (
            lambda: dpa.quantile("ts", [0.5], bounds=("1995-01-01", "2400-01-01")),
            "too far from 1970",
        ),
    ],
)
def test_bounds_that_do_not_fit_the_column_are_refused_before_the_charge(
    stat: Any, match: str
) -> None:
    budget = Budget(epsilon=10.0)
    with pytest.raises(PrivacyParameterError, match=match):
        _run(stat(), budget)
    assert budget.spent == (0.0, 0.0)


@pytest.mark.parametrize(
    "bounds",
    [("2024-13-01", "2024-12-31"), ("2024-01-01", "next year"), (dt.date(2024, 1, 1), 5.0)],
)
def test_text_that_is_no_iso_date_is_refused_when_the_statistic_is_built(bounds: Any) -> None:
    with pytest.raises(PrivacyParameterError, match=r"ISO date|all be dates"):
        dpa.quantile("d", [0.5], bounds=bounds)


def test_mean_with_date_bounds_is_refused_with_the_alternative() -> None:
    with pytest.raises(PrivacyParameterError, match="dates have no mean; ask for quantile"):
        dpa.mean("d", bounds=("2024-01-01", "2024-12-31"))


def test_engine_refuses_edges_that_are_not_in_the_columns_reading(tmp_path: Path) -> None:
    # the compiler's own check (public joins, SQL): numeric edges on a DATE column, day-number
    # edges on a timestamp column, and a sum of a date column
    path = tmp_path / "t.parquet"
    pq.write_table(_table(), path)
    schema = {"uid": "BIGINT", "d": "DATE", "ts": "TIMESTAMP", "dn": "BIGINT"}

    def plan(m: Measure) -> Plan:
        return Plan(
            source=Source(kind="parquet", location=str(path)),
            filters=(),
            bound=Bound(privacy_unit="uid", max_partitions=1, max_rows_per_partition=1, salt=7),
            aggregate=Aggregate(group_by=(), measures=(m,)),
        )

    for m in (
        Measure(name="h", kind="bin_counts", column="d", edges=(0.0, 1.0)),
        Measure(name="h", kind="bin_counts", column="ts", edges=(0.0, 1.0), time_kind="date"),
        Measure(name="h", kind="bin_counts", column="dn", edges=(0.0, 1.0), time_kind="date"),
    ):
        with pytest.raises(PlanError, match="give dates as the bounds or edges"):
            compile_plan(plan(m), schema)
    with pytest.raises(PlanError, match="no sum, mean or variance"):
        compile_plan(plan(Measure(name="s", kind="sum", column="d", lower=0.0, upper=1.0)), schema)
    assert issubclass(PlanError, DPKitError)


def test_sql_median_of_a_date_column_takes_date_bounds_from_the_metadata(tmp_path: Path) -> None:
    from dpkit.analytics.sqlquery import load_metadata

    meta = tmp_path / "meta.yaml"
    meta.write_text(
        "tables:\n  t:\n    privacy_unit: uid\n    max_rows_per_partition: 10\n"
        "    columns:\n      d: {lower: 2024-01-01, upper: 2024-12-31}\n"
    )
    assert load_metadata(meta).tables["t"].columns["d"].bounds == (
        dt.date(2024, 1, 1),
        dt.date(2024, 12, 31),
    )
    got = _session().sql_query("SELECT MEDIAN(d) AS m FROM t", metadata=meta).run(epsilon=5.0)
    ref = _run(dpa.quantile("d", [0.5], bounds=("2024-01-01", "2024-12-31")))
    assert got["m"].iloc[0] == ref["q_p50"].iloc[0]
    assert type(got["m"].iloc[0]) is dt.date


def test_sql_mean_of_a_date_column_is_refused_before_the_charge() -> None:
    budget = Budget(epsilon=10.0)
    s = _session(budget)
    with pytest.raises(PrivacyParameterError, match="have no mean"):
        s.sql_query(
            "SELECT AVG(d) AS m FROM t",
            metadata={
                "tables": {
                    "t": {
                        "privacy_unit": "uid",
                        "columns": {"d": {"bounds": ["2024-01-01", "2024-12-31"]}},
                    }
                }
            },
        ).run(epsilon=1.0)
    assert budget.spent == (0.0, 0.0)


def test_cli_prints_a_date_quantile_as_an_iso_date(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from dpkit.cli import app

    pq.write_table(_table(), tmp_path / "t.parquet")
    (tmp_path / "meta.yaml").write_text(
        "tables:\n  t:\n    privacy_unit: uid\n    max_rows_per_partition: 10\n"
        "    columns:\n      d: {lower: 2024-01-01, upper: 2024-12-31}\n"
    )
    res = CliRunner().invoke(
        app,
        [
            "query",
            str(tmp_path / "t.parquet"),
            "--epsilon",
            "5",
            "--metadata",
            str(tmp_path / "meta.yaml"),
            "--output",
            "json",
            "--sql",
            "SELECT MEDIAN(d) AS m FROM t",
        ],
    )
    assert res.exit_code == 0, res.output
    value = json.loads(res.stdout)[0]["m"]
    assert dt.date.fromisoformat(value[:10]) and value.startswith("2024-")
