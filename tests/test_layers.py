"""The package's layers, enforced: a static scan of every import under ``src/dpkit``.

The scan parses each module with :mod:`ast` (nothing is imported) and records every import of a
``dpkit`` module, with the place it appears in:

* ``module``: executed when the module is imported (top level, or inside a top-level ``if`` /
  ``try``);
* ``function``: inside a function or method body, executed on the first call (a lazy import);
* ``type``: inside an ``if TYPE_CHECKING:`` block, never executed (annotations only).

Three rules, each with a companion test that feeds the checker a bad synthetic tree:

(a) **No upward import.** :data:`LAYERS` lists the layers from the bottom; a top-level package
    may import only packages of strictly lower layers (packages in the same layer are
    independent of one another). Every kind of import counts: a lazy or a type-only import
    upward still ties the lower layer to the upper one.
(b) **No import cycle between modules**, over ``module`` imports only: those are the ones that
    run while modules are being initialised, where a cycle breaks depending on which module is
    imported first. A lazy ``function`` import runs after every module has loaded, so it
    cannot take part in an import-time cycle (it is how a module defers a heavy dependency);
    a ``type`` import never runs. Both still obey rules (a) and (c).
    An edge goes to the module named by the import: ``from a.b import c`` is an edge to
    ``a.b.c`` if that is a module, else to ``a.b``. The implicit import of parent packages is
    not an edge (a package's ``__init__`` importing its own submodules, which in turn load
    the partially initialised parent, is how every package works).
(c) **No private name across top-level packages.** Importing ``_x`` or anything from a private
    module (``dpkit.noise._source``) from another top-level package fails. The top-level
    package ``dpkit._numeric`` is itself private to dpkit but is the declared shared base layer;
    its public names are for every layer.

Imports made through ``importlib`` with a computed name are invisible to the scan; the two
tables that drive them (the facade's lazy names, the command line's lazy subcommands) are
checked against the layers by :func:`test_dynamic_imports_obey_the_layers`.
"""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

SRC = pathlib.Path(__file__).resolve().parents[1] / "src" / "dpkit"

#: The layers, bottom first. Each entry is a layer; its members are top-level packages (or
#: top-level modules) of dpkit. ``dpkit`` is the root package's ``__init__``: the facade that
#: re-exports names lazily; only the command line sits above it.
LAYERS: tuple[frozenset[str], ...] = (
    frozenset({"dpkit.errors"}),
    frozenset({"dpkit._numeric"}),
    frozenset({"dpkit._loss"}),
    frozenset({"dpkit.events", "dpkit.noise", "dpkit.fdp"}),
    frozenset({"dpkit.divergence"}),
    frozenset({"dpkit.accounting", "dpkit.mechanisms", "dpkit.ldp"}),
    frozenset({"dpkit.analytics", "dpkit.audit", "dpkit.ledger", "dpkit.risk", "dpkit.training"}),
    frozenset({"dpkit.service", "dpkit.synth"}),
    frozenset({"dpkit"}),
    frozenset({"dpkit.cli"}),
)

#: Private imports across packages that are tolerated for now (none). Each entry must still
#: occur (a stale entry fails), so the list stays exact.
_PENDING: frozenset[tuple[str, str, str]] = frozenset()


@dataclass(frozen=True)
class Import:
    """One import of a dpkit module: ``importer`` imports ``name`` from module ``target``
    (``name`` is ``""`` for ``import target``)."""

    importer: str
    target: str
    name: str
    kind: str  # "module", "function" or "type"
    line: int


