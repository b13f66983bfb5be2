"""Equal bins between bounds that doubles can barely tell apart.

Quantile bounds a few ulps apart (subnormal bounds, or a fine grid on a narrow range) used to
give a grid whose step rounded to zero, or one the compiler binned by a binary-search ``CASE``
tree of up to 2^20 leaves (a statement that took minutes to build). Now a grid is made only when
:func:`~dpkit._numeric.grids.equal_bins_exact` holds, the engine bins every such grid by
arithmetic, and bounds too close for it are refused with a plain error before any charge.
"""

from __future__ import annotations

import itertools
import math

import pandas as pd
import pytest
from _engine_reference import as_dict, bin_of, plan_for
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit.analytics as dpa
from dpkit._numeric.grids import UniformEdges, equal_bins_exact
from dpkit.accounting import Budget
from dpkit.analytics._aggregates import quantile_bins
from dpkit.analytics._plan import Measure, Source
from dpkit.analytics.engines import DuckDBEngine
from dpkit.errors import PrivacyParameterError

TABLE = Source(kind="table", location="t")


def _engine_bin(c: float, lo: float, hi: float, bins: int) -> int:
    """The engine's arithmetic binning, step by step in doubles: a guess from one multiplication,
    clamped, then corrected by one comparison either side."""
    w = (hi - lo) / bins
    g = min(max(math.floor((c - lo) * (bins / (hi - lo))), 0), bins - 1)
    if c < lo + g * w:
        return g - 1
    if g < bins - 1 and c >= lo + (g + 1) * w:
        return g + 1
    return g


MAGNITUDES = st.one_of(
    st.floats(min_value=-1e-305, max_value=1e-305, allow_nan=False),  # subnormals included
    st.floats(min_value=-(2.0**50), max_value=2.0**50, allow_nan=False),
)


@settings(max_examples=400, deadline=None)
@given(
    a=MAGNITUDES,
    ulps=st.integers(1, 2**45),
    bins=st.sampled_from([1, 2, 3, 7, 64, 1024, 1 << 16, 1 << 20]),
    t=st.floats(0.0, 1.0),
)
def test_every_accepted_grid_is_binned_exactly_by_arithmetic(
    a: float, ulps: int, bins: int, t: float
) -> None:
    # bounds from 1 to 2^45 ulps apart: from far too close to comfortably wide
    lo, hi = a, a + ulps * math.ulp(a)
    if not equal_bins_exact(lo, hi, bins):
        with pytest.raises(ValueError):
            UniformEdges(lo, hi, bins)
        return
    edges = UniformEdges(lo, hi, bins)
    values = [edges[i] for i in sorted({*range(min(bins, 8)), bins - 1, bins})]
    assert all(x < y for x, y in itertools.pairwise(values))
    c = min(max(lo + t * (hi - lo), lo), hi)
    for x in {c, lo, hi, *values, math.nextafter(hi, lo), math.nextafter(values[1], lo)}:
        assert _engine_bin(x, lo, hi, bins) == bin_of(x, edges)


def test_companion_a_step_that_underflows_is_caught() -> None:
    # the old rule (a step of at least 2^-40 of the magnitude) passes these bounds, because
    # 2^-40 of a subnormal underflows to 0; their step of 0 puts every edge at 5e-324
    lo, hi, bins = 5e-324, 1e-323, 1 << 20
    step = (hi - lo) / bins
    assert step >= math.ldexp(max(abs(lo), abs(hi)), -40)  # the old rule is fooled
    assert step == 0.0
    assert not equal_bins_exact(lo, hi, bins)
    assert quantile_bins(lo, hi) == 2


@pytest.mark.parametrize(
    ("bounds", "bins"),
    [
        ((5e-324, 1e-323), None),
        ((0.0, 5e-324), None),
        ((0.0, 1e-310), None),
        ((1.0, 1.0 + 1e-10), 1 << 20),
    ],
)
def test_bounds_too_close_for_their_bins_are_refused_before_the_charge(
    bounds: tuple[float, float], bins: int | None
) -> None:
    with pytest.raises(PrivacyParameterError, match="too close together"):
        dpa.quantile("v", 0.5, bounds=bounds, bins=bins)


def test_a_fine_grid_on_a_narrow_range_is_binned_by_arithmetic() -> None:
    # 65,536 bins of [1, 1 + 2^-20]: a step of 2^-36, accepted; the compiler used to fall back
    # to a CASE tree of 65,536 leaves here
    lo, hi, bins = 1.0, 1.0 + 2.0**-20, 1 << 16
    edges = UniformEdges(lo, hi, bins)
    xs = [lo + k * 2.0**-52 for k in range(0, 2**32 + 1, 2**22)] + [0.5, 2.0, hi]
    df = pd.DataFrame({"uid": range(len(xs)), "x": xs})
    engine = DuckDBEngine(threads=1)
    engine.register("t", df)
    measure = Measure(name="h", kind="bin_counts", column="x", edges=edges)
    plan = plan_for(TABLE, group_by=(), max_partitions=1, max_rows=1, measures=(measure,))
    assert engine.compile(plan).sql.upper().count("CASE") < 20  # not one per bin
    got = as_dict(engine.execute(plan))[()]["h"]
    want = [0] * bins
    for x in xs:
        want[bin_of(min(max(x, lo), hi), edges)] += 1
    dense = [0] * bins
    for i, n in got.items() if isinstance(got, dict) else enumerate(got):
        dense[i] = n
    assert dense == want


def test_a_query_on_a_narrow_range_runs_and_charges_once() -> None:
    df = pd.DataFrame({"u": range(200), "v": [1.0 + (i % 5) * 2.0**-24 for i in range(200)]})
    s = dpa.Session(df, budget=Budget(epsilon=10), privacy_unit="u")
    q = dpa.quantile("v", 0.5, bounds=(1.0, 1.0 + 2.0**-20), bins=1 << 16)
    out = s.query().bound(max_partitions=1, max_rows_per_partition=1).agg(m=q).run(epsilon=1)
    assert 1.0 <= float(out["m_p50"][0]) <= 1.0 + 2.0**-20
    assert 0.999 < s.budget.spent.epsilon <= 1.0
