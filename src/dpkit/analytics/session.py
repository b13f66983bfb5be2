"""A private analytics session: one table, one privacy unit, one budget, one engine.

>>> s = Session("people.parquet", privacy_unit="user_id",
...             budget=Budget(epsilon=3.0, delta=1e-6))  # doctest: +SKIP
>>> q = (s.query().group_by("region").bound(max_partitions=1, max_rows_per_partition=5)
...       .agg(n=count(), income=mean("income", bounds=(0, 500_000))))   # doctest: +SKIP
>>> q.summarize(epsilon=1.0, delta=1e-7)   # noise per column, touches no data  # doctest: +SKIP
>>> q.run(epsilon=1.0, delta=1e-7)   # charges the budget first, then releases  # doctest: +SKIP

Noise follows the budget: a pure budget (``delta == 0``) gives discrete Laplace noise and pure
epsilon accounting; a budget with ``delta > 0`` gives discrete Gaussian noise, charged in zCDP
when the budget is kept in rho (``method="zcdp"``: many queries compose tightly) or as one
``(epsilon, delta)`` pair per query with ``method="basic"`` (the default of ``Budget``).
Private partition selection needs delta > 0: with ``method="zcdp"`` it is Gaussian thresholding,
charged as approximate zCDP (its rho and its threshold delta, taken from the budget's
``approx_delta_allowance``).
Queries compose sequentially in the budget; the groups of one query compose in parallel (each
unit is bounded to ``max_partitions`` groups, and the sensitivities account for that).
"""

from __future__ import annotations

import glob
import os
import uuid
from pathlib import Path
from typing import Any, Literal

from dpkit._numeric.validation import check_probability
from dpkit.analytics._plan import EngineResult, Plan, Source, did_you_mean
from dpkit.analytics._pricing import Mode
from dpkit.analytics.builder import Query
from dpkit.errors import DPKitError, PrivacyParameterError
from dpkit.events import Neighbouring
from dpkit.noise import RandomSource, resolve_source

__all__ = ["UNSET", "Session"]


class _Unset:
    """The type of :data:`UNSET`: a parameter the caller did not write."""

    _instance: _Unset | None = None

    def __new__(cls) -> _Unset:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "UNSET"


#: Default of ``privacy_unit``: not given (refused; ``None`` must be written out).
UNSET: Any = _Unset()


def protects(privacy_unit: str | None) -> str:
    """What a session's releases protect, in words (shown in results and summaries)."""
    if privacy_unit is None:
        return "each row (privacy_unit=None: every row is taken to be a different person)"
    return f"each person: all rows with the same {privacy_unit!r}"


def check_privacy_unit(privacy_unit: Any) -> str | None:
    """``privacy_unit`` as given: a column name, or ``None`` written out (each row is a person).

    Omitting it raises :class:`~dpkit.errors.PrivacyParameterError`: with several rows per
    person, protecting rows does not protect people, so the choice is never made silently.
    """
    if privacy_unit is UNSET:
        raise PrivacyParameterError(
            "Say who the data protects: give privacy_unit='<column>' naming the column that "
            "identifies a person (all of a person's rows are then protected together), or "
            "privacy_unit=None if every row is a different person (then only rows are "
            "protected)."
        )
    if privacy_unit is not None and (not isinstance(privacy_unit, str) or not privacy_unit):
        raise PrivacyParameterError(
            f"privacy_unit must be a column name or None, got {privacy_unit!r}"
        )
    return privacy_unit

_PARQUET = (".parquet", ".parq", ".pq")
_CSV = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".txt")


def _table_key(name: str) -> str:
    """A table name's last dotted part, unquoted and lower-cased."""
    return name.rsplit(".", 1)[-1].strip().strip('"`').lower()


def _local_path(name: str) -> str | None:
    """The local path an engine's file name stands for (``file://`` and ``file:`` URLs
    unwrapped), or None for a name under another URL scheme (``s3://``, ``https://``)."""
    from urllib.parse import unquote

    if name[:5].lower() == "file:":
        rest = name[5:]
        if rest.startswith("//"):
            rest = rest[2:]
            if not rest.startswith("/"):  # file://host/path
                rest = "/" + rest.split("/", 1)[-1] if "/" in rest else ""
        return unquote(rest) or None
    if "://" in name:
        return None
    return name


