"""Shared by the Spark public-table tests: the exact result of a join with a public table."""

from __future__ import annotations

from typing import Any

import dpkit.analytics as dpa
from dpkit.errors import DPKitError


def join_count(session: Any, public: Any) -> int | str:
    """The exact count (one row per unit, sensitivity 1) of the rows whose public partner
    (``ref`` = the public table's ``user_id``) has ``secret = 1``, or the refusal (type and
    message) when the join is refused before the charge (by the same checks ``run()`` does)."""
    try:
        p = (session.query().join_public(public, on={"ref": "user_id"},
                                         columns={"secret": "pub_secret"})
             .where("pub_secret = 1").bound(max_partitions=1, max_rows_per_partition=1)
             .agg(n=dpa.count()).prepare(epsilon=1.0))
        session._validate_plan(p.plan)
    except DPKitError as exc:
        return f"{type(exc).__name__}: {exc}"
    return int(p.exact(session.engine).values["n:n"][0])
