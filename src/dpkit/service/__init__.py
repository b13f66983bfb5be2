"""The curator service: private answers over HTTP, charged to a durable privacy ledger.

``dpkit serve people.parquet --privacy-unit user_id --budget epsilon=3,delta=1e-6 --ledger
sqlite:///budget.db`` runs it; :func:`dpkit.service.app.create_app` builds the application for
other ASGI servers. This package imports FastAPI only when :mod:`dpkit.service.app` is imported.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ServiceConfig", "ServiceState", "create_app"]


def __getattr__(name: str) -> Any:
    if name == "ServiceState":  # tokens and the query log; no FastAPI needed
        from dpkit.service import _state

        return _state.ServiceState
    if name in __all__:
        from dpkit.service import app

        return getattr(app, name)
    raise AttributeError(f"module 'dpkit.service' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
