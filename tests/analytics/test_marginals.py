"""Exact joint counts (the engine's cell_counts measure) against counts made in pandas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.analytics.marginals import BinPart, CategoryPart, marginal_counts
from dpkit.errors import PlanError, PrivacyParameterError


def _frame(n: int = 2_000) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    x = rng.normal(5.0, 4.0, n)
    x[rng.random(n) < 0.05] = np.nan
    x[:3] = [np.inf, -np.inf, 10.0]  # clamped into the edges
    c = rng.choice(["a", "b", "c", None], n, p=[0.4, 0.3, 0.2, 0.1])  # "c" is undeclared
    return pd.DataFrame({"x": x, "c": c, "k": rng.integers(0, 3, n)})


def _reference(df: pd.DataFrame) -> np.ndarray:
    edges = np.array([0.0, 2.5, 5.0, 7.5, 10.0])
    xc = np.clip(df.x.to_numpy(), 0.0, 10.0)
    xb = np.where(np.isnan(xc), 4, np.minimum(np.searchsorted(edges, xc, side="right") - 1, 3))
    cb = df.c.map({"a": 0, "b": 1}).fillna(2).astype(int).to_numpy()
    kb = df.k.to_numpy()  # categories 0, 1, 2 declared: none missing
    out = np.zeros((3, 5, 4), dtype=np.int64)
    np.add.at(out, (cb, xb, kb), 1)
    return out


def test_joint_counts_match_pandas_with_missing_clamped_and_undeclared_values() -> None:
    df = _frame()
    s = Session(df, privacy_unit=None, budget=Budget(epsilon=1.0))
    parts = (
        CategoryPart("c", ("a", "b")),
        BinPart("x", (0.0, 2.5, 5.0, 7.5, 10.0)),
        CategoryPart("k", (0, 1, 2)),
    )
    one, two = marginal_counts(s, [parts, parts[:2]], max_rows=1).run()
    ref = _reference(df)
    np.testing.assert_array_equal(np.array(one).reshape(3, 5, 4), ref)
    np.testing.assert_array_equal(np.array(two).reshape(3, 5), ref.sum(axis=2))
    assert sum(one) == len(df)
    assert s.budget.spent == (0.0, 0.0)


def test_a_unit_keeps_max_rows_for_every_marginal() -> None:
    df = _frame()
    df["uid"] = np.arange(len(df)) // 4
    s = Session(df, privacy_unit="uid", budget=Budget(epsilon=1.0))
    a, b = marginal_counts(
        s, [(CategoryPart("c", ("a",)),), (BinPart("x", (0.0, 10.0)),)], max_rows=3
    ).run()
    assert sum(a) == sum(b) == 3 * df.uid.nunique()


def test_refusals() -> None:
    s = Session(_frame(), privacy_unit=None, budget=Budget(epsilon=1.0))
    with pytest.raises(PrivacyParameterError):
        marginal_counts(s, [], max_rows=1)
    with pytest.raises(PrivacyParameterError):
        marginal_counts(s, [("x",)], max_rows=1)  # type: ignore[list-item]
    with pytest.raises(PrivacyParameterError):
        marginal_counts(s, [(CategoryPart("nope", (1,)),)], max_rows=1)
    big = BinPart("x", tuple(float(i) for i in range(5_000)))
    with pytest.raises(PlanError, match="joint cells"):
        marginal_counts(s, [(big, big)], max_rows=1)
