"""The upper bound of a planned variance (and std), traded against its noise.

:func:`~dpkit.analytics._planner.variance_upper` reads the planner's noisy histogram (here
exact counts: the rule is post-processing, so its arithmetic is tested on fixed inputs) and
returns a bound of the public grid of :func:`~dpkit.analytics._planner.trimmed_upper`, within
the histogram's range. Deterministic: no statistical test here.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._planner import (
    TRIM_OCTAVES,
    TRIM_STEPS,
    _clamped_moments,
    _tail_bins,
    group_sizes,
    value_bounds,
    variance_upper,
)
from dpkit.analytics._pricing import AUTO_EDGES, SQ_CENTRE, pool_split
from dpkit.noise import RandomSource

BINS = len(AUTO_EDGES) - 1
TAU = 300


def _counts(x: np.ndarray) -> list[int]:
    edges = np.asarray(AUTO_EDGES)
    idx = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, BINS - 1)
    return np.bincount(idx, minlength=BINS).tolist()


def _lognormal(n: int, seed: int = 8) -> list[int]:
    rng = np.random.default_rng(seed)
    return _counts(rng.lognormal(math.log(20_000.0), 1.0, n))


def _release(gaussian: bool) -> dict[str, object]:
    """The release's split and centre of the squares, as the builder passes them."""
    split = pool_split(not gaussian, "variance", 0.0, 1.0, 1.0)
    return {"gaussian": gaussian, "split": split, "kappa": float(SQ_CENTRE[not gaussian])}


def _upper(counts: list[int], noise: float, groups: int = 40, **kw: object) -> float:
    lo, hi, _ = value_bounds(counts, AUTO_EDGES, TAU)
    args: dict[str, object] = {"unit_noise": noise, "groups": groups, **kw}
    args.update(_release(bool(args.pop("gaussian", False))))
    lower = float(args.pop("lower", lo))  # type: ignore[arg-type]
    return variance_upper(counts, AUTO_EDGES, TAU, lower, hi, **args)  # type: ignore[arg-type]


def test_variance_upper_trades_clamped_variance_against_noise() -> None:
    counts = _lognormal(60_000)
    _, hi, found = value_bounds(counts, AUTO_EDGES, TAU)
    assert found and hi == 2.0**18
    grid = {hi * 2.0 ** (-j / TRIM_STEPS) for j in range(TRIM_STEPS * TRIM_OCTAVES + 1)}
    loud = _upper(counts, 100.0)
    assert loud in grid and loud < hi
    # less noise, a bound at least as high; almost none, the histogram's own
    assert loud <= _upper(counts, 1.0) <= _upper(counts, 1e-6) == hi
    # the same noise in zCDP (its own split and kappa): a bound of the grid within the range
    assert _upper(counts, 100.0, gaussian=True) in grid
    # a range reaching below 0, no significant bin, no group: the histogram's bound
    assert _upper(counts, 100.0, lower=-1.0) == hi
    assert _upper(counts, 100.0, groups=0) == hi
    assert (
        variance_upper(
            [0] * BINS, AUTO_EDGES, TAU, 0.0, hi, unit_noise=100.0, groups=40, **_release(False)
        )
        == hi
    )


