"""Full-scan benchmark: format("kafkacompat") against Spark's Kafka source, same data, same run.

    python -m kafkacompat.spark.bench --gib 1 --rounds 2

Fills a disk broker with GiB of 1 KiB messages (confluent-kafka), then
alternates the two readers over the same topic, each computing
count(*) and sum(length(value)) so every value is read. Spark's Kafka
source needs its connector jars (KAFKACOMPAT_SPARK_JARS, or --jars FOLDER
holding spark-sql-kafka, spark-token-provider-kafka, commons-pool2 and
kafka-clients); without them only the direct reader is measured.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

from ..demo.oilrig import connector_jars

TOPIC = "/bench/spark:scan"


def fill(broker: object, total_bytes: int, message_bytes: int, partitions: int) -> int:
    from confluent_kafka import Producer

    broker.create_topic(TOPIC, partitions=partitions)  # type: ignore[attr-defined]
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 20,  # type: ignore[attr-defined]
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
    payload = os.urandom(message_bytes)
    count = total_bytes // message_bytes
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value=payload, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(300):
        raise RuntimeError("the producer could not deliver everything in 300 s")
    return count


def scan(df: object) -> tuple[int, int, float]:
    started = time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]  # type: ignore[attr-defined]
    return row.n, row.bytes, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib", type=float, default=1.0, help="data to scan (default 1 GiB)")
    parser.add_argument("--message-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two readers (default 2)")
    parser.add_argument("--jars", metavar="FOLDER", help="Spark's Kafka connector jars (else KAFKACOMPAT_SPARK_JARS)")
    args = parser.parse_args()
    if args.jars:
        os.environ["KAFKACOMPAT_SPARK_JARS"] = args.jars

    from ..demo.oilrig import spark_session
    from ..testing import Broker

    with tempfile.TemporaryDirectory(prefix="kafkacompat-spark-bench-") as data, Broker(data_dir=data) as broker:
        started = time.perf_counter()
        count = fill(broker, int(args.gib * (1 << 30)), args.message_bytes, args.partitions)
        print(f"filled {count:,} messages of {args.message_bytes} B in {time.perf_counter() - started:.1f} s")
        spark = spark_session()
        readers = {"kafkacompat": spark.read.format("kafkacompat").option("dataDir", data).option("subscribe", TOPIC)}
        if connector_jars():
            readers["kafka"] = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                                .option("subscribe", TOPIC).option("startingOffsets", "earliest"))
        else:
            print("Spark's Kafka connector jars not given: measuring format('kafkacompat') alone")
        times: dict[str, list[float]] = {name: [] for name in readers}
        try:
            for round_ in range(1, args.rounds + 1):
                for name, reader in readers.items():
                    n, total, seconds = scan(reader.load())
                    if n != count or total != count * args.message_bytes:
                        raise RuntimeError(f"{name} read {n} rows / {total} bytes, expected {count}")
                    times[name].append(seconds)
                    print(f"round {round_} {name:12s} {n / seconds:12,.0f} rows/s {total / seconds / 1e6:9.1f} MB/s")
        finally:
            spark.stop()
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        for name, seconds in medians.items():
            print(f"median {name:11s} {count / seconds:12,.0f} rows/s "
                  f"{count * args.message_bytes / seconds / 1e6:9.1f} MB/s")
        if "kafka" in medians:
            print(f"ratio kafkacompat / kafka: {medians['kafka'] / medians['kafkacompat']:.2f}x")


if __name__ == "__main__":
    main()
