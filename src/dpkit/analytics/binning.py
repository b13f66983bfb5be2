"""Public pieces for choosing bin edges privately, for algorithms that charge their own budget.

The query planner (:mod:`dpkit.analytics._planner`) finds a column's range privately with one
thresholded noisy histogram over a public grid; the quantile aggregate reads dates as numbers
and picks its fine candidate grid from public bounds. Synthetic data bins numeric and date
columns with the same pieces; this module is their public face (nothing here reads data or
spends budget):

* :class:`NoisyHistogram`, :func:`value_bounds`, :func:`type_limits`, :data:`PLAN_FAILURE`: the
  planner's range histogram, its threshold and the bounds read from it;
* :data:`RANGE_EDGES`: the planner's grid for numbers, 0 and ``+-2^j``, ``j = -10..50``;
  :func:`date_range_edges`: the grid for dates, the first instant of every year from
  :data:`FIRST_YEAR` to :data:`LAST_YEAR`, in a date column's numbers;
* :func:`quantile_grid`: equal candidate bins of a private quantile between two bounds;
* :func:`is_number_type`: whether a column's engine type holds numbers;
* :func:`time_kind_of`, :func:`to_number`, :func:`from_number`, :func:`parse_date_bound`: how a
  date or timestamp column is read as a number (days, or microseconds, since 1970-01-01).
"""

from __future__ import annotations

import datetime

from dpkit._numeric.grids import UniformEdges
from dpkit.analytics._aggregates import from_number, parse_date_bound, quantile_bins, to_number
from dpkit.analytics._column_types import temporal_codec, type_family
from dpkit.analytics._planner import PLAN_FAILURE, NoisyHistogram, type_limits, value_bounds
from dpkit.analytics._pricing import AUTO_EDGES

__all__ = [
    "FIRST_YEAR",
    "LAST_YEAR",
    "PLAN_FAILURE",
    "QUANTILE_GRID_BINS",
    "RANGE_EDGES",
    "NoisyHistogram",
    "date_range_edges",
    "from_number",
    "is_number_type",
    "parse_date_bound",
    "quantile_grid",
    "time_kind_of",
    "to_number",
    "type_limits",
    "value_bounds",
]

#: The planner's public grid for the range of a number: 0 and ``+-2^j``, ``j = -10..50``.
RANGE_EDGES: tuple[float, ...] = AUTO_EDGES
#: The years of the public grid for the range of a date (dates outside are clamped into the
#: first or last year; a finer grid costs more to compile than it gains).
FIRST_YEAR, LAST_YEAR = 1900, 2100
#: Most candidate bins of a private quantile used for binning (a finer grid than the bins it
#: cuts by far, and few enough for the engine to return as one vector).
QUANTILE_GRID_BINS = 1 << 16


def is_number_type(sql_type: str) -> bool:
    """Whether an engine type name (DuckDB spelling) is a floating-point, integer or decimal
    type: the analytics compiler's own classification, so ``INTERVAL`` or ``POINT`` is not a
    number because its name contains ``INT``."""
    return type_family(sql_type) in ("float", "integer", "decimal")


def time_kind_of(sql_type: str | None) -> str | None:
    """``"date"``, ``"local"`` or ``"instant"`` for a date or timestamp column type, ``None``
    for any other (or an unknown type)."""
    return temporal_codec(sql_type) if sql_type else None


def date_range_edges(time_kind: str) -> tuple[float, ...]:
    """January 1st of every year from :data:`FIRST_YEAR` to :data:`LAST_YEAR` (midnight; UTC
    for an ``"instant"`` column), as the numbers a column of this date reading holds."""
    return tuple(
        to_number(datetime.date(y, 1, 1), time_kind) for y in range(FIRST_YEAR, LAST_YEAR + 1)
    )


def quantile_grid(lower: float, upper: float, bins: int = QUANTILE_GRID_BINS) -> UniformEdges:
    """The equal candidate bins of a private quantile over ``[lower, upper]``: the quantile
    aggregate's own choice (:func:`~dpkit.analytics._aggregates.quantile_bins`, a power of two
    the engine bins exactly by arithmetic), capped at ``bins``. From public values only."""
    return UniformEdges(lower, upper, min(quantile_bins(lower, upper), bins))
