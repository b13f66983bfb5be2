"""What a guarantee lets an attacker do: membership inference, posterior belief, reconstruction
and groups, each an upper bound read off the trade-off curve.

Notation: ``f`` is the guarantee's trade-off curve (``f = T(P, Q)``, the smallest type II error
at type I error ``alpha``; below the exact curve, see :mod:`dpkit.risk._curve`), ``P`` the law
of the release without the person, ``Q`` with (or, under replace-one neighbours, with the two
values of their record). Every figure is an **upper** bound on what any attacker achieves,
rounded **up**:

* membership inference (Dong, Roth and Su 2022, Section 2; Kairouz, Oh and Viswanath 2015):
  at false-positive rate ``alpha`` a test flags at most ``TPR(alpha) = 1 - f(alpha)`` of the
  people who are in the data; the advantage ``max TPR - FPR = sup_a 1 - a - f(a) =
  delta_f(0)`` (DRS Proposition 2.12 at epsilon 0), and the best guess of a coin-flip prior is
  right with probability at most ``(1 + advantage)/2``;
* posterior belief: after seeing an output ``y`` a Bayesian attacker's belief in "in the data"
  moves from prior ``pi`` to ``pi e^L / (pi e^L + 1 - pi)`` with ``L = log dQ/dP(y)``. The
  loss ``L`` exceeds ``eps`` with probability (under ``Q``; under ``P`` it is smaller) at most
  ``min_{eps' < eps} delta(eps') / (1 - e^{eps' - eps})``, because on ``S = {L > eps}``,
  ``delta(eps') >= Q(S) - e^{eps'} P(S) >= Q(S) (1 - e^{eps' - eps})``; ``delta(eps) = 0``
  means ``L <= eps`` always (pure DP: the bound holds with probability one). The bound returned
  is at the smallest ``eps`` on a grid whose tail bound is at most the failure probability;
* reconstruction (Hayes, Mahloujifar and Balle 2023, "Bounding training data reconstruction in
  DP-SGD", Theorem 2 with the blow-up function of a dominating pair): an informed attacker who
  knows every other record and whose guess would be right with probability ``kappa`` without
  the release is right with probability at most ``sup {Q(E) : P(E) <= kappa} = 1 - f(kappa)``;
* groups of ``k`` people: ``f`` becomes ``1 - (1 - f)^{o k}`` (DRS Theorem 2.14; exact
  ``G_{k mu}`` for Gaussian DP).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from dpkit import fdp
from dpkit._numeric.validation import check_integer, check_probability
from dpkit.errors import PrivacyParameterError
from dpkit.events import Neighbouring
from dpkit.fdp import TradeOffFunction
from dpkit.risk._curve import Guarantee, ZeroTradeOff, guarantee_of

__all__ = ["LOW_FPRS", "Posterior", "Risk", "of"]

#: The false-positive rates at which attack rates are reported (Carlini et al. 2022 argue that
#: attacks matter at low false-positive rates).
LOW_FPRS: tuple[float, ...] = (0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6)

# An absolute allowance added to every rate: the curves are evaluated in double precision.
_RATE_SLACK = 1e-12


def _closed(curve: TradeOffFunction) -> bool:
    return isinstance(
        curve,
        (fdp.GaussianTradeOff, fdp.LaplaceTradeOff, fdp.PiecewiseLinearTradeOff, ZeroTradeOff),
    )


def _computable(curve: TradeOffFunction) -> TradeOffFunction:
    """``curve`` itself when its profile has a closed form, else its piecewise-linear lower
    bound (built once: still below the exact curve, so every bound read from it holds)."""
    return curve if _closed(curve) else curve.lower_piecewise_linear()


def _profile(curve: TradeOffFunction) -> Callable[[float], float]:
    """``eps -> max(delta_f(eps), delta_{f^-1}(eps))``, rounded up (both orderings); ``curve``
    from :func:`_computable`."""
    other = curve if curve.symmetric else curve.inverse()
    if other is curve:
        return curve.delta
    return lambda e: max(curve.delta(e), other.delta(e))


def round_up(x: float, digits: int = 2) -> float:
    """``x`` rounded up to ``digits`` significant digits (for showing a bound to people)."""
    if x <= 0.0 or not math.isfinite(x):
        return x
    scale = 10.0 ** (digits - 1 - math.floor(math.log10(x)))
    return min(math.ceil(x * scale * (1 - 1e-15)) / scale, 1.0 if x <= 1.0 else math.inf)


def percent(x: float) -> str:
    """A probability as a percentage rounded up to two significant digits (``"0.32%"``); above
    99% the distance to certainty is rounded down (``"99.92%"``, never a rounded-up 100%), below
    ``1e-12`` it reads ``"under 0.0000000001%"``. The number shown is never below ``x``."""
    if x >= 1.0:
        return "100%"
    if x <= 0.0:
        return "0%"
    if x < 1e-12:  # round_up would overflow on subnormals; an upper bound in words
        return "under 0.0000000001%"
    if x > 0.99:  # show the distance to certainty: 99.92%, never a rounded-up 100%
        gap = 100 - Fraction(x) * 100  # exact: a float gap could round the shown rate down
        digits = max(0, -math.floor(math.log10(gap)))
        down = Fraction(math.floor(gap * 10**digits), 10**digits)  # gap rounded down
        return f"{Decimal(100) - Decimal(down.numerator) / Decimal(down.denominator):.{digits}f}%"
    return f"{round_up(x * 100.0):.{max(0, 1 - math.floor(math.log10(x * 100.0)))}f}%"


def percent_down(x: float) -> str:
    """A probability as a percentage rounded *down* to two significant digits, for a condition
    (the prior a bound was computed from): the sentence then claims the bound for a smaller
    prior, which it also covers (up to ``1e-12`` relative). Below ``1e-12`` it reads ``"0%"``."""
    if x >= 1.0:
        return "100%"
    if x < 1e-12:
        return "0%"
    y = x * 100.0
    scale = 10.0 ** (1 - math.floor(math.log10(y)))
    # up to 1e-12 relative above x may show as x itself (0.3 is stored below 0.3): the bound
    # beside it moves by less, well inside its own rounding up to two digits
    shown = math.floor(y * scale * (1 + 1e-12)) / scale
    return f"{shown:.{max(0, 1 - math.floor(math.log10(y)))}f}%"


def odds(x: float) -> str:
    """A small rate in words, ``1 in N`` with ``N`` rounded up (``1/N <= x``: the words never
    claim more than ``x``); ``"0"`` for 0.

    In the statements the rate is a condition (an attacker who accuses at most ``1/N``), and
    the bound beside it was computed at ``x >= 1/N``, so the sentence stays true."""
    if x <= 0.0:
        return "0"
    return f"1 in {math.ceil(1.0 / x * (1.0 - 1e-12)):,}"


@dataclasses.dataclass(frozen=True)
class Posterior:
    """A bound on a Bayesian attacker's belief: from ``prior`` to at most ``bound``, except
    with probability at most ``failure`` over the release's randomness (0: always)."""

    prior: float
    bound: float
    failure: float
    epsilon: float


