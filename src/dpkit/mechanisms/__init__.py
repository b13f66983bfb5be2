"""Mechanisms: immutable objects with calibration constructors, ``release`` and an ``event``."""

from dpkit.mechanisms._lattice import (
    DISCRETE_GAUSSIAN_SLACK,
    DISCRETE_LAPLACE_SLACK,
    GAUSSIAN_SLACK,
    LAPLACE_SLACK,
    PMF_SLACK,
)
from dpkit.mechanisms._protocol import BatchMechanism, Mechanism
from dpkit.mechanisms.additive import Gaussian, Laplace
from dpkit.mechanisms.discrete import DiscreteGaussian, DiscreteLaplace
from dpkit.mechanisms.partition_selection import (
    GaussianPartitionSelection,
    NoisyCountSelection,
    PartitionSelection,
)
from dpkit.mechanisms.quantile import BinnedQuantile, BinnedQuantileInterval
from dpkit.mechanisms.randomized_response import RandomizedResponse
from dpkit.mechanisms.selection import ExponentialMechanism, NoisyTopK, ReportNoisyMax
from dpkit.mechanisms.sensitivity import (
    bounded_mean_sensitivity,
    bounded_sum_sensitivity,
    count_sensitivity,
)
from dpkit.mechanisms.sparse_vector import (
    GaussianSparseVector,
    GaussianSparseVectorStream,
    NumericSparseVector,
    SparseVector,
    SparseVectorStream,
)

__all__ = [
    "DISCRETE_GAUSSIAN_SLACK",
    "DISCRETE_LAPLACE_SLACK",
    "GAUSSIAN_SLACK",
    "LAPLACE_SLACK",
    "PMF_SLACK",
    "BatchMechanism",
    "BinnedQuantile",
    "BinnedQuantileInterval",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "ExponentialMechanism",
    "Gaussian",
    "GaussianPartitionSelection",
    "GaussianSparseVector",
    "GaussianSparseVectorStream",
    "Laplace",
    "Mechanism",
    "NoisyCountSelection",
    "NoisyTopK",
    "NumericSparseVector",
    "PartitionSelection",
    "RandomizedResponse",
    "ReportNoisyMax",
    "SparseVector",
    "SparseVectorStream",
    "bounded_mean_sensitivity",
    "bounded_sum_sensitivity",
    "count_sensitivity",
]
