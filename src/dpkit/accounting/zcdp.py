"""Zero-concentrated differential privacy (zCDP) accounting.

A mechanism is ``rho``-zCDP when ``D_alpha(M(D) || M(D')) <= rho * alpha`` for every Renyi order
``alpha > 1`` and every pair of neighbours (Bun and Steinke 2016, Definition 1.1). zCDP composes
by adding ``rho`` (Bun and Steinke 2016, Lemma 1.7), also when later mechanisms are chosen after
seeing earlier outputs.

Per-event rho (one occurrence; all kept as exact fractions of the doubles involved):

* ``GaussianEvent`` (noise multiplier ``s`` = sigma / L2 sensitivity): ``1 / (2 s^2)``
  (Bun and Steinke 2016, Proposition 1.6: ``N(0, sigma^2)`` on a query of sensitivity Delta is
  ``Delta^2 / (2 sigma^2)``-zCDP);
* ``DiscreteGaussianEvent``: ``Delta^2 / (2 sigma^2)`` (Canonne, Kamath and Steinke 2020,
  Proposition 5: the discrete Gaussian has the same Renyi divergence bound
  ``alpha Delta^2 / (2 sigma^2)`` as the continuous one, i.e. it is ``Delta^2/(2 sigma^2)``-zCDP);
* ``ZCdpEvent``: its ``rho``;
* ``GaussianSparseVectorEvent``: its ``zcdp_rho``, ``c (a + 2 sqrt(a ln k))`` (from the Renyi
  curve of Zhu and Wang 2020, Theorem 8, bounded by a line through the origin; see the event);
* ``ExponentialMechanismEvent`` and ``ReportNoisyMaxEvent`` with Gumbel noise (the same
  mechanism): ``epsilon^2 / 8``, with the pmf slack applied at conversion like the Gaussian's.
  The exponential mechanism at epsilon is epsilon-bounded-range (Durfee and Rogers 2019; Dong,
  Durfee and Rogers 2020: on every pair of neighbours the privacy loss lies in an interval
  ``[t, t + epsilon]``; with monotone utilities and the factor ``epsilon / Delta`` every score
  moves the same way, so the width is epsilon too), and an eta-bounded-range mechanism is
  ``eta^2 / 8``-zCDP (Cesar and Rogers 2021, "Bounding, concentrating, and truncating: unifying
  privacy loss composition for data analytics", ALT: Hoeffding's lemma bounds the moment
  generating function of the bounded privacy loss, and its mean, the KL divergence, is at most
  ``eta^2 / 8`` by the same lemma at ``lambda = -1``). A quarter of the ``epsilon^2 / 2`` of a
  generic pure event: k peeled or one-shot Gumbel top-k selections compose to
  ``k epsilon^2 / 8``;
* every other pure epsilon-DP event (Laplace, discrete Laplace, exponential mechanism, report noisy
  max, randomized response, ``PureDpEvent``, ``ApproxDpEvent`` with delta 0, and
  Poisson-subsampled pure events): ``epsilon^2 / 2`` with the epsilon of
  :func:`~dpkit.accounting.pure.pure_epsilon_of` (Bun and Steinke 2016, Proposition 1.4);
* ``NoOpEvent``: 0; ``NonPrivateEvent``: infinity; ``ComposedEvent`` / ``SelfComposedEvent``: sums.

Everything else (Poisson-subsampled Gaussians, unknown events) is refused.

Approximate zCDP (Bun and Steinke 2016, Definition 8.1). A release is ``delta``-approximately
``rho``-zCDP when, for every pair of neighbours ``x, x'``, its output laws split as
``M(x) = (1 - delta) P + delta Q`` and ``M(x') = (1 - delta) P' + delta Q'`` with
``D_alpha(P || P') <= alpha rho`` and ``D_alpha(P' || P) <= alpha rho`` for all ``alpha > 1``.
(Bun and Steinke phrase it with events ``E, E'`` of probability at least ``1 - delta``; padding
the larger of ``P[E]`` down to ``1 - delta`` turns their form into this one.)
:func:`approx_zcdp_cost_of` reads, besides every event above (``delta = 0``):

* ``ApproxZCdpEvent(rho, delta, pmf_slack)``: its fields;
* ``ApproxDpEvent(epsilon, delta)`` with delta > 0: ``(epsilon^2 / 2, delta)``. Proof: the
  trade-off curve of an (epsilon, delta)-DP pair dominates that of the four-point pair
  ``A = (delta, (1-delta) e^eps/(1+e^eps), (1-delta)/(1+e^eps), 0)``,
  ``B = (0, (1-delta)/(1+e^eps), (1-delta) e^eps/(1+e^eps), delta)`` (Dong, Roth and Su 2022,
  Proposition 2.5 / Kairouz, Oh and Viswanath 2017), so by Blackwell's theorem (Dong, Roth and
  Su 2022, Theorem 2.10) the pair is a post-processing ``T`` of ``(A, B)``. ``A`` and ``B`` are
  ``(1 - delta)`` times randomized response (two points with ratio ``e^eps``) plus ``delta``
  elsewhere; applying ``T`` keeps the weights, and Renyi divergence only shrinks under ``T``,
  so the ``P`` parts satisfy ``D_alpha <= alpha eps^2 / 2`` (Bun and Steinke 2016, Proposition
  1.4 applied to the randomized-response pair). Bun and Steinke state the same fact in their
  introduction (Proposition 1.13, "(eps, delta)-DP implies delta-approximate eps^2/2-zCDP").

Composition adds rho and delta (Bun and Steinke 2016, Section 8): the ``P`` parts compose as
zCDP and the product weight ``prod (1 - delta_i) >= 1 - sum delta_i``; the slack ``A`` applies
to the ``P`` parts as for pure zCDP. Conversion: for any set
``S``, ``M(x)(S) <= (1 - delta) P(S) + delta <= (1 - delta)(e^eps P'(S) + delta_rho(eps)) +
delta <= e^eps M(x')(S) + delta_rho(eps) + delta`` because ``(1 - delta) P' <= M(x')``. So the
accountant reports ``delta(eps) = e^A delta_rho(eps - 2A) + delta_total`` and
``eps(delta) = 2A + eps_rho((delta - delta_total) e^-A)`` (infinite when ``delta <=
delta_total``), both rounded up.

pmf slack. The Gaussian and discrete Gaussian samplers state a slack ``a`` (their pmf is within
``exp(+-a)`` of the ideal one, see :mod:`dpkit.events`). It is *not* folded into rho
(that would cost far more); the slacks are summed to ``A`` and applied at conversion,
``delta_actual(eps) <= e^A delta_rho(eps - 2A)``. Pure events carry their slack inside their
epsilon already (``+ 2a``), so they add nothing to ``A``.

Conversion to (epsilon, delta) (each Renyi order alpha gives a valid bound, so any alpha found by
the numerical search is safe; the result is rounded up):

* Canonne, Kamath and Steinke 2020, Proposition 12 applied to the Renyi curve ``alpha rho``
  (their Corollary 13):
  ``delta(eps) = inf_{alpha > 1} exp((alpha - 1)(alpha rho - eps)) / (alpha - 1)
  * (1 - 1/alpha)^alpha``, and in the other direction
  ``eps(delta) = inf_{alpha > 1} alpha rho + ln(1 - 1/alpha)
  - (ln delta + ln alpha) / (alpha - 1)``;
* Bun and Steinke 2016, Proposition 1.3: ``eps = rho + 2 sqrt(rho ln(1/delta))``, equivalently
  ``delta = exp(-(eps - rho)^2 / (4 rho))`` for ``eps >= rho``.

Both are valid for the same rho; the smaller answer is returned. :func:`zcdp_rho_for` calibrates
in the other direction: the largest rho (rounded down) whose certified delta at epsilon is at
most delta.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction

from dpkit._numeric.rounding import down, up
from dpkit._numeric.search import search
from dpkit._numeric.validation import check_delta, check_epsilon
from dpkit._numeric.zcdp import slack_delta, slack_epsilon, zcdp_delta, zcdp_epsilon
from dpkit.accounting._additive import AdditiveAccountant, sum_of_parts
from dpkit.accounting.pure import pure_epsilon_of
from dpkit.events import (
    ApproxDpEvent,
    ApproxZCdpEvent,
    ComposedEvent,
    DiscreteGaussianEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    GaussianSparseVectorEvent,
    NonPrivateEvent,
    NoOpEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
    ZCdpEvent,
)

__all__ = [
    "ZCdpAccountant",
    "approx_delta",
    "approx_epsilon",
    "approx_zcdp_cost_of",
    "is_bounded_range",
    "zcdp_cost_of",
    "zcdp_delta",
    "zcdp_epsilon",
    "zcdp_rho_for",
]

#: rho and total pmf slack of one occurrence; rho ``math.inf`` for a non-private release.
ZCdpCost = tuple[Fraction | float, Fraction]
#: rho, total pmf slack and delta of one occurrence (approximate zCDP).
ApproxZCdpCost = tuple[Fraction | float, Fraction, Fraction]


def zcdp_rho_for(epsilon: float, delta: float) -> float:
    """Largest rho (rounded down) whose certified delta at ``epsilon`` is at most ``delta``.

    Every ``rho``-zCDP mechanism with rho at most the returned value is then
    ``(epsilon, delta)``-DP. :func:`dpkit._numeric.search.search` (bracket doubled from
    [0, 1] up to 2**60, bisected to adjacent doubles) keeps the end of the bracket that
    satisfies ``zcdp_delta(rho, epsilon) <= delta`` (the rounded-up certificate), so the answer
    errs on the safe (smaller) side. Returns 0.0 when no positive rho qualifies. The search
    runs once per validated ``(epsilon, delta)`` pair and is remembered (a pure function of two
    doubles; queries of one session usually share them).
    """
    return _rho_for(check_epsilon(epsilon), check_delta(delta, allow_zero=False))


@functools.lru_cache(maxsize=256)
def _rho_for(e: float, d: float) -> float:
    return search(
        lambda rho: zcdp_delta(rho, e) <= d,
        0.0,
        1.0,
        holds="below",
        expand="up",
        limit=2.0**60,
        what="zCDP calibration",
    )


def is_bounded_range(event: DpEvent) -> bool:
    """Whether ``event`` is an exponential mechanism (epsilon-bounded-range, module docstring):
    an ``ExponentialMechanismEvent`` or a ``ReportNoisyMaxEvent`` with Gumbel noise."""
    if isinstance(event, ExponentialMechanismEvent):
        return True
    return isinstance(event, ReportNoisyMaxEvent) and event.noise == "gumbel"


def zcdp_cost_of(event: DpEvent) -> ZCdpCost | None:
    """``(rho, pmf slack)`` of ONE occurrence of ``event`` (exact), or ``None`` if unsupported.

    See the module docstring for the table. rho is ``math.inf`` for a non-private release.
    """
    if isinstance(event, ZCdpEvent):
        return Fraction(event.rho), Fraction(0)
    if isinstance(event, GaussianSparseVectorEvent):
        return event.zcdp_rho, Fraction(0)
    if isinstance(event, (ExponentialMechanismEvent, ReportNoisyMaxEvent)) and is_bounded_range(
        event
    ):
        e = Fraction(event.epsilon)
        return e * e / 8, Fraction(event.pmf_slack)
    if isinstance(event, GaussianEvent):
        s = Fraction(event.noise_multiplier)
        return 1 / (2 * s * s), Fraction(event.pmf_slack)
    if isinstance(event, DiscreteGaussianEvent):
        ratio = Fraction(event.sensitivity) / Fraction(event.sigma)
        return ratio * ratio / 2, Fraction(event.pmf_slack)
    if isinstance(event, NoOpEvent):
        return Fraction(0), Fraction(0)
    if isinstance(event, NonPrivateEvent):
        return math.inf, Fraction(0)
    if isinstance(event, (ComposedEvent, SelfComposedEvent)):
        return sum_of_parts(event, zcdp_cost_of, 2)  # type: ignore[no-any-return]
    if isinstance(event, ApproxDpEvent) and event.delta > 0.0:
        return None
    eps = pure_epsilon_of(event)  # includes 2 * pmf_slack
    if eps is None:
        return None
    if isinstance(eps, float):
        return math.inf, Fraction(0)
    return eps * eps / 2, Fraction(0)


def approx_zcdp_cost_of(event: DpEvent) -> ApproxZCdpCost | None:
    """``(rho, pmf slack, delta)`` of ONE occurrence of ``event`` (exact), or ``None``.

    Approximate zCDP (module docstring): every event :func:`zcdp_cost_of` reads, with delta 0;
    ``ApproxZCdpEvent`` by its fields; ``ApproxDpEvent(eps, delta)`` as ``(eps^2 / 2, 0,
    delta)``; compositions add all three. rho is ``math.inf`` for a non-private release.
    """
    if isinstance(event, ApproxZCdpEvent):
        return Fraction(event.rho), Fraction(event.pmf_slack), Fraction(event.delta)
    if isinstance(event, ApproxDpEvent):
        e = Fraction(event.epsilon)
        return e * e / 2, Fraction(0), Fraction(event.delta)
    if isinstance(event, (ComposedEvent, SelfComposedEvent)):
        return sum_of_parts(event, approx_zcdp_cost_of, 3)  # type: ignore[no-any-return]
    pure = zcdp_cost_of(event)
    if pure is None:
        return None
    return pure[0], pure[1], Fraction(0)


def approx_epsilon(
    rho: Fraction | float, slack: Fraction, delta_spent: Fraction, delta: float
) -> float:
    """``2A + eps_rho((delta - delta_spent) e^-A)``, rounded up; inf if ``delta <= delta_spent``.

    The remaining delta is rounded down before the conversion (module docstring).
    """
    if delta_spent == 0:
        return slack_epsilon(rho, slack, delta)
    rest = Fraction(delta) - delta_spent
    if not rest > 0:
        return math.inf
    return slack_epsilon(rho, slack, down(rest))


def approx_delta(
    rho: Fraction | float, slack: Fraction, delta_spent: Fraction, epsilon: float
) -> float:
    """``e^A delta_rho(eps - 2A) + delta_spent``, rounded up and capped at 1."""
    base = slack_delta(rho, slack, epsilon)
    if delta_spent == 0:
        return base
    return min(up(Fraction(base) + delta_spent), 1.0)


class ZCdpAccountant(AdditiveAccountant):
    """Composition of (approximate) zCDP events: rho and delta add up, exactly.

    ``rho`` is the exact sum of the per-event rhos (Bun and Steinke 2016, Lemma 1.7), ``slack``
    the exact sum of pmf slacks and ``delta_exact`` the exact sum of the approximate-zCDP
    deltas (Bun and Steinke 2016, Section 8; see the module docstring). ``get_epsilon(delta)``
    is ``2A + eps_rho((delta - delta_total) e^-A)`` and ``get_delta(epsilon)`` is
    ``e^A delta_rho(epsilon - 2A) + delta_total``, both rounded up, with the conversions
    :func:`zcdp_epsilon` / :func:`zcdp_delta`.
    """

    is_upper_bound = True
    _width = 3
    _cost = staticmethod(approx_zcdp_cost_of)

    @property
    def rho_exact(self) -> Fraction | float:
        """The exact composed rho (a Fraction), or ``math.inf`` after a non-private release."""
        with self._lock:
            return math.inf if self._infinite else self._totals[0]

    @property
    def rho(self) -> float:
        """The composed rho, rounded up."""
        return up(self.rho_exact)

    @property
    def slack_exact(self) -> Fraction:
        """The exact total pmf slack ``A`` of the Gaussian-type events composed."""
        with self._lock:
            return Fraction(self._totals[1])

    @property
    def delta_exact(self) -> Fraction:
        """The exact total delta of the approximate-zCDP events composed (0 for pure zCDP)."""
        with self._lock:
            return Fraction(self._totals[2])

    def _epsilon(self, delta: float) -> float:
        if self._infinite:
            return math.inf
        return approx_epsilon(self._totals[0], self._totals[1], self._totals[2], delta)

    def _delta(self, epsilon: float) -> float:
        if self._infinite:
            return 1.0
        return approx_delta(self._totals[0], self._totals[1], self._totals[2], epsilon)
