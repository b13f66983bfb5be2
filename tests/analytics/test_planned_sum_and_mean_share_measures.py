"""A planned sum and mean of one column released from one noisy count and centred sum.

With no ``.bound(...)`` and ``bounds="auto"`` in a pure session, a sum and a mean of the same
column (same ``auto_share``) may be released as with fixed bounds: the mean ``c + T / N`` and
the sum ``T + c N`` from one pair of measures on the two statistics' pooled share, at one
contribution pair (:func:`~dpkit.analytics._planner.pooled_bounds`: only when neither statistic
is estimated worse than alone), one upper bound
(:func:`~dpkit.analytics._planner.trimmed_upper` with ``kind=POOL_KIND``) and one centre and
split (:func:`~dpkit.analytics._planner.pool_centre`). These tests check the rules' arithmetic,
the release (pure sessions; zCDP and basic ``(epsilon, delta)`` sessions keep two releases;
public keys, no grouping, partition selection), and what the plan and ``summarize()`` report.
That the release stays within its charge for either choice is in
test_planned_release_within_its_charge.py.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._planner import (
    CENTRE_STEPS,
    CONTRIBUTION_GRID,
    MEAN_GROUP_SPREAD,
    POOL_KIND,
    POOL_TRIM_STEPS,
    TRIM_OCTAVES,
    group_sizes,
    pool_centre,
    pooled_bounds,
    statistic_bounds,
    trimmed_upper,
)
from dpkit.analytics._pricing import AUTO_EDGES
from dpkit.noise import RandomSource

BINS = len(AUTO_EDGES) - 1


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("mean", [5.0, 30.0, 50.0, 90.0])
def test_pool_centre_minimises_the_sum_of_the_two_relative_variances(
    gaussian: bool, mean: float
) -> None:
    """The centre is the grid point minimising ``(a_T^x + a_N^x)^(1/x)`` with ``a_T = 2 s^2``
    and ``a_N = E[r^2] + c^2``; the noise factors are those of the rounded split."""
    lower, upper, var = 0.0, 100.0, 200.0
    x = 0.5 if gaussian else 1.0 / 3.0
    spread = MEAN_GROUP_SPREAD * var
    grid = [lower + (upper - lower) * j / (2 * CENTRE_STEPS) for j in range(2 * CENTRE_STEPS + 1)]

    def objective(c: float) -> float:
        s = max(c - lower, upper - c)
        a_t, a_n = 2.0 * s * s, (mean - c) ** 2 + spread + c * c
        return float((a_t**x + a_n**x) ** (1.0 / x))

    c, f_n, d_m, d_s = pool_centre(mean, var, lower, upper, gaussian=gaussian)
    assert c in grid
    assert objective(c) == pytest.approx(min(objective(g) for g in grid), rel=1e-12)
    a = 1.0 / x - 1.0
    s2 = max(c - lower, upper - c) ** 2
    assert d_m == pytest.approx(
        math.sqrt(s2 / (1 - f_n) ** a + ((mean - c) ** 2 + spread) / f_n**a)
    )
    assert d_s == pytest.approx(math.sqrt(s2 / (1 - f_n) ** a + c * c / f_n**a))
    assert 0.01 <= f_n <= 0.99 and round(f_n, 2) == f_n


def _hist(counts: dict[int, int]) -> list[int]:
    """A per-unit histogram over CONTRIBUTION_GRID from ``{grid value: units}``."""
    return [counts.get(g, 0) for g in CONTRIBUTION_GRID]


def test_pooled_bounds_pool_when_neither_statistic_is_worse() -> None:
    """One group per unit and 1 to 3 rows (the utility benchmark's shape): the pooled share
    more than pays for the mean keeping the sum's rows, so both get one pair."""
    groups = _hist({1: 100_000})
    rows = _hist({1: 40_000, 2: 30_000, 3: 30_000})
    grid = list(CONTRIBUTION_GRID)
    targets = [("s", "sum", 0.36), ("m", "mean", 0.36)]
    alone = statistic_bounds(groups, rows, [1], grid, targets, 100, False, 30)
    got = pooled_bounds(groups, rows, [1], grid, [("s", "m", 0.81)], targets, 100, False, 30)
    assert set(got) == {"s", "m"} and got["s"] == got["m"]
    assert alone["m"][1] <= got["m"][1] <= alone["s"][1]


def test_pooled_bounds_keep_two_releases_when_the_mean_would_lose() -> None:
    """Units in a geometric number of groups and rows (the planner benchmark's shape): the
    sum keeps (4, 4), the mean (1, 1); at any pair the sum can live with, the mean's noise
    outgrows the pooled share, so no pool (an empty answer: each keeps its own pair)."""
    groups = _hist({1: 10_000, 2: 5_000, 3: 2_500, 4: 1_250, 6: 600})
    rows = _hist({1: 10_000, 2: 5_000, 3: 3_000, 4: 1_500})
    grid = list(CONTRIBUTION_GRID)
    targets = [("s", "sum", 0.24), ("m", "mean", 0.24)]
    assert statistic_bounds(groups, rows, grid, grid, targets, 40, False, 30) == {
        "s": (4, 4),
        "m": (1, 1),
    }
    got = pooled_bounds(groups, rows, grid, grid, [("s", "m", 0.54)], targets, 40, False, 30)
    assert got == {}


def test_pooled_bounds_read_nothing_from_insignificant_bins() -> None:
    """Below the threshold the histograms read as empty: nothing to estimate, no pool."""
    grid = list(CONTRIBUTION_GRID)
    targets = [("s", "sum", 0.36), ("m", "mean", 0.36)]
    small = _hist({1: 5})
    assert pooled_bounds(small, small, [1], grid, [("s", "m", 0.8)], targets, 1, True, 30) == {}


def _lognormal_counts(n: int, seed: int = 1) -> list[int]:
    x = np.random.default_rng(seed).lognormal(math.log(20_000.0), 1.0, n)
    edges = np.asarray(AUTO_EDGES)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, BINS - 1)
    return np.bincount(idx, minlength=BINS).tolist()


