"""The trade-off curve behind a guarantee: the exact one where dpkit has it, else a certified
lower bound.

Every curve returned here is a trade-off function ``g`` that lies *below* (never above) the
exact trade-off function ``f = T(M(D), M(D'))`` of the release for every pair of neighbours
(Dong, Roth and Su 2022, "Gaussian Differential Privacy", Definition 2.3), so ``1 - g(alpha)``
is an *upper* bound on the true-positive rate of any membership test at false-positive rate
``alpha``. Sources, from the tightest:

* one release whose curve has a closed form: Gaussian noise ``G_{1/sigma}`` (DRS Theorem 2.7),
  Laplace noise ``T(Lap(0, 1), Lap(1/b, 1))`` (DRS Section 2.3), k-ary randomized response
  (the exact curve of its two output laws, Neyman-Pearson), black-box (epsilon, delta)-DP
  ``f_{epsilon, delta}`` (DRS Proposition 2.5; the exponential mechanism and report-noisy-max
  are read as their epsilon);
* compositions of those: Gaussian releases compose exactly to ``G_mu`` with ``mu^2 = sum
  k_j / sigma_j^2`` (DRS Corollary 3.3); any other mix goes through :func:`dpkit.fdp.tensor`,
  whose privacy-loss engine returns a certified lower bound (pessimistic discretisation);
* anything else the PLD accountant interprets (Poisson subsampling, discrete Laplace and
  Gaussian): the curve certified by its upper privacy profile (DRS Proposition 2.12 through
  :func:`dpkit.fdp.from_privacy_profile`), a lower bound again;
* a budget: what the budget itself certifies for everything it accepted, valid for adaptively
  chosen releases (pure: ``f_{epsilon, 0}``; basic and rdp: ``f_{epsilon, delta}`` of the spent
  pair; gdp: ``G_mu`` of the spent mu; zcdp: the curve of the certified profile of the spent
  rho plus the approximate-delta part).

Floating-point pmf slack (see :mod:`dpkit.events`): when the actual output laws are within
``e^{+-A}`` of the ideal ones, a test of type I error ``alpha`` under the actual laws has type I
error at most ``e^A alpha`` under the ideal ones, its type II error shrinks by at most a factor
``e^{-A}`` and its power grows by at most ``e^A``, so with ``g = f(min(1, e^A alpha))`` the
maximum of ``e^{-A} g`` and ``1 - e^A (1 - g)`` (both convex and non-increasing) is below the
actual curve; :class:`SlackedTradeOff` is that function.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit import fdp
from dpkit._numeric.rounding import sqrt_up, up
from dpkit._numeric.validation import check_integer, check_nonnegative
from dpkit._numeric.zcdp import zcdp_delta
from dpkit.accounting.pld import PldAccountant
from dpkit.errors import PrivacyParameterError, UnsupportedEventError
from dpkit.events import (
    ApproxDpEvent,
    ComposedEvent,
    DpEvent,
    ExponentialMechanismEvent,
    GaussianEvent,
    LaplaceEvent,
    Neighbouring,
    NonPrivateEvent,
    NoOpEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    ReportNoisyMaxEvent,
    SelfComposedEvent,
    as_neighbouring,
)
from dpkit.fdp import TradeOffFunction

__all__ = ["Guarantee", "SlackedTradeOff", "ZeroTradeOff", "curve_of_events", "guarantee_of"]

FloatArray = np.ndarray[Any, np.dtype[np.float64]]


class SlackedTradeOff(TradeOffFunction):
    """``max(e^{-A} g, 1 - e^A (1 - g))`` with ``g = f(min(1, e^A alpha))``: below the curve of
    a mechanism whose output pmf is within ``e^{+-A}`` of one with curve ``f`` (see the module
    docstring)."""

    def __init__(self, base: TradeOffFunction, slack: float) -> None:
        self.base = base
        self.slack = check_nonnegative(slack, "slack")
        self.symmetric = base.symmetric  # the bound is the same for both orderings

    def __repr__(self) -> str:
        return f"SlackedTradeOff({self.base!r}, slack={self.slack!r})"

    def _eval(self, alpha: FloatArray) -> FloatArray:
        grow = math.exp(self.slack) * (1.0 + 2.0**-50)  # e^A rounded up
        f = self.base(np.minimum(1.0, alpha * grow))
        # Q'(S^c) >= e^-A Q(S^c) and Q'(S) <= e^A Q(S): both lower bounds, both convex
        out: FloatArray = np.asarray(np.maximum(f / grow, 1.0 - grow * (1.0 - f)), dtype=np.float64)
        return out


class ZeroTradeOff(TradeOffFunction):
    """``f = 0``: no privacy (a non-private release); every test has power 1."""

    symmetric = True

    def __repr__(self) -> str:
        return "ZeroTradeOff()"

    def _eval(self, alpha: FloatArray) -> FloatArray:
        return np.zeros_like(alpha, dtype=np.float64)

    def _delta(self, eps: float) -> float:
        return 1.0


class Guarantee:
    """A trade-off curve with what it stands for.

    ``curve``: below the exact curve (the safe side); ``exact``: whether it *is* the exact curve
    of the ideal mechanism (closed forms) rather than a certified lower bound; ``neighbouring``:
    the relation it holds under; ``source``: one plain phrase saying where it comes from;
    ``adaptive``: whether it stays valid when each release was chosen after seeing earlier ones.
    """

    def __init__(
        self,
        curve: TradeOffFunction,
        *,
        exact: bool,
        neighbouring: Neighbouring,
        source: str,
        adaptive: bool = True,
    ) -> None:
        self.curve = curve
        self.exact = exact
        self.neighbouring = neighbouring
        self.source = source
        self.adaptive = adaptive

    def __repr__(self) -> str:
        return (
            f"Guarantee({self.curve!r}, exact={self.exact}, "
            f"neighbouring={self.neighbouring.value!r}, source={self.source!r})"
        )


# ---------------------------------------------------------------------------------- events
def _flatten(event: DpEvent, count: int, out: list[tuple[DpEvent, int]]) -> None:
    if isinstance(event, ComposedEvent):
        for e in event.events:
            _flatten(e, count, out)
    elif isinstance(event, SelfComposedEvent):
        _flatten(event.event, count * event.count, out)
    elif count > 0 and not isinstance(event, NoOpEvent):
        out.append((event, count))


def _leaf_relation(event: DpEvent) -> Neighbouring:
    """The relation a leaf is stated under; black-box charges are add/remove statements."""
    rel = getattr(event, "neighbouring", None)
    return rel if isinstance(rel, Neighbouring) else Neighbouring.ADD_REMOVE


def _rr_curve(p_truth: float, k: int) -> TradeOffFunction:
    """Exact curve of k-ary randomized response: the output laws for two true values a, b are
    ``(p, r, r, ...)`` and ``(r, p, r, ...)`` with ``r = (1 - p)/(k - 1)``."""
    if p_truth == 1.0:
        return ZeroTradeOff()
    r = (1.0 - p_truth) / (k - 1)
    if k == 2:
        return fdp.from_distributions(p=[p_truth, r], q=[r, p_truth])
    rest = 1.0 - p_truth - r  # the other k - 2 outputs together: same mass under both laws
    return fdp.from_distributions(p=[p_truth, r, rest], q=[r, p_truth, rest])


def _leaf_curve(event: DpEvent) -> tuple[TradeOffFunction, bool] | None:
    """The exact curve of one ideal leaf release and whether it is exact, or None."""
    if isinstance(event, GaussianEvent):
        return fdp.gdp(1.0 / event.noise_multiplier), True
    if isinstance(event, LaplaceEvent):
        return fdp.laplace(mu=1.0 / event.noise_multiplier), True
    if isinstance(event, RandomizedResponseEvent):
        return _rr_curve(event.p_truth, event.categories), True
    if isinstance(event, PureDpEvent):
        return fdp.approx_dp(epsilon=event.epsilon), True
    if isinstance(event, ApproxDpEvent):
        return fdp.approx_dp(epsilon=event.epsilon, delta=event.delta), True
    if isinstance(event, (ExponentialMechanismEvent, ReportNoisyMaxEvent)):
        return fdp.approx_dp(epsilon=event.epsilon), False  # their epsilon-DP guarantee
    return None


def _profile_curve(leaves: Sequence[tuple[DpEvent, int]]) -> TradeOffFunction:
    """The curve certified by the PLD accountant's upper privacy profile (slack included)."""
    acct = PldAccountant()
    for event, count in leaves:
        acct.compose(event, count)
    top = acct.get_epsilon(1e-12)
    top = 50.0 if not math.isfinite(top) else max(top * 1.05, 1e-3)
    eps = np.unique(np.concatenate([np.linspace(0.0, top, 300), np.geomspace(1e-4, top, 100)]))
    deltas = acct.privacy_profile(eps)
    return fdp.from_privacy_profile(epsilons=eps, deltas=deltas)


