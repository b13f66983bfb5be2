"""Bad input: each a clear 4xx naming the problem, and nothing spent."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from service_fixtures import Running
from service_harness import HTTP, bearer

_BASE: dict[str, Any] = {
    "builder": {
        "bound": {"max_partitions": 1, "max_rows_per_partition": 2},
        "agg": {"n": {"kind": "count"}},
    },
    "epsilon": 0.01,
    "delta": 1e-9,
}


def _with(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(_BASE)
    node: Any = body
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    return body


INJECTIONS = [
    "age; DROP TABLE dpkit_ledger; --",
    'income" FROM x; --',
    "age') OR 1=1 --",
    "\"; SELECT * FROM read_parquet('/etc/passwd') --",
    "user_id\x00",
]

CASES: list[tuple[str, Any, str]] = [
    ("malformed json", b'{"builder": {"agg": ', "json"),
    ("not an object", b"[1, 2, 3]", "object"),
    ("unknown aggregate", _with(("builder", "agg"), {"n": {"kind": "median"}}), "kind"),
    ("unknown field", _with(("builder", "having"), "n > 3"), "having"),
    ("sql not yet a query language", {**_BASE, "sql": "SELECT COUNT(*) FROM t"}, "sql"),
    (
        "huge bounds",
        _with(("builder", "agg"), {"s": {"kind": "sum", "column": "income", "bounds": [0, 1e300]}}),
        "2**50",
    ),
    (
        "infinite bounds",
        b'{"builder": {"bound": {"max_partitions": 1, "max_rows_per_partition":'
        b' 2}, "agg": {"s": {"kind": "sum", "column": "income", "bounds": [0, Infinity]}}}, '
        b'"epsilon": 0.01, "delta": 1e-9}',
        "bound",
    ),
    (
        "huge contribution bound",
        _with(("builder", "bound", "max_rows_per_partition"), 10**12),
        "max_rows_per_partition",
    ),
    ("negative epsilon", {**_BASE, "epsilon": -1.0}, "epsilon"),
    ("zero epsilon", {**_BASE, "epsilon": 0.0}, "epsilon"),
    (
        "nan epsilon",
        b'{"builder": {"bound": {"max_partitions": 1, "max_rows_per_partition": 2},'
        b' "agg": {"n": {"kind": "count"}}}, "epsilon": NaN, "delta": 1e-9}',
        "epsilon",
    ),
    (
        "infinite epsilon",
        b'{"builder": {"bound": {"max_partitions": 1, '
        b'"max_rows_per_partition": 2}, "agg": {"n": {"kind": "count"}}}, "epsilon": Infinity, '
        b'"delta": 1e-9}',
        "epsilon",
    ),
    ("string epsilon", {**_BASE, "epsilon": "a lot"}, "epsilon"),
    ("negative delta", {**_BASE, "delta": -1e-9}, "delta"),
    ("delta one", {**_BASE, "delta": 1.0}, "delta"),
    (
        "missing delta on a Gaussian budget",
        {k: v for k, v in _BASE.items() if k != "delta"},
        "delta",
    ),
    ("no contribution bound", _with(("builder", "bound"), None), "bound"),
    (
        "bad operator",
        _with(("builder", "where"), [{"column": "age", "op": "LIKE", "value": "%"}]),
        "op",
    ),
    ("bad aggregate name", _with(("builder", "agg"), {"n; DROP": {"kind": "count"}}), "identifier"),
    (
        "nan in where",
        b'{"builder": {"where": [{"column": "age", "op": ">", "value": NaN}], '
        b'"bound": {"max_partitions": 1, "max_rows_per_partition": 2}, "agg": {"n": {"kind": '
        b'"count"}}}, "epsilon": 0.01, "delta": 1e-9}',
        "finite",
    ),
]
for i, bad in enumerate(INJECTIONS):
    CASES += [
        (
            f"injection in where column {i}",
            _with(("builder", "where"), [{"column": bad, "op": "=", "value": 1}]),
            "unknown",
        ),
        (
            f"injection in aggregate column {i}",
            _with(("builder", "agg"), {"m": {"kind": "mean", "column": bad, "bounds": [0, 1]}}),
            "unknown",
        ),
        (
            f"injection in group-by column {i}",
            _with(("builder", "group_by"), {"columns": [bad], "keys": {bad: [1]}}),
            "unknown",
        ),
    ]


@pytest.mark.parametrize(
    ("body", "needle"), [(c[1], c[2]) for c in CASES], ids=[c[0] for c in CASES]
)
def test_bad_query_is_a_clear_4xx_and_spends_nothing(
    service: Running, body: Any, needle: str
) -> None:
    before = len(service.history())
    headers = {**bearer(service.tokens["alice"]), "content-type": "application/json"}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    for path in ("/v1/query", "/v1/summarize"):
        r = HTTP.post(service.base + path, content=content, headers=headers, timeout=30)
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text)
        assert r.status_code != 404
        assert needle.lower() in r.text.lower(), r.text
    assert len(service.history()) == before


def test_injection_in_a_where_value_is_only_a_literal(service: Running) -> None:
    """A hostile *value* is a quoted literal: the query runs, matches nothing, tables intact."""
    body = _with(
        ("builder", "where"),
        [
            {"column": "region", "op": "=", "value": "x' OR '1'='1"},
            {"column": "region", "op": "in", "value": ["'); DROP TABLE dpkit_ledger; --"]},
        ],
    )
    body = {
        **body,
        "builder": {
            **body["builder"],
            "group_by": {"columns": ["region"], "keys": {"region": ["x"]}},
        },
    }
    before = len(service.history())
    r = HTTP.post(
        service.base + "/v1/query", json=body, headers=bearer(service.tokens["alice"]), timeout=30
    )
    assert r.status_code == 200, r.text
    assert len(service.history()) == before + 1


def test_null_group_key_is_json_null() -> None:
    import pandas as pd

    from dpkit.analytics._release import key_column
    from dpkit.service._spec import frame_to_json

    out = frame_to_json(pd.DataFrame({"k": key_column(["a", None]), "n": [1, 2]}))
    assert out["rows"] == [["a", 1], [None, 2]]