@pytest.mark.parametrize("gaussian", [False, True])
@pytest.mark.parametrize("noise", [3.0, 30.0, 300.0])
def test_a_pooled_upper_bound_guards_every_row_in_one_group(gaussian: bool, noise: float) -> None:
    """The pair's bound is judged up to all ``N`` rows in one group (the pair's guard), among
    candidates an eighth of an octave apart: with 200 groups it stays above the bound of the
    sum alone (guarding ``sqrt(K)`` times the mean size) and of the mean alone (the mean size
    only), where the guard of the sum would have put it between the two; with one group
    there is nothing beyond the mean size to guard, and it lies between them (to within one
    step of its finer grid)."""
    counts = _lognormal_counts(200_000)
    hits = [i for i, c in enumerate(counts) if c >= 30]
    lo, hi = 1024.0, float(AUTO_EDGES[hits[-1] + 1])

    def bound(kind: str, groups: int) -> float:
        return trimmed_upper(
            counts,
            AUTO_EDGES,
            30,
            lo,
            hi,
            kind=kind,
            unit_noise=noise,
            groups=groups,
            gaussian=gaussian,
        )

    eighths = {
        hi * 2.0 ** (-j / POOL_TRIM_STEPS) for j in range(POOL_TRIM_STEPS * TRIM_OCTAVES + 1)
    }
    alone = {kind: bound(kind, 200) for kind in ("sum", "mean")}
    pair = bound(POOL_KIND, 200)
    assert pair in eighths
    assert pair > max(alone.values())
    one = {kind: bound(kind, 1) for kind in ("sum", "mean", POOL_KIND)}
    step = 2.0 ** (1.0 / POOL_TRIM_STEPS)  # the pair's finer grid may stop between two
    assert min(one["sum"], one["mean"]) / step <= one[POOL_KIND]
    assert one[POOL_KIND] <= max(one["sum"], one["mean"]) * step


