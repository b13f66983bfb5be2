"""What a synthetic-data fit charged, said plainly: the charge in the session's accounting
(zero-concentrated DP, rho), the ``(epsilon, delta)`` share it was asked as, and what the
charged rho alone guarantees in ``(epsilon, delta)``.

Why the two epsilons differ. An ``(epsilon, delta)`` share of a zCDP budget is converted to
the largest rho whose guarantee fits inside the share *after* keeping part of its delta for
approximate events and a floating-point slack (:meth:`dpkit.accounting.Budget.zcdp_share`).
Converted back at the whole delta, that rho is therefore a little below the epsilon asked (a
``(1, 1e-6)`` share is ``rho = 0.0229``, which alone is about ``(0.968, 1e-6)``-DP). The
session's spent epsilon is the total rho of all its charges converted at the budget's own
delta, so it is not the sum of the shares either. The charge that counts is rho.

The epsilon shown is rounded up (:func:`dpkit._numeric.zcdp.zcdp_epsilon`), the rho is the
exact charge of the event rounded up to a double.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dpkit._numeric.rounding import up
from dpkit._numeric.zcdp import zcdp_epsilon
from dpkit.accounting.zcdp import zcdp_cost_of
from dpkit.events import DpEvent

__all__ = ["charge_record", "describe_model"]


def charged_rho(event: DpEvent) -> float:
    """The exact zCDP rho of ``event``, rounded up to a double."""
    cost = zcdp_cost_of(event)
    if cost is None:  # every event of a synthesizer's charge has a zCDP cost
        raise TypeError(f"{type(event).__name__} has no zCDP cost")
    rho = cost[0]
    return rho if isinstance(rho, float) else up(rho)


def charge_record(
    event: DpEvent,
    rho_asked: float,
    epsilon: float | None,
    delta: float | None,
    parts: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """The charge of one fit as plain numbers (saved with the model).

    ``parts``: the rho of each step (binning, measurement), if the fit has several."""
    rho = charged_rho(event)
    out: dict[str, Any] = {
        "accounting": "zCDP",
        "rho": rho,
        "rho_asked": rho_asked,
        "share": None if epsilon is None else {"epsilon": epsilon, "delta": delta},
        "parts": dict(parts or {}),
    }
    if delta is not None:
        out["epsilon_of_rho_at_delta"] = zcdp_epsilon(rho, delta)
    return out


def _g(x: float) -> str:
    return f"{x:.4g}"


def describe_model(domains: Mapping[str, Any], info: Mapping[str, Any]) -> str:
    """A few lines: the method, the charge, the columns and the noise."""
    lines = [f"{info.get('method', 'synthetic')} model of {len(domains)} columns"]
    ch = info.get("charge")
    if isinstance(ch, dict):
        lines.append(
            f"Charged once to the session's budget, in {ch['accounting']}: rho = {_g(ch['rho'])}"
            + (
                f" (asked for the share epsilon = {_g(ch['share']['epsilon'])}, delta = "
                f"{_g(ch['share']['delta'])}, converted to rho = {_g(ch['rho_asked'])})"
                if ch.get("share")
                else f" (asked for rho = {_g(ch['rho_asked'])})"
            )
        )
        for name, r in ch.get("parts", {}).items():
            lines.append(f"  of which {name}: rho = {_g(r)}")
        if "epsilon_of_rho_at_delta" in ch and ch.get("share"):
            lines.append(
                f"On its own this rho is ({_g(ch['epsilon_of_rho_at_delta'])}, "
                f"{_g(ch['share']['delta'])})-DP: below the share's epsilon because the share "
                "keeps part of its delta for approximate events and a floating-point slack."
            )
    elif "rho" in info:
        lines.append(f"Charged in zCDP: rho = {_g(info['rho'])}")
    if "max_rows" in info:
        lines.append(f"Each person contributes at most {info['max_rows']} row(s)")
    for c, dom in domains.items():
        lines.append(f"  {c}: {dom.describe() if hasattr(dom, 'describe') else dom}")
    lines.extend(_binning_lines(info.get("binning")))
    if "edges" in info:
        pairs = ", ".join(f"{a}-{b}" for a, b in info["edges"])
        lines.append(f"Selected pairs: {pairs}")
    return "\n".join(lines)


def _binning_lines(b: Any) -> list[str]:
    """What the private binning chose and spent, column by column."""
    if not isinstance(b, dict) or not b.get("columns"):
        return []
    out = [
        f"Binning, before the marginals: rho = {_g(b['rho'])} (binning share {_g(b['share'])} "
        f"of the fit, at most {_g(b['allotted'])})"
    ]
    for c, r in b["columns"].items():
        parts = []
        if r.get("range") is not None:
            lo, hi = r.get("range_shown") or r["range"]
            lo, hi = (_g(lo), _g(hi)) if isinstance(lo, (int, float)) else (lo, hi)
            how = "" if r.get("range_found") else ", no bin reached the threshold: densest bin"
            parts.append(
                f"range [{lo}, {hi}] from a noisy histogram (rho {_g(r['range_rho'])}, "
                f"threshold {r['range_threshold']} rows{how})"
            )
        if r.get("quantiles"):
            parts.append(
                f"{r['quantiles']} private quantiles (rho {_g(r['rho'] - r['range_rho'])}, "
                f"epsilon {_g(r['quantile_epsilon'] / r['quantiles'])} each)"
            )
        if r.get("bins") != r.get("bins_asked"):
            parts.append(f"{r['bins']} bins of the {r['bins_asked']} asked (equal edges merged)")
        out.append(f"  {c}: " + "; ".join(parts))
    return out
