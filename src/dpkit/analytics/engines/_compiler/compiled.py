"""What a compiled plan hands to its engine: the statement and how to decode its rows."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["CompiledQuery", "OutputMeasure"]


@dataclass(frozen=True)
class OutputMeasure:
    """How to decode one measure's output column."""

    name: str
    kind: str
    column: str
    size: int = 0  # number of bins / categories for tuple-valued kinds


@dataclass(frozen=True)
class CompiledQuery:
    """The SQL text and what the engine needs to decode its rows."""

    sql: str
    key_columns: tuple[str, ...]
    measures: tuple[OutputMeasure, ...]
    global_group: bool = field(default=False)
    # profiles without a histogram aggregate (see :func:`.measures.grouping_sets`): the cell-index
    # column of each tuple-valued measure, in measure order, and the cell-count column
    cell_columns: tuple[str, ...] = ()
    cell_count: str | None = None
    # the statement evaluates row conditions (filters, bucket cases): Spark runs it with ANSI
    # mode off, so an implicit cast that fails is NULL instead of an error
    has_filters: bool = False
    # per key column, how the engine sent it (see
    # :func:`dpkit.analytics._column_types.key_codec`); empty: as they are
    key_codecs: tuple[str, ...] = ()
