"""What a query tells its reader: the refusal of an unaffordable query, what a release
protects, and the long form of results (one row per histogram bin or quantile level).

Everything here is post-processing of public parameters or of released values.
"""

from __future__ import annotations

import math
from typing import Any

from dpkit.analytics._pricing import Pricing
from dpkit.analytics._table import protects
from dpkit.errors import BudgetExceededError

__all__ = ["layout", "long_form", "query_refusal", "summary_frame", "unit_notes"]


def unit_notes(privacy_unit: str | None) -> dict[str, Any]:
    """The ``attrs["dpkit"]`` entries saying what releases protect."""
    return {"privacy_unit": privacy_unit, "protects": protects(privacy_unit)}


def query_refusal(pricing: Pricing, budget: Any, exc: BudgetExceededError) -> BudgetExceededError:
    """The refusal of a query ``budget`` (the one charged) cannot afford.

    First sentence: what the query needs (what it would charge: :meth:`Pricing.charged`, in
    the budget's unit), what is left and the budget, rounded (:mod:`dpkit._numeric.display`),
    then the fix. The exact figures are attributes: those of the budget's own refusal
    (``exc``: ``event``, ``remaining``, ``spent``, ``budget``, ``details``), with
    ``requested`` the query's charge (a dict) and ``allowed`` its ``(epsilon, delta)``.
    """
    from dpkit.accounting.budget import refusal_message
    from dpkit.errors import BudgetUnavailableError

    if isinstance(exc, BudgetUnavailableError):
        # not a lack of budget: the ledger cannot be charged (full disk, lost connection)
        return type(exc)(f"query refused, nothing spent: {exc}")
    charged = pricing.charged()
    remaining = exc.remaining if exc.remaining is not None else getattr(budget, "remaining", None)
    total = exc.budget if exc.budget is not None else getattr(budget, "budget", None)
    analyst = getattr(budget, "analyst", None)
    need: list[tuple[str, float]]
    left_now: list[tuple[str, float]]
    tot: list[tuple[str, float]]
    parts = getattr(exc, "sentence_parts", None)
    note = ""
    if parts is not None:
        # the budget's own reading (its unit, and which of its limits the query would pass)
        need, left_now, tot, analyst, note = parts
    elif pricing.mode == "zcdp" and getattr(budget, "native_budget", None) is not None:
        rem_native = getattr(budget, "remaining_native", None)
        need = [("rho", charged["rho"])]
        left_now = [("rho", rem_native if rem_native is not None else 0.0)]
        tot = [("rho", budget.native_budget)]
    else:
        need = [("epsilon", charged["epsilon"])]
        rem = remaining if isinstance(remaining, tuple) else (math.nan, math.nan)
        left_now = [("epsilon", rem[0])]
        tot_pair = total if isinstance(total, tuple) else (math.nan, math.nan)
        tot = [("epsilon", tot_pair[0] if tot_pair[0] is not None else math.inf)]
        if charged["delta"] > 0.0 or (tot_pair[1] or 0.0) > 0.0:
            need.append(("delta", charged["delta"]))
            left_now.append(("delta", rem[1]))
            tot.append(("delta", tot_pair[1]))
    if exc.details is None and exc.remaining is None:
        # not the budget's own sentence (a budget of another kind): keep its message as detail
        details: str | None = str(exc)
    else:
        details = exc.details
    first = refusal_message(
        "query",
        need,
        left_now,
        tot,
        "ask for less or use a larger budget",
        analyst if isinstance(analyst, str) else None,
        note,
    )
    out = BudgetExceededError(
        f"{first} Nothing was spent.",
        event=pricing.event,
        count=1,
        requested=charged,
        remaining=remaining if remaining is not None else None,
        spent=exc.spent if exc.spent is not None else getattr(budget, "spent", None),
        budget=total,
        details=details,
        allowed=(pricing.epsilon, pricing.delta),
    )
    return out


