"""An SQLite ledger path is the file the operating system names, ``..`` after a symbolic link
to a directory included: ``x/link/../ledger.db`` with ``x/link -> y/sub`` is ``y/ledger.db``.
A lexical ``abspath`` opened ``x/ledger.db`` instead (a second, empty ledger, while the
one-name check read the real file): two charges of 0.6 were accepted under 1.0."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dpkit.accounting import Budget
from dpkit.errors import BudgetExceededError, LedgerError
from dpkit.ledger import SqliteLedger


def test_dotdot_after_symlinked_dir_reaches_the_same_ledger(tmp_path: Path) -> None:
    (tmp_path / "y" / "sub").mkdir(parents=True)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "link").symlink_to(tmp_path / "y" / "sub")
    real = str(tmp_path / "y" / "ledger.db")
    dotted = os.path.join(str(tmp_path), "x", "link", "..", "ledger.db")
    first = Budget(epsilon=1.0, ledger=SqliteLedger(real), name="people")
    assert os.path.samefile(dotted, real)
    accepted = 0
    try:
        second: Budget | None = Budget(epsilon=1.0, ledger=SqliteLedger(dotted), name="people")
    except LedgerError:
        second = None  # refusing the path is safe too
    for budget in (first, second):
        if budget is not None:
            try:
                budget.charge(epsilon=0.6)
                accepted += 1
            except BudgetExceededError:
                pass
    assert accepted <= 1
    assert not (tmp_path / "x" / "ledger.db").exists()


def test_path_spellings_of_one_file_give_one_path(tmp_path: Path) -> None:
    """Repeated and trailing slashes, ``.``, ``..`` after a link and an open descriptor's
    ``/proc/self/fd/N`` name one file: the ledger keeps one resolved path for all of them."""
    from dpkit.ledger import open_ledger, sqlite_url_path

    (tmp_path / "y" / "sub").mkdir(parents=True)
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "link").symlink_to(tmp_path / "y" / "sub")
    real = os.path.realpath(tmp_path / "y" / "ledger.db")
    SqliteLedger(real).close()
    spellings = [
        real,
        real.replace("/", "//"),
        os.path.join(str(tmp_path), "y", ".", "ledger.db"),
        os.path.join(str(tmp_path), "x", "link", "..", "ledger.db"),
        os.path.join(str(tmp_path), "x", "link", "..", "sub", "..", "ledger.db"),
    ]
    with open(real, "rb") as f:
        spellings.append(f"/proc/self/fd/{f.fileno()}")
        for spelling in spellings:
            ledger = SqliteLedger(spelling)
            assert ledger.path == real, spelling
            ledger.close()
            if not spelling.startswith("/proc"):
                assert sqlite_url_path("sqlite:///" + spelling) == real
        store = open_ledger("sqlite:///" + spellings[3])
        assert store.path == real  # type: ignore[attr-defined]
        store.close()  # type: ignore[attr-defined]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x", "y"]
    assert not (tmp_path / "x" / "ledger.db").exists()


def test_descriptor_paths_that_name_no_file_are_refused(tmp_path: Path) -> None:
    """A pipe's or a deleted file's ``/proc/self/fd/N`` names no file another process could
    reach: refused, and nothing is created."""
    r, w = os.pipe()
    gone = tmp_path / "gone.db"
    gone.write_bytes(b"")
    with open(gone, "rb") as f:
        gone.unlink()
        try:
            for fd in (r, f.fileno()):
                with pytest.raises(LedgerError, match="not a file path"):
                    SqliteLedger(f"/proc/self/fd/{fd}")
        finally:
            os.close(r)
            os.close(w)
    assert list(tmp_path.iterdir()) == []
