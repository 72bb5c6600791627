"""Every advertised version of every group API round-trips with a real member's life cycle."""

from __future__ import annotations

import uuid

import pytest
from kafkacompat.protocol.messages import make
from kio.schema.errors import ErrorCode

from kafkacompat.handlers import SUPPORTED
from kafkacompat.testing import Broker
from tests.groups.helpers import commit, create_topic, heartbeat, join_member, leave, module, sync
from tests.wire import Wire

GROUP_APIS = {8: "OffsetCommit", 9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
              13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups", 42: "DeleteGroups",
              47: "OffsetDelete"}


def test_advertised_ranges_match_the_design() -> None:
    assert {key: SUPPORTED[key] for key in GROUP_APIS} == {
        8: (2, 9), 9: (1, 9), 10: (0, 6), 11: (0, 9), 12: (0, 4), 13: (0, 5),
        14: (0, 5), 15: (0, 6), 16: (0, 5), 42: (0, 2), 47: (0, 0)}


def fetch_committed(wire: Wire, version: int, group: str, topic: str) -> int:
    m = module(9, version)
    if version >= 8:
        body = make(m.OffsetFetchRequest, require_stable=False, groups=(make(
            m.OffsetFetchRequestGroup, group_id=group,
            topics=(make(m.OffsetFetchRequestTopics, name=topic, partition_indexes=(0,)),)),))
        return wire.request(9, version, body).groups[0].topics[0].partitions[0].committed_offset
    body = make(m.OffsetFetchRequest, group_id=group, require_stable=False,
                topics=(make(m.OffsetFetchRequestTopic, name=topic, partition_indexes=(0,)),))
    return wire.request(9, version, body).topics[0].partitions[0].committed_offset


def version_of(api_key: int, step: int) -> int:
    low, high = SUPPORTED[api_key]
    return min(low + step, high)


@pytest.mark.parametrize("step", range(10))
def test_member_life_cycle_at_each_version(broker: Broker, topic_name: str, step: int) -> None:
    create_topic(broker.bootstrap_servers, topic_name, 1)
    group = f"v-{uuid.uuid4().hex[:8]}"
    with Wire(broker.bootstrap_servers) as wire:
        fc = version_of(10, step)
        m = module(10, fc)
        found = wire.request(10, fc, make(m.FindCoordinatorRequest, key=group, key_type=0, coordinator_keys=(group,)))
        port = found.port if fc < 4 else found.coordinators[0].port
        assert port == broker.port

        joined = join_member(wire, group, version=version_of(11, step))
        assert joined.error_code == ErrorCode.none and joined.generation_id == 1
        member = joined.member_id
        synced = sync(wire, version_of(14, step), group, 1, member, {member: b"\x00\x01"})
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"\x00\x01")
        assert heartbeat(wire, group, 1, member, version=version_of(12, step)).error_code == ErrorCode.none

        errors = commit(wire, version_of(8, step), group, {(topic_name, 0): (42, "m")}, 1, member)
        assert errors == {(topic_name, 0): ErrorCode.none}
        assert fetch_committed(wire, version_of(9, step), group, topic_name) == 42

        dv = version_of(15, step)
        m = module(15, dv)
        described = wire.request(15, dv, make(m.DescribeGroupsRequest, groups=(group,),
                                              include_authorized_operations=False)).groups[0]
        assert (described.group_state, described.protocol_data) == ("Stable", "range")
        assert described.members[0].member_assignment == b"\x00\x01"

        lv = version_of(16, step)
        m = module(16, lv)
        listed = wire.request(16, lv, make(m.ListGroupsRequest, states_filter=(), types_filter=()))
        assert group in {g.group_id for g in listed.groups}

        left = leave(wire, group, [(member, None)], version=version_of(13, step))
        assert left.error_code == ErrorCode.none

        dg = version_of(42, step)
        m = module(42, dg)
        deleted = wire.request(42, dg, make(m.DeleteGroupsRequest, groups_names=(group,)))
        assert deleted.results[0].error_code == ErrorCode.none
        assert fetch_committed(wire, version_of(9, step), group, topic_name) == -1
