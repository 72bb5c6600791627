"""ShareFetch and ShareAcknowledge on the wire: share-session epochs, the record-lock bound, acknowledgements."""

from __future__ import annotations

import datetime
import time
import uuid

from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode
from kio.schema.share_acknowledge.v1 import request as ack_schema
from kio.schema.share_fetch.v1 import request as schema

from kafkacompat.testing import Broker
from tests.wire import Wire, request_class

SHARE_FETCH, SHARE_ACKNOWLEDGE = 78, 79


def _fetch(wire: Wire, topic_id: uuid.UUID, epoch: int, acks: tuple = (), member: str = "m1",
           wait_ms: int = 100) -> object:
    partition = make(schema.FetchPartition, partition_index=0, acknowledgement_batches=acks)
    return wire.request(SHARE_FETCH, 1, make(
        request_class(SHARE_FETCH, 1), group_id="g", member_id=member, share_session_epoch=epoch,
        max_wait=datetime.timedelta(milliseconds=wait_ms), min_bytes=1, max_bytes=1 << 20, max_records=100,
        batch_size=100, topics=(make(schema.FetchTopic, topic_id=topic_id, partitions=(partition,)),),
        forgotten_topics_data=()))


def _acknowledge(wire: Wire, topic_id: uuid.UUID, epoch: int, first: int, last: int, kind: int) -> object:
    batch = make(ack_schema.AcknowledgementBatch, first_offset=first, last_offset=last, acknowledge_types=(kind,))
    partition = make(ack_schema.AcknowledgePartition, partition_index=0, acknowledgement_batches=(batch,))
    return wire.request(SHARE_ACKNOWLEDGE, 1, make(
        request_class(SHARE_ACKNOWLEDGE, 1), group_id="g", member_id="m1", share_session_epoch=epoch,
        topics=(make(ack_schema.AcknowledgeTopic, topic_id=topic_id, partitions=(partition,)),)))


def _acquired(response: object) -> list[tuple[int, int, int]]:
    return [(a.first_offset, a.last_offset, a.delivery_count)
            for t in response.responses for p in t.partitions for a in p.acquired_records]


def test_share_session_epochs_lock_bound_and_acknowledgements() -> None:
    with Broker(group_share_partition_max_record_locks=3) as broker:
        broker.create_topic("t")
        for i in range(6):
            broker.produce("t", f"v{i}".encode(), partition=0)
        broker.call(broker.server.cluster.store.set_settings({"group-config:g:share.auto.offset.reset": "earliest"}))
        topic_id = broker.server.cluster.topic_for("t")[0].topic_id
        with Wire(broker.bootstrap_servers) as wire:
            assert _fetch(wire, topic_id, 1).error_code == ErrorCode.share_session_not_found
            first = _fetch(wire, topic_id, 0)
            assert first.error_code == ErrorCode.none and _acquired(first) == [(0, 2, 1)]  # 3 locks at most
            assert _fetch(wire, topic_id, 5).error_code == ErrorCode.invalid_share_session_epoch
            assert _acknowledge(wire, topic_id, 0, 0, 0, 1).error_code == ErrorCode.invalid_share_session_epoch
            refused = _acknowledge(wire, topic_id, 1, 3, 3, 1)  # offset 3 is not held
            assert refused.responses[0].partitions[0].error_code == ErrorCode.invalid_record_state
            accepted = _acknowledge(wire, topic_id, 2, 0, 2, 1)
            assert accepted.error_code == ErrorCode.none and accepted.responses[0].partitions[0].error_code == 0
            assert _acquired(_fetch(wire, topic_id, 3)) == [(3, 5, 1)]
            second = _fetch(wire, topic_id, 0, member="m2")  # another member: everything is held by m1
            assert _acquired(second) == []
        # m1's connection closed: its share session ended and what it held is m2's now, counted once
        with Wire(broker.bootstrap_servers) as wire:
            assert _acquired(_fetch(wire, topic_id, 0, member="m2")) == [(3, 5, 1)]


