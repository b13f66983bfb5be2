"""The DuckDB engine: runs a compiled plan as one statement and returns exact integer aggregates.

``duckdb`` is imported when an engine is created, never when :mod:`dpkit` is imported.

Memory: the engine's own connection sets ``preserve_insertion_order=false`` (a scan need not
keep file order; the plan's result never depends on it) and a spill directory, so a file larger
than ``memory_limit`` is processed out of core (DuckDB's window and aggregate operators spill).

Threads: one engine may be used by many threads at once (the curator service runs one request
per thread). On the engine's own connection each thread runs its statements on a cursor of its
own (``connection.cursor()``: the same database, a separate DuckDB client context), so
statements of different threads run in parallel and never interleave on one result. A frame
is registered (under a lock) on the connection and on every cursor made after it: a thread's
cursor is replaced at its next statement after a registration, the new one with every frame.
A connection passed in by the caller is used as it is, one engine statement at a time (its
temporary tables and frames belong to it alone).

Compiled statements are cached by the plan's shape: the plan with its salt left out, the
source's columns and types, and the registered names. The salt, a fresh secret per release, is
written into the cached statement's text when it is run (see :meth:`DuckDBEngine.compile`);
on the own connection a shape is bound by DuckDB once (:meth:`DuckDBEngine.explain`).
"""

from __future__ import annotations

import dataclasses
import tempfile
import threading
from collections.abc import Mapping
from typing import Any, Literal

from sqlglot import exp

from dpkit.analytics._column_types import type_family
from dpkit.analytics._object_text import pandas_objects_as_text, polars_objects_as_text
from dpkit.analytics._plan import EngineResult, Plan, Source, sparse_or_dense
from dpkit.analytics._sources import Origin, file_source, shares_files
from dpkit.analytics._sql import text_comparison_refusal
from dpkit.analytics.engines._compiler import (
    DUCKDB,
    DUCKDB_MD5,
    CompiledQuery,
    DialectProfile,
    OutputMeasure,
    PlanError,
    compile_plan,
    refuse_mixed_file_types,
    source_sql,
)
from dpkit.analytics.engines._compiler.nodes import P
from dpkit.analytics.engines._protocol import Checked, EngineError
from dpkit.errors import DPKitError, PrivacyParameterError

__all__ = ["DuckDBEngine", "EngineError", "SharedRanking"]


def _frame_to_scannable(frame: Any) -> Any:
    """Turn a pandas / Polars (eager or lazy) / Arrow object into something DuckDB scans.

    Columns of Python objects (pandas ``object``, categories of objects, Polars ``Object``)
    are text, decided by their dtype alone, each value written by
    :func:`~dpkit.analytics._object_text.object_text` (values Python holds equal, such as
    ``1``, ``1.0``, ``True`` and ``Decimal('1.00')``, or ``0.0`` and ``-0.0``, get one text;
    missing values and NaN are NULL): DuckDB would otherwise guess an object column's type from
    a sample (and fail on a later row of another type), ``str`` would give equal values several
    texts, and Polars sends objects as memory addresses. Text columns held by Python
    (``object``, ``string`` with Python storage, categories of text) are then re-encoded as
    UTF-8 with each lone surrogate (what ``surrogateescape`` makes of an invalid byte) replaced
    by ``?``: DuckDB fails on such a string while it scans the row, after the charge and only
    when that row is read. The same ``?`` as for invalid bytes in Parquet.
    Polars frames go through Arrow (a lazy frame is collected first). An Arrow
    ``RecordBatchReader`` is read once into a table, so several releases can scan it.
    """
    mod = type(frame).__module__.split(".")[0]
    if mod == "pandas":
        import pandas as pd

        frame = pandas_objects_as_text(frame)

        def python_text(dtype: Any) -> bool:
            if isinstance(dtype, pd.CategoricalDtype):
                return python_text(dtype.categories.dtype)
            return pd.api.types.is_object_dtype(dtype) or (
                isinstance(dtype, pd.StringDtype) and dtype.storage == "python"
            )

        text_cols = [i for i, dtype in enumerate(frame.dtypes) if python_text(dtype)]
        if text_cols:
            frame = frame.copy()
            for i in text_cols:
                # Python storage whatever pandas' string_storage option says: Arrow storage
                # cannot hold a lone surrogate and would fail on the row that has one
                text = frame.iloc[:, i].astype(pd.StringDtype("python"))
                frame.isetitem(
                    i,
                    text.str.encode("utf-8", "replace")
                    .str.decode("utf-8")
                    .astype(pd.StringDtype("python")),
                )
        return frame
    if mod == "polars":
        import polars as pl

        if isinstance(frame, pl.LazyFrame):
            frame = frame.collect()
        return polars_objects_as_text(frame).to_arrow()
    if mod == "pyarrow":
        import pyarrow as pa

        if isinstance(frame, pa.RecordBatchReader):
            return frame.read_all()
        if isinstance(frame, (pa.Table, pa.RecordBatch)):
            return frame
        try:
            import pyarrow.dataset as ds

            if isinstance(frame, ds.Dataset):
                return frame
        except ImportError:  # pragma: no cover - pyarrow always ships dataset
            pass
    raise TypeError(
        f"cannot register a {type(frame).__module__}.{type(frame).__name__}; expected a pandas "
        "DataFrame, a Polars DataFrame or LazyFrame, or a pyarrow Table / RecordBatchReader / "
        "Dataset"
    )


