"""A service process for the fault and load tests, started through a multiprocessing
forkserver that has imported the heavy modules once (so a restart costs a fork, not imports).
"""

from __future__ import annotations

import multiprocessing
import resource
import signal
from typing import Any

PRELOAD = ["dpkit.service.app", "dpkit.analytics.engines.duckdb", "pandas", "pyarrow.parquet",
           "uvicorn", "_child"]


def serve(config: dict[str, Any], conn: Any, fsize: int | None = None) -> None:
    """Build the app, listen on a free loopback port, send the port to ``conn``, serve."""
    import uvicorn

    from _support import loopback_socket
    from dpkit.service.app import ServiceConfig, create_app

    if fsize is not None:
        # A real write limit: the kernel refuses to grow any file of this process past
        # ``fsize`` bytes (EFBIG), as a full disk refuses to grow it (SIGXFSZ ignored).
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    app = create_app(ServiceConfig(**config))
    sock = loopback_socket()
    conn.send(sock.getsockname()[1])
    uvicorn.Server(uvicorn.Config(app, log_level="critical", lifespan="off")).run(
        sockets=[sock])


_CTX: Any = None


def context() -> Any:
    global _CTX
    if _CTX is None:
        _CTX = multiprocessing.get_context("forkserver")
        _CTX.set_forkserver_preload(PRELOAD)
    return _CTX


def start(config: dict[str, Any], fsize: int | None = None, timeout: float = 60.0
          ) -> tuple[Any, str]:
    """Start a service process; return it and its base URL once it answers /healthz."""
    from _support import wait_healthy

    ctx = context()
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=serve, args=(config, child, fsize), daemon=True)
    proc.start()
    if not parent.poll(timeout):
        proc.kill()
        raise RuntimeError("service process did not start")
    port = parent.recv()
    base = f"http://127.0.0.1:{port}"
    wait_healthy(base, timeout)
    return proc, base


def stop(proc: Any) -> None:
    if proc.is_alive():
        proc.kill()
    proc.join(timeout=10)
