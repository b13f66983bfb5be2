"""Group keys leave a Spark statement in a form the driver decodes one to one, and text with a
collation is refused by type (no Spark needed: the codecs and the decoder are pure Python)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpkit.analytics._column_types import collation, key_codec
from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines._compiler import (
    SPARK,
    PlanError,
    canonical_token,
    compile_plan,
)
from dpkit.analytics.engines.spark import _key

UTC = dt.timezone.utc


@pytest.mark.parametrize(
    ("sql_type", "codec"),
    [
        ("TIMESTAMP WITH TIME ZONE", "instant"),
        ("TIMESTAMP", "local"),
        ("DATE", "date"),
        ("VARCHAR", "text"),
        ("BLOB", "bytes"),
        ("BIGINT", "plain"),
        ("DOUBLE", "plain"),
        ("DECIMAL(10,2)", "plain"),
        ("BOOLEAN", "plain"),
    ],
)
def test_key_codec_by_type(sql_type: str, codec: str) -> None:
    assert key_codec(sql_type) == codec


def test_collation_is_read_from_the_type() -> None:
    assert collation("STRING COLLATE UTF8_LCASE") == "UTF8_LCASE"
    assert collation("STRING COLLATE UTF8_BINARY") is None
    assert collation("VARCHAR") is None


def test_keys_outside_pythons_range_never_raise() -> None:
    # Spark holds instants beyond year 9999 and dates beyond it; they stay integers
    assert _key(253402300800 * 10**6, "instant") == 253402300800 * 10**6
    assert _key(-62135596800 * 10**6 - 1, "instant") == -62135596800 * 10**6 - 1
    assert _key(3_000_000, "date") == 3_000_000
    assert _key("+10000-01-01 00:00:00", "local") == "+10000-01-01 00:00:00"
    assert _key(0, "instant") == dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert _key("2024-11-03 01:30:00.5", "local") == dt.datetime(2024, 11, 3, 1, 30, 0, 500000)
    assert _key(19_000, "date") == dt.date(2022, 1, 8)
    assert _key(None, "text") is None
    assert _key(bytearray(b"ab"), "bytes") == b"ab"
    assert _key(float("nan"), "plain") is None


@given(st.lists(st.binary(max_size=6), min_size=2, max_size=2, unique=True))
def test_distinct_text_bytes_stay_distinct_keys(pair: list[bytes]) -> None:
    a, b = (_key(bytearray(x), "text") for x in pair)
    assert a != b


@given(st.integers(min_value=-(2**62), max_value=2**62))
def test_instants_decode_one_to_one(us: int) -> None:
    v = _key(us, "instant")
    if isinstance(v, dt.datetime):
        assert (v - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1) == us
        assert canonical_token(v) == f"V{len(str(us))}:{us}"
    else:
        assert v == us


def _plan(**cols: str) -> Plan:
    return Plan(
        source=Source(kind="table", location="t"),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=1, max_rows_per_partition=1, salt=1),
        aggregate=Aggregate(group_by=tuple(cols), measures=(Measure(name="n", kind="rows"),)),
    )


def test_collated_key_or_unit_is_refused_before_anything_runs() -> None:
    plan = _plan(city="x")
    with pytest.raises(PlanError, match="UTF8_LCASE"):
        compile_plan(plan, {"uid": "BIGINT", "city": "STRING COLLATE UTF8_LCASE"}, SPARK)
    with pytest.raises(PlanError, match="UTF8_LCASE"):
        compile_plan(plan, {"uid": "STRING COLLATE UTF8_LCASE", "city": "VARCHAR"}, SPARK)
    # the default collation spelled out is the byte-wise one: accepted
    compiled = compile_plan(plan, {"uid": "BIGINT", "city": "STRING COLLATE UTF8_BINARY"}, SPARK)
    assert compiled.key_codecs == ("text",)


def test_spark_statement_sends_instants_as_microseconds() -> None:
    compiled = compile_plan(
        _plan(ts="x"), {"uid": "BIGINT", "ts": "TIMESTAMP WITH TIME ZONE"}, SPARK
    )
    assert compiled.key_codecs == ("instant",)
    assert "UNIX_MICROS(" in compiled.sql.upper()
