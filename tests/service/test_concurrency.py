"""Requests served in parallel threads: the ledger stays exact and never overspends.

No wall-clock assertion: these check totals, records and the statements the engine runs from
many threads at once (one DuckDB cursor per thread, statements cached by shape).
"""

from __future__ import annotations

import random
import threading
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path

import pandas as pd
from service_fixtures import Running, start_service
from service_harness import COUNT_QUERY, client, serve_in_thread

from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.analytics.engines import DuckDBEngine
from dpkit.analytics.engines._compiler import compile_plan


def test_one_analyst_from_many_threads_spends_exactly_its_answers(
    tmp_path: Path, people: Path
) -> None:
    # One analyst (cap 0.5) sends 16 requests at a time; 0.02 each: at most 25 fit.
    app, url, tokens = start_service(tmp_path, people, analysts={"solo": 0.5})
    query = dict(COUNT_QUERY, epsilon=0.02)
    with serve_in_thread(app) as base:
        run = Running(base=base, ledger_url=url, tokens=tokens, app=app)

        def send(_: int) -> tuple[int, str | None]:
            with client(base, tokens["solo"]) as c:
                r = c.post("/v1/query", json=query)
            return r.status_code, r.json()["query_id"] if r.status_code == 200 else None

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(send, range(40)))
        hist = run.history()
    answered = sorted(q for code, q in results if code == 200)
    assert {code for code, _ in results} <= {200, 403}
    assert len(answered) == 25 and results.count((403, None)) == 15
    assert sorted(h.metadata["query_id"] for h in hist) == answered
    # every answer charged once, nothing else: the spent total is 25 charges (sums are
    # rounded up, the safe side) and never past the cap
    spent = Fraction(app.state.curator.total.spent_epsilon_exact)
    assert 25 * Fraction(0.02) - Fraction(1, 10**12) <= spent <= Fraction(1, 2)
    assert run.spent_by("solo") <= 0.5


def _plan(salt: int, rows: int) -> Plan:
    return Plan(
        source=Source(kind="table", location="t"),
        filters=(),
        bound=Bound(privacy_unit="u", max_partitions=1, max_rows_per_partition=rows, salt=salt),
        aggregate=Aggregate(
            group_by=("k",),
            measures=(Measure(name="n", kind="rows"), Measure(name="v", kind="units")),
        ),
    )


def test_statements_from_many_threads_match_a_fresh_compile_and_run() -> None:
    """The cached shape with each salt written in is the statement compile_plan makes for that
    salt, and 8 threads running 200 plans on one engine get what one thread gets."""
    rng = random.Random(11)
    df = pd.DataFrame(
        {"u": [rng.randrange(40) for _ in range(500)], "k": [rng.choice("abc") for _ in range(500)]}
    )
    engine = DuckDBEngine(threads=1)
    engine.register("t", df)
    reference = DuckDBEngine(threads=1)
    reference.register("t", df)
    schema = engine.columns(Source(kind="table", location="t"))
    salts = [rng.randrange(2**64) for _ in range(200)] + [0, 2**63, 2**64 - 1, -(2**63)]
    plans = [_plan(s, 1 + i % 3) for i, s in enumerate(salts)]
    want = {}
    for p in plans:
        fresh = compile_plan(p, schema, engine.profile, registered=frozenset({"t"}))
        assert engine.compile(p).sql == fresh.sql
        want[id(p)] = reference.execute_compiled(fresh)
    errors: list[BaseException] = []

    def work(chunk: list[Plan]) -> None:
        try:
            for p in chunk:
                assert engine.execute(p) == want[id(p)]
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(plans[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:1]
