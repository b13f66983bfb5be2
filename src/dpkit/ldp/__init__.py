"""Local differential privacy: client randomizers and server estimators.

Every protocol is one class: the device side (``randomize``, standard library only, also
importable alone as :mod:`dpkit.ldp.client`) and the server side (``randomize_many`` for
simulations, ``aggregator()``, ``variance``). See ``docs/ldp.md``.

Frequency oracles (Wang, Blocki, Li and Jha, USENIX Security 2017): :class:`RandomizedResponse`
(Warner 1965), :class:`GRR`, :class:`SUE`, :class:`OUE`, :class:`OLH`, :class:`BLH`,
:class:`HadamardResponse` (Acharya, Sun and Zhang 2019). Mean estimation on [-1, 1]:
:class:`Duchi` (Duchi, Jordan and Wainwright 2018), :class:`Piecewise` and :class:`Hybrid`
(Wang et al., ICDE 2019). Sketches for domains too large to list: :class:`CMS` and
:class:`HCMS` (Apple's count-mean sketch and its Hadamard variant, 2017), :class:`OLHSketch`
(optimal local hashing over public hash functions). Heavy hitters over such
domains: :class:`PEM` (Wang et al., TDSC 2019), :class:`TreeHistogram` (Bassily et al.,
NeurIPS 2017) and :class:`SFP` (Apple's sequence fragment puzzle, 2017). Repeated
collection: :class:`RAPPOR` and :class:`LOLOHA` (Arcolezi et al., EDBT 2023).
Shuffle-model accounting:
:class:`ShuffleBound` (Feldman, McMillan and Talwar 2021) and the reference :func:`shuffle`.
"""

from dpkit.ldp._aggregate import (
    FrequencyAggregator,
    FrequencyEstimate,
    MeanAggregator,
    MeanEstimate,
    project_simplex,
)
from dpkit.ldp._exact import LdpCheck, check_ldp
from dpkit.ldp._heavy import (
    PEM,
    SFP,
    HeavyHitters,
    PemAggregator,
    SfpAggregator,
    TreeHistAggregator,
    TreeHistogram,
)
from dpkit.ldp._protocols import (
    BLH,
    GRR,
    LOLOHA,
    OLH,
    OUE,
    RAPPOR,
    SUE,
    Duchi,
    FrequencyOracle,
    HadamardResponse,
    Hybrid,
    MeanMechanism,
    Piecewise,
    RandomizedResponse,
)
from dpkit.ldp._select import (
    FREQUENCY_ORACLES,
    PROTOCOLS,
    best_protocol,
    compare_protocols,
    make_protocol,
)
from dpkit.ldp._shuffle import ShuffleBound, shuffle, shuffle_delta, shuffled_epsilon
from dpkit.ldp._sketch import CMS, HCMS, OLHSketch, SketchAggregator

__all__ = [
    "BLH",
    "CMS",
    "FREQUENCY_ORACLES",
    "GRR",
    "HCMS",
    "LOLOHA",
    "OLH",
    "OUE",
    "PEM",
    "PROTOCOLS",
    "RAPPOR",
    "SFP",
    "SUE",
    "Duchi",
    "FrequencyAggregator",
    "FrequencyEstimate",
    "FrequencyOracle",
    "HadamardResponse",
    "HeavyHitters",
    "Hybrid",
    "LdpCheck",
    "MeanAggregator",
    "MeanEstimate",
    "MeanMechanism",
    "OLHSketch",
    "PemAggregator",
    "Piecewise",
    "RandomizedResponse",
    "SfpAggregator",
    "ShuffleBound",
    "SketchAggregator",
    "TreeHistAggregator",
    "TreeHistogram",
    "best_protocol",
    "check_ldp",
    "compare_protocols",
    "make_protocol",
    "project_simplex",
    "shuffle",
    "shuffle_delta",
    "shuffled_epsilon",
]
