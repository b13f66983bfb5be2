"""Session-scoped Spark fixtures: one classic ``local[2]`` session and one real local Spark
Connect server (started from the pyspark package's ``sbin`` scripts on a free port, stopped in
the finalizer, also when a test fails), shared by every Spark test of the run.

Both keep memory modest (1 GB driver) and use one shuffle partition (see ``SPARK_CONF``), so the
whole Spark suite runs in a couple of minutes on two cores.
"""

from __future__ import annotations

import math
import os
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dpkit.analytics.engines.spark import LocalConnectServer

# Test data is tiny (a few thousand rows): one shuffle partition, no adaptive re-planning (it
# runs each query stage as a job of its own), no UI; the JVM stops at the C1 JIT tier and uses
# the serial collector, so two JVMs on a busy two-core machine do not spend their time
# compiling and collecting garbage in background threads.
JVM_FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SPARK_CONF = {
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.ui.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.driver.extraJavaOptions": JVM_FLAGS,
}


@pytest.fixture(autouse=True)
def _client_mode(request: pytest.FixtureRequest) -> Iterator[None]:
    """pyspark picks classic or Spark Connect objects (``F.udf``, ``pandas_udf``, columns) by
    the ``SPARK_CONNECT_MODE_ENABLED`` variable, which creating a Connect session sets for the
    rest of the process: each test gets the mode of the session it uses, so the outcome does
    not depend on which test ran before."""
    params = getattr(request.node, "callspec", None)
    kind = params.params.get("spark") if params is not None else None
    names = request.fixturenames
    connect = kind == "connect" or ("connect_spark" in names and "classic_spark" not in names)
    classic = kind == "classic" or ("classic_spark" in names and "connect_spark" not in names)
    before = os.environ.get("SPARK_CONNECT_MODE_ENABLED")
    if connect:
        os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    elif classic:
        os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None)
        else:
            os.environ["SPARK_CONNECT_MODE_ENABLED"] = before


@pytest.fixture(scope="session")
def _connect_boot() -> Iterator[tuple[LocalConnectServer, threading.Thread, list[BaseException]]]:
    """Start the Spark Connect server in a background thread, so that it boots while the
    classic session starts (the two JVMs start in parallel); stopped at the end of the run,
    also when a test or the start failed."""
    import pyspark.sql  # noqa: F401 - imported here, not concurrently in two threads

    # A generous start timeout: on a shared two-core machine under load the JVM has taken
    # over the default 120 s to listen.
    server = LocalConnectServer(
        master="local[2]",
        driver_memory="1g",
        conf={**SPARK_CONF, "spark.log.level": "ERROR"},
        timeout=400.0,
    )
    errors: list[BaseException] = []

    def boot() -> None:
        try:
            server.start()
        except BaseException as exc:  # re-raised by connect_server in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=boot, name="spark-connect-boot", daemon=True)
    thread.start()
    try:
        yield server, thread, errors
    finally:
        thread.join()
        server.stop()


@pytest.fixture(scope="session")
def classic_spark(_connect_boot: Any) -> Iterator[Any]:
    os.environ.pop("SPARK_REMOTE", None)
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("dpkit-tests")
        .config("spark.driver.memory", "1g")
    )
    for k, v in SPARK_CONF.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        yield spark
    finally:
        spark.stop()


@pytest.fixture(scope="session")
def connect_server(_connect_boot: Any) -> LocalConnectServer:
    server, thread, errors = _connect_boot
    thread.join()
    if errors:
        raise errors[0]
    return server


@pytest.fixture(scope="session")
def connect_spark(connect_server: LocalConnectServer) -> Iterator[Any]:
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(connect_server.url).create()
    try:
        yield spark
    finally:
        spark.stop()


@pytest.fixture(scope="session", params=["classic", "connect"])
def spark(request: pytest.FixtureRequest) -> Any:
    """Each Spark test runs on a classic session and on a Spark Connect client."""
    name = "classic_spark" if request.param == "classic" else "connect_spark"
    return request.getfixturevalue(name)


# ------------------------------------------------------------------ shared data

REGIONS = ["north", "south", "o'hara", 'quo"te', "back`tick", "ünï", "e\u0301|V1:", "", None]
SPECIALS: list[Any] = [math.nan, None, math.inf, -math.inf, 1e308, -1e308, -0.0, 5e-324, 1e23]
FKEYS: list[Any] = [0.5, -0.0, 0.0, math.nan, None, math.inf, 1e308, 2.5]


def odd_table(n_units: int, seed: int) -> pa.Table:
    """Units with 1..8 rows: a NULL unit, odd text keys (quotes, backtick, unicode, empty
    string, NULL), a double key column with NaN/NULL/-0.0/inf, values with NaN, NULL, +-inf,
    +-1e308, subnormals, and an integer column. NaN and NULL are kept apart in the file (an
    Arrow double column holds both)."""
    rng = random.Random(seed)
    cols: dict[str, list[Any]] = {"uid": [], "region": [], "kind": [], "fk": [], "x": [], "age": []}
    for u in range(n_units):
        unit = None if u == 0 else f"u{u}"
        for _ in range(rng.randint(1, 8)):
            x = rng.uniform(-20, 120) if rng.random() > 0.2 else rng.choice(SPECIALS)
            cols["uid"].append(unit)
            cols["region"].append(rng.choice(REGIONS))
            cols["kind"].append(rng.choice([1, 2, 3]))
            cols["fk"].append(rng.choice(FKEYS))
            cols["x"].append(x)
            cols["age"].append(rng.randint(0, 99))
    return pa.table(
        {
            "uid": pa.array(cols["uid"], pa.string()),
            "region": pa.array(cols["region"], pa.string()),
            "kind": pa.array(cols["kind"], pa.int64()),
            "fk": pa.array(cols["fk"], pa.float64(), from_pandas=False),
            "x": pa.array(cols["x"], pa.float64(), from_pandas=False),
            "age": pa.array(cols["age"], pa.int64()),
        }
    )


@pytest.fixture(scope="session")
def odd_parquet(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("spark-data") / "odd.parquet"
    pq.write_table(odd_table(220, seed=5), path)
    return path
