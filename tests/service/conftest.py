"""Fixtures of the service tests: one table, one in-thread server per module, a browser."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from _support import serve_in_thread, write_people


@pytest.fixture(scope="session")
def people(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_people(tmp_path_factory.mktemp("data") / "people.parquet")


@dataclass
class Running:
    base: str
    ledger_url: str
    tokens: dict[str, str]
    app: Any

    def history(self) -> list[Any]:
        cur = self.app.state.curator
        cur.total.refresh()
        return list(cur.total.history())

    def spent_by(self, analyst: str) -> float:
        """Epsilon charged to ``analyst``: the steps of the total's spent at their records."""
        out, prev = 0.0, 0.0
        for h in self.history():
            if h.analyst == analyst:
                out += h.spent_after[0] - prev
            prev = h.spent_after[0]
        return out


def start_service(tmp: Path, people: Path, *, analysts: dict[str, float],
                  **config: Any) -> tuple[Any, str, dict[str, str]]:
    from dpkit.service._state import ServiceState
    from dpkit.service.app import ServiceConfig, create_app

    url = f"sqlite:///{tmp / 'budget.db'}"
    st = ServiceState(url)
    tokens = {name: st.add_token(name, role="analyst", epsilon=eps, delta=1e-7)
              for name, eps in analysts.items()}
    tokens["curator"] = st.add_token("curator", role="curator")
    st.close()
    defaults: dict[str, Any] = {"budget_epsilon": 3.0, "budget_delta": 1e-6,
                                "privacy_unit": "user_id", "rate": 1000.0, "burst": 1000}
    defaults.update(config)
    app = create_app(ServiceConfig(data=str(people), ledger_url=url, **defaults))
    return app, url, tokens


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, people: Path) -> Iterator[Running]:
    tmp = tmp_path_factory.mktemp("service")
    app, url, tokens = start_service(tmp, people, analysts={"alice": 1.0, "bob": 0.5})
    with serve_in_thread(app) as base:
        yield Running(base=base, ledger_url=url, tokens=tokens, app=app)
