"""MST on a session: noise law, the zCDP charge, person-level bounding, persistence, refusals."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _stats import ALPHA, BETA, chi2_categorical, chi2_power

from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.analytics._plan import Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.noise import RandomSource
from dpkit.synth import MST, Categorical, Numeric, SyntheticModel
from dpkit.synth._measure import marginal_statement, read_marginals
from dpkit.synth.mst import add_noise

DOMAINS = {
    "sex": Categorical(["F", "M"]),
    "age": Numeric(0, 100, 5),
    "edu": Categorical(["hs", "ba", "phd"]),
}


def _people(n: int = 3_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.uniform(18, 90, n)
    edu = np.where(age > 50, "hs", rng.choice(["ba", "phd"], n))
    return pd.DataFrame(
        {
            "uid": np.arange(n) // 2,  # two rows per person
            "sex": rng.choice(["F", "M", "X"], n, p=[0.48, 0.48, 0.04]),  # "X": missing cell
            "age": age,
            "edu": edu,
        }
    )


def _session(frame: pd.DataFrame, budget: Any, **kw: Any) -> Session:
    return Session(
        frame,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=11, insecure=True),
        **kw,
    )


def _zcdp() -> Budget:
    return Budget(epsilon=4.0, delta=1e-6, method="zcdp")


# ------------------------------------------------------------------ the noise law


def _dg_pmf(sigma: float, k: int) -> np.ndarray:
    x = np.arange(-k, k + 1, dtype=np.float64)
    w = np.exp(-(x * x) / (2.0 * sigma * sigma))
    return w / w.sum()


def _noise_sample(sigma: float, n: int) -> np.ndarray:
    src = RandomSource(seed=3, insecure=True)
    return add_noise(np.zeros(n, dtype=np.int64), sigma, src)


@pytest.mark.parametrize("sigma", [0.8, 2.5])
def test_marginal_noise_is_discrete_gaussian(sigma: float) -> None:
    # Pearson's test at ALPHA = 1e-6 of the noise added to each cell against the exact pmf.
    k = int(12 * sigma) + 2
    z = _noise_sample(sigma, 6_000)
    assert np.abs(z).max() <= k
    counts = np.bincount(z + k, minlength=2 * k + 1)
    stat, crit = chi2_categorical(counts, _dg_pmf(sigma, k), alpha=ALPHA)
    assert stat <= crit


def test_noise_law_test_catches_a_wrong_sigma() -> None:
    # Companion: noise of sigma 2.5 is rejected as sigma 3.0; power >= 1 - BETA at n = 6000.
    k = 40
    p0, p1 = _dg_pmf(3.0, k), _dg_pmf(2.5, k)
    assert chi2_power(6_000, p0, p1) >= 1 - BETA
    counts = np.bincount(_noise_sample(2.5, 6_000) + k, minlength=2 * k + 1)
    stat, crit = chi2_categorical(counts, p0, alpha=ALPHA)
    assert stat > crit


# ------------------------------------------------------------------ the charge


def test_plan_splits_rho_in_thirds_to_the_safe_side() -> None:
    rho, d, m = 0.3, 3, 2
    plan = MST(DOMAINS, max_rows=m).plan(rho=rho)
    third = Fraction(rho) / 3
    step1 = Fraction(d * m * m) / (2 * Fraction(plan.sigma_1) ** 2)
    step2 = Fraction(plan.selection_epsilon) ** 2 * (d - 1) / 8
    step3 = Fraction((d - 1) * m * m) / (2 * Fraction(plan.sigma_2) ** 2)
    for part in (step1, step2, step3):
        assert part <= third
        assert part >= third * (1 - Fraction(1, 10**9))
    assert plan.sigma_1 == pytest.approx(math.sqrt(d * m * m / (2 * rho / 3)), rel=1e-12)


def test_fit_charges_the_budget_once_in_zcdp() -> None:
    b = _zcdp()
    s = _session(_people(), b)
    mst = MST(DOMAINS, max_rows=2)
    model = mst.fit(s, rho=0.05)
    assert len(b.ledger) == 1
    assert b.spent_native is not None
    assert 0.05 * (1 - 1e-9) <= b.spent_native <= 0.05
    assert b.history()[0].metadata["synth"] == "MST"
    spent = b.spent_native
    model.sample(500, source=RandomSource(seed=0, insecure=True))
    assert b.spent_native == spent and len(b.ledger) == 1


def test_fit_at_an_epsilon_delta_share_spends_its_rho() -> None:
    b = _zcdp()
    s = _session(_people(), b)
    rho = b.zcdp_share(1.0, 5e-7)[0]
    MST(DOMAINS, max_rows=2).fit(s, epsilon=1.0, delta=5e-7)
    assert b.spent_native is not None and b.spent_native <= rho * (1 + 1e-12)


def test_a_fit_the_budget_cannot_pay_spends_nothing() -> None:
    b = Budget(rho=0.01)
    s = _session(_people(), b)
    with pytest.raises(BudgetExceededError, match=r"This MST fit needs rho 0\.02"):
        MST(DOMAINS, max_rows=2).fit(s, rho=0.02)
    assert b.spent_native == 0.0 and len(b.ledger) == 0


# ------------------------------------------------------------------ person-level bounding


def _neighbours() -> tuple[pd.DataFrame, pd.DataFrame]:
    d = _people(400, seed=5)
    heavy = pd.DataFrame(
        {"uid": 10_000, "sex": "F", "age": 33.0, "edu": ["phd"] * 50}  # one person, 50 rows
    )
    return d, pd.concat([d, heavy], ignore_index=True)


def _marginal_difference(max_rows: int) -> list[np.ndarray]:
    d, d_prime = _neighbours()
    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", d_prime)
    s = Session(d, privacy_unit="uid", budget=_zcdp(), engine=engine)
    statement = marginal_statement(s, DOMAINS, max_rows)  # one salt for both tables
    a = read_marginals(statement.exact(Source(kind="table", location="d")), DOMAINS)
    b = read_marginals(statement.exact(Source(kind="table", location="d_prime")), DOMAINS)
    return [b[k] - a[k] for k in a]


def test_a_person_with_many_rows_moves_each_marginal_by_at_most_max_rows() -> None:
    m = 3
    for diff in _marginal_difference(m):
        assert (diff >= 0).all()  # adding a person only adds kept rows
        assert int(diff.sum()) == m  # exactly max_rows of the 50 rows are kept
        assert float(np.sqrt((diff.astype(float) ** 2).sum())) <= m  # the L2 sensitivity


def test_bounding_test_sees_an_unbounded_person() -> None:
    # Companion: without an effective bound the same person moves each marginal by 50.
    for diff in _marginal_difference(1_000):
        assert int(diff.sum()) == 50


def test_every_pair_counts_the_same_kept_rows() -> None:
    d, _ = _neighbours()
    s = _session(d, _zcdp())
    exact = read_marginals(marginal_statement(s, DOMAINS, 1).run(), DOMAINS)
    sex_from_01 = exact[(0, 1)].sum(axis=1)
    sex_from_02 = exact[(0, 2)].sum(axis=1)
    assert (sex_from_01 == sex_from_02).all()
    assert int(exact[(0, 1)].sum()) == d["uid"].nunique()  # one row per person kept
    # values outside the declared list ("X") are in the missing cell
    kept_x = exact[(0, 1)][2].sum()
    assert 0 < kept_x < 0.1 * d["uid"].nunique()


# ------------------------------------------------------------------ the model and its file


def test_synthetic_table_keeps_a_strong_dependence() -> None:
    s = _session(_people(20_000), Budget(rho=1.0))
    model = MST(DOMAINS, max_rows=2).fit(s, rho=1.0)
    syn = model.sample(20_000, source=RandomSource(seed=2, insecure=True))
    assert list(syn.columns) == ["sex", "age", "edu"]
    assert len(syn) == 20_000
    assert ["age", "edu"] in model.info["edges"] or ["edu", "age"] in model.info["edges"]
    old = syn[syn.age > 60]
    assert (old.edu == "hs").mean() > 0.9  # true value 1.0; independent columns give ~0.4
    assert syn.age.dropna().between(0, 100).all()
    assert syn.age.isna().mean() < 0.02  # the true table has no missing age
    assert 0.0 < syn.sex.isna().mean() < 0.1  # about 4% are outside the declared values


def test_save_and_load_sample_the_same_table_without_spending(tmp_path: Any) -> None:
    b = _zcdp()
    s = _session(_people(), b)
    model = MST(DOMAINS, max_rows=2).fit(s, rho=0.2)
    path = tmp_path / "model.json"
    model.save(path)
    spent = b.spent_native
    again = SyntheticModel.load(path)
    one = model.sample(1_000, source=RandomSource(seed=7, insecure=True))
    two = again.sample(1_000, source=RandomSource(seed=7, insecure=True))
    pd.testing.assert_frame_equal(one, two)
    assert again.info == model.info
    assert b.spent_native == spent and len(b.ledger) == 1


def test_load_refuses_a_damaged_model(tmp_path: Any) -> None:
    b = _zcdp()
    model = MST(DOMAINS, max_rows=2).fit(_session(_people(), b), rho=0.2)
    data = model.to_dict()
    data["edges"] = [[0, 1], [0, 1]]  # not a spanning tree
    with pytest.raises(PrivacyParameterError):
        SyntheticModel.from_dict(data)
    with pytest.raises(PrivacyParameterError):
        SyntheticModel.from_dict({"format": "pickle"})


# ------------------------------------------------------------------ refusals before the charge


def _refused(mst_kwargs: dict[str, Any], budget: Any = None, frame: Any = None) -> str:
    b = budget if budget is not None else _zcdp()
    s = _session(_people() if frame is None else frame, b)
    with pytest.raises(PrivacyParameterError) as info:
        MST(**mst_kwargs).fit(s, rho=0.05)
    assert len(b.ledger) == 0
    return str(info.value)


def test_too_many_cells_is_refused_with_the_numbers() -> None:
    domains = {"sex": Categorical(["F", "M"]), "age": Numeric(0, 100, 600)}
    msg = _refused({"columns": domains, "max_cells": 1_000})
    assert "1,803 cells" in msg and "max_cells=1,000" in msg and "'age': 601" in msg


def test_a_column_without_a_domain_is_refused() -> None:
    with pytest.raises(PrivacyParameterError, match="1 column\\(s\\) have no public domain"):
        MST({"sex": Categorical(["F", "M"]), "age": None})


def test_unknown_columns_the_unit_and_text_as_numbers_are_refused() -> None:
    assert "'nope'" in _refused({"columns": {**DOMAINS, "nope": Categorical([1])}})
    unit = {**DOMAINS, "uid": Categorical([1])}
    assert "privacy unit" in _refused({"columns": unit})
    as_number = {"sex": Numeric(0, 1, 2), "edu": Categorical(["hs"])}
    assert "not a number" in _refused({"columns": as_number})


def test_an_interval_column_is_not_read_as_a_number() -> None:
    """``INTERVAL`` contains ``INT`` but holds durations: refused as a number before any spend."""
    frame = _people(200).assign(wait=pd.to_timedelta(np.arange(200), unit="s"))
    msg = _refused(
        {"columns": {"wait": Numeric(0, 10, 2), "edu": Categorical(["hs"])}}, frame=frame
    )
    assert "not a number" in msg and "INTERVAL" in msg


def test_rows_as_people_fit_with_one_row_each() -> None:
    b = _zcdp()
    s = Session(_people().drop(columns="uid"), privacy_unit=None, budget=b)
    with pytest.raises(PrivacyParameterError, match="max_rows must be 1"):
        MST(DOMAINS, max_rows=2).fit(s, rho=0.05)
    assert len(b.ledger) == 0
    model = MST(DOMAINS).fit(s, rho=0.05)
    assert model.tree.total > 2_000  # all 3,000 rows are kept (noise of sigma about 16)


def test_a_session_not_kept_in_zcdp_is_refused() -> None:
    msg = _refused({"columns": DOMAINS}, budget=Budget(epsilon=1.0, delta=1e-6))
    assert "method='zcdp'" in msg


def test_bad_parameters_are_refused() -> None:
    with pytest.raises(PrivacyParameterError):
        MST({"sex": Categorical(["F", "M"])})  # one column
    with pytest.raises(PrivacyParameterError):
        MST(DOMAINS, max_rows=0)
    with pytest.raises(PrivacyParameterError):
        MST(DOMAINS).plan(rho=float("nan"))
    with pytest.raises(PrivacyParameterError):
        Numeric(1, 1)
    with pytest.raises(PrivacyParameterError):
        Categorical(["a", "a"])
