"""AIM on a session: the zCDP charge and the rounds' spend, the model, persistence, refusals.

The noise of every measurement is dpkit's exact discrete Gaussian (``add_noise``), whose law
is tested with a wrong-sigma companion in test_mst.py; here the sigmas and epsilons AIM uses
are recorded and their zCDP costs summed."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.noise import RandomSource
from dpkit.synth import AIM, Categorical, Numeric, SyntheticModel
from dpkit.synth import aim as aim_module

DOMAINS = {
    "sex": Categorical(["F", "M"]),
    "age": Numeric(0, 100, 5),
    "edu": Categorical(["hs", "ba", "phd"]),
}


def _people(n: int = 3_000, seed: int = 0) -> pd.DataFrame:
    """Two rows per person; edu is "hs" after 50; "X" is outside sex's declared values."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(18, 90, n)
    return pd.DataFrame(
        {
            "uid": np.arange(n) // 2,
            "sex": rng.choice(["F", "M", "X"], n, p=[0.48, 0.48, 0.04]),
            "age": age,
            "edu": np.where(age > 50, "hs", rng.choice(["ba", "phd"], n)),
        }
    )


def _session(frame: pd.DataFrame, budget: Any) -> Session:
    return Session(
        frame,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=11, insecure=True),
    )


def _zcdp() -> Budget:
    return Budget(epsilon=4.0, delta=1e-6, method="zcdp")


def test_plan_calibrates_the_first_rounds_to_the_safe_side() -> None:
    rho, m = 0.3, 2
    plan = AIM(DOMAINS, max_rows=m).plan(rho=rho)
    t = 16 * 3
    assert plan.rounds == t
    gauss = Fraction(m * m) / (2 * Fraction(plan.sigma_0) ** 2)
    em = Fraction(plan.epsilon_0) ** 2 / 8
    assert gauss <= Fraction(9, 10) * Fraction(rho) / t
    assert gauss >= Fraction(9, 10) * Fraction(rho) / t * (1 - Fraction(1, 10**9))
    assert em <= Fraction(1, 10) * Fraction(rho) / t
    assert plan.sigma_0 == pytest.approx(m * math.sqrt(t / (2 * 0.9 * rho)), rel=1e-12)


def test_plan_with_a_oneway_share_spends_it_first_and_splits_the_rest() -> None:
    # oneway=0.5: the d 1-way marginals share half of rho (each sigma rounded up, so never
    # more), and the T rounds split exactly what that leaves, 0.9 measuring and 0.1 selecting.
    rho, m, d = 0.3, 2, 3
    plan = AIM(DOMAINS, max_rows=m, oneway=0.5).plan(rho=rho)
    t = 16 * d
    oneway = d * Fraction(m * m) / (2 * Fraction(plan.sigma_oneway) ** 2)
    assert Fraction(rho) / 2 * (1 - Fraction(1, 10**9)) <= oneway <= Fraction(rho) / 2
    rest = Fraction(rho) - oneway
    gauss = Fraction(m * m) / (2 * Fraction(plan.sigma_0) ** 2)
    em = Fraction(plan.epsilon_0) ** 2 / 8
    assert (
        Fraction(9, 10) * rest / t * (1 - Fraction(1, 10**9)) <= gauss <= Fraction(9, 10) * rest / t
    )
    assert em <= Fraction(1, 10) * rest / t
    assert plan.sigma_oneway == pytest.approx(m * math.sqrt(d / rho), rel=1e-12)
    paper = AIM(DOMAINS, max_rows=m, oneway=None).plan(rho=rho)
    assert paper.sigma_oneway == paper.sigma_0  # the paper: 1-way marginals at the rounds' sigma


def _recorded_fit(
    rho: float, monkeypatch: Any, frame: pd.DataFrame, oneway: float | None = None
) -> tuple[Fraction, Any]:
    """Fit AIM and sum the zCDP cost of every noisy measurement and selection it made."""
    m = 2
    spent: list[Fraction] = []
    real_noise = aim_module.add_noise
    real_em = aim_module.ExponentialMechanism

    def noise(counts: Any, sigma: float, source: Any) -> Any:
        spent.append(Fraction(m * m) / (2 * Fraction(sigma) ** 2))
        return real_noise(counts, sigma, source)

    def em(*, epsilon: float, sensitivity: float) -> Any:
        spent.append(Fraction(epsilon) ** 2 / 8)
        return real_em(epsilon=epsilon, sensitivity=sensitivity)

    monkeypatch.setattr(aim_module, "add_noise", noise)
    monkeypatch.setattr(aim_module, "ExponentialMechanism", em)
    b = _zcdp()
    model = AIM(DOMAINS, max_rows=m, rounds=12, oneway=oneway).fit(_session(frame, b), rho=rho)
    assert len(b.ledger) == 1 and b.history()[0].metadata["synth"] == "AIM"
    assert b.spent_native is not None and 0.999999 * rho <= b.spent_native <= rho
    return sum(spent, Fraction(0)), model


