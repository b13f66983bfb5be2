"""The mechanism contract applied to every mechanism exported by :mod:`dpkit.mechanisms`."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from mechanism_contract import MechanismContract

import dpkit.mechanisms as mechanisms
from dpkit.mechanisms import (
    BinnedQuantile,
    BinnedQuantileInterval,
    DiscreteGaussian,
    DiscreteLaplace,
    ExponentialMechanism,
    Gaussian,
    GaussianPartitionSelection,
    GaussianSparseVector,
    Laplace,
    NoisyCountSelection,
    NoisyTopK,
    NumericSparseVector,
    PartitionSelection,
    RandomizedResponse,
    ReportNoisyMax,
    SparseVector,
)

FLOAT_SPECIALS = [
    np.array([math.nan, math.inf, -math.inf, 0.0, -0.0]),
    np.array([1.7976931348623157e308, -1.7976931348623157e308, 5e-324, -5e-324]),
    np.float64(math.nan),
    np.float64(-math.inf),
]
INT_MAX = np.iinfo(np.int64).max
INT_SPECIALS = [
    np.array([0, INT_MAX, -INT_MAX - 1, 2**53 + 1, -(2**62)], dtype=np.int64),
    np.int64(INT_MAX),
    np.array([-1, 0, 1], dtype=np.int32),
]
SCORE_SPECIALS = [
    np.array([math.nan, 1.0, 2.0]),
    np.array([math.inf, 1.0, -math.inf]),
    np.array([-math.inf, -math.inf]),
    np.array([1.7976931348623157e308, -1.7976931348623157e308, 0.0]),
    np.array([math.nan, math.nan]),
]
COUNT_SPECIALS = [
    np.array([0, 1, INT_MAX, 2**53 + 1], dtype=np.int64),
    np.array([0, 0, 0], dtype=np.int64),
]


class TestLaplaceContract(MechanismContract):
    def make_mechanism(self) -> Any:
        return Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)

    def array_input(self) -> Any:
        return np.array([[1.0, 2.5], [-3.0, 0.0]])

    def scalar_input(self) -> Any:
        return 1.5

    def special_inputs(self) -> list[Any]:
        return FLOAT_SPECIALS

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: Laplace.from_epsilon(epsilon=v, sensitivity=1.0),
            "scale": lambda v: Laplace.from_scale(scale=v, sensitivity=1.0),
            "sensitivity": lambda v: Laplace.from_epsilon(epsilon=1.0, sensitivity=v),
        }


class TestGaussianContract(MechanismContract):
    def make_mechanism(self) -> Any:
        return Gaussian.from_epsilon_delta(epsilon=1.0, delta=1e-6, sensitivity=1.0)

    def array_input(self) -> Any:
        return np.array([1.0, 2.5, -3.0])

    def scalar_input(self) -> Any:
        return 0.25

    def special_inputs(self) -> list[Any]:
        return FLOAT_SPECIALS

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: Gaussian.from_epsilon_delta(
                epsilon=v, delta=1e-6, sensitivity=1.0
            ),
            "delta": lambda v: Gaussian.from_epsilon_delta(epsilon=1.0, delta=v, sensitivity=1.0),
            "sigma": lambda v: Gaussian.from_sigma(sigma=v, sensitivity=1.0),
            "mu": lambda v: Gaussian.from_mu(mu=v, sensitivity=1.0),
        }


class TestDiscreteLaplaceContract(MechanismContract):
    def make_mechanism(self) -> Any:
        return DiscreteLaplace.from_epsilon(epsilon=1.0, sensitivity=1)

    def array_input(self) -> Any:
        return np.array([[1, 2], [3, -4]], dtype=np.int64)

    def scalar_input(self) -> Any:
        return 7

    def special_inputs(self) -> list[Any]:
        return INT_SPECIALS

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: DiscreteLaplace.from_epsilon(epsilon=v, sensitivity=1),
            "scale": lambda v: DiscreteLaplace(scale=v, sensitivity=1),
        }


class TestDiscreteGaussianContract(MechanismContract):
    def make_mechanism(self) -> Any:
        return DiscreteGaussian.from_sigma(sigma=3.0, sensitivity=1)

    def array_input(self) -> Any:
        return np.array([1, 2, 3], dtype=np.int64)

    def scalar_input(self) -> Any:
        return -2

    def special_inputs(self) -> list[Any]:
        return INT_SPECIALS

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {"sigma": lambda v: DiscreteGaussian.from_sigma(sigma=v, sensitivity=1)}


class TestRandomizedResponseContract(MechanismContract):
    def make_mechanism(self) -> Any:
        return RandomizedResponse.from_epsilon(epsilon=1.0)

    def array_input(self) -> Any:
        return np.array([[True, False], [False, False]])

    def scalar_input(self) -> Any:
        return True

    def special_inputs(self) -> list[Any]:
        return [np.array([True, False]), np.zeros(0, dtype=np.bool_), np.bool_(False)]

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: RandomizedResponse.from_epsilon(epsilon=v),
            "p": lambda v: RandomizedResponse(p=v),
        }


class TestExponentialMechanismContract(MechanismContract):
    def make_mechanism(self) -> Any:
        return ExponentialMechanism(epsilon=1.0, sensitivity=1.0)

    def array_input(self) -> Any:
        return np.array([1.0, 5.0, 2.0])

    def scalar_input(self) -> Any:
        return None  # the input is a vector of scores; the output is one index

    def output_shape(self, x: Any) -> tuple[int, ...]:
        return ()

    def special_inputs(self) -> list[Any]:
        return SCORE_SPECIALS

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: ExponentialMechanism(epsilon=v, sensitivity=1.0),
            "sensitivity": lambda v: ExponentialMechanism(epsilon=1.0, sensitivity=v),
        }


class TestReportNoisyMaxContract(TestExponentialMechanismContract):
    def make_mechanism(self) -> Any:
        return ReportNoisyMax(epsilon=1.0, sensitivity=1.0)

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: ReportNoisyMax(epsilon=v, sensitivity=1.0),
            "sensitivity": lambda v: ReportNoisyMax(epsilon=1.0, sensitivity=v),
        }


class _UnitCountInputs(MechanismContract):
    """Inputs of the partition-selection mechanisms: counts of distinct units per key."""

    def array_input(self) -> Any:
        return np.array([1, 40, 3000], dtype=np.int64)

    def scalar_input(self) -> Any:
        return 5

    def special_inputs(self) -> list[Any]:
        return COUNT_SPECIALS


class TestPartitionSelectionContract(_UnitCountInputs):
    def make_mechanism(self) -> Any:
        return PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6)

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: PartitionSelection.from_epsilon_delta(epsilon=v, delta=1e-6),
            "delta": lambda v: PartitionSelection.from_epsilon_delta(epsilon=1.0, delta=v),
        }


class TestGaussianPartitionSelectionContract(_UnitCountInputs):
    def make_mechanism(self) -> Any:
        return GaussianPartitionSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6)

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        build = GaussianPartitionSelection.from_epsilon_delta
        return {
            "epsilon": lambda v: build(epsilon=v, delta=1e-6),
            "delta": lambda v: build(epsilon=1.0, delta=v),
            "rho": lambda v: GaussianPartitionSelection.from_rho(rho=v, threshold_delta=1e-6),
            "threshold_delta": lambda v: GaussianPartitionSelection.from_rho(
                rho=0.5, threshold_delta=v
            ),
        }


class TestNoisyCountSelectionContract(_UnitCountInputs):
    def make_mechanism(self) -> Any:
        return NoisyCountSelection.from_epsilon_delta(epsilon=1.0, delta=1e-6)

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        build = NoisyCountSelection.from_epsilon_delta
        return {
            "epsilon": lambda v: build(epsilon=v, delta=1e-6),
            "delta": lambda v: build(epsilon=1.0, delta=v),
        }


EDGES = [0.0, 1.0, 2.0, 4.0, 8.0]


class TestBinnedQuantileContract(MechanismContract):
    def make_mechanism(self) -> Any:
        return BinnedQuantile.from_epsilon(epsilon=1.0, quantiles=[0.25, 0.5], edges=EDGES)

    def array_input(self) -> Any:
        return np.array([3, 10, 4, 1], dtype=np.int64)

    def scalar_input(self) -> Any:
        return None  # the input is a histogram; the output is one value per quantile

    def output_shape(self, x: Any) -> tuple[int, ...]:
        return (2,)

    def special_inputs(self) -> list[Any]:
        return [
            np.array([0, 0, 0, 0], dtype=np.int64),
            np.array([INT_MAX // 8, 0, 2**53 + 1, 1], dtype=np.int64),
        ]

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: BinnedQuantile.from_epsilon(epsilon=v, quantiles=0.5, edges=EDGES)
        }


class TestJointBinnedQuantileContract(TestBinnedQuantileContract):
    def make_mechanism(self) -> Any:
        return BinnedQuantile.from_epsilon(
            epsilon=1.0, quantiles=[0.25, 0.5], edges=EDGES, joint=True
        )

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: BinnedQuantile.from_epsilon(
                epsilon=v, quantiles=[0.5, 0.9], edges=EDGES, joint=True
            )
        }


class TestBinnedQuantileIntervalContract(TestBinnedQuantileContract):
    def make_mechanism(self) -> Any:
        return BinnedQuantileInterval(epsilon=1.0, quantiles=(0.25, 0.5), edges=EDGES)

    def output_shape(self, x: Any) -> tuple[int, ...]:
        return (2, 2)  # (low, high) per quantile

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: BinnedQuantileInterval(epsilon=v, quantiles=(0.5,), edges=EDGES),
            "alpha": lambda v: BinnedQuantileInterval(
                epsilon=1.0, quantiles=(0.5,), edges=EDGES, alpha=v
            ),
        }


class TestNoisyTopKContract(TestExponentialMechanismContract):
    def make_mechanism(self) -> Any:
        return NoisyTopK(epsilon=1.0, sensitivity=1.0, k=2)

    def output_shape(self, x: Any) -> tuple[int, ...]:
        return (min(2, len(x)),)  # the indices of the k best, best first

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        return {
            "epsilon": lambda v: NoisyTopK(epsilon=v, sensitivity=1.0, k=2),
            "sensitivity": lambda v: NoisyTopK(epsilon=1.0, sensitivity=v, k=2),
            "k": lambda v: NoisyTopK(epsilon=1.0, sensitivity=1.0, k=v),
        }


class TestNoisyTopKApproximateLaplaceContract(TestExponentialMechanismContract):
    """NoisyTopK's one-shot Laplace pass at its (epsilon, delta) calibration (Qiao, Su and
    Zhang 2021), active at k = 400 of at most 401 candidates."""

    def make_mechanism(self) -> Any:
        mech = NoisyTopK(
            epsilon=0.2, sensitivity=1.0, k=400, method="laplace", delta=1e-6, n_candidates=401
        )
        assert mech.approximate
        return mech

    def output_shape(self, x: Any) -> tuple[int, ...]:
        return (min(400, len(x)),)

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        base: dict[str, Any] = {
            "epsilon": 0.2,
            "sensitivity": 1.0,
            "k": 400,
            "method": "laplace",
            "delta": 1e-6,
            "n_candidates": 401,
        }

        def build(name: str) -> Callable[[Any], Any]:
            return lambda v: NoisyTopK(**{**base, name: v})

        return {name: build(name) for name in ("epsilon", "sensitivity", "delta", "n_candidates")}


class TestSparseVectorContract(MechanismContract):
    """A stream that cannot halt on these inputs (more positives allowed than queries), so
    the answers keep the input's length."""

    def make_mechanism(self) -> Any:
        return SparseVector(epsilon=1.0, sensitivity=1.0, threshold=10.0, max_positives=8)

    def array_input(self) -> Any:
        return np.array([0.0, 50.0, 3.0, 12.0])

    def scalar_input(self) -> Any:
        return None  # the input is a sequence of query answers

    def special_inputs(self) -> list[Any]:
        return SCORE_SPECIALS

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        base: dict[str, Any] = {"epsilon": 1.0, "sensitivity": 1.0, "threshold": 10.0}

        def build(name: str) -> Callable[[Any], Any]:
            return lambda v: SparseVector(**{**base, name: v})

        names = ("epsilon", "sensitivity", "max_positives", "numeric_epsilon")
        return {name: build(name) for name in names}


