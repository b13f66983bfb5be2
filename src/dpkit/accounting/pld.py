"""Privacy-loss distributions: numeric composition by FFT with pessimistic discretisation.

The privacy loss of a dominating pair ``(P, Q)`` is ``L = log(dP/dQ)`` with ``L ~ P``. For a
composition the losses add, so the composed loss is the convolution of the single ones, and

    delta(eps) = E_P[(1 - e^(eps - L))_+] = P(L = inf) + sum_{l > eps} p_l (1 - e^(eps - l))

(the hockey-stick divergence ``sup_S P(S) - e^eps Q(S)``, attained at ``S = {L > eps}``; this is
the privacy-loss-distribution formula of Sommer, Meiser and Mohammadi 2019 and of Koskela,
Jalko and Honkela 2020). Under
add/remove neighbouring a Poisson-subsampled mechanism has two different pairs (the "remove"
pair ``(M(D), M(D'))`` and the "add" pair ``(M(D'), M(D))``); for a fixed ordered pair of
neighbouring datasets every step is in the same direction, so each direction is composed on its
own and ``delta = max(delta_remove, delta_add)`` (Zhu, Dong and Wang 2022, dominating pairs
of Poisson subsampling; the dp_accounting library does the same).

Error analysis of the upper bound (:meth:`PldAccountant.get_epsilon`)
--------------------------------------------------------------------
1. *Discretisation (pessimistic).* Each single PLD is replaced by a PLD supported on the grid
   ``h Z`` (plus ``+inf``) that *dominates* it: the pessimistic "connect the dots" PLD of
   Doroshenko, Ghazi, Kamath, Kumar and Manurangsi (PETS 2022), whose privacy curve is the
   chord interpolation of the true curve ``delta(x)``, convex in ``x = e^eps``, through the grid
   points, hence above it everywhere. On a grid interval ``(e_{i-1}, e_i]`` with P-mass ``a`` and
   Q-mass ``b`` it puts ``x_i (a - x_{i-1} b) / (x_i - x_{i-1})`` on ``e_i`` and
   ``x_{i-1} (x_i b - a) / (x_i - x_{i-1})`` on ``e_{i-1}`` (both >= 0 since the loss lies in
   the interval). P-mass below the lowest grid point is moved up onto it, P-mass above the
   highest point ``e_n`` goes to ``+inf`` except ``e^{e_n} Q(L > e_n)``, kept on ``e_n``, so the
   mass at infinity is exactly ``delta(e_n)`` and is tracked exactly through the composition
   (``1 - prod (1 - m_j)^{k_j}``). Domination is preserved by composition: the composed curve
   at ``eps`` is ``E[delta_1(eps - S)]`` with ``S`` the loss of the other factors, so raising
   ``delta_1`` pointwise (for every real argument) raises it, and one factor at a time the
   composed grid curve bounds the true one from above (the same argument, with the
   inequality reversed, proves the lower bound below). The
   excess is of second order in ``h`` (chord error), which is why ``h ~ 1e-4`` suffices even
   for 10^4 steps. ``discretisation="round_up"`` gives the simpler privacy-buckets scheme
   (Meiser and Mohammadi 2018): every loss rounded up to the grid; also dominating, but its bias
   is first order (about ``k h / 2`` after ``k`` steps).
2. *Truncation of the FFT domain.* Composition is a circular convolution on ``N`` grid points
   that covers ``[A, B]``. Mass of the composed grid PLD above ``B`` would wrap around to low
   losses (optimistic); its size is bounded by Chernoff's inequality with the exact moment
   generating functions of the grid PLDs, ``P(S >= B) <= min_t prod_j M_j(t)^{k_j} e^{-t B}``,
   and this bound is *added* to delta. Mass below ``A`` wraps to high losses (pessimistic for
   the upper bound; subtracted, with its own Chernoff bound, for the lower bound).
3. *Floating point.* The CDF differences and the FFT carry round-off of order
   ``2^-52 * (number of grid points)`` relative to the mass; after the inverse FFT entries that
   should be zero come out at about +-that level. We clip negative entries to zero (which only
   raises delta) and add ``noise * (number of grid points above eps)`` where ``noise`` is the
   largest magnitude of a negative entry. This is an a-posteriori allowance, not a proof.
4. *pmf slack.* Events with ``pmf_slack = a`` describe samplers whose pmf is within
   ``exp(+-a)`` of the ideal one; with ``A = sum_j k_j a_j`` the answers are
   ``delta(eps) = e^A delta_ideal(eps - 2A)`` and ``eps(delta) = eps_ideal(delta e^-A) + 2A``
   (see :mod:`dpkit.accounting.events`).

The final epsilon is obtained exactly between two grid points (the curve is ``alpha - beta
e^eps`` there) and rounded up by ``1e-12 (1 + |eps|)`` for the last floating-point operations.

Lower bound and estimate (:meth:`PldAccountant.get_epsilon_bounds`): the lower bound composes
grid measures whose privacy curves lie *below* the true ones (supporting lines of the convex
curve at neighbouring grid points, then a lower convex hull; see :func:`_tangent_lower`), so it
is rigorous for the ideal mechanisms and, like the upper bound, accurate to second order in
``h``; FFT wrap-around and round-off allowances are subtracted. The estimate splits each
interval's mass between its end points so that the conditional mean loss ``log(a / b)`` is
kept (exact for atoms); it is not a bound.

Grid: unless ``value_discretization_interval`` is given, ``h = 2e-4 * sd`` where ``sd`` is the
standard deviation of the composed loss (from a pilot discretisation), but at least
``width / 2e5`` (``width`` = the widest single-PLD support, so no single PLD needs more than
2e5 points: with few compositions the relevant tail is then resolved on its own scale), clamped
to ``[1e-7, 1e-2]`` unless the width term is larger (huge losses such as Laplace with
``eps0 = 1e6`` then get a coarser grid rather than 10^8 points), and shrunk so that the largest
atom of the losses (Laplace, pure DP) lies on the grid when it spans at least one step. The
domain ``[A, B]`` is chosen from the Chernoff bounds so that each wrapped mass is below
``1e-18``. A composed grid above ``2^23`` points is coarsened (step times 4, again a valid upper
bound) when the step is automatic, and refused with a clear error when it was given.

Closed forms (no grid, exact up to the final rounding): Gaussian mechanisms alone compose to
``mu``-GDP, ``mu^2 = sum k_j / sigma_j^2`` (Dong, Roth and Su 2022, Corollary 3.3); ``k`` copies
of one (epsilon, delta)-DP event (pure DP, exponential mechanism, report noisy max) use the
optimal composition of Kairouz, Oh and Viswanath (2015); one Laplace mechanism has
``delta(eps) = 1 - e^{(eps - eps0)/2}``. Their time and memory do not depend on the parameters.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from scipy import fft as sp_fft

from dpkit._numeric import rounding
from dpkit._numeric.gaussian import DELTA_REL_MARGIN, gaussian_delta, gaussian_delta_up
from dpkit._numeric.rounding import sqrt_down, sqrt_up
from dpkit._numeric.validation import check_delta, check_epsilon, check_positive
from dpkit.accounting._base import PrivacyAccountant
from dpkit.accounting._pld_pairs import (
    AtomPair,
    FloatArray,
    MixturePair,
    worst_case_pair,
)
from dpkit.accounting.events import (
    ApproxDpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    NonPrivateEvent,
    NoOpEvent,
    PoissonSampledEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
)
from dpkit.errors import PrivacyParameterError

if TYPE_CHECKING:
    from dpkit.fdp import TradeOffFunction  # pragma: no cover

__all__ = ["PldAccountant"]

Pair = MixturePair | AtomPair
Mode = Literal["connect_dots", "round_up", "round_down", "mean", "tangent"]

_TAIL = 1e-20  # P-mass left outside a single PLD's grid on each side (moved pessimistically)
_WRAP_LOG = math.log(1e-18)  # target for each Chernoff-bounded wrapped mass
_MAX_POINTS = 1 << 23  # about 70 MB per float array; bounds the memory of one query
_HULL_PASSES = 64  # vectorised hull passes; what is left non-convex is clipped (see excess)
_MAX_SINGLE = 2e5  # grid points per single PLD when the grid step is chosen automatically
_MAX_STEP = 1e3  # coarsest grid step: beyond it the upper bounds are reported as infinite
_MAX_COUNT = 1 << 53  # largest count the grid composes (the FFT power is taken in doubles)


@dataclasses.dataclass(frozen=True)
class _Component:
    remove: Pair
    add: Pair
    # what the component is, for the closed forms: ("gaussian", sigma) for the plain Gaussian
    # mechanism, ("dp", epsilon, delta) for the worst-case pair of (epsilon, delta)-DP
    kind: tuple[Any, ...] = ()


class _NoFiniteBoundError(PrivacyParameterError):
    """The losses span more than any grid can hold: upper bounds are infinite."""


class _GridTooLargeError(PrivacyParameterError):
    """The grid would need more than ``_MAX_POINTS`` points (coarsened when automatic)."""


@dataclasses.dataclass
class _GridPld:
    """A sub-probability on ``h * (start + arange(len(w)))`` plus mass at ``+inf``."""

    start: int
    w: FloatArray
    inf_mass: float
    excess: float = 0.0  # (lower bounds) how far the grid curve may exceed the true one


def _discretise(pair: Pair, h: float, mode: Mode) -> _GridPld:
    """Put ``pair``'s PLD on the grid ``h Z`` (see the module docstring, item 1)."""
    lo, hi = pair.bounds(_TAIL)
    span = (hi - lo) / h
    if not span <= _MAX_POINTS:
        raise _GridTooLargeError(
            f"the PLD grid would need about {span:.3g} points (> {_MAX_POINTS}) for one "
            "mechanism; use a coarser value_discretization_interval"
        )
    i_lo = math.floor(lo / h) - 1
    i_hi = math.ceil(hi / h) + 1
    e = h * np.arange(i_lo, i_hi + 1, dtype=np.float64)
    sf_p, sf_q, cdf_p, cdf_q = pair.tails(e)
    # interval masses on (e[i-1], e[i]], each from the side where the tail is small
    a = np.where(sf_p[:-1] <= 0.5, sf_p[:-1] - sf_p[1:], cdf_p[1:] - cdf_p[:-1])
    b = np.where(sf_q[:-1] <= 0.5, sf_q[:-1] - sf_q[1:], cdf_q[1:] - cdf_q[:-1])
    a = np.maximum(a, 0.0)
    b = np.maximum(b, 0.0)
    n = e.size
    w = np.zeros(n, dtype=np.float64)
    top_sf_p = float(sf_p[-1])
    if mode == "tangent":
        # supporting lines at the midpoints (in x = e^eps) of the grid intervals, and just left
        # of each grid point (left derivative at an atom)
        e_mid = e[:-1] + math.log((1.0 + math.exp(h)) / 2.0)
        sfp_mid, sfq_mid, _, _ = pair.tails(e_mid)
        sfp_left, sfq_left, _, _ = pair.tails(e - 1e-6 * h)
        low = _tangent_lower(e, sf_p, sf_q, sfp_mid, sfq_mid, sfp_left, sfq_left, h, i_lo)
        if low is not None:
            return low
        mode = "round_down"
    if mode == "round_down":
        w[:-1] += a  # mass below e[0] dropped: a sub-probability, still dominated
        w[-1] += top_sf_p  # everything above e[-1], +inf included, rounded down onto it
        return _GridPld(i_lo, w, 0.0)
    w[0] += float(cdf_p[0])  # mass at or below the lowest point, rounded up onto it
    if mode == "round_up":
        w[1:] += a
        return _GridPld(i_lo, w, top_sf_p)
    if mode == "mean":
        # estimate: split each interval's mass so that its mean loss is kept, taking the
        # conditional mean as log(a / b) (exact for an atom, second order otherwise)
        with np.errstate(divide="ignore", invalid="ignore"):
            lbar = np.where((a > 0.0) & (b > 0.0), np.log(a) - np.log(b), e[1:])
        frac = np.clip((lbar - e[:-1]) / h, 0.0, 1.0)
        w[1:] += a * frac
        w[:-1] += a * (1.0 - frac)
        w[-1] += top_sf_p
        return _GridPld(i_lo, w, 0.0)
    # connect the dots (Doroshenko et al. 2022, Algorithm 1), written per interval
    # x_{i-1} b and x_i b through logs: e^eps overflows for large losses while b underflows
    with np.errstate(divide="ignore"):
        log_b = np.log(b)
        log_top_q = math.log(float(sf_q[-1])) if sf_q[-1] > 0.0 else -math.inf
    xb_prev = np.exp(e[:-1] + log_b)
    xb_next = np.exp(e[1:] + log_b)
    em1 = math.expm1(h)
    upper = np.maximum((a - xb_prev) * (math.exp(h) / em1), 0.0)
    lower = np.maximum((xb_next - a) / em1, 0.0)
    w[1:] += upper
    w[:-1] += lower
    kept = min(top_sf_p, math.exp(min(float(e[-1]) + log_top_q, 700.0)))
    w[-1] += kept
    return _GridPld(i_lo, w, max(0.0, top_sf_p - kept))


