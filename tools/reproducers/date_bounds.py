"""Quantile bounds and histogram edges given as dates, on DATE and TIMESTAMP columns.

Prints, per request, what is released (or the refusal) and the epsilon spent. Dates as bounds
or edges (ISO strings, ``datetime.date``, ``datetime.datetime``) must be accepted for date and
timestamp columns and come back as dates; day numbers as the bounds of a DATE column must be
refused before the charge (spent 0). Run from the repository root:

    PYTHONPATH=src python tools/reproducers/date_bounds.py
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import pyarrow as pa

import dpkit
from dpkit.accounting import Budget
from dpkit.noise import RandomSource


def table(n: int = 400) -> pa.Table:
    days = [dt.date(2024, 1, 1) + dt.timedelta(days=(i * 37) % 366) for i in range(n)]
    times = [dt.datetime(1995, 1, 1) + dt.timedelta(minutes=97 * i) for i in range(n)]
    return pa.table(
        {
            "uid": [i % 40 for i in range(n)],
            "d": pa.array(days, pa.date32()),
            "ts": pa.array(times, pa.timestamp("us")),
        }
    )


CASES: dict[str, Callable[[], Any]] = {
    "quantile, bounds as ISO strings": lambda: dpkit.quantile(
        "d", [0.5], bounds=("2024-01-01", "2024-12-31")
    ),
    "quantile, bounds as dates": lambda: dpkit.quantile(
        "d", [0.5], bounds=(dt.date(2024, 1, 1), dt.date(2024, 12, 31))
    ),
    "histogram, edges as dates": lambda: dpkit.histogram(
        "d", edges=[dt.date(2024, 1, 1), dt.date(2024, 4, 1), dt.date(2025, 1, 1)]
    ),
    "quantile of a TIMESTAMP, datetime bounds": lambda: dpkit.quantile(
        "ts", [0.5], bounds=(dt.datetime(1995, 1, 1), dt.datetime(1996, 1, 1))
    ),
    "quantile of a DATE, day-number bounds": lambda: dpkit.quantile(
        "d", [0.5], bounds=(19723, 20088)
    ),
}


def main() -> None:
    for name, make in CASES.items():
        budget = Budget(epsilon=10.0)
        try:
            s = dpkit.Session(
                table(),
                privacy_unit="uid",
                budget=budget,
                source_of_randomness=RandomSource(seed=1, insecure=True),
            )
            out = (
                s.query()
                .bound(max_partitions=1, max_rows_per_partition=10)
                .agg(q=make())
                .run(epsilon=5.0)
            )
            shown = {
                c: str(out[c].iloc[0]) for c in out.columns if not c.endswith(("_low", "_high"))
            }
            print(f"{name}: released {shown}; spent {budget.spent[0]:.3g}")
        except Exception as exc:  # the refusal is what is shown
            print(f"{name}: {type(exc).__name__}: {str(exc)[:100]}; spent {budget.spent[0]:.3g}")


if __name__ == "__main__":
    main()
