"""Private analytics over tables: sessions, the query builder, the plan and its engines.

``Session(source, privacy_unit=..., budget=...)`` opens a table (Parquet/CSV paths and globs,
pandas, Polars, Arrow, a DuckDB connection); ``session.query()`` builds a private query from the
aggregates below; ``.summarize()`` shows its noise without touching data and ``.run()`` charges
the budget and releases. Importing this package does not import DuckDB, pandas, sqlglot (the
SQL front end :mod:`dpkit.analytics.sqlquery` loads it with the first SQL query) or
scipy.special.
"""

from dpkit.analytics._aggregates import (
    Statistic,
    count,
    count_distinct,
    histogram,
    mean,
    quantile,
    std,
    sum,
    variance,
)
from dpkit.analytics._release import EmptyReleaseWarning
from dpkit.analytics._report import long_form
from dpkit.analytics.alerts import ThresholdAlert
from dpkit.analytics.builder import PreparedQuery, Query
from dpkit.analytics.session import Session

__all__ = [
    "EmptyReleaseWarning",
    "PreparedQuery",
    "Query",
    "Session",
    "Statistic",
    "ThresholdAlert",
    "count",
    "count_distinct",
    "histogram",
    "long_form",
    "mean",
    "quantile",
    "std",
    "sum",
    "variance",
]


def __getattr__(name: str) -> object:
    """``dpkit.analytics.sqlquery``, the SQL front end, on first access (it imports sqlglot,
    so this package loads it only with the first SQL query); ``dpkit.analytics.max`` and the
    other aggregates dpkit does not offer explain why."""
    if name == "sqlquery":
        import importlib

        return importlib.import_module("dpkit.analytics.sqlquery")
    from dpkit.errors import UnsupportedAggregateError

    raise UnsupportedAggregateError.missing(__name__, name)