def _mechanism_name(mp: Any) -> str:
    return "discrete Laplace" if mp.noise.kind == "discrete_laplace" else "discrete Gaussian"


def summary_frame(pricing: Pricing, query: Any) -> Any:
    """The frame of :meth:`Query.summarize`: one row per noisy measure, one per bounds
    estimate, one for partition selection.

    ``share`` is the fraction of the query's budget a row gets, as the pricing splits it: a
    statistic takes ``w / W`` (its weight over the total weight, selection included; a sum
    released from a mean's measures adds its weight to the mean's and shows share 0), split over
    its noisy measures as the pricing splits it (a mean's by
    :func:`~dpkit.analytics._pricing.pool_split`); a ``bounds="auto"`` statistic gives
    ``auto_share`` of its part to the estimate and the rest to the release at the estimated
    bounds; partition selection takes ``w_sel / W``, or, when it thresholds a count's own noise
    (:func:`~dpkit.analytics._pricing._threshold_count`), gives ``w_sel`` to that count and
    shows share 0. A pure mean with fixed bounds shows its main pair at the middle of its bounds
    and, as two more rows, its pilot (:class:`~dpkit.analytics._pricing.Pilot`: a hundredth of
    its part, not released). The shares add up to 1. The selection row
    shows its mechanism, its noise (Gaussian thresholding: sigma) and the count of distinct
    units from which a group is always released (``threshold``).
    """
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    from dpkit.analytics._release import stat_columns

    alpha = query.session.alpha
    weights: dict[str, float] = {}
    for sp in pricing.stats:
        weights[sp.name] = 0.0 if sp.shared_with is not None else float(sp.stat.weight)
    for sp in pricing.stats:
        if sp.shared_with is not None:
            weights[sp.shared_with] = weights.get(sp.shared_with, 0.0) + float(sp.stat.weight)
    for ab in pricing.auto:  # with the weight of a std released from it, if any
        weights[ab.name] = weights.get(ab.name, 0.0) + float(ab.stat.weight)
    w_sel = float(query.selection_weight) if pricing.selection is not None else 0.0
    if pricing.selection_count is not None:
        # selection thresholds this count's own noise: the count takes the selection's weight
        weights[pricing.selection_count] += w_sel
        w_sel_row = 0.0
    else:
        w_sel_row = w_sel
    total = sum(weights.values()) + w_sel_row
    top = pricing.top_k
    # a top-k query: the ranking takes its share of epsilon, the values the rest
    top_share = min(1.0, top.epsilon / pricing.epsilon) if top is not None else 0.0
    nan = math.nan
    rows: list[dict[str, Any]] = []
    outputs: dict[str, list[str]] = {}

    def row(
        aggregate: str,
        measure: str,
        mechanism: str,
        scale: float,
        std: float,
        half: float,
        share: float,
    ) -> None:
        rows.append(
            {
                "aggregate": aggregate,
                "measure": measure,
                "mechanism": mechanism,
                "noise_scale": scale,
                "noise_std": std,
                "ci_halfwidth": half,
                "share": share,
            }
        )

    if top is not None:
        # Gumbel noise of scale k D / epsilon_sel per score (in the aggregate's units)
        beta = top.k * top.sensitivity * top.step / top.epsilon
        row(
            top.name,
            f"top-{top.k} ranking",
            "NoisyTopK (Gumbel)" + ("" if top.known else " and a stop threshold"),
            beta,
            beta * math.pi / math.sqrt(6.0),
            nan,
            top_share,
        )
        outputs.setdefault(top.name, [])
    for sp in pricing.stats:
        outputs[sp.name] = stat_columns(sp)
        part = (weights[sp.name] / total if total else 0.0) * (1.0 - top_share)
        noisy = [mp for mp in sp.measures if mp.noise is not None]
        if sp.shared_with is not None:
            if not sp.measures:  # a std of an auto variance: priced after the estimate
                row(
                    sp.name,
                    f"values (from {sp.shared_with})",
                    "square root of the variance",
                    nan,
                    nan,
                    nan,
                    0.0,
                )
            if sp.complement is not None:
                what = "sum" if sp.stat.kind == "sum" else "values"
                row(
                    sp.name,
                    f"{what} (from {sp.shared_with}'s complementary pair)",
                    "discrete Laplace",
                    nan,
                    nan,
                    nan,
                    0.0,
                )
            for mp in noisy:
                row(
                    sp.name,
                    f"{mp.measure.kind} (from {sp.shared_with})",
                    _mechanism_name(mp),
                    nan,
                    nan,
                    nan,
                    0.0,
                )
            continue
        cp = sp.complement
        first = 0  # the index in sp.split of the first noisy measure
        if cp is not None:  # one vector mechanism on both sums, at the whole part (a
            # variance's: its split's first part, its squares the rest)
            row(
                sp.name,
                "sum - lower * count and upper * count - sum",
                "discrete Laplace",
                cp.noise.scale * cp.step,
                cp.noise.std * cp.step,
                cp.noise.halfwidth(alpha) * cp.step,
                part * (sp.split[0] if noisy else 1.0),
            )
            if not noisy:
                continue
            first = 1
        if not noisy:  # quantiles: exponential mechanisms, no additive noise
            row(sp.name, "quantiles", "exponential mechanism", nan, nan, nan, part)
            continue
        pl = sp.pilot
        # a piloted mean: its main pair (shown at the middle) gets main / share of its part,
        # the pilot (count and sum at the middle, not released) the rest
        main = pl.main / sp.epsilon if pl is not None and sp.epsilon > 0.0 else 1.0
        for i, mp in enumerate(noisy):
            assert mp.noise is not None
            each = sp.split[first + i] if sp.split else 1.0 / len(noisy)
            row(
                sp.name,
                mp.measure.kind,
                _mechanism_name(mp),
                mp.noise.scale * mp.step,
                mp.noise.std * mp.step,
                mp.noise.halfwidth(alpha) * mp.step,
                part * each * main,
            )
        if pl is not None:
            for i, mp in enumerate((pl.count, pl.total)):
                assert mp.noise is not None
                row(
                    sp.name,
                    f"pilot {mp.measure.kind} (not released)",
                    _mechanism_name(mp),
                    mp.noise.scale * mp.step,
                    mp.noise.std * mp.step,
                    nan,
                    part * sp.split[i] * (1.0 - main),
                )
    for ab in pricing.auto:
        part = weights[ab.name] / total if total else 0.0
        est = part * float(ab.stat.auto_share) if ab.reads is None else 0.0
        outputs[ab.name] = [ab.name]
        hist = ab.mechanism
        how = "noisy histogram" if ab.reads is None else f"the noisy histogram of {ab.reads}"
        if ab.reads is None and ab.stat.kind == "quantile":
            # a planned release may halve it for the release, from its noisy people count
            how += " (at most this share)"
        row(ab.name, "bounds estimate", how, hist.scale, hist.std, nan, est)
        row(
            ab.name,
            "values at the estimated bounds",
            "priced after the estimate",
            nan,
            nan,
            nan,
            part - est,
        )
    if pricing.selection is not None:
        sel = pricing.selection
        sigma = getattr(sel, "sigma", None)
        threshold = getattr(sel, "tau", None)
        if threshold is None:
            threshold = getattr(sel, "threshold", None)
        measure = (
            "distinct units"
            if threshold is None
            else f"distinct units (kept from {int(threshold)})"
        )
        if pricing.selection_count is not None:
            measure = f"noisy {pricing.selection_count} (kept above {int(sel.tau)})"
        row(
            "(partition selection)",
            measure,
            type(sel).__name__,
            nan if sigma is None else float(sigma),
            nan if sigma is None else float(sigma),
            nan,
            w_sel_row / total if total else 0.0,
        )
    out = pd.DataFrame(rows)
    out.attrs["dpkit"] = {
        "epsilon": pricing.epsilon,
        "delta": pricing.delta,
        "accounting": pricing.mode,
        "rho": pricing.rho if pricing.mode == "zcdp" else None,
        "alpha": alpha,
        "share": "fraction of the query's budget",
        "charged": pricing.charged(),
        "output_columns": outputs,
        **unit_notes(query.session.table.privacy_unit),
    }
    return out


