"""Attack: an SQLite ledger path with ``..`` after a symbolic link to a directory.

``SqliteLedger`` keeps ``os.path.abspath(path)``, which removes ``x/link/..`` as text, while the
operating system resolves ``link`` first. With ``x/link -> y/sub``, the path
``x/link/../ledger.db`` names the file ``y/ledger.db`` (``os.path.samefile`` says so), but the
store opens (and creates) ``x/ledger.db``: a second, empty ledger. The one-name check
(``check_sqlite_file``) reads ``os.path.realpath``, i.e. the real ``y/ledger.db``, so it inspects
a different file from the one SQLite writes, and passes.

D/D' are not involved; the figure is the budget: two processes (here two stores in one process,
which is the same for SQLite) define the budget ``people`` of epsilon 1.0 with the usual idiom
``Budget(epsilon=1.0, ledger=SqliteLedger(path), name="people")``, one through ``y/ledger.db``,
one through ``x/link/../ledger.db``; each charges 0.6. Both are accepted: epsilon 1.2 released
under 1.0, and the real ledger shows 0.6. Exits 1 while both charges are accepted.

    PYTHONPATH=src python tools/reproducers/sqlite_dotdot_symlink_dir.py
"""

from __future__ import annotations

import os
import sys
import tempfile

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.ledger import SqliteLedger


def main() -> int:
    root = tempfile.mkdtemp()
    os.makedirs(os.path.join(root, "y", "sub"))
    os.makedirs(os.path.join(root, "x"))
    os.symlink(os.path.join(root, "y", "sub"), os.path.join(root, "x", "link"))
    real = os.path.join(root, "y", "ledger.db")
    dotted = os.path.join(root, "x", "link", "..", "ledger.db")
    first = Budget(epsilon=1.0, ledger=SqliteLedger(real), name="people")
    print(f"{dotted} names {real}: {os.path.samefile(dotted, real)}")
    accepted = 0
    try:
        second = Budget(epsilon=1.0, ledger=SqliteLedger(dotted), name="people")
    except LedgerError as exc:
        print(f"refused: {str(exc).splitlines()[0]}")
        second = None
    for budget in (first, second):
        if budget is None:
            continue
        try:
            budget.charge(epsilon=0.6)
            accepted += 1
        except BudgetExceededError:
            pass
    print(
        f"charges of 0.6 accepted: {accepted}; released epsilon {0.6 * accepted:.1f} under "
        f"1.0; files: {sorted(os.listdir(os.path.join(root, 'x')))}; real ledger spent "
        f"{Budget.open(SqliteLedger(real), 'people').spent}"
    )
    return 1 if accepted > 1 else 0


if __name__ == "__main__":
    sys.exit(main())
