"""Session.run, the one executor: what it charges, what it refuses before the charge, and that
several threads may run queries on one session at once; the Engine seam the session uses."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _pandas_engine import PandasEngine  # tests/analytics is on pythonpath (pyproject)

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import EngineResult, Plan
from dpkit.analytics.engines import Engine, EngineError, as_engine
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.noise import RandomSource


def _frame(n: int = 400, seed: int = 1) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {"uid": np.arange(n), "g": rng.choice(["a", "b"], n), "x": rng.uniform(0.0, 10.0, n)}
    )


def _query(s: dpa.Session) -> dpa.Query:
    return (
        s.query()
        .group_by("g", keys=["a", "b"])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 10)))
    )


def _session(budget: Any, engine: Any = None) -> dpa.Session:
    return dpa.Session(
        _frame(),
        privacy_unit="uid",
        budget=budget,
        engine=engine if engine is not None else "duckdb",
        source_of_randomness=RandomSource(seed=4, insecure=True),
    )


def test_run_charges_the_given_sub_budget_with_the_metadata() -> None:
    total = Budget(epsilon=3.0)
    alice = total.sub_budget("alice", epsilon=1.0)
    s = _session(total)
    out = s.run(_query(s).prepare(epsilon=0.5), budget=alice, metadata={"query_id": "q1"})
    assert list(out["g"]) == ["a", "b"]
    [record] = total.history()
    assert record.analyst == "alice" and dict(record.metadata) == {"query_id": "q1"}
    assert alice.spent[0] == pytest.approx(0.5) and total.spent[0] == pytest.approx(0.5)
    # the sub-budget's cap refuses the next query, and nothing more is spent
    with pytest.raises(BudgetExceededError):
        s.run(_query(s).prepare(epsilon=0.6), budget=alice)
    assert total.spent[0] == pytest.approx(0.5)


def test_run_refuses_a_foreign_query_or_budget_before_the_charge() -> None:
    budget = Budget(epsilon=2.0)
    s, other = _session(budget), _session(Budget(epsilon=2.0))
    with pytest.raises(PrivacyParameterError, match="another session"):
        s.run(_query(other).prepare(epsilon=0.5))
    with pytest.raises(PrivacyParameterError, match="different kind"):
        s.run(_query(s).prepare(epsilon=0.5), budget=Budget(epsilon=2.0, delta=1e-6, method="zcdp"))
    with pytest.raises(PrivacyParameterError, match="prepared query"):
        s.run(_query(s))  # type: ignore[arg-type]
    assert budget.spent == (0.0, 0.0)


def test_two_step_prepared_query_runs_through_the_session_and_charges_once() -> None:
    budget = Budget(epsilon=4.0)
    s = _session(budget)
    q = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(m=dpa.mean("x", bounds="auto"))
    )
    with pytest.raises(PrivacyParameterError, match="auto"):
        q.prepare(epsilon=1.0)
    prepared = q.prepare(epsilon=2.0, two_step=True)
    assert prepared.two_step and prepared.bounds_plan is not None
    with pytest.raises(PrivacyParameterError, match="estimates its bounds first"):
        prepared.exact(s.engine)  # the shape plan is never run
    out = s.run(prepared)
    assert len(budget.ledger) == 1 and budget.spent[0] <= 2.0
    assert out.attrs["dpkit"]["columns"]["m"]["bounds_source"] == "private estimate"


def test_queries_from_several_threads_charge_exactly_and_all_release() -> None:
    # A minimal engine (pandas) has no shared statement state; the session keeps none either.
    budget = Budget(epsilon=100.0)
    s = _session(budget, PandasEngine())
    prepared = [_query(s).prepare(epsilon=0.25) for _ in range(16)]
    results: list[Any] = [None] * len(prepared)
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = s.run(prepared[i])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prepared))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(r is not None and list(r["g"]) == ["a", "b"] for r in results)
    assert len(budget.ledger) == 16 and budget.spent[0] == pytest.approx(4.0)


def test_engines_are_seen_through_the_protocol(tmp_path: Path) -> None:
    s = _session(Budget(epsilon=1.0))
    assert isinstance(s.engine, Engine)
    checked = s.engine.validate(_query(s).prepare(epsilon=0.5).plan)
    assert isinstance(checked.run(), EngineResult)
    # a minimal engine is completed once: it checks nothing and reads no public files
    minimal = PandasEngine()
    completed = as_engine(minimal)
    assert isinstance(completed, Engine) and completed is not minimal
    private = tmp_path / "people.parquet"
    _frame().to_parquet(private)
    ms = dpa.Session(str(private), privacy_unit="uid", budget=Budget(epsilon=1.0), engine=minimal)
    public = tmp_path / "regions.parquet"
    pd.DataFrame({"g": ["a", "b"], "name": ["A", "B"]}).to_parquet(public)
    with pytest.raises(PrivacyParameterError, match="cannot list the files"):
        ms.public_table(str(public))
    assert s.public_table(str(public)).schema == {"g": "VARCHAR", "name": "VARCHAR"}
    with pytest.raises(PrivacyParameterError, match="lacks a execute"):
        as_engine(object())


def test_an_engine_failure_after_the_charge_withholds_its_message() -> None:
    class Failing(PandasEngine):  # type: ignore[misc, valid-type]
        def execute(self, plan: Plan) -> EngineResult:
            raise ValueError("secret value 1234")

    budget = Budget(epsilon=1.0)
    s = _session(budget, Failing())
    with pytest.raises(EngineError) as info:
        s.run(_query(s).prepare(epsilon=0.5))
    assert "1234" not in str(info.value) and info.value.__cause__ is None
    assert budget.spent[0] == pytest.approx(0.5)  # charged before it ran: conservative
