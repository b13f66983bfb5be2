"""The engine-neutral logical plan of one private table release.

The builder produces a :class:`Plan`; an engine compiler (DuckDB, Spark, ...) turns it into one
statement that runs contribution bounding, clamping and exact integer aggregation inside the
engine and returns only small per-group integer aggregates (:class:`EngineResult`). Noise,
partition selection, confidence intervals and the budget stay in dpkit. Nothing in this module
imports an engine, pandas or pyarrow.

Semantics every engine must implement identically (up to the choice of hash function):

* **Rows**: the source's rows that satisfy every :class:`Filter` (public, row-level predicates).
* **Special values**: NaN and NULL are the same thing. A NaN or NULL in a group-by column is the
  NULL key (one group). A NULL privacy unit is one unit. Value measures skip rows whose column is
  NaN/NULL; ``rows`` counts every row. ``+-inf`` and huge finite values are clamped to the
  measure's bounds.
* **Contribution bounding** (:class:`Bound`), per privacy unit ``u``: keep the ``max_partitions``
  groups ``k`` of ``u`` with the smallest ``hash(salt, u, k)`` (ties broken by the key), and
  within each kept group the ``max_rows_per_partition`` rows with the smallest
  ``hash(salt, u, k, row)``, where ``row`` is the row's content (all columns), so the choice
  depends only on the unit's own rows, never on file order. With ``privacy_unit=None`` each row
  is its own unit.
  A measure with its own ``keep = (p, r)`` (see :class:`Measure`) reads only the rows of rank
  ``g <= p`` and ``rn - gr < r`` under the same salt: what a plan bounded at ``(p, r)`` keeps.
* **Fixed point**: a value measure maps a kept row's value ``x`` to the integer
  ``floor(clamp(f(x), lower, upper) * 2**frac_bits)``, then clamps that integer to
  ``[floor(lower * 2**frac_bits), floor(upper * 2**frac_bits)]`` (so a per-row contribution
  never leaves its range, whatever the engine's floating-point evaluation did), and sums the
  integers exactly (a 128-bit integer type). ``f`` is the identity for ``sum`` and
  ``(x - center)**2`` after clamping ``x`` to ``[clamp_lower, clamp_upper]`` for ``sum_sq``.
* **Public joins** (:class:`PublicJoin`): before the filters, each source row is joined with
  at most one row of a public table: the public table is first reduced to the keys that occur
  in it exactly once (a key repeated in the public table matches no row), so a join can drop
  a row (inner join) or add public columns to it, but never copy it. Join keys must have the
  same type family on both sides (no implicit cast that could fail on some values).
* **Buckets** (:class:`Bucket`): a derived column ``CASE WHEN p1 THEN v1 ... ELSE d END`` whose
  conditions are public row predicates (evaluated like filters: an error or NULL is false) and
  whose values are literals, computed per row after the joins and before the filters.
* **Derived columns** (:class:`Derived`): a row-level expression from the allow-list of
  :mod:`dpkit.analytics._derive`, computed per row after the joins and before the filters like a
  bucket; every operation that would raise is NULL instead (see
  :mod:`dpkit.analytics.engines._compiler.derived`).
* No division and no unclamped cast inside the engine; no data-dependent error.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from dpkit._numeric.grids import UniformEdges

__all__ = [
    "Aggregate",
    "Bound",
    "Bucket",
    "Derived",
    "EngineResult",
    "Filter",
    "Measure",
    "MeasureKind",
    "Plan",
    "PublicJoin",
    "Source",
    "SourceKind",
    "SparseCounts",
    "did_you_mean",
    "sparse_or_dense",
]

SourceKind = Literal["parquet", "csv", "table"]
MeasureKind = Literal[
    "rows", "units", "values", "sum", "sum_sq", "bin_counts", "category_counts", "cell_counts"
]


@dataclass(frozen=True, kw_only=True)
class Source:
    """Where the rows come from.

    ``kind="parquet"``/``"csv"``: ``location`` is a file path or glob. ``kind="table"``: a table
    or view name the engine's connection already knows (the session registers in-memory frames
    under a generated name).
    """

    kind: SourceKind
    location: str


@dataclass(frozen=True, kw_only=True)
class Filter:
    """A public row-level predicate in SQL (parsed and allow-listed by the compiler)."""

    predicate: str


@dataclass(frozen=True, kw_only=True)
class Bound:
    """Per-unit contribution bounding.

    ``salt`` is a fresh secret 64-bit integer per release, drawn from the session's
    :class:`~dpkit.noise.RandomSource`; it is never shown to the analyst.
    """

    privacy_unit: str | None
    max_partitions: int
    max_rows_per_partition: int
    salt: int


@dataclass(frozen=True, kw_only=True)
class Measure:
    """One integer aggregate per group, computed after bounding.

    kinds:

    * ``rows``: number of kept rows.
    * ``units``: number of distinct privacy units among the kept rows (for partition selection
      and ``count_distinct``).
    * ``values``: number of kept rows whose ``column`` is not NaN/NULL.
    * ``sum``: exact sum of ``floor(clamp(x, lower, upper) * 2**frac_bits)`` over kept rows
      with a non-NaN/NULL ``column``.
    * ``sum_sq``: as ``sum`` with ``(clamp(x, clamp_lower, clamp_upper) - center)**2`` in place of
      ``x``; ``lower``/``upper`` then bound the square.
    * ``bin_counts``: per bin ``i`` the number of kept rows with ``edges[i] <= clamp(x) <
      edges[i+1]`` (the last bin closed on the right); values are clamped to
      ``[edges[0], edges[-1]]`` first, NaN/NULL skipped. Returned as a tuple of ints.
    * ``category_counts``: per given category the number of kept rows whose ``column`` equals it
      (other values ignored). Returned as a tuple of ints.
    * ``cell_counts``: the joint counts of ``parts`` (each a ``category_counts`` or
      ``bin_counts`` measure on its own column): a kept row's code in part ``p`` is its
      category or bin index, or ``size_p - 1`` (one extra cell) when the part skips it (NULL,
      NaN, a value none of the categories); its cell is ``sum_p code_p * stride_p`` (the last
      part varies fastest, ``stride_p`` the product of the later parts' sizes), with ``size_p``
      the part's categories or bins plus one. Returned as a tuple of ``prod size_p`` ints.

    ``keep``: the measure's own contribution bounds ``(max_partitions,
    max_rows_per_partition)``, each at most the plan's :class:`Bound`, or None for the plan's.
    The measure then aggregates only the rows a plan bounded at ``keep`` (same salt) would
    keep: the ranks of each unit's groups and rows do not depend on the bounds, so the rows
    kept at ``keep`` are exactly those of rank within it (a subset of the rows the plan keeps).
    One statement serves statistics bounded in different ways (the planner's per-statistic
    bounds, :mod:`dpkit.analytics._planner`).

    ``time_kind``: for ``bin_counts``, the date reading its edges are in (``"date"``: days since
    1970-01-01, ``"local"``/``"instant"``: microseconds since the epoch, see
    :func:`dpkit.analytics._aggregates.to_number`), ``""`` for numbers. It must match the
    column's type: numeric edges on a date column (or date edges on a number) are refused.
    """

    name: str
    kind: MeasureKind
    column: str | None = None
    lower: float = 0.0
    upper: float = 0.0
    frac_bits: int = 0
    center: float = 0.0
    clamp_lower: float = 0.0
    clamp_upper: float = 0.0
    edges: tuple[float, ...] | UniformEdges = ()
    categories: tuple[object, ...] = ()
    time_kind: str = ""
    parts: tuple[Measure, ...] = ()
    keep: tuple[int, int] | None = None


@dataclass(frozen=True, kw_only=True)
class Aggregate:
    """Group by ``group_by`` (possibly empty: one global group) and compute ``measures``.

    ``unit_grid`` (non-empty): ``group_by`` starts with the privacy unit and ``measures`` is one
    ``rows`` measure; the result is then one global group of ``2 * len(unit_grid)`` integers,
    ``groups:i`` and ``rows:i``, the number of units whose number of groups (largest rows in
    one group) falls in bin ``i`` of the grid (see ``engines._compiler.contributions``)."""

    group_by: tuple[str, ...]
    measures: tuple[Measure, ...]
    unit_grid: tuple[int, ...] = ()


@dataclass(frozen=True, kw_only=True)
class PublicJoin:
    """Join each source row with at most one row of a public table (see the module doc).

    ``left_on[i]`` (a source column) must equal ``right_on[i]`` (a column of ``source``, the
    public table). ``columns`` lists ``(public column, exposed name)`` pairs: the public
    values become columns of the row under the exposed names (which must not clash with the
    source's columns). ``how="inner"`` drops rows without a match, ``"left"`` keeps them with
    NULL public columns.
    """

    source: Source
    left_on: tuple[str, ...]
    right_on: tuple[str, ...]
    columns: tuple[tuple[str, str], ...]
    how: Literal["inner", "left"] = "inner"


@dataclass(frozen=True, kw_only=True)
class Bucket:
    """A derived column: the value of the first case whose predicate holds, else ``default``.

    ``cases`` are ``(predicate, value)`` pairs: a public row predicate in SQL (allow-listed as
    a :class:`Filter`) and a literal (``str``, ``int``, ``float``, ``bool`` or ``None``). The
    bucket's values are public: every possible value is a literal of the plan.
    """

    name: str
    cases: tuple[tuple[str, object], ...]
    default: object = None

    @property
    def values(self) -> tuple[object, ...]:
        """Every value the bucket can take, in order of first appearance (public)."""
        out: dict[object, None] = {}
        for _, v in self.cases:
            out.setdefault(v, None)
        out.setdefault(self.default, None)
        return tuple(out)


@dataclass(frozen=True, kw_only=True)
class Derived:
    """A derived column: ``name`` holds the row expression ``expression`` (SQL text from the
    allow-list of :func:`dpkit.analytics._derive.parse_derived`), which reads the source's
    columns and the public joins' columns (not buckets nor other derived columns)."""

    name: str
    expression: str


@dataclass(frozen=True, kw_only=True)
class Plan:
    """Source -> public joins -> buckets -> filters -> bounding -> aggregation: one release's
    work inside the engine."""

    source: Source
    filters: tuple[Filter, ...]
    bound: Bound
    aggregate: Aggregate
    joins: tuple[PublicJoin, ...] = ()
    buckets: tuple[Bucket, ...] = ()
    derived: tuple[Derived, ...] = ()


@dataclass(frozen=True, kw_only=True)
class EngineResult:
    """What an engine returns: one entry per group present in the bounded data.

    ``keys[i]`` is the tuple of group-by values of group ``i`` (``None`` for the NULL/NaN key);
    ``values[name][i]`` is measure ``name`` of group ``i``: a Python ``int`` for scalar kinds, a
    tuple of ints for ``bin_counts`` and ``category_counts`` (a :class:`SparseCounts` beyond
    :data:`DENSE_CELLS` cells). Exact integers, never floats.
    """

    keys: tuple[tuple[object, ...], ...]
    values: dict[str, tuple[object, ...]]


#: Cell vectors longer than this leave an engine as :class:`SparseCounts` (a quantile's fine
#: grid: up to ``2**20`` bins per group, almost all empty).
DENSE_CELLS = 1 << 16


@dataclass(frozen=True, eq=False)
class SparseCounts(Sequence[int]):
    """A long vector of counts kept as its non-zero cells: ``indices`` (strictly increasing)
    and ``counts``; reads as the dense tuple of ``size`` ints (``len``, indexing, iteration,
    and equality with any sequence of the same counts)."""

    size: int
    indices: tuple[int, ...]
    counts: tuple[int, ...]

    @classmethod
    def from_map(cls, size: int, cells: Mapping[Any, Any] | None) -> SparseCounts:
        """From an engine's ``{cell index: count}`` (``None`` keys and zero counts dropped)."""
        pairs = sorted((int(k), int(v)) for k, v in (cells or {}).items() if k is not None and v)
        return cls(size, tuple(k for k, _ in pairs), tuple(v for _, v in pairs))

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[int]:
        dense = [0] * self.size
        for k, v in zip(self.indices, self.counts, strict=True):
            dense[k] = v
        return iter(dense)

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return tuple(self)[i]
        j = range(self.size)[i]
        pos = bisect.bisect_left(self.indices, j)
        hit = pos < len(self.indices) and self.indices[pos] == j
        return self.counts[pos] if hit else 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, SparseCounts):
            return (self.size, self.indices, self.counts) == (
                other.size,
                other.indices,
                other.counts,
            )
        if isinstance(other, Sequence) and not isinstance(other, (str, bytes)):
            return len(other) == self.size and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    def __hash__(self) -> int:  # equal to the dense tuple's hash, as equality demands
        return hash(tuple(self))


def sparse_or_dense(size: int, cells: Mapping[Any, Any] | None) -> tuple[int, ...] | SparseCounts:
    """An engine's ``{cell index: count}`` as the dense tuple of ``size`` counts, or as
    :class:`SparseCounts` when ``size`` exceeds :data:`DENSE_CELLS`."""
    if size > DENSE_CELLS:
        return SparseCounts.from_map(size, cells)
    counts = [0] * size
    for idx, n in (cells or {}).items():
        if idx is not None:
            counts[int(idx)] = int(n)
    return tuple(counts)


def did_you_mean(name: str, columns: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the column closest to a misspelt ``name`` (difflib's
    ratio at least 0.6, case ignored), or the empty string. For error messages only."""
    import difflib

    cols = [str(c) for c in columns]
    folded = {c.casefold(): c for c in cols}
    hits = difflib.get_close_matches(str(name).casefold(), list(folded), n=1, cutoff=0.6)
    return f" (did you mean {folded[hits[0]]!r}?)" if hits else ""
