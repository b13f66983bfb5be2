"""Helpers of the service tests: a table, a server on a loopback port, a client."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd

#: One client for one-off requests. ``verify=False``: the tests speak plain HTTP on loopback,
#: and building a verifying TLS context (reading the CA bundle) costs a third of a second per
#: client on a loaded machine.
HTTP = httpx.Client(verify=False, timeout=30)


def client(base: str, token: str | None = None) -> httpx.Client:
    """A client of ``base`` (with ``token`` as bearer)."""
    return httpx.Client(
        base_url=base, verify=False, timeout=30, headers=bearer(token) if token else {}
    )


COUNT_QUERY: dict[str, Any] = {
    "builder": {
        "bound": {"max_partitions": 1, "max_rows_per_partition": 2},
        "agg": {"n": {"kind": "count"}},
    },
    "epsilon": 0.01,
    "delta": 1e-9,
}


def write_people(path: Path, rows: int = 2000, seed: int = 7) -> Path:
    """A small table: user_id (privacy unit), region, age, income."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame(
        {
            "user_id": rng.integers(0, rows // 4, rows),
            "region": rng.choice(["north", "south", "east", "west"], rows),
            "age": rng.integers(18, 90, rows),
            "income": rng.uniform(0, 100_000, rows),
        }
    )
    frame.to_parquet(path, index=False)
    return path


def loopback_socket() -> socket.socket:
    """A listening TCP socket on 127.0.0.1 with a free port chosen by the kernel."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    return sock


def wait_healthy(base: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if HTTP.get(base + "/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"service at {base} did not come up")
        time.sleep(0.05)


@contextlib.contextmanager
def serve_in_thread(app: Any) -> Iterator[str]:
    """Run ``app`` under uvicorn in a thread on a free loopback port; yield its base URL."""
    import uvicorn

    sock = loopback_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(base)
        yield base
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def hammer(
    base: str,
    token: str,
    query: dict[str, Any],
    stop: threading.Event,
    answered: list[str],
    codes: list[int],
    max_queries: int = 10**9,
) -> None:
    """Post ``query`` with ``token`` until ``stop``, a 403 (budget spent), ``max_queries`` or
    the service dies; appends each status to ``codes`` and each answered query id to
    ``answered``."""
    with client(base, token) as c:
        for _ in range(max_queries):
            if stop.is_set():
                return
            try:
                r = c.post("/v1/query", json=query)
            except httpx.HTTPError:
                return  # the service died
            codes.append(r.status_code)
            if r.status_code == 200:
                answered.append(r.json()["query_id"])
            elif r.status_code == 403:
                return  # budget spent
