"""Randomness: the :class:`RandomSource` and samplers over it. The only layer that draws bits."""

from dpkit.noise._source import RandomSource, default_source, resolve_source
from dpkit.noise.samplers import (
    bernoulli,
    bernoulli_exact,
    bernoulli_exp,
    bernoulli_exp_exact,
    discrete_gaussian,
    discrete_gaussian_exact,
    discrete_laplace,
    discrete_laplace_exact,
    exponential,
    gaussian,
    gaussian_lattice_noise,
    geometric,
    gumbel,
    laplace,
    laplace_lattice_noise,
)

__all__ = [
    "RandomSource",
    "bernoulli",
    "bernoulli_exact",
    "bernoulli_exp",
    "bernoulli_exp_exact",
    "default_source",
    "discrete_gaussian",
    "discrete_gaussian_exact",
    "discrete_laplace",
    "discrete_laplace_exact",
    "exponential",
    "gaussian",
    "gaussian_lattice_noise",
    "geometric",
    "gumbel",
    "laplace",
    "laplace_lattice_noise",
    "resolve_source",
]
