"""Top-k groups in the builder: refusals before any charge, the sensitivity the selection
assumes on neighbouring tables, the stop threshold's delta, and the end-to-end audit.

The neighbouring tables are ``_proof.neighbours()``: D' adds one adversarial privacy unit with
50 rows in each of 7 groups, two of which exist only in D' (a key that appears between
neighbours, the case the stop threshold pays delta for). Contribution bounds P = R = 2.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import mpmath
import numpy as np
import pytest
from _proof import GROUPS, audit_vectors, key_of, neighbours

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import EngineResult, Source
from dpkit.analytics._topk import SCORE_MEASURE, select
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.audit import Claim
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms.selection import SELECTION_SLACK
from dpkit.noise import RandomSource

CONFIDENCE = 1.0 - 1e-6
EPSILON = 1.0
DELTA = 1e-5
P, R = 2, 2
K = 7  # every group may come back: a key only D' has competes with the stop symbol alone
SAMPLES = 1500


def _session(budget: Any, **kw: Any) -> tuple[dpa.Session, DuckDBEngine, Source, Source]:
    d, d_prime = neighbours()
    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", d_prime)
    s = dpa.Session(
        d,
        privacy_unit="uid",
        budget=budget,
        engine=engine,
        source_of_randomness=RandomSource(seed=7, insecure=True),
        **kw,
    )
    return s, engine, Source(kind="table", location="d"), Source(kind="table", location="d_prime")


def _scores(res: EngineResult) -> dict[Any, int]:
    return {k: int(v) for k, v in zip(res.keys, res.values[SCORE_MEASURE], strict=True)}  # type: ignore[call-overload]


# ------------------------------------------------------------------ refusals before a charge


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda q: q.agg(n=dpa.count()).top_k(3), "group_by"),
        (lambda q: q.group_by("g").agg(n=dpa.count(), t=dpa.count()).top_k(3), "exactly one"),
        (lambda q: q.group_by("g").agg(t=dpa.sum("x", bounds=(-1.0, 5.0))).top_k(3), "0 <= lower"),
        (lambda q: q.group_by("g").agg(t=dpa.mean("x", bounds=(0.0, 5.0))).top_k(3), "count"),
        (lambda q: q.group_by("g").agg(t=dpa.sum("x", bounds="auto")).top_k(3), "auto"),
        (lambda q: q.group_by("g").agg(n=dpa.count()).top_k(0), "k"),
        (lambda q: q.group_by("g").agg(n=dpa.count()).top_k(True), "k"),
        (lambda q: q.group_by("g").agg(n=dpa.count()).top_k(float("nan")), "k"),
        (lambda q: q.group_by("g").agg(n=dpa.count()).top_k(3, candidates=2), "candidates"),
        (lambda q: q.group_by("g").agg(n=dpa.count()).top_k(3, selection_share=1.0), "share"),
        (lambda q: q.group_by("g").agg(n=dpa.count()).top_k(3, values="yes"), "values"),
        (lambda q: q.group_by("g").agg(n=dpa.count()).top_k(3).agg(m=dpa.count()), "before"),
    ],
)
def test_bad_top_k_requests_are_refused_when_built(build: Any, match: str) -> None:
    s, *_ = _session(Budget(epsilon=1.0, delta=1e-6))
    with pytest.raises(PrivacyParameterError, match=match):
        build(s.query().bound(max_partitions=P, max_rows_per_partition=R))
    assert s.spent == (0.0, 0.0)


def test_top_k_without_keys_on_a_pure_budget_is_refused_before_any_charge() -> None:
    budget = Budget(epsilon=1.0)
    s, *_ = _session(budget)
    q = s.query().group_by("g").bound(max_partitions=P, max_rows_per_partition=R)
    q = q.agg(n=dpa.count()).top_k(3)
    with pytest.raises(PrivacyParameterError, match="delta > 0"):
        q.run(epsilon=0.5)
    assert budget.spent == (0.0, 0.0) and budget.history() == []
    # with public keys it is pure: charged exactly its epsilon
    q = s.query().group_by("g", keys=list(GROUPS)).bound(max_partitions=P, max_rows_per_partition=R)
    out = q.agg(n=dpa.count()).top_k(3).run(epsilon=0.5)
    assert len(out) == 3 and budget.spent[0] <= 0.5 and budget.spent[1] == 0.0


def test_a_refused_charge_reads_no_data_and_spends_nothing() -> None:
    budget = Budget(epsilon=1.0, delta=1e-6)
    s, *_ = _session(budget)
    q = s.query().group_by("g").bound(max_partitions=P, max_rows_per_partition=R)
    q = q.agg(n=dpa.count()).top_k(3)
    from dpkit.errors import BudgetExceededError

    with pytest.raises(BudgetExceededError):
        q.run(epsilon=2.0, delta=1e-7)
    assert budget.history() == []


def test_the_budget_is_charged_once_for_the_selection_and_the_values() -> None:
    budget = Budget(epsilon=5.0, delta=1e-5)
    s, *_ = _session(budget)
    q = s.query().group_by("g").bound(max_partitions=P, max_rows_per_partition=R)
    out = q.agg(n=dpa.count()).top_k(3).run(epsilon=1.0, delta=1e-6)
    assert [r.metadata for r in budget.history()] == [{}]  # one charge
    eps, dl = budget.spent
    assert eps <= 1.0 and 0.0 < dl <= 1e-6
    assert list(out.columns) == ["g", "n", "n_low", "n_high"] and len(out) <= 3
    info = out.attrs["dpkit"]["top_k"]
    assert info["k"] == 3 and info["returned"] == len(out)


# ------------------------------------------------------------------ the sensitivity assumed


def _prepared_with_new_key(
    budget: Any, k: int = K, values: bool = True
) -> tuple[Any, DuckDBEngine, EngineResult, EngineResult]:
    """A prepared top-k query and its exact results on D and D', with a salt under which the
    adversary keeps a group that D does not have."""
    s, engine, d, d_prime = _session(budget)
    q = s.query().group_by("g").bound(max_partitions=P, max_rows_per_partition=R)
    q = q.agg(n=dpa.count()).top_k(k, values=values)
    for _ in range(64):
        p = q.prepare(epsilon=EPSILON, delta=DELTA)
        ra, rb = p.exact(engine, d), p.exact(engine, d_prime)
        if set(_scores(rb)) - set(_scores(ra)):
            return p, engine, ra, rb
    raise AssertionError("no salt kept a new group of the adversary")  # pragma: no cover


def test_the_adversary_raises_at_most_p_scores_by_at_most_r_and_lowers_none() -> None:
    p, _, ra, rb = _prepared_with_new_key(Budget(epsilon=10.0, delta=1e-3))
    a, b = _scores(ra), _scores(rb)
    diffs = {g: b.get(g, 0) - a.get(g, 0) for g in set(a) | set(b)}
    assert all(d >= 0 for d in diffs.values())  # monotone
    assert 1 <= sum(d > 0 for d in diffs.values()) <= P
    assert max(diffs.values()) <= p.pricing.top_k.sensitivity == R
    assert set(b) - set(a)  # a key that appears between neighbours


def test_stop_gap_keeps_a_new_key_below_delta_mpmath() -> None:
    """``(1 + e^eps) m P[G_g - G_bot > tau]`` (a logistic tail at the Gumbel scale the
    mechanism really uses, from its gain) is at most the selection's delta."""
    p, *_ = _prepared_with_new_key(Budget(epsilon=10.0, delta=1e-3))
    top = p.pricing.top_k
    mech = top.mechanism
    # the mechanism's gain g (scores are scaled by g / sensitivity): Gumbel scale = sens / g
    eps_cal = mech.epsilon * (1 - 2.0**-40)
    gain = (eps_cal - 2 * mech.k * SELECTION_SLACK) / mech.k
    with mpmath.workdps(40):
        beta = mpmath.mpf(top.sensitivity) / mpmath.mpf(gain)
        tail = 1 / (1 + mpmath.exp(mpmath.mpf(top.gap) / beta))
        m = min(P, top.candidates or P)
        bound = (1 + mpmath.exp(top.epsilon)) * m * tail * mpmath.exp(mech.k * SELECTION_SLACK)
        assert bound <= top.delta
        assert bound > top.delta / 2  # and not wastefully large
    assert top.delta == DELTA / 2  # values take the other half in a basic session


