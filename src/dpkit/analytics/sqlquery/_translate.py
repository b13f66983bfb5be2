"""From one SQL ``SELECT`` to a builder :class:`~dpkit.analytics.Query` (the same plan).

The statement is parsed with sqlglot and walked once. Every construct is either mapped to a
builder call (so the plan, the pricing and the release are exactly those of the builder query
written by hand) or refused with a :class:`SqlError` naming the clause and the reason, before
any data is read or any budget is charged.

Mapping (``u`` the privacy unit, bounds and keys from the metadata):

* ``FROM t`` (the private table), ``[INNER|LEFT] JOIN p ON t.a = p.b`` (``p`` declared public)
  -> :meth:`Query.join_public`; ``FROM (SELECT ... FROM t WHERE ...) AS s`` -> the inner
  filters and projections, inlined (row-level only).
* ``WHERE`` -> :meth:`Query.where` (the predicate allow-list of :mod:`dpkit.analytics._sql`).
* ``CASE WHEN p THEN v ... ELSE d END`` (literal values) -> :meth:`Query.bucket`; grouping by
  it uses its values as public keys.
* ``GROUP BY c`` -> :meth:`Query.group_by` with the metadata's keys of ``c`` (public keys for
  every column), else private partition selection.
* ``COUNT(*)`` -> ``count()``; ``COUNT(DISTINCT u)`` -> ``count_distinct()``; ``COUNT(c)``
  beside another aggregate of ``c`` -> ``count("c")``, its non-NULL values (beside ``AVG(c)``,
  ``VAR(c)`` or ``STDDEV(c)``, the noisy count of that statistic, with no budget of its own);
  ``COUNT(c)`` as the only reader of ``c`` -> ``count()`` of the rows where ``c IS NOT NULL``
  (only without other aggregates, so the added filter changes nothing else);
  ``SUM``/``AVG``/``VAR*``/``STDDEV*``
  -> ``sum``/``mean``/``variance``/``std`` (population variance); ``MEDIAN(c)``,
  ``PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY c)``, ``QUANTILE_CONT(c, q)`` -> ``quantile``.
* ``HAVING``, ``ORDER BY``, ``LIMIT``/``OFFSET`` -> applied to the released (noisy) rows:
  post-processing, free of privacy cost.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import sqlglot
from sqlglot import exp

import dpkit.analytics._aggregates as agg
from dpkit.analytics._derive import parse_derived
from dpkit.analytics._plan import did_you_mean
from dpkit.analytics._sql import PredicateError, parse_predicate
from dpkit.analytics._topk import MAX_K
from dpkit.analytics.builder import Query, QueryHost
from dpkit.analytics.sqlquery._metadata import ColumnInfo, Metadata, TableInfo
from dpkit.errors import DPKitError, PrivacyParameterError

__all__ = ["SqlError", "SqlHost", "Translation", "translate"]


class SqlHost(QueryHost, Protocol):
    """What the SQL front end needs of a session: a :class:`QueryHost` (the table's
    description, public tables) that starts builder queries."""

    def query(self) -> Query:
        """A new, empty builder query over the private table."""
        ...


MAX_SQL_LENGTH = 100_000
_KEYWORDS = frozenset(k.upper() for k in sqlglot.tokens.Tokenizer.KEYWORDS) | frozenset(
    k.upper() for k in getattr(sqlglot.dialects.DuckDB.Tokenizer, "KEYWORDS", {})
)


class SqlError(DPKitError, ValueError):
    """The query lies outside the supported private fragment (nothing was read or spent)."""

    def __init__(self, clause: str, reason: str) -> None:
        self.clause = clause
        self.reason = reason
        super().__init__(
            f"{clause}: {reason} (query refused before reading any data; nothing was spent)"
        )


# ---------------------------------------------------------------------------- scopes


@dataclass
class _Join:
    table: str
    alias: str
    target: Any  # what Query.join_public receives
    schema: dict[str, str]
    info: TableInfo
    how: str
    on: list[tuple[str, str]] = field(default_factory=list)
    exposed: dict[str, str] = field(default_factory=dict)  # public column -> exposed name


@dataclass
class _Scope:
    """What a column reference can mean at one level of the query."""

    private_names: tuple[str, ...]  # qualifiers of the private table (name, alias)
    joins: dict[str, _Join] = field(default_factory=dict)  # qualifier -> join
    projection: dict[str, exp.Expression] | None = None  # subquery outputs (lower-case name)
    sub_alias: str | None = None


@dataclass(frozen=True)
class OutputColumn:
    """One item of the SELECT list: a group key or a statistic, and its released columns."""

    name: str
    kind: str  # "key" or "stat"
    source: str  # plan column (keys) or statistic name (stats)
    canonical: str  # the item's SQL with columns resolved (to match HAVING / ORDER BY)


@dataclass
class Translation:
    """The builder query of a SQL statement and the post-processing of its released rows."""

    text: str
    query: Query
    outputs: list[OutputColumn]
    group_columns: tuple[str, ...]
    having: exp.Expression | None
    order: list[tuple[str, bool, bool | None]]  # (released column, descending, nulls first)
    limit: int | None
    offset: int
    quantile_columns: dict[str, list[str]]  # statistic -> released columns


def _canon(e: exp.Expression) -> str:
    return e.sql(dialect="duckdb", comments=False).lower()


def _literal_value(e: exp.Expression, clause: str) -> object:
    """A Python value of a literal node (strings, numbers, booleans, NULL, negatives)."""
    if isinstance(e, exp.Paren):
        return _literal_value(e.this, clause)
    if isinstance(e, exp.Null):
        return None
    if isinstance(e, exp.Boolean):
        return bool(e.this)
    if isinstance(e, exp.Neg):
        v = _literal_value(e.this, clause)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v
    if isinstance(e, exp.Literal):
        if e.is_string:
            return str(e.this)
        text = str(e.this)
        try:
            return int(text)
        except ValueError:
            pass
        try:
            v = float(text)
        except ValueError:
            pass
        else:
            if math.isfinite(v):
                return v
    raise SqlError(clause, f"{e.sql()!r} must be a literal (text, number, boolean or NULL)")


class _Translator:
    def __init__(
        self,
        session: SqlHost,
        metadata: Metadata,
        public_tables: dict[str, Any],
        overrides: TableInfo | None = None,
    ) -> None:
        self.session = session
        self.overrides = overrides
        self.meta = metadata
        self.public_tables = public_tables
        self.private: TableInfo | None = None
        self.joins: list[_Join] = []
        self.filters: list[str] = []
        self.buckets: list[tuple[str, list[tuple[str, object]], object]] = []
        self.bucket_by_sql: dict[str, str] = {}
        # derived columns: (name, expression, declared bounds of its inputs), by expression
        self.derived: list[tuple[str, str, dict[str, tuple[Any, Any]]]] = []
        self.derived_by_sql: dict[str, str] = {}
        self.taken: set[str] = set(session.table.columns)

    # ------------------------------------------------------------------ tables
    def _public_info(self, name: str) -> TableInfo | None:
        info = self.meta.table(name)
        if info is not None and info.public:
            return info
        for n in self.public_tables:
            if n.casefold() == name.casefold():
                return info or TableInfo(name=n, public=True)
        return None

    def _private_table(self, table: exp.Table, clause: str) -> str:
        _plain_table(table, clause)
        if table.args.get("db") or table.args.get("catalog"):
            raise SqlError(clause, f"qualified table names are not supported: {table.sql()!r}")
        if not isinstance(table.this, exp.Identifier):
            raise SqlError(
                clause,
                f"{table.sql()!r} is not a table name (table functions "
                "and file paths are refused: the session's table is the data)",
            )
        name = table.name
        if self._public_info(name) is not None:
            raise SqlError(
                clause,
                f"{name!r} is a public table: the query must read the "
                "private table in FROM and may join public tables to it",
            )
        privates = self.meta.private_tables
        info = self.meta.table(name)
        if privates and (info is None or info.public):
            raise SqlError(
                clause,
                f"unknown table {name!r}: the private table is "
                f"{privates[0].name!r} (undeclared tables are not joined)",
            )
        if self.private is not None and self.private.name.casefold() != name.casefold():
            raise SqlError(
                clause,
                f"the query reads two private tables ({self.private.name!r}"
                f" and {name!r}): joins of two private tables are not supported "
                "(one person's rows could pair with another's, beyond any bound)",
            )
        self.private = _merge(info if info is not None else TableInfo(name=name), self.overrides)
        declared = self.private.privacy_unit
        if declared is not None and declared != self.session.table.privacy_unit:
            raise SqlError(
                clause,
                f"the metadata's privacy unit of {name!r} is {declared!r} "
                f"but the session's is {self.session.table.privacy_unit!r}",
            )
        alias = table.alias_or_name
        tab_alias = table.args.get("alias")
        if isinstance(tab_alias, exp.TableAlias) and tab_alias.columns:
            raise SqlError(clause, "column aliases on a table are not supported")
        return alias

    def _scope_of_from(self, select: exp.Select, clause: str) -> _Scope:
        from_ = select.args.get("from_") or select.args.get("from")
        if from_ is None:
            raise SqlError("FROM", "the query must read the private table (FROM is missing)")
        src = from_.this
        if isinstance(src, exp.Table):
            alias = self._private_table(src, clause)
            scope = _Scope(private_names=tuple({alias, src.name}))
        elif isinstance(src, exp.Subquery):
            inner = src.this
            if not isinstance(inner, exp.Select):
                raise SqlError(
                    "FROM subquery",
                    "a subquery must be one SELECT (UNION and "
                    "other set operations are not supported)",
                )
            projection = self._row_level(inner)
            scope = _Scope(private_names=(), projection=projection, sub_alias=src.alias or None)
        else:
            raise SqlError(
                clause, f"{src.sql()!r}: FROM takes the private table or a row-level subquery of it"
            )
        for j in select.args.get("joins") or []:
            self._join(j, scope)
        return scope

    def _join(self, j: exp.Join, scope: _Scope) -> None:
        clause = "JOIN"
        side = (j.args.get("side") or "").upper()
        kind = (j.args.get("kind") or "").upper()
        if (
            j.args.get("method")
            or j.args.get("using")
            or kind in ("CROSS", "SEMI", "ANTI")
            or side in ("RIGHT", "FULL")
        ):
            raise SqlError(
                clause,
                f"{j.sql()!r}: only [INNER] JOIN and LEFT JOIN with ON "
                "equalities are supported (a RIGHT/FULL/CROSS join would add rows "
                "that no person contributed, or pair each row with many)",
            )
        if kind not in ("", "INNER", "OUTER"):
            raise SqlError(clause, f"join kind {kind} is not supported")
        table = j.this
        if not isinstance(table, exp.Table) or not isinstance(table.this, exp.Identifier):
            raise SqlError(
                clause,
                "a join takes a public table by name (subqueries and table "
                "functions are not supported there)",
            )
        _plain_table(table, clause)
        if table.args.get("db") or table.args.get("catalog"):
            raise SqlError(clause, f"qualified table names are not supported: {table.sql()!r}")
        info = self._public_info(table.name)
        if info is None:
            raise SqlError(
                clause,
                f"{table.name!r} is not declared public in the metadata: "
                "joins of two private tables are not supported (one person's "
                "rows could pair with another's, beyond any bound); declare a "
                "public table with 'public: true'",
            )
        target: Any = None
        for n, obj in self.public_tables.items():
            if n.casefold() == table.name.casefold():
                target = obj
        if target is None:
            target = info.path if info.path is not None else info.name
        public = self.session.public_table(target)
        source, schema = public.source, public.schema
        del source
        join = _Join(
            table=info.name,
            alias=table.alias_or_name,
            target=target,
            schema=schema,
            info=info,
            how="left" if side == "LEFT" else "inner",
        )
        on = j.args.get("on")
        if on is None:
            raise SqlError(clause, "a join needs ON private_column = public_column")
        conds = list(on.flatten()) if isinstance(on, exp.And) else [on]
        for c in conds:
            while isinstance(c, exp.Paren):
                c = c.this
            if not isinstance(c, exp.EQ) or not all(
                isinstance(x, exp.Column) for x in (c.this, c.expression)
            ):
                raise SqlError(
                    clause,
                    f"ON {c.sql()!r}: only equalities of a private column "
                    "and a public column (joined by AND) are supported",
                )
            sides = [c.this, c.expression]
            pub = [x for x in sides if self._is_public_ref(x, join)]
            if len(pub) != 1:
                raise SqlError(
                    clause,
                    f"ON {c.sql()!r} must compare one column of "
                    f"{table.name!r} with one column of the private table",
                )
            priv = sides[1] if pub[0] is sides[0] else sides[0]
            resolved = self._resolve_column(priv, scope, clause)
            if (
                not isinstance(resolved, exp.Column)
                or resolved.name not in self.session.table.columns
            ):
                raise SqlError(
                    clause, f"ON {c.sql()!r}: the key must be a column of the private table"
                )
            join.on.append((resolved.name, self._public_col(pub[0].name, join, clause)))
        scope.joins[join.alias] = join
        if join.alias != table.name:
            scope.joins.setdefault(table.name, join)
        self.joins.append(join)

    def _unit_alias(self, name: str) -> bool:
        """Whether ``name`` is a public join key joined on the privacy unit (the unit under
        another name)."""
        unit = self.session.table.privacy_unit
        return unit is not None and any(
            left == unit and j.exposed.get(right) == name
            for j in self.joins
            for left, right in j.on
        )

    def _is_public_ref(self, col: exp.Column, join: _Join) -> bool:
        if col.table:
            return col.table in (join.alias, join.table)
        return col.name in join.schema and col.name not in self.session.table.columns

    def _public_col(self, name: str, join: _Join, clause: str) -> str:
        if name in join.schema:
            return name
        folded = [c for c in join.schema if c.casefold() == name.casefold()]
        if len(folded) == 1:
            return folded[0]
        raise SqlError(
            clause,
            f"public table {join.table!r} has no column {name!r}"
            f"{did_you_mean(name, join.schema)} (columns: {list(join.schema)})",
        )

    def _expose(self, join: _Join, col: str) -> str:
        if col in join.exposed:
            return join.exposed[col]
        name = col
        n = 1
        while name in self.taken or any(t.casefold() == name.casefold() for t in self.taken):
            name = f"{join.alias}_{col}" if n == 1 else f"{join.alias}_{col}_{n}"
            n += 1
        self.taken.add(name)
        join.exposed[col] = name
        return name

    # ------------------------------------------------------------------ columns
    def _private_column(self, name: str) -> str | None:
        cols = self.session.table.columns
        if name in cols:
            return name
        folded = [c for c in cols if c.casefold() == name.casefold()]
        return folded[0] if len(folded) == 1 else None

    def _resolve_column(self, col: exp.Column, scope: _Scope, clause: str) -> exp.Expression:
        """The resolved tree of a column reference (an unqualified plan column or, through a
        subquery, the projected expression)."""
        if col.args.get("db") or col.args.get("catalog"):
            raise SqlError(clause, f"{col.sql()!r}: qualified names are not supported")
        if isinstance(col.this, exp.Star):
            raise SqlError(clause, "'*' is not supported here")
        qual, name = col.table, col.name
        if qual and qual in scope.joins:
            join = scope.joins[qual]
            return _column(self._expose(join, self._public_col(name, join, clause)))
        if scope.projection is not None and (not qual or qual == scope.sub_alias):
            hit = scope.projection.get(name.casefold())
            if hit is not None:
                return hit.copy()
            if not qual and not any(name in j.schema for j in scope.joins.values()):
                raise SqlError(
                    clause,
                    f"unknown column {name!r}"
                    f"{did_you_mean(name, scope.projection)} (the subquery "
                    f"outputs {sorted(scope.projection)})",
                )
        if qual and qual not in scope.private_names and qual != scope.sub_alias:
            raise SqlError(clause, f"unknown table or alias {qual!r} in {col.sql()!r}")
        if scope.projection is None and (not qual or qual in scope.private_names):
            found = self._private_column(name)
            if found is not None:
                return _column(found)
            if qual:
                raise SqlError(
                    clause,
                    f"unknown column {name!r}"
                    f"{did_you_mean(name, self.session.table.columns)}; the private "
                    f"table has columns {list(self.session.table.columns)}",
                )
        hits = {
            id(j): j
            for j in scope.joins.values()
            if any(c.casefold() == name.casefold() for c in j.schema)
        }
        if len(hits) == 1:
            join = next(iter(hits.values()))
            return _column(self._expose(join, self._public_col(name, join, clause)))
        if len(hits) > 1:
            raise SqlError(clause, f"column {name!r} is ambiguous: qualify it")
        raise SqlError(
            clause,
            f"unknown column {name!r}"
            f"{did_you_mean(name, self.session.table.columns)}; the private table has "
            f"columns {list(self.session.table.columns)}",
        )

    def _resolve(self, e: exp.Expression, scope: _Scope, clause: str) -> exp.Expression:
        """``e`` with every column resolved; CASE expressions become buckets."""
        if isinstance(e, exp.Case):
            return _column(self._bucket(e, scope, clause))
        if isinstance(e, exp.Column):
            return self._resolve_column(e, scope, clause)
        _refuse_other_rows(e, clause)
        out = e.copy()
        if isinstance(out, exp.Column):  # pragma: no cover - handled above
            return self._resolve_column(out, scope, clause)
        for node in list(out.find_all(exp.Column, exp.Case)):
            if isinstance(node, exp.Case):
                node.replace(_column(self._bucket(node, scope, clause)))
        for node in list(out.find_all(exp.Column)):
            if getattr(node, "_dpk_resolved", False):
                continue
            node.replace(self._resolve_column(node, scope, clause))
        return out

    def _check_row_expression(self, e: exp.Expression, clause: str) -> str:
        """The SQL of a resolved row-level expression, checked against the predicate
        allow-list (functions, no subqueries, no division)."""
        text = e.sql(dialect="duckdb", comments=False)
        try:
            vp = parse_predicate(text)
        except PredicateError as exc:
            raise SqlError(
                clause,
                f"{exc} (user functions and other constructs outside the "
                "row-level allow-list are refused on private data)",
            ) from None
        del vp
        return text

    def _bucket(self, case: exp.Case, scope: _Scope, clause: str) -> str:
        base = case.this
        cases: list[tuple[str, object]] = []
        for branch in case.args.get("ifs") or []:
            cond = branch.this
            if base is not None:
                cond = exp.EQ(this=base.copy(), expression=cond.copy())
            resolved = self._resolve(cond, scope, f"{clause} (CASE)")
            text = self._check_row_expression(resolved, f"{clause} (CASE)")
            for c in resolved.find_all(exp.Column):
                if c.name == self.session.table.privacy_unit:
                    raise SqlError(
                        f"{clause} (CASE)",
                        "a CASE on the privacy unit would group by (a function of) the person",
                    )
            cases.append((text, _literal_value(branch.args["true"], f"{clause} (CASE)")))
        if not cases:
            raise SqlError(clause, "CASE needs at least one WHEN")
        default = case.args.get("default")
        dval = None if default is None else _literal_value(default, f"{clause} (CASE)")
        key = repr((cases, dval))
        if key in self.bucket_by_sql:
            return self.bucket_by_sql[key]
        n = len(self.buckets)
        name = f"bucket_{n}"
        while name in self.taken:
            n += 1
            name = f"bucket_{n}"
        self.taken.add(name)
        self.buckets.append((name, cases, dval))
        self.bucket_by_sql[key] = name
        return name

    def _is_derived(self, e: exp.Expression) -> bool:
        """Whether ``e`` is a row expression to compute as a derived column: anything but a
        column or a CASE whose values are all literals (a bucket, with public values)."""
        while isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Column):
            return False
        if isinstance(e, exp.Case):
            branches = [i.args["true"] for i in e.args.get("ifs") or []]
            if e.args.get("default") is not None:
                branches.append(e.args["default"])
            try:
                for b in branches:
                    _literal_value(b, "")
            except SqlError:
                return True
            return False
        return True

    def _resolve_columns(self, e: exp.Expression, scope: _Scope, clause: str) -> exp.Expression:
        """A copy of ``e`` with every column reference resolved (CASE stays a CASE)."""
        out = e.copy()
        if isinstance(out, exp.Column):
            return self._resolve_column(out, scope, clause)
        for node in list(out.find_all(exp.Column)):
            node.replace(self._resolve_column(node, scope, clause))
        return out

    def _derive(self, e: exp.Expression, scope: _Scope | None, clause: str) -> str:
        """The name of the derived column computing the row expression ``e`` (each distinct
        expression once), with the metadata's bounds of the columns it reads as its inputs'
        bounds. Named by its own SQL text, so messages speak of what the analyst wrote.
        ``scope`` None: the columns of ``e`` are resolved already (a subquery's output)."""
        _refuse_other_rows(e, clause)
        out = e if scope is None else self._resolve_columns(e, scope, clause)
        text = out.sql(dialect="duckdb", comments=False)
        try:
            parsed = parse_derived(text)
        except PredicateError as exc:
            raise SqlError(clause, str(exc)) from None
        unit = self.session.table.privacy_unit
        if unit is not None and unit in parsed.columns:
            raise SqlError(clause, f"{e.sql()!r} reads the privacy unit {unit!r}")
        if text in self.derived_by_sql:
            return self.derived_by_sql[text]
        name, n = text, 2
        while name in self.taken:
            name, n = f"{text} ({n})", n + 1
        self.taken.add(name)
        inputs = {}
        for c in parsed.columns:
            info = self._column_info(c)
            if info is not None and info.bounds is not None:
                inputs[c] = info.bounds
        self.derived.append((name, text, inputs))
        self.derived_by_sql[text] = name
        return name

    def _where(self, select: exp.Select, scope: _Scope, clause: str) -> None:
        where = select.args.get("where")
        if where is None:
            return
        cond = where.this
        if any(isinstance(n, (exp.Subquery, exp.Select)) for n in cond.walk()):
            raise SqlError(
                clause,
                "a subquery inside an expression is not supported (it "
                "could read other rows or smuggle an aggregate in)",
            )
        if any(isinstance(n, exp.AggFunc) for n in cond.walk()):
            raise SqlError(
                clause,
                "an aggregate in WHERE is not supported (filter released values with HAVING)",
            )
        resolved = self._resolve(cond, scope, clause)
        self.filters.append(self._check_row_expression(resolved, clause))

    # ------------------------------------------------------------------ subqueries
    def _forbid(self, select: exp.Select, clause: str, top: bool) -> None:
        if select.args.get("with") is not None or select.args.get("with_") is not None:
            raise SqlError(
                "WITH", "common table expressions are not supported; use a subquery in FROM"
            )
        if select.args.get("distinct") is not None:
            raise SqlError(
                f"{clause} DISTINCT",
                "SELECT DISTINCT releases rows without "
                "noise; count distinct persons with COUNT(DISTINCT <privacy unit>)",
            )
        for arg in ("qualify", "laterals", "pivots", "into", "sample", "connect", "windows"):
            if select.args.get(arg):
                raise SqlError(clause, f"{arg.upper()} is not supported")
        if not top:
            if select.args.get("limit") is not None or select.args.get("offset") is not None:
                raise SqlError(
                    "LIMIT (subquery)",
                    "LIMIT before GROUP BY keeps rows chosen "
                    "by their order among everyone's rows, so one person could "
                    "change which rows of others are counted; LIMIT applies only "
                    "to released rows",
                )
            if select.args.get("group") is not None or select.args.get("having") is not None:
                raise SqlError(
                    "GROUP BY (subquery)",
                    "an aggregate before the private "
                    "aggregate (aggregates of aggregates) is not supported: the "
                    "inner groups mix people's rows before contribution bounding",
                )
            if select.args.get("order") is not None:
                raise SqlError(
                    "ORDER BY (subquery)",
                    "ordering rows before the aggregate has no effect on it; remove it",
                )

    def _row_level(self, select: exp.Select) -> dict[str, exp.Expression]:
        clause = "subquery"
        self._forbid(select, clause, top=False)
        for node in select.walk():
            if isinstance(node, exp.Window):
                raise SqlError(
                    "subquery",
                    f"window function {node.sql()!r} before the "
                    "aggregate: a row's value would depend on other people's rows",
                )
            if isinstance(node, exp.AggFunc):
                raise SqlError(
                    "subquery",
                    f"aggregate {node.sql()!r} before the private "
                    "aggregate: aggregates of aggregates are not supported (the "
                    "inner aggregate mixes people's rows before bounding)",
                )
        scope = self._scope_of_from(select, "FROM (subquery)")
        self._where(select, scope, "WHERE (subquery)")
        out: dict[str, exp.Expression] = {}
        for item in select.expressions:
            if isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            ):
                if scope.projection is not None:
                    for k, v in scope.projection.items():
                        out.setdefault(k, v)
                else:
                    for c in self.session.table.columns:
                        out.setdefault(c.casefold(), _column(c))
                continue
            name = item.alias_or_name
            inner = item.this if isinstance(item, exp.Alias) else item
            if not name:
                raise SqlError("SELECT (subquery)", f"{item.sql()!r} needs an alias")
            if self._is_derived(inner):  # checked when the outer query uses it
                resolved = self._resolve_columns(inner, scope, "SELECT (subquery)")
            else:
                resolved = self._resolve(inner, scope, "SELECT (subquery)")
            if not isinstance(resolved, exp.Column) and not self._is_derived(resolved):
                self._check_row_expression(resolved, "SELECT (subquery)")
            out[name.casefold()] = resolved
        return out

    # ------------------------------------------------------------------ the top level
    def translate(self, text: str) -> Translation:
        tree = _parse(text)
        self._forbid(tree, "SELECT", top=True)
        for node in tree.walk():
            if isinstance(node, exp.Window):
                raise SqlError(
                    "SELECT",
                    f"window function {node.sql()!r}: not supported (a "
                    "window over private rows reads other people's rows)",
                )
        scope = self._scope_of_from(tree, "FROM")
        self._where(tree, scope, "WHERE")

        items = list(tree.expressions)
        item_names: list[str] = []
        for i, item in enumerate(items):
            if isinstance(item, exp.Star) or (
                isinstance(item, exp.Column) and isinstance(item.this, exp.Star)
            ):
                raise SqlError("SELECT", "'*' is not supported: list group columns and aggregates")
            name = item.alias_or_name if isinstance(item, (exp.Alias, exp.Column)) else ""
            if not name:  # an unnamed aggregate or CASE: a name from its text
                name = (
                    re.sub(r"[^a-z0-9]+", "_", item.sql(dialect="duckdb").lower()).strip("_")[:60]
                    or f"col{i}"
                )
            base, n = name, 2
            while name in item_names:
                name, n = f"{base}_{n}", n + 1
            item_names.append(name)

        # GROUP BY
        group_cols: list[str] = []
        group = tree.args.get("group")
        if group is not None:
            for g in group.expressions:
                target = g
                if isinstance(g, exp.Literal) and not g.is_string:
                    pos = int(str(g.this)) if str(g.this).isdigit() else 0
                    if not 1 <= pos <= len(items):
                        raise SqlError("GROUP BY", f"position {g.sql()} is not a SELECT item")
                    target = items[pos - 1].unalias()
                elif isinstance(g, exp.Column) and not g.table:
                    for it in items:
                        if (
                            isinstance(it, exp.Alias)
                            and it.alias == g.name
                            and not isinstance(it.this, exp.AggFunc)
                        ):
                            try:
                                self._resolve_column(g, scope, "GROUP BY")
                            except SqlError:
                                target = it.this
                if any(isinstance(n, exp.AggFunc) for n in target.walk()):
                    raise SqlError("GROUP BY", "grouping by an aggregate is not supported")
                resolved: exp.Expression
                if self._is_derived(target):
                    resolved = _column(self._derive(target, scope, "GROUP BY"))
                else:
                    resolved = self._resolve(target, scope, "GROUP BY")
                    if not isinstance(resolved, exp.Column):  # a subquery's expression
                        resolved = _column(self._derive(resolved, None, "GROUP BY"))
                if not isinstance(resolved, exp.Column):
                    raise SqlError(
                        "GROUP BY",
                        f"{g.sql()!r}: group by columns, CASE buckets or row expressions "
                        "(date parts, date_trunc, arithmetic, string functions, casts)",
                    )
                name = resolved.name
                if name == self.session.table.privacy_unit or self._unit_alias(name):
                    raise SqlError(
                        "GROUP BY",
                        f"grouping by the privacy unit {name!r} would release one row per person",
                    )
                if name in group_cols:
                    raise SqlError("GROUP BY", f"{name!r} is grouped twice")
                group_cols.append(name)

        # SELECT items
        stats: dict[str, agg.Statistic] = {}
        outputs: list[OutputColumn] = []
        count_cols: list[tuple[str, str]] = []  # (stat name, column) of COUNT(col)
        value_cols: set[str] = set()
        other_counts = False
        for item, out_name in zip(items, item_names, strict=True):
            inner = item.unalias()
            aggs = [n for n in inner.walk() if isinstance(n, (exp.AggFunc, exp.WithinGroup))]
            if aggs:
                node = inner
                if isinstance(node, exp.Filter):
                    raise SqlError(
                        "SELECT",
                        f"{node.sql()!r}: FILTER on an aggregate is not "
                        "supported; use WHERE (or one query per filter)",
                    )
                if not isinstance(node, (exp.AggFunc, exp.WithinGroup)):
                    raise SqlError(
                        "SELECT",
                        f"{inner.sql()!r}: arithmetic on aggregates is "
                        "not supported (no interval for it); release the "
                        "aggregates and combine them afterwards",
                    )
                nested = [
                    n
                    for n in node.walk()
                    if n is not node
                    and isinstance(n, exp.AggFunc)
                    and not (isinstance(node, exp.WithinGroup) and n is node.this)
                ]
                if nested:
                    raise SqlError(
                        "SELECT", f"{inner.sql()!r}: aggregates of aggregates are not supported"
                    )
                if (
                    out_name in stats
                    or out_name in group_cols
                    or any(o.name == out_name for o in outputs)
                ):
                    raise SqlError("SELECT", f"output name {out_name!r} is used twice")
                st, col, is_count_col = self._statistic(cast(exp.Expression, node), scope, out_name)
                stats[out_name] = st
                if is_count_col and col is not None:
                    count_cols.append((out_name, col))
                elif col is not None:
                    value_cols.add(col)
                else:
                    other_counts = True
                outputs.append(OutputColumn(out_name, "stat", out_name, _canon(inner)))
                continue
            if self._is_derived(inner) and not isinstance(inner, exp.Literal):
                resolved = _column(self._derive(inner, scope, "SELECT"))
            else:
                resolved = self._resolve(inner, scope, "SELECT")
                if not isinstance(resolved, exp.Column) and not isinstance(inner, exp.Literal):
                    resolved = _column(self._derive(resolved, None, "SELECT"))
            if not isinstance(resolved, exp.Column) or resolved.name not in group_cols:
                raise SqlError(
                    "SELECT",
                    f"{inner.sql()!r} is neither a GROUP BY column nor an "
                    "aggregate (every released value must be a noisy aggregate or "
                    "a group key)",
                )
            if any(o.name == out_name for o in outputs):
                raise SqlError("SELECT", f"output name {out_name!r} is used twice")
            outputs.append(OutputColumn(out_name, "key", resolved.name, _canon(inner)))
        if not stats:
            raise SqlError(
                "SELECT",
                "the query has no aggregate (COUNT, SUM, AVG, ...): "
                "without one nothing can be released privately",
            )
        for stat_name, col in count_cols:
            if col in value_cols:  # the builder's count(col): the mean's own noisy count
                stats[stat_name] = agg.count(col)
        count_cols = [(n, c) for n, c in count_cols if c not in value_cols]
        if count_cols:
            cols = {c for _, c in count_cols}
            if len(cols) > 1 or other_counts or value_cols:
                raise SqlError(
                    "SELECT",
                    "COUNT(column) counts the rows where the column is not NULL; it is "
                    "answered beside another aggregate of that same column or as the only "
                    "aggregate (use COUNT(*) with WHERE column IS NOT NULL otherwise)",
                )
            (col,) = cols
            self.filters.append(f"{_quote(col)} IS NOT NULL")

        _check_interval_names(outputs, stats)
        query = self._build(group_cols, stats)
        having = tree.args.get("having")
        hv = having.this if having is not None else None
        kinds = (
            self._output_kinds(outputs, stats)
            if (hv is not None or tree.args.get("order") is not None)
            else {}
        )
        if hv is not None:
            _check_having(hv, outputs)
            _having_kind(hv, outputs, kinds)
        order = self._order(tree, outputs, items, group_cols)
        for target, _, _ in order:
            if kinds.get(target) == "list":
                raise SqlError(
                    "ORDER BY",
                    f"{target!r} releases several quantiles (one column "
                    "per level): order by one level's own query instead",
                )
        limit, offset = self._limit(tree)
        top = _top_k_size(stats, group_cols, hv, order, limit, offset)
        if top is not None:
            # ORDER BY the one aggregate DESC LIMIT k: only the k largest groups are
            # selected and released (one charge for the selection and their values), not
            # every group; the ORDER BY and LIMIT below then read the released rows.
            query = query.top_k(top)
        qcols: dict[str, list[str]] = {n: [] for n, s in stats.items() if s.kind == "quantile"}
        return Translation(
            text=text,
            query=query,
            outputs=outputs,
            group_columns=tuple(group_cols),
            having=hv,
            order=order,
            limit=limit,
            offset=offset,
            quantile_columns=qcols,
        )

    def _output_kinds(
        self, outputs: list[OutputColumn], stats: dict[str, agg.Statistic]
    ) -> dict[str, str]:
        """What each released column holds, from the schema only (no data is read): ``num``
        (a noisy statistic, an integer or float key), ``text`` (a text key), ``list`` (a
        quantile over several levels: one released column per level) or ``any``."""
        from dpkit.analytics._column_types import type_family

        types: dict[str, str] = {}
        if any(o.kind == "key" for o in outputs):
            types = dict(self.session.table.types)
        out: dict[str, str] = {}
        for o in outputs:
            if o.kind == "stat":
                st = stats.get(o.source)
                out[o.name] = (
                    "list"
                    if st is not None and st.kind == "quantile" and len(st.quantiles) > 1
                    else "num"
                )
                continue
            fam = type_family(types[o.source]) if o.source in types else "other"
            out[o.name] = (
                "num" if fam in ("integer", "float") else "text" if fam == "string" else "any"
            )
        return out

    def _statistic(
        self, node: exp.Expression, scope: _Scope, name: str
    ) -> tuple[agg.Statistic, str | None, bool]:
        """(statistic, column read, whether it is COUNT(column))."""
        clause = f"SELECT {node.sql()}"
        if isinstance(node, exp.Count):
            arg = node.this
            if arg is None or isinstance(arg, exp.Star):
                return agg.count(), None, False
            if isinstance(arg, exp.Distinct):
                cols = arg.expressions
                if len(cols) == 1 and isinstance(cols[0], exp.Column):
                    r = self._resolve_column(cols[0], scope, clause)
                    unit = self.session.table.privacy_unit
                    if isinstance(r, exp.Column) and unit is not None and r.name == unit:
                        return agg.count_distinct(), None, False
                raise SqlError(
                    clause,
                    "COUNT(DISTINCT ...) is supported for the privacy unit "
                    f"only ({self.session.table.privacy_unit!r}): distinct values of "
                    "another column are not bounded per person here",
                )
            if isinstance(arg, exp.Literal) and not arg.is_string:
                return agg.count(), None, False
            col = self._value_column(arg, scope, clause)
            return agg.count(), col, True
        if isinstance(node, exp.WithinGroup):
            fn = node.this
            if not isinstance(fn, exp.PercentileCont):
                raise SqlError(
                    clause,
                    "only PERCENTILE_CONT(q) WITHIN GROUP (ORDER BY col) "
                    "is supported among ordered-set aggregates",
                )
            order = node.expression
            obs = order.expressions if isinstance(order, exp.Order) else []
            if len(obs) != 1 or obs[0].args.get("desc"):
                raise SqlError(clause, "WITHIN GROUP takes one ascending ORDER BY column")
            col = self._value_column(obs[0].this, scope, clause)
            qs = self._quantiles(fn.this, clause)
            return self._quantile(col, qs, clause), col, False
        if isinstance(node, exp.Median):
            col = self._value_column(node.this, scope, clause)
            return self._quantile(col, [0.5], clause), col, False
        if isinstance(node, (exp.PercentileCont, exp.Quantile)):
            q = node.args.get("expression") or node.args.get("quantile")
            col = self._value_column(node.this, scope, clause)
            return self._quantile(col, self._quantiles(q, clause), clause), col, False
        makers: dict[type, Callable[..., agg.Statistic]] = {
            exp.Sum: agg.sum,
            exp.Avg: agg.mean,
            exp.Variance: agg.variance,
            exp.VariancePop: agg.variance,
            exp.Stddev: agg.std,
            exp.StddevPop: agg.std,
            exp.StddevSamp: agg.std,
        }
        make = makers.get(type(node))
        if make is None:
            fname = node.sql_name() if isinstance(node, exp.Func) else type(node).__name__
            if isinstance(node, (exp.Min, exp.Max)):
                reason = (
                    "the extreme value is one person's value and has no private answer; "
                    "ask for a quantile, e.g. PERCENTILE_CONT(0.99) WITHIN GROUP "
                    "(ORDER BY col)"
                )
            else:
                reason = (
                    "not in the supported aggregates (COUNT, SUM, AVG, VAR, STDDEV, "
                    "MEDIAN, PERCENTILE_CONT)"
                )
            raise SqlError(clause, f"{fname}: {reason}")
        if isinstance(node.this, exp.Distinct):
            raise SqlError(clause, "DISTINCT inside SUM/AVG/... is not supported")
        col = self._value_column(node.this, scope, clause)
        if col in self.derived_by_sql.values():
            return make(col), col, False  # bounds from the definition (Query.derive)
        bounds = self._bounds(col, clause)
        return make(col, bounds=bounds), col, False

    def _quantiles(self, q: exp.Expression | None, clause: str) -> list[float]:
        if q is None:
            raise SqlError(clause, "a quantile needs its level, e.g. 0.5")
        nodes = q.expressions if isinstance(q, exp.Array) else [q]
        out = []
        for n in nodes:
            v = _literal_value(n, clause)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise SqlError(clause, f"quantile levels must be numbers in [0, 1], got {v!r}")
            out.append(float(v))
        if not out:
            raise SqlError(clause, "a quantile needs at least one level")
        return out

    def _quantile(self, col: str, qs: list[float], clause: str) -> agg.Statistic:
        if col in self.derived_by_sql.values():
            return agg.quantile(col, qs)  # bounds from the definition (Query.derive)
        return agg.quantile(col, qs, bounds=self._bounds(col, clause))

    def _value_column(self, arg: exp.Expression | None, scope: _Scope, clause: str) -> str:
        if arg is None:
            raise SqlError(clause, "the aggregate needs a column")
        if any(isinstance(n, exp.AggFunc) for n in arg.walk()):
            raise SqlError(clause, "aggregates of aggregates are not supported")
        if not isinstance(arg, exp.Column) and not isinstance(arg, exp.Literal):
            return self._derive(arg, scope, clause)
        resolved = self._resolve(arg, scope, clause)
        if not isinstance(resolved, exp.Column):  # a subquery's expression
            return self._derive(resolved, None, clause)
        if not isinstance(resolved, exp.Column):
            raise SqlError(
                clause,
                f"{arg.sql()!r}: aggregates read a column (derived values "
                "would need bounds of their own; aggregate the column itself)",
            )
        if resolved.name == self.session.table.privacy_unit:
            raise SqlError(clause, "aggregating the privacy unit column is not supported")
        return resolved.name

    def _column_info(self, col: str) -> ColumnInfo | None:
        for j in self.joins:
            for pub, exposed in j.exposed.items():
                if exposed == col:
                    return j.info.columns.get(pub)
        if self.private is not None:
            return self.private.columns.get(col)
        return None

    def _bounds(self, col: str, clause: str) -> tuple[Any, Any]:
        info = self._column_info(col)
        if info is None or info.bounds is None:
            raise SqlError(
                clause,
                f"column {col!r} has no bounds in the metadata: an "
                "aggregate of it cannot be calibrated and is never answered "
                "without noise; declare lower and upper",
            )
        return info.bounds

    def _keys(self, col: str) -> tuple[Any, ...] | None:
        for name, _, _ in self.buckets:
            if name == col:
                b = next(b for b in self.buckets if b[0] == name)
                vals: dict[object, None] = {}
                for _, v in b[1]:
                    vals.setdefault(v, None)
                vals.setdefault(b[2], None)
                return tuple(vals)
        info = self._column_info(col)
        return None if info is None else info.keys

    def _build(self, group_cols: list[str], stats: dict[str, agg.Statistic]) -> Query:
        q = self.session.query()
        for j in self.joins:
            q = q.join_public(j.target, on=list(j.on), columns=dict(j.exposed), how=j.how)
        for name, cases, default in self.buckets:
            q = q.bucket(name, cases, default)
        for name, text, inputs in self.derived:
            q = q.derive(name, text, inputs=inputs)
        for f in self.filters:
            q = q.where(f)
        if group_cols:
            key_lists = [
                q.derived_values(c) if c in self.derived_by_sql.values() else self._keys(c)
                for c in group_cols
            ]
            keys = None
            if all(k is not None for k in key_lists):
                keys = {
                    c: list(k) for c, k in zip(group_cols, key_lists, strict=True) if k is not None
                }
            q = q.group_by(*group_cols, keys=keys)
        if self.session.table.privacy_unit is not None:
            info = self.private or TableInfo(name="")
            q = q.bound(
                max_partitions=info.max_partitions or 1,
                max_rows_per_partition=info.max_rows_per_partition or 1,
            )
        try:
            return q.agg(**stats)
        except PrivacyParameterError as exc:
            if not self.derived:
                raise
            raise SqlError("SELECT", str(exc)) from None

    # ------------------------------------------------------------------ post-processing
    def _order(
        self, tree: exp.Select, outputs: list[OutputColumn], items: list[Any], group_cols: list[str]
    ) -> list[tuple[str, bool, bool | None]]:
        order = tree.args.get("order")
        if order is None:
            return []
        out = []
        for o in order.expressions:
            e = o.this
            target = _match_output(e, outputs, "ORDER BY")
            out.append((target, bool(o.args.get("desc")), o.args.get("nulls_first")))
        return out

    def _limit(self, tree: exp.Select) -> tuple[int | None, int]:
        limit = tree.args.get("limit")
        offset = tree.args.get("offset")
        lim = None
        if limit is not None:
            v = _literal_value(limit.expression, "LIMIT")
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise SqlError("LIMIT", f"LIMIT takes a non-negative integer, got {v!r}")
            lim = v
        off = 0
        if offset is not None:
            v = _literal_value(offset.expression, "OFFSET")
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise SqlError("OFFSET", f"OFFSET takes a non-negative integer, got {v!r}")
            off = v
        return lim, off


