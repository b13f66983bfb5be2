"""A checked SQL query: its builder query, and the post-processing of its released rows."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dpkit._numeric.validation import check_integer
from dpkit.analytics.builder import PreparedQuery, Query
from dpkit.analytics.sqlquery._metadata import Metadata, TableInfo, load_metadata
from dpkit.analytics.sqlquery._translate import SqlHost, Translation, having_mask, translate
from dpkit.errors import PrivacyParameterError

__all__ = ["SqlQuery", "sql_query"]

_OUTPUTS = ("pandas", "polars", "arrow")


@dataclass(frozen=True)
class SqlQuery:
    """A SQL query checked against the private fragment (nothing read, nothing spent yet).

    :attr:`query` is the builder query it compiles to (the same plan and pricing);
    :meth:`run` charges the session's budget, releases, then applies ``HAVING``, ``ORDER BY``
    and ``LIMIT`` to the released rows (post-processing: no extra cost).
    """

    translation: Translation

    @property
    def query(self) -> Query:
        """The equivalent builder query."""
        return self.translation.query

    @property
    def text(self) -> str:
        return self.translation.text

    def prepare(self, *, epsilon: float, delta: float | None = None) -> PreparedQuery:
        """The builder's prepared query (pricing and plan with a fresh salt; no data read)."""
        return self.query.prepare(epsilon=epsilon, delta=delta)

    def summarize(self, *, epsilon: float, delta: float | None = None) -> Any:
        """Noise and interval half-width per aggregate (see :meth:`Query.summarize`)."""
        return self.query.summarize(epsilon=epsilon, delta=delta)

    def run(self, *, epsilon: float, delta: float | None = None, output: str = "pandas") -> Any:
        """Charge the budget, release with confidence intervals, then post-process."""
        if output not in _OUTPUTS:
            raise PrivacyParameterError(f"output must be one of {_OUTPUTS}, got {output!r}")
        frame = self.query.run(epsilon=epsilon, delta=delta)
        return self.postprocess(frame, output=output)

    def postprocess(self, frame: Any, *, output: str = "pandas") -> Any:
        """The SELECT list's columns (with ``_low``/``_high``), filtered by HAVING, sorted by
        ORDER BY and cut by OFFSET/LIMIT. Reads only the released frame."""
        import numpy as np
        import pandas as pd

        from dpkit.analytics._release import key_column

        t = self.translation
        cols: dict[str, Any] = {}
        for o in t.outputs:
            if o.kind == "key":
                # NULL keys as NaN (numbers) or None while HAVING and ORDER BY read them (a
                # comparison with them is false, never an error after the charge);
                # pandas.NA again below
                key = frame[o.source]
                if isinstance(key.dtype, (pd.Int64Dtype, pd.Float64Dtype)):
                    cols[o.name] = key.to_numpy(dtype="float64", na_value=np.nan)
                else:
                    cols[o.name] = np.array([None if v is pd.NA else v for v in key], dtype=object)
                continue
            if o.source in t.quantile_columns:
                # the release names quantile columns <name>_p<level>
                qcols = [c for c in frame.columns if c.startswith(o.source + "_p")]
                if len(qcols) == 1:
                    cols[o.name] = frame[qcols[0]].to_numpy()
                else:
                    for c in qcols:
                        cols[o.name + c[len(o.source) :]] = frame[c].to_numpy()
                continue
            cols[o.name] = frame[o.source].to_numpy()
            for suffix in ("_low", "_high"):
                if o.source + suffix in frame.columns:
                    cols[o.name + suffix] = frame[o.source + suffix].to_numpy()
        out = pd.DataFrame(cols)
        if t.having is not None:
            out = out[having_mask(t.having, out, t.outputs)].reset_index(drop=True)
        if t.order:
            out = out.sort_values(
                by=[c for c, _, _ in t.order],
                ascending=[not d for _, d, _ in t.order],
                kind="mergesort",
                na_position="first" if t.order[0][2] else "last",
            ).reset_index(drop=True)
        stop = None if t.limit is None else t.offset + t.limit
        out = out.iloc[t.offset : stop].reset_index(drop=True)
        for o in t.outputs:
            if o.kind == "key":
                out[o.name] = key_column(
                    [None if pd.isna(v) else v for v in out[o.name]] if len(out) else []
                )
        out.attrs = dict(frame.attrs)
        if output == "polars":
            import polars as pl

            return pl.from_pandas(out)
        if output == "arrow":
            import pyarrow as pa

            return pa.Table.from_pandas(out, preserve_index=False)
        return out


def _overrides(
    bounds: Any, keys: Any, max_partitions: Any, max_rows_per_partition: Any
) -> TableInfo | None:
    if (
        bounds is None
        and keys is None
        and max_partitions is None
        and max_rows_per_partition is None
    ):
        return None
    raw: dict[str, dict[str, Any]] = {}
    if bounds is not None:
        if not isinstance(bounds, dict):
            raise PrivacyParameterError(
                f"bounds must be a dict column -> (lower, upper), got {bounds!r}"
            )
        for c, b in bounds.items():
            if not isinstance(b, (list, tuple)) or len(b) != 2:
                raise PrivacyParameterError(f"bounds[{c!r}] must be (lower, upper), got {b!r}")
            raw.setdefault(str(c), {})["bounds"] = list(b)
    if keys is not None:
        if not isinstance(keys, dict):
            raise PrivacyParameterError(f"keys must be a dict column -> values, got {keys!r}")
        for c, k in keys.items():
            raw.setdefault(str(c), {})["keys"] = list(k) if isinstance(k, (list, tuple)) else k
    meta = load_metadata(
        {
            "tables": {
                "": {
                    "columns": raw,
                    **({} if max_partitions is None else {"max_partitions": max_partitions}),
                    **(
                        {}
                        if max_rows_per_partition is None
                        else {"max_rows_per_partition": max_rows_per_partition}
                    ),
                }
            }
        }
    )
    info = meta.tables[""]
    for c in info.columns.values():
        if (
            isinstance(c.lower, float)
            and isinstance(c.upper, float)
            and not (math.isfinite(c.lower) and math.isfinite(c.upper))
        ):
            raise PrivacyParameterError("bounds must be finite")  # pragma: no cover
    return info


def sql_query(
    session: SqlHost,
    text: str,
    *,
    metadata: Any = None,
    bounds: Any = None,
    keys: Any = None,
    max_partitions: int | None = None,
    max_rows_per_partition: int | None = None,
    public_tables: dict[str, Any] | None = None,
) -> SqlQuery:
    """Check ``text`` and build its :class:`SqlQuery` (see :meth:`Session.sql_query`)."""
    meta: Metadata = load_metadata(metadata)
    if max_partitions is not None:
        check_integer(max_partitions, name="max_partitions", minimum=1, maximum=1 << 20)
    if max_rows_per_partition is not None:
        check_integer(
            max_rows_per_partition, name="max_rows_per_partition", minimum=1, maximum=1 << 20
        )
    if public_tables is not None and not isinstance(public_tables, dict):
        raise PrivacyParameterError("public_tables must be a dict name -> table")
    ov = _overrides(bounds, keys, max_partitions, max_rows_per_partition)
    return SqlQuery(translate(session, text, meta, public_tables, ov))
