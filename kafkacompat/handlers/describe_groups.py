"""DescribeGroups v0-5: state, protocol and members (metadata and assignment once Stable).

An unknown group is described as Dead with no error, as Kafka does before v6.
"""

from __future__ import annotations

from typing import Any

from ..groups.state import describe_state
from .common import NO_THROTTLE, ErrorCode, make, schema_of

# READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS: what Kafka allows on a group
GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
UNSET_OPERATIONS = -(2**31)


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    coordinator = ctx.cluster.groups
    include_ops = getattr(request, "include_authorized_operations", False)
    described = []
    for group_id in request.groups:
        view = describe_state(coordinator.group(group_id))
        members = tuple(
            make(
                m.DescribedGroupMember, member_id=member_id, group_instance_id=instance_id,
                client_id=client_id, client_host=client_host, member_metadata=metadata,
                member_assignment=assignment,
            )
            for member_id, instance_id, client_id, client_host, metadata, assignment in view.members
        )
        described.append(
            make(
                m.DescribedGroup, error_code=ErrorCode.none, group_id=group_id, group_state=view.state,
                protocol_type=view.protocol_type, protocol_data=view.protocol, members=members,
                authorized_operations=GROUP_OPERATIONS if include_ops else UNSET_OPERATIONS,
            )
        )
    return make(m.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(described))
