"""``missing=False`` on a column domain: the synthetic column has no missing values.

The declaration is post-processing of the fitted model (Dwork and Roth 2014, Prop. 2.1): the
same statements are counted with the same noise and the same charge, and only the model is
conditioned on "not missing" for the column. These tests fit the same seeded table with and
without the flag and compare what was charged and measured, then check the model and its
samples (deterministic checks: a missing value must never be drawn, whatever the seed).
"""

from __future__ import annotations

import datetime
from typing import Any

import numpy as np
import pandas as pd
import pytest

from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource
from dpkit.synth import AIM, MST, Categorical, Date, Numeric, SyntheticModel
from dpkit.synth._domain import domain_from_dict


def _domains(missing: bool) -> dict[str, Any]:
    return {
        "sex": Categorical(["F", "M"], missing=missing),
        "age": Numeric(0, 100, 5, missing=missing),
        "edu": Categorical(["hs", "ba", "phd"]),
    }


def _people(n: int = 3_000, seed: int = 0) -> pd.DataFrame:
    """ "X" is outside sex's declared values and some ages are NaN: real missing cells."""
    rng = np.random.default_rng(seed)
    age = rng.uniform(18, 90, n)
    age[rng.random(n) < 0.05] = np.nan
    return pd.DataFrame(
        {
            "sex": rng.choice(["F", "M", "X"], n, p=[0.45, 0.45, 0.10]),
            "age": age,
            "edu": np.where(age > 50, "hs", rng.choice(["ba", "phd"], n)),
        }
    )


def _fit(method: type, missing: bool, **kw: Any) -> tuple[SyntheticModel, Budget]:
    b = Budget(rho=1.0)
    s = Session(
        _people(),
        privacy_unit=None,
        budget=b,
        source_of_randomness=RandomSource(seed=3, insecure=True),
    )
    return method(_domains(missing), **kw).fit(s, rho=0.5), b


# ------------------------------------------------------------------ the declaration


@pytest.mark.parametrize("bad", [0, 1, None, "no", "False", 0.0, [False]])
def test_the_flag_takes_only_true_or_false(bad: Any) -> None:
    with pytest.raises(PrivacyParameterError, match="missing must be True or False"):
        Categorical(["a"], missing=bad)
    with pytest.raises(PrivacyParameterError, match="missing must be True or False"):
        Numeric(0, 1, 2, missing=bad)
    with pytest.raises(PrivacyParameterError, match="missing must be True or False"):
        Date("2020-01-01", "2021-01-01", unit="month", missing=bad)
    with pytest.raises(PrivacyParameterError, match="missing must be True or False"):
        domain_from_dict({"kind": "categorical", "values": ["a"], "missing": bad})


def test_the_default_keeps_the_missing_cell_and_old_files_load_with_it() -> None:
    assert Categorical(["a"]).missing and Numeric(bins=3).missing and Date(bins=3).missing
    off = Date("2020-01-01", "2021-01-01", unit="month", missing=False)
    assert not domain_from_dict(off.to_dict()).missing
    assert "missing" not in Categorical(["a"]).to_dict()  # unchanged files for the default
    assert domain_from_dict({"kind": "categorical", "values": ["a"]}).missing
    assert Numeric(0, 1, 2, missing=False) != Numeric(0, 1, 2)
    resolved = off.for_column("date", "d")
    assert not resolved.missing and resolved.edge_dates()[0] == datetime.date(2020, 1, 1)


# ------------------------------------------------------------------ MST and AIM


@pytest.mark.parametrize("method", [MST, AIM])
def test_same_charge_and_measurements_with_and_without_the_flag(method: type) -> None:
    kw: dict[str, Any] = {"rounds": 6, "round_iterations": 100} if method is AIM else {}
    on, b_on = _fit(method, True, **kw)
    off, b_off = _fit(method, False, **kw)
    assert b_on.spent_native == b_off.spent_native and len(b_off.ledger) == 1
    assert on.info == off.info  # same noise, same selected pairs or cliques, same charge
    plan_on = method(_domains(True), **kw).plan(rho=0.5)
    assert plan_on == method(_domains(False), **kw).plan(rho=0.5)
    assert on.marginal("sex")[-1] > 0.0  # the real missing cell is modelled by default
    for col in ("sex", "age"):
        p = off.marginal(col)
        assert p[-1] == 0.0 and p.sum() == pytest.approx(1.0, abs=1e-12)
        assert off.domains[col].missing is False
    assert off.marginal("edu").sum() == pytest.approx(1.0, abs=1e-12)


@pytest.mark.parametrize("method", [MST, AIM])
def test_sampled_tables_hold_no_missing_value_in_declared_columns(method: type) -> None:
    kw: dict[str, Any] = {"rounds": 6, "round_iterations": 100} if method is AIM else {}
    off, _ = _fit(method, False, **kw)
    on, _ = _fit(method, True, **kw)
    for seed in range(3):
        syn = off.sample(5_000, source=RandomSource(seed=seed, insecure=True))
        assert syn["sex"].notna().all() and syn["age"].notna().all()
        assert set(syn["sex"]) <= {"F", "M"}
    syn = on.sample(5_000, source=RandomSource(seed=0, insecure=True))
    assert syn["sex"].isna().mean() > 0.03  # companion: without the flag about 10% missing


def test_pair_marginals_of_a_tree_model_leave_out_the_missing_cell() -> None:
    off, _ = _fit(MST, False)
    for a, b in off.info["edges"]:
        p = off.marginal(a, b)
        assert p.sum() == pytest.approx(1.0, abs=1e-12)
        if not off.domains[a].missing:
            assert np.all(p[-1, :] == 0.0)
        if not off.domains[b].missing:
            assert np.all(p[:, -1] == 0.0)


@pytest.mark.parametrize("method", [MST, AIM])
def test_save_and_load_keep_the_flag(method: type, tmp_path: Any) -> None:
    kw: dict[str, Any] = {"rounds": 6, "round_iterations": 100} if method is AIM else {}
    off, _ = _fit(method, False, **kw)
    path = tmp_path / f"{method.__name__}-nomiss.json"
    off.save(path)
    again = SyntheticModel.load(path)
    assert not again.domains["sex"].missing and not again.domains["age"].missing
    assert again.domains["edu"].missing
    one = off.sample(500, source=RandomSource(seed=4, insecure=True))
    two = again.sample(500, source=RandomSource(seed=4, insecure=True))
    pd.testing.assert_frame_equal(one, two)
