"""The cell_counts measure (exact marginals for synthetic data) on Spark: classic ``local[2]``
and Spark Connect give the same integer counts as DuckDB on the same data and salt (md5
bounding hash, so every engine keeps the same rows of each person), and the counts are those
of a pandas reference over the kept rows."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpkit.accounting import Budget
from dpkit.analytics import Session
from dpkit.analytics._plan import Source
from dpkit.analytics.engines.duckdb import DuckDBEngine
from dpkit.analytics.engines.spark import SparkEngine
from dpkit.analytics.marginals import BinPart, CategoryPart, marginal_counts
from dpkit.noise import RandomSource


def _people(path: Path) -> Path:
    """200 people with 1..6 rows: text with an undeclared value and NULLs, numbers with NaN,
    NULL, +-inf and values outside the edges, an integer column."""
    rng = np.random.default_rng(8)
    rows = rng.integers(1, 7, 200)
    uid = np.repeat(np.arange(200), rows)
    n = uid.size
    x = rng.normal(40.0, 20.0, n)
    x[rng.random(n) < 0.05] = np.nan
    x[:4] = [np.inf, -np.inf, 1e300, -5.0]
    xs = pa.array(x, pa.float64(), mask=rng.random(n) < 0.03)
    c = rng.choice(["a", "b", "zz", None], n, p=[0.4, 0.3, 0.2, 0.1])
    k = rng.integers(0, 4, n)
    pq.write_table(
        pa.table(
            {
                "uid": pa.array([f"u{u}" for u in uid]),
                "x": xs,
                "c": pa.array(c.tolist(), pa.string()),
                "k": pa.array(k, pa.int64()),
            }
        ),
        path,
    )
    return path


PARTS = (
    CategoryPart("c", ("a", "b")),
    BinPart("x", (0.0, 20.0, 35.0, 50.0, 80.0)),  # not equal-width: the binary-search path
    CategoryPart("k", (0, 1, 2)),
    BinPart("x", (0.0, 25.0, 50.0, 75.0, 100.0)),  # equal-width: the arithmetic path
)


def _statement(path: Path, max_rows: int) -> Any:
    s = Session(
        str(path),
        privacy_unit="uid",
        budget=Budget(epsilon=1.0),
        engine=DuckDBEngine(hash="md5", threads=1),
        source_of_randomness=RandomSource(seed=5, insecure=True),
    )
    return marginal_counts(s, [PARTS[:3], (PARTS[0], PARTS[3]), (PARTS[2],)], max_rows=max_rows)


@pytest.mark.parametrize("max_rows", [1, 3])
def test_cell_counts_equal_duckdb_on_classic_and_connect(
    tmp_path: Path, classic_spark: Any, connect_spark: Any, max_rows: int
) -> None:
    path = _people(tmp_path / "people.parquet")
    st = _statement(path, max_rows)
    source = Source(kind="parquet", location=str(path))
    duck = st.exact(source)
    for spark in (classic_spark, connect_spark):
        got = dataclasses.replace(st, engine=SparkEngine(spark, hash="md5")).exact(source)
        assert got == duck
    # every marginal counts the same kept rows: min(rows, max_rows) per person
    table = pq.read_table(path).to_pandas()
    kept = int(table.groupby("uid").size().clip(upper=max_rows).sum())
    assert [sum(m) for m in duck] == [kept] * 3
    assert len(duck[0]) == 3 * 5 * 4 and len(duck[1]) == 3 * 5


def test_cell_counts_without_bounding_match_pandas(tmp_path: Path, classic_spark: Any) -> None:
    """Companion of the equality above: with every row kept (max_rows = 6, the most rows a
    person has) the Spark counts are the pandas counts, so equal-to-DuckDB is not two engines
    sharing one wrong answer."""
    path = _people(tmp_path / "people.parquet")
    st = _statement(path, 6)
    source = Source(kind="parquet", location=str(path))
    got = dataclasses.replace(st, engine=SparkEngine(classic_spark, hash="md5")).exact(source)
    df = pq.read_table(path).to_pandas()
    cb = df.c.map({"a": 0, "b": 1}).fillna(2).astype(int).to_numpy()
    x = np.clip(df.x.to_numpy(dtype=float, na_value=np.nan), 0.0, 80.0)
    edges = np.array([0.0, 20.0, 35.0, 50.0, 80.0])
    xb = np.where(np.isnan(x), 4, np.minimum(np.searchsorted(edges, x, side="right") - 1, 3))
    kb = np.where(df.k.to_numpy() <= 2, df.k.to_numpy(), 3)
    ref = np.zeros((3, 5, 4), dtype=np.int64)
    np.add.at(ref, (cb, xb, kb), 1)
    assert list(got[0]) == ref.reshape(-1).tolist()
    assert list(got[2]) == ref.sum(axis=(0, 1)).tolist()
