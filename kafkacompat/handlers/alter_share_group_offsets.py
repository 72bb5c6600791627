"""AlterShareGroupOffsets (KIP-932): set the start offset of an empty share group's share-partitions.

What was in flight is dropped: the group reads on from the new start
offset (kafka-share-groups --reset-offsets).
"""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, changes
from .share_offsets_common import group_refusal

# AlterShareGroupOffsets v0
API = Api(91, (0, 0), changes())


class Reaches(Groups, Placement, Security, Settings, Topics, Protocol):
    """What of the broker this module reaches."""


def _part(m: Any, index: int, error: ErrorCode, message: str | None = None) -> Any:
    return make(m.AlterShareGroupOffsetsResponsePartition, partition_index=index, error_code=error,
                error_message=message)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    shares = ctx.cluster.shares
    group_id = request.group_id
    refused = await group_refusal(ctx, group_id, Operation.READ, must_be_empty=True)
    if refused is not None:
        return make(m.AlterShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=refused[0],
                    error_message=refused[1], responses=())
    responses = []
    for topic in request.topics:
        info, _ = ctx.cluster.topic_for(topic.topic_name)
        if info is None or not ctx.cluster.authorizer.known_topic(ctx, Operation.READ, info.stream, info.name):
            parts = tuple(_part(m, p.partition_index, ErrorCode.unknown_topic_or_partition) for p in topic.partitions)
            responses.append(make(m.AlterShareGroupOffsetsResponseTopic, topic_name=topic.topic_name, topic_id=None,
                                  partitions=parts))
            continue
        accepted = []
        for p in topic.partitions:
            if not 0 <= p.partition_index < info.partitions:
                accepted.append(_part(m, p.partition_index, ErrorCode.unknown_topic_or_partition))
                continue
            shares.set_start_offset(group_id, info.topic_id, p.partition_index, p.start_offset)
            accepted.append(_part(m, p.partition_index, ErrorCode.none))
        responses.append(make(m.AlterShareGroupOffsetsResponseTopic, topic_name=topic.topic_name,
                              topic_id=info.topic_id, partitions=tuple(accepted)))
    await shares.flush()
    return make(m.AlterShareGroupOffsetsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
                error_message=None, responses=tuple(responses))
