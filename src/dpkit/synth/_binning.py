"""Private bin edges of numeric and date columns, inside a synthetic-data fit's one charge.

A :class:`~dpkit.synth.Numeric` or :class:`~dpkit.synth.Date` column without public edges has
them chosen from the data, privately, before the marginals are measured. The fit's zCDP budget
``rho`` is split once, before any row is read: ``binning`` of it (rounded down) for the edges,
divided evenly between the columns to bin, and the rest (rounded down) for the measurement.
Within a column:

1. **Range** (when a bound is missing). The query planner's thresholded noisy histogram
   (:class:`~dpkit.analytics.binning.NoisyHistogram`, :func:`~dpkit.analytics.binning.
   value_bounds`): the counts of the column's values over a public grid (numbers: 0 and
   ``+-2^j``, ``j = -10..50``; dates: January 1st of each year from 1900 to 2100), discrete
   Gaussian noise on the whole vector with ``sigma = up(sqrt(m^2 / (2 rho_range)))``
   (``m^2 / (2 sigma^2)``-zCDP for a vector of L2 sensitivity ``m``, Canonne, Kamath and
   Steinke 2020), and the range from the lowest to the highest bin whose noisy count reaches
   the threshold ``tau`` (with probability ``1 - 10^-3`` no empty bin does). A public bound, or
   the limits of the column's type, replace the private one on their side.
   ``rho_range`` is a quarter of the column's share when quantiles follow, all of it otherwise.
2. **Edges.** ``edges="quantile"``: the ``K = bins - 1`` quantiles ``i / bins`` by dpkit's
   private quantile (:class:`~dpkit.mechanisms.BinnedQuantile`: the exponential mechanism over
   up to ``2^16`` equal candidate bins of the range, from the sparse counts of the non-empty
   ones), each at ``epsilon_q`` with ``K epsilon_q^2 / 8 <= rho_quantiles`` (the exponential
   mechanism is ``epsilon^2 / 8``-zCDP, bounded range: Cesar and Rogers 2021), rounded down
   until the event's exact cost fits. The released quantiles are sorted, those outside the
   range dropped; for a column of whole numbers (an integer type, a date, a timestamp) they
   are rounded up to whole numbers, which keeps every integer in the same bin (``x >= e`` iff
   ``x >= ceil(e)``) and makes a sampled value's floor uniform over the bin's integers;
   equal edges are merged (a column can end with fewer bins than asked, never more).
   ``edges="equal"``: ``bins`` equal-width bins of the range.

Person-level privacy. Every count is taken by the session's engine on the table bounded to
``max_rows`` rows per privacy unit (:func:`~dpkit.analytics.marginals.marginal_counts`, a
fresh secret salt per statement), so a person moves each histogram by at most ``m = max_rows``
in L1 and L2 and each quantile's rank utility by at most ``m``. Every choice after the noise
is post-processing. The whole binning cost is part of the fit's one charge, before any row is
read; an engine failure after it releases nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit._numeric.rounding import down, up
from dpkit.accounting.zcdp import zcdp_cost_of
from dpkit.analytics.binning import (
    FIRST_YEAR,
    LAST_YEAR,
    RANGE_EDGES,
    NoisyHistogram,
    date_range_edges,
    quantile_grid,
    time_kind_of,
    type_limits,
    value_bounds,
)
from dpkit.analytics.marginals import BinPart, MarginalCounts, marginal_counts
from dpkit.errors import PrivacyParameterError
from dpkit.events import ComposedEvent, DpEvent
from dpkit.mechanisms import BinnedQuantile
from dpkit.noise import RandomSource
from dpkit.synth._common import after_charge, charge
from dpkit.synth._domain import Categorical, ColumnDomain, Date, Numeric

__all__ = [
    "DEFAULT_BINNING",
    "Binner",
    "BinningPlan",
    "ColumnStep",
    "bin_then_count",
    "check_binning",
    "plan_binning",
    "typed_domains",
]

#: Default share of a fit's rho spent on choosing edges, when a column needs it.
DEFAULT_BINNING = 0.1
#: Share of a column's binning budget spent on its range when quantiles follow.
RANGE_SHARE = Fraction(1, 4)
_DATE_BINS = LAST_YEAR - FIRST_YEAR


def check_binning(binning: Any) -> float:
    """``binning``: a share of the fit's rho in ``[0, 1)``."""
    if (
        isinstance(binning, bool)
        or not isinstance(binning, (int, float))
        or not 0.0 <= binning < 1.0
    ):
        raise PrivacyParameterError(
            f"binning is the share of the fit's budget spent on choosing bin edges, a number "
            f"in [0, 1) (default {DEFAULT_BINNING}), got {binning!r}"
        )
    return float(binning)


