"""Threshold alerts (sparse vector over a session's queries): refusals before any charge, the
ledger record that keeps a restarted process from resuming a stream, and the end-to-end audit
of the answers on neighbouring tables (``_proof.neighbours``: one unit with 50 rows in each of
7 groups)."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from _proof import GROUPS, neighbours

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Bound, Source
from dpkit.analytics.alerts import alert_values, prepare_for_alert
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.audit import Claim, audit
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.ledger import SqliteLedger
from dpkit.mechanisms import NumericSparseVector
from dpkit.noise import RandomSource

CONFIDENCE = 1.0 - 1e-6
EPSILON = 1.0
P, R = 2, 2
SAMPLES = 4000


def _session(budget: Any) -> tuple[dpa.Session, DuckDBEngine, Source, Source]:
    d, d_prime = neighbours()
    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", d_prime)
    s = dpa.Session(
        d,
        privacy_unit="uid",
        budget=budget,
        engine=engine,
        source_of_randomness=RandomSource(seed=5, insecure=True),
    )
    return s, engine, Source(kind="table", location="d"), Source(kind="table", location="d_prime")


def _count_query(s: dpa.Session, keys: Any = GROUPS, p: int = P) -> Any:
    q = s.query()
    if keys is not None:
        q = q.group_by("g", keys=list(keys))
    return q.bound(max_partitions=p, max_rows_per_partition=R).agg(n=dpa.count())


# ------------------------------------------------------------------ refusals before a charge


@pytest.mark.parametrize(
    ("make", "kw", "match"),
    [
        (
            lambda s: (
                s.query()
                .group_by("g")
                .bound(max_partitions=P, max_rows_per_partition=R)
                .agg(n=dpa.count())
            ),
            {},
            "public keys",
        ),
        (lambda s: _count_query(s).agg(m=dpa.count()), {}, "exactly one"),
        (
            lambda s: (
                s.query()
                .bound(max_partitions=1, max_rows_per_partition=R)
                .agg(m=dpa.mean("x", bounds=(0.0, 1.0)))
            ),
            {},
            "count",
        ),
        (
            lambda s: (
                s.query()
                .bound(max_partitions=1, max_rows_per_partition=R)
                .agg(t=dpa.sum("x", bounds=(-1.0, 1.0)))
            ),
            {},
            "0 <= lower",
        ),
        (lambda s: _count_query(s), {"epsilon": float("nan")}, "epsilon"),
        (lambda s: _count_query(s), {"epsilon": -1.0}, "epsilon"),
        (lambda s: _count_query(s), {"epsilon": True}, "epsilon"),
        (lambda s: _count_query(s), {"threshold": float("inf")}, "threshold"),
        (lambda s: _count_query(s), {"max_alerts": 0}, "max_positives"),
        (lambda s: _count_query(s), {"name": ""}, "name"),
        (lambda s: _count_query(s).where("no_such_column > 1"), {}, "no_such_column"),
    ],
)
def test_bad_alerts_are_refused_before_any_charge(
    make: Any, kw: dict[str, Any], match: str
) -> None:
    budget = Budget(epsilon=5.0)
    s, *_ = _session(budget)
    args: dict[str, Any] = {"name": "a", "threshold": 10.0, "epsilon": 1.0, **kw}
    name = args.pop("name")
    with pytest.raises(Exception, match=match) as info:
        s.alert(name, make(s), **args)
    assert isinstance(info.value, (PrivacyParameterError, ValueError))
    assert budget.history() == []


def test_a_query_of_another_session_is_refused() -> None:
    s, *_ = _session(Budget(epsilon=5.0))
    other, *_ = _session(Budget(epsilon=5.0))
    with pytest.raises(PrivacyParameterError, match="this session"):
        s.alert("a", _count_query(other), threshold=1.0, epsilon=1.0)


# ------------------------------------------------------------------ charging and the ledger


def test_one_charge_then_free_checks_until_the_last_alert(tmp_path: Path) -> None:
    budget = Budget(epsilon=5.0, ledger=SqliteLedger(str(tmp_path / "ledger.db")), name="b")
    s, *_ = _session(budget)
    alert = s.alert("low", _count_query(s, keys=None, p=1), threshold=-50.0, epsilon=1.0)
    assert budget.spent[0] <= 1.0
    spent = budget.spent
    assert alert.check(where="x > 1") is True  # far above a threshold of -50: an alert
    assert alert.halted and budget.spent == spent
    with pytest.raises(BudgetExceededError, match="stopped"):
        alert.check(where="x > 2")
    records = budget.history()
    assert [r.count for r in records] == [1, 0]  # the opening charge, one check, no more
    assert records[1].metadata == {"alert": "low", "check": 1, "label": "x > 1", "answers": [True]}


def test_a_restarted_process_cannot_resume_or_replay_an_alert(tmp_path: Path) -> None:
    path = str(tmp_path / "ledger.db")
    budget = Budget(epsilon=5.0, ledger=SqliteLedger(path), name="b")
    s, *_ = _session(budget)
    alert = s.alert("daily", _count_query(s), threshold=1e6, epsilon=1.0, max_alerts=2)
    first = alert.check(where="x > 1", label="day 1")
    assert set(first) == {g for g in GROUPS} and not any(first.values())
    # "restart": a new process opens the same ledger and a new session
    reopened = Budget.open(SqliteLedger(path), name="b")
    s2, *_ = _session(reopened)
    before = reopened.spent
    with pytest.raises(PrivacyParameterError, match="cannot be resumed"):
        s2.alert("daily", _count_query(s2), threshold=1e6, epsilon=1.0, max_alerts=2)
    assert reopened.spent == before and len(reopened.history()) == 2
    log = s2.alert_log("daily")
    assert [(e["check"], e["label"]) for e in log] == [(1, "day 1")]
    assert log[0]["answers"] == [False] * len(GROUPS)
    # under a new name it is a new stream, charged again
    s2.alert("daily-2", _count_query(s2), threshold=1e6, epsilon=1.0)
    assert reopened.spent[0] > before[0]


def test_an_alert_cannot_be_copied_or_pickled() -> None:
    s, *_ = _session(Budget(epsilon=5.0))
    alert = s.alert("a", _count_query(s), threshold=1.0, epsilon=1.0)
    for f in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(PrivacyParameterError, match="copied"):
            f(alert)


def test_sum_alert_answers_on_the_sum_in_its_units() -> None:
    s, *_ = _session(Budget(epsilon=100.0))
    q = s.query().bound(max_partitions=1, max_rows_per_partition=R)
    q = q.agg(t=dpa.sum("x", bounds=(0.0, 10.0)))
    exact = alert_values(prepare_for_alert(q), prepare_for_alert(q).exact(s.engine))[1][0]
    assert exact > 10.0
    high = s.alert("hi", q, threshold=exact + 200.0, epsilon=40.0)  # noise scale below 20
    low = s.alert("lo", q, threshold=exact - 200.0, epsilon=40.0)
    assert high.mechanism.sensitivity == R * 10.0
    assert high.check() is False and low.check() is True


def test_numeric_alert_answers_the_noisy_value_for_the_same_epsilon(tmp_path: Path) -> None:
    budget = Budget(epsilon=100.0, ledger=SqliteLedger(str(tmp_path / "l.db")), name="b")
    s, *_ = _session(budget)
    q = s.query().bound(max_partitions=1, max_rows_per_partition=R)
    q = q.agg(t=dpa.sum("x", bounds=(0.0, 10.0)))
    exact = alert_values(prepare_for_alert(q), prepare_for_alert(q).exact(s.engine))[1][0]
    alert = s.alert("v", q, threshold=exact - 300.0, epsilon=40.0, max_alerts=2, values=True)
    m = alert.mechanism
    assert isinstance(m, NumericSparseVector) and m.numeric_epsilon == 20.0
    # the values: Laplace of scale c Delta / eps3 = 2 * 20 / 20 = 2 (plus the lattice)
    assert m.numeric_scale == pytest.approx(2.0, rel=1e-3)
    assert budget.spent[0] <= 40.0
    got = alert.check()
    assert isinstance(got, float) and abs(got - exact) < 60.0  # 30 scales: P < 1e-13
    records = budget.history()
    assert records[0].metadata["values"] is True and records[-1].metadata["answers"] == [got]
    assert budget.spent[0] <= 40.0  # checks are free
    with pytest.raises(PrivacyParameterError, match="values"):
        s.alert("w", q, threshold=0.0, epsilon=1.0, values=1)  # type: ignore[arg-type]
    with pytest.raises(PrivacyParameterError, match="numeric_share"):
        s.alert("w", q, threshold=0.0, epsilon=1.0, values=True, numeric_share=1.0)
    assert len(budget.history()) == 2  # refused before any charge


# ------------------------------------------------------------------ end-to-end audit


def _exact_pair(bound: Bound | None = None) -> tuple[Any, list[float], list[float]]:
    s, engine, d, d_prime = _session(Budget(epsilon=10.0))
    q = _count_query(s)
    alert = s.alert("audit", q, threshold=0.0, epsilon=EPSILON)
    p = prepare_for_alert(q)
    if bound is not None:
        p = dataclasses.replace(p, plan=dataclasses.replace(p.plan, bound=bound))
    va = alert_values(p, p.exact(engine, d))[1]
    vb = alert_values(p, p.exact(engine, d_prime))[1]
    return alert.mechanism, va, vb


def _run_audit(mech_at: Any, va: list[float], vb: list[float], seed: int) -> Any:
    src = RandomSource(seed=seed, insecure=True)
    width = len(va)

    def mechanism(x: str, size: int) -> np.ndarray:
        values = va if x == "D" else vb
        out = np.full((size, width), -1.0)
        for i in range(size):
            answers = mech_at.release(values, source=src)
            out[i, : len(answers)] = answers
        return out

    return audit(
        mechanism,
        ("D", "D'"),
        samples=SAMPLES,
        claim=Claim.pure(epsilon=EPSILON),
        confidence=CONFIDENCE,
        vectorized=True,
        source=src,
    )


def _at_threshold(mech: Any, values: list[float]) -> Any:
    """The alert's mechanism with its threshold at the D' value of the group the adversary
    raised most (where the answers are the most uncertain)."""
    return dataclasses.replace(mech, threshold=float(values[0]))


@pytest.mark.slow
def test_alert_answers_never_exceed_their_epsilon_on_neighbouring_tables() -> None:
    mech, va, vb = _exact_pair()
    diffs = [b - a for a, b in zip(va, vb, strict=True)]
    assert all(0 <= x <= mech.sensitivity for x in diffs)  # monotone, at most R per check
    assert sum(x > 0 for x in diffs) <= P
    j = int(np.argmax(diffs))
    at = dataclasses.replace(mech, threshold=float(vb[j]))
    res = _run_audit(at, [va[j]], [vb[j]], seed=41)
    print("honest alert:", res.summary())
    assert not res.violated


@pytest.mark.slow
def test_audit_catches_an_alert_whose_query_is_not_bounded() -> None:
    """The engine keeps all 50 of the adversary's rows per group while the stream's noise is
    calibrated for R = 2: one check moves by 50 against query noise of scale about 2 R / 0.6.
    Power: the threshold set at the D' count, a positive answer has probability about 1/2 on
    D' and e^(-48/3.3) on D; with 2,000 evaluation draws the rate on D has an upper bound
    near 0.008 at level 1 - 2.5e-7 and on D' a lower bound near 0.44: the audit certifies
    about ln(55) = 4 > 1 (seen: 5.8 with 20,000 draws)."""
    unbounded = Bound(
        privacy_unit="uid", max_partitions=1 << 20, max_rows_per_partition=1 << 20, salt=1
    )
    mech, va, vb = _exact_pair(unbounded)
    diffs = [b - a for a, b in zip(va, vb, strict=True)]
    j = int(np.argmax(diffs))
    assert diffs[j] == 50
    at = dataclasses.replace(mech, threshold=float(vb[j]))
    res = _run_audit(at, [va[j]], [vb[j]], seed=42)
    print("broken alert:", res.summary())
    assert res.violated


@pytest.mark.slow
def test_numeric_alert_stays_within_epsilon_and_the_same_audit_catches_an_unbounded_query() -> None:
    """The numeric alert (values=True) on the group the adversary raised most, threshold at
    its D' value: certified within epsilon on the neighbouring tables. Companion: the same
    audit with the engine keeping all 50 of the adversary's rows (noise calibrated for R = 2)
    is reported violated: the released value moves by 50 against a Laplace scale of 4."""

    def at(bound: Bound | None) -> tuple[NumericSparseVector, float, float]:
        mech, va, vb = _exact_pair(bound)
        j = int(np.argmax([b - a for a, b in zip(va, vb, strict=True)]))
        numeric = NumericSparseVector(
            epsilon=EPSILON, sensitivity=mech.sensitivity, threshold=vb[j], monotonic=True
        )
        return numeric, va[j], vb[j]

    numeric, a, b = at(None)
    res = _run_audit(numeric, [a], [b], seed=43)
    print("honest numeric alert:", res.summary())
    assert not res.violated
    unbounded = Bound(
        privacy_unit="uid", max_partitions=1 << 20, max_rows_per_partition=1 << 20, salt=1
    )
    numeric, a, b = at(unbounded)
    assert b - a == 50
    res = _run_audit(numeric, [a], [b], seed=44)
    print("unbounded numeric alert:", res.summary())
    assert res.violated
