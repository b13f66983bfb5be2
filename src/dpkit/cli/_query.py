"""``dpkit query``: one private aggregation over a Parquet or CSV file, from the shell.

Example::

    dpkit query people.parquet --privacy-unit user_id --epsilon 1 --delta 1e-6 \\
        --group-by region --count --mean income:0:500000

Every query says who it protects: ``--privacy-unit COL`` names the column identifying a person
(all of a person's rows are bounded together), ``--rows-are-people`` declares that each row is a
different person. One of the two is required (with ``--sql``, the metadata's ``privacy_unit``
counts as the first), and the output says which one was used.

The query spends exactly ``--epsilon`` (and ``--delta``): a budget of that size is opened and
charged once. Without ``--delta`` the release is pure (discrete Laplace noise) and grouping needs
public ``--keys``; with ``--delta`` the noise is discrete Gaussian and groups without public keys
are chosen by private partition selection. Each privacy unit keeps at most
``--max-partitions`` groups and ``--max-rows-per-partition`` rows per group (both default to 1).

``--sql "SELECT ..." --metadata meta.yaml`` answers a SQL query instead (see docs/sql.md); the
privacy unit, contribution limits, bounds and public tables then come from the metadata.

Released values are data: keys and column names are printed as plain text, never read as the
terminal renderer's markup. What is decided before the charge (the options, the output path) is
checked before it; once the budget is spent the answer is always printed or written, if need be
as plain CSV on standard output.
"""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from dpkit.cli import PRIVACY_UNIT_OPTION, ROWS_ARE_PEOPLE_OPTION
from dpkit.errors import DPKitError

__all__ = ["parse_keys", "parse_value_spec", "query"]


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise typer.BadParameter(f"{what}: {text!r} is not a number") from None


def parse_value_spec(spec: str, option: str) -> tuple[str, float, float]:
    """``column:lower:upper`` -> (column, lower, upper)."""
    parts = spec.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise typer.BadParameter(f"{option} takes column:lower:upper, got {spec!r}")
    return parts[0], _number(parts[1], option), _number(parts[2], option)


def _key_value(text: str) -> Any:
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            continue
    return text


def parse_keys(specs: list[str], group_by: list[str]) -> dict[str, list[Any]] | None:
    """``--keys col=a,b,c`` (one per group-by column) -> {col: [values]} (cartesian product)."""
    if not specs:
        return None
    out: dict[str, list[Any]] = {}
    for spec in specs:
        col, sep, values = spec.partition("=")
        if not sep or not col or not values:
            raise typer.BadParameter(f"--keys takes column=v1,v2,..., got {spec!r}")
        out[col] = [_key_value(v) for v in values.split(",")]
    if set(out) != set(group_by):
        raise typer.BadParameter(
            f"--keys must give values for every --group-by column {group_by}, got {list(out)}"
        )
    return out


def distinct_name(privacy_unit: str | None) -> str:
    """The output column of ``--count-distinct``: ``distinct_<unit column>``, or
    ``distinct_rows`` when each row is a person (then it counts rows)."""
    return f"distinct_{privacy_unit}" if privacy_unit is not None else "distinct_rows"