def _text_if_null(sql_type: str) -> str:
    """``VARCHAR`` for DuckDB's ``NULL`` type (spelled ``"NULL"``: a Parquet column written
    for values that were all missing), else ``sql_type``. Such a column is read like the
    all-NULL text column a CSV file gives for it, so both files get the same answer (no
    value, NULL keys) instead of a refusal for one of them."""
    return "VARCHAR" if sql_type.strip().strip('"').upper() == "NULL" else sql_type


class DuckDBEngine:
    """Run plans on DuckDB.

    Parameters
    ----------
    connection:
        An existing ``duckdb.DuckDBPyConnection`` (its settings are left as they are) or
        ``None`` for a fresh in-memory database owned by the engine.
    memory_limit:
        DuckDB memory limit such as ``"1GB"`` (only for the engine's own connection).
    threads:
        Number of DuckDB worker threads (only for the engine's own connection).
    hash:
        ``"native"`` (DuckDB's fast ``hash``) or ``"md5"`` (MD5 of a canonical text, which
        another engine reproduces identically) for the bounding hashes.
    """

    def __init__(
        self,
        connection: Any = None,
        memory_limit: str | None = None,
        threads: int | None = None,
        *,
        hash: Literal["native", "md5"] = "native",
        temp_directory: str | None = None,
    ) -> None:
        import duckdb

        if hash not in ("native", "md5"):
            raise ValueError(f"hash must be 'native' or 'md5', got {hash!r}")
        self.profile: DialectProfile = DUCKDB if hash == "native" else DUCKDB_MD5
        self._registered: dict[str, Any] = {}
        self._own = connection is None
        # Registrations, the caches and (for a connection passed in) every statement run
        # under this lock; on the own connection statements run on per-thread cursors.
        self._lock = threading.RLock()
        self._local = threading.local()
        self._generation = 0  # bumped by every (un)registration: older cursors are replaced
        self._schemas: dict[str, dict[str, str]] = {}  # columns of registered frames
        self._templates: dict[Any, Any] = {}  # shape -> _Template, None or _SEEN_ONCE
        self._bound: set[Any] = set()  # shapes whose statement DuckDB has bound (explain)
        self._salts: tuple[int, int] | None = None  # stand-in salts (see compile)
        if connection is None:
            connection = duckdb.connect(":memory:")
            connection.execute("SET enable_progress_bar = false")
            connection.execute("SET preserve_insertion_order = false")
            if temp_directory is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="dpkit-duckdb-")
                temp_directory = self._tmp.name
            connection.execute("SET temp_directory = ?", [temp_directory])
            if memory_limit is not None:
                connection.execute("SET memory_limit = ?", [str(memory_limit)])
            if threads is not None:
                if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
                    raise ValueError(f"threads must be a positive integer, got {threads!r}")
                connection.execute(f"SET threads = {int(threads)}")
        elif memory_limit is not None or threads is not None:
            raise ValueError(
                "memory_limit and threads apply only to the engine's own "
                "connection; configure a connection you pass yourself"
            )
        self._base = connection

    @property
    def connection(self) -> Any:
        """The connection to run statements on from this thread: on the engine's own
        connection a cursor of this thread's (made after the latest registration, with every
        registered frame registered on it); a connection passed in is returned as it is."""
        if not self._own:
            return self._base
        local = self._local
        cursor = getattr(local, "cursor", None)
        if cursor is None or local.generation != self._generation:
            with self._lock:
                if cursor is not None:
                    cursor.close()
                cursor = self._base.cursor()
                for name, obj in self._registered.items():
                    cursor.register(name, obj)
                local.generation = self._generation
                local.cursor = cursor
        return cursor

    def _fetch(self, sql: str, params: list[Any] | None = None) -> list[Any]:
        """All rows of ``sql`` (with ``params``), run on this thread's cursor, or under the
        engine's lock on a connection passed in (one statement, one result at a time)."""
        if self._own:
            rows: list[Any] = self.connection.execute(sql, params).fetchall()
            return rows
        with self._lock:
            rows = self._base.execute(sql, params).fetchall()
            return rows

    # ------------------------------------------------------------------ sources

    def register(self, name: str, frame: Any) -> None:
        """Make an in-memory frame scannable as the table ``name`` (``Source(kind="table")``)."""
        if not isinstance(name, str) or not name or "\x00" in name:
            raise ValueError(f"a table name must be a non-empty string, got {name!r}")
        obj = _frame_to_scannable(frame)
        with self._lock:
            try:
                self._base.register(name, obj)
            except Exception as exc:  # a dtype DuckDB cannot scan: decided by the schema
                raise EngineError(
                    f"DuckDB cannot read a column of this frame ({exc}); cast that column to "
                    "a number, text or date dtype first"
                ) from None
            self._registered[name] = obj  # keep a reference: DuckDB scans it lazily
            self._changed()

    def _changed(self) -> None:
        """After a (un)registration (lock held): threads take new cursors, cached schemas and
        statements are dropped (a name may now read another frame or none)."""
        self._generation += 1
        self._schemas.clear()
        self._templates.clear()
        self._bound.clear()

    def is_user_view(self, name: str) -> bool:
        """Whether ``name`` (its last dotted part, any case) is a view of the connection that
        this engine did not register itself: a view may read any table, so a public table that
        is a view cannot be told apart from the private rows it might select."""
        last = name.rsplit(".", 1)[-1].strip('"').lower()
        rows = self._fetch(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal AND lower(view_name) = ?",
            [last],
        )
        own = {n.lower() for n in self._registered}
        return any(str(r[0]).lower() not in own for r in rows)

    def is_base_table(self, name: str) -> bool:
        """Whether the table name ``name`` (as :func:`source_sql` parses it) is a frame this
        engine registered or a base table of the connection's catalog (compared by its last
        part, in any case). Anything else, a view or a name DuckDB would resolve by a
        replacement scan (a quoted ``"data/people.parquet"`` read as that file, a Python
        variable), may read any rows: it is not a base table."""
        if name in self._registered:
            return True
        try:
            from sqlglot import exp

            last = exp.to_table(name, dialect=self.profile.dialect).name
        except Exception:
            return False
        if not isinstance(last, str) or not last:
            return False
        rows = self._fetch(
            "SELECT count(*) FROM duckdb_tables() WHERE lower(table_name) = lower(?)", [last]
        )
        return bool(rows and rows[0][0])

    def unregister(self, name: str) -> None:
        """Forget a frame registered with :meth:`register`."""
        with self._lock:
            if name in self._registered:
                self._base.unregister(name)
                del self._registered[name]
                self._changed()

    def source_files(self, source: Source) -> list[str]:
        """The names of the files DuckDB reads for a Parquet or CSV ``source``, as DuckDB itself
        expands the location: a path, a glob with ``*``, ``?``, ``[...]`` or ``**`` (which
        also match names starting with a dot), a directory (read recursively), a ``file://``
        URL, a name found through the connection's ``file_search_path``. An empty list when
        the location matches no file. Nothing here depends on the files' rows.

        Parquet: the Parquet reader's own file list (``parquet_file_metadata``, which reads
        the footers only). CSV: DuckDB's ``glob`` of the location, or, when that is empty, of
        ``location/**`` (the CSV reader reads a directory recursively; for a pattern this may
        list more files than the reader, never fewer). Other kinds name no file: ``[]``.
        Raises :class:`EngineError` when the location cannot be listed.
        """
        if source.kind not in ("parquet", "csv"):
            return []
        try:
            if source.kind == "parquet":
                try:
                    rows = self._fetch(
                        "SELECT DISTINCT file_name FROM parquet_file_metadata(?)", [source.location]
                    )
                except Exception as exc:
                    if "no files found" not in str(exc).lower():
                        raise
                    rows = []
            else:
                rows = self._fetch("SELECT file FROM glob(?)", [source.location])
                if not rows:
                    rows = self._fetch(
                        "SELECT file FROM glob(?)", [source.location.rstrip("/") + "/**"]
                    )
        except Exception:
            raise EngineError(
                f"cannot list the files of {source.kind} {source.location!r}"
            ) from None
        return sorted({str(r[0]) for r in rows})

    def locate(self, name: str, path: bool) -> Source:
        """The source a name means on DuckDB: with ``path``, a Parquet or CSV path or glob
        (by its suffix; a glob as DuckDB itself expands it, :meth:`source_files`), refused with
        :class:`FileNotFoundError` when it names no file; else a table of the connection."""
        if not path:
            return Source(kind="table", location=name)
        return file_source(name, self.source_files)

    def shares_rows(self, private: Origin, public: Origin) -> bool:
        """Whether ``public`` may read the private rows (see
        :func:`~dpkit.analytics._sources.shares_files`): files compared by the list DuckDB
        itself reads, views this engine did not register and names that are not base tables
        refused."""
        return shares_files(
            private,
            public,
            list_files=self.source_files,
            is_view=self.is_user_view,
            is_table=self.is_base_table,
        )

    def columns(self, source: Source) -> dict[str, str]:
        """Column name -> DuckDB type of ``source``, in source order (no data row is read).

        A CSV file's columns are the names on its header line (the first, in sorted order, of
        the files DuckDB reads: :meth:`source_files`), all ``VARCHAR``: no type is guessed
        from the data.
        """
        if source.kind == "csv":
            files = self.source_files(source)
            if not files:
                raise EngineError(f"no CSV file matches {source.location!r}")
            names = _csv_header(files[0])
            return dict.fromkeys(names, "VARCHAR")
        if source.kind == "parquet":
            self._refuse_mixed_file_types(source)
        registered = source.kind == "table" and source.location in self._registered
        if registered:  # a registered frame's columns change only with a new registration
            known = self._schemas.get(source.location)
            if known is not None:
                return dict(known)
            generation = self._generation
        from_sql = source_sql(
            source, registered=frozenset(self._registered), dialect=self.profile.dialect
        ).sql(dialect=self.profile.dialect)
        sql = f"DESCRIBE SELECT * FROM {from_sql}"
        try:
            rows = self._fetch(sql)
        except Exception as exc:
            raise EngineError(
                f"cannot read the schema of {source.kind} {source.location!r}: {exc}"
            ) from None
        out = {str(r[0]): _text_if_null(str(r[1])) for r in rows}
        if registered:
            with self._lock:
                if generation == self._generation:
                    self._schemas[source.location] = dict(out)
        return out

    def _refuse_mixed_file_types(self, source: Source) -> None:
        """Refuse a Parquet source whose files differ in their columns or the columns' DuckDB
        types (see :func:`refuse_mixed_file_types`), read from the footers
        (``parquet_schema``): DuckDB casts every file's columns to one file's types while it
        scans, and a value that does not cast fails the statement."""
        try:
            rows = self._fetch(
                "SELECT file_name, name, num_children, duckdb_type FROM parquet_schema(?) "
                "ORDER BY file_name, column_id",
                [source.location],
            )
        except Exception as exc:
            if "no files found" in str(exc).lower():
                return  # DESCRIBE reports the missing files
            raise EngineError(
                f"cannot read the Parquet schemas of {source.location!r}: {exc}"
            ) from None
        by_file: dict[str, list[tuple[str, int, str]]] = {}
        for file_name, name, children, typ in rows:
            by_file.setdefault(str(file_name), []).append((str(name), int(children or 0), str(typ)))
        refuse_mixed_file_types(
            source.location, {f: _top_level_types(r) for f, r in by_file.items()}
        )

    # ------------------------------------------------------------------ execution

    def compile(
        self,
        plan: Plan,
        schema: Mapping[str, str] | None = None,
        joins: tuple[Mapping[str, str], ...] | None = None,
    ) -> CompiledQuery:
        """The statement :meth:`execute` would run (for inspection and tests).

        Compiling is pure Python and costs far more than running a small statement, so the
        statement is cached by the plan's shape (the plan with its salt left out, the columns
        and types of its sources, the registered names). The first plan of a shape is compiled
        with its own salt, once (a process that runs a query once, as a script or the command
        line does, compiles it once); from the second on, a shape is cached only once two
        compilations of it, with two random stand-in salts (one below ``2**63``, one above),
        give texts that differ only where those salts' decimal digits stand; the real salt's
        digits (``salt mod 2**64``, as the compiler writes it) are then put in those places. The
        stand-ins are drawn per engine from dpkit's secure source, so no analyst can write
        them into a filter. Anything else (another integer type, a salt out of range, a shape
        that fails the check) is compiled afresh, as is every plan on a connection passed in
        when the privacy unit's collation has to be probed (the probe runs every time).
        """
        if schema is None:
            schema = self.columns(plan.source)
        if joins is None:
            joins = self._join_columns(plan)
        registered = frozenset(self._registered)
        compiled = self._from_template(plan, schema, joins, registered)
        if compiled is None:
            compiled = compile_plan(
                plan, schema, self.profile, registered=registered, join_schemas=joins
            )
        unit = plan.bound.privacy_unit
        if unit is not None and not self._own and plan.source.kind != "csv":
            self._refuse_collated_unit(plan.source, unit, schema)
        return compiled

    def _from_template(
        self,
        plan: Plan,
        schema: Mapping[str, str],
        joins: tuple[Mapping[str, str], ...],
        registered: frozenset[str],
    ) -> CompiledQuery | None:
        """``plan``'s statement from the cache of shapes (see :meth:`compile`), or None."""
        salt = plan.bound.salt
        if type(salt) is not int or not -(2**63) <= salt < 2**64 or self.profile.signed_salt:
            return None
        key = _shape_key(plan, schema, joins, registered)
        if key is None:
            return None
        with self._lock:
            generation = self._generation
            known = self._templates.get(key, _MISSING)
        if known is _MISSING:  # first seen: the caller compiles it with its own salt
            self._remember(key, _SEEN_ONCE, generation)
            return None
        if known is _SEEN_ONCE:
            known = _template(plan, schema, joins, registered, self.profile, self._stand_ins())
            self._remember(key, known, generation)
        if not isinstance(known, _Template):
            return None
        return dataclasses.replace(known.compiled, sql=str(salt % 2**64).join(known.parts))

    def _remember(self, key: Any, value: Any, generation: int) -> None:
        """Record ``value`` for the shape ``key`` unless the registrations changed since
        ``generation`` (the oldest shape goes first when the cache is full); a first sighting
        (:data:`_SEEN_ONCE`) never replaces what another thread recorded meanwhile."""
        with self._lock:
            if generation != self._generation:
                return
            if key in self._templates:
                if value is _SEEN_ONCE:
                    return
            else:
                while len(self._templates) >= _TEMPLATES:
                    del self._templates[next(iter(self._templates))]
            self._templates[key] = value

    def _join_columns(self, plan: Plan) -> tuple[Mapping[str, str], ...]:
        """The columns of each table ``plan`` joins, in join order."""
        return tuple(self.columns(j.source) for j in getattr(plan, "joins", ()))

    def explain(
        self,
        plan: Plan,
        compiled: CompiledQuery,
        schema: Mapping[str, str] | None = None,
        joins: tuple[Mapping[str, str], ...] | None = None,
    ) -> None:
        """Let DuckDB parse and bind ``compiled`` (``plan``'s statement) without reading a row
        (``EXPLAIN``), raising what DuckDB raises. On the engine's own connection a shape
        (see :meth:`compile`) that bound once is not bound again: the binder reads the text
        and the schema, and a statement of that shape differs only in the salt's digits, a
        constant that is always a valid ``UBIGINT``. ``schema`` and ``joins`` are the columns
        ``compiled`` was compiled against (read again when not given): passing them keeps the
        shape that is remembered the one that was compiled, and spares a second read of the
        sources' schemas (for Parquet, every file's footer)."""
        key = None
        if self._own and compiled.sql:
            if schema is None:
                schema = self.columns(plan.source)
            if joins is None:
                joins = self._join_columns(plan)
            key = _shape_key(plan, schema, joins, frozenset(self._registered))
            with self._lock:
                generation = self._generation
                if key is not None and key in self._bound:
                    return
        self._fetch("EXPLAIN " + compiled.sql)
        if key is not None:
            with self._lock:
                if generation == self._generation:
                    if len(self._bound) >= _TEMPLATES:
                        self._bound.clear()
                    self._bound.add(key)

    def _stand_ins(self) -> tuple[int, int]:
        """Two secret stand-in salts of this engine: one below ``2**63``, one above."""
        found = self._salts
        if found is None:
            from dpkit.noise import resolve_source

            raw = int.from_bytes(resolve_source(None).bytes(16), "big")
            low = (raw & (2**62 - 1)) | 2**62  # 19 digits, below 2**63
            high = ((raw >> 64) & (2**63 - 1)) | 2**63
            found = self._salts = (low, high)
        return found

    def _refuse_collated_unit(self, source: Source, unit: str, schema: Mapping[str, str]) -> None:
        """Refuse a text privacy unit that compares under a collation, read from the type.

        A collation (a ``NOCASE`` column, ``default_collation`` on the connection) shows in no
        schema DuckDB reports. The statement compares text byte by byte (``COLLATE C``), so
        such a column's ``'bob'`` and ``'BOB'``, one person to whoever chose the collation,
        would be bounded as two. Probe: the number of distinct values of the column's type
        among byte-distinct texts that the built-in and ICU collations equate (case, accents,
        composed and decomposed forms, an ignorable character), over no row of the source
        (``WHERE false``): the answer depends on the type alone. Only a connection passed in
        can hold a collation (the engine's own connection reads files and frames)."""
        column = next((c for c in schema if c == unit), None) or next(
            (c for c in schema if c.casefold() == unit.casefold()), None
        )
        if column is None or type_family(schema[column]) != "string":
            return
        probe = ("a", "A", "e", "\u00e9", "e\u0301", "a\u200b")
        from_sql = source_sql(
            source, registered=frozenset(self._registered), dialect=self.profile.dialect
        ).sql(dialect=self.profile.dialect)
        col = exp.to_identifier(column, quoted=True).sql(dialect="duckdb")
        values = ", ".join("(?)" for _ in probe)
        sql = (
            f"SELECT count(DISTINCT x) FROM (SELECT {col} AS x FROM {from_sql} WHERE false "
            f"UNION ALL SELECT * FROM (VALUES {values}))"
        )
        try:
            found = self._fetch(sql, list(probe))
            row = found[0] if found else None
        except Exception as exc:
            raise EngineError(
                f"cannot read the collation of the privacy unit {column!r}: {exc}"
            ) from None
        if row is None or int(row[0]) != len(probe):
            raise PlanError(
                f"the privacy unit column {column!r} compares text under a collation (of the "
                "column, or the connection's default_collation), but dpkit compares ids byte by "
                "byte, so one person's 'bob' and 'BOB' would count as two: store one spelling "
                "per person (e.g. lower(id)) in a column without a collation, or reset "
                "default_collation"
            )

    def validate(self, plan: Plan) -> Checked:
        """Compile ``plan`` and let DuckDB bind the statement (``EXPLAIN`` parses and binds it
        against the schema without reading rows), so a plan DuckDB cannot run fails here,
        before anything is charged; returns the compiled statement ready to run.

        A filter that compares a text column with a number (the usual reason the binder
        refuses one) is refused with the cast to write; otherwise the binder's first line is
        the reason (the lines after it quote the generated statement, which means nothing to
        the analyst)."""
        schema = self.columns(plan.source)
        joins = self._join_columns(plan)
        compiled = self.compile(plan, schema, joins)
        try:
            self.explain(plan, compiled, schema, joins)
        except Exception as exc:
            hint = text_comparison_refusal(
                (f.predicate for f in plan.filters),
                lambda c: type_family(schema.get(c, "")) == "string",
                csv=plan.source.kind == "csv",
            )
            if hint is not None:
                raise PrivacyParameterError(hint) from None
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
            raise DPKitError(
                f"the engine cannot run this query (nothing was charged): {reason}"
            ) from None
        return Checked(plan=plan, run=lambda: self.execute_compiled(compiled))

    def share_ranking(self, release: Plan, contributions: Plan) -> SharedRanking | None:
        """One ranking of the rows for a planned query's contribution step and its release
        (see :class:`SharedRanking`), or None where it does not apply: a connection passed in,
        a plan without a privacy unit, a ``contributions`` plan that is not the per-unit
        histograms (``unit_grid``) of the same rows (source, filters, public joins, buckets,
        derived columns) grouped by the unit and then ``release``'s group columns, or a
        statement not of the usual shape, a source or public join that is a table of the
        connection's catalog rather than a registered frame or a file (each cursor looks such
        a name up in its own schema, temporary tables and views), or a table statement DuckDB
        does not bind on the ranking's own cursor.
        Decided by the plans and the schema only (public); compiles ``release`` (whose salt
        is the one its ranking uses) and binds the table's statement (``EXPLAIN``), reads no
        row."""
        unit = release.bound.privacy_unit
        grid = contributions.aggregate.unit_grid
        same_rows = all(getattr(release, f) == getattr(contributions, f) for f in _ROWS)
        # a table of the connection's catalog is looked up per cursor (USE, search_path,
        # temporary tables and views): on the ranking's own cursor the same name may be
        # another table; registered frames (registered on that cursor too) and files are not
        sources = (release.source, *(j.source for j in release.joins))
        catalog = any(s.kind == "table" and s.location not in self._registered for s in sources)
        if (
            not self._own
            or catalog
            or unit is None
            or not grid
            or not same_rows
            or contributions.bound.privacy_unit != unit
            or contributions.aggregate.group_by != (unit, *release.aggregate.group_by)
        ):
            return None
        schema = self.columns(release.source)
        compiled = compile_plan(
            release,
            schema,
            self.profile,
            registered=frozenset(self._registered),
            join_schemas=self._join_columns(release),
        )
        prefix = _ranked_prefix(compiled.sql)
        if prefix is None:
            return None
        shared = SharedRanking(self, prefix, tuple(grid), release)
        try:
            # bound on the ranking's own cursor before the charge: a name only this thread's
            # cursor sees (a temporary table or view made on ``connection``) sends the query
            # to its separate statements here rather than failing after the charge
            shared.bind()
        except Exception:
            shared.close()
            return None
        return shared

    def execute(self, plan: Plan) -> EngineResult:
        """Run ``plan`` as one statement; return per-group exact integer aggregates."""
        return self.execute_compiled(self.compile(plan))

    def execute_compiled(self, compiled: CompiledQuery) -> EngineResult:
        """Run a statement :meth:`compile` returned (a caller that has compiled and checked
        the plan already need not compile it again)."""
        try:
            rows = self._fetch(compiled.sql)
        except Exception as exc:  # binder / IO errors: decided by plan and schema only
            raise EngineError(f"DuckDB could not run the release statement: {exc}") from None
        return decode(compiled, rows)


