"""Gaussian sparse vector (Zhu and Wang 2020): parameters, stream, accounting, output law.

Statistical statements: the chi-square test rejects the correct law with probability at most
ALPHA = 1e-6; its companion shows the same test rejects a broken variant (threshold noise
redrawn for every query). Sources are seeded, so every run sees the same draws.
"""

from __future__ import annotations

import copy
import math
import pickle
from fractions import Fraction
from typing import Any

import mpmath
import numpy as np
import numpy.typing as npt
import pytest
from scipy import integrate, stats

from dpkit.accounting import (
    ApproxDpAccountant,
    PldAccountant,
    PureDpAccountant,
    RdpAccountant,
    ZCdpAccountant,
)
from dpkit.accounting.budget import Budget
from dpkit.accounting.rdp import event_rdp
from dpkit.audit import Claim, HistogramTester, audit
from dpkit.errors import BudgetExceededError, PrivacyParameterError, UnsupportedEventError
from dpkit.events import event_from_json, event_to_json
from dpkit.mechanisms import GaussianSparseVector
from dpkit.noise import RandomSource
from dpkit.noise.samplers import gaussian

ALPHA = 1e-6
ORDERS = np.array([1.05, 1.5, 2.0, 3.0, 8.0, 32.0, 256.0])


def _src(seed: str) -> RandomSource:
    return RandomSource(seed=f"gsvt-{seed}", insecure=True)


def _mech(**kw: Any) -> GaussianSparseVector:
    base: dict[str, Any] = {
        "sigma_threshold": 2.0,
        "sigma_query": 3.0,
        "sensitivity": 1.0,
        "threshold": 10.0,
        "max_queries": 100,
    }
    return GaussianSparseVector(**{**base, **kw})


@pytest.mark.parametrize(
    "field,value",
    [
        ("sigma_threshold", 0.0),
        ("sigma_threshold", math.nan),
        ("sigma_query", -1.0),
        ("sigma_query", math.inf),
        ("sensitivity", 0.0),
        ("threshold", math.nan),
        ("max_queries", 0),
        ("max_queries", 2.5),
        ("max_positives", 0),
        ("max_positives", True),
        ("neighbouring", "swap"),
    ],
)
def test_bad_parameters_are_refused(field: str, value: Any) -> None:
    with pytest.raises(PrivacyParameterError):
        _mech(**{field: value})


@pytest.mark.parametrize("rho", [math.nan, 0.0, -1.0, math.inf, "1", 1e-300])
def test_from_rho_refuses_bad_rho(rho: Any) -> None:
    with pytest.raises(PrivacyParameterError):
        GaussianSparseVector.from_rho(rho=rho, sensitivity=1.0, threshold=0.0, max_queries=10)


def test_rdp_curve_is_theorem_8_composed_over_the_runs() -> None:
    # Independent evaluation in 50-digit arithmetic of c (alpha/s1^2 + 2 alpha/s2^2 +
    # ln k/(alpha - 1)) (Zhu and Wang 2020, Theorem 8); the accountant's curve bounds it from
    # above and within a relative 1e-12.
    m = _mech(max_positives=3, max_queries=500)
    ev = m.event
    curve = event_rdp(ev, ORDERS)
    assert curve is not None
    with mpmath.workdps(50):
        s1 = mpmath.mpf(ev.threshold_multiplier)
        s2 = mpmath.mpf(ev.query_multiplier)
        for a, got in zip(ORDERS, curve, strict=True):
            al = mpmath.mpf(float(a))
            want = 3 * (al / s1**2 + 2 * al / s2**2 + mpmath.log(500) / (al - 1))
            assert mpmath.mpf(float(got)) >= want
            assert float(got) <= float(want) * (1 + 1e-12)


def test_multipliers_charge_the_lattice() -> None:
    m = _mech()
    d = 1.0 + m.granularity
    assert m.event.threshold_multiplier <= 2.0 / d
    assert m.event.query_multiplier <= 3.0 / d
    assert m.granularity <= 2.0**-12


@pytest.mark.parametrize("k,c", [(1, 1), (2, 1), (1000, 1), (10**6, 4)])
def test_zcdp_rho_bounds_the_curve_at_every_order(k: int, c: int) -> None:
    # D_alpha is non-decreasing in alpha, so the curve's minimum over orders >= alpha bounds
    # it; that minimum must stay below rho * alpha (checked on a dense grid, mpmath).
    ev = _mech(max_queries=k, max_positives=c).event
    with mpmath.workdps(40):
        rho = mpmath.mpf(ev.zcdp_rho.numerator) / ev.zcdp_rho.denominator
        a = mpmath.mpf(ev.quadratic.numerator) / ev.quadratic.denominator
        big_l = mpmath.log(k)
        grid = [1 + mpmath.mpf(10) ** (x / 40.0) for x in range(-320, 161)]
        # the curve is convex with its minimum at alpha* = 1 + sqrt(L / a)
        star = 1 + mpmath.sqrt(big_l / a)
        running = [c * (a * max(al, star) + big_l / (max(al, star) - 1)) for al in grid]
        assert all(r <= rho * al for r, al in zip(running, grid, strict=True))
        if k == 1:  # a single query: exactly the slope
            assert rho == c * a


