"""Three `kafkacompat serve` processes on one PostgreSQL + S3 store are one Kafka cluster.

Stock clients bootstrap from any broker and are routed by Metadata; a
kill -9 of a partition leader under idempotent acks=all load loses and
duplicates nothing (the group coordinator's move: test_group_failover.py).
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
import uuid
from collections.abc import Iterator

import kio.schema.metadata.v12.request as metadata_v12
import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafkacompat.protocol.messages import make

from kafkacompat.testing.cluster import BrokerCluster, cloud_cluster_args
from kafkacompat.testing.services import ServiceUnavailable, object_store_outage
from tests.test_produce_pipelining import batch, produce_request
from tests.test_write_txn_markers import write_markers
from tests.wire import Wire, request_class

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

LEASE_MS, HEARTBEAT_MS = 2000, 200
NOT_LEADER_OR_FOLLOWER = 6
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture
def cluster() -> Iterator[BrokerCluster]:
    try:
        args = cloud_cluster_args(LEASE_MS, HEARTBEAT_MS)  # a fresh database and key prefix; AWS_* in os.environ
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(3, args) as running:
        yield running


def create_topic(bootstrap: str, partitions: int) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)[name].result(timeout=20)
    return name


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    """partition -> leader id as one broker's Metadata reports them (-1: none now)."""
    found = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {p.id: p.leader for p in found.topics[topic].partitions.values()}


