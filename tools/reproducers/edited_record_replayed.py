"""Attack: edit record 1's epsilon from 0.5 to 0 in the SQLite file; the replay accepts it
although record 2 stores ``spent_after = 1.0``, and grants 0.5 more.

Run: PYTHONPATH=src python tools/reproducers/edited_record_replayed.py
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile

from dpkit.accounting import Budget
from dpkit.ledger import SqliteLedger


def main() -> None:
    path = os.path.join(tempfile.mkdtemp(), "b.db")
    budget = Budget(epsilon=1.0, ledger=SqliteLedger(path), name="people")
    budget.charge(epsilon=0.5)
    budget.charge(epsilon=0.5)
    db = sqlite3.connect(path)
    body = json.loads(db.execute("SELECT payload FROM dpkit_ledger WHERE seq = 1").fetchone()[0])
    body["event"]["epsilon"] = 0.0
    db.execute("UPDATE dpkit_ledger SET payload = ? WHERE seq = 1", (json.dumps(body),))
    db.commit()
    db.close()
    fresh = Budget.open(SqliteLedger(path), "people")
    print(
        "replayed spent",
        fresh.spent,
        "; record 2 says spent_after",
        fresh.history()[-1].spent_after,
    )
    fresh.charge(epsilon=0.5)
    print("granted 0.5 more: 1.5 released under a budget of 1.0")


if __name__ == "__main__":
    main()
