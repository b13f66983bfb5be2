"""Confidence intervals of binned quantiles (:class:`BinnedQuantileInterval`): coverage of every
quantile of the data at the stated level (a binomial test at alpha = 1e-6, with a too-narrow
companion that aims both ends at the quantile itself), the budget charged, the public rank
radius, and parameter validation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from _stats import ALPHA, binom_low_critical

from dpkit._numeric.grids import UniformEdges
from dpkit.accounting.pure import PureDpAccountant
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import BinnedQuantileInterval
from dpkit.noise import RandomSource

LEVEL = 0.95
TRIALS = 1_500
BINS = 512
EDGES = UniformEdges(0.0, 100.0, BINS)


def _data(seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.clip(rng.normal(40.0, 15.0, n), 0.0, 100.0)


def _sparse(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    b = np.minimum((x / 100.0 * BINS).astype(np.int64), BINS - 1)
    idx, cnt = np.unique(b, return_counts=True)
    return idx.astype(np.int64), cnt.astype(np.int64)


def _quantile_set(x: np.ndarray, q: float) -> tuple[float, float]:
    """``[x_-, x_+]``: every x with #{< x} <= q n <= #{<= x} (class docstring), on the bins'
    left edges (the values the mechanism sees are their bins)."""
    b = np.sort(np.minimum((x / 100.0 * BINS).astype(np.int64), BINS - 1))
    n = b.size
    t = round(q * 2**20) / 2**20 * n
    lo = b[max(math.ceil(t) - 1, 0)] if t > 0 else 0
    hi = b[math.floor(t)] if math.floor(t) < n else BINS - 1
    return EDGES.at(np.array([lo]))[0], EDGES.at(np.array([hi + 1]))[0]


def _hits(mech: BinnedQuantileInterval, n: int, seed: int) -> int:
    x = _data(seed, n)
    group = _sparse(x)
    low, high = mech.release_sparse([group] * TRIALS, source=RandomSource(seed=seed, insecure=True))
    hits = np.ones(TRIALS, dtype=bool)
    for i, q in enumerate(mech.quantiles):
        a, b = _quantile_set(x, q)
        # the bin holding the q-quantile set lies inside [low, high]
        hits &= (low[:, i] <= a) & (b <= high[:, i])
    return int(hits.sum())


@pytest.mark.parametrize(("n", "eps"), [(30, 2.0), (200, 1.0), (5_000, 0.3)])
def test_interval_covers_at_least_its_level(n: int, eps: float) -> None:
    """H0: coverage >= 95% (both quantiles at once, so each at least that); a count below the
    1e-6 binomial critical value would reject it. The bound is data-independent, so coverage
    is usually far above the level; the measured rate is printed. With 30 values the rank
    radius exceeds the ranks below the quantile (the case the virtual end values are for)."""
    mech = BinnedQuantileInterval(epsilon=eps, quantiles=(0.5, 0.9), edges=EDGES, alpha=0.05)
    hits = _hits(mech, n, seed=n)
    print(f"n={n} eps={eps}: coverage {hits / TRIALS:.4f}")
    assert hits >= binom_low_critical(TRIALS, LEVEL, ALPHA)


class _AtTheQuantile(BinnedQuantileInterval):
    """A broken interval: both ends aimed at the quantile itself (no rank radius)."""

    def rank_radius(self) -> tuple[float, ...]:
        return tuple(0.0 for _ in self.quantiles)


def test_companion_without_radius_is_caught_as_too_narrow() -> None:
    mech = _AtTheQuantile(epsilon=1.0, quantiles=(0.5, 0.9), edges=EDGES, alpha=0.05)
    assert _hits(mech, 200, seed=200) < binom_low_critical(TRIALS, LEVEL, ALPHA)


def test_budget_is_two_selections_per_quantile_and_group() -> None:
    mech = BinnedQuantileInterval(epsilon=1.0, quantiles=(0.5, 0.9), edges=EDGES, max_partitions=3)
    assert mech.epsilon_each <= 1.0 / 12.0
    acc = PureDpAccountant()
    acc.compose(mech.event)
    assert acc.epsilon_exact <= 1.0


def test_rank_radius_is_the_utility_tail_bound() -> None:
    """r = (Delta / g) ln((m - 1)(1 - a) / a), a = (alpha / 2) e^(-2 s), g the sampler's gain:
    written out from epsilon_each here (within the rounding the module adds), below the
    McSherry-Talwar radius (Delta / g)(ln m + ln(2 / alpha) + 2 s), and growing as alpha
    falls."""
    mech = BinnedQuantileInterval(epsilon=1.0, quantiles=(0.5, 0.9), edges=EDGES, alpha=0.05)
    for q, r in zip(mech.quantiles, mech.rank_radius(), strict=True):
        qq = round(q * 2**20) / 2**20  # the grid level targeted
        delta = max(qq, 1 - qq)
        want = 2 * delta / mech.epsilon_each * math.log((BINS - 1) * (1 - 0.025) / 0.025)
        assert want <= r <= want * (1 + 1e-6)
        union = 2 * delta / mech.epsilon_each * (math.log(BINS) + math.log(2 / 0.05))
        assert r < union
    tighter = BinnedQuantileInterval(epsilon=1.0, quantiles=(0.5, 0.9), edges=EDGES, alpha=0.01)
    assert tighter.rank_radius()[0] > mech.rank_radius()[0]


def test_small_group_ends_stay_ordered() -> None:
    """A radius wider than the group: the ends are the outer edges, never crossed."""
    mech = BinnedQuantileInterval(epsilon=0.2, quantiles=(0.5, 0.9), edges=EDGES)
    assert min(mech.rank_radius()) > 30
    low, high = mech.release_sparse(
        [_sparse(_data(4, 30))] * 200, source=RandomSource(seed=2, insecure=True)
    )
    assert np.all(low <= high)


def test_ends_are_edges_in_order_and_dense_equals_sparse_shape() -> None:
    mech = BinnedQuantileInterval(epsilon=2.0, quantiles=(0.1, 0.5), edges=EDGES)
    x = _data(3, 300)
    dense = np.bincount(np.minimum((x / 100.0 * BINS).astype(np.int64), BINS - 1), minlength=BINS)
    out = mech.release(dense, source=RandomSource(seed=1, insecure=True))
    assert out.shape == (2, 2)
    assert np.all(out[:, 0] <= out[:, 1])
    steps = out / (100.0 / BINS)
    assert np.allclose(steps, np.round(steps))  # bin edges


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, math.nan, math.inf, "0.05", None])
def test_alpha_validated(alpha: object) -> None:
    with pytest.raises(PrivacyParameterError):
        BinnedQuantileInterval(epsilon=1.0, quantiles=(0.5,), edges=EDGES, alpha=alpha)  # type: ignore[arg-type]


def test_rank_radius_is_tight_on_the_worst_data_set() -> None:
    """The radius cannot be much smaller for every data set: with half the values in the first
    bin and half in the last, every other bin sits exactly ``r`` ranks from each end's target
    (``m - 1`` bins at utility ``-r``), so each end misses with probability ``(m - 1) e^(-g r
    / Delta) / (1 + (m - 1) e^(-g r / Delta))``, just under ``alpha / 2``: the level is met
    with equality, up to ``1 / m`` and the selection slack. Exact, from the mechanism's own
    selection law over the utilities written out from the class docstring (padded counts)."""
    mech = BinnedQuantileInterval(epsilon=1.0, quantiles=(0.5,), edges=EDGES, alpha=0.05)
    (r,) = mech.rank_radius()
    v = math.ceil(r)
    n = 1000
    counts = np.zeros(BINS)
    counts[0], counts[-1] = v + n / 2, v + n / 2  # padded: V public values in each outer bin
    c_hi = np.cumsum(counts)
    c_lo = c_hi - counts
    for target, good in ((v + n / 2 - r, 0), (v + n / 2 + r, BINS - 1)):
        u = -np.maximum(np.maximum(c_lo - target, target - c_hi), 0.0)
        assert u[good] == 0.0 and np.allclose(np.delete(u, good), -r)
        miss = 1.0 - float(mech.mechanisms[0].probabilities(u)[good])
        assert 0.025 * (1 - 1e-6) < miss <= 0.025, miss
    # both ends miss independently: coverage (1 - miss)^2, within 0.1 point of the level
    assert 0.95 <= (1.0 - miss) ** 2 < 0.951


@pytest.mark.slow
def test_release_on_the_worst_data_set_covers_at_its_level() -> None:
    """The release itself on that data set: 20,000 groups, coverage ``(1 - miss)^2`` = 95.06%
    exactly (above). Too narrow: ``H0: coverage >= 0.95``, reject below ``c_lo`` with
    ``P(Binomial(20000, 0.95) < c_lo) <= 1e-6``; too wide: ``H0: coverage <= 0.96``, reject
    above ``c_hi`` with ``P(Binomial(20000, 0.96) > c_hi) <= 1e-6`` (alpha <= 1e-6 each). The
    companion without radius (above) is the too-narrow one; at 95.06% the too-wide test's power
    against a coverage of 97.5% (a radius at alpha / 2) is ``P(Binomial(20000, 0.975) <=
    c_hi)`` < 1e-12."""
    from _stats import binom_high_critical
    from scipy import stats

    groups = 20_000
    mech = BinnedQuantileInterval(epsilon=1.0, quantiles=(0.5,), edges=EDGES, alpha=0.05)
    group = (np.array([0, BINS - 1], dtype=np.int64), np.array([500, 500], dtype=np.int64))
    low, high = mech.release_sparse([group] * groups, source=RandomSource(seed=9, insecure=True))
    # the quantile set [x_-, x_+] runs from inside the first bin to inside the last
    hits = int(np.sum((low[:, 0] == 0.0) & (high[:, 0] == 100.0)))
    c_lo = binom_low_critical(groups, LEVEL, ALPHA)
    c_hi = binom_high_critical(groups, 0.96, ALPHA)
    assert stats.binom.cdf(c_hi, groups, 0.975) < 1e-12
    print(f"worst data set: coverage {hits / groups:.4f}")
    assert c_lo <= hits <= c_hi, hits / groups
