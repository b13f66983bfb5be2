"""A piloted mean with an extreme weight loses its answer after the charge.

A pure mean with fixed bounds spends 1/100 of its share on a pilot drawn after the charge;
per group ``pilot_choice`` reads the pilot's noisy count and sum and minimises an objective
weighted by the query's weights. Any positive finite weight is accepted (only ratios matter).
With ``weight=1e300`` the objective's count term ``w_m (m - c)^2 / h^2`` overflows to
infinity, the count's fraction is ``inf / inf`` = NaN and ``round`` raises ``ValueError``,
but only when a group is large enough for its pilot to be read: a table of 50 rows is
released, one of 50,000 rows raises, both after epsilon 1 was charged. The failure is a
function of the pilot's noisy outputs (no privacy loss beyond the charge); the figure is the
lost answer. Exits 1 while some run raises after the charge.

    PYTHONPATH=src python tools/reproducers/piloted_mean_extreme_weights.py
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.noise import RandomSource


def main() -> int:
    failed = 0
    rng = np.random.default_rng(0)
    for weight in (1.0, 1e300):
        for rows in (50, 50_000):
            d = pd.DataFrame({"uid": np.arange(rows), "x": rng.uniform(0.0, 2.0, rows)})
            budget = Budget(epsilon=5.0)
            s = dpa.Session(
                d,
                privacy_unit="uid",
                budget=budget,
                source_of_randomness=RandomSource(seed=1, insecure=True),
            )
            q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
            try:
                out = q.agg(m=dpa.mean("x", bounds=(0.0, 10.0), weight=weight)).run(epsilon=1.0)
                what = f"released m = {out['m'].iloc[0]:.4f}"
            except Exception as exc:  # the finding is any exception
                failed += 1
                what = f"RAISED {type(exc).__name__}: {exc}"
            print(f"weight {weight:g}, {rows:>6} rows: charged {budget.spent[0]:g}, {what}")
    print("raised after the charge:", failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
