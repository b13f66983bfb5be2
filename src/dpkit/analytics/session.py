"""A private analytics session: one table, one privacy unit, one budget, one engine.

>>> s = Session("people.parquet", privacy_unit="user_id",
...             budget=Budget(epsilon=3.0, delta=1e-6))  # doctest: +SKIP
>>> q = (s.query().group_by("region").bound(max_partitions=1, max_rows_per_partition=5)
...       .agg(n=count(), income=mean("income", bounds=(0, 500_000))))   # doctest: +SKIP
>>> q.summarize(epsilon=1.0, delta=1e-7)   # noise per column, touches no data  # doctest: +SKIP
>>> q.run(epsilon=1.0, delta=1e-7)   # charges the budget first, then releases  # doctest: +SKIP

Noise follows the budget: a pure budget (``delta == 0``) gives discrete Laplace noise and pure
epsilon accounting; a budget with ``delta > 0`` gives discrete Gaussian noise, charged in zCDP
when the budget is kept in rho (``method="zcdp"``: many queries compose tightly) or as one
``(epsilon, delta)`` pair per query with ``method="basic"`` (the default of ``Budget``).
Private partition selection needs delta > 0: with ``method="zcdp"`` it is Gaussian thresholding,
charged as approximate zCDP (its rho and its threshold delta, taken from the budget's
``approx_delta_allowance``).
Queries compose sequentially in the budget; the groups of one query compose in parallel (each
unit is bounded to ``max_partitions`` groups, and the sensitivities account for that).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from dpkit._numeric.validation import check_probability
from dpkit.accounting import SubBudget
from dpkit.analytics._plan import EngineResult, Source
from dpkit.analytics._pricing import Mode, ZcdpShare
from dpkit.analytics._report import layout, query_refusal, unit_notes
from dpkit.analytics._sources import (
    Origin,
    file_kind,
    frame_kind,
    is_duckdb_connection,
    resolve,
    same_rows,
    spark_kind,
)
from dpkit.analytics._table import TableDescription, protects
from dpkit.analytics._topk import check_score
from dpkit.analytics.alerts import (
    ThresholdAlert,
    alert_records,
    alert_sensitivity,
    check_alert_name,
    prepare_for_alert,
)
from dpkit.analytics.builder import PreparedQuery, PublicTable, Query
from dpkit.analytics.engines._protocol import Engine, EngineError, as_engine, column_types
from dpkit.errors import BudgetExceededError, PrivacyParameterError
from dpkit.events import Neighbouring
from dpkit.mechanisms import NumericSparseVector, SparseVector
from dpkit.noise import RandomSource, resolve_source

if TYPE_CHECKING:
    from dpkit.analytics.sqlquery import Metadata, SqlQuery

__all__ = ["UNSET", "Session", "protects", "sql_session"]

_OUTPUTS = ("pandas", "polars", "arrow")
#: Smallest ``alpha`` of a session: the certified interval searches add an absolute margin of
#: ``1e-12`` to every tail bound (``dpkit.analytics._intervals``), so below about ``1e-12`` no
#: width satisfies them (a mean's search doubled its width forever, after the charge); this
#: floor keeps a hundredfold room above that margin.
MIN_ALPHA = 1e-10


class _Unset:
    """The type of :data:`UNSET`: a parameter the caller did not write."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "UNSET"


#: Default of ``privacy_unit``: not given (refused; ``None`` must be written out).
UNSET: Any = _Unset()


def check_privacy_unit(privacy_unit: Any) -> str | None:
    """``privacy_unit`` as given: a column name, or ``None`` written out (each row is a person).

    Omitting it raises :class:`~dpkit.errors.PrivacyParameterError`: with several rows per
    person, protecting rows does not protect people, so the choice is never made silently.
    """
    if privacy_unit is UNSET:
        raise PrivacyParameterError(
            "Say who the data protects: give privacy_unit='<column>' naming the column that "
            "identifies a person (all of a person's rows are then protected together), or "
            "privacy_unit=None if every row is a different person (then only rows are "
            "protected)."
        )
    if privacy_unit is not None and (not isinstance(privacy_unit, str) or not privacy_unit):
        raise PrivacyParameterError(
            f"privacy_unit must be a column name or None, got {privacy_unit!r}"
        )
    return privacy_unit


