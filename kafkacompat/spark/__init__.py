"""Spark reads streams where they are stored: `format("kafkacompat")`.

    from kafkacompat.spark import register
    register(spark)
    df = (spark.read.format("kafkacompat")
          .option("dataDir", "/var/lib/kafkacompat")
          .option("stream", "/apps/iot/oilpump_metrics")
          .option("topics", "Pressure,Temperature")
          .load())

PySpark (4.0 or later, with pyarrow) is needed only here; the rest of
kafkacompat does not import it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def register(spark: SparkSession) -> None:
    """Make `format("kafkacompat")` available in this Spark session."""
    from .source import KafkacompatDataSource

    spark.dataSource.register(KafkacompatDataSource)
