"""The count threshold of a grouped query prices extreme (epsilon, delta) promptly, with a
dpkit error or a result, before anything is charged.

Findings (red-team review of partition selection by the count's own noise):

* A huge epsilon hung pricing. With epsilon ``1e10`` (approx or zCDP session, a ``count()``
  grouped without public keys, ``P = 2``, ``R = 3``) the count's noise scale is about
  ``6e-10`` steps, and each tail the tau search evaluated, ``exp(-10^9)`` or smaller, was turned
  into a rational through its decimal text: a power of ten of a billion digits.
  ``prepare()`` and the free ``summarize()`` ran for more than 30 s without an answer (each
  larger epsilon worse), where the separate Gaussian selection of zCDP sessions answered at
  once. After: tails below ``2^-1100`` are rounded up to ``2^-1100`` (still upper bounds, and
  below every double, so no tau or delta that a double can show changes); the same queries
  price in well under a second with ``tau = 3``.
* A subnormal delta raised a builtin ``OverflowError`` (``2 k / delta`` is infinite) in
  ``CountThreshold.calibrate`` and in the Gaussian selection's tau search
  (``_calibrate_tau``), instead of pricing or refusing with a dpkit error. After: the bracket
  uses ``log(2 k) - log(delta)``; a query with ``delta = 1e-310`` prices (tau 4286, threshold
  delta ``8.9e-311``).
* The separate selection of a query without a count (truncated geometric,
  :class:`PartitionSelection`) hung too: its growth factor, a lower bound of ``e^(epsilon /
  k)``, was a Taylor sum of Fractions (``e^5000`` at epsilon ``1e4``: no answer after 20 s).
  After: the exponent is capped at 40 (a smaller factor only lowers every release
  probability; the table reaches ``2^63`` in two steps all the same).
* With ``delta / k`` below ``2^-63`` the truncated geometric table cannot leave 0 (``P(1) =
  floor(delta' 2^63) = 0``, and every later step keeps it there), yet it was built step by step
  up to its size limit before refusing: 2.6 s at delta ``1e-19``, 10.7 s at ``1e-25`` (a grouped
  query without a count then fell back to Gaussian thresholding). After: refused at once with the
  same fallback.

Reproducer: ``tools/reproducers/count_threshold_extreme_parameters.py``.
"""

from __future__ import annotations

import warnings
from fractions import Fraction

import pandas as pd
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms.partition_selection import (
    CountThreshold,
    GaussianPartitionSelection,
    PartitionSelection,
    _dg_tail_up,
    _dl_tail_up,
)

FLOOR = Fraction(1, 2**1100)


def _query(method: str) -> dpa.Query:
    data = pd.DataFrame({"uid": [f"u{i}" for i in range(20)], "g": ["a"] * 20})
    extra = {"method": "zcdp"} if method == "zcdp" else {}
    s = dpa.Session(data, privacy_unit="uid", budget=Budget(epsilon=1e100, delta=0.5, **extra))
    return (
        s.query().group_by("g").bound(max_partitions=2, max_rows_per_partition=3).agg(n=dpa.count())
    )


@pytest.mark.parametrize(
    ("tail", "scale", "t"),
    [
        (_dl_tail_up, 1e-4, 3),
        (_dl_tail_up, 1e-9, 3),
        (_dg_tail_up, 1e-3, 2),
        (_dg_tail_up, 1e-6, 2),
    ],
)
def test_a_tail_far_below_every_double_is_the_small_floor(
    tail: object, scale: float, t: int
) -> None:
    """Before: ``_dl_tail_up(1e-4, 3)`` (``e^-30000``) was a rational with a denominator of
    about 43,000 bits, and the smaller scales did not finish."""
    out = tail(scale, t)  # type: ignore[operator]
    assert out == FLOOR
    assert out.denominator.bit_length() <= 1101


def test_tails_above_the_floor_are_unchanged() -> None:
    """Ordinary tails keep their 35 significant digits (the floor touches nothing a double
    can show)."""
    assert Fraction(1, 10**12) < _dl_tail_up(3.0, 80) < Fraction(1, 10**11)
    assert _dl_tail_up(3.0, 2075) > FLOOR  # near 1e-300
    assert _dg_tail_up(2.0, 10) > FLOOR