def _budget_mode(budget: Any) -> Mode:
    """How the session noises and charges, read from the budget's kind.

    ``pure`` (delta = 0): discrete Laplace; ``zcdp`` (a budget kept in rho): discrete Gaussian
    charged in rho; ``approx`` (a basic ``(epsilon, delta)`` budget): discrete Gaussian charged as
    the ``(epsilon, delta)`` pair its rho certifies. Other budget kinds are refused, and so are
    budgets under the replace-one relation (queries are calibrated for add/remove).
    """
    if not callable(getattr(budget, "charge", None)):
        raise PrivacyParameterError(
            f"budget must be a dpkit budget (e.g. dpkit.accounting.Budget), got {budget!r}"
        )
    relation = getattr(budget, "neighbouring", Neighbouring.ADD_REMOVE)
    if relation is not Neighbouring.ADD_REMOVE:
        # Sensitivities, noise and partition selection are calibrated for add/remove (one
        # person's rows added or removed), and a replace-one budget would charge the
        # approximate-zCDP partition selection at no sound price: refused, not converted.
        raise PrivacyParameterError(
            "a session needs an add/remove budget (Budget(..., neighbouring='add_remove'), the "
            f"default): its queries are calibrated for adding or removing a person; got a budget "
            f"with neighbouring={getattr(relation, 'value', relation)!r}"
        )
    kind = getattr(budget, "kind", None)
    if kind == "pure":
        return "pure"
    if kind == "zcdp":
        return "zcdp"
    if kind == "basic":
        return "approx"
    raise PrivacyParameterError(
        f"a session needs a pure budget (delta=0), or an (epsilon, delta) budget with "
        f"method='basic' or method='zcdp'; got a budget of kind {kind!r}"
    )


