"""Load: concurrent analysts against one budget (the full 32 x 200 run is benchmarks/service.py).

Asserts what must hold under any interleaving: no overspend (the total and every sub-budget),
no lost ledger record (every answer has exactly one charge), no charge without its query.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from service_fixtures import Running, start_service
from service_harness import COUNT_QUERY, client, serve_in_thread

ANALYSTS, QUERIES = 32, 8


def test_concurrent_analysts_never_overspend_and_lose_no_record(
    tmp_path: Path, people: Path
) -> None:
    # 32 caps of 0.1 = 3.2 > the total 3.0; 32 x 8 queries of 0.0125 = 3.2: the total binds.
    names = {f"an{i:02d}": 0.1 for i in range(ANALYSTS)}
    app, url, tokens = start_service(tmp_path, people, analysts=names)
    query = dict(COUNT_QUERY, epsilon=0.0125)
    with serve_in_thread(app) as base:
        run = Running(base=base, ledger_url=url, tokens=tokens, app=app)

        def analyst(name: str) -> list[tuple[int, str | None]]:
            out = []
            with client(base, tokens[name]) as c:
                for _ in range(QUERIES):
                    r = c.post("/v1/query", json=query)
                    out.append(
                        (r.status_code, r.json()["query_id"] if r.status_code == 200 else None)
                    )
            return out

        with ThreadPoolExecutor(ANALYSTS) as pool:
            results = [x for xs in pool.map(analyst, names) for x in xs]
        hist = run.history()
    answered = [q for code, q in results if code == 200]
    assert {code for code, _ in results} <= {200, 403}
    assert results.count((403, None)) > 0  # the total ran out: the test exercised the limit
    ids = [h.metadata["query_id"] for h in hist]
    assert sorted(ids) == sorted(answered)  # no lost record, no stray charge
    assert hist[-1].spent_after[0] <= 3.0
    cur = app.state.curator
    assert cur.total.spent_epsilon_exact <= 3
    for name in names:
        assert run.spent_by(name) <= 0.1 + 1e-12
    logged = [q for q in cur.state.queries() if q["status"] == "answered"]
    assert sorted(q["id"] for q in logged) == sorted(answered)
