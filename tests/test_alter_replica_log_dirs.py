"""AlterReplicaLogDirs (API 34): a partition moves to another volume while it is produced and consumed.

kafka-python's admin client moves it as users do; DescribeLogDirs then
shows it under the new dir (and as the "future" replica while a move
cannot finish); errors come back with Kafka's codes.
"""

from __future__ import annotations

import os
import time

import kio.schema.alter_replica_log_dirs.v2.request as arld
import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka import KafkaAdminClient, TopicPartitionReplica
from kafka.errors import NoError
from kafkacompat.protocol.messages import make
from kafkacompat.protocol.records import record_timestamps
from kafkacompat.storage.disk import layout
from kio.schema.errors import ErrorCode

from kafkacompat import storage
from kafkacompat.testing import Broker
from tests.conftest import create_topic
from tests.wire import Wire

SMALL_PARTITIONLETS = {"segment.bytes": "4096"}


def alter(bootstrap: str, moves: dict[str, dict[str, list[int]]]) -> dict[tuple[str, int], ErrorCode]:
    """Send AlterReplicaLogDirs v2: dir -> topic -> partitions; (topic, partition) -> error."""
    with Wire(bootstrap) as wire:
        answer = wire.request(34, 2, make(arld.AlterReplicaLogDirsRequest, dirs=tuple(
            make(arld.AlterReplicaLogDir, path=path, topics=tuple(
                make(arld.AlterReplicaLogDirTopic, name=topic, partitions=tuple(parts))
                for topic, parts in topics.items()))
            for path, topics in moves.items())))
    return {(t.topic_name, p.partition_index): p.error_code for t in answer.results for p in t.partitions}


def where(admin: KafkaAdminClient, topic: str) -> dict[int, list[tuple[str, bool, int]]]:
    """partition -> [(log dir, is future, offset lag)] as kafka-python's describe_log_dirs reports them."""
    out: dict[int, list[tuple[str, bool, int]]] = {}
    [broker] = admin.describe_log_dirs({topic: [0, 1]})
    for log_dir in broker["log_dirs"]:
        for t in log_dir["topics"]:
            for p in t["partitions"]:
                out.setdefault(p["partition_index"], []).append(
                    (log_dir["log_dir"], p["is_future_key"], p["offset_lag"]))
    return out


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, count: int) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}", "auto.offset.reset": "earliest",
                         "enable.partition.eof": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    return got


def capped_store(first: str, second: str, first_cap: int, second_cap: int) -> storage.Store:
    """Two volumes whose caps decide where new partitionlets go (the emptiest), whatever else shares the disk."""
    return storage.open_store(first, volumes=[second], volume_limits={first: first_cap, second: second_cap},
                              record_timestamps=record_timestamps)


def test_kafka_python_moves_a_partition_while_it_is_produced_and_consumed(tmp_path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    with Broker(store=capped_store(first, second, 50 << 20, 40 << 20)) as broker:
        topic = create_topic(broker.bootstrap_servers, "moving", 2, SMALL_PARTITIONLETS)
        values = [b"%05d" % i + b"x" * 500 for i in range(300)]
        produce(broker.bootstrap_servers, topic, values[:200])
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            assert [d for d, _f, _l in where(admin, topic)[0]] == [first]
            answer = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): second})
            assert answer == {TopicPartitionReplica(topic, 0, 1): NoError}
            produce(broker.bootstrap_servers, topic, values[200:])
            assert consume(broker.bootstrap_servers, topic, 300) == values
            deadline = time.monotonic() + 30
            while where(admin, topic)[0] != [(second, False, 0)]:
                assert time.monotonic() < deadline, where(admin, topic)
                time.sleep(0.05)
            assert where(admin, topic)[1] == [(first, False, 0)]  # the other partition stays
        finally:
            admin.close()
        assert consume(broker.bootstrap_servers, topic, 300) == values
        # only the chain manifest stays on the first volume, with the store's other metadata
        assert os.listdir(layout.partition_dir(first, "/default", topic, 0)) == [layout.MANIFEST_FILE]


