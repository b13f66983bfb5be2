"""Top-k groups: the ``k`` groups with the largest count (or bounded sum), without a key list.

A function of public parameters (:func:`price_top_k`) and of the engine's exact per-group
integers (:func:`release_top_k`); the builder records the request (:class:`TopK`), the session
charges :attr:`Pricing.event` before the release, as for every query.

Scores. After contribution bounding a privacy unit touches at most ``P = max_partitions``
groups and at most ``R = max_rows_per_partition`` rows in each. The score of a group is its
row count (per-row contribution 1) or its sum of ``floor(clamp(x, L, U) 2^f)`` with ``0 <= L``
(per-row contribution in ``[0, floor(U 2^f)]``). Adding a unit therefore raises at most ``P``
scores, each by at most ``D = R`` (counts) or ``D = R floor(U 2^f)`` (sums), and lowers none:
the scores are monotone with per-group sensitivity ``D``. ``P`` enters only the ``delta`` below
(the exponential mechanism's sensitivity is per candidate, not a sum over groups).

Public keys (known domain). Every key is a candidate (absent keys score 0). The release is
:class:`~dpkit.mechanisms.NoisyTopK` (Gumbel, one pass, monotone) at ``epsilon_sel``: the law of
``k`` peeled exponential mechanisms at ``epsilon_sel / k`` each (Durfee and Rogers 2019,
Lemma 4.2), pure ``epsilon_sel``-DP, charged with the mechanism's own event.

Unknown domain (no public keys). The candidates are the ``kbar`` groups of the data with the
largest scores (``candidates``; default: every group present), ties broken by a fixed order of
the keys, plus a stop symbol ``_|_`` scored ``h_(kbar+1) + tau``, where ``h_(kbar+1)`` is the
``(kbar+1)``-th largest score (0 if there are fewer groups). One Gumbel pass over these ranks
them; the release is the ranked groups before ``_|_``, at most ``k`` (the limited-domain
mechanism of Durfee and Rogers 2019, Section 5). The proof, for a unit added to ``D`` to give
``D'`` (candidate sets ``C``, ``C'``):

1. ``|C' \\ C| <= m = min(P, kbar)``: a key whose score did not change cannot enter the top
   ``kbar`` (the set of keys that beat it only grows), and at most ``P`` scores change;
   ``|C \\ C'| <= |C' \\ C|`` since ``|C| <= |C'|``.
2. Let ``A(x)`` be the same pass over the fixed candidate set ``W = C u C'`` (scores of ``x``,
   0 for absent keys) and ``_|_``. Between ``D`` and ``D'`` every score of ``W`` and the stop
   score (an order statistic) rise by at most ``D``: ``A`` is ``epsilon_sel``-DP (NoisyTopK,
   monotone; the output is a post-processing of its ranking).
3. With the same Gumbel noise ``G`` of scale ``beta`` per candidate, the release on ``D`` and
   ``A(D)`` differ only if a key ``g`` of ``C' \\ C`` beats ``_|_``; its score is at most
   ``h_(kbar+1)``, so this needs ``G_g - G_bot > tau``, a logistic tail of probability at most
   ``e^(-tau / beta)``. Likewise for ``D'`` and ``C \\ C'``. So each release is within total
   variation ``delta_0 = m e^(-tau / beta)`` of ``A``, and the release is
   ``(epsilon_sel, (1 + e^epsilon_sel) delta_0)``-DP.

``tau = beta (ln((1 + e^epsilon_sel) m / delta_sel) + k SLACK + 2^-20)`` rounded up to an
integer number of steps, with ``beta`` an upper bound of the Gumbel scale NoisyTopK uses
(``k D / (epsilon_sel (1 - 2^-39) - 2 k SLACK)``, its calibrated gain rounded the safe way);
``k SLACK`` covers the mechanism's floating-point deviation from the exact law
(:mod:`dpkit.mechanisms.selection`). It is charged as ``ApproxDpEvent(epsilon_sel,
delta_sel)``: a pure budget cannot hold it (refused before any charge).

Values. With ``values=True`` the selected groups' scores are released as a query with the
selected keys as its public keys (discrete Laplace or Gaussian, intervals as for any
aggregate) at the rest of the budget. A unit touches at most ``min(P, k)`` released groups, so
the values are priced with ``max_partitions = min(P, k)`` (sequential composition after the
selection: the noise is calibrated for any fixed set of selected keys).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from dpkit._numeric.rounding import down
from dpkit._numeric.validation import check_delta, check_epsilon, check_integer
from dpkit.analytics._aggregates import Statistic
from dpkit.analytics._plan import EngineResult, Measure
from dpkit.analytics._pricing import Mode, Pricing, ZcdpShare, price
from dpkit.analytics._release import EmptyReleaseWarning, assemble, normalize_key
from dpkit.errors import PrivacyParameterError
from dpkit.events import ApproxDpEvent, DpEvent
from dpkit.mechanisms import NoisyTopK
from dpkit.mechanisms.selection import SELECTION_SLACK
from dpkit.noise import RandomSource

__all__ = ["MAX_K", "SCORE_MEASURE", "TopK", "TopKPrice", "price_top_k", "release_top_k"]

#: The engine measure holding each group's score.
SCORE_MEASURE = "__top_k_score"
#: The largest k a top-k selection takes.
MAX_K = 1 << 20
_TARGET_BITS = 40
_MAX_ROW_BITS = 61


@dataclass(frozen=True)
class TopK:
    """What the builder records for ``.top_k(k)`` (validated there)."""

    k: int
    candidates: int | None = None
    values: bool = True
    selection_share: float = 0.5


@dataclass(frozen=True)
class TopKPrice:
    """The selection of a top-k query: the score measure, its sensitivity (integer steps), the
    mechanism, the stop score's gap ``tau`` (unknown domain) and what it costs."""

    k: int
    candidates: int | None
    name: str
    score: Measure
    sensitivity: int
    step: float
    mechanism: NoisyTopK
    epsilon: float
    delta: float
    gap: int
    known: bool
    event: DpEvent


