"""Where a table's rows come from, and whether two sources may share rows.

One home for both questions, asked by the session for its private table and for every table
declared public (a public table that reads the private rows would release them without
contribution bounds, so it is refused before anything is charged):

* :func:`resolve` turns what the user passed (a path or glob, a pandas/Polars/Arrow frame, a
  DuckDB connection and a table name, a Spark DataFrame or SparkSession) into a
  :class:`~dpkit.analytics._plan.Source`; the engine says what a path or a name means to it
  and registers in-memory frames.
* :func:`same_rows` applies the rules common to every engine (the same object, the same
  source, the same table name in another spelling), then asks the engine, which knows what
  it reads: :func:`shares_files` is the rule of engines that read local files (DuckDB, and any
  engine that cannot list its files, which is then refused), :func:`spark_shares_files` the
  rule of Spark, which reports the files a plan reads and whether the plan runs anything
  else.

Nothing here imports an engine, DuckDB, pyspark or pandas: objects are recognised by their
type's module and name.
"""

from __future__ import annotations

import glob
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dpkit.analytics._plan import Source
from dpkit.errors import PrivacyParameterError

__all__ = [
    "CSV_SUFFIXES",
    "PARQUET_SUFFIXES",
    "Origin",
    "file_kind",
    "file_source",
    "frame_kind",
    "is_duckdb_connection",
    "resolve",
    "same_rows",
    "shares_files",
    "spark_kind",
    "spark_shares_files",
]

PARQUET_SUFFIXES = (".parquet", ".parq", ".pq")
CSV_SUFFIXES = (".csv", ".tsv", ".csv.gz", ".tsv.gz", ".txt")


@dataclass(frozen=True, eq=False)
class Origin:
    """A source and the object it was made from (``obj``: the frame, dataset or path the user
    passed, kept alive so that it is recognised when passed again; None when unknown).
    ``frame``: ``obj`` is a pandas, Polars or Arrow object (its rows are held in this process,
    or, for an Arrow ``FileSystemDataset``, read from its files at each scan)."""

    source: Source
    obj: object = None
    frame: bool = False


# ---------------------------------------------------------------------- what an object is
def frame_kind(obj: object) -> str | None:
    """``"pandas"``, ``"polars"`` or ``"arrow"`` for an in-memory frame (or an Arrow dataset or
    reader), else None. By type and module name: nothing is imported."""
    mod = type(obj).__module__
    name = type(obj).__name__
    if mod.startswith("pandas") and name == "DataFrame":
        return "pandas"
    if mod.startswith("polars") and name in ("DataFrame", "LazyFrame"):
        return "polars"
    if mod.startswith("pyarrow") and name in (
        "Table",
        "RecordBatch",
        "Dataset",
        "FileSystemDataset",
        "RecordBatchReader",
    ):
        return "arrow"
    return None


def spark_kind(obj: object) -> str | None:
    """``"dataframe"`` for a classic or Spark Connect DataFrame, ``"session"`` for a classic or
    Connect SparkSession, else None. By type and module name: pyspark is not imported."""
    for cls in type(obj).__mro__:
        if cls.__module__.startswith("pyspark.sql"):
            if cls.__name__ == "DataFrame":
                return "dataframe"
            if cls.__name__ == "SparkSession":
                return "session"
    return None


def is_duckdb_connection(obj: object) -> bool:
    mod = type(obj).__module__
    return mod.lstrip("_").startswith("duckdb") and "Connection" in type(obj).__name__


def file_kind(path: str) -> str | None:
    """``"parquet"`` or ``"csv"`` by the path's suffix (any case), else None."""
    lower = path.lower()
    if lower.endswith(PARQUET_SUFFIXES):
        return "parquet"
    if lower.endswith(CSV_SUFFIXES):
        return "csv"
    return None


def file_source(path: str, list_files: Callable[[Source], list[str]] | None = None) -> Source:
    """The local Parquet or CSV source ``path`` names, checked to name at least one file.

    A glob is expanded by ``list_files`` (the engine's own expansion) when given, else by
    :func:`glob.glob` (recursive, hidden names included); a plain path must be a file.
    Raises :class:`FileNotFoundError` when nothing matches, :class:`PrivacyParameterError` when
    the suffix names no format dpkit reads."""
    kind = file_kind(path)
    if kind is None:
        raise PrivacyParameterError(
            f"cannot tell the format of {path!r}: use a .parquet or .csv path (or glob)"
        )
    found = Source(kind="parquet" if kind == "parquet" else "csv", location=path)
    if glob.has_magic(path):
        names = (
            list_files(found)
            if list_files is not None
            else glob.glob(path, recursive=True, include_hidden=True)
        )
        if not names:
            raise FileNotFoundError(f"no file matches {path!r}")
    elif not Path(path).is_file():
        raise FileNotFoundError(f"no such file: {path!r}")
    return found


