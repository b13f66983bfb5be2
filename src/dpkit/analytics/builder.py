"""The query builder: ``session.query().where(...).group_by(...).bound(...).agg(...)``.

Every builder method returns a new immutable :class:`Query` and validates its arguments at once
(unknown columns, bad contribution bounds, bad keys) against the table's description
(:class:`~dpkit.analytics._table.TableDescription`) so that mistakes surface before anything is
charged. :meth:`Query.summarize` prices the query without touching data; :meth:`Query.prepare`
prices it and builds its plan; :meth:`Query.run` hands the prepared query to the session
(:meth:`~dpkit.analytics.Session.run`), which charges the budget with the query's whole cost and
only then executes and releases.

A query knows its session only through :class:`QueryHost` (the table, how the budget prices,
the source of randomness, public tables, and ``run``): this module never imports the session.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from dpkit._numeric.validation import check_integer, check_positive, check_probability
from dpkit.analytics._aggregates import Statistic, missing_bounds
from dpkit.analytics._column_types import temporal_codec
from dpkit.analytics._plan import (
    Aggregate,
    Bound,
    Bucket,
    Derived,
    EngineResult,
    Filter,
    Measure,
    Plan,
    PublicJoin,
    Source,
)
from dpkit.analytics._pricing import (
    AUTO_EDGES,
    SQ_CENTRE,
    Mode,
    Pricing,
    ZcdpShare,
    pool_split,
    price,
    resolve_auto,
)
from dpkit.analytics._release import (
    UNITS_MEASURE,
    assemble,
    check_output_columns,
    normalize_key,
)
from dpkit.analytics._report import summary_frame as _summary_frame
from dpkit.analytics._sql import quote_ident, sql_literal
from dpkit.analytics._table import TableDescription
from dpkit.analytics._topk import (
    TopK,
    check_score,
    check_top_k,
    price_top_k,
    release_top_k,
)
from dpkit.errors import PrivacyParameterError
from dpkit.noise import RandomSource, resolve_source

__all__ = ["PreparedQuery", "PublicTable", "Query", "QueryHost", "quote_ident", "sql_literal"]

_OUTPUTS = ("pandas", "polars", "arrow")
_SQL_SCALARS = (str, int, float, bool)


@dataclass(frozen=True)
class PublicTable:
    """A table declared public, as a query joins it: its source and its schema (column ->
    type name). Made by the host (:meth:`QueryHost.public_table`), which refuses the private
    table under any spelling it can detect."""

    source: Source
    schema: dict[str, str]


class _Executes(Protocol):
    def execute(self, plan: Plan) -> EngineResult: ...


class QueryHost(Protocol):
    """What a :class:`Query` needs of the session it is built on (a
    :class:`~dpkit.analytics.Session` is one)."""

    @property
    def table(self) -> TableDescription: ...

    @property
    def mode(self) -> Mode: ...

    @property
    def alpha(self) -> float: ...

    @property
    def source_of_randomness(self) -> RandomSource: ...

    @property
    def zcdp_share(self) -> ZcdpShare | None:
        """How the budget converts an ``(epsilon, delta)`` share to zCDP (None: defaults)."""
        ...

    def public_table(self, table: object) -> PublicTable:
        """The source and schema of a public table (the private table refused)."""
        ...

    def run(
        self,
        prepared: PreparedQuery,
        *,
        budget: Any = None,
        output: str = "pandas",
        metadata: dict[str, Any] | None = None,
    ) -> Any:
        """Validate, charge, execute and release ``prepared``."""
        ...


def _fresh_salt(source: RandomSource) -> int:
    """A secret salt for one release: 63 uniform bits from ``source``."""
    return int.from_bytes(source.bytes(8), "little") >> 1


@dataclass(frozen=True)
class PreparedQuery:
    """A priced query with its plan (fresh secret salt): everything except the data.

    :meth:`release_from` adds the noise to an engine result of :attr:`plan` and assembles the
    frame. It does not charge any budget: :meth:`~dpkit.analytics.Session.run` charges before
    calling it, and audits use it to re-run the release many times on one engine result.

    A query with ``bounds="auto"`` runs in two steps (:attr:`two_step`): :attr:`bounds_plan`
    computes the bin counts the bounds are estimated from, then :meth:`with_bounds` gives the
    release with the estimated bounds (and a fresh salt). Until then :attr:`plan` is the
    release's shape with placeholder bounds: checked before the charge (key types, value
    columns and filters do not depend on the bounds), never run.
    """

    pricing: Pricing
    plan: Plan
    group_by: tuple[str, ...]
    public_keys: list[tuple[Any, ...]] | None
    alpha: float
    bounds_plan: Plan | None = None
    _query: Query | None = field(default=None, repr=False, compare=False)
    #: A planned query (no ``.bound(...)``): the plan counting each unit's rows per group, and
    #: the step that noises those counts and chooses the bounds (see
    #: :class:`~dpkit.analytics._planner.ContributionStep`).
    contribution_plan: Plan | None = None
    contribution: Any = None

    @property
    def two_step(self) -> bool:
        """Whether the bounds of some statistic are estimated first (``bounds="auto"``)."""
        return self.bounds_plan is not None

    @property
    def planned(self) -> bool:
        """Whether the contribution bounds are planned privately first (no ``.bound(...)``)."""
        return self.contribution is not None

    def plan_contributions(
        self, result: EngineResult, *, source: RandomSource | None = None
    ) -> tuple[PreparedQuery, dict[str, Any]]:
        """The release of a planned query: the contribution bounds chosen from ``result`` (the
        engine result of :attr:`contribution_plan`, noised once by the step whose cost is part
        of the query's charge), and the query prepared with them at the release's share (a
        two-step query again if some bounds are ``"auto"``). Returns it with what was chosen.
        Every candidate was priced before the charge, so this raises nothing."""
        if self._query is None or self.contribution is None:
            raise PrivacyParameterError("plan_contributions() is for a planned query")
        step = self.contribution
        return self.prepare_release(step.choose(result, resolve_source(source)))

    def prepare_release(
        self, chosen: Mapping[str, object]
    ) -> tuple[PreparedQuery, dict[str, object]]:
        """The release of a planned query for what its contribution step chose (``chosen``,
        from :meth:`~dpkit.analytics._planner.ContributionStep.choose`): every statistic at
        its own pair when the step chose them (the plan at the largest), else all at the
        shared pair; with what was chosen, each statistic's pair under ``"statistics"``.
        Post-processing of the step's output; raises nothing for a priced query."""
        if self._query is None or self.contribution is None:
            raise PrivacyParameterError("prepare_release() is for a planned query")
        step = self.contribution
        chosen = dict(chosen)
        delta = step.delta if self.pricing.mode != "pure" else None
        units = chosen.pop("units", 0.0)
        pooled = chosen.get("pooled")
        pools = dict(pooled) if isinstance(pooled, dict) else {}
        query = self._query.for_planned_release(units if isinstance(units, float) else 0.0, pools)
        shared = chosen.pop("shared", None)
        own = chosen.pop("statistics", None)
        if isinstance(own, dict) and isinstance(shared, dict):
            pair = (int(shared["max_partitions"]), int(shared["max_rows_per_partition"]))
            each = {n: pair for n, _ in self._query.stats}
            each.update(
                {
                    n: (int(b["max_partitions"]), int(b["max_rows_per_partition"]))
                    for n, b in own.items()
                }
            )
            for n, pn in pools.items():  # a pooled sum: its mean's pair (pooled_bounds)
                if n in each and pn in each:
                    each[n] = each[pn]
            try:
                prepared = query.bound_each(each).prepare(
                    epsilon=step.epsilon_release, delta=delta, two_step=True
                )
            except PrivacyParameterError:
                # every pair was checked to price for the whole query; a statistic's own pair
                # is smaller, so this is not expected, but a refusal here must not raise
                # after the charge: the shared pair (which prices) serves every statistic
                chosen.update(max_partitions=pair[0], max_rows_per_partition=pair[1])
            else:
                chosen["statistics"] = {
                    n: dict(
                        zip(
                            ("max_partitions", "max_rows_per_partition"),
                            prepared.pricing.bounds_of(n),
                            strict=True,
                        )
                    )
                    for n, _ in self._query.stats
                }
                return prepared, chosen
        p, r = chosen["max_partitions"], chosen["max_rows_per_partition"]
        assert isinstance(p, int) and isinstance(r, int)  # the step's choice: grid values
        bounded = query.bound(max_partitions=p, max_rows_per_partition=r)
        return bounded.prepare(epsilon=step.epsilon_release, delta=delta, two_step=True), chosen

    def with_release_salt(self, salt: int) -> PreparedQuery:
        """The same query with ``salt`` as the bounding salt of its release plan (a planned
        query's release salt, drawn before its steps run: see
        :meth:`~dpkit.analytics.Session.run`); the other plans keep theirs."""
        plan = dataclasses.replace(self.plan, bound=dataclasses.replace(self.plan.bound, salt=salt))
        return dataclasses.replace(self, plan=plan)

    def with_fresh_release_salt(self, source: RandomSource | None = None) -> PreparedQuery:
        """:meth:`with_release_salt` with a fresh secret salt drawn from ``source``."""
        return self.with_release_salt(_fresh_salt(resolve_source(source)))

    def with_fresh_salt(self, source: RandomSource | None = None) -> PreparedQuery:
        """The same priced query with a fresh secret salt in each of its plans, drawn from
        ``source``: what :meth:`Query.prepare` with the same arguments returns, without
        pricing and planning the query again (a server answering the same query many times
        prices it once). Each release must still get its own salt: call this once per run."""
        src = resolve_source(source)

        def fresh(plan: Plan | None) -> Plan | None:
            if plan is None:
                return None
            return dataclasses.replace(
                plan, bound=dataclasses.replace(plan.bound, salt=_fresh_salt(src))
            )

        release = fresh(self.plan)
        assert release is not None
        return dataclasses.replace(
            self,
            plan=release,
            bounds_plan=fresh(self.bounds_plan),
            contribution_plan=fresh(self.contribution_plan),
        )

    def _refuse_two_step(self) -> None:
        if self.planned:
            raise PrivacyParameterError(
                "this query plans its contribution bounds first (no .bound(...)): run it with "
                "session.run(prepared), or give .bound(...) to release it by hand"
            )
        if self.two_step:
            raise PrivacyParameterError(
                "this query estimates its bounds first (bounds='auto'): run it with "
                "session.run(prepared), or give public bounds to release it by hand"
            )

    def estimate_bounds(
        self, result: EngineResult, *, source: RandomSource | None = None
    ) -> dict[str, tuple[float, ...]]:
        """Private bounds of each ``"auto"`` statistic from the engine result of
        :attr:`bounds_plan` (its bin counts, released once by the statistic's noisy histogram
        and read by :func:`~dpkit.analytics._planner.value_bounds`; the cost is part of the
        query's charge, see :class:`~dpkit.analytics._pricing.AutoBounds`). Bounds are cut at
        the limits of the column's declared type (public). A mean of a planned release gets
        ``(lower, upper, centre, count_share)``: its noisy sum's centre and its count's share
        read from the same histogram (:func:`~dpkit.analytics._planner.planned_centre`)."""
        from dpkit.analytics._planner import (
            POOL_KIND,
            planned_centre,
            trimmed_upper,
            type_limits,
            value_bounds,
            variance_upper,
        )

        src = resolve_source(source)
        out: dict[str, tuple[float, ...]] = {}
        released: dict[str, list[int]] = {}  # each histogram noised once, read by all its readers
        _, computed = _histogram_measures(self.pricing)
        for ab in sorted(self.pricing.auto, key=lambda a: a.reads is not None):
            bins = len(AUTO_EDGES) - 1
            col = result.values.get(computed.get(ab.measure.name, ab.measure.name), ())
            first: Any = col[0] if col else (0,) * bins
            counts = [int(v) for v in first]
            if ab.measure.name not in released:
                released[ab.measure.name] = ab.mechanism.release(counts, src)
            noisy = released[ab.measure.name]
            limits = type_limits(self._column_type(ab.stat.column))
            tau = ab.mechanism.threshold()
            lo, hi, _ = value_bounds(noisy, AUTO_EDGES, tau, limits)
            trim = self._trim_args(ab)
            out[ab.name] = (lo, hi)
            if trim is not None:
                if ab.stat.kind in ("variance", "std"):  # a variance's own trade
                    trim.pop("kind")
                    pure = not trim["gaussian"]
                    split = [float(f) for f in pool_split(pure, "variance", lo, hi, 1.0)]
                    kappa = float(SQ_CENTRE[pure])
                    hi = variance_upper(
                        noisy, AUTO_EDGES, tau, lo, hi, split=split, kappa=kappa, **trim
                    )
                else:
                    hi = trimmed_upper(noisy, AUTO_EDGES, tau, lo, hi, **trim)
                out[ab.name] = (lo, hi)
                centre = (
                    planned_centre(
                        noisy,
                        AUTO_EDGES,
                        tau,
                        lo,
                        hi,
                        gaussian=trim["gaussian"],
                        pooled=trim["kind"] == POOL_KIND,
                    )
                    if ab.stat.kind == "mean"
                    else None
                )
                if centre is not None:
                    out[ab.name] = (lo, hi, *centre)
        return {ab.name: out[ab.name] for ab in self.pricing.auto}

    def _trim_args(self, ab: Any) -> dict[str, Any] | None:
        """What :func:`~dpkit.analytics._planner.trimmed_upper` needs for the auto-bounded
        statistic ``ab`` of a planned release with public groups (else None): its kind, the
        noise sd of a sum of bound 1 at its contribution bounds and remaining share, the number
        of groups and the noise. Public parameters only."""
        from dpkit.analytics._planner import POOL_KIND

        q = self._query
        mode = self.pricing.mode
        if q is None or not q.trims_values or mode == "approx":
            return None
        if q.group_columns and q.keys is None:
            return None
        p, r = self.pricing.bounds_of(ab.name)
        share = float(ab.main_share)
        if mode == "pure":
            unit = math.sqrt(2.0) * p * r / share
        else:
            unit = math.sqrt(p) * r / math.sqrt(2.0 * share)
        groups = len(q.keys) if q.group_columns and q.keys is not None else 1
        # a statistic reading a histogram of fewer rows per unit: its rows assumed r / r_h times
        scale = r / ab.hist_rows if ab.hist_rows else 1.0
        # a mean releasing a sum of its column too (planned_pools): one bound for both
        pooled = ab.stat.kind == "mean" and any(
            sp.shared_with == ab.name and sp.stat.kind == "sum" for sp in self.pricing.stats
        )
        return {
            "rows_scale": max(scale, 1.0),
            "kind": POOL_KIND if pooled else ab.stat.kind,
            "unit_noise": unit,
            "groups": groups,
            "gaussian": mode != "pure",
        }

    def _column_type(self, column: str | None) -> str | None:
        if self._query is None or column is None:
            return None
        return self._query.session.table.column_type(column)

    def with_bounds(self, bounds: dict[str, tuple[float, ...]]) -> PreparedQuery:
        """The release step of a two-step query, with the estimated ``bounds`` (a new plan,
        with a fresh salt)."""
        if self._query is None or not self.two_step:
            raise PrivacyParameterError("with_bounds() is for a query with bounds='auto'")
        return self._query._prepared(resolve_auto(self.pricing, bounds))

    def exact(self, engine: _Executes, source: Source | None = None) -> EngineResult:
        """Run :attr:`plan` (optionally on another ``source``) and return the exact aggregates.

        For audits and tests that compare neighbouring tables under one salt: nothing is
        charged and the integers are not private. Releases go through
        :meth:`~dpkit.analytics.Session.run`.
        """
        self._refuse_two_step()
        plan = self.plan if source is None else dataclasses.replace(self.plan, source=source)
        return engine.execute(plan)

    def release_from(
        self,
        result: EngineResult,
        *,
        source: RandomSource | None = None,
        output: str = "pandas",
        warn_empty: bool = False,
        notes: dict[str, Any] | None = None,
    ) -> Any:
        """Noise, partition selection and confidence intervals on ``result`` (no charge).

        ``warn_empty``: warn (:class:`~dpkit.analytics.EmptyReleaseWarning`) when a grouped
        release has no row; the frame's info says it in any case. ``notes`` go into the
        result's ``attrs["dpkit"]``."""
        if output not in _OUTPUTS:
            raise PrivacyParameterError(f"output must be one of {_OUTPUTS}, got {output!r}")
        self._refuse_two_step()
        # a top-k query selects its groups first, then assembles them like public keys
        release = release_top_k if self.pricing.top_k is not None else assemble
        return release(
            self.pricing,
            result,
            group_by=self.group_by,
            public_keys=self.public_keys,
            alpha=self.alpha,
            source=resolve_source(source),
            output=output,
            warn_empty=warn_empty,
            notes=notes,
        )


@dataclass(frozen=True)
class Query:
    """An immutable private query over a :class:`~dpkit.analytics.Session` (see module doc).

    ``session`` is what the query is built on and run through (a :class:`QueryHost`)."""

    session: QueryHost
    filters: tuple[str, ...] = ()
    group_columns: tuple[str, ...] = ()
    keys: tuple[tuple[Any, ...], ...] | None = None
    max_partitions: int | None = None
    max_rows_per_partition: int | None = None
    stats: tuple[tuple[str, Statistic], ...] = ()
    selection_weight: float = 1.0
    joins: tuple[PublicJoin, ...] = ()
    buckets: tuple[Bucket, ...] = ()
    top: TopK | None = None
    derived: tuple[Derived, ...] = ()
    _derived_info: tuple[DerivedInfo, ...] = field(default=(), repr=False)
    _grouped: bool = field(default=False, repr=False)
    _extra_columns: tuple[str, ...] = field(default=(), repr=False)
    #: the planner's per-statistic contribution bounds ``(name, p, r)`` (see
    #: :meth:`bound_each`); empty: every statistic at ``.bound(...)``'s
    _stat_bounds: tuple[tuple[str, int, int], ...] = field(default=(), repr=False)
    #: a planned query's release: the upper value bound of an auto-bounded sum or mean is
    #: traded against its noise (:func:`~dpkit.analytics._planner.trimmed_upper`; a
    #: variance's or std's by :func:`~dpkit.analytics._planner.variance_upper`)
    _trim_values: bool = field(default=False, repr=False)
    #: a planned query's release: its contribution step's noisy number of units (sizes its
    #: quantiles' bounds histogram, see :func:`~dpkit.analytics._planner.
    #: quantile_histogram_share`)
    _plan_units: float = field(default=0.0, repr=False)
    #: a planned query's release: ``(sum, mean)`` of each sum released from its column's
    #: mean's measures (:func:`~dpkit.analytics._planner.pooled_bounds`)
    _plan_pools: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    # ------------------------------------------------------------------ derived columns
    def _check_column(self, column: str, what: str) -> None:
        """A column of the source, of a public join, or a bucket."""
        if column in self._extra_columns:
            return
        self.session.table.check_column(column, what)

    def join_public(
        self,
        table: Any,
        *,
        on: str | dict[str, str] | list[tuple[str, str]],
        columns: list[str] | dict[str, str],
        how: str = "inner",
    ) -> Query:
        """Join each row with at most one row of a public ``table`` (a path, a frame or a
        DuckDB table name known to the session's connection).

        ``on``: a column name present on both sides, a dict ``{source column: public column}``
        or a list of such pairs. ``columns``: the public columns to add (a list, or a dict
        ``{public column: new name}``). ``how``: ``"inner"`` (rows without a match are
        dropped) or ``"left"`` (they keep NULL public columns). A key that occurs more than
        once in the public table matches no row: a row joined twice would count twice, past
        its contribution bounds. The public table must not be the private source.
        """
        if how not in ("inner", "left"):
            raise PrivacyParameterError(f"how must be 'inner' or 'left', got {how!r}")
        public = self.session.public_table(table)
        source, public_cols = public.source, public.schema
        if isinstance(on, str):
            pairs = [(on, on)]
        elif isinstance(on, dict):
            pairs = list(on.items())
        elif isinstance(on, (list, tuple)):
            pairs = [tuple(p) for p in on]  # type: ignore[misc]
        else:
            raise PrivacyParameterError(f"on must be a name, a dict or a list of pairs, got {on!r}")
        if not pairs or any(len(p) != 2 for p in pairs):
            raise PrivacyParameterError(f"on must name at least one column pair, got {on!r}")
        for left, right in pairs:
            self._check_column(left, "join column")
            if right not in public_cols:
                raise PrivacyParameterError(
                    f"unknown public join column {right!r}; the public table has columns "
                    f"{list(public_cols)}"
                )
        if isinstance(columns, dict):
            cols = list(columns.items())
        elif isinstance(columns, (list, tuple)) and not isinstance(columns, str):
            cols = [(c, c) for c in columns]
        else:
            raise PrivacyParameterError(f"columns must be a list or a dict, got {columns!r}")
        taken = set(self.session.table.columns) | set(self._extra_columns)
        for pub, name in cols:
            if pub not in public_cols:
                raise PrivacyParameterError(
                    f"unknown public column {pub!r}; the public table has columns "
                    f"{list(public_cols)}"
                )
            if not isinstance(name, str) or not name or name in taken:
                raise PrivacyParameterError(
                    f"public column {pub!r} needs a new name that is not already a column, got "
                    f"{name!r}"
                )
            taken.add(name)
        join = PublicJoin(
            source=source,
            left_on=tuple(str(p[0]) for p in pairs),
            right_on=tuple(str(p[1]) for p in pairs),
            columns=tuple((str(p), str(n)) for p, n in cols),
            how="inner" if how == "inner" else "left",
        )
        return dataclasses.replace(
            self,
            joins=(*self.joins, join),
            _extra_columns=(*self._extra_columns, *(n for _, n in cols)),
        )

    def bucket(
        self, name: str, cases: list[tuple[str, Any]] | dict[str, Any], default: Any = None
    ) -> Query:
        """A public derived column: the value of the first ``(predicate, value)`` case that
        holds for the row, else ``default`` (values are literals: text, numbers, booleans).

        ``.bucket("band", [("age < 18", "minor"), ("age < 65", "adult")], "senior")``; group
        by it with ``keys=`` its values (public: they are literals of the query).
        """
        from dpkit.analytics._sql import parse_predicate

        if not isinstance(name, str) or not name:
            raise PrivacyParameterError(f"a bucket needs a name, got {name!r}")
        if name in self.session.table.columns or name in self._extra_columns:
            raise PrivacyParameterError(f"bucket name {name!r} is already a column")
        items = list(cases.items()) if isinstance(cases, dict) else list(cases)
        if not items:
            raise PrivacyParameterError(f"bucket {name!r} needs at least one case")
        checked: list[tuple[str, object]] = []
        for case in items:
            if not isinstance(case, tuple) or len(case) != 2 or not isinstance(case[0], str):
                raise PrivacyParameterError(f"each case is (predicate, value), got {case!r}")
            vp = parse_predicate(case[0])
            for c in vp.columns:
                self._check_column(c, "bucket condition column")
                if c == self.session.table.privacy_unit:
                    raise PrivacyParameterError("a bucket cannot read the privacy unit")
            checked.append((case[0], _bucket_value(case[1])))
        bucket = Bucket(name=name, cases=tuple(checked), default=_bucket_value(default))
        return dataclasses.replace(
            self, buckets=(*self.buckets, bucket), _extra_columns=(*self._extra_columns, name)
        )

    def derive(
        self,
        name: str,
        expression: str,
        *,
        bounds: tuple[float, float] | None = None,
        inputs: dict[str, tuple[Any, Any]] | None = None,
    ) -> Query:
        """A derived column ``name``: a row-level SQL ``expression`` over the table's columns.

        ``.derive("year", "year(signup)", inputs={"signup": ("2019-01-01", "2024-12-31")})``,
        ``.derive("revenue", "price * quantity", inputs={"price": (0, 100), "quantity": (0,
        10)})``, ``.derive("flu", "CASE WHEN diagnosis = 'flu' THEN 1 ELSE 0 END")``. The
        supported expressions are listed in :mod:`dpkit.analytics._derive` (date parts,
        ``date_trunc``, ``+ - *``, ``lower``/``upper``/``trim``/``substring``, ``CASE``,
        casts); each is computed per row inside the engine and never raises (an overflow or a
        cast that does not apply is NULL).

        ``inputs``: public bounds of the columns it reads (numbers, or dates for a date
        column); numeric inputs are read clamped to them. ``bounds``: the result's public
        bounds, when the analyst knows them better than the definition. An aggregate of the
        column without ``bounds=`` uses ``bounds`` or the bounds derived from the definition
        (an indicator is in [0, 1], ``price * quantity`` in the products of the inputs'
        bounds); a ``group_by`` on it without ``keys=`` uses the values the definition lists
        (a ``CASE``'s literals, months 1 to 12, the years between a date input's bounds),
        else private partition selection.
        """
        from dpkit.analytics import _derive as dv

        if not isinstance(name, str) or not name:
            raise PrivacyParameterError(f"a derived column needs a name, got {name!r}")
        if name in self.session.table.columns or name in self._extra_columns:
            raise PrivacyParameterError(f"derived column name {name!r} is already a column")
        expr = dv.parse_derived(expression)
        computed = {b.name for b in self.buckets} | {d.name for d in self.derived}
        for c in expr.columns:
            if c in computed:
                raise PrivacyParameterError(
                    f"derived column {name!r} reads {c!r}, itself computed: write its "
                    "definition out in this expression"
                )
            self._check_column(c, f"column of derived column {name!r}")
            if c == self.session.table.privacy_unit:
                raise PrivacyParameterError(f"derived column {name!r} cannot read the privacy unit")
        declared = _input_bounds(name, expr.columns, inputs or {})
        types = self.session.table.column_type
        known = all(types(c) is not None for c in expr.columns)
        interval: tuple[float, float] | None = None
        values: tuple[object, ...] | None = None
        sql_type: str | None = None
        if known:
            kind = dv.result_kind(expr, types)
            sql_type = dv.sql_type_of(kind)
            interval = dv.value_interval(expr, types, declared)
            values = dv.public_values(expr, types, declared)
            text = dv.clamped_text(expr, types, declared)
        else:  # a public join's column: the engine checks the types before the charge
            text = expression
        if bounds is not None:
            own = Statistic(kind="sum", column=name).with_public_bounds(*_pair(name, bounds))
            assert isinstance(own.bounds, tuple)
            interval = (float(own.bounds[0]), float(own.bounds[1]))
        info = DerivedInfo(
            name=name, text=expression, bounds=interval, values=values, sql_type=sql_type
        )
        return dataclasses.replace(
            self,
            derived=(*self.derived, Derived(name=name, expression=text)),
            _derived_info=(*self._derived_info, info),
            _extra_columns=(*self._extra_columns, name),
        )

    def derived_values(self, name: str) -> tuple[object, ...] | None:
        """Every value the derived column ``name`` can take, when its definition lists them
        (public keys, see :meth:`derive`), else None."""
        info = self._derived(name)
        return None if info is None else info.values

    def _derived(self, column: str | None) -> DerivedInfo | None:
        return next((d for d in self._derived_info if d.name == column), None)

    # ------------------------------------------------------------------ building
    def where(self, predicate: str) -> Query:
        """Keep rows satisfying a public SQL predicate (e.g. ``"age >= 18"``)."""
        if not isinstance(predicate, str) or not predicate.strip():
            raise PrivacyParameterError(f"where() needs a SQL predicate string, got {predicate!r}")
        return dataclasses.replace(self, filters=(*self.filters, predicate))

    def group_by(
        self,
        *columns: str | list[str] | tuple[str, ...],
        keys: Any = None,
        selection_weight: float = 1.0,
    ) -> Query:
        """Group by ``columns``; ``keys`` public or ``None`` for private partition selection.

        ``keys``: a list of values (one column) or of tuples, a dict ``{column: values}`` (the
        cartesian product), or a pandas/polars/arrow frame with the group-by columns. Every key
        gets a row, present in the data or not. Without keys, groups are released by private
        partition selection. When the query has a ``count()``, ``count(column)`` or
        ``count_distinct()`` (the first one, released from its own measure at the query's
        contribution bounds), a group is released when that count's own noisy value exceeds a
        threshold: selection spends no epsilon of its own, the count gets ``selection_weight``
        shares of epsilon on top of its own weight (a less noisy count also releases more
        groups), and the threshold's delta is charged (half of the query's delta when some
        statistic is Gaussian, else all of it). The released count's interval is that of its
        noise, unchanged; a group is shown only above the threshold, so among small groups
        those shown tend to have positive noise. Without such a count, selection is a separate
        measurement taking ``selection_weight`` shares of the query's epsilon (the aggregates
        have weight 1 each by default) and half of its delta.
        """
        cols: list[str] = []
        for c in columns:
            if isinstance(c, (list, tuple)):
                cols.extend(c)
            else:
                cols.append(c)
        if not cols:
            raise PrivacyParameterError("group_by() needs at least one column")
        for c in cols:
            if not isinstance(c, str):
                raise PrivacyParameterError(f"group-by columns must be names, got {c!r}")
            self._check_column(c, "group-by column")
        if len(set(cols)) != len(cols):
            raise PrivacyParameterError(f"group-by columns repeat: {cols!r}")
        unit = self.session.table.privacy_unit
        if unit in cols:
            raise PrivacyParameterError(
                f"the privacy unit {unit!r} cannot be a group-by column: "
                "each group would be one person, and no private answer describes one person. "
                "Group by a column people share (a region, an age band made with bucket()), "
                "and count people per group with count_distinct()"
            )
        w = check_positive(selection_weight, "selection_weight")
        parsed = None if keys is None else _parse_keys(keys, tuple(cols))
        if parsed is None:
            parsed = self._definition_keys(tuple(cols))
        return dataclasses.replace(
            self, group_columns=tuple(cols), keys=parsed, selection_weight=w, _grouped=True
        )

    def _definition_keys(self, cols: tuple[str, ...]) -> tuple[tuple[Any, ...], ...] | None:
        """Public keys from the definitions of derived group columns, when every group column
        is derived and lists its values (their product, at most ``_MAX_KEYS``); else None."""
        lists = []
        for c in cols:
            info = self._derived(c)
            if info is None or info.values is None:
                return None
            lists.append(info.values)
        if math.prod(len(v) for v in lists) > _MAX_KEYS:
            return None
        return tuple(itertools.product(*lists))

    def bound(self, *, max_partitions: int, max_rows_per_partition: int) -> Query:
        """Per privacy unit, keep at most ``max_partitions`` groups and
        ``max_rows_per_partition`` rows in each (chosen by a secret salted hash)."""
        p = check_integer(max_partitions, name="max_partitions", minimum=1, maximum=1 << 20)
        r = check_integer(
            max_rows_per_partition, name="max_rows_per_partition", minimum=1, maximum=1 << 20
        )
        if self.session.table.privacy_unit is None and (p, r) != (1, 1):
            raise PrivacyParameterError(
                "without a privacy unit each row is one person: contribution bounds are 1; "
                "give Session(privacy_unit=...) to bound units with several rows"
            )
        return dataclasses.replace(
            self, max_partitions=p, max_rows_per_partition=r, _stat_bounds=()
        )

    @property
    def trims_values(self) -> bool:
        """Whether this is a planned query's release (see :meth:`for_planned_release`)."""
        return self._trim_values

    def for_planned_release(self, units: float = 0.0, pools: dict[str, str] | None = None) -> Query:
        """The query as the planner releases it: the upper value bound of an auto-bounded sum
        or mean traded against its noise (:func:`~dpkit.analytics._planner.trimmed_upper`; a
        variance's by :func:`~dpkit.analytics._planner.variance_upper`) and the auto-bounded
        statistics of one column reading one bounds histogram, a quantiles' one sized by
        ``units`` (the contribution step's noisy number of units); each sum of ``pools``
        released from its mean's measures (``{sum: mean}``, chosen by
        :func:`~dpkit.analytics._planner.pooled_bounds`)."""
        return dataclasses.replace(
            self,
            _trim_values=True,
            _plan_units=float(units),
            _plan_pools=tuple(sorted((pools or {}).items())),
        )

    def bound_each(self, bounds: dict[str, tuple[int, int]]) -> Query:
        """The query with each statistic bounded at its own ``bounds[name]`` (the planner's
        choice, see :meth:`PreparedQuery.plan_contributions`): the plan keeps the largest of
        them, each statistic's measures read only the rows kept at its own and are priced at
        them (:func:`~dpkit.analytics._pricing.price`, ``stat_bounds``)."""
        names = {n for n, _ in self.stats}
        for n, b in bounds.items():
            if n not in names:
                raise PrivacyParameterError(f"bound_each: {n!r} is not an aggregate of the query")
            for v in b:
                if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                    raise PrivacyParameterError(
                        f"bound_each: the bounds of {n!r} must be integers >= 1, got {b!r}"
                    )
        if not bounds:
            raise PrivacyParameterError("bound_each needs the bounds of at least one aggregate")
        p = max(b[0] for b in bounds.values())
        r = max(b[1] for b in bounds.values())
        out = self.bound(max_partitions=p, max_rows_per_partition=r)
        own = tuple((n, int(b[0]), int(b[1])) for n, b in bounds.items())
        return dataclasses.replace(out, _stat_bounds=own)

    def agg(self, **stats: Statistic) -> Query:
        """Add named aggregates: ``.agg(n=count(), income=mean("income", bounds=(0, 1e5)))``."""
        if not stats:
            raise PrivacyParameterError("agg() needs at least one name=aggregate")
        if self.top is not None:
            raise PrivacyParameterError(
                "a top_k query releases its one ranking aggregate: call agg() before top_k()"
            )
        have = dict(self.stats)
        for name, st in stats.items():
            if not isinstance(st, Statistic):
                raise PrivacyParameterError(
                    f"{name}= must be an aggregate such as dpkit.analytics.count(), got {st!r}"
                )
            if name in have:
                raise PrivacyParameterError(f"aggregate name {name!r} is used twice")
            if name in self.group_columns:
                raise PrivacyParameterError(f"aggregate name {name!r} is a group-by column")
            if st.column is not None:
                self._check_column(st.column, f"column of {name}")
                if st.column == self.session.table.privacy_unit:
                    raise PrivacyParameterError(
                        f"{name}: aggregating the privacy unit column is not supported"
                    )
            if st.needs_bounds and st.bounds is None and not st.temporal:
                st = self._derived_bounds(name, st)
            if st.kind == "count_distinct" and self.session.table.privacy_unit is None:
                raise PrivacyParameterError(
                    f"{name}: count_distinct counts privacy units; without a privacy unit use "
                    "count()"
                )
            have[name] = st
        return dataclasses.replace(self, stats=tuple(have.items()))

    def _derived_bounds(self, name: str, st: Statistic) -> Statistic:
        """``st`` with the bounds of its derived column, or the refusal in the analyst's terms
        (before anything is charged)."""
        col = st.column or ""
        info = self._derived(col)
        if info is None:
            raise PrivacyParameterError(f"{name}: {missing_bounds(col)}")
        what = repr(col) if col == info.text else f"{col!r} ({info.text})"
        if info.sql_type is not None and info.sql_type not in ("BIGINT", "DOUBLE", "BOOLEAN"):
            raise PrivacyParameterError(
                f"{name}: {what} is not a number, so it has no {st.kind}; count it, or group by it"
            )
        if info.bounds is None:
            raise PrivacyParameterError(
                f"{name}: {what} has no bounds: they do not follow from its definition and "
                "the bounds declared for the columns it reads. Declare the bounds of those "
                "columns (derive(..., inputs={'column': (lower, upper)}), or lower and upper "
                "in the SQL metadata), or give the result's bounds (derive(..., "
                "bounds=(lower, upper)) or the aggregate's bounds=)"
            )
        lo, hi = info.bounds
        if lo == hi:  # a constant: any interval holding it
            lo, hi = lo - 0.5, hi + 0.5
        return st.with_public_bounds(lo, hi)

    def top_k(
        self,
        k: int,
        *,
        candidates: int | None = None,
        values: bool = True,
        selection_share: float = 0.5,
    ) -> Query:
        """Release only the ``k`` groups with the largest value of the query's one aggregate
        (``count()``, or ``sum(column, bounds=(lower, upper))`` with ``0 <= lower``), best
        first, instead of every group: ``.group_by("diagnosis").bound(...).agg(n=count())
        .top_k(3)``.

        Without public keys the groups are ranked among those present in the data
        (``candidates``: only the ``candidates`` largest; default every group) against a
        noisy stop threshold, and fewer than ``k`` come back when the rest are not clearly
        above the threshold; this needs ``delta > 0``. With public keys every key is a
        candidate (pure DP). ``values``: also release the selected groups' noisy values with
        intervals (``selection_share`` of epsilon goes to the selection, the rest to the
        values); ``False`` releases the ranked keys only, at the whole budget.

        Privacy (per privacy unit, under the session's contribution bounds ``P`` groups and
        ``R`` rows per group): a unit raises at most ``P`` scores, each by at most ``R`` rows
        (times the sum's upper bound), and lowers none, so the ranking is a monotone
        exponential mechanism of that per-group sensitivity, run as one pass of Gumbel
        noise (:class:`~dpkit.mechanisms.NoisyTopK`); groups that exist in only one of two
        neighbouring tables are covered by the stop threshold and cost ``delta``, which grows
        with ``min(P, candidates)`` (Durfee and Rogers 2019, limited domain; the proof is in
        :mod:`dpkit.analytics._topk`). The values are noised for ``min(P, k)`` groups per unit.
        """
        if not self.group_columns:
            raise PrivacyParameterError("top_k ranks groups: call group_by(...) first")
        if len(self.stats) != 1:
            raise PrivacyParameterError(
                "top_k ranks groups by one aggregate: give exactly one, e.g. .agg(n=count())"
                f".top_k({k!r}); this query has {len(self.stats)}"
            )
        if self.top is not None:
            raise PrivacyParameterError("top_k() is already set on this query")
        name, st = self.stats[0]
        check_score(name, st)
        spec = check_top_k(
            TopK(k=k, candidates=candidates, values=values, selection_share=selection_share)
        )
        return dataclasses.replace(self, top=spec)

    # ------------------------------------------------------------------ pricing
    def _bounds(self) -> tuple[int, int]:
        if self.session.table.privacy_unit is None:
            return 1, 1
        if self.max_partitions is None or self.max_rows_per_partition is None:
            raise PrivacyParameterError(
                "call .bound(max_partitions=..., max_rows_per_partition=...) to bound each "
                "privacy unit's contribution"
            )
        p = self.max_partitions if self.group_columns else 1
        return p, self.max_rows_per_partition

    def _delta(self, delta: Any) -> Any:
        if delta is None:
            if self.session.mode == "zcdp":
                raise PrivacyParameterError(
                    "this session adds Gaussian noise (its budget has delta > 0): give the "
                    "query a delta, e.g. run(epsilon=1.0, delta=1e-7)"
                )
            return 0.0
        return delta

    def _typed_stats(self) -> tuple[tuple[str, Statistic], ...]:
        """The statistics with date bounds and edges turned into the numbers their column
        holds (see :meth:`Statistic.for_column`), decided by the column's type before any
        charge. A column whose type the session does not know (a public join's) is no date
        column here; the engine refuses date edges for it, or numbers for a date column."""
        out = []
        for name, st in self.stats:
            if st.needs_bounds and st.bounds is None and not st.temporal:
                raise PrivacyParameterError(f"{name}: {missing_bounds(st.column or '')}")
            info = self._derived(st.column)
            sql_type = (
                self.session.table.column_type(st.column or "")
                if st.column not in self._extra_columns
                else (info.sql_type if info is not None else None)
            )
            kind = temporal_codec(sql_type) if sql_type is not None else None
            out.append((name, st.for_column(kind, name, sql_type)))
        return tuple(out)

    def _price(self, epsilon: Any, delta: Any) -> Pricing:
        stats = self._typed_stats()
        check_output_columns(self.group_columns, stats)
        p, r = self._bounds()
        if self.top is not None:
            ((name, st),) = stats
            return price_top_k(
                name,
                st,
                self.top,
                mode=self.session.mode,
                epsilon=epsilon,
                delta=self._delta(delta),
                max_partitions=p,
                max_rows_per_partition=r,
                known=self.keys is not None,
                zcdp_share=self.session.zcdp_share if self.session.mode == "zcdp" else None,
            )
        return price(
            dict(stats),
            mode=self.session.mode,
            epsilon=epsilon,
            delta=self._delta(delta),
            max_partitions=p,
            max_rows_per_partition=r,
            select_partitions=bool(self.group_columns) and self.keys is None,
            selection_weight=self.selection_weight,
            zcdp_share=self.session.zcdp_share if self.session.mode == "zcdp" else None,
            stat_bounds={n: (bp, br) for n, bp, br in self._stat_bounds} or None,
            share_histograms=self._trim_values,
            planned_units=self._plan_units,
            pool_sums=dict(self._plan_pools),
        )

    def _plan(self, pricing: Pricing, salt: int) -> Plan:
        p, r = pricing.max_partitions, pricing.max_rows_per_partition
        measures: list[Measure] = list(pricing.measures)
        if pricing.top_k is not None:
            measures.append(pricing.top_k.score)
        elif self.group_columns and self.keys is None:
            measures.append(Measure(name=UNITS_MEASURE, kind="units"))
        filters = [Filter(predicate=f) for f in self.filters]
        filters.extend(self._key_filters())
        return Plan(
            source=self.session.table.source,
            filters=tuple(filters),
            bound=Bound(
                privacy_unit=self.session.table.privacy_unit,
                max_partitions=p,
                max_rows_per_partition=r,
                salt=salt,
            ),
            aggregate=Aggregate(group_by=self.group_columns, measures=tuple(measures)),
            joins=self.joins,
            buckets=self.buckets,
            derived=self.derived,
        )

    def _key_filters(self) -> list[Filter]:
        """Restrict rows to the public keys' values before bounding (per column IN lists)."""
        if self.keys is None:
            return []
        out = []
        for j, col in enumerate(self.group_columns):
            values = {k[j] for k in self.keys}
            lits = []
            has_null = False
            for v in values:
                if v is None:
                    has_null = True
                    continue
                lit = sql_literal(v)
                if lit is None:
                    break
                lits.append(lit)
            else:
                ident = quote_ident(col)
                parts = []
                if lits:
                    parts.append(f"{ident} IN ({', '.join(sorted(lits))})")
                if has_null:
                    parts.append(f"{ident} IS NULL")
                out.append(Filter(predicate=" OR ".join(parts) if len(parts) > 1 else parts[0]))
        return out

    def prepare(
        self, *, epsilon: float, delta: float | None = None, two_step: bool = False
    ) -> PreparedQuery:
        """Price the query and build its plan with a fresh secret salt (touches no data).

        A query with ``bounds="auto"`` runs in two steps (a private bounds estimate, then the
        release): it is prepared only with ``two_step=True``, for
        :meth:`~dpkit.analytics.Session.run` (see :class:`PreparedQuery`); without it, it is
        refused, since a prepared query is otherwise released by hand with
        :meth:`PreparedQuery.release_from`, which needs public bounds."""
        if not self.stats:
            raise PrivacyParameterError("the query has no aggregates: call .agg(name=...) first")
        if self.plans_contributions:
            return self._prepare_planned(epsilon, delta, two_step)
        pricing = self._price(epsilon, delta)
        if not pricing.auto:
            return self._prepared(pricing)
        if not two_step:
            raise PrivacyParameterError(
                "a query with bounds='auto' runs in two steps (a private bounds estimate, then "
                "the release): use run(), or session.run(query.prepare(..., two_step=True)), "
                "or give public bounds"
            )
        # The release waits for the estimated bounds, but everything the schema decides about
        # it (key types, value columns, filters) does not: its shape, with placeholder bounds,
        # is checked with the bounds plan before the charge.
        shape = self._prepared(
            resolve_auto(pricing, dict.fromkeys((ab.name for ab in pricing.auto), (0.0, 1.0)))
        )
        return dataclasses.replace(
            shape, pricing=pricing, bounds_plan=self._auto_plan(pricing), _query=self
        )

    @property
    def plans_contributions(self) -> bool:
        """Whether the contribution bounds are left to the planner (a privacy unit and no
        ``.bound(...)``)."""
        return self.session.table.privacy_unit is not None and self.max_partitions is None

    def _prepare_planned(self, epsilon: Any, delta: Any, two_step: bool) -> PreparedQuery:
        """A planned query: the contribution step, the release's shape at the largest
        candidate bounds (checked by the engine before the charge) and the charge: the step's
        event plus the release's whole share as one black-box event (module
        :mod:`dpkit.analytics._planner`)."""
        from dpkit._numeric.validation import check_delta, check_epsilon
        from dpkit.analytics._planner import contribution_step

        eps = check_epsilon(epsilon)
        dl = check_delta(self._delta(delta))
        if not two_step:
            raise PrivacyParameterError(
                "this query plans its contribution bounds first (no .bound(...)): use run(), "
                "or session.run(query.prepare(..., two_step=True)), or give .bound(...)"
            )
        if self.top is not None:
            raise PrivacyParameterError(
                "top_k() needs contribution bounds: give .bound(max_partitions=..., "
                "max_rows_per_partition=...)"
            )
        mode = self.session.mode
        if mode == "zcdp" and self.group_columns and self.keys is None:
            raise PrivacyParameterError(
                "in a zCDP session, private partition selection needs contribution bounds "
                "given up front: give .bound(max_partitions=..., max_rows_per_partition=...) "
                "or public keys"
            )

        refusals: list[PrivacyParameterError] = []

        def priceable(p: int, r: int, eps_rel: float) -> bool:
            try:
                self.bound(max_partitions=p, max_rows_per_partition=r)._price(eps_rel, delta)
            except PrivacyParameterError as why:
                refusals.append(why)
                return False
            return True

        to_rho = _rho_rule(self.session.zcdp_share) if mode == "zcdp" else None
        try:
            step = contribution_step(eps, dl, bool(self.group_columns), priceable, to_rho)
        except PrivacyParameterError:
            # even one row per person does not price: the pricing's own reason (for example a
            # delta the session's noise needs) says more than "too small"
            if refusals:
                raise refusals[-1] from None
            raise
        targets = self._plan_targets(step.epsilon_release, dl, to_rho, mode == "pure")
        step = dataclasses.replace(step, **targets)
        top = self.bound(max_partitions=max(step.partitions), max_rows_per_partition=max(step.rows))
        shape = top.prepare(epsilon=step.epsilon_release, delta=delta, two_step=True)
        envelope = _release_envelope(mode, step.epsilon_release, dl, self.session.zcdp_share)
        pricing = dataclasses.replace(
            shape.pricing, epsilon=eps, delta=dl, events=(step.histogram.event, envelope)
        )
        return dataclasses.replace(
            shape,
            pricing=pricing,
            _query=self,
            contribution_plan=self._contribution_plan(),
            contribution=step,
        )

    def _plan_targets(
        self,
        eps_rel: float,
        delta: float,
        to_rho: Callable[[float, float], float] | None,
        pooling: bool = True,
    ) -> dict[str, Any]:
        """What the planner needs to choose each statistic's own bounds (see
        :func:`~dpkit.analytics._planner.statistic_bounds`): each statistic's kind and its
        approximate share of the release (its weight's part, less its ``auto_share``; a rho in
        a zCDP session, an epsilon otherwise), and the number of groups when it is public.
        With ``pooling`` (pure sessions), each sum that may be released from its
        column's mean's measures (:func:`~dpkit.analytics._pricing.planned_pools`) as
        ``(sum, mean, share)``, ``share`` the two shares less the one histogram's (the least
        ``auto_share`` part of the two). Public parameters only."""
        from dpkit.analytics._pricing import planned_pools

        if self.group_columns and self.keys is None:
            return {}  # partition selection: the groups are not public
        total = math.fsum(float(st.weight) for _, st in self.stats)
        whole = to_rho(eps_rel, delta) if to_rho is not None else eps_rel
        stats = dict(self.stats)

        def share(st: Statistic) -> float:
            return whole * float(st.weight) / total

        targets = tuple(
            (n, st.kind, share(st) * (1.0 - (st.auto_share if st.auto else 0.0)))
            for n, st in self.stats
        )
        pools = tuple(
            (
                n,
                pn,
                share(stats[n])
                + share(stats[pn])
                - min(share(stats[n]), share(stats[pn])) * stats[pn].auto_share,
            )
            for n, pn in (planned_pools(stats) if pooling else {}).items()
        )
        groups = len(self.keys) if self.group_columns and self.keys is not None else 1
        return {
            "targets": targets,
            "groups": groups,
            "gaussian": to_rho is not None,
            "pools": pools,
        }

    def _contribution_plan(self) -> Plan:
        """One plan counting each unit's rows per group (grouped by the unit and the group
        columns; nothing bounded beyond the engine's limits). Its exact result never leaves
        dpkit: the contribution step noises the per-unit histograms made from it. The engine
        bins the units over the planner's grid itself (``unit_grid``): only the bin counts
        leave it."""
        from dpkit.analytics._planner import CONTRIBUTION_GRID

        unit = self.session.table.privacy_unit
        assert unit is not None
        filters = [Filter(predicate=f) for f in self.filters]
        filters.extend(self._key_filters())
        return Plan(
            source=self.session.table.source,
            filters=tuple(filters),
            bound=Bound(
                privacy_unit=unit,
                max_partitions=1 << 20,
                max_rows_per_partition=1 << 20,
                salt=self._salt(),
            ),
            aggregate=Aggregate(
                group_by=(unit, *self.group_columns),
                measures=(Measure(name="rows", kind="rows"),),
                unit_grid=CONTRIBUTION_GRID,
            ),
            joins=self.joins,
            buckets=self.buckets,
            derived=self.derived,
        )

    def _salt(self) -> int:
        return _fresh_salt(self.session.source_of_randomness)

    def _prepared(self, pricing: Pricing) -> PreparedQuery:
        salt = self._salt()
        return PreparedQuery(
            pricing=pricing,
            plan=self._plan(pricing, salt),
            group_by=self.group_columns,
            public_keys=None if self.keys is None else list(self.keys),
            alpha=self.session.alpha,
        )

    def summarize(self, *, epsilon: float, delta: float | None = None) -> Any:
        """Noise and confidence half-widths per noisy measure, and the cost (touches no data).

        Returns a pandas DataFrame, one row per noisy measure and one for partition selection:
        aggregate, measure, mechanism, noise scale and standard deviation (in the column's
        units), the half-width of its interval at the session's alpha, and ``share``, the
        fraction of the query's budget it gets (the rows add up to 1; see
        :func:`~dpkit.analytics._report.summary_frame`). ``attrs["dpkit"]`` holds the cost,
        each aggregate's output columns and what the session protects.
        """
        if self.plans_contributions:
            return self._summarize_planned(epsilon, delta)
        pricing = self._price(epsilon, delta)
        return _summary_frame(pricing, self)

    def _summarize_planned(self, epsilon: Any, delta: Any) -> Any:
        """The summary of a planned query: a first row for the contribution step, then the
        release's rows priced at the largest candidate bounds (the most noise the plan can
        add; their shares scaled to the release's part), and the plan in
        ``attrs["dpkit"]["plan"]``. Touches no data."""
        import pandas as pd  # type: ignore[import-untyped,unused-ignore]

        prepared = self.prepare(epsilon=epsilon, delta=delta, two_step=True)
        step = prepared.contribution
        p, r = max(step.partitions), max(step.rows)
        bounded = self.bound(max_partitions=p, max_rows_per_partition=r)
        frame = _summary_frame(bounded._price(step.epsilon_release, delta), bounded)
        part = step.epsilon_release / prepared.pricing.epsilon
        frame["share"] = frame["share"] * part
        first = {
            "aggregate": "(plan)",
            "measure": "contribution bounds (groups and rows per person)",
            "mechanism": "noisy histogram",
            "noise_scale": step.histogram.scale,
            "noise_std": step.histogram.std,
            "ci_halfwidth": math.nan,
            "share": step.epsilon_plan / prepared.pricing.epsilon,
        }
        out = pd.concat([pd.DataFrame([first]), frame], ignore_index=True)
        out.attrs["dpkit"] = {
            **frame.attrs["dpkit"],
            "epsilon": prepared.pricing.epsilon,
            "charged": prepared.pricing.charged(),
            "plan": {
                "contribution_epsilon": step.epsilon_plan,
                "release_epsilon": step.epsilon_release,
                "max_partitions_candidates": list(step.partitions),
                "max_rows_per_partition_candidates": list(step.rows),
                "noise_at": {"max_partitions": p, "max_rows_per_partition": r},
                "rules": _bound_rules(step, self.stats),
            },
        }
        return out

    # ------------------------------------------------------------------ running
    def run(
        self,
        *,
        epsilon: float | None = None,
        delta: float | None = None,
        output: str = "pandas",
        accuracy: float | None = None,
        level: float = 0.95,
    ) -> Any:
        """Charge the session's budget with this query's cost, then execute and release
        (:meth:`prepare`, then :meth:`~dpkit.analytics.Session.run`).

        Give ``epsilon``, or ``accuracy`` instead: every released value within ``+-accuracy``
        (in its column's units) with probability ``level``, at the smallest epsilon that
        achieves it (:meth:`epsilon_for`, found before anything is spent; the result's
        ``attrs["dpkit"]["accuracy"]`` says which epsilon it was).

        A refused charge raises :class:`~dpkit.errors.BudgetExceededError` (saying what the
        query would have cost); nothing is spent and the data is not read.
        """
        if output not in _OUTPUTS:
            raise PrivacyParameterError(f"output must be one of {_OUTPUTS}, got {output!r}")
        target: dict[str, float] | None = None
        if accuracy is not None:
            if epsilon is not None:
                raise PrivacyParameterError(
                    "give epsilon or accuracy, not both: accuracy chooses the epsilon"
                )
            epsilon = self.epsilon_for(accuracy=accuracy, level=level, delta=delta)
            target = {"accuracy": float(accuracy), "level": float(level), "epsilon": epsilon}
        elif epsilon is None:
            raise PrivacyParameterError(
                "give the query's epsilon, e.g. run(epsilon=1.0), or the accuracy it needs, "
                "e.g. run(accuracy=50)"
            )
        out = self.session.run(
            self.prepare(epsilon=epsilon, delta=delta, two_step=True), output=output
        )
        if target is not None and hasattr(out, "attrs"):
            out.attrs.setdefault("dpkit", {})["accuracy"] = target
        return out

    def epsilon_for(
        self, *, accuracy: float, level: float = 0.95, delta: float | None = None
    ) -> float:
        """The smallest epsilon at which every released value of this query is within
        ``+-accuracy`` of its exact (bounded) value with probability at least ``level``
        (touches no data, spends nothing).

        For statistics whose error depends on their noise only: ``count``,
        ``count_distinct``, ``sum`` and ``histogram`` with public bounds and given
        contribution bounds. The error of each released value is its noise's certified
        half-width at ``1 - level`` (the intervals the release reports), which only shrinks as
        epsilon grows, so the answer is found by bisection
        (:func:`~dpkit.analytics._planner.smallest_epsilon`): the epsilon returned meets the
        target and one 0.1% smaller may not. A target no epsilon up to ``10^4`` meets is
        refused, saying so. ``delta``: the query's delta, as for :meth:`run`."""
        from dpkit.analytics._planner import ACCURACY_KINDS, smallest_epsilon

        acc = check_positive(accuracy, "accuracy")
        if not math.isfinite(acc):
            raise PrivacyParameterError(f"accuracy must be a finite number, got {accuracy!r}")
        lvl = check_probability(level, name="level", open_low=True, open_high=True)
        if self.plans_contributions:
            raise PrivacyParameterError(
                "an accuracy target needs contribution bounds (the error grows with them): give "
                ".bound(max_partitions=..., max_rows_per_partition=...)"
            )
        if self.top is not None:
            raise PrivacyParameterError("an accuracy target is for queries without top_k()")
        for name, st in self.stats:
            if st.kind not in ACCURACY_KINDS or st.auto:
                raise PrivacyParameterError(
                    f"{name}: an accuracy target is for count, count_distinct, sum and "
                    "histogram with public bounds, whose error does not depend on the data; "
                    "give this query an epsilon instead"
                )

        def error_at(eps: float) -> float | None:
            try:
                pricing = self._price(eps, delta)
            except PrivacyParameterError:
                return None
            worst = 0.0
            for sp in pricing.stats:
                for mp in sp.measures:
                    if mp.noise is not None:
                        worst = max(worst, mp.noise.halfwidth(1.0 - lvl) * mp.step)
            return worst

        return smallest_epsilon(error_at, acc)

    def _auto_plan(self, pricing: Pricing) -> Plan:
        """One global plan computing the bin counts of every ``bounds="auto"`` column."""
        filters = [Filter(predicate=f) for f in self.filters]
        filters.extend(self._key_filters())
        return Plan(
            source=self.session.table.source,
            filters=tuple(filters),
            bound=Bound(
                privacy_unit=self.session.table.privacy_unit,
                max_partitions=1,
                max_rows_per_partition=pricing.max_rows_per_partition,
                salt=self._salt(),
            ),
            aggregate=Aggregate(group_by=(), measures=_histogram_measures(pricing)[0]),
            joins=self.joins,
            buckets=self.buckets,
            derived=self.derived,
        )


def _histogram_measures(pricing: Pricing) -> tuple[tuple[Measure, ...], dict[str, str]]:
    """The measures of a bounds plan (:meth:`Query._auto_plan`), each distinct one computed
    once, and for each histogram's measure name the name of the plan's measure holding its
    exact counts.

    Two ``"auto"`` statistics of one column with the same grid and row bounds (a sum and a mean
    of ``value``) have the same exact bin counts, so the statement computes them once; each
    statistic still draws its own noise on them, at its own price, as before (its event is in
    the charge), so the release and its cost are unchanged: only a duplicate aggregate (and,
    in DuckDB, the materialised relation two aggregates of it would share) is saved. Public
    parameters only."""
    first: dict[Measure, str] = {}
    measures: list[Measure] = []
    computed: dict[str, str] = {}
    for a in pricing.auto:
        if a.reads is not None:  # reads another statistic's noisy histogram
            continue
        same = dataclasses.replace(a.measure, name="")
        if same not in first:
            first[same] = a.measure.name
            measures.append(a.measure)
        computed[a.measure.name] = first[same]
    return tuple(measures), computed


@dataclass(frozen=True)
class DerivedInfo:
    """What the builder knows of a derived column from its definition (public): the text the
    analyst wrote, its bounds (declared or derived) and its listed values, or None, and its
    engine type when the input types are known."""

    name: str
    text: str
    bounds: tuple[float, float] | None
    values: tuple[object, ...] | None
    sql_type: str | None


def _bound_rules(step: Any, stats: tuple[tuple[str, Statistic], ...]) -> dict[str, str]:
    """How the planner bounds each statistic: by its own rule (``"own: count"``, ``"own:
    sum"``, ``"own: mean"``: its own pair, see :func:`~dpkit.analytics._planner.statistic_bounds`;
    ``", or pool (s and m)"`` added: a sum and a mean that may be released from one pair of
    measures at one pair, :func:`~dpkit.analytics._planner.pooled_bounds`) or by the query's
    shared pair (``"shared"``)."""
    from dpkit.analytics._planner import OWN_RULES

    own = step.groups is not None and bool(step.targets)
    out = {
        n: f"own: {OWN_RULES[st.kind]}" if own and st.kind in OWN_RULES else "shared"
        for n, st in stats
    }
    for n, pn, _ in step.pools if own else ():
        for x in (n, pn):
            out[x] += f", or pool ({n} and {pn})"
    return out


def _release_envelope(mode: str, epsilon: float, delta: float, zcdp_share: ZcdpShare | None) -> Any:
    """What a planned query's release can cost at most, whatever bounds the planner picks: the
    release is priced at ``(epsilon, delta)``, and pricing never charges more than the pair it
    is given (shares rounded down, costs up): ``epsilon`` in a pure session, the pair in a basic
    one, and in a zCDP session (no private partition selection) the rho the budget's rule gives
    the pair, which is the very rho the release is priced at."""
    from dpkit.events import ApproxDpEvent, PureDpEvent, ZCdpEvent

    if mode == "pure":
        return PureDpEvent(epsilon=epsilon)
    if mode == "approx":
        return ApproxDpEvent(epsilon=epsilon, delta=delta)
    return ZCdpEvent(rho=_rho_rule(zcdp_share)(epsilon, delta))


def _rho_rule(zcdp_share: ZcdpShare | None) -> Callable[[float, float], float]:
    """The zCDP budget's rule from a query's ``(epsilon, delta)`` to the rho it is priced at
    (the budget's own, else :func:`~dpkit.accounting.budget.zcdp_share_default`)."""
    from dpkit.accounting.budget import zcdp_share_default

    rule = zcdp_share or zcdp_share_default

    def to_rho(epsilon: float, delta: float) -> float:
        return float(rule(epsilon, delta)[0])

    return to_rho


def _input_bounds(
    name: str, columns: tuple[str, ...], inputs: Any
) -> dict[str, tuple[object, object]]:
    """The declared bounds of a derived column's inputs, checked (numbers with lower < upper
    within +-2**50, or two dates in order)."""
    from dpkit.analytics._aggregates import is_date_bound, parse_date_bound

    if not isinstance(inputs, dict):
        raise PrivacyParameterError(
            f"inputs must be a dict {{column: (lower, upper)}}, got {inputs!r}"
        )
    out: dict[str, tuple[object, object]] = {}
    for col, b in inputs.items():
        if col not in columns:
            raise PrivacyParameterError(
                f"derived column {name!r} does not read {col!r}; inputs name columns of its "
                f"expression ({list(columns)})"
            )
        if isinstance(b, (tuple, list)) and len(b) == 2 and any(is_date_bound(x) for x in b):
            lo_d = parse_date_bound(b[0], f"lower bound of {col!r}")
            hi_d = parse_date_bound(b[1], f"upper bound of {col!r}")
            if not lo_d <= hi_d:
                raise PrivacyParameterError(f"bounds of {col!r} must be in order, got {b!r}")
            out[col] = (lo_d, hi_d)
            continue
        checked = Statistic(kind="sum", column=col).with_public_bounds(*_pair(col, b)).bounds
        assert isinstance(checked, tuple)
        out[col] = (checked[0], checked[1])
    return out


def _pair(col: str, b: Any) -> tuple[Any, Any]:
    if isinstance(b, str) or not isinstance(b, (tuple, list)) or len(b) != 2:
        raise PrivacyParameterError(f"bounds of {col!r} must be a pair (lower, upper), got {b!r}")
    return b[0], b[1]


def _bucket_value(v: Any) -> object:
    """A bucket value: None, a bool, an int, a finite float or a string (public literals)."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float) and math.isfinite(v):
        return v
    raise PrivacyParameterError(f"bucket values must be text, numbers or booleans, got {v!r}")


_MAX_KEYS = 1 << 24


def _parse_keys(keys: Any, cols: tuple[str, ...]) -> tuple[tuple[Any, ...], ...]:
    """Public keys as a tuple of normalised key tuples (order kept, duplicates dropped)."""
    rows: list[tuple[Any, ...]]
    if isinstance(keys, dict):
        if set(keys) != set(cols):
            raise PrivacyParameterError(
                f"keys dict must have exactly the group-by columns {list(cols)}, got {list(keys)}"
            )
        lists = []
        for c in cols:
            v = keys[c]
            if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
                raise PrivacyParameterError(f"keys[{c!r}] must be a list of values")
            lists.append(list(v))
            if len(lists[-1]) > _MAX_KEYS:
                raise PrivacyParameterError(f"keys[{c!r}]: more than 2**24 public keys")
        # Refuse from the list lengths alone, before the cartesian product is built.
        if math.prod(len(v) for v in lists) > _MAX_KEYS:
            raise PrivacyParameterError(
                "the product of the keys lists' lengths is more than 2**24 public keys"
            )
        rows = [tuple(t) for t in itertools.product(*lists)]
    elif hasattr(keys, "columns") or type(keys).__module__.startswith("pyarrow"):
        rows = _frame_keys(keys, cols)
    elif isinstance(keys, (list, tuple)) or (
        hasattr(keys, "__iter__") and not isinstance(keys, (str, bytes))
    ):
        rows = []
        for k in keys:
            if len(cols) == 1 and not isinstance(k, tuple):
                rows.append((k,))
            else:
                if not isinstance(k, tuple) or len(k) != len(cols):
                    raise PrivacyParameterError(
                        f"each key must be a tuple of {len(cols)} values "
                        f"({', '.join(cols)}), got {k!r}"
                    )
                rows.append(k)
    else:
        raise PrivacyParameterError(
            f"keys must be a list, a dict of lists or a frame, got {type(keys).__name__}"
        )
    seen: dict[tuple[Any, ...], None] = {}
    for r in rows:
        key = tuple(normalize_key(v) for v in r)
        for v in key:
            if v is not None and not isinstance(v, _SQL_SCALARS) and not hasattr(v, "__hash__"):
                raise PrivacyParameterError(f"key values must be hashable, got {v!r}")
        seen.setdefault(key, None)
    if not seen:
        raise PrivacyParameterError("keys must not be empty")
    if len(seen) > _MAX_KEYS:
        raise PrivacyParameterError("more than 2**24 public keys")
    return tuple(seen)


def _frame_keys(frame: Any, cols: tuple[str, ...]) -> list[tuple[Any, ...]]:
    names_attr = getattr(frame, "column_names", None)
    names = list(frame.columns if names_attr is None else names_attr)
    missing = [c for c in cols if c not in names]
    if missing:
        raise PrivacyParameterError(f"keys frame lacks the group-by columns {missing}")
    mod = type(frame).__module__
    if mod.startswith("polars"):
        return [tuple(r) for r in frame.select(list(cols)).iter_rows()]
    if mod.startswith("pyarrow"):
        d = frame.select(list(cols)).to_pydict()
        return list(zip(*(d[c] for c in cols), strict=True))
    sub = frame[list(cols)]
    return [tuple(r) for r in sub.itertuples(index=False, name=None)]
