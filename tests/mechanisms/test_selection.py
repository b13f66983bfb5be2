"""Selection mechanisms: overflow-free scaling, exact score conversion, type-decided refusals.

Exact references. With two candidates whose scaled scores differ by d (noise units, d >= 0), the
worse candidate wins with probability
* Gumbel noise (exponential mechanism): ``1 / (1 + e^d)``;
* exponential noise (permute-and-flip): ``e^-d / 2``;
* Laplace noise: ``P(X_1 - X_0 > d) = e^-d (2 + d) / 4`` (the difference of two unit Laplace
  variables has density ``(1 + |x|) e^-|x| / 4``).

Statistical tests are two-sided binomial tests at ``ALPHA = 1e-6``: the count of the worse
candidate among N draws is accepted in ``[binom.ppf(ALPHA/2), binom.isf(ALPHA/2)]`` (computed
below from N and p, never hard-coded). Each has a companion showing a broken variant rejected.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats

from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms import ExponentialMechanism, ReportNoisyMax
from dpkit.mechanisms.selection import SELECTION_SLACK
from dpkit.noise import RandomSource

ALPHA = 1e-6
N = 20_000
NOISES = ("laplace", "exponential", "gumbel")


def _gain(epsilon: float, monotonic: bool = False) -> float:
    return (epsilon - 2 * SELECTION_SLACK) / (1.0 if monotonic else 2.0)


def _worse_wins(noise: str, d: float) -> float:
    if noise == "gumbel":
        return 1.0 / (1.0 + math.exp(d))
    if noise == "exponential":
        return math.exp(-d) / 2.0
    return math.exp(-d) * (2.0 + d) / 4.0


def _accepts(count: int, n: int, p: float) -> bool:
    lo = stats.binom.ppf(ALPHA / 2, n, p)
    hi = stats.binom.isf(ALPHA / 2, n, p)
    return bool(lo <= count <= hi)


def _mechanism(
    noise: str | None, epsilon: float, sensitivity: float, monotonic: bool = False
) -> Any:
    if noise is None:
        return ExponentialMechanism(epsilon=epsilon, sensitivity=sensitivity, monotonic=monotonic)
    return ReportNoisyMax(
        epsilon=epsilon, sensitivity=sensitivity, noise=noise, monotonic=monotonic
    )


# ---------------------------------------------------------------------------------------------
# 1. huge sensitivities and scores: no overflow before scaling
# ---------------------------------------------------------------------------------------------
HUGE_A = [1e308, -7e307]
HUGE_B = [1e308, -1.7e308]  # u - shift = -2.7e308 overflows a double


def test_huge_sensitivity_exponential_mechanism_probabilities() -> None:
    # Regression: c * Delta = 2e308 overflowed (factor 0: uniform) and u - shift overflowed to
    # -inf (candidate 1 never chosen): probabilities [0.5, 0.5] vs [1, 0], infinite loss.
    m = ExponentialMechanism(epsilon=1.0, sensitivity=1e308)
    pa, pb = m.probabilities(HUGE_A), m.probabilities(HUGE_B)
    g = _gain(1.0)
    assert pa[1] == pytest.approx(1 / (1 + math.exp(1.7 * g)), rel=1e-12)
    assert pb[1] == pytest.approx(1 / (1 + math.exp(2.7 * g)), rel=1e-12)
    assert np.all(np.abs(np.log(pa / pb)) <= 1.0)


@pytest.mark.parametrize("noise", (None, *NOISES))
def test_huge_sensitivity_sampling_follows_the_exact_law(noise: str | None) -> None:
    m = _mechanism(noise, 1.0, 1e308)
    for scores, gap in ((HUGE_A, 1.7), (HUGE_B, 2.7)):
        draws = m.release_many(scores, count=N, source=RandomSource(seed=11, insecure=True))
        p = _worse_wins(noise or "gumbel", gap * _gain(1.0))
        assert _accepts(int(draws.sum()), N, p), (noise, scores, draws.sum(), N * p)


@pytest.mark.parametrize("noise", (None, *NOISES))
def test_companion_binomial_test_rejects_broken_variants(noise: str | None) -> None:
    # The overflowing code never picked candidate 1 on HUGE_B (count 0): outside the interval.
    p = _worse_wins(noise or "gumbel", 2.7 * _gain(1.0))
    assert not _accepts(0, N, p)
    # A mechanism run at epsilon 1.5 instead of 1 (scores scaled 50% too much) is rejected.
    broken = _mechanism(noise, 1.5, 1e308)
    draws = broken.release_many(HUGE_B, count=N, source=RandomSource(seed=12, insecure=True))
    assert not _accepts(int(draws.sum()), N, p)


finite = st.floats(min_value=-1.7e308, max_value=1.7e308, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    scores=st.lists(finite, min_size=2, max_size=5),
    moves=st.lists(st.floats(min_value=-1.0, max_value=1.0), min_size=5, max_size=5),
    sensitivity=st.one_of(
        st.floats(min_value=1e-300, max_value=1.7e308),
        st.sampled_from([5e-324, 1e308, 1.7976931348623157e308]),
    ),
    epsilon=st.floats(min_value=1e-3, max_value=30.0),
    noise=st.sampled_from(["gumbel", "exponential"]),
    monotonic=st.booleans(),
)
def test_neighbouring_scores_never_exceed_epsilon(
    scores: list[float],
    moves: list[float],
    sensitivity: float,
    epsilon: float,
    noise: str,
    monotonic: bool,
) -> None:
    # Every score moves by at most Delta (in the same direction when monotonic); the exact
    # laws of the released outputs must then be within e^epsilon of each other wherever they
    # are not both negligible (below 1e-300: the 2**-1000 event of the module docstring).
    if monotonic:
        moves = [abs(x) for x in moves]
    other = [u + m * sensitivity for u, m in zip(scores, moves[: len(scores)], strict=True)]
    assume(
        all(
            math.isfinite(v) and abs(Fraction(v) - Fraction(u)) <= Fraction(sensitivity)
            for u, v in zip(scores, other, strict=True)
        )
    )
    m = ReportNoisyMax(epsilon=epsilon, sensitivity=sensitivity, noise=noise, monotonic=monotonic)
    p, q = m.probabilities(scores), m.probabilities(other)
    bound = math.exp(epsilon) * (1 + 1e-12)
    assert np.all(p <= bound * q + 1e-300), (p, q)
    assert np.all(q <= bound * p + 1e-300), (p, q)


@settings(max_examples=300, deadline=None)
@given(
    base=st.one_of(
        st.integers(min_value=-(2**63), max_value=2**63 - 1),
        st.sampled_from([2**53, 2**54, -(2**53), 2**55 + 6]),
    ),
    monotonic=st.booleans(),
    offsets=st.lists(st.integers(min_value=-20, max_value=20), min_size=2, max_size=5),
    moves=st.lists(st.integers(min_value=-3, max_value=3), min_size=5, max_size=5),
    epsilon=st.floats(min_value=1e-3, max_value=30.0),
    as_array=st.booleans(),
)
def test_neighbouring_integer_scores_never_exceed_epsilon(
    base: int, monotonic: bool, offsets: list[int], moves: list[int], epsilon: float, as_array: bool
) -> None:
    # scores a few units apart anywhere in the int64 range (where doubles are 2**10 apart),
    # each moved by at most Delta = 3 (Python ints, or int64 arrays when they fit)
    scores = [base + o for o in offsets]
    if monotonic:
        moves = [abs(x) for x in moves]
    other = [u + m for u, m in zip(scores, moves[: len(scores)], strict=True)]
    if as_array:
        assume(all(-(2**63) <= v < 2**63 for v in scores + other))
    pack = (lambda v: np.array(v, dtype=np.int64)) if as_array else list
    m = ExponentialMechanism(epsilon=epsilon, sensitivity=3.0, monotonic=monotonic)
    p, q = m.probabilities(pack(scores)), m.probabilities(pack(other))
    bound = math.exp(epsilon) * (1 + 1e-12)
    assert np.all(p <= bound * q + 1e-300), (p, q)
    assert np.all(q <= bound * p + 1e-300), (p, q)


def test_scale_and_factor_never_overflow_silently() -> None:
    m = ReportNoisyMax(epsilon=1.0, sensitivity=1e308)
    assert m.scale == math.inf  # 2e308 is past the largest double: rounded up, the safe side
    e = ExponentialMechanism(epsilon=1.0, sensitivity=1e308)
    assert 0.0 < e.factor <= 0.5e-308
    tiny = ExponentialMechanism(epsilon=1.0, sensitivity=5e-324)
    p = tiny.probabilities([0.0, -5e-324, -1e-323, 1.0])
    assert p[3] == 1.0  # the others are 2**1073 noise scales below: unreachable


# ---------------------------------------------------------------------------------------------
# 2. scores beyond 2**53: exact differences
# ---------------------------------------------------------------------------------------------
BIG = 2**53


@pytest.mark.parametrize(
    "make",
    [
        lambda v: np.array(v, dtype=np.int64),
        lambda v: np.array(v, dtype=np.uint64),
        lambda v: list(v),
        lambda v: [Fraction(x) for x in v],
        lambda v: np.array([np.longdouble(x) for x in v], dtype=np.longdouble),
        lambda v: np.array(v, dtype=object),
    ],
    ids=["int64", "uint64", "python-int", "fraction", "longdouble", "object"],
)
def test_integer_scores_beyond_2_53_are_exact(make: Any) -> None:
    # Regression: int64 [2**53 + 1, 2**53] was rounded to [2**53, 2**53] (a tie), while
    # [2**53 + 2, 2**53] kept its gap of 2: loss ln(0.5 / 0.119) = 1.43 > epsilon = 1.
    m = ExponentialMechanism(epsilon=1.0, sensitivity=1.0, monotonic=True)
    g = _gain(1.0, monotonic=True)
    pa = m.probabilities(make([BIG + 1, BIG]))
    pb = m.probabilities(make([BIG + 2, BIG]))
    assert pa[1] == pytest.approx(1 / (1 + math.exp(g)), rel=1e-14)
    assert pb[1] == pytest.approx(1 / (1 + math.exp(2 * g)), rel=1e-14)
    assert np.all(np.abs(np.log(pa / pb)) <= 1.0)


def test_integer_sampling_follows_the_exact_law() -> None:
    m = ExponentialMechanism(epsilon=1.0, sensitivity=1.0, monotonic=True)
    draws = m.release_many(
        np.array([BIG + 1, BIG], dtype=np.int64),
        count=N,
        source=RandomSource(seed=13, insecure=True),
    )
    p = 1 / (1 + math.exp(_gain(1.0, monotonic=True)))
    assert _accepts(int(draws.sum()), N, p)
    assert not _accepts(N // 2, N, p)  # companion: the rounded (tied) law is rejected


def test_extreme_integers_and_mixed_sequences() -> None:
    m = ExponentialMechanism(epsilon=2.0, sensitivity=1.0)
    g = _gain(2.0)
    for scores in (
        [2**64 - 1, 2**64 - 2],
        [2**63 - 1, 2**63 - 2],
        [2**1000 + 1, 2**1000],
        [2**60 + 1, 2.0**60],
        [Fraction(2**70) + Fraction(1, 2), 2**70 - 0.5],
    ):
        p = m.probabilities(scores)
        gap = float(Fraction(scores[0]) - Fraction(scores[1]))
        assert p[1] == pytest.approx(1 / (1 + math.exp(gap * g)), rel=1e-14), scores
    # int64 extremes: the difference 2**64 - 1 is exact in Python, rounded once here
    p = m.probabilities(np.array([2**63 - 1, -(2**63)], dtype=np.int64))
    assert p.tolist() == [1.0, 0.0]
    np.testing.assert_array_equal(
        m.probabilities(np.array([7, 7, 5], dtype=np.int8)), m.probabilities([7.0, 7.0, 5.0])
    )


# ---------------------------------------------------------------------------------------------
# decided by type, never by value
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "values",
    [
        [Decimal("1"), Decimal("2")],
        [Decimal("sNaN"), Decimal("1")],
        [1 + 0j, 2],
        [1j, 0],
        ["1.5", "2"],
        ["abc", "2"],
        np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[D]"),
        np.array([1 + 0j, 2]),
        np.array([b"1", b"2"]),
        [[1.0, 2.0], [3.0]],
    ],
    ids=lambda v: type(v).__name__ + str(np.asarray(v, dtype=object).ravel()[:1]),
)
def test_unsupported_types_are_refused_by_type(values: Any) -> None:
    for mech in (
        ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
        ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise="laplace"),
    ):
        with pytest.raises(PrivacyParameterError, match="scores"):
            mech.release(values, source=RandomSource(seed=1, insecure=True))


@pytest.mark.parametrize(
    "values",
    [
        [0, 2**1024],
        [0, 2**1023],
        [Fraction(10**400), 0],
        [Fraction(-(10**400)), 0],
        [float("nan"), 1.0],
        [float("nan"), float("nan")],
        [-math.inf, -math.inf],
        [math.inf, 1.0, math.inf],
        [np.longdouble("1e4000"), 0.0],
        [np.longdouble("-1e4000"), 0.0],
        [np.longdouble("nan"), 1],
        [True, False],
        np.array([np.nan, -np.inf, 5.0]),
        [5e-324, -5e-324],
        np.array([1.5], dtype=np.float16),
    ],
)
def test_every_value_of_an_accepted_type_releases(values: Any) -> None:
    src = RandomSource(seed=2, insecure=True)
    for noise in NOISES:
        m = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise=noise)
        out = m.release_many(values, count=50, source=src)
        assert out.shape == (50,) and out.min() >= 0 and out.max() < len(values)
        if noise != "laplace":
            p = m.probabilities(values)
            assert np.all(np.isfinite(p)) and p.sum() == pytest.approx(1.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(min_value=-(2**64), max_value=2**64), min_size=1, max_size=6))
def test_integer_paths_agree(values: list[int]) -> None:
    # lists of Python ints inside the int64 range take the vectorised path, others the exact
    # rational one; both must give the exactly rounded differences
    m = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    top = max(values)
    want = m.probabilities([Fraction(v) for v in values])  # always the rational path
    got = m.probabilities(values)
    np.testing.assert_array_equal(got, want)
    # and the differences are exactly rounded: z of the best candidate is 0
    assert got[values.index(top)] == want.max()


def test_pandas_columns_are_decided_by_dtype() -> None:
    import pandas as pd  # a test dependency (pyproject extra "test")

    m = ExponentialMechanism(epsilon=1.0, sensitivity=1.0, monotonic=True)
    g = _gain(1.0, monotonic=True)
    # a nullable Int64 column converts to object arrays only when it holds a missing value:
    # both cases must release (missing = NaN, never chosen) and keep integers exact
    full = pd.Series([BIG + 1, BIG, 3], dtype="Int64")
    holed = pd.Series([BIG + 1, BIG, None], dtype="Int64")
    p_full, p_holed = m.probabilities(full), m.probabilities(holed)
    assert p_holed[2] == 0.0
    assert p_holed[1] == pytest.approx(1 / (1 + math.exp(g)), rel=1e-14)
    assert p_full[:2] == pytest.approx(p_holed[:2], rel=1e-14)
    assert m.probabilities(pd.Series([1.5, None], dtype="Float64")).tolist() == [1.0, 0.0]
    assert m.probabilities(pd.Series([3, 1])).tolist() == pytest.approx(
        [1 / (1 + math.exp(-2 * g)), 1 / (1 + math.exp(2 * g))]
    )
    m.release(holed, source=RandomSource(seed=4, insecure=True))


def test_special_values_are_treated_as_documented() -> None:
    m = ExponentialMechanism(epsilon=1.0, sensitivity=1.0)
    # +inf ties with the largest double; huge Python ints clamp to it too
    assert m.probabilities([math.inf, 2**1100, -1.0]).tolist()[:2] == pytest.approx([0.5, 0.5])
    # NaN and -inf are never chosen while a finite score exists
    assert m.probabilities([np.nan, -math.inf, 3.0]).tolist() == [0.0, 0.0, 1.0]
    assert m.probabilities([np.longdouble("nan"), 3]).tolist() == [0.0, 1.0]


# ---------------------------------------------------------------------------------------------
# release_many
# ---------------------------------------------------------------------------------------------
def test_release_many_shapes_and_single_candidate() -> None:
    src = RandomSource(seed=3, insecure=True)
    for noise in NOISES:
        m = ReportNoisyMax(epsilon=1.0, sensitivity=1.0, noise=noise)
        assert m.release_many([1.0, 2.0], count=0, source=src).shape == (0,)
        assert m.release_many([4.0], count=7, source=src).tolist() == [0] * 7
        # many draws span several blocks and every block is filled: a tie is a fair coin, and
        # |mean - 1/2| > 0.05 is 45 standard deviations (sd 0.0011): probability < 1e-400
        draws = m.release_many([0.0, 0.0], count=200_001, source=src)
        assert draws.shape == (200_001,) and 0.45 < draws.mean() < 0.55
    with pytest.raises(PrivacyParameterError, match="laplace"):
        ReportNoisyMax(epsilon=1.0, sensitivity=1.0).probabilities([0.0, 1.0])


@pytest.mark.parametrize("count", [2**32 + 1, 2**53 + 1, 10**400])
def test_release_many_refuses_counts_beyond_one_array(count: int) -> None:
    # Regression: MemoryError (2**53 + 1) and ValueError (10**400) from numpy before the fix.
    from dpkit.errors import PrivacyParameterError

    for mech in (
        ExponentialMechanism(epsilon=1.0, sensitivity=1.0),
        ReportNoisyMax(epsilon=1.0, sensitivity=1.0),
    ):
        with pytest.raises(PrivacyParameterError, match="count"):
            mech.release_many([1.0, 2.0], count=count)


def _gap_holds(m: ExponentialMechanism, n: int, t: float, gap: float) -> bool:
    """``n e^(-g gap / Delta) e^SLACK <= e^-t`` for the gain the sampler uses, in mpmath."""
    import mpmath

    from dpkit.mechanisms._calibration import calibrated_epsilon

    mpmath.mp.prec = 200
    g = mpmath.mpf(_gain(calibrated_epsilon(m.epsilon), m.monotonic))
    lhs = mpmath.log(n) - g * mpmath.mpf(gap) / mpmath.mpf(m.sensitivity) + SELECTION_SLACK
    return bool(lhs <= -mpmath.mpf(t))


@settings(max_examples=80, deadline=None)
@given(
    eps=st.floats(2.0**-34, 50.0),
    sensitivity=st.floats(2.0**-20, 2.0**40),
    n=st.integers(1, 10**12),
    t=st.floats(0.0, 60.0),
    monotonic=st.booleans(),
)
def test_utility_gap_bounds_the_law_released(
    eps: float, sensitivity: float, n: int, t: float, monotonic: bool
) -> None:
    # Dwork-Roth Theorem 3.11 at the gain actually sampled (epsilon' - 2 SLACK), with the
    # released law's e^SLACK: the stated gap must make the tail at most e^-t.
    m = ExponentialMechanism(epsilon=eps, sensitivity=sensitivity, monotonic=monotonic)
    assert _gap_holds(m, n, t, m.utility_gap(n_candidates=n, t=t))


def test_utility_gap_at_the_nominal_epsilon_would_be_too_small() -> None:
    # Companion: the textbook gap at the nominal epsilon' ignores the slack charged in the gain,
    # and at a small epsilon the check above catches it.
    from dpkit.mechanisms._calibration import calibrated_epsilon

    m = ExponentialMechanism(epsilon=2.0**-34, sensitivity=1.0)
    nominal = 2.0 / calibrated_epsilon(m.epsilon) * (math.log(1000) + 3.0)
    assert not _gap_holds(m, 1000, 3.0, nominal)
    assert _gap_holds(m, 1000, 3.0, m.utility_gap(n_candidates=1000, t=3.0))
