"""The private query planner: the knobs a query leaves out, chosen from the data privately.

A query may leave out its value bounds (``bounds="auto"``) and its contribution bounds (no
``.bound(...)``). The session then plans them inside the one charge of the query: the whole
cost (planning steps and release) is charged before any row is read, and every choice below is
a function of noisy counts and public parameters only (post-processing, Dwork and Roth 2014,
Proposition 2.1), so it costs nothing beyond the noisy counts themselves.

**The planning primitive: one noisy histogram over a public grid.** Per privacy unit the
engine's result is turned into counts over public bins; a unit adds or removes at most
``s`` rows spread over the bins, so the vector of counts moves by at most ``s`` in L1 and in
L2 (all ``s`` in one bin is the worst case for L2). The whole vector gets independent noise:

* pure sessions: discrete Laplace of scale ``t = s / eps_plan`` (rounded up), charged as
  ``PureDpEvent(s / t)`` (the L1 mechanism, Ghosh, Roughgarden and Sundararajan 2012 per
  coordinate, and the sum of coordinate-wise loss ratios for the vector);
* zCDP and ``(epsilon, delta)`` sessions: discrete Gaussian with ``sigma^2 = s^2 / (2
  rho_plan)`` (rounded up), ``s^2 / (2 sigma^2)``-zCDP (Canonne, Kamath and Steinke 2020,
  Theorem 14 for vectors of L2 sensitivity ``s``), charged as ``ZCdpEvent``.

Both are sampled with the exact samplers (no floating-point slack to charge). A noisy count is
"significant" when it reaches the threshold ``tau``, the smallest integer with ``P(Z >= tau)
<= beta / bins`` (certified by the mechanism's own confidence half-width at ``2 beta /
bins``), so with probability at least ``1 - beta`` no empty bin is significant
(:data:`PLAN_FAILURE` is ``beta``). Unlike an exponential mechanism per end (or per
quantile), one histogram answers both ends of a range at one price, and the threshold does not
grow with the number of rows.

**Value bounds** (:func:`value_bounds`). The grid is 0 and ``+-2^j``, ``j = -10..50``
(:data:`~dpkit.analytics._pricing.AUTO_EDGES`); each unit's rows are bounded as in the release
(``R`` rows per unit, one global group), so ``s = R``. The bounds are the lower edge of the
lowest significant bin and the upper edge of the highest one. With probability at least ``1 -
beta`` both lie within one grid step (a factor of 2) of the data's range: a bound is never
placed in a region without data, however heavy the tails and however small epsilon. If no bin
is significant (too few rows for the budget), the bin with the largest noisy count is used
(a point of high density, still a function of the noisy counts only). Bounds are finally cut at
the limits of the column's declared type (an unsigned integer is never negative, a ``TINYINT``
within -128..127): public facts.

**Value bounds of a planned sum or mean** (:func:`trimmed_upper`). In a planned release with
public groups (or none) and a range within ``[0, inf)``, the upper bound of a sum or a mean is
then traded against its noise, from the same noisy histogram: a power-of-two bound set just
above the last significant bin can cost up to twice the noise the data need. The candidates are
``U_j = upper 2^(-j/4)``, ``j = 0..24`` (above the lower bound); for each, the expected clamping
loss per row ``x(U) = sum_i n_i E_i[(v - U)+] / N`` is read from the significant bins (each bin
``[a, b)`` with ``n_i`` rows spread evenly on the log scale, ``N`` their total) and from an
assumed tail beyond the highest significant bin (its count times a ratio ``q`` per bin: the last
significant ratio, at most :data:`TAIL_RATIO`, shrinking by the change of the last two ratios,
at most 1: a log-normal tail continued as such, a power law as a power law; bins below the
threshold are too noisy to read). With ``n = N / K`` rows per group (``K`` groups) and ``u`` the
noise sd of a sum of bound 1 at the statistic's contribution bounds and remaining share
(``sqrt(2) p r / e``, or ``sqrt(p) r / sqrt(2 rho)``), the error per group is ``sqrt((n x(U))^2
+ (u U)^2)`` for a sum and ``sqrt(x(U)^2 + (u d(U) / n)^2)`` for a mean (``x(U)`` is the mean's
clamping bias: the clamped mass over the rows; ``d(U)`` the noise factor of the mean centred for
the bounds ``[lower, U]``, below, in pure sessions, and ``c (U - lower) / 2`` in zCDP ones,
``c`` as for the mean's contribution bounds below). For a mean the smallest wins, the largest
``U`` on ties. For a sum the group sizes matter more: they are not public, only their number
``K`` (and the rows, noisy), and a sum's clamping bias ``n x(U)`` grows with its group's rows
while its noise does not, so a bound chosen for the mean size can be many times the noise in
the largest groups (on the utility benchmark, 1,000 cities of 20 to 390,000 rows, a bound
tuned for the mean size of 1,000 rows put the sum of the cities of 10,000 people or more at
2.0-2.4 times the error of dpkit given the true bounds, and the smallest at 0.65). So a sum's
bound guards sizes from ``n`` up to ``n K^GROUP_REACH`` (:data:`GROUP_REACH` = 1/2: halfway,
on a log scale, from the mean size to all rows in one group; a planning assumption, not a
guarantee), at ``n 2^i`` and at ``n K^GROUP_REACH``: a candidate's regret is the largest ratio,
over those sizes, of its error to the least error of any candidate at that size; the least
regret wins, the largest ``U`` on ties (with one group, ``K = 1``, the least error at ``n``).
(On that benchmark the sum's ratios by group size went from 0.64 / 0.63 / 0.87 / 1.97 to 1.31 /
1.24 / 1.16 / 1.48.) A mean keeps the mean size (the guard cost the planner benchmark's mean 17%
of error). The bound stays within the histogram's range, so it is still never placed where the
data are not; it may clamp a tail the histogram saw, which the release's clamping handles as for
any public bound. Privacy: a function of the noisy histogram (already charged) and public
parameters (shares, contribution bounds, the number of public groups), so post-processing; the
release is then priced at the chosen bounds within its own share, as before. Queries with
``.bound(...)`` keep the histogram's bounds.

**Centre of a planned mean** (:func:`mean_centre`, :func:`planned_centre`). A mean is released
as ``c + T / N`` from its noisy count ``N`` and its sum centred at ``c``, ``T = S - c N`` (exact
before noise, so post-processing); one row moves ``T`` by at most ``s = max(c - lower, upper -
c)``, the sensitivity it is priced at. At leading order the mean's noise is ``(Z_T - r Z_N) /
n`` (``r`` the group's mean less ``c``), of variance ``u^2 (s^2 / f_T^a + r^2 / f_N^a) / n^2``
at a split ``f_T + f_N = 1`` of its share (``a = 2`` for discrete Laplace, ``1`` for the
discrete Gaussian): the objective of :func:`~dpkit.analytics._pricing.pool_split` with ``a_T =
s^2`` and ``a_N = E[r^2]``. Fixed bounds in zCDP sessions centre at the middle and assume the
mean anywhere within them (``E[r^2] = h^2 / 3``; in pure sessions each group's centre is chosen
from a pilot, :class:`~dpkit.analytics._pricing.Pilot`); skewed data (a log-normal clamped at
10 times its median has its mean at a sixth of the range) then pay for a large ``r`` on the
count's noise. A planned release knows more: the same noisy histogram gives the mean ``m`` and
the variance ``v`` of the values clamped to the bounds (each significant bin read as above, the
assumed tail included; :func:`_clamped_moments`), and the groups' means are assumed spread about
``m`` by ``E[(mean_g - m)^2] = MEAN_GROUP_SPREAD v`` (:data:`MEAN_GROUP_SPREAD` = 1/3: the
row-weighted spread of the groups' means is at most ``v``, by the law of total variance; a third
is the planner's guess between homogeneous groups, 0, and groups that differ as much as single
values, 1). So ``E[r^2]
= (m - c)^2 + MEAN_GROUP_SPREAD v``. Among ``c`` on a public grid from the middle towards ``m``
(a 64th of the range apart, :data:`CENTRE_STEPS`) the planner takes the one minimising the noise
factor at its best split, ``d^2 = (a_T^x + a_N^x)^(1 / x)`` (``x = 1/3`` Laplace, ``1/2``
Gaussian: the Lagrange solution of :func:`~dpkit.analytics._pricing.pool_split`), and gives the
count ``f_N = a_N^x / (a_T^x + a_N^x)`` rounded to a hundredth (at least 1/100,
:func:`~dpkit.analytics._pricing.centred_split`). The middle is a candidate, so ``d`` is never
above the middle's at the same assumptions (but for the rounding of the split). On the planner
benchmark (pure) the count gets 0.22 of the share instead of 0.41 and the mean's error over 30
runs fell from 1.56 to 1.34-1.39 times the best hand-chosen one. zCDP sessions keep the middle,
:func:`~dpkit.analytics._pricing.pool_split` and the fixed reference in :func:`trimmed_upper`
(with the square-root split the middle stays the best centre there, and the data-driven factor
made :func:`trimmed_upper` clamp more: 6% more error over 5 x 20 runs). Privacy: ``c`` and
``f_N`` are functions of the noisy histogram (already charged) and public parameters, so
post-processing; ``T`` is priced at the sensitivity ``s`` of that ``c``, and the two measures at
``f_N`` and ``1 - f_N`` of the mean's share (exact rationals summing to 1, each part rounded
down), so the mean's events add up to at most its share, as with any split. The rule applies
where :func:`trimmed_upper`'s does, in pure sessions; elsewhere (and with ``.bound(...)``) the
middle and :func:`~dpkit.analytics._pricing.pool_split` (in pure sessions, the pilot of a
mean with fixed bounds).

**Value bounds of a planned variance** (:func:`variance_upper`). A variance (and a std, the
square root of the same release) gets its own upper bound from the same noisy histogram where
:func:`trimmed_upper`'s rule applies (a planned release with public groups or none, a range
within ``[0, inf)``; pure and zCDP sessions): its noise grows as ``U^2`` (the sum of squares'
sensitivity is ``(1 - kappa) h^2``, ``h = (U - lower) / 2``), so a power-of-two bound just above
the data's last significant bin costs it up to 4 times the noise, while clamping removes only
the variance of the few rows above ``U``. Among the candidates of :func:`trimmed_upper`, the
error per group at ``n`` rows is ``sqrt(b(U)^2 + (u D(U) / n)^2)``: ``b(U) = v - v_U``, the
variance of the values clamped to the histogram's range less that of the values clamped at ``U``
(both by :func:`_clamped_moments`, the assumed tail included), and ``D(U)`` the noise factor of
the release at ``[lower, U]``, the leading-order line of
:func:`~dpkit.analytics._pricing.pool_split` at its own split with the data's ``r`` and ``v``
read from the histogram. As for a sum, the bias does not shrink with the group while the noise
does, so the least regret over the sizes of :func:`group_sizes` wins, the largest ``U`` on ties.
Every group is assumed to have the pooled tail (a planning assumption: where the tails differ,
most groups clamp less than assumed, a few more). On the utility benchmark (incomes of median
51,000 up to 500,000, 1,000 cities, histogram bound 524,288) it gives 370,728, and the planned
variance's error over that of dpkit given the true bounds [0, 500,000] went from 0.98-1.01 /
1.15-1.31 / 1.29-1.34 / 1.28-1.96 to 0.86-0.89 / 0.85-0.92 / 0.58-0.62 / 0.95-1.25 by group size
(<100, 100-999, 1k-9.9k, >=10k people; the std's from 1.02-1.04 / 1.20-1.21 / 1.20-1.32 /
1.33-1.96 to 0.92 / 0.83-0.84 / 0.56-0.61 / 0.92-1.17; three runs of 10 each). Privacy: a
function of the noisy histogram (charged before) and public parameters, so post-processing; the
release is priced at the chosen bounds within its own share, as for any bounds.

In the same planned release (pure or zCDP), the ``"auto"`` statistics of one column read one
histogram: the one of the statistic keeping the fewest rows per unit ``r_h`` (the cheapest,
sensitivity ``r_h``), priced at the least share any of the ``k`` statistics would spend on its
own, each paying a ``k``-th of it (at most its own part), so every release keeps more of its
share (:func:`~dpkit.analytics._pricing._histogram_owners`). The second histogram of a column
would buy nothing the first does not give (the same values, counted at other row bounds), so
its share is better spent on the releases. The bounds are a function of that histogram's noisy
counts, charged once, so post-processing; the release's events are the one histogram and each
statistic's release, at most the sum of their shares. For a reader keeping ``r > r_h`` rows
per unit, :func:`trimmed_upper` counts the histogram's rows ``r / r_h`` times (a planning
assumption about the clamping loss, not a privacy claim). (The
contribution step's targets still deduct ``auto_share`` from every auto statistic's share: the
readers are known only once the pairs are chosen; their noise is then slightly overestimated.)

**A planned sum and mean of one column** (:func:`pooled_bounds`, :func:`pool_centre`). With
fixed bounds a sum and a mean of one column are released from the mean's noisy count ``N`` and
centred sum ``T`` (``S = T + c N``) on their pooled share. A planned release in a pure session
does the same when both are ``"auto"`` with one ``auto_share`` and the groups are public
(:func:`~dpkit.analytics._pricing.planned_pools`), choosing one of each knob for the pair:

* the pair ``(p, r)``: with ``E_S`` and ``E_M`` each statistic's error (the model of
  per-statistic bounds, below) on the pooled share at the noise of a pooled release
  (:func:`pool_noise_factors`) over its least error alone, the pair minimising ``E_S + E_M``
  among those with both at most 1; if there is none, two releases as before (so the pair is
  pooled only when neither statistic is estimated worse);
* the upper bound: :func:`trimmed_upper` with ``kind=POOL_KIND``, minimising the sum's regret
  plus the mean's, each at its pooled noise, over the sizes of :func:`group_sizes` and all
  ``N`` rows in one group, among candidates an eighth of an octave apart
  (:data:`POOL_TRIM_STEPS`; below, "the pair's guard");
* the centre and split: :func:`mean_centre`'s search for the sum of the two relative noise
  variances (both scaled by ``n m``), ``a_T = 2 s^2`` and ``a_N = E[r^2] + c^2`` (the sum's
  noise is ``Z_T + c Z_N``), over the whole grid.

The histogram is priced at the least part either would pay alone. On the utility benchmark
(1,000 cities, one group and 1-3 rows per person) the pair is pooled: over dpkit's error with
the true bounds, by group size (40 runs), the planned sum went from 1.30 / 1.25 / 1.27 / 1.92 to
0.92 / 0.89 / 0.99 / 1.14 and the mean from 0.66 / 0.65 / 0.95 / 2.68 to 0.88 / 0.81 / 0.91 /
1.10 (the small cities' mean pays for the sum's rows and larger bound), overall (160 runs) from
1.75 and 2.56 to 1.16 and 1.19; on the planner benchmark (2 groups and 1.5 rows per person) the
mean would lose at any pair the sum accepts, and two releases stay. zCDP sessions keep two
releases: pooling halves the noise variance there, not the noise, and on the utility benchmark
(12 runs) the pooled mean had 1.4-1.8 times the error of two releases in three of four city
sizes (the sum 0.7-1.0 times), with the middle or the pooled centre alike. (The release itself
is priced for a pool in zCDP too: the functions above take ``gaussian``, and the charge tests
cover it.)
Privacy: each choice is a function of the noisy histograms (charged before) and public
parameters; the sum adds no event, the mean's measures are priced within the pooled share (a
split summing to 1, parts rounded down) and the histogram at most the pooled share's part, so
the release's events stay within the shares charged up front, pooled or not.

**The pair's guard.** One bound serves both statistics, and in a group of ``n`` rows the
clamping bias grows relative to the noise for both (the sum's bias ``n x(U)`` against a
constant noise, the mean's ``x(U)`` against a noise falling as ``1 / n``), so the pair's
bound is judged up to the largest group the data can have: the regrets are taken over the
sizes of :func:`group_sizes` and ``N = n K`` (every row in one group; nothing added with one
group). Near the top of the histogram's range, where such a guard puts the bound, a quarter
octave changes the noise by 19%: the pair's candidates are ``upper 2^(-j / 8)``
(:data:`POOL_TRIM_STEPS`, over the same :data:`TRIM_OCTAVES`). Measured on the utility
benchmark (its largest city holds 39% of the rows): the sum's guard (``K^GROUP_REACH``, quarter
octaves) left that city's mean biased by about 5 noise sds; this guard brings the largest
cities' planned error from 1.58x / 1.38x (sum / mean) of dpkit given the true bounds to 1.29x
/ 1.13x, at 4-11% more error in the smaller cities (at most 1.10x). A sum or a mean released
alone and a variance keep the guard of ``K^GROUP_REACH``. Privacy: as for any bound of
:func:`trimmed_upper`, a function of the noisy histogram and public parameters.

**Share of a planned quantile's histogram** (:func:`quantile_histogram_share`). A quantile
needs from its bounds histogram only a range holding the ranks it reads: values outside the
range are clamped to its ends, which moves no rank inside it, so a quantile at level ``q`` is
unaffected by any tail holding fewer than ``min(q, 1 - q)`` of the rows. A histogram's
threshold ``tau`` (the rows a bin needs to be seen) does not depend on the data, so with many
units most of ``auto_share`` buys bins far smaller than any tail a quantile could miss: on the
utility benchmark (565,000 people, p50 and p90, epsilon 1) it took 0.18 of the release's 0.9
and left the quantiles at 1.1-2.2 times the error of dpkit given the true bounds. So when every
reader of a column's histogram is a quantile, the histogram's part ``e`` is halved (``down(e
2^-i)``, ``i <= QUANTILE_HALVINGS``, a public grid) while its threshold stays at most
``QUANTILE_TAIL n min_l min(q_l, 1 - q_l)`` (``n`` the units the contribution step's significant
groups bins count, :data:`QUANTILE_TAIL` = 1/10: a tail the histogram may miss holds at most a
tenth of the rows the quantile can lose; the values of units that are not ``NULL`` are assumed
at least one per unit, a planning assumption, not a privacy claim); the rest of ``e`` goes to
the quantile's release (there: 1/16 of the part to the histogram, the quantiles at 1.0-1.3
times). Privacy: ``n`` is a function of the contribution step's noisy counts, charged before,
so the histogram's share is post-processing of them, and the statistic's histogram and release
still add up to at most its share (the histogram's part rounded down, the release's ``share -
part`` rounded down): the release's events stay within its share whatever the split, as for
any split chosen from earlier noisy outputs (the bound holds on every outcome of the earlier
steps: pure DP composes the losses pointwise; zCDP, Renyi DP at every order, by the Renyi
filter of Feldman and Zrnic 2021, which allows parameters chosen from earlier outputs).
Queries with ``.bound(...)`` and histograms also read by another kind keep ``auto_share``.

**Contribution bounds** (:func:`contribution_bounds`). The engine counts each unit's rows per
group; per unit, its number of groups ``g`` and its largest number of rows in one group ``m``
each fall in one bin of :data:`CONTRIBUTION_GRID`, so the two histograms together have ``s = 1``
per histogram, L1 2 and L2 ``sqrt 2`` (charged as such). The bound chosen for each is the smallest
grid value ``c`` such that the noisy number of units above ``c`` is at most
:data:`CONTRIBUTION_LEVEL` of the noisy number of units (the 95th percentile of per-unit
contributions, the rule proposed by Amin, Kulesza, Munoz Medina and Vassilvitskii 2019 as a
robust default; larger bounds add noise to every group, smaller ones drop more rows).

**Per-statistic contribution bounds** (:func:`statistic_bounds`). With public group keys (or
no grouping) the number of groups ``K`` is public, and each count, histogram, sum and mean gets
bounds of its own, chosen from the same two noisy histograms (post-processing: no extra cost)
to minimise its estimated root mean squared error per group, ``sqrt(bias^2 + noise^2)``:

* from the histograms (each significant bin of integers ``[a, b)`` read at its middle
  ``v_i = (a + b - 1) / 2``, the last, open, bin at its lower end; ``n_i`` units; only bins
  whose noisy count reaches the threshold ``tau`` are read): the unit-group pairs ``Pi = sum
  n_i v_i`` (groups histogram), the pairs kept at ``p`` groups per unit ``k_p = sum n_i
  min(v_i, p) / Pi``, the rows kept at ``r`` rows per group ``k_r = sum n_i min(v_i, r) / sum
  n_i v_i`` (rows histogram: each unit read as one group of its largest size), the kept
  fraction ``k = k_p k_r`` and the rows per group ``n = Pi m / K`` (``m`` the mean of the rows
  histogram);
* the noise of one measure of sensitivity ``p r`` on share ``e`` (epsilon) or ``rho``:
  ``sd = sqrt(2) p r / e`` (discrete Laplace) or ``sqrt(p) r / sqrt(2 rho)`` (discrete
  Gaussian, L2 sensitivity ``sqrt(p) r``), the statistic's share being its weight's part of
  the release's (less its ``auto_share``);
* count and histogram (in rows): bias ``n (1 - k)``, noise ``sd``; sum (in units of its bound
  ``M = max(|lower|, |upper|)``): bias ``n (1 - k) / 2`` (a dropped row worth ``M / 2``, the
  mean of values spread evenly over ``[0, M]``, the reference point of
  :func:`~dpkit.analytics._pricing.pool_split`), noise ``sd``; mean (in units of its half-range
  ``h``): noise ``sd c / (n k)`` with ``c = sqrt(1 / f_T^a + 1 / (3 f_N^a))`` its count's and
  centred sum's noise at their split of the share (``f_T = 3^(1/3) / (1 + 3^(1/3))``, ``a = 2``
  for discrete Laplace; ``f_T = sqrt 3 / (1 + sqrt 3)``, ``a = 1`` for the discrete Gaussian;
  ``f_N = 1 - f_T``), bias ``MEAN_DROP_SHIFT (1 - k)``: the rows a bound drops are assumed to
  average :data:`MEAN_DROP_SHIFT` half-ranges away from the rest (a mean loses little to
  dropped rows unless the heaviest contributors differ from the others; the figure is a
  planning assumption, not a guarantee).

Other statistics (variance, std, quantiles, distinct counts) and queries whose groups are not
public (partition selection) keep the shared rule above. The plan bounds every unit at the
largest chosen pair and each statistic's measures read only the rows kept at its own pair (the
same salted ranks; :class:`~dpkit.analytics._plan.Measure`). Privacy: each statistic is
released by its own mechanisms on its own share of the release budget, calibrated to the
sensitivity at its own bounds, so it is ``share``-DP (or zCDP) for adding or removing one unit
(whose rows at the statistic's bounds are at most ``p`` groups of ``r`` rows); the shares add up
to at most the release's part, charged before any row is read, and the release's part plus the
histograms' is the query's one charge (sequential composition, Dwork and Roth 2014, Theorem
3.16; zCDP: Bun and Steinke 2016, Lemma 2.3). The choice of bounds is a function of the noisy
histograms and public parameters only.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal, TypeVar

from dpkit._numeric.rounding import sqrt_up, up
from dpkit.analytics._plan import EngineResult
from dpkit.errors import PrivacyParameterError
from dpkit.events import DpEvent, PureDpEvent, ZCdpEvent
from dpkit.mechanisms import DiscreteGaussian, DiscreteLaplace
from dpkit.noise import RandomSource
from dpkit.noise.samplers import discrete_gaussian_exact, discrete_laplace_exact

__all__ = [
    "ACCURACY_KINDS",
    "CONTRIBUTION_GRID",
    "CONTRIBUTION_LEVEL",
    "CONTRIBUTION_SHARE",
    "PLAN_FAILURE",
    "POOL_KIND",
    "ContributionStep",
    "NoisyHistogram",
    "contribution_bounds",
    "contribution_step",
    "engine_contributions",
    "group_sizes",
    "mean_centre",
    "planned_centre",
    "pool_centre",
    "pool_noise_factors",
    "pooled_bounds",
    "quantile_histogram_share",
    "smallest_epsilon",
    "statistic_bounds",
    "trimmed_upper",
    "type_limits",
    "unit_contributions",
    "value_bounds",
    "variance_upper",
]

#: ``beta``: the probability that some empty bin of a planning histogram is significant.
PLAN_FAILURE = 1e-3
#: Candidate contribution bounds (groups per unit, rows per group): public.
CONTRIBUTION_GRID: tuple[int, ...] = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
#: The fraction of units allowed above a planned contribution bound.
CONTRIBUTION_LEVEL = 0.05
#: The planner's assumed shift of a mean by the rows a bound drops, in half-ranges per unit of
#: dropped fraction (module docstring).
MEAN_DROP_SHIFT = 0.05
#: The target kind of a planned sum and mean of one column released from one pair of noisy
#: measures (module docstring, "a planned sum and mean of one column").
POOL_KIND = "sum+mean"
#: The statistic kinds that get contribution bounds of their own, and the rule each follows.
OWN_RULES: dict[str, str] = {"count": "count", "histogram": "count", "sum": "sum", "mean": "mean"}

_MAX_SCALE = 2.0**40
#: The bins of the value grid (:data:`~dpkit.analytics._pricing.AUTO_EDGES`: 0 and +-2^j,
#: j = -10..50).
_AUTO_BINS = 122
_C = TypeVar("_C")


@dataclass(frozen=True)
class NoisyHistogram:
    """Counts over ``bins`` public bins, noised once as a vector of sensitivity ``s``.

    ``kind`` is the noise (module docstring); ``scale`` its ``t`` or ``sigma``; ``event`` what
    the query is charged for it (never more than the share it was priced from)."""

    kind: Literal["discrete_laplace", "discrete_gaussian"]
    scale: float
    sensitivity: int
    bins: int
    event: DpEvent

    @classmethod
    def priced(cls, *, pure: bool, share: float, sensitivity: int, bins: int) -> NoisyHistogram:
        """The histogram for a budget ``share``: epsilon (``pure``) or rho.

        ``t = up(s / eps)`` so ``s / t <= eps`` exactly, and ``sigma = up(sqrt(s^2 / (2 rho)))``
        so ``s^2 / (2 sigma^2) <= rho``; the charged value is rounded up from the exact one,
        which is at most the (double) share, so it never exceeds the share."""
        if not (share > 0.0 and math.isfinite(share)):
            raise PrivacyParameterError(
                "the planning share of the budget is too small: give a larger epsilon, or the "
                "bounds yourself"
            )
        s = Fraction(sensitivity)
        if pure:
            t = up(s / Fraction(share))
            if not t <= _MAX_SCALE:
                raise PrivacyParameterError(
                    "the planning share of the budget is too small: give a larger epsilon"
                )
            return cls("discrete_laplace", t, sensitivity, bins, PureDpEvent(epsilon=up(s / t)))
        sigma = up(sqrt_up(s * s / (2 * Fraction(share))))
        if not sigma <= _MAX_SCALE:
            raise PrivacyParameterError(
                "the planning share of the budget is too small: give a larger epsilon"
            )
        rho = up(s * s / (2 * Fraction(sigma) ** 2))
        return cls("discrete_gaussian", sigma, sensitivity, bins, ZCdpEvent(rho=rho))

    def threshold(self, beta: float = PLAN_FAILURE) -> int:
        """``tau``: the smallest integer with ``P(Z >= tau) <= beta / bins`` for one bin's noise
        (the symmetric half-width at ``2 beta / bins``, plus one); by a union bound no empty bin
        reaches it with probability at least ``1 - beta``."""
        a = 2.0 * beta / self.bins
        if self.kind == "discrete_laplace":
            h = DiscreteLaplace(scale=self.scale, sensitivity=1).confidence_half_width(a)
        else:
            h = DiscreteGaussian(sigma=self.scale, sensitivity=1).confidence_half_width(a)
        return h + 1

    @property
    def std(self) -> float:
        """Standard deviation of one bin's noise."""
        if self.kind == "discrete_gaussian":
            return self.scale
        q = math.exp(-1.0 / self.scale)
        return math.sqrt(2.0 * q) / (1.0 - q)

    def release(self, counts: Sequence[int], source: RandomSource) -> list[int]:
        """``counts`` (length ``bins``) plus independent exact noise."""
        if len(counts) != self.bins:
            raise PrivacyParameterError(f"expected {self.bins} counts, got {len(counts)}")
        frac = Fraction(self.scale)
        if self.kind == "discrete_laplace":
            return [int(c) + discrete_laplace_exact(source, frac) for c in counts]
        s2 = frac * frac
        return [int(c) + discrete_gaussian_exact(source, s2) for c in counts]