def _top_k_size(
    stats: dict[str, agg.Statistic],
    group_cols: list[str],
    having: exp.Expression | None,
    order: list[tuple[str, bool, bool | None]],
    limit: int | None,
    offset: int,
) -> int | None:
    """``k`` when the statement asks for the ``k`` groups with the largest count or bounded
    sum (``GROUP BY ... ORDER BY <the one aggregate> DESC LIMIT k [OFFSET o]``, no HAVING),
    compiled to a top-k selection (``k = limit + offset``); else None (a full release,
    post-processed; also when ``k`` is above the selection's largest, :data:`MAX_K`)."""
    if not group_cols or len(stats) != 1 or having is not None or not order or not limit:
        return None
    if limit + offset > MAX_K:
        return None
    ((name, st),) = stats.items()
    target, descending, _ = order[0]
    if target != name or not descending:
        return None
    if st.kind == "sum":
        b = st.bounds
        if not (isinstance(b, tuple) and b[0] >= 0 and b[1] > 0):
            return None
    elif st.kind != "count":
        return None
    return limit + offset


_PLAIN = re.compile(r"[a-z_][a-z0-9_]*")


def _column(name: str) -> exp.Column:
    """A resolved column reference: unquoted when the name is a plain lower-case identifier
    that is no keyword (so the predicate text reads as written by hand), quoted otherwise."""
    plain = bool(_PLAIN.fullmatch(name)) and name.upper() not in _KEYWORDS
    col = exp.Column(this=exp.to_identifier(name, quoted=not plain))
    col._dpk_resolved = True  # type: ignore[attr-defined]
    return col


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _match_output(e: exp.Expression, outputs: list[OutputColumn], clause: str) -> str:
    """The output column an ORDER BY / HAVING term names (ordinal, name or same expression)."""
    if isinstance(e, exp.Literal) and not e.is_string:
        s = str(e.this)
        if s.isdigit() and 1 <= int(s) <= len(outputs):
            return outputs[int(s) - 1].name
        raise SqlError(clause, f"position {s} is not a SELECT item")
    if isinstance(e, exp.Column) and not e.table:
        for o in outputs:
            if o.name == e.name or o.name.casefold() == e.name.casefold():
                return o.name
        for o in outputs:
            if o.kind == "key" and o.source.casefold() == e.name.casefold():
                return o.name
    c = _canon(e)
    for o in outputs:
        if o.canonical == c:
            return o.name
    raise SqlError(
        clause,
        f"{e.sql()!r} is not a released column: {clause} applies to the "
        "released rows only (add the aggregate to SELECT)",
    )


