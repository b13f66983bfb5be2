"""DuckDB attack (round 5): a lone surrogate (``'\\udcff'``, what Python decodes invalid UTF-8
to with ``errors='surrogateescape'``) in a pandas text column. The registration turns
``object`` columns into pandas ``string`` columns, which still hold the surrogate; DuckDB then
raises while it scans that row (the text cannot be encoded as UTF-8), i.e. after the charge.
A pandas ``string`` column and a column used only in a predicate fail the same way.

D: 10 persons aged 0 with text ``'ok'`` and person 1000 (age 99) with text ``'\\udcff'``;
D' = D without person 1000. ``where("age > 50").group_by("k")`` (and ``group_by("kk")`` with
the text only in the predicate): prints ``run()``'s outcome and the budget spent on D and D';
exits 1 while they differ.

    cd /work/wt-atk5 && PYTHONPATH=$PWD/src /work/main/.venv/bin/python \\
        tools/reproducers/spark5_pandas_surrogate_exception.py
"""

from __future__ import annotations

import sys
from typing import Any

import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget


def frame(with_person: bool, dtype: str) -> pd.DataFrame:
    texts = ["ok"] * 10 + (["\udcff"] if with_person else [])
    n = len(texts)
    return pd.DataFrame(
        {
            "uid": range(n),
            "age": [0] * 10 + [99] * (n - 10),
            "k": pd.Series(texts, dtype=dtype),
            "kk": [0] * n,
        }
    )


def outcome(df: pd.DataFrame, key: str, where: str) -> tuple[str, tuple[float, float]]:
    budget = Budget(epsilon=10.0, delta=1e-5)
    s = dpa.Session(df, privacy_unit="uid", budget=budget)
    try:
        (
            s.query()
            .where(where)
            .group_by(key)
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .run(epsilon=1.0, delta=1e-6)
        )
        return "released", budget.spent
    except Exception as exc:  # the outcome itself is the figure
        return type(exc).__name__, budget.spent


def main() -> int:
    open_ = False
    cases: dict[str, tuple[str, str, str]] = {
        "object column, key": ("object", "k", "age > 50"),
        "object column, predicate only": ("object", "kk", "k <> 'zz' AND age > 50"),
        "string column, key": ("string", "k", "age > 50"),
    }
    for name, (dtype, key, where) in cases.items():
        got: list[Any] = [outcome(frame(w, dtype), key, where) for w in (True, False)]
        print(f"{name:32s} D: {got[0]}  D': {got[1]}")
        open_ |= got[0] != got[1]
    print("OPEN" if open_ else "held")
    return 1 if open_ else 0


if __name__ == "__main__":
    sys.exit(main())
