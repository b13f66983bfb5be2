"""Attack: one charge of an event nested 101 levels deep is accepted and written, but the
replay refuses it (MAX_EVENT_DEPTH = 100): the budget can never be opened or charged again, by
any process.

Run: PYTHONPATH=src python tools/reproducers/deep_event_poisons_replay.py
"""

from __future__ import annotations

import os
import tempfile

from dpkit.accounting import Budget
from dpkit.errors import LedgerError
from dpkit.events import DpEvent, PureDpEvent, SelfComposedEvent
from dpkit.ledger import SqliteLedger


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(), "b.db")
    live = Budget(epsilon=1.0, ledger=SqliteLedger(path), name="shared")
    other = Budget.open(SqliteLedger(path), "shared")  # another live writer
    event: DpEvent = PureDpEvent(epsilon=0.01)
    for _ in range(101):
        event = SelfComposedEvent(event=event, count=1)
    live.charge(event)
    print("charge of the deep event accepted; spent", live.spent)
    for what, action in (
        ("reopen", lambda: Budget.open(SqliteLedger(path), "shared")),
        ("other live writer", lambda: other.charge(epsilon=0.1)),
    ):
        try:
            action()
            print(what, "worked")
        except LedgerError as exc:
            print(what, "->", type(exc).__name__, str(exc)[:120])


if __name__ == "__main__":
    main()
