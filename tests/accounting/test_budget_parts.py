"""The budget's parts (dpkit.accounting._budget) talk through arguments and public names only.

``Budget`` is a thin composition: each part receives the state it works on. A part reading
another object's private attribute (``other._state``), or importing another module's private
name, would couple the parts again; this scan finds either.
"""

from __future__ import annotations

import ast
import pathlib

import dpkit.accounting

ROOT = pathlib.Path(dpkit.accounting.__file__).parent
FILES = [ROOT / "budget.py", *sorted((ROOT / "_budget").glob("*.py"))]


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def reach_ins(source: str) -> list[str]:
    """``x._name`` where x is not ``self``/``cls``, and ``from m import _name``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        own = (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and (node.value.id in ("self", "cls"))
        )
        if isinstance(node, ast.Attribute) and _private(node.attr) and not own:
            found.append(f"{ast.unparse(node)} (line {node.lineno})")
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dpkit"):
            found += [f"import {a.name} from {node.module}" for a in node.names if _private(a.name)]
    return found


def test_the_parts_exist_and_budget_is_thin() -> None:
    assert {p.stem for p in FILES} >= {
        "budget",
        "terms",
        "kinds",
        "filter",
        "replay",
        "saved",
        "subs",
        "records",
    }
    tree = ast.parse((ROOT / "budget.py").read_text())
    budget = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Budget")
    longest = max(
        n.end_lineno - n.lineno + 1
        for n in budget.body  # type: ignore[operator]
        if isinstance(n, ast.FunctionDef)
    )
    assert longest <= 40  # docstring included: every method delegates to a part


def test_no_part_reaches_into_another_objects_private_state() -> None:
    found = {p.name: reach_ins(p.read_text()) for p in FILES}
    # Pair.__new__ sets the attribute of the tuple it has just made
    found["records.py"] = [f for f in found["records.py"] if not f.startswith("out._of")]
    assert {k: v for k, v in found.items() if v} == {}


def test_the_scan_catches_a_reach_in() -> None:
    assert reach_ins("def f(budget):\n    return budget._state\n") == ["budget._state (line 2)"]
    assert reach_ins("from dpkit.accounting._budget.kinds import _share\n") == [
        "import _share from dpkit.accounting._budget.kinds"
    ]
    assert reach_ins("class A:\n    def f(self):\n        return self._x\n") == []
