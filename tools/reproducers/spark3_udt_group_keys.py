"""Finding: group keys of a user-defined type (Spark ML vectors and matrices) are taken as they
are: distinct Spark groups merge in the driver, and unhashable keys raise after the charge.

``spark_type`` spells a UDT by its short name (``vector``, ``matrix``), which is not a nested
type for the compiler, and Spark groups, hashes and orders a UDT by its SQL struct. The driver
then gets PySpark ML objects as keys:

* ``DenseVector([1.0, 0.0])`` and ``SparseVector(2, {0: 1.0})`` are two Spark groups (their
  structs differ) but equal, same-hash Python keys: in ``decode`` the added person's group
  replaces the 100 persons' group, so the exact count moves 100 -> 1 between D and D'
  (sensitivity 1 with ``max_partitions = max_rows_per_partition = 1``);
* ``DenseMatrix`` is unhashable: ``decode`` raises ``TypeError`` after the charge whenever the
  result has a row (D: person 1000 passes ``age > 50``), and releases when it has none (D').

Sources are ``spark.createDataFrame`` from driver rows; classic Spark here, Spark Connect alike
(tests/analytics/spark/test_spark_key_types_decode_one_to_one.py).

    PYTHONPATH=src /work/main/.venv/bin/python tools/reproducers/spark3_udt_group_keys.py
"""

from __future__ import annotations

import sys
from typing import Any

from _sparkatk import local_spark
from pyspark.ml.linalg import Matrices, Vectors

import dpkit.analytics as dpa
from dpkit.accounting import Budget


def exact_counts(frame: Any) -> list[int] | str:
    """Exact per-group counts (one group and one row per person), or the refusal."""
    s = dpa.Session(frame, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    try:
        p = (
            s.query()
            .group_by("k")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0, delta=1e-6)
        )
        s.validate(p)
    except Exception as exc:
        return f"refused before the charge ({type(exc).__name__})"
    return sorted(int(n) for n in p.exact(s.engine).values["n:n"])


def run_outcome(frame: Any) -> tuple[str, tuple[float, float]]:
    budget = Budget(epsilon=10.0, delta=1e-5)
    s = dpa.Session(frame, privacy_unit="uid", budget=budget)
    q = (
        s.query()
        .where("age > 50")
        .group_by("k")
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    try:
        q.run(epsilon=1.0, delta=1e-6)
        return "released", budget.spent
    except Exception as exc:
        return f"raised {type(exc).__name__}", budget.spent


def main() -> bool:
    with local_spark() as spark:
        rows = [(i, Vectors.dense([1.0, 0.0])) for i in range(100)]
        d = spark.createDataFrame([*rows, (1000, Vectors.sparse(2, {0: 1.0}))], ["uid", "k"])
        d_prime = spark.createDataFrame(rows, ["uid", "k"])
        vec_d, vec_d_prime = exact_counts(d), exact_counts(d_prime)
        mrows = [(i, 0, Matrices.dense(1, 1, [1.0])) for i in range(10)]
        m_d = spark.createDataFrame(
            [*mrows, (1000, 99, Matrices.dense(1, 1, [2.0]))], ["uid", "age", "k"]
        )
        m_d_prime = spark.createDataFrame(mrows, ["uid", "age", "k"])
        mat_d, mat_d_prime = run_outcome(m_d), run_outcome(m_d_prime)
    print(f"vector keys, exact counts per group   D: {vec_d}   D': {vec_d_prime}")
    print(
        f"matrix keys, run()   D: {mat_d[0]} (spent {mat_d[1]})   "
        f"D': {mat_d_prime[0]} (spent {mat_d_prime[1]})"
    )
    return vec_d in ([1, 100], vec_d_prime) and mat_d[0] == mat_d_prime[0]


if __name__ == "__main__":
    sys.exit(0 if main() else 1)
