"""Public column domains of a synthetic table: what each modelled column may hold.

Every column of a synthetic-data model has a domain declared before any data is read: a
:class:`Categorical` column lists its values; a :class:`Numeric` column gives a number of bins
and, optionally, public bounds or edges; a :class:`Date` column does the same for dates and
timestamps, or cuts its public range by a calendar unit. Each row's value is coded as an
integer cell ``0 .. size - 1``:

* categorical: ``code = i`` when the value equals ``values[i]``;
* numeric and date: bin ``i`` holds ``edges[i] <= x < edges[i + 1]``, values below the first
  edge in bin 0 and values from the last inner edge up in the last bin (clamping); a date is
  read as the number the engines read it as (days since 1970-01-01 for a ``DATE``,
  microseconds for a ``TIMESTAMP``);
* the last code, ``size - 1``, is *missing*: NULL, NaN (read as NULL by the engines), or a
  categorical value outside the declared list. The synthetic table writes it back as a
  missing value, so the share of missing values is modelled like any other cell.

``missing=False`` (on every domain) declares that the synthetic table has no missing values
in that column. The measurements are the same (the missing cell is still counted, with the
same noise and charge); the fitted model is then conditioned on "not missing" for the column
(its missing cell set to probability 0 in every table of the model, each table renormalised),
so sampling never writes a missing value there. That is post-processing of the released
noisy measurements and costs no privacy (Dwork and Roth 2014, Prop. 2.1). Real rows that are
missing were measured in the missing cell; the synthetic table leaves them out of the
column's distribution (the other cells' shares grow in proportion).

Edges. They are public when given (``edges=[...]``), equal-width over public bounds
(``Numeric(lower, upper, bins)``), or calendar units over a public range (``Date(lower,
upper, unit="month")``). Otherwise they are *chosen privately* inside the fit's one charge
(:mod:`dpkit.synth._binning`): a missing bound from the query planner's noisy range histogram,
and with ``edges="quantile"`` (the default without public bounds) the inner edges from
private quantiles. Such a domain is *unresolved* until the fit; the fitted model holds the
resolved one (its edges known), and saves it.
"""

from __future__ import annotations

import copy
import datetime
import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpkit._numeric.grids import check_equal_bins
from dpkit.analytics.binning import parse_date_bound, to_number
from dpkit.errors import PrivacyParameterError

__all__ = [
    "Categorical",
    "ColumnDomain",
    "Date",
    "Numeric",
    "check_domains",
    "check_missing",
    "sql_literal",
    "with_missing",
]

