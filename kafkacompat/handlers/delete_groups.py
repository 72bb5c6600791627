"""DeleteGroups: only empty groups; their committed offsets go with them."""

from __future__ import annotations

from typing import Any, Protocol

from kafkacompat import storage

from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security
from .common import NO_THROTTLE, ErrorCode, coordinator_storage_error_code, make, schema_of
from .registry import Api, changes

# DeleteGroups v0-2
API = Api(42, (0, 2), changes(("groups_names",), "results"))


class Reaches(Groups, Placement, Security, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    results = []
    for group_id in request.groups_names:
        if not ctx.cluster.authorizer.group(ctx, Operation.DELETE, group_id):
            error = ErrorCode.group_authorization_failed
        elif (refused := await ctx.cluster.coordinator_error(group_id)) != ErrorCode.none:
            error = refused  # only its coordinator deletes it
        else:
            try:
                if group_id in ctx.cluster.shares.known_groups():
                    error = await ctx.cluster.shares.delete_group(group_id)
                else:
                    error = await ctx.cluster.groups.delete_group(group_id)
            except storage.StorageError as exc:  # its offsets could not be deleted (logged by the store)
                error = coordinator_storage_error_code(exc)
        results.append(make(m.DeletableGroupResult, group_id=group_id, error_code=error))
    return make(m.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=tuple(results))
