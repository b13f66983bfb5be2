"""The analyst API: answers, isolation, authentication, limits, documentation."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from service_fixtures import Running, start_service
from service_harness import COUNT_QUERY, HTTP, bearer, client, serve_in_thread

GROUPED = {
    "builder": {
        "where": [{"column": "age", "op": ">=", "value": 30}],
        "group_by": {"columns": ["region"], "keys": {"region": ["north", "south", "nowhere"]}},
        "bound": {"max_partitions": 1, "max_rows_per_partition": 5},
        "agg": {
            "n": {"kind": "count"},
            "income": {"kind": "mean", "column": "income", "bounds": [0, 100000]},
        },
    },
    "epsilon": 0.1,
    "delta": 1e-8,
}


def _client(service: Running, who: str) -> httpx.Client:
    return client(service.base, service.tokens[who])


def test_query_answers_with_intervals_and_charges_first(service: Running) -> None:
    before = len(service.history())
    with _client(service, "alice") as c:
        r = c.post("/v1/query", json=GROUPED)
    assert r.status_code == 200, r.text
    body = r.json()
    res = body["result"]
    assert res["columns"] == [
        "region",
        "n",
        "n_low",
        "n_high",
        "income",
        "income_low",
        "income_high",
    ]
    # Public keys: one row per key, the absent one included (nothing data-dependent).
    assert [row[0] for row in res["rows"]] == ["north", "south", "nowhere"]
    for row in res["rows"]:  # the interval's lower end is clipped at 0, the estimate is not
        assert row[2] <= row[3] and row[1] <= row[3] and row[2] == max(0, row[2])
    # public keys and discrete Laplace: the delta allowed is not used, so not charged
    assert body["cost"] == {
        "epsilon": 0.1,
        "delta": 0.0,
        "epsilon_exact": 0.1,
        "delta_exact": 0.0,
        "allowed": {"epsilon": 0.1, "delta": 1e-8},
    }
    hist = service.history()
    assert len(hist) == before + 1
    assert hist[-1].analyst == "alice"
    assert hist[-1].metadata == {"query_id": body["query_id"]}
    with _client(service, "alice") as c:
        me = c.get("/v1/me").json()
    assert me["spent"][0] == pytest.approx(service.spent_by("alice"))
    assert body["remaining"][0] == pytest.approx(1.0 - me["spent"][0])


def test_summarize_spends_nothing(service: Running) -> None:
    before = len(service.history())
    with _client(service, "alice") as c:
        r = c.post("/v1/summarize", json=GROUPED)
    assert r.status_code == 200, r.text
    assert r.json()["cost"] == {"epsilon": 0.0, "delta": 0.0}
    assert "noise_scale" in r.json()["summary"]["columns"]
    assert len(service.history()) == before


def test_analysts_see_only_their_own_queries(service: Running) -> None:
    with _client(service, "alice") as a, _client(service, "bob") as b:
        qa = a.post("/v1/query", json=COUNT_QUERY).json()["query_id"]
        qb = b.post("/v1/query", json=COUNT_QUERY).json()["query_id"]
        mine = {q["id"] for q in a.get("/v1/queries").json()["queries"]}
        theirs = {q["id"] for q in b.get("/v1/queries").json()["queries"]}
        assert qa in mine and qa not in theirs
        assert qb in theirs and qb not in mine
        assert b.get(f"/v1/queries/{qa}").status_code == 404
        assert a.get(f"/v1/queries/{qa}").json()["result"]["columns"][0] == "n"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer dpk_wrong"},
        {"Authorization": "Basic YWxpY2U6eA=="},
        {"Authorization": "Bearer dpk_"},
    ],
    ids=["missing", "wrong", "basic", "empty"],
)
def test_missing_or_wrong_token_is_401_and_spends_nothing(
    service: Running, headers: dict[str, str]
) -> None:
    before = len(service.history())
    for method, path, body in (
        ("POST", "/v1/query", COUNT_QUERY),
        ("POST", "/v1/summarize", COUNT_QUERY),
        ("GET", "/v1/me", None),
        ("GET", "/v1/queries", None),
        ("GET", "/v1/schema", None),
        ("GET", "/curator/status", None),
    ):
        r = HTTP.request(method, service.base + path, json=body, headers=headers)
        assert r.status_code == 401, (path, r.text)
    assert len(service.history()) == before


def test_curator_token_is_not_an_analyst_token_and_back(service: Running) -> None:
    r = HTTP.post(
        service.base + "/v1/query", json=COUNT_QUERY, headers=bearer(service.tokens["curator"])
    )
    assert r.status_code == 401
    r = HTTP.get(service.base + "/curator/status", headers=bearer(service.tokens["alice"]))
    assert r.status_code == 401
    r = HTTP.get(service.base + "/curator/status", headers=bearer(service.tokens["curator"]))
    assert r.status_code == 200
    assert {a["analyst"] for a in r.json()["analysts"]} == {"alice", "bob"}


def test_tokens_are_stored_hashed(service: Running) -> None:
    import sqlite3

    path = service.ledger_url[len("sqlite:///") :]
    raw = Path(path).read_bytes() + (
        Path(path + "-wal").read_bytes() if Path(path + "-wal").exists() else b""
    )
    for tok in service.tokens.values():
        assert tok.encode() not in raw
    with sqlite3.connect(path) as conn:
        hashes = {r[0] for r in conn.execute("SELECT token_hash FROM dpkit_service_tokens")}
    import hashlib

    assert hashlib.sha256(service.tokens["alice"].encode()).hexdigest() in hashes


def test_sub_budget_is_enforced_and_refusal_spends_nothing(service: Running) -> None:
    big = dict(COUNT_QUERY, epsilon=0.45)
    with _client(service, "bob") as c:
        codes = [c.post("/v1/query", json=big).status_code for _ in range(3)]
        me = c.get("/v1/me").json()
    assert codes.count(403) >= 1 and codes[0] == 200
    assert me["spent"][0] <= 0.5 + 1e-12
    assert service.spent_by("bob") <= 0.5 + 1e-12


def test_openapi_documents_every_endpoint(service: Running) -> None:
    spec = HTTP.get(service.base + "/openapi.json").json()
    documented = {(p, m.upper()) for p, ops in spec["paths"].items() for m in ops}
    app = service.app
    routes = {
        (r.path, m)
        for r in app.routes
        for m in getattr(r, "methods", ())
        if r.path not in ("/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc")
        and m != "HEAD"
    }
    assert routes <= documented
    assert {"/v1/query", "/v1/summarize", "/v1/me", "/curator"} <= set(spec["paths"])
    assert "HTTPBearer" in spec["components"]["securitySchemes"]
    assert HTTP.get(service.base + "/docs").status_code == 200


def _walk(x: Any) -> list[Any]:
    if isinstance(x, dict):
        return [v for item in x.values() for v in _walk(item)]
    if isinstance(x, list):
        return [v for item in x for v in _walk(item)]
    return [x]


def test_no_endpoint_returns_rows_or_true_values(service: Running, people: Path) -> None:
    import pandas as pd

    frame = pd.read_parquet(people)
    true_count = len(frame)
    ids = {int(u) for u in frame["user_id"]}
    with _client(service, "alice") as c:
        r = c.post("/v1/query", json=COUNT_QUERY).json()
        seen = _walk(r) + _walk(c.get("/v1/queries").json()) + _walk(c.get("/v1/me").json())
        seen += _walk(c.get("/v1/schema").json())
    # The schema carries names and types, never a value; no privacy unit id or row is echoed.
    incomes = set(frame["income"].round(6))
    assert not any(isinstance(v, float) and round(v, 6) in incomes for v in seen)
    assert len(r["result"]["rows"]) == 1 and true_count > 1
    assert not ids <= {v for v in seen if isinstance(v, int)}


def test_rate_limit_per_token(tmp_path: Path, people: Path) -> None:
    app, _url, tokens = start_service(tmp_path, people, analysts={"carol": 1.0}, rate=0.5, burst=3)
    with serve_in_thread(app) as base:
        h = bearer(tokens["carol"])
        codes = [HTTP.get(base + "/v1/me", headers=h).status_code for _ in range(3)]
        r = HTTP.post(base + "/v1/query", json=COUNT_QUERY, headers=h)
        assert codes == [200, 200, 200]
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        cur = app.state.curator
        assert cur.total.history() == []
        # Another token has its own bucket.
        assert HTTP.get(base + "/v1/me", headers=bearer(tokens["curator"])).status_code == 401


def test_ten_megabyte_bodies_are_refused_early(service: Running) -> None:
    before = len(service.history())
    h = bearer(service.tokens["alice"])
    body = (
        b'{"builder": {"agg": {"n": {"kind": "count"}}}, "epsilon": 0.01, "pad": "'
        + b"x" * (10 * 1024 * 1024)
        + b'"}'
    )
    t0 = time.monotonic()
    r = HTTP.post(
        service.base + "/v1/query",
        content=body,
        headers={**h, "content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 413
    assert "body" in r.json()["detail"]

    def chunks() -> Any:  # no Content-Length: counted as it arrives
        for _ in range(11):
            yield b"x" * (1024 * 1024)

    r = HTTP.post(
        service.base + "/v1/query",
        content=chunks(),
        headers={**h, "content-type": "application/json"},
        timeout=30,
    )
    assert r.status_code == 413
    assert time.monotonic() - t0 < 60
    assert len(service.history()) == before


def test_a_client_writing_its_whole_oversized_body_first_still_reads_the_413(
    service: Running,
) -> None:
    """A client that sends all of a refused body before reading (as httpx does) gets the 413.

    The server used to answer and close with the body unread: the kernel then resets the
    connection, the client's writes fail and the answer can be lost (a 413 whose body never
    arrived, seen under load). It now reads and drops the rest of the body first."""
    before = len(service.history())
    url = urlsplit(service.base)
    token = service.tokens["alice"]
    size = 12 * 1024 * 1024
    head = (
        f"POST /v1/query HTTP/1.1\r\nHost: {url.hostname}\r\n"
        f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {size}\r\n\r\n"
    ).encode()
    with socket.create_connection((url.hostname, url.port), timeout=60) as sock:
        sock.sendall(head)
        chunk = b"x" * (256 * 1024)
        for _ in range(size // len(chunk)):
            sock.sendall(chunk)  # a reset connection raises here
        answer = b""
        while not answer.endswith(b"}"):
            part = sock.recv(65536)
            if not part:
                break
            answer += part
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"request body above" in answer
    assert len(service.history()) == before
