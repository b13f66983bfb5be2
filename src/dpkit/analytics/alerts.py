"""Threshold alerts: check a count (or bounded sum) again and again against a threshold,
paying for the alerts rather than for every check.

``alert = session.alert("admissions", query, threshold=80, epsilon=1.0, max_alerts=2)`` opens
an alert on a query with one aggregate (a count, or a sum with public bounds ``0 <= lower``)
and charges the session's budget once; ``alert.check(where="day = DATE '2026-03-01'")`` runs
the query with that extra filter and answers, for the global value or for each public key of a
grouped query, whether it is above the threshold. It is the sparse vector technique
(:class:`~dpkit.mechanisms.SparseVector`: Lyu, Su and Li 2017, Algorithm 7): ``epsilon`` in
total whatever the number of checks below the threshold, and the alert stops after
``max_alerts`` answers above it.

Values (``values=True``): each answer above the threshold is its noisy value instead of
``True`` (:class:`~dpkit.mechanisms.NumericSparseVector`: ``numeric_share`` of ``epsilon``
for the values, each released with fresh Laplace noise of scale ``c Delta / eps3``, the rest
for the comparisons; still ``epsilon`` in total).

Sensitivity. Every answer is one query of the stream: a count of the rows kept after
contribution bounding (at most ``R = max_rows_per_partition`` rows of a person in a group, so
it moves by at most ``R``), or a sum of values clamped to ``[lower, upper]`` with ``0 <= lower``
(at most ``R upper``). Adding a person never lowers one (monotone queries). The sparse vector
technique needs only this per-query bound, whatever the number of days or groups a person
appears in.

State. The alert's record is in the budget's ledger: the charge that opened it (metadata
``{"alert": name, ...}``) and one record per check (count 0: nothing more is spent) with its
answers. The threshold noise lives only in the process that opened the alert and is never
written anywhere, so an alert cannot be resumed after a restart: opening one whose name the
ledger already holds is refused before any charge (a fresh stream under the old name would
re-ask answered checks against new noise without saying so). Open it under a new name (charged
again); :meth:`~dpkit.analytics.Session.alert_log` reads the answers given so far.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from dpkit.analytics._plan import EngineResult
from dpkit.analytics._release import normalize_key
from dpkit.analytics.builder import PreparedQuery, Query
from dpkit.errors import BudgetExceededError, EngineError, PrivacyParameterError
from dpkit.mechanisms import NumericSparseVector, SparseVector, SparseVectorStream

__all__ = [
    "ThresholdAlert",
    "alert_records",
    "alert_sensitivity",
    "alert_values",
    "check_alert_name",
    "prepare_for_alert",
]

_MAX_NAME = 200


def alert_records(budget: Any, name: str) -> list[Any]:
    """The ledger records of the alert ``name`` (its opening charge and its checks), in
    order: the :class:`~dpkit.accounting.ChargeRecord` objects whose metadata names it."""
    return [r for r in budget.history() if r.metadata.get("alert") == name]


def check_alert_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > _MAX_NAME:
        raise PrivacyParameterError(
            f"an alert needs a name (a non-empty string of at most {_MAX_NAME} characters), "
            f"got {name!r}"
        )
    return name


#: The session's check of a prepared check (against the schema, nothing read) and its run.
Runner = Callable[[PreparedQuery], Callable[[], EngineResult]]


class ThresholdAlert:
    """An open alert (made by :meth:`~dpkit.analytics.Session.alert`; see the module doc).

    Not copyable or picklable (its stream is not): an answered check cannot be re-asked.
    """

    __slots__ = ("_budget", "_checks", "_mech", "_name", "_query", "_runner", "_stream")

    def __init__(
        self,
        *,
        runner: Runner,
        name: str,
        query: Query,
        mechanism: SparseVector | NumericSparseVector,
        stream: SparseVectorStream,
        budget: Any,
    ) -> None:
        self._runner = runner
        self._name = name
        self._query = query
        self._mech = mechanism
        self._stream = stream
        self._budget = budget
        self._checks = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def mechanism(self) -> SparseVector | NumericSparseVector:
        """The sparse vector mechanism the alert was charged for."""
        return self._mech

    @property
    def halted(self) -> bool:
        """Whether the last allowed alert has been given (every later check is refused)."""
        return self._stream.halted

    @property
    def alerts(self) -> int:
        """Answers above the threshold so far."""
        return self._stream.positives

    @property
    def checks(self) -> int:
        """Checks run so far."""
        return self._checks

    def check(self, where: str | None = None, *, label: str | None = None) -> Any:
        """Run the alert's query (with the extra filter ``where``) and answer whether it is
        above the threshold: ``True``/``False``, or for a grouped query a dict key ->
        ``True``/``False`` (``None`` for keys after the alert stopped, in key order). An alert
        opened with ``values=True`` answers its noisy value (a float) instead of ``True``.

        Refused before reading data once the alert has stopped
        (:class:`~dpkit.errors.BudgetExceededError`). The answers are written to the ledger
        (``label``, default ``where``, names the check there) before they are returned.
        """
        if self.halted:
            raise BudgetExceededError(
                f"the alert {self._name!r} has stopped after its {self.alerts} alert(s); open a "
                "new alert (charged again) to keep checking"
            )
        if label is not None and not isinstance(label, str):
            raise PrivacyParameterError(f"label must be a string, got {label!r}")
        query = self._query if where is None else self._query.where(where)
        prepared = prepare_for_alert(query)
        run = self._runner(prepared)
        try:
            result = run()
        except Exception:
            raise EngineError(
                "the engine failed during a check; nothing answered (the engine's message is "
                "withheld: it may quote a private value)"
            ) from None
        keys, values = alert_values(prepared, result)
        answers: list[bool | float | None] = []
        for v in values:
            answers.append(None if self._stream.halted else _answer(self._stream.ask(v)))
        self._checks += 1
        self._budget.charge(
            self._mech.event,
            count=0,
            metadata={
                "alert": self._name,
                "check": self._checks,
                "label": label if label is not None else where,
                "answers": answers,
            },
        )
        if not prepared.group_by:
            return answers[0]
        return {(k[0] if len(k) == 1 else k): a for k, a in zip(keys, answers, strict=True)}

    def __repr__(self) -> str:
        return (
            f"ThresholdAlert({self._name!r}, threshold={self._mech.threshold}, "
            f"checks={self._checks}, alerts={self.alerts}/{self._mech.max_positives})"
        )

    def _refuse(self, *_: Any) -> Any:
        raise PrivacyParameterError(
            "an alert cannot be copied or pickled: a copy would answer checks again against the "
            "same threshold noise"
        )

    __copy__ = _refuse
    __deepcopy__ = _refuse
    __reduce__ = _refuse
    __reduce_ex__ = _refuse


def _answer(raw: Any) -> bool | float:
    """One answer of the stream: ``False``, ``True``, or a noisy value (numeric alerts)."""
    if raw is False or raw is True:
        return bool(raw)
    return float(raw)


def prepare_for_alert(query: Query) -> PreparedQuery:
    """The plan of one check (a fresh salt): the query priced at a nominal budget, used only
    for its plan and the integer step of its measure (nothing is charged for it)."""
    mode = query.session.mode
    return query.prepare(epsilon=1.0, delta=None if mode == "pure" else 1e-9)


def alert_values(prepared: PreparedQuery, result: EngineResult) -> tuple[list[Any], list[float]]:
    """The checked values, in key order (absent keys: 0), in the aggregate's units."""
    (sp,) = prepared.pricing.stats
    mp = sp.measures[0]
    col = result.values.get(mp.measure.name, ())
    index = {tuple(normalize_key(v) for v in k): i for i, k in enumerate(result.keys)}
    keys = [()] if not prepared.group_by else list(prepared.public_keys or [])
    out = []
    for k in keys:
        i = index.get(tuple(normalize_key(v) for v in k))
        if i is None and not prepared.group_by and len(result.keys) == 1:
            i = 0
        raw: Any = 0 if i is None else col[i]
        out.append(float(int(raw)) * mp.step)
    return keys, out


def alert_sensitivity(prepared: PreparedQuery) -> float:
    """``R`` for a count, ``R upper`` for a sum with ``0 <= lower`` (module docstring)."""
    (sp,) = prepared.pricing.stats
    r = prepared.pricing.max_rows_per_partition
    if sp.stat.kind == "count":
        return float(r)
    assert isinstance(sp.stat.bounds, tuple)
    return float(r) * float(sp.stat.bounds[1])
