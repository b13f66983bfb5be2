"""The statement: :func:`compile_plan` runs the stages in order and assembles their CTEs.

The stages, each in its own module: the columns the plan reads (:mod:`.columns`), public joins
and buckets (:mod:`.extras`), the source read and normalized (:mod:`.source`, :mod:`.values`),
the row conditions (:mod:`.predicates`), the row hashes and the bounding ranks
(:mod:`.bounding`, :mod:`.hashing`), the measures (:mod:`.measures`), and here the final
``GROUP BY`` and the form in which group keys leave the statement (:mod:`.codecs`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from dpkit._numeric.validation import check_integer
from dpkit.analytics._column_types import key_codec
from dpkit.analytics._plan import Plan
from dpkit.analytics.engines._compiler.bounding import (
    MAX_ROWS_PER_PARTITION,
    rank_stage,
    row_stage,
)
from dpkit.analytics.engines._compiler.codecs import sent_key
from dpkit.analytics.engines._compiler.columns import PlanColumns, Reads, plan_columns
from dpkit.analytics.engines._compiler.compiled import CompiledQuery, OutputMeasure
from dpkit.analytics.engines._compiler.contributions import unit_histograms
from dpkit.analytics.engines._compiler.extras import Extras
from dpkit.analytics.engines._compiler.measures import (
    MeasureSteps,
    grouping_sets,
    measure_sql,
    numeric_inputs,
)
from dpkit.analytics.engines._compiler.nodes import P, Step, aliased, colref, ident, int_lit
from dpkit.analytics.engines._compiler.predicates import safe_predicate
from dpkit.analytics.engines._compiler.profiles import DUCKDB, DialectProfile
from dpkit.analytics.engines._compiler.source import source_sql
from dpkit.analytics.engines._compiler.values import normalized
from dpkit.errors import PlanError

__all__ = ["compile_plan"]


def compile_plan(
    plan: Plan,
    schema: Mapping[str, str],
    profile: DialectProfile = DUCKDB,
    *,
    registered: frozenset[str] = frozenset(),
    join_schemas: Sequence[Mapping[str, str]] = (),
) -> CompiledQuery:
    """One SQL statement computing ``plan`` on a source with column types ``schema``.

    ``schema`` maps column name -> engine type name (public metadata: a CSV is read as text
    whatever it holds, so no type depends on the data). Every check here depends on the plan
    and the schema only; nothing can fail later because of a value in the data.
    ``join_schemas[i]`` is the schema of ``plan.joins[i].source`` (public tables).
    """
    max_p, max_r, salt = _limits(plan)
    extra = Extras.of(plan, schema, join_schemas)
    reads = Reads({**schema, **extra.schema})
    families = reads.families
    cols = plan_columns(plan, reads)
    # A predicate reads normalized columns too (NaN is NULL there, so `x > 5` is not true
    # for NaN although NaN sorts above every number in DuckDB).
    predicates = [
        safe_predicate(f.predicate, lambda n: reads.use(n, "predicate column"), profile)
        for f in plan.filters
    ]
    # the columns the bucket conditions read are normalized in src too
    buckets = (
        extra.bucket_sql(lambda n: reads.use(n, "bucket condition column"), profile)
        if extra.buckets
        else []
    )
    buckets += extra.derived_sql(lambda n: reads.use(n, "expression column"), profile)
    src = _source_stage(plan, schema, reads, extra, buckets, profile, registered)
    src, rows_q = row_stage(src, cols, reads.schema, families, salt, profile, predicates)
    own = cols.unit is not None and any(m.keep is not None for m in plan.aggregate.measures)
    ranked_q: exp.Select | None
    kept: exp.Expression
    if plan.aggregate.unit_grid and not own:
        # the per-unit histograms of the contribution plan: each unit lands in exactly one
        # bin of each (the last one open above), whatever its rows, so ranking the rows to
        # bound them at the engine's limits changes nothing the plan releases: none is done
        ranked_q, kept = None, exp.Boolean(this=True)
    else:
        ranked_q, kept = rank_stage(cols, max_p, max_r)
    inputs, step0, xcol = numeric_inputs(cols.values, reads.schema, families, profile)
    kept_q = _kept_stage(cols, ranked_q, kept, inputs, own)
    pipe = MeasureSteps(profile, step0)
    outputs, measures = measure_sql(
        plan.aggregate.measures, reads.schema, families, xcol, pipe, _own_bounds if own else None
    )

    ctes: list[tuple[str, exp.Expression]] = [(P + "src", src), (P + "rows", rows_q)]
    if ranked_q is not None:
        ctes.append((P + "ranked", ranked_q))
    ctes.append((P + "s0", kept_q))
    last = _step_ctes(pipe.steps, ctes)
    final = _grouped(measures, last, cols.key_out, pipe.cell_sets)
    codecs: tuple[str, ...] = ()
    key_out = list(cols.key_out)
    if plan.aggregate.unit_grid:
        if not key_out or len(outputs) != 1 or outputs[0].kind != "rows" or pipe.cell_sets:
            raise PlanError("unit_grid needs the unit as first key and one rows measure")
        final, outputs = unit_histograms(
            final, key_out[0], outputs[0].column, plan.aggregate.unit_grid, ctes
        )
        key_out = []
    elif profile.exact_keys and cols.key_out:
        codecs = tuple(key_codec(reads.schema[k]) for k in cols.keys)
        final = _keys_sent(final, codecs, cols.key_out, outputs, pipe.cell_sets, ctes, profile)
    for name, q in ctes:
        final = final.with_(name, as_=q, copy=False)  # each built here, used once
    sql = final.sql(dialect=profile.dialect, comments=False)
    cell_sets = pipe.cell_sets
    return CompiledQuery(
        sql=sql,
        key_columns=tuple(key_out),
        measures=tuple(outputs),
        global_group=not key_out,
        cell_columns=tuple(cell_sets),
        cell_count=P + "cell" if cell_sets else None,
        has_filters=bool(predicates) or bool(buckets),
        key_codecs=codecs,
    )


def _limits(plan: Plan) -> tuple[int, int, int]:
    """The plan's bounding limits and its salt (as an unsigned 64-bit integer), checked, and
    its measures' names (at least one measure, distinct non-empty names)."""
    bound, agg = plan.bound, plan.aggregate
    max_p = check_integer(bound.max_partitions, name="max_partitions", minimum=1)
    max_r = check_integer(
        bound.max_rows_per_partition,
        name="max_rows_per_partition",
        minimum=1,
        maximum=MAX_ROWS_PER_PARTITION,
    )
    salt = check_integer(bound.salt, name="salt", minimum=-(2**63), maximum=2**64 - 1) % 2**64
    if not agg.measures:
        raise PlanError("an aggregate needs at least one measure")
    for m in agg.measures:
        if m.keep is not None:
            mp, mr = m.keep
            check_integer(mp, name=f"{m.name}: keep's max_partitions", minimum=1, maximum=max_p)
            check_integer(
                mr, name=f"{m.name}: keep's max_rows_per_partition", minimum=1, maximum=max_r
            )
    names = [m.name for m in agg.measures]
    if len(set(names)) != len(names) or not all(isinstance(n, str) and n for n in names):
        raise PlanError(f"measure names must be distinct non-empty strings, got {names}")
    return max_p, max_r, salt


