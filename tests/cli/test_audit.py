"""``dpkit audit``: output, verdict, exit code and plot."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dpkit.cli import app

runner = CliRunner()


def test_laplace_audit_prints_bound_verdict_confidence(tmp_path: Path) -> None:
    out = tmp_path / "laplace.png"
    res = runner.invoke(
        app,
        [
            "audit",
            "laplace",
            "--epsilon",
            "1",
            "--samples",
            "50000",
            "--seed",
            "1",
            "--plot",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    assert "epsilon lower bound" in res.output
    assert "no violation found" in res.output
    assert "confidence" in res.output and "0.95" in res.output
    assert out.stat().st_size > 1000


def test_known_bad_is_reported_violated_with_exit_code_1() -> None:
    res = runner.invoke(
        app,
        [
            "audit",
            "known-bad",
            "textbook-float-laplace",
            "--samples",
            "20000",
            "--seed",
            "2",
            "--confidence",
            "0.999999",
        ],
    )
    assert res.exit_code == 1, res.output
    assert "violated" in res.output
    listed = runner.invoke(app, ["audit", "known-bad", "list"])
    assert listed.exit_code == 0 and "sparse-vector-no-query-noise" in listed.output


def test_other_mechanisms_and_protocols() -> None:
    for args in (
        ["gaussian", "--mu", "1"],
        ["gaussian", "--epsilon", "1", "--delta", "1e-5"],
        ["discrete-laplace", "--epsilon", "1"],
        ["randomized-response", "--epsilon", "1"],
        ["exponential", "--epsilon", "1", "--candidates", "4"],
        ["noisy-max", "--epsilon", "1", "--noise", "gumbel"],
        ["ldp", "oue", "--epsilon", "1", "--domain", "3"],
        ["ldp", "piecewise", "--epsilon", "1"],
        ["ldp", "grr", "--epsilon", "1", "--client"],
        ["discrete-gaussian", "--sigma", "2"],
    ):
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


# -- dpkit audit code: the user's own module --------------------------------------------------

USER_MODULE = '''
import numpy as np
from dpkit import Laplace

MECHANISM = Laplace.from_epsilon(epsilon=1.0, sensitivity=1.0)


def noisy_sum(values):
    """A correct 1-DP sum of values in [0, 1] (one person changes one value by at most 1)."""
    return float(MECHANISM.release(float(sum(values))))


def noisy_sum_batch(values, size):
    return MECHANISM.release(np.full(size, float(sum(values))))


def exact_sum(values):
    """No noise at all: any claim is violated."""
    return float(sum(values))


def too_little_noise(values, size):
    """Claims 1-DP but calibrates to epsilon 4."""
    return Laplace.from_epsilon(epsilon=4.0, sensitivity=1.0).release(
        np.full(size, float(sum(values))))


NOT_A_FUNCTION = 3
'''


def _flat(output: str) -> str:
    """The output without the error panel's borders and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", output).split())


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A module written to tmp_path, importable by a name unique to the test."""
    name = f"user_mech_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(USER_MODULE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))  # load_target may prepend the cwd
    yield name
    sys.modules.pop(name, None)


def test_code_audit_of_a_correct_function(user_module: str) -> None:
    res = runner.invoke(
        app,
        [
            "audit",
            "code",
            f"{user_module}:noisy_sum",
            "--pair",
            "[0, 1]",
            "[0, 0]",
            "--epsilon",
            "1",
            "--samples",
            "4000",
            "--seed",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "no violation found" in res.output and "1-DP" in res.output
    assert "[0, 1] vs [0, 0]" in res.output


def test_code_audit_vectorized_file_path_and_python_literals(
    user_module: str, tmp_path: Path
) -> None:
    path = tmp_path / f"{user_module}.py"
    res = runner.invoke(
        app,
        [
            "audit",
            "code",
            f"{path}:noisy_sum_batch",
            "--vectorized",
            "--pair",
            "(0, 1)",
            "[0, 0]",
            "--epsilon",
            "1",
            "--delta",
            "1e-6",
            "--samples",
            "50000",
            "--seed",
            "2",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "(1, 1e-06)-DP" in res.output and "no violation found" in res.output


def test_code_audit_catches_a_broken_function(user_module: str) -> None:
    # exact_sum is deterministic: its two output sets are disjoint, so every confidence proves
    # a violation; too_little_noise is 4-DP claimed as 1-DP: with 50k samples its certified
    # lower bound at confidence 1 - 1e-6 was 3.61 to 3.73 in four trial runs, far above 1.
    res = runner.invoke(
        app,
        [
            "audit",
            "code",
            f"{user_module}:exact_sum",
            "--pair",
            "[0, 1]",
            "[0, 0]",
            "--epsilon",
            "1",
            "--samples",
            "2000",
            "--seed",
            "3",
        ],
    )
    assert res.exit_code == 1, res.output
    assert "violated" in res.output
    res = runner.invoke(
        app,
        [
            "audit",
            "code",
            f"{user_module}:too_little_noise",
            "--vectorized",
            "--pair",
            "[1]",
            "[0]",
            "--epsilon",
            "1",
            "--samples",
            "50000",
            "--seed",
            "4",
            "--confidence",
            "0.999999",
        ],
    )
    assert res.exit_code == 1, res.output
    assert "violated" in res.output


def test_code_audit_with_a_mu_claim_and_a_mechanism_object(user_module: str) -> None:
    res = runner.invoke(
        app,
        [
            "audit",
            "code",
            f"{user_module}:MECHANISM",
            "--pair",
            "0.0",
            "1.0",
            "--mu",
            "3",
            "--samples",
            "20000",
            "--seed",
            "5",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "3-GDP" in res.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{m}"], "module:function"),
        (["{m}:missing"], "no attribute 'missing'"),
        (["{m}:NOT_A_FUNCTION"], "not a function"),
        (["no_such_module_xyz:f"], "no module named 'no_such_module_xyz'"),
        (["./no/such/file.py:f"], "no such file"),
        (["{m}:noisy_sum", "--pair", "[0, 1]", "abc", "--epsilon", "1"], "JSON"),
        (["{m}:noisy_sum", "--pair", "[0, 1]", "[0, 0]"], "--epsilon"),
        (
            ["{m}:noisy_sum", "--pair", "[0, 1]", "[0, 0]", "--epsilon", "1", "--mu", "1"],
            "--epsilon",
        ),
        (
            ["{m}:noisy_sum", "--pair", "[0, 1]", "[0, 0]", "--epsilon", "1", "--delta", "2"],
            "delta",
        ),
    ],
)
def test_code_audit_usage_errors_are_clean(user_module: str, args: list[str], message: str) -> None:
    argv = [a.format(m=user_module) for a in args]
    if "--pair" not in argv:
        argv += ["--pair", "1", "2", "--epsilon", "1"]
    res = runner.invoke(app, ["audit", "code", *argv, "--samples", "100"])
    assert res.exit_code == 2, res.output
    assert isinstance(res.exception, SystemExit)
    assert message in _flat(res.output), res.output


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("[1, 2.5]", [1, 2.5]),
        ('{"a": 1}', {"a": 1}),
        ('"abc"', "abc"),
        ("(1, 2)", (1, 2)),
        ("None", None),
        ("'x'", "x"),
        ("true", True),
        ("-0.0", -0.0),
    ],
)
def test_parse_input(text: str, value: object) -> None:
    from dpkit.cli._audit import parse_input

    got = parse_input(text)
    assert got == value and type(got) is type(value)
