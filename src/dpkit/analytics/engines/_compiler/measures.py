"""The aggregate stage: each measure as per-row steps over the kept rows, then one aggregate.

Value pipeline of a measure (no division, no cast of an unclamped value, nothing that can
raise)::

    x   = CAST(col AS DOUBLE)             (TRY_CAST for text columns: junk becomes NULL)
    x   = CASE WHEN isnan(x) THEN NULL ELSE x END
    c   = CASE WHEN x IS NULL THEN NULL ELSE LEAST(GREATEST(x, lower), upper) END
    i   = LEAST(GREATEST(CAST(FLOOR(c * 2^k) AS BIGINT), L), U)   L = floor(lower 2^k), ...
    sum = COALESCE(SUM(CAST(i AS HUGEINT)), 0)

The NaN test comes before the clamp because ``GREATEST(NaN, a)`` is NaN in DuckDB (NaN sorts
above every number) and ``LEAST(NaN, b) = b``: an unguarded clamp would turn NaN into the upper
bound. The NULL test is needed because ``LEAST``/``GREATEST`` skip NULL arguments. ``c * 2^k``
is exact (a power-of-two scaling of a double in ``[lower, upper]``, checked not to overflow) and
``|L|, |U| <= 2^62`` is checked at compile time, so the ``BIGINT`` cast can never fail.

Bin and category counts give each row a cell index; the counts per cell are a ``histogram``
aggregate, or, for a profile without one, one grouping set per measure (:func:`grouping_sets`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence

from sqlglot import exp

from dpkit._numeric.grids import UniformEdges, equal_bins_exact
from dpkit._numeric.validation import check_integer
from dpkit.analytics._column_types import Family, temporal_codec
from dpkit.analytics._plan import Measure
from dpkit.analytics.engines._compiler.codecs import temporal_number
from dpkit.analytics.engines._compiler.columns import resolve
from dpkit.analytics.engines._compiler.compiled import OutputMeasure
from dpkit.analytics.engines._compiler.nodes import (
    P,
    Step,
    aliased,
    case_when,
    cast_to,
    clamp,
    colref,
    double,
    func,
    ident,
    int_lit,
    is_nan,
    is_null,
)
from dpkit.analytics.engines._compiler.profiles import DialectProfile
from dpkit.errors import PlanError

__all__ = ["MAX_FIXED", "MeasureSteps", "grouping_sets", "measure_sql", "numeric_inputs"]

MAX_FIXED = 2**62  # |floor(bound * 2^k)| must stay below this, so BIGINT never overflows


def _fixed_bounds(lower: float, upper: float, frac_bits: int, what: str) -> tuple[int, int]:
    L = math.floor(math.ldexp(lower, frac_bits))
    U = math.floor(math.ldexp(upper, frac_bits))
    if not (-MAX_FIXED <= L <= U <= MAX_FIXED):
        raise PlanError(
            f"{what}: bounds [{lower!r}, {upper!r}] scaled by 2**{frac_bits} leave the 63-bit "
            "integer range; use fewer fractional bits or tighter bounds"
        )
    return L, U


def _finite_bounds(lower: object, upper: object, what: str) -> tuple[float, float]:
    for v in (lower, upper):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            raise PlanError(f"{what}: bounds must be finite numbers, got {lower!r}, {upper!r}")
    lo, hi = float(lower), float(upper)  # type: ignore[arg-type]
    if not lo <= hi:
        raise PlanError(f"{what}: lower {lower!r} exceeds upper {upper!r}")
    return lo, hi


def _fixed_point(c: exp.Expression, m: Measure, profile: DialectProfile) -> exp.Expression:
    """``LEAST(GREATEST(CAST(FLOOR(c * 2^k) AS BIGINT), L), U)`` for ``c`` in [lower, upper]."""
    k = check_integer(m.frac_bits, name=f"{m.name}.frac_bits", minimum=0, maximum=64)
    lo, hi = _finite_bounds(m.lower, m.upper, m.name)
    L, U = _fixed_bounds(lo, hi, k, m.name)
    scaled = exp.Mul(this=c, expression=double(math.ldexp(1.0, k), profile))
    as_int = cast_to(exp.Floor(this=scaled), profile.fixed_type)
    return clamp(as_int, int_lit(L), int_lit(U))


def _clamped(x: exp.Expression, lo: float, hi: float, profile: DialectProfile) -> exp.Expression:
    return case_when(
        is_null(x), exp.Null(), clamp(x.copy(), double(lo, profile), double(hi, profile))
    )


def _fixed_or_null(c: exp.Expression, m: Measure, profile: DialectProfile) -> exp.Expression:
    return case_when(is_null(c), exp.Null(), _fixed_point(c.copy(), m, profile))


def _sum_int(f: exp.Expression, profile: DialectProfile) -> exp.Expression:
    return exp.Coalesce(
        this=exp.Sum(this=cast_to(f, profile.sum_type)),
        expressions=[cast_to(exp.Literal.number(0), profile.sum_type)],
    )


def _check_edges(m: Measure) -> Sequence[float]:
    if isinstance(m.edges, UniformEdges):  # equal bins, finite and increasing by construction
        return m.edges
    edges = tuple(m.edges)
    if len(edges) < 2:
        raise PlanError(f"{m.name}: bin_counts needs at least two edges, got {edges!r}")
    out = _finite_bounds(edges[0], edges[-1], m.name)  # type checks of the ends
    del out
    vals: list[float] = []
    for e in edges:
        if isinstance(e, bool) or not isinstance(e, (int, float)) or not math.isfinite(e):
            raise PlanError(f"{m.name}: edges must be finite numbers, got {e!r}")
        vals.append(float(e) + 0.0)
    if any(not a < b for a, b in itertools.pairwise(vals)):
        raise PlanError(f"{m.name}: edges must be strictly increasing, got {edges!r}")
    return tuple(vals)


def _bin_index(
    c: exp.Expression, edges: Sequence[float], lo: int, hi: int, profile: DialectProfile
) -> exp.Expression:
    """Index ``i`` in ``[lo, hi]`` with ``edges[i] <= c < edges[i+1]`` by binary search.

    A balanced tree of ``CASE WHEN c < edges[mid] THEN <left> ELSE <right> END``: about
    ``log2(bins)`` comparisons per row, exact for any sorted edges, no arithmetic on data.
    """
    if lo == hi:
        return int_lit(lo)
    mid = (lo + hi + 1) // 2  # bins [lo, mid-1] lie below edges[mid]
    return case_when(
        exp.LT(this=c.copy(), expression=double(edges[mid], profile)),
        _bin_index(c, edges, lo, mid - 1, profile),
        _bin_index(c, edges, mid, hi, profile),
    )


def _uniform_step(edges: Sequence[float]) -> float | None:
    """``w`` when ``edges[i] == lo + i * w`` exactly in doubles for every inner edge, else None.

    Then the bin of ``c`` can be computed arithmetically (:func:`_bin_guess`, :func:`_bin_correct`).
    Required besides: at most ``2^20`` bins and bins wide enough that every rounding error (of
    ``w``, of ``i w``, of ``(c - lo) f``), each a few ulps of ``max(|lo|, |hi|)``, stays far
    below one bin width, so the guess is off by at most one bin
    (:func:`~dpkit._numeric.grids.equal_bins_exact`, which every
    :class:`~dpkit._numeric.grids.UniformEdges` meets by construction).
    """
    bins = len(edges) - 1
    lo, hi = edges[0], edges[-1]
    if bins > 1 << 20:
        return None
    if isinstance(edges, UniformEdges):  # edges[i] == lo + i * w by construction
        return edges.step
    if not equal_bins_exact(lo, hi, bins):
        return None
    w = (hi - lo) / bins
    if any(lo + i * w != edges[i] for i in range(bins)):
        return None
    return w


def _edge_at(i: exp.Expression, lo: float, w: float, profile: DialectProfile) -> exp.Expression:
    """``lo + CAST(i AS DOUBLE) * w``: the same two double operations as the edge in Python."""
    return exp.Add(
        this=double(lo, profile),
        expression=exp.Mul(this=cast_to(i, profile.float_type), expression=double(w, profile)),
    )


def _bin_guess(
    c: exp.Expression, edges: Sequence[float], w: float, profile: DialectProfile
) -> exp.Expression:
    """``CAST(LEAST(GREATEST(FLOOR((c - lo) * f), 0), bins - 1) AS BIGINT)``, ``f = bins /
    (hi - lo)``: the bin of ``c`` (in ``[lo, hi]``, finite) up to one, by one multiplication."""
    bins = len(edges) - 1
    lo, hi = edges[0], edges[-1]
    diff = exp.Paren(this=exp.Sub(this=c.copy(), expression=double(lo, profile)))
    g = exp.Floor(this=exp.Mul(this=diff, expression=double(bins / (hi - lo), profile)))
    return cast_to(
        clamp(g, double(0.0, profile), double(float(bins - 1), profile)), profile.fixed_type
    )


def _bin_correct(
    c: exp.Expression, g: exp.Expression, edges: Sequence[float], w: float, profile: DialectProfile
) -> exp.Expression:
    """The exact bin from a guess ``g`` off by at most one: compare ``c`` with edges ``g`` and
    ``g + 1`` (computed as in :func:`_uniform_step`, so equal to ``edges[g]``, ``edges[g+1]``).

    ``CASE WHEN c < edge(g) THEN g - 1 WHEN g < bins - 1 AND c >= edge(g + 1) THEN g + 1
    ELSE g END`` (NULL stays NULL: every comparison with NULL is not true and ``g`` is NULL).
    """
    bins = len(edges) - 1
    lo = edges[0]
    below = exp.LT(this=c.copy(), expression=_edge_at(g.copy(), lo, w, profile))
    nxt = exp.Add(this=g.copy(), expression=int_lit(1))
    above = exp.and_(
        exp.LT(this=g.copy(), expression=int_lit(bins - 1)),
        exp.GTE(this=c.copy(), expression=_edge_at(nxt, lo, w, profile)),
    )
    return exp.Case(
        ifs=[
            exp.If(this=below, true=exp.Sub(this=g.copy(), expression=int_lit(1))),
            exp.If(this=above, true=nxt.copy()),
        ],
        default=g.copy(),
    )


_INT_RANGES: dict[str, tuple[int, int]] = {
    **dict.fromkeys(("TINYINT", "INT1"), (-(2**7), 2**7 - 1)),
    **dict.fromkeys(("SMALLINT", "INT2"), (-(2**15), 2**15 - 1)),
    **dict.fromkeys(("INTEGER", "INT", "INT4"), (-(2**31), 2**31 - 1)),
    **dict.fromkeys(("BIGINT", "INT8"), (-(2**63), 2**63 - 1)),
    **dict.fromkeys(("HUGEINT", "INT128"), (-(2**127), 2**127 - 1)),
    "UTINYINT": (0, 2**8 - 1),
    "USMALLINT": (0, 2**16 - 1),
    "UINTEGER": (0, 2**32 - 1),
    "UBIGINT": (0, 2**64 - 1),
    "UHUGEINT": (0, 2**128 - 1),
}


def _category_literal(
    value: object, family: Family, name: str, sql_type: str = "HUGEINT"
) -> exp.Expression | None:
    """The literal for one category in the column's type family; ``None`` for NULL/NaN.

    An integer category (or a whole float) on an integer column is written as a constant of
    the column's own type when it lies in that type's range, and as ``NULL`` (a comparison
    that is never true: the category counts 0) when it does not, so the statement never holds
    a cast that fails (``CAST(2**200 AS HUGEINT)`` would raise as soon as a row reached it).
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if family == "string":
        if isinstance(value, str):
            return exp.Literal.string(value)
    elif family == "boolean":
        if isinstance(value, bool):
            return exp.Boolean(this=value)
    elif family in ("integer", "decimal", "float"):
        if isinstance(value, bool):
            pass
        elif isinstance(value, int):
            if family == "integer":
                return _integer_literal(value, sql_type)
            try:
                as_float = float(value)
            except OverflowError:
                return exp.Null()  # beyond every double (and DECIMAL): matches nothing
            return cast_to(exp.Literal.string(repr(as_float)), "DOUBLE")
        elif isinstance(value, float) and math.isfinite(value):
            if family == "integer":
                if value.is_integer():
                    return _integer_literal(int(value), sql_type)
                return exp.Null()  # matches no integer; kept so the tuple keeps its length
            return cast_to(exp.Literal.string(repr(value)), "DOUBLE")
    raise PlanError(
        f"category {value!r} of measure {name!r} does not fit the column's type ({family})"
    )