def curve_of_events(
    events: Iterable[Any], *, neighbouring: Neighbouring | str | None = None
) -> Guarantee:
    """The composed curve of releases fixed in advance, each an event or an ``(event, count)``.

    ``neighbouring``: the relation to state the result under; by default the one the events
    share (add/remove when they mix black-box charges with add/remove noise). An add/remove
    release read under replace-one is taken twice by group privacy (DRS Theorem 2.14: a
    replacement is a removal and an addition); a replace-one release says nothing about adding
    a person, so it is refused under add/remove.
    """
    leaves: list[tuple[DpEvent, int]] = []
    for item in events:
        if isinstance(item, DpEvent):
            event, count = item, 1
        elif isinstance(item, (tuple, list)) and len(item) == 2:
            event, count = item
        else:
            raise PrivacyParameterError(
                f"not an event: {item!r}; give DpEvent objects or (event, count) pairs"
            )
        if not isinstance(event, DpEvent):
            raise PrivacyParameterError(f"not an event: {event!r}; give DpEvent objects")
        _flatten(event, check_integer(count, name="count", minimum=0), leaves)
    relations = {_leaf_relation(e) for e, _ in leaves}
    if neighbouring is None:
        target = relations.pop() if len(relations) == 1 else Neighbouring.ADD_REMOVE
    else:
        target = as_neighbouring(neighbouring)
    if target is Neighbouring.ADD_REMOVE and Neighbouring.REPLACE in relations:
        raise UnsupportedEventError(
            "A release stated under replace-one neighbours says nothing about adding or "
            "removing a person; read these releases with neighbouring='replace'."
        )
    n = sum(c for _, c in leaves)
    what = (
        "nothing released"
        if n == 0
        else (f"{n} release{'s' * (n != 1)} composed, assuming they were fixed in advance")
    )
    if not leaves:
        return Guarantee(
            fdp.identity(), exact=True, neighbouring=target, source=what, adaptive=True
        )
    if any(isinstance(e, NonPrivateEvent) for e, _ in leaves):
        return Guarantee(
            ZeroTradeOff(),
            exact=True,
            neighbouring=target,
            source=what + " (one was not private)",
            adaptive=True,
        )
    slack = up(sum((c * Fraction(getattr(e, "pmf_slack", 0.0)) for e, c in leaves), Fraction(0)))
    doubled = target is Neighbouring.REPLACE  # add/remove leaves read twice under replace-one
    curves = [_leaf_curve(e) for e, _ in leaves]
    exact = slack == 0.0
    curve: TradeOffFunction
    if all(c is not None for c in curves):
        pairs = [
            (c, k, _leaf_relation(e))
            for (e, k), c in zip(leaves, curves, strict=True)
            if c is not None
        ]
        exact = exact and all(ok for (_, ok), _, _ in pairs)
        factors = []
        for (f, _), k, rel in pairs:
            g = f.group(2) if doubled and rel is Neighbouring.ADD_REMOVE else f
            factors.append((g, k))
        if all(isinstance(g, fdp.GaussianTradeOff) for g, _ in factors):
            mu_sq = sum(
                (
                    Fraction(g.mu) ** 2 * k
                    for g, k in factors
                    if isinstance(g, fdp.GaussianTradeOff)
                ),
                Fraction(0),
            )
            curve = fdp.gdp(sqrt_up(mu_sq))
        elif len(factors) == 1 and factors[0][1] == 1:
            curve = factors[0][0]
        else:
            exact = False
            curve = (
                fdp.tensor(*[g for g, k in factors for _ in range(k)])
                if n <= 2000
                else _self_tensors(factors)
            )
        if slack > 0.0:
            curve = SlackedTradeOff(curve, slack)
    else:
        exact = False
        if doubled and any(r is Neighbouring.ADD_REMOVE for r in relations):
            raise UnsupportedEventError(
                "These releases cannot be restated under replace-one neighbours exactly; read "
                "them with neighbouring='add_remove'."
            )
        curve = _profile_curve(leaves)  # the accountant applies the slack itself
    return Guarantee(curve, exact=exact, neighbouring=target, source=what, adaptive=False)