def check_top_k(spec: TopK) -> TopK:
    """Validate the builder's arguments (raise before anything is priced)."""
    k = check_integer(spec.k, name="k", minimum=1, maximum=MAX_K)
    cand = spec.candidates
    if cand is not None:
        cand = check_integer(cand, name="candidates", minimum=1, maximum=1 << 24)
        if cand < k:
            raise PrivacyParameterError(f"candidates must be at least k = {k}, got {cand}")
    if not isinstance(spec.values, bool):
        raise PrivacyParameterError(f"values must be True or False, got {spec.values!r}")
    share = spec.selection_share
    if (
        isinstance(share, bool)
        or not isinstance(share, (int, float))
        or not 0.0 < float(share) < 1.0
    ):
        raise PrivacyParameterError(
            f"selection_share must lie strictly between 0 and 1, got {share!r}"
        )
    return TopK(k=k, candidates=cand, values=spec.values, selection_share=float(share))


def check_score(name: str, stat: Statistic) -> None:
    """A top-k score is a count or a sum with public bounds ``0 <= lower < upper``."""
    if stat.kind == "count":
        return
    if stat.kind == "sum" and isinstance(stat.bounds, tuple):
        lo, hi = stat.bounds
        if lo >= 0 and hi > 0:
            return
        raise PrivacyParameterError(
            f"{name}: top_k ranks sums of non-negative values: give bounds with 0 <= lower "
            f"(got {stat.bounds!r}); with negative values a group's sum can fall when a person "
            "is added, which the selection's proof excludes"
        )
    raise PrivacyParameterError(
        f"{name}: top_k ranks groups by count() or sum(column, bounds=(lower, upper)) with public "
        f"bounds, got {stat.kind}" + (" with bounds='auto'" if stat.bounds == "auto" else "")
    )


