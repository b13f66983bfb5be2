"""Partition selection: exact probabilities against an independent mpmath recursion, the DP
inequalities checked exactly for every n, the boundary (strictly above vs at the threshold),
validation, and the Gaussian threshold's calibration against mpmath.

Release frequencies are tested in tests/statistical/test_partition_selection_stat.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit.accounting.zcdp import ZCdpAccountant, zcdp_delta
from dpkit.errors import PrivacyParameterError
from dpkit.events import ApproxDpEvent, DiscreteGaussianEvent, SelfComposedEvent
from dpkit.mechanisms import GaussianPartitionSelection, PartitionSelection
from dpkit.mechanisms._calibration import calibrated_delta, calibrated_epsilon
from dpkit.noise import RandomSource


@pytest.fixture(autouse=True)
def _working_precision() -> Iterator[None]:
    # 60 digits for this module's references, set per test and restored after it (a
    # module-level setting would leak into every test collected after it)
    with mpmath.workdps(60):
        yield


T = 2**63


def seeded(seed: int) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


def ideal_pi(eps: float, delta: float, k: int) -> list[mpmath.mpf]:
    """The optimal rule of Desfontaines et al. with (eps/k, delta/k), in 60-digit arithmetic:
    pi(0) = 0, pi(n) = min(e^e pi + d, 1 - e^-e (1 - pi - d), 1), until it reaches 1."""
    e = mpmath.mpf(eps) / k
    d = mpmath.mpf(delta) / k
    ee = mpmath.exp(e)
    out = [mpmath.mpf(0)]
    while out[-1] < 1:
        p = out[-1]
        out.append(min(ee * p + d, 1 - (1 - p - d) / ee, mpmath.mpf(1)))
        if len(out) > 100_000:
            raise AssertionError("ideal recursion did not terminate")
    return out


def exp_lower(eps: float, k: int) -> Fraction:
    """A rational strictly below e^{eps/k} (eps/k exact), from 60-digit mpmath (independent of
    dpkit's Taylor sum)."""
    v = mpmath.exp(mpmath.mpf(eps) / k) * (1 - mpmath.mpf(10) ** -50)
    return Fraction(int(mpmath.floor(v * mpmath.mpf(2) ** 120)), 2**120)


CASES = [
    (1.0, 1e-6, 1),
    (1.0, 1e-6, 3),
    (0.1, 1e-9, 1),
    (3.0, 1e-3, 2),
    (0.5, 1e-12, 5),
    (10.0, 1e-10, 1),
]


@pytest.mark.parametrize(("eps", "delta", "L"), CASES)
def test_probabilities_match_independent_recursion(eps: float, delta: float, L: int) -> None:
    ps = PartitionSelection.from_epsilon_delta(epsilon=eps, delta=delta, max_partitions=L)
    # the coins are built for the calibrated pair the selection states (and is charged)
    eps, delta = ps.event.epsilon, ps.event.delta
    assert eps < ps.epsilon and delta < ps.delta
    pi = ideal_pi(eps, delta, L)
    # The exact grid recursion rounds down: p(n) <= pi(n). In the growing phase the floors
    # (2**-63 each) accumulate to at most 2**-63 (a^n - 1)/(a - 1) = 2**-63 pi(n) / delta';
    # in the decaying phase they shrink.
    assert ps.threshold in (len(pi) - 1, len(pi))
    for n in range(ps.threshold + 1):
        p = ps.probability_fraction(n)
        ideal = pi[min(n, len(pi) - 1)]
        pm = mpmath.mpf(p.numerator) / p.denominator
        assert pm <= ideal
        assert ideal - pm <= mpmath.mpf(2) ** -62 * (ideal * L / mpmath.mpf(delta) + n + 1)
    # first step is the closed form delta' rounded down to the grid
    assert ps.probability_fraction(1) == Fraction(int(Fraction(delta) / L * T), T)


@pytest.mark.parametrize(("eps", "delta", "L"), CASES)
def test_closed_form_of_the_first_phase(eps: float, delta: float, L: int) -> None:
    """pi(n) = delta' (e^{n eps'} - 1) / (e^{eps'} - 1) while that is below 1/2 (paper, Thm. 1)."""
    ps = PartitionSelection.from_epsilon_delta(epsilon=eps, delta=delta, max_partitions=L)
    e, d = mpmath.mpf(ps.event.epsilon) / L, mpmath.mpf(ps.event.delta) / L
    for n in range(1, ps.threshold):
        closed = d * (mpmath.exp(n * e) - 1) / (mpmath.exp(e) - 1)
        if closed > 0.4:
            break
        p = ps.probability_fraction(n)
        pm = mpmath.mpf(p.numerator) / p.denominator
        assert pm <= closed
        assert closed - pm <= mpmath.mpf(2) ** -62 * (closed / d + n + 1)


@pytest.mark.parametrize(("eps", "delta", "L"), [*CASES, (2.0, 1e-5, 1)])
@pytest.mark.parametrize("relation", ["add_remove", "replace"])
def test_dp_inequalities_hold_exactly_for_every_n(
    eps: float, delta: float, L: int, relation: str
) -> None:
    """Both directions, both outcomes, every n (including n = 0 vs absent and past the
    threshold), in exact rational arithmetic with a rational lower bound of e^{eps/k}."""
    ps = PartitionSelection.from_epsilon_delta(
        epsilon=eps, delta=delta, max_partitions=L, neighbouring=relation
    )
    k = L if relation == "add_remove" else 2 * L
    a = exp_lower(eps, k)
    d = Fraction(delta) / k
    assert ps.probability_fraction(0) == 0
    for n in range(1, ps.threshold + 3):
        p0, p1 = ps.probability_fraction(n - 1), ps.probability_fraction(n)
        assert 0 <= p0 <= p1 <= 1
        assert p1 <= a * p0 + d
        assert p0 <= a * p1 + d
        assert 1 - p0 <= a * (1 - p1) + d
        assert 1 - p1 <= a * (1 - p0) + d
    # Composition over the k keys a neighbouring step can touch.
    assert Fraction(eps) / k * k == Fraction(eps)


def test_replace_equals_twice_the_partitions() -> None:
    a = PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, max_partitions=2)
    b = PartitionSelection.from_epsilon_delta(
        epsilon=1.0, delta=1e-6, max_partitions=1, neighbouring="replace"
    )
    assert a.threshold == b.threshold
    assert all(
        a.probability_fraction(n) == b.probability_fraction(n) for n in range(a.threshold + 1)
    )