def _self_tensors(factors: list[tuple[TradeOffFunction, int]]) -> TradeOffFunction:
    parts = [fdp.self_tensor(g, k) for g, k in factors]
    return parts[0] if len(parts) == 1 else fdp.tensor(*parts)


# ---------------------------------------------------------------------------------- budgets
def _profile_grid(top: float) -> FloatArray:
    top = max(top, 1e-3)
    out: FloatArray = np.unique(
        np.concatenate([np.linspace(0.0, top, 400), np.geomspace(1e-4, top, 100)])
    )
    return out


def _zcdp_curve(rho: float, slack: float, approx_delta: float) -> TradeOffFunction:
    """Curve of the profile ``e^A delta_rho(eps - 2A) + d`` (the zcdp budget's certificate)."""
    if rho == 0.0:
        base: TradeOffFunction = fdp.identity()
        return (
            fdp.approx_dp(epsilon=2.0 * slack, delta=approx_delta)
            if (slack or approx_delta)
            else base
        )
    top = rho + 2.0 * math.sqrt(rho * math.log(1e12)) + 2.0 * slack
    grid = _profile_grid(top)
    # only eps >= 2A: fewer (eps, delta) pairs certify a lower curve, never a higher one
    eps = np.unique(np.concatenate([[2.0 * slack], grid[grid >= 2.0 * slack]]))
    grow = math.exp(slack) * (1.0 + 2.0**-50)
    deltas = [
        min(1.0, grow * zcdp_delta(rho, max(e - 2.0 * slack, 0.0)) + approx_delta)
        for e in eps.tolist()
    ]
    # widened up by 1e-12, then capped at 1 (a delta of 1 is always true; never above it)
    widened = np.minimum(np.asarray(deltas, dtype=np.float64) * (1 + 1e-12), 1.0)
    return fdp.from_privacy_profile(epsilons=eps, deltas=widened)