def _tangent_lower(
    e: FloatArray,
    sf_p: FloatArray,
    sf_q: FloatArray,
    sfp_mid: FloatArray,
    sfq_mid: FloatArray,
    sfp_left: FloatArray,
    sfq_left: FloatArray,
    h: float,
    start: int,
) -> _GridPld | None:
    """A grid measure whose privacy curve lies *below* the true one (for lower bounds).

    In ``x = e^eps`` the curve ``f(x) = P(L > log x) - x Q(L > log x)`` is convex and, for
    every real ``c``, ``T_c(x) = P(L > c) - x Q(L > c)`` is a supporting line at ``e^c``. Let
    ``M_i`` be the supporting line at the midpoint ``(x_{i-1} + x_i) / 2`` of grid interval
    ``i``. The piecewise-linear curve through ``v_i = min(f(x_i), M_i(x_i), M_{i+1}(x_i))``, with
    ``v(0) = P(L > e_0)`` (first piece below ``T_{e_0}``) and ``v = 0`` from the last grid point
    on (last piece below the line just left of that point; a piece where ``M_i(x_i) < 0`` uses
    the line just left of ``x_i`` instead of ``M_i``), lies below one supporting line on each
    piece, hence below ``f``; its error is of second order in ``h`` (about an eighth of
    ``f'' (x_i - x_{i-1})^2``, like the chords of the upper bound). Its lower convex hull is lower
    still and convex, so it is the curve of the measure with masses ``x_i (s_{i+1} - s_i)``
    (``s`` the slopes of the hull) on the hull's vertices; masses that come out negative
    (round-off) are set to zero and their total is kept as ``excess``, a bound on how far the
    curve may then exceed ``f``. Composition preserves
    "curve below" factor by factor (condition on the other factors), so the composed grid
    curve minus ``sum k_j excess_j`` is a lower bound.
    """
    if e[-1] > 700.0:
        return None
    x = np.exp(e)
    f = sf_p - x * sf_q
    v = f.copy()
    # interval i (from x_{i-1} to x_i) lies below the supporting line M_i at its midpoint
    # (error a quarter of an end-point tangent's): both of its end values must be <= M_i
    # (where M_i is already negative at x_i, the curve could not follow it with a non-negative
    # measure: that interval uses the supporting line at x_i itself, which is f(x_i) >= 0 there)
    mid_right = sfp_mid - x[1:] * sfq_mid
    mid_left = sfp_mid - x[:-1] * sfq_mid
    use_mid = mid_right >= 0.0
    v[1:] = np.minimum(v[1:], np.where(use_mid, mid_right, sfp_left[1:] - x[1:] * sfq_left[1:]))
    v[:-1] = np.minimum(v[:-1], np.where(use_mid, mid_left, sfp_left[1:] - x[:-1] * sfq_left[1:]))
    # the last interval lies below the line just left of the last point, where v drops to 0
    v[-2] = min(float(v[-2]), float(sfp_left[-1] - x[-2] * sfq_left[-1]))
    v[-1] = 0.0
    v = np.maximum(v, 0.0)
    # lower convex hull of (0, P(L > e_0)), (x_i, v_i): dropping a vertex that lies above the
    # chord of its neighbours only lowers the curve; isolated vertices are dropped per pass
    xs = np.concatenate(([0.0], x))
    vs = np.concatenate(([float(sf_p[0])], v))
    keep = np.arange(xs.size)
    for _ in range(_HULL_PASSES):
        kx, kv = xs[keep], vs[keep]
        sl = np.diff(kv) / np.diff(kx)
        viol = np.zeros(keep.size, dtype=bool)
        viol[1:-1] = sl[:-1] > sl[1:]
        if not viol.any():
            break
        viol[1:] &= ~viol[:-1]
        keep = keep[~viol]
    kx, kv = xs[keep], vs[keep]
    slopes = np.concatenate((np.diff(kv) / np.diff(kx), [0.0]))
    masses = kx[1:] * np.diff(slopes)
    w = np.zeros(e.size, dtype=np.float64)
    w[keep[1:] - 1] = masses
    neg = w < 0.0
    excess = float(-w[neg].sum()) if neg.any() else 0.0
    w[neg] = 0.0
    return _GridPld(start, w, 0.0, excess)