# ---------------------------------------------------------------------------- value bounds
_TYPE_LIMITS: dict[str, tuple[float, float]] = {
    "BOOLEAN": (0.0, 1.0),
    "TINYINT": (-128.0, 127.0),
    "SMALLINT": (-32768.0, 32767.0),
    "INTEGER": (-(2.0**31), 2.0**31 - 1),
    "UTINYINT": (0.0, 255.0),
    "USMALLINT": (0.0, 65535.0),
    "UINTEGER": (0.0, 2.0**32 - 1),
    "UBIGINT": (0.0, math.inf),
    "UHUGEINT": (0.0, math.inf),
    "ByteType": (-128.0, 127.0),
    "ShortType": (-32768.0, 32767.0),
    "IntegerType": (-(2.0**31), 2.0**31 - 1),
    "BooleanType": (0.0, 1.0),
}


def type_limits(sql_type: str | None) -> tuple[float, float]:
    """The values a column's declared type can hold (public), ``(-inf, inf)`` if unknown."""
    if not sql_type:
        return -math.inf, math.inf
    return _TYPE_LIMITS.get(
        sql_type.strip().upper(), _TYPE_LIMITS.get(sql_type.strip(), (-math.inf, math.inf))
    )


def value_bounds(
    noisy: Sequence[int],
    edges: Sequence[float],
    tau: int,
    limits: tuple[float, float] = (-math.inf, math.inf),
) -> tuple[float, float, bool]:
    """``(lower, upper, found)`` from noisy bin counts over ``edges`` (module docstring).

    ``found`` is False when no bin reached ``tau`` and the densest noisy bin was used.
    Post-processing of the noisy counts and public values only."""
    hits = [i for i, c in enumerate(noisy) if c >= tau]
    found = bool(hits)
    if found:
        i, j = hits[0], hits[-1]
    else:
        i = j = max(range(len(noisy)), key=lambda k: (noisy[k], -abs(k - len(noisy) // 2)))
    lo, hi = float(edges[i]), float(edges[j + 1])
    tlo, thi = limits
    lo, hi = max(lo, tlo), min(hi, thi)
    if not lo < hi:  # the type's range excludes the chosen bins: fall back to the type's range
        lo = max(tlo, float(edges[0]))
        hi = min(thi, float(edges[-1]))
    return lo, hi, found


#: Candidate upper bounds per octave of the value grid for a planned sum or mean
#: (:func:`trimmed_upper`): ``2^(1/TRIM_STEPS)`` apart.
TRIM_STEPS = 4
#: The octaves below the histogram's upper bound that :func:`trimmed_upper` may go down.
TRIM_OCTAVES = 6
#: Candidate upper bounds per octave of a planned sum and mean released from one pair of noisy
#: measures (:data:`POOL_KIND`; module docstring, "the pair's guard").
POOL_TRIM_STEPS = 8
#: The group sizes :func:`trimmed_upper` guards against: from the mean size ``N / K`` up to
#: ``K^GROUP_REACH`` times it (module docstring; a planning assumption, not a guarantee).
GROUP_REACH = 0.5
#: The largest ratio of one bin's rows to the bin below that :func:`trimmed_upper` assumes
#: beyond the highest significant bin (below 1/2, so the assumed excess stays finite).
TAIL_RATIO = 0.45


def mean_noise_factor(gaussian: bool) -> float:
    """``c = sqrt(1 / f_T^a + 1 / (3 f_N^a))``: a mean's noise in units of the noise of a sum of
    the same sensitivity on the whole share, its count's and centred sum's noise at their split
    (module docstring)."""
    if gaussian:
        f_t, a = math.sqrt(3.0) / (1.0 + math.sqrt(3.0)), 1.0
    else:
        f_t, a = 3.0 ** (1 / 3) / (1.0 + 3.0 ** (1 / 3)), 2.0
    return math.sqrt(1.0 / f_t**a + 1.0 / (3.0 * (1.0 - f_t) ** a))


def _split(a_t: float, a_n: float, gaussian: bool) -> tuple[float, float]:
    """``(f_T, f_N)``: the split of a share minimising ``a_T / f_T^a + a_N / f_N^a`` (``f_i``
    proportional to ``a_i^x``, ``x = 1/3``, ``a = 2`` for discrete Laplace; ``x = 1/2``, ``a =
    1`` for the discrete Gaussian; :func:`~dpkit.analytics._pricing.pool_split`)."""
    x = 0.5 if gaussian else 1.0 / 3.0
    t, n = a_t**x, a_n**x
    return t / (t + n), n / (t + n)


def pool_noise_factors(gaussian: bool) -> tuple[float, float]:
    """``(c_S, c_M)``: the noise of a sum (in units of its bound ``M``) and of a mean (in units
    of its half-range) released from one noisy count and sum centred at the middle of ``[0,
    M]``, at :func:`~dpkit.analytics._pricing.pool_split`'s split for equal weights (``a_T = 1
    + 1/4``, ``a_N = 1/3 + 1/4``), in units of the noise of a sum of the same sensitivity on the
    whole share: ``c_S^2 = (1 / f_T^a + 1 / f_N^a) / 4``, ``c_M^2 = 1 / f_T^a + 1 / (3
    f_N^a)``."""
    f_t, f_n = _split(1.25, 1.0 / 3.0 + 0.25, gaussian)
    a = 1.0 if gaussian else 2.0
    return (
        math.sqrt((1.0 / f_t**a + 1.0 / f_n**a) / 4.0),
        math.sqrt(1.0 / f_t**a + 1.0 / (3.0 * f_n**a)),
    )


def _excess(a: float, b: float, u: float) -> float:
    """``E[(v - u)+]`` for one row of a bin ``[a, b)``, ``0 < a < b``, whose values are spread
    evenly on the log scale (density ``1 / (v ln(b / a))``)."""
    if u >= b:
        return 0.0
    w = math.log(b / a)
    if u <= a:
        return (b - a) / w - u
    return (b - u - u * math.log(b / u)) / w


def _tail_bins(
    noisy: Sequence[int], edges: Sequence[float], tau: int, upper: float
) -> list[tuple[float, float, float]] | None:
    """The significant bins ``(a, b, n)`` of ``noisy`` above 0 and up to ``upper``, then the
    assumed tail beyond the highest (module docstring, "value bounds of a planned sum or
    mean"); None when the highest significant bin does not end at ``upper``."""
    sig = [int(c) if c >= tau else 0 for c in noisy]
    bins = [
        (float(edges[i]), float(edges[i + 1]), float(sig[i]))
        for i in range(len(sig))
        if edges[i] > 0.0 and sig[i] > 0 and edges[i + 1] <= upper
    ]
    if not bins or bins[-1][1] != upper:
        return None
    a, b, top = bins[-1]
    # the tail beyond the highest significant bin: each bin's count the one below times a
    # ratio q, starting at the last significant ratio (at most TAIL_RATIO) and shrinking by
    # the change between the last two ratios (at most 1): the log of the counts continued
    # as a quadratic (a log-normal tail) or a line (a power law)
    run, edge = [top], a  # the counts of up to 3 adjacent significant bins, top first
    for lo_, hi_, n_ in reversed(bins[:-1]):
        if len(run) == 3 or hi_ != edge:
            break
        run.append(n_)
        edge = lo_
    q = min(run[0] / run[1], TAIL_RATIO) if len(run) > 1 else TAIL_RATIO
    shrink = min((run[0] / run[1]) / (run[1] / run[2]), 1.0) if len(run) > 2 else 1.0
    step = b / a
    count = top
    for _ in range(60):
        a, b, count = b, b * step, count * q
        if count < 1e-9 * top:
            break
        bins.append((a, b, count))
        q *= shrink
    return bins


def _clamped_moments(
    bins: Sequence[tuple[float, float, float]], lower: float, upper: float
) -> tuple[float, float]:
    """The mean and variance of the rows of ``bins`` (each ``[a, b)``, ``0 < a``, its ``n``
    rows spread evenly on the log scale, density ``1 / (v ln(b / a))``) clamped to ``[lower,
    upper]``: per bin, ``E[min(v, U)] = (min(b, U) - a) / w + U ln(b / U)+ / w`` and
    ``E[min(v, U)^2] = (min(b, U)^2 - a^2) / (2 w) + U^2 ln(b / U)+ / w`` (``w = ln(b / a)``),
    values below ``lower`` read as ``lower``. Planning arithmetic only."""
    rows = m1 = m2 = 0.0
    for a, b, n in bins:
        w = math.log(b / a)
        lo, hi = min(max(a, lower), b), max(min(b, upper), a)
        p_lo, p_hi = math.log(lo / a) / w, math.log(b / hi) / w  # mass below lower, above U
        e1 = (hi - lo) / w + lower * p_lo + upper * p_hi
        e2 = (hi * hi - lo * lo) / (2.0 * w) + lower * lower * p_lo + upper * upper * p_hi
        rows, m1, m2 = rows + n, m1 + n * e1, m2 + n * e2
    if not rows > 0.0:
        return (lower + upper) / 2.0, (upper - lower) ** 2 / 12.0
    mean = m1 / rows
    return mean, max(m2 / rows - mean * mean, 0.0)


#: The planner's assumed spread of the groups' means about the mean of all values: their
#: variance as a fraction of the values' variance (module docstring, "centre of a planned
#: mean"). The law of total variance bounds the (row-weighted) fraction by 1.
MEAN_GROUP_SPREAD = 1.0 / 3.0
#: Candidate centres of a planned mean from the middle of its bounds to either end
#: (:func:`mean_centre`): a public grid of ``2 CENTRE_STEPS`` steps across the bounds.
CENTRE_STEPS = 32


def mean_centre(
    mean: float, variance: float, lower: float, upper: float, *, gaussian: bool
) -> tuple[float, float, float]:
    """``(c, f_N, d)``: the centre ``c`` of a planned mean's noisy sum, its count's fraction
    ``f_N`` of the mean's share and the noise factor ``d`` at that split (module docstring,
    "centre of a planned mean"), for values of estimated ``mean`` and ``variance`` within
    ``[lower, upper]``.

    The candidates are the public grid ``lower + (upper - lower) j / (2 CENTRE_STEPS)`` from
    the middle towards ``mean`` (as far as the last grid point on its side of it); the one
    minimising ``d^2 = (a_T^x + a_N^x)^(1 / x)`` wins, with ``a_T = max(c - lower, upper -
    c)^2``, ``a_N = (mean - c)^2 + MEAN_GROUP_SPREAD variance``, ``x = 1/3`` (discrete
    Laplace) or ``1/2`` (discrete Gaussian), the nearest the middle on ties. ``f_N = a_N^x /
    (a_T^x + a_N^x)`` rounded to a hundredth (within ``[0.01, 0.99]``), and ``d^2 = a_T /
    f_T^a + a_N / f_N^a`` at that split (``a = 1 / x - 1``). A grid and a rounded share
    (public values, no less optimal to within a percent or so) let releases of one query
    repeat their pricing, so the interval tables computed for it are reused. Post-processing
    of the noisy histogram the moments were read from."""
    c, f_n, d, _ = _centre(mean, variance, lower, upper, gaussian, pooled=False)
    return c, f_n, d


def pool_centre(
    mean: float, variance: float, lower: float, upper: float, *, gaussian: bool
) -> tuple[float, float, float, float]:
    """``(c, f_N, d_M, d_S)``: :func:`mean_centre` for a mean whose noisy count and centred
    sum also release a sum of the same column (``S = T + c N``; module docstring, "a planned
    sum and mean of one column"): the objective is the sum of the two statistics' relative
    noise variances, ``a_T = 2 s^2`` and ``a_N = E[r^2] + c^2``, over the whole grid
    ``lower + (upper - lower) j / (2 CENTRE_STEPS)``, ``j = 0..2 CENTRE_STEPS``; ``d_M`` the
    mean's noise factor and ``d_S = sqrt(s^2 / f_T^a + c^2 / f_N^a)`` the sum's, at that
    split. Post-processing, as :func:`mean_centre`."""
    return _centre(mean, variance, lower, upper, gaussian, pooled=True)


def _centre(
    mean: float, variance: float, lower: float, upper: float, gaussian: bool, *, pooled: bool
) -> tuple[float, float, float, float]:
    """The search of :func:`mean_centre` (``pooled`` False) and :func:`pool_centre`."""
    x = 0.5 if gaussian else 1.0 / 3.0
    mid = (lower + upper) / 2.0
    m = min(max(mean, lower), upper)
    spread = MEAN_GROUP_SPREAD * variance
    step = (upper - lower) / (2 * CENTRE_STEPS)

    def parts(c: float) -> tuple[float, float]:
        reach = max(c - lower, upper - c)
        if pooled:
            return (2.0 * reach * reach) ** x, ((m - c) ** 2 + spread + c * c) ** x
        return (reach * reach) ** x, ((m - c) ** 2 + spread) ** x

    if pooled:
        cands = [lower + j * step for j in range(2 * CENTRE_STEPS + 1)]
        cands.sort(key=lambda c: abs(c - mid))  # the nearest the middle on ties
    else:
        cands = []
        for j in range(CENTRE_STEPS + 1):
            c = mid + math.copysign(j * step, m - mid)
            if j and abs(c - mid) > abs(m - mid) + step:
                break
            cands.append(c)
    best = (math.inf, mid)
    for c in cands:
        t, n = parts(c)
        best = min(best, ((t + n) ** (1.0 / x), c), key=lambda bc: bc[0])
    c = best[1]
    t, n = parts(c)
    f_n = min(max(round(n / (t + n), 2) if t + n > 0.0 else 0.5, 0.01), 0.99)
    a = 1.0 / x - 1.0
    g_t, g_n = 1.0 / (1.0 - f_n) ** a, 1.0 / f_n**a
    reach2 = max(c - lower, upper - c) ** 2
    d_m = math.sqrt(reach2 * g_t + ((m - c) ** 2 + spread) * g_n)
    return c, f_n, d_m, math.sqrt(reach2 * g_t + c * c * g_n)


def _trim_frame(
    noisy: Sequence[int],
    edges: Sequence[float],
    tau: int,
    lower: float,
    upper: float,
    groups: int,
    rows_scale: float,
    steps: int = TRIM_STEPS,
) -> tuple[list[tuple[float, float, float]], float, float, list[float]] | None:
    """What :func:`trimmed_upper` and :func:`variance_upper` read: the significant bins and
    the assumed tail (:func:`_tail_bins`), their rows, the rows per group and the candidate
    upper bounds ``upper 2^(-j / steps)``, ``j = 0..steps TRIM_OCTAVES``, above ``lower``;
    ``None`` when there is nothing to trade (a range not within ``[0, inf)``, no group, no
    significant bin)."""
    if not (0.0 <= lower < upper) or groups < 1:
        return None
    bins = _tail_bins(noisy, edges, tau, upper)
    if bins is None:
        return None
    rows = float(sum(n for lo, _, n in bins if lo < upper))
    cands = [upper * math.pow(2.0, -j / steps) for j in range(steps * TRIM_OCTAVES + 1)]
    return bins, rows, rows * rows_scale / groups, [u for u in cands if u > lower]


def trimmed_upper(
    noisy: Sequence[int],
    edges: Sequence[float],
    tau: int,
    lower: float,
    upper: float,
    *,
    kind: str,
    unit_noise: float,
    groups: int,
    gaussian: bool,
    rows_scale: float = 1.0,
) -> float:
    """The upper bound of a planned sum or mean (module docstring, "value bounds of a planned
    sum or mean"): among ``upper 2^(-j / TRIM_STEPS)``, ``j = 0..TRIM_STEPS TRIM_OCTAVES``
    (above ``lower``), the one minimising the estimated error per group ``sqrt(bias^2 +
    noise^2)`` at the mean size ``N / K`` (a mean), or the least multiple of the best
    candidate's error over the sizes from ``N / K`` to ``K^GROUP_REACH`` times it (a sum: its
    regret, :func:`group_sizes`), the largest on ties; a pair (``POOL_KIND``): the least sum of
    the two regrets over those sizes and ``N`` (all rows in one group), among ``upper 2^(-j /
    POOL_TRIM_STEPS)`` (module docstring, "the pair's guard"); ``upper`` itself when the rule
    does not apply (another kind, a range reaching below 0, no significant bin).

    ``unit_noise`` is the noise sd of a sum of bound 1 at the statistic's contribution bounds
    and share (``sqrt(2) p r / e``, or ``sqrt(p) r / sqrt(2 rho)``); ``rows_scale`` multiplies
    the histogram's rows for a statistic that reads a histogram of fewer rows per unit than it
    keeps. Post-processing of the noisy counts ``noisy`` over ``edges`` (threshold ``tau``)
    and public parameters."""
    if kind not in ("sum", "mean", POOL_KIND):
        return upper
    pair = kind == POOL_KIND
    steps = POOL_TRIM_STEPS if pair else TRIM_STEPS
    frame = _trim_frame(noisy, edges, tau, lower, upper, groups, rows_scale, steps)
    if frame is None:
        return upper
    bins, rows, per_group, cands = frame
    c_mean = mean_noise_factor(gaussian)

    def parts(u: float) -> tuple[float, float, float]:
        """The mean excess per row above ``u`` and the noise at ``u`` of the sum (in its
        units) and of the mean (times the rows of its group)."""
        x = sum(n * _excess(lo, hi, u) for lo, hi, n in bins) / rows
        if kind == POOL_KIND:
            if gaussian:  # the middle and pool_split, at equal weights
                c_s, c_m = pool_noise_factors(True)
                return x, unit_noise * c_s * u, unit_noise * c_m * (u - lower) / 2.0
            mean, var = _clamped_moments(bins, lower, u)
            _, _, d_m, d_s = pool_centre(mean, var, lower, u, gaussian=False)
            return x, unit_noise * d_s, unit_noise * d_m
        if kind == "sum":
            return x, unit_noise * u, math.inf
        if gaussian:  # the middle and pool_split (module docstring)
            return x, math.inf, unit_noise * c_mean * (u - lower) / 2.0
        mean, var = _clamped_moments(bins, lower, u)
        return x, math.inf, unit_noise * mean_centre(mean, var, lower, u, gaussian=False)[2]

    table = {u: parts(u) for u in cands}

    def sum_error(u: float, n: float) -> float:
        x, noise, _ = table[u]
        return math.hypot(n * x, noise)

    def mean_error(u: float, n: float) -> float:
        x, _, noise = table[u]
        return math.hypot(x, noise / n)

    # a sum guards against group sizes up to K^GROUP_REACH times the mean, a pair up to all
    # rows in one group (module docstring)
    sizes = group_sizes(per_group, groups, every_row=pair)
    if kind == "mean":
        regret = _regret(mean_error, cands, [per_group])
    else:
        regret = _regret(sum_error, cands, sizes)
    if pair:  # the sum's regret plus the mean's, over the same sizes
        of_sum, of_mean = regret, _regret(mean_error, cands, sizes)
        return min(cands, key=lambda u: (of_sum(u) + of_mean(u), -u))
    return min(cands, key=lambda u: (regret(u), -u))


def group_sizes(mean_size: float, groups: int, *, every_row: bool = False) -> list[float]:
    """The group sizes a planned bound guards against (module docstring): ``mean_size`` times
    ``2^i`` up to ``K^GROUP_REACH``, and that last factor itself (``mean_size`` alone for one
    group); ``every_row``: also ``K`` times it, all rows in one group (the pair's guard)."""
    reach = max(groups, 1) ** GROUP_REACH
    sizes = [mean_size * 2.0**i for i in range(int(math.log2(reach)) + 1)]
    if reach > 1.0:
        sizes.append(mean_size * reach)
    if every_row and groups > 1:
        sizes.append(mean_size * groups)
    return sizes


def _regret(
    error: Callable[[_C, float], float], cands: Sequence[_C], sizes: Sequence[float]
) -> Callable[[_C], float]:
    """A candidate's regret: the largest ratio, over ``sizes``, of its ``error(c, n)`` to the
    least of all candidates at ``n`` (1 where that least is 0)."""
    best = [min(error(c, n) for c in cands) for n in sizes]

    def regret(c: _C) -> float:
        return max(error(c, n) / b if b > 0.0 else 1.0 for n, b in zip(sizes, best, strict=True))

    return regret


def variance_upper(
    noisy: Sequence[int],
    edges: Sequence[float],
    tau: int,
    lower: float,
    upper: float,
    *,
    unit_noise: float,
    groups: int,
    gaussian: bool,
    split: Sequence[float],
    kappa: float,
    rows_scale: float = 1.0,
) -> float:
    """The upper bound of a planned variance (or std) (module docstring, "value bounds of a
    planned variance"): among the candidates of :func:`trimmed_upper`, the least regret over
    the group sizes of :func:`group_sizes` of the error ``sqrt(b(U)^2 + (u D(U) / n)^2)``,
    the largest on ties; ``upper`` where the rule does not apply (a range reaching below 0,
    no significant bin). ``b(U) = v - v_U`` is the variance the clamping at ``U`` removes and
    ``D(U)^2 = (1 - kappa)^2 h^4 / f_Q^a + 4 r^2 h^2 / f_T^a + k^2 / f_N^a`` the noise factor
    of the release at ``[lower, U]`` (``h = (U - lower) / 2``, ``r`` the clamped mean less the
    middle, ``k = kappa h^2 - v_U + r^2``, ``split = (f_N, f_T, f_Q)`` the release's split
    and ``kappa`` its centre of the squares, given by the caller from
    :func:`~dpkit.analytics._pricing.pool_split` and
    :data:`~dpkit.analytics._pricing.SQ_CENTRE` (the same at every bound for a variance
    alone), ``a = 2`` discrete Laplace, ``1`` discrete Gaussian), the moments read from the
    significant bins and the assumed tail (:func:`_clamped_moments`). ``unit_noise``,
    ``rows_scale``: as for :func:`trimmed_upper`. Post-processing of the noisy counts and
    public parameters."""
    frame = _trim_frame(noisy, edges, tau, lower, upper, groups, rows_scale)
    if frame is None:
        return upper
    bins, _, per_group, cands = frame
    _, v_all = _clamped_moments(bins, lower, upper)
    f_n, f_t, f_q = (float(f) for f in split)
    a = 1.0 if gaussian else 2.0

    def parts(u: float) -> tuple[float, float]:
        """The variance clamping at ``u`` removes, and the release's noise factor ``D(u)``."""
        mean, var = _clamped_moments(bins, lower, u)
        h = (u - lower) / 2.0
        r = mean - (lower + u) / 2.0
        k = kappa * h * h - var + r * r
        d2 = ((1.0 - kappa) * h * h) ** 2 / f_q**a + (2.0 * r * h) ** 2 / f_t**a + k * k / f_n**a
        return max(v_all - var, 0.0), math.sqrt(d2)

    table = {u: parts(u) for u in cands}

    def error(u: float, n: float) -> float:
        bias, d = table[u]
        return math.hypot(bias, unit_noise * d / n)

    regret = _regret(error, cands, group_sizes(per_group, groups))
    return min(cands, key=lambda u: (regret(u), -u))


def planned_centre(
    noisy: Sequence[int],
    edges: Sequence[float],
    tau: int,
    lower: float,
    upper: float,
    *,
    gaussian: bool,
    pooled: bool = False,
) -> tuple[float, float] | None:
    """The centre and count share of a planned mean with bounds ``[lower, upper]`` (the upper
    one :func:`trimmed_upper`'s), from the same noisy histogram (:func:`mean_centre` at the
    moments of its significant bins and the tail assumed beyond the highest, clamped to the
    bounds); None where :func:`trimmed_upper`'s rule does not apply (a range reaching
    below 0, no significant bin) and in zCDP sessions (``gaussian``; module docstring): the
    middle and :func:`~dpkit.analytics._pricing.pool_split` then. ``pooled``: the mean also
    releases a sum of its column (:func:`pool_centre`). Post-processing."""
    hits = [i for i, c in enumerate(noisy) if c >= tau]
    if gaussian or not (0.0 <= lower < upper) or not hits:
        return None
    bins = _tail_bins(noisy, edges, tau, float(edges[hits[-1] + 1]))
    if bins is None:
        return None
    mean, var = _clamped_moments(bins, lower, upper)
    if not (math.isfinite(mean) and math.isfinite(var)):
        return None
    if pooled:
        c, f_n, _, _ = pool_centre(mean, var, lower, upper, gaussian=gaussian)
    else:
        c, f_n, _ = mean_centre(mean, var, lower, upper, gaussian=gaussian)
    return c, f_n


#: A planned quantile's bounds histogram may leave out at most this fraction of the rows a
#: quantile reads from the nearer end (:func:`quantile_histogram_share`).
QUANTILE_TAIL = 0.1
#: The most halvings of a quantile's histogram share (:func:`quantile_histogram_share`).
QUANTILE_HALVINGS = 12


def quantile_histogram_share(
    part: float, sensitivity: int, *, pure: bool, units: float, levels: Sequence[float]
) -> float:
    """The share of a planned quantile's bounds histogram: its ``part`` (``auto_share`` of the
    quantile's share) halved (``down(part 2^-i)``, ``i <= QUANTILE_HALVINGS``) as long as the
    histogram's threshold stays at most ``QUANTILE_TAIL units min_l min(q_l, 1 - q_l)``
    (module docstring, "share of a planned quantile's histogram"); ``part`` when even that is
    too small. ``units``: the contribution step's noisy number of units. Post-processing of
    that noisy count and public parameters."""
    from dpkit._numeric.rounding import down

    need = QUANTILE_TAIL * units * min((min(q, 1.0 - q) for q in levels), default=0.0)
    share = part
    for i in range(1, QUANTILE_HALVINGS + 1):
        s = down(Fraction(part) / 2**i)
        try:
            h = NoisyHistogram.priced(pure=pure, share=s, sensitivity=sensitivity, bins=_AUTO_BINS)
        except PrivacyParameterError:
            break
        if not h.threshold() <= need:
            break
        share = s
    return share


# ---------------------------------------------------------------------------- contributions
def unit_contributions(result: EngineResult, units: int) -> tuple[list[int], list[int]]:
    """Exact per-unit histograms over :data:`CONTRIBUTION_GRID` from the engine result of a plan
    grouped by ``(unit, *group columns)`` with a ``rows`` measure named ``"rows"``: the number
    of groups of each unit and its largest number of rows in one group. ``units`` is the
    position of the unit in the keys (0). Not private: the caller noises them."""
    groups: dict[object, int] = {}
    rows: dict[object, int] = {}
    for key, n in zip(result.keys, result.values.get("rows", ()), strict=False):
        u = key[units]
        groups[u] = groups.get(u, 0) + 1
        rows[u] = max(rows.get(u, 0), int(n))  # type: ignore[call-overload]
    return _grid_counts(groups.values()), _grid_counts(rows.values())


def engine_contributions(result: EngineResult) -> tuple[list[int], list[int]]:
    """The same two histograms as :func:`unit_contributions`, read from the engine result of a
    plan with ``unit_grid=CONTRIBUTION_GRID`` (the engine bins the units itself, so only the
    ``2 * len(CONTRIBUTION_GRID)`` counts leave it). Not private: the caller noises them."""
    k = len(CONTRIBUTION_GRID)

    def one(name: str) -> int:
        vals = result.values.get(name, ())
        return int(vals[0]) if vals else 0  # type: ignore[call-overload]

    return [one(f"groups:{i}") for i in range(k)], [one(f"rows:{i}") for i in range(k)]


def _grid_counts(values: object) -> list[int]:
    grid = CONTRIBUTION_GRID
    out = [0] * len(grid)
    for v in values:  # type: ignore[attr-defined]
        # bin i holds grid[i] <= v < grid[i + 1] (the last bin is open above)
        i = 0
        while i + 1 < len(grid) and v >= grid[i + 1]:
            i += 1
        out[i] += 1
    return out


def contribution_bounds(noisy: Sequence[int], allowed: Sequence[int]) -> int:
    """The smallest value of ``allowed`` (a subset of :data:`CONTRIBUTION_GRID`) such that the
    noisy number of units above it is at most :data:`CONTRIBUTION_LEVEL` of the noisy units
    (negative noisy counts read as 0); the largest allowed value if none. Post-processing."""
    grid = CONTRIBUTION_GRID
    counts = [max(int(c), 0) for c in noisy]
    total = sum(counts)
    for c in sorted(allowed):
        above = sum(n for g, n in zip(grid, counts, strict=True) if g > c)
        if above <= CONTRIBUTION_LEVEL * total:
            return c
    return max(allowed)


#: The share of a query's epsilon spent on planning its contribution bounds.
CONTRIBUTION_SHARE = 0.1


@dataclass(frozen=True)
class ContributionStep:
    """The contribution-bounds step of a planned query (module docstring).

    ``histogram`` noises the two per-unit histograms as one vector (sensitivity 2, pure
    epsilon ``epsilon_plan``); the release is then priced at ``(epsilon_release, delta)`` with
    the chosen bounds, from ``partitions`` (groups per unit; ``(1,)`` for an ungrouped query) and
    ``rows`` (rows per group) candidates, all checked to price before the charge."""

    histogram: NoisyHistogram
    epsilon_plan: float
    epsilon_release: float
    delta: float
    partitions: tuple[int, ...]
    rows: tuple[int, ...]
    #: ``(name, kind, share)`` of each statistic of the query (those of the kinds in
    #: :data:`OWN_RULES` get bounds of their own, see :func:`statistic_bounds`), its share of
    #: the release an epsilon or (``gaussian``) a rho
    targets: tuple[tuple[str, str, float], ...] = ()
    #: the number of groups when public (1 for an ungrouped query), else None
    groups: int | None = None
    gaussian: bool = False
    #: ``(sum, mean, share)`` of each planned sum and mean of one column that may be released
    #: from one pair of measures (:func:`pooled_bounds`), ``share`` the pooled one
    pools: tuple[tuple[str, str, float], ...] = ()

    def choose(self, result: EngineResult, source: RandomSource) -> dict[str, object]:
        """The chosen ``max_partitions`` and ``max_rows_per_partition`` with what they cost,
        from the engine result of the contribution plan (noised here, once), and under
        ``"statistics"`` the bounds of each statistic that has its own (:func:`statistic_bounds`;
        the plan's pair is then the largest of all), under ``"pooled"`` each sum released
        from its column's mean's measures (:func:`pooled_bounds`: the two then have one pair),
        and under ``"units"`` the units counted by
        the significant bins of the groups histogram (:func:`quantile_histogram_share`; read,
        not reported, by :meth:`~dpkit.analytics.builder.PreparedQuery.prepare_release`)."""
        if "groups:0" in result.values:
            groups, rows = engine_contributions(result)
        else:
            groups, rows = unit_contributions(result, 0)
        noisy = self.histogram.release([*groups, *rows], source)
        k = len(CONTRIBUTION_GRID)
        p = contribution_bounds(noisy[:k], self.partitions) if len(self.partitions) > 1 else 1
        r = contribution_bounds(noisy[k:], self.rows)
        out: dict[str, object] = {
            "max_partitions": p,
            "max_rows_per_partition": r,
            "epsilon": self.epsilon_plan,
            "release_epsilon": self.epsilon_release,
        }
        # the units counted by the significant bins of the groups histogram (each unit is in
        # one bin), for a planned quantile's histogram share (quantile_histogram_share)
        tau = self.histogram.threshold()
        out["units"] = float(sum(c for c in noisy[:k] if c >= tau))
        if self.targets and self.groups is not None:
            own = statistic_bounds(
                noisy[:k],
                noisy[k:],
                self.partitions,
                self.rows,
                self.targets,
                self.groups,
                self.gaussian,
                self.histogram.threshold(),
            )
            pooled = pooled_bounds(
                noisy[:k],
                noisy[k:],
                self.partitions,
                self.rows,
                self.pools,
                self.targets,
                self.groups,
                self.gaussian,
                self.histogram.threshold(),
            )
            if pooled:
                own.update(pooled)
                out["pooled"] = {n: m for n, m, _ in self.pools if n in pooled}
            if own:
                out["statistics"] = {
                    n: {"max_partitions": bp, "max_rows_per_partition": br}
                    for n, (bp, br) in own.items()
                }
                out["shared"] = {"max_partitions": p, "max_rows_per_partition": r}
                # the plan's pair: the largest of all (with the shared pair when some
                # statistic keeps it)
                others = len(own) < len(self.targets)
                ps = [bp for bp, _ in own.values()] + ([p] if others else [])
                rs = [br for _, br in own.values()] + ([r] if others else [])
                out["max_partitions"], out["max_rows_per_partition"] = max(ps), max(rs)
        return out


def statistic_bounds(
    groups: Sequence[int],
    rows: Sequence[int],
    partitions: Sequence[int],
    row_bounds: Sequence[int],
    targets: Sequence[tuple[str, str, float]],
    k_groups: int,
    gaussian: bool,
    tau: int = 1,
) -> dict[str, tuple[int, int]]:
    """Each target statistic's ``(p, r)`` among the candidates, minimising its estimated
    root mean squared error per group (module docstring) from the noisy per-unit histograms
    ``groups`` and ``rows`` over :data:`CONTRIBUTION_GRID`. Only significant bins are read
    (a noisy count below the histograms' threshold ``tau`` is 0: the noise of an empty bin of
    a large grid value would otherwise read as many dropped rows). Empty when no bin is
    significant (nothing to estimate from). Post-processing of the noisy counts."""
    error = _error_model(groups, rows, k_groups, gaussian, tau)
    if error is None:
        return {}
    grid = [(p, r) for p in sorted(partitions) for r in sorted(row_bounds)]
    c_one = {"mean": mean_noise_factor(gaussian), "sum": 1.0, "count": 1.0}
    out: dict[str, tuple[int, int]] = {}
    for name, kind, share in targets:
        rule = OWN_RULES.get(kind)
        if rule is None or not share > 0.0:
            continue
        scores = {(p, r): error(p, r, rule, share, c_one[rule]) for p, r in grid}
        out[name] = min(grid, key=lambda pr: (scores[pr], pr[0] * pr[1], pr))
    return out


def pooled_bounds(
    groups: Sequence[int],
    rows: Sequence[int],
    partitions: Sequence[int],
    row_bounds: Sequence[int],
    pools: Sequence[tuple[str, str, float]],
    targets: Sequence[tuple[str, str, float]],
    k_groups: int,
    gaussian: bool,
    tau: int = 1,
) -> dict[str, tuple[int, int]]:
    """For each ``(sum, mean, share)`` of ``pools`` (a planned sum and mean of one column,
    ``share`` the two statistics' shares less one histogram's) whose release from one pair of
    measures is estimated better than two releases (module docstring, "a planned sum and mean
    of one column"), the pair both get: with ``E_S(p, r)`` and ``E_M(p, r)`` each statistic's
    error on the pooled share at :func:`pool_noise_factors` over its least error on its own
    share (``targets``) at its own pair, the ``(p, r)`` minimising ``E_S + E_M`` among those
    with ``E_S <= 1`` and ``E_M <= 1`` (neither estimated worse than alone); none such, no
    pool. Post-processing of the noisy counts, as :func:`statistic_bounds`."""
    error = _error_model(groups, rows, k_groups, gaussian, tau)
    own = dict((n, sh) for n, _, sh in targets)
    if error is None:
        return {}
    grid = [(p, r) for p in sorted(partitions) for r in sorted(row_bounds)]
    c_s, c_m = pool_noise_factors(gaussian)
    c_mean = mean_noise_factor(gaussian)
    out: dict[str, tuple[int, int]] = {}
    for sum_name, mean_name, share in pools:
        alone_s, alone_m = own.get(sum_name, 0.0), own.get(mean_name, 0.0)
        if not (share > 0.0 and alone_s > 0.0 and alone_m > 0.0):
            continue
        least_s = min(error(*pr, "sum", alone_s, 1.0) for pr in grid)
        least_m = min(error(*pr, "mean", alone_m, c_mean) for pr in grid)
        if not (0.0 < least_s < math.inf and 0.0 < least_m < math.inf):
            continue

        # each statistic's error on the pooled share over its least alone
        rel = {
            pr: (
                error(*pr, "sum", share, c_s) / least_s,
                error(*pr, "mean", share, c_m) / least_m,
            )
            for pr in grid
        }
        fits = [pr for pr in grid if max(rel[pr]) <= 1.0]  # neither statistic worse
        if fits:
            best = min(fits, key=lambda pr: (sum(rel[pr]), pr[0] * pr[1], pr))
            out[sum_name] = out[mean_name] = best
    return out


def _error_model(
    groups: Sequence[int], rows: Sequence[int], k_groups: int, gaussian: bool, tau: int
) -> Callable[[int, int, str, float, float], float] | None:
    """``error(p, r, rule, share, c)``: a statistic's estimated error per group at the pair
    ``(p, r)`` by its ``rule`` (``"count"``, ``"sum"``, ``"mean"``) on ``share``, its noise
    ``c`` times that of one measure of sensitivity ``p r`` (module docstring, "per-statistic
    contribution bounds"); None when no bin is significant."""
    gn = [int(c) if c >= tau else 0 for c in groups]
    rn = [int(c) if c >= tau else 0 for c in rows]
    # a bin [a, b) of integers read at its middle (a + b - 1) / 2; the last, open, at a
    edges = CONTRIBUTION_GRID
    grid = tuple((a + b - 1) / 2.0 for a, b in zip(edges, (*edges[1:], edges[-1] + 1), strict=True))
    pairs = sum(n * v for n, v in zip(gn, grid, strict=True))
    rows_total = sum(n * v for n, v in zip(rn, grid, strict=True))
    units_r = sum(rn)
    if not (pairs > 0 and rows_total > 0 and units_r > 0 and k_groups >= 1):
        return None
    per_group = pairs * (rows_total / units_r) / k_groups

    def kept(p: int, r: int) -> float:
        kp = sum(n * min(v, p) for n, v in zip(gn, grid, strict=True)) / pairs
        kr = sum(n * min(v, r) for n, v in zip(rn, grid, strict=True)) / rows_total
        return kp * kr

    def error(p: int, r: int, rule: str, share: float, c: float) -> float:
        if gaussian:
            sd = c * math.sqrt(p) * r / math.sqrt(2.0 * share)
        else:
            sd = c * math.sqrt(2.0) * p * r / share
        k = kept(p, r)
        if rule == "mean":
            if not k > 0.0:
                return math.inf
            return math.hypot(sd / (per_group * k), MEAN_DROP_SHIFT * (1.0 - k))
        bias = per_group * (1.0 - k) * (0.5 if rule == "sum" else 1.0)
        return math.hypot(bias, sd)

    return error


def contribution_step(
    epsilon: float,
    delta: float,
    grouped: bool,
    priceable: Callable[[int, int, float], bool],
    to_rho: Callable[[float, float], float] | None = None,
) -> ContributionStep:
    """The contribution step of a query at ``(epsilon, delta)``: ``CONTRIBUTION_SHARE`` of
    epsilon (rounded down) to the histograms, the rest (rounded down, so the two never add up
    to more than epsilon) to the release. ``priceable(p, r, eps)`` says whether the release
    prices at bounds ``(p, r)`` and epsilon ``eps``; the candidates are cut to the largest
    pair that does (noise grows with ``p`` and ``r``, so every smaller pair prices too).

    In a zCDP session (``to_rho``: the budget's rule from ``(epsilon, delta)`` to rho) the
    shares are of rho: the query's ``R = to_rho(epsilon, delta)``, the histograms' pure
    epsilon ``e_h = sqrt(2 CONTRIBUTION_SHARE R)`` (rounded down; a pure ``e``-DP step is
    ``e^2 / 2``-zCDP, Bun and Steinke 2016, Prop. 1.4) and the release's epsilon the largest
    (found by :func:`_release_epsilon`, rounded down) whose rho is at most ``R - e_h^2 / 2``:
    the two add up to at most ``R``, the rho of the same query with public bounds. (Splitting
    epsilon instead would charge ``(0.1 epsilon)^2 / 2`` on top of the release's rho: 8-21%
    more than ``R`` at epsilon 0.5-3.)"""
    from dpkit._numeric.rounding import down

    if to_rho is None:
        eps_plan = down(Fraction(epsilon) * Fraction(CONTRIBUTION_SHARE))
        eps_rel = down(Fraction(epsilon) - Fraction(eps_plan))
    else:
        total = Fraction(to_rho(epsilon, delta))
        eps_plan = down(Fraction(math.sqrt(float(2 * total * Fraction(CONTRIBUTION_SHARE)))))
        while Fraction(eps_plan) ** 2 / 2 > total * Fraction(CONTRIBUTION_SHARE):
            eps_plan = math.nextafter(eps_plan, 0.0)
        eps_rel = _release_epsilon(epsilon, delta, total - Fraction(eps_plan) ** 2 / 2, to_rho)
    hist = NoisyHistogram.priced(
        pure=True, share=eps_plan, sensitivity=2, bins=2 * len(CONTRIBUTION_GRID)
    )
    ps = list(CONTRIBUTION_GRID) if grouped else [1]
    rs = list(CONTRIBUTION_GRID)
    check = priceable
    while not check(max(ps), max(rs), eps_rel):
        if len(ps) == 1 and len(rs) == 1:
            raise PrivacyParameterError(
                "the budget is too small to release this query even with one row per person: "
                "give a larger epsilon"
            )
        if len(rs) >= len(ps) and len(rs) > 1:
            rs.pop()
        else:
            ps.pop()
    return ContributionStep(hist, eps_plan, eps_rel, delta, tuple(ps), tuple(rs))


def _release_epsilon(
    epsilon: float, delta: float, rho: Fraction, to_rho: Callable[[float, float], float]
) -> float:
    """The largest epsilon below ``epsilon`` (bisected to adjacent doubles, rounded down)
    whose ``to_rho(., delta)`` is at most ``rho`` (the rule grows with epsilon); raises when
    none is positive."""
    lo, hi = 0.0, float(epsilon)
    while True:
        mid = lo + (hi - lo) / 2.0
        if mid in (lo, hi):
            break
        if Fraction(to_rho(mid, delta)) <= rho:
            lo = mid
        else:
            hi = mid
    if lo <= 0.0:
        raise PrivacyParameterError(
            "the budget is too small to plan this query's contribution bounds: give a larger "
            "epsilon, or give .bound(max_partitions=..., max_rows_per_partition=...)"
        )
    return lo


# ---------------------------------------------------------------------------- accuracy
#: The statistics whose error does not depend on the data (given their bounds): their noise
#: alone decides how far the release is from the exact (bounded) answer.
ACCURACY_KINDS = frozenset({"count", "count_distinct", "sum", "histogram"})
_EPS_LOW, _EPS_HIGH = 1e-6, 1e4


def smallest_epsilon(error_at: Callable[[float], float | None], accuracy: float) -> float:
    """The smallest epsilon (within a relative 1e-4, rounded up to 4 significant digits) whose
    error ``error_at(epsilon)`` is at most ``accuracy``; ``error_at`` returns None where the
    query cannot be priced. The error of additive noise only falls as epsilon grows, so a
    bisection on ``log epsilon`` finds it; the result meets the target (it is the upper end of
    the final bracket, rounded up), while a value 1e-3 smaller in relative terms need not.
    Raises :class:`~dpkit.errors.PrivacyParameterError` when even epsilon ``10^4`` misses."""

    def ok(e: float) -> bool:
        err = error_at(e)
        return err is not None and err <= accuracy

    if not ok(_EPS_HIGH):
        raise PrivacyParameterError(
            f"no epsilon up to {_EPS_HIGH:g} gets every value within +-{accuracy:g}: ask for a "
            "looser accuracy, or tighter bounds"
        )
    lo, hi = _EPS_LOW, _EPS_HIGH
    if ok(lo):
        return lo
    while hi / lo > 1.0 + 1e-4:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    digits = 3 - math.floor(math.log10(hi))
    rounded = math.ceil(hi * 10**digits) / 10**digits
    return rounded if ok(rounded) else hi
