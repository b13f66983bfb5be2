"""The JSON forms of a budget: ``to_json``/``from_json`` and the definition a ledger stores.

Events are written and read through the allow-list of :mod:`dpkit.events`
(:func:`~dpkit.events.event_to_dict`), never by importing names found in the data. Versions 1
(before zcdp/gdp budgets), 2 (before approximate zCDP) and 3 (before the neighbouring relation
was recorded) are read too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from dpkit.accounting._budget.terms import FORMAT, VERSION, Terms
from dpkit.errors import LedgerError, SerializationError
from dpkit.events import DpEvent, event_from_dict, event_to_dict

__all__ = ["dump", "parse", "read_definition"]

_BASE = frozenset(
    {"format", "version", "epsilon", "delta", "mode", "method", "rdp_order", "ledger"}
)
_FIELDS = {
    1: _BASE,
    2: _BASE | {"rho", "mu", "pmf_slack_allowance"},
    3: _BASE | {"rho", "mu", "pmf_slack_allowance", "approx_delta_allowance"},
    VERSION: _BASE | {"rho", "mu", "pmf_slack_allowance", "approx_delta_allowance", "neighbouring"},
}
_DEFINITION = (
    "epsilon",
    "delta",
    "mode",
    "method",
    "rdp_order",
    "rho",
    "mu",
    "pmf_slack_allowance",
    "approx_delta_allowance",
    "neighbouring",
)


def dump(terms: Terms, ledger: tuple[tuple[DpEvent, int], ...]) -> str:
    """The budget's definition and its ledger of charges as JSON."""
    data = {
        **terms.definition(),
        "ledger": [{"event": event_to_dict(e), "count": n} for e, n in ledger],
    }
    return json.dumps(data, sort_keys=True)


def parse(text: str) -> tuple[dict[str, Any], Iterator[tuple[DpEvent, Any]]]:
    """The constructor's arguments and the ``(event, count)`` charges of a saved budget.

    Raises :class:`~dpkit.errors.SerializationError` for malformed data; the charges are read
    one by one as they are replayed (an unknown event type raises then), and their counts are
    checked by the charges themselves."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError, RecursionError) as exc:
        raise SerializationError(f"not JSON: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise SerializationError("not a saved dpkit budget")
    version = data.get("version")
    known = [v for v in _FIELDS if version == v]
    if not known:
        raise SerializationError(f"unsupported budget version {version!r}")
    expected = _FIELDS[known[0]]
    if set(data) != expected:
        raise SerializationError(f"budget fields must be {sorted(expected)}")
    ledger = data["ledger"]
    if not isinstance(ledger, list):
        raise SerializationError("'ledger' must be a list")
    return _arguments(data, known[0]), _charges(ledger)


def _charges(ledger: list[Any]) -> Iterator[tuple[DpEvent, Any]]:
    """Each saved ``(event, count)``, read only when the one before it has been replayed."""
    for item in ledger:
        if not isinstance(item, dict) or set(item) != {"event", "count"}:
            raise SerializationError(f"ledger entries are {{event, count}}, got {item!r}")
        yield event_from_dict(item["event"]), item["count"]


def _arguments(data: dict[str, Any], version: int) -> dict[str, Any]:
    kwargs: dict[str, Any] = {
        key: data[key] for key in ("epsilon", "delta", "mode", "method", "rdp_order")
    }
    if version in (2, 3, VERSION):
        for key in ("rho", "mu", "pmf_slack_allowance"):
            kwargs[key] = data[key]
    if version in (3, VERSION):
        kwargs["approx_delta_allowance"] = data["approx_delta_allowance"]
    if version == VERSION:
        relation = data["neighbouring"]
        if relation not in ("add_remove", "replace"):
            raise SerializationError(
                f"'neighbouring' must be 'add_remove' or 'replace', got {relation!r}"
            )
        if relation == "replace":  # add_remove is the default (and the only relation of
            kwargs["neighbouring"] = relation  # subclasses such as the zCDP/GDP filters)
    elif (
        version == 2
        and data["method"] == "zcdp"
        and (data["rho"] is not None or data["delta"] not in (0, 0.0))
    ):
        kwargs["approx_delta_allowance"] = 0.0
    if not isinstance(kwargs["mode"], str) or not isinstance(kwargs["method"], str):
        raise SerializationError("'mode' and 'method' must be strings")
    return kwargs


def read_definition(text: str | None, name: str) -> dict[str, Any]:
    """The constructor's arguments from the definition a ledger stores under ``name``."""
    if text is None:
        raise LedgerError(f"the ledger holds no budget named {name!r}")
    try:
        data = json.loads(text)
        kwargs = {k: data[k] for k in _DEFINITION}
        if data["format"] != FORMAT or data["version"] != VERSION:
            raise ValueError(f"format {data['format']!r} version {data['version']!r}")
    except (ValueError, KeyError, TypeError) as exc:
        raise LedgerError(f"stored definition of {name!r} is unreadable: {exc!r}") from exc
    if kwargs["rho"] is not None or kwargs["mu"] is not None:
        kwargs["epsilon"] = None
    return kwargs