def known_to(bootstrap: str, topic: str) -> bool:
    """That broker's own Metadata has the topic: it has taken it in from the store, a moment after the
    broker that created it named its leaders (until then a client retries UNKNOWN_TOPIC_OR_PARTITION)."""
    request = make(metadata_v12.MetadataRequest, topics=(make(metadata_v12.MetadataRequestTopic, topic_id=None,
                                                              name=topic),),
                   allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    with Wire(bootstrap) as wire:
        [found] = wire.request(3, 12, request).topics
    return found.error_code.value == 0 and bool(found.partitions)


def wait_until(what: str, check, timeout: float) -> float:
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if check():
            return time.monotonic() - start
        time.sleep(0.02)
    raise AssertionError(f"{what}: not within {timeout} s")


def read_all(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record, with confluent-kafka by assignment."""
    return [(m.partition(), m.offset(), m.value()) for m in read_messages(bootstrap, topic, partitions, expected,
                                                                          timeout)]


def read_messages(bootstrap: str, topic: str, partitions: int, expected: int, timeout: float = 60) -> list[Message]:
    """Every record as confluent-kafka hands it out, reading by assignment from offset 0: at least
    `expected`, and on to each partition's end as its leader gives it (ListOffsets) once the reading
    seems done. Stopping at `expected` missed the last records of partitions read behind the others
    whenever more were stored than expected (an acks=1 producer's duplicates), and a partition's end
    signalled early (a fetch answered just before a leader change) cut a tail off: the kill loop
    counted those acknowledged records as lost. Raises if the ends are not reached in `timeout`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: list[Message] = []
    at_end: set[int] = set()
    read_to = dict.fromkeys(range(partitions), 0)  # partition -> the offset after the last record read
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=0.5):
                error = msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition())
                    continue
                assert error is None, error
                at_end.discard(msg.partition())
                read_to[msg.partition()] = msg.offset() + 1
                out.append(msg)
            if len(out) >= expected and len(at_end) == partitions and _read_to_the_ends(consumer, topic, read_to):
                return out
    finally:
        consumer.close()
    raise AssertionError(f"read {len(out)} records of {topic} (expected at least {expected}), up to offsets "
                         f"{read_to}, partitions at their end {sorted(at_end)}: not to every end in {timeout} s")


def _read_to_the_ends(consumer: Consumer, topic: str, read_to: dict[int, int]) -> bool:
    """Whether the consumer is at each partition's high watermark as its leader gives it now (not when it
    cannot be asked: read on). The position passes transaction markers, which no record is read from; a
    partition nothing was read from has none (-1001) and counts from the last record read, or 0."""
    positions = consumer.position([TopicPartition(topic, p) for p in read_to])
    for tp in positions:
        try:
            end = consumer.get_watermark_offsets(TopicPartition(topic, tp.partition), timeout=5, cached=False)[1]
        except KafkaException:
            return False
        if max(tp.offset, read_to[tp.partition]) < end:
            return False
    return True


async def aiokafka_read(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer

    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                                enable_auto_commit=False, group_id=None)
    await consumer.start()
    values: list[bytes] = []
    try:
        async with asyncio.timeout(60):
            while len(values) < expected:
                batches = await consumer.getmany(timeout_ms=500)
                values += [record.value for records in batches.values() for record in records]
    finally:
        await consumer.stop()
    return values


def list_offsets_body(topic: str, partition: int) -> object:
    """A ListOffsets v7 request for the partition's latest offset."""
    cls = request_class(2, 7)
    topic_cls = cls.__dataclass_fields__["topics"].type.__args__[0]
    partition_cls = topic_cls.__dataclass_fields__["partitions"].type.__args__[0]
    return make(cls, replica_id=-1, isolation_level=0, topics=(make(topic_cls, name=topic, partitions=(
        make(partition_cls, partition_index=partition, current_leader_epoch=-1, timestamp=-1),)),))


def list_offsets_error(bootstrap: str, topic: str, partition: int) -> int:
    """The error ListOffsets (v7, latest) gets from this one broker for the partition."""
    with Wire(bootstrap) as wire:
        answer = wire.request(2, 7, list_offsets_body(topic, partition))
    return answer.topics[0].partitions[0].error_code.value


def test_clients_are_routed_to_partition_leaders_spread_over_three_brokers(cluster: BrokerCluster) -> None:
    topic = create_topic(cluster.brokers[0].bootstrap, 6)
    by_broker = [leaders(b.bootstrap, topic) for b in cluster.brokers]
    assert by_broker[0] == by_broker[1] == by_broker[2], "every broker reports the same leaders"
    assert set(by_broker[0].values()) == {1, 2, 3}, by_broker[0]
    for partition, leader in by_broker[0].items():  # only the leader serves a partition
        for node_id, broker in enumerate(cluster.brokers, 1):
            error = list_offsets_error(broker.bootstrap, topic, partition)
            assert error == (0 if node_id == leader else NOT_LEADER_OR_FOLLOWER), (partition, node_id)
            # kafka-transactions.sh abort's WriteTxnMarkers too: written by the leader, fenced by its epoch
            with Wire(broker.bootstrap) as wire:
                [(_, [(_, [(_, error)])])] = write_markers(wire, (4242, 0, False, 0, {topic: (partition,)}))
            assert error == (0 if node_id == leader else NOT_LEADER_OR_FOLLOWER), (partition, node_id)

    producer = Producer({"bootstrap.servers": cluster.brokers[2].bootstrap, "enable.idempotence": True,
                         "acks": "all", "linger.ms": 5})
    for i in range(600):
        producer.produce(topic, key=str(i).encode(), value=str(i).encode())
    assert producer.flush(30) == 0
    expected = sorted(str(i).encode() for i in range(600))
    got = asyncio.run(aiokafka_read(cluster.brokers[1].bootstrap, topic, 600))
    assert sorted(got) == expected
    assert sorted(v for _, _, v in read_all(cluster.brokers[0].bootstrap, topic, 6, 600)) == expected


def test_requests_in_flight_to_a_broker_that_handed_its_partition_back_are_refused_at_once(
        cluster: BrokerCluster) -> None:
    """A broker that took a partition while its leader was away and handed it back when that
    leader returned refuses the partition's requests at once, naming the leader. Each waited for a
    heartbeat tick of its own (at least 50 ms), and a connection answers in order: a producer
    without idempotence, with hundreds of requests in flight there, had its other partitions'
    acknowledgements from that broker held back for up to 20 s (the kill loop's failover)."""
    topic = create_topic(cluster.brokers[0].bootstrap, 6)
    # a partition broker 2 or 3 leads (one broker's lease can lapse for a moment on a loaded host, and
    # the topic's partitions then go round the other two: CI once found none led by broker 2)
    partition, leader = next((p, leader) for p, leader in leaders(cluster.brokers[0].bootstrap, topic).items()
                             if leader in (2, 3))
    cluster.broker(leader).stop()  # its partitions move to the others
    named: list[int] = []  # the leaders broker 1 named, last one last (-1 for none, as in a move)

    def taken() -> bool:
        named.append(leaders(cluster.brokers[0].bootstrap, topic)[partition])
        return named[-1] in {1, 2, 3} - {leader}

    wait_until("the partition moves", taken, 30)
    taker = cluster.broker(named[-1])
    cluster.broker(leader).start()  # and come back to it
    wait_until("the partition comes back", lambda: leaders(taker.bootstrap, topic)[partition] == leader, 30)
    body = list_offsets_body(topic, partition)
    with Wire(taker.bootstrap) as wire:
        started = time.monotonic()
        wire.send_raw(b"".join(wire.frame(2, 7, body) for _ in range(60)))
        errors = [wire.receive(2, 7)[1].topics[0].partitions[0].error_code.value for _ in range(60)]
        took = time.monotonic() - started
    assert errors == [NOT_LEADER_OR_FOLLOWER] * 60
    assert took < 1.5, f"60 refusals took {took:.2f} s"


def test_a_clean_stop_moves_only_the_stopped_brokers_partitions(cluster: BrokerCluster) -> None:
    """As on Kafka: the stopped broker's partitions go to the others and come back when it returns; the
    live brokers keep theirs. (Its registration was deleted: the spread over two brokers moved partitions
    between the live ones too, and their clients were refused and resent at every restart.)"""
    topic = create_topic(cluster.brokers[0].bootstrap, 12)
    before = leaders(cluster.brokers[0].bootstrap, topic)
    assert set(before.values()) == {1, 2, 3}, before
    cluster.brokers[2].stop()
    wait_until("broker 3's partitions moved", lambda: 3 not in leaders(cluster.brokers[0].bootstrap, topic).values()
               and -1 not in leaders(cluster.brokers[0].bootstrap, topic).values(), timeout=20)
    after = leaders(cluster.brokers[0].bootstrap, topic)
    assert {p: after[p] for p, leader in before.items() if leader != 3} == {
        p: leader for p, leader in before.items() if leader != 3}
    assert {after[p] for p, leader in before.items() if leader == 3} <= {1, 2}
    cluster.brokers[2].start()
    wait_until("the restarted broker leads its partitions again",
               lambda: leaders(cluster.brokers[0].bootstrap, topic) == before, timeout=30)


def unread_bytes(server_port: int, client_port: int) -> int:
    """Bytes of a loopback connection not yet read by the server's process: those in flight from the
    client (its send queue) and those in the server's receive queue (/proc/net/tcp, Linux)."""
    queued = 0
    with open("/proc/net/tcp", encoding="ascii") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            local, remote = (int(end.split(":")[1], 16) for end in fields[1:3])
            send, receive = (int(q, 16) for q in fields[4].split(":"))
            if (local, remote) == (client_port, server_port):
                queued += send
            elif (local, remote) == (server_port, client_port):
                queued += receive
    return queued


def test_a_clean_stop_hands_its_partitions_on_and_stores_nothing_it_leaves_unanswered(
        cluster: BrokerCluster) -> None:
    """Kafka's controlled shutdown: a SIGTERMed leader hands its partitions to the others first, and a
    produce it had read but not stored is refused at once, "not the leader", and never stored. Before,
    it kept the partitions through its 5 s grace, reading nothing, and closed the connections still
    owed answers; what it stored meanwhile its producers resent (the cloud campaign's plain producer
    had runs of records stored twice at restarts). The object store is out here, so the batch stays
    unstored for as long as the stop takes."""
    topic = create_topic(cluster.brokers[0].bootstrap, 6)
    partition = next(p for p, leader in leaders(cluster.brokers[0].bootstrap, topic).items() if leader == 2)
    stopping = cluster.broker(2)
    server_port = int(stopping.bootstrap.rsplit(":", 1)[1])
    with Wire(stopping.bootstrap, timeout=20) as wire:
        def stored() -> bool:  # broker 2 may take the topic in from the store's notification a moment after
            # broker 0 named it the leader: UNKNOWN_TOPIC_OR_PARTITION (nothing stored), which a client retries
            first = wire.request(0, 9, produce_request(topic, [(partition, batch(b"stored"))], acks=1))
            code = first.responses[0].partition_responses[0].error_code.value
            assert code in (0, UNKNOWN_TOPIC_OR_PARTITION), code
            return code == 0

        wait_until("broker 2 stores the first record", stored, 10)
        with object_store_outage():
            wire.send(0, 9, produce_request(topic, [(partition, batch(b"refused"))], acks=1))
            wait_until("the broker reads the request", lambda: unread_bytes(
                server_port, wire.sock.getsockname()[1]) == 0, 10)
            stop = threading.Thread(target=stopping.stop)
            stop.start()
            started = time.monotonic()
            answer = wire.receive(0, 9)[1]
            took = time.monotonic() - started
        stop.join(30)
    assert answer.responses[0].partition_responses[0].error_code.value == NOT_LEADER_OR_FOLLOWER
    assert took < 4, f"answered {took:.1f} s into the stop (its grace is 5 s)"
    assert not stop.is_alive()
    assert [v for _, _, v in read_all(cluster.brokers[0].bootstrap, topic, 6, 1)] == [b"stored"]


def test_kill_9_of_a_leader_under_idempotent_load_loses_and_duplicates_nothing(cluster: BrokerCluster) -> None:
    topic = create_topic(cluster.bootstrap, 3)
    victim_id = leaders(cluster.brokers[0].bootstrap, topic)[0]
    victim = cluster.broker(victim_id)
    survivor = next(b for b in cluster.brokers if b is not victim)
    failures: list[str] = []
    delivered: collections.Counter[bytes] = collections.Counter()

    def on_delivery(err, msg) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            delivered[msg.value()] += 1

    producer = Producer({"bootstrap.servers": survivor.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "message.timeout.ms": 60000})
    total, kill_at = 3000, 1000
    moved_after: list[float] = []

    def watch(killed_at: float) -> None:
        """Seconds from the kill until a survivor's Metadata names a new live leader of partition 0."""
        def moved() -> bool:
            try:
                return leaders(survivor.bootstrap, topic)[0] not in (-1, victim_id)
            except KafkaException:  # the one broker asked did not answer in time: ask again
                return False
        wait_until("partition 0 has a new leader", moved, timeout=30)
        moved_after.append(time.monotonic() - killed_at)

    watcher = None
    for i in range(total):
        producer.produce(topic, value=str(i).encode(), partition=i % 3, on_delivery=on_delivery)
        producer.poll(0)
        if i == kill_at:
            victim.kill()
            killed_at = time.monotonic()
            watcher = threading.Thread(target=watch, args=(killed_at,))
            watcher.start()
        time.sleep(0.002)  # a steady load through the failover
    assert producer.flush(90) == 0
    assert watcher is not None
    watcher.join(timeout=40)
    assert failures == []
    assert len(delivered) == total and set(delivered.values()) == {1}

    records = read_all(survivor.bootstrap, topic, 3, total)
    counts = collections.Counter(value for _, _, value in records)
    assert counts == collections.Counter(str(i).encode() for i in range(total)), "lost or duplicated records"
    for partition in range(3):
        offsets = sorted(offset for p, offset, _ in records if p == partition)
        assert offsets == list(range(len(offsets))), f"partition {partition}: offsets not dense"
        values = [int(v) for p, _, v in sorted(records) if p == partition]
        assert values == sorted(values), f"partition {partition}: order changed"
    # the bound is lease + heartbeat; the rest is slack for Metadata round trips on a loaded machine
    assert moved_after and moved_after[0] <= (LEASE_MS + HEARTBEAT_MS) / 1000 + 1.5, moved_after


def test_a_new_partitions_leader_serves_it_before_its_next_heartbeat() -> None:
    """The broker that creates a topic names its leaders at once; a leader asked before its
    own heartbeat has seen the new rows looks them up instead of refusing (a refusal made
    producers retry, and one without idempotence then stored batches out of order)."""
    try:
        args = cloud_cluster_args(lease_ms=30_000, heartbeat_ms=10_000)  # no heartbeat within the test
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(3, args) as cluster:
        topic = create_topic(cluster.brokers[0].bootstrap, 6)
        named = leaders(cluster.brokers[0].bootstrap, topic)
        assert set(named.values()) == {1, 2, 3}, named
        for partition, leader in named.items():
            assert list_offsets_error(cluster.broker(leader).bootstrap, topic, partition) == 0, (partition, leader)


def test_every_topic_of_one_create_topics_request_has_its_leaders_when_it_is_answered() -> None:
    """The partitions of all the topics a CreateTopics request makes are placed together before the answer
    (one tick of the leader table for the request, not one per topic), none left to the next heartbeat."""
    try:
        args = cloud_cluster_args(lease_ms=30_000, heartbeat_ms=10_000)  # no heartbeat within the test
    except ServiceUnavailable as exc:
        pytest.skip(str(exc))
    with BrokerCluster(2, args) as cluster:
        bootstrap = cluster.brokers[0].bootstrap
        names = [f"batch-{i}-{uuid.uuid4().hex[:6]}" for i in range(20)]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics([NewTopic(name, 3, 1) for name in names], operation_timeout=10)
        for future in futures.values():
            future.result(timeout=30)
        found = admin.list_topics(timeout=10).topics
        for name in names:
            led = {p.id: p.leader for p in found[name].partitions.values()}
            assert sorted(led) == [0, 1, 2] and set(led.values()) <= {1, 2}, (name, led)