def _rho(event: DpEvent) -> Fraction:
    cost = zcdp_cost_of(event)
    if cost is None or not isinstance(cost[0], Fraction):  # pragma: no cover - zCDP events
        raise TypeError(f"{type(event).__name__} has no finite zCDP cost")
    return cost[0]


@dataclass(frozen=True)
class ColumnStep:
    """The private binning of one column (module docstring): its range histogram (or None),
    its quantile levels and total quantile epsilon (or none), and what they cost."""

    column: str
    bins: int
    mode: str
    histogram: NoisyHistogram | None
    quantiles: tuple[float, ...]
    quantile_epsilon: float
    max_rows: int
    event: DpEvent = field(repr=False)

    @property
    def rho(self) -> float:
        """The step's exact zCDP cost, rounded up."""
        return up(_rho(self.event))

    def range_rho(self) -> float:
        return 0.0 if self.histogram is None else up(_rho(self.histogram.event))

    def quantile_mechanism(self, grid: Sequence[float]) -> BinnedQuantile:
        """The private quantiles over the candidate bins ``grid`` (the event does not depend
        on the grid)."""
        return BinnedQuantile.from_epsilon(
            epsilon=self.quantile_epsilon,
            quantiles=self.quantiles,
            edges=grid,
            max_rows_per_partition=self.max_rows,
        )


def _quantile_epsilon(share: Fraction, k: int, m: int) -> tuple[float, DpEvent]:
    """The largest total epsilon (``k`` quantiles at ``epsilon / k`` each, rounded down) whose
    event's exact zCDP cost is at most ``share``."""
    each = down(Fraction(math.sqrt(float(8 * share / k))))
    for _ in range(10_000):
        eps = down(Fraction(each) * k)
        mech = BinnedQuantile.from_epsilon(
            epsilon=eps,
            quantiles=[i / (k + 1) for i in range(1, k + 1)],
            edges=(0.0, 1.0),
            max_rows_per_partition=m,
        )
        if _rho(mech.event) <= share:
            return eps, mech.event
        each = math.nextafter(each, 0.0)
    raise PrivacyParameterError("no quantile epsilon fits the binning share")  # pragma: no cover


def _column_step(
    column: str, dom: Numeric | Date, share: Fraction, m: int, what: str
) -> ColumnStep:
    needs_q = dom.needs_quantiles
    range_share = (share * RANGE_SHARE if needs_q else share) if dom.needs_range else Fraction(0)
    events: list[DpEvent] = []
    hist = None
    if range_share:
        bins = _DATE_BINS if isinstance(dom, Date) else len(RANGE_EDGES) - 1
        try:
            hist = NoisyHistogram.priced(
                pure=False, share=down(range_share), sensitivity=m, bins=bins
            )
        except PrivacyParameterError:
            raise PrivacyParameterError(
                f"the {what} budget left to find the range of column {column!r} (rho "
                f"{float(range_share):.3g}) is too small: give a larger binning share or "
                "budget, or public bounds. Nothing was spent."
            ) from None
        events.append(hist.event)
    qs: tuple[float, ...] = ()
    q_eps = 0.0
    if needs_q:
        k = dom.bins - 1
        try:
            q_eps, ev = _quantile_epsilon(share - range_share, k, m)
        except PrivacyParameterError:
            raise PrivacyParameterError(
                f"the {what} budget left for the {k} quantiles of column {column!r} (rho "
                f"{float(share - range_share):.3g}) is too small: give a larger binning share "
                "or budget, fewer bins, or public edges. Nothing was spent."
            ) from None
        qs = tuple(i / dom.bins for i in range(1, dom.bins))
        events.append(ev)
    event = events[0] if len(events) == 1 else ComposedEvent(events=tuple(events))
    return ColumnStep(column, dom.bins, dom.mode, hist, qs, q_eps, m, event)