def test_theorem_8_holds_on_neighbouring_streams() -> None:
    # The exact output laws of one continuous Gaussian AboveThreshold run over k = 4 queries on
    # two neighbouring answer vectors (every answer moved by Delta, in the direction that helps
    # the adversary most: the last answer down, the others up), by numerical integration over
    # the threshold noise; their Renyi divergence must stay below Theorem 8's curve.
    s1, s2, delta, t = 1.5, 2.0, 1.0, 0.0
    q = np.array([-1.0, -0.5, 0.0, 1.0])
    q2 = q + np.array([delta, delta, delta, -delta])

    def law(vals: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        def piece(i: int) -> float:
            def f(r: float) -> float:
                below = stats.norm.cdf((t + r - vals[:i]) / s2).prod()
                last = stats.norm.sf((t + r - vals[i]) / s2) if i < len(vals) else 1.0
                return float(stats.norm.pdf(r / s1) / s1 * below * last)

            return float(integrate.quad(f, -12 * s1, 12 * s1, epsabs=1e-14, limit=200)[0])

        return np.array([piece(i) for i in range(len(vals) + 1)])

    p, p2 = law(q), law(q2)
    assert abs(p.sum() - 1) < 1e-9 and abs(p2.sum() - 1) < 1e-9
    for a in (1.5, 2.0, 4.0, 10.0):
        bound = a * delta**2 / s1**2 + 2 * a * delta**2 / s2**2 + math.log(4) / (a - 1)
        for x, y in ((p, p2), (p2, p)):
            div = math.log(float(np.sum(x**a * y ** (1 - a)))) / (a - 1)
            assert div <= bound


def test_accountants_read_the_event() -> None:
    ev = _mech().event
    for acct in (RdpAccountant(), ZCdpAccountant()):
        acct.compose(ev)
        assert 0.0 < acct.get_epsilon(1e-6) < math.inf
    for acct in (PureDpAccountant(), ApproxDpAccountant(), PldAccountant()):
        with pytest.raises(UnsupportedEventError):
            acct.compose(ev)
    assert event_from_json(event_to_json(ev)) == ev


@pytest.mark.parametrize("k,c", [(1, 1), (365, 1), (10**5, 3)])
def test_calibrated_to_rho_fits_a_zcdp_budget(k: int, c: int) -> None:
    m = GaussianSparseVector.from_rho(
        rho=0.5, sensitivity=2.0, threshold=0.0, max_queries=k, max_positives=c
    )
    assert m.event.zcdp_rho <= 0.5
    budget = Budget(rho=0.5)
    budget.charge(m.event)
    # and the calibration is not wasteful: 1% less noise would not fit
    less = GaussianSparseVector(
        sigma_threshold=m.sigma_threshold * 0.99,
        sigma_query=m.sigma_query * 0.99,
        sensitivity=2.0,
        threshold=0.0,
        max_queries=k,
        max_positives=c,
    )
    assert less.event.zcdp_rho > 0.5
    # k mechanisms calibrated to rho / k fit together
    parts = [
        GaussianSparseVector.from_rho(rho=0.5 / 3, sensitivity=2.0, threshold=0.0, max_queries=k)
        for _ in range(3)
    ]
    whole = Budget(rho=0.5)
    for p in parts:
        whole.charge(p.event)
    with pytest.raises(BudgetExceededError):
        Budget(rho=0.5).charge(m.event, count=2)


def test_epsilon_delta_budgets_in_zcdp_and_rdp_accept_it() -> None:
    zb = Budget(epsilon=1.0, delta=1e-6, method="zcdp")
    rho = zb.native_budget
    assert rho is not None
    m = GaussianSparseVector.from_rho(rho=rho, sensitivity=1.0, threshold=0.0, max_queries=100)
    zb.charge(m.event)
    rb = Budget(epsilon=1.0, delta=1e-6, method="rdp")
    rb.charge(m.event)
    assert rb.spent[0] <= 1.0


def test_stream_halts_after_max_queries_and_cannot_be_copied() -> None:
    m = _mech(threshold=1e9, max_queries=3)
    stream = m.start(source=_src("halt"))
    assert [stream.ask(0.0) for _ in range(3)] == [False, False, False]
    assert stream.halted and stream.answered == 3
    with pytest.raises(BudgetExceededError):
        stream.ask(0.0)
    for op in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(PrivacyParameterError):
            op(stream)
    assert m.release(np.zeros(10), source=_src("r")) == (False, False, False)


def test_each_positive_starts_a_new_run() -> None:
    m = _mech(threshold=0.0, max_positives=3, max_queries=50)
    out = m.release([1e9] * 5, source=_src("c"))
    assert out == (True, True, True)  # halts after c positives
    # NaN answers read as 0, infinities clamped: nothing raises after a charge
    m.release([math.nan, math.inf, -math.inf, 1e308], source=_src("s"))


def _index(value: float, s: float) -> int:
    """``rint(value / s)``, half to even, in exact arithmetic (the lattice rule)."""
    return round(Fraction(value) / Fraction(s))


def _lattice_law(
    m: GaussianSparseVector, values: list[float], redraw: bool = False
) -> npt.NDArray[np.float64]:
    """The exact law of the first positive index (len(values) = none) of one run, by
    summation over the discrete Gaussians on the lattice; ``redraw``: the broken variant that
    draws fresh threshold noise for every query."""
    s = m.granularity
    t1, t2 = m.sigma_threshold / s, m.sigma_query / s
    half = int(14 * max(t1, t2)) + 1
    z = np.arange(-half, half + 1, dtype=np.float64)
    p1 = np.exp(-(z**2) / (2 * t1 * t1))
    p1 /= p1.sum()
    p2 = np.exp(-(z**2) / (2 * t2 * t2))
    p2 /= p2.sum()
    cdf2 = np.cumsum(p2)

    def below(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        # P[Z2 <= x] for integer x (as floats)
        i = np.clip(x + half, -1, 2 * half).astype(np.int64)
        return np.where(i < 0, 0.0, cdf2[np.maximum(i, 0)])

    n_t = _index(m.threshold, s)
    idx = [_index(v, s) for v in values]
    out = np.empty(len(values) + 1)
    if redraw:
        negs = [float(np.sum(p1 * below(n_t + z - n - 1))) for n in idx]
        alive = 1.0
        for i, pn in enumerate(negs):
            out[i] = alive * (1 - pn)
            alive *= pn
        out[-1] = alive
        return out
    alive = np.ones_like(z)
    for i, n in enumerate(idx):
        neg = below(n_t + z - n - 1)
        out[i] = float(np.sum(p1 * alive * (1 - neg)))
        alive = alive * neg
    out[-1] = float(np.sum(p1 * alive))
    return out


def test_output_law_matches_the_exact_lattice_law() -> None:
    # 2,500 runs (about 1.5 s of exact sampling). Chi-square with 4 degrees of freedom at
    # alpha 1e-6; the broken variant's law is far enough that the companion's expected
    # statistic is above 150 (noncentral chi-square: rejected with probability > 1 - 1e-9).
    m = _mech(sigma_threshold=2.0, sigma_query=2.0, threshold=0.0, max_queries=4)
    values = [-2.0, -1.0, 0.0, 1.0]
    law = _lattice_law(m, values)
    broken = _lattice_law(m, values, redraw=True)
    assert abs(law.sum() - 1) < 1e-12 and abs(broken.sum() - 1) < 1e-12
    n = 2500
    src = _src("law")
    counts = np.zeros(len(values) + 1)
    for _ in range(n):
        out = m.release(values, source=src)
        counts[len(out) - 1 if out[-1] else len(values)] += 1
    assert stats.chisquare(counts, law * n).pvalue > ALPHA
    assert n * float(np.sum((broken - law) ** 2 / law)) > 150
    # companion: the same test rejects samples of the broken variant
    rng = np.random.default_rng(7)
    bad = np.zeros(len(values) + 1)
    for _ in range(n):
        k = len(values)
        for i, v in enumerate(values):
            if v + rng.normal(0, 2.0) >= rng.normal(0, 2.0):
                k = i
                break
        bad[k] += 1
    assert stats.chisquare(bad, law * n).pvalue < ALPHA


# --- the auditor: the correct mechanism within its claim, a broken variant caught ---------------

_PAIR = ((0.0, 0.0, 1.0), (1.0, 1.0, 0.0))


class _StopIndex:
    """One AboveThreshold run's whole output is the index of its positive answer (3 = none)."""

    def __init__(self, m: GaussianSparseVector, broken: bool = False) -> None:
        self.m, self.broken = m, broken

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> np.ndarray:
        assert source is not None
        q = list(x)
        if self.broken:  # no query noise (Lyu, Su and Li 2017, Algorithm 5, Gaussian form)
            rho = gaussian(source, sigma=self.m.sigma_threshold, size=size)
            hit = np.asarray(q)[None, :] >= self.m.threshold + rho[:, None]
            return np.where(hit.any(1), hit.argmax(1), len(q))
        idx = np.empty(size, dtype=np.int64)
        for k in range(size):
            out = self.m.release(q, source=source)
            idx[k] = len(out) - 1 if out and out[-1] else len(q)
        return idx


def _claim(m: GaussianSparseVector) -> Claim:
    acct = RdpAccountant()
    acct.compose(m.event)
    return Claim.approx(epsilon=acct.get_epsilon(1e-3), delta=1e-3)


@pytest.mark.slow
def test_auditor_certifies_the_gaussian_sparse_vector() -> None:
    # 3,000 runs per side (about 4 s of exact sampling) at confidence 1 - 1e-6: the claim is
    # the Renyi accountant's epsilon at delta 1e-3 for k = 3 queries.
    m = _mech(sigma_threshold=2.0, sigma_query=3.0, threshold=0.5, max_queries=3)
    result = audit(
        _StopIndex(m),
        _PAIR,
        samples=3_000,
        claim=_claim(m),
        testers=(HistogramTester(),),
        confidence=1 - ALPHA,
        source=_src("audit-ok"),
    )
    assert not result.violated, result.summary()


def test_auditor_catches_the_variant_without_query_noise() -> None:
    # Companion: the same claim, threshold noise only: (0, 0, 1) answers "index 2" with
    # probability P(0 < T + rho <= 1) > 0.19, its neighbour (1, 1, 0) never (it stops at 0);
    # 50,000 draws (vectorised) put the lower bound near ln(0.19 / 3e-4), far above the claim.
    m = _mech(sigma_threshold=2.0, sigma_query=3.0, threshold=0.5, max_queries=3)
    result = audit(
        _StopIndex(m, broken=True),
        _PAIR,
        samples=50_000,
        claim=_claim(m),
        testers=(HistogramTester(),),
        confidence=1 - ALPHA,
        source=_src("audit-bad"),
    )
    assert result.violated, result.summary()


# --- several runs (c = 2): a fresh threshold after each positive answer ---------------------

_RUNS_PAIR = ((0.0, 0.0, 1.0, 0.0, 0.0, 1.0), (1.0, 1.0, 0.0, 1.0, 1.0, 0.0))


class _Pattern:
    """The whole answer stream, coded in base 3 (0 negative, 1 positive, 2 not asked)."""

    def __init__(self, m: GaussianSparseVector, broken: bool = False) -> None:
        self.m, self.broken = m, broken

    def sample(self, x: Any, size: int, *, source: RandomSource | None = None) -> np.ndarray:
        assert source is not None
        q = np.asarray(x, dtype=np.float64)
        weights = 3 ** np.arange(q.size)
        if self.broken:  # threshold noise only, one threshold for both runs (Algorithm 5)
            rho = gaussian(source, sigma=self.m.sigma_threshold, size=size)
            pos = q[None, :] >= self.m.threshold + rho[:, None]
            before = np.cumsum(pos, 1) - pos
            pattern = np.where(before < self.m.max_positives, pos.astype(np.int64), 2)
            return np.asarray((pattern * weights).sum(1))
        out = np.empty(size, dtype=np.int64)
        for i in range(size):
            answers = [int(a) for a in self.m.release(list(q), source=source)]
            answers += [2] * (q.size - len(answers))
            out[i] = int((np.asarray(answers) * weights).sum())
        return out


@pytest.mark.slow
def test_auditor_certifies_two_runs_and_catches_the_variant_without_query_noise() -> None:
    # The claim: the Renyi accountant's epsilon at delta 1e-3 (2.92) for c = 2 runs over k = 6
    # queries that move by Delta in opposite directions. Seen: honest lower bound 0.0 with
    # 2,000 streams per side (about 6 s of exact sampling); the variant without query noise,
    # 50,000 vectorised draws: 5.0, violated (patterns impossible on one side).
    m = _mech(sigma_threshold=4.0, sigma_query=6.0, threshold=0.5, max_queries=6, max_positives=2)
    claim = _claim(m)
    assert claim.epsilon is not None and 2.5 < claim.epsilon < 3.5

    def run(broken: bool, samples: int) -> Any:
        return audit(
            _Pattern(m, broken),
            _RUNS_PAIR,
            samples=samples,
            claim=claim,
            testers=(HistogramTester(),),
            confidence=1 - ALPHA,
            source=_src(f"runs-{broken}"),
        )

    honest = run(False, 2_000)
    assert not honest.violated, honest.summary()
    broken = run(True, 50_000)
    assert broken.violated, broken.summary()
