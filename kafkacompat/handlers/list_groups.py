"""ListGroups: every group this coordinator knows, including groups that only have offsets."""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Groups, Request, Security
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads

# ListGroups v0-5
API = Api(16, (0, 5), reads())


class Reaches(Groups, Security, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    states, types = getattr(request, "states_filter", ()), getattr(request, "types_filter", ())
    found = ctx.cluster.groups.list_groups(states, types) + ctx.cluster.shares.list_groups(states, types)
    authorizer = ctx.cluster.authorizer
    if authorizer.enabled and not authorizer.cluster(ctx, Operation.DESCRIBE, log_denied=False):
        found = [g for g in found if authorizer.group(ctx, Operation.DESCRIBE, g[0], log_denied=False)]
    groups = tuple(
        make(m.ListedGroup, group_id=group_id, protocol_type=protocol_type, group_state=state, group_type=group_type)
        for group_id, protocol_type, state, group_type in sorted(found)
    )
    return make(m.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups)
