"""mu-GDP accounting (Dong, Roth and Su 2022, "Gaussian Differential Privacy").

:class:`GdpAccountant` interprets events as trade-off functions and composes them in the
Gaussian-DP family:

* ``GaussianEvent(sigma)`` (no pmf slack): exactly ``1/sigma``-GDP (DRS Theorem 2.7); the
  composition of Gaussians is exact, ``mu = sqrt(sum mu_i^2)`` (DRS Corollary 3.3), summed in
  exact rational arithmetic and rounded up.
* Laplace, exponential mechanism, report-noisy-max, discrete Laplace, pure-DP (and approx-DP with
  delta = 0) and randomized-response events: through the central limit theorem (DRS Theorems
  3.4/3.5) with the functionals of their trade-off functions (Laplace: ``T(Lap(0,1),
  Lap(1/b,1))``; epsilon-DP events: the worst case ``f_{eps,0}``; randomized response: its exact
  pair). The CLT gives ``G_mu_clt`` with ``mu_clt = 2 sum kl / sqrt(sum kappa_2 - sum kl^2)``.
* ``PoissonSampledEvent(q, GaussianEvent(sigma))`` repeated T times (DP-SGD): the CLT of DRS
  Section 5 / Bu, Dong, Long and Su (2020): ``mu = q sqrt(T (e^{1/sigma^2} - 1))``; each step
  adds ``q^2 (e^{1/sigma^2} - 1)`` to ``mu^2``.

The parts are combined as ``G_mu_exact (x) G_mu_clt (x) G_mu_sgd = G_sqrt(sum of squares)``.

**Labelling.** Whenever a CLT step was used the answer is an *approximation*, not a bound, and
``is_upper_bound`` becomes False. The CLT is asymptotic and can be optimistic: for DP-SGD with
few steps or large sampling rates it is known to under-state epsilon compared with tight PLD
accounting. Use the PLD or RDP accountants when you need a guarantee.

**pmf slack** (see :mod:`dpkit.events`): an actual pmf within ``e^{+-a}`` of the ideal
one is ``(eps + 2a)``-DP when the ideal is eps-DP, so epsilon-DP-type events with slack use
``f_{eps + 2a, 0}`` in the CLT. A Gaussian with slack is not mu-GDP for any mu we could certify
(its trade-off curve is ``e^{-a} G_mu(e^a alpha)``-like, outside the family), so such events are
refused, as are Poisson-sampled Gaussians with slack, approx-DP events with delta > 0, discrete
Gaussians, and Poisson subsampling of anything but a Gaussian under add/remove neighbours.
Unknown events are refused.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpkit._numeric.gaussian import gaussian_delta_up
from dpkit._numeric.rounding import div_up, down, float_up, sqrt_up, up
from dpkit._numeric.search import SearchError, search
from dpkit._numeric.validation import (
    check_delta,
    check_integer,
    check_positive,
    check_probability,
)
from dpkit.accounting._additive import AdditiveAccountant, sum_of_parts
from dpkit.accounting._base import PrivacyAccountant
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
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
from dpkit.fdp import (
    CltResult,
    Functionals,
    GaussianTradeOff,
    approx_dp,
    berry_esseen_from_sums,
    from_distributions,
    functionals,
    laplace,
)

__all__ = [
    "ExactGdpAccountant",
    "GdpAccountant",
    "dpsgd_gdp_epsilon",
    "dpsgd_gdp_mu",
    "gdp_cost_of",
    "gdp_delta",
    "gdp_epsilon",
    "gdp_mu_for",
]


def dpsgd_gdp_mu(*, sampling_rate: float, noise_multiplier: float, steps: int) -> float:
    """CLT estimate of mu for DP-SGD: ``mu = q sqrt(T (e^{1/sigma^2} - 1))``.

    Poisson-subsampled Gaussian mechanism with sampling rate q and noise multiplier sigma,
    composed over T steps (Bu, Dong, Long and Su 2020; DRS Section 5, the CLT for subsampled
    Gaussians as ``q sqrt(T) -> constant``). This is an asymptotic *estimate*, not a bound, and
    it can be optimistic (smaller than the true privacy loss) for moderate T or large q; rounded
    up at the last step. ``expm1`` keeps precision for large sigma.
    """
    q = check_probability(sampling_rate, name="sampling_rate")
    sigma = check_positive(noise_multiplier, "noise_multiplier")
    t = check_integer(steps, name="steps", minimum=0)
    if q == 0.0 or t == 0:
        return 0.0
    inv = 1.0 / (sigma * sigma)
    if inv > 700.0:
        return math.inf
    mu_sq = q * q * t * math.expm1(inv)
    # the float product carries a few rounding errors: nudge up before the exact square root
    return sqrt_up(Fraction(math.nextafter(mu_sq * (1.0 + 4e-16), math.inf)))


def dpsgd_gdp_epsilon(
    *, sampling_rate: float, noise_multiplier: float, steps: int, delta: float
) -> float:
    """epsilon at ``delta`` of the CLT estimate ``G_mu`` of DP-SGD (an estimate, see
    :func:`dpsgd_gdp_mu`); ``G_mu``'s epsilon is rounded up."""
    d = check_delta(delta)
    mu = dpsgd_gdp_mu(sampling_rate=sampling_rate, noise_multiplier=noise_multiplier, steps=steps)
    if mu == 0.0:
        return 0.0
    if math.isinf(mu):
        return math.inf
    return GaussianTradeOff(mu).epsilon(d)


