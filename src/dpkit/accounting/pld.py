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

The discretisation, the FFT composition and their error analysis (items 1 to 3 of the upper
bound: pessimistic "connect the dots" grid, Chernoff-bounded wrap-around, floating-point
allowances; the lower bound and the estimate; the automatic grid) live in the privacy-loss engine
:mod:`dpkit._loss.grid`, shared with :func:`dpkit.fdp.tensor`; the dominating pairs of the
mechanisms in :mod:`dpkit._loss.pairs`. The accountant adds:

4. *pmf slack.* Events with ``pmf_slack = a`` describe samplers whose pmf is within
   ``exp(+-a)`` of the ideal one; with ``A = sum_j k_j a_j`` the answers are
   ``delta(eps) = e^A delta_ideal(eps - 2A)`` and ``eps(delta) = eps_ideal(delta e^-A) + 2A``
   (see :mod:`dpkit.events`).

Closed forms (no grid, exact up to the final rounding): Gaussian mechanisms alone compose to
``mu``-GDP, ``mu^2 = sum k_j / sigma_j^2`` (Dong, Roth and Su 2022, Corollary 3.3); ``k`` copies
of one (epsilon, delta)-DP event (pure DP, exponential mechanism, report noisy max) use the
optimal composition of Kairouz, Oh and Viswanath (2015); one Laplace mechanism has
``delta(eps) = 1 - e^{(eps - eps0)/2}``. Their time and memory do not depend on the parameters.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from dpkit._loss.grid import (
    Composed,
    Factor,
    Mode,
    NoFiniteBoundError,
    automatic_step,
    compose_factors,
    step_for_mode,
)
from dpkit._loss.pairs import (
    FloatArray,
    MixturePair,
    discrete_gaussian_pair,
    discrete_laplace_pair,
    laplace_profile,
    randomized_response_pair,
    worst_case_pair,
)
from dpkit._numeric import rounding
from dpkit._numeric.gaussian import DELTA_REL_MARGIN, gaussian_delta, gaussian_delta_up
from dpkit._numeric.rounding import sqrt_down, sqrt_up
from dpkit._numeric.search import SearchError, search
from dpkit._numeric.validation import check_delta, check_epsilon, check_positive
from dpkit.accounting._base import PrivacyAccountant
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
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
    SampledWithoutReplacementEvent,
    SelfComposedEvent,
)

if TYPE_CHECKING:
    from dpkit.fdp import TradeOffFunction  # pragma: no cover

__all__ = ["PldAccountant"]


