"""What schema validation at the broker costs per record (confluent.value.schema.validation=true).

    python -m kafkacompat.bench.schema_validation [--records 200000] [--size 100]

Two figures. The check alone: the produce handler's added work for one
1 MiB batch of Confluent-framed records (decoding the batch's records and
looking each id up), timed in-process, per record. End to end: librdkafka
producing the same framed records to a topic with validation and to one
without, on one in-memory test broker, alternating, messages per second
(a shared machine makes these noisy; the per-record figure is the steady one).
"""

from __future__ import annotations

import argparse
import statistics
import time

from confluent_kafka import Producer

from kafkacompat.protocol.records import Record, build_batch, iter_records
from kafkacompat.schemas.registry import registry_of
from kafkacompat.schemas.validation import refusals
from kafkacompat.testing import Broker

SCHEMA = {"schema": '{"type":"record","name":"Bench","fields":[{"name":"payload","type":"bytes"}]}'}


def _framed(schema_id: int, size: int) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + b"x" * max(size - 5, 0)


def check_cost(broker: Broker, schema_id: int, size: int, rounds: int = 5) -> float:
    """Seconds per record of the handler's added work on one 1 MiB batch (the best of `rounds`: the least disturbed)."""
    count = (1 << 20) // (size + 20)
    batch = build_batch([Record(None, _framed(schema_id, size), [], 0) for _ in range(count)])
    cluster = broker.server.cluster

    async def once() -> float:
        started = time.perf_counter()
        found = await refusals(cluster, {"bench-validated"}, iter_records(batch), keys=None,
                               values="TopicNameStrategy")
        assert not found, found
        return (time.perf_counter() - started) / count

    return min(broker.call(once()) for _ in range(rounds))


def produce_rate(broker: Broker, topic: str, value: bytes, records: int) -> float:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5,
                         "batch.size": 1 << 20, "acks": 1})
    failed = []
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(topic, value, on_delivery=lambda e, m: e is not None and failed.append(e))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    producer.flush(60)
    elapsed = time.perf_counter() - started
    assert not failed, failed[:3]
    return records / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per value, the 5-byte frame included")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with Broker(http_port=0) as broker:
        broker.create_topic("bench-validated", configs={"confluent.value.schema.validation": "true"})
        broker.create_topic("bench-plain")

        async def register() -> int:
            registry = registry_of(broker.server.cluster)
            await registry.refresh()
            return (await registry.register("bench-validated-value", SCHEMA)).id

        schema_id = broker.call(register())
        per_record = check_cost(broker, schema_id, args.size)
        value = _framed(schema_id, args.size)
        rates: dict[str, list[float]] = {"bench-validated": [], "bench-plain": []}
        for _ in range(args.rounds):
            for topic in rates:
                rates[topic].append(produce_rate(broker, topic, value, args.records))
    with_check, without = statistics.median(rates["bench-validated"]), statistics.median(rates["bench-plain"])
    print(f"check alone: {per_record * 1e6:.2f} us per {args.size}-byte record "
          f"({1 / per_record:,.0f} records/s of one core)")
    print(f"librdkafka produce, {args.records:,} records x {args.rounds} rounds (median msg/s): "
          f"without validation {without:,.0f}, with {with_check:,.0f} ({with_check / without:.0%})")


if __name__ == "__main__":
    main()
