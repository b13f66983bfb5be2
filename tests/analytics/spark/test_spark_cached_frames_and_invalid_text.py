"""Fifth attack round: the Spark subquery refusal, DuckDB date/time keys, invalid text.

Finding (tools/reproducers/spark5_pandas_surrogate_exception.py prints the figures; the test
here fails until fixed):

* a lone surrogate (``'\\udcff'``, Python's spelling of an invalid UTF-8 byte under
  ``surrogateescape``) in a pandas text column (``object`` or ``string``) makes DuckDB raise
  while it scans that row, as a group key or only in a predicate: ``EngineError`` after the
  charge on D, a release on D' (the same budget spent on both).

Defences that held (passing tests): a public Spark frame reading the private file through a
``LATERAL`` subquery, an ``IN (subquery)`` in a join condition or a scalar subquery inside a
``CASE`` inside a window is refused before the charge (the markers ``lateral-subquery#``,
``list#``, ``scalar-subquery#`` print in the plan); a frame joined with a cached (or locally
checkpointed) frame of the private file is refused (``InMemoryRelation``/``LogicalRDD`` off the
allow-list); Spark rejects subqueries in higher-order functions and in ``VALUES`` itself.
DuckDB ``TIMESTAMPTZ`` infinity is NULL (its own group), dates and timestamps past year 9999
decode to distinct text keys, ``TIMESTAMP_NS`` and ``TIMETZ`` keys are refused before the
charge. Invalid UTF-8 in a Parquet string column (dictionary-encoded, with statistics, as the
privacy unit, in ``LIKE``, inside a ``LIST``) and in an Arrow table releases on D and D' alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from _spark_helpers import count_selection_spent, join_count

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.errors import DPKitError

# ------------------------------------------------------------ shared D / D' helpers


def _rounded(spent: tuple[float, float]) -> tuple[float, ...]:
    """The spent (epsilon, delta) to 9 significant digits: selection runs at delta (1 - 2^-40),
    so the exact delta spent is a hair under the one asked for."""
    return tuple(float(f"{v:.9g}") for v in spent)


def _outcome(
    source: Any, *, key: str = "k", where: str = "age > 50", unit: str = "uid"
) -> tuple[str, tuple[float, float]]:
    """``run()``'s outcome (released, or the exception's class) and the budget spent."""
    budget = Budget(epsilon=10.0, delta=1e-5)
    s = dpa.Session(source, privacy_unit=unit, budget=budget)
    try:
        (
            s.query()
            .where(where)
            .group_by(key)
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .run(epsilon=1.0, delta=1e-6)
        )
        return "released", _rounded(budget.spent)
    except Exception as exc:  # the outcome itself is what is compared
        return type(exc).__name__, budget.spent


def _charged() -> tuple[float, ...]:
    """What :func:`_outcome`'s query spends (:func:`count_selection_spent`), rounded."""
    return _rounded(count_selection_spent())


# ------------------------------------------------------------ finding: pandas surrogates


@pytest.mark.parametrize(
    ("dtype", "key", "where"),
    [
        ("object", "k", "age > 50"),
        ("object", "kk", "k <> 'zz' AND age > 50"),
        ("string", "k", "age > 50"),
    ],
    ids=["object-key", "object-predicate", "string-key"],
)
def test_pandas_lone_surrogate_never_raises_after_the_charge(
    dtype: str, key: str, where: str
) -> None:
    """Person 1000's text is ``'\\udcff'``. Before a fix: EngineError after the charge on D,
    released on D'. Safe: the same outcome on both (e.g. the text re-encoded with
    ``errors='replace'`` at registration, like invalid UTF-8 in Parquet)."""
    outcomes = []
    for with_person in (True, False):
        texts = ["ok"] * 10 + (["\udcff"] if with_person else [])
        n = len(texts)
        df = pd.DataFrame(
            {
                "uid": range(n),
                "age": [0] * 10 + [99] * (n - 10),
                "k": pd.Series(texts, dtype=dtype),
                "kk": [0] * n,
            }
        )
        outcomes.append(_outcome(df, key=key, where=where))
    assert outcomes[0] == outcomes[1], outcomes


# ------------------------------------------------------------ held: Spark subqueries


