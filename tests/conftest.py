"""Session fixtures shared by several test packages, and the markers that say what a test needs.

``postgres_dsn``: a real PostgreSQL server (see :mod:`pgserver`) started once per session, on
first use, and stopped at the end of the session, also when tests fail.

Markers (registered in ``pyproject.toml``) are added here from the fixtures a test uses, so a new
test is marked by using the fixture, with nothing to remember:

* ``spark``: starts a JVM (the Spark fixtures of ``tests/analytics/spark/conftest.py``, every
  test under ``tests/analytics/spark``, and the documentation site build, whose Spark tutorial
  runs classic Spark and Spark Connect);
* ``postgres``: a PostgreSQL server (``postgres_dsn``);
* ``browser``: a headless Chromium (the ``browser`` fixture of ``tests/service/test_page.py``).

``make test-fast`` deselects these three and ``slow``; ``make test`` runs everything.

Parallel runs (``make test`` runs ``pytest -n 2 --dist loadgroup``, pytest-xdist): a test with
one of these markers also gets the ``xdist_group`` of the same name (``spark`` first when it
needs several), so every Spark test runs on one worker, which alone starts the two JVMs, and
likewise for the PostgreSQL server and Chromium; the other tests spread over both workers. A
plain ``pytest`` still runs everything serially. Process-wide state a test may change without
restoring it (``mpmath.mp.dps``) is put back after each test, so no outcome depends on which
worker ran which test before.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import mpmath
import pytest
from hypothesis import settings
from pgserver import temporary_postgres

# Hypothesis's per-example deadline is a timing check, which no test here means to make: under
# the coverage tracer (``make coverage`` sets HYPOTHESIS_PROFILE=coverage) examples run several
# times slower and would fail it.
settings.register_profile("coverage", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

_SPARK_DIR = Path(__file__).resolve().parent / "analytics" / "spark"
_SPARK_FIXTURES = frozenset(
    {"spark", "classic_spark", "connect_spark", "connect_server", "_connect_boot"}
)


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN for the ``postgres`` database of a fresh server (user ``postgres``, trust auth)."""
    with temporary_postgres() as dsn:
        yield dsn


def _needs(item: pytest.Item) -> set[str]:
    """The markers of what ``item`` needs beyond Python (see the module docstring)."""
    names = set(getattr(item, "fixturenames", ()))
    path = Path(item.path)
    needs = set()
    if names & _SPARK_FIXTURES or _SPARK_DIR in path.parents:
        needs.add("spark")
    if path.name == "test_docs_site.py" and "site" in names:
        needs.update(("spark", "slow"))  # one strict build that runs every tutorial
    if "postgres_dsn" in names:
        needs.add("postgres")
    if "browser" in names:
        needs.add("browser")
    return needs


# One worker per resource under ``--dist loadgroup``, in this order of precedence.
_GROUPS = ("spark", "postgres", "browser")


def _name_group(item: pytest.Item, group: str) -> None:
    """Append ``@group`` to the node id, where the loadgroup scheduler reads it.

    pytest-xdist's worker hook does this by writing ``item._nodeid``, which pytest 9.2 no longer
    reads (its node ids are structured; pytest-xdist issue 1386), so the groups were silently
    ignored and both workers started Spark. This writes the structured id instead; with an
    older pytest (no ``_id``) pytest-xdist's own hook still works and this does nothing.
    """
    node_id = getattr(item, "_id", None)
    parse = getattr(type(node_id), "parse", None)
    if parse is None or item.nodeid.endswith(f"@{group}"):
        return
    item._id = parse(f"{item.nodeid}@{group}")  # type: ignore[attr-defined]


# First, so that pytest-xdist's own hook (which names the group in the node id) sees the marker.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    loadgroup = bool(getattr(config.option, "loadgroup", False))  # an xdist worker's option
    for item in items:
        needs = _needs(item)
        for name in sorted(needs):
            item.add_marker(name)
        group = next((g for g in _GROUPS if g in needs), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
            if loadgroup:
                _name_group(item, group)


@pytest.fixture(autouse=True)
def _restore_mpmath_precision() -> Iterator[None]:
    """Several test modules set ``mpmath.mp.dps`` when imported and some tests set it inside;
    each test starts from the precision left once every module is imported, whatever ran
    before it on its worker."""
    dps = _COLLECTED_DPS.get("dps", mpmath.mp.dps)
    mpmath.mp.dps = dps
    yield
    mpmath.mp.dps = dps


_COLLECTED_DPS: dict[str, int] = {}


def pytest_collection_finish(session: pytest.Session) -> None:
    _COLLECTED_DPS["dps"] = mpmath.mp.dps
