"""The curator's privacy report over HTTP: curator-only, the total and each analyst's risk."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from service_fixtures import Running, start_service
from service_harness import COUNT_QUERY, HTTP, bearer, serve_in_thread


@pytest.fixture(scope="module")
def spent(tmp_path_factory: pytest.TempPathFactory, people: Path) -> Iterator[Running]:
    """Two analysts who each spent once (alice 0.3, bob 0.1)."""
    tmp = tmp_path_factory.mktemp("risk")
    app, url, tokens = start_service(tmp, people, analysts={"alice": 1.0, "bob": 0.5})
    with serve_in_thread(app) as base:
        for who, eps in (("alice", 0.3), ("bob", 0.1)):
            r = HTTP.post(
                base + "/v1/query",
                json=dict(COUNT_QUERY, epsilon=eps),
                headers=bearer(tokens[who]),
                timeout=30,
            )
            assert r.status_code == 200, r.text
        yield Running(base=base, ledger_url=url, tokens=tokens, app=app)


@pytest.mark.parametrize(
    "path", ["/curator/report", "/curator/report.json", "/curator/report.json?analyst=alice"]
)
def test_report_needs_the_curator_token(spent: Running, path: str) -> None:
    assert HTTP.get(spent.base + path, timeout=30).status_code == 401
    analyst = HTTP.get(spent.base + path, headers=bearer(spent.tokens["alice"]), timeout=30)
    assert analyst.status_code == 401
    ok = HTTP.get(spent.base + path, headers=bearer(spent.tokens["curator"]), timeout=30)
    assert ok.status_code == 200


def test_report_json_has_total_and_each_analyst(spent: Running) -> None:
    r = HTTP.get(
        spent.base + "/curator/report.json", headers=bearer(spent.tokens["curator"]), timeout=30
    )
    d = json.loads(r.text)
    rows = {a["analyst"]: a for a in d["analysts"]}
    assert set(rows) == {"alice", "bob"}
    assert rows["alice"]["releases"] == 1 and rows["bob"]["releases"] == 1
    # Each analyst's epsilon (PLD at the report's delta, so a hair under the pure cost).
    assert rows["alice"]["epsilon"] == pytest.approx(0.3, abs=1e-3)
    assert rows["bob"]["epsilon"] == pytest.approx(0.1, abs=1e-3)
    assert rows["alice"]["epsilon"] > rows["bob"]["epsilon"]
    assert rows["alice"]["max_tpr_at_1e-3"] > rows["bob"]["max_tpr_at_1e-3"] > 1e-3
    # The total covers both: spent at least their sum, its attack rate above each one's.
    assert d["budget"]["spent"][0] >= 0.4 - 1e-9
    assert len(d["ledger"]) == 2
    total_tpr = d["risk"]["max_tpr_at_fpr"]
    assert max(float(v) for v in total_tpr.values()) >= rows["alice"]["max_tpr_at_1e-3"]


def test_report_html_shows_analysts_and_figure(spent: Running) -> None:
    r = HTTP.get(
        spent.base + "/curator/report", headers=bearer(spent.tokens["curator"]), timeout=30
    )
    assert r.headers["content-type"].startswith("text/html")
    assert '<table id="analysts">' in r.text
    # each analyst's row links to that analyst's own report
    for who in ("alice", "bob"):
        assert f'<a href="/curator/report?analyst={who}">{who}</a>' in r.text
    assert "<svg" in r.text


def test_each_analyst_has_a_report_of_their_own_releases(spent: Running) -> None:
    def get(who: str) -> dict[str, object]:
        r = HTTP.get(
            spent.base + "/curator/report.json",
            params={"analyst": who},
            headers=bearer(spent.tokens["curator"]),
            timeout=30,
        )
        assert r.status_code == 200, r.text
        return dict(json.loads(r.text))

    total = json.loads(
        HTTP.get(
            spent.base + "/curator/report.json",
            headers=bearer(spent.tokens["curator"]),
            timeout=30,
        ).text
    )
    mine = {who: get(who) for who in ("alice", "bob")}
    for who, eps in (("alice", 0.3), ("bob", 0.1)):
        d = mine[who]
        assert who in str(d["title"])
        ledger = d["ledger"]
        assert isinstance(ledger, list) and [x["analyst"] for x in ledger] == [who]
        budget = d["budget"]
        assert isinstance(budget, dict) and budget["spent"][0] == pytest.approx(eps, rel=1e-9)
        assert budget["epsilon"] == {"alice": 1.0, "bob": 0.5}[who]
        rows = d["analysts"]
        assert isinstance(rows, list) and [a["analyst"] for a in rows] == [who]
    # an analyst's attack rate is below the total's and alice's (0.3) above bob's (0.1)
    rate = {who: max(map(float, mine[who]["risk"]["max_tpr_at_fpr"].values())) for who in mine}  # type: ignore[index]
    top = max(map(float, total["risk"]["max_tpr_at_fpr"].values()))
    assert rate["bob"] < rate["alice"] <= top


def test_report_of_an_unknown_analyst_is_a_404(spent: Running) -> None:
    for path in ("/curator/report", "/curator/report.json"):
        r = HTTP.get(
            spent.base + path,
            params={"analyst": "mallory"},
            headers=bearer(spent.tokens["curator"]),
            timeout=30,
        )
        assert r.status_code == 404