class Risk:
    """Risk statements from one guarantee (build with :func:`dpkit.risk.of`).

    ``curve`` lies below the exact trade-off curve, so every rate here is an upper bound; the
    attribute ``exact`` says whether it is the exact curve of the ideal mechanism.
    """

    def __init__(self, guarantee: Guarantee, *, group_size: int = 1) -> None:
        self.guarantee = guarantee
        self.group_size = group_size
        self._quantiles: dict[float, float] = {}
        self._fast: TradeOffFunction | None = None

    def _computable(self) -> TradeOffFunction:
        if self._fast is None:
            self._fast = _computable(self.curve)
        return self._fast

    # ----------------------------------------------------------------- basics
    @property
    def curve(self) -> TradeOffFunction:
        """The trade-off curve (type II error against type I error), below the exact one."""
        return self.guarantee.curve

    @property
    def exact(self) -> bool:
        """Whether :attr:`curve` is the exact curve of the ideal mechanism."""
        return self.guarantee.exact

    @property
    def neighbouring(self) -> Neighbouring:
        """The neighbouring relation the guarantee holds under."""
        return self.guarantee.neighbouring

    @property
    def source(self) -> str:
        """Where the guarantee comes from, in words."""
        return self.guarantee.source

    def __repr__(self) -> str:
        return f"Risk({self.guarantee!r}, group_size={self.group_size})"

    # ----------------------------------------------------------------- membership
    def tpr(self, fpr: ArrayLike) -> np.ndarray[Any, np.dtype[np.float64]]:
        """The largest true-positive rate of any membership test at each false-positive rate:
        ``1 - f(fpr)`` plus ``1e-12``, capped at 1 (an upper bound)."""
        try:
            a = np.asarray(fpr, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise PrivacyParameterError(
                f"fpr must be a number or an array of numbers in [0, 1], got {fpr!r}"
            ) from exc
        out = np.minimum(1.0, np.maximum(1.0 - self.curve(a) + _RATE_SLACK, a))
        return np.asarray(out, dtype=np.float64)

    def max_tpr(self, fpr: float) -> float:
        """:meth:`tpr` at one false-positive rate."""
        check_probability(fpr, name="fpr")
        return float(self.tpr(np.asarray([fpr]))[0])

    def advantage(self) -> float:
        """``max_a TPR(a) - a = delta_f(0)`` (rounded up): the attacker's largest edge over
        guessing; a coin-flip prior is guessed right with probability ``(1 + it) / 2``."""
        return min(1.0, _profile(self._computable())(0.0) + _RATE_SLACK)

    def low_fpr_rates(self, fprs: Sequence[float] = LOW_FPRS) -> dict[float, float]:
        """``{fpr: max TPR}`` at the false-positive rates that matter in practice."""
        return {float(a): self.max_tpr(float(a)) for a in fprs}

    # ----------------------------------------------------------------- posterior
    def floor(self) -> float:
        """``1 - f(0)``: the chance of a release that gives a person away outright (the delta
        that no epsilon removes); 0 for pure and Gaussian DP."""
        return float(1.0 - self.curve(np.asarray([0.0]))[0])

    def default_failure(self) -> float:
        """The failure probability of the statements: ``max(1e-6, 10 * floor())``."""
        return max(1e-6, min(1.0, 10.0 * self.floor()))

    def posterior(self, prior: float, *, failure: float | None = None) -> Posterior:
        """The highest belief an attacker with ``prior`` can reach that the person is in the
        data (or, under replace-one neighbours, that their record has one value rather than
        another), except with probability at most ``failure`` (default
        :meth:`default_failure`; see the module docstring)."""
        pi = check_probability(prior, name="prior")
        fail = (
            self.default_failure()
            if failure is None
            else check_probability(failure, name="failure")
        )
        eps = self._loss_quantile(fail)
        if pi in (0.0, 1.0):
            bound = pi
        elif math.isinf(eps):
            bound = 1.0
        else:
            lr = math.exp(min(eps, 700.0)) * (1.0 + 2.0**-50)
            bound = min(1.0, pi * lr / (pi * lr + (1.0 - pi)) * (1.0 + 2.0**-50))
        # delta(eps) = 0: the loss never exceeds eps, the bound holds with certainty
        certain = math.isfinite(eps) and _profile(self._computable())(eps) == 0.0
        return Posterior(prior=pi, bound=bound, failure=0.0 if certain else fail, epsilon=eps)

    def _loss_quantile(self, fail: float) -> float:
        """Smallest ``eps`` on a grid with ``Q(L > eps) <= fail`` (see the module docstring),
        remembered per failure probability."""
        hit = self._quantiles.get(fail)
        if hit is None:
            hit = self._quantiles[fail] = self._compute_loss_quantile(fail)
        return hit

    def _compute_loss_quantile(self, fail: float) -> float:
        if isinstance(self.curve, ZeroTradeOff):
            return math.inf
        fast = self._computable()
        prof = _profile(fast)
        if prof(0.0) == 0.0:
            return 0.0
        floor = self.floor()
        e0 = fast.epsilon(0.0)  # delta(e0) = 0: L <= e0 always (inf if never)
        if floor >= fail:  # only a certain bound will do (failure 0 asked, or a large floor)
            return e0 if math.isfinite(e0) and prof(e0) == 0.0 else math.inf
        if math.isfinite(e0):
            top = e0
        else:
            top = fast.epsilon(floor + (fail - floor) * 1e-3)
            if not math.isfinite(top):
                return math.inf
            top = 2.0 * top + 1.0
        grid = np.unique(np.concatenate([np.linspace(0.0, top, 300), np.geomspace(1e-6, top, 100)]))
        d = np.asarray([prof(float(e)) for e in grid])
        best = math.inf
        if math.isfinite(e0):
            best = e0
        # tail(eps_j) <= min_{i < j} d_i / (1 - e^{eps_i - eps_j})
        with np.errstate(divide="ignore", invalid="ignore"):
            gap = -np.expm1(grid[None, :] - grid[:, None])  # row j, column i: 1 - e^{e_i - e_j}
            ratio = np.where(gap > 0.0, d[None, :] / gap, np.inf)
        tail = np.min(ratio, axis=1) * (1.0 + 1e-12)
        ok = np.flatnonzero(tail <= fail)
        if ok.size:
            best = min(best, float(grid[ok[0]]))
        return best

    # ----------------------------------------------------------------- reconstruction, groups
    def reconstruction(self, baseline: float) -> float:
        """Largest chance that an informed attacker reconstructs a record, when a guess
        without the release is right with probability ``baseline`` (Hayes, Mahloujifar and
        Balle 2023): ``1 - f(baseline)``, an upper bound."""
        return self.max_tpr(check_probability(baseline, name="baseline"))

    def group(self, k: int) -> Risk:
        """The same statements for a group of ``k`` people acting together (DRS Theorem
        2.14): a household, or one person counted ``k`` times."""
        k = check_integer(k, name="k", minimum=1)
        if k == 1:
            return self
        g = self.guarantee
        curve = self.curve if isinstance(self.curve, ZeroTradeOff) else self.curve.group(k)
        exact = g.exact and isinstance(self.curve, (fdp.GaussianTradeOff, fdp.LaplaceTradeOff))
        return Risk(
            Guarantee(
                curve,
                exact=exact,
                neighbouring=g.neighbouring,
                source=g.source,
                adaptive=g.adaptive,
            ),
            group_size=self.group_size * k,
        )

    # ----------------------------------------------------------------- words and data
    def statements(
        self,
        *,
        prior: float = 0.01,
        baseline: float = 1e-3,
        fpr: float = 1e-3,
        failure: float | None = None,
    ) -> list[str]:
        """The risk in plain sentences (numbers rounded up)."""
        who = "a person" if self.group_size == 1 else f"a group of {self.group_size} people"
        member = (
            "in the data"
            if self.neighbouring is Neighbouring.ADD_REMOVE
            else "holds one value rather than another in the data"
        )
        adv = self.advantage()
        tpr = self.max_tpr(fpr)
        post = self.posterior(prior, failure=failure)
        rec = self.reconstruction(baseline)
        out = [
            f"Membership: an attacker who wrongly accuses at most {odds(fpr)} people who are "
            f"not in the data can correctly identify at most {percent(tpr)} of those who are "
            f"(for {who}).",
            f"Guessing: asked whether {who} is {member}, with both answers equally likely "
            f"beforehand, no attacker is right more than {percent((1.0 + adv) / 2.0)} of the "
            f"time (50% is a coin flip).",
        ]
        tail = (
            ""
            if post.failure == 0.0
            else (f", except with probability at most {post.failure:.0e}".replace("e-0", "e-"))
        )
        out.append(
            f"Belief: an attacker who believed {percent_down(prior)} that {who} is {member} can "
            f"come to believe at most {percent(post.bound)}{tail}."
        )
        out.append(
            f"Reconstruction: if a record could be guessed with probability {odds(baseline)} "
            f"without the release, an attacker who knows every other record guesses it with "
            f"probability at most {percent(rec)}."
        )
        return out

    def to_dict(
        self,
        *,
        prior: float = 0.01,
        baseline: float = 1e-3,
        failure: float | None = None,
        fprs: Sequence[float] = LOW_FPRS,
    ) -> dict[str, Any]:
        """The figures as plain data (for the JSON twin of a report)."""
        post = self.posterior(prior, failure=failure)
        return {
            "source": self.source,
            "exact_curve": self.exact,
            "neighbouring": self.neighbouring.value,
            "group_size": self.group_size,
            "direction": "upper bounds on what any attacker achieves",
            "advantage": self.advantage(),
            "max_tpr_at_fpr": {repr(a): t for a, t in self.low_fpr_rates(fprs).items()},
            "posterior": dataclasses.asdict(post),
            "reconstruction": {"baseline": baseline, "bound": self.reconstruction(baseline)},
        }


def of(
    obj: Any = None,
    *,
    epsilon: float | None = None,
    delta: float = 0.0,
    mu: float | None = None,
    rho: float | None = None,
    neighbouring: Neighbouring | str | None = None,
) -> Risk:
    """The risk of a guarantee.

    ``obj``: a mechanism (anything with an ``event``), an event or a list of events (or
    ``(event, count)`` pairs, composed exactly as if fixed in advance), a
    :class:`~dpkit.accounting.Budget` or sub-budget (what it certifies for everything it
    accepted, valid for adaptively chosen releases), a session (its budget), a query result
    (the pair it was charged) or a :class:`~dpkit.fdp.TradeOffFunction`. Or a bare guarantee:
    ``epsilon=`` (with ``delta=``), ``mu=`` (Gaussian DP) or ``rho=`` (zCDP).
    """
    return Risk(
        guarantee_of(obj, epsilon=epsilon, delta=delta, mu=mu, rho=rho, neighbouring=neighbouring)
    )
