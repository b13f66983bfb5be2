"""From statistics to integer measures, sensitivities, noise and the events charged.

Everything here is a function of public parameters only (bounds, contribution bounds, epsilon,
delta, weights): pricing never touches data, so :meth:`Query.summarize` can show it for free.

Sensitivities (add/remove one privacy unit). After contribution bounding a unit touches at
most ``P = max_partitions`` groups and at most ``R = max_rows_per_partition`` rows in each. A
measure whose per-row integer contribution has magnitude at most ``s`` therefore moves each
touched group's value by at most ``R s`` and leaves every other group unchanged, so over the whole
vector of groups (parallel composition made exact)::

    L1 = P * R * s                      (discrete Laplace, pure sessions)
    L2^2 = P * (R * s)^2                (discrete Gaussian, zCDP sessions)

with ``s = 1`` for row counts and histogram bins (a row lands in one bin, so a group's bins move
by at most ``R`` in L1 and in L2), ``R s = 1`` for the count of distinct units, ``s =
max(|L|, |U|)`` for a fixed-point sum with integer bounds ``L = floor(lower 2^k)``, ``U =
floor(upper 2^k)``, and ``s = max(c - L, U - c)`` for a sum centred at ``c = floor((L + U) / 2)``
(the centring ``T = S - c N`` is computed in dpkit from the engine's exact ``S`` and ``N``
before any noise, so it costs nothing). A variance's sum of squares is centred the same way:
each row adds ``floor((x - m)^2 2^k2)`` in ``[0, Qh]`` (``m`` the middle of the bounds, ``Qh =
floor(h^2 2^k2)``, ``h`` the half-range), so ``Q' = Q - kq N`` with ``kq = floor(kappa Qh)``
(``kappa`` = :data:`SQ_CENTRE`, at most 1/2) has ``s = Qh - kq``; ``Q = Q' + kq N`` is rebuilt
after noise (post-processing).

Fixed point. A value measure is summed as integers ``floor(x 2^k)``. ``k`` is chosen from the
public parameters so that the lattice step ``2^-k`` is about ``2^-44`` of the noise scale (the
floor's bias, at most ``2^-k`` per row, stays below ``2^-14`` noise scales up to ``2^30`` rows),
while one row's integer stays below ``2^61`` and the noise scale below ``2^52`` steps.

Noise. Pure sessions: discrete Laplace of scale ``t = L1 / eps_m`` (``eps_m`` the measure's
share), rounded up; while ``t < 2^13`` the fast sampler is used, whose pmf is within
``exp(+-a)`` of exact for each released value (``a`` = ``DISCRETE_LAPLACE_SLACK``); only the
values that can differ between neighbours (at most ``P`` groups, ``P min(R, bins)`` histogram
cells) carry it, so the event charges ``pmf_slack = a * c`` and ``t`` is calibrated to
``L1 / (eps_m - 2 a c)``. zCDP sessions: discrete Gaussian with ``sigma^2 = L2^2 / (2 rho_m)``
rounded up, always from the exact sampler of Canonne, Kamath and Steinke (2020), and charged as
``rho = L2^2 / (2 sigma^2)`` (their Theorem 4 per coordinate; zCDP adds up over coordinates,
Bun and Steinke 2016, Lemma 2.3).

Accounting. ``pure`` sessions charge each measure's discrete Laplace event; ``zcdp`` sessions
(a budget kept in rho) charge each measure's rho; ``approx`` sessions (a basic ``(epsilon,
delta)`` budget) choose per statistic the noise with the smaller variance at its share (see
:func:`_laplace_stats`): discrete Laplace statistics are priced and charged as in pure
sessions; the Gaussian ones pool their ``(epsilon, delta)`` shares, calibrate in the rho that
certifies the pool, and are charged as that one pair (basic composition across queries). If no
statistic is Gaussian, partition selection gets all of ``delta``.

Budget split. A query with ``(epsilon, delta)``: partition selection (no public keys) by a
separate measurement takes ``epsilon w_sel / W`` and half of ``delta``; selection by a count's
own noise (below) gives ``w_sel`` to that count's weight and takes only the threshold's delta.
The statistics share the rest in proportion to their
weights (``W`` the total weight), and a statistic's share is split over its integer measures: a
mean's between its count and centred sum to minimise the weighted relative variances of the mean and
of the sum and count released from them (:func:`pool_split`), a variance's between its count,
centred sum and sum of squares by the same rule. A
``count(column)`` and a ``sum`` of a mean's column (same bounds) are released from the mean's own
noisy measures when that makes no statistic worse (:func:`_pools`). In zCDP sessions the query's
``(epsilon, delta)`` is first converted into the budget's own currency by the budget's own rule
(:meth:`~dpkit.accounting.Budget.zcdp_share`: the share of the budget's delta kept for approximate
events, the share of its floating-point slack allowance, and the largest ``rho`` that certifies the
rest), and ``rho`` is split. A query at the session budget's ``(epsilon, delta)`` is thus priced at
exactly the budget's ``rho_max``. Shares are rounded down, scales and charged costs up.

Pilot of a mean (pure sessions, fixed bounds; :class:`Pilot`). A mean's noise is ``(Z_T - r
Z_N) / n`` at leading order, ``r`` its group's mean less the centre of ``T = S - c N``; the
middle of the bounds assumes the mean anywhere within them, and pays a large ``r`` on the
count's noise when the data sit far from the middle (the utility benchmark's incomes: mean
63,000 in ``[0, 500,000]``). So the mean's share ``e`` is split, before any row is read, into
``e_1 = down(e / 100)`` (:data:`PILOT_SHARE`) and ``e_2 = down(e - e_1)``. The pilot releases
(to dpkit only) ``N_1`` and ``T_1 = S - c_0 N`` at the middle ``c_0``, split as the reference
pair; per group :func:`pilot_choice` reads them and gives a centre ``c_g`` on a public grid
and the count's fraction ``f_g`` in twentieths; the main ``N`` and ``T = S - c_g N`` are drawn
at ``(f_g, 1 - f_g)`` of ``e_2`` (each part rounded down) with ``T``'s sensitivity ``P R
s_g``, ``s_g = max(c_g - lo, hi - c_g)``. Privacy: one unit changes at most ``P`` groups, each
one's ``N`` by at most ``R`` and ``T`` by at most ``R s_g``, and group ``g``'s noise scales are
``P R / (f_g e_2 - 2 a P)`` and ``P R s_g / ((1 - f_g) e_2 - 2 a P)`` (or larger, ``a`` the
fast sampler's slack), so the main pair's loss is at most ``sum_g (down(f_g e_2) + down((1 -
f_g) e_2)) / P <= e_2`` on every outcome of the pilot; pure DP composes pointwise when a
mechanism is chosen from earlier outputs (the loss at any output is the pilot's plus the main
pair's given the pilot's output: basic composition of adaptively chosen mechanisms, Dwork and
Roth 2014, Section 3.5), so the mean
costs at most ``e_1 + e_2 <= e``, charged as the pilot's two events and ``PureDpEvent(e_2)``.
The pricing checks that the main pair's extremes (``f = 1/100`` for the count, ``1/100`` and
``s = hi - lo`` for the sum) price without error: noise scales only grow towards them, so no
group's choice can raise after the charge (and if they do not price, the mean has no pilot).
The pilot's values are not combined into the estimates: at ``1/100`` of the share they would
add about ``(e_1 / e_2)^2``, ``1e-4``, of the information, and weights read from the pilot's
noise would bias the estimate and the intervals, which hold conditionally on the pilot's
outputs (fresh noise of known law) and hence overall. Simulated (sum and mean of weight 1,
bounds ``[0, 500,000]``, 3 rows per unit, epsilon 1, data mean 63,000): groups of 5 to 1,000
rows pay the pilot, about 1% more error; from 10,000 rows the mean's error is 0.72-0.77 times
the middle's and the sum's 0.91-0.98 (an oracle knowing the mean does no better: the pool's
objective weighs the mean, in units of ``h``, above the sum, in units of ``M = 2h``); with the
data mean at 150,000-250,000 the sum's error rises by up to 10% and the mean's falls by 10-15%,
and near the upper bound (400,000) both stay within about 5% of the middle's (the noise of a
4,000-run simulation). On the utility benchmark the
overall mean went from 1.66 to 1.15-1.19 and the sum from 1.88M to 1.58M-1.72M (300 runs each;
over 1,000 runs each, 1.60 to 1.07 and 1.85M to 1.54M).
zCDP sessions keep the middle: with the
discrete Gaussian's square-root split the recentred pair is no better there (simulated: 1-2%
worse at every group size, the pilot's cost).

Complementary pair (pure sessions; a mean pooled with a sum of its column and no count,
:class:`Complement`). Instead of ``N`` and ``T`` split, ``A = hi N - S`` and ``B = S - lo N``
each carry discrete Laplace noise of one scale ``P R (hi - lo) / e`` at the whole share (their
L1 sensitivity together is ``P R (hi - lo)``: the K-norm mechanism of the pair's sensitivity
parallelogram). It is used when :func:`complement_dominates` (public parameters: bounds and
weights) and then has no pilot; a planned pair uses it at its estimated bounds under the same
rule (:func:`resolve_auto`). On the utility benchmark (incomes in ``[0, 500,000]``, one group
of 10^6 rows) the overall sum's median error fell from 1.58M to 0.94M and the mean's from
1.17 to 0.87 (500 runs); per city the sum's from 1.5-1.8M to 0.96-1.03M (120 runs).
A pure variance (std) with given bounds, or a planned one at its estimated bounds (the rule
does not depend on them), and no sum or count pooled is released from the same pair at ``f_P``
of its share and its squares centred at half their range at the rest
(:func:`variance_pair_dominates`, :func:`_price_variance_pair`): two pure measurements, each
calibrated to its own L1 sensitivity. On the utility benchmark (40 runs) the variance's
median error per city bucket went from 1,726M / 1,093M / 187.9M / 14.53M to 1,842M / 908M /
138.7M / 10.42M (under 100 people / 100-999 / 1,000-9,999 / 10,000 and more); planned, from
1,484M / 913M / 135.8M / 17.36M to 1,566M / 732M / 100.8M / 13.41M. The planner still trades a
planned variance's upper bound with the three measures' noise
(:func:`~dpkit.analytics._planner.variance_upper`): read with the pair's (its error is theirs
at ``f_N = f_T = f_P / sqrt(2)`` and ``kappa = 1/2``) it chose higher bounds and the planned
variance's error rose instead (1,764M / 976M / 137.5M / 17.85M).

Partition selection in zCDP sessions. Gaussian thresholding
(:class:`~dpkit.mechanisms.partition_selection.GaussianPartitionSelection`) is
``delta_thr``-approximately ``rho_sel``-zCDP: its noisy counts of the keys both neighbours have
are ``rho_sel = k / (2 sigma^2)``-zCDP, and the only other difference is the event, of
probability at most ``delta_thr = k P[Z >= tau]``, that a key only the added unit has is
released (Bun and Steinke 2016, Definition 8.1, approximate zCDP). It is charged as
``ApproxZCdpEvent(rho_sel, delta_thr)``, so a zCDP budget composes it with the Gaussian
statistics in rho. The query's ``(epsilon, delta)`` is priced as a whole: ``delta_thr`` is at
most the query's share of the delta kept for approximate events (half of ``delta`` with the
default budget) and ``rho`` (certifying ``epsilon`` at the rest of ``delta``) is split by weight
between the selection (``w_sel / W_all``) and the statistics, so that the query alone is
``(epsilon, delta)``-DP. The mechanism draws its noise with the fast vectorised discrete
Gaussian sampler, whose pmf is within ``exp(+-a)`` of exact per key (``a = 2^-23`` while
``sigma < 2^13``); the charge carries the mechanism's declared ``pmf_slack = k a``
(``delta_thr`` already includes ``e^a``), which the budget caps with its
``pmf_slack_allowance``. So that the query alone stays within ``(epsilon, delta)`` with a
slack ``A`` at least ``k a`` (the larger of ``k a`` and the query's share of the allowance),
rho is calibrated at ``(epsilon - 2 A, (delta - delta_thr) e^-A)``:
``e^A delta_rho(epsilon - 2A) + delta_thr <= delta``.

Partition selection by the count (no separate selection share). When the query has a count
(:func:`_threshold_count`: the first ``count()``, ``count(column)`` or ``count_distinct()``
with a measure of its own at the query's ``(P, R)``), a group is released iff that count's
noisy value ``C + Z`` exceeds an integer ``tau``; its other statistics are released for the
groups kept (Korolova, Kenthapadi, Mishra and Ntoulas 2009; Wilson et al., "Differentially
private SQL with bounded user contribution", PoPETs 2020, Sec. 4; OpenDP's
``make_laplace_threshold`` and ``make_gaussian_threshold`` do the same). The count's noise is
priced, drawn and charged as for public keys, over every group of the data, at its weight plus
``w_sel``. A group only the added unit holds has ``0 <= C <= c`` (``c = R`` for rows, 1 for
units) and is shown with probability at most ``P[Z >= tau - c + 1]``; at most ``P`` such
groups, so ``delta_thr = P P[Z >= tau - c + 1] e^s`` (``s`` the fast sampler's pmf slack),
the tail exact in mpmath and rounded up, ``tau`` the smallest integer with ``delta_thr`` at
most the threshold's share of delta
(:class:`~dpkit.mechanisms.partition_selection.CountThreshold`). Approx sessions: the share
is half of ``delta`` when some statistic is Gaussian, all of it otherwise; the query is
charged its statistics' events plus ``ApproxDpEvent(0, delta_thr)`` (the proof of Gaussian
thresholding in :mod:`dpkit.mechanisms.partition_selection`, with the statistics on the shared
groups in place of the noisy counts). zCDP sessions: the share is the budget's share of delta
for approximate events (:meth:`~dpkit.accounting.Budget.zcdp_share`), the whole ``rho`` goes
to the statistics, and the threshold is charged as ``ApproxZCdpEvent(rho=0, delta_thr)``:
the statistics' rho holds on the complement of the event (probability at most
``delta_thr``) that a group of the added unit is shown, so the query is
``delta_thr``-approximately ``rho``-zCDP (Bun and Steinke 2016, Def. 8.1) and the budget adds
``delta_thr`` to the Gaussian conversion's delta. The count's interval is the interval of its
noise, unchanged: it covers the true count with probability at least ``1 - alpha`` over the
noise, unconditionally; conditioned on a group being shown (noisy count above ``tau``), small
groups are shown mostly when their noise is positive, so their intervals lean high.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

from dpkit._numeric.rounding import down, sqrt_up, up
from dpkit._numeric.validation import check_delta, check_epsilon
from dpkit.accounting.budget import zcdp_share_default
from dpkit.analytics._aggregates import Statistic
from dpkit.analytics._plan import Measure
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    ApproxDpEvent,
    ApproxZCdpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    DpEvent,
    PureDpEvent,
)
from dpkit.mechanisms import (
    DISCRETE_GAUSSIAN_SLACK,
    DISCRETE_LAPLACE_SLACK,
    DiscreteGaussian,
    DiscreteLaplace,
)
from dpkit.noise import RandomSource
from dpkit.noise.samplers import discrete_gaussian_exact, discrete_laplace, discrete_laplace_exact

__all__ = ["Complement", "MeasurePrice", "Mode", "Noise", "Pricing", "StatPrice", "price"]

Mode = Literal["pure", "zcdp", "approx"]
#: ``(epsilon, delta, slack=...) -> (rho, approx_delta, pmf_slack)``: see
#: :meth:`dpkit.accounting.Budget.zcdp_share`.
ZcdpShare = Callable[..., tuple[float, float, float]]

_FAST_LIMIT = 2.0**13
_MAX_NOISE_SCALE = 2.0**52
_MAX_ROW_BITS = 61
_TARGET_BITS = 44


@dataclass(frozen=True)
class Noise:
    """Integer noise of one measure: discrete Laplace (scale ``t``) or Gaussian (``sigma``)."""

    kind: Literal["discrete_laplace", "discrete_gaussian"]
    scale: float

    @property
    def fast(self) -> bool:
        return self.kind == "discrete_laplace" and self.scale < _FAST_LIMIT

    @property
    def std(self) -> float:
        """Standard deviation in integer steps (``sqrt(2) t`` approximately, or ``sigma``):
        ``sqrt(2 q) / (1 - q)``, ``q = e^(-1/t)``, with ``1 - q = -expm1(-1/t)`` to full
        relative precision (``1.0 - q`` kept a few bits of it near ``t = 2^50``, the scale of
        a pilot's sum: its std came out 15-20% off)."""
        if self.kind == "discrete_gaussian":
            return self.scale
        u = 1.0 / self.scale
        return math.sqrt(2.0 * math.exp(-u)) / -math.expm1(-u)

    def sample(self, n: int, source: RandomSource) -> list[int]:
        """``n`` independent noise values as Python integers."""
        if n == 0:
            return []
        if self.fast:
            return [int(z) for z in discrete_laplace(source, scale=self.scale, size=n)]
        frac = Fraction(self.scale)
        if self.kind == "discrete_laplace":
            return [discrete_laplace_exact(source, frac) for _ in range(n)]
        s2 = frac * frac
        return [discrete_gaussian_exact(source, s2) for _ in range(n)]

    def halfwidth(self, alpha: float) -> int:
        """Smallest integer ``h`` with ``P(|Z| > h) <= alpha``, certified (never too narrow):
        the mechanism's own :meth:`~dpkit.mechanisms.DiscreteLaplace.confidence_half_width`
        (:meth:`~dpkit.mechanisms.DiscreteGaussian.confidence_half_width`), the one home of
        these intervals. The noise alone decides it; the sensitivity given is a placeholder."""
        if self.kind == "discrete_laplace":
            return DiscreteLaplace(scale=self.scale, sensitivity=1).confidence_half_width(alpha)
        return DiscreteGaussian(sigma=self.scale, sensitivity=1).confidence_half_width(alpha)


@dataclass(frozen=True)
class MeasurePrice:
    """One engine measure and how it is noised.

    ``step`` is the real value of one integer step (``2^-k``, or 1 for counts); ``l1``/``l2_sq``
    the sensitivities in steps; ``cells`` the number of noisy values per group.
    """

    measure: Measure
    noise: Noise | None
    step: float
    l1: int
    l2_sq: int
    cells: int
    center: int = 0  # centred sums: T = S - center * N (integer steps)
    count_of: str | None = None  # name of the measure holding N for centring
    event: DpEvent | None = None


#: The part of a pure mean's share spent on its pilot (:class:`Pilot`).
PILOT_SHARE = Fraction(1, 100)
#: The pilot is read only while its mean's estimated standard deviation is at most this
#: fraction of the half-range (:func:`pilot_choice`); else the group keeps the middle.
PILOT_REACH = 0.25
#: The centres a pilot may choose: ``lo + floor((hi - lo) j / (2 PILOT_STEPS))``, ``j = 0 ..
#: 2 PILOT_STEPS`` (the planner's grid, :data:`~dpkit.analytics._planner.CENTRE_STEPS`).
PILOT_STEPS = 32
#: Pool weights above this are rescaled by :func:`pilot_choice` (any weight is valid, and only
#: their ratios matter): squared distances reach ``2^124`` steps, so products stay finite.
_PILOT_WEIGHT_LIMIT = 2.0**64


@dataclass(frozen=True)
class Pilot:
    """A mean's pilot and the public facts its main measures are priced from, per group.

    A pure mean with fixed bounds ``[lower, upper]`` (integers ``[lo, hi]`` at its fixed point)
    spends ``e_1 = down(PILOT_SHARE e)`` of its share ``e`` on a pilot: its count ``N_1`` and
    its sum centred at the middle ``c_0``, ``T_1 = S - c_0 N``, split as the reference pair
    (:func:`pool_split`). Per group, :func:`pilot_choice` reads ``(N_1, T_1)`` and gives the
    centre ``c`` and the count's fraction ``f`` of the main share ``e_2 = down(e - e_1)``; the
    main count ``N`` and centred sum ``T = S - c N`` are then drawn at ``(f, 1 - f)`` of ``e_2``
    with ``T``'s sensitivity ``R max(c - lo, hi - c)`` (:meth:`prices`). ``ref_n`` and
    ``ref_t``: the main pair at the middle and the reference split, the group's pair when the
    pilot is too noisy to help (and the noise a report shows)."""

    count: MeasurePrice
    total: MeasurePrice
    ref_n: MeasurePrice
    ref_t: MeasurePrice
    main: float
    weights: tuple[float, float, float]
    p: int
    r: int
    lo: int
    hi: int

    def prices(self, centre: int, f_n: int) -> tuple[MeasurePrice, MeasurePrice]:
        """The main count and centred sum at ``centre`` (steps, within ``[lo, hi]``) with the
        count's fraction ``f_n / 100`` of :attr:`main`; each part rounded down, so the two
        events add up to at most :attr:`main` whatever the centre and the fraction."""
        from dataclasses import replace

        p, r = self.p, self.r
        f = Fraction(f_n, 100)
        sh = _Shares("pure", self.main, 2, p, (f, 1 - f))
        nz_n, ev_n = sh.noise(p * r, p * r * r, p, 0)
        s = max(centre - self.lo, self.hi - centre, 1)
        nz_t, ev_t = sh.noise(p * r * s, p * (r * s) ** 2, p, 1)
        return (
            replace(self.ref_n, noise=nz_n, event=ev_n),
            replace(
                self.ref_t,
                noise=nz_t,
                l1=p * r * s,
                l2_sq=p * (r * s) ** 2,
                center=centre,
                event=ev_t,
            ),
        )


def pilot_choice(pilot: Pilot, n1: int, t1: int) -> tuple[int, int] | None:
    """``(c, f_N)``: a group's centre (steps) and its count's share in hundredths of the main
    share, from the pilot's noisy count ``N_1`` and centred sum ``T_1``; ``None`` (the middle
    and the reference split) when ``N_1 < 1`` or the pilot's mean is too noisy.

    The pilot's mean ``m = c_0 + T_1 / N_1`` (clamped to ``[lo, hi]``) has, at leading order,
    the variance ``v = (V_T + (m - c_0)^2 V_N) / N_1^2`` (``V`` the pilot noises' variances);
    it is used while ``sqrt(v) <= PILOT_REACH h`` (``h = (hi - lo) / 2``). Among the middle and
    the centres ``c`` of the public grid (:data:`PILOT_STEPS`) the one minimising
    :func:`pool_split`'s objective at its best split wins (for a mean alone it lies between the
    middle and ``m``; a sum beside it pulls it towards 0), ``d = (a_T^(1/3) + a_N^(1/3))^3``
    with ``s = max(c - lo, hi - c)``::

        a_T = (w_m + w_s) s^2 / h^2
        a_N = (w_m ((m - c)^2 + v) + w_s c^2) / h^2 + w_c

    (the pool's weights ``(w_m, w_s, w_c)``: the mean's noise ``(Z_T - r Z_N) / n`` with
    ``E[r^2] = (m - c)^2 + v``, the sum's ``Z_T + c Z_N``, the count's ``Z_N``); the middle
    wins ties. The sum is made unit-free by ``n h``, as the mean by ``h``, where the
    reference split uses its largest value ``n M`` (``M = max(|lo|, |hi|)``): the pilot has
    seen where the data are, and the sum is ``n`` times the mean, so their relative errors
    weigh alike. With bounds ``[0, U]`` the reference weighs the sum a quarter of the mean,
    and on the utility benchmark (one group of 10^6 rows, mean 63k in [0, 500k]) its choice
    left the sum at 0.92-1.05 times the best peer's error and the mean at 0.67-0.75 (500 to
    1,000 runs); weighed alike, 0.92 and 0.87 (500 runs; the best balanced pair this estimator
    reaches there is about 0.82 and 0.81 in a simulation over every centre and split).
    ``f_N = a_N^(1/3) / (a_T^(1/3) + a_N^(1/3))`` rounded to
    a twentieth, within ``[1/20, 19/20]`` (returned in hundredths): the objective is flat near
    its best split, and a coarse grid keeps the pairs of one release few, each needing its
    own interval tables (:func:`~dpkit.analytics._intervals.ratio_cells`). A function of the
    pilot's noisy outputs and public parameters only (post-processing)."""
    if n1 < 1:
        return None
    lo, hi = pilot.lo, pilot.hi
    c0 = pilot.total.center
    h = (hi - lo) / 2.0
    assert pilot.count.noise is not None and pilot.total.noise is not None
    v_n, v_t = pilot.count.noise.std**2, pilot.total.noise.std**2
    m = min(max(c0 + t1 / n1, float(lo)), float(hi))
    v = (v_t + (m - c0) ** 2 * v_n) / (float(n1) * n1)
    if not v <= (PILOT_REACH * h) ** 2:
        return None
    w_m, w_s, w_c = pilot.weights
    top = max(w_m, w_s, w_c)
    if top > _PILOT_WEIGHT_LIMIT:  # the objective is homogeneous in the weights: rescaled,
        # no product below overflows (a weight of 1e300 made ``a_N`` infinite and ``f_N``
        # NaN, raising after the charge)
        w_m, w_s, w_c = w_m / top, w_s / top, w_c / top
    x = 1.0 / 3.0
    per_t = (w_m + w_s) / (h * h)

    def parts(c: int) -> tuple[float, float]:
        s = float(max(c - lo, hi - c, 1))
        a_n = (w_m * ((m - c) ** 2 + v) + w_s * float(c) ** 2) / (h * h) + w_c
        return (per_t * s * s) ** x, a_n**x

    span, grid = hi - lo, 2 * PILOT_STEPS
    cands = [c0] + [lo + span * j // grid for j in range(grid + 1)]
    best = min(cands, key=lambda c: (sum(parts(c)) ** 3, abs(c - c0)))
    t, n = parts(best)
    f_n = min(max(5 * round(20.0 * n / (t + n)) if t + n > 0.0 else 50, 5), 95)
    return best, f_n


@dataclass(frozen=True)
class Complement:
    """The complementary pair of a pure mean released with a sum of its column.

    Per group, with integer bounds ``[lo, hi]`` at the sum's fixed point, the exact ``A = hi N
    - S`` (the room below the upper bound) and ``B = S - lo N`` (the sum above the lower
    bound) are released as ``A + Z_A`` and ``B + Z_B``, two independent discrete Laplace
    noises of one scale ``t`` (:attr:`noise`), charged as one vector mechanism
    (:attr:`event`): see :func:`complement_dominates` for the privacy argument and when it
    is used. ``N = (A + B) / (hi - lo)`` and ``S = (hi B + lo A) / (hi - lo)`` exactly, so
    the mean and the sum are post-processing of the pair."""

    noise: Noise
    lo: int
    hi: int
    step: float
    event: DpEvent


@dataclass(frozen=True)
class StatPrice:
    """The price of one statistic: its measures and (quantiles) its selection mechanism."""

    name: str
    stat: Statistic
    measures: tuple[MeasurePrice, ...]
    quantile_mechanism: Any = None
    quantile_epsilon: float = 0.0  # per-group epsilon of each exponential mechanism
    quantile_interval: Any = None  # a BinnedQuantileInterval when intervals were asked
    events: tuple[DpEvent, ...] = ()
    epsilon: float = 0.0  # pure: share of epsilon; zcdp: share expressed as rho
    rho: float = 0.0
    # a sum released from this mean's (or variance's) N and T; a std from this variance
    shared_with: str | None = None
    # the fraction of the share each measure got (pool_split); () for one measure
    split: tuple[float, ...] = ()
    # a mean with fixed bounds in a pure session: its centre chosen per group from a pilot
    pilot: Pilot | None = None
    # a pure mean released with a sum of its column as the complementary pair
    complement: Complement | None = None


@dataclass(frozen=True)
class Pricing:
    """The whole query's price: per-statistic noise, partition selection and the event charged."""

    mode: Mode
    epsilon: float
    delta: float
    max_partitions: int
    max_rows_per_partition: int
    stats: tuple[StatPrice, ...]
    selection: Any = None
    selection_epsilon: float = 0.0
    selection_delta: float = 0.0
    #: the statistic whose noisy count the selection thresholds (:func:`_threshold_count`);
    #: None when selection is a separate measurement (or there is none)
    selection_count: str | None = None
    rho: float = 0.0
    events: tuple[DpEvent, ...] = field(default=())
    auto: tuple[AutoBounds, ...] = ()
    order: tuple[str, ...] = ()
    top_k: Any = None  # a top-k query's selection (dpkit.analytics._topk.TopKPrice)
    #: per-statistic contribution bounds ``(name, p, r)`` where a statistic has its own (each
    #: at most ``(max_partitions, max_rows_per_partition)``, the bounds of the plan); empty
    #: when every statistic has the query's
    stat_bounds: tuple[tuple[str, int, int], ...] = ()

    def bounds_of(self, name: str) -> tuple[int, int]:
        """The contribution bounds ``(p, r)`` statistic ``name`` is bounded (and priced) at."""
        for n, p, r in self.stat_bounds:
            if n == name:
                return p, r
        return self.max_partitions, self.max_rows_per_partition

    @property
    def event(self) -> ComposedEvent:
        """Everything the query releases, as one event charged before the release."""
        return ComposedEvent(events=self.events)

    def charged(self) -> dict[str, float]:
        """What charging :attr:`event` adds to the session's budget, rounded up.

        ``pure`` and ``approx`` sessions: the ``(epsilon, delta)`` the event adds to a pure or
        basic budget's ``spent`` (its events' epsilons and deltas summed, as those budgets
        do). The delta is 0 when nothing Gaussian and no partition selection was used, even
        if the query was allowed some. ``zcdp`` sessions: the query's own ``(epsilon,
        delta)``, which its rho was calibrated to certify, and that ``rho`` (statistics and
        selection) and the threshold ``approx_delta`` of partition selection.
        """
        if self.mode == "zcdp":
            from dpkit.accounting.zcdp import ZCdpAccountant

            z = ZCdpAccountant()
            z.compose(self.event)
            rho = z.rho_exact
            return {
                "epsilon": self.epsilon,
                "delta": self.delta,
                "rho": up(rho) if isinstance(rho, Fraction) else math.inf,
                "approx_delta": up(z.delta_exact),
            }
        if self.mode == "pure":
            from dpkit.accounting.pure import PureDpAccountant

            p = PureDpAccountant()
            p.compose(self.event)
            return {"epsilon": up(p.epsilon_exact), "delta": 0.0}
        from dpkit.accounting.approx import ApproxDpAccountant

        a = ApproxDpAccountant()
        a.compose(self.event)
        e, d = a.totals_exact
        return {"epsilon": up(e), "delta": min(up(d), 1.0)}

    @property
    def measures(self) -> tuple[Measure, ...]:
        """The engine measures, each once (a shared sum reuses its partner's)."""
        return tuple(m.measure for s in self.stats if s.shared_with is None for m in s.measures)


def _frac_bits(noise_real: float, maxabs: float) -> int:
    """``k`` with lattice step ``2^-k`` about ``2^-44`` noise scales; row integers < 2^61."""
    top = _MAX_ROW_BITS - max(math.ceil(math.log2(maxabs)), 0) if maxabs > 0 else 60
    want = _TARGET_BITS - math.floor(math.log2(noise_real)) if noise_real > 0 else top
    return max(0, min(want, top, 1000))


def _int_bounds(lower: float, upper: float, k: int) -> tuple[int, int]:
    return math.floor(Fraction(lower) * 2**k), math.floor(Fraction(upper) * 2**k)


class _Shares:
    """Splits a statistic's budget over its measures: pure epsilon or zCDP rho."""

    def __init__(
        self,
        mode: Mode,
        total: float,
        parts: int,
        max_partitions: int,
        fractions: tuple[Fraction, ...] = (),
    ) -> None:
        # ``fractions`` (summing to at most 1 exactly) or equal parts; each share rounded down,
        # so the parts never add up to more than ``total``
        fr = fractions or tuple(Fraction(1, parts) for _ in range(parts))
        assert len(fr) == parts and sum(fr) <= 1 and all(f > 0 for f in fr)
        self.mode = mode
        self.parts = [down(Fraction(total) * f) for f in fr]
        self.p = max_partitions

    def noise(self, l1: int, l2_sq: int, cells: int, part: int = 0) -> tuple[Noise, DpEvent]:
        each = self.parts[part]
        if not each > 0.0:
            raise PrivacyParameterError("the query's budget share is too small to release")
        if self.mode == "pure":
            eps = Fraction(each)
            slack = Fraction(DISCRETE_LAPLACE_SLACK) * cells
            t = up(Fraction(l1) / eps)
            if t < _FAST_LIMIT:
                if not eps > 4 * slack:
                    raise PrivacyParameterError(
                        f"epsilon share {each!r} is too small for the fast sampler's slack"
                    )
                t = up(Fraction(l1) / (eps - 2 * slack))
            if not t <= _MAX_NOISE_SCALE:
                raise PrivacyParameterError(
                    "These bounds need more noise than can be sampled exactly at this epsilon "
                    f"(a scale of {t:.3g} lattice steps, at most 2^52): raise epsilon or narrow "
                    "the bounds (a variance's squares span ((upper - lower) / 2)^2)."
                )
            nz = Noise("discrete_laplace", t)
            ev: DpEvent = DiscreteLaplaceEvent(
                scale=t, sensitivity=l1, pmf_slack=float(slack) if nz.fast else 0.0
            )
            return nz, ev
        rho = Fraction(each)
        sigma = up(sqrt_up(Fraction(l2_sq) / (2 * rho)))
        if not sigma <= _MAX_NOISE_SCALE:
            raise PrivacyParameterError(
                "These bounds need more noise than can be sampled exactly at this budget "
                f"(sigma {sigma:.3g} lattice steps, at most 2^52): raise the budget or narrow "
                "the bounds (a variance's squares span ((upper - lower) / 2)^2)."
            )
        return Noise("discrete_gaussian", sigma), _rho_event(l2_sq, sigma)


def _rho_event(l2_sq: int, sigma: float) -> DpEvent:
    """The zCDP charge ``L2^2 / (2 sigma^2)`` (rounded up) of a vector discrete Gaussian."""
    rho = up(Fraction(l2_sq) / (2 * Fraction(sigma) ** 2))
    r2 = math.isqrt(l2_sq)
    if r2 * r2 == l2_sq:  # an integer L2 sensitivity: the mechanism's own event
        return DiscreteGaussianEvent(sigma=sigma, sensitivity=r2)
    from dpkit.events import ZCdpEvent  # type: ignore[attr-defined,unused-ignore]

    ev: DpEvent = ZCdpEvent(rho=rho)
    return ev


def _kept_at(sp: StatPrice, keep: tuple[int, int] | None) -> StatPrice:
    """``sp`` with each engine measure reading only the rows kept at its own bounds ``keep``
    (:class:`~dpkit.analytics._plan.Measure`); unchanged for None (the plan's bounds)."""
    if keep is None:
        return sp
    ms = tuple(replace(mp, measure=replace(mp.measure, keep=keep)) for mp in sp.measures)
    return replace(sp, measures=ms)


def _value_measure(
    name: str, column: str, lower: float, upper: float, noise_real: float
) -> tuple[Measure, int, int, int]:
    maxabs = max(abs(lower), abs(upper))
    k = _frac_bits(noise_real, maxabs)
    lo, hi = _int_bounds(lower, upper, k)
    return (
        Measure(name=name, kind="sum", column=column, lower=lower, upper=upper, frac_bits=k),
        k,
        lo,
        hi,
    )


def _price_stat(
    name: str,
    stat: Statistic,
    mode: Mode,
    share: float,
    p: int,
    r: int,
    pool: tuple[float, float, float] | None = None,
) -> StatPrice:
    """Measures, noise and events of one statistic with budget ``share`` (epsilon or rho).

    ``pool``: a mean's (variance's) weights ``(w_m, w_s, w_c)`` with the sum and counts that
    share its measures; its share is split over its measures by :func:`pool_split`. A pure
    mean with fixed bounds gets a :class:`Pilot` when all its parts can be priced, else it
    is priced as before on its whole share (public parameters only: before any charge)."""
    if (
        mode == "pure"
        and stat.kind == "mean"
        and stat.centring is None
        and not stat.auto
        and not stat.estimated
    ):
        if pool is not None and isinstance(stat.bounds, tuple):
            w_m, w_s, w_c = pool
            lower, upper = stat.bounds
            if w_c == 0.0 and complement_dominates(lower, upper, w_m, w_s):
                with contextlib.suppress(PrivacyParameterError):
                    return _price_complement(name, stat, share, p, r)
        with contextlib.suppress(PrivacyParameterError):
            sp = _price_stat_at(name, stat, mode, share, p, r, pool, piloting=True)
            if sp.pilot is not None:
                return sp
    if (
        mode == "pure"
        and stat.kind in ("variance", "std")
        and not stat.auto
        and isinstance(stat.bounds, tuple)
        and variance_pair_dominates(*(pool or (float(stat.weight), 0.0, 0.0)))
    ):
        with contextlib.suppress(PrivacyParameterError):
            return _price_variance_pair(name, stat, share, p, r, pool)
    return _price_stat_at(name, stat, mode, share, p, r, pool, piloting=False)


def _price_stat_at(
    name: str,
    stat: Statistic,
    mode: Mode,
    share: float,
    p: int,
    r: int,
    pool: tuple[float, float, float] | None,
    *,
    piloting: bool,
) -> StatPrice:
    """:func:`_price_stat` with (``piloting``) or without a pilot for a mean."""
    col = stat.column
    sqrt_p = math.sqrt(p)
    prices: list[MeasurePrice] = []

    def scale_real(sens_per_row: float, parts: int, frac: float = 0.0) -> float:
        # Approximate real noise scale, only used to choose the fixed-point bits.
        each = share * frac if frac else share / parts
        if mode == "pure":
            return p * r * sens_per_row / each
        return sqrt_p * r * sens_per_row / math.sqrt(2.0 * each)

    if stat.kind in ("count", "count_distinct"):
        sh = _Shares(mode, share, 1, p)
        kind: Any = "rows" if stat.kind == "count" else "units"
        if col is not None:  # count(column): its non-NULL values
            kind = "values"
        rr = r if stat.kind == "count" else 1
        nz, ev = sh.noise(p * rr, p * rr * rr, p)
        prices.append(
            MeasurePrice(
                Measure(name=f"{name}:n", kind=kind, column=col),
                nz,
                1.0,
                p * rr,
                p * rr * rr,
                1,
                event=ev,
            )
        )
        return StatPrice(name, stat, tuple(prices), events=(ev,), epsilon=share)

    if stat.kind == "histogram":
        sh = _Shares(mode, share, 1, p)
        if stat.edges:
            cells = len(stat.edges) - 1
            m = Measure(
                name=f"{name}:bins",
                kind="bin_counts",
                column=col,
                edges=stat.edges,
                time_kind=stat.time_kind,
            )
        else:
            cells = len(stat.categories)
            m = Measure(
                name=f"{name}:bins", kind="category_counts", column=col, categories=stat.categories
            )
        nz, ev = sh.noise(p * r, p * r * r, p * min(r, cells))
        prices.append(MeasurePrice(m, nz, 1.0, p * r, p * r * r, cells, event=ev))
        return StatPrice(name, stat, tuple(prices), events=(ev,), epsilon=share)

    assert col is not None and isinstance(stat.bounds, tuple)
    lower, upper = stat.bounds

    if stat.kind == "quantile":
        from dpkit.mechanisms.quantile import (  # type: ignore[import-not-found,unused-ignore]
            MAX_JOINT,
            BinnedQuantile,
        )

        m = Measure(
            name=f"{name}:bins",
            kind="bin_counts",
            column=col,
            edges=stat.edges,
            time_kind=stat.time_kind,
        )

        def total_epsilon(part: float, selections: int) -> float:
            if mode == "pure":
                return part
            # Each of the exponential mechanisms at eps' is eps'^2/2-zCDP (Bun and Steinke
            # 2016, Prop. 1.4); S eps'^2 / 2 <= rho with eps' = sqrt(2 rho / S), shrunk by
            # 2**-40 so the mechanism's own rounding cannot push it over (S = K L selections,
            # 2 K L for the intervals' two ends).
            each = math.sqrt(2.0 * part / selections) * (1.0 - 2.0**-40)
            return down(Fraction(each) * selections)

        kl = len(stat.quantiles) * p
        # several quantiles under pure DP: one joint selection per group (BinnedQuantile,
        # joint=True). Not under zCDP, where separate selections compose by the square root
        # (each at eps / sqrt(K)) and the even split is the better one for large groups.
        joint = mode == "pure" and 1 < len(stat.quantiles) <= MAX_JOINT
        point_share, interval = share, None
        if stat.interval_share:
            # the interval's share and the point's, each rounded down: they sum to at most share
            from dpkit.mechanisms.quantile import BinnedQuantileInterval

            i_share = down(Fraction(share) * Fraction(stat.interval_share))
            point_share = down(Fraction(share) - Fraction(i_share))
            interval = BinnedQuantileInterval(
                epsilon=total_epsilon(i_share, 2 * kl),
                quantiles=stat.quantiles,
                edges=stat.edges,
                alpha=0.05,  # replaced by the query's level at release
                max_rows_per_partition=r,
                max_partitions=p,
            )
        mech = BinnedQuantile.from_epsilon(
            epsilon=total_epsilon(point_share, p if joint else kl),
            quantiles=stat.quantiles,
            edges=stat.edges,
            max_rows_per_partition=r,
            max_partitions=p,
            joint=joint,
        )
        q_ev: DpEvent = mech.event
        eps_g = mech.epsilon_each
        prices.append(MeasurePrice(m, None, 1.0, 0, 0, len(stat.edges) - 1))
        return StatPrice(
            name,
            stat,
            tuple(prices),
            quantile_mechanism=mech,
            quantile_epsilon=eps_g,
            quantile_interval=interval,
            events=(q_ev,) if interval is None else (q_ev, interval.event),
            epsilon=share,
        )

    maxabs = max(abs(lower), abs(upper))
    if stat.kind == "sum":
        sh = _Shares(mode, share, 1, p)
        m, k, lo, hi = _value_measure(f"{name}:sum", col, lower, upper, scale_real(maxabs, 1))
        s = max(abs(lo), abs(hi), 1)
        nz, ev = sh.noise(p * r * s, p * (r * s) ** 2, p)
        prices.append(MeasurePrice(m, nz, 2.0**-k, p * r * s, p * (r * s) ** 2, 1, event=ev))
        return StatPrice(name, stat, tuple(prices), events=(ev,), epsilon=share)

    # mean, variance, std: count of values, centred sum, (centred sum of squares)
    parts = 2 if stat.kind == "mean" else 3
    w_m, w_s, w_c = pool or (float(stat.weight), 0.0, 0.0)
    centring = stat.centring if stat.kind == "mean" and pool is None else None
    if centring is None:
        fr = pool_split(mode == "pure", stat.kind, lower, upper, w_m, w_s, w_c)
        reach = (upper - lower) / 2.0
    else:  # a planned mean: its count's fraction and centre chosen by the planner
        fr = centred_split(centring[1])
        reach = max(centring[0] - lower, upper - centring[0])
    piloted = piloting and stat.kind == "mean"
    main, pilot_share = share, 0.0
    if piloted:  # the pilot's part and the main pair's, each rounded down
        pilot_share = down(Fraction(share) * PILOT_SHARE)
        main = down(Fraction(share) - Fraction(pilot_share))
    sh = _Shares(mode, main, parts, p, fr)
    half = (upper - lower) / 2.0
    cnt = Measure(name=f"{name}:n", kind="values", column=col)
    nz_n, ev_n = sh.noise(p * r, p * r * r, p, 0)
    prices.append(MeasurePrice(cnt, nz_n, 1.0, p * r, p * r * r, 1, event=ev_n))
    m, k, lo, hi = _value_measure(
        f"{name}:sum", col, lower, upper, scale_real(reach, parts, float(fr[1]))
    )
    c = (lo + hi) // 2
    if centring is not None:  # T = S - c N centred at the planner's centre (in the bounds)
        c = min(max(math.floor(Fraction(centring[0]) * 2**k), lo), hi)
    s = max(c - lo, hi - c, 1)
    nz_s, ev_s = sh.noise(p * r * s, p * (r * s) ** 2, p, 1)
    prices.append(
        MeasurePrice(
            m,
            nz_s,
            2.0**-k,
            p * r * s,
            p * (r * s) ** 2,
            1,
            center=c,
            count_of=cnt.name,
            event=ev_s,
        )
    )
    events = [ev_n, ev_s]
    pilot = None
    if piloted and hi - lo >= 2:
        pilot = _pilot_of(prices, (w_m, w_s, w_c), pilot_share, main, fr, (p, r, lo, hi))
    if pilot is not None:
        assert pilot.count.event is not None and pilot.total.event is not None
        events = [pilot.count.event, pilot.total.event, PureDpEvent(epsilon=main)]
    if parts == 3:
        kappa = SQ_CENTRE[mode == "pure"]
        noise_q = scale_real(half * half * float(1 - kappa), parts, float(fr[2]))
        mp_q = _squares(name, stat, kappa, noise_q, (sh, 2), (p, r), cnt.name)
        prices.append(mp_q)
        assert mp_q.event is not None
        events.append(mp_q.event)
    return StatPrice(
        name,
        stat,
        tuple(prices),
        events=tuple(events),
        epsilon=share,
        split=tuple(float(f) for f in fr),
        pilot=pilot,
    )


def _squares(
    name: str,
    stat: Statistic,
    kappa: Fraction,
    noise_real: float,
    part: tuple[_Shares, int],
    pr: tuple[int, int],
    count_of: str,
) -> MeasurePrice:
    """A variance's sum of squares about the middle ``m`` of its bounds, noised centred: each
    row's integer square ``floor((x - m)^2 2^k2)`` lies in ``[0, Qh]``, so ``Q' = Q - kq N``
    with ``kq = floor(kappa Qh)``, ``kappa <= 1/2``, moves by at most ``Qh - kq`` per row
    (:func:`pool_split`); ``Q = Q' + kq N`` is rebuilt after noise. ``noise_real``: about the
    real noise scale (it chooses the fixed point ``k2``); ``part``: the shares and the index
    of this measure's; ``pr``: the contribution bounds ``(P, R)``."""
    assert stat.column is not None and isinstance(stat.bounds, tuple)
    lower, upper = stat.bounds
    half = (upper - lower) / 2.0
    sh, i = part
    p, r = pr
    sq_hi = half * half
    k2 = _frac_bits(noise_real, sq_hi)
    _, qhi = _int_bounds(0.0, sq_hi, k2)
    kq = math.floor(qhi * kappa)
    q = max(qhi - kq, 1)
    nz_q, ev_q = sh.noise(p * r * q, p * (r * q) ** 2, p, i)
    mq = Measure(
        name=f"{name}:sq",
        kind="sum_sq",
        column=stat.column,
        lower=0.0,
        upper=sq_hi,
        frac_bits=k2,
        center=lower + half,
        clamp_lower=lower,
        clamp_upper=upper,
    )
    return MeasurePrice(
        mq, nz_q, 2.0**-k2, p * r * q, p * (r * q) ** 2, 1, center=kq, count_of=count_of, event=ev_q
    )


def _pilot_of(
    prices: list[MeasurePrice],
    weights: tuple[float, float, float],
    pilot_share: float,
    main: float,
    fr: tuple[Fraction, ...],
    bounds: tuple[int, int, int, int],
) -> Pilot | None:
    """The :class:`Pilot` of a pure mean whose reference pair is ``prices``, or ``None``
    when its parts are too small to price: the pilot's two measures at ``fr`` of
    ``pilot_share``, and the main pair at its extremes (the count at 1/100 of ``main``, the
    sum at 1/100 with the sensitivity of a centre at an end, ``R (hi - lo)``). Noise scales
    grow as a part shrinks and as the sensitivity grows, so every pair :meth:`Pilot.prices`
    can give is then priced without error. Public parameters only, before any charge."""
    from dataclasses import replace

    p, r, lo, hi = bounds
    ref_n, ref_t = prices
    s0 = max(ref_t.center - lo, hi - ref_t.center, 1)
    wide = r * (hi - lo)
    try:
        shp = _Shares("pure", pilot_share, 2, p, fr[:2])
        nz_n, ev_n = shp.noise(p * r, p * r * r, p, 0)
        nz_t, ev_t = shp.noise(p * r * s0, p * (r * s0) ** 2, p, 1)
        one = Fraction(1, 100)
        _Shares("pure", main, 2, p, (one, 1 - one)).noise(p * r, p * r * r, p, 0)
        _Shares("pure", main, 2, p, (1 - one, one)).noise(p * wide, p * wide * wide, p, 1)
    except PrivacyParameterError:
        return None
    return Pilot(
        count=replace(ref_n, noise=nz_n, event=ev_n),
        total=replace(ref_t, noise=nz_t, event=ev_t),
        ref_n=ref_n,
        ref_t=ref_t,
        main=main,
        weights=weights,
        p=p,
        r=r,
        lo=lo,
        hi=hi,
    )


#: Largest integer bound of a complementary pair (:func:`_price_complement`).
_COMPLEMENT_BOUND_LIMIT = 2**52
#: Data means (a public grid over the bounds) at which :func:`complement_dominates` compares
#: the complementary pair with the best centred pair.
COMPLEMENT_GRID = 64


def complement_dominates(lower: float, upper: float, w_m: float, w_s: float) -> bool:
    """Whether a pure mean released with a sum of its column (weights ``w_m``, ``w_s > 0``, no
    count) is released as the complementary pair (:class:`Complement`) rather than as a
    count and a centred sum: when the pair's leading-order objective is at most the best
    centred pair's at every data mean of a public grid over the bounds.

    The pair. A unit adds ``k <= R`` rows to a group, each of value ``x`` in ``[L, U]``, so
    its contribution to ``(N, S)`` lies in the triangle ``0 <= k <= R``, ``k L <= s <= k U``;
    with removals, the sensitivity hull is the parallelogram with vertices ``+-(R, R L)`` and
    ``+-(R, R U)``. The K-norm mechanism of that parallelogram (Hardt and Talwar, "On the
    geometry of differential privacy", STOC 2010) is, in the coordinates whose unit
    l1-ball maps onto it, independent Laplace noise on ``A = U N - S`` and ``B = S - L N``:
    a unit moves them by ``sum (U - x) >= 0`` and ``sum (x - L) >= 0``, together at most ``R
    (U - L)``. Over ``P`` groups the vector ``(A_g, B_g)_g`` has L1 sensitivity ``P R (U -
    L)`` (in integer steps ``hi - lo``), and discrete Laplace noise of scale ``t = P R (hi -
    lo) / e`` on each of its ``2 P`` changing values is ``e``-DP (Canonne, Kamath and Steinke
    2020; the fast sampler's slack as for any measure). The whole share buys both values:
    the sum ``S = (U B + L A) / (U - L)`` has, for ``L = 0``, the noise of a sum released
    alone at the whole share, and the mean ``L + (U - L) B / (A + B)`` about that of a sum
    centred at the data's mean (no count split off, no pilot).

    The comparison (leading order, per unit of ``2 (P R / e)^2``, in the units of
    :func:`pilot_choice`: the mean by ``h = (U - L) / 2``, the sum by ``n h``). A data mean
    ``m`` gives the pair ``w_m ((U - m)^2 + (m - L)^2) / h^2 + w_s (U^2 + L^2) / h^2`` and the
    centred pair at centre ``c`` and its best split ``(a_T^(1/3) + a_N^(1/3))^3`` with ``a_T
    = (w_m + w_s) max(c - L, U - c)^2 / h^2``, ``a_N = (w_m (m - c)^2 + w_s c^2) / h^2``. The
    pair is used when it is at most the centred minimum over the centres of the same grid at
    each of the grid's ``COMPLEMENT_GRID + 1`` means (the oracle centre, which a pilot can
    only approach): for ``L = 0`` and equal weights it ties at ``m = 0`` and wins elsewhere
    (at ``m = U / 8`` its objective is 0.65 of the centred one); with the data likely near
    the middle of symmetric bounds the centred pair is kept. Public parameters only.
    """
    if not (w_s > 0.0 and w_m >= 0.0 and upper > lower):
        return False
    # the objectives are ratios of squares: read the bounds in units of a power of two near
    # their magnitude (exact), so that tiny bounds (below 1e-154) do not underflow ``h * h``
    e = math.frexp(max(abs(lower), abs(upper)))[1]
    lower, upper = math.ldexp(lower, -e), math.ldexp(upper, -e)
    h = (upper - lower) / 2.0
    if not h * h > 0.0:  # bounds equal to 150 digits: far too close for the pair's lattice
        return False
    grid = [lower + (upper - lower) * j / COMPLEMENT_GRID for j in range(COMPLEMENT_GRID + 1)]
    x = 1.0 / 3.0
    for m in grid:
        pair = (w_m * ((upper - m) ** 2 + (m - lower) ** 2) + w_s * (upper**2 + lower**2)) / (h * h)
        best = math.inf
        for c in grid:
            s = max(c - lower, upper - c)
            a_t = (w_m + w_s) * s * s / (h * h)
            a_n = (w_m * (m - c) ** 2 + w_s * c * c) / (h * h)
            best = min(best, (a_t**x + a_n**x) ** 3)
        if pair > best * (1.0 + 1e-9):
            return False
    return True


def _price_complement(name: str, stat: Statistic, share: float, p: int, r: int) -> StatPrice:
    """A pure mean (pooled with a sum) priced as the complementary pair at its whole share
    (:func:`complement_dominates`): one discrete Laplace scale for ``A`` and ``B`` with L1
    sensitivity ``P R (hi - lo)`` over the ``2 P`` values a unit can change. Raises
    :class:`PrivacyParameterError` when it cannot be priced (the caller then keeps the
    centred pair); public parameters only."""
    col = stat.column
    assert col is not None and isinstance(stat.bounds, tuple)
    lower, upper = stat.bounds
    m, k, lo, hi = _value_measure(f"{name}:sum", col, lower, upper, p * r * (upper - lower) / share)
    # integer bounds within 2^52 (the pair's intervals read them as exact floats): a coarser
    # lattice at a huge epsilon, else the centred pair
    while max(abs(lo), abs(hi)) > _COMPLEMENT_BOUND_LIMIT and k > 0:
        k -= 1
        lo, hi = _int_bounds(lower, upper, k)
    if max(abs(lo), abs(hi)) > _COMPLEMENT_BOUND_LIMIT:
        raise PrivacyParameterError("the bounds are too wide for the complementary pair")
    m = replace(m, frac_bits=k)
    span = hi - lo
    if span < 2:
        raise PrivacyParameterError("the bounds are too close for the complementary pair")
    l1, l2_sq = p * r * span, p * (r * span) ** 2
    nz, ev = _Shares("pure", share, 1, p).noise(l1, l2_sq, 2 * p)
    cnt = Measure(name=f"{name}:n", kind="values", column=col)
    return StatPrice(
        name,
        stat,
        (
            MeasurePrice(cnt, None, 1.0, 0, 0, 1),
            MeasurePrice(m, None, 2.0**-k, 0, 0, 1, center=lo, count_of=cnt.name),
        ),
        events=(ev,),
        epsilon=share,
        complement=Complement(noise=nz, lo=lo, hi=hi, step=2.0**-k, event=ev),
    )


def _price_variance_pair(
    name: str,
    stat: Statistic,
    share: float,
    p: int,
    r: int,
    pool: tuple[float, float, float] | None,
) -> StatPrice:
    """A pure variance (std) priced as the complementary pair (:func:`_price_complement`) at
    ``f_P`` of its share and its sum of squares centred at :data:`PAIR_SQ_CENTRE` (sensitivity
    ``P R (Qh - kq)``, :func:`_squares`) at ``f_Q``, the fractions of :func:`pool_split` with
    ``pair`` (each part rounded down: two pure measurements, epsilons adding up to at most the
    share). Raises :class:`PrivacyParameterError` when either cannot be priced (the caller
    then keeps the three measures); public parameters only."""
    assert isinstance(stat.bounds, tuple)
    lower, upper = stat.bounds
    w_v = pool[0] if pool is not None else float(stat.weight)
    fr = pool_split(True, stat.kind, lower, upper, w_v, pair=True)
    sh = _Shares("pure", share, 2, p, fr)
    sp = _price_complement(name, stat, sh.parts[0], p, r)
    half = (upper - lower) / 2.0
    kappa = PAIR_SQ_CENTRE
    noise_q = p * r * half * half * float(1 - kappa) / sh.parts[1]
    mq = _squares(name, stat, kappa, noise_q, (sh, 1), (p, r), sp.measures[0].measure.name)
    assert mq.event is not None
    return replace(
        sp,
        measures=(*sp.measures, mq),
        events=(*sp.events, mq.event),
        epsilon=share,
        split=tuple(float(f) for f in fr),
    )


def rho_for(epsilon: float, delta: float) -> float:
    """Largest rho (rounded down) such that rho-zCDP implies (epsilon, delta)-DP."""
    try:
        from dpkit.accounting.zcdp import (  # type: ignore[import-not-found,unused-ignore]
            zcdp_rho_for,
        )
    except ImportError:  # pragma: no cover - before the zCDP accountant exists
        # Bun and Steinke 2016, Prop. 1.3: eps = rho + 2 sqrt(rho ln(1/delta)).
        lg = math.log(1.0 / delta)
        r = (math.sqrt(lg + epsilon) - math.sqrt(lg)) ** 2
        return down(Fraction(r) * (1 - Fraction(1, 2**30)))
    out: float = zcdp_rho_for(epsilon, delta)
    return out


def _laplace_stats(
    stats: dict[str, Statistic],
    weights: dict[str, Fraction],
    eps: float,
    delta: float,
    total_w: Fraction,
    p: int,
) -> set[str]:
    """Approx sessions: the statistics noised with discrete Laplace rather than Gaussian noise.

    A statistic with share ``(e, d)`` of ``(eps, delta)`` (by weight) and ``m`` integer
    measures gives each ``(e/m, d/m)``. Every measure here has ``L1 = P D`` and ``L2 = sqrt(P)
    D`` for its per-group bound ``D``, so at equal cost the variances are, to leading order,
    ``2 (L1 / e_m)^2 = 2 P^2 D^2 / e_m^2`` (discrete Laplace at ``(e_m, 0)``) and ``L2^2 /
    (2 rho) = P D^2 / (2 rho)`` (discrete Gaussian at ``rho = rho_for(e_m, d_m)``, Bun and
    Steinke 2016, Prop. 1.3 or its exact inverse). Laplace is chosen iff ``4 P rho <= e_m^2``
    (for ``P = 1`` and ``delta`` near ``1e-6`` it always is: ``rho ~ e^2 / (4 ln(1/d))``).
    Quantiles: the exponential mechanisms' total epsilon is ``e`` when pure and ``sqrt(2 K P
    rho)`` when accounted in zCDP (``K`` levels), so pure iff ``2 K P rho <= e^2``.
    ``bounds="auto"`` statistics stay Gaussian. The choice depends on public parameters only;
    the Gaussian statistics then pool their shares into one rho (at least as good as the
    standalone comparison), so neither choice is worse than assumed.
    """
    out: set[str] = set()
    for name, s in stats.items():
        if s.auto or not weights[name]:
            continue
        e = Fraction(eps) * weights[name] / total_w
        d = Fraction(delta) * weights[name] / total_w
        if s.kind == "quantile":
            need = 2 * len(s.quantiles) * p
            m = 1
        else:
            m = {"mean": 2, "variance": 3, "std": 3}.get(s.kind, 1)
            need = 4 * p
        e_m, d_m = float(e / m), float(d / m)
        if not (e_m > 0.0 and d_m > 0.0):
            out.add(name)
            continue
        if need * rho_for(e_m, d_m) <= e_m * e_m:
            out.add(name)
    return out


#: ``E[r^2] / h^2`` for a mean at a uniformly random place within its bounds (``r`` its
#: distance from the centre, ``h`` the half-range): the reference point of :func:`pool_split`.
MEAN_SPREAD = 1.0 / 3.0
#: The centre of a variance's sum of squares, as a fraction ``kappa`` of its range ``h^2``, by
#: noise (key: discrete Laplace): 1/2 for the discrete Gaussian (never worse than 0 at the best
#: split, :func:`pool_split`), 1/5 for discrete Laplace (see there).
SQ_CENTRE: dict[bool, Fraction] = {True: Fraction(1, 5), False: Fraction(1, 2)}


def var_count_spread(kappa: float) -> float:
    """``E[(kappa h^2 - v + r^2)^2] / h^4`` at the variance's reference point: ``x = r / h``
    uniform on ``[-1, 1]`` and the variance ``v = u h^2`` uniform on ``[0, h^2 - r^2]`` (its
    largest value given the mean, Bhatia and Davis 2000). With ``A = kappa + x^2``, ``B = 1 -
    x^2`` the inner mean is ``A^2 - A B + B^2 / 3 = kappa^2 - kappa + 1/3 + (3 kappa - 5/3)
    x^2 + 7 x^4 / 3``, whose mean over ``x`` is ``kappa^2 + 11/45``."""
    return kappa * kappa + 11.0 / 45.0


#: The centre ``kappa`` of a variance's squares beside the complementary pair
#: (:func:`variance_pair_dominates`): the largest allowed, as the pair carries no count noise
#: of its own.
PAIR_SQ_CENTRE = Fraction(1, 2)
#: Steps of the public grid of data means (and variances) of :func:`variance_pair_dominates`.
VARIANCE_PAIR_GRID = 32


def variance_pair_dominates(w_v: float, w_s: float = 0.0, w_c: float = 0.0) -> bool:
    """Whether a pure variance (std) with given bounds is released from the complementary
    pair (:class:`Complement`) and its centred sum of squares rather than from a count, a
    centred sum and the squares (:func:`pool_split`): when the pair's leading-order objective
    is at most the three measures' at every point of a public grid of data means and
    variances. Only a variance pooled with no sum or count (``w_s = w_c = 0``): such pools
    keep their three measures.

    Derivation (real units, means relative to the middle ``m`` of the bounds ``[L, U]``, ``h
    = (U - L) / 2``, ``x = (mu - m) / h``, ``w = v / h^2``). The pair ``A = U N - S``, ``B = S
    - L N`` at one discrete Laplace scale and ``Q_c = Q - kappa h^2 N`` give ``N = (A + B) /
    (U - L)`` and the centred sum ``T = S - m N = (h B - h A) / (U - L)`` (``U - m = m - L =
    h``), so the variance's noise at first order, ``n`` times ``Z_Q - 2 r Z_T - k Z_N`` (``r =
    x h``, ``k = v + r^2 - kappa h^2``, the differential of ``Q/N - (T/N)^2`` with ``Z_Q = Z_c
    + kappa h^2 Z_N``), is ``Z_c - a Z_A - b Z_B`` with::

        a = (k - 2 r h) / (2 h) = (v + (1 - kappa) h^2 - (h + r)^2) / (2 h)
        b = (k + 2 r h) / (2 h) = (v + (1 - kappa) h^2 - (h - r)^2) / (2 h)

    The pair's L1 sensitivity is ``P R (U - L) = 2 h P R`` and ``Q_c``'s ``(1 - kappa) h^2 P
    R`` (``kappa <= 1/2``), so with shares ``e_P`` and ``e_Q`` the error's variance is, in
    units of ``2 (P R h^2 / n)^2``, ``(a^2 + b^2) (2 h)^2 / (h^4 e_P^2) + (1 - kappa)^2 /
    e_Q^2`` with ``(a^2 + b^2) 4 h^2 / h^4 = 2 (k^2 + 4 r^2 h^2) / h^4 = 2 ((kappa - w +
    x^2)^2 + 4 x^2)``. At :func:`pool_split`'s reference point (``E[k^2] / h^4 = kappa^2 +
    11/45``, ``E[4 r^2] / h^2 = 4/3``) that is ``a_P g(e_P) + a_Q g(e_Q)`` with ``a_P = 2
    (var_count_spread(kappa) + VAR_SUM_SPREAD)`` and ``a_Q = (1 - kappa)^2``, minimised at
    ``e_P : e_Q = a_P^(1/3) : a_Q^(1/3)`` (:func:`pool_split` with ``pair``). The three
    measures' objective there is ``2 (a_N^(1/3) + a_T^(1/3) + a_Q^(1/3))^3 / e^2`` = 36.0 /
    e^2 (``kappa = 1/5``); the pair's 25.7 / e^2 at ``kappa = 1/5`` and 20.4 / e^2 at
    ``kappa = 1/2`` (:data:`PAIR_SQ_CENTRE`: the pair has no count noise of its own whose
    median the centre would raise, and a simulation of the leading-order errors gave median
    errors 0.70-0.85 of the three measures' at ``kappa = 1/2`` against 0.76-0.86 at ``1/5``,
    over data uniform on the bounds, normal with sd a quarter of the half-range at the middle
    or at a quarter of the range, and tight data near a bound; on the utility benchmark, 40
    runs, the variance's median error per city bucket was 1,835M / 1,004M / 160.8M / 11.8M at
    ``1/5``, 1,876M / 963M / 148.8M / 11.0M at ``1/3`` and 1,842-1,897M / 908-911M /
    138.7-144.6M / 9.4-10.4M at ``1/2``, against 1,726M / 1,093M / 187.9M / 14.5M for the
    three measures: groups of a few dozen rows, where the noise dominates, lose 6-10% whatever
    the centre).

    The rule. Both objectives depend on the data through ``(x, w)`` only (the bounds' place
    cancels: neither depends on ``L`` or ``U`` but through ``h``), so for a variance alone
    the comparison is over ``x`` on a grid of ``[-1, 1]`` and ``w`` on a grid of ``[0, 1 -
    x^2]`` (the largest variance given the mean, Bhatia and Davis 2000), each measure at its
    reference split: the three measures' ``(f_N, f_T, f_Q)`` of :func:`pool_split` and the
    pair's ``(f_P, f_Q)``. The pair wins at every point (its objective is ``3.97 k_p^2 + 15.9
    x^2 + 2.97`` against ``15.9 k_c^2 + 22.7 x^2 + 5.91``, ``k_p = k_c + 0.3``), so every
    pure variance alone with given bounds takes it. Public parameters only."""
    if w_s != 0.0 or w_c != 0.0 or not w_v > 0.0:
        return False
    return _variance_pair_wins()


@lru_cache(maxsize=1)
def _variance_pair_wins() -> bool:
    """:func:`variance_pair_dominates` over its grid (the weight of a variance alone scales
    both objectives alike, so the answer is one constant)."""
    f_n, f_t, f_q = (float(f) for f in pool_split(True, "variance", -1.0, 1.0, 1.0))
    f_p, f_qp = (float(f) for f in pool_split(True, "variance", -1.0, 1.0, 1.0, pair=True))
    k_c, k_p = float(SQ_CENTRE[True]), float(PAIR_SQ_CENTRE)
    g = VARIANCE_PAIR_GRID
    for i in range(2 * g + 1):
        x = -1.0 + i / g
        for j in range(g + 1):
            w = (1.0 - x * x) * j / g
            centred = (
                (k_c - w + x * x) ** 2 / f_n**2 + 4.0 * x * x / f_t**2 + (1.0 - k_c) ** 2 / f_q**2
            )
            pair = (
                2.0 * ((k_p - w + x * x) ** 2 + 4.0 * x * x) / f_p**2 + (1.0 - k_p) ** 2 / f_qp**2
            )
            if pair > centred * (1.0 + 1e-9):
                return False
    return True


#: :func:`var_count_spread` without centring (``kappa = 0``).
VAR_COUNT_SPREAD = 11.0 / 45.0
#: ``E[(2 r)^2] / h^2`` at the same point: the weight of the centred sum in a variance's error.
VAR_SUM_SPREAD = 4.0 / 3.0


def _unit_variance(pure: bool, share: float) -> float:
    """Leading-order noise variance of a measure of sensitivity 1 given ``share``: discrete
    Laplace at epsilon ``e``, ``2 / e^2``; discrete Gaussian at ``rho``, ``1 / (2 rho)``.
    Divided twice rather than by ``e^2``, which underflows to 0 for a weight like ``1e-300``
    (the variance is then infinite, a valid comparison, not a ZeroDivisionError)."""
    return 2.0 / share / share if pure else 1.0 / (2.0 * share)


def _pool_weights(
    pure: bool,
    kind: str,
    lower: float,
    upper: float,
    w_stat: float,
    w_sum: float,
    w_count: float,
    pair: bool = False,
) -> tuple[float, ...]:
    """The coefficients ``a_i`` of :func:`pool_split`'s objective, in the order of the
    measures: ``(a_N, a_T)`` for a mean, ``(a_N, a_T, a_Q)`` for a variance or std, ``(a_P,
    a_Q)`` for a variance beside the complementary pair (``pair``, no sum or count pooled)."""
    if pair:
        kappa = float(PAIR_SQ_CENTRE)
        return (
            w_stat * 2.0 * (var_count_spread(kappa) + VAR_SUM_SPREAD),
            w_stat * (1.0 - kappa) ** 2,
        )
    h, c = (upper - lower) / 2.0, (upper + lower) / 2.0
    big = abs(c) + h
    if not big > 0.0:  # bounds a least subnormal apart about 0: h and c round to 0
        raise PrivacyParameterError(
            f"bounds ({lower!r}, {upper!r}) are too close: their half-range rounds to 0"
        )
    sum_t = w_sum * (h / big) ** 2
    sum_n = w_sum * (c / big) ** 2 + w_count
    if kind == "mean":
        return (w_stat * MEAN_SPREAD + sum_n, w_stat + sum_t)
    kappa = float(SQ_CENTRE[pure])
    return (
        w_stat * var_count_spread(kappa) + sum_n,
        w_stat * VAR_SUM_SPREAD + sum_t,
        w_stat * (1.0 - kappa) ** 2,
    )


def pool_split(
    pure: bool,
    kind: str,
    lower: float,
    upper: float,
    w_mean: float,
    w_sum: float = 0.0,
    w_count: float = 0.0,
    *,
    pair: bool = False,
) -> tuple[Fraction, ...]:
    """The fractions of a mean's share given to its count ``N`` and centred sum ``T``, or of
    a variance's (std's) share given to ``N``, ``T`` and its centred sum of squares ``Q``
    (``pair``: to the complementary pair and ``Q``, :func:`variance_pair_dominates`).

    Objective. With ``h = (U - L) / 2``, ``c = (U + L) / 2``, ``M = |c| + h = max(|L|, |U|)``,
    a group of ``n`` people, ``P R`` the per-unit contribution and ``g(e)`` the variance of
    a unit-sensitivity measure at share ``e`` (:func:`_unit_variance`), the errors at leading
    order (Taylor expansion about the exact ``(n, t, q)``; the sensitivities of ``N``, ``T``
    and the centred sum of squares ``Q' = Q - kappa h^2 N`` are ``P R``, ``P R h``, ``P R (1 -
    kappa) h^2`` (``kappa`` = :data:`SQ_CENTRE`), and the released ``Q = Q' + kappa h^2 N``
    carries the noise ``Z_Q' + kappa h^2 Z_N``) are::

        mean      (Z_T - r Z_N) / n                      (P R)^2 (h^2 g_T + r^2 g_N) / n^2
        variance  (Z_Q' - 2 r Z_T + k Z_N) / n           (P R)^2 ((1 - kappa)^2 h^4 g_Q
                  with k = kappa h^2 - v + r^2                + 4 r^2 h^2 g_T + k^2 g_N) / n^2
        sum       Z_T + c Z_N                            (P R)^2 (h^2 g_T + c^2 g_N)
        count     Z_N                                    (P R)^2 g_N

    (``r`` the true mean's distance from ``c``, ``v`` the true variance; the variance's line
    is the differential of ``Q/N - (T/N)^2``, and a std, its square root, has the same
    noise combination divided by ``2 sqrt(v)``, so the same split is best for both). Each is
    made unit-free by its own scale: the mean by ``h``, the variance by ``h^2``, the sum by
    ``n M`` (its largest possible value), the count by ``n``; the split minimises the
    weighted sum of these relative variances, with the data's unknowns replaced by their
    averages over a reference point: a mean anywhere within the bounds, ``E[r^2] = h^2 / 3``
    (:data:`MEAN_SPREAD`), and a variance anywhere below its largest value given that mean,
    ``E[4 r^2] = 4 h^2 / 3``, ``E[k^2] = (kappa^2 + 11/45) h^4`` (:data:`VAR_SUM_SPREAD`,
    :func:`var_count_spread`)::

        J = sum_i a_i g(e_i)        mean:     a_N = w_m / 3 + w_s c^2 / M^2 + w_c,
                                              a_T = w_m + w_s h^2 / M^2
                                    variance: a_N = (kappa^2 + 11/45) w_v + w_s c^2 / M^2 + w_c,
                                              a_T = 4 w_v / 3 + w_s h^2 / M^2,
                                              a_Q = (1 - kappa)^2 w_v

    (up to the common factor ``(P R / n)^2``: the expected group size cancels, so the split
    needs no guess of it). Under ``sum_i e_i = E`` (Lagrange: ``a_i g'(e_i)`` equal for all
    ``i``) the minimum is at ``e_i`` proportional to ``a_i^(1/3)`` for discrete Laplace (``g =
    2 / e^2``) and ``rho_i`` proportional to ``a_i^(1/2)`` for the discrete Gaussian (``g = 1 /
    (2 rho)``). A mean alone gets ``e_T / e_N = 3^(1/3)`` (1.44) or ``3^(1/2)`` (1.73) instead
    of 1; a variance alone ``0.251 : 0.420 : 0.329`` of epsilon (Laplace, ``kappa = 1/5``) or
    ``0.298 : 0.490 : 0.212`` of rho (Gaussian, ``kappa = 1/2``) instead of equal thirds.

    The centre ``kappa``. Without centring (``kappa = 0``: ``Q`` itself noised, sensitivity
    ``P R h^2``) the squares' noise dominates a variance's error wherever the mean is near
    the middle of the bounds. Gaussian noise (zCDP): at the best split the error's standard
    deviation is proportional to ``|kappa - w| + (1 - kappa) + |2 x|`` (``w = (v - r^2) /
    h^2``, ``x = r / h``; Lagrange as above), and ``|1/2 - w| + 1/2 <= |w| + 1`` for every
    ``w``, so ``kappa = 1/2`` is never worse than 0 on any data. Discrete Laplace (pure): a
    sum of two Laplace noises of similar size has a larger median relative to its variance
    than one alone, so a large ``kappa`` can raise the median error where ``w`` is small
    (tight data in wide bounds). ``kappa = 1/5`` was chosen, a public constant, from the
    leading-order errors simulated at three data shapes (values uniform on the bounds;
    normal with sd a quarter of the half-range, centred or at a quarter of the range): median
    absolute error against equal thirds uncentred 0.76, 0.87, 0.91 (``kappa = 0`` at its best
    split: 1.03, 0.92, 0.89; ``kappa = 1/2``: 0.64, 0.94, 0.92).

    Privacy. The fractions are exact rationals summing to exactly 1 (the count's is one minus
    the others) and each part is rounded down, so the measures together are charged at most
    the statistic's share, exactly as with equal parts: the query's total charge does not
    change. They are computed from the bounds, the weights and the kind of noise only (public
    parameters), never from data. Each fraction is kept at 1/100 or more (no measure starved).
    """
    a = _pool_weights(pure, kind, lower, upper, w_mean, w_sum, w_count, pair)
    power = 1.0 / 3.0 if pure else 0.5
    x = [ai**power for ai in a]
    total = math.fsum(x)
    rest = [Fraction(xi / total).limit_denominator(2**40) for xi in x[1:]]
    floor = Fraction(1, 100)
    rest = [max(f, floor) for f in rest]
    over = sum(rest) - (1 - floor)
    if over > 0:  # the count keeps its 1/100: take the excess from the largest part
        j = max(range(len(rest)), key=lambda i: rest[i])
        rest[j] -= over
    return (Fraction(1) - sum(rest, Fraction(0)), *rest)


def centred_split(count_share: float) -> tuple[Fraction, ...]:
    """The fractions ``(f_N, f_T)`` of a planned mean's share given to its count and its sum
    centred at the planner's centre (:func:`dpkit.analytics._planner.mean_centre`, which
    chooses ``f_N = count_share`` by the rule of :func:`pool_split`): exact rationals summing
    to exactly 1, each at least 1/100, so the two measures are charged at most the mean's
    share, as with any split. A public function of the planner's noisy histogram
    (post-processing)."""
    f_n = Fraction(count_share).limit_denominator(2**40)
    f_n = min(max(f_n, Fraction(1, 100)), Fraction(99, 100))
    return (f_n, Fraction(1) - f_n)


def pool_errors(
    pure: bool,
    kind: str,
    lower: float,
    upper: float,
    w_mean: float,
    w_sum: float = 0.0,
    w_count: float = 0.0,
    *,
    pair: bool = False,
) -> tuple[float, float, float]:
    """Leading-order relative variances ``(own, sum, count)`` of a pool at its
    :func:`pool_split`, in units of ``(P R / n)^2`` with the budget shares taken equal to the
    weights (the query's total weight is a common factor). ``own`` is the mean's (by ``h``)
    or the variance's (by ``h^2``) at the reference point of :func:`pool_split`. ``pair``: a
    variance alone from the complementary pair and its squares (:func:`variance_pair_dominates`:
    ``own = (1 - kappa)^2 g_Q + 2 (var_count_spread(kappa) + VAR_SUM_SPREAD) g_P``, the
    pair's sensitivity being ``2 h``); it releases no sum or count (infinite)."""
    fr = pool_split(pure, kind, lower, upper, w_mean, w_sum, w_count, pair=pair)
    w = w_mean + w_sum + w_count
    g = [_unit_variance(pure, w * float(f)) for f in fr]
    g_n, g_t = g[0], g[1]
    if pair:
        kappa = float(PAIR_SQ_CENTRE)
        own = (1.0 - kappa) ** 2 * g[1] + 2.0 * (var_count_spread(kappa) + VAR_SUM_SPREAD) * g[0]
        return own, math.inf, math.inf
    h, c = (upper - lower) / 2.0, (upper + lower) / 2.0
    big = abs(c) + h
    if kind == "mean":
        own = g_t + MEAN_SPREAD * g_n
    else:
        kappa = float(SQ_CENTRE[pure])
        own = (1.0 - kappa) ** 2 * g[2] + VAR_SUM_SPREAD * g_t + var_count_spread(kappa) * g_n
    # ratios first (as in _pool_weights): ``big * big`` underflows for bounds below 1e-154
    return own, (h / big) ** 2 * g_t + (c / big) ** 2 * g_n, g_n


def _pools(
    stats: dict[str, Statistic],
    spreads: dict[str, str],
    *,
    pure: bool,
    planned: dict[str, str] | None = None,
) -> tuple[dict[str, str], dict[str, tuple[float, float, float]]]:
    """Sums and counts released from a mean's (variance's, std's) noisy ``N`` and ``T``.

    A ``count(column)`` of the same column as such a statistic is its noisy count ``N``; a
    ``sum`` with the same column and given bounds is ``S = T + c N`` (``c`` the centre;
    ``T = S - c N`` exactly before noise, so post-processing). Neither has a measure of its
    own: its budget weight joins the partner's, whose share is then split by
    :func:`pool_split`. A count or sum joins only if no statistic of the pool is worse for it
    (by :func:`pool_errors`: the member against its own release at its own weight, the
    partner against the pool without the member), counts first, then sums. Returns the
    members' partners and each partner's weights ``(w_m, w_s, w_c)``. ``planned``: the sums of
    a planned release pooled with an ``"auto"`` mean by the planner (``{sum: mean}``, kept
    where :func:`planned_pools` allows). Public parameters only.
    """
    shared: dict[str, str] = {}
    pools: dict[str, tuple[float, float, float]] = {}
    for pn, ps in stats.items():
        if (
            pn in spreads
            or ps.kind not in ("mean", "variance", "std")
            or ps.auto
            or not isinstance(ps.bounds, tuple)
        ):
            continue
        lo, hi = ps.bounds
        w_m = float(ps.weight) + sum(float(stats[n].weight) for n, p in spreads.items() if p == pn)
        w_s = w_c = 0.0

        def errs(ws: float, wc: float) -> tuple[float, float, float]:
            # a variance alone takes the complementary pair where it wins: a member joins
            # only if the pool is no worse for the variance than that
            alone = ws == wc == 0.0 and ps.kind in ("variance", "std")  # noqa: B023
            pair = pure and alone and variance_pair_dominates(w_m)  # noqa: B023
            return pool_errors(pure, ps.kind, lo, hi, w_m, ws, wc, pair=pair)  # noqa: B023

        for n, s in stats.items():
            if n in shared or n in spreads or s.kind != "count" or s.column != ps.column:
                continue
            before, after = errs(w_s, w_c), errs(w_s, w_c + float(s.weight))
            if after[0] <= before[0] and after[2] <= _unit_variance(pure, float(s.weight)):
                shared[n] = pn
                w_c += float(s.weight)
        for n, s in stats.items():
            if (
                n in shared
                or s.kind != "sum"
                or s.auto
                or s.column != ps.column
                or s.bounds != ps.bounds
            ):
                continue
            before, after = errs(w_s, w_c), errs(w_s + float(s.weight), w_c)
            if (
                after[0] <= before[0]
                and after[2] <= before[2]
                and after[1] <= _unit_variance(pure, float(s.weight))
            ):
                shared[n] = pn
                w_s += float(s.weight)
        pools[pn] = (w_m, w_s, w_c)
    allowed = planned_pools(stats) if planned else {}
    for n, pn in (planned or {}).items():  # a planned sum from its column's mean's measures
        if allowed.get(n) == pn:
            w_m, w_s, w_c = pools.get(pn, (float(stats[pn].weight), 0.0, 0.0))
            shared[n], pools[pn] = pn, (w_m, w_s + float(stats[n].weight), w_c)
    return shared, pools


def _shared_spreads(stats: dict[str, Statistic]) -> dict[str, str]:
    """Standard deviations released as the square root of a variance of the same query.

    A ``std`` with the same column and given bounds as a ``variance`` is ``sqrt`` of that
    variance's release (its estimate and both interval ends: ``sqrt`` is increasing, so the
    interval keeps its level), post-processing of the variance's noisy count, centred sum and
    sum of squares. Its budget weight joins the variance's, so the three measures get the
    budget of both instead of two independent releases splitting it: each measure's noise
    variance falls by ``((w_v + w_s) / w_v)^2`` (Laplace) or ``(w_v + w_s) / w_v`` (Gaussian
    in zCDP), for both statistics at once.

    The same holds when both are ``bounds="auto"`` with the same ``auto_share``: the std is
    the square root of the variance released at the variance's estimated bounds (one bounds
    histogram, priced on the variance's share, which now includes the std's weight, then one
    release at those bounds; :func:`resolve_auto` gives the std the variance's resolved
    measures and bounds). The std's bounds are then a function of the variance's noisy
    histogram, and its values of the variance's noisy measures: post-processing, charged
    once within the pair's shares. Without it the two would each estimate bounds and release
    three measures on half the budget (a planned variance beside a std had 2-3.5 times the
    error of one given good bounds). Public parameters only.
    """
    out: dict[str, str] = {}
    for n, s in stats.items():
        if s.kind != "std" or not (s.auto or isinstance(s.bounds, tuple)):
            continue
        for pn, ps in stats.items():
            if ps.kind != "variance" or ps.column != s.column or ps.auto != s.auto:
                continue
            if ps.bounds == s.bounds and (not s.auto or ps.auto_share == s.auto_share):
                out[n] = pn
                break
    return out


def planned_pools(stats: dict[str, Statistic]) -> dict[str, str]:
    """The ``bounds="auto"`` sums a planned release may release from the noisy count and
    centred sum of an ``"auto"`` mean of the same column and ``auto_share`` (``{sum: mean}``:
    the first such mean, and for each mean the first such sum): ``S = T + c N`` at the mean's
    estimated bounds and centre, its weight joining the mean's (see
    :mod:`dpkit.analytics._planner`, "a planned sum and mean of one column"). Public
    parameters only."""
    out: dict[str, str] = {}
    for n, s in stats.items():
        if s.kind != "sum" or not s.auto or s.column is None:
            continue
        pn = next(
            (
                pn
                for pn, ps in stats.items()
                if ps.kind == "mean"
                and ps.auto
                and ps.column == s.column
                and ps.auto_share == s.auto_share
            ),
            None,
        )
        if pn is not None and pn not in out.values():
            out[n] = pn
    return out


def price(
    stats: dict[str, Statistic],
    *,
    mode: Mode,
    epsilon: Any,
    delta: Any,
    max_partitions: int,
    max_rows_per_partition: int,
    select_partitions: bool,
    selection_weight: float = 1.0,
    zcdp_share: ZcdpShare | None = None,
    stat_bounds: dict[str, tuple[int, int]] | None = None,
    share_histograms: bool = False,
    pool_sums: dict[str, str] | None = None,
    planned_units: float = 0.0,
) -> Pricing:
    """Price a query: validate (epsilon, delta), split the budget, calibrate every measure.

    ``stat_bounds``: statistics with contribution bounds of their own (see
    :func:`_own_bounds`). ``share_histograms`` (a planned release, pure or zCDP): the
    ``"auto"`` statistics of one column read one bounds histogram (:func:`_histogram_owners`);
    ``planned_units`` (its contribution step's noisy number of units) sizes the histogram of
    quantiles (:func:`~dpkit.analytics._planner.quantile_histogram_share`); each sum of
    ``pool_sums`` (``{sum: mean}``, the planner's choice among :func:`planned_pools`) is
    released from its mean's measures.

    zCDP sessions convert the query's ``(epsilon, delta)`` with ``zcdp_share`` (the session
    budget's :meth:`~dpkit.accounting.Budget.zcdp_share`; default: the proportions of a default
    zcdp budget), so that a query is priced in the budget's own currency by the budget's own
    rule: a query at the budget's ``(epsilon, delta)`` gets exactly its ``rho_max``."""
    to_rho: ZcdpShare = zcdp_share or zcdp_share_default
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    p, r = max_partitions, max_rows_per_partition
    if mode == "pure" and dl != 0.0:
        raise PrivacyParameterError(
            f"this session's budget is pure (delta = 0); a query cannot spend delta={delta!r}"
        )
    if mode != "pure" and not dl > 0.0:
        raise PrivacyParameterError(
            "this session adds Gaussian noise (its budget has delta > 0): give the query a "
            "delta > 0"
        )
    if select_partitions and not dl > 0.0:
        raise PrivacyParameterError(
            "private partition selection needs delta > 0: give public keys to group_by(..., "
            "keys=...) or use a budget with delta"
        )
    if not stats:
        raise PrivacyParameterError("the query has no aggregates: call .agg(name=...) first")
    total_w = Fraction(0)
    for s in stats.values():
        total_w += Fraction(s.weight)
    spreads = _shared_spreads(stats)
    planned = (pool_sums or {}) if share_histograms and mode != "approx" else {}
    pooled, pools = _pools(stats, spreads, pure=mode != "zcdp", planned=planned)
    shared = {**pooled, **spreads}
    weights = {n: Fraction(s.weight) for n, s in stats.items()}
    for n, partner in shared.items():  # the partner's N and T get the sum's budget too
        weights[partner] += weights[n]
        weights[n] = Fraction(0)
    thr_name = None
    if select_partitions:  # a count to threshold takes the selection's weight (no share)
        thr_name = _threshold_count(stats, shared, stat_bounds or {}, p, r)
        total_w += _give_weight(weights, thr_name, selection_weight)
        select_partitions = thr_name is None
    w_all = total_w + (Fraction(selection_weight) if select_partitions else 0)
    sel_eps = sel_delta = 0.0
    events: list[DpEvent] = []
    selection: Any = None
    laplace: set[str] = set()
    if mode == "approx":
        # Provisional split (selection half of delta) used only to choose each statistic's
        # noise, a function of public parameters.
        eps0 = down(Fraction(eps) * total_w / w_all)
        dl0 = down(Fraction(dl) / 2) if select_partitions or thr_name else dl
        laplace = _laplace_stats(stats, weights, eps0, dl0, total_w, p)
    rho = 0.0
    if select_partitions and mode == "zcdp":
        # Approximate zCDP (module docstring): the budget's share of delta for the threshold,
        # the query's whole rho from (epsilon, the rest), split by weight.
        a_sel = up(Fraction(p) * Fraction(DISCRETE_GAUSSIAN_SLACK))  # k a, an upper bound
        try:
            rho_all, sel_delta, _ = to_rho(eps, dl, slack=a_sel)
        except PrivacyParameterError:
            raise PrivacyParameterError(
                f"epsilon={eps!r} is too small for partition selection over max_partitions={p}"
            ) from None
        if not sel_delta > 0.0:
            # The budget keeps no delta for approximate events: price as a default budget
            # would, and let the budget refuse the charge with its own message.
            rho_all, sel_delta, _ = zcdp_share_default(eps, dl, slack=a_sel)
        sel_rho = down(Fraction(rho_all) * Fraction(selection_weight) / w_all)
        if not (sel_rho > 0.0 and sel_delta > 0.0):
            raise PrivacyParameterError(
                f"(epsilon={eps!r}, delta={dl!r}) is too small for partition selection"
            )
        selection = _gaussian_selection(sel_rho, sel_delta, p)
        sel_eps = sel_rho  # zCDP sessions express shares in rho
        events.append(
            ApproxZCdpEvent(
                rho=selection.rho, delta=selection.threshold_delta, pmf_slack=selection.pmf_slack
            )
        )
        rho = down(Fraction(rho_all) - Fraction(sel_rho))
        total = rho
    elif select_partitions:
        sel_eps = down(Fraction(eps) * Fraction(selection_weight) / w_all)
        # Without any Gaussian statistic, the statistics spend no delta: selection takes it all.
        gaussian = mode == "approx" and any(weights[n] and n not in laplace for n in stats)
        sel_delta = down(Fraction(dl) / 2) if gaussian else dl
        selection = _selection(sel_eps, sel_delta, p)
        events.append(selection.event)
        rest_eps = down(Fraction(eps) - Fraction(sel_eps))
        rest_delta = down(Fraction(dl) - Fraction(sel_delta))
    elif thr_name is not None:
        gaussian = mode == "approx" and any(weights[n] and n not in laplace for n in stats)
        rest_eps, rest_delta, sel_delta, rho = _threshold_split(mode, eps, dl, to_rho, gaussian)
    else:
        rest_eps, rest_delta = eps, dl
    gauss_w = total_w
    if mode == "approx":
        gauss_w = Fraction(0)
        for n in stats:
            if n not in laplace:
                gauss_w += weights[n]
        # The Gaussian statistics pool their (epsilon, delta) shares into one rho.
        g_eps = down(Fraction(rest_eps) * gauss_w / total_w)
        g_delta = down(Fraction(rest_delta) * gauss_w / total_w) if gauss_w else 0.0
        rho = rho_for(g_eps, g_delta) if gauss_w else 0.0
    if mode == "pure":
        total = rest_eps
    elif mode == "zcdp" and not select_partitions:
        rho = rho if thr_name is not None else to_rho(rest_eps, rest_delta)[0]
        total = rho
    else:
        total = rho
    priced = []
    autos = []
    own = _own_bounds(stats, shared, stat_bounds or {}, p, r)
    owners, hists = _histogram_owners(
        stats if share_histograms and mode != "approx" else {},
        shared,
        laplace,
        own,
        r,
        lambda n: down(Fraction(total) * weights[n] / gauss_w),
        (mode == "pure", planned_units),
    )
    owned: dict[str, AutoBounds] = {}
    for name, s in sorted(stats.items(), key=lambda kv: owners.get(kv[0], kv[0]) != kv[0]):
        if name in shared:
            continue
        keep = own.get(name)
        ps, rs = keep or (p, r)
        if name in laplace:  # approx session, discrete Laplace: a pure share of epsilon
            share = down(Fraction(rest_eps) * weights[name] / total_w)
            sp = _kept_at(_price_stat(name, s, "pure", share, ps, rs, pools.get(name)), keep)
            priced.append(sp)
            events.extend(sp.events)
            continue
        share = down(Fraction(total) * weights[name] / gauss_w)
        if s.auto:
            ab = _auto_of(name, s, mode, share, (rs, r), keep, owners, hists, owned)
            if name in pools:  # a planned mean releasing a sum too (planned_pools)
                ab = replace(ab, pool=pools[name])
            autos.append(ab)
            if mode != "approx":
                events.extend(ab.events)
            continue
        sp = _kept_at(_price_stat(name, s, mode, share, ps, rs, pools.get(name)), keep)
        priced.append(sp)
        if mode != "approx":
            events.extend(sp.events)
    autos.sort(key=lambda ab: list(stats).index(ab.name))
    by_name = {sp.name: sp for sp in priced}
    for n, partner in shared.items():
        pp = by_name.get(partner)
        if pp is None:  # an auto variance's std: its measures once resolved (resolve_auto)
            priced.append(StatPrice(n, stats[n], (), shared_with=partner))
            continue
        kept = pp.measures if n in spreads else pp.measures[: 1 if stats[n].kind == "count" else 2]
        priced.append(
            StatPrice(
                n, stats[n], kept, shared_with=partner, pilot=pp.pilot, complement=pp.complement
            )
        )
    rank = {n: i for i, n in enumerate(stats)}
    priced.sort(key=lambda sp: rank[sp.name])
    if mode == "approx" and gauss_w:
        # A basic (epsilon, delta) budget: the Gaussian statistics are certified
        # (g_eps, g_delta)-DP by their total rho, and charged as that pair.
        events.append(ApproxDpEvent(epsilon=g_eps, delta=g_delta))
    if thr_name is not None:
        selection, sel_delta = _count_threshold(by_name[thr_name], r, p, sel_delta, events, mode)
    return Pricing(
        mode=mode,
        epsilon=eps,
        delta=dl,
        max_partitions=p,
        max_rows_per_partition=r,
        stats=tuple(priced),
        selection=selection,
        selection_epsilon=sel_eps,
        selection_delta=sel_delta,
        selection_count=thr_name,
        rho=rho,
        events=tuple(events),
        auto=tuple(autos),
        order=tuple(stats),
        stat_bounds=tuple((n, *b) for n, b in own.items()),
    )


def _own_bounds(
    stats: dict[str, Statistic],
    shared: dict[str, str],
    given: dict[str, tuple[int, int]],
    p: int,
    r: int,
) -> dict[str, tuple[int, int]]:
    """The statistics with bounds of their own (not the query's ``(p, r)``), from ``given``
    (the planner's per-statistic choice), each checked to lie within ``(p, r)``.

    Such a statistic's measures are calibrated to the sensitivity at its ``(p_s, r_s)``
    (module docstring, with ``P = p_s`` and ``R = r_s``) and read only the rows kept at
    ``(p_s, r_s)`` (:class:`~dpkit.analytics._plan.Measure` ``keep``): its release is the
    mechanism of the same query bounded at ``(p_s, r_s)``, on the same share of the budget.
    The shares do not depend on the bounds, so the query's events add up as with shared
    bounds; partition selection stays at the query's ``(p, r)``. A statistic released from
    another's measures (a pooled count or sum, a std from a variance) has that one's bounds."""
    out: dict[str, tuple[int, int]] = {}
    for name in stats:
        b = given.get(shared.get(name, name))
        if b is None or tuple(b) == (p, r):
            continue
        bp, br = int(b[0]), int(b[1])
        if not (1 <= bp <= p and 1 <= br <= r):
            raise PrivacyParameterError(
                f"{name}: its own contribution bounds {b!r} must lie within the query's ({p}, {r})"
            )
        out[name] = (bp, br)
    return out


#: Public grid of ``bounds="auto"``: 0 and +-2^j for j = -10..50 (122 bins, value range
#: +-2^50; values beyond are clamped into the outer bins).
AUTO_EDGES: tuple[float, ...] = (
    *(-(2.0**j) for j in range(50, -11, -1)),
    0.0,
    *(2.0**j for j in range(-10, 51)),
)


@dataclass(frozen=True)
class AutoBounds:
    """A statistic with ``bounds="auto"``: its bounds estimate and the share left for it.

    The estimate is one noisy histogram over the public logarithmic grid :data:`AUTO_EDGES`,
    computed on all rows (one global group, the same per-unit row bound ``R``, so the vector's
    sensitivity is ``R``); the lower edge of the lowest bin whose noisy count reaches the
    planner's threshold and the upper edge of the highest one become the bounds (see
    :mod:`dpkit.analytics._planner`). It spends ``auto_share`` of the statistic's budget (an
    epsilon, or a rho); the rest (``main_share``) prices the statistic once its bounds are
    known. The query is charged the estimate's event plus ``main_share`` as a black-box epsilon
    (or rho), an upper bound of what the final mechanisms cost, before anything runs. In a
    planned release a statistic may read another's histogram (``reads``, see
    :func:`_histogram_owners`): then it has no estimate event and ``main_share`` is its whole
    share.
    """

    name: str
    stat: Statistic
    mechanism: Any  # a dpkit.analytics._planner.NoisyHistogram
    main_share: float
    events: tuple[DpEvent, ...]
    measure: Measure
    #: the statistic's own contribution bounds (None: the query's)
    keep: tuple[int, int] | None = None
    #: the statistic whose histogram this one reads (:func:`_histogram_owners`); None: its own
    reads: str | None = None
    #: the rows per unit of the histogram it reads (its ``r``)
    hist_rows: int = 0
    #: its part of the histogram's share (all of it, unless others read it too)
    paid: float = 0.0
    #: a planned mean's weights ``(w_m, w_s, w_c)`` with the sum released from its measures
    #: (:func:`planned_pools`), for :func:`pool_split` at its bounds; None: alone
    pool: tuple[float, float, float] | None = None


def _price_auto(
    name: str,
    stat: Statistic,
    mode: Mode,
    share: float,
    r: int,
    keep: tuple[int, int] | None = None,
    plan_r: int | None = None,
    est_share: float | None = None,
    payers: int = 1,
) -> AutoBounds:
    """The bounds estimate of an ``"auto"`` statistic bounded at ``r`` rows per unit (its
    own, ``keep``, or the query's). Its histogram runs in one global group with the plan's
    ``plan_r`` rows per unit; a statistic with its own ``r`` below it reads only its ``r``.
    ``est_share``: the histogram's share when ``payers`` statistics read it (each pays
    ``est_share / payers``, rounded up; default: ``auto_share`` of ``share``, one payer)."""
    from dpkit.analytics._planner import NoisyHistogram

    if est_share is None:
        est_share = down(Fraction(share) * Fraction(stat.auto_share))
    pay = up(Fraction(est_share) / payers) if payers > 1 else est_share
    main_share = down(Fraction(share) - Fraction(pay))
    hist = NoisyHistogram.priced(
        pure=mode == "pure", share=est_share, sensitivity=r, bins=len(AUTO_EDGES) - 1
    )
    if mode == "pure":
        main_ev: DpEvent = PureDpEvent(epsilon=main_share)
    else:
        from dpkit.events import ZCdpEvent  # type: ignore[attr-defined,unused-ignore]

        main_ev = ZCdpEvent(rho=main_share)
    assert stat.column is not None
    own_r = (1, r) if keep is not None and plan_r is not None and r != plan_r else None
    m = Measure(
        name=f"{name}:auto", kind="bin_counts", column=stat.column, edges=AUTO_EDGES, keep=own_r
    )
    return AutoBounds(
        name=name,
        stat=stat,
        mechanism=hist,
        main_share=main_share,
        events=(hist.event, main_ev),
        measure=m,
        keep=keep,
        hist_rows=r,
        paid=pay,
    )


def _histogram_owners(
    stats: dict[str, Statistic],
    shared: dict[str, str],
    laplace: set[str],
    own: dict[str, tuple[int, int]],
    r: int,
    share_of: Callable[[str], float],
    units: tuple[bool, float] = (True, 0.0),
) -> tuple[dict[str, str], dict[str, tuple[float | None, int]]]:
    """For each ``"auto"`` statistic (of a planned release), the statistic whose bounds
    histogram it reads, and each histogram's share and number of readers (``share_of``: a
    statistic's share): among those of its column, the one with the fewest rows per unit ``r``
    (its histogram is the cheapest, sensitivity ``r``), the first on ties.

    One histogram serves the ``k`` statistics of a column: it is priced at ``e = min_i
    auto_share_i s_i`` (``s_i`` their shares; the least any would spend on its own) and each
    pays ``up(e / k)``, at most its own part, the rest of its share pricing its release. A
    statistic that reads another's histogram has bounds that are a function of that
    histogram's noisy counts, charged once, so post-processing. The events are the histogram
    (at most ``e <= k up(e / k)``) and each release (``s_i - up(e / k)``, rounded down): at most
    the sum of the shares.

    A histogram read by quantiles only, with ``units = (pure, n)`` the noisy number of units
    ``n > 0`` of the planned release, is priced at
    :func:`~dpkit.analytics._planner.quantile_histogram_share` of ``e`` (at most ``e``: the
    rest goes to the releases, the shares still add up to at most the statistics')."""
    from dpkit.analytics._planner import quantile_histogram_share

    cols: dict[str, list[tuple[int, int, str]]] = {}
    for i, (name, s) in enumerate(stats.items()):
        if s.auto and name not in shared and name not in laplace and s.column is not None:
            cols.setdefault(s.column, []).append((own.get(name, (0, r))[1], i, name))
    out: dict[str, str] = {}
    hists: dict[str, tuple[float | None, int]] = {}
    for group in cols.values():
        owner = min(group)[2]
        out.update({name: owner for _, _, name in group})
        # the least part any would spend on its own (each pays up(e / k), at most its own);
        # a planned mean's share holds its pooled sum's too (planned_pools): each counted
        # at its own weight's part of it
        parts = []
        for *_, n in group:
            pool = [n, *(m for m, pn in shared.items() if pn == n and stats[m].kind == "sum")]
            w = sum((Fraction(stats[m].weight) for m in pool), Fraction(0))
            parts += [
                down(
                    Fraction(share_of(n))
                    * Fraction(stats[m].weight)
                    / w
                    * Fraction(stats[m].auto_share)
                )
                for m in pool
            ]
        est = min(parts)
        if units[1] > 0.0 and all(stats[n].kind == "quantile" for *_, n in group):
            levels = [q for *_, n in group for q in stats[n].quantiles]
            est = quantile_histogram_share(
                est, min(group)[0], pure=units[0], units=units[1], levels=levels
            )
        hists[owner] = (est, len(group))
    return out, hists


def _auto_of(
    name: str,
    stat: Statistic,
    mode: Mode,
    share: float,
    rows: tuple[int, int],
    keep: tuple[int, int] | None,
    owners: dict[str, str],
    hists: dict[str, tuple[float | None, int]],
    owned: dict[str, AutoBounds],
) -> AutoBounds:
    """The :class:`AutoBounds` of ``name``: a reader of its owner's histogram (priced first,
    in ``owned``), or an owner of one (``rows``: its own and the plan's rows per unit)."""
    reads = owners.get(name, name)
    if reads != name:
        return _auto_reader(name, stat, mode, share, owned[reads], keep)
    est, k = hists.get(name, (None, 1))
    owned[name] = _price_auto(name, stat, mode, share, rows[0], keep, rows[1], est, k)
    return owned[name]


def _auto_reader(
    name: str,
    stat: Statistic,
    mode: Mode,
    share: float,
    owner: AutoBounds,
    keep: tuple[int, int] | None,
) -> AutoBounds:
    """An ``"auto"`` statistic reading ``owner``'s histogram: its ``share`` less its part of
    the histogram (``owner.paid``, what each of its readers pays) to its release (charged as
    ``main_share`` is for an owner)."""
    from dpkit.events import ZCdpEvent  # type: ignore[attr-defined,unused-ignore]

    main = down(Fraction(share) - Fraction(owner.paid))
    main_ev: DpEvent = PureDpEvent(epsilon=main) if mode == "pure" else ZCdpEvent(rho=main)
    return AutoBounds(
        name=name,
        stat=stat,
        mechanism=owner.mechanism,
        main_share=main,
        events=(main_ev,),
        measure=owner.measure,
        keep=keep,
        reads=owner.name,
        hist_rows=owner.hist_rows,
        paid=owner.paid,
    )


def _planned_complement(
    mode: Mode, ab: AutoBounds, lo: float, hi: float, p: int, r: int
) -> StatPrice | None:
    """A planned pure mean releasing a sum too (:func:`planned_pools`) as the complementary
    pair at its estimated bounds, when :func:`complement_dominates` there; else None (the
    planner's centred pair). A function of the released estimate and public parameters."""
    if mode != "pure" or ab.pool is None or ab.stat.kind != "mean":
        return None
    w_m, w_s, w_c = ab.pool
    if w_c != 0.0 or not complement_dominates(lo, hi, w_m, w_s):
        return None
    try:
        return _price_complement(ab.name, ab.stat.with_bounds(lo, hi), ab.main_share, p, r)
    except PrivacyParameterError:
        return None


def resolve_auto(pricing: Pricing, bounds: dict[str, tuple[float, ...]]) -> Pricing:
    """The pricing with every ``"auto"`` statistic priced at its estimated bounds: ``(lower,
    upper)``, or for a planned mean ``(lower, upper, centre, count_share)`` (its noisy sum
    centred at ``centre``, its count given ``count_share`` of its share, see
    :func:`~dpkit.analytics._planner.mean_centre`)."""
    done = {sp.name: sp for sp in pricing.stats}
    for ab in pricing.auto:
        lo, hi, *centring = bounds[ab.name]
        if len(centring) != 2 or not all(math.isfinite(float(v)) for v in centring):
            centring = []  # the middle and pool_split
        ps, rs = pricing.bounds_of(ab.name)
        pair = _planned_complement(pricing.mode, ab, lo, hi, ps, rs)
        if pair is not None:
            done[ab.name] = _kept_at(pair, ab.keep)
            continue
        for _ in range(120):
            # a planned mean's centre and count share first (kept within the bounds and
            # (0, 1)), then the middle: whichever prices first
            priced = None
            for centred in [True, False] if centring else [False]:
                try:
                    stat = ab.stat.with_bounds(lo, hi)
                    if centred:
                        centre = min(max(float(centring[0]), lo), hi)
                        share = min(max(float(centring[1]), 0.01), 0.99)
                        stat = stat.with_centring(centre, share)
                    pool = None if centred else ab.pool  # a centred split counts the sum
                    priced = _price_stat(ab.name, stat, pricing.mode, ab.main_share, ps, rs, pool)
                    break
                except PrivacyParameterError:
                    continue
            if priced is not None:
                done[ab.name] = _kept_at(priced, ab.keep)
                break
            # Too wide for the remaining share: halve both ends (a function of the released
            # estimate only, so post-processing) until the noise fits.
            lo, hi = lo / 2.0, hi / 2.0
            centring = [float(centring[0]) / 2.0, centring[1]] if centring else []
        else:  # pragma: no cover - halving 120 times always fits
            raise PrivacyParameterError(f"{ab.name}: no usable bounds for this budget")
    for sp in pricing.stats:
        # a std of an auto variance (_shared_spreads): the square root of the variance's
        # release; a sum of a planned mean's column (planned_pools): T + c N from its count
        # and centred sum. Each at the partner's resolved bounds and from its measures
        # (post-processing)
        if sp.stat.auto and sp.shared_with is not None and sp.shared_with in bounds:
            pp = done[sp.shared_with]
            assert isinstance(pp.stat.bounds, tuple)
            stat = sp.stat.with_bounds(*pp.stat.bounds)
            kept = pp.measures[:2] if sp.stat.kind == "sum" else pp.measures
            done[sp.name] = StatPrice(
                sp.name, stat, kept, shared_with=sp.shared_with, complement=pp.complement
            )
    return replace(pricing, stats=tuple(done[n] for n in pricing.order if n in done), auto=())


def _gaussian_selection(rho: float, threshold_delta: float, max_partitions: int) -> Any:
    """Gaussian thresholding with ``k / (2 sigma^2) <= rho`` and ``threshold_delta`` at most
    the given value (zCDP sessions)."""
    from dpkit.mechanisms.partition_selection import (  # type: ignore[import-not-found,unused-ignore]
        GaussianPartitionSelection,
    )

    return GaussianPartitionSelection.from_rho(
        rho=rho, threshold_delta=threshold_delta, max_partitions=max_partitions
    )


def _selection(epsilon: float, delta: float, max_partitions: int) -> Any:
    """The truncated-geometric rule (Desfontaines et al. 2022); Gaussian threshold if too big."""
    from dpkit.mechanisms.partition_selection import (  # type: ignore[import-not-found,unused-ignore]
        GaussianPartitionSelection,
        PartitionSelection,
    )

    try:
        return PartitionSelection.from_epsilon_delta(
            epsilon=epsilon, delta=delta, max_partitions=max_partitions
        )
    except PrivacyParameterError:
        return GaussianPartitionSelection.from_epsilon_delta(
            epsilon=epsilon, delta=delta, max_partitions=max_partitions
        )


def _threshold_count(
    stats: dict[str, Statistic],
    shared: dict[str, str],
    given: dict[str, tuple[int, int]],
    p: int,
    r: int,
) -> str | None:
    """The statistic whose own noisy count partition selection thresholds, if any: the first
    ``count()`` / ``count(column)`` / ``count_distinct()`` released from a measure of its own
    (not pooled with a mean's) at the query's contribution bounds. None: the query has no such
    count, and selection stays a separate measurement (:func:`_selection`)."""
    for name, s in stats.items():
        if s.kind not in ("count", "count_distinct") or s.auto or name in shared:
            continue
        b = given.get(name)
        if b is not None and tuple(b) != (p, r):
            continue
        if name in shared.values():
            continue
        return name
    return None


def _give_weight(weights: dict[str, Fraction], name: str | None, w: float) -> Fraction:
    """Adds the selection's weight ``w`` to the thresholded count ``name``; the weight added
    to the total (0 without such a count)."""
    if name is None:
        return Fraction(0)
    weights[name] += Fraction(w)
    return Fraction(w)


def _threshold_split(
    mode: Mode, eps: float, dl: float, to_rho: ZcdpShare, gaussian: bool
) -> tuple[float, float, float, float]:
    """``(rest_eps, rest_delta, threshold_delta, rho)`` of a query whose selection thresholds
    a count's own noise (module docstring). zCDP: the threshold takes the budget's share of
    delta for approximate events, ``rho`` certifies epsilon at the rest and goes wholly to the
    statistics. Approx: half of delta when some statistic is Gaussian (``gaussian``), else all
    of it (the statistics spend none); ``rho`` is 0 (priced later from the rest)."""
    if mode == "zcdp":
        rho_all, sel_delta, _ = to_rho(eps, dl)
        if not sel_delta > 0.0:  # no allowance: priced as a default budget, which refuses it
            rho_all, sel_delta, _ = zcdp_share_default(eps, dl)
        return eps, dl, sel_delta, rho_all
    sel_delta = down(Fraction(dl) / 2) if gaussian else dl
    return eps, down(Fraction(dl) - Fraction(sel_delta)), sel_delta, 0.0


def _count_threshold(
    sp: StatPrice, r: int, p: int, delta: float, events: list[DpEvent], mode: Mode
) -> tuple[Any, float]:
    """Partition selection by thresholding ``sp``'s released noisy count (module docstring,
    "Partition selection by the count"): the smallest ``tau`` whose threshold delta is at most
    ``delta``, for a group of the added unit holding at most ``r`` rows (1 for a count of
    units) with the count's own noise. Appends its event to ``events`` (the threshold's delta
    alone: ``ApproxZCdpEvent(0, d)`` in zCDP sessions, ``ApproxDpEvent(0, d)`` otherwise) and
    returns the selection and ``d``."""
    from dpkit.mechanisms.partition_selection import (  # type: ignore[import-not-found,unused-ignore]
        CountThreshold,
    )

    mp = sp.measures[0]
    assert mp.noise is not None
    thr = CountThreshold.calibrate(
        kind=mp.noise.kind,
        scale=mp.noise.scale,
        max_value=r if sp.stat.kind == "count" else 1,
        max_partitions=p,
        delta=delta,
        fast=mp.noise.fast,
    )
    d = thr.threshold_delta
    events.append(
        ApproxZCdpEvent(rho=0.0, delta=d) if mode == "zcdp" else ApproxDpEvent(epsilon=0.0, delta=d)
    )
    return thr, d
