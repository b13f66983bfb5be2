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
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import Any, Literal

from dpkit.analytics._object_text import pandas_objects_as_text
from dpkit.analytics._plan import EngineResult, Plan, Source, sparse_or_dense
from dpkit.analytics._sources import CSV_SUFFIXES, PARQUET_SUFFIXES, Origin, spark_shares_files
from dpkit.analytics.engines._compiler import (
    EPOCH_UTC,
    SPARK,
    SPARK_MD5,
    CompiledQuery,
    DialectProfile,
    PlanError,
    compile_plan,
    refuse_mixed_file_types,
)
from dpkit.analytics.engines._protocol import Checked, EngineError

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


def spark_session(
    remote: str | None = None, *, master: str | None = None, app_name: str = "dpkit"
) -> Any:
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
    simple = {
        "double": "DOUBLE",
        "float": "FLOAT",
        "bigint": "BIGINT",
        "int": "INTEGER",
        "smallint": "SMALLINT",
        "tinyint": "TINYINT",
        "string": "VARCHAR",
        "boolean": "BOOLEAN",
        "date": "DATE",
        "timestamp": "TIMESTAMP WITH TIME ZONE",
        "timestamp_ntz": "TIMESTAMP",
        "binary": "BLOB",
        "void": "NULL",
    }
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


