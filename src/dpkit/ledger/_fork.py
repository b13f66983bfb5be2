"""What the durable stores do around ``fork`` (shared by SQLite and PostgreSQL).

A connection belongs to the process that opened it. A child made by ``fork`` copies the
parent's connection objects, but the socket (PostgreSQL) or the SQLite library's per-process
lock bookkeeping (SQLite) behind them is still the parent's: using the copy interleaves two
processes on one server session, or writes into a WAL file that the parent may already have
checkpointed and deleted. Closing the copy is no better (psycopg would send the server the
session's Terminate message; SQLite could checkpoint from a stale index). So each store records
the process id with its connection and, in another process, sets the copy aside, never used and
never closed (:func:`abandon`), and opens a connection of its own.

Around ``os.fork`` itself (``os.register_at_fork``) every live store is told
(:meth:`_ForkAware._before_fork` in the parent, then ``_after_fork_parent`` /
``_after_fork_child``): the SQLite store closes its connection before the fork, so that the
child inherits none of SQLite's in-process state for the file, and every store gives the child
fresh locks (a lock held by another thread at the fork would never be released there).
"""

from __future__ import annotations

import os
import weakref
from typing import Any, Protocol

__all__ = ["abandon", "close_owned", "track"]


class _ForkAware(Protocol):
    def _before_fork(self) -> None: ...

    def _after_fork_parent(self) -> None: ...

    def _after_fork_child(self) -> None: ...


_LIVE: weakref.WeakSet[_ForkAware] = weakref.WeakSet()

#: Connections copied into this process by ``fork``: kept referenced so that they are never
#: closed (or finalised) here while the process runs.
_INHERITED: list[object] = []


def track(store: _ForkAware) -> None:
    """Tell ``store`` about every later ``fork`` of this process."""
    _LIVE.add(store)


def abandon(connection: object) -> None:
    """Set aside a connection this process inherited by ``fork``: never used, never closed."""
    _INHERITED.append(connection)


def close_owned(connection: Any, owner_pid: int) -> None:
    """Close ``connection`` if this process opened it (``owner_pid``); otherwise it was
    inherited by ``fork`` and is set aside unclosed (closing it could end the parent's
    session on a shared socket)."""
    if owner_pid != os.getpid():
        abandon(connection)
    else:
        connection.close()


def _before() -> None:
    for store in list(_LIVE):
        store._before_fork()


def _after_parent() -> None:
    for store in list(_LIVE):
        store._after_fork_parent()


def _after_child() -> None:
    for store in list(_LIVE):
        store._after_fork_child()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(before=_before, after_in_parent=_after_parent, after_in_child=_after_child)