#: Largest number of values or bins one column may declare (plus its missing cell).
MAX_COLUMN_CELLS = 10_000
#: The calendar units a :class:`Date` column can be cut by.
UNITS = ("year", "quarter", "month", "week", "day", "hour")


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def sql_literal(value: object) -> str:
    """A public literal in SQL: text quoted, integers and finite floats as numbers, booleans."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PrivacyParameterError(f"a category must be a finite number, got {value!r}")
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise PrivacyParameterError(
        f"a category must be text, an integer, a float or a boolean, got {value!r}"
    )


@dataclass(frozen=True)
class Categorical:
    """A column whose values are the public list ``values`` (plus a missing cell).

    Values outside the list and missing values share the missing cell. ``missing=False``:
    the synthetic table holds no missing value in this column (module doc; no privacy cost).
    """

    values: tuple[object, ...]
    missing: bool = True

    def __init__(self, values: Sequence[object], *, missing: bool = True) -> None:
        check_missing(missing)
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise PrivacyParameterError(
                f"Categorical takes a list of public values, got {values!r}"
            )
        vals = tuple(values)
        if not vals:
            raise PrivacyParameterError("Categorical needs at least one value")
        if len(vals) >= MAX_COLUMN_CELLS:
            raise PrivacyParameterError(
                f"Categorical takes at most {MAX_COLUMN_CELLS - 1} values, got {len(vals)}"
            )
        for v in vals:
            sql_literal(v)  # refuses what cannot be a literal
        keys = [(type(v).__name__, v) for v in vals]
        if len(set(keys)) != len(keys):
            raise PrivacyParameterError(f"Categorical values must be distinct, got {list(vals)}")
        object.__setattr__(self, "values", vals)
        object.__setattr__(self, "missing", missing)

    @property
    def size(self) -> int:
        """Number of cells: the values and the missing cell."""
        return len(self.values) + 1

    def cases(self, column: str) -> list[tuple[str, int]]:
        """``(condition, code)`` for every value (the missing cell is the default)."""
        col = quote_ident(column)
        return [(f"{col} = {sql_literal(v)}", i) for i, v in enumerate(self.values)]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "categorical", "values": list(self.values)}
        return _flag(out, self.missing)


def check_missing(missing: Any) -> bool:
    """The ``missing`` declaration: only ``True`` or ``False``."""
    if not isinstance(missing, bool):
        raise PrivacyParameterError(f"missing must be True or False, got {missing!r}")
    return missing


def with_missing(dom: ColumnDomain, missing: bool) -> ColumnDomain:
    """``dom`` with the ``missing`` declaration set (a copy; ``dom`` itself unchanged)."""
    if dom.missing == missing:
        return dom
    out = copy.copy(dom)
    object.__setattr__(out, "missing", missing)
    return out


def _check_bins(bins: Any, what: str) -> int:
    if isinstance(bins, bool) or not isinstance(bins, int) or not 1 <= bins < MAX_COLUMN_CELLS:
        raise PrivacyParameterError(
            f"{what} bins must be an integer from 1 to {MAX_COLUMN_CELLS - 1}, got {bins!r}"
        )
    return bins


def _check_number(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise PrivacyParameterError(f"{what} must be a finite number, got {v!r}")
    return float(v)


def _check_cut(edges: Sequence[float], what: str) -> tuple[float, ...]:
    cut = tuple(_check_number(e, f"{what} edges") for e in edges)
    if len(cut) < 2 or any(not a < b for a, b in itertools.pairwise(cut)):
        raise PrivacyParameterError(
            f"{what} edges must be at least two strictly increasing numbers, got {list(edges)}"
        )
    if len(cut) > MAX_COLUMN_CELLS:
        raise PrivacyParameterError(
            f"{what} takes at most {MAX_COLUMN_CELLS - 1} bins, got {len(cut) - 1}"
        )
    return cut


def _mode(edges: Any, bounded: bool, what: str) -> str:
    if edges is None:
        return "equal" if bounded else "quantile"
    if edges in ("equal", "quantile"):
        return str(edges)
    raise PrivacyParameterError(
        f"{what} edges must be 'equal', 'quantile' or a list of edges, got {edges!r}"
    )


def _equal(lower: float, upper: float, bins: int) -> tuple[float, ...]:
    """``lower + i (upper - lower) / bins`` (the last one is ``upper``)."""
    w = (upper - lower) / bins
    return (*(lower + i * w for i in range(bins)), upper)


def _edges_text(cut: Sequence[Any], fmt: Any = None) -> str:
    shown = [fmt(e) if fmt else f"{e:.6g}" for e in cut]
    if len(shown) > 12:
        shown = [*shown[:5], "...", *shown[-5:]]
    return ", ".join(shown)


class _Binned:
    """What :class:`Numeric` and :class:`Date` share: bins, bounds, and edges once known."""

    lower: Any
    upper: Any
    bins: int
    mode: str
    cut: tuple[float, ...] | None

    @property
    def resolved(self) -> bool:
        """Whether the edges are known (public, or chosen by a fit)."""
        return self.cut is not None

    @property
    def needs_range(self) -> bool:
        """Whether a fit must find a bound privately."""
        return self.cut is None and (self.lower is None or self.upper is None)

    @property
    def needs_quantiles(self) -> bool:
        """Whether a fit must choose the inner edges by private quantiles."""
        return self.cut is None and self.mode == "quantile" and self.bins > 1

    @property
    def size(self) -> int:
        """Number of cells: the bins and the missing cell."""
        return self.bins + 1


@dataclass(frozen=True, init=False)
class Numeric(_Binned):
    """A numeric column cut into ``bins`` bins (plus a missing cell); sampled values are
    uniform inside their bin.

    * ``Numeric(lower, upper, bins)``: ``bins`` equal-width bins of the public ``[lower,
      upper]`` (values outside clamped into the end bins); nothing is spent on binning.
    * ``Numeric(lower, upper, bins, edges="quantile")``: the inner edges are private
      quantiles ``1 / bins, ..., (bins - 1) / bins`` of the column inside the public bounds.
    * ``Numeric(bins=16)`` (no bounds; ``edges="quantile"`` by default, or ``"equal"``): the
      range is found privately first (the query planner's noisy histogram over 0 and
      ``+-2^j``), then cut by private quantiles (or into equal bins). A single public bound
      (``Numeric(lower=0)``) replaces the private one on its side.
    * ``Numeric(edges=[0, 10, 20, 50, 100])``: public edges, nothing spent.

    Edges chosen privately are paid from the fit's budget (its ``binning`` share), before the
    marginals are measured, and shown by :meth:`~dpkit.synth.SyntheticModel.summary`.
    """

    lower: float | None
    upper: float | None
    bins: int
    mode: str  # "equal", "quantile" or "given"
    cut: tuple[float, ...] | None  # the edges, once known
    chosen: bool  # edges chosen privately by a fit
    missing: bool = True  # False: no missing value in the synthetic column

    def __init__(
        self,
        lower: float | None = None,
        upper: float | None = None,
        bins: int = 16,
        *,
        edges: str | Sequence[float] | None = None,
        missing: bool = True,
    ) -> None:
        object.__setattr__(self, "missing", check_missing(missing))
        lo = None if lower is None else _check_number(lower, "Numeric lower")
        hi = None if upper is None else _check_number(upper, "Numeric upper")
        if lo is not None and hi is not None and not lo < hi:
            raise PrivacyParameterError(
                f"Numeric bounds must satisfy lower < upper, got [{lo}, {hi}]"
            )
        cut: tuple[float, ...] | None = None
        if edges is not None and not isinstance(edges, str):
            if lo is not None or hi is not None:
                raise PrivacyParameterError(
                    "give Numeric either edges=[...] or bounds (lower, upper), not both"
                )
            cut = _check_cut(edges, "Numeric")
            lo, hi, b, mode = cut[0], cut[-1], len(cut) - 1, "given"
        else:
            mode = _mode(edges, lo is not None and hi is not None, "Numeric")
            b = _check_bins(bins, "Numeric")
            # equal bins, or the private edges' candidate grid (at least 2 equal bins), must
            # differ in doubles: refused here, from the public bounds, not after the charge
            if lo is not None and hi is not None:
                check_equal_bins(lo, hi, b if mode == "equal" else 2, name="Numeric")
            if mode == "equal" and lo is not None and hi is not None:
                cut = _equal(lo, hi, b)
        self._set(lo, hi, b, mode, cut, False)

    def _set(
        self,
        lower: float | None,
        upper: float | None,
        bins: int,
        mode: str,
        cut: tuple[float, ...] | None,
        chosen: bool,
    ) -> None:
        for k, v in (
            ("lower", lower),
            ("upper", upper),
            ("bins", bins),
            ("mode", mode),
            ("cut", cut),
            ("chosen", chosen),
        ):
            object.__setattr__(self, k, v)

    @classmethod
    def chosen_edges(cls, edges: Sequence[float], mode: str) -> Numeric:
        """The resolved domain of a fit: ``edges`` chosen privately in ``mode``."""
        out = cls(edges=edges)
        out._set(out.lower, out.upper, out.bins, mode, out.cut, True)
        return out

    @property
    def edges(self) -> tuple[float, ...]:
        """The bin edges (``bins + 1`` numbers); refused while they are still to be chosen."""
        if self.cut is None:
            raise PrivacyParameterError(
                "this Numeric column's edges are chosen privately by the fit; read them from "
                "the fitted model's domains"
            )
        return self.cut

    def describe(self) -> str:
        if self.cut is None:
            how = "private range" if self.needs_range else f"[{self.lower}, {self.upper}]"
            return f"numeric, {self.bins} bins, edges to be chosen ({self.mode} over {how})"
        how = f"chosen privately ({self.mode})" if self.chosen else "public"
        return f"numeric, {self.bins} bins, {how} edges: {_edges_text(self.cut)}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "numeric",
            "lower": self.lower,
            "upper": self.upper,
            "bins": self.bins,
            "mode": self.mode,
            "edges": None if self.cut is None else list(self.cut),
            "chosen": self.chosen,
        }
        return _flag(out, self.missing)


def _calendar(lower: datetime.date, upper: datetime.date, unit: str) -> list[datetime.date]:
    """The first instants of the calendar units from the one holding ``lower`` to the first
    at or after ``upper`` (dates stay dates, date-times keep their time zone)."""
    is_dt = isinstance(lower, datetime.datetime)
    if isinstance(lower, datetime.datetime):
        t: datetime.date = lower.replace(minute=0, second=0, microsecond=0)
        if unit != "hour":
            t = lower.replace(hour=0, minute=0, second=0, microsecond=0)
    else:
        t = lower
    if unit == "year":
        t = t.replace(month=1, day=1)
    elif unit == "quarter":
        t = t.replace(month=3 * ((t.month - 1) // 3) + 1, day=1)
    elif unit == "month":
        t = t.replace(day=1)
    elif unit == "week":
        t = t - datetime.timedelta(days=t.weekday())  # Monday
    up = upper
    if isinstance(up, datetime.datetime) != is_dt:  # compare dates with dates
        up = (
            datetime.datetime.combine(up, datetime.time(), tzinfo=getattr(lower, "tzinfo", None))
            if is_dt
            else up.date()  # type: ignore[attr-defined]
        )
    out = [t]
    while out[-1] < up:
        out.append(_step(out[-1], unit))
        if len(out) > MAX_COLUMN_CELLS:
            raise PrivacyParameterError(
                f"Date from {lower} to {upper} by {unit} has more than "
                f"{MAX_COLUMN_CELLS - 1} bins: use a longer unit or a shorter range"
            )
    if len(out) < 2:
        out.append(_step(out[-1], unit))
    return out


def _step(t: datetime.date, unit: str) -> datetime.date:
    if unit in ("year", "quarter", "month"):
        months = {"year": 12, "quarter": 3, "month": 1}[unit]
        m = t.month - 1 + months
        return t.replace(year=t.year + m // 12, month=m % 12 + 1)
    if unit == "week":
        return t + datetime.timedelta(days=7)
    if unit == "day":
        return t + datetime.timedelta(days=1)
    return t + datetime.timedelta(hours=1)


@dataclass(frozen=True, init=False)
class Date(_Binned):
    """A date or timestamp column cut into bins (plus a missing cell); sampled values are
    uniform inside their bin (to the day for a ``DATE``, the microsecond for a timestamp).

    * ``Date("2020-01-01", "2024-12-31", unit="month")``: one bin per calendar month (also
      ``"year"``, ``"quarter"``, ``"week"``, ``"day"``, ``"hour"``) of the public range;
      nothing is spent on binning.
    * ``Date(lower, upper, bins)``: equal-width bins of the public range (as for
      :class:`Numeric`, ``edges="equal"`` is the default when both bounds are given).
    * ``Date(lower, upper, bins, edges="quantile")``: private quantiles inside the public range;
      ``Date(bins=12)`` (no bounds: ``edges="quantile"`` by default) first finds the range
      privately, to the year (a noisy histogram over the years 1900-2100; dates outside them
      count in the end years).
    * ``Date(edges=["2020-01-01", "2021-07-01", "2023-01-01"])``: public edges.

    Bounds and edges are ISO strings, :class:`datetime.date` or :class:`datetime.datetime`;
    they become the column's numbers once its type is known (before anything is spent).
    """

    lower: datetime.date | None
    upper: datetime.date | None
    bins: int
    unit: str | None
    mode: str  # "equal", "quantile", "calendar" or "given"
    points: tuple[datetime.date, ...] | None  # public edges as dates (calendar, given)
    time_kind: str | None  # "date", "local" or "instant", once resolved
    cut: tuple[float, ...] | None  # the edges in the column's numbers, once resolved
    chosen: bool
    missing: bool = True  # False: no missing value in the synthetic column

    def __init__(
        self,
        lower: str | datetime.date | None = None,
        upper: str | datetime.date | None = None,
        bins: int = 16,
        *,
        unit: str | None = None,
        edges: str | Sequence[str | datetime.date] | None = None,
        missing: bool = True,
    ) -> None:
        object.__setattr__(self, "missing", check_missing(missing))
        lo = None if lower is None else parse_date_bound(lower, "Date lower")
        hi = None if upper is None else parse_date_bound(upper, "Date upper")
        points: tuple[datetime.date, ...] | None = None
        if unit is not None:
            if unit not in UNITS:
                raise PrivacyParameterError(f"Date unit must be one of {UNITS}, got {unit!r}")
            if lo is None or hi is None or edges is not None:
                raise PrivacyParameterError(
                    f"Date(unit={unit!r}) cuts a public range: give lower and upper (and no "
                    "edges); without public bounds give bins= for private quantile bins"
                )
            points = tuple(_calendar(lo, hi, unit))
            mode, b = "calendar", len(points) - 1
        elif edges is not None and not isinstance(edges, str):
            if lo is not None or hi is not None:
                raise PrivacyParameterError(
                    "give Date either edges=[...] or bounds (lower, upper), not both"
                )
            points = tuple(parse_date_bound(e, "Date edges") for e in edges)
            if len(points) < 2 or len(points) > MAX_COLUMN_CELLS:
                raise PrivacyParameterError(
                    f"Date edges must be 2 to {MAX_COLUMN_CELLS} dates, got {len(points)}"
                )
            lo, hi, mode, b = points[0], points[-1], "given", len(points) - 1
        else:
            mode = _mode(edges, lo is not None and hi is not None, "Date")
            b = _check_bins(bins, "Date")
        self._set(lo, hi, b, unit, mode, points, None, None, False)
        if lo is not None and hi is not None:  # lower < upper, checked in a common reading
            kind = "instant" if getattr(lo, "tzinfo", None) or getattr(hi, "tzinfo", None) else ""
            try:
                a, z = to_number(lo, kind or "local"), to_number(hi, kind or "local")
            except PrivacyParameterError:
                a, z = 0.0, 1.0  # mixed readings: checked again once the column is known
            if not a < z:
                raise PrivacyParameterError(
                    f"Date bounds must satisfy lower < upper, got [{lo}, {hi}]"
                )

    def _set(self, *values: Any) -> None:
        names = ("lower", "upper", "bins", "unit", "mode", "points", "time_kind", "cut", "chosen")
        for k, v in zip(names, values, strict=True):
            object.__setattr__(self, k, v)

    def for_column(self, time_kind: str, column: str) -> Date:
        """This domain with its public dates read as the numbers of a column of date reading
        ``time_kind`` (resolved if its edges are public). Refusals name the column."""
        what = f"Date column {column!r}"
        if self.mode == "calendar" and self.unit == "hour" and time_kind == "date":
            raise PrivacyParameterError(f"{what} holds dates: it has no hours; use unit='day'")
        lo = None if self.lower is None else to_number(self.lower, time_kind, what)
        hi = None if self.upper is None else to_number(self.upper, time_kind, what)
        cut: tuple[float, ...] | None = None
        if self.points is not None:
            pts = [
                p.date() if time_kind == "date" and isinstance(p, datetime.datetime) else p
                for p in self.points
            ]
            cut = _check_cut([to_number(p, time_kind, what) for p in pts], what)
        elif self.mode == "equal" and lo is not None and hi is not None:
            if not lo < hi:
                raise PrivacyParameterError(f"{what}: lower must be before upper")
            cut = _equal(lo, hi, self.bins)
        out = Date.__new__(Date)
        out._set(
            self.lower, self.upper, self.bins, self.unit, self.mode, self.points, time_kind,
            cut, False,
        )  # fmt: skip
        object.__setattr__(out, "missing", self.missing)
        if lo is not None and hi is not None and not lo < hi:
            raise PrivacyParameterError(f"{what}: lower must be before upper")
        return out

    @property
    def number_bounds(self) -> tuple[float | None, float | None]:
        """The public bounds in the column's numbers (after :meth:`for_column`)."""
        if self.time_kind is None:
            raise PrivacyParameterError("the Date column's type is not known yet")
        lo = None if self.lower is None else to_number(self.lower, self.time_kind)
        hi = None if self.upper is None else to_number(self.upper, self.time_kind)
        return lo, hi

    @classmethod
    def chosen_edges(cls, edges: Sequence[float], mode: str, time_kind: str) -> Date:
        """The resolved domain of a fit: ``edges`` (numbers) chosen privately in ``mode``."""
        cut = _check_cut(edges, "Date")
        out = cls.__new__(cls)
        out._set(None, None, len(cut) - 1, None, mode, None, time_kind, cut, True)
        return out

    @property
    def edges(self) -> tuple[float, ...]:
        """The bin edges in the column's numbers (days or microseconds since 1970)."""
        if self.cut is None:
            raise PrivacyParameterError(
                "this Date column's edges are known once the fit reads its type (and chooses "
                "them privately if asked): read them from the fitted model's domains"
            )
        return self.cut

    def edge_dates(self) -> list[datetime.date]:
        """The edges as dates (a ``DATE`` column) or date-times (a timestamp column)."""
        from dpkit.analytics.binning import from_number

        return [from_number(e, self.time_kind or "local") for e in self.edges]

    def describe(self) -> str:
        if self.cut is None:
            how = "private range" if self.needs_range else f"[{self.lower}, {self.upper}]"
            return f"date, {self.bins} bins, edges to be chosen ({self.mode} over {how})"
        how = f"chosen privately ({self.mode})" if self.chosen else f"public ({self.mode})"
        shown = _edges_text([d.isoformat() for d in self.edge_dates()], str)
        kind = "date" if self.time_kind == "date" else "timestamp"
        return f"{kind}, {self.bins} bins, {how} edges: {shown}"

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "date",
            "lower": None if self.lower is None else self.lower.isoformat(),
            "upper": None if self.upper is None else self.upper.isoformat(),
            "bins": self.bins,
            "unit": self.unit,
            "mode": self.mode,
            "points": None if self.points is None else [p.isoformat() for p in self.points],
            "time_kind": self.time_kind,
            "edges": None if self.cut is None else list(self.cut),
            "chosen": self.chosen,
        }
        return _flag(out, self.missing)