def _log_mgfs(g: _GridPld, h: float, ts: FloatArray) -> FloatArray:
    """``log sum_i w_i e^(t l_i)`` over the finite part for each ``t`` (``-inf`` if empty)."""
    pos = np.nonzero(g.w > 0.0)[0]
    out = np.full(ts.size, -np.inf)
    if pos.size == 0:
        return out
    ls = h * (g.start + pos)
    logw = np.log(g.w[pos])
    for j, t in enumerate(ts):
        a = t * ls + logw
        m = float(a.max())
        out[j] = m + math.log(float(np.sum(np.exp(a - m))))
    return out


@dataclasses.dataclass
class _Composed:
    """A composed grid PLD in loss order, ready for delta(eps) queries."""

    losses: FloatArray
    pmf: FloatArray
    inf_mass: float  # exact composed mass at +inf (rounded up)
    wrap_high: float  # Chernoff bound on mass above the domain (wrapped to low losses)
    wrap_low: float  # Chernoff bound on mass below the domain (wrapped to high losses)
    noise: float  # floating-point noise level seen in the result
    max_loss: float  # largest finite loss with positive mass (sum of the single maxima)
    excess: float = 0.0  # (lower bounds) sum of k_j excess_j
    deficit: float = 0.0  # (upper bounds) finite mass lost to round-off: 1 - inf_mass - sum(pmf)

    def _tail_sums(self) -> tuple[FloatArray, FloatArray]:
        """``P_t = sum_{s >= t} p_s`` and ``log Q_t`` with ``Q_t = sum_{s >= t} p_s e^{-l_s}``.

        ``Q_t`` is kept as a logarithm (accumulated with ``logaddexp``) so that losses of any
        size neither overflow nor underflow.
        """
        p = self.pmf
        ptail = np.cumsum(p[::-1])[::-1]
        with np.errstate(divide="ignore"):
            terms = np.log(p) - self.losses
        log_qtail = np.logaddexp.accumulate(terms[::-1])[::-1]
        return ptail, log_qtail

    def delta(self, eps: float, *, upper: bool) -> float:
        """delta(eps) of the composed grid PLD, plus (upper) or minus (lower) the allowances."""
        if self.inf_mass == 0.0 and eps >= self.max_loss:
            return 0.0
        above = self.losses > eps
        p = self.pmf[above]
        with np.errstate(over="ignore"):
            val = float(np.sum(p * -np.expm1(eps - self.losses[above])))
        if upper:
            extra = (self.inf_mass + self.wrap_high + self.deficit
                     + self.noise * float(np.count_nonzero(above)))
            return min(1.0, val + extra)
        return max(
            0.0, val + self.inf_mass - self.wrap_low - self.excess - self.noise * float(p.size)
        )

    def epsilon(self, delta: float, *, upper: bool) -> float:
        """Smallest eps with ``delta(eps) <= delta`` for this composed PLD (upper or lower)."""
        n_pts = self.pmf.size
        if delta == 0.0:
            # delta(eps) = 0 exactly iff no infinite mass and eps >= the largest finite loss
            return math.inf if self.inf_mass > 0.0 else self.max_loss
        if upper:
            const = self.inf_mass + self.wrap_high + self.deficit
        else:
            const = self.inf_mass - self.wrap_low - self.excess
        target = delta - const
        if upper and target <= 0.0:
            return math.inf
        ptail, log_qtail = self._tail_sums()
        # delta at grid point l_t: sum_{s > t} p_s (1 - e^{l_t - l_s})
        ptail_next = np.concatenate((ptail[1:], [0.0]))
        log_q_next = np.concatenate((log_qtail[1:], [-np.inf]))
        d_grid = ptail_next - np.exp(self.losses + log_q_next)
        count_above = n_pts - 1 - np.arange(n_pts)
        sign = 1.0 if upper else -1.0
        d_grid = d_grid + sign * self.noise * count_above
        ok = np.nonzero(d_grid <= target)[0]
        if ok.size == 0:  # pragma: no cover - the top grid point always has nothing above
            return math.inf
        t = int(ok[0])
        pt, log_qt = float(ptail[t]), float(log_qtail[t])
        pt += sign * self.noise * float(n_pts - t)
        lowest = float(self.losses[t - 1]) if t > 0 else -math.inf
        # on (l_{t-1}, l_t]: delta(eps) = pt - e^eps qt; solve pt - e^eps qt = target
        if log_qt == -math.inf or pt <= target:
            return lowest
        eps = math.log(pt - target) - log_qt
        return min(max(eps, lowest), float(self.losses[t]))


