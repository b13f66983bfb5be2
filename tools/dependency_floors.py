"""Print the oldest versions the project declares for its runtime dependencies, one
``name==version`` a line (a pip constraints file), from ``pyproject.toml``.

Each ``name>=X`` of ``[project] dependencies`` gives ``name==X``; a dependency with no lower
bound is an error (the floor is what ``make test-oldest`` tests). Extras' own pins are left to
pip. Run from the repository root: ``python tools/dependency_floors.py > floors.txt``.
"""

from __future__ import annotations

import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9_.-]+)(\[[^\]]*\])?\s*(.*)$")


def dependencies(text: str) -> list[str]:
    """The strings of ``[project] dependencies`` (tomllib where there is one)."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the array is read by pattern
        block = re.search(r"(?ms)^\[project\].*?^dependencies\s*=\s*\[(.*?)\]", text)
        return re.findall(r'"([^"]+)"', block.group(1)) if block else []
    return list(tomllib.loads(text)["project"]["dependencies"])


def floors(requirements: list[str]) -> list[str]:
    out = []
    for req in requirements:
        m = REQUIREMENT.match(req.split(";")[0])
        if m is None:
            raise SystemExit(f"cannot read the requirement {req!r}")
        name, spec = m.group(1), m.group(3)
        low = re.search(r">=\s*([0-9][A-Za-z0-9.]*)", spec)
        if low is None:
            raise SystemExit(f"{name} has no lower bound (>=): declare the oldest version tested")
        out.append(f"{name}=={low.group(1)}")
    return out


def main() -> int:
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    print("\n".join(floors(dependencies(text))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
