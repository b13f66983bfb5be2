"""Joint release of several quantiles (``BinnedQuantile(joint=True)``): the law over tuples of
bins is ``exp(-g max_k d_k / Delta_k)`` (checked exactly against a brute-force rank computation
in mpmath, tuple by tuple and through the marginals), the privacy ratio on neighbouring bin counts
is at most ``e^epsilon`` for every tuple, the normalised distances move by at most ``1 + 2**-20``
(hypothesis), one quantile gives the per-quantile law, and a chi-square test of the released
tuples (alpha = 1e-6) with a companion that catches a joint selection which forgot the factor 2.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import mpmath
import numpy as np
import pytest
from _stats import ALPHA, chi2_categorical, chi2_power
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.errors import PrivacyParameterError
from dpkit.events import SelfComposedEvent
from dpkit.mechanisms import BinnedQuantile
from dpkit.noise import RandomSource

COUNTS = [3, 8, 5, 1, 0, 2, 6, 4]
EDGES8 = tuple(float(i) for i in range(9))
LEVELS = (0.5, 0.9)
M = 2  # rows per unit
N_STAT = 40_000


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    with mpmath.workdps(40):
        yield


def seeded(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


def joint(eps: float = 0.8, **kw: object) -> BinnedQuantile:
    return BinnedQuantile.from_epsilon(
        epsilon=eps, quantiles=LEVELS, edges=EDGES8, max_rows_per_partition=M, joint=True, **kw
    )


def brute_distance(counts: list[int], q: float) -> list[mpmath.mpf]:
    """Rank distance of every bin from the rows themselves (one value per row, by bin)."""
    values = [j for j, c in enumerate(counts) for _ in range(c)]
    target = mpmath.mpf(q) * len(values)
    out = []
    for j in range(len(counts)):
        lo = sum(1 for v in values if v < j)
        hi = lo + counts[j]
        out.append(max(lo - target, target - hi, mpmath.mpf(0)))
    return out


def brute_law(counts: list[int], bq: BinnedQuantile, gain: float) -> dict[tuple[int, ...], object]:
    """``P(j_1, ..., j_K) ∝ exp(-gain max_k d_k(j_k) / (c m max(q, 1 - q)))``, exactly, at
    the grid levels ``q'`` (dyadic, so exact in mpmath)."""
    c = 2 if bq.neighbouring.value == "replace" else 1
    a = [
        [d / (c * M * max(mpmath.mpf(q), 1 - mpmath.mpf(q))) for d in brute_distance(counts, q)]
        for q in bq.grid_quantiles
    ]
    w = {
        t: mpmath.exp(-mpmath.mpf(gain) * max(a[k][j] for k, j in enumerate(t)))
        for t in itertools.product(range(len(counts)), repeat=len(bq.quantiles))
    }
    s = mpmath.fsum(w.values())
    return {t: x / s for t, x in w.items()}


def _layer_law(bq: BinnedQuantile, counts: list[int]) -> dict[tuple[int, ...], float]:
    """The tuple law ``exp(-g max_k a_k)`` on the implementation's scores ``a`` (not its
    layers: :func:`_sampler_law` reads those)."""
    c = np.asarray(counts)
    group = (np.flatnonzero(c).astype(np.int64), c[c > 0].astype(np.int64))
    start, width, a = bq.joint_scores(group)
    per_bin = np.zeros((len(bq.quantiles), bq.bins))
    for r in range(start.size):
        per_bin[:, start[r] : start[r] + width[r]] = a[:, r : r + 1]
    g = bq.joint_mechanism.factor
    w = {
        t: float(np.exp(-g * max(per_bin[k, j] for k, j in enumerate(t))))
        for t in itertools.product(range(bq.bins), repeat=len(bq.quantiles))
    }
    s = sum(w.values())
    return {t: x / s for t, x in w.items()}


def test_tuple_law_matches_the_brute_force_ranks() -> None:
    bq = joint()
    exact = brute_law(COUNTS, bq, bq.joint_mechanism.factor)
    impl = _layer_law(bq, COUNTS)
    for t, p in exact.items():
        assert abs(impl[t] - float(p)) <= 1e-12 * float(p) + 1e-300


def test_marginals_sum_the_tuple_law() -> None:
    bq = joint()
    exact = brute_law(COUNTS, bq, bq.joint_mechanism.factor)
    marg = bq.bin_probabilities(COUNTS)[0]
    for k in range(2):
        want = [float(mpmath.fsum(p for t, p in exact.items() if t[k] == j)) for j in range(8)]
        assert np.allclose(marg[k], want, rtol=1e-9, atol=0)