def test_group_sizes_reach_every_row_only_for_the_pair() -> None:
    """The pair's guard adds ``N = n K`` to the sizes of the sum's (and nothing with one
    group)."""
    assert group_sizes(10.0, 100, every_row=True) == [*group_sizes(10.0, 100), 1000.0]
    assert max(group_sizes(10.0, 100)) == pytest.approx(100.0)
    assert group_sizes(10.0, 1, every_row=True) == group_sizes(10.0, 1) == [10.0]


# ---------------------------------------------------------------------------- the release
def _people(n: int = 6_000, groups: int = 8, seed: int = 2) -> pd.DataFrame:
    """One group per person and 1 to 3 rows each: a shape where the pool is chosen."""
    rng = np.random.default_rng(seed)
    k = rng.integers(1, 4, n)
    uid = np.repeat(np.arange(n), k)
    g = np.repeat(rng.integers(0, groups, n), k)
    v = rng.lognormal(math.log(20_000.0), 0.8, len(uid))
    return pd.DataFrame({"uid": uid, "g": g, "v": v})


def _session(df: pd.DataFrame, mode: str, seed: int = 3) -> dpa.Session:
    budget = (
        Budget(epsilon=1e9, delta=1e-3, method="zcdp") if mode == "zcdp" else Budget(epsilon=1e9)
    )
    return dpa.Session(
        df,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )


def _aggs(**sum_options: float) -> dict[str, dpa.Statistic]:
    return {
        "n": dpa.count(),
        "s": dpa.sum("v", bounds="auto", **sum_options),  # type: ignore[arg-type]
        "m": dpa.mean("v", bounds="auto"),
    }


@pytest.mark.parametrize("grouped", [True, False])
def test_a_planned_sum_is_released_from_its_mean_s_measures(grouped: bool) -> None:
    df = _people()
    mode = "pure"
    s = _session(df, mode)
    q = s.query()
    if grouped:
        q = q.group_by("g", keys=list(range(8)))
    delta = 1e-6 if mode == "zcdp" else None
    out = q.agg(**_aggs()).run(epsilon=50.0, delta=delta)
    assert len(s.budget.ledger) == 1  # planning, bounds, release: one charge
    plan = out.attrs["dpkit"]["plan"]
    assert plan["pooled"] == {"s": "m"}
    assert plan["statistics"]["s"] == plan["statistics"]["m"]
    assert plan["bounds"]["s"] == plan["bounds"]["m"]
    cols = out.attrs["dpkit"]["columns"]
    assert cols["s"]["mechanism"].startswith("post-processing of m's")
    # a pure planned pair with the data near the lower bound: the complementary pair
    assert cols["s"]["pair"] == cols["m"]["pair"]
    # the two are read from the same noisy pair: m = lo + (hi - lo) B / (A + B) and s = (hi B
    # + lo A) / (hi - lo) give
    # s / m = N up to the clipping of m to its bounds and the lattice step
    truth = df.groupby("g")["v"].agg(["sum", "mean"]) if grouped else None
    for i in range(len(out)):
        sv, mv = float(out["s"].iloc[i]), float(out["m"].iloc[i])
        want = (
            truth.loc[int(out["g"].iloc[i])] if truth is not None else df["v"].agg(["sum", "mean"])
        )
        assert sv == pytest.approx(want["sum"], rel=0.1)
        assert mv == pytest.approx(want["mean"], rel=0.1)
        assert out["s_low"].iloc[i] <= sv <= out["s_high"].iloc[i]