#: Where a compiled statement's ranked rows end and its kept rows begin.
_S0 = ", " + P + "s0 AS ("
#: The row hashes: only the window's order reads them, so the shared ranking leaves them out.
_HASHES = (P + "hk", P + "hr")


#: The plan fields that decide which rows a statement ranks (with the privacy unit).
_ROWS = ("source", "filters", "joins", "buckets", "derived")


def _measured(plan: Plan) -> set[object]:
    """The columns ``plan``'s measures read values from (as the plan names them)."""
    return {
        part.column
        for m in plan.aggregate.measures
        if m.kind not in ("rows", "units")
        for part in (m.parts if m.kind == "cell_counts" else (m,))
    }


def _ranked_prefix(sql: str) -> str | None:
    """The ``WITH`` clause of ``sql`` up to and including its ``ranked`` CTE (the rows, their
    salted hashes and their ranks), or None when the statement is not of that shape."""
    at = sql.find(_S0)
    if (
        at < 0
        or sql.count(_S0) != 1
        or not sql.startswith("WITH " + P + "src AS (")
        or (", " + P + "ranked AS (") not in sql[:at]
    ):
        return None
    return sql[:at]


class SharedRanking:
    """The rows of a planned query ranked once, for its contribution step and its release.

    A planned query has three steps that read the rows: the per-unit contribution histograms
    (every row counted by unit and group), the value histogram at the chosen rows per unit,
    and the release at the chosen bounds. The release ranks each unit's rows by its salted hashes
    (one window sort, :mod:`.bounding`); which rows it keeps depends on the bounds, but the
    ranks do not: they depend on the rows and the release's salt only. So the ranked rows
    (keys, unit, measured columns, ``rn``, ``gr``, ``g``; not the hashes) are written once
    into a temporary table of the engine's own connection, on a cursor of this object's own,
    when the contribution step first needs them; both steps then read that table instead of
    the source:

    * the contribution histograms: per unit, its number of groups ``g`` is the largest
      ``DENSE_RANK`` of its groups (ranked by ``(hk, keys)``, and ``hk`` is a function of the
      unit and the keys, so distinct ranks are distinct groups), and its largest number of
      rows in one group is the largest ``rn - gr + 1`` (``gr = RANK()`` is the position of the
      group's first row in the same order); the bins are those of the contribution plan
      (:mod:`._compiler.contributions`), the counts identical to its statement's (none of them
      depends on the salt);
    * the value histogram (``bounds="auto"``, :meth:`values`): each unit's first ``R`` rows
      in the release's order (``rn <= R``) instead of ``R`` rows ranked by a salt of its own
      across the groups: the same number of rows per unit, so the same sensitivity, noise
      and charge; another sample of them, so not the same counts for the same seed (the
      privacy argument is in :meth:`values`);
    * the release: its statement with the CTEs up to ``ranked`` replaced by the table, when
      its text up to there is the one ranked (the same rows, columns and salt) and the rest
      reads nothing the table leaves out; else its whole statement, as before.

    The contribution histograms and the release are unchanged: the same exact integers reach
    the same noise. Each step falls back to its own statement where the table does not fit
    (decided by the plans and the compiled text, never by the data). :meth:`close` drops the
    table."""

    def __init__(
        self, engine: DuckDBEngine, prefix: str, grid: tuple[int, ...], release: Plan
    ) -> None:
        from dpkit.noise import resolve_source

        self._engine = engine
        self._prefix = prefix
        self._grid = grid
        self._release = release
        # a name no other query's table has (queries of several threads share the database)
        self._table = f"{P}ranked_{resolve_source(None).bytes(8).hex()}"
        self._cursor: Any = None
        self._made = False

    def _own_cursor(self) -> Any:
        """This object's cursor (made, with every registered frame, on first use: a
        registration elsewhere, which replaces the thread cursors, leaves it)."""
        if self._cursor is None:
            engine = self._engine
            with engine._lock:
                cursor = engine._base.cursor()
                for name, obj in engine._registered.items():
                    cursor.register(name, obj)
            self._cursor = cursor
        return self._cursor

    def statement(self, sql: str) -> list[Any]:
        """All rows of ``sql`` on this object's cursor."""
        rows: list[Any] = self._own_cursor().execute(sql).fetchall()
        return rows

    def _create(self) -> str:
        """The statement that writes the ranked rows into the table."""
        table = exp.to_identifier(self._table, quoted=True).sql(dialect="duckdb")
        hashes = ", ".join(f'"{h}"' for h in _HASHES)
        return (
            f"CREATE TEMPORARY TABLE {table} AS {self._prefix} "
            f"SELECT * EXCLUDE ({hashes}) FROM {P}ranked"
        )

    def bind(self) -> None:
        """Let DuckDB bind the table's statement on this object's cursor (``EXPLAIN``: the
        text and the schema, no row), raising what it raises; called before the charge (not
        one of the steps' :meth:`statement`)."""
        self._own_cursor().execute("EXPLAIN " + self._create()).fetchall()

    def _materialise(self) -> None:
        self.statement(self._create())
        self._made = True

    def contributions(self) -> EngineResult:
        """The contribution plan's result (the per-unit histograms over the grid), read from
        the ranked rows (ranked here, once)."""
        self._materialise()
        grid = self._grid
        table = exp.to_identifier(self._table, quoted=True).sql(dialect="duckdb")
        items: list[str] = []
        measures: list[OutputMeasure] = []
        for tag, col in (("groups", P + "g"), ("rows", P + "m")):
            for i, lo in enumerate(grid):
                cond = f'"{col}" >= {lo}'
                if i + 1 < len(grid):
                    cond += f' AND "{col}" < {grid[i + 1]}'
                out = f"{P}{tag}{i}"
                items.append(f'COALESCE(SUM(CASE WHEN {cond} THEN 1 ELSE 0 END), 0) AS "{out}"')
                measures.append(OutputMeasure(name=f"{tag}:{i}", kind="rows", column=out))
        per_unit = (
            f'SELECT MAX("{P}g") AS "{P}g", MAX("{P}rn" - "{P}gr" + 1) AS "{P}m" '
            f'FROM {table} GROUP BY "{P}u"'
        )
        sql = f'SELECT {", ".join(items)} FROM ({per_unit}) AS "{P}unit"'
        compiled = CompiledQuery(
            sql=sql, key_columns=(), measures=tuple(measures), global_group=True
        )
        return decode(compiled, self.statement(sql))

    def release(self, plan: Plan) -> EngineResult:
        """``plan`` (the release) run on the ranked rows when its statement ranks the same
        rows with the same salt (see the class doc), else as a statement of its own."""
        engine = self._engine
        compiled = engine.compile(plan)
        sql = compiled.sql
        rest = sql[len(self._prefix) :]
        if (
            not sql.startswith(self._prefix)
            or not rest.startswith(_S0)
            or any(name in rest for name in (P + "src", P + "rows", *_HASHES))
        ):
            return engine.execute_compiled(compiled)
        table = exp.to_identifier(self._table, quoted=True).sql(dialect="duckdb")
        shared = f"WITH {P}ranked AS (SELECT * FROM {table}){rest}"
        return decode(compiled, self.statement(shared))

    def values(self, plan: Plan) -> EngineResult:
        """``plan`` (the value histograms of the ``"auto"`` statistics: one global group, at
        most ``R`` rows per unit, see :meth:`~dpkit.analytics.Query.prepare`) run on each
        unit's first ``R`` rows in the release's order, read from the ranked table; else (the
        table not made, other rows, a column the table lacks, a statement of another shape)
        as a statement of its own, as before.

        How: the histogram's statement with its CTEs up to ``ranked`` replaced by the table,
        ``gr`` and ``g`` set to 1 (one group per unit, as its own ranking has), so its kept
        rows are ``rn - 1 < R`` and a measure with its own ``r <= R`` reads ``rn <= r``.

        Privacy. The table's ``rn`` is ``ROW_NUMBER()`` over the unit's rows (the rows of the
        plan's source, filters, joins, buckets and derived columns, all equal to the
        release's) ordered by ``(H(salt, u, k), k, H(salt, u, k, v), v)``: the rank of the
        row's group among the unit's groups, then of the row in its group. That order reads
        the unit's own rows and the release's salt only: not another unit's rows, not the
        contribution step's output (the table is written before the step's bounds are chosen
        and keeps every row), not the bounds. So for every fixed salt the rows read here are
        a function of each unit's own rows, at most ``R`` of them (``R`` the bound the
        contribution step released, as today): one unit added or removed changes at most
        ``R`` of the histogram's inputs, its sensitivity stays ``R`` and its noise and charge
        are unchanged. Sharing the salt with the release correlates the two steps'
        randomness: for each fixed salt the steps are an adaptive composition of DP steps on
        per-unit-stable transforms, so (e, d)-DP at their total; the query is a mixture over
        the salt of such mechanisms, and a mixture of (e, d)-DP mechanisms is (e, d)-DP.
        What changes is the sample (each unit's rows of its first groups, in a random group
        order, rather than ``R`` of its rows drawn across its groups), hence not the same
        counts as the histogram's own statement for the same seed."""
        engine = self._engine
        compiled = engine.compile(plan)
        sql = compiled.sql
        own = _ranked_prefix(sql)
        release = self._release
        fits = (
            self._made
            and own is not None
            and not plan.aggregate.group_by
            and not plan.aggregate.unit_grid
            and plan.bound.privacy_unit == release.bound.privacy_unit
            and all(getattr(plan, f) == getattr(release, f) for f in _ROWS)
            and _measured(plan) <= _measured(release)
        )
        rest = sql[len(own) :] if own is not None else ""
        if not fits or any(name in rest for name in (P + "src", P + "rows", *_HASHES)):
            return engine.execute_compiled(compiled)
        table = exp.to_identifier(self._table, quoted=True).sql(dialect="duckdb")
        one = f'1 AS "{P}gr", 1 AS "{P}g"'
        shared = f"WITH {P}ranked AS (SELECT * REPLACE ({one}) FROM {table}){rest}"
        return decode(compiled, self.statement(shared))

    def close(self) -> None:
        """Drop the table (if made) and close the cursor."""
        cursor, self._cursor = self._cursor, None
        if cursor is None:
            return
        table = exp.to_identifier(self._table, quoted=True).sql(dialect="duckdb")
        try:
            cursor.execute(f"DROP TABLE IF EXISTS {table}")
        except Exception:  # pragma: no cover - closing the cursor drops its temporary tables
            pass
        finally:
            cursor.close()


