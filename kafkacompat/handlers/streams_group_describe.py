"""StreamsGroupDescribe (KIP-1071): a Streams group's topology, epochs and each member's tasks.

What kafka-streams-groups.sh --describe and Admin.describeStreamsGroups
show. An id of another group type answers GROUP_ID_NOT_FOUND, as Kafka does.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..groups.streams_group import ACTIVE, STANDBY, WARMUP, StreamsGroup, Tasks, by_role
from ..groups.streams_topology import InternalTopic
from ..security.acls import Operation, ResourceType
from ..services import Groups, Placement, Request, Security
from .common import NO_THROTTLE, UNSET_OPERATIONS, ErrorCode, make, schema_of
from .describe_groups import GROUP_OPERATIONS
from .registry import Api, reads

# StreamsGroupDescribe v0
API = Api(89, (0, 0), reads())


class Reaches(Groups, Placement, Security, Protocol):
    """What of the broker this module reaches."""


def _assignment(m: Any, tasks: Tasks) -> Any:
    def ids(role: str) -> tuple[Any, ...]:
        return tuple(make(m.TaskIds, subtopology_id=sub, partitions=tuple(parts))
                     for sub, parts in by_role(tasks, role).items())
    return make(m.Assignment, active_tasks=ids(ACTIVE), standby_tasks=ids(STANDBY), warmup_tasks=ids(WARMUP))


def _topic(m: Any, topic: InternalTopic, partitions: int | None) -> Any:
    return make(m.TopicInfo, name=topic.name, partitions=partitions or topic.partitions, replication_factor=0,
                topic_configs=tuple(make(m.KeyValue, key=k, value=v) for k, v in topic.configs))


def _topology(m: Any, ctx: Request[Reaches], group: StreamsGroup) -> Any:
    if group.topology is None:
        return None
    partitions_of = ctx.cluster.groups.partitions_of
    subtopologies = None
    if group.tasks:  # configured: every topic exists
        subtopologies = tuple(
            make(m.Subtopology, subtopology_id=s.subtopology_id, source_topics=s.source_topics,
                 repartition_sink_topics=s.repartition_sinks,
                 state_changelog_topics=tuple(_topic(m, t, partitions_of(t.name)) for t in s.changelogs),
                 repartition_source_topics=tuple(_topic(m, t, partitions_of(t.name)) for t in s.repartition_sources))
            for s in group.topology.subtopologies
        )
    return make(m.Topology, epoch=group.topology.epoch, subtopologies=subtopologies)


def _members(m: Any, group: StreamsGroup) -> tuple[Any, ...]:
    return tuple(
        make(m.Member, member_id=member.member_id, member_epoch=member.member_epoch, instance_id=member.instance_id,
             rack_id=member.rack_id, client_id=member.client_id, client_host=member.client_host,
             topology_epoch=member.topology_epoch, process_id=member.process_id,
             user_endpoint=(make(m.Endpoint, host=member.user_endpoint[0], port=member.user_endpoint[1])
                            if member.user_endpoint else None),
             client_tags=tuple(make(m.KeyValue, key=k, value=v) for k, v in member.client_tags),
             task_offsets=(), task_end_offsets=(),
             assignment=_assignment(m, member.assigned),
             target_assignment=_assignment(m, group.target.get(member.member_id, frozenset())),
             is_classic=False)
        for member in group.members.values()
    )


def _refused(m: Any, group_id: str, code: ErrorCode, message: str | None) -> Any:
    return make(m.DescribedGroup, error_code=code, error_message=message, group_id=group_id, group_state="",
                group_epoch=-1, assignment_epoch=-1, topology=None, members=(), authorized_operations=UNSET_OPERATIONS)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    operations = GROUP_OPERATIONS if request.include_authorized_operations else UNSET_OPERATIONS
    described = []
    for group_id in request.group_ids:
        if not ctx.cluster.authorizer.group(ctx, Operation.DESCRIBE, group_id):
            described.append(_refused(m, group_id, ErrorCode.group_authorization_failed, None))
            continue
        refused = await ctx.cluster.coordinator_error(group_id)  # only its coordinator holds its state
        if refused != ErrorCode.none:
            described.append(_refused(m, group_id, refused, None))
            continue
        group = ctx.cluster.groups.streams.groups.get(group_id)
        if group is None:
            described.append(_refused(m, group_id, ErrorCode.group_id_not_found, f"Group {group_id} not found."))
            continue
        described.append(make(
            m.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
            group_state=group.state.value, group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            topology=_topology(m, ctx, group), members=_members(m, group),
            authorized_operations=operations if operations == UNSET_OPERATIONS else
            ctx.cluster.authorizer.operations(ctx, ResourceType.GROUP, group_id, operations),
        ))
    return make(m.StreamsGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(described))
