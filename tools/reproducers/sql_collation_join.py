"""Finding: a case-insensitive (NOCASE) private join key matches several public rows.

The public table is reduced to keys occurring once (``GROUP BY k HAVING COUNT(*) = 1``) under
the public column's own (binary) collation, so ``paris``, ``Paris``, ``PARIS``, ``pAris`` all
survive. The join compares them with a ``VARCHAR COLLATE NOCASE`` private column, so one private
row matches all four and is copied four times. ``engine.columns`` reports the column as plain
``VARCHAR`` (the collation is invisible to the type check). With ``privacy_unit=None`` (each row
is a person, no per-unit bound after the join) one person's row moves ``COUNT(*)`` by 4 while the
noise is calibrated to 1. Neighbours: D = empty table, D' = one row ``'paris'``.

    PYTHONPATH=src:tests/support:benchmarks/shared \
        .venv/bin/python tools/reproducers/sql_collation_join.py
"""

from __future__ import annotations

from typing import Any

import duckdb
import pandas as pd
from _sqlattack import audit_pair, sensitivity_usage

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.audit import Claim
from dpkit.noise import RandomSource

EPSILON = 1.0
META = {"tables": {"people": {}, "cities": {"public": True}}}
SQL = "SELECT COUNT(*) AS n FROM people p JOIN cities c ON p.city = c.city"
CITIES = pd.DataFrame({"city": ["paris", "Paris", "PARIS", "pAris"], "country": ["FR"] * 4})


def session(rows: list[str]) -> Any:
    con = duckdb.connect()
    con.execute("CREATE TABLE people (user_id INTEGER, city VARCHAR COLLATE NOCASE)")
    for i, c in enumerate(rows):
        con.execute("INSERT INTO people VALUES (?, ?)", [i, c])
    return dpa.Session(
        con,
        table="people",
        privacy_unit=None,
        budget=Budget(epsilon=10.0),
        source_of_randomness=RandomSource(seed=3, insecure=True),
    )


def main() -> None:
    sa, sb = session([]), session(["paris"])
    print("schema seen by the type check:", sb.engine.columns(sb.table.source))
    pa = sa.sql_query(SQL, metadata=META, public_tables={"cities": CITIES}).prepare(epsilon=EPSILON)
    pb = sb.sql_query(SQL, metadata=META, public_tables={"cities": CITIES}).prepare(epsilon=EPSILON)
    ra, rb = pa.exact(sa.engine), pb.exact(sb.engine)
    l1 = [m.l1 for st in pa.pricing.stats for m in st.measures]
    usage = sensitivity_usage(pa, ra, rb)
    res = audit_pair(pa, ra, rb, Claim.pure(epsilon=EPSILON), seed=12)
    print(
        f"exact count D={ra.values['n:n']} D'={rb.values['n:n']}, calibrated L1 {l1}, usage "
        f"{usage:.1f}; certified epsilon >= {res.epsilon_lower_bound:.2f} at confidence "
        f"1-1e-6 (claim {EPSILON}), violated={res.violated}"
    )


if __name__ == "__main__":
    main()
