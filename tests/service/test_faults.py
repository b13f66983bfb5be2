"""Faults: kill -9 during charges, a full disk, two service processes on one SQLite ledger.

Each service process is a real separate process (forked from a forkserver that imported the
heavy modules once, so that the 100 kill trials cost a fork and an app start each) serving
HTTP on a loopback port; the test sends real requests and kills with SIGKILL.
"""

from __future__ import annotations

import random
import threading
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import service_process as _child
from service_harness import COUNT_QUERY, HTTP, bearer, client
from service_harness import hammer as _hammer

from dpkit.service._state import ServiceState

# Each test starts service processes and kills them: over a minute on a busy machine.
pytestmark = pytest.mark.slow

TOTAL_EPSILON = 2.0


def _setup(
    tmp: Path, people: Path, analysts: dict[str, float]
) -> tuple[dict[str, Any], dict[str, str]]:
    url = f"sqlite:///{tmp / 'budget.db'}"
    st = ServiceState(url)
    tokens = {
        a: st.add_token(a, role="analyst", epsilon=e, delta=1e-7) for a, e in analysts.items()
    }
    st.close()
    config = {
        "data": str(people),
        "budget_epsilon": TOTAL_EPSILON,
        "budget_delta": 1e-6,
        "privacy_unit": "user_id",
        "ledger_url": url,
        "rate": 1e6,
        "burst": 10**6,
    }
    return config, tokens


def _ledger_state(url: str) -> tuple[Any, list[Any]]:
    from dpkit.accounting import Budget
    from dpkit.ledger import open_ledger

    budget = Budget.open(open_ledger(url), name="budget")
    return budget, list(budget.history())


def _check_ledger(url: str, answered: list[str], analysts: dict[str, float]) -> list[Any]:
    """Overspend 0; every answer has its charge (one each); replay gives the same state."""
    budget, hist = _ledger_state(url)
    ids = [h.metadata.get("query_id") for h in hist]
    assert len(ids) == len(set(ids))
    missing = set(answered) - set(ids)
    assert not missing, f"{len(missing)} answers without a charge"
    spent = Fraction(budget.spent_epsilon_exact)
    assert spent <= TOTAL_EPSILON
    assert set(budget.sub_budgets()) <= set(analysts)
    for a in budget.sub_budgets():  # created on an analyst's first request
        assert budget.sub_budget(a).spent[0] <= analysts[a]
    again, _ = _ledger_state(url)
    assert Fraction(again.spent_epsilon_exact) == spent
    assert hist[-1].spent_after[0] >= float(spent) if hist else spent == 0
    return hist


TRIALS = 10  # benchmarks/service.py runs 100 (and reports them); each trial is a process


def test_kill_9_during_charges(tmp_path: Path, people: Path) -> None:
    analysts = {f"a{i}": 0.8 for i in range(4)}  # caps sum 3.2 > total 2: the total binds
    config, tokens = _setup(tmp_path, people, analysts)
    query = dict(COUNT_QUERY, epsilon=0.5)  # caps and the total run out after 4 charges
    rng = random.Random(20261123)
    answered: list[str] = []
    codes: list[int] = []
    for _ in range(TRIALS):
        proc, base = _child.start(config, wait=False)
        stop = threading.Event()
        first = len(answered)
        threads = [
            threading.Thread(target=_hammer, args=(base, tokens[a], query, stop, answered, codes))
            for a in analysts
        ]
        for t in threads:
            t.start()
        # Kill while charges are in flight: after this trial's first answer (or a refusal
        # once the budget is spent), at a random moment within the next ~25 ms.
        deadline = time.monotonic() + 60
        while len(answered) == first and 403 not in codes[-4:] and time.monotonic() < deadline:
            time.sleep(0.002)
        time.sleep(rng.uniform(0.0, 0.025))
        proc.kill()  # SIGKILL: no cleanup, mid-transaction or mid-answer
        proc.join(10)
        stop.set()
        for t in threads:
            t.join(30)
    hist = _check_ledger(config["ledger_url"], answered, analysts)
    # The trials did charge (and the budget ran out: later queries were refused). A kill may
    # land after a charge and before its answer (the safe side), so under load the 4 charges
    # the budget allows may carry as few as one answer.
    assert len(answered) >= 1 and codes.count(403) > 0
    assert len(hist) >= len(answered)
    # Reopened after the last kill, the service answers or refuses; it never overspends.
    proc, base = _child.start(config)
    try:
        r = HTTP.post(base + "/v1/query", json=query, headers=bearer(tokens["a0"]), timeout=30)
        assert r.status_code in (200, 403)
    finally:
        _child.stop(proc)
    _check_ledger(
        config["ledger_url"],
        answered + ([r.json()["query_id"]] if r.status_code == 200 else []),
        analysts,
    )