def _compose(
    comps: Sequence[tuple[_GridPld, int]], inf_factor_log: float, h: float
) -> _Composed:
    """Circular FFT composition of grid PLDs (each raised to its count) on a safe domain."""
    # composed inf mass: 1 - prod (1 - m_j)^k_j, with the non-private factor folded in
    log_fin = inf_factor_log
    for g, k in comps:
        log_fin += k * math.log1p(-min(g.inf_mass, 1.0)) if g.inf_mass < 1.0 else -math.inf
    inf_mass = -math.expm1(log_fin) if log_fin > -math.inf else 1.0
    inf_mass = min(1.0, inf_mass * (1.0 + 1e-12))
    live = [(g, k) for g, k in comps if k > 0]
    if not live or inf_mass >= 1.0:
        return _Composed(np.zeros(1), np.zeros(1), inf_mass, 0.0, 0.0, 0.0, 0.0)
    # Chernoff bounds choose the domain [A, B]
    ts = np.array([0.125, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0, 64.0,
                   128.0, 256.0, 512.0, 1024.0, 4096.0])
    signed = np.concatenate((ts, -ts))
    total = np.zeros(signed.size)
    for g, k in live:
        total += k * _log_mgfs(g, h, signed)
    up_all, dn_all = total[: ts.size], total[ts.size :]
    best_hi, best_lo = math.inf, -math.inf
    for t, up, dn in zip(ts, up_all, dn_all, strict=True):
        if math.isfinite(up):
            best_hi = min(best_hi, (up - _WRAP_LOG) / t)
        if math.isfinite(dn):
            best_lo = max(best_lo, (_WRAP_LOG - dn) / t)
    lo_sum = sum(k * h * g.start for g, k in live)
    hi_sum = sum(k * h * (g.start + g.w.size - 1) for g, k in live)
    b_edge = min(best_hi, hi_sum)
    a_edge = max(best_lo, lo_sum)
    i0 = math.floor(a_edge / h)
    i1 = math.ceil(b_edge / h)
    n = sp_fft.next_fast_len(i1 - i0 + 1, real=True)
    if n > _MAX_POINTS:
        raise _GridTooLargeError(
            f"the PLD grid would need {n} points (> {_MAX_POINTS}); use a coarser "
            "value_discretization_interval"
        )
    spec: Any = None
    for g, k in live:
        idx = (g.start + np.arange(g.w.size)) % n
        arr = np.bincount(idx, weights=g.w, minlength=n)
        f = sp_fft.rfft(arr)
        f = f**k if k > 1 else f
        spec = f if spec is None else spec * f
    c = np.asarray(sp_fft.irfft(spec, n), dtype=np.float64)
    c = np.roll(c, -(i0 % n))
    losses = h * (i0 + np.arange(n, dtype=np.float64))
    neg = c[c < 0.0]
    noise = float(-neg.min()) if neg.size else 0.0
    noise = max(noise, float(n) * 2.0**-52 * float(np.max(np.abs(c))) * 1e-3)
    c = np.maximum(c, 0.0)
    # wrapped masses: zero if the whole support fits in the domain
    wrap_high = 0.0 if hi_sum <= h * (i0 + n - 1) else math.exp(_WRAP_LOG)
    wrap_low = 0.0 if lo_sum >= h * i0 else math.exp(_WRAP_LOG)
    # the largest finite composed loss, exactly (for delta = 0 queries, immune to FFT noise)
    max_loss = 0.0
    for g, k in live:
        pos = np.nonzero(g.w > 0.0)[0]
        max_loss += k * h * (g.start + int(pos[-1])) if pos.size else 0.0
    excess = sum(k * g.excess for g, k in live)
    # the composed grid PLD has total mass 1 (connect-the-dots and round-up keep every bit of
    # P-mass); what the FFT lost to round-off could sit anywhere, so the upper bounds add it
    deficit = max(0.0, 1.0 - inf_mass - float(np.sum(c)))
    return _Composed(losses, c, inf_mass, wrap_high, wrap_low, noise, max_loss, excess, deficit)


