"""The local-DP contract applied to every protocol exported by :mod:`dpkit.ldp`."""

from __future__ import annotations

import inspect
import math
from typing import Any, ClassVar

import numpy as np
import pytest
from ldp_contract import LdpContract

from dpkit import ldp
from dpkit.ldp import client

DOMAIN = 5


class _Oracle(LdpContract):
    cls: Any = None

    def build(self, epsilon: Any) -> Any:
        return self.cls(epsilon=epsilon, domain=DOMAIN)

    def client_kwargs(self) -> dict[str, Any]:
        return {"domain": DOMAIN}

    def inputs(self) -> list[Any]:
        return list(range(DOMAIN))


class TestRandomizedResponseContract(LdpContract):
    def build(self, epsilon: Any) -> Any:
        return ldp.RandomizedResponse(epsilon=epsilon)

    def inputs(self) -> list[Any]:
        return [0, 1]


class TestGRRContract(_Oracle):
    cls = ldp.GRR


class TestSUEContract(_Oracle):
    cls = ldp.SUE


class TestOUEContract(_Oracle):
    cls = ldp.OUE


class TestRAPPORContract(_Oracle):
    cls = ldp.RAPPOR


class TestLOLOHAContract(_Oracle):
    cls = ldp.LOLOHA
    event_epsilons = (0.75, 4.0)  # g grows with the lifetime epsilon (2 epsilon here)


class TestOLHContract(_Oracle):
    cls = ldp.OLH
    event_epsilons = (0.75, 4.0)  # the hash range e^eps + 1 grows with epsilon


class TestBLHContract(_Oracle):
    cls = ldp.BLH


class TestHadamardResponseContract(_Oracle):
    cls = ldp.HadamardResponse


class _Sketch(LdpContract):
    """Tiny sketches so that the report law can be enumerated (k 2**m or 2 k m reports)."""

    cls: Any = None
    kwargs: ClassVar[dict[str, Any]] = {"width": 4, "hashes": 3, "hash_seed": 7}
    event_epsilons = (0.75, 4.0, 30.0)

    def build(self, epsilon: Any) -> Any:
        return self.cls(epsilon=epsilon, domain=DOMAIN, **self.kwargs)

    def client_kwargs(self) -> dict[str, Any]:
        return {"domain": DOMAIN, **self.kwargs}

    def inputs(self) -> list[Any]:
        return list(range(DOMAIN))


class TestCMSContract(_Sketch):
    cls = ldp.CMS


class TestHCMSContract(_Sketch):
    cls = ldp.HCMS


class TestOLHSketchContract(_Sketch):
    cls = ldp.OLHSketch


class _Mean(LdpContract):
    is_frequency_oracle = False
    event_epsilons = (0.75, 4.0)  # the number of output cells grows with epsilon
    cls: Any = None
    kwargs: ClassVar[dict[str, Any]] = {}

    def build(self, epsilon: Any) -> Any:
        return self.cls(epsilon=epsilon, **self.kwargs)

    def client_kwargs(self) -> dict[str, Any]:
        return dict(self.kwargs)

    def inputs(self) -> list[Any]:
        return [-1.0, -0.25, 0.0, 0.5, 1.0]


class TestDuchiContract(_Mean):
    cls = ldp.Duchi


class TestPiecewiseContract(_Mean):
    cls = ldp.Piecewise
    kwargs: ClassVar[dict[str, Any]] = {"resolution": 64}


class TestHybridContract(_Mean):
    cls = ldp.Hybrid
    kwargs: ClassVar[dict[str, Any]] = {"resolution": 64}


class _HeavyHitter(LdpContract):
    """Heavy-hitter protocols over ``2**bits`` items (no full-domain estimate: the shape check
    looks at the discovered items instead)."""

    cls: Any = None
    kwargs: ClassVar[dict[str, Any]] = {"bits": 3, "lengths": (1, 3), "width": 2, "hashes": 2}
    event_epsilons = (0.75, 12.0)

    def build(self, epsilon: Any) -> Any:
        return self.cls(epsilon=epsilon, **self.kwargs)

    def client_kwargs(self) -> dict[str, Any]:
        return dict(self.kwargs)

    def inputs(self) -> list[Any]:
        return list(range(8))

    def test_estimate_shape(self) -> None:
        proto = self.build(1.0)
        values = self.inputs() * 50
        reports = proto.randomize_many(values)
        hh = proto.heavy_hitters(reports, top=3)
        assert hh.n == len(values) and hh.rejected == 0
        assert hh.items.size <= 3 and np.all(np.isfinite(hh.counts))
        assert np.all(hh.ci_low <= hh.counts) and np.all(hh.counts <= hh.ci_high)

    def test_variance_positive(self) -> None:
        proto = self.build(1.0)
        if not hasattr(proto, "variance"):
            pytest.skip("PEM states no closed-form variance of a discovered item")
        for n in (1, 1000):
            assert 0.0 < proto.variance(n, 0.25) < math.inf


class TestPEMContract(_HeavyHitter):
    cls = ldp.PEM

    def test_variance_positive(self) -> None:
        # PEM states no closed-form variance of a discovered item (its counts come from the
        # last prefix round, after selection), so it must not offer one that would be wrong.
        assert not hasattr(self.build(1.0), "variance")


class TestTreeHistogramContract(_HeavyHitter):
    cls = ldp.TreeHistogram


class TestSFPContract(_HeavyHitter):
    cls = ldp.SFP
    kwargs: ClassVar[dict[str, Any]] = {
        "bits": 3,
        "lengths": (1, 3),
        "hash_bits": 1,
        "width": 2,
        "hashes": 2,
    }


HEAVY_HITTERS = {
    ldp.PEM: TestPEMContract,
    ldp.TreeHistogram: TestTreeHistogramContract,
    ldp.SFP: TestSFPContract,
}

ENROLLED = {
    ldp.RandomizedResponse: TestRandomizedResponseContract,
    ldp.GRR: TestGRRContract,
    ldp.SUE: TestSUEContract,
    ldp.OUE: TestOUEContract,
    ldp.RAPPOR: TestRAPPORContract,
    ldp.LOLOHA: TestLOLOHAContract,
    ldp.OLH: TestOLHContract,
    ldp.BLH: TestBLHContract,
    ldp.HadamardResponse: TestHadamardResponseContract,
    ldp.CMS: TestCMSContract,
    ldp.HCMS: TestHCMSContract,
    ldp.OLHSketch: TestOLHSketchContract,
    ldp.Duchi: TestDuchiContract,
    ldp.Piecewise: TestPiecewiseContract,
    ldp.Hybrid: TestHybridContract,
}


def test_every_protocol_is_enrolled() -> None:
    protocols = {
        obj
        for name in ldp.__all__
        if inspect.isclass(obj := getattr(ldp, name))
        and issubclass(obj, (ldp.FrequencyOracle, ldp.MeanMechanism))
        and not inspect.isabstract(obj)
    }
    assert protocols == set(ENROLLED)
    for cls, suite in ENROLLED.items():
        assert issubclass(suite, LdpContract)
        assert type(suite().build(1.0)) is cls


def test_every_heavy_hitter_protocol_is_enrolled() -> None:
    protocols = {
        obj
        for name in ldp.__all__
        if inspect.isclass(obj := getattr(ldp, name)) and issubclass(obj, client.PEM)
    }
    assert protocols == set(HEAVY_HITTERS)
    for cls, suite in HEAVY_HITTERS.items():
        assert type(suite().build(1.0)) is cls
