"""Server side of the LDP protocols: validation, vectorised simulation, variances, decoding.

Each public class extends the device-side class of the same name in :mod:`dpkit.ldp.client`
(which holds the exact probabilities and ``randomize``) with:

* parameter validation through dpkit's shared validator, before the client sees them;
* ``randomize_many(values, source=None)``: the same law as ``randomize``, vectorised over a
  :class:`~dpkit.noise.RandomSource` (for simulations of millions of users);
* ``variance(n, ...)``: the exact variance of the estimator;
* ``aggregator()``: a server-side :class:`~dpkit.ldp.FrequencyAggregator` or
  :class:`~dpkit.ldp.MeanAggregator`;
* ``event``: the release described for dpkit's accountants.

Frequency oracles ("pure" protocols, Wang, Blocki, Li and Jha, USENIX Security 2017):
a report *supports* item v with probability ``p`` if the user holds v and ``q`` otherwise,
independently across users. With ``S_v`` the number of supporting reports among ``n``,
``c_v = (S_v - n q) / (p - q)`` is unbiased for the true count and, for a true relative frequency
``f``, ``Var[c_v] = n (f p (1-p) + (1-f) q (1-q)) / (p - q)^2``
``= n q (1-q) / (p-q)^2 + n f (1 - p - q) / (p - q)`` (their variance of a "pure" protocol),
with ``p`` and ``q`` the probabilities the implementation actually uses.
"""

from __future__ import annotations

import abc
import math
from collections.abc import Hashable, Sequence
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.rounding import up
from dpkit._numeric.validation import (
    check_epsilon,
    check_integer,
    check_nonnegative,
    check_probability,
)
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    DpEvent,
    PureDpEvent,
    RandomizedResponseEvent,
    randomized_response_epsilon,
)
from dpkit.ldp import client as _c
from dpkit.ldp._sampling import bernoulli_bitsliced, bernoulli_threshold
from dpkit.noise import RandomSource, resolve_source

