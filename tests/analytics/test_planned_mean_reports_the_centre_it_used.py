"""A planned mean reports (``plan["centres"]``) the centre and count share its release is
priced at, never one it did not use.

Finding (red team of the centred mean, reporting only, no privacy loss): the release step
tries the planner's centre first and falls back to the middle of the bounds (and
``pool_split``) when the centred sum does not price, e.g. its noise scale above the sampler's
limit with a count share of 0.99 (a sum's share of 1/100) on wide bounds. The plan still
reported the planner's centre and share: on a fuzzed histogram (bounds [6.9e10, 2.7e11],
contribution bounds 64 x 64, a share of 0.02) it said centre 2.1e11 and count share 0.28 while
the release used the middle of [8.6e9, 3.4e10] (the bounds halved three times until the middle
priced) and a count share of 0.41. Below, at bounds ``[0, 2^j]`` where the middle prices and
a centre at the upper bound with a count share of 0.99 does not: before, that centre was
reported; after, only centres the release is priced at (none there). Exact (the fallback is
a function of public pricing parameters, no noise involved).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.builder import PreparedQuery
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource


def _session() -> dpa.Session:
    rng = np.random.default_rng(2)
    n = 3000
    frame = pd.DataFrame(
        {"uid": np.arange(n), "g": rng.integers(0, 3, n), "v": rng.lognormal(20.0, 1.0, n)}
    )
    return dpa.Session(
        frame,
        privacy_unit="uid",
        budget=Budget(epsilon=10.0),
        source_of_randomness=RandomSource(seed=3, insecure=True),
    )


def _query(s: dpa.Session) -> dpa.Query:
    return s.query().group_by("g", keys=[0, 1, 2]).agg(m=dpa.mean("v", bounds="auto"))


def _wide_upper(prepared: PreparedQuery, centre_prices: bool) -> float:
    """An upper bound ``2^j`` at which the middle prices (public pricing parameters of the
    release step ``prepared``) and a centre at the upper bound with a count share of 0.99
    does (``centre_prices``) or does not."""

    def prices(estimate: tuple[float, ...], hi: float) -> bool:
        try:
            (sp,) = prepared.with_bounds({"m": estimate}).pricing.stats
        except PrivacyParameterError:
            return False
        # at the given bounds (not halved), centred when a centre is given
        return sp.stat.bounds == (0.0, hi) and (len(estimate) == 2) == (sp.stat.centring is None)

    for j in range(22, 51):
        hi = 2.0**j
        if prices((0.0, hi), hi) and prices((0.0, hi, hi, 0.99), hi) == centre_prices:
            return hi
    raise AssertionError("no such bound")  # pragma: no cover


def _run(monkeypatch: pytest.MonkeyPatch, centre_prices: bool) -> tuple[float, dict[str, Any]]:
    """A planned run whose bounds step returns ``(0, hi, hi, 0.99)`` for the mean (``hi`` from
    :func:`_wide_upper` at the run's own contribution bounds); ``hi`` and the run's plan."""
    chosen: list[float] = []

    def estimate(self: PreparedQuery, result: Any, source: Any = None) -> dict[str, Any]:
        chosen.append(_wide_upper(self, centre_prices))
        return {"m": (0.0, chosen[0], chosen[0], 0.99)}

    monkeypatch.setattr(PreparedQuery, "estimate_bounds", estimate)
    out = _query(_session()).run(epsilon=0.05)
    plan: dict[str, Any] = out.attrs["dpkit"]["plan"]
    assert out.attrs["dpkit"]["columns"]["m"]["bounds"] == [0.0, chosen[0]]  # not halved
    return chosen[0], plan


def test_a_mean_that_falls_back_to_the_middle_reports_no_centre(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, plan = _run(monkeypatch, centre_prices=False)
    assert "centres" not in plan  # before: {"m": {"centre": hi, "count_share": 0.99}}


def test_a_centred_mean_reports_the_centre_it_is_priced_at(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hi, plan = _run(monkeypatch, centre_prices=True)
    assert plan["centres"] == {"m": {"centre": hi, "count_share": 0.99}}
