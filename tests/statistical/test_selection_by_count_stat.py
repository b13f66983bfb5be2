"""A group only the added unit holds is released no more often than the threshold allows.

Through the real release code (``PreparedQuery.release_from`` on an engine result, copied
``N`` times by :func:`_proof.batched_release`, each copy an independent release): a query
``count()`` grouped without public keys, ``max_partitions = 1`` and ``R = 3`` rows per unit,
on one group holding exactly ``R`` rows of one unit (the most a group of the added unit can
hold). Its release probability is ``P[R + Z > tau]``, at most the threshold's delta divided by
``max_partitions`` (here 1). The query's delta is large (0.05) so that the probability is
measurable.

Test: one-sided exact binomial, rejecting ``H0: rate <= threshold_delta`` when the number
released exceeds ``binom_high_critical(N, threshold_delta, ALPHA)``, ``ALPHA = 1e-6``.
Companion: the same release with ``tau`` one step lower (a threshold set too low), whose
release probability is ``P[Z >= tau - R]`` (exact, mpmath); the power of the test against it,
computed exactly from the binomial law, is required to be at least ``1 - 1e-6``, and the test
must reject it. Power calculation for ``N = 20,000``: with ``t = 3`` the lower threshold
multiplies the rate by ``e^(1/3) = 1.40``, from about 0.05 to 0.07; the critical count sits
about 4.8 standard deviations (31) above 1,000, i.e. near 1,150, while the broken variant's
mean is near 1,400, 8 standard deviations above it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import mpmath
from _proof import batched_release
from _stats import ALPHA, binom_high_critical
from scipy import stats

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import EngineResult
from dpkit.noise import RandomSource

N = 20_000
R = 3


def _prepared() -> Any:
    import pandas as pd

    data = pd.DataFrame({"uid": ["a", "a", "a"], "g": ["new"] * 3})
    s = dpa.Session(data, privacy_unit="uid", budget=Budget(epsilon=100.0, delta=0.5))
    q = s.query().group_by("g").bound(max_partitions=1, max_rows_per_partition=R)
    return q.agg(n=dpa.count()).prepare(epsilon=1.0, delta=0.05)


def _released(prepared: Any, seed: int) -> int:
    name = prepared.pricing.stats[0].measures[0].measure.name
    result = EngineResult(keys=(("new",),), values={name: (R,)})
    frame = batched_release(prepared, result, N, RandomSource(seed=seed, insecure=True), [("new",)])
    return len(frame)


def _rate(scale: float, j: int) -> float:
    """P[Z >= j], discrete Laplace of scale ``scale``, exact (mpmath)."""
    with mpmath.workdps(30):
        q = mpmath.exp(-1 / mpmath.mpf(scale))
        return float(q**j / (1 + q)) if j >= 1 else float(1 - q ** (1 - j) / (1 + q))


def test_a_group_only_the_added_unit_holds_is_released_at_most_at_the_threshold_delta() -> None:
    prepared = _prepared()
    thr = prepared.pricing.selection
    assert prepared.pricing.selection_count == "n" and thr.max_value == R
    crit = binom_high_critical(N, thr.threshold_delta, ALPHA)
    assert _released(prepared, seed=11) <= crit


def test_companion_a_threshold_one_step_low_is_caught() -> None:
    prepared = _prepared()
    thr = prepared.pricing.selection
    low = dataclasses.replace(thr, tau=thr.tau - 1)
    broken = dataclasses.replace(
        prepared, pricing=dataclasses.replace(prepared.pricing, selection=low)
    )
    crit = binom_high_critical(N, thr.threshold_delta, ALPHA)
    p1 = _rate(thr.scale, low.tau - R + 1)
    assert float(stats.binom.sf(crit, N, p1)) >= 1.0 - 1e-6  # exact power
    assert _released(broken, seed=12) > crit
