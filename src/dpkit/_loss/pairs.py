"""Dominating pairs (P, Q) of mechanisms, described by the tails of their privacy loss.

The one home of the worst-case output pairs that the privacy-loss engine
(:mod:`dpkit._loss.grid`) discretises and composes: the PLD accountant
(:mod:`dpkit.accounting.pld`) builds them from events, :func:`dpkit.fdp.tensor` from trade-off
functions (``T(P_f, Q_f)`` is the pair ``P = Q_f``, ``Q = P_f`` here), and
:mod:`dpkit.divergence` reads its Gaussian and Laplace pairs' profiles from them.

A pair is known through the distribution of its privacy loss ``L = log(dP/dQ)``: for a vector
of loss values ``e`` the method :meth:`tails` returns the four arrays

* ``sf_p = P(L > e)`` (this includes the mass of ``L = +inf``, where ``Q = 0``),
* ``sf_q = Q(L > e)``,
* ``cdf_p = P(L <= e)`` and ``cdf_q = Q(L <= e)`` (the complements, computed directly so that
  differences of small probabilities keep their relative precision in both tails).

The hockey-stick divergence (privacy profile) is then ``delta(eps) = sf_p(eps) - e^eps sf_q(eps)``
(the supremum of ``P(S) - e^eps Q(S)`` is attained at ``S = {L > eps}``).
:meth:`bounds` gives a loss interval outside of which the P-mass is below ``tail`` (the
discretiser moves that mass pessimistically).

Pairs:

* :class:`MixturePair`: ``P = (1 - q) N0 + q N1`` against ``Q = N0`` ("remove") or ``P = N0``
  against ``Q = (1 - q) N0 + q N1`` ("add"), where ``Nm`` is Gaussian ``N(m, sigma^2)`` or Laplace
  ``Lap(m, b)``. ``q = 1`` is the plain Gaussian / Laplace mechanism at sensitivity 1 (both
  directions then have the same loss distribution). The loss is a monotone function of the
  observation ``y`` through ``g(y)`` (Gaussian: ``(2y - 1) / (2 sigma^2)``; Laplace:
  ``(|y| - |y - 1|) / b``): remove ``L = log(1 - q + q e^g)``, add ``L = -log(1 - q + q e^g)``
  (the subsampled Gaussian pairs of Koskela, Jalko and Honkela 2020 and of the dominating-pair
  analysis of Poisson subsampling by Zhu, Dong and Wang 2022).
* :class:`ReplacePair`: ``P = (1 - q) N(0, s^2) + q N(-1, s^2)`` against
  ``Q = (1 - q) N(0, s^2) + q N(1, s^2)``: the Gaussian sum query under replace-one neighbours
  when the batch holds the replaced record with probability ``q`` and is otherwise the same
  (Poisson sampling), the contribution moving from ``-1`` to ``+1``. It does NOT dominate a
  batch of fixed size (sampling without replacement), where drawing the record displaces
  another one: the PLD accountant uses :class:`MixturePair` at half the scale there. The pair
  is symmetric
  (``y -> -y`` swaps ``P`` and ``Q``), so one direction serves both. With ``g = y / s^2`` and
  ``c = 1 / (2 s^2)`` the loss ``L = log(1 - q + q e^{-g-c}) - log(1 - q + q e^{g-c})``
  decreases in ``y``.
* :class:`AtomPair`: a pair whose loss takes finitely many values (randomized response,
  discrete Laplace/Gaussian, the worst-case pair of (epsilon, delta)-DP), given as
  ``(loss, P-mass)`` atoms plus a mass at ``+inf``; ``Q(loss = l) = P(loss = l) e^-l``.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt
from scipy import special

from dpkit._numeric import rounding
from dpkit.errors import PrivacyParameterError

FloatArray = npt.NDArray[np.float64]

__all__ = [
    "AtomPair",
    "FloatArray",
    "MixturePair",
    "Pair",
    "ReplacePair",
    "Tails",
    "atom_pair",
    "discrete_gaussian_pair",
    "discrete_laplace_pair",
    "gaussian_pair",
    "laplace_pair",
    "laplace_profile",
    "pair_profile",
    "randomized_response_pair",
    "tradeoff_segments_pair",
    "worst_case_pair",
]

Tails = tuple[FloatArray, FloatArray, FloatArray, FloatArray]

_MAX_ATOMS = 1 << 22  # atoms listed for one discrete pair (about 32 MB per array)


def _log_expm1_plus(e: FloatArray, q: float) -> FloatArray:
    """``log(e^e - 1 + q)`` for an array ``e`` (``-inf`` where the argument is <= 0).

    ``q = 1`` returns ``e`` itself, so that an atom put exactly on a grid point (the plain
    Laplace mechanism) stays exactly there.
    """
    if q == 1.0:
        return np.array(e, dtype=np.float64, copy=True)
    out = np.full_like(e, -np.inf)
    big = e > 30.0
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        eb = e[big]
        out[big] = eb + np.log1p((q - 1.0) * np.exp(-eb))
        small = ~big
        arg = np.expm1(e[small]) + q
        out[small] = np.where(arg > 0.0, np.log(np.where(arg > 0.0, arg, 1.0)), -np.inf)
    return out


@dataclasses.dataclass(frozen=True)
class MixturePair:
    """Gaussian or Laplace noise, optionally Poisson-subsampled; see the module docstring."""

    noise: str  # "gaussian" or "laplace"
    scale: float  # sigma (Gaussian) or b (Laplace), in units of the sensitivity
    rate: float  # sampling rate q in (0, 1]
    direction: str  # "remove" or "add"

    # -- the noise family -------------------------------------------------------------
    def _sf(self, y: FloatArray, m: float) -> FloatArray:
        """``P(Y > y)`` for ``Y ~ N_m`` (Gaussian ``N(m, s^2)`` or Laplace ``Lap(m, s)``)."""
        s = self.scale
        if self.noise == "gaussian":
            return np.asarray(special.ndtr((m - y) / s), dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            z = (y - m) / s
            return np.where(z >= 0.0, 0.5 * np.exp(-np.abs(z)), 1.0 - 0.5 * np.exp(-np.abs(z)))

    def _cdf(self, y: FloatArray, m: float) -> FloatArray:
        """``P(Y <= y)`` for ``Y ~ N_m``."""
        s = self.scale
        if self.noise == "gaussian":
            return np.asarray(special.ndtr((y - m) / s), dtype=np.float64)
        with np.errstate(over="ignore", invalid="ignore"):
            z = (y - m) / s
            return np.where(z >= 0.0, 1.0 - 0.5 * np.exp(-np.abs(z)), 0.5 * np.exp(-np.abs(z)))

    def _threshold(self, t: FloatArray) -> FloatArray:
        """``y*`` with ``{g(y) > t} = {y > y*}`` (``g`` strictly increasing where it moves)."""
        s = self.scale
        if self.noise == "gaussian":
            with np.errstate(invalid="ignore"):
                return np.asarray(s * s * t + 0.5, dtype=np.float64)
        # Laplace: g = (|y| - |y - 1|) / b in [-1/b, 1/b], equal to (2y - 1)/b on [0, 1].
        bt = s * t
        y = np.where(bt >= 1.0, np.inf, np.where(bt < -1.0, -np.inf, 0.5 * (1.0 + bt)))
        return np.asarray(y, dtype=np.float64)

    def _threshold_add(self, t: FloatArray) -> FloatArray:
        """``y*`` with ``{g(y) < t} = {y < y*}``."""
        if self.noise == "gaussian":
            return self._threshold(t)
        bt = self.scale * t
        y = np.where(bt > 1.0, np.inf, np.where(bt <= -1.0, -np.inf, 0.5 * (1.0 + bt)))
        return np.asarray(y, dtype=np.float64)

    def tails(self, e: FloatArray) -> Tails:
        """``(P(L > e), Q(L > e), P(L <= e), Q(L <= e))`` on the array ``e``."""
        q = self.rate
        lq = math.log(q)
        if self.direction == "remove":
            # L > e  <=>  e^g > (e^e - 1 + q) / q  <=>  g > t
            t = _log_expm1_plus(e, q) - lq
            y = self._threshold(t)
            s0, s1 = self._sf(y, 0.0), self._sf(y, 1.0)
            c0, c1 = self._cdf(y, 0.0), self._cdf(y, 1.0)
            return (1.0 - q) * s0 + q * s1, s0, (1.0 - q) * c0 + q * c1, c0
        # add: L > e  <=>  1 - q + q e^g < e^-e  <=>  g < t
        t = _log_expm1_plus(-e, q) - lq
        y = self._threshold_add(t)
        s0, s1 = self._sf(y, 0.0), self._sf(y, 1.0)
        c0, c1 = self._cdf(y, 0.0), self._cdf(y, 1.0)
        # P(Y < y*) = cdf for these continuous families
        return c0, (1.0 - q) * c0 + q * c1, s0, (1.0 - q) * s0 + q * s1

    def _loss(self, y: float) -> float:
        """The privacy loss at observation ``y`` (this pair's direction)."""
        s = self.scale
        # divided step by step: 2 s^2 underflows to 0 for tiny s, the quotient is then +-inf
        g = (
            (2.0 * y - 1.0) / (2.0 * s) / s
            if self.noise == "gaussian"
            else (abs(y) - abs(y - 1.0)) / s
        )
        lo = math.log1p(-self.rate) if self.rate < 1.0 else -math.inf
        val = float(np.logaddexp(lo, math.log(self.rate) + g))
        return val if self.direction == "remove" else -val

    def unbounded(self) -> bool:
        """Whether the finite losses are unbounded above (Gaussian noise: the loss is an
        unbounded increasing function of ``y``), so that no finite eps has ``delta(eps) = 0``."""
        return self.noise == "gaussian"

    def atom(self) -> float | None:
        """The largest atom of the loss (Laplace: at ``y >= 1`` or ``y <= 0``), if any."""
        if self.noise != "laplace":
            return None
        a, b = self._loss(0.0), self._loss(1.0)
        return max(abs(a), abs(b))

    def bounds(self, tail: float) -> tuple[float, float]:
        """A loss interval holding all but ``tail`` of the P-mass on each side."""
        if self.noise == "laplace":
            a, b = self._loss(0.0), self._loss(1.0)
            return (min(a, b), max(a, b))
        z = float(-special.ndtri(tail))
        s = self.scale
        if self.direction == "remove":
            return self._loss(-z * s), self._loss(1.0 + z * s)
        return self._loss(z * s), self._loss(-z * s)


@dataclasses.dataclass(frozen=True)
class ReplacePair:
    """The symmetric replace-one pair of sampling without replacement; see the module docstring."""

    scale: float  # s: noise standard deviation in units of a contribution's largest norm
    rate: float  # q in (0, 1]: the probability that the replaced record is in the batch

    def _log_threshold(self, e: FloatArray) -> FloatArray:
        """``log z*`` with ``{L > e} = {e^g < z*}``, ``z*`` the positive root of
        ``E a z^2 + (E - 1) r z - a = 0`` (``E = e^e``, ``a = q e^{-c}``, ``r = 1 - q``),
        written without overflow for ``e >= 0`` and by the symmetry ``z*(-e) = 1 / z*(e)``."""
        s, q = self.scale, self.rate
        r = 1.0 - q
        log_a = math.log(q) - 0.5 / s / s
        ae = np.abs(np.asarray(e, dtype=np.float64))
        with np.errstate(over="ignore", under="ignore"):
            d = -np.expm1(-ae) * r  # (E - 1) r / E
            root = np.sqrt(d * d + 4.0 * np.exp(2.0 * log_a - ae))
            out = math.log(2.0) + log_a - ae - np.log(d + root)
        return np.where(np.asarray(e) >= 0.0, out, -out)

    def tails(self, e: FloatArray) -> Tails:
        """``(P(L > e), Q(L > e), P(L <= e), Q(L <= e))`` on the array ``e``."""
        s, q = self.scale, self.rate
        y = s * s * self._log_threshold(e)  # L > e  <=>  Y < y
        with np.errstate(invalid="ignore"):
            m0, mp, mq = (
                special.ndtr(y / s),
                special.ndtr((y + 1.0) / s),
                special.ndtr((y - 1.0) / s),
            )
            c0, cp, cq = (
                special.ndtr(-y / s),
                special.ndtr(-(y + 1.0) / s),
                special.ndtr(-(y - 1.0) / s),
            )
        r = 1.0 - q
        return (
            np.asarray(r * m0 + q * mp, dtype=np.float64),
            np.asarray(r * m0 + q * mq, dtype=np.float64),
            np.asarray(r * c0 + q * cp, dtype=np.float64),
            np.asarray(r * c0 + q * cq, dtype=np.float64),
        )

    def _loss(self, y: float) -> float:
        s, q = self.scale, self.rate
        g = y / s / s
        c = 0.5 / s / s
        lr = math.log1p(-q) if q < 1.0 else -math.inf
        lq = math.log(q)
        return float(np.logaddexp(lr, lq - g - c) - np.logaddexp(lr, lq + g - c))

    def unbounded(self) -> bool:
        """The loss grows without bound as ``y -> -inf``."""
        return True

    def atom(self) -> float | None:
        """No atoms (continuous loss)."""
        return None

    def bounds(self, tail: float) -> tuple[float, float]:
        """A loss interval holding all but ``tail`` of the P-mass on each side."""
        z = float(-special.ndtri(tail))
        s = self.scale
        return self._loss(z * s), self._loss(-1.0 - z * s)


@dataclasses.dataclass(frozen=True)
class AtomPair:
    """A pair whose privacy loss takes finitely many values (plus possibly ``+inf``)."""

    losses: tuple[float, ...]  # finite loss values, strictly increasing
    masses: tuple[float, ...]  # their P-masses
    inf_mass: float = 0.0  # P(L = +inf)

    def tails(self, e: FloatArray) -> Tails:
        """``(P(L > e), Q(L > e), P(L <= e), Q(L <= e))`` on the array ``e``."""
        ls = np.asarray(self.losses, dtype=np.float64)
        ps = np.asarray(self.masses, dtype=np.float64)
        with np.errstate(divide="ignore", over="ignore"):
            qs = np.exp(np.log(ps) - ls)  # no 0 * inf when an atom's P-mass underflowed
        # cumulative sums from below (for <=) and from above (for >), each summed small-first
        cp = np.concatenate(([0.0], np.cumsum(ps)))
        cq = np.concatenate(([0.0], np.cumsum(qs)))
        sp = np.concatenate((np.cumsum(ps[::-1])[::-1], [0.0])) + self.inf_mass
        sq = np.concatenate((np.cumsum(qs[::-1])[::-1], [0.0]))
        k = np.searchsorted(ls, e, side="right")  # number of atoms <= e
        q_minus_inf = max(0.0, 1.0 - float(cq[-1]))
        return sp[k], sq[k], cp[k], cq[k] + q_minus_inf

    def unbounded(self) -> bool:
        """Finitely many finite losses: bounded (the mass at ``+inf`` is tracked apart)."""
        return False

    def atom(self) -> float | None:
        """The atom of largest magnitude."""
        return max(abs(self.losses[0]), abs(self.losses[-1]))

    def bounds(self, tail: float) -> tuple[float, float]:
        """The smallest and largest finite loss."""
        del tail
        return self.losses[0], self.losses[-1]


def worst_case_pair(epsilon: float, delta: float) -> AtomPair:
    """The pair whose trade-off function is ``f_{eps,delta}`` (Kairouz, Oh, Viswanath 2015).

    ``P``: ``+inf`` with mass delta, ``+eps`` with ``(1 - delta) e^eps / (1 + e^eps)``, ``-eps``
    with ``(1 - delta) / (1 + e^eps)``. Every (eps, delta)-DP mechanism is a post-processing of
    it ((eps, delta)-DP is f_{eps,delta}-DP, Dong, Roth and Su 2022, Section 2), so it dominates.
    """
    if epsilon == 0.0:
        return AtomPair((0.0,), (1.0 - delta,), delta)
    # written with e^-eps only, so that no epsilon overflows (the -eps atom underflows to 0
    # beyond eps ~ 745; its Q-mass then counts as Q(L = -inf), which only raises delta)
    hi = (1.0 - delta) / (1.0 + math.exp(-epsilon))
    lo = (1.0 - delta) * math.exp(-epsilon) / (1.0 + math.exp(-epsilon))
    return AtomPair((-epsilon, epsilon), (lo, hi), delta)


Pair = MixturePair | ReplacePair | AtomPair


def _scale_for(mu: float) -> float:
    """``1 / mu`` rounded *down*, so that the pair's shift ``1 / scale`` is at least ``mu``."""
    return rounding.down(1 / Fraction(mu))


def gaussian_pair(mu: float) -> Pair:
    """``P = N(mu, 1)``, ``Q = N(0, 1)`` (the Gaussian mechanism, ``mu`` = sensitivity / sigma),
    as the noise-scale pair ``N(1, s^2)`` vs ``N(0, s^2)`` with ``s = 1/mu`` rounded down (the
    loss ``L ~ N(mu^2/2, mu^2)`` is then at least as spread: pessimistic). ``mu = 0`` is the
    identity pair, ``mu = inf`` the pair that reveals everything."""
    if mu == 0.0:
        return AtomPair((0.0,), (1.0,))
    if math.isinf(mu) or _scale_for(mu) == 0.0:
        return AtomPair((0.0,), (0.0,), 1.0)
    return MixturePair("gaussian", _scale_for(mu), 1.0, "remove")


def laplace_pair(mu: float) -> Pair:
    """``P = Lap(mu, 1)``, ``Q = Lap(0, 1)`` (the Laplace mechanism, ``mu`` = sensitivity / b),
    as ``Lap(1, b)`` vs ``Lap(0, b)`` with ``b = 1/mu`` rounded down (loss clipped to
    ``[-1/b, 1/b]``, at least as wide)."""
    if mu == 0.0:
        return AtomPair((0.0,), (1.0,))
    if math.isinf(mu) or _scale_for(mu) == 0.0:
        return AtomPair((0.0,), (0.0,), 1.0)
    return MixturePair("laplace", _scale_for(mu), 1.0, "remove")


def atom_pair(losses: FloatArray, masses: FloatArray, inf_mass: float) -> AtomPair:
    """An :class:`AtomPair` from unsorted atoms (equal losses merged, empty atoms dropped)."""
    order = np.argsort(losses, kind="stable")
    ls, ms = losses[order], masses[order]
    uniq, inv = np.unique(ls, return_inverse=True)
    tot = np.bincount(inv, weights=ms)
    keep = tot > 0.0
    if not keep.any():
        return AtomPair((0.0,), (0.0,), inf_mass)
    return AtomPair(
        tuple(float(v) for v in uniq[keep]), tuple(float(v) for v in tot[keep]), inf_mass
    )


def tradeoff_segments_pair(p_f: FloatArray, q_f: FloatArray, q_only: float) -> AtomPair:
    """The pair of a piecewise-linear trade-off function ``T(P_f, Q_f)`` from its segments.

    Segment ``i`` is an outcome with ``P_f``-mass ``p_f[i]`` and ``Q_f``-mass ``q_f[i]``; here
    ``P = Q_f`` and ``Q = P_f``, so its loss is ``log(q_f / p_f)`` with P-mass ``q_f``. The drop
    at alpha = 0 (``q_only``, impossible under ``P_f``) is the mass at ``+inf``; outcomes with
    ``q_f = 0`` carry only Q-mass (loss ``-inf``) and need no atom.
    """
    live = (q_f > 0.0) & (p_f > 0.0)
    pure = (q_f > 0.0) & (p_f <= 0.0)  # a segment of infinite slope: Q_f-only mass
    inf_mass = min(1.0, q_only + float(np.sum(q_f[pure])))
    with np.errstate(divide="ignore"):
        loss = np.log(q_f[live]) - np.log(p_f[live])
    return atom_pair(loss, q_f[live], inf_mass)


def randomized_response_pair(p_truth: float, categories: int) -> AtomPair | None:
    """k-ary randomized response: losses ``+eps`` (mass p), ``-eps`` (mass ``r``) and 0 (mass
    ``(k - 2) r``), ``r = (1 - p)/(k - 1)``, ``eps = ln(p / r)``; None when ``eps <= 0``."""
    p, k = p_truth, categories
    if p == 1.0:
        return AtomPair((0.0,), (0.0,), 1.0)
    eps = math.log(p * (k - 1) / (1.0 - p))
    if eps <= 0.0:
        return None
    other = (1.0 - p) / (k - 1)
    if k == 2:
        return AtomPair((-eps, eps), (other, p))
    return AtomPair((-eps, 0.0, eps), (other, (k - 2) * other, p))


def discrete_laplace_pair(scale: float, sens: int) -> AtomPair:
    """P = DLap(0, t), Q = DLap(Delta, t): loss (|k - Delta| - |k|) / t."""
    r = math.exp(-1.0 / scale)
    norm = (1.0 - r) / (1.0 + r)
    try:
        top = float(sens) / scale
    except OverflowError:  # a sensitivity beyond the double range: no finite loss bound
        return AtomPair((0.0,), (0.0,), 1.0)
    if math.isinf(top):
        return AtomPair((0.0,), (0.0,), 1.0)
    # the middle atoms k = 1 .. Delta - 1 (P-mass norm r^k) are listed while they matter: past
    # K (where the remaining P-mass r^(K+1) / (1 + r) is below 1e-40, or 2^22 atoms) their
    # mass is moved up to the largest loss Delta / t
    # (raising a loss only raises the privacy profile: pessimistic)
    n_mid = sens - 1
    k_tail = scale * 40.0 * math.log(10.0) + 1.0
    k_max = int(min(float(n_mid), k_tail, float(_MAX_ATOMS)))
    ks = np.arange(1, k_max + 1, dtype=np.float64)
    rest = 0.0
    if k_max < n_mid:
        # exactly r^(K+1) (1 - r^(Delta - 1 - K)) / (1 + r), rounded up
        rest = r ** (k_max + 1) * -math.expm1(-(n_mid - k_max) / scale) / (1.0 + r) * (1.0 + 1e-12)
    losses = [top, -top]
    masses = [1.0 / (1.0 + r) + rest, r**sens / (1.0 + r)]
    mid_l = (sens - 2.0 * ks) / scale
    mid_m = norm * r**ks
    return atom_pair(np.concatenate((losses, mid_l)), np.concatenate((masses, mid_m)), 0.0)


def discrete_gaussian_pair(sigma: float, sens: int) -> AtomPair:
    """P = N_Z(0, s^2), Q = N_Z(Delta, s^2): loss (Delta^2 - 2 k Delta) / (2 s^2).

    The support is cut where the P-mass left out is below 1e-30; that mass is put at +inf
    (pessimistic).
    """
    half = math.ceil(sigma * 12.0) + 2 * sens + 2
    if half > _MAX_ATOMS:
        raise PrivacyParameterError(
            f"the discrete Gaussian (sigma={sigma!r}, sensitivity={sens}) has too many "
            f"support points for the PLD accountant (about {2 * half + 1:.3g} > "
            f"{2 * _MAX_ATOMS + 1})"
        )
    ks = np.arange(-half, half + 1, dtype=np.float64)
    logw = -(ks**2) / (2.0 * sigma**2)
    # normaliser over Z: the sum over the window plus a geometric bound on the rest
    z_win = float(np.sum(np.exp(logw)))
    out_bound = (
        2.0
        * math.exp(-((half + 1) ** 2) / (2.0 * sigma**2))
        / (1.0 - math.exp(-(2 * half + 1) / (2.0 * sigma**2)))
    )
    probs = np.exp(logw) / z_win  # slightly too large: the normaliser used is a lower bound
    inf_mass = out_bound / z_win
    losses = (sens**2 - 2.0 * ks * sens) / (2.0 * sigma**2)
    scale_back = 1.0 / (1.0 + inf_mass)
    return atom_pair(losses, probs * scale_back, min(1.0, inf_mass * (1.0 + 1e-9)))


def laplace_profile(eps: float, mu: float) -> float:
    """The privacy profile of the Laplace pair, ``H_{e^eps}(Lap(mu, 1) || Lap(0, 1))``.

    ``0`` for ``eps >= mu``, ``1 - e^{(eps - mu)/2}`` for ``|eps| < mu`` and ``1 - e^eps`` for
    ``eps <= -mu`` (the loss is clipped to ``[-mu, mu]``; the hockey-stick divergence of two
    Laplace laws, Balle and Wang 2018). Evaluated with ``expm1`` (a few ulps); callers round in
    their safe direction. The one home of this formula (the divergence pair, the Laplace
    trade-off function and the accountant's single-Laplace closed form read it).
    """
    if eps >= mu:
        return 0.0
    return -math.expm1((eps - mu) / 2.0) if eps > -mu else -math.expm1(eps)


def pair_profile(pair: Pair, eps: float) -> float:
    """``delta(eps) = P(L > eps) - e^eps Q(L > eps)`` of one pair, from its tails (no grid)."""
    sf_p, sf_q, _, _ = pair.tails(np.array([eps], dtype=np.float64))
    with np.errstate(over="ignore", invalid="ignore"):
        val = float(sf_p[0]) - math.exp(min(eps, 700.0)) * float(sf_q[0])
    return max(0.0, val)
