"""Public column domains of a synthetic table: what each modelled column may hold.

Every column of a synthetic-data model has a public, finite domain declared before any data is
read: a :class:`Categorical` column lists its values, a :class:`Numeric` column gives bounds and
a number of equal-width bins over them. Each row's value is coded as an integer cell
``0 .. size - 1`` by SQL conditions on public literals only (a bucket of the analytics plan):

* categorical: ``code = i`` when the value equals ``values[i]``;
* numeric: bin ``i`` of the edges ``lower + i (upper - lower) / bins``, values below ``lower``
  in bin 0 and values above ``upper`` in the last bin (clamping);
* the last code, ``size - 1``, is *missing*: NULL, NaN (read as NULL by the engines), or a
  categorical value outside the declared list. The synthetic table writes it back as a
  missing value, so the share of missing values is modelled like any other cell.

Equal-width bins over declared bounds are the only numeric binning for now; bins chosen by
private quantiles inside the same budget are a planned extension.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dpkit.errors import PrivacyParameterError

__all__ = ["Categorical", "ColumnDomain", "Numeric", "check_domains", "sql_literal"]

#: Largest number of values or bins one column may declare (plus its missing cell).
MAX_COLUMN_CELLS = 10_000


def quote_ident(name: str) -> str:
    """``name`` as a double-quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def sql_literal(value: object) -> str:
    """A public literal in SQL: text quoted, integers and finite floats as numbers, booleans."""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise PrivacyParameterError(f"a category must be a finite number, got {value!r}")
        return repr(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise PrivacyParameterError(
        f"a category must be text, an integer, a float or a boolean, got {value!r}"
    )


@dataclass(frozen=True)
class Categorical:
    """A column whose values are the public list ``values`` (plus a missing cell).

    Values outside the list and missing values share the missing cell.
    """

    values: tuple[object, ...]

    def __init__(self, values: Sequence[object]) -> None:
        if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
            raise PrivacyParameterError(
                f"Categorical takes a list of public values, got {values!r}"
            )
        vals = tuple(values)
        if not vals:
            raise PrivacyParameterError("Categorical needs at least one value")
        if len(vals) >= MAX_COLUMN_CELLS:
            raise PrivacyParameterError(
                f"Categorical takes at most {MAX_COLUMN_CELLS - 1} values, got {len(vals)}"
            )
        for v in vals:
            sql_literal(v)  # refuses what cannot be a literal
        keys = [(type(v).__name__, v) for v in vals]
        if len(set(keys)) != len(keys):
            raise PrivacyParameterError(f"Categorical values must be distinct, got {list(vals)}")
        object.__setattr__(self, "values", vals)

    @property
    def size(self) -> int:
        """Number of cells: the values and the missing cell."""
        return len(self.values) + 1

    def cases(self, column: str) -> list[tuple[str, int]]:
        """``(condition, code)`` for every value (the missing cell is the default)."""
        col = quote_ident(column)
        return [(f"{col} = {sql_literal(v)}", i) for i, v in enumerate(self.values)]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "categorical", "values": list(self.values)}


@dataclass(frozen=True)
class Numeric:
    """A numeric column clamped to the public ``[lower, upper]`` and cut into ``bins``
    equal-width bins (plus a missing cell). Sampled values are uniform inside their bin."""

    lower: float
    upper: float
    bins: int = 16

    def __post_init__(self) -> None:
        for name in ("lower", "upper"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise PrivacyParameterError(f"Numeric {name} must be a finite number, got {v!r}")
            object.__setattr__(self, name, float(v))
        if not self.lower < self.upper:
            raise PrivacyParameterError(
                f"Numeric bounds must satisfy lower < upper, got [{self.lower}, {self.upper}]"
            )
        b = self.bins
        if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b < MAX_COLUMN_CELLS:
            raise PrivacyParameterError(
                f"Numeric bins must be an integer from 1 to {MAX_COLUMN_CELLS - 1}, got {b!r}"
            )

    @property
    def size(self) -> int:
        return self.bins + 1

    @property
    def edges(self) -> tuple[float, ...]:
        """The bin edges ``lower + i (upper - lower) / bins`` (the last one is ``upper``)."""
        w = (self.upper - self.lower) / self.bins
        return (*(self.lower + i * w for i in range(self.bins)), self.upper)

    def cases(self, column: str) -> list[tuple[str, int]]:
        """Bin ``i`` holds ``edges[i] <= x < edges[i + 1]``; below ``lower`` is bin 0 and from
        the last inner edge up (``+inf`` included) the last bin. NULL and NaN fail every
        comparison and fall to the missing cell."""
        col = quote_ident(column)
        inner = self.edges[1:-1]
        if not inner:
            return [(f"{col} >= {self.lower!r} OR {col} < {self.lower!r}", 0)]
        out = [(f"{col} < {inner[0]!r}", 0)]
        out += [(f"{col} < {e!r}", i) for i, e in enumerate(inner[1:], start=1)]
        out.append((f"{col} >= {inner[-1]!r}", self.bins - 1))
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "numeric", "lower": self.lower, "upper": self.upper, "bins": self.bins}


ColumnDomain = Categorical | Numeric


def domain_from_dict(data: Any) -> ColumnDomain:
    """The domain :meth:`Categorical.to_dict` or :meth:`Numeric.to_dict` wrote."""
    if not isinstance(data, dict):
        raise PrivacyParameterError(f"a column domain must be an object, got {data!r}")
    if data.get("kind") == "categorical":
        return Categorical(data["values"])
    if data.get("kind") == "numeric":
        return Numeric(data["lower"], data["upper"], data["bins"])
    raise PrivacyParameterError(f"unknown column domain {data!r}")


def check_domains(columns: Any) -> dict[str, ColumnDomain]:
    """``{column: domain}`` from a mapping; a column without a domain is refused, naming it."""
    if not isinstance(columns, Mapping) or not columns:
        raise PrivacyParameterError(
            "columns must be a non-empty mapping {column: Categorical([...]) or "
            "Numeric(lower, upper, bins)}"
        )
    out: dict[str, ColumnDomain] = {}
    missing = []
    for name, dom in columns.items():
        if not isinstance(name, str) or not name:
            raise PrivacyParameterError(f"column names must be non-empty strings, got {name!r}")
        if dom is None:
            missing.append(name)
        elif isinstance(dom, (Categorical, Numeric)):
            out[name] = dom
        else:
            raise PrivacyParameterError(
                f"the domain of column {name!r} must be Categorical([...]) or "
                f"Numeric(lower, upper, bins), got {dom!r}"
            )
    if missing:
        raise PrivacyParameterError(
            f"{len(missing)} column(s) have no public domain ({', '.join(map(repr, missing))}): "
            "declare the values of a categorical column with Categorical([...]) and the bounds "
            "of a numeric one with Numeric(lower, upper, bins); a domain read from the data "
            "would leak it"
        )
    return out