class TestNumericSparseVectorContract(TestSparseVectorContract):
    """The numeric sparse vector on the same stream: False or a noisy value per answer."""

    def make_mechanism(self) -> Any:
        return NumericSparseVector(epsilon=1.0, sensitivity=1.0, threshold=10.0, max_positives=8)

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        base: dict[str, Any] = {"epsilon": 1.0, "sensitivity": 1.0, "threshold": 10.0}

        def build(name: str) -> Callable[[Any], Any]:
            return lambda v: NumericSparseVector(**{**base, name: v})

        names = ("epsilon", "sensitivity", "max_positives", "numeric_share")
        return {name: build(name) for name in names}


class TestGaussianSparseVectorContract(TestSparseVectorContract):
    """The Gaussian sparse vector on the same stream (it cannot halt on these inputs)."""

    def make_mechanism(self) -> Any:
        return GaussianSparseVector.from_rho(
            rho=1.0, sensitivity=1.0, threshold=10.0, max_queries=16, max_positives=8
        )

    def builders(self) -> dict[str, Callable[[Any], Any]]:
        base: dict[str, Any] = {
            "sigma_threshold": 2.0,
            "sigma_query": 3.0,
            "sensitivity": 1.0,
            "threshold": 10.0,
            "max_queries": 16,
        }

        def build(name: str) -> Callable[[Any], Any]:
            return lambda v: GaussianSparseVector(**{**base, name: v})

        names = ("sigma_threshold", "sigma_query", "sensitivity", "max_queries", "max_positives")
        out = {name: build(name) for name in names}
        out["rho"] = lambda v: GaussianSparseVector.from_rho(
            rho=v, sensitivity=1.0, threshold=0.0, max_queries=16
        )
        return out


