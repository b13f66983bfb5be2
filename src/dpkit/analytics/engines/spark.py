"""The Spark engine: one plan, one Spark SQL statement, classic Spark or Spark Connect alike.

The engine compiles the engine-neutral :class:`~dpkit.analytics._plan.Plan` with the Spark
profile of the shared compiler (:data:`~dpkit.analytics.engines._compiler.SPARK`, Spark SQL
through sqlglot's ``spark`` dialect) and runs it with ``spark.sql(...).collect()``: one query
whose filtering, contribution bounding, clamping and exact integer sums run on the executors;
only the per-group integer aggregates reach the driver. It uses nothing but the DataFrame and
SQL API that Spark Connect serves too (``spark.sql``, ``spark.read``, ``spark.table``,
``createOrReplaceTempView``, ``schema``, ``collect``, ``conf``): no RDD, no JVM handle.

``pyspark`` is imported when an engine is created, never when :mod:`dpkit` is imported.

What runs where: the driver (this process, or the Connect client) compiles the plan and decodes
at most ``groups * (measures + cells)`` small rows; the cluster reads the source, hashes and
ranks each unit's rows (one window sort partitioned by the privacy unit) and aggregates.

Special values follow the DuckDB engine exactly (docs/special-values.md): NaN is NULL, ``-0.0``
is ``0.0``, ``+-inf`` and ``1e308`` are clamped, a NULL unit is one unit, a NULL key one group.
Sums are DECIMAL(38, 0) (the bound that rules out overflow is in the profile's comment).
Statements with predicates run with ``spark.sql.ansi.enabled=false`` (restored afterwards):
under ANSI mode a cast that Spark inserts into a comparison (``s = 1`` on a text column) raises
for some values only, which would make the release fail because of a value; without ANSI it is
NULL and the row fails the predicate, as under DuckDB's ``TRY``. Nothing else in the statement
can raise in either mode (no division, every cast of a value clamped into range first).
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Literal

from dpkit.analytics._plan import EngineResult, Plan, Source
from dpkit.analytics.engines._compiler import (
    EPOCH_UTC,
    SPARK,
    SPARK_MD5,
    CompiledQuery,
    DialectProfile,
    PlanError,
    compile_plan,
)
from dpkit.analytics.engines.duckdb import EngineError

__all__ = [
    "LocalConnectServer",
    "Progress",
    "SparkEngine",
    "is_spark_dataframe",
    "is_spark_session",
    "spark_session",
    "spark_type",
]

Progress = Callable[[int, int], None]
"""``progress(done_tasks, total_tasks)``, called from a helper thread while a release runs."""

_ANSI = "spark.sql.ansi.enabled"


def _type_names(obj: Any) -> list[tuple[str, str]]:
    return [(c.__module__, c.__name__) for c in type(obj).__mro__]


def is_spark_dataframe(obj: Any) -> bool:
    """A classic ``pyspark.sql.DataFrame`` or a Spark Connect DataFrame (by type name only:
    nothing is imported)."""
    return any(m.startswith("pyspark.sql") and n == "DataFrame" for m, n in _type_names(obj))


def is_spark_session(obj: Any) -> bool:
    """A classic or Spark Connect ``SparkSession`` (by type name only)."""
    return any(m.startswith("pyspark.sql") and n == "SparkSession" for m, n in _type_names(obj))


def spark_session(remote: str | None = None, *, master: str | None = None,
                  app_name: str = "dpkit") -> Any:
    """A SparkSession: Spark Connect at ``remote`` (``sc://host:port``), else the active
    session, else a new classic one (``master`` such as ``local[4]``; by default what
    ``spark-submit`` passed, or ``local[*]``)."""
    from pyspark.sql import SparkSession

    if remote is not None:
        if not isinstance(remote, str) or not remote.startswith("sc://"):
            raise ValueError(f"remote must be a Spark Connect URL sc://host:port, got {remote!r}")
        return SparkSession.builder.remote(remote).create()
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    builder = SparkSession.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    return builder.getOrCreate()


def spark_type(data_type: Any) -> str:
    """A Spark data type in the compiler's (DuckDB) spelling: ``double`` -> ``DOUBLE``,
    ``int`` -> ``INTEGER``, ``string``/``varchar(n)`` -> ``VARCHAR``, arrays -> ``LIST``,
    ``timestamp`` (an instant) -> ``TIMESTAMP WITH TIME ZONE``, ``timestamp_ntz`` ->
    ``TIMESTAMP``; a collated string keeps its collation (``STRING COLLATE UTF8_LCASE``), which
    the compiler refuses."""
    s = str(data_type.simpleString()).lower()
    simple = {"double": "DOUBLE", "float": "FLOAT", "bigint": "BIGINT", "int": "INTEGER",
              "smallint": "SMALLINT", "tinyint": "TINYINT", "string": "VARCHAR",
              "boolean": "BOOLEAN", "date": "DATE", "timestamp": "TIMESTAMP WITH TIME ZONE",
              "timestamp_ntz": "TIMESTAMP", "binary": "BLOB", "void": "NULL"}
    if s in simple:
        return simple[s]
    if s.startswith(("varchar", "char")):
        return "VARCHAR"
    if s.startswith("decimal"):
        return s.upper()
    if s.startswith("array"):
        return "LIST"
    if s.startswith(("struct", "map")):
        return s.split("<", 1)[0].upper()
    return s.upper()


_PARQUET = (".parquet", ".parq", ".pq")
_CSV = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".txt")


def looks_like_path(text: str) -> bool:
    """Whether ``table=`` names a file (a Parquet/CSV suffix, a ``/`` or a URL scheme) rather
    than a catalog table (``db.table``)."""
    low = text.lower()
    return low.endswith(_PARQUET + _CSV) or "/" in text or "\\" in text or "://" in text


class SparkEngine:
    """Run plans on Spark (classic or Connect).

    Parameters
    ----------
    spark:
        A ``SparkSession`` (classic or Connect); ``None``: :func:`spark_session` with
        ``remote``.
    hash:
        ``"native"`` (Spark's 64-bit ``xxhash64``, the fast default) or ``"md5"`` (MD5 of the
        canonical text of the row, identical to the DuckDB engine's md5 profile: the same rows
        are kept on both engines).
    remote:
        A Spark Connect URL ``sc://host:port`` (only when ``spark`` is ``None``).
    """

    def __init__(self, spark: Any = None, *, hash: Literal["native", "md5"] = "native",
                 remote: str | None = None) -> None:
        if hash not in ("native", "md5"):
            raise ValueError(f"hash must be 'native' or 'md5', got {hash!r}")
        # A Spark Connect client the engine opened itself is the engine's to close (see
        # close()); a session the caller handed in, or a classic one, is left alone.
        self._owns_session = spark is None and remote is not None
        if spark is None:
            spark = spark_session(remote)
        elif remote is not None:
            raise ValueError("give either a SparkSession or remote=, not both")
        if not is_spark_session(spark):
            raise TypeError(f"spark must be a SparkSession, got {type(spark).__name__}")
        self.spark = spark
        self.profile: DialectProfile = SPARK if hash == "native" else SPARK_MD5
        self._views: dict[str, Any] = {}  # registered name -> DataFrame
        self._files: dict[tuple[str, str], str] = {}  # (kind, path) -> view name
        self._lock = threading.Lock()
        # Statements analysed by validate(), kept for the execute_compiled() that follows the
        # charge: Spark analyses a statement once when it is created, so reusing the frame
        # saves a second analysis (classic) or a second round trip to the server (Connect).
        self._analysed: dict[int, tuple[CompiledQuery, Any]] = {}
        self.progress: Progress | None = None  # default progress callback of every release

    def close(self) -> None:
        """Close the Spark Connect client this engine opened from ``remote=`` (an open client
        retries its clean-up calls at interpreter exit, which waits for minutes when the server
        is gone by then). Sessions handed to the engine stay open."""
        if self._owns_session:
            self._owns_session = False
            with suppress(Exception):
                self.spark.stop()

    @property
    def is_connect(self) -> bool:
        """Whether the session is a Spark Connect client."""
        return ".connect." in type(self.spark).__module__ + "."

    # ------------------------------------------------------------------ sources

    def register(self, name: str, frame: Any) -> None:
        """Make a frame queryable as the temporary view ``name``: a Spark DataFrame (of this
        engine's session), or a pandas DataFrame / Arrow table (sent to Spark first)."""
        if not isinstance(name, str) or not name or "\x00" in name or "`" in name:
            raise ValueError(f"a view name must be a non-empty plain string, got {name!r}")
        if not is_spark_dataframe(frame):
            frame = self.spark.createDataFrame(frame)
        frame.createOrReplaceTempView(name)
        self._views[name] = frame

    def unregister(self, name: str) -> None:
        """Drop a view made by :meth:`register`."""
        if self._views.pop(name, None) is not None:
            with suppress(Exception):
                self.spark.catalog.dropTempView(name)

    def _file_view(self, kind: str, location: str) -> str:
        """A temporary view over a Parquet or CSV path (read once per engine, lazily).

        CSV: Spark's own reader, every column text (no type inference from the data), one
        record per line (``multiLine`` off), and malformed lines dropped."""
        key = (kind, location)
        if key not in self._files:
            reader = self.spark.read
            if kind == "parquet":
                df = reader.parquet(location)
            else:
                df = (reader.option("header", "true").option("inferSchema", "false")
                      .option("multiLine", "false").option("mode", "DROPMALFORMED")
                      .option("quote", '"').option("escape", '"').csv(location))
            name = f"dpkit_file_{uuid.uuid4().hex[:12]}"
            self.register(name, df)
            self._files[key] = name
        return self._files[key]

    def _table_source(self, source: Source) -> Source:
        """``source`` as a table the SQL can name (files become temporary views)."""
        if source.kind in ("parquet", "csv"):
            return Source(kind="table", location=self._file_view(source.kind, source.location))
        return source

    def frame(self, source: Source) -> Any:
        """The Spark DataFrame of ``source`` (lazy: reading it runs nothing)."""
        src = self._table_source(source)
        if src.location in self._views:
            return self._views[src.location]
        return self.spark.table(src.location)

    # Plan nodes whose rows Spark holds in memory rather than reads from files (a cache, a
    # checkpoint, an RDD, rows sent from the driver), in the optimized logical plan's text.
    _MEMORY_NODES = ("InMemoryRelation", "LogicalRDD", "ExternalRDD", "LocalRelation",
                     "CachedRemoteRelation", "InMemoryTableScan", "LocalTableScan",
                     "ExistingRDD")

    def input_files(self, source: Source) -> tuple[frozenset[str], bool]:
        """What Spark reads for ``source``: the files (``DataFrame.inputFiles()``, which sees
        through temporary and global views, ``parquet.`path``` names, selects, unions and
        joins, on classic Spark and Spark Connect alike) and whether the plan also holds rows
        that no file scan reads (a cached or checkpointed frame, an RDD, rows sent from the
        driver: a node of :attr:`_MEMORY_NODES` in the optimized logical plan, read from
        ``explain``'s text). Analyses the plan only; no row is read."""
        import contextlib
        import io

        try:
            frame = self.frame(source)
            files = frozenset(str(f) for f in frame.inputFiles())
            text = io.StringIO()
            with contextlib.redirect_stdout(text):
                frame.explain(mode="extended")
        except Exception as exc:
            raise EngineError(f"cannot analyse {source.kind} {source.location!r}: "
                              f"{_short(exc)}") from None
        plan = text.getvalue()
        start = plan.find("== Optimized Logical Plan ==")
        end = plan.find("== Physical Plan ==")
        optimized = plan[start:end] if 0 <= start < end else plan
        return files, any(node in optimized for node in self._MEMORY_NODES)

    def columns(self, source: Source) -> dict[str, str]:
        """Column name -> type (DuckDB spelling) of ``source``, from its schema only."""
        try:
            schema = self.frame(source).schema
        except Exception as exc:
            raise EngineError(f"cannot read the schema of {source.kind} "
                              f"{source.location!r}: {exc}") from None
        return {f.name: spark_type(f.dataType) for f in schema.fields}

    # ------------------------------------------------------------------ execution

    def compile(self, plan: Plan, schema: Mapping[str, str] | None = None) -> CompiledQuery:
        """The Spark SQL statement :meth:`execute` would run (for inspection and tests)."""
        if schema is None:
            schema = self.columns(plan.source)
        joins = tuple(dataclasses.replace(j, source=self._table_source(j.source))
                      for j in plan.joins)
        join_schemas = tuple(self.columns(j.source) for j in joins)
        table_plan = dataclasses.replace(plan, source=self._table_source(plan.source),
                                         joins=joins)
        return compile_plan(table_plan, schema, self.profile,
                            registered=frozenset(self._views), join_schemas=join_schemas)

    def validate(self, plan: Plan) -> CompiledQuery:
        """Compile ``plan`` and let Spark analyse the statement (binds names and types, reads
        no row), so a plan Spark cannot run fails before anything is charged.

        ``spark.sql`` analyses eagerly on both session kinds (Spark Connect sends the
        statement to the server, which analyses it before answering), so creating the frame is
        the check; the frame is kept and collected by :meth:`execute_compiled`."""
        compiled = self.compile(plan)
        try:
            with self._ansi(compiled):
                frame = self.spark.sql(compiled.sql)
        except Exception as exc:
            raise EngineError(f"Spark cannot run this query (nothing was charged): "
                              f"{_short(exc)}") from None
        with self._lock:
            self._analysed[id(compiled)] = (compiled, frame)
            while len(self._analysed) > 4:  # validated, never run (e.g. refused by the budget)
                del self._analysed[next(iter(self._analysed))]
        return compiled

    def execute(self, plan: Plan, *, progress: Progress | None = None) -> EngineResult:
        """Run ``plan`` as one Spark SQL query; return per-group exact integer aggregates."""
        return self.execute_compiled(self.compile(plan), progress=progress)

    def execute_compiled(self, compiled: CompiledQuery, *,
                         progress: Progress | None = None) -> EngineResult:
        """Run a statement :meth:`compile` returned: one ``collect()`` of small rows (of the
        frame :meth:`validate` analysed, when it was this very statement)."""
        progress = progress if progress is not None else self.progress
        with self._lock:
            kept = self._analysed.pop(id(compiled), None)
        try:
            with self._ansi(compiled), self._progress(progress):
                if kept is not None and kept[0] is compiled:
                    frame = kept[1]
                else:
                    frame = self.spark.sql(compiled.sql)
                rows = frame.collect()
        except Exception as exc:  # analysis / IO errors: decided by plan and schema only
            raise EngineError(f"Spark could not run the release statement: "
                              f"{_short(exc)}") from None
        return decode(compiled, [tuple(r) for r in rows])

    @contextmanager
    def _ansi(self, compiled: CompiledQuery) -> Iterator[None]:
        """ANSI mode off while a statement with predicates is analysed and run."""
        if not compiled.has_filters:
            yield
            return
        with _CONF_LOCK:
            conf = self.spark.conf
            before = conf.get(_ANSI, None)
            conf.set(_ANSI, "false")
            try:
                yield
            finally:
                if before is None:
                    conf.unset(_ANSI)
                else:
                    conf.set(_ANSI, before)

    @contextmanager
    def _progress(self, progress: Progress | None) -> Iterator[None]:
        """Report task progress: Spark Connect's progress handler, or (classic) a thread
        polling the public status tracker. Does nothing without a callback."""
        if progress is None:
            yield
            return
        if self.is_connect:
            def handler(stages: Any, inflight_tasks: int, operation_id: Any,
                        done: bool) -> None:
                st = list(stages or [])
                progress(sum(s.num_completed_tasks for s in st), sum(s.num_tasks for s in st))

            self.spark.registerProgressHandler(handler)
            try:
                yield
            finally:
                self.spark.removeProgressHandler(handler)
            return
        tracker = self.spark.sparkContext.statusTracker()
        stop = threading.Event()
        seen: dict[int, tuple[int, int]] = {}

        def poll() -> None:
            while not stop.wait(0.2):
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        seen[sid] = (info.numCompletedTasks, info.numTasks)
                done = sum(d for d, _ in seen.values())
                progress(done, sum(t for _, t in seen.values()))

        worker = threading.Thread(target=poll, name="dpkit-spark-progress", daemon=True)
        worker.start()
        try:
            yield
        finally:
            stop.set()
            worker.join()


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:500] if text else type(exc).__name__


def decode(compiled: CompiledQuery, rows: list[tuple[Any, ...]]) -> EngineResult:
    """Rows of a Spark statement -> :class:`EngineResult` with Python ints (tuples for cells).

    Without cell measures a row is ``keys..., measures...``. With them (grouping sets, see
    ``_compiler._grouping_sets``) a row is ``keys..., measures..., cell indexes..., count``:
    the group's scalar row has every cell measure's ``GROUPING`` flag at 1; a row with flag
    ``j`` at 0 is the count of cell ``idx_j`` of that group (a NULL index, the rows the
    measure skips, is ignored). DECIMAL sums arrive as :class:`decimal.Decimal` and are
    converted exactly.
    """
    nk = len(compiled.key_columns)
    nm = len(compiled.measures)
    codecs = compiled.key_codecs or ("plain",) * nk
    cell_measures = [i for i, m in enumerate(compiled.measures)
                     if m.kind in ("bin_counts", "category_counts")]
    if len(cell_measures) != len(compiled.cell_columns):
        raise PlanError("compiled statement and its cell columns disagree")
    groups: dict[tuple[object, ...], list[object]] = {}
    cells: dict[tuple[object, ...], dict[int, list[int]]] = {}
    for row in rows:
        key = tuple(_key(v, c) for v, c in zip(row[:nk], codecs, strict=True))
        vals = row[nk:nk + nm]
        flags = [vals[i] for i in cell_measures]
        if all(f == 1 for f in flags):  # the group's own row (also when there are no cells)
            groups[key] = [_int(v) for v in vals]
            continue
        j = next(n for n, f in enumerate(flags) if f == 0)
        idx = row[nk + nm + j]
        if idx is None:
            continue
        m = compiled.measures[cell_measures[j]]
        per = cells.setdefault(key, {})
        counts = per.setdefault(cell_measures[j], [0] * m.size)
        counts[int(idx)] = _int(row[-1])
    if compiled.global_group and not groups:
        groups[()] = [0] * nm  # an empty input still has its one global group
    keys = list(groups)
    values: dict[str, tuple[object, ...]] = {}
    for i, m in enumerate(compiled.measures):
        if i in cell_measures:
            values[m.name] = tuple(tuple(cells.get(k, {}).get(i, [0] * m.size)) for k in keys)
        else:
            values[m.name] = tuple(groups[k][i] for k in keys)
    return EngineResult(keys=tuple(keys), values=values)


# One lock for every engine of the process: each statement with row conditions sets ANSI mode
# off and restores it after; two engines on one SparkSession must not interleave the two.
_CONF_LOCK = threading.Lock()

_EPOCH_DAY = datetime.date(1970, 1, 1)


def _key(v: Any, codec: str) -> object:
    """One group key as the statement sent it (see ``_compiler.key_codec``) -> Python, one to
    one: distinct keys in Spark stay distinct in the driver, whatever the driver's time zone,
    and no value raises (one outside Python's datetime range stays its integer or text)."""
    if v is None:
        return None
    try:
        if codec == "instant":
            return EPOCH_UTC + datetime.timedelta(microseconds=int(v))
        if codec == "local":
            return datetime.datetime.fromisoformat(str(v))
        if codec == "date":
            return _EPOCH_DAY + datetime.timedelta(days=int(v))
    except (OverflowError, ValueError):
        return v
    if codec == "text":
        return bytes(v).decode("utf-8", "surrogateescape")
    if codec == "bytes":
        return bytes(v)
    if isinstance(v, float) and v != v:
        return None
    return v


def _int(v: Any) -> int:
    return 0 if v is None else int(v)


def spark_home() -> str:
    """The Spark installation shipped inside the ``pyspark`` package (``$SPARK_HOME``)."""
    import pyspark

    return os.environ.get("SPARK_HOME") or os.path.dirname(os.path.abspath(pyspark.__file__))


def wait_for_port(host: str, port: int, timeout: float) -> bool:
    """Whether ``host:port`` accepts TCP connections within ``timeout`` seconds."""
    import socket

    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with socket.socket() as s:
            s.settimeout(1.0)
            if s.connect_ex((host, port)) == 0:
                return True
        time.sleep(0.25)
    return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LocalConnectServer:
    """A Spark Connect server on this machine, from the ``pyspark`` package's own scripts.

    ``start()`` runs ``$SPARK_HOME/sbin/start-connect-server.sh`` (``SPARK_HOME``: the pyspark
    package) on a free port with its logs and pid file in a private directory, and waits until
    a client can run a query; ``stop()`` runs ``stop-connect-server.sh`` with the same
    directories. For tests, benchmarks and trying Spark Connect locally::

        with LocalConnectServer() as server:
            engine = SparkEngine(remote=server.url)
    """

    def __init__(self, *, port: int | None = None, master: str = "local[2]",
                 driver_memory: str = "1g", conf: Mapping[str, str] | None = None,
                 timeout: float = 120.0) -> None:
        import tempfile

        self.port = free_port() if port is None else int(port)
        self.url = f"sc://127.0.0.1:{self.port}"
        self.master = master
        self.driver_memory = driver_memory
        self.conf = dict(conf or {})
        self.timeout = timeout
        self._dir = tempfile.mkdtemp(prefix="dpkit-connect-")
        self._started = False

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(SPARK_HOME=spark_home(), SPARK_LOG_DIR=os.path.join(self._dir, "logs"),
                   SPARK_PID_DIR=self._dir, SPARK_IDENT_STRING=f"dpkit{self.port}")
        env.pop("SPARK_REMOTE", None)
        env.pop("SPARK_CONNECT_MODE_ENABLED", None)
        return env

    def log(self) -> str:
        """The server's log so far (for error messages)."""
        logs = os.path.join(self._dir, "logs")
        out = []
        for name in sorted(os.listdir(logs)) if os.path.isdir(logs) else []:
            with open(os.path.join(logs, name), errors="replace") as fh:
                out.append(fh.read()[-4000:])
        return "\n".join(out)

    def start(self) -> LocalConnectServer:
        import subprocess

        args = ["bash", os.path.join(spark_home(), "sbin", "start-connect-server.sh"),
                "--master", self.master, "--driver-memory", self.driver_memory,
                "--conf", f"spark.connect.grpc.binding.port={self.port}",
                "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf", "spark.ui.enabled=false"]
        for k, v in self.conf.items():
            args += ["--conf", f"{k}={v}"]
        self._started = True
        subprocess.run(args, env=self._env(), check=True, capture_output=True, timeout=60)
        if not wait_for_port("127.0.0.1", self.port, self.timeout):
            self.stop()
            raise EngineError(f"the Spark Connect server did not listen on port {self.port} "
                              f"within {self.timeout:g} s:\n{self.log()}")
        return self

    def stop(self) -> None:
        """Stop the server (idempotent; also after a failed start)."""
        import shutil
        import subprocess

        if self._started:
            self._started = False
            subprocess.run(["bash", os.path.join(spark_home(), "sbin", "stop-connect-server.sh")],
                           env=self._env(), check=False, capture_output=True, timeout=120)
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> LocalConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
