"""ListGroups: every group this coordinator knows, including groups that only have offsets."""

from __future__ import annotations

from typing import Any

from .common import NO_THROTTLE, ErrorCode, make, schema_of


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    found = ctx.cluster.groups.list_groups(
        getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
    )
    groups = tuple(
        make(m.ListedGroup, group_id=group_id, protocol_type=protocol_type, group_state=state, group_type=group_type)
        for group_id, protocol_type, state, group_type in sorted(found)
    )
    return make(m.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups)
