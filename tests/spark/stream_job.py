"""A Structured Streaming job run as its own process, so a test can kill -9 it mid-stream.

It keeps Spark's own Python daemon (pyspark.daemon), as a user who has not
set spark.python.daemon.module runs; the tests' shared session runs
kafkacompat.spark.daemon.

python -m tests.spark.stream_job DATA_DIRS TOPIC OUTPUT CHECKPOINT
"""

from __future__ import annotations

import sys

from kafkacompat.testing.spark import spark_environment


def main(data_dirs: str, topic: str, output: str, checkpoint: str) -> None:
    spark_environment()
    from pyspark.sql import SparkSession

    from kafkacompat.spark import register

    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.driver.host", "127.0.0.1").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    stream = (spark.readStream.format("kafkacompat").option("dataDir", data_dirs).option("subscribe", topic)
              .option("maxOffsetsPerTrigger", "40").load())
    query = (stream.writeStream.format("parquet").option("path", output).option("checkpointLocation", checkpoint)
             .trigger(processingTime="0 seconds").start())
    query.awaitTermination()  # until killed


if __name__ == "__main__":
    main(*sys.argv[1:])