class PldAccountant(PrivacyAccountant):
    """Privacy-loss-distribution accountant: tight numeric composition with error bounds.

    ``get_epsilon`` / ``get_delta`` return *upper bounds* (pessimistic "connect the dots"
    discretisation, Chernoff-bounded FFT wrap-around, exact mass at infinity; see the module
    docstring for the full error analysis). ``get_epsilon_bounds`` adds a rigorous lower bound
    and an estimate. Composition is lazy: events are recorded and composed (FFT power per
    distinct mechanism, one inverse FFT per direction) at the first query, then cached.

    Supported: Gaussian, Laplace, discrete Laplace, discrete Gaussian, randomized response,
    pure and approximate DP (as the worst-case pair of ``f_{eps,delta}``), the exponential
    mechanism and report-noisy-max (as epsilon-DP), Poisson-subsampled Gaussian and Laplace under
    add/remove neighbouring (both directions), compositions, no-op and non-private events.
    """

    is_upper_bound = True

    def __init__(
        self,
        *,
        value_discretization_interval: float | None = None,
        discretisation: Literal["connect_dots", "round_up"] = "connect_dots",
    ) -> None:
        super().__init__()
        self._h_fixed = (
            None
            if value_discretization_interval is None
            else check_positive(value_discretization_interval, "value_discretization_interval")
        )
        if discretisation not in ("connect_dots", "round_up"):
            raise PrivacyParameterError(
                f"discretisation must be 'connect_dots' or 'round_up', got {discretisation!r}"
            )
        self._mode: Mode = discretisation
        self._counts: dict[_Component, int] = {}
        self._nonprivate = 0
        self._slack = 0.0  # sum of count * pmf_slack over the leaves
        self._cache: dict[str, tuple[_Composed, _Composed]] = {}
        self._cache_h: dict[str, float] = {}
        self._h_used: float | None = None
        self._width = 0.0

    # ---------------------------------------------------------------- interpretation
    def _walk(self, event: DpEvent, count: int, apply: bool) -> bool:
        if isinstance(event, NoOpEvent):
            return True
        if isinstance(event, NonPrivateEvent):
            if apply and count > 0:
                self._nonprivate += count
                self._cache.clear()
                self._cache_h.clear()
            return True
        if isinstance(event, ComposedEvent):
            return all(self._walk(e, count, apply) for e in event.events) if not apply else all(
                [self._walk(e, count, True) for e in event.events]
            )
        if isinstance(event, SelfComposedEvent):
            return self._walk(event.event, count * event.count, apply)
        leaf = self._leaf(event)
        if leaf is None:
            return False
        comp, slack = leaf
        if apply and count > 0:
            if comp is not None:
                self._counts[comp] = self._counts.get(comp, 0) + count
            if slack > 0.0:  # count * slack exactly, rounded up (inf beyond the double range)
                self._slack = rounding.up(Fraction(self._slack) + count * Fraction(slack))
            self._cache.clear()
            self._cache_h.clear()
        return True

    @staticmethod
    def _leaf(event: DpEvent) -> tuple[_Component | None, float] | None:
        """The component (None for zero cost) and the pmf slack of a leaf event, or None."""
        if isinstance(event, GaussianEvent):
            p = MixturePair("gaussian", event.noise_multiplier, 1.0, "remove")
            return _Component(p, p, ("gaussian", event.noise_multiplier)), event.pmf_slack
        if isinstance(event, LaplaceEvent):
            p = MixturePair("laplace", event.noise_multiplier, 1.0, "remove")
            return _Component(p, p, ("laplace", event.noise_multiplier)), event.pmf_slack
        if isinstance(event, PoissonSampledEvent):
            inner = event.event
            q = event.sampling_rate
            if isinstance(inner, NoOpEvent):
                return None, 0.0
            if not isinstance(inner, (GaussianEvent, LaplaceEvent)):
                return None
            if inner.neighbouring is not Neighbouring.ADD_REMOVE:
                return None
            if q == 0.0:
                return None, 0.0
            noise = "gaussian" if isinstance(inner, GaussianEvent) else "laplace"
            s = inner.noise_multiplier
            return (
                _Component(MixturePair(noise, s, q, "remove"), MixturePair(noise, s, q, "add")),
                inner.pmf_slack,
            )
        if isinstance(event, (PureDpEvent, ExponentialMechanismEvent, ReportNoisyMaxEvent)):
            p2 = worst_case_pair(event.epsilon, 0.0)
            slack = getattr(event, "pmf_slack", 0.0)
            comp = _Component(p2, p2, ("dp", event.epsilon, 0.0))
            return (None if event.epsilon == 0.0 else comp), slack
        if isinstance(event, ApproxDpEvent):
            if event.epsilon == 0.0 and event.delta == 0.0:
                return None, 0.0
            p2 = worst_case_pair(event.epsilon, event.delta)
            return _Component(p2, p2, ("dp", event.epsilon, event.delta)), 0.0
        if isinstance(event, RandomizedResponseEvent):
            return _rr_component(event), 0.0
        if isinstance(event, DiscreteLaplaceEvent):
            p2 = _discrete_laplace_pair(event.scale, event.sensitivity)
            return _Component(p2, p2), event.pmf_slack
        if isinstance(event, DiscreteGaussianEvent):
            p2 = _discrete_gaussian_pair(event.sigma, event.sensitivity)
            return _Component(p2, p2), event.pmf_slack
        return None

    # ---------------------------------------------------------------- composition
    def _choose_h(self, mode: Mode) -> float:
        """The grid step for ``mode`` (see the module docstring, "Grid"), cached per state."""
        hit = self._cache_h.get(mode)
        if hit is not None:
            return hit
        base, single_sd = self._base_h()
        h = base
        if mode == "tangent":
            # the lower bound's error grows when a single PLD spans few grid cells: refine up to
            # 16 times (and to at most 8e5 points per single PLD) so that the smallest single
            # standard deviation spans 50 cells
            want = max(single_sd / 50.0, base / 16.0, self._width / (4.0 * _MAX_SINGLE))
            h = base / max(1, math.ceil(base / want))
        self._cache_h[mode] = h
        return h

    def _base_h(self) -> tuple[float, float]:
        if self._h_fixed is not None:
            return self._h_fixed, math.inf
        var = 0.0
        width = 0.0
        single_sd = math.inf
        for comp, k in self._counts.items():
            if k > _MAX_COUNT:
                raise _NoFiniteBoundError(f"count {k} is beyond the PLD grid")
            for pair in (comp.remove, comp.add):
                lo, hi = pair.bounds(_TAIL)
                if not hi - lo <= _MAX_SINGLE * _MAX_STEP:
                    raise _NoFiniteBoundError("the privacy losses span beyond the PLD grid")
                width = max(width, hi - lo)
                h0 = max((hi - lo) / 4000.0, 1e-9)
                g = _discretise(pair, h0, "connect_dots")
                tot = float(g.w.sum())
                if tot <= 0.0:
                    continue
                ls = h0 * (g.start + np.arange(g.w.size))
                mean = float(np.dot(g.w, ls)) / tot
                v = float(np.dot(g.w, (ls - mean) ** 2)) / tot
                var = max(var, 0.0) + (k * v if pair is comp.remove else 0.0)
                if v > 0.0:
                    single_sd = min(single_sd, math.sqrt(v))
        self._width = width
        sd = math.sqrt(var) if var > 0.0 else 1.0
        # the width term wins over the 1e-2 cap: no single PLD needs more than _MAX_SINGLE points
        h = max(min(max(2e-4 * sd, 1e-7), 1e-2), width / _MAX_SINGLE)
        # put the largest atom exactly on the grid (Laplace, pure DP, randomized response), so
        # that e.g. delta(eps0) = 0 is reproduced for a Laplace mechanism; an atom below one
        # grid step is left where it is (the pessimistic discretisation holds for any grid)
        atoms = [v for c in self._counts for v in (c.remove.atom(), c.add.atom()) if v]
        if atoms and max(atoms) >= h:
            v = max(atoms)
            n = math.ceil(v / h)
            h = v / n
            while h * n < v:  # the atom must not sit above its grid point
                h = math.nextafter(h, math.inf)
        return h, single_sd

    def _composed(self, mode: Mode) -> tuple[_Composed, _Composed]:
        hit = self._cache.get(mode)
        if hit is not None:
            return hit
        h = self._choose_h(mode)
        for _ in range(40):
            try:
                return self._composed_at(mode, h)
            except _GridTooLargeError:
                if self._h_fixed is not None:
                    raise
                # any grid gives a valid (pessimistic) bound: coarsen until it fits
                h *= 4.0
                if h > _MAX_STEP:
                    raise _NoFiniteBoundError(
                        "the composed losses span beyond the PLD grid"
                    ) from None
                self._cache_h[mode] = h
        raise PrivacyParameterError(  # pragma: no cover - 4^40 coarser always fits
            "the PLD grid does not fit in memory at any step size"
        )

    def _composed_at(self, mode: Mode, h: float) -> tuple[_Composed, _Composed]:
        if mode == self._mode:
            self._h_used = h
        inf_log = -math.inf if self._nonprivate > 0 else 0.0
        out: list[_Composed] = []
        symmetric = all(c.remove == c.add for c in self._counts)
        for direction in ("remove", "add"):
            if direction == "add" and symmetric:
                out.append(out[0])  # same loss distribution in both directions
                continue
            comps = []
            for comp, k in self._counts.items():
                pair = comp.remove if direction == "remove" else comp.add
                comps.append((_discretise(pair, h, mode), k))
            out.append(_compose(comps, inf_log, h))
        res = (out[0], out[1])
        self._cache[mode] = res
        return res

    # ---------------------------------------------------------------- closed forms
    def _closed_form(self) -> tuple[str, Any] | None:
        """``("gaussian", mu^2)``, ``("dp", (eps, delta, k))`` or ``("laplace", b)`` when a closed
        form applies.

        One Laplace mechanism of scale ``b`` (``eps0 = 1/b``) has the profile
        ``delta(eps) = 1 - e^{(eps - eps0)/2}`` for ``eps < eps0`` and 0 above (Balle and Wang
        2018 / the hockey-stick divergence of two Laplace laws), so
        ``eps(delta) = max(0, eps0 + 2 ln(1 - delta))``. Plain Gaussian mechanisms compose to
        ``mu``-GDP with ``mu^2 = sum_j k_j / sigma_j^2``
        (Dong, Roth and Su 2022, Corollary 3.3), whose profile is exact
        (:func:`dpkit._numeric.gaussian.gaussian_delta`); ``k`` releases of one (eps, delta)-DP
        worst-case pair compose as in Kairouz, Oh and Viswanath (2015, Theorem 3.3), evaluated
        by :func:`dpkit.accounting.composition.optimal_composition`. Both are exact for any
        parameters, so the grid (whose size grows with the loss range) is not needed.
        """
        if self._nonprivate > 0 or not self._counts:
            return None
        kinds = {c.kind for c in self._counts}
        if all(k[:1] == ("gaussian",) for k in kinds):
            mu_sq = sum(
                (Fraction(n) / Fraction(c.kind[1]) ** 2 for c, n in self._counts.items()),
                Fraction(0),
            )
            return "gaussian", mu_sq
        if len(kinds) == 1:
            (kind,) = kinds
            if kind[:1] == ("dp",):
                return "dp", (kind[1], kind[2], sum(self._counts.values()))
            if kind[:1] == ("laplace",) and sum(self._counts.values()) == 1:
                return "laplace", kind[1]
        return None

    def _closed_epsilon(self, delta: float, upper: bool) -> float | None:
        """The ideal epsilon at ``delta`` from a closed form (rounded up / down), or None."""
        form = self._closed_form()
        if form is None:
            return None
        if form[0] == "gaussian":
            mu_sq: Fraction = form[1]
            mu = sqrt_up(mu_sq) if upper else sqrt_down(mu_sq)
            return _gaussian_epsilon(mu, delta, upper)
        if form[0] == "laplace":
            inv = 1 / Fraction(form[1])
            eps0 = rounding.up(inv) if upper else rounding.down(inv)
            val = eps0 + 2.0 * math.log1p(-delta)  # each step within an ulp or two
            margin = 8.0 * 2.0**-52 * (abs(eps0) + abs(val) + 1e-300)
            return max(0.0, val + margin if upper else val - margin)
        from dpkit.accounting.composition import optimal_composition

        eps, d0, k = form[1]
        try:
            val = optimal_composition(epsilon=eps, count=k, delta=delta, release_delta=d0)
        except PrivacyParameterError:  # too many binomial terms: use the grid
            return None
        if upper or not math.isfinite(val):
            return val
        return max(0.0, val - 1e-12 * (1.0 + val))  # the exact value rounded up, then down

    def _closed_delta(self, epsilon: float) -> float | None:
        """The ideal delta at ``epsilon`` from a closed form, rounded up, or None."""
        form = self._closed_form()
        if form is None or epsilon < 0.0:
            return None
        if form[0] == "gaussian":
            return gaussian_delta_up(epsilon, sqrt_up(form[1]))
        if form[0] == "laplace":
            eps0 = rounding.up(1 / Fraction(form[1]))
            if epsilon >= eps0:
                return 0.0
            val = -math.expm1(0.5 * (epsilon - eps0))
            return min(1.0, math.nextafter(val * (1.0 + 2.0**-48), math.inf))
        from dpkit.accounting.composition import optimal_composition_delta

        eps, d0, k = form[1]
        try:
            d_rr = optimal_composition_delta(epsilon=eps, count=k, target_epsilon=epsilon)
        except PrivacyParameterError:
            return None
        if d0 == 0.0:
            return d_rr
        # KOV Theorem 3.3: 1 - (1 - d0)^k (1 - delta_RR), with (1 - d0)^k rounded down
        survive = math.exp(k * math.log1p(-d0)) * (1.0 - 1e-12)
        return min(1.0, math.nextafter(1.0 - survive * (1.0 - d_rr), math.inf))

    # ---------------------------------------------------------------- queries
    def _eps_mode(self, delta: float, mode: Mode, upper: bool) -> float:
        if not self._counts and self._nonprivate == 0:
            return 0.0
        a = self._slack
        d_ideal = delta * math.exp(-a) if upper else delta
        closed = self._closed_epsilon(d_ideal, upper)
        if closed is not None:
            eps = closed
        else:
            try:
                r, ad = self._composed(mode)
            except _NoFiniteBoundError:
                return math.inf if upper else 0.0  # the trivial bounds
            eps = max(r.epsilon(d_ideal, upper=upper), ad.epsilon(d_ideal, upper=upper))
        if math.isnan(eps):  # numerically degenerate: certify nothing (upper) or the trivial 0
            return math.inf if upper else 0.0
        if eps == math.inf:
            return eps
        if closed is not None:  # already rounded in the safe direction
            if upper and a > 0.0:
                eps = math.nextafter(eps + 2.0 * a, math.inf)
            return max(eps, 0.0)
        # -inf (the grid curve is below delta everywhere) becomes 0 here
        if upper:
            eps = eps + 2.0 * a
            eps = eps + 1e-12 * (1.0 + abs(eps))
            return max(eps, 0.0)
        eps = eps - 1e-12 * (1.0 + abs(eps))
        return max(eps, 0.0)

    def _epsilon(self, delta: float) -> float:
        return self._eps_mode(delta, self._mode, True)

    def _delta(self, epsilon: float) -> float:
        if not self._counts and self._nonprivate == 0:
            return 0.0
        a = self._slack
        e = epsilon - 2.0 * a
        closed = self._closed_delta(e)
        if closed is not None:
            d = closed
        else:
            try:
                r, ad = self._composed(self._mode)
            except _NoFiniteBoundError:
                return 1.0  # the trivial bound
            d = max(r.delta(e, upper=True), ad.delta(e, upper=True))
        if math.isnan(d):
            return 1.0
        d = d * math.exp(a) * (1.0 + 1e-12)
        return min(1.0, d)

    def get_epsilon_bounds(self, delta: float) -> tuple[float, float, float]:
        """``(lower, estimate, upper)`` for epsilon at ``delta``.

        ``upper`` equals :meth:`get_epsilon`. ``lower`` is rigorous for the ideal mechanisms
        (grid curves below the true ones, second-order accurate; see the module docstring);
        ``estimate`` keeps each grid interval's
        mean loss (see the module docstring) and is not a bound. pmf slack only enters the upper
        bound.
        """
        delta = check_delta(delta)
        with self._lock:
            upper = self._epsilon(delta)
            if not self._counts and self._nonprivate == 0:
                return (0.0, 0.0, 0.0)
            lower = self._eps_mode(delta, "tangent", False)
            est = self._eps_mode(delta, "mean", False)
        est = min(max(est, lower), upper)
        return (min(lower, upper), est, upper)

    def privacy_profile(self, epsilons: Sequence[float] | FloatArray) -> FloatArray:
        """Upper bounds on ``delta(eps)`` for each ``eps`` in ``epsilons`` (each validated)."""
        vals = [check_epsilon(e, allow_zero=True) for e in np.asarray(epsilons).ravel().tolist()]
        with self._lock:
            return np.array([self._delta(e) for e in vals], dtype=np.float64)

    def to_tradeoff(
        self, *, epsilons: Sequence[float] | FloatArray | None = None
    ) -> TradeOffFunction:
        """An f-DP trade-off function built by ``dpkit.fdp.from_privacy_profile``.

        The profile is an upper bound at each ``eps``, so the trade-off function built from
        it is a valid lower bound on the true one (Dong, Roth and Su 2022, Proposition 2.12).
        """
        from dpkit import fdp

        eps_arr = np.linspace(0.0, 10.0, 201) if epsilons is None else np.asarray(epsilons)
        deltas = self.privacy_profile(eps_arr)
        result: TradeOffFunction = fdp.from_privacy_profile(epsilons=eps_arr, deltas=deltas)
        return result

    @property
    def discretization_interval(self) -> float | None:
        """The grid step used by the last composition (``None`` before any query)."""
        return self._h_used


