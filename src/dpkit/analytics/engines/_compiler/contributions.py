"""Per-unit contribution histograms computed inside the engine (the planner's input).

A plan whose :class:`~dpkit.analytics._plan.Aggregate` sets ``unit_grid`` groups by the
privacy unit first (then the group columns) with one ``rows`` measure. Its statement does not
return one row per unit and group: the grouped result becomes a CTE, a second ``GROUP BY``
gives each unit its number of groups ``g`` and its largest number of rows in one group ``m``,
and a last global aggregate counts the units whose ``g`` (and ``m``) falls in each bin of the
public grid (bin ``i`` holds ``grid[i] <= v < grid[i+1]``, the last bin open above). Only
``2 * len(grid)`` integers leave the engine, as scalar ``rows`` measures named
``groups:i`` and ``rows:i``; both engines decode them as any global-group scalar. The rows
are not ranked and bounded first (each unit lands in exactly one bin of each histogram however
many rows it has, so no bound could change what leaves the engine), which spares the statement
its window sorts.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp

from dpkit.analytics.engines._compiler.compiled import OutputMeasure
from dpkit.analytics.engines._compiler.nodes import P, aliased, colref, ident
from dpkit.errors import PlanError

__all__ = ["unit_histograms"]


def _in_bin(v: exp.Expression, grid: Sequence[int], i: int) -> exp.Expression:
    cond: exp.Expression = exp.GTE(this=v.copy(), expression=exp.Literal.number(grid[i]))
    if i + 1 < len(grid):
        upper = exp.LT(this=v.copy(), expression=exp.Literal.number(grid[i + 1]))
        cond = exp.And(this=cond, expression=upper)
    one = exp.Case(
        ifs=[exp.If(this=cond, true=exp.Literal.number(1))], default=exp.Literal.number(0)
    )
    return exp.Coalesce(this=exp.Sum(this=one), expressions=[exp.Literal.number(0)])


def unit_histograms(
    grouped: exp.Select,
    unit_column: str,
    rows_column: str,
    grid: Sequence[int],
    ctes: list[tuple[str, exp.Expression]],
) -> tuple[exp.Select, list[OutputMeasure]]:
    """The final select counting units per grid bin from ``grouped`` (one row per unit and
    group, ``rows_column`` its kept rows), with its output measures. ``grouped`` and the
    per-unit step are appended to ``ctes``. The grid must be increasing positive integers."""
    if not grid or any(int(g) != g or g < 1 for g in grid) or list(grid) != sorted(set(grid)):
        raise PlanError(f"unit_grid must be increasing positive integers, got {tuple(grid)!r}")
    ctes.append((P + "pu", grouped))
    per_unit = (
        exp.select(
            aliased(exp.Count(this=exp.Star()), ident(P + "g")),
            aliased(exp.Max(this=colref(rows_column)), ident(P + "m")),
        )
        .from_(P + "pu")
        .group_by(colref(unit_column))
    )
    ctes.append((P + "unit", per_unit))
    items: list[exp.Expression] = []
    outputs: list[OutputMeasure] = []
    for tag, col in (("groups", P + "g"), ("rows", P + "m")):
        for i in range(len(grid)):
            out = f"{P}{tag}{i}"
            items.append(aliased(_in_bin(colref(col), grid, i), ident(out)))
            outputs.append(OutputMeasure(name=f"{tag}:{i}", kind="rows", column=out))
    return exp.select(*items).from_(P + "unit"), outputs
