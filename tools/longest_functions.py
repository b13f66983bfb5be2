"""List the longest functions and the longest modules under a source folder.

Usage: ``python tools/longest_functions.py [FOLDER] [--most N]`` (default ``src/dpkit``, 10 rows).

A function's length is the number of lines from its ``def`` (decorators excluded) to its last
line, docstring and comments included; nested functions are counted inside their parent and
also listed on their own. Reads the files with :mod:`ast`; runs nothing.
"""

from __future__ import annotations

import argparse
import ast
import pathlib


def functions(path: pathlib.Path, root: pathlib.Path) -> list[tuple[int, str]]:
    """``(lines, "file:line qualified.name")`` for every function and method in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                name = f"{prefix}{child.name}"
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                found.append((length, f"{path.relative_to(root)}:{child.lineno} {name}"))
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")
            else:
                visit(child, prefix)

    visit(tree, "")
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", default="src/dpkit")
    parser.add_argument("--most", type=int, default=10)
    args = parser.parse_args()
    root = pathlib.Path(args.folder)
    files = sorted(root.rglob("*.py"))
    rows = [row for f in files for row in functions(f, root)]
    rows.sort(key=lambda r: (-r[0], r[1]))
    print(f"longest functions under {root} ({len(rows)} functions):")
    for length, where in rows[: args.most]:
        print(f"{length:6d}  {where}")
    sizes = sorted(
        ((len(f.read_text(encoding="utf-8").splitlines()), f) for f in files),
        key=lambda r: (-r[0], str(r[1])),
    )
    print(f"longest modules under {root}:")
    for n, f in sizes[: args.most]:
        print(f"{n:6d}  {f.relative_to(root)}")


if __name__ == "__main__":
    main()