# -------------------------------------------------------------------- Gaussian closed form
def _gaussian_epsilon(mu: float, delta: float, upper: bool) -> float:
    """Smallest epsilon with ``delta_mu(eps) <= delta`` for ``mu``-GDP, by bisection.

    ``upper``: on the profile rounded up (:func:`gaussian_delta_up`), returning the end of the
    bracket that satisfies it (an upper bound); otherwise on the profile rounded down by the
    same relative margin, returning the other end (a lower bound). No cap on epsilon: the
    bracket doubles up to the largest double.
    """
    def prof(e: float) -> float:
        if upper:
            return gaussian_delta_up(e, mu)
        return gaussian_delta(e, mu) * (1.0 - DELTA_REL_MARGIN)

    if prof(0.0) <= delta:
        return 0.0
    if delta == 0.0 or math.isinf(mu):
        return math.inf  # a Gaussian profile is positive everywhere
    hi = 1.0
    while prof(hi) > delta:
        hi *= 2.0
        if hi > 1e300:
            return math.inf if upper else hi / 2.0
    lo = 0.0 if hi == 1.0 else hi / 2.0
    for _ in range(2000):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if prof(mid) <= delta:
            hi = mid
        else:
            lo = mid
    return hi if upper else lo


# -------------------------------------------------------------------- discrete pairs
def _rr_component(event: RandomizedResponseEvent) -> _Component | None:
    """k-ary randomized response: losses +eps (mass p), -eps, 0 (mass (k-2)(1-p)/(k-1))."""
    p, k = event.p_truth, event.categories
    if p == 1.0:
        pair = AtomPair((0.0,), (0.0,), 1.0)
        return _Component(pair, pair)
    eps = math.log(p * (k - 1) / (1.0 - p))
    if eps <= 0.0:
        return None
    other = (1.0 - p) / (k - 1)
    if k == 2:
        pair = AtomPair((-eps, eps), (other, p))
    else:
        pair = AtomPair((-eps, 0.0, eps), (other, (k - 2) * other, p))
    return _Component(pair, pair)