@dataclass(frozen=True)
class BinningPlan:
    """The binning of one fit, decided before any row is read: ``share`` of the fit's rho
    (``allotted``, rounded down) split evenly between the ``steps``; ``event`` is their
    composition (None when no column needs binning) and ``rho`` its exact cost, rounded up."""

    share: float
    allotted: float
    steps: tuple[ColumnStep, ...]
    event: DpEvent | None = field(repr=False)

    @property
    def rho(self) -> float:
        return 0.0 if self.event is None else up(_rho(self.event))


def plan_binning(
    domains: Mapping[str, ColumnDomain], rho: float, binning: float, max_rows: int
) -> tuple[BinningPlan, float]:
    """The binning plan and the measurement's rho (the rest of ``rho``, rounded down).

    Refuses, before any spend, a column that needs binning when ``binning`` is 0, naming the
    budget it would take at the default share and the bounds to give instead."""
    todo = [(c, d) for c, d in domains.items() if isinstance(d, (Numeric, Date)) and not d.resolved]
    todo = [(c, d) for c, d in todo if d.needs_range or d.needs_quantiles]
    if not todo:
        return BinningPlan(binning, 0.0, (), None), rho
    names = ", ".join(repr(c) for c, _ in todo)
    if binning == 0.0:
        need = down(Fraction(rho) * Fraction(DEFAULT_BINNING))
        raise PrivacyParameterError(
            f"binning=0 leaves no budget to choose the edges of {names} (no public bounds or "
            f"edges): give binning={DEFAULT_BINNING} (rho {need:.3g} of this fit's "
            f"{rho:.3g}), or public bounds and equal bins, e.g. Numeric(lower, upper, bins), "
            "Date(lower, upper, unit='month'). Nothing was spent."
        )
    allotted = down(Fraction(rho) * Fraction(binning))
    each = Fraction(allotted) / len(todo)
    steps = tuple(_column_step(c, d, each, max_rows, "binning") for c, d in todo)
    event = ComposedEvent(events=tuple(s.event for s in steps))
    spent = _rho(event)
    measure = down(Fraction(rho) - spent)
    if not measure > 0.0:  # pragma: no cover - binning < 1
        raise PrivacyParameterError("no budget left for the measurement. Nothing was spent.")
    return BinningPlan(binning, allotted, steps, event), measure


def typed_domains(session: Any, domains: Mapping[str, ColumnDomain]) -> dict[str, ColumnDomain]:
    """The domains with every :class:`Date` read in its column's numbers (public edges
    resolved); refuses, before any spend, a Date on a column that holds no dates."""
    out: dict[str, ColumnDomain] = {}
    for c, d in domains.items():
        if isinstance(d, Date) and d.time_kind is None:
            t = session.column_type(c)
            kind = time_kind_of(t)
            if kind is None:
                raise PrivacyParameterError(
                    f"column {c!r} has the type {t}, not one read as dates (DATE, TIMESTAMP, "
                    "TIMESTAMPTZ, in microseconds): declare it Numeric(...) or "
                    "Categorical([...]), or cast it to DATE or TIMESTAMP first. Nothing was "
                    "spent."
                )
            out[c] = d.for_column(kind, c)
        else:
            out[c] = d
    return out


def placeholder(domains: Mapping[str, ColumnDomain]) -> dict[str, ColumnDomain]:
    """The domains with made-up edges of the same number of bins wherever edges are still to
    be chosen, for checking the measurement's statement before the charge (reads no row)."""
    out: dict[str, ColumnDomain] = {}
    for c, d in domains.items():
        if isinstance(d, Categorical) or d.resolved:
            out[c] = d
        elif isinstance(d, Numeric):
            out[c] = Numeric(0.0, 1.0, d.bins)
        else:
            out[c] = Date.chosen_edges(
                [float(i) for i in range(d.bins + 1)], d.mode, d.time_kind or ""
            )
    return out


def _grid(dom: Numeric | Date) -> tuple[float, ...]:
    if isinstance(dom, Date):
        return date_range_edges(dom.time_kind or "local")
    return RANGE_EDGES


