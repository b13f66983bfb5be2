"""A never-negative count's interval holds its level at the count 0 too, and not far above it.

A count or histogram cell released as ``X = x + Z`` gets ``[max(X - below, f), max(X + above,
0)]`` with ``f = 0`` while ``X <= b`` and ``f = 1`` above (Neyman's construction over ``x in
{0, 1, ...}``, :func:`dpkit.analytics._intervals.zero_reach`). Clipping ``[X - below, X +
above]`` at 0 instead holds an empty cell's 0 whenever ``X <= below``: 97.9% at discrete
Laplace scale 3 (histograms of people with 3 rows at epsilon 1), which is what made histograms
cover 97.1% in the utility benchmark, most cells there being empty.

Exact checks (no sampling): the interval is Neyman's set of counts for every ``X`` in a range,
``P(Z <= b) >= 0.95 > P(Z <= b - 1)`` from a pmf written out here.

Statistical tests on ``N = 20,000`` empty cells (each at alpha <= 1e-6). Too narrow: ``H0:
coverage >= 0.95``, reject when ``X < c_lo`` with ``P(Binomial(N, 0.95) < c_lo) <= 1e-6``.
Too wide: ``H0: coverage <= 0.965`` (the exact coverage at 0 is 95.95% at scale 3), reject when
``X > c_hi`` with ``P(Binomial(N, 0.965) > c_hi) <= 1e-6``. Companions: the clip at 0 (97.92%)
is rejected as too wide and ``b`` at twice alpha (92.1%) as too narrow; the power against both
is computed below (the chance of missing either is below 1e-12).
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pandas as pd
import pytest
from _stats import binom_high_critical, binom_low_critical, lattice_pmf
from scipy import stats

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._intervals import count_intervals, lattice_offsets, zero_reach
from dpkit.analytics._pricing import Noise
from dpkit.noise import RandomSource
from dpkit.noise.samplers import discrete_laplace

ALPHA_TEST = 1e-6
N = 20_000
SCALE = 3.0  # discrete Laplace: 3 rows per person at epsilon 1
WIDE_H0 = 0.965


def _q() -> float:
    return math.exp(-1.0 / SCALE)


def _cover_zero(b: int) -> float:
    """``P(Z <= b) = 1 - q^(b+1) / (1 + q)`` for the discrete Laplace of scale 3 (closed form)."""
    return 1.0 - _q() ** (b + 1) / (1.0 + _q())


def _cdf(kind: str, scale: float, b: int) -> float:
    """``P(Z <= b)`` from the pmf written out in the tests' support, independently of the
    module's tails."""
    k, w = lattice_pmf(kind, scale)
    return float(w[k <= b].sum())


LAWS = [("discrete_laplace", t) for t in (0.5, 1.0, 2.0, 3.0, 10.0, 40.0)]
LAWS += [("discrete_gaussian", s) for s in (0.5, 1.0, 3.0, 10.0, 40.0)]


@pytest.mark.parametrize(("kind", "scale"), LAWS)
def test_zero_reach_is_the_one_sided_quantile(kind: str, scale: float) -> None:
    """Exact: 0 is held with probability at least 95%, and one step less would be below."""
    nz = Noise(kind, scale)  # type: ignore[arg-type]
    b = zero_reach(nz, 0.05)
    assert _cdf(kind, scale, b) >= 0.95 - 1e-12
    assert _cdf(kind, scale, b - 1) < 0.95
    assert b <= lattice_offsets(nz, 0.05)[0]


@pytest.mark.parametrize("scale", [2.0**20, 2.0**44, 2.0**52])
def test_zero_reach_of_a_very_wide_noise_is_its_one_sided_quantile(scale: float) -> None:
    """A sum's noise has up to ``2^52`` lattice steps (a release once tried to tabulate every
    step up to the half-width and ran out of memory): the reach is still the one-sided
    quantile, checked against the closed form ``P(Z > b) = exp(-(b + 1) / t) / (1 + e^(-1/t))``
    of the discrete Laplace law (mpmath): certified, and within a relative 1e-8 of exact."""
    nz = Noise("discrete_laplace", scale)
    b = zero_reach(nz, 0.05)
    t = mpmath.mpf(scale)

    def tail(x: int) -> mpmath.mpf:
        return mpmath.exp(-(x + 1) / t) / (1 + mpmath.exp(-1 / t))

    assert tail(b) <= 0.05
    # at most a relative 1e-8 above the exact quantile (the float margins of the tail bound)
    assert tail(b - 1 - math.floor(1e-8 * b)) > 0.05
    assert b <= lattice_offsets(nz, 0.05)[0]