@pytest.mark.slow
@pytest.mark.parametrize("oneway", [None, 0.5, 0.9])
def test_the_rounds_spend_exactly_the_charge(monkeypatch: Any, oneway: float | None) -> None:
    # The adaptive rounds' costs (1-way measurements, then a selection and a measurement per
    # round, with annealing and the last round taking what is left) sum to the charged rho
    # and never more, whatever share the 1-way marginals take first. Companion: had the last
    # round not been capped, or a sigma been rounded down, the sum would exceed rho and the
    # first check fail.
    rho = 0.2
    total, model = _recorded_fit(rho, monkeypatch, _people(2_000), oneway)
    assert total <= Fraction(rho)
    assert total >= Fraction(rho) * (1 - Fraction(1, 10**9))
    assert model.info["rounds"] == len(model.info["selected"]) >= 1


def test_a_fit_the_budget_cannot_pay_spends_nothing() -> None:
    b = Budget(rho=0.01)
    with pytest.raises(BudgetExceededError, match=r"This AIM fit needs rho 0\.02"):
        AIM(DOMAINS, max_rows=2).fit(_session(_people(), b), rho=0.02)
    assert b.spent_native == 0.0 and len(b.ledger) == 0


@pytest.mark.slow
def test_synthetic_table_keeps_a_strong_dependence() -> None:
    # age > 50 implies edu "hs" in the true table; independent columns would give about 0.4.
    s = _session(_people(10_000), Budget(rho=1.0))
    model = AIM(DOMAINS, max_rows=2, rounds=16).fit(s, rho=1.0)
    syn = model.sample(10_000, source=RandomSource(seed=2, insecure=True))
    old = syn[syn.age > 60]
    assert (old.edu == "hs").mean() > 0.9
    assert 0.0 < syn.sex.isna().mean() < 0.1  # about 4% are outside the declared values
    assert syn.age.dropna().between(0, 100).all()


def test_save_and_load_sample_the_same_table_without_spending(tmp_path: Any) -> None:
    b = _zcdp()
    model = AIM(DOMAINS, max_rows=2, rounds=8, round_iterations=100).fit(
        _session(_people(2_000), b), rho=0.2
    )
    path = tmp_path / "aim.json"
    model.save(path)
    spent = b.spent_native
    again = SyntheticModel.load(path)
    one = model.sample(1_000, source=RandomSource(seed=7, insecure=True))
    two = again.sample(1_000, source=RandomSource(seed=7, insecure=True))
    pd.testing.assert_frame_equal(one, two)
    assert again.info == model.info and b.spent_native == spent and len(b.ledger) == 1
    np.testing.assert_allclose(again.marginal("age"), model.marginal("age"))
    data = model.to_dict()
    data["parents"] = [None] * len(data["parents"])  # no longer a tree of cliques
    if len(data["parents"]) > 1:
        with pytest.raises(PrivacyParameterError, match="junction tree"):
            SyntheticModel.from_dict(data)
    data = model.to_dict()
    data["tables"][0] = (-np.asarray(data["tables"][0])).tolist()
    with pytest.raises(PrivacyParameterError, match="junction tree"):
        SyntheticModel.from_dict(data)


def _refused(aim_kwargs: dict[str, Any], budget: Any = None) -> str:
    b = budget if budget is not None else _zcdp()
    s = _session(_people(), b)
    with pytest.raises(PrivacyParameterError) as info:
        AIM(**aim_kwargs).fit(s, rho=0.05)
    assert len(b.ledger) == 0
    return str(info.value)


def test_refusals_before_any_spend() -> None:
    big = {"sex": Categorical(["F", "M"]), "age": Numeric(0, 100, 600), "edu": DOMAINS["edu"]}
    msg = _refused({"columns": big, "max_cells": 1_000})
    assert "workload marginals" in msg and "max_cells=1,000" in msg
    assert "method='zcdp'" in _refused({"columns": DOMAINS}, budget=Budget(epsilon=1.0, delta=1e-6))
    assert "'nope'" in _refused({"columns": {**DOMAINS, "nope": Categorical([1])}})
    with pytest.raises(PrivacyParameterError, match="unknown or repeated"):
        AIM(DOMAINS, workload=[("sex", "sex")])
    with pytest.raises(PrivacyParameterError, match="max_model_cells"):
        AIM(DOMAINS, max_model_cells=10)
    with pytest.raises(PrivacyParameterError):
        AIM(DOMAINS).plan(rho=float("nan"))
    for bad in (0, 0.0, 1, 1.0, -0.5, 1.5, float("nan"), float("inf"), True, "0.5", [0.5]):
        with pytest.raises(PrivacyParameterError, match="oneway"):
            AIM(DOMAINS, oneway=bad)  # type: ignore[arg-type]


def test_a_workload_of_pairs_counts_only_those_marginals() -> None:
    a = AIM(DOMAINS, workload=[("sex", "age"), ("age", "edu")])
    sizes = [d.size for d in DOMAINS.values()]
    assert a.cells == sizes[0] * sizes[1] + sizes[1] * sizes[2]
    assert AIM(DOMAINS).cells == math.prod(sizes)
