"""``dpkit audit``: output, verdict, exit code and plot."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dpkit.cli import app

runner = CliRunner()


def test_laplace_audit_prints_bound_verdict_confidence(tmp_path: Path) -> None:
    out = tmp_path / "laplace.png"
    res = runner.invoke(app, ["audit", "laplace", "--epsilon", "1", "--samples", "50000",
                              "--seed", "1", "--plot", str(out)])
    assert res.exit_code == 0, res.output
    assert "epsilon lower bound" in res.output
    assert "no violation found" in res.output
    assert "confidence" in res.output and "0.95" in res.output
    assert out.stat().st_size > 1000


def test_known_bad_is_reported_violated_with_exit_code_1() -> None:
    res = runner.invoke(app, ["audit", "known-bad", "textbook-float-laplace", "--samples",
                              "20000", "--seed", "2", "--confidence", "0.999999"])
    assert res.exit_code == 1, res.output
    assert "violated" in res.output
    listed = runner.invoke(app, ["audit", "known-bad", "list"])
    assert listed.exit_code == 0 and "sparse-vector-no-query-noise" in listed.output


def test_other_mechanisms_and_protocols() -> None:
    for args in (["gaussian", "--mu", "1"], ["gaussian", "--epsilon", "1", "--delta", "1e-5"],
                 ["discrete-laplace", "--epsilon", "1"],
                 ["randomized-response", "--epsilon", "1"],
                 ["exponential", "--epsilon", "1", "--candidates", "4"],
                 ["noisy-max", "--epsilon", "1", "--noise", "gumbel"],
                 ["ldp", "oue", "--epsilon", "1", "--domain", "3"],
                 ["ldp", "piecewise", "--epsilon", "1"],
                 ["ldp", "grr", "--epsilon", "1", "--client"],
                 ["discrete-gaussian", "--sigma", "2"]):
        res = runner.invoke(app, ["audit", *args, "--samples", "5000", "--seed", "3"])
        assert res.exit_code == 0, (args, res.output)
        assert "no violation found" in res.output, args


def test_bad_parameters_are_clean_errors() -> None:
    res = runner.invoke(app, ["audit", "laplace", "--epsilon", "nan", "--samples", "100"])
    assert res.exit_code == 2 and "epsilon" in res.output
    res = runner.invoke(app, ["audit", "gaussian", "--samples", "100"])
    assert res.exit_code == 2
    res = runner.invoke(app, ["audit", "laplace", "--epsilon", "1", "--samples", "2"])
    assert res.exit_code == 2 and "samples" in res.output
    res = runner.invoke(app, ["audit", "known-bad", "nope"])
    assert res.exit_code == 2
