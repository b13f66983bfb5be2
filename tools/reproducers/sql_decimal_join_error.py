"""Finding: a DECIMAL join key raises an engine error that depends on (and prints) a private value.

``_Extras.of`` accepts a join when both keys are in the same type family; DECIMAL(38,0) (private)
and DECIMAL(38,10) (public) are both "decimal". DuckDB compares them in DECIMAL(38,10), so a
private key of 10**28 or more fails the cast at run time. The join's ON clause is not under the
TRY wrapper the filters get, so:

* D (keys 1, 2, 3): answered;
* D' (one person's key is 10**30): ``EngineError ... Casting value "1000000000000000000000000000000"
  to type DECIMAL(38,10) failed`` -- the private value itself is in the message, and the budget
  was charged before the failure.

    PYTHONPATH=src .venv/bin/python tools/reproducers/sql_decimal_join_error.py
"""

from __future__ import annotations

import decimal
import os
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq

import dpkit.analytics as dpa
from dpkit.accounting import Budget

META = {"tables": {"people": {"privacy_unit": "user_id"}, "accounts": {"public": True}}}
SQL = "SELECT COUNT(*) AS n FROM people p JOIN accounts a ON p.acct = a.acct"


def accounts() -> pa.Table:
    return pa.table(
        {
            "acct": pa.array(
                [decimal.Decimal("1.0000000000"), decimal.Decimal("2.0000000000")],
                pa.decimal128(38, 10),
            ),
            "tier": ["gold", "silver"],
        }
    )


def people(path: str, third_key: decimal.Decimal) -> str:
    keys = [decimal.Decimal(1), decimal.Decimal(2), third_key]
    pq.write_table(
        pa.table({"user_id": [1, 2, 3], "acct": pa.array(keys, pa.decimal128(38, 0))}), path
    )
    return path


def attempt(path: str) -> tuple[str, object]:
    s = dpa.Session(path, privacy_unit="user_id", budget=Budget(epsilon=10.0))
    try:
        out = s.sql(SQL, epsilon=1.0, metadata=META, public_tables={"accounts": accounts()})
        return f"answered n={int(out['n'][0])}", s.spent
    except Exception as exc:
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:170]}", s.spent


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, key in (("D", decimal.Decimal(3)), ("D'", decimal.Decimal(10) ** 30)):
            verdict, spent = attempt(
                people(os.path.join(tmp, f"{name[0]}{len(name)}.parquet"), key)
            )
            print(f"{name}: {verdict} | budget spent {spent}")


if __name__ == "__main__":
    main()
