"""The curator service under test: a running app with its ledger URL and analysts' tokens
(:class:`Running`), and :func:`start_service`, which builds one over a table."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


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


def start_service(
    tmp: Path, people: Path, *, analysts: dict[str, float], **config: Any
) -> tuple[Any, str, dict[str, str]]:
    from dpkit.service._state import ServiceState
    from dpkit.service.app import ServiceConfig, create_app

    url = f"sqlite:///{tmp / 'budget.db'}"
    st = ServiceState(url)
    tokens = {
        name: st.add_token(name, role="analyst", epsilon=eps, delta=1e-7)
        for name, eps in analysts.items()
    }
    tokens["curator"] = st.add_token("curator", role="curator")
    st.close()
    defaults: dict[str, Any] = {
        "budget_epsilon": 3.0,
        "budget_delta": 1e-6,
        "privacy_unit": "user_id",
        "rate": 1000.0,
        "burst": 1000,
    }
    defaults.update(config)
    app = create_app(ServiceConfig(data=str(people), ledger_url=url, **defaults))
    return app, url, tokens
