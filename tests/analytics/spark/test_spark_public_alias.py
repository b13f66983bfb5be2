"""The private rows joined as a "public" table under another Spark name (a view, a global view,
``spark.table``, a derived DataFrame, ``parquet.`path```, a ``file://`` URL, a part file, the
engine's own file view, or a view declared public to ``session.sql``) are refused before
anything is charged, on classic Spark and Spark Connect; public tables that read other files
(or are pandas frames) still join.

Each attack compares neighbouring tables D (with person 1000) and D' (without): before the fix
the pre-noise count (sensitivity 1) moved by 40.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from _spark_helpers import join_count

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import PrivacyParameterError


def _referencing_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: 40 persons whose ``ref`` is person 1000 (``secret = 1``), plus person 1000; D' = D
    without person 1000. Joined to itself as a public table, person 1000's row becomes the
    public partner of 40 persons: the count of ``pub_secret = 1`` moves by 40."""
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


def _name() -> str:
    return f"atk_{uuid.uuid4().hex[:10]}"


def _session(spark: Any, table: Any) -> Any:
    return dpa.Session(spark, table=table, privacy_unit="user_id", budget=Budget(epsilon=10.0))


def _temp_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    people, pub = _name(), _name()
    frame.createOrReplaceTempView(people)
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {pub} AS SELECT * FROM {people}")
    return _session(spark, people), pub


def _global_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    people, pub = _name(), _name()
    frame.createOrReplaceTempView(people)
    spark.sql(f"CREATE OR REPLACE GLOBAL TEMP VIEW {pub} AS SELECT * FROM {people}")
    return _session(spark, people), f"global_temp.{pub}"