class Session:
    """Private queries over one table.

    Parameters
    ----------
    source:
        A Parquet or CSV path or glob, a pandas/Polars (eager or lazy)/Arrow frame, a DuckDB
        connection (then give ``table=``), a Spark DataFrame (classic or Spark Connect), or a
        SparkSession (classic or Connect; then give ``table=``, a catalog table name or a
        Parquet/CSV path). Spark sources run on the Spark engine. A frame's columns keep
        their declared types; a column of Python objects (pandas ``object``, Polars
        ``Object``) is text, each value written so that values Python holds equal are one text
        (:mod:`dpkit.analytics._object_text`; an object of another type is refused here).
    privacy_unit:
        Required. The column identifying a person (every row of a person is bounded
        together), or ``None`` written out: each row is a different person (only rows are
        protected). Omitting it raises :class:`~dpkit.errors.PrivacyParameterError`.
    budget:
        The session's privacy budget (charged before every release), under the add/remove
        relation (a ``neighbouring="replace"`` budget is refused).
    table:
        With a DuckDB connection: the table or view to query. With a SparkSession: a table
        name (``db.table``) or a path (one with a ``.parquet``/``.csv`` suffix, a ``/`` or a
        URL scheme such as ``s3://``).
    engine:
        ``"duckdb"`` (default), ``"spark"`` (paths read by the active SparkSession, or a new
        local one), or an engine object: an :class:`~dpkit.analytics.engines.Engine` such as
        :class:`~dpkit.analytics.engines.spark.SparkEngine`, or an object with
        ``columns``/``register``/``execute`` (completed by
        :func:`~dpkit.analytics.engines.as_engine`).
    bounding_hash:
        The hash that picks each unit's kept groups and rows in the built-in engines:
        ``"native"`` (default; the engine's fast 64-bit hash) or ``"md5"`` (MD5 of a canonical
        text of the row: DuckDB and Spark keep exactly the same rows).
    alpha:
        Confidence intervals have level ``1 - alpha`` (default 0.05), ``alpha`` in
        ``[1e-10, 0.5]``.
    source_of_randomness:
        A :class:`~dpkit.noise.RandomSource` (default: the secure process-wide source). A
        seeded source must have been created with ``insecure=True``.
    memory_limit, threads:
        Passed to the DuckDB engine (e.g. ``memory_limit="1GB"``).
    """

    def __init__(
        self,
        source: object,
        *,
        privacy_unit: str | None = UNSET,
        budget: Any,
        table: str | None = None,
        engine: str | object = "duckdb",
        alpha: float = 0.05,
        source_of_randomness: RandomSource | None = None,
        memory_limit: str | None = None,
        threads: int | None = None,
        bounding_hash: str = "native",
    ) -> None:
        privacy_unit = check_privacy_unit(privacy_unit)
        self.alpha = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        if not MIN_ALPHA <= self.alpha <= 0.5:
            raise PrivacyParameterError(f"alpha must be between {MIN_ALPHA} and 0.5, got {alpha!r}")
        self.source_of_randomness = resolve_source(source_of_randomness)
        self.mode: Mode = _budget_mode(budget)
        self.budget = budget
        self.privacy_unit: str | None = privacy_unit
        if bounding_hash not in ("native", "md5"):
            raise PrivacyParameterError(
                f"bounding_hash must be 'native' or 'md5', got {bounding_hash!r}"
            )
        hash_kind: Literal["native", "md5"] = "md5" if bounding_hash == "md5" else "native"
        self._engine: Engine = _make_engine(source, engine, hash_kind, memory_limit, threads)
        located = resolve(source, table, locate=self._engine.locate, register=self._engine.register)
        # the object the private rows came from, kept alive: passed again as a public table,
        # it is refused by identity
        self._origin = Origin(located, obj=source, frame=frame_kind(source) is not None)
        types = column_types(self._engine.columns(located))
        #: The private table as queries see it (schema only; no row is read).
        self.table = TableDescription(
            source=located,
            columns=tuple(types),
            types={c: t for c, t in types.items() if t},
            privacy_unit=privacy_unit,
        )
        if privacy_unit is not None:
            self.table.check_column(privacy_unit, "privacy_unit")

    # ------------------------------------------------------------------ the table
    @property
    def columns(self) -> tuple[str, ...]:
        """The source's column names (schema only; no rows are read)."""
        return self.table.columns

    def column_type(self, column: str) -> str | None:
        """The engine's type name of a source column (``"DATE"``, ``"BIGINT"``, ...), or None
        when the column is unknown or the engine reports no types (schema only)."""
        return self.table.column_type(column)

    @property
    def engine(self) -> Engine:
        """The engine the session's queries run on."""
        return self._engine

    @property
    def protects(self) -> str:
        """What this session's releases protect, in words (also in every result's attrs)."""
        return protects(self.privacy_unit)

    @property
    def remaining(self) -> Any:
        """What the budget has left (the budget's own ``remaining``)."""
        return getattr(self.budget, "remaining", None)

    @property
    def spent(self) -> Any:
        """What the budget has spent (the budget's own ``spent``)."""
        return getattr(self.budget, "spent", None)

    @property
    def zcdp_share(self) -> ZcdpShare | None:
        """How the budget converts a query's ``(epsilon, delta)`` to zCDP (its
        :meth:`~dpkit.accounting.Budget.zcdp_share`), for a zCDP session; else None."""
        if self.mode != "zcdp":
            return None
        share: ZcdpShare | None = getattr(self.budget, "zcdp_share", None)
        return share

    def public_table(self, table: object) -> PublicTable:
        """A public table for :meth:`Query.join_public`: its source and its schema.

        A path or frame is opened like the session's own source; a string that is neither a
        Parquet nor a CSV path names a table of the session's engine. The private source
        itself is refused (declaring it public would release it without noise), under every
        spelling :func:`~dpkit.analytics._sources.same_rows` and the engine's ``shares_rows``
        detect: the same object or table name, a path to one of its files, on DuckDB a view,
        on Spark anything but plain files. A *copy* of the private data (another file, a
        frame built from its rows) cannot be detected on any engine: public tables must be
        declared by whoever owns the session.
        """
        if isinstance(table, Source):
            source = table
        elif isinstance(table, str) and file_kind(table) is None:
            source = Source(kind="table", location=table)
        else:
            try:
                source = resolve(
                    table, None, locate=self._engine.locate, register=self._engine.register
                )
            except FileNotFoundError as exc:
                raise PrivacyParameterError(
                    f"the public table matches no file ({exc}): give the path or glob of the "
                    "public files"
                ) from None
        public = Origin(source, obj=table, frame=frame_kind(table) is not None)
        if same_rows(self._origin, public, self._engine.shares_rows):
            raise PrivacyParameterError(
                "the private table cannot be joined as a public table: its rows would enter "
                "the query without contribution bounds"
            )
        return PublicTable(source=source, schema=column_types(self._engine.columns(source)))

    # ------------------------------------------------------------------ running
    def validate(self, prepared: PreparedQuery) -> None:
        """Everything :meth:`run` checks before it charges, without charging: the engine
        checks each plan of ``prepared`` against the schema (reads no row). Raises what
        :meth:`run` would raise."""
        self._check_prepared(prepared)
        self._checked(prepared)

    def run(
        self,
        prepared: PreparedQuery,
        *,
        budget: Any = None,
        output: str = "pandas",
        metadata: dict[str, Any] | None = None,
    ) -> Any:
        """Validate ``prepared``, charge its whole cost, then execute and release it.

        The one place a query is charged and run. In order: the engine checks every plan the
        query will run against the schema (nothing read; a refusal spends nothing); the budget
        is charged with the query's event (``budget``: this session's budget by default, or a
        sub-budget of it, or another budget of the same kind; ``metadata`` goes into the
        ledger's record of the charge); a refused charge raises
        :class:`~dpkit.errors.BudgetExceededError` saying what the query would have cost, with
        nothing spent and no row read. Then, for a query with ``bounds="auto"``, the bounds
        are estimated privately (part of the charge) and the release plan is built with
        them; the release runs and is noised, with confidence intervals.

        After the charge an engine failure may have been caused by a private value, and its
        text may quote it: it is replaced by a generic :class:`~dpkit.errors.EngineError`.

        Safe to call from several threads at once: charging is serialised by the budget,
        and each call keeps its checked statements to itself (the session holds no
        per-query state); the engine must allow concurrent statements (DuckDB: a cursor per
        thread).
        """
        if output not in _OUTPUTS:
            raise PrivacyParameterError(f"output must be one of {_OUTPUTS}, got {output!r}")
        self._check_prepared(prepared)
        charged = self._charged_budget(budget)
        checked = self._checked(prepared)
        # A planned query's release salt is drawn before the charge, so the engine may rank
        # the release's rows once for the contribution step and the release (see
        # _shared_ranking); decided from the plans alone, before anything is charged.
        salted = (
            prepared.with_fresh_release_salt(self.source_of_randomness)
            if prepared.planned
            else None
        )
        salt = None if salted is None else salted.plan.bound.salt
        shared = self._shared_ranking(salted)
        try:
            return self._run_charged(prepared, charged, checked, salt, shared, output, metadata)
        finally:
            if shared is not None:
                shared.close()

    def _shared_ranking(self, salted: PreparedQuery | None) -> Any:
        """The engine's one ranking of a planned query's rows for its contribution step and
        its release (:meth:`~dpkit.analytics.engines.duckdb.DuckDBEngine.share_ranking`),
        ``salted`` the query with its release salt; None for other queries, other engines, or
        where it does not apply. Public: the plans and the schema decide it; called before
        the charge."""
        share = getattr(self._engine, "share_ranking", None)
        if share is None or salted is None or salted.contribution_plan is None:
            return None
        try:
            return share(salted.plan, salted.contribution_plan)
        except Exception:  # the statements of their own then, as they were checked
            return None

    def _run_charged(
        self,
        prepared: PreparedQuery,
        charged: Any,
        checked: list[Callable[[], EngineResult]],
        salt: int | None,
        shared: Any,
        output: str,
        metadata: dict[str, Any] | None,
    ) -> Any:
        """The rest of :meth:`run`: charge, execute and release (``salt``: a planned query's
        release salt; ``shared``: its shared ranking, or None)."""
        try:
            if metadata is None:
                charged.charge(prepared.pricing.event)
            else:
                charged.charge(prepared.pricing.event, metadata=metadata)
        except BudgetExceededError as exc:
            raise query_refusal(prepared.pricing, charged, exc) from exc
        plan: dict[str, Any] = {}
        run_release = self._engine.execute if shared is None else shared.release
        run_values = self._engine.execute if shared is None else shared.values
        if prepared.planned:
            # The contribution step (its cost is in the charge), then the release priced at
            # the chosen bounds; its plans differ from the checked ones only by the bounds,
            # the measures' own bounds (each within the plan's) and the salt.
            first = checked.pop(0)
            per_unit = _after_charge(first if shared is None else shared.contributions)
            prepared, plan = prepared.plan_contributions(per_unit, source=self.source_of_randomness)
            assert salt is not None  # drawn for every planned query
            prepared = prepared.with_release_salt(salt)
            checked = [
                (lambda p=p: run_values(p))  # type: ignore[misc]
                for p in (prepared.bounds_plan,)
                if p is not None
            ]
            release_plan = prepared.plan
            checked.append(lambda: run_release(release_plan))
        if prepared.two_step:
            counts = _after_charge(checked[0])
            bounds = prepared.estimate_bounds(counts, source=self.source_of_randomness)
            prepared = prepared.with_bounds(bounds)
            if salt is not None:
                prepared = prepared.with_release_salt(salt)
            # a sum released from its column's mean's measures (planned_pools) has its bounds
            pooled = {
                sp.name: sp.shared_with
                for sp in prepared.pricing.stats
                if sp.stat.kind == "sum" and sp.shared_with in bounds
            }
            plan["bounds"] = {
                sp.name: list(bounds[pooled.get(sp.name, sp.name)][:2])
                for sp in prepared.pricing.stats
                if pooled.get(sp.name, sp.name) in bounds
            }
            # the centres the release is priced at: a planned mean whose centred sum did not
            # price at its bounds fell back to the middle (resolve_auto), and reports none
            centres = {
                sp.name: {"centre": sp.stat.centring[0], "count_share": sp.stat.centring[1]}
                for sp in prepared.pricing.stats
                if sp.stat.centring is not None and sp.name in bounds
            }
            if centres:
                plan["centres"] = centres
            release = prepared.plan
            result = _after_charge(lambda: run_release(release))
        else:
            result = _after_charge(checked[0])
        notes = {**unit_notes(self.privacy_unit), "statistics": layout(prepared.pricing)}
        if plan:
            notes["plan"] = plan
        return prepared.release_from(
            result,
            source=self.source_of_randomness,
            output=output,
            warn_empty=True,
            notes=notes,
        )

    def _check_prepared(self, prepared: PreparedQuery) -> None:
        if not isinstance(prepared, PreparedQuery):
            raise PrivacyParameterError(
                f"run() takes a prepared query (query.prepare(epsilon=...)), got "
                f"{type(prepared).__name__}"
            )
        plan = prepared.plan
        if (
            plan.source != self.table.source
            or plan.bound.privacy_unit != self.privacy_unit
            or prepared.pricing.mode != self.mode
        ):
            raise PrivacyParameterError(
                "this prepared query was made by another session (its table, privacy unit or "
                "accounting differ): prepare it from this session's query()"
            )

    def _checked(self, prepared: PreparedQuery) -> list[Callable[[], EngineResult]]:
        """The engine's check of each plan ``prepared`` runs (bounds plan first), before the
        charge; the runs of the checked statements, in order."""
        plans = [
            p
            for p in (prepared.contribution_plan, prepared.bounds_plan, prepared.plan)
            if p is not None
        ]
        return [self._engine.validate(p).run for p in plans]

    def _charged_budget(self, budget: Any) -> Any:
        """The budget a query charges: the session's, a sub-budget of it, or a budget of the
        same kind (the query was priced for the session's kind of accounting)."""
        if budget is None or budget is self.budget:
            return self.budget
        if isinstance(budget, SubBudget) and budget.parent is self.budget:
            return budget
        if _budget_mode(budget) != self.mode:
            raise PrivacyParameterError(
                "the budget to charge keeps a different kind of accounting than the session's "
                f"({self.mode!r}): charge the session's budget, a sub-budget of it, or a "
                "budget of the same kind"
            )
        return budget

    def _check_runner(self, prepared: PreparedQuery) -> Callable[[], EngineResult]:
        """The engine's check of ``prepared`` (nothing read) and the run of the checked plan."""
        self._check_prepared(prepared)
        return self._checked(prepared)[0]

    # ------------------------------------------------------------------ alerts
    def alert(
        self,
        name: str,
        query: Query,
        *,
        threshold: float,
        epsilon: float,
        max_alerts: int = 1,
        values: bool = False,
        numeric_share: float = 0.5,
    ) -> ThresholdAlert:
        """Open a threshold alert on ``query`` and charge the session's budget once (see
        :mod:`dpkit.analytics.alerts`).

        ``query``: this session's query with one aggregate, ``count()`` or ``sum(column,
        bounds=(lower, upper))`` with ``0 <= lower``; ungrouped, or grouped with public keys
        (one answer per key). ``threshold``: in the aggregate's units. ``epsilon``: the whole
        cost, whatever the number of checks below the threshold (pure DP; a zCDP or basic
        budget charges its own reading of it). ``max_alerts``: the alert stops after this many
        answers above the threshold. ``values``: answer the noisy value of each answer above
        the threshold instead of ``True`` (``numeric_share`` of ``epsilon`` pays for the values;
        :class:`~dpkit.mechanisms.NumericSparseVector`). Everything is checked, and a ``name``
        the ledger already holds is refused, before the charge."""
        name = check_alert_name(name)
        if not isinstance(query, Query) or query.session is not self:
            raise PrivacyParameterError("alert() takes a query of this session (session.query())")
        if query.top is not None:
            raise PrivacyParameterError("an alert checks one value per key: drop top_k()")
        if len(query.stats) != 1:
            raise PrivacyParameterError(
                "an alert checks one aggregate: give exactly one, e.g. .agg(n=count())"
            )
        if query.group_columns and query.keys is None:
            raise PrivacyParameterError(
                "a grouped alert needs public keys (group_by(..., keys=[...])): each key is one "
                "check of the stream"
            )
        stat_name, stat = query.stats[0]
        check_score(stat_name, stat)
        prepared = prepare_for_alert(query)
        if not isinstance(values, bool):
            raise PrivacyParameterError(f"values must be True or False, got {values!r}")
        mechanism: SparseVector | NumericSparseVector
        if values:
            mechanism = NumericSparseVector(
                epsilon=epsilon,
                sensitivity=alert_sensitivity(prepared),
                threshold=threshold,
                max_positives=max_alerts,
                monotonic=True,
                numeric_share=numeric_share,
            )
        else:
            mechanism = SparseVector(
                epsilon=epsilon,
                sensitivity=alert_sensitivity(prepared),
                threshold=threshold,
                max_positives=max_alerts,
                monotonic=True,
            )
        self._check_runner(prepared)  # the plan passes the engine's check before the charge
        previous = alert_records(self.budget, name)
        if previous:
            raise PrivacyParameterError(
                f"the alert {name!r} was opened before (ledger record {previous[0].seq}, "
                f"{len(previous) - 1} check(s) since): an alert cannot be resumed, since its "
                "threshold noise is never stored and fresh noise would re-ask answered checks; "
                "open it under a new name (charged again). Its answers: "
                f"session.alert_log({name!r})"
            )
        try:
            self.budget.charge(
                mechanism.event,
                metadata={
                    "alert": name,
                    "threshold": mechanism.threshold,
                    "epsilon": mechanism.epsilon,
                    "max_alerts": mechanism.max_positives,
                    **({"values": True} if values else {}),
                },
            )
        except BudgetExceededError as exc:
            raise BudgetExceededError(
                f"opening the alert {name!r} needs epsilon {mechanism.epsilon}: {exc}"
            ) from exc
        return ThresholdAlert(
            runner=self._check_runner,
            name=name,
            query=query,
            mechanism=mechanism,
            stream=mechanism.start(source=self.source_of_randomness),
            budget=self.budget,
        )

    def alert_log(self, name: str) -> list[dict[str, Any]]:
        """The checks of the alert ``name`` read from the budget's ledger (also after a
        restart): per check its number, label, answers and time."""
        name = check_alert_name(name)
        return [
            {
                "check": r.metadata["check"],
                "label": r.metadata.get("label"),
                "answers": r.metadata.get("answers"),
                "time": r.time,
            }
            for r in alert_records(self.budget, name)
            if "check" in r.metadata
        ]

    # ------------------------------------------------------------------ queries
    def query(self) -> Query:
        """A new, empty query over this session's table."""
        return Query(session=self)

    def sql_query(
        self,
        query: str,
        *,
        metadata: Any = None,
        bounds: Any = None,
        keys: Any = None,
        max_partitions: int | None = None,
        max_rows_per_partition: int | None = None,
        public_tables: dict[str, Any] | None = None,
    ) -> SqlQuery:
        """Check a SQL ``SELECT`` against the private fragment; reads no data, spends nothing.

        Returns a :class:`~dpkit.analytics.sqlquery.SqlQuery` (its ``.query`` is the
        equivalent builder query). ``metadata``: a YAML/TOML path or a dict (bounds, keys,
        contribution limits, public tables; see ``docs/sql.md``); ``bounds={"col": (lo, hi)}``,
        ``keys={"col": [...]}``, ``max_partitions``, ``max_rows_per_partition`` override it for
        the private table; ``public_tables={"name": frame_or_path}`` gives public tables' data.
        A query outside the fragment raises :class:`~dpkit.analytics.sqlquery.SqlError`.
        """
        # The SQL front end (and sqlglot) loads with the first SQL query, not with the session.
        from dpkit.analytics.sqlquery import sql_query

        return sql_query(
            self,
            query,
            metadata=metadata,
            bounds=bounds,
            keys=keys,
            max_partitions=max_partitions,
            max_rows_per_partition=max_rows_per_partition,
            public_tables=public_tables,
        )

    def sql(
        self,
        query: str,
        *,
        epsilon: float,
        delta: float | None = None,
        metadata: Any = None,
        output: str = "pandas",
        **options: Any,
    ) -> Any:
        """Answer a SQL ``SELECT`` privately: check it, charge the budget, release with
        confidence intervals, then apply ``HAVING``/``ORDER BY``/``LIMIT`` to the released rows.

        ``options`` are those of :meth:`sql_query`. A refused query spends nothing.
        """
        return self.sql_query(query, metadata=metadata, **options).run(
            epsilon=epsilon, delta=delta, output=output
        )

    def __repr__(self) -> str:
        source = self.table.source
        return (
            f"Session({source.kind}:{source.location!r}, privacy_unit="
            f"{self.privacy_unit!r}, accounting={self.mode!r}, alpha={self.alpha}; "
            f"protects {self.protects})"
        )


