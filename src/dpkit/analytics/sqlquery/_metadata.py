"""Public metadata of a private SQL query: bounds, privacy unit, contribution limits, keys.

A metadata file (YAML or TOML) or a dict of the same shape::

    tables:
      people:                       # the private table (the one not marked public)
        privacy_unit: user_id       # null: each row is a different person (say which)
        max_partitions: 2           # groups kept per unit (default 1)
        max_rows_per_partition: 5   # rows kept per unit and group (default 1)
        columns:
          income: {lower: 0, upper: 500000}        # bounds for SUM/AVG/VAR/STDDEV/quantiles
          signup_date: {lower: 2024-01-01, upper: 2024-12-31}  # a DATE/TIMESTAMP column
          region: {keys: [north, south, east, west]}  # public group keys
      regions:
        public: true                # a public table: may be joined, never bounded
        path: regions.parquet       # where to read it (or give it as an argument)

Everything is validated when loaded (unknown fields, NaN or infinite bounds, lower >= upper,
non-integer limits), so a typo is an error, never a silent default. Nothing here reads data.
Bounds of a date or timestamp column are dates (YAML and TOML dates, ``datetime`` objects or
ISO strings, see :func:`dpkit.analytics._aggregates.parse_date_bound`); whether they fit the
column's type is decided when the query is priced, before anything is charged.
"""

from __future__ import annotations

import datetime
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import tomllib

from dpkit._numeric.validation import check_bounds, check_integer
from dpkit.analytics._aggregates import is_date_bound, parse_date_bound
from dpkit.errors import PrivacyParameterError

__all__ = ["ColumnInfo", "Metadata", "TableInfo", "load_metadata"]

_TABLE_FIELDS = {
    "public",
    "privacy_unit",
    "max_partitions",
    "max_rows_per_partition",
    "columns",
    "path",
}
_COLUMN_FIELDS = {"lower", "upper", "keys", "bounds"}


@dataclass(frozen=True)
class ColumnInfo:
    """Public facts about one column: value bounds and/or the list of its group keys."""

    lower: float | datetime.date | None = None
    upper: float | datetime.date | None = None
    keys: tuple[Any, ...] | None = None

    @property
    def bounds(self) -> tuple[float | datetime.date, float | datetime.date] | None:
        if self.lower is None or self.upper is None:
            return None
        return (self.lower, self.upper)


@dataclass(frozen=True)
class TableInfo:
    """One table of the metadata: private (bounded) or public (joinable as is)."""

    name: str
    public: bool = False
    privacy_unit: str | None = None
    privacy_unit_given: bool = False  # the entry was written (a column, or null: rows)
    max_partitions: int | None = None
    max_rows_per_partition: int | None = None
    columns: dict[str, ColumnInfo] = field(default_factory=dict)
    path: str | None = None


@dataclass(frozen=True)
class Metadata:
    """All tables' metadata (see the module doc)."""

    tables: dict[str, TableInfo] = field(default_factory=dict)

    def table(self, name: str) -> TableInfo | None:
        """The table called ``name`` (exact match first, then case-insensitive)."""
        if name in self.tables:
            return self.tables[name]
        folded = [t for n, t in self.tables.items() if n.casefold() == name.casefold()]
        return folded[0] if len(folded) == 1 else None

    @property
    def private_tables(self) -> list[TableInfo]:
        return [t for t in self.tables.values() if not t.public]

    def with_table(self, info: TableInfo) -> Metadata:
        return Metadata(tables={**self.tables, info.name: info})


def _err(where: str, msg: str) -> PrivacyParameterError:
    return PrivacyParameterError(f"metadata {where}: {msg}")


def _column(table: str, name: str, raw: Any) -> ColumnInfo:
    where = f"tables.{table}.columns.{name}"
    if not isinstance(raw, dict):
        raise _err(where, f"must be a mapping with lower/upper/keys, got {raw!r}")
    unknown = set(raw) - _COLUMN_FIELDS
    if unknown:
        raise _err(where, f"unknown fields {sorted(unknown)} (allowed: {sorted(_COLUMN_FIELDS)})")
    lower, upper = raw.get("lower"), raw.get("upper")
    if "bounds" in raw:
        b = raw["bounds"]
        if lower is not None or upper is not None:
            raise _err(where, "give bounds or lower/upper, not both")
        if not isinstance(b, (list, tuple)) or len(b) != 2:
            raise _err(where, f"bounds must be [lower, upper], got {b!r}")
        lower, upper = b
    lo: float | datetime.date | None = None
    hi: float | datetime.date | None = None
    if (lower is None) != (upper is None):
        raise _err(where, "give both lower and upper")
    if lower is not None and (is_date_bound(lower) or is_date_bound(upper)):
        lo = parse_date_bound(lower, f"{where} bounds")
        hi = parse_date_bound(upper, f"{where} bounds")
    elif lower is not None:
        for v in (lower, upper):
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise _err(
                    where,
                    f"bounds must be numbers (or dates for a date column), got "
                    f"{lower!r}, {upper!r}",
                )
        lo, hi = check_bounds(
            lower, upper, lower_name=f"{where}.lower", upper_name=f"{where}.upper"
        )
        if not lo < hi:
            raise _err(where, f"lower must be below upper, got {lower!r}, {upper!r}")
    keys = raw.get("keys")
    key_tuple = None
    if keys is not None:
        if not isinstance(keys, (list, tuple)) or not keys:
            raise _err(where, f"keys must be a non-empty list, got {keys!r}")
        for k in keys:
            if not (
                k is None
                or isinstance(k, (str, int, bool))
                or (isinstance(k, float) and math.isfinite(k))
            ):
                raise _err(where, f"keys must be text, numbers, booleans or null, got {k!r}")
        key_tuple = tuple(keys)
    return ColumnInfo(lower=lo, upper=hi, keys=key_tuple)


