"""An SQLite ledger file reached under two names is refused.

SQLite keeps the write-ahead log and its locks beside the name a database was opened with: two
processes using two names for one file (a hard link; a single file bind-mounted elsewhere)
commit to two logs, so both could spend the last of a budget and one charge is later lost.
"""

from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.ledger import SqliteLedger, _sqlite, open_ledger


def _charge(path: str, ready: Any, go: Any, out: Any) -> None:
    """Open the budget through ``path``, wait for the go, charge 0.6; report what happened."""
    try:
        budget = Budget.open(SqliteLedger(path), "people")
        budget.refresh()
    except LedgerError as exc:
        out.put(("refused", str(exc)))
        ready.set()
        return
    ready.set()
    go.wait(30)
    try:
        budget.charge(epsilon=0.6)
        out.put(("charged", ""))
    except BudgetExceededError:
        out.put(("exceeded", ""))
    except LedgerError as exc:
        out.put(("refused", str(exc)))


def test_two_processes_through_two_hard_links_never_overspend(tmp_path: Path) -> None:
    first = tmp_path / "ledger.db"
    Budget(epsilon=1.0, ledger=SqliteLedger(first), name="people")
    (tmp_path / "other").mkdir()
    second = tmp_path / "other" / "ledger.db"
    os.link(first, second)
    ctx = multiprocessing.get_context("fork")
    go, out = ctx.Event(), ctx.Queue()
    readies = [ctx.Event(), ctx.Event()]
    procs = [
        ctx.Process(target=_charge, args=(str(p), r, go, out))
        for p, r in zip((first, second), readies, strict=True)
    ]
    for p in procs:
        p.start()
    for r in readies:
        assert r.wait(60)
    go.set()
    for p in procs:
        p.join(60)
    results = [out.get(timeout=10) for _ in procs]
    assert [kind for kind, _ in results].count("charged") <= 1  # 0.6 + 0.6 > 1.0
    assert all(kind == "refused" for kind, _ in results)
    assert "has 2 names (hard links); reach the database through one path" in results[0][1]
    # The file is usable again through one name, and nothing was lost or spent.
    second.unlink()
    budget = Budget.open(SqliteLedger(first), "people")
    assert budget.spent == (0.0, 0.0)
    budget.charge(epsilon=0.6)
    with pytest.raises(BudgetExceededError):
        Budget.open(SqliteLedger(first), "people").charge(epsilon=0.6)


def test_a_hard_link_made_after_opening_refuses_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    budget = Budget(epsilon=1.0, ledger=SqliteLedger(path), name="people")
    os.link(path, tmp_path / "alias.db")
    with pytest.raises(LedgerError, match="has 2 names"):
        budget.charge(epsilon=0.5)
    (tmp_path / "alias.db").unlink()
    budget.charge(epsilon=0.5)
    assert Budget.open(SqliteLedger(path), "people").spent == (0.5, 0.0)


def test_a_file_renamed_or_replaced_after_opening_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    store = SqliteLedger(path)
    budget = Budget(epsilon=1.0, ledger=store, name="people")
    os.rename(path, tmp_path / "moved.db")
    shutil.copy(tmp_path / "moved.db", path)  # another file now answers to the name
    with pytest.raises(LedgerError, match="removed, renamed or replaced"):
        budget.charge(epsilon=0.5)


def test_a_symbolic_link_is_one_name(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    Budget(epsilon=1.0, ledger=SqliteLedger(path), name="people").charge(epsilon=0.6)
    (tmp_path / "link.db").symlink_to(path)
    via_link = Budget.open(SqliteLedger(tmp_path / "link.db"), "people")
    with pytest.raises(BudgetExceededError):
        via_link.charge(epsilon=0.6)
    via_link.charge(epsilon=0.4)


def test_a_file_listed_as_a_mount_point_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "ledger.db"
    SqliteLedger(path).close()
    monkeypatch.setattr(_sqlite, "_mount_points", lambda: frozenset({str(path)}))
    with pytest.raises(LedgerError, match=r"is a mount point .*; mount the directory"):
        SqliteLedger(path)
    with pytest.raises(LedgerError, match="is a mount point"):
        open_ledger(f"sqlite:///{path}")


_BIND_CHILD = """
import sys
from dpkit.accounting import Budget
from dpkit.errors import LedgerError
from dpkit.ledger import SqliteLedger
try:
    Budget.open(SqliteLedger(sys.argv[1]), "people").charge(epsilon=0.6)
except LedgerError as exc:
    print("refused:", exc)
else:
    print("charged")
"""


def test_a_single_file_bind_mount_is_refused_in_a_real_mount_namespace(tmp_path: Path) -> None:
    unshare = shutil.which("unshare")
    if unshare is None or not hasattr(os, "geteuid") or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) to bind-mount a file in a private namespace")
    host = tmp_path / "host" / "ledger.db"
    host.parent.mkdir()
    Budget(epsilon=1.0, ledger=SqliteLedger(host), name="people").charge(epsilon=0.6)
    inside = tmp_path / "container" / "ledger.db"
    inside.parent.mkdir()
    inside.touch()
    src = str(Path(_sqlite.__file__).resolve().parents[2])
    script = (
        f"mount --bind {host} {inside} && "
        f"PYTHONPATH={src} {sys.executable} -c '{_BIND_CHILD}' {inside}"
    )
    done = subprocess.run(
        [unshare, "-m", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if "mount:" in done.stderr or "unshare:" in done.stderr:
        pytest.skip(f"bind mounts are not permitted here: {done.stderr.strip()}")
    assert done.stdout.startswith("refused:"), done.stdout + done.stderr
    assert "is a mount point" in done.stdout
    assert Budget.open(SqliteLedger(host), "people").spent == (0.6, 0.0)


def test_the_service_tables_read_the_url_like_the_ledger_and_refuse_two_names(
    tmp_path: Path,
) -> None:
    from dpkit.service import ServiceState
    from dpkit.service._state import StateError

    path = tmp_path / "budget.db"
    SqliteLedger(path).close()
    os.link(path, tmp_path / "alias.db")
    with pytest.raises(StateError, match="has 2 names"):
        ServiceState(f"sqlite:///{path}")
    with pytest.raises(StateError, match="plain file path"):
        ServiceState(f"sqlite:///{tmp_path / 'other.db'}?mode=rwc")