def _atoms(losses: FloatArray, masses: FloatArray, inf_mass: float) -> AtomPair:
    order = np.argsort(losses, kind="stable")
    ls, ms = losses[order], masses[order]
    uniq, inv = np.unique(ls, return_inverse=True)
    tot = np.bincount(inv, weights=ms)
    keep = tot > 0.0
    return AtomPair(tuple(float(v) for v in uniq[keep]), tuple(float(v) for v in tot[keep]),
                    inf_mass)


def _discrete_laplace_pair(scale: float, sens: int) -> AtomPair:
    """P = DLap(0, t), Q = DLap(Delta, t): loss (|k - Delta| - |k|) / t."""
    r = math.exp(-1.0 / scale)
    norm = (1.0 - r) / (1.0 + r)
    ks = np.arange(1, sens, dtype=np.float64)
    losses = [sens / scale, -sens / scale]
    masses = [1.0 / (1.0 + r), r**sens / (1.0 + r)]
    mid_l = (sens - 2.0 * ks) / scale
    mid_m = norm * r**ks
    return _atoms(np.concatenate((losses, mid_l)), np.concatenate((masses, mid_m)), 0.0)


def _discrete_gaussian_pair(sigma: float, sens: int) -> AtomPair:
    """P = N_Z(0, s^2), Q = N_Z(Delta, s^2): loss (Delta^2 - 2 k Delta) / (2 s^2).

    The support is cut where the P-mass left out is below 1e-30; that mass is put at +inf
    (pessimistic).
    """
    half = math.ceil(sigma * 12.0) + 2 * sens + 2
    ks = np.arange(-half, half + 1, dtype=np.float64)
    logw = -(ks**2) / (2.0 * sigma**2)
    # normaliser over Z: the sum over the window plus a geometric bound on the rest
    z_win = float(np.sum(np.exp(logw)))
    out_bound = 2.0 * math.exp(-((half + 1) ** 2) / (2.0 * sigma**2)) / (
        1.0 - math.exp(-(2 * half + 1) / (2.0 * sigma**2))
    )
    probs = np.exp(logw) / z_win  # slightly too large: the normaliser used is a lower bound
    inf_mass = out_bound / z_win
    losses = (sens**2 - 2.0 * ks * sens) / (2.0 * sigma**2)
    scale_back = 1.0 / (1.0 + inf_mass)
    return _atoms(losses, probs * scale_back, min(1.0, inf_mass * (1.0 + 1e-9)))
