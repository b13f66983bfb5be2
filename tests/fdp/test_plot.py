"""Plots: several curves on one figure, PNG and SVG output, matplotlib imported lazily."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

from dpkit.errors import PrivacyParameterError
from dpkit.fdp import approx_dp, gdp, laplace, plot_privacy_profiles, plot_tradeoffs


def test_import_does_not_load_matplotlib() -> None:
    code = ("import dpkit.fdp, dpkit.divergence, dpkit.accounting.gdp, sys, json; "
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True, timeout=120)
    mods = json.loads(out.stdout.strip().splitlines()[-1])
    assert not [m for m in mods if m.split(".")[0] == "matplotlib"]


def test_tradeoff_plot_png_and_svg(tmp_path: pathlib.Path) -> None:
    curves = {"G_1": gdp(1.0), "f_{1,0.01}": approx_dp(epsilon=1.0, delta=0.01),
              "Laplace(1)": laplace(mu=1.0)}
    png = tmp_path / "tradeoffs.png"
    fig = plot_tradeoffs(curves, path=png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(fig.axes[0].lines) == 4  # three curves and the diagonal
    svg = tmp_path / "tradeoffs.svg"
    plot_tradeoffs([gdp(0.5), gdp(2.0)], path=svg, identity=False)
    assert b"<svg" in svg.read_bytes()[:500]


def test_profile_plot(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "profiles.svg"
    fig = plot_privacy_profiles({"G_1": gdp(1.0), "Laplace(1)": laplace(mu=1.0)}, path=out,
                                epsilons=[0.0, 0.5, 1.0, 2.0])
    assert out.exists() and len(fig.axes[0].lines) == 2


def test_plot_validation() -> None:
    with pytest.raises(PrivacyParameterError):
        plot_tradeoffs([])
    with pytest.raises(PrivacyParameterError):
        plot_tradeoffs(["not a curve"])  # type: ignore[list-item]
