"""Engines that run a :class:`~dpkit.analytics._plan.Plan` inside a database.

:class:`Engine` is the seam the session uses (columns, register, locate, validate, execute,
shares_rows); :class:`EngineError` is what an engine raises when it cannot run a statement.
:class:`DuckDBEngine` is the embedded default; :class:`SparkEngine` runs the same plans on
Spark (classic or Spark Connect). Importing this package imports neither DuckDB, pyspark nor
sqlglot; they load when an engine module is first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from dpkit.analytics.engines._protocol import (
    Checked,
    Engine,
    EngineError,
    MinimalEngine,
    as_engine,
)

if TYPE_CHECKING:
    from dpkit.analytics.engines.duckdb import DuckDBEngine
    from dpkit.analytics.engines.spark import SparkEngine
    from dpkit.errors import PlanError

__all__ = [
    "Checked",
    "DuckDBEngine",
    "Engine",
    "EngineError",
    "MinimalEngine",
    "PlanError",
    "SparkEngine",
    "as_engine",
]


def __getattr__(name: str) -> Any:
    if name == "DuckDBEngine":
        from dpkit.analytics.engines import duckdb as _duckdb

        return _duckdb.DuckDBEngine
    if name == "SparkEngine":
        from dpkit.analytics.engines import spark as _spark

        return _spark.SparkEngine
    if name == "PlanError":
        from dpkit.errors import PlanError

        return PlanError
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
