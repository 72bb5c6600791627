"""REST produce against the Kafka port, side by side on one broker: `python -m kafkacompat.bench.rest`.

One kafkacompat subprocess serves both ports. The same number of records of
the same size go in three ways: librdkafka on the Kafka port (acks=all),
REST v3 streamed produce (a few concurrent requests, each a stream of JSON
records sent in chunks, answered record by record), and single-record REST
POSTs one after another for latency. Figures are records/s and latency
percentiles; the ratio REST/Kafka is the number to watch.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import statistics
import sys
import time
from typing import Any

from ..testing.ports import free_port
from .brokers import KafkacompatBroker
from .workloads import produce_waiting


class RestBroker(KafkacompatBroker):
    """kafkacompat with its HTTP port on too."""

    def _prepare(self) -> None:
        self.http_port = free_port()
        super()._prepare()

    def _command(self) -> list[str]:
        return [*super()._command(), "--http-port", str(self.http_port), "--http-host", "127.0.0.1"]


def kafka_produce(bootstrap: str, topic: str, records: int, size: int) -> float:
    """Records/s through librdkafka on the Kafka port (acks=all, batched as librdkafka does)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": False})
    value = b"x" * size
    failures: list[Any] = []
    started = time.perf_counter()
    for _ in range(records):
        produce_waiting(producer, topic, value, on_delivery=lambda err, _msg: err and failures.append(err))
        producer.poll(0)
    producer.flush(120)
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{len(failures)} Kafka deliveries failed: {failures[0]}")
    return records / elapsed


def kafka_latencies(bootstrap: str, topic: str, samples: int, size: int) -> list[float]:
    """Milliseconds from produce() to its delivery report, one record at a time."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    value, out = b"x" * size, []
    for _ in range(samples):
        started = time.perf_counter()
        producer.produce(topic, value)
        producer.flush(10)
        out.append((time.perf_counter() - started) * 1000)
    return out


async def rest_stream(url: str, records: int, size: int, streams: int, chunk: int) -> float:
    """Records/s through REST v3 produce: `streams` concurrent requests, each sending JSON records in chunks."""
    import aiohttp

    record = json.dumps({"value": {"type": "BINARY", "data": base64.b64encode(b"x" * size).decode()}}).encode()
    per_stream = records // streams

    async def body():
        for start in range(0, per_stream, chunk):
            yield record * min(chunk, per_stream - start)

    async def one(session: aiohttp.ClientSession) -> int:
        async with session.post(url, data=body(), headers={"Content-Type": "application/json"}) as answer:
            lines = (await answer.read()).splitlines()
        good = sum(1 for line in lines if json.loads(line)["error_code"] == 200)
        if good != per_stream:
            raise RuntimeError(f"REST stream: {good} of {per_stream} records written")
        return good

    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=600)) as session:
        started = time.perf_counter()
        written = sum(await asyncio.gather(*(one(session) for _ in range(streams))))
        return written / (time.perf_counter() - started)


async def rest_latencies(url: str, samples: int, size: int) -> list[float]:
    """Milliseconds per single-record REST produce (one POST each, keep-alive)."""
    import aiohttp

    body = {"value": {"type": "BINARY", "data": base64.b64encode(b"x" * size).decode()}}
    out = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as session:
        for _ in range(samples):
            started = time.perf_counter()
            async with session.post(url, json=body) as answer:
                report = await answer.json(content_type=None)
            out.append((time.perf_counter() - started) * 1000)
            if report["error_code"] != 200:
                raise RuntimeError(f"REST produce failed: {report}")
    return out


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def run(args: argparse.Namespace) -> dict[str, Any]:
    import requests

    broker = RestBroker(args.data_dir, args.fsync)
    with broker:
        http = f"http://127.0.0.1:{broker.http_port}"
        deadline = time.monotonic() + 20
        while True:
            try:
                if requests.get(http + "/health/ready", timeout=2).status_code == 200:
                    break
            except requests.ConnectionError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the HTTP port did not become ready")
            time.sleep(0.1)
        cluster = requests.get(http + "/v3/clusters", timeout=10).json()["data"][0]["cluster_id"]
        v3 = f"{http}/v3/clusters/{cluster}"
        for topic in ("bench-kafka", "bench-rest", "bench-kafka-lat", "bench-rest-lat"):
            answer = requests.post(v3 + "/topics", json={"topic_name": topic, "partitions_count": 1}, timeout=10)
            answer.raise_for_status()
        kafka_rate = kafka_produce(broker.bootstrap, "bench-kafka", args.records, args.size)
        rest_rate = asyncio.run(rest_stream(v3 + "/topics/bench-rest/records", args.records, args.size,
                                            args.streams, args.chunk))
        kafka_lat = kafka_latencies(broker.bootstrap, "bench-kafka-lat", args.samples, args.size)
        rest_lat = asyncio.run(rest_latencies(v3 + "/topics/bench-rest-lat/records", args.samples, args.size))
    return {
        "records": args.records, "size": args.size, "streams": args.streams, "chunk": args.chunk,
        "kafka_records_per_s": round(kafka_rate), "rest_records_per_s": round(rest_rate),
        "rest_over_kafka": round(rest_rate / kafka_rate, 3),
        "kafka_p50_ms": round(statistics.median(kafka_lat), 2), "kafka_p99_ms": round(percentile(kafka_lat, 0.99), 2),
        "rest_p50_ms": round(statistics.median(rest_lat), 2), "rest_p99_ms": round(percentile(rest_lat, 0.99), 2),
        "engine": broker.description,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.bench.rest", description=__doc__.splitlines()[0],
                                     allow_abbrev=False)
    parser.add_argument("--records", type=int, default=50_000, help="records per throughput run (default 50000)")
    parser.add_argument("--size", type=int, default=100, help="value bytes per record (default 100)")
    parser.add_argument("--streams", type=int, default=4, help="concurrent REST produce requests (default 4)")
    parser.add_argument("--chunk", type=int, default=500, help="records per chunk of a REST stream (default 500)")
    parser.add_argument("--samples", type=int, default=500, help="single-record produces for latency (default 500)")
    parser.add_argument("--data-dir", default=None, help="parent of the store (default: temp dir; memory:// too)")
    parser.add_argument("--fsync", choices=("none", "interval", "always"), default="interval")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    figures = run(args)
    if args.json:
        print(json.dumps(figures))
        return 0
    print(f"{figures['engine']}; {args.records} records of {args.size} B")
    print(f"{'path':<34}{'records/s':>12}{'p50 ms':>10}{'p99 ms':>10}")
    print(f"{'Kafka port (librdkafka, acks=all)':<34}{figures['kafka_records_per_s']:>12}"
          f"{figures['kafka_p50_ms']:>10}{figures['kafka_p99_ms']:>10}")
    print(f"{'REST v3 (' + str(args.streams) + ' streams x ' + str(args.chunk) + '/chunk)':<34}"
          f"{figures['rest_records_per_s']:>12}{figures['rest_p50_ms']:>10}{figures['rest_p99_ms']:>10}")
    print(f"REST/Kafka throughput: {figures['rest_over_kafka']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
