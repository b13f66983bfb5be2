"""Accuracy of dpkit's analytics releases at equal epsilon: interval level and width, and the
variance/std pair. Writes the ``analytics_accuracy`` section of docs/benchmarks.md.

(a) Intervals. For a query ``mean(x) + sum(x)`` with bounds [0, 100], one row per person per
group (``max_rows_per_partition=1``), epsilon 1 (pure: discrete Laplace; zCDP: discrete
Gaussian, delta 1e-6), the priced noises are drawn ``REPS`` times (``Noise.sample``, the
release's own sampler) for a group of ``n`` people, and each draw gives the interval of the
current release (Fieller's pivot for the mean, the exact law of ``Z_T + c Z_N`` for the sum,
:mod:`dpkit.analytics._intervals`) and the former one (each noise at ``1 - alpha/2``, union
bound), from the same draws. Coverage = share holding the true value; width = median.

(b) Variance and std asked together, per group of about 500 people (40 groups, 20,000 people,
values uniform on [0, 100]), epsilon 1: one query with both (the std is now the variance's
square root, one release with the whole budget) against the former split (each statistic its
own release at half the budget). Median relative error over groups and repetitions.

(c) Count, sum and mean of one column in one query (the mean's own count and centred sum
released once, the count and sum derived from them, the budget split by ``pool_split``),
against the release before (``--before-src DIR``: a source tree of the former dpkit, run in a
subprocess; there a row count stands for the count of the column, which has no NULLs here).
Incomes: exponential with mean 50,000 clamped to the bounds [0, 500,000], one row per person,
epsilon 1 (zCDP: delta 1e-6); overall (20,000 people) and per group (40 groups of about 500).
Median absolute error over groups and runs; the last column is a query with the mean alone
(only the split differs from before).

(d) Variance intervals: coverage and median width of the 95% interval of a variance (bounds
[0, 100], epsilon 1, one group of 200 or 2,000 people) from the pivot of its three noisy
integers now and the former three-way union bound, from the same draws.

Run: ``PYTHONPATH=src .venv/bin/python benchmarks/analytics_accuracy.py --before-src DIR``
(``--variance-only``: only the two variance tables, replaced in the section written before;
``--quick``: fewer draws and runs; ``DIR`` e.g. from ``git archive bf699c3 src | tar -x -C
/tmp/before``, then ``/tmp/before/src``).
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np

REPS = 2000 if "--quick" not in sys.argv else 200
SIZES = (20, 200, 2000)


def _intervals(mode: str, n_true: int, seed: int) -> dict[str, float]:
    import dpkit.analytics as dpa
    from dpkit.analytics._intervals import joint_halfwidth, ratio_cells, ratio_intervals
    from dpkit.analytics._pricing import price
    from dpkit.noise import RandomSource

    stats = {"m": dpa.mean("x", bounds=(0.0, 100.0)), "s": dpa.sum("x", bounds=(0.0, 100.0))}
    pr = price(
        stats,
        mode=mode,  # type: ignore[arg-type]
        epsilon=1.0,
        delta=0.0 if mode == "pure" else 1e-6,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    if pr.stats[0].complement is not None:
        return _complement_intervals(pr.stats[0].complement, n_true, seed)
    mn, ms = pr.stats[0].measures[:2]
    assert mn.noise is not None and ms.noise is not None
    k, c, step = ms.measure.frac_bits, ms.center, ms.step
    rng = np.random.default_rng(seed)
    ints = [math.floor(v * 2**k) for v in rng.uniform(0.0, 100.0, n_true)]
    t_true = sum(ints) - c * n_true  # centred sum in steps
    r_true = t_true / n_true
    src = RandomSource(seed=seed, insecure=True)
    zt = np.array(ms.noise.sample(REPS, src), dtype=object)
    zn = np.array(mn.noise.sample(REPS, src), dtype=object)
    tt, nn = (t_true + zt).astype(float), (n_true + zn).astype(float)
    alpha = 0.05
    out: dict[str, float] = {}
    # sum: S' - s = Z_T + c Z_N
    err = (zt + c * zn).astype(float)
    hj = joint_halfwidth(ms.noise, mn.noise, float(-c), float(-c), alpha)
    assert hj is not None
    hu = ms.noise.halfwidth(alpha / 2) + abs(c) * mn.noise.halfwidth(alpha / 2)
    out["sum_cov_new"] = float(np.mean(np.abs(err) <= hj))
    out["sum_cov_old"] = float(np.mean(np.abs(err) <= hu))
    out["sum_w_new"], out["sum_w_old"] = 2 * hj * step, 2 * hu * step
    # mean, in steps around the centre; the bound range is [lo - c, hi - c]
    r_lo = math.floor(0.0 * 2**k) - c
    r_hi = math.floor(100.0 * 2**k) - c
    cells = ratio_cells(ms.noise, mn.noise, float(r_lo), float(r_hi), alpha)
    assert cells is not None
    lo, hi, found = ratio_intervals(tt, nn, cells)
    hi = hi + 1.0  # the release raises the upper end by one step (fixed-point floor)
    out["mean_cov_new"] = float(np.mean(found & (lo <= r_true) & (r_true <= hi)))
    out["mean_w_new"] = float(np.median(np.where(found, hi - lo, 0.0))) * step
    ht, hn = ms.noise.halfwidth(alpha / 2), mn.noise.halfwidth(alpha / 2)
    n_lo, n_hi = nn - hn, nn + hn
    with np.errstate(divide="ignore", invalid="ignore"):
        box = np.stack([(tt - ht) / n_lo, (tt - ht) / n_hi, (tt + ht) / n_lo, (tt + ht) / n_hi])
    wide = n_lo < 1
    o_lo = np.where(wide, r_lo, np.maximum(box.min(axis=0), r_lo))
    o_hi = np.where(wide, r_hi, np.minimum(box.max(axis=0) + 1.0, r_hi))
    out["mean_cov_old"] = float(np.mean((o_lo <= r_true) & (r_true <= o_hi)))
    out["mean_w_old"] = float(np.median(o_hi - o_lo)) * step
    return out


def _complement_intervals(cp: Any, n_true: int, seed: int) -> dict[str, float]:
    """:func:`_intervals` for a mean and sum released from the complementary pair: ``A = hi N
    - S`` and ``B = S - lo N`` with one noise law. Now: the exact-law sum halfwidth and the
    mean's pivot (:mod:`dpkit.analytics._intervals`); before: each noise at ``1 - alpha/2``
    (union bound), the sum's error within ``(|hi| + |lo|) h / (hi - lo)`` and the mean between
    the extremes of ``lo + (hi - lo) B / (A + B)`` over that box."""
    from dpkit.analytics._intervals import complement_mean_intervals, complement_sum_halfwidth
    from dpkit.noise import RandomSource

    lo, hi, step = cp.lo, cp.hi, cp.step
    span = hi - lo
    rng = np.random.default_rng(seed)
    k = round(-math.log2(step))
    ints = [math.floor(v * 2**k) for v in rng.uniform(0.0, 100.0, n_true)]
    s_true = sum(ints)
    a_true, b_true = hi * n_true - s_true, s_true - lo * n_true
    m_true = s_true / n_true  # in steps
    src = RandomSource(seed=seed, insecure=True)
    za = np.array(cp.noise.sample(REPS, src), dtype=object)
    zb = np.array(cp.noise.sample(REPS, src), dtype=object)
    aa, bb = (a_true + za).astype(float), (b_true + zb).astype(float)
    alpha = 0.05
    out: dict[str, float] = {}
    err = ((hi * zb + lo * za) / span).astype(float)
    hj = complement_sum_halfwidth(cp.noise, lo, hi, alpha)
    h2 = float(cp.noise.halfwidth(alpha / 2))
    hu = (abs(hi) + abs(lo)) * h2 / span
    out["sum_cov_new"] = float(np.mean(np.abs(err) <= hj))
    out["sum_cov_old"] = float(np.mean(np.abs(err) <= hu))
    out["sum_w_new"], out["sum_w_old"] = 2 * hj * step, 2 * hu * step
    m_lo, m_hi, found = complement_mean_intervals(cp.noise, aa, bb, lo, hi, alpha)
    m_lo, m_hi = m_lo - 4.0, m_hi + 5.0  # the release's padding (float rounding, the floor)
    out["mean_cov_new"] = float(np.mean(found & (m_lo <= m_true) & (m_true <= m_hi)))
    out["mean_w_new"] = (
        float(np.median(np.where(found, np.minimum(m_hi, hi) - np.maximum(m_lo, lo), 0.0))) * step
    )
    a_lo, a_hi, b_lo, b_hi = aa - h2, aa + h2, bb - h2, bb + h2
    with np.errstate(divide="ignore", invalid="ignore"):
        # lo + span b / (a + b) rises with b and falls with a: extremes at two corners
        r_min = np.clip(b_lo, 0.0, None) / (a_hi + np.clip(b_lo, 0.0, None))
        r_max = np.clip(b_hi, 0.0, None) / (np.clip(a_lo, 0.0, None) + np.clip(b_hi, 0.0, None))
    r_min = np.nan_to_num(r_min, nan=0.0)
    r_max = np.nan_to_num(r_max, nan=1.0)
    wide = a_hi + b_hi < span  # the count's interval reaches below one
    o_lo = np.where(wide, lo, lo + span * np.clip(r_min, 0.0, 1.0))
    o_hi = np.where(wide, hi, np.minimum(lo + span * np.clip(r_max, 0.0, 1.0) + 1.0, hi))
    out["mean_cov_old"] = float(np.mean((o_lo <= m_true) & (m_true <= o_hi)))
    out["mean_w_old"] = float(np.median(o_hi - o_lo)) * step
    return out


def _spread(seed: int, together: bool) -> tuple[list[float], list[float]]:
    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.accounting import Budget
    from dpkit.noise import RandomSource

    rng = np.random.default_rng(100 + seed)
    groups = 40
    df = pd.DataFrame(
        {
            "uid": np.arange(20_000),
            "g": rng.integers(0, groups, 20_000),
            "x": rng.uniform(0.0, 100.0, 20_000),
        }
    )
    true_v = df.groupby("g")["x"].var(ddof=0).to_numpy()
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=Budget(epsilon=1e9),
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )

    def q() -> dpa.Query:
        return (
            s.query()
            .group_by("g", keys=list(range(groups)))
            .bound(max_partitions=1, max_rows_per_partition=1)
        )

    b = (0.0, 100.0)
    if together:
        f = q().agg(v=dpa.variance("x", bounds=b), s=dpa.std("x", bounds=b)).run(epsilon=1.0)
        v, sd = f["v"].to_numpy(), f["s"].to_numpy()
    else:  # the former split: each its own release at half the budget
        v = q().agg(v=dpa.variance("x", bounds=b)).run(epsilon=0.5)["v"].to_numpy()
        sd = q().agg(s=dpa.std("x", bounds=b)).run(epsilon=0.5)["s"].to_numpy()
    ev = list(np.abs(v - true_v) / true_v)
    es = list(np.abs(sd - np.sqrt(true_v)) / np.sqrt(true_v))
    return ev, es


POOL_PEOPLE, POOL_GROUPS = 20_000, 40


def _pool_run(
    mode: str, grouped: bool, seed: int, alone: bool = False, pair: bool = False
) -> dict[str, list[float]]:
    """Absolute errors of count, sum and mean of one column (one query) for one run
    (``alone``: a query with the mean only; ``pair``: the sum and the mean only)."""
    import inspect

    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.accounting import Budget
    from dpkit.noise import RandomSource

    rng = np.random.default_rng(500 + seed)
    x = np.minimum(rng.exponential(50_000.0, POOL_PEOPLE), 500_000.0)
    g = rng.integers(0, POOL_GROUPS, POOL_PEOPLE)
    df = pd.DataFrame({"uid": np.arange(POOL_PEOPLE), "g": g, "x": x})
    budget = (
        Budget(epsilon=1e9) if mode == "pure" else Budget(epsilon=1e9, delta=0.5, method="zcdp")
    )
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )
    q = s.query()
    if grouped:
        q = q.group_by("g", keys=list(range(POOL_GROUPS)))
    q = q.bound(max_partitions=1, max_rows_per_partition=1)
    b = (0.0, 500_000.0)
    by_column = "column" in inspect.signature(dpa.count).parameters
    n_stat = dpa.count("x") if by_column else dpa.count()
    kw: dict[str, Any] = {} if mode == "pure" else {"delta": 1e-6}
    if alone:
        f = q.agg(m=dpa.mean("x", bounds=b)).run(epsilon=1.0, **kw)
    elif pair:
        f = q.agg(s=dpa.sum("x", bounds=b), m=dpa.mean("x", bounds=b)).run(epsilon=1.0, **kw)
    else:
        f = q.agg(n=n_stat, s=dpa.sum("x", bounds=b), m=dpa.mean("x", bounds=b)).run(
            epsilon=1.0, **kw
        )
    if grouped:
        tn = df.groupby("g")["x"].count().to_numpy()
        ts = df.groupby("g")["x"].sum().to_numpy()
    else:
        tn, ts = np.array([len(x)]), np.array([x.sum()])
    out = {"mean": list(np.abs(f["m"].to_numpy() - ts / tn))}
    if not alone:
        out["sum"] = list(np.abs(f["s"].to_numpy() - ts))
    if not (alone or pair):
        out["count"] = list(np.abs(f["n"].to_numpy() - tn))
    return out


def pool_errors(reps: int) -> dict[str, float]:
    """Median absolute errors per (mode, grouping, statistic) over ``reps`` runs."""
    out: dict[str, float] = {}
    for mode in ("pure", "zcdp"):
        for grouped in (False, True):
            acc: dict[str, list[float]] = {"count": [], "sum": [], "mean": []}
            for rep in range(reps):
                for k, v in _pool_run(mode, grouped, rep).items():
                    acc[k] += v
            for k, v in acc.items():
                out[f"{mode}/{'groups' if grouped else 'overall'}/{k}"] = float(np.median(v))
            alone: list[float] = []
            for rep in range(reps):
                alone += _pool_run(mode, grouped, rep, alone=True)["mean"]
            out[f"{mode}/{'groups' if grouped else 'overall'}/alone"] = float(np.median(alone))
            pair: dict[str, list[float]] = {"sum": [], "mean": []}
            for rep in range(reps):
                for k, v in _pool_run(mode, grouped, rep, pair=True).items():
                    pair[k] += v
            for k, v in pair.items():
                out[f"{mode}/{'groups' if grouped else 'overall'}/pair_{k}"] = float(np.median(v))
    return out


VAR_DATA = (("uniform on [0, 100]", None), ("normal, mean 50, sd 12", 50.0))
VAR_DATA += (("normal, mean 25, sd 12", 25.0),)


def _var_run(mode: str, loc: float | None, seed: int) -> tuple[list[float], list[float]]:
    """Relative errors of a variance and a std of one column asked together, per group (40
    groups of about 500 people, bounds [0, 100], epsilon 1) for one run."""
    import pandas as pd

    import dpkit.analytics as dpa
    from dpkit.accounting import Budget
    from dpkit.noise import RandomSource

    rng = np.random.default_rng(900 + seed)
    groups, people = 40, 20_000
    x = rng.uniform(0.0, 100.0, people) if loc is None else rng.normal(loc, 12.0, people)
    df = pd.DataFrame(
        {"uid": np.arange(people), "g": rng.integers(0, groups, people), "x": x.clip(0, 100)}
    )
    true_v = df.groupby("g")["x"].var(ddof=0).to_numpy()
    budget = (
        Budget(epsilon=1e9) if mode == "pure" else Budget(epsilon=1e9, delta=0.5, method="zcdp")
    )
    s = dpa.Session(
        df,
        privacy_unit="uid",
        budget=budget,
        source_of_randomness=RandomSource(seed=seed, insecure=True),
    )
    b = (0.0, 100.0)
    kw: dict[str, Any] = {} if mode == "pure" else {"delta": 1e-6}
    f = (
        s.query()
        .group_by("g", keys=list(range(groups)))
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(v=dpa.variance("x", bounds=b), s=dpa.std("x", bounds=b))
        .run(epsilon=1.0, **kw)
    )
    ev = list(np.abs(f["v"].to_numpy() - true_v) / true_v)
    es = list(np.abs(f["s"].to_numpy() - np.sqrt(true_v)) / np.sqrt(true_v))
    return ev, es


def var_errors(reps: int) -> dict[str, float]:
    """Median relative errors of variance and std per (mode, data) over ``reps`` runs."""
    out: dict[str, float] = {}
    for mode in ("pure", "zcdp"):
        for i, (_, loc) in enumerate(VAR_DATA):
            ev: list[float] = []
            es: list[float] = []
            for rep in range(reps):
                a, b = _var_run(mode, loc, rep)
                ev += a
                es += b
            out[f"{mode}/{i}/var"] = float(np.median(ev))
            out[f"{mode}/{i}/std"] = float(np.median(es))
    return out


def var_errors_thirds(reps: int) -> dict[str, float]:
    """:func:`var_errors` with a variance's budget in equal thirds (the split before
    ``pool_split``; run in a former source tree, whose sum of squares is not centred)."""
    from fractions import Fraction

    import dpkit.analytics._pricing as pricing

    plain = pricing.pool_split

    def thirds(pure: bool, kind: str, *args: Any, **kw: Any) -> tuple[Fraction, ...]:
        if kind in ("variance", "std"):
            return (Fraction(1, 3), Fraction(1, 3), Fraction(1, 3))
        return plain(pure, kind, *args, **kw)

    pricing.pool_split = thirds  # type: ignore[assignment]
    try:
        return var_errors(reps)
    finally:
        pricing.pool_split = plain


def _pool_before(src: str, reps: int, fn: str = "pool_errors") -> dict[str, float]:
    import json
    import os
    import subprocess

    env = {**os.environ, "PYTHONPATH": src}
    code = (
        "import json, sys; sys.path.insert(0, 'benchmarks');"
        "import analytics_accuracy as a;"
        f"print(json.dumps(a.{fn}({reps})))"
    )
    res = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    out: dict[str, float] = json.loads(res.stdout.strip().splitlines()[-1])
    return out


VAR_CONFIGS = (("pure", 200, 50.0), ("pure", 2000, 50.0), ("pure", 2000, 25.0))
VAR_CONFIGS += tuple(("zcdp", n, loc) for _, n, loc in VAR_CONFIGS)


def _pair_variance_intervals(sp: Any, x: np.ndarray, seed: int) -> dict[str, float]:
    """Coverage and median width of the 95% interval of a pure variance released from the
    complementary pair and the centred squares (``sp``), over ``REPS`` draws of its noises."""
    from dpkit.analytics._release import _variance_pivot, pair_count_and_sum
    from dpkit.noise import RandomSource

    cp = sp.complement
    mn, ms, mq = sp.measures
    n = len(x)
    k, k2, m = ms.measure.frac_bits, mq.measure.frac_bits, mq.measure.center
    s = sum(math.floor(v * 2**k) for v in x)
    q = sum(math.floor(((v - m) ** 2) * 2**k2) for v in x)
    src = RandomSource(seed=seed, insecure=True)
    za, zb, zc = (
        np.array(nz.sample(REPS, src), dtype=object) for nz in (cp.noise, cp.noise, mq.noise)
    )
    a, b = list(cp.hi * n - s + za), list(s - cp.lo * n + zb)
    nn, tt = pair_count_and_sum(cp, a, b)
    qq = [q - mq.center * n + z + mq.center * c for z, c in zip(zc, nn, strict=True)]
    got = _variance_pivot(sp.stat, mn, ms, mq, nn, tt, qq, 0.05, pair=(cp, a, b))
    assert got is not None
    v, top = float(np.var(x)), 2500.0
    lo, hi = np.clip(got[0], 0.0, top), np.clip(got[1], 0.0, top)
    return {
        "cov": float(np.mean(got[2] & (lo <= v) & (v <= hi))),
        "w": float(np.median(np.where(got[2], hi - lo, 0.0))),
    }


def _variance_intervals(mode: str, n: int, loc: float, seed: int) -> dict[str, float]:
    """Coverage and median width of the variance's 95% interval, now and before. zCDP: now
    the pivot of its count, centred sum and squares, before each of N, T, Q at 1 - alpha/3
    with the extremes over the box, from the same draws. Pure: now the complementary pair
    and the centred squares (:func:`_pair_variance_intervals`), before the three measures'
    pivot (priced as the release before the pair), each from its own draws."""
    import dpkit.analytics as dpa
    from dpkit.analytics._pricing import _price_stat_at, price
    from dpkit.analytics._release import _variance_pivot, variance_box
    from dpkit.noise import RandomSource

    pr = price(
        {"v": dpa.variance("x", bounds=(0.0, 100.0))},
        mode=mode,  # type: ignore[arg-type]
        epsilon=1.0,
        delta=0.0 if mode == "pure" else 1e-6,
        max_partitions=1,
        max_rows_per_partition=1,
        select_partitions=False,
    )
    sp = pr.stats[0]
    rng = np.random.default_rng(seed)
    x = np.clip(rng.normal(loc, 12.0, n), 0.0, 100.0)
    pair = None
    if sp.complement is not None:
        pair = _pair_variance_intervals(sp, x, seed)
        sp = _price_stat_at("v", sp.stat, "pure", sp.epsilon, 1, 1, None, piloting=False)
    mn, ms, mq = sp.measures
    assert mn.noise is not None and ms.noise is not None and mq.noise is not None
    k, k2, m = ms.measure.frac_bits, mq.measure.frac_bits, mq.measure.center
    t = sum(math.floor(v * 2**k) for v in x) - ms.center * n
    q = sum(math.floor(((v - m) ** 2) * 2**k2) for v in x)
    src = RandomSource(seed=seed, insecure=True)
    zt, zq, zn = (np.array(mp.noise.sample(REPS, src), dtype=object) for mp in (ms, mq, mn))
    # Q' = Q - kq N is noised and Q = Q' + kq N rebuilt, as the release does
    kq = getattr(mq, "center", 0) if getattr(mq, "count_of", None) else 0
    tt, qq, nn = list(t + zt), list(q + zq + kq * zn), list(n + zn)
    v = float(np.var(x))
    alpha, half = 0.05, 50.0
    got = _variance_pivot(sp.stat, mn, ms, mq, nn, tt, qq, alpha)
    assert got is not None
    lo = np.clip(got[0], 0.0, half * half)
    hi = np.clip(got[1], 0.0, half * half)
    found = got[2]
    out = {
        "cov_new": float(np.mean(found & (lo <= v) & (v <= hi))),
        "w_new": float(np.median(np.where(found, hi - lo, 0.0))),
    }
    out["v"] = v
    if pair is not None:  # now the pair, before the three measures' pivot
        out["cov_old"], out["w_old"] = out["cov_new"], out["w_new"]
        out["cov_new"], out["w_new"] = pair["cov"], pair["w"]
        return out
    hn, ht, hq = (mp.noise.halfwidth(alpha / 3) for mp in (mn, ms, mq))
    hw = (hn, ht, hq + kq * hn)
    shift = ms.center * ms.step - m
    hits, widths = 0, []
    for g in range(REPS):
        o_lo, o_hi = variance_box(nn[g], tt[g], qq[g], hw, (ms.step, mq.step), shift, half * half)  # type: ignore[arg-type]
        hits += o_lo <= v <= o_hi
        widths.append(o_hi - o_lo)
    out["cov_old"], out["w_old"] = hits / REPS, float(np.median(widths))
    out["v"] = v
    return out


def main() -> None:
    from _report import machine, write_section

    lines = [
        "## Analytics accuracy at equal epsilon (`benchmarks/analytics_accuracy.py`)",
        "",
        f"Machine: {machine()}. Bounds [0, 100], one row per person, epsilon 1 (zCDP: delta "
        f"1e-6). Intervals: {REPS:,} draws of the release's noises per row, current and "
        "former construction from the same draws; claimed level 95%. In pure sessions the "
        "mean and the sum come from the complementary pair (now: the exact law of its two "
        "noises; before: each noise at 1 - alpha/2); in zCDP sessions from the mean's count "
        "and centred sum.",
        "",
        "### 95% intervals: coverage and median width",
        "",
        "| accounting | people | mean: coverage now / before | mean: width now / before "
        "| sum: coverage now / before | sum: width now / before |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for mode in ("pure", "zcdp"):
        for i, n in enumerate(SIZES):
            r = _intervals(mode, n, 7 + i)
            lines.append(
                f"| {mode} | {n:,} | {r['mean_cov_new']:.1%} / {r['mean_cov_old']:.1%} "
                f"| {r['mean_w_new']:.3g} / {r['mean_w_old']:.3g} "
                f"| {r['sum_cov_new']:.1%} / {r['sum_cov_old']:.1%} "
                f"| {r['sum_w_new']:.4g} / {r['sum_w_old']:.4g} |"
            )
            print(lines[-1], flush=True)
    reps = 10 if "--quick" not in sys.argv else 2
    res = {}
    for together in (True, False):
        ev: list[float] = []
        es: list[float] = []
        for rep in range(reps):
            a, b = _spread(rep, together)
            ev += a
            es += b
        res[together] = (float(np.median(ev)), float(np.median(es)))
    lines += [
        "",
        f"### Variance and std asked together (40 groups of about 500 people, {reps} runs)",
        "",
        "| release | variance: median rel. error | std: median rel. error |",
        "| --- | ---: | ---: |",
        f"| std as the variance's square root (now) | {res[True][0]:.2%} | {res[True][1]:.2%} |",
        f"| each its own release at half the budget (before) | {res[False][0]:.2%} "
        f"| {res[False][1]:.2%} |",
    ]
    lines += _variance_interval_lines() + _pool_lines() + _variance_split_lines()
    md = "\n".join(lines) + "\n"
    print(md)
    write_section("analytics_accuracy", md)


def _variance_interval_lines() -> list[str]:
    lines = [
        "",
        "### Variance: 95% intervals, coverage and median width",
        "",
        f"Values normal (sd 12) around the centre given, clamped to [0, 100]; {REPS:,} draws of "
        "the variance's noises per row. zCDP now: the pivot of count, centred sum and sum of "
        "squares under their joint noise law (Fieller's mean interval at alpha/20 for the "
        "mean); before: each noise at 1 - alpha/3, extremes over the box. Pure now: the "
        "complementary pair and the squares centred at half their range, the same pivot "
        "read with their laws (the pair's mean interval at alpha/20); before: the count, "
        "centred sum and squares with their pivot (own draws).",
        "",
        "| accounting | people | centre | variance | coverage now / before | width now / before |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, (mode, n, loc) in enumerate(VAR_CONFIGS):
        r = _variance_intervals(mode, n, loc, 31 + i)
        lines.append(
            f"| {mode} | {n:,} | {loc:g} | {r['v']:.4g} | {r['cov_new']:.1%} / "
            f"{r['cov_old']:.1%} | {r['w_new']:.4g} / {r['w_old']:.4g} |"
        )
        print(lines[-1], flush=True)
    return lines


def _pool_lines() -> list[str]:
    pool_reps = 20 if "--quick" not in sys.argv else 3
    now = pool_errors(pool_reps)
    before: dict[str, float] = {}
    if "--before-src" in sys.argv:
        before = _pool_before(sys.argv[sys.argv.index("--before-src") + 1], pool_reps)
    lines = [
        "",
        "### Count, sum and mean of one column in one query",
        "",
        f"Incomes (exponential, mean 50,000) clamped to [0, 500,000], {POOL_PEOPLE:,} people, "
        f"one row each; overall and per group ({POOL_GROUPS} groups of about "
        f"{POOL_PEOPLE // POOL_GROUPS}), epsilon 1 (zCDP: delta 1e-6), {pool_reps} runs. Now: "
        "the count and the sum are released from the mean's noisy count and centred sum, "
        "whose budget split minimises the weighted relative variances (`pool_split`). Before: "
        "the release of the source tree given with `--before-src` (a version with a separate "
        "count, the sum from the mean's measures and equal halves measured 2.5 / 535k / 25.2 "
        "overall and 2 / 903k / 1,628 per group in pure sessions against 1.5 / 374k / 16.7 "
        "and 1 / 561k / 1,025 now). Median absolute "
        "error now / before. The overall rows have one value per run (a median of "
        f"{pool_reps}, uncertain by about a fifth); the last column is a query with the mean "
        "alone, where only the split differs (its gain depends on where the mean lies: the "
        "split assumes anywhere within the bounds, these incomes sit near the lower bound).",
        "",
        "| accounting | groups | count | sum | mean | mean asked alone |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]

    def cell(key: str) -> str:
        b = before.get(key)
        return f"{now[key]:,.4g}" + (f" / {b:,.4g}" if b is not None else "")

    for mode in ("pure", "zcdp"):
        for grp in ("overall", "groups"):
            lines.append(
                f"| {mode} | {grp} | {cell(f'{mode}/{grp}/count')} | "
                f"{cell(f'{mode}/{grp}/sum')} | {cell(f'{mode}/{grp}/mean')} | "
                f"{cell(f'{mode}/{grp}/alone')} |"
            )
    lines += [
        "",
        "### Sum and mean of one column in one query",
        "",
        "The same incomes and runs, a query with the sum and the mean only (pure: now from "
        "the complementary pair; zCDP, and pure before: both from the mean's noisy count and "
        "centred sum). Median absolute error now / before.",
        "",
        "| accounting | groups | sum | mean |",
        "| --- | --- | ---: | ---: |",
    ]
    for mode in ("pure", "zcdp"):
        for grp in ("overall", "groups"):
            lines.append(
                f"| {mode} | {grp} | {cell(f'{mode}/{grp}/pair_sum')} | "
                f"{cell(f'{mode}/{grp}/pair_mean')} |"
            )
    return lines


def _variance_split_lines() -> list[str]:
    var_reps = 20 if "--quick" not in sys.argv else 2
    vnow = var_errors(var_reps)
    vbefore: dict[str, float] = {}
    vthirds: dict[str, float] = {}
    if "--before-src" in sys.argv:
        src = sys.argv[sys.argv.index("--before-src") + 1]
        vbefore = _pool_before(src, var_reps, "var_errors")
        vthirds = _pool_before(src, var_reps, "var_errors_thirds")
    lines = [
        "",
        "### Variance and std: the split of their budget",
        "",
        f"40 groups of about 500 people, bounds [0, 100], epsilon 1 (zCDP: delta 1e-6), "
        f"{var_reps} runs; variance and std asked together (one release, the std its square "
        "root). Now: pure, the complementary pair and the sum of squares centred at half its "
        "range, split to minimise the variance's leading-order error "
        "(`variance_pair_dominates`); zCDP, the count, centred sum and sum of squares centred "
        "at half its range, split by `pool_split`. Split: the release of the source tree "
        "given with `--before-src` (pure: the count, centred sum and squares centred at a "
        "fifth, split by `pool_split`). Thirds: that tree with equal thirds. Median relative "
        "error now / split / thirds (each a median of 800 group values, uncertain by about "
        "6%).",
        "",
        "| accounting | values | variance | std |",
        "| --- | --- | ---: | ---: |",
    ]

    def vcell(key: str) -> str:
        out = f"{vnow[key]:.2%}"
        for other in (vbefore, vthirds):
            if key in other:
                out += f" / {other[key]:.2%}"
        return out

    for mode in ("pure", "zcdp"):
        for i, (label, _) in enumerate(VAR_DATA):
            lines.append(
                f"| {mode} | {label} | {vcell(f'{mode}/{i}/var')} | {vcell(f'{mode}/{i}/std')} |"
            )
    return lines


def variance_only() -> None:
    """``--variance-only``: rerun the variance tables and put them in place of the same
    subsections of the section already written (the other tables are kept)."""
    import re

    from _report import DOC, write_section

    text = DOC.read_text()
    m = re.search(
        r"<!-- begin analytics_accuracy -->\n(.*?)\n<!-- end analytics_accuracy -->", text, re.S
    )
    assert m is not None, "run the whole benchmark once first"
    md = m.group(1)
    for heading, new in (
        ("### Variance: 95% intervals", _variance_interval_lines()),
        ("### Variance and std: the split", _variance_split_lines()),
    ):
        start = md.index(heading)
        nxt = md.find("\n### ", start + 1)
        end = len(md) if nxt < 0 else nxt
        md = md[:start] + "\n".join(new[1:]) + "\n" + md[end:]
    print(md)
    write_section("analytics_accuracy", md)


if __name__ == "__main__":
    if "--variance-only" in sys.argv:
        variance_only()
    else:
        main()
