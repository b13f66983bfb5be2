"""Shared pieces of the SQL attack reproducers: the audit harness of ``test_sql_audit``."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "analytics" / "sql"))
sys.path.insert(0, str(ROOT / "tests" / "analytics"))

from test_sql_audit import CONFIDENCE, audit_pair, sensitivity_usage  # noqa: E402

__all__ = ["CONFIDENCE", "audit_pair", "sensitivity_usage"]