def _integer_literal(value: int, sql_type: str) -> exp.Expression:
    """``CAST('value' AS <type>)`` when ``value`` fits the integer type, else ``NULL``."""
    t = sql_type.upper().strip()
    lo, hi = _INT_RANGES.get(t, _INT_RANGES["HUGEINT"])
    if not lo <= value <= hi:
        return exp.Null()  # no value of the column equals it: the category counts 0
    return cast_to(exp.Literal.string(str(value)), t if t in _INT_RANGES else "HUGEINT")


def _category_index(m: Measure, col: str, fam: Family, sql_type: str) -> exp.Expression:
    """Index of the row's category in ``m.categories`` (NULL when it is none of them)."""
    if not m.categories:
        raise PlanError(f"{m.name}: category_counts needs at least one category")
    c = colref(col)  # already normalized (NaN -> NULL) in the innermost SELECT
    ifs: list[exp.If] = []
    null_index: int | None = None
    for i, cat in enumerate(m.categories):
        lit = _category_literal(cat, fam, m.name, sql_type)
        if lit is None:
            if null_index is None:
                null_index = i
            continue
        if isinstance(lit, exp.Null):
            continue
        ifs.append(exp.If(this=exp.EQ(this=c.copy(), expression=lit), true=int_lit(i)))
    if null_index is not None:
        ifs.insert(0, exp.If(this=is_null(c.copy()), true=int_lit(null_index)))
    if not ifs:
        return exp.Null()
    return exp.Case(ifs=ifs, default=exp.Null())


