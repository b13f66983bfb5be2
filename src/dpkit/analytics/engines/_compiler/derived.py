"""Derived columns in a statement: one allow-listed row expression, made total, per dialect.

The expression enters as the tree :mod:`dpkit.analytics._derive` validated and typed, and
leaves as an expression of the engine that never raises and gives the same value on DuckDB and
Spark for every row:

* integers are 64-bit (every integer column is read as ``BIGINT``) and each ``+``, ``-``,
  ``*``, unary minus and ``abs`` that overflows is NULL (DuckDB ``TRY(a + b)``, Spark
  ``try_add(a, b)``): NULL for that operation, which then propagates as NULL does;
* doubles follow IEEE arithmetic (an overflow is an infinity, clamped later by the aggregate's
  bounds), and a NaN result of any operation or cast is NULL (the table's special-value rule);
  a ``-0.0`` result is ``0.0``;
* casts are total: text becomes a number or a date only when it is written plainly (an anchored
  regular expression both engines read alike), and is NULL otherwise;
* a condition that is not true (NULL included) is false.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from sqlglot import exp

from dpkit.analytics._derive import (
    Kind,
    Kinds,
    cast_target,
    column_kind,
    date_part_of,
    date_trunc_of,
    int_literal,
    number_literal,
    parse_derived,
    prepared_tree,
    result_kind,
    sql_type_of,
)
from dpkit.analytics.engines._compiler.nodes import case_when, cast_to, colref, double, func
from dpkit.analytics.engines._compiler.profiles import DialectProfile
from dpkit.errors import PlanError

__all__ = ["derived_sql"]

# Text read as a number or a date only when written plainly; ``\z`` is the very end of the
# text in both RE2 (DuckDB) and Java (Spark) regular expressions (``$`` would also match
# before a final newline in Java).
_INT_TEXT = r"^ *[+-]?[0-9]+ *\z"
_FLOAT_TEXT = r"^ *[+-]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][+-]?[0-9]+)? *\z"
_DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}\z"
_SPARK_PARTS = {"day": "dayofmonth"}
_CHECKED = {exp.Add: "try_add", exp.Sub: "try_subtract", exp.Mul: "try_multiply"}


def derived_sql(
    text: str,
    use: Callable[[str], str],
    types: Mapping[str, str],
    profile: DialectProfile,
) -> tuple[exp.Expression, str]:
    """The engine expression of the derived column ``text`` and its type (DuckDB spelling).

    ``use`` maps each column the expression reads to the statement's normalized column;
    ``types`` gives the engine type of each (public schema)."""
    expr = parse_derived(text)
    kind = result_kind(expr, types.get)
    kinds = {c: column_kind(c, types.get(c)) for c in expr.columns}
    tree = prepared_tree(expr, kinds)
    out = _Translate(kinds, use, profile).value(tree, kind)
    if kind == "boolean":
        out = exp.Coalesce(this=out, expressions=[exp.Boolean(this=False)])
    if kind == "float":
        out = exp.Add(this=_not_nan(out), expression=cast_to(exp.Literal.number(0), "DOUBLE"))
    if profile.try_wrapper is not None:
        out = func(profile.try_wrapper, out)
    sql_type = sql_type_of(kind)
    typed: exp.Expression = cast_to(out, profile.text_type if kind == "string" else sql_type)
    if kind == "string" and profile.dialect == "duckdb":
        typed = exp.Collate(this=typed, expression=exp.Var(this="C"))
    return typed, sql_type


def _not_nan(e: exp.Expression) -> exp.Expression:
    """``NULLIF(e, NaN)``: NaN equals NaN in both engines' comparisons, so NaN becomes NULL."""
    return exp.Nullif(this=e, expression=cast_to(exp.Literal.string("NaN"), "DOUBLE"))


def _sql_type(kind: Kind, profile: DialectProfile) -> str:
    return profile.text_type if kind == "string" else sql_type_of(kind)


