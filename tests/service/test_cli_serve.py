"""``dpkit serve`` from the command line: tokens, then the real service in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from service_harness import COUNT_QUERY, HTTP, bearer, loopback_socket, wait_healthy
from typer.testing import CliRunner

from dpkit.cli import app
from dpkit.cli._serve import parse_budget
from dpkit.errors import PrivacyParameterError


def test_parse_budget() -> None:
    assert parse_budget("epsilon=3,delta=1e-6") == {"epsilon": 3.0, "delta": 1e-6}
    assert parse_budget("epsilon=1") == {"epsilon": 1.0}
    for bad in ("delta=1e-6", "epsilon=x", "epsilon=1,epsilon=2", "rho=1", "epsilon"):
        with pytest.raises(PrivacyParameterError):
            parse_budget(bad)


def test_token_commands(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    run = CliRunner().invoke
    r = run(
        app,
        ["serve", "token", "add", "alice", "--epsilon", "1", "--delta", "1e-7", "--ledger", url],
    )
    assert r.exit_code == 0, r.output
    token = r.output.strip()
    assert token.startswith("dpk_") and len(token) > 40
    listed = run(app, ["serve", "token", "list", "--ledger", url]).output
    assert "alice\tanalyst\tepsilon=1.0" in listed and token not in listed
    for args in (
        ["alice", "--epsilon", "1"],  # names are never reused
        ["bob", "--epsilon", "-1"],
        ["bob", "--epsilon", "nan"],
        ["bob"],
        ["cur", "--curator", "--epsilon", "1"],
        ["bad name;", "--epsilon", "1"],
    ):
        r = run(app, ["serve", "token", "add", *args, "--ledger", url])
        assert r.exit_code == 2, (args, r.output)
    assert run(app, ["serve", "token", "revoke", "alice", "--ledger", url]).exit_code == 0
    assert "revoked" in run(app, ["serve", "token", "list", "--ledger", url]).output
    assert run(app, ["serve", "token", "revoke", "nobody", "--ledger", url]).exit_code == 2


def test_dpkit_serve_runs_the_service(tmp_path: Path, people: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    run = CliRunner().invoke
    alice = run(
        app,
        ["serve", "token", "add", "alice", "--epsilon", "1", "--delta", "1e-7", "--ledger", url],
    ).output.strip()
    sock = loopback_socket()
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from dpkit.cli import main; main()",
            "serve",
            str(people),
            "--privacy-unit",
            "user_id",
            "--budget",
            "epsilon=3,delta=1e-6",
            "--ledger",
            url,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base, 120)
        r = HTTP.post(base + "/v1/query", json=COUNT_QUERY, headers=bearer(alice))
        assert r.status_code == 200, r.text
        assert r.json()["remaining"][0] == pytest.approx(0.99)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "no curator token yet" in err
    # The charge outlives the process: a second start on the same ledger sees it.
    from dpkit.accounting import Budget
    from dpkit.ledger import open_ledger

    budget = Budget.open(open_ledger(url), name="budget")
    assert budget.sub_budget("alice").spent[0] == pytest.approx(0.01)
