"""Print the oldest versions the project declares for its runtime dependencies, one
``name==version`` a line (a pip constraints file), from ``pyproject.toml``.

Each ``name>=X`` of ``[project] dependencies`` gives ``name==X``; a dependency with no lower
bound is an error (the floor is what ``make test-oldest`` tests). Extras' own pins are left to
pip. Run from the repository root: ``python tools/dependency_floors.py > floors.txt``.

``--extra NAME --skip PKG ...`` prints instead the requirements of an extra, less the named
packages (one a line, a pip requirements file): the oldest-versions job installs the test
extra without pyspark, whose Spark Connect client needs newer pandas and pyarrow than the core
floors (the Spark tests are not part of that job).
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


def extra(text: str, name: str) -> list[str]:
    """The requirement strings of the optional dependency group ``name`` (Python 3.11+)."""
    import tomllib

    return list(tomllib.loads(text)["project"]["optional-dependencies"][name])


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", help="print this extra's requirements instead of the floors")
    parser.add_argument("--skip", nargs="*", default=[], help="packages left out of --extra")
    args = parser.parse_args(argv)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    if args.extra:
        skip = {s.lower() for s in args.skip}
        reqs = [
            r
            for r in extra(text, args.extra)
            if (m := REQUIREMENT.match(r)) is None or m.group(1).lower() not in skip
        ]
        print("\n".join(reqs))
    else:
        print("\n".join(floors(dependencies(text))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
