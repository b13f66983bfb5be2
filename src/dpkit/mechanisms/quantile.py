"""Private quantiles from per-group histogram counts: the exponential mechanism over bins.

The engine returns, per group, the counts ``c_1..c_m`` of the values in the bins
``[e_0, e_1), ..., [e_{m-1}, e_m]`` of public edges (values clamped to ``[e_0, e_m]`` first);
never sorted rows. With ``C_j = c_1 + ... + c_j`` (``C_0 = 0``, ``n = C_m``), a point of bin
``j`` has a rank (number of values below it) somewhere in ``[C_{j-1}, C_j]``. The utility of bin
``j`` for the quantile q is minus the distance from the target rank ``q n`` to that interval::

    u_q(j) = -dist(q n, [C_{j-1}, C_j]) = -max(C_{j-1} - q n,  q n - C_j,  0)

(the binned form of the rank utility ``-|rank(x) - q n|`` of the exponential mechanism for
quantiles, Smith 2011 "Privacy-preserving statistical estimation with optimal convergence
rates"; the intervals tile ``[0, n]`` so the best bin has utility 0). One bin is chosen with
probability ``∝ exp(eps' u_q(j) / (2 Delta))`` (Dwork and Roth, Def. 3.4; the scale factor
and its floating-point charge come from :class:`~dpkit.mechanisms.ExponentialMechanism`, the
selection is its Gumbel-max rule vectorised over groups), then a point uniformly from a fixed
grid of ``points_per_bin`` points inside it,
``e_{j-1} + (i + 1/2) (e_j - e_{j-1}) / points_per_bin``.
The output is a function of two discrete choices and the public edges, so no data-dependent
floating-point value is released. The base measure is uniform over bins (not over length):
every bin gets the same prior weight whatever its width.

Sensitivity. Write ``a = C_{j-1} - q n`` and ``b = C_j - q n``; ``dist = max(a, -b, 0)`` is
1-Lipschitz in ``max(|da|, |db|)``. Adding one row below bin j moves both by ``1 - q``, inside
bin j moves ``a`` by ``-q`` and ``b`` by ``1 - q``, above bin j both by ``-q``. So a unit adding
or removing up to ``m = max_rows_per_partition`` rows of the group changes every utility by at
most ``Delta = m max(q, 1 - q)``; under ``replace`` (remove then add) ``2 m max(q, 1 - q)``.

Budget: ``K`` quantiles and up to ``L = max_partitions`` groups per unit. Every per-group,
per-quantile selection gets ``epsilon / (K L)`` (rounded down) and basic composition gives
epsilon for the whole release over all groups. :attr:`BinnedQuantile.event` says exactly that.

Exact utilities. ``q`` is used on the grid ``2**-20`` (``q' = round(q 2**20) / 2**20``, public,
within ``2**-21`` of q) and each bin count is clamped to ``[0, floor(2**42 / m)]`` (a clamp is
1-Lipschitz per bin, so neighbouring inputs stay neighbours), so ``n <= 2**42`` and
``2**20 u`` is computed exactly in int64; it is then clamped to ``[-2**53, 0]`` (1-Lipschitz, so
the sensitivity holds) and divided by ``2**20``: the utilities handed to the exponential
mechanism are exact.

Sparse counts and fine grids. With many bins most are empty. Between two non-empty bins (and
before the first, after the last) the cumulative counts are constant, so every empty bin of such
a run has the same utility ``-|q n - C|``. :meth:`BinnedQuantile.release_sparse` takes only the
non-empty bins of each group and selects among the runs and the non-empty bins, a run of ``w``
empty bins with weight ``w``: the arg-max of ``factor u + ln w + Gumbel(0, 1)`` (the maximum of
``w`` independent Gumbel(0, 1) variables is Gumbel(ln w, 1)), then a bin uniformly within the
chosen run (exact integer draw). The bin released has exactly the law of the per-bin mechanism
above, so the privacy argument is unchanged and the cost is linear in the number of non-empty
bins, whatever the number of bins (e.g. ``2**20``). Floating point: ``ln w`` (``w <= 2**62``,
so ``|ln w| < 43``) is within a few ulps, below ``2**-46``, and its addition is one more rounding
of a number below ``2**10``, below ``2**-43``; with the errors listed in
:mod:`dpkit.mechanisms.selection` the total error of a noisy score stays below ``2**-39``, which
the selection slack already charges. With equal bins this is, as the bins get finer, the
exponential mechanism with the length base measure over the interval between sorted values
(Smith 2011), on a grid of public points.

Joint release of several quantiles (``joint=True``). Instead of ``K`` selections at
``epsilon / (K L)`` each, one exponential mechanism per group picks the tuple of bins
``(j_1, ..., j_K)`` with probability ``∝ exp(-g max_k a_k(j_k))`` over all ``bins**K`` tuples
(base measure uniform over tuples), where ``a_k = min(d_k / Delta_k, 2**30)``, ``d_k`` the
rank distance of quantile k above and ``Delta_k`` its sensitivity, and ``g`` the gain of an
:class:`~dpkit.mechanisms.ExponentialMechanism` at ``epsilon / L`` with sensitivity
``1 + 2**-20``, i.e. ``g = (epsilon / L - 2 slack) / (2 (1 + 2**-20))``. This is the
exponential mechanism over the ``l_inf`` ball (the K-norm mechanism of Hardt and Talwar 2010 with
the max norm, run over rank distances): each coordinate uses the whole budget where it is the
largest, instead of a fixed share. Privacy: each ``d_k / Delta_k`` moves by at most 1 between
neighbours (Sensitivity above), so does its clamp, and the rounding of the division to a double
(computed ``a_k``, below ``2**30``, within ``3 2**-53 2**30 < 2**-21`` of the exact value) moves
it by at most ``2**-20`` more; the maximum of such functions moves by at most ``1 + 2**-20``,
so the utility ``-max_k a_k`` has that sensitivity and Dwork and Roth (Thm 3.10) give
``epsilon / L`` per group, ``epsilon`` over ``L`` groups. One quantile: the law of the
per-quantile mechanism up to the factor ``1 + 2**-20``. Accuracy: for two quantiles far apart
in a large group each ``a_k`` has about the density ``∝ (|a| + 1/g) exp(-g |a|)``, median
``1.15 / g``, where an even split (``g / 2`` each) has ``ln 2 / (g / 2) = 1.39 / g``; in a small
group, where an upper quantile's utility is nearly flat, the other quantile gets nearly the whole
budget. At most :data:`MAX_JOINT` quantiles (the floating-point bound below).

Sampling (exact law, by layers): ``exp(-g t) = int_t^inf g exp(-g s) ds``, so with the sorted
distinct values ``t_0 = 0 < t_1 < ... < t_M`` of all ``a_k(j)`` and ``W_k(i)`` the number of
bins with ``a_k <= t_i``, pick a layer ``i`` with probability ``∝ prod_k W_k(i) (exp(-g t_i)
- exp(-g t_{i+1}))`` (``exp(-g t_{M+1}) = 0``), then each ``j_k`` uniformly among the
``W_k(i)`` bins with ``a_k <= t_i`` (exact integer draws). A tuple whose largest ``a_k`` is
``t_l`` is reachable from the layers ``i >= l`` and its probability telescopes to ``exp(-g t_l)
/ Z``: the law above. The layer is the arg-max of ``ln w_i + Gumbel(0, 1)`` with ``ln w_i =
sum_k ln W_k(i) - g (t_i - t_0) + ln(-expm1(-g (t_{i+1} - t_i)))`` (the last layer without
the last term). Floating point: ``t_0 = 0``; each ``t_{i+1} - t_i`` is one rounding of the
exact difference of two doubles, ``-expm1`` and ``ln`` are accurate to a few ulps, and with
``K <= 8`` the sum of the ``ln W_k(i)`` (each below 44) stays below ``2**9``; outside an event of
probability below ``2**-1000`` only layers whose log-weight is within 1,492 of the largest can
win (as in :mod:`dpkit.mechanisms.selection`), so every term is below ``2**11`` and each noisy
score is within ``2**-39`` of its exact value. Scores moved by at most ``eta`` move each layer's
probability, hence each tuple's (a sum over layers times exact integer draws), by a factor
within ``e^(+-2 eta)``: the selection slack charged in ``g`` covers it. The cost is
``O(K R log R)`` per group for ``R`` runs of the sparse counts.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.grids import UniformEdges
from dpkit._numeric.rounding import down, up
from dpkit._numeric.validation import (
    check_epsilon,
    check_finite,
    check_integer,
    check_probability,
)
from dpkit._numeric.values import is_missing_type, read_column
from dpkit.errors import PrivacyParameterError
from dpkit.events import (
    DpEvent,
    Neighbouring,
    SelfComposedEvent,
    as_neighbouring,
)
from dpkit.mechanisms.selection import ExponentialMechanism
from dpkit.noise import RandomSource, gumbel, resolve_source

__all__ = ["BinnedQuantile", "BinnedQuantileInterval", "SparseGroup"]

#: One group's non-empty bins: strictly increasing bin indices and their (positive) counts.
SparseGroup = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]

_Q_BITS = 20
_Q_SCALE = 1 << _Q_BITS
_N_LIMIT = 1 << 42
_U_LIMIT = 1 << 53
_CHUNK = 1 << 18  # noise values per block (2 MiB of doubles)
_A_LIMIT = float(1 << 30)  # clamp of the joint selection's normalised distances
_JOINT_SENSITIVITY = 1.0 + 2.0**-20  # of -max_k a_k, rounding of the divisions included
#: Most quantiles of one joint selection (module docstring, floating point).
MAX_JOINT = 8


def _check_edges(edges: Any) -> tuple[float, ...] | UniformEdges:
    if isinstance(edges, UniformEdges):  # finite and increasing by construction
        return edges
    if isinstance(edges, (str, bytes)):
        raise PrivacyParameterError("edges must be a sequence of numbers")
    try:
        raw = list(edges)
    except TypeError as exc:
        raise PrivacyParameterError(f"edges must be a sequence of numbers, got {edges!r}") from exc
    if len(raw) > 64 and all(type(e) is float for e in raw):
        # fast path for long grids of Python floats (decided by type): checked as one array
        arr = np.asarray(raw, dtype=np.float64)
        if not np.all(np.isfinite(arr)):
            raise PrivacyParameterError("edges must be finite numbers")
        if not np.all(arr[1:] > arr[:-1]):
            raise PrivacyParameterError("edges must be strictly increasing")
        return tuple(raw)
    out = tuple(check_finite(e, f"edges[{i}]") for i, e in enumerate(raw))
    if len(out) < 2:
        raise PrivacyParameterError("edges need at least two values (one bin)")
    if not all(a < b for a, b in itertools.pairwise(out)):
        raise PrivacyParameterError("edges must be strictly increasing")
    return out


def _check_quantiles(quantiles: Any) -> tuple[float, ...]:
    if isinstance(quantiles, (int, float, np.floating, np.integer)):
        quantiles = [quantiles]
    if isinstance(quantiles, (str, bytes)):
        raise PrivacyParameterError("quantiles must be numbers in [0, 1]")
    qs = tuple(check_probability(q, name="quantile") for q in quantiles)
    if not qs:
        raise PrivacyParameterError("give at least one quantile")
    return qs


def _bin_counts(values: Any, bins: int) -> npt.NDArray[np.int64]:
    """Counts as a (groups, bins) int64 array, each clamped to ``[0, floor(2**42 / bins)]``.

    Decided by type: a typed column or frame (pandas ``Int64``, polars, pyarrow, ...) is read
    by its declared dtype (:func:`dpkit._numeric.values.read_column`), lists element by element;
    a missing count (a null, ``None``, ``pandas.NA``) is 0, never an error.
    """
    col = read_column(values)
    if col is not None:
        if col.kind != "int" or col.data is None:
            raise PrivacyParameterError(
                f"bin counts must be integers, got a column of declared dtype {col.declared}"
            )
        values = col.data  # nulls are 0
    if isinstance(values, (list, tuple)):
        try:
            x = np.array(values, dtype=object)
        except (ValueError, TypeError) as exc:
            raise PrivacyParameterError("bin counts must be a rectangular array") from exc
    else:
        x = np.asarray(values)
    if x.dtype.kind not in "iu":
        flat = [0 if is_missing_type(type(v)) else v for v in x.reshape(-1)]
        if x.dtype.kind == "O" and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) for v in flat
        ):
            x = np.array([min(max(int(v), 0), _N_LIMIT) for v in flat], dtype=np.int64).reshape(
                x.shape
            )
        else:
            raise PrivacyParameterError(f"bin counts must be integers, got dtype {x.dtype}")
    if x.ndim not in (1, 2) or x.shape[-1] != bins:
        raise PrivacyParameterError(
            f"bin counts must have shape (bins,) or (groups, bins) with bins={bins}, got {x.shape}"
        )
    cap = _N_LIMIT // bins
    out: npt.NDArray[np.int64]
    if x.dtype.kind == "u":
        out = np.minimum(x, np.uint64(cap)).astype(np.int64)
    else:
        out = np.clip(x.astype(np.int64, copy=False), 0, cap)
    return out.reshape(-1, bins)


@dataclass(frozen=True, kw_only=True)
class BinnedQuantile:
    """Quantiles of a bounded value per group, from histogram counts (module docstring).

    Build with :meth:`from_epsilon`. ``epsilon`` covers the whole release: all quantiles, all
    groups, with up to ``max_partitions`` groups and ``max_rows_per_partition`` rows per group
    per privacy unit.
    """

    epsilon: float
    quantiles: tuple[float, ...]
    edges: tuple[float, ...] | UniformEdges
    max_rows_per_partition: int = 1
    max_partitions: int = 1
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE
    points_per_bin: int = 32
    joint: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.joint, bool):
            raise PrivacyParameterError(f"joint must be a bool, got {self.joint!r}")
        object.__setattr__(self, "epsilon", check_epsilon(self.epsilon))
        object.__setattr__(self, "quantiles", _check_quantiles(self.quantiles))
        if self.joint and len(self.quantiles) > MAX_JOINT:
            raise PrivacyParameterError(
                f"a joint selection takes at most {MAX_JOINT} quantiles, got {len(self.quantiles)}"
            )
        object.__setattr__(self, "edges", _check_edges(self.edges))
        object.__setattr__(
            self,
            "max_rows_per_partition",
            check_integer(self.max_rows_per_partition, name="max_rows_per_partition", minimum=1),
        )
        object.__setattr__(
            self,
            "max_partitions",
            check_integer(self.max_partitions, name="max_partitions", minimum=1),
        )
        object.__setattr__(self, "neighbouring", as_neighbouring(self.neighbouring))
        object.__setattr__(
            self,
            "points_per_bin",
            check_integer(self.points_per_bin, name="points_per_bin", minimum=1, maximum=1 << 20),
        )
        # Builds the per-quantile mechanisms now so that invalid budgets fail at construction.
        self.mechanisms  # noqa: B018

    @classmethod
    def from_epsilon(
        cls,
        *,
        epsilon: float,
        quantiles: float | Sequence[float],
        edges: Sequence[float] | UniformEdges,
        max_rows_per_partition: int = 1,
        max_partitions: int = 1,
        neighbouring: str | Neighbouring = Neighbouring.ADD_REMOVE,
        points_per_bin: int = 32,
        joint: bool = False,
    ) -> BinnedQuantile:
        """epsilon-DP quantiles over the bins of ``edges``; see the class docstring.

        ``joint=True``: one selection of all the quantiles of a group together (module
        docstring, Joint release), more accurate than a split of the budget when ``K > 1``.
        """
        return cls(
            epsilon=epsilon,
            quantiles=_check_quantiles(quantiles),
            edges=_check_edges(edges),
            max_rows_per_partition=max_rows_per_partition,
            max_partitions=max_partitions,
            neighbouring=as_neighbouring(neighbouring),
            points_per_bin=points_per_bin,
            joint=joint,
        )

    # -- parameters -------------------------------------------------------------------------
    @property
    def bins(self) -> int:
        return len(self.edges) - 1

    @property
    def grid_quantiles(self) -> tuple[float, ...]:
        """The quantiles actually targeted: ``round(q 2**20) / 2**20``."""
        return tuple(round(q * _Q_SCALE) / _Q_SCALE for q in self.quantiles)

    @property
    def epsilon_each(self) -> float:
        """``epsilon / (K L)`` rounded down: the budget of one group's one quantile
        (``epsilon / L`` with ``joint``: the budget of one group's joint selection)."""
        k = (1 if self.joint else len(self.quantiles)) * self.max_partitions
        return down(Fraction(self.epsilon) / k)

    @property
    def joint_mechanism(self) -> ExponentialMechanism:
        """The joint selection of one group (``joint=True``): epsilon / L, sensitivity
        ``1 + 2**-20`` on the utility ``-max_k a_k`` (module docstring)."""
        return ExponentialMechanism(
            epsilon=self.epsilon_each,
            sensitivity=_JOINT_SENSITIVITY,
            neighbouring=self.neighbouring,
        )

    def sensitivity(self, q: float) -> float:
        """``c m max(q', 1 - q')``, c = 1 (add/remove) or 2 (replace); exact (dyadic)."""
        qq = Fraction(round(q * _Q_SCALE), _Q_SCALE)
        c = 2 if self.neighbouring is Neighbouring.REPLACE else 1
        return up(c * self.max_rows_per_partition * max(qq, 1 - qq))

    @property
    def mechanisms(self) -> tuple[ExponentialMechanism, ...]:
        """One exponential mechanism per quantile (same epsilon, own sensitivity)."""
        return tuple(
            ExponentialMechanism(
                epsilon=self.epsilon_each,
                sensitivity=self.sensitivity(q),
                neighbouring=self.neighbouring,
            )
            for q in self.quantiles
        )

    @property
    def event(self) -> DpEvent:
        """``K L`` exponential mechanisms at ``epsilon / (K L)`` each (``L`` at ``epsilon /
        L`` with ``joint``)."""
        if self.joint:
            ev = self.joint_mechanism.event
            count = self.max_partitions
            return ev if count == 1 else SelfComposedEvent(event=ev, count=count)
        ev = self.mechanisms[0].event
        count = len(self.quantiles) * self.max_partitions
        return ev if count == 1 else SelfComposedEvent(event=ev, count=count)

    # -- utilities --------------------------------------------------------------------------
    def utilities(self, bin_counts: Any) -> npt.NDArray[np.float64]:
        """Exact utilities, shape (groups, K, bins) (module docstring)."""
        c = _bin_counts(bin_counts, self.bins)
        cum = np.zeros((c.shape[0], self.bins + 1), dtype=np.int64)
        np.cumsum(c, axis=1, out=cum[:, 1:])
        n = cum[:, -1:]
        scaled = cum * _Q_SCALE  # <= 2**62
        out = np.empty((c.shape[0], len(self.quantiles), self.bins), dtype=np.float64)
        for i, q in enumerate(self.quantiles):
            p = round(q * _Q_SCALE)
            target = n * p  # 2**20 q' n, exact
            d = np.maximum(np.maximum(scaled[:, :-1] - target, target - scaled[:, 1:]), 0)
            np.minimum(d, _U_LIMIT, out=d)
            out[:, i, :] = -(d.astype(np.float64) / _Q_SCALE)
        return out

    def bin_probabilities(self, bin_counts: Any) -> npt.NDArray[np.float64]:
        """Selection probabilities of the bins, shape (groups, K, bins); with ``joint`` the
        marginal law of each quantile's bin under the joint selection."""
        if self.joint:
            c = _bin_counts(bin_counts, self.bins)
            rows_ = [(np.flatnonzero(row).astype(np.int64), row[row > 0]) for row in c]
            return np.stack([self._joint_marginals(r) for r in rows_])
        u = self.utilities(bin_counts)
        out = np.empty_like(u)
        for i, em in enumerate(self.mechanisms):
            for g in range(u.shape[0]):
                out[g, i] = em.probabilities(u[g, i])
        return out

    def rank_error_bound(self, beta: float) -> npt.NDArray[np.float64]:
        """Per quantile: ``(2 Delta / eps') (ln(bins) + ln(1/beta))``, rounded up.

        With probability at least ``1 - beta`` (for one group and one quantile) the chosen bin's
        rank interval ``[C_{j-1}, C_j]`` is within this distance of ``q' n`` (Dwork and Roth,
        Theorem 3.11; the best bin has utility 0). The released point's own rank may further
        differ by the count of its bin. With ``joint``: ``Delta_k`` times the gap of the joint
        selection over the ``bins**K`` tuples (its utility ``-max_k a_k`` is below ``-t`` with
        probability at most ``bins**K e^(-g t)``), so every quantile at once.
        """
        if self.joint:
            em = self.joint_mechanism
            gap = em.utility_gap_at(n_candidates=self.bins ** len(self.quantiles), alpha=beta)
            return np.array(
                [up(Fraction(gap) * Fraction(self.sensitivity(q))) for q in self.quantiles],
                dtype=np.float64,
            )
        return np.array(
            [em.utility_gap_at(n_candidates=self.bins, alpha=beta) for em in self.mechanisms],
            dtype=np.float64,
        )

    # -- release ----------------------------------------------------------------------------
    def release_bins(
        self, bin_counts: Any, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """Chosen bin indices, shape (groups, K)."""
        src = resolve_source(source)
        if self.joint:
            c = _bin_counts(bin_counts, self.bins)
            rows_ = [(np.flatnonzero(row).astype(np.int64), row[row > 0]) for row in c]
            return self._select_joint(rows_, src)
        u = self.utilities(bin_counts)
        groups, _, bins = u.shape
        out = np.empty(u.shape[:2], dtype=np.int64)
        rows = max(1, _CHUNK // bins)
        for i, em in enumerate(self.mechanisms):
            # Gumbel-max, vectorised over groups: the arg-max of ``factor * u + Gumbel(0, 1)``
            # has exactly the exponential mechanism's law. ``em.factor`` carries the selection
            # module's charge for floating-point arg-max (its docstring); the utilities are
            # finite, <= 0 and reach 0, so no shift is needed. The chi-square test in
            # tests/mechanisms/test_quantile.py checks this law against ``em.probabilities``.
            factor = em.factor
            for start in range(0, groups, rows):
                stop = min(start + rows, groups)
                z = gumbel(src, size=(stop - start, bins))
                z += u[start:stop, i, :] * factor
                out[start:stop, i] = np.argmax(z, axis=1)
        return out

    def release(
        self, bin_counts: Any, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        """Private quantiles: shape (groups, K) for 2-D counts, (K,) for one group's counts."""
        src = resolve_source(source)
        two_d = np.ndim(bin_counts) == 2
        idx = self.release_bins(bin_counts, source=src)
        values = self._points(idx, src)
        return values if two_d else values[0]

    # -- sparse counts ----------------------------------------------------------------------
    def _sparse(self, group: Any) -> SparseGroup:
        """One group's ``(indices, counts)`` checked and clamped like :func:`_bin_counts`."""
        try:
            idx_raw, cnt_raw = group
        except (TypeError, ValueError) as exc:
            raise PrivacyParameterError(
                "each sparse group must be a pair (bin indices, counts)"
            ) from exc
        idx, cnt = np.asarray(idx_raw), np.asarray(cnt_raw)
        if idx.size == 0 and cnt.size == 0:
            empty = np.zeros(0, dtype=np.int64)
            return empty, empty
        if idx.dtype.kind not in "iu" or cnt.dtype.kind not in "iu":
            raise PrivacyParameterError("sparse bin indices and counts must be integer arrays")
        if idx.ndim != 1 or idx.shape != cnt.shape:
            raise PrivacyParameterError("sparse bin indices and counts must be 1-D, same length")
        i64 = idx.astype(np.int64)
        if i64[0] < 0 or i64[-1] >= self.bins or np.any(np.diff(i64) <= 0):
            raise PrivacyParameterError(
                f"sparse bin indices must be strictly increasing within [0, {self.bins})"
            )
        cap = _N_LIMIT // self.bins
        if cnt.dtype.kind == "u":
            c64 = np.minimum(cnt, np.uint64(cap)).astype(np.int64)
        else:
            c64 = np.clip(cnt.astype(np.int64), 0, cap)
        keep = c64 > 0
        return i64[keep], c64[keep]

    def _runs(
        self, idx: npt.NDArray[np.int64], cnt: npt.NDArray[np.int64]
    ) -> tuple[
        npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.int64]
    ]:
        """Candidates of one group (module docstring, Sparse counts): first bin, number of
        bins, and the cumulative counts ``C_{j-1}``, ``C_j`` shared by all bins of each."""
        cum = np.cumsum(cnt)  # <= 2**42, exact
        before = cum - cnt
        gap_start = np.concatenate(([0], idx + 1)).astype(np.int64)
        gap_end = np.concatenate((idx, [self.bins])).astype(np.int64)
        gap_c = np.concatenate(([0], cum)).astype(np.int64)
        start = np.concatenate((gap_start, idx))
        width = np.concatenate((gap_end - gap_start, np.ones_like(idx)))
        lo = np.concatenate((gap_c, before))
        hi = np.concatenate((gap_c, cum.astype(np.int64)))
        keep = width > 0
        return start[keep], width[keep], lo[keep], hi[keep]

    def release_bins_sparse(
        self, groups: Sequence[Any], *, source: RandomSource | None = None
    ) -> npt.NDArray[np.int64]:
        """Chosen bin indices, shape (groups, K), from each group's non-empty bins only.

        ``groups[g] = (indices, counts)``: the non-empty bins of group g (strictly increasing
        indices; zero counts are dropped). Same law as :meth:`release_bins` on the dense
        counts (module docstring, Sparse counts); cost linear in the non-empty bins.
        """
        src = resolve_source(source)
        checked = [self._sparse(g) for g in groups]
        if self.joint:
            return self._select_joint(checked, src)
        shifts = tuple(0 for _ in self.quantiles)
        return self._select_sparse(checked, self.mechanisms, shifts, src)

    def joint_scores(
        self, group: SparseGroup
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """``(start, width, a)`` of one group's runs: ``a`` of shape (K, runs), the doubles
        ``a_k = min(d_k / Delta_k, 2**30)`` of the joint selection (module docstring)."""
        return self._joint_scores(group, self._joint_scales())

    def _joint_scales(self) -> npt.NDArray[np.float64]:
        """Per quantile ``2**20 Delta_k`` (an integer, exact as a double below ``2**53``) and
        its grid level ``2**20 q'``."""
        return np.array(
            [float(self.sensitivity(q) * _Q_SCALE) for q in self.quantiles], dtype=np.float64
        )

    def _joint_scores(
        self, group: SparseGroup, scales: npt.NDArray[np.float64]
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        idx, cnt = group
        start, width, lo, hi = self._runs(idx, cnt)
        n = int(cnt.sum())
        lo_s, hi_s = lo * _Q_SCALE, hi * _Q_SCALE
        a = np.empty((len(self.quantiles), start.size), dtype=np.float64)
        for i, q in enumerate(self.quantiles):
            target = n * round(q * _Q_SCALE)
            d = np.maximum(np.maximum(lo_s - target, target - hi_s), 0)
            np.minimum(d, _U_LIMIT, out=d)
            # d / Delta_k in units of 2**-20 ranks: one division of the exact integer (as a
            # double) by 2**20 Delta_k, clamped to 2**30
            np.minimum(d.astype(np.float64) / scales[i], _A_LIMIT, out=a[i])
        return start, width, a

    def _joint_layers(
        self, group: SparseGroup, scales: npt.NDArray[np.float64], g: float
    ) -> tuple[
        npt.NDArray[np.int64],
        npt.NDArray[np.int64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        npt.NDArray[np.float64],
        list[npt.NDArray[np.int64]],
    ]:
        """Runs (start, width, a), the levels ``t_i``, the layers' log-weights and the
        ``W_k(i)`` (module docstring, sampling)."""
        start, width, a = self._joint_scores(group, scales)
        levels = np.unique(a)  # t_0 = 0 < ... < t_M (the best run of each quantile has 0)
        counts = []
        logw = np.zeros(levels.size, dtype=np.float64)
        for row in a:
            order = np.argsort(row, kind="stable")
            cum = np.concatenate(([0], np.cumsum(width[order])))
            c = cum[np.searchsorted(row[order], levels, side="right")]
            counts.append(c)
            logw += np.log(c.astype(np.float64))  # every W_k(i) >= 1
        logw -= g * (levels - levels[0])
        if levels.size > 1:
            logw[:-1] += np.log(-np.expm1(-g * np.diff(levels)))
        return start, width, a, levels, logw, counts

    def _joint_marginals(self, group: SparseGroup) -> npt.NDArray[np.float64]:
        """Each quantile's marginal bin law under the joint selection, shape (K, bins):
        ``P(j_k = b) = sum_{i: t_i >= a_k(b)} P(layer i) / W_k(i)``."""
        g = self.joint_mechanism.factor
        start, width, a, levels, logw, counts = self._joint_layers(group, self._joint_scales(), g)
        p_layer = np.exp(logw - logw.max())
        p_layer /= p_layer.sum()
        out = np.zeros((len(self.quantiles), self.bins), dtype=np.float64)
        for i, c in enumerate(counts):
            per_bin = p_layer / c
            tail = np.concatenate((np.cumsum(per_bin[::-1])[::-1], [0.0]))
            for r in range(start.size):
                first = int(np.searchsorted(levels, a[i, r]))
                out[i, start[r] : start[r] + width[r]] = tail[first]
        return out

    def _select_joint(self, checked: list[SparseGroup], src: RandomSource) -> npt.NDArray[np.int64]:
        """One joint selection per group (module docstring, Joint release; sampling)."""
        k = len(self.quantiles)
        out = np.empty((len(checked), k), dtype=np.int64)
        g, scales = self.joint_mechanism.factor, self._joint_scales()
        for gi, group in enumerate(checked):
            start, width, a, levels, logw, _ = self._joint_layers(group, scales, g)
            z = gumbel(src, size=logw.size)
            z += logw
            layer = int(np.argmax(z))
            t = levels[layer]
            for i in range(k):
                # a bin uniformly among the W_k(layer) bins with a_k <= t_layer (exact draw)
                ok = np.flatnonzero(a[i] <= t)
                cum = np.concatenate(([0], np.cumsum(width[ok])))
                r = int(src.integers(int(cum[-1]), size=1)[0])
                pos = int(np.searchsorted(cum, r, side="right")) - 1
                out[gi, i] = int(start[ok[pos]]) + (r - int(cum[pos]))
        return out

    def _select_sparse(
        self,
        checked: list[SparseGroup],
        mechs: Sequence[ExponentialMechanism],
        shifts: Sequence[int],
        src: RandomSource,
        virtual: int = 0,
    ) -> npt.NDArray[np.int64]:
        """One selection per group and quantile ``i`` with target rank ``q' n + shifts[i] /
        2**20`` (0 for the quantile itself; :class:`BinnedQuantileInterval` moves it by a
        public constant, which leaves the utilities' sensitivity unchanged). ``virtual``: the
        groups carry that many public extra values in their first and in their last bin
        (not counted in ``n``; ranks start below them), at most ``2**40``."""
        out = np.empty((len(checked), len(self.quantiles)), dtype=np.int64)
        for g, (idx, cnt) in enumerate(checked):
            start, width, lo, hi = self._runs(idx, cnt)
            n = int(cnt.sum()) - 2 * virtual
            log_w = np.log(width.astype(np.float64))
            lo_s, hi_s = lo * _Q_SCALE, hi * _Q_SCALE  # < 2**62 + 2**61
            for i, q in enumerate(self.quantiles):
                target = n * round(q * _Q_SCALE) + virtual * _Q_SCALE + shifts[i]
                d = np.maximum(np.maximum(lo_s - target, target - hi_s), 0)
                np.minimum(d, _U_LIMIT, out=d)
                u = -(d.astype(np.float64) / _Q_SCALE)
                z = gumbel(src, size=u.shape[0])
                z += u * mechs[i].factor + log_w
                j = int(np.argmax(z))
                w = int(width[j])
                offset = 0 if w == 1 else int(src.integers(w, size=1)[0])
                out[g, i] = int(start[j]) + offset
        return out

    def release_sparse(
        self, groups: Sequence[Any], *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        """Private quantiles, shape (groups, K), from each group's non-empty bins
        (:meth:`release_bins_sparse`), then a point of the chosen bin as :meth:`release`."""
        src = resolve_source(source)
        idx = self.release_bins_sparse(groups, source=src)
        return self._points(idx, src)

    def _points(self, idx: npt.NDArray[np.int64], src: RandomSource) -> npt.NDArray[np.float64]:
        """A point uniformly from the fixed grid of ``points_per_bin`` points of each bin."""
        if idx.size == 0:
            return np.zeros(idx.shape, dtype=np.float64)
        points = src.integers(self.points_per_bin, size=idx.shape)
        if isinstance(self.edges, UniformEdges):
            lo, up_ = self.edges.at(idx), self.edges.at(idx + 1)
        else:
            edges = np.asarray(self.edges, dtype=np.float64)
            lo, up_ = edges[idx], edges[idx + 1]
        width = up_ - lo
        values = lo + (points + 0.5) * (width / self.points_per_bin)
        np.minimum(values, up_, out=values)  # rounding never leaves the bin
        np.maximum(values, lo, out=values)
        return values


#: Largest rank radius read by selections (``2**40``, keeping every scaled rank within int64);
#: a larger one gives the whole range ``[e_0, e_m]`` for every group (data-independent).
_VIRTUAL_LIMIT = 1 << 40


@dataclass(frozen=True, kw_only=True)
class BinnedQuantileInterval:
    """Confidence intervals for quantiles of a bounded value per group, from the same bins.

    Construction. For the quantile ``q'`` (the grid level of :class:`BinnedQuantile`) of a
    group with ``n`` values and cumulative counts ``C_j`` (``C_j`` = the number of values
    below the edge ``e_j``), every value ``x`` with ``#{values < x} <= q' n <= #{values <=
    x}`` is a ``q'``-quantile; they form an interval ``[x_-, x_+]``. Two more selections of the
    exponential mechanism over the bins, each with the utility of :class:`BinnedQuantile` but
    aimed at the shifted ranks ``q' n - r`` (lower end) and ``q' n + r`` (upper end), give the
    left edge ``e_{j-1}`` of the lower selection's bin and the right edge ``e_k`` of the upper
    one's. ``r`` is public,
    from the exact tail of the selection (McSherry and Talwar 2007, Theorem 6, and Dwork and
    Roth 2014, Theorem 3.11, bound it by ``m exp(-g r / Delta)``): with probabilities ``∝
    exp(g u / Delta)`` over ``m`` bins, the best of utility 0 (weight 1) and ``s_r`` the total
    weight of the bins of utility ``<= -r`` (at most ``m - 1`` of them, each of weight at most
    ``x = exp(-g r / Delta)``), ``P(u <= -r) = s_r / (total weight) <= s_r / (1 + s_r) <= (m -
    1) x / (1 + (m - 1) x)``, increasing in ``s_r``. With the sampler's relative error
    ``e^(+-s)`` (``s`` the selection slack) the probability is at most ``e^(2s)`` times the
    exact one, so with ``a = (alpha / 2) e^(-2s)``, ``r = (Delta / g) ln((m - 1) (1 - a) /
    a)`` (``m >= 2``), rounded up to the ``2**-20`` grid, makes each end miss with probability
    at most ``alpha / 2`` *when the best bin has utility 0*, which needs the shifted target
    inside ``[0, n]``. The bound is attained (to ``e^(2s)``) by the data set with half its
    values in the first bin and half in the last, where the ``m - 1`` other bins are exactly
    ``r`` ranks from each end's target: no smaller data-independent ``r`` keeps the level for
    every data set (the interval covers more on most data, 100% in
    ``benchmarks/quantile_accuracy.py``). So that it always is, both
    selections see ``V = ceil(max r)`` public extra values in the first bin and ``V`` in the
    last (a constant added to the counts: the sensitivity is unchanged), with ranks counted
    from below the first ``V`` (targets ``V + q' n -+ r``, within ``[0, n + 2 V]``). If the
    lower selection's utility is above ``-r``, its bin's distance from ``V + q' n - r`` is
    below ``r``, so ``V + C_{j-1} < V + q' n`` when ``j > 1`` (and ``e_0`` is below every
    value when ``j = 1``): fewer than ``q' n`` values lie below ``e_{j-1}``, so no ``x <
    e_{j-1}`` is a quantile (``#{values <= x} <= C_{j-1} < q' n``) and ``e_{j-1} <= x_-``.
    Symmetrically ``C_k > q' n`` (or ``k = m``) and ``x_+ <= e_k``. By the union
    bound ``[e_{j-1}, e_k]`` holds every ``q'``-quantile with probability at least ``1 -
    alpha``, for every data set: a data-independent level, usually far above ``1 - alpha``
    (the bound counts every bin as if it were as good as the best).

    Privacy. Moving the target by the public ``r`` leaves each utility's sensitivity at
    ``m max(q', 1 - q')`` (module docstring), so the two selections per group and quantile are
    exponential mechanisms; ``2 K L`` of them at ``epsilon / (2 K L)`` each (rounded down)
    compose to ``epsilon``. The released ends are bin edges (public), functions of the two
    discrete choices only. The interval is a separate release from the point estimate of
    :class:`BinnedQuantile` (its budget is separate; together they cost the sum).
    """

    epsilon: float
    quantiles: tuple[float, ...]
    edges: tuple[float, ...] | UniformEdges
    alpha: float = 0.05
    max_rows_per_partition: int = 1
    max_partitions: int = 1
    neighbouring: Neighbouring = Neighbouring.ADD_REMOVE

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "alpha", check_probability(self.alpha, name="alpha", open_low=True)
        )
        if not self.alpha < 1.0:
            raise PrivacyParameterError(f"alpha must be below 1, got {self.alpha!r}")
        # validated and normalised as a BinnedQuantile's (whose selections the ends reuse)
        sel = self._selector
        for name in ("epsilon", "quantiles", "edges", "max_rows_per_partition"):
            object.__setattr__(self, name, getattr(sel, name))
        object.__setattr__(self, "max_partitions", sel.max_partitions)
        object.__setattr__(self, "neighbouring", sel.neighbouring)
        self.mechanisms  # noqa: B018

    @property
    def _selector(self) -> BinnedQuantile:
        return BinnedQuantile(
            epsilon=self.epsilon,
            quantiles=self.quantiles,
            edges=self.edges,
            max_rows_per_partition=self.max_rows_per_partition,
            max_partitions=self.max_partitions,
            neighbouring=self.neighbouring,
        )

    @property
    def _ends(self) -> BinnedQuantile:
        """The selections of one end: a :class:`BinnedQuantile` at half the epsilon (rounded
        down), so ``epsilon / (2 K L)`` (rounded down) per selection."""
        sel = self._selector
        return dataclasses.replace(sel, epsilon=down(Fraction(sel.epsilon) / 2))

    @property
    def epsilon_each(self) -> float:
        """About ``epsilon / (2 K L)``, rounded down: one end of one group's one quantile."""
        return self._ends.epsilon_each

    @property
    def mechanisms(self) -> tuple[ExponentialMechanism, ...]:
        """One exponential mechanism per quantile (the same for both ends)."""
        return self._ends.mechanisms

    @property
    def event(self) -> DpEvent:
        """``2 K L`` exponential mechanisms at :attr:`epsilon_each` each."""
        count = 2 * len(self.quantiles) * self.max_partitions
        return SelfComposedEvent(event=self.mechanisms[0].event, count=count)

    def rank_radius(self) -> tuple[float, ...]:
        """Per quantile the public shift ``r`` (in ranks, on the ``2**-20`` grid, rounded
        up): each end misses with probability at most ``alpha / 2`` (class docstring: ``r =
        (Delta / g) ln((m - 1) (1 - a) / a)``, ``a = (alpha / 2) e^(-2 s)``)."""
        from dpkit.mechanisms.selection import SELECTION_SLACK

        bins = self._selector.bins
        a = self.alpha / 2.0 * math.exp(-2.0 * SELECTION_SLACK)
        # ln((m - 1)(1 - a) / a); one bin: no bin can miss, and ln((1 - a) / a) > 0 is kept
        t = math.log(max(bins - 1, 1)) + math.log1p(-a) - math.log(a)
        out = []
        for em in self.mechanisms:
            g = em.factor * em.sensitivity  # the sampler's gain, below (eps - 2 s) / 2
            r = em.sensitivity / g * t * (1.0 + 2.0**-40)
            out.append(math.ceil(r * _Q_SCALE) / _Q_SCALE)
        return tuple(out)

    @staticmethod
    def _padded(
        idx: npt.NDArray[np.int64], cnt: npt.NDArray[np.int64], virtual: int, bins: int
    ) -> SparseGroup:
        """The group with ``virtual`` public extra values in its first and its last bin."""
        dense_idx = np.concatenate(([0], idx, [bins - 1])).astype(np.int64)
        dense_cnt = np.concatenate(([virtual], cnt, [virtual])).astype(np.int64)
        out_idx, inv = np.unique(dense_idx, return_inverse=True)
        out_cnt = np.zeros(out_idx.size, dtype=np.int64)
        np.add.at(out_cnt, inv, dense_cnt)
        return out_idx.astype(np.int64), out_cnt

    def release(
        self, bin_counts: Any, *, source: RandomSource | None = None
    ) -> npt.NDArray[np.float64]:
        """Intervals from dense counts: shape (groups, K, 2) for 2-D counts, (K, 2) for one
        group's; the last axis is ``(low, high)``. Counts are checked and clamped as by
        :meth:`BinnedQuantile.release`."""
        two_d = np.ndim(bin_counts) == 2
        c = _bin_counts(bin_counts, self._selector.bins)
        groups = [(np.flatnonzero(row).astype(np.int64), row[row > 0]) for row in c]
        low, high = self.release_sparse(groups, source=source)
        out = np.stack([low, high], axis=-1)
        return out if two_d else out[0]

    def release_sparse(
        self, groups: Sequence[Any], *, source: RandomSource | None = None
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``(low, high)``, each of shape (groups, K): the interval of every quantile of every
        group, from each group's non-empty bins (``(indices, counts)`` as in
        :meth:`BinnedQuantile.release_bins_sparse`)."""
        src = resolve_source(source)
        sel = self._selector
        checked = [sel._sparse(g) for g in groups]
        radius = self.rank_radius()
        k = len(sel.quantiles)
        if max(radius) >= _VIRTUAL_LIMIT:  # wider than any group: the whole range, for all
            lo_idx = np.zeros((len(checked), k), dtype=np.int64)
            hi_idx = np.full((len(checked), k), sel.bins - 1, dtype=np.int64)
        else:
            virtual = math.ceil(max(radius))
            padded = [self._padded(idx, cnt, virtual, sel.bins) for idx, cnt in checked]
            shifts = [round(r * _Q_SCALE) for r in radius]
            mechs = self.mechanisms
            lo_idx = sel._select_sparse(padded, mechs, tuple(-s for s in shifts), src, virtual)
            hi_idx = sel._select_sparse(padded, mechs, tuple(shifts), src, virtual)
        if isinstance(sel.edges, UniformEdges):
            low, high = sel.edges.at(lo_idx), sel.edges.at(hi_idx + 1)
        else:
            edges = np.asarray(sel.edges, dtype=np.float64)
            low, high = edges[lo_idx], edges[hi_idx + 1]
        return np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