def _build_aggregates(
    count: bool,
    count_distinct: bool,
    sums: list[str],
    means: list[str],
    variances: list[str],
    stds: list[str],
    quantiles: list[str],
    histograms: list[str],
    privacy_unit: str | None,
) -> dict[str, Any]:
    import dpkit.analytics as dpa

    aggs: dict[str, Any] = {}
    if count:
        aggs["count"] = dpa.count()
    if count_distinct:
        aggs[distinct_name(privacy_unit)] = dpa.count_distinct()
    for option, specs, make in (
        ("--sum", sums, dpa.sum),
        ("--mean", means, dpa.mean),
        ("--variance", variances, dpa.variance),
        ("--std", stds, dpa.std),
    ):
        for spec in specs:
            col, lo, hi = parse_value_spec(spec, option)
            aggs[f"{option[2:]}_{col}"] = make(col, bounds=(lo, hi))
    for spec in quantiles:
        parts = spec.split(":")
        if len(parts) != 4:
            raise typer.BadParameter(f"--quantile takes column:q1,q2,...:lower:upper, got {spec!r}")
        qs = [_number(q, "--quantile") for q in parts[1].split(",")]
        aggs[f"q_{parts[0]}"] = dpa.quantile(
            parts[0], qs, bounds=(_number(parts[2], "--quantile"), _number(parts[3], "--quantile"))
        )
    for spec in histograms:
        col, sep, edges = spec.partition(":")
        if not sep:
            raise typer.BadParameter(f"--histogram takes column:e0,e1,..., got {spec!r}")
        aggs[f"hist_{col}"] = dpa.histogram(
            col, edges=[_number(e, "--histogram") for e in edges.split(",")]
        )
    if not aggs:
        raise typer.BadParameter("ask for at least one aggregate (--count, --mean col:lo:hi, ...)")
    return aggs


def _fmt(x: Any) -> str:
    if isinstance(x, (int,)) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return f"{int(x):,}"
    if isinstance(x, float):
        return f"{x:,.4g}" if abs(x) >= 1e6 or abs(x) < 1e-3 else f"{x:,.2f}"
    return str(x)


def render(frame: Any, group_by: list[str], console: Console, title: str) -> None:
    """The released frame as a table: each aggregate as ``estimate`` and ``[low, high]``.

    Every cell and header is a :class:`rich.text.Text`: keys and column names come from the
    data (or the user's SQL) and are shown as they are, never read as markup.
    """
    table = Table(title=Text(title))
    for g in group_by:
        table.add_column(Text(str(g)), overflow="fold")
    stats = [c for c in frame.columns if c not in group_by and not c.endswith(("_low", "_high"))]
    for c in stats:
        table.add_column(Text(str(c)), justify="right", overflow="fold")  # wrap, never "…"
    for _, row in frame.iterrows():
        cells = [Text(str(row[g])) for g in group_by]
        for c in stats:
            cell = _fmt(row[c])
            if f"{c}_low" in frame.columns:
                cell += f"\n[{_fmt(row[f'{c}_low'])}, {_fmt(row[f'{c}_high'])}]"
            cells.append(Text(cell))
        table.add_row(*cells)
    console.print(table)


def _plain(text: str, *, err: bool = False) -> None:
    """Write ``text`` as it is, whatever the terminal's encoding (unencodable characters are
    written as backslash escapes): the last resort for a released answer."""
    stream = sys.stderr if err else sys.stdout
    encoding = getattr(stream, "encoding", None) or "utf-8"
    stream.write(text.encode(encoding, "backslashreplace").decode(encoding))
    stream.flush()


def _emit(
    frame: Any, output: Path | None, to_stdout: bool, gb: list[str], console: Console, alpha: float
) -> None:
    """Print or write the released frame (after the charge: see :func:`query`)."""
    if to_stdout:
        text = (
            frame.to_csv(index=False)
            if str(output).lower() == "csv"
            else frame.to_json(orient="records", date_format="iso") + "\n"
        )
        _plain(text)
        return
    if output is not None:
        suffix = output.suffix.lower()
        if suffix == ".csv":
            frame.to_csv(output, index=False)
        elif suffix == ".parquet":
            frame.to_parquet(output, index=False)
        else:
            frame.to_json(output, orient="records", indent=1, date_format="iso")
        console.print(Text(f"wrote {len(frame)} rows to {output}"))
        return
    render(frame, gb, console, f"private result ({1 - alpha:.0%} intervals below each estimate)")


def _protects(privacy_unit: str | None, max_partitions: int, max_rows: int, sql: bool) -> str:
    """One sentence: what the release protects."""
    if privacy_unit is None:
        return (
            "protects each row, not each person (--rows-are-people): a person with "
            "several rows is less protected"
        )

    def n(k: int, what: str) -> str:
        return f"{k} {what}" + ("" if k == 1 else "s")

    limits = (
        "limits from the metadata"
        if sql
        else f"at most {n(max_partitions, 'group')}, {n(max_rows, 'row')} per group"
    )
    return f"protects each {privacy_unit}, all of its rows together ({limits})"


