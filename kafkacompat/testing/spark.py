"""One local Spark session for every PySpark test of a pytest run (tests/spark, compat_tests).

A Spark driver is a JVM: starting one costs seconds on a busy machine, and
the first session of a process fixes its classpath for good. So the
direct reader's tests (format "kafkacompat") and Spark's own Kafka
connector's (format "kafka") share one session, made once with the
connector jars on its classpath when this machine has them and with
format("kafkacompat") registered. Tests that must run Spark as a user's
separate process (a job killed mid-stream, the demo, the benchmark) still
start their own.

The connector jars are in no registry these tests can reach: their folder
is KAFKACOMPAT_SPARK_JARS, else spark-4.0/ in the shared jars folder
(reference_kafka.jars_dir); without either the session has no
format("kafka") and the connector's tests skip.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from .reference_kafka import ROOT, jars_dir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

_session: SparkSession | None = None


def spark_jars_folder() -> str:
    """The folder of Spark's Kafka connector jars, or "" when this machine has none."""
    configured = os.environ.get("KAFKACOMPAT_SPARK_JARS", "")
    if configured:
        return configured
    shared = jars_dir()
    return str(shared / "spark-4.0") if shared is not None and (shared / "spark-4.0").is_dir() else ""


# The JVM flags of the tests' Spark drivers (spark-submit reads SPARK_SUBMIT_OPTS; no other JVM
# does). They live seconds to a few minutes on a 2-core machine: C2's compiler threads and the
# parallel collector's threads only take cores from the test there, and with them a short
# spark-submit job ran about 30% longer (the benchmark's CLI at --gib 0.004, side by side).
# JIT tier and collector change no result.
TEST_DRIVER_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_environment() -> None:
    """Spark's Python workers must run this interpreter and import this checkout's kafkacompat;
    Spark drivers the tests start, in this process or as a subprocess, start as tests need."""
    os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_DRIVER_JVM_OPTIONS)
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"  # loopback only, whatever the host name resolves to
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def shared_session() -> SparkSession:
    """The run's Spark session, started on first use."""
    global _session
    if _session is None:
        spark_environment()
        from pyspark.sql import SparkSession

        from kafkacompat.spark import register
        from kafkacompat.spark.jars import connector_jars

        builder = SparkSession.builder
        folder = spark_jars_folder()
        if folder:
            builder = builder.config("spark.jars", ",".join(connector_jars(folder)))
        session = (
            builder.master("local[2]")
            .appName("kafkacompat-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.memory", "1g")
            # as docs/spark.md tells users of format("kafkacompat"): workers forked with the reader
            # loaded; tests/spark/stream_job.py runs Spark's own daemon, so both stay tested
            .config("spark.python.daemon.module", "kafkacompat.spark.daemon")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        register(session)
        _session = session
    return _session


def stop_shared_session() -> None:
    """Stop the run's session if one was started (each conftest's fixture calls this at the end)."""
    global _session
    if _session is not None:
        _session.stop()
        _session = None


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The run's Spark session; import this fixture into a conftest to use it there."""
    pytest.importorskip("pyspark", reason="PySpark is installed by tests/run.sh (pip install '.[test]')")
    pytest.importorskip("pyarrow", reason="pyarrow is installed by tests/run.sh (pip install '.[test]')")
    yield shared_session()
    stop_shared_session()
