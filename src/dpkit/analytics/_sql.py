"""Allow-listed public row predicates (``Query.where("age >= 18")``).

A predicate is parsed with sqlglot and accepted only if every node of its syntax tree is a
row-level construct from a short allow-list: column references (unqualified), literals,
comparisons, ``AND``/``OR``/``NOT``, ``IN`` over a list of literals, ``BETWEEN``, ``IS [NOT]
NULL``, ``LIKE``, ``+``/``-``/``*`` and a few scalar functions that cannot look at other rows.
Aggregates, window functions, subqueries, casts that can fail, division, stars, parameters,
several statements and every other function name are refused with a
:class:`~dpkit.errors.DPKitError` naming the construct. The compiler never pastes the analyst's
text into SQL: it re-generates the statement from the validated tree, so quoting tricks in the
text cannot reach the engine.

Why no division and no failing cast: an engine raises on ``x // 0`` or ``CAST('abc' AS INT)``
for some rows only, which would turn a value in the data into an exception (a data-dependent
side channel). The allow-list cannot rule out every such cast: the engine adds implicit casts
of its own when a comparison mixes types (``s = 1`` on a text column casts every ``s`` to an
integer; ``n = 'abc'`` on an integer column casts the literal), and arithmetic may overflow.
So the compiler evaluates EVERY predicate under the engine's "error becomes NULL" wrapper
(``TRY`` in DuckDB), whatever ``needs_try`` says, and a NULL predicate drops the row: a row
whose value cannot be compared simply fails the predicate. ``needs_try`` only records that the
tree holds arithmetic or a function call.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from dpkit.errors import DPKitError, PredicateError

if TYPE_CHECKING:
    from sqlglot import exp

# sqlglot (about 0.05 s to import) is imported by the functions that parse or walk a predicate,
# so a query without a text predicate, and the quoting helpers below, never load it.

__all__ = [
    "PredicateError",
    "ValidPredicate",
    "parse_predicate",
    "quote_ident",
    "sql_literal",
    "text_comparison_refusal",
]


# Functions a predicate may call: scalar, total on their domain (no error for any row value
# once the binder accepted the types), and unable to read other rows.
SAFE_FUNCTIONS = frozenset(
    {
        "abs",
        "lower",
        "upper",
        "length",
        "coalesce",
        "isnan",
        "isinf",
        "isfinite",
        "starts_with",
        "ends_with",
        "contains",
        "trim",
        "ltrim",
        "rtrim",
    }
)


@functools.cache
def _node_kinds() -> tuple[tuple[type[exp.Expression], ...], tuple[type[exp.Expression], ...]]:
    """The allow-listed node types of a predicate's tree, and those of them that may raise for
    some values (overflow: the compiler wraps the predicate in TRY)."""
    from sqlglot import exp

    structural = (
        exp.Column,
        exp.Identifier,
        exp.Literal,
        exp.Boolean,
        exp.Null,
        exp.Paren,
        exp.And,
        exp.Or,
        exp.Not,
        exp.EQ,
        exp.NEQ,
        exp.GT,
        exp.GTE,
        exp.LT,
        exp.LTE,
        exp.NullSafeEQ,
        exp.NullSafeNEQ,
        exp.Is,
        exp.In,
        exp.Between,
        exp.Like,
        exp.ILike,
        exp.Add,
        exp.Sub,
        exp.Mul,
        exp.Neg,
        exp.TryCast,
        exp.DataType,
    )
    return structural, (exp.Add, exp.Sub, exp.Mul)


@dataclass(frozen=True)
class ValidPredicate:
    """A validated predicate: its syntax tree, the columns it reads, and whether it needs TRY."""

    tree: exp.Expression
    columns: tuple[str, ...]
    needs_try: bool


# sqlglot parses some allowed functions into nodes whose generic name is spelled otherwise
# (``isnan`` -> ``IS_NAN``): the allow-list is in the analyst's spelling.
_NODE_NAMES = {"IsNan": "isnan", "IsInf": "isinf"}


def _function_name(node: exp.Func) -> str:
    from sqlglot import exp

    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return _NODE_NAMES.get(type(node).__name__, node.sql_name().lower())


def parse_predicate(text: str, *, dialect: str = "duckdb") -> ValidPredicate:
    """Parse ``text`` as one boolean row expression and check it against the allow-list."""
    if not isinstance(text, str):
        raise PredicateError(f"a predicate must be a string, got {type(text).__name__}")
    if not text.strip():
        raise PredicateError("a predicate must not be empty")
    if "\x00" in text:
        raise PredicateError("a predicate must not contain NUL characters")
    import sqlglot
    from sqlglot import exp

    structural, may_raise = _node_kinds()
    try:
        statements = sqlglot.parse(text, read=dialect)
    except sqlglot.errors.SqlglotError as exc:
        raise PredicateError(f"cannot parse the predicate {text!r}: {exc}") from None
    if len(statements) != 1 or statements[0] is None:
        raise PredicateError(f"a predicate must be exactly one expression, got {text!r}")
    tree: exp.Expression = statements[0]  # type: ignore[assignment]
    columns: list[str] = []
    needs_try = False
    for node in tree.walk():
        if isinstance(node, exp.Column):
            if node.table or node.args.get("db") or node.args.get("catalog"):
                raise PredicateError(f"qualified column names are not allowed: {node.sql()!r}")
            if isinstance(node.this, exp.Star):
                raise PredicateError("'*' is not allowed in a predicate")
            if node.name not in columns:
                columns.append(node.name)
            continue
        if isinstance(node, exp.In):
            if node.args.get("query") is not None or node.args.get("unnest") is not None:
                raise PredicateError("IN over a subquery is not allowed")
            if not all(
                isinstance(e, (exp.Literal, exp.Null, exp.Boolean, exp.Neg))
                for e in node.expressions
            ):
                raise PredicateError(f"IN takes a list of literals only: {node.sql()!r}")
        if isinstance(node, (exp.Like, exp.ILike)) and not (
            isinstance(node.expression, exp.Null)
            or (isinstance(node.expression, exp.Literal) and node.expression.is_string)
        ):
            # A pattern read from a column is compiled row by row, and Spark raises on a
            # malformed one (a trailing escape) whatever the ANSI mode: an error that would
            # depend on a private value. Patterns are string literals, checked before the charge.
            raise PredicateError(f"LIKE takes a string literal as its pattern: {node.sql()!r}")
        if isinstance(node, (exp.AggFunc, exp.Window)):
            raise PredicateError(f"aggregates and window functions are not allowed: {node.sql()!r}")
        if isinstance(node, exp.Func) and not isinstance(node, structural):
            name = _function_name(node)
            needs_try = True
            if name not in SAFE_FUNCTIONS:
                raise PredicateError(
                    f"function {name!r} is not allowed in a predicate (allowed: "
                    f"{', '.join(sorted(SAFE_FUNCTIONS))})"
                )
        elif not isinstance(node, structural):
            raise PredicateError(
                f"{type(node).__name__} is not allowed in a predicate: {node.sql()!r}"
            )
        if isinstance(node, may_raise) or (
            isinstance(node, exp.Neg) and not isinstance(node.this, exp.Literal)
        ):
            needs_try = True
        # Comments are dropped: the engine sees only the regenerated tree.
        node.comments = None
    return ValidPredicate(tree=tree, columns=tuple(columns), needs_try=needs_try)


def _is_number(e: exp.Expression) -> bool:
    from sqlglot import exp

    if isinstance(e, exp.Paren):
        return _is_number(e.this)
    if isinstance(e, exp.Neg):
        return _is_number(e.this)
    return isinstance(e, exp.Literal) and not e.is_string


def text_compared_with_number(
    vp: ValidPredicate, is_text: Callable[[str], bool]
) -> tuple[str, str] | None:
    """The first ``(column, number)`` where a text column (``is_text``) is compared with a
    number literal (``=``, ``<>``, ``<``, ``<=``, ``>``, ``>=``, ``BETWEEN``, ``IN``), which
    no engine binds without a cast; ``None`` if there is none. Reads the tree only."""
    from sqlglot import exp

    for node in vp.tree.walk():
        pairs: list[tuple[exp.Expression, exp.Expression]] = []
        if isinstance(
            node,
            (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.NullSafeNEQ),
        ):
            pairs = [(node.this, node.expression), (node.expression, node.this)]
        elif isinstance(node, exp.Between):
            pairs = [(node.this, node.args["low"]), (node.this, node.args["high"])]
        elif isinstance(node, exp.In):
            pairs = [(node.this, e) for e in node.expressions]
        for col, other in pairs:
            if isinstance(col, exp.Column) and is_text(col.name) and _is_number(other):
                return col.name, other.sql()
    return None


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier (embedded quotes doubled)."""
    return '"' + name.replace('"', '""') + '"'