def _tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: 40 persons whose ``ref`` is person 1000 (``secret = 1``), plus person 1000; D' = D
    without person 1000."""
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    d = pd.DataFrame(rows)
    return d, d[d.user_id != 1000].reset_index(drop=True)


SUBQUERIES = {
    "lateral": "SELECT d.user_id, d.ref, CAST(l.c AS BIGINT) AS secret FROM parquet.`{dec}` d, "
    "LATERAL (SELECT count(*) c FROM parquet.`{p}` WHERE user_id = 1000) l",
    "in-join-condition": "SELECT d.user_id, d.ref, CAST(1 AS BIGINT) AS secret "
    "FROM parquet.`{dec}` d JOIN parquet.`{dec}` e "
    "ON d.user_id IN (SELECT user_id FROM parquet.`{p}`)",
    "case-in-window": "SELECT user_id, ref, CAST(max(CASE WHEN (SELECT count(*) FROM "
    "parquet.`{p}` WHERE user_id = 1000) > 0 THEN 1 ELSE 0 END) OVER "
    "(PARTITION BY ref) AS BIGINT) AS secret FROM parquet.`{dec}`",
}


def _decoy(tmp_path: Path) -> str:
    decoy = tmp_path / "decoy.parquet"
    pd.DataFrame({"user_id": [1000], "ref": [5], "secret": [0]}).to_parquet(decoy, index=False)
    return str(decoy)


@pytest.mark.parametrize("kind", sorted(SUBQUERIES))
def test_other_subquery_shapes_are_refused(spark: Any, tmp_path: Path, kind: str) -> None:
    """Held: refused before the charge on D and D' (classic and Connect)."""
    decoy = _decoy(tmp_path)
    for i, table in enumerate(_tables()):
        private = tmp_path / f"private{i}.parquet"
        table.to_parquet(private, index=False)
        session = dpa.Session(
            spark, table=str(private), privacy_unit="user_id", budget=Budget(epsilon=10.0)
        )
        got = join_count(session, spark.sql(SUBQUERIES[kind].format(p=private, dec=decoy)))
        assert isinstance(got, str) and got.startswith("PrivacyParameterError"), got
        assert session.budget.spent[0] == 0


def test_cached_private_frame_in_a_public_join_is_refused(spark: Any, tmp_path: Path) -> None:
    """Held: the decoy joined with a cached count of person 1000's rows (inputFiles() lists
    only the decoy) is refused: ``InMemoryRelation`` is off the allow-list."""
    decoy = _decoy(tmp_path)
    for i, table in enumerate(_tables()):
        private = tmp_path / f"private{i}.parquet"
        table.to_parquet(private, index=False)
        session = dpa.Session(
            spark, table=str(private), privacy_unit="user_id", budget=Budget(epsilon=10.0)
        )
        c = spark.sql(
            f"SELECT CAST(count(*) AS BIGINT) AS secret FROM parquet.`{private}` "
            "WHERE user_id = 1000"
        )
        c.cache()
        try:
            c.count()
            public = spark.read.parquet(decoy).select("user_id", "ref").crossJoin(c)
            got = join_count(session, public)
        finally:
            c.unpersist()
        assert isinstance(got, str) and got.startswith("PrivacyParameterError"), got


def test_checkpointed_private_frame_is_refused(classic_spark: Any, tmp_path: Path) -> None:
    """Held: a locally checkpointed frame of the private file prints as ``LogicalRDD``."""
    decoy = _decoy(tmp_path)
    private = tmp_path / "private.parquet"
    _tables()[0].to_parquet(private, index=False)
    session = dpa.Session(
        classic_spark, table=str(private), privacy_unit="user_id", budget=Budget(epsilon=10.0)
    )
    c = (
        classic_spark.read.parquet(str(private))
        .where("user_id = 1000")
        .selectExpr("CAST(secret AS BIGINT) AS secret")
        .localCheckpoint()
    )
    public = classic_spark.read.parquet(decoy).select("user_id", "ref").crossJoin(c)
    got = join_count(session, public)
    assert isinstance(got, str) and got.startswith("PrivacyParameterError"), got


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT size(filter(array(1), x -> x IN (SELECT user_id FROM parquet.`{p}`))) AS s",
        "SELECT * FROM VALUES ((SELECT count(*) FROM parquet.`{p}`)) v(c)",
    ],
    ids=["higher-order", "values"],
)
def test_spark_rejects_subqueries_in_lambdas_and_values(
    classic_spark: Any, tmp_path: Path, sql: str
) -> None:
    """Held by Spark itself: an analysis error, before dpkit sees the frame."""
    private = tmp_path / "private.parquet"
    _tables()[0].to_parquet(private, index=False)
    with pytest.raises(Exception, match="UNSUPPORTED_SUBQUERY_EXPRESSION_CATEGORY"):
        classic_spark.sql(sql.format(p=private))


# ------------------------------------------------------------ held: DuckDB date/time keys


def _duck_parquet(path: Path, sql: str) -> str:
    duckdb.connect().execute(f"COPY ({sql}) TO '{path}' (FORMAT parquet)")
    return str(path)


def _exact_keys(path: str) -> list[tuple[Any, int]] | None:
    s = dpa.Session(path, privacy_unit="uid", budget=Budget(epsilon=10.0, delta=1e-5))
    try:
        p = (
            s.query()
            .group_by("k")
            .bound(max_partitions=1, max_rows_per_partition=1)
            .agg(n=dpa.count())
            .prepare(epsilon=1.0, delta=1e-6)
        )
        s.validate(p)
    except DPKitError:
        return None
    r = p.exact(s.engine)
    return [(k[0], int(n)) for k, n in zip(r.keys, r.values["n:n"], strict=True)]


