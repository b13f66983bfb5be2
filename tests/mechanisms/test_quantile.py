"""Binned quantiles: exact output law against a brute-force rank computation, the privacy ratio
on neighbouring bin counts, sensitivity (hypothesis), accuracy against the rank bound, and a
chi-square test of the released bins (alpha = 1e-6) with a companion that catches a mechanism
which forgot the factor 2 of the exponential mechanism.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator

import mpmath
import numpy as np
import pytest
from _stats import ALPHA, chi2_categorical, chi2_power
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.errors import PrivacyParameterError
from dpkit.events import ExponentialMechanismEvent, SelfComposedEvent
from dpkit.mechanisms import BinnedQuantile
from dpkit.mechanisms._calibration import calibrated_epsilon
from dpkit.noise import RandomSource


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 40 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mpmath.workdps(40):
        yield


def seeded(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


def brute_utilities(counts: list[int], q: float) -> list[mpmath.mpf]:
    """Utility of each bin from the data itself: a point of bin j has as many values below it as
    there are values in bins < j, plus any number 0..c_j of the values of bin j (they can lie on
    either side); utility = minus the distance from q n to the interval spanned by those ranks
    (the module's definition; q n itself need not be an integer)."""
    values = [j for j, c in enumerate(counts) for _ in range(c)]  # one value per row, by bin
    n = len(values)
    target = mpmath.mpf(q) * n
    out = []
    for j in range(len(counts)):
        below = sum(1 for v in values if v < j)
        lo, hi = below, below + counts[j]
        out.append(-max(lo - target, target - hi, mpmath.mpf(0)))
    return out


def brute_probabilities(
    counts: list[int], q: float, eps_each: float, sens: float
) -> list[mpmath.mpf]:
    u = brute_utilities(counts, q)
    w = [mpmath.exp(mpmath.mpf(eps_each) * x / (2 * mpmath.mpf(sens))) for x in u]
    s = mpmath.fsum(w)
    return [x / s for x in w]


EDGES = (0.0, 1.0, 2.0, 3.0, 4.0)


@pytest.mark.parametrize(
    "counts", [[2, 0, 3, 1], [0, 0, 0, 0], [5, 0, 0, 0], [1, 1, 1, 1], [0, 7, 2, 0]]
)
@pytest.mark.parametrize("m", [1, 3])
def test_exact_law_against_brute_force(counts: list[int], m: int) -> None:
    bq = BinnedQuantile.from_epsilon(
        epsilon=2.0, quantiles=[0.1, 0.5, 0.75], edges=EDGES, max_rows_per_partition=m
    )
    got = bq.bin_probabilities(np.array(counts))[0]
    for i, q0 in enumerate([0.1, 0.5, 0.75]):
        q = round(q0 * 2**20) / 2**20  # the documented grid of targeted quantiles
        assert bq.grid_quantiles[i] == q
        sens = m * max(q, 1 - q)
        ref = brute_probabilities(counts, q, 2.0 / 3, sens)
        # the mechanism scales by (eps - 2**-39): relative difference far below 1e-9
        assert np.allclose(got[i], [float(r) for r in ref], rtol=1e-9, atol=0)
        assert bq.sensitivity(q0) == sens


def neighbours(counts: tuple[int, ...], m: int) -> list[tuple[int, ...]]:
    """All bin-count vectors obtained by adding or removing up to m rows."""
    out = []
    bins = len(counts)
    for r in range(1, m + 1):
        for where in itertools.combinations_with_replacement(range(bins), r):
            plus = list(counts)
            minus = list(counts)
            ok = True
            for j in where:
                plus[j] += 1
                minus[j] -= 1
                ok = ok and minus[j] >= 0
            out.append(tuple(plus))
            if ok and all(x >= 0 for x in minus):
                out.append(tuple(minus))
    return out


@pytest.mark.parametrize("m", [1, 2])
def test_privacy_ratio_on_all_neighbours(m: int) -> None:
    """For every small histogram and every neighbour (up to m rows added or removed), the exact
    probability of every bin changes by at most e^{eps'} (eps' per quantile)."""
    eps = 1.5
    bq = BinnedQuantile.from_epsilon(
        epsilon=eps, quantiles=[0.3, 0.5], edges=EDGES, max_rows_per_partition=m
    )
    bound = math.exp(bq.epsilon_each) * (1 + 1e-12)
    worst = 0.0
    for counts in itertools.product(range(3), repeat=4):
        p = bq.bin_probabilities(np.array(counts))[0]
        for nb in neighbours(counts, m):
            p2 = bq.bin_probabilities(np.array(nb))[0]
            ratio = float(np.max(np.maximum(p / p2, p2 / p)))
            worst = max(worst, ratio)
            assert ratio <= bound
    # the bound is nearly attained: the sensitivity is not loose by a large factor
    assert worst > math.exp(bq.epsilon_each * 0.5)


@settings(max_examples=300, deadline=None)
@given(
    counts=st.lists(st.integers(0, 50), min_size=1, max_size=12),
    q=st.floats(0.0, 1.0),
    m=st.integers(1, 5),
    replace=st.booleans(),
    data=st.data(),
)
def test_utility_sensitivity(
    counts: list[int], q: float, m: int, replace: bool, data: st.DataObject
) -> None:
    """One unit adds or removes up to m rows (add/remove), or removes up to m and adds up to m
    (replace): every utility moves by at most the declared sensitivity."""
    bq = BinnedQuantile.from_epsilon(
        epsilon=1.0,
        quantiles=[q],
        edges=list(range(len(counts) + 1)),
        max_rows_per_partition=m,
        neighbouring="replace" if replace else "add_remove",
    )
    bins = st.integers(0, len(counts) - 1)
    nb = list(counts)
    if replace:
        for j in data.draw(st.lists(bins, max_size=m)):
            nb[j] -= 1
        for j in data.draw(st.lists(bins, max_size=m)):
            nb[j] += 1
    else:
        sign = data.draw(st.sampled_from([1, -1]))
        for j in data.draw(st.lists(bins, min_size=1, max_size=m)):
            nb[j] += sign
    if min(nb) < 0:
        return
    u = bq.utilities(np.array(counts))[0, 0]
    u2 = bq.utilities(np.array(nb))[0, 0]
    assert float(np.max(np.abs(u - u2))) <= bq.sensitivity(q)
    # the best bin has utility 0
    assert u.max() == 0.0


def test_outputs_on_the_fixed_grid() -> None:
    edges = np.linspace(0.0, 120.0, 13)
    bq = BinnedQuantile.from_epsilon(epsilon=1.0, quantiles=[0.5], edges=edges, points_per_bin=4)
    counts = np.random.default_rng(0).integers(0, 20, size=(50, 12))
    out = bq.release(counts, source=seeded(1))
    assert out.shape == (50, 1)
    grid = np.array([edges[j] + (i + 0.5) * 10.0 / 4 for j in range(12) for i in range(4)])
    assert np.isin(out, grid).all()
    one = bq.release(counts[0], source=seeded(2))
    assert one.shape == (1,)


def test_accuracy_of_the_median_at_eps_1() -> None:
    """10^5 values, 1000 bins on [0, 100], eps = 1: the chosen bin's rank interval is within
    rank_error_bound(1e-6) of n/2 in every one of 200 groups (failure probability <= 2e-4)."""
    rng = np.random.default_rng(5)
    x = np.clip(rng.gamma(4.0, 8.0, size=100_000), 0, 100)
    edges = np.linspace(0.0, 100.0, 1001)
    counts = np.histogram(x, bins=edges)[0]
    bq = BinnedQuantile.from_epsilon(epsilon=1.0, quantiles=[0.5], edges=edges)
    groups = np.tile(counts, (200, 1))
    idx = bq.release_bins(groups, source=seeded(3))[:, 0]
    cum = np.concatenate([[0], np.cumsum(counts)])
    target = 0.5 * cum[-1]
    dist = np.maximum(np.maximum(cum[idx] - target, target - cum[idx + 1]), 0)
    bound = bq.rank_error_bound(1e-6)[0]
    assert bound == pytest.approx(2 * 0.5 / 1.0 * (math.log(1000) + math.log(1e6)), rel=1e-9)
    assert (dist <= bound).all()


def test_event_and_budget_split() -> None:
    bq = BinnedQuantile.from_epsilon(
        epsilon=1.2, quantiles=[0.25, 0.5, 0.75], edges=EDGES, max_partitions=2
    )
    assert bq.epsilon_each * 6 <= 1.2
    ev = bq.event
    assert isinstance(ev, SelfComposedEvent) and ev.count == 6
    assert ev.event == ExponentialMechanismEvent(epsilon=calibrated_epsilon(bq.epsilon_each))
    single = BinnedQuantile.from_epsilon(epsilon=1.0, quantiles=0.5, edges=EDGES)
    assert single.event == ExponentialMechanismEvent(epsilon=calibrated_epsilon(1.0))
    rep = BinnedQuantile.from_epsilon(
        epsilon=1.0, quantiles=0.5, edges=EDGES, max_rows_per_partition=3, neighbouring="replace"
    )
    assert rep.sensitivity(0.5) == 3.0


def test_validation() -> None:
    good = {"epsilon": 1.0, "quantiles": [0.5], "edges": EDGES}
    bad_values = [
        {"epsilon": float("nan")},
        {"epsilon": -1.0},
        {"epsilon": True},
        {"quantiles": [1.5]},
        {"quantiles": [float("nan")]},
        {"quantiles": []},
        {"quantiles": "0.5"},
        {"edges": [0.0]},
        {"edges": [0.0, 0.0, 1.0]},
        {"edges": [0.0, float("inf")]},
        {"edges": [1.0, 0.0]},
        {"edges": "abc"},
        {"max_rows_per_partition": 0},
        {"max_partitions": 1.5},
        {"neighbouring": "other"},
        {"points_per_bin": 0},
    ]
    for bad in bad_values:
        with pytest.raises(PrivacyParameterError):
            BinnedQuantile.from_epsilon(**{**good, **bad})  # type: ignore[arg-type]
    bq = BinnedQuantile.from_epsilon(**good)  # type: ignore[arg-type]
    for counts in (
        np.array([1.0, 2.0, 3.0, 4.0]),
        np.array([1, 2, 3]),
        np.zeros((2, 2, 4), dtype=np.int64),
    ):
        with pytest.raises(PrivacyParameterError):
            bq.release(counts, source=seeded(0))


def test_adversarial_counts_do_not_raise() -> None:
    """Huge, negative and object-int counts are clamped, never turned into an exception."""
    bq = BinnedQuantile.from_epsilon(epsilon=1.0, quantiles=[0.1, 0.9], edges=EDGES)
    for counts in (
        np.array([2**62, 0, 0, 2**62]),
        np.array([-5, 3, 0, 0]),
        np.array([2**64 - 1, 1, 1, 1], dtype=np.uint64),
        np.array([2**80, 1, 0, 0], dtype=object),
        np.zeros(4, dtype=np.int64),
    ):
        out = bq.release(counts, source=seeded(1))
        assert np.isfinite(out).all() and ((out >= 0.0) & (out <= 4.0)).all()
        assert np.isfinite(bq.bin_probabilities(counts)).all()


# ---------------------------------------------------------------------------------------------
# Statistical test of the released bins
# ---------------------------------------------------------------------------------------------
COUNTS = np.array([3, 8, 5, 1, 0, 2, 6, 4])
EDGES8 = tuple(float(i) for i in range(9))
N_STAT = 40_000


def _broken_probabilities(eps: float, q: float) -> np.ndarray:
    """A broken mechanism: exp(eps u / Delta) (factor 2 forgotten)."""
    u = np.array([float(x) for x in brute_utilities(COUNTS.tolist(), q)])
    w = np.exp(eps * u / max(q, 1 - q))
    return w / w.sum()


def test_released_bins_match_the_law() -> None:
    """Pearson chi-square at alpha = 1e-6: critical value chi2.isf(1e-6, df) (df = bins - 1
    after pooling cells expected below 20)."""
    bq = BinnedQuantile.from_epsilon(epsilon=0.8, quantiles=[0.5], edges=EDGES8)
    p0 = bq.bin_probabilities(COUNTS)[0, 0]
    idx = bq.release_bins(np.tile(COUNTS, (N_STAT, 1)), source=seeded(11))[:, 0]
    stat, crit = chi2_categorical(np.bincount(idx, minlength=8), p0, ALPHA)
    assert stat <= crit


def test_companion_catches_missing_factor_two() -> None:
    """The same test rejects samples from the broken law; power >= 1 - 1e-6 at N_STAT."""
    bq = BinnedQuantile.from_epsilon(epsilon=0.8, quantiles=[0.5], edges=EDGES8)
    p0 = bq.bin_probabilities(COUNTS)[0, 0]
    p1 = _broken_probabilities(0.8, 0.5)
    assert chi2_power(N_STAT, p0, p1) >= 1 - 1e-6
    rng_src = seeded(12)
    draws = rng_src.uniform(N_STAT)
    broken = np.searchsorted(np.cumsum(p1), draws, side="right").clip(0, 7)
    stat, crit = chi2_categorical(np.bincount(broken, minlength=8), p0, ALPHA)
    assert stat > crit
