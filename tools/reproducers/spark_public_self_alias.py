"""Finding: on Spark, the private table joined to itself as a "public" table under another name.

``Session.public_table`` (then ``Session._same_rows``) compared table names as text and local
files by ``(st_dev, st_ino)``;
it asks the engine ``is_user_view`` to refuse views, but ``SparkEngine`` has no such method,
and Spark has spellings of the same rows that are neither the same text nor a local file:

* catalog table ``people``: a temp view ``pub`` over it, a global temp view
  ``global_temp.pub`` over it, the DataFrame ``spark.table("people")``;
* the same through ``session.sql`` with ``pub: {public: true}`` in the metadata;
* a DataFrame source ``df``: ``df.select("*")`` (another object), ``df`` registered by the
  analyst as the view ``pub``;
* a Parquet source ``/d/people.parquet``: the table name ``parquet.`/d/people.parquet```
  (Spark SQL on a file), the URL ``file:///d/people.parquet``, the engine's own temp view
  ``dpkit_file_...`` of that file (listed by ``spark.catalog.listTables()``); a directory of
  part files ``/d/dir``: its part file ``/d/dir/part-0.parquet`` (another inode than the directory).

Person T (user 1000, ``secret = 1``) is then the "public" partner of the 40 persons who
reference T: the pre-noise count (one row per unit, sensitivity 1) moves by 40 between D (with T)
and D' (without T).

    PYTHONPATH=src nice -n 10 .venv/bin/python tools/reproducers/spark_public_self_alias.py
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from typing import Any

from _sparkatk import budget, exact_join_count, local_spark, referencing_tables

import dpkit.analytics as dpa

Case = Callable[[Any, Any, str], tuple[Any, Any]]  # (spark, frame, tmpdir) -> (session, public)


def catalog_temp_view(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    frame.createOrReplaceTempView("people")
    spark.sql("CREATE OR REPLACE TEMP VIEW pub AS SELECT * FROM people")
    return dpa.Session(spark, table="people", privacy_unit="user_id", budget=budget()), "pub"


def catalog_global_view(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    frame.createOrReplaceTempView("people")
    spark.sql("CREATE OR REPLACE GLOBAL TEMP VIEW gpub AS SELECT * FROM people")
    return (
        dpa.Session(spark, table="people", privacy_unit="user_id", budget=budget()),
        "global_temp.gpub",
    )


def catalog_spark_table(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    frame.createOrReplaceTempView("people")
    return (
        dpa.Session(spark, table="people", privacy_unit="user_id", budget=budget()),
        spark.table("people"),
    )


def frame_select_star(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    return dpa.Session(frame, privacy_unit="user_id", budget=budget()), frame.select("*")


def frame_own_view(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    frame.createOrReplaceTempView("pub2")
    return dpa.Session(frame, privacy_unit="user_id", budget=budget()), "pub2"


def parquet_sql_on_file(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    path = os.path.join(tmp, f"people{frame.count()}.parquet")
    frame.toPandas().to_parquet(path)
    return (
        dpa.Session(spark, table=path, privacy_unit="user_id", budget=budget()),
        f"parquet.`{path}`",
    )


def parquet_file_url(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    path = os.path.join(tmp, f"url{frame.count()}.parquet")
    frame.toPandas().to_parquet(path)
    return (
        dpa.Session(spark, table=path, privacy_unit="user_id", budget=budget()),
        "file://" + path,
    )


def engine_file_view(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    """The temp view the engine itself made for the private file (``dpkit_file_...``, listed
    by ``spark.catalog.listTables()``): a port of DuckDB's ``is_user_view`` that exempts the
    engine's own views would still let it through."""
    path = os.path.join(tmp, f"own{frame.count()}.parquet")
    frame.toPandas().to_parquet(path)
    session = dpa.Session(spark, table=path, privacy_unit="user_id", budget=budget())
    own = [name for (kind, loc), name in session.engine._files.items() if loc == path]
    return session, own[0]


def directory_part_file(spark: Any, frame: Any, tmp: str) -> tuple[Any, Any]:
    folder = os.path.join(tmp, f"dir{frame.count()}")
    os.makedirs(folder)
    part = os.path.join(folder, "part-0.parquet")
    frame.toPandas().to_parquet(part)
    return dpa.Session(spark, table=folder, privacy_unit="user_id", budget=budget()), part


CASES: dict[str, Case] = {
    "temp view over catalog table": catalog_temp_view,
    "global temp view over it": catalog_global_view,
    "spark.table(same name) DataFrame": catalog_spark_table,
    "DataFrame source, df.select('*')": frame_select_star,
    "DataFrame source, its own view": frame_own_view,
    "parquet.`<private path>`": parquet_sql_on_file,
    "file:// URL of private path": parquet_file_url,
    "part file of private directory": directory_part_file,
    "engine's own view of private file": engine_file_view,
}


META = {
    "tables": {
        "people": {"privacy_unit": "user_id", "max_partitions": 1, "max_rows_per_partition": 1},
        "pub": {"public": True},
    }
}
SQL = "SELECT COUNT(*) AS n FROM people p JOIN pub ON p.ref = pub.user_id WHERE pub.secret = 1"


def sql_front_end(spark: Any, frame: Any) -> int | str:
    """``session.sql``: ``pub`` declared public in the metadata, a temp view over ``people``."""
    frame.createOrReplaceTempView("people")
    spark.sql("CREATE OR REPLACE TEMP VIEW pub AS SELECT * FROM people")
    s = dpa.Session(spark, table="people", privacy_unit="user_id", budget=budget())
    try:
        p = s.sql_query(SQL, metadata=META).query.prepare(epsilon=1.0)
        s.validate(p)
    except Exception as exc:
        return f"refused ({type(exc).__name__})"
    return int(p.exact(s.engine).values["n:n"][0])


def main() -> dict[str, tuple[object, object]]:
    out: dict[str, tuple[object, object]] = {}
    with local_spark() as spark, tempfile.TemporaryDirectory() as tmp:
        frames = [spark.createDataFrame(t) for t in referencing_tables()]
        for name, case in CASES.items():
            got = []
            for frame in frames:
                session, public = case(spark, frame, tmp)
                got.append(exact_join_count(session, public))
            out[name] = (got[0], got[1])
            d, d1 = got
            moved = (
                f"count moved by {d - d1} vs sensitivity 1"
                if isinstance(d, int) and isinstance(d1, int)
                else ""
            )
            print(f"{name:36s} D: {d!s:10s} D': {d1!s:10s} {moved}")
        d, d1 = (sql_front_end(spark, f) for f in frames)
        out["session.sql, view declared public"] = (d, d1)
        print(f"{'session.sql, view declared public':36s} D: {d!s:10s} D': {d1!s:10s}")
    return out


if __name__ == "__main__":
    main()