def grouping_sets(
    select_items: list[exp.Expression], source: str, key_out: list[str], cell_sets: list[str]
) -> exp.Select:
    """``SELECT ..., idx..., COUNT(*) AS cell ... GROUP BY GROUPING SETS ((k), (k, idx_1), ...)``.

    The set ``(k)`` gives the scalar measures of each group (every ``GROUPING(idx_j)`` is 1
    there); the set ``(k, idx_j)`` gives, per group and cell ``idx_j``, the count of its rows
    (``GROUPING(idx_j) = 0``; rows whose ``idx_j`` is NULL, the skipped ones, form a cell of
    their own that the decoder ignores). Still one statement, and the output stays small: at
    most ``groups * (1 + sum of cells)`` rows.
    """
    items = [
        *select_items,
        *[colref(c) for c in cell_sets],
        aliased(exp.Count(this=exp.Star()), ident(P + "cell")),
    ]
    keys = [colref(k) for k in key_out]

    def gset(cols: Sequence[exp.Expression]) -> exp.Expression:
        return exp.Tuple(expressions=[c.copy() for c in cols])

    sets = [gset(keys), *[gset([*keys, colref(c)]) for c in cell_sets]]
    q = exp.select(*items).from_(source)
    q.set("group", exp.Group(expressions=[exp.GroupingSets(expressions=sets)]))
    return q


