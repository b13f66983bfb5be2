"""Attack: a forked child charges through the parent's SqliteLedger object after the parent
closed it; the child's ``charge`` returns (it releases) but the record is lost, and a fresh
reader grants the same privacy again.

Run: PYTHONPATH=src python tools/reproducers/sqlite_fork_lost_charge.py
"""

from __future__ import annotations

import os
import tempfile

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError
from dpkit.ledger import SqliteLedger


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(), "b.db")
    store = SqliteLedger(path)
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    budget.charge(epsilon=0.5)
    released = 0.5
    go_r, go_w = os.pipe()
    res_r, res_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.read(go_r, 1)  # wait until the parent has closed its handle
        try:
            child = Budget.open(store, "people")  # the inherited store object
            child.charge(epsilon=0.5)
            os.write(res_w, b"1")  # charge returned: the child releases
        except BudgetExceededError:
            os.write(res_w, b"0")
        os._exit(0)
    store.close()  # the parent is done with its ledger (or exits)
    os.write(go_w, b"x")
    if os.read(res_r, 1) == b"1":
        released += 0.5
    os.waitpid(pid, 0)
    fresh = Budget.open(SqliteLedger(path), "people")
    print(f"fresh reader: spent {fresh.spent}, {len(fresh.history())} records")
    try:
        fresh.charge(epsilon=0.5)
        released += 0.5
    except BudgetExceededError:
        pass
    print(f"released epsilon {released} under a budget of 1.0 (overspend {released - 1.0})")


if __name__ == "__main__":
    main()
