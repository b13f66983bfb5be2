"""A public table read from files must not reach the private rows under another spelling.

Whether a public path holds the private rows is decided by the files DuckDB itself reads for
each side (its glob matches names starting with a dot, ``**`` crosses directories, a directory
is read recursively, a ``file://`` URL is a local path), compared by ``(st_dev, st_ino)``.
Python's ``glob`` skips dot-files: with the private file ``data/.people.parquet``, the public
path ``data/*.parquet`` used to join the private rows as public ones, and the exact count of
the persons referencing person T moved from 0 on D to 40 on D' (sensitivity 1: epsilon 40
spent for a claim of 1). Every check is exact (pre-noise counts, refusals, budgets); nothing
here is random.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest
from _spark_helpers import join_count

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Source
from dpkit.analytics.engines import DuckDBEngine  # type: ignore[attr-defined]
from dpkit.errors import DPKitError, PrivacyParameterError

SQL = "SELECT COUNT(*) AS n FROM people p JOIN pub ON p.ref = pub.user_id WHERE pub.secret = 1"


def _neighbours() -> tuple[pd.DataFrame, pd.DataFrame]:
    """D: 40 persons referencing person 1000; D': D plus person 1000 (``secret = 1``)."""
    others = pd.DataFrame({"user_id": range(40), "ref": 1000, "secret": 0})
    target = pd.DataFrame({"user_id": [1000], "ref": [-1], "secret": [1]})
    return others, pd.concat([target, others], ignore_index=True)


def _layout(root: Path, private_rows: pd.DataFrame) -> None:
    """``data/.people.parquet`` holds the private rows, beside a public file; the same file is
    also reachable as a hard link, through a symbolically linked directory and in a
    Hive-style directory."""
    data = root / "data"
    data.mkdir(parents=True)
    private_rows.to_parquet(data / ".people.parquet")
    private_rows.head(0).to_parquet(data / "regions.parquet")
    (root / "hard").mkdir()
    (root / "hard" / ".copy.parquet").hardlink_to(data / ".people.parquet")
    private_rows.head(0).to_parquet(root / "hard" / "x.parquet")
    (root / "alias").symlink_to(data, target_is_directory=True)
    (root / "hive" / "year=2024").mkdir(parents=True)
    (root / "hive" / "year=2024" / ".p.parquet").symlink_to(data / ".people.parquet")


def _sql_count(session: Any, public: Any) -> int | str:
    """The exact SQL count with ``public`` as the metadata path of table ``pub`` (a string)
    or as its data (``public_tables``)."""
    pub: dict[str, Any] = {"public": True}
    if isinstance(public, str):
        pub["path"] = public
    meta = {"tables": {"people": {"privacy_unit": "user_id"}, "pub": pub}}
    tables = None if isinstance(public, str) else {"pub": public}
    try:
        p = session.sql_query(SQL, metadata=meta, public_tables=tables).prepare(epsilon=1.0)
        session.validate(p)
    except DPKitError as exc:
        return f"{type(exc).__name__}: {exc}"
    return int(p.exact(session.engine).values["n:n"][0])


def _outcomes(tmp_path: Path, private: str, public: str) -> list[int | str]:
    """Exact counts or refusals on D and D', through ``join_public`` and SQL metadata; the
    budget is never touched."""
    out: list[int | str] = []
    for name, rows in zip(("d", "d_prime"), _neighbours(), strict=True):
        root = tmp_path / name
        _layout(root, rows)
        budget = Budget(epsilon=10.0)
        s = dpa.Session(str(root / private), privacy_unit="user_id", budget=budget)
        where = public.format(root=root) if "{root}" in public else str(root / public)
        out += [join_count(s, where), _sql_count(s, where)]
        assert budget.spent == (0.0, 0.0)
    return out


