"""Quantiles from sparse bin counts on fine grids: the run-wise selection has exactly the law of
the per-bin exponential mechanism (closed form, and a chi-square test at alpha = 1e-6 with a
companion that catches a selection which forgets the run lengths), the compact equal-bin grid
equals the explicit one, the default resolution rule, and an end-to-end accuracy check against
the exponential mechanism's rank bound.
"""

from __future__ import annotations

import itertools
import math

import mpmath
import numpy as np
import pytest
from _stats import ALPHA, chi2_categorical, chi2_power
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit._numeric.grids import UniformEdges
from dpkit.analytics._aggregates import MAX_QUANTILE_BINS, quantile_bins
from dpkit.mechanisms import BinnedQuantile
from dpkit.noise import RandomSource

COUNTS = np.array([0, 0, 3, 0, 0, 0, 5, 0, 1, 0, 0, 0, 0, 4, 0, 0])
EDGES = tuple(float(i) for i in range(len(COUNTS) + 1))
N_STAT = 20_000


def seeded(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


def _sparse(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nz = np.flatnonzero(counts)
    return nz.astype(np.int64), counts[nz].astype(np.int64)


def _runs_of(counts: np.ndarray) -> list[list[int]]:
    """The candidates of the sparse selection: each non-empty bin alone, each maximal run of
    empty bins together."""
    out: list[list[int]] = []
    for j, c in enumerate(counts):
        if c == 0 and out and counts[out[-1][-1]] == 0 and out[-1][-1] == j - 1:
            out[-1].append(j)
        else:
            out.append([j])
    return out


def _reference_law(eps: float, q: float, weighted: bool = True) -> np.ndarray:
    """The per-bin law by mpmath from the rank utilities (weighted) or, for the companion, a
    selection that gives every run the weight of one bin and spreads it uniformly."""
    mpmath.mp.dps, old = 40, mpmath.mp.dps
    try:
        cum = np.concatenate(([0], np.cumsum(COUNTS)))
        n, sens = int(cum[-1]), max(q, 1 - q)
        u = [-max(cum[j] - q * n, q * n - cum[j + 1], 0) for j in range(len(COUNTS))]
        w = [mpmath.exp(mpmath.mpf(eps) * mpmath.mpf(x) / (2 * sens)) for x in u]
        if not weighted:
            for run in _runs_of(COUNTS):
                for j in run:
                    w[j] = w[j] / len(run)
        s = mpmath.fsum(w)
        return np.array([float(x / s) for x in w])
    finally:
        mpmath.mp.dps = old


def test_run_law_in_closed_form() -> None:
    """Summed over each run, the per-bin probabilities equal softmax(factor u + ln w) of the
    runs: the law the sparse sampler draws from (its arg-max of ``factor u + ln w + Gumbel``)."""
    bq = BinnedQuantile.from_epsilon(epsilon=0.8, quantiles=[0.5], edges=EDGES)
    p_bins = bq.bin_probabilities(COUNTS)[0, 0]
    u = bq.utilities(COUNTS)[0, 0]
    runs = _runs_of(COUNTS)
    z = np.array([u[r[0]] * bq.mechanisms[0].factor + math.log(len(r)) for r in runs])
    p_runs = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    assert np.allclose(p_runs, [p_bins[r].sum() for r in runs], rtol=1e-12, atol=0)
    assert np.allclose(p_bins, _reference_law(0.8, 0.5), rtol=1e-9, atol=0)


@pytest.mark.slow
def test_sparse_released_bins_match_the_law() -> None:
    """Pearson chi-square at alpha = 1e-6 of the sparse sampler's bins against the mpmath law
    (cells expected below 20 pooled)."""
    bq = BinnedQuantile.from_epsilon(epsilon=0.8, quantiles=[0.5], edges=EDGES)
    idx = bq.release_bins_sparse([_sparse(COUNTS)] * N_STAT, source=seeded(21))[:, 0]
    stat, crit = chi2_categorical(
        np.bincount(idx, minlength=len(COUNTS)), _reference_law(0.8, 0.5), ALPHA
    )
    assert stat <= crit


def test_companion_catches_unweighted_runs() -> None:
    """The same test rejects a selection that forgets the run lengths (power >= 1 - 1e-6)."""
    p0, p1 = _reference_law(0.8, 0.5), _reference_law(0.8, 0.5, weighted=False)
    assert chi2_power(N_STAT, p0, p1) >= 1 - 1e-6
    draws = seeded(22).uniform(N_STAT)
    broken = np.searchsorted(np.cumsum(p1), draws, side="right").clip(0, len(COUNTS) - 1)
    stat, crit = chi2_categorical(np.bincount(broken, minlength=len(COUNTS)), p0, ALPHA)
    assert stat > crit


def test_empty_group_and_dense_input_agree_in_shape() -> None:
    bq = BinnedQuantile.from_epsilon(epsilon=1.0, quantiles=[0.1, 0.9], edges=EDGES)
    empty = np.zeros(0, dtype=np.int64)
    out = bq.release_sparse([(empty, empty), _sparse(COUNTS)], source=seeded(3))
    assert out.shape == (2, 2)
    assert np.all((out >= EDGES[0]) & (out <= EDGES[-1]))


@settings(max_examples=60, deadline=None)
@given(
    lo=st.floats(-1e6, 1e6, allow_nan=False),
    span=st.floats(1e-3, 1e7),
    bins=st.integers(1, 4096),
)
def test_uniform_edges_equal_the_explicit_grid(lo: float, span: float, bins: int) -> None:
    hi = lo + span
    try:
        grid = UniformEdges(lo, hi, bins)
    except ValueError:
        return  # not representable: refused, never a wrong grid
    step = (hi - lo) / bins
    explicit = tuple([lo + i * step for i in range(bins)] + [hi])
    assert grid == explicit and tuple(grid) == explicit
    assert np.array_equal(grid.array(), np.array(explicit))
    idx = np.arange(bins + 1, dtype=np.int64)
    assert np.array_equal(grid.at(idx), np.array(explicit))
    assert all(a < b for a, b in itertools.pairwise(explicit))


def test_resolution_rule_uses_the_bounds_only() -> None:
    assert quantile_bins(0.0, 500_000.0) == MAX_QUANTILE_BINS
    assert quantile_bins(0.0, 500_000.0, 1024) == 1024
    # a narrow range far from 0: coarser, so the engine still bins by exact arithmetic
    b = quantile_bins(1e9, 1e9 + 10.0)
    assert b < MAX_QUANTILE_BINS and 10.0 / b >= math.ldexp(1e9 + 10.0, -29)


def test_median_of_a_large_group_within_the_rank_bound() -> None:
    """20,000 values uniform on [0, 100,000], epsilon 1, default grid: with probability at
    least 1 - 1e-6 the chosen bin's rank interval is within t = (2 Delta / eps)(ln bins +
    ln 1e6) of n/2 (Dwork and Roth, Thm 3.11), so the value lies between the order statistics
    at ranks n/2 -+ (t + 1), widened by one bin."""
    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.accounting import Budget

    rng = np.random.default_rng(5)
    x = rng.uniform(0.0, 100_000.0, 20_000)
    df = pd.DataFrame({"uid": np.arange(x.size), "x": x})
    s = dpa.Session(
        df, privacy_unit="uid", budget=Budget(epsilon=10.0), source_of_randomness=seeded(6)
    )
    f = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(q=dpa.quantile("x", 0.5, bounds=(0.0, 100_000.0)))
        .run(epsilon=1.0)
    )
    bins = quantile_bins(0.0, 100_000.0)
    t = math.ceil(2 * 0.5 / 1.0 * (math.log(bins) + math.log(1e6)))
    xs = np.sort(x)
    lo, hi = xs[10_000 - t - 2], xs[10_000 + t + 1]
    width = 100_000.0 / bins
    v = float(f["q_p50"].iloc[0])
    assert lo - width <= v <= hi + width
    assert hi - lo < 400  # the band is narrow: about 2 t spacings of the data
