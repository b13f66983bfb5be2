"""Noise, partition selection, confidence intervals and the result frame of one release.

Input: the exact per-group integers an engine returned (:class:`~dpkit.analytics._plan.
EngineResult`) and the query's :class:`~dpkit.analytics._pricing.Pricing`. Output: one row per
released group. Everything is post-processing of the noisy integers, so the privacy of the
release is exactly what the pricing charged.

Which groups. With public keys every key gets a row, present in the data or not (an absent key
has exact value 0 for every measure); groups outside the keys are dropped. Without keys, each
group found in the bounded data is kept only if private partition selection releases it, from
its number of distinct units. Without ``group_by`` there is one global row.

Estimates and confidence intervals, at level ``1 - alpha`` for the *bounded* statistic (the
value computed on the data after contribution bounding and clamping):

* counts, sums, histogram cells: the noisy integer, and ``[X - h, X + h']`` with ``h`` the
  smallest integer such that ``P(|Z| > h) <= alpha`` under the noise law (exact tail of the
  discrete Laplace; exact or bounded tail of the discrete Gaussian) and ``h' = h - 1`` where
  ``P(Z > h) + P(Z > h - 1) <= alpha`` still holds, else ``h`` (the level as close to ``1 -
  alpha`` as the lattice allows: :func:`~dpkit.analytics._intervals.lattice_offsets`).
  Counts and cells, never negative, take Neyman's construction over ``0, 1, ...``: the
  interval holds 0 only while ``X <= b``, ``b`` the one-sided ``1 - alpha`` quantile of the
  noise, and starts at 1 above it (:func:`~dpkit.analytics._intervals.zero_reach`; clipping
  at 0 held an empty cell's 0 with probability ``1 - alpha/2`` or so).
* mean: ``c + T/N`` from the noisy centred sum ``T`` and noisy count ``N`` (clipped to the
  bounds; the midpoint when ``N < 1``). Interval: Fieller's pivot under the exact joint law
  of the two noises (:mod:`dpkit.analytics._intervals`): the candidates ``r`` with ``|T - r
  N|`` within the ``1 - alpha`` quantile of ``|Z_T - r Z_N|``, at level ``1 - alpha`` and
  not far above it. The fixed-point floor lowers each value by less than one step ``2^-k``,
  so the upper end is raised by one step. (Where the count's noise is too wide to sum, the
  union bound of two ``1 - alpha/2`` intervals is kept.) A pure mean with fixed bounds first
  draws its pilot, then each group's ``N`` and ``T`` at the centre and split the pilot chose
  (:class:`~dpkit.analytics._pricing.Pilot`); its interval is Fieller's at that group's pair,
  at its level given the pilot's outputs and so overall.
* a sum sharing a mean's (or variance's) measures: ``T + c N`` from the same noisy ``T`` and
  ``N`` (each noised once per release), interval from the exact law of ``Z_T + c Z_N``
  (:func:`~dpkit.analytics._intervals.joint_halfwidth`); a ``count(column)`` beside a mean of
  that column is the mean's noisy ``N`` with its interval.
* variance (and std, its square root): ``Q/N - (T/N + c - m)^2`` from the noisy sum of squares
  ``Q`` about ``m``, rebuilt as ``Q' + kq N`` from the noisy ``Q' = Q - kq N`` (centred at half
  its range, so half the sensitivity) and the noisy ``N``. Interval: the candidates ``(mu,
  v)`` whose pivot ``s_q Q - (v + mu^2) N - 2 mu (s_t T - (mu - shift) N)`` is within the
  quantile of its noise law (:func:`~dpkit.analytics._intervals.variance_cells`), with ``mu``
  in Fieller's mean interval at ``alpha / 20``: at level ``1 - alpha`` and close to it unless
  clipped to ``[0, ((upper - lower)/2)^2]``. (Where the laws cannot be read, each of ``Q', T,
  N`` at ``1 - alpha/3``, extremes over the box.) A std beside a variance of the same column
  and bounds is the square root of that variance's release (the same noisy values). A pure
  variance released from the complementary pair reads ``N`` and ``T`` from the pair
  (:func:`pair_count_and_sum`) and pins the mean by the pair's interval; the pivot is the same.
* quantiles: the exponential mechanism's output (one joint selection of a statistic's levels),
  each lower level clipped to the levels above it. With ``interval_share``, an interval from two
  more selections (:class:`~dpkit.mechanisms.quantile.BinnedQuantileInterval`), each estimate
  clipped into it with the order kept (into ``[max_{i <= k} low_i, min_{j >= k} high_j]`` over
  the levels in order: inside its own interval whenever an ordered choice is); without, no
  interval is given (its rank uncertainty is not converted to a value interval here), and the
  result says so.

Sums are exact fixed-point sums: the reported estimate differs from the sum of the clamped
doubles by less than one lattice step per row (2^-44 noise scales).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np

from dpkit.analytics._aggregates import Statistic, from_number
from dpkit.analytics._intervals import (
    complement_mean_intervals,
    complement_sum_halfwidth,
    count_intervals,
    joint_halfwidth,
    lattice_offsets,
    ratio_cells,
    ratio_intervals,
    zero_reach,
)
from dpkit.analytics._plan import EngineResult, SparseCounts
from dpkit.analytics._pricing import (
    PILOT_SHARE,
    Complement,
    MeasurePrice,
    Pricing,
    StatPrice,
    pilot_choice,
)
from dpkit.errors import PrivacyParameterError
from dpkit.mechanisms.partition_selection import GaussianPartitionSelection
from dpkit.noise import RandomSource

__all__ = ["EmptyReleaseWarning", "ReleaseInfo", "assemble", "normalize_key"]

UNITS_MEASURE = "__units"


def normalize_key(value: Any) -> Any:
    """One representation per key value: numpy scalars to Python, NaN and None to None."""
    if value is None:
        return None
    item = getattr(value, "item", None)
    if item is not None and not isinstance(value, (str, bytes)):
        with contextlib.suppress(TypeError, ValueError):
            value = item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


@dataclass(frozen=True)
class ReleaseInfo:
    """How a released frame was made: per output column the mechanism and noise, and the cost.

    ``epsilon``/``delta``: what the release charged (see :meth:`Pricing.charged`: a delta the
    query was allowed but did not use is not charged and not reported as charged);
    ``notes``: further entries of the dict (what the query was allowed, what is protected).
    """

    columns: dict[str, dict[str, Any]]
    epsilon: float
    delta: float
    mode: str
    alpha: float
    groups_in_data: int | None
    groups_released: int
    selection: dict[str, Any] | None
    note: str | None = None
    notes: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            **(self.notes or {}),
            **({} if self.note is None else {"note": self.note}),
            "epsilon": self.epsilon,
            "delta": self.delta,
            "accounting": self.mode,
            "alpha": self.alpha,
            "groups_released": self.groups_released,
            "partition_selection": self.selection,
            "columns": self.columns,
        }


def _label(x: float, time_kind: str = "") -> str:
    """The exact text of an edge: an integral value without a fraction (``10``), any other
    the shortest decimal that reads back as the same double (``repr``). Distinct edges get
    distinct labels (``f"{x:g}"`` kept 6 significant digits and merged close edges). An edge
    of a date or timestamp column (``time_kind``, see :func:`from_number`) is its ISO text
    (``2024-01-01``, ``2024-01-01T12:00:00``, ``2024-01-01T12:00:00+00:00``)."""
    if time_kind:
        return from_number(x, time_kind).isoformat()
    if x.is_integer() and abs(x) < 2.0**53:
        return str(int(x))
    return repr(x)


def _pct(q: float) -> str:
    """``p`` and the level in percent, exactly: the shortest decimal of ``q`` (``repr``)
    shifted by two places, ``.`` written ``_`` (0.5 -> ``p50``, 0.999 -> ``p99_9``,
    0.1234567 -> ``p12_34567``). Distinct levels get distinct names."""
    d = Decimal(repr(float(q) + 0.0)).scaleb(2).normalize()  # -0.0 is 0.0
    return "p" + format(d, "f").replace(".", "_")


def statistic_columns(name: str, st: Statistic) -> list[str]:
    """The output column names of the statistic ``name`` (estimates only)."""
    if st.kind == "quantile":
        return [f"{name}_{_pct(q)}" for q in st.quantiles]
    if st.kind == "histogram":
        if st.edges:
            e = st.edges
            t = st.time_kind
            names = [f"{name}[{_label(e[i], t)},{_label(e[i + 1], t)})" for i in range(len(e) - 1)]
            names[-1] = names[-1][:-1] + "]"
            return names
        return [f"{name}={c}" for c in st.categories]
    return [name]


def output_columns(group_by: Sequence[str], stats: Sequence[tuple[str, Statistic]]) -> list[str]:
    """Every column of the released frame, in order: the group-by columns, then per
    statistic its estimates, each followed by ``_low`` and ``_high`` (quantiles only with an
    ``interval_share``)."""
    out = list(group_by)
    for name, st in stats:
        for c in statistic_columns(name, st):
            out.append(c)
            if st.kind != "quantile" or st.interval_share:
                out += [f"{c}_low", f"{c}_high"]
    return out


def check_output_columns(group_by: Sequence[str], stats: Sequence[tuple[str, Statistic]]) -> None:
    """Refuse a query whose released frame would hold two columns of one name (one would
    overwrite the other after the charge): decided by the query's names, levels, edges and
    categories alone, before anything is spent."""
    seen: set[str] = set()
    for c in output_columns(group_by, stats):
        if c in seen:
            raise PrivacyParameterError(
                f"two output columns would both be named {c!r}: rename an aggregate or "
                "make its levels, edges or categories distinct"
            )
        seen.add(c)


def stat_columns(sp: StatPrice) -> list[str]:
    """The output column names of one priced statistic (estimates only)."""
    return statistic_columns(sp.name, sp.stat)


def _noise_desc(mp: MeasurePrice) -> dict[str, Any]:
    assert mp.noise is not None
    nz = mp.noise
    return {
        "mechanism": "discrete Laplace" if nz.kind == "discrete_laplace" else "discrete Gaussian",
        "noise_scale": nz.scale * mp.step,
        "noise_std": nz.std * mp.step,
        "measure": mp.measure.kind,
    }


def _exact_vector(
    result: EngineResult, name: str, rows: Sequence[int | None], cells: int
) -> list[list[int]]:
    """Per output group the exact integers of measure ``name`` (zeros for absent groups)."""
    col = result.values.get(name)
    out: list[list[int]] = []
    for i in rows:
        if i is None or col is None:
            out.append([0] * cells)
            continue
        v = col[i]
        if isinstance(v, (tuple, list, SparseCounts)):
            vals = [0 if x is None else int(x) for x in v]
            if len(vals) != cells:
                raise ValueError(f"engine returned {len(vals)} cells for {name}, expected {cells}")
            out.append(vals)
        else:  # an engine's NULL (no contributing row) is 0, decided by type not value
            out.append([0 if v is None else int(v)])  # type: ignore[call-overload]
    return out


def _sparse_groups(
    result: EngineResult, name: str, rows: Sequence[int | None], cells: int
) -> list[tuple[np.ndarray[Any, np.dtype[np.int64]], np.ndarray[Any, np.dtype[np.int64]]]]:
    """Per output group the non-empty cells of measure ``name`` as (indices, counts) arrays
    (no cells for absent groups), without forming the dense vectors of a fine grid."""
    col = result.values.get(name)
    empty = np.zeros(0, dtype=np.int64)
    out = []
    for i in rows:
        v = None if i is None or col is None else col[i]
        if v is None:
            out.append((empty, empty))
            continue
        if isinstance(v, SparseCounts):
            if v.size != cells:
                raise ValueError(f"engine returned {v.size} cells for {name}, expected {cells}")
            out.append((np.array(v.indices, dtype=np.int64), np.array(v.counts, dtype=np.int64)))
            continue
        if not isinstance(v, (tuple, list)) or len(v) != cells:
            raise ValueError(f"engine returned a malformed cell vector for {name}")
        dense = np.array([0 if x is None else int(x) for x in v], dtype=np.int64)
        nz = np.flatnonzero(dense)
        out.append((nz.astype(np.int64), dense[nz]))
    return out


def _noisy(
    mp: MeasurePrice,
    exact: list[list[int]],
    source: RandomSource,
    cache: dict[str, list[list[int]]] | None = None,
) -> list[list[int]]:
    """``exact`` plus fresh noise; with ``cache``, a measure is noised once per release (a
    shared sum reads its partner's noisy ``N`` and ``T``: post-processing, charged once)."""
    if cache is not None and mp.measure.name in cache:
        return cache[mp.measure.name]
    out = _add_noise(mp, exact, source)
    if cache is not None:
        cache[mp.measure.name] = out
    return out


def _add_noise(mp: MeasurePrice, exact: list[list[int]], source: RandomSource) -> list[list[int]]:
    assert mp.noise is not None
    n = len(exact) * mp.cells
    z = mp.noise.sample(n, source)
    out = []
    for g, vals in enumerate(exact):
        out.append([v + z[g * mp.cells + j] for j, v in enumerate(vals)])
    return out


def _ratio_box(t_lo: float, t_hi: float, n_lo: float, n_hi: float) -> tuple[float, float]:
    """Extremes of ``t / n`` over ``[t_lo, t_hi] x [n_lo, n_hi]`` with ``n_lo > 0``."""
    cands = (t_lo / n_lo, t_lo / n_hi, t_hi / n_lo, t_hi / n_hi)
    return min(cands), max(cands)


def _reference_pair(sp: StatPrice) -> tuple[MeasurePrice, MeasurePrice]:
    """A centred mean's (count, centred sum) prices at the middle: its own pair, or its
    pilot's reference pair (what a group keeps when the pilot moves nothing)."""
    pl = sp.pilot
    return (sp.measures[0], sp.measures[1]) if pl is None else (pl.ref_n, pl.ref_t)


def _centred_pair(
    sp: StatPrice,
    result: EngineResult,
    rows: Sequence[int | None],
    source: RandomSource,
    cache: dict[str, list[list[int]]],
) -> tuple[list[int], list[int], list[tuple[MeasurePrice, MeasurePrice]]]:
    """Per group a mean's noisy count ``N``, centred sum ``T = S - c N`` and the pair of
    prices (count, centred sum) they were drawn at; drawn once per release and cached, so a
    sum or count sharing the mean's measures reads the same values (post-processing).

    Without a pilot every group has the statistic's own pair. With one
    (:class:`~dpkit.analytics._pricing.Pilot`): first the pilot's ``N_1`` and ``T_1`` (at the
    middle), then per group the centre and split of
    :func:`~dpkit.analytics._pricing.pilot_choice` (the reference pair when it gives none, or
    when the chosen pair cannot be priced, which the pricing has ruled out), then ``N`` and
    ``T`` with fresh noise at that pair. The pilot's values are not released."""
    pl = sp.pilot
    m_n, m_s = _reference_pair(sp)
    n_exact = _exact_vector(result, m_n.measure.name, rows, 1)
    s_exact = _exact_vector(result, m_s.measure.name, rows, 1)
    if pl is None:
        t_exact = [[s[0] - m_s.center * n[0]] for s, n in zip(s_exact, n_exact, strict=True)]
        n_noisy = [v[0] for v in _noisy(m_n, n_exact, source, cache)]
        t_noisy = [v[0] for v in _noisy(m_s, t_exact, source, cache)]
        return n_noisy, t_noisy, [(m_n, m_s)] * len(rows)
    key = m_s.measure.name + "@centre"
    memo: dict[tuple[int, int], tuple[MeasurePrice, MeasurePrice]] = {}

    def pair(c: int, f: int) -> tuple[MeasurePrice, MeasurePrice]:
        if f < 0:
            return m_n, m_s
        if (c, f) not in memo:
            try:
                memo[c, f] = pl.prices(c, f)
            except PrivacyParameterError:  # ruled out by the pricing; never raise here
                memo[c, f] = (m_n, m_s)
        return memo[c, f]

    if key in cache:
        pairs = [pair(c, f) for c, f in cache[key]]
        return (
            [v[0] for v in cache[m_n.measure.name]],
            [v[0] for v in cache[m_s.measure.name]],
            pairs,
        )
    c0 = pl.total.center
    n1 = _add_noise(pl.count, n_exact, source)
    t1 = _add_noise(
        pl.total, [[s[0] - c0 * n[0]] for s, n in zip(s_exact, n_exact, strict=True)], source
    )
    chosen = [pilot_choice(pl, a[0], b[0]) or (m_s.center, -1) for a, b in zip(n1, t1, strict=True)]
    pairs = [pair(c, f) for c, f in chosen]
    n_noisy = [0] * len(rows)
    t_noisy = [0] * len(rows)
    by_pair: dict[int, list[int]] = {}
    for g, pr in enumerate(pairs):
        by_pair.setdefault(id(pr[1]), []).append(g)
    for idx in by_pair.values():
        pn, pt = pairs[idx[0]]
        assert pn.noise is not None and pt.noise is not None
        zn = pn.noise.sample(len(idx), source)
        zt = pt.noise.sample(len(idx), source)
        for j, g in enumerate(idx):
            n_noisy[g] = n_exact[g][0] + zn[j]
            t_noisy[g] = s_exact[g][0] - pt.center * n_exact[g][0] + zt[j]
    cache[m_n.measure.name] = [[v] for v in n_noisy]
    cache[m_s.measure.name] = [[v] for v in t_noisy]
    cache[key] = [
        [m_s.center, -1] if pr[1] is m_s else [pr[1].center, f]
        for pr, (_, f) in zip(pairs, chosen, strict=True)
    ]
    return n_noisy, t_noisy, pairs


def _by_pair(
    pairs: Sequence[tuple[MeasurePrice, MeasurePrice]],
) -> list[tuple[tuple[MeasurePrice, MeasurePrice], list[int]]]:
    """The groups of each distinct pair of prices (one pair without a pilot), in order."""
    out: dict[int, tuple[tuple[MeasurePrice, MeasurePrice], list[int]]] = {}
    for g, pr in enumerate(pairs):
        out.setdefault(id(pr[1]), (pr, []))[1].append(g)
    return list(out.values())


def _pilot_note(sp: StatPrice, pairs: Sequence[tuple[MeasurePrice, MeasurePrice]]) -> str:
    """How the centre of a mean's sum was chosen (the info of its columns)."""
    if sp.pilot is None:
        return "the middle of the bounds"
    moved = sum(1 for pr in pairs if pr[1] is not sp.pilot.ref_t)
    return (
        f"per group from a pilot (its count and sum at the middle, {float(PILOT_SHARE):g} of "
        f"the share, not released); {moved} of {len(pairs)} groups moved from the middle, "
        "the noise shown is the middle's"
    )


def assemble(
    pricing: Pricing,
    result: EngineResult,
    *,
    group_by: tuple[str, ...],
    public_keys: list[tuple[Any, ...]] | None,
    alpha: float,
    source: RandomSource,
    output: str = "pandas",
    warn_empty: bool = False,
    notes: dict[str, Any] | None = None,
) -> Any:
    """Turn an engine result into the released frame (noise, selection, CIs). No charging here:
    the caller has charged ``pricing.event`` already (or is an audit re-running the release).

    A grouped release without rows carries a note ``0 groups released ...`` in its info, and
    with ``warn_empty`` also raises it as an :class:`EmptyReleaseWarning`. ``notes`` are added
    to the frame's ``attrs["dpkit"]`` (privacy unit, allowed cost)."""
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    engine_index: dict[tuple[Any, ...], int] = {}
    for i, key in enumerate(result.keys):
        engine_index[tuple(normalize_key(v) for v in key)] = i

    selection_info: dict[str, Any] | None = None
    pre_noised: dict[str, list[list[int]]] = {}
    if not group_by:
        keys: list[tuple[Any, ...]] = [()]
        rows: list[int | None] = [engine_index.get(())] if engine_index else [None]
        if rows == [None] and len(result.keys) == 1:
            rows = [0]
    elif public_keys is not None:
        keys = [tuple(normalize_key(v) for v in k) for k in public_keys]
        rows = [engine_index.get(k) for k in keys]
    else:
        all_keys = _sorted_keys(engine_index)
        if pricing.selection_count is not None:
            # the count's own noise, drawn once for every group of the data: thresholded for
            # selection, and the same values released for the groups kept (cache below)
            mp_c = next(sp for sp in pricing.stats if sp.name == pricing.selection_count)
            mp_c_m = mp_c.measures[0]
            c_noisy = _add_noise(
                mp_c_m,
                _exact_vector(result, mp_c_m.measure.name, [engine_index[k] for k in all_keys], 1),
                source,
            )
            mask = np.asarray(pricing.selection.release([v[0] for v in c_noisy]), dtype=bool)
            pre_noised = {mp_c_m.measure.name: [v for v, m in zip(c_noisy, mask, strict=True) if m]}
        else:
            units = result.values.get(UNITS_MEASURE, ())
            counts = np.array(
                [int(units[engine_index[k]]) for k in all_keys],  # type: ignore[call-overload]
                dtype=np.int64,
            )
            mask = (
                np.asarray(pricing.selection.release(counts, source=source), dtype=bool)
                if counts.size
                else np.zeros(0, dtype=bool)
            )
        keys = [k for k, keep in zip(all_keys, mask, strict=True) if keep]
        rows = [engine_index[k] for k in keys]
        sel = pricing.selection
        selection_info = {
            "mechanism": type(sel).__name__,
            "epsilon": pricing.selection_epsilon,
            "delta": pricing.selection_delta,
            "max_partitions": pricing.max_partitions,
        }
        threshold = getattr(sel, "threshold", None)
        if threshold is not None:
            selection_info["threshold"] = int(threshold)
        if pricing.selection_count is not None:
            selection_info.update(
                count=pricing.selection_count,
                tau=sel.tau,
                epsilon=0.0 if pricing.mode != "zcdp" else None,
                delta=sel.threshold_delta,
            )
            if pricing.mode == "zcdp":
                selection_info.update(rho=0.0)
        elif isinstance(sel, GaussianPartitionSelection):
            selection_info.update(sigma=sel.sigma, tau=sel.tau)
            if pricing.mode == "zcdp":  # charged as approximate zCDP (rho, threshold delta)
                selection_info.update(
                    epsilon=None, rho=sel.rho, delta=sel.threshold_delta, pmf_slack=sel.pmf_slack
                )

    data: dict[str, Any] = {}
    for j, col in enumerate(group_by):
        data[col] = key_column([k[j] for k in keys])
    info_cols: dict[str, dict[str, Any]] = {}
    ngroups = len(keys)

    cache: dict[str, list[list[int]]] = dict(pre_noised)
    for sp in pricing.stats:
        _release_stat(sp, result, rows, alpha, source, data, info_cols, ngroups, cache)

    thr_col = info_cols.get(pricing.selection_count or "")
    if thr_col is not None:
        # the interval is the noise's, unchanged: it holds the true count with probability at
        # least the level over the noise, not conditionally on the group being shown
        thr_col["selection"] = (
            f"groups shown when this noisy count is above {pricing.selection.tau}; the interval "
            "is the noise's (unconditional coverage), and small groups shown lean high"
        )
    frame = pd.DataFrame(data)
    note = None
    if group_by and ngroups == 0:
        note = empty_release_note(group_by, selection_info)
        if warn_empty:
            warnings.warn(note, EmptyReleaseWarning, stacklevel=_user_stacklevel())
    charged = pricing.charged()
    extra: dict[str, Any] = {"requested": {"epsilon": pricing.epsilon, "delta": pricing.delta}}
    if "rho" in charged:
        extra.update(rho=charged["rho"], approx_delta=charged["approx_delta"])
    extra.update(notes or {})
    info = ReleaseInfo(
        columns=info_cols,
        epsilon=charged["epsilon"],
        delta=charged["delta"],
        mode=pricing.mode,
        alpha=alpha,
        groups_in_data=None,
        groups_released=ngroups,
        selection=selection_info,
        note=note,
        notes=extra,
    )
    return convert(frame, info, output)


def key_column(values: list[Any]) -> Any:
    """A released key column; the NULL key as a real missing value, shown ``<NA>``.

    Without a NULL key: the values as they are. With one: a pandas nullable column (``Int64``,
    ``boolean``, ``Float64``, ``string``) when every other value has that one type, else an
    object column; in both the NULL key is ``pandas.NA`` (a ``None`` would print as the
    word ``None``, like a group named so). Never fails on a value: it runs after the charge.
    """
    import pandas as pd

    if not any(v is None for v in values):
        return values
    present = {type(v) for v in values if v is not None}
    dtype = {
        frozenset({str}): "string",
        frozenset({bool}): "boolean",
        frozenset({int}): "Int64",
        frozenset({float}): "Float64",
    }.get(frozenset(present))
    if dtype is not None:
        try:
            return pd.array(values, dtype=dtype)
        except (TypeError, ValueError, OverflowError):  # an int beyond 64 bits
            pass
    return pd.array([pd.NA if v is None else v for v in values], dtype=object)


class EmptyReleaseWarning(UserWarning):
    """A grouped release returned no group (the budget was spent all the same)."""


def empty_release_note(group_by: Sequence[str], selection: dict[str, Any] | None) -> str:
    """``0 groups released`` and why, for a grouped release without rows. Reads the query's
    public parameters only (the selection rule's threshold), never the data."""
    cols = ", ".join(group_by)
    if selection is None:
        return f"0 groups released (by {cols}): the query's public keys were empty"
    need = selection.get("threshold") or selection.get("tau")
    bar = (
        f" (a group is sure to pass from {math.ceil(need)} people at this epsilon and delta)"
        if need
        else ""
    )
    if selection.get("count"):  # the threshold is on the count's own noisy value
        bar = f" (a group passes when its noisy {selection['count']} is above {selection['tau']})"
    return (
        f"0 groups released (by {cols}): no group had enough people to pass private "
        f"partition selection{bar}. Group by a coarser column (e.g. a month instead of a "
        "date), spend more epsilon, or give public keys"
    )


def _sorted_keys(keys: Any) -> list[tuple[Any, ...]]:
    """The engine's group keys in a fixed order: NULL first, then by value (by type name and
    ``repr`` if the values of a column do not compare), so the released row order never
    depends on the engine's hash-aggregate order (which may differ between runs)."""
    out = list(keys)

    def by_value(k: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((v is not None, v if v is not None else 0) for v in k)

    def by_text(k: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple((v is not None, type(v).__name__, repr(v)) for v in k)

    try:
        return sorted(out, key=by_value)
    except TypeError:
        return sorted(out, key=by_text)


def convert(frame: Any, info: ReleaseInfo, output: str) -> Any:
    """The frame as pandas (info in ``.attrs['dpkit']``), polars or arrow (info in metadata)."""
    frame.attrs["dpkit"] = info.as_dict()
    if output == "pandas":
        return frame
    if output == "arrow":
        import json

        import pyarrow as pa  # type: ignore[import-untyped,unused-ignore]

        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[b"dpkit"] = json.dumps(info.as_dict(), default=str).encode()
        return table.replace_schema_metadata(meta)
    if output == "polars":
        import polars as pl

        return pl.from_pandas(frame)
    raise ValueError(f"unknown output {output!r}")


def _release_stat(
    sp: StatPrice,
    result: EngineResult,
    rows: list[int | None],
    alpha: float,
    source: RandomSource,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    ngroups: int,
    cache: dict[str, list[list[int]]],
) -> None:
    if sp.shared_with is not None and sp.stat.kind == "sum":
        _release_shared_sum(sp, result, rows, alpha, source, data, info_cols, ngroups, cache)
    else:
        # a std sharing a variance's measures reads their cached noisy values: its release is
        # the square root of the variance's (post-processing, charged once)
        _release_values(sp, result, rows, alpha, source, data, info_cols, ngroups, cache)
        if sp.shared_with is not None:
            name = stat_columns(sp)[0]
            info_cols[name]["mechanism"] = (
                f"the noisy count of {sp.shared_with} (post-processing)"
                if sp.stat.kind == "count"
                else f"square root of {sp.shared_with} (post-processing)"
            )
    st = sp.stat
    if isinstance(st.bounds, tuple):
        for name in stat_columns(sp):
            info_cols[name]["bounds"] = list(st.bounds)
            info_cols[name]["bounds_source"] = "private estimate" if st.estimated else "given"


def _release_shared_sum(
    sp: StatPrice,
    result: EngineResult,
    rows: list[int | None],
    alpha: float,
    source: RandomSource,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    ngroups: int,
    cache: dict[str, list[list[int]]],
) -> None:
    """A sum as ``S = T + c N`` from its partner's noisy centred sum ``T`` and count ``N``.

    Exactly ``S = T + c N`` before noise (``T = S - c N`` by definition), so the estimate is
    unbiased like the partner's; interval: the exact law of ``Z_T + c Z_N`` where it can be
    summed, else ``T`` and ``N`` each at ``1 - alpha/2`` (union bound) and ``S`` between the
    extremes of ``T + c N`` over that box. Each group at its own pair (a piloted mean's centre
    ``c`` and noises for that group, :func:`_centred_pair`).
    """
    if sp.complement is not None:
        _release_complement_sum(sp, result, rows, alpha, source, data, info_cols, cache)
        return
    n_noisy, t_noisy, pairs = _centred_pair(sp, result, rows, source, cache)
    pl = sp.pilot
    m_n, m_s = _reference_pair(sp)
    step = m_s.step
    est, lo_l, hi_l = [0.0] * ngroups, [0.0] * ngroups, [0.0] * ngroups
    exact_law = True
    for (p_n, p_s), idx in _by_pair(pairs):
        # each group at its own centre c and noises (the pilot's choice, or the middle)
        assert p_n.noise is not None and p_s.noise is not None
        c = p_s.center
        h_joint = joint_halfwidth(p_s.noise, p_n.noise, float(-c), float(-c), alpha)
        hn, ht = p_n.noise.halfwidth(alpha / 2.0), p_s.noise.halfwidth(alpha / 2.0)
        exact_law = exact_law and h_joint is not None
        for g in idx:
            nn, tt = n_noisy[g], t_noisy[g]
            s_noisy = tt + c * nn
            est[g] = s_noisy * step
            if h_joint is not None:  # the exact law of Z_T + c Z_N
                lo_l[g] = (s_noisy - h_joint) * step
                hi_l[g] = (s_noisy + h_joint) * step
                continue
            a, b = c * (nn - hn), c * (nn + hn)
            lo_l[g] = (tt - ht + min(a, b)) * step
            hi_l[g] = (tt + ht + max(a, b)) * step
    name = stat_columns(sp)[0]
    data[name], data[f"{name}_low"], data[f"{name}_high"] = est, lo_l, hi_l
    info_cols[name] = {
        "mostly_noise": _noise_flags(lo_l, hi_l, None),
        "mechanism": f"post-processing of {sp.shared_with}'s "
        + _noise_desc(m_s)["mechanism"]
        + " centred sum and count",
        "sum": _noise_desc(m_s),
        "count": _noise_desc(m_n),
        "ci": "exact law of the sum of the two noises"
        if exact_law
        else "union bound over the centred sum and count intervals at alpha/2 each",
        **({"centre": _pilot_note(sp, pairs)} if pl is not None else {}),
    }


def _complement_pair(
    sp: StatPrice,
    result: EngineResult,
    rows: Sequence[int | None],
    source: RandomSource,
    cache: dict[str, list[list[int]]],
) -> tuple[Complement, list[int], list[int]]:
    """Per group the noisy ``A' = hi N - S + Z_A`` and ``B' = S - lo N + Z_B`` of a mean's
    complementary pair (:class:`~dpkit.analytics._pricing.Complement`), from the engine's
    exact ``N`` and ``S`` (integers at the sum's fixed point, each row within ``[lo, hi]``);
    drawn once per release and cached, so the sum sharing the pair reads the same values."""
    cp = sp.complement
    assert cp is not None
    m_n, m_s = sp.measures[0], sp.measures[1]
    key_a, key_b = m_s.measure.name + "@below_upper", m_s.measure.name + "@above_lower"
    if key_a not in cache:
        n_exact = _exact_vector(result, m_n.measure.name, rows, 1)
        s_exact = _exact_vector(result, m_s.measure.name, rows, 1)
        z = cp.noise.sample(2 * len(rows), source)
        pairs = list(zip(s_exact, n_exact, strict=True))
        cache[key_a] = [[cp.hi * n[0] - s[0] + z[2 * g]] for g, (s, n) in enumerate(pairs)]
        cache[key_b] = [[s[0] - cp.lo * n[0] + z[2 * g + 1]] for g, (s, n) in enumerate(pairs)]
    return cp, [v[0] for v in cache[key_a]], [v[0] for v in cache[key_b]]


def _complement_desc(cp: Complement, share: str = "the whole share") -> dict[str, Any]:
    """How a complementary pair was noised (the info of its mean's and sum's columns, or a
    variance's with its ``share``)."""
    nz = cp.noise
    return {
        "mechanism": "discrete Laplace on the sum above the lower bound and the room below "
        f"the upper bound (one vector, {share})",
        "noise_scale": nz.scale * cp.step,
        "noise_std": nz.std * cp.step,
        "measure": "sum - lower * count, upper * count - sum",
    }


def _release_complement_sum(
    sp: StatPrice,
    result: EngineResult,
    rows: list[int | None],
    alpha: float,
    source: RandomSource,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    cache: dict[str, list[list[int]]],
) -> None:
    """A sum as ``S = (hi B' + lo A') / (hi - lo)`` from its mean's complementary pair
    (post-processing; exact before noise), with the certified interval of its error ``(hi
    Z_B + lo Z_A) / (hi - lo)`` (:func:`~dpkit.analytics._intervals.complement_sum_halfwidth`).
    """
    cp, a, b = _complement_pair(sp, result, rows, source, cache)
    span = cp.hi - cp.lo
    half = complement_sum_halfwidth(cp.noise, cp.lo, cp.hi, alpha)
    est, lo_l, hi_l = [], [], []
    for x, y in zip(a, b, strict=True):
        s_steps = float(Fraction(cp.hi * y + cp.lo * x, span))
        est.append(s_steps * cp.step)
        lo_l.append((s_steps - half) * cp.step)
        hi_l.append((s_steps + half) * cp.step)
    name = stat_columns(sp)[0]
    data[name], data[f"{name}_low"], data[f"{name}_high"] = est, lo_l, hi_l
    info_cols[name] = {
        "mostly_noise": _noise_flags(lo_l, hi_l, None),
        "mechanism": f"post-processing of {sp.shared_with}'s complementary pair",
        "pair": _complement_desc(cp),
        "ci": "exact law of the two noises combined (continuous Laplace bound, widened by "
        "the lattice)",
    }


def _release_complement_mean(
    sp: StatPrice,
    result: EngineResult,
    rows: list[int | None],
    alpha: float,
    source: RandomSource,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    cache: dict[str, list[list[int]]],
) -> None:
    """A mean ``lo + (hi - lo) B' / (A' + B')`` (steps) from its complementary pair, clamped to
    the bounds, with the Fieller-type interval of the pivot ``(hi - m) B' - (m - lo) A'``
    (:func:`~dpkit.analytics._intervals.complement_mean_intervals`). A noisy count ``(A' + B')
    / (hi - lo)`` below 1 gives no ratio: the middle of the interval, flagged as mostly
    noise. The upper end gains one step: each row's integer is its value rounded down."""
    st = sp.stat
    assert isinstance(st.bounds, tuple)
    lower, upper = st.bounds
    cp, a, b = _complement_pair(sp, result, rows, source, cache)
    span, step = cp.hi - cp.lo, cp.step
    low, high, found = complement_mean_intervals(
        cp.noise,
        np.array(a, dtype=np.float64),
        np.array(b, dtype=np.float64),
        cp.lo,
        cp.hi,
        alpha,
    )

    def inside(v: float) -> float:
        return min(max(v, lower), upper)

    # four steps more on each side: A' and B' beyond 2^53 reach the intervals as floats,
    # rounded by at most 2^-53 of themselves, which moves an end ``lo + (hi - lo) (B' -+ H) /
    # (A' + B')`` by about (hi - lo) 2^-51 <= 2 steps where it is not noise-dominated (the
    # bounds are within 2^52); where it is, A' and B' are within 2^53 and exact. Four
    # steps are 2^-42 noise scales or less.

    est, lo_l, hi_l = [], [], []
    for g, (x, y) in enumerate(zip(a, b, strict=True)):
        total = x + y
        e = (
            inside(float(Fraction(cp.lo) + Fraction(span * y, total)) * step)
            if total >= span
            else (lower + upper) / 2.0
        )
        if bool(found[g]):
            lo_g = inside((float(low[g]) - 4.0) * step)
            hi_g = inside((float(high[g]) + 5.0) * step)  # and the floor's step
        else:  # the set is empty (probability <= alpha): the estimate
            lo_g = hi_g = e
        if total < span:
            e = (lo_g + hi_g) / 2.0
        est.append(min(max(e, lo_g), hi_g))
        lo_l.append(lo_g)
        hi_l.append(hi_g)
    name = stat_columns(sp)[0]
    data[name], data[f"{name}_low"], data[f"{name}_high"] = est, lo_l, hi_l
    info_cols[name] = {
        "mostly_noise": _noise_flags(lo_l, hi_l, upper - lower),
        "mechanism": "ratio of the complementary pair",
        "pair": _complement_desc(cp),
        "ci": "Fieller's pivot (hi - m) B - (m - lo) A under the exact joint noise law",
    }


def _mean_rows(
    m_n: MeasurePrice,
    m_s: MeasurePrice,
    n_noisy: list[int],
    t_noisy: list[int],
    lower: float,
    upper: float,
    alpha: float,
) -> tuple[list[float], list[float], list[float], bool]:
    """Estimates and intervals of the groups whose noisy ``N`` and ``T`` (centred at
    ``m_s.center``) were drawn at the noises of ``m_n`` and ``m_s``; the flag says whether
    Fieller's pivot under the exact law was used (else the union bound)."""
    assert m_n.noise is not None and m_s.noise is not None
    hn = m_n.noise.halfwidth(alpha / 2.0)
    ht = m_s.noise.halfwidth(alpha / 2.0)
    step = m_s.step
    c_real = m_s.center * step
    est: list[float] = []
    lo_l: list[float] = []
    hi_l: list[float] = []
    k_bits = m_s.measure.frac_bits
    r_lo = math.floor(Fraction(lower) * 2**k_bits) - m_s.center
    r_hi = math.floor(Fraction(upper) * 2**k_bits) - m_s.center
    cells = ratio_cells(m_s.noise, m_n.noise, float(r_lo), float(r_hi), alpha)
    if cells is not None:  # Fieller's pivot under the exact noise law
        r_a, r_b, found = ratio_intervals(
            np.array(t_noisy, dtype=np.float64), np.array(n_noisy, dtype=np.float64), cells
        )
    for g, (nn, tt) in enumerate(zip(n_noisy, t_noisy, strict=True)):
        e = c_real + tt * step / nn if nn >= 1 else (lower + upper) / 2.0
        est.append(min(max(e, lower), upper))
        if cells is not None:
            if not found[g]:  # the set is empty (probability <= alpha): the estimate
                lo_l.append(est[-1])
                hi_l.append(est[-1])
                continue
            lo_l.append(min(max(c_real + float(r_a[g]) * step, lower), upper))
            hi_l.append(min(max(c_real + float(r_b[g]) * step + step, lower), upper))
            continue
        n_lo, n_hi = max(nn - hn, 0), max(nn + hn, 0)
        if n_lo < 1:
            lo_l.append(lower)
            hi_l.append(upper)
            continue
        a, b = _ratio_box((tt - ht) * step, (tt + ht) * step, n_lo, n_hi)
        lo_l.append(min(max(c_real + a, lower), upper))
        hi_l.append(min(max(c_real + b + step, lower), upper))
    return est, lo_l, hi_l, cells is not None


def _release_mean(
    sp: StatPrice,
    result: EngineResult,
    rows: list[int | None],
    alpha: float,
    source: RandomSource,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    cache: dict[str, list[list[int]]],
) -> None:
    """A mean ``c + T / N`` per group, at the group's own centre and noises (a pilot's
    choice, or the statistic's one pair), with Fieller's interval at that pair: given the
    pilot's outputs, ``N`` and ``T`` carry fresh noise of known law, so the interval holds at
    its level conditionally on them, hence also overall."""
    if sp.complement is not None:
        _release_complement_mean(sp, result, rows, alpha, source, data, info_cols, cache)
        return
    st = sp.stat
    assert isinstance(st.bounds, tuple)
    lower, upper = st.bounds
    n_noisy, t_noisy, pairs = _centred_pair(sp, result, rows, source, cache)
    ngroups = len(rows)
    est, lo_l, hi_l = [0.0] * ngroups, [0.0] * ngroups, [0.0] * ngroups
    fieller = True
    for (m_n, m_s), idx in _by_pair(pairs):
        e_i, lo_i, hi_i, exact = _mean_rows(
            m_n, m_s, [n_noisy[g] for g in idx], [t_noisy[g] for g in idx], lower, upper, alpha
        )
        fieller = fieller and exact
        for j, g in enumerate(idx):
            est[g], lo_l[g], hi_l[g] = e_i[j], lo_i[j], hi_i[j]
    # post-processing: each estimate inside its own interval (a noisy count below 1 gives
    # no ratio: the middle of the interval, flagged as mostly noise below)
    for g in range(ngroups):
        if n_noisy[g] < 1:
            est[g] = (lo_l[g] + hi_l[g]) / 2.0
        est[g] = min(max(est[g], lo_l[g]), hi_l[g])
    name = stat_columns(sp)[0]
    data[name], data[f"{name}_low"], data[f"{name}_high"] = est, lo_l, hi_l
    m_n, m_s = _reference_pair(sp)
    info_cols[name] = {
        "mostly_noise": _noise_flags(lo_l, hi_l, upper - lower),
        "mechanism": "ratio of " + _noise_desc(m_s)["mechanism"] + " sum and count",
        "sum": _noise_desc(m_s),
        "count": _noise_desc(m_n),
        "ci": "Fieller's pivot T - r N under the exact joint noise law"
        if fieller
        else "union bound over the sum and count intervals at alpha/2 each",
        **({"centre": _pilot_note(sp, pairs)} if sp.pilot is not None else {}),
    }


def _release_piloted_count(
    sp: StatPrice,
    result: EngineResult,
    rows: list[int | None],
    alpha: float,
    source: RandomSource,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    cache: dict[str, list[list[int]]],
) -> None:
    """A ``count(column)`` released as a piloted mean's noisy ``N``: per group the interval of
    the noise that group's count was drawn at (Neyman's construction, as for any count)."""
    n_noisy, _, pairs = _centred_pair(sp, result, rows, source, cache)
    lo_a = np.zeros(len(rows), dtype=np.int64)
    hi_a = np.zeros(len(rows), dtype=np.int64)
    for (p_n, _), idx in _by_pair(pairs):
        assert p_n.noise is not None
        h, h_up = lattice_offsets(p_n.noise, alpha)
        reach = zero_reach(p_n.noise, alpha)
        xs = np.array([n_noisy[g] for g in idx], dtype=np.int64)
        lo_i, hi_i = count_intervals(xs, h, h_up, reach)
        lo_a[idx], hi_a[idx] = lo_i, hi_i
    name = stat_columns(sp)[0]
    lo, hi = lo_a.tolist(), hi_a.tolist()
    data[name] = [max(v, 0) for v in n_noisy]
    data[f"{name}_low"], data[f"{name}_high"] = lo, hi
    assert sp.pilot is not None
    desc = _noise_desc(sp.pilot.ref_n)
    desc["mostly_noise"] = _noise_flags(lo, hi, None)
    desc["centre"] = _pilot_note(sp, pairs)
    info_cols[name] = desc


def _release_values(
    sp: StatPrice,
    result: EngineResult,
    rows: list[int | None],
    alpha: float,
    source: RandomSource,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    ngroups: int,
    cache: dict[str, list[list[int]]],
) -> None:
    st = sp.stat
    names = stat_columns(sp)
    if st.kind == "quantile":
        mp = sp.measures[0]
        sparse = _sparse_groups(result, mp.measure.name, rows, mp.cells)
        if ngroups:
            vals = np.asarray(
                sp.quantile_mechanism.release_sparse(sparse, source=source), dtype=np.float64
            ).reshape(ngroups, len(st.quantiles))
        else:
            vals = np.zeros((0, len(st.quantiles)))
        # Post-processing: values in the order of the levels, each lower quantile clipped to
        # the ones above it (a running minimum from the top level down). Only values that cross
        # move, and only downwards: an upper quantile of a small group is the noisier one
        # (its utility is flat near the top of the bounds), so sorting, which would move it up
        # to the lower value, costs more accuracy than it gains.
        order = np.argsort(np.asarray(st.quantiles), kind="stable")
        vals[:, order] = np.minimum.accumulate(vals[:, order][:, ::-1], axis=1)[:, ::-1]
        ends: list[Any] = []
        qi = sp.quantile_interval
        if qi is not None:  # the interval's own selections (its own share of the budget)
            from dataclasses import replace

            qi = replace(qi, alpha=alpha)  # the query's level; r is public, from alpha
            if ngroups:
                ends = list(qi.release_sparse(sparse, source=source))
            else:
                ends = [np.zeros((0, len(st.quantiles)))] * 2
            # post-processing: each estimate inside its own interval and the levels kept in
            # order. In the order of the levels, L_k = max_{i <= k} low_i and U_k = min_{j >= k}
            # high_j are non-decreasing, as are the estimates (running minimum above), so
            # clip(v_k, L_k, U_k) is non-decreasing too; it lies in [low_k, high_k] whenever
            # some ordered choice does (L_k <= U_k). Clipping into each level's own interval
            # alone could put a lower level above a higher one again.
            lo_o = np.maximum.accumulate(ends[0][:, order], axis=1)
            hi_o = np.minimum.accumulate(ends[1][:, order][:, ::-1], axis=1)[:, ::-1]
            vals[:, order] = np.minimum(np.maximum(vals[:, order], lo_o), hi_o)

        def out(v: Any) -> Any:
            # a date or timestamp column: the date of each value, rounded down (from_number)
            if not st.time_kind:
                return v
            return np.array([from_number(float(x), st.time_kind) for x in v], dtype=object)

        for j, name in enumerate(names):
            data[name] = out(vals[:, j])
            info = {
                "mechanism": "exponential mechanism",
                "epsilon_per_group": sp.quantile_epsilon,
                "candidates": mp.cells,
                "ci": "not given: the exponential mechanism's rank error is not converted "
                "to a value interval (ask with quantile(..., interval_share=...))",
            }
            if qi is not None:
                data[f"{name}_low"] = out(ends[0][:, j])
                data[f"{name}_high"] = out(ends[1][:, j])
                info["ci"] = (
                    "bin edges from two exponential-mechanism selections aimed at the rank "
                    f"q n -+ {qi.rank_radius()[j]:.4g} (exact worst-case tail at alpha/2 each); "
                    "at least the level for every data set"
                )
                info["interval_epsilon_per_group"] = qi.epsilon_each
            info_cols[name] = info
        return

    if st.kind == "count" and sp.pilot is not None:  # a piloted mean's noisy N
        _release_piloted_count(sp, result, rows, alpha, source, data, info_cols, cache)
        return

    if st.kind in ("count", "count_distinct", "sum", "histogram"):
        mp = sp.measures[0]
        assert mp.noise is not None
        exact = _exact_vector(result, mp.measure.name, rows, mp.cells)
        noisy = _noisy(mp, exact, source, cache)  # a shared count: its partner's noisy N
        h, h_up = lattice_offsets(mp.noise, alpha)  # [X - h, X + h_up], at level 1 - alpha
        reach = zero_reach(mp.noise, alpha)  # counts: 0 is in the interval while X <= reach
        for j, name in enumerate(names):
            if st.kind == "sum":
                est_c: list[Any] = [noisy[g][j] * mp.step for g in range(ngroups)]
                lo = [(noisy[g][j] - h) * mp.step for g in range(ngroups)]
                hi = [(noisy[g][j] + h_up) * mp.step for g in range(ngroups)]
            else:  # a count is never negative: estimate clipped at 0 (post-processing), and
                # the interval by Neyman's construction over the counts 0, 1, ...
                est_c = [max(noisy[g][j], 0) for g in range(ngroups)]
                xs = np.array([noisy[g][j] for g in range(ngroups)], dtype=np.int64)
                lo_a, hi_a = count_intervals(xs, h, h_up, reach)
                lo, hi = lo_a.tolist(), hi_a.tolist()
            data[name] = est_c
            data[f"{name}_low"] = lo
            data[f"{name}_high"] = hi
            desc = _noise_desc(mp)
            desc["ci_halfwidth"] = h * mp.step  # the lower side; the upper is ci_above
            desc["ci_above"] = h_up * mp.step
            info_cols[name] = desc
            desc["mostly_noise"] = _noise_flags(lo, hi, None)
        return

    # mean / variance / std
    assert isinstance(st.bounds, tuple)
    if st.kind == "mean":
        _release_mean(sp, result, rows, alpha, source, data, info_cols, cache)
        return
    if sp.complement is not None:
        _release_pair_variance(sp, result, rows, alpha, source, data, info_cols, cache)
        return
    lower, upper = st.bounds
    m_n, m_s = sp.measures[0], sp.measures[1]
    assert m_n.noise is not None and m_s.noise is not None
    n_exact = _exact_vector(result, m_n.measure.name, rows, 1)
    s_exact = _exact_vector(result, m_s.measure.name, rows, 1)
    t_exact = [[s[0] - m_s.center * n[0]] for s, n in zip(s_exact, n_exact, strict=True)]
    n_noisy = [v[0] for v in _noisy(m_n, n_exact, source, cache)]
    t_noisy = [v[0] for v in _noisy(m_s, t_exact, source, cache)]
    split = 3.0
    hn = m_n.noise.halfwidth(alpha / split)
    ht = m_s.noise.halfwidth(alpha / split)
    step = m_s.step
    half = (upper - lower) / 2.0
    m_q = sp.measures[2]
    assert m_q.noise is not None
    q_noisy = _rebuilt_squares(m_q, result, rows, n_exact, n_noisy, source, cache)
    # union bound: Q' within hq and N within hn put Q within hq + kq hn
    hq = m_q.noise.halfwidth(alpha / split) + m_q.center * hn
    shift = m_s.center * step - m_q.measure.center  # T is centred at c, Q at m
    top = half * half
    exact_ci = _variance_pivot(st, m_n, m_s, m_q, n_noisy, t_noisy, q_noisy, alpha)
    est, lo_l, hi_l = _variance_estimates(
        (n_noisy, t_noisy, q_noisy), (step, m_q.step), shift, top, exact_ci
    )
    if exact_ci is None:
        for g in range(ngroups):
            box = variance_box(
                n_noisy[g], t_noisy[g], q_noisy[g], (hn, ht, hq), (step, m_q.step), shift, top
            )
            lo_l[g], hi_l[g] = box
    _variance_columns(
        sp,
        (est, lo_l, hi_l),
        top,
        data,
        info_cols,
        {
            "mechanism": "post-processing of "
            + _noise_desc(m_s)["mechanism"]
            + " count, sum and sum of squares",
            "sum": _noise_desc(m_s),
            "count": _noise_desc(m_n),
            "sum_sq": _noise_desc(m_q),
            "ci": "pivot of the count, sum and sum of squares under their joint noise law"
            if exact_ci is not None
            else "union bound over the three intervals at alpha/3 each",
        },
    )


def _rebuilt_squares(
    m_q: MeasurePrice,
    result: EngineResult,
    rows: Sequence[int | None],
    n_exact: list[list[int]],
    n_noisy: Sequence[float],
    source: RandomSource,
    cache: dict[str, list[list[int]]],
) -> list[float]:
    """The noisy sum of squares ``Q = Q' + kq N`` rebuilt from the noisy centred ``Q' = Q - kq
    N`` (``kq`` the centre of ``m_q``, noised once per release and cached) and a noisy count
    ``N`` (post-processing)."""
    q_exact = _exact_vector(result, m_q.measure.name, rows, 1)
    kq = m_q.center
    qc_exact = [[q[0] - kq * n[0]] for q, n in zip(q_exact, n_exact, strict=True)]
    qc_noisy = [v[0] for v in _noisy(m_q, qc_exact, source, cache)]
    return [qc + kq * nn for qc, nn in zip(qc_noisy, n_noisy, strict=True)]


def _variance_estimates(
    noisy: tuple[Sequence[float], Sequence[float], Sequence[float]],
    steps: tuple[float, float],
    shift: float,
    top: float,
    exact_ci: tuple[Any, Any, Any] | None,
) -> tuple[list[float], list[float], list[float]]:
    """Per group the variance ``s_q Q / N - (s_t T / N + shift)^2`` (0 when ``N < 1``) within
    ``[0, top]`` and the pivot's interval ends (each within ``[0, top]``; the estimate where
    the set is empty, probability at most alpha); without a pivot (``exact_ci`` None) the
    ends are left at 0 for the caller's union bound."""
    s_t, s_q = steps
    est: list[float] = []
    lo_l: list[float] = []
    hi_l: list[float] = []
    for g, (nn, tt, qq) in enumerate(zip(*noisy, strict=True)):
        if nn >= 1:
            md = tt * s_t / nn + shift
            v = qq * s_q / nn - md * md
        else:
            v = 0.0
        est.append(min(max(v, 0.0), top))
        if exact_ci is None:
            lo_l.append(0.0)
            hi_l.append(0.0)
            continue
        v_lo, v_hi, found = exact_ci
        if not found[g]:
            lo_l.append(est[-1])
            hi_l.append(est[-1])
        else:
            lo_l.append(min(max(float(v_lo[g]), 0.0), top))
            hi_l.append(min(max(float(v_hi[g]), 0.0), top))
    return est, lo_l, hi_l


def _variance_columns(
    sp: StatPrice,
    values: tuple[list[float], list[float], list[float]],
    top: float,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    info: dict[str, Any],
) -> None:
    """A variance's (std's: the square roots) estimate and interval columns and its info, each
    estimate moved inside its own interval (post-processing)."""
    est, lo_l, hi_l = values
    est = [min(max(e, a), b) for e, a, b in zip(est, lo_l, hi_l, strict=True)]
    flags = _noise_flags(lo_l, hi_l, top)
    if sp.stat.kind == "std":
        est = [math.sqrt(v) for v in est]
        lo_l = [math.sqrt(v) for v in lo_l]
        hi_l = [math.sqrt(v) for v in hi_l]
    name = stat_columns(sp)[0]
    data[name], data[f"{name}_low"], data[f"{name}_high"] = est, lo_l, hi_l
    info_cols[name] = {**info, "mostly_noise": flags}


def pair_count_and_sum(
    cp: Complement, a: Sequence[int], b: Sequence[int]
) -> tuple[list[float], list[float]]:
    """Per group the count ``N' = (A' + B') / (hi - lo)`` and the sum centred at the middle
    ``c = floor((lo + hi) / 2)`` of the pair's lattice bounds, ``T' = ((hi - c) B' + (lo - c)
    A') / (hi - lo)`` (steps), from the complementary pair's noisy ``A'``, ``B'``: exactly
    ``N`` and ``S - c N`` before noise (``A + B = (hi - lo) N``, ``hi B + lo A = (hi - lo)
    S``), each rounded once to a double."""
    span = cp.hi - cp.lo
    c = (cp.lo + cp.hi) // 2
    n_noisy = [float(Fraction(x + y, span)) for x, y in zip(a, b, strict=True)]
    t_noisy = [
        float(Fraction((cp.hi - c) * y + (cp.lo - c) * x, span)) for x, y in zip(a, b, strict=True)
    ]
    return n_noisy, t_noisy


def _release_pair_variance(
    sp: StatPrice,
    result: EngineResult,
    rows: list[int | None],
    alpha: float,
    source: RandomSource,
    data: dict[str, Any],
    info_cols: dict[str, dict[str, Any]],
    cache: dict[str, list[list[int]]],
) -> None:
    """A variance (std) from the complementary pair and the centred sum of squares
    (:func:`~dpkit.analytics._pricing.variance_pair_dominates`): ``N = (A' + B') / (hi - lo)``,
    the sum centred at the middle ``c`` of the lattice bounds ``T = ((hi - c) B' + (lo - c)
    A') / (hi - lo)`` (both exact before noise) and ``Q = Q' + kq N``; the estimate and the
    pivot's interval are the three measures' (:func:`_variance_estimates`,
    :func:`_variance_pivot` with the pair's laws)."""
    st = sp.stat
    assert isinstance(st.bounds, tuple)
    lower, upper = st.bounds
    cp, a, b = _complement_pair(sp, result, rows, source, cache)
    n_noisy, t_noisy = pair_count_and_sum(cp, a, b)
    c = (cp.lo + cp.hi) // 2
    m_n, m_q = sp.measures[0], sp.measures[2]
    assert m_q.noise is not None
    n_exact = _exact_vector(result, m_n.measure.name, rows, 1)
    q_noisy = _rebuilt_squares(m_q, result, rows, n_exact, n_noisy, source, cache)
    half = (upper - lower) / 2.0
    top = half * half
    shift = c * cp.step - m_q.measure.center
    exact_ci = _variance_pivot(
        st, m_n, sp.measures[1], m_q, n_noisy, t_noisy, q_noisy, alpha, pair=(cp, a, b)
    )
    est, lo_l, hi_l = _variance_estimates(
        (n_noisy, t_noisy, q_noisy), (cp.step, m_q.step), shift, top, exact_ci
    )
    if exact_ci is None:  # pragma: no cover - a discrete Laplace pair is always read
        lo_l, hi_l = [0.0] * len(est), [top] * len(est)
    _variance_columns(
        sp,
        (est, lo_l, hi_l),
        top,
        data,
        info_cols,
        {
            "mechanism": "post-processing of the complementary pair and the discrete Laplace "
            "centred sum of squares",
            "pair": _complement_desc(cp, "its part of the share"),
            "sum_sq": _noise_desc(m_q),
            "ci": "pivot of the pair and the sum of squares under their joint noise law",
        },
    )


def variance_box(
    nn: int,
    tt: int,
    qq: float,
    halfwidths: tuple[int, int, int],
    steps: tuple[float, float],
    shift: float,
    top: float,
) -> tuple[float, float]:
    """The union-bound interval of a variance (kept where the pivot's laws cannot be read):
    ``N``, ``T`` and ``Q`` each within their ``1 - alpha/3`` half-widths ``(h_N, h_T, h_Q)``
    and the extremes of ``Q/N - (T/N + shift)^2`` over that box, within ``[0, top]``."""
    hn, ht, hq = halfwidths
    s_t, s_q = steps
    n_lo, n_hi = max(nn - hn, 0), max(nn + hn, 0)
    if n_lo < 1:
        return 0.0, top
    q_lo, q_hi = max((qq - hq) * s_q, 0.0), max((qq + hq) * s_q, 0.0)
    a, b = _ratio_box(q_lo, q_hi + s_q * n_hi, n_lo, n_hi)
    ma, mb = _ratio_box((tt - ht) * s_t, (tt + ht) * s_t, n_lo, n_hi)
    ma, mb = ma + shift, mb + shift + s_t
    m2_lo = 0.0 if ma <= 0.0 <= mb else min(ma * ma, mb * mb)
    m2_hi = max(ma * ma, mb * mb)
    return min(max(a - m2_hi, 0.0), top), min(max(b - m2_lo, 0.0), top)


def _variance_pivot(
    st: Statistic,
    m_n: MeasurePrice,
    m_s: MeasurePrice,
    m_q: MeasurePrice,
    n_noisy: Sequence[float],
    t_noisy: Sequence[float],
    q_noisy: Sequence[float],
    alpha: float,
    *,
    pair: tuple[Complement, list[int], list[int]] | None = None,
) -> tuple[Any, Any, Any] | None:
    """The variance intervals at level ``1 - alpha`` from the pivot of
    :func:`~dpkit.analytics._intervals.variance_cells`, or ``None`` (the union bound stays).

    The mean ``mu`` is pinned by Fieller's interval at ``alpha / 20``
    (:data:`~dpkit.analytics._intervals.VAR_MEAN_ALPHA`), the variance by the pivot ``R`` at
    the rest: the true pair is outside with probability at most the sum, ``alpha``. ``q_noisy``
    is the rebuilt ``Q = Q' + kq N`` (``kq`` the centre of the measure ``m_q``). Both are
    stated for the lattice values ``mu_int = s_t T / n + shift`` and ``v_int = s_q Q / n -
    mu_int^2`` of the exact integers; the bounded statistic ``v`` differs by at most ``Delta
    = s_q + s_t (2 h + s_t)`` plus ``4 h^2 2^-52`` (each row's floor lowers its value by less
    than a step ``s_t``, its square by less than ``s_q``; the square is a rounded double), so
    the ranges of the cells are widened by ``2 Delta`` and the ends by ``Delta``.

    ``pair``: the complementary pair and its noisy ``(A', B')`` per group, from which
    ``n_noisy`` and ``t_noisy`` (centred at the middle ``c`` of the pair's lattice bounds)
    were rebuilt; the mean is then pinned by the pair's own Fieller-type interval
    (:func:`~dpkit.analytics._intervals.complement_mean_intervals`, widened by four steps on
    each side for the floats, as the mean's release does) and the pivot read with the pair's
    laws (:func:`~dpkit.analytics._intervals.variance_cells` with ``pair``)."""
    from dpkit.analytics._intervals import VAR_MEAN_ALPHA, variance_cells, variance_intervals

    assert isinstance(st.bounds, tuple) and m_q.noise
    lower, upper = st.bounds
    half = (upper - lower) / 2.0
    s_q = m_q.step
    q_center = m_q.center * s_q  # Q = Q' + kq N: the pivot's count noise gains kq s_q Z_N
    a_mean = alpha * VAR_MEAN_ALPHA
    tt = np.array(t_noisy, dtype=np.float64)
    nn = np.array(n_noisy, dtype=np.float64)
    if pair is not None:
        cp, a, b = pair
        s_t, c = cp.step, (cp.lo + cp.hi) // 2
        nt = nn_law = cp.noise
        offsets: tuple[int, int] | None = (cp.lo - c, cp.hi - c)
        low, high, found_m = complement_mean_intervals(
            cp.noise, np.array(a, dtype=np.float64), np.array(b, dtype=np.float64),
            cp.lo, cp.hi, a_mean,
        )  # fmt: skip
        r_a, r_b = low - 4.0 - c, high + 4.0 - c
    else:
        assert m_n.noise and m_s.noise
        s_t, c = m_s.step, m_s.center
        nt, nn_law, offsets = m_s.noise, m_n.noise, None
        k_bits = m_s.measure.frac_bits
        r_lo = math.floor(Fraction(lower) * 2**k_bits) - c
        r_hi = math.floor(Fraction(upper) * 2**k_bits) - c
        mcells = ratio_cells(nt, nn_law, float(r_lo), float(r_hi), a_mean)
        if mcells is None:
            return None
        r_a, r_b, found_m = ratio_intervals(tt, nn, mcells)
    shift = c * s_t - m_q.measure.center
    delta = s_q + s_t * (2.0 * half + s_t) + 4.0 * half * half * 2.0**-52
    vcells = variance_cells(
        nt,
        m_q.noise,
        nn_law,
        s_t,
        s_q,
        half + 2.0 * s_t + abs(shift),
        (-2.0 * delta, half * half + 2.0 * delta),
        shift,
        alpha - a_mean,
        q_center,
        offsets,
    )
    if vcells is None:
        return None
    mu_lo = np.where(found_m, r_a * s_t + shift, np.nan)
    mu_hi = np.where(found_m, r_b * s_t + shift, np.nan)
    qq = np.array(q_noisy, dtype=np.float64)
    lo, hi, found = variance_intervals(tt, qq, nn, mu_lo, mu_hi, vcells, s_t, s_q, shift)
    return lo - delta, hi + delta, found


def _noise_flags(lo: Sequence[float], hi: Sequence[float], span: float | None) -> list[bool]:
    """Per released group whether its value is mostly noise (public rule on the released
    interval, post-processing): with a bounded range of possible values (``span``: a mean's
    bounds, a variance's ``[0, ((U - L) / 2)^2]``), its interval covers more than half of it;
    otherwise (counts, sums, cells) its interval reaches 0 (the value cannot be told from 0)."""
    if span is not None:
        return [bool(b - a > span / 2.0) for a, b in zip(lo, hi, strict=True)]
    return [bool(a <= 0.0 <= b) for a, b in zip(lo, hi, strict=True)]


def _user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning raised in :func:`assemble` at the first
    caller outside the dpkit package (``q.run``, ``session.run``, ``session.sql``: the
    user's line, however many dpkit frames are between)."""
    import os
    import sys

    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    frame = sys._getframe(1)  # assemble's frame: stacklevel 1
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
        package + os.sep
    ):
        frame = frame.f_back  # type: ignore[assignment]
        level += 1
    return level
