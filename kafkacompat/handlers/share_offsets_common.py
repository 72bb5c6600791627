"""What the share-group offset APIs share: which groups they may act on."""

from __future__ import annotations

from typing import Protocol

from ..broker.features import SHARE_VERSION
from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings
from .common import ErrorCode


class Reaches(Groups, Placement, Security, Settings, Protocol):
    """What of the broker this module reaches."""


async def group_refusal(ctx: Request[Reaches], group_id: str, operation: Operation,
                  must_be_empty: bool) -> tuple[ErrorCode, str | None] | None:
    """The share group protocol off, the ACL, the coordinator, a group that is not a share group
    (or, to change offsets, one with members)."""
    shares = ctx.cluster.shares
    if ctx.cluster.features.level(SHARE_VERSION) < 1:
        return ErrorCode.unsupported_version, "The share group protocol is not enabled."
    if not ctx.cluster.authorizer.group(ctx, operation, group_id):
        return ErrorCode.group_authorization_failed, None
    coordinator = await ctx.cluster.coordinator_error(group_id)
    if coordinator is not ErrorCode.none:
        return coordinator, None
    if group_id not in shares.known_groups():
        if shares.is_other_group(group_id):
            return ErrorCode.group_id_not_found, f"Group {group_id} is not a share group."
        return ErrorCode.group_id_not_found, f"Group {group_id} not found."
    if must_be_empty and not shares.is_empty(group_id):
        return ErrorCode.non_empty_group, "The group is not empty."
    return None
