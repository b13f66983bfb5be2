"""Server side: batches, shards, malformed reports, post-processing, protocol choice."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from dpkit import ldp
from dpkit.errors import PrivacyParameterError
from dpkit.events import PureDpEvent, RandomizedResponseEvent
from dpkit.mechanisms._calibration import calibrated_epsilon
from dpkit.noise import RandomSource

PROTOCOLS = [ldp.GRR, ldp.SUE, ldp.OUE, ldp.OLH, ldp.BLH, ldp.HadamardResponse]


def _src(seed: int = 0) -> RandomSource:
    return RandomSource(seed=seed, insecure=True)


def test_public_names() -> None:
    for name in (
        "RandomizedResponse",
        "GRR",
        "SUE",
        "OUE",
        "OLH",
        "BLH",
        "HadamardResponse",
        "Duchi",
        "Piecewise",
        "Hybrid",
        "best_protocol",
        "check_ldp",
    ):
        assert name in ldp.__all__
    assert sorted(ldp.__all__) == sorted(
        n
        for n in dir(ldp)
        if not n.startswith("_")
        and n not in {"client", "annotations"}
        and not isinstance(getattr(ldp, n), type(ldp))
    )


@pytest.mark.parametrize("cls", PROTOCOLS)
def test_batches_and_shards_give_the_same_estimate(cls: type) -> None:
    proto = cls(epsilon=1.0, domain=37)
    x = _src(1).integers(37, 3000)
    reports = proto.randomize_many(x, source=_src(2))
    whole = proto.aggregator()
    whole.add(reports)
    parts = [proto.aggregator() for _ in range(3)]
    for i, chunk in enumerate(np.array_split(reports, 7)):
        parts[i % 3].add(chunk)
    merged = parts[0].merge(parts[1]).merge(parts[2])
    assert merged.n == whole.n == 3000
    np.testing.assert_array_equal(merged.support, whole.support)
    np.testing.assert_allclose(merged.estimate().counts, whole.estimate().counts)


@pytest.mark.parametrize("cls", PROTOCOLS)
def test_client_list_reports_match_the_array_path(cls: type) -> None:
    proto = cls(epsilon=2.0, domain=11)
    reports = [proto.randomize(i % 11) for i in range(200)]
    agg = proto.aggregator()
    agg.add(reports)
    arr, bad = proto.coerce_reports(reports)
    assert bad == 0 and agg.n == 200
    np.testing.assert_array_equal(agg.support, proto.support_counts(arr))


MALFORMED = {
    "GRR": [-1, 11, 2.5, "3", None, True, [1]],
    "SUE": ["zz", "00", "ff0f", 5, None, "0008", b"0000"],
    "OUE": ["0g00", "000", 5, None, "00f8", ["00", "00"]],
    "OLH": [[0], [0, 1, 2], [-1, 0], [0, 99], "x", None, [0.0, 1], (True, 0)],
    "BLH": [[0], [1 << 40, 0], [0, 2], "x", None],
    "HadamardResponse": [-1, 16, 1.0, None, "1"],
}


@pytest.mark.parametrize("cls", PROTOCOLS)
def test_malformed_reports_are_counted_never_raised(cls: type) -> None:
    proto = cls(epsilon=1.0, domain=11)
    good = [proto.randomize(3) for _ in range(10)]
    bad = MALFORMED[cls.__name__]
    agg = proto.aggregator()
    assert agg.add(good + bad) == 10
    assert agg.rejected == len(bad) and agg.n == 10
    assert agg.add(12345) == 0  # not even a batch
    assert agg.rejected == len(bad) + 1
    est = agg.estimate()
    assert est.rejected == len(bad) + 1 and np.isfinite(est.counts).all()


def test_malformed_array_reports_are_counted() -> None:
    grr = ldp.GRR(epsilon=1.0, domain=5)
    agg = grr.aggregator()
    assert agg.add(np.array([0, 1, 5, -2, 4])) == 3 and agg.rejected == 2
    oue = ldp.OUE(epsilon=1.0, domain=12)  # 2 bytes, top 4 bits of byte 1 must be 0
    rows = np.zeros((3, 2), dtype=np.uint8)
    rows[1, 1] = 0x10
    agg = oue.aggregator()
    assert agg.add(rows) == 2 and agg.rejected == 1
    olh = ldp.OLH(epsilon=1.0, domain=9)
    agg = olh.aggregator()
    assert agg.add(np.array([[0, 0], [olh.keys, 0], [0, olh.g]])) == 1 and agg.rejected == 2
    duchi = ldp.Duchi(epsilon=1.0).aggregator()
    assert duchi.add([0, 1, 2, -1, 0.5, None]) == 2 and duchi.rejected == 4


def test_merge_refuses_different_protocols() -> None:
    a = ldp.OUE(epsilon=1.0, domain=8).aggregator()
    for other in (
        ldp.OUE(epsilon=2.0, domain=8),
        ldp.OUE(epsilon=1.0, domain=9),
        ldp.SUE(epsilon=1.0, domain=8),
    ):
        with pytest.raises(PrivacyParameterError):
            a.merge(other.aggregator())
    labelled = ldp.GRR(epsilon=1.0, domain=["a", "b"]).aggregator()
    with pytest.raises(PrivacyParameterError):
        labelled.merge(ldp.GRR(epsilon=1.0, domain=["b", "a"]).aggregator())
    m = ldp.Duchi(epsilon=1.0).aggregator()
    with pytest.raises(PrivacyParameterError):
        m.merge(ldp.Duchi(epsilon=2.0).aggregator())


def test_estimate_fields_and_postprocessing() -> None:
    proto = ldp.OUE(epsilon=0.5, domain=20)
    x = _src(3).integers(4, 5000)
    agg = proto.aggregator()
    agg.add(proto.randomize_many(x, source=_src(4)))
    raw = agg.estimate()
    assert raw.postprocess is None and raw.n == 5000 and len(raw.labels) == 20
    np.testing.assert_allclose(raw.ci_high - raw.ci_low, 2 * 1.959963984540054 * raw.std_errors)
    assert (raw.counts < 0).any()  # rare items come out negative without post-processing
    clip = agg.estimate(postprocess="clip")
    assert clip.counts.min() >= 0 and clip.counts.max() <= 5000
    norm = agg.estimate(postprocess="normalise")
    assert norm.counts.min() >= 0 and norm.counts.sum() == pytest.approx(5000)
    simp = agg.estimate(postprocess="simplex")
    assert simp.counts.min() >= 0 and simp.counts.sum() == pytest.approx(5000)
    np.testing.assert_array_equal(simp.std_errors, raw.std_errors)
    assert simp.frequencies.sum() == pytest.approx(1.0)
    assert set(simp.as_dict()) == set(range(20))
    with pytest.raises(PrivacyParameterError):
        agg.estimate(postprocess="softmax")
    with pytest.raises(PrivacyParameterError):
        agg.estimate(confidence=1.0)
    empty = proto.aggregator().estimate()
    assert empty.n == 0 and np.isinf(empty.std_errors).all()


@settings(max_examples=200, deadline=None)
@given(hnp.arrays(np.float64, st.integers(1, 30), elements=st.floats(-1e3, 1e3)))
def test_simplex_projection_is_the_nearest_point(v: np.ndarray) -> None:
    x = ldp.project_simplex(v)
    assert x.min() >= 0 and x.sum() == pytest.approx(1.0, abs=1e-9)
    # optimality (KKT): x = max(v - theta, 0) for one theta, and a random simplex point is no closer
    pos = x > 0
    theta = (v[pos] - x[pos]).mean()
    np.testing.assert_allclose(x, np.maximum(v - theta, 0), atol=1e-8)
    rng = np.random.default_rng(0)  # test-only comparison points, not a privacy path
    for w in rng.dirichlet(np.ones(v.size), 5):
        assert np.sum((x - v) ** 2) <= np.sum((w - v) ** 2) + 1e-9


def test_labelled_domains_round_trip() -> None:
    grr = ldp.GRR(epsilon=3.0, domain=["cat", "dog", "emu"])
    vals = ["cat"] * 300 + ["emu"] * 100
    est = grr.estimate(grr.randomize_many(vals, source=_src(5)))
    assert est.labels == ("cat", "dog", "emu")
    d = est.as_dict()
    assert d["cat"] > d["dog"] and abs(d["cat"] - 300) < 6 * est.std_errors[0]


def test_randomized_response_warner_estimate() -> None:
    rr = ldp.RandomizedResponse(p_truth=0.75)
    assert rr.proportion(100, 75) == pytest.approx(1.0)
    assert rr.proportion(100, 25) == pytest.approx(0.0)
    assert rr.proportion(100, 50) == pytest.approx(0.5)
    # the estimator's count equals Warner's pi_hat * n
    agg = rr.aggregator()
    agg.add([1] * 60 + [0] * 40)
    assert agg.estimate().counts[1] == pytest.approx(rr.proportion(100, 60) * 100)
    assert rr.variance(100, 0.2) == pytest.approx(100 * 0.75 * 0.25 / 0.25)
    assert rr.proportion_variance(100, 0.2) == pytest.approx(rr.variance(100, 0.2) / 100**2)
    assert rr.proportion_variance(100, 0.2, sampled=True) == pytest.approx(
        0.2 * 0.8 / 100 + 0.75 * 0.25 / (100 * 0.25)
    )
    assert isinstance(rr.event, RandomizedResponseEvent)
    assert rr.event.epsilon == pytest.approx(math.log(3))
    assert rr.randomize_many([True, False]).tolist() in ([0, 0], [0, 1], [1, 0], [1, 1])


def test_events() -> None:
    grr = ldp.GRR(epsilon=1.0, domain=10)
    assert isinstance(grr.event, RandomizedResponseEvent)
    # calibrated to epsilon (1 - 2**-40) (dpkit.ldp.client, Calibration), never above 1.0
    assert grr.event.epsilon == pytest.approx(1.0, rel=1e-12)
    assert 1.0 - 2.0**-39 <= grr.event.epsilon <= 1.0
    for proto in (ldp.OUE(epsilon=1.0, domain=10), ldp.Piecewise(epsilon=1.0)):
        assert proto.event == PureDpEvent(epsilon=calibrated_epsilon(1.0))


def test_best_protocol_follows_the_variances() -> None:
    # Wang et al.: GRR is best when d < 3 e^eps + 2, OUE/OLH otherwise
    assert isinstance(ldp.best_protocol(epsilon=2.0, domain=5), ldp.GRR)
    assert isinstance(ldp.best_protocol(epsilon=1.0, domain=1024), (ldp.OUE, ldp.OLH))
    table = ldp.compare_protocols(epsilon=1.0, domain=1024, n=1000)
    best = ldp.best_protocol(epsilon=1.0, domain=1024)
    assert table[type(best).__name__] == min(table.values())
    assert set(table) == {"GRR", "SUE", "OUE", "OLH", "BLH", "HadamardResponse"}


def test_mean_aggregator() -> None:
    for mech in (ldp.Duchi(epsilon=2.0), ldp.Piecewise(epsilon=2.0), ldp.Hybrid(epsilon=2.0)):
        vals = np.linspace(-1, 1, 4001)
        reps = mech.randomize_many(vals, source=_src(6))
        a, b = mech.aggregator(), mech.aggregator()
        a.add(reps[:1000])
        b.add(reps[1000:])
        est = a.merge(b).estimate()
        assert est.n == 4001 and est.rejected == 0
        assert abs(est.mean) < 6 * est.std_error
        assert est.std_error == pytest.approx(math.sqrt(mech.variance(4001, 1 / 3)), rel=0.15)
        assert est.std_error_empirical >= est.std_error * 0.9
        assert est.std_error_worst >= math.sqrt(mech.variance(4001, 0.0)) - 1e-12
    assert math.isnan(ldp.Duchi(epsilon=1.0).aggregator().estimate().mean)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner, inner),
    max_leaves=6,
)


@settings(max_examples=150, deadline=None)
@given(junk=st.lists(_JSON, max_size=12))
def test_any_junk_is_counted_and_never_raises(junk: list[object]) -> None:
    for proto in (
        ldp.GRR(epsilon=1.0, domain=9),
        ldp.OUE(epsilon=1.0, domain=9),
        ldp.OLH(epsilon=1.0, domain=9),
        ldp.HadamardResponse(epsilon=1.0, domain=9),
        ldp.Piecewise(epsilon=1.0, resolution=4),
    ):
        agg = proto.aggregator()
        good = [
            proto.randomize(3 if isinstance(proto, ldp.FrequencyOracle) else 0.5) for _ in range(3)
        ]
        accepted = agg.add(good + junk)
        assert accepted + agg.rejected == len(good) + len(junk)
        assert accepted >= 3
        est = agg.estimate()
        assert est.n == accepted


@pytest.mark.parametrize("d", [8, 13, 64, 1000])
@pytest.mark.parametrize("n", [1, 254, 255, 256, 9000])
def test_unary_support_counts_match_a_plain_bit_count(d: int, n: int) -> None:
    oue = ldp.OUE(epsilon=1.0, domain=d)
    rows = oue.randomize_many(_src(n + d).integers(d, n), source=_src(7))
    for r in (rows, rows[::2]):  # also a non-contiguous view
        ref = np.unpackbits(r, axis=1, bitorder="little").sum(axis=0)[:d]
        np.testing.assert_array_equal(oue.support_counts(r), ref)
