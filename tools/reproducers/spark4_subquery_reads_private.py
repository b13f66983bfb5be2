"""Spark attack (round 4): a "public" frame over a decoy file whose subquery expression reads
the private file. ``DataFrame.inputFiles()`` collects the relations of the plan tree but not
those inside subquery expressions, and every line of the subquery's plan (``Aggregate``,
``Filter``, ``Relation ... parquet``) is on the allow-list, so the join is accepted.

D: 40 persons whose ``ref`` is person 1000 (secret = 1), plus person 1000; D' = D without
person 1000. The public frame's ``secret`` is 1 exactly when person 1000 is in the private
file. Prints the exact pre-noise count (sensitivity 1) on D and D', or the refusal; exits 1
while some variant moves the count by more than 1.

    cd /work/wt-atk4 && PYTHONPATH=$PWD/src /work/main/.venv/bin/python \
        tools/reproducers/spark4_subquery_reads_private.py
"""

from __future__ import annotations

import os
import sys
import tempfile

import pandas as pd
from _sparkatk import budget, exact_join_count, local_spark, referencing_tables

import dpkit.analytics as dpa

VARIANTS = {
    "scalar subquery in SELECT": "SELECT user_id, ref, CAST((SELECT count(*) FROM "
    "parquet.`{p}` WHERE user_id = 1000) AS BIGINT) AS secret "
    "FROM parquet.`{dec}`",
    "scalar subquery in WHERE": "SELECT user_id, ref, CAST(1 AS BIGINT) AS secret FROM "
    "parquet.`{dec}` WHERE (SELECT count(*) FROM parquet.`{p}` "
    "WHERE user_id = 1000) > 0",
    "EXISTS in SELECT": "SELECT user_id, ref, CAST(EXISTS (SELECT 1 FROM parquet.`{p}` WHERE "
    "user_id = 1000) AS BIGINT) AS secret FROM parquet.`{dec}`",
    "EXISTS in WHERE": "SELECT user_id, ref, CAST(1 AS BIGINT) AS secret FROM parquet.`{dec}` "
    "WHERE EXISTS (SELECT 1 FROM parquet.`{p}` WHERE user_id = 1000)",
    "CTE as a scalar": "WITH s AS (SELECT count(*) AS c FROM parquet.`{p}` WHERE user_id = "
    "1000) SELECT user_id, ref, CAST((SELECT c FROM s) AS BIGINT) AS secret "
    "FROM parquet.`{dec}`",
}


def main() -> int:
    leaks = 0
    with local_spark() as spark, tempfile.TemporaryDirectory() as folder:
        decoy = os.path.join(folder, "decoy.parquet")
        pd.DataFrame({"user_id": [1000], "ref": [5], "secret": [0]}).to_parquet(decoy, index=False)
        privates = []
        for i, table in enumerate(referencing_tables()):
            path = os.path.join(folder, f"private{i}.parquet")
            table.to_parquet(path, index=False)
            privates.append(path)
        for name, sql in VARIANTS.items():
            got = []
            for path in privates:
                session = dpa.Session(spark, table=path, privacy_unit="user_id", budget=budget())
                public = spark.sql(sql.format(p=path, dec=decoy))
                got.append(exact_join_count(session, public))
            files = [os.path.basename(f) for f in public.inputFiles()]
            moved = all(isinstance(g, int) for g in got) and abs(got[0] - got[1]) > 1
            leaks += moved
            print(
                f"{name:28s} inputFiles={files}  D={got[0]}  D'={got[1]}"
                f"{'  <- moves by more than the sensitivity 1' if moved else ''}"
            )
    print("OPEN" if leaks else "FIXED: every variant refused or within the sensitivity")
    return 1 if leaks else 0


if __name__ == "__main__":
    sys.exit(main())