def layout(pricing: Pricing) -> dict[str, dict[str, Any]]:
    """Per statistic its kind and output columns, each with what it stands for: a histogram
    bin's ``[lower, upper)`` edges (the last bin closed) or category, a quantile's level.
    Stored in ``attrs["dpkit"]["statistics"]`` for :func:`long_form`."""
    from dpkit.analytics._release import stat_columns

    out: dict[str, dict[str, Any]] = {}
    for sp in pricing.stats:
        st = sp.stat
        cols = stat_columns(sp)
        parts: list[dict[str, Any]] = []
        for i, c in enumerate(cols):
            part: dict[str, Any] = {"column": c}
            if st.kind == "histogram" and st.edges:
                part.update(
                    lower=st.edges[i],
                    upper=st.edges[i + 1],
                    closed="both" if i == len(cols) - 1 else "left",
                )
            elif st.kind == "histogram":
                part["category"] = st.categories[i]
            elif st.kind == "quantile":
                part["level"] = st.quantiles[i]
            parts.append(part)
        out[sp.name] = {"kind": st.kind, "outputs": parts}
    return out


def _bin_label(part: dict[str, Any]) -> str:
    from dpkit._numeric.display import fmt

    if "lower" in part:
        close = "]" if part.get("closed") == "both" else ")"
        return f"[{fmt(part['lower'])}, {fmt(part['upper'])}{close}"
    if "category" in part:
        return str(part["category"])
    if "level" in part:
        return f"q={fmt(part['level'])}"
    return ""


