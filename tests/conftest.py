"""Session fixtures shared by several test packages.

``postgres_dsn``: a real PostgreSQL server (Debian's ``postgresql`` package, installed by
``make test`` when missing) started once per session in a temporary directory and stopped at
the end, also when tests fail. ``initdb`` refuses to run as root, so as root the server runs as
the ``postgres`` user (through ``setpriv``).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator

import pytest


def _pg_bin() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]))
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


@pytest.fixture(scope="session")
def postgres_dsn() -> Iterator[str]:
    """A DSN for the ``postgres`` database of a fresh server (user ``postgres``, trust auth,
    unix socket in a temporary directory and TCP on 127.0.0.1)."""
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
        prefix = ["setpriv", f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups",
                  "--reset-env"]
    port = _free_port()
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}
    subprocess.run([*prefix, f"{bindir}/initdb", "-D", data, "-U", "postgres", "-A", "trust",
                    "-E", "UTF8", "--no-sync"], check=True, capture_output=True, env=env)
    options = (f"-p {port} -k {sock} -c listen_addresses=127.0.0.1 -c max_connections=60 "
               "-c shared_buffers=16MB")
    try:
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-l", log, "-o", options,
                        "-w", "-t", "60", "start"], check=True, capture_output=True, env=env)
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*prefix, f"{bindir}/pg_ctl", "-D", data, "-m", "fast", "-w", "stop"],
                       capture_output=True, env=env)
        shutil.rmtree(base, ignore_errors=True)
