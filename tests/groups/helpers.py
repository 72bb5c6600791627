"""What the group tests share: topics, messages, bounded waits and the raw group calls."""

from __future__ import annotations

import datetime
import sys
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Producer
from kafkacompat.protocol.messages import make

from tests.conftest import create_topic as shared_create_topic
from tests.wire import Wire, request_class

# broker settings for group tests: Kafka's defaults are a 3000 ms delay and a 6000 ms minimum session
GROUP_SETTINGS = {"group_initial_rebalance_delay_ms": 300, "group_min_session_timeout_ms": 500}
SESSION_MS = 3000  # clients' session.timeout.ms in these tests
HEARTBEAT_MS = 300
REBALANCE_MS = 10_000  # clients' max.poll.interval.ms, the rebalance timeout


def create_topic(bootstrap: str, name: str, partitions: int = 6) -> None:
    """A topic of `partitions` (six by default, the group tests' usual), led on every partition."""
    shared_create_topic(bootstrap, name, partitions)


def produce(bootstrap: str, topic: str, count: int, partitions: int = 6, start: int = 0) -> set[bytes]:
    """`count` distinct values spread over every partition; returns them."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    values = set()
    for i in range(start, start + count):
        value = f"m-{i}".encode()
        producer.produce(topic, value, partition=i % partitions)
        values.add(value)
    assert producer.flush(15) == 0
    return values


def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.05) -> float:
    """Poll `condition` until true; returns the seconds it took, fails after `timeout`."""
    start = time.monotonic()
    while True:
        if condition():
            return time.monotonic() - start
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# raw protocol calls -------------------------------------------------------------

def module(api_key: int, version: int) -> Any:
    return sys.modules[request_class(api_key, version).__module__]


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def join_request(
    version: int, group: str, member_id: str = "", instance_id: str | None = None,
    protocols: tuple[tuple[str, bytes], ...] = (("range", b"\x00\x01meta"),),
    protocol_type: str = "consumer", session_ms: int = SESSION_MS, rebalance_ms: int = REBALANCE_MS,
) -> Any:
    m = module(11, version)
    return make(
        m.JoinGroupRequest,
        group_id=group,
        session_timeout=ms(session_ms),
        rebalance_timeout=ms(rebalance_ms),
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocols=tuple(make(m.JoinGroupRequestProtocol, name=n, metadata=d) for n, d in protocols),
        reason=None,
    )


def join(wire: Wire, version: int, group: str, **kwargs: Any) -> Any:
    return wire.request(11, version, join_request(version, group, **kwargs))


def join_member(wire: Wire, group: str, version: int = 9, **kwargs: Any) -> Any:
    """JoinGroup with the MEMBER_ID_REQUIRED round trip done; returns the second answer."""
    first = join(wire, version, group, **kwargs)
    if first.error_code != 79:  # MEMBER_ID_REQUIRED
        return first
    return join(wire, version, group, member_id=first.member_id, **kwargs)


def sync(
    wire: Wire, version: int, group: str, generation: int, member_id: str,
    assignments: dict[str, bytes] | None = None, instance_id: str | None = None,
    protocol_type: str | None = None, protocol_name: str | None = None,
) -> Any:
    m = module(14, version)
    body = make(
        m.SyncGroupRequest,
        group_id=group,
        generation_id=generation,
        member_id=member_id,
        group_instance_id=instance_id,
        protocol_type=protocol_type,
        protocol_name=protocol_name,
        assignments=tuple(
            make(m.SyncGroupRequestAssignment, member_id=k, assignment=v) for k, v in (assignments or {}).items()
        ),
    )
    return wire.request(14, version, body)


def heartbeat(wire: Wire, group: str, generation: int, member_id: str, version: int = 4, instance_id: str | None = None) -> Any:
    m = module(12, version)
    body = make(m.HeartbeatRequest, group_id=group, generation_id=generation, member_id=member_id, group_instance_id=instance_id)
    return wire.request(12, version, body)


def leave(wire: Wire, group: str, members: list[tuple[str, str | None]], version: int = 5) -> Any:
    m = module(13, version)
    if version < 3:
        body = make(m.LeaveGroupRequest, group_id=group, member_id=members[0][0])
    else:
        body = make(
            m.LeaveGroupRequest, group_id=group,
            members=tuple(make(m.MemberIdentity, member_id=i, group_instance_id=g, reason=None) for i, g in members),
        )
    return wire.request(13, version, body)


def commit(
    wire: Wire, version: int, group: str, offsets: dict[tuple[str, int], tuple[int, str | None]],
    generation: int = -1, member_id: str = "", instance_id: str | None = None,
) -> dict[tuple[str, int], int]:
    """{(topic, partition): error code} for {(topic, partition): (offset, metadata)}."""
    m = module(8, version)
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        by_topic.setdefault(topic, []).append(
            make(m.OffsetCommitRequestPartition, partition_index=partition, committed_offset=offset,
                 committed_leader_epoch=-1, committed_metadata=metadata)
        )
    body = make(
        m.OffsetCommitRequest, group_id=group, generation_id_or_member_epoch=generation, member_id=member_id,
        group_instance_id=instance_id, retention_time=ms(-1),
        topics=tuple(make(m.OffsetCommitRequestTopic, name=t, partitions=tuple(p)) for t, p in by_topic.items()),
    )
    response = wire.request(8, version, body)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


def fetch_offsets(wire: Wire, group: str, topics: dict[str, list[int]] | None, version: int = 7) -> dict[tuple[str, int], int]:
    """{(topic, partition): committed offset} as OffsetFetch (v1-7) answers."""
    m = module(9, version)
    requested = None if topics is None else tuple(
        make(m.OffsetFetchRequestTopic, name=t, partition_indexes=tuple(p)) for t, p in topics.items()
    )
    response = wire.request(9, version, make(m.OffsetFetchRequest, group_id=group, topics=requested, require_stable=False))
    assert getattr(response, "error_code", 0) == 0
    return {(t.name, p.partition_index): p.committed_offset for t in response.topics for p in t.partitions}