#: Shapes of statements kept per engine (the oldest is dropped first).
_TEMPLATES = 256
_MISSING: Any = object()
_SEEN_ONCE: Any = object()  # a shape compiled once with its own salt, no template yet


@dataclasses.dataclass(frozen=True)
class _Template:
    """A compiled statement without its salt: its text is the salt's digits joined by
    ``parts``; ``compiled`` holds everything else (its ``sql`` is empty)."""

    parts: tuple[str, ...]
    compiled: CompiledQuery


def _shape_key(
    plan: Plan,
    schema: Mapping[str, str],
    joins: tuple[Mapping[str, str], ...],
    registered: frozenset[str],
) -> Any:
    """What decides a statement apart from its salt: the plan with salt 0, as text and as a
    value (two plans share a shape only if both agree), the columns and types of the source
    and of each joined table, and the registered names. None if a literal is unhashable."""
    try:
        shape = dataclasses.replace(plan, bound=dataclasses.replace(plan.bound, salt=0))
        key = (
            repr(shape),
            shape,
            tuple(schema.items()),
            tuple(tuple(j.items()) for j in joins),
            registered,
        )
        hash(key)
    except Exception:
        return None
    return key


def _template(
    plan: Plan,
    schema: Mapping[str, str],
    joins: tuple[Mapping[str, str], ...],
    registered: frozenset[str],
    profile: DialectProfile,
    salts: tuple[int, int],
) -> _Template | None:
    """The template of ``plan``'s shape, or None when its statement does not depend on the salt
    through the salt's decimal digits alone: compiled under the two stand-in ``salts``, the
    texts must split at those digits into the same pieces (at least two), and the rest of
    the compiled query must be equal. A plan the compiler refuses raises here as it would
    when compiled with its own salt (the salt never decides a refusal)."""
    out = []
    for salt in salts:
        variant = dataclasses.replace(plan, bound=dataclasses.replace(plan.bound, salt=salt))
        compiled = compile_plan(variant, schema, profile, registered=registered, join_schemas=joins)
        out.append((tuple(compiled.sql.split(str(salt))), dataclasses.replace(compiled, sql="")))
    (parts_a, rest_a), (parts_b, rest_b) = out
    if len(parts_a) < 2 or parts_a != parts_b or rest_a != rest_b:
        return None
    return _Template(parts=parts_a, compiled=rest_a)


