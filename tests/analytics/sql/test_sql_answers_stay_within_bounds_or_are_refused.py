"""Regression tests from the attack review of the private SQL front end.

Each test states the promise it checks: a query is answered with per-unit contribution bounds
the noise is calibrated to, or refused (a dpkit error, nothing spent) -- never answered past the
bounds, never failing on a value of the data, never failing after the budget was charged.
Reproducers with certified audit numbers live in ``tools/reproducers/``. All checks are exact
(pre-noise aggregates, budgets, exception types): no randomness, so no false-positive rate.
"""

from __future__ import annotations

import decimal
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics.sqlquery import load_metadata
from dpkit.errors import DPKitError

# --------------------------------------------------------------- the private table as "public"

ALIAS_META = {"tables": {"people": {"privacy_unit": "user_id"}, "pub": {"public": True}}}
# Person 1000's row becomes the public attribute row of the 40 persons whose ref is 1000.
ALIAS_SQL = (
    "SELECT COUNT(*) AS n FROM people p JOIN pub ON p.ref = pub.user_id WHERE pub.secret = 1"
)


def _alias_table() -> pd.DataFrame:
    rows = [{"user_id": 1000, "ref": -1, "secret": 1}]
    rows += [{"user_id": i, "ref": 1000, "secret": 0} for i in range(40)]
    return pd.DataFrame(rows)


def _count_or_refusal(session: Any, public: Any) -> int | None:
    """The exact pre-noise count (None when the query is refused with a dpkit error)."""
    try:
        p = session.sql_query(
            ALIAS_SQL, metadata=ALIAS_META, public_tables={"pub": public}
        ).prepare(epsilon=1.0)
    except DPKitError:
        return None
    return int(p.exact(session.engine).values["n:n"][0])


def test_private_duckdb_table_is_not_joinable_under_another_case() -> None:
    """DuckDB resolves ``PEOPLE`` to table ``people``: the private rows must not enter as a
    public table (one person would move the count by 40 against a sensitivity of 1)."""
    con = duckdb.connect()
    con.register("frame", _alias_table())
    con.execute("CREATE TABLE people AS SELECT * FROM frame")
    s = dpa.Session(con, table="people", privacy_unit="user_id", budget=Budget(epsilon=1.0))
    assert _count_or_refusal(s, "people") is None  # the exact spelling is refused today
    for alias in ("PEOPLE", "People", '"people"'):
        count = _count_or_refusal(s, alias)
        assert count is None or count <= 1, (alias, count)


def test_private_file_is_not_joinable_through_a_glob(tmp_path: Path) -> None:
    path = tmp_path / "people.parquet"
    _alias_table().to_parquet(path)
    s = dpa.Session(str(path), privacy_unit="user_id", budget=Budget(epsilon=1.0))
    assert _count_or_refusal(s, str(path)) is None
    for alias in (
        str(tmp_path / "people*.parquet"),
        str(tmp_path / "peopl?.parquet"),
        str(tmp_path / "[p]eople.parquet"),
    ):
        count = _count_or_refusal(s, alias)
        assert count is None or count <= 1, (alias, count)


def test_private_file_is_not_joinable_through_a_hard_link(tmp_path: Path) -> None:
    """A hard link is the same file (same device and inode) under another real path."""
    path = tmp_path / "people.parquet"
    _alias_table().to_parquet(path)
    (tmp_path / "link.parquet").hardlink_to(path)
    s = dpa.Session(str(path), privacy_unit="user_id", budget=Budget(epsilon=1.0))
    count = _count_or_refusal(s, str(tmp_path / "link.parquet"))
    assert count is None or count <= 1, count


def test_private_frame_is_not_joinable_as_a_public_table() -> None:
    """The session's own frame passed again, or its registered name in upper case."""
    d = _alias_table()
    s = dpa.Session(d, privacy_unit="user_id", budget=Budget(epsilon=1.0))
    for alias in (d, s.table.source.location.upper()):
        count = _count_or_refusal(s, alias)
        assert count is None or count <= 1, count