# ------------------------------------------------------------------ end-to-end audit


def _vectors(
    prepared: Any, result: EngineResult, src: RandomSource, keys: list[Any], direct: bool
) -> np.ndarray:
    """Per release, for each key: [rank (0 = not released), noisy value (-1 if none)].

    ``direct``: draw the ranked keys with :func:`dpkit.analytics._topk.select`, the function
    ``release_from`` calls, without building a frame (for a query with ``values=False``, whose
    release is exactly those keys; about 6 times faster)."""
    out = np.zeros((SAMPLES, len(keys), 2))
    out[:, :, 1] = -1.0
    pos = {k: i for i, k in enumerate(keys)}
    for i in range(SAMPLES):
        if direct:
            chosen = select(prepared.pricing.top_k, result, prepared.public_keys, src)
            for rank, key in enumerate(chosen, start=1):
                out[i, pos[key], 0] = rank
            continue
        frame = prepared.release_from(result, source=src)
        values = frame["n"].to_numpy(dtype=np.float64) if "n" in frame else None
        for rank, key in enumerate(key_of(frame, ("g",)), start=1):
            out[i, pos[key], 0] = rank
            if values is not None:
                out[i, pos[key], 1] = values[rank - 1]
    return out.reshape(SAMPLES, -1)


def _audit(
    prepared: Any, ra: EngineResult, rb: EngineResult, seed: int, direct: bool = False
) -> Any:
    src = RandomSource(seed=seed, insecure=True)
    keys = sorted(set(ra.keys) | set(rb.keys), key=repr)
    va = _vectors(prepared, ra, src, keys, direct)
    vb = _vectors(prepared, rb, src, keys, direct)
    claim = Claim.approx(epsilon=EPSILON, delta=DELTA)
    return audit_vectors(va, vb, claim, src, SAMPLES, CONFIDENCE)


