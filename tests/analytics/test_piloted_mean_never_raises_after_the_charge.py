"""A piloted mean's release never raises after its charge, whatever its weights.

A pure mean with fixed bounds draws its pilot after the charge, and per group
:func:`~dpkit.analytics._pricing.pilot_choice` reads the pilot's noisy outputs to choose a
centre and a split, from an objective weighted by the query's weights (any positive finite
weight is valid; only their ratios matter).

Finding (red team, reproducer ``tools/reproducers/piloted_mean_extreme_weights.py``): with a
weight of ``1e300`` (any above about ``3e271`` at a large epsilon) the objective's count term
``w_m (m - c)^2 / h^2`` overflowed to infinity, the count's fraction became NaN and
``round(NaN)`` raised ``ValueError`` after the charge, but only when some group was large
enough for its pilot to be read (before: 50,000 rows raised, 50 did not, both charged; after:
both released). The weights are now rescaled before that product, which leaves the choice
unchanged (the objective is homogeneous in the weights).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._pricing import pilot_choice, price
from dpkit.noise import RandomSource


def _pilot(weight: float, bounds: tuple[float, float], eps: float) -> object:
    pr = price(
        {"m": dpa.mean("x", bounds=bounds, weight=weight)},
        mode="pure",
        epsilon=eps,
        delta=0.0,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    (sp,) = pr.stats
    assert sp.pilot is not None
    return sp.pilot


@pytest.mark.parametrize("weight", [1e280, 1e300, 1.7e308])
@pytest.mark.parametrize("bounds, eps", [((0.0, 10.0), 1.0), ((-3.0, 7.0), 1e6)])
def test_the_pilots_choice_is_the_same_at_any_scale_of_the_weights(
    weight: float, bounds: tuple[float, float], eps: float
) -> None:
    ref, big = _pilot(1.0, bounds, eps), _pilot(weight, bounds, eps)
    lo, hi = ref.lo, ref.hi  # type: ignore[attr-defined]
    c0 = ref.total.center  # type: ignore[attr-defined]
    for n1 in (1, 100, 10_000, 10**6, 10**9):
        for x in (lo, hi, lo + (hi - lo) // 7, c0):
            t1 = (x - c0) * n1
            assert pilot_choice(big, n1, t1) == pilot_choice(ref, n1, t1)  # type: ignore[arg-type]


@pytest.mark.parametrize("rows", [50, 50_000])
def test_a_heavily_weighted_mean_never_raises_after_the_charge(rows: int) -> None:
    rng = np.random.default_rng(3)
    d = pd.DataFrame({"uid": np.arange(rows), "x": rng.uniform(0.0, 2.0, rows)})
    budget = Budget(epsilon=5.0)
    s = dpa.Session(
        d,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=11, insecure=True),
    )
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1)
    out = q.agg(m=dpa.mean("x", bounds=(0.0, 10.0), weight=1e300)).run(epsilon=1.0)
    assert len(out) == 1 and 0.0 <= out["m"].iloc[0] <= 10.0
    assert budget.spent[0] == pytest.approx(1.0)