def _after_charge(run: Callable[[], EngineResult]) -> EngineResult:
    """``run()`` after the charge: a failure may have been raised by a private value (an
    overflow, a cast), and its text may quote that value, so it is replaced by a generic
    error, without the engine's message or traceback chain."""
    try:
        return run()
    except Exception:
        raise EngineError(
            "the engine failed after the charge; nothing released (the engine's message "
            "is withheld: it may quote a private value)"
        ) from None


def _make_engine(
    source: object,
    engine: str | object,
    hash_kind: Literal["native", "md5"],
    memory_limit: str | None,
    threads: int | None,
) -> Engine:
    """The engine a session runs on: a Spark source runs on Spark, where its data lives."""
    kind = spark_kind(source)
    if kind is not None and engine == "duckdb":
        engine = "spark"
    if not isinstance(engine, str):
        return as_engine(engine)
    if engine not in ("duckdb", "spark"):
        raise PrivacyParameterError(
            f"engine must be 'duckdb', 'spark' or an engine, got {engine!r}"
        )
    if engine == "spark":
        if memory_limit is not None or threads is not None:
            raise PrivacyParameterError(
                "memory_limit and threads are DuckDB settings; configure Spark through its session"
            )
        from dpkit.analytics.engines.spark import SparkEngine

        spark: Any = source if kind == "session" else None
        if kind == "dataframe":
            frame: Any = source  # a Spark DataFrame (pyspark is imported by the engine)
            spark = frame.sparkSession
        return SparkEngine(spark, hash=hash_kind)
    from dpkit.analytics.engines.duckdb import DuckDBEngine

    connection = source if is_duckdb_connection(source) else None
    return DuckDBEngine(
        connection=connection, memory_limit=memory_limit, threads=threads, hash=hash_kind
    )


