"""Privacy accounting: events (what was released) and accountants (what it cost)."""

from dpkit.accounting import events
from dpkit.accounting.events import Neighbouring

__all__ = ["Neighbouring", "events"]
