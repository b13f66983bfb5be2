"""Structural figures of the ``dpkit`` source tree, read with :mod:`ast` (nothing is imported).

Run from the repository root::

    python tools/code_metrics.py            # a readable report
    python tools/code_metrics.py --json     # the same figures as JSON (to diff two trees)
    python tools/code_metrics.py --src path/to/src/dpkit

What it reports:

* **Private names used across modules.** (a) ``x._name`` where ``x`` is not ``self``/``cls``
  and ``_name`` is defined somewhere else in the package but not in the module that uses it
  (a reach into another module's private members); (b) ``from m import _name`` where ``m`` is
  another dpkit module (a package importing its own private submodule does not count). Dunder
  names are never private.
* **Import cycles** among the package's modules, three ways: over imports executed when a module
  loads (what ``tests/test_layers.py`` checks), adding lazy imports inside functions, and adding
  imports under ``if TYPE_CHECKING:``. The two wider views show modules that know each other
  even where no import-time cycle breaks.
* **``Any`` at the seams**: parameters and return annotations that mention ``Any`` in the
  public functions and methods of ``analytics`` (its ``engines`` counted apart) and ``service``.
* **The longest functions** (lines from ``def`` to the last line of the body) and the **longest
  modules**.
"""

from __future__ import annotations

import argparse
import ast
import json
import pathlib
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFAULT_SRC = ROOT / "src" / "dpkit"
#: Subpackages whose public functions are the seams where ``Any`` is counted.
SEAMS = ("analytics.engines", "analytics", "service")


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


@dataclass
class Module:
    name: str
    path: pathlib.Path
    tree: ast.Module
    lines: int
    is_package: bool
    defined: set[str] = field(default_factory=set)


