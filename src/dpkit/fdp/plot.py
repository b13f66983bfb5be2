"""Plots of trade-off curves and privacy profiles (matplotlib, the optional ``plot`` extra).

matplotlib is imported inside the functions, so importing :mod:`dpkit.fdp` never loads it. The
figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot, no global backend
change) and saved in the format named by the file suffix (``.png``, ``.svg``, ``.pdf``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dpkit.errors import PrivacyParameterError
from dpkit.fdp._tradeoff import TradeOffFunction, check_real_array

__all__ = ["plot_privacy_profiles", "plot_tradeoffs"]

Curves = Mapping[str, TradeOffFunction] | Sequence[TradeOffFunction]


def _labelled(curves: Curves) -> list[tuple[str, TradeOffFunction]]:
    items = list(curves.items()) if isinstance(curves, Mapping) else [
        (repr(c), c) for c in curves]
    if not items:
        raise PrivacyParameterError("nothing to plot: pass at least one trade-off function")
    for label, c in items:
        if not isinstance(c, TradeOffFunction):
            raise PrivacyParameterError(f"{label!r} is not a trade-off function: {c!r}")
    return [(str(label), c) for label, c in items]


def _figure() -> tuple[Any, Any]:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is a test dependency
        raise ImportError("plotting needs matplotlib: pip install 'dpkit[plot]'") from exc
    fig = Figure(figsize=(5.5, 5.0), layout="constrained")
    return fig, fig.add_subplot(1, 1, 1)


def _save(fig: Any, path: str | os.PathLike[str] | None) -> None:
    if path is not None:
        fig.savefig(os.fspath(path), dpi=150)


def plot_tradeoffs(curves: Curves, *, path: str | os.PathLike[str] | None = None,
                   title: str | None = None, grid_size: int = 1001,
                   identity: bool = True) -> Any:
    """Draw several trade-off curves ``beta = f(alpha)`` on one figure; save it if ``path``.

    ``curves`` is a sequence of trade-off functions or a mapping label -> function. The diagonal
    ``1 - alpha`` (perfect privacy) is drawn dashed unless ``identity=False``. Returns the
    matplotlib Figure.
    """
    items = _labelled(curves)
    alpha = np.linspace(0.0, 1.0, int(grid_size))
    fig, ax = _figure()
    if identity:
        ax.plot(alpha, 1.0 - alpha, linestyle="--", color="grey", linewidth=0.8,
                label="perfect privacy")
    for label, f in items:
        ax.plot(alpha, f(alpha), label=label)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_aspect("equal")
    ax.set_xlabel("type I error alpha")
    ax.set_ylabel("type II error beta")
    ax.set_title(title or "trade-off functions")
    ax.legend(loc="upper right", fontsize="small")
    _save(fig, path)
    return fig


def plot_privacy_profiles(curves: Curves, *, path: str | os.PathLike[str] | None = None,
                          epsilons: Sequence[float] | None = None, title: str | None = None,
                          log_delta: bool = True) -> Any:
    """Draw the privacy profiles ``delta_f(eps) = 1 + f*(-e^eps)`` of several trade-off functions
    (each delta rounded up) on one figure, delta on a log scale by default; save if ``path``."""
    items = _labelled(curves)
    eps = (np.linspace(0.0, 8.0, 161) if epsilons is None
           else check_real_array("epsilons", epsilons))
    fig, ax = _figure()
    for label, f in items:
        d = f.privacy_profile(eps)
        if log_delta:
            d = np.where(d > 0, d, np.nan)
        ax.plot(eps, d, label=label)
    if log_delta:
        ax.set_yscale("log")
    ax.set_xlabel("epsilon")
    ax.set_ylabel("delta(epsilon)")
    ax.set_title(title or "privacy profiles")
    ax.legend(loc="upper right", fontsize="small")
    _save(fig, path)
    return fig
