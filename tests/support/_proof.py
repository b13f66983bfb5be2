"""Shared pieces of the end-to-end audit, coverage and cross-check tests.

* :func:`neighbours`: a base table and its neighbour, which adds one adversarial privacy unit
  with many rows in many groups (NaN, +-inf, +-1e308 values, the NULL key, odd strings).
* :func:`batched_release`: ``size`` independent releases of one prepared query on one exact
  engine result, through :meth:`PreparedQuery.release_from` in a single call.
* :func:`sensitivity_usage`: how much of its calibrated sensitivity a query uses on the exact
  results of two neighbouring tables (at most 1 when the bounding holds).
* :func:`audit_pair`: a statistical audit (``dpkit.audit``) of a claim on the releases over
  two neighbouring tables, with the testers of :func:`audit_testers`.

Why one call gives ``size`` independent releases: the release of a group is a function of that
group's exact integers and of its own noise draws (discrete Laplace / Gaussian noise is drawn
i.i.d. per group and cell, and partition selection flips one independent coin per key), so the
release of ``size`` copies of every group, told apart by an extra key column ``__rep``, is
exactly ``size`` independent releases of the original groups. This is only a faster way to
call the same release code (``assemble``), not a re-implementation of it. A top-k query is
the exception (its groups compete for the k places): each release selects its own keys, and
only their values are noised in one batch.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from dpkit.analytics import PreparedQuery
from dpkit.analytics._plan import EngineResult, SparseCounts
from dpkit.analytics._release import UNITS_MEASURE, normalize_key
from dpkit.analytics._topk import select
from dpkit.audit import Claim, audit
from dpkit.audit._testers import ClassifierTester, ThresholdTester
from dpkit.noise import RandomSource

#: Group keys: plain strings, quotes, a pipe (the canonical hash text's separator), combining
#: characters, an SQL comment, and the NULL key.
GROUPS: tuple[Any, ...] = ("a", "b", "c", "o'hara|\"x", None, "e\u0301;--", "ünï")
ADVERSARY = "adv'|\"\\n\u0000-unit"
#: The adversary's values cycle through these: NaN/NULL are skipped by value aggregates, the
#: others clamp to the bounds.
ADVERSARIAL_VALUES: tuple[Any, ...] = (
    float("nan"),
    float("inf"),
    1e308,
    None,
    -float("inf"),
    -1e308,
    7.5,
)
ROWS_PER_GROUP = 50
#: Releases per table in :func:`audit_pair` (half select the test, half evaluate it) and the
#: confidence of its certified lower bound.
AUDIT_SAMPLES = 4000
AUDIT_CONFIDENCE = 1.0 - 1e-6


def base_table(n_units: int = 60, seed: int = 1) -> pd.DataFrame:
    """Units with 1-3 rows in 1-2 groups, values in [0, 10] with some NaN, a NULL unit."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    for u in range(n_units):
        unit: Any = None if u == 0 else f"u{u}"
        k = int(rng.integers(1, 3))
        for gi in rng.choice(len(GROUPS) - 2, size=k, replace=False):  # not the last two keys
            for _ in range(int(rng.integers(1, 4))):
                x = float(rng.uniform(0, 10)) if rng.random() > 0.1 else float("nan")
                rows.append({"uid": unit, "g": GROUPS[int(gi)], "x": x})
    return pd.DataFrame(rows, columns=["uid", "g", "x"])


def adversary_rows(
    groups: tuple[Any, ...] = GROUPS,
    rows: int = ROWS_PER_GROUP,
    values: tuple[Any, ...] = ADVERSARIAL_VALUES,
) -> pd.DataFrame:
    out = [
        {"uid": ADVERSARY, "g": g, "x": values[i % len(values)]}
        for g in groups
        for i in range(rows)
    ]
    return pd.DataFrame(out, columns=["uid", "g", "x"])


