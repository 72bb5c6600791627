"""Benchmark: one broker on the cloud engine (PostgreSQL + S3) beside one on the disk engine.

    python -m kafkacompat.bench.cloud_store [--seconds 10] [--size 1000] [--partitions 6]

Starts a private PostgreSQL and moto's S3 server (kafkacompat.testing.services),
then, for each engine in turn, a `kafkacompat serve` subprocess, and drives it
with librdkafka as users do: produce throughput (acks=all, as fast as it
goes), consume throughput (the same messages from the earliest offset),
produce latency (acks=all, a fixed rate, time from send to delivery report)
and, for the cloud engine, what the database did: transactions committed
(pg_stat_database) and kc_commit calls (objects written) per produced batch.
Both engines run in the same process tree on the same machine, one after the
other; compare the ratios, not the absolute numbers (moto is a Python S3).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import os
import sys
import threading
import time
from typing import Any

from confluent_kafka import Producer

from ..testing.services import BUCKET, Postgres, S3Server
from .brokers import KafkacompatBroker
from .workloads import consume, create_topics, percentile, produce


class CloudBroker(KafkacompatBroker):
    """`kafkacompat serve --store postgresql://... --object-store s3://...`."""

    def __init__(self, database: str, objects: str, environ: dict[str, str], flush_ms: int) -> None:
        super().__init__("memory://", "none")
        self.database, self.objects, self.environ, self.flush_ms = database, objects, environ, flush_ms
        self.description = f"kafkacompat (cloud engine, store_flush_ms={flush_ms})"

    def _prepare(self) -> None:
        pass

    def _env(self) -> dict[str, str]:
        return {**super()._env(), **self.environ}

    def _command(self) -> list[str]:
        command = super()._command()
        at = command.index("--data-dir")
        del command[at:at + 2]
        return command + ["--store", self.database, "--object-store", self.objects,
                          "--store-flush-ms", str(self.flush_ms)]


@dataclasses.dataclass
class Figures:
    engine: str
    produce_msgs_s: float = 0.0
    produce_mb_s: float = 0.0
    consume_msgs_s: float = 0.0
    consume_mb_s: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    batches: int | None = None
    objects: int | None = None
    transactions: int | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


def produce_latency(bootstrap: str, topic: str, size: int, rate: int, seconds: float, linger_ms: int) -> list[float]:
    """Milliseconds from produce() to the delivery report, acks=all, `rate` messages a second."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": linger_ms})
    value = os.urandom(size)
    latencies: list[float] = []
    lock = threading.Lock()

    def report(sent_at: float) -> Any:
        def done(error: Any, _msg: Any) -> None:
            if error is None:
                with lock:
                    latencies.append((time.perf_counter() - sent_at) * 1000)
        return done

    producer.produce(topic, value)  # connections and metadata first, not counted
    producer.flush(30)
    start = time.perf_counter()
    sent = 0
    while time.perf_counter() - start < seconds:
        due = int((time.perf_counter() - start) * rate) + 1
        while sent < due:
            producer.produce(topic, value, on_delivery=report(time.perf_counter()))
            sent += 1
        producer.poll(0.001)
    producer.flush(30)
    return sorted(latencies)


