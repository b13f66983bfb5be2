"""The privacy-loss engine: discretise dominating pairs on a grid, compose by FFT, read bounds.

One implementation shared by the PLD accountant (:mod:`dpkit.accounting.pld`) and the f-DP
tensor product (:func:`dpkit.fdp.tensor`). The pairs come from :mod:`dpkit._loss.pairs`; the
privacy loss of a pair ``(P, Q)`` is ``L = log(dP/dQ)`` with ``L ~ P``, a composition adds the
losses (the composed loss is the convolution of the single ones), and

    delta(eps) = E_P[(1 - e^(eps - L))_+] = P(L = inf) + sum_{l > eps} p_l (1 - e^(eps - l))

(Sommer, Meiser and Mohammadi 2019; Koskela, Jalko and Honkela 2020). The trade-off function
of the composition is the convex conjugate of this profile (Dong, Roth and Su 2022,
Proposition 2.12): ``beta(alpha) = sup_eps 1 - delta(eps) - e^eps alpha``
(:meth:`Composed.tradeoff_knots`).

Error analysis of the upper bound (``delta`` never below the truth, trade-off never above it)
---------------------------------------------------------------------------------------
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
4. *Round-off of the single tails.* The tails of a pair (``ndtr``/``erfc``, ``exp``, atom sums)
   carry an absolute error that near ``1/2`` is a few ``2^-53``, and in the far tails a
   relative error below ``2^-45`` (so an absolute one below that, as tails are at most 1);
   when ``P - Q`` is itself of that order (tiny losses: ``sigma = 1e12``, a discrete Laplace of
   scale ``1e300``) it is swallowed. Each single grid profile is therefore trusted only up to
   ``c = PROFILE_ABS_ERR = 2^-44`` in absolute value at every grid point (``|err sf_p| + e^eps
   |err sf_q| <= 2^-45 (sf_p + e^eps sf_q) <= 2^-44`` since ``e^eps sf_q <= sf_p`` where delta
   is positive), hence everywhere (the grid curve is the chord through its grid values).
   The composed profile ``E_S[delta_1(eps - S)]`` (``S`` the loss of the other factors, a
   sub-probability) is 1-Lipschitz in each factor's profile in the sup norm, so replacing the
   factors one at a time moves it by at most ``sum_j k_j c``: this allowance (``tail_err``)
   is added to every upper profile and to the beta allowance of the trade-off knots, and
   subtracted from the lower one. A factor whose true loss is unbounded above (Gaussian noise)
   has ``delta(eps) > 0`` for every finite eps: its composed upper profile is never reported
   as 0 and its epsilon at ``delta = 0`` is infinite.
The final epsilon is obtained exactly between two grid points (the curve is ``alpha - beta
e^eps`` there) and rounded up by ``1e-12 (1 + |eps|)`` for the last floating-point operations.

Lower bound and estimate (the accountant's ``get_epsilon_bounds``): the lower bound composes
grid measures whose privacy curves lie *below* the true ones (supporting lines of the convex
curve at neighbouring grid points, then a lower convex hull; see :func:`_tangent_lower`), so it
is rigorous for the ideal mechanisms and, like the upper bound, accurate to second order in
``h``; FFT wrap-around and round-off allowances are subtracted. The estimate splits each
interval's mass between its end points so that the conditional mean loss ``log(a / b)`` is
kept (exact for atoms); it is not a bound.

Grid (:func:`automatic_step`): unless a step is given, ``h = 2e-4 * sd`` where ``sd`` is the
standard deviation of the composed loss (from a pilot discretisation), but at least
``width / 2e5`` (``width`` = the widest single-PLD support, so no single PLD needs more than
2e5 points: with few compositions the relevant tail is then resolved on its own scale), clamped
to ``[1e-7, 1e-2]`` unless the width term is larger (huge losses such as Laplace with
``eps0 = 1e6`` then get a coarser grid rather than 10^8 points), and shrunk so that the largest
atom of the losses (Laplace, pure DP) lies on the grid when it spans at least one step. The
domain ``[A, B]`` is chosen from the Chernoff bounds so that each wrapped mass is below
``1e-18``. A composed grid above ``2^23`` points is coarsened (step times 4, again a valid upper
bound) when the step is automatic, and refused with a clear error when it was given.

Trade-off curve (:meth:`Composed.tradeoff_knots`): the knots of the conjugate of the composed
grid profile are ``(Q(L >= l_t), 1 - P(L = inf) - P(L >= l_t))`` over the grid losses ``l_t``;
every allowance of the upper bound (wrap-around, round-off deficit, FFT noise) is subtracted
from beta, together with a worst-case bound on the rounding of the two running tail sums
(recursive summation of ``n`` terms errs by at most ``(n - 1) u`` times the sum, Higham 2002,
Section 4.2). The curve is therefore below the exact trade-off function whenever the upper
profile is above the exact profile, i.e. it carries the same proof.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

from dpkit._loss.pairs import FloatArray, Pair
from dpkit.errors import PrivacyParameterError

__all__ = [
    "MAX_COUNT",
    "MAX_SINGLE",
    "MAX_STEP",
    "TAIL",
    "Composed",
    "Factor",
    "GridPld",
    "GridTooLargeError",
    "Mode",
    "NoFiniteBoundError",
    "automatic_step",
    "compose",
    "compose_factors",
    "discretise",
    "step_for_mode",
]

Mode = Literal["connect_dots", "round_up", "round_down", "mean", "tangent"]

TAIL = 1e-20  # P-mass left outside a single PLD's grid on each side (moved pessimistically)
_WRAP_LOG = math.log(1e-18)  # target for each Chernoff-bounded wrapped mass
_MAX_POINTS = 1 << 23  # about 70 MB per float array; bounds the memory of one query
_HULL_PASSES = 64  # vectorised hull passes; what is left non-convex is clipped (see excess)
MAX_SINGLE = 2e5  # grid points per single PLD when the grid step is chosen automatically
MAX_STEP = 1e3  # coarsest grid step: beyond it the upper bounds are reported as infinite
MAX_COUNT = 1 << 53  # largest count the grid composes (the FFT power is taken in doubles)
# absolute error allowed for one evaluation of a single pair's grid profile (item 4 of the
# module docstring); the composed allowance is the sum of count * PROFILE_ABS_ERR
PROFILE_ABS_ERR = 2.0**-44


@dataclasses.dataclass(frozen=True)
class Factor:
    """One mechanism: its dominating pair in each direction (equal when symmetric)."""

    remove: Pair
    add: Pair
    # what the component is, for the closed forms: ("gaussian", sigma) for the plain Gaussian
    # mechanism, ("dp", epsilon, delta) for the worst-case pair of (epsilon, delta)-DP
    kind: tuple[Any, ...] = ()


class NoFiniteBoundError(PrivacyParameterError):
    """The losses span more than any grid can hold: upper bounds are infinite."""


class GridTooLargeError(PrivacyParameterError):
    """The grid would need more than ``_MAX_POINTS`` points (coarsened when automatic)."""


@dataclasses.dataclass
class GridPld:
    """A sub-probability on ``h * (start + arange(len(w)))`` plus mass at ``+inf``."""

    start: int
    w: FloatArray
    inf_mass: float
    excess: float = 0.0  # (lower bounds) how far the grid curve may exceed the true one
    unbounded: bool = False  # the true finite losses are unbounded above (no eps gives 0)
    top_loss: float = -math.inf  # the pair's largest finite loss (bounded pairs)


def discretise(pair: Pair, h: float, mode: Mode) -> GridPld:
    """Put ``pair``'s PLD on the grid ``h Z`` (see the module docstring, item 1)."""
    g = _discretise(pair, h, mode)
    g.unbounded = pair.unbounded()
    g.top_loss = pair.bounds(TAIL)[1]
    return g