def _file_identities(names: list[str], what: str) -> set[tuple[int, int]]:
    """``(st_dev, st_ino)`` of every file of ``names`` (an engine's own list of the files it
    reads), symbolic links followed: two spellings of one file (a hard link, a symbolic link,
    ``./``, ``//``, a ``file://`` URL, another case on a case-insensitive file system) have
    the same identity. Refuses (:class:`PrivacyParameterError`, before anything is charged)
    an empty list and a name that is not a local file this process can ``stat``: such a
    source cannot be compared, so it cannot be shown not to hold the private rows."""
    if not names:
        raise PrivacyParameterError(
            f"{what} matches no file the engine would read, so it cannot be checked against "
            "the private table: give a path or glob that names the public files")
    out: set[tuple[int, int]] = set()
    for name in names:
        path = _local_path(name)
        try:
            if path is None:
                raise OSError(name)
            st = os.stat(path)
        except (OSError, ValueError):
            raise PrivacyParameterError(
                f"{what} reads a file that dpkit cannot identify on this machine ({name!r}), "
                "so it cannot be checked against the private table: use local files, or "
                "pass the public table as a pandas DataFrame or Arrow table") from None
        out.add((st.st_dev, st.st_ino))
    return out


def _dataset_files(obj: Any) -> list[str] | None:
    """The files a pyarrow ``FileSystemDataset`` reads (it reads them lazily, at each scan),
    as local paths, or under a ``<filesystem>://`` prefix for another file system (such a
    name cannot be compared: :func:`_file_identities` refuses it); None for any other object
    (an in-memory frame holds its rows)."""
    if not type(obj).__module__.startswith("pyarrow") \
            or type(obj).__name__ != "FileSystemDataset":
        return None
    fs = obj.filesystem
    base = ""
    if type(fs).__name__ == "SubTreeFileSystem":
        base, fs = str(fs.base_path), fs.base_fs
    files = [str(f) for f in obj.files]
    if type(fs).__name__ != "LocalFileSystem":
        return [f"{fs.type_name}://{f}" for f in files]
    return [os.path.join(base, f) if base else f for f in files]


def _spark_file_keys(uris: frozenset[str]) -> tuple[set[object], set[str]]:
    """Identities of the files Spark reports (``DataFrame.inputFiles()``): each URI as given,
    and for a local one (``file:`` scheme or none) its resolved path and, when the file exists
    here, its ``(st_dev, st_ino)``. Returns ``(keys, local paths)``; the paths also serve to
    catch a file under a reported directory (a Hive table reports its location)."""
    from urllib.parse import unquote

    keys: set[object] = set()
    paths: set[str] = set()
    for uri in uris:
        keys.add(uri)
        if uri[:5].lower() == "file:":
            rest = uri[5:]
            if rest.startswith("//"):
                rest = rest[2:]
                if not rest.startswith("/"):  # file://host/path
                    rest = "/" + rest.split("/", 1)[-1] if "/" in rest else ""
        elif "://" in uri or not uri:
            paths.add(uri.rstrip("/"))  # a remote file or directory, compared as text
            continue
        else:
            rest = uri
        for candidate in {rest, unquote(rest)}:
            if not candidate:
                continue
            path = os.path.realpath(candidate)
            keys.add("file:" + path)
            paths.add(path.rstrip("/") or "/")
            try:
                st = os.stat(candidate)
            except OSError:
                continue
            keys.add((st.st_dev, st.st_ino))
    return keys, paths


def _under(paths: set[str], dirs: set[str]) -> bool:
    """Whether some path of ``paths`` lies inside some directory of ``dirs``."""
    return any(p.startswith(d.rstrip("/") + "/") for p in paths for d in dirs)


def _frame_kind(obj: Any) -> str | None:
    mod = type(obj).__module__
    name = type(obj).__name__
    if mod.startswith("pandas") and name == "DataFrame":
        return "pandas"
    if mod.startswith("polars") and name in ("DataFrame", "LazyFrame"):
        return "polars"
    if mod.startswith("pyarrow") and name in ("Table", "RecordBatch", "Dataset",
                                               "FileSystemDataset", "RecordBatchReader"):
        return "arrow"
    return None