class _Translate:
    """The translation of one validated, typed tree (see the module doc)."""

    def __init__(
        self, kinds: Mapping[str, Kind], use: Callable[[str], str], profile: DialectProfile
    ) -> None:
        self.kinds = Kinds(kinds)
        self.use = use
        self.profile = profile
        self.spark = profile.dialect != "duckdb"

    def kind(self, n: exp.Expression) -> Kind | None:
        return self.kinds.of(n)

    def typed(self, n: exp.Expression, kind: Kind | None) -> exp.Expression:
        """``n`` translated and read as ``kind`` (integers widen to doubles)."""
        own = self.kind(n)
        e = self.value(n, own)
        if kind is None or own == kind:
            return e
        if own is None:
            return cast_to(exp.Null(), _sql_type(kind, self.profile))
        if own == "integer" and kind == "float":
            return cast_to(e, "DOUBLE")
        raise PlanError(f"cannot read a {own} as a {kind} in {n.sql()!r}")

    def _try(self, op: exp.Expression) -> exp.Expression:
        if self.profile.try_wrapper is not None:
            return func(self.profile.try_wrapper, op)
        return op

    def value(self, n: exp.Expression, kind: Kind | None) -> exp.Expression:
        if isinstance(n, exp.Paren):
            return exp.Paren(this=self.value(n.this, kind))
        if isinstance(n, exp.Column):
            c: exp.Expression = colref(self.use(n.name))
            k = self.kind(n)
            if k == "integer":
                return (
                    exp.TryCast(this=c, to=exp.DataType.build("BIGINT"))
                    if not self.spark
                    else (cast_to(c, "BIGINT"))
                )
            if k == "float":
                return cast_to(c, "DOUBLE")
            return c
        if isinstance(n, exp.Null):
            return exp.Null()
        if isinstance(n, exp.Boolean):
            return exp.Boolean(this=bool(n.this))
        if isinstance(n, exp.Literal) or (isinstance(n, exp.Neg) and number_literal(n) is not None):
            return self._literal(n)
        if isinstance(n, (exp.Add, exp.Sub, exp.Mul)):
            k = self.kind(n)
            a, b = self.typed(n.this, k), self.typed(n.expression, k)
            if k == "float":
                return _not_nan(type(n)(this=a, expression=b))
            if self.spark:
                return func(_CHECKED[type(n)], a, b)
            return self._try(type(n)(this=a, expression=b))
        if isinstance(n, exp.Neg):
            k = self.kind(n)
            a = self.typed(n.this, k)
            if k == "float":
                return exp.Neg(this=a)
            if self.spark:
                return func("try_subtract", cast_to(exp.Literal.number(0), "BIGINT"), a)
            return self._try(exp.Neg(this=a))
        if isinstance(n, exp.Abs):
            k = self.kind(n)
            a = self.typed(n.this, k)
            if k == "float" or not self.spark:
                return self._try(exp.Abs(this=a)) if k != "float" else exp.Abs(this=a)
            neg = func("try_subtract", cast_to(exp.Literal.number(0), "BIGINT"), a.copy())
            return case_when(exp.LT(this=a.copy(), expression=exp.Literal.number(0)), neg, a)
        if isinstance(n, exp.Coalesce):
            k = self.kind(n)
            args = [self.typed(e, k) for e in [n.this, *n.expressions]]
            return exp.Coalesce(this=args[0], expressions=args[1:])
        if isinstance(n, (exp.Lower, exp.Upper)):
            return func("lower" if isinstance(n, exp.Lower) else "upper", self.value(n.this, None))
        if isinstance(n, exp.Length):
            return cast_to(func("length", self.value(n.this, None)), "BIGINT")
        if isinstance(n, exp.Trim):
            pos = str(n.args.get("position") or "").upper()
            name = {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(pos, "trim")
            return func(name, self.value(n.this, None))
        if isinstance(n, exp.Substring):
            args = [self.value(n.this, None), exp.Literal.number(int_literal(n.args["start"]))]
            if n.args.get("length") is not None:
                args.append(exp.Literal.number(int_literal(n.args["length"])))
            return func("substring", *args)
        part = date_part_of(n)
        if part is not None:
            name = _SPARK_PARTS.get(part[0], part[0]) if self.spark else part[0]
            return cast_to(func(name, self.value(part[1], None)), "BIGINT")
        trunc = date_trunc_of(n)
        if trunc is not None:
            unit, arg = trunc
            x = self.value(arg, None)
            if self.kind(arg) == "timestamp":
                x = cast_to(x, "DATE")
            if unit == "day":
                return x
            if self.spark:
                return func("trunc", x, exp.Literal.string(unit.upper()))
            return cast_to(func("date_trunc", exp.Literal.string(unit), x), "DATE")
        if isinstance(n, exp.Cast):
            return self._cast(n)
        if isinstance(n, exp.Case):
            return self._case(n)
        return self.condition(n)

    def _literal(self, n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Literal) and n.is_string:
            return exp.Literal.string(str(n.this))
        v = number_literal(n)
        if v is None:
            raise PlanError(f"a number literal must be finite: {n.sql()!r}")
        if isinstance(v, int):
            if not -(2**63) <= v < 2**63:
                raise PlanError(f"integer literals must fit 64 bits, got {v}")
            return cast_to(exp.Literal.string(str(v)), "BIGINT")
        return double(float(v), self.profile)

    def _cast(self, n: exp.Cast) -> exp.Expression:
        to = cast_target(n)
        own = self.kind(n.this)
        x = self.value(n.this, own)
        if own is None:
            return cast_to(exp.Null(), to if to != "VARCHAR" else self.profile.text_type)
        if to == "VARCHAR":
            return x if own == "string" else cast_to(x, self.profile.text_type)
        if to == "BIGINT":
            if own == "string":
                return self._from_text(x, _INT_TEXT, "BIGINT")
            return x if own == "integer" else cast_to(x, "BIGINT")
        if to == "DOUBLE":
            if own == "string":
                return _not_nan(self._from_text(x, _FLOAT_TEXT, "DOUBLE"))
            return x if own == "float" else cast_to(x, "DOUBLE")
        if own == "string":
            return self._from_text(x, _DATE_TEXT, "DATE")
        return x if own == "date" else cast_to(x, "DATE")

    def _from_text(self, x: exp.Expression, pattern: str, to: str) -> exp.Expression:
        plain = exp.RegexpLike(this=x.copy(), expression=exp.Literal.string(pattern))
        conv: exp.Expression
        if self.spark:  # ANSI mode is off for statements with row expressions: NULL, no error
            conv = cast_to(func("trim", x), to)
        else:
            conv = exp.TryCast(this=func("trim", x), to=exp.DataType.build(to))
        return case_when(plain, conv, cast_to(exp.Null(), to))

    def _case(self, n: exp.Case) -> exp.Expression:
        k = self.kind(n)
        ifs = [
            exp.If(
                this=exp.Coalesce(
                    this=self.condition(i.this), expressions=[exp.Boolean(this=False)]
                ),
                true=self.typed(i.args["true"], k),
            )
            for i in n.args.get("ifs") or []
        ]
        default = n.args.get("default")
        d = self.typed(default, k) if default is not None else exp.Null()
        return exp.Case(ifs=ifs, default=d)

    def _pair(self, a: exp.Expression, b: exp.Expression) -> tuple[exp.Expression, exp.Expression]:
        ka, kb = self.kind(a), self.kind(b)
        k = "float" if "float" in (ka, kb) else (ka or kb)
        return self.typed(a, k), self.typed(b, k)

    def condition(self, n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.Paren):
            return exp.Paren(this=self.condition(n.this))
        if isinstance(n, (exp.And, exp.Or)):
            return type(n)(this=self.condition(n.this), expression=self.condition(n.expression))
        if isinstance(n, exp.Not):
            return exp.Not(this=self.condition(n.this))
        if isinstance(n, exp.Boolean):
            return exp.Boolean(this=bool(n.this))
        if isinstance(n, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
            a, b = self._pair(n.this, n.expression)
            return type(n)(this=a, expression=b)
        if isinstance(n, exp.Between):
            k0 = [self.kind(e) for e in (n.this, n.args["low"], n.args["high"])]
            k = "float" if "float" in k0 else next((x for x in k0 if x), None)
            return exp.Between(
                this=self.typed(n.this, k),
                low=self.typed(n.args["low"], k),
                high=self.typed(n.args["high"], k),
            )
        if isinstance(n, exp.In):
            k0 = [self.kind(e) for e in (n.this, *n.expressions)]
            k = "float" if "float" in k0 else next((x for x in k0 if x), None)
            return exp.In(
                this=self.typed(n.this, k), expressions=[self.typed(e, k) for e in n.expressions]
            )
        if isinstance(n, exp.Is):
            return exp.Is(this=self.value(n.this, self.kind(n.this)), expression=exp.Null())
        if isinstance(n, exp.Like):
            pattern = str(n.expression.this)
            if "\\" in pattern:
                raise PlanError(
                    f"LIKE patterns in an expression cannot hold a backslash (engines escape "
                    f"differently): {pattern!r}"
                )
            return exp.Like(this=self.value(n.this, None), expression=exp.Literal.string(pattern))
        raise PlanError(f"not a supported condition: {n.sql()!r}")
