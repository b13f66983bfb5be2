"""``dpkit query``: one private aggregation over a Parquet or CSV file, from the shell.

Example::

    dpkit query people.parquet --privacy-unit user_id --epsilon 1 --delta 1e-6 \\
        --group-by region --count --mean income:0:500000

The query spends exactly ``--epsilon`` (and ``--delta``): a budget of that size is opened and
charged once. Without ``--delta`` the release is pure (discrete Laplace noise) and grouping needs
public ``--keys``; with ``--delta`` the noise is discrete Gaussian and groups without public keys
are chosen by private partition selection. Each privacy unit keeps at most
``--max-partitions`` groups and ``--max-rows-per-partition`` rows per group (both default to 1).

``--sql "SELECT ..." --metadata meta.yaml`` answers a SQL query instead (see docs/sql.md); the
privacy unit, contribution limits, bounds and public tables then come from the metadata.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

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


def _build_aggregates(count: bool, count_distinct: bool, sums: list[str], means: list[str],
                      variances: list[str], stds: list[str], quantiles: list[str],
                      histograms: list[str]) -> dict[str, Any]:
    import dpkit.analytics as dpa

    aggs: dict[str, Any] = {}
    if count:
        aggs["count"] = dpa.count()
    if count_distinct:
        aggs["units"] = dpa.count_distinct()
    for option, specs, make in (("--sum", sums, dpa.sum), ("--mean", means, dpa.mean),
                                ("--variance", variances, dpa.variance),
                                ("--std", stds, dpa.std)):
        for spec in specs:
            col, lo, hi = parse_value_spec(spec, option)
            aggs[f"{option[2:]}_{col}"] = make(col, bounds=(lo, hi))
    for spec in quantiles:
        parts = spec.split(":")
        if len(parts) != 4:
            raise typer.BadParameter(f"--quantile takes column:q1,q2,...:lower:upper, got {spec!r}")
        qs = [_number(q, "--quantile") for q in parts[1].split(",")]
        aggs[f"q_{parts[0]}"] = dpa.quantile(parts[0], qs, bounds=(
            _number(parts[2], "--quantile"), _number(parts[3], "--quantile")))
    for spec in histograms:
        col, sep, edges = spec.partition(":")
        if not sep:
            raise typer.BadParameter(f"--histogram takes column:e0,e1,..., got {spec!r}")
        aggs[f"hist_{col}"] = dpa.histogram(
            col, edges=[_number(e, "--histogram") for e in edges.split(",")])
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
    """The released frame as a table: each aggregate as ``estimate`` and ``[low, high]``."""
    table = Table(title=title)
    for g in group_by:
        table.add_column(g, overflow="fold")
    stats = [c for c in frame.columns if c not in group_by and not c.endswith(("_low", "_high"))]
    for c in stats:
        table.add_column(c, justify="right", overflow="fold")  # wrap digits, never "…"
    for _, row in frame.iterrows():
        cells = [str(row[g]) for g in group_by]
        for c in stats:
            cell = _fmt(row[c])
            if f"{c}_low" in frame.columns:
                cell += f"\n[{_fmt(row[f'{c}_low'])}, {_fmt(row[f'{c}_high'])}]"
            cells.append(cell)
        table.add_row(*cells)
    console.print(table)


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
        raise DPKitError(f"--engine spark needs pyspark (pip install 'dpkit[spark]'): {exc}"
                         ) from None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    except Exception as exc:  # no Java, server not reachable: say so, no traceback
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise DPKitError(f"cannot start or reach Spark: {first}") from None


def _run_with_progress(q: Any, spark_engine: Any, err: Console, path: str, epsilon: float,
                       delta: float | None) -> Any:
    """Run ``q`` on Spark with a progress bar of the release's tasks (on stderr)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    where = "Spark Connect" if spark_engine.is_connect else "Spark"
    with Progress(TextColumn("{task.description}"), BarColumn(),
                  TextColumn("{task.completed}/{task.total} tasks"), TimeElapsedColumn(),
                  console=err, transient=True) as bar:
        task = bar.add_task(f"{where}: {path} (bounding, clamping, exact sums)", total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total or None)

        spark_engine.progress = update
        try:
            return q.run(epsilon=epsilon, delta=delta)
        finally:
            spark_engine.progress = None


