"""Shuffle-model accounting: the central (epsilon, delta) of n shuffled local reports, and a
reference shuffler.

When the server receives the n reports of an ``epsilon0``-LDP randomizer in a uniformly random
order (a shuffler or an anonymising aggregator stands between devices and server), the
multiset of reports is ``(epsilon, delta)``-DP for neighbouring datasets that differ in one
user's value, with ``epsilon`` far below ``epsilon0`` for large n.

The clone reduction (Feldman, McMillan and Talwar, "Hiding among the clones", FOCS 2021,
Theorem 3.2 and their numerical Section 5): any ``epsilon0``-LDP report of a user other than
the first satisfies ``R(x_i) >= e^-eps0 (R(x_1^0) + R(x_1^1)) / 2`` pointwise, so it is, with
probability ``r = e^-eps0``, a "clone" of the first user's report under ``x_1^0`` or ``x_1^1``
(half each). The shuffled output is then a post-processing of the pair ``(C, T)``: ``C ~
Bin(n - 1, r)`` clones, and ``T`` = (clones of ``x_1^0``) + the first user's own contribution,
which is one with probability ``alpha = e^eps0 / (e^eps0 + 1)`` under ``x_1^0`` and ``1 -
alpha`` under ``x_1^1``. Given ``C = c`` the two laws of ``T`` are

``P_c = alpha Bin(c, 1/2) + (1 - alpha) (1 + Bin(c, 1/2))``,
``Q_c = (1 - alpha) Bin(c, 1/2) + alpha (1 + Bin(c, 1/2))``,

and ``delta(eps) = sum_c Pr[C = c] D_{e^eps}(P_c || Q_c)`` (both directions are equal, by the
symmetry ``t -> c + 1 - t``). The likelihood ratio of ``P_c`` to ``Q_c`` decreases in ``t``, so
the hockey-stick divergence is a difference of two binomial CDFs at one cut-off.

For binary randomized response the same computation holds with the larger clone probability
``r = 2 / (e^eps0 + 1)`` and ``alpha = p`` (the truth probability): every report is a pure 0
or a pure 1 with probability ``(1 - p)`` each and otherwise keeps the user's value, so the
clones are the two pure reports. This bound is tighter than the general one (it is the form
Feldman, McMillan and Talwar's 2023 refinement takes), but still an upper bound: the server
sees the shuffled reports, not the number of clones ``C``. The tests compare both with the
exact delta of shuffled randomized response, computed by brute force over every dataset for
small n. For other randomizers only the general bound is used here.

Why the general bound is the 2021 one: Feldman, McMillan and Talwar's SODA 2023 paper
("Stronger privacy amplification by shuffling for Renyi and approximate differential privacy")
first stated a tighter bound for every ``epsilon0``-LDP randomizer (its Theorems 3.1 and 3.2,
a clone probability of ``2 / (e^eps0 + 1)`` in place of ``e^-eps0``). The authors' errata
(arXiv 2208.04591, later versions) report an error in the proof of its Lemma 3.5: those
theorems, and the numbers in its Figures 1-3, hold only for a restricted class of randomizers
that admit a particular decomposition, which must be shown randomizer by randomizer. Binary
randomized response is in that class (its decomposition is the ``randomized_response`` method
above); for an arbitrary randomizer the proven bound remains the 2021 one, so ``clones`` is what
:meth:`ShuffleBound.of` uses for every protocol other than binary randomized response.

Rounding, to the safe side: the clone counts beyond twelve standard deviations of the mean
are not evaluated, and their whole probability is added to delta; each term is computed with
scipy's binomial CDFs and the sum is inflated by a relative ``1e-9`` plus ``1e-300``; epsilon
is found by bisection on ``delta(eps) <= delta`` and the upper end of the final bracket (width
``1e-6`` relative) is returned, rounded up.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
from scipy import stats

from dpkit._numeric.rounding import up
from dpkit._numeric.validation import check_delta, check_epsilon, check_integer
from dpkit.errors import PrivacyParameterError
from dpkit.events import ApproxDpEvent, DpEvent
from dpkit.ldp.client import shuffle_reports
from dpkit.noise import RandomSource

__all__ = ["ShuffleBound", "shuffle", "shuffle_delta", "shuffled_epsilon"]

METHODS = ("clones", "randomized_response")
_SD = 12.0
_REL = 1e-9
_BISECT = 1e-6


def _clone_probability(epsilon0: float, method: str) -> float:
    if method == "clones":
        return math.exp(-epsilon0)
    if method == "randomized_response":
        return 2.0 / (math.exp(epsilon0) + 1.0)
    raise PrivacyParameterError(f"method must be one of {METHODS}, got {method!r}")


def shuffle_delta(epsilon: float, *, epsilon0: float, n: int, method: str = "clones") -> float:
    """``delta(epsilon)`` of ``n`` shuffled ``epsilon0``-LDP reports (module docstring), rounded
    up. ``method="clones"`` holds for every ``epsilon0``-LDP randomizer; ``"randomized_response"``
    is the tighter bound for binary randomized response at ``epsilon0``."""
    eps = check_epsilon(epsilon, allow_zero=True)
    eps0 = check_epsilon(epsilon0)
    n = check_integer(n, name="n", minimum=1)
    r = _clone_probability(eps0, method)
    if eps >= eps0:
        return 0.0
    alpha = 1.0 / (1.0 + math.exp(-eps0))
    e = math.exp(eps)
    # P_c(t) > e^eps Q_c(t)  <=>  t / (c + 1 - t) < rho  <=>  t < beta (c + 1)
    rho = (alpha - e * (1.0 - alpha)) / (e * alpha - (1.0 - alpha))
    beta = rho / (1.0 + rho)
    m = n - 1
    mean, sd = m * r, math.sqrt(max(m * r * (1.0 - r), 0.0))
    lo = max(0, math.floor(mean - _SD * sd) - 1)
    hi = min(m, math.ceil(mean + _SD * sd) + 1)
    c = np.arange(lo, hi + 1, dtype=np.float64)
    weights = stats.binom.pmf(c, m, r)
    tail = float(stats.binom.cdf(lo - 1, m, r) + stats.binom.sf(hi, m, r)) if m else 0.0
    best = np.zeros(c.size)
    base = np.floor(beta * (c + 1.0))
    for shift in (-1.0, 0.0, 1.0):  # any cut-off gives a lower bound: keep the largest
        tau = base + shift
        b_tau = stats.binom.cdf(tau, c, 0.5)
        b_prev = stats.binom.cdf(tau - 1.0, c, 0.5)
        p = alpha * b_tau + (1.0 - alpha) * b_prev
        q = (1.0 - alpha) * b_tau + alpha * b_prev
        best = np.maximum(best, p - e * q)
    total = float(np.dot(weights, np.clip(best, 0.0, 1.0))) + tail
    return min(1.0, up(total * (1.0 + _REL) + 1e-300))


def shuffled_epsilon(*, epsilon0: float, n: int, delta: float, method: str = "clones") -> float:
    """The smallest epsilon (to a relative ``1e-6``, rounded up) with
    ``shuffle_delta(epsilon) <= delta``; ``epsilon0`` when shuffling does not help."""
    eps0 = check_epsilon(epsilon0)
    d = check_delta(delta)
    if d <= 0.0:
        raise PrivacyParameterError("delta must be positive for a shuffled guarantee")
    n = check_integer(n, name="n", minimum=1)
    _clone_probability(eps0, method)
    if shuffle_delta(0.0, epsilon0=eps0, n=n, method=method) <= d:
        return 0.0
    low, high = 0.0, eps0
    while high - low > _BISECT * high:
        mid = 0.5 * (low + high)
        if shuffle_delta(mid, epsilon0=eps0, n=n, method=method) <= d:
            high = mid
        else:
            low = mid
    return up(high)


@dataclasses.dataclass(frozen=True)
class ShuffleBound:
    """The central guarantee of ``n`` shuffled ``epsilon0``-LDP reports.

    ``epsilon`` is :func:`shuffled_epsilon` at ``delta`` (never above ``epsilon0``; rounded
    up). :attr:`event` is an :class:`~dpkit.events.ApproxDpEvent` for dpkit's accountants and
    budgets: it composes with every other release of the same people. It describes one
    collection in which each user sends one report; a device reporting several times is
    several events (compose them).
    """

    epsilon0: float
    n: int
    delta: float
    epsilon: float
    method: str

    @classmethod
    def compute(
        cls, *, epsilon0: float, n: int, delta: float, method: str = "clones"
    ) -> ShuffleBound:
        """Compute the bound (see :func:`shuffled_epsilon`)."""
        eps = shuffled_epsilon(epsilon0=epsilon0, n=n, delta=delta, method=method)
        return cls(
            epsilon0=float(epsilon0),
            n=int(n),
            delta=float(delta),
            epsilon=min(eps, float(epsilon0)),
            method=method,
        )

    @classmethod
    def of(cls, protocol: Any, *, n: int, delta: float) -> ShuffleBound:
        """The bound for ``n`` reports of a :mod:`dpkit.ldp` protocol, at the epsilon its own
        event states (binary randomized response gets its tighter clone bound)."""
        from dpkit.events import pure_epsilon_of
        from dpkit.ldp._protocols import RandomizedResponse

        event = protocol.event
        cost = pure_epsilon_of(event)
        if cost is None:
            raise PrivacyParameterError("the protocol's event is not a pure-DP event")
        eps0 = up(cost)
        method = "randomized_response" if isinstance(protocol, RandomizedResponse) else "clones"
        return cls.compute(epsilon0=eps0, n=n, delta=delta, method=method)

    @property
    def event(self) -> DpEvent:
        """The shuffled collection as an ``(epsilon, delta)`` event."""
        return ApproxDpEvent(epsilon=self.epsilon, delta=self.delta)


def shuffle(reports: Any, source: RandomSource | None = None) -> Any:
    """A uniformly random permutation of ``reports`` (reference shuffler).

    Lists (or any sequence) are shuffled by :func:`dpkit.ldp.client.shuffle_reports`
    (Fisher-Yates with ``secrets.randbelow``, the OS CSPRNG; exactly uniform) into a new list.
    Numpy arrays are permuted along their first axis by sorting independent uniform 64-bit
    keys from ``source`` (default: dpkit's secure source), redrawn until no two keys tie: given
    distinct i.i.d. keys, every order is equally likely, so the permutation is exactly
    uniform. The shuffler must also strip metadata (sender, time of arrival) for the
    shuffle-model guarantee to hold; that is the deployment's part.
    """
    if isinstance(reports, np.ndarray):
        from dpkit.noise import resolve_source

        src = resolve_source(source)
        n = reports.shape[0] if reports.ndim else 0
        while True:
            keys = src.words(n)
            perm = np.argsort(keys, kind="stable")
            if n < 2 or bool(np.all(keys[perm][1:] != keys[perm][:-1])):
                return reports[perm]
    return shuffle_reports(reports)
