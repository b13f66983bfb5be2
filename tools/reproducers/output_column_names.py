"""Close histogram edges and quantile levels: one output column each, or a refusal.

Column names were built from 6 significant digits, so histogram bins and quantile levels that
agree to 6 digits shared a name: the release was charged for three bins and returned two
columns (three levels, one column). Prints the estimate columns of each query and what was
spent; expected: three distinct columns each, duplicates refused unspent.

    PYTHONPATH=src python tools/reproducers/output_column_names.py
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget


def main() -> None:
    df = pd.DataFrame({"uid": range(1000), "x": np.linspace(0, 1, 1000)})
    s = dpa.Session(df, privacy_unit="uid", budget=Budget(epsilon=100.0))
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1)

    def show(label: str, run: Callable[[], Any]) -> None:
        try:
            out = run()
        except Exception as exc:  # a refusal is the expected answer for duplicates
            print(f"{label}: refused ({type(exc).__name__}: {exc})")
            return
        cols = [c for c in out.columns if not c.endswith(("_low", "_high"))]
        print(f"{label}: {len(cols)} columns {cols}")

    show(
        "3 bins, edges 0.1 .. 0.1000003",
        lambda: q.agg(h=dpa.histogram("x", edges=[0.1, 0.1000001, 0.1000002, 0.1000003])).run(
            epsilon=1.0
        ),
    )
    show(
        "3 levels 0.5, 0.5000001, 0.5000002",
        lambda: q.agg(m=dpa.quantile("x", [0.5, 0.5000001, 0.5000002], bounds=(0, 1))).run(
            epsilon=1.0
        ),
    )
    show(
        "levels 0.5, 0.5",
        lambda: q.agg(m=dpa.quantile("x", [0.5, 0.5], bounds=(0, 1))).run(epsilon=1.0),
    )
    show("aggregates n and n_low", lambda: q.agg(n=dpa.count(), n_low=dpa.count()).run(epsilon=1.0))
    print("spent", s.spent)


if __name__ == "__main__":
    main()
