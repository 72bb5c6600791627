"""The workloads, driven by librdkafka (confluent-kafka) as users drive it.

Each returns an Outcome instead of raising when the broker misbehaves
(errors, stalls, lost messages), so the report keeps every row and says what
went wrong. Client settings are librdkafka's defaults except where noted.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import struct
import threading
import time
from collections.abc import Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

log = logging.getLogger(__name__)
_client_log = logging.getLogger("kafkacompat.bench.librdkafka")

QUEUE_KBYTES = 64 * 1024  # bounds the flush at the end of a produce run
FLUSH_TIMEOUT_S = 60.0
LATENCY_LINGER_MS = 1
# librdkafka stops fetching for fetch.queue.backoff.ms (1 s) whenever more than
# queued.min.messages (100,000) or queued.max.messages.kbytes (64 MiB) wait in
# its queue: a broker that delivers faster than the application reads is then
# idled for a second at a time, and that pause, not the broker, sets the pace.
# No backoff (fetching resumes as soon as the queue drains) measures the broker.
CONSUMER_TUNING = {"queued.min.messages": 1_000_000, "fetch.queue.backoff.ms": 0}
_STAMP = struct.Struct(">Q")


@dataclasses.dataclass(slots=True)
class Outcome:
    messages: int  # delivered (produce) or received (consume, latency)
    seconds: float
    status: str = "ok"
    latencies_ms: list[float] = dataclasses.field(default_factory=list)
    percentiles_ms: tuple[float, float, float] | None = None  # p50, p99, p99.9 when a tool gives only those


def _conf(bootstrap: str, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": bootstrap, "logger": _client_log, **extra}



def produce_waiting(producer: Any, topic: str, value: bytes, **kwargs: Any) -> None:
    """producer.produce, waiting for room (poll) while librdkafka's queue is full (BufferError)."""
    while True:
        try:
            producer.produce(topic, value, **kwargs)
            return
        except BufferError:
            producer.poll(0.01)

def create_topics(bootstrap: str, topics: Sequence[tuple[str, int]], timeout: float = 30.0) -> None:
    """Create topics (name, partitions) with replication factor 1."""
    admin = AdminClient(_conf(bootstrap))
    futures = admin.create_topics(
        [NewTopic(name, partitions, 1) for name, partitions in topics], operation_timeout=timeout
    )
    for name, future in futures.items():
        try:
            future.result(timeout)
        except Exception as exc:  # noqa: BLE001 - KafkaException wraps the error code
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise RuntimeError(f"cannot create topic {name}: {exc}") from exc


class _Deliveries:
    """Counts failed deliveries (only errors are reported back: no per-message Python work)."""

    def __init__(self) -> None:
        self.failed = 0
        self.first_error: str | None = None

    def __call__(self, error: KafkaError | None, _msg: Any) -> None:
        if error is not None:
            self.failed += 1
            self.first_error = self.first_error or str(error)


def produce(
    bootstrap: str, topic: str, size: int, acks: int, duration: float, per_transaction: int = 0
) -> Outcome:
    """Send `size`-byte values as fast as the broker takes them for `duration` seconds, then flush.

    With `per_transaction` > 0 the producer is transactional (acks=all,
    idempotent) and commits every `per_transaction` messages; the time
    includes every commit.
    """
    deliveries = _Deliveries()
    extra: dict[str, Any] = {"transactional.id": f"bench-{os.getpid()}-{topic}"} if per_transaction else {}
    producer = Producer(_conf(
        bootstrap,
        acks=str(acks),
        **{
            "queue.buffering.max.kbytes": QUEUE_KBYTES,
            "queue.buffering.max.messages": 1_000_000,
            "delivery.report.only.error": True,
            "on_delivery": deliveries,
            **extra,
        },
    ))
    value = os.urandom(size)
    send = producer.produce
    sent = 0
    if per_transaction:
        producer.init_transactions(FLUSH_TIMEOUT_S)
    start = time.perf_counter()
    deadline = start + duration
    try:
        while time.perf_counter() < deadline:
            if per_transaction:
                producer.begin_transaction()
            for _ in range(per_transaction or 100):
                while True:
                    try:
                        send(topic, value)
                        break
                    except BufferError:  # queue full: let librdkafka drain it
                        producer.poll(0.001)
                sent += 1
            if per_transaction:
                producer.commit_transaction(FLUSH_TIMEOUT_S)
            producer.poll(0)
        left = producer.flush(FLUSH_TIMEOUT_S)
    finally:
        elapsed = time.perf_counter() - start
    delivered = sent - deliveries.failed - left
    outcome = Outcome(delivered, elapsed)
    if left:
        outcome.status = f"stalled: {left} of {sent} undelivered after {FLUSH_TIMEOUT_S:.0f} s"
    elif deliveries.failed:
        outcome.status = f"failed: {deliveries.failed} of {sent} not delivered ({deliveries.first_error})"
    return outcome


