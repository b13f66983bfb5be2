"""A slow pandas reference of the plan's semantics, for tests that must not depend on DuckDB."""

from __future__ import annotations

import hashlib
import math
from typing import Any

import numpy as np
import pandas as pd

from dpkit.analytics._plan import EngineResult, Plan


def _h(*parts: Any) -> bytes:
    return hashlib.sha256(repr(parts).encode()).digest()


def _null(v: Any) -> Any:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    return v.item() if hasattr(v, "item") else v


class PandasEngine:
    """register/columns/execute over pandas frames; counts calls to execute."""

    def __init__(self, frames: dict[str, pd.DataFrame] | None = None) -> None:
        self.frames = dict(frames or {})
        self.executed = 0

    def register(self, name: str, frame: Any) -> None:
        if not isinstance(frame, pd.DataFrame):
            frame = frame.to_pandas()
        self.frames[name] = frame

    def _frame(self, source: Any) -> pd.DataFrame:
        if source.kind == "parquet":
            return pd.read_parquet(source.location)
        if source.kind == "csv":
            return pd.read_csv(source.location)
        return self.frames[source.location]

    def columns(self, source: Any) -> list[str]:
        return list(self._frame(source).columns)

    def execute(self, plan: Plan) -> EngineResult:
        self.executed += 1
        df = self._frame(plan.source)
        for f in plan.filters:
            pred = f.predicate.replace('"', "`").replace(" IN (", " in (")
            df = df.query(pred.replace(" IS NULL", ".isna()"))
        b = plan.bound
        gb = plan.aggregate.group_by
        kept: dict[tuple[Any, ...], list[tuple[Any, dict[str, Any]]]] = {}
        per_unit: dict[Any, dict[tuple[Any, ...], list[dict[str, Any]]]] = {}
        for i, row in enumerate(df.to_dict("records")):
            unit = ("row", i) if b.privacy_unit is None else _null(row[b.privacy_unit])
            key = tuple(_null(row[c]) for c in gb)
            per_unit.setdefault(unit, {}).setdefault(key, []).append(row)
        for unit, groups in per_unit.items():
            order = sorted(groups, key=lambda k: (_h(b.salt, unit, k), repr(k)))
            for k in order[: b.max_partitions]:
                rows = sorted(groups[k], key=lambda r: _h(b.salt, unit, k, sorted(r.items())))
                for r in rows[: b.max_rows_per_partition]:
                    kept.setdefault(k, []).append((unit, r))
        keys = tuple(kept)
        values: dict[str, tuple[Any, ...]] = {}
        for m in plan.aggregate.measures:
            out: list[Any] = []
            for k in keys:
                rows = kept[k]
                vals = [_null(r[m.column]) if m.column else None for _, r in rows]
                present = [float(v) for v in vals if v is not None and not isinstance(v, str)]
                if m.kind == "rows":
                    out.append(len(rows))
                elif m.kind == "units":
                    out.append(len({u for u, _ in rows}))
                elif m.kind == "values":
                    out.append(len(present))
                elif m.kind in ("sum", "sum_sq"):
                    lo_i = math.floor(m.lower * 2**m.frac_bits)
                    hi_i = math.floor(m.upper * 2**m.frac_bits)
                    tot = 0
                    for x in present:
                        if m.kind == "sum_sq":
                            x = (min(max(x, m.clamp_lower), m.clamp_upper) - m.center) ** 2
                        x = min(max(x, m.lower), m.upper)
                        tot += min(max(math.floor(x * 2**m.frac_bits), lo_i), hi_i)
                    out.append(tot)
                elif m.kind == "bin_counts":
                    e = np.asarray(m.edges)
                    c = [0] * (len(e) - 1)
                    for x in present:
                        x = min(max(x, e[0]), e[-1])
                        j = min(int(np.searchsorted(e, x, side="right")) - 1, len(c) - 1)
                        c[j] += 1
                    out.append(tuple(c))
                else:
                    cats = list(m.categories)
                    c = [0] * len(cats)
                    for v in vals:
                        if v is not None and v in cats:
                            c[cats.index(v)] += 1
                    out.append(tuple(c))
            values[m.name] = tuple(out)
        return EngineResult(keys=keys, values=values)