def _check_interval_names(outputs: list[OutputColumn], stats: dict[str, Any]) -> None:
    """Refuse an output name that another statistic's released columns also use.

    A statistic ``s`` is released with ``s_low`` and ``s_high`` (its interval), a quantile over
    several levels as ``s_p<level>`` columns: an output named ``s_low`` would be swapped with
    (or hidden by) ``s``'s lower bound.
    """
    for a in outputs:
        if a.kind != "stat":
            continue
        base = a.name.casefold()
        st = stats.get(a.source)
        for b in outputs:
            if b is a:
                continue
            other = b.name.casefold()
            if other in (base + "_low", base + "_high") or (
                st is not None and st.kind == "quantile" and other.startswith(base + "_p")
            ):
                raise SqlError(
                    "SELECT",
                    f"output name {b.name!r} is also a released column "
                    f"of {a.name!r} (its interval or quantile levels): choose "
                    "another alias",
                )


def _plain_table(table: exp.Table, clause: str) -> None:
    """Refuse a table reference with anything beyond its name and alias (``TABLESAMPLE``,
    ``AT``/time travel, hints, pivots, ...): dropping it would answer another query."""
    extra = sorted(
        k for k, v in table.args.items() if v and k not in ("this", "alias", "db", "catalog")
    )
    if extra:
        raise SqlError(
            clause,
            f"{table.sql()!r}: only a table name and an alias are supported "
            f"here (not {', '.join(extra)})",
        )


