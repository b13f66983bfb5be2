"""Restating an event under a budget's neighbouring relation (add/remove or replace-one).

A guarantee holds for one neighbouring relation; guarantees stated under different relations do
not add up. A :class:`~dpkit.accounting.budget.Budget` therefore restates every event under its
own relation (:func:`restate`) before its interpreter reads it:

* **add/remove budget.** An event stated under replace-one is refused
  (:class:`~dpkit.errors.UnsupportedEventError`). No sound conversion exists in general: a
  replace-one guarantee compares datasets *of the same size* and says nothing about adding a
  record. Randomized response applied to every record, for instance, is ``epsilon``-DP under
  replace-one but reveals the number of records exactly, so it is not DP at all under
  add/remove.
* **replace-one budget.** A replacement is a removal followed by an addition, so two add/remove
  neighbouring steps separate replace-one neighbours; an add/remove event is charged by group
  privacy for groups of two:

  - pure ``epsilon`` -> ``2 epsilon`` (Dwork and Roth 2014, Theorem 2.2);
  - ``(epsilon, delta)`` -> ``(2 epsilon, (1 + e^epsilon) delta)``: chaining the two steps,
    ``P[M(x) in S] <= e^eps (e^eps P[M(x'') in S] + delta) + delta`` (Dwork and Roth 2014,
    Theorem 2.2 and the remark after it, which states the weaker ``k e^{(k-1) eps} delta`` for
    groups of size k; Vadhan 2017, "The complexity of differential privacy", Section 2);
  - ``rho``-zCDP -> ``4 rho`` (Bun and Steinke 2016, Proposition 1.9: ``k^2 rho`` for groups of
    size k);
  - ``mu``-GDP -> ``2 mu`` (Dong, Roth and Su 2022, "Gaussian differential privacy",
    Section 2.4, group privacy: ``k mu`` for groups of size k).

  Noise events are restated *exactly* instead: two add/remove steps move a query of add/remove
  sensitivity ``Delta`` by at most ``2 Delta``, so Laplace / Gaussian noise of multiplier ``m``
  is noise of multiplier ``m / 2`` for the replace-one sensitivity (for the Gaussian this is
  ``mu -> 2 mu`` and ``rho -> 4 rho``), the discrete mechanisms get sensitivity ``2 Delta``, and
  the exponential mechanism and report-noisy-max get ``2 epsilon`` (scores move by at most
  twice as much; bounded range chains the same way). The floating-point pmf slack ``a`` is a
  bound between the actual and the ideal mechanism *on each input*, independent of the relation,
  so it carries over unchanged. ``delta``-approximate zCDP has no group-privacy statement of
  this form and Poisson subsampling is analysed for add/remove only: both are refused under a
  replace-one budget.

Black-box events (``PureDpEvent``, ``ApproxDpEvent``, ``ZCdpEvent``, ``ApproxZCdpEvent``, and
``Budget.charge(epsilon=..., delta=...)``) carry no relation field; dpkit's mechanisms and
analytics sessions emit them for add/remove guarantees, so they are read as add/remove.
Composite events are restated leaf by leaf.
"""

from __future__ import annotations

import math
from fractions import Fraction

from dpkit._numeric.rounding import div_down, up
from dpkit.errors import UnsupportedEventError
from dpkit.events import (
    ApproxDpEvent,
    ApproxZCdpEvent,
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
    ZCdpEvent,
)

__all__ = ["group_of_two_approx", "group_of_two_epsilon", "restate"]

_ADD_REMOVE = Neighbouring.ADD_REMOVE
_REPLACE = Neighbouring.REPLACE


def group_of_two_epsilon(epsilon: float) -> float:
    """``2 epsilon`` (exact for doubles; ``inf`` on overflow): pure DP for groups of two."""
    return up(2 * Fraction(epsilon)) if math.isfinite(epsilon) else math.inf


def group_of_two_approx(epsilon: float, delta: float) -> tuple[float, float]:
    """``(2 epsilon, (1 + e^epsilon) delta)``, both rounded up, delta capped at 1.

    (epsilon, delta)-DP for groups of two (see the module docstring). The relative ``2**-50``
    covers the rounding of ``exp`` and of the two floating-point operations.
    """
    two_e = group_of_two_epsilon(epsilon)
    if delta == 0.0:
        return two_e, 0.0
    if not epsilon <= 700.0:
        return two_e, 1.0
    grown = math.nextafter((1.0 + math.exp(epsilon)) * delta * (1.0 + 2.0**-50), math.inf)
    return two_e, min(grown, 1.0)


def _refuse_replace(event: DpEvent) -> UnsupportedEventError:
    return UnsupportedEventError(
        f"{type(event).__name__} states its guarantee under replace-one neighbours, but this "
        "budget counts add/remove neighbours: a replace-one guarantee compares datasets of the "
        "same size and says nothing about adding or removing a record, so it cannot be "
        "converted; use Budget(..., neighbouring='replace') for replace-one releases"
    )


