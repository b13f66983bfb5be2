"""A throw-away PostgreSQL server for tests and benchmarks (Debian's ``postgresql`` package,
installed by ``make test`` when missing).

``initdb`` refuses to run as root, so as root the server runs as the ``postgres`` user (through
``setpriv``). The data directory and the unix socket live in a fresh temporary directory; the
server also listens on a free TCP port of 127.0.0.1 and is stopped and deleted on exit, also
when the body raises.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

__all__ = ["temporary_postgres"]


def _pg_bin() -> str:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4])
    )
    if found:
        return os.path.dirname(found[-1])
    initdb = shutil.which("initdb")
    if initdb is None:
        raise RuntimeError("PostgreSQL is not installed: run .ci/system-deps.sh (make test)")
    return os.path.dirname(initdb)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def temporary_postgres(max_connections: int = 60) -> Iterator[str]:
    """Start a fresh server; yield a DSN for its ``postgres`` database (user ``postgres``,
    trust authentication); stop it and delete its files on exit."""
    bindir = _pg_bin()
    base = tempfile.mkdtemp(prefix="dpkit-pg-")
    data, sock, log = (os.path.join(base, p) for p in ("data", "sock", "server.log"))
    os.mkdir(sock)
    prefix: list[str] = []
    if os.geteuid() == 0:
        import pwd

        pw = pwd.getpwnam("postgres")
        for path in (base, sock):
            os.chown(path, pw.pw_uid, pw.pw_gid)
        prefix = [
            "setpriv",
            f"--reuid={pw.pw_uid}",
            f"--regid={pw.pw_gid}",
            "--init-groups",
            "--reset-env",
        ]
    port = _free_port()
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    try:
        subprocess.run(
            [
                *prefix,
                f"{bindir}/initdb",
                "-D",
                data,
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        options = (
            f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 "
            f"-c max_connections={max_connections:d} -c shared_buffers=16MB"
        )
        subprocess.run(
            [
                *prefix,
                f"{bindir}/pg_ctl",
                "-D",
                data,
                "-l",
                log,
                "-o",
                options,
                "-w",
                "-t",
                "60",
                "start",
            ],
            check=True,
            capture_output=True,
            env=env,
        )
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        if os.path.exists(os.path.join(data, "postmaster.pid")):
            subprocess.run(
                [*prefix, f"{bindir}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"],
                capture_output=True,
                env=env,
            )
        shutil.rmtree(base, ignore_errors=True)