def _pure_functionals(eps: float) -> Functionals:
    return functionals(approx_dp(epsilon=eps))


class GdpAccountant(PrivacyAccountant):
    """Interprets events in mu-GDP (see the module docstring for what is exact and what is a
    CLT approximation). ``is_upper_bound`` is True until a CLT step is used."""

    def __init__(self) -> None:
        super().__init__()
        self.is_upper_bound = True
        self._mu_sq_exact = Fraction(0)  # exact Gaussian part
        self._sum_kl = 0.0  # CLT part: sums of the functionals
        self._sum_k2 = 0.0
        self._sum_kl2 = 0.0
        self._mu_sq_sgd = 0.0  # DP-SGD CLT part
        self._non_private = False
        # sums over *all* factors (Gaussians included) for the Berry-Esseen bound
        self._be = [0.0, 0.0, 0.0, 0.0]  # kl, kappa_2, kl^2, centred kappa_3

    # ------------------------------------------------------------------ interpretation
    def _walk(self, event: DpEvent, count: int, apply: bool) -> bool:
        if isinstance(event, NoOpEvent):
            return True
        if isinstance(event, NonPrivateEvent):
            if apply and count > 0:
                self._non_private = True
            return True
        if isinstance(event, ComposedEvent):
            return all(self._walk(e, count, apply) for e in event.events)
        if isinstance(event, SelfComposedEvent):
            return self._walk(event.event, count * event.count, apply)
        if isinstance(event, GaussianEvent):
            if event.pmf_slack > 0.0:
                return False
            if apply and count > 0:
                sigma = Fraction(event.noise_multiplier)
                self._mu_sq_exact += Fraction(count) / (sigma * sigma)
                self._add_be(functionals(GaussianTradeOff(1.0 / event.noise_multiplier)), count)
            return True
        if isinstance(event, PoissonSampledEvent):
            return self._walk_poisson(event, count, apply)
        fn = self._clt_functionals(event)
        if fn is None:
            return False
        if isinstance(fn, str):  # "inf": an infinite-epsilon release
            if apply and count > 0:
                self._non_private = True
            return True
        if apply and count > 0:
            self._sum_kl += count * fn.kl
            self._sum_k2 += count * fn.kappa2
            self._sum_kl2 += count * fn.kl * fn.kl
            self._add_be(fn, count)
            if fn.kl > 0.0:
                self.is_upper_bound = False
        return True

    def _add_be(self, fn: Functionals, count: int) -> None:
        self._be[0] += count * fn.kl
        self._be[1] += count * fn.kappa2
        self._be[2] += count * fn.kl * fn.kl
        self._be[3] += count * fn.kappa3_centred

    def _walk_poisson(self, event: PoissonSampledEvent, count: int, apply: bool) -> bool:
        inner = event.event
        if not isinstance(inner, GaussianEvent) or inner.pmf_slack > 0.0:
            return False
        if inner.neighbouring is not Neighbouring.ADD_REMOVE:
            return False
        q = event.sampling_rate
        if q == 1.0:
            return self._walk(inner, count, apply)
        if apply and count > 0 and q > 0.0:
            inv = 1.0 / (inner.noise_multiplier * inner.noise_multiplier)
            step = q * q * math.expm1(inv) if inv <= 700.0 else math.inf
            self._mu_sq_sgd += count * step
            self.is_upper_bound = False
        return True

    @staticmethod
    def _clt_functionals(event: DpEvent) -> Functionals | str | None:
        """Functionals of the event's trade-off function, "inf" for an infinite epsilon, or
        None when the event is not supported."""
        if isinstance(event, LaplaceEvent):
            if event.pmf_slack == 0.0:
                return functionals(laplace(mu=div_up(1.0, event.noise_multiplier)))
            eps = up(Fraction(1) / Fraction(event.noise_multiplier) + 2 * Fraction(event.pmf_slack))
            return _pure_functionals(eps)
        if isinstance(event, (ExponentialMechanismEvent, ReportNoisyMaxEvent)):
            return _pure_functionals(up(Fraction(event.epsilon) + 2 * Fraction(event.pmf_slack)))
        if isinstance(event, DiscreteLaplaceEvent):
            eps = up(
                Fraction(event.sensitivity) / Fraction(event.scale) + 2 * Fraction(event.pmf_slack)
            )
            return _pure_functionals(eps)
        if isinstance(event, PureDpEvent):
            return _pure_functionals(event.epsilon)
        if isinstance(event, ApproxDpEvent):
            return _pure_functionals(event.epsilon) if event.delta == 0.0 else None
        if isinstance(event, RandomizedResponseEvent):
            if event.p_truth == 1.0:
                return "inf"
            k = event.categories
            r = (1.0 - event.p_truth) / (k - 1)
            p = [r] * k
            q = [r] * k
            p[0] = event.p_truth
            q[1] = event.p_truth
            return functionals(from_distributions(p=p, q=q))
        return None

    # ------------------------------------------------------------------ answers
    @property
    def mu(self) -> float:
        """The composed GDP parameter (exact part rounded up; CLT parts are estimates)."""
        with self._lock:
            return self._mu()

    def _mu(self) -> float:
        if self._non_private:
            return math.inf
        exact_sq = up(self._mu_sq_exact)
        clt_sq = 0.0
        if self._sum_kl > 0.0:
            var = self._sum_k2 - self._sum_kl2
            clt_sq = math.inf if not var > 0.0 else (2.0 * self._sum_kl) ** 2 / var
        total = exact_sq + clt_sq + self._mu_sq_sgd
        if total == 0.0:
            return 0.0
        if math.isinf(total):
            return math.inf
        return sqrt_up(Fraction(math.nextafter(total * (1.0 + 4e-16), math.inf)))

    def berry_esseen(self) -> CltResult | None:
        """DRS Theorem 3.5 over everything composed: ``.estimate`` (G_mu, an approximation)
        and ``.bound`` (a guaranteed lower bound on the composed trade-off function).

        None when a DP-SGD (Poisson-subsampled Gaussian) CLT step was used (no Berry-Esseen
        bound is implemented for it) or a non-private event was composed. The functionals are
        exact closed forms for every event this accountant accepts.
        """
        with self._lock:
            if self._mu_sq_sgd > 0.0 or self._non_private:
                return None
            kl, k2, kl2, k3b = self._be
        return berry_esseen_from_sums(
            sum_kl=kl, sum_kappa2=k2, sum_kl_squared=kl2, sum_kappa3_centred=k3b
        )

    def tradeoff(self) -> GaussianTradeOff:
        """``G_mu`` of the composition (an estimate when ``is_upper_bound`` is False)."""
        mu = self.mu
        return GaussianTradeOff(1e300 if math.isinf(mu) else mu)

    def _epsilon(self, delta: float) -> float:
        mu = self._mu()
        if mu == 0.0:
            return 0.0
        if math.isinf(mu):
            return math.inf
        return GaussianTradeOff(mu).epsilon(delta)

    def _delta(self, epsilon: float) -> float:
        mu = self._mu()
        if mu == 0.0:
            return 0.0
        if math.isinf(mu):
            return 1.0
        return gaussian_delta_up(epsilon, mu)


