"""Private answers to SQL: ``session.sql("SELECT region, COUNT(*) FROM people GROUP BY region")``.

A query is parsed with sqlglot, checked against the supported private fragment and compiled to
the same builder query (and so the same engine plan) an analyst would write by hand; anything
outside the fragment is refused with a :class:`SqlError` naming the clause and the reason,
before any data is read or budget spent. Bounds, the privacy unit, contribution limits, public
keys and public tables come from :func:`load_metadata` (YAML or TOML) or from arguments. See
``docs/sql.md``.
"""

from dpkit.analytics.sqlquery._metadata import (
    ColumnInfo,
    Metadata,
    TableInfo,
    load_metadata,
    parse_metadata,
)
from dpkit.analytics.sqlquery._query import SqlQuery, sql_query
from dpkit.analytics.sqlquery._translate import SqlError, SqlHost

__all__ = [
    "ColumnInfo",
    "Metadata",
    "SqlError",
    "SqlHost",
    "SqlQuery",
    "TableInfo",
    "load_metadata",
    "parse_metadata",
    "sql_query",
]