def _spark_kind(obj: Any) -> str | None:
    """``"dataframe"`` for a classic or Spark Connect DataFrame, ``"session"`` for a classic or
    Connect SparkSession, else None. By type and module name: pyspark is not imported."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("pyspark.sql"):
            if cls.__name__ == "DataFrame":
                return "dataframe"
            if cls.__name__ == "SparkSession":
                return "session"
    return None


def _is_duckdb_connection(obj: Any) -> bool:
    mod = type(obj).__module__
    return mod.lstrip("_").startswith("duckdb") and "Connection" in type(obj).__name__


def _budget_mode(budget: Any) -> Mode:
    """How the session noises and charges, read from the budget's kind.

    ``pure`` (delta = 0): discrete Laplace; ``zcdp`` (a budget kept in rho): discrete Gaussian
    charged in rho; ``approx`` (a basic ``(epsilon, delta)`` budget): discrete Gaussian charged as
    the ``(epsilon, delta)`` pair its rho certifies. Other budget kinds are refused, and so are
    budgets under the replace-one relation (queries are calibrated for add/remove).
    """
    if not callable(getattr(budget, "charge", None)):
        raise PrivacyParameterError(
            f"budget must be a dpkit budget (e.g. dpkit.accounting.Budget), got {budget!r}"
        )
    relation = getattr(budget, "neighbouring", Neighbouring.ADD_REMOVE)
    if relation is not Neighbouring.ADD_REMOVE:
        # Sensitivities, noise and partition selection are calibrated for add/remove (one
        # person's rows added or removed), and a replace-one budget would charge the
        # approximate-zCDP partition selection at no sound price: refused, not converted.
        raise PrivacyParameterError(
            "a session needs an add/remove budget (Budget(..., neighbouring='add_remove'), the "
            f"default): its queries are calibrated for adding or removing a person; got a budget "
            f"with neighbouring={getattr(relation, 'value', relation)!r}"
        )
    kind = getattr(budget, "kind", None)
    if kind == "pure":
        return "pure"
    if kind == "zcdp":
        return "zcdp"
    if kind == "basic":
        return "approx"
    raise PrivacyParameterError(
        f"a session needs a pure budget (delta=0), or an (epsilon, delta) budget with "
        f"method='basic' or method='zcdp'; got a budget of kind {kind!r}"
    )


class Session:
    """Private queries over one table.

    Parameters
    ----------
    source:
        A Parquet or CSV path or glob, a pandas/Polars (eager or lazy)/Arrow frame, a DuckDB
        connection (then give ``table=``), a Spark DataFrame (classic or Spark Connect), or a
        SparkSession (classic or Connect; then give ``table=``, a catalog table name or a
        Parquet/CSV path). Spark sources run on the Spark engine. A frame's columns keep
        their declared types; a column of Python objects (pandas ``object``, Polars
        ``Object``) is text, each value written so that values Python holds equal are one text
        (:mod:`dpkit.analytics._object_text`; an object of another type is refused here).
    privacy_unit:
        Required. The column identifying a person (every row of a person is bounded
        together), or ``None`` written out: each row is a different person (only rows are
        protected). Omitting it raises :class:`~dpkit.errors.PrivacyParameterError`.
    budget:
        The session's privacy budget (charged before every release), under the add/remove
        relation (a ``neighbouring="replace"`` budget is refused).
    table:
        With a DuckDB connection: the table or view to query. With a SparkSession: a table
        name (``db.table``) or a path (one with a ``.parquet``/``.csv`` suffix, a ``/`` or a
        URL scheme such as ``s3://``).
    engine:
        ``"duckdb"`` (default), ``"spark"`` (paths read by the active SparkSession, or a new
        local one), or an engine object with ``columns``/``execute``/``register`` such as
        :class:`~dpkit.analytics.engines.spark.SparkEngine`.
    bounding_hash:
        The hash that picks each unit's kept groups and rows in the built-in engines:
        ``"native"`` (default; the engine's fast 64-bit hash) or ``"md5"`` (MD5 of a canonical
        text of the row: DuckDB and Spark keep exactly the same rows).
    alpha:
        Confidence intervals have level ``1 - alpha`` (default 0.05).
    source_of_randomness:
        A :class:`~dpkit.noise.RandomSource` (default: the secure process-wide source). A
        seeded source must have been created with ``insecure=True``.
    memory_limit, threads:
        Passed to the DuckDB engine (e.g. ``memory_limit="1GB"``).
    """

    def __init__(self, source: Any, *, privacy_unit: str | None = UNSET, budget: Any,
                 table: str | None = None, engine: Any = "duckdb", alpha: float = 0.05,
                 source_of_randomness: RandomSource | None = None,
                 memory_limit: str | None = None, threads: int | None = None,
                 bounding_hash: str = "native") -> None:
        privacy_unit = check_privacy_unit(privacy_unit)
        self.alpha = check_probability(alpha, name="alpha", open_low=True, open_high=True)
        if not self.alpha <= 0.5:
            raise PrivacyParameterError(f"alpha must be at most 0.5, got {alpha!r}")
        self.source_of_randomness = resolve_source(source_of_randomness)
        self.mode: Mode = _budget_mode(budget)
        self.budget = budget
        self.privacy_unit: str | None = privacy_unit
        if bounding_hash not in ("native", "md5"):
            raise PrivacyParameterError(
                f"bounding_hash must be 'native' or 'md5', got {bounding_hash!r}")
        hash_kind: Literal["native", "md5"] = "md5" if bounding_hash == "md5" else "native"
        connection = source if _is_duckdb_connection(source) else None
        spark_kind = _spark_kind(source)
        if spark_kind is not None and engine == "duckdb":
            engine = "spark"  # a Spark source runs where its data lives
        if isinstance(engine, str):
            if engine not in ("duckdb", "spark"):
                raise PrivacyParameterError(f"engine must be 'duckdb', 'spark' or an engine, "
                                            f"got {engine!r}")
            if engine == "spark":
                if memory_limit is not None or threads is not None:
                    raise PrivacyParameterError("memory_limit and threads are DuckDB settings; "
                                                "configure Spark through its session")
                from dpkit.analytics.engines.spark import SparkEngine

                spark = None
                if spark_kind == "session":
                    spark = source
                elif spark_kind == "dataframe":
                    spark = source.sparkSession
                self._engine: Any = SparkEngine(spark, hash=hash_kind)
            else:
                from dpkit.analytics.engines import DuckDBEngine  # type: ignore[import-not-found,attr-defined,unused-ignore]

                self._engine = DuckDBEngine(connection=connection, memory_limit=memory_limit,
                                            threads=threads, hash=hash_kind)
        else:
            for attr in ("execute", "columns"):
                if not callable(getattr(engine, attr, None)):
                    raise PrivacyParameterError(f"engine lacks a {attr}() method: {engine!r}")
            self._engine = engine
        self._compiled: dict[int, tuple[Plan, Any]] = {}
        self._source = self._resolve_source(source, table)
        # the object the private rows came from: passed again as a public table, it is refused
        self._source_object_id = id(source)
        self._source_object = source  # kept alive so that its id() is never reused
        cols = self._engine.columns(self._source)
        self._columns: tuple[str, ...] = tuple(
            c[0] if isinstance(c, tuple) else str(c) for c in cols
        )
        # column -> engine type name, when the engine reports types (for messages)
        self._types: dict[str, str] = (
            {str(k): str(v) for k, v in cols.items()} if isinstance(cols, dict)
            else {str(c[0]): str(c[1]) for c in cols if isinstance(c, tuple) and len(c) > 1})
        if privacy_unit is not None:
            self._check_column(privacy_unit, "privacy_unit")

    # ------------------------------------------------------------------ sources
    def _resolve_source(self, source: Any, table: str | None) -> Source:
        spark_kind = _spark_kind(source)
        if spark_kind == "session":
            if not isinstance(table, str) or not table:
                raise PrivacyParameterError(
                    "with a SparkSession, give table='db.table' or table='path/to/data.parquet'")
            return self._spark_path_or_table(table)
        if spark_kind == "dataframe":
            if table is not None:
                raise PrivacyParameterError("table= is not used with a DataFrame source")
            name = f"dpkit_source_{uuid.uuid4().hex[:12]}"
            self._engine.register(name, source)
            return Source(kind="table", location=name)
        if isinstance(source, (str, os.PathLike)) and hasattr(self._engine, "spark"):
            if table is not None:
                raise PrivacyParameterError("table= is only for DuckDB connections and "
                                            "SparkSessions")
            # the cluster reads the path (s3://, hdfs://, ...): no local existence check
            return self._spark_path_or_table(os.fspath(source), path=True)
        if isinstance(source, (str, os.PathLike)):
            if table is not None:
                raise PrivacyParameterError("table= is only for DuckDB connections")
            path = os.fspath(source)
            lower = path.lower()
            if lower.endswith(_PARQUET):
                kind = "parquet"
            elif lower.endswith(_CSV):
                kind = "csv"
            else:
                raise PrivacyParameterError(
                    f"cannot tell the format of {path!r}: use a .parquet or .csv path (or glob)"
                )
            found = Source(kind=kind, location=path)  # type: ignore[arg-type]
            if glob.has_magic(path):
                lister = getattr(self._engine, "source_files", None)
                if not (lister(found) if callable(lister)
                        else glob.glob(path, recursive=True, include_hidden=True)):
                    raise FileNotFoundError(f"no file matches {path!r}")
            elif not Path(path).is_file():
                raise FileNotFoundError(f"no such file: {path!r}")
            return found
        if _is_duckdb_connection(source):
            if not isinstance(table, str) or not table:
                raise PrivacyParameterError("with a DuckDB connection, give table='name'")
            return Source(kind="table", location=table)
        if table is not None:
            raise PrivacyParameterError("table= is only for DuckDB connections")
        if _frame_kind(source) is None:
            raise PrivacyParameterError(
                "source must be a Parquet/CSV path, a pandas/polars/arrow frame or a DuckDB "
                f"connection, got {type(source).__name__}"
            )
        register = getattr(self._engine, "register", None)
        if register is None:
            raise PrivacyParameterError("this engine cannot register in-memory frames")
        name = f"dpkit_source_{uuid.uuid4().hex[:12]}"
        register(name, source)
        return Source(kind="table", location=name)

    def _spark_path_or_table(self, text: str, *, path: bool = False) -> Source:
        from dpkit.analytics.engines.spark import looks_like_path

        if not path and not looks_like_path(text):
            return Source(kind="table", location=text)
        if text.lower().rstrip("/").endswith(_CSV):
            return Source(kind="csv", location=text)
        # Parquet, also a directory of part files (Spark's own output has no suffix)
        return Source(kind="parquet", location=text)

    # ------------------------------------------------------------------ helpers
    @property
    def columns(self) -> tuple[str, ...]:
        """The source's column names (schema only; no rows are read)."""
        return self._columns

    def column_type(self, column: str) -> str | None:
        """The engine's type name of a source column (``"DATE"``, ``"BIGINT"``, ...), or None
        when the column is unknown or the engine reports no types (schema only)."""
        return self._types.get(column)

    def _check_column(self, column: str, what: str) -> None:
        if column not in self._columns:
            raise PrivacyParameterError(
                f"unknown {what} {column!r}{did_you_mean(column, self._columns)}; the source "
                f"has columns {list(self._columns)}"
            )

    def _public_source(self, table: Any) -> tuple[Source, dict[str, str]]:
        """A public table for :meth:`Query.join_public`: its source and its schema.

        A path or frame is opened like the session's own source; a string that is neither a
        Parquet nor a CSV path names a table of the session's DuckDB connection. The private
        source itself is refused (declaring it public would release it without noise).
        """
        if isinstance(table, Source):
            source = table
        elif isinstance(table, str) and not table.lower().endswith((*_PARQUET, *_CSV)):
            source = Source(kind="table", location=table)
        else:
            try:
                source = self._resolve_source(table, None)
            except FileNotFoundError as exc:
                raise PrivacyParameterError(
                    f"the public table matches no file ({exc}): give the path or glob of the "
                    "public files") from None
        if table is self._source_object or id(table) == self._source_object_id \
                or self._same_rows(source, local_frame=_frame_kind(table) is not None,
                                   public_object=table):
            raise PrivacyParameterError(
                "the private table cannot be joined as a public table: its rows would enter "
                "the query without contribution bounds"
            )
        cols = self._engine.columns(source)
        schema = {str(c[0]): str(c[1]) for c in cols} if not isinstance(cols, dict) \
            else {str(k): str(v) for k, v in cols.items()}
        return source, schema

    def _same_rows(self, source: Source, *, local_frame: bool = False,
                   public_object: Any = None) -> bool:
        """Whether ``source`` may name the private rows under another spelling.

        Table names are compared by their last dotted part, case-insensitively and unquoted
        (DuckDB and Spark resolve identifiers without regard to case). A pandas, polars or
        Arrow frame (``local_frame``) holds its rows and is sent to the engine by the session
        itself: it is not compared further (the session's own frame was refused by identity),
        except, on DuckDB, a pyarrow ``FileSystemDataset`` (``public_object``), which reads
        its files at each scan and is compared by them like a path.

        DuckDB: views the session did not register are refused outright (a view may select
        the private table), and so is a name that is not a base table of the connection (DuckDB
        would resolve it by a replacement scan: a quoted file path, a Python variable); a
        public path is refused when the private table is such a view or name.
        A public path is compared with a private path by the files DuckDB itself reads for
        each (the engine's ``source_files``: its own glob, with names starting with a dot,
        ``**``, directories, ``file://`` URLs and ``file_search_path``), file by file by
        ``(st_dev, st_ino)`` with symbolic links followed; one shared file means the same
        rows. This catches hard links, symbolic links, other spellings of a path and globs
        that match the private file. A private ``FileSystemDataset`` is compared by its files
        too. A location that matches no file, a file that is not local, or an engine that
        cannot list its files is refused: it cannot be compared.

        Spark (an engine with ``input_files``): a name, path or DataFrame that Spark reads
        may reach the private rows through any view, ``spark.table``, ``parquet.`path```,
        ``file://`` URL, derived frame or part file, so it is judged by what Spark reads: it
        is accepted only when the private source and the public one both read files and
        nothing else (their plans pass the engine's allow-list: no cached, checkpointed,
        RDD-based or driver-sent rows, no user code such as a Python UDF or ``mapInPandas``)
        and no file is shared. Files are compared as reported, by resolved local path and by
        ``(st_dev, st_ino)`` when the file is visible here, and a file under a reported
        directory counts as shared. Anything else raises :class:`PrivacyParameterError`
        telling the analyst to pass the public table as a pandas or Arrow frame.

        A *copy* of the private data (another file, a frame built from its rows) cannot be
        detected on either engine: public tables must be declared by whoever owns the session.
        """
        if source == self._source:
            return True
        if source.kind == "table" and self._source.kind == "table" and (
                _table_key(source.location) == _table_key(self._source.location)):
            return True
        public_dataset = _dataset_files(public_object) if local_frame else None
        if local_frame and public_dataset is None:
            return False
        if callable(getattr(self._engine, "input_files", None)):
            return False if local_frame else self._spark_shares_files(source)
        is_view = getattr(self._engine, "is_user_view", None)
        is_table = getattr(self._engine, "is_base_table", None)
        if source.kind == "table" and not local_frame:
            if is_view is not None and is_view(source.location):
                raise PrivacyParameterError(
                    f"public table {source.location!r} is a view: a view may read the private "
                    "table, so only tables and frames can be joined as public tables")
            if is_table is not None and not is_table(source.location):
                raise PrivacyParameterError(
                    f"public table {source.location!r} is not a table of the DuckDB connection "
                    "(DuckDB reads such a name as a file or a Python variable, which may hold "
                    "the private rows): give the public file's path, or pass the table as a "
                    "pandas DataFrame or Arrow table")
            return False
        # the public rows are read from files: a path, a glob or an Arrow dataset
        what = "public Arrow dataset" if local_frame else f"public table {source.location!r}"
        if self._source.kind == "table":
            private_dataset = _dataset_files(self._source_object)
            if private_dataset is None:
                if (is_view is not None and is_view(self._source.location)) or (
                        is_table is not None and not is_table(self._source.location)):
                    raise PrivacyParameterError(
                        f"the {what} is read from files, and the private table is a view (or "
                        "a frame registered on the connection) whose files dpkit cannot list: "
                        "pass the public table as a pandas DataFrame or Arrow table instead")
                return False  # a table or an in-memory frame: no file to share
            private = _file_identities(private_dataset, "the private table")
        else:
            private = _file_identities(self._listed_files(self._source, what),
                                       "the private table")
        public = _file_identities(public_dataset if public_dataset is not None
                                  else self._listed_files(source, what), what)
        return bool(public & private)

    def _listed_files(self, source: Source, what: str) -> list[str]:
        """The engine's own list of the files it reads for ``source`` (its ``source_files``);
        refused when the engine cannot list them."""
        lister = getattr(self._engine, "source_files", None)
        if not callable(lister):
            raise PrivacyParameterError(
                f"this engine cannot list the files it reads, so the {what} cannot be checked "
                "against the private table: pass it as a pandas DataFrame or Arrow table")
        files: list[str] = lister(source)
        return files

    def _spark_shares_files(self, source: Source) -> bool:
        """The Spark rule of :meth:`_same_rows`: True when a file is shared, an error when
        either side may run or read anything but its files.

        Each side must read files (``inputFiles()`` not empty) and pass the engine's plan
        allow-list (``SparkEngine.plan_violation``: relational operators over file relations
        and deterministic built-in functions only, so no cache, RDD or driver-made rows, no
        Python/pandas/Arrow UDF, no ``reflect``, no script transform, nothing unknown). Both
        checks read plans only and come before anything is charged. The messages name no
        private value (the public side's names the offending operator or function of the
        public frame's own plan)."""
        private_files, private_violation = self._engine.input_files(self._source)
        if not private_files or private_violation:
            raise PrivacyParameterError(
                "on Spark, a public table read by Spark (a table or view name, a path or a "
                "Spark DataFrame) can only be joined when the private table is read from "
                "files alone by operations dpkit can check, and this one is not (in-memory, "
                "cached or non-file rows, user code or an unknown operation): pass the public "
                "table as a pandas DataFrame or Arrow table instead")
        public_files, public_violation = self._engine.input_files(source)
        if not public_files or public_violation:
            what = (f"it runs {public_violation}, which is not on dpkit's allow-list of "
                    "relational operations and built-in functions" if public_violation
                    else "it reads no file")
            raise PrivacyParameterError(
                f"public table {source.location!r} may hold rows that Spark does not read "
                f"from its own files ({what}; a Python UDF, mapInPandas, a cached or "
                "in-memory frame could return the private rows): pass it as a pandas "
                "DataFrame or Arrow table instead")
        pub_keys, pub_paths = _spark_file_keys(public_files)
        priv_keys, priv_paths = _spark_file_keys(private_files)
        return bool(pub_keys & priv_keys) or _under(priv_paths, pub_paths) \
            or _under(pub_paths, priv_paths)

    @property
    def protects(self) -> str:
        """What this session's releases protect, in words (also in every result's attrs)."""
        return protects(self.privacy_unit)

    @property
    def remaining(self) -> Any:
        """What the budget has left (the budget's own ``remaining``)."""
        return getattr(self.budget, "remaining", None)

    @property
    def spent(self) -> Any:
        """What the budget has spent (the budget's own ``spent``)."""
        return getattr(self.budget, "spent", None)

    def _validate_plan(self, plan: Plan) -> None:
        """Let the engine check the plan (SQL allow-list, columns) before anything is charged."""
        check = getattr(self._engine, "validate", None) or getattr(self._engine, "compile", None)
        if check is None:
            return
        compiled = check(plan)
        # Kept so that running this very plan does not compile it a second time.
        self._compiled[id(plan)] = (plan, compiled)
        while len(self._compiled) > 4:  # plans checked but never run (refused queries)
            del self._compiled[next(iter(self._compiled))]
        sql = getattr(compiled, "sql", None)
        connection = getattr(self._engine, "connection", None)
        if isinstance(sql, str) and connection is not None:
            # EXPLAIN parses and binds the statement against the schema without reading rows,
            # so an engine that cannot run it fails here, before anything is charged.
            try:
                explain = getattr(self._engine, "explain", None)
                if explain is not None:  # the engine binds each statement shape once
                    explain(plan, compiled)
                else:
                    connection.execute("EXPLAIN " + sql).fetchall()
            except Exception as exc:
                self._explain_text_comparison(plan)
                # The engine's first line says what it refused; the lines after it quote the
                # generated statement, which means nothing to the analyst.
                reason = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise DPKitError(
                    f"the engine cannot run this query (nothing was charged): {reason}"
                ) from None

    def _explain_text_comparison(self, plan: Plan) -> None:
        """Raise, with the cast to write, when a filter compares a text column with a number
        (the usual reason the engine refuses to bind a filter: ``name > 5`` for a text
        ``name``, every column of a CSV file). Returns if no filter does."""
        from dpkit.analytics._sql import parse_predicate, text_compared_with_number
        from dpkit.analytics.builder import quote_ident
        from dpkit.analytics.engines._compiler import type_family

        for f in plan.filters:
            try:
                vp = parse_predicate(f.predicate)
            except DPKitError:
                continue
            hit = text_compared_with_number(
                vp, lambda c: type_family(self._types.get(c, "")) == "string")
            if hit is None:
                continue
            col, number = hit
            ident = col if col.isidentifier() else quote_ident(col)
            csv = " (every column of a CSV file is read as text)" \
                if self._source.kind == "csv" else ""
            raise PrivacyParameterError(
                f"column {col!r} is text{csv}, so it cannot be compared with the number "
                f"{number}: read it as a number with TRY_CAST({ident} AS DOUBLE) (text that is "
                f"not a number becomes NULL and its row does not match), e.g. "
                f"where('TRY_CAST({ident} AS DOUBLE) > {number}'), or compare it with text, "
                f"e.g. {ident} = '{number}' (nothing was charged)")

    def _execute(self, plan: Plan) -> EngineResult:
        """Run ``plan`` (called after the charge).

        An engine failure here may have been raised by a private value (an overflow, a cast),
        and its text may quote that value: it is replaced by a generic error, without the
        engine's message or traceback chain.
        """
        cached = self._compiled.pop(id(plan), None)
        run = getattr(self._engine, "execute_compiled", None)
        try:
            if cached is not None and cached[0] is plan and run is not None:
                done: EngineResult = run(cached[1])
                return done
            result: EngineResult = self._engine.execute(plan)
        except Exception:
            from dpkit.analytics.engines.duckdb import EngineError

            raise EngineError(
                "the engine failed after the charge; nothing released (the engine's message "
                "is withheld: it may quote a private value)") from None
        return result

    @property
    def engine(self) -> Any:
        return self._engine

    # ------------------------------------------------------------------ queries
    def query(self) -> Query:
        """A new, empty query over this session's table."""
        return Query(session=self)

    def sql_query(self, query: str, *, metadata: Any = None, bounds: Any = None,
                  keys: Any = None, max_partitions: int | None = None,
                  max_rows_per_partition: int | None = None,
                  public_tables: dict[str, Any] | None = None) -> Any:
        """Check a SQL ``SELECT`` against the private fragment; reads no data, spends nothing.

        Returns a :class:`~dpkit.analytics.sqlquery.SqlQuery` (its ``.query`` is the
        equivalent builder query). ``metadata``: a YAML/TOML path or a dict (bounds, keys,
        contribution limits, public tables; see ``docs/sql.md``); ``bounds={"col": (lo, hi)}``,
        ``keys={"col": [...]}``, ``max_partitions``, ``max_rows_per_partition`` override it for
        the private table; ``public_tables={"name": frame_or_path}`` gives public tables' data.
        A query outside the fragment raises :class:`~dpkit.analytics.sqlquery.SqlError`.
        """
        from dpkit.analytics.sqlquery import sql_query

        return sql_query(self, query, metadata=metadata, bounds=bounds, keys=keys,
                         max_partitions=max_partitions,
                         max_rows_per_partition=max_rows_per_partition,
                         public_tables=public_tables)

    def sql(self, query: str, *, epsilon: float, delta: float | None = None,
            metadata: Any = None, output: str = "pandas", **options: Any) -> Any:
        """Answer a SQL ``SELECT`` privately: check it, charge the budget, release with
        confidence intervals, then apply ``HAVING``/``ORDER BY``/``LIMIT`` to the released rows.

        ``options`` are those of :meth:`sql_query`. A refused query spends nothing.
        """
        return self.sql_query(query, metadata=metadata, **options).run(
            epsilon=epsilon, delta=delta, output=output)

    def __repr__(self) -> str:
        return (f"Session({self._source.kind}:{self._source.location!r}, privacy_unit="
                f"{self.privacy_unit!r}, accounting={self.mode!r}, alpha={self.alpha}; "
                f"protects {self.protects})")