def _parse(text: str) -> exp.Select:
    if not isinstance(text, str):
        raise SqlError("query", f"the query must be a string, got {type(text).__name__}")
    if not text.strip():
        raise SqlError("query", "the query is empty")
    if len(text) > MAX_SQL_LENGTH:
        raise SqlError("query", f"the query is longer than {MAX_SQL_LENGTH} characters")
    if "\x00" in text:
        raise SqlError("query", "the query must not contain NUL characters")
    try:
        statements = sqlglot.parse(text, read="duckdb")
    except sqlglot.errors.SqlglotError as exc:
        msg = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines()[0][:300]
        raise SqlError("syntax", f"the query does not parse: {msg}") from None
    stmts = [s for s in statements if s is not None]
    if len(stmts) != 1:
        raise SqlError("query", f"exactly one statement is supported, got {len(stmts)}")
    tree = stmts[0]
    if not isinstance(tree, exp.Select):
        raise SqlError("query", f"only SELECT is supported, got {type(tree).__name__.upper()}")
    return tree


def _merge(info: TableInfo, overrides: TableInfo | None) -> TableInfo:
    """The private table's metadata with the caller's arguments taking precedence."""
    if overrides is None:
        return info
    cols = dict(info.columns)
    for c, ci in overrides.columns.items():
        old = cols.get(c, ColumnInfo())
        cols[c] = ColumnInfo(
            lower=ci.lower if ci.bounds is not None else old.lower,
            upper=ci.upper if ci.bounds is not None else old.upper,
            keys=ci.keys if ci.keys is not None else old.keys,
        )
    return dataclasses.replace(
        info,
        columns=cols,
        privacy_unit=overrides.privacy_unit or info.privacy_unit,
        max_partitions=overrides.max_partitions or info.max_partitions,
        max_rows_per_partition=overrides.max_rows_per_partition or info.max_rows_per_partition,
    )