def test_part_of_a_private_glob_is_not_joinable(tmp_path: Path) -> None:
    d = _alias_table()
    (tmp_path / "parts").mkdir()
    d.iloc[:1].to_parquet(tmp_path / "parts" / "p0.parquet")
    d.iloc[1:].to_parquet(tmp_path / "parts" / "p1.parquet")
    s = dpa.Session(
        str(tmp_path / "parts" / "*.parquet"), privacy_unit="user_id", budget=Budget(epsilon=1.0)
    )
    count = _count_or_refusal(s, str(tmp_path / "parts" / "p0.parquet"))
    assert count is None or count <= 1, count


# --------------------------------------------------------------- join keys and the engine


def _decimal_session(tmp_path: Path, third: decimal.Decimal, name: str) -> Any:
    keys = [decimal.Decimal(1), decimal.Decimal(2), third]
    path = tmp_path / f"{name}.parquet"
    pq.write_table(
        pa.table({"user_id": [1, 2, 3], "acct": pa.array(keys, pa.decimal128(38, 0))}), path
    )
    return dpa.Session(str(path), privacy_unit="user_id", budget=Budget(epsilon=10.0))


def _decimal_outcome(session: Any) -> tuple[str, Any]:
    accounts = pa.table(
        {"acct": pa.array([decimal.Decimal("1.0000000000")], pa.decimal128(38, 10))}
    )
    meta = {"tables": {"people": {"privacy_unit": "user_id"}, "accounts": {"public": True}}}
    try:
        session.sql(
            "SELECT COUNT(*) AS n FROM people p JOIN accounts a ON p.acct = a.acct",
            epsilon=1.0,
            metadata=meta,
            public_tables={"accounts": accounts},
        )
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}", session.spent
    return "answered", session.spent


def test_decimal_join_keys_never_fail_on_a_value(tmp_path: Path) -> None:
    """DECIMAL(38,0) joined to DECIMAL(38,10): DuckDB casts the private key to DECIMAL(38,10),
    which fails for keys of 10**28 and more. The outcome (answered, or refused before the
    charge) must be the same on neighbouring tables and the error must not print the value."""
    small = _decimal_outcome(_decimal_session(tmp_path, decimal.Decimal(3), "d"))
    big = _decimal_outcome(_decimal_session(tmp_path, decimal.Decimal(10) ** 30, "d_prime"))
    assert "1" + "0" * 30 not in big[0]
    assert big[0].split(":")[0] == small[0].split(":")[0], (small, big)
    if big[0] != "answered":
        assert not any(big[1]), big


def test_case_insensitive_collation_does_not_copy_a_row() -> None:
    """A ``VARCHAR COLLATE NOCASE`` private key matches four public keys that differ only by
    case (all unique under the public column's binary collation). With ``privacy_unit=None``
    nothing bounds the copies: one person's row must still count at most once."""
    con = duckdb.connect()
    con.execute("CREATE TABLE people (user_id INTEGER, city VARCHAR COLLATE NOCASE)")
    con.execute("INSERT INTO people VALUES (1, 'paris')")
    cities = pd.DataFrame({"city": ["paris", "Paris", "PARIS", "pAris"], "country": ["FR"] * 4})
    s = dpa.Session(con, table="people", privacy_unit=None, budget=Budget(epsilon=1.0))
    meta = {"tables": {"people": {}, "cities": {"public": True}}}
    try:
        p = s.sql_query(
            "SELECT COUNT(*) AS n FROM people p JOIN cities c ON p.city = c.city",
            metadata=meta,
            public_tables={"cities": cities},
        ).prepare(epsilon=1.0)
    except DPKitError:
        return
    assert int(p.exact(s.engine).values["n:n"][0]) <= 1


# --------------------------------------------------------------- post-processing after the charge

