"""The seam between the session and an engine: what an engine does, and nothing else.

The session (:class:`~dpkit.analytics.Session`) knows an engine only through :class:`Engine`:

* ``columns(source)``: the source's column names and type names, read from its schema;
* ``register(name, frame)``: make an in-memory frame readable as the table ``name``;
* ``locate(name, path)``: the :class:`~dpkit.analytics._plan.Source` a path or table name means
  to this engine (refused when it names nothing the engine can read);
* ``validate(plan)``: check everything the schema decides about ``plan`` (the statement's
  allow-list, names, types) without reading a row, and return it ready to run
  (:class:`Checked`): the session calls it before it charges, and runs it after;
* ``execute(plan)``: run a plan at once (audits and tests, which charge nothing);
* ``shares_rows(private, public)``: whether a public table may read the private rows, by what
  this engine reads (rules in :mod:`dpkit.analytics._sources`).

:class:`EngineError` (the engine cannot run a statement, for a reason the plan and the schema
decide) lives beside it. An object with only ``columns``, ``register`` and ``execute`` (a test
engine over pandas, say) is taken through :func:`as_engine`, which gives it the conservative
remaining parts: no statement check before the charge, and no public table read from files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from dpkit.analytics._plan import EngineResult, Plan, Source
from dpkit.analytics._sources import Origin, file_source, shares_files
from dpkit.errors import EngineError, PrivacyParameterError

__all__ = ["Checked", "Engine", "EngineError", "MinimalEngine", "as_engine"]


@dataclass(frozen=True, eq=False)
class Checked:
    """A plan its engine has checked, ready to run: ``run()`` executes exactly the statement
    that was checked (compiled once; on Spark, the frame Spark analysed). Holds no state of
    the session, so several queries may be checked and run at once."""

    plan: Plan
    run: Callable[[], EngineResult]


@runtime_checkable
class Engine(Protocol):
    """What the session needs of an engine (see the module doc)."""

    def columns(self, source: Source) -> Mapping[str, str]: ...

    def register(self, name: str, frame: Any) -> None: ...

    def locate(self, name: str, path: bool) -> Source: ...

    def validate(self, plan: Plan) -> Checked: ...

    def execute(self, plan: Plan) -> EngineResult: ...

    def shares_rows(self, private: Origin, public: Origin) -> bool: ...


@runtime_checkable
class MinimalEngine(Protocol):
    """The least an engine object must have: :func:`as_engine` completes it."""

    def columns(self, source: Source) -> Any: ...

    def register(self, name: str, frame: Any) -> None: ...

    def execute(self, plan: Plan) -> EngineResult: ...


def as_engine(engine: object) -> Engine:
    """``engine`` itself when it is a whole :class:`Engine`, a :class:`MinimalEngine` completed
    with conservative parts, else :class:`PrivacyParameterError` naming what is missing."""
    if isinstance(engine, Engine):
        return engine
    if isinstance(engine, MinimalEngine):
        return _Completed(engine)
    missing = [
        m for m in ("execute", "columns", "register") if not callable(getattr(engine, m, None))
    ]
    raise PrivacyParameterError(f"engine lacks a {missing[0]}() method: {engine!r}")


def column_types(columns: Mapping[str, str] | Iterable[Any]) -> dict[str, str]:
    """Column name -> type name from what a minimal engine's ``columns`` returns: a mapping,
    ``(name, type)`` pairs, or bare names (type ``""``: unknown)."""
    if isinstance(columns, Mapping):
        return {str(k): str(v) for k, v in columns.items()}
    out: dict[str, str] = {}
    for c in columns:
        if isinstance(c, tuple):
            out[str(c[0])] = str(c[1]) if len(c) > 1 else ""
        else:
            out[str(c)] = ""
    return out


class _Completed:
    """A :class:`MinimalEngine` made whole: nothing is checked before the charge beyond the
    columns, a path is a local Parquet or CSV file or glob, and a public table read from files
    is refused (the engine cannot list what it reads)."""

    def __init__(self, inner: MinimalEngine) -> None:
        self.inner = inner

    def columns(self, source: Source) -> Mapping[str, str]:
        return column_types(self.inner.columns(source))

    def register(self, name: str, frame: Any) -> None:
        self.inner.register(name, frame)

    def locate(self, name: str, path: bool) -> Source:
        return file_source(name) if path else Source(kind="table", location=name)

    def validate(self, plan: Plan) -> Checked:
        return Checked(plan=plan, run=lambda: self.inner.execute(plan))

    def execute(self, plan: Plan) -> EngineResult:
        return self.inner.execute(plan)

    def shares_rows(self, private: Origin, public: Origin) -> bool:
        return shares_files(private, public, list_files=None)

    def __repr__(self) -> str:
        return f"{type(self.inner).__name__}(completed)"