def _table(name: str, raw: Any) -> TableInfo:
    where = f"tables.{name}"
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise _err(where, f"must be a mapping, got {raw!r}")
    unknown = set(raw) - _TABLE_FIELDS
    if unknown:
        raise _err(where, f"unknown fields {sorted(unknown)} (allowed: {sorted(_TABLE_FIELDS)})")
    public = raw.get("public", False)
    if not isinstance(public, bool):
        raise _err(where, f"public must be true or false, got {public!r}")
    unit = raw.get("privacy_unit")
    if unit is not None and (not isinstance(unit, str) or not unit):
        raise _err(where, f"privacy_unit must be a column name, got {unit!r}")
    if public and (unit is not None or "max_partitions" in raw or "max_rows_per_partition" in raw):
        raise _err(where, "a public table has no privacy unit or contribution limits")
    limits: dict[str, int | None] = {}
    for f in ("max_partitions", "max_rows_per_partition"):
        v = raw.get(f)
        limits[f] = (
            None if v is None else check_integer(v, name=f"{where}.{f}", minimum=1, maximum=1 << 20)
        )
    cols_raw = raw.get("columns") or {}
    if not isinstance(cols_raw, dict):
        raise _err(where, f"columns must be a mapping, got {cols_raw!r}")
    cols = {str(c): _column(name, str(c), v) for c, v in cols_raw.items()}
    path = raw.get("path")
    if path is not None and (not isinstance(path, str) or not path):
        raise _err(where, f"path must be a file path, got {path!r}")
    return TableInfo(
        name=name,
        public=public,
        privacy_unit=unit,
        privacy_unit_given="privacy_unit" in raw,
        max_partitions=limits["max_partitions"],
        max_rows_per_partition=limits["max_rows_per_partition"],
        columns=cols,
        path=path,
    )


def parse_metadata(raw: Any, *, base: str | None = None) -> Metadata:
    """Metadata from a parsed YAML/TOML document or a dict (``{"tables": {...}}``)."""
    if raw is None:
        return Metadata()
    if not isinstance(raw, dict):
        raise _err("root", f"must be a mapping with a 'tables' entry, got {type(raw).__name__}")
    unknown = set(raw) - {"tables"}
    if unknown:
        raise _err("root", f"unknown fields {sorted(unknown)} (allowed: ['tables'])")
    tables_raw = raw.get("tables") or {}
    if not isinstance(tables_raw, dict):
        raise _err("tables", "must be a mapping of table names")
    tables = {}
    for n, t in tables_raw.items():
        info = _table(str(n), t)
        if info.path is not None and base is not None and not os.path.isabs(info.path):
            info = replace(info, path=os.path.join(base, info.path))
        tables[str(n)] = info
    return Metadata(tables=tables)


def load_metadata(source: Any) -> Metadata:
    """Metadata from a path (``.yaml``/``.yml`` or ``.toml``), a dict, or a :class:`Metadata`.

    Relative ``path`` entries of public tables are read relative to the metadata file.
    """
    if source is None:
        return Metadata()
    if isinstance(source, Metadata):
        return source
    if isinstance(source, dict):
        return parse_metadata(source)
    if isinstance(source, (str, os.PathLike)):
        p = Path(source)
        if not p.is_file():
            raise PrivacyParameterError(f"no such metadata file: {os.fspath(source)!r}")
        text = p.read_text(encoding="utf-8")
        suffix = p.suffix.lower()
        if suffix == ".toml":
            try:
                raw = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                raise PrivacyParameterError(f"metadata {p.name}: not valid TOML: {exc}") from None
        elif suffix in (".yaml", ".yml"):
            import yaml

            try:
                raw = yaml.load(text, Loader=_unique_key_loader())  # a SafeLoader
            except yaml.YAMLError as exc:
                raise PrivacyParameterError(f"metadata {p.name}: not valid YAML: {exc}") from None
        else:
            raise PrivacyParameterError(
                f"metadata file must end in .yaml, .yml or .toml, got {p.name!r}"
            )
        return parse_metadata(raw, base=str(p.parent))
    raise PrivacyParameterError(
        f"metadata must be a path, a dict or a Metadata, got {type(source).__name__}"
    )


def _unique_key_loader() -> Any:
    """A PyYAML ``SafeLoader`` that raises on a key repeated in one mapping.

    YAML forbids duplicate keys, but PyYAML keeps the last one silently: a second
    ``privacy_unit:`` or bounds entry would then override the first without a word.
    """
    import yaml

    class _UniqueKeyLoader(yaml.SafeLoader):  # type: ignore[misc,unused-ignore]
        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            if isinstance(node, yaml.MappingNode):
                seen: set[Any] = set()
                for key_node, _ in node.value:
                    if key_node.tag == "tag:yaml.org,2002:merge":
                        continue
                    key = self.construct_object(key_node, deep=True)
                    try:
                        dup = key in seen
                    except TypeError:
                        continue  # an unhashable key: the base constructor refuses it
                    if dup:
                        raise yaml.constructor.ConstructorError(
                            "while constructing a mapping",
                            node.start_mark,
                            f"found duplicate key {key!r}",
                            key_node.start_mark,
                        )
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return _UniqueKeyLoader