@pytest.mark.slow
def test_top_k_without_keys_never_exceeds_its_epsilon_delta() -> None:
    p, _, ra, rb = _prepared_with_new_key(Budget(epsilon=10.0, delta=1e-3, method="basic"))
    res = _audit(p, ra, rb, seed=31)  # through release_from: selection and values
    print("honest top-k:", res.summary())
    assert not res.violated
    assert res.epsilon_lower_bound <= EPSILON


@pytest.mark.slow
def test_audit_catches_a_stop_threshold_without_its_gap() -> None:
    """The broken variant ranks against the (kbar+1)-th score itself (tau = 0): the key only D'
    has (score 2 against a stop score of 0, Gumbel scale 2 k R / eps = 28) comes back before
    the stop symbol with probability about 0.5 on D' and never on D. Power: with 750
    evaluation releases per table the Clopper-Pearson lower bound of that rate at level
    1 - 2.5e-7 is about 0.5 - 5.0 sqrt(0.25 / 750) = 0.41, far above delta = 1e-5, so the
    claim is certified violated (seen: alpha = 0, beta = 0.48)."""
    p, _, ra, rb = _prepared_with_new_key(
        Budget(epsilon=10.0, delta=1e-3, method="basic"), values=False
    )
    broken_top = dataclasses.replace(p.pricing.top_k, gap=0)
    broken = dataclasses.replace(p, pricing=dataclasses.replace(p.pricing, top_k=broken_top))
    # with values=False the release is exactly the selected keys: drawn directly
    one = broken.release_from(rb, source=RandomSource(seed=1, insecure=True))
    assert key_of(one, ("g",)) == select(broken_top, rb, None, RandomSource(seed=1, insecure=True))
    res = _audit(broken, ra, rb, seed=32, direct=True)
    print("broken top-k:", res.summary())
    assert res.violated


