"""Server-side aggregation: batches, shards, malformed reports, estimates with standard errors.

An aggregator keeps only sufficient statistics (per-item support counts for frequency oracles;
count, sum and sum of squares of the decoded values for mean mechanisms), so it can take reports
in batches of any size and be merged with aggregators of other shards. A malformed report (wrong
type, wrong length, out of range) is never an error: it is dropped and counted in ``rejected``,
and nothing else is lost.

Estimates carry per-item standard errors and normal confidence intervals from the protocol's
exact variance at the (clipped) estimated frequency. Post-processing (``"clip"``, ``"normalise"``,
``"simplex"``) changes only the point estimates, never the standard errors, which describe the raw
unbiased estimator.
"""

from __future__ import annotations

import dataclasses
import math
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import check_probability
from dpkit.errors import PrivacyParameterError
from dpkit.ldp._protocols import FrequencyOracle, MeanMechanism

__all__ = [
    "FrequencyAggregator",
    "FrequencyEstimate",
    "MeanAggregator",
    "MeanEstimate",
    "project_simplex",
]

FloatArray = npt.NDArray[np.float64]
POSTPROCESS = (None, "clip", "normalise", "simplex")


def project_simplex(v: Any) -> FloatArray:
    """Euclidean projection of ``v`` onto the probability simplex ``{x >= 0, sum x = 1}``.

    Sort-based algorithm (Duchi, Shalev-Shwartz, Singer and Chandra, ICML 2008): with
    ``u`` sorted decreasingly and ``rho`` the largest ``j`` such that
    ``u_j > (sum_{i<=j} u_i - 1)/j``, the projection is ``max(v - theta, 0)`` with
    ``theta = (sum_{i<=rho} u_i - 1)/rho``. This is also the "Norm-Sub" consistency step of
    Wang et al. (NDSS 2020).
    """
    x = np.asarray(v, dtype=np.float64).reshape(-1)
    u = np.sort(x)[::-1]
    css = np.cumsum(u)
    j = np.arange(1, x.size + 1)
    rho = int(np.flatnonzero(u - (css - 1.0) / j > 0)[-1]) + 1
    theta = (css[rho - 1] - 1.0) / rho
    return np.asarray(np.maximum(x - theta, 0.0), dtype=np.float64)


def _z(confidence: float) -> float:
    c = check_probability(confidence, name="confidence", open_low=True, open_high=True)
    return NormalDist().inv_cdf(0.5 + c / 2.0)


@dataclasses.dataclass(frozen=True)
class FrequencyEstimate:
    """Estimated counts of every domain item.

    ``counts`` are the point estimates after the requested post-processing (``raw_counts``
    without it, unbiased); ``std_errors`` are the square roots of the protocol's exact variance
    at the clipped raw frequency; ``ci_low``/``ci_high`` are ``raw +- z * std_error`` (normal
    approximation) at ``confidence``.
    """

    labels: tuple[Any, ...]
    counts: FloatArray
    raw_counts: FloatArray
    std_errors: FloatArray
    ci_low: FloatArray
    ci_high: FloatArray
    n: int
    rejected: int
    confidence: float
    postprocess: str | None

    @property
    def frequencies(self) -> FloatArray:
        """``counts / n`` (zeros when no report was accepted)."""
        return self.counts / self.n if self.n else np.zeros_like(self.counts)

    def as_dict(self) -> dict[Any, float]:
        """``{label: count}`` of the point estimates."""
        return {lab: float(c) for lab, c in zip(self.labels, self.counts, strict=True)}


@dataclasses.dataclass(frozen=True)
class MeanEstimate:
    """Estimated mean of values in [-1, 1] with its standard error and confidence interval.

    ``std_error`` plugs an estimate of the users' mean square into the mechanism's exact
    variance ``(a + b * mean_square) / n``: since ``E[t_hat^2] = a + (1 + b) t^2``, the mean
    square is estimated by ``(mean(t_hat^2) - a)/(1 + b)`` clipped to [0, 1] (for Duchi's
    mechanism, where ``1 + b = 0``, by the Jensen lower bound ``mean^2``, which can only make the
    error larger). ``std_error_empirical`` is the sample standard deviation of the per-report
    values over ``sqrt(n)``: it also counts the spread of the users' true values, so it is
    conservative for a fixed population (and right for a sample from a larger one).
    ``std_error_worst`` uses the worst case over all values. The interval is
    ``mean +- z * std_error``.
    """

    mean: float
    std_error: float
    std_error_empirical: float
    std_error_worst: float
    ci_low: float
    ci_high: float
    n: int
    rejected: int
    confidence: float


