"""What a query may know of the private table: its source, its columns and their types, and
who is protected. Read from the schema alone (no row), and public: the builder and the SQL
front end validate against it, never against a session's internals.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dpkit.analytics._plan import Source, did_you_mean
from dpkit.errors import PrivacyParameterError

__all__ = ["TableDescription", "protects"]


def protects(privacy_unit: str | None) -> str:
    """What a session's releases protect, in words (shown in results and summaries)."""
    if privacy_unit is None:
        return "each row (privacy_unit=None: every row is taken to be a different person)"
    return f"each person: all rows with the same {privacy_unit!r}"


@dataclass(frozen=True)
class TableDescription:
    """The private table as a query sees it.

    ``columns``: the column names in source order; ``types``: column -> the engine's type name
    (``"DATE"``, ``"BIGINT"``, ...; a column the engine gives no type for is absent);
    ``privacy_unit``: the column identifying a person, or None (each row is a person).
    """

    source: Source
    columns: tuple[str, ...]
    types: Mapping[str, str] = field(default_factory=dict)
    privacy_unit: str | None = None

    def check_column(self, column: str, what: str) -> None:
        """Refuse (:class:`PrivacyParameterError`, with the closest name) a column the table
        does not have; ``what`` names its role in the message (``"group-by column"``)."""
        if column not in self.columns:
            raise PrivacyParameterError(
                f"unknown {what} {column!r}{did_you_mean(column, self.columns)}; the source "
                f"has columns {list(self.columns)}"
            )

    def column_type(self, column: str) -> str | None:
        """The engine's type name of ``column``, or None when unknown or untyped."""
        return self.types.get(column)

    @property
    def protects(self) -> str:
        """What releases over this table protect, in words."""
        return protects(self.privacy_unit)