def neighbours(
    seed: int = 1, values: tuple[Any, ...] = ADVERSARIAL_VALUES
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(D, D'): D' is D plus the adversarial unit (rows in every group, NULL key included)."""
    d = base_table(seed=seed)
    return d, pd.concat([d, adversary_rows(values=values)], ignore_index=True)


def stack(result: EngineResult, keys: list[tuple[Any, ...]], size: int) -> EngineResult:
    """``size`` copies of ``result``'s groups ``keys`` (absent keys: no row), key + (rep,)."""
    index = {tuple(k): i for i, k in enumerate(result.keys)}
    new_keys: list[tuple[Any, ...]] = []
    rows: list[int] = []
    for r in range(size):
        for k in keys:
            i = index.get(tuple(k))
            if i is not None:
                new_keys.append((*k, r))
                rows.append(i)
    values = {name: tuple(col[i] for i in rows) for name, col in result.values.items()}
    return EngineResult(keys=tuple(new_keys), values=values)


def batched_release(
    prepared: PreparedQuery,
    result: EngineResult,
    size: int,
    source: RandomSource,
    keys: list[tuple[Any, ...]],
) -> pd.DataFrame:
    """``size`` independent releases of ``prepared`` on ``result`` (see the module doc).

    Only the groups ``keys`` are released (a post-processing of the full release, whose groups
    are independent). With public keys every ``(key, rep)`` gets a row; without, the released
    rows only. The frame has the group-by columns plus ``__rep``.
    """
    stacked = stack(result, keys, size)
    public = None if prepared.public_keys is None else [(*k, r) for r in range(size) for k in keys]
    wide = dataclasses.replace(prepared, group_by=(*prepared.group_by, "__rep"), public_keys=public)
    frame: pd.DataFrame = wide.release_from(stacked, source=source)
    return frame


def key_of(frame: pd.DataFrame, columns: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """Normalised key tuples of a released frame (NaN, None and ``pd.NA``, the NULL key of a
    nullable column, are the NULL key)."""
    sub = frame[list(columns)].astype(object)
    return [
        tuple(
            None if (v is None or v is pd.NA or (isinstance(v, float) and v != v)) else v
            for v in row
        )
        for row in sub.itertuples(index=False, name=None)
    ]


def audit_testers(coords: list[int], scales: np.ndarray) -> list[Any]:
    """Thresholds on each coordinate that can change, on their scaled sum, and a classifier.

    The coordinates are chosen from the exact results (public to the auditor, independent of
    the samples), so any choice keeps the audit valid.
    """

    def coord(j: int) -> Any:
        def f(a: np.ndarray) -> np.ndarray:
            return np.asarray(a)[:, j]

        f.__name__ = f"coordinate_{j}"
        return f

    def pooled(a: np.ndarray) -> np.ndarray:
        return np.asarray(a)[:, coords] @ (1.0 / scales)

    return [
        *(ThresholdTester(feature=coord(j)) for j in coords),
        ThresholdTester(feature=pooled),
        ClassifierTester(),
    ]


def exact_cells(res: EngineResult, name: str, key: Any, cells: int) -> list[int]:
    index = {k: i for i, k in enumerate(res.keys)}
    if key not in index or name not in res.values:
        return [0] * cells
    v = res.values[name][index[key]]
    return [int(x) for x in v] if isinstance(v, (tuple, SparseCounts)) else [int(v)]


def changed_keys(ra: EngineResult, rb: EngineResult) -> list[Any]:
    """Group keys whose exact aggregates differ between the tables (absent counts as zero)."""
    index_a = {k: i for i, k in enumerate(ra.keys)}
    index_b = {k: i for i, k in enumerate(rb.keys)}
    out = []
    for k in sorted(set(index_a) | set(index_b), key=repr):
        if (k in index_a) != (k in index_b) or any(
            ra.values[n][index_a[k]] != rb.values[n][index_b[k]] for n in ra.values
        ):
            out.append(k)
    return out


#: The bounding salts' seed of :func:`seeded_session` (reproducible runs).
SALT_SEED = 2026


def seeded_session(data: Any, engine: Any, budget: Any, seed: int = SALT_SEED) -> Any:
    """A session over ``data`` protecting ``uid`` on ``engine``, whose bounding salts come
    from ``seed``: which of an adversary's groups and rows are kept is the same on every run."""
    import dpkit.analytics as dpa

    return dpa.Session(
        data,
        privacy_unit="uid",
        budget=budget,
        engine=engine,
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )


def pair_usage(
    d: pd.DataFrame,
    d_prime: pd.DataFrame,
    bounds: tuple[float, float],
    epsilon: float = 1.0,
    *,
    half_span: bool = False,
    seed: int = SALT_SEED,
    variance: bool = False,
) -> float:
    """The share of the complementary pair's L1 sensitivity that the exact results move by
    between ``d`` and ``d_prime`` (``sum`` and ``mean`` of ``x`` at ``bounds``, grouped by the
    string keys of ``d``, (P, R) = (3, 4)); ``half_span`` calibrates the pair for half its
    span (a broken pricing). ``variance``: a ``variance`` and a ``std`` of ``x`` instead,
    released from the pair and the centred sum of squares (the larger of the two measures'
    shares)."""
    import dpkit.analytics as dpa
    from dpkit.accounting import Budget
    from dpkit.analytics._plan import Source
    from dpkit.analytics.engines.duckdb import DuckDBEngine

    engine = DuckDBEngine(threads=1)
    engine.register("d", d)
    engine.register("d_prime", d_prime)
    s = seeded_session(d, engine, Budget(epsilon=1e10), seed)
    keys = sorted({k for k in d["g"] if isinstance(k, str)})
    aggs = (
        {"m": dpa.variance("x", bounds=bounds), "sd": dpa.std("x", bounds=bounds)}
        if variance
        else {"t": dpa.sum("x", bounds=bounds), "m": dpa.mean("x", bounds=bounds)}
    )
    q = (
        s.query()
        .group_by("g", keys=keys)
        .agg(**aggs)
        .bound(max_partitions=3, max_rows_per_partition=4)
    )
    p = q.prepare(epsilon=epsilon)
    (m,) = [sp for sp in p.pricing.stats if sp.name == "m"]
    cp = m.complement
    assert cp is not None
    if half_span:
        ev = dataclasses.replace(cp.event, sensitivity=cp.event.sensitivity // 2)
        stats = tuple(
            dataclasses.replace(sp, complement=dataclasses.replace(cp, event=ev))
            if sp.name == "m"
            else sp
            for sp in p.pricing.stats
        )
        p = dataclasses.replace(p, pricing=dataclasses.replace(p.pricing, stats=stats))
    ra = p.exact(engine, Source(kind="table", location="d"))
    rb = p.exact(engine, Source(kind="table", location="d_prime"))
    assert 0 < len(changed_keys(ra, rb)) <= 3
    return float(sensitivity_usage(p, ra, rb))


def sensitivity_usage(prepared: Any, ra: EngineResult, rb: EngineResult) -> float:
    """max over noisy measures of (neighbour's L1 or L2^2 shift) / (calibrated sensitivity)."""
    pricing = prepared.pricing
    changed = changed_keys(ra, rb)
    p, r = pricing.max_partitions, pricing.max_rows_per_partition
    worst = len(changed) / p  # more changed groups than max_partitions: above 1
    for sp in pricing.stats:
        cp = sp.complement
        if cp is not None:  # the complementary pair: A = hi N - S and B = S - lo N, one vector
            if sp.shared_with is not None:
                continue
            n_name, s_name = sp.measures[0].measure.name, sp.measures[1].measure.name
            moved = 0
            for k in changed:
                na, nb = (exact_cells(x, n_name, k, 1)[0] for x in (ra, rb))
                sa, sb = (exact_cells(x, s_name, k, 1)[0] for x in (ra, rb))
                moved += abs(cp.hi * (nb - na) - (sb - sa)) + abs((sb - sa) - cp.lo * (nb - na))
            worst = max(worst, moved / cp.event.sensitivity)
        for mp in sp.measures:
            if cp is not None and mp.noise is None:  # the pair's N and S, read above
                continue
            m = mp.measure
            cells = (
                len(m.edges) - 1
                if m.kind == "bin_counts"
                else (len(m.categories) if m.kind == "category_counts" else 1)
            )
            diffs: list[int] = []
            for k in changed:
                a, b = exact_cells(ra, m.name, k, cells), exact_cells(rb, m.name, k, cells)
                if mp.count_of is not None:  # centred sums: T = S - c N
                    na = exact_cells(ra, mp.count_of, k, 1)[0]
                    nb = exact_cells(rb, mp.count_of, k, 1)[0]
                    a, b = [a[0] - mp.center * na], [b[0] - mp.center * nb]
                diffs.extend(y - x for x, y in zip(a, b, strict=True))
            if mp.noise is None:  # quantile bins: the exponential mechanism's rank sensitivity
                worst = max(worst, sum(abs(x) for x in diffs) / (p * r))
            elif mp.noise.kind == "discrete_laplace":
                worst = max(worst, sum(abs(x) for x in diffs) / mp.l1)
            else:
                worst = max(worst, sum(x * x for x in diffs) / mp.l2_sq)
    if UNITS_MEASURE in ra.values:
        for k in changed:
            assert (
                abs(
                    exact_cells(ra, UNITS_MEASURE, k, 1)[0]
                    - exact_cells(rb, UNITS_MEASURE, k, 1)[0]
                )
                <= 1
            )
    return worst


def release_vectors(
    prepared: Any,
    result: EngineResult,
    src: RandomSource,
    groups: list[Any],
    samples: int = AUDIT_SAMPLES,
) -> np.ndarray:
    """Per release, for each group of ``groups``: [released, estimates...] (0 if withheld)."""
    if not prepared.group_by:  # one global row: every release has it (a public "key")
        prepared = dataclasses.replace(prepared, public_keys=[()])
    if prepared.pricing.top_k is not None:
        frame = _top_k_releases(prepared, result, samples, src)
    else:
        frame = batched_release(prepared, result, samples, src, groups)
    gb = tuple(prepared.group_by)
    cols = [
        c for c in frame.columns if c not in (*gb, "__rep") and not c.endswith(("_low", "_high"))
    ]
    out = np.zeros((samples, len(groups), 1 + len(cols)))
    pos = {g: i for i, g in enumerate(groups)}
    reps = frame["__rep"].to_numpy(dtype=np.int64)
    ks = key_of(frame, gb) if gb else [()] * len(frame)
    vals = frame[cols].to_numpy(dtype=np.float64)
    for row, (k, rep) in enumerate(zip(ks, reps, strict=True)):
        j = pos.get(tuple(k))
        if j is None:  # a top-k release may hold groups outside ``groups``: projected out
            continue
        out[rep, j, 0] = 1.0
        out[rep, j, 1:] = vals[row]
    return np.nan_to_num(out.reshape(samples, -1), nan=-1.0)


def _top_k_releases(
    prepared: Any, result: EngineResult, size: int, source: RandomSource
) -> pd.DataFrame:
    """``size`` independent releases of a top-k query: its groups compete for the k places, so
    each release selects its own keys (``select``, what ``release_from`` calls first); the
    values of all the selected (key, rep) groups are then noised in one ``release_from`` with
    those as public keys (independent per group, as for :func:`batched_release`)."""
    top = prepared.pricing.top_k
    index = {tuple(normalize_key(v) for v in k): i for i, k in enumerate(result.keys)}
    keys: list[tuple[Any, ...]] = []
    rows: list[int] = []
    for rep in range(size):
        for k in select(top, result, prepared.public_keys, source):
            keys.append((*k, rep))
            rows.append(index[k])
    values = {name: tuple(col[i] for i in rows) for name, col in result.values.items()}
    wide = dataclasses.replace(
        prepared,
        group_by=(*prepared.group_by, "__rep"),
        public_keys=keys,
        pricing=dataclasses.replace(prepared.pricing, top_k=None),
    )
    frame: pd.DataFrame = wide.release_from(
        EngineResult(keys=tuple(keys), values=values), source=source
    )
    return frame


def audit_pair(
    prepared: Any,
    ra: EngineResult,
    rb: EngineResult,
    claim: Claim,
    seed: int,
    samples: int = AUDIT_SAMPLES,
    confidence: float = AUDIT_CONFIDENCE,
) -> Any:
    """Audit ``claim`` on the releases of ``prepared`` over the exact results of D and D'
    (``samples`` releases each, half to select a test, half to evaluate it)."""
    src = RandomSource(seed=seed, insecure=True)
    groups = changed_keys(ra, rb) or sorted(set(ra.keys), key=repr)[:1]
    va = release_vectors(prepared, ra, src, groups, samples)
    vb = release_vectors(prepared, rb, src, groups, samples)
    return audit_vectors(va, vb, claim, src, samples, confidence)


def audit_vectors(
    va: np.ndarray,
    vb: np.ndarray,
    claim: Claim,
    src: RandomSource,
    samples: int = AUDIT_SAMPLES,
    confidence: float = AUDIT_CONFIDENCE,
    coords: list[int] | None = None,
) -> Any:
    """Audit ``claim`` on release vectors drawn beforehand on D (``va``) and D' (``vb``),
    ``samples`` rows each, with the testers of :func:`audit_testers` on ``coords`` (default:
    the coordinates that vary)."""
    if coords is None:
        coords = [j for j in range(va.shape[1]) if np.concatenate([va[:, j], vb[:, j]]).std() > 0]
    scales = np.concatenate([va, vb])[:, coords].std(axis=0)
    table = {"D": va, "D'": vb}

    def mechanism(x: str, size: int) -> np.ndarray:
        got = table[x][:size]
        table[x] = table[x][size:]
        return got

    return audit(
        mechanism,
        ("D", "D'"),
        samples=samples,
        claim=claim,
        confidence=confidence,
        vectorized=True,
        testers=audit_testers(coords, scales),
        source=src,
    )