class FrequencyAggregator:
    """Accumulates reports of one frequency oracle; see the module docstring."""

    def __init__(self, protocol: FrequencyOracle) -> None:
        if not isinstance(protocol, FrequencyOracle):
            raise PrivacyParameterError(
                f"protocol must be a dpkit.ldp frequency oracle, got {type(protocol).__name__}"
            )
        self.protocol = protocol
        self._stat: npt.NDArray[np.int64] | None = None  # the protocol's additive statistic
        self._n = 0
        self._rejected = 0

    @property
    def n(self) -> int:
        """Number of accepted reports."""
        return self._n

    @property
    def rejected(self) -> int:
        """Number of malformed reports dropped."""
        return self._rejected

    @property
    def support(self) -> npt.NDArray[np.int64]:
        """Support counts ``S_v`` so far."""
        if self._stat is None:
            return np.zeros(self.protocol.d, dtype=np.int64)
        return np.array(self.protocol.support_from_statistic(self._stat), dtype=np.int64)

    def add(self, reports: Any) -> int:
        """Add a batch (client reports in a list, or the array from ``randomize_many``).

        Returns the number of reports accepted; the rest are counted in :attr:`rejected`.
        """
        try:
            arr, bad = self.protocol.coerce_reports(reports)
        except TypeError:  # not even iterable: one malformed report
            self._rejected += 1
            return 0
        stat = self.protocol.statistic(arr)
        accepted = int(arr.shape[0])
        # state changes only after every computation above has succeeded
        self._stat = stat if self._stat is None else self._stat + stat
        self._n += accepted
        self._rejected += bad
        return accepted

    def merge(self, other: FrequencyAggregator) -> FrequencyAggregator:
        """Add another shard's aggregator (same protocol parameters) into this one."""
        same = (
            isinstance(other, FrequencyAggregator)
            and type(other.protocol) is type(self.protocol)
            and repr(other.protocol) == repr(self.protocol)
            and other.protocol.labels == self.protocol.labels
            and other.protocol.support_probabilities() == self.protocol.support_probabilities()
        )
        if not same:
            raise PrivacyParameterError("can only merge aggregators of identical protocols")
        if other._stat is not None:
            self._stat = other._stat.copy() if self._stat is None else self._stat + other._stat
        self._n += other._n
        self._rejected += other._rejected
        return self

    def estimate(
        self, *, postprocess: str | None = None, confidence: float = 0.95
    ) -> FrequencyEstimate:
        """Unbiased counts ``(S_v - n q)/(p - q)`` with standard errors and intervals."""
        if postprocess not in POSTPROCESS:
            raise PrivacyParameterError(
                f"postprocess must be one of {POSTPROCESS}, got {postprocess!r}"
            )
        z = _z(confidence)
        proto, n = self.protocol, self._n
        p, q = proto.p, proto.q
        raw = np.asarray((self.support - n * q) / (p - q), dtype=np.float64)
        if n:
            f = np.clip(raw / n, 0.0, 1.0)
            se = np.sqrt(proto._count_variance(n, f))
        else:
            se = np.full(proto.d, math.inf)
        counts: FloatArray = raw.copy()
        if postprocess == "clip":
            counts = np.clip(raw, 0.0, float(n))
        elif postprocess == "normalise":
            pos = np.maximum(raw, 0.0)
            total = pos.sum()
            counts = pos * (n / total) if total > 0 else np.full(proto.d, n / proto.d)
        elif postprocess == "simplex":
            counts = project_simplex(raw / n) * n if n else np.zeros(proto.d)
        return FrequencyEstimate(
            labels=proto.labels,
            counts=counts,
            raw_counts=raw,
            std_errors=se,
            ci_low=raw - z * se,
            ci_high=raw + z * se,
            n=n,
            rejected=self._rejected,
            confidence=float(confidence),
            postprocess=postprocess,
        )


class MeanAggregator:
    """Accumulates reports of one mean mechanism (count, sum, sum of squares)."""

    def __init__(self, protocol: MeanMechanism) -> None:
        if not isinstance(protocol, MeanMechanism):
            raise PrivacyParameterError(
                f"protocol must be a dpkit.ldp mean mechanism, got {type(protocol).__name__}"
            )
        self.protocol = protocol
        self._n = 0
        self._sum = 0.0
        self._sumsq = 0.0
        self._rejected = 0

    @property
    def n(self) -> int:
        """Number of accepted reports."""
        return self._n

    @property
    def rejected(self) -> int:
        """Number of malformed reports dropped."""
        return self._rejected

    def add(self, reports: Any) -> int:
        """Add a batch of reports; malformed ones are dropped and counted."""
        try:
            arr, bad = self.protocol.coerce_reports(reports)
        except TypeError:
            self._rejected += 1
            return 0
        vals = self.protocol.decode(arr)
        s, ss = float(vals.sum()), float(np.dot(vals, vals))
        self._n += int(arr.size)
        self._sum += s
        self._sumsq += ss
        self._rejected += bad
        return int(arr.size)

    def merge(self, other: MeanAggregator) -> MeanAggregator:
        """Add another shard's aggregator (same mechanism parameters) into this one."""
        if (
            not isinstance(other, MeanAggregator)
            or repr(other.protocol) != repr(self.protocol)
            or type(other.protocol) is not type(self.protocol)
        ):
            raise PrivacyParameterError("can only merge aggregators of identical mechanisms")
        self._n += other._n
        self._sum += other._sum
        self._sumsq += other._sumsq
        self._rejected += other._rejected
        return self

    def estimate(self, *, confidence: float = 0.95) -> MeanEstimate:
        """The mean of the unbiased per-report values, with standard error and interval."""
        z = _z(confidence)
        n = self._n
        if n == 0:
            return MeanEstimate(
                math.nan,
                math.inf,
                math.inf,
                math.inf,
                -math.inf,
                math.inf,
                0,
                self._rejected,
                float(confidence),
            )
        mean = self._sum / n
        var = max(self._sumsq / n - mean * mean, 0.0) * n / max(n - 1, 1)
        a, b = self.protocol._ab()
        ms = (self._sumsq / n - a) / (1.0 + b) if 1.0 + b > 1e-09 else mean * mean
        ms = min(max(ms, 0.0), 1.0)
        se = math.sqrt(self.protocol.variance(n, mean_square=ms))
        return MeanEstimate(
            mean=mean,
            std_error=se,
            std_error_empirical=math.sqrt(var / n),
            std_error_worst=math.sqrt(self.protocol.worst_case_variance(n)),
            ci_low=mean - z * se,
            ci_high=mean + z * se,
            n=n,
            rejected=self._rejected,
            confidence=float(confidence),
        )