ColumnDomain = Categorical | Numeric | Date


def _flag(out: dict[str, Any], missing: bool) -> dict[str, Any]:
    """``out`` with ``"missing": false`` when declared (absent otherwise, as older files)."""
    if not missing:
        out["missing"] = False
    return out


def domain_from_dict(data: Any) -> ColumnDomain:
    """The domain a ``to_dict`` wrote (a saved model's resolved domains, or older files,
    which have no ``missing`` entry: ``missing=True``)."""
    if not isinstance(data, dict):
        raise PrivacyParameterError(f"a column domain must be an object, got {data!r}")
    return with_missing(_domain_of(data), check_missing(data.get("missing", True)))


def _domain_of(data: dict[str, Any]) -> ColumnDomain:
    kind = data.get("kind")
    if kind == "categorical":
        return Categorical(data["values"])
    if kind == "numeric":
        cut = data.get("edges")
        if cut is not None:
            dom = Numeric(edges=cut)
            if data.get("chosen"):
                dom = Numeric.chosen_edges(cut, str(data.get("mode", "quantile")))
            return dom
        return Numeric(data["lower"], data["upper"], data["bins"], edges=data.get("mode"))
    if kind == "date":
        tk = data.get("time_kind")
        cut = data.get("edges")
        if cut is not None and tk in ("date", "local", "instant"):
            if data.get("chosen"):
                return Date.chosen_edges(cut, str(data.get("mode", "quantile")), tk)
            if data.get("points") is not None and data.get("unit") is None:
                return Date(edges=data["points"]).for_column(tk, "saved")
            return Date(
                data["lower"], data["upper"], data["bins"], unit=data.get("unit"),
                edges=None if data.get("unit") else data.get("mode"),
            ).for_column(tk, "saved")  # fmt: skip
        return Date(
            data.get("lower"), data.get("upper"), data.get("bins", 16), unit=data.get("unit"),
            edges=None if data.get("unit") else data.get("mode"),
        )  # fmt: skip
    raise PrivacyParameterError(f"unknown column domain {data!r}")