def query(
    path: Annotated[str, typer.Argument(help="Parquet or CSV file (or glob)")],
    epsilon: Annotated[float, typer.Option("--epsilon", help="epsilon spent by this query")],
    privacy_unit: Annotated[str | None, typer.Option(
        "--privacy-unit", help="column identifying a person (default: one row per person)")
    ] = None,
    delta: Annotated[float | None, typer.Option(
        "--delta", help="delta spent (enables Gaussian noise and partition selection)")] = None,
    group_by: Annotated[list[str] | None, typer.Option("--group-by", help="group-by column")
                        ] = None,
    keys: Annotated[list[str] | None, typer.Option(
        "--keys", help="public keys of a group-by column: column=v1,v2,...")] = None,
    where: Annotated[list[str] | None, typer.Option("--where", help="public SQL row filter")
                     ] = None,
    max_partitions: Annotated[int, typer.Option(
        "--max-partitions", help="groups kept per privacy unit")] = 1,
    max_rows_per_partition: Annotated[int, typer.Option(
        "--max-rows-per-partition", help="rows kept per privacy unit and group")] = 1,
    count: Annotated[bool, typer.Option("--count", help="number of rows")] = False,
    count_distinct: Annotated[bool, typer.Option(
        "--count-distinct", help="number of distinct privacy units")] = False,
    sums: Annotated[list[str] | None, typer.Option("--sum", help="column:lower:upper")] = None,
    means: Annotated[list[str] | None, typer.Option("--mean", help="column:lower:upper")
                     ] = None,
    variances: Annotated[list[str] | None, typer.Option(
        "--variance", help="column:lower:upper")] = None,
    stds: Annotated[list[str] | None, typer.Option("--std", help="column:lower:upper")] = None,
    quantiles: Annotated[list[str] | None, typer.Option(
        "--quantile", help="column:q1,q2,...:lower:upper")] = None,
    histograms: Annotated[list[str] | None, typer.Option(
        "--histogram", help="column:e0,e1,...,ek (bin edges)")] = None,
    alpha: Annotated[float, typer.Option("--alpha", help="1 - confidence level")] = 0.05,
    output: Annotated[Path | None, typer.Option(
        "--output", help="csv or json (printed), or a .csv, .parquet or .json file")] = None,
    memory_limit: Annotated[str | None, typer.Option(
        "--memory-limit", help="DuckDB memory limit, e.g. 1GB")] = None,
    sql: Annotated[str | None, typer.Option(
        "--sql", help="a SQL SELECT to answer privately (replaces the aggregate options)")
    ] = None,
    metadata: Annotated[Path | None, typer.Option(
        "--metadata", help="YAML/TOML file: bounds, privacy unit, limits, public tables")
    ] = None,
    engine: Annotated[str, typer.Option(
        "--engine", help="duckdb (default, this machine) or spark (the path is read by Spark)")
    ] = "duckdb",
    remote: Annotated[str | None, typer.Option(
        "--remote", help="Spark Connect server, sc://host:port (with --engine spark)")] = None,
) -> None:
    """Release one private aggregation of a table, with confidence intervals."""
    import dpkit.analytics as dpa
    from dpkit.accounting import Budget

    console = Console()
    err = Console(stderr=True)
    gb = list(group_by or [])
    to_stdout = output is not None and str(output).lower() in ("csv", "json")
    if (output is not None and not to_stdout
            and output.suffix.lower() not in (".csv", ".parquet", ".json")):
        raise typer.BadParameter(
            "--output takes csv or json (printed) or a file ending in .csv, .parquet or .json"
        )
    spark_engine: Any = None
    try:
        spark_engine = _spark_engine(engine, remote)
        run_engine: Any = "duckdb" if spark_engine is None else spark_engine
        if sql is not None:
            if (gb or keys or where or count or count_distinct or sums or means or variances
                    or stds or quantiles or histograms):
                raise typer.BadParameter("--sql replaces --group-by, --keys, --where and the "
                                         "aggregate options: write them in the query")
            from dpkit.analytics.sqlquery import sql_session

            session, meta = sql_session(path, metadata, privacy_unit=privacy_unit,
                                        budget=Budget(epsilon=epsilon, delta=delta or 0.0),
                                        alpha=alpha, memory_limit=memory_limit,
                                        engine=run_engine)
            q: Any = session.sql_query(sql, metadata=meta)
            gb = [o.name for o in q.translation.outputs if o.kind == "key"]
        else:
            aggs = _build_aggregates(count, count_distinct, list(sums or []), list(means or []),
                                     list(variances or []), list(stds or []),
                                     list(quantiles or []), list(histograms or []))
            key_spec = parse_keys(list(keys or []), gb)
            if gb and key_spec is None and delta is None:
                raise typer.BadParameter(
                    "grouping without public --keys uses private partition selection, which needs "
                    "--delta (e.g. --delta 1e-6); or give --keys column=v1,v2,..."
                )
            budget = Budget(epsilon=epsilon, delta=0.0 if delta is None else delta)
            session = dpa.Session(path, privacy_unit=privacy_unit, budget=budget, alpha=alpha,
                                  memory_limit=memory_limit, engine=run_engine)
            q = session.query()
            for w in where or []:
                q = q.where(w)
            if gb:
                q = q.group_by(gb, keys=key_spec)
            if privacy_unit is not None:
                q = q.bound(max_partitions=max_partitions,
                            max_rows_per_partition=max_rows_per_partition)
            q = q.agg(**aggs)
        if spark_engine is None:
            with err.status(f"scanning {path} (bounding, clamping, exact sums) ..."):
                frame = q.run(epsilon=epsilon, delta=delta)
        else:
            frame = _run_with_progress(q, spark_engine, err, path, epsilon, delta)
    except DPKitError as exc:
        err.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(code=2) from None
    finally:
        if spark_engine is not None:
            spark_engine.close()  # a Spark Connect client opened for --remote
    info = frame.attrs["dpkit"]
    if to_stdout:
        if str(output).lower() == "csv":
            typer.echo(frame.to_csv(index=False), nl=False)
        else:
            typer.echo(frame.to_json(orient="records"))
        return
    if output is not None:
        suffix = output.suffix.lower()
        if suffix == ".csv":
            frame.to_csv(output, index=False)
        elif suffix == ".parquet":
            frame.to_parquet(output, index=False)
        else:
            frame.to_json(output, orient="records", indent=1)
        console.print(f"wrote {len(frame)} rows to {output}")
    else:
        render(frame, gb, console,
               f"private result ({1 - alpha:.0%} intervals below each estimate)")
    spent = f"epsilon={info['epsilon']:g}" + (f", delta={info['delta']:g}" if info["delta"]
                                              else "")
    console.print(f"privacy spent: {spent}; {info['groups_released']} groups released")
    sel = info.get("partition_selection")
    if sel:
        console.print(f"groups chosen by private partition selection "
                      f"(epsilon={sel['epsilon']:.3g}, delta={sel['delta']:.3g})")
