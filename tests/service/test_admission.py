"""Admission of queries: a bounded number at once, the rest served in arrival order.

No wall-clock assertion: order and counts are checked through the gate's own state, threads
are synchronised by events and barriers, and waits only bound how long a broken gate may hang.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from service_fixtures import Running, start_service
from service_harness import COUNT_QUERY, client, serve_in_thread

from dpkit.errors import PrivacyParameterError
from dpkit.service.app import FifoGate


def _until(condition: object, what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.001)


def test_gate_admits_waiters_in_the_order_they_arrived() -> None:
    gate = FifoGate(1)
    order: list[int] = []

    def wait_in_line(i: int) -> None:
        with gate.slot():
            order.append(i)

    threads = []
    with gate.slot():  # the one slot is held: everyone else queues
        for i in range(12):
            t = threading.Thread(target=wait_in_line, args=(i,))
            t.start()
            threads.append(t)
            _until(lambda i=i: gate.waiting == i + 1, f"waiter {i} to queue")
        assert order == []
    for t in threads:
        t.join(30)
    assert order == list(range(12))
    assert gate.busy == 0 and gate.waiting == 0


def test_gate_hands_a_freed_slot_to_the_waiter_not_to_a_newcomer() -> None:
    gate = FifoGate(1)
    admitted: list[str] = []
    release_first = threading.Event()

    def holder() -> None:
        with gate.slot():
            admitted.append("holder")
            release_first.wait(30)

    def waiter() -> None:
        with gate.slot():
            admitted.append("waiter")

    h = threading.Thread(target=holder)
    h.start()
    _until(lambda: gate.busy == 1, "the holder to take the slot")
    w = threading.Thread(target=waiter)
    w.start()
    _until(lambda: gate.waiting == 1, "the waiter to queue")
    release_first.set()
    h.join(30)
    # the slot went to the waiter as the holder left: a newcomer now finds it taken or queued
    # behind, never ahead
    with gate.slot():
        admitted.append("newcomer")
    w.join(30)
    assert admitted == ["holder", "waiter", "newcomer"]


def test_gate_runs_exactly_its_slots_at_once() -> None:
    slots = 3
    gate = FifoGate(slots)
    together = threading.Barrier(slots, timeout=30)  # breaks if fewer than 3 are ever inside
    inside = 0
    most = 0
    lock = threading.Lock()

    def work(_: int) -> None:
        nonlocal inside, most
        with gate.slot():
            with lock:
                inside += 1
                most = max(most, inside)
            together.wait()
            with lock:
                inside -= 1

    with ThreadPoolExecutor(12) as pool:
        list(pool.map(work, range(24)))
    assert most == slots
    assert gate.busy == 0 and gate.waiting == 0


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_gate_size_must_be_a_positive_integer(bad: object) -> None:
    with pytest.raises(PrivacyParameterError, match="concurrency"):
        FifoGate(bad)  # type: ignore[arg-type]


def test_one_query_at_a_time_keeps_the_ledger_exact_and_frees_its_slot(
    tmp_path: Path, people: Path
) -> None:
    app, url, tokens = start_service(
        tmp_path, people, analysts={"a": 0.52, "b": 0.52}, concurrency=1
    )
    gate = app.state.curator.gate
    assert gate.slots == 1
    good = dict(COUNT_QUERY, epsilon=0.05)
    bad = dict(COUNT_QUERY, epsilon=-1.0)
    with serve_in_thread(app) as base:
        run = Running(base=base, ledger_url=url, tokens=tokens, app=app)

        def send(i: int) -> tuple[int, str | None]:
            name = "ab"[i % 2]
            with client(base, tokens[name]) as c:
                r = c.post("/v1/query", json=bad if i % 5 == 0 else good)
            return r.status_code, r.json().get("query_id") if r.status_code == 200 else None

        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(send, range(30)))
        hist = run.history()
    # refused requests (422) gave their slot back: every later request was served
    assert sorted(code for code, _ in results).count(422) == 6
    answered = sorted(q for code, q in results if code == 200)
    assert len(answered) == 20  # 10 per analyst (0.05 each under a cap of 0.52)
    assert sorted(h.metadata["query_id"] for h in hist) == answered
    assert run.spent_by("a") <= 0.52 and run.spent_by("b") <= 0.52
    assert gate.busy == 0 and gate.waiting == 0
