"""Attack: one SQLite ledger file reached under two names (a hard link, or a container that
bind-mounts only the ``.db`` file). SQLite keeps its WAL and lock files beside the *name*, so
two processes using two names lock and log separately: both charges of 0.6 under a total of 1.0
are accepted (epsilon 1.2 released) and, reopened, the ledger shows one of them.

Run: PYTHONPATH=src python tools/reproducers/sqlite_hard_link_lost_charge.py
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.ledger import SqliteLedger


def charge(path: str, ready: object, go: object, out: object) -> None:
    try:
        budget = Budget.open(SqliteLedger(path), "people")
        budget.spent  # noqa: B018  (read the ledger before the other process writes)
    except LedgerError as exc:
        out.put(f"refused: {str(exc).splitlines()[0]}")  # type: ignore[attr-defined]
        ready.set()  # type: ignore[attr-defined]
        return
    ready.set()  # type: ignore[attr-defined]
    go.wait()  # type: ignore[attr-defined]
    try:
        budget.charge(epsilon=0.6)
        out.put("charged 0.6")  # type: ignore[attr-defined]
    except BudgetExceededError:
        out.put("refused 0.6")  # type: ignore[attr-defined]


def main() -> None:
    tmp = tempfile.mkdtemp()
    first = os.path.join(tmp, "ledger.db")
    Budget(epsilon=1.0, ledger=SqliteLedger(first), name="people")
    second = os.path.join(tmp, "other", "ledger.db")
    os.mkdir(os.path.dirname(second))
    os.link(first, second)
    ctx = multiprocessing.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs, readies = [], []
    for path in (first, second):
        ready = ctx.Event()
        procs.append(ctx.Process(target=charge, args=(path, ready, go, out)))
        readies.append(ready)
        procs[-1].start()
    for ready in readies:
        ready.wait()
    go.set()
    for p in procs:
        p.join()
    results = [out.get() for _ in procs]
    released = 0.6 * sum(r == "charged 0.6" for r in results)
    print("\n".join(results))
    os.unlink(second)
    print(
        f"released epsilon {released:.1f} under a budget of 1.0; reopened ledger shows "
        f"spent {Budget.open(SqliteLedger(first), 'people').spent}"
    )


if __name__ == "__main__":
    main()