def test_variance_upper_has_the_least_regret_of_the_planners_error_model() -> None:
    """The planner's error model, written out here: the chosen bound has the least regret
    (the largest ratio, over the group sizes guarded, of its error to the least of any
    candidate at that size), and the histogram's power of two has a larger one."""
    counts = _lognormal(200_000)
    lo, hi, _ = value_bounds(counts, AUTO_EDGES, TAU)
    bins = _tail_bins(counts, AUTO_EDGES, TAU, hi)
    assert bins is not None
    rows = sum(n for a, _, n in bins if a < hi)
    _, v_top = _clamped_moments(bins, lo, hi)
    kappa = float(SQ_CENTRE[True])
    noise, groups = 30.0, 400

    def error(u: float, n: float) -> float:
        mean, var = _clamped_moments(bins, lo, u)
        f_n, f_t, f_q = (float(f) for f in pool_split(True, "variance", lo, u, 1.0))
        h, r = (u - lo) / 2.0, mean - (lo + u) / 2.0
        k = kappa * h * h - var + r * r
        d = math.sqrt(((1 - kappa) * h * h / f_q) ** 2 + (2 * r * h / f_t) ** 2 + (k / f_n) ** 2)
        return math.hypot(v_top - var, noise * d / n)

    grid = [hi * 2.0 ** (-j / TRIM_STEPS) for j in range(TRIM_STEPS * TRIM_OCTAVES + 1)]
    grid = [u for u in grid if u > lo]
    sizes = group_sizes(rows / groups, groups)
    best = [min(error(u, n) for u in grid) for n in sizes]

    def regret(u: float) -> float:
        return max(error(u, n) / b for n, b in zip(sizes, best, strict=True))

    chosen = _upper(counts, noise, groups=groups)
    assert regret(chosen) <= min(regret(u) for u in grid) * (1 + 1e-9)
    assert regret(chosen) < regret(hi) and chosen < hi


def test_variance_upper_never_leaves_the_histogram_range() -> None:
    rng = np.random.default_rng(9)
    for _ in range(40):
        x = (rng.pareto(float(rng.uniform(0.8, 4.0)), int(rng.integers(200, 20_000))) + 1.0) * 1e3
        counts = _counts(x)
        tau = int(rng.integers(1, 200))
        lo, hi, _ = value_bounds(counts, AUTO_EDGES, tau)
        u = variance_upper(
            counts,
            AUTO_EDGES,
            tau,
            lo,
            hi,
            unit_noise=float(rng.uniform(1e-3, 1e3)),
            groups=int(rng.integers(1, 100)),
            **_release(bool(rng.integers(2))),
        )
        assert lo < u <= hi


def _frame() -> pd.DataFrame:
    rng = np.random.default_rng(10)
    n = 6_000
    return pd.DataFrame(
        {
            "uid": np.repeat(np.arange(n), 3),
            "g": rng.integers(0, 20, 3 * n),
            "v": rng.lognormal(math.log(20_000.0), 1.0, 3 * n),
        }
    )


@pytest.mark.parametrize("method", ["basic", "zcdp"])
def test_planned_variance_and_std_share_a_trimmed_bound_in_one_charge(
    monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    """A planned variance's bound is a quarter-octave step below the histogram's (the same
    draws give the histogram's when the rule is switched off); the std beside it is the square
    root of the same release, at the same bounds, in one charge."""
    import dpkit.analytics._planner as planner

    df = _frame()
    zcdp = method == "zcdp"

    def run() -> pd.DataFrame:
        s = dpa.Session(
            df,
            privacy_unit="uid",
            budget=Budget(epsilon=10.0, delta=1e-5 if zcdp else 0.0, method=method),
            source_of_randomness=RandomSource(seed=5, insecure=True),
        )
        q = s.query().group_by("g", keys=list(range(20)))
        q = q.agg(var=dpa.variance("v", bounds="auto"), sd=dpa.std("v", bounds="auto"))
        out = q.run(epsilon=1.0, delta=1e-6 if zcdp else None)
        assert len(s.budget.ledger) == 1  # one charge
        return out

    out = run()
    ((_, hi),) = out.attrs["dpkit"]["plan"]["bounds"].values()
    assert 4 * math.log2(hi) == round(4 * math.log2(hi))
    np.testing.assert_allclose(out["sd"] ** 2, out["var"], rtol=1e-9)
    with monkeypatch.context() as m:
        m.setattr(planner, "variance_upper", lambda *a, **k: a[4])
        untrimmed = run()
    ((_, top),) = untrimmed.attrs["dpkit"]["plan"]["bounds"].values()
    assert hi < top and math.log2(top) == round(math.log2(top))
