"""The classic group protocol on the wire: Kafka's answers, errors, and a group that stays usable."""

from __future__ import annotations

import uuid

from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.testing import Broker
from tests.groups.helpers import (
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


def group_name() -> str:
    return f"g-{uuid.uuid4().hex[:8]}"


def find_coordinator(wire: Wire, version: int, keys: list[str], key_type: int = 0):
    m = module(10, version)
    if version < 4:
        return wire.request(10, version, make(m.FindCoordinatorRequest, key=keys[0], key_type=key_type))
    return wire.request(10, version, make(m.FindCoordinatorRequest, key_type=key_type, coordinator_keys=tuple(keys)))


def describe(wire: Wire, groups: list[str], version: int = 5):
    m = module(15, version)
    body = make(m.DescribeGroupsRequest, groups=tuple(groups), include_authorized_operations=True)
    return {g.group_id: g for g in wire.request(15, version, body).groups}


def list_groups(wire: Wire, states: tuple[str, ...] = (), version: int = 5) -> dict[str, str]:
    m = module(16, version)
    body = make(m.ListGroupsRequest, states_filter=states, types_filter=())
    response = wire.request(16, version, body)
    assert response.error_code == ErrorCode.none
    return {g.group_id: getattr(g, "group_state", "") for g in response.groups}


def delete_groups(wire: Wire, groups: list[str], version: int = 2) -> dict[str, int]:
    m = module(42, version)
    response = wire.request(42, version, make(m.DeleteGroupsRequest, groups_names=tuple(groups)))
    return {r.group_id: r.error_code for r in response.results}


def stable_member(wire: Wire, group: str, **kwargs):
    """Join alone, sync an assignment; returns (member id, generation)."""
    joined = join_member(wire, group, **kwargs)
    assert joined.error_code == ErrorCode.none
    synced = sync(wire, 5, group, joined.generation_id, joined.member_id, {joined.member_id: b"assigned"})
    assert synced.error_code == ErrorCode.none
    return joined.member_id, joined.generation_id


def test_find_coordinator_names_this_broker_for_groups_and_transactions(broker: Broker) -> None:
    with Wire(broker.bootstrap_servers) as wire:
        for version in (0, 3):
            found = find_coordinator(wire, version, ["g"])
            assert (found.error_code, found.node_id, found.port) == (ErrorCode.none, 1, broker.port)
        batch = find_coordinator(wire, 6, ["a", "b"])
        assert [(c.key, c.error_code, c.port) for c in batch.coordinators] == [
            ("a", ErrorCode.none, broker.port), ("b", ErrorCode.none, broker.port)]
        txn = find_coordinator(wire, 4, ["tx"], key_type=1)
        assert [(c.key, c.error_code, c.port) for c in txn.coordinators] == [("tx", ErrorCode.none, broker.port)]


def test_member_id_required_round_trip_and_protocol_echo(broker: Broker) -> None:
    group = group_name()
    with Wire(broker.bootstrap_servers) as wire:
        first = join(wire, 9, group)
        assert first.error_code == ErrorCode.member_id_required
        assert first.member_id.startswith("wire-test-")
        joined = join(wire, 9, group, member_id=first.member_id)
        assert joined.error_code == ErrorCode.none
        assert (joined.generation_id, joined.leader, joined.member_id) == (1, first.member_id, first.member_id)
        assert (joined.protocol_type, joined.protocol_name) == ("consumer", "range")
        assert [(m.member_id, m.metadata) for m in joined.members] == [(first.member_id, b"\x00\x01meta")]
        synced = sync(wire, 5, group, 1, first.member_id, {}, protocol_type="consumer", protocol_name="range")
        # an empty assignment list is valid: the member gets empty bytes
        assert (synced.error_code, synced.assignment, synced.protocol_name) == (ErrorCode.none, b"", "range")
        assert describe(wire, [group])[group].group_state == "Stable"


def test_old_join_versions_need_no_member_id_round_trip(broker: Broker) -> None:
    group = group_name()
    with Wire(broker.bootstrap_servers) as wire:
        joined = join(wire, 3, group)
        assert joined.error_code == ErrorCode.none and joined.generation_id == 1
        assert sync(wire, 0, group, 1, joined.member_id, {joined.member_id: b"x"}).assignment == b"x"


def test_wrong_generation_and_unknown_member_are_fenced(broker: Broker) -> None:
    group = group_name()
    with Wire(broker.bootstrap_servers) as wire:
        member, generation = stable_member(wire, group)
        assert heartbeat(wire, group, generation + 1, member).error_code == ErrorCode.illegal_generation
        assert heartbeat(wire, group, generation, "nobody").error_code == ErrorCode.unknown_member_id
        assert heartbeat(wire, "no-such-group", 1, member).error_code == ErrorCode.unknown_member_id
        assert sync(wire, 5, group, generation - 1, member).error_code == ErrorCode.illegal_generation
        assert sync(wire, 5, "no-such-group", 1, member).error_code == ErrorCode.unknown_member_id
        unknown = join(wire, 9, "no-such-group", member_id="made-up")
        assert unknown.error_code == ErrorCode.unknown_member_id
        # the group is still usable
        assert heartbeat(wire, group, generation, member).error_code == ErrorCode.none
        assert sync(wire, 5, group, generation, member).assignment == b"assigned"


def test_inconsistent_protocols_and_bad_session_timeout(broker: Broker) -> None:
    group = group_name()
    with Wire(broker.bootstrap_servers) as a, Wire(broker.bootstrap_servers) as b:
        member, generation = stable_member(a, group)
        other = join(b, 5, group, protocols=(("roundrobin", b""),))
        assert other.error_code == ErrorCode.inconsistent_group_protocol
        other = join(b, 5, group, protocol_type="connect")
        assert other.error_code == ErrorCode.inconsistent_group_protocol
        assert join(b, 5, group, session_ms=10).error_code == ErrorCode.invalid_session_timeout
        assert join(b, 5, "", session_ms=3000).error_code == ErrorCode.invalid_group_id
        assert heartbeat(a, group, generation, member).error_code == ErrorCode.none


def test_second_member_triggers_rebalance_and_leader_assigns(broker: Broker) -> None:
    group = group_name()
    with Wire(broker.bootstrap_servers) as a, Wire(broker.bootstrap_servers) as b:
        leader, generation = stable_member(a, group)
        second_id = join(b, 9, group).member_id  # MEMBER_ID_REQUIRED
        b.send(11, 9, join_request(9, group, member_id=second_id))
        # the existing member learns of the rebalance from its heartbeat and rejoins
        assert heartbeat(a, group, generation, leader).error_code == ErrorCode.rebalance_in_progress
        rejoined = join(a, 9, group, member_id=leader)
        _, joined_b = b.receive(11, 9)
        assert rejoined.generation_id == joined_b.generation_id == generation + 1
        assert rejoined.leader == joined_b.leader == leader
        assert len(rejoined.members) == 2 and joined_b.members == ()
        b.send(14, 5, make(module(14, 5).SyncGroupRequest, group_id=group, generation_id=generation + 1,
                           member_id=second_id, group_instance_id=None, protocol_type="consumer",
                           protocol_name="range", assignments=()))
        mine = sync(a, 5, group, generation + 1, leader, {leader: b"p0", second_id: b"p1"})
        _, theirs = b.receive(14, 5)
        assert (mine.assignment, theirs.assignment) == (b"p0", b"p1")
        # the leader leaves: the other member becomes leader at the next generation
        assert leave(a, group, [(leader, None)]).members[0].error_code == ErrorCode.none
        assert heartbeat(b, group, generation + 1, second_id).error_code == ErrorCode.rebalance_in_progress
        again = join(b, 9, group, member_id=second_id)
        assert (again.generation_id, again.leader) == (generation + 2, second_id)


def test_session_timeout_removes_a_silent_member(broker: Broker) -> None:
    group = group_name()
    with Wire(broker.bootstrap_servers) as wire:
        member, generation = stable_member(wire, group, session_ms=600)
        groups = describe(wire, [group])
        assert [m.member_id for m in groups[group].members] == [member]
        # no heartbeats: the member is gone after its session timeout
        wait_for(lambda: describe(wire, [group])[group].group_state == "Empty", 5, "the group to become Empty")
        assert heartbeat(wire, group, generation, member).error_code == ErrorCode.unknown_member_id


def test_static_member_fencing_and_rejoin_without_rebalance(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    group = group_name()
    with Wire(broker.bootstrap_servers) as wire:
        joined = join(wire, 9, group, instance_id="instance-1")  # static members skip MEMBER_ID_REQUIRED
        assert joined.error_code == ErrorCode.none
        first_id, generation = joined.member_id, joined.generation_id
        sync(wire, 5, group, generation, first_id, {first_id: b"mine"}, instance_id="instance-1")
        # the same instance restarts: new member id, same generation, same assignment, no rebalance
        again = join(wire, 9, group, instance_id="instance-1")
        assert again.error_code == ErrorCode.none and again.member_id != first_id
        assert again.generation_id == generation and again.skip_assignment
        assert sync(wire, 5, group, generation, again.member_id, instance_id="instance-1").assignment == b"mine"
        assert describe(wire, [group])[group].group_state == "Stable"
        # the old incarnation is fenced
        assert heartbeat(wire, group, generation, first_id, instance_id="instance-1").error_code == ErrorCode.fenced_instance_id
        assert join(wire, 9, group, member_id=first_id, instance_id="instance-1").error_code == ErrorCode.fenced_instance_id
        fenced = commit(wire, 8, group, {(topic_name, 0): (1, None)}, generation, first_id, "instance-1")
        assert fenced == {(topic_name, 0): ErrorCode.fenced_instance_id}
        # admin removal by instance id (LeaveGroup v3+ with an empty member id)
        assert leave(wire, group, [("", "instance-1")]).members[0].error_code == ErrorCode.none
        assert describe(wire, [group])[group].group_state == "Empty"


def test_commits_unknown_topics_metadata_and_generations(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 2)
    group = group_name()
    with Wire(broker.bootstrap_servers) as wire:
        # a simple consumer (no membership, generation -1) may commit
        errors = commit(wire, 8, group, {
            (topic_name, 0): (5, "meta"),
            (topic_name, 7): (1, None),
            ("no-such-topic", 0): (1, None),
            (topic_name, 1): (9, "x" * 5000),
        })
        assert errors == {
            (topic_name, 0): ErrorCode.none,
            (topic_name, 7): ErrorCode.unknown_topic_or_partition,
            ("no-such-topic", 0): ErrorCode.unknown_topic_or_partition,
            (topic_name, 1): ErrorCode.offset_metadata_too_large,
        }
        assert fetch_offsets(wire, group, {topic_name: [0, 1], "no-such-topic": [0]}) == {
            (topic_name, 0): 5, (topic_name, 1): -1, ("no-such-topic", 0): -1}
        # an unknown group with a generation: ILLEGAL_GENERATION before v9, GROUP_ID_NOT_FOUND from v9
        other = group_name()
        assert commit(wire, 8, other, {(topic_name, 0): (1, None)}, 3, "m")[(topic_name, 0)] == ErrorCode.illegal_generation
        assert commit(wire, 9, other, {(topic_name, 0): (1, None)}, 3, "m")[(topic_name, 0)] == ErrorCode.group_id_not_found
        # a member with the wrong generation is fenced, then commits with the right one
        live = group_name()
        member, generation = stable_member(wire, live)
        assert commit(wire, 9, live, {(topic_name, 0): (2, None)}, generation + 5, member)[(topic_name, 0)] == ErrorCode.illegal_generation
        assert commit(wire, 9, live, {(topic_name, 0): (2, None)}, generation, "stranger")[(topic_name, 0)] == ErrorCode.unknown_member_id
        assert commit(wire, 9, live, {(topic_name, 0): (2, None)}, generation, member)[(topic_name, 0)] == ErrorCode.none
        assert fetch_offsets(wire, live, {topic_name: [0]}, version=1) == {(topic_name, 0): 2}


def test_offset_fetch_all_topics_across_streams_and_many_groups(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    stream = f"/apps/groups{uuid.uuid4().hex[:6]}"
    broker.call(broker.server.store.create_stream(stream))
    other_topic = f"{stream}:metrics"
    create_topic(broker.bootstrap_servers, other_topic, 2)
    group = group_name()
    with Wire(broker.bootstrap_servers) as wire:
        errors = commit(wire, 9, group, {(topic_name, 0): (3, None), (other_topic, 1): (7, None)})
        assert set(errors.values()) == {ErrorCode.none}
        alias = stream[1:].replace("/", ".") + "..metrics"
        assert fetch_offsets(wire, group, {alias: [1]}) == {(alias, 1): 7}
        assert fetch_offsets(wire, group, None) == {(topic_name, 0): 3, (other_topic, 1): 7}
        m = module(9, 8)
        body = make(m.OffsetFetchRequest, require_stable=False, groups=(
            make(m.OffsetFetchRequestGroup, group_id=group, topics=None),
            make(m.OffsetFetchRequestGroup, group_id="never-committed",
                 topics=(make(m.OffsetFetchRequestTopics, name=topic_name, partition_indexes=(0,)),)),
        ))
        response = wire.request(9, 8, body)
        found = {
            (g.group_id, t.name, p.partition_index): p.committed_offset
            for g in response.groups for t in g.topics for p in t.partitions
        }
        assert found == {(group, topic_name, 0): 3, (group, other_topic, 1): 7, ("never-committed", topic_name, 0): -1}


def test_list_describe_and_delete_groups(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    active, offsets_only = group_name(), group_name()
    with Wire(broker.bootstrap_servers) as wire:
        member, generation = stable_member(wire, active)
        commit(wire, 9, offsets_only, {(topic_name, 0): (1, None)})
        listed = list_groups(wire)
        assert listed[active] == "Stable" and listed[offsets_only] == "Empty"
        assert set(list_groups(wire, ("stable",))) >= {active}
        assert offsets_only not in list_groups(wire, ("Stable",))
        described = describe(wire, [active, "never-existed"])
        group = described[active]
        assert (group.error_code, group.protocol_type, group.protocol_data) == (ErrorCode.none, "consumer", "range")
        assert [(m.member_metadata, m.member_assignment, m.client_host) for m in group.members] == [
            (b"\x00\x01meta", b"assigned", "/127.0.0.1")]
        assert (described["never-existed"].error_code, described["never-existed"].group_state) == (ErrorCode.none, "Dead")
        assert delete_groups(wire, [active, offsets_only, "never-existed"]) == {
            active: ErrorCode.non_empty_group, offsets_only: ErrorCode.none, "never-existed": ErrorCode.group_id_not_found}
        assert fetch_offsets(wire, offsets_only, {topic_name: [0]}) == {(topic_name, 0): -1}
        assert offsets_only not in list_groups(wire)
        leave(wire, active, [(member, None)], version=1)
        assert delete_groups(wire, [active]) == {active: ErrorCode.none}


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocolSubscription v0."""
    out = b"\x00\x00" + len(topics).to_bytes(4, "big")
    for topic in topics:
        out += len(topic).to_bytes(2, "big") + topic.encode()
    return out + b"\xff\xff\xff\xff"


def test_offset_delete_keeps_subscribed_topics(broker: Broker, topic_name: str) -> None:
    other = topic_name + "-other"
    create_topic(broker.bootstrap_servers, topic_name, 1)
    create_topic(broker.bootstrap_servers, other, 1)
    group = group_name()
    m = module(47, 0)

    def offset_delete(wire: Wire, group_id: str, topics: list[str]):
        body = make(m.OffsetDeleteRequest, group_id=group_id, topics=tuple(
            make(m.OffsetDeleteRequestTopic, name=t, partitions=(make(m.OffsetDeleteRequestPartition, partition_index=0),))
            for t in topics))
        return wire.request(47, 0, body)

    with Wire(broker.bootstrap_servers) as wire:
        member, generation = stable_member(wire, group, protocols=(("range", subscription(topic_name)),))
        commit(wire, 9, group, {(topic_name, 0): (4, None), (other, 0): (6, None)}, generation, member)
        response = offset_delete(wire, group, [topic_name, other, "missing-topic"])
        errors = {t.name: t.partitions[0].error_code for t in response.topics}
        assert errors == {topic_name: ErrorCode.group_subscribed_to_topic, other: ErrorCode.none,
                          "missing-topic": ErrorCode.unknown_topic_or_partition}
        assert fetch_offsets(wire, group, {topic_name: [0], other: [0]}) == {(topic_name, 0): 4, (other, 0): -1}
        assert offset_delete(wire, "no-such-group", [topic_name]).error_code == ErrorCode.group_id_not_found


def test_empty_groups_offsets_expire_after_retention(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    group = group_name()
    coordinator = broker.server.cluster.groups
    with Wire(broker.bootstrap_servers) as wire:
        commit(wire, 9, group, {(topic_name, 0): (8, None)})
        now = coordinator._clock()
        broker.call(coordinator.expire_offsets(now + 60_000))  # well inside 7 days: kept
        assert fetch_offsets(wire, group, {topic_name: [0]}) == {(topic_name, 0): 8}
        retention_ms = broker.config.offsets_retention_minutes * 60_000
        assert broker.call(coordinator.expire_offsets(now + retention_ms + 1)) >= 1
        assert fetch_offsets(wire, group, {topic_name: [0]}) == {(topic_name, 0): -1}
        assert group not in list_groups(wire)


def test_rebalance_waits_for_pending_member_then_times_out(broker: Broker) -> None:
    """A MEMBER_ID_REQUIRED member that never comes back stops blocking after its session timeout."""
    group = group_name()
    with Wire(broker.bootstrap_servers) as a, Wire(broker.bootstrap_servers) as b:
        member, generation = stable_member(a, group, session_ms=3000)
        pending = join(b, 9, group, session_ms=800)
        assert pending.error_code == ErrorCode.member_id_required
        # the leader rejoining starts a rebalance; the pending member holds it up to its session timeout
        rejoined = join(a, 9, group, member_id=member, session_ms=3000)
        assert rejoined.error_code == ErrorCode.none and rejoined.generation_id == generation + 1
        assert [m.member_id for m in rejoined.members] == [member]


def test_member_that_does_not_rejoin_is_dropped_after_the_rebalance_timeout(broker: Broker) -> None:
    group = group_name()
    with Wire(broker.bootstrap_servers) as a, Wire(broker.bootstrap_servers) as b:
        leader = join(a, 9, group).member_id
        a.send(11, 9, join_request(9, group, member_id=leader, rebalance_ms=1000))
        other = join(b, 9, group).member_id
        joined_b = join(b, 9, group, member_id=other, rebalance_ms=1000)
        _, joined_a = a.receive(11, 9)
        generation = joined_a.generation_id
        assert joined_b.generation_id == generation and len(joined_a.members) == 2
        sync_body = make(module(14, 5).SyncGroupRequest, group_id=group, generation_id=generation, member_id=other,
                         group_instance_id=None, protocol_type=None, protocol_name=None, assignments=())
        b.send(14, 5, sync_body)
        sync(a, 5, group, generation, leader, {leader: b"a", other: b"b"})
        assert b.receive(14, 5)[1].assignment == b"b"
        # the leader rejoins (a rebalance); the other member stays silent and is dropped after 1 s
        rejoined = join(a, 9, group, member_id=leader, rebalance_ms=1000)
        assert rejoined.generation_id == generation + 1
        assert [m.member_id for m in rejoined.members] == [leader]
        assert heartbeat(b, group, generation, other).error_code == ErrorCode.unknown_member_id


def test_member_that_never_syncs_is_dropped_and_commits_wait_for_sync(broker: Broker, topic_name: str) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    group = group_name()
    with Wire(broker.bootstrap_servers) as a, Wire(broker.bootstrap_servers) as b:
        leader = join(a, 9, group).member_id
        a.send(11, 9, join_request(9, group, member_id=leader, rebalance_ms=1000))
        other = join(b, 9, group).member_id
        joined_b = join(b, 9, group, member_id=other, rebalance_ms=1000)
        generation = a.receive(11, 9)[1].generation_id
        # between JoinGroup and the leader's SyncGroup, commits get REBALANCE_IN_PROGRESS
        early = commit(b, 9, group, {(topic_name, 0): (1, None)}, generation, other)
        assert early == {(topic_name, 0): ErrorCode.rebalance_in_progress}
        sync(a, 5, group, generation, leader, {leader: b"a", other: b"b"})
        # b never sends SyncGroup: after the rebalance timeout it is removed and the group rebalances
        wait_for(lambda: heartbeat(a, group, generation, leader).error_code == ErrorCode.rebalance_in_progress,
                 5, "a rebalance after the pending SyncGroup expired")
        assert joined_b.generation_id == generation
        assert heartbeat(b, group, generation, other).error_code == ErrorCode.unknown_member_id


def test_group_max_size_refuses_extra_members() -> None:
    with Broker(group_initial_rebalance_delay_ms=0, group_min_session_timeout_ms=500, group_max_size=1) as small:
        group = group_name()
        with Wire(small.bootstrap_servers) as a, Wire(small.bootstrap_servers) as b:
            member, generation = stable_member(a, group)
            refused = join_member(b, group)
            assert refused.error_code == ErrorCode.group_max_size_reached
            assert heartbeat(a, group, generation, member).error_code == ErrorCode.none


def test_expiry_sweep_runs_on_its_interval(topic_name: str) -> None:
    settings = {"offsets_retention_minutes": 0, "offsets_retention_check_interval_ms": 100}
    with Broker(group_initial_rebalance_delay_ms=0, **settings) as sweeping:
        create_topic(sweeping.bootstrap_servers, topic_name, 1)
        with Wire(sweeping.bootstrap_servers) as wire:
            assert commit(wire, 9, "short-lived", {(topic_name, 0): (3, None)}) == {(topic_name, 0): ErrorCode.none}
            wait_for(lambda: fetch_offsets(wire, "short-lived", {topic_name: [0]}) == {(topic_name, 0): -1},
                     5, "the sweep to expire the offset")


def test_describe_groups_v6_names_a_missing_group_not_found(broker: Broker) -> None:
    """DescribeGroups v6 (KIP-1043): a live group as before; no group -> GROUP_ID_NOT_FOUND with Kafka's words.
    Older versions keep describing it as an empty Dead group."""
    live, missing = group_name(), group_name()
    with Wire(broker.bootstrap_servers) as wire:
        stable_member(wire, live)
        seen = describe(wire, [live, missing], version=6)
        assert (seen[live].error_code, seen[live].error_message, seen[live].group_state) == (ErrorCode.none, None, "Stable")
        assert len(seen[live].members) == 1
        assert (seen[missing].error_code, seen[missing].error_message, seen[missing].group_state) == (
            ErrorCode.group_id_not_found, f"Group {missing} not found.", "Dead")
        old = describe(wire, [missing], version=5)[missing]
        assert (old.error_code, old.group_state, old.members) == (ErrorCode.none, "Dead", ())
