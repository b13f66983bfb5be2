"""Testers: the events they propose and how they count them."""

from __future__ import annotations

import numpy as np

from dpkit.audit import (
    ClassifierTester,
    HistogramTester,
    ThresholdTester,
    default_testers,
    float_low_bits,
    float_structure,
)


def test_threshold_events_count_upper_tails() -> None:
    a = np.array([0.0, 1.0, 2.0, 3.0])
    b = np.array([1.0, 1.0, 5.0, 7.0])
    fitted = ThresholdTester().fit(a, b)
    assert fitted is not None
    # few distinct values: every value but the largest is a threshold
    assert fitted.size == 5  # distinct values 0, 1, 2, 3, 5, 7 minus the largest
    np.testing.assert_array_equal(fitted.counts(a), [3, 2, 1, 0, 0])
    np.testing.assert_array_equal(fitted.counts(b), [4, 2, 2, 2, 1])
    assert "> 1" in fitted.describe(1)


def test_threshold_candidates_reach_both_tails() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal(100_000), rng.standard_normal(100_000) + 1
    fitted = ThresholdTester(points=90).fit(a, b)
    assert fitted is not None and 60 <= fitted.size <= 90
    ca = fitted.counts(a)
    assert ca.max() > 99_000 and ca.min() < 100  # thresholds deep in both tails
    assert ThresholdTester().fit(np.array(["x"]), np.array(["y"])) is None


def test_histogram_prefixes_follow_the_likelihood_ratio() -> None:
    a = np.array([0] * 50 + [1] * 30 + [2] * 20)
    b = np.array([0] * 10 + [1] * 30 + [2] * 60)
    fitted = HistogramTester().fit(a, b)
    assert fitted is not None and fitted.size == 2
    # order by ratio: 0 (5x), 1 (1x), 2 (1/3x); prefixes {0}, {0, 1}
    np.testing.assert_array_equal(fitted.counts(a), [50, 80])
    np.testing.assert_array_equal(fitted.counts(b), [10, 40])
    # unseen categories belong to no prefix
    np.testing.assert_array_equal(fitted.counts(np.array([7, 7, 0])), [1, 1])


def test_histogram_over_rows_and_objects() -> None:
    a = np.array([[1, 0], [1, 0], [0, 1]], dtype=bool)
    b = np.array([[0, 1], [0, 1], [0, 1]], dtype=bool)
    fitted = HistogramTester().fit(a, b)
    assert fitted is not None
    np.testing.assert_array_equal(fitted.counts(a), [2])
    np.testing.assert_array_equal(fitted.counts(b), [0])
    objs = np.empty(3, dtype=object)
    objs[:] = [("x", 1), ("x", 1), ("y", 2)]
    other = np.empty(3, dtype=object)
    other[:] = [("y", 2)] * 3
    fo = HistogramTester().fit(objs, other)
    assert fo is not None and list(fo.counts(objs)) == [2]


def _lattice_bits(code: np.ndarray) -> np.ndarray:
    # finite non-zero doubles: code = 1 + (sign 2**11 + exponent field) 64 + significant bits
    return (np.asarray(code) - 1) % 64


def test_float_structure_separates_lattices() -> None:
    # 0.75 = 0.11b has 2 significant bits, 0.3 has 52 or 53; the sign and binade are kept.
    codes = float_structure(np.array([0.75, -0.75, 0.3, 1.5, 0.0, np.inf]))
    assert len(set(codes.tolist())) == 6
    assert _lattice_bits(float_structure(np.array([0.75])))[0] == 2
    assert _lattice_bits(float_structure(np.array([1.5])))[0] == 2
    assert _lattice_bits(float_structure(np.array([0.3])))[0] >= 52
    # multiples of 2**-53 in (0, 1/2) need fewer bits than generic doubles there
    k = np.arange(1, 1000) * 2.0**-53 * 2**40
    assert np.all(_lattice_bits(float_structure(k)) <= 53)
    # subnormals: the lattice 2**-1074 Z (lowest bit set) vs 2**-1073 Z
    sub = float_structure(np.array([5e-324, 1e-323, 3 * 5e-324]))
    assert sub[0] == sub[2] != sub[1]