def sql_session(
    path: str,
    metadata: Any,
    *,
    privacy_unit: str | None,
    budget: Any,
    alpha: float = 0.05,
    memory_limit: str | None = None,
    engine: str | object = "duckdb",
) -> tuple[Session, Metadata]:
    """A session over one file for a SQL query, its privacy unit taken from the metadata.

    ``privacy_unit`` (if given) must agree with the metadata's private table; ``engine`` is
    passed to the session. Used by ``dpkit query --sql``. Without ``privacy_unit``, the
    metadata's private table must say who is protected (``privacy_unit: <column>``, or
    ``privacy_unit: null`` when every row is a different person): omitting it is refused.
    """
    from dpkit.analytics.sqlquery import load_metadata

    meta = load_metadata(metadata)
    privates = meta.private_tables
    if len(privates) > 1:
        raise PrivacyParameterError(
            f"the metadata declares several private tables ({[t.name for t in privates]}); "
            "a query reads one private file"
        )
    declared = privates[0].privacy_unit if privates else None
    if privacy_unit is not None and declared is not None and declared != privacy_unit:
        raise PrivacyParameterError(
            f"--privacy-unit {privacy_unit!r} disagrees with the metadata's {declared!r}"
        )
    if privacy_unit is None and not (privates and privates[0].privacy_unit_given):
        table = repr(privates[0].name) if privates else "private"
        raise PrivacyParameterError(
            f"Say who the data protects: the metadata's {table} table needs privacy_unit: "
            "<column> (the column that identifies a person), or privacy_unit: null if every "
            "row is a different person; or give the privacy unit with the query."
        )
    unit = privacy_unit if privacy_unit is not None else declared
    session = Session(
        path,
        privacy_unit=unit,
        budget=budget,
        alpha=alpha,
        memory_limit=memory_limit,
        engine=engine,
    )
    return session, meta
