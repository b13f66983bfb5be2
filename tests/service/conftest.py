"""Fixtures of the service tests: one table, one in-thread server per module, a browser."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from service_fixtures import Running, start_service
from service_harness import serve_in_thread, write_people


@pytest.fixture(scope="session")
def people(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_people(tmp_path_factory.mktemp("data") / "people.parquet")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, people: Path) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("service")
    app, url, tokens = start_service(tmp, people, analysts={"alice": 1.0, "bob": 0.5})
    with serve_in_thread(app) as base:
        yield Running(base=base, ledger_url=url, tokens=tokens, app=app)
