"""Tests of ``dpkit account`` (typer CliRunner)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpkit.accounting import dpsgd_rows, laplace_rows
from dpkit.accounting.dpsgd import dpsgd_epsilon
from dpkit.cli import app
from dpkit.cli._account import steps_from_epochs

runner = CliRunner()


def test_steps_from_epochs_rounds_up() -> None:
    assert steps_from_epochs(60, 256 / 60000) == 14063  # 14062.5 rounded up
    assert steps_from_epochs(2, 0.5) == 4
    assert steps_from_epochs(1, 0.3) == 4


def test_dpsgd_command(tmp_path: Path) -> None:
    out = tmp_path / "profiles.png"
    res = runner.invoke(
        app,
        [
            "account",
            "dpsgd",
            "--sampling-rate",
            "0.01",
            "--noise-multiplier",
            "1.0",
            "--steps",
            "100",
            "--delta",
            "1e-5",
            "--plot",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    for word in ("PLD", "RDP", "GDP", "upper bound", "estimate"):
        assert word in res.output
    assert out.exists() and out.stat().st_size > 0
    pld = dpsgd_epsilon(sampling_rate=0.01, noise_multiplier=1.0, steps=100, delta=1e-5)
    assert f"{pld:.5f}" in res.output


def test_dpsgd_command_epochs() -> None:
    res = runner.invoke(
        app,
        [
            "account",
            "dpsgd",
            "--sampling-rate",
            "0.05",
            "--noise-multiplier",
            "1.0",
            "--epochs",
            "2",
            "--delta",
            "1e-5",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "steps=40" in res.output


@pytest.mark.parametrize(
    "args",
    [
        ["--steps", "10", "--epochs", "1"],
        [],
        ["--steps", "10", "--noise-multiplier", "-1"],
    ],
)
def test_dpsgd_command_refuses(args: list[str]) -> None:
    base = ["account", "dpsgd", "--sampling-rate", "0.01", "--delta", "1e-5"]
    if "--noise-multiplier" not in args:
        base += ["--noise-multiplier", "1.0"]
    res = runner.invoke(app, base + args)
    assert res.exit_code != 0


def test_laplace_command(tmp_path: Path) -> None:
    out = tmp_path / "lap.svg"
    res = runner.invoke(
        app,
        [
            "account",
            "laplace",
            "--epsilon",
            "0.1",
            "--count",
            "50",
            "--delta",
            "1e-6",
            "--plot",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    for word in ("PLD", "RDP", "GDP", "basic", "advanced", "optimal"):
        assert word in res.output
    assert out.exists()


def test_laplace_rows_consistent() -> None:
    rows = {(r.name, r.kind): r.epsilon for r in laplace_rows(epsilon=0.1, count=50, delta=1e-6)}
    pld = rows[("PLD (dpkit)", "upper bound")]
    assert rows[("PLD (dpkit)", "lower bound")] <= pld
    assert pld <= rows[("optimal composition (KOV)", "upper bound")] + 1e-9
    assert (
        rows[("optimal composition (KOV)", "upper bound")]
        <= rows[("advanced composition", "upper bound")]
    )
    assert rows[("basic composition", "upper bound")] == pytest.approx(5.0)


def test_laplace_command_refuses_bad_epsilon() -> None:
    res = runner.invoke(
        app, ["account", "laplace", "--epsilon", "nan", "--count", "5", "--delta", "1e-6"]
    )
    assert res.exit_code != 0


def test_dpsgd_rows_kinds() -> None:
    rows = dpsgd_rows(sampling_rate=0.01, noise_multiplier=1.0, steps=50, delta=1e-5)
    kinds = {r.kind for r in rows}
    assert {"upper bound", "estimate", "lower bound"} <= kinds
    assert all(math.isfinite(r.epsilon) for r in rows)


def test_dpsgd_target_epsilon_with_sizes_and_epochs() -> None:
    # Regression: there was no way to ask for the noise multiplier from the command line.
    from dpkit.accounting.dpsgd import dpsgd_noise_multiplier

    res = runner.invoke(
        app,
        [
            "account",
            "dpsgd",
            "--batch-size",
            "600",
            "--dataset-size",
            "60000",
            "--epochs",
            "3",
            "--target-epsilon",
            "2",
            "--delta",
            "1e-5",
        ],
    )
    assert res.exit_code == 0, res.output
    expected = dpsgd_noise_multiplier(
        batch_size=600, dataset_size=60000, epochs=3, epsilon=2.0, delta=1e-5
    )
    assert f"noise multiplier: {expected:.6g}" in res.output
    assert "steps=300" in res.output


@pytest.mark.parametrize(
    "args",
    [
        ["--steps", "10", "--sampling-rate", "0.01"],  # neither sigma nor target
        [
            "--steps",
            "10",
            "--sampling-rate",
            "0.01",
            "--noise-multiplier",
            "1",
            "--target-epsilon",
            "1",
        ],  # both
        ["--epochs", "1", "--batch-size", "10", "--noise-multiplier", "1"],  # no dataset size
        ["--epochs", "1", "--batch-size", "20", "--dataset-size", "10", "--noise-multiplier", "1"],
        ["--steps", "10", "--sampling-rate", "0.01", "--target-epsilon", "nan"],
    ],
)
def test_dpsgd_schedule_options_refused(args: list[str]) -> None:
    res = runner.invoke(app, ["account", "dpsgd", "--delta", "1e-5", *args])
    assert res.exit_code != 0