def _discretise(pair: Pair, h: float, mode: Mode) -> GridPld:
    lo, hi = pair.bounds(TAIL)
    span = (hi - lo) / h
    if not span <= _MAX_POINTS:
        raise GridTooLargeError(
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
        return GridPld(i_lo, w, 0.0)
    w[0] += float(cdf_p[0])  # mass at or below the lowest point, rounded up onto it
    if mode == "round_up":
        w[1:] += a
        return GridPld(i_lo, w, top_sf_p)
    if mode == "mean":
        # estimate: split each interval's mass so that its mean loss is kept, taking the
        # conditional mean as log(a / b) (exact for an atom, second order otherwise)
        with np.errstate(divide="ignore", invalid="ignore"):
            lbar = np.where((a > 0.0) & (b > 0.0), np.log(a) - np.log(b), e[1:])
        frac = np.clip((lbar - e[:-1]) / h, 0.0, 1.0)
        w[1:] += a * frac
        w[:-1] += a * (1.0 - frac)
        w[-1] += top_sf_p
        return GridPld(i_lo, w, 0.0)
    # connect the dots (Doroshenko et al. 2022, Algorithm 1), written per interval
    # x_{i-1} b and x_i b through logs: e^eps overflows for large losses while b underflows
    with np.errstate(divide="ignore"):
        log_b = np.log(b)
        log_top_q = math.log(float(sf_q[-1])) if sf_q[-1] > 0.0 else -math.inf
    xb_prev = np.exp(e[:-1] + log_b)
    # e^h / (e^h - 1) = 1 / (1 - e^-h), and (x_i b - a) / (e^h - 1), without overflow of e^h
    upper = np.maximum((a - xb_prev) / -math.expm1(-h), 0.0)
    if h < 700.0:
        lower = np.maximum((np.exp(e[1:] + log_b) - a) / math.expm1(h), 0.0)
    else:  # e^-h < 1e-304: x_{i-1} b / (1 - e^-h), minus a e^-h (below 1e-304, dropped: more
        # mass on the lower point, covered many times over by the tail allowance)
        lower = np.maximum(np.exp(e[:-1] + log_b) / -math.expm1(-h), 0.0)
    w[1:] += upper
    w[:-1] += lower
    kept = min(top_sf_p, math.exp(min(float(e[-1]) + log_top_q, 700.0)))
    w[-1] += kept
    return GridPld(i_lo, w, max(0.0, top_sf_p - kept))


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
) -> GridPld | None:
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
    return GridPld(start, w, 0.0, excess)