def test_two_service_processes_on_one_sqlite_ledger(tmp_path: Path, people: Path) -> None:
    analysts = {f"b{i}": 1.0 for i in range(4)}
    config, tokens = _setup(tmp_path, people, analysts)
    query = dict(COUNT_QUERY, epsilon=0.02)  # 100 charges fill the total
    procs = [_child.start(config) for _ in range(2)]
    answered: list[str] = []
    codes: list[int] = []
    stop = threading.Event()
    try:
        threads = [
            threading.Thread(target=_hammer, args=(base, tokens[a], query, stop, answered, codes))
            for _, base in procs
            for a in analysts
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        for p, _ in procs:
            _child.stop(p)
    hist = _check_ledger(config["ledger_url"], answered, analysts)
    assert len(hist) == len(answered)  # no crash here: exactly one charge per answer
    assert codes.count(403) == len(threads)  # everyone ran into the total in the end
    assert sum(h.spent_after[0] for h in hist[-1:]) == pytest.approx(TOTAL_EPSILON, abs=0.021)


def test_full_disk_refuses_the_query_and_loses_nothing(tmp_path: Path, people: Path) -> None:
    analysts = {"c0": 2.0}
    config, tokens = _setup(tmp_path, people, analysts)
    query = dict(COUNT_QUERY, epsilon=0.001)
    proc, base = _child.start(config)  # create the tables and the sub-budget
    answered: list[str] = []
    codes: list[int] = []
    _hammer(base, tokens["c0"], query, threading.Event(), answered, codes, max_queries=5)
    _child.stop(proc)
    db = Path(config["ledger_url"][len("sqlite:///") :])
    biggest = max(p.stat().st_size for p in db.parent.glob(db.name + "*"))
    # Files of the service may not grow past what they are now (plus a little): a disk
    # that fills up while the service runs.
    proc, base = _child.start(config, fsize=biggest + 16 * 1024)
    refused = []
    try:
        with client(base, tokens["c0"]) as c:
            for _ in range(1500):
                r = c.post("/v1/query", json=query)
                codes.append(r.status_code)
                if r.status_code == 200:
                    answered.append(r.json()["query_id"])
                else:
                    refused.append(r)
                if len(refused) >= 3:
                    break
    finally:
        _child.stop(proc)
    assert len(refused) >= 3, "the write limit never refused a query"
    assert all(r.status_code == 503 for r in refused), [r.text for r in refused]
    assert all("nothing spent" in r.text or "withheld" in r.text for r in refused)
    hist = _check_ledger(config["ledger_url"], answered, analysts)
    # A refusal before the charge spends nothing; one after it is charged, never answered.
    withheld = sum("withheld" in r.text for r in refused)
    assert len(hist) == len(answered) + withheld
    # With room again, the service carries on from the same ledger.
    proc, base = _child.start(config)
    try:
        r = HTTP.post(base + "/v1/query", json=query, headers=bearer(tokens["c0"]), timeout=30)
        assert r.status_code == 200, r.text
    finally:
        _child.stop(proc)