@pytest.mark.parametrize("grouped", [True, False])
def test_a_zcdp_session_keeps_two_releases(grouped: bool) -> None:
    """Pooling halves the noise variance under Gaussian noise, not the noise, which does not
    pay for the mean keeping the sum's rows and bound (module docstring): two releases, each
    still within the one charge."""
    df = _people()
    s = _session(df, "zcdp")
    q = s.query()
    if grouped:
        q = q.group_by("g", keys=list(range(8)))
    q = q.agg(**_aggs())
    assert q.summarize(epsilon=1.0, delta=1e-6).attrs["dpkit"]["plan"]["rules"]["s"] == "own: sum"
    out = q.run(epsilon=50.0, delta=1e-6)
    assert len(s.budget.ledger) == 1
    assert "pooled" not in out.attrs["dpkit"]["plan"]
    assert not out.attrs["dpkit"]["columns"]["s"]["mechanism"].startswith("post-processing")
    assert float(out["s"].sum()) == pytest.approx(float(df["v"].sum()), rel=0.1)


def test_planned_sum_and_mean_with_partition_selection_keep_two_releases() -> None:
    """Without public keys the planner chooses no per-statistic pairs, so no pool: the query
    runs as before and releases both statistics for the groups it selects."""
    df = _people(groups=4)
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=Budget(epsilon=1e9, delta=1e-3),
        source_of_randomness=RandomSource(seed=5, insecure=True),
    )
    out = s.query().group_by("g").agg(**_aggs()).run(epsilon=20.0, delta=1e-6)
    assert "pooled" not in out.attrs["dpkit"]["plan"]
    assert len(out) == 4 and out["s"].notna().all() and out["m"].notna().all()
    cols = out.attrs["dpkit"]["columns"]
    assert not cols["s"]["mechanism"].startswith("post-processing")


def test_a_sum_with_its_own_auto_share_is_never_pooled() -> None:
    s = _session(_people(), "pure")
    q = s.query().group_by("g", keys=list(range(8))).agg(**_aggs(auto_share=0.3))
    rules = q.summarize(epsilon=1.0).attrs["dpkit"]["plan"]["rules"]
    assert rules == {"n": "own: count", "s": "own: sum", "m": "own: mean"}
    out = q.run(epsilon=1.0)
    assert "pooled" not in out.attrs["dpkit"]["plan"]


def test_summarize_says_the_sum_and_mean_may_be_pooled() -> None:
    s = _session(_people(), "pure")
    q = s.query().group_by("g", keys=list(range(8))).agg(**_aggs())
    rules = q.summarize(epsilon=1.0).attrs["dpkit"]["plan"]["rules"]
    assert rules == {
        "n": "own: count",
        "s": "own: sum, or pool (s and m)",
        "m": "own: mean, or pool (s and m)",
    }


def test_a_basic_approx_session_keeps_two_releases() -> None:
    """A basic ``(epsilon, delta)`` budget prices each statistic's noise on its own (Laplace or
    Gaussian, whichever is smaller at its share), so planned sums are never pooled there."""
    s = dpa.Session(
        _people(),
        privacy_unit="uid",
        budget=Budget(epsilon=1e9, delta=1e-3),
        source_of_randomness=RandomSource(seed=7, insecure=True),
    )
    q = s.query().group_by("g", keys=list(range(8))).agg(**_aggs())
    rules = q.summarize(epsilon=1.0, delta=1e-6).attrs["dpkit"]["plan"]["rules"]
    assert "pool" not in rules["s"]
    out = q.run(epsilon=1.0, delta=1e-6)
    assert "pooled" not in out.attrs["dpkit"]["plan"]


def test_planned_pools_pair_one_auto_sum_with_one_auto_mean_of_its_column() -> None:
    from dpkit.analytics._pricing import planned_pools

    stats = {
        "m": dpa.mean("v", bounds="auto"),
        "t": dpa.sum("v", bounds="auto"),
        "u": dpa.sum("v", bounds="auto", weight=2),  # a second sum: released on its own
        "w": dpa.sum("w", bounds="auto"),  # another column
        "x": dpa.sum("v", bounds=(0, 10)),  # given bounds: the fixed-bounds rule's (_pools)
        "y": dpa.sum("v", bounds="auto", auto_share=0.3),  # another auto_share
    }
    assert planned_pools(stats) == {"t": "m"}
