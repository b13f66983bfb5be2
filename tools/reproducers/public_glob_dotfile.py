"""Finding: a public path whose files DuckDB reads differently from Python reaches the private rows.

The check that refuses the private table as a "public" table used to expand globs with Python's
``glob``, which skips names starting with a dot; DuckDB's glob does not. With the private file
``data/.people.parquet`` and the public path ``data/*.parquet`` (or the private glob
``data/*.parquet``, which DuckDB expands to the dot-file, and that dot-file named as public),
person T's row became the "public" attribute row of the 40 persons referencing T, so T's
presence moved an exact count by 40 against a calibrated sensitivity of 1 (epsilon 40 spent
where 1 is claimed). Neighbours: D = 40 persons with ``ref = 1000``; D' = D plus T (user 1000,
``secret = 1``). The same hole: a private DuckDB view over the dot-file, and a pyarrow
dataset over it (as the public frame, or as the private source), and a quoted table name
that DuckDB reads as the file (a replacement scan). A genuinely public file
``data/regions.parquet`` lies beside the private one. Each line prints the exact
(pre-noise) count on D and on D', through the builder's ``join_public`` and through SQL
metadata, or the refusal (nothing is charged either way).

    PYTHONPATH=src .venv/bin/python tools/reproducers/public_glob_dotfile.py
"""

from __future__ import annotations

import os
import tempfile
from typing import Any

import duckdb
from _sparkatk import exact_join_count, referencing_tables

import dpkit.analytics as dpa
from dpkit.accounting import Budget

META = {"tables": {"people": {"privacy_unit": "user_id"}, "pub": {"public": True}}}
SQL = "SELECT COUNT(*) AS n FROM people p JOIN pub ON p.ref = pub.user_id WHERE pub.secret = 1"


def exact_sql_count(session: Any, public: Any) -> int | str:
    """The pre-noise SQL count with ``public`` given as the metadata's path of ``pub`` (a
    string) or as its data."""
    pub: dict[str, Any] = {"public": True}
    if isinstance(public, str):
        pub["path"] = public
    meta = {"tables": {**META["tables"], "pub": pub}}
    tables = None if isinstance(public, str) else {"pub": public}
    try:
        p = session.sql_query(SQL, metadata=meta, public_tables=tables).prepare(epsilon=1.0)
        session.validate(p)
    except Exception as exc:  # refused before the charge
        return f"refused ({type(exc).__name__})"  # same form as exact_join_count
    return int(p.exact(session.engine).values["n:n"][0])


CASES = [  # (private path, public path), relative to a directory holding data/
    ("data/.people.parquet", "data/*.parquet"),
    ("data/*.parquet", "data/.people.parquet"),
    ("data/.people.parquet", "data/**/*.parquet"),
    ("data/.people.parquet", "data/[.]people.parquet"),
    ("data/.people.parquet", "file://{root}/data/*.parquet"),
    ("view people over data/.people.parquet", "data/*.parquet"),
    ("data/.people.parquet", "arrow dataset of data/.people.parquet"),
    ("arrow dataset of data/.people.parquet", "data/*.parquet"),
    ("data/.people.parquet", '"{root}/data/.people.parquet"'),
    ('table "data/.people.parquet"', "data/*.parquet"),
]


def arrow_dataset(root: str) -> Any:
    import pyarrow.dataset as pads

    return pads.dataset(os.path.join(root, "data", ".people.parquet"))


def open_session(root: str, private: str, budget: Budget) -> Any:
    """A session over the private path, or over a DuckDB view that reads the private file."""
    if private.startswith("view "):
        con = duckdb.connect()
        path = os.path.join(root, "data", ".people.parquet").replace("'", "''")
        con.execute(f"CREATE VIEW people AS SELECT * FROM read_parquet('{path}')")
        return dpa.Session(con, table="people", privacy_unit="user_id", budget=budget)
    if private.startswith("table "):  # a quoted name DuckDB reads as the file
        quoted = '"' + os.path.join(root, "data", ".people.parquet") + '"'
        return dpa.Session(duckdb.connect(), table=quoted, privacy_unit="user_id", budget=budget)
    if private.startswith("arrow "):
        return dpa.Session(arrow_dataset(root), privacy_unit="user_id", budget=budget)
    return dpa.Session(os.path.join(root, private), privacy_unit="user_id", budget=budget)


def main() -> None:
    d_prime, d = referencing_tables()  # referencing_tables() returns (with T, without T)
    for private, public in CASES:
        counts: dict[str, list[int | str]] = {"join_public": [], "sql": []}
        for df in (d, d_prime):
            with tempfile.TemporaryDirectory() as tmp:
                os.makedirs(os.path.join(tmp, "data"))
                df.to_parquet(os.path.join(tmp, "data", ".people.parquet"))
                # a genuinely public file beside it, so that Python's glob matches something
                df.head(0).to_parquet(os.path.join(tmp, "data", "regions.parquet"))
                budget = Budget(epsilon=10.0)
                s = open_session(tmp, private, budget)
                where: Any = (
                    public.format(root=tmp) if "{root}" in public else os.path.join(tmp, public)
                )
                if public.startswith("arrow "):
                    where = arrow_dataset(tmp)
                counts["join_public"].append(exact_join_count(s, where))
                counts["sql"].append(exact_sql_count(s, where))
                assert budget.spent[0] == 0
        for how, (on_d, on_dp) in counts.items():
            print(
                f"private {private[:30]:30} public {public[:30]:30} {how:11} D={on_d}  D'={on_dp}"
            )


if __name__ == "__main__":
    main()