@pytest.mark.parametrize(
    ("private", "public"),
    [
        ("data/.people.parquet", "data/*.parquet"),
        ("data/*.parquet", "data/.people.parquet"),
        ("data/.people.parquet", "data/**/*.parquet"),
        ("data/.people.parquet", "**/*.parquet"),
        ("data/.people.parquet", "data/[.]people.parquet"),
        ("data/.people.parquet", "data/[!r]*.parquet"),
        ("data/.people.parquet", "data/./*.parquet"),
        ("data/.people.parquet", "file://{root}/data/*.parquet"),
        ("data/.people.parquet", "alias/*.parquet"),
        ("data/.people.parquet", "hard/*.parquet"),
        ("data/.people.parquet", "hive/year=*/*.parquet"),
        ("data/*.parquet", "hard/.copy.parquet"),
        ("hard/*.parquet", "data/.people.parquet"),
    ],
)
def test_dot_file_private_table_is_not_public_under_a_glob(
    tmp_path: Path, private: str, public: str
) -> None:
    """Every spelling that makes DuckDB read the private file is refused before the charge,
    on D and on D' alike (it used to be answered: 0 on D, 40 on D')."""
    outcomes = _outcomes(tmp_path, private, public)
    assert all(isinstance(o, str) and o.startswith("PrivacyParameterError") for o in outcomes), (
        outcomes
    )


def test_public_glob_over_other_files_is_still_joined(tmp_path: Path) -> None:
    """A public glob that reads none of the private files is answered (the check compares
    files; it does not refuse every glob near the private file)."""
    public = pd.DataFrame({"user_id": [1000], "secret": [1]})
    counts = []
    for name, rows in zip(("d", "d_prime"), _neighbours(), strict=True):
        root = tmp_path / name
        _layout(root, rows)
        (root / "pub").mkdir()
        public.to_parquet(root / "pub" / ".one.parquet")
        s = dpa.Session(
            str(root / "data" / ".people.parquet"),
            privacy_unit="user_id",
            budget=Budget(epsilon=10.0),
        )
        counts.append(
            (
                join_count(s, str(root / "pub" / "*.parquet")),
                _sql_count(s, str(root / "pub" / "*.parquet")),
            )
        )
    assert counts == [(40, 40), (40, 40)]


def test_public_path_matching_no_file_is_refused_with_a_dpkit_error(tmp_path: Path) -> None:
    _layout(tmp_path, _neighbours()[1])
    budget = Budget(epsilon=10.0)
    s = dpa.Session(
        str(tmp_path / "data" / ".people.parquet"), privacy_unit="user_id", budget=budget
    )
    for public in ("nothing/*.parquet", "data/none*.parquet"):
        with pytest.raises(PrivacyParameterError, match="matches no file"):
            s.query().join_public(
                str(tmp_path / public), on={"ref": "user_id"}, columns={"secret": "pub_secret"}
            )
        assert _sql_count(s, str(tmp_path / public)).startswith("PrivacyParameterError")
    assert budget.spent == (0.0, 0.0)


def test_public_path_is_refused_when_the_private_table_is_a_view_over_files(tmp_path: Path) -> None:
    """A private view (or a frame registered on the connection) may read any file: a public
    path cannot be shown to hold other rows, so it is refused (it used to give 0 vs 40)."""
    outcomes = []
    for name, rows in zip(("d", "d_prime"), _neighbours(), strict=True):
        root = tmp_path / name
        _layout(root, rows)
        con = duckdb.connect()
        private = str(root / "data" / ".people.parquet").replace("'", "''")
        con.execute(f"CREATE VIEW people AS SELECT * FROM read_parquet('{private}')")
        budget = Budget(epsilon=10.0)
        s = dpa.Session(con, table="people", privacy_unit="user_id", budget=budget)
        outcomes += [
            join_count(s, str(root / "data" / "*.parquet")),
            _sql_count(s, str(root / "data" / "*.parquet")),
        ]
        assert budget.spent == (0.0, 0.0)
    assert all(isinstance(o, str) and o.startswith("PrivacyParameterError") for o in outcomes), (
        outcomes
    )