def _source_stage(
    plan: Plan,
    base_schema: Mapping[str, str],
    reads: Reads,
    extra: Extras,
    buckets: Sequence[exp.Expression],
    profile: DialectProfile,
    registered: frozenset[str],
) -> exp.Select:
    """``src``: each column the statement reads, normalized (:func:`.values.normalized`), from
    the source joined with the public tables, with the bucket columns on top."""
    families = reads.families
    base_used = [c for c in reads.used if c not in extra.computed]
    source = source_sql(
        plan.source, registered=registered, dialect=profile.dialect, csv_columns=tuple(base_schema)
    )
    if base_used:
        src = exp.select(
            *[
                aliased(
                    normalized(extra.origin.get(c, c), families[c], profile, reads.schema[c]),
                    ident(c),
                )
                for c in base_used
            ]
        ).from_(source)
    else:  # only rows/units measures, no unit and no keys
        src = exp.select(aliased(exp.Literal.number(1), ident(P + "one"))).from_(source)
    if plan.joins:
        src = extra.attach_joins(src, registered, profile)
    if buckets:
        src = exp.select(exp.Star(), *buckets).from_(
            exp.Subquery(this=src, alias=exp.TableAlias(this=ident(P + "b")))
        )
    return src


def _kept_stage(
    cols: PlanColumns,
    ranked_q: exp.Select | None,
    kept: exp.Expression,
    inputs: Sequence[exp.Expression],
    own: bool = False,
) -> exp.Select:
    """``s0``: the kept rows, with their keys, whether the row is its (unit, group) pair's
    first (``units`` counts those, which counts a NULL unit as one unit without
    ``COUNT(DISTINCT)``), and the measured columns with their numeric readings. ``own``
    (some measure has its own bounds): also the group's rank ``g`` and the row's rank in its
    group ``rr = rn - gr``, which :func:`_own_bounds` reads."""
    first = (
        exp.EQ(this=colref(P + "rn"), expression=colref(P + "gr"))
        if cols.unit is not None and ranked_q is not None
        else exp.Boolean(this=True)
    )
    items: list[exp.Expression] = [colref(k) for k in cols.key_out]
    items.append(aliased(first, ident(P + "first")))
    if own:
        items.append(colref(P + "g"))
        items.append(
            aliased(exp.Sub(this=colref(P + "rn"), expression=colref(P + "gr")), ident(P + "rr"))
        )
    items += inputs
    kept_q = exp.select(*items).from_(P + "rows" if ranked_q is None else P + "ranked")
    if ranked_q is not None:
        kept_q = kept_q.where(kept)
    return kept_q


