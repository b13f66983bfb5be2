"""Shared pieces of the end-to-end audit, coverage and cross-check tests.

* :func:`neighbours`: a base table and its neighbour, which adds one adversarial privacy unit
  with many rows in many groups (NaN, +-inf, +-1e308 values, the NULL key, odd strings).
* :func:`batched_release`: ``size`` independent releases of one prepared query on one exact
  engine result, through :meth:`PreparedQuery.release_from` in a single call.

Why one call gives ``size`` independent releases: the release of a group is a function of that
group's exact integers and of its own noise draws (discrete Laplace / Gaussian noise is drawn
i.i.d. per group and cell, and partition selection flips one independent coin per key), so the
release of ``size`` copies of every group, told apart by an extra key column ``__rep``, is
exactly ``size`` independent releases of the original groups. This is only a faster way to
call the same release code (``assemble``), not a re-implementation of it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from dpkit.analytics import PreparedQuery
from dpkit.analytics._plan import EngineResult
from dpkit.noise import RandomSource

#: Group keys: plain strings, quotes, a pipe (the canonical hash text's separator), combining
#: characters, an SQL comment, and the NULL key.
GROUPS: tuple[Any, ...] = ("a", "b", "c", "o'hara|\"x", None, "e\u0301;--", "ünï")
ADVERSARY = "adv'|\"\\n\u0000-unit"
#: The adversary's values cycle through these: NaN/NULL are skipped by value aggregates, the
#: others clamp to the bounds.
ADVERSARIAL_VALUES: tuple[Any, ...] = (float("nan"), float("inf"), 1e308, None, -float("inf"),
                                       -1e308, 7.5)
ROWS_PER_GROUP = 50


def base_table(n_units: int = 60, seed: int = 1) -> pd.DataFrame:
    """Units with 1-3 rows in 1-2 groups, values in [0, 10] with some NaN, a NULL unit."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for u in range(n_units):
        unit: Any = None if u == 0 else f"u{u}"
        k = int(rng.integers(1, 3))
        for gi in rng.choice(len(GROUPS) - 2, size=k, replace=False):  # not the last two keys
            for _ in range(int(rng.integers(1, 4))):
                x = float(rng.uniform(0, 10)) if rng.random() > 0.1 else float("nan")
                rows.append({"uid": unit, "g": GROUPS[int(gi)], "x": x})
    return pd.DataFrame(rows, columns=["uid", "g", "x"])


def adversary_rows(groups: tuple[Any, ...] = GROUPS, rows: int = ROWS_PER_GROUP,
                   values: tuple[Any, ...] = ADVERSARIAL_VALUES) -> pd.DataFrame:
    out = [{"uid": ADVERSARY, "g": g, "x": values[i % len(values)]}
           for g in groups for i in range(rows)]
    return pd.DataFrame(out, columns=["uid", "g", "x"])


def neighbours(seed: int = 1, values: tuple[Any, ...] = ADVERSARIAL_VALUES
               ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(D, D'): D' is D plus the adversarial unit (rows in every group, NULL key included)."""
    d = base_table(seed=seed)
    return d, pd.concat([d, adversary_rows(values=values)], ignore_index=True)


def stack(result: EngineResult, keys: list[tuple[Any, ...]], size: int) -> EngineResult:
    """``size`` copies of ``result``'s groups ``keys`` (absent keys: no row), key + (rep,)."""
    index = {tuple(k): i for i, k in enumerate(result.keys)}
    new_keys: list[tuple[Any, ...]] = []
    rows: list[int] = []
    for r in range(size):
        for k in keys:
            i = index.get(tuple(k))
            if i is not None:
                new_keys.append((*k, r))
                rows.append(i)
    values = {name: tuple(col[i] for i in rows) for name, col in result.values.items()}
    return EngineResult(keys=tuple(new_keys), values=values)


def batched_release(prepared: PreparedQuery, result: EngineResult, size: int,
                    source: RandomSource, keys: list[tuple[Any, ...]]) -> pd.DataFrame:
    """``size`` independent releases of ``prepared`` on ``result`` (see the module doc).

    Only the groups ``keys`` are released (a post-processing of the full release, whose groups
    are independent). With public keys every ``(key, rep)`` gets a row; without, the released
    rows only. The frame has the group-by columns plus ``__rep``.
    """
    stacked = stack(result, keys, size)
    public = (None if prepared.public_keys is None
              else [(*k, r) for r in range(size) for k in keys])
    wide = dataclasses.replace(prepared, group_by=(*prepared.group_by, "__rep"),
                               public_keys=public)
    frame: pd.DataFrame = wide.release_from(stacked, source=source)
    return frame


def key_of(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Normalised key tuples of a released frame (NaN, None and ``pd.NA``, the NULL key of a
    nullable column, are the NULL key)."""
    sub = frame[list(columns)].astype(object)
    return [tuple(None if (v is None or v is pd.NA or (isinstance(v, float) and v != v)) else v
                  for v in row)
            for row in sub.itertuples(index=False, name=None)]
