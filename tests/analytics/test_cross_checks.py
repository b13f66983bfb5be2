"""Cross-checks of whole session queries against independent computations.

1. Pre-noise aggregates. A session query with every aggregate kind (count, count_distinct, sum,
   mean, variance and std with their sums of squares, histograms over edges and over
   categories, quantiles' bin counts, and partition selection's distinct-unit counts) is
   planned by the builder and run by DuckDB with the md5 bounding hash; a plain pandas
   computation of the same rule (hashlib MD5 of the canonical text, then ``groupby`` ranks)
   must give exactly the same integers, on a table with NULL keys, a NULL privacy unit, NaN,
   +-inf, +-1e308 and odd strings, and bounds that bind.
2. Partition selection. The keys a session releases, over many releases, match
   ``PartitionSelection.probability(n)`` for keys with n = 1, 2, ... distinct units (the NULL
   unit counted once, every unit with two rows), tested per key with a two-sided binomial test
   at a family-wise alpha of 1e-6 (Bonferroni over the keys; keys with probability 0 or 1 must
   be never or always released); the companion shows the same test rejects the probabilities
   of the rule calibrated for twice the epsilon.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest
from _proof import adversary_rows, base_table, batched_release, key_of
from scipy import stats

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import EngineResult, Measure, Plan
from dpkit.analytics.engines._compiler import canonical_token
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.mechanisms.partition_selection import PartitionSelection
from dpkit.noise import RandomSource

# ------------------------------------------------------------------ 1. pre-noise aggregates


def _table() -> pd.DataFrame:
    d = pd.concat([base_table(n_units=120, seed=3), adversary_rows(rows=9)], ignore_index=True)
    rng = np.random.default_rng(4)
    d["age"] = rng.choice([0, 5, 17, 99, 42], size=len(d))
    # a NULL unit with rows in several groups is one unit
    extra = pd.DataFrame(
        {
            "uid": [None] * 6,
            "g": ["a", "b", "c", None, "a", "b"],
            "x": [1e308, float("nan"), -0.0, 3.0, 3.0, -float("inf")],
            "age": [5, 5, 0, 99, 17, 5],
        }
    )
    return pd.concat([d, extra], ignore_index=True)


def _plain(v: Any) -> Any:
    """Python scalars, NaN as None (the engine's normalization)."""
    if v is None:
        return None
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    if v is pd.NA:
        return None
    return v


def _md5(salt: int, rows: pd.DataFrame, cols: list[str]) -> list[str]:
    out = []
    for row in rows[cols].astype(object).itertuples(index=False, name=None):
        text = str(salt % 2**64) + "".join("|" + canonical_token(_plain(v)) for v in row)
        out.append(hashlib.md5(text.encode()).hexdigest())
    return out


def pandas_bounded(df: pd.DataFrame, plan: Plan) -> pd.DataFrame:
    """The kept rows under the plan's bounding rule, in plain pandas.

    Per unit (NULL is one unit): rank its groups by ``md5(salt|unit|key)`` (ties by the key,
    NULL last) and keep the first ``max_partitions``; in each kept group rank rows by
    ``md5(salt|unit|key|values...)`` and keep the first ``max_rows_per_partition``.
    """
    b, agg = plan.bound, plan.aggregate
    value_cols: list[str] = []
    for m in agg.measures:
        if m.kind not in ("rows", "units") and m.column not in value_cols:
            value_cols.append(str(m.column))
    g = list(agg.group_by)
    d = df.copy()
    d["_unit"] = [("u", _plain(u)) for u in d[b.privacy_unit].astype(object)]
    d["_key"] = [
        tuple(_plain(v) for v in row)
        for row in d[g].astype(object).itertuples(index=False, name=None)
    ]
    d["_hk"] = _md5(b.salt, d, [b.privacy_unit, *g])
    d["_hr"] = _md5(b.salt, d, [b.privacy_unit, *g, *value_cols])
    groups = d.drop_duplicates(["_unit", "_key"])[["_unit", "_key", "_hk"]].copy()
    groups["_knull"] = groups["_key"].map(lambda k: tuple(v is None for v in k))
    groups["_kstr"] = groups["_key"].map(repr)
    groups = groups.sort_values(
        ["_unit", "_hk", "_knull", "_kstr"], key=lambda s: s.map(repr) if s.name == "_unit" else s
    )
    groups["_grank"] = groups.groupby("_unit", sort=False).cumcount()
    kept_groups = groups[groups["_grank"] < b.max_partitions][["_unit", "_key"]]
    d = d.merge(kept_groups, on=["_unit", "_key"])
    d = d.sort_values("_hr", kind="stable")
    d["_rrank"] = d.groupby(["_unit", "_key"], sort=False).cumcount()
    return d[d["_rrank"] < b.max_rows_per_partition]


def _fixed(v: np.ndarray, m: Measure) -> list[int]:
    lo_i = math.floor(m.lower * 2.0**m.frac_bits)
    hi_i = math.floor(m.upper * 2.0**m.frac_bits)
    c = np.clip(v, m.lower, m.upper) * 2.0**m.frac_bits  # exact: scaling by a power of two
    return [min(max(math.floor(x), lo_i), hi_i) for x in c]


def pandas_measures(kept: pd.DataFrame, plan: Plan) -> dict[tuple[Any, ...], dict[str, Any]]:
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for key, sub in kept.groupby("_key", sort=False):
        res: dict[str, Any] = {}
        for m in plan.aggregate.measures:
            if m.kind == "rows":
                res[m.name] = len(sub)
                continue
            if m.kind == "units":
                res[m.name] = sub["_unit"].nunique()
                continue
            raw = sub[m.column].astype(object).map(_plain)
            nums = pd.to_numeric(raw[raw.notna()], errors="coerce").astype(float).to_numpy()
            if m.kind == "values":
                res[m.name] = int(nums.size)
            elif m.kind == "sum":
                res[m.name] = sum(_fixed(nums, m))
            elif m.kind == "sum_sq":
                sq = (np.clip(nums, m.clamp_lower, m.clamp_upper) - m.center) ** 2
                res[m.name] = sum(_fixed(sq, m))
            elif m.kind == "bin_counts":
                e = np.asarray(m.edges)
                c = np.clip(nums, e[0], e[-1])
                idx = np.minimum(np.searchsorted(e, c, side="right") - 1, len(e) - 2)
                res[m.name] = tuple(int(v) for v in np.bincount(idx, minlength=len(e) - 1))
            else:  # category_counts
                res[m.name] = tuple(int((raw == cat).sum()) for cat in m.categories)
        out[tuple(key)] = res
    return out


def _as_dict(res: EngineResult) -> dict[tuple[Any, ...], dict[str, Any]]:
    return {tuple(k): {n: v[i] for n, v in res.values.items()} for i, k in enumerate(res.keys)}


@pytest.mark.parametrize(("max_partitions", "max_rows", "seed"), [(1, 1, 1), (2, 2, 2), (3, 5, 3)])
def test_every_aggregate_kind_equals_plain_pandas(
    max_partitions: int, max_rows: int, seed: int
) -> None:
    df = _table()
    engine = DuckDBEngine(hash="md5", threads=1)
    s = dpa.Session(
        df,
        privacy_unit="uid",
        engine=engine,
        budget=Budget(epsilon=100.0, delta=1e-3, method="basic"),
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )
    q = (
        s.query()
        .group_by("g")
        .bound(max_partitions=max_partitions, max_rows_per_partition=max_rows)
        .agg(
            n=dpa.count(),
            u=dpa.count_distinct(),
            t=dpa.sum("x", bounds=(-1.0, 9.0)),
            m=dpa.mean("x", bounds=(0.0, 10.0)),
            v=dpa.variance("x", bounds=(2.0, 8.0)),
            sd=dpa.std("x", bounds=(-5.0, 5.0)),
            h=dpa.histogram("x", edges=[0.0, 2.5, 5.0, 10.0]),
            hc=dpa.histogram("age", categories=[0, 5, 17, 99]),
            qq=dpa.quantile("x", [0.5], bounds=(0.0, 10.0)),
        )
    )
    p = q.prepare(epsilon=10.0, delta=1e-5)
    kinds = {m.kind for m in p.plan.aggregate.measures}
    assert kinds == {"rows", "units", "values", "sum", "sum_sq", "bin_counts", "category_counts"}
    got = _as_dict(p.exact(engine))
    kept = pandas_bounded(df, p.plan)
    want = pandas_measures(kept, p.plan)
    assert got == want
    # the bounds bind: some unit lost rows or groups, and every unit keeps within them
    assert len(kept) < len(df)
    per_unit = kept.groupby("_unit")["_key"].nunique()
    assert per_unit.max() <= max_partitions
    assert kept.groupby(["_unit", "_key"]).size().max() <= max_rows
    assert (None,) in got  # the NULL key is a group
    # the NULL unit is one unit: it counts once in any group it kept
    assert ("u", None) in set(kept["_unit"])


# ------------------------------------------------------------------ 2. partition selection

REPS = 2000
FAMILY_ALPHA = 1e-6


def _selection_table(threshold: int) -> tuple[pd.DataFrame, dict[str, int]]:
    """Key ``k{n}`` has exactly n distinct units (one of them the NULL unit when n = 3)."""
    rows, units = [], {}
    uid = 0
    for n in range(1, threshold + 2):
        key = f"k{n}"
        units[key] = n
        for j in range(n):
            unit: Any = None if (n == 3 and j == 0) else f"p{uid}"
            uid += 1
            rows += [{"uid": unit, "g": key, "v": 0.0}] * 2  # two rows each: counted once
    return pd.DataFrame(rows), units


def _released_counts(epsilon: float, delta: float) -> tuple[dict[str, int], dict[str, int], Any]:
    budget = Budget(epsilon=100.0, delta=1e-2, method="basic")
    # a sum, not a count: with a count, selection would threshold the count's own noise
    probe = dpa.Session(
        pd.DataFrame({"uid": ["a"], "g": ["x"], "v": [0.0]}), privacy_unit="uid", budget=budget
    )
    pq = (
        probe.query()
        .group_by("g")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.sum("v", bounds=(0.0, 1.0)))
    )
    threshold = pq.prepare(epsilon=epsilon, delta=delta).pricing.selection.threshold
    df, units = _selection_table(threshold)
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=8, insecure=True),
    )
    q = (
        s.query()
        .group_by("g")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.sum("v", bounds=(0.0, 1.0)))
    )
    p = q.prepare(epsilon=epsilon, delta=delta)
    exact = p.exact(s.engine)
    got_units = {k[0]: int(v) for k, v in zip(exact.keys, exact.values["__units"], strict=True)}
    assert got_units == units
    # Released keys cost a noisy count each (an exact discrete Gaussian draw, the slow part),
    # so the audit keeps the keys where the probability climbs (n <= 14 here) and the
    # threshold's neighbours; the other keys are dropped before the release (a post-processing,
    # as the keys' coins are independent).
    sel = p.pricing.selection
    tested = {k: n for k, n in units.items() if n <= 14 or n >= sel.threshold - 1}
    frame = batched_release(
        p, exact, REPS, RandomSource(seed=9, insecure=True), [(k,) for k in tested]
    )
    released = pd.Series([k[0] for k in key_of(frame, ("g",))]).value_counts()
    return {k: int(released.get(k, 0)) for k in tested}, tested, sel


