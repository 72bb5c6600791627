"""DeleteShareGroupOffsets (KIP-932): forget an empty share group's state for whole topics.

The next member to read such a topic starts from share.auto.offset.reset again.
"""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes
from .share_offsets_common import group_refusal

# DeleteShareGroupOffsets v0
API = Api(92, (0, 0), changes())


class Reaches(Groups, Placement, Security, Settings, Topics, Protocol):
    """What of the broker this module reaches."""


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    shares = ctx.cluster.shares
    group_id = request.group_id
    refused = await group_refusal(ctx, group_id, Operation.DELETE, must_be_empty=True)
    if refused is not None:
        return make(m.DeleteShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=refused[0],
                    error_message=refused[1], responses=())
    held = shares.group_state_keys(group_id)
    responses = []
    for topic in request.topics:
        info, _ = ctx.cluster.topic_for(topic.topic_name)
        if info is None or not ctx.cluster.authorizer.known_topic(ctx, Operation.READ, info.stream, info.name):
            responses.append(make(m.DeleteShareGroupOffsetsResponseTopic, topic_name=topic.topic_name, topic_id=None,
                                  error_code=ErrorCode.unknown_topic_or_partition, error_message=None))
            continue
        shares.forget_state(group_id, [key for key in held if key[0] == info.topic_id])
        responses.append(make(m.DeleteShareGroupOffsetsResponseTopic, topic_name=topic.topic_name,
                              topic_id=info.topic_id, error_code=ErrorCode.none, error_message=None))
    await shares.flush()
    return make(m.DeleteShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                error_message=None, responses=tuple(responses))
