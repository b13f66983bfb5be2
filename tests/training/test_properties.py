"""Invariants of the replace-one pair of sampling without replacement and the scheme checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpkit._loss.pairs import ReplacePair, pair_profile
from dpkit.accounting.batching import BatchScheme
from dpkit.errors import PrivacyParameterError


@settings(max_examples=60, deadline=None)
@given(st.floats(0.3, 5.0), st.floats(1e-4, 1.0), st.floats(-8.0, 8.0))
def test_replace_pair_tails_are_consistent(s: float, q: float, e: float) -> None:
    pair = ReplacePair(s, q)
    sf_p, sf_q, cdf_p, cdf_q = (float(v[0]) for v in pair.tails(np.array([e])))
    assert sf_p + cdf_p == pytest.approx(1.0, abs=1e-12)
    assert sf_q + cdf_q == pytest.approx(1.0, abs=1e-12)
    # the loss threshold is right: P(L > e) >= e^e Q(L > e), and the profile is monotone
    assert sf_p >= math.exp(e) * sf_q - 1e-12
    assert pair_profile(pair, e) >= pair_profile(pair, e + 0.5) - 1e-15
    # symmetry: Q's loss is minus P's, so P(L <= -e) ... the profile at 0 is the TV distance
    y = np.linspace(-12 * s, 12 * s, 20001)
    dens = lambda m: np.exp(-((y - m) ** 2) / (2 * s * s))  # noqa: E731
    p = (1 - q) * dens(0.0) + q * dens(-1.0)
    qq = (1 - q) * dens(0.0) + q * dens(1.0)
    tv = 0.5 * np.abs(p - qq).sum() * (y[1] - y[0]) / (s * math.sqrt(2 * math.pi))
    assert pair_profile(pair, 0.0) == pytest.approx(tv, abs=1e-6)


@pytest.mark.parametrize(
    "bad",
    [
        {"batch_size": 0},
        {"batch_size": 7, "dataset_size": 5},
        {"dataset_size": float("nan")},
        {"batch_size": True},
        {"name": "balls_in_bin"},
        {"max_batch_size": 3},
        {"name": "truncated_poisson"},
        {"name": "user_poisson"},
        {"name": "user_poisson", "examples_per_user": 0},
    ],
)
def test_scheme_validation(bad: dict[str, object]) -> None:
    kw: dict[str, object] = {"name": "poisson", "dataset_size": 100, "batch_size": 10}
    kw.update(bad)
    with pytest.raises(PrivacyParameterError):
        BatchScheme(**kw)  # type: ignore[arg-type]