_PARQUET = PARQUET_SUFFIXES
_CSV = CSV_SUFFIXES


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

    def __init__(
        self,
        spark: Any = None,
        *,
        hash: Literal["native", "md5"] = "native",
        remote: str | None = None,
    ) -> None:
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
        engine's session), or a pandas DataFrame / Arrow table (sent to Spark first; columns of
        Python objects as text, see :mod:`dpkit.analytics._object_text`)."""
        if not isinstance(name, str) or not name or "\x00" in name or "`" in name:
            raise ValueError(f"a view name must be a non-empty plain string, got {name!r}")
        if not is_spark_dataframe(frame):
            if type(frame).__module__.split(".")[0] == "pandas":
                # Spark would infer an object column's type from its rows (one person could
                # change it, or make the frame fail): text by one rule, as on DuckDB
                frame = pandas_objects_as_text(frame)
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
                self._refuse_mixed_file_types(location, df)
            else:
                df = (
                    reader.option("header", "true")
                    .option("inferSchema", "false")
                    .option("multiLine", "false")
                    .option("mode", "DROPMALFORMED")
                    .option("quote", '"')
                    .option("escape", '"')
                    .csv(location)
                )
            name = f"dpkit_file_{uuid.uuid4().hex[:12]}"
            self.register(name, df)
            self._files[key] = name
        return self._files[key]

    def _refuse_mixed_file_types(self, location: str, frame: Any) -> None:
        """Refuse a Parquet location whose files differ in their columns or the columns' types
        (see :func:`refuse_mixed_file_types`), each file's schema read from its footer: Spark
        reads every file with one file's schema (``mergeSchema`` off) and fails the scan when
        a row of a file of another type is read. One schema read per file."""
        try:
            files = sorted(str(f) for f in frame.inputFiles())
            schemas = (
                {
                    f: {
                        fld.name: fld.dataType.simpleString()
                        for fld in self.spark.read.parquet(f).schema.fields
                    }
                    for f in files
                }
                if len(files) > 1
                else {}
            )
        except Exception as exc:
            raise EngineError(f"cannot read the Parquet schemas of {location!r}: {exc}") from None
        refuse_mixed_file_types(location, schemas)

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

    # ---- what a frame read by Spark may contain to be judged by its files (public tables)
    #
    # A frame is judged from the text of its analysed and optimized logical plans
    # (``explain(mode="extended")``, served by Spark Connect too). Every line must be one of
    # these operators, every function called in it one of _PLAN_FUNCTIONS, every relation a
    # file format of _FILE_FORMATS; anything else (an unknown operator or function, a line
    # that does not parse, a truncated plan) refuses the frame.

    # Relational operators that only move, filter, combine or aggregate the rows of their
    # children (no code of the user's, no rows from anywhere but their children). Sources are
    # ``Relation`` lines over a file format only: no in-memory, cached, RDD, JDBC, range or
    # one-row relation, no Python/pandas/Arrow evaluation node, no script transform.
    _PLAN_NODES = frozenset(
        {
            "Project",
            "Filter",
            "Join",
            "Aggregate",
            "Union",
            "Intersect",
            "Except",
            "Distinct",
            "Deduplicate",
            "Sort",
            "GlobalLimit",
            "LocalLimit",
            "Offset",
            "Window",
            "WindowGroupLimit",
            "Expand",
            "Generate",
            "Sample",
            "Repartition",
            "RepartitionByExpression",
            "RebalancePartitions",
            "SubqueryAlias",
            "View",
            "ResolvedHint",
            "WithCTE",
            "CTERelationDef",
            "CTERelationRef",
            "Relation",
        }
    )
    _FILE_FORMATS = frozenset({"parquet", "csv", "json", "orc", "text"})
    # Deterministic built-in functions that compute from their arguments alone and cannot
    # read, call or run anything (lower case; Spark prints some in upper or camel case), plus
    # the words Spark prints with a parenthesis that are not calls (types, Scala ``Some``,
    # window frame boundaries, join hints) and the empty word of a bare parenthesis.
    _PLAN_FUNCTIONS = frozenset(
        {
            "",
            "-",
            "some",
            "decimal",
            "varchar",
            "char",
            "lefthint=",
            "righthint=",
            # casts, conditions, nulls
            "cast",
            "try_cast",
            "if",
            "coalesce",
            "nvl",
            "nvl2",
            "ifnull",
            "nullif",
            "isnull",
            "isnotnull",
            "isnan",
            "nanvl",
            "knownnotnull",
            "knownfloatingpointnormalized",
            "normalizenanandzero",
            "greatest",
            "least",
            "in",
            "not",
            # arithmetic
            "abs",
            "negative",
            "positive",
            "sign",
            "signum",
            "round",
            "bround",
            "floor",
            "ceil",
            "ceiling",
            "sqrt",
            "cbrt",
            "exp",
            "ln",
            "log",
            "log10",
            "log2",
            "log1p",
            "pow",
            "power",
            "pmod",
            "mod",
            "div",
            "makedecimal",
            "unscaledvalue",
            "promote_precision",
            "check_overflow",
            "checkoverflow",
            # text
            "upper",
            "lower",
            "ucase",
            "lcase",
            "initcap",
            "trim",
            "ltrim",
            "rtrim",
            "btrim",
            "substr",
            "substring",
            "left",
            "right",
            "concat",
            "concat_ws",
            "length",
            "char_length",
            "character_length",
            "octet_length",
            "replace",
            "translate",
            "lpad",
            "rpad",
            "instr",
            "locate",
            "position",
            "reverse",
            "repeat",
            "startswith",
            "endswith",
            "contains",
            "ascii",
            "chr",
            "format_string",
            "format_number",
            "regexp_replace",
            "regexp_extract",
            "split",
            "split_part",
            # hashes
            "hash",
            "xxhash64",
            "md5",
            "sha1",
            "sha2",
            "crc32",
            # dates and times
            "year",
            "month",
            "day",
            "dayofmonth",
            "dayofweek",
            "dayofyear",
            "weekday",
            "weekofyear",
            "quarter",
            "hour",
            "minute",
            "second",
            "to_date",
            "to_timestamp",
            "gettimestamp",
            "date_add",
            "date_sub",
            "datediff",
            "date_trunc",
            "trunc",
            "date_format",
            "current_date",
            "current_timestamp",
            "make_date",
            "last_day",
            "add_months",
            "months_between",
            "unix_timestamp",
            "from_unixtime",
            # arrays and rows made of the row's own values
            "array",
            "struct",
            "named_struct",
            "size",
            "array_contains",
            "element_at",
            "explode",
            "explode_outer",
            "posexplode",
            "posexplode_outer",
            "stack",
            "replicaterows",
            # aggregates
            "count",
            "sum",
            "avg",
            "mean",
            "min",
            "max",
            "first",
            "last",
            "any_value",
            "count_if",
            "stddev",
            "stddev_samp",
            "stddev_pop",
            "variance",
            "var_samp",
            "var_pop",
            "grouping",
            "grouping_id",
            "bloom_filter_agg",
            "might_contain",
            # window functions and window frames
            "row_number",
            "rank",
            "dense_rank",
            "percent_rank",
            "cume_dist",
            "ntile",
            "lag",
            "lead",
            "nth_value",
            "windowspecdefinition",
            "specifiedwindowframe",
            "unboundedpreceding$",
            "unboundedfollowing$",
            "currentrow$",
            # the path of the file a row was read from (public names only)
            "input_file_name",
        }
    )
    # Words that betray user code or a reflective call: refused even if a future allow-list
    # entry contained them (belt and braces).
    _CODE_MARKERS = (
        "udf",
        "python",
        "pandas",
        "arrow",
        "reflect",
        "java",
        "script",
        "lambda",
        "jdbc",
        "hive",
    )
    _PLAN_PREFIX = re.compile(r"(?:[+:]- |[ :])*")
    _PLAN_NODE = re.compile(r"([A-Za-z]+)(?=$|[ \[])")
    _PLAN_RELATION = re.compile(r"Relation [^\[\]]*\[.*\] (\w+)")
    # The word just before each opening parenthesis: a function name, a type, or an empty
    # word for a bare parenthesis; ``<lambda>`` and dotted class names are words too.
    _PLAN_CALL = re.compile(r"([^\s()\[\],]*)\(")
    _PLAN_WORD = re.compile(r"[^a-z0-9_]+")
    _PLAN_TRUNCATED = re.compile(r"\.\.\. \d+ more field|more characters|Truncated plan")
    # A subquery expression (scalar, EXISTS, IN, lateral) prints as ``name#id`` and its plan on
    # lines of its own; ``inputFiles()`` does not look inside it, so whatever it reads would go
    # unchecked: refused, like any column spelled the same way (the safe side).
    _PLAN_SUBQUERY = re.compile(r"(?i)(?<!\w)(?:[\w-]*subquery|exists|list)#\d")
    _PLAN_SECTIONS = (
        "== Parsed Logical Plan ==",
        "== Analyzed Logical Plan ==",
        "== Optimized Logical Plan ==",
        "== Physical Plan ==",
    )

    @classmethod
    def plan_violation(
        cls, explained: str, user_functions: frozenset[str] = frozenset()
    ) -> str | None:
        """Why the frame whose ``explain(mode="extended")`` text is ``explained`` may run
        more than the allow-list, or ``None`` when it is entirely on it.

        The rule (fail closed: a line or a word this parser does not recognise refuses):

        * both the analysed and the optimized logical plan are checked (the analysed plan
          still names what the optimizer folded into something else, the optimized plan
          shows the Python evaluation nodes Spark extracts from expressions);
        * every line is an operator of :attr:`_PLAN_NODES` after the tree drawing
          (``+-``, ``:-``, ``:``); a ``Relation`` line ends with a format of
          :attr:`_FILE_FORMATS`;
        * the word before every ``(`` (lower case) is in :attr:`_PLAN_FUNCTIONS`, contains
          none of :attr:`_CODE_MARKERS` and is not a word of the name or class of a
          function registered in the session (``user_functions``, see
          :meth:`_user_functions`);
        * no subquery expression (``scalar-subquery#``, ``exists#``, ``list#``,
          ``lateral-subquery#``): ``inputFiles()`` does not list the files a subquery reads;
        * the text is not truncated (``... N more fields``) and holds each of the four
          section headers exactly once (a literal holding a header refuses).

        String literals print unquoted in plans, so a literal holding ``name(`` refuses the
        frame (the safe side); a literal cannot hide an operator or a call, which Spark prints
        on lines and words of their own. The answer names the first offending operator or
        word (the plan's text, never a row of data).
        """
        if cls._PLAN_TRUNCATED.search(explained):
            return "a plan that Spark printed truncated"
        if cls._PLAN_SUBQUERY.search(explained):
            return "a subquery (the files it reads are not listed by Spark)"
        # Each header exactly once, in order: a string literal holding a header would print
        # in several plans and could otherwise move the sections read here.
        starts = [explained.find(s) for s in cls._PLAN_SECTIONS]
        if any(explained.count(s) != 1 for s in cls._PLAN_SECTIONS) or starts != sorted(starts):
            return "an explain output this version of dpkit does not recognise"
        analysed = explained[starts[1] : starts[2]].split("\n")[2:]  # header, output schema
        optimized = explained[starts[2] : starts[3]].split("\n")[1:]
        for line in analysed + optimized:
            body = line[cls._PLAN_PREFIX.match(line).end() :]  # type: ignore[union-attr]
            if not body.strip():
                continue
            node = cls._PLAN_NODE.match(body)
            if node is None:
                return f"the plan line {body[:40]!r}"
            if node.group(1) not in cls._PLAN_NODES:
                return f"the plan operator {node.group(1)[:40]!r}"
            if node.group(1) == "Relation":
                relation = cls._PLAN_RELATION.fullmatch(body.rstrip())
                if relation is None or relation.group(1) not in cls._FILE_FORMATS:
                    return f"the relation {body.rsplit(' ', 1)[-1][:40]!r}"
            for word in cls._PLAN_CALL.findall(body):
                name = word.lower()
                if (
                    name not in cls._PLAN_FUNCTIONS
                    or any(m in name for m in cls._CODE_MARKERS)
                    or name in user_functions
                ):
                    return f"the function {word[:40]!r}"
        return None

    def _user_functions(self) -> frozenset[str]:
        """The words (lower case, split at every character that is not a letter, digit or
        underscore) of the names and classes of the functions registered in the session
        (``SHOW USER FUNCTIONS``: temporary functions and those of the current database;
        ``DESCRIBE FUNCTION`` for the class): a JVM function prints under its registered name
        or, for an aggregate class, the class's own name, either of which may copy a
        built-in's."""
        words: set[str] = set()
        for row in self.spark.sql("SHOW USER FUNCTIONS").collect():
            name = str(row[0])
            words.update(self._PLAN_WORD.split(name.lower()))
            quoted = "`" + name.replace("`", "``") + "`"
            for line in self.spark.sql(f"DESCRIBE FUNCTION {quoted}").collect():
                text = str(line[0])
                if text.startswith("Class:"):
                    words.update(self._PLAN_WORD.split(text[6:].lower()))
        return frozenset(words - {""})

    def input_files(self, source: Source) -> tuple[frozenset[str], str | None]:
        """What Spark reads for ``source``, and whether that is all it runs.

        Returns ``(files, violation)``: the files of ``DataFrame.inputFiles()`` (which sees
        through temporary and global views, ``parquet.`path``` names, selects, unions and
        joins, on classic Spark and Spark Connect alike) and ``None`` when the frame's plans
        are entirely on the allow-list of :meth:`plan_violation`, else what is not (a cached,
        checkpointed or driver-made relation, a Python UDF, ``mapInPandas``, a reflective
        call, a script transform, an unknown operator or function). The plans are printed
        with ``spark.sql.debug.maxToStringFields`` raised for the call (restored after), so
        that wide frames are not truncated. Analyses the plan only; no row is read."""
        import contextlib
        import io

        key = "spark.sql.debug.maxToStringFields"
        try:
            frame = self.frame(source)
            files = frozenset(str(f) for f in frame.inputFiles())
            text = io.StringIO()
            with _CONF_LOCK:
                conf = self.spark.conf
                before = conf.get(key, None)
                conf.set(key, "1000000")
                try:
                    with contextlib.redirect_stdout(text):
                        frame.explain(mode="extended")
                finally:
                    if before is None:
                        conf.unset(key)
                    else:
                        conf.set(key, before)
            user_functions = self._user_functions()
        except Exception as exc:
            raise EngineError(
                f"cannot analyse {source.kind} {source.location!r}: {_short(exc)}"
            ) from None
        return files, self.plan_violation(text.getvalue(), user_functions)

    def locate(self, name: str, path: bool) -> Source:
        """The source a name means on Spark: a catalog table (``db.table``) unless it looks
        like a path (``path``, or a Parquet/CSV suffix, a ``/`` or a URL scheme); a path is
        CSV by its suffix, else Parquet (also a directory of part files). The cluster reads
        the path (``s3://``, ``hdfs://``, ...): it is not checked here."""
        if not path and not looks_like_path(name):
            return Source(kind="table", location=name)
        if name.lower().rstrip("/").endswith(_CSV):
            return Source(kind="csv", location=name)
        return Source(kind="parquet", location=name)

    def shares_rows(self, private: Origin, public: Origin) -> bool:
        """Whether ``public`` may read the private rows, judged by what Spark reads (see
        :func:`~dpkit.analytics._sources.spark_shares_files`): a frame held by this process
        (sent to Spark by the session) shares none."""
        if public.frame:
            return False
        return spark_shares_files(
            self.input_files(private.source),
            self.input_files(public.source),
            public.source.location,
        )

    def columns(self, source: Source) -> dict[str, str]:
        """Column name -> type (DuckDB spelling) of ``source``, from its schema only."""
        try:
            schema = self.frame(source).schema
        except EngineError:
            raise
        except Exception as exc:
            raise EngineError(
                f"cannot read the schema of {source.kind} {source.location!r}: {exc}"
            ) from None
        return {f.name: spark_type(f.dataType) for f in schema.fields}

    # ------------------------------------------------------------------ execution

    def compile(self, plan: Plan, schema: Mapping[str, str] | None = None) -> CompiledQuery:
        """The Spark SQL statement :meth:`execute` would run (for inspection and tests)."""
        if schema is None:
            schema = self.columns(plan.source)
        joins = tuple(
            dataclasses.replace(j, source=self._table_source(j.source)) for j in plan.joins
        )
        join_schemas = tuple(self.columns(j.source) for j in joins)
        table_plan = dataclasses.replace(plan, source=self._table_source(plan.source), joins=joins)
        return compile_plan(
            table_plan,
            schema,
            self.profile,
            registered=frozenset(self._views),
            join_schemas=join_schemas,
        )

    def validate(self, plan: Plan) -> Checked:
        """Compile ``plan`` and let Spark analyse the statement (binds names and types, reads
        no row), so a plan Spark cannot run fails before anything is charged.

        ``spark.sql`` analyses eagerly on both session kinds (Spark Connect sends the
        statement to the server, which analyses it before answering), so creating the frame is
        the check; the returned :class:`Checked` collects that very frame (no second analysis
        on classic Spark, no second round trip on Connect)."""
        compiled = self.compile(plan)
        try:
            with self._ansi(compiled):
                frame = self.spark.sql(compiled.sql)
        except Exception as exc:
            raise EngineError(
                f"Spark cannot run this query (nothing was charged): {_short(exc)}"
            ) from None
        return Checked(plan=plan, run=lambda: self.execute_compiled(compiled, frame=frame))

    def execute(self, plan: Plan, *, progress: Progress | None = None) -> EngineResult:
        """Run ``plan`` as one Spark SQL query; return per-group exact integer aggregates."""
        return self.execute_compiled(self.compile(plan), progress=progress)

    def execute_compiled(
        self, compiled: CompiledQuery, *, progress: Progress | None = None, frame: Any = None
    ) -> EngineResult:
        """Run a statement :meth:`compile` returned: one ``collect()`` of small rows (of
        ``frame``, the frame Spark analysed for this very statement, when given)."""
        progress = progress if progress is not None else self.progress
        try:
            with self._ansi(compiled), self._progress(progress):
                if frame is None:
                    frame = self.spark.sql(compiled.sql)
                rows = frame.collect()
        except Exception as exc:  # analysis / IO errors: decided by plan and schema only
            raise EngineError(f"Spark could not run the release statement: {_short(exc)}") from None
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

            def handler(stages: Any, inflight_tasks: int, operation_id: Any, done: bool) -> None:
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
    ``_compiler.measures.grouping_sets``) a row is ``keys..., measures..., cell indexes..., count``:
    the group's scalar row has every cell measure's ``GROUPING`` flag at 1; a row with flag
    ``j`` at 0 is the count of cell ``idx_j`` of that group (a NULL index, the rows the
    measure skips, is ignored). DECIMAL sums arrive as :class:`decimal.Decimal` and are
    converted exactly.
    """
    nk = len(compiled.key_columns)
    nm = len(compiled.measures)
    codecs = compiled.key_codecs or ("plain",) * nk
    cell_measures = [
        i
        for i, m in enumerate(compiled.measures)
        if m.kind in ("bin_counts", "category_counts", "cell_counts")
    ]
    if len(cell_measures) != len(compiled.cell_columns):
        raise PlanError("compiled statement and its cell columns disagree")
    groups: dict[tuple[object, ...], list[object]] = {}
    cells: dict[tuple[object, ...], dict[int, dict[int, int]]] = {}
    for row in rows:
        key = tuple(_key(v, c) for v, c in zip(row[:nk], codecs, strict=True))
        vals = row[nk : nk + nm]
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
        counts = per.setdefault(cell_measures[j], {})
        counts[int(idx)] = _int(row[-1])
    if compiled.global_group and not groups:
        groups[()] = [0] * nm  # an empty input still has its one global group
    keys = list(groups)
    values: dict[str, tuple[object, ...]] = {}
    for i, m in enumerate(compiled.measures):
        if i in cell_measures:
            values[m.name] = tuple(sparse_or_dense(m.size, cells.get(k, {}).get(i)) for k in keys)
        else:
            values[m.name] = tuple(groups[k][i] for k in keys)
    return EngineResult(keys=tuple(keys), values=values)


# One lock for every engine of the process: each statement with row conditions sets ANSI mode
# off and restores it after; two engines on one SparkSession must not interleave the two.
_CONF_LOCK = threading.Lock()

_EPOCH_DAY = datetime.date(1970, 1, 1)


def _key(v: Any, codec: str) -> object:
    """One group key as the statement sent it (see ``_column_types.key_codec``) -> Python, one to
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

    def __init__(
        self,
        *,
        port: int | None = None,
        master: str = "local[2]",
        driver_memory: str = "1g",
        conf: Mapping[str, str] | None = None,
        timeout: float = 120.0,
    ) -> None:
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
        env.update(
            SPARK_HOME=spark_home(),
            SPARK_LOG_DIR=os.path.join(self._dir, "logs"),
            SPARK_PID_DIR=self._dir,
            SPARK_IDENT_STRING=f"dpkit{self.port}",
        )
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

        args = [
            "bash",
            os.path.join(spark_home(), "sbin", "start-connect-server.sh"),
            "--master",
            self.master,
            "--driver-memory",
            self.driver_memory,
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
        ]
        for k, v in self.conf.items():
            args += ["--conf", f"{k}={v}"]
        self._started = True
        subprocess.run(args, env=self._env(), check=True, capture_output=True, timeout=60)
        if not wait_for_port("127.0.0.1", self.port, self.timeout):
            self.stop()
            raise EngineError(
                f"the Spark Connect server did not listen on port {self.port} "
                f"within {self.timeout:g} s:\n{self.log()}"
            )
        return self

    def stop(self) -> None:
        """Stop the server (idempotent; also after a failed start)."""
        import shutil
        import subprocess

        if self._started:
            self._started = False
            subprocess.run(
                ["bash", os.path.join(spark_home(), "sbin", "stop-connect-server.sh")],
                env=self._env(),
                check=False,
                capture_output=True,
                timeout=120,
            )
        shutil.rmtree(self._dir, ignore_errors=True)

    def __enter__(self) -> LocalConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