def test_a_move_that_cannot_finish_shows_the_future_replica(tmp_path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    # every record is bigger than the room the second volume has: nothing sealed can move there
    with Broker(store=capped_store(first, second, 50 << 20, 900)) as broker:
        topic = create_topic(broker.bootstrap_servers, "stuck", 2, SMALL_PARTITIONLETS)
        produce(broker.bootstrap_servers, topic, [b"x" * 1000 for _ in range(40)])
        assert alter(broker.bootstrap_servers, {second: {topic: [0]}}) == {(topic, 0): ErrorCode.none}
        produce(broker.bootstrap_servers, topic, [b"y" * 100])  # the first record at home
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
        try:
            (current, current_future, _), (future, is_future, lag) = where(admin, topic)[0]
        finally:
            admin.close()
        assert (current, current_future, future, is_future, lag) == (first, False, second, True, 40)


def test_errors_as_kafka_answers_them(tmp_path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    with Broker(data_dir=first, volumes=[second]) as broker:
        topic = create_topic(broker.bootstrap_servers, "errs", 3)
        # partition 2's chain manifest cannot be read: the partition is offline
        os.makedirs(os.path.join(layout.partition_dir(first, "/default", topic, 2), layout.MANIFEST_FILE))
        answer = alter(broker.bootstrap_servers, {
            "/no/such/dir": {topic: [0], "missing-topic": [0]},
            second: {topic: [1, 2, 7], "missing-topic": [1]},
            first: {topic: [0]},
        })
    assert answer == {
        (topic, 0): ErrorCode.none,
        ("missing-topic", 0): ErrorCode.log_dir_not_found,  # the dir is checked first, as Kafka does
        (topic, 1): ErrorCode.none,
        (topic, 2): ErrorCode.kafka_storage_error,
        (topic, 7): ErrorCode.unknown_topic_or_partition,
        ("missing-topic", 1): ErrorCode.unknown_topic_or_partition,
    }


def test_a_single_dir_store_has_one_log_dir_where_everything_already_is() -> None:
    """Memory, or with KAFKACOMPAT_TEST_STORE=cloud the cloud engine (its one dir is the object store)."""
    with Broker() as broker:
        topic = create_topic(broker.bootstrap_servers, "mem")
        [only] = broker.server.store.data_dirs()
        assert alter(broker.bootstrap_servers, {only: {topic: [0]}, "/elsewhere": {topic: [1]}}) == {
            (topic, 0): ErrorCode.none, (topic, 1): ErrorCode.log_dir_not_found}


def test_without_alter_on_the_cluster_every_partition_is_refused(tmp_path) -> None:
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    with Broker(data_dir=first, volumes=[second], sasl={"admin": "a-secret", "alice": "b-secret"}, authorizer=True,
                super_users=["User:admin"]) as broker:
        config = broker.client_config("admin")
        topic = create_topic_as(config, "guarded")
        alice = broker.client_config("alice")
        admin = KafkaAdminClient(bootstrap_servers=alice["bootstrap.servers"], security_protocol="SASL_PLAINTEXT",
                                 sasl_mechanism=alice["sasl.mechanism"], sasl_plain_username="alice",
                                 sasl_plain_password="b-secret")
        try:
            answer = admin.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 1): second,
                                                   TopicPartitionReplica(topic, 1, 1): first})
        finally:
            admin.close()
    assert {error.__name__ for error in answer.values()} == {"ClusterAuthorizationFailedError"} and len(answer) == 2


def create_topic_as(config: dict[str, str], name: str) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient(config)  # kept referenced until the topic exists
    admin.create_topics([NewTopic(name, 2, 1)], operation_timeout=10)[name].result(timeout=15)
    return name


def test_the_move_throttle_is_a_dynamic_broker_config(tmp_path) -> None:
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    name = "replica.alter.log.dirs.io.max.bytes.per.second"
    with Broker(data_dir=str(tmp_path / "a")) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})

        def change(op: AlterConfigOpType, value: str | None) -> None:
            resource = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
                ConfigEntry(name, value, incremental_operation=op)])
            admin.incremental_alter_configs([resource])[resource].result(timeout=10)

        assert broker.server.store.move_bytes_per_second is None
        change(AlterConfigOpType.SET, "1000")
        assert broker.server.store.move_bytes_per_second == 1000
        described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
        [entries] = [future.result(timeout=10) for future in described.values()]
        assert entries[name].value == "1000"
        change(AlterConfigOpType.SET, "0")  # Kafka accepts 0 (the move holds); below 0 it refuses
        assert broker.server.store.move_bytes_per_second == 0
        with pytest.raises(KafkaException, match="INVALID_CONFIG"):
            change(AlterConfigOpType.SET, "-1")
        change(AlterConfigOpType.DELETE, None)
        assert broker.server.store.move_bytes_per_second is None
