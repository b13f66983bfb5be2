#!/usr/bin/env bash
# The oldest dependency versions the project declares, tested: a separate virtual environment
# with every runtime dependency at its floor (tools/dependency_floors.py turns each `>=X` of
# pyproject.toml into `==X`, used as pip constraints, binary wheels only), the test extra on
# top (less pyspark: its Spark Connect client needs pandas>=2.2 and pyarrow>=18, above the core
# floors), then the inner-loop suite (`make test-fast`'s selection, Spark tests left out).
# Usage: .ci/oldest-deps.sh [VENV]   (default .venv-oldest; PY selects the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-python3}
VENV=${1:-.venv-oldest}
FLOORS="$VENV/floors.txt"
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$PY" tools/dependency_floors.py > "$FLOORS"
echo "floors:"; sed 's/^/  /' "$FLOORS"
# The floors themselves as wheels (a floor with no wheel for this Python is a floor to raise).
"$VENV/bin/pip" install -q --only-binary=:all: -r "$FLOORS"
"$PY" tools/dependency_floors.py --extra test --skip pyspark > "$VENV/test-extra.txt"
"$VENV/bin/pip" install -q -c "$FLOORS" -e . -r "$VENV/test-extra.txt"
"$VENV/bin/python" - "$FLOORS" <<'PY'
import sys
from importlib.metadata import version
bad = []
for line in open(sys.argv[1]):
    name, want = line.strip().split("==")
    got = version(name)
    if got.split(".")[: len(want.split("."))] != want.split("."):
        bad.append(f"{name}: {got} installed, floor {want}")
if bad:
    sys.exit("not at the floor: " + "; ".join(bad))
print("every runtime dependency is at its floor")
PY
# XDIST: the Makefile's pytest-xdist options (two workers); empty runs serially.
# shellcheck disable=SC2086
"$VENV/bin/pytest" ${XDIST--n 2 --dist loadgroup} \
    -m "not slow and not spark and not postgres and not browser" \
    --ignore=tests/analytics/spark -p no:cacheprovider