def test_float_structure_sees_every_structural_bit() -> None:
    # Regression: the sign came from ``y < 0``, so -0.0 and +0.0 shared a category, as did
    # every NaN. Each of these doubles must get its own category.
    payload = np.array(
        [0x7FF8000000000001, 0xFFF8000000000000, 0x7FF4000000000000], dtype=np.uint64
    ).view(np.float64)
    special = np.concatenate([[0.0, -0.0, np.inf, -np.inf, np.nan], payload])
    codes = float_structure(special)
    assert len(set(codes.tolist())) == special.size
    # their codes are their bit patterns, outside the range of the finite codes
    np.testing.assert_array_equal(codes, special.view(np.int64))
    finite = float_structure(np.array([5e-324, 2.0**-1022, 1.0, -1.0, 1.7e308, -1.7e308]))
    assert finite.min() >= 1 and finite.max() < 1 << 21
    # the exponent field is kept unclipped: 2**-100 and 2**-900 (old code: both clipped to -64)
    assert float_structure(np.array([2.0**-100]))[0] != float_structure(np.array([2.0**-900]))[0]


def test_float_low_bits_sees_bits_above_the_lowest_set_one() -> None:
    # 1 + 5 ulp and 1 + 7 ulp: same sign, exponent and lattice position (lowest bit set), so
    # float_structure cannot tell them apart; their low bits differ.
    ulp = 2.0**-52
    a, b = np.array([1 + 5 * ulp]), np.array([1 + 7 * ulp])
    assert float_structure(a)[0] == float_structure(b)[0]
    assert float_low_bits(a)[0] != float_low_bits(b)[0]
    assert (float_low_bits(a)[0] - 1) % 256 == 5
    special = np.array([0.0, -0.0, np.inf, np.nan])
    np.testing.assert_array_equal(float_low_bits(special), special.view(np.int64))
    codes = float_low_bits(np.array([5e-324, -1.7e308, 1.0]))
    assert codes.min() >= 1 and codes.max() < 1 << 21


def test_histogram_tester_separates_signed_zeros() -> None:
    # side A: +0.0 only; side B: half -0.0. The category -0.0 is seen on side B only.
    a = np.zeros(1000)
    b = np.where(np.arange(1000) % 2 == 0, -0.0, 0.0)
    fitted = HistogramTester(feature=float_structure).fit(a, b)
    assert fitted is not None
    ca, cb = fitted.counts(a), fitted.counts(b)
    assert np.max(np.abs(ca - cb)) == 500


def test_classifier_finds_the_separating_direction() -> None:
    rng = np.random.default_rng(2)
    a = rng.standard_normal((20_000, 5))
    b = rng.standard_normal((20_000, 5))
    b[:, 3] += 1.0
    for method in ("logistic", "nearest_mean"):
        fitted = ClassifierTester(method=method).fit(a, b)
        assert fitted is not None
        ca, cb = fitted.counts(a), fitted.counts(b)
        # some threshold separates with TV close to the optimum 2 Phi(1/2) - 1 = 0.383
        assert np.max(np.abs(ca - cb)) / 20_000 > 0.35


def test_default_testers_by_output_type() -> None:
    names = [t.name for t in default_testers(np.zeros(3))]
    assert names == ["threshold", "histogram[float_structure]", "bits"]
    assert [t.name for t in default_testers(np.zeros(3, dtype=int))] == ["threshold", "histogram"]
    assert "histogram" in [t.name for t in default_testers(np.zeros((3, 2), dtype=bool))]
    assert default_testers(np.zeros((3, 2)))[0].name == "classifier[logistic]"


def test_bit_tester_counts_every_bit_exactly() -> None:
    from dpkit.audit import BitTester

    rng = np.random.default_rng(5)
    a = np.concatenate([rng.laplace(size=70_000), [-0.0, 0.0, np.inf, -np.inf, 5e-324]])
    b = a * 3.0
    fitted = BitTester().fit(a, b)
    assert fitted is not None
    raw = a.view(np.uint64)
    direct = np.array([int(((raw >> np.uint64(k)) & np.uint64(1)).sum()) for k in range(64)])
    live = [int(k) for k in fitted.bits]  # type: ignore[attr-defined]
    np.testing.assert_array_equal(fitted.counts(a), direct[live])
    assert 63 in live and "sign bit" in fitted.describe(live.index(63))
    assert "significand bit 20" in fitted.describe(live.index(20))
    # constant bits are dropped; integer and 2-D outputs are not this tester's
    assert BitTester().fit(np.ones(10), np.ones(10)) is None
    assert BitTester().fit(np.arange(10), np.arange(10)) is None
    assert BitTester().fit(np.zeros((5, 2)), np.zeros((5, 2))) is None
