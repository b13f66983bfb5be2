"""Finding: the private table joined to itself as a "public" table under another name.

``Session.public_table`` refuses the private source only when the public table is the
identical ``Source`` or (for files) the same ``realpath``. Two spellings get through:

* a DuckDB-connection session over table ``people`` with ``public_tables={"pub": "PEOPLE"}``
  (DuckDB identifiers are case-insensitive, quoted or not);
* a Parquet session over ``.../people.parquet`` with the public path ``.../people*.parquet``
  (a glob naming the same file; ``realpath`` of the pattern is not the file's).

Then person T's row becomes the "public" attribute row of every other person who references T,
so T's presence moves a count by the number of referencing persons (40 here) while the noise is
calibrated to 1. Neighbours: D = 40 persons with ``ref = 1000`` plus T (user 1000,
``secret = 1``); D' = D without T.

    PYTHONPATH=src:tests/support:benchmarks/shared \
        .venv/bin/python tools/reproducers/sql_public_alias.py
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import duckdb
import pandas as pd
from _sqlattack import audit_pair, sensitivity_usage

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.audit import Claim
from dpkit.noise import RandomSource

EPSILON = 1.0
META = {"tables": {"people": {"privacy_unit": "user_id"}, "pub": {"public": True}}}
SQL = "SELECT COUNT(*) AS n FROM people p JOIN pub ON p.ref = pub.user_id WHERE pub.secret = 1"


def tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def table_sessions() -> list[tuple[Any, Any]]:
    """(session, public alias) on D and on D': DuckDB table ``people`` joined as ``PEOPLE``."""
    out = []
    for df in tables():
        con = duckdb.connect()
        con.register("frame", df)
        con.execute("CREATE TABLE people AS SELECT * FROM frame")
        s = dpa.Session(
            con,
            table="people",
            privacy_unit="user_id",
            budget=Budget(epsilon=10.0),
            source_of_randomness=RandomSource(seed=3, insecure=True),
        )
        out.append((s, "PEOPLE"))
    return out


def glob_sessions(tmp: str) -> list[tuple[Any, Any]]:
    """(session, public alias) on D and on D': ``people.parquet`` joined as ``people*.parquet``."""
    out = []
    for name, df in zip(("d", "d_prime"), tables(), strict=True):
        os.makedirs(os.path.join(tmp, name))
        path = os.path.join(tmp, name, "people.parquet")
        df.to_parquet(path)
        s = dpa.Session(
            path,
            privacy_unit="user_id",
            budget=Budget(epsilon=10.0),
            source_of_randomness=RandomSource(seed=3, insecure=True),
        )
        out.append((s, os.path.join(tmp, name, "people*.parquet")))
    return out


def run(pairs: list[tuple[Any, Any]], label: str) -> float:
    (sa, alias_a), (sb, alias_b) = pairs
    pa = sa.sql_query(SQL, metadata=META, public_tables={"pub": alias_a}).prepare(epsilon=EPSILON)
    pb = sb.sql_query(SQL, metadata=META, public_tables={"pub": alias_b}).prepare(epsilon=EPSILON)
    ra, rb = pa.exact(sa.engine), pb.exact(sb.engine)
    l1 = [m.l1 for st in pa.pricing.stats for m in st.measures]
    usage = sensitivity_usage(pa, ra, rb)
    res = audit_pair(pa, ra, rb, Claim.pure(epsilon=EPSILON), seed=11)
    print(
        f"[{label}] exact count D={ra.values['n:n']} D'={rb.values['n:n']}, calibrated L1 "
        f"sensitivity {l1}, usage {usage:.1f}; certified epsilon >= "
        f"{res.epsilon_lower_bound:.2f} at confidence 1-1e-6 (claim {EPSILON}), "
        f"violated={res.violated}"
    )
    return float(res.epsilon_lower_bound)


def main() -> None:
    run(table_sessions(), "DuckDB table 'people' joined as 'PEOPLE'")
    with tempfile.TemporaryDirectory() as tmp:
        run(glob_sessions(tmp), "people.parquet joined as people*.parquet")


if __name__ == "__main__":
    main()
