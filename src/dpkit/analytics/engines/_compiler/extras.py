"""Public joins and buckets: the columns they add to the source's schema, and their SQL.

A public table is joined on keys that occur once in it, so no source row can match two public
rows; a bucket is a ``CASE`` over conditions evaluated exactly like filters. Both are checked
against the schemas alone, before anything runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from dpkit.analytics._column_types import is_nested, type_family
from dpkit.analytics._derive import parse_derived, result_kind, sql_type_of
from dpkit.analytics._plan import Plan
from dpkit.analytics.engines._compiler.columns import resolve
from dpkit.analytics.engines._compiler.derived import derived_sql
from dpkit.analytics.engines._compiler.nodes import (
    P,
    aliased,
    cast_to,
    colref,
    double,
    func,
    ident,
)
from dpkit.analytics.engines._compiler.predicates import safe_predicate
from dpkit.analytics.engines._compiler.profiles import DialectProfile
from dpkit.analytics.engines._compiler.source import source_sql
from dpkit.errors import PlanError

__all__ = ["Extras"]

# Join keys: equality on these families never needs an implicit cast (both sides have the
# same family) and never compares NaN (float keys are refused: DuckDB has NaN = NaN).
_JOIN_KEY_FAMILIES = ("integer", "decimal", "string", "boolean", "other")


def _utf8(e: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """``e``'s UTF-8 bytes (binary, so compared byte by byte whatever the collation)."""
    if profile.dialect == "spark":
        return func("encode", e, exp.Literal.string("UTF-8"))
    return func("encode", e)


def _same_key_type(left: str, right: str) -> bool:
    """Whether an equality of two numeric join keys needs no cast that could fail on a value.

    DECIMALs must match exactly (``DECIMAL(38,0) = DECIMAL(38,10)`` casts the left side to
    ``DECIMAL(38,10)``, which overflows for keys of ``10**28`` and more: an error raised by one
    private value). Signed integers widen without loss; an unsigned or 128-bit integer must
    match exactly (their common type may not hold both ranges).
    """
    a, b = ("".join(t.split()).upper() for t in (left, right))
    if a == b:
        return True
    if type_family(left) == "decimal":
        return False
    signed = {
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "INT",
        "BIGINT",
        "BYTE",
        "SHORT",
        "LONG",
        "INT1",
        "INT2",
        "INT4",
        "INT8",
    }
    return a in signed and b in signed


def _bucket_type(name: str, values: Sequence[object]) -> str:
    """The engine type of a bucket's values (all literals): text, integer, double or boolean."""
    present = [v for v in values if v is not None]
    if not present:
        return "VARCHAR"
    if all(isinstance(v, str) for v in present):
        return "VARCHAR"
    if all(isinstance(v, bool) for v in present):
        return "BOOLEAN"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        if not all(-(2**63) <= v <= 2**63 - 1 for v in present):  # type: ignore[operator]
            raise PlanError(f"bucket {name!r}: integer values must fit 64 bits")
        return "BIGINT"
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in present):
        for v in present:
            if not math.isfinite(float(v)):  # type: ignore[arg-type]
                raise PlanError(f"bucket {name!r}: values must be finite, got {v!r}")
        return "DOUBLE"
    raise PlanError(
        f"bucket {name!r}: values must all be text, all numbers or all booleans, "
        f"got {list(values)!r}"
    )


def _bucket_literal(value: object, sql_type: str, profile: DialectProfile) -> exp.Expression:
    if value is None:
        return exp.Null()
    if sql_type == "VARCHAR":
        return exp.Literal.string(str(value))
    if sql_type == "BOOLEAN":
        return exp.Boolean(this=bool(value))
    if sql_type == "BIGINT":
        return cast_to(exp.Literal.string(str(value)), "BIGINT")
    return double(float(value), profile)  # type: ignore[arg-type]


def _check_join_keys(
    left_on: Sequence[str],
    right_on: Sequence[str],
    schema: Mapping[str, str],
    js: Mapping[str, str],
) -> None:
    """Refuse join keys whose equality could need a cast that fails on some values, or could
    match NaN with NaN: both sides of the same scalar, non-float family (and, for numbers,
    see :func:`_same_key_type`); ``js`` is the public table's schema."""
    for lk, rk in zip(left_on, right_on, strict=True):
        lc = resolve(lk, schema, "join key")
        rc = resolve(rk, js, "public join key")
        lf, rf = type_family(schema[lc]), type_family(js[rc])
        if (
            lf != rf
            or lf not in _JOIN_KEY_FAMILIES
            or is_nested(schema[lc])
            or is_nested(js[rc])
            or (lf == "other" and schema[lc] != js[rc])
            or (lf in ("decimal", "integer") and not _same_key_type(schema[lc], js[rc]))
        ):
            raise PlanError(
                f"join keys {lc!r} ({schema[lc]}) and {rc!r} ({js[rc]}) must have the "
                "same scalar, non-float type (an implicit cast could fail on some "
                "values, and NaN would match NaN)"
            )