def numeric_inputs(
    value_cols: Sequence[str],
    schema: Mapping[str, str],
    families: Mapping[str, Family],
    profile: DialectProfile,
) -> tuple[list[exp.Expression], Step, dict[str, str]]:
    """The double ``x`` each measured column is read as: the items that carry the columns and
    their readings into the kept rows, the first step (NaN of a text reading -> NULL), and
    column -> name of its reading.

    Numbers and booleans are cast to a double; text is read with ``TRY_CAST`` (text that is
    no number is NULL) and its NaN turned into NULL; a date or timestamp is its day or
    microsecond number (:func:`.codecs.temporal_number`); any other type is NULL, refused by
    the measures that would read it."""
    items: list[exp.Expression] = []
    step0: Step = []
    xcol: dict[str, str] = {}
    for j, c in enumerate(value_cols):
        items.append(colref(c))
        fam = families[c]
        if fam in ("float", "integer", "decimal", "boolean"):
            items.append(aliased(cast_to(colref(c), profile.float_type), ident(f"{P}x{j}")))
        elif fam == "string":
            items.append(
                aliased(
                    exp.TryCast(
                        this=colref(c), to=exp.DataType.build(profile.float_type, dialect="duckdb")
                    ),
                    ident(f"{P}t{j}"),
                )
            )
            step0.append(
                (
                    f"{P}x{j}",
                    case_when(is_nan(colref(f"{P}t{j}"), profile), exp.Null(), colref(f"{P}t{j}")),
                )
            )
        elif temporal_codec(schema[c]) is not None:
            items.append(
                aliased(
                    temporal_number(colref(c), temporal_codec(schema[c]) or "", profile),
                    ident(f"{P}x{j}"),
                )
            )
        else:
            step0.append((f"{P}x{j}", exp.Null()))  # never read: refused below by kind
        xcol[c] = f"{P}x{j}"
    return items, step0, xcol