def translate(
    session: SqlHost,
    text: str,
    metadata: Metadata,
    public_tables: dict[str, Any] | None = None,
    overrides: TableInfo | None = None,
) -> Translation:
    """Check ``text`` against the private fragment and build its builder query.

    Raises :class:`SqlError` (or another :class:`~dpkit.errors.DPKitError` for a bad
    parameter) for anything outside the fragment; reads no data and spends nothing.
    """
    t = _Translator(session, metadata, dict(public_tables or {}), overrides)
    try:
        return t.translate(text)
    except DPKitError:
        raise
    except RecursionError:
        raise SqlError("query", "the query is nested too deeply") from None
    except Exception as exc:  # a construct the walker does not know: refused, not crashed
        raise SqlError(
            "query", f"unsupported construct ({type(exc).__name__}: {str(exc)[:200]})"
        ) from None


# ---------------------------------------------------------------------------- HAVING

_HAVING_OPS = (
    exp.And,
    exp.Or,
    exp.EQ,
    exp.NEQ,
    exp.GT,
    exp.GTE,
    exp.LT,
    exp.LTE,
    exp.Add,
    exp.Sub,
    exp.Mul,
    exp.Div,
)


def _check_having(e: exp.Expression, outputs: list[OutputColumn]) -> None:
    """Refuse (before anything runs) a HAVING condition :func:`having_mask` cannot evaluate
    on the released columns."""
    if isinstance(e, (exp.Paren, exp.Not, exp.Neg)):
        _check_having(e.this, outputs)
    elif isinstance(e, _HAVING_OPS):
        _check_having(e.this, outputs)
        _check_having(e.expression, outputs)
    elif isinstance(e, exp.Between):
        for part in (e.this, e.args["low"], e.args["high"]):
            _check_having(part, outputs)
    elif isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
        _check_having(e.this, outputs)
    elif isinstance(e, (exp.Literal, exp.Boolean, exp.Null)):
        _literal_value(e, "HAVING")
    elif isinstance(e, exp.In) and e.args.get("query") is None:
        _check_having(e.this, outputs)
        for v in e.expressions:
            _literal_value(v, "HAVING")
    elif isinstance(e, (exp.Column, exp.AggFunc, exp.WithinGroup)):
        _match_output(e, outputs, "HAVING")
    else:
        raise SqlError(
            "HAVING",
            f"{e.sql()!r} is not supported in HAVING (comparisons, "
            "AND/OR/NOT, arithmetic and IN lists over released columns)",
        )