def test_a_group_record_lock_below_kafkas_default_minimum_when_the_broker_allows_it() -> None:
    """group.share.min.record.lock.duration.ms lowered on the broker lets a group hold records 1 s only,
    set as users set it (the Admin API's group configs); below 1 s, the least Kafka's GroupConfig takes whatever
    the broker allows, is refused in Kafka's words (tests/parity/test_configs_parity.py compares them)."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    with Broker(group_share_min_record_lock_duration_ms=500) as broker:
        broker.create_topic("t")
        for i in range(3):
            broker.produce("t", f"v{i}".encode(), partition=0)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

        def set_group(name: str, value: str) -> str:
            change = ConfigResource(ResourceType.GROUP, "g", incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)])
            try:
                admin.incremental_alter_configs([change])[change].result(10)
                return "ok"
            except Exception as exc:  # noqa: BLE001 - the refusal is the answer looked at
                return exc.args[0].str()

        assert set_group("share.record.lock.duration.ms", "400") == (
            "Invalid value 400 for configuration share.record.lock.duration.ms: Value must be at least 1000")
        assert set_group("share.record.lock.duration.ms", "1000") == "ok"
        assert set_group("share.auto.offset.reset", "earliest") == "ok"
        topic_id = broker.server.cluster.topic_for("t")[0].topic_id
        with Wire(broker.bootstrap_servers) as holder, Wire(broker.bootstrap_servers) as other:
            assert _acquired(_fetch(holder, topic_id, 0)) == [(0, 2, 1)]
            start = time.monotonic()
            epoch, again = 0, []
            while not again and time.monotonic() - start < 10:  # the broker's own lock is 30 s
                again = _acquired(_fetch(other, topic_id, epoch, member="m2", wait_ms=200))
                epoch += 1
            assert again == [(0, 2, 2)] and 0.9 <= time.monotonic() - start < 10


def test_a_groups_share_session_timeout_and_heartbeat_interval_override_the_brokers() -> None:
    """share.session.timeout.ms / share.heartbeat.interval.ms set on the group (Admin API) within the broker's
    group.share.min/max.* bounds: members are told the group's interval, a silent one is fenced after the
    group's session timeout (the broker's is 45 s) and its partitions go to the one left."""
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    with Broker(group_share_min_session_timeout_ms=1000, group_share_min_heartbeat_interval_ms=100) as broker:
        broker.create_topic("t", partitions=2)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        change = ConfigResource(ResourceType.GROUP, "g", incremental_configs=[
            ConfigEntry("share.session.timeout.ms", "1500", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("share.heartbeat.interval.ms", "300", incremental_operation=AlterConfigOpType.SET)])
        admin.incremental_alter_configs([change])[change].result(10)
        with Wire(broker.bootstrap_servers) as alive, Wire(broker.bootstrap_servers) as silent:
            def beat(wire: Wire, member: str, epoch: int) -> object:
                answer = wire.request(76, 1, make(
                    request_class(76, 1), group_id="g", member_id=member, member_epoch=epoch, rack_id=None,
                    subscribed_topic_names=("t",) if epoch == 0 else None))
                assert answer.error_code == ErrorCode.none, answer.error_message
                return answer

            first = beat(alive, "m1", 0)
            assert first.heartbeat_interval == datetime.timedelta(milliseconds=300)
            beat(silent, "m2", 0)
            epoch, owned, start = first.member_epoch, [], time.monotonic()
            while owned != [0, 1] and time.monotonic() - start < 10:
                time.sleep(0.3)
                answer = beat(alive, "m1", epoch)
                epoch = answer.member_epoch
                if answer.assignment is not None:
                    owned = sorted(p for tp in answer.assignment.topic_partitions for p in tp.partitions)
            assert owned == [0, 1] and 1.0 <= time.monotonic() - start < 10
