"""kafka-python, in the test process."""

from __future__ import annotations

import threading
import time
from typing import Any

from ..scenario_data import Received, headers, key, value
from . import ADMIN_RETENTION_MS, Driver
from .inprocess import TIMEOUT, header_pairs, listed_after_deleting, listed_within, settled, text, until

# kafka-python 3.0.12 drops a group join that completes after poll()'s timeout and
# joins again (a fresh rebalance): long polls let join and sync finish inside one.
POLL_MS = 1000


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
            for records in consumer.poll(timeout_ms=POLL_MS).values():
                out.extend(
                    Received(r.partition, r.offset, text(r.key), text(r.value), header_pairs(r.headers), r.timestamp)
                    for r in records
                )

        until(lambda: len(out) >= n, step, f"{n} records")
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
                    consumer.poll(timeout_ms=POLL_MS)
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
            until(lambda: spread([0, 1, 2]), lambda: time.sleep(0.05), "three members holding a partition each", 60)
            before = [list(p) for p in owned]
            stops[0].set()
            threads[0].join(TIMEOUT)
            until(lambda: spread([1, 2]), lambda: time.sleep(0.05), "two members holding all partitions", 60)
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
            listed = listed_within(admin.list_topics, topic)
            return {"partitions": self._partitions(admin, topic), "listed": listed}
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
            return {"before": before, "after": settled(retention, ADMIN_RETENTION_MS.__eq__)}
        finally:
            admin.close()

    def create_partitions(self, topic, total):
        admin = self._admin()
        try:
            admin.create_partitions({topic: total})
            return settled(lambda: self._partitions(admin, topic), total.__eq__)
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
            return listed_after_deleting(admin.list_topics, topic)
        finally:
            admin.close()

    def list_describe_groups(self, topic, group):
        member = self._consumer(group)
        admin = self._admin()
        try:
            member.subscribe([topic])
            until(lambda: bool(member.assignment()), lambda: member.poll(timeout_ms=POLL_MS), "an assignment")
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
