"""Device side of dpkit's local-DP protocols: standard library only (``secrets``, ``fractions``).

This file imports nothing but the Python standard library, so it can be copied alone onto a
device. Each class randomizes one user's value and returns a small, JSON-serialisable report;
:mod:`dpkit.ldp` extends these classes with the server side (numpy), and validates parameters
with dpkit's shared validator before this module ever sees them. The checks written here repeat
the same rules in plain Python for the stand-alone file; a test keeps the two in agreement.

Exact probabilities
-------------------
Every coin a client flips has a rational probability, sampled exactly with integer comparisons:
``secrets.randbits(64) < T`` is true with probability exactly ``T / 2**64`` and
``secrets.randbelow(k)`` is exactly uniform. Probabilities such as ``e^eps / (e^eps + d - 1)`` are
irrational, so each protocol stores a dyadic rational with denominator ``2**64``, rounded in the
direction that keeps the privacy ratio at or below ``e^eps`` (the "likely" probability is rounded
down, computed from a certified lower bound of ``e^eps``). The implemented mechanism is therefore
exactly ``eps``-LDP (its true epsilon may be a hair smaller) and each probability is within
``2**-63`` of the textbook value (relative ``2**-52`` for the truth probability of
``RandomizedResponse`` and ``GRR``, which is also a double: see Calibration below). The server
estimators use the implemented probabilities, so they are exactly unbiased for the mechanism
that actually runs. :meth:`report_distribution` returns the exact law of the report (as
:class:`fractions.Fraction`), which dpkit's exact privacy check uses.

Calibration
-----------
A protocol built with ``epsilon`` runs at ``run_epsilon = calibrated_epsilon(epsilon)``, the
largest double at most ``epsilon (1 - 2**-40)``, and every ``eps`` above is that value: the
probabilities use a certified lower bound of ``e^run_epsilon``. The server describes the release
to dpkit's accountants at ``run_epsilon`` (a pure-DP event), so ``k`` protocols built with
``epsilon = fl(e / k)`` cost at most ``k fl(e / k) (1 - 2**-40) <= e (1 + 2**-53)(1 - 2**-40) <
e`` together and fit a budget of ``e``, for every ``k``; the price is a relative ``2**-40`` of
epsilon. ``RandomizedResponse`` and ``GRR`` are described by their truth probability instead
(a randomized-response event, whose cost is ``ln(p (k - 1) / (1 - p))`` rounded up): there the
probability is rounded down to a multiple of ``2**-64`` that is also a double, so the event
states it exactly, its ratio is at most ``e^run_epsilon`` and its cost at most the double just
above ``run_epsilon``, still below ``fl(e / k) (1 - 2**-40) (1 + 2**-52)``. The server and the
stand-alone client compute the same ``run_epsilon`` from the same ``epsilon`` (a test keeps this
function equal to :func:`dpkit.mechanisms._calibration.calibrated_epsilon`).

Reports
-------
``RandomizedResponse``, ``Duchi``: ``0`` or ``1``. ``GRR``: an index in ``[0, d)``.
``SUE``/``OUE``: a hex string of ``ceil(d / 8)`` bytes, bit ``i % 8`` of byte ``i // 8`` for item
``i``. ``OLH``/``BLH``: ``[key, y]``. ``HadamardResponse``: an index in ``[0, K)``.
``Piecewise``: a cell index in ``[0, M)``. ``Hybrid``: a cell index, or ``M + bit`` for a Duchi
report.
"""

from __future__ import annotations

import abc
import hashlib
import math
import secrets
from collections.abc import Hashable, Iterable, Sequence
from decimal import Decimal, localcontext
from fractions import Fraction
from typing import Any, ClassVar

__all__ = [
    "BLH",
    "CMS",
    "GRR",
    "HCMS",
    "LOLOHA",
    "OLH",
    "OUE",
    "PEM",
    "RAPPOR",
    "SFP",
    "SUE",
    "Duchi",
    "HadamardResponse",
    "Hybrid",
    "OLHSketch",
    "Piecewise",
    "RandomizedResponse",
    "TreeHistogram",
    "sfp_fragments",
    "shuffle_reports",
    "sketch_table",
    "sketch_table_bytes",
    "tabulation_hash",
]

SCALE_BITS = 64
SCALE = 1 << SCALE_BITS
MAX_EPSILON = 30.0  # keeps every probability far above the 2**-64 grid
MAX_DOMAIN = 1 << 24
MAX_SKETCH_DOMAIN = 1 << 62  # sketches hash their items: a domain may be far too large to list
SKETCH_TAG = b"dpkit.ldp.sketch.v1"
CALIBRATION_MARGIN = Fraction(1, 1 << 40)


# ------------------------------------------------------------------------------------------
# Exact arithmetic helpers
# ------------------------------------------------------------------------------------------
def exp_bounds(x: float) -> tuple[Fraction, Fraction]:
    """Rational ``(lo, hi)`` with ``lo <= e^x <= hi`` (certified, relative width ~1e-55).

    ``Decimal.exp`` is correctly rounded at the working precision (60 digits), so the true value
    lies within one unit in the last place of the result; widening by two units is safe. For
    ``x >= 0`` the lower bound is at least 1 (``e^x >= 1``): below about ``1e-59`` the widened
    value would fall under 1 and make a protocol's "likely" probability the less likely one.
    """
    with localcontext() as ctx:
        ctx.prec = 60
        val = Decimal(x).exp()
        ulp = Decimal(1).scaleb(val.adjusted() - 59)
        lo = Fraction(val - 2 * ulp)
        return (max(lo, Fraction(1)) if x >= 0 else lo), Fraction(val + 2 * ulp)


def calibrated_epsilon(epsilon: float) -> float:
    """The largest double at most ``epsilon (1 - 2**-40)``: the epsilon a protocol built with
    ``epsilon`` runs at (module docstring, Calibration).

    ``float`` of a ``Fraction`` is correctly rounded (an integer true division); when it rounds
    up, the next double towards zero is below the target, so the result is rounded down.
    """
    target = Fraction(epsilon) * (1 - CALIBRATION_MARGIN)
    x = float(target)
    return math.nextafter(x, 0.0) if Fraction(x) > target else x


def floor_scaled(p: Fraction) -> int:
    """``floor(p * 2**64)``: the dyadic rounding (down) of a probability."""
    return math.floor(p * SCALE)


def ceil_scaled(p: Fraction) -> int:
    """``ceil(p * 2**64)``: the dyadic rounding (up) of a probability."""
    return math.ceil(p * SCALE)


def floor_scaled_double(p: Fraction) -> int:
    """``floor(p * 2**64)`` with its bits beyond the 53 most significant cleared: the largest
    multiple of ``2**-64`` at most ``p`` (for ``p < 1``) that is also a double, so an event can
    state it exactly. Rounded down, like :func:`floor_scaled`."""
    t = floor_scaled(p)
    drop = max(0, t.bit_length() - 53)
    return (t >> drop) << drop


def at_least_uniform(threshold: int, k: int) -> int:
    """``threshold`` (over ``2**64``), raised if needed to the smallest multiple of ``2**-64``
    that is a double and at least ``1/k``: the truth probability of k-ary randomized response
    must not fall below the uniform ``1/k`` (the likelier report would become the other one).

    Only at epsilons below about ``k 2**-52``, where ``e^eps / (e^eps + k - 1) - 1/k`` is under
    the rounding grid, does this raise anything; the law then loses at most about
    ``k 2**-52``, which the randomized-response event (stating this probability) charges.
    """
    if threshold * k >= SCALE:
        return threshold
    t = ceil_scaled(Fraction(1, k))
    drop = max(0, t.bit_length() - 53)
    return -((-t) >> drop) << drop


def bernoulli_scaled(threshold: int) -> bool:
    """``True`` with probability exactly ``threshold / 2**64``."""
    return secrets.randbits(SCALE_BITS) < threshold


def bernoulli_fraction(p: Fraction) -> bool:
    """``True`` with probability exactly ``p`` (any rational in [0, 1])."""
    return secrets.randbelow(p.denominator) < p.numerator


def hashed_grr_distribution(cells: Sequence[int], g: int, keep: int) -> dict[Any, Fraction]:
    """Exact law of the report ``(j, y)``: hash function ``j`` drawn uniformly from
    ``len(cells)``, then ``y`` by generalized randomized response over ``[g]`` around
    ``cells[j]`` (kept with probability ``keep / SCALE``, else uniform over the other cells)."""
    p = Fraction(keep, SCALE)
    rest = (1 - p) / (g - 1)
    each = Fraction(1, len(cells))
    return {(j, y): each * (p if y == c else rest) for j, c in enumerate(cells) for y in range(g)}


def grr_draw(true: int, k: int, keep: int) -> int:
    """k-ary randomized response of ``true`` in ``[0, k)``: ``true`` with probability exactly
    ``keep / 2**64``, else each of the other ``k - 1`` values with equal probability."""
    if bernoulli_scaled(keep):
        return true
    other = secrets.randbelow(k - 1)
    return other + 1 if other >= true else other


def next_prime(n: int) -> int:
    """The smallest prime ``>= n`` (trial division; n is small)."""
    n = max(n, 2)
    while any(n % k == 0 for k in range(2, math.isqrt(n) + 1)):
        n += 1
    return n


def is_prime(n: int) -> bool:
    """Trial-division primality for the small hash ranges used here."""
    return n >= 2 and all(n % k for k in range(2, math.isqrt(n) + 1))


def _check_epsilon(epsilon: Any) -> float:
    if isinstance(epsilon, bool) or not isinstance(epsilon, (int, float, Fraction)):
        raise TypeError(f"epsilon must be a real number, got {type(epsilon).__name__}")
    try:
        eps = float(epsilon)
    except OverflowError:
        eps = math.inf
    if not (math.isfinite(eps) and 0.0 < eps <= MAX_EPSILON):
        raise ValueError(f"epsilon must lie in (0, {MAX_EPSILON}], got {epsilon!r}")
    return eps


def checked_lifetime_epsilon(epsilon: float, lifetime_epsilon: Any) -> float:
    """The lifetime epsilon of a memoised protocol (RAPPOR, LOLOHA): ``2 epsilon`` (at most
    ``MAX_EPSILON``) when ``None``, else a valid epsilon no smaller than ``epsilon`` (the first
    report already spends ``epsilon``); ``ValueError``/``TypeError`` otherwise."""
    if lifetime_epsilon is None:
        return min(2.0 * epsilon, MAX_EPSILON)
    life = _check_epsilon(lifetime_epsilon)
    if life < epsilon:
        raise ValueError(
            f"lifetime_epsilon ({lifetime_epsilon!r}) must be at least epsilon "
            f"({epsilon!r}): the first report already spends epsilon; raise lifetime_epsilon"
        )
    return life


