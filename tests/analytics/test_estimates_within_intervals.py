"""Released estimates stay inside their own intervals and inside what is possible.

Post-processing of the noisy integers (no privacy cost): counts, distinct counts and histogram
cells are never negative; means lie within their bounds, variances within ``[0, ((U - L) /
2)^2]``; every estimate lies within its ``_low``/``_high`` interval; and each column's info
says per group whether the value is mostly noise (``mostly_noise``: the interval reaches 0 for
counts, sums and cells; it covers more than half the possible range for means and variances).
These are invariants, checked on every row of releases at small epsilon, where noise often
dominates (tiny groups, absent public keys).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.noise import RandomSource

LO, HI = 0.0, 10.0
KEYS = list(range(12))


def _release(seed: int, epsilon: float) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sizes = [0, 1, 2, 3, 5, 8, 20, 50, 200, 400, 0, 2]  # people per group
    g = np.repeat(np.arange(12), sizes)
    df = pd.DataFrame({"uid": np.arange(g.size), "g": g, "x": rng.uniform(LO, HI, g.size)})
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=Budget(epsilon=100.0),
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )
    return (
        s.query()
        .group_by("g", keys=KEYS)
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(
            n=dpa.count(),
            u=dpa.count_distinct(),
            t=dpa.sum("x", bounds=(LO, HI)),
            m=dpa.mean("x", bounds=(LO, HI)),
            v=dpa.variance("x", bounds=(LO, HI)),
            h=dpa.histogram("x", edges=[0.0, 5.0, 10.0]),
        )
        .run(epsilon=epsilon)
    )


@pytest.mark.parametrize("seed", range(6))
def test_estimates_are_possible_and_inside_their_intervals(seed: int) -> None:
    f = _release(seed, epsilon=0.3 if seed % 2 else 2.0)
    info = f.attrs["dpkit"]["columns"]
    cols = ["n", "u", "t", "m", "v", "h[0,5)", "h[5,10]"]
    for c in cols:
        est, lo, hi = (f[c + x].to_numpy(dtype=float) for x in ("", "_low", "_high"))
        assert (lo <= est).all() and (est <= hi).all(), c
        flags = info[c]["mostly_noise"]
        assert len(flags) == len(f) and all(isinstance(b, bool) for b in flags), c
    for c in ("n", "u", "h[0,5)", "h[5,10]"):
        assert (f[c] >= 0).all() and (f[c + "_low"] >= 0).all()
    assert ((f["m_low"] >= LO) & (f["m_high"] <= HI)).all()
    assert ((f["v_low"] >= 0) & (f["v_high"] <= ((HI - LO) / 2) ** 2)).all()


def test_a_group_without_people_is_flagged_as_noise() -> None:
    f = _release(1, epsilon=0.3)
    flags = f.attrs["dpkit"]["columns"]["m"]["mostly_noise"]
    empty = [i for i, k in enumerate(f["g"]) if k in (0, 10)]  # no rows: the mean is noise
    assert all(flags[i] for i in empty)
    big = [i for i, k in enumerate(f["g"]) if k == 9]  # 400 people: informative
    assert not any(flags[i] for i in big)
