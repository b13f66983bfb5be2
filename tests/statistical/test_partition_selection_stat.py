"""Release frequencies of partition selection match ``probability(n)``.

For each tested count n, N independent keys with n units are offered; the number released is
Binomial(N, p(n)) under the null. Each n gets a two-sided exact binomial test at level
ALPHA / J (J counts tested, Bonferroni), so the whole test's false-positive rate is at most
ALPHA = 1e-6. Critical values: the acceptance region is ``[binom.ppf(a/2), binom.isf(a/2)]``
with ``a = ALPHA / J``. Each test has a companion that feeds it a mechanism whose threshold is
off by one (the classic boundary bug) and checks that it is rejected; the power against that
variant is computed exactly from the binomial law and required to be at least 1 - 1e-6.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
from _stats import ALPHA
from scipy import stats

from dpkit.mechanisms import GaussianPartitionSelection, PartitionSelection
from dpkit.noise import RandomSource

N = 20_000

Release = Callable[[npt.NDArray[np.int64], RandomSource], npt.NDArray[np.bool_]]


def region(p: float, a: float) -> tuple[int, int]:
    """Acceptance region of the two-sided exact binomial test at level a."""
    b = stats.binom(N, p)
    return int(b.ppf(a / 2)), int(b.isf(a / 2))


def rejects(release: Release, counts: list[int], probs: list[float], seed: int) -> bool:
    a = ALPHA / len(counts)
    src = RandomSource(seed=seed, insecure=True)
    for n, p in zip(counts, probs, strict=True):
        k = int(release(np.full(N, n, dtype=np.int64), src).sum())
        lo, hi = region(p, a)
        if not lo <= k <= hi:
            return True
    return False


def power(counts: list[int], p0: list[float], p1: list[float]) -> float:
    """Exact probability that the per-n test rejects for at least one n under p1."""
    a = ALPHA / len(counts)
    accept_all = 1.0
    for q0, q1 in zip(p0, p1, strict=True):
        lo, hi = region(q0, a)
        b = stats.binom(N, q1)
        accept_all *= float(b.cdf(hi) - b.cdf(lo - 1))
    return 1.0 - accept_all


# ---------------------------------------------------------------------------------------------
PS = PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6)
PS_COUNTS = list(range(PS.threshold - 16, PS.threshold))  # the uncertain region (p in (0, 1))


def ps_probs(shift: int = 0) -> list[float]:
    return [float(PS.probability(n - shift)) for n in PS_COUNTS]


def test_truncated_geometric_frequencies() -> None:
    assert not rejects(lambda c, s: PS.release(c, source=s), PS_COUNTS, ps_probs(), seed=21)


def test_truncated_geometric_companion_catches_threshold_off_by_one() -> None:
    """Variant: the table read one count too high (releases one unit early)."""
    assert power(PS_COUNTS, ps_probs(), ps_probs(shift=-1)) >= 1 - 1e-6
    assert rejects(lambda c, s: PS.release(c + 1, source=s), PS_COUNTS, ps_probs(), seed=22)


# ---------------------------------------------------------------------------------------------
GPS = GaussianPartitionSelection(sigma=3.0, tau=15)
G_COUNTS = list(range(8, 23))


def g_probs(shift: int = 0) -> list[float]:
    return [float(GPS.probability(n - shift)) for n in G_COUNTS]


def test_gaussian_threshold_frequencies() -> None:
    assert not rejects(lambda c, s: GPS.release(c, source=s), G_COUNTS, g_probs(), seed=23)


def test_gaussian_companion_catches_at_instead_of_strictly_above() -> None:
    """Variant: ``n + Z >= tau`` instead of ``> tau`` (same as one more unit)."""
    assert power(G_COUNTS, g_probs(), g_probs(shift=-1)) >= 1 - 1e-6

    def broken(c: npt.NDArray[np.int64], s: RandomSource) -> npt.NDArray[np.bool_]:
        _, noisy = GPS.release_with_counts(c, source=s)
        return noisy >= GPS.tau

    assert rejects(broken, G_COUNTS, g_probs(), seed=24)
