"""More of the group protocol on the wire: static leaders, the initial delay, filters, retention."""

from __future__ import annotations

import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.groups.helpers import (
    GROUP_SETTINGS,
    commit,
    create_topic,
    fetch_offsets,
    heartbeat,
    join,
    join_member,
    join_request,
    leave,
    module,
    sync,
    wait_for,
)
from tests.wire import Wire


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def subscription(*topics: str) -> bytes:
    """ConsumerProtocolSubscription v0, as clients put it in JoinGroup metadata."""
    out = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        out += struct.pack(">h", len(topic)) + topic.encode()
    return out + struct.pack(">i", -1)


def send_join(wire: Wire, version: int, group: str, **kwargs: Any) -> None:
    wire.send(11, version, join_request(version, group, **kwargs))


def answer(wire: Wire, api_key: int, version: int) -> Any:
    return wire.receive(api_key, version)[1]


def list_groups(wire: Wire, version: int = 5, **filters: tuple[str, ...]) -> dict[str, tuple[str, str, str]]:
    m = module(16, version)
    body = make(m.ListGroupsRequest, **{"states_filter": (), "types_filter": (), **filters})
    response = wire.request(16, version, body)
    assert response.error_code == ErrorCode.none
    return {
        g.group_id: (g.protocol_type, getattr(g, "group_state", ""), getattr(g, "group_type", ""))
        for g in response.groups
    }


