"""The variance pivot's Laplace-sum tails at tiny scales: NaN, so a width went unchecked.

Before the fix: the tail of a sum of two or three Laplace laws
(``_intervals.laplace_sum_survival``) weighted each exponential by products of squared
scales, which underflow below scales of about ``1e-162`` (0/0: NaN). A pure variance from the
complementary pair at epsilon ``1e200`` (bounds ``[0, 10]``, one group of 50 rows, the
release's scales near ``5e-201``) read NaN in all 4,096 cells of its pivot; the threshold
search took NaN as "not above alpha" and returned its first guess unchecked (40 scales plus
twice the rounding margin: it held, so the interval still covered). After: the weights are
read at a unit largest scale (the tail is scale-free; with three laws a scale under ``2^-200``
of the largest is raised to that, which only raises the tail): no NaN at any epsilon.
Prints, per epsilon, the NaN cells read and the interval against the true variance.
Regression test: ``tests/analytics/test_laplace_tails_read_tiny_scales.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

import dpkit.analytics as dpa
import dpkit.analytics._intervals as intervals
from dpkit.accounting import Budget
from dpkit.noise import RandomSource


def main() -> None:
    inner = intervals._laplace3_survival
    seen = {"cells": 0, "nan": 0}

    def spy(b1: float, b2: Any, b3: Any, x: Any) -> Any:
        out = inner(b1, b2, b3, x)
        seen["cells"] += int(out.size)
        seen["nan"] += int(np.isnan(out).sum())
        return out

    intervals._laplace3_survival = spy
    rng = np.random.default_rng(0)
    d = pd.DataFrame({"uid": range(50), "g": ["a"] * 50, "x": rng.uniform(0.0, 10.0, 50)})
    truth = float(np.var(d["x"]))
    for eps in (1.0, 1e100, 1e200, 1e300):
        intervals.variance_cells.cache_clear()
        seen.update(cells=0, nan=0)
        s = dpa.Session(
            d,
            privacy_unit="uid",
            budget=Budget(epsilon=1e308),
            source_of_randomness=RandomSource(seed=1, insecure=True),
        )
        out = (
            s.query()
            .group_by("g", keys=["a"])
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(v=dpa.variance("x", bounds=(0.0, 10.0)))
            .run(epsilon=eps)
        )
        lo, hi = float(out["v_low"][0]), float(out["v_high"][0])
        print(
            f"epsilon {eps:g}: NaN tails {seen['nan']} of {seen['cells']} read; "
            f"interval [{lo:.12g}, {hi:.12g}] truth {truth:.12g} covered {lo <= truth <= hi}"
        )


if __name__ == "__main__":
    main()