def test_thresholds_grow_with_max_partitions() -> None:
    th = [
        PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, max_partitions=L).threshold
        for L in range(1, 6)
    ]
    assert th == sorted(th) and len(set(th)) == 5
    assert th[0] == len(ideal_pi(1.0, 1e-6, 1)) - 1


def test_boundary_at_and_below_the_threshold() -> None:
    ps = PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6)
    t = ps.threshold
    assert ps.probability_fraction(t) == 1
    assert ps.probability_fraction(t - 1) < 1
    assert ps.probability_fraction(t + 10**9) == 1
    assert ps.probability(np.array([0, t - 1, t, t + 1]))[2:].tolist() == [1.0, 1.0]
    # At and above the threshold: always released; n = 0 and negative: never.
    src = seeded(1)
    assert ps.release(np.full(200_000, t), source=src).all()
    assert ps.release(np.full(1000, 2**62, dtype=np.int64), source=src).all()
    assert ps.release(np.array([2**64 - 1], dtype=np.uint64), source=src).all()
    assert not ps.release(np.zeros(200_000, dtype=np.int64), source=src).any()
    assert not ps.release(np.full(1000, -5), source=src).any()
    # Just below the threshold the release is not certain (exact value; the frequencies are in
    # the statistical tests).
    assert 1 - ps.probability_fraction(t - 1) > Fraction(1, 10**8)


