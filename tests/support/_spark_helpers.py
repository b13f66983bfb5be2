"""Shared by the Spark tests: the exact result of a join with a public table, the md5 rows
kept per group for a key file, and what a grouped count with partition selection spends."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import dpkit.analytics as dpa
from dpkit.analytics._plan import Aggregate, Bound, Measure, Plan, Source
from dpkit.errors import DPKitError


def join_count(session: Any, public: Any) -> int | str:
    """The exact count (one row per unit, sensitivity 1) of the rows whose public partner
    (``ref`` = the public table's ``user_id``) has ``secret = 1``, or the refusal (type and
    message) when the join is refused before the charge (by the same checks ``run()`` does)."""
    try:
        p = (
            session.query()
            .join_public(public, on={"ref": "user_id"}, columns={"secret": "pub_secret"})
            .where("pub_secret = 1")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0)
        )
        session.validate(p)
    except DPKitError as exc:
        return f"{type(exc).__name__}: {exc}"
    return int(p.exact(session.engine).values["n:n"][0])


def count_selection_spent() -> tuple[float, float]:
    """What a basic session spends on ``group_by(...)`` without keys, ``.bound(1, 1)``,
    ``count()`` at ``(1, 1e-6)``, from its pricing alone (a one-row frame): epsilon 1 and the
    delta of the threshold on the count's own noisy value (the groups are chosen by that
    count), at most the 1e-6 asked since tau is an integer. The same on every source."""
    import pandas as pd

    from dpkit.accounting import Budget

    budget = Budget(epsilon=10.0, delta=1e-5)
    s = dpa.Session(pd.DataFrame({"uid": [0], "k": [0]}), privacy_unit="uid", budget=budget)
    prepared = (
        s.query()
        .group_by("k")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
        .prepare(epsilon=1.0, delta=1e-6)
    )
    budget.charge(prepared.pricing.event)
    eps, delta = budget.spent
    assert abs(eps - 1.0) <= 1e-9 and 0.0 < delta <= 1e-6  # epsilon: to float rounding
    return eps, delta


def md5_counts(engine: Any, path: Path) -> list[int]:
    """Rows kept per group (sorted) of ``group_by("k")`` over the Parquet file ``path``, each
    person bounded to one row (salt fixed: with the md5 hash every engine keeps the same)."""
    plan = Plan(
        source=Source(kind="parquet", location=str(path)),
        filters=(),
        bound=Bound(privacy_unit="uid", max_partitions=1, max_rows_per_partition=1, salt=12345),
        aggregate=Aggregate(group_by=("k",), measures=(Measure(name="n", kind="rows"),)),
    )
    return sorted(int(n) for n in engine.execute(plan).values["n"])


def key_file(path: Path, keys: pa.Array, seed: int = 1) -> Path:
    """60 persons with 5 rows each, each row's key drawn from ``keys``."""
    rng = random.Random(seed)
    uid = [f"u{u}" for u in range(60) for _ in range(5)]
    picks = [rng.randrange(len(keys)) for _ in uid]
    pq.write_table(pa.table({"uid": uid, "k": keys.take(pa.array(picks))}), path)
    return path
