"""The fitted model says what was charged, in the session's accounting (zCDP rho), beside the
(epsilon, delta) share it was asked as."""

from __future__ import annotations

import numpy as np
import pandas as pd

from dpkit._numeric.zcdp import zcdp_epsilon
from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.noise import RandomSource
from dpkit.synth import MST, Categorical, Numeric, SyntheticModel


def _fit(tmp_path: object = None) -> tuple[Session, SyntheticModel]:
    rng = np.random.default_rng(1)
    n = 600
    df = pd.DataFrame(
        {"uid": np.arange(n) // 2, "a": rng.choice(["x", "y"], n), "b": rng.uniform(0, 10, n)}
    )
    s = Session(
        df,
        privacy_unit="uid",
        budget=Budget(epsilon=4.0, delta=1e-6, method="zcdp"),
        source_of_randomness=RandomSource(seed=2, insecure=True),
    )
    cols = {"a": Categorical(["x", "y"]), "b": Numeric(0, 10, 4)}
    return s, MST(cols, max_rows=2, iterations=20).fit(s, epsilon=1.0, delta=1e-6)


def test_summary_shows_the_rho_charged_and_the_share_asked() -> None:
    s, model = _fit()
    ch = model.info["charge"]
    assert ch["accounting"] == "zCDP"
    # the rho shown is what the budget recorded, and never above the share's rho
    assert s.budget.spent_native is not None
    assert abs(ch["rho"] - s.budget.spent_native) <= 1e-12
    assert ch["rho"] <= ch["rho_asked"] == s.budget.zcdp_share(1.0, 1e-6)[0]
    assert ch["share"] == {"epsilon": 1.0, "delta": 1e-6}
    eps_alone = ch["epsilon_of_rho_at_delta"]
    assert eps_alone == zcdp_epsilon(ch["rho"], 1e-6)
    assert 0.9 < eps_alone < 1.0  # the share keeps part of its delta: the honest figure is < 1
    text = model.summary()
    assert f"rho = {ch['rho']:.4g}" in text
    assert "epsilon = 1, delta = 1e-06" in text
    assert f"({eps_alone:.4g}, 1e-06)-DP" in text


def test_summary_survives_save_and_load(tmp_path: object) -> None:
    import pathlib

    _, model = _fit()
    path = pathlib.Path(str(tmp_path)) / "m.json"
    model.save(path)
    assert SyntheticModel.load(path).summary() == model.summary()