def test_release_shape_and_reproducibility() -> None:
    ps = PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6)
    counts = np.arange(40).reshape(4, 10)
    a = ps.release(counts, source=seeded(7))
    b = ps.release(counts, source=seeded(7))
    assert a.shape == (4, 10) and a.dtype == np.bool_
    assert (a == b).all()
    assert ps.release([3, 5, 40], source=seeded(1)).shape == (3,)
    # object arrays of Python ints (engine results) are accepted
    assert ps.release(np.array([1, 2**70], dtype=object), source=seeded(2))[1]


def test_event_and_parameters() -> None:
    ps = PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, max_partitions=3)
    # the calibrated pair (k selections at fl(e / k), fl(d / k) fit a budget of (e, d))
    assert ps.event == ApproxDpEvent(epsilon=calibrated_epsilon(1.0), delta=calibrated_delta(1e-6))
    assert (ps.epsilon, ps.delta) == (1.0, 1e-6)
    assert 1.0 * (1 - 2**-39) < ps.event.epsilon <= 1.0 * (1 - 2**-40)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -1.0, 0.0, True, "1", None])
def test_invalid_epsilon(bad: object) -> None:
    with pytest.raises(PrivacyParameterError):
        PartitionSelection.from_epsilon_delta(epsilon=bad, delta=1e-6)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        GaussianPartitionSelection.from_epsilon_delta(epsilon=bad, delta=1e-6)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [float("nan"), 0.0, 1.0, -1e-9, 2.0, True])
def test_invalid_delta(bad: object) -> None:
    with pytest.raises(PrivacyParameterError):
        PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        GaussianPartitionSelection.from_epsilon_delta(epsilon=1.0, delta=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, 1.0, True, "2"])
def test_invalid_max_partitions(bad: object) -> None:
    with pytest.raises(PrivacyParameterError):
        PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, max_partitions=bad)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError):
        GaussianPartitionSelection.from_rho(rho=0.1, threshold_delta=1e-6, max_partitions=bad)  # type: ignore[arg-type]


def test_invalid_neighbouring_and_counts() -> None:
    with pytest.raises(PrivacyParameterError):
        PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, neighbouring="swap")
    ps = PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6)
    for bad in (
        np.array([1.0, 2.0]),
        np.array([True]),
        np.array(["3"]),
        np.array([1, 2.5], dtype=object),
    ):
        with pytest.raises(PrivacyParameterError):
            ps.release(bad, source=seeded(0))


def test_tiny_epsilon_is_refused_with_a_pointer() -> None:
    with pytest.raises(PrivacyParameterError, match="GaussianPartitionSelection"):
        PartitionSelection.from_epsilon_delta(epsilon=1e-6, delta=1e-10)


@settings(max_examples=40, deadline=None)
@given(eps=st.floats(0.05, 8.0), log_delta=st.floats(-14.0, -2.0), L=st.integers(1, 4))
def test_hypothesis_monotone_and_private(eps: float, log_delta: float, L: int) -> None:
    delta = 10.0**log_delta
    ps = PartitionSelection.from_epsilon_delta(epsilon=eps, delta=delta, max_partitions=L)
    a = exp_lower(eps, L)
    d = Fraction(delta) / L
    prev = Fraction(0)
    for n in range(1, ps.threshold + 1):
        p = ps.probability_fraction(n)
        assert prev <= p <= a * prev + d
        assert 1 - prev <= a * (1 - p) + d
        prev = p
    assert prev == 1