class PldAccountant(PrivacyAccountant):
    """Privacy-loss-distribution accountant: tight numeric composition with error bounds.

    ``get_epsilon`` / ``get_delta`` return *upper bounds* (pessimistic "connect the dots"
    discretisation, Chernoff-bounded FFT wrap-around, exact mass at infinity; the full error
    analysis is in :mod:`dpkit._loss.grid`). ``get_epsilon_bounds`` adds a rigorous lower bound
    and an estimate. Composition is lazy: events are recorded and composed (FFT power per
    distinct mechanism, one inverse FFT per direction) at the first query, then cached.

    Supported: Gaussian, Laplace, discrete Laplace, discrete Gaussian, randomized response,
    pure and approximate DP (as the worst-case pair of ``f_{eps,delta}``), the exponential
    mechanism and report-noisy-max (as epsilon-DP), Poisson-subsampled Gaussian and Laplace under
    add/remove neighbouring (both directions), Gaussian batches sampled without replacement
    under replace-one, compositions, no-op and non-private events.
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
        self._counts: dict[Factor, int] = {}
        self._nonprivate = 0
        self._slack = 0.0  # sum of count * pmf_slack over the leaves
        self._cache: dict[str, tuple[Composed, Composed]] = {}
        self._cache_h: dict[str, float] = {}
        self._h_used: float | None = None

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
            return (
                all(self._walk(e, count, apply) for e in event.events)
                if not apply
                else all([self._walk(e, count, True) for e in event.events])
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
    def _leaf(event: DpEvent) -> tuple[Factor | None, float] | None:
        """The component (None for zero cost) and the pmf slack of a leaf event, or None."""
        if isinstance(event, GaussianEvent):
            p = MixturePair("gaussian", event.noise_multiplier, 1.0, "remove")
            return Factor(p, p, ("gaussian", event.noise_multiplier)), event.pmf_slack
        if isinstance(event, LaplaceEvent):
            p = MixturePair("laplace", event.noise_multiplier, 1.0, "remove")
            return Factor(p, p, ("laplace", event.noise_multiplier)), event.pmf_slack
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
            if q == 1.0:
                # no subsampling: the plain mechanism (same pair in both directions), so that
                # the closed forms (mu-GDP, the single Laplace profile) apply
                plain = MixturePair(noise, s, 1.0, "remove")
                return Factor(plain, plain, (noise, s)), inner.pmf_slack
            return (
                Factor(MixturePair(noise, s, q, "remove"), MixturePair(noise, s, q, "add")),
                inner.pmf_slack,
            )
        if isinstance(event, SampledWithoutReplacementEvent):
            return PldAccountant._without_replacement_leaf(event)
        if isinstance(event, (PureDpEvent, ExponentialMechanismEvent, ReportNoisyMaxEvent)):
            p2 = worst_case_pair(event.epsilon, 0.0)
            slack = getattr(event, "pmf_slack", 0.0)
            comp = Factor(p2, p2, ("dp", event.epsilon, 0.0))
            return (None if event.epsilon == 0.0 else comp), slack
        if isinstance(event, ApproxDpEvent):
            if event.epsilon == 0.0 and event.delta == 0.0:
                return None, 0.0
            p2 = worst_case_pair(event.epsilon, event.delta)
            return Factor(p2, p2, ("dp", event.epsilon, event.delta)), 0.0
        if isinstance(event, RandomizedResponseEvent):
            rr = randomized_response_pair(event.p_truth, event.categories)
            return (None if rr is None else Factor(rr, rr)), 0.0
        if isinstance(event, DiscreteLaplaceEvent):
            p2 = discrete_laplace_pair(event.scale, event.sensitivity)
            return Factor(p2, p2), event.pmf_slack
        if isinstance(event, DiscreteGaussianEvent):
            p2 = discrete_gaussian_pair(event.sigma, event.sensitivity)
            return Factor(p2, p2), event.pmf_slack
        return None

    @staticmethod
    def _without_replacement_leaf(
        event: SampledWithoutReplacementEvent,
    ) -> tuple[Factor | None, float] | None:
        """A Gaussian (replace-one) on a fixed-size batch without replacement.

        The inner ``GaussianEvent(m, replace)`` has noise ``m`` times the replace-one
        sensitivity ``2C``. A fixed-size batch that draws the replaced record *displaces* another
        record, so the batch sum moves by up to ``2C`` against a batch that did not draw it:
        with every other record at ``+C u`` and the replaced one at ``-C u`` against ``+C u``,
        one dataset gives ``(1 - q) N(bC, .) + q N((b - 2) C, .)`` and the other ``N(bC, .)``.
        The dominating pair of sampling without replacement under replace-one is
        ``(q P + (1 - q) Q, Q)`` and its reverse, ``(P, Q)`` the pair of the unsampled
        mechanism (Zhu, Dong and Wang 2022, sampling without replacement): here the
        Poisson-subsampled Gaussian pair :class:`~dpkit._loss.pairs.MixturePair` at multiplier
        ``m`` (shift ``2C`` at noise ``2mC``) in both directions, with ``q = b / n`` rounded up
        (more privacy spent). It is attained by the construction above. (The symmetric
        :class:`~dpkit._loss.pairs.ReplacePair`, all other records at 0, is attained too but
        does not dominate.) ``b = n`` is the plain Gaussian of multiplier ``m``.
        """
        inner = event.event
        if isinstance(inner, NoOpEvent) or event.sample_size == 0:
            return None, 0.0
        if not isinstance(inner, GaussianEvent) or inner.neighbouring is not Neighbouring.REPLACE:
            return None
        m = inner.noise_multiplier
        if event.sample_size == event.dataset_size:
            plain = MixturePair("gaussian", m, 1.0, "remove")
            return Factor(plain, plain, ("gaussian", m)), inner.pmf_slack
        q = rounding.up(Fraction(event.sample_size, event.dataset_size))
        return (
            Factor(
                MixturePair("gaussian", m, q, "remove"),
                MixturePair("gaussian", m, q, "add"),
                ("wor", m, q),
            ),
            inner.pmf_slack,
        )

    # ---------------------------------------------------------------- composition
    def _choose_h(self, mode: Mode) -> float:
        """The grid step for ``mode`` (:func:`dpkit._loss.grid.automatic_step`), cached."""
        hit = self._cache_h.get(mode)
        if hit is not None:
            return hit
        if self._h_fixed is not None:
            h = self._h_fixed
        else:
            base, single_sd, width = automatic_step(self._counts)
            h = step_for_mode(base, single_sd, width, mode)
        self._cache_h[mode] = h
        return h

    def _composed(self, mode: Mode) -> tuple[Composed, Composed]:
        hit = self._cache.get(mode)
        if hit is not None:
            return hit
        h = self._choose_h(mode)
        r, ad, h_used = compose_factors(
            self._counts, mode, h, nonprivate=self._nonprivate, fixed=self._h_fixed is not None
        )
        self._cache_h[mode] = h_used
        if mode == self._mode:
            self._h_used = h_used
        self._cache[mode] = (r, ad)
        return r, ad

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
            val = laplace_profile(epsilon, eps0)  # epsilon >= 0 > -eps0 here
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
            except NoFiniteBoundError:
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
            except NoFiniteBoundError:
                return 1.0  # the trivial bound
            d = max(r.delta(e, upper=True), ad.delta(e, upper=True))
        if math.isnan(d):
            return 1.0
        d = d * math.exp(a) * (1.0 + 1e-12)
        return min(1.0, d)

    def get_epsilon_bounds(self, delta: float) -> tuple[float, float, float]:
        """``(lower, estimate, upper)`` for epsilon at ``delta``.

        ``upper`` equals :meth:`get_epsilon`. ``lower`` is rigorous for the ideal mechanisms
        (grid curves below the true ones, second-order accurate; see :mod:`dpkit._loss.grid`);
        ``estimate`` keeps each grid interval's
        mean loss (see :mod:`dpkit._loss.grid`) and is not a bound. pmf slack only enters the upper
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
    bracket that satisfies it (an upper bound; ``inf`` if none below ``1e300``); otherwise on the
    profile rounded down by the same relative margin, returning the last point where it still
    exceeds delta (a lower bound). The bracket grows from 1 by factors of ``2**16``.
    """

    def prof(e: float) -> float:
        if upper:
            return gaussian_delta_up(e, mu)
        return gaussian_delta(e, mu) * (1.0 - DELTA_REL_MARGIN)

    if prof(0.0) <= delta:
        return 0.0
    if delta == 0.0 or math.isinf(mu):
        return math.inf  # a Gaussian profile is positive everywhere
    if upper:
        try:
            return search(
                lambda e: prof(e) <= delta,
                0.0,
                1.0,
                holds="above",
                expand="up",
                limit=1e300,
                factor=65536.0,
                what="Gaussian epsilon",
            )
        except SearchError:
            return math.inf
    return search(
        lambda e: prof(e) > delta,
        0.0,
        1.0,
        holds="below",
        expand="up",
        limit=1e300,
        factor=65536.0,
        what="Gaussian epsilon",
    )