def _log_mgfs(g: GridPld, h: float, ts: FloatArray) -> FloatArray:
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
class Composed:
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
    tail_err: float = 0.0  # sum_j k_j PROFILE_ABS_ERR: round-off of the single tails
    unbounded: bool = False  # some factor's true loss is unbounded: delta(eps) > 0 for all eps

    def _tail_sums(self) -> tuple[FloatArray, FloatArray]:
        """``P_t = sum_{s >= t} p_s`` and ``log Q_t`` with ``Q_t = sum_{s >= t} p_s e^{-l_s}``.

        ``Q_t`` is kept as a logarithm (accumulated with ``logaddexp``) so that losses of any
        size neither overflow nor underflow.
        """
        p = self.pmf
        ptail = np.cumsum(p[::-1])[::-1]
        with np.errstate(divide="ignore"):
            terms = np.log(p) - self.losses  # -inf where p = 0, finite elsewhere
        # logaddexp(-inf, -inf) is an invalid operation (inf - inf inside): the all-empty top
        # of the reversed sums is -inf by definition; from the first positive mass on, the
        # running sum is finite and every later step is well defined
        rev = terms[::-1]
        log_rev = np.full(rev.size, -np.inf)
        first = np.nonzero(np.isfinite(rev))[0]
        if first.size:
            j = int(first[0])
            log_rev[j:] = np.logaddexp.accumulate(rev[j:])
        return ptail, log_rev[::-1]

    def tradeoff_knots(self) -> tuple[FloatArray, FloatArray]:
        """Knots ``(alpha, beta)`` of a trade-off curve *below* the exact composed one.

        For ``f = T(P_f, Q_f)`` with ``P = Q_f`` and ``Q = P_f`` (see :mod:`dpkit._loss.pairs`),
        rejecting when ``L >= l_t`` has ``alpha = Q(L >= l_t)`` and
        ``beta = 1 - P(L = inf) - P(L >= l_t)``; the piecewise-linear curve through these knots
        is ``sup_eps 1 - delta_grid(eps) - e^eps alpha``. Subtracting from beta every allowance
        of the upper profile (:meth:`delta` with ``upper=True``, counting all grid points) plus
        ``(n + 2) u`` for the two running sums (``u`` the unit round-off of the summation type,
        ``n`` the number of grid points) gives the conjugate of a profile above the exact one:
        a curve below the exact trade-off function (the module docstring). Alphas above 1
        (round-off in the low tail) are left for the caller to clip: clipping a knot to
        ``(1, 0)`` keeps a curve below any trade-off function.

        Knots whose beta falls below 0 (the allowances exceed the remaining mass) are not
        clipped to 0 (that would discard the allowance at that alpha): the curve ``g`` through
        the knots is non-increasing and below the exact ``f >= 0``, so its positive part
        ``max(0, g)`` is too; it is returned as the knots with beta >= 0 followed by the zero
        crossing of ``g`` (its alpha rounded down, which only lowers the curve).
        """
        n_pts = self.pmf.size
        # the P tail in extended precision (a 64-bit mantissa on x86; eps of the type otherwise)
        ext = np.longdouble
        ptail_ext = np.cumsum(self.pmf[::-1].astype(ext))[::-1]
        ptail = np.asarray(ptail_ext, dtype=np.float64)
        _, log_qtail = self._tail_sums()
        u_sum = float(np.finfo(ext).eps)
        allowance = (
            self.wrap_high
            + self.deficit
            + self.tail_err
            + self.noise * float(n_pts)
            + (n_pts + 2) * u_sum * max(1.0, float(ptail[0]) if n_pts else 0.0)
            + 4.0 * float(n_pts) * 2.0**-53
        )  # logaddexp accumulation, relative
        with np.errstate(over="ignore"):
            alphas = np.concatenate(([0.0], np.exp(log_qtail[::-1])))
        betas = np.concatenate(([0.0], ptail[::-1]))
        betas = (1.0 - self.inf_mass) - betas - allowance
        return _positive_part(alphas, betas)

    def delta(self, eps: float, *, upper: bool) -> float:
        """delta(eps) of the composed grid PLD, plus (upper) or minus (lower) the allowances."""
        if self.inf_mass == 0.0 and eps >= self.max_loss and not (upper and self.unbounded):
            return 0.0  # bounded losses: proven exactly (the lower bound may always say 0)
        above = self.losses > eps
        p = self.pmf[above]
        with np.errstate(over="ignore"):
            val = float(np.sum(p * -np.expm1(eps - self.losses[above])))
        if upper:
            extra = (
                self.inf_mass
                + self.wrap_high
                + self.deficit
                + self.tail_err
                + self.noise * float(np.count_nonzero(above))
            )
            return min(1.0, val + extra)
        return max(
            0.0,
            val
            + self.inf_mass
            - self.wrap_low
            - self.excess
            - self.tail_err
            - self.noise * float(p.size),
        )

    def epsilon(self, delta: float, *, upper: bool) -> float:
        """Smallest eps with ``delta(eps) <= delta`` for this composed PLD (upper or lower)."""
        n_pts = self.pmf.size
        if delta == 0.0:
            # delta(eps) = 0 exactly iff no infinite mass and eps >= the largest finite loss;
            # never for an unbounded loss (the upper bound is then infinite)
            if self.inf_mass > 0.0 or (upper and self.unbounded):
                return math.inf
            return self.max_loss
        if upper:
            const = self.inf_mass + self.wrap_high + self.deficit + self.tail_err
        else:
            const = self.inf_mass - self.wrap_low - self.excess - self.tail_err
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