class MeasureSteps:
    """The per-row steps of all measures: step ``n`` reads the columns of steps ``< n`` by
    name (so no expression is ever duplicated), and becomes one CTE of the statement.

    ``cell_sets``: for a profile without a histogram aggregate, the cell-index columns, one
    grouping set each (see :func:`grouping_sets`)."""

    def __init__(self, profile: DialectProfile, step0: Step) -> None:
        self.profile = profile
        self.steps: list[Step] = [step0]
        self.cell_sets: list[str] = []
        #: the row condition of the measure being compiled when it has its own contribution
        #: bounds (``Measure.keep``): its cell index is NULL (skipped) on the other rows
        self.keep: exp.Expression | None = None

    def at(self, level: int, alias: str, e: exp.Expression) -> str:
        """Compute ``e`` as column ``alias`` in step ``level``; returns ``alias``."""
        while len(self.steps) <= level:
            self.steps.append([])
        self.steps[level].append((alias, e))
        return alias

    def cells(self, idx: str) -> exp.Expression:
        """Counts per cell index: ``histogram(idx)`` (a map), or with ``histogram=None`` the
        flag ``GROUPING(idx)`` of a grouping set ``(keys, idx)`` whose rows carry ``idx`` and
        its ``COUNT(*)`` (see :func:`grouping_sets`)."""
        if self.keep is not None:  # a row outside the measure's own bounds has no cell
            idx = self.at(_KEEP_LEVEL, idx + "k", case_when(self.keep, colref(idx), exp.Null()))
        if self.profile.histogram is not None:
            return func(self.profile.histogram, colref(idx))
        self.cell_sets.append(idx)
        return func("grouping", colref(idx))


#: The step of the cell indexes restricted to a measure's own bounds (after every index).
_KEEP_LEVEL = 5


def measure_sql(
    measures: Sequence[Measure],
    schema: Mapping[str, str],
    families: Mapping[str, Family],
    xcol: Mapping[str, str],
    pipe: MeasureSteps,
    kept: Callable[[tuple[int, int]], exp.Expression] | None = None,
) -> tuple[list[OutputMeasure], list[exp.Expression]]:
    """Each measure's aggregate, named ``__dpk_m<i>``, and how to decode it; the per-row
    steps they need go into ``pipe``.

    ``kept(p, r)``: the condition that a kept row is within bounds ``(p, r)`` (None without
    a privacy unit, where every row is kept whatever the bounds). A measure with its own
    ``keep`` aggregates only those rows: ``agg(...) FILTER (WHERE cond)`` for a scalar, the
    cell index NULL (no cell) outside them for bin and category counts."""
    outputs: list[OutputMeasure] = []
    items: list[exp.Expression] = []
    for i, m in enumerate(measures):
        out = f"{P}m{i}"
        cond = kept(m.keep) if kept is not None and m.keep is not None else None
        pipe.keep = cond
        e, size = _measure(i, m, schema, families, xcol, pipe)
        pipe.keep = None
        if cond is not None and size == 0:
            e = _only_kept(e, cond, m.name)
        outputs.append(OutputMeasure(m.name, m.kind, out, size))
        items.append(aliased(e, ident(out)))
    return outputs, items