KEYS = {
    # (100 persons' key, person 1000's key, distinct keys expected / refused = None)
    "timestamptz+inf": ("TIMESTAMPTZ '2024-01-01 00:00:00+00'", "'infinity'::TIMESTAMPTZ"),
    "date-past-9999": ("DATE '9999-12-31'", "DATE '10000-01-01'"),
    "timestamp-past-9999": (
        "TIMESTAMP '9999-12-31 23:59:59.999999'",
        "TIMESTAMP '10000-01-01 00:00:00'",
    ),
    # the last instant read as such (later ones are NULL: docs/special-values.md)
    "timestamptz-past-9999": (
        "TIMESTAMPTZ '9999-12-30 23:59:59.999999+00'",
        "TIMESTAMPTZ '10000-01-01 00:00:00+00'",
    ),
    "timestamp_ns-sub-us": (
        "TIMESTAMP_NS '2024-01-01 00:00:00.000000001'",
        "TIMESTAMP_NS '2024-01-01 00:00:00.000000002'",
    ),
    "timestamp_ns+inf": ("TIMESTAMP_NS '2024-01-01 00:00:00'", "'infinity'::TIMESTAMP_NS"),
    "timetz": ("'12:00:00+00'::TIMETZ", "'12:00:00+01'::TIMETZ"),
}


@pytest.mark.parametrize("kind", sorted(KEYS))
def test_duckdb_date_time_keys_stay_distinct_or_are_refused(tmp_path: Path, kind: str) -> None:
    """Held: 2 engine groups (100 and 1) keep 2 distinct keys, or the key is refused before
    the charge; and ``where("age > 50")`` releases on D and D' alike."""
    base, extra = KEYS[kind]
    paths = [
        _duck_parquet(
            tmp_path / f"{tag}.parquet",
            f"SELECT i AS uid, 0 AS age, {base} AS k FROM range(100) t(i)"
            + (f" UNION ALL SELECT 1000, 99, {extra}" if tag == "d" else ""),
        )
        for tag in ("d", "dp")
    ]
    got = _exact_keys(paths[0])
    if got is not None:
        assert sorted(n for _, n in got) == [1, 100], got
        assert len({k for k, _ in got}) == 2, got
    assert _outcome(paths[0]) == _outcome(paths[1])


# ------------------------------------------------------------ held: invalid UTF-8 text


def _bad(raw: list[bytes]) -> pa.Array:
    return pa.array(raw, pa.binary()).view(pa.string())  # no UTF-8 check on the way


def _utf8_table(with_person: bool) -> pa.Table:
    raw = [b"ok"] * 10 + ([b"\xff\xfe"] if with_person else [])
    n = len(raw)
    return pa.table(
        {
            "uid": list(range(n)),
            "uids": _bad([b"u%d" % i for i in range(10)] + ([b"\xff"] if with_person else [])),
            "age": [0] * 10 + [99] * (n - 10),
            "k": _bad(raw),
            "kk": [0] * n,
            "l": pa.array([[x] for x in raw], pa.list_(pa.binary())).cast(
                pa.list_(pa.string()), safe=False
            ),
        }
    )


UTF8_CASES = {
    "dictionary-key": ({"use_dictionary": True}, {}),
    "like": ({"use_dictionary": True}, {"key": "kk", "where": "k LIKE '%x%' OR age > 50"}),
    "privacy-unit": ({"use_dictionary": True}, {"key": "kk", "unit": "uids"}),
    "list": ({"use_dictionary": True}, {"key": "kk", "where": "len(l) > 0 AND age > 50"}),
    "plain-with-statistics": (
        {"use_dictionary": False, "write_statistics": True},
        {"key": "kk", "where": "k = 'ok' OR age > 50"},
    ),
}


@pytest.mark.parametrize("kind", sorted(UTF8_CASES))
def test_parquet_invalid_utf8_variants_release_alike(tmp_path: Path, kind: str) -> None:
    """Held: released on D and D' alike, the same budget each (epsilon 1, the count
    threshold's delta)."""
    write, query = UTF8_CASES[kind]
    outcomes = []
    for tag, with_person in (("d", True), ("dp", False)):
        path = tmp_path / f"{tag}.parquet"
        pq.write_table(_utf8_table(with_person), path, **write)
        outcomes.append(_outcome(str(path), **query))
    assert outcomes == [("released", _charged())] * 2, outcomes


def test_arrow_table_invalid_utf8_releases_alike() -> None:
    """Held: an Arrow table source with invalid UTF-8 in the key releases on D and D'."""
    outcomes = [_outcome(_utf8_table(w).drop(["l"])) for w in (True, False)]
    assert outcomes == [("released", _charged())] * 2, outcomes