@pytest.mark.parametrize(("kind", "scale"), [("discrete_laplace", 3.0), ("discrete_gaussian", 2.0)])
def test_count_interval_is_neymans_set_of_counts(kind: str, scale: float) -> None:
    """Exact: for every released ``X``, the interval is the set of counts ``x >= 0`` whose
    acceptance set holds ``X`` (``X <= b`` for 0, ``x - above <= X <= x + below`` above)."""
    nz = Noise(kind, scale)  # type: ignore[arg-type]
    below, above = lattice_offsets(nz, 0.05)
    b = zero_reach(nz, 0.05)
    xs = np.arange(-40, 80, dtype=np.int64)
    lo, hi = count_intervals(xs, below, above, b)
    for x_rel, a, c in zip(xs.tolist(), lo.tolist(), hi.tolist(), strict=True):
        accepted = [
            x for x in range(200) if (x_rel <= b if x == 0 else x - above <= x_rel <= x + below)
        ]
        if accepted:
            assert accepted == list(range(a, c + 1)), x_rel
        else:  # nothing accepted: the interval is the single point 0
            assert (a, c) == (0, 0), x_rel


def test_critical_values_and_power() -> None:
    c_lo = binom_low_critical(N, 0.95, ALPHA_TEST)
    c_hi = binom_high_critical(N, WIDE_H0, ALPHA_TEST)
    assert stats.binom.cdf(c_lo - 1, N, 0.95) <= ALPHA_TEST
    assert stats.binom.sf(c_hi, N, WIDE_H0) <= ALPHA_TEST
    b = zero_reach(Noise("discrete_laplace", SCALE), 0.05)
    assert 0.95 <= _cover_zero(b) < WIDE_H0 - 0.005
    below = lattice_offsets(Noise("discrete_laplace", SCALE), 0.05)[0]
    assert stats.binom.cdf(c_hi, N, _cover_zero(below)) < 1e-12  # the clip is caught
    b2 = zero_reach(Noise("discrete_laplace", SCALE), 0.10)
    assert stats.binom.sf(c_lo - 1, N, _cover_zero(b2)) < 1e-12  # twice alpha is caught


def _zero_hits(reach_alpha: float, clip: bool = False) -> int:
    nz = Noise("discrete_laplace", SCALE)
    below, above = lattice_offsets(nz, 0.05)
    z = np.asarray(discrete_laplace(RandomSource(seed=31, insecure=True), scale=SCALE, size=N))
    if clip:  # the former interval: [X - below, X + above] clipped at 0
        lo = np.maximum(z - below, 0)
    else:
        lo, _ = count_intervals(z.astype(np.int64), below, above, zero_reach(nz, reach_alpha))
    return int((lo == 0).sum())  # the upper end is never below 0


def test_companions_catch_the_clip_as_too_wide_and_twice_alpha_as_too_narrow() -> None:
    assert _zero_hits(0.05, clip=True) > binom_high_critical(N, WIDE_H0, ALPHA_TEST)
    assert _zero_hits(0.10) < binom_low_critical(N, 0.95, ALPHA_TEST)


def test_empty_histogram_cells_cover_at_their_level() -> None:
    """Through the public API: 1,000 public keys times 20 cells, all but a few empty, one
    release at epsilon 1 with 3 rows per person (discrete Laplace of scale 3 per cell)."""
    rng = np.random.default_rng(5)
    df = pd.DataFrame(
        {
            "pid": np.repeat(np.arange(30), 3),
            "city": np.repeat(rng.integers(0, 3, 30), 3),
            "x": rng.uniform(0.0, 100.0, 90),
        }
    )
    s = dpa.Session(
        df,
        privacy_unit="pid",
        budget=Budget(epsilon=10.0),
        source_of_randomness=RandomSource(seed=41, insecure=True),
    )
    edges = [5.0 * i for i in range(21)]
    out = (
        s.query()
        .group_by("city", keys=list(range(1000)))
        .bound(max_partitions=1, max_rows_per_partition=3)
        .agg(h=dpa.histogram("x", edges=edges))
        .run(epsilon=1.0)
    )
    info = out.attrs["dpkit"]["columns"]
    cols = [c for c in out.columns if c.startswith("h[") and not c.endswith(("_low", "_high"))]
    assert len(cols) == 20
    assert all(info[c]["noise_scale"] == pytest.approx(SCALE, rel=1e-5) for c in cols)
    empty = out[out["city"] >= 3]
    lo = np.concatenate([empty[c + "_low"].to_numpy(dtype=float) for c in cols])
    hi = np.concatenate([empty[c + "_high"].to_numpy(dtype=float) for c in cols])
    assert lo.size == 997 * 20 and bool((hi >= 0).all())
    hits = int((lo <= 0).sum())
    n = lo.size
    print(f"empty cells: coverage {hits / n:.4f} of {n}")
    assert hits >= binom_low_critical(n, 0.95, ALPHA_TEST), hits / n
    assert hits <= binom_high_critical(n, WIDE_H0, ALPHA_TEST), hits / n
