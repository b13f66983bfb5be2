"""A synthetic table of people for the utility benchmarks: one city per person, 1-3 rows each.

``people_frame(rows)`` returns about ``rows`` yearly records of about ``rows / 1.77`` people
(1,000,000 rows: about 565,000 people): columns ``pid`` (the person), ``city`` (one of 1,000,
``c0001``..``c1000``, drawn with P(city j) ~ j^-1.5, so group sizes run from a handful of
people to about 200,000 and partition selection has small groups to drop) and ``income``
(log-normal around a person's own level, times a factor of the city, varying a little from
year to year, clipped to [0, 500,000]). Every person has 1, 2 or 3 rows (probabilities 0.40,
0.43, 0.17) in one city, so the contribution bounds of the benchmarks (one group per person,
3 rows per group) drop nothing and the exact answer is the same for every library.

Deterministic for a seed (numpy's generator: this is data, never noise).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

CITIES = 1000
MAX_ROWS = 3
INCOME_BOUNDS = (0.0, 500_000.0)
_ROWS_P = (0.40, 0.43, 0.17)


def city_name(j: int) -> str:
    """The key of city ``j`` (1-based)."""
    return f"c{j:04d}"


def people_frame(rows: int, seed: int = 11) -> Any:
    """The table as a pandas frame (columns pid, city, income), ``rows`` rows exactly."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    mean_rows = sum((i + 1) * p for i, p in enumerate(_ROWS_P))
    people = int(rows / mean_rows) + 1000
    per = rng.choice(np.arange(1, MAX_ROWS + 1), size=people, p=_ROWS_P)
    # P(j) ~ j^-1.5 over 1..CITIES by inverting the cumulative weights
    w = np.arange(1, CITIES + 1, dtype=float) ** -1.5
    city = np.searchsorted(np.cumsum(w) / w.sum(), rng.uniform(size=people), side="right")
    city = np.minimum(city, CITIES - 1)
    factor = np.exp(rng.normal(0.0, 0.25, CITIES))  # each city its own level
    level = np.exp(10.7 + 0.55 * rng.normal(size=people)) * factor[city]
    uid = np.repeat(np.arange(people, dtype=np.int64), per)[:rows]
    income = level[uid] * np.exp(0.12 * rng.normal(size=uid.size))
    names = np.array([city_name(j + 1) for j in range(CITIES)], dtype=object)
    return pd.DataFrame(
        {
            "pid": uid,
            "city": names[city[uid]],
            "income": np.round(np.clip(income, *INCOME_BOUNDS), 2),
        }
    )


def people_parquet(path: Path, rows: int, seed: int = 11) -> Path:
    """Write (once) the table of :func:`people_frame` as Parquet at ``path``."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        people_frame(rows, seed).to_parquet(tmp, index=False)
        tmp.replace(path)
    return path