def _spark_table(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    people = _name()
    frame.createOrReplaceTempView(people)
    return _session(spark, people), spark.table(people)


def _select_star(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    return (
        dpa.Session(frame, privacy_unit="user_id", budget=Budget(epsilon=10.0)),
        frame.select("*"),
    )


def _frame_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    pub = _name()
    frame.createOrReplaceTempView(pub)
    return dpa.Session(frame, privacy_unit="user_id", budget=Budget(epsilon=10.0)), pub


def _rows(frame: Any) -> pd.DataFrame:
    rows = frame.toPandas()
    rows.attrs = {}  # Spark Connect puts its plan metrics there (not serialisable)
    return rows


def _parquet_file(frame: Any, tmp: Path) -> str:
    path = str(tmp / f"{_name()}.parquet")
    _rows(frame).to_parquet(path)
    return path


def _sql_on_file(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    path = _parquet_file(frame, tmp)
    return _session(spark, path), f"parquet.`{path}`"


def _file_url(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    path = _parquet_file(frame, tmp)
    return _session(spark, path), "file://" + path


def _engine_file_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    path = _parquet_file(frame, tmp)
    session = _session(spark, path)
    own = [name for (_, loc), name in session.engine._files.items() if loc == path]
    return session, own[0]  # listed by spark.catalog.listTables() too


def _part_file(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    folder = tmp / _name()
    folder.mkdir()
    part = str(folder / "part-0.parquet")
    _rows(frame).to_parquet(part)
    return _session(spark, str(folder)), part


# ---- further spellings: each reads the private file, or mixes other files with rows Spark
# ---- holds in memory (which cannot be traced to a file)


def _file_frame_view(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    """A file-backed DataFrame source and a temp view over its file's frame."""
    private = spark.read.parquet(_parquet_file(frame, tmp))
    pub = _name()
    spark.read.parquet(private.inputFiles()[0]).createOrReplaceTempView(pub)
    return dpa.Session(private, privacy_unit="user_id", budget=Budget(epsilon=10.0)), pub


def _union_with_private(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    """Other rows (all with ``ref`` -2) unioned with the private file."""
    path = _parquet_file(frame, tmp)
    other = spark.read.parquet(
        _parquet_file(
            spark.createDataFrame(pd.DataFrame({"user_id": [5000], "ref": [-2], "secret": [0]})),
            tmp,
        )
    )
    return _session(spark, path), other.unionByName(spark.read.parquet(path))


def _union_with_cached_subset(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    """Another file unioned with a cached subset of the private file: ``inputFiles()`` lists
    only the other file (the cache hides the private one)."""
    path = _parquet_file(frame, tmp)
    other = spark.read.parquet(
        _parquet_file(
            spark.createDataFrame(pd.DataFrame({"user_id": [5000], "ref": [-2], "secret": [0]})),
            tmp,
        )
    )
    subset = spark.read.parquet(path).where("secret = 1").cache()
    subset.count()
    return _session(spark, path), other.unionByName(subset)


def _symlinked_folder(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    """A symbolic link to the private file's directory, read as a directory."""
    folder = tmp / _name()
    folder.mkdir()
    path = str(folder / "part-0.parquet")
    _rows(frame).to_parquet(path)
    link = tmp / _name()
    os.symlink(folder, link)
    return _session(spark, path), spark.read.parquet(str(link))


def _parent_folder(spark: Any, frame: Any, tmp: Path) -> tuple[Any, Any]:
    """A directory holding the private file among others."""
    folder = tmp / _name()
    folder.mkdir()
    path = str(folder / "b.parquet")
    _rows(frame).to_parquet(path)
    pd.DataFrame({"user_id": [5000], "ref": [-2], "secret": [0]}).to_parquet(folder / "a.parquet")
    return _session(spark, path), str(folder) + "/*.parquet"


ALIASES: dict[str, Callable[[Any, Any, Path], tuple[Any, Any]]] = {
    "temp-view": _temp_view,
    "global-temp-view": _global_view,
    "spark-table": _spark_table,
    "select-star": _select_star,
    "frame-own-view": _frame_view,
    "sql-on-file": _sql_on_file,
    "file-url": _file_url,
    "part-file": _part_file,
    "engine-file-view": _engine_file_view,
    "file-frame-view": _file_frame_view,
    "union-with-private": _union_with_private,
    "union-with-cached-subset": _union_with_cached_subset,
    "symlinked-folder": _symlinked_folder,
    "parent-folder-glob": _parent_folder,
}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_private_rows_are_never_joined_as_public_under_another_spark_name(
    spark: Any, tmp_path: Path, alias: str
) -> None:
    """The private rows under another Spark spelling are refused as a public table with a
    PrivacyParameterError, on D and on D' alike (the message does not depend on the data);
    before the fix the count moved by 40 vs sensitivity 1."""
    counts = []
    for table in _referencing_tables():
        session, public = ALIASES[alias](spark, spark.createDataFrame(table), tmp_path)
        counts.append(join_count(session, public))
        assert session.budget.spent[0] == 0
    assert all(isinstance(c, str) and c.startswith("PrivacyParameterError") for c in counts), counts
    # the same message on D and D' once the (per-run, random) public name is masked
    masked = {re.sub(r"'[^']*'", "'?'", str(c)) for c in counts}
    assert len(masked) == 1, counts


def test_sql_front_end_refuses_a_spark_view_over_the_private_table(spark: Any) -> None:
    """``session.sql`` with ``pub`` declared public and ``pub`` a Spark temp view selecting
    the private table: refused before the charge (before the fix: 40 vs 0)."""
    people, pub = _name(), _name()
    meta = {
        "tables": {
            people: {"privacy_unit": "user_id", "max_partitions": 1, "max_rows_per_partition": 1},
            pub: {"public": True},
        }
    }
    sql = (
        f"SELECT COUNT(*) AS n FROM {people} p JOIN {pub} ON p.ref = {pub}.user_id "
        f"WHERE {pub}.secret = 1"
    )
    for table in _referencing_tables():
        spark.createDataFrame(table).createOrReplaceTempView(people)
        spark.sql(f"CREATE OR REPLACE TEMP VIEW {pub} AS SELECT * FROM {people}")
        s = _session(spark, people)
        with pytest.raises(PrivacyParameterError, match="pandas DataFrame or Arrow"):
            s.sql(sql, epsilon=1.0, metadata=meta)
        assert s.budget.spent[0] == 0


def test_sql_front_end_refuses_a_view_over_the_private_file(spark: Any, tmp_path: Path) -> None:
    """The same through a file-backed private table and a view declared public."""
    path = _parquet_file(spark.createDataFrame(_referencing_tables()[0]), tmp_path)
    pub = _name()
    spark.sql(f"CREATE OR REPLACE TEMP VIEW {pub} AS SELECT * FROM parquet.`{path}`")
    meta = {
        "tables": {
            "people": {"privacy_unit": "user_id", "max_partitions": 1, "max_rows_per_partition": 1},
            pub: {"public": True},
        }
    }
    s = _session(spark, path)
    with pytest.raises(PrivacyParameterError, match="cannot be joined as a public table"):
        s.sql(
            f"SELECT COUNT(*) AS n FROM people p JOIN {pub} ON p.ref = {pub}.user_id",
            epsilon=1.0,
            metadata=meta,
        )
    assert s.budget.spent[0] == 0


# ------------------------------------------------------------ legitimate public tables


def _public_rows() -> pd.DataFrame:
    return pd.DataFrame({"user_id": [1000, 7], "secret": [1, 0]})


def test_public_tables_reading_other_files_still_join(spark: Any, tmp_path: Path) -> None:
    """A file-backed private table joins a public path, a view over another file, a Spark
    DataFrame of another file and a pandas frame; the count is the true one (40)."""
    private = _parquet_file(spark.createDataFrame(_referencing_tables()[0]), tmp_path)
    public_path = str(tmp_path / f"{_name()}.parquet")
    _public_rows().to_parquet(public_path)
    view = _name()
    spark.read.parquet(public_path).createOrReplaceTempView(view)
    for public in (public_path, view, spark.read.parquet(public_path), _public_rows()):
        for session in (
            _session(spark, private),
            dpa.Session(
                spark.read.parquet(private), privacy_unit="user_id", budget=Budget(epsilon=10.0)
            ),
        ):
            assert join_count(session, public) == 40, type(public).__name__


def test_in_memory_private_table_joins_pandas_but_no_spark_source(
    spark: Any, tmp_path: Path
) -> None:
    """An in-memory private frame: a pandas public table joins (count 40); a Spark source,
    even one reading another file, is refused with a message naming the remedy."""
    frame = spark.createDataFrame(_referencing_tables()[0])
    session = dpa.Session(frame, privacy_unit="user_id", budget=Budget(epsilon=10.0))
    assert join_count(session, _public_rows()) == 40
    public_path = str(tmp_path / f"{_name()}.parquet")
    _public_rows().to_parquet(public_path)
    got = join_count(session, spark.read.parquet(public_path))
    assert (
        isinstance(got, str)
        and got.startswith("PrivacyParameterError")
        and "pandas DataFrame or Arrow" in got
    )


def test_public_frame_without_files_is_refused(spark: Any, tmp_path: Path) -> None:
    """A Spark frame built in memory (``createDataFrame``) is refused as a public table even
    when the private table reads files: its rows cannot be traced."""
    private = _parquet_file(spark.createDataFrame(_referencing_tables()[0]), tmp_path)
    got = join_count(_session(spark, private), spark.createDataFrame(_public_rows()))
    assert isinstance(got, str) and got.startswith("PrivacyParameterError"), got