def database_counters(pg: Postgres, database: str) -> tuple[int, int, int]:
    """(transactions committed, batches indexed, objects recorded) of the store's database."""
    name = database.rsplit("/", 1)[1]
    xacts = int(pg.sql(f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{name}'").strip())
    batches, objects = pg.sql("SELECT (SELECT count(*) FROM kc_batches), (SELECT count(*) FROM kc_objects)",
                              database=name).strip().split("|")
    return xacts, int(batches), int(objects)


def run_engine(broker: KafkacompatBroker, args: argparse.Namespace, engine: str,
               pg: Postgres | None = None, database: str | None = None) -> Figures:
    figures = Figures(engine)
    broker.start()
    try:
        bootstrap = broker.bootstrap
        create_topics(bootstrap, [("bench-throughput", args.partitions), ("bench-latency", 1)])
        before = database_counters(pg, database) if pg and database else None
        with concurrent.futures.ThreadPoolExecutor(args.producers) as pool:  # librdkafka releases the GIL
            outcomes = list(pool.map(lambda _: produce(bootstrap, "bench-throughput", args.size, -1, args.seconds),
                                     range(args.producers)))
        outcome = outcomes[0]
        outcome.messages = sum(o.messages for o in outcomes)
        outcome.seconds = max(o.seconds for o in outcomes)
        outcome.status = "; ".join(o.status for o in outcomes if o.status != "ok") or "ok"
        if pg and database and before:
            time.sleep(0.5)  # pg_stat_database is updated by the backends about every 500 ms
            after = database_counters(pg, database)
            figures.transactions, figures.batches, figures.objects = (a - b for a, b in zip(after, before))
        figures.produce_msgs_s = outcome.messages / outcome.seconds
        figures.produce_mb_s = figures.produce_msgs_s * args.size / 1e6
        if outcome.status != "ok":
            figures.notes.append(f"produce: {outcome.status}")
        read = consume(bootstrap, "bench-throughput", args.partitions, outcome.messages, 30)
        figures.consume_msgs_s = read.messages / read.seconds if read.seconds else 0.0
        figures.consume_mb_s = figures.consume_msgs_s * args.size / 1e6
        if read.status != "ok":
            figures.notes.append(f"consume: {read.status}")
        latencies = produce_latency(bootstrap, "bench-latency", args.size, args.rate, args.latency_seconds,
                                     args.linger_ms)
        if latencies:
            figures.p50_ms, figures.p99_ms = percentile(latencies, 0.5), percentile(latencies, 0.99)
    finally:
        broker.stop()
    return figures


def report(rows: list[Figures], args: argparse.Namespace) -> str:
    lines = [f"{args.size}-byte messages, {args.partitions} partitions, acks=all; {args.producers} producer(s) for "
             f"{args.seconds:g} s; latency at {args.rate}/s, linger.ms={args.linger_ms}, for "
             f"{args.latency_seconds:g} s; {os.cpu_count()} cores",
             f"{'engine':<34} {'produce msg/s':>13} {'MB/s':>6} {'consume msg/s':>13} {'MB/s':>6} "
             f"{'p50 ms':>7} {'p99 ms':>7} {'db tx/batch':>11} {'objects/batch':>13}"]
    for f in rows:
        tx = f"{f.transactions / f.batches:.3f}" if f.batches else "-"
        ob = f"{f.objects / f.batches:.3f}" if f.batches else "-"
        lines.append(f"{f.engine:<34} {f.produce_msgs_s:>13,.0f} {f.produce_mb_s:>6.1f} {f.consume_msgs_s:>13,.0f} "
                     f"{f.consume_mb_s:>6.1f} {f.p50_ms:>7.1f} {f.p99_ms:>7.1f} {tx:>11} {ob:>13}")
        if f.batches:
            lines.append(f"{'':<34} {f.batches} batches in {f.objects} objects, {f.transactions} transactions")
        lines.extend(f"{'':<34} {note}" for note in f.notes)
    if len(rows) == 2 and rows[0].produce_msgs_s and rows[0].consume_msgs_s:
        d, c = rows
        lines.append(f"cloud/disk: produce {c.produce_msgs_s / d.produce_msgs_s:.2f}x, consume "
                     f"{c.consume_msgs_s / d.consume_msgs_s:.2f}x, p50 {c.p50_ms / max(d.p50_ms, 1e-9):.1f}x, "
                     f"p99 {c.p99_ms / max(d.p99_ms, 1e-9):.1f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kafkacompat.bench.cloud_store", description=__doc__.split("\n\n")[0],
                                     allow_abbrev=False)
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the produce run (default 10)")
    parser.add_argument("--size", type=int, default=1000, help="message value bytes (default 1000)")
    parser.add_argument("--partitions", type=int, default=6, help="partitions of the throughput topic (default 6)")
    parser.add_argument("--producers", type=int, default=4, help="concurrent producers (connections) in the "
                        "throughput run (default 4)")
    parser.add_argument("--linger-ms", type=int, default=50, help="linger.ms of the latency run's producer (default "
                        "50: every produce request waits for an object write, so lingering less only queues "
                        "more requests)")
    parser.add_argument("--rate", type=int, default=200, help="messages a second in the latency run (default 200)")
    parser.add_argument("--latency-seconds", type=float, default=5.0, help="length of the latency run (default 5)")
    parser.add_argument("--flush-ms", type=int, default=10, help="store_flush_ms of the cloud broker (default 10)")
    args = parser.parse_args(argv)
    rows = []
    rows.append(run_engine(KafkacompatBroker(None, "interval"), args, "disk (fsync=interval)"))
    print(report(rows, args), flush=True)
    with Postgres() as pg, S3Server() as s3:
        s3.create_bucket(BUCKET)
        database = pg.create_database()
        broker = CloudBroker(database, f"s3://{BUCKET}/bench", s3.environ(), args.flush_ms)
        rows.append(run_engine(broker, args, f"cloud (flush {args.flush_ms} ms)", pg, database))
    print()
    print(report(rows, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
