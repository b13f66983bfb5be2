"""Run a piece of a test in a forked child process (POSIX only)."""

from __future__ import annotations

import os
from collections.abc import Callable


def in_child(body: Callable[[], object]) -> int:
    """Run ``body()`` in a forked child and return the byte it reports: ``int(body())`` (0 to
    255), or 255 when it raised. The child leaves with ``os._exit``, so no test machinery of
    the parent (fixtures, atexit handlers, open stores) runs twice."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        code = 255
        try:
            os.close(read)
            code = int(body())  # type: ignore[call-overload]
        finally:
            os.write(write, bytes([code]))
            os._exit(0)
    os.close(write)
    data = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    return data[0]


def start_child(body: Callable[[int], object]) -> tuple[int, int]:
    """Start ``body(fd)`` in a forked child that reports through the pipe ``fd`` and may be
    killed at any moment; returns ``(pid, read end of the pipe)``. The read end gives EOF once
    the child is gone. The child leaves with ``os._exit`` (see :func:`in_child`)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            os.close(read)
            body(write)
        finally:
            os._exit(0)
    os.close(write)
    return pid, read
