"""DescribeShareGroupOffsets (KIP-932): the share-partition start offset (SPSO) of each partition a group reads."""

from __future__ import annotations

from typing import Any, Protocol

from ..security.acls import Operation
from ..services import Groups, Placement, Request, Security, Settings, Topics
from .common import NO_THROTTLE, ErrorCode, make, schema_of
from .registry import Api, reads
from .share_offsets_common import group_refusal

# DescribeShareGroupOffsets v0
API = Api(90, (0, 0), reads())


class Reaches(Groups, Placement, Security, Settings, Topics, Protocol):
    """What of the broker this module reaches."""


def _partition(m: Any, index: int, start_offset: int, error: ErrorCode = ErrorCode.none) -> Any:
    return make(m.DescribeShareGroupOffsetsResponsePartition, partition_index=index, start_offset=start_offset,
                leader_epoch=-1, error_code=error, error_message=None)


async def _group(ctx: Request[Reaches], m: Any, request_group: Any) -> Any:
    shares = ctx.cluster.shares
    group_id = request_group.group_id
    refused = await group_refusal(ctx, group_id, Operation.DESCRIBE, must_be_empty=False)
    if refused is not None:
        return make(m.DescribeShareGroupOffsetsResponseGroup, group_id=group_id, topics=(),
                    error_code=refused[0], error_message=refused[1])
    wanted: list[tuple[str, Any, list[int]]] = []  # (name, topic info or None, partitions)
    if request_group.topics is None:
        by_topic: dict[Any, list[int]] = {}
        for topic_id, index in shares.group_state_keys(group_id):
            by_topic.setdefault(topic_id, []).append(index)
        for topic_id, indexes in by_topic.items():
            info = ctx.cluster.by_id(topic_id)
            if info is not None:
                wanted.append((ctx.cluster.display_name(info, ctx.client_software_name), info, indexes))
    else:
        for topic in request_group.topics:
            info, _ = ctx.cluster.topic_for(topic.topic_name)
            wanted.append((topic.topic_name, info, list(topic.partitions)))
    topics = []
    for name, info, indexes in sorted(wanted, key=lambda w: w[0]):
        if info is None or not ctx.cluster.authorizer.known_topic(ctx, Operation.DESCRIBE, info.stream, info.name):
            parts = tuple(_partition(m, i, -1, ErrorCode.unknown_topic_or_partition) for i in indexes)
            listed_id = None
        else:
            listed_id = info.topic_id
            parts = tuple(
                _partition(m, i, -1, ErrorCode.unknown_topic_or_partition) if not 0 <= i < info.partitions else
                _partition(m, i, -1 if (start := shares.start_offset(group_id, info.topic_id, i)) is None else start)
                for i in sorted(indexes))
        topics.append(make(m.DescribeShareGroupOffsetsResponseTopic, topic_name=name, topic_id=listed_id,
                           partitions=parts))
    return make(m.DescribeShareGroupOffsetsResponseGroup, group_id=group_id, topics=tuple(topics),
                error_code=ErrorCode.none, error_message=None)


async def handle(ctx: Request[Reaches], request: Any) -> Any:
    m = schema_of(ctx)
    return make(m.DescribeShareGroupOffsetsResponse, throttle_time=NO_THROTTLE,
                groups=tuple([await _group(ctx, m, g) for g in request.groups]))
