"""Plots of trade-off curves and privacy profiles (matplotlib, the optional ``plot`` extra).

matplotlib is imported inside the functions, so importing :mod:`dpkit.fdp` never loads it. The
figures are built with :class:`matplotlib.figure.Figure` directly (no pyplot, no global backend
change) and saved in the format named by the file suffix (``.png``, ``.svg``, ``.pdf``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpkit._numeric.validation import check_probability, check_real_array
from dpkit.errors import PrivacyParameterError
from dpkit.fdp._tradeoff import TradeOffFunction

__all__ = ["plot_privacy_profiles", "plot_tradeoffs"]

Curves = Mapping[str, TradeOffFunction] | Sequence[TradeOffFunction]


def _labelled(curves: Curves) -> list[tuple[str, TradeOffFunction]]:
    items = list(curves.items()) if isinstance(curves, Mapping) else [(repr(c), c) for c in curves]
    if not items:
        raise PrivacyParameterError("nothing to plot: pass at least one trade-off function")
    for label, c in items:
        if not isinstance(c, TradeOffFunction):
            raise PrivacyParameterError(f"{label!r} is not a trade-off function: {c!r}")
    return [(str(label), c) for label, c in items]


def _figure(width: float = 5.5) -> tuple[Any, Any]:
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:  # pragma: no cover - matplotlib is a test dependency
        raise ImportError("plotting needs matplotlib: pip install 'dpkit[plot]'") from exc
    fig = Figure(figsize=(width, 5.0), layout="constrained")
    return fig, fig.add_subplot(1, 1, 1)


def _save(fig: Any, path: str | os.PathLike[str] | None) -> None:
    if path is not None:
        fig.savefig(os.fspath(path), dpi=150)


def plot_tradeoffs(
    curves: Curves,
    *,
    path: str | os.PathLike[str] | None = None,
    title: str | None = None,
    grid_size: int = 1001,
    identity: bool = True,
) -> Any:
    """Draw several trade-off curves ``beta = f(alpha)`` on one figure; save it if ``path``.

    ``curves`` is a sequence of trade-off functions or a mapping label -> function. The diagonal
    ``1 - alpha`` (perfect privacy) is drawn dashed unless ``identity=False``. Returns the
    matplotlib Figure.
    """
    items = _labelled(curves)
    alpha = np.linspace(0.0, 1.0, int(grid_size))
    fig, ax = _figure()
    if identity:
        ax.plot(
            alpha, 1.0 - alpha, linestyle="--", color="grey", linewidth=0.8, label="perfect privacy"
        )
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


def _default_epsilons(
    items: list[tuple[str, TradeOffFunction]], floor: float
) -> npt.NDArray[np.float64]:
    """0 to a little beyond the largest epsilon at which some profile falls to ``floor``."""
    reach = [f.epsilon(floor) for _, f in items]
    finite = [e for e in reach if math.isfinite(e) and e > 0.0]
    top = min(1.05 * max(finite), _MAX_DEFAULT_EPSILON) if finite else _MAX_DEFAULT_EPSILON
    return np.linspace(0.0, top, 201)


_MAX_DEFAULT_EPSILON = 50.0


def plot_privacy_profiles(
    curves: Curves,
    *,
    path: str | os.PathLike[str] | None = None,
    epsilons: Sequence[float] | None = None,
    title: str | None = None,
    log_delta: bool = True,
    delta_floor: float = 1e-12,
) -> Any:
    """Draw the privacy profiles ``delta_f(eps) = 1 + f*(-e^eps)`` of several trade-off functions
    (each delta rounded up) on one figure, delta on a log scale by default; save if ``path``.

    The delta axis runs from ``delta_floor`` (default 1e-12, far below any delta used in
    practice) to 1: a curve that falls below it leaves the plot through the bottom edge instead
    of stretching the axis to 1e-50. Without ``epsilons`` the epsilon axis runs from 0 to just
    past the largest epsilon at which a profile reaches ``delta_floor`` (at most 50). The legend
    sits outside the axes, to the right, so it never covers a curve.
    """
    items = _labelled(curves)
    floor = check_probability(delta_floor, name="delta_floor", open_low=True, open_high=True)
    eps = (
        _default_epsilons(items, floor)
        if epsilons is None
        else check_real_array(epsilons, "epsilons")
    )
    fig, ax = _figure(width=7.5)
    for label, f in items:
        d = f.privacy_profile(eps)
        if log_delta:
            # off the axis rather than absent: delta = 0 is drawn leaving through the bottom
            d = np.maximum(d, floor * 1e-3)
        ax.plot(eps, d, label=label)
    if log_delta:
        ax.set_yscale("log")
        ax.set_ylim(floor, 1.0)
    else:
        ax.set_ylim(0.0, 1.0)
    if eps.size and float(eps.max()) > float(eps.min()):
        ax.set_xlim(float(eps.min()), float(eps.max()))
    ax.set_xlabel("epsilon")
    ax.set_ylabel("delta(epsilon)")
    ax.set_title(title or "privacy profiles")
    fig.legend(loc="outside right upper", fontsize="small")
    _save(fig, path)
    return fig