def module_names(root: pathlib.Path) -> dict[str, pathlib.Path]:
    """Dotted module name -> file, for every ``.py`` file under the package ``root``."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module of ``from ... import``, relative imports included."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def scan(root: pathlib.Path) -> list[Import]:
    """Every import of a module of the package ``root`` (by its directory name), classified."""
    package = root.name
    mods = module_names(root)
    found: list[Import] = []

    def visit(module: str, is_pkg: bool, nodes: Iterable[ast.stmt], kind: str) -> None:
        for node in nodes:
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == package or alias.name.startswith(package + "."):
                        found.append(Import(module, alias.name, "", kind, node.lineno))
            elif isinstance(node, ast.ImportFrom):
                source = _resolve(module, is_pkg, node)
                if source != package and not source.startswith(package + "."):
                    continue
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    if sub in mods:  # ``from pkg import submodule``
                        found.append(Import(module, sub, "", kind, node.lineno))
                    else:
                        found.append(Import(module, source, alias.name, kind, node.lineno))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(module, is_pkg, node.body, "type" if kind == "type" else "function")
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(module, is_pkg, node.body, "type")
                visit(module, is_pkg, node.orelse, kind)
            else:  # if / try / with / class bodies: same kind as the enclosing block
                for field in ("body", "orelse", "finalbody", "handlers"):
                    inner = getattr(node, field, None)
                    if isinstance(inner, list):
                        visit(module, is_pkg, inner, kind)

    for module, path in mods.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        visit(module, path.name == "__init__.py", tree.body, "module")
    return found


def top_package(module: str) -> str:
    """``dpkit.noise._source`` -> ``dpkit.noise``; ``dpkit`` -> ``dpkit``."""
    return ".".join(module.split(".")[:2])


def layer_of(layers: Sequence[frozenset[str]]) -> dict[str, int]:
    return {member: i for i, layer in enumerate(layers) for member in layer}


def upward_imports(imports: Iterable[Import], layers: Sequence[frozenset[str]]) -> list[str]:
    """Rule (a): imports of a package of the same or a higher layer (other package)."""
    level = layer_of(layers)
    bad = []
    for imp in imports:
        src, dst = top_package(imp.importer), top_package(imp.target)
        if src == dst:
            continue
        if src not in level or dst not in level:
            bad.append(f"{imp.importer}:{imp.line}: {src} or {dst} is in no layer")
        elif level[dst] >= level[src]:
            bad.append(
                f"{imp.importer}:{imp.line} ({imp.kind}) imports {imp.target} "
                f"(layer {level[src]} -> {level[dst]})"
            )
    return bad


def import_cycles(imports: Iterable[Import]) -> list[list[str]]:
    """Rule (b): the strongly connected components (more than one module, or a self-loop) of
    the graph of module-level imports (Tarjan's algorithm, iterative)."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        if imp.kind == "module":
            graph.setdefault(imp.importer, set()).add(imp.target)
            graph.setdefault(imp.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
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
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    cycles.append(sorted(component))
    return cycles


def private_crossings(imports: Iterable[Import]) -> list[tuple[str, str, str]]:
    """Rule (c): (importer, target, name) of private names or modules imported across
    top-level packages."""
    bad = []
    for imp in imports:
        if top_package(imp.importer) == top_package(imp.target):
            continue
        inner = imp.target.split(".")[2:]  # below the top-level package
        private_module = any(part.startswith("_") for part in inner)
        private_name = imp.name.startswith("_") and not imp.name.startswith("__")
        if private_module or private_name:
            bad.append((imp.importer, imp.target, imp.name))
    return bad


#: The sub-layers of ``dpkit.analytics``, bottom first (names relative to the package; ``""``
#: is the package's ``__init__``, the facade). A module may import its own sub-layer or lower
#: ones only, with ANY kind of import (a lazy or type-only import upward is how the builder,
#: the session and the SQL front end used to form a cycle that rule (b) cannot see).
ANALYTICS = "dpkit.analytics"
ANALYTICS_LAYERS: tuple[frozenset[str], ...] = (
    # the plan and what is computed from public parameters: no engine, no builder, no session
    frozenset(
        {
            "_plan",
            "_sql",
            "_derive",
            "_aggregates",
            "_object_text",
            "_pricing",
            "_planner",
            "_intervals",
            "_release",
            "_report",
            "_table",
            "_sources",
            "_column_types",
            "_topk",
            "binning",  # public face of the planner's range and the quantile grid
        }
    ),
    frozenset({"engines"}),  # engines: the Engine protocol and DuckDB, Spark behind it
    # the query description (validated against the table description); exact marginals
    frozenset({"builder", "marginals"}),
    frozenset({"sqlquery"}),  # the SQL front end: builds builder queries
    frozenset({"session", "alerts"}),  # the executor: validates, charges, executes, releases
    frozenset({""}),  # the facade
)
#: What an engine module may import from the rest of analytics: the plan, the predicates and
#: derived-column expressions, the rules of where rows come from, the object-text rule, the
#: column-type rules, and other engine modules.
ENGINE_IMPORTS = frozenset(
    {"_plan", "_sql", "_derive", "_sources", "_object_text", "_column_types", "engines"}
)


def analytics_part(module: str) -> str | None:
    """``dpkit.analytics.engines.duckdb`` -> ``engines``; None outside dpkit.analytics."""
    if module == ANALYTICS:
        return ""
    if not module.startswith(ANALYTICS + "."):
        return None
    return module[len(ANALYTICS) + 1 :].split(".")[0]


def analytics_violations(
    imports: Iterable[Import],
    layers: Sequence[frozenset[str]] = ANALYTICS_LAYERS,
    engine_imports: frozenset[str] = ENGINE_IMPORTS,
) -> list[str]:
    """Imports (of any kind) from an analytics sub-layer to a higher one, or from an engine
    module to anything but :data:`ENGINE_IMPORTS`."""
    level = layer_of(layers)
    bad = []
    for imp in imports:
        src, dst = analytics_part(imp.importer), analytics_part(imp.target)
        if src is None or dst is None or src == dst:
            continue
        where = f"{imp.importer}:{imp.line} ({imp.kind}) imports {imp.target}"
        if src not in level or dst not in level:
            bad.append(f"{where}: {src or dst!r} is in no analytics sub-layer")
        elif level[dst] > level[src]:
            bad.append(f"{where} (sub-layer {level[src]} -> {level[dst]})")
        elif src == "engines" and dst not in engine_imports:
            bad.append(f"{where}: an engine imports only the plan, predicates and protocol")
    return bad


# --- the real tree ---------------------------------------------------------------------------

IMPORTS = scan(SRC)


def test_the_scan_sees_the_tree() -> None:
    # Guards against a scan that silently finds nothing: known imports of each kind.
    found = {(i.importer, i.target, i.name, i.kind) for i in IMPORTS}
    assert ("dpkit.mechanisms.additive", "dpkit.events", "LaplaceEvent", "module") in found
    assert ("dpkit.accounting.pld", "dpkit.fdp", "TradeOffFunction", "type") in found
    assert any(i.kind == "function" for i in IMPORTS)
    assert len(module_names(SRC)) > 70


def test_every_top_level_package_is_in_exactly_one_layer() -> None:
    members = [m for layer in LAYERS for m in layer]
    assert len(members) == len(set(members))
    tops = {top_package(m) for m in module_names(SRC)}
    assert tops == set(members)


def test_no_upward_import() -> None:
    assert upward_imports(IMPORTS, LAYERS) == []


def test_no_import_cycle() -> None:
    assert import_cycles(IMPORTS) == []


def test_no_private_name_crosses_a_package() -> None:
    crossings = private_crossings(IMPORTS)
    assert sorted(set(crossings) - _PENDING) == []
    # The pending list is exact: an entry that no longer occurs must be deleted.
    assert sorted(_PENDING - set(crossings)) == []


def test_analytics_sub_layers() -> None:
    parts = {analytics_part(m) for m in module_names(SRC)} - {None}
    assert parts == {m for layer in ANALYTICS_LAYERS for m in layer}
    assert analytics_violations(IMPORTS) == []


def test_no_analytics_cycle_even_through_lazy_imports() -> None:
    # Rule (b) ignores lazy and type-only imports; inside analytics none may close a cycle.
    inside = [
        Import(i.importer, i.target, i.name, "module", i.line)
        for i in IMPORTS
        if analytics_part(i.importer) is not None and analytics_part(i.target) is not None
    ]
    assert import_cycles(inside) == []


def test_mechanisms_and_local_dp_do_not_import_accounting() -> None:
    for imp in IMPORTS:
        if top_package(imp.importer) in ("dpkit.mechanisms", "dpkit.ldp"):
            assert top_package(imp.target) != "dpkit.accounting", imp


def test_the_event_vocabulary_has_one_address() -> None:
    # dpkit.events is the only home of the events; the 0.1.0 alias dpkit.accounting.events is
    # gone, and dpkit.accounting re-exports only the relation it needs in signatures.
    import importlib.util

    import dpkit.accounting
    import dpkit.events as new

    assert importlib.util.find_spec("dpkit.accounting.events") is None
    assert not hasattr(dpkit.accounting, "events")
    assert not hasattr(dpkit.accounting, "Accountant")
    assert dpkit.accounting.Neighbouring is new.Neighbouring
    assert new.LaplaceEvent.__module__ == "dpkit.events"


# --- the checker catches broken trees --------------------------------------------------------


def _tree(tmp_path: pathlib.Path, files: dict[str, str]) -> list[Import]:
    root = tmp_path / "pkg"
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for directory in [root, *[p for p in root.rglob("*") if p.is_dir()]]:
        (directory / "__init__.py").touch()
    return scan(root)


_TOY_LAYERS = (frozenset({"pkg.low"}), frozenset({"pkg.high"}))


def test_checker_catches_an_upward_import(tmp_path: pathlib.Path) -> None:
    imports = _tree(
        tmp_path,
        {
            "low/a.py": "def f():\n    from pkg.high.b import g\n",  # lazy, still upward
            "high/b.py": "from pkg.low.a import f\n\ndef g():\n    pass\n",
        },
    )
    bad = upward_imports(imports, _TOY_LAYERS)
    assert len(bad) == 1 and "pkg.low.a:2 (function) imports pkg.high.b" in bad[0]
    # Same-layer peers are independent too, and an unlisted package is refused.
    assert upward_imports(imports, (frozenset({"pkg.low", "pkg.high"}),)) != []
    assert upward_imports(imports, (frozenset({"pkg.low"}),)) != []


def test_checker_catches_a_type_only_upward_import(tmp_path: pathlib.Path) -> None:
    imports = _tree(
        tmp_path,
        {
            "low/a.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg.high import b\n",
            "high/b.py": "",
        },
    )
    assert [i.kind for i in imports] == ["type"]
    assert len(upward_imports(imports, _TOY_LAYERS)) == 1
    assert import_cycles(imports) == []


def test_checker_catches_a_cycle(tmp_path: pathlib.Path) -> None:
    imports = _tree(
        tmp_path,
        {
            "low/a.py": "from pkg.low import b\n",
            "low/b.py": "try:\n    from .c import x\nexcept ImportError:\n    pass\n",
            "low/c.py": "import pkg.low.a\nx = 1\n",
            "low/d.py": "def f():\n    from pkg.low.a import b\n",  # lazy: not an edge
        },
    )
    assert import_cycles(imports) == [["pkg.low.a", "pkg.low.b", "pkg.low.c"]]
    assert upward_imports(imports, _TOY_LAYERS) == []
    # The same imports made lazily form no import-time cycle.
    lazy = [Import(i.importer, i.target, i.name, "function", i.line) for i in imports]
    assert import_cycles(lazy) == []


def test_checker_catches_a_self_import_and_package_init_cycle(tmp_path: pathlib.Path) -> None:
    imports = _tree(
        tmp_path,
        {
            "low/__init__.py": "from pkg.low.a import f\n",
            "low/a.py": "from pkg.low import g\n\ndef f():\n    pass\n",  # the package's own name
        },
    )
    assert import_cycles(imports) == [["pkg.low", "pkg.low.a"]]


def test_checker_catches_private_crossings(tmp_path: pathlib.Path) -> None:
    imports = _tree(
        tmp_path,
        {
            "low/_impl.py": "def helper():\n    pass\n\ndef _hidden():\n    pass\n",
            "low/pub.py": "from ._impl import _hidden\n\ndef _mine():\n    pass\n",  # same package
            "high/a.py": "from pkg.low._impl import helper\n",  # private module
            "high/b.py": "from pkg.low.pub import _mine\n",  # private name
            "high/c.py": "import pkg.low._impl\n",
            "high/d.py": "from pkg.low import pub, __name__\n",  # public module, dunder: fine
        },
    )
    assert sorted(private_crossings(imports)) == [
        ("pkg.high.a", "pkg.low._impl", "helper"),
        ("pkg.high.b", "pkg.low.pub", "_mine"),
        ("pkg.high.c", "pkg.low._impl", ""),
    ]


def test_checker_catches_the_builder_session_cycle(tmp_path: pathlib.Path) -> None:
    # The shape the analytics package had: the session imports the builder at import time,
    # the builder names the session for its annotations only, and the session reaches the SQL
    # front end lazily, which reaches the session lazily. Rule (b) sees no cycle in it.
    imports = _tree(
        tmp_path,
        {
            "analytics/builder.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
            "    from pkg.analytics.session import Session\n",
            "analytics/session.py": "from pkg.analytics.builder import Query\n"
            "def sql():\n    from pkg.analytics.sqlquery import q\n",
            "analytics/sqlquery/__init__.py": "def q():\n"
            "    from pkg.analytics.session import Session\n",
            "analytics/engines/duckdb.py": "from pkg.analytics._plan import Plan\n"
            "from pkg.analytics._pricing import price\n",
            "analytics/_plan.py": "",
            "analytics/_pricing.py": "",
        },
    )
    assert import_cycles(imports) == []  # what the package-level rule saw
    toy = [
        Import(
            i.importer.replace("pkg.", "dpkit.", 1),
            i.target.replace("pkg.", "dpkit.", 1),
            i.name,
            i.kind,
            i.line,
        )
        for i in imports
    ]
    bad = analytics_violations(toy)
    assert any("builder" in b and "imports dpkit.analytics.session" in b for b in bad)
    assert any("sqlquery" in b and "imports dpkit.analytics.session" in b for b in bad)
    assert any("engines.duckdb" in b and "_pricing" in b for b in bad)
    assert len(bad) == 3
    everything = [Import(i.importer, i.target, i.name, "module", i.line) for i in toy]
    assert import_cycles(everything) != []


def test_layer_table_matches_the_architecture_document() -> None:
    # docs/architecture.md draws the same table, one line per layer, top first: ``Ln:``, the
    # members separated by single spaces, then two or more spaces and a description.
    doc = (SRC.parents[1] / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = doc.index("<!-- layers -->")
    block = doc[start : doc.index("<!-- /layers -->")]
    rows = [line for line in block.splitlines() if line.startswith("L")]
    drawn = [
        frozenset(
            "dpkit" if n == "dpkit" else f"dpkit.{n}"
            for n in re.split(r"\s{2,}", row.split(":", 1)[1].strip())[0].split()
        )
        for row in reversed(rows)
    ]
    assert drawn == list(LAYERS)


def test_dynamic_imports_obey_the_layers() -> None:
    import dpkit
    import dpkit.cli

    level = layer_of(LAYERS)
    targets = {*dpkit._LAZY_NAMES.values(), *(f"dpkit.{n}" for n in dpkit._SUBMODULES)}
    assert targets and all(level[top_package(t)] < level["dpkit"] for t in targets)
    for module, _, _ in dpkit.cli._SUBCOMMANDS.values():
        assert (SRC / "cli" / f"{module}.py").is_file(), module


def test_lazy_accounting_names_are_defined_by_their_modules() -> None:
    # dpkit.accounting loads its heavier modules through a table (PEP 562), invisible to the
    # scan: each target is a module of the package itself and defines the name it serves.
    import importlib

    import dpkit.accounting

    lazy = dpkit.accounting._LAZY_NAMES
    assert lazy and set(lazy) <= set(dpkit.accounting.__all__)
    for name, module in lazy.items():
        assert top_package(module) == "dpkit.accounting" and module in module_names(SRC), module
        assert getattr(importlib.import_module(module), name) is getattr(dpkit.accounting, name)