# ---------------------------------------------------------------------------------------------
# Gaussian thresholding
# ---------------------------------------------------------------------------------------------
def dg_sf(sigma: float, s: int) -> mpmath.mpf:
    """P[Z >= s] for the discrete Gaussian, by direct 60-digit summation."""
    s2 = 2 * mpmath.mpf(sigma) ** 2
    J = int(60 * sigma) + 60
    norm = mpmath.fsum(mpmath.exp(-(mpmath.mpf(k) ** 2) / s2) for k in range(-J, J + 1))
    tail = mpmath.fsum(mpmath.exp(-(mpmath.mpf(k) ** 2) / s2) for k in range(s, J + 1))
    return tail / norm


@pytest.mark.parametrize("L", [1, 4, 100])
def test_gaussian_calibration_against_mpmath(L: int) -> None:
    g = GaussianPartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, max_partitions=L)
    assert g.delta_at(1.0) <= 1e-6
    tail = dg_sf(g.sigma, g.tau)
    # threshold_delta is an upper bound of L P[Z >= tau] e^slack, and tight (within 1%)
    assert g.threshold_delta >= L * tail * mpmath.exp(g.pmf_slack / L)
    assert g.threshold_delta <= L * tail * 1.01
    # tau is the smallest integer that fits the threshold share (delta / 2)
    assert L * dg_sf(g.sigma, g.tau - 1) > 0.5e-6
    # rho = L / (2 sigma^2), rounded up
    assert Fraction(g.rho) >= Fraction(L) / (2 * Fraction(g.sigma) ** 2)
    assert g.event == ApproxDpEvent(epsilon=calibrated_epsilon(1.0), delta=calibrated_delta(1e-6))
    # the noise part alone meets its share at eps = 1 (e^A delta_rho(eps - 2A))
    assert zcdp_delta(g.rho, 1.0 - 2 * g.pmf_slack) * np.exp(g.pmf_slack) <= 0.5e-6
    # the noise event is L composed unit-sensitivity discrete Gaussians; the zCDP accountant
    # reads the same rho from it
    ev = g.noise_event
    inner = ev.event if isinstance(ev, SelfComposedEvent) else ev
    assert isinstance(inner, DiscreteGaussianEvent) and inner.sigma == g.sigma
    assert (ev.count if isinstance(ev, SelfComposedEvent) else 1) == L
    acc = ZCdpAccountant()
    acc.compose(ev)
    assert acc.get_delta(1.0) + g.threshold_delta <= 1e-6


def test_gaussian_from_rho_for_zcdp_sessions() -> None:
    g = GaussianPartitionSelection.from_rho(rho=0.05, threshold_delta=1e-7, max_partitions=10)
    assert g.rho <= 0.05
    assert Fraction(10) / (2 * Fraction(g.sigma) ** 2) <= Fraction(0.05)
    assert g.threshold_delta <= 1e-7
    assert 10 * dg_sf(g.sigma, g.tau - 1) > 1e-7
    with pytest.raises(PrivacyParameterError):
        _ = g.event
    assert g.delta_at(2.0) > g.threshold_delta
    r = GaussianPartitionSelection.from_rho(
        rho=0.05, threshold_delta=1e-7, max_partitions=5, neighbouring="replace"
    )
    assert (r.sigma, r.tau) == (g.sigma, g.tau)


def test_gaussian_probability_against_mpmath() -> None:
    g = GaussianPartitionSelection(sigma=3.5, tau=12)
    for n in [0, 1, 5, 11, 12, 13, 20, 40]:
        ref = dg_sf(3.5, 12 - n + 1)
        assert abs(g.probability(n) - float(ref)) <= 1e-12


def test_gaussian_boundary_strictly_above() -> None:
    """Keys whose noisy count equals tau are not released; one above is."""
    g = GaussianPartitionSelection(sigma=2.0, tau=10)
    counts = np.full(200_000, 10)
    mask, noisy = g.release_with_counts(counts, source=seeded(3))
    assert (mask == (noisy > 10)).all()
    at = noisy == 10
    assert at.sum() > 1000 and not mask[at].any()
    assert mask[noisy == 11].all()
    # P[10 + Z > 10] = P[Z >= 1] < 1/2 < P[Z >= 0] = P[11 + Z > 10]
    assert g.probability(10) < 0.5 < g.probability(11)
    assert g.release(np.zeros(1000, dtype=np.int64), source=seeded(4)).sum() == 0