def _top_level_types(rows: list[tuple[str, int, str]]) -> dict[str, str]:
    """Top-level column name -> DuckDB type, from one file's ``parquet_schema`` rows
    ``(name, num_children, duckdb_type)`` in column order: the first row is the schema's root,
    whose children are the columns; each column is followed by the rows of its nested
    fields, which are skipped (the column's type already spells them)."""
    out: dict[str, str] = {}
    if not rows:
        return out
    i = 1
    for _ in range(rows[0][1]):
        if i >= len(rows):
            break
        name, _children, typ = rows[i]
        out[name] = typ
        pending = rows[i][1]
        i += 1
        while pending and i < len(rows):  # skip the column's subtree
            pending += rows[i][1] - 1
            i += 1
    return out


def _csv_header(path: str) -> list[str]:
    """The column names on the header line of the CSV file ``path`` (a name DuckDB's glob
    reported: ``file://`` URLs come back as plain paths)."""
    import csv
    import io

    try:
        with open(path, "rb") as fh:
            first = fh.readline(1 << 20)
    except OSError as exc:
        raise EngineError(f"cannot read the CSV header of {path!r}: {exc}") from None
    text = first.decode("utf-8", errors="replace").lstrip("\ufeff").rstrip("\r\n")
    names = next(csv.reader(io.StringIO(text), delimiter=",", quotechar='"'), [])
    if not names or any(not n for n in names) or len(set(names)) != len(names):
        raise EngineError(f"the CSV header of {path!r} must name every column once, got {names!r}")
    return names


def decode(compiled: CompiledQuery, rows: list[tuple[Any, ...]]) -> EngineResult:
    """Turn result rows into an :class:`EngineResult` with Python ints (tuples for bins)."""
    nk = len(compiled.key_columns)
    keys: list[tuple[object, ...]] = []
    values: dict[str, list[object]] = {m.name: [] for m in compiled.measures}
    for row in rows:
        keys.append(tuple(_plain_key(v) for v in row[:nk]))
        for m, v in zip(compiled.measures, row[nk:], strict=True):
            if m.kind in ("bin_counts", "category_counts", "cell_counts"):
                values[m.name].append(sparse_or_dense(m.size, v))
            else:
                values[m.name].append(int(v) if v is not None else 0)
    return EngineResult(keys=tuple(keys), values={k: tuple(v) for k, v in values.items()})


def _plain_key(v: Any) -> object:
    if isinstance(v, float) and v != v:  # pragma: no cover - NaN keys are NULL after compile
        return None
    return v
