"""Session fixtures shared by several test packages.

``postgres_dsn``: a real PostgreSQL server (see :mod:`pgserver`) started once per session, on
first use, and stopped at the end of the session, also when tests fail.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pgserver import temporary_postgres


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN for the ``postgres`` database of a fresh server (user ``postgres``, trust auth)."""
    with temporary_postgres() as dsn:
        yield dsn
