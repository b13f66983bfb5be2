"""Derived columns: row-level expressions an analyst groups by or aggregates.

A derived column is one SQL expression over the columns of one row (``year(signup)``,
``price * quantity``, ``lower(trim(city))``, ``CASE WHEN diagnosis = 'flu' THEN 1 ELSE 0
END``), parsed with sqlglot and accepted only from a short allow-list, the same spirit as the
``where`` predicates (:mod:`dpkit.analytics._sql`): it never reads another row, never divides,
and never raises for any value (an overflowing operation is NULL, a cast that does not apply is
NULL). This module reads the expression and the column types only (public metadata):

* :func:`parse_derived` checks the allow-list;
* :func:`result_kind` infers the type of the result (``integer``, ``float``, ``string``,
  ``boolean`` or ``date``) from the column types, refusing mixtures no engine binds alike;
* :func:`value_interval` derives sound bounds of a numeric result from the declared bounds of
  its inputs (interval arithmetic, rounded outwards);
* :func:`public_values` lists every value the result can take when the definition alone says
  so (the literals of a ``CASE``, a month number, the years between a date column's bounds).

The engines compile the same tree (:mod:`dpkit.analytics.engines._compiler.derived`).
Supported forms (the allow-list):

* columns (unqualified), number, text, boolean and ``NULL`` literals, parentheses;
* ``+``, ``-``, ``*`` and unary minus on numbers (64-bit integers or doubles);
* ``abs``, ``coalesce``;
* ``lower``, ``upper``, ``trim``, ``ltrim``, ``rtrim``, ``length``,
  ``substring(s, start[, length])`` with integer literals ``start >= 1``, ``length >= 0``;
* ``year``, ``quarter``, ``month``, ``day``, ``hour``, ``minute`` and ``EXTRACT(part FROM x)``
  of a ``DATE`` or wall-clock ``TIMESTAMP`` column, ``date_trunc('year' | 'quarter' | 'month'
  | 'week' | 'day', x)`` (a ``DATE``);
* ``CASE [x] WHEN ... THEN ... [ELSE ...] END`` whose conditions are comparisons (``=``,
  ``<>``, ``<``, ``<=``, ``>``, ``>=``), ``AND``/``OR``/``NOT``, ``IN (literals)``,
  ``BETWEEN``, ``IS [NOT] NULL`` and ``LIKE 'pattern'`` over such expressions; a condition that
  is not true (NULL included) is false;
* ``CAST``/``TRY_CAST`` (both never raise) to ``BIGINT``, ``DOUBLE``, ``VARCHAR``, ``DATE``:
  integer to double or text, boolean to integer, decimal to double, a wall-clock timestamp to
  its date, text to a number or a date when it is written plainly (``' -12 '``, ``'1.5e3'``,
  ``'2024-03-01'``; anything else is NULL).
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import sqlglot
from sqlglot import exp

from dpkit.analytics._column_types import is_instant, type_family
from dpkit.errors import PredicateError

__all__ = [
    "DATE_PARTS",
    "DATE_UNITS",
    "DerivedExpr",
    "Kind",
    "Kinds",
    "column_kind",
    "parse_derived",
    "public_values",
    "result_kind",
    "sql_type_of",
    "value_interval",
]

Kind = Literal["integer", "float", "string", "boolean", "date", "timestamp"]

#: Date parts and the interval of values each takes (``year`` is bounded by the column).
DATE_PARTS: dict[str, tuple[int, int] | None] = {
    "year": None,
    "quarter": (1, 4),
    "month": (1, 12),
    "day": (1, 31),
    "hour": (0, 23),
    "minute": (0, 59),
}
#: Units of ``date_trunc``.
DATE_UNITS = ("year", "quarter", "month", "week", "day")

_CAST_TARGETS = {"BIGINT": "integer", "DOUBLE": "float", "VARCHAR": "string", "DATE": "date"}
_TYPE_ALIASES = {
    "INT": "BIGINT",
    "INTEGER": "BIGINT",
    "BIGINT": "BIGINT",
    "LONG": "BIGINT",
    "DOUBLE": "DOUBLE",
    "FLOAT": "DOUBLE",
    "REAL": "DOUBLE",
    "VARCHAR": "VARCHAR",
    "TEXT": "VARCHAR",
    "STRING": "VARCHAR",
    "DATE": "DATE",
}
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_PART_NODES: dict[type[exp.Expression], str] = {
    exp.Year: "year",
    exp.Quarter: "quarter",
    exp.Month: "month",
    exp.Day: "day",
    exp.Hour: "hour",
    exp.Minute: "minute",
}
#: Largest number of public values listed from a definition (beyond it: partition selection).
MAX_PUBLIC_VALUES = 10_000


@dataclass(frozen=True)
class DerivedExpr:
    """A validated derived expression: its text, its tree and the columns it reads."""

    text: str
    tree: exp.Expression
    columns: tuple[str, ...]


def _refuse(msg: str) -> PredicateError:
    return PredicateError(msg)


def parse_derived(text: str) -> DerivedExpr:
    """Parse ``text`` as one row-level expression and check its shape against the allow-list
    (types are checked later, by :func:`result_kind`)."""
    if not isinstance(text, str) or not text.strip():
        raise _refuse(f"a derived column needs an SQL expression, got {text!r}")
    if "\x00" in text:
        raise _refuse("an expression must not contain NUL characters")
    try:
        statements = sqlglot.parse(text, read="duckdb")
    except sqlglot.errors.SqlglotError as exc:
        raise _refuse(f"cannot parse the expression {text!r}: {exc}") from None
    if len(statements) != 1 or statements[0] is None:
        raise _refuse(f"a derived column must be exactly one expression, got {text!r}")
    tree: exp.Expression = statements[0]  # type: ignore[assignment]
    columns: list[str] = []
    for node in tree.walk():
        node.comments = None
        if isinstance(node, exp.Column):
            if node.table or node.args.get("db") or isinstance(node.this, exp.Star):
                raise _refuse(f"write plain column names in an expression, got {node.sql()!r}")
            if node.name not in columns:
                columns.append(node.name)
        elif isinstance(node, (exp.AggFunc, exp.Window)):
            raise _refuse(
                f"aggregates and window functions cannot define a column: {node.sql()!r} "
                "(a derived column reads one row)"
            )
        elif isinstance(node, (exp.Div, exp.IntDiv, exp.Mod)):
            raise _refuse(
                f"division is not supported in an expression ({node.sql()!r}): it can fail "
                "for some rows; multiply by a constant or use CASE bands instead"
            )
        elif isinstance(node, exp.Subquery | exp.Select):
            raise _refuse(f"subqueries cannot define a column: {node.sql()!r}")
    return DerivedExpr(text=text, tree=tree, columns=tuple(columns))


def column_kind(name: str, sql_type: str | None) -> Kind:
    """The kind of a column in an expression, from its engine type (DuckDB spelling)."""
    if sql_type is None:
        raise _refuse(f"the type of column {name!r} is unknown, so it cannot enter an expression")
    t = sql_type.upper().strip()
    fam = type_family(t)
    if fam == "integer":
        return "integer"
    if fam in ("float", "decimal"):
        return "float"
    if fam == "string":
        return "string"
    if fam == "boolean":
        return "boolean"
    if t == "DATE":
        return "date"
    if is_instant(t):
        raise _refuse(
            f"column {name!r} holds instants (TIMESTAMP WITH TIME ZONE): their date parts "
            "depend on a time zone; cast it to a wall-clock TIMESTAMP or a DATE first"
        )
    if t == "TIMESTAMP" or t.startswith(("TIMESTAMP_", "TIMESTAMP(")):
        return "timestamp"
    raise _refuse(f"column {name!r} has the type {sql_type}, which an expression cannot read")


def _unwrap(e: exp.Expression) -> exp.Expression:
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def date_part_of(node: exp.Expression) -> tuple[str, exp.Expression] | None:
    """``(part, argument)`` for ``year(x)``, ``EXTRACT(YEAR FROM x)``, ...; else None."""
    for cls, part in _PART_NODES.items():
        if type(node) is cls:
            return part, node.this
    if isinstance(node, exp.Extract):
        part = node.this.name.lower() if isinstance(node.this, exp.Var) else ""
        if part not in DATE_PARTS:
            raise _refuse(
                f"EXTRACT({part or node.this.sql()}) is not supported; use one of "
                f"{', '.join(DATE_PARTS)}"
            )
        return part, node.expression
    if isinstance(node, exp.Anonymous) and str(node.this).lower() in ("dayofmonth",):
        return "day", node.expressions[0]
    return None


def date_trunc_of(node: exp.Expression) -> tuple[str, exp.Expression] | None:
    """``(unit, argument)`` for ``date_trunc('unit', x)``; else None."""
    if isinstance(node, (exp.TimestampTrunc, exp.DateTrunc)):
        unit = node.args.get("unit")
        u = unit.name.lower() if unit is not None else ""
        if u not in DATE_UNITS:
            raise _refuse(f"date_trunc takes one of {', '.join(DATE_UNITS)}, got {u!r}")
        return u, node.this
    return None


def int_literal(e: exp.Expression) -> int | None:
    """The value of an integer literal (possibly negated), else None."""
    e = _unwrap(e)
    if isinstance(e, exp.Neg):
        v = int_literal(e.this)
        return None if v is None else -v
    if isinstance(e, exp.Literal) and not e.is_string:
        try:
            return int(e.this)
        except ValueError:
            return None
    return None


def number_literal(e: exp.Expression) -> float | int | None:
    """The value of a number literal (possibly negated), else None."""
    e = _unwrap(e)
    if isinstance(e, exp.Neg):
        v = number_literal(e.this)
        return None if v is None else -v
    if isinstance(e, exp.Literal) and not e.is_string:
        try:
            return int(e.this)
        except ValueError:
            f = float(e.this)
            return f if math.isfinite(f) else None
    return None


def cast_target(node: exp.Cast) -> str:
    """The allowed target of a cast (``BIGINT``, ``DOUBLE``, ``VARCHAR``, ``DATE``)."""
    to = node.args["to"]
    name = to.sql(dialect="duckdb").upper()
    base = name.split("(")[0].strip()
    if base not in _TYPE_ALIASES:
        raise _refuse(f"casts go to BIGINT, DOUBLE, VARCHAR or DATE, got {name}")
    return _TYPE_ALIASES[base]


def _numeric(k: Kind) -> bool:
    return k in ("integer", "float")


def _unify(kinds: list[Kind | None], what: str) -> Kind | None:
    """The common kind of several values (``None`` is a NULL literal)."""
    present = [k for k in kinds if k is not None]
    if not present:
        return None
    if all(_numeric(k) for k in present):
        return "float" if "float" in present else "integer"
    if len(set(present)) == 1:
        return present[0]
    raise _refuse(f"{what} mixes values of kinds {sorted(set(present))}: cast them to one type")


class Kinds:
    """The kind of every node of a tree, computed once (see :func:`result_kind`)."""

    def __init__(self, kinds: Mapping[str, Kind]) -> None:
        self.columns = kinds

    def of(self, node: exp.Expression) -> Kind | None:
        n = node
        if isinstance(n, exp.Paren):
            return self.of(n.this)
        if isinstance(n, exp.Column):
            return self.columns[n.name]
        if isinstance(n, exp.Null):
            return None
        if isinstance(n, exp.Boolean):
            return "boolean"
        if isinstance(n, exp.Literal):
            if n.is_string:
                return "string"
            return "integer" if int_literal(n) is not None else "float"
        if isinstance(n, (exp.Add, exp.Sub, exp.Mul)):
            a, b = self.of(n.this), self.of(n.expression)
            for k in (a, b):
                if k is not None and not _numeric(k):
                    raise _refuse(
                        f"arithmetic takes numbers, got a {k} in {n.sql()!r} (cast text with "
                        "TRY_CAST(x AS DOUBLE); dates have date parts and date_trunc)"
                    )
            return _unify([a, b], n.sql()) or "integer"
        if isinstance(n, exp.Neg):
            k = self.of(n.this)
            if k is not None and not _numeric(k):
                raise _refuse(f"unary minus takes a number, got a {k} in {n.sql()!r}")
            return k or "integer"
        if isinstance(n, exp.Abs):
            k = self.of(n.this)
            if k is not None and not _numeric(k):
                raise _refuse(f"abs takes a number, got a {k} in {n.sql()!r}")
            return k or "integer"
        if isinstance(n, exp.Coalesce):
            return _unify([self.of(e) for e in [n.this, *n.expressions]], n.sql())
        if isinstance(n, (exp.Lower, exp.Upper, exp.Length, exp.Trim, exp.Substring)):
            k = self.of(n.this)
            if k not in ("string", None):
                raise _refuse(f"{n.sql()!r} takes text, got a {k} (cast it to VARCHAR first)")
            if isinstance(n, exp.Trim) and (
                n.args.get("expression") is not None or n.args.get("collation") is not None
            ):
                raise _refuse(f"trim takes one argument (spaces are removed): {n.sql()!r}")
            if isinstance(n, exp.Substring):
                start = int_literal(n.args["start"]) if n.args.get("start") else None
                length = n.args.get("length")
                ln = int_literal(length) if length is not None else 0
                if start is None or start < 1 or ln is None or ln < 0:
                    raise _refuse(
                        f"substring takes integer literals start >= 1 and length >= 0: {n.sql()!r}"
                    )
            return "integer" if isinstance(n, exp.Length) else "string"
        part = date_part_of(n)
        if part is not None:
            k = self.of(part[1])
            if k not in ("date", "timestamp", None):
                raise _refuse(f"{part[0]} takes a date or a timestamp, got a {k}: {n.sql()!r}")
            if part[0] in ("hour", "minute") and k == "date":
                raise _refuse(f"{part[0]} takes a timestamp, got a date: {n.sql()!r}")
            return "integer"
        trunc = date_trunc_of(n)
        if trunc is not None:
            k = self.of(trunc[1])
            if k not in ("date", "timestamp", None):
                raise _refuse(f"date_trunc takes a date or a timestamp, got a {k}: {n.sql()!r}")
            return "date"
        if isinstance(n, exp.Cast):  # TryCast is a Cast
            return self._cast(n)
        if isinstance(n, exp.Case):
            return self._case(n)
        if self.condition(n):
            return "boolean"
        name = n.sql_name().lower() if isinstance(n, exp.Func) else type(n).__name__
        raise _refuse(
            f"{name} is not supported in a derived column ({n.sql()!r}); see the supported "
            "expressions in the documentation (arithmetic, date parts, date_trunc, lower, "
            "upper, trim, substring, length, abs, coalesce, CASE, CAST)"
        )

    def _cast(self, n: exp.Cast) -> Kind:
        to = cast_target(n)
        k = self.of(n.this)
        target: Kind = _CAST_TARGETS[to]  # type: ignore[assignment]
        allowed: dict[str, tuple[Kind | None, ...]] = {
            "BIGINT": ("integer", "boolean", "string", None),
            "DOUBLE": ("integer", "float", "string", None),
            "VARCHAR": ("integer", "string", None),
            "DATE": ("date", "timestamp", "string", None),
        }
        if k not in allowed[to]:
            hint = {
                "BIGINT": " (a double has no one rounding all engines share: bucket it with CASE)",
                "VARCHAR": " (engines write doubles and dates differently)",
            }.get(to, "")
            raise _refuse(f"a {k} cannot be cast to {to}{hint}: {n.sql()!r}")
        return target

    def _case(self, n: exp.Case) -> Kind | None:
        subject = n.this
        if subject is not None:
            sk = self.of(subject)
            for i in n.args.get("ifs") or []:
                _comparable(sk, self.of(i.this), n.sql())
        else:
            for i in n.args.get("ifs") or []:
                if not self.condition(i.this):
                    raise _refuse(f"CASE WHEN takes conditions, got {i.this.sql()!r}")
        values = [self.of(i.args["true"]) for i in n.args.get("ifs") or []]
        default = n.args.get("default")
        values.append(self.of(default) if default is not None else None)
        return _unify(values, "CASE")

    def condition(self, n: exp.Expression) -> bool:
        """Whether ``n`` is an allowed condition (checking its operands); False if it is no
        condition at all."""
        n = _unwrap(n)
        if isinstance(n, (exp.And, exp.Or)):
            for side in (n.this, n.expression):
                if not self.condition(side):
                    raise _refuse(f"AND/OR take conditions, got {side.sql()!r}")
            return True
        if isinstance(n, exp.Not):
            if not self.condition(n.this):
                raise _refuse(f"NOT takes a condition, got {n.this.sql()!r}")
            return True
        if isinstance(n, exp.Boolean):
            return True
        if isinstance(n, _COMPARISONS):
            _comparable(self.of(n.this), self.of(n.expression), n.sql())
            return True
        if isinstance(n, exp.Between):
            k = self.of(n.this)
            _comparable(k, self.of(n.args["low"]), n.sql())
            _comparable(k, self.of(n.args["high"]), n.sql())
            return True
        if isinstance(n, exp.In):
            if n.args.get("query") is not None or n.args.get("unnest") is not None:
                raise _refuse("IN takes a list of literals, not a subquery")
            k = self.of(n.this)
            for e in n.expressions:
                if not isinstance(_unwrap(e), (exp.Literal, exp.Null, exp.Boolean, exp.Neg)):
                    raise _refuse(f"IN takes a list of literals: {n.sql()!r}")
                _comparable(k, self.of(e), n.sql())
            return True
        if isinstance(n, exp.Is):
            if not isinstance(n.expression, exp.Null):
                raise _refuse(f"IS takes NULL: {n.sql()!r}")
            self.of(n.this)
            return True
        if isinstance(n, exp.Like):
            if not (isinstance(n.expression, exp.Literal) and n.expression.is_string):
                raise _refuse(f"LIKE takes a text literal as its pattern: {n.sql()!r}")
            if self.of(n.this) not in ("string", None):
                raise _refuse(f"LIKE takes text: {n.sql()!r}")
            return True
        return False


def _comparable(a: Kind | None, b: Kind | None, text: str) -> None:
    if a is None or b is None or a == b or (_numeric(a) and _numeric(b)):
        return
    if {a, b} <= {"date", "timestamp"}:
        raise _refuse(f"compare a date with a date: cast the timestamp to DATE in {text!r}")
    raise _refuse(
        f"{text!r} compares a {a} with a {b}; cast one side (TRY_CAST(x AS DOUBLE), "
        "CAST(x AS DATE)) so both have one type"
    )


def _date_literals(tree: exp.Expression, kinds: Mapping[str, Kind]) -> exp.Expression:
    """The tree with text literals compared with a date read as DATE literals (ISO dates,
    checked here): ``signup >= '2024-01-01'``."""
    k = Kinds(kinds)

    def fix(node: exp.Expression) -> exp.Expression:
        pairs: list[tuple[exp.Expression, list[str]]] = []
        if isinstance(node, _COMPARISONS):
            pairs = [(node.this, ["expression"]), (node.expression, ["this"])]
        elif isinstance(node, exp.Between):
            pairs = [(node.this, ["low", "high"])]
        for other, keys in pairs:
            try:
                ok = other is not None and k.of(other) == "date"
            except PredicateError:
                ok = False
            if not ok:
                continue
            for key in keys:
                lit = node.args.get(key)
                if isinstance(lit, exp.Literal) and lit.is_string:
                    try:
                        d = datetime.date.fromisoformat(lit.this)
                    except ValueError:
                        raise _refuse(f"{lit.this!r} is not an ISO date (YYYY-MM-DD)") from None
                    node.set(
                        key,
                        exp.Cast(
                            this=exp.Literal.string(d.isoformat()), to=exp.DataType.build("DATE")
                        ),
                    )
        return node

    return tree.copy().transform(fix)


def prepared_tree(expr: DerivedExpr, kinds: Mapping[str, Kind]) -> exp.Expression:
    """The tree with date literals typed (see :func:`_date_literals`), simple ``CASE x WHEN``
    rewritten as searched ``CASE WHEN x = ...``."""
    tree = _date_literals(expr.tree, kinds)

    def searched(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Case) and node.this is not None:
            subject = node.this
            ifs = [
                exp.If(this=exp.EQ(this=subject.copy(), expression=i.this), true=i.args["true"])
                for i in node.args.get("ifs") or []
            ]
            return exp.Case(ifs=ifs, default=node.args.get("default"))
        return node

    return tree.transform(searched)


def result_kind(expr: DerivedExpr, types: Callable[[str], str | None]) -> Kind:
    """The kind of the expression's result, from the types of its columns (``types(name)``:
    the engine type in DuckDB spelling); refuses any form outside the allow-list."""
    kinds = {c: column_kind(c, types(c)) for c in expr.columns}
    tree = prepared_tree(expr, kinds)
    k = Kinds(kinds).of(tree)
    if k is None:
        raise _refuse(f"the expression {expr.text!r} is always NULL")
    if k == "timestamp":
        raise _refuse(
            f"{expr.text!r} is a timestamp: group by a date part or date_trunc of it instead"
        )
    return k


def sql_type_of(kind: Kind) -> str:
    """The engine type (DuckDB spelling) a derived column of ``kind`` has."""
    return {
        "integer": "BIGINT",
        "float": "DOUBLE",
        "string": "VARCHAR",
        "boolean": "BOOLEAN",
        "date": "DATE",
    }[kind]


# ------------------------------------------------------------------ bounds of a result

Interval = tuple[float, float]


def _down(x: Fraction) -> float:
    """The largest double not above the exact ``x``."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def _up(x: Fraction) -> float:
    """The smallest double not below the exact ``x``."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def value_interval(
    expr: DerivedExpr,
    types: Callable[[str], str | None],
    bounds: Mapping[str, tuple[object, object]],
) -> Interval | None:
    """An interval holding every non-NULL value of a numeric expression, or None when the
    definition and the declared ``bounds`` of its inputs do not bound it.

    Interval arithmetic (Moore 1966, ch. 2): ``[a, b] + [c, d] = [a + c, b + d]``,
    ``[a, b] - [c, d] = [a - d, b - c]``, ``[a, b] * [c, d] = [min, max]`` of the four
    products, ``abs``, ``coalesce`` and ``CASE`` the hull of their branches, a date part its
    range; each end computed exactly (fractions) and rounded outwards to a double, so the
    interval is never narrower than the exact one. An input column is read clamped to its
    declared bounds (the compiler reads :func:`clamped_text`), so the interval holds for every
    row.
    """
    kinds = {c: column_kind(c, types(c)) for c in expr.columns}
    tree = prepared_tree(expr, kinds)
    k = Kinds(kinds).of(tree)
    if k not in ("integer", "float", "boolean"):
        return None
    dates = {c: _date_bounds(b) for c, b in bounds.items() if kinds.get(c) in ("date", "timestamp")}

    def go(n: exp.Expression) -> Interval | None:
        n = _unwrap(n)
        if isinstance(n, exp.Column):
            b = bounds.get(n.name)
            if b is None or kinds[n.name] not in ("integer", "float"):
                return None
            return float(b[0]), float(b[1])  # type: ignore[arg-type]
        v = number_literal(n)
        if v is not None:
            return float(v), float(v)
        if isinstance(n, exp.Boolean):
            return (1.0, 1.0) if n.this else (0.0, 0.0)
        if isinstance(n, exp.Add | exp.Sub | exp.Mul):
            a, b = go(n.this), go(n.expression)
            if a is None or b is None:
                return None
            if not all(math.isfinite(x) for x in (*a, *b)):
                return None
            fa, fb = [Fraction(x) for x in a], [Fraction(x) for x in b]
            if isinstance(n, exp.Add):
                return _down(fa[0] + fb[0]), _up(fa[1] + fb[1])
            if isinstance(n, exp.Sub):
                return _down(fa[0] - fb[1]), _up(fa[1] - fb[0])
            ps = [x * y for x in fa for y in fb]
            return _down(min(ps)), _up(max(ps))
        if isinstance(n, exp.Neg):
            a = go(n.this)
            return None if a is None else (-a[1], -a[0])
        if isinstance(n, exp.Abs):
            a = go(n.this)
            if a is None:
                return None
            lo = 0.0 if a[0] <= 0 <= a[1] else min(abs(a[0]), abs(a[1]))
            return lo, max(abs(a[0]), abs(a[1]))
        if isinstance(n, exp.Coalesce):
            args = [n.this, *n.expressions]
            return _hull([go(e) for e in args if not isinstance(_unwrap(e), exp.Null)])
        if isinstance(n, exp.Case):
            branches = [i.args["true"] for i in n.args.get("ifs") or []]
            default = n.args.get("default")
            if default is not None:
                branches.append(default)
            return _hull([go(b) for b in branches if not isinstance(_unwrap(b), exp.Null)])
        if isinstance(n, exp.Cast):
            inner = Kinds(kinds).of(n.this)
            if inner == "boolean":
                return 0.0, 1.0
            return go(n.this) if inner in ("integer", "float") else None
        part = date_part_of(n)
        if part is not None:
            fixed = DATE_PARTS[part[0]]
            if fixed is not None:
                return float(fixed[0]), float(fixed[1])
            arg = _unwrap(part[1])
            if isinstance(arg, exp.Column) and arg.name in dates:
                first, last = dates[arg.name]
                return float(first.year), float(last.year)
            return None
        if isinstance(n, exp.Length):
            return None
        if Kinds(kinds).condition(n):
            return 0.0, 1.0
        return None

    out = go(tree)
    if out is None or not (math.isfinite(out[0]) and math.isfinite(out[1])):
        return None
    return out


def _hull(parts: list[Interval | None]) -> Interval | None:
    if not parts or any(p is None for p in parts):
        return None
    return min(p[0] for p in parts if p), max(p[1] for p in parts if p)


def _date_bounds(b: tuple[object, object]) -> tuple[datetime.date, datetime.date]:
    from dpkit.analytics._aggregates import parse_date_bound

    lo = parse_date_bound(b[0], "lower date bound")
    hi = parse_date_bound(b[1], "upper date bound")
    as_date = [d.date() if isinstance(d, datetime.datetime) else d for d in (lo, hi)]
    return as_date[0], as_date[1]


# ------------------------------------------------------------------ public values of a key


def public_values(
    expr: DerivedExpr,
    types: Callable[[str], str | None],
    bounds: Mapping[str, tuple[object, object]],
) -> tuple[object, ...] | None:
    """Every value the expression can take, when its definition says so, else None.

    A ``CASE`` whose results are all literals takes those (and NULL when a row can match no
    case and there is no ``ELSE``); a condition is ``False`` or ``True``; ``quarter``,
    ``month``, ``day``, ``hour`` and ``minute`` take their fixed ranges; ``year(d)`` the
    years between the declared bounds of ``d``, ``date_trunc(unit, d)`` every start of a
    unit between them (at most :data:`MAX_PUBLIC_VALUES` values). Rows whose value is not
    listed (a date outside its declared bounds) are dropped by the key filter, as for a
    column with public keys.
    """
    kinds = {c: column_kind(c, types(c)) for c in expr.columns}
    tree = _unwrap(prepared_tree(expr, kinds))
    kind = Kinds(kinds).of(tree)
    dates = {c: _date_bounds(b) for c, b in bounds.items() if kinds.get(c) in ("date", "timestamp")}
    out: list[object] | None = None
    if isinstance(tree, exp.Case):
        out = []
        for i in tree.args.get("ifs") or []:
            v = _literal_value(i.args["true"], kind)
            if v is _NOT_LITERAL:
                return None
            out.append(v)
        default = tree.args.get("default")
        v = None if default is None else _literal_value(default, kind)
        if v is _NOT_LITERAL:
            return None
        out.append(v)
    elif kind == "boolean":
        out = [False, True]
    elif (part := date_part_of(tree)) is not None:
        fixed = DATE_PARTS[part[0]]
        arg = _unwrap(part[1])
        if fixed is not None:
            out = list(range(fixed[0], fixed[1] + 1))
        elif isinstance(arg, exp.Column) and arg.name in dates:
            lo, hi = dates[arg.name]
            out = list(range(lo.year, hi.year + 1))
    elif (trunc := date_trunc_of(tree)) is not None:
        arg = _unwrap(trunc[1])
        if isinstance(arg, exp.Column) and arg.name in dates:
            out = _unit_starts(trunc[0], *dates[arg.name])
    if out is None or len(out) > MAX_PUBLIC_VALUES:
        return None
    return tuple(dict.fromkeys(out))


_NOT_LITERAL = object()


def _literal_value(e: exp.Expression, kind: Kind | None) -> object:
    e = _unwrap(e)
    if isinstance(e, exp.Null):
        return None
    if isinstance(e, exp.Boolean):
        return bool(e.this)
    if isinstance(e, exp.Literal) and e.is_string and kind == "string":
        return str(e.this)
    v = number_literal(e)
    if v is not None and kind in ("integer", "float"):
        return float(v) + 0.0 if kind == "float" else v  # -0.0 is 0.0, as the engine reads it
    return _NOT_LITERAL


def truncate(unit: str, d: datetime.date) -> datetime.date:
    """The start of the ``unit`` holding ``d`` (weeks start on Monday)."""
    if unit == "year":
        return datetime.date(d.year, 1, 1)
    if unit == "quarter":
        return datetime.date(d.year, 3 * ((d.month - 1) // 3) + 1, 1)
    if unit == "month":
        return datetime.date(d.year, d.month, 1)
    if unit == "week":
        return d - datetime.timedelta(days=d.weekday())
    return d


def _unit_starts(unit: str, lo: datetime.date, hi: datetime.date) -> list[object] | None:
    out: list[object] = []
    d = truncate(unit, lo)
    while d <= hi:
        out.append(d)
        if len(out) > MAX_PUBLIC_VALUES:
            return None
        if unit == "day":
            d = d + datetime.timedelta(days=1)
        elif unit == "week":
            d = d + datetime.timedelta(days=7)
        else:
            step = {"year": 12, "quarter": 3, "month": 1}[unit]
            m = d.month - 1 + step
            d = datetime.date(d.year + m // 12, m % 12 + 1, 1)
    return out


def clamped_text(
    expr: DerivedExpr,
    types: Callable[[str], str | None],
    bounds: Mapping[str, tuple[object, object]],
) -> str:
    """The expression with each numeric input that has declared bounds read clamped to them
    (``CASE WHEN x < lo THEN lo WHEN x > hi THEN hi ELSE x END``: NULL stays NULL), so the
    result lies in :func:`value_interval` for every row. Other inputs are read as they are."""
    kinds = {c: column_kind(c, types(c)) for c in expr.columns}

    def clamp(node: exp.Expression) -> exp.Expression:
        if not isinstance(node, exp.Column) or node.name not in bounds:
            return node
        if kinds.get(node.name) not in ("integer", "float"):
            return node
        lo, hi = (float(v) for v in bounds[node.name])  # type: ignore[arg-type]
        if kinds[node.name] == "integer" and lo == int(lo) and hi == int(hi):
            lits = [exp.Literal.number(int(lo)), exp.Literal.number(int(hi))]
        else:
            lits = [exp.Literal.number(repr(lo)), exp.Literal.number(repr(hi))]
        lo_e, hi_e = (exp.Paren(this=x) for x in lits)
        col = exp.Column(this=exp.to_identifier(node.name, quoted=True))
        return exp.Paren(
            this=exp.Case(
                ifs=[
                    exp.If(this=exp.LT(this=col.copy(), expression=lo_e.copy()), true=lo_e.copy()),
                    exp.If(this=exp.GT(this=col.copy(), expression=hi_e.copy()), true=hi_e.copy()),
                ],
                default=col.copy(),
            )
        )

    return str(expr.tree.copy().transform(clamp).sql(dialect="duckdb"))