def _two_sided_p(k: int, n: int, p: float) -> float:
    return float(stats.binomtest(k, n, p, alternative="two-sided").pvalue)


def _rejects(counts: dict[str, int], units: dict[str, int], prob: Any) -> list[str]:
    level = FAMILY_ALPHA / len(units)  # Bonferroni over the keys
    bad = []
    for k, n in units.items():
        p = float(prob(n))
        if p in (0.0, 1.0):
            if counts[k] != p * REPS:
                bad.append(k)
            continue
        if _two_sided_p(counts[k], REPS, p) < level:
            bad.append(k)
    return bad


@pytest.fixture(scope="module")
def selection_run() -> tuple[dict[str, int], dict[str, int], Any]:
    return _released_counts(epsilon=1.0, delta=1e-3)


def test_selection_rates_match_the_formula(selection_run: Any) -> None:
    counts, units, sel = selection_run
    assert isinstance(sel, PartitionSelection)
    assert counts[f"k{sel.threshold}"] == REPS  # at the threshold: always released
    assert counts[f"k{sel.threshold + 1}"] == REPS
    assert _rejects(counts, units, lambda n: sel.probability(n)[()]) == []
    print({units[k]: (counts[k] / REPS, float(sel.probability(units[k]))) for k in counts})


def test_companion_rejects_a_miscalibrated_selection(selection_run: Any) -> None:
    """The probabilities of the rule calibrated for epsilon 2 instead of 1 must be rejected.

    Power: at the key where the two rules differ most (|p1 - p2| = d, both away from 0 and 1),
    the two-sided test at level 1e-6 / keys rejects with probability about
    Phi((d sqrt(REPS) - z sqrt(p1 q1)) / sqrt(p2 q2)); computed below and asserted > 1 - 1e-6.
    """
    counts, units, sel = selection_run
    wrong = PartitionSelection.from_epsilon_delta(
        epsilon=2.0 * sel.epsilon, delta=sel.delta, max_partitions=sel.max_partitions
    )
    z = stats.norm.isf(FAMILY_ALPHA / len(units) / 2)
    best = 0.0
    for n in units.values():
        p1, p2 = float(wrong.probability(n)), float(sel.probability(n))  # H0 p1, truth p2
        if 0.0 < p1 < 1.0 and 0.0 < p2 < 1.0:
            d = abs(p1 - p2)
            power = stats.norm.cdf(
                (d * math.sqrt(REPS) - z * math.sqrt(p1 * (1 - p1))) / math.sqrt(p2 * (1 - p2))
            )
            best = max(best, float(power))
    assert best > 1 - 1e-6
    assert _rejects(counts, units, lambda n: wrong.probability(n)[()]) != []


def test_sparse_counts_equal_the_dense_tuple_they_read_as() -> None:
    from dpkit.analytics._plan import SparseCounts, sparse_or_dense

    size = (1 << 16) + 3
    sparse = sparse_or_dense(size, {5: 2, size - 1: 7, None: 4})
    assert isinstance(sparse, SparseCounts)
    dense = [0] * size
    dense[5], dense[size - 1] = 2, 7
    assert sparse == tuple(dense) and tuple(dense) == sparse and sparse == dense
    assert hash(sparse) == hash(tuple(dense))
    dense[6] = 1
    assert sparse != tuple(dense)
    assert sparse != tuple(dense[:-1])
