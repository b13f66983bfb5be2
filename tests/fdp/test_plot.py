"""Plots: several curves on one figure, PNG and SVG output, matplotlib imported lazily."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.fdp import approx_dp, gdp, laplace, plot_privacy_profiles, plot_tradeoffs


def test_import_does_not_load_matplotlib() -> None:
    code = (
        "import dpkit.fdp, dpkit.divergence, dpkit.accounting.gdp, sys, json; "
        "print(json.dumps(sorted(sys.modules)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    mods = json.loads(out.stdout.strip().splitlines()[-1])
    assert not [m for m in mods if m.split(".")[0] == "matplotlib"]


def test_tradeoff_plot_png_and_svg(tmp_path: pathlib.Path) -> None:
    curves = {
        "G_1": gdp(1.0),
        "f_{1,0.01}": approx_dp(epsilon=1.0, delta=0.01),
        "Laplace(1)": laplace(mu=1.0),
    }
    png = tmp_path / "tradeoffs.png"
    fig = plot_tradeoffs(curves, path=png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(fig.axes[0].lines) == 4  # three curves and the diagonal
    svg = tmp_path / "tradeoffs.svg"
    plot_tradeoffs([gdp(0.5), gdp(2.0)], path=svg, identity=False)
    assert b"<svg" in svg.read_bytes()[:500]


def test_profile_plot(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "profiles.svg"
    fig = plot_privacy_profiles(
        {"G_1": gdp(1.0), "Laplace(1)": laplace(mu=1.0)}, path=out, epsilons=[0.0, 0.5, 1.0, 2.0]
    )
    assert out.exists() and len(fig.axes[0].lines) == 2


def test_plot_validation() -> None:
    with pytest.raises(PrivacyParameterError):
        plot_tradeoffs([])
    with pytest.raises(PrivacyParameterError):
        plot_tradeoffs(["not a curve"])  # type: ignore[list-item]


def test_profile_plot_axis_limits_stop_at_the_delta_floor() -> None:
    # Before: the axis followed the smallest delta drawn (1e-56 for G_0.5 at eps 8).
    curves = {"G_1": gdp(1.0), "G_0.5": gdp(0.5), "Laplace(1)": laplace(mu=1.0)}
    ax = plot_privacy_profiles(curves).axes[0]
    assert ax.get_yscale() == "log"
    assert ax.get_ylim() == pytest.approx((1e-12, 1.0))
    # the default epsilon range ends just past where the slowest profile (G_1) reaches 1e-12
    reach = gdp(1.0).epsilon(1e-12)
    assert reach < ax.get_xlim()[1] <= 1.06 * reach and ax.get_xlim()[0] == 0.0
    ax = plot_privacy_profiles(curves, delta_floor=1e-6).axes[0]
    assert ax.get_ylim() == pytest.approx((1e-6, 1.0))
    assert ax.get_xlim()[1] == pytest.approx(1.05 * gdp(1.0).epsilon(1e-6))
    ax = plot_privacy_profiles(curves, epsilons=[0.0, 0.5, 2.0]).axes[0]
    assert ax.get_xlim() == (0.0, 2.0) and ax.get_ylim() == pytest.approx((1e-12, 1.0))
    assert plot_privacy_profiles(curves, log_delta=False).axes[0].get_ylim() == (0.0, 1.0)


def test_profile_plot_draws_zero_delta_off_the_axis() -> None:
    # Laplace(1) has delta(eps) = 0 for eps >= 1: the curve must leave through the bottom edge
    # (a value below the floor), not stop in mid-air (a NaN).
    ax = plot_privacy_profiles({"Laplace(1)": laplace(mu=1.0)}, epsilons=[0.0, 0.5, 1.5]).axes[0]
    y = ax.lines[0].get_ydata()
    assert not np.isnan(y).any()
    assert y[-1] < ax.get_ylim()[0] < y[1]


@pytest.mark.parametrize("n_curves", [1, 3, 8])
def test_profile_plot_legend_covers_no_data(n_curves: int) -> None:
    curves = {f"G_{m:g}": gdp(m) for m in np.linspace(0.25, 2.0, n_curves)}
    fig = plot_privacy_profiles(curves)
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)  # lay the figure out as savefig does
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    legends = fig.legends + ([ax.get_legend()] if ax.get_legend() is not None else [])
    assert len(legends) == 1
    legend_box = legends[0].get_window_extent(renderer)
    assert not legend_box.overlaps(ax.get_window_extent(renderer))
    assert [t.get_text() for t in legends[0].get_texts()] == list(curves)


@pytest.mark.parametrize("floor", [0.0, 1.0, -1e-3, float("nan"), "1e-6"])
def test_profile_plot_refuses_a_bad_delta_floor(floor: object) -> None:
    with pytest.raises(PrivacyParameterError):
        plot_privacy_profiles([gdp(1.0)], delta_floor=floor)  # type: ignore[arg-type]