# ====================================================================== exact GDP (filters)
#: ``(mu^2, pmf slack)`` of one occurrence; mu^2 ``math.inf`` for a non-private release.
GdpCost = tuple[Fraction | float, Fraction]


def gdp_cost_of(event: DpEvent) -> GdpCost | None:
    """``(mu^2, pmf slack)`` of ONE occurrence of ``event``, exact, or ``None`` if unsupported.

    Only events whose trade-off function is exactly Gaussian are read: ``GaussianEvent`` with
    noise multiplier s is ``1/s``-GDP (DRS Theorem 2.7), so ``mu^2 = 1/s^2`` (its pmf slack is
    returned separately); ``NoOpEvent`` costs 0, ``NonPrivateEvent`` infinity, and
    ``ComposedEvent`` / ``SelfComposedEvent`` add mu^2 (DRS Corollary 3.3).
    """
    if isinstance(event, GaussianEvent):
        s = Fraction(event.noise_multiplier)
        return 1 / (s * s), Fraction(event.pmf_slack)
    if isinstance(event, NoOpEvent):
        return Fraction(0), Fraction(0)
    if isinstance(event, NonPrivateEvent):
        return math.inf, Fraction(0)
    if isinstance(event, (ComposedEvent, SelfComposedEvent)):
        return sum_of_parts(event, gdp_cost_of, 2)  # type: ignore[no-any-return]
    return None