def _score_measure(stat: Statistic, epsilon: float, k: int, r: int) -> tuple[Measure, int, float]:
    """The score's engine measure, its per-group sensitivity in integer steps, the step."""
    if stat.kind == "count":
        return Measure(name=SCORE_MEASURE, kind="rows"), r, 1.0
    assert isinstance(stat.bounds, tuple) and stat.column is not None
    lo, hi = float(stat.bounds[0]), float(stat.bounds[1])
    beta = k * r * hi / epsilon  # the Gumbel scale in the column's units
    top = _MAX_ROW_BITS - max(math.ceil(math.log2(hi)), 0)
    want = _TARGET_BITS - math.floor(math.log2(beta)) if beta > 0 else top
    f = max(0, min(want, top, 1000))
    upper_int = math.floor(Fraction(hi) * 2**f)
    if upper_int < 1:
        raise PrivacyParameterError("the sum's upper bound is too small to rank groups by")
    m = Measure(name=SCORE_MEASURE, kind="sum", column=stat.column, lower=lo, upper=hi, frac_bits=f)
    return m, r * upper_int, 2.0**-f


def _gap(mech_eps: float, k: int, sens: int, m: int, delta: float) -> int:
    """``tau`` in integer steps (module docstring), rounded up."""
    eps = Fraction(mech_eps)
    denom = eps * (1 - Fraction(1, 2**39)) - 2 * k * Fraction(SELECTION_SLACK)
    if denom <= 0:
        raise PrivacyParameterError("epsilon is too small for this k")
    beta = Fraction(k * sens) / denom
    # ln((1 + e^eps) m / delta) = eps + log1p(e^-eps) + ln m - ln delta, each rounded up
    log_term = (
        float(mech_eps) + math.log1p(math.exp(-float(mech_eps))) + math.log(m) - math.log(delta)
    )
    log_up = Fraction(log_term) * (1 + Fraction(1, 2**40)) + Fraction(1, 2**20)
    log_up += k * Fraction(SELECTION_SLACK)
    return math.ceil(beta * log_up)


def price_top_k(
    name: str,
    stat: Statistic,
    spec: TopK,
    *,
    mode: Mode,
    epsilon: Any,
    delta: Any,
    max_partitions: int,
    max_rows_per_partition: int,
    known: bool,
    zcdp_share: ZcdpShare | None = None,
) -> Pricing:
    """Split ``(epsilon, delta)`` between the selection and the values and price both (public
    parameters only; see the module docstring). The pricing's event is everything charged."""
    eps = check_epsilon(epsilon)
    dl = check_delta(delta)
    check_score(name, stat)
    p, r, k = max_partitions, max_rows_per_partition, spec.k
    if mode == "pure" and dl != 0.0:
        raise PrivacyParameterError(
            f"this session's budget is pure (delta = 0); a query cannot spend delta={delta!r}"
        )
    if not known and not dl > 0.0:
        raise PrivacyParameterError(
            "top_k without public keys needs delta > 0 (a group may exist in one table and not "
            "in its neighbour): give public keys to group_by(..., keys=...) or use a budget "
            "with delta"
        )
    if mode != "pure" and not dl > 0.0:
        raise PrivacyParameterError(
            "this session adds Gaussian noise (its budget has delta > 0): give the query a "
            "delta > 0"
        )
    sel_eps = down(Fraction(eps) * Fraction(spec.selection_share)) if spec.values else eps
    val_eps = down(Fraction(eps) - Fraction(sel_eps))
    val_needs_delta = spec.values and mode != "pure"
    sel_delta = 0.0 if known else (down(Fraction(dl) / 2) if val_needs_delta else dl)
    val_delta = down(Fraction(dl) - Fraction(sel_delta)) if val_needs_delta else 0.0
    if not sel_eps > 0.0 or (not known and not sel_delta > 0.0):
        raise PrivacyParameterError("the query's budget is too small for the selection")
    score, sens, step = _score_measure(stat, sel_eps, k, r)
    mech = NoisyTopK(epsilon=sel_eps, sensitivity=sens, k=k, method="gumbel", monotonic=True)
    if known:
        gap = 0
        sel_event: DpEvent = mech.event
    else:
        m = p if spec.candidates is None else min(p, spec.candidates)
        gap = _gap(sel_eps, k, sens, m, sel_delta)
        sel_event = ApproxDpEvent(epsilon=sel_eps, delta=sel_delta)
    top = TopKPrice(
        k=k,
        candidates=spec.candidates,
        name=name,
        score=score,
        sensitivity=sens,
        step=step,
        mechanism=mech,
        epsilon=sel_eps,
        delta=sel_delta,
        gap=gap,
        known=known,
        event=sel_event,
    )
    if spec.values:
        values = price(
            {name: stat},
            mode=mode,
            epsilon=val_eps,
            delta=val_delta,
            max_partitions=min(p, k),
            max_rows_per_partition=r,
            select_partitions=False,
            zcdp_share=zcdp_share,
        )
        return replace(
            values,
            epsilon=eps,
            delta=dl,
            max_partitions=p,
            events=(sel_event, *values.events),
            top_k=top,
        )
    return Pricing(
        mode=mode,
        epsilon=eps,
        delta=dl,
        max_partitions=p,
        max_rows_per_partition=r,
        stats=(),
        events=(sel_event,),
        order=(name,),
        top_k=top,
    )


