"""Attacks on the curator service that currently succeed (one test per finding).

Each test fails today and passes once the service refuses the attack. Reproducers with
figures: tools/reproducers/service_attacks.py.
"""

from __future__ import annotations

import itertools
import types
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from service_fixtures import Running
from service_harness import COUNT_QUERY, HTTP, bearer

_BOUND = {"max_partitions": 1, "max_rows_per_partition": 2}


def _query(agg: dict[str, Any], **builder: Any) -> dict[str, Any]:
    return {"builder": {"bound": _BOUND, "agg": agg, **builder}, "epsilon": 0.01, "delta": 1e-9}


def _post(service: Running, path: str, body: Any) -> httpx.Response:
    return HTTP.post(
        service.base + path, json=body, headers=bearer(service.tokens["alice"]), timeout=60
    )


class _ProductGuardError(RuntimeError):
    pass


@pytest.fixture
def guarded_product(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Replace the builder's ``itertools.product`` by one that stops after 100 000 keys.

    The service runs in this process (a thread), so the guard keeps the unfixed service from
    building tens of millions of key tuples during the test; a service that checks the size of
    the key product before building it never reaches the guard.
    """
    import dpkit.analytics.builder as builder

    pulled = [0]

    def product(*lists: Any) -> Iterator[tuple[Any, ...]]:
        for t in itertools.product(*lists):
            pulled[0] += 1
            if pulled[0] > 100_000:
                raise _ProductGuardError("the key product is being materialised")
            yield t

    shim = types.SimpleNamespace(
        **{k: getattr(itertools, k) for k in dir(itertools) if not k.startswith("__")}
    )
    shim.product = product
    monkeypatch.setattr(builder, "itertools", shim)
    yield pulled


def test_public_key_product_is_refused_before_it_is_built(
    service: Running, guarded_product: list[int]
) -> None:
    """3 x 300 public keys (a 6 kB body) describe 27 million groups, above the 2**24 limit.

    Today the builder materialises the whole cartesian product before it checks the limit:
    100^3 keys cost 4 s and 430 MB on the free /v1/summarize, 150^3 cost 15 s and 900 MB, and
    10^4 values per column (a 150 kB body) exhaust memory. It must be refused from the list
    lengths alone, before any tuple is built.
    """
    n = 300
    keys = {
        "region": [f"r{i}" for i in range(n)],
        "age": list(range(n)),
        "income": [float(i) for i in range(n)],
    }
    body = _query(
        {"n": {"kind": "count"}}, group_by={"columns": ["region", "age", "income"], "keys": keys}
    )
    before = len(service.history())
    r = _post(service, "/v1/summarize", body)
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    assert "key" in r.text.lower()
    assert guarded_product[0] <= 100_000
    assert len(service.history()) == before


@pytest.mark.parametrize(
    "agg",
    [
        {"h": {"kind": "histogram", "column": "income", "edges": list(range(50_000))}},
        {
            "h": {
                "kind": "histogram",
                "column": "region",
                "categories": [f"c{i}" for i in range(50_000)],
            }
        },
        {
            "h": {
                "kind": "quantile",
                "column": "income",
                "bounds": [0, 1e5],
                "quantiles": [i / 5_000 for i in range(5_000)],
            }
        },
    ],
    ids=["edges", "categories", "quantiles"],
)
def test_list_parameters_have_a_length_limit(service: Running, agg: dict[str, Any]) -> None:
    """A sub-megabyte list of edges, categories or quantiles is accepted today: 1000 edges
    (5 kB) keep /v1/query busy about 30 s, 20 000 edges (130 kB) for minutes, 20 000
    quantiles cost 8 s on the free /v1/summarize. Only ``in`` lists are limited (1000
    values); the time goes to ``frame_to_json`` after the charge (quadratic in the number of
    columns). Refuse long lists with a 422 before anything runs."""
    before = len(service.history())
    r = _post(service, "/v1/summarize", _query(agg))
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:200])
    assert len(service.history()) == before


@pytest.mark.parametrize("path", ["/v1/summarize", "/v1/query"])
def test_huge_epsilon_is_a_clear_4xx_not_a_500(service: Running, path: str) -> None:
    """epsilon = 1e300 passes the validators and overflows in the zCDP conversion of the
    pricing (OverflowError): an unhandled 500 and a stack trace in the server log."""
    before = len(service.history())
    r = _post(service, path, {**COUNT_QUERY, "epsilon": 1e300})
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:200])
    assert "epsilon" in r.text.lower()
    assert len(service.history()) == before


def test_aggregate_names_do_not_overwrite_interval_columns(service: Running) -> None:
    """Aggregates ``n`` and ``n_low`` both make a column ``n_low`` (n's interval end and the
    second estimate): the answer has 5 columns instead of 6, the estimate of ``n_low`` sits
    where ``n``'s lower interval end should be (lower end above the upper end), and the
    analyst is charged for it. Refuse such names (422, nothing spent) or keep every column."""
    body = _query({"n": {"kind": "count"}, "n_low": {"kind": "count"}})
    before = len(service.history())
    r = _post(service, "/v1/query", body)
    if r.status_code == 200:
        cols = r.json()["result"]["columns"]
        assert len(cols) == len(set(cols)) == 6, cols
    else:
        assert r.status_code == 422, r.text
        assert len(service.history()) == before


@pytest.mark.parametrize(
    ("field", "value"),
    [
        (("epsilon",), True),
        (("epsilon",), "0.01"),
        (("delta",), "1e-9"),
        (("builder", "bound", "max_rows_per_partition"), "2"),
        (("builder", "bound", "max_partitions"), True),
    ],
    ids=["epsilon-bool", "epsilon-str", "delta-str", "rows-str", "partitions-bool"],
)
def test_privacy_parameters_are_not_coerced_from_other_types(
    service: Running, field: tuple[str, ...], value: Any
) -> None:
    """The request models run in pydantic's lax mode: ``"epsilon": true`` is read as 1.0
    (a query sent with it spends 1.0), strings become numbers. Wrong types must be refused."""
    import copy

    body: Any = copy.deepcopy(COUNT_QUERY)
    node = body
    for k in field[:-1]:
        node = node[k]
    node[field[-1]] = value
    before = len(service.history())
    r = _post(service, "/v1/summarize", body)
    assert r.status_code == 422, (r.status_code, r.text[:200])
    assert len(service.history()) == before


def test_curator_logout_ends_the_session(service: Running) -> None:
    """The page cookie is the curator token itself and logout only asks the browser to drop
    it: a copied cookie (or the token) still opens the page after logout, forever. The cookie
    should be a server-side session that logout ends."""
    with httpx.Client(base_url=service.base, timeout=30) as c:
        r = c.post("/curator/login", data={"token": service.tokens["curator"]})
        assert r.status_code == 303
        cookie = c.cookies.get("dpkit_curator")
        assert cookie
        c.post("/curator/logout")
    assert cookie != service.tokens["curator"]
    r = HTTP.get(service.base + "/curator/status", headers={"Cookie": f"dpkit_curator={cookie}"})
    assert r.status_code == 401


def test_ledger_errors_outside_a_charge_are_503(
    service: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A ledger that cannot be read while opening a sub-budget or checking the curator's
    token is the service being unavailable (503), not an internal error (500)."""
    from dpkit.errors import LedgerError

    cur = service.app.state.curator

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise LedgerError("ledger unreadable (test)")

    monkeypatch.setattr(cur, "_sub_budget", broken)
    r = HTTP.get(service.base + "/v1/me", headers=bearer(service.tokens["alice"]))
    assert r.status_code == 503, (r.status_code, r.text[:200])
    monkeypatch.setattr(cur.state, "authenticate", broken)
    r = HTTP.get(service.base + "/curator/status", headers=bearer(service.tokens["curator"]))
    assert r.status_code == 503, (r.status_code, r.text[:200])
    monkeypatch.setattr(cur, "status", broken)
    monkeypatch.setattr(cur.state, "authenticate_hash", broken)
    with httpx.Client(base_url=service.base, timeout=30) as c:
        c.cookies.set("dpkit_curator", "no-such-session")
        assert c.get("/curator/status").status_code == 401