__all__ = [
    "BLH",
    "GRR",
    "LOLOHA",
    "OLH",
    "OUE",
    "RAPPOR",
    "SUE",
    "Duchi",
    "FrequencyOracle",
    "HadamardResponse",
    "Hybrid",
    "MeanMechanism",
    "Piecewise",
    "RandomizedResponse",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
_BYTE_ONES = np.uint64(0x0101010101010101)


def _epsilon(epsilon: Any) -> float:
    eps = check_epsilon(epsilon)
    if eps > _c.MAX_EPSILON:
        raise PrivacyParameterError(
            f"epsilon must be at most {_c.MAX_EPSILON} for local protocols, got {epsilon!r}"
        )
    return eps


def _lifetime_epsilon(epsilon: float, lifetime_epsilon: Any) -> float:
    """The lifetime epsilon of a memoised protocol, validated by dpkit's rules
    (:func:`dpkit.ldp.client.checked_lifetime_epsilon` states the default and the order)."""
    life = None if lifetime_epsilon is None else _epsilon(lifetime_epsilon)
    try:
        return _c.checked_lifetime_epsilon(epsilon, life)
    except ValueError as exc:
        raise PrivacyParameterError(str(exc)) from None


def _domain(domain: Any) -> int | Sequence[Hashable]:
    if isinstance(domain, (int, np.integer)) and not isinstance(domain, (bool, np.bool_)):
        return check_integer(domain, name="domain", minimum=2, maximum=_c.MAX_DOMAIN)
    if isinstance(domain, (str, bytes)) or not isinstance(domain, Sequence):
        raise PrivacyParameterError(f"domain must be an int or a list of values, got {domain!r}")
    values = list(domain)
    if not 2 <= len(values) <= _c.MAX_DOMAIN:
        raise PrivacyParameterError(
            f"domain must have between 2 and {_c.MAX_DOMAIN} values, got {len(values)}"
        )
    try:
        distinct = len(set(values)) == len(values)
    except TypeError as exc:
        raise PrivacyParameterError("domain values must be hashable") from exc
    if not distinct:
        raise PrivacyParameterError("domain values must be distinct")
    return values


def _users(n: Any) -> int:
    return check_integer(n, name="n", minimum=1)


# ------------------------------------------------------------------------------------------
# Frequency oracles
# ------------------------------------------------------------------------------------------
class FrequencyOracle(_c._Categorical):
    """Server-side behaviour shared by every frequency oracle (see the module docstring)."""

    @property
    def p(self) -> float:
        """Probability that a report supports the user's own value."""
        return float(self.support_probabilities()[0])

    @property
    def q(self) -> float:
        """Probability that a report supports any other given value."""
        return float(self.support_probabilities()[1])

    @property
    def event(self) -> DpEvent:
        """The release as an accounting event (one report per user, replace-one neighbours):
        pure DP at :attr:`run_epsilon`, ``epsilon (1 - 2**-40)`` rounded down, the epsilon the
        probabilities were calibrated to (each rounded in the direction that keeps every ratio at
        most ``e^run_epsilon``; :mod:`dpkit.ldp.client`, Calibration): ``k`` protocols built
        with ``fl(e / k)`` fit a budget of ``e``."""
        return PureDpEvent(epsilon=self.run_epsilon)

    def variance(self, n: int, frequency: float = 0.0) -> float:
        """Exact variance of the estimated count of an item with true relative frequency
        ``frequency`` among ``n`` users: ``n (f p(1-p) + (1-f) q(1-q)) / (p-q)^2``
        (Wang et al., USENIX Security 2017)."""
        n = _users(n)
        f = check_probability(frequency, name="frequency")
        return float(self._count_variance(n, np.float64(f)))

    def _count_variance(self, n: int, f: Any) -> Any:
        p, q = self.p, self.q
        return n * (f * p * (1 - p) + (1 - f) * q * (1 - q)) / (p - q) ** 2

    # -- values ------------------------------------------------------------------------------
    def encode_many(self, values: Any) -> IntArray:
        """Domain indices of ``values``; refuses any value outside the domain (``ValueError``)."""
        if self._labels is None:
            arr = np.asarray(values)
            if arr.dtype.kind not in "iu":
                if arr.size == 0:
                    return np.zeros(0, dtype=np.int64)
                raise ValueError(f"{self.name}: values must be ints in [0, {self._d})")
            arr = arr.astype(np.int64, copy=False).reshape(-1)
            bad = (arr < 0) | (arr >= self._d)
            if bad.any():
                raise ValueError(
                    f"{self.name}: value {int(arr[np.argmax(bad)])} is outside the domain "
                    f"[0, {self._d})"
                )
            return arr
        index = self._index or {}
        if isinstance(values, np.ndarray) and values.dtype.kind in "iuUS":
            # map the distinct values once (np.unique sorts), then broadcast back
            uniq, inverse = np.unique(values.reshape(-1), return_inverse=True)
            codes = np.array([self._label_code(index, v.item()) for v in uniq], dtype=np.int64)
            return codes[inverse.reshape(-1)]
        seq = list(values)
        out = np.empty(len(seq), dtype=np.int64)
        for i, v in enumerate(seq):
            out[i] = self._label_code(index, v)
        return out

    def _label_code(self, index: dict[Hashable, int], value: Any) -> int:
        try:
            return index[value]
        except (KeyError, TypeError):
            raise ValueError(f"{self.name}: value {value!r} is not in the domain") from None

    def randomize_many(self, values: Any, source: RandomSource | None = None) -> Any:
        """Reports of many users at once (same law as :meth:`randomize`), as a numpy array."""
        src = resolve_source(source)
        return self._randomize_indices(self.encode_many(values), src)

    @abc.abstractmethod
    def _randomize_indices(self, x: IntArray, source: RandomSource) -> Any: ...

    # -- server ------------------------------------------------------------------------------
    @abc.abstractmethod
    def coerce_reports(self, reports: Any) -> tuple[Any, int]:
        """Turn a batch of reports into the array form; return it and the number rejected."""
        ...

    @abc.abstractmethod
    def support_counts(self, reports: Any) -> IntArray:
        """``S_v``: how many of the (well-formed, array-form) reports support each item."""
        ...

    def statistic(self, reports: Any) -> IntArray:
        """The additive sufficient statistic the aggregator keeps (default: support counts)."""
        return self.support_counts(reports)

    def support_from_statistic(self, stat: IntArray) -> IntArray:
        """Support counts from an accumulated :meth:`statistic`."""
        return stat

    def aggregator(self) -> Any:
        """A fresh server-side aggregator for this protocol."""
        from dpkit.ldp._aggregate import FrequencyAggregator

        return FrequencyAggregator(self)

    def estimate(self, reports: Any, **kwargs: Any) -> Any:
        """Aggregate one batch of reports and return the estimate (see ``FrequencyAggregator``)."""
        agg = self.aggregator()
        agg.add(reports)
        return agg.estimate(**kwargs)


def _int_reports(reports: Any, high: int) -> tuple[IntArray, int]:
    """Integer reports in ``[0, high)``: anything else is rejected and counted."""
    if isinstance(reports, np.ndarray) and reports.dtype.kind in "iu" and reports.ndim == 1:
        arr = reports.astype(np.int64, copy=False)
        ok = (arr >= 0) & (arr < high)
        return arr[ok], int(arr.size - np.count_nonzero(ok))
    seq = reports.tolist() if isinstance(reports, np.ndarray) else list(reports)
    good = [r for r in seq if type(r) is int and 0 <= r < high]
    return np.asarray(good, dtype=np.int64).reshape(-1), len(seq) - len(good)


class RandomizedResponse(FrequencyOracle, _c.RandomizedResponse):
    """Warner's randomized response (JASA 1965): truthful with probability ``p``,
    ``epsilon = ln(p / (1 - p))``.

    With ``n1`` "yes" reports among ``n``, the maximum-likelihood estimate of the proportion is
    ``pi_hat = (p - 1)/(2p - 1) + n1 / ((2p - 1) n)`` (unbiased; it can leave [0, 1]). For a fixed
    population its count ``n pi_hat`` has variance ``n p (1 - p) / (2p - 1)^2`` whatever the true
    proportion; Warner's ``pi (1 - pi)/n + p (1-p)/(n (2p-1)^2)`` for ``pi_hat`` adds the sampling
    variance of drawing the n respondents from a larger population.
    """

    def __init__(self, *, epsilon: float | None = None, p_truth: float | None = None) -> None:
        if (epsilon is None) == (p_truth is None):
            raise PrivacyParameterError("give exactly one of epsilon= and p_truth=")
        if epsilon is not None:
            _c.RandomizedResponse.__init__(self, epsilon=_epsilon(epsilon))
            return
        p = check_probability(p_truth, name="p_truth", open_low=True, open_high=True)
        if not p > 0.5:
            raise PrivacyParameterError(f"p_truth must lie in (1/2, 1), got {p_truth!r}")
        if math.log(p / (1 - p)) > _c.MAX_EPSILON:
            raise PrivacyParameterError(f"p_truth={p_truth!r} gives epsilon above {_c.MAX_EPSILON}")
        _c.RandomizedResponse.__init__(self, p_truth=p)

    @property
    def event(self) -> DpEvent:
        """Randomized response with the implemented ``p_truth`` rounded *up* to a double.

        Built from ``epsilon``, ``p_truth`` is a double already (a multiple of ``2**-64`` rounded
        down to 53 bits, calibrated to :attr:`run_epsilon`), so the event states it exactly and
        costs at most the double just above ``run_epsilon``: ``k`` of them built with ``fl(e /
        k)`` fit a budget of ``e``. A ``p_truth`` given as a rational need not be a double;
        rounding it to the nearest could lower it and understate epsilon (by about ``1e-4`` at
        epsilon 30). Rounding up only overstates.
        """
        return RandomizedResponseEvent(p_truth=up(self.p_truth), categories=2)

    def proportion(self, n: int, n1: int) -> float:
        """Warner's estimate ``(p - 1)/(2p - 1) + n1 / ((2p - 1) n)`` from ``n1`` "yes" reports.

        It maximises the likelihood ``L = lambda^n1 (1 - lambda)^(n - n1)`` with
        ``lambda = pi p + (1 - pi)(1 - p)`` over all real ``pi`` (so it can leave [0, 1]; clip
        it for the maximum over [0, 1]) and is unbiased.
        """
        n = _users(n)
        n1 = check_integer(n1, name="n1", minimum=0, maximum=n)
        p = self.p
        return (p - 1) / (2 * p - 1) + n1 / ((2 * p - 1) * n)

    def proportion_variance(
        self, n: int, proportion: float = 0.0, *, sampled: bool = False
    ) -> float:
        """Variance of :meth:`proportion`: ``p (1-p) / (n (2p-1)^2)`` for a fixed population;
        with ``sampled=True`` (respondents drawn from a larger population with true proportion
        ``proportion``) Warner's ``pi (1-pi)/n + p (1-p) / (n (2p-1)^2)``."""
        n = _users(n)
        pi = check_probability(proportion, name="proportion")
        p = self.p
        var = p * (1 - p) / (n * (2 * p - 1) ** 2)
        return var + pi * (1 - pi) / n if sampled else var

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> IntArray:
        p = self.p_truth
        if p.denominator & (p.denominator - 1) == 0 and p.denominator <= _c.SCALE:
            keep = bernoulli_threshold(source, p.numerator * (_c.SCALE // p.denominator), x.size)
        else:  # an arbitrary rational p_truth: within 2**-53 (simulation only)
            keep = source.uniform(x.size) < float(p)
        return np.where(keep, x, 1 - x)

    def encode_many(self, values: Any) -> IntArray:
        arr = np.asarray(values)
        if arr.dtype == np.bool_:
            arr = arr.astype(np.int64)
        return super().encode_many(arr)

    def coerce_reports(self, reports: Any) -> tuple[IntArray, int]:
        return _int_reports(reports, 2)

    def support_counts(self, reports: IntArray) -> IntArray:
        return np.bincount(reports, minlength=2).astype(np.int64)


class GRR(FrequencyOracle, _c.GRR):
    """Generalized randomized response (k-RR): see :class:`dpkit.ldp.client.GRR`.

    ``p = e^eps/(e^eps + d - 1)``, ``q = 1/(e^eps + d - 1)``; variance of a count at frequency
    0: ``n (d - 2 + e^eps) / (e^eps - 1)^2`` (Wang et al. 2017).
    """

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        _c.GRR.__init__(self, epsilon=_epsilon(epsilon), domain=_domain(domain))

    @property
    def event(self) -> DpEvent:
        """k-ary randomized response with the implemented ``p``, a double calibrated to
        :attr:`run_epsilon` and rounded down (:mod:`dpkit.ldp.client`, Calibration), so the
        rounding up below is exact; it would only overstate otherwise (see
        :attr:`RandomizedResponse.event`)."""
        return RandomizedResponseEvent(
            p_truth=up(self.support_probabilities()[0]), categories=self.d
        )

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> IntArray:
        keep = bernoulli_threshold(source, self._keep, x.size)
        other = source.integers(self._d - 1, x.size)
        other += other >= x
        return np.where(keep, x, other)

    def coerce_reports(self, reports: Any) -> tuple[IntArray, int]:
        return _int_reports(reports, self._d)

    def support_counts(self, reports: IntArray) -> IntArray:
        return np.bincount(reports, minlength=self._d).astype(np.int64)


class _UnaryServer(FrequencyOracle):
    """Array form of unary-encoding reports: ``uint8`` of shape ``(n, ceil(d/8))``."""

    @property
    def _pad_mask(self) -> int:
        r = self._d % 8
        return 0xFF if r == 0 else (1 << r) - 1

    def _bits(self, x: IntArray, source: RandomSource, flip_true: bool) -> npt.NDArray[np.uint8]:
        n, nb = x.size, (self._d + 7) // 8
        q = self.support_probabilities()[1]
        tq = q.numerator * (_c.SCALE // q.denominator)
        words = bernoulli_bitsliced(source, tq, (n * nb + 7) // 8)
        rows = words.view(np.uint8)[: n * nb].reshape(n, nb)
        rows[:, -1] &= np.uint8(self._pad_mask)
        users = np.arange(n)
        col = x >> 3
        bit = (np.uint8(1) << (x & 7).astype(np.uint8)).astype(np.uint8)
        if flip_true:  # true bit ~ Bernoulli(1 - q) = Bernoulli(p) when p = 1 - q
            rows[users, col] ^= bit
        else:  # true bit ~ Bernoulli(1/2)
            coin = source.bits(n).astype(np.uint8) * bit
            rows[users, col] = (rows[users, col] & ~bit) | coin
        return rows

    def coerce_reports(self, reports: Any) -> tuple[npt.NDArray[np.uint8], int]:
        nb = (self._d + 7) // 8
        if (
            isinstance(reports, np.ndarray)
            and reports.dtype == np.uint8
            and reports.ndim == 2
            and reports.shape[1] == nb
        ):
            ok = (reports[:, -1] & np.uint8(0xFF ^ self._pad_mask)) == 0
            return reports[ok], int(reports.shape[0] - np.count_nonzero(ok))
        seq = reports.tolist() if isinstance(reports, np.ndarray) else list(reports)
        good: list[bytes] = []
        for r in seq:
            if type(r) is not str or len(r) != 2 * nb:
                continue
            try:
                raw = bytes.fromhex(r)
            except ValueError:
                continue
            if len(raw) == nb and raw[-1] & (0xFF ^ self._pad_mask) == 0:
                good.append(raw)
        arr = np.frombuffer(b"".join(good), dtype=np.uint8).reshape(len(good), nb)
        return arr, len(seq) - len(good)

    def support_counts(self, reports: npt.NDArray[np.uint8]) -> IntArray:
        """Column sums of the report bits.

        Rows are read as 64-bit words; for each bit position ``k`` within a byte,
        ``(w >> k) & 0x0101...01`` leaves one 0/1 per byte, and summing up to 255 rows keeps each
        byte's count inside its byte (SWAR). The byte counts are then summed as integers.
        Rows that do not fill whole words go through ``np.unpackbits``.
        """
        n, nb = reports.shape
        total = np.zeros(nb * 8, dtype=np.int64)
        block = 255
        full = (n // block) * block if nb % 8 == 0 else 0
        step = block * 32
        for start in range(0, full, step):
            stop = min(start + step, full)
            words = np.ascontiguousarray(reports[start:stop]).view(np.uint64)
            cube = words.reshape(-1, block, nb // 8)
            for k in range(8):
                acc = ((cube >> np.uint64(k)) & _BYTE_ONES).sum(axis=1, dtype=np.uint64)
                total[k::8] += (
                    acc.view(np.uint8).reshape(acc.shape[0], nb).sum(axis=0, dtype=np.int64)
                )
        for start in range(full, n, 8192):
            bits = np.unpackbits(reports[start : min(start + 8192, n)], axis=1, bitorder="little")
            total += bits.sum(axis=0, dtype=np.int64)
        return total[: self._d]


class SUE(_UnaryServer, _c.SUE):
    """Symmetric unary encoding (basic RAPPOR): see :class:`dpkit.ldp.client.SUE`.

    Variance of a count at frequency 0: ``n e^(eps/2) / (e^(eps/2) - 1)^2`` (Wang et al. 2017).
    """

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        _c.SUE.__init__(self, epsilon=_epsilon(epsilon), domain=_domain(domain))

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> npt.NDArray[np.uint8]:
        return self._bits(x, source, flip_true=True)


class OUE(_UnaryServer, _c.OUE):
    """Optimized unary encoding: see :class:`dpkit.ldp.client.OUE`.

    Variance of a count at frequency 0: ``n 4 e^eps / (e^eps - 1)^2`` (Wang et al. 2017).
    """

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        _c.OUE.__init__(self, epsilon=_epsilon(epsilon), domain=_domain(domain))

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> npt.NDArray[np.uint8]:
        return self._bits(x, source, flip_true=False)


class RAPPOR(_UnaryServer, _c.RAPPOR):
    """Memoised randomized response (basic RAPPOR, L-SUE): see :class:`dpkit.ldp.client.RAPPOR`.

    One report per user is a "pure" protocol with ``p = p*``, ``q = 1 - p*``; the estimator and
    its exact variance are those of :class:`FrequencyOracle` at those probabilities. The
    simulation keeps the two stages apart (:meth:`permanent_many`, :meth:`instantaneous_many`)
    so that repeated collections from the same simulated devices reuse their permanent vectors.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        lifetime_epsilon: float | None = None,
    ) -> None:
        eps = _epsilon(epsilon)
        life = _lifetime_epsilon(eps, lifetime_epsilon)
        _c.RAPPOR.__init__(self, epsilon=eps, lifetime_epsilon=life, domain=_domain(domain))

    @property
    def lifetime_event(self) -> DpEvent:
        """Every report of one unchanged value together: pure DP at
        :attr:`lifetime_run_epsilon` (the permanent vector, post-processed)."""
        return PureDpEvent(epsilon=self.lifetime_run_epsilon)

    def _noisy_rows(
        self,
        x: IntArray | None,
        rows: npt.NDArray[np.uint8] | None,
        keep: Fraction,
        source: RandomSource,
    ) -> npt.NDArray[np.uint8]:
        n = x.size if x is not None else (0 if rows is None else rows.shape[0])
        nb = self.nbytes
        flip = _c.SCALE - keep.numerator * (_c.SCALE // keep.denominator)
        words = bernoulli_bitsliced(source, flip, (n * nb + 7) // 8)
        noise = words.view(np.uint8)[: n * nb].reshape(n, nb).copy()
        noise[:, -1] &= np.uint8(self._pad_mask)
        if x is not None:
            users = np.arange(n)
            bit = (np.uint8(1) << (x & 7).astype(np.uint8)).astype(np.uint8)
            noise[users, x >> 3] ^= bit
            return noise
        assert rows is not None
        return np.asarray(np.bitwise_xor(noise, rows), dtype=np.uint8)

    def permanent_many(
        self, values: Any, source: RandomSource | None = None
    ) -> npt.NDArray[np.uint8]:
        """Fresh permanent vectors of many devices (the law of :meth:`permanent`)."""
        src = resolve_source(source)
        return self._noisy_rows(self.encode_many(values), None, self.permanent_probability, src)

    def instantaneous_many(
        self, permanent: npt.NDArray[np.uint8], source: RandomSource | None = None
    ) -> npt.NDArray[np.uint8]:
        """One report from each memoised permanent vector (the law of :meth:`randomize`)."""
        src = resolve_source(source)
        rows, bad = self.coerce_reports(permanent)
        if bad:
            raise ValueError("permanent vectors must come from permanent_many")
        return self._noisy_rows(None, rows, self.instantaneous_probability, src)

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> npt.NDArray[np.uint8]:
        perm = self._noisy_rows(x, None, self.permanent_probability, source)
        return self._noisy_rows(None, perm, self.instantaneous_probability, source)


class OLH(FrequencyOracle, _c.OLH):
    """Optimized local hashing: see :class:`dpkit.ldp.client.OLH` (hash family and ``g``).

    ``p = e^eps/(e^eps + g - 1)``, ``q = 1/g``; with ``g = e^eps + 1`` the variance at frequency
    0 is ``n 4 e^eps / (e^eps - 1)^2`` (Wang et al. 2017); dpkit reports the exact value
    for the prime ``g`` in use. The server's cost is ``O(min(n, g^m) d)``: reports are grouped by
    ``(key, y)`` first.
    """

    def __init__(
        self, *, epsilon: float, domain: int | Sequence[Hashable], g: int | None = None
    ) -> None:
        if g is not None:
            g = check_integer(g, name="g", minimum=2, maximum=1 << 20)
        try:
            _c.OLH.__init__(self, epsilon=_epsilon(epsilon), domain=_domain(domain), g=g)
        except ValueError as exc:
            raise PrivacyParameterError(str(exc)) from None
        self._table: IntArray | None = None
        self._full: npt.NDArray[np.int32] | None = None

    @property
    def event(self) -> DpEvent:
        """Pure DP at :attr:`run_epsilon` (see :attr:`FrequencyOracle.event`). At an epsilon so
        small that ``p`` was raised to ``1/g`` (:func:`dpkit.ldp.client.at_least_uniform`), the
        law's own loss, that of g-ary randomized response with ``p`` rounded up, if larger."""
        if not self._keep_raised:
            return super().event
        p = up(self.support_probabilities()[0])
        return PureDpEvent(epsilon=max(self.run_epsilon, randomized_response_epsilon(p, self._g)))

    _DENSE_LIMIT = 1 << 22  # (key, y) pairs kept as a dense histogram up to this many

    @property
    def _space(self) -> int:
        return self.keys * self._g

    def _digits(self, idx: IntArray) -> IntArray:
        """Base-g digits, shape ``(len(idx), m)``."""
        powers = self._g ** np.arange(self._m, dtype=np.int64)
        out: IntArray = (idx[:, None] // powers[None, :]) % self._g
        return out

    def _value_digits(self) -> IntArray:
        """Base-g digits of every domain value, ``(d, m)`` (computed once)."""
        if self._table is None:
            self._table = self._digits(np.arange(self._d, dtype=np.int64))
        return self._table

    _TABLE_LIMIT = 1 << 22  # keys * d entries of the full hash table, kept when small

    def _hash_table(self) -> npt.NDArray[np.int32] | None:
        """``H[key, v]`` for every key and value when ``g^m d`` is small (computed once)."""
        if self.keys * self._d > self._TABLE_LIMIT:
            return None
        if self._full is None:
            dig = self._value_digits().astype(np.float64)
            a = self._digits(np.arange(self.keys, dtype=np.int64)).astype(np.float64)
            self._full = np.fmod(a @ dig.T, self._g).astype(np.int32)  # exact: < m g^2
        return self._full

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> IntArray:
        keys = source.integers(self.keys, x.size)
        table = self._hash_table()
        if table is not None:
            h = table[keys, x].astype(np.int64)
        else:
            h = (self._digits(keys) * self._value_digits()[x]).sum(axis=1) % self._g
        keep = bernoulli_threshold(source, self._keep, x.size)
        other = source.integers(self._g - 1, x.size)
        other += other >= h
        return np.stack([keys, np.where(keep, h, other)], axis=1)

    def coerce_reports(self, reports: Any) -> tuple[IntArray, int]:
        if (
            isinstance(reports, np.ndarray)
            and reports.dtype.kind in "iu"
            and reports.ndim == 2
            and reports.shape[1] == 2
        ):
            arr = reports.astype(np.int64, copy=False)
            ok = (
                (arr[:, 0] >= 0)
                & (arr[:, 0] < self.keys)
                & (arr[:, 1] >= 0)
                & (arr[:, 1] < self._g)
            )
            return arr[ok], int(arr.shape[0] - np.count_nonzero(ok))
        seq = reports.tolist() if isinstance(reports, np.ndarray) else list(reports)
        good = [
            (r[0], r[1])
            for r in seq
            if isinstance(r, (list, tuple))
            and len(r) == 2
            and type(r[0]) is int
            and type(r[1]) is int
            and 0 <= r[0] < self.keys
            and 0 <= r[1] < self._g
        ]
        return np.asarray(good, dtype=np.int64).reshape(-1, 2), len(seq) - len(good)

    def statistic(self, reports: IntArray) -> IntArray:
        """The histogram of ``(key, y)`` when the family is small, else the support counts."""
        if self._space <= self._DENSE_LIMIT:
            return np.bincount(
                reports[:, 0] * self._g + reports[:, 1], minlength=self._space
            ).astype(np.int64)
        return self.support_counts(reports)

    def support_from_statistic(self, stat: IntArray) -> IntArray:
        if self._space > self._DENSE_LIMIT:
            return stat
        return self._grouped_support(stat.reshape(self.keys, self._g))

    def _grouped_support(self, hist: IntArray) -> IntArray:
        """``S_v = sum_key hist[key, H_key(v)]``, over the keys that occur."""
        used = np.flatnonzero(hist.any(axis=1))
        table = self._hash_table()
        out = np.zeros(self._d, dtype=np.int64)
        step = max(1, (1 << 21) // self._d)
        for start in range(0, used.size, step):
            keys = used[start : start + step]
            if table is not None:
                h = table[keys].astype(np.int64)
            else:
                a = self._digits(keys).astype(np.float64)
                dig = self._value_digits().astype(np.float64)  # (d, m)
                h = np.fmod(a @ dig.T, self._g).astype(np.int64)  # exact: entries < m g^2
            out += np.take_along_axis(hist[keys], h, axis=1).sum(axis=0)
        return out

    def support_counts(self, reports: IntArray) -> IntArray:
        pairs = reports[:, 0] * self._g + reports[:, 1]
        if self._space <= self._DENSE_LIMIT:
            hist = np.bincount(pairs, minlength=self._space).reshape(self.keys, self._g)
            return self._grouped_support(hist.astype(np.int64))
        uniq, weights = np.unique(pairs, return_counts=True)
        keys, ys = uniq // self._g, uniq % self._g
        dig = self._value_digits().astype(np.float64)
        out = np.zeros(self._d, dtype=np.float64)
        step = max(1, (1 << 21) // self._d)
        for start in range(0, keys.size, step):
            a = self._digits(keys[start : start + step]).astype(np.float64)  # (k, m)
            h = np.fmod(a @ dig.T, self._g)
            hit = h == ys[start : start + step, None]
            out += weights[start : start + step].astype(np.float64) @ hit
        return np.rint(out).astype(np.int64)


class BLH(OLH, _c.BLH):
    """Binary local hashing: OLH with ``g = 2`` (Bassily and Smith 2015; Wang et al. 2017)."""

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        OLH.__init__(self, epsilon=epsilon, domain=domain, g=2)


class LOLOHA(OLH, _c.LOLOHA):
    """Longitudinal local hashing (LOLOHA, Arcolezi et al. EDBT 2023): see
    :class:`dpkit.ldp.client.LOLOHA` for the two memoised GRR stages and the spend.

    Each collection round is a "pure" protocol with ``p = p*`` (the chained keep probability)
    and ``q = 1/g``: the OLH estimator and its exact variance
    ``n (f p*(1-p*) + (1-f) q(1-q)) / (p* - q)^2`` apply round by round (the memoised draw is
    shared across rounds of one device, but each round's reports are independent across devices
    and each has the law of a first report). :meth:`randomize_rounds` simulates devices over
    many rounds with their memoised buckets.
    """

    def __init__(
        self,
        *,
        epsilon: float,
        domain: int | Sequence[Hashable],
        lifetime_epsilon: float | None = None,
        g: int | None = None,
    ) -> None:
        eps = _epsilon(epsilon)
        life = _lifetime_epsilon(eps, lifetime_epsilon)
        if g is not None:
            g = check_integer(g, name="g", minimum=2, maximum=1 << 20)
        try:
            _c.LOLOHA.__init__(
                self, epsilon=eps, domain=_domain(domain), lifetime_epsilon=life, g=g
            )
        except ValueError as exc:
            raise PrivacyParameterError(str(exc)) from None
        self._table = None
        self._full = None

    @property
    def event(self) -> DpEvent:
        """One report per device: pure DP at :attr:`run_epsilon` (``p*`` is rounded down to
        at most the GRR probability at ``run_epsilon``); if ``p2`` had to be raised to the
        uniform ``1/g`` (tiny epsilons), the law's own loss, if larger."""
        if not self._keep_raised:
            return PureDpEvent(epsilon=self.run_epsilon)
        p = up(self.support_probabilities()[0])
        return PureDpEvent(epsilon=max(self.run_epsilon, randomized_response_epsilon(p, self._g)))

    @property
    def lifetime_event(self) -> DpEvent:
        """Every report of a device while its value stays in one hashed bucket: pure DP at
        :attr:`lifetime_run_epsilon` (the memoised GRR draw, post-processed)."""
        return PureDpEvent(epsilon=self.lifetime_run_epsilon)

    @property
    def max_lifetime_event(self) -> DpEvent:
        """Every report of a device whose bucket changes at public times: at most ``g`` memoised
        buckets, pure DP at ``g * lifetime_run_epsilon`` (rounded up) between value histories
        with the same change times. The change times themselves are not protected: reports of
        one memo look alike, so a device whose value may change has no lifetime bound (see the
        known limitations)."""
        return PureDpEvent(epsilon=up(Fraction(self.lifetime_run_epsilon) * self._g))

    def _grr_many(self, b: IntArray, keep: Fraction, source: RandomSource) -> IntArray:
        t = keep.numerator * (_c.SCALE // keep.denominator)
        kept = bernoulli_threshold(source, t, b.size)
        other = source.integers(self._g - 1, b.size)
        other += other >= b
        return np.where(kept, b, other)

    def _buckets(self, keys: IntArray, x: IntArray) -> IntArray:
        table = self._hash_table()
        if table is not None:
            return table[keys, x].astype(np.int64)
        out: IntArray = (self._digits(keys) * self._value_digits()[x]).sum(axis=1) % self._g
        return out

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> IntArray:
        keys = source.integers(self.keys, x.size)
        perm = self._grr_many(self._buckets(keys, x), self._p1, source)
        return np.stack([keys, self._grr_many(perm, self._p2, source)], axis=1)

    def randomize_rounds(self, values: Any, source: RandomSource | None = None) -> IntArray:
        """Reports of ``n`` devices over ``T`` rounds, ``values`` of shape ``(T, n)``: each
        device keeps one key and memoises one GRR draw per hashed bucket (the law of
        :meth:`randomize` called ``T`` times). Returns an array of shape ``(T, n, 2)``."""
        src = resolve_source(source)
        arr = np.asarray(values)
        if arr.ndim != 2:
            raise PrivacyParameterError("values must have shape (rounds, devices)")
        rounds, n = arr.shape
        if n * self._g > 1 << 28:
            raise PrivacyParameterError("too many devices times buckets to simulate at once")
        keys = src.integers(self.keys, n)
        memo = np.full((n, self._g), -1, dtype=np.int64)
        users = np.arange(n)
        out = np.empty((rounds, n, 2), dtype=np.int64)
        for t in range(rounds):
            b = self._buckets(keys, self.encode_many(arr[t]))
            cur = memo[users, b]
            fresh = cur < 0
            if fresh.any():
                cur[fresh] = self._grr_many(b[fresh], self._p1, src)
                memo[users[fresh], b[fresh]] = cur[fresh]
            out[t, :, 0] = keys
            out[t, :, 1] = self._grr_many(cur, self._p2, src)
        return out


def _fwht(a: FloatArray) -> FloatArray:
    """Fast Walsh-Hadamard transform (natural order, unnormalised) of a power-of-two vector."""
    a = a.copy()
    h = 1
    size = a.size
    while h < size:
        v = a.reshape(-1, 2, h)
        x, y = v[:, 0, :].copy(), v[:, 1, :]
        v[:, 0, :] += y
        v[:, 1, :] = x - y
        h *= 2
    return a


class HadamardResponse(FrequencyOracle, _c.HadamardResponse):
    """Hadamard response (Acharya, Sun and Zhang 2019): see the client class.

    ``p = e^eps/(e^eps + 1)``, ``q = 1/2``: count variance at frequency 0 is
    ``n (e^eps + 1)^2 / (e^eps - 1)^2``. The server needs one histogram over ``[K]`` and one fast
    Walsh-Hadamard transform: ``S_v = (n + W[v + 1]) / 2``.
    """

    def __init__(self, *, epsilon: float, domain: int | Sequence[Hashable]) -> None:
        _c.HadamardResponse.__init__(self, epsilon=_epsilon(epsilon), domain=_domain(domain))

    def _randomize_indices(self, x: IntArray, source: RandomSource) -> IntArray:
        row = x + 1
        inside = bernoulli_threshold(source, self._keep, x.size)
        y = source.integers(self._K, x.size)
        even = (np.bitwise_count(row & y) & 1) == 0
        return np.where(even != inside, y ^ (row & -row), y)

    def coerce_reports(self, reports: Any) -> tuple[IntArray, int]:
        return _int_reports(reports, self._K)

    def support_counts(self, reports: IntArray) -> IntArray:
        hist = np.bincount(reports, minlength=self._K).astype(np.float64)
        w = _fwht(hist)
        s = (reports.size + w[1 : self._d + 1]) / 2
        return np.rint(s).astype(np.int64)


# ------------------------------------------------------------------------------------------
# Mean estimation
# ------------------------------------------------------------------------------------------
class MeanMechanism(_c._Numeric, abc.ABC):
    """Server-side behaviour of the mean mechanisms for values in ``[-1, 1]``.

    Each report decodes to an unbiased estimate ``t_hat`` of the user's value with
    ``Var[t_hat | t] = a + b t^2``; the mean of ``n`` of them has variance
    ``(a + b * mean_square) / n`` where ``mean_square`` is the users' average ``t^2``.
    """

    @property
    def event(self) -> DpEvent:
        """The release as an accounting event: pure DP at :attr:`run_epsilon` (see
        :attr:`FrequencyOracle.event`)."""
        return PureDpEvent(epsilon=self.run_epsilon)

    @abc.abstractmethod
    def _ab(self) -> tuple[float, float]: ...

    @property
    @abc.abstractmethod
    def n_reports(self) -> int:
        """Number of possible reports (they are ``0 .. n_reports - 1``)."""
        ...

    def variance(self, n: int, mean_square: float = 0.0) -> float:
        """Exact variance of the mean estimate over ``n`` users whose values have average square
        ``mean_square`` (in [0, 1]): ``(a + b mean_square) / n``."""
        n = _users(n)
        ms = check_nonnegative(mean_square, "mean_square")
        if ms > 1.0:
            raise PrivacyParameterError(f"mean_square must lie in [0, 1], got {mean_square!r}")
        a, b = self._ab()
        return (a + b * ms) / n

    def worst_case_variance(self, n: int) -> float:
        """``max over values in [-1, 1]`` of the variance of the mean estimate."""
        a, b = self._ab()
        return max(a, a + b) / _users(n)

    def encode_many(self, values: Any) -> FloatArray:
        """Values as floats; refuses NaN, infinities and anything outside ``[-1, 1]``."""
        arr = np.asarray(values)
        if arr.dtype.kind not in "iuf":
            raise ValueError(f"{self.name}: values must be real numbers in [-1, 1]")
        arr = arr.astype(np.float64).reshape(-1)
        bad = ~((arr >= -1.0) & (arr <= 1.0))
        if bad.any():
            raise ValueError(f"{self.name}: value {arr[np.argmax(bad)]!r} is outside [-1, 1]")
        return arr

    def randomize_many(self, values: Any, source: RandomSource | None = None) -> IntArray:
        """Reports of many users at once (same law as :meth:`randomize`, see ``_randomize_t``)."""
        return self._randomize_t(self.encode_many(values), resolve_source(source))

    @abc.abstractmethod
    def _randomize_t(self, t: FloatArray, source: RandomSource) -> IntArray: ...

    @abc.abstractmethod
    def decode(self, reports: IntArray) -> FloatArray:
        """Unbiased per-user estimates ``t_hat`` of well-formed reports."""
        ...

    def coerce_reports(self, reports: Any) -> tuple[IntArray, int]:
        """Well-formed reports (ints in ``[0, n_reports)``) and the number rejected."""
        return _int_reports(reports, self.n_reports)

    def aggregator(self) -> Any:
        """A fresh :class:`~dpkit.ldp.MeanAggregator`."""
        from dpkit.ldp._aggregate import MeanAggregator

        return MeanAggregator(self)

    def estimate(self, reports: Any, **kwargs: Any) -> Any:
        """Aggregate one batch of reports and return the mean estimate."""
        agg = self.aggregator()
        agg.add(reports)
        return agg.estimate(**kwargs)


class Duchi(MeanMechanism, _c.Duchi):
    """Duchi et al.'s mechanism: ``t_hat = +-B``, ``B = 1/(2p - 1) = (e^eps+1)/(e^eps-1)``,
    ``Var[t_hat | t] = B^2 - t^2`` (Wang et al., ICDE 2019)."""

    def __init__(self, *, epsilon: float) -> None:
        _c.Duchi.__init__(self, epsilon=_epsilon(epsilon))

    @property
    def B(self) -> float:
        """Magnitude of the decoded report."""
        return float(1 / (2 * self.p_keep - 1))

    @property
    def n_reports(self) -> int:
        return 2

    def _ab(self) -> tuple[float, float]:
        return self.B**2, -1.0

    def _randomize_t(self, t: FloatArray, source: RandomSource) -> IntArray:
        # P(sign = +) = (1 + t)/2 to within 2**-53 (simulation only; privacy does not depend on it)
        sign = source.uniform(t.size) < (1.0 + t) * 0.5
        keep = bernoulli_threshold(source, self._keep, t.size)
        out: IntArray = (sign == keep).astype(np.int64)
        return out

    def decode(self, reports: IntArray) -> FloatArray:
        return np.asarray((2.0 * reports - 1.0) * self.B, dtype=np.float64)


class Piecewise(MeanMechanism, _c.Piecewise):
    """The Piecewise mechanism on a grid: see :class:`dpkit.ldp.client.Piecewise`.

    With ``pi_h = P/L``, ``pi_l = (1-P)/N``, ``Delta = pi_h - pi_l``, ``M = L + N`` and cell
    values ``x_k = k + 1/2 - M/2``, a window starting at ``s`` (centre ``u = s - N/2``) gives
    ``E[x] = Delta L u`` and ``E[x^2] = pi_l M (M^2-1)/12 + Delta (L u^2 + L (L^2-1)/12)``. The
    estimate ``t_hat = x / D`` with ``D = Delta L N / 2`` has
    ``Var[t_hat | t] = (A0 + (Delta L - (Delta L)^2) (N t / 2)^2 + Delta L rho) / D^2`` with
    ``A0 = pi_l M (M^2-1)/12 + Delta L (L^2-1)/12`` and ``rho = phi (1 - phi)`` for the
    fractional part ``phi`` of ``(t + 1) N / 2``. :meth:`variance` drops the ``rho`` term, which
    is at most ``1 / (P N^2)`` (below 1e-9 at the default resolution). As ``L`` grows this tends
    to ``t^2/(e^(eps/2)-1) + (e^(eps/2)+3)/(3 (e^(eps/2)-1)^2)``, the variance Wang et al.
    (ICDE 2019) state for the continuous mechanism (checked in the tests).
    """

    def __init__(self, *, epsilon: float, resolution: int = 1 << 16) -> None:
        res = check_integer(resolution, name="resolution", minimum=1, maximum=1 << 24)
        _c.Piecewise.__init__(self, epsilon=_epsilon(epsilon), resolution=res)

    @property
    def n_reports(self) -> int:
        return self.M

    def _terms(self) -> tuple[float, float, float, float]:
        L, N, M = self.L, self.N, self.M
        P = float(self.p_high)
        pi_l = (1.0 - P) / N
        delta = P / L - pi_l
        a0 = pi_l * M * (M * M - 1.0) / 12.0 + delta * L * (L * L - 1.0) / 12.0
        return a0, delta * L, delta * L * N / 2.0, float(N)

    def _ab(self) -> tuple[float, float]:
        a0, c1, D, N = self._terms()
        return a0 / D**2, (c1 - c1 * c1) * (N / 2.0) ** 2 / D**2

    def _randomize_t(self, t: FloatArray, source: RandomSource) -> IntArray:
        # (t + 1) N / 2 in doubles: the rounding probability is within ~N 2**-52 of the exact
        # one (simulation only; privacy holds for any window start).
        sigma = (t + 1.0) * (0.5 * self.N)
        base = np.floor(sigma)
        s = base.astype(np.int64) + (source.uniform(t.size) < sigma - base)
        np.minimum(s, self.N, out=s)
        high = bernoulli_threshold(source, self._high, t.size)
        inside = s + source.integers(self.L, t.size)
        j = source.integers(self.N, t.size)
        outside = j + self.L * (j >= s)
        return np.where(high, inside, outside)

    def decode(self, reports: IntArray) -> FloatArray:
        D = self._terms()[2]
        return np.asarray((reports + 0.5 - 0.5 * self.M) / D, dtype=np.float64)


class Hybrid(MeanMechanism, _c.Hybrid):
    """The Hybrid mechanism (Wang et al., ICDE 2019): see :class:`dpkit.ldp.client.Hybrid`.

    ``Var[t_hat | t] = alpha Var_PM(t) + (1 - alpha) Var_Duchi(t)`` (same mean, mixture).
    """

    def __init__(self, *, epsilon: float, resolution: int = 1 << 16) -> None:
        eps = _epsilon(epsilon)
        res = check_integer(resolution, name="resolution", minimum=1, maximum=1 << 24)
        self._epsilon = eps
        run = self._run_epsilon = _c.calibrated_epsilon(eps)
        self._exp_lo = _c.exp_bounds(run)[0]
        # each part calibrates the asked epsilon itself, to the same run_epsilon
        self._pm = Piecewise(epsilon=eps, resolution=res)
        self._duchi = Duchi(epsilon=eps)
        self.piecewise, self.duchi = self._pm, self._duchi
        if run > _c.HYBRID_EPSILON_STAR:
            self._alpha = _c.floor_scaled(1 - 1 / _c.exp_bounds(run / 2)[1])
        else:
            self._alpha = 0

    @property
    def n_reports(self) -> int:
        return self.piecewise.M + 2

    def _ab(self) -> tuple[float, float]:
        a = float(self.alpha)
        pa, pb = self._pm._ab()
        da, db = self._duchi._ab()
        return a * pa + (1 - a) * da, a * pb + (1 - a) * db

    def _randomize_t(self, t: FloatArray, source: RandomSource) -> IntArray:
        use_pm = bernoulli_threshold(source, self._alpha, t.size)
        out = np.empty(t.size, dtype=np.int64)
        out[use_pm] = self._pm._randomize_t(t[use_pm], source)
        out[~use_pm] = self.piecewise.M + self._duchi._randomize_t(t[~use_pm], source)
        return out

    def decode(self, reports: IntArray) -> FloatArray:
        M = self.piecewise.M
        pm = reports < M
        out = np.empty(reports.size, dtype=np.float64)
        out[pm] = self._pm.decode(reports[pm])
        out[~pm] = self._duchi.decode(reports[~pm] - M)
        return out