def _gdp_curve(mu: float, slack: float) -> TradeOffFunction:
    if math.isinf(mu):
        return ZeroTradeOff()
    g = fdp.gdp(mu)
    return g if slack == 0.0 else SlackedTradeOff(g, slack)


def _budget_guarantee(budget: Any) -> Guarantee:
    """What a :class:`~dpkit.accounting.Budget` certifies for everything it accepted."""
    kind = budget.kind
    rel = budget.neighbouring
    eps, delta = (float(x) for x in budget.spent)
    native = budget.spent_native if kind in ("gdp", "zcdp") else eps
    if math.isinf(native):
        return Guarantee(
            ZeroTradeOff(),
            exact=True,
            neighbouring=rel,
            source="the budget's spent privacy (a release was not private)",
        )
    if kind == "gdp":
        mu = budget.spent_native
        slack = budget.spent_pmf_slack or 0.0
        return Guarantee(
            _gdp_curve(mu, slack),
            exact=slack == 0.0,
            neighbouring=rel,
            source=f"the budget's spent privacy, mu = {mu:.4g} (Gaussian DP)",
        )
    if kind == "zcdp":
        rho = budget.spent_native
        slack = budget.spent_pmf_slack or 0.0
        d = budget.spent_approx_delta or 0.0
        return Guarantee(
            _zcdp_curve(rho, slack, d),
            exact=False,
            neighbouring=rel,
            source=f"the budget's spent privacy, rho = {rho:.4g} (zCDP)"
            + (f" plus delta {d:.3g}" if d else ""),
        )
    what = f"epsilon = {eps:.4g}" + (f", delta = {delta:.3g}" if delta else "")
    return Guarantee(
        fdp.approx_dp(epsilon=eps, delta=delta),
        exact=True,
        neighbouring=rel,
        source=f"the budget's spent privacy, {what}",
        adaptive=kind != "rdp",
    )


