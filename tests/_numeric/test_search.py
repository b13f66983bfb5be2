"""The one bracket-and-bisect search: certified ends, stopping rule, expansion and its cap."""

from __future__ import annotations

import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dpkit._numeric.search import SearchError, float_key, float_of_key, search, search_int
from dpkit.errors import PrivacyParameterError

finite = st.floats(allow_nan=False, allow_infinity=False)
positive = st.floats(min_value=1e-300, max_value=1e300)


# ------------------------------------------------------------------------------ the keys
@given(finite, finite)
def test_keys_keep_the_order_of_the_reals(a: float, b: float) -> None:
    assert (float_key(a) < float_key(b)) == (a < b)
    assert (float_key(a) == float_key(b)) == (a == b)  # -0.0 == 0.0 share the key 0


@given(finite)
def test_keys_count_doubles_and_round_trip(x: float) -> None:
    k = float_key(x)
    assert float_of_key(k) == x
    if x < 1.7976931348623157e308:
        assert float_of_key(k + 1) == math.nextafter(x, math.inf)
    assert float_of_key(k - 1) == math.nextafter(x, -math.inf) or x == 0.0


def test_key_of_negative_zero_is_zero_and_maps_back_to_positive_zero() -> None:
    assert float_key(-0.0) == 0 == float_key(0.0)
    back = float_of_key(0)
    assert struct.pack("<d", back) == struct.pack("<d", 0.0)
    assert float_of_key(-1) == -5e-324 and float_of_key(1) == 5e-324


# ------------------------------------------------------------- exact answers, both sides
def _bracket(t: float, gap_lo: float, gap_hi: float) -> tuple[float, float]:
    """``lo < t <= hi``, finite: t moved down by one gap (at least one double), up by the other."""
    lo = min(t - gap_lo, math.nextafter(t, -math.inf))
    hi = min(t + gap_hi, 1.7976931348623157e308)
    return lo, hi


inner = st.floats(min_value=-1e300, max_value=1e300)
gaps = st.floats(min_value=0.0, max_value=1e300)


@given(inner, gaps, gaps)
def test_holds_above_returns_the_smallest_double_at_or_above_the_threshold(
    t: float, gap_lo: float, gap_hi: float
) -> None:
    lo, hi = _bracket(t, gap_lo, gap_hi)
    calls: list[float] = []

    def ok(x: float) -> bool:
        calls.append(x)
        return x >= t

    got = search(ok, lo, hi, holds="above")
    # a key range holds at most 2**64 doubles: 64 halvings plus the certifying call
    assert len(calls) <= 65
    assert got == t  # adjacent doubles: exactly the threshold (t is a double)
    assert ok(got) and not ok(math.nextafter(got, -math.inf))


@given(inner, gaps, gaps)
def test_holds_below_returns_the_largest_double_at_or_below_the_threshold(
    t: float, gap_lo: float, gap_hi: float
) -> None:
    hi, lo = (-x for x in _bracket(-t, gap_hi, gap_lo))  # lo <= t < hi
    got = search(lambda x: x <= t, lo, hi, holds="below")
    assert got == t
    assert not math.nextafter(got, math.inf) <= t


@given(st.integers(-(10**30), 10**30), st.integers(1, 10**30), st.integers(1, 10**30))
def test_search_int_is_exact(t: int, below: int, above: int) -> None:
    assert search_int(lambda j: j >= t, t - below, t + above, holds="above") == t
    assert search_int(lambda j: j <= t, t - above, t + below, holds="below") == t


@given(st.lists(st.booleans(), min_size=1, max_size=400), positive)
def test_a_non_monotone_predicate_still_gets_a_certified_end(
    bits: list[bool], scale: float
) -> None:
    # Numerical noise can break monotonicity: the returned end is still one where ok held.
    def ok(x: float) -> bool:
        return x >= 1.0 or bits[float_key(x) % len(bits)]

    def mirrored(x: float) -> bool:
        return ok(-x)

    got = search(ok, 0.0, 1.0, holds="above")
    assert ok(got)
    got = search(mirrored, -1.0, 0.0, holds="below")
    assert mirrored(got)


def test_rtol_stops_early_and_keeps_the_failing_end_within_rtol() -> None:
    t = math.pi
    seen: list[float] = []

    def ok(x: float) -> bool:
        seen.append(x)
        return x >= t

    got = search(ok, 1.0, 4.0, holds="above", rtol=1e-3)
    assert got >= t and got <= t * (1 + 1e-3)
    failing = [x for x in seen if x < t]
    assert max(failing) >= got * (1 - 1e-3)
    assert len(seen) < 20  # far fewer than the 50-odd halvings to adjacent doubles


