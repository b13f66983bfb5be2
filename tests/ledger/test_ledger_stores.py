"""The ledger contract and the budget contract for every store: memory, SQLite, PostgreSQL."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from budget_contract import BudgetContract
from ledger_contract import LedgerContract

from dpkit.accounting import Budget, Ledger, MemoryLedger
from dpkit.events import DpEvent, LaplaceEvent, ZCdpEvent
from dpkit.ledger import PostgresLedger, SqliteLedger


class TestMemoryLedger(LedgerContract):
    def make_store(self) -> Ledger:
        return MemoryLedger()

    def other_handle(self, store: Ledger) -> Ledger:
        return store


class TestSqliteLedger(LedgerContract):
    @pytest.fixture(autouse=True)
    def _file(self, tmp_path: Path) -> None:
        self.path = tmp_path / "ledger.db"

    def make_store(self) -> Ledger:
        return SqliteLedger(self.path)

    def other_handle(self, store: Ledger) -> Ledger:
        return SqliteLedger(self.path)


class TestPostgresLedger(LedgerContract):
    @pytest.fixture(autouse=True)
    def _server(self, postgres_dsn: str) -> Iterator[None]:
        self.dsn = postgres_dsn
        self.opened: list[Ledger] = []
        yield
        for store in self.opened:
            store.close()

    def make_store(self) -> Ledger:
        store = PostgresLedger(self.dsn)
        self.opened.append(store)
        return store

    def other_handle(self, store: Ledger) -> Ledger:
        return self.make_store()


# ---------------------------------------------------------------------- the budget contract
class _OnSqlite:
    @pytest.fixture(autouse=True)
    def _file(self, tmp_path: Path) -> None:
        self.store: Ledger = SqliteLedger(tmp_path / "budget.db")


class _OnPostgres:
    @pytest.fixture(autouse=True)
    def _server(self, postgres_dsn: str) -> Iterator[None]:
        self.store = PostgresLedger(postgres_dsn)
        yield
        self.store.close()


class TestPureBudgetOnSqlite(_OnSqlite, BudgetContract):
    max_charges = 40

    def make_budget(self) -> Budget:
        return Budget(epsilon=1.0, ledger=self.store, name=uuid.uuid4().hex)

    def supported_event(self) -> DpEvent:
        return LaplaceEvent(noise_multiplier=30.0)


class TestZCdpBudgetOnSqlite(_OnSqlite, BudgetContract):
    max_charges = 40

    def make_budget(self) -> Budget:
        return Budget(
            epsilon=1.0, delta=1e-6, method="zcdp", ledger=self.store, name=uuid.uuid4().hex
        )

    def supported_event(self) -> DpEvent:
        return ZCdpEvent(rho=0.003)


class TestPureBudgetOnPostgres(_OnPostgres, BudgetContract):
    max_charges = 40

    def make_budget(self) -> Budget:
        return Budget(epsilon=1.0, ledger=self.store, name=uuid.uuid4().hex)

    def supported_event(self) -> DpEvent:
        return LaplaceEvent(noise_multiplier=30.0)


class TestZCdpBudgetOnPostgres(_OnPostgres, BudgetContract):
    max_charges = 40

    def make_budget(self) -> Budget:
        return Budget(
            epsilon=1.0, delta=1e-6, method="zcdp", ledger=self.store, name=uuid.uuid4().hex
        )

    def supported_event(self) -> DpEvent:
        return ZCdpEvent(rho=0.003)