def _check_int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise ValueError(f"{name} must lie in [{lo}, {hi}], got {value!r}")
    return value


def _domain(domain: Any) -> tuple[int, tuple[Hashable, ...] | None]:
    """An int size ``d >= 2`` or a sequence of distinct hashable values (at least two)."""
    if isinstance(domain, int) and not isinstance(domain, bool):
        return _check_int("domain", domain, 2, MAX_DOMAIN), None
    if isinstance(domain, (str, bytes)) or not isinstance(domain, Iterable):
        raise TypeError(f"domain must be an int or a list of values, got {domain!r}")
    values = tuple(domain)
    if not 2 <= len(values) <= MAX_DOMAIN:
        raise ValueError(f"domain must have between 2 and {MAX_DOMAIN} values, got {len(values)}")
    if len(set(values)) != len(values):
        raise ValueError("domain values must be distinct")
    return len(values), values


# ------------------------------------------------------------------------------------------
# Frequency oracles
# ------------------------------------------------------------------------------------------
class _Categorical(abc.ABC):
    """Shared pieces of every protocol over a finite domain ``{0, ..., d - 1}`` (or labels)."""

    name = "categorical"

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        self._epsilon = _check_epsilon(epsilon)
        self._run_epsilon = calibrated_epsilon(self._epsilon)
        self._d, self._labels = _domain(domain)
        self._index = None if self._labels is None else {v: i for i, v in enumerate(self._labels)}
        self._exp_lo = exp_bounds(self._run_epsilon)[0]

    @property
    def epsilon(self) -> float:
        """The privacy parameter asked for: every report is at most ``e^epsilon`` times likelier
        under one input than under any other (the law runs at :attr:`run_epsilon` below it)."""
        return self._epsilon

    @property
    def run_epsilon(self) -> float:
        """The epsilon the probabilities are calibrated to and the server's event states:
        ``calibrated_epsilon(epsilon)`` (module docstring, Calibration)."""
        return self._run_epsilon

    @property
    def d(self) -> int:
        """Domain size."""
        return self._d

    @property
    def labels(self) -> tuple[Hashable, ...]:
        """The domain values (``0 .. d-1`` when the domain was given as a size)."""
        return tuple(range(self._d)) if self._labels is None else self._labels

    def encode(self, value: Any) -> int:
        """The index of ``value`` in the domain; refuses anything outside it (``ValueError``)."""
        if self._index is None:
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(
                    f"{self.name}: value must be an int in [0, {self._d}), got {value!r}"
                )
            if not 0 <= value < self._d:
                raise ValueError(
                    f"{self.name}: value {value!r} is outside the domain [0, {self._d})"
                )
            return value
        try:
            return self._index[value]
        except (KeyError, TypeError):
            raise ValueError(f"{self.name}: value {value!r} is not in the domain") from None

    @abc.abstractmethod
    def randomize(self, value: Any) -> Any:
        """One user's report (see the subclass)."""
        ...

    @abc.abstractmethod
    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        """Exact law of the report for input ``value`` (small domains only)."""
        ...

    @abc.abstractmethod
    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        """``(p, q)``: probability that a report supports item v when the input is v / is not v."""
        ...

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self._epsilon!r}, domain={self._d})"


class RandomizedResponse(_Categorical):
    """Warner's randomized response (Warner, JASA 1965) on a yes/no question.

    The user answers truthfully with probability ``p`` and lies otherwise, so
    ``epsilon = ln(p / (1 - p))``. Inputs are ``0``/``1`` (or ``False``/``True``); the report is
    ``0`` or ``1``. Give either ``epsilon`` (then ``p = e^eps / (1 + e^eps)`` at ``eps =
    run_epsilon``, rounded down to a multiple of ``2**-64`` that is a double) or ``p_truth`` in
    ``(1/2, 1)`` (used exactly; ``run_epsilon`` is then ``epsilon``, the smallest double whose
    exponential is certified at least ``p / (1 - p)``).
    """

    name = "RandomizedResponse"

    def __init__(self, *, epsilon: float | None = None, p_truth: float | None = None) -> None:
        if (epsilon is None) == (p_truth is None):
            raise TypeError("give exactly one of epsilon= and p_truth=")
        if p_truth is not None:
            if isinstance(p_truth, bool) or not isinstance(p_truth, (int, float, Fraction)):
                raise TypeError(f"p_truth must be a real number, got {p_truth!r}")
            if isinstance(p_truth, float) and not math.isfinite(p_truth):
                raise ValueError(f"p_truth must lie in (1/2, 1), got {p_truth!r}")
            p = Fraction(p_truth)
            if not Fraction(1, 2) < p < 1:
                raise ValueError(f"p_truth must lie in (1/2, 1), got {p_truth!r}")
            # The smallest double eps with certified e^eps >= p / (1 - p): the same value as
            # dpkit.events.randomized_response_epsilon (which this stand-alone file
            # cannot import); a test keeps the two equal.
            ratio = p / (1 - p)
            eps = math.log(ratio)
            while exp_bounds(eps)[0] < ratio:
                eps = math.nextafter(eps, math.inf)
            while exp_bounds(below := math.nextafter(eps, 0.0))[0] >= ratio:
                eps = below
            super().__init__(epsilon=eps, domain=2)
            self._run_epsilon = eps  # the law is given: eps certifies it, no calibration
            self._p = p
        elif epsilon is not None:
            super().__init__(epsilon=epsilon, domain=2)
            e = self._exp_lo  # <= e^run_epsilon; rounded down: ratio <= e^run_epsilon
            self._p = Fraction(at_least_uniform(floor_scaled_double(e / (e + 1)), 2), SCALE)

    @property
    def p_truth(self) -> Fraction:
        """The exact probability of a truthful answer."""
        return self._p

    def encode(self, value: Any) -> int:
        if value is True or value is False:
            return int(value)
        return super().encode(value)

    def randomize(self, value: Any) -> int:
        """Report the true bit with probability ``p``, its negation otherwise."""
        x = self.encode(value)
        return x if bernoulli_fraction(self._p) else 1 - x

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        x = self.encode(value)
        return {x: self._p, 1 - x: 1 - self._p}

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        return self._p, 1 - self._p


class GRR(_Categorical):
    """Generalized randomized response (k-RR, direct encoding; Wang et al., USENIX Sec 2017).

    Keep the true value with probability ``p = e^eps / (e^eps + d - 1)``, otherwise report one of
    the other ``d - 1`` values uniformly (``q = (1 - p) / (d - 1)`` each), ``eps = run_epsilon``
    and ``p`` rounded down to a multiple of ``2**-64`` that is a double. Report: an index.
    """

    name = "GRR"

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        super().__init__(epsilon=epsilon, domain=domain)
        e = self._exp_lo  # <= e^run_epsilon, and p rounded down: ratio <= e^run_epsilon
        self._keep = at_least_uniform(floor_scaled_double(e / (e + self._d - 1)), self._d)

    def randomize(self, value: Any) -> int:
        x = self.encode(value)
        if bernoulli_scaled(self._keep):
            return x
        other = secrets.randbelow(self._d - 1)
        return other + 1 if other >= x else other

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        x = self.encode(value)
        p, q = self.support_probabilities()
        return {y: (p if y == x else q) for y in range(self._d)}

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        p = Fraction(self._keep, SCALE)
        return p, (1 - p) / (self._d - 1)