def _own_bounds(keep: tuple[int, int]) -> exp.Expression:
    """``g <= p AND rr < r``: the row is kept by a plan bounded at ``keep = (p, r)`` (same
    salt, so the same ranks; see :class:`~dpkit.analytics._plan.Measure`)."""
    p, r = keep
    return exp.and_(  # type: ignore[no-any-return,return-value,unused-ignore]
        exp.LTE(this=colref(P + "g"), expression=int_lit(p)),
        exp.LT(this=colref(P + "rr"), expression=int_lit(r)),
    )


def _step_ctes(steps: Sequence[Step], ctes: list[tuple[str, exp.Expression]]) -> str:
    """One CTE ``s<n>`` per non-empty step of the measures, each over the previous one,
    appended to ``ctes``; returns the name of the last."""
    prev = P + "s0"
    for n, step in enumerate(steps, start=1):
        if not step:
            continue
        name = f"{P}s{n}"
        ctes.append(
            (name, exp.select(exp.Star(), *[aliased(e, ident(a)) for a, e in step]).from_(prev))
        )
        prev = name
    return prev


def _grouped(
    measures: list[exp.Expression], source: str, key_out: list[str], cell_sets: list[str]
) -> exp.Select:
    """The keys and the measures, grouped by the keys (or by grouping sets, see
    :func:`.measures.grouping_sets`)."""
    items: list[exp.Expression] = [*[colref(k) for k in key_out], *measures]
    if cell_sets:
        return grouping_sets(items, source, key_out, cell_sets)
    final = exp.select(*items).from_(source)
    if key_out:
        final = final.group_by(*[colref(k) for k in key_out])
    return final


def _keys_sent(
    final: exp.Select,
    codecs: Sequence[str],
    key_out: list[str],
    outputs: Sequence[OutputMeasure],
    cell_sets: list[str],
    ctes: list[tuple[str, exp.Expression]],
    profile: DialectProfile,
) -> exp.Select:
    """For a profile with ``exact_keys``: ``final`` as the CTE ``out``, read back with each
    key in the form its codec names (:func:`.codecs.sent_key`); unchanged when every key is
    sent as it is."""
    if all(c == "plain" for c in codecs):
        return final
    out_cols = [
        *key_out,
        *[o.column for o in outputs],
        *cell_sets,
        *([P + "cell"] if cell_sets else []),
    ]
    ctes.append((P + "out", final))
    sent = {k: sent_key(colref(k), c, profile) for k, c in zip(key_out, codecs, strict=True)}
    return exp.select(
        *[aliased(sent[c], ident(c)) if c in sent else colref(c) for c in out_cols]
    ).from_(P + "out")
