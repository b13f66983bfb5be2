"""The analyst's row conditions (filters and bucket cases) in a statement, made total.

A condition enters only as a validated tree (:func:`dpkit.analytics._sql.parse_predicate`)
whose columns are renamed to the statement's normalized columns, and leaves as an expression
that is TRUE or FALSE for every row and never raises.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from sqlglot import exp

from dpkit.analytics._sql import parse_predicate
from dpkit.analytics.engines._compiler.nodes import case_when, cast_to, func, ident, is_null
from dpkit.analytics.engines._compiler.profiles import DialectProfile

__all__ = ["safe_predicate"]


def safe_predicate(
    text: str, column: Callable[[str], str], profile: DialectProfile
) -> exp.Expression:
    """A row condition (a ``where`` filter or a bucket case) as an expression that is TRUE,
    or FALSE for every row where it is not true, and never raises.

    ``column`` maps each column the condition reads to the normalized column of the statement.
    Every condition runs under the error-to-NULL wrapper, not only those with arithmetic: the
    engine inserts implicit casts of its own (``s = 1`` on a text column casts every ``s`` to
    an integer), and such a cast fails on some values only. Engines without a generic wrapper
    (Spark) get :func:`_checked_predicate` and run the statement with ANSI mode off
    (``CompiledQuery.has_filters``). ``COALESCE(cond, FALSE)`` makes NULL a failed test."""
    vp = parse_predicate(text, dialect=profile.predicate_dialect)
    tree = vp.tree.copy()
    for node in tree.find_all(exp.Column):
        node.set("this", ident(column(node.name)))
    if profile.dialect != "duckdb":
        tree = _without_infinity_tests(tree, profile)
    if profile.try_wrapper is not None:
        tree = func(profile.try_wrapper, tree)
    else:
        tree = _checked_predicate(tree)
    return exp.Coalesce(this=tree, expressions=[exp.Boolean(this=False)])


_CHECKED: dict[type[exp.Expression], str] = {
    exp.Add: "try_add",
    exp.Sub: "try_subtract",
    exp.Mul: "try_multiply",
}


def _without_infinity_tests(tree: exp.Expression, profile: DialectProfile) -> exp.Expression:
    """DuckDB's ``isinf(x)`` and ``isfinite(x)`` as comparisons, for engines without them
    (Spark): ``isinf(x)`` is ``x = inf OR x = -inf`` and ``isfinite(x)`` is
    ``x > -inf AND x < inf``. Both are NULL for NULL and false for NaN (NaN is neither equal
    to nor below infinity in Spark), as in DuckDB."""

    def inf(sign: str) -> exp.Expression:
        return cast_to(exp.Literal.string(sign + "Infinity"), profile.float_type)

    def rewrite(node: exp.Expression) -> exp.Expression:
        name = node.name.lower() if isinstance(node, exp.Anonymous) else ""
        if isinstance(node, exp.IsInf) or (name == "isinf" and len(node.expressions) == 1):
            x = node.this if isinstance(node, exp.IsInf) else node.expressions[0]
            return exp.Paren(
                this=exp.or_(
                    exp.EQ(this=x.copy(), expression=inf("")),
                    exp.EQ(this=x.copy(), expression=inf("-")),
                )
            )
        if name == "isfinite" and len(node.expressions) == 1:
            x = node.expressions[0]
            return exp.Paren(
                this=exp.and_(
                    exp.GT(this=x.copy(), expression=inf("-")),
                    exp.LT(this=x.copy(), expression=inf("")),
                )
            )
        return node

    return tree.transform(rewrite)


def _checked_predicate(tree: exp.Expression) -> exp.Expression:
    """A predicate with DuckDB's ``TRY`` semantics for engines without a generic ``TRY``.

    Every ``+``/``-``/``*`` (and unary minus) becomes ``try_add``/``try_subtract``/
    ``try_multiply``, which give NULL instead of raising or wrapping around on overflow; the
    whole predicate is NULL (the row fails it) when any of them overflowed, i.e. returned NULL
    from two non-NULL arguments, as ``TRY(p)`` is NULL when any part of ``p`` raises. (Implicit
    casts that fail are NULL in the engine's non-ANSI mode, which the Spark engine sets for
    statements with predicates.)
    """
    flags: list[exp.Expression] = []

    def rewrite(node: exp.Expression) -> exp.Expression:
        for key, value in list(node.args.items()):
            if isinstance(value, exp.Expression):
                node.set(key, rewrite(value))
            elif isinstance(value, list):
                node.set(key, [rewrite(v) if isinstance(v, exp.Expression) else v for v in value])
        if isinstance(node, exp.Neg) and not isinstance(node.this, exp.Literal):
            a: exp.Expression = exp.Literal.number(0)
            b: exp.Expression = node.this
            fn = "try_subtract"
        elif type(node) in _CHECKED:
            a, b = node.this, node.expression
            fn = _CHECKED[type(node)]
        else:
            return node
        out = func(fn, a, b)
        flags.append(
            cast(
                exp.Expression,
                exp.and_(
                    is_null(out.copy()),
                    exp.Not(this=is_null(a.copy())),
                    exp.Not(this=is_null(b.copy())),
                ),
            )
        )
        return out

    checked = rewrite(tree)
    if not flags:
        return checked
    return case_when(cast(exp.Expression, exp.or_(*flags)), exp.Null(), checked)
