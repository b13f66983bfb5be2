"""Prepared queries are cached by request body: a repeated query is charged every time, with
a fresh salt every time, and a body that differs in anything that changes its meaning or its
price (NaN against null, another epsilon) never reuses another body's entry."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from service_fixtures import Running, start_service
from service_harness import COUNT_QUERY, bearer, client, serve_in_thread

from dpkit.ledger import open_ledger
from dpkit.service._state import ServiceState


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory, people: Path) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("cache")
    app, url, tokens = start_service(tmp, people, analysts={"alice": 2.0})
    with serve_in_thread(app) as base:
        yield Running(base=base, ledger_url=url, tokens=tokens, app=app)


def _post(service: Running, body: Any) -> Any:
    with client(service.base, service.tokens["alice"]) as c:
        return c.post("/v1/query", json=body)


def test_a_repeated_query_is_charged_and_logged_every_time(cached: Running) -> None:
    before = len(cached.history())
    ids = []
    for _ in range(3):
        r = _post(cached, COUNT_QUERY)
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        ids.append(r.json()["query_id"])
    hist = cached.history()[before:]
    assert [h.metadata["query_id"] for h in hist] == ids  # three charges, one per answer
    logged = {q["id"]: q for q in cached.app.state.curator.state.queries("alice")}
    for qid in ids:
        assert logged[qid]["status"] == "answered"
        assert logged[qid]["request"]["builder"]["bound"] == COUNT_QUERY["builder"]["bound"]
        assert logged[qid]["result"]["columns"][0] == "n"


def test_every_release_of_a_cached_query_gets_its_own_salt(
    cached: Running, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = cached.app.state.curator.session
    salts: list[int] = []
    run = type(session).run

    def spy(self: Any, prepared: Any, **kw: Any) -> Any:
        salts.append(prepared.plan.bound.salt)
        return run(self, prepared, **kw)

    monkeypatch.setattr(type(session), "run", spy)
    for _ in range(3):
        assert _post(cached, COUNT_QUERY).status_code == 200
    assert len(set(salts)) == 3
    entries = cached.app.state.curator.prepared._entries.values()
    assert not {e.query.plan.bound.salt for e in entries} & set(salts)  # the template never runs


def test_another_epsilon_is_another_price(cached: Running) -> None:
    costs = {}
    for eps in (0.01, 0.02, 0.01):
        r = _post(cached, dict(COUNT_QUERY, epsilon=eps))
        assert r.status_code == 200, r.text
        costs.setdefault(eps, set()).add(r.json()["cost"]["epsilon_exact"])
    assert costs == {0.01: {0.01}, 0.02: {0.02}}


def _raw(service: Running, text: str) -> Any:
    headers = {**bearer(service.tokens["alice"]), "content-type": "application/json"}
    with client(service.base) as c:
        return c.post("/v1/query", content=text.encode(), headers=headers)


@pytest.mark.parametrize(
    ("valid", "invalid"),
    [
        # delta null (no delta) against delta NaN
        (dict(COUNT_QUERY, delta=None), '"delta": NaN'),
        # an is_null condition (no value) against the same condition with a NaN value
        (
            {
                **COUNT_QUERY,
                "builder": {
                    **COUNT_QUERY["builder"],
                    "where": [{"column": "age", "op": "is_null", "value": None}],
                },
            },
            '"value": NaN',
        ),
    ],
)
def test_nan_never_reuses_the_entry_of_null(cached: Running, valid: Any, invalid: str) -> None:
    first = _post(cached, valid)
    assert first.status_code in (200, 422), first.text
    text = json.dumps(valid).replace(invalid.split(":")[0] + ": null", invalid)
    assert "NaN" in text
    before = len(cached.history())
    size = len(cached.app.state.curator.prepared._entries)
    r = _raw(cached, text)
    assert r.status_code == 422, r.text
    assert len(cached.history()) == before  # refused, nothing spent
    assert len(cached.app.state.curator.prepared._entries) == size  # refusals are not cached


def test_a_refused_body_is_refused_every_time(cached: Running) -> None:
    bad = copy.deepcopy(COUNT_QUERY)
    bad["builder"]["agg"] = {"n": {"kind": "mean", "column": "nope", "bounds": [0, 1]}}
    before = len(cached.history())
    for _ in range(2):
        assert _post(cached, bad).status_code == 422
    assert len(cached.history()) == before


def test_the_query_log_takes_turns_with_a_ledger_in_its_file(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'one.db'}"
    state, ledger = ServiceState(url), open_ledger(url)
    other = open_ledger(f"sqlite:///{tmp_path / 'two.db'}")
    try:
        assert not state.take_turns_with(other)
        assert not state.take_turns_with(open_ledger("memory://"))
        assert state._writer_lock() is not ledger.write_lock  # type: ignore[attr-defined]
        assert state.take_turns_with(ledger)
        assert state._writer_lock() is ledger.write_lock  # type: ignore[attr-defined]
        state.add_token("x", role="analyst", epsilon=1.0)  # writes still work under it
        assert [t.name for t in state.tokens()] == ["x"]
    finally:
        state.close()