def resolve(
    obj: object,
    table: str | None,
    *,
    locate: Callable[[str, bool], Source],
    register: Callable[[str, object], None],
    spark: bool = False,
) -> Source:
    """The :class:`Source` of what the user passed, on an engine that reads a location with
    ``locate(name, path)`` (``path=True``: a file, directory or glob; ``False``: a table name,
    or a path if the engine reads it as one) and holds frames with ``register``. ``spark``:
    the engine is Spark (``table=`` also goes with a SparkSession).

    Frames (and Spark DataFrames) are registered under a fresh random name."""
    tables_for = "DuckDB connections and SparkSessions" if spark else "DuckDB connections"
    kind = spark_kind(obj)
    if kind == "session":
        if not isinstance(table, str) or not table:
            raise PrivacyParameterError(
                "with a SparkSession, give table='db.table' or table='path/to/data.parquet'"
            )
        return locate(table, False)
    if kind == "dataframe":
        if table is not None:
            raise PrivacyParameterError("table= is not used with a DataFrame source")
        return _registered(obj, register)
    if isinstance(obj, (str, os.PathLike)):
        if table is not None:
            raise PrivacyParameterError(f"table= is only for {tables_for}")
        return locate(os.fspath(obj), True)
    if is_duckdb_connection(obj):
        if not isinstance(table, str) or not table:
            raise PrivacyParameterError("with a DuckDB connection, give table='name'")
        return Source(kind="table", location=table)
    if table is not None:
        raise PrivacyParameterError(f"table= is only for {tables_for}")
    if frame_kind(obj) is None:
        raise PrivacyParameterError(
            "source must be a Parquet/CSV path, a pandas/polars/arrow frame or a DuckDB "
            f"connection, got {type(obj).__name__}"
        )
    return _registered(obj, register)


def _registered(obj: object, register: Callable[[str, object], None]) -> Source:
    name = f"dpkit_source_{uuid.uuid4().hex[:12]}"
    register(name, obj)
    return Source(kind="table", location=name)


# ---------------------------------------------------------------------- shared rows
def table_key(name: str) -> str:
    """A table name's last dotted part, unquoted and lower-cased."""
    return name.rsplit(".", 1)[-1].strip().strip('"`').lower()


def same_rows(
    private: Origin, public: Origin, engine_rule: Callable[[Origin, Origin], bool]
) -> bool:
    """Whether the ``public`` source may name the ``private`` rows under another spelling.

    Common to every engine: the same object, the same source, or table names equal by their
    last dotted part, case-insensitively and unquoted (DuckDB and Spark resolve identifiers
    without regard to case). Anything else is the engine's rule (``engine_rule``, its
    ``shares_rows``), which may raise :class:`PrivacyParameterError` when the two cannot be
    compared. A *copy* of the private data (another file, a frame built from its rows) cannot
    be detected: public tables must be declared by whoever owns the session."""
    if public.obj is not None and public.obj is private.obj:
        return True
    if public.source == private.source:
        return True
    if (
        public.source.kind == "table"
        and private.source.kind == "table"
        and (table_key(public.source.location) == table_key(private.source.location))
    ):
        return True
    return engine_rule(private, public)


def shares_files(
    private: Origin,
    public: Origin,
    *,
    list_files: Callable[[Source], list[str]] | None,
    is_view: Callable[[str], bool] | None = None,
    is_table: Callable[[str], bool] | None = None,
) -> bool:
    """The rule of an engine that reads local files (DuckDB's, and any engine's that cannot
    list them: ``list_files`` None, refused whenever files must be compared).

    A frame held in memory shares no row (the session's own frame was refused by identity),
    except an Arrow ``FileSystemDataset``, which reads its files at each scan and is compared
    by them like a path. A public table name is refused when ``is_view`` says it is a view the
    engine did not register (a view may select the private table) or ``is_table`` says it is
    not a base table (DuckDB would resolve it by a replacement scan: a quoted file path, a
    Python variable); a public path is refused when the private table is such a name.
    A public path is compared with a private path by the files the engine reads for each
    (``list_files``: its own glob, with names starting with a dot, ``**``, directories,
    ``file://`` URLs), file by file by ``(st_dev, st_ino)`` with symbolic links followed: one
    shared file means the same rows. A location that matches no file, a file that is not
    local, or an engine that cannot list its files is refused: it cannot be compared."""
    public_dataset = dataset_files(public.obj) if public.frame else None
    if public.frame and public_dataset is None:
        return False
    source = public.source
    if source.kind == "table" and not public.frame:
        if is_view is not None and is_view(source.location):
            raise PrivacyParameterError(
                f"public table {source.location!r} is a view: a view may read the private "
                "table, so only tables and frames can be joined as public tables"
            )
        if is_table is not None and not is_table(source.location):
            raise PrivacyParameterError(
                f"public table {source.location!r} is not a table of the DuckDB connection "
                "(DuckDB reads such a name as a file or a Python variable, which may hold "
                "the private rows): give the public file's path, or pass the table as a "
                "pandas DataFrame or Arrow table"
            )
        return False
    # the public rows are read from files: a path, a glob or an Arrow dataset
    what = "public Arrow dataset" if public.frame else f"public table {source.location!r}"
    if private.source.kind == "table":
        private_dataset = dataset_files(private.obj)
        if private_dataset is None:
            location = private.source.location
            if (is_view is not None and is_view(location)) or (
                is_table is not None and not is_table(location)
            ):
                raise PrivacyParameterError(
                    f"the {what} is read from files, and the private table is a view (or "
                    "a frame registered on the connection) whose files dpkit cannot list: "
                    "pass the public table as a pandas DataFrame or Arrow table instead"
                )
            return False  # a table or an in-memory frame: no file to share
        private_ids = file_identities(private_dataset, "the private table")
    else:
        private_ids = file_identities(
            _listed(list_files, private.source, what), "the private table"
        )
    public_ids = file_identities(
        public_dataset if public_dataset is not None else _listed(list_files, source, what), what
    )
    return bool(public_ids & private_ids)


