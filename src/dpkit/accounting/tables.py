"""Side-by-side comparisons: one schedule, every applicable accountant, as data.

Each function composes the same schedule with every accountant (and composition theorem) that
applies to it and returns one :class:`AccountingRow` per answer: the epsilon at the requested
delta, whether that number is a guaranteed **upper bound**, a **lower bound** or an
**estimate**, the seconds it took, and the privacy profile ``delta(epsilon)`` where the method
has one. ``dpkit account`` prints these rows; nothing here formats.

* :func:`dpsgd_rows`: DP-SGD, i.e. ``steps`` compositions of the Poisson-subsampled Gaussian
  mechanism (add/remove neighbours). PLD (upper and lower bound of the discretised privacy
  loss distribution), RDP (upper bound) and the GDP central limit theorem of Bu, Dong, Long
  and Su (2020), which is an estimate (it can be optimistic).
* :func:`laplace_rows`: ``count`` Laplace releases of ``epsilon`` each. PLD, RDP, the GDP
  accountant, basic composition (Dwork and Roth 2014, Theorem 3.16), advanced composition
  (Dwork, Rothblum and Vadhan 2010, Theorem III.3, with ``delta_slack = delta``; only when
  ``delta > 0``) and optimal composition (Kairouz, Oh and Viswanath 2015, Theorem 3.3); see
  :mod:`dpkit.accounting.composition`.

Every number comes from the accountant's own rounded-to-the-safe-side answer: an upper bound
here is exactly what that accountant certifies.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from dpkit import fdp
from dpkit._numeric.validation import (
    check_delta,
    check_epsilon,
    check_integer,
    check_positive,
    check_probability,
)
from dpkit.accounting.composition import (
    advanced_composition,
    basic_composition,
    optimal_composition,
    optimal_composition_delta,
)
from dpkit.accounting.gdp import GdpAccountant, dpsgd_gdp_mu
from dpkit.accounting.pld import PldAccountant
from dpkit.accounting.rdp import RdpAccountant
from dpkit.events import GaussianEvent, LaplaceEvent, PoissonSampledEvent

__all__ = ["ESTIMATE", "LOWER_BOUND", "UPPER_BOUND", "AccountingRow", "dpsgd_rows", "laplace_rows"]

#: The number is certified: the true epsilon at this delta is at most it.
UPPER_BOUND = "upper bound"
#: The true epsilon is at least this number (the PLD accountant's other end).
LOWER_BOUND = "lower bound"
#: An approximation with no guarantee in either direction (the GDP central limit theorem).
ESTIMATE = "estimate"

_T = TypeVar("_T")


@dataclass(frozen=True, kw_only=True)
class AccountingRow:
    """One accountant's answer for a schedule.

    ``profile`` is the method's privacy profile ``delta(epsilon)`` (``None`` for a method that
    gives a single number, such as advanced composition or the PLD lower bound).
    """

    name: str
    epsilon: float
    kind: str
    seconds: float
    profile: Callable[[float], float] | None = None


def _timed(fn: Callable[[], _T]) -> tuple[_T, float]:
    t0 = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - t0


def _pld_and_rdp(
    event: PoissonSampledEvent | LaplaceEvent, count: int, delta: float
) -> list[AccountingRow]:
    pld = PldAccountant()
    pld.compose(event, count)
    (low, _, high), sec = _timed(lambda: pld.get_epsilon_bounds(delta))
    rdp = RdpAccountant()
    eps, sec_rdp = _timed(lambda: rdp.compose(event, count).get_epsilon(delta))
    return [
        AccountingRow(
            name="PLD (dpkit)", epsilon=high, kind=UPPER_BOUND, seconds=sec, profile=pld.get_delta
        ),
        AccountingRow(name="PLD (dpkit)", epsilon=low, kind=LOWER_BOUND, seconds=sec),
        AccountingRow(
            name="RDP (dpkit)",
            epsilon=eps,
            kind=UPPER_BOUND,
            seconds=sec_rdp,
            profile=rdp.get_delta,
        ),
    ]


def dpsgd_rows(
    *, sampling_rate: float, noise_multiplier: float, steps: int, delta: float
) -> list[AccountingRow]:
    """PLD (upper and lower bound), RDP (upper bound) and GDP-CLT (estimate) for DP-SGD.

    The GDP row is named with its ``mu`` (:func:`dpkit.accounting.dpsgd_gdp_mu`,
    ``mu = q sqrt(T (e^{1/sigma^2} - 1))``, Bu, Dong, Long and Su 2020) and reads the
    ``mu``-GDP curve's epsilon at ``delta``.
    """
    q = check_probability(sampling_rate, name="sampling_rate")
    s = check_positive(noise_multiplier, "noise_multiplier")
    n = check_integer(steps, name="steps", minimum=0)
    d = check_delta(delta)
    event = PoissonSampledEvent(sampling_rate=q, event=GaussianEvent(noise_multiplier=s))
    rows = _pld_and_rdp(event, n, d)
    mu, sec = _timed(lambda: dpsgd_gdp_mu(sampling_rate=q, noise_multiplier=s, steps=n))
    g = fdp.gdp(mu)
    eps, sec2 = _timed(lambda: g.epsilon(d))
    rows.append(
        AccountingRow(
            name=f"GDP CLT (mu = {mu:.4g})",
            epsilon=eps,
            kind=ESTIMATE,
            seconds=sec + sec2,
            profile=g.delta,
        )
    )
    return rows


def laplace_rows(*, epsilon: float, count: int, delta: float) -> list[AccountingRow]:
    """``count`` Laplace releases, each ``epsilon``-DP: PLD, RDP, GDP and the composition
    theorems (basic; advanced with ``delta_slack = delta`` when ``delta > 0``; optimal)."""
    e = check_epsilon(epsilon)
    k = check_integer(count, name="count", minimum=0)
    d = check_delta(delta)
    event = LaplaceEvent(noise_multiplier=1.0 / e)
    rows = _pld_and_rdp(event, k, d)

    gdp = GdpAccountant()
    eps, sec = _timed(lambda: gdp.compose(event, k).get_epsilon(d))
    rows.append(
        AccountingRow(
            name="GDP CLT (dpkit)",
            epsilon=eps,
            kind=UPPER_BOUND if gdp.is_upper_bound else ESTIMATE,
            seconds=sec,
            profile=gdp.get_delta,
        )
    )

    basic, sec = _timed(lambda: basic_composition(epsilons=[e] * k)[0])
    rows.append(
        AccountingRow(
            name="basic composition",
            epsilon=basic,
            kind=UPPER_BOUND,
            seconds=sec,
            profile=lambda x: 0.0 if x >= basic else 1.0,
        )
    )
    if d > 0.0:
        eps, sec = _timed(lambda: advanced_composition(epsilon=e, count=k, delta_slack=d))
        rows.append(
            AccountingRow(name="advanced composition", epsilon=eps, kind=UPPER_BOUND, seconds=sec)
        )
    eps, sec = _timed(lambda: optimal_composition(epsilon=e, count=k, delta=d))
    rows.append(
        AccountingRow(
            name="optimal composition (KOV)",
            epsilon=eps,
            kind=UPPER_BOUND,
            seconds=sec,
            profile=lambda x: optimal_composition_delta(epsilon=e, count=k, target_epsilon=x),
        )
    )
    return rows
