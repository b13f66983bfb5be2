"""A corpus of known-bad mechanisms: each claims a guarantee it does not have.

They exist to show that the auditor catches real bugs (the validity companions of the audit
tests and the detection-rate benchmark). Every one draws its randomness from a
:class:`~dpkit.noise.RandomSource` and exposes ``sample(x, size, *, source)``.

=========================  ==============================  ==================================
mechanism                  claim                           truth
=========================  ==============================  ==================================
LaplaceWrongScale          epsilon-DP                      (epsilon / factor)-DP
GaussianWrongSigma         mu-GDP                          (mu / factor)-GDP
TextbookFloatLaplace       epsilon-DP                      not DP for any finite epsilon
SignedZeroLatticeLaplace   epsilon-DP                      not DP for any finite epsilon
SparseVectorReusedNoise    epsilon-DP                      not DP for any finite epsilon
SparseVectorNoiseFixedInC  epsilon-DP                      ((1 + 6c) / 4) epsilon-DP
SparseVectorNoQueryNoise   epsilon-DP                      not DP for any finite epsilon
SparseVectorNoCutoff       epsilon-DP                      not DP for any finite epsilon
UnaryEncodingWrongProbs    epsilon-LDP                     (2 epsilon)-LDP
SignificandBitLeak         epsilon-DP                      not DP for any finite epsilon
=========================  ==============================  ==================================

References: Mironov, "On significance of the least significant bits for differential privacy",
CCS 2012 (floating-point Laplace); Lyu, Su and Li, "Understanding the sparse vector technique
for differential privacy", VLDB 2017: of the six variants of its Section 3, Algorithms 1 (its
own) and 2 (Dwork and Roth 2014) are epsilon-DP and the four others are in this corpus:
Algorithm 3 (Roth's lecture notes 2011: the value of a positive answer released with the
comparison's own noise), Algorithm 4 (Lee and Clifton 2014: query noise that does not grow with
the cut-off c), Algorithm 5 (Stoddard, Chen and Machanavajjhala 2014: no noise on the queries)
and Algorithm 6 (Chen et al. 2015: no cut-off); Wang, Blocki, Li and Jha, "Locally
differentially private protocols for frequency estimation", USENIX Security 2017, Section 4.2
(symmetric unary encoding must use ``p = e^{eps/2} / (e^{eps/2} + 1)``; using
``e^eps / (e^eps + 1)`` spends 2 epsilon).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import (
    check_epsilon,
    check_finite,
    check_integer,
    check_mu,
    check_positive,
    check_sensitivity,
)
from dpkit.audit._claims import Claim
from dpkit.audit._testers import HistogramTester, Tester, ThresholdTester, float_structure
from dpkit.noise import RandomSource, resolve_source
from dpkit.noise.samplers import gaussian_lattice_noise, laplace, laplace_lattice_noise

__all__ = [
    "GaussianWrongSigma",
    "KnownBad",
    "LaplaceWrongScale",
    "SignedZeroLatticeLaplace",
    "SignificandBitLeak",
    "SparseVectorNoCutoff",
    "SparseVectorNoQueryNoise",
    "SparseVectorNoiseFixedInC",
    "SparseVectorReusedNoise",
    "TextbookFloatLaplace",
    "UnaryEncodingWrongProbs",
    "corpus",
]

_LATTICE_BITS = 10  # outputs on the lattice 2**-10 Z, so only the scale bug is visible
_LATTICE = 2.0**-_LATTICE_BITS


def _lattice_index(x: Any, size: int) -> npt.NDArray[np.int64]:
    v = np.broadcast_to(np.asarray(x, dtype=np.float64), (size,))
    return np.asarray(np.rint(v / _LATTICE), dtype=np.int64)


class LaplaceWrongScale:
    """Laplace noise of scale ``factor * sensitivity / epsilon`` instead of
    ``sensitivity / epsilon``; the true guarantee is ``(epsilon / factor)``-DP.

    Outputs lie on the lattice ``2**-10 Z`` (integer Laplace noise, as in
    :func:`dpkit.noise.laplace_lattice_noise`), so floating-point artefacts play no part.
    """

    def __init__(self, *, epsilon: float, sensitivity: float = 1.0, factor: float = 0.5) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        self.factor = check_positive(factor, "factor")

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        src = resolve_source(source)
        t = self.factor * self.sensitivity / self.epsilon / _LATTICE
        z = laplace_lattice_noise(src, t=t, size=size)
        return (_lattice_index(x, size) + z).astype(np.float64) * _LATTICE


class GaussianWrongSigma:
    """Gaussian noise ``sigma = factor * sensitivity / mu`` instead of ``sensitivity / mu``;
    the true guarantee is ``(mu / factor)``-GDP (Dong, Roth and Su 2022: the Gaussian mechanism
    is mu-GDP with mu = sensitivity / sigma)."""

    def __init__(self, *, mu: float, sensitivity: float = 1.0, factor: float = 0.5) -> None:
        self.mu = check_mu(mu)
        self.sensitivity = check_sensitivity(sensitivity)
        self.factor = check_positive(factor, "factor")

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        src = resolve_source(source)
        sigma = self.factor * self.sensitivity / self.mu / _LATTICE
        z = gaussian_lattice_noise(src, sigma=sigma, size=size)
        return (_lattice_index(x, size) + z).astype(np.float64) * _LATTICE


class TextbookFloatLaplace:
    """``x + Laplace(sensitivity / epsilon)`` computed in doubles, the way ``numpy.random.laplace``
    computes it: ``U`` uniform on the grid ``k 2**-53``, noise ``b ln(2U)`` for ``U < 1/2`` and
    ``-b ln(2 - 2U)`` otherwise, then one floating-point addition.

    Not DP for any finite epsilon: the set of doubles reachable from x = 0 differs from the set
    reachable from x = 1 (Mironov, CCS 2012). The audit sees it with
    ``HistogramTester(feature=float_structure)`` on the inputs 0.0 and 1.0.
    """

    def __init__(self, *, epsilon: float, sensitivity: float = 1.0) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        src = resolve_source(source)
        b = self.sensitivity / self.epsilon
        u = src.uniform(size)
        u = np.where(u > 0.0, u, 0.5)  # numpy redraws U = 0; any fixed value keeps the flaw
        with np.errstate(divide="ignore"):
            noise = np.where(u < 0.5, b * np.log(u + u), -b * np.log(2.0 - u - u))
        return np.asarray(check_finite(x, "x") + noise, dtype=np.float64)


class SignedZeroLatticeLaplace:
    """Lattice Laplace whose release is not a function of the lattice integer alone.

    The input is rounded to the lattice ``g Z`` in doubles (``rint(x / g)``, which is ``-0.0``
    for x in ``[-g/2, 0)``), integer Laplace noise (:func:`dpkit.noise.laplace_lattice_noise`,
    t = sensitivity / (epsilon g)) is turned into a double by sign and magnitude (zero noise
    gets a random sign, so it is ``-0.0`` half the time), and the output is ``(index + noise) g``.
    Since ``-0.0 + -0.0 = -0.0`` while ``+0.0 + -0.0 = +0.0``, the output ``-0.0`` occurs with
    probability ``P(Z = 0) / 2 = (1 - exp(-1/(2t))) / 2`` (0.06 at the default g = sensitivity
    / 4 and t = 4) for x = -1e-12 and never for x = 0.0: not DP for any finite epsilon. The lattice
    integers of both inputs are the same (0), so only the sign of zero leaks; the audit sees it
    through :func:`~dpkit.audit.float_structure`, which tells ``-0.0`` from ``+0.0``.
    """

    def __init__(
        self, *, epsilon: float, sensitivity: float = 1.0, granularity: float | None = None
    ) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        g = self.sensitivity / 4 if granularity is None else granularity
        self.granularity = check_positive(g, "granularity")

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        src = resolve_source(source)
        g = self.granularity
        index = np.rint(np.full(size, check_finite(x, "x")) / g)  # keeps the sign of zero
        k = laplace_lattice_noise(src, t=self.sensitivity / (self.epsilon * g), size=size)
        coin = (src.words(size) >> np.uint64(63)).astype(np.bool_)
        negative = np.where(k == 0, coin, k < 0)
        noise = np.where(negative, -1.0, 1.0) * np.abs(k).astype(np.float64)  # -0.0 possible
        return np.asarray((index + noise) * g, dtype=np.float64)


class SignificandBitLeak:
    """Laplace noise (full-precision doubles) whose significand bit ``bit`` is set to ``x != 0``.

    Every other bit has the same law for both inputs, and bit 20 (the default) lies above the
    lowest set bit of almost every sample and above the 8 low bits, so neither
    :func:`~dpkit.audit.float_structure` nor :func:`~dpkit.audit.float_low_bits` sees it; the
    bit is a deterministic function of the input, so the release is not DP for any finite
    epsilon. The audit sees it through :class:`~dpkit.audit.BitTester` (a default tester for
    floating-point outputs) on the inputs 0.0 and 1.0.
    """

    def __init__(self, *, epsilon: float, sensitivity: float = 1.0, bit: int = 20) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.sensitivity = check_sensitivity(sensitivity)
        self.bit = check_integer(bit, name="bit", minimum=0, maximum=51)

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        src = resolve_source(source)
        noise = laplace(src, scale=self.sensitivity / self.epsilon, size=size)
        bits = np.ascontiguousarray(noise, dtype=np.float64).view(np.uint64).copy()
        mask = np.uint64(1 << self.bit)
        bits = bits | mask if check_finite(x, "x") != 0.0 else bits & ~mask
        return np.asarray(bits.view(np.float64), dtype=np.float64)


class SparseVectorNoQueryNoise:
    """Sparse vector with noise on the threshold only (Lyu, Su and Li 2017, Algorithm 5).

    Input: the answers ``q_1..q_k`` of sensitivity-1 queries. Output: the vector of
    ``q_i >= T + rho`` with ``rho ~ Laplace(2 / epsilon)`` and no noise on the queries. It
    claims epsilon-DP but is not DP for any epsilon: on ``q = (0, 1)`` the output
    ``(False, True)`` has probability ``P(-T < rho <= 1 - T) > 0``, on the neighbour
    ``q' = (1, 0)`` probability 0.
    """

    def __init__(self, *, epsilon: float, threshold: float = 0.5) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.threshold = check_finite(threshold, "threshold")

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.bool_]:
        src = resolve_source(source)
        q = np.asarray(x, dtype=np.float64).reshape(-1)
        rho = laplace(src, scale=2.0 / self.epsilon, size=size)
        return np.asarray(q[None, :] >= (self.threshold + rho)[:, None])


#: The output of :class:`SparseVectorReusedNoise` when the first positive answer is not the last
#: query (any value above every released value the audit looks at).
REUSED_NOISE_NONE = 1e6


class SparseVectorReusedNoise:
    """Sparse vector releasing ``q_i + nu_i`` for a positive answer, with the comparison's own
    noise (Lyu, Su and Li 2017, Algorithm 3, after Roth's 2011 lecture notes), ``c = 1``.

    ``eps1 = eps2 = epsilon / 2``, ``rho ~ Lap(1 / eps1)``, ``nu_i ~ Lap(c / eps2)``
    (sensitivity 1, threshold ``threshold``). Input: the answers ``q_1..q_(m+1)``. Output (a
    post-processing of the released stream): the released value when the first positive answer
    is the last query, else :data:`REUSED_NOISE_NONE`. It claims epsilon-DP and is not DP for
    any epsilon (Lyu et al., Section 3): on ``q = (0, ..., 0, 0)`` and its neighbour
    ``q' = (1, ..., 1, 0)`` the output ``(bot^m, v)`` pins ``rho <= v - T``; for small ``v``
    each of the m negative answers costs a factor up to ``e^(eps2 / c)`` that the threshold
    noise no longer absorbs, so the loss grows without bound in m. With m = 6 the event
    ``v <= 2`` has probability about 3.6e-3 against 4.4e-4 (ln ratio 2.1 at epsilon 1).
    """

    def __init__(self, *, epsilon: float, threshold: float = 0.0) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.threshold = check_finite(threshold, "threshold")

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        src = resolve_source(source)
        q = np.asarray(x, dtype=np.float64).reshape(-1)
        half = self.epsilon / 2.0
        rho = laplace(src, scale=1.0 / half, size=size)
        noisy = q[None, :] + laplace(src, scale=1.0 / half, size=(size, q.size))
        positive = noisy >= (self.threshold + rho)[:, None]
        first = np.where(positive.any(axis=1), positive.argmax(axis=1), q.size)
        return np.asarray(
            np.where(first == q.size - 1, noisy[:, -1], REUSED_NOISE_NONE), dtype=np.float64
        )


class SparseVectorNoiseFixedInC:
    """Sparse vector whose query noise does not grow with the cut-off ``c`` (Lyu, Su and Li
    2017, Algorithm 4, after Lee and Clifton 2014).

    ``eps1 = epsilon / 4``, ``rho ~ Lap(1 / eps1)``, ``eps2 = 3 epsilon / 4``, ``nu_i ~
    Lap(1 / eps2)`` whatever c; stop after c positive answers (sensitivity 1). Output: the
    answer pattern coded in base 3 (0 negative, 1 positive, 2 not asked after the halt). It
    claims epsilon-DP but is ``((1 + 6c) / 4) epsilon``-DP (Lyu et al., Section 3): on
    ``q = (0^c, 1^c)`` and ``q' = (1^c, 0^c)`` the pattern "c negatives, then c positives" has
    probability about 5.2e-3 against 5.4e-5 at c = 4, epsilon 1 (ln ratio 4.6).
    """

    def __init__(self, *, epsilon: float, c: int = 4, threshold: float = 0.0) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.c = check_integer(c, name="c", minimum=1, maximum=16)
        self.threshold = check_finite(threshold, "threshold")

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        src = resolve_source(source)
        q = np.asarray(x, dtype=np.float64).reshape(-1)
        if q.size > 39:
            raise ValueError("at most 39 queries (the pattern is coded in base 3 in an int64)")
        rho = laplace(src, scale=4.0 / self.epsilon, size=size)
        nu = laplace(src, scale=4.0 / (3.0 * self.epsilon), size=(size, q.size))
        positive = q[None, :] + nu >= (self.threshold + rho)[:, None]
        before: npt.NDArray[np.int64] = np.cumsum(positive, axis=1) - positive  # before query i
        pattern = np.where(before < self.c, positive.astype(np.int64), 2)
        weights = 3 ** np.arange(q.size, dtype=np.int64)
        return np.asarray((pattern * weights).sum(axis=1), dtype=np.int64)


class SparseVectorNoCutoff:
    """Sparse vector that never halts (Lyu, Su and Li 2017, Algorithm 6, after Chen et al.
    2015): ``eps1 = eps2 = epsilon / 2``, ``rho ~ Lap(1 / eps1)``, ``nu_i ~ Lap(1 / eps2)``,
    every query answered (sensitivity 1).

    Output (a post-processing of the answers): positives among the first half of the queries
    minus positives among the second half. It claims epsilon-DP and is not DP for any epsilon:
    on ``q = (0^m, 1^m)`` and ``q' = (1^m, 0^m)`` the answers ``(bot^m, top^m)`` have
    probability ratio growing like ``e^(m eps2 / 2)`` at least (Lyu et al., Section 3); at
    m = 20 and epsilon 1 the audit certifies epsilon above 4 with 5 x 10^4 samples.
    """

    def __init__(self, *, epsilon: float, threshold: float = 0.0) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.threshold = check_finite(threshold, "threshold")

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        src = resolve_source(source)
        q = np.asarray(x, dtype=np.float64).reshape(-1)
        half = self.epsilon / 2.0
        rho = laplace(src, scale=1.0 / half, size=size)
        nu = laplace(src, scale=1.0 / half, size=(size, q.size))
        positive = q[None, :] + nu >= (self.threshold + rho)[:, None]
        m = q.size // 2
        return np.asarray(
            positive[:, :m].sum(axis=1) - positive[:, m:].sum(axis=1), dtype=np.float64
        )


class UnaryEncodingWrongProbs:
    """Symmetric unary encoding with ``p = e^eps / (e^eps + 1)``, ``q = 1 - p``.

    Each of the d bits is kept with probability p and flipped otherwise. Two inputs differ in two
    bits, so the privacy loss is ``2 ln(p / q) = 2 epsilon``; correct SUE uses epsilon / 2 per
    bit (Wang et al., USENIX Security 2017, Section 4.2).
    """

    def __init__(self, *, epsilon: float, domain: int) -> None:
        self.epsilon = check_epsilon(epsilon)
        self.domain = check_integer(domain, name="domain", minimum=2)

    def sample(
        self, x: Any, size: int, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.bool_]:
        src = resolve_source(source)
        v = check_integer(x, name="x", minimum=0, maximum=self.domain - 1)
        p = math.exp(self.epsilon) / (math.exp(self.epsilon) + 1.0)
        onehot = np.zeros(self.domain, dtype=np.bool_)
        onehot[v] = True
        keep = src.uniform((size, self.domain)) < p
        return np.asarray(keep == onehot[None, :])


@dataclass(frozen=True)
class KnownBad:
    """One corpus entry: the mechanism, the inputs that expose it, its claim and its truth."""

    name: str
    mechanism: Any
    pair: tuple[Any, Any]
    claim: Claim
    true_value: float  # the true epsilon (or mu for GDP claims); inf when not private at all
    testers: tuple[Tester, ...] | None = field(default=None, compare=False)
    #: outputs per input with which the tests see it violated at confidence 1 - 1e-6
    samples: int = 50_000


def corpus(*, epsilon: float = 1.0) -> tuple[KnownBad, ...]:
    """The known-bad mechanisms, each claiming ``epsilon`` (or mu = epsilon for the Gaussian)."""
    eps = check_epsilon(epsilon)
    return (
        KnownBad(
            "laplace-half-scale",
            LaplaceWrongScale(epsilon=eps, factor=0.5),
            (0.0, 1.0),
            Claim.pure(epsilon=eps),
            2.0 * eps,
        ),
        KnownBad(
            "gaussian-half-sigma",
            GaussianWrongSigma(mu=eps, factor=0.5),
            (0.0, 1.0),
            Claim.gdp(mu=eps),
            2.0 * eps,
        ),
        KnownBad(
            "textbook-float-laplace",
            TextbookFloatLaplace(epsilon=eps),
            (0.0, 1.0),
            Claim.pure(epsilon=eps),
            math.inf,
            (HistogramTester(feature=float_structure),),
        ),
        KnownBad(
            "signed-zero-lattice-laplace",
            SignedZeroLatticeLaplace(epsilon=eps),
            (0.0, -1e-12),
            Claim.pure(epsilon=eps),
            math.inf,
        ),
        KnownBad(
            "significand-bit-20-leak",
            SignificandBitLeak(epsilon=eps),
            (0.0, 1.0),
            Claim.pure(epsilon=eps),
            math.inf,
        ),
        KnownBad(
            "sparse-vector-no-query-noise",
            SparseVectorNoQueryNoise(epsilon=eps),
            ((0.0, 1.0), (1.0, 0.0)),
            Claim.pure(epsilon=eps),
            math.inf,
        ),
        KnownBad(
            "sparse-vector-reused-noise",
            SparseVectorReusedNoise(epsilon=eps),
            ((0.0,) * 7, (1.0,) * 6 + (0.0,)),
            Claim.pure(epsilon=eps),
            math.inf,
            (ThresholdTester(),),
            1_000_000,
        ),
        KnownBad(
            "sparse-vector-noise-fixed-in-c",
            SparseVectorNoiseFixedInC(epsilon=eps, c=4),
            ((0.0,) * 4 + (1.0,) * 4, (1.0,) * 4 + (0.0,) * 4),
            Claim.pure(epsilon=eps),
            (1.0 + 6.0 * 4) / 4.0 * eps,
            (HistogramTester(),),
        ),
        KnownBad(
            "sparse-vector-no-cutoff",
            SparseVectorNoCutoff(epsilon=eps),
            ((0.0,) * 20 + (1.0,) * 20, (1.0,) * 20 + (0.0,) * 20),
            Claim.pure(epsilon=eps),
            math.inf,
            (ThresholdTester(),),
        ),
        KnownBad(
            "unary-encoding-wrong-probabilities",
            UnaryEncodingWrongProbs(epsilon=eps, domain=4),
            (0, 1),
            Claim.pure(epsilon=eps),
            2.0 * eps,
        ),
    )
