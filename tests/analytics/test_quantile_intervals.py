"""Quantile intervals in a query (``quantile(..., interval_share=...)``): the ``_low`` and
``_high`` columns, each estimate inside its interval, the interval holding the true quantile
(the level itself is tested on the mechanism, tests/mechanisms/test_quantile_interval.py), the
budget split charged once, and the share validated before anything is spent."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._pricing import price
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource


def _session(budget: Budget) -> tuple[dpa.Session, pd.DataFrame]:
    rng = np.random.default_rng(5)
    df = pd.DataFrame(
        {
            "uid": np.arange(4000),
            "g": rng.integers(0, 2, 4000),
            "x": rng.exponential(30.0, 4000).clip(0, 200),
        }
    )
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=3, insecure=True),
    )
    return s, df


@pytest.mark.parametrize("method", ["pure", "zcdp"])
def test_interval_columns_hold_estimate_and_truth(method: str) -> None:
    b = Budget(epsilon=10) if method == "pure" else Budget(epsilon=10, delta=1e-5, method="zcdp")
    s, df = _session(b)
    kw = {} if method == "pure" else {"delta": 1e-6}
    f = (
        s.query()
        .group_by("g", keys=[0, 1])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(m=dpa.quantile("x", [0.5, 0.9], bounds=(0, 200), interval_share=0.4))
        .run(epsilon=1.0, **kw)
        .sort_values("g")
    )
    truth = df.groupby("g")["x"].quantile([0.5, 0.9]).unstack().to_numpy()
    for j, c in enumerate(("m_p50", "m_p90")):
        lo, est, hi = f[f"{c}_low"].to_numpy(), f[c].to_numpy(), f[f"{c}_high"].to_numpy()
        assert np.all(lo <= est) and np.all(est <= hi)
        # at epsilon 0.3 per end for 2,000 people the interval misses with probability far
        # below 1e-6 (McSherry-Talwar at these radii); numpy's interpolation stays inside bins
        assert np.all(lo <= truth[:, j] + 200 / 2**20) and np.all(truth[:, j] <= hi + 200 / 2**20)


def test_without_share_there_are_no_interval_columns() -> None:
    s, _ = _session(Budget(epsilon=10))
    f = (
        s.query()
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(m=dpa.quantile("x", 0.5, bounds=(0, 200)))
        .run(epsilon=1.0)
    )
    assert "m_p50_low" not in f.columns


def test_the_share_is_split_and_charged_once() -> None:
    stat = dpa.quantile("x", [0.5, 0.9], bounds=(0, 200), interval_share=0.25)
    pr = price(
        {"m": stat},
        mode="pure",
        epsilon=1.0,
        delta=0.0,
        max_partitions=2,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    sp = pr.stats[0]
    assert sp.quantile_interval is not None
    assert sp.quantile_mechanism.epsilon == pytest.approx(0.75)
    assert sp.quantile_interval.epsilon == pytest.approx(0.25)
    assert pr.charged()["epsilon"] <= 1.0
    assert sp.quantile_interval.epsilon_each <= 0.25 / 8  # 2 ends x 2 levels x 2 groups


@pytest.mark.parametrize("bad", [-0.1, 1.0, math.nan, math.inf, True, "0.2", None])
def test_interval_share_validated(bad: object) -> None:
    with pytest.raises(PrivacyParameterError):
        dpa.quantile("x", 0.5, bounds=(0, 200), interval_share=bad)  # type: ignore[arg-type]