def long_form(frame: Any) -> Any:
    """A released pandas frame in long form: one row per group and output value.

    Columns: the group columns, ``statistic`` (the aggregate's name), ``bin`` (a histogram
    bin as ``[lower, upper)``, the last one closed, a category, a quantile level as
    ``q=0.5``, or empty for a single value), ``estimate``, ``low`` and ``high`` (the
    confidence interval; missing for quantiles, which have none). A histogram of 12 bins is
    12 rows instead of 36 columns; the exact bin edges and levels stay in
    ``attrs["dpkit"]["statistics"]``. Post-processing only: nothing is charged.
    """
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    from dpkit.errors import PrivacyParameterError

    info = getattr(frame, "attrs", {}).get("dpkit", {})
    stats = info.get("statistics")
    if not isinstance(stats, dict):
        raise PrivacyParameterError(
            "long_form needs a pandas frame returned by Query.run (its attrs['dpkit'] "
            "describe the statistics)"
        )
    used = {
        c
        for st in stats.values()
        for p in st["outputs"]
        for c in (p["column"], p["column"] + "_low", p["column"] + "_high")
    }
    groups = [c for c in frame.columns if c not in used]
    rows: list[dict[str, Any]] = []
    for i in range(len(frame)):
        key = {g: frame[g].iloc[i] for g in groups}
        for name, st in stats.items():
            for part in st["outputs"]:
                c = part["column"]
                if c not in frame:  # renamed or dropped (a SQL alias, a selection of columns)
                    continue
                rows.append(
                    {
                        **key,
                        "statistic": name,
                        "bin": _bin_label(part),
                        "estimate": frame[c].iloc[i],
                        "low": frame[c + "_low"].iloc[i] if c + "_low" in frame else None,
                        "high": (frame[c + "_high"].iloc[i] if c + "_high" in frame else None),
                    }
                )
    out = pd.DataFrame(rows, columns=[*groups, "statistic", "bin", "estimate", "low", "high"])
    out.attrs["dpkit"] = info
    return out
