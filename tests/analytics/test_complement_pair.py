"""The complementary pair: a pure mean released with a sum of its column as ``A = hi N - S``
and ``B = S - lo N``, one discrete Laplace vector (``dpkit.analytics._pricing.Complement``).

Privacy: the pair's exact values move by at most the calibrated L1 sensitivity on
neighbouring tables (and use all of it when the adversary's rows sit at a bound), and a
black-box audit certifies no more than the claim, with a companion that catches the pair
noised at a third of its scale. Accuracy: the choice against the centred pair follows the
stated objective, and the estimates are exact at a huge epsilon."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _proof import (
    GROUPS,
    audit_pair,
    changed_keys,
    exact_cells,
    neighbours,
    pair_usage,
    seeded_session,
)
from scipy.stats import binom

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.accounting.pure import PureDpAccountant
from dpkit.analytics._pricing import (
    Noise,
    complement_dominates,
    pilot_choice,
    price,
)
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.audit import Claim
from dpkit.events import ComposedEvent, DiscreteLaplaceEvent
from dpkit.noise import RandomSource

EPSILON = 1.0


def _pair_price(
    lower: float,
    upper: float,
    eps: float = 1.0,
    *,
    mode: str = "pure",
    pr: tuple[int, int] = (2, 3),
    sum_too: bool = True,
    **extra: Any,
) -> Any:
    """The pricing of a mean (with a sum of its column unless not ``sum_too``, and ``extra``)
    at ``(max_partitions, max_rows_per_partition) = pr``."""
    stats = {"m": dpa.mean("x", bounds=(lower, upper)), **extra}
    if sum_too:
        stats["s"] = dpa.sum("x", bounds=(lower, upper))
    return price(
        stats,
        mode=mode,  # type: ignore[arg-type]
        epsilon=eps,
        delta=0.0 if mode == "pure" else 1e-6,
        max_partitions=pr[0],
        max_rows_per_partition=pr[1],
        select_partitions=False,
    )


# ------------------------------------------------------------------ when the pair is used


def _objectives(
    lower: float, upper: float, m: float, w_m: float, w_s: float
) -> tuple[float, float]:
    """The docstring's objectives at data mean ``m``, written out independently: the pair's,
    and the centred pair's at its best centre on a fine grid and its best split on a grid of
    fractions (no closed form)."""
    h = (upper - lower) / 2.0
    pair = (w_m * ((upper - m) ** 2 + (m - lower) ** 2) + w_s * (upper**2 + lower**2)) / h**2
    best = math.inf
    for c in np.linspace(lower, upper, 257):
        s = max(c - lower, upper - c)
        for f in np.linspace(0.005, 0.995, 199):  # the count's fraction
            var_t = s * s / (1.0 - f) ** 2
            var_n = 1.0 / f**2
            mean = var_t + (m - c) ** 2 * var_n
            total = var_t + c * c * var_n
            best = min(best, (w_m * mean + w_s * total) / h**2)
    return pair, best


def test_the_pair_wins_at_every_data_mean_for_a_sum_and_mean_of_non_negative_values() -> None:
    assert complement_dominates(0.0, 500_000.0, 1.0, 1.0)
    for m in (0.0, 62_500.0, 250_000.0, 500_000.0):
        pair, centred = _objectives(0.0, 500_000.0, m, 1.0, 1.0)
        assert pair <= centred * (1 + 1e-3)
    # the docstring's figure: at an eighth of the range the pair's objective is 0.65 of the
    # centred one's
    pair, centred = _objectives(0.0, 500_000.0, 62_500.0, 1.0, 1.0)
    assert pair / centred == pytest.approx(0.65, abs=0.01)


def test_symmetric_bounds_and_a_mean_alone_keep_the_centred_pair() -> None:
    # data at the middle of symmetric bounds: the centred pair's objective is half the pair's
    pair, centred = _objectives(-100.0, 100.0, 0.0, 1.0, 1.0)
    assert centred < pair
    assert not complement_dominates(-100.0, 100.0, 1.0, 1.0)
    assert not complement_dominates(0.0, 100.0, 1.0, 0.0)  # no sum: the pair buys nothing


def test_a_pooled_count_or_a_zcdp_session_keeps_the_centred_pair() -> None:
    (m,) = [sp for sp in _pair_price(0.0, 100.0).stats if sp.name == "m"]
    assert m.complement is not None and m.pilot is None
    (m,) = [sp for sp in _pair_price(0.0, 100.0, n=dpa.count("x")).stats if sp.name == "m"]
    assert m.complement is None
    z = _pair_price(0.0, 100.0, mode="zcdp", pr=(1, 1))
    assert all(sp.complement is None for sp in z.stats)


@pytest.mark.parametrize("eps", [1e-3, 1.0, 1e3])
def test_the_pair_is_one_vector_event_within_the_query_epsilon(eps: float) -> None:
    pr = _pair_price(0.0, 100.0, eps)
    (m,) = [sp for sp in pr.stats if sp.name == "m"]
    (s,) = [sp for sp in pr.stats if sp.name == "s"]
    cp = m.complement
    assert cp is not None and s.complement == cp and s.shared_with == "m" and s.events == ()
    (ev,) = pr.events
    assert isinstance(ev, DiscreteLaplaceEvent) and ev == cp.event
    # L1 over the 2 P values a unit moves: P R (hi - lo), in the sum's integer steps
    assert ev.sensitivity == 2 * 3 * (cp.hi - cp.lo)
    assert cp.step == 2.0 ** -m.measures[1].measure.frac_bits
    assert cp.hi - cp.lo == math.floor(100 * 2 ** m.measures[1].measure.frac_bits)
    acc = PureDpAccountant()
    acc.compose(ComposedEvent(events=pr.events))
    assert Fraction(acc.epsilon_exact) <= Fraction(eps)
    assert pr.charged()["epsilon"] <= eps


def test_planned_pairs_use_it_too_when_it_wins_at_their_estimated_bounds() -> None:
    rng = np.random.default_rng(3)
    d = pd.DataFrame({"uid": np.arange(3000), "x": rng.lognormal(3.0, 0.5, 3000)})
    s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=100.0))
    out = (
        s.query()
        .agg(s=dpa.sum("x", bounds="auto"), m=dpa.mean("x", bounds="auto"))
        .run(epsilon=10.0)
    )
    cols = out.attrs["dpkit"]["columns"]
    lo, hi = cols["m"]["bounds"]
    assert 0.0 <= lo < hi
    assert cols["m"]["pair"] == cols["s"]["pair"]
    assert out.attrs["dpkit"]["plan"]["pooled"] == {"s": "m"}
    assert len(s.budget.ledger) == 1


# ------------------------------------------------------------------ exact release


def test_at_a_huge_epsilon_the_mean_and_sum_are_the_clamped_truth() -> None:
    rng = np.random.default_rng(5)
    d = pd.DataFrame(
        {
            "uid": np.arange(4000),
            "g": rng.integers(0, 4, 4000),
            "x": rng.uniform(-20.0, 140.0, 4000),
        }
    )
    s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=1e9))
    q = s.query().group_by("g", keys=[0, 1, 2, 3]).bound(max_partitions=1, max_rows_per_partition=1)
    out = q.agg(t=dpa.sum("x", bounds=(0.0, 100.0)), m=dpa.mean("x", bounds=(0.0, 100.0))).run(
        epsilon=1e8
    )
    clamped = d.assign(x=d["x"].clip(0.0, 100.0)).groupby("g")["x"]
    for _, row in out.iterrows():
        g = int(row["g"])
        assert row["t"] == pytest.approx(clamped.sum()[g], rel=1e-9)
        assert row["m"] == pytest.approx(clamped.mean()[g], rel=1e-9)
        assert row["t_low"] <= row["t"] <= row["t_high"]
        assert row["m_low"] <= row["m"] <= row["m_high"]
        assert row["m_low"] >= 0.0 and row["m_high"] <= 100.0
    info = out.attrs["dpkit"]["columns"]
    assert info["m"]["mechanism"] == "ratio of the complementary pair"
    assert info["t"]["mechanism"] == "post-processing of m's complementary pair"


def test_summarize_shows_one_vector_at_the_pair_s_whole_share() -> None:
    d = pd.DataFrame({"uid": [1.0, 2.0], "g": [0, 1], "x": [1.0, 2.0]})
    s = dpa.Session(d, privacy_unit="uid", budget=Budget(epsilon=10.0))
    q = s.query().group_by("g", keys=[0, 1]).bound(max_partitions=1, max_rows_per_partition=2)
    q = q.agg(m=dpa.mean("x", bounds=(0.0, 500_000.0)), t=dpa.sum("x", bounds=(0.0, 500_000.0)))
    frame = q.summarize(epsilon=1.0)
    assert frame["share"].sum() == pytest.approx(1.0)
    (row,) = frame[frame["aggregate"] == "m"].to_dict("records")
    # scale R (U - L) / epsilon: 2 * 500,000 / 1 (the lattice rounds it up by at most a step)
    assert row["noise_scale"] == pytest.approx(1_000_000.0, rel=1e-9)
    assert row["share"] == pytest.approx(1.0)


# ------------------------------------------------------------------ coverage of the mean

_TRIALS = 2000
# Misses ~ Binomial(2000, p <= 0.05) under a correct interval: P(misses > crit) <= 1e-6.
_CRIT = int(binom.isf(1e-6, _TRIALS, 0.05))


def _mean_misses(shrink: float, n: int, value: float) -> int:
    """Misses of the mean's 95% interval, shrunk about the estimate by ``shrink``, over
    ``_TRIALS`` releases of one group of ``n`` rows of one ``value`` (engine result given
    directly: the exact integers of the count and the fixed-point sum)."""
    from dpkit.analytics._plan import EngineResult
    from dpkit.analytics._release import assemble

    pr = _pair_price(0.0, 100.0, 0.5, pr=(1, 1))
    (m,) = [sp for sp in pr.stats if sp.name == "m"]
    k = m.measures[1].measure.frac_bits
    xi = math.floor(value * 2**k)
    res = EngineResult(
        keys=((),),
        values={m.measures[0].measure.name: (n,), m.measures[1].measure.name: (n * xi,)},
    )
    src = RandomSource(seed=int(value) + n, insecure=True)
    rows = [
        assemble(pr, res, group_by=(), public_keys=None, alpha=0.05, source=src)  # type: ignore[arg-type]
        for _ in range(_TRIALS)
    ]
    out = pd.concat(rows, ignore_index=True)
    truth = xi * 2.0**-k
    e = out["m"].to_numpy()
    lo = e - (e - out["m_low"].to_numpy()) * shrink
    hi = e + (out["m_high"].to_numpy() - e) * shrink
    return int(np.sum((truth < lo) | (truth > hi)))


@pytest.mark.parametrize(("n", "value"), [(40, 12.5), (400, 12.5), (400, 97.0), (4000, 50.0)])
def test_the_mean_interval_covers_at_its_level(n: int, value: float) -> None:
    assert _mean_misses(1.0, n, value) <= _CRIT


def test_the_mean_coverage_test_catches_narrow_intervals() -> None:
    # a quarter of the width misses about 60% of the time (measured when written)
    assert _mean_misses(0.25, 400, 12.5) > _CRIT


# ------------------------------------------------------------------ privacy


def _usage(values: tuple[Any, ...], broken: bool = False) -> float:
    """How much of the pair's calibrated sensitivity the adversary's exact rows use (D' adds
    one unit with 50 rows in each of 7 groups of ``values``); ``broken`` calibrates the pair
    for half the span."""
    d, d_prime = neighbours(values=values)
    return pair_usage(d, d_prime, (0.0, 10.0), half_span=broken)


@pytest.mark.parametrize(
    "values",
    [(1e308,), (-1e308,), (float("inf"), -float("inf"), 7.5), (float("nan"), None, -0.0, 0.0)],
)
def test_the_pair_moves_within_its_sensitivity_on_neighbouring_tables(
    values: tuple[Any, ...],
) -> None:
    used = _usage(values)
    assert used <= 1.0
    if values in ((1e308,), (-1e308,)):  # every kept row at a bound: all of it
        assert used == 1.0


def test_the_sensitivity_check_catches_a_pair_priced_for_half_its_span() -> None:
    assert _usage((1e308,), broken=True) == 2.0


def _tight(third: bool) -> Any:
    """Audit one group's sum and mean at (P, R) = (1, 50), the adversary's 50 rows at the upper
    bound (B moves by R (hi - lo): the whole sensitivity); ``third`` noises the pair at a third
    of its scale while claiming the same epsilon."""
    from dpkit.analytics._plan import Source

    d, d_prime = neighbours(values=(1e308,))
    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", d_prime)
    session = seeded_session(d, engine, Budget(epsilon=100.0))
    q = (
        session.query()
        .group_by("g", keys=[(g,) for g in GROUPS])
        .bound(max_partitions=1, max_rows_per_partition=50)
        .agg(t=dpa.sum("x", bounds=(0.0, 10.0)), m=dpa.mean("x", bounds=(0.0, 10.0)))
    )
    p = q.prepare(epsilon=EPSILON)
    if third:
        stats = []
        for sp in p.pricing.stats:
            cp = sp.complement
            assert cp is not None
            nz = Noise(cp.noise.kind, cp.noise.scale / 3.0)
            stats.append(dataclasses.replace(sp, complement=dataclasses.replace(cp, noise=nz)))
        p = dataclasses.replace(p, pricing=dataclasses.replace(p.pricing, stats=tuple(stats)))
    ra = p.exact(engine, Source(kind="table", location="d"))
    rb = p.exact(engine, Source(kind="table", location="d_prime"))
    changed = changed_keys(ra, rb)
    assert len(changed) == 1
    (m,) = [sp for sp in p.pricing.stats if sp.name == "m"]
    (k,) = changed
    n_name = m.measures[0].measure.name
    assert exact_cells(rb, n_name, k, 1)[0] - exact_cells(ra, n_name, k, 1)[0] == 50
    return audit_pair(p, ra, rb, Claim.pure(epsilon=EPSILON), seed=71)


def test_a_tight_pair_audit_comes_close_to_its_epsilon_without_exceeding_it() -> None:
    res = _tight(third=False)
    print("honest complementary pair:", res.summary())
    assert not res.violated
    assert 0.3 < res.epsilon_lower_bound <= EPSILON


def test_audit_catches_the_pair_noised_at_a_third_of_its_scale() -> None:
    res = _tight(third=True)
    print("broken complementary pair:", res.summary())
    assert res.violated
    assert res.epsilon_lower_bound > EPSILON


def test_pilot_choice_is_untouched_for_a_mean_alone() -> None:
    # a mean alone keeps its pilot (the pair buys nothing without a sum)
    (m,) = _pair_price(0.0, 100.0, pr=(1, 1), sum_too=False).stats
    assert m.complement is None and m.pilot is not None
    assert pilot_choice(m.pilot, 0, 0) is None
