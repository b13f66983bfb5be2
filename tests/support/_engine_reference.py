"""An independent pure-Python implementation of the engine's bounding rule (md5 profile).

With the md5 profile the bounding hash is MD5 of a canonical text, which Python reproduces with
:mod:`hashlib`; so the reference below recomputes, row by row and without SQL, which rows each
unit keeps and the exact aggregates, and the engine must agree exactly. With the native profile
(DuckDB's own hash) the choice of rows cannot be recomputed, so the tests check invariants
instead: per-unit limits, independence from row order, exact fixed-point sums.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import pandas as pd

from dpkit.analytics._plan import (
    Aggregate,
    Bound,
    EngineResult,
    Filter,
    Measure,
    Plan,
    Source,
)
from dpkit.analytics.engines._compiler import canonical_token

# ------------------------------------------------------------------ the reference


def _norm(v: Any) -> Any:
    """NaN -> None, -0.0 -> 0.0, numpy scalars -> Python (the engine's normalization)."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float):
        if math.isnan(v):
            return None
        return v + 0.0
    return v


def _md5(salt: int, parts: Sequence[Any]) -> str:
    text = str(salt % 2**64) + "".join("|" + canonical_token(p) for p in parts)
    return hashlib.md5(text.encode()).hexdigest()


def _fixed(x: float, lo: float, hi: float, k: int) -> int:
    c = min(max(x, lo), hi)
    i = math.floor(Fraction(c) * 2**k)
    return min(max(i, math.floor(Fraction(lo) * 2**k)), math.floor(Fraction(hi) * 2**k))


def bin_of(c: float, edges: Sequence[float]) -> int:
    """The bin ``i`` with ``edges[i] <= c < edges[i + 1]`` (the last bin also takes ``c ==
    edges[-1]``), by bisection over the edges, read one at a time (a grid of ``2^20`` bins is
    never materialised); ``c`` within the edges."""
    lo, hi = 0, len(edges) - 1
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if edges[mid] <= c else (lo, mid)
    return lo


def reference(
    df: pd.DataFrame, plan: Plan, *, keep: Any = None
) -> dict[tuple[Any, ...], dict[str, Any]]:
    """Pure-Python md5 bounding + exact aggregation (``keep`` filters rows, like predicates)."""
    b, agg = plan.bound, plan.aggregate
    value_cols: list[str] = []
    for m in agg.measures:
        if m.kind not in ("rows", "units") and m.column not in value_cols:
            value_cols.append(str(m.column))
    records = [{c: _norm(v) for c, v in r.items()} for r in df.to_dict("records")]
    if keep is not None:
        records = [r for r in records if keep(r)]
    kept: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []
    if b.privacy_unit is None:
        kept = [(object(), tuple(r[k] for k in agg.group_by), r) for r in records]
    else:
        by_unit: dict[Any, list[dict[str, Any]]] = defaultdict(list)
        for r in records:
            by_unit[r[b.privacy_unit]].append(r)
        for u, rows in by_unit.items():
            groups: dict[tuple[Any, ...], list[dict[str, Any]]] = defaultdict(list)
            for r in rows:
                groups[tuple(r[k] for k in agg.group_by)].append(r)
            ranked = sorted(groups, key=lambda k, u=u: _md5(b.salt, [u, *k]))
            for k in ranked[: b.max_partitions]:
                rs = sorted(
                    groups[k],
                    key=lambda r, u=u, k=k: _md5(b.salt, [u, *k, *[r[c] for c in value_cols]]),
                )
                kept += [(u, k, r) for r in rs[: b.max_rows_per_partition]]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    grouped: dict[tuple[Any, ...], list[tuple[Any, dict[str, Any]]]] = defaultdict(list)
    for u, k, r in kept:
        grouped[k].append((u, r))
    if not agg.group_by and not grouped:
        grouped[()] = []
    for k, items in grouped.items():
        res: dict[str, Any] = {}
        for m in agg.measures:
            xs = [r[m.column] for _, r in items] if m.column is not None else []
            nums = [float(x) for x in xs if x is not None]
            if m.kind == "rows":
                res[m.name] = len(items)
            elif m.kind == "units":
                res[m.name] = len({id(u) if b.privacy_unit is None else ("u", u) for u, _ in items})
            elif m.kind == "values":
                res[m.name] = len(nums)
            elif m.kind == "sum":
                res[m.name] = sum(_fixed(x, m.lower, m.upper, m.frac_bits) for x in nums)
            elif m.kind == "sum_sq":
                res[m.name] = sum(
                    _fixed(
                        (min(max(x, m.clamp_lower), m.clamp_upper) - m.center) ** 2,
                        m.lower,
                        m.upper,
                        m.frac_bits,
                    )
                    for x in nums
                )
            elif m.kind == "bin_counts":
                e = m.edges
                counts = [0] * (len(e) - 1)
                for x in nums:
                    counts[bin_of(min(max(x, e[0]), e[-1]), e)] += 1
                res[m.name] = tuple(counts)
            elif m.kind == "category_counts":
                counts = [0] * len(m.categories)
                for x in xs:
                    for j, cat in enumerate(m.categories):
                        if (x is None and cat is None) or (x is not None and x == cat):
                            counts[j] += 1
                            break
                res[m.name] = tuple(counts)
        out[k] = res
    return out


def as_dict(result: EngineResult) -> dict[tuple[Any, ...], dict[str, Any]]:
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for i, k in enumerate(result.keys):
        assert k not in out, f"group {k!r} returned twice"
        out[k] = {name: vals[i] for name, vals in result.values.items()}
    return out


# ------------------------------------------------------------------ data


def people(n_units: int, seed: int) -> pd.DataFrame:
    """Units with 1..8 rows over a few keys, with NULL/NaN keys, NaN/inf/huge values."""
    rng = random.Random(seed)
    regions = ["north", "south", "o'hara", 'quo"te', "ünï", "e\u0301|V1:", None]
    specials = [float("nan"), None, float("inf"), -float("inf"), 1e308, -1e308, -0.0]
    rows = []
    for u in range(n_units):
        unit: Any = None if u == 0 else f"u{u}"
        for _ in range(rng.randint(1, 8)):
            x: Any = rng.uniform(-20, 120) if rng.random() > 0.15 else rng.choice(specials)
            rows.append(
                {
                    "uid": unit,
                    "region": rng.choice(regions),
                    "kind": rng.choice([1, 2, 3]),
                    "x": x,
                    "age": rng.randint(0, 99),
                }
            )
    return pd.DataFrame(rows)


MEASURES = (
    Measure(name="n", kind="rows"),
    Measure(name="units", kind="units"),
    Measure(name="vals", kind="values", column="x"),
    Measure(name="s", kind="sum", column="x", lower=-10.0, upper=100.0, frac_bits=20),
    Measure(
        name="ss",
        kind="sum_sq",
        column="x",
        lower=0.0,
        upper=3600.0,
        frac_bits=8,
        center=40.0,
        clamp_lower=-10.0,
        clamp_upper=100.0,
    ),
    Measure(name="h", kind="bin_counts", column="x", edges=(-10.0, 0.0, 0.5, 50.0, 100.0)),
    Measure(name="c", kind="category_counts", column="age", categories=(0, 5, 17, 99)),
)


def plan_for(
    source: Source,
    *,
    unit: str | None = "uid",
    group_by: tuple[str, ...] = ("region",),
    max_partitions: int = 2,
    max_rows: int = 2,
    salt: int = 987654321,
    filters: tuple[Filter, ...] = (),
    measures: tuple[Measure, ...] = MEASURES,
) -> Plan:
    return Plan(
        source=source,
        filters=filters,
        bound=Bound(
            privacy_unit=unit,
            max_partitions=max_partitions,
            max_rows_per_partition=max_rows,
            salt=salt,
        ),
        aggregate=Aggregate(group_by=group_by, measures=measures),
    )