class _UnaryEncoding(_Categorical):
    """Unary encoding: one-hot vector, each bit flipped independently (Wang et al. 2017).

    Bit ``i`` of the report is 1 with probability ``p`` if ``i`` is the true value and ``q``
    otherwise; ``epsilon = ln(p (1 - q) / ((1 - p) q))``. Report: hex string of ``ceil(d/8)`` bytes.
    """

    @abc.abstractmethod
    def _probabilities(self) -> tuple[Fraction, Fraction]: ...

    @property
    def nbytes(self) -> int:
        """Bytes per report."""
        return (self._d + 7) // 8

    def randomize(self, value: Any) -> str:
        """The one-hot vector of ``value`` with bit ``i`` set with probability ``p`` (``i`` the
        value) or ``q`` (any other ``i``), as hex.

        All ``d`` comparisons ``U_i < T`` (``U_i`` uniform 64-bit, ``T = q 2**64``) run at once on
        ``d``-bit Python integers, most significant bit first: lane ``i`` is decided at the first
        bit where ``U_i`` and ``T`` differ, so about ``log2(d) + 2`` random ``d``-bit words
        suffice. The true bit is then redrawn with probability ``p``.
        """
        x = self.encode(value)
        p, q = self._probabilities()
        tp, tq = p.numerator * (SCALE // p.denominator), q.numerator * (SCALE // q.denominator)
        full = (1 << self._d) - 1
        result, undecided = 0, full
        for bitpos in range(SCALE_BITS - 1, -1, -1):
            if undecided == 0 or tq & ((1 << (bitpos + 1)) - 1) == 0:
                break  # all decided, or the rest of T is zero (undecided lanes have U >= T)
            r = secrets.randbits(self._d)
            if (tq >> bitpos) & 1:
                result |= undecided & ~r & full
                undecided &= r
            else:
                undecided &= ~r & full
        true_bit = 1 << x
        result &= ~true_bit
        if bernoulli_scaled(tp):
            result |= true_bit
        return result.to_bytes(self.nbytes, "little").hex()

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        if self._d > 12:
            raise ValueError("report_distribution enumerates 2**d reports: use d <= 12")
        x = self.encode(value)
        p, q = self._probabilities()
        dist: dict[Any, Fraction] = {}
        for mask in range(1 << self._d):
            prob = Fraction(1)
            for i in range(self._d):
                bit = (mask >> i) & 1
                r = p if i == x else q
                prob *= r if bit else 1 - r
            dist[mask.to_bytes(self.nbytes, "little").hex()] = prob
        return dist

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        return self._probabilities()


class SUE(_UnaryEncoding):
    """Symmetric unary encoding (basic one-time RAPPOR; Erlingsson et al. 2014, Wang et al. 2017).

    ``p = e^(eps/2) / (e^(eps/2) + 1)``, ``q = 1 - p``, so ``p (1-q) / ((1-p) q) = e^eps``.
    """

    name = "SUE"

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        super().__init__(epsilon=epsilon, domain=domain)
        e = exp_bounds(self._run_epsilon / 2)[0]
        self._tp = floor_scaled(e / (e + 1))

    def _probabilities(self) -> tuple[Fraction, Fraction]:
        p = Fraction(self._tp, SCALE)
        return p, 1 - p


class OUE(_UnaryEncoding):
    """Optimized unary encoding (Wang et al., USENIX Security 2017).

    ``p = 1/2`` and ``q = 1 / (e^eps + 1)`` (rounded up, which only lowers the privacy ratio).
    """

    name = "OUE"

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        super().__init__(epsilon=epsilon, domain=domain)
        e = self._exp_lo
        self._tq = ceil_scaled(1 / (e + 1))

    def _probabilities(self) -> tuple[Fraction, Fraction]:
        return Fraction(1, 2), Fraction(self._tq, SCALE)


class OLH(_Categorical):
    """Optimized local hashing (Wang et al., USENIX Security 2017).

    The user draws a hash function ``H`` from a universal family into ``[g]`` and reports
    ``(H, y)`` where ``y`` is GRR over ``[g]`` of ``H(value)``: ``y = H(value)`` with probability
    ``p = e^eps / (e^eps + g - 1)``, any other of the ``g - 1`` buckets otherwise. Item ``v`` is
    supported when ``H(v) = y``: probability ``p`` for the user's own value and exactly ``1/g``
    for any other (the family below is exactly universal), so the count estimator of Wang et al.
    applies with ``q = 1/g``.

    Hash family: ``g`` is prime; with ``m`` the least integer such that ``g^m >= d``, a key
    ``k in [0, g^m)`` has base-g digits ``a_0..a_{m-1}`` and ``H_k(v) = sum_i a_i v_i mod g`` with
    ``v_i`` the base-g digits of v. Two different values differ in some digit ``i`` by a non-zero
    ``delta`` which is invertible mod the prime g, so ``H_k(x) - H_k(v) = a_i delta + (rest)`` is
    uniform when ``a_i`` is: ``P(H(x) = H(v)) = 1/g`` exactly. ``g`` defaults to the prime that
    minimises the variance (Wang et al. take ``g = round(e^eps + 1)``, not always prime; the
    variance curve is flat there, see ``docs/ldp.md``). Report: ``[key, y]``.
    """

    name = "OLH"

    def __init__(
        self, *, epsilon: float, domain: int | Sequence[Hashable], g: int | None = None
    ) -> None:
        super().__init__(epsilon=epsilon, domain=domain)
        if g is None:
            g = self._best_g()
        g = _check_int("g", g, 2, 1 << 20)
        if not is_prime(g):
            raise ValueError(f"g must be prime (for the exactly universal hash family), got {g}")
        self._g = g
        m = 1
        while g**m < self._d:
            m += 1
        self._m = m
        e = self._exp_lo
        keep = floor_scaled(e / (e + g - 1))
        self._keep = at_least_uniform(keep, g)
        # raised to 1/g at a tiny epsilon: the server's event then charges the law's own loss
        self._keep_raised = self._keep != keep

    def _best_g(self) -> int:
        """The prime g near ``e^eps + 1`` with the smallest variance ``q(1-q)/(p-q)^2``.

        With ``p = e^eps / (e^eps + g - 1)`` and ``q = 1/g`` the variance is
        ``(e^eps + g - 1)^2 / ((e^eps - 1)^2 (g - 1))``; the factor ``(e^eps - 1)^-2`` is common
        to every g, so the candidates are compared by the logarithm of the rest,
        ``2 (eps + log1p((g - 1) e^-eps)) - log(g - 1)``, which neither overflows for large
        epsilons nor divides by ``p - q = 0`` when ``e^eps`` rounds to 1 (tiny epsilons).
        """
        eps = self._run_epsilon
        target = float(1 << 20) if eps > 14.6 else min(math.exp(eps) + 1.0, float(1 << 20))
        cands = {2, 3}
        for t in (math.floor(target), math.ceil(target)):
            cands.add(next_prime(t))
            low = t
            while low > 2 and not is_prime(low):
                low -= 1
            cands.add(max(low, 2))
        best, best_var = 2, math.inf
        for g in sorted(c for c in cands if c <= 1 << 20):
            var = 2.0 * (eps + math.log1p((g - 1) * math.exp(-eps))) - math.log(g - 1)
            if var < best_var:
                best, best_var = g, var
        return best

    @property
    def g(self) -> int:
        """Hash range (a prime)."""
        return self._g

    @property
    def m(self) -> int:
        """Number of base-g digits of a domain value."""
        return self._m

    @property
    def keys(self) -> int:
        """Size of the hash family, ``g**m``."""
        return int(self._g**self._m)

    def hash(self, key: int, value_index: int) -> int:
        """``H_key(value_index)``: dot product of base-g digits, mod g."""
        g, acc = self._g, 0
        for _ in range(self._m):
            acc += (key % g) * (value_index % g)
            key //= g
            value_index //= g
        return acc % g

    def randomize(self, value: Any) -> list[int]:
        x = self.encode(value)
        key = secrets.randbelow(self.keys)
        return [key, grr_draw(self.hash(key, x), self._g, self._keep)]

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        if self.keys * self._g > 1 << 16:
            raise ValueError("report_distribution enumerates every (key, y): use a smaller domain")
        x = self.encode(value)
        return hashed_grr_distribution(
            [self.hash(key, x) for key in range(self.keys)], self._g, self._keep
        )

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        return Fraction(self._keep, SCALE), Fraction(1, self._g)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self._epsilon!r}, domain={self._d}, g={self._g})"


class BLH(OLH):
    """Binary local hashing (Bassily and Smith 2015; Wang et al. 2017): OLH with ``g = 2``."""

    name = "BLH"

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        super().__init__(epsilon=epsilon, domain=domain, g=2)


