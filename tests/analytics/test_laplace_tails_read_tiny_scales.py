"""The Laplace-sum tails behind the certified variance intervals are read at any scale, so the
pivot's threshold search checks every width it returns, however large epsilon is.

Finding (red team of the pure variance from the complementary pair): the tail of a sum of
two or three Laplace laws weighted each exponential by products of squared scales, which
underflow to 0 below scales of about ``1e-162`` (0/0: NaN). A pure variance released at
epsilon ``1e200`` (bounds ``[0, 10]``, one group of 50 rows) read NaN in all 4,096 cells of
its pivot; the threshold search then stopped at its first guess unchecked (that guess, 40
scales plus twice the rounding margin, happened to hold). After the fix the weights are read
at a unit largest scale (the tail is scale-free; with three laws a scale below ``2^-200`` of
the largest is raised to that, which only raises the tail): no NaN, the same values as at
unit scales. Reproducer: ``tools/reproducers/laplace_tails_tiny_scales.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
import dpkit.analytics._intervals as intervals
from dpkit.accounting import Budget
from dpkit.analytics._intervals import laplace_sum_survival
from dpkit.noise import RandomSource


@pytest.mark.parametrize("s", [1e-170, 1e-200, 1e-300])
def test_the_tails_are_scale_free_down_to_the_least_normal_scales(s: float) -> None:
    x = np.array([0.5, 5.0, 40.0])
    one = np.ones(3)
    for b2 in (2.0, 1.0 + 1e-9):  # distinct and equal scales
        ref = laplace_sum_survival(1.0, b2 * one, x)
        got = laplace_sum_survival(s, b2 * s * one, x * s)
        np.testing.assert_allclose(got, ref, rtol=1e-6)
    ref3 = laplace_sum_survival(1.0, 2.0 * one, x, 3.0 * one)
    got3 = laplace_sum_survival(s, 2.0 * s * one, x * s, 3.0 * s * one)
    np.testing.assert_allclose(got3, ref3, rtol=1e-6)
    # one law dominating: its own tail e^(-x) / 2, never NaN
    lone = laplace_sum_survival(s, 1e-250 * s * one, x * s, 1e-300 * s * one)
    assert np.all(lone >= np.exp(-x) / 2.0) and np.all(lone <= np.exp(-x) / 2.0 * (1 + 1e-9))


def test_a_variance_at_a_huge_epsilon_reads_no_nan_tail(monkeypatch: Any) -> None:
    seen: list[np.ndarray] = []
    inner = intervals._laplace3_survival

    def spy(b1: float, b2: Any, b3: Any, x: Any) -> Any:
        out = inner(b1, b2, b3, x)
        seen.append(out)
        return out

    monkeypatch.setattr(intervals, "_laplace3_survival", spy)
    intervals.variance_cells.cache_clear()
    rng = np.random.default_rng(0)
    d = pd.DataFrame({"uid": range(50), "g": ["a"] * 50, "x": rng.uniform(0.0, 10.0, 50)})
    s = dpa.Session(
        d,
        privacy_unit="uid",
        budget=Budget(epsilon=1e300),
        source_of_randomness=RandomSource(seed=1, insecure=True),
    )
    out = (
        s.query()
        .group_by("g", keys=["a"])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(v=dpa.variance("x", bounds=(0.0, 10.0)))
        .run(epsilon=1e200)
    )
    intervals.variance_cells.cache_clear()
    assert "complementary pair" in out.attrs["dpkit"]["columns"]["v"]["mechanism"]
    assert seen and not any(np.isnan(v).any() for v in seen)
    truth = float(np.var(d["x"]))
    assert out["v_low"][0] <= truth <= out["v_high"][0]
