"""The event vocabulary, under its former address.

The events live in :mod:`dpkit.events`, at the bottom of the package's layers (mechanisms and
local DP describe their releases without importing accounting). This module re-exports the very
same objects (``dpkit.accounting.events.LaplaceEvent is dpkit.events.LaplaceEvent``), so code and
stored references that name ``dpkit.accounting.events`` keep working.
"""

from __future__ import annotations

from dpkit import events as _events
from dpkit.events import *  # noqa: F403  (the same objects under the former address)

__all__ = list(_events.__all__)
