"""ListGroups v0-5: every group this broker coordinates; state (v4+) and type (v5+) filters.

Filters compare case-insensitively, as Kafka's do. All groups here use the
classic protocol.
"""

from __future__ import annotations

from typing import Any

from .common import NO_THROTTLE, ErrorCode, make, schema_of

GROUP_TYPE = "classic"


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    states = {s.lower() for s in getattr(request, "states_filter", ())}
    types = {t.lower() for t in getattr(request, "types_filter", ())}
    listed = []
    for group in sorted(ctx.cluster.groups.list_groups(), key=lambda g: g.group_id):
        if states and group.state.value.lower() not in states:
            continue
        if types and GROUP_TYPE not in types:
            continue
        listed.append(
            make(
                m.ListedGroup, group_id=group.group_id, protocol_type=group.protocol_type or "",
                group_state=group.state.value, group_type=GROUP_TYPE,
            )
        )
    return make(m.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=tuple(listed))