def load(src: pathlib.Path) -> dict[str, Module]:
    """Every module under the package directory ``src``, parsed, keyed by dotted name."""
    out: dict[str, Module] = {}
    for path in sorted(src.rglob("*.py")):
        parts = list(path.relative_to(src.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        text = path.read_text(encoding="utf-8")
        tree = ast.parse(text, filename=str(path))
        mod = Module(".".join(parts), path, tree, len(text.splitlines()), is_package)
        mod.defined = _definitions(tree)
        out[mod.name] = mod
    return out


def _definitions(tree: ast.Module) -> set[str]:
    """Names a module defines: functions, classes, methods, assigned names and attributes
    (``self._x = ...``, class-level ``_x = ...``), and names it imports."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    return names


def _resolve(module: Module, node: ast.ImportFrom) -> str:
    """The absolute module of a ``from ... import``, relative imports included."""
    if node.level == 0:
        return node.module or ""
    base = module.name.split(".")
    if not module.is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


# --- private names ---------------------------------------------------------------------------


def private_uses(mods: dict[str, Module]) -> list[tuple[str, int, str]]:
    """(module, line, what) for each private name used across modules."""
    defined_in: dict[str, set[str]] = defaultdict(set)
    for mod in mods.values():
        for name in mod.defined:
            if _is_private(name):
                defined_in[name].add(mod.name)
    package = next(iter(mods)).split(".")[0] if mods else ""
    found: list[tuple[str, int, str]] = []
    for mod in mods.values():
        own = {n for n in mod.defined if _is_private(n)}
        # Private names this module imported under its own name do not make a local definition.
        imported_private = set()
        for node in ast.walk(mod.tree):
            if isinstance(node, ast.ImportFrom):
                source = _resolve(mod, node)
                if source != package and not source.startswith(package + "."):
                    continue
                for alias in node.names:
                    if f"{source}.{alias.name}" in mods and (
                        mod.name == source or mod.name.startswith(source + ".")
                    ):
                        continue  # a package's own private submodule, imported inside it
                    if _is_private(alias.name) and source != mod.name:
                        found.append((mod.name, node.lineno, f"from {source} import {alias.name}"))
                        imported_private.add(alias.asname or alias.name)
        local = own - imported_private
        for node in ast.walk(mod.tree):
            if not (isinstance(node, ast.Attribute) and _is_private(node.attr)):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            if (
                isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "super"
            ):
                continue
            elsewhere = defined_in.get(node.attr, set()) - {mod.name}
            if elsewhere and node.attr not in local:
                found.append((mod.name, node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
    return sorted(found)


# --- import cycles ---------------------------------------------------------------------------


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(mods: dict[str, Module]) -> list[tuple[str, str, str]]:
    """(importer, target module, kind) for every import of a package module; kind is
    ``module`` (runs at load), ``function`` (lazy, inside a function) or ``type``."""
    package = next(iter(mods)).split(".")[0] if mods else ""
    out: list[tuple[str, str, str]] = []

    def visit(mod: Module, nodes: Iterable[ast.stmt], kind: str) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == package and alias.name in mods:
                        out.append((mod.name, alias.name, kind))
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(mod, node)
                if source.split(".")[0] != package:
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    target = sub if sub in mods else source
                    if target in mods:
                        out.append((mod.name, target, kind))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(mod, node.body, "type" if kind == "type" else "function")
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(mod, node.body, "type")
                visit(mod, node.orelse, kind)
            else:
                for name in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, name, None)
                    if isinstance(inner, list):
                        visit(mod, inner, kind)

    for mod in mods.values():
        visit(mod, mod.tree.body, "module")
    return out


def cycles(edges: Iterable[tuple[str, str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (or a self-loop): Tarjan,
    iterative. The implicit import of a parent package is not an edge (as in the layer test)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph[b] = graph[b]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1 or node in graph[node]:
                    found.append(sorted(comp))
    return sorted(found)


def cycle_views(mods: dict[str, Module]) -> dict[str, list[list[str]]]:
    edges = imports(mods)
    views = {
        "load": ("module",),
        "load+lazy": ("module", "function"),
        "load+lazy+type": ("module", "function", "type"),
    }
    return {
        view: cycles((a, b) for a, b, k in edges if k in kinds) for view, kinds in views.items()
    }


# --- Any at the seams ------------------------------------------------------------------------


def _mentions_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and "Any" in node.value.replace("[", " ").replace("]", " ").replace(",", " ").split()
        ):
            return True
    return False


def _public_functions(
    tree: ast.Module,
) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and not _is_private(node.name):
            yield node.name, node
        elif isinstance(node, ast.ClassDef) and not _is_private(node.name):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                    not _is_private(item.name) or item.name == "__init__"
                ):
                    yield f"{node.name}.{item.name}", item


def seam(name: str, package: str) -> str | None:
    """Which seam a module belongs to (``None`` outside them); private modules count too, since
    their public functions are what sibling modules call."""
    rel = name[len(package) + 1 :] if name.startswith(package + ".") else ""
    for s in SEAMS:
        if rel == s or rel.startswith(s + "."):
            return s
    return None


def any_at_seams(mods: dict[str, Module]) -> list[tuple[str, str, str, int]]:
    """(seam, module, function, how many of its annotations mention Any)."""
    package = next(iter(mods)).split(".")[0] if mods else ""
    out = []
    for mod in mods.values():
        where = seam(mod.name, package)
        if where is None:
            continue
        for qual, fn in _public_functions(mod.tree):
            args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
            args += [a for a in (fn.args.vararg, fn.args.kwarg) if a is not None]
            count = sum(_mentions_any(a.annotation) for a in args) + _mentions_any(fn.returns)
            if count:
                out.append((where, mod.name, qual, count))
    return sorted(out)


# --- sizes -----------------------------------------------------------------------------------


def longest_functions(mods: dict[str, Module], most: int) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []

    def visit(mod: Module, nodes: Iterable[ast.stmt], prefix: str) -> None:
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((size, f"{mod.name}:{prefix}{node.name}"))
                visit(mod, node.body, f"{prefix}{node.name}.")
            elif isinstance(node, ast.ClassDef):
                visit(mod, node.body, f"{prefix}{node.name}.")

    for mod in mods.values():
        visit(mod, mod.tree.body, "")
    return sorted(found, key=lambda t: (-t[0], t[1]))[:most]


def measure(src: pathlib.Path, most: int = 15) -> dict[str, object]:
    mods = load(src)
    uses = private_uses(mods)
    views = cycle_views(mods)
    anys = any_at_seams(mods)
    return {
        "modules": len(mods),
        "lines": sum(m.lines for m in mods.values()),
        "private_uses": {
            "attribute": sum(1 for _, _, w in uses if not w.startswith("from ")),
            "import": sum(1 for _, _, w in uses if w.startswith("from ")),
            "by_module": dict(Counter(m for m, _, _ in uses).most_common()),
            "sites": [f"{m}:{line}: {w}" for m, line, w in uses],
        },
        "cycles": {view: comps for view, comps in views.items()},
        "any_at_seams": {
            "annotations": sum(c for *_, c in anys),
            "functions": len(anys),
            "by_seam": {s: sum(c for w, _, _, c in anys if w == s) for s in SEAMS},
            "sites": [f"{m}:{q} ({c})" for _, m, q, c in anys],
        },
        "longest_functions": [f"{n:5d}  {q}" for n, q in longest_functions(mods, most)],
        "longest_modules": [
            f"{m.lines:5d}  {m.name}"
            for m in sorted(mods.values(), key=lambda m: (-m.lines, m.name))[:10]
        ],
    }


def report(fig: dict[str, object], verbose: bool) -> str:
    out: list[str] = []
    pu = fig["private_uses"]
    assert isinstance(pu, dict)
    out.append(f"modules: {fig['modules']}, lines: {fig['lines']}")
    out.append(
        f"private names used across modules: {pu['attribute'] + pu['import']} "
        f"({pu['attribute']} attribute uses, {pu['import']} imports)"
    )
    for mod, n in list(pu["by_module"].items())[: None if verbose else 10]:
        out.append(f"  {n:4d}  {mod}")
    if verbose:
        out.extend(f"    {s}" for s in pu["sites"])
    cyc = fig["cycles"]
    assert isinstance(cyc, dict)
    for view, comps in cyc.items():
        size = sum(len(c) for c in comps)
        out.append(f"import cycles ({view}): {len(comps)} ({size} modules)")
        out.extend("  " + " <-> ".join(c) for c in comps)
    anys = fig["any_at_seams"]
    assert isinstance(anys, dict)
    by = ", ".join(f"{s}: {n}" for s, n in anys["by_seam"].items())
    out.append(
        f"Any in public signatures at the seams: {anys['annotations']} annotations in "
        f"{anys['functions']} functions ({by})"
    )
    if verbose:
        out.extend(f"  {s}" for s in anys["sites"])
    out.append("longest functions:")
    out.extend(f"  {s}" for s in fig["longest_functions"])  # type: ignore[union-attr]
    out.append("longest modules (lines):")
    out.extend(f"  {s}" for s in fig["longest_modules"])  # type: ignore[union-attr]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--src",
        type=pathlib.Path,
        default=DEFAULT_SRC,
        help="the package directory (default: src/dpkit)",
    )
    parser.add_argument("--most", type=int, default=15, help="how many longest functions")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every site")
    args = parser.parse_args(argv)
    fig = measure(args.src, args.most)
    print(json.dumps(fig, indent=1) if args.json else report(fig, args.verbose))
    return 0


if __name__ == "__main__":
    sys.exit(main())
