"""aiokafka, in the test process: each question on an event loop of its own."""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Callable
from typing import Any

from ..scenario_data import Received, headers, key, value
from . import ADMIN_RETENTION_MS, Driver
from .inprocess import LISTING_WAIT, TIMEOUT, asettled, header_pairs, text


def consumer_assignment_partitions(data: bytes) -> list[int]:
    """Partitions in a consumer-protocol assignment (version, [topic, [partition]], user data)."""
    pos = 2
    (topics,) = struct.unpack_from(">i", data, pos)
    pos += 4
    out = []
    for _ in range(topics):
        (length,) = struct.unpack_from(">h", data, pos)
        pos += 2 + length
        (count,) = struct.unpack_from(">i", data, pos)
        pos += 4
        out += struct.unpack_from(f">{count}i", data, pos)
        pos += 4 * count
    return sorted(out)


class AiokafkaDriver(Driver):
    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        import aiokafka

        self.aiokafka = aiokafka
        self.bootstrap = bootstrap
        self.version = f"aiokafka {aiokafka.__version__}"

    def _producer(self, **conf: Any) -> Any:
        return self.aiokafka.AIOKafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5, **conf)

    async def _send(self, producer: Any, topic: str, n: int, prefix: str, partition: int) -> list[int]:
        futures = [
            await producer.send(
                topic, key=key(prefix, i).encode(), value=value(prefix, i).encode(),
                headers=[(k, v.encode()) for k, v in headers(i)], partition=partition,
            )
            for i in range(n)
        ]
        sent = [await asyncio.wait_for(f, TIMEOUT) for f in futures]
        return [-1 if m is None else m.offset for m in sent]  # acks=0 answers None

    def produce(self, topic, n, *, prefix="", compression=None, acks="all", idempotent=False, partition=0):
        async def run() -> list[int]:
            producer = self._producer(
                acks=acks if acks == "all" else int(acks), compression_type=compression,
                enable_idempotence=idempotent,
            )
            await producer.start()
            try:
                return await self._send(producer, topic, n, prefix, partition)
            finally:
                await producer.stop()

        return asyncio.run(run())

    def _consumer(self, group: str | None = None) -> Any:
        return self.aiokafka.AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest", session_timeout_ms=10000, heartbeat_interval_ms=500,
        )

    @staticmethod
    async def _read(consumer: Any, n: int) -> list[Received]:
        out: list[Received] = []
        deadline = time.monotonic() + TIMEOUT
        while len(out) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for {n} records, got {len(out)}")
            for records in (await consumer.getmany(timeout_ms=200)).values():
                out.extend(
                    Received(r.partition, r.offset, text(r.key), text(r.value), header_pairs(r.headers), r.timestamp)
                    for r in records
                )
        return out

    def consume(self, topic, n, *, start="earliest", produce_after=0, partition=0):
        async def run() -> list[Received]:
            tp = self.aiokafka.TopicPartition(topic, partition)
            consumer = self._consumer()
            await consumer.start()
            try:
                consumer.assign([tp])
                if start == "earliest":
                    await consumer.seek_to_beginning(tp)
                elif start == "latest":
                    await consumer.seek_to_end(tp)
                else:
                    consumer.seek(tp, (await consumer.offsets_for_times({tp: start}))[tp].offset)
                if produce_after:
                    await consumer.position(tp)  # resolves "latest" now
                    producer = self._producer()
                    await producer.start()
                    try:
                        await self._send(producer, topic, produce_after, "new-", partition)
                    finally:
                        await producer.stop()
                return await self._read(consumer, n)
            finally:
                await consumer.stop()

        return asyncio.run(run())

    def group_consume(self, topic, group, n):
        async def run() -> list[Received]:
            consumer = self._consumer(group)
            await consumer.start()
            try:
                consumer.subscribe([topic])
                records = (await self._read(consumer, n))[:n]
                last = records[-1]
                await consumer.commit({self.aiokafka.TopicPartition(topic, last.partition): last.offset + 1})
                return records
            finally:
                await consumer.stop()

        return asyncio.run(run())

    def group_of_three(self, topic, group):
        async def wait_spread(members: list[Any], what: str) -> list[list[int]]:
            deadline = time.monotonic() + 60
            while True:
                owned = [sorted(tp.partition for tp in m.assignment()) for m in members]
                if all(owned) and sorted(p for ps in owned for p in ps) == [0, 1, 2]:
                    return owned
                if time.monotonic() > deadline:
                    raise TimeoutError(f"timed out waiting for {what}: {owned}")
                await asyncio.gather(*(m.getmany(timeout_ms=50) for m in members))

        async def run() -> dict[str, Any]:
            members = [self._consumer(group) for _ in range(3)]
            for member in members:
                await member.start()
                member.subscribe([topic])
            try:
                before = await wait_spread(members, "three members holding a partition each")
                await members.pop(0).stop()
                return {"before": before, "after": await wait_spread(members, "two members holding all partitions")}
            finally:
                for member in members:
                    await member.stop()

        return asyncio.run(run())

    def _admin_call(self, use: Callable[[Any], Any]) -> Any:
        from aiokafka.admin import AIOKafkaAdminClient

        async def run() -> Any:
            admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))
            await admin.start()
            try:
                return await use(admin)
            finally:
                await admin.close()

        return asyncio.run(run())

    @staticmethod
    async def _partitions(admin: Any, topic: str) -> int:
        (described,) = await admin.describe_topics([topic])
        return len(described["partitions"])

    def create_describe_topic(self, topic, partitions):
        from aiokafka.admin import NewTopic

        async def use(admin: Any) -> dict[str, Any]:
            await admin.create_topics([NewTopic(topic, partitions, 1)])
            deadline = time.monotonic() + LISTING_WAIT  # Kafka's metadata may lag the create a moment
            while topic not in await admin.list_topics() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            return {"partitions": await self._partitions(admin, topic), "listed": topic in await admin.list_topics()}

        return self._admin_call(use)

    def alter_configs(self, topic):
        from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

        async def retention(admin: Any) -> str:
            (response,) = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
            entries = response.resources[0][4]
            return next(entry[1] for entry in entries if entry[0] == "retention.ms")

        async def use(admin: Any) -> dict[str, Any]:
            before = await retention(admin)
            await admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={
                "retention.ms": ADMIN_RETENTION_MS,
            })])
            return {"before": before, "after": await asettled(lambda: retention(admin), ADMIN_RETENTION_MS.__eq__)}

        return self._admin_call(use)

    def create_partitions(self, topic, total):
        from aiokafka.admin import NewPartitions

        async def use(admin: Any) -> int:
            await admin.create_partitions({topic: NewPartitions(total)})
            return await asettled(lambda: self._partitions(admin, topic), total.__eq__)

        return self._admin_call(use)

    def delete_records(self, topic, before):
        from aiokafka.admin import RecordsToDelete

        tp = self.aiokafka.TopicPartition(topic, 0)

        async def use(admin: Any) -> int:
            await admin.delete_records({tp: RecordsToDelete(before)})
            consumer = self._consumer()
            await consumer.start()
            try:
                return (await consumer.beginning_offsets([tp]))[tp]
            finally:
                await consumer.stop()

        return self._admin_call(use)

    def delete_topic(self, topic):
        async def use(admin: Any) -> bool:
            await admin.delete_topics([topic])
            deadline = time.monotonic() + LISTING_WAIT  # as listed_after_deleting, with awaits
            while topic in await admin.list_topics():
                if time.monotonic() > deadline:
                    return True
                await asyncio.sleep(0.1)
            return False

        return self._admin_call(use)

    def list_describe_groups(self, topic, group):
        async def use(admin: Any) -> dict[str, Any]:
            member = self._consumer(group)
            await member.start()
            try:
                member.subscribe([topic])
                deadline = time.monotonic() + TIMEOUT
                while not member.assignment():
                    if time.monotonic() > deadline:
                        raise TimeoutError("timed out waiting for an assignment")
                    await member.getmany(timeout_ms=100)
                listed = [g[0] for g in await admin.list_consumer_groups()]
                (response,) = await admin.describe_consumer_groups([group])
                described = response.groups[0]
                members = described[5]
                return {
                    "listed": group in listed,
                    "state": described[2],
                    "members": len(members),
                    "partitions": sorted(p for m in members for p in consumer_assignment_partitions(m[-1])),
                }
            finally:
                await member.stop()

        return self._admin_call(use)
