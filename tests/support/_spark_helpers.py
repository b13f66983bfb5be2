"""Shared by the Spark tests: the exact result of a join with a public table, and the md5
rows kept per group for a key file."""

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