def test_gaussian_validation() -> None:
    for kw in (
        {"sigma": 0.0, "tau": 3},
        {"sigma": float("nan"), "tau": 3},
        {"sigma": 1.0, "tau": 0},
        {"sigma": 1.0, "tau": 2.5},
        {"sigma": 1.0, "tau": 3, "epsilon": 1.0},
    ):
        with pytest.raises(PrivacyParameterError):
            GaussianPartitionSelection(**kw)  # type: ignore[arg-type]
    # a claimed (epsilon, delta) the parameters do not meet is refused
    with pytest.raises(PrivacyParameterError):
        GaussianPartitionSelection(sigma=1.0, tau=3, epsilon=1.0, delta=1e-6)
    with pytest.raises(PrivacyParameterError):
        GaussianPartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, threshold_share=1.0)
    with pytest.raises(PrivacyParameterError):
        GaussianPartitionSelection.from_rho(rho=-1.0, threshold_delta=1e-6)


def test_millions_of_keys_in_one_call() -> None:
    ps = PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6)
    counts = np.arange(2_000_000, dtype=np.int64) % 40
    keep = ps.release(counts, source=seeded(9))
    assert keep.shape == counts.shape
    assert keep[counts >= ps.threshold].all() and not keep[counts == 0].any()
    g = GaussianPartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6, max_partitions=50)
    mask, noisy = g.release_with_counts(counts, source=seeded(10))
    assert mask.shape == noisy.shape == counts.shape and (mask == (noisy > g.tau)).all()


# ---------------------------------------------------------------------------------------------
# Gaussian thresholding with a large sigma (tiny rho): no array of length ~40 sigma
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sigma", [4097.0, 6000.0, 20000.0])
@pytest.mark.parametrize("x", [0.5, 3.0, 6.0, 9.0])
def test_large_sigma_tail_bound_is_an_upper_bound_and_tight(
    sigma: float, x: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The closed-form (integral-test) bound used above 2**12 against the term-by-term sum (an
    # upper bound of the truth checked against mpmath above): never below it, and close: the
    # integral test adds f(t) to a sum of about sigma f(t) / (x + 1) (Mills ratio), i.e. less
    # than (x + 1) / sigma in the logarithm.
    import dpkit.mechanisms.partition_selection as ps

    t = int(x * sigma)
    closed = ps._discrete_gaussian_log_tail_up(sigma, t)
    monkeypatch.setattr(ps, "_SUM_SIGMA", float("inf"))
    summed = ps._discrete_gaussian_log_tail_up(sigma, t)
    assert closed >= summed
    assert closed - summed < (x + 1.0) / sigma


def test_tiny_rho_does_not_materialise_arrays() -> None:
    # sigma ~ 7e14: the former term-by-term sums needed ~2.8e16 doubles (MemoryError)
    g = GaussianPartitionSelection.from_rho(rho=1e-30, threshold_delta=1e-6)
    assert g.threshold_delta <= 1e-6
    assert 4.7 * g.sigma < g.tau < 4.8 * g.sigma  # Phi(-4.753) = 1e-6
    out = g.release(np.array([0, 2**62], dtype=np.int64), source=seeded(1))
    assert out.tolist() == [False, True]
    p = g.probability(np.array([0, 2**62]))
    assert p[0] < 1e-6 and p[1] == 1.0


def test_sigma_beyond_2_52_is_refused_by_parameter() -> None:
    with pytest.raises(PrivacyParameterError, match="too small"):
        GaussianPartitionSelection.from_rho(rho=1e-200, threshold_delta=1e-6)
    with pytest.raises(PrivacyParameterError, match="2\\*\\*52"):
        GaussianPartitionSelection(sigma=2.0**53, tau=10)