def _check_output(output: Path | None) -> bool:
    """Decide ``--output`` before anything is spent; True when the frame goes to stdout."""
    if output is None:
        return False
    if str(output).lower() in ("csv", "json"):
        return True
    if output.suffix.lower() not in (".csv", ".parquet", ".json"):
        raise typer.BadParameter(
            "--output takes csv or json (printed) or a file ending in .csv, .parquet or .json"
        )
    folder = output.parent if str(output.parent) else Path(".")
    if not folder.is_dir():
        raise typer.BadParameter(f"--output: no such directory {str(folder)!r}")
    if not os.access(folder, os.W_OK) or (output.exists() and not os.access(output, os.W_OK)):
        raise typer.BadParameter(f"--output: {str(output)!r} is not writable")
    return False


def _spark_engine(engine: str, remote: str | None) -> Any:
    """``None`` for DuckDB, else a Spark engine (Spark Connect at ``remote``, or the active /
    a new local SparkSession)."""
    if engine not in ("duckdb", "spark"):
        raise typer.BadParameter(f"--engine takes duckdb or spark, got {engine!r}")
    if engine == "duckdb":
        if remote is not None:
            raise typer.BadParameter("--remote needs --engine spark")
        return None
    try:
        from dpkit.analytics.engines.spark import SparkEngine

        return SparkEngine(remote=remote)
    except ImportError as exc:
        raise DPKitError(
            f"--engine spark needs pyspark 4 (dpkit's spark extra: "
            f"pip install 'pyspark[connect]>=4,<5'): {exc}"
        ) from None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    except Exception as exc:  # no Java, server not reachable: say so, no traceback
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DPKitError(f"cannot start or reach Spark: {first}") from None