def test_released_groups_exist_in_the_data_and_come_best_first() -> None:
    budget = Budget(epsilon=100.0, delta=1e-3)
    s, engine, d, _ = _session(budget)
    q = s.query().group_by("g").bound(max_partitions=P, max_rows_per_partition=R)
    p = q.agg(n=dpa.count()).top_k(2, values=False).prepare(epsilon=60.0, delta=1e-4)
    ra = p.exact(engine, d)
    truth = sorted(_scores(ra).items(), key=lambda kv: -kv[1])
    src = RandomSource(seed=3, insecure=True)
    got = [tuple(key_of(p.release_from(ra, source=src), ("g",))) for _ in range(20)]
    assert all(set(g) <= set(_scores(ra)) for g in got)
    # at epsilon 60 the Gumbel scale is k R / 60 = 0.07 rows: the true top 2, in order
    assert truth[1][1] > truth[2][1]
    assert all(g == (truth[0][0], truth[1][0]) for g in got)
    assert math.isfinite(budget.spent[0])


# ------------------------------------------------------------------ SQL and summaries


@pytest.mark.parametrize(
    ("text", "k"),
    [
        ("SELECT g, COUNT(*) FROM t GROUP BY g ORDER BY COUNT(*) DESC LIMIT 3", 3),
        ("SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 2", 2),
        ("SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC, g LIMIT 2 OFFSET 1", 3),
        ("SELECT g, SUM(x) AS s FROM t GROUP BY g ORDER BY s DESC LIMIT 2", 2),
        ("SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC", None),
        ("SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n ASC LIMIT 2", None),
        (
            "SELECT g, COUNT(*) AS n FROM t GROUP BY g HAVING COUNT(*) > 3 ORDER BY n DESC LIMIT 2",
            None,
        ),
        ("SELECT g, COUNT(*) AS n, SUM(x) AS s FROM t GROUP BY g ORDER BY n DESC LIMIT 2", None),
        ("SELECT g, AVG(x) AS m FROM t GROUP BY g ORDER BY m DESC LIMIT 2", None),
        ("SELECT COUNT(*) AS n FROM t ORDER BY n DESC LIMIT 1", None),
        # above the selection's largest k: a full release, post-processed (it was refused)
        ("SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 100000000", None),
        ("SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 1048576", 1 << 20),
    ],
)
def test_sql_order_by_the_aggregate_desc_limit_compiles_to_top_k(text: str, k: int | None) -> None:
    s, *_ = _session(Budget(epsilon=1.0, delta=1e-6))
    sq = s.sql_query(text, max_partitions=P, max_rows_per_partition=R, bounds={"x": (0.0, 10.0)})
    top = sq.query.top
    assert (top.k if top is not None else None) == k


def test_sql_top_k_charges_once_and_not_for_every_group() -> None:
    budget = Budget(epsilon=10.0, delta=1e-5)
    s, *_ = _session(budget)
    text = "SELECT g, COUNT(*) AS n FROM t GROUP BY g ORDER BY n DESC LIMIT 2"
    sq = s.sql_query(text, max_partitions=P, max_rows_per_partition=R)
    pricing = sq.prepare(epsilon=4.0, delta=1e-6).pricing
    assert pricing.selection is None  # no partition selection over every key
    assert pricing.top_k is not None and pricing.top_k.k == 2
    # the values are noised for min(P, k) = 2 groups per unit, not for every group
    assert pricing.stats[0].measures[0].l1 == min(P, 2) * R
    out = s.sql(text, epsilon=4.0, delta=1e-6, max_partitions=P, max_rows_per_partition=R)
    assert len(out) <= 2 and list(out.columns) == ["g", "n", "n_low", "n_high"]
    assert list(out["n"]) == sorted(out["n"], reverse=True)  # ORDER BY on the released values
    assert [r.count for r in budget.history()] == [1]
    assert budget.spent[0] <= 4.0 and budget.spent[1] <= 1e-6


def test_summarize_shows_the_ranking_and_the_values_shares() -> None:
    s, *_ = _session(Budget(epsilon=1.0, delta=1e-6))
    q = s.query().group_by("g").bound(max_partitions=P, max_rows_per_partition=R)
    frame = q.agg(n=dpa.count()).top_k(3, selection_share=0.25).summarize(epsilon=1.0, delta=1e-7)
    assert list(frame["measure"]) == ["top-3 ranking", "rows"]
    assert frame["share"].sum() == pytest.approx(1.0)
    assert frame["share"].iloc[0] == pytest.approx(0.25)
    assert frame["noise_scale"].iloc[0] == pytest.approx(3 * R / 0.25)  # k R / epsilon_sel