def gdp_delta(mu: float, slack: float, epsilon: float) -> float:
    """``e^A delta_mu(epsilon - 2A)`` rounded up: delta of a mu-GDP mechanism with pmf slack A.

    ``delta_mu`` is the exact Gaussian privacy profile (DRS Corollary 2.13; valid for every
    real argument), rounded up by :func:`~dpkit._numeric.gaussian.gaussian_delta_up`; the
    slack bound is the one of :mod:`dpkit.events`.
    """
    if math.isinf(mu):
        return 1.0
    if mu == 0.0 and slack == 0.0:
        return 0.0
    if slack == 0.0:
        return gaussian_delta_up(epsilon, mu)
    shifted = down(Fraction(epsilon) - 2 * Fraction(slack))  # rounded down: delta rounds up
    if mu == 0.0:
        base = min(1.0, float_up(max(0.0, -math.expm1(shifted))))
    else:
        base = gaussian_delta_up(shifted, mu)
    val = math.exp(slack) * base
    return min(1.0, math.nextafter(val * (1.0 + 2.0**-50), math.inf))


def gdp_epsilon(mu: float, slack: float, delta: float) -> float:
    """Smallest epsilon >= 0 (rounded up) with ``gdp_delta(mu, slack, eps) <= delta``.

    Found by :func:`dpkit._numeric.search.search` (bracket doubled from [0, 1], bisected to
    adjacent doubles): the profile holds at the returned double and fails at the one below it.
    ``inf`` when none exists below 1e7.
    """
    d = check_delta(delta)
    if gdp_delta(mu, slack, 0.0) <= d:
        return 0.0
    try:
        return search(
            lambda e: gdp_delta(mu, slack, e) <= d,
            0.0,
            1.0,
            holds="above",
            expand="up",
            limit=1e7,
            what="GDP epsilon",
        )
    except SearchError:
        return math.inf


def gdp_mu_for(epsilon: float, delta: float) -> float:
    """Largest mu (rounded down) with ``delta_mu(epsilon) <= delta`` (rounded-up profile).

    A mu-GDP mechanism with at most this mu is ``(epsilon, delta)``-DP (DRS Corollary 2.13;
    Balle and Wang 2018, Theorem 8). Validated; the bisection lives in
    :func:`~dpkit._numeric.gaussian.gaussian_mu_for`.
    """
    from dpkit._numeric.gaussian import gaussian_mu_for
    from dpkit._numeric.validation import check_epsilon

    e = check_epsilon(epsilon)
    d = check_delta(delta, allow_zero=False)
    return gaussian_mu_for(e, d)


class ExactGdpAccountant(AdditiveAccountant):
    """mu-GDP composition of exactly Gaussian events only (no central-limit approximation).

    ``mu^2`` adds up exactly (DRS Corollary 3.3; for adaptively chosen parameters see
    :mod:`dpkit.accounting.filters`); pmf slacks add up to ``A`` and are applied at
    conversion: ``get_delta(eps) = e^A delta_mu(eps - 2A)``, ``get_epsilon`` its inverse, both
    rounded up. Unlike :class:`GdpAccountant` it refuses every event that is not exactly
    Gaussian, so ``is_upper_bound`` is always True.
    """

    is_upper_bound = True
    _width = 2
    _cost = staticmethod(gdp_cost_of)

    @property
    def mu_squared_exact(self) -> Fraction | float:
        """The exact composed ``mu^2``, or ``math.inf`` after a non-private release."""
        with self._lock:
            return math.inf if self._infinite else self._totals[0]

    @property
    def mu(self) -> float:
        """The composed mu, rounded up."""
        sq = self.mu_squared_exact
        return math.inf if isinstance(sq, float) else sqrt_up(sq)

    @property
    def slack_exact(self) -> Fraction:
        """The exact total pmf slack ``A``."""
        with self._lock:
            return Fraction(self._totals[1])

    def _epsilon(self, delta: float) -> float:
        if self._infinite:
            return math.inf
        if self._totals[0] == 0 and self._totals[1] == 0:
            return 0.0
        return gdp_epsilon(sqrt_up(self._totals[0]), up(self._totals[1]), delta)

    def _delta(self, epsilon: float) -> float:
        if self._infinite:
            return 1.0
        return gdp_delta(sqrt_up(self._totals[0]), up(self._totals[1]), epsilon)