@pytest.mark.parametrize("kind", ["parquet", "csv"])
def test_engine_file_list_is_what_the_reader_reads(tmp_path: Path, kind: str) -> None:
    """``DuckDBEngine.source_files`` lists exactly the files DuckDB's reader reads (compared
    with the reader's ``filename`` column) for dot-files, ``**``, directories, ``file://``
    URLs and brace syntax (which DuckDB's glob does not expand: no file)."""
    frame = pd.DataFrame({"a": [1]})
    for rel in (".h", "x", "sub/y", "sub/.z", ".hid/w", "d.dir/p", "year=2024/q"):
        path = tmp_path / f"{rel}.{kind}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if kind == "parquet":
            frame.to_parquet(path)
        else:
            frame.to_csv(path, index=False)
    engine = DuckDBEngine()
    reader = "read_parquet" if kind == "parquet" else "read_csv"
    for loc in (
        f"{tmp_path}/*.{kind}",
        f"{tmp_path}/**/*.{kind}",
        f"{tmp_path}",
        f"{tmp_path}/",
        f"{tmp_path}/year=*/*.{kind}",
        f"file://{tmp_path}/*.{kind}",
        f"{tmp_path}/[.]h.{kind}",
        f"{tmp_path}/{{x,h}}.{kind}",
    ):
        listed = engine.source_files(Source(kind=kind, location=loc))  # type: ignore[arg-type]
        try:
            read = sorted(
                {
                    str(r[0])
                    for r in engine.connection.execute(
                        f"SELECT filename FROM {reader}(?, filename = true)", [loc]
                    ).fetchall()
                }
            )
        except duckdb.Error:
            read = []
        assert listed == read, loc
        assert [os.path.exists(p) for p in listed] == [True] * len(listed)


def test_arrow_dataset_over_the_private_file_is_not_public(tmp_path: Path) -> None:
    """A pyarrow dataset reads its files at each scan: over the private file it is the private
    table, as a public frame of a path session and as the private source of a session joined
    with a public path (both used to give 0 on D, 40 on D')."""
    import pyarrow.dataset as pads

    outcomes: list[int | str] = []
    for name, rows in zip(("d", "d_prime"), _neighbours(), strict=True):
        root = tmp_path / name
        _layout(root, rows)
        private = str(root / "data" / ".people.parquet")
        budget = Budget(epsilon=10.0)
        s = dpa.Session(private, privacy_unit="user_id", budget=budget)
        outcomes.append(join_count(s, pads.dataset(str(root / "alias" / ".people.parquet"))))
        outcomes.append(_sql_count(s, pads.dataset(str(root / "hard" / ".copy.parquet"))))
        s2 = dpa.Session(pads.dataset(private), privacy_unit="user_id", budget=budget)
        outcomes += [
            join_count(s2, str(root / "data" / "*.parquet")),
            _sql_count(s2, str(root / "hard" / "*.parquet")),
        ]
        assert budget.spent == (0.0, 0.0)
    assert all(isinstance(o, str) and o.startswith("PrivacyParameterError") for o in outcomes), (
        outcomes
    )


def test_table_name_that_duckdb_reads_as_a_file_is_not_public(tmp_path: Path) -> None:
    """A quoted name such as ``"data/.people.parquet"`` is no table of the connection: DuckDB
    reads it as that file (a replacement scan). As a public table name it reached the private
    file of a path session, and as the private table of a connection session it hid the file
    from a public path (both 0 on D, 40 on D'); both are refused before the charge."""
    outcomes: list[int | str] = []
    for name, rows in zip(("d", "d_prime"), _neighbours(), strict=True):
        root = tmp_path / name
        _layout(root, rows)
        quoted = f'"{root / "data" / ".people.parquet"}"'
        budget = Budget(epsilon=10.0)
        s = dpa.Session(
            str(root / "data" / ".people.parquet"), privacy_unit="user_id", budget=budget
        )
        outcomes += [join_count(s, quoted), join_count(s, "'" + quoted[1:-1] + "'")]
        s2 = dpa.Session(duckdb.connect(), table=quoted, privacy_unit="user_id", budget=budget)
        outcomes += [
            join_count(s2, str(root / "hard" / "*.parquet")),
            _sql_count(s2, str(root / "data" / "*.parquet")),
        ]
        assert budget.spent == (0.0, 0.0)
    assert all(isinstance(o, str) and o.startswith("PrivacyParameterError") for o in outcomes), (
        outcomes
    )