POST_META = {
    "tables": {
        "people": {
            "privacy_unit": "user_id",
            "columns": {"age": {"lower": 0, "upper": 100}, "region": {"keys": ["north", "south"]}},
        }
    }
}


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING region > 5",
        "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING n > 'abc'",
        "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING n BETWEEN 'a' AND 'z'",
        "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING region + 1 > 0",
        "SELECT region, COUNT(*) AS n FROM people GROUP BY region HAVING -region = 'x'",
        "SELECT QUANTILE_CONT(age, [0.25, 0.5]) AS q, COUNT(*) AS n FROM people ORDER BY q",
        "SELECT QUANTILE_CONT(age, [0.25, 0.5]) AS q, COUNT(*) AS n FROM people HAVING q > 5",
    ],
)
def test_post_processing_never_fails_after_the_charge(sql: str) -> None:
    """HAVING/ORDER BY are checked before the release: a query is answered, or refused with a
    dpkit error before anything is spent -- never a raw TypeError/KeyError after the charge
    (the analyst would pay for a release that is then thrown away)."""
    df = pd.DataFrame(
        {
            "user_id": range(50),
            "region": ["north", "south"] * 25,
            "age": [float(i) for i in range(50)],
        }
    )
    s = dpa.Session(df, privacy_unit="user_id", budget=Budget(epsilon=10.0))
    try:
        s.sql(sql, epsilon=1.0, metadata=POST_META)
    except DPKitError:
        assert not any(s.spent), s.spent
    # any other exception type fails the test by propagating


# --------------------------------------------------------------- dialect and metadata


def test_tablesample_is_not_silently_ignored() -> None:
    """``FROM people TABLESAMPLE (10 PERCENT)`` is answered today on the whole table (the
    sample is dropped): the release then describes a query the analyst did not write."""
    df = pd.DataFrame({"user_id": range(100)})
    s = dpa.Session(df, privacy_unit="user_id", budget=Budget(epsilon=1.0))
    with pytest.raises(DPKitError):
        s.sql_query("SELECT COUNT(*) AS n FROM people TABLESAMPLE (10 PERCENT)")


@pytest.mark.parametrize(
    "text",
    [
        # the privacy unit, then a later duplicate that drops it (each row becomes a person)
        "tables:\n  people:\n    privacy_unit: user_id\n    privacy_unit: null\n",
        # a public table declared twice, the second time without public: true
        "tables:\n  regions:\n    public: true\n  regions:\n    path: r.parquet\n",
        # bounds declared twice
        "tables:\n  people:\n    columns:\n      income: {lower: 0, upper: 10}\n"
        "      income: {lower: 0, upper: 1000000000}\n",
    ],
)
def test_duplicate_yaml_keys_are_errors(tmp_path: Path, text: str) -> None:
    """YAML forbids duplicate keys and PyYAML keeps the last silently; the metadata promise
    is that a mistake is an error, never a silent default."""
    p = tmp_path / "meta.yaml"
    p.write_text(text)
    with pytest.raises(DPKitError):
        load_metadata(p)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) AS n, SUM(age) AS n_low FROM people",
        "SELECT SUM(age) AS n_low, COUNT(*) AS n FROM people",
    ],
)
def test_an_output_name_never_shadows_an_interval_column(sql: str) -> None:
    """``n_low`` is the lower end of ``n``'s interval: a SELECT alias ``n_low`` must be refused
    (or renamed), never silently swapped with another column's interval (today the released
    ``n_low`` is the count's lower bound, about 196, where the sum, about 8,000, was asked)."""
    df = pd.DataFrame({"user_id": range(200), "age": [float(i % 90) for i in range(200)]})
    s = dpa.Session(df, privacy_unit="user_id", budget=Budget(epsilon=10.0))
    try:
        out = s.sql(sql, epsilon=5.0, metadata=POST_META)
    except DPKitError:
        assert not any(s.spent)
        return
    cols = list(out.columns)
    assert len(cols) == len(set(cols)), cols
    # whatever the names, both the count (~200) and the sum of ages (~8,000) are released
    # with both ends of their intervals: 2 estimates + 4 bounds
    assert len(cols) == 6, cols
