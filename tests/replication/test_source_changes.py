"""What happens on the source while a link runs: retention gaps, compaction, topics deleted and recreated."""

from __future__ import annotations

import time

import pytest

from kafkacompat import storage
from kafkacompat.testing import Broker

from .helpers import admin, batches, end_offset, link_state, replica, values, wait_for

COMPACT = {"cleanup.policy": "compact", "segment.bytes": "4096", "min.cleanable.dirty.ratio": "0.01",
           "delete.retention.ms": "0"}


@pytest.fixture
def pair(tmp_path):
    a = Broker(str(tmp_path / "a"), cluster_name="a").start()
    b = Broker(str(tmp_path / "b"), cluster_name="b").start()
    for broker in (a, b):
        admin(broker).call("stream.create", path="/s")
    yield a, b
    b.stop()
    a.stop()


def log_start(broker: Broker, topic: str, partition: int = 0) -> int:
    return broker.server.store.partition("/s", topic, partition).log_start_offset


def delete_records(broker: Broker, topic: str, before: int) -> None:
    """DeleteRecords as a stock admin client sends it."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [future] = client.delete_records([TopicPartition(f"/s:{topic}", 0, before)], request_timeout=10).values()
    assert future.result(timeout=15).low_watermark == before


def in_sync(broker: Broker) -> bool:
    return all(link["state"] == "in-sync" for link in link_state(broker, "/s"))


def test_retention_gap_while_paused_is_skipped_keeping_offsets(pair):
    a, b = pair
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    for i in range(5):
        a.produce("/s:t", f"early-{i}".encode())
    wait_for(lambda: end_offset(b, "/s", "t") == 5, what="first messages replicated")
    admin(a).call("replica.pause", path="/s", replica=replica(b, "/s"))
    for i in range(5, 20):
        a.produce("/s:t", f"m-{i}".encode())
    delete_records(a, "t", 12)  # offsets 5..11 go before the replica got them
    admin(a).call("replica.resume", path="/s", replica=replica(b, "/s"))
    wait_for(lambda: end_offset(b, "/s", "t") == 20 and in_sync(a), what="replica caught up past the gap")
    assert log_start(b, "t") == 12
    assert batches(b, "/s", "t") == batches(a, "/s", "t")
    assert values(b, "/s:t") == values(a, "/s:t") == [(i, f"m-{i}".encode()) for i in range(12, 20)]
    [link] = link_state(a, "/s")
    assert link["state"] == "in-sync" and link["last_error"] is None
    a.produce("/s:t", b"after")
    wait_for(lambda: end_offset(b, "/s", "t") == 21, what="the link goes on after the gap")
    assert values(b, "/s:t")[-1] == (20, b"after")


def test_new_replica_of_a_source_whose_log_start_moved(pair):
    a, b = pair
    for i in range(10):
        a.produce("/s:t", f"m-{i}".encode())
    delete_records(a, "t", 7)
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    wait_for(lambda: end_offset(b, "/s", "t") == 10 and in_sync(a), what="replica copied what the source holds")
    assert log_start(b, "t") == 7 and values(b, "/s:t") == values(a, "/s:t")


def _read_from(broker: Broker, offset: int, count: int, *, reset: str = "error") -> tuple[int, list[tuple[int, bytes]]]:
    """(low watermark, `count` (offset, value)) as a confluent-kafka consumer of /s:t sees them from `offset`.

    With auto.offset.reset=error a position the partition no longer holds is an error, not a silent jump.
    """
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "reader",
                         "enable.auto.commit": False, "auto.offset.reset": reset})
    consumer.assign([TopicPartition("/s:t", 0, offset)])
    out: list[tuple[int, bytes]] = []
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition("/s:t", 0), timeout=10)
        for _ in range(60):
            if len(out) >= count:
                break
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            out.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    return low, out


def test_delete_records_on_the_source_moves_the_replica_log_start(pair):
    """DeleteRecords on the source (a stock admin client) reaches the replica as a Kafka follower follows
    its leader's log start: the same low watermark and offsets there, and a replica consumer past the
    deleted records reads on without an out-of-range error. Deleting on the replica of data that came
    from the source does not delete it at the source (the multi-master link back leaves it)."""
    a, b = pair
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    for i in range(10):
        a.produce("/s:t", f"m-{i}".encode())
    wait_for(lambda: end_offset(b, "/s", "t") == 10 and in_sync(a), what="replicated")
    delete_records(a, "t", 4)  # the link is idle: the log start alone must travel
    wait_for(lambda: log_start(b, "t") == 4, what="replica log start moved")
    for i in range(10, 15):
        a.produce("/s:t", f"m-{i}".encode())
    wait_for(lambda: end_offset(b, "/s", "t") == 15, what="later messages replicated")
    expected = [(i, f"m-{i}".encode()) for i in range(4, 15)]
    assert _read_from(b, 6, 9) == (4, expected[2:])  # a replica consumer past the deletion reads on
    assert _read_from(b, 0, 11, reset="earliest") == _read_from(a, 0, 11, reset="earliest") == (4, expected)
    assert batches(b, "/s", "t") == batches(a, "/s", "t")

    # multi-master: the replica deleting records of the source's topic does not delete them at the source
    admin(b).call("replica.add", path="/s", replica=replica(a, "/s"))
    delete_records(b, "t", 8)
    for i in range(15, 17):  # each goes round A -> B -> (back link: skipped, A holds it): the back link's rounds
        a.produce("/s:t", f"m-{i}".encode())
        wait_for(lambda i=i: end_offset(b, "/s", "t") == i + 1 and in_sync(b), what="back link caught up")
    assert (log_start(a, "t"), log_start(b, "t")) == (4, 8)
    delete_records(a, "t", 10)  # the source's own deletions still go forward
    wait_for(lambda: log_start(b, "t") == 10, what="replica log start moved again")
    assert log_start(a, "t") == 10


def clean(broker: Broker) -> None:
    """One log cleaner pass as if an hour had gone by (every dirty compacted partition is due)."""
    later = int(time.time() * 1000) + 3_600_000
    broker.call(broker.server.store.clean_logs(now=later))


def record_count(data: bytes) -> int:
    """recordCount of a batch as helpers.batches gives it (partitionLeaderEpoch cut out)."""
    return int.from_bytes(data[53:57], "big")


def holding_records(broker: Broker) -> list[tuple[int, bytes]]:
    return [(o, data) for o, data in batches(broker, "/s", "state") if record_count(data)]


def confluent_view(broker: Broker) -> list[tuple[int, bytes]]:
    """(offset, value) of /s:state as a confluent-kafka consumer reads it to the end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "view",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    consumer.assign([TopicPartition("/s:state", 0, 0)])
    out = []
    try:
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(msg.error())
            out.append((msg.offset(), msg.value()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of /s:state: {out}")


def latest_by_key(broker: Broker) -> dict[bytes | None, tuple[int, bytes | None]]:
    return {m.key: (m.offset, m.value) for m in broker.consume("/s:state")}


def test_compacted_topic_keeps_its_offset_gaps(tmp_path):
    """A compacted source ships its cleaned batches (gaps included); each side's cleaner then keeps the
    same record at the same offset."""
    a = Broker(str(tmp_path / "a"), cluster_name="a", log_cleaner_backoff_ms=3_600_000).start()
    b = Broker(str(tmp_path / "b"), cluster_name="b", log_cleaner_backoff_ms=3_600_000).start()
    try:
        for broker in (a, b):
            admin(broker).call("stream.create", path="/s")
        admin(a).call("topic.create", name="/s:state", partitions=1, configs=COMPACT)
        for i in range(200):
            a.produce("/s:state", f"v{i}-".encode() * 20, key=f"k{i % 5}".encode())
        clean(a)
        source = values(a, "/s:state")
        offsets = [offset for offset, _ in source]
        assert len(offsets) < 200 and offsets[-1] == 199  # compacted: there are gaps
        admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
        wait_for(lambda: end_offset(b, "/s", "state") == 200 and in_sync(a), what="compacted topic replicated")
        assert values(b, "/s:state") == source  # the same offsets, gaps included
        # the same batches byte for byte; where the source's cleaner removed whole batches the replica
        # holds one empty batch (no records, as a cleaner leaves them) spanning the stretch
        assert holding_records(b) == holding_records(a)
        assert [o for o, data in batches(b, "/s", "state") if record_count(data) == 0] == [0]
        assert confluent_view(b) == confluent_view(a) == [(o, v) for o, v in source]
        assert b.server.store.get_topic("/s", "state").configs["cleanup.policy"] == "compact"
        # more writes, cleaned on the replica only, then on the source: the survivors agree
        admin(a).call("replica.pause", path="/s", replica=replica(b, "/s"))
        for i in range(200, 400):
            a.produce("/s:state", f"w{i}-".encode() * 20, key=f"k{i % 7}".encode())
        admin(a).call("replica.resume", path="/s", replica=replica(b, "/s"))
        wait_for(lambda: end_offset(b, "/s", "state") == 400 and in_sync(a), what="more replicated")
        clean(b)
        assert len(values(b, "/s:state")) < len(values(a, "/s:state"))
        # a restart of the link compares the last batch both sides hold before it goes on
        admin(a).call("replica.pause", path="/s", replica=replica(b, "/s"))
        admin(a).call("replica.resume", path="/s", replica=replica(b, "/s"))
        a.produce("/s:state", b"last", key=b"k0")
        wait_for(lambda: end_offset(b, "/s", "state") == 401 and in_sync(a), what="link resumed")
        clean(a)
        clean(b)
        # each cleaner works on its own partitionlets (as each Kafka replica cleans its own segments), so the
        # replica may still hold older values its cleaner has not reached; what both hold is the same record
        # at the same offset, and the latest value of every key is at the same offset on both
        on_a, on_b = dict(values(a, "/s:state")), dict(values(b, "/s:state"))
        assert on_a.items() <= on_b.items()
        assert latest_by_key(a) == latest_by_key(b) and latest_by_key(b)[b"k0"] == (400, b"last")
    finally:
        b.stop()
        a.stop()


def test_a_batch_cleaned_on_one_side_is_still_the_same_batch():
    from kafkacompat.protocol.records import Record, build_batch, rebuild_batch, split_records

    from kafkacompat.replication.receiver import same_batch

    records = [Record(f"k{i % 2}".encode(), f"v{i}".encode(), [], 1000 + i) for i in range(4)]
    whole = build_batch(records)
    cleaned = rebuild_batch(whole, split_records(whole)[2:])  # the older record of each key removed
    assert same_batch(whole, cleaned) and same_batch(cleaned, whole)
    other = build_batch([*records[:3], Record(b"k1", b"another", [], 1003)])
    assert not same_batch(whole, other) and not same_batch(cleaned, rebuild_batch(other, split_records(other)[2:]))


def topic_id(broker: Broker, topic: str):
    info = broker.server.store.get_topic("/s", topic)
    return info.topic_id if info is not None else None


def current(broker: Broker, topic: str) -> list[tuple[int, bytes | None]] | None:
    """(offset, value) of a topic, None while it does not exist (between a deletion and its creation,
    which the replica's link may make between the look and the read)."""
    if topic_id(broker, topic) is None:
        return None
    try:
        return values(broker, f"/s:{topic}")
    except storage.UnknownTopicError:
        return None


def recreate(broker: Broker, topic: str, *new_values: bytes) -> None:
    admin(broker).call("topic.delete", name=f"/s:{topic}")
    admin(broker).call("topic.create", name=f"/s:{topic}", partitions=1)
    for value in new_values:
        broker.produce(f"/s:{topic}", value)


def test_a_topic_deleted_and_created_again_at_the_source_is_so_on_the_replica(pair):
    a, b = pair
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    for i in range(10):
        a.produce("/s:t", f"old-{i}".encode())
    wait_for(lambda: end_offset(b, "/s", "t") == 10, what="first creation replicated")
    first = topic_id(b, "t")
    recreate(a, "t", b"new-0", b"new-1", b"new-2")
    wait_for(lambda: topic_id(b, "t") not in (None, first) and current(b, "t") == current(a, "t")
             and in_sync(a), what="replica holds the new creation")
    assert values(b, "/s:t") == [(0, b"new-0"), (1, b"new-1"), (2, b"new-2")]
    assert batches(b, "/s", "t") == batches(a, "/s", "t")
    [link] = link_state(a, "/s")
    assert link["last_error"] is None and link["lag_messages"] == 0


def test_a_recreation_while_paused_and_restarted_is_noticed(tmp_path):
    a = Broker(str(tmp_path / "a"), cluster_name="a").start()
    b = Broker(str(tmp_path / "b"), cluster_name="b").start()
    try:
        for broker in (a, b):
            admin(broker).call("stream.create", path="/s")
        admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
        for i in range(10):
            a.produce("/s:t", f"old-{i}".encode())
        wait_for(lambda: end_offset(b, "/s", "t") == 10, what="first creation replicated")
        admin(a).call("replica.pause", path="/s", replica=replica(b, "/s"))
        recreate(a, "t", *[f"new-{i}".encode() for i in range(12)])  # more than before: no offset gives it away
        a.stop()
        a = Broker(str(tmp_path / "a"), cluster_name="a").start()
        admin(a).call("replica.resume", path="/s", replica=replica(b, "/s"))
        wait_for(lambda: current(b, "t") == current(a, "t") and in_sync(a), what="replica follows")
        assert [v for _, v in values(b, "/s:t")] == [f"new-{i}".encode() for i in range(12)]
        assert batches(b, "/s", "t") == batches(a, "/s", "t")
    finally:
        b.stop()
        a.stop()


def test_multimaster_pair_settles_on_the_new_creation(pair):
    a, b = pair
    admin(a).call("replica.add", path="/s", replica=replica(b, "/s"))
    admin(b).call("replica.add", path="/s", replica=replica(a, "/s"))
    for i in range(5):
        a.produce("/s:t", f"old-{i}".encode())
    wait_for(lambda: end_offset(b, "/s", "t") == 5 and in_sync(a) and in_sync(b), what="replicated both ways")
    recreate(a, "t", b"new-0", b"new-1")
    wait_for(lambda: current(a, "t") == current(b, "t") == [(0, b"new-0"), (1, b"new-1")]
             and in_sync(a) and in_sync(b), what="both clusters hold the new creation")
    for broker in (a, b):
        assert all(link["last_error"] is None for link in link_state(broker, "/s"))
    # and a deletion at one master does not come back from the other
    admin(a).call("topic.delete", name="/s:t")
    wait_for(lambda: topic_id(b, "t") is None and in_sync(a) and in_sync(b), what="deletion replicated")
    assert topic_id(a, "t") is None