ENROLLED = {
    Laplace: TestLaplaceContract,
    Gaussian: TestGaussianContract,
    DiscreteLaplace: TestDiscreteLaplaceContract,
    DiscreteGaussian: TestDiscreteGaussianContract,
    RandomizedResponse: TestRandomizedResponseContract,
    ExponentialMechanism: TestExponentialMechanismContract,
    ReportNoisyMax: TestReportNoisyMaxContract,
    PartitionSelection: TestPartitionSelectionContract,
    GaussianPartitionSelection: TestGaussianPartitionSelectionContract,
    NoisyCountSelection: TestNoisyCountSelectionContract,
    BinnedQuantile: TestBinnedQuantileContract,
    BinnedQuantileInterval: TestBinnedQuantileIntervalContract,
    NoisyTopK: TestNoisyTopKContract,
    SparseVector: TestSparseVectorContract,
    NumericSparseVector: TestNumericSparseVectorContract,
    GaussianSparseVector: TestGaussianSparseVectorContract,
}


def test_every_mechanism_is_enrolled() -> None:
    # Every concrete class exported by dpkit.mechanisms that has release() and event is a
    # mechanism, and must run the contract; the protocols themselves are not.
    exported = {
        obj
        for name in mechanisms.__all__
        if inspect.isclass(obj := getattr(mechanisms, name))
        and hasattr(obj, "release")
        and hasattr(obj, "event")
        and obj.__module__ != ("dpkit.mechanisms._protocol")
    }
    assert exported == set(ENROLLED)
    for cls, suite in ENROLLED.items():
        assert issubclass(suite, MechanismContract)
        assert isinstance(suite().make_mechanism(), cls)
