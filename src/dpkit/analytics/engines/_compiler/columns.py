"""The columns a statement reads: resolved against the schema, checked by type, each once.

Every check here reads the plan and the column types only (public metadata), so a plan is
refused before anything runs, never because of a value in the data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dpkit.analytics._column_types import (
    Family,
    check_unit_type,
    collation,
    is_key_type,
    is_nested,
    type_family,
)
from dpkit.analytics._plan import Plan, did_you_mean
from dpkit.analytics.engines._compiler.nodes import P
from dpkit.errors import PlanError

__all__ = ["PlanColumns", "Reads", "plan_columns", "resolve"]


def resolve(name: object, schema: Mapping[str, str], what: str) -> str:
    """The schema's spelling of column ``name`` (exact match first, then case-insensitive)."""
    if not isinstance(name, str) or not name:
        raise PlanError(f"{what} must be a non-empty column name, got {name!r}")
    if name in schema:
        return name
    folded = [c for c in schema if c.casefold() == name.casefold()]
    if len(folded) == 1:
        return folded[0]
    raise PlanError(
        f"{what} {name!r} is not a column of the source"
        f"{did_you_mean(name, schema)} (columns: {list(schema)})"
    )


@dataclass
class Reads:
    """The columns the statement reads, in the order they were first asked for; each is
    normalized once in the innermost ``SELECT`` and read under its own name above it."""

    schema: Mapping[str, str]  # column -> engine type, the source's and the added ones
    used: list[str] = field(default_factory=list)

    @property
    def families(self) -> dict[str, Family]:
        return {c: type_family(t) for c, t in self.schema.items()}

    def use(self, name: object, what: str) -> str:
        """The column ``name`` resolved and recorded as read; refuses internal names and
        collated text (decided by the type)."""
        col = resolve(name, self.schema, what)
        if col.casefold().startswith(P):  # DuckDB and Spark resolve names in any case
            raise PlanError(
                f"column names starting with {P!r} (in any case) are reserved, got {col!r}"
            )
        coll = collation(self.schema[col])
        if coll is not None:
            # Hashes and ranks read the bytes, GROUP BY and joins the collation: one person
            # could take one partition slot per spelling of one group. Decided by the type.
            raise PlanError(
                f"{what} {col!r} has the collation {coll}: dpkit compares text byte by byte; "
                f"give the column the default collation (e.g. collate({col}, 'UTF8_BINARY'))"
            )
        if col not in self.used:
            self.used.append(col)
        return col


@dataclass(frozen=True)
class PlanColumns:
    """The privacy unit, the group keys and the measured columns of a plan (schema names)."""

    unit: str | None
    keys: tuple[str, ...]
    values: tuple[str, ...]  # the columns of the measures that read values, each once

    @property
    def key_out(self) -> list[str]:
        """The internal names the keys take from the row stage on."""
        return [f"{P}k{i}" for i in range(len(self.keys))]


def plan_columns(plan: Plan, reads: Reads) -> PlanColumns:
    """The unit, keys and measured columns of ``plan``, read through ``reads`` in that order;
    refuses a unit or a key whose type cannot identify a person or a group."""
    schema = reads.schema
    bound, agg = plan.bound, plan.aggregate
    unit = reads.use(bound.privacy_unit, "privacy_unit") if bound.privacy_unit is not None else None
    if unit is not None:
        check_unit_type(unit, schema[unit])
    keys = [reads.use(k, "group_by column") for k in agg.group_by]
    if len(set(keys)) != len(keys):
        raise PlanError(f"group_by repeats a column: {agg.group_by}")
    for k in keys:
        if is_nested(schema[k]):
            raise PlanError(
                f"group_by column {k!r} has the nested type {schema[k]}; a group key must be a "
                "scalar (number, text, boolean, date, ...): group by a scalar column instead"
            )
        if not is_key_type(schema[k]):
            raise PlanError(
                f"group_by column {k!r} has the type {schema[k]}, which cannot be a group key "
                "(its values do not reach Python one to one): group by a number, text, "
                "boolean, date, timestamp (microseconds) or day-time interval column instead, "
                "e.g. a cast of this one"
            )
    values: list[str] = []
    for m in agg.measures:
        if m.kind in ("rows", "units"):
            continue
        for part in m.parts if m.kind == "cell_counts" else (m,):
            col = reads.use(part.column, f"column of measure {m.name!r}")
            if col not in values:
                values.append(col)
    return PlanColumns(unit, tuple(keys), tuple(values))