def _only_kept(e: exp.Expression, cond: exp.Expression, name: str) -> exp.Expression:
    """A scalar aggregate restricted to the rows where ``cond`` holds: ``COUNT(..)``
    becomes ``COUNT(..) FILTER (WHERE cond)``, ``COALESCE(SUM(..), 0)`` filters its sum, and
    a filtered count (``units``) adds ``cond`` to its filter."""
    if isinstance(e, exp.Coalesce) and isinstance(e.this, exp.Sum):
        out = e.copy()
        out.set("this", exp.Filter(this=e.this.copy(), expression=exp.Where(this=cond.copy())))
        return out
    if isinstance(e, exp.Filter):
        both = exp.and_(e.expression.this.copy(), cond.copy())
        return exp.Filter(this=e.this.copy(), expression=exp.Where(this=both))
    if isinstance(e, exp.Count):
        return exp.Filter(this=e.copy(), expression=exp.Where(this=cond.copy()))
    raise PlanError(f"{name}: this measure cannot have its own contribution bounds")


def _measure(
    i: int,
    m: Measure,
    schema: Mapping[str, str],
    families: Mapping[str, Family],
    xcol: Mapping[str, str],
    pipe: MeasureSteps,
) -> tuple[exp.Expression, int]:
    """The aggregate of measure number ``i`` and its number of cells (0 for a scalar)."""
    kind = m.kind
    if kind == "rows":
        return exp.Count(this=exp.Star()), 0
    if kind == "units":
        return exp.Filter(
            this=exp.Count(this=exp.Star()), expression=exp.Where(this=colref(P + "first"))
        ), 0
    if kind == "cell_counts":
        return _cell_counts(i, m, schema, families, xcol, pipe)
    col = resolve(m.column, schema, f"column of measure {m.name!r}")
    fam = families[col]
    if kind == "category_counts":
        idx = pipe.at(1, f"{P}i{i}", _category_index(m, col, fam, schema[col]))
        return pipe.cells(idx), len(m.categories)
    _check_reading(m, col, schema[col], fam)
    x = colref(xcol[col])
    if kind == "values":
        return exp.Count(this=x), 0
    if kind == "sum":
        lo, hi = _finite_bounds(m.lower, m.upper, m.name)
        c1 = pipe.at(1, f"{P}c{i}", _clamped(x, lo, hi, pipe.profile))
        f1 = pipe.at(2, f"{P}f{i}", _fixed_or_null(colref(c1), m, pipe.profile))
        return _sum_int(colref(f1), pipe.profile), 0
    if kind == "sum_sq":
        return _sum_of_squares(i, m, x, pipe), 0
    if kind == "bin_counts":
        edges = _check_edges(m)
        return pipe.cells(_bin_of(i, x, edges, pipe)), len(edges) - 1
    raise PlanError(f"unknown measure kind {kind!r}")


#: Most cells of one ``cell_counts`` measure (its counts leave the statement as one map, or
#: as one grouping set on engines without a histogram aggregate).
MAX_JOINT_CELLS = 2**24


def _cell_counts(
    i: int,
    m: Measure,
    schema: Mapping[str, str],
    families: Mapping[str, Family],
    xcol: Mapping[str, str],
    pipe: MeasureSteps,
) -> tuple[exp.Expression, int]:
    """Joint counts of ``m.parts`` (see :class:`~dpkit.analytics._plan.Measure`): each part's
    index computed as its own kind computes it, a skipped row (NULL index) in the part's extra
    last cell, and the cell ``sum_p COALESCE(index_p, size_p - 1) * stride_p``: integer
    arithmetic on indexes below ``2**24``, which cannot overflow or raise."""
    if not m.parts:
        raise PlanError(f"{m.name}: cell_counts needs at least one part")
    codes: list[tuple[str, int]] = []
    for k, part in enumerate(m.parts):
        tag = f"{i}_{k}"
        col = resolve(part.column, schema, f"column of measure {m.name!r}")
        fam = families[col]
        if part.kind == "category_counts":
            idx = pipe.at(1, f"{P}i{tag}", _category_index(part, col, fam, schema[col]))
            size = len(part.categories) + 1
        elif part.kind == "bin_counts":
            _check_reading(part, col, schema[col], fam)
            edges = _check_edges(part)
            idx = _bin_of(tag, colref(xcol[col]), edges, pipe)
            size = len(edges)  # the bins and the extra cell
        else:
            raise PlanError(
                f"{m.name}: each part of cell_counts counts categories or bins, got {part.kind!r}"
            )
        codes.append((idx, size))
    total = math.prod(size for _, size in codes)
    if total > MAX_JOINT_CELLS:
        raise PlanError(
            f"{m.name}: {total:,} joint cells, more than {MAX_JOINT_CELLS:,}: use fewer parts, "
            "categories or bins"
        )
    stride = 1
    terms: list[exp.Expression] = []
    for idx, size in reversed(codes):
        code: exp.Expression = exp.Coalesce(this=colref(idx), expressions=[int_lit(size - 1)])
        terms.append(code if stride == 1 else exp.Mul(this=code, expression=int_lit(stride)))
        stride *= size
    cell = terms[0]
    for t in terms[1:]:
        cell = exp.Add(this=cell, expression=t)
    return pipe.cells(pipe.at(4, f"{P}i{i}", cell)), total


