"""A piloted mean's and its shared sum's releases: unbiased, at their law, intervals at level.

Given the pilot's outputs, the main count ``N`` and centred sum ``T = S - c N`` carry fresh,
independent, symmetric noise of known law (the pair chosen for the group), so the shared sum
``T + c N`` is conditionally unbiased and symmetric about the (fixed-point) sum, with the law
of ``Z_T + c Z_N``; the intervals built from that law (exact for the sum, Fieller's pivot for
the mean) hold at their level conditionally, hence overall. The pilot's values are not part of
the estimate (with ``1/100`` of the share they would add about ``1e-4`` of the information,
and weights read from the pilot's noise would bias the estimate).

Groups: 100,000 rows at 63,000 each (the pilot moves their centre: the utility benchmark's
case) and 5 rows at 400,000 (the pilot is too noisy: the middle); bounds [0, 500,000], 3 rows
per unit, epsilon 1 for the mean and the sum together. Each test's false-positive rate is at
most ``ALPHA_TEST = 1e-6`` (exact binomial tails from scipy) and each has a companion that a
broken mechanism fails, with its power stated.

* Coverage (95% intervals, ``n`` = 2,000 per kind): reject when the number covering is below
  ``c``, the largest integer with ``P(Binomial(n, 0.95) < c) <= 1e-6``. Companion: intervals
  narrowed to half their width; their coverage is below 0.80 for Laplace-tailed noise
  (asserted from the data's half-widths below), and ``P(Binomial(2000, 0.80) >= c) < 1e-50``.
* Sign test (unbiasedness, ``n`` = 10,000 moved groups): ``#{S_hat > S}`` among the groups
  without a tie is Binomial(m, 1/2) under a symmetric conditional law; two-sided rejection
  beyond the ``1e-6 / 2`` quantiles. Companion: the estimate shifted by 0.3 noise sd moves the
  rate to about 0.62 (Laplace-like: ``P(Z > -0.3 sd) >= 0.62``), power ``> 1 - 1e-30``.
* Law (``n`` = 10,000 moved groups): the interval ``+-H`` with ``H`` the law's 50% half-width
  (:func:`~dpkit.analytics._intervals.joint_halfwidth` at alpha 0.5, certified never too
  narrow, to a relative ``2^-14``) covers with probability in ``[0.5, 0.501]``; rejection
  outside the ``1e-6 / 2`` binomial quantiles of those ends. Companion: residuals 1.2 times
  wider than the law (a noise scale understated by 20%) cover about 0.43, power ``> 1 -
  1e-12``.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import dpkit.analytics as dpa
from dpkit.analytics._intervals import joint_halfwidth
from dpkit.analytics._plan import EngineResult
from dpkit.analytics._pricing import price
from dpkit.analytics._release import _by_pair, _centred_pair, assemble
from dpkit.noise import RandomSource

ALPHA_TEST = 1e-6
LO, HI = 0.0, 500_000.0
BIG, SMALL = (100_000, 63_000.0), (5, 400_000.0)


def _pricing() -> Any:
    return price(
        # a count of the column (at a small weight, the pilot's choices barely move) keeps
        # the pilot: a sum and a mean alone take the complementary pair instead
        {
            "s": dpa.sum("x", bounds=(LO, HI)),
            "m": dpa.mean("x", bounds=(LO, HI)),
            "n": dpa.count("x", weight=0.01),
        },
        mode="pure",
        epsilon=1.0,
        delta=0.0,
        max_partitions=1,
        max_rows_per_partition=3,
        select_partitions=False,
    )


def _result(pr: Any, groups: list[tuple[int, float]]) -> tuple[EngineResult, list[float]]:
    """Per group ``n`` rows of one value ``v``: the engine's exact integers and the
    fixed-point sums (the sum interval's target)."""
    (sp,) = [x for x in pr.stats if x.name == "m"]
    n_name, s_name = sp.measures[0].measure.name, sp.measures[1].measure.name
    k = sp.measures[1].measure.frac_bits
    vals: dict[str, tuple[object, ...]] = {
        n_name: tuple(n for n, _ in groups),
        s_name: tuple(n * math.floor(v * 2**k) for n, v in groups),
    }
    fixed = [n * math.floor(v * 2**k) * 2.0**-k for n, v in groups]
    keys = tuple((g,) for g in range(len(groups)))
    return EngineResult(keys=keys, values=vals), fixed


def _critical_low(n: int, p: float) -> int:
    """Largest ``c`` with ``P(Binomial(n, p) < c) <= ALPHA_TEST``."""
    c = int(stats.binom.ppf(ALPHA_TEST, n, p))
    while stats.binom.cdf(c - 1, n, p) > ALPHA_TEST:
        c -= 1
    while stats.binom.cdf(c, n, p) <= ALPHA_TEST:
        c += 1
    return c


@pytest.fixture(scope="module")
def coverage_frames() -> tuple[pd.DataFrame, list[float], list[float]]:
    pr = _pricing()
    groups = [BIG] * 150 + [SMALL] * 50
    res, fixed = _result(pr, groups)
    src = RandomSource(seed=11, insecure=True)
    frames = [
        assemble(pr, res, group_by=("g",), public_keys=list(res.keys), alpha=0.05, source=src)
        for _ in range(10)
    ]
    frame = pd.concat(frames, ignore_index=True)
    frame.attrs["dpkit"] = frames[0].attrs["dpkit"]  # the first release's info
    means = [v for _, v in groups] * 10
    return frame, fixed * 10, means


def _covered(frame: pd.DataFrame, col: str, truth: list[float], scale: float) -> int:
    est = frame[col].to_numpy(dtype=float)
    lo = est - scale * (est - frame[f"{col}_low"].to_numpy(dtype=float))
    hi = est + scale * (frame[f"{col}_high"].to_numpy(dtype=float) - est)
    t = np.asarray(truth)
    return int(np.sum((lo <= t) & (t <= hi)))


def test_the_pilot_moved_the_big_groups_and_kept_the_small_ones(
    coverage_frames: tuple[pd.DataFrame, list[float], list[float]],
) -> None:
    frame, _, _ = coverage_frames
    note = frame.attrs["dpkit"]["columns"]["m"]["centre"]
    moved = int(note.split(";")[1].split()[0])
    assert "of 200 groups moved" in note
    assert 140 <= moved <= 150  # big groups move (small ones: the pilot is too noisy)


@pytest.mark.parametrize("col", ["s", "m"])
def test_piloted_intervals_cover_at_their_level(
    coverage_frames: tuple[pd.DataFrame, list[float], list[float]], col: str
) -> None:
    frame, fixed, means = coverage_frames
    truth = fixed if col == "s" else means
    n = len(frame)
    c = _critical_low(n, 0.95)
    assert _covered(frame, col, truth, 1.0) >= c
    # companion: half-width intervals cover far less and are rejected
    assert stats.binom.sf(c - 1, n, 0.80) < 1e-50
    assert _covered(frame, col, truth, 0.5) < c


def _moved_draws(groups: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Residuals ``S_hat - S`` (steps) of ``groups`` big groups, their law's 50% half-widths
    and standard deviations, from one release's draws (each group its own pilot)."""
    pr = _pricing()
    (sp,) = [x for x in pr.stats if x.name == "m"]
    res, _ = _result(pr, [BIG] * groups)
    rows: list[int | None] = list(range(groups))
    n_noisy, t_noisy, pairs = _centred_pair(
        sp, res, rows, RandomSource(seed=seed, insecure=True), {}
    )
    n_ex = [int(v) for v in res.values[sp.measures[0].measure.name]]  # type: ignore[call-overload]
    s_ex = [int(v) for v in res.values[sp.measures[1].measure.name]]  # type: ignore[call-overload]
    resid = np.zeros(groups)
    half = np.zeros(groups)
    sd = np.zeros(groups)
    for (p_n, p_s), idx in _by_pair(pairs):
        assert p_n.noise is not None and p_s.noise is not None
        c = p_s.center
        h50 = joint_halfwidth(p_s.noise, p_n.noise, float(-c), float(-c), 0.5)
        assert h50 is not None
        for g in idx:
            assert c != sp.pilot.ref_t.center  # every big group moved
            resid[g] = float(t_noisy[g] + c * n_noisy[g] - s_ex[g])
            half[g] = h50
            sd[g] = math.hypot(p_s.noise.std, c * p_n.noise.std)
        assert n_ex[idx[0]] == BIG[0]
    return resid, half, sd


@pytest.fixture(scope="module")
def draws() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    parts = [_moved_draws(2_000, seed) for seed in range(5)]
    return tuple(np.concatenate([p[i] for p in parts]) for i in range(3))  # type: ignore[return-value]


def _two_sided(n: int, p_lo: float, p_hi: float) -> tuple[int, int]:
    """Accept ``X`` in ``[a, b]``: ``P(Bin(n, p_lo) < a) <= 1e-6 / 2`` and ``P(Bin(n, p_hi)
    > b) <= 1e-6 / 2``."""
    a = int(stats.binom.ppf(ALPHA_TEST / 2, n, p_lo))
    while stats.binom.cdf(a - 1, n, p_lo) > ALPHA_TEST / 2:
        a -= 1
    b = int(stats.binom.isf(ALPHA_TEST / 2, n, p_hi))
    while stats.binom.sf(b, n, p_hi) > ALPHA_TEST / 2:
        b += 1
    return a, b


def test_the_shared_sum_is_unbiased_given_the_pilot(
    draws: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    resid, _, sd = draws
    for shift, ok in ((0.0, True), (0.3, False)):  # companion: a bias of 0.3 sd
        r = resid + shift * sd
        m = int(np.sum(r != 0))
        up = int(np.sum(r > 0))
        a, b = _two_sided(m, 0.5, 0.5)
        assert (a <= up <= b) is ok
    assert stats.binom.cdf(b, m, 0.62) < 1e-30  # the companion's power


def test_the_shared_sum_follows_its_stated_law(
    draws: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> None:
    resid, half, _ = draws
    n = len(resid)
    a, b = _two_sided(n, 0.5, 0.501)
    assert a <= int(np.sum(np.abs(resid) <= half)) <= b
    # companion: a law 20% narrower than the noise drawn
    assert int(np.sum(np.abs(1.2 * resid) <= half)) < a
    assert stats.binom.sf(a - 1, n, 0.44) < 1e-12  # the companion's power