@pytest.mark.also_on_cloud
def test_unknown_group_answers_of_every_group_api(broker: Broker, group: str, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with Wire(broker.bootstrap_servers) as wire:
        assert heartbeat(wire, group, 1, "m").error_code == ErrorCode.unknown_member_id
        assert sync(wire, 5, group, 1, "m").error_code == ErrorCode.unknown_member_id
        assert join(wire, 5, group, member_id="m").error_code == ErrorCode.unknown_member_id
        assert [m.error_code for m in leave(wire, group, [("m", None)]).members] == [ErrorCode.unknown_member_id]
        assert leave(wire, group, [("m", None)], version=1).error_code == ErrorCode.unknown_member_id
        m = module(15, 5)
        [described] = wire.request(15, 5, make(m.DescribeGroupsRequest, groups=(group,),
                                                include_authorized_operations=False)).groups
        assert (described.error_code, described.group_state, described.members) == (ErrorCode.none, "Dead", ())
        m = module(42, 2)
        [deleted] = wire.request(42, 2, make(m.DeleteGroupsRequest, groups_names=(group,))).results
        assert deleted.error_code == ErrorCode.group_id_not_found
        m = module(47, 0)
        body = make(m.OffsetDeleteRequest, group_id=group, topics=(make(
            m.OffsetDeleteRequestTopic, name=topic_name,
            partitions=(make(m.OffsetDeleteRequestPartition, partition_index=0),)),))
        assert wire.request(47, 0, body).error_code == ErrorCode.group_id_not_found
        assert fetch_offsets(wire, group, {topic_name: [0]}) == {(topic_name, 0): -1}
        assert group not in list_groups(wire)


def test_large_member_metadata_is_relayed_whole(broker: Broker, group: str) -> None:
    big = bytes(range(256)) * 4096  # 1 MiB of subscription user data
    with Wire(broker.bootstrap_servers) as wire:
        joined = join_member(wire, group, version=5, protocols=(("range", big),))
        assert joined.error_code == ErrorCode.none and joined.members[0].metadata == big


def test_leave_group_removes_static_members_by_instance_id(broker: Broker, group: str) -> None:
    with Wire(broker.bootstrap_servers) as a, Wire(broker.bootstrap_servers) as b:
        send_join(a, 5, group, instance_id="x")
        send_join(b, 5, group, instance_id="y")
        assert answer(a, 11, 5).error_code == answer(b, 11, 5).error_code == ErrorCode.none
        left = leave(a, group, [("", "x"), ("", "y"), ("", "z")], version=5)
        assert [(m.group_instance_id, m.error_code) for m in left.members] == [
            ("x", ErrorCode.none), ("y", ErrorCode.none), ("z", ErrorCode.unknown_member_id)]
        wait_for(lambda: list_groups(a).get(group, ("", "", ""))[1] == "Empty", 5, "the group to empty")


@pytest.mark.also_on_cloud
@pytest.mark.parametrize("version", [5, 9])
def test_static_leader_restart_keeps_the_generation(broker: Broker, group: str, version: int) -> None:
    with Wire(broker.bootstrap_servers) as a, Wire(broker.bootstrap_servers) as b, \
            Wire(broker.bootstrap_servers) as c:
        first = join(a, version, group, instance_id="lead")
        assert first.error_code == ErrorCode.none and first.leader == first.member_id
        sync(a, 5, group, first.generation_id, first.member_id, {first.member_id: b"A"}, instance_id="lead")
        send_join(b, version, group, instance_id="follow")  # starts a rebalance the leader joins
        send_join(a, version, group, member_id=first.member_id, instance_id="lead")
        ja, jb = answer(a, 11, version), answer(b, 11, version)
        generation = ja.generation_id
        assert jb.generation_id == generation and ja.leader == ja.member_id
        b.send(14, 5, make(module(14, 5).SyncGroupRequest, group_id=group, generation_id=generation,
                           member_id=jb.member_id, group_instance_id="follow", protocol_type=None,
                           protocol_name=None, assignments=()))
        sync(a, 5, group, generation, ja.member_id, {ja.member_id: b"A", jb.member_id: b"B"}, instance_id="lead")
        assert answer(b, 14, 5).assignment == b"B"

        # the leader's process restarts: same instance id, no member id, no rebalance
        again = join(c, version, group, instance_id="lead")
        assert again.error_code == ErrorCode.none and again.generation_id == generation
        if version >= 9:
            # it leads and sees the members (to watch metadata) but must not reassign
            assert again.skip_assignment and again.leader == again.member_id
            assert {m.member_id for m in again.members} == {again.member_id, jb.member_id}
        else:
            # older clients get the old leader id, so the restarted leader acts as a follower
            assert again.leader == ja.member_id and again.members == ()
        assert sync(c, 5, group, generation, again.member_id, instance_id="lead").assignment == b"A"
        assert heartbeat(b, group, generation, jb.member_id, instance_id="follow").error_code == ErrorCode.none
        fenced = heartbeat(a, group, generation, ja.member_id, instance_id="lead")
        assert fenced.error_code == ErrorCode.fenced_instance_id


def test_initial_rebalance_delay_waits_for_late_joiners(group: str) -> None:
    with Broker(group_initial_rebalance_delay_ms=1000, group_min_session_timeout_ms=500) as broker, \
            Wire(broker.bootstrap_servers) as a, Wire(broker.bootstrap_servers) as b:
        start = time.monotonic()
        send_join(a, 3, group)
        time.sleep(0.3)  # the second member arrives inside the first 1 s window
        send_join(b, 3, group)
        ja, jb = answer(a, 11, 3), answer(b, 11, 3)
        took = time.monotonic() - start
    # one generation for both; the late joiner extended the wait by one more delay
    assert ja.generation_id == jb.generation_id == 1 and len(ja.members or jb.members) == 2
    assert 1.9 <= took < 3.5, took


def test_list_groups_versions_and_filters(broker: Broker, group: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        joined = join_member(wire, group, version=5)
        sync(wire, 5, group, joined.generation_id, joined.member_id, {})
        for version in range(0, 4):
            assert list_groups(wire, version)[group][0] == "consumer"
        assert list_groups(wire)[group] == ("consumer", "Stable", "classic")
        assert group in list_groups(wire, states_filter=("STABLE", "Empty"))
        assert group not in list_groups(wire, states_filter=("PreparingRebalance",))
        assert group in list_groups(wire, types_filter=("Classic",))
        assert group not in list_groups(wire, types_filter=("consumer",))  # KIP-848 groups


def test_group_whose_offsets_went_with_its_topic_is_forgotten(group: str, topic_name: str) -> None:
    with Broker(offsets_retention_check_interval_ms=100, **GROUP_SETTINGS) as broker, \
            Wire(broker.bootstrap_servers) as wire:
        create_topic(broker.bootstrap_servers, topic_name, 1)
        assert commit(wire, 8, group, {(topic_name, 0): (1, None)}) == {(topic_name, 0): ErrorCode.none}
        assert group in list_groups(wire)
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.delete_topics([topic_name])[topic_name].result(15)
        wait_for(lambda: group not in list_groups(wire), 5, "the empty group without offsets to go")


def test_retention_spares_subscribed_topics_in_any_stream(group: str, topic_name: str) -> None:
    """A Stable consumer group keeps offsets of topics it subscribes to, whatever their spelling."""
    with Broker(**GROUP_SETTINGS) as broker, Wire(broker.bootstrap_servers) as wire:
        stream = f"/apps/{uuid.uuid4().hex[:8]}"
        broker.call(broker.server.store.create_stream(stream))
        broker.call(broker.server.store.create_topic(stream, "metrics", 1))
        alias = f"{stream[1:].replace('/', '.')}..metrics"  # the Kafka-legal spelling
        create_topic(broker.bootstrap_servers, topic_name, 1)
        joined = join_member(wire, group, version=5, protocols=(("range", subscription(alias)),))
        generation, member = joined.generation_id, joined.member_id
        sync(wire, 5, group, generation, member, {member: b""})
        offsets = {(f"{stream}:metrics", 0): (5, None), (topic_name, 0): (6, None)}
        assert set(commit(wire, 8, group, offsets, generation, member).values()) == {ErrorCode.none}
        later = int(time.time() * 1000) + broker.config.offsets_retention_minutes * 60_000 + 1000
        assert broker.call(broker.server.cluster.groups.expire_offsets(later)) == 1
        assert fetch_offsets(wire, group, None) == {(f"{stream}:metrics", 0): 5}


def test_sync_with_another_protocol_and_commits_to_invalid_names(broker: Broker, group: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        joined = join_member(wire, group, version=7)
        generation, member = joined.generation_id, joined.member_id
        wrong = sync(wire, 5, group, generation, member, {}, protocol_type="consumer", protocol_name="roundrobin")
        assert wrong.error_code == ErrorCode.inconsistent_group_protocol
        right = sync(wire, 5, group, generation, member, {member: b"x"}, protocol_type="consumer",
                     protocol_name="range")
        assert (right.error_code, right.assignment) == (ErrorCode.none, b"x")
        # names no topic can have are unknown topics, as on Kafka; the group stays usable
        errors = commit(wire, 9, group, {("bad/name", 0): (1, None), ("/no/stream:t", 0): (1, None)},
                        generation, member)
        assert set(errors.values()) == {ErrorCode.unknown_topic_or_partition}
        assert heartbeat(wire, group, generation, member).error_code == ErrorCode.none


def test_empty_group_id_is_invalid_for_membership_apis(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    with Wire(broker.bootstrap_servers) as wire:
        assert join(wire, 5, "").error_code == ErrorCode.invalid_group_id
        assert sync(wire, 5, "", 1, "m").error_code == ErrorCode.invalid_group_id
        assert heartbeat(wire, "", 1, "m").error_code == ErrorCode.invalid_group_id
        assert leave(wire, "", [("m", None)]).error_code == ErrorCode.invalid_group_id
        m = module(47, 0)
        body = make(m.OffsetDeleteRequest, group_id="", topics=(make(
            m.OffsetDeleteRequestTopic, name=topic_name,
            partitions=(make(m.OffsetDeleteRequestPartition, partition_index=0),)),))
        assert wire.request(47, 0, body).error_code == ErrorCode.invalid_group_id
        # the offset APIs accept the empty group id, as Kafka does for old clients
        assert commit(wire, 8, "", {(topic_name, 0): (4, None)}) == {(topic_name, 0): ErrorCode.none}
        assert fetch_offsets(wire, "", {topic_name: [0]}) == {(topic_name, 0): 4}


def test_an_instance_id_the_group_does_not_know_is_an_unknown_member(broker: Broker, group: str) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        joined = join_member(wire, group, version=5)  # a dynamic member
        generation, member = joined.generation_id, joined.member_id
        sync(wire, 5, group, generation, member, {})
        assert heartbeat(wire, group, generation, member, instance_id="ghost").error_code == ErrorCode.unknown_member_id
        assert sync(wire, 5, group, generation, member, instance_id="ghost").error_code == ErrorCode.unknown_member_id
        assert heartbeat(wire, group, generation, member).error_code == ErrorCode.none


def test_group_max_size_refuses_the_last_member_to_rejoin(group: str) -> None:
    """Kafka counts members that rejoined: one rejoining after the group filled up is dropped."""
    with Broker(group_max_size=2, **GROUP_SETTINGS) as broker, Wire(broker.bootstrap_servers) as a, \
            Wire(broker.bootstrap_servers) as b, Wire(broker.bootstrap_servers) as c:
        send_join(a, 3, group)
        send_join(b, 3, group)
        ja, jb = answer(a, 11, 3), answer(b, 11, 3)
        leader, follower, lw, fw = (ja, jb, a, b) if ja.leader == ja.member_id else (jb, ja, b, a)
        generation = leader.generation_id
        fw.send(14, 3, make(module(14, 3).SyncGroupRequest, group_id=group, generation_id=generation,
                            member_id=follower.member_id, group_instance_id=None, assignments=()))
        sync(lw, 3, group, generation, leader.member_id, {})
        answer(fw, 14, 3)
        send_join(lw, 3, group, member_id=leader.member_id)  # the leader starts a rebalance
        send_join(c, 3, group)  # a newcomer fits: only one member has rejoined so far
        refused = join(fw, 3, group, member_id=follower.member_id)
        assert (refused.error_code, refused.member_id) == (ErrorCode.group_max_size_reached, "")
        # the refused member is out, so the rebalance completes with the two others
        jl, jc = answer(lw, 11, 3), answer(c, 11, 3)
        assert jl.generation_id == jc.generation_id == generation + 1
        assert {m.member_id for m in jl.members} == {leader.member_id, jc.member_id}
