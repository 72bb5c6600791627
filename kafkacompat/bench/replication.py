"""Replication benchmark: throughput between two local clusters and lag at a steady rate.

    python -m kafkacompat.bench.replication [--mb 200] [--lag-seconds 10] [--rate-mb 10]

Two brokers run as subprocesses on loopback, each its own cluster on disk
(fsync interval, the default). Figures printed:

- producer MB/s: one confluent-kafka producer (acks=1, linger 5 ms) writing
  into cluster A with no link, for comparison;
- replication MB/s: the link A -> B catching up on that data (added once the
  data is there; timed until B's end offsets equal A's), for 1 KiB and
  16 KiB messages;
- lag p50/p99 ms at a steady rate: the producer paced at --rate-mb MB/s into
  A while a consumer reads B; lag = when B's consumer got a message minus its
  CreateTime (the producer's clock, set just before A appended it). This is
  an upper bound of append-on-A to append-on-B: it adds the producer's
  linger and B's fetch.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time

from ..admin.client import AdminClient, AdminError
from ..testing.cluster_process import ClusterProcess
from .workloads import produce_waiting

TOPIC = "/bench:data"
PARTITIONS = 4


def _ends(bootstrap: str) -> list[int]:
    """The topic's end offset per partition (empty while the topic does not exist there)."""
    try:
        view = AdminClient(bootstrap).call("topic.info", name=TOPIC)
    except AdminError:
        return []
    return [p["high_watermark"] for p in view["partition_detail"]]


def _produce(bootstrap: str, size: int, total_bytes: int) -> float:
    """Write total_bytes of size-byte messages as fast as one producer can; MB/s."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 5,
                         "batch.size": 1 << 20, "queue.buffering.max.kbytes": 1 << 20})
    value = b"x" * size
    count = total_bytes // size
    started = time.perf_counter()
    for i in range(count):
        produce_waiting(producer, TOPIC, value, partition=i % PARTITIONS)
    producer.flush(120)
    return count * size / (time.perf_counter() - started) / 1e6


def _fresh_pair(root: str, tag: str) -> tuple[ClusterProcess, ClusterProcess]:
    a = ClusterProcess(f"sanjose-{tag}", f"{root}/a-{tag}").start()
    b = ClusterProcess(f"newyork-{tag}", f"{root}/b-{tag}").start()
    for cluster in (a, b):
        AdminClient(cluster.bootstrap).call("stream.create", path="/bench",
                                            policy={"default_partitions": PARTITIONS})
    AdminClient(a.bootstrap).call("topic.create", name=TOPIC, partitions=PARTITIONS)
    return a, b


def throughput(root: str, size: int, total_mb: int) -> tuple[float, float]:
    """(producer MB/s, replication MB/s) for one message size."""
    a, b = _fresh_pair(root, f"tp{size}")
    try:
        produced = _produce(a.bootstrap, size, total_mb * 1_000_000)
        target = _ends(a.bootstrap)
        started = time.perf_counter()
        AdminClient(a.bootstrap).call("replica.add", path="/bench", replica=f"{b.bootstrap}/bench")
        while _ends(b.bootstrap) != target:
            time.sleep(0.02)
        elapsed = time.perf_counter() - started
        return produced, total_mb / elapsed
    finally:
        a.close()
        b.close()


def steady_lag(root: str, rate_mb: float, seconds: float, size: int = 4096) -> list[float]:
    """Lags (ms) of every message written at a steady rate_mb MB/s, seen on the replica."""
    from confluent_kafka import Consumer, Producer

    a, b = _fresh_pair(root, "lag")
    try:
        AdminClient(a.bootstrap).call("replica.add", path="/bench", replica=f"{b.bootstrap}/bench")
        time.sleep(1.0)  # the link connects and learns the (empty) topic
        per_second = rate_mb * 1e6 / size
        count = int(per_second * seconds)
        lags: list[float] = []
        consumer = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "bench-lag",
                             "auto.offset.reset": "earliest", "fetch.wait.max.ms": 10})
        consumer.subscribe([TOPIC])
        done = threading.Event()

        def read() -> None:
            while len(lags) < count and not done.is_set():
                msg = consumer.poll(0.5)
                if msg is None or msg.error():
                    continue
                lags.append(time.time() * 1000 - msg.timestamp()[1])

        reader = threading.Thread(target=read)
        reader.start()
        producer = Producer({"bootstrap.servers": a.bootstrap, "acks": "1", "linger.ms": 1})
        value = b"x" * size
        started = time.perf_counter()
        for i in range(count):
            due = started + i / per_second
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            producer.produce(TOPIC, value, partition=i % PARTITIONS)
            producer.poll(0)
        producer.flush(30)
        reader.join(seconds + 30)
        done.set()
        consumer.close()
        return lags
    finally:
        a.close()
        b.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.bench.replication", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, allow_abbrev=False)
    parser.add_argument("--mb", type=int, default=200, help="megabytes written per message size (default 200)")
    parser.add_argument("--lag-seconds", type=float, default=10, help="length of the steady-rate run (default 10)")
    parser.add_argument("--rate-mb", type=float, default=10, help="steady rate in MB/s (default 10)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kafkacompat-bench-repl-") as root:
        print(f"{'message':>8}  {'producer MB/s':>13}  {'replication MB/s':>16}")
        for size in (1024, 16384):
            produced, replicated = throughput(root, size, args.mb)
            print(f"{size // 1024:>6} KiB  {produced:>13.1f}  {replicated:>16.1f}", flush=True)
        lags = steady_lag(root, args.rate_mb, args.lag_seconds)
        q = statistics.quantiles(lags, n=100)
        print(f"lag at {args.rate_mb:g} MB/s (4 KiB messages, {len(lags)} messages): p50 {q[49]:.1f} ms, "
              f"p99 {q[98]:.1f} ms, max {max(lags):.1f} ms")
    # four processes (two brokers, producer, consumer) share the machine: its load says how fair a run was
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
