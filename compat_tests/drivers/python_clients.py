"""Drivers for the Python client families, run in the test process.

librdkafka through confluent-kafka, kafka-python, and aiokafka (each call
runs its own event loop). Loops poll with deadlines; nothing waits blindly.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..scenario_data import Received, headers, key, value
from . import ADMIN_RETENTION_MS, Driver

TIMEOUT = 30.0  # seconds any one step may take


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode()


def _headers(raw: Any) -> tuple[tuple[str, str], ...]:
    return tuple((k, _text(v) or "") for k, v in (raw or ()))


def _until(done: Callable[[], bool], step: Callable[[], None], what: str, timeout: float = TIMEOUT) -> None:
    """Call step() until done() or raise TimeoutError naming what never happened."""
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        step()


# ---------------------------------------------------------------- librdkafka


class ConfluentDriver(Driver):
    name = "librdkafka"

    def __init__(self, bootstrap: str) -> None:
        import confluent_kafka

        self.ck = confluent_kafka
        self.bootstrap = bootstrap
        self.version = f"confluent-kafka {confluent_kafka.__version__}, librdkafka {confluent_kafka.libversion()[0]}"

    def _producer(self, **conf: Any) -> Any:
        return self.ck.Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, **conf})

    def _send(self, producer: Any, topic: str, n: int, prefix: str, partition: int) -> list[int]:
        offsets: dict[int, int] = {}

        def delivered(i: int) -> Callable[[Any, Any], None]:
            def report(err: Any, msg: Any) -> None:
                if err is not None:
                    raise RuntimeError(f"delivery of record {i} failed: {err}")
                offsets[i] = msg.offset()
            return report

        for i in range(n):
            producer.produce(
                topic, key=key(prefix, i), value=value(prefix, i), headers=list(headers(i)),
                partition=partition, on_delivery=delivered(i),
            )
        remaining = producer.flush(TIMEOUT)
        assert remaining == 0, f"{remaining} records not delivered"
        return [offsets[i] for i in range(n)]

    def produce(self, topic, n, *, prefix="", compression=None, acks="all", idempotent=False, partition=0):
        producer = self._producer(**{
            "compression.type": compression or "none", "acks": acks,
            "enable.idempotence": idempotent,
        })
        return self._send(producer, topic, n, prefix, partition)

    def _consumer(self, **conf: Any) -> Any:
        return self.ck.Consumer({
            "bootstrap.servers": self.bootstrap, "enable.auto.commit": False,
            "group.id": conf.pop("group.id", f"unused-{uuid.uuid4().hex[:8]}"), **conf,
        })

    def _read(self, consumer: Any, n: int, between: Callable[[], None] | None = None) -> list[Received]:
        out: list[Received] = []

        def step() -> None:
            msg = consumer.poll(0.2)
            if msg is None:
                if between is not None:
                    between()
                return
            if msg.error():
                raise RuntimeError(str(msg.error()))
            out.append(Received(
                msg.partition(), msg.offset(), _text(msg.key()), _text(msg.value()),
                _headers(msg.headers()), msg.timestamp()[1],
            ))

        _until(lambda: len(out) >= n, step, f"{n} records")
        return out

    def consume(self, topic, n, *, start="earliest", produce_after=0, partition=0):
        tp = self.ck.TopicPartition
        consumer = self._consumer()
        try:
            if start == "earliest":
                consumer.assign([tp(topic, partition, self.ck.OFFSET_BEGINNING)])
            elif start == "latest":
                consumer.assign([tp(topic, partition, self.ck.OFFSET_END)])
            else:
                found = consumer.offsets_for_times([tp(topic, partition, start)], timeout=TIMEOUT)
                consumer.assign(found)
            if not produce_after:
                return self._read(consumer, n)
            # librdkafka resolves "latest" lazily and has no call that waits for it
            producer, sent = self._producer(), [0]

            def trickle() -> None:
                i = sent[0]
                producer.produce(topic, key=key("new-", i), value=value("new-", i),
                                 headers=list(headers(i)), partition=partition)
                producer.flush(TIMEOUT)
                sent[0] += 1

            return self._read(consumer, n, between=trickle)
        finally:
            consumer.close()

    def group_consume(self, topic, group, n):
        consumer = self._consumer(**{"group.id": group, "auto.offset.reset": "earliest"})
        try:
            consumer.subscribe([topic])
            records = self._read(consumer, n)[:n]
            last = records[-1]
            consumer.commit(offsets=[self.ck.TopicPartition(topic, last.partition, last.offset + 1)],
                            asynchronous=False)
            return records
        finally:
            consumer.close()

    def group_of_three(self, topic, group):
        members = [self._consumer(**{"group.id": group}) for _ in range(3)]
        try:
            for member in members:
                member.subscribe([topic])

            def owned(group_members: list[Any]) -> list[list[int]]:
                return [sorted(tp.partition for tp in m.assignment()) for m in group_members]

            def spread(group_members: list[Any]) -> bool:
                parts = owned(group_members)
                return all(parts) and sorted(p for ps in parts for p in ps) == [0, 1, 2]

            def poll_all(group_members: list[Any]) -> Callable[[], None]:
                return lambda: [m.poll(0.05) for m in group_members]

            _until(lambda: spread(members), poll_all(members), "three members holding a partition each", 60)
            before = owned(members)
            members[0].close()
            rest = members[1:]
            _until(lambda: spread(rest), poll_all(rest), "two members holding all partitions", 60)
            return {"before": before, "after": owned(rest)}
        finally:
            for member in members[1:]:
                member.close()

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def _partitions(self, admin: Any, topic: str) -> int:
        described = admin.describe_topics(self.ck.TopicCollection([topic]))[topic].result(TIMEOUT)
        return len(described.partitions)

    def create_describe_topic(self, topic, partitions):
        from confluent_kafka.admin import NewTopic

        admin = self._admin()
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(TIMEOUT)
        listed = topic in admin.list_topics(timeout=TIMEOUT).topics
        return {"partitions": self._partitions(admin, topic), "listed": listed}

    def alter_configs(self, topic):
        from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource

        admin = self._admin()

        def retention() -> str:
            resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
            return admin.describe_configs([resource])[resource].result(TIMEOUT)["retention.ms"].value

        before = retention()
        change = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[
            ConfigEntry("retention.ms", ADMIN_RETENTION_MS, incremental_operation=AlterConfigOpType.SET),
        ])
        admin.incremental_alter_configs([change])[change].result(TIMEOUT)
        return {"before": before, "after": retention()}

    def create_partitions(self, topic, total):
        from confluent_kafka.admin import NewPartitions

        admin = self._admin()
        admin.create_partitions([NewPartitions(topic, total)])[topic].result(TIMEOUT)
        return self._partitions(admin, topic)

    def delete_records(self, topic, before):
        admin = self._admin()
        tp = self.ck.TopicPartition(topic, 0, before)
        admin.delete_records([tp])[tp].result(TIMEOUT)
        spec = {self.ck.TopicPartition(topic, 0): self.ck.admin.OffsetSpec.earliest()}
        return admin.list_offsets(spec)[self.ck.TopicPartition(topic, 0)].result(TIMEOUT).offset

    def delete_topic(self, topic):
        admin = self._admin()
        admin.delete_topics([topic])[topic].result(TIMEOUT)
        return topic in admin.list_topics(timeout=TIMEOUT).topics

    def list_describe_groups(self, topic, group):
        member = self._consumer(**{"group.id": group})
        try:
            member.subscribe([topic])
            _until(lambda: bool(member.assignment()), lambda: member.poll(0.1), "an assignment")
            admin = self._admin()
            listed = admin.list_consumer_groups().result(TIMEOUT).valid
            described = admin.describe_consumer_groups([group])[group].result(TIMEOUT)
            return {
                "listed": group in [g.group_id for g in listed],
                "state": described.state.name,
                "members": len(described.members),
                "partitions": sorted(
                    tp.partition for m in described.members for tp in m.assignment.topic_partitions
                ),
            }
        finally:
            member.close()


# ---------------------------------------------------------------- kafka-python


class KafkaPythonDriver(Driver):
    name = "kafka_python"

    def __init__(self, bootstrap: str) -> None:
        import kafka

        self.kafka = kafka
        self.bootstrap = bootstrap
        self.version = f"kafka-python {kafka.__version__}"

    def _producer(self, **conf: Any) -> Any:
        return self.kafka.KafkaProducer(bootstrap_servers=self.bootstrap, linger_ms=5, **conf)

    def _send(self, producer: Any, topic: str, n: int, prefix: str, partition: int) -> list[int]:
        futures = [
            producer.send(
                topic, key=key(prefix, i).encode(), value=value(prefix, i).encode(),
                headers=[(k, v.encode()) for k, v in headers(i)], partition=partition,
            )
            for i in range(n)
        ]
        producer.flush(TIMEOUT)
        return [f.get(TIMEOUT).offset for f in futures]

    def produce(self, topic, n, *, prefix="", compression=None, acks="all", idempotent=False, partition=0):
        producer = self._producer(
            acks=acks if acks == "all" else int(acks), compression_type=compression,
            enable_idempotence=idempotent,
        )
        try:
            return self._send(producer, topic, n, prefix, partition)
        finally:
            producer.close(TIMEOUT)

    def _consumer(self, group: str | None = None) -> Any:
        return self.kafka.KafkaConsumer(
            bootstrap_servers=self.bootstrap, group_id=group, enable_auto_commit=False,
            auto_offset_reset="earliest",
        )

    @staticmethod
    def _read(consumer: Any, n: int) -> list[Received]:
        out: list[Received] = []

        def step() -> None:
            for records in consumer.poll(timeout_ms=200).values():
                out.extend(
                    Received(r.partition, r.offset, _text(r.key), _text(r.value), _headers(r.headers), r.timestamp)
                    for r in records
                )

        _until(lambda: len(out) >= n, step, f"{n} records")
        return out

    def consume(self, topic, n, *, start="earliest", produce_after=0, partition=0):
        tp = self.kafka.TopicPartition(topic, partition)
        consumer = self._consumer()
        try:
            consumer.assign([tp])
            if start == "earliest":
                consumer.seek_to_beginning(tp)
            elif start == "latest":
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, consumer.offsets_for_times({tp: start})[tp].offset)
            if produce_after:
                consumer.position(tp)  # resolves "latest" now
                producer = self._producer()
                self._send(producer, topic, produce_after, "new-", partition)
                producer.close(TIMEOUT)
            return self._read(consumer, n)
        finally:
            consumer.close()

    def group_consume(self, topic, group, n):
        consumer = self._consumer(group)
        try:
            consumer.subscribe([topic])
            records = self._read(consumer, n)[:n]
            last = records[-1]
            consumer.commit({
                self.kafka.TopicPartition(topic, last.partition): self.kafka.OffsetAndMetadata(last.offset + 1, "", -1)
            })
            return records
        finally:
            consumer.close()

    def group_of_three(self, topic, group):
        """Each member polls on a thread of its own, as kafka-python expects.

        Polling members in turn from one thread loops forever in kafka-python
        3.0.12: a JoinGroup/SyncGroup that completes after poll()'s timeout
        is discarded and the member rejoins, restarting the rebalance.
        """
        owned: list[list[int]] = [[], [], []]
        stops = [threading.Event() for _ in range(3)]
        failures: list[BaseException] = []

        def member(index: int) -> None:
            consumer = self._consumer(group)
            try:
                consumer.subscribe([topic])
                while not stops[index].is_set():
                    consumer.poll(timeout_ms=200)
                    owned[index] = sorted(tp.partition for tp in consumer.assignment())
            except BaseException as exc:  # noqa: BLE001 - reported by the test thread
                failures.append(exc)
            finally:
                consumer.close()

        threads = [threading.Thread(target=member, args=(i,), daemon=True) for i in range(3)]
        for thread in threads:
            thread.start()

        def spread(indexes: list[int]) -> bool:
            if failures:
                raise failures[0]
            parts = [owned[i] for i in indexes]
            return all(parts) and sorted(p for ps in parts for p in ps) == [0, 1, 2]

        try:
            _until(lambda: spread([0, 1, 2]), lambda: time.sleep(0.05), "three members holding a partition each", 60)
            before = [list(p) for p in owned]
            stops[0].set()
            threads[0].join(TIMEOUT)
            _until(lambda: spread([1, 2]), lambda: time.sleep(0.05), "two members holding all partitions", 60)
            return {"before": before, "after": [owned[1], owned[2]]}
        finally:
            for stop in stops:
                stop.set()
            for thread in threads:
                thread.join(TIMEOUT)

    def _admin(self) -> Any:
        return self.kafka.KafkaAdminClient(bootstrap_servers=self.bootstrap, request_timeout_ms=int(TIMEOUT * 1000))

    @staticmethod
    def _partitions(admin: Any, topic: str) -> int:
        (described,) = admin.describe_topics([topic])
        return len(described["partitions"])

    def create_describe_topic(self, topic, partitions):
        from kafka.admin import NewTopic

        admin = self._admin()
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
            return {"partitions": self._partitions(admin, topic), "listed": topic in admin.list_topics()}
        finally:
            admin.close()

    def alter_configs(self, topic):
        from kafka.admin import ConfigResource, ConfigResourceType

        admin = self._admin()

        def retention() -> str:
            found = admin.describe_configs(
                [ConfigResource(ConfigResourceType.TOPIC, topic, configs={"retention.ms": None})],
                config_filter="all",
            )
            return found["topic"][topic]["retention.ms"]["value"]

        try:
            before = retention()
            admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, topic, configs={
                "retention.ms": ADMIN_RETENTION_MS,
            })])
            return {"before": before, "after": retention()}
        finally:
            admin.close()

    def create_partitions(self, topic, total):
        admin = self._admin()
        try:
            admin.create_partitions({topic: total})
            return self._partitions(admin, topic)
        finally:
            admin.close()

    def delete_records(self, topic, before):
        from kafka.admin import OffsetSpec

        admin = self._admin()
        tp = self.kafka.TopicPartition(topic, 0)
        try:
            admin.delete_records({tp: before})
            return admin.list_partition_offsets({tp: OffsetSpec.EARLIEST})[tp].offset
        finally:
            admin.close()

    def delete_topic(self, topic):
        admin = self._admin()
        try:
            admin.delete_topics([topic])
            return topic in admin.list_topics()
        finally:
            admin.close()

    def list_describe_groups(self, topic, group):
        member = self._consumer(group)
        admin = self._admin()
        try:
            member.subscribe([topic])
            _until(lambda: bool(member.assignment()), lambda: member.poll(timeout_ms=100), "an assignment")
            listed = admin.list_groups()
            described = admin.describe_groups([group])[group]
            return {
                "listed": group in [g["group_id"] for g in listed],
                "state": described["group_state"],
                "members": len(described["members"]),
                "partitions": sorted(
                    p for m in described["members"]
                    for t in m["member_assignment"]["assigned_partitions"] for p in t["partitions"]
                ),
            }
        finally:
            member.close()
            admin.close()


# ---------------------------------------------------------------- aiokafka


def consumer_assignment_partitions(data: bytes) -> list[int]:
    """Partitions in a consumer-protocol assignment (version, [topic, [partition]], user data)."""
    import struct

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
    """aiokafka, each question on an event loop of its own (asyncio.run)."""

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
                    Received(r.partition, r.offset, _text(r.key), _text(r.value), _headers(r.headers), r.timestamp)
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
            return {"before": before, "after": await retention(admin)}

        return self._admin_call(use)

    def create_partitions(self, topic, total):
        from aiokafka.admin import NewPartitions

        async def use(admin: Any) -> int:
            await admin.create_partitions({topic: NewPartitions(total)})
            return await self._partitions(admin, topic)

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
            return topic in await admin.list_topics()

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