@pytest.mark.parametrize("method", ["basic", "zcdp"])
@pytest.mark.parametrize("epsilon", [1e10, 1e50])
def test_a_huge_epsilon_prices_the_count_threshold(method: str, epsilon: float) -> None:
    q = _query(method)
    pr = q.prepare(epsilon=epsilon, delta=1e-6).pricing
    thr = pr.selection
    assert isinstance(thr, CountThreshold) and pr.selection_count == "n"
    assert thr.tau == thr.max_value  # a group of R rows passes for sure, and nothing less
    assert 0.0 < thr.threshold_delta <= 1e-6
    assert q.summarize(epsilon=epsilon, delta=1e-6) is not None


@pytest.mark.parametrize("delta", [1e-310, 5e-324])
def test_a_subnormal_delta_is_priced_or_refused_with_a_dpkit_error(delta: float) -> None:
    q = _query("basic")
    try:
        pr = q.prepare(epsilon=1.0, delta=delta).pricing
    except PrivacyParameterError:
        return
    assert 0.0 < pr.selection.threshold_delta <= delta
    assert pr.charged()["delta"] <= delta


@pytest.mark.parametrize("delta", [1e-310, 5e-324])
def test_the_separate_gaussian_selection_takes_a_subnormal_delta(delta: float) -> None:
    try:
        sel = GaussianPartitionSelection.from_epsilon_delta(
            epsilon=1.0, delta=delta, max_partitions=2
        )
    except PrivacyParameterError:
        return
    assert sel.threshold_delta <= delta


def test_a_mean_query_with_a_subnormal_delta_is_priced_or_refused() -> None:
    """Without a count the selection stays separate (Gaussian thresholding here)."""
    data = pd.DataFrame({"uid": ["a"], "g": ["a"], "x": [1.0]})
    s = dpa.Session(data, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=0.5))
    q = (
        s.query()
        .group_by("g")
        .bound(max_partitions=2, max_rows_per_partition=3)
        .agg(m=dpa.mean("x", bounds=(0.0, 1.0)))
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            pr = q.prepare(epsilon=1.0, delta=1e-310).pricing
        except PrivacyParameterError:
            return
    assert pr.charged()["delta"] <= 1e-310


@pytest.mark.parametrize("epsilon", [1e4, 1e6, 1e12])
def test_the_truncated_geometric_selection_prices_a_huge_epsilon(epsilon: float) -> None:
    sel = PartitionSelection.from_epsilon_delta(epsilon=epsilon, delta=1e-6, max_partitions=2)
    capped = PartitionSelection.from_epsilon_delta(epsilon=80.0, delta=1e-6, max_partitions=2)
    assert sel.threshold == capped.threshold <= 3
    assert [sel.probability_fraction(n) for n in range(4)] == [
        capped.probability_fraction(n) for n in range(4)
    ]
    assert sel.probability_fraction(0) == 0


def test_below_the_cap_the_truncated_geometric_table_is_unchanged() -> None:
    """epsilon / k = 39 (under the cap): the growth factor is the Taylor bound of e^39."""
    sel = PartitionSelection.from_epsilon_delta(epsilon=78.0, delta=1e-6, max_partitions=2)
    more = PartitionSelection.from_epsilon_delta(epsilon=80.0, delta=1e-6, max_partitions=2)
    assert sel.probability_fraction(2) < more.probability_fraction(2)


@pytest.mark.parametrize("delta", [1e-19, 1e-25])
def test_a_truncated_geometric_table_that_cannot_leave_zero_is_refused(delta: float) -> None:
    with pytest.raises(PrivacyParameterError, match="below 2\\*\\*-63"):
        PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=delta, max_partitions=1)


def test_a_delta_just_above_the_grid_still_builds_the_table() -> None:
    sel = PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=2e-19, max_partitions=1)
    assert sel.probability_fraction(1) == Fraction(1, 2**63)