def _positive_part(alphas: FloatArray, betas: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Knots of ``max(0, g)`` for the non-increasing piecewise-linear ``g`` through the knots.

    The zero crossing on the segment from ``(a0, b0 >= 0)`` to ``(a1, b1 < 0)`` is
    ``a0 + (a1 - a0) b0 / (b0 - b1)``, rounded down (to ``a0`` when ``a1`` is not finite); a
    smaller crossing only lowers the curve.
    """
    neg = np.nonzero(betas < 0.0)[0]
    if neg.size == 0:
        return alphas, betas
    j = int(neg[0])
    if j == 0:
        return np.array([0.0]), np.array([0.0])
    a0, b0 = float(alphas[j - 1]), float(betas[j - 1])
    a1, b1 = float(alphas[j]), float(betas[j])
    if math.isfinite(a1) and a1 > a0:
        cross = a0 + (a1 - a0) * (b0 / (b0 - b1)) * (1.0 - 2.0**-50)
        cross = max(a0, math.nextafter(cross, -math.inf))
    else:
        cross = a0
    return (np.concatenate((alphas[:j], [cross])), np.concatenate((betas[:j], [0.0])))


def compose(comps: Sequence[tuple[GridPld, int]], inf_factor_log: float, h: float) -> Composed:
    """Circular FFT composition of grid PLDs (each raised to its count) on a safe domain."""
    # composed inf mass: 1 - prod (1 - m_j)^k_j, with the non-private factor folded in
    log_fin = inf_factor_log
    for g, k in comps:
        log_fin += k * math.log1p(-min(g.inf_mass, 1.0)) if g.inf_mass < 1.0 else -math.inf
    inf_mass = -math.expm1(log_fin) if log_fin > -math.inf else 1.0
    inf_mass = min(1.0, inf_mass * (1.0 + 1e-12))
    live = [(g, k) for g, k in comps if k > 0]
    if not live or inf_mass >= 1.0:
        return Composed(np.zeros(1), np.zeros(1), inf_mass, 0.0, 0.0, 0.0, 0.0)
    # (inf_mass = 1 or no live factor: the profile is exactly inf_mass, nothing to allow for)
    # Chernoff bounds choose the domain [A, B]
    ts = np.array(
        [
            0.125,
            0.25,
            0.5,
            1.0,
            2.0,
            3.0,
            4.0,
            6.0,
            8.0,
            12.0,
            16.0,
            24.0,
            32.0,
            64.0,
            128.0,
            256.0,
            512.0,
            1024.0,
            4096.0,
        ]
    )
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
    from scipy import fft as sp_fft  # deferred: scipy.fft costs ~0.3 s to import

    n = sp_fft.next_fast_len(i1 - i0 + 1, real=True)
    if n > _MAX_POINTS:
        raise GridTooLargeError(
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
        # the true largest loss too: round-off may empty the grid point above a tiny atom
        top = max(h * (g.start + int(pos[-1])) if pos.size else 0.0, g.top_loss)
        max_loss += k * top
    excess = sum(k * g.excess for g, k in live)
    # the composed grid PLD has total mass 1 (connect-the-dots and round-up keep every bit of
    # P-mass); what the FFT lost to round-off could sit anywhere, so the upper bounds add it
    deficit = max(0.0, 1.0 - inf_mass - float(np.sum(c)))
    tail_err = float(sum(k for _, k in live)) * PROFILE_ABS_ERR * (1.0 + 2.0**-50)
    unbounded = any(g.unbounded for g, _ in live)
    return Composed(
        losses,
        c,
        inf_mass,
        wrap_high,
        wrap_low,
        noise,
        max_loss,
        excess,
        deficit,
        tail_err,
        unbounded,
    )


# -------------------------------------------------------------------- grid step and composition
def automatic_step(factors: Mapping[Factor, int]) -> tuple[float, float, float]:
    """``(h, single_sd, width)``: the automatic grid step of the module docstring ("Grid").

    ``h = 2e-4 sd`` with ``sd`` the standard deviation of the composed loss (from a pilot
    discretisation of each pair at 4000 points), at least ``width / MAX_SINGLE`` (``width`` the
    widest single loss range), clamped to ``[1e-7, 1e-2]`` unless the width term is larger,
    then shrunk so that the largest atom of the losses sits on a grid point. ``single_sd`` is
    the smallest single standard deviation (used to refine the lower bound's grid).
    """
    var = 0.0
    width = 0.0
    single_sd = math.inf
    for comp, k in factors.items():
        if k > MAX_COUNT:
            raise NoFiniteBoundError(f"count {k} is beyond the PLD grid")
        for side, pair in enumerate((comp.remove, comp.add)):
            lo, hi = pair.bounds(TAIL)
            if not hi - lo <= MAX_SINGLE * MAX_STEP:
                raise NoFiniteBoundError("the privacy losses span beyond the PLD grid")
            width = max(width, hi - lo)
            h0 = max((hi - lo) / 4000.0, 1e-9)
            g = discretise(pair, h0, "connect_dots")
            tot = float(g.w.sum())
            if tot <= 0.0:
                continue
            ls = h0 * (g.start + np.arange(g.w.size))
            mean = float(np.dot(g.w, ls)) / tot
            v = float(np.dot(g.w, (ls - mean) ** 2)) / tot
            # the composed variance counts each factor once (its "remove" side); an identity
            # test (`pair is comp.remove`) counted symmetric factors twice
            var = max(var, 0.0) + (k * v if side == 0 else 0.0)
            if v > 0.0:
                single_sd = min(single_sd, math.sqrt(v))
    sd = math.sqrt(var) if var > 0.0 else 1.0
    # the width term wins over the 1e-2 cap: no single PLD needs more than MAX_SINGLE points
    h = max(min(max(2e-4 * sd, 1e-7), 1e-2), width / MAX_SINGLE)
    # put the largest atom exactly on the grid (Laplace, pure DP, randomized response), so
    # that e.g. delta(eps0) = 0 is reproduced for a Laplace mechanism; an atom below one
    # grid step is left where it is (the pessimistic discretisation holds for any grid)
    atoms = [v for c in factors for v in (c.remove.atom(), c.add.atom()) if v]
    if atoms and max(atoms) >= h:
        v = max(atoms)
        n = math.ceil(v / h)
        h = v / n
        while h * n < v:  # the atom must not sit above its grid point
            h = math.nextafter(h, math.inf)
    return h, single_sd, width


def step_for_mode(base: float, single_sd: float, width: float, mode: Mode) -> float:
    """The grid step for ``mode``: ``base``, refined for the lower bound ("tangent").

    The lower bound's error grows when a single PLD spans few grid cells: refine up to 16
    times (and to at most ``4 MAX_SINGLE`` points per single PLD) so that the smallest single
    standard deviation spans 50 cells.
    """
    if mode != "tangent":
        return base
    want = max(single_sd / 50.0, base / 16.0, width / (4.0 * MAX_SINGLE))
    return base / max(1, math.ceil(base / want))


def compose_factors(
    factors: Mapping[Factor, int],
    mode: Mode,
    h: float,
    *,
    nonprivate: int = 0,
    both: bool = True,
    fixed: bool = False,
) -> tuple[Composed, Composed, float]:
    """Compose each direction of ``factors`` (each raised to its count) on the grid ``h Z``.

    Returns ``(remove, add, h_used)``; with ``both=False`` only the "remove" pairs are composed
    (returned twice). ``nonprivate`` counts factors that reveal everything (mass 1 at
    ``+inf``). When the composed grid would not fit in memory the step is multiplied by 4 (any
    grid gives a valid pessimistic bound) unless ``fixed``, in which case
    :class:`GridTooLargeError` is raised; beyond ``MAX_STEP`` :class:`NoFiniteBoundError`.
    """
    if not h <= MAX_STEP:
        # a (given) step this coarse: the connect-the-dots weights e^h / (e^h - 1) and the
        # Chernoff exponents overflow; report the trivial bounds, as for a coarsened grid
        raise NoFiniteBoundError(f"the grid step {h!r} is beyond the PLD grid ({MAX_STEP})")
    for _ in range(40):
        try:
            return (*_compose_at(factors, mode, h, nonprivate, both), h)
        except GridTooLargeError:
            if fixed:
                raise
            h *= 4.0
            if h > MAX_STEP:
                raise NoFiniteBoundError("the composed losses span beyond the PLD grid") from None
    raise PrivacyParameterError(  # pragma: no cover - 4^40 coarser always fits
        "the PLD grid does not fit in memory at any step size"
    )


def _compose_at(
    factors: Mapping[Factor, int], mode: Mode, h: float, nonprivate: int, both: bool
) -> tuple[Composed, Composed]:
    inf_log = -math.inf if nonprivate > 0 else 0.0
    out: list[Composed] = []
    symmetric = not both or all(c.remove == c.add for c in factors)
    for direction in ("remove", "add"):
        if direction == "add" and symmetric:
            out.append(out[0])  # same loss distribution in both directions
            continue
        comps = []
        for comp, k in factors.items():
            pair = comp.remove if direction == "remove" else comp.add
            comps.append((discretise(pair, h, mode), k))
        out.append(compose(comps, inf_log, h))
    return out[0], out[1]
