"""Replay and sub-budgets against independent references; URLs; forks; damaged ledgers."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dpkit.accounting import Budget, LedgerRecord, MemoryLedger, SubBudget
from dpkit.errors import (
    BudgetExceededError,
    BudgetUnavailableError,
    LedgerError,
    PrivacyParameterError,
    UnsupportedEventError,
)
from dpkit.events import GaussianEvent, PureDpEvent, ZCdpEvent, event_to_dict
from dpkit.ledger import SqliteLedger, open_ledger

_EVENTS = st.one_of(
    st.builds(PureDpEvent, epsilon=st.sampled_from([2.0**-4, 0.1, 0.3, 0.05])),
    st.builds(ZCdpEvent, rho=st.sampled_from([0.001, 0.004, 0.01])),
    st.builds(GaussianEvent, noise_multiplier=st.sampled_from([5.0, 12.0, 30.0])),
)
_OPS = st.lists(
    st.tuples(st.sampled_from([None, "a", "b"]), _EVENTS, st.integers(1, 3)), max_size=15
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_OPS, method=st.sampled_from(["basic", "zcdp", "rdp"]))
def test_sub_budgets_and_replay_match_plain_budgets(ops: list, method: str) -> None:
    # References: one plain in-memory budget for the total and one per analyst, charged only
    # with what the ledger-backed budget accepted. A charge must be accepted exactly when the
    # total's reference and the analyst's reference both accept it.
    caps = {"a": {"epsilon": 0.6, "delta": 4e-7}, "b": {"epsilon": 0.4, "delta": 4e-7}}
    store = MemoryLedger()
    total = Budget(epsilon=1.0, delta=1e-6, method=method, ledger=store, name="t")
    subs = {who: total.sub_budget(who, **cap) for who, cap in caps.items()}
    ref_total = Budget(epsilon=1.0, delta=1e-6, method=method)
    refs = {who: Budget(**cap, method=method) for who, cap in caps.items()}
    for who, event, count in ops:
        target: Budget | SubBudget = total if who is None else subs[who]
        try:
            expected = ref_total.can_charge(event, count=count) and (
                who is None or refs[who].can_charge(event, count=count)
            )
        except UnsupportedEventError:  # pragma: no cover - can_charge returns False instead
            expected = False
        try:
            target.charge(event, count=count)
            accepted = True
        except (BudgetExceededError, UnsupportedEventError):
            accepted = False
        assert accepted == expected, (who, event, count)
        if accepted:
            ref_total.charge(event, count=count)
            if who is not None:
                refs[who].charge(event, count=count)
    assert total.to_json() == ref_total.to_json()
    for who, sub in subs.items():
        assert sub.spent == refs[who].spent
    again = Budget.open(store, "t")
    assert again.to_json() == total.to_json()
    for who in caps:
        assert again.sub_budget(who).spent == refs[who].spent


def test_memory_default_is_private_and_unchanged() -> None:
    one, two = Budget(epsilon=1.0), Budget(epsilon=1.0)
    one.charge(epsilon=0.5, metadata={"q": "x"})
    assert two.spent == (0.0, 0.0)  # each default budget has its own store
    assert one.name == "budget" and isinstance(one.store, MemoryLedger)
    assert [(h.seq, h.metadata, h.spent_after) for h in one.history()] == [
        (1, {"q": "x"}, (0.5, 0.0))
    ]
    assert Budget.from_json(one.to_json()).spent == (0.5, 0.0)


def test_a_damaged_ledger_over_the_budget_stays_counted() -> None:
    store = MemoryLedger()
    Budget(epsilon=1.0, ledger=store, name="t")
    body = {
        "event": event_to_dict(PureDpEvent(epsilon=5.0)),
        "count": 1,
        "metadata": {},
        "spent_after": [5.0, 0.0],
    }
    store.append(
        "t", LedgerRecord(seq=1, time=0.0, kind="charge", analyst=None, payload=json.dumps(body))
    )
    budget = Budget.open(store, "t")
    assert budget.spent == (5.0, 0.0) and budget.exceeded  # counted, conservatively
    with pytest.raises(BudgetExceededError):
        budget.charge(epsilon=0.0)
    store.append(
        "t", LedgerRecord(seq=2, time=0.0, kind="charge", analyst="ghost", payload=json.dumps(body))
    )
    with pytest.raises(LedgerError, match="cannot be replayed"):
        Budget.open(store, "t")


def test_open_ledger_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(open_ledger("memory://"), MemoryLedger)
    absolute = open_ledger(f"sqlite:///{tmp_path}/a.db")
    assert isinstance(absolute, SqliteLedger) and absolute.path == f"{tmp_path}/a.db"
    monkeypatch.chdir(tmp_path)
    relative = open_ledger("sqlite:///rel.db")
    assert isinstance(relative, SqliteLedger) and (tmp_path / "rel.db").exists()
    for bad in ("sqlite:///", "sqlite:///:memory:", "mysql://x", "budget.db", 3):
        with pytest.raises(LedgerError):
            open_ledger(bad)  # type: ignore[arg-type]


def test_bad_names_stores_and_metadata_are_refused() -> None:
    with pytest.raises(LedgerError):
        Budget(epsilon=1.0, name="")
    with pytest.raises(LedgerError):
        Budget(epsilon=1.0, name="a\nb")
    with pytest.raises(LedgerError):
        Budget(epsilon=1.0, ledger="sqlite:///x.db")  # type: ignore[arg-type]
    budget = Budget(epsilon=1.0)
    with pytest.raises(LedgerError):
        budget.sub_budget("", epsilon=0.5)
    with pytest.raises(PrivacyParameterError):
        budget.charge(epsilon=0.1, metadata={"big": "x" * 70_000})
    with pytest.raises(PrivacyParameterError):
        budget.charge(epsilon=0.1, metadata=["q"])  # type: ignore[arg-type]
    assert budget.history() == []


def test_forked_copy_of_a_durable_budget_refuses_and_reopening_works(tmp_path: Path) -> None:
    path = tmp_path / "fork.db"
    budget = Budget(epsilon=1.0, ledger=SqliteLedger(path), name="p")
    budget.charge(epsilon=0.25)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 1
        try:
            try:
                budget.charge(epsilon=0.25)
            except BudgetUnavailableError as err:
                if "open the ledger again" in str(err):
                    fresh = Budget.open(SqliteLedger(path), "p")
                    fresh.charge(epsilon=0.25)
                    code = 0
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    assert os.read(read, 1) == bytes([0])
    os.waitpid(pid, 0)
    budget.charge(epsilon=0.5)  # sees the child's charge first: 0.25 + 0.25 + 0.5 = 1
    assert budget.spent == (1.0, 0.0)
    with pytest.raises(BudgetExceededError):
        budget.charge(epsilon=2.0**-50)
