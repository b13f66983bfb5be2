"""CSV sources are parsed line by line: one malformed line affects only itself."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

import dpkit.analytics as dpa
from dpkit.accounting import Budget
from dpkit.analytics._plan import Source
from dpkit.analytics.engines._compiler import source_sql

# One connection for the module: opening a DuckDB connection costs more than reading a small
# file, and the property test below reads one file per example (a read leaves no state behind).
_CON = duckdb.connect()


def _read(path: Path, columns: tuple[str, ...]) -> list[tuple[object, ...]]:
    from_sql = source_sql(Source(kind="csv", location=str(path)), csv_columns=columns)
    return _CON.execute(f"SELECT * FROM {from_sql.sql(dialect='duckdb')}").fetchall()


def _exact_count(path: Path) -> int:
    s = dpa.Session(str(path), privacy_unit="u", budget=Budget(epsilon=10.0))
    q = s.query().bound(max_partitions=1, max_rows_per_partition=1).agg(n=dpa.count())
    return int(s.engine.execute(q.prepare(epsilon=1.0).plan).values["n:n"][0])


def test_unterminated_quote_swallows_no_other_line(tmp_path: Path) -> None:
    rows = [f"{i},{i % 7}" for i in range(1, 101)]
    d, d1 = tmp_path / "d.csv", tmp_path / "d1.csv"
    d.write_text("u,v\n" + "\n".join(rows) + "\n")
    for bad in ('101,"', '101,"abc', '101,"a""', '"101,5', '101,"x"y'):
        d1.write_text(f"u,v\n{bad}\n" + "\n".join(rows) + "\n")
        # the malformed line is dropped; every other unit's line is read as before
        assert _exact_count(d) == _exact_count(d1) == 100, bad
        assert _read(d1, ("u", "v")) == _read(d, ("u", "v"))


def test_quoted_fields_on_a_normal_file(tmp_path: Path) -> None:
    p = tmp_path / "q.csv"
    p.write_bytes(
        b'u,name,v\r\n1,"Smith, J.",3\r\n2,"say ""hi""",4\r\n3,"",\r\n4,a"b,5\r\n'
        b"5,x,y,extra\r\n6\r\n"
    )
    assert _read(p, ("u", "name", "v")) == [
        ("1", "Smith, J.", "3"),
        ("2", 'say "hi"', "4"),
        ("3", "", None),
        ("4", 'a"b', "5"),
        ("5", "x", "y"),
    ]
    s = dpa.Session(str(p), privacy_unit="u", budget=Budget(epsilon=10.0))
    q = (
        s.query()
        .group_by("name", keys=["Smith, J.", 'say "hi"'])
        .bound(max_partitions=1, max_rows_per_partition=1)
        .agg(n=dpa.count())
    )
    res = s.engine.execute(q.prepare(epsilon=1.0).plan)
    assert dict(zip(res.keys, res.values["n:n"], strict=True)) == {
        ("Smith, J.",): 1,
        ('say "hi"',): 1,
    }


_FIELD = st.text(alphabet=st.sampled_from('ab ,"x1'), max_size=6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(_FIELD, min_size=3, max_size=3), min_size=1, max_size=8))
def test_lines_written_by_python_csv_read_back_exactly(
    tmp_path_factory: object, rows: list[list[str]]
) -> None:
    # reference: Python's csv module writes RFC 4180 lines (quoting what needs quoting)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["a", "b", "c"])
    w.writerows(rows)
    path = Path(str(tmp_path_factory.mktemp("h"))) / "h.csv"  # type: ignore[attr-defined]
    path.write_text(buf.getvalue())
    back = list(csv.reader(io.StringIO(buf.getvalue())))[1:]
    # empty unquoted fields are NULL; csv.writer writes '' unquoted except a lone empty field
    got = _read(path, ("a", "b", "c"))
    assert [tuple("" if v is None else v for v in r) for r in got] == [tuple(r) for r in back]


def test_wide_header(tmp_path: Path) -> None:
    n = 1500
    p = tmp_path / "w.csv"
    p.write_text(
        ",".join(f"c{i}" for i in range(n))
        + "\n"
        + ",".join(map(str, range(n)))
        + "\n"
        + '"1,'
        + ",".join(map(str, range(n)))
        + "\n"
    )
    got = _read(p, tuple(f"c{i}" for i in range(n)))
    assert got == [tuple(str(i) for i in range(n))]


def test_a_bare_carriage_return_changes_no_other_line(tmp_path: Path) -> None:
    # Regression: the reader ended a line at a bare "\r" and began the next one with the "\n"
    # of the file's "\r\n", so each added "101,1\r" line renamed the next victim unit
    # ("7" -> "\n7") and defeated contribution bounding (exact counts 30 vs 61, certified
    # epsilon >= 3.30 against a claim of 1).
    victims = [f"{i},0" for i in range(1, 31)]
    d, d1 = tmp_path / "d.csv", tmp_path / "d1.csv"
    d.write_bytes(("u,v\r\n" + "".join(f"{r}\r\n{r}\r\n" for r in victims)).encode())
    d1.write_bytes(("u,v\r\n" + "".join(f"{r}\r\n101,1\r\r\n{r}\r\n" for r in victims)).encode())
    assert _exact_count(d) == 30
    assert _exact_count(d1) == 31  # the added unit counts once, every victim as before
    ids = {row[0] for row in _read(d1, ("u", "v"))}
    assert ids == {str(i) for i in range(1, 31)} | {"101"}
    # the same on "\n" files, and a bare "\r" inside a line splits only that line
    d1.write_text("u,v\n" + "".join(f"{r}\n101,1\r999,1\n{r}\n" for r in victims))
    assert {row[0] for row in _read(d1, ("u", "v"))} - {"101", "999"} == {
        str(i) for i in range(1, 31)
    }
