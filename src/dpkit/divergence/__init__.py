"""Divergences between output distributions (Dwork and Roth, Section 3.5.1).

Exact for two pmfs on a finite set, closed form for the standard mechanism pairs.
"""

from dpkit.divergence._discrete import (
    approx_max_divergence,
    hockey_stick_divergence,
    kl_divergence,
    max_divergence,
    renyi_divergence,
    statistical_distance,
)
from dpkit.divergence._mechanisms import GaussianPair, LaplacePair, RandomizedResponsePair

__all__ = [
    "GaussianPair",
    "LaplacePair",
    "RandomizedResponsePair",
    "approx_max_divergence",
    "hockey_stick_divergence",
    "kl_divergence",
    "max_divergence",
    "renyi_divergence",
    "statistical_distance",
]
