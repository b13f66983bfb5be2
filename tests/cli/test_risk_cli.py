"""Tests of ``dpkit risk`` and ``dpkit report`` (typer CliRunner)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy.stats import norm
from typer.testing import CliRunner

from dpkit.accounting import Budget
from dpkit.cli import app
from dpkit.events import GaussianEvent, LaplaceEvent, event_to_json

runner = CliRunner()


def test_risk_of_gaussian_dp_prints_the_curve_rates() -> None:
    res = runner.invoke(app, ["risk", "--mu", "1"])
    assert res.exit_code == 0, res.output
    assert "at false-positive rate 1e-03: 1.9%" in res.output
    assert "Membership:" in res.output and "Reconstruction:" in res.output


def test_risk_json_and_group() -> None:
    res = runner.invoke(app, ["risk", "--mu", "1", "--group", "2", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["group_size"] == 2
    assert data["max_tpr_at_fpr"]["0.001"] == pytest.approx(norm.cdf(norm.ppf(1e-3) + 2), rel=1e-9)


def test_risk_of_an_event_file_and_a_budget_file(tmp_path: Path) -> None:
    ev = tmp_path / "event.json"
    ev.write_text(event_to_json(LaplaceEvent(noise_multiplier=1.0)))
    res = runner.invoke(app, ["risk", "--event", str(ev), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["max_tpr_at_fpr"]["0.001"] == pytest.approx(
        2.718281828e-3, rel=1e-8
    )
    b = Budget(epsilon=1.0)
    b.charge(epsilon=0.25)
    bf = tmp_path / "budget.json"
    bf.write_text(b.to_json())
    res = runner.invoke(app, ["risk", "--budget", str(bf), "--prior", "0.1"])
    assert res.exit_code == 0, res.output
    assert "epsilon = 0.25" in res.output


@pytest.mark.parametrize(
    "args",
    [[], ["--mu", "1", "--epsilon", "1"], ["--mu", "nan"], ["--epsilon", "1", "--delta", "2"]],
)
def test_risk_refuses_bad_guarantees_cleanly(args: list[str]) -> None:
    res = runner.invoke(app, ["risk", *args])
    assert res.exit_code == 2
    assert "Traceback" not in res.output


def test_report_writes_a_page_and_its_twin(tmp_path: Path) -> None:
    b = Budget(epsilon=2.0, delta=1e-6)
    b.charge(GaussianEvent(noise_multiplier=4.0))
    src = tmp_path / "budget.json"
    src.write_text(b.to_json())
    out = tmp_path / "report.md"
    res = runner.invoke(app, ["report", str(src), "-o", str(out), "--privacy-unit", "pid"])
    assert res.exit_code == 0, res.output
    assert out.read_text().startswith("# Privacy report")
    data = json.loads(out.with_suffix(".json").read_text())
    assert any("'pid'" in a for a in data["assumptions"])
    assert len(data["ledger"]) == 1


def test_report_reads_a_durable_ledger(tmp_path: Path) -> None:
    from dpkit.ledger import open_ledger

    url = f"sqlite:///{tmp_path / 'ledger.db'}"
    b = Budget(epsilon=1.0, ledger=open_ledger(url), name="census")
    b.charge(LaplaceEvent(noise_multiplier=4.0), metadata={"query": "counts by area"})
    out = tmp_path / "report.json"
    res = runner.invoke(app, ["report", url, "--name", "census", "-o", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert [r["query"] for r in data["ledger"]] == ["counts by area"]
