"""``dpkit ldp simulate``: runs every protocol, prints estimates against truth, plots."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpkit.cli import _ldp
from dpkit.cli import app as root_app
from dpkit.noise import RandomSource

runner = CliRunner()


def _run(*args: str) -> str:
    res = runner.invoke(root_app, ["ldp", "simulate", *args])
    assert res.exit_code == 0, res.output
    return re.sub(r"\s+", " ", res.output)  # rich wraps long lines


def test_simulate_oue_prints_estimates_mse_and_theory() -> None:
    out = _run(
        "--protocol", "oue", "--epsilon", "1", "--domain", "64", "--users", "30000", "--seed", "1"
    )
    assert "OUE(epsilon=1.0, domain=64)" in out and "true count" in out
    m = re.search(r"MSE per item ([\d,.]+)\s+theoretical variance ([\d,.]+)\s+ratio ([\d.]+)", out)
    assert m is not None
    ratio = float(m.group(3))
    assert 0.6 < ratio < 1.5  # one run over 64 items: a loose sanity band, not a test of fit


@pytest.mark.parametrize(
    "protocol",
    [
        "rr",
        "grr",
        "sue",
        "olh",
        "blh",
        "hr",
        "best",
        "rappor",
        "loloha",
        "cms",
        "hcms",
        "olhsketch",
    ],
)
def test_simulate_every_frequency_protocol(protocol: str) -> None:
    out = _run(
        "--protocol", protocol, "--domain", "16", "--users", "2000", "--seed", "2", "--top", "3"
    )
    assert "theoretical variance" in out and "rejected reports 0" in out


@pytest.mark.parametrize("protocol", ["duchi", "piecewise", "hybrid"])
def test_simulate_mean_protocols(protocol: str) -> None:
    out = _run("--protocol", protocol, "--users", "5000", "--seed", "3")
    assert "true mean" in out and "theoretical variance" in out


def test_plot_is_written(tmp_path: Path) -> None:
    path = tmp_path / "est.png"
    out = _run("--protocol", "grr", "--domain", "8", "--users", "1000", "--plot", str(path))
    assert path.exists() and path.stat().st_size > 1000 and "plot written" in out


def test_bad_arguments_are_refused() -> None:
    for args in (
        ["--protocol", "nope"],
        ["--epsilon", "-1"],
        ["--epsilon", "nan"],
        ["--domain", "1"],
        ["--users", "0"],
    ):
        res = runner.invoke(root_app, ["ldp", "simulate", *args])
        assert res.exit_code != 0


def test_zipf_population_is_decreasing() -> None:
    vals = _ldp.zipf_population(
        RandomSource(seed=4, insecure=True), users=50_000, domain=10, exponent=1.0
    )
    counts = [int((vals == k).sum()) for k in range(10)]
    assert counts[0] > counts[1] > counts[3] > counts[9] > 0
    assert vals.min() >= 0 and vals.max() <= 9


def test_heavy_hitters_finds_the_top_items() -> None:
    res = runner.invoke(
        root_app,
        [
            "ldp",
            "heavy-hitters",
            "--users",
            "100000",
            "--top",
            "3",
            "--epsilon",
            "4",
            "--seed",
            "1",
            "--zipf",
            "1.5",
        ],
    )
    assert res.exit_code == 0, res.output
    out = re.sub(r"\s+", " ", res.output)
    assert "recall of the true top 3: 1.00" in out and "rejected reports 0" in out


def test_heavy_hitters_with_treehist() -> None:
    args = ["ldp", "heavy-hitters", "--users", "200000", "--top", "3", "--epsilon", "4"]
    res = runner.invoke(root_app, [*args, "--seed", "2", "--zipf", "1.5", "--method", "tree"])
    assert res.exit_code == 0, res.output
    out = re.sub(r"\s+", " ", res.output)
    assert "TreeHistogram(" in out and "recall of the true top 3: 1.00" in out
    bad = runner.invoke(root_app, [*args, "--method", "apple"])
    assert bad.exit_code != 0


def test_heavy_hitters_with_sfp() -> None:
    args = ["ldp", "heavy-hitters", "--users", "200000", "--top", "3", "--epsilon", "4"]
    sfp = ["--seed", "2", "--zipf", "1.5", "--method", "sfp", "--bits", "20"]
    res = runner.invoke(root_app, [*args, *sfp])
    assert res.exit_code == 0, res.output
    out = re.sub(r"\s+", " ", res.output)
    assert "SFP(" in out and "recall of the true top 3: 1.00" in out


def test_shuffle_prints_the_central_epsilon() -> None:
    res = runner.invoke(root_app, ["ldp", "shuffle", "--epsilon", "2", "--users", "100000"])
    assert res.exit_code == 0, res.output
    m = re.search(r"central epsilon ([\d.]+)", re.sub(r"\s+", " ", res.output))
    assert m is not None and 0.0 < float(m.group(1)) < 0.2
    bad = runner.invoke(root_app, ["ldp", "shuffle", "--epsilon", "2", "--users", "0"])
    assert bad.exit_code != 0