@dataclass
class Extras:
    """The columns public joins and buckets add to the source's schema, and their SQL."""

    plan: Plan
    schema: dict[str, str]  # exposed / bucket name -> type
    origin: dict[str, str]  # exposed name -> internal column of the join subquery
    join_schemas: tuple[Mapping[str, str], ...]
    bucket_types: dict[str, str]
    base_schema: Mapping[str, str]
    derived_types: dict[str, str] = field(default_factory=dict)

    @property
    def buckets(self) -> tuple[object, ...]:
        return tuple(self.plan.buckets)

    @property
    def computed(self) -> frozenset[str]:
        """The names of the columns computed per row (buckets and derived columns)."""
        return frozenset(self.bucket_types) | frozenset(self.derived_types)

    @classmethod
    def of(
        cls, plan: Plan, schema: Mapping[str, str], join_schemas: Sequence[Mapping[str, str]]
    ) -> Extras:
        joins = tuple(getattr(plan, "joins", ()))
        buckets = tuple(getattr(plan, "buckets", ()))
        if len(join_schemas) != len(joins):
            raise PlanError(
                f"the plan has {len(joins)} public joins but {len(join_schemas)} "
                "public schemas were given"
            )
        extra: dict[str, str] = {}
        origin: dict[str, str] = {}
        for i, (j, js) in enumerate(zip(joins, join_schemas, strict=True)):
            if j.how not in ("inner", "left"):
                raise PlanError(f"join kind must be 'inner' or 'left', got {j.how!r}")
            if not j.left_on or len(j.left_on) != len(j.right_on):
                raise PlanError("a public join needs as many left as right key columns (>= 1)")
            _check_join_keys(j.left_on, j.right_on, schema, js)
            for n, (pc, name) in enumerate(j.columns):
                col = resolve(pc, js, "public column")
                if not isinstance(name, str) or not name or name.casefold().startswith(P):
                    raise PlanError(f"bad exposed name for public column {pc!r}: {name!r}")
                if (
                    name in schema
                    or name in extra
                    or any(c.casefold() == name.casefold() for c in (*schema, *extra))
                ):
                    raise PlanError(f"public column name {name!r} clashes with another column")
                if is_nested(js[col]):
                    raise PlanError(f"public column {col!r} has the nested type {js[col]}")
                extra[name] = js[col]
                origin[name] = f"{P}j{i}c{n}"
        bucket_types: dict[str, str] = {}
        for b in buckets:
            if not isinstance(b.name, str) or not b.name or b.name.casefold().startswith(P):
                raise PlanError(f"bad bucket name {b.name!r}")
            if any(c.casefold() == b.name.casefold() for c in (*schema, *extra)):
                raise PlanError(f"bucket name {b.name!r} clashes with another column")
            if not b.cases:
                raise PlanError(f"bucket {b.name!r} needs at least one case")
            bucket_types[b.name] = _bucket_type(b.name, [v for _, v in b.cases] + [b.default])
            extra[b.name] = bucket_types[b.name]
        derived_types: dict[str, str] = {}
        readable = {**schema, **{k: v for k, v in extra.items() if k not in bucket_types}}
        for d in getattr(plan, "derived", ()):
            if not isinstance(d.name, str) or not d.name or d.name.casefold().startswith(P):
                raise PlanError(f"bad derived column name {d.name!r}")
            if any(c.casefold() == d.name.casefold() for c in (*schema, *extra)):
                raise PlanError(f"derived column name {d.name!r} clashes with another column")
            expr = parse_derived(d.expression)
            types = {}
            for c in expr.columns:
                col = resolve(c, readable, f"column of derived column {d.name!r}")
                types[c] = readable[col]
            derived_types[d.name] = sql_type_of(result_kind(expr, types.get))
            extra[d.name] = derived_types[d.name]
        return cls(
            plan=plan,
            schema=extra,
            origin=origin,
            join_schemas=tuple(join_schemas),
            bucket_types=bucket_types,
            base_schema=schema,
            derived_types=derived_types,
        )

    def attach_joins(
        self, src: exp.Select, registered: frozenset[str], profile: DialectProfile
    ) -> exp.Select:
        """``src`` joined with each public table reduced to its keys that occur once.

        ``(SELECT k AS jk.., MIN(c) AS jc.. FROM public GROUP BY k HAVING COUNT(*) = 1)``: a
        key repeated in the public table is dropped there, so no source row can match two
        public rows (which would copy its contribution past the bounds).
        """
        for i, (j, js) in enumerate(zip(self.plan.joins, self.join_schemas, strict=True)):
            alias = f"{P}j{i}"
            rks = [resolve(rk, js, "public join key") for rk in j.right_on]
            items = [aliased(colref(rk), ident(f"{alias}k{m}")) for m, rk in enumerate(rks)]
            items += [
                aliased(
                    exp.Min(this=colref(resolve(pc, js, "public column"))), ident(f"{alias}c{n}")
                )
                for n, (pc, _) in enumerate(j.columns)
            ]
            sub = (
                exp.select(*items)
                .from_(
                    source_sql(
                        j.source,
                        registered=registered,
                        dialect=profile.dialect,
                        csv_columns=tuple(js),
                    )
                )
                .group_by(*[colref(rk) for rk in rks])
                .having(exp.EQ(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1)))
            )
            eqs = []
            for m, lk in enumerate(j.left_on):
                lc = resolve(lk, self.base_schema, "join key")
                left: exp.Expression = colref(lc)
                right: exp.Expression = exp.Column(this=ident(f"{alias}k{m}"), table=ident(alias))
                if type_family(self.base_schema[lc]) == "string":
                    # compare the UTF-8 bytes: a column's case-insensitive collation (DuckDB
                    # COLLATE NOCASE, Spark UTF8_LCASE) would match one private row to several
                    # public keys that differ only by case, copying its contribution
                    left, right = _utf8(left, profile), _utf8(right, profile)
                eqs.append(exp.EQ(this=left, expression=right))
            on = exp.and_(*eqs)
            src = src.join(
                exp.Subquery(this=sub, alias=exp.TableAlias(this=ident(alias))),
                on=on,
                join_type="left" if j.how == "left" else "inner",
            )
        return src

    def bucket_sql(
        self, use: Callable[[str], str], profile: DialectProfile
    ) -> list[exp.Expression]:
        """``CASE WHEN COALESCE(TRY(p1), FALSE) THEN v1 ... ELSE d END AS name`` per bucket
        (conditions evaluated exactly like filters), cast to the bucket's type."""
        out: list[exp.Expression] = []
        for b in self.plan.buckets:
            t = self.bucket_types[b.name]
            ifs = []
            for pred, value in b.cases:

                def column(name: str, bucket: str = b.name) -> str:
                    if name in self.computed:
                        raise PlanError(
                            f"bucket {bucket!r} cannot read the computed column {name!r}"
                        )
                    return use(name)

                cond = safe_predicate(pred, column, profile)
                ifs.append(exp.If(this=cond, true=_bucket_literal(value, t, profile)))
            case = exp.Case(ifs=ifs, default=_bucket_literal(b.default, t, profile))
            out.append(aliased(cast_to(case, t), ident(b.name)))
        return out

    def derived_sql(
        self, use: Callable[[str], str], profile: DialectProfile
    ) -> list[exp.Expression]:
        """``<expression> AS name`` per derived column (see :mod:`.derived`); an expression
        reads the source's and the public joins' columns, never a bucket or another derived
        column."""
        out: list[exp.Expression] = []
        for d in self.plan.derived:

            def column(name: str, of: str = d.name) -> str:
                col = resolve(name, {**self.base_schema, **self.schema}, "expression column")
                if col in self.computed:
                    raise PlanError(
                        f"derived column {of!r} cannot read the computed column {col!r}"
                    )
                return use(col)

            types = {**self.base_schema, **self.schema}
            e, _ = derived_sql(d.expression, column, _Resolved(types), profile)
            out.append(aliased(e, ident(d.name)))
        return out


class _Resolved(dict[str, str]):
    """A schema read by the analyst's spelling of a column (exact, then case-insensitive)."""

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        try:
            return self[resolve(key, self, "expression column")]
        except PlanError:
            return default
