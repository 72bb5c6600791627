"""OffsetCommit v2-9: committed offsets become cursors in each topic's stream.

As on Kafka: partitions of unknown topics answer UNKNOWN_TOPIC_OR_PARTITION;
the group check (member, generation, state) applies to the rest; a simple
consumer (generation -1, no member id) may commit for an empty group.
"""

from __future__ import annotations

import logging
from typing import Any

import storage
from storage import Cursor

from ..cluster import TopicError
from .common import NO_THROTTLE, ErrorCode, make, schema_of

log = logging.getLogger(__name__)


async def handle(ctx: Any, request: Any) -> Any:
    m = schema_of(ctx)
    cluster = ctx.cluster
    coordinator = cluster.groups
    group_id = request.group_id
    errors: dict[tuple[str, int], ErrorCode] = {}
    known: list[tuple[str, str, str, Any]] = []  # (request name, stream, topic, partition request)
    for topic in request.topics:
        try:
            resolved = cluster.lookup(topic.name)
        except TopicError:
            resolved = None
        for part in topic.partitions:
            index = part.partition_index
            if resolved is None or resolved.info is None or not 0 <= index < resolved.info.partitions:
                errors[(topic.name, index)] = ErrorCode.unknown_topic_or_partition
            else:
                known.append((topic.name, resolved.stream, resolved.topic, part))
    if known:
        group_error = coordinator.validate_commit(
            group_id, request.generation_id_or_member_epoch, request.member_id,
            getattr(request, "group_instance_id", None),
        )
        by_stream: dict[str, list[Cursor]] = {}
        stored: list[tuple[str, int]] = []
        for name, stream, topic, part in known:
            key = (name, part.partition_index)
            metadata = part.committed_metadata or ""
            if group_error != ErrorCode.none:
                errors[key] = group_error
            elif len(metadata) > cluster.config.offset_metadata_max_bytes:
                errors[key] = ErrorCode.offset_metadata_too_large
            else:
                by_stream.setdefault(stream, []).append(
                    Cursor(
                        topic=topic,
                        partition=part.partition_index,
                        offset=part.committed_offset,
                        leader_epoch=getattr(part, "committed_leader_epoch", -1),
                        metadata=metadata,
                    )
                )
                stored.append(key)
        try:
            await coordinator.offsets.commit(group_id, by_stream)
            outcome = ErrorCode.none
        except storage.StorageError as exc:
            log.warning("group %s: storing offsets failed: %s", group_id, exc)
            outcome = ErrorCode.coordinator_not_available  # retriable, as Kafka maps log append failures
        for key in stored:
            errors[key] = outcome
    topics = []
    for topic in request.topics:
        parts = tuple(
            make(m.OffsetCommitResponsePartition, partition_index=p.partition_index,
                 error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions
        )
        topics.append(make(m.OffsetCommitResponseTopic, name=topic.name, partitions=parts))
    return make(m.OffsetCommitResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))