# -------------------------------------------------------------------------- expansion
def test_expand_up_holds_above_grows_hi_and_raises_past_the_limit() -> None:
    assert search(lambda x: x >= 1000.5, 0.0, 1.0, holds="above", expand="up") == 1000.5
    with pytest.raises(SearchError, match="nothing up to"):
        search(lambda x: x >= 1e9, 0.0, 1.0, holds="above", expand="up", limit=1e7)
    # the error is a dpkit parameter error
    assert issubclass(SearchError, PrivacyParameterError)


def test_expand_up_holds_below_returns_the_last_certified_end_at_the_limit() -> None:
    assert search(lambda x: x <= 77.25, 0.0, 1.0, holds="below", expand="up") == 77.25
    seen: list[float] = []

    def ok(x: float) -> bool:
        seen.append(x)
        return True

    assert search(ok, 0.0, 1.0, holds="below", expand="up", limit=1e6) == 2.0**19
    assert max(seen) == 2.0**19  # nothing beyond the limit was evaluated


def test_expand_down_holds_above_and_the_mirror() -> None:
    assert search(lambda x: x >= 0.003, 0.5, 1.0, holds="above", expand="down") == 0.003
    # every point down to the limit holds: the last evaluated one is returned
    assert search(lambda x: True, 0.5, 1.0, holds="above", expand="down", limit=0.1) == 0.125
    assert search(
        lambda x: x <= -3.0 or x < 0.01, 0.5, 1.0, holds="below", expand="down"
    ) == math.nextafter(0.01, 0.0)
    with pytest.raises(SearchError, match="nothing down to"):
        search(lambda x: False, 0.5, 1.0, holds="below", expand="down", limit=0.1)


def test_the_end_to_certify_must_hold() -> None:
    with pytest.raises(SearchError, match="fails at the end"):
        search(lambda x: x >= 2.0, 0.0, 1.0, holds="above")
    with pytest.raises(SearchError, match="fails at"):
        search(lambda x: x >= 2.0, 0.5, 1.0, holds="above", expand="down")
    with pytest.raises(SearchError, match="fails at"):
        search(lambda x: x < 0.0, 0.0, 1.0, holds="below", expand="up")


def test_the_iteration_cap_raises_instead_of_looping() -> None:
    with pytest.raises(SearchError, match="within 10 evaluations"):
        search(lambda x: x >= 0.3, 0.0, 1.0, holds="above", max_steps=10)
    # an expansion that never ends (no limit) is stopped by the cap too
    with pytest.raises(SearchError, match="evaluations"):
        search_int(lambda j: False, 0, 1, holds="above", expand="up")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"lo": 1.0, "hi": 1.0},
        {"lo": 2.0, "hi": 1.0},
        {"lo": math.nan, "hi": 1.0},
        {"lo": 0.0, "hi": math.inf},
        {"lo": 0.0, "hi": 1.0, "holds": "left"},
        {"lo": 0.0, "hi": 1.0, "factor": 1.0},
        {"lo": 0.0, "hi": 1.0, "rtol": -1.0},
        {"lo": 0.0, "hi": 1.0, "expand": "down"},
        {"lo": -2.0, "hi": 0.0, "expand": "up"},
    ],
)
def test_bad_brackets_and_options_are_refused(kwargs: dict[str, object]) -> None:
    args: dict[str, object] = {"holds": "above"}
    args.update(kwargs)
    with pytest.raises(SearchError):
        search(lambda x: True, **args)  # type: ignore[arg-type]
    with pytest.raises(SearchError):
        search_int(lambda j: True, 3, 3, holds="above")


def test_expand_up_returns_the_floor_when_it_already_holds() -> None:
    """[0, 1] expanding up with ok(0) true gives 0, not the smallest positive double."""
    calls: list[float] = []

    def ok(x: float) -> bool:
        calls.append(x)
        return x >= 0.0

    assert search(ok, 0.0, 1.0, holds="above", expand="up") == 0.0
    assert calls == [0.0]
    # The floor that fails is still bisected past, to the smallest double that holds.
    assert search(lambda x: x >= 0.25, 0.0, 1.0, holds="above", expand="up") == 0.25
    assert search(lambda x: x >= 3.0, 0.0, 1.0, holds="above", expand="up") == 3.0