@pytest.mark.parametrize("neighbouring", ["add_remove", "replace"])
def test_privacy_ratio_on_neighbouring_counts(neighbouring: str) -> None:
    """Every tuple's probability moves by at most ``e^epsilon`` when one unit adds up to M
    rows (add/remove) or changes its M rows (replace), anywhere in the bins."""
    eps = 0.8
    bq = joint(eps, neighbouring=neighbouring)
    g = bq.joint_mechanism.factor
    base = brute_law(COUNTS, bq, g)
    for rows in itertools.combinations_with_replacement(range(8), M):
        other = list(COUNTS)
        for j in rows:
            other[j] += 1
        if neighbouring == "replace":  # the unit's old rows were at the two ends
            other[0] -= 1
            other[7] -= 1
        law = brute_law(other, bq, g)
        worst = max(abs(mpmath.log(law[t] / base[t])) for t in base)
        assert worst <= bq.epsilon_each * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(0, 6), min_size=6, max_size=6),
    st.lists(st.integers(0, 5), min_size=1, max_size=M),
    st.sampled_from([(0.5, 0.9), (0.1, 0.25, 0.75), (0.3,)]),
)
def test_normalised_distances_move_at_most_one(
    counts: list[int], added: list[int], levels: tuple[float, ...]
) -> None:
    bq = BinnedQuantile.from_epsilon(
        epsilon=1.0,
        quantiles=levels,
        edges=tuple(float(i) for i in range(7)),
        max_rows_per_partition=M,
        joint=True,
    )

    def per_bin(c: list[int]) -> np.ndarray:
        arr = np.asarray(c)
        start, width, a = bq.joint_scores(
            (np.flatnonzero(arr).astype(np.int64), arr[arr > 0].astype(np.int64))
        )
        out = np.zeros((len(levels), 6))
        for r in range(start.size):
            out[:, start[r] : start[r] + width[r]] = a[:, r : r + 1]
        return out

    other = list(counts)
    for j in added:
        other[j] += 1
    assert np.max(np.abs(per_bin(other) - per_bin(counts))) <= 1 + 2.0**-20


def test_one_quantile_is_the_per_quantile_law() -> None:
    sep = BinnedQuantile.from_epsilon(
        epsilon=0.8, quantiles=[0.9], edges=EDGES8, max_rows_per_partition=M
    )
    jnt = BinnedQuantile.from_epsilon(
        epsilon=0.8, quantiles=[0.9], edges=EDGES8, max_rows_per_partition=M, joint=True
    )
    assert np.allclose(
        jnt.bin_probabilities(COUNTS), sep.bin_probabilities(COUNTS), rtol=1e-5, atol=0
    )


def test_event_is_one_selection_per_group() -> None:
    bq = joint(0.9, max_partitions=3)
    assert bq.epsilon_each == pytest.approx(0.3)
    ev = bq.event
    assert isinstance(ev, SelfComposedEvent) and ev.count == 3
    assert ev.event.epsilon <= 0.3
    with pytest.raises(PrivacyParameterError):
        BinnedQuantile(epsilon=1.0, quantiles=(0.5,), edges=EDGES8, joint=1)  # type: ignore[arg-type]


def test_sparse_and_dense_agree_in_shape_and_empty_groups_work() -> None:
    bq = joint()
    out = bq.release_sparse([(np.zeros(0, np.int64), np.zeros(0, np.int64))], source=seeded(3))
    assert out.shape == (1, 2) and np.all((out >= 0) & (out <= 8))
    assert bq.release(COUNTS, source=seeded(4)).shape == (2,)


def _tuple_cells(idx: np.ndarray) -> np.ndarray:
    return np.bincount(idx[:, 0] * 8 + idx[:, 1], minlength=64)


def test_released_tuples_match_the_law() -> None:
    """Pearson chi-square at alpha = 1e-6 over the 64 tuples (cells expected below 20
    pooled; critical value chi2.isf(1e-6, df))."""
    bq = joint()
    law = brute_law(COUNTS, bq, bq.joint_mechanism.factor)
    p0 = np.array([float(law[(i, j)]) for i in range(8) for j in range(8)])
    idx = bq.release_bins(np.tile(COUNTS, (N_STAT, 1)), source=seeded(11))
    stat, crit = chi2_categorical(_tuple_cells(idx), p0, ALPHA)
    assert stat <= crit


def test_companion_catches_a_missing_factor_two() -> None:
    """The same test rejects the law with the gain doubled; power >= 1 - 1e-6 at N_STAT."""
    bq = joint()
    g = bq.joint_mechanism.factor
    p0 = np.array([float(brute_law(COUNTS, bq, g)[(i, j)]) for i in range(8) for j in range(8)])
    p1 = np.array([float(brute_law(COUNTS, bq, 2 * g)[(i, j)]) for i in range(8) for j in range(8)])
    assert chi2_power(N_STAT, p0, p1) >= 1 - 1e-6
    draws = seeded(12).uniform(N_STAT)
    cells = np.searchsorted(np.cumsum(p1), draws, side="right").clip(0, 63)
    stat, crit = chi2_categorical(np.bincount(cells, minlength=64), p0, ALPHA)
    assert stat > crit


