"""DescribeGroups: state, protocol and members; metadata and assignments only when Stable (as Kafka).

From v6 (KIP-1043) an id that names no classic group is answered with
GROUP_ID_NOT_FOUND and Kafka's message instead of an empty Dead group.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation, ResourceType
from ..services import Groups, Placement, Request, Security
from .common import NO_THROTTLE, UNSET_OPERATIONS, ErrorCode, make, schema_of
from .registry import Api, reads

# DescribeGroups v0-6
API = Api(15, (0, 6), reads())


class Reaches(Groups, Placement, Security, Protocol):
    """What of the broker this module reaches."""

# READ (3), DELETE (6), DESCRIBE (8): the operations Kafka lists for a group
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    operations = GROUP_OPERATIONS if getattr(request, "include_authorized_operations", False) else UNSET_OPERATIONS
    groups = []
    authorizer = ctx.cluster.authorizer
    for group_id in request.groups:
        if not authorizer.group(ctx, Operation.DESCRIBE, group_id):
            groups.append(make(m.DescribedGroup, error_code=ErrorCode.group_authorization_failed, group_id=group_id,
                               group_state="", protocol_type="", protocol_data="", members=(),
                               authorized_operations=UNSET_OPERATIONS))
            continue
        refused = await ctx.cluster.coordinator_error(group_id)  # only its coordinator holds its state
        if refused != ErrorCode.none:
            groups.append(make(m.DescribedGroup, error_code=refused, group_id=group_id, group_state="",
                               protocol_type="", protocol_data="", members=(), authorized_operations=UNSET_OPERATIONS))
            continue
        missing = ctx.cluster.groups.not_found(group_id) if ctx.version >= 6 else None
        if missing is not None:
            groups.append(make(
                m.DescribedGroup, error_code=ErrorCode.group_id_not_found, error_message=missing,
                group_id=group_id, group_state="Dead", protocol_type="", protocol_data="", members=(),
                authorized_operations=operations,
            ))
            continue
        summary = ctx.cluster.groups.describe(group_id)
        members = tuple(
            make(
                m.DescribedGroupMember,
                member_id=member.member_id,
                group_instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=member.metadata,
                member_assignment=member.assignment,
            )
            for member in summary.members
        )
        groups.append(
            make(
                m.DescribedGroup,
                error_code=ErrorCode.none,
                error_message=None,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol_data,
                members=members,
                authorized_operations=operations if operations == UNSET_OPERATIONS else
                authorizer.operations(ctx, ResourceType.GROUP, group_id, operations),
            )
        )
    return make(m.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
