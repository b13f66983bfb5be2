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
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

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


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        for name in sorted(_needs(item)):
            item.add_marker(name)