def _listed(
    list_files: Callable[[Source], list[str]] | None, source: Source, what: str
) -> list[str]:
    if list_files is None:
        raise PrivacyParameterError(
            f"this engine cannot list the files it reads, so the {what} cannot be checked "
            "against the private table: pass it as a pandas DataFrame or Arrow table"
        )
    return list_files(source)


def spark_shares_files(
    private: tuple[frozenset[str], str | None],
    public: tuple[frozenset[str], str | None],
    location: str,
) -> bool:
    """Spark's rule: True when a file is shared, an error when either side may run or read
    anything but its files.

    Each side is ``(files, violation)`` as the Spark engine reports it (``inputFiles()``, and
    what of the frame's plans is not on its allow-list: a cache, RDD or driver-made rows, a
    Python/pandas/Arrow UDF, ``reflect``, a script transform, anything unknown). Each side must
    read files and have no violation. Files are compared as reported, by resolved local path
    and by ``(st_dev, st_ino)`` when the file is visible here, and a file under a reported
    directory counts as shared. The messages name no private value (the public side's names the
    offending operator or function of the public frame's own plan)."""
    private_files, private_violation = private
    if not private_files or private_violation:
        raise PrivacyParameterError(
            "on Spark, a public table read by Spark (a table or view name, a path or a "
            "Spark DataFrame) can only be joined when the private table is read from "
            "files alone by operations dpkit can check, and this one is not (in-memory, "
            "cached or non-file rows, user code or an unknown operation): pass the public "
            "table as a pandas DataFrame or Arrow table instead"
        )
    public_files, public_violation = public
    if not public_files or public_violation:
        what = (
            f"it runs {public_violation}, which is not on dpkit's allow-list of "
            "relational operations and built-in functions"
            if public_violation
            else "it reads no file"
        )
        raise PrivacyParameterError(
            f"public table {location!r} may hold rows that Spark does not read "
            f"from its own files ({what}; a Python UDF, mapInPandas, a cached or "
            "in-memory frame could return the private rows): pass it as a pandas "
            "DataFrame or Arrow table instead"
        )
    pub_keys, pub_paths = _spark_file_keys(public_files)
    priv_keys, priv_paths = _spark_file_keys(private_files)
    return (
        bool(pub_keys & priv_keys) or _under(priv_paths, pub_paths) or _under(pub_paths, priv_paths)
    )


# ---------------------------------------------------------------------- file identities
def local_path(name: str) -> str | None:
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


def file_identities(names: list[str], what: str) -> set[tuple[int, int]]:
    """``(st_dev, st_ino)`` of every file of ``names`` (an engine's own list of the files it
    reads), symbolic links followed: two spellings of one file (a hard link, a symbolic link,
    ``./``, ``//``, a ``file://`` URL, another case on a case-insensitive file system) have
    the same identity. Refuses (:class:`PrivacyParameterError`, before anything is charged)
    an empty list and a name that is not a local file this process can ``stat``: such a
    source cannot be compared, so it cannot be shown not to hold the private rows."""
    if not names:
        raise PrivacyParameterError(
            f"{what} matches no file the engine would read, so it cannot be checked against "
            "the private table: give a path or glob that names the public files"
        )
    out: set[tuple[int, int]] = set()
    for name in names:
        path = local_path(name)
        try:
            if path is None:
                raise OSError(name)
            st = os.stat(path)
        except (OSError, ValueError):
            raise PrivacyParameterError(
                f"{what} reads a file that dpkit cannot identify on this machine ({name!r}), "
                "so it cannot be checked against the private table: use local files, or "
                "pass the public table as a pandas DataFrame or Arrow table"
            ) from None
        out.add((st.st_dev, st.st_ino))
    return out


def dataset_files(obj: object) -> list[str] | None:
    """The files a pyarrow ``FileSystemDataset`` reads (it reads them lazily, at each scan),
    as local paths, or under a ``<filesystem>://`` prefix for another file system (such a
    name cannot be compared: :func:`file_identities` refuses it); None for any other object
    (an in-memory frame holds its rows)."""
    if not type(obj).__module__.startswith("pyarrow") or type(obj).__name__ != "FileSystemDataset":
        return None
    dataset: Any = obj  # a pyarrow FileSystemDataset (pyarrow is not imported here)
    fs = dataset.filesystem
    base = ""
    if type(fs).__name__ == "SubTreeFileSystem":
        base, fs = str(fs.base_path), fs.base_fs
    files = [str(f) for f in dataset.files]
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
