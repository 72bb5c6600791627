"""OffsetFetch v1-9: a group's cursors (v8+ asks for several groups at once).

Partitions without a committed offset answer -1 with no error, as Kafka
does; topics=null returns every cursor of the group across streams under
the names this broker shows for the topics.
"""

from __future__ import annotations

from typing import Any

from ..cluster import TopicError
from .common import NO_THROTTLE, ErrorCode, make, schema_of

NO_OFFSET = (-1, -1, "")  # offset, leader epoch, metadata


def _all_offsets(ctx: Any, group_id: str) -> dict[str, dict[int, tuple[int, int, str]]]:
    cluster = ctx.cluster
    out: dict[str, dict[int, tuple[int, int, str]]] = {}
    for stored in cluster.groups.offsets.of_group(group_id):
        info = cluster.store.get_topic(stored.stream, stored.cursor.topic)
        if info is None:
            continue
        c = stored.cursor
        out.setdefault(cluster.display_name(info), {})[c.partition] = (c.offset, c.leader_epoch, c.metadata)
    return out


def _requested(ctx: Any, group_id: str, topics: Any) -> dict[str, dict[int, tuple[int, int, str]]]:
    cluster = ctx.cluster
    out: dict[str, dict[int, tuple[int, int, str]]] = {}
    for topic in topics:
        try:
            stream, name = cluster.split(topic.name)
            cursors = cluster.groups.offsets.get(group_id, stream, name)
        except TopicError:
            cursors = {}
        found = out.setdefault(topic.name, {})
        for index in topic.partition_indexes:
            c = cursors.get(index)
            found[index] = NO_OFFSET if c is None else (c.offset, c.leader_epoch, c.metadata)
    return out


def _topics(ctx: Any, group_id: str, topics: Any, topic_cls: Any, partition_cls: Any) -> tuple:
    offsets = _all_offsets(ctx, group_id) if topics is None else _requested(ctx, group_id, topics)
    return tuple(
        make(
            topic_cls,
            name=name,
            partitions=tuple(
                make(
                    partition_cls, partition_index=index, committed_offset=offset,
                    committed_leader_epoch=epoch, metadata=metadata, error_code=ErrorCode.none,
                )
                for index, (offset, epoch, metadata) in sorted(parts.items())
            ),
        )
        for name, parts in sorted(offsets.items()) if topics is not None or parts
    )


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    if ctx.version >= 8:
        groups = tuple(
            make(
                m.OffsetFetchResponseGroup,
                group_id=g.group_id,
                topics=_topics(ctx, g.group_id, g.topics, m.OffsetFetchResponseTopics,
                               m.OffsetFetchResponsePartitions),
                error_code=ErrorCode.none,
            )
            for g in request.groups
        )
        return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=groups)
    topics = _topics(ctx, request.group_id, request.topics, m.OffsetFetchResponseTopic,
                     m.OffsetFetchResponsePartition)
    return make(m.OffsetFetchResponse, throttle_time=NO_THROTTLE, topics=topics, error_code=ErrorCode.none)
