"""Attack: store URLs that look like one store name several: ``sqlite:///b.db?mode=rwc``,
``sqlite:///b.db`` and ``sqlite:///b.db#x`` open three files, and each ``memory://`` is a new
empty store; a budget opened through each spends its whole epsilon again.

Run: PYTHONPATH=src python tools/reproducers/url_aliases_double_spend.py
"""

from __future__ import annotations

import os
import tempfile

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError
from dpkit.ledger import open_ledger


def spend_all(urls: list[str]) -> float:
    released = 0.0
    for url in urls:
        try:
            Budget(epsilon=1.0, ledger=open_ledger(url), name="people").charge(epsilon=1.0)
            released += 1.0
        except BudgetExceededError:
            pass
    return released


def main() -> None:
    os.chdir(tempfile.mkdtemp())
    sqlite = spend_all(["sqlite:///b.db?mode=rwc", "sqlite:///b.db", "sqlite:///b.db#x"])
    print(f"sqlite URLs: released epsilon {sqlite} under 1.0; files {sorted(os.listdir('.'))}")
    memory = spend_all(["memory://"] * 3)
    print(f"memory:// x3: released epsilon {memory} under 1.0")


if __name__ == "__main__":
    main()
