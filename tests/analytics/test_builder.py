"""The query builder: validation before any charge, summarize, refusals, result shape, keys."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _pandas_engine import PandasEngine

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import EngineResult, Plan
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.noise import RandomSource


def _people(n: int = 600, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "uid": rng.integers(0, n // 3, n),
            "region": rng.choice(["north", "south", "east"], n),
            "age": rng.integers(0, 100, n).astype(float),
            "income": rng.uniform(0, 1e5, n),
        }
    )


def _session(
    budget: Any = None, engine: Any = None, unit: str | None = "uid", df: pd.DataFrame | None = None
) -> Any:
    return dpa.Session(
        df if df is not None else _people(),
        privacy_unit=unit,
        budget=budget if budget is not None else Budget(epsilon=5.0),
        engine=engine if engine is not None else PandasEngine(),
        source_of_randomness=RandomSource(seed=11, insecure=True),
    )


def _query(s: Any) -> Any:
    return (
        s.query()
        .group_by("region", keys=["north", "south", "east", "west"])
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(n=dpa.count(), income=dpa.mean("income", bounds=(0, 1e5)))
    )


BAD_REALS = [math.nan, math.inf, -1.0, 0.0, True, "1", None, [1.0]]


@pytest.mark.parametrize("eps", BAD_REALS)
def test_bad_epsilon_refused_before_anything(eps: Any) -> None:
    eng = PandasEngine()
    budget = Budget(epsilon=5.0)
    q = _query(_session(budget, eng))
    with pytest.raises(PrivacyParameterError):
        q.run(epsilon=eps)
    with pytest.raises(PrivacyParameterError):
        q.summarize(epsilon=eps)
    assert budget.spent == (0.0, 0.0)
    assert eng.executed == 0


@pytest.mark.parametrize("delta", [math.nan, -1e-9, 1.0, 2.0, "0", True])
def test_bad_delta_refused(delta: Any) -> None:
    budget = Budget(epsilon=5.0, delta=1e-5)
    eng = PandasEngine()
    q = _query(_session(budget, eng))
    with pytest.raises(PrivacyParameterError):
        q.run(epsilon=1.0, delta=delta)
    assert budget.spent == (0.0, 0.0) and eng.executed == 0


def test_pure_session_refuses_delta_and_gaussian_session_needs_delta() -> None:
    with pytest.raises(PrivacyParameterError, match="pure"):
        _query(_session()).run(epsilon=1.0, delta=1e-6)
    s = _session(Budget(epsilon=5.0, delta=1e-5, method="zcdp"))
    with pytest.raises(PrivacyParameterError, match="delta"):
        _query(s).run(epsilon=1.0)


@pytest.mark.parametrize(
    "kw",
    [
        {"max_partitions": 0, "max_rows_per_partition": 1},
        {"max_partitions": 1, "max_rows_per_partition": 0},
        {"max_partitions": 1.5, "max_rows_per_partition": 1},
        {"max_partitions": True, "max_rows_per_partition": 1},
        {"max_partitions": 1, "max_rows_per_partition": math.nan},
        {"max_partitions": -3, "max_rows_per_partition": 2},
    ],
)
def test_bad_contribution_bounds(kw: dict[str, Any]) -> None:
    with pytest.raises(PrivacyParameterError):
        _session().query().bound(**kw)


def test_missing_bound_is_planned_privately_not_a_silent_default() -> None:
    q = _session().query().group_by("region", keys=["north"]).agg(n=dpa.count())
    assert q.plans_contributions
    frame = q.summarize(epsilon=1.0)
    assert frame["aggregate"].iloc[0] == "(plan)"  # the planning step is shown and priced
    with pytest.raises(PrivacyParameterError, match="bound"):
        q.prepare(epsilon=1.0)  # a hand release needs bounds


def test_no_privacy_unit_means_bounds_of_one() -> None:
    s = _session(unit=None)
    with pytest.raises(PrivacyParameterError, match="privacy unit"):
        s.query().bound(max_partitions=2, max_rows_per_partition=1)
    q = s.query().group_by("region", keys=["north"]).agg(n=dpa.count())
    summary = q.summarize(epsilon=1.0)
    # count sensitivity 1 at epsilon 1 (plus the fast sampler's tiny slack): scale ~1
    assert 1.0 <= summary["noise_scale"].iloc[0] < 1.0 + 1e-5


@pytest.mark.parametrize(
    "bounds",
    [
        (math.nan, 1.0),
        (0.0, math.inf),
        (2.0, 1.0),
        (1.0, 1.0),
        ("0", 1),
        (0, 2.0**51),
        None,
        (0,),
        "zero",
    ],
)
def test_bad_value_bounds(bounds: Any) -> None:
    """Refused when the aggregate is made, or (missing bounds, which a derived column may
    supply) when it joins a query on a column: before anything is charged."""
    q = _session().query().bound(max_partitions=1, max_rows_per_partition=1)
    with pytest.raises(PrivacyParameterError):
        q.agg(m=dpa.mean("income", bounds=bounds))


def test_other_aggregate_validation() -> None:
    with pytest.raises(PrivacyParameterError):
        dpa.count(weight=0.0)
    with pytest.raises(PrivacyParameterError):
        dpa.count(weight=math.nan)
    with pytest.raises(PrivacyParameterError):
        dpa.quantile("age", [0.5, 1.5], bounds=(0, 1))
    with pytest.raises(PrivacyParameterError):
        dpa.quantile("age", [], bounds=(0, 1))
    with pytest.raises(PrivacyParameterError):
        dpa.histogram("age", edges=[0, 0, 1])
    with pytest.raises(PrivacyParameterError):
        dpa.histogram("age", edges=[0, math.inf])
    with pytest.raises(PrivacyParameterError):
        dpa.histogram("age")
    with pytest.raises(PrivacyParameterError):
        dpa.histogram("age", categories=["a", "a"])
    with pytest.raises(PrivacyParameterError):
        dpa.sum(3, bounds=(0, 1))  # type: ignore[arg-type]


def test_unknown_columns_are_clear_errors() -> None:
    s = _session()
    with pytest.raises(PrivacyParameterError, match="unknown group-by column 'regon'"):
        s.query().group_by("regon")
    with pytest.raises(PrivacyParameterError, match="unknown column of x 'incme'"):
        s.query().agg(x=dpa.mean("incme", bounds=(0, 1)))
    with pytest.raises(PrivacyParameterError, match="privacy_unit"):
        dpa.Session(
            _people(), privacy_unit="user", budget=Budget(epsilon=1.0), engine=PandasEngine()
        )


def test_session_validation() -> None:
    for alpha in (0.0, 1.0, math.nan, 0.7, "0.05"):
        with pytest.raises(PrivacyParameterError):
            dpa.Session(
                _people(),
                privacy_unit="uid",
                budget=Budget(epsilon=1.0),
                engine=PandasEngine(),
                alpha=alpha,
            )
    with pytest.raises(PrivacyParameterError, match="budget"):
        dpa.Session(_people(), privacy_unit="uid", budget=1.0, engine=PandasEngine())
    with pytest.raises(PrivacyParameterError, match="method"):
        dpa.Session(
            _people(),
            privacy_unit="uid",
            budget=Budget(epsilon=1.0, delta=1e-6, method="rdp"),
            engine=PandasEngine(),
        )
    with pytest.raises(PrivacyParameterError, match="source"):
        dpa.Session(42, privacy_unit=None, budget=Budget(epsilon=1.0), engine=PandasEngine())
    with pytest.raises(PrivacyParameterError, match="format"):
        dpa.Session(
            "people.xlsx", privacy_unit=None, budget=Budget(epsilon=1.0), engine=PandasEngine()
        )
    with pytest.raises(FileNotFoundError):
        dpa.Session(
            "/nonexistent/people.parquet",
            privacy_unit=None,
            budget=Budget(epsilon=1.0),
            engine=PandasEngine(),
        )


def test_summarize_touches_no_data_and_charges_nothing() -> None:
    eng = PandasEngine()
    budget = Budget(epsilon=5.0)
    q = _query(_session(budget, eng))
    out = q.summarize(epsilon=1.0)
    assert eng.executed == 0
    assert budget.spent == (0.0, 0.0)
    assert set(out["aggregate"]) == {"n", "income"}
    # count: sensitivity P R = 2, epsilon share 1/2 -> scale 4 (up to the sampler's slack)
    row = out[out["measure"] == "rows"].iloc[0]
    assert 4.0 <= row["noise_scale"] < 4.0 * (1 + 1e-5)
    assert row["ci_halfwidth"] > 0


def test_refused_query_spends_nothing_and_says_what_it_would_cost() -> None:
    eng = PandasEngine()
    budget = Budget(epsilon=1.0)
    q = _query(_session(budget, eng))
    q.run(epsilon=0.75)
    spent = budget.spent
    with pytest.raises(
        BudgetExceededError, match=r"^This query needs epsilon 0\.5 but only epsilon 0\.25 is left"
    ):
        q.run(epsilon=0.5)
    assert budget.spent == spent
    assert eng.executed == 1


def test_budget_is_charged_before_the_engine_runs() -> None:
    budget = Budget(epsilon=5.0)
    seen: list[tuple[float, float]] = []

    class Spy(PandasEngine):  # type: ignore[misc, valid-type]
        def execute(self, plan: Plan) -> EngineResult:
            seen.append(budget.spent)
            return super().execute(plan)  # type: ignore[no-any-return]

    _query(_session(budget, Spy())).run(epsilon=1.0)
    assert seen and seen[0][0] >= 1.0 - 1e-12


def test_result_shape_public_keys_and_absent_key() -> None:
    out = _query(_session()).run(epsilon=2.0)
    assert list(out["region"]) == ["north", "south", "east", "west"]
    assert list(out.columns) == [
        "region",
        "n",
        "n_low",
        "n_high",
        "income",
        "income_low",
        "income_high",
    ]
    info = out.attrs["dpkit"]
    assert info["requested"] == {"epsilon": 2.0, "delta": 0.0}
    assert 2.0 * (1 - 1e-12) <= info["epsilon"] <= 2.0 and info["delta"] == 0.0
    assert info["columns"]["n"]["mechanism"] == "discrete Laplace"
    assert (out["n_low"] <= out["n"]).all() and (out["n"] <= out["n_high"]).all()
    assert ((out["income_low"] >= 0) & (out["income_high"] <= 1e5)).all()
    # "west" is absent from the data: it still has a (noisy) row


def test_absent_key_is_noised_zero() -> None:
    s = _session()
    q = (
        s.query()
        .group_by("region", keys=["west"])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    prep = q.prepare(epsilon=1.0)
    empty = EngineResult(keys=(), values={m.name: () for m in prep.plan.aggregate.measures})
    src = RandomSource(seed=5, insecure=True)
    vals = np.array([prep.release_from(empty, source=src)["n"].iloc[0] for _ in range(1000)])
    # The count released is max(Z, 0) (a count is never negative): for discrete Laplace noise
    # of scale t (about 1), E[max(Z, 0)] = tanh(1/(2t)) q / (1 - q)^2 with q = e^(-1/t)
    # (about 0.58), and its std is below sqrt(E[Z^2]) ~ 1.41. The mean of 1000 draws has std
    # below 0.045; a miss by 0.3 has probability about 3e-11 (z = 6.7).
    t = prep.pricing.stats[0].measures[0].noise.scale
    q = math.exp(-1.0 / t)
    assert abs(vals.mean() - math.tanh(0.5 / t) * q / (1.0 - q) ** 2) < 0.3
    assert (vals != 0).any() and (vals >= 0).all()


def test_key_formats() -> None:
    s = _session()
    q = s.query().group_by("region", "age", keys={"region": ["north", "x"], "age": [1.0, 2.0]})
    assert q.keys == (("north", 1.0), ("north", 2.0), ("x", 1.0), ("x", 2.0))
    frame = pd.DataFrame({"region": ["a", "b", "a"]})
    assert s.query().group_by("region", keys=frame).keys == (("a",), ("b",))
    assert s.query().group_by(["region"], keys=["a", "b"]).keys == (("a",), ("b",))
    with pytest.raises(PrivacyParameterError):
        s.query().group_by("region", "age", keys=["north"])
    with pytest.raises(PrivacyParameterError):
        s.query().group_by("region", keys={"age": [1]})


def test_partition_selection_needs_delta_and_an_approximate_delta_allowance() -> None:
    q = (
        _session()
        .query()
        .group_by("region")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    with pytest.raises(PrivacyParameterError, match="delta"):
        q.summarize(epsilon=1.0)
    # a zCDP budget that keeps no delta for approximate-zCDP charges refuses the selection
    zs = _session(Budget(epsilon=5.0, delta=1e-5, method="zcdp", approx_delta_allowance=0.0))
    qz = (
        zs.query()
        .group_by("region")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    with pytest.raises(BudgetExceededError, match="Nothing was spent"):
        qz.run(epsilon=1.0, delta=1e-6)
    assert zs.budget.spent == (0.0, 0.0)


def test_partition_selection_releases_large_groups_only() -> None:
    budget = Budget(epsilon=10.0, delta=1e-5)
    df = pd.DataFrame({"uid": range(2001), "region": ["big"] * 2000 + ["tiny"]})
    s = _session(budget, df=df)
    q = (
        s.query()
        .group_by("region")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    out = q.run(epsilon=1.0, delta=1e-6)
    # "big" has 2000 units, far above the threshold (about 30 here): released with
    # probability 1. "tiny" has 1 unit: released with probability at most 1e-6 (the
    # threshold on the count's own noise takes all of delta: the count is discrete Laplace).
    assert list(out["region"]) == ["big"]
    info = out.attrs["dpkit"]["partition_selection"]
    assert info["mechanism"] == "CountThreshold" and info["tau"] < 2000
    eps_spent, delta_spent = budget.spent
    assert eps_spent <= 1.0 and delta_spent <= 1e-6


def test_gaussian_sessions_charge_rho_or_pairs() -> None:
    zb = Budget(epsilon=5.0, delta=1e-5, method="zcdp")
    out = _query(_session(zb)).run(epsilon=1.0, delta=1e-6)
    assert out.attrs["dpkit"]["columns"]["n"]["mechanism"] == "discrete Gaussian"
    assert zb.spent[0] > 0
    bb = Budget(epsilon=5.0, delta=1e-5)
    out = _query(_session(bb)).run(epsilon=1.0, delta=1e-6)
    # one partition per unit: discrete Laplace beats the Gaussian at this cost and spends no
    # delta (public keys, so no partition selection either)
    assert out.attrs["dpkit"]["columns"]["n"]["mechanism"] == "discrete Laplace"
    eps_spent, delta_spent = bb.spent
    assert 1.0 - 1e-9 <= eps_spent <= 1.0 and delta_spent == 0.0


def test_outputs() -> None:
    s = _session()
    pl_out = _query(s).run(epsilon=0.5, output="polars")
    assert type(pl_out).__module__.startswith("polars")
    arrow = _query(s).run(epsilon=0.5, output="arrow")
    assert b"dpkit" in arrow.schema.metadata
    with pytest.raises(PrivacyParameterError):
        _query(s).run(epsilon=0.5, output="excel")


def test_histogram_and_quantile_columns() -> None:
    s = _session(Budget(epsilon=20.0))
    q = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=3)
        .agg(
            h=dpa.histogram("age", edges=[0, 50, 100]),
            c=dpa.histogram("region", categories=["north", "south"]),
            a=dpa.quantile("age", [0.75, 0.25], bounds=(0, 100)),
        )
    )
    out = q.run(epsilon=10.0)
    assert len(out) == 1
    assert {"h[0,50)", "h[50,100]", "c=north", "c=south", "a_p75", "a_p25"} <= set(out.columns)
    assert out["a_p25"].iloc[0] <= out["a_p75"].iloc[0]
    assert 0 <= out["a_p25"].iloc[0] <= 100


def test_agg_validation() -> None:
    s = _session()
    with pytest.raises(PrivacyParameterError):
        s.query().agg()
    with pytest.raises(PrivacyParameterError):
        s.query().agg(n="count")
    with pytest.raises(PrivacyParameterError):
        s.query().agg(n=dpa.count()).agg(n=dpa.count())
    with pytest.raises(PrivacyParameterError, match="privacy unit"):
        s.query().agg(u=dpa.sum("uid", bounds=(0, 1)))
    with pytest.raises(PrivacyParameterError):
        s.query().where("")
    with pytest.raises(PrivacyParameterError, match="count_distinct"):
        _session(unit=None).query().agg(u=dpa.count_distinct())


def test_auto_bounds_charge_once_and_are_recorded() -> None:
    rng = np.random.default_rng(5)
    n = 40_000
    df = pd.DataFrame(
        {"uid": np.arange(n), "g": rng.choice(["a", "b"], n), "x": rng.uniform(1000.0, 3000.0, n)}
    )
    budget = Budget(epsilon=4.0)
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=8, insecure=True),
    )
    q = (
        s.query()
        .group_by("g", keys=["a", "b"])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(m=dpa.mean("x", bounds="auto"), n=dpa.count())
    )
    with pytest.raises(PrivacyParameterError, match="auto"):
        q.prepare(epsilon=1.0)
    summary = q.summarize(epsilon=2.0)
    assert "bounds estimate" in set(summary["measure"])
    out = q.run(epsilon=2.0)
    assert budget.spent[0] <= 2.0 and len(budget.ledger) == 1
    info = out.attrs["dpkit"]["columns"]["m"]
    assert info["bounds_source"] == "private estimate"
    lo, hi = info["bounds"]
    # Each quantile gets epsilon 0.1 and sensitivity 0.99: a bin at rank distance 400 (every
    # bin outside the data's range, 1% of 40,000 rows) has weight e^(-0.1 * 400 / 1.98) ~ 2e-9
    # against 1 for the right bin, so over the ~120 wrong bins this fails with probability
    # below 1e-6.
    assert lo in (512.0, 1024.0) and hi == 4096.0
    assert ((out["m"] > 1800) & (out["m"] < 2200)).all()


def test_close_histogram_edges_and_quantile_levels_get_distinct_exact_columns() -> None:
    """Edges and levels equal to 6 significant digits used to share a column name, so three
    charged bins came back as two columns and three quantile levels as one."""
    q = _session().query().bound(max_partitions=1, max_rows_per_partition=2)
    edges = [0.1, 0.1000001, 0.1000002, 0.1000003]
    levels = [0.5, 0.5000001, 0.5000002]
    out = q.agg(
        h=dpa.histogram("age", edges=edges), m=dpa.quantile("age", levels, bounds=(0, 100))
    ).run(epsilon=1.0)
    assert [c for c in out.columns if c.startswith("h[") and not c.endswith(("_low", "_high"))] == [
        "h[0.1,0.1000001)",
        "h[0.1000001,0.1000002)",
        "h[0.1000002,0.1000003]",
    ]
    assert [c for c in out.columns if c.startswith("m_")] == ["m_p50", "m_p50_00001", "m_p50_00002"]
    wide = q.agg(h=dpa.histogram("age", edges=[0, 1e6, 1.5e7])).summarize(epsilon=1.0)
    assert wide.attrs["dpkit"]["output_columns"]["h"] == ["h[0,1000000)", "h[1000000,15000000]"]


def test_duplicate_output_columns_are_refused_before_the_charge() -> None:
    budget = Budget(epsilon=5.0)
    q = _session(budget=budget).query().bound(max_partitions=1, max_rows_per_partition=2)
    with pytest.raises(PrivacyParameterError, match="levels must be distinct"):
        dpa.quantile("age", [0.5, 0.5], bounds=(0, 100))
    for stats in (
        {"h": dpa.histogram("region", categories=[1, "1"])},
        {"n": dpa.count(), "n_low": dpa.count()},
        {"a": dpa.quantile("age", 0.5, bounds=(0, 100)), "a_p50": dpa.count()},
    ):
        with pytest.raises(PrivacyParameterError, match="both be named"):
            q.agg(**stats).run(epsilon=1.0)
    df = _people().rename(columns={"region": "n_low"})
    with pytest.raises(PrivacyParameterError, match="both be named"):
        (
            _session(budget=budget, df=df)
            .query()
            .group_by("n_low", keys=["north"])
            .bound(max_partitions=1, max_rows_per_partition=2)
            .agg(n=dpa.count())
            .run(epsilon=1.0)
        )
    assert budget.spent[0] == 0.0


@pytest.mark.parametrize("kind", ["bounded", "auto", "planned"])
def test_with_fresh_salt_changes_only_the_salts(kind: str) -> None:
    s = _session(budget=Budget(epsilon=50.0, delta=1e-6))
    q = s.query().group_by("region", keys=["north", "south", "east", "west"])
    if kind != "planned":
        q = q.bound(max_partitions=1, max_rows_per_partition=2)
    bounds: Any = "auto" if kind == "auto" else (0, 1e5)
    q = q.agg(n=dpa.count(), income=dpa.mean("income", bounds=bounds))
    prepared = q.prepare(epsilon=1.0, delta=1e-8, two_step=True)
    again = prepared.with_fresh_salt(s.source_of_randomness)
    assert again.pricing is prepared.pricing
    plans = ("plan", "bounds_plan", "contribution_plan")
    present = [name for name in plans if getattr(prepared, name) is not None]
    assert len(present) == {"bounded": 1, "auto": 2, "planned": 2}[kind]
    salts = set()
    for name in present:
        old, new = getattr(prepared, name), getattr(again, name)
        assert old.bound.salt != new.bound.salt
        assert dataclasses.replace(new, bound=old.bound) == old  # nothing else changed
        salts.update((old.bound.salt, new.bound.salt))
    assert len(salts) == 2 * len(present)  # each plan its own salt
    assert min(salts) >= 0 and max(salts) < 2**63
    before = s.budget.spent[0]
    out = s.run(again)  # runs and charges like the query prepared afresh
    assert list(out["region"]) == ["north", "south", "east", "west"]
    assert s.budget.spent[0] > before
