"""The FROM item of a statement: a table, a Parquet scan, or a CSV file read line by line.

Nothing is sniffed from the data: a source's columns and types are public metadata, so no
failure can depend on a row after the charge (a CSV's columns are all text; Parquet files of one
location must agree on their types, see :func:`refuse_mixed_file_types`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlglot import exp

from dpkit.analytics._plan import Source
from dpkit.analytics.engines._compiler.nodes import P, aliased, colref, func, ident
from dpkit.errors import EngineError, PlanError

__all__ = ["csv_raw_lines", "refuse_mixed_file_types", "source_sql"]

# One RFC 4180 field: quoted ("" inside stands for one quote), or unquoted and not starting
# with a quote (it may hold quotes further on), or empty.
_CSV_FIELD = r'"(?:[^"]|"")*"|[^,"][^,]*|'
# Separator of the raw read: four control bytes that text data does not hold (a line holding
# them would be cut there, affecting that line only).
_RAW_DELIM = "\x1c\x1d\x1e\x1f"
_RE_MAX_REPEAT = 1000  # RE2's limit on a counted repetition


def _repeat(unit: str, k: int) -> str:
    """A regular expression matching ``unit`` exactly ``k`` times (within RE2's limits)."""
    if k == 0:
        return ""
    q, r = divmod(k, _RE_MAX_REPEAT)
    out = f"(?:(?:{unit}){{{_RE_MAX_REPEAT}}}){{{q}}}" if q else ""
    return out + (f"(?:{unit}){{{r}}}" if r else "")


def _csv_lines(loc: exp.Expression, columns: tuple[str, ...]) -> exp.Expression:
    """A CSV file read line by line, each physical line parsed on its own.

    The engine reads every line after the header as one text value (no quote character, a
    separator that text does not hold), so no line can change how another is read: an
    unterminated quote on one line cannot swallow the lines after it. A line is kept only if it
    is a full match of ``F(,F){n-1}(,F)*`` with ``F`` an RFC 4180 field (:data:`_CSV_FIELD`)
    and ``n`` the header's column count (fields beyond the ``n``-th are ignored); field ``j``
    is then group ``j`` of ``^(F),(F),...,(F)`` (``n`` groups, one regular expression for the
    whole line, read once per line), which is unique on a matching line (a quoted field ends
    at the first quote that is not doubled, an unquoted one at the next comma). One
    expression per column, ``^(?:F,){j}(F)``, would cost time quadratic in the column count
    (about two minutes for 1,500 columns). Quoted fields lose their
    quotes and have ``""`` turned into ``"``; an empty unquoted field is NULL. Consequences: a
    quoted field cannot span lines, and a line with too few fields, a stray or unterminated
    quote, or invalid UTF-8 is dropped (it affects only itself). Nothing is sniffed from the data;
    every column is text.
    """
    line = colref(P + "line")
    more = f",(?:{_CSV_FIELD})"
    full = f"^(?:{_CSV_FIELD}){_repeat(more, len(columns) - 1)}(?:{more})*$"
    groups = ",".join(f"({_CSV_FIELD})" for _ in columns)
    names = [f"f{j}" for j in range(len(columns))]
    fields = colref(P + "fields")
    items: list[exp.Expression] = []
    for j, name in enumerate(columns):
        f = func("struct_extract", fields.copy(), exp.Literal.string(names[j]))
        quoted = exp.Like(this=f.copy(), expression=exp.Literal.string('"%'))
        inner = exp.Substring(
            this=f.copy(),
            start=exp.Literal.number(2),
            length=exp.Sub(this=exp.Length(this=f.copy()), expression=exp.Literal.number(2)),
        )
        value = exp.Case(
            ifs=[
                exp.If(
                    this=quoted,
                    true=func("replace", inner, exp.Literal.string('""'), exp.Literal.string('"')),
                ),
                exp.If(
                    this=exp.EQ(this=f.copy(), expression=exp.Literal.string("")), true=exp.Null()
                ),
            ],
            default=f.copy(),
        )
        items.append(aliased(value, ident(name)))
    split = func(
        "regexp_extract",
        line.copy(),
        exp.Literal.string(f"^{groups}"),
        exp.Array(expressions=[exp.Literal.string(n) for n in names]),
    )
    matching = (
        exp.select(aliased(split, ident(P + "fields")))
        .from_(csv_raw_lines(loc))
        .where(func("regexp_full_match", line.copy(), exp.Literal.string(full)))
    )
    q = exp.select(*items).from_(
        exp.Subquery(this=matching, alias=exp.TableAlias(this=ident(P + "csv_fields")))
    )
    return exp.Subquery(this=q, alias=exp.TableAlias(this=ident(P + "csv")))


def csv_raw_lines(loc: exp.Expression, *, filename: bool = False) -> exp.Table:
    """The raw line reader of :func:`_csv_lines`: every line after each file's header as one
    text column ``__dpk_line`` (and, with ``filename``, the engine's name of the file it
    came from, column ``filename``)."""
    raw_opts = [
        exp.EQ(this=exp.column("auto_detect"), expression=exp.Boolean(this=False)),
        exp.EQ(this=exp.column("header"), expression=exp.Boolean(this=True)),
        exp.EQ(
            this=exp.column("columns"),
            expression=exp.Struct(
                expressions=[
                    exp.PropertyEQ(
                        this=exp.Literal.string(P + "line"),
                        expression=exp.Literal.string("VARCHAR"),
                    )
                ]
            ),
        ),
        exp.EQ(this=exp.column("delim"), expression=exp.Literal.string(_RAW_DELIM)),
        exp.EQ(this=exp.column("quote"), expression=exp.Literal.string("")),
        exp.EQ(this=exp.column("escape"), expression=exp.Literal.string("")),
        # an explicit terminator: left to itself the reader ends a line at a bare "\r" and
        # then starts the next line with the "\n" of a following "\r\n", so one unit's
        # "...\r" line could change (rename or drop) the unit on the line after it
        exp.EQ(this=exp.column("new_line"), expression=exp.Literal.string("\\n")),
        exp.EQ(this=exp.column("ignore_errors"), expression=exp.Boolean(this=True)),
        exp.EQ(this=exp.column("strict_mode"), expression=exp.Boolean(this=False)),
    ]
    if filename:
        raw_opts.append(exp.EQ(this=exp.column("filename"), expression=exp.Boolean(this=True)))
    return exp.Table(this=func("read_csv", loc, *raw_opts))


def refuse_mixed_file_types(location: str, schemas: Mapping[str, Mapping[str, str]]) -> None:
    """Refuse the files of one Parquet ``location`` unless they all have the same top-level
    columns with the same types; ``schemas`` maps each file to its column -> type (read from
    the file's footer, never from its rows; nested types compared whole).

    Rule: every file has the columns of the first file (in sorted order), each with the same
    type, and no other column; the order of the columns does not matter. Engines take a
    glob's schema from one file and cast or convert the other files' columns while they scan:
    a text column holding ``'200'`` casts to a number and one holding ``'x7'`` fails the
    statement, or a file of another type fails as soon as one of its rows is read, after the
    charge and because of one person's row. One type per column is the simple rule (it also
    refuses a widening that could not fail, such as ``INTEGER`` beside ``BIGINT``)."""
    if len(schemas) < 2:
        return
    first, *others = sorted(schemas)
    want = schemas[first]
    for other in others:
        got = schemas[other]
        for name in [*want, *(n for n in got if n not in want)]:
            if want.get(name) != got.get(name):
                raise EngineError(
                    f"the Parquet files of {location!r} disagree on column {name!r}: "
                    f"{want.get(name, 'no such column')} in {first!r}, "
                    f"{got.get(name, 'no such column')} in {other!r}. The engine would convert "
                    "one file's values to the other's type while it reads the rows, and a row "
                    "that does not convert would fail the query after the budget is spent. "
                    "Rewrite the files with one type per column, or read them yourself with "
                    "explicit casts into a table (e.g. DuckDB's read_parquet(..., "
                    "union_by_name=true)). Nothing was spent."
                )


def source_sql(
    source: Source,
    *,
    registered: frozenset[str] = frozenset(),
    dialect: str = "duckdb",
    csv_columns: Sequence[str] = (),
) -> exp.Expression:
    """The FROM item of ``source``: a table function over a path, or a (quoted) table name."""
    if not isinstance(source.location, str) or not source.location:
        raise PlanError(f"source location must be a non-empty string, got {source.location!r}")
    if "\x00" in source.location:
        raise PlanError("source location must not contain NUL characters")
    loc = exp.Literal.string(source.location)
    if source.kind == "parquet":
        # Invalid UTF-8 in a string column: read with each bad byte as "?" rather than failing
        # the scan (a failure would depend on the rows and come after the charge).
        return exp.Table(
            this=func(
                "read_parquet",
                loc,
                exp.EQ(
                    this=exp.column("utf8_validation"), expression=exp.Literal.string("replace")
                ),
            )
        )
    if source.kind == "csv":
        if not csv_columns:
            raise PlanError("a CSV source needs its header's column names")
        return _csv_lines(loc, tuple(csv_columns))
    if source.kind == "table":
        if source.location in registered:
            return exp.Table(this=ident(source.location))
        try:
            table = exp.to_table(source.location, dialect=dialect)
        except Exception as exc:
            raise PlanError(f"not a table name: {source.location!r}") from exc
        parts = [table.args.get(a) for a in ("catalog", "db", "this")]
        if not all(p is None or isinstance(p, exp.Identifier) for p in parts):
            raise PlanError(f"not a plain table name: {source.location!r}")
        return exp.Table(
            **{
                a: ident(p.name)
                for a, p in zip(("catalog", "db", "this"), parts, strict=True)
                if p is not None
            }
        )
    raise PlanError(f"unknown source kind {source.kind!r}")
