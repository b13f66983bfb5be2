"""Exact joint counts (marginals) of a session's table under one contribution bound.

For algorithms that add their own noise and charge their own budget (synthetic data): one
statement counts any number of marginals of the session's table in its engine, with the
session's privacy unit, and returns only the cell counts (exact integers).

Bounding: every privacy unit keeps at most ``max_rows`` of its rows (the global group, chosen
by the plan's secret salted hash of the unit's own rows, never by file order), and every
marginal of the statement counts those same kept rows. Adding or removing one person changes
each marginal by at most ``max_rows`` in L1 and in L2 norm.

Cells: a marginal is a tuple of parts, :class:`CategoryPart` (a column's public categories)
or :class:`BinPart` (a column's public bin edges, values clamped into them); each part has one
extra last cell for the rows it does not place (NULL, NaN, a value outside the categories), and
the cell of a row is ``sum_p code_p * stride_p`` with the last part varying fastest (the
engine's ``cell_counts`` measure, :class:`~dpkit.analytics._plan.Measure`).

Nothing here charges a budget: :meth:`MarginalCounts.run` returns non-private values, to be
noised by the caller after it has charged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dpkit._numeric.grids import UniformEdges
from dpkit._numeric.validation import check_integer
from dpkit.analytics._plan import Aggregate, Bound, EngineResult, Measure, Plan, Source
from dpkit.analytics.engines._protocol import Checked
from dpkit.errors import PrivacyParameterError

__all__ = ["BinPart", "CategoryPart", "MarginalCounts", "marginal_counts"]


@dataclass(frozen=True)
class CategoryPart:
    """A column's public categories; other values and missing ones share one extra cell."""

    column: str
    categories: tuple[object, ...]

    @property
    def size(self) -> int:
        return len(self.categories) + 1


@dataclass(frozen=True)
class BinPart:
    """A column's public bin edges (strictly increasing); values are clamped into
    ``[edges[0], edges[-1]]``, missing ones go to one extra cell. ``time_kind``: the date
    reading of the edges for a date or timestamp column (``"date"``, ``"local"``,
    ``"instant"``; see :class:`~dpkit.analytics._plan.Measure`), ``""`` for numbers."""

    column: str
    edges: tuple[float, ...] | UniformEdges
    time_kind: str = ""

    @property
    def size(self) -> int:
        return len(self.edges)


Part = CategoryPart | BinPart


@dataclass(frozen=True)
class MarginalCounts:
    """The checked statement of :func:`marginal_counts`: :meth:`run` it after the charge."""

    plan: Plan
    marginals: tuple[tuple[Part, ...], ...]
    checked: Checked
    engine: Any

    def _decode(self, result: EngineResult) -> list[tuple[int, ...]]:
        out = []
        for k, parts in enumerate(self.marginals):
            cells = math.prod(p.size for p in parts)
            found = result.values.get(f"m{k}", ())
            out.append(tuple(int(x) for x in found[0]) if found else (0,) * cells)  # type: ignore[attr-defined]
        return out

    def run(self) -> list[tuple[int, ...]]:
        """Each marginal's cell counts, flat (the last part varies fastest). Exact, not
        private: call after the charge. Raises what the engine raises."""
        return self._decode(self.checked.run())

    def exact(self, source: Source) -> list[tuple[int, ...]]:
        """The same statement, with the same salt, on another ``source`` (audits and tests
        of neighbouring tables; nothing is charged and the counts are not private)."""
        import dataclasses

        return self._decode(self.engine.execute(dataclasses.replace(self.plan, source=source)))


def marginal_counts(
    session: Any, marginals: Sequence[Sequence[Part]], *, max_rows: int
) -> MarginalCounts:
    """One statement counting every marginal of ``marginals`` on ``session``'s table, each
    privacy unit bounded to ``max_rows`` rows; checked by the engine (reads no row).

    A fresh secret salt is drawn from the session's source of randomness."""
    max_rows = check_integer(max_rows, name="max_rows", minimum=1, maximum=2**31)
    if not marginals:
        raise PrivacyParameterError("marginal_counts needs at least one marginal")
    measures = []
    frozen: list[tuple[Part, ...]] = []
    for k, parts in enumerate(marginals):
        ps = tuple(parts)
        if not ps or not all(isinstance(p, (CategoryPart, BinPart)) for p in ps):
            raise PrivacyParameterError(
                f"marginal {k} must be a non-empty sequence of CategoryPart and BinPart"
            )
        for p in ps:
            session.table.check_column(p.column, "marginal column")
        frozen.append(ps)
        measures.append(
            Measure(
                name=f"m{k}",
                kind="cell_counts",
                parts=tuple(
                    Measure(
                        name=f"m{k}p{j}",
                        kind="category_counts",
                        column=p.column,
                        categories=p.categories,
                    )
                    if isinstance(p, CategoryPart)
                    else Measure(
                        name=f"m{k}p{j}",
                        kind="bin_counts",
                        column=p.column,
                        edges=p.edges,
                        time_kind=p.time_kind,
                    )
                    for j, p in enumerate(ps)
                ),
            )
        )
    salt = int.from_bytes(session.source_of_randomness.bytes(8), "little") >> 1
    plan = Plan(
        source=session.table.source,
        filters=(),
        bound=Bound(
            privacy_unit=session.privacy_unit,
            max_partitions=1,
            max_rows_per_partition=max_rows,
            salt=salt,
        ),
        aggregate=Aggregate(group_by=(), measures=tuple(measures)),
    )
    engine = session.engine
    return MarginalCounts(
        plan=plan, marginals=tuple(frozen), checked=engine.validate(plan), engine=engine
    )
