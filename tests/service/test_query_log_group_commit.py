"""The query log's group commit: rows queued while the writer lock is held are written together,
each caller returns only once its own row is committed, and one bad row fails alone."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from dpkit.service._state import ServiceState, StateError


def _queue_while_locked(
    state: ServiceState, ids: list[str]
) -> tuple[dict[str, BaseException | None], list[int]]:
    """Log ``ids`` as pending from one thread each while the writer lock is held, so that all
    of them queue; then release it. Returns each id's outcome and the sizes of the
    transactions written."""
    sizes: list[int] = []
    commit = state._commit

    def counting(rows: list[Any], *, locked: bool) -> None:
        sizes.append(len(rows))
        commit(rows, locked=locked)

    state._commit = counting  # type: ignore[method-assign]
    outcome: dict[str, BaseException | None] = {}

    def log(qid: str) -> None:
        try:
            state.log_pending(qid, "a", "run", {"q": qid}, 0.1, None)
            outcome[qid] = None
        except BaseException as exc:
            outcome[qid] = exc

    lock = state._writer_lock()
    assert lock is not None
    with lock:
        threads = [threading.Thread(target=log, args=(q,)) for q in ids]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(state._queue) < len(ids) and time.monotonic() < deadline:
            time.sleep(0.001)
        assert not outcome, "a row was written while the writer lock was held"
    for t in threads:
        t.join(30)
    return outcome, sizes


def test_rows_queued_meanwhile_are_committed_in_one_transaction(tmp_path: Path) -> None:
    state = ServiceState(f"sqlite:///{tmp_path / 'state.db'}")
    ids = [f"q{i}" for i in range(8)]
    outcome, sizes = _queue_while_locked(state, ids)
    assert outcome == dict.fromkeys(ids)
    assert sizes == [8]  # one transaction for the eight rows
    logged = {q["id"]: q for q in state.queries()}
    assert set(logged) == set(ids)
    assert all(q["status"] == "pending" and q["request"] == {"q": q["id"]} for q in logged.values())
    state.log_done("q3", "answered", result={"n": 1})
    assert {q["id"]: q["status"] for q in state.queries()}["q3"] == "answered"
    state.close()


def test_a_bad_row_fails_alone_and_the_others_are_written(tmp_path: Path) -> None:
    state = ServiceState(f"sqlite:///{tmp_path / 'state.db'}")
    state.log_pending("taken", "a", "run", {}, 0.1, None)
    ids = ["q0", "q1", "taken", "q2"]
    outcome, sizes = _queue_while_locked(state, ids)
    assert isinstance(outcome.pop("taken"), StateError)  # the id is the primary key
    assert outcome == dict.fromkeys(["q0", "q1", "q2"])
    assert sizes[0] == 4 and sorted(sizes[1:]) == [1, 1, 1, 1]  # retried one by one
    assert {q["id"] for q in state.queries()} == {"taken", "q0", "q1", "q2"}
    state.close()


def test_a_log_write_that_cannot_commit_raises_state_error(tmp_path: Path) -> None:
    state = ServiceState(f"sqlite:///{tmp_path / 'state.db'}")
    state._connection().execute("DROP TABLE dpkit_service_queries")
    with pytest.raises(StateError):
        state.log_pending("q", "a", "run", {}, 0.1, None)
    state.close()
