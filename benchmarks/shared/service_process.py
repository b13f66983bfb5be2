"""A service process for the fault and load tests, started through a multiprocessing
forkserver that has imported the heavy modules once (so a restart costs a fork, not imports).
"""

from __future__ import annotations

import multiprocessing
import resource
import signal
from typing import Any

# "pytest": a forkserver child re-imports the parent's __main__ (pytest's, under the test
# runner), which costs a second and a half unless the forkserver has imported it already.
PRELOAD = [__name__, "pytest"]


def _harness() -> Any:
    """The sibling module ``service_harness``: top-level for the tests, ``shared.service_harness``
    for the benchmarks (this module is ``service_process`` or ``shared.service_process``)."""
    import importlib

    return importlib.import_module(
        f"{__package__}.service_harness" if __package__ else "service_harness"
    )


def _warm() -> None:
    """Import, in the forkserver, what a service process would import lazily: the app, the
    HTTP protocol, and the analytics layer down to the SQL compiler (no DuckDB connection is
    opened here, so no engine thread exists when the server forks)."""
    import pandas as pd
    import pyarrow.parquet  # noqa: F401
    import uvicorn
    import uvicorn.lifespan.off
    import uvicorn.loops.asyncio
    import uvicorn.protocols.http.h11_impl
    import uvicorn.protocols.websockets.wsproto_impl  # noqa: F401

    import dpkit.analytics as dpa
    import dpkit.service.app  # noqa: F401
    from dpkit.accounting import Budget
    from dpkit.analytics.engines._compiler import compile_plan
    from dpkit.analytics.engines.duckdb import DUCKDB  # type: ignore[attr-defined]

    class _SchemaOnly:  # the engine interface, enough to price and compile (never runs)
        def columns(self, source: Any) -> dict[str, str]:
            return {"u": "BIGINT", "x": "DOUBLE"}

        def register(self, name: str, frame: Any) -> None:
            pass

        def execute(self, plan: Any) -> Any:
            raise AssertionError("not run in the forkserver")

    session = dpa.Session(
        pd.DataFrame({"u": [1], "x": [1.0]}),
        privacy_unit="u",
        budget=Budget(epsilon=1.0, delta=1e-6),
        engine=_SchemaOnly(),
    )
    q = (
        session.query()
        .bound(max_partitions=1, max_rows_per_partition=2)
        .agg(n=dpa.count(), m=dpa.mean("x", bounds=(0, 1)))
    )
    q.summarize(epsilon=0.1, delta=1e-9)
    compile_plan(q.prepare(epsilon=0.1, delta=1e-9).plan, {"u": "BIGINT", "x": "DOUBLE"}, DUCKDB)


_warm()


def serve(config: dict[str, Any], conn: Any, fsize: int | None = None) -> None:
    """Build the app, listen on a free loopback port, send the port to ``conn``, serve."""
    import uvicorn

    loopback_socket = _harness().loopback_socket

    from dpkit.service.app import ServiceConfig, create_app

    if fsize is not None:
        # A real write limit: the kernel refuses to grow any file of this process past
        # ``fsize`` bytes (EFBIG), as a full disk refuses to grow it (SIGXFSZ ignored).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    app = create_app(ServiceConfig(**config))
    sock = loopback_socket()
    conn.send(sock.getsockname()[1])
    uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off")).run(sockets=[sock])


_CTX: Any = None


def context() -> Any:
    global _CTX
    if _CTX is None:
        _CTX = multiprocessing.get_context("forkserver")
        _CTX.set_forkserver_preload(PRELOAD)
    return _CTX


def start(
    config: dict[str, Any], fsize: int | None = None, timeout: float = 60.0, wait: bool = True
) -> tuple[Any, str]:
    """Start a service process; return it and its base URL once it answers /healthz (with
    ``wait=False`` as soon as its socket listens: requests queue in the kernel's backlog)."""
    wait_healthy = _harness().wait_healthy

    ctx = context()
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(config, child, fsize), daemon=True)
    proc.start()
    if not parent.poll(timeout):
        proc.kill()
        raise RuntimeError("service process did not start")
    port = parent.recv()
    base = f"http://127.0.0.1:{port}"
    if wait:
        wait_healthy(base, timeout)
    return proc, base


def stop(proc: Any) -> None:
    if proc.is_alive():
        proc.kill()
    proc.join(timeout=10)
