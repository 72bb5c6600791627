"""A group's stored record gives back the group: what the next coordinator loads is what was written."""

from __future__ import annotations

import json
import uuid

from kafkacompat.groups import durable
from kafkacompat.groups.consumer_group import ClassicMembership, ConsumerGroup, ConsumerMember, MemberState
from kafkacompat.groups.group import Group, GroupState, Member
from kafkacompat.groups.streams_group import ACTIVE, STANDBY, StreamsGroup, StreamsMember
from kafkacompat.groups.streams_group import MemberState as StreamsMemberState
from kafkacompat.groups.streams_topology import InternalTopic, Subtopology, Topology

T1, T2 = uuid.UUID(int=1), uuid.UUID(int=2)


def stable_classic_group() -> Group:
    group = Group("g", 1_000)
    for name, assignment in (("a", b"\x00\x01A"), ("b", b"\x00\x01B")):
        group.add(Member(member_id=f"{name}-1", instance_id="static-b" if name == "b" else None, client_id=name,
                         client_host="/127.0.0.1", session_timeout_ms=10_000, rebalance_timeout_ms=30_000,
                         protocol_type="consumer", protocols=[("range", b"\x00\x03sub"), ("roundrobin", b"")],
                         assignment=assignment))
    group.generation, group.protocol_name, group.leader_id = 7, "range", "b-1"
    group.state = GroupState.STABLE
    return group


def test_a_stable_classic_group_comes_back_with_its_generation_leader_and_assignments() -> None:
    record = durable.classic_record(stable_classic_group())
    assert record is not None
    loaded = durable.classic_group("g", json.loads(json.dumps(record)))  # as the store hands it back
    assert (loaded.state, loaded.generation, loaded.protocol_type, loaded.protocol_name, loaded.leader_id) == (
        GroupState.STABLE, 7, "consumer", "range", "b-1")
    assert [(m.member_id, m.assignment, m.protocols) for m in loaded.members.values()] == [
        ("a-1", b"\x00\x01A", [("range", b"\x00\x03sub"), ("roundrobin", b"")]),
        ("b-1", b"\x00\x01B", [("range", b"\x00\x03sub"), ("roundrobin", b"")])]
    assert loaded.static_members == {"static-b": "b-1"}
    assert durable.classic_record(loaded) == record


def test_an_empty_classic_group_keeps_its_generation_and_a_group_of_offsets_only_is_not_stored() -> None:
    group = Group("g", 5)
    group.generation, group.protocol_type = 3, "consumer"
    record = durable.classic_record(group)
    loaded = durable.classic_group("g", record)
    assert (loaded.state, loaded.generation, loaded.members) == (GroupState.EMPTY, 3, {})
    assert durable.classic_record(Group("offsets-only", 5)) is None


def test_a_reconciling_consumer_group_comes_back_with_epochs_targets_and_owners() -> None:
    group = ConsumerGroup("cg", 2_000)
    group.group_epoch, group.assignment_epoch = 9, 9
    group.subscribed = {T1: ("orders", 4), T2: ("/apps/s:t", 2)}
    revoking = ConsumerMember("m1", client_id="c1", rebalance_timeout_ms=45_000, subscribed_topic_names=("orders",),
                              server_assignor="uniform", member_epoch=8, previous_member_epoch=7,
                              state=MemberState.UNREVOKED_PARTITIONS, assigned={T1: frozenset({0, 1})},
                              pending_revocation={T1: frozenset({2})})
    classic = ConsumerMember("m2", instance_id="i2", subscribed_topic_regex="o.*", member_epoch=9,
                             previous_member_epoch=8, state=MemberState.UNRELEASED_PARTITIONS,
                             assigned={T2: frozenset({0, 1})},
                             classic=ClassicMembership(6_000, (("range", b"\x00\x01"),)))
    for member, target in ((revoking, {T1: frozenset({0, 1})}), (classic, {T1: frozenset({2, 3}), T2: frozenset({0, 1})})):
        group.put(member)
        group.target[member.member_id] = target
    record = durable.consumer_record(group)
    loaded = durable.consumer_group("cg", json.loads(json.dumps(record)))
    assert durable.consumer_record(loaded) == record
    assert loaded.state.value == "Reconciling"
    assert loaded.members["m1"] == revoking and loaded.members["m2"] == classic
    assert loaded.owner_of(T1, 2) == "m1"  # still being revoked: not free for m2 yet
    assert loaded.static_members == {"i2": "m2"}
    assert loaded.subscribed == group.subscribed and loaded.target == group.target


def test_a_reconciling_streams_group_comes_back_with_its_topology_epochs_tasks_and_owners() -> None:
    group = StreamsGroup("app", 3_000)
    group.group_epoch, group.assignment_epoch, group.standbys = 5, 5, 1
    group.topology = Topology(2, (
        Subtopology("0", ("lines",), ("app-words-repartition",)),
        Subtopology("1", (), (), (InternalTopic("app-words-repartition", 0, (("cleanup.policy", "delete"),)),),
                    (InternalTopic("app-counts-changelog", 0, (("cleanup.policy", "compact"),)),)),
    ))
    group.tasks = {"0": 2, "1": 2}
    revoking = StreamsMember("m1", process_id="p1", instance_id="i1", rack_id="r1", client_id="c1",
                             client_host="/127.0.0.1", rebalance_timeout_ms=30_000, topology_epoch=2,
                             user_endpoint=("localhost", 7070), client_tags=(("zone", "a"),), member_epoch=4,
                             previous_member_epoch=3, state=StreamsMemberState.UNREVOKED_TASKS,
                             assigned=frozenset({(ACTIVE, "0", 0), (ACTIVE, "1", 0)}),
                             pending_revocation=frozenset({(ACTIVE, "0", 1)}),
                             reported=frozenset({(ACTIVE, "0", 0), (ACTIVE, "0", 1), (ACTIVE, "1", 0)}))
    waiting = StreamsMember("m2", process_id="p2", member_epoch=5, previous_member_epoch=4,
                            state=StreamsMemberState.UNRELEASED_TASKS, assigned=frozenset({(STANDBY, "0", 0)}))
    targets = {"m1": frozenset({(ACTIVE, "0", 0), (ACTIVE, "1", 0), (STANDBY, "1", 1)}),
               "m2": frozenset({(ACTIVE, "0", 1), (ACTIVE, "1", 1), (STANDBY, "0", 0)})}
    for member in (revoking, waiting):
        group.put(member)
        group.target[member.member_id] = targets[member.member_id]
    record = durable.streams_record(group)
    loaded = durable.streams_group("app", json.loads(json.dumps(record)))
    assert durable.streams_record(loaded) == record
    assert loaded.state.value == "Reconciling"
    assert loaded.members == group.members and loaded.target == targets and loaded.topology == group.topology
    assert (loaded.group_epoch, loaded.assignment_epoch, loaded.standbys, loaded.tasks) == (5, 5, 1, group.tasks)
    assert loaded.active_owner[("0", 1)] == "m1"  # still being revoked: not free for m2 yet