def consume(bootstrap: str, topic: str, partitions: int, expected: int, stall_s: float) -> Outcome:
    """Read `expected` messages from the earliest offset of every partition (assign, no group)."""
    consumer = Consumer(_conf(
        bootstrap,
        **{"group.id": f"bench-{os.getpid()}-{topic}", "enable.auto.commit": False,
           "enable.partition.eof": False, **CONSUMER_TUNING},
    ))
    got = 0
    first_error = None
    try:
        start = last = time.perf_counter()
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        while got < expected:
            # consume(n, t) returns once it has n messages or t passed: never ask for more than is left
            batch = consumer.consume(min(expected - got, 10_000), 0.2)
            now = time.perf_counter()
            if not batch:
                if now - last > stall_s:
                    break
                continue
            bad = [msg.error() for msg in batch if msg.error() is not None]
            if bad:
                first_error = first_error or str(bad[0])
            got += len(batch) - len(bad)
            last = now
    finally:
        consumer.close()
    outcome = Outcome(got, last - start)
    if got < expected:
        outcome.status = f"stalled: {got} of {expected} read, none for {stall_s:.0f} s"
    if first_error:
        outcome.status = f"errors: {first_error}; " + outcome.status
    return outcome


def latency(
    bootstrap: str, topic: str, size: int, acks: int, rate: int, duration: float, warmup: float, stall_s: float
) -> Outcome:
    """Produce at a fixed rate while a consumer reads along; latency = receive time - send time.

    Messages sent during the first `warmup` seconds are not counted. The
    producer lingers LATENCY_LINGER_MS (a low-latency setting); producer and
    consumer share this process, so one monotonic clock stamps both ends.
    """
    consumer = Consumer(_conf(
        bootstrap,
        **{"group.id": f"bench-{os.getpid()}-{topic}", "enable.auto.commit": False,
           "enable.partition.eof": False},
    ))
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    latencies: list[float] = []
    received = [0]
    stop = threading.Event()
    counted_from = [2**64]  # send stamps (ns) at or after this one count; set once warm

    def read() -> None:
        poll = consumer.poll  # not consume(n, t): that waits for n messages or t
        while not stop.is_set():
            msg = poll(0.05)
            if msg is None or msg.error() is not None:
                continue
            now = time.perf_counter_ns()
            sent_at = _STAMP.unpack_from(msg.value())[0]
            received[0] += 1
            if sent_at >= counted_from[0]:
                latencies.append((now - sent_at) / 1e6)

    reader = threading.Thread(target=read, name="bench-latency-reader", daemon=True)
    deliveries = _Deliveries()
    producer = Producer(_conf(
        bootstrap, acks=str(acks), **{"linger.ms": LATENCY_LINGER_MS, "on_delivery": deliveries,
                                      "delivery.report.only.error": True},
    ))
    padding = os.urandom(max(size - _STAMP.size, 0))
    sent = 0
    try:
        reader.start()
        # One message read end to end first: connections, metadata and the
        # consumer's offset lookup are then done and not counted.
        producer.produce(topic, _STAMP.pack(0) + padding)
        sent = 1
        producer.flush(FLUSH_TIMEOUT_S)
        ready_by = time.monotonic() + stall_s
        while not received[0] and time.monotonic() < ready_by:
            time.sleep(0.001)
        start = time.perf_counter_ns()
        counted_from[0] = start + int(warmup * 1e9)
        end = start + int((warmup + duration) * 1e9)
        while True:
            now = time.perf_counter_ns()
            if now >= end:
                break
            due = (now - start) * rate // 1_000_000_000 + 2
            while sent < due:
                producer.produce(topic, _STAMP.pack(time.perf_counter_ns()) + padding)
                sent += 1
            producer.poll(0)
            time.sleep(0.0002)
        left = producer.flush(FLUSH_TIMEOUT_S)
        wait_until = time.monotonic() + stall_s
        while received[0] < sent - deliveries.failed - left and time.monotonic() < wait_until:
            time.sleep(0.01)
    finally:
        stop.set()
        if reader.is_alive():
            reader.join()
        consumer.close()
    outcome = Outcome(received[0], duration, latencies_ms=latencies)
    if received[0] < sent:
        outcome.status = f"lost or stalled: {received[0]} of {sent} received"
    if deliveries.failed:
        outcome.status = f"failed: {deliveries.failed} of {sent} not delivered ({deliveries.first_error})"
    return outcome


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(int(fraction * len(sorted_values) + 0.999999) - 1, 0)
    return sorted_values[min(rank, len(sorted_values) - 1)]