def _part(column: str, dom: Numeric | Date, edges: Sequence[float]) -> BinPart:
    kind = (dom.time_kind or "") if isinstance(dom, Date) else ""
    return BinPart(column, edges, kind)  # type: ignore[arg-type]


def _public_bounds(dom: Numeric | Date) -> tuple[float | None, float | None]:
    return dom.number_bounds if isinstance(dom, Date) else (dom.lower, dom.upper)


@dataclass
class Binner:
    """Runs a :class:`BinningPlan` on a session (statements checked before the charge)."""

    plan: BinningPlan
    domains: dict[str, ColumnDomain]
    max_rows: int
    whole: dict[str, bool]
    limits: dict[str, tuple[float, float]] = field(default_factory=dict)
    range_statement: MarginalCounts | None = None
    report: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def prepare(
        cls, session: Any, domains: Mapping[str, ColumnDomain], plan: BinningPlan, max_rows: int
    ) -> Binner:
        """Check every statement the binning will run (reads no row, spends nothing)."""
        doms = dict(domains)
        whole: dict[str, bool] = {}
        for s in plan.steps:
            d = doms[s.column]
            t = (session.column_type(s.column) or "").upper()
            whole[s.column] = isinstance(d, Date) or ("INT" in t and "INTERVAL" not in t)
        limits = {s.column: type_limits(session.column_type(s.column)) for s in plan.steps}
        out = cls(plan, doms, max_rows, whole, limits)
        ranged = [s for s in plan.steps if s.histogram is not None]
        if ranged:
            out.range_statement = marginal_counts(
                session,
                [[_part(s.column, doms[s.column], _grid(doms[s.column]))] for s in ranged],  # type: ignore[arg-type]
                max_rows=max_rows,
            )
        quant = [s for s in plan.steps if s.quantiles]
        if quant:  # the same statement on made-up grids, checked now
            marginal_counts(
                session,
                [[_part(s.column, doms[s.column], quantile_grid(0.0, 1.0))] for s in quant],  # type: ignore[arg-type]
                max_rows=max_rows,
            )
        return out

    def choose_range(self, step: ColumnStep, noisy: Sequence[int]) -> tuple[float, float, bool]:
        """The range from the noisy range histogram (post-processing): the planner's bounds,
        cut at the column type's limits, replaced by a public bound on its side."""
        dom = self.domains[step.column]
        assert step.histogram is not None and isinstance(dom, (Numeric, Date))
        grid = _grid(dom)
        limits = (-math.inf, math.inf) if isinstance(dom, Date) else self._limits(step.column)
        lo, hi, found = value_bounds(noisy, grid, step.histogram.threshold(), limits)
        plo, phi = _public_bounds(dom)
        lo = lo if plo is None else plo
        hi = hi if phi is None else phi
        if not lo < hi:  # a public bound beyond the private range: one grid step past it
            if plo is not None:
                hi = next((e for e in grid if e > lo), lo + 1.0)
            else:
                lo = next((e for e in reversed(grid) if e < hi), hi - 1.0)
        return lo, hi, found

    def _limits(self, column: str) -> tuple[float, float]:
        return self.limits.get(column, (-math.inf, math.inf))

    def choose_edges(
        self, step: ColumnStep, lo: float, hi: float, values: Sequence[float]
    ) -> tuple[float, ...]:
        """Edges from released quantiles (post-processing, module docstring)."""
        inner = sorted(float(v) for v in values)
        if self.whole.get(step.column):
            inner = [float(math.ceil(v)) for v in inner]
        cut = [lo, *(v for v in inner if lo < v < hi), hi]
        return tuple(dict.fromkeys(cut))

    def release_quantiles(
        self, step: ColumnStep, grid: Sequence[float], counts: Sequence[int], source: RandomSource
    ) -> list[float]:
        """The private quantiles of one column from its exact counts over ``grid`` (the last
        count, the missing cell, is not a value and is dropped)."""
        dense = np.asarray(counts, dtype=np.int64)[: len(grid) - 1]
        nz = np.flatnonzero(dense).astype(np.int64)
        mech = step.quantile_mechanism(grid)
        return [float(v) for v in mech.release_sparse([(nz, dense[nz])], source=source)[0]]

    def run(self, session: Any, source: RandomSource) -> dict[str, ColumnDomain]:
        """The resolved domains (after the charge): range, then edges, for every column."""
        ranges: dict[str, tuple[float, float, bool]] = {}
        ranged = [s for s in self.plan.steps if s.histogram is not None]
        if ranged:
            assert self.range_statement is not None
            counts = self.range_statement.run()
            for s, c in zip(ranged, counts, strict=True):
                assert s.histogram is not None
                noisy = s.histogram.release(list(c[:-1]), source)
                ranges[s.column] = self.choose_range(s, noisy)
        for s in self.plan.steps:
            if s.column not in ranges:
                lo, hi = _public_bounds(self.domains[s.column])  # type: ignore[arg-type]
                assert lo is not None and hi is not None
                ranges[s.column] = (lo, hi, True)
        grids = {s.column: quantile_grid(*ranges[s.column][:2]) for s in self.plan.steps}
        quant = [s for s in self.plan.steps if s.quantiles]
        released: dict[str, list[float]] = {}
        if quant:
            stmt = marginal_counts(
                session,
                [[_part(s.column, self.domains[s.column], grids[s.column])] for s in quant],  # type: ignore[arg-type]
                max_rows=self.max_rows,
            )
            for s, c in zip(quant, stmt.run(), strict=True):
                released[s.column] = self.release_quantiles(s, grids[s.column], c, source)
        out = dict(self.domains)
        for s in self.plan.steps:
            lo, hi, found = ranges[s.column]
            if s.column in released:
                cut = self.choose_edges(s, lo, hi, released[s.column])
            else:
                w = (hi - lo) / s.bins
                cut = tuple(dict.fromkeys([*(lo + i * w for i in range(s.bins)), hi]))
            dom = self.domains[s.column]
            if isinstance(dom, Date):
                out[s.column] = Date.chosen_edges(cut, s.mode, dom.time_kind or "local")
            else:
                out[s.column] = Numeric.chosen_edges(cut, s.mode)
            shown: list[Any] = [lo, hi]
            if isinstance(dom, Date):
                shown = [
                    e.isoformat()
                    for e in Date.chosen_edges([lo, hi], "", dom.time_kind or "local").edge_dates()
                ]
            self.report[s.column] = {
                "mode": s.mode,
                "range_shown": None if s.histogram is None else shown,
                "rho": s.rho,
                "range": None if s.histogram is None else [lo, hi],
                "range_found": found if s.histogram is not None else None,
                "range_rho": s.range_rho(),
                "range_threshold": None if s.histogram is None else s.histogram.threshold(),
                "quantiles": len(s.quantiles),
                "quantile_epsilon": s.quantile_epsilon,
                "bins_asked": s.bins,
                "bins": len(cut) - 1,
                "edges": list(cut),
            }
        return out


