"""A session's ``alpha`` is refused below the floor its interval searches can reach, before any
charge; at the floor, means (centred and as the complementary pair) release at once.

Finding (reproducer ``tools/reproducers/mean_interval_tiny_alpha.py``): ``Session(...,
alpha=1e-12)`` was accepted, and every mean then charged its epsilon and never returned. The
certified interval search (``_intervals._halfwidths``) doubles a width until its tail bound
is at most alpha, and every tail bound carries an absolute float margin of ``1e-12``: below
that no width qualifies, the width overflowed to infinity and the loop went on. Before: no
result after 30 s with epsilon 1 charged, for a mean alone and for a mean with a sum. After:
alpha below ``MIN_ALPHA = 1e-10`` raises ``PrivacyParameterError`` when the session is made;
at ``1e-10`` both release (intervals finite and holding their estimates)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.session import MIN_ALPHA
from dpkit.errors import PrivacyParameterError


def _table() -> pd.DataFrame:
    return pd.DataFrame({"uid": range(30), "g": [0, 1, 2] * 10, "x": np.linspace(0.0, 10.0, 30)})


@pytest.mark.parametrize("alpha", [1e-12, 1e-300, 5e-324, MIN_ALPHA / 2])
def test_an_alpha_below_the_floor_is_refused_before_any_query(alpha: float) -> None:
    budget = Budget(epsilon=10.0)
    with pytest.raises(PrivacyParameterError, match="alpha"):
        dpa.Session(_table(), privacy_unit="uid", budget=budget, alpha=alpha)
    assert len(budget.ledger) == 0


@pytest.mark.parametrize(
    "aggs",
    [
        {"m": dpa.mean("x", bounds=(0.0, 10.0))},  # centred, piloted
        {"m": dpa.mean("x", bounds=(0.0, 10.0)), "t": dpa.sum("x", bounds=(0.0, 10.0))},
        {"m": dpa.mean("x", bounds=(-10.0, 10.0)), "t": dpa.sum("x", bounds=(-10.0, 10.0))},
    ],
    ids=["mean", "complementary-pair", "centred-pair"],
)
@pytest.mark.parametrize("epsilon", [1e-3, 1.0, 1e3])
def test_means_at_the_smallest_alpha_release_once_charged(
    aggs: dict[str, Any], epsilon: float
) -> None:
    s = dpa.Session(_table(), privacy_unit="uid", budget=Budget(epsilon=1e4), alpha=MIN_ALPHA)
    q = s.query().group_by("g", keys=[0, 1, 2]).bound(max_partitions=1, max_rows_per_partition=1)
    out = q.agg(**aggs).run(epsilon=epsilon)
    assert len(s.budget.ledger) == 1
    for c in aggs:
        est, low, high = (out[n].to_numpy(dtype=float) for n in (c, f"{c}_low", f"{c}_high"))
        assert np.isfinite(np.r_[est, low, high]).all()
        assert (low <= est).all() and (est <= high).all()
