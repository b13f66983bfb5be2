"""The repository's habits, checked: where code lives and how it is found, not what it does.

* nothing edits ``sys.path`` in tests, benchmarks or tools (the test path is ``pythonpath`` in
  ``pyproject.toml``; scripts run with ``PYTHONPATH``);
* benchmarks import nothing from ``tests/`` (what both use lives in ``benchmarks/shared``);
* regression tests are named by what they protect: no test file named ``attack`` or numbered
  by round (``test_spark_attack3.py``);
* one version source: ``__version__`` in ``src/dpkit/__init__.py``, which the build reads;
* every marker a test may carry is registered, and the inner-loop selection of the Makefile
  leaves out each marker that needs a JVM, PostgreSQL or Chromium;
* the code-metrics tool sees the tree (a companion feeds it a tree with a cycle and a private
  reach, so its figures can fail).
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ("tests", "benchmarks", "tools")


def _python_files(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (ROOT / f).rglob("*.py"))


def _path_edits(tree: ast.AST) -> list[int]:
    """Lines that call ``sys.path.insert/append/extend`` or assign to ``sys.path``."""
    lines = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("insert", "append", "extend")
            and ast.unparse(node.func.value) == "sys.path"
        ):
            lines.append(node.lineno)
    return lines


def test_nothing_edits_sys_path() -> None:
    found = [
        f"{p.relative_to(ROOT)}:{line}"
        for p in _python_files(*SCRIPTS)
        for line in _path_edits(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert found == []


def test_the_sys_path_check_catches_an_insert() -> None:
    assert _path_edits(ast.parse("import sys\nsys.path.insert(0, 'x')\n")) == [2]
    assert _path_edits(ast.parse("import sys\nsys.path.append('x')\n")) == [2]


def _imported_modules(tree: ast.AST) -> set[str]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


def test_benchmarks_import_nothing_from_tests() -> None:
    test_modules = {p.stem for p in _python_files("tests")} - {"conftest"}
    found = []
    for p in _python_files("benchmarks"):
        text = p.read_text(encoding="utf-8")
        names = _imported_modules(ast.parse(text))
        clash = sorted(n for n in names if n.split(".")[0] in test_modules or n.startswith("tests"))
        if clash or re.search(r"[\"'/]tests[/\"']", text):
            found.append(f"{p.relative_to(ROOT)}: {clash or 'a path into tests/'}")
    assert found == []


@pytest.mark.parametrize(
    "name, bad",
    [
        ("test_spark_attack3.py", True),
        ("test_attack_ledger.py", True),
        ("test_round2_csv.py", True),
        ("test_fix_2.py", True),
        ("test_utf8_keys.py", False),
        ("test_ledger_charges_stay_durable.py", False),
    ],
)
def test_the_name_rule(name: str, bad: bool) -> None:
    assert _badly_named(name) is bad


def _badly_named(name: str) -> bool:
    # "attack" names the event, not the promise; a round or finding number says nothing.
    return bool(re.search(r"attack|(round|finding|fix|bug)_?\d|_\d+\.py$", name))


def test_test_files_are_named_by_what_they_protect() -> None:
    found = [
        str(p.relative_to(ROOT))
        for p in _python_files("tests")
        if p.name.startswith("test_") and _badly_named(p.name)
    ]
    assert found == []


def _pyproject() -> dict:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is Python 3.11+")
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_one_version_source() -> None:
    project = _pyproject()
    assert "version" not in project["project"]
    assert project["project"]["dynamic"] == ["version"]
    assert project["tool"]["hatch"]["version"]["path"] == "src/dpkit/__init__.py"
    init = (ROOT / "src" / "dpkit" / "__init__.py").read_text(encoding="utf-8")
    assert len(re.findall(r'^__version__ = "\d+\.\d+\.\d+[^"]*"$', init, re.M)) == 1


def test_markers_are_registered_and_the_fast_loop_leaves_out_the_heavy_ones() -> None:
    registered = {m.split(":")[0] for m in _pyproject()["tool"]["pytest"]["ini_options"]["markers"]}
    assert {"slow", "spark", "postgres", "browser"} <= registered
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    fast = re.search(r"^FAST := (.*)$", makefile, re.M)
    assert fast is not None
    assert {f"not {m}" for m in ("slow", "spark", "postgres", "browser")} <= {
        part.strip() for part in fast.group(1).split(" and ")
    }


def _metrics() -> object:
    import code_metrics  # tools/ is on the test path

    return code_metrics


def test_code_metrics_sees_the_tree() -> None:
    fig = _metrics().measure(ROOT / "src" / "dpkit")  # type: ignore[attr-defined]
    assert fig["modules"] > 70
    assert fig["longest_functions"] and fig["longest_modules"]


def test_code_metrics_catches_a_cycle_a_private_reach_and_any(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "analytics").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "analytics" / "__init__.py").write_text("")
    (pkg / "analytics" / "a.py").write_text(
        "from typing import Any\n\ndef f(x: Any) -> int:\n"
        "    from pkg.analytics import b\n    return b.Thing()._secret\n"
    )
    (pkg / "analytics" / "b.py").write_text(
        "from pkg.analytics import a\n\nclass Thing:\n    def __init__(self) -> None:\n"
        "        self._secret = 1\n"
    )
    fig = _metrics().measure(pkg)  # type: ignore[attr-defined]
    assert fig["cycles"]["load"] == []
    assert fig["cycles"]["load+lazy"] == [["pkg.analytics.a", "pkg.analytics.b"]]
    assert fig["private_uses"]["attribute"] == 1
    assert fig["any_at_seams"]["annotations"] == 1