def sql_literal(v: Any) -> str | None:
    """A SQL literal for a public key value, or None if it has no safe literal form."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else None
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return None


def text_comparison_refusal(
    predicates: Iterable[str], is_text: Callable[[str], bool], *, csv: bool = False
) -> str | None:
    """The refusal, with the cast to write, of the first predicate that compares a text column
    with a number (the usual reason an engine refuses to bind a filter: ``name > 5`` for a text
    ``name``, every column of a CSV file, ``csv``); None if no predicate does. The caller
    raises it as a :class:`~dpkit.errors.PrivacyParameterError`."""
    for text in predicates:
        try:
            vp = parse_predicate(text)
        except DPKitError:
            continue
        hit = text_compared_with_number(vp, is_text)
        if hit is None:
            continue
        col, number = hit
        ident = col if col.isidentifier() else quote_ident(col)
        why = " (every column of a CSV file is read as text)" if csv else ""
        return (
            f"column {col!r} is text{why}, so it cannot be compared with the number "
            f"{number}: read it as a number with TRY_CAST({ident} AS DOUBLE) (text that is "
            f"not a number becomes NULL and its row does not match), e.g. "
            f"where('TRY_CAST({ident} AS DOUBLE) > {number}'), or compare it with text, "
            f"e.g. {ident} = '{number}' (nothing was charged)"
        )
    return None