def check_domains(columns: Any) -> dict[str, ColumnDomain]:
    """``{column: domain}`` from a mapping; a column without a domain is refused, naming it."""
    if not isinstance(columns, Mapping) or not columns:
        raise PrivacyParameterError(
            "columns must be a non-empty mapping {column: Categorical([...]), "
            "Numeric(...) or Date(...)}"
        )
    out: dict[str, ColumnDomain] = {}
    missing = []
    for name, dom in columns.items():
        if not isinstance(name, str) or not name:
            raise PrivacyParameterError(f"column names must be non-empty strings, got {name!r}")
        if dom is None:
            missing.append(name)
        elif isinstance(dom, (Categorical, Numeric, Date)):
            out[name] = dom
        else:
            raise PrivacyParameterError(
                f"the domain of column {name!r} must be Categorical([...]), Numeric(...) or "
                f"Date(...), got {dom!r}"
            )
    if missing:
        raise PrivacyParameterError(
            f"{len(missing)} column(s) have no public domain ({', '.join(map(repr, missing))}): "
            "declare the values of a categorical column with Categorical([...]), a numeric one "
            "with Numeric(bins=...) (edges chosen privately inside the fit's budget) or "
            "Numeric(lower, upper, bins), a date with Date(...); a domain read from the data "
            "without noise would leak it"
        )
    return out