_ORDERING = (exp.GT, exp.GTE, exp.LT, exp.LTE)
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div)


def _having_kind(e: exp.Expression, outputs: list[OutputColumn], kinds: dict[str, str]) -> str:
    """The kind of value ``e`` yields on the released rows (``num``, ``text``, ``bool``,
    ``null``, ``any``), refusing operands :func:`having_mask` could not combine.

    Decided by the schema and the query text only, before anything is charged: arithmetic and
    ordering comparisons take numbers on both sides (a text, NULL or unknown-typed operand
    would raise inside pandas after the release); a quantile over several levels is several
    columns and cannot be compared at all. Equality, ``IN``, ``IS NULL`` and boolean
    connectives never raise on any operand.
    """

    def sub(x: exp.Expression) -> str:
        return _having_kind(x, outputs, kinds)

    def need_num(x: exp.Expression, what: str) -> None:
        k = sub(x)
        if k != "num":
            raise SqlError(
                "HAVING", f"{x.sql()!r} is not a number ({what} needs numbers on both sides)"
            )

    if isinstance(e, exp.Paren):
        return sub(e.this)
    if isinstance(e, (exp.And, exp.Or)):
        sub(e.this)
        sub(e.expression)
        return "bool"
    if isinstance(e, exp.Not):
        sub(e.this)
        return "bool"
    if isinstance(e, exp.Neg):
        need_num(e.this, "negation")
        return "num"
    if isinstance(e, _ARITHMETIC):
        need_num(e.this, "arithmetic")
        need_num(e.expression, "arithmetic")
        return "num"
    if isinstance(e, _ORDERING):
        need_num(e.this, "an ordering comparison")
        need_num(e.expression, "an ordering comparison")
        return "bool"
    if isinstance(e, exp.Between):
        for part in (e.this, e.args["low"], e.args["high"]):
            need_num(part, "BETWEEN")
        return "bool"
    if isinstance(e, (exp.EQ, exp.NEQ)):
        sub(e.this)
        sub(e.expression)
        return "bool"
    if isinstance(e, (exp.Is, exp.In)):
        sub(e.this)
        return "bool"
    if isinstance(e, exp.Boolean):
        return "bool"
    if isinstance(e, exp.Null):
        return "null"
    if isinstance(e, exp.Literal):
        if e.is_string:
            return "text"
        v = _literal_value(e, "HAVING")
        if isinstance(v, int) and abs(v) > sys.float_info.max:  # would overflow on comparison
            raise SqlError("HAVING", f"{e.sql()!r} is too large a number: write it as a float")
        return "num"
    name = _match_output(e, outputs, "HAVING")
    kind = kinds.get(name, "any")
    if kind == "list":
        raise SqlError(
            "HAVING",
            f"{name!r} releases several quantiles (one column per level) and cannot be compared",
        )
    return kind