def _to_add_remove(event: DpEvent) -> DpEvent:
    if isinstance(event, ComposedEvent):
        return ComposedEvent(events=tuple(_to_add_remove(e) for e in event.events))
    if isinstance(event, SelfComposedEvent):
        return SelfComposedEvent(event=_to_add_remove(event.event), count=event.count)
    if isinstance(event, PoissonSampledEvent):
        return PoissonSampledEvent(
            sampling_rate=event.sampling_rate, event=_to_add_remove(event.event)
        )
    if isinstance(event, SampledWithoutReplacementEvent):
        raise _refuse_replace(event)
    relation = getattr(event, "neighbouring", _ADD_REMOVE)
    if relation is not _ADD_REMOVE:
        raise _refuse_replace(event)
    return event


def _to_replace(event: DpEvent) -> DpEvent:
    if isinstance(event, ComposedEvent):
        return ComposedEvent(events=tuple(_to_replace(e) for e in event.events))
    if isinstance(event, SelfComposedEvent):
        return SelfComposedEvent(event=_to_replace(event.event), count=event.count)
    if isinstance(event, (NoOpEvent, NonPrivateEvent)):
        return event
    if isinstance(event, SampledWithoutReplacementEvent):  # replace-one by construction
        return event
    if getattr(event, "neighbouring", None) is _REPLACE:
        return event
    if isinstance(event, (LaplaceEvent, GaussianEvent)):
        half = div_down(event.noise_multiplier, 2.0)
        if not half > 0.0:
            return NonPrivateEvent()
        return type(event)(noise_multiplier=half, neighbouring=_REPLACE, pmf_slack=event.pmf_slack)
    if isinstance(event, DiscreteLaplaceEvent):
        return DiscreteLaplaceEvent(
            scale=event.scale,
            sensitivity=2 * event.sensitivity,
            neighbouring=_REPLACE,
            pmf_slack=event.pmf_slack,
        )
    if isinstance(event, DiscreteGaussianEvent):
        return DiscreteGaussianEvent(
            sigma=event.sigma,
            sensitivity=2 * event.sensitivity,
            neighbouring=_REPLACE,
            pmf_slack=event.pmf_slack,
        )
    if isinstance(event, ExponentialMechanismEvent):
        eps = group_of_two_epsilon(event.epsilon)
        if math.isinf(eps):
            return NonPrivateEvent()
        return ExponentialMechanismEvent(
            epsilon=eps, neighbouring=_REPLACE, pmf_slack=event.pmf_slack
        )
    if isinstance(event, ReportNoisyMaxEvent):
        eps = group_of_two_epsilon(event.epsilon)
        if math.isinf(eps):
            return NonPrivateEvent()
        return ReportNoisyMaxEvent(
            epsilon=eps, noise=event.noise, neighbouring=_REPLACE, pmf_slack=event.pmf_slack
        )
    if isinstance(event, RandomizedResponseEvent):  # stated under add/remove: group privacy
        from dpkit.accounting.pure import pure_epsilon_of  # its epsilon as the budgets read it

        cost = pure_epsilon_of(event)
        eps = math.inf if cost is None or isinstance(cost, float) else up(2 * cost)
        return NonPrivateEvent() if math.isinf(eps) else PureDpEvent(epsilon=eps)
    if isinstance(event, PureDpEvent):
        eps = group_of_two_epsilon(event.epsilon)
        return NonPrivateEvent() if math.isinf(eps) else PureDpEvent(epsilon=eps)
    if isinstance(event, ApproxDpEvent):
        eps, delta = group_of_two_approx(event.epsilon, event.delta)
        if math.isinf(eps) or not delta < 1.0:
            return NonPrivateEvent()
        return ApproxDpEvent(epsilon=eps, delta=delta)
    if isinstance(event, ZCdpEvent):
        rho = up(4 * Fraction(event.rho)) if math.isfinite(event.rho) else math.inf
        return NonPrivateEvent() if math.isinf(rho) else ZCdpEvent(rho=rho)
    if isinstance(event, ApproxZCdpEvent):
        raise UnsupportedEventError(
            "an approximately zCDP event (stated under add/remove neighbours) cannot be charged "
            "to a replace-one budget: delta-approximate zCDP has no group-privacy bound of the "
            "form used here; use an add/remove budget"
        )
    if isinstance(event, PoissonSampledEvent):
        raise UnsupportedEventError(
            "a Poisson-subsampled event is analysed under add/remove neighbours only and cannot "
            "be charged to a replace-one budget; use an add/remove budget"
        )
    raise UnsupportedEventError(
        f"cannot restate {type(event).__name__} under replace-one neighbours"
    )


def restate(event: DpEvent, relation: Neighbouring) -> DpEvent:
    """``event`` as a guarantee under ``relation`` (see the module docstring).

    Raises :class:`~dpkit.errors.UnsupportedEventError` when no sound restatement exists.
    Every number is rounded towards more privacy spent (epsilon, delta, rho up; noise
    multiplier down).
    """
    if relation is _REPLACE:
        return _to_replace(event)
    return _to_add_remove(event)