class LOLOHA(OLH):
    """Longitudinal local hashing with memoization (LOLOHA; Arcolezi, Pinzon, Palamidessi and
    Gambs, "Frequency estimation of evolving data under local differential privacy", EDBT 2023).

    A device draws one hash key ``H`` from OLH's exactly universal family into ``[g]`` (``g``
    prime) and keeps it for life. Permanent step: the first time its value hashes to bucket
    ``b``, it draws ``m_b`` by GRR over ``[g]`` at ``lifetime_epsilon``
    (``p1 = e^eps_inf / (e^eps_inf + g - 1)``) and memoises it. Instantaneous step: every report
    is ``[key, y]`` with ``y`` GRR over ``[g]`` of ``m_b`` with keep probability ``p2``.

    Both steps are symmetric channels on ``[g]``: a keep probability ``p`` has eigenvalue
    ``lambda = (g p - 1) / (g - 1)`` and chaining multiplies eigenvalues, so one report is GRR of
    ``H(value)`` with ``p* = (1 + (g - 1) lambda1 lambda2) / g``. ``p2`` is chosen so that
    ``p* = e^eps_1 / (e^eps_1 + g - 1)``: the first report is ``epsilon``-LDP (the paper's
    ``eps_IRR``, written through eigenvalues). Item ``v`` is supported when ``H(v) = y``: with
    probability ``p*`` for the device's own value and exactly ``1/g`` for any other (universal
    family), so the estimator and variance are OLH's with ``p = p*``, ``q = 1/g``:
    ``Var[c_v] = n (f p*(1-p*) + (1-f) q(1-q)) / (p* - q)^2`` per collection round.

    Spend: ``epsilon`` for the first report; any number of reports while the value keeps hashing
    to the same bucket reveal no more than ``m_b``, a ``lifetime_epsilon``-LDP release; over a
    device's lifetime at most ``g`` buckets are memoised, so at most ``g lifetime_epsilon`` in
    total about which values it held (the paper's longitudinal bound, ``eps_inf`` per distinct
    memoised bucket). That bound takes the times at which the bucket changes as public: reports
    of one memo look alike, so they reveal when the value changes, and a device whose value
    may change has no lifetime bound. ``lifetime_epsilon`` defaults to ``2 epsilon``
    (at most 30). ``g`` defaults to the paper's optimum for the pair of epsilons (OLOLOHA),
    moved up to the next prime; ``g = 2`` is BiLOLOHA.

    Exact probabilities: ``p1`` rounded down (certified lower bound of ``e^eps_inf``), then
    ``p2`` rounded down on the ``2**-64`` grid, so ``p*`` never exceeds its target; the server
    uses the implemented ``p*``. Report: ``[key, y]`` as for :class:`OLH`.
    """

    name = "LOLOHA"

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        lifetime_epsilon: float | None = None,
        g: int | None = None,
    ) -> None:
        _Categorical.__init__(self, epsilon=epsilon, domain=domain)
        self._lifetime = checked_lifetime_epsilon(self._epsilon, lifetime_epsilon)
        self._lifetime_run = calibrated_epsilon(self._lifetime)
        if g is None:
            g = self._paper_g()
        g = _check_int("g", g, 2, 1 << 20)
        if not is_prime(g):
            raise ValueError(f"g must be prime (for the exactly universal hash family), got {g}")
        self._g = g
        m = 1
        while g**m < self._d:
            m += 1
        self._m = m
        e_inf = exp_bounds(self._lifetime_run)[0]
        p1 = Fraction(at_least_uniform(floor_scaled(e_inf / (e_inf + g - 1)), g), SCALE)
        e1 = self._exp_lo
        lam_target = (e1 - 1) / (e1 + g - 1)  # eigenvalue of GRR at eps_1
        lam1 = (g * p1 - 1) / (g - 1)
        if lam1 > 0:
            lam2 = min(Fraction(1), lam_target / lam1)
            floor_p2 = Fraction(floor_scaled((1 + (g - 1) * lam2) / g), SCALE)
            p2 = max(floor_p2, Fraction(ceil_scaled(Fraction(1, g)), SCALE))  # >= uniform
        else:  # p1 is uniform (tiny lifetime epsilon): every report is pure noise
            p2 = floor_p2 = Fraction(1)
        self._p1, self._p2 = p1, p2
        self._keep = floor_scaled(self._pstar())
        # p2 raised to 1/g at a tiny epsilon: the server's event then charges the law's own loss
        self._keep_raised = p2 != floor_p2
        self._key: int | None = None
        self._memo: dict[int, int] = {}

    def _paper_g(self) -> int:
        """OLOLOHA's ``g`` (Arcolezi et al. 2023): with ``a = e^eps_inf``, ``b = e^eps_1``,
        ``g = round((sqrt(a^4 - 14 a^2 - 12 a^2 b^2 + 12 a b + 12 a^3 b + 1) - a^2 + 6 a - 6 b
        + 1) / (6 (a - b)))``, at least 2, then the next prime (g = 2 when the epsilons are
        equal)."""
        a = math.exp(min(self._lifetime_run, 14.0))
        b = math.exp(min(self._run_epsilon, 14.0))
        if a - b <= 1e-12 * a:
            return 2
        disc = a**4 - 14 * a**2 - 12 * a**2 * b**2 + 12 * a * b + 12 * a**3 * b + 1
        g = (math.sqrt(max(disc, 0.0)) - a**2 + 6 * a - 6 * b + 1) / (6 * (a - b))
        return next_prime(max(2, min(round(g), 1 << 19)))

    def _pstar(self) -> Fraction:
        p1, p2, g = self._p1, self._p2, self._g
        return p1 * p2 + (1 - p1) * (1 - p2) / (g - 1)

    @property
    def lifetime_epsilon(self) -> float:
        """The most a device spends per memoised bucket, over any number of reports."""
        return self._lifetime

    @property
    def lifetime_run_epsilon(self) -> float:
        """``calibrated_epsilon(lifetime_epsilon)``: what each memoised draw runs at."""
        return self._lifetime_run

    @property
    def permanent_probability(self) -> Fraction:
        """``p1``: probability that the memoised bucket is the true hashed bucket."""
        return self._p1

    @property
    def instantaneous_probability(self) -> Fraction:
        """``p2``: probability that a report keeps the memoised bucket."""
        return self._p2

    def _grr(self, b: int, keep: Fraction) -> int:
        if bernoulli_scaled(keep.numerator * (SCALE // keep.denominator)):
            return b
        other = secrets.randbelow(self._g - 1)
        return other + 1 if other >= b else other

    def randomize(self, value: Any) -> list[int]:
        """One report of this device (hash key and memoised buckets kept across calls)."""
        x = self.encode(value)
        if self._key is None:
            self._key = secrets.randbelow(self.keys)
        b = self.hash(self._key, x)
        memo = self._memo.get(b)
        if memo is None:
            memo = self._memo[b] = self._grr(b, self._p1)
        return [self._key, self._grr(memo, self._p2)]

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        """The law of a device's first report: OLH's with keep probability ``p*``."""
        if self.keys * self._g > 1 << 16:
            raise ValueError("report_distribution enumerates every (key, y): use a smaller domain")
        x = self.encode(value)
        p = self._pstar()
        q = (1 - p) / (self._g - 1)
        per_key = Fraction(1, self.keys)
        return {
            (key, y): per_key * (p if y == self.hash(key, x) else q)
            for key in range(self.keys)
            for y in range(self._g)
        }

    def permanent_distribution(self, value: Any, key: int) -> dict[int, Fraction]:
        """The law of the memoised bucket for ``value`` under hash ``key`` (GRR at ``p1``)."""
        b = self.hash(key, self.encode(value))
        q1 = (1 - self._p1) / (self._g - 1)
        return {y: (self._p1 if y == b else q1) for y in range(self._g)}

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        return self._pstar(), Fraction(1, self._g)

    def __repr__(self) -> str:
        return (
            f"LOLOHA(epsilon={self._epsilon!r}, lifetime_epsilon={self._lifetime!r}, "
            f"domain={self._d}, g={self._g})"
        )


class HadamardResponse(_Categorical):
    """Hadamard response (Acharya, Sun and Zhang, AISTATS 2019), the ``s = K/2`` version.

    ``K`` is the least power of two ``> d``; item ``v`` owns
    ``C_v = {y in [K] : popcount((v + 1) & y) is even}`` (the +1 rows of Hadamard row ``v + 1``,
    ``|C_v| = K/2``). The user reports a uniform element of ``C_v`` with probability
    ``p = e^eps / (e^eps + 1)``, else a uniform element of its complement; each report has
    probability ``2p/K`` or ``2(1-p)/K``. Distinct rows agree on exactly half the columns, so a
    report supports another item with probability exactly ``1/2``: ``q = 1/2``.
    Report: an index in ``[0, K)``.
    """

    name = "HadamardResponse"

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        super().__init__(epsilon=epsilon, domain=domain)
        self._K = 1 << self._d.bit_length()  # least power of two > d
        e = self._exp_lo
        self._keep = floor_scaled(e / (e + 1))

    @property
    def K(self) -> int:
        """Number of possible reports."""
        return self._K

    def randomize(self, value: Any) -> int:
        row = self.encode(value) + 1
        inside = bernoulli_scaled(self._keep)
        y = secrets.randbelow(self._K)
        if ((bin(row & y).count("1") % 2) == 0) != inside:
            y ^= row & -row  # flipping the lowest set bit of the row toggles membership
        return y

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        row = self.encode(value) + 1
        p = Fraction(self._keep, SCALE)
        half = self._K // 2
        return {
            y: (p if bin(row & y).count("1") % 2 == 0 else 1 - p) / half for y in range(self._K)
        }

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        return Fraction(self._keep, SCALE), Fraction(1, 2)


# ------------------------------------------------------------------------------------------
# Mean estimation for values in [-1, 1]
# ------------------------------------------------------------------------------------------
def _check_unit_value(name: str, value: Any) -> Fraction:
    if isinstance(value, bool) or not isinstance(value, (int, float, Fraction)):
        raise ValueError(f"{name}: value must be a real number in [-1, 1], got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name}: value must be a real number in [-1, 1], got {value!r}")
    v = Fraction(value)
    if not -1 <= v <= 1:
        raise ValueError(f"{name}: value {value!r} is outside [-1, 1]")
    return v


class _Numeric:
    name = "numeric"

    def __init__(self, *, epsilon: float) -> None:
        self._epsilon = _check_epsilon(epsilon)
        self._run_epsilon = calibrated_epsilon(self._epsilon)
        self._exp_lo = exp_bounds(self._run_epsilon)[0]

    @property
    def epsilon(self) -> float:
        """The privacy parameter asked for (the law runs at :attr:`run_epsilon` below it)."""
        return self._epsilon

    @property
    def run_epsilon(self) -> float:
        """The epsilon the probabilities are calibrated to and the server's event states:
        ``calibrated_epsilon(epsilon)`` (module docstring, Calibration)."""
        return self._run_epsilon

    def encode(self, value: Any) -> Fraction:
        """Check that ``value`` is a real number in ``[-1, 1]`` and return it exactly."""
        return _check_unit_value(self.name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(epsilon={self._epsilon!r})"


class Duchi(_Numeric):
    """Duchi, Jordan and Wainwright's one-dimensional mechanism (JASA 2018; Wang et al. ICDE 2019).

    For ``t in [-1, 1]`` report ``+B`` with probability
    ``1/2 + t (e^eps - 1) / (2 (e^eps + 1))`` and ``-B`` otherwise, with
    ``B = (e^eps + 1)/(e^eps - 1)``: unbiased, variance ``B^2 - t^2``. Implemented exactly as
    "round ``t`` to +1 with probability ``(1 + t)/2``, else -1, then keep that sign with
    probability ``p = e^eps/(e^eps + 1)``" (the same law); report: ``1`` for +B, ``0`` for -B.
    """

    name = "Duchi"

    def __init__(self, *, epsilon: float) -> None:
        super().__init__(epsilon=epsilon)
        e = self._exp_lo
        self._keep = floor_scaled(e / (e + 1))

    @property
    def p_keep(self) -> Fraction:
        """Exact probability of keeping the rounded sign."""
        return Fraction(self._keep, SCALE)

    def randomize(self, value: Any) -> int:
        t = self.encode(value)
        sign = 1 if bernoulli_fraction((1 + t) / 2) else 0
        return sign if bernoulli_scaled(self._keep) else 1 - sign

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        t = self.encode(value)
        p = self.p_keep
        up = (1 + t) / 2 * p + (1 - t) / 2 * (1 - p)
        return {1: up, 0: 1 - up}

    def exact_inputs(self) -> list[Fraction]:
        """Inputs whose mixtures give every input: the end points."""
        return [Fraction(-1), Fraction(1)]


class Piecewise(_Numeric):
    """The Piecewise mechanism (Wang et al., ICDE 2019), on a data-independent output grid.

    Continuous form: with ``C = (e^(eps/2) + 1)/(e^(eps/2) - 1)``, ``l(t) = (C+1)/2 t - (C-1)/2``
    and ``r(t) = l(t) + C - 1``, output uniform on ``[l(t), r(t)]`` with probability
    ``e^(eps/2)/(e^(eps/2) + 1)`` and uniform on the rest of ``[-C, C]`` otherwise; unbiased with
    variance ``t^2/(e^(eps/2) - 1) + (e^(eps/2) + 3)/(3 (e^(eps/2) - 1)^2)``.

    Floating-point sampling of that law leaks the input through which doubles are reachable, so
    dpkit samples a grid version: ``M = L + N`` cells with ``L = resolution`` window cells and
    ``N = round(L e^(eps/2))``. The input becomes a window start ``s`` in ``{0..N}`` by unbiased
    randomized rounding of ``(t + 1) N / 2``; the report is a cell ``k``: uniform in the window
    ``[s, s + L)`` with total probability ``P = e^eps L / (e^eps L + N)`` (rounded down), uniform
    over the other ``N`` cells otherwise. Every cell has probability ``P/L`` or ``(1-P)/N`` under
    every input, ratio ``<= e^eps``, so the report is exactly eps-LDP whatever the rounding. The
    server maps cell ``k`` to ``(k + 1/2 - M/2) / D`` with ``D = (P/L - (1-P)/N) L N / 2``, which
    is unbiased; as ``L`` grows the law tends to the continuous mechanism.
    """

    name = "Piecewise"

    def __init__(self, *, epsilon: float, resolution: int = 1 << 16) -> None:
        super().__init__(epsilon=epsilon)
        self._L = _check_int("resolution", resolution, 1, 1 << 24)
        half = exp_bounds(self._run_epsilon / 2)
        self._N = max(1, round(self._L * float(half[0])))
        e = self._exp_lo
        self._high = floor_scaled(e * self._L / (e * self._L + self._N))

    @property
    def L(self) -> int:
        """Window width in cells."""
        return self._L

    @property
    def N(self) -> int:
        """Cells outside the window (window starts range over ``0..N``)."""
        return self._N

    @property
    def M(self) -> int:
        """Number of cells (possible reports)."""
        return self._L + self._N

    @property
    def p_high(self) -> Fraction:
        """Exact probability that the report falls in the window."""
        return Fraction(self._high, SCALE)

    def window_start(self, t: Fraction) -> int:
        """Randomized rounding of ``(t + 1) N / 2`` to an integer (exact, unbiased)."""
        sigma = (t + 1) * self._N / 2
        base = math.floor(sigma)
        return base + (1 if bernoulli_fraction(sigma - base) else 0)

    def randomize(self, value: Any) -> int:
        s = self.window_start(self.encode(value))
        if bernoulli_scaled(self._high):
            return s + secrets.randbelow(self._L)
        j = secrets.randbelow(self._N)
        return j if j < s else j + self._L

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        if self.M > 1 << 12:
            raise ValueError("report_distribution enumerates every cell: use a small resolution")
        t = self.encode(value)
        sigma = (t + 1) * self._N / 2
        base = math.floor(sigma)
        frac = sigma - base
        hi, lo = self.p_high / self._L, (1 - self.p_high) / self._N
        dist: dict[Any, Fraction] = {}
        for s, w in ((base, 1 - frac), (base + 1, frac)):
            if w == 0:
                continue
            for k in range(self.M):
                dist[k] = dist.get(k, Fraction(0)) + w * (hi if s <= k < s + self._L else lo)
        return dist

    def exact_inputs(self) -> list[Fraction]:
        """Inputs whose window start is deterministic (every input is a mixture of two)."""
        return [Fraction(2 * s, self._N) - 1 for s in range(self._N + 1)]

    def __repr__(self) -> str:
        return f"Piecewise(epsilon={self._epsilon!r}, resolution={self._L})"


HYBRID_EPSILON_STAR = 0.61  # Wang et al., ICDE 2019: below it Duchi alone is best


class Hybrid(_Numeric):
    """The Hybrid mechanism (Wang et al., ICDE 2019): Piecewise with probability ``alpha``, Duchi
    otherwise, where ``alpha = 1 - e^(-eps/2)`` for ``eps > eps* = 0.61`` and ``0`` below.

    Both parts are unbiased, so the mixture is, with variance ``alpha Var_PM + (1-alpha) Var_D``.
    Report: a Piecewise cell in ``[0, M)`` or ``M + b`` for a Duchi bit ``b``; ``alpha`` is used
    as a multiple of ``2**-64`` (any alpha keeps both privacy and unbiasedness).
    """

    name = "Hybrid"

    def __init__(self, *, epsilon: float, resolution: int = 1 << 16) -> None:
        super().__init__(epsilon=epsilon)
        # each part calibrates the asked epsilon itself, to the same run_epsilon
        self.piecewise = Piecewise(epsilon=self._epsilon, resolution=resolution)
        self.duchi = Duchi(epsilon=self._epsilon)
        if self._run_epsilon > HYBRID_EPSILON_STAR:
            self._alpha = floor_scaled(1 - 1 / exp_bounds(self._run_epsilon / 2)[1])
        else:
            self._alpha = 0

    @property
    def alpha(self) -> Fraction:
        """Exact probability of using the Piecewise mechanism."""
        return Fraction(self._alpha, SCALE)

    def randomize(self, value: Any) -> int:
        t = self.encode(value)
        if bernoulli_scaled(self._alpha):
            return self.piecewise.randomize(t)
        return self.piecewise.M + self.duchi.randomize(t)

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        a = self.alpha
        dist = {k: a * p for k, p in self.piecewise.report_distribution(value).items()}
        for b, p in self.duchi.report_distribution(value).items():
            dist[self.piecewise.M + b] = (1 - a) * p
        return dist

    def exact_inputs(self) -> list[Fraction]:
        """Grid inputs of the Piecewise part plus the end points (which are among them)."""
        return self.piecewise.exact_inputs()

    def __repr__(self) -> str:
        return f"Hybrid(epsilon={self._epsilon!r}, resolution={self.piecewise.L})"


class RAPPOR(_UnaryEncoding):
    """Memoised randomized response for repeated collection: basic RAPPOR's permanent and
    instantaneous randomization (Erlingsson, Pihur and Korolova, CCS 2014), over symmetric unary
    encoding (L-SUE in Arcolezi et al., "Frequency estimation of evolving data under local
    differential privacy", EDBT 2023).

    Permanent: the first time a device reports a value, it draws a one-hot SUE vector of it at
    ``lifetime_epsilon`` (each bit kept with probability ``p1 = e^(eps_inf/2)/(e^(eps_inf/2)+1)``)
    and memoises it. Instantaneous: every report redraws each memoised bit, keeping it with
    probability ``p2``, chosen so that one report is ``epsilon``-LDP: bit ``i`` of a report is 1
    with probability ``p* = p1 p2 + (1-p1)(1-p2)`` when ``i`` is the value and ``1 - p*``
    otherwise, independently, with ``p* <= e^(eps/2)/(e^(eps/2)+1)``. Spend: ``epsilon`` for the
    first report; any number of reports of the same value never reveal more than the permanent
    vector, an ``lifetime_epsilon``-LDP release: at most ``lifetime_epsilon`` over a device's
    lifetime while its value stays the same (``k`` distinct values: ``k lifetime_epsilon`` about
    which values, but only with the times of change public: the reports reveal them).
    Requires ``epsilon <= lifetime_epsilon`` (default: ``2 epsilon``, at most 30). Report: hex as
    for :class:`SUE`.

    Exact probabilities: ``p1`` is rounded down (from certified bounds, at the calibrated
    lifetime epsilon), then ``p2`` rounded down on the ``2**-64`` grid so ``p*`` never exceeds
    its target; the server uses the implemented ``p*``.
    """

    name = "RAPPOR"

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        lifetime_epsilon: float | None = None,
    ) -> None:
        super().__init__(epsilon=epsilon, domain=domain)
        self._lifetime = checked_lifetime_epsilon(self._epsilon, lifetime_epsilon)
        self._lifetime_run = calibrated_epsilon(self._lifetime)
        e_inf = exp_bounds(self._lifetime_run / 2)[0]
        p1 = Fraction(floor_scaled(e_inf / (e_inf + 1)), SCALE)
        e1 = exp_bounds(self._run_epsilon / 2)[0]
        target = e1 / (e1 + 1)
        if 2 * p1 - 1 > 0:
            p2 = Fraction(min(SCALE, floor_scaled((target - (1 - p1)) / (2 * p1 - 1))), SCALE)
        else:  # a lifetime epsilon so small that p1 is 1/2: every report is pure noise
            p2 = Fraction(1)
        self._p1, self._p2 = p1, p2
        self._memo: dict[int, int] = {}

    @property
    def lifetime_epsilon(self) -> float:
        """The most a device spends over any number of reports of the same value."""
        return self._lifetime

    @property
    def lifetime_run_epsilon(self) -> float:
        """``calibrated_epsilon(lifetime_epsilon)``: what the permanent vector runs at."""
        return self._lifetime_run

    @property
    def permanent_probability(self) -> Fraction:
        """``p1``: probability that a permanent bit equals the one-hot bit."""
        return self._p1

    @property
    def instantaneous_probability(self) -> Fraction:
        """``p2``: probability that a report keeps a memoised bit."""
        return self._p2

    def _probabilities(self) -> tuple[Fraction, Fraction]:
        p1, p2 = self._p1, self._p2
        p = p1 * p2 + (1 - p1) * (1 - p2)
        return p, 1 - p

    def _flip_all(self, bits: int, keep: Fraction) -> int:
        """Each of the ``d`` bits of ``bits`` kept with probability ``keep``, else flipped."""
        flips = 0
        t = keep.numerator * (SCALE // keep.denominator)
        for i in range(self._d):
            if not bernoulli_scaled(t):
                flips |= 1 << i
        return bits ^ flips

    def permanent(self, value: Any) -> int:
        """The memoised permanent vector of ``value`` (drawn on first use), as an int."""
        x = self.encode(value)
        memo = self._memo.get(x)
        if memo is None:
            memo = self._memo[x] = self._flip_all(1 << x, self._p1)
        return memo

    def randomize(self, value: Any) -> str:
        """An instantaneous report of the memoised permanent vector of ``value``."""
        bits = self._flip_all(self.permanent(value), self._p2)
        return bits.to_bytes(self.nbytes, "little").hex()

    def __repr__(self) -> str:
        return (
            f"RAPPOR(epsilon={self._epsilon!r}, lifetime_epsilon={self._lifetime!r}, "
            f"domain={self._d})"
        )


# ------------------------------------------------------------------------------------------
# Sketches for large domains (Apple's count-mean sketch and its Hadamard variant)
# ------------------------------------------------------------------------------------------
def sketch_table(hash_seed: int, row: int) -> list[list[int]]:
    """The 8 tables of 256 words of hash function ``row``: simple tabulation hashing.

    Table ``i`` is the 2048 bytes of ``SHAKE-256(tag, hash_seed, row, i)`` read as 256
    little-endian 64-bit words. The tables are public (they are derived from a public seed,
    never from anyone's data); privacy never depends on them, only the variance does.
    """
    out = []
    for i in range(8):
        data = sketch_table_bytes(hash_seed, row, i)
        out.append([int.from_bytes(data[8 * b : 8 * b + 8], "little") for b in range(256)])
    return out


def sketch_table_bytes(hash_seed: int, row: int, i: int, size: int = 2048) -> bytes:
    """The first ``size`` of the 2048 bytes of table ``i`` of hash function ``row`` (see
    :func:`sketch_table`; SHAKE's shorter outputs are prefixes of its longer ones)."""
    prefix = SKETCH_TAG + hash_seed.to_bytes(8, "little") + row.to_bytes(4, "little")
    return hashlib.shake_256(prefix + bytes([i])).digest(size)


def tabulation_hash(table: list[list[int]], x: int) -> int:
    """``T_0[x_0] xor ... xor T_7[x_7]`` over the 8 bytes ``x_i`` of ``x < 2**64``.

    Simple tabulation is 3-wise independent when the tables are uniformly random (Thorup and
    Zhang, SODA 2004; Patrascu and Thorup, JACM 2012), and so are its low bits.
    """
    h = 0
    for i in range(8):
        h ^= table[i][(x >> (8 * i)) & 0xFF]
    return h


def _sketch_domain(domain: Any) -> tuple[int, tuple[Hashable, ...] | None]:
    if isinstance(domain, int) and not isinstance(domain, bool):
        return _check_int("domain", domain, 2, MAX_SKETCH_DOMAIN), None
    return _domain(domain)


class _Sketch(_Categorical):
    """Shared pieces of the sketches: ``hashes`` public hash functions into ``width`` cells.

    Each user picks one hash function ``j`` uniformly and randomizes only the cell (CMS) or one
    Hadamard coefficient (HCMS) of ``h_j(value)``. The server keeps a ``hashes x width`` table
    and estimates any item from ``hashes`` look-ups, so the domain can be as large as
    ``2**62`` items and need never be listed.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        width: int = 1024,
        hashes: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        self._epsilon = _check_epsilon(epsilon)
        self._run_epsilon = calibrated_epsilon(self._epsilon)
        self._d, self._labels = _sketch_domain(domain)
        self._index = None if self._labels is None else {v: i for i, v in enumerate(self._labels)}
        self._exp_lo = exp_bounds(self._run_epsilon)[0]
        self._m = _check_int("width", width, 2, 1 << 20)
        if self._m & (self._m - 1):
            raise ValueError(f"width must be a power of two, got {width!r}")
        self._k = _check_int("hashes", hashes, 1, 1 << 16)
        self._seed = _check_int("hash_seed", hash_seed, 0, (1 << 63) - 1)
        self._tables: dict[int, list[list[int]]] = {}

    @property
    def width(self) -> int:
        """Cells per hash function (``m``, a power of two)."""
        return self._m

    @property
    def hashes(self) -> int:
        """Number of hash functions (``k``)."""
        return self._k

    @property
    def hash_seed(self) -> int:
        """The public seed of the hash functions (server and devices must agree on it)."""
        return self._seed

    def cell(self, row: int, index: int) -> int:
        """``h_row(index)``: the cell of domain index ``index`` under hash function ``row``."""
        table = self._tables.get(row)
        if table is None:
            table = self._tables[row] = sketch_table(self._seed, row)
        return tabulation_hash(table, index) & (self._m - 1)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(epsilon={self._epsilon!r}, domain={self._d}, "
            f"width={self._m}, hashes={self._k}, hash_seed={self._seed})"
        )


class CMS(_Sketch):
    """Apple's count-mean sketch (Apple Differential Privacy Team 2017, "Learning with Privacy
    at Scale", Algorithms 1-2).

    The device picks ``j`` uniformly in ``[k]``, encodes ``h_j(value)`` one-hot over ``m`` cells
    and flips every bit with probability ``1/(e^(eps/2) + 1)``: symmetric unary encoding (basic
    RAPPOR) of the cell, so the report is eps-LDP whatever the hash (two inputs differ in at most
    two bits of the vector for the same ``j``). Report: ``[j, hex]``, the hex of ``m/8`` bytes
    (bit ``c % 8`` of byte ``c // 8`` for cell ``c``; ``m >= 8`` for whole bytes, else one byte).

    A report supports item ``v`` when bit ``h_j(v)`` is set: probability ``p = e^(eps/2) /
    (e^(eps/2) + 1)`` for the user's own value and, over the draw of random hash functions,
    ``q = p/m + (1 - p)(1 - 1/m)`` for any other. The estimator ``(S_v - n q)/(p - q)`` is
    Apple's ``m/(m-1) (sum_j M[j, h_j(v)] / k ... - n/m)`` written with support counts.
    """

    name = "CMS"

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        width: int = 1024,
        hashes: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        super().__init__(
            epsilon=epsilon, domain=domain, width=width, hashes=hashes, hash_seed=hash_seed
        )
        self._cells = SUE(epsilon=self._epsilon, domain=self._m)  # the same run_epsilon

    def randomize(self, value: Any) -> list[Any]:
        j = secrets.randbelow(self._k)
        return [j, self._cells.randomize(self.cell(j, self.encode(value)))]

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        if self._k * (1 << self._m) > 1 << 14:
            raise ValueError("report_distribution enumerates k 2**m reports: use tiny sketches")
        x = self.encode(value)
        dist: dict[Any, Fraction] = {}
        for j in range(self._k):
            for bits, pr in self._cells.report_distribution(self.cell(j, x)).items():
                dist[(j, bits)] = pr / self._k
        return dist

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        p = self._cells.support_probabilities()[0]
        return p, p / self._m + (1 - p) * (1 - Fraction(1, self._m))


class HCMS(_Sketch):
    """Apple's Hadamard count-mean sketch (Apple 2017, Algorithms 3-4): one bit per report.

    The device picks ``j`` uniformly in ``[k]`` and ``l`` uniformly in ``[m]``, takes the
    Hadamard entry ``H[h_j(value), l] = (-1)^popcount(h_j(value) & l)`` and keeps its sign with
    probability ``p = e^eps / (e^eps + 1)``, flips it otherwise: eps-LDP. Report: ``[j, l, b]``
    with ``b = 1`` for ``+1``.

    A report supports ``v`` when ``b`` is the sign of ``H[h_j(v), l]``: probability ``p`` for
    the user's own value and, since two distinct Hadamard rows agree on exactly half the columns,
    ``q = p/m + (1 - 1/m)/2`` for any other over the draw of the hash functions.
    """

    name = "HCMS"

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        width: int = 1024,
        hashes: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        super().__init__(
            epsilon=epsilon, domain=domain, width=width, hashes=hashes, hash_seed=hash_seed
        )
        e = self._exp_lo
        self._keep = floor_scaled(e / (e + 1))

    def randomize(self, value: Any) -> list[int]:
        x = self.encode(value)
        j, col = secrets.randbelow(self._k), secrets.randbelow(self._m)
        plus = bin(self.cell(j, x) & col).count("1") % 2 == 0
        return [j, col, int(plus == bernoulli_scaled(self._keep))]

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        if self._k * self._m > 1 << 14:
            raise ValueError("report_distribution enumerates 2 k m reports: use tiny sketches")
        x = self.encode(value)
        p = Fraction(self._keep, SCALE)
        each = Fraction(1, self._k * self._m)
        dist: dict[Any, Fraction] = {}
        for j in range(self._k):
            h = self.cell(j, x)
            for col in range(self._m):
                plus = int(bin(h & col).count("1") % 2 == 0)
                dist[(j, col, plus)] = each * p
                dist[(j, col, 1 - plus)] = each * (1 - p)
        return dist

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        p = Fraction(self._keep, SCALE)
        return p, p / self._m + (1 - Fraction(1, self._m)) / 2


def olh_sketch_width(run_epsilon: float) -> int:
    """The power of two ``g`` that minimises OLH's variance factor
    ``(e^eps + g - 1)^2 / ((e^eps - 1)^2 (g - 1))`` (compared through logarithms, as
    :meth:`OLH._best_g`): Wang et al.'s optimum ``e^eps + 1`` moved to a neighbouring power of
    two, so that the low bits of a tabulation hash are exactly uniform over ``[g]``."""
    best, best_var = 2, math.inf
    for b in range(1, 17):
        g = 1 << b
        var = 2.0 * (run_epsilon + math.log1p((g - 1) * math.exp(-run_epsilon))) - math.log(g - 1)
        if var < best_var:
            best, best_var = g, var
    return best


class OLHSketch(_Sketch):
    """Optimal local hashing over a public family of ``k`` tabulation hash functions: a sketch of
    ``k`` rows of ``g`` cells whose reports carry ``log2(g)`` bits instead of HCMS's one.

    The device picks ``j`` uniformly in ``[k]`` and reports ``[j, y]`` with ``y`` ``g``-ary
    randomized response of its cell ``h_j(value)``: ``y = h_j(value)`` with probability
    ``p = e^eps / (e^eps + g - 1)``, each other cell with ``(1 - p)/(g - 1)``: eps-LDP whatever
    the hash. This is OLH (Wang, Blocki, Li and Jha, USENIX Security 2017) with the user's hash
    drawn from ``k`` public functions rather than a private key, so the server keeps a ``k x g``
    table and evaluates any item in ``O(k)``. A report supports ``v`` when ``y = h_j(v)``:
    probability ``p`` for the user's own value and, over the draw of the hash functions,
    ``q = 1/g`` for any other; the variance is the sketches' (module :mod:`dpkit.ldp._sketch`)
    with ``m = g``. ``g`` defaults to :func:`olh_sketch_width` (about ``e^eps + 1``): the
    variance at frequency 0 is then near ``n 4 e^eps / (e^eps - 1)^2``, below HCMS's
    ``n ((e^eps + 1)/(e^eps - 1))^2`` by the factor ``(e^eps + 1)^2 / (4 e^eps)`` (1.3 at eps 1,
    14 at eps 4).
    """

    name = "OLHSketch"

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        width: int | None = None,
        hashes: int = 1024,
        hash_seed: int = 0,
    ) -> None:
        eps = _check_epsilon(epsilon)
        g = olh_sketch_width(calibrated_epsilon(eps)) if width is None else width
        super().__init__(epsilon=eps, domain=domain, width=g, hashes=hashes, hash_seed=hash_seed)
        e = self._exp_lo
        keep = floor_scaled(e / (e + self._m - 1))
        self._keep = at_least_uniform(keep, self._m)
        self._keep_raised = self._keep != keep

    def randomize(self, value: Any) -> list[int]:
        x = self.encode(value)
        j = secrets.randbelow(self._k)
        return [j, grr_draw(self.cell(j, x), self._m, self._keep)]

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        if self._k * self._m > 1 << 14:
            raise ValueError("report_distribution enumerates k g reports: use tiny sketches")
        x = self.encode(value)
        return hashed_grr_distribution(
            [self.cell(j, x) for j in range(self._k)], self._m, self._keep
        )

    def support_probabilities(self) -> tuple[Fraction, Fraction]:
        return Fraction(self._keep, SCALE), Fraction(1, self._m)


# ------------------------------------------------------------------------------------------
# Heavy hitters over a domain too large to list: prefix extension
# ------------------------------------------------------------------------------------------
def prefix_lengths(bits: int, first: int = 12, step: int = 6) -> tuple[int, ...]:
    """The prefix lengths of the groups: ``first``, ``first + step``, ... up to ``bits``."""
    out = [min(first, bits)]
    while out[-1] < bits:
        out.append(min(out[-1] + step, bits))
    return tuple(out)


PEM_ORACLES = ("auto", "olh", "hcms")
#: public hash functions of PEM's OLH sketches (:func:`pem_sketch_shape`)
PEM_OLH_HASHES = 1 << 14
#: at most this many cells (hashes x width) in each of PEM's OLH sketches: 16 MiB of counts
PEM_OLH_CELLS = 1 << 21


def _noise_factors(run_epsilon: float, width: int) -> tuple[float, float]:
    """``q(1-q)/(p-q)^2`` of OLH at ``width`` and of HCMS: ``(e^eps + g - 1)^2 / ((e^eps -
    1)^2 (g - 1))`` and ``((e^eps + 1)/(e^eps - 1))^2``."""
    e = math.exp(min(run_epsilon, 30.0))
    olh = (e + width - 1) ** 2 / ((e - 1) ** 2 * (width - 1))
    return olh, ((e + 1) / (e - 1)) ** 2


def pem_oracle(run_epsilon: float) -> str:
    """``"olh"`` when its noise factor ``q(1-q)/(p-q)^2`` at PEM's default width
    (:func:`pem_sketch_shape`) is below HCMS's ``((e^eps + 1)/(e^eps - 1))^2``, else
    ``"hcms"``: OLH from about epsilon 1 up (the factors are equal near 0.98; 2.1 times below
    at epsilon 2, 12 times at 4).

    The variance of a prefix's estimate is ``n_g`` times the noise factor plus the collision
    term ``F / (k (g - 1))`` (module :mod:`dpkit.ldp._sketch`, ``F`` the sum of the other
    prefixes' squared counts). With PEM's ``2^14`` functions of width ``g`` OLH's collision
    term is about HCMS's (``1024 x 128``: ``k (g - 1) = 114,688`` against ``130,944`` at
    epsilon 1, larger from epsilon 2), so the noise factors decide. Measured on Zipf(1.1)
    populations (65,536 items at random in ``2^20`` or ``2^32``, top 100): at epsilon 2 and
    1M users mean recall 0.25 against HCMS's 0.18 (10 populations), at 10M 0.59 against 0.41;
    at epsilon 4 0.65 against 0.46 for the former OLH shape (``4 g* x 512``, whose collision
    term made it lose to HCMS at epsilon 2); at epsilon 1 0.118 against 0.109
    (``docs/benchmarks.md``)."""
    olh, hcms = _noise_factors(run_epsilon, pem_sketch_shape("olh", run_epsilon)[0])
    return "olh" if olh < hcms else "hcms"


def pem_sketch_shape(oracle: str, run_epsilon: float, users: int | None = None) -> tuple[int, int]:
    """Default ``(width, hashes)`` of PEM's sketches: HCMS ``1024 x 128``; OLH ``2 g* x 2^14``
    with ``g*`` :func:`olh_sketch_width` (fewer functions for fewer ``users``, below).

    A prefix round estimates candidates next to heavy prefixes, whose collisions add
    ``F / (k (g - 1))`` to each estimate's variance: ``2^14`` functions make that term small
    beside the noise ``n_g q(1-q)/(p-q)^2`` on Zipf populations of 1M users (with 512, as
    before, it outweighed OLH's lower noise at epsilon 2). Twice the variance-optimal width
    raises the noise factor by 10 to 25% (epsilon 1 to 4) and halves the collision term, which
    grows with the square of the population: at 10M users and epsilon 2 it found more of the
    top 100 than ``g*`` (0.59 against 0.52, 3 populations), at 1M as many (0.25 against 0.26).
    ``2^15`` functions found no more than ``2^14`` (0.25, 1M users, epsilon 2). From epsilon 5
    (``2 g* >= 256``) the functions are fewer, at most ``2^21`` cells in all (16 MiB of counts
    per group), which keeps ``k (g - 1)``, hence the collision term, as at epsilon 4. The
    server's tables take ``256 b`` bytes per function (``b`` bytes of the group's largest
    prefix), its queries ``O(hashes)`` per candidate.

    ``users``, a public estimate of the population, sizes the functions to it: ``k`` the power
    of two at least ``users / 256``, from 512 to ``2^14``. The collision term over the noise is
    about ``n_g sum f^2 / (k (g - 1) q(1-q)/(p-q)^2)`` (``f`` the prefixes' frequencies), which
    grows with the population: ``k`` proportional to it holds that ratio at its value for a
    million users over 4,096 functions, which found nearly as many of the top 100 as ``2^14``
    at a quarter of the server's time (0.241 against 0.253 at epsilon 2, 10 populations; 512:
    0.169), and a small collection's server queries fewer functions."""
    if oracle == "hcms":
        return 1024, 128
    width = min(2 * olh_sketch_width(run_epsilon), 1 << 16)
    hashes = PEM_OLH_HASHES
    if users is not None:  # k >= users / 256, a power of two in [512, 2^14]
        hashes = min(hashes, max(512, 1 << max(0, -(-users // 256) - 1).bit_length()))
    return width, min(hashes, PEM_OLH_CELLS // width)


def tree_oracle(run_epsilon: float) -> str:
    """The default oracle of :class:`TreeHistogram` and :class:`SFP`: ``"olh"`` when its noise
    factor at their width (:func:`tree_sketch_shape`) is at least 4 times below HCMS's, else
    ``"hcms"``: OLH from about epsilon 3. The margin pays for the collision term of their 512
    functions (smaller than HCMS's ``128 x 1023``), which grows with the square of the
    population (PEM before its ``2^14`` functions found fewer of the top 100 with OLH at
    epsilon 2). They keep fewer functions than PEM because SFP estimates all ``2^16`` pairs
    of each fragment group, in ``O(hashes)`` each."""
    olh, hcms = _noise_factors(run_epsilon, tree_sketch_shape("olh", run_epsilon)[0])
    return "olh" if 4.0 * olh <= hcms else "hcms"


def tree_sketch_shape(oracle: str, run_epsilon: float) -> tuple[int, int]:
    """Default ``(width, hashes)`` of :class:`TreeHistogram`'s and :class:`SFP`'s sketches:
    HCMS ``1024 x 128``; OLH ``4 g* x 512`` with ``g*`` :func:`olh_sketch_width` (four times
    the variance-optimal width raises the noise term by a factor under 2 at epsilon 1 to 4 yet
    cuts the collision term ``F / (k (g - 1))`` fourfold)."""
    if oracle == "hcms":
        return 1024, 128
    return min(4 * olh_sketch_width(run_epsilon), 1 << 16), 512


class PEM:
    """Prefix extending method for heavy hitters (Wang, Li, Lin, Li and Jha, "Locally
    differentially private heavy hitter identification", IEEE TDSC 2019), each group reporting
    through a sketch that can estimate any candidate prefix: :class:`OLHSketch` (``oracle="olh"``,
    optimal local hashing over public hash functions) or Apple's Hadamard count-mean sketch
    :class:`HCMS` (``oracle="hcms"``, one bit per report); by default (``"auto"``) the one of
    lower noise at this epsilon (:func:`pem_oracle`: OLH from about epsilon 1, over ``2^14``
    public hash functions so that collisions with heavy prefixes stay small).

    Items are integers of ``bits`` bits (hash or encode strings first). Group ``g`` (of
    ``len(lengths)``) learns the frequencies of the prefixes of length ``lengths[g]``; the device
    picks its group uniformly (independently of its value) and reports the top ``lengths[g]``
    bits of its item through the sketch over ``2**lengths[g]`` prefixes at the full epsilon:
    the report is eps-LDP. Report: ``[group, *sketch report]`` (``[group, j, y]`` for OLH,
    ``[group, j, l, b]`` for HCMS).

    Defaults: prefix lengths 12, 18, 24, ... (:func:`prefix_lengths`); sketch shapes from
    :func:`pem_sketch_shape` (the server queries ``keep 2**6`` candidates per round in
    ``O(hashes)`` each). ``users``, a public estimate of the number of users (not a count of
    the reports), sizes OLH's hash functions to the population (:func:`pem_sketch_shape`):
    a small collection then queries fewer functions; without it they are sized for a million
    users or more. Like every parameter of the shape, devices and server must be given the
    same ``users``.
    """

    name = "PEM"
    #: the sketch class of each oracle (the server substitutes its vectorised subclasses)
    _sketch_classes: ClassVar[dict[str, type[OLHSketch | HCMS]]] = {
        "olh": OLHSketch,
        "hcms": HCMS,
    }

    def __init__(
        self,
        *,
        epsilon: float,
        bits: int,
        lengths: Sequence[int] | None = None,
        oracle: str = "auto",
        width: int | None = None,
        hashes: int | None = None,
        hash_seed: int = 0,
        users: int | None = None,
    ) -> None:
        self._epsilon = _check_epsilon(epsilon)
        self._run_epsilon = calibrated_epsilon(self._epsilon)
        self._bits = _check_int("bits", bits, 2, 62)
        if oracle not in PEM_ORACLES:
            raise ValueError(f"oracle must be one of {PEM_ORACLES}, got {oracle!r}")
        auto = oracle == "auto"
        self._oracle = self._default_oracle(self._run_epsilon) if auto else oracle
        if lengths is None:
            lengths = prefix_lengths(self._bits)
        if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Sequence):
            raise TypeError(f"lengths must be a sequence of ints, got {lengths!r}")
        lens = tuple(_check_int("lengths[i]", v, 1, self._bits) for v in lengths)
        rising = all(lens[i] < lens[i + 1] for i in range(len(lens) - 1))
        if not lens or lens[-1] != self._bits or not rising:
            raise ValueError(f"lengths must increase strictly up to bits={self._bits}, got {lens}")
        if lens[0] > 24:
            raise ValueError(f"the first prefix length is enumerated: at most 24, got {lens[0]}")
        self._lengths = lens
        if users is not None:
            users = _check_int("users", users, 1, 1 << 62)
        default_width, default_hashes = self._default_shape(self._oracle, self._run_epsilon, users)
        self._width = _check_int("width", default_width if width is None else width, 2, 1 << 20)
        self._hashes = default_hashes if hashes is None else hashes
        self._seed = _check_int("hash_seed", hash_seed, 0, (1 << 63) - 2 - 62)
        self._groups: list[_Sketch] = [self._sketch(n, g) for g, n in enumerate(lens)]

    @staticmethod
    def _default_oracle(run_epsilon: float) -> str:
        """The oracle of ``oracle="auto"`` (:func:`pem_oracle`)."""
        return pem_oracle(run_epsilon)

    @staticmethod
    def _default_shape(oracle: str, run_epsilon: float, users: int | None) -> tuple[int, int]:
        """The default ``(width, hashes)`` (:func:`pem_sketch_shape`)."""
        return pem_sketch_shape(oracle, run_epsilon, users)

    def _sketch(self, length: int, g: int) -> _Sketch:
        """The sketch of group ``g`` over ``2**length`` prefixes (seed ``hash_seed + g``)."""
        cls = self._sketch_classes[self._oracle]
        return cls(
            epsilon=self._epsilon,
            domain=max(2, 1 << length),
            width=self._width,
            hashes=self._hashes,
            hash_seed=self._seed + g,
        )

    @property
    def epsilon(self) -> float:
        """The privacy parameter asked for (the law runs at :attr:`run_epsilon`)."""
        return self._epsilon

    @property
    def run_epsilon(self) -> float:
        """The epsilon every group's sketch is calibrated to (module docstring, Calibration)."""
        return self._run_epsilon

    @property
    def bits(self) -> int:
        """Bits per item."""
        return self._bits

    @property
    def oracle(self) -> str:
        """The frequency oracle of the groups: ``"olh"`` or ``"hcms"``."""
        return self._oracle

    @property
    def lengths(self) -> tuple[int, ...]:
        """Prefix length of each group."""
        return self._lengths

    @property
    def labels(self) -> tuple[int, ...]:
        """Every item (small ``bits`` only: for the exact checks)."""
        if self._bits > 12:
            raise ValueError("labels enumerates 2**bits items: use bits <= 12")
        return tuple(range(1 << self._bits))

    def encode(self, value: Any) -> int:
        """Check that ``value`` is an int of at most ``bits`` bits."""
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or not 0 <= value < 1 << self._bits
        ):
            raise ValueError(f"PEM: value must be an int in [0, 2**{self._bits}), got {value!r}")
        return value

    def _group_bits(self, g: int) -> int:
        """Bits of the prefix that group ``g`` reports."""
        return self._lengths[g]

    def group_value(self, g: int, x: int) -> int:
        """The sketch index that group ``g`` reports for item ``x``: its prefix."""
        return x >> (self._bits - self._group_bits(g))

    def randomize(self, value: Any) -> list[int]:
        x = self.encode(value)
        g = secrets.randbelow(len(self._lengths))
        return [g, *self._groups[g].randomize(self.group_value(g, x))]

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        x = self.encode(value)
        share = Fraction(1, len(self._lengths))
        dist: dict[Any, Fraction] = {}
        for g, sketch in enumerate(self._groups):
            prefix = self.group_value(g, x)
            for report, pr in sketch.report_distribution(prefix).items():
                dist[(g, *report)] = share * pr
        return dist

    def __repr__(self) -> str:
        return (
            f"{self.name}(epsilon={self._epsilon!r}, bits={self._bits}, lengths={self._lengths}, "
            f"oracle={self._oracle!r}, width={self._width}, hashes={self._hashes}, "
            f"hash_seed={self._seed})"
        )


class TreeHistogram(PEM):
    """TreeHist heavy hitters (Bassily, Nissim, Stemmer and Thakurta, "Practical locally private
    heavy hitters", NeurIPS 2017 / JMLR 2020), each group reporting through a sketch as in
    :class:`PEM` (``oracle``; the default oracle and shapes are :func:`tree_oracle` and
    :func:`tree_sketch_shape`, also :class:`SFP`'s).

    Half of the users walk down the prefix tree: each picks one of the ``L = len(lengths)``
    levels uniformly and reports the ``lengths[g]``-bit prefix of its item (as in :class:`PEM`).
    The other half form the estimation group ``L``: they report the whole item, and only they
    give the final counts of the items the tree discovers. The group is drawn independently of
    the value (``secrets.randbelow(2 L)``: ``r < L`` is level ``r``, the rest group ``L``, so
    each level has probability ``1/(2L)`` and the estimation group ``1/2``) and the report is the
    sketch report of the prefix at the full epsilon: eps-LDP, one report per user. The paper's
    tree is binary (one bit per level); ``lengths`` lets a level extend several bits at once.
    Report: ``[group, *sketch report]``.
    """

    name = "TreeHistogram"

    def __init__(
        self,
        *,
        epsilon: float,
        bits: int,
        lengths: Sequence[int] | None = None,
        oracle: str = "auto",
        width: int | None = None,
        hashes: int | None = None,
        hash_seed: int = 0,
    ) -> None:
        super().__init__(
            epsilon=epsilon,
            bits=bits,
            lengths=lengths,
            oracle=oracle,
            width=width,
            hashes=hashes,
            hash_seed=hash_seed,
        )
        self._groups.append(self._sketch(self._bits, len(self._lengths)))

    @staticmethod
    def _default_oracle(run_epsilon: float) -> str:
        """The oracle of ``oracle="auto"`` (:func:`tree_oracle`)."""
        return tree_oracle(run_epsilon)

    @staticmethod
    def _default_shape(oracle: str, run_epsilon: float, users: int | None) -> tuple[int, int]:
        """The default ``(width, hashes)`` (:func:`tree_sketch_shape`; only PEM takes
        ``users``)."""
        return tree_sketch_shape(oracle, run_epsilon)

    def _group_bits(self, g: int) -> int:
        return self._bits if g == len(self._lengths) else self._lengths[g]

    def randomize(self, value: Any) -> list[int]:
        x = self.encode(value)
        level = len(self._lengths)
        g = min(secrets.randbelow(2 * level), level)
        return [g, *self._groups[g].randomize(self.group_value(g, x))]

    def report_distribution(self, value: Any) -> dict[Any, Fraction]:
        x = self.encode(value)
        level = len(self._lengths)
        dist: dict[Any, Fraction] = {}
        for g, sketch in enumerate(self._groups):
            share = Fraction(1, 2) if g == level else Fraction(1, 2 * level)
            prefix = self.group_value(g, x)
            for report, pr in sketch.report_distribution(prefix).items():
                dist[(g, *report)] = share * pr
        return dist


def sfp_fragments(bits: int, size: int = 8) -> tuple[int, ...]:
    """Fragment ends of :class:`SFP`: ``ceil(bits / size)`` fragments of near-equal length (the
    longer first), as the cumulative bit counts from the top of the item."""
    count = -(-bits // size)
    ends, at = [], 0
    for i in range(count):
        at += bits // count + (1 if i < bits % count else 0)
        ends.append(at)
    return tuple(ends)


class SFP(TreeHistogram):
    """Apple's sequence fragment puzzle (Apple Differential Privacy Team 2017, "Learning with
    Privacy at Scale", section on discovering new words), each group reporting through a sketch
    as in :class:`PEM` (``oracle``).

    An item of ``bits`` bits is cut into fragments: fragment ``l`` is bits
    ``[lengths[l-1], lengths[l])`` counted from the top (default: fragments of at most 8 bits,
    :func:`sfp_fragments`). A public hash ``r(x)`` of ``hash_bits`` bits ties the fragments of
    one item together: fragment group ``l`` learns the frequencies of the pairs
    ``(r(x), fragment l of x)``, as the index ``r(x) 2**len_l + fragment``, over ``2**(hash_bits +
    len_l)`` values; the server assembles candidates from the pairs of equal ``r`` at every
    position, keeps those whose own hash is that ``r``, and counts them in the word group.
    Apple's devices send a fragment report and a word report, each at half the epsilon; here
    each device sends one report at the full epsilon and the users are split instead, as in
    :class:`TreeHistogram`: group ``r < L`` of ``r`` uniform in ``[0, 2L)`` (``L`` fragments)
    reports its fragment, the rest (half) the whole item. The group is drawn independently of
    the value and the report is the sketch report of one index at the full epsilon: eps-LDP.
    ``r`` is the low ``hash_bits`` bits of the public tabulation hash of seed
    ``hash_seed + L + 1`` (:func:`sketch_table`); groups use ``hash_seed + g``.
    Report: ``[group, *sketch report]``.
    """

    name = "SFP"

    def __init__(
        self,
        *,
        epsilon: float,
        bits: int,
        lengths: Sequence[int] | None = None,
        hash_bits: int = 8,
        oracle: str = "auto",
        width: int | None = None,
        hashes: int | None = None,
        hash_seed: int = 0,
    ) -> None:
        self._hash_bits = _check_int("hash_bits", hash_bits, 1, 16)
        b = _check_int("bits", bits, 2, 62)
        super().__init__(
            epsilon=epsilon,
            bits=b,
            lengths=sfp_fragments(b) if lengths is None else lengths,
            oracle=oracle,
            width=width,
            hashes=hashes,
            hash_seed=hash_seed,
        )
        if max(self.fragment_bits(g) for g in range(len(self._lengths))) > 16:
            raise ValueError(f"fragments are enumerated: at most 16 bits each, got {self._lengths}")
        self._hasher = self._sketch_classes["hcms"](
            epsilon=1.0,
            domain=1 << self._bits,
            width=1 << self._hash_bits,
            hashes=1,
            hash_seed=self._seed + len(self._lengths) + 1,
        )

    @property
    def hash_bits(self) -> int:
        """Bits of the public hash that ties an item's fragments together."""
        return self._hash_bits

    def fragment_bits(self, g: int) -> int:
        """Length in bits of fragment ``g``."""
        return self._lengths[g] - (self._lengths[g - 1] if g else 0)

    def word_hash(self, x: int) -> int:
        """``r(x)``: the public ``hash_bits``-bit hash of item ``x``."""
        return self._hasher.cell(0, x)

    def _sketch(self, length: int, g: int) -> _Sketch:
        """Fragment group ``g`` over ``2**(hash_bits + len_g)`` (hash, fragment) pairs; the word
        group (``length == bits`` after the fragments) over the items."""
        if g < len(self._lengths):
            length = self._hash_bits + self.fragment_bits(g)
        return super()._sketch(length, g)

    def group_value(self, g: int, x: int) -> int:
        """The whole item in the word group, else ``r(x) 2**len_g + fragment g of x``."""
        if g == len(self._lengths):
            return x
        size = self.fragment_bits(g)
        fragment = (x >> (self._bits - self._lengths[g])) & ((1 << size) - 1)
        return (self.word_hash(x) << size) | fragment

    def __repr__(self) -> str:
        return super().__repr__().replace(", oracle=", f", hash_bits={self._hash_bits}, oracle=")


# ------------------------------------------------------------------------------------------
# Reference shuffler
# ------------------------------------------------------------------------------------------
def shuffle_reports(reports: Iterable[Any]) -> list[Any]:
    """A uniformly random order of ``reports``: Fisher-Yates with ``secrets.randbelow`` (the OS
    CSPRNG, exactly uniform at every step), as a new list."""
    items = list(reports)
    for i in range(len(items) - 1, 0, -1):
        j = secrets.randbelow(i + 1)
        items[i], items[j] = items[j], items[i]
    return items