def having_mask(cond: exp.Expression, frame: Any, outputs: list[OutputColumn]) -> Any:
    """Evaluate a HAVING condition on the released (noisy) frame: a boolean Series.

    Post-processing only: columns are released values; a comparison with a missing value is
    false (SQL's NULL semantics for filters).
    """
    import numpy as np
    import pandas as pd

    def ev(e: exp.Expression) -> Any:
        if isinstance(e, exp.Paren):
            return ev(e.this)
        if isinstance(e, exp.And):
            return _b(ev(e.this)) & _b(ev(e.expression))
        if isinstance(e, exp.Or):
            return _b(ev(e.this)) | _b(ev(e.expression))
        if isinstance(e, exp.Not):
            return ~_b(ev(e.this))
        ops: dict[type, Callable[[Any, Any], Any]] = {
            exp.EQ: lambda a, b: a == b,
            exp.NEQ: lambda a, b: a != b,
            exp.GT: lambda a, b: a > b,
            exp.GTE: lambda a, b: a >= b,
            exp.LT: lambda a, b: a < b,
            exp.LTE: lambda a, b: a <= b,
            exp.Add: lambda a, b: a + b,
            exp.Sub: lambda a, b: a - b,
            exp.Mul: lambda a, b: a * b,
            exp.Div: lambda a, b: a / b,
        }
        op = ops.get(type(e))
        if op is not None:
            a, b = ev(e.this), ev(e.expression)
            if isinstance(e, (exp.Add, exp.Sub, exp.Mul, exp.Div)):
                a, b = _floats(a), _floats(b)  # Python integers would raise on x / 0
            with np.errstate(all="ignore"):
                out = op(a, b)
            if isinstance(e, exp.Div):  # SQL: x / 0 is NULL, never an error after the charge
                out = np.where(b == 0, np.nan, out)
            return out
        if isinstance(e, exp.Between):
            x = ev(e.this)
            return _b(x >= ev(e.args["low"])) & _b(x <= ev(e.args["high"]))
        if isinstance(e, exp.Is) and isinstance(e.expression, exp.Null):
            return frame_col_isna(ev(e.this))
        if isinstance(e, exp.Neg):
            return -ev(e.this)
        if isinstance(e, (exp.Literal, exp.Boolean, exp.Null)):
            return _literal_value(e, "HAVING")
        if isinstance(e, exp.In) and e.args.get("query") is None:
            x = ev(e.this)
            vals = [_literal_value(v, "HAVING") for v in e.expressions]
            return pd.Series(x).isin(vals).to_numpy() if not np.isscalar(x) else x in vals
        name = _match_output(e, outputs, "HAVING")
        return frame[name].to_numpy()

    def frame_col_isna(x: Any) -> Any:
        return pd.isna(x)

    def _floats(x: Any) -> Any:
        """Numbers as float64 (a missing value as NaN), so arithmetic cannot raise."""
        if np.ndim(x) == 0:
            try:
                return np.float64(np.nan if x is None or x is pd.NA else x)
            except (TypeError, ValueError, OverflowError):
                return np.float64(np.nan)
        return pd.to_numeric(pd.Series(x, dtype=object), errors="coerce").to_numpy(dtype=np.float64)

    def _truth(v: Any) -> bool:
        if v is None or v is pd.NA or (isinstance(v, float) and v != v):
            return False  # a comparison with a missing value (a NULL key) is not true
        return bool(v)

    def _b(x: Any) -> Any:
        arr = np.asarray(x, dtype=object)
        if arr.shape:
            return np.array([_truth(v) for v in arr], dtype=bool)
        return np.bool_(_truth(arr.item()))

    res = _b(ev(cond))
    if np.ndim(res) == 0:
        return np.full(len(frame), bool(res))
    return res


def _refuse_other_rows(e: exp.Expression, clause: str) -> None:
    """Refuse a row expression that could read other rows: a subquery, a window function or an
    aggregate anywhere inside it (a row's value must depend on that row alone)."""
    for node in e.walk():
        if isinstance(node, (exp.Subquery, exp.Select)) or (
            isinstance(node, exp.In) and node.args.get("query") is not None
        ):
            raise SqlError(
                clause,
                "a subquery inside an expression is not supported "
                "(it could read other rows or smuggle an aggregate in)",
            )
        if isinstance(node, exp.Window):
            raise SqlError(
                clause,
                f"window function {node.sql()!r}: a row's value would "
                "depend on other people's rows before the private aggregate",
            )
        if isinstance(node, exp.AggFunc):
            raise SqlError(clause, f"aggregate {node.sql()!r} is not allowed here")
