"""librdkafka through confluent-kafka, in the test process."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from ..scenario_data import Received, headers, key, value
from . import ADMIN_RETENTION_MS, Driver
from .inprocess import TIMEOUT, header_pairs, listed_after_deleting, listed_within, settled, text, until


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
                msg.partition(), msg.offset(), text(msg.key()), text(msg.value()),
                header_pairs(msg.headers()), msg.timestamp()[1],
            ))

        until(lambda: len(out) >= n, step, f"{n} records")
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

            until(lambda: spread(members), poll_all(members), "three members holding a partition each", 60)
            before = owned(members)
            members[0].close()
            rest = members[1:]
            until(lambda: spread(rest), poll_all(rest), "two members holding all partitions", 60)
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
        listed = listed_within(lambda: admin.list_topics(timeout=TIMEOUT).topics, topic)
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
        return {"before": before, "after": settled(retention, ADMIN_RETENTION_MS.__eq__)}

    def create_partitions(self, topic, total):
        from confluent_kafka.admin import NewPartitions

        admin = self._admin()
        admin.create_partitions([NewPartitions(topic, total)])[topic].result(TIMEOUT)
        return settled(lambda: self._partitions(admin, topic), total.__eq__)

    def delete_records(self, topic, before):
        admin = self._admin()
        tp = self.ck.TopicPartition(topic, 0, before)
        admin.delete_records([tp])[tp].result(TIMEOUT)
        spec = {self.ck.TopicPartition(topic, 0): self.ck.admin.OffsetSpec.earliest()}
        return admin.list_offsets(spec)[self.ck.TopicPartition(topic, 0)].result(TIMEOUT).offset

    def delete_topic(self, topic):
        admin = self._admin()
        admin.delete_topics([topic])[topic].result(TIMEOUT)
        return listed_after_deleting(lambda: admin.list_topics(timeout=TIMEOUT).topics, topic)

    def list_describe_groups(self, topic, group):
        member = self._consumer(**{"group.id": group})
        try:
            member.subscribe([topic])
            until(lambda: bool(member.assignment()), lambda: member.poll(0.1), "an assignment")
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

    # group.protocol=consumer (KIP-848): GA from librdkafka 2.12; session and heartbeat
    # settings are the broker's there (librdkafka refuses them with this protocol)

    def consumer_protocol_missing(self):
        return None

    def _member(self, group: str, instance_id: str | None = None) -> "_Member":
        conf = {"group.id": group, "group.protocol": "consumer", "auto.offset.reset": "earliest"}
        if instance_id is not None:
            conf["group.instance.id"] = instance_id
        return _Member(self._consumer(**conf))

    def kip848_group_consume(self, topic, group, n):
        member = self._member(group).subscribed([topic])
        try:
            records = self._read(member.consumer, n)[:n]
            last = records[-1]
            member.consumer.commit(offsets=[self.ck.TopicPartition(topic, last.partition, last.offset + 1)],
                                   asynchronous=False)
            return records
        finally:
            member.consumer.close()

    def kip848_join_and_leave(self, topic, group, partitions):
        every = list(range(partitions))
        a = self._member(group).subscribed([topic])
        try:
            _poll_until([a], lambda: a.owned() == every, "the first member holding every partition")
            alone = a.owned()
            b = self._member(group).subscribed([topic])
            try:
                _poll_until([a, b], lambda: _shared([a, b], partitions), "the second member's share")
                joined = [a.owned(), b.owned()]
            finally:
                b.consumer.close()
            _poll_until([a], lambda: a.owned() == every, "the first member taking back the leaver's share")
            return {"alone": alone, "joined": joined, "a_revoked": list(a.revoked), "after_leave": a.owned()}
        finally:
            a.consumer.close()

    def kip848_regex(self, pattern, group, n):
        # librdkafka takes a topic name starting with "^" as a regular expression
        member = self._member(group).subscribed([pattern])
        try:
            return self._read(member.consumer, n)
        finally:
            member.consumer.close()

    def kip848_static_member(self, topic, group, partitions):
        members = [self._member(group, "a").subscribed([topic]), self._member(group, "b").subscribed([topic])]
        try:
            _poll_until(members, lambda: _shared(members, partitions), "a and b sharing the partitions")
            before = [m.owned() for m in members]
            settled = len(members[1].revoked)  # what b gave up while the two first shared out the partitions
            members[0].consumer.close()
            members[0] = self._member(group, "a").subscribed([topic])
            _poll_until(members, lambda: _shared(members, partitions), "a back with its share")
            return {"before": before, "after": [m.owned() for m in members], "b_revoked": members[1].revoked[settled:]}
        finally:
            for member in members:
                member.consumer.close()


class _Member:
    """A consumer and the partition sets its revocation callback was given, in order."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.revoked: list[list[int]] = []

    def subscribed(self, topics: list[str]) -> "_Member":
        def on_revoke(_: Any, parts: list[Any]) -> None:
            if parts:
                self.revoked.append(sorted(tp.partition for tp in parts))

        self.consumer.subscribe(topics, on_revoke=on_revoke)
        return self

    def owned(self) -> list[int]:
        return sorted(tp.partition for tp in self.consumer.assignment())


def _shared(members: list[_Member], partitions: int) -> bool:
    """Every member holds some partitions and together they hold each once."""
    held = [m.owned() for m in members]
    return all(held) and sorted(p for ps in held for p in ps) == list(range(partitions))


def _poll_until(members: list[_Member], done: Callable[[], bool], what: str) -> None:
    """Poll every member (dropping what they read) until done()."""
    until(done, lambda: [m.consumer.poll(0.05) for m in members], what, 60)