def bin_then_count(
    session: Any,
    domains: Mapping[str, ColumnDomain],
    plan: BinningPlan,
    max_rows: int,
    event: DpEvent,
    rho: float,
    metadata: dict[str, Any],
    statement_for: Callable[[dict[str, ColumnDomain]], Any],
) -> tuple[dict[str, ColumnDomain], list[tuple[int, ...]], dict[str, Any]]:
    """A fit's engine work around its one charge: every statement is checked first (the
    binning's, and the measurement's on made-up edges of the same sizes), then ``event`` is
    charged, then the edges are chosen and the marginals counted with them.

    Returns the resolved domains, the measurement's counts and the binning report (empty
    when nothing was binned)."""
    typed = typed_domains(session, domains)
    binner = Binner.prepare(session, typed, plan, max_rows) if plan.steps else None
    checked = statement_for(placeholder(typed))  # reads no row
    charge(session, event, rho, metadata)
    source = session.source_of_randomness
    if binner is None:  # the edges were public: the checked statement is the one to run
        resolved, statement = typed, checked
    else:
        resolved = after_charge(lambda: binner.run(session, source))
        statement = after_charge(lambda: statement_for(resolved))
    counts: list[tuple[int, ...]] = after_charge(statement.run)
    report: dict[str, Any] = {}
    if binner is not None:
        report = {
            "share": plan.share,
            "rho": plan.rho,
            "allotted": plan.allotted,
            "columns": binner.report,
        }
    return resolved, counts, report
