"""Contribution bounding in the statement: the row stage (hashes of each row) and the rank
stage (each unit's groups and rows ranked in one window sort).

Inside one unit the rows are sorted by (group hash, key, row hash, row content); ``g`` is the
rank of the row's group among the unit's groups and ``rn - gr`` the rank of the row inside its
group (``gr`` is the position of the group's first row), so one sort of each unit's rows does
both limits: the three window functions share their partitioning and their order prefix, and
the engine evaluates them in one window operator. The row hash reads the columns the plan uses
(unit, keys, measure columns), which is the part of the row content the aggregates can see: two
rows equal there are interchangeable, so the result never depends on file order.

Without group keys (one global group, as in the planner's value histograms) ``hk = H(salt, u)``
is the same for all of a unit's rows, so ordering by it changes no rank: every row has ``gr =
g = 1`` and ``rn`` is its rank by ``(hr, row content)`` alone. The statement then computes only
that one window function over the shorter sort key, with ``gr`` and ``g`` the constant 1: the
same rows are kept, for the same salt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from dpkit.analytics._column_types import Family
from dpkit.analytics.engines._compiler.columns import PlanColumns
from dpkit.analytics.engines._compiler.hashing import salted_hash, staged, token_steps
from dpkit.analytics.engines._compiler.nodes import P, aliased, colref, ident, int_lit
from dpkit.analytics.engines._compiler.profiles import DialectProfile

__all__ = ["MAX_ROWS_PER_PARTITION", "rank_stage", "row_stage"]

MAX_ROWS_PER_PARTITION = 2**31  # keeps rn - gr arithmetic and sums far from any limit


def row_stage(
    src: exp.Select,
    cols: PlanColumns,
    schema: Mapping[str, str],
    families: Mapping[str, Family],
    salt: int,
    profile: DialectProfile,
    predicates: Sequence[exp.Expression],
) -> tuple[exp.Select, exp.Select]:
    """``rows``: the rows that pass the predicates, with the keys as ``__dpk_k<i>``, the unit as
    ``__dpk_u`` and the salted hashes ``hk = H(salt, u, k)`` and ``hr = H(salt, u, k, v)``.

    With the md5 profile the hashes read each column's canonical token, computed once in
    projections over ``src`` (see :func:`.hashing.token_steps`): the returned ``src`` is then
    ``src`` with those projections on top."""
    unit, keys, value_cols = cols.unit, cols.keys, cols.values
    unit_e = colref(unit) if unit is not None else None
    key_e = [colref(k) for k in keys]
    value_e = [colref(c) for c in value_cols]
    row_items: list[exp.Expression] = [
        aliased(e, ident(a)) for e, a in zip(key_e, cols.key_out, strict=True)
    ]
    if unit is not None and unit_e is not None:
        row_items.append(aliased(unit_e.copy(), ident(P + "u")))
        hashed = [unit, *keys, *value_cols]
        if profile.hash == "md5":
            tok = [f"{P}tok{i}" for i in range(len(hashed))]
            src = staged(
                src,
                token_steps(
                    [(c, families[c], t) for c, t in zip(hashed, tok, strict=True)],
                    profile,
                    types=schema,
                ),
                P + "t",
            )
            parts: list[exp.Expression] = [colref(t) for t in tok]
        else:
            parts = [unit_e, *key_e, *value_e]
        row_items.append(
            aliased(salted_hash(salt, parts[: 1 + len(keys)], profile), ident(P + "hk"))
        )
        row_items.append(aliased(salted_hash(salt, parts, profile), ident(P + "hr")))
    # value columns are needed for the measures; readable under their own names
    row_items += [colref(c) for c in value_cols]
    if not row_items:  # no unit, no keys, no value column: only counts of rows
        row_items.append(aliased(exp.Literal.number(1), ident(P + "one")))
    rows_q = exp.select(*row_items).from_(P + "src")
    if predicates:
        rows_q = rows_q.where(exp.and_(*predicates))
    return src, rows_q


def rank_stage(
    cols: PlanColumns, max_partitions: int, max_rows_per_partition: int
) -> tuple[exp.Select | None, exp.Expression]:
    """``ranked``: ``rows`` with ``rn = ROW_NUMBER()``, ``gr = RANK()`` and ``g = DENSE_RANK()``
    over each unit's rows, and the condition that keeps a row (``g <= max_partitions AND
    rn - gr < max_rows_per_partition``). Without a unit each row is its own unit and every
    row is kept (both limits are at least 1): no ``ranked`` stage, the condition TRUE."""
    if cols.unit is None:
        return None, exp.Boolean(this=True)
    part = [colref(P + "u")]
    group_order = [colref(P + "hk"), *[colref(k) for k in cols.key_out]]
    row_order = [*group_order, colref(P + "hr"), *[colref(c) for c in cols.values]]

    def window(fn: exp.Expression, order: Sequence[exp.Expression]) -> exp.Window:
        return exp.Window(
            this=fn,
            partition_by=[p.copy() for p in part],
            order=exp.Order(
                expressions=[exp.Ordered(this=o.copy(), nulls_first=False) for o in order]
            ),
        )

    if cols.key_out:
        ranks = [
            aliased(window(exp.Anonymous(this="rank"), group_order), ident(P + "gr")),
            aliased(window(exp.Anonymous(this="dense_rank"), group_order), ident(P + "g")),
        ]
    else:  # one group per unit: hk is constant in the partition, so gr = g = 1
        row_order = row_order[1:]
        ranks = [aliased(int_lit(1), ident(P + "gr")), aliased(int_lit(1), ident(P + "g"))]
    ranked_q = exp.select(
        exp.Star(), aliased(window(exp.RowNumber(), row_order), ident(P + "rn")), *ranks
    ).from_(P + "rows")
    kept: exp.Expression = exp.and_(  # type: ignore[assignment]
        exp.LTE(this=colref(P + "g"), expression=int_lit(max_partitions)),
        exp.LT(
            this=exp.Sub(this=colref(P + "rn"), expression=colref(P + "gr")),
            expression=int_lit(max_rows_per_partition),
        ),
    )
    return ranked_q, kept
