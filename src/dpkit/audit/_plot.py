"""Plot an audit: empirical trade-off points and their bounds against the claimed curve.

matplotlib is imported inside :func:`plot_result` only (importing dpkit never imports it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from dpkit.audit._audit import AuditResult

__all__ = ["plot_result"]


def plot_result(result: AuditResult, *, path: Any = None, ax: Any = None) -> Any:
    """Draw the audit on ``ax`` (a new figure when None); save to ``path`` when given.

    * grey diagonal: ``beta = 1 - alpha`` (a test no better than guessing);
    * solid line: the claimed trade-off function f, if any;
    * dots: empirical ``(alpha, beta)`` of the chosen family of tests on the evaluation half;
    * crosses: their upper corners ``(alpha_u, beta_u)``, simultaneous at the audit's
      confidence; a cross below the claimed line refutes the claim;
    * red star: the upper corner of the selected test (the one the verdict is based on).
    """
    if path is not None and ax is None:
        import matplotlib

        matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=(5.5, 5.0))
    else:
        fig = ax.figure
    grid = np.linspace(0.0, 1.0, 501)
    ax.plot(grid, 1.0 - grid, color="0.75", lw=1, label="random guess")
    if result.claim is not None:
        ax.plot(
            grid, result.claim.beta(grid), color="C0", lw=2, label=f"claimed: {result.claim.label}"
        )
    pts = result.curve
    if pts:
        ax.scatter(
            [p.alpha for p in pts],
            [p.beta for p in pts],
            s=8,
            color="C1",
            label="empirical (alpha, beta)",
        )
        ax.scatter(
            [p.alpha_upper for p in pts],
            [p.beta_upper for p in pts],
            s=14,
            marker="x",
            color="C2",
            lw=0.8,
            label=f"upper bounds ({result.confidence:g}, simultaneous)",
        )
    ax.scatter(
        [result.point.alpha_upper],
        [result.point.beta_upper],
        s=120,
        marker="*",
        color="C3",
        zorder=5,
        label="selected test (upper bounds)",
    )
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_xlabel("type I error alpha")
    ax.set_ylabel("type II error beta")
    ax.set_title(
        f"audit: epsilon >= {result.epsilon_lower_bound:.3f} "
        f"(delta = {result.delta:g}), {result.verdict}"
    )
    ax.set_aspect("equal")
    ax.legend(loc="upper right", fontsize=7)
    if path is not None:
        fig.savefig(path, dpi=120, bbox_inches="tight")
    return fig
