"""``pip install -e .[docs]`` installs everything the executed documentation pages import.

``make docs`` installs the ``docs`` extra (with ``plot``) into a fresh environment and runs
every ``python`` block of the executed pages: a module they import that the extra does not
bring fails the build on a fresh clone, while the test environment (which has every extra) hides
it. This reads the imports of those blocks and checks them against the extra's closure.
"""

from __future__ import annotations

import ast
import importlib.metadata
import importlib.util
import re
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement

tomllib = pytest.importorskip("tomllib")

ROOT = Path(__file__).resolve().parents[1]
# dpkit modules that need an extra of their own.
DPKIT_EXTRAS = {"dpkit.service": "service", "dpkit.analytics.engines.spark": "spark"}


def _hooks():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "dpkit_docs_hooks_extra", ROOT / "tools" / "mkdocs_hooks.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _closure(extras: set[str]) -> tuple[set[str], set[str]]:
    """(distribution names, dpkit extras) installed by ``dpkit[extras]``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    names = {_norm(Requirement(r).name) for r in project["dependencies"]}
    seen: set[str] = set()
    todo = list(extras)
    while todo:
        extra = todo.pop()
        if extra in seen:
            continue
        seen.add(extra)
        for text in project["optional-dependencies"][extra]:
            req = Requirement(text)
            if _norm(req.name) == "dpkit":
                todo.extend(req.extras)
            else:
                names.add(_norm(req.name))
    return names, seen


def _imports() -> dict[str, set[str]]:
    """Module imported -> the executed pages importing it."""
    hooks = _hooks()
    out: dict[str, set[str]] = {}
    docs = ROOT / "docs"
    for page in sorted(docs.rglob("*.md")):
        uri = page.relative_to(docs).as_posix()
        if not hooks.is_executed(uri):
            continue
        for block in hooks.PYTHON_BLOCK.finditer(page.read_text(encoding="utf-8")):
            for node in ast.walk(ast.parse(block.group(1))):
                names = (
                    [a.name for a in node.names]
                    if isinstance(node, ast.Import)
                    else [node.module]
                    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0
                    else []
                )
                for name in names:
                    out.setdefault(name, set()).add(uri)
    return out


def test_the_docs_extra_installs_every_module_the_executed_pages_import() -> None:
    names, extras = _closure({"docs", "plot"})  # what `make docs` installs
    owners = importlib.metadata.packages_distributions()
    missing = []
    for module, pages in sorted(_imports().items()):
        top = module.split(".")[0]
        if top in sys.stdlib_module_names:
            continue
        if top == "dpkit":
            need = next(
                (e for m, e in DPKIT_EXTRAS.items() if module == m or module.startswith(m + ".")),
                None,
            )
            if need is not None and need not in extras:
                missing.append(f"{module} (extra {need!r}) in {sorted(pages)}")
            continue
        dists = {_norm(d) for d in owners.get(top, [top])}
        if not dists & names:
            missing.append(f"{module} ({sorted(dists)}) in {sorted(pages)}")
    assert not missing, "the docs extra lacks: " + "; ".join(missing)
