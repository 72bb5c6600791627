"""OffsetFetch: a group's committed offsets (v8+ asks for several groups at once).

Partitions without a committed offset answer -1 with no error, as Kafka
does; topics=null returns every cursor of the group across all streams,
named as Metadata names the topics.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..broker.cluster import TopicError
from ..broker.topic_names import canonical_name
from .common import NO_THROTTLE, ErrorCode, make, schema_of

# (name, [(partition, offset, leader epoch, metadata)])
TopicOffsets = list[tuple[str, list[tuple[int, int, int, str]]]]


def _requested(ctx: Any, group_id: str, topics: Any) -> TopicOffsets:
    cluster = ctx.cluster
    out: TopicOffsets = []
    for topic in topics:
        try:
            resolved = cluster.lookup(topic.name)
            cursors = cluster.groups.offsets.lookup(group_id, resolved.stream, resolved.topic)
        except TopicError:
            cursors = {}
        rows = []
        for index in topic.partition_indexes:
            c = cursors.get(index)
            rows.append((index, c.offset, c.leader_epoch, c.metadata) if c else (index, -1, -1, ""))
        out.append((topic.name, rows))
    return out


def _everything(ctx: Any, group_id: str) -> TopicOffsets:
    cluster = ctx.cluster
    by_topic: dict[str, list[tuple[int, int, int, str]]] = defaultdict(list)
    for stream, c in cluster.groups.offsets.all(group_id):
        name = canonical_name(stream, c.topic, cluster.default_stream)
        by_topic[name].append((c.partition, c.offset, c.leader_epoch, c.metadata))
    return [(name, sorted(rows)) for name, rows in sorted(by_topic.items())]


def _offsets(ctx: Any, group_id: str, topics: Any) -> TopicOffsets:
    return _everything(ctx, group_id) if topics is None else _requested(ctx, group_id, topics)


def _topics(m: Any, topic_cls: str, part_cls: str, offsets: TopicOffsets) -> tuple[Any, ...]:
    return tuple(
        make(
            getattr(m, topic_cls),
            name=name,
            partitions=tuple(
                make(
                    getattr(m, part_cls),
                    partition_index=index,
                    committed_offset=offset,
                    committed_leader_epoch=epoch,
                    metadata=metadata,
                    error_code=ErrorCode.none,
                )
                for index, offset, epoch, metadata in rows
            ),
        )
        for name, rows in offsets
    )


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    if ctx.version < 8:
        offsets = _offsets(ctx, request.group_id, request.topics)
        return make(
            m.OffsetFetchResponse,
            throttle_time=NO_THROTTLE,
            topics=_topics(m, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition", offsets),
            error_code=ErrorCode.none,
        )
    groups = []
    for group in request.groups:
        # v9: a consumer-protocol member names itself and its epoch; a stale one gets no offsets
        error = ctx.cluster.groups.consumer.validate_fetch(
            group.group_id, getattr(group, "member_id", None), getattr(group, "member_epoch", -1)
        )
        offsets = _offsets(ctx, group.group_id, group.topics) if error == ErrorCode.none else []
        groups.append(
            make(
                m.OffsetFetchResponseGroup,
                group_id=group.group_id,
                topics=_topics(m, "OffsetFetchResponseTopics", "OffsetFetchResponsePartitions", offsets),
                error_code=error,
            )
        )
    return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))
