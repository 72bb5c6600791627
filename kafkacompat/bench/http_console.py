"""How /metrics and the web console hold up with many topics: `python -m kafkacompat.bench.http_console`.

Starts an in-process broker (memory store) with HTTP on, creates --topics
topics in the default stream, produces one message to each of the first
--series topics through librdkafka (so they get their own series) and
commits a group's offsets for them, then prints the median time of each
HTTP request over --repeat runs, and the cost of counting a Fetch's records
from batch headers next to the cost of sending the same bytes' length.
"""

from __future__ import annotations

import argparse
import statistics
import time
import timeit
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition

from kafkacompat.protocol.records import Record, build_batch, count_records
from kafkacompat.testing import Broker


def _get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=600) as answer:
        size = len(answer.read())
    return time.perf_counter() - started, size


async def _create(broker: Broker, count: int) -> None:
    store = broker.server.cluster.store
    for i in range(count):
        await store.create_topic(store.default_stream, f"t{i:07d}", 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--topics", type=int, default=100_000)
    parser.add_argument("--series", type=int, default=1000, help="metrics_topic_series: topics with their own series")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    with Broker(http_port=0, metrics_topic_series=args.series) as broker:
        started = time.perf_counter()
        broker.call(_create(broker, args.topics), timeout=3600)
        print(f"created {args.topics} topics in {time.perf_counter() - started:.1f} s")
        fed = [f"t{i:07d}" for i in range(min(max(args.series, 1), args.topics))]
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
        for name in fed:
            producer.produce(name, b"m")
        assert producer.flush(60) == 0
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "bench"})
        consumer.commit(offsets=[TopicPartition(name, 0, 0) for name in fed], asynchronous=False)
        consumer.close()
        base = broker.http_url
        print(f"{'request':<48} {'median ms':>10} {'bytes':>10}")
        for label, path in (("/metrics", "/metrics"), ("console: streams (/)", "/"),
                            ("console: stream page (first 100 topics)", "/console/stream?path=/default"),
                            ("console: topic page", "/console/topic?stream=/default&topic=t0000000"),
                            ("console: groups", "/console/groups"), ("console: group", "/console/group?id=bench")):
            runs = [_get(base + path) for _ in range(args.repeat)]
            print(f"{label:<48} {statistics.median(t for t, _ in runs) * 1000:>10.1f} {runs[-1][1]:>10}")
    # the Fetch path's added work per partition answered: walking the batch headers of what is sent
    batch = build_batch([Record(b"k", b"v" * 100)] * 10)
    data = bytes(batch) * 64  # 64 batches of 10 records, ~80 KiB
    n = 20_000
    walk = timeit.timeit(lambda: count_records(data), number=n) / n
    print(f"counting the records of a {len(data)} B fetch answer (64 batches): {walk * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
