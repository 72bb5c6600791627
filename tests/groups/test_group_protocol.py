"""The group APIs on the wire: versions, Kafka's error codes, and the group staying usable."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient
from kio.schema.errors import ErrorCode as E

from kafkacompat.testing import Broker
from tests.conftest import create_topic
from tests.groups.helpers import GROUP_SETTINGS
from tests.groups.group_wire import GroupWire, subscription


@pytest.fixture
def group() -> str:
    return f"g-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def wires(broker):
    opened: list[GroupWire] = []

    def connect() -> GroupWire:
        wire = GroupWire(broker.bootstrap_servers)
        opened.append(wire)
        return wire

    yield connect
    for wire in opened:
        wire.close()


def stable_pair(wires, group, **kw):
    """Two members through JoinGroup and SyncGroup: (leader wire, id), (follower wire, id), generation."""
    a, b = wires(), wires()
    a.send_join(group, version=3, **kw)  # v3: no MEMBER_ID_REQUIRED; both within the initial delay
    b.send_join(group, version=3, **kw)
    ja, jb = a.answer(), b.answer()
    assert ja.error_code == jb.error_code == E.none
    assert ja.generation_id == jb.generation_id
    leader, follower = (a, ja), (b, jb)
    if jb.member_id == jb.leader:
        leader, follower = follower, leader
    (lw, lj), (fw, fj) = leader, follower
    fw.send_sync(group, fj.generation_id, fj.member_id)
    assert lw.sync(group, lj.generation_id, lj.member_id, {lj.member_id: b"L", fj.member_id: b"F"}).assignment == b"L"
    assert fw.answer().assignment == b"F"
    return (lw, lj.member_id), (fw, fj.member_id), lj.generation_id


def test_find_coordinator_every_version(broker, wires, group):
    wire = wires()
    for version in range(0, 4):
        body = wire.build(10, version, key=group, key_type=0)
        answer = wire.request(10, version, body)
        assert answer.error_code == E.none and (answer.host, answer.port) == ("127.0.0.1", broker.port)
    for version in range(4, 7):
        body = wire.build(10, version, key_type=0, coordinator_keys=(group, "other"))
        answer = wire.request(10, version, body)
        assert [(c.key, c.error_code, c.port) for c in answer.coordinators] == [
            (group, E.none, broker.port), ("other", E.none, broker.port)]
    answer = wire.request(10, 6, wire.build(10, 6, key_type=1, coordinator_keys=("txn",)))
    assert answer.coordinators[0].error_code == E.coordinator_not_available


def test_member_id_required_round_trip_from_v4(wires, group):
    wire = wires()
    first = wire.join(group, version=4)
    assert first.error_code == E.member_id_required and first.member_id
    second = wire.join(group, first.member_id, version=4)
    assert second.error_code == E.none and second.member_id == first.member_id == second.leader
    assert second.generation_id == 1 and [m.member_id for m in second.members] == [first.member_id]
    # before v4 a member id is handed out at once
    other = wires().join(f"{group}-old", version=3)
    assert other.error_code == E.none and other.member_id and other.generation_id == 1


@pytest.mark.parametrize("join_version,sync_version", [(0, 0), (2, 1), (5, 3), (7, 5), (9, 5)])
def test_join_and_sync_across_versions(wires, group, join_version, sync_version):
    a = wires()
    ja = a.join_with_id(group, version=join_version)
    assert ja.error_code == E.none and ja.leader == ja.member_id
    if join_version >= 7:
        assert (ja.protocol_type, ja.protocol_name) == ("consumer", "range")
    else:
        assert ja.protocol_name == "range"
    # an empty assignment list from the leader is valid: every member gets empty bytes
    answer = a.sync(group, ja.generation_id, ja.member_id, {}, version=sync_version,
                    protocol_type="consumer", protocol_name="range")
    assert answer.error_code == E.none and answer.assignment == b""
    if sync_version >= 5:
        assert (answer.protocol_type, answer.protocol_name) == ("consumer", "range")
        wrong = a.sync(group, ja.generation_id, ja.member_id, version=5, protocol_type="consumer",
                       protocol_name="roundrobin")
        assert wrong.error_code == E.inconsistent_group_protocol
    assert a.heartbeat(group, ja.generation_id, ja.member_id, version=min(sync_version, 4)) == E.none


def test_leader_gets_members_and_relays_assignments(wires, group):
    (lw, leader), (fw, follower), generation = stable_pair(wires, group)
    described = lw.describe(group)[0]
    assert (described.group_state, described.protocol_type, described.protocol_data) == ("Stable", "consumer", "range")
    members = {m.member_id: (m.member_metadata, m.member_assignment, m.client_host) for m in described.members}
    assert members == {leader: (b"meta", b"L", "/127.0.0.1"), follower: (b"meta", b"F", "/127.0.0.1")}
    assert lw.list_groups(("stable",)).get(group) == "Stable"
    assert group not in lw.list_groups(("Empty",))
    # a follower rejoining unchanged in Stable gets the current generation back, no rebalance
    again = fw.join(group, follower, version=3)
    assert (again.error_code, again.generation_id, again.members) == (E.none, generation, ())
    assert lw.heartbeat(group, generation, leader) == E.none


def test_wrong_generation_and_unknown_member_leave_the_group_usable(wires, group, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 2)
    (lw, leader), (fw, follower), generation = stable_pair(wires, group)
    assert lw.heartbeat(group, generation + 1, leader) == E.illegal_generation
    assert lw.heartbeat(group, generation, "nobody") == E.unknown_member_id
    assert lw.sync(group, generation - 1, leader, {}).error_code == E.illegal_generation
    commit = lw.commit(group, {topic_name: {0: (5, None)}}, generation=generation + 1, member_id=leader)
    assert commit == {(topic_name, 0): E.illegal_generation}
    # not a member: a non-empty group refuses commits without member id
    assert lw.commit(group, {topic_name: {0: (5, None)}}) == {(topic_name, 0): E.unknown_member_id}
    # still usable
    assert lw.heartbeat(group, generation, leader) == E.none
    assert fw.heartbeat(group, generation, follower) == E.none
    assert lw.commit(group, {topic_name: {0: (5, "m")}}, generation=generation, member_id=leader) == {
        (topic_name, 0): E.none}
    assert lw.fetch(group, {topic_name: [0, 1]}) == {topic_name: {0: (5, "m", E.none), 1: (-1, "", E.none)}}


def test_unknown_group(wires, group, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 1)
    wire = wires()
    assert wire.heartbeat(group, 1, "m") == E.unknown_member_id
    assert wire.sync(group, 1, "m").error_code == E.unknown_member_id
    assert wire.join(group, "m", version=5).error_code == E.unknown_member_id
    assert [m.error_code for m in wire.leave(group, [("m", None)]).members] == [E.unknown_member_id]
    assert wire.leave(group, [("m", None)], version=1).error_code == E.unknown_member_id
    described = wire.describe(group)[0]
    assert (described.error_code, described.group_state, described.members) == (E.none, "Dead", ())
    assert wire.delete_groups(group) == {group: E.group_id_not_found}
    assert wire.offset_delete(group, {topic_name: [0]}).error_code == E.group_id_not_found
    assert wire.fetch(group, {topic_name: [0]}) == {topic_name: {0: (-1, "", E.none)}}
    # a commit claiming a generation for a group that does not exist
    assert wire.commit(group, {topic_name: {0: (1, None)}}, generation=3, member_id="m") == {
        (topic_name, 0): E.illegal_generation}
    assert group not in wire.list_groups()


def test_commit_bad_topics_and_oversized_metadata(wires, group, broker, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 2)
    wire = wires()
    result = wire.commit(group, {
        topic_name: {0: (7, "ok"), 1: (8, "x" * 4097), 9: (1, None)},
        "no-such-topic": {0: (1, None)},
        "bad/name": {0: (1, None)},
    })
    assert result == {
        (topic_name, 0): E.none,
        (topic_name, 1): E.offset_metadata_too_large,
        (topic_name, 9): E.unknown_topic_or_partition,
        ("no-such-topic", 0): E.unknown_topic_or_partition,
        ("bad/name", 0): E.unknown_topic_or_partition,
    }
    assert wire.fetch(group, {topic_name: [0, 1]}) == {topic_name: {0: (7, "ok", E.none), 1: (-1, "", E.none)}}
    # the simple consumer's group is listed, empty, and takes members afterwards
    assert wire.list_groups().get(group) == "Empty"
    joined = wire.join_with_id(group, version=5)
    assert joined.error_code == E.none and joined.generation_id == 1


def test_join_refusals(wires, group):
    (lw, leader), _follower, generation = stable_pair(wires, group)
    wire = wires()
    assert wire.join(group, version=5, session_ms=100).error_code == E.invalid_session_timeout
    assert wire.join("", version=5).error_code == E.invalid_group_id
    assert wire.join(group, version=3, protocol_type="connect").error_code == E.inconsistent_group_protocol
    assert wire.join(group, version=3, protocols=(("other", b""),)).error_code == E.inconsistent_group_protocol
    # refused joins changed nothing
    assert lw.heartbeat(group, generation, leader) == E.none


def test_oversized_member_metadata_is_relayed(wires, group):
    big = bytes(range(256)) * 4096  # 1 MiB of subscription metadata
    wire = wires()
    joined = wire.join_with_id(group, version=5, protocols=(("range", big),))
    assert joined.error_code == E.none and joined.members[0].metadata == big


def test_static_member_fencing(wires, group):
    a = wires()
    first = a.join(group, version=5, instance_id="i1")
    assert first.error_code == E.none
    assert a.sync(group, first.generation_id, first.member_id, {first.member_id: b"A"}, instance_id="i1",
                  version=3).assignment == b"A"
    b = wires()
    again = b.join(group, version=5, instance_id="i1")  # same instance, new process: new member id
    assert again.error_code == E.none and again.member_id != first.member_id
    assert again.generation_id == first.generation_id  # no rebalance
    assert a.heartbeat(group, first.generation_id, first.member_id, instance_id="i1") == E.fenced_instance_id
    assert b.heartbeat(group, again.generation_id, again.member_id, instance_id="i1") == E.none
    assert b.sync(group, again.generation_id, again.member_id, instance_id="i1", version=3).assignment == b"A"
    old = a.join(group, first.member_id, version=5, instance_id="i1")
    assert old.error_code == E.fenced_instance_id


def test_leave_batch_by_instance_id(wires, group):
    a, b = wires(), wires()
    a.send_join(group, version=5, instance_id="x")
    b.send_join(group, version=5, instance_id="y")
    assert a.answer().error_code == b.answer().error_code == E.none
    answer = a.leave(group, [("", "x"), ("", "y"), ("", "z")], version=5)
    assert [(m.group_instance_id, m.error_code) for m in answer.members] == [
        ("x", E.none), ("y", E.none), ("z", E.unknown_member_id)]
    deadline = time.monotonic() + 5
    while a.list_groups().get(group) != "Empty":
        assert time.monotonic() < deadline, "group did not become Empty"
    assert a.delete_groups(group) == {group: E.none}


def test_member_that_does_not_rejoin_is_dropped_after_the_rebalance_timeout(wires, group):
    (lw, leader), (fw, follower), generation = stable_pair(wires, group, rebalance_ms=1000)
    start = time.monotonic()
    rejoin = lw.join(group, leader, version=3, rebalance_ms=1000)  # the leader forces a rebalance
    took = time.monotonic() - start
    assert rejoin.error_code == E.none and rejoin.generation_id == generation + 1
    assert [m.member_id for m in rejoin.members] == [leader]
    assert 0.8 < took < 5, took
    assert fw.heartbeat(group, generation, follower) == E.unknown_member_id


def test_delete_groups_and_offset_delete(wires, group, broker, topic_name):
    other = f"{topic_name}-other"
    create_topic(broker.bootstrap_servers, topic_name, 1)
    create_topic(broker.bootstrap_servers, other, 1)
    wire = wires()
    joined = wire.join_with_id(group, version=5, protocols=(("range", subscription(topic_name)),))
    generation, member = joined.generation_id, joined.member_id
    wire.sync(group, generation, member, {member: b""})
    assert wire.commit(group, {topic_name: {0: (3, None)}, other: {0: (4, None)}}, generation=generation,
                       member_id=member) == {(topic_name, 0): E.none, (other, 0): E.none}
    assert wire.delete_groups(group) == {group: E.non_empty_group}
    answer = wire.offset_delete(group, {topic_name: [0], other: [0]})
    assert answer.error_code == E.none
    assert {t.name: t.partitions[0].error_code for t in answer.topics} == {
        topic_name: E.group_subscribed_to_topic, other: E.none}
    assert wire.fetch(group, None) == {topic_name: {0: (3, "", E.none)}}
    assert [m.error_code for m in wire.leave(group, [(member, None)]).members] == [E.none]
    deadline = time.monotonic() + 5
    while wire.list_groups().get(group) != "Empty":
        assert time.monotonic() < deadline
    assert wire.delete_groups(group) == {group: E.none}
    assert wire.fetch(group, None) == {}
    assert group not in wire.list_groups()


def test_offset_fetch_all_topics_across_streams(wires, group, broker, topic_name):
    stream = f"/apps/{uuid.uuid4().hex[:8]}"
    broker.call(broker.server.store.create_stream(stream))
    broker.call(broker.server.store.create_topic(stream, "metrics", 2))
    create_topic(broker.bootstrap_servers, topic_name, 1)
    wire = wires()
    in_stream = f"{stream}:metrics"
    assert set(wire.commit(group, {in_stream: {1: (11, "s")}, topic_name: {0: (2, None)}}).values()) == {E.none}
    # the cursor sits in the topic's own stream
    assert [(c.topic, c.partition, c.offset) for c in broker.server.store.get_cursors(stream, group)] == [
        ("metrics", 1, 11)]
    everything = {in_stream: {1: (11, "s", E.none)}, topic_name: {0: (2, "", E.none)}}
    assert wire.fetch(group, None) == everything
    assert wire.fetch(group, None, version=1) == everything
    # v8+: several groups in one request
    body = wire.build(9, 8, groups=(
        wire.nested(9, 8, "OffsetFetchRequestGroup", group_id=group, topics=None),
        wire.nested(9, 8, "OffsetFetchRequestGroup", group_id=f"{group}-none", topics=(
            wire.nested(9, 8, "OffsetFetchRequestTopics", name=topic_name, partition_indexes=(0,)),)),
    ), require_stable=False)
    answer = wire.request(9, 8, body)
    got = {g.group_id: {t.name: {p.partition_index: p.committed_offset for p in t.partitions} for t in g.topics}
           for g in answer.groups}
    assert got == {group: {in_stream: {1: 11}, topic_name: {0: 2}}, f"{group}-none": {topic_name: {0: -1}}}


def test_offsets_of_an_empty_group_expire_after_retention(group, topic_name):
    with Broker(**GROUP_SETTINGS) as broker, GroupWire(broker.bootstrap_servers) as wire:
        _expire(broker, wire, group, topic_name)


def _expire(broker, wire, group, topic_name):
    create_topic(broker.bootstrap_servers, topic_name, 1)
    assert wire.commit(group, {topic_name: {0: (4, None)}}) == {(topic_name, 0): E.none}
    coordinator = broker.server.cluster.groups
    retention_ms = broker.config.offsets_retention_minutes * 60_000
    assert broker.call(coordinator.expire_offsets(int(time.time() * 1000))) == 0
    assert wire.fetch(group, {topic_name: [0]})[topic_name][0][0] == 4
    assert broker.call(coordinator.expire_offsets(int(time.time() * 1000) + retention_ms + 1000)) == 1
    assert wire.fetch(group, {topic_name: [0]})[topic_name][0][0] == -1
    assert group not in wire.list_groups()


@pytest.mark.parametrize("version", [5, 9])
def test_static_leader_rejoining_keeps_the_generation(wires, group, version):
    a, b = wires(), wires()
    a.send_join(group, version=version, instance_id="lead")
    first = a.answer()
    b.send_join(group, version=version, instance_id="follow")  # joins the next rebalance
    assert first.error_code == E.none and first.leader == first.member_id
    a.sync(group, first.generation_id, first.member_id, {first.member_id: b"A"}, instance_id="lead")
    # b's join started a rebalance: it is answered once the leader rejoins too
    a.send_join(group, first.member_id, version=version, instance_id="lead")
    ja, jb = a.answer(), b.answer()
    generation = ja.generation_id
    assert jb.generation_id == generation and ja.leader == ja.member_id
    b.send_sync(group, generation, jb.member_id, instance_id="follow")
    a.sync(group, generation, ja.member_id, {ja.member_id: b"A", jb.member_id: b"B"}, instance_id="lead")
    assert b.answer().assignment == b"B"

    c = wires()  # the leader's process restarts: same instance id, no member id
    again = c.join(group, version=version, instance_id="lead")
    assert again.error_code == E.none and again.generation_id == generation
    if version >= 9:
        # it leads, and gets the members to watch metadata, but must not reassign
        assert again.skip_assignment and again.leader == again.member_id
        assert {m.member_id for m in again.members} == {again.member_id, jb.member_id}
    else:
        # older clients are pointed at the old leader id, so they act as followers
        assert again.leader == ja.member_id and again.members == ()
    assert c.sync(group, generation, again.member_id, instance_id="lead").assignment == b"A"
    assert b.heartbeat(group, generation, jb.member_id, instance_id="follow") == E.none


def test_group_max_size(group):
    with Broker(group_max_size=1, **GROUP_SETTINGS) as broker, GroupWire(broker.bootstrap_servers) as a, \
            GroupWire(broker.bootstrap_servers) as b:
        joined = a.join_with_id(group, version=5)
        assert joined.error_code == E.none
        refused = b.join_with_id(group, version=5)
        assert refused.error_code == E.group_max_size_reached
        assert a.heartbeat(group, joined.generation_id, joined.member_id) == E.none


def test_initial_rebalance_delay_waits_for_more_members(group):
    with Broker(group_initial_rebalance_delay_ms=1000, group_min_session_timeout_ms=500) as broker, \
            GroupWire(broker.bootstrap_servers) as a, GroupWire(broker.bootstrap_servers) as b:
        start = time.monotonic()
        a.send_join(group, version=3, rebalance_ms=10_000)
        time.sleep(0.3)  # the second member arrives inside the first 1 s window
        b.send_join(group, version=3, rebalance_ms=10_000)
        ja, jb = a.answer(), b.answer()
        took = time.monotonic() - start
    # one generation for both; the late joiner extended the window once more
    assert ja.generation_id == jb.generation_id == 1 and len(ja.members or jb.members) == 2
    assert 1.9 <= took < 3.5, took


def test_member_that_never_syncs_is_dropped_after_the_rebalance_timeout(wires, group):
    a, b = wires(), wires()
    a.send_join(group, version=3, rebalance_ms=1000, session_ms=5000)
    b.send_join(group, version=3, rebalance_ms=1000, session_ms=5000)
    ja, jb = a.answer(), b.answer()
    leader, follower = (ja, jb) if ja.leader == ja.member_id else (jb, ja)
    lw = a if leader is ja else b
    lw.sync(group, leader.generation_id, leader.member_id, {leader.member_id: b"L", follower.member_id: b"F"})
    # the follower never sends SyncGroup: after the rebalance timeout (not its 5 s session) it is removed
    deadline = time.monotonic() + 3
    while lw.heartbeat(group, leader.generation_id, leader.member_id) != E.rebalance_in_progress:
        assert time.monotonic() < deadline, "the silent member was never dropped"
        time.sleep(0.1)
    rejoin = lw.join(group, leader.member_id, version=3, rebalance_ms=1000, session_ms=5000)
    assert rejoin.generation_id == leader.generation_id + 1
    assert [m.member_id for m in rejoin.members] == [leader.member_id]


@pytest.mark.parametrize("commit_version,fetch_version", [(2, 1), (3, 2), (5, 4), (6, 5), (7, 6), (8, 7), (9, 7)])
def test_offset_commit_and_fetch_versions(wires, group, broker, topic_name, commit_version, fetch_version):
    create_topic(broker.bootstrap_servers, topic_name, 1)
    wire = wires()
    assert wire.commit(group, {topic_name: {0: (42, "meta")}}, version=commit_version) == {(topic_name, 0): E.none}
    assert wire.fetch(group, {topic_name: [0]}, version=fetch_version) == {topic_name: {0: (42, "meta", E.none)}}


def test_list_groups_filters_and_versions(wires, group):
    wire = wires()
    joined = wire.join_with_id(group, version=5)
    wire.sync(group, joined.generation_id, joined.member_id, {})
    for version in range(0, 4):
        answer = wire.request(16, version, wire.build(16, version))
        assert (group, "consumer") in [(g.group_id, g.protocol_type) for g in answer.groups]

    def listed(**filters):
        answer = wire.request(16, 5, wire.build(16, 5, **{"states_filter": (), "types_filter": (), **filters}))
        return {g.group_id: (g.group_state, g.group_type) for g in answer.groups}
    assert listed()[group] == ("Stable", "classic")
    assert group in listed(states_filter=("STABLE", "Empty"))
    assert group not in listed(states_filter=("PreparingRebalance",))
    assert group in listed(types_filter=("Classic",))
    assert group not in listed(types_filter=("consumer",))  # the new (KIP-848) group type


def test_group_left_without_offsets_is_forgotten(group, topic_name):
    """The periodic offset check also drops empty groups whose offsets went with their topic."""
    with Broker(offsets_retention_check_interval_ms=100, **GROUP_SETTINGS) as broker, \
            GroupWire(broker.bootstrap_servers) as wire:
        create_topic(broker.bootstrap_servers, topic_name, 1)
        assert wire.commit(group, {topic_name: {0: (1, None)}}) == {(topic_name, 0): E.none}
        assert group in wire.list_groups()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.delete_topics([topic_name])[topic_name].result(15)
        deadline = time.monotonic() + 5
        while group in wire.list_groups():
            assert time.monotonic() < deadline, "the group outlived its offsets"
            time.sleep(0.05)


def test_stable_group_keeps_offsets_of_subscribed_topics_in_any_stream(group, topic_name):
    """Retention spares what a Stable consumer group subscribes to, whatever the topic's spelling."""
    with Broker(**GROUP_SETTINGS) as broker, GroupWire(broker.bootstrap_servers) as wire:
        stream = f"/apps/{uuid.uuid4().hex[:8]}"
        broker.call(broker.server.store.create_stream(stream))
        broker.call(broker.server.store.create_topic(stream, "metrics", 1))
        alias = f"{stream[1:].replace('/', '.')}..metrics"  # the Kafka-legal spelling
        create_topic(broker.bootstrap_servers, topic_name, 1)
        joined = wire.join_with_id(group, version=5, protocols=(("range", subscription(alias)),))
        generation, member = joined.generation_id, joined.member_id
        wire.sync(group, generation, member, {member: b""})
        assert set(wire.commit(group, {f"{stream}:metrics": {0: (5, None)}, topic_name: {0: (6, None)}},
                               generation=generation, member_id=member).values()) == {E.none}
        later = int(time.time() * 1000) + broker.config.offsets_retention_minutes * 60_000 + 1000
        assert broker.call(broker.server.cluster.groups.expire_offsets(later)) == 1
        assert wire.fetch(group, None) == {f"{stream}:metrics": {0: (5, "", E.none)}}