def _order_key(entry: tuple[int, tuple[Any, ...]]) -> tuple[int, tuple[tuple[str, str], ...]]:
    """Largest score first, ties by a fixed order of the keys (a function of the key only)."""
    score, key = entry
    return -score, tuple((type(v).__name__, repr(v)) for v in key)


def select(
    top: TopKPrice,
    result: EngineResult,
    public_keys: list[tuple[Any, ...]] | None,
    source: RandomSource,
) -> list[tuple[Any, ...]]:
    """The selected keys, best first (at most ``k``; fewer when the stop symbol wins)."""
    col = result.values.get(SCORE_MEASURE, ())
    scores: dict[tuple[Any, ...], int] = {}
    for i, key in enumerate(result.keys):
        value: Any = col[i]
        scores[tuple(normalize_key(v) for v in key)] = int(value)
    if public_keys is not None:
        cands = [tuple(normalize_key(v) for v in k) for k in public_keys]
        picks = top.mechanism.release([scores.get(c, 0) for c in cands], source=source)
        return [cands[i] for i in picks]
    ranked = sorted(((s, k) for k, s in scores.items()), key=_order_key)
    kbar = len(ranked) if top.candidates is None else min(top.candidates, len(ranked))
    nxt = ranked[kbar][0] if len(ranked) > kbar else 0
    cands = [k for _, k in ranked[:kbar]]
    picks = top.mechanism.release([s for s, _ in ranked[:kbar]] + [nxt + top.gap], source=source)
    out = []
    for i in picks:
        if i == kbar:  # the stop symbol: nothing after it is released
            break
        out.append(cands[i])
    return out


def release_top_k(
    pricing: Pricing,
    result: EngineResult,
    *,
    group_by: tuple[str, ...],
    public_keys: list[tuple[Any, ...]] | None,
    alpha: float,
    source: RandomSource,
    output: str,
    warn_empty: bool,
    notes: dict[str, Any] | None,
) -> Any:
    """The selected groups in rank order, with their noisy values and intervals when the query
    releases them (no charge here: the caller charged :attr:`Pricing.event`)."""
    top = pricing.top_k
    assert isinstance(top, TopKPrice)
    chosen = select(top, result, public_keys, source)
    info: dict[str, Any] = {
        "k": top.k,
        "returned": len(chosen),
        "mechanism": "NoisyTopK(gumbel)" + ("" if top.known else " with a stop threshold"),
        "epsilon": top.epsilon,
        "delta": top.delta,
        "candidates": "public keys"
        if top.known
        else ("every group" if top.candidates is None else top.candidates),
    }
    if not top.known:
        info["threshold_gap"] = float(top.gap * top.step)
    if warn_empty and not chosen:
        warnings.warn(
            f"0 groups released (by {', '.join(group_by)}): no group was clearly above the "
            "stop threshold at this budget (more epsilon, or larger groups, bring some back)",
            EmptyReleaseWarning,
            stacklevel=3,
        )
    return assemble(
        pricing,
        result,
        group_by=group_by,
        public_keys=chosen,
        alpha=alpha,
        source=source,
        output=output,
        warn_empty=False,
        notes={**(notes or {}), "top_k": info},
    )
