"""Shared pieces of the SQL attack reproducers: the neighbouring-tables audit harness of the
tests (``tests/support/_proof.py``; run with ``tests/support`` on PYTHONPATH, see README.md)."""

from __future__ import annotations

from _proof import AUDIT_CONFIDENCE as CONFIDENCE
from _proof import audit_pair, sensitivity_usage

__all__ = ["CONFIDENCE", "audit_pair", "sensitivity_usage"]
