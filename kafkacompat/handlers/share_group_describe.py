"""ShareGroupDescribe (KIP-932): a share group's epochs, assignor and members with their assignments.

A classic or consumer group answers GROUP_ID_NOT_FOUND ("is not a share
group"), as Kafka does. A share group known only by its stored state (after
a restart, before any member came back) is Empty.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..broker.features import SHARE_VERSION
from ..security.acls import Operation, ResourceType
from ..services import Groups, Placement, Request, Security, Settings, Topics
from ..shares.share_group import ASSIGNOR
from .common import NO_THROTTLE, UNSET_OPERATIONS, ErrorCode, make, schema_of
from .describe_groups import GROUP_OPERATIONS
from .group_common import protocol_off
from .registry import Api, reads

# ShareGroupDescribe v1
API = Api(77, (1, 1), reads())


class Reaches(Groups, Placement, Security, Settings, Topics, Protocol):
    """What of the broker this module reaches."""


def _assignment(ctx: Request[Reaches], m: Any, assignment: Any) -> Any:
    named = []
    for topic_id, parts in assignment.items():
        info = ctx.cluster.by_id(topic_id)
        if info is not None:
            named.append((ctx.cluster.display_name(info, ctx.client_software_name), topic_id, parts))
    return make(m.Assignment, topic_partitions=tuple(
        make(m.TopicPartitions, topic_id=topic_id, topic_name=name, partitions=tuple(sorted(parts)))
        for name, topic_id, parts in sorted(named)))


def _refused(m: Any, group_id: str, error: ErrorCode, message: str | None) -> Any:
    return make(m.DescribedGroup, error_code=error, error_message=message, group_id=group_id, group_state="",
                group_epoch=-1, assignment_epoch=-1, assignor_name="", members=(),
                authorized_operations=UNSET_OPERATIONS)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    shares = ctx.cluster.shares
    operations = GROUP_OPERATIONS if request.include_authorized_operations else UNSET_OPERATIONS
    if ctx.cluster.features.level(SHARE_VERSION) < 1:  # share groups off
        return protocol_off(m, m.ShareGroupDescribeResponse, request.group_ids)
    groups = []
    for group_id in request.group_ids:
        if not ctx.cluster.authorizer.group(ctx, Operation.DESCRIBE, group_id):
            groups.append(_refused(m, group_id, ErrorCode.group_authorization_failed, None))
            continue
        coordinator = await ctx.cluster.coordinator_error(group_id)  # membership lives on the group's coordinator
        if coordinator is not ErrorCode.none:
            groups.append(_refused(m, group_id, coordinator, None))
            continue
        group = shares.groups.groups.get(group_id)
        if group is None and group_id not in shares.known_groups():
            message = (f"Group {group_id} is not a share group." if shares.is_other_group(group_id)
                       else f"Group {group_id} not found.")
            groups.append(_refused(m, group_id, ErrorCode.group_id_not_found, message))
            continue
        members = () if group is None else tuple(
            make(m.Member, member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.member_epoch,
                 client_id=member.client_id, client_host=member.client_host,
                 subscribed_topic_names=member.subscribed_topic_names,
                 assignment=_assignment(ctx, m, member.assigned))
            for member in group.members.values())
        groups.append(make(
            m.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
            group_state=group.state if group is not None else "Empty",
            group_epoch=group.group_epoch if group is not None else 0,
            assignment_epoch=group.assignment_epoch if group is not None else 0,
            assignor_name=ASSIGNOR, members=members,
            authorized_operations=operations if operations == UNSET_OPERATIONS else
            ctx.cluster.authorizer.operations(ctx, ResourceType.GROUP, group_id, operations),
        ))
    return make(m.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
