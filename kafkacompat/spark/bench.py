"""Full-scan benchmark: format("kafkacompat") against Spark's Kafka source, same data, same run.

    python -m kafkacompat.spark.bench --gib 1 --rounds 2

Fills a disk broker with GiB of 1 KiB messages (confluent-kafka), then
alternates the two readers over the same topic (the order swapping every
round), each computing count(*) and sum(length(value)) so every value is
read. Each reader first scans once untimed: the first query of a session
pays for the JVM's compiling and for starting Python workers, whichever
reader comes first. Besides rows/s and MB/s it prints the CPU seconds
Spark's processes and the broker spent per scan, which a busy machine
disturbs less than wall time, and the load average. Spark's Kafka
source needs its connector jars (KAFKACOMPAT_SPARK_JARS, or --jars FOLDER
holding spark-sql-kafka, spark-token-provider-kafka and commons-pool2;
kafka-clients too, else pyflink/lib's is used, see kafkacompat.spark.jars);
without them only the direct reader is measured.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import statistics
import tempfile
import time

from .jars import ConnectorJarsError, connector_jars

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


def scan(df: object) -> tuple[int, int, float, float]:
    """(rows, value bytes, seconds, CPU seconds of this process and its children) of one full scan."""
    cpu, started = tree_cpu_seconds(), time.perf_counter()
    row = df.selectExpr("count(*) AS n", "sum(length(value)) AS bytes").collect()[0]  # type: ignore[attr-defined]
    return row.n, row.bytes, time.perf_counter() - started, tree_cpu_seconds() - cpu


def tree_cpu_seconds() -> float:
    """CPU time of this process (the broker serving format("kafka")) and every live descendant
    (Spark's JVM, its Python workers), from /proc: children still running are not in getrusage.
    Each process's own time counts with that of the children it reaped (Spark's short-lived
    planning workers, forked by its Python daemons)."""
    parents: dict[int, int] = {}
    times: dict[int, float] = {}
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            parents[int(entry.name)] = int(fields[1])
            times[int(entry.name)] = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0.0)
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return total


def record_decoder() -> str:
    """Which record decoder format("kafkacompat") runs: without the C walk (pip install -e . builds
    protocol/_record_scan.c) its figures are several times slower, so they say so."""
    from ..protocol import record_columns

    return "records decoded in C" if record_columns._c_columns is not None else \
        "records decoded in Python: the C walk is not built"


def load() -> str:
    return "load " + " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                     allow_abbrev=False)
    parser.add_argument("--gib", type=float, default=1.0, help="data to scan (default 1 GiB)")
    parser.add_argument("--message-bytes", type=int, default=1024)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the two readers (default 2)")
    parser.add_argument("--jars", metavar="FOLDER", help="Spark's Kafka connector jars (else KAFKACOMPAT_SPARK_JARS)")
    parser.add_argument("--python-daemon", metavar="MODULE", default="kafkacompat.spark.daemon",
                        help="spark.python.daemon.module: kafkacompat.spark.daemon (default, as docs/spark.md "
                             "recommends) or pyspark.daemon (Spark's own)")
    args = parser.parse_args()
    if args.jars:
        os.environ["KAFKACOMPAT_SPARK_JARS"] = args.jars
    try:
        jars = connector_jars()
    except ConnectorJarsError as exc:
        parser.exit(2, f"kafkacompat.spark.bench: {exc}\n")

    from ..demo.oilrig import spark_session
    from ..testing import Broker

    with tempfile.TemporaryDirectory(prefix="kafkacompat-spark-bench-") as data, Broker(data_dir=data) as broker:
        started = time.perf_counter()
        count = fill(broker, int(args.gib * (1 << 30)), args.message_bytes, args.partitions)
        print(f"filled {count:,} messages of {args.message_bytes} B in {time.perf_counter() - started:.1f} s; "
              f"format('kafkacompat'): {record_decoder()}; Python workers forked by {args.python_daemon}")
        spark = spark_session(args.python_daemon)
        readers = {"kafkacompat": spark.read.format("kafkacompat").option("dataDir", data).option("subscribe", TOPIC)}
        if jars:
            readers["kafka"] = (spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                                .option("subscribe", TOPIC).option("startingOffsets", "earliest"))
        else:
            print("Spark's Kafka connector jars not given: measuring format('kafkacompat') alone")
        times: dict[str, list[float]] = {name: [] for name in readers}
        cpu: dict[str, list[float]] = {name: [] for name in readers}
        try:
            for name, reader in readers.items():
                n, _, seconds, _ = scan(reader.load())
                print(f"warm-up {name:12s} {n / seconds:12,.0f} rows/s (untimed)  {load()}")
            for round_ in range(1, args.rounds + 1):
                order = list(readers) if round_ % 2 else list(reversed(readers))
                for name in order:
                    n, total, seconds, used = scan(readers[name].load())
                    if n != count or total != count * args.message_bytes:
                        raise RuntimeError(f"{name} read {n} rows / {total} bytes, expected {count}")
                    times[name].append(seconds)
                    cpu[name].append(used)
                    print(f"round {round_} {name:12s} {n / seconds:12,.0f} rows/s {total / seconds / 1e6:9.1f} MB/s "
                          f"{used:7.1f} CPU s  {load()}")
        finally:
            spark.stop()
        medians = {name: statistics.median(ts) for name, ts in times.items()}
        cpu_medians = {name: statistics.median(used) for name, used in cpu.items()}
        for name, seconds in medians.items():
            print(f"median {name:11s} {count / seconds:12,.0f} rows/s "
                  f"{count * args.message_bytes / seconds / 1e6:9.1f} MB/s {cpu_medians[name]:7.1f} CPU s")
        if "kafka" in medians:
            print(f"ratio kafkacompat / kafka: {medians['kafka'] / medians['kafkacompat']:.2f}x "
                  f"(CPU: {cpu_medians['kafka'] / cpu_medians['kafkacompat']:.2f}x)  {load()}")


if __name__ == "__main__":
    main()
