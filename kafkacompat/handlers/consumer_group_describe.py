"""ConsumerGroupDescribe (KIP-848): epochs, assignor and each member's current and target assignment.

A classic group answers GROUP_ID_NOT_FOUND ("is not a consumer group"), as
Kafka does; Java's Admin then describes it with DescribeGroups instead.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..broker.features import GROUP_VERSION
from ..groups.assignors import Assignment
from ..security.acls import Operation, ResourceType
from ..services import Groups, Placement, Request, Security, Settings
from .common import NO_THROTTLE, UNSET_OPERATIONS, ErrorCode, make, schema_of
from .describe_groups import GROUP_OPERATIONS
from .group_common import protocol_off
from .registry import Api, reads

# ConsumerGroupDescribe v0-1
API = Api(69, (0, 1), reads())


class Reaches(Groups, Placement, Security, Settings, Protocol):
    """What of the broker this module reaches."""

CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1  # v1: -1 unknown, 0 classic member, 1 consumer member


def _assignment(m: Any, coordinator: Any, assignment: Assignment) -> Any:
    names = coordinator.topic_names(assignment)
    return make(
        m.Assignment,
        topic_partitions=tuple(
            make(m.TopicPartitions, topic_id=topic_id, topic_name=names[topic_id], partitions=tuple(sorted(parts)))
            for topic_id, parts in sorted(assignment.items(), key=lambda item: names[item[0]])
        ),
    )


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    coordinator = ctx.cluster.groups.consumer
    operations = GROUP_OPERATIONS if request.include_authorized_operations else UNSET_OPERATIONS
    groups = []
    if ctx.cluster.features.level(GROUP_VERSION) < 1:  # KIP-848 groups off
        return protocol_off(m, m.ConsumerGroupDescribeResponse, request.group_ids)
    for group_id in request.group_ids:
        refused = ErrorCode.group_authorization_failed
        if ctx.cluster.authorizer.group(ctx, Operation.DESCRIBE, group_id):
            refused = await ctx.cluster.coordinator_error(group_id)  # only its coordinator holds its state
        if refused != ErrorCode.none:
            groups.append(make(m.DescribedGroup, error_code=refused, error_message=None, group_id=group_id,
                               group_state="", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=(),
                               authorized_operations=UNSET_OPERATIONS))
            continue
        found = coordinator.describe(group_id)
        members = tuple(
            make(
                m.Member,
                member_id=d.member.member_id,
                instance_id=d.member.instance_id,
                rack_id=d.member.rack_id,
                member_epoch=d.member.member_epoch,
                client_id=d.member.client_id,
                client_host=d.member.client_host,
                subscribed_topic_names=d.member.subscribed_topic_names,
                subscribed_topic_regex=d.member.subscribed_topic_regex,
                assignment=_assignment(m, coordinator, d.member.assigned),
                target_assignment=_assignment(m, coordinator, d.target),
                member_type=CLASSIC_MEMBER_TYPE if d.member.classic is not None else CONSUMER_MEMBER_TYPE,
            )
            for d in found.members
        )
        groups.append(
            make(
                m.DescribedGroup,
                error_code=found.error,
                error_message=found.message,
                group_id=group_id,
                group_state=found.state,
                group_epoch=found.group_epoch,
                assignment_epoch=found.assignment_epoch,
                assignor_name=found.assignor,
                members=members,
                authorized_operations=operations if operations == UNSET_OPERATIONS else
                ctx.cluster.authorizer.operations(ctx, ResourceType.GROUP, group_id, operations),
            )
        )
    return make(m.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