def is_budget(obj: Any) -> bool:
    return all(hasattr(obj, a) for a in ("kind", "spent", "ledger", "neighbouring", "history"))


def is_sub_budget(obj: Any) -> bool:
    return hasattr(obj, "analyst") and hasattr(obj, "parent") and hasattr(obj, "spent")


def guarantee_of(
    obj: Any = None,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
    mu: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring | str | None = None,
) -> Guarantee:
    """The guarantee of ``obj`` (see :func:`dpkit.risk.of` for what it accepts)."""
    given = [x is not None for x in (obj, epsilon, mu, rho)]
    if sum(given) != 1:
        raise PrivacyParameterError(
            "Give exactly one of: an object (mechanism, event, budget, session, result, "
            "trade-off curve), epsilon= (with delta=), mu= or rho=."
        )
    rel = Neighbouring.ADD_REMOVE if neighbouring is None else as_neighbouring(neighbouring)
    if epsilon is None and not (isinstance(delta, (int, float)) and delta == 0):
        raise PrivacyParameterError(
            f"delta= goes with epsilon= only, got delta={delta!r} without it; give "
            "epsilon= and delta= together (a mu, rho or object states its own delta)."
        )
    if epsilon is not None:
        return Guarantee(
            fdp.approx_dp(epsilon=epsilon, delta=delta),
            exact=True,
            neighbouring=rel,
            source=f"(epsilon = {epsilon:.4g}, delta = {delta:.3g})-DP"
            if delta
            else f"epsilon = {epsilon:.4g} (pure DP)",
        )
    if mu is not None:
        return Guarantee(
            fdp.gdp(mu), exact=True, neighbouring=rel, source=f"mu = {mu:.4g} (Gaussian DP)"
        )
    if rho is not None:
        r = check_nonnegative(rho, "rho")
        return Guarantee(
            _zcdp_curve(r, 0.0, 0.0), exact=False, neighbouring=rel, source=f"rho = {r:.4g} (zCDP)"
        )
    if isinstance(obj, Guarantee):
        return obj
    if isinstance(obj, TradeOffFunction):
        return Guarantee(obj, exact=True, neighbouring=rel, source="the given trade-off curve")
    if isinstance(obj, DpEvent):
        return curve_of_events([obj], neighbouring=neighbouring)
    if is_budget(obj):
        return _budget_guarantee(obj)
    if is_sub_budget(obj):
        e, d = (float(x) for x in obj.spent)
        return Guarantee(
            fdp.approx_dp(epsilon=e, delta=d) if math.isfinite(e) else ZeroTradeOff(),
            exact=True,
            neighbouring=obj.parent.neighbouring,
            source=f"analyst {obj.analyst!r}'s spent privacy",
        )
    budget = getattr(obj, "budget", None)
    if budget is not None and is_budget(budget):  # a session
        return _budget_guarantee(budget)
    event = getattr(obj, "event", None)
    if isinstance(event, DpEvent):  # a mechanism
        return curve_of_events([event], neighbouring=neighbouring)
    attrs = getattr(obj, "attrs", None)
    info = attrs.get("dpkit") if isinstance(attrs, dict) else None
    if isinstance(info, dict) and "epsilon" in info:  # a query result (pandas)
        e, d = float(info["epsilon"]), float(info.get("delta", 0.0))
        return Guarantee(
            fdp.approx_dp(epsilon=e, delta=d),
            exact=True,
            neighbouring=rel,
            source=f"this result's charge, epsilon = {e:.4g}" + (f", delta = {d:.3g}" if d else ""),
        )
    if isinstance(obj, (list, tuple)):
        return curve_of_events(obj, neighbouring=neighbouring)
    raise PrivacyParameterError(
        f"Cannot read a privacy guarantee from {type(obj).__name__}; give a mechanism, an "
        "event, a list of events, a budget, a session, a query result or a trade-off curve."
    )