def _run_with_progress(
    q: Any, spark_engine: Any, err: Console, path: str, epsilon: float, delta: float | None
) -> Any:
    """Run ``q`` on Spark with a progress bar of the release's tasks (on stderr)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    where = "Spark Connect" if spark_engine.is_connect else "Spark"
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} tasks"),
        TimeElapsedColumn(),
        console=err,
        transient=True,
    ) as bar:
        task = bar.add_task(escape(f"{where}: {path} (bounding, clamping, exact sums)"), total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        spark_engine.progress = update
        try:
            return q.run(epsilon=epsilon, delta=delta)
        finally:
            spark_engine.progress = None


def query(
    path: Annotated[str, typer.Argument(metavar="DATA", help="Parquet or CSV file (or glob)")],
    epsilon: Annotated[
        float, typer.Option("--epsilon", metavar="E", help="epsilon this query spends")
    ],
    privacy_unit: Annotated[str | None, PRIVACY_UNIT_OPTION] = None,
    rows_are_people: Annotated[bool, ROWS_ARE_PEOPLE_OPTION] = False,
    delta: Annotated[
        float | None,
        typer.Option(
            "--delta",
            metavar="D",
            help="delta this query spends (Gaussian noise; groups chosen privately)",
        ),
    ] = None,
    group_by: Annotated[
        list[str] | None,
        typer.Option("--group-by", metavar="COL", help="group by this column (repeat for several)"),
    ] = None,
    keys: Annotated[
        list[str] | None,
        typer.Option(
            "--keys",
            metavar="COL=KEYS",
            help="public keys (comma-separated) of a --group-by column, e.g. region=north,south",
        ),
    ] = None,
    where: Annotated[
        list[str] | None,
        typer.Option("--where", metavar="SQL", help='public row filter, e.g. "age >= 18"'),
    ] = None,
    max_partitions: Annotated[
        int, typer.Option("--max-partitions", metavar="N", help="groups kept per person")
    ] = 1,
    max_rows_per_partition: Annotated[
        int,
        typer.Option(
            "--max-rows-per-partition", metavar="N", help="rows kept per person and group"
        ),
    ] = 1,
    count: Annotated[bool, typer.Option("--count", help="number of rows (column count)")] = False,
    count_distinct: Annotated[
        bool,
        typer.Option(
            "--count-distinct",
            help="number of distinct persons (column distinct_COL for --privacy-unit COL)",
        ),
    ] = False,
    sums: Annotated[
        list[str] | None,
        typer.Option("--sum", metavar="COL:LO:HI", help="sum of COL clamped to [LO, HI]"),
    ] = None,
    means: Annotated[
        list[str] | None,
        typer.Option("--mean", metavar="COL:LO:HI", help="mean of COL clamped to [LO, HI]"),
    ] = None,
    variances: Annotated[
        list[str] | None,
        typer.Option("--variance", metavar="COL:LO:HI", help="variance of COL clamped to [LO, HI]"),
    ] = None,
    stds: Annotated[
        list[str] | None,
        typer.Option(
            "--std", metavar="COL:LO:HI", help="standard deviation of COL clamped to [LO, HI]"
        ),
    ] = None,
    quantiles: Annotated[
        list[str] | None,
        typer.Option(
            "--quantile",
            metavar="COL:QS:LO:HI",
            help="quantiles QS (comma-separated) of COL within [LO, HI], e.g. age:0.25,0.5:0:120",
        ),
    ] = None,
    histograms: Annotated[
        list[str] | None,
        typer.Option(
            "--histogram",
            metavar="COL:EDGES",
            help="rows per bin of COL between increasing EDGES (comma-separated), e.g. "
            "income:0,1e4,1e5",
        ),
    ] = None,
    alpha: Annotated[
        float,
        typer.Option("--alpha", metavar="A", help="the intervals have confidence level 1 - A"),
    ] = 0.05,
    output: Annotated[
        Path | None,
        typer.Option(
            "--output",
            metavar="FILE",
            help="csv or json (printed), or a file ending in .csv, .parquet or .json",
        ),
    ] = None,
    memory_limit: Annotated[
        str | None,
        typer.Option("--memory-limit", metavar="SIZE", help="DuckDB memory limit, e.g. 1GB"),
    ] = None,
    sql: Annotated[
        str | None,
        typer.Option(
            "--sql",
            metavar="QUERY",
            help="a SQL SELECT to answer privately (replaces the aggregate options)",
        ),
    ] = None,
    metadata: Annotated[
        Path | None,
        typer.Option(
            "--metadata",
            metavar="FILE",
            help="YAML/TOML file: bounds, privacy unit, limits, public tables",
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            metavar="NAME",
            help="duckdb (this machine) or spark (the path is read by Spark)",
        ),
    ] = "duckdb",
    remote: Annotated[
        str | None,
        typer.Option(
            "--remote",
            metavar="URL",
            help="Spark Connect server, sc://host:port (with --engine spark)",
        ),
    ] = None,
) -> None:
    """Release one private aggregation of a table, with confidence intervals."""
    import dpkit.analytics as dpa
    from dpkit.accounting import Budget

    console = Console()
    err = Console(stderr=True)
    gb = list(group_by or [])
    to_stdout = _check_output(output)
    if privacy_unit is not None and rows_are_people:
        raise typer.BadParameter("give --privacy-unit COL or --rows-are-people, not both")
    if sql is not None and (
        gb
        or keys
        or where
        or count
        or count_distinct
        or sums
        or means
        or variances
        or stds
        or quantiles
        or histograms
    ):
        raise typer.BadParameter(
            "--sql replaces --group-by, --keys, --where and the "
            "aggregate options: write them in the query"
        )
    spark_engine: Any = None
    try:
        meta: Any = None
        if sql is not None:
            from dpkit.analytics.sqlquery import load_metadata

            meta = load_metadata(metadata)
            declared = next((t.privacy_unit for t in meta.private_tables), None)
            if rows_are_people and declared is not None:
                raise typer.BadParameter(
                    f"--rows-are-people contradicts the metadata's privacy_unit {declared!r}"
                )
            unit = privacy_unit if privacy_unit is not None else declared
        else:
            unit = privacy_unit
        if unit is None and not rows_are_people:
            raise typer.BadParameter(
                "say who the query protects: --privacy-unit COL (the column identifying a "
                "person) or --rows-are-people (each row is a different person)"
            )
        spark_engine = _spark_engine(engine, remote)
        run_engine: Any = "duckdb" if spark_engine is None else spark_engine
        if sql is not None:
            from dpkit.analytics.session import sql_session

            session, meta = sql_session(
                path,
                meta,
                privacy_unit=unit,
                budget=Budget(epsilon=epsilon, delta=delta or 0.0),
                alpha=alpha,
                memory_limit=memory_limit,
                engine=run_engine,
            )
            q: Any = session.sql_query(sql, metadata=meta)
            gb = [o.name for o in q.translation.outputs if o.kind == "key"]
        else:
            aggs = _build_aggregates(
                count,
                count_distinct,
                list(sums or []),
                list(means or []),
                list(variances or []),
                list(stds or []),
                list(quantiles or []),
                list(histograms or []),
                unit,
            )
            key_spec = parse_keys(list(keys or []), gb)
            if gb and key_spec is None and delta is None:
                raise typer.BadParameter(
                    "grouping without public --keys uses private partition selection, which needs "
                    "--delta (e.g. --delta 1e-6); or give --keys column=v1,v2,..."
                )
            budget = Budget(epsilon=epsilon, delta=0.0 if delta is None else delta)
            # privacy_unit=None is written out: the user said --rows-are-people.
            session = dpa.Session(
                path,
                privacy_unit=unit,
                budget=budget,
                alpha=alpha,
                memory_limit=memory_limit,
                engine=run_engine,
            )
            q = session.query()
            for w in where or []:
                q = q.where(w)
            if gb:
                q = q.group_by(gb, keys=key_spec)
            if unit is not None:
                q = q.bound(
                    max_partitions=max_partitions, max_rows_per_partition=max_rows_per_partition
                )
            q = q.agg(**aggs)
        if spark_engine is None:
            with (
                err.status(escape(f"scanning {path} (bounding, clamping, exact sums) ...")),
                warnings.catch_warnings(),
            ):
                warnings.simplefilter("ignore", dpa.EmptyReleaseWarning)  # printed below
                frame = q.run(epsilon=epsilon, delta=delta)
        else:
            frame = _run_with_progress(q, spark_engine, err, path, epsilon, delta)
    except DPKitError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(code=2) from None
    finally:
        if spark_engine is not None:
            spark_engine.close()  # a Spark Connect client opened for --remote
    # The budget is spent: from here on the answer must reach the user, whatever happens.
    try:
        _emit(frame, output, to_stdout, gb, console, alpha)
    except Exception as exc:  # a display or file error must not lose a paid-for answer
        what = "write" if output is not None and not to_stdout else "draw"
        _plain(
            f"dpkit: could not {what} the result ({type(exc).__name__}: {exc}); the released "
            "rows follow as CSV.\n",
            err=True,
        )
        _plain(frame.to_csv(index=False))
    info = frame.attrs["dpkit"]
    notes = err if to_stdout else console
    spent = f"epsilon={info['epsilon']:g}" + (f", delta={info['delta']:g}" if info["delta"] else "")
    notes.print(
        Text(f"privacy spent: {spent}; {info['groups_released']} groups released"), soft_wrap=True
    )
    if info.get("note"):
        notes.print(Text(str(info["note"])), soft_wrap=True)  # why 0 groups came back
    sel = info.get("partition_selection")
    if sel and sel.get("count"):
        notes.print(
            Text(
                f"groups chosen by private partition selection: noisy {sel['count']} above "
                f"{sel['tau']} (delta={sel['delta']:.3g})"
            ),
            soft_wrap=True,
        )
    elif sel:
        notes.print(
            Text(
                f"groups chosen by private partition selection "
                f"(epsilon={sel['epsilon']:.3g}, delta={sel['delta']:.3g})"
            ),
            soft_wrap=True,
        )
    notes.print(
        Text(_protects(unit, max_partitions, max_rows_per_partition, sql is not None)),
        soft_wrap=True,
    )