def _check_reading(m: Measure, col: str, sql_type: str, fam: Family) -> None:
    """Refuse a measure that reads values its column does not have: no number at all, dates
    for number edges (or the reverse), or a sum of dates."""
    temporal = temporal_codec(sql_type) is not None
    if fam == "other" and not temporal:
        raise PlanError(
            f"column {col!r} (type {sql_type}) has no numeric "
            f"reading; measure {m.name!r} cannot use it"
        )
    if m.kind == "bin_counts" and m.time_kind != (temporal_codec(sql_type) or ""):
        raise PlanError(
            f"{m.name}: column {col!r} has the type {sql_type} but the measure's "
            f"edges are {m.time_kind or 'numbers'}; give dates as the bounds or "
            "edges of a date or timestamp column, numbers for any other"
        )
    if temporal and m.kind in ("sum", "sum_sq"):
        raise PlanError(
            f"{m.name}: column {col!r} holds dates or timestamps ({sql_type}), "
            "which have no sum, mean or variance; ask for quantiles or a histogram "
            "of it instead"
        )


def _sum_of_squares(i: int, m: Measure, x: exp.Expression, pipe: MeasureSteps) -> exp.Expression:
    """``SUM(fixed(clamp((clamp(x, clamp_lower, clamp_upper) - center)^2, lower, upper)))``."""
    profile = pipe.profile
    clo, chi = _finite_bounds(m.clamp_lower, m.clamp_upper, m.name)
    center = m.center
    if (
        isinstance(center, bool)
        or not isinstance(center, (int, float))
        or not math.isfinite(center)
    ):
        raise PlanError(f"{m.name}: center must be a finite number, got {center!r}")
    lo, hi = _finite_bounds(m.lower, m.upper, m.name)
    c1 = pipe.at(1, f"{P}c{i}", _clamped(x, clo, chi, profile))
    d1 = pipe.at(2, f"{P}d{i}", exp.Sub(this=colref(c1), expression=double(float(center), profile)))
    q1 = pipe.at(
        3, f"{P}q{i}", _clamped(exp.Mul(this=colref(d1), expression=colref(d1)), lo, hi, profile)
    )
    f1 = pipe.at(4, f"{P}f{i}", _fixed_or_null(colref(q1), m, profile))
    return _sum_int(colref(f1), profile)


def _bin_of(i: int | str, x: exp.Expression, edges: Sequence[float], pipe: MeasureSteps) -> str:
    """The column of the bin index of ``x`` clamped into the edges (NULL stays NULL): by
    arithmetic when the edges are uniform (:func:`_uniform_step`), else by binary search."""
    profile = pipe.profile
    c1 = pipe.at(1, f"{P}c{i}", _clamped(x, edges[0], edges[-1], profile))
    width = _uniform_step(edges)
    if width is None:
        return pipe.at(
            2,
            f"{P}i{i}",
            case_when(
                is_null(colref(c1)),
                exp.Null(),
                _bin_index(colref(c1), edges, 0, len(edges) - 2, profile),
            ),
        )
    g1 = pipe.at(
        2,
        f"{P}g{i}",
        case_when(is_null(colref(c1)), exp.Null(), _bin_guess(colref(c1), edges, width, profile)),
    )
    return pipe.at(3, f"{P}i{i}", _bin_correct(colref(c1), colref(g1), edges, width, profile))