def test_rank_error_bound_holds_for_every_quantile_of_a_large_group() -> None:
    """Both levels' chosen bins lie within ``rank_error_bound(1e-6)`` of ``q n`` in each of
    200 groups (failure probability at most 2e-4 by the bound)."""
    edges = tuple(float(i) for i in range(65))
    counts = np.full(64, 50)
    bq = BinnedQuantile.from_epsilon(
        epsilon=1.0, quantiles=LEVELS, edges=edges, max_rows_per_partition=M, joint=True
    )
    bound = bq.rank_error_bound(1e-6)
    idx = bq.release_bins(np.tile(counts, (200, 1)), source=seeded(5))
    n = counts.sum()
    for k, q in enumerate(bq.grid_quantiles):
        lo, hi = idx[:, k] * 50, (idx[:, k] + 1) * 50
        dist = np.maximum(np.maximum(lo - q * n, q * n - hi), 0)
        assert np.all(dist <= bound[k])


def _sampler_law(bq: BinnedQuantile, counts: list[int]) -> dict[tuple[int, ...], mpmath.mpf]:
    """The tuple law the layer sampler draws: layer i with probability ``∝ exp(ln w_i)`` (its
    computed log-weights, in mpmath), then each ``j_k`` uniformly among the ``W_k(i)`` bins with
    ``a_k <= t_i``; so ``P(j) = sum_{i: t_i >= max_k a_k(j_k)} P(i) / prod_k W_k(i)``."""
    c = np.asarray(counts)
    group = (np.flatnonzero(c).astype(np.int64), c[c > 0].astype(np.int64))
    g = bq.joint_mechanism.factor
    start, width, a, levels, logw, cnts = bq._joint_layers(group, bq._joint_scales(), g)
    w = [mpmath.exp(mpmath.mpf(x)) for x in logw]
    z = mpmath.fsum(w)
    per_layer = [w[i] / z / mpmath.fprod(int(ck[i]) for ck in cnts) for i in range(levels.size)]
    tail = [mpmath.fsum(per_layer[i:]) for i in range(levels.size)]
    per_bin = np.zeros((len(bq.quantiles), bq.bins))
    for r in range(start.size):
        per_bin[:, start[r] : start[r] + width[r]] = a[:, r : r + 1]
    return {
        t: tail[int(np.searchsorted(levels, max(per_bin[k, j] for k, j in enumerate(t))))]
        for t in itertools.product(range(bq.bins), repeat=len(bq.quantiles))
    }


SAMPLER_CASES = [  # levels, rows per unit, neighbouring, counts (empty bins, runs, one row)
    ((0.0, 1.0, 0.5), 3, "add_remove", [0, 4, 0, 0, 1]),
    ((0.5, 0.5), 1, "replace", [2, 0, 3, 1, 0]),
    ((0.9, 0.1, 2.0**-21), 2, "add_remove", [0, 0, 1, 0, 0]),
    ((0.75,), 1, "add_remove", [5, 0, 0, 2, 2]),
]


@pytest.mark.parametrize(("levels", "m", "neighbouring", "counts"), SAMPLER_CASES)
def test_sampler_layers_draw_the_law_and_keep_the_ratio(
    levels: tuple[float, ...], m: int, neighbouring: str, counts: list[int]
) -> None:
    """The layers' law equals ``exp(-g max_k a_k) / Z`` tuple by tuple, and on every neighbour
    (one unit adding up to m rows anywhere; under replace also removing m) no tuple's
    probability moves by more than ``e^epsilon``: the privacy ratio of what is sampled, not
    only of the ideal law."""
    bq = BinnedQuantile.from_epsilon(
        epsilon=1.5,
        quantiles=levels,
        edges=tuple(float(i) for i in range(6)),
        max_rows_per_partition=m,
        neighbouring=neighbouring,
        joint=True,
    )
    base = _sampler_law(bq, counts)
    ideal = _layer_law(bq, counts)
    for t, p in base.items():
        assert abs(float(p) - ideal[t]) <= 1e-12 * ideal[t]
    worst = mpmath.mpf(0)
    for rows in itertools.combinations_with_replacement(range(5), m):
        other = list(counts)
        for j in rows:
            other[j] += 1
        if neighbouring == "replace":  # the unit's old rows: the first non-empty bins
            for j in [j for j, x in enumerate(counts) for _ in range(x)][:m]:
                other[j] -= 1
        law = _sampler_law(bq, other)
        worst = max(worst, max(abs(mpmath.log(law[t] / base[t])) for t in base))
    assert 0.25 * bq.epsilon_each < worst <= bq.epsilon_each
